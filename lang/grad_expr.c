/* The expressions of a derivation (see grad.c): simplifying constructors
 * of syntax-tree nodes (NULL stands for the constant 0: no '* 1', '+ 0',
 * '--x'), the derivative table of the operators and builtins, and pad's
 * derivative. */
#include "grad_internal.h"

#include <string.h>

int tc_grad_is_float(tc_dtype t)
{
	return t == TC_T_F16 || t == TC_T_F32 || t == TC_T_F64 || t == TC_T_BF16;
}

/* ---- simplifying constructors (NULL stands for the constant 0) ---- */

tc_expr *tc_grad_mk_node(grad_ctx *g, tc_ast_kind kind, int nargs)
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

tc_expr *tc_grad_mk_float(grad_ctx *g, double v)
{
	tc_expr *e = tc_grad_mk_node(g, TC_AST_FLOAT, 0);
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

tc_expr *tc_grad_mk_bin(grad_ctx *g, tc_ast_op op, tc_expr *a, tc_expr *b)
{
	tc_expr *e = tc_grad_mk_node(g, TC_AST_BINARY, 2);
	if (!e)
		return NULL;
	e->op = op;
	e->args[0] = a;
	e->args[1] = b;
	return e;
}

tc_expr *tc_grad_mk_neg(grad_ctx *g, tc_expr *a)
{
	tc_expr *e;
	double v;
	if (!a)
		return NULL;
	if (a->kind == TC_AST_UNARY && a->op == TC_AOP_NEG)
		return a->args[0];
	if (is_const(a, &v))
		return tc_grad_mk_float(g, -v);
	if (!(e = tc_grad_mk_node(g, TC_AST_UNARY, 1)))
		return NULL;
	e->op = TC_AOP_NEG;
	e->args[0] = a;
	return e;
}

static int is_neg(const tc_expr *e)
{
	return e && e->kind == TC_AST_UNARY && e->op == TC_AOP_NEG;
}

tc_expr *tc_grad_mk_add(grad_ctx *g, tc_expr *a, tc_expr *b)
{
	if (!a)
		return b;
	if (!b)
		return a;
	if (is_neg(b))
		return tc_grad_mk_bin(g, TC_AOP_SUB, a, b->args[0]);
	if (is_neg(a))
		return tc_grad_mk_bin(g, TC_AOP_SUB, b, a->args[0]);
	return tc_grad_mk_bin(g, TC_AOP_ADD, a, b);
}

static tc_expr *mk_sub(grad_ctx *g, tc_expr *a, tc_expr *b)
{
	double v;
	if (!b)
		return a;
	if (!a)
		return tc_grad_mk_neg(g, b);
	if (is_neg(b))
		return tc_grad_mk_bin(g, TC_AOP_ADD, a, b->args[0]);
	if (is_const(b, &v) && v < 0)
		return tc_grad_mk_bin(g, TC_AOP_ADD, a, tc_grad_mk_float(g, -v));
	return tc_grad_mk_bin(g, TC_AOP_SUB, a, b);
}

static tc_expr *mk_div(grad_ctx *g, tc_expr *a, tc_expr *b);

/* Whether e is c ? x : y with constants x and y (a mask or sign). */
static int is_const_ternary(const tc_expr *e)
{
	double v;
	return e && e->kind == TC_AST_TERNARY && is_const(e->args[1], &v) &&
		is_const(e->args[2], &v);
}

tc_expr *tc_grad_mk_mul(grad_ctx *g, tc_expr *a, tc_expr *b)
{
	double u, v;
	if (!a || !b)
		return NULL;
	if ((is_const(a, &u) && u == 0.0) || (is_const(b, &v) && v == 0.0))
		return tc_grad_mk_float(g, 0.0);
	if (is_one(a))
		return b;
	if (is_one(b))
		return a;
	/* x * (c ? 1 : 0) is c ? x : 0 */
	if (is_const_ternary(b))
		return tc_grad_mk_ternary(g, b->args[0], tc_grad_mk_mul(g, a, b->args[1]),
			tc_grad_mk_mul(g, a, b->args[2]));
	if (is_const_ternary(a))
		return tc_grad_mk_ternary(g, a->args[0], tc_grad_mk_mul(g, a->args[1], b),
			tc_grad_mk_mul(g, a->args[2], b));
	/* x * (1 / y) is x / y */
	if (b->kind == TC_AST_BINARY && b->op == TC_AOP_DIV && is_one(b->args[0]))
		return mk_div(g, a, b->args[1]);
	if (is_const(a, &u) && is_const(b, &v))
		return tc_grad_mk_float(g, u * v);
	if (is_const(a, &u) && u == -1.0)
		return tc_grad_mk_neg(g, b);
	if (is_const(b, &v) && v == -1.0)
		return tc_grad_mk_neg(g, a);
	if (is_neg(a))
		return tc_grad_mk_neg(g, tc_grad_mk_mul(g, a->args[0], b));
	if (is_neg(b))
		return tc_grad_mk_neg(g, tc_grad_mk_mul(g, a, b->args[0]));
	return tc_grad_mk_bin(g, TC_AOP_MUL, a, b);
}

static tc_expr *mk_div(grad_ctx *g, tc_expr *a, tc_expr *b)
{
	if (!a)
		return NULL;
	if (is_one(b))
		return a;
	if (is_neg(a))
		return tc_grad_mk_neg(g, mk_div(g, a->args[0], b));
	return tc_grad_mk_bin(g, TC_AOP_DIV, a, b);
}

/* A call of the builtin name with arguments a and b (b NULL: one). */
static tc_expr *mk_call(grad_ctx *g, const char *name, tc_expr *a, tc_expr *b)
{
	tc_expr *e = tc_grad_mk_node(g, TC_AST_CALL, b ? 2 : 1);
	if (!e)
		return NULL;
	e->name = name;
	e->ref = TC_REF_BUILTIN;
	e->ref_id = tc_builtin_lookup(name, (int)strlen(name));
	e->args[0] = a;
	if (b)
		e->args[1] = b;
	return e;
}

tc_expr *tc_grad_mk_ident(grad_ctx *g, const char *name)
{
	tc_expr *e = tc_grad_mk_node(g, TC_AST_IDENT, 0);
	if (e)
		e->name = name;
	return e;
}

/* The read name(idx[0], ..., idx[n-1]). */
tc_expr *tc_grad_mk_read(grad_ctx *g, const char *name, int n, const char *const *idx)
{
	tc_expr *e;
	int i;
	if (n == 0)
		return tc_grad_mk_ident(g, name);
	if (!(e = tc_grad_mk_node(g, TC_AST_CALL, n)))
		return NULL;
	e->name = name;
	for (i = 0; i < n; i++)
		if (!(e->args[i] = tc_grad_mk_ident(g, idx[i])))
			return NULL;
	return e;
}

tc_expr *tc_grad_mk_ternary_int(grad_ctx *g, tc_expr *c, tc_expr *a)
{
	tc_expr *e;
	if (!a || !(e = tc_grad_mk_node(g, TC_AST_TERNARY, 3)))
		return NULL;
	e->args[0] = c;
	e->args[1] = a;
	e->args[2] = tc_grad_mk_int(g, 0);
	return e->args[2] ? e : NULL;
}

tc_expr *tc_grad_mk_ternary(grad_ctx *g, tc_expr *c, tc_expr *a, tc_expr *b)
{
	tc_expr *e;
	if (!a && !b)
		return NULL;
	if (!(e = tc_grad_mk_node(g, TC_AST_TERNARY, 3)))
		return NULL;
	e->args[0] = c;
	e->args[1] = a ? a : tc_grad_mk_float(g, 0.0);
	e->args[2] = b ? b : tc_grad_mk_float(g, 0.0);
	return e;
}

tc_expr *tc_grad_mk_int(grad_ctx *g, int64_t v)
{
	tc_expr *e = tc_grad_mk_node(g, TC_AST_INT, 0);
	if (e)
		e->ival = v;
	return e;
}

tc_expr *tc_grad_mk_cast(grad_ctx *g, tc_dtype dt, tc_expr *a)
{
	tc_expr *e = tc_grad_mk_node(g, TC_AST_CAST, 1);
	if (!e)
		return NULL;
	e->cast_type = dt;
	e->args[0] = a;
	return e;
}

/* The size expression x of statement s as text (an expression of the
 * def's sizes, integer constants and s's index variables). */
tc_expr *tc_grad_sx_expr(grad_ctx *g, const tc_stmt *s, const tc_sexpr *x)
{
	switch (x->kind) {
	case TC_SX_CONST:
		return tc_grad_mk_int(g, x->c);
	case TC_SX_PARAM: {
		tc_expr *e = tc_grad_mk_ident(g, g->def->sizes[x->id]);
		if (e) { /* a size, as sema resolves it (tc_range_sexpr reads it) */
			e->ref = TC_REF_SIZE;
			e->ref_id = x->id;
		}
		return e;
	}
	case TC_SX_VAR:
		return tc_grad_mk_ident(g, s->vars[x->id].name);
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
					t = tc_grad_mk_int(g, neg ? -y->c : y->c);
				else if (y->kind == TC_SX_MUL && (y->c == 1 || y->c == -1))
					t = tc_grad_sx_expr(g, s, y->a);
				else if (y->kind == TC_SX_MUL)
					t = tc_grad_mk_bin(g, TC_AOP_MUL,
						tc_grad_mk_int(g, neg ? -y->c : y->c),
							tc_grad_sx_expr(g, s, y->a));
				else
					t = tc_grad_sx_expr(g, s, y);
				if (!r)
					r = neg ? tc_grad_mk_neg(g, t) : t;
				else
					r = tc_grad_mk_bin(g, neg ? TC_AOP_SUB : TC_AOP_ADD, r, t);
			}
		return r ? r : tc_grad_mk_int(g, 0);
	}
	case TC_SX_MUL:
		if (x->c == -1)
			return tc_grad_mk_neg(g, tc_grad_sx_expr(g, s, x->a));
		return tc_grad_mk_bin(g, TC_AOP_MUL, tc_grad_mk_int(g, x->c),
			tc_grad_sx_expr(g, s, x->a));
	case TC_SX_FLOORDIV:
		return tc_grad_mk_bin(g, TC_AOP_DIV, tc_grad_sx_expr(g, s, x->a),
			tc_grad_mk_int(g, x->c));
	case TC_SX_MOD:
		return tc_grad_mk_bin(g, TC_AOP_MOD, tc_grad_sx_expr(g, s, x->a),
			tc_grad_mk_int(g, x->c));
	case TC_SX_MIN:
		return mk_call(g, "min", tc_grad_sx_expr(g, s, x->a), tc_grad_sx_expr(g, s, x->b));
	case TC_SX_MAX:
		return mk_call(g, "max", tc_grad_sx_expr(g, s, x->a), tc_grad_sx_expr(g, s, x->b));
	}
	return NULL;
}

