/* Lowering a checked def to the tensor IR.  Every implicit conversion of the
 * language becomes an explicit TC_OP_CAST here (operands are converted to
 * the type their operation computes in, right-hand sides to the type of the
 * tensor written), and let names are inlined. */
#include "half.h"
#include "ir.h"

#include <float.h>
#include <stdio.h>
#include <string.h>

typedef struct lower {
	tc_arena *ar;
	const tc_def *def;
	const tc_stmt *s;
	/* the pads of s that its guard tests (lowered as their first argument) */
	int nelided;
	const tc_expr **elided;
} lower;

static tc_ir_expr *node(lower *L, tc_ir_op op, tc_dtype type, tc_loc loc, int nargs)
{
	return tc_ir_new_expr(L->ar, op, type, loc, nargs);
}

/* Wrap an integer to the width and signedness of t. */
static int64_t wrap_int(int64_t v, tc_dtype t)
{
	switch (t) {
	case TC_T_BOOL: return v != 0;
	case TC_T_I8: return (int8_t)v;
	case TC_T_I16: return (int16_t)v;
	case TC_T_I32: return (int32_t)v;
	case TC_T_U8: return (uint8_t)v;
	case TC_T_U16: return (uint16_t)v;
	case TC_T_U32: return (uint32_t)v;
	default: return v;
	}
}

/* x rounded to the float type t (literals are stored as their value in t). */
static double round_float(double x, tc_dtype t)
{
	if (t == TC_T_F32)
		return (double)(float)x;
	if (t == TC_T_F16)
		return tc_half_to_double(tc_half_from_double(x));
	if (t == TC_T_BF16)
		return tc_bf16_to_double(tc_bf16_from_double(x));
	return x;
}

/* e converted to t: constants of integer type are folded, otherwise a cast. */
static tc_ir_expr *cast(lower *L, tc_ir_expr *e, tc_dtype t)
{
	tc_ir_expr *c;
	if (!e || e->type == t)
		return e;
	if (e->op == TC_OP_CONST && !tc_dtype_is_float(e->type) && e->type != TC_T_BOOL &&
		t != TC_T_BOOL) {
		c = node(L, TC_OP_CONST, t, e->loc, 0);
		if (!c)
			return NULL;
		if (t == TC_T_BF16) /* one rounding, as the interpreter's convert() */
			c->c.f = tc_bf16_to_double(tc_dtype_is_unsigned(e->type)
					? tc_bf16_from_u64((uint64_t)e->c.i)
					: tc_bf16_from_i64(e->c.i));
		else if (tc_dtype_is_float(t))
			c->c.f = round_float(tc_dtype_is_unsigned(e->type) ? (double)(uint64_t)e->c.i
								   : (double)e->c.i, t);
		else
			c->c.i = wrap_int(e->c.i, t);
		return c;
	}
	c = node(L, TC_OP_CAST, t, e->loc, 1);
	if (!c)
		return NULL;
	c->args[0] = e;
	return c;
}

static tc_ir_op binop(tc_ast_op op)
{
	switch (op) {
	case TC_AOP_ADD: return TC_OP_ADD;
	case TC_AOP_SUB: return TC_OP_SUB;
	case TC_AOP_MUL: return TC_OP_MUL;
	case TC_AOP_DIV: return TC_OP_DIV;
	case TC_AOP_MOD: return TC_OP_MOD;
	case TC_AOP_LT: return TC_OP_LT;
	case TC_AOP_GT: return TC_OP_GT;
	case TC_AOP_LE: return TC_OP_LE;
	case TC_AOP_GE: return TC_OP_GE;
	case TC_AOP_EQ: return TC_OP_EQ;
	case TC_AOP_NE: return TC_OP_NE;
	case TC_AOP_AND: return TC_OP_AND;
	case TC_AOP_OR: return TC_OP_OR;
	case TC_AOP_NEG: return TC_OP_NEG;
	default: return TC_OP_NOT;
	}
}

static tc_ir_expr *lower_pad(lower *L, const tc_expr *e);
static int is_elided(const lower *L, const tc_expr *e);
static int zero_else_guard(lower *L, const tc_expr *e, tc_ir_expr **guard);

