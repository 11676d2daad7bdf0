/* Reverse-mode automatic differentiation of a checked def into a backward
 * def, as a syntax tree (see grad.h).
 *
 * The forward statements are visited last to first.  A statement
 * T(lhs) op= rhs whose adjoint d_T is known contributes, for each tensor X
 * whose adjoint is wanted and each distinct subscript list X(s) read in
 * rhs, the statement
 *
 *   d_X(s) op' d_T(lhs) * (d rhs / d X(s))
 *
 * where op' is '=' when s names every index variable of the statement (a
 * pointwise copy), '+=!' otherwise (the adjoint broadcast back: summed
 * over the variables s lacks), and '+=' for the second and later
 * contributions to the same d_X.  So matmul's backward is two
 * contractions.  The partial derivative is built by the derivative table
 * below with simplifying constructors (no '* 1', '+ 0', '--x').  Forward
 * temporaries that the partials read are recomputed at the top of the
 * backward def by copies of their statements; adjoints of temporaries are
 * temporaries of the backward def.
 *
 * This slice supports statements with '=' and '+=!' (with where ranges and
 * lets, copied to the derived statements that need them) whose reads have
 * distinct index variables as subscripts covering the whole tensor; other
 * constructs are located errors "... not supported yet". */
#include "grad.h"

#include <stdio.h>
#include <string.h>

/* The state of one derivation. */
typedef struct grad_ctx {
	tc_arena *ar;
	const tc_def *def;
	tc_diags *d;
	int failed; /* an error was reported */
	const char **adj; /* adjoint name per tensor ("d_X") */
	int *need;        /* the adjoint of tensor t is wanted */
	int *have;        /* d_t has a contribution (or is a given input) */
	int *ncontrib;    /* contributions emitted to d_t so far */
	int *recompute;   /* the forward temporary t is recomputed */
	int *save;        /* the forward output t is an input of the backward */
	tc_vec stmts;     /* backward statements, in order */
	const tc_stmt *cur; /* the forward statement differentiated (its lets) */
	int *let_used;    /* per where clause of cur: a derived statement needs it */
} grad_ctx;

static int is_float(tc_dtype t)
{
	return t == TC_T_F16 || t == TC_T_F32 || t == TC_T_F64 || t == TC_T_BF16;
}

/* ---- simplifying constructors (NULL stands for the constant 0) ---- */

static tc_expr *mk_node(grad_ctx *g, tc_ast_kind kind, int nargs)
{
	tc_expr *e = tc_arena_alloc(g->ar, sizeof(*e));
	if (!e)
		return NULL;
	e->kind = kind;
	e->nargs = nargs;
	if (nargs && !(e->args = tc_arena_alloc(g->ar, (size_t)nargs * sizeof(*e->args))))
		return NULL;
	e->type = TC_T_NONE;
	return e;
}

static tc_expr *mk_float(grad_ctx *g, double v)
{
	tc_expr *e = mk_node(g, TC_AST_FLOAT, 0);
	if (e)
		e->fval = v;
	return e;
}

static int is_const(const tc_expr *e, double *v)
{
	if (e && e->kind == TC_AST_FLOAT) {
		*v = e->fval;
		return 1;
	}
	if (e && e->kind == TC_AST_INT) {
		*v = (double)e->ival;
		return 1;
	}
	return 0;
}

static int is_one(const tc_expr *e)
{
	double v;
	return is_const(e, &v) && v == 1.0;
}

static tc_expr *mk_bin(grad_ctx *g, tc_ast_op op, tc_expr *a, tc_expr *b)
{
	tc_expr *e = mk_node(g, TC_AST_BINARY, 2);
	if (!e)
		return NULL;
	e->op = op;
	e->args[0] = a;
	e->args[1] = b;
	return e;
}

static tc_expr *mk_neg(grad_ctx *g, tc_expr *a)
{
	tc_expr *e;
	double v;
	if (!a)
		return NULL;
	if (a->kind == TC_AST_UNARY && a->op == TC_AOP_NEG)
		return a->args[0];
	if (is_const(a, &v))
		return mk_float(g, -v);
	if (!(e = mk_node(g, TC_AST_UNARY, 1)))
		return NULL;
	e->op = TC_AOP_NEG;
	e->args[0] = a;
	return e;
}

static int is_neg(const tc_expr *e)
{
	return e && e->kind == TC_AST_UNARY && e->op == TC_AOP_NEG;
}

static tc_expr *mk_add(grad_ctx *g, tc_expr *a, tc_expr *b)
{
	if (!a)
		return b;
	if (!b)
		return a;
	if (is_neg(b))
		return mk_bin(g, TC_AOP_SUB, a, b->args[0]);
	if (is_neg(a))
		return mk_bin(g, TC_AOP_SUB, b, a->args[0]);
	return mk_bin(g, TC_AOP_ADD, a, b);
}

static tc_expr *mk_sub(grad_ctx *g, tc_expr *a, tc_expr *b)
{
	double v;
	if (!b)
		return a;
	if (!a)
		return mk_neg(g, b);
	if (is_neg(b))
		return mk_bin(g, TC_AOP_ADD, a, b->args[0]);
	if (is_const(b, &v) && v < 0)
		return mk_bin(g, TC_AOP_ADD, a, mk_float(g, -v));
	return mk_bin(g, TC_AOP_SUB, a, b);
}

static tc_expr *mk_div(grad_ctx *g, tc_expr *a, tc_expr *b);
static tc_expr *mk_ternary(grad_ctx *g, tc_expr *c, tc_expr *a, tc_expr *b);

/* Whether e is c ? x : y with constants x and y (a mask or sign). */
static int is_const_ternary(const tc_expr *e)
{
	double v;
	return e && e->kind == TC_AST_TERNARY && is_const(e->args[1], &v) &&
		is_const(e->args[2], &v);
}