/* a && b, either NULL for true */
tc_expr *tc_grad_mk_and(grad_ctx *g, tc_expr *a, tc_expr *b)
{
	if (!a)
		return b;
	if (!b)
		return a;
	return tc_grad_mk_bin(g, TC_AOP_AND, a, b);
}

/* ---- the derivative ---- */

/* Whether e reads tensor t with the subscripts of the read r. */
int tc_grad_same_read(const tc_expr *e, int t, const tc_expr *r)
{
	int i;
	if (!r || e->ref != TC_REF_TENSOR || e->ref_id != t || e->nargs != r->nargs)
		return 0;
	for (i = 0; i < e->nargs; i++)
		if (!tc_grad_expr_equal(e->args[i], r->args[i]))
			return 0;
	return 1;
}

static void unsupported_builtin(grad_ctx *g, const tc_expr *e)
{
	tc_error(g->d, e->name_loc,
		"the derivative of '%s' is not supported yet (every builtin but lgamma and "
		"tgamma, whose derivatives need the digamma function, which the language "
		"lacks)",
		e->name);
	g->failed = 1;
}

/* c * a (a constant factor first, as the derivative table writes it). */
static tc_expr *scaled(grad_ctx *g, double c, tc_expr *a)
{
	return tc_grad_mk_mul(g, tc_grad_mk_float(g, c), a);
}

