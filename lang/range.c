/* Range inference (docs/language.md, "Range inference").
 *
 * Every read T(e0, ..., ek) gives constraints 0 <= e_d < ext_d.  A subscript
 * that is affine in the index variables, a*v + sum(c_w * w) + rest with rest
 * over sizes, can solve v once the other variables have ranges.  In rounds,
 * each unsolved variable that is the only unknown of some constraints gets
 * the intersection of the intervals they allow, for all values of the solved
 * variables; where-ranges are fixed before the first round.  Constraints come
 * in three kinds, tried in order in each round: reads that are always
 * evaluated, then the left-hand side of a tensor that already has a shape,
 * then reads inside a branch of ?: (TC's rule: they bound like any other
 * read, but here only an index that nothing else bounds, so a where range or
 * an unguarded read keeps the say).  Conditions that are left over and
 * cannot be proven become run-time checks on the sizes, except those of
 * reads under ?:, which the generated code checks where the branch runs. */
#include "range.h"

#include <string.h>

/* An integer expression as sum(coef[v] * v) + rest. */
typedef struct lin {
	int ok; /* affine in the variables with a representable rest */
	const tc_sexpr *rest;
	int64_t *coef;
} lin;

/* The kinds of constraints, in the order rounds try them. */
enum { CONS_READ, CONS_LHS, CONS_GUARDED, CONS_NKINDS };

typedef struct cons {
	lin l;
	const tc_sexpr *ext; /* 0 <= l < ext */
	const tc_expr *read; /* NULL for the left-hand side */
	int tensor, dim;
	int kind; /* CONS_READ, CONS_LHS or CONS_GUARDED: the order they are tried in */
	int used; /* solved a variable (holds by construction) */
} cons;

typedef struct rctx {
	tc_arena *ar;
	tc_diags *d;
	const tc_def *def;
	tc_tensor_info *const *tensors;
	tc_stmt *s;
	int nv;
	tc_vec cons; /* cons * */
	int *solved;
	int *fixed; /* by a where clause */
	int *by_guarded; /* solved from reads under ?: (for messages) */
	/* where each variable occurs, for messages */
	int *in_affine, *in_nonaffine;
	int *let_walked;
} rctx;

const tc_sexpr *tc_range_sexpr(__tc_keep tc_arena *ar, __tc_keep const tc_expr *e)
{
	const tc_sexpr *a, *b;
	int64_t c;

	switch (e->kind) {
	case TC_AST_INT:
		return tc_sx_const(ar, e->ival);
	case TC_AST_IDENT:
		return e->ref == TC_REF_SIZE ? tc_sx_param(ar, e->ref_id) : NULL;
	case TC_AST_CAST:
		return tc_dtype_is_int(e->cast_type) ? tc_range_sexpr(ar, e->args[0]) : NULL;
	case TC_AST_UNARY:
		if (e->op != TC_AOP_NEG)
			return NULL;
		return tc_sx_scale(ar, -1, tc_range_sexpr(ar, e->args[0]));
	case TC_AST_CALL:
		if (e->ref != TC_REF_BUILTIN || (e->ref_id != TC_BI_MIN && e->ref_id != TC_BI_MAX))
			return NULL;
		a = tc_range_sexpr(ar, e->args[0]);
		b = tc_range_sexpr(ar, e->args[1]);
		if (!a || !b)
			return NULL;
		return e->ref_id == TC_BI_MIN ? tc_sx_min(ar, a, b) : tc_sx_max(ar, a, b);
	case TC_AST_BINARY:
		a = tc_range_sexpr(ar, e->args[0]);
		b = tc_range_sexpr(ar, e->args[1]);
		if (!a || !b)
			return NULL;
		switch (e->op) {
		case TC_AOP_ADD: return tc_sx_add(ar, a, b);
		case TC_AOP_SUB: return tc_sx_sub(ar, a, b);
		case TC_AOP_MUL:
			if (tc_sx_is_const(a, &c))
				return tc_sx_scale(ar, c, b);
			if (tc_sx_is_const(b, &c))
				return tc_sx_scale(ar, c, a);
			return NULL;
		case TC_AOP_DIV:
			return tc_sx_is_const(b, &c) && c > 0 ? tc_sx_floordiv(ar, a, c) : NULL;
		case TC_AOP_MOD:
			return tc_sx_is_const(b, &c) && c > 0 ? tc_sx_mod(ar, a, c) : NULL;
		default: return NULL;
		}
	default:
		return NULL;
	}
}