static tc_ir_expr *lower_expr(lower *L, const tc_expr *e)
{
	tc_ir_expr *r = NULL;
	int i;

	switch (e->kind) {
	case TC_AST_INT:
	case TC_AST_FLOAT:
		r = node(L, TC_OP_CONST, e->type, e->loc, 0);
		if (!r)
			return NULL;
		if (tc_dtype_is_float(e->type))
			r->c.f = round_float(e->kind == TC_AST_INT ? (double)e->ival : e->fval,
				e->type);
		else if (e->kind == TC_AST_INT)
			r->c.i = wrap_int(e->ival, e->type);
		else /* a float literal kept as float32 in an integer context */
			r->c.f = e->fval;
		return r;
	case TC_AST_IDENT:
		switch (e->ref) {
		case TC_REF_INDEX:
		case TC_REF_SIZE:
			r = node(L, e->ref == TC_REF_INDEX ? TC_OP_INDEX : TC_OP_SIZE, TC_T_I32,
				e->loc, 0);
			if (r)
				r->id = e->ref_id;
			return r;
		case TC_REF_LET:
			return cast(L, lower_expr(L, L->s->where[e->ref_id].val), e->type);
		case TC_REF_TENSOR:
			r = node(L, TC_OP_READ, e->type, e->loc, 0);
			if (r)
				r->id = e->ref_id;
			return r;
		default:
			TC_ASSERT(0);
			return NULL;
		}
	case TC_AST_CALL:
		if (e->ref == TC_REF_PAD)
			return lower_pad(L, e);
		r = node(L, e->ref == TC_REF_TENSOR ? TC_OP_READ : TC_OP_CALL, e->type, e->loc,
			e->nargs);
		if (!r)
			return NULL;
		r->id = e->ref_id;
		for (i = 0; i < e->nargs; i++) {
			tc_ir_expr *a = lower_expr(L, e->args[i]);
			if (e->ref == TC_REF_BUILTIN) {
				const tc_builtin *b = &tc_builtins[e->ref_id];
				int int_arg = (b->kind == TC_BK_INT_FIRST && i == 0) ||
					(b->kind == TC_BK_INT_SECOND && i == 1);
				a = cast(L, a, int_arg ? TC_T_I32 : e->optype);
			}
			if (!(r->args[i] = a))
				return NULL;
		}
		return r;
	case TC_AST_CAST:
		return cast(L, lower_expr(L, e->args[0]), e->cast_type);
	case TC_AST_UNARY:
		r = node(L, binop(e->op), e->type, e->loc, 1);
		if (!r || !(r->args[0] = cast(L, lower_expr(L, e->args[0]), e->optype)))
			return NULL;
		if (e->op == TC_AOP_NEG && r->args[0]->op == TC_OP_CONST) { /* fold -literal */
			tc_ir_expr *c = r->args[0];
			if (tc_dtype_is_float(c->type))
				c->c.f = -c->c.f;
			else
				c->c.i = wrap_int((int64_t)(0 - (uint64_t)c->c.i), c->type);
			c->loc = e->loc;
			return c;
		}
		return r;
	case TC_AST_BINARY:
		r = node(L, binop(e->op), e->type, e->loc, 2);
		if (!r)
			return NULL;
		for (i = 0; i < 2; i++)
			if (!(r->args[i] = cast(L, lower_expr(L, e->args[i]), e->optype)))
				return NULL;
		return r;
	case TC_AST_TERNARY:
		if (is_elided(L, e)) /* a factor c ? x : 0 whose c is the guard's */
			return cast(L, lower_expr(L, e->args[1]), e->type);
		r = node(L, TC_OP_SELECT, e->type, e->loc, 3);
		if (!r || !(r->args[0] = lower_expr(L, e->args[0])))
			return NULL;
		for (i = 1; i < 3; i++)
			if (!(r->args[i] = cast(L, lower_expr(L, e->args[i]), e->type)))
				return NULL;
		return r;
	}
	return NULL;
}