/* sqrt(x * x + c) (c = 1: asinh; -1: acosh) or sqrt(1 - x * x) (c = 0:
 * asin, acos). */
static tc_expr *sqrt_of_square(grad_ctx *g, tc_expr *x, double c)
{
	tc_expr *xx = tc_grad_mk_mul(g, x, x);
	return mk_call(g, "sqrt", c == 0.0 ? mk_sub(g, tc_grad_mk_float(g, 1.0), xx) :
		tc_grad_mk_bin(g, c > 0 ? TC_AOP_ADD : TC_AOP_SUB, xx, tc_grad_mk_float(g, 1.0)),
		NULL);
}

/* f'(x) * dx for a builtin f of one argument x with derivative dx. */
static tc_expr *diff_builtin1(grad_ctx *g, const tc_expr *e, tc_expr *dx)
{
	tc_expr *x = e->args[0];
	tc_expr *fe = (tc_expr *)e;
	switch ((tc_builtin_id)e->ref_id) {
	case TC_BI_ASIN:
		return mk_div(g, dx, sqrt_of_square(g, x, 0.0));
	case TC_BI_ACOS:
		return tc_grad_mk_neg(g, mk_div(g, dx, sqrt_of_square(g, x, 0.0)));
	case TC_BI_ASINH:
		return mk_div(g, dx, sqrt_of_square(g, x, 1.0));
	case TC_BI_ACOSH:
		return mk_div(g, dx, sqrt_of_square(g, x, -1.0));
	case TC_BI_ATANH:
		return mk_div(g, dx, mk_sub(g, tc_grad_mk_float(g, 1.0), tc_grad_mk_mul(g, x, x)));
	case TC_BI_CBRT: /* 1 / (3 cbrt(x)^2) */
		return mk_div(g, dx, scaled(g, 3.0, tc_grad_mk_mul(g, fe, fe)));
	case TC_BI_RCBRT: /* -x^(-4/3) / 3 = -rcbrt(x)^4 / 3 */
		return tc_grad_mk_neg(g, mk_div(g, tc_grad_mk_mul(g, dx,
			tc_grad_mk_mul(g, tc_grad_mk_mul(g, fe, fe), tc_grad_mk_mul(g, fe, fe))),
			tc_grad_mk_float(g, 3.0)));
	case TC_BI_EXP2:
		return tc_grad_mk_mul(g, dx, scaled(g, 0.6931471805599453, fe));
	case TC_BI_EXP10:
		return tc_grad_mk_mul(g, dx, scaled(g, 2.302585092994046, fe));
	case TC_BI_LOG2:
		return mk_div(g, dx, scaled(g, 0.6931471805599453, x));
	case TC_BI_LOG10:
		return mk_div(g, dx, scaled(g, 2.302585092994046, x));
	case TC_BI_SINPI:
		return tc_grad_mk_mul(g, dx, scaled(g, 3.141592653589793, mk_call(g, "cospi", x, NULL)));
	case TC_BI_COSPI:
		return tc_grad_mk_neg(g, tc_grad_mk_mul(g, dx,
			scaled(g, 3.141592653589793, mk_call(g, "sinpi", x, NULL))));
	case TC_BI_NORMCDF: /* exp(-x^2 / 2) / sqrt(2 pi) */
		return tc_grad_mk_mul(g, dx, scaled(g, 0.3989422804014327,
			mk_call(g, "exp", scaled(g, -0.5, tc_grad_mk_mul(g, x, x)), NULL)));
	case TC_BI_NORMCDFINV: /* sqrt(2 pi) exp(y^2 / 2), y = normcdfinv(x) */
		return tc_grad_mk_mul(g, dx, scaled(g, 2.5066282746310002,
			mk_call(g, "exp", scaled(g, 0.5, tc_grad_mk_mul(g, fe, fe)), NULL)));
	case TC_BI_ERFINV: /* sqrt(pi)/2 exp(y^2), y = erfinv(x); erfcinv: negated */
	case TC_BI_ERFCINV: {
		tc_expr *d = tc_grad_mk_mul(g, dx, scaled(g, 0.886226925452758,
			mk_call(g, "exp", tc_grad_mk_mul(g, fe, fe), NULL)));
		return e->ref_id == TC_BI_ERFCINV ? tc_grad_mk_neg(g, d) : d;
	}
	case TC_BI_J0:
		return tc_grad_mk_neg(g, tc_grad_mk_mul(g, dx, mk_call(g, "j1", x, NULL)));
	case TC_BI_Y0:
		return tc_grad_mk_neg(g, tc_grad_mk_mul(g, dx, mk_call(g, "y1", x, NULL)));
	case TC_BI_J1: /* j0(x) - j1(x) / x, 1/2 at 0 */
		return tc_grad_mk_ternary(g,
			tc_grad_mk_bin(g, TC_AOP_EQ, x, tc_grad_mk_float(g, 0.0)), scaled(g, 0.5, dx),
			tc_grad_mk_mul(g, dx, mk_sub(g, mk_call(g, "j0", x, NULL), mk_div(g, fe, x))));
	case TC_BI_Y1: /* y0(x) - y1(x) / x */
		return tc_grad_mk_mul(g, dx, mk_sub(g, mk_call(g, "y0", x, NULL), mk_div(g, fe, x)));
	case TC_BI_EXP:
		return tc_grad_mk_mul(g, dx, fe);
	case TC_BI_EXPM1:
		return tc_grad_mk_mul(g, dx, mk_call(g, "exp", x, NULL));
	case TC_BI_LOG:
		return mk_div(g, dx, x);
	case TC_BI_LOG1P:
		return mk_div(g, dx, tc_grad_mk_bin(g, TC_AOP_ADD, tc_grad_mk_float(g, 1.0), x));
	case TC_BI_SQRT:
		return mk_div(g, dx, tc_grad_mk_mul(g, tc_grad_mk_float(g, 2.0), fe));
	case TC_BI_RSQRT: /* -1/2 x^(-3/2) = -rsqrt(x) / (2 x) */
		return tc_grad_mk_neg(g,
			mk_div(g, tc_grad_mk_mul(g, dx, fe),
				tc_grad_mk_mul(g, tc_grad_mk_float(g, 2.0), x)));
	case TC_BI_SIN:
		return tc_grad_mk_mul(g, dx, mk_call(g, "cos", x, NULL));
	case TC_BI_COS:
		return tc_grad_mk_neg(g, tc_grad_mk_mul(g, dx, mk_call(g, "sin", x, NULL)));
	case TC_BI_TAN:
		return tc_grad_mk_mul(g, dx,
			tc_grad_mk_bin(g, TC_AOP_ADD, tc_grad_mk_float(g, 1.0),
				tc_grad_mk_mul(g, fe, fe)));
	case TC_BI_SINH:
		return tc_grad_mk_mul(g, dx, mk_call(g, "cosh", x, NULL));
	case TC_BI_COSH:
		return tc_grad_mk_mul(g, dx, mk_call(g, "sinh", x, NULL));
	case TC_BI_TANH:
		return tc_grad_mk_mul(g, dx,
			tc_grad_mk_bin(g, TC_AOP_SUB, tc_grad_mk_float(g, 1.0),
				tc_grad_mk_mul(g, fe, fe)));
	case TC_BI_ATAN:
		return mk_div(g, dx,
			tc_grad_mk_bin(g, TC_AOP_ADD, tc_grad_mk_float(g, 1.0),
				tc_grad_mk_mul(g, x, x)));
	case TC_BI_ERF: /* 2/sqrt(pi) exp(-x^2); erfc: its negation */
	case TC_BI_ERFC: {
		tc_expr *d = tc_grad_mk_mul(g, dx, scaled(g, 1.1283791670955126,
			mk_call(g, "exp", tc_grad_mk_neg(g, tc_grad_mk_mul(g, x, x)), NULL)));
		return e->ref_id == TC_BI_ERFC ? tc_grad_mk_neg(g, d) : d;
	}
	case TC_BI_FABS: /* sign(x), 0 at 0 */
		return tc_grad_mk_ternary(g,
			tc_grad_mk_bin(g, TC_AOP_GT, x, tc_grad_mk_float(g, 0.0)), dx,
			tc_grad_mk_ternary(g,
				tc_grad_mk_bin(g, TC_AOP_LT, x, tc_grad_mk_float(g, 0.0)),
					tc_grad_mk_neg(g, dx), NULL));
	case TC_BI_CEIL:
	case TC_BI_FLOOR:
	case TC_BI_ROUND:
	case TC_BI_RINT:
	case TC_BI_NEARBYINT:
	case TC_BI_TRUNC:
	case TC_BI_LOGB:
		return NULL; /* piecewise constant */
	default:
		unsupported_builtin(g, e);
		return NULL;
	}
}