static tc_expr *mk_mul(grad_ctx *g, tc_expr *a, tc_expr *b)
{
	double u, v;
	if (!a || !b)
		return NULL;
	if ((is_const(a, &u) && u == 0.0) || (is_const(b, &v) && v == 0.0))
		return mk_float(g, 0.0);
	if (is_one(a))
		return b;
	if (is_one(b))
		return a;
	/* x * (c ? 1 : 0) is c ? x : 0 */
	if (is_const_ternary(b))
		return mk_ternary(g, b->args[0], mk_mul(g, a, b->args[1]), mk_mul(g, a, b->args[2]));
	if (is_const_ternary(a))
		return mk_ternary(g, a->args[0], mk_mul(g, a->args[1], b), mk_mul(g, a->args[2], b));
	/* x * (1 / y) is x / y */
	if (b->kind == TC_AST_BINARY && b->op == TC_AOP_DIV && is_one(b->args[0]))
		return mk_div(g, a, b->args[1]);
	if (is_const(a, &u) && is_const(b, &v))
		return mk_float(g, u * v);
	if (is_const(a, &u) && u == -1.0)
		return mk_neg(g, b);
	if (is_const(b, &v) && v == -1.0)
		return mk_neg(g, a);
	if (is_neg(a))
		return mk_neg(g, mk_mul(g, a->args[0], b));
	if (is_neg(b))
		return mk_neg(g, mk_mul(g, a, b->args[0]));
	return mk_bin(g, TC_AOP_MUL, a, b);
}

static tc_expr *mk_div(grad_ctx *g, tc_expr *a, tc_expr *b)
{
	if (!a)
		return NULL;
	if (is_one(b))
		return a;
	if (is_neg(a))
		return mk_neg(g, mk_div(g, a->args[0], b));
	return mk_bin(g, TC_AOP_DIV, a, b);
}

/* A call of the builtin name with arguments a and b (b NULL: one). */
static tc_expr *mk_call(grad_ctx *g, const char *name, tc_expr *a, tc_expr *b)
{
	tc_expr *e = mk_node(g, TC_AST_CALL, b ? 2 : 1);
	if (!e)
		return NULL;
	e->name = name;
	e->ref = TC_REF_BUILTIN;
	e->args[0] = a;
	if (b)
		e->args[1] = b;
	return e;
}

static tc_expr *mk_ident(grad_ctx *g, const char *name)
{
	tc_expr *e = mk_node(g, TC_AST_IDENT, 0);
	if (e)
		e->name = name;
	return e;
}

/* The read name(idx[0], ..., idx[n-1]). */
static tc_expr *mk_read(grad_ctx *g, const char *name, int n, const char *const *idx)
{
	tc_expr *e;
	int i;
	if (n == 0)
		return mk_ident(g, name);
	if (!(e = mk_node(g, TC_AST_CALL, n)))
		return NULL;
	e->name = name;
	for (i = 0; i < n; i++)
		if (!(e->args[i] = mk_ident(g, idx[i])))
			return NULL;
	return e;
}

static tc_expr *mk_ternary(grad_ctx *g, tc_expr *c, tc_expr *a, tc_expr *b)
{
	tc_expr *e;
	if (!a && !b)
		return NULL;
	if (!(e = mk_node(g, TC_AST_TERNARY, 3)))
		return NULL;
	e->args[0] = c;
	e->args[1] = a ? a : mk_float(g, 0.0);
	e->args[2] = b ? b : mk_float(g, 0.0);
	return e;
}

/* ---- the derivative ---- */

/* Whether e reads tensor t with the subscripts of the read r. */
static int same_read(const tc_expr *e, int t, const tc_expr *r)
{
	int i;
	if (e->ref != TC_REF_TENSOR || e->ref_id != t || e->nargs != r->nargs)
		return 0;
	for (i = 0; i < e->nargs; i++)
		if (strcmp(e->args[i]->name, r->args[i]->name))
			return 0;
	return 1;
}

static void unsupported_builtin(grad_ctx *g, const tc_expr *e)
{
	tc_error(g->d, e->name_loc,
		"the derivative of '%s' is not supported yet (differentiable builtins: exp, "
		"expm1, log, log1p, sqrt, rsqrt, sin, cos, tan, sinh, cosh, tanh, atan, erf, "
		"fabs, pow, fmax, fmin, max, min; rounding functions have zero gradient)",
		e->name);
	g->failed = 1;
}

static tc_expr *diff(grad_ctx *g, const tc_expr *e, int t, const tc_expr *r);

/* f'(x) * dx for a builtin f of one argument x with derivative dx. */
static tc_expr *diff_builtin1(grad_ctx *g, const tc_expr *e, tc_expr *dx)
{
	tc_expr *x = e->args[0];
	tc_expr *fe = (tc_expr *)e;
	switch ((tc_builtin_id)e->ref_id) {
	case TC_BI_EXP:
		return mk_mul(g, dx, fe);
	case TC_BI_EXPM1:
		return mk_mul(g, dx, mk_call(g, "exp", x, NULL));
	case TC_BI_LOG:
		return mk_div(g, dx, x);
	case TC_BI_LOG1P:
		return mk_div(g, dx, mk_bin(g, TC_AOP_ADD, mk_float(g, 1.0), x));
	case TC_BI_SQRT:
		return mk_div(g, dx, mk_mul(g, mk_float(g, 2.0), fe));
	case TC_BI_RSQRT: /* -1/2 x^(-3/2) = -rsqrt(x) / (2 x) */
		return mk_neg(g, mk_div(g, mk_mul(g, dx, fe), mk_mul(g, mk_float(g, 2.0), x)));
	case TC_BI_SIN:
		return mk_mul(g, dx, mk_call(g, "cos", x, NULL));
	case TC_BI_COS:
		return mk_neg(g, mk_mul(g, dx, mk_call(g, "sin", x, NULL)));
	case TC_BI_TAN:
		return mk_mul(g, dx, mk_bin(g, TC_AOP_ADD, mk_float(g, 1.0), mk_mul(g, fe, fe)));
	case TC_BI_SINH:
		return mk_mul(g, dx, mk_call(g, "cosh", x, NULL));
	case TC_BI_COSH:
		return mk_mul(g, dx, mk_call(g, "sinh", x, NULL));
	case TC_BI_TANH:
		return mk_mul(g, dx, mk_bin(g, TC_AOP_SUB, mk_float(g, 1.0), mk_mul(g, fe, fe)));
	case TC_BI_ATAN:
		return mk_div(g, dx, mk_bin(g, TC_AOP_ADD, mk_float(g, 1.0), mk_mul(g, x, x)));
	case TC_BI_ERF: /* 2/sqrt(pi) exp(-x^2) */
		return mk_mul(g, dx, mk_mul(g, mk_float(g, 1.1283791670955126),
			mk_call(g, "exp", mk_neg(g, mk_mul(g, x, x)), NULL)));
	case TC_BI_FABS: /* sign(x), 0 at 0 */
		return mk_ternary(g, mk_bin(g, TC_AOP_GT, x, mk_float(g, 0.0)), dx,
			mk_ternary(g, mk_bin(g, TC_AOP_LT, x, mk_float(g, 0.0)), mk_neg(g, dx), NULL));
	case TC_BI_CEIL:
	case TC_BI_FLOOR:
	case TC_BI_ROUND:
	case TC_BI_RINT:
	case TC_BI_NEARBYINT:
	case TC_BI_TRUNC:
		return NULL; /* piecewise constant */
	default:
		unsupported_builtin(g, e);
		return NULL;
	}
}

