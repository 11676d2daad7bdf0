/* Size expressions with eager simplification.
 *
 * Sums are kept in a normal form: a list of (coefficient, atom) terms in a
 * canonical atom order plus a constant, where an atom is a parameter, a
 * variable or a non-affine node (floor division, modulo, min, max) compared
 * structurally.  So "min(M,N) - min(M,N) + 1" folds to 1 and equal extents
 * written differently compare equal. */
#include "sexpr.h"

#include <string.h>

#define MAX_TERMS 32

typedef struct term {
	int64_t coef;
	const tc_sexpr *atom;
} term;

typedef struct aff {
	int64_t c;
	int n;
	int overflow; /* a coefficient overflowed or too many terms */
	int many; /* too many terms (no overflow of a value) */
	term t[MAX_TERMS];
} aff;

static int cmp(const tc_sexpr *a, const tc_sexpr *b)
{
	int r;
	if (a == b)
		return 0;
	if (!a || !b) /* NULL (out of memory) sorts first */
		return !a ? -1 : 1;
	if (a->kind != b->kind)
		return a->kind < b->kind ? -1 : 1;
	switch (a->kind) {
	case TC_SX_CONST:
		return a->c < b->c ? -1 : a->c > b->c;
	case TC_SX_PARAM:
	case TC_SX_VAR:
		return a->id < b->id ? -1 : a->id > b->id;
	default:
		if (a->c != b->c)
			return a->c < b->c ? -1 : 1;
		if ((r = cmp(a->a, b->a)))
			return r;
		if (!a->b || !b->b)
			return !!a->b - !!b->b;
		return cmp(a->b, b->b);
	}
}

int tc_sx_equal(__tc_keep const tc_sexpr *a, __tc_keep const tc_sexpr *b)
{
	return cmp(a, b) == 0;
}

static void aff_add_term(aff *f, int64_t coef, const tc_sexpr *atom)
{
	int i, j;
	for (i = 0; i < f->n; i++) {
		int r = cmp(atom, f->t[i].atom);
		if (r == 0) {
			if (__builtin_add_overflow(f->t[i].coef, coef, &f->t[i].coef))
				f->overflow = 1;
			if (f->t[i].coef == 0) {
				memmove(&f->t[i], &f->t[i + 1], (size_t)(f->n - i - 1) * sizeof(term));
				f->n--;
			}
			return;
		}
		if (r < 0)
			break;
	}
	if (coef == 0)
		return;
	if (f->n == MAX_TERMS) {
		f->overflow = f->many = 1;
		return;
	}
	for (j = f->n; j > i; j--)
		f->t[j] = f->t[j - 1];
	f->t[i].coef = coef;
	f->t[i].atom = atom;
	f->n++;
}

/* Add k * e to f. */
static void to_aff(const tc_sexpr *e, int64_t k, aff *f)
{
	int64_t v;
	if (!e) {
		f->overflow = 1;
		return;
	}
	switch (e->kind) {
	case TC_SX_CONST:
		if (__builtin_mul_overflow(e->c, k, &v) ||
			__builtin_add_overflow(f->c, v, &f->c))
			f->overflow = 1;
		break;
	case TC_SX_ADD:
		to_aff(e->a, k, f);
		to_aff(e->b, k, f);
		break;
	case TC_SX_MUL:
		if (__builtin_mul_overflow(e->c, k, &v))
			f->overflow = 1;
		else
			to_aff(e->a, v, f);
		break;
	default:
		aff_add_term(f, k, e);
	}
}

static const tc_sexpr *mk(tc_arena *ar, tc_sx_kind kind, int64_t c, int id,
	const tc_sexpr *a, const tc_sexpr *b)
{
	tc_sexpr *e = tc_arena_alloc(ar, sizeof(*e));
	if (!e)
		return NULL;
	e->kind = kind;
	e->c = c;
	e->id = id;
	e->a = a;
	e->b = b;
	return e;
}