/* The derivative of the norm e of its arguments (hypot, norm3d) or of its
 * reciprocal (rhypot, rnorm3d), d[k] the derivative of argument k:
 * (sum_k x_k d_k) / e, or -(sum_k x_k d_k) e^3. */
static tc_expr *diff_norm(grad_ctx *g, const tc_expr *e, tc_expr *const *d, int reciprocal)
{
	tc_expr *dot = NULL, *fe = (tc_expr *)e;
	int k;
	for (k = 0; k < e->nargs; k++)
		dot = tc_grad_mk_add(g, dot, tc_grad_mk_mul(g, e->args[k], d[k]));
	return reciprocal ? tc_grad_mk_neg(g, tc_grad_mk_mul(g, dot,
		tc_grad_mk_mul(g, fe, tc_grad_mk_mul(g, fe, fe)))) : mk_div(g, dot, fe);
}

/* The derivative of a - b q(a / b), q a rounding function (fmod: trunc,
 * remainder: rint, float %: floor), whose quotient is piecewise constant. */
static tc_expr *diff_rest(grad_ctx *g, const char *q, tc_expr *a, tc_expr *b, tc_expr *da,
	tc_expr *db)
{
	return mk_sub(g, da, tc_grad_mk_mul(g, mk_call(g, q, tc_grad_mk_bin(g, TC_AOP_DIV, a, b),
		NULL), db));
}