static int lin_alloc(rctx *R, lin *l)
{
	l->coef = tc_arena_alloc(R->ar, (size_t)(R->nv + 1) * sizeof(int64_t));
	l->rest = tc_sx_const(R->ar, 0);
	l->ok = 1;
	return l->coef && l->rest ? 0 : -1;
}

static int lin_has_vars(const rctx *R, const lin *l)
{
	int v;
	for (v = 0; v < R->nv; v++)
		if (l->coef[v])
			return 1;
	return 0;
}

/* out = a + k * b */
static void lin_axpy(rctx *R, lin *out, const lin *a, int64_t k, const lin *b)
{
	int v;
	for (v = 0; v < R->nv; v++)
		if (__builtin_mul_overflow(k, b->coef[v], &out->coef[v]) ||
			__builtin_add_overflow(out->coef[v], a->coef[v], &out->coef[v]))
			out->ok = 0;
	out->rest = tc_sx_add(R->ar, a->rest, tc_sx_scale(R->ar, k, b->rest));
	out->ok = out->ok && a->ok && b->ok && out->rest;
}

/* Mark the variables mentioned anywhere in e (for messages). */
static void mark_vars(rctx *R, const tc_expr *e, int *flags)
{
	int i;
	if (e->kind == TC_AST_IDENT && e->ref == TC_REF_INDEX)
		flags[e->ref_id] = 1;
	if (e->kind == TC_AST_IDENT && e->ref == TC_REF_LET)
		mark_vars(R, R->s->where[e->ref_id].val, flags);
	for (i = 0; i < e->nargs; i++)
		mark_vars(R, e->args[i], flags);
}

/* The linear form of an integer subscript. */
static int lin_of(rctx *R, const tc_expr *e, lin *out)
{
	lin a, b;
	int64_t c;

	if (lin_alloc(R, out) < 0)
		return -1;
	switch (e->kind) {
	case TC_AST_INT:
		out->rest = tc_sx_const(R->ar, e->ival);
		return 0;
	case TC_AST_IDENT:
		if (e->ref == TC_REF_INDEX) {
			out->coef[e->ref_id] = 1;
			return 0;
		}
		if (e->ref == TC_REF_SIZE) {
			out->rest = tc_sx_param(R->ar, e->ref_id);
			return 0;
		}
		if (e->ref == TC_REF_LET)
			return lin_of(R, R->s->where[e->ref_id].val, out);
		out->ok = 0;
		return 0;
	case TC_AST_CAST:
		if (!tc_dtype_is_int(e->cast_type) || !tc_dtype_is_int(e->args[0]->type)) {
			out->ok = 0;
			return 0;
		}
		return lin_of(R, e->args[0], out);
	case TC_AST_UNARY:
		if (e->op != TC_AOP_NEG || lin_of(R, e->args[0], &a) < 0 || lin_alloc(R, &b) < 0)
			return -1;
		lin_axpy(R, out, &b, -1, &a);
		return 0;
	case TC_AST_BINARY:
		if (lin_of(R, e->args[0], &a) < 0 || lin_of(R, e->args[1], &b) < 0)
			return -1;
		if (!a.ok || !b.ok) {
			out->ok = 0;
			return 0;
		}
		switch (e->op) {
		case TC_AOP_ADD:
			lin_axpy(R, out, &a, 1, &b);
			return 0;
		case TC_AOP_SUB:
			lin_axpy(R, out, &a, -1, &b);
			return 0;
		case TC_AOP_MUL:
			if (!lin_has_vars(R, &a) && tc_sx_is_const(a.rest, &c)) {
				lin z;
				if (lin_alloc(R, &z) < 0)
					return -1;
				lin_axpy(R, out, &z, c, &b);
				return 0;
			}
			if (!lin_has_vars(R, &b) && tc_sx_is_const(b.rest, &c)) {
				lin z;
				if (lin_alloc(R, &z) < 0)
					return -1;
				lin_axpy(R, out, &z, c, &a);
				return 0;
			}
			break;
		default:
			break;
		}
		/* division, modulo, products of sizes: only without variables */
		if (!lin_has_vars(R, &a) && !lin_has_vars(R, &b)) {
			const tc_sexpr *r = tc_range_sexpr(R->ar, e);
			if (r) {
				out->rest = r;
				return 0;
			}
		}
		out->ok = 0;
		return 0;
	default:
		if (!(e->kind == TC_AST_CALL && e->ref == TC_REF_BUILTIN)) {
			out->ok = 0;
			return 0;
		}
		out->rest = tc_range_sexpr(R->ar, e);
		if (!out->rest)
			out->ok = 0;
		return 0;
	}
}

