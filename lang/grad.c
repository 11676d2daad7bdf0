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
 * A tensor written again (an in-place update, '=' or '+=') gets a new
 * version (a "value") per write; the derivation works on the statements
 * with the values' names (make_values), and an adjoint that would be a
 * copy of the next version's is that adjoint itself (alias_adjoint).
 *
 * Supported: statements with '=', '+=!', '*=!', 'max=!' and 'min=!' (with
 * where ranges, exists clauses and lets, copied to the derived statements
 * that need them), in-place '=', '+=', 'max=' and 'min=' updates, pad, and
 * scatters with '+=!', '+=', 'max=!' or 'min=!'.  A read whose subscripts
 * are distinct index variables gives the statement above; over part of a
 * tensor, its adjoint is zero first and the statement adds to it.  A read
 * with other affine
 * subscripts (offsets, strides, constants, diagonals) gives a gather
 * (gather_stmt): each subscript solved for one variable, the solved ranges
 * as guards.  A gathered read (LUT(I(i), j)) or one whose subscripts no
 * variable can be solved for (A(2 * i), A(i % N)) gives a scatter
 * (scatter_stmt), guarded by the condition under which the forward reads
 * it (path_cond).  max=!/min=! send the gradient to the first term
 * attaining the result (arg_gate; an in-place max= counts the earlier value
 * first), *=! multiplies by the product of the other factors, exact at
 * zeros (product_factor).  Other constructs are located errors "... not
 * supported yet". */
#include "grad.h"
#include "range.h"

#include <stdio.h>
#include <string.h>

/* The state of one derivation. */
typedef struct grad_ctx {
	tc_arena *ar;
	const tc_def *def;
	tc_diags *d;
	int failed; /* an error was reported */
	/* Values: every write of a tensor that is not its first (an in-place
	 * update) makes a new version.  Value t is version 0 of tensor t, the
	 * later versions are numbered from ntensors on.  The last version of a
	 * tensor keeps its name; earlier versions of a tensor written several
	 * times are named T_v1, T_v2, ... in the backward text. */
	int nval;
	int *val_t;         /* the tensor of each value */
	int *final;         /* the value is its tensor's last version */
	const char **vname; /* each value's name */
	int *nver;          /* per tensor: its number of versions */
	int *stmt_val;      /* per forward statement: the value it writes */
	const tc_stmt **ss; /* per forward statement: it with values' names */
	const char **given; /* per tensor: the name of the given adjoint (outputs) */
	/* per value */
	const char **adj; /* adjoint name ("d_X") */
	int *need;        /* the adjoint is wanted */
	int *have;        /* the adjoint has a contribution (or is given) */
	int *ncontrib;    /* contributions emitted to the adjoint so far */
	int *recompute;   /* a temporary value recomputed (or saved, with saves) */
	int *save;        /* a returned value (an output) is an input of the backward */
	tc_vec stmts;     /* backward statements, in order */
	tc_vec whole;     /* those that write their whole tensor pointwise */
	const tc_stmt *cur; /* the forward statement differentiated (its lets) */
	int cur_si;         /* its number */
	int *let_used;    /* per where clause of cur: a derived statement needs it */
} grad_ctx;

static int is_float(tc_dtype t)
{
	return t == TC_T_F16 || t == TC_T_F32 || t == TC_T_F64 || t == TC_T_BF16;
}

/* ---- values (versions of tensors) ---- */


/* The value of tensor t that statement si reads: the one the last
 * statement before si writing t wrote (t itself for an input). */
static int read_val(const grad_ctx *g, int si, int t)
{
	int j;
	for (j = si - 1; j >= 0; j--)
		if (g->def->stmts[j]->tensor == t)
			return g->stmt_val[j];
	return t;
}

/* The value a read of a statement in g->ss names (by its name). */
static int val_of_read(const grad_ctx *g, const tc_expr *e)
{
	int t = e->ref_id, v;
	if (g->nver[t] == 1)
		return t;
	for (v = 0; v < g->nval; v++)
		if (g->val_t[v] == t && !strcmp(g->vname[v], e->name))
			return v;
	return t;
}

/* Whether value v is computed inside the backward def when it needs it (a
 * temporary, or an earlier version of a tensor) rather than given. */
static int temp_like(const grad_ctx *g, int v)
{
	return g->def->tensors[g->val_t[v]].kind == TC_TENSOR_TEMP || !g->final[v];
}

/* The backward def needs value v: recomputed (or saved) or, for the final
 * value of an output, an input. */