/* The derivative of the builtin call e of three arguments, whose
 * arguments' derivatives are d[0..2]. */
static tc_expr *diff_builtin3(grad_ctx *g, const tc_expr *e, tc_expr *const *d)
{
	if (!d[0] && !d[1] && !d[2])
		return NULL;
	if (e->ref_id == TC_BI_FMA) /* a b + c */
		return tc_grad_mk_add(g, tc_grad_mk_add(g, tc_grad_mk_mul(g, d[0], e->args[1]),
			tc_grad_mk_mul(g, e->args[0], d[1])), d[2]);
	if (e->ref_id == TC_BI_NORM3D || e->ref_id == TC_BI_RNORM3D)
		return diff_norm(g, e, d, e->ref_id == TC_BI_RNORM3D);
	unsupported_builtin(g, e);
	return NULL;
}

/* x, an operand of max(a, b) or min(a, b) whose result has type t, as a
 * number to compare: a bool operand (which the language compares only
 * with a bool) cast to t, as max and min promote it. */
static tc_expr *as_number(grad_ctx *g, tc_expr *x, tc_dtype t)
{
	return x && x->type == TC_T_BOOL ? tc_grad_mk_cast(g, t, x) : x;
}

/* x, a literal or integer argument of a float64 builtin call (its weak or
 * integer value computes in float64 there: pow(67, x) with x float64),
 * cast to float64 where the derivative calls a builtin of it alone, which
 * would compute in float32 (log(67)): the derivative keeps float64's
 * precision.  Other arguments, and other types, as they are (a 16-bit
 * adjoint computes in float32 and is cast once: grad.c, other_float). */