static int add_cons(rctx *R, const tc_expr *read, int tensor, int dim, const tc_expr *sub,
	int kind)
{
	cons *c = tc_arena_alloc(R->ar, sizeof(*c));
	if (!c || tc_vec_push(&R->cons, c) < 0) {
		R->d->oom = 1;
		return -1;
	}
	c->read = read;
	c->tensor = tensor;
	c->dim = dim;
	c->kind = kind;
	c->ext = R->tensors[tensor]->ext[dim];
	if (lin_of(R, sub, &c->l) < 0)
		return -1;
	if (c->l.ok) {
		int v;
		for (v = 0; v < R->nv; v++)
			if (c->l.coef[v])
				R->in_affine[v] = 1;
	} else {
		mark_vars(R, sub, R->in_nonaffine);
	}
	return 0;
}

/* Collect the constraints of every read in e.  guarded: e is inside a
 * branch of ?: (lets are inlined, so a let used only there is guarded too);
 * its reads give CONS_GUARDED constraints.  let_walked[i] bit 1: walked
 * unguarded, bit 2: guarded. */
static int walk(rctx *R, const tc_expr *e, int guarded)
{
	int i;
	guarded = guarded || e->guarded;
	if (e->kind == TC_AST_IDENT && e->ref == TC_REF_LET) {
		int bit = guarded ? 2 : 1;
		if (R->let_walked[e->ref_id] & bit)
			return 0;
		R->let_walked[e->ref_id] |= bit;
		return walk(R, R->s->where[e->ref_id].val, guarded);
	}
	if (e->kind == TC_AST_CALL && e->ref == TC_REF_TENSOR)
		for (i = 0; i < e->nargs; i++)
			if (add_cons(R, e, e->ref_id, i, e->args[i],
				    guarded ? CONS_GUARDED : CONS_READ) < 0)
				return -1;
	for (i = 0; i < e->nargs; i++)
		if (walk(R, e->args[i], guarded) < 0)
			return -1;
	return 0;
}

/* Bounds of sum over solved w != skip of coef[w] * w: lo/hi contributions. */
static void others(rctx *R, const lin *l, int skip, const tc_sexpr **mn, const tc_sexpr **mx)
{
	int w;
	*mn = *mx = l->rest;
	for (w = 0; w < R->nv; w++) {
		int64_t k = l->coef[w];
		const tc_sexpr *lo = R->s->vars[w].lo;
		const tc_sexpr *last = tc_sx_sub(R->ar, R->s->vars[w].hi, tc_sx_const(R->ar, 1));
		if (w == skip || !k)
			continue;
		*mn = tc_sx_add(R->ar, *mn, tc_sx_scale(R->ar, k, k > 0 ? lo : last));
		*mx = tc_sx_add(R->ar, *mx, tc_sx_scale(R->ar, k, k > 0 ? last : lo));
	}
}

/* The interval of v allowed by constraint c (all other variables solved). */
static void solve_one(rctx *R, const cons *c, int v, const tc_sexpr **lo,
	const tc_sexpr **hi)
{
	const tc_sexpr *mn, *mx;
	int64_t a = c->l.coef[v];
	tc_arena *ar = R->ar;
	const tc_sexpr *last = tc_sx_sub(ar, c->ext, tc_sx_const(ar, 1));

	others(R, &c->l, v, &mn, &mx);
	if (a > 0) { /* 0 <= a*v + mn  and  a*v + mx <= ext - 1 */
		*lo = tc_sx_ceildiv(ar, tc_sx_scale(ar, -1, mn), a);
		*hi = tc_sx_add(ar, tc_sx_floordiv(ar, tc_sx_sub(ar, last, mx), a),
			tc_sx_const(ar, 1));
	} else { /* 0 <= -b*v + mn  and  -b*v + mx <= ext - 1 */
		int64_t b = -a;
		*hi = tc_sx_add(ar, tc_sx_floordiv(ar, mn, b), tc_sx_const(ar, 1));
		*lo = tc_sx_ceildiv(ar, tc_sx_sub(ar, mx, last), b);
	}
}