/* The derivative of the builtin call e with respect to the read r of t. */
static tc_expr *diff_builtin(grad_ctx *g, const tc_expr *e, int t, const tc_expr *r)
{
	tc_expr *da, *db, *a, *b;
	da = diff(g, e->args[0], t, r);
	if (e->nargs == 1)
		return da ? diff_builtin1(g, e, da) : NULL;
	db = diff(g, e->args[1], t, r);
	if (e->nargs > 2) {
		if (da || db || diff(g, e->args[2], t, r))
			unsupported_builtin(g, e);
		return NULL;
	}
	if (!da && !db)
		return NULL;
	a = e->args[0];
	b = e->args[1];
	switch ((tc_builtin_id)e->ref_id) {
	case TC_BI_POW: {
		/* b a^(b-1) da + a^b log(a) db */
		double v;
		tc_expr *bm1, *pa;
		if (is_const(b, &v))
			bm1 = mk_float(g, v - 1.0);
		else
			bm1 = mk_bin(g, TC_AOP_SUB, b, mk_float(g, 1.0));
		pa = is_one(bm1) ? a : mk_call(g, "pow", a, bm1);
		return mk_add(g, mk_mul(g, da, mk_mul(g, b, pa)),
			mk_mul(g, db, mk_mul(g, (tc_expr *)e, mk_call(g, "log", a, NULL))));
	}
	case TC_BI_FMAX:
	case TC_BI_MAX: /* ties go to the first argument */
		return mk_ternary(g, mk_bin(g, TC_AOP_GE, a, b), da, db);
	case TC_BI_FMIN:
	case TC_BI_MIN:
		return mk_ternary(g, mk_bin(g, TC_AOP_LE, a, b), da, db);
	default:
		unsupported_builtin(g, e);
		return NULL;
	}
}

/* d e / d t(r's subscripts): NULL for zero.  Parts that are not of a
 * floating-point type (comparisons, integer arithmetic, casts to integers)
 * have zero gradient. */
static tc_expr *diff(grad_ctx *g, const tc_expr *e, int t, const tc_expr *r)
{
	tc_expr *da, *db;
	if (g->failed || !is_float(e->type))
		return NULL;
	switch (e->kind) {
	case TC_AST_INT:
	case TC_AST_FLOAT:
		return NULL;
	case TC_AST_IDENT:
	case TC_AST_CALL:
		if (e->ref == TC_REF_TENSOR)
			return same_read(e, t, r) ? mk_float(g, 1.0) : NULL;
		if (e->ref == TC_REF_BUILTIN)
			return diff_builtin(g, e, t, r);
		if (e->ref == TC_REF_LET) /* through the let's value */
			return diff(g, g->cur->where[e->ref_id].val, t, r);
		return NULL; /* sizes and index variables */
	case TC_AST_CAST:
		return diff(g, e->args[0], t, r);
	case TC_AST_UNARY:
		return e->op == TC_AOP_NEG ? mk_neg(g, diff(g, e->args[0], t, r)) : NULL;
	case TC_AST_TERNARY:
		return mk_ternary(g, e->args[0], diff(g, e->args[1], t, r),
			diff(g, e->args[2], t, r));
	case TC_AST_BINARY:
		da = diff(g, e->args[0], t, r);
		db = diff(g, e->args[1], t, r);
		switch (e->op) {
		case TC_AOP_ADD:
			return mk_add(g, da, db);
		case TC_AOP_SUB:
			return mk_sub(g, da, db);
		case TC_AOP_MUL:
			return mk_add(g, mk_mul(g, da, e->args[1]), mk_mul(g, e->args[0], db));
		case TC_AOP_DIV:
			/* da / b - a db / (b b) */
			return mk_sub(g, mk_div(g, da, e->args[1]),
				mk_div(g, mk_mul(g, e->args[0], db),
					mk_bin(g, TC_AOP_MUL, e->args[1], e->args[1])));
		case TC_AOP_MOD:
			if (da || db) {
				tc_error(g->d, e->loc,
					"the derivative of '%%' on floating-point values is not supported yet");
				g->failed = 1;
			}
			return NULL;
		default:
			return NULL; /* comparisons and logic */
		}
	}
	return NULL;
}

/* ---- checks of what this slice supports ---- */

/* The variable number of the index variable named name in s, or -1. */
static int var_of(const tc_stmt *s, const char *name)
{
	int v;
	for (v = 0; v < s->nvars; v++)
		if (!strcmp(s->vars[v].name, name))
			return v;
	return -1;
}