static tc_expr *alone(grad_ctx *g, tc_expr *x, tc_dtype t)
{
	if (!x || t != TC_T_F64 || x->type == TC_T_BOOL ||
		!(x->kind == TC_AST_INT || x->kind == TC_AST_FLOAT || !tc_grad_is_float(x->type)))
		return x;
	return tc_grad_mk_cast(g, t, x);
}

/* The derivative of the builtin call e with respect to the read r of t. */
static tc_expr *diff_builtin(grad_ctx *g, const tc_expr *e, int t, const tc_expr *r)
{
	tc_expr *d[3] = {NULL, NULL, NULL}, *da, *db, *a, *b;
	int k;
	for (k = 0; k < e->nargs && k < 3; k++)
		d[k] = tc_grad_diff(g, e->args[k], t, r);
	da = d[0];
	if (e->nargs == 1)
		return da ? diff_builtin1(g, e, da) : NULL;
	db = d[1];
	a = e->args[0];
	b = e->args[1];
	if (e->nargs > 2)
		return diff_builtin3(g, e, d);
	if (!da && !db)
		return NULL;
	switch ((tc_builtin_id)e->ref_id) {
	case TC_BI_ATAN2: /* (b da - a db) / (a^2 + b^2) */
		return mk_div(g, mk_sub(g, tc_grad_mk_mul(g, da, b), tc_grad_mk_mul(g, a, db)),
			tc_grad_mk_bin(g, TC_AOP_ADD, tc_grad_mk_mul(g, a, a),
				tc_grad_mk_mul(g, b, b)));
	case TC_BI_HYPOT:
	case TC_BI_RHYPOT:
		return diff_norm(g, e, d, e->ref_id == TC_BI_RHYPOT);
	case TC_BI_COPYSIGN: /* |a| with b's sign: da times both signs; b: 0 */
		return tc_grad_mk_mul(g, da, tc_grad_mk_mul(g,
			mk_call(g, "copysign", tc_grad_mk_float(g, 1.0), alone(g, a, e->type)),
			mk_call(g, "copysign", tc_grad_mk_float(g, 1.0), alone(g, b, e->type))));
	case TC_BI_FDIM: /* a - b where a > b, else 0 */
		return tc_grad_mk_ternary(g, tc_grad_mk_bin(g, TC_AOP_GT, a, b), mk_sub(g, da, db),
			NULL);
	case TC_BI_FMOD:
		return diff_rest(g, "trunc", a, b, da, db);
	case TC_BI_REMAINDER:
		return diff_rest(g, "rint", a, b, da, db);
	case TC_BI_NEXTAFTER: /* a moved by one unit in the last place */
		return da;
	case TC_BI_LDEXP: /* a 2^b, b an integer */
		return tc_grad_mk_mul(g, da, mk_call(g, "ldexp", tc_grad_mk_float(g, 1.0), b));
	case TC_BI_JN: /* (jn(n - 1, x) - jn(n + 1, x)) / 2, n an integer */
	case TC_BI_YN: {
		const char *f = e->ref_id == TC_BI_JN ? "jn" : "yn";
		return tc_grad_mk_mul(g, db, scaled(g, 0.5, mk_sub(g,
			mk_call(g, f, tc_grad_mk_bin(g, TC_AOP_SUB, a, tc_grad_mk_int(g, 1)), b),
			mk_call(g, f, tc_grad_mk_bin(g, TC_AOP_ADD, a, tc_grad_mk_int(g, 1)), b))));
	}
	case TC_BI_POW: {
		/* b a^(b-1) da + a^b log(a) db */
		double v;
		tc_expr *bm1, *pa;
		if (is_const(b, &v))
			bm1 = tc_grad_mk_float(g, v - 1.0);
		else
			bm1 = tc_grad_mk_bin(g, TC_AOP_SUB, b, tc_grad_mk_float(g, 1.0));
		pa = is_one(bm1) ? a : mk_call(g, "pow", a, bm1);
		return tc_grad_mk_add(g, tc_grad_mk_mul(g, da, tc_grad_mk_mul(g, b, pa)),
			tc_grad_mk_mul(g, db, tc_grad_mk_mul(g, (tc_expr *)e, mk_call(g, "log", alone(g, a, e->type),
			NULL))));
	}
	case TC_BI_FMAX:
	case TC_BI_MAX: /* ties go to the first argument */
		return tc_grad_mk_ternary(g, tc_grad_mk_bin(g, TC_AOP_GE, as_number(g, a, e->type),
			as_number(g, b, e->type)), da, db);
	case TC_BI_FMIN:
	case TC_BI_MIN:
		return tc_grad_mk_ternary(g, tc_grad_mk_bin(g, TC_AOP_LE, as_number(g, a, e->type),
			as_number(g, b, e->type)), da, db);
	default:
		unsupported_builtin(g, e);
		return NULL;
	}
}

static tc_expr *diff_pad(grad_ctx *g, const tc_expr *e, int t, const tc_expr *r);