static void use_value(grad_ctx *g, int v)
{
	if (g->def->tensors[g->val_t[v]].kind == TC_TENSOR_INPUT)
		return;
	if (temp_like(g, v))
		g->recompute[v] = 1;
	else
		g->save[v] = 1;
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

static tc_expr *mk_int(grad_ctx *g, int64_t v)
{
	tc_expr *e = mk_node(g, TC_AST_INT, 0);
	if (e)
		e->ival = v;
	return e;
}

static tc_expr *mk_cast(grad_ctx *g, tc_dtype dt, tc_expr *a)
{
	tc_expr *e = mk_node(g, TC_AST_CAST, 1);
	if (!e)
		return NULL;
	e->cast_type = dt;
	e->args[0] = a;
	return e;
}

/* The size expression x of statement s as text (an expression of the
 * def's sizes, integer constants and s's index variables). */
static tc_expr *sx_expr(grad_ctx *g, const tc_stmt *s, const tc_sexpr *x)
{
	switch (x->kind) {
	case TC_SX_CONST:
		return mk_int(g, x->c);
	case TC_SX_PARAM:
		return mk_ident(g, g->def->sizes[x->id]);
	case TC_SX_VAR:
		return mk_ident(g, s->vars[x->id].name);
	case TC_SX_ADD: {
		/* the terms of the sum, positive ones first, constants last:
		 * N - K + 1 rather than N + -1 * K + 1 */
		const tc_sexpr *terms[64], *stack[64];
		tc_expr *r = NULL;
		int nt = 0, sp = 0, pass, i;
		stack[sp++] = x;
		while (sp && nt < 64) {
			const tc_sexpr *y = stack[--sp];
			if (y->kind == TC_SX_ADD && sp < 62) {
				stack[sp++] = y->b;
				stack[sp++] = y->a;
			} else {
				terms[nt++] = y;
			}
		}
		for (pass = 0; pass < 3; pass++)
			for (i = 0; i < nt; i++) {
				const tc_sexpr *y = terms[i];
				int neg = (y->kind == TC_SX_MUL || y->kind == TC_SX_CONST) && y->c < 0;
				tc_expr *t;
				if (y->kind == TC_SX_CONST ? pass != 2 : pass == 2 || (pass == 0) == neg)
					continue;
				if (y->kind == TC_SX_CONST)
					t = mk_int(g, neg ? -y->c : y->c);
				else if (y->kind == TC_SX_MUL && (y->c == 1 || y->c == -1))
					t = sx_expr(g, s, y->a);
				else if (y->kind == TC_SX_MUL)
					t = mk_bin(g, TC_AOP_MUL, mk_int(g, neg ? -y->c : y->c), sx_expr(g, s, y->a));
				else
					t = sx_expr(g, s, y);
				if (!r)
					r = neg ? mk_neg(g, t) : t;
				else
					r = mk_bin(g, neg ? TC_AOP_SUB : TC_AOP_ADD, r, t);
			}
		return r ? r : mk_int(g, 0);
	}
	case TC_SX_MUL:
		if (x->c == -1)
			return mk_neg(g, sx_expr(g, s, x->a));
		return mk_bin(g, TC_AOP_MUL, mk_int(g, x->c), sx_expr(g, s, x->a));
	case TC_SX_FLOORDIV:
		return mk_bin(g, TC_AOP_DIV, sx_expr(g, s, x->a), mk_int(g, x->c));
	case TC_SX_MOD:
		return mk_bin(g, TC_AOP_MOD, sx_expr(g, s, x->a), mk_int(g, x->c));
	case TC_SX_MIN:
		return mk_call(g, "min", sx_expr(g, s, x->a), sx_expr(g, s, x->b));
	case TC_SX_MAX:
		return mk_call(g, "max", sx_expr(g, s, x->a), sx_expr(g, s, x->b));
	}
	return NULL;
}

/* a && b, either NULL for true */
static tc_expr *mk_and(grad_ctx *g, tc_expr *a, tc_expr *b)
{
	if (!a)
		return b;
	if (!b)
		return a;
	return mk_bin(g, TC_AOP_AND, a, b);
}

/* ---- the derivative ---- */

static int expr_equal(const tc_expr *a, const tc_expr *b);

/* Whether e reads tensor t with the subscripts of the read r. */
static int same_read(const tc_expr *e, int t, const tc_expr *r)
{
	int i;
	if (!r || e->ref != TC_REF_TENSOR || e->ref_id != t || e->nargs != r->nargs)
		return 0;
	for (i = 0; i < e->nargs; i++)
		if (!expr_equal(e->args[i], r->args[i]))
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

static int var_of(const tc_stmt *s, const char *name);
static tc_expr *diff_pad(grad_ctx *g, const tc_expr *e, int t, const tc_expr *r);

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
		if (e->ref == TC_REF_PAD)
			return diff_pad(g, e, t, r);
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
	case TC_AST_BINARY: {
		/* an integer operand (a size: x / N) is cast to the operation's
		 * type, so that a constant derivative (-1.0 / N) does not compute
		 * in the weak literal's float32 */
		tc_expr *a = e->args[0], *b = e->args[1];
		if (!is_float(a->type) && (e->op == TC_AOP_MUL || e->op == TC_AOP_DIV))
			a = mk_cast(g, e->type, a);
		if (!is_float(b->type) && (e->op == TC_AOP_MUL || e->op == TC_AOP_DIV))
			b = mk_cast(g, e->type, b);
		da = diff(g, e->args[0], t, r);
		db = diff(g, e->args[1], t, r);
		switch (e->op) {
		case TC_AOP_ADD:
			return mk_add(g, da, db);
		case TC_AOP_SUB:
			return mk_sub(g, da, db);
		case TC_AOP_MUL:
			return mk_add(g, mk_mul(g, da, b), mk_mul(g, a, db));
		case TC_AOP_DIV:
			/* da / b - a db / (b b) */
			return mk_sub(g, mk_div(g, da, b),
				mk_div(g, mk_mul(g, a, db), mk_bin(g, TC_AOP_MUL, b, b)));
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

/* Check statement si of the def: its operator, where clauses, left side. */
static void check_stmt(grad_ctx *g, int si)
{
	const tc_def *def = g->def;
	const tc_stmt *s = def->stmts[si];
	const tc_tensor_info *ti = &def->tensors[s->tensor];
	int i;
	if (ti->first_write != si && s->red != TC_RED_ASSIGN && (s->red == TC_RED_MUL || s->init)) {
		tc_error(g->d, s->op_loc, "gradient: '%s' updates '%s' in place; only '=', '+=', "
			"'max=' and 'min=' updates are supported yet", tc_red_name(s->red, s->init),
			s->lhs);
		g->failed = 1;
		return;
	}
	/* a first '+=' adds to what the tensor holds, which no input gives: as
	 * '+=!' for the gradient; the first term of a first 'max=' is that
	 * content, whose value the derivation does not have */
	if (ti->first_write == si && s->red != TC_RED_ASSIGN && s->red != TC_RED_ADD && !s->init) {
		tc_error(g->d, s->op_loc, "gradient: a first '%s' statement is not supported yet "
			"(supported: '=', '+=', '+=!', '*=!', 'max=!' and 'min=!')",
			tc_red_name(s->red, s->init));
		g->failed = 1;
		return;
	}
	if (s->sub && s->red != TC_RED_ADD &&
		!((s->red == TC_RED_MAX || s->red == TC_RED_MIN) && s->init)) {
		int k = 0;
		while (!s->sub[k])
			k++;
		tc_error(g->d, s->sub[k]->loc, "gradient: a scatter with '%s' is not supported yet "
			"(supported: '+=!', '+=', 'max=!' and 'min=!')", tc_red_name(s->red, s->init));
		g->failed = 1;
		return;
	}
	if (s->red == TC_RED_ASSIGN && s->nvars > s->nidx) {
		tc_error(g->d, s->op_loc, "gradient: '=' with reduction indices is not supported");
		g->failed = 1;
		return;
	}
	for (i = 0; i < s->nidx && !s->sub; i++) /* a scatter writes what it names */
		if (!covers(s, i, ti->ext[i])) {
			tc_error(g->d, s->idx_loc[i],
				"gradient: '%s' ranges over only part of dimension %d of '%s'; partial "
				"writes are not supported yet", s->idx[i], i + 1, s->lhs);
			g->failed = 1;
			return;
		}
}

/* ---- assembling the backward def ---- */

/* Collect the tensor reads of e whose tensor's adjoint is wanted (first
 * occurrence of each distinct subscript list) into out. */
static void collect_reads(grad_ctx *g, const tc_expr *e, tc_vec *out)
{
	int i;
	if (e->kind == TC_AST_CALL && e->ref == TC_REF_TENSOR) {
		if (!g->need[val_of_read(g, e)])
			return;
		for (i = 0; i < out->n; i++)
			if (same_read(out->v[i], e->ref_id, e))
				return;
		if (tc_vec_push(out, (void *)e) < 0)
			g->failed = 1;
		return;
	}
	if (e->kind == TC_AST_IDENT && e->ref == TC_REF_TENSOR && g->need[val_of_read(g, e)]) {
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

/* Mark the forward values read in e (a text with values' names): the
 * temporaries for recomputation, the outputs as inputs of the backward. */
static void mark_temps(grad_ctx *g, const tc_expr *e)
{
	int i;
	if ((e->kind == TC_AST_CALL || e->kind == TC_AST_IDENT) && e->ref == TC_REF_TENSOR)
		use_value(g, val_of_read(g, e));
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
		if ((w->kind == TC_WHERE_EXISTS || (w->kind == TC_WHERE_LET && g->let_used[i])) &&
			bounded_in(w->val, name))
			return 1;
	}
	return 0;
}

/* A new backward statement lhs(idx) red rhs (init: the '!'). */
/* A read of name at the left-hand subscripts of s: its index names, and
 * for a scatter its gathers (d_T(I(i), j)). */
static tc_expr *lhs_read(grad_ctx *g, const char *name, const tc_stmt *s)
{
	tc_expr *e;
	int i;
	if (!s->sub)
		return mk_read(g, name, s->nidx, s->idx);
	if (!(e = mk_node(g, TC_AST_CALL, s->nidx)))
		return NULL;
	e->name = name;
	for (i = 0; i < s->nidx; i++)
		if (!(e->args[i] = s->sub[i] ? s->sub[i] : mk_ident(g, s->idx[i])))
			return NULL;
	return e;
}

static tc_stmt *mk_stmt(grad_ctx *g, const char *lhs, int nidx, const char **idx, tc_red red,
	int init, tc_expr *rhs)
{
	tc_stmt *b = tc_arena_alloc(g->ar, sizeof(*b));
	if (!b)
		return NULL;
	b->lhs = lhs;
	b->nidx = nidx;
	b->idx = idx;
	b->red = red;
	b->init = init;
	b->rhs = rhs;
	return b;
}

/* Give b the where ranges and exists clauses of g->cur, the lets marked
 * in g->let_used, and ranges for the nextra variables extra[] of g->cur
 * (their ranges in g->cur); the forward temporaries they read are
 * recomputed. */
static int attach_where(grad_ctx *g, tc_stmt *b, int nextra, const int *extra)
{
	const tc_stmt *s = g->cur;
	int v;
	for (v = 0; v < s->nwhere; v++)
		b->nwhere += s->where[v].kind != TC_WHERE_LET || g->let_used[v];
	b->nwhere += nextra;
	if (b->nwhere && !(b->where = tc_arena_alloc(g->ar, (size_t)b->nwhere * sizeof(tc_where))))
		return -1;
	b->nwhere = 0;
	for (v = 0; v < nextra; v++) {
		tc_where *w = &b->where[b->nwhere++];
		w->kind = TC_WHERE_RANGE;
		w->name = s->vars[extra[v]].name;
		w->lo = sx_expr(g, s, s->vars[extra[v]].lo);
		w->hi = sx_expr(g, s, s->vars[extra[v]].hi);
		if (!w->lo || !w->hi)
			return -1;
	}
	for (v = 0; v < s->nwhere; v++)
		if (s->where[v].kind != TC_WHERE_LET || g->let_used[v]) {
			b->where[b->nwhere++] = s->where[v];
			if (s->where[v].kind != TC_WHERE_RANGE)
				mark_temps(g, s->where[v].val);
		}
	return 0;
}

/* Append the backward temporary statement lhs(g->cur's left indices) red
 * rhs, with the where clauses rhs needs; 0 or -1. */
static int push_temp(grad_ctx *g, const char *lhs, tc_red red, tc_expr *rhs)
{
	const tc_stmt *s = g->cur;
	tc_stmt *b;
	int v;
	if (!lhs || !rhs || !(b = mk_stmt(g, lhs, s->nidx, s->idx, red, !s->sub, rhs)))
		return -1;
	b->sub = s->sub; /* a scatter's: after a statement giving the shape */
	for (v = 0; v < s->nwhere; v++)
		g->let_used[v] = 0;
	mark_lets(g, rhs);
	if (attach_where(g, b, 0, NULL) < 0)
		return -1;
	mark_temps(g, rhs);
	if (tc_vec_push(&g->stmts, b) < 0)
		return -1;
	return 0;
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

/* A name for a backward temporary, prefix_T, that the def does not use
 * (a number is appended where it does). */
static const char *fresh_name(grad_ctx *g, const char *prefix, const char *t)
{
	char buf[256];
	int k;
	snprintf(buf, sizeof(buf), "%s_%s", prefix, t);
	for (k = 2; name_taken(g->def, buf) && k < 1000; k++)
		snprintf(buf, sizeof(buf), "%s_%s_%d", prefix, t, k);
	return tc_arena_strdup(g->ar, buf);
}

/* The read of the forward statement's own tensor at its left indices,
 * which then is an input of the backward def (an output) or recomputed
 * (a temporary). */
static tc_expr *own_read(grad_ctx *g)
{
	use_value(g, g->stmt_val[g->cur_si]);
	return lhs_read(g, g->cur->lhs, g->cur);
}

/* For max=! and min=!: the condition under which the adjoint of the right
 * side flows, after a backward temporary that finds the first position
 * (in the interpreter's order: the reduction indices in order,
 * lexicographically) whose value is the result:
 *
 *   argmax_T(i) min=! e == T(i) ? int64(k0) * K1 + int64(k1) : <int64 max>
 *
 * and then the gradient flows where int64(k0) * K1 + int64(k1) ==
 * argmax_T(i).  A scatter's (T(I(i)) max=! e) numbers its indices that
 * no left-hand name is (i), in the same order, and its temporary is a
 * scatter too, after a statement that gives it T's shape:
 *
 *   argmax_T(i0) = <int64 max> where i0 in 0:V
 *   argmax_T(I(i)) min= e == T(I(i)) ? int64(i) : <int64 max>
 *
 * NULL with nothing emitted when there are no reduction indices (T is
 * e). */
static tc_stmt *fill_stmt(grad_ctx *g, const char *name, int t, const char *from);

static tc_expr *arg_gate(grad_ctx *g)
{
	const tc_stmt *s = g->cur;
	const tc_tensor_info *ti = &g->def->tensors[s->tensor];
	tc_expr *lin = NULL, *e = s->rhs, *rhs, *arg, **ext;
	const char *name;
	int64_t wc = 1;
	int v, j, next = 0, nl = tc_stmt_nlhs(s);
	if (s->nvars == nl)
		return NULL;
	if (!(ext = tc_arena_alloc(g->ar, (size_t)s->nvars * sizeof(*ext))))
		return NULL;
	/* lin = sum of k_j * (product of the extents after j), from the last;
	 * the products are int64 from their first factor int64(k_j) on */
	for (v = s->nvars - 1; v >= nl; v--) {
		const tc_sexpr *x = tc_sx_sub(g->ar, s->vars[v].hi, s->vars[v].lo);
		tc_expr *term = mk_cast(g, TC_T_I64, mk_ident(g, s->vars[v].name));
		int64_t c;
		if (!x)
			return NULL;
		if (wc != 1)
			term = mk_bin(g, TC_AOP_MUL, term, mk_int(g, wc));
		for (j = 0; j < next; j++)
			term = mk_bin(g, TC_AOP_MUL, term, ext[j]);
		lin = lin ? mk_bin(g, TC_AOP_ADD, term, lin) : term;
		if (!tc_sx_is_const(x, &c))
			ext[next++] = sx_expr(g, s, x);
		else if (__builtin_mul_overflow(wc, c, &wc)) {
			tc_error(g->d, s->op_loc, "gradient: the reduction of '%s' has more than "
				"2^63 terms; its arg-%s cannot be numbered", s->lhs,
				s->red == TC_RED_MAX ? "max" : "min");
			g->failed = 1;
			return NULL;
		}
	}
	if (e->type != ti->dtype)
		e = mk_cast(g, ti->dtype, e);
	rhs = mk_ternary(g, mk_bin(g, TC_AOP_EQ, e, own_read(g)), lin, mk_int(g, INT64_MAX));
	name = fresh_name(g, s->red == TC_RED_MAX ? "argmax" : "argmin", s->lhs);
	if (s->sub) { /* the shape first: a scatter does not define it */
		tc_stmt *f = fill_stmt(g, name, s->tensor, NULL);
		if (!f || !(f->rhs = mk_int(g, INT64_MAX)) || tc_vec_push(&g->stmts, f) < 0)
			return NULL;
	}
	if (push_temp(g, name, TC_RED_MIN, rhs) < 0)
		return NULL;
	arg = lhs_read(g, name, s);
	return mk_bin(g, TC_AOP_EQ, lin, arg);
}

/* For *=!: the product of the other factors, exact where factors are
 * zero, after two backward temporaries (the number of zero factors and
 * the product of the others):
 *
 *   zeros_T(i) +=! e == 0.0 ? 1 : 0
 *   prodnz_T(i) *=! e == 0.0 ? 1.0 : e
 *
 * giving zeros_T(i) == 0 ? prodnz_T(i) / e : (zeros_T(i) == 1 && e == 0.0 ?
 * prodnz_T(i) : 0.0).  NULL (the factor 1) without reduction indices. */
static tc_expr *product_factor(grad_ctx *g)
{
	const tc_stmt *s = g->cur;
	tc_expr *e = s->rhs, *iz, *z, *pnz;
	const char *zn, *pn;
	if (s->nvars == s->nidx)
		return NULL;
	iz = mk_bin(g, TC_AOP_EQ, e, mk_float(g, 0.0));
	zn = fresh_name(g, "zeros", s->lhs);
	pn = fresh_name(g, "prodnz", s->lhs);
	if (push_temp(g, zn, TC_RED_ADD, mk_ternary(g, iz, mk_int(g, 1), mk_int(g, 0))) < 0 ||
		push_temp(g, pn, TC_RED_MUL, mk_ternary(g, iz, mk_float(g, 1.0), e)) < 0)
		return NULL;
	z = mk_read(g, zn, s->nidx, s->idx);
	pnz = mk_read(g, pn, s->nidx, s->idx);
	return mk_ternary(g, mk_bin(g, TC_AOP_EQ, z, mk_int(g, 0)), mk_bin(g, TC_AOP_DIV, pnz, e),
		mk_ternary(g, mk_bin(g, TC_AOP_AND, mk_bin(g, TC_AOP_EQ, z, mk_int(g, 1)), iz), pnz,
			NULL));
}

/* Whether e reads tensor t. */
static int reads_tensor(const tc_expr *e, int t)
{
	int i;
	if ((e->kind == TC_AST_CALL || e->kind == TC_AST_IDENT) && e->ref == TC_REF_TENSOR &&
		e->ref_id == t)
		return 1;
	for (i = 0; i < e->nargs; i++)
		if (reads_tensor(e->args[i], t))
			return 1;
	return 0;
}

/* The number of statements that read value v (in their right side or
 * where clauses, or as the earlier value of an in-place +=, max= or min=). */
static int value_readers(const grad_ctx *g, int v)
{
	int si, w, t = g->val_t[v], n = 0;
	for (si = 0; si < g->def->nstmts; si++) {
		const tc_stmt *s = g->def->stmts[si];
		int hit;
		if (read_val(g, si, t) != v)
			continue;
		hit = reads_tensor(s->rhs, t) || (s->tensor == t && s->red != TC_RED_ASSIGN && !s->init);
		for (w = 0; w < s->nwhere && !hit; w++)
			hit = s->where[w].kind != TC_WHERE_RANGE && reads_tensor(s->where[w].val, t);
		n += hit;
	}
	return n;
}

/* Whether the adjoint of value v, whose first contribution is a copy of
 * the adjoint of value w at the same indices, can be that adjoint itself
 * (no copy): v is computed in the forward (not an input, whose adjoint is
 * returned), of w's type, and w's adjoint can take v's later
 * contributions (it is not the given input d_O, or nothing else reads v). */
static int alias_adjoint(grad_ctx *g, int v, int w)
{
	const tc_def *def = g->def;
	int tw = g->val_t[w];
	if (g->ncontrib[v] || def->tensors[g->val_t[v]].kind == TC_TENSOR_INPUT ||
		def->tensors[g->val_t[v]].dtype != def->tensors[tw].dtype)
		return 0;
	if (g->adj[w] == g->given[tw] && value_readers(g, v) > 1)
		return 0;
	g->adj[v] = g->adj[w];
	g->ncontrib[v] = 1;
	g->have[v] = 1;
	return 1;
}

/* The statement name(i0, ...) = 0.0 (or = from(i0, ...)) where i0 in 0:N0,
 * ... over the extents of tensor t: the adjoint of an input whose gradient
 * is zero, of a tensor read over part of its extent (the reads'
 * statements then add to it), or the copy of a given adjoint that
 * statements add to. */
static tc_stmt *fill_stmt(grad_ctx *g, const char *name, int t, const char *from)
{
	const tc_tensor_info *ti = &g->def->tensors[t];
	tc_stmt *b = tc_arena_alloc(g->ar, sizeof(*b));
	int i;
	if (!b)
		return NULL;
	b->lhs = name;
	b->nidx = b->nwhere = ti->ndim;
	b->idx = tc_arena_alloc(g->ar, (size_t)(ti->ndim + 1) * sizeof(*b->idx));
	b->where = tc_arena_alloc(g->ar, (size_t)(ti->ndim + 1) * sizeof(*b->where));
	if (!b->idx || !b->where)
		return NULL;
	for (i = 0; i < ti->ndim; i++) {
		char nm[32];
		snprintf(nm, sizeof(nm), "i%d", i);
		b->idx[i] = tc_arena_strdup(g->ar, nm);
		b->where[i].kind = TC_WHERE_RANGE;
		b->where[i].name = b->idx[i];
		b->where[i].lo = mk_int(g, 0);
		b->where[i].hi = sx_expr(g, NULL, ti->ext[i]);
		if (!b->idx[i] || !b->where[i].lo || !b->where[i].hi)
			return NULL;
	}
	b->rhs = from ? mk_read(g, from, ti->ndim, b->idx) : mk_float(g, 0.0);
	return b->rhs ? b : NULL;
}

/* The adjoint of value v gets the contribution dt, an expression at the
 * left indices of g->cur (which cover v's whole tensor) that is not a copy
 * of g->cur's adjoint (so never an alias of it). */
static void chain_gated(grad_ctx *g, int v, tc_expr *dt)
{
	const tc_stmt *s = g->cur;
	tc_stmt *b = mk_stmt(g, g->adj[v], s->nidx, s->idx,
		g->ncontrib[v] ? TC_RED_ADD : TC_RED_ASSIGN, 0, dt);
	if (!b || !dt || tc_vec_push(&g->stmts, b) < 0 || tc_vec_push(&g->whole, b) < 0) {
		g->failed = 1;
		return;
	}
	g->ncontrib[v]++;
	g->have[v] = 1;
}

/* The adjoint of value v gets the contribution dt (a read at the left
 * indices of g->cur, which cover v's whole tensor), when it is wanted. */
static void chain_adjoint(grad_ctx *g, int v, tc_expr *dt)
{
	const tc_stmt *s = g->cur;
	tc_stmt *b;
	if (!g->need[v] || alias_adjoint(g, v, g->stmt_val[g->cur_si]))
		return;
	/* a scatter's earlier version: every element, not the ones it names */
	if (s->sub && (b = fill_stmt(g, g->adj[v], s->tensor, g->adj[g->stmt_val[g->cur_si]])))
		b->red = g->ncontrib[v] ? TC_RED_ADD : TC_RED_ASSIGN;
	else if (!s->sub)
		b = mk_stmt(g, g->adj[v], s->nidx, s->idx,
			g->ncontrib[v] ? TC_RED_ADD : TC_RED_ASSIGN, 0, dt);
	if (!b || tc_vec_push(&g->stmts, b) < 0 || tc_vec_push(&g->whole, b) < 0) {
		g->failed = 1;
		return;
	}
	g->ncontrib[v]++;
	g->have[v] = 1;
}

/* Whether the read r has the left-hand indices of s as subscripts, in
 * order. */
static int same_subscripts(const tc_expr *r, const tc_stmt *s)
{
	int i;
	if (r->nargs != s->nidx || s->sub)
		return 0;
	for (i = 0; i < s->nidx; i++)
		if (strcmp(r->args[i]->name, s->idx[i]))
			return 0;
	return 1;
}

/* ---- reads with affine subscripts: the adjoint as a gather ---- */

/* An affine expression of the index variables of g->cur (numbers 0 to
 * nvars - 1) and of the new left-hand indices of a derived statement
 * (nvars on), with a constant term over the sizes. */
typedef struct aff {
	int64_t *c;
	const tc_sexpr *k;
} aff;

static int aff_init(grad_ctx *g, aff *a, int nv)
{
	a->c = tc_arena_alloc(g->ar, (size_t)(nv + 1) * sizeof(*a->c));
	a->k = tc_sx_const(g->ar, 0);
	return a->c && a->k ? 0 : -1;
}

/* a += m * b */
static void aff_add(grad_ctx *g, aff *a, const aff *b, int64_t m, int nv)
{
	int v;
	for (v = 0; v < nv; v++)
		a->c[v] += m * b->c[v];
	a->k = tc_sx_add(g->ar, a->k, tc_sx_scale(g->ar, m, b->k));
}

/* e (a subscript of g->cur) as an affine expression; 0 or -1 (not affine
 * in the index variables). */
static int aff_of(grad_ctx *g, const tc_expr *e, aff *a, int nv)
{
	const tc_sexpr *k;
	aff b;
	int v;
	if (aff_init(g, a, nv) < 0)
		return -1;
	if ((k = tc_range_sexpr(g->ar, e))) {
		a->k = k;
		return 0;
	}
	switch (e->kind) {
	case TC_AST_IDENT:
		if ((v = var_of(g->cur, e->name)) < 0)
			return -1;
		a->c[v] = 1;
		return 0;
	case TC_AST_CAST:
		return tc_dtype_is_int(e->cast_type) ? aff_of(g, e->args[0], a, nv) : -1;
	case TC_AST_UNARY:
		if (e->op != TC_AOP_NEG || aff_of(g, e->args[0], &b, nv) < 0)
			return -1;
		aff_add(g, a, &b, -1, nv);
		return 0;
	case TC_AST_BINARY:
		if (e->op == TC_AOP_ADD || e->op == TC_AOP_SUB) {
			if (aff_of(g, e->args[0], a, nv) < 0 || aff_of(g, e->args[1], &b, nv) < 0)
				return -1;
			aff_add(g, a, &b, e->op == TC_AOP_ADD ? 1 : -1, nv);
			return 0;
		}
		if (e->op == TC_AOP_MUL) {
			int64_t m;
			for (v = 0; v < 2; v++)
				if ((k = tc_range_sexpr(g->ar, e->args[v])) && tc_sx_is_const(k, &m)) {
					if (aff_of(g, e->args[1 - v], &b, nv) < 0)
						return -1;
					aff_add(g, a, &b, m, nv);
					return 0;
				}
		}
		return -1;
	default:
		return -1;
	}
}

/* a as text, with names[v] for variable v. */
static tc_expr *aff_expr(grad_ctx *g, const aff *a, const char *const *names, int nv)
{
	tc_expr *r = NULL;
	int64_t k;
	int v, pass;
	/* positive terms first: h - kh rather than -kh + h */
	for (pass = 0; pass < 2; pass++)
	for (v = 0; v < nv; v++) {
		int64_t c = a->c[v];
		tc_expr *t;
		if (!c || (pass == 0) != (c > 0))
			continue;
		t = mk_ident(g, names[v]);
		if (c != 1 && c != -1)
			t = mk_bin(g, TC_AOP_MUL, mk_int(g, c < 0 ? -c : c), t);
		if (!r)
			r = c < 0 ? mk_neg(g, t) : t;
		else
			r = mk_bin(g, c < 0 ? TC_AOP_SUB : TC_AOP_ADD, r, t);
	}
	if (tc_sx_is_const(a->k, &k)) {
		if (!r)
			return mk_int(g, k);
		if (k)
			r = mk_bin(g, k < 0 ? TC_AOP_SUB : TC_AOP_ADD, r, mk_int(g, k < 0 ? -k : k));
		return r;
	}
	return r ? mk_bin(g, TC_AOP_ADD, r, sx_expr(g, NULL, a->k)) : sx_expr(g, NULL, a->k);
}

/* ---- pad ---- */

/* acc && the bounds tests of pad's test T (docs/language.md 6.8) for the
 * reads in e, in the order they are evaluated (a gather's index read
 * before the subscript it gives), through lets and not inside a nested
 * pad, but for the reads of t with r's subscripts (where r's adjoint has
 * an element, r is in bounds) and for subscripts that are index variables
 * ranging inside their dimension. */
static tc_expr *pad_tests(grad_ctx *g, const tc_expr *e, int t, const tc_expr *r, tc_expr *acc)
{
	int i;
	if (e->kind == TC_AST_CALL && e->ref == TC_REF_PAD)
		return acc;
	if (e->kind == TC_AST_IDENT && e->ref == TC_REF_LET)
		return pad_tests(g, g->cur->where[e->ref_id].val, t, r, acc);
	for (i = 0; i < e->nargs; i++)
		acc = pad_tests(g, e->args[i], t, r, acc);
	if (e->kind != TC_AST_CALL || e->ref != TC_REF_TENSOR || same_read(e, t, r))
		return acc;
	for (i = 0; i < e->nargs; i++) {
		const tc_sexpr *ext = g->def->tensors[e->ref_id].ext[i];
		tc_expr *sub = e->args[i];
		int v, lo_ok = 0, hi_ok = 0;
		aff a;
		/* v + k with v ranging over lo:hi: a bound that lo + k >= 0 or
		 * hi + k <= ext implies for every size is no test */
		if (aff_of(g, sub, &a, g->cur->nvars) == 0) {
			int n = 0, u = -1;
			for (v = 0; v < g->cur->nvars; v++)
				if (a.c[v]) {
					n++;
					u = v;
				}
			if (n == 1 && a.c[u] == 1) {
				const tc_stmt_var *x = &g->cur->vars[u];
				lo_ok = tc_sx_sign(tc_sx_add(g->ar, x->lo, a.k)) == 1;
				hi_ok = tc_sx_sign(tc_sx_sub(g->ar, ext, tc_sx_add(g->ar, x->hi, a.k))) == 1;
			}
		}
		if (!lo_ok)
			acc = mk_and(g, acc, mk_bin(g, TC_AOP_GE, sub, mk_int(g, 0)));
		if (!hi_ok)
			acc = mk_and(g, acc, mk_bin(g, TC_AOP_LT, sub, sx_expr(g, NULL, ext)));
	}
	return acc;
}

static int reads_read(const tc_expr *e, const tc_expr *r);

/* pad(e, 0.0). */
static tc_expr *mk_pad(grad_ctx *g, tc_expr *e)
{
	tc_expr *c = mk_node(g, TC_AST_CALL, 2);
	if (!c)
		return NULL;
	c->name = "pad";
	c->ref = TC_REF_PAD;
	c->args[0] = e;
	c->args[1] = mk_float(g, 0.0);
	return c;
}

/* Whether every read of e that pad_tests tests (with t and r) is also
 * read in d. */
static int tested_in(grad_ctx *g, const tc_expr *e, int t, const tc_expr *r, const tc_expr *d)
{
	int i;
	if (e->kind == TC_AST_CALL && e->ref == TC_REF_PAD)
		return 1;
	if (e->kind == TC_AST_IDENT && e->ref == TC_REF_LET)
		return tested_in(g, g->cur->where[e->ref_id].val, t, r, d);
	for (i = 0; i < e->nargs; i++)
		if (!tested_in(g, e->args[i], t, r, d))
			return 0;
	return e->kind != TC_AST_CALL || e->ref != TC_REF_TENSOR || same_read(e, t, r) ||
		!pad_tests(g, e, -1, NULL, NULL) || reads_read(d, e);
}

/* Whether e reads r (the same tensor and subscripts), not inside a pad. */
static int reads_read(const tc_expr *e, const tc_expr *r)
{
	int i;
	if (e->kind == TC_AST_CALL && e->ref == TC_REF_PAD)
		return 0;
	if (same_read(e, r->ref_id, r))
		return 1;
	for (i = 0; i < e->nargs; i++)
		if (reads_read(e->args[i], r))
			return 1;
	return 0;
}

/* The derivative of pad(a, b) with respect to the read r of t: T' ? da :
 * db, where T' is pad's test without r's own bounds (pad_tests): at an
 * element of r's adjoint r is in bounds, so the gradient reaches it
 * through a where the other reads of a are in bounds too, and through b
 * where one of them is not.  A padded convolution's input gradient is
 * then a gather of the output's adjoint (gather_stmt), its weight
 * gradient a sum over pad(I(...), 0.0) as the forward's. */
static tc_expr *diff_pad(grad_ctx *g, const tc_expr *e, int t, const tc_expr *r)
{
	tc_expr *da = diff(g, e->args[0], t, r), *db = diff(g, e->args[1], t, r), *test;
	if (!da && !db)
		return NULL;
	test = pad_tests(g, e->args[0], t, r, NULL);
	if (!test)
		return da;
	/* where da reads every read the test tests, the test is pad's own:
	 * pad(da, 0.0) (a padded factor of a sum restricts its domain) */
	if (!db && tested_in(g, e->args[0], t, r, da))
		return mk_pad(g, da);
	return mk_ternary(g, test, da, db);
}

/* The state of one gather: substitutions of solved variables. */
typedef struct gather {
	int nv;             /* the variables of g->cur, then one per dimension */
	const char **names; /* their names */
	aff **sub;          /* per variable of g->cur: its value, or NULL */
} gather;

/* e (a part of a derivative of g->cur) with the solved variables
 * replaced by their values, lets inlined. */
static tc_expr *gather_expr(grad_ctx *g, gather *ga, tc_expr *e)
{
	tc_expr *c;
	int i, v;
	if (e->kind == TC_AST_IDENT && e->ref == TC_REF_LET)
		return gather_expr(g, ga, g->cur->where[e->ref_id].val);
	if (e->kind == TC_AST_IDENT && (v = var_of(g->cur, e->name)) >= 0 &&
		(e->ref == TC_REF_INDEX || e->ref == TC_REF_NONE))
		return ga->sub[v] ? aff_expr(g, ga->sub[v], ga->names, ga->nv) : e;
	if (!e->nargs)
		return e;
	/* an affine integer expression of the indices (a subscript in a
	 * test of pad's, diff_pad) with the solutions substituted, simplified:
	 * i + 2, not (i + 1) + 1 */
	if ((e->kind == TC_AST_BINARY || e->kind == TC_AST_UNARY) && tc_dtype_is_int(e->type)) {
		aff a;
		if (aff_of(g, e, &a, ga->nv) == 0) {
			for (v = 0; v < g->cur->nvars; v++)
				if (ga->sub[v] && a.c[v]) {
					int64_t m = a.c[v];
					a.c[v] = 0;
					aff_add(g, &a, ga->sub[v], m, ga->nv);
				}
			return aff_expr(g, &a, ga->names, ga->nv);
		}
	}
	if (!(c = tc_arena_alloc(g->ar, sizeof(*c))) ||
		!(c->args = tc_arena_alloc(g->ar, (size_t)e->nargs * sizeof(*c->args))))
		return e;
	{
		tc_expr **args = c->args;
		*c = *e;
		c->args = args;
	}
	for (i = 0; i < e->nargs; i++) {
		aff a;
		if (e->kind == TC_AST_CALL && e->ref != TC_REF_BUILTIN &&
			aff_of(g, e->args[i], &a, ga->nv) == 0) {
			for (v = 0; v < g->cur->nvars; v++)
				if (ga->sub[v] && a.c[v]) {
					int64_t m = a.c[v];
					a.c[v] = 0;
					aff_add(g, &a, ga->sub[v], m, ga->nv);
				}
			c->args[i] = aff_expr(g, &a, ga->names, ga->nv);
		} else {
			c->args[i] = gather_expr(g, ga, e->args[i]);
		}
	}
	return c;
}

static int reads_name(const tc_expr *e, const char *name);

/* Whether a read of the tensor named name is a factor of the product e
 * (the only read of it in e). */
static int factor_read(const tc_expr *e, const char *name)
{
	if (e->kind == TC_AST_BINARY && e->op == TC_AOP_MUL)
		return (factor_read(e->args[0], name) && !reads_name(e->args[1], name)) ||
			(factor_read(e->args[1], name) && !reads_name(e->args[0], name));
	return (e->kind == TC_AST_CALL || e->kind == TC_AST_IDENT) && e->name &&
		e->ref != TC_REF_BUILTIN && !strcmp(e->name, name);
}

/* e with its reads of the tensor named name written pad(read, 0.0). */
static tc_expr *pad_reads(grad_ctx *g, tc_expr *e, const char *name)
{
	tc_expr *c;
	int i;
	if ((e->kind == TC_AST_CALL || e->kind == TC_AST_IDENT) && e->ref != TC_REF_BUILTIN &&
		e->ref != TC_REF_PAD && e->name && !strcmp(e->name, name))
		return (c = mk_pad(g, e)) ? c : e;
	if (!e->nargs || !(c = tc_arena_alloc(g->ar, sizeof(*c))))
		return e;
	*c = *e;
	if (!(c->args = tc_arena_alloc(g->ar, (size_t)e->nargs * sizeof(*c->args))))
		return e;
	for (i = 0; i < e->nargs; i++)
		c->args[i] = pad_reads(g, e->args[i], name);
	return c;
}

/* Whether the read r's subscripts are distinct index variables. */
static int plain_read(const grad_ctx *g, const tc_expr *r)
{
	int i, j;
	for (i = 0; i < r->nargs; i++) {
		if (r->args[i]->kind != TC_AST_IDENT || var_of(g->cur, r->args[i]->name) < 0)
			return 0;
		for (j = 0; j < i; j++)
			if (!strcmp(r->args[j]->name, r->args[i]->name))
				return 0;
	}
	return 1;
}

/* Whether e reads a tensor (or an adjoint). */
static int reads_any(const tc_expr *e)
{
	int i;
	if (e->kind == TC_AST_CALL && e->ref != TC_REF_BUILTIN)
		return 1;
	if (e->kind == TC_AST_IDENT && e->ref == TC_REF_TENSOR)
		return 1;
	for (i = 0; i < e->nargs; i++)
		if (reads_any(e->args[i]))
			return 1;
	return 0;
}

/* Whether the plain read r of tensor x stays within x: each variable's
 * range is provably inside its dimension. */
static int read_within(grad_ctx *g, const tc_expr *r, int x)
{
	const tc_stmt *s = g->cur;
	int i;
	for (i = 0; i < r->nargs; i++) {
		const tc_stmt_var *v = &s->vars[var_of(s, r->args[i]->name)];
		if (tc_sx_sign(v->lo) != 1 ||
			tc_sx_sign(tc_sx_sub(g->ar, g->def->tensors[x].ext[i], v->hi)) != 1)
			return 0;
	}
	return 1;
}

/* A name for a new index variable of the derived statement: base, or base
 * with a number, not used by g->cur's variables, the def or names[0..n). */
static const char *fresh_index(grad_ctx *g, const char *base, const char *const *names, int n)
{
	char buf[64];
	int k, i, taken;
	for (k = 0; k < 1000; k++) {
		if (k)
			snprintf(buf, sizeof(buf), "%s%d", base, k);
		else
			snprintf(buf, sizeof(buf), "%s", base);
		taken = var_of(g->cur, buf) >= 0 || name_taken(g->def, buf);
		for (i = 0; i < n && !taken; i++)
			taken = names[i] && !strcmp(names[i], buf);
		if (!taken)
			return tc_arena_strdup(g->ar, buf);
	}
	return NULL;
}

/* Whether the solution sol of variable v of s is the new index y alone and
 * v ranges over 0:ext, the whole dimension y ranges over. */
static int is_plain_dim(grad_ctx *g, const aff *sol, int y, const tc_stmt *s, int v,
	const tc_sexpr *ext)
{
	int64_t k;
	int u;
	(void)g;
	for (u = 0; u < y + 1; u++)
		if (sol->c[u] != (u == y))
			return 0;
	return tc_sx_is_const(sol->k, &k) && k == 0 && covers(s, v, ext);
}

/* Whether the read r has a gathered subscript (one that reads a tensor). */
static int gathered_read(grad_ctx *g, const tc_expr *r)
{
	int d;
	(void)g;
	for (d = 0; d < r->nargs; d++)
		if (reads_any(r->args[d]))
			return 1;
	return 0;
}

/* Whether e uses an index variable of g->cur (through lets). */
static int uses_var(grad_ctx *g, const tc_expr *e)
{
	int i;
	if (e->kind == TC_AST_IDENT && e->ref == TC_REF_LET)
		return uses_var(g, g->cur->where[e->ref_id].val);
	if (e->kind == TC_AST_IDENT && e->ref != TC_REF_SIZE && var_of(g->cur, e->name) >= 0)
		return 1;
	for (i = 0; i < e->nargs; i++)
		if (uses_var(g, e->args[i]))
			return 1;
	return 0;
}

/* Whether the subscript e is an index variable shifted by sizes and
 * constants (i + 1, i - N, 1 + i), which a scatter's left side may not
 * be (sema's rule, docs/language.md 5.5). */
static int shift_form(grad_ctx *g, const tc_expr *e)
{
	const tc_expr *a, *b;
	if (e->kind != TC_AST_BINARY || (e->op != TC_AOP_ADD && e->op != TC_AOP_SUB))
		return 0;
	a = e->args[0];
	b = e->args[1];
	if (a->kind == TC_AST_IDENT && var_of(g->cur, a->name) >= 0 && !uses_var(g, b))
		return 1;
	return e->op == TC_AOP_ADD && b->kind == TC_AST_IDENT && var_of(g->cur, b->name) >= 0 &&
		!uses_var(g, a);
}

/* !c, a comparison flipped (a < b for !(a >= b)). */
static tc_expr *mk_not(grad_ctx *g, tc_expr *c)
{
	static const struct {
		tc_ast_op op, neg;
	} flip[] = {{TC_AOP_LT, TC_AOP_GE}, {TC_AOP_GE, TC_AOP_LT}, {TC_AOP_GT, TC_AOP_LE},
		{TC_AOP_LE, TC_AOP_GT}, {TC_AOP_EQ, TC_AOP_NE}, {TC_AOP_NE, TC_AOP_EQ}};
	tc_expr *e;
	size_t i;
	if (c->kind == TC_AST_BINARY)
		for (i = 0; i < sizeof(flip) / sizeof(flip[0]); i++)
			if (c->op == flip[i].op)
				return mk_bin(g, flip[i].neg, c->args[0], c->args[1]);
	if (!(e = mk_node(g, TC_AST_UNARY, 1)))
		return NULL;
	e->op = TC_AOP_NOT;
	e->args[0] = c;
	return e;
}

/* a || b where either may be NULL (true: the result is true). */
static tc_expr *mk_or(grad_ctx *g, tc_expr *a, tc_expr *b)
{
	return a && b ? mk_bin(g, TC_AOP_OR, a, b) : NULL;
}

/* The condition under which the forward expression e (of g->cur)
 * evaluates the read r: *found is set where e reads r at all, and the
 * result is NULL where it reads it whatever the values (else the
 * condition: the branch of a ?:, the right of && or ||, pad's first
 * argument where the reads are in bounds; several paths are or-ed). */
static tc_expr *path_cond(grad_ctx *g, const tc_expr *e, const tc_expr *r, int *found)
{
	tc_expr *c[3] = {NULL, NULL, NULL}, *acc = NULL;
	int f[3] = {0, 0, 0}, i, any = 0, always = 0;
	*found = 0;
	if (same_read(e, r->ref_id, r)) {
		*found = 1;
		return NULL;
	}
	if (e->kind == TC_AST_IDENT && e->ref == TC_REF_LET)
		return path_cond(g, g->cur->where[e->ref_id].val, r, found);
	if (e->kind == TC_AST_TERNARY || (e->kind == TC_AST_BINARY &&
		(e->op == TC_AOP_AND || e->op == TC_AOP_OR)) ||
		(e->kind == TC_AST_CALL && e->ref == TC_REF_PAD)) {
		tc_expr *test = e->kind == TC_AST_TERNARY ? e->args[0]
			: e->kind == TC_AST_BINARY ? e->args[0] : pad_tests(g, e->args[0], -1, NULL, NULL);
		for (i = 0; i < e->nargs; i++)
			c[i] = path_cond(g, e->args[i], r, &f[i]);
		if (e->kind == TC_AST_TERNARY) {
			if (f[0]) { /* the condition is always evaluated */
				*found = 1;
				return c[0];
			}
			if (f[1])
				c[1] = mk_and(g, test, c[1]);
			if (f[2])
				c[2] = mk_and(g, mk_not(g, test), c[2]);
			*found = f[1] || f[2];
			return f[1] && f[2] ? mk_or(g, c[1], c[2]) : f[1] ? c[1] : c[2];
		}
		if (e->kind == TC_AST_BINARY) { /* the left always, the right sometimes */
			if (f[0]) {
				*found = 1;
				return c[0];
			}
			*found = f[1];
			return f[1] ? mk_and(g, e->op == TC_AOP_AND ? test : mk_not(g, test), c[1]) : NULL;
		}
		/* pad(x, v): x where its reads are in bounds (test NULL: always) */
		if (f[0])
			c[0] = mk_and(g, test, c[0]);
		if (f[1])
			c[1] = test ? mk_and(g, mk_not(g, test), c[1]) : NULL;
		*found = f[0] || (f[1] && test);
		return f[0] && f[1] && test ? mk_or(g, c[0], c[1]) : f[0] ? c[0] : c[1];
	}
	for (i = 0; i < e->nargs; i++) {
		int fi;
		tc_expr *ci = path_cond(g, e->args[i], r, &fi);
		if (!fi)
			continue;
		always |= !ci;
		acc = any ? mk_or(g, acc, ci) : ci;
		any = 1;
	}
	*found = any;
	return always ? NULL : acc;
}

/* Whether c is one of the conjuncts (&&) of test. */
static int has_conjunct(const tc_expr *test, const tc_expr *c)
{
	if (test->kind == TC_AST_BINARY && test->op == TC_AOP_AND)
		return has_conjunct(test->args[0], c) || has_conjunct(test->args[1], c);
	return expr_equal(test, c);
}

/* test ? p : 0, as one ?: where p is c ? x : 0 with c reading nothing
 * (a conjunction of comparisons restricts a sum's domain: docs/language.md
 * 6.8); p where test is NULL. */
static tc_expr *guarded(grad_ctx *g, tc_expr *test, tc_expr *p)
{
	if (!test)
		return p;
	while (p->kind == TC_AST_TERNARY && p->args[2]->kind == TC_AST_FLOAT &&
		p->args[2]->fval == 0.0 && !reads_any(p->args[0])) {
		if (!has_conjunct(test, p->args[0]))
			test = mk_and(g, test, p->args[0]);
		p = p->args[1];
	}
	return mk_ternary(g, test, p, NULL);
}

/* The contribution of p to the adjoint of a gathered read (LUT(I(i), j)):
 * the scatter d_LUT(I(i), j) +=! p, whose cost is linear in the reads.
 * The other subscripts must be index variables (distinct); every variable
 * of the statement is summed over its range (a where clause where no read
 * of p or of a gathered subscript bounds it). */
static tc_stmt *scatter_stmt(grad_ctx *g, const tc_expr *r, int xv, tc_expr *p)
{
	const tc_stmt *s = g->cur;
	const tc_def *def = g->def;
	int nd = r->nargs, d, v, nw = 0;
	const char **idx = tc_arena_alloc(g->ar, (size_t)(nd + 1) * sizeof(*idx));
	tc_expr **sub = tc_arena_alloc(g->ar, (size_t)(nd + 1) * sizeof(*sub));
	int *extra = tc_arena_alloc(g->ar, (size_t)(s->nvars + 1) * sizeof(*extra));
	tc_stmt *b;
	if (!idx || !sub || !extra)
		return NULL;
	for (d = 0; d < nd; d++) {
		const tc_expr *a = r->args[d];
		if (reads_any(a)) {
			sub[d] = (tc_expr *)a;
			continue;
		}
		if (a->kind != TC_AST_IDENT || var_of(s, a->name) < 0) {
			/* 2 * i, i % N: a scatter's subscript; a shifted index is
			 * not one (docs/language.md 5.5) */
			if (shift_form(g, a)) {
				tc_error(g->d, a->loc, "gradient: subscript %d of '%s' is a shifted "
					"index beside a subscript that cannot be solved for an index; "
					"not supported yet", d + 1, def->tensors[r->ref_id].name);
				g->failed = 1;
				return NULL;
			}
			sub[d] = (tc_expr *)a;
			continue;
		}
		for (v = 0; v < d; v++)
			if (idx[v] && !strcmp(idx[v], a->name)) {
				tc_error(g->d, a->loc, "gradient: '%s' is read with the index variable "
					"'%s' twice in a gathered read; not supported yet",
					def->tensors[r->ref_id].name, a->name);
				g->failed = 1;
				return NULL;
			}
		idx[d] = a->name;
	}
	if (!(b = mk_stmt(g, g->adj[xv], nd, idx, TC_RED_ADD, !g->ncontrib[xv], p)))
		return NULL;
	b->sub = sub;
	for (v = 0; v < s->nvars; v++) {
		int bounded = bounded_in(p, s->vars[v].name);
		for (d = 0; d < nd && !bounded; d++)
			bounded = sub[d] && bounded_in(sub[d], s->vars[v].name);
		if (!bounded)
			extra[nw++] = v;
	}
	for (v = 0; v < s->nwhere; v++)
		g->let_used[v] = 0;
	mark_lets(g, p);
	if (attach_where(g, b, nw, extra) < 0)
		return NULL;
	for (d = 0; d < nd; d++)
		if (sub[d])
			mark_temps(g, sub[d]);
	return b;
}

/* The contribution of p (the derivative of g->cur times its adjoint) to
 * the adjoint of the read r (of tensor x, value xv) whose subscripts are
 * affine but not distinct index variables: the scatter d_X(f(i)) += p(i)
 * written as a gather.  Each dimension's subscript solves for one index
 * variable with coefficient 1 or -1 (which then names that dimension of
 * d_X: I(h + kh) gives d_I(h, ...) with the old h being h - kh); the range
 * of a solved variable becomes a guard, and a subscript without an
 * unsolved variable (a constant, a diagonal) an equality guard.  The other
 * variables are summed over their ranges. */
static tc_stmt *gather_stmt(grad_ctx *g, const tc_expr *r, int x, int xv, tc_expr *p,
	int *unsolvable)
{
	const tc_stmt *s = g->cur;
	const tc_tensor_info *ti = &g->def->tensors[x];
	int nvars = s->nvars, nd = r->nargs, v, d, nfree = 0, nw = 0, *plain, *ranged;
	gather ga;
	tc_expr *guard = NULL, *dguard = NULL;
	const char **idx;
	tc_stmt *b;
	ga.nv = nvars + nd;
	if (!(plain = tc_arena_alloc(g->ar, (size_t)(nvars + 1) * sizeof(*plain))) ||
		!(ranged = tc_arena_alloc(g->ar, (size_t)(nd + 1) * sizeof(*ranged))))
		return NULL;
	ga.names = tc_arena_alloc(g->ar, (size_t)(ga.nv + 1) * sizeof(*ga.names));
	ga.sub = tc_arena_alloc(g->ar, (size_t)(nvars + 1) * sizeof(*ga.sub));
	idx = tc_arena_alloc(g->ar, (size_t)(nd + 1) * sizeof(*idx));
	if (!ga.names || !ga.sub || !idx)
		return NULL;
	for (v = 0; v < nvars; v++)
		ga.names[v] = s->vars[v].name;
	for (d = 0; d < nd; d++) {
		aff a;
		int piv = -1;
		if (aff_of(g, r->args[d], &a, ga.nv) < 0) {
			*unsolvable = 1; /* i % N, i / 2: the caller scatters */
			return NULL;
		}
		for (v = 0; v < nvars; v++)
			if (ga.sub[v] && a.c[v]) {
				int64_t m = a.c[v];
				a.c[v] = 0;
				aff_add(g, &a, ga.sub[v], m, ga.nv);
			}
		/* solve for a variable with coefficient +-1: a left-hand one first */
		for (v = 0; v < nvars; v++)
			if ((a.c[v] == 1 || a.c[v] == -1) && (piv < 0 || (piv >= s->nidx && v < s->nidx)))
				piv = v;
		if (piv >= 0) {
			aff *sol = tc_arena_alloc(g->ar, sizeof(*sol));
			int64_t c = a.c[piv];
			if (!sol || aff_init(g, sol, ga.nv) < 0)
				return NULL;
			/* y = c piv + rest, so piv = c (y - rest) */
			a.c[piv] = 0;
			aff_add(g, sol, &a, -c, ga.nv);
			sol->c[nvars + d] = c;
			ga.sub[piv] = sol;
			/* y is named after a left-hand index it replaces (I(h + kh)
			 * gives d_I(h) with the old h being h - kh); after the dimension
			 * where a reduction index is solved for */
			ga.names[nvars + d] = piv < s->nidx || r->args[d]->kind == TC_AST_IDENT ?
				s->vars[piv].name : fresh_index(g, "x", ga.names + nvars, d);
			if (!ga.names[nvars + d])
				return NULL;
			/* a plain index over the whole dimension needs no guard */
			if (is_plain_dim(g, sol, nvars + d, s, piv, ti->ext[d]))
				plain[piv] = 1;
		} else {
			for (v = 0; v < nvars; v++)
				if (a.c[v]) {
					*unsolvable = 1; /* 2 * i: the caller scatters */
					return NULL;
				}
			if (!(ga.names[nvars + d] = fresh_index(g, "x", ga.names + nvars, d)))
				return NULL;
			/* the equality y = a */
			guard = mk_and(g, guard, mk_bin(g, TC_AOP_EQ, mk_ident(g, ga.names[nvars + d]),
				aff_expr(g, &a, ga.names, ga.nv)));
		}
		idx[d] = ga.names[nvars + d];
	}
	/* the solved variables' ranges are guards; the others are summed.  A
	 * left-hand variable of s ranging over its whole dimension of T is a
	 * subscript of the adjoint read d_T(...), which is then read as
	 * pad(d_T(...), 0.0): its bounds tests are that guard, and a factor
	 * pad(e, 0.0) of a sum restricts the statement's domain (loop bounds,
	 * not a test per term: docs/language.md 6.8) */
	for (v = 0; v < nvars; v++) {
		tc_expr *e;
		if (!ga.sub[v]) {
			nfree++;
			continue;
		}
		if (plain[v])
			continue;
		/* lo <= vars + k < hi as lo - k <= vars < hi - k; where vars is
		 * one new index y alone, which ranges over 0:ext, a bound that
		 * 0:ext implies for every size is no test (shift_right's
		 * d_A(i) = d_O(i + 1) needs none) */
		{
			aff a = *ga.sub[v];
			const tc_sexpr *k = a.k, *lo, *hi, *ext = NULL;
			tc_expr *c = NULL;
			int y = -1, u;
			a.k = tc_sx_const(g->ar, 0);
			for (u = 0; u < ga.nv; u++)
				if (a.c[u])
					y = y < 0 && u >= nvars && a.c[u] == 1 ? u : ga.nv;
			if (y >= 0 && y < ga.nv)
				ext = ti->ext[y - nvars];
			lo = tc_sx_sub(g->ar, s->vars[v].lo, k);
			hi = tc_sx_sub(g->ar, s->vars[v].hi, k);
			e = aff_expr(g, &a, ga.names, ga.nv);
			if (!ext || tc_sx_sign(tc_sx_sub(g->ar, tc_sx_const(g->ar, 0), lo)) != 1)
				c = mk_bin(g, TC_AOP_GE, e, sx_expr(g, s, lo));
			else /* y's range comes from d_X's extent then, not from reads */
				ranged[y - nvars] = 1;
			if (!ext || tc_sx_sign(tc_sx_sub(g->ar, hi, ext)) != 1)
				c = mk_and(g, c, mk_bin(g, TC_AOP_LT, e, sx_expr(g, s, hi)));
			else
				ranged[y - nvars] = 1;
			if (!c)
				continue;
			if (v < s->nidx && covers(s, v, g->def->tensors[s->tensor].ext[v]))
				dguard = mk_and(g, dguard, c);
			else
				guard = mk_and(g, guard, c);
		}
	}
	p = gather_expr(g, &ga, p);
	/* the tests of the adjoint read's subscripts (dguard) are pad's, in a
	 * sum whose product has that read as a factor; else a guard */
	if (dguard) {
		const char *dname = g->adj[g->stmt_val[g->cur_si]];
		if ((nfree || g->ncontrib[xv]) && factor_read(p, dname))
			p = pad_reads(g, p, dname);
		else
			guard = mk_and(g, dguard, guard);
	}
	/* g ? (c ? x : 0) : 0 is g && c ? x : 0, where c reads no tensor (a
	 * read in a condition bounds indices: range inference, 9.1) */
	while (p->kind == TC_AST_TERNARY && p->args[2]->kind == TC_AST_FLOAT &&
		p->args[2]->fval == 0.0 && !reads_any(p->args[0])) {
		guard = mk_and(g, guard, p->args[0]);
		p = p->args[1];
	}
	if (!(b = mk_stmt(g, g->adj[xv], nd, idx, TC_RED_ASSIGN, 0,
		      guard ? mk_ternary(g, guard, p, NULL) : p)))
		return NULL;
	if (g->ncontrib[xv])
		b->red = TC_RED_ADD;
	else if (nfree) {
		b->red = TC_RED_ADD;
		b->init = 1;
	}
	/* ranges: the summed variables', and the new indices' where the
	 * adjoint's extents are not known yet (a temporary's first write) */
	if (xv >= g->def->ninputs && !g->ncontrib[xv])
		for (d = 0; d < nd; d++)
			ranged[d] = 1;
	for (b->nwhere = nfree, d = 0; d < nd; d++)
		b->nwhere += ranged[d];
	if (b->nwhere && !(b->where = tc_arena_alloc(g->ar, (size_t)b->nwhere * sizeof(tc_where))))
		return NULL;
	for (v = 0; v < nvars; v++)
		if (!ga.sub[v]) {
			tc_where *w = &b->where[nw++];
			w->kind = TC_WHERE_RANGE;
			w->name = s->vars[v].name;
			w->lo = sx_expr(g, s, s->vars[v].lo);
			w->hi = sx_expr(g, s, s->vars[v].hi);
		}
	for (d = 0; d < nd; d++) {
		tc_where *w;
		if (!ranged[d])
			continue;
		w = &b->where[nw++];
		w->kind = TC_WHERE_RANGE;
		w->name = idx[d];
		w->lo = mk_int(g, 0);
		w->hi = sx_expr(g, NULL, ti->ext[d]);
	}
	return b;
}

/* The contributions of forward statement si to the wanted adjoints. */
static void backward_stmt(grad_ctx *g, int si)
{
	const tc_def *def = g->def;
	const tc_stmt *s = g->ss[si];
	tc_vec reads = {0};
	tc_expr *dt, *first_p = NULL, *first_read = NULL, *gate = NULL, *factor = NULL;
	tc_expr *prev_gate = NULL;
	int i, v, w = g->stmt_val[si], nextra, *extra, whole;
	if (!g->have[w])
		return;
	if (!(extra = tc_arena_alloc(g->ar, (size_t)(s->nvars + 1) * sizeof(*extra))))
		return;
	collect_reads(g, s->rhs, &reads);
	for (i = 0; i < s->nwhere; i++)
		if (s->where[i].kind == TC_WHERE_LET)
			collect_reads(g, s->where[i].val, &reads);
	g->cur = s;
	g->cur_si = si;
	if (s->nwhere && !(g->let_used = tc_arena_alloc(g->ar, (size_t)s->nwhere * sizeof(int))))
		return;
	dt = lhs_read(g, g->adj[w], s);
	/* an in-place T(i) += e: the earlier version's adjoint is T's */
	if (s->red == TC_RED_ADD && !s->init && def->tensors[s->tensor].first_write != si)
		chain_adjoint(g, read_val(g, si, s->tensor), dt);
	/* an in-place T(i) max= e: the earlier version is the first term, so
	 * it gets the gradient where it attains the result (ties included),
	 * and e's terms only where it does not */
	if ((s->red == TC_RED_MAX || s->red == TC_RED_MIN) && !s->init &&
		def->tensors[s->tensor].first_write != si) {
		int u = read_val(g, si, s->tensor);
		tc_expr *prev = mk_read(g, g->vname[u], s->nidx, s->idx);
		if (g->need[u]) {
			use_value(g, u);
			chain_gated(g, u, mk_ternary(g, mk_bin(g, TC_AOP_EQ, prev, own_read(g)), dt,
				NULL));
		}
		if (reads.n) {
			use_value(g, u);
			prev_gate = mk_bin(g, TC_AOP_NE, prev, own_read(g));
		}
	}
	if (reads.n && (s->red == TC_RED_MAX || s->red == TC_RED_MIN))
		gate = mk_and(g, arg_gate(g), prev_gate);
	else if (reads.n && s->red == TC_RED_MUL)
		factor = product_factor(g);
	for (i = 0; i < reads.n && !g->failed; i++) {
		const tc_expr *r = reads.v[i];
		int x = r->ref_id, xv = val_of_read(g, r), full;
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
			if (hit)
				use_value(g, w);
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
		if (factor)
			p = mk_mul(g, factor, p);
		p = mk_mul(g, dt, p);
		if (gate)
			p = mk_ternary(g, gate, p, NULL);
		/* a read with other subscripts than distinct index variables, or
		 * whose variables may range outside the tensor (under ?:) */
		if (!plain_read(g, r) || !read_within(g, r, x)) {
			int unsolvable = 0, gathered = gathered_read(g, r);
			tc_stmt *b = gathered ? NULL : gather_stmt(g, r, x, xv, p, &unsolvable);
			/* a gathered subscript (LUT(I(i), j)), or one that no index
			 * can be solved for (2 * i, i % N): the scatter d_X(...) +=! p,
			 * only where the forward reads X(...) (its subscripts are
			 * evaluated at every point of a scatter's domain) */
			if ((gathered || unsolvable) && !g->failed) {
				int found;
				tc_expr *when = path_cond(g, s->rhs, r, &found);
				if (when && reads_any(when)) {
					tc_error(g->d, r->loc, "gradient: '%s' is read under a condition "
						"that reads a tensor; the scatter of its adjoint cannot be "
						"limited to where it is read; not supported yet",
						def->tensors[x].name);
					g->failed = 1;
					break;
				}
				b = scatter_stmt(g, r, xv, guarded(g, when, p));
			}
			if (!b)
				break;
			if (needs_cast(g, s, b->rhs, def->tensors[x].dtype))
				b->rhs = mk_cast(g, def->tensors[x].dtype, b->rhs);
			mark_temps(g, b->rhs);
			g->ncontrib[xv]++;
			g->have[xv] = 1;
			if (tc_vec_push(&g->stmts, b) < 0)
				g->failed = 1;
			continue;
		}
		/* a derivative equal to that of an earlier read of this statement
		 * whose adjoint it wrote whole ('='): read that adjoint (the
		 * gradient of b in fmax(T + b, 0) is d_T's, summed) */
		if (first_p && !expr_equal(p, dt) && expr_equal(p, first_p))
			p = first_read;
		/* the lets the derivative reads (through other lets too) */
		for (v = 0; v < s->nwhere; v++)
			g->let_used[v] = 0;
		mark_lets(g, p);
		/* every variable of s must be bounded by a read of the new
		 * statement in which it is a whole subscript, or a where clause
		 * copied to it; else it gets its range in s (the adjoint's extents
		 * would bound it only where no read does: I(2*w + kw) alone gives
		 * kw a larger range than W1(f,c,kh,kw) and I together did) */
		for (nextra = 0, v = 0; v < s->nvars; v++) {
			const char *name = s->vars[v].name;
			if (bounded_in(p, name) || bounded_where(g, name))
				continue;
			if (tc_sx_has_var(s->vars[v].lo) || tc_sx_has_var(s->vars[v].hi)) {
				tc_error(g->d, s->vars[v].loc,
					"gradient: the index '%s' is not bounded by any read of the "
					"derivative with respect to '%s'; not supported yet", name,
					def->tensors[x].name);
				g->failed = 1;
				break;
			}
			extra[nextra++] = v;
		}
		if (g->failed || !p)
			break;
		/* a pure copy (T(i) = T(i) + B(i) for the earlier value of T) */
		if (expr_equal(p, dt) && same_subscripts(r, s) && alias_adjoint(g, xv, w))
			continue;
		full = r->nargs == s->nvars;
		/* a read over part of X: d_X is zero, then the parts are added */
		for (v = 0; v < r->nargs; v++)
			if (!covers(s, var_of(s, r->args[v]->name), def->tensors[x].ext[v]))
				break;
		whole = full && v == r->nargs;
		if (v < r->nargs && !g->ncontrib[xv]) {
			tc_stmt *z = fill_stmt(g, g->adj[xv], x, NULL);
			if (!z || tc_vec_push(&g->stmts, z) < 0)
				break;
			g->ncontrib[xv]++;
		}
		idx = tc_arena_alloc(g->ar, (size_t)(r->nargs + 1) * sizeof(*idx));
		b = tc_arena_alloc(g->ar, sizeof(*b));
		if (!idx || !b)
			break;
		for (v = 0; v < r->nargs; v++)
			idx[v] = r->args[v]->name;
		b->lhs = g->adj[xv];
		b->nidx = r->nargs;
		b->idx = idx;
		if (g->ncontrib[xv]) {
			b->red = TC_RED_ADD;
		} else if (full) {
			b->red = TC_RED_ASSIGN;
			if (!first_p) {
				first_p = p;
				first_read = mk_read(g, g->adj[xv], r->nargs, idx);
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
		if (attach_where(g, b, nextra, extra) < 0)
			break;
		g->ncontrib[xv]++;
		g->have[xv] = 1;
		for (v = 0; v < b->nwhere; v++)
			whole &= b->where[v].kind == TC_WHERE_RANGE;
		if (tc_vec_push(&g->stmts, b) < 0 || (whole && tc_vec_push(&g->whole, b) < 0))
			g->failed = 1;
	}
	tc_vec_free(&reads);
}

/* Whether b is one of the statements that write their whole tensor
 * pointwise. */
static int is_whole(const grad_ctx *g, const tc_stmt *b)
{
	int i;
	for (i = 0; i < g->whole.n; i++)
		if (g->whole.v[i] == b)
			return 1;
	return 0;
}

/* Whether e reads the tensor named name (a backward adjoint or
 * temporary, by name). */
static int reads_name(const tc_expr *e, const char *name)
{
	int i;
	if ((e->kind == TC_AST_CALL || e->kind == TC_AST_IDENT) && e->ref != TC_REF_BUILTIN &&
		e->ref != TC_REF_INDEX && e->name && !strcmp(e->name, name))
		return 1;
	for (i = 0; i < e->nargs; i++)
		if (reads_name(e->args[i], name))
			return 1;
	return 0;
}

/* e with index names from[k] written to[k] (a simultaneous renaming). */
static tc_expr *rename_indices(grad_ctx *g, tc_expr *e, int n, const char *const *from,
	const char *const *to)
{
	tc_expr *c;
	int i, k;
	if (e->kind == TC_AST_IDENT && (e->ref == TC_REF_INDEX || e->ref == TC_REF_NONE))
		for (k = 0; k < n; k++)
			if (!strcmp(e->name, from[k])) {
				if (!strcmp(from[k], to[k]) || !(c = mk_ident(g, to[k])))
					return e;
				c->ref = e->ref;
				return c;
			}
	if (!e->nargs || !(c = tc_arena_alloc(g->ar, sizeof(*c))))
		return e;
	*c = *e;
	if (!(c->args = tc_arena_alloc(g->ar, (size_t)e->nargs * sizeof(*c->args))))
		return e;
	for (i = 0; i < e->nargs; i++)
		c->args[i] = rename_indices(g, e->args[i], n, from, to);
	return c;
}

/* Whether e reads a tensor that statement c writes. */
static int reads_written(const tc_expr *e, const tc_stmt *c)
{
	return reads_name(e, c->lhs);
}

/* Contributions to one adjoint that are whole pointwise statements, the
 * first written by = and a later one by +=, become one statement at the
 * later one's place, when nothing in between reads the adjoint or writes
 * what the first reads: d_e(n,c) = d_P(n,c) / s(n) and, after d_s,
 * d_e(n,c) += d_s(n) give d_e(n,c) = (d_P(n,c) / s(n)) + d_s(n) after d_s:
 * one pass instead of two. */
static void merge_contributions(grad_ctx *g)
{
	int j, i, k;
	for (j = 0; j < g->stmts.n; j++) {
		tc_stmt *b = g->stmts.v[j], *a = NULL;
		if (b->red != TC_RED_ADD || b->init || !is_whole(g, b))
			continue;
		for (i = j - 1; i >= 0; i--) {
			tc_stmt *c = g->stmts.v[i];
			if (!strcmp(c->lhs, b->lhs)) {
				a = c;
				break;
			}
		}
		if (!a || a->red != TC_RED_ASSIGN || !is_whole(g, a) || a->nidx != b->nidx)
			continue;
		for (k = i + 1; k < j; k++) {
			const tc_stmt *c = g->stmts.v[k];
			int w, hit = reads_name(c->rhs, b->lhs) || reads_written(a->rhs, c);
			for (w = 0; w < c->nwhere && !hit; w++)
				hit = c->where[w].kind != TC_WHERE_RANGE && reads_name(c->where[w].val, b->lhs);
			if (hit)
				break;
		}
		if (k < j)
			continue;
		b->red = TC_RED_ASSIGN;
		b->rhs = mk_add(g, rename_indices(g, a->rhs, a->nidx, a->idx, b->idx), b->rhs);
		/* the ranges either gives its indices (renamed), once each */
		if (a->nwhere) {
			tc_where *w = tc_arena_alloc(g->ar, (size_t)(a->nwhere + b->nwhere) * sizeof(*w));
			int n = b->nwhere, u, q;
			if (!w) {
				g->failed = 1;
				return;
			}
			if (b->nwhere)
				memcpy(w, b->where, (size_t)b->nwhere * sizeof(*w));
			for (u = 0; u < a->nwhere; u++) {
				const char *name = a->where[u].name;
				for (q = 0; q < a->nidx; q++)
					if (!strcmp(name, a->idx[q]))
						name = b->idx[q];
				for (q = 0; q < n && strcmp(w[q].name, name); q++)
					;
				if (q == n) {
					w[n] = a->where[u];
					w[n++].name = name;
				}
			}
			b->where = w;
			b->nwhere = n;
		}
		for (k = i; k + 1 < g->stmts.n; k++)
			g->stmts.v[k] = g->stmts.v[k + 1];
		g->stmts.n--;
		j--;
	}
}

/* Whether e reads a tensor t with need[t] set. */
static int reads_needed(const grad_ctx *g, const tc_expr *e)
{
	int i;
	if ((e->kind == TC_AST_CALL || e->kind == TC_AST_IDENT) && e->ref == TC_REF_TENSOR)
		return g->need[val_of_read(g, e)];
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
		if (x->kind == TC_SX_PARAM)
			dc->dims[i].name = g->def->sizes[x->id];
		else if (x->kind == TC_SX_CONST)
			dc->dims[i].value = x->c;
		else if (!(dc->dims[i].expr = sx_expr(g, NULL, x)))
			return -1;
	}
	return 0;
}

/* e with the reads of tensors written several times named by the value
 * statement si reads (nodes copied where a name changes). */
static tc_expr *rename_reads(grad_ctx *g, tc_expr *e, int si)
{
	tc_expr *c;
	const char *name = e->name;
	int i, changed = 0;
	tc_expr **args = NULL;
	if ((e->kind == TC_AST_CALL || e->kind == TC_AST_IDENT) && e->ref == TC_REF_TENSOR &&
		g->nver[e->ref_id] > 1)
		name = g->vname[read_val(g, si, e->ref_id)];
	if (e->nargs && !(args = tc_arena_alloc(g->ar, (size_t)e->nargs * sizeof(*args))))
		return e;
	for (i = 0; i < e->nargs; i++) {
		args[i] = rename_reads(g, e->args[i], si);
		changed |= args[i] != e->args[i];
	}
	if (!changed && name == e->name)
		return e;
	if (!(c = tc_arena_alloc(g->ar, sizeof(*c))))
		return e;
	*c = *e;
	c->name = name;
	if (e->nargs)
		c->args = args;
	return c;
}

/* Number the values (versions) of the def's tensors, name them, and make
 * g->ss: each statement with values' names.  0 or -1 (out of memory). */
static int make_values(grad_ctx *g)
{
	const tc_def *def = g->def;
	int nt = def->ntensors, si, v, t, k;
	g->nval = nt;
	for (si = 0; si < def->nstmts; si++)
		g->nval += def->tensors[def->stmts[si]->tensor].first_write != si;
#define ALLOC(f, n) (g->f = tc_arena_alloc(g->ar, (size_t)((n) + 1) * sizeof(*g->f)))
	if (!ALLOC(val_t, g->nval) || !ALLOC(final, g->nval) || !ALLOC(vname, g->nval) ||
		!ALLOC(nver, nt) || !ALLOC(stmt_val, def->nstmts) || !ALLOC(ss, def->nstmts) ||
		!ALLOC(given, nt) || !ALLOC(adj, g->nval) || !ALLOC(need, g->nval) ||
		!ALLOC(have, g->nval) || !ALLOC(ncontrib, g->nval) || !ALLOC(recompute, g->nval) ||
		!ALLOC(save, g->nval))
		return -1;
#undef ALLOC
	for (t = 0; t < nt; t++) {
		g->val_t[t] = t;
		g->nver[t] = 1;
		g->final[t] = 1;
	}
	for (k = nt, si = 0; si < def->nstmts; si++) {
		t = def->stmts[si]->tensor;
		if (def->tensors[t].first_write == si) {
			g->stmt_val[si] = t;
			continue;
		}
		g->final[read_val(g, si, t)] = 0;
		g->stmt_val[si] = k;
		g->val_t[k] = t;
		g->final[k] = 1;
		g->nver[t]++;
		k++;
	}
	for (v = 0; v < g->nval; v++) {
		const char *name = def->tensors[g->val_t[v]].name;
		char buf[256];
		size_t n;
		char *a;
		if (!g->final[v]) {
			/* version number: 1 + the earlier values of the tensor */
			int ver = 1, u;
			for (u = 0; u < v; u++)
				ver += g->val_t[u] == g->val_t[v];
			snprintf(buf, sizeof(buf), "v%d", ver);
			name = fresh_name(g, name, buf);
		}
		g->vname[v] = name;
		n = strlen(name) + 16;
		if (!name || !(a = tc_arena_alloc(g->ar, n)))
			return -1;
		/* d_X, or d_X_2, ... where the def (a backward def's own d_X
		 * output) or an earlier adjoint has the name */
		for (k = 1; k < 1000; k++) {
			int u, taken;
			if (k == 1)
				snprintf(a, n, "d_%s", name);
			else
				snprintf(a, n, "d_%s_%d", name, k);
			taken = name_taken(def, a);
			for (u = 0; u < v && !taken; u++)
				taken = !strcmp(g->adj[u], a);
			if (!taken)
				break;
		}
		g->adj[v] = a;
	}
	for (t = 0; t < nt; t++)
		g->given[t] = g->adj[t];
	for (si = 0; si < def->nstmts; si++) {
		const tc_stmt *s = def->stmts[si];
		tc_stmt *c;
		int w;
		if (!(c = tc_arena_alloc(g->ar, sizeof(*c))))
			return -1;
		*c = *s;
		c->lhs = g->vname[g->stmt_val[si]];
		c->rhs = rename_reads(g, s->rhs, si);
		if (s->sub) {
			int k;
			if (!(c->sub = tc_arena_alloc(g->ar, (size_t)s->nidx * sizeof(*c->sub))))
				return -1;
			for (k = 0; k < s->nidx; k++)
				c->sub[k] = s->sub[k] ? rename_reads(g, s->sub[k], si) : NULL;
		}
		if (s->nwhere && !(c->where = tc_arena_alloc(g->ar, (size_t)s->nwhere * sizeof(tc_where))))
			return -1;
		for (w = 0; w < s->nwhere; w++) {
			c->where[w] = s->where[w];
			if (s->where[w].kind != TC_WHERE_RANGE)
				c->where[w].val = rename_reads(g, s->where[w].val, si);
		}
		g->ss[si] = c;
	}
	return tc_arena_failed(g->ar) ? -1 : 0;
}

/* The value that the last statement writing tensor t writes. */
static int final_val(const grad_ctx *g, int t)
{
	return read_val(g, g->def->nstmts, t);
}

/* Append the forward statement si (with values' names) to out: an
 * in-place T(i) += e, whose value is new, is its copy of the earlier
 * value and then the sum. */
static int push_forward(grad_ctx *g, int si, tc_stmt **out, int *n)
{
	const tc_stmt *s = g->ss[si];
	if (s->red != TC_RED_ASSIGN && !s->init && g->def->tensors[s->tensor].first_write != si) {
		const char *prev = g->vname[read_val(g, si, s->tensor)];
		tc_stmt *c = s->sub ? fill_stmt(g, s->lhs, s->tensor, prev)
				    : mk_stmt(g, s->lhs, s->nidx, s->idx, TC_RED_ASSIGN, 0,
					    mk_read(g, prev, s->nidx, s->idx));
		if (!c || !c->rhs)
			return -1;
		out[(*n)++] = c;
	}
	out[(*n)++] = (tc_stmt *)s;
	return 0;
}

__tc_give tc_def *tc_grad_derive(__tc_keep tc_arena *ar, __tc_keep const tc_def *def,
	__tc_keep const char *const *wrt, int nwrt, int saves, __tc_give tc_def **fwd,
	__tc_keep tc_diags *d)
{
	grad_ctx g = {0};
	tc_def *out = NULL;
	int nin = def->ninputs, nio = def->ninputs + def->noutputs;
	int i, t, v, changed, nret, nfwd, nsaved = 0;

	*fwd = NULL;
	g.ar = ar;
	g.def = def;
	g.d = d;
	if (!def->ok) {
		tc_error(d, def->name_loc, "gradient: '%s' has errors", def->name);
		return NULL;
	}
	for (i = 0; i < def->nstmts && !g.failed; i++)
		check_stmt(&g, i);
	if (g.failed)
		return NULL;
	if (make_values(&g) < 0)
		goto error;
	/* outputs: the floating-point ones' adjoints are given (their final
	 * values'); an integer or bool output has none (its gradient is zero),
	 * and a def with no floating-point output has nothing to differentiate */
	for (t = nin; t < nio && !is_float(def->tensors[t].dtype); t++)
		;
	if (t == nio) {
		tc_error(d, def->tensors[nin].loc,
			"gradient: output '%s' is %s; only floating-point outputs can be "
			"differentiated, and '%s' has none", def->tensors[nin].name,
			tc_dtype_name(def->tensors[nin].dtype), def->name);
		g.failed = 1;
	}
	for (t = nin; t < nio; t++) {
		if (!is_float(def->tensors[t].dtype))
			continue;
		v = final_val(&g, t);
		g.given[t] = g.adj[v];
		g.have[v] = 1;
	}
	/* the inputs asked for */
	for (i = 0; i < nwrt; i++) {
		for (t = 0; t < nin; t++)
			if (!strcmp(def->tensors[t].name, wrt[i]))
				break;
		if (t == nin) {
			tc_buf b;
			tc_buf_init(&b);
			for (t = 0; t < nin; t++)
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
		for (t = 0; t < nin; t++)
			g.need[t] = is_float(def->tensors[t].dtype);
	if (g.failed)
		goto error;
	/* values whose adjoint is needed: those computed from a needed one (an
	 * in-place += includes the earlier value) */
	do {
		changed = 0;
		for (i = 0; i < def->nstmts; i++) {
			const tc_stmt *s = g.ss[i];
			int w = g.stmt_val[i];
			if (g.need[w] || !is_float(def->tensors[s->tensor].dtype))
				continue;
			if (stmt_reads_needed(&g, s) || (s->red != TC_RED_ASSIGN && !s->init &&
				def->tensors[s->tensor].first_write != i && g.need[read_val(&g, i, s->tensor)])) {
				g.need[w] = 1;
				changed = 1;
			}
		}
	} while (changed);
	/* an output that statements read: its adjoint is the given one plus
	 * what those statements add, in a copy */
	for (t = nin; t < nio; t++) {
		tc_stmt *c;
		v = final_val(&g, t);
		if (!is_float(def->tensors[t].dtype) || !value_readers(&g, v))
			continue;
		g.adj[v] = fresh_name(&g, g.given[t], "total");
		if (!g.adj[v] || !(c = fill_stmt(&g, g.adj[v], t, g.given[t])) ||
			tc_vec_push(&g.stmts, c) < 0)
			goto error;
		g.ncontrib[v] = 1;
	}
	for (i = def->nstmts - 1; i >= 0 && !g.failed; i--)
		backward_stmt(&g, i);
	if (g.failed)
		goto error;
	merge_contributions(&g);
	/* values read by recomputed values (saved ones are given) */
	do {
		if (saves)
			break;
		changed = 0;
		for (i = def->nstmts - 1; i >= 0; i--) {
			const tc_stmt *s = g.ss[i];
			if (g.recompute[g.stmt_val[i]]) {
				int before = 0, after = 0, w;
				for (v = 0; v < g.nval; v++)
					before += g.recompute[v] + g.save[v];
				mark_temps(&g, s->rhs);
				for (w = 0; w < s->nidx && s->sub; w++)
					if (s->sub[w])
						mark_temps(&g, s->sub[w]);
				for (w = 0; w < s->nwhere; w++)
					if (s->where[w].kind != TC_WHERE_RANGE)
						mark_temps(&g, s->where[w].val);
				if (s->red != TC_RED_ASSIGN && !s->init &&
					def->tensors[s->tensor].first_write != i)
					use_value(&g, read_val(&g, i, s->tensor));
				for (v = 0; v < g.nval; v++)
					after += g.recompute[v] + g.save[v];
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
	/* inputs, the outputs (and with saves, the temporary values) the
	 * backward reads, the outputs' adjoints */
	out->nparams = def->nparams;
	for (t = nin; t < nio; t++)
		out->nparams += is_float(def->tensors[t].dtype);
	for (t = nin; t < nio; t++)
		out->nparams += g.save[final_val(&g, t)];
	for (nsaved = 0, v = 0; saves && v < g.nval; v++)
		nsaved += g.recompute[v];
	out->nparams += nsaved;
	out->params = tc_arena_alloc(ar, (size_t)(out->nparams + 1) * sizeof(tc_decl));
	if (!out->params)
		goto error;
	for (i = 0; i < def->nparams; i++)
		out->params[i] = def->params[i];
	for (t = nin; t < nio; t++)
		if (g.save[final_val(&g, t)] && mk_decl(&g, &out->params[i++], def->tensors[t].name,
			def->tensors[t].dtype, t) < 0)
			goto error;
	for (v = 0; saves && v < g.nval; v++)
		if (g.recompute[v] && mk_decl(&g, &out->params[i++], g.vname[v],
			def->tensors[g.val_t[v]].dtype, g.val_t[v]) < 0)
			goto error;
	for (t = nin; t < nio; t++)
		if (is_float(def->tensors[t].dtype) &&
			mk_decl(&g, &out->params[i++], g.given[t], def->tensors[t].dtype, t) < 0)
			goto error;
	for (nret = 0, t = 0; t < nin; t++)
		nret += g.need[t];
	out->nrets = nret;
	out->rets = tc_arena_alloc(ar, (size_t)(nret + 1) * sizeof(tc_decl));
	if (!out->rets)
		goto error;
	for (nret = 0, t = 0; t < nin; t++)
		if (g.need[t] && mk_decl(&g, &out->rets[nret++], g.adj[t], def->tensors[t].dtype, t) < 0)
			goto error;
	/* recomputed values, then the adjoint statements, then zeros */
	for (nfwd = 0, i = 0; i < def->nstmts && !saves; i++)
		nfwd += 2 * g.recompute[g.stmt_val[i]];
	out->nstmts = nfwd + g.stmts.n + nret;
	out->stmts = tc_arena_alloc(ar, (size_t)(out->nstmts + 1) * sizeof(tc_stmt *));
	if (!out->stmts)
		goto error;
	out->nstmts = 0;
	for (i = 0; i < def->nstmts && !saves; i++)
		if (g.recompute[g.stmt_val[i]] && push_forward(&g, i, out->stmts, &out->nstmts) < 0)
			goto error;
	for (i = 0; i < g.stmts.n; i++)
		out->stmts[out->nstmts++] = g.stmts.v[i];
	for (nret = 0, t = 0; t < nin; t++) {
		if (!g.need[t])
			continue;
		if (!g.have[t]) {
			tc_stmt *z = fill_stmt(&g, g.adj[t], t, NULL);
			if (!z)
				goto error;
			out->stmts[out->nstmts++] = z;
		}
		nret++;
	}
	/* the forward with saves: the forward def (with values' names)
	 * returning the temporary values */
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
		if (!(f->stmts = tc_arena_alloc(ar, (size_t)(2 * def->nstmts + 1) * sizeof(tc_stmt *))))
			goto error;
		for (i = 0; i < def->nstmts; i++)
			if (push_forward(&g, i, f->stmts, &f->nstmts) < 0)
				goto error;
		f->nrets = def->nrets + nsaved;
		if (!(f->rets = tc_arena_alloc(ar, (size_t)f->nrets * sizeof(tc_decl))))
			goto error;
		for (i = 0; i < def->nrets; i++)
			f->rets[i] = def->rets[i];
		for (v = 0; v < g.nval; v++)
			if (g.recompute[v] && mk_decl(&g, &f->rets[i++], g.vname[v],
				def->tensors[g.val_t[v]].dtype, g.val_t[v]) < 0)
				goto error;
		*fwd = f;
	}
	tc_vec_free(&g.stmts);
	tc_vec_free(&g.whole);
	if (tc_arena_failed(ar))
		return NULL;
	return out;
error:
	tc_vec_free(&g.stmts);
	tc_vec_free(&g.whole);
	return NULL;
}