/* ---- pad(e, v) (docs/language.md, 6.8; docs/design.md, "pad") ----
 *
 * pad(e, v) becomes the select  T ? e : v  where T is the conjunction, in
 * the order the reads are evaluated (a gather's subscript read before the
 * read it subscripts), of 0 <= s && s < extent for every subscript s of
 * every read written in e, through its lets, but not inside a pad within e
 * (that pad gives a value everywhere).  Subscripts and extents are
 * compared in int64 (a subscript may be of any integer type).  A plain
 * index variable whose range lies within the extent needs no test.
 *
 * A sum reduction (+=, +=!) whose right side is pad(e, 0), or a product
 * one of whose factors is, adds nothing where that pad gives 0; the
 * language skips those terms (6.8).  When the pad's tests are affine, the
 * statement gets them as its guard (tc_ir_stmt.guard), which restricts its
 * domain (polyhedral/poly.c: loop bounds instead of a test per term), and
 * the pad is lowered as e alone (elided).  So does a factor c ? e : 0 whose
 * c compares affine integer expressions (the weights of a tap that may not
 * exist, in a phase of a strided convolution's data gradient). */

/* The extent x (over the sizes) as an int64 IR expression. */
static tc_ir_expr *sx_ir(lower *L, const tc_sexpr *x, tc_loc loc)
{
	tc_ir_expr *r, *a, *b;
	tc_ir_op op;
	switch (x->kind) {
	case TC_SX_CONST:
		if ((r = node(L, TC_OP_CONST, TC_T_I64, loc, 0)))
			r->c.i = x->c;
		return r;
	case TC_SX_PARAM:
	case TC_SX_VAR:
		r = node(L, x->kind == TC_SX_PARAM ? TC_OP_SIZE : TC_OP_INDEX, TC_T_I32, loc, 0);
		if (r)
			r->id = x->id;
		return cast(L, r, TC_T_I64);
	case TC_SX_ADD: op = TC_OP_ADD; break;
	case TC_SX_MUL: op = TC_OP_MUL; break;
	case TC_SX_FLOORDIV: op = TC_OP_DIV; break;
	case TC_SX_MOD: op = TC_OP_MOD; break;
	default: op = TC_OP_CALL; break; /* min, max */
	}
	if (x->kind == TC_SX_ADD || x->kind == TC_SX_MIN || x->kind == TC_SX_MAX) {
		a = sx_ir(L, x->a, loc);
		b = sx_ir(L, x->b, loc);
	} else { /* c * a, floor(a / c), a mod c */
		a = sx_ir(L, x->a, loc);
		if ((b = node(L, TC_OP_CONST, TC_T_I64, loc, 0)))
			b->c.i = x->c;
	}
	if (!a || !b || !(r = node(L, op, TC_T_I64, loc, 2)))
		return NULL;
	if (op == TC_OP_CALL)
		r->id = x->kind == TC_SX_MIN ? TC_BI_MIN : TC_BI_MAX;
	r->args[0] = x->kind == TC_SX_MUL ? b : a;
	r->args[1] = x->kind == TC_SX_MUL ? a : b;
	return r;
}

static tc_ir_expr *binary(lower *L, tc_ir_op op, tc_dtype t, tc_ir_expr *a, tc_ir_expr *b)
{
	tc_ir_expr *r;
	if (!a || !b || !(r = node(L, op, t, a->loc, 2)))
		return NULL;
	r->args[0] = a;
	r->args[1] = b;
	return r;
}

/* *test && (the tests of the reads in e, see above); *test NULL stands
 * for true.  -1 when out of memory. */