/* d e / d t(r's subscripts): NULL for zero.  Parts that are not of a
 * floating-point type (comparisons, integer arithmetic, casts to integers)
 * have zero gradient. */
tc_expr *tc_grad_diff(grad_ctx *g, const tc_expr *e, int t, const tc_expr *r)
{
	tc_expr *da, *db;
	if (g->failed || !tc_grad_is_float(e->type))
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
			return tc_grad_same_read(e, t, r) ? tc_grad_mk_float(g, 1.0) : NULL;
		if (e->ref == TC_REF_BUILTIN)
			return diff_builtin(g, e, t, r);
		if (e->ref == TC_REF_LET) /* through the let's value */
			return tc_grad_diff(g, g->cur->where[e->ref_id].val, t, r);
		return NULL; /* sizes and index variables */
	case TC_AST_CAST:
		return tc_grad_diff(g, e->args[0], t, r);
	case TC_AST_UNARY:
		return e->op == TC_AOP_NEG ? tc_grad_mk_neg(g,
			tc_grad_diff(g, e->args[0], t, r)) : NULL;
	case TC_AST_TERNARY:
		return tc_grad_mk_ternary(g, e->args[0], tc_grad_diff(g, e->args[1], t, r),
			tc_grad_diff(g, e->args[2], t, r));
	case TC_AST_BINARY: {
		/* an integer operand (a size: x / N) is cast to the operation's
		 * type, so that a constant derivative (-1.0 / N) does not compute
		 * in the weak literal's float32 */
		tc_expr *a = e->args[0], *b = e->args[1];
		if (!tc_grad_is_float(a->type) && (e->op == TC_AOP_MUL || e->op == TC_AOP_DIV))
			a = tc_grad_mk_cast(g, e->type, a);
		if (!tc_grad_is_float(b->type) && (e->op == TC_AOP_MUL || e->op == TC_AOP_DIV))
			b = tc_grad_mk_cast(g, e->type, b);
		da = tc_grad_diff(g, e->args[0], t, r);
		db = tc_grad_diff(g, e->args[1], t, r);
		switch (e->op) {
		case TC_AOP_ADD:
			return tc_grad_mk_add(g, da, db);
		case TC_AOP_SUB:
			return mk_sub(g, da, db);
		case TC_AOP_MUL:
			return tc_grad_mk_add(g, tc_grad_mk_mul(g, da, b),
				tc_grad_mk_mul(g, a, db));
		case TC_AOP_DIV:
			/* da / b - a db / (b b) */
			return mk_sub(g, mk_div(g, da, b),
				mk_div(g, tc_grad_mk_mul(g, a, db),
					tc_grad_mk_bin(g, TC_AOP_MUL, b, b)));
		case TC_AOP_MOD: /* floor modulo */
			return diff_rest(g, "floor", e->args[0], e->args[1], da, db);
		default:
			return NULL; /* comparisons and logic */
		}
	}
	}
	return NULL;
}

/* ---- names and equality ---- */

/* The variable number of the index variable named name in s, or -1. */
int tc_grad_var_of(const tc_stmt *s, const char *name)
{
	int v;
	for (v = 0; v < s->nvars; v++)
		if (!strcmp(s->vars[v].name, name))
			return v;
	return -1;
}

/* Whether a and b are the same expression (structurally). */
int tc_grad_expr_equal(const tc_expr *a, const tc_expr *b)
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
		if (!tc_grad_expr_equal(a->args[i], b->args[i]))
			return 0;
	return 1;
}

/* ---- affine forms of subscripts ---- */

int tc_grad_aff_init(grad_ctx *g, aff *a, int nv)
{
	a->c = tc_arena_alloc(g->ar, (size_t)(nv + 1) * sizeof(*a->c));
	a->k = tc_sx_const(g->ar, 0);
	return a->c && a->k ? 0 : -1;
}

/* a += m * b */
void tc_grad_aff_add(grad_ctx *g, aff *a, const aff *b, int64_t m, int nv)
{
	int v;
	for (v = 0; v < nv; v++)
		a->c[v] += m * b->c[v];
	a->k = tc_sx_add(g->ar, a->k, tc_sx_scale(g->ar, m, b->k));
}

/* e (a subscript of g->cur) as an affine expression; 0 or -1 (not affine
 * in the index variables). */