static const tc_sexpr *from_aff(tc_arena *ar, const aff *f)
{
	const tc_sexpr *r = NULL;
	int i;
	for (i = 0; i < f->n; i++) {
		const tc_sexpr *t = f->t[i].coef == 1 ? f->t[i].atom
			: mk(ar, TC_SX_MUL, f->t[i].coef, 0, f->t[i].atom, NULL);
		if (!t)
			return NULL;
		r = r ? mk(ar, TC_SX_ADD, 0, 0, r, t) : t;
		if (!r)
			return NULL;
	}
	if (!r)
		return mk(ar, TC_SX_CONST, f->c, 0, NULL, NULL);
	if (f->c)
		r = mk(ar, TC_SX_ADD, 0, 0, r, mk(ar, TC_SX_CONST, f->c, 0, NULL, NULL));
	return r;
}

const tc_sexpr *tc_sx_const(__tc_keep tc_arena *ar, int64_t c)
{
	return mk(ar, TC_SX_CONST, c, 0, NULL, NULL);
}

const tc_sexpr *tc_sx_param(__tc_keep tc_arena *ar, int id)
{
	return mk(ar, TC_SX_PARAM, 0, id, NULL, NULL);
}

const tc_sexpr *tc_sx_var(__tc_keep tc_arena *ar, int id)
{
	return mk(ar, TC_SX_VAR, 0, id, NULL, NULL);
}

/* Normalise k1*a + k2*b; fall back to a plain node if the form overflows. */
static const tc_sexpr *lin2(tc_arena *ar, int64_t k1, const tc_sexpr *a,
	int64_t k2, const tc_sexpr *b)
{
	aff f;
	if (!a || (k2 && !b))
		return NULL;
	memset(&f, 0, sizeof(f));
	to_aff(a, k1, &f);
	if (k2)
		to_aff(b, k2, &f);
	if (f.overflow) {
		const tc_sexpr *x = k1 == 1 ? a : mk(ar, TC_SX_MUL, k1, 0, a, NULL);
		const tc_sexpr *y = !k2 ? NULL : k2 == 1 ? b : mk(ar, TC_SX_MUL, k2, 0, b, NULL);
		return y ? mk(ar, TC_SX_ADD, 0, 0, x, y) : x;
	}
	return from_aff(ar, &f);
}

const tc_sexpr *tc_sx_add(__tc_keep tc_arena *ar, __tc_keep const tc_sexpr *a,
	__tc_keep const tc_sexpr *b)
{
	return lin2(ar, 1, a, 1, b);
}

const tc_sexpr *tc_sx_sub(__tc_keep tc_arena *ar, __tc_keep const tc_sexpr *a,
	__tc_keep const tc_sexpr *b)
{
	return lin2(ar, 1, a, -1, b);
}

const tc_sexpr *tc_sx_scale(__tc_keep tc_arena *ar, int64_t c, __tc_keep const tc_sexpr *a)
{
	return lin2(ar, c, a, 0, NULL);
}