/* Whether variable v of s ranges over exactly 0:ext. */
static int covers(const tc_stmt *s, int v, const tc_sexpr *ext)
{
	int64_t lo;
	return tc_sx_is_const(s->vars[v].lo, &lo) && lo == 0 && tc_sx_equal(s->vars[v].hi, ext);
}

/* Check the reads of e (a right-hand side of s): subscripts are distinct
 * index variables ranging over the whole extent; outputs are not read. */
static void check_reads(grad_ctx *g, const tc_stmt *s, const tc_expr *e)
{
	const tc_def *def = g->def;
	int i, j;
	if (e->kind == TC_AST_CALL && e->ref == TC_REF_PAD) {
		tc_error(g->d, e->name_loc, "gradient: pad(e, v) is not supported yet");
		g->failed = 1;
		return;
	}
	if (e->kind == TC_AST_CALL && e->ref == TC_REF_TENSOR) {
		const tc_tensor_info *ti = &def->tensors[e->ref_id];
		if (ti->kind == TC_TENSOR_OUTPUT) {
			tc_error(g->d, e->loc,
				"gradient: output '%s' is read by a statement; differentiating through "
				"a returned tensor is not supported yet", ti->name);
			g->failed = 1;
			return;
		}
		for (i = 0; i < e->nargs; i++) {
			const tc_expr *a = e->args[i];
			int v;
			if (a->kind != TC_AST_IDENT || a->ref != TC_REF_INDEX) {
				tc_error(g->d, a->loc,
					"gradient: subscript %d of '%s' is not an index variable; offset, "
					"strided, constant and gathered subscripts are not supported yet",
					i + 1, ti->name);
				g->failed = 1;
				return;
			}
			for (j = 0; j < i; j++)
				if (!strcmp(e->args[j]->name, a->name)) {
					tc_error(g->d, a->loc,
						"gradient: '%s' is read with the index variable '%s' twice "
						"(a diagonal); not supported yet", ti->name, a->name);
					g->failed = 1;
					return;
				}
			v = var_of(s, a->name);
			if (v < 0 || !covers(s, v, ti->ext[i])) {
				tc_error(g->d, a->loc,
					"gradient: '%s' ranges over only part of dimension %d of '%s'; "
					"partial reads are not supported yet", a->name, i + 1, ti->name);
				g->failed = 1;
				return;
			}
		}
		return;
	}
	for (i = 0; i < e->nargs; i++)
		check_reads(g, s, e->args[i]);
}

/* Check statement si of the def: its operator, where clauses, left side. */
static void check_stmt(grad_ctx *g, int si)
{
	const tc_def *def = g->def;
	const tc_stmt *s = def->stmts[si];
	const tc_tensor_info *ti = &def->tensors[s->tensor];
	int i;
	for (i = 0; i < s->nwhere; i++)
		if (s->where[i].kind == TC_WHERE_EXISTS) {
			tc_error(g->d, s->where[i].loc,
				"gradient: exists clauses are not supported yet");
			g->failed = 1;
			return;
		}
	if (ti->first_write != si) {
		tc_error(g->d, s->lhs_loc,
			"gradient: '%s' is written again (an in-place update); not supported yet",
			s->lhs);
		g->failed = 1;
		return;
	}
	if (s->red == TC_RED_MUL || s->red == TC_RED_MIN || s->red == TC_RED_MAX ||
		(s->red == TC_RED_ADD && !s->init)) {
		tc_error(g->d, s->op_loc, "gradient: '%s' statements are not supported yet "
			"(supported: '=' and '+=!')", tc_red_name(s->red, s->init));
		g->failed = 1;
		return;
	}
	if (s->red == TC_RED_ASSIGN && s->nvars > s->nidx) {
		tc_error(g->d, s->op_loc, "gradient: '=' with reduction indices is not supported");
		g->failed = 1;
		return;
	}
	for (i = 0; i < s->nidx; i++)
		if (!covers(s, i, ti->ext[i])) {
			tc_error(g->d, s->idx_loc[i],
				"gradient: '%s' ranges over only part of dimension %d of '%s'; partial "
				"writes are not supported yet", s->idx[i], i + 1, s->lhs);
			g->failed = 1;
			return;
		}
	check_reads(g, s, s->rhs);
	for (i = 0; i < s->nwhere && !g->failed; i++)
		if (s->where[i].kind == TC_WHERE_LET)
			check_reads(g, s, s->where[i].val);
}

/* ---- assembling the backward def ---- */

/* Collect the tensor reads of e whose tensor's adjoint is wanted (first
 * occurrence of each distinct subscript list) into out. */
static void collect_reads(grad_ctx *g, const tc_expr *e, tc_vec *out)
{
	int i;
	if (e->kind == TC_AST_CALL && e->ref == TC_REF_TENSOR) {
		if (!g->need[e->ref_id])
			return;
		for (i = 0; i < out->n; i++)
			if (same_read(out->v[i], e->ref_id, e))
				return;
		if (tc_vec_push(out, (void *)e) < 0)
			g->failed = 1;
		return;
	}
	if (e->kind == TC_AST_IDENT && e->ref == TC_REF_TENSOR && g->need[e->ref_id]) {
		for (i = 0; i < out->n; i++)
			if (((tc_expr *)out->v[i])->ref_id == e->ref_id)
				return;
		if (tc_vec_push(out, (void *)e) < 0)
			g->failed = 1;
		return;
	}
	for (i = 0; i < e->nargs; i++)
		collect_reads(g, e->args[i], out);
}

/* Whether the index variable name is bounded by a read in e (a subscript
 * of a tensor read). */
static int bounded_in(const tc_expr *e, const char *name)
{
	int i;
	/* a read of the forward def, or an adjoint read built here (no ref) */
	if (e->kind == TC_AST_CALL && e->ref != TC_REF_BUILTIN) {
		for (i = 0; i < e->nargs; i++)
			if (e->args[i]->kind == TC_AST_IDENT && !strcmp(e->args[i]->name, name))
				return 1;
		return 0;
	}
	for (i = 0; i < e->nargs; i++)
		if (bounded_in(e->args[i], name))
			return 1;
	return 0;
}