static int pad_tests(lower *L, const tc_expr *e, tc_ir_expr **test)
{
	int i;
	if (e->kind == TC_AST_CALL && e->ref == TC_REF_PAD)
		return 0;
	if (e->kind == TC_AST_IDENT && e->ref == TC_REF_LET)
		return pad_tests(L, L->s->where[e->ref_id].val, test);
	for (i = 0; i < e->nargs; i++)
		if (pad_tests(L, e->args[i], test) < 0)
			return -1;
	if (!(e->kind == TC_AST_CALL && e->ref == TC_REF_TENSOR))
		return 0;
	for (i = 0; i < e->nargs; i++) {
		const tc_expr *a = e->args[i];
		const tc_sexpr *ext = L->def->tensors[e->ref_id].ext[i];
		tc_ir_expr *t, *zero;
		int64_t lo, diff;
		if (a->kind == TC_AST_IDENT && a->ref == TC_REF_INDEX &&
			tc_sx_is_const(L->s->vars[a->ref_id].lo, &lo) && lo >= 0 &&
			tc_sx_const_diff(L->s->vars[a->ref_id].hi, ext, &diff) && diff <= 0)
			continue; /* in bounds over its range */
		if (!(zero = node(L, TC_OP_CONST, TC_T_I64, a->loc, 0)))
			return -1;
		zero->c.i = 0;
		/* 0 <= s && s < ext: s lowered twice (the IR is a tree) */
		t = binary(L, TC_OP_AND, TC_T_BOOL,
			binary(L, TC_OP_LE, TC_T_BOOL, zero, cast(L, lower_expr(L, a), TC_T_I64)),
			binary(L, TC_OP_LT, TC_T_BOOL, cast(L, lower_expr(L, a), TC_T_I64),
				sx_ir(L, ext, a->loc)));
		if (!t || !(*test = *test ? binary(L, TC_OP_AND, TC_T_BOOL, *test, t) : t))
			return -1;
	}
	return 0;
}

static int is_elided(const lower *L, const tc_expr *e)
{
	int i;
	for (i = 0; i < L->nelided; i++)
		if (L->elided[i] == e)
			return 1;
	return 0;
}

static tc_ir_expr *lower_pad(lower *L, const tc_expr *e)
{
	tc_ir_expr *test = NULL, *r;
	int i;
	if (!is_elided(L, e) && pad_tests(L, e->args[0], &test) < 0)
		return NULL;
	if (!test) /* the statement's guard tests it, or nothing needs a test */
		return cast(L, lower_expr(L, e->args[0]), e->type);
	if (!(r = node(L, TC_OP_SELECT, e->type, e->loc, 3)))
		return NULL;
	r->args[0] = test;
	for (i = 1; i < 3; i++)
		if (!(r->args[i] = cast(L, lower_expr(L, e->args[i - 1]), e->type)))
			return NULL;
	return r;
}

/* Whether every comparison in test (a conjunction) is of affine operands. */
static int test_affine(const tc_ir_expr *test)
{
	if (test->op == TC_OP_AND)
		return test_affine(test->args[0]) && test_affine(test->args[1]);
	return tc_ir_affine(test->args[0]) && tc_ir_affine(test->args[1]);
}

/* Whether the pad e gives zero outside (v a constant 0, after its
 * conversion to the pad's type): 1 or 0, -1 when out of memory. */
static int pad_zero(lower *L, const tc_expr *e)
{
	tc_ir_expr *v = cast(L, lower_expr(L, e->args[1]), e->type);
	if (!v)
		return -1;
	return v->op == TC_OP_CONST && (tc_dtype_is_float(v->type) ? v->c.f == 0 : v->c.i == 0);
}

/* Find the factors pad(e, 0) with affine tests, and c ? e : 0 with c
 * comparisons of affine expressions (zero_else_guard), of a product
 * (through its lets) on the right of a sum reduction: mark them elided and
 * add their tests to *guard.  -1 when out of memory. */