int tc_grad_aff_of(grad_ctx *g, const tc_expr *e, aff *a, int nv)
{
	const tc_sexpr *k;
	aff b;
	int v;
	if (tc_grad_aff_init(g, a, nv) < 0)
		return -1;
	if ((k = tc_range_sexpr(g->ar, e))) {
		a->k = k;
		return 0;
	}
	switch (e->kind) {
	case TC_AST_IDENT:
		if ((v = tc_grad_var_of(g->cur, e->name)) < 0)
			return -1;
		a->c[v] = 1;
		return 0;
	case TC_AST_CAST:
		return tc_dtype_is_int(e->cast_type) ? tc_grad_aff_of(g, e->args[0], a, nv) : -1;
	case TC_AST_UNARY:
		if (e->op != TC_AOP_NEG || tc_grad_aff_of(g, e->args[0], &b, nv) < 0)
			return -1;
		tc_grad_aff_add(g, a, &b, -1, nv);
		return 0;
	case TC_AST_BINARY:
		if (e->op == TC_AOP_ADD || e->op == TC_AOP_SUB) {
			if (tc_grad_aff_of(g, e->args[0], a, nv) < 0 ||
				tc_grad_aff_of(g, e->args[1], &b, nv) < 0)
				return -1;
			tc_grad_aff_add(g, a, &b, e->op == TC_AOP_ADD ? 1 : -1, nv);
			return 0;
		}
		if (e->op == TC_AOP_MUL) {
			int64_t m;
			for (v = 0; v < 2; v++)
				if ((k = tc_range_sexpr(g->ar, e->args[v])) && tc_sx_is_const(k, &m)) {
					if (tc_grad_aff_of(g, e->args[1 - v], &b, nv) < 0)
						return -1;
					tc_grad_aff_add(g, a, &b, m, nv);
					return 0;
				}
		}
		return -1;
	default:
		return -1;
	}
}

/* ---- pad ---- */

/* acc && the bounds tests of pad's test T (docs/language.md 6.8) for the
 * reads in e, in the order they are evaluated (a gather's index read
 * before the subscript it gives), through lets and not inside a nested
 * pad, but for the reads of t with r's subscripts (where r's adjoint has
 * an element, r is in bounds) and for subscripts that are index variables
 * ranging inside their dimension. */
tc_expr *tc_grad_pad_tests(grad_ctx *g, const tc_expr *e, int t, const tc_expr *r, tc_expr *acc)
{
	int i;
	if (e->kind == TC_AST_CALL && e->ref == TC_REF_PAD)
		return acc;
	if (e->kind == TC_AST_IDENT && e->ref == TC_REF_LET)
		return tc_grad_pad_tests(g, g->cur->where[e->ref_id].val, t, r, acc);
	for (i = 0; i < e->nargs; i++)
		acc = tc_grad_pad_tests(g, e->args[i], t, r, acc);
	if (e->kind != TC_AST_CALL || e->ref != TC_REF_TENSOR || tc_grad_same_read(e, t, r))
		return acc;
	for (i = 0; i < e->nargs; i++) {
		const tc_sexpr *ext = g->def->tensors[e->ref_id].ext[i];
		tc_expr *sub = e->args[i];
		int v, lo_ok = 0, hi_ok = 0;
		aff a;
		/* v + k with v ranging over lo:hi: a bound that lo + k >= 0 or
		 * hi + k <= ext implies for every size is no test */
		if (tc_grad_aff_of(g, sub, &a, g->cur->nvars) == 0) {
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
			acc = tc_grad_mk_and(g, acc,
				tc_grad_mk_bin(g, TC_AOP_GE, sub, tc_grad_mk_int(g, 0)));
		if (!hi_ok)
			acc = tc_grad_mk_and(g, acc,
				tc_grad_mk_bin(g, TC_AOP_LT, sub, tc_grad_sx_expr(g, NULL, ext)));
	}
	return acc;
}

static int reads_read(const tc_expr *e, const tc_expr *r);

/* pad(e, 0.0). */
tc_expr *tc_grad_mk_pad(grad_ctx *g, tc_expr *e)
{
	tc_expr *c = tc_grad_mk_node(g, TC_AST_CALL, 2);
	if (!c)
		return NULL;
	c->name = "pad";
	c->ref = TC_REF_PAD;
	c->args[0] = e;
	c->args[1] = tc_grad_mk_float(g, 0.0);
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
	return e->kind != TC_AST_CALL || e->ref != TC_REF_TENSOR || tc_grad_same_read(e, t, r) ||
		!tc_grad_pad_tests(g, e, -1, NULL, NULL) || reads_read(d, e);
}

/* Whether e reads r (the same tensor and subscripts), not inside a pad. */
static int reads_read(const tc_expr *e, const tc_expr *r)
{
	int i;
	if (e->kind == TC_AST_CALL && e->ref == TC_REF_PAD)
		return 0;
	if (tc_grad_same_read(e, r->ref_id, r))
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
	tc_expr *da = tc_grad_diff(g, e->args[0], t, r), *db = tc_grad_diff(g, e->args[1], t, r),
		*test;
	if (!da && !db)
		return NULL;
	test = tc_grad_pad_tests(g, e->args[0], t, r, NULL);
	if (!test)
		return da;
	/* where da reads every read the test tests, the test is pad's own:
	 * pad(da, 0.0) (a padded factor of a sum restricts its domain) */
	if (!db && tested_in(g, e->args[0], t, r, da))
		return tc_grad_mk_pad(g, da);
	return tc_grad_mk_ternary(g, test, da, db);
}