/* Mark the forward temporaries read in e for recomputation. */
static void mark_temps(grad_ctx *g, const tc_expr *e)
{
	int i;
	if ((e->kind == TC_AST_CALL || e->kind == TC_AST_IDENT) && e->ref == TC_REF_TENSOR &&
		g->def->tensors[e->ref_id].kind == TC_TENSOR_TEMP)
		g->recompute[e->ref_id] = 1;
	for (i = 0; i < e->nargs; i++)
		mark_temps(g, e->args[i]);
}

/* e with every subtree that is target itself (the same node, which the
 * derivative table reuses: exp's derivative is the call exp(x)) replaced by
 * repl; the nodes on the way are copied, those of the forward def are never
 * changed.  *hit tells whether a replacement was made. */
static tc_expr *substitute(grad_ctx *g, tc_expr *e, const tc_expr *target, tc_expr *repl,
	int *hit)
{
	tc_expr *c, *args[3];
	int i, changed = 0;
	if (e == target) {
		*hit = 1;
		return repl;
	}
	if (e->kind == TC_AST_CALL && e->ref != TC_REF_BUILTIN)
		return e; /* a read: its subscripts are index variables */
	if (e->nargs > 3)
		return e;
	for (i = 0; i < e->nargs; i++) {
		args[i] = substitute(g, e->args[i], target, repl, hit);
		changed |= args[i] != e->args[i];
	}
	if (!changed || !(c = mk_node(g, e->kind, e->nargs)))
		return e;
	c->op = e->op;
	c->name = e->name;
	c->ref = e->ref;
	c->ref_id = e->ref_id;
	c->cast_type = e->cast_type;
	c->ival = e->ival;
	c->fval = e->fval;
	for (i = 0; i < e->nargs; i++)
		c->args[i] = args[i];
	return c;
}

/* Whether a and b are the same expression (structurally). */
static int expr_equal(const tc_expr *a, const tc_expr *b)
{
	int i;
	if (a == b)
		return 1;
	if (!a || !b || a->kind != b->kind || a->nargs != b->nargs)
		return 0;
	switch (a->kind) {
	case TC_AST_INT:
		return a->ival == b->ival;
	case TC_AST_FLOAT:
		return a->fval == b->fval;
	case TC_AST_IDENT:
	case TC_AST_CALL:
		if (strcmp(a->name, b->name))
			return 0;
		break;
	case TC_AST_CAST:
		if (a->cast_type != b->cast_type)
			return 0;
		break;
	case TC_AST_UNARY:
	case TC_AST_BINARY:
		if (a->op != b->op)
			return 0;
		break;
	case TC_AST_TERNARY:
		break;
	}
	for (i = 0; i < a->nargs; i++)
		if (!expr_equal(a->args[i], b->args[i]))
			return 0;
	return 1;
}

/* Whether e has a floating-point part of another type than dt. */
static int other_float(const tc_expr *e, tc_dtype dt)
{
	int i;
	if (is_float(e->type) && e->type != dt)
		return 1;
	for (i = 0; i < e->nargs; i++)
		if (other_float(e->args[i], dt))
			return 1;
	return 0;
}

/* Whether the derivative p of statement s, stored into an adjoint of type
 * dt, may compute in another floating-point type: d_T has T's type, the
 * nodes of p taken from the forward def carry their types (the nodes built
 * here have none, and are constants or reads of d_T).  Then it is cast to
 * dt, as the language asks of a narrowing store. */
static int needs_cast(const grad_ctx *g, const tc_stmt *s, const tc_expr *p, tc_dtype dt)
{
	return g->def->tensors[s->tensor].dtype != dt || other_float(p, dt);
}

/* Mark the lets of g->cur that e reads, directly or through other lets. */
static void mark_lets(grad_ctx *g, const tc_expr *e)
{
	int i;
	if (e->kind == TC_AST_IDENT && e->ref == TC_REF_LET && !g->let_used[e->ref_id]) {
		g->let_used[e->ref_id] = 1;
		mark_lets(g, g->cur->where[e->ref_id].val);
	}
	for (i = 0; i < e->nargs; i++)
		mark_lets(g, e->args[i]);
}

/* Whether the index name of g->cur has a where range, or is bounded by a
 * read in a let marked used. */
static int bounded_where(grad_ctx *g, const char *name)
{
	int i;
	for (i = 0; i < g->cur->nwhere; i++) {
		const tc_where *w = &g->cur->where[i];
		if (w->kind == TC_WHERE_RANGE && !strcmp(w->name, name))
			return 1;
		if (w->kind == TC_WHERE_LET && g->let_used[i] && bounded_in(w->val, name))
			return 1;
	}
	return 0;
}