static int nunknowns(rctx *R, const cons *c, int *which)
{
	int v, n = 0;
	for (v = 0; v < R->nv; v++)
		if (c->l.coef[v] && !R->solved[v]) {
			n++;
			*which = v;
		}
	return n;
}

/* One round: solve every variable that is the only unknown of some
 * constraint of the given kind.  Returns the number solved. */
static int round_(rctx *R, int kind)
{
	int *cand = tc_arena_alloc(R->ar, (size_t)(R->nv + 1) * sizeof(int));
	int i, v, n = 0;
	if (!cand)
		return -1;
	for (i = 0; i < R->cons.n; i++) {
		cons *c = R->cons.v[i];
		if (c->l.ok && !c->used && c->kind == kind && nunknowns(R, c, &v) == 1)
			cand[v] = 1;
	}
	for (v = 0; v < R->nv; v++) {
		tc_stmt_var *sv = &R->s->vars[v];
		if (!cand[v])
			continue;
		for (i = 0; i < R->cons.n; i++) {
			cons *c = R->cons.v[i];
			const tc_sexpr *lo, *hi;
			int w;
			if (!c->l.ok || c->used || c->kind != kind || !c->l.coef[v] ||
				nunknowns(R, c, &w) != 1)
				continue;
			solve_one(R, c, v, &lo, &hi);
			sv->lo = sv->lo ? tc_sx_max(R->ar, sv->lo, lo) : lo;
			sv->hi = sv->hi ? tc_sx_min(R->ar, sv->hi, hi) : hi;
			c->used = 1;
		}
		n++;
	}
	for (v = 0; v < R->nv; v++)
		if (cand[v]) {
			R->solved[v] = 1;
			R->by_guarded[v] = kind == CONS_GUARDED;
		}
	return n;
}

static void print_read(const rctx *R, const cons *c, tc_buf *b)
{
	int i;
	if (c->read) {
		tc_ast_print_expr(c->read, b);
		return;
	}
	tc_buf_printf(b, "the write to %s(", R->s->lhs);
	for (i = 0; i < R->s->nidx; i++) {
		tc_buf_puts(b, i ? ", " : "");
		if (R->s->sub && R->s->sub[i])
			tc_ast_print_expr(R->s->sub[i], b);
		else
			tc_buf_puts(b, R->s->idx[i]);
	}
	tc_buf_putc(b, ')');
}

/* The variable of left-hand dimension dim of s (an index name: its
 * number among the left-hand names), or -1 for a gathered subscript. */
static int dim_var(const tc_stmt *s, int dim)
{
	int k, v = 0;
	if (!s->sub)
		return dim;
	if (s->sub[dim])
		return -1;
	for (k = 0; k < dim; k++)
		v += !s->sub[k];
	return v;
}

static int add_check(rctx *R, tc_vec *checks, const tc_sexpr *e, int eq, tc_loc loc,
	const char *msg)
{
	tc_check *k = tc_arena_alloc(R->ar, sizeof(*k));
	if (!k || !msg || tc_vec_push(checks, k) < 0) {
		R->d->oom = 1;
		return -1;
	}
	k->e = e;
	k->eq = eq;
	k->msg = msg;
	k->loc = loc;
	return 0;
}

/* A condition cond >= 0 on the sizes: proven, refuted (error) or a check. */
static int require(rctx *R, tc_vec *checks, const tc_sexpr *cond, tc_loc loc,
	const char *what, int explain)
{
	tc_buf b;
	if (!cond)
		return -1;
	if (tc_sx_sign(cond) > 0)
		return 0;
	if (tc_sx_sign(cond) < 0) { /* no sizes satisfy it */
		tc_error(R->d, loc, "%s", what);
		return -1;
	}
	tc_buf_init(&b);
	tc_buf_puts(&b, what);
	if (explain) {
		tc_buf_puts(&b, ": needs ");
		tc_sx_print(cond, R->def->sizes, NULL, &b);
		tc_buf_puts(&b, " >= 0");
	}
	if (!b.s) {
		R->d->oom = 1;
		return -1;
	}
	if (add_check(R, checks, cond, 0, loc, tc_arena_strdup(R->ar, b.s)) < 0) {
		tc_buf_free_diag(&b, R->d);
		return -1;
	}
	tc_buf_free_diag(&b, R->d);
	return 0;
}