static int64_t fdiv(int64_t a, int64_t b)
{
	int64_t q = a / b;
	return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static int64_t fmod_(int64_t a, int64_t b)
{
	int64_t r = a % b;
	return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

/* Whether every coefficient of a is divisible by c (then a/c is exact up to
 * the constant). */
static int divisible(const tc_sexpr *a, int64_t c, aff *f)
{
	int i;
	memset(f, 0, sizeof(*f));
	to_aff(a, 1, f);
	if (f->overflow)
		return 0;
	for (i = 0; i < f->n; i++)
		if (f->t[i].coef % c)
			return 0;
	return 1;
}

const tc_sexpr *tc_sx_floordiv(__tc_keep tc_arena *ar, __tc_keep const tc_sexpr *a, int64_t c)
{
	aff f;
	int i;
	if (!a || c <= 0)
		return NULL;
	if (c == 1)
		return a;
	if (divisible(a, c, &f)) {
		for (i = 0; i < f.n; i++)
			f.t[i].coef /= c;
		f.c = fdiv(f.c, c);
		return from_aff(ar, &f);
	}
	if (!f.overflow && (f.c < 0 || f.c >= c)) {
		/* floor((x + q*c + r) / c) = floor((x + r) / c) + q, 0 <= r < c */
		int64_t q = fdiv(f.c, c);
		f.c = fmod_(f.c, c); /* f.c - q*c, which q*c could overflow near INT64_MIN */
		return tc_sx_add(ar, mk(ar, TC_SX_FLOORDIV, c, 0, from_aff(ar, &f), NULL),
			tc_sx_const(ar, q));
	}
	return mk(ar, TC_SX_FLOORDIV, c, 0, a, NULL);
}

const tc_sexpr *tc_sx_ceildiv(__tc_keep tc_arena *ar, __tc_keep const tc_sexpr *a, int64_t c)
{
	return tc_sx_scale(ar, -1, tc_sx_floordiv(ar, tc_sx_scale(ar, -1, a), c));
}

const tc_sexpr *tc_sx_mod(__tc_keep tc_arena *ar, __tc_keep const tc_sexpr *a, int64_t c)
{
	aff f;
	if (!a || c <= 0)
		return NULL;
	if (c == 1)
		return tc_sx_const(ar, 0);
	if (divisible(a, c, &f))
		return tc_sx_const(ar, fmod_(f.c, c));
	return mk(ar, TC_SX_MOD, c, 0, a, NULL);
}

static const tc_sexpr *minmax(tc_arena *ar, tc_sx_kind kind, const tc_sexpr *a,
	const tc_sexpr *b)
{
	int64_t d;
	if (!a || !b)
		return NULL;
	if (tc_sx_const_diff(a, b, &d))
		return (kind == TC_SX_MIN) == (d <= 0) ? a : b;
	/* decided by the sizes being at least 1: max(0, -N) is 0 */
	switch (tc_sx_sign(tc_sx_sub(ar, a, b))) {
	case 1: return kind == TC_SX_MIN ? b : a;
	case -1: return kind == TC_SX_MIN ? a : b;
	default: break;
	}
	if (cmp(a, b) > 0) {
		const tc_sexpr *t = a;
		a = b;
		b = t;
	}
	return mk(ar, kind, 0, 0, a, b);
}

const tc_sexpr *tc_sx_min(__tc_keep tc_arena *ar, __tc_keep const tc_sexpr *a,
	__tc_keep const tc_sexpr *b)
{
	return minmax(ar, TC_SX_MIN, a, b);
}

const tc_sexpr *tc_sx_max(__tc_keep tc_arena *ar, __tc_keep const tc_sexpr *a,
	__tc_keep const tc_sexpr *b)
{
	return minmax(ar, TC_SX_MAX, a, b);
}

int tc_sx_is_const(__tc_keep const tc_sexpr *e, int64_t *c)
{
	if (!e || e->kind != TC_SX_CONST)
		return 0;
	if (c)
		*c = e->c;
	return 1;
}

int tc_sx_const_diff(__tc_keep const tc_sexpr *a, __tc_keep const tc_sexpr *b, int64_t *d)
{
	aff f;
	memset(&f, 0, sizeof(f));
	to_aff(a, 1, &f);
	to_aff(b, -1, &f);
	if (f.overflow || f.n)
		return 0;
	*d = f.c;
	return 1;
}

int tc_sx_has_var(__tc_keep const tc_sexpr *e)
{
	if (!e)
		return 0;
	if (e->kind == TC_SX_VAR)
		return 1;
	return tc_sx_has_var(e->a) || tc_sx_has_var(e->b);
}

int tc_sx_mentions(__tc_keep const tc_sexpr *e, tc_sx_kind kind, int id)
{
	if (!e)
		return 0;
	if (e->kind == kind)
		return e->id == id;
	return tc_sx_mentions(e->a, kind, id) || tc_sx_mentions(e->b, kind, id);
}

tc_stat tc_sx_eval(__tc_keep const tc_sexpr *e, __tc_keep const int64_t *params,
	__tc_keep const int64_t *vars, int64_t *out)
{
	int64_t a, b = 0; /* b: only binary kinds read it (GCC -O3 cannot see that) */
	if (!e)
		return TC_ERR;
	switch (e->kind) {
	case TC_SX_CONST: *out = e->c; return TC_OK;
	case TC_SX_PARAM: *out = params[e->id]; return TC_OK;
	case TC_SX_VAR:
		if (!vars)
			return TC_ERR;
		*out = vars[e->id];
		return TC_OK;
	default: break;
	}
	if (tc_sx_eval(e->a, params, vars, &a) < 0)
		return TC_ERR;
	if (e->b && tc_sx_eval(e->b, params, vars, &b) < 0)
		return TC_ERR;
	switch (e->kind) {
	case TC_SX_ADD: return __builtin_add_overflow(a, b, out) ? TC_ERR : TC_OK;
	case TC_SX_MUL: return __builtin_mul_overflow(e->c, a, out) ? TC_ERR : TC_OK;
	case TC_SX_FLOORDIV: *out = fdiv(a, e->c); return TC_OK;
	case TC_SX_MOD: *out = fmod_(a, e->c); return TC_OK;
	case TC_SX_MIN: *out = a < b ? a : b; return TC_OK;
	case TC_SX_MAX: *out = a > b ? a : b; return TC_OK;
	default: return TC_ERR;
	}
}

static void print_atom(const tc_sexpr *e, const char *const *params,
	const char *const *vars, tc_buf *b, int paren);

/* Print a sum as "A - 2*B + 1". */
static void print_sum(const tc_sexpr *e, const char *const *params,
	const char *const *vars, tc_buf *b)
{
	aff f;
	int i, pass, first;
	memset(&f, 0, sizeof(f));
	to_aff(e, 1, &f);
	if (f.overflow) { /* no normal form: print the tree as it is */
		if (!e) {
			b->oom = 1;
		} else if (e->kind == TC_SX_ADD) {
			print_sum(e->a, params, vars, b);
			tc_buf_puts(b, " + ");
			print_sum(e->b, params, vars, b);
		} else if (e->kind == TC_SX_MUL) {
			tc_buf_printf(b, "%lld*", (long long)e->c);
			print_atom(e->a, params, vars, b, 1);
		} else {
			print_atom(e, params, vars, b, 0);
		}
		return;
	}
	/* positive terms first: "M - N", not "-N + M"; "1 - N", not "-N + 1" */
	first = 1;
	for (i = 0; i < f.n && f.t[i].coef < 0; i++)
		;
	if (i == f.n && f.n && f.c > 0) {
		tc_buf_printf(b, "%lld", (long long)f.c);
		f.c = 0;
		first = 0;
	}
	for (pass = 0; pass < 2; pass++)
		for (i = 0; i < f.n; i++) {
			int64_t k = f.t[i].coef;
			if ((k < 0) != pass)
				continue;
			if (!first)
				tc_buf_puts(b, k < 0 ? " - " : " + ");
			else if (k < 0)
				tc_buf_putc(b, '-');
			first = 0;
			if (k != 1 && k != -1)
				tc_buf_printf(b, "%lld*", (long long)(k < 0 ? -k : k));
			print_atom(f.t[i].atom, params, vars, b, 1);
		}
	if (f.n && f.c)
		tc_buf_printf(b, " %c %lld", f.c < 0 ? '-' : '+',
			(long long)(f.c < 0 ? -f.c : f.c));
	else if (!f.n)
		tc_buf_printf(b, "%lld", (long long)f.c);
}

static void print_atom(const tc_sexpr *e, const char *const *params,
	const char *const *vars, tc_buf *b, int paren)
{
	if (!e) {
		b->oom = 1;
		return;
	}
	switch (e->kind) {
	case TC_SX_CONST: tc_buf_printf(b, "%lld", (long long)e->c); break;
	case TC_SX_PARAM:
		if (params)
			tc_buf_puts(b, params[e->id]);
		else
			tc_buf_printf(b, "p%d", e->id);
		break;
	case TC_SX_VAR:
		if (vars)
			tc_buf_puts(b, vars[e->id]);
		else
			tc_buf_printf(b, "v%d", e->id);
		break;
	case TC_SX_ADD:
	case TC_SX_MUL:
		if (paren)
			tc_buf_putc(b, '(');
		print_sum(e, params, vars, b);
		if (paren)
			tc_buf_putc(b, ')');
		break;
	case TC_SX_FLOORDIV:
	case TC_SX_MOD:
		tc_buf_puts(b, e->kind == TC_SX_FLOORDIV ? "floor(" : "mod(");
		print_atom(e->a, params, vars, b, e->kind == TC_SX_FLOORDIV);
		tc_buf_printf(b, e->kind == TC_SX_FLOORDIV ? " / %lld)" : ", %lld)",
			(long long)e->c);
		break;
	case TC_SX_MIN:
	case TC_SX_MAX:
		tc_buf_puts(b, e->kind == TC_SX_MIN ? "min(" : "max(");
		print_sum(e->a, params, vars, b);
		tc_buf_puts(b, ", ");
		print_sum(e->b, params, vars, b);
		tc_buf_putc(b, ')');
		break;
	}
}

void tc_sx_print(__tc_keep const tc_sexpr *e, __tc_keep const char *const *params,
	__tc_keep const char *const *vars, __tc_keep tc_buf *b)
{
	if (!e) {
		b->oom = 1; /* only NULL after an allocation failed */
		return;
	}
	print_sum(e, params, vars, b);
}

/* Bounds of e when every parameter is from 1 to TC_SX_SIZE_MAX: *lo / *hi
 * with flags saying whether each is known. */
typedef struct bnd {
	int has_lo, has_hi;
	int64_t lo, hi;
} bnd;

static bnd bounds(const tc_sexpr *e)
{
	bnd r = {0, 0, 0, 0}, a, b;
	if (!e)
		return r;
	switch (e->kind) {
	case TC_SX_CONST:
		r.has_lo = r.has_hi = 1;
		r.lo = r.hi = e->c;
		return r;
	case TC_SX_PARAM:
		r.has_lo = r.has_hi = 1;
		r.lo = 1;
		r.hi = TC_SX_SIZE_MAX;
		return r;
	case TC_SX_VAR:
		return r;
	case TC_SX_ADD:
		a = bounds(e->a);
		b = bounds(e->b);
		r.has_lo = a.has_lo && b.has_lo && !__builtin_add_overflow(a.lo, b.lo, &r.lo);
		r.has_hi = a.has_hi && b.has_hi && !__builtin_add_overflow(a.hi, b.hi, &r.hi);
		return r;
	case TC_SX_MUL:
		a = bounds(e->a);
		if (e->c >= 0) {
			r.has_lo = a.has_lo && !__builtin_mul_overflow(e->c, a.lo, &r.lo);
			r.has_hi = a.has_hi && !__builtin_mul_overflow(e->c, a.hi, &r.hi);
		} else {
			r.has_lo = a.has_hi && !__builtin_mul_overflow(e->c, a.hi, &r.lo);
			r.has_hi = a.has_lo && !__builtin_mul_overflow(e->c, a.lo, &r.hi);
		}
		return r;
	case TC_SX_FLOORDIV: /* monotone in a */
		a = bounds(e->a);
		r.has_lo = a.has_lo;
		r.lo = a.has_lo ? fdiv(a.lo, e->c) : 0;
		r.has_hi = a.has_hi;
		r.hi = a.has_hi ? fdiv(a.hi, e->c) : 0;
		return r;
	case TC_SX_MOD:
		r.has_lo = r.has_hi = 1;
		r.lo = 0;
		r.hi = e->c - 1;
		return r;
	case TC_SX_MIN:
	case TC_SX_MAX:
		a = bounds(e->a);
		b = bounds(e->b);
		if (e->kind == TC_SX_MIN) { /* lo needs both; hi needs either */
			r.has_lo = a.has_lo && b.has_lo;
			r.lo = a.lo < b.lo ? a.lo : b.lo;
			r.has_hi = a.has_hi || b.has_hi;
			r.hi = !a.has_hi ? b.hi : !b.has_hi ? a.hi : a.hi < b.hi ? a.hi : b.hi;
		} else {
			r.has_hi = a.has_hi && b.has_hi;
			r.hi = a.hi > b.hi ? a.hi : b.hi;
			r.has_lo = a.has_lo || b.has_lo;
			r.lo = !a.has_lo ? b.lo : !b.has_lo ? a.lo : a.lo > b.lo ? a.lo : b.lo;
		}
		return r;
	}
	return r;
}

/* A lower bound of a normal form, bounding each atom separately. */
static int aff_lower(const aff *f, int64_t *lb)
{
	int64_t v = f->c, t;
	int i;
	for (i = 0; i < f->n; i++) {
		bnd b = bounds(f->t[i].atom);
		int64_t k = f->t[i].coef;
		if (k > 0 ? !b.has_lo : !b.has_hi)
			return 0;
		if (__builtin_mul_overflow(k, k > 0 ? b.lo : b.hi, &t) ||
			__builtin_add_overflow(v, t, &v))
			return 0;
	}
	*lb = v;
	return 1;
}

/* Whether f with its term i replaced by coef * x has a lower bound of 0
 * or more. */
static int nonneg_replaced(const aff *f, int i, const tc_sexpr *x, int64_t coef)
{
	aff g;
	int64_t lb;
	int j;
	memset(&g, 0, sizeof(g));
	g.c = f->c;
	for (j = 0; j < f->n; j++)
		if (j != i)
			aff_add_term(&g, f->t[j].coef, f->t[j].atom);
	to_aff(x, coef, &g);
	return !g.overflow && aff_lower(&g, &lb) && lb >= 0;
}

/* e >= 0 by a term that is at least something simpler:
 *   - by cases: -min(b, c) >= -b and max(b, c) >= b, so e >= 0 when e with
 *     such a term replaced by one operand is (N - min(N, M) >= 0);
 *   - by a floor division's remainder: a term -k * c * floor(a / c) (k >=
 *     1) is -k * a plus k times the remainder a - c * floor(a / c), which is
 *     at least 0, so e >= 0 when e with that term replaced by -k * a is
 *     (H - KH - 2 * floor((H - KH) / 2) >= 0: the last row a stride-2
 *     window of KH rows reads, 2 * floor((H - KH) / 2) + KH - 1, is below
 *     H). */
static int nonneg_by_terms(const tc_sexpr *e)
{
	aff f;
	int i;
	memset(&f, 0, sizeof(f));
	to_aff(e, 1, &f);
	if (f.overflow)
		return 0;
	for (i = 0; i < f.n; i++) {
		const tc_sexpr *a = f.t[i].atom;
		int64_t k = f.t[i].coef;
		if (((a->kind == TC_SX_MIN && k < 0) || (a->kind == TC_SX_MAX && k > 0)) &&
			(nonneg_replaced(&f, i, a->a, k) || nonneg_replaced(&f, i, a->b, k)))
			return 1;
		if (a->kind == TC_SX_FLOORDIV && k < 0 && k % a->c == 0 &&
			nonneg_replaced(&f, i, a->a, k / a->c))
			return 1;
	}
	return 0;
}

int tc_sx_overflows(__tc_keep const tc_sexpr *e)
{
	aff f;
	int i;
	if (!e)
		return 0;
	switch (e->kind) {
	case TC_SX_CONST:
	case TC_SX_PARAM:
	case TC_SX_VAR:
		return 0;
	case TC_SX_ADD:
	case TC_SX_MUL: /* an unfolded sum overflows again when refolded */
		memset(&f, 0, sizeof(f));
		to_aff(e, 1, &f);
		if (f.overflow && !f.many)
			return 1;
		for (i = 0; i < f.n; i++)
			if (tc_sx_overflows(f.t[i].atom))
				return 1;
		return 0;
	default:
		return tc_sx_overflows(e->a) || tc_sx_overflows(e->b);
	}
}

int tc_sx_sign(__tc_keep const tc_sexpr *e)
{
	bnd b = bounds(e);
	if (b.has_lo && b.lo >= 0)
		return 1;
	if (e && nonneg_by_terms(e))
		return 1;
	if (b.has_hi && b.hi < 0)
		return -1;
	return 0;
}