/* The contributions of forward statement si to the wanted adjoints. */
static void backward_stmt(grad_ctx *g, int si)
{
	const tc_def *def = g->def;
	const tc_stmt *s = def->stmts[si];
	tc_vec reads = {0};
	tc_expr *dt, *first_p = NULL, *first_read = NULL;
	int i, v;
	if (!g->have[s->tensor])
		return;
	collect_reads(g, s->rhs, &reads);
	for (i = 0; i < s->nwhere; i++)
		if (s->where[i].kind == TC_WHERE_LET)
			collect_reads(g, s->where[i].val, &reads);
	g->cur = s;
	if (s->nwhere && !(g->let_used = tc_arena_alloc(g->ar, (size_t)s->nwhere * sizeof(int))))
		return;
	dt = mk_read(g, g->adj[s->tensor], s->nidx, s->idx);
	for (i = 0; i < reads.n && !g->failed; i++) {
		const tc_expr *r = reads.v[i];
		int x = r->ref_id, full;
		const char **idx;
		tc_expr *p = diff(g, s->rhs, x, r);
		tc_stmt *b;
		if (!p)
			continue;
		/* the derivative of T(idx) = f(...) may contain f(...) itself (exp,
		 * tanh, sqrt, pow): read T(idx) instead, a recomputed temporary or a
		 * forward output passed to the backward def */
		if (s->red == TC_RED_ASSIGN) {
			int hit = 0;
			tc_expr *tr = mk_read(g, s->lhs, s->nidx, s->idx);
			if (tr)
				p = substitute(g, p, s->rhs, tr, &hit);
			if (hit && def->tensors[s->tensor].kind == TC_TENSOR_TEMP)
				g->recompute[s->tensor] = 1;
			else if (hit)
				g->save[s->tensor] = 1;
		}
		/* the same for a let's value: read the let */
		for (v = 0; v < s->nwhere; v++)
			if (s->where[v].kind == TC_WHERE_LET) {
				int hit = 0;
				tc_expr *id = mk_ident(g, s->where[v].name);
				if (id) {
					id->ref = TC_REF_LET;
					id->ref_id = v;
					p = substitute(g, p, s->where[v].val, id, &hit);
				}
			}
		p = mk_mul(g, dt, p);
		/* a derivative equal to that of an earlier read of this statement
		 * whose adjoint it wrote whole ('='): read that adjoint (the
		 * gradient of b in fmax(T + b, 0) is d_T's, summed) */
		if (first_p && !expr_equal(p, dt) && expr_equal(p, first_p))
			p = first_read;
		/* the lets the derivative reads (through other lets too) */
		for (v = 0; v < s->nwhere; v++)
			g->let_used[v] = 0;
		mark_lets(g, p);
		/* every variable of s must be bounded by a read of the new statement
		 * or by a where range (copied to it) */
		for (v = 0; v < s->nvars; v++) {
			const char *name = s->vars[v].name;
			if (!bounded_in(r, name) && !bounded_in(p, name) && !bounded_where(g, name)) {
				tc_error(g->d, s->vars[v].loc,
					"gradient: the index '%s' is not bounded by any read of the "
					"derivative with respect to '%s'; not supported yet", name,
					def->tensors[x].name);
				g->failed = 1;
				break;
			}
		}
		if (g->failed || !p)
			break;
		full = r->nargs == s->nvars;
		idx = tc_arena_alloc(g->ar, (size_t)(r->nargs + 1) * sizeof(*idx));
		b = tc_arena_alloc(g->ar, sizeof(*b));
		if (!idx || !b)
			break;
		for (v = 0; v < r->nargs; v++)
			idx[v] = r->args[v]->name;
		b->lhs = g->adj[x];
		b->nidx = r->nargs;
		b->idx = idx;
		if (g->ncontrib[x]) {
			b->red = TC_RED_ADD;
		} else if (full) {
			b->red = TC_RED_ASSIGN;
			if (!first_p) {
				first_p = p;
				first_read = mk_read(g, g->adj[x], r->nargs, idx);
			}
		} else {
			b->red = TC_RED_ADD;
			b->init = 1;
		}
		if (needs_cast(g, s, p, def->tensors[x].dtype)) {
			tc_expr *c = mk_node(g, TC_AST_CAST, 1);
			if (!c)
				break;
			c->cast_type = def->tensors[x].dtype;
			c->args[0] = p;
			p = c;
		}
		b->rhs = p;
		mark_temps(g, p);
		/* the statement's where ranges, and the lets it reads */
		for (v = 0; v < s->nwhere; v++)
			b->nwhere += s->where[v].kind == TC_WHERE_RANGE || g->let_used[v];
		if (b->nwhere && !(b->where = tc_arena_alloc(g->ar, (size_t)b->nwhere *
			sizeof(tc_where))))
			break;
		b->nwhere = 0;
		for (v = 0; v < s->nwhere; v++)
			if (s->where[v].kind == TC_WHERE_RANGE || g->let_used[v]) {
				b->where[b->nwhere++] = s->where[v];
				if (s->where[v].kind == TC_WHERE_LET)
					mark_temps(g, s->where[v].val);
			}
		g->ncontrib[x]++;
		g->have[x] = 1;
		if (tc_vec_push(&g->stmts, b) < 0)
			g->failed = 1;
	}
	tc_vec_free(&reads);
}

/* Whether e reads a tensor t with need[t] set. */
static int reads_needed(const grad_ctx *g, const tc_expr *e)
{
	int i;
	if ((e->kind == TC_AST_CALL || e->kind == TC_AST_IDENT) && e->ref == TC_REF_TENSOR)
		return g->need[e->ref_id];
	for (i = 0; i < e->nargs; i++)
		if (reads_needed(g, e->args[i]))
			return 1;
	return 0;
}

/* Whether s reads (in its right side or lets) a tensor whose adjoint is
 * needed. */
static int stmt_reads_needed(const grad_ctx *g, const tc_stmt *s)
{
	int i;
	if (reads_needed(g, s->rhs))
		return 1;
	for (i = 0; i < s->nwhere; i++)
		if (s->where[i].kind == TC_WHERE_LET && reads_needed(g, s->where[i].val))
			return 1;
	return 0;
}

/* A declaration named name of type dt with the extents of tensor t. */
static int mk_decl(grad_ctx *g, tc_decl *dc, const char *name, tc_dtype dt, int t)
{
	const tc_tensor_info *ti = &g->def->tensors[t];
	int i;
	dc->name = name;
	dc->dtype = dt;
	dc->has_shape = ti->ndim > 0;
	dc->ndims = ti->ndim;
	if (ti->ndim && !(dc->dims = tc_arena_alloc(g->ar, (size_t)ti->ndim * sizeof(tc_dim))))
		return -1;
	for (i = 0; i < ti->ndim; i++) {
		const tc_sexpr *x = ti->ext[i];
		if (x->kind == TC_SX_PARAM) {
			dc->dims[i].name = g->def->sizes[x->id];
		} else if (x->kind == TC_SX_CONST) {
			dc->dims[i].value = x->c;
		} else {
			tc_error(g->d, ti->loc,
				"gradient: the extent %d of '%s' is not a size or a constant; the "
				"shape of '%s' cannot be written (not supported yet)", i + 1, ti->name, name);
			g->failed = 1;
			return -1;
		}
	}
	return 0;
}