/* A constraint not used for solving must hold over the whole domain. */
static int check_leftover(rctx *R, tc_vec *checks, const cons *c)
{
	const tc_sexpr *mn, *mx, *low, *high;
	tc_arena *ar = R->ar;
	tc_loc loc = c->read ? c->read->loc : R->s->lhs_loc;
	tc_buf b;
	int r, v;

	others(R, &c->l, -1, &mn, &mx);
	low = mn; /* the lowest index must be >= 0 ... */
	high = tc_sx_sub(ar, tc_sx_sub(ar, c->ext, tc_sx_const(ar, 1)), mx); /* ... the highest < ext */
	tc_buf_init(&b);
	print_read(R, c, &b);
	if (tc_sx_sign(low) < 0 || tc_sx_sign(high) < 0) {
		/* out of bounds whatever the sizes: say why */
		tc_buf_printf(&b, " %s out of bounds in dimension %d of '%s' (extent ",
			c->read ? "reads" : "goes", c->dim, R->tensors[c->tensor]->name);
		tc_sx_print(c->ext, R->def->sizes, NULL, &b);
		tc_buf_puts(&b, ") for every size");
		for (v = 0; v < R->nv; v++)
			if (c->l.coef[v] && R->fixed[v]) {
				tc_buf_printf(&b, "; the where clause gives '%s' the range [", R->s->vars[v].name);
				tc_sx_print(R->s->vars[v].lo, R->def->sizes, NULL, &b);
				tc_buf_puts(&b, ", ");
				tc_sx_print(R->s->vars[v].hi, R->def->sizes, NULL, &b);
				tc_buf_puts(&b, ")");
			}
		if (b.s)
			tc_error(R->d, loc, "%s", b.s);
		tc_buf_free_diag(&b, R->d);
		return -1;
	}
	tc_buf_printf(&b, " can go out of bounds in dimension %d of '%s' (extent ", c->dim,
		R->tensors[c->tensor]->name);
	tc_sx_print(c->ext, R->def->sizes, NULL, &b);
	tc_buf_puts(&b, ")");
	if (!b.s) {
		R->d->oom = 1;
		return -1;
	}
	r = require(R, checks, low, loc, b.s, 1);
	if (r == 0)
		r = require(R, checks, high, loc, b.s, 1);
	tc_buf_free_diag(&b, R->d);
	return r;
}

/* Advice for an index whose range comes from reads under ?: and is wrong
 * (empty, or not starting at 0): those reads usually cover only part of the
 * range each (a concatenation, a shift with a test), so say where the
 * range came from and how to give it. */
static void guarded_hint(rctx *R, int v, tc_buf *b)
{
	const char *name = R->s->vars[v].name;
	tc_buf_printf(b, "; this range comes from reads under ?: (they bound an index that nothing else bounds): give '%s' its range with a where clause such as 'where %s in 0:%s'",
		name, name, R->def->nsizes ? R->def->sizes[0] : "10");
}

/* Indices are int32 values: the range of v must lie in [INT32_MIN,
 * INT32_MAX].  An error when it never does (where i in 0:3000000000), a
 * run-time check when that depends on the sizes (j in 0:N+M for a reduction
 * index), except for a range that becomes an extent (is_extent): binding
 * checks every extent already. */
static int int32_range(rctx *R, tc_vec *checks, int v, int is_extent)
{
	tc_stmt_var *sv = &R->s->vars[v];
	tc_arena *ar = R->ar;
	const tc_sexpr *cond[2];
	tc_buf b;
	int i, r = 0;

	cond[0] = tc_sx_sub(ar, tc_sx_const(ar, TC_SX_SIZE_MAX), sv->hi);
	cond[1] = tc_sx_add(ar, sv->lo, tc_sx_const(ar, TC_SX_SIZE_MAX + 1));
	if (!cond[0] || !cond[1])
		return -1;
	for (i = 0; i < 2 && r == 0; i++) {
		if (tc_sx_sign(cond[i]) > 0 || (is_extent && tc_sx_sign(cond[i]) == 0))
			continue;
		tc_buf_init(&b);
		tc_buf_printf(&b, "the range of '%s', [", sv->name);
		tc_sx_print(sv->lo, R->def->sizes, NULL, &b);
		tc_buf_puts(&b, ", ");
		tc_sx_print(sv->hi, R->def->sizes, NULL, &b);
		tc_buf_puts(&b, "), does not fit in int32 (indices are int32 values, from -2147483648 to 2147483647)");
		if (!b.s) {
			R->d->oom = 1;
			return -1;
		}
		r = require(R, checks, cond[i], sv->loc, b.s, 1);
		tc_buf_free_diag(&b, R->d);
	}
	return r;
}