static int pad_factors(lower *L, const tc_expr *e, tc_ir_expr **guard)
{
	tc_ir_expr *test = NULL;
	const tc_expr **more;
	int zero;
	if (e->kind == TC_AST_IDENT && e->ref == TC_REF_LET)
		return pad_factors(L, L->s->where[e->ref_id].val, guard);
	if (e->kind == TC_AST_BINARY && e->op == TC_AOP_MUL)
		return pad_factors(L, e->args[0], guard) < 0 ? -1 : pad_factors(L, e->args[1], guard);
	if (is_elided(L, e))
		return 0;
	if (e->kind == TC_AST_TERNARY) { /* c ? x : 0 */
		if ((zero = zero_else_guard(L, e, &test)) <= 0)
			return zero;
	} else if (!(e->kind == TC_AST_CALL && e->ref == TC_REF_PAD)) {
		return 0;
	} else if ((zero = pad_zero(L, e)) <= 0) {
		return zero;
	} else if (pad_tests(L, e->args[0], &test) < 0) {
		return -1;
	}
	if (test && !test_affine(test))
		return 0; /* a gather: tested by a select per term */
	more = tc_arena_alloc(L->ar, (size_t)(L->nelided + 1) * sizeof(*more));
	if (!more)
		return -1;
	if (L->nelided)
		memcpy(more, L->elided, (size_t)L->nelided * sizeof(*more));
	more[L->nelided++] = e;
	L->elided = more;
	if (test && !(*guard = *guard ? binary(L, TC_OP_AND, TC_T_BOOL, *guard, test) : test))
		return -1;
	return 0;
}

/* Whether c is a conjunction of comparisons of affine integer operands. */
static int comparisons_affine(const tc_ir_expr *c)
{
	if (c->op == TC_OP_AND)
		return comparisons_affine(c->args[0]) && comparisons_affine(c->args[1]);
	return c->op >= TC_OP_LT && c->op <= TC_OP_NE && c->nargs == 2 &&
		tc_dtype_is_int(c->args[0]->type) && tc_ir_affine(c->args[0]) &&
		tc_ir_affine(c->args[1]);
}

/* Whether e, the whole right side of a sum reduction, is c ? x : 0 with c
 * a conjunction of comparisons of affine integer expressions (no reads):
 * then the terms where c is false add nothing and are skipped, c becomes
 * the statement's guard (its domain) and x the right side.  The value
 * differs from adding 0 only in a -0.0 accumulator, which stays -0.0
 * (docs/language.md 6.8); every backend follows the guard.  1 (c lowered
 * into *guard), 0, or -1 when out of memory. */
static int zero_else_guard(lower *L, const tc_expr *e, tc_ir_expr **guard)
{
	tc_ir_expr *c, *z;
	if (e->kind != TC_AST_TERNARY)
		return 0;
	if (!(z = cast(L, lower_expr(L, e->args[2]), e->type)))
		return -1;
	if (z->op != TC_OP_CONST || (tc_dtype_is_float(z->type) ? z->c.f != 0 : z->c.i != 0))
		return 0;
	if (!(c = lower_expr(L, e->args[0])))
		return -1;
	if (!comparisons_affine(c))
		return 0;
	*guard = c;
	return 1;
}

/* Where each size parameter is read from: the first input dimension that
 * names it. */
static int bind_params(lower *L, tc_ir_func *f)
{
	int p, i, d;
	f->nparams = L->def->nsizes;
	f->params = tc_arena_alloc(L->ar, (size_t)(f->nparams + 1) * sizeof(tc_ir_param));
	if (!f->params)
		return -1;
	for (p = 0; p < f->nparams; p++) {
		f->params[p].name = L->def->sizes[p];
		f->params[p].tensor = -1;
		for (i = 0; i < L->def->ninputs && f->params[p].tensor < 0; i++)
			for (d = 0; d < L->def->tensors[i].ndim; d++) {
				const tc_sexpr *x = L->def->tensors[i].ext[d];
				if (x->kind == TC_SX_PARAM && x->id == p) {
					f->params[p].tensor = i;
					f->params[p].dim = d;
					break;
				}
			}
		if (!TC_ASSERT(f->params[p].tensor >= 0))
			return -1;
	}
	return 0;
}

/* The identity of reduction red in type t as a constant (the interpreter's
 * identity(): 0, the largest or the lowest finite value). */