/* A zero statement d_X(i0, ...) = 0.0 where i0 in 0:N0, ... for an input
 * whose gradient is zero. */
static tc_stmt *zero_stmt(grad_ctx *g, const tc_decl *dc)
{
	tc_stmt *b = tc_arena_alloc(g->ar, sizeof(*b));
	int i;
	if (!b)
		return NULL;
	b->lhs = dc->name;
	b->nidx = b->nwhere = dc->ndims;
	b->idx = tc_arena_alloc(g->ar, (size_t)(dc->ndims + 1) * sizeof(*b->idx));
	b->where = tc_arena_alloc(g->ar, (size_t)(dc->ndims + 1) * sizeof(*b->where));
	b->rhs = mk_float(g, 0.0);
	if (!b->idx || !b->where || !b->rhs)
		return NULL;
	for (i = 0; i < dc->ndims; i++) {
		char nm[32];
		tc_expr *hi;
		snprintf(nm, sizeof(nm), "i%d", i);
		b->idx[i] = tc_arena_strdup(g->ar, nm);
		b->where[i].kind = TC_WHERE_RANGE;
		b->where[i].name = b->idx[i];
		b->where[i].lo = mk_node(g, TC_AST_INT, 0);
		if (dc->dims[i].name) {
			hi = mk_ident(g, dc->dims[i].name);
		} else if ((hi = mk_node(g, TC_AST_INT, 0))) {
			hi->ival = dc->dims[i].value;
		}
		b->where[i].hi = hi;
		if (!b->idx[i] || !b->where[i].lo || !hi)
			return NULL;
	}
	return b;
}

/* Whether name is a tensor or size name of the def. */
static int name_taken(const tc_def *def, const char *name)
{
	int i;
	for (i = 0; i < def->ntensors; i++)
		if (!strcmp(def->tensors[i].name, name))
			return 1;
	for (i = 0; i < def->nsizes; i++)
		if (!strcmp(def->sizes[i], name))
			return 1;
	return 0;
}