static void unsolved_error(rctx *R, int v)
{
	const tc_stmt_var *sv = &R->s->vars[v];
	const char *why;
	if (R->in_affine[v])
		why = "it appears only together with other indices whose ranges are unknown";
	else if (R->in_nonaffine[v])
		why = "it appears only in subscripts that are not affine (such as gathers or products of indices)";
	else if (!sv->is_reduction)
		why = "it does not appear in any read on the right-hand side";
	else
		why = "it appears in no subscript";
	tc_error(R->d, sv->loc,
		"could not infer the range of '%s': %s; add a where clause such as 'where %s in 0:%s'%s",
		sv->name, why, sv->name, R->def->nsizes ? R->def->sizes[0] : "10",
		!sv->is_reduction && R->tensors[R->s->tensor]->kind == TC_TENSOR_OUTPUT
			? " or declare the output's shape in the -> list" : "");
}

tc_stat tc_range_infer(__tc_keep tc_arena *ar, __tc_keep tc_diags *d, __tc_keep const tc_def *def,
	__tc_keep tc_tensor_info *const *tensors, __tc_keep tc_stmt *s, __tc_keep tc_vec *checks)
{
	rctx R;
	tc_tensor_info *lhs = tensors[s->tensor];
	int first = lhs->first_write == -1;
	int i, v, ok = 1, progress;
	tc_buf b;

	memset(&R, 0, sizeof(R));
	R.ar = ar;
	R.d = d;
	R.def = def;
	R.tensors = tensors;
	R.s = s;
	R.nv = s->nvars;
	R.solved = tc_arena_alloc(ar, (size_t)(R.nv + 1) * sizeof(int));
	R.fixed = tc_arena_alloc(ar, (size_t)(R.nv + 1) * sizeof(int));
	R.in_affine = tc_arena_alloc(ar, (size_t)(R.nv + 1) * sizeof(int));
	R.by_guarded = tc_arena_alloc(ar, (size_t)(R.nv + 1) * sizeof(int));
	R.in_nonaffine = tc_arena_alloc(ar, (size_t)(R.nv + 1) * sizeof(int));
	R.let_walked = tc_arena_alloc(ar, (size_t)(s->nwhere + 1) * sizeof(int));
	if (!R.solved || !R.fixed || !R.in_affine || !R.by_guarded || !R.in_nonaffine || !R.let_walked)
		return TC_ERR;

	/* constraints from reads, those of gathered left-hand subscripts
	 * included (the written tensor's extent does not bound them: the
	 * gathered value is checked at run time) */
	for (i = 0; s->sub && i < s->nidx; i++)
		if (s->sub[i] && walk(&R, s->sub[i], 0) < 0)
			goto error;
	if (walk(&R, s->rhs, 0) < 0)
		goto error;
	for (i = 0; i < s->nwhere; i++)
		if (s->where[i].kind == TC_WHERE_EXISTS && walk(&R, s->where[i].val, 0) < 0)
			goto error;
	for (i = 0; i < s->nwhere; i++) /* unused lets still constrain (and warn) */
		if (s->where[i].kind == TC_WHERE_LET && !R.let_walked[i]) {
			R.let_walked[i] = 1;
			if (walk(&R, s->where[i].val, 0) < 0)
				goto error;
		}
	/* the left-hand side of a tensor with a known shape */
	if (lhs->ext && (!first || lhs->declared_shape)) {
		for (i = 0; i < s->nidx; i++) {
			cons *c;
			if (dim_var(s, i) < 0)
				continue;
			c = tc_arena_alloc(ar, sizeof(*c));
			if (!c || tc_vec_push(&R.cons, c) < 0 || lin_alloc(&R, &c->l) < 0) {
				d->oom = 1;
				goto error;
			}
			c->l.coef[dim_var(s, i)] = 1;
			c->ext = lhs->ext[i];
			c->tensor = s->tensor;
			c->dim = i;
			c->kind = CONS_LHS;
		}
	}
	/* where ranges are fixed first */
	for (i = 0; i < s->nwhere; i++) {
		tc_where *w = &s->where[i];
		if (w->kind != TC_WHERE_RANGE)
			continue;
		for (v = 0; v < R.nv; v++)
			if (!strcmp(s->vars[v].name, w->name))
				break;
		s->vars[v].lo = tc_range_sexpr(ar, w->lo);
		s->vars[v].hi = tc_range_sexpr(ar, w->hi);
		R.solved[v] = R.fixed[v] = 1;
	}
	do { /* each round with the first kind of constraints that solves something */
		int kind;
		progress = 0;
		for (kind = 0; kind < CONS_NKINDS && !progress; kind++)
			progress = round_(&R, kind);
		if (progress < 0)
			goto error;
	} while (progress);

	for (v = 0; v < R.nv; v++)
		if (!R.solved[v]) {
			unsolved_error(&R, v);
			ok = 0;
		}
	if (!ok)
		goto error;

	/* ranges must be non-empty; output ranges must start at 0 */
	for (v = 0; v < R.nv; v++) {
		tc_stmt_var *sv = &s->vars[v];
		const tc_sexpr *cond;
		int64_t c;
		tc_buf_init(&b);
		tc_buf_printf(&b, "the range of '%s' is empty: [", sv->name);
		tc_sx_print(sv->lo, def->sizes, NULL, &b);
		tc_buf_puts(&b, ", ");
		tc_sx_print(sv->hi, def->sizes, NULL, &b);
		tc_buf_puts(&b, ")");
		cond = tc_sx_sub(ar, tc_sx_sub(ar, sv->hi, sv->lo), tc_sx_const(ar, 1));
		if (R.by_guarded[v] && cond && tc_sx_sign(cond) < 0)
			guarded_hint(&R, v, &b);
		if (!b.s || require(&R, checks, cond, sv->loc, b.s, 1) < 0) {
			ok = 0;
			tc_buf_free_diag(&b, d);
			continue; /* one error per index */
		}
		tc_buf_free_diag(&b, d);
		if (int32_range(&R, checks, v, first && !lhs->declared_shape && v < tc_stmt_nlhs(s)) < 0) {
			ok = 0;
			continue;
		}
		/* the first write of a tensor without a declared shape defines it: its
		 * ranges start at 0 */
		if (first && !lhs->declared_shape && v < tc_stmt_nlhs(s) &&
			!(tc_sx_is_const(sv->lo, &c) && c == 0)) {
			tc_buf_init(&b);
			tc_sx_print(sv->lo, def->sizes, NULL, &b);
			tc_buf_puts(&b, ", ");
			tc_sx_print(sv->hi, def->sizes, NULL, &b);
			if (R.by_guarded[v]) {
				tc_buf h;
				tc_buf_init(&h);
				guarded_hint(&R, v, &h);
				tc_error(d, sv->loc,
					"the inferred range of '%s' is [%s), but ranges of left-hand indices must start at 0%s",
					sv->name, b.s ? b.s : "?", h.s ? h.s : "");
				tc_buf_free_diag(&h, d);
			} else if (R.fixed[v])
				tc_error(d, sv->loc,
					"the where clause gives '%s' the range [%s), but the left-hand indices of the first statement writing '%s' must start at 0 (they define its shape); write it from 0 first%s",
					sv->name, b.s ? b.s : "?", s->lhs, lhs->kind == TC_TENSOR_OUTPUT
					? ", or declare its shape in the -> list" : "");
			else if (tc_sx_sign(sv->lo) != 0 || tc_sx_is_const(sv->lo, &c)) {
				/* it starts at lo for every size: shift by lo */
				tc_buf sh;
				tc_buf_init(&sh);
				tc_sx_print(sv->lo, def->sizes, NULL, &sh);
				tc_error(d, sv->loc,
					"the inferred range of '%s' is [%s), but ranges of left-hand indices must start at 0; shift the index: write '%s %s %s' where '%s' is read, so that it starts at 0",
					sv->name, b.s ? b.s : "?", sv->name,
					sh.s && sh.s[0] == '-' ? "-" : "+",
					sh.s ? sh.s + (sh.s[0] == '-') : "?", sv->name);
				tc_buf_free_diag(&sh, d);
			}
			else
				tc_error(d, sv->loc,
					"the inferred range of '%s' is [%s), which does not always start at 0; ranges of left-hand indices must start at 0: rewrite the reads so that '%s' starts at 0",
					sv->name, b.s ? b.s : "?", sv->name);
			tc_buf_free_diag(&b, d);
			ok = 0;
		}
	}
	if (!ok)
		goto error;

	/* the shape of the left-hand tensor */
	if (first && !lhs->declared_shape) {
		lhs->ext = tc_arena_alloc(ar, (size_t)(s->nidx + 1) * sizeof(tc_sexpr *));
		if (!lhs->ext)
			goto error;
		for (i = 0; i < s->nidx; i++)
			lhs->ext[i] = s->vars[i].hi;
	} else if (first) { /* declared: must equal the inference */
		for (i = 0; i < R.cons.n; i++) {
			cons *c = R.cons.v[i];
			int64_t diff;
			if (c->kind != CONS_LHS || c->used)
				continue;
			c->used = 1;
			/* and never start below the tensor's first element (a write
			 * there would be outside it) */
			tc_buf_init(&b);
			tc_buf_printf(&b, "the inferred range of '%s' is [", s->vars[dim_var(s, c->dim)].name);
			tc_sx_print(s->vars[dim_var(s, c->dim)].lo, def->sizes, NULL, &b);
			tc_buf_puts(&b, ", ");
			tc_sx_print(s->vars[dim_var(s, c->dim)].hi, def->sizes, NULL, &b);
			tc_buf_printf(&b, "), which starts below 0, the first element of dimension %d of "
				"'%s'; shift the index where it is read, or give it a where range from 0",
				c->dim, lhs->name);
			if (!b.s || require(&R, checks, s->vars[dim_var(s, c->dim)].lo,
					    s->idx_loc[c->dim], b.s, 1) < 0) {
				tc_buf_free_diag(&b, d);
				ok = 0;
				continue;
			}
			tc_buf_free_diag(&b, d);
			if (tc_sx_const_diff(s->vars[dim_var(s, c->dim)].hi, c->ext, &diff)) {
				if (diff) {
					tc_buf_init(&b);
					tc_sx_print(c->ext, def->sizes, NULL, &b);
					tc_buf_puts(&b, "' but the statement gives it '");
					tc_sx_print(s->vars[dim_var(s, c->dim)].hi, def->sizes, NULL, &b);
					tc_error(d, s->idx_loc[c->dim],
						"dimension %d of '%s' is declared as '%s'", c->dim,
						lhs->name, b.s ? b.s : "?");
					tc_buf_free_diag(&b, d);
					ok = 0;
				}
				continue;
			}
			tc_buf_init(&b);
			tc_buf_printf(&b, "dimension %d of '%s' is declared as '", c->dim, lhs->name);
			tc_sx_print(c->ext, def->sizes, NULL, &b);
			tc_buf_puts(&b, "' but the statement gives it '");
			tc_sx_print(s->vars[dim_var(s, c->dim)].hi, def->sizes, NULL, &b);
			tc_buf_puts(&b, "'");
			if (!b.s || add_check(&R, checks, tc_sx_sub(ar, s->vars[dim_var(s, c->dim)].hi, c->ext), 1,
					    s->idx_loc[c->dim], tc_arena_strdup(ar, b.s)) < 0)
				ok = 0;
			tc_buf_free_diag(&b, d);
		}
	}
	/* leftover constraints become checks; a read under ?: need not be in
	 * bounds where its branch does not run (the generated code checks it
	 * where it does) */
	for (i = 0; i < R.cons.n; i++) {
		cons *c = R.cons.v[i];
		if (c->l.ok && !c->used && c->kind != CONS_GUARDED && check_leftover(&R, checks, c) < 0)
			ok = 0;
	}
	tc_vec_free(&R.cons);
	return ok ? TC_OK : TC_ERR;
error:
	tc_vec_free(&R.cons);
	return TC_ERR;
}