static tc_ir_expr *identity_const(lower *L, tc_red red, tc_dtype t, tc_loc loc)
{
	tc_ir_expr *c = node(L, TC_OP_CONST, t, loc, 0);
	int bits = tc_dtype_bits(t), hi = red == TC_RED_MIN;
	if (!c || red == TC_RED_ADD)
		return c; /* 0 */
	if (tc_dtype_is_float(t)) {
		double m = t == TC_T_F16 ? 65504 : t == TC_T_BF16 ? TC_BF16_MAX
			: t == TC_T_F32 ? FLT_MAX : DBL_MAX;
		c->c.f = hi ? m : -m;
	} else if (t == TC_T_BOOL) {
		c->c.i = hi;
	} else if (tc_dtype_is_unsigned(t)) {
		c->c.i = hi ? (int64_t)(bits == 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1) : 0;
	} else {
		c->c.i = hi ? (bits == 64 ? INT64_MAX : (INT64_C(1) << (bits - 1)) - 1)
			    : (bits == 64 ? INT64_MIN : -(INT64_C(1) << (bits - 1)));
	}
	return c;
}

/* The statement a scatter's '!' becomes (before the scatter): every
 * element of its tensor set to the identity, o[dim] = identity over the
 * whole extent.  The gathered dimensions' indices are named _d<dim> (no
 * name of the language starts with '_'), the others keep their names. */
static int lower_scatter_init(lower *L, const tc_ir_func *f, tc_ir_stmt *o)
{
	const tc_stmt *s = L->s;
	const tc_ir_tensor *t = &f->tensors[s->tensor];
	int k, v = 0;
	memset(o, 0, sizeof(*o));
	o->tensor = s->tensor;
	o->nlhs = o->nvars = t->ndim;
	o->red = TC_RED_ASSIGN;
	o->loc = s->loc;
	o->vars = tc_arena_alloc(L->ar, (size_t)(t->ndim + 1) * sizeof(tc_ir_var));
	if (!o->vars || !(o->rhs = identity_const(L, s->red, t->dtype, s->loc)))
		return -1;
	for (k = 0; k < t->ndim; k++) {
		char nm[16];
		if (s->sub[k]) {
			snprintf(nm, sizeof(nm), "_d%d", k);
			if (!(o->vars[k].name = tc_arena_strdup(L->ar, nm)))
				return -1;
		} else {
			o->vars[k].name = s->vars[v++].name;
		}
		o->vars[k].lo = tc_sx_const(L->ar, 0);
		o->vars[k].hi = t->ext[k];
		if (!o->vars[k].lo)
			return -1;
	}
	return 0;
}

/* The subscripts of a scatter's element (tc_ir_stmt.sub): the gathers
 * lowered, an index name as its variable (the left-hand names are the
 * first variables, in order). */
static int lower_scatter_sub(lower *L, tc_ir_stmt *o)
{
	const tc_stmt *s = L->s;
	int k, v = 0;
	o->sub = tc_arena_alloc(L->ar, (size_t)(s->nidx + 1) * sizeof(tc_ir_expr *));
	if (!o->sub)
		return -1;
	for (k = 0; k < s->nidx; k++) {
		if (s->sub[k]) {
			o->sub[k] = lower_expr(L, s->sub[k]);
		} else if ((o->sub[k] = node(L, TC_OP_INDEX, TC_T_I32, s->idx_loc[k], 0))) {
			o->sub[k]->id = v++;
		}
		if (!o->sub[k])
			return -1;
	}
	o->nlhs = 0;
	o->init = 0;
	return 0;
}