__tc_give tc_def *tc_grad_derive(__tc_keep tc_arena *ar, __tc_keep const tc_def *def,
	__tc_keep const char *const *wrt, int nwrt, int saves, __tc_give tc_def **fwd,
	__tc_keep tc_diags *d)
{
	grad_ctx g = {0};
	tc_def *out = NULL;
	int nt = def->ntensors, i, t, changed, nret, nfwd, nsaved = 0;

	*fwd = NULL;
	g.ar = ar;
	g.def = def;
	g.d = d;
	if (!def->ok) {
		tc_error(d, def->name_loc, "gradient: '%s' has errors", def->name);
		return NULL;
	}
	g.adj = tc_arena_alloc(ar, (size_t)(nt + 1) * sizeof(*g.adj));
	g.need = tc_arena_alloc(ar, (size_t)(nt + 1) * sizeof(int));
	g.have = tc_arena_alloc(ar, (size_t)(nt + 1) * sizeof(int));
	g.ncontrib = tc_arena_alloc(ar, (size_t)(nt + 1) * sizeof(int));
	g.recompute = tc_arena_alloc(ar, (size_t)(nt + 1) * sizeof(int));
	g.save = tc_arena_alloc(ar, (size_t)(nt + 1) * sizeof(int));
	if (!g.adj || !g.need || !g.have || !g.ncontrib || !g.recompute || !g.save)
		goto error;
	for (t = 0; t < nt; t++) {
		size_t n = strlen(def->tensors[t].name) + 3;
		char *s = tc_arena_alloc(ar, n);
		if (!s)
			goto error;
		snprintf(s, n, "d_%s", def->tensors[t].name);
		g.adj[t] = s;
	}
	/* outputs: floating point, adjoints given */
	for (t = def->ninputs; t < def->ninputs + def->noutputs; t++) {
		if (!is_float(def->tensors[t].dtype)) {
			tc_error(d, def->tensors[t].loc,
				"gradient: output '%s' is %s; only floating-point outputs can be "
				"differentiated", def->tensors[t].name, tc_dtype_name(def->tensors[t].dtype));
			g.failed = 1;
		}
		g.have[t] = 1;
	}
	/* the inputs asked for */
	for (i = 0; i < nwrt; i++) {
		for (t = 0; t < def->ninputs; t++)
			if (!strcmp(def->tensors[t].name, wrt[i]))
				break;
		if (t == def->ninputs) {
			tc_buf b;
			tc_buf_init(&b);
			for (t = 0; t < def->ninputs; t++)
				tc_buf_printf(&b, "%s%s", t ? ", " : "", def->tensors[t].name);
			tc_error(d, def->name_loc, "gradient: '%s' is not an input of '%s' (its inputs: %s)",
				wrt[i], def->name, b.s ? b.s : "");
			tc_buf_free_diag(&b, d);
			g.failed = 1;
		} else if (!is_float(def->tensors[t].dtype)) {
			tc_error(d, def->tensors[t].loc,
				"gradient: input '%s' is %s; only floating-point inputs have a gradient",
				wrt[i], tc_dtype_name(def->tensors[t].dtype));
			g.failed = 1;
		} else {
			g.need[t] = 1;
		}
	}
	if (!nwrt)
		for (t = 0; t < def->ninputs; t++)
			g.need[t] = is_float(def->tensors[t].dtype);
	for (i = 0; i < def->nstmts && !g.failed; i++)
		check_stmt(&g, i);
	if (g.failed)
		goto error;
	/* temporaries whose adjoint is needed: those written from a needed one */
	do {
		changed = 0;
		for (i = 0; i < def->nstmts; i++) {
			const tc_stmt *s = def->stmts[i];
			if (def->tensors[s->tensor].kind == TC_TENSOR_TEMP && !g.need[s->tensor] &&
				is_float(def->tensors[s->tensor].dtype) && stmt_reads_needed(&g, s)) {
				g.need[s->tensor] = 1;
				changed = 1;
			}
		}
	} while (changed);
	/* the adjoints used must not clash with the def's names */
	for (t = 0; t < nt; t++)
		if ((g.need[t] || def->tensors[t].kind == TC_TENSOR_OUTPUT) &&
			name_taken(def, g.adj[t])) {
			tc_error(d, def->tensors[t].loc,
				"gradient: the adjoint of '%s' would be named '%s', which the def "
				"already uses", def->tensors[t].name, g.adj[t]);
			g.failed = 1;
		}
	if (g.failed)
		goto error;
	for (i = def->nstmts - 1; i >= 0 && !g.failed; i--)
		backward_stmt(&g, i);
	if (g.failed)
		goto error;
	/* temporaries read by recomputed temporaries (saved ones are given) */
	do {
		if (saves)
			break;
		changed = 0;
		for (i = def->nstmts - 1; i >= 0; i--) {
			const tc_stmt *s = def->stmts[i];
			if (g.recompute[s->tensor] && def->tensors[s->tensor].kind == TC_TENSOR_TEMP) {
				int before = 0, after = 0;
				for (t = 0; t < nt; t++)
					before += g.recompute[t];
				mark_temps(&g, s->rhs);
				for (t = 0; t < nt; t++)
					after += g.recompute[t];
				changed |= after != before;
			}
		}
	} while (changed);

	if (!(out = tc_arena_alloc(ar, sizeof(*out))))
		goto error;
	{
		size_t n = strlen(def->name) + 6;
		char *s = tc_arena_alloc(ar, n);
		if (!s)
			goto error;
		snprintf(s, n, "%s_grad", def->name);
		out->name = s;
	}
	/* inputs, the outputs (and with saves, the temporaries) the backward
	 * reads, the outputs' adjoints */
	out->nparams = def->nparams + def->noutputs;
	for (t = def->ninputs; t < def->ninputs + def->noutputs; t++)
		out->nparams += g.save[t];
	for (nsaved = 0, t = def->ninputs + def->noutputs; saves && t < nt; t++)
		nsaved += g.recompute[t];
	out->nparams += nsaved;
	out->params = tc_arena_alloc(ar, (size_t)(out->nparams + 1) * sizeof(tc_decl));
	if (!out->params)
		goto error;
	for (i = 0; i < def->nparams; i++)
		out->params[i] = def->params[i];
	for (t = def->ninputs; t < def->ninputs + def->noutputs; t++)
		if (g.save[t] && mk_decl(&g, &out->params[i++], def->tensors[t].name,
			def->tensors[t].dtype, t) < 0)
			goto error;
	for (t = def->ninputs + def->noutputs; saves && t < nt; t++)
		if (g.recompute[t] && mk_decl(&g, &out->params[i++], def->tensors[t].name,
			def->tensors[t].dtype, t) < 0)
			goto error;
	for (t = def->ninputs; t < def->ninputs + def->noutputs; t++)
		if (mk_decl(&g, &out->params[i++], g.adj[t], def->tensors[t].dtype, t) < 0)
			goto error;
	for (nret = 0, t = 0; t < def->ninputs; t++)
		nret += g.need[t];
	out->nrets = nret;
	out->rets = tc_arena_alloc(ar, (size_t)(nret + 1) * sizeof(tc_decl));
	if (!out->rets)
		goto error;
	for (nret = 0, t = 0; t < def->ninputs; t++)
		if (g.need[t] && mk_decl(&g, &out->rets[nret++], g.adj[t], def->tensors[t].dtype, t) < 0)
			goto error;
	/* recomputed temporaries, then the adjoint statements, then zeros */
	for (nfwd = 0, i = 0; i < def->nstmts && !saves; i++)
		nfwd += g.recompute[def->stmts[i]->tensor];
	out->nstmts = nfwd + g.stmts.n + nret;
	out->stmts = tc_arena_alloc(ar, (size_t)(out->nstmts + 1) * sizeof(tc_stmt *));
	if (!out->stmts)
		goto error;
	out->nstmts = 0;
	for (i = 0; i < def->nstmts && !saves; i++)
		if (g.recompute[def->stmts[i]->tensor])
			out->stmts[out->nstmts++] = def->stmts[i];
	for (i = 0; i < g.stmts.n; i++)
		out->stmts[out->nstmts++] = g.stmts.v[i];
	for (nret = 0, t = 0; t < def->ninputs; t++) {
		if (!g.need[t])
			continue;
		if (!g.have[t]) {
			tc_stmt *z = zero_stmt(&g, &out->rets[nret]);
			if (!z)
				goto error;
			out->stmts[out->nstmts++] = z;
		}
		nret++;
	}
	/* the forward with saves: the forward def returning the temporaries */
	if (nsaved) {
		tc_def *f = tc_arena_alloc(ar, sizeof(*f));
		size_t n = strlen(def->name) + 5;
		char *s = tc_arena_alloc(ar, n);
		if (!f || !s)
			goto error;
		snprintf(s, n, "%s_fwd", def->name);
		f->name = s;
		f->nparams = def->nparams;
		f->params = def->params;
		f->nstmts = def->nstmts;
		f->stmts = def->stmts;
		f->nrets = def->nrets + nsaved;
		if (!(f->rets = tc_arena_alloc(ar, (size_t)f->nrets * sizeof(tc_decl))))
			goto error;
		for (i = 0; i < def->nrets; i++)
			f->rets[i] = def->rets[i];
		for (t = def->ninputs + def->noutputs; t < nt; t++)
			if (g.recompute[t] && mk_decl(&g, &f->rets[i++], def->tensors[t].name,
				def->tensors[t].dtype, t) < 0)
				goto error;
		*fwd = f;
	}
	tc_vec_free(&g.stmts);
	if (tc_arena_failed(ar))
		return NULL;
	return out;
error:
	tc_vec_free(&g.stmts);
	return NULL;
}