tc_ir_func *tc_ir_lower(__tc_keep tc_arena *ar, __tc_keep const tc_def *def,
	__tc_keep const tc_source *src)
{
	lower L;
	tc_ir_func *f = tc_arena_alloc(ar, sizeof(*f));
	int i, j, n;

	if (!f || !TC_ASSERT(def->ok))
		return NULL;
	memset(&L, 0, sizeof(L));
	L.ar = ar;
	L.def = def;
	f->name = def->name;
	f->src = src;
	if (bind_params(&L, f) < 0)
		return NULL;
	f->ntensors = def->ntensors;
	f->ninputs = def->ninputs;
	f->noutputs = def->noutputs;
	f->tensors = tc_arena_alloc(ar, (size_t)(f->ntensors + 1) * sizeof(tc_ir_tensor));
	if (!f->tensors)
		return NULL;
	for (i = 0; i < f->ntensors; i++) {
		const tc_tensor_info *t = &def->tensors[i];
		f->tensors[i].name = t->name;
		f->tensors[i].kind = t->kind;
		f->tensors[i].dtype = t->dtype;
		f->tensors[i].ndim = t->ndim;
		f->tensors[i].ext = t->ext;
		f->tensors[i].loc = t->loc;
	}
	f->nstmts = def->nstmts;
	for (i = 0; i < def->nstmts; i++) /* a scatter's '!' is a statement */
		f->nstmts += def->stmts[i]->sub && def->stmts[i]->init;
	f->stmts = tc_arena_alloc(ar, (size_t)(f->nstmts + 1) * sizeof(tc_ir_stmt));
	if (!f->stmts)
		return NULL;
	for (i = 0, n = 0; i < def->nstmts; i++) {
		const tc_stmt *s = def->stmts[i];
		tc_ir_stmt *o;
		L.s = s;
		if (s->sub && s->init && lower_scatter_init(&L, f, &f->stmts[n++]) < 0)
			return NULL;
		o = &f->stmts[n++];
		o->tensor = s->tensor;
		o->nlhs = s->nidx;
		o->red = s->red;
		o->init = s->init;
		o->loc = s->loc;
		o->nvars = s->nvars;
		o->vars = tc_arena_alloc(ar, (size_t)(s->nvars + 1) * sizeof(tc_ir_var));
		if (!o->vars)
			return NULL;
		for (j = 0; j < s->nvars; j++) {
			o->vars[j].name = s->vars[j].name;
			o->vars[j].is_reduction = s->vars[j].is_reduction;
			o->vars[j].lo = s->vars[j].lo;
			o->vars[j].hi = s->vars[j].hi;
		}
		L.nelided = 0;
		L.elided = NULL;
		o->guard = NULL;
		if (s->red == TC_RED_ADD && pad_factors(&L, s->rhs, &o->guard) < 0)
			return NULL;
		const tc_expr *rhs = s->rhs;
		if (s->red == TC_RED_ADD && !o->guard && (j = zero_else_guard(&L, rhs, &o->guard)))
			if (j < 0 || !(rhs = rhs->args[1]))
				return NULL;
		o->rhs = cast(&L, lower_expr(&L, rhs), f->tensors[s->tensor].dtype);
		if (!o->rhs || (s->sub && lower_scatter_sub(&L, o) < 0))
			return NULL;
	}
	f->nchecks = def->nchecks;
	f->checks = def->checks;
	return tc_ir_widen(ar, f);
}

static int is_int_const(const tc_ir_expr *e)
{
	return e->op == TC_OP_CONST && tc_dtype_is_int(e->type);
}

int tc_ir_affine(__tc_keep const tc_ir_expr *e)
{
	switch (e->op) {
	case TC_OP_CONST:
		return tc_dtype_is_int(e->type);
	case TC_OP_INDEX:
	case TC_OP_SIZE:
		return 1;
	case TC_OP_CAST:
		return tc_dtype_is_int(e->type) && tc_dtype_is_int(e->args[0]->type) &&
			/* an integer conversion that keeps every value */
			tc_dtype_implicit_ok(e->args[0]->type, 0, e->type) &&
			tc_ir_affine(e->args[0]);
	case TC_OP_NEG:
		return tc_ir_affine(e->args[0]);
	case TC_OP_ADD:
	case TC_OP_SUB:
		return tc_ir_affine(e->args[0]) && tc_ir_affine(e->args[1]);
	case TC_OP_MUL:
		return (is_int_const(e->args[0]) && tc_ir_affine(e->args[1])) ||
			(is_int_const(e->args[1]) && tc_ir_affine(e->args[0]));
	case TC_OP_DIV:
	case TC_OP_MOD:
		return is_int_const(e->args[1]) && e->args[1]->c.i > 0 &&
			tc_dtype_is_signed(e->type) && tc_ir_affine(e->args[0]);
	case TC_OP_CALL:
		return (e->id == TC_BI_MIN || e->id == TC_BI_MAX) && tc_ir_affine(e->args[0]) &&
			tc_ir_affine(e->args[1]);
	default:
		return 0;
	}
}
