/* The C-expression printer (see c_expr.h): the statement of one AST
 * instance as C, with the reference interpreter's semantics (ir/interp.c)
 * spelled out so that the text is also a readable statement of them:
 *   - integer + - * and negation are done in an unsigned type (uint32_t
 *     for types of 32 bits or fewer, uint64_t otherwise), where C defines
 *     wrap-around, and converted back to the static type;
 *   - integer / and % are floor division and modulo (helpers), float % is
 *     a - b floor(a / b) computed in double, as the interpreter does;
 *   - float16 and bfloat16 values are held in doubles (floats in a dialect
 *     with half_in_float, see c_expr.h), rounded to their type (helper H,
 *     B) after every operation and stored as the dialect stores them (D2H,
 *     D2B); a 64-bit integer converted to bfloat16 goes through a double
 *     rounded to odd (U2D_ODD, L2D_ODD), so it rounds once;
 *   - float to integer conversions truncate and saturate, NaN giving 0;
 *   - min and max are fmin/fmax on floats (a NaN operand is ignored);
 *   - reductions: an init statement stores the operator's identity, an
 *     update stores acc op rhs.
 * Conversions to narrower signed types rely on two's complement
 * (implementation-defined in C; modulo in GCC, Clang and NVRTC).
 *
 * Subscripts that are affine in the indices and sizes (those the polyhedral
 * model reads as exact affine functions, see polyhedral/poly.c) are printed
 * as plain int64_t arithmetic ("c2 + c5") instead of the interpreter's
 * int32 wrap-around: the two differ only for index values beyond 2^31,
 * which the model already excludes, and the text stays readable.
 *
 * Everything a dialect spells its own way (element types, helper names,
 * builtins, element access) goes through pr->dl; this file writes only what
 * every C dialect shares. */
#include "c_expr.h"
#include "../ir/half.h"

#include <isl/id.h>
#include <isl/options.h>
#include <isl/val.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the state ---- */

/* Set pr up (see c_expr.h); the use records are allocated here. */
tc_stat tc_cg_cexpr_init(__tc_keep tc_cg_cexpr *pr, __tc_keep const tc_cg_cexpr_dialect *dl,
	__tc_keep const tc_poly *p, __tc_keep char *const *size, __tc_keep char *const *tensor)
{
	memset(pr, 0, sizeof(*pr));
	pr->dl = dl;
	pr->p = p;
	pr->size = size;
	pr->tensor = tensor;
	pr->size_used = tc_calloc((size_t)p->f->nparams + 1, 1);
	pr->tensor_used = tc_calloc((size_t)p->f->ntensors + 1, 1);
	if (!pr->size_used || !pr->tensor_used) {
		tc_cg_cexpr_fail(pr, "out of memory");
		return TC_ERR;
	}
	return TC_OK;
}

/* Free the use records of pr. */
void tc_cg_cexpr_clear(__tc_keep tc_cg_cexpr *pr)
{
	tc_free(pr->size_used);
	tc_free(pr->tensor_used);
	pr->size_used = pr->tensor_used = NULL;
}

/* Record a failure; the first message is the one reported. */
void tc_cg_cexpr_fail(__tc_keep tc_cg_cexpr *pr, __tc_keep const char *why)
{
	if (!pr->failed)
		pr->why = why;
	pr->failed = 1;
}

/* ---- the dialect's names ---- */

/* The name of helper h. */
static const char *hname(const tc_cg_cexpr *pr, tc_cg_cexpr_helper h)
{
	return pr->dl->helper[h].name;
}

/* Helper h (a float16 role: D2H, H2D, H, H_NEXTAFTER) for the 16-bit float
 * type t: the bfloat16 one when t is bfloat16. */
static tc_cg_cexpr_helper hh(tc_dtype t, tc_cg_cexpr_helper h)
{
	if (t != TC_T_BF16)
		return h;
	switch (h) {
	case TC_CG_CEXPR_D2H: return TC_CG_CEXPR_D2B;
	case TC_CG_CEXPR_H2D: return TC_CG_CEXPR_B2D;
	case TC_CG_CEXPR_H: return TC_CG_CEXPR_B;
	default: return TC_CG_CEXPR_B_NEXTAFTER;
	}
}

/* The C type that stores an element of t. */
static const char *store_type(const tc_cg_cexpr *pr, tc_dtype t)
{
	return pr->dl->type[t];
}

/* Whether the dialect holds 16-bit float values in floats (c_expr.h). */
static int half_float(const tc_cg_cexpr *pr)
{
	return pr->dl->half_in_float;
}

/* Whether values of t are C floats: float32, and the 16-bit floats in a
 * dialect that holds them in floats. */
static int is_cfloat(const tc_cg_cexpr *pr, tc_dtype t)
{
	return t == TC_T_F32 || (tc_dtype_is_half(t) && half_float(pr));
}

/* The C type a value of t is computed in (bool: int 0 or 1; float16 and
 * bfloat16: a double, or a float, holding the value). */
static const char *value_type(const tc_cg_cexpr *pr, tc_dtype t)
{
	if (t == TC_T_BOOL)
		return "int";
	if (tc_dtype_is_half(t))
		return half_float(pr) ? "float" : "double";
	return store_type(pr, t);
}

/* The unsigned type integer arithmetic of t wraps in. */
static const char *wrap_type(const tc_cg_cexpr *pr, tc_dtype t)
{
	return store_type(pr, tc_dtype_bits(t) <= 32 ? TC_T_U32 : TC_T_U64);
}

/* ---- precedence ---- */

/* C precedence levels of the printed text: an expression printed at level
 * q is put in parentheses where its context needs level prec > q. */
enum {
	P_TOP = 0,   /* a full expression (an argument, a right-hand side) */
	P_COND = 1,  /* ?: */
	P_OR = 2,    /* || */
	P_AND = 3,   /* && */
	P_EQ = 4,    /* == != */
	P_REL = 5,   /* < > <= >= */
	P_ADD = 6,   /* + - */
	P_MUL = 7,   /* * / % */
	P_UNARY = 8, /* - ! casts */
	P_PRIMARY = 9, /* names, constants, calls, subscripts, parentheses */
};

/* Append text (printed at level q) to b for a context of level prec. */
static void put_at(tc_buf *b, const tc_buf *text, int q, int prec)
{
	const char *s = text->s ? text->s : "";
	if (text->oom)
		b->oom = 1;
	if (q < prec)
		tc_buf_printf(b, "(%s)", s);
	else
		tc_buf_puts(b, s);
}

/* " + x", written " - y" when x is "-y" (a negated first term: in a sum of
 * int64 subscripts the two are equal). */
static void put_plus(tc_buf *b, const tc_buf *x, int q)
{
	const char *s = x->s ? x->s : "";
	if (x->oom)
		b->oom = 1;
	if (s[0] == '-' && q >= P_ADD)
		tc_buf_printf(b, " - %s", s + 1);
	else if (q >= P_ADD)
		tc_buf_printf(b, " + %s", s);
	else
		tc_buf_printf(b, " + (%s)", s);
}

/* ---- isl expressions ---- */

/* Mark the sizes e mentions as used. */
void tc_cg_cexpr_note_ids(__tc_keep tc_cg_cexpr *pr, __tc_keep isl_ast_expr *e)
{
	if (isl_ast_expr_get_type(e) == isl_ast_expr_id) {
		isl_id *id = isl_ast_expr_id_get_id(e);
		int i = tc_poly_param_index(pr->p, isl_id_get_name(id));
		if (i >= 0)
			pr->size_used[i] = 1;
		isl_id_free(id);
	} else if (isl_ast_expr_get_type(e) == isl_ast_expr_op) {
		isl_size i, n = isl_ast_expr_op_get_n_arg(e);
		for (i = 0; i < n; i++) {
			isl_ast_expr *a = isl_ast_expr_op_get_arg(e, i);
			if (a)
				tc_cg_cexpr_note_ids(pr, a);
			isl_ast_expr_free(a);
		}
	}
}

/* The level isl's C printer gives e (min, max and floord print as calls). */
static int isl_prec(isl_ast_expr *e)
{
	isl_val *v;
	int neg;
	switch (isl_ast_expr_get_type(e)) {
	case isl_ast_expr_int:
		v = isl_ast_expr_int_get_val(e);
		neg = v && isl_val_is_neg(v);
		isl_val_free(v);
		return neg ? P_UNARY : P_PRIMARY;
	case isl_ast_expr_op:
		break;
	default:
		return P_PRIMARY;
	}
	switch (isl_ast_expr_op_get_type(e)) {
	case isl_ast_expr_op_and:
	case isl_ast_expr_op_and_then: return P_AND;
	case isl_ast_expr_op_or:
	case isl_ast_expr_op_or_else: return P_OR;
	case isl_ast_expr_op_minus:
	case isl_ast_expr_op_address_of: return P_UNARY;
	case isl_ast_expr_op_add:
	case isl_ast_expr_op_sub: return P_ADD;
	case isl_ast_expr_op_mul:
	case isl_ast_expr_op_div:
	case isl_ast_expr_op_pdiv_q:
	case isl_ast_expr_op_pdiv_r:
	case isl_ast_expr_op_zdiv_r: return P_MUL;
	case isl_ast_expr_op_cond:
	case isl_ast_expr_op_select: return P_COND;
	case isl_ast_expr_op_eq: return P_EQ;
	case isl_ast_expr_op_le:
	case isl_ast_expr_op_lt:
	case isl_ast_expr_op_ge:
	case isl_ast_expr_op_gt: return P_REL;
	default: return P_PRIMARY; /* max, min, fdiv_q, call, access, member */
	}
}

/* prn in C, with isl's names for the operations it prints as calls set
 * to the dialect's helpers. */
__tc_give isl_printer *tc_cg_cexpr_isl_printer(__tc_keep const tc_cg_cexpr_dialect *dl,
	__tc_take isl_printer *prn)
{
	const tc_cg_cexpr_helper_def *h = dl->helper;
	prn = isl_printer_set_output_format(prn, ISL_FORMAT_C);
	prn = isl_ast_expr_op_type_set_print_name(prn, isl_ast_expr_op_fdiv_q,
		h[TC_CG_CEXPR_FLOORD].name);
	prn = isl_ast_expr_op_type_set_print_name(prn, isl_ast_expr_op_min,
		h[TC_CG_CEXPR_MIN].name);
	prn = isl_ast_expr_op_type_set_print_name(prn, isl_ast_expr_op_max,
		h[TC_CG_CEXPR_MAX].name);
	return prn;
}

/* An isl expression (an int64_t value) printed by isl; returns its level. */
static int put_isl_bare(tc_cg_cexpr *pr, tc_buf *b, isl_ast_expr *e)
{
	isl_printer *prn;
	char *s;

	tc_cg_cexpr_note_ids(pr, e);
	prn = tc_cg_cexpr_isl_printer(pr->dl, isl_printer_to_str(pr->p->ctx));
	prn = isl_printer_print_ast_expr(prn, e);
	s = isl_printer_get_str(prn);
	isl_printer_free(prn);
	if (!s) {
		tc_cg_cexpr_fail(pr, "isl could not print an expression");
		return P_PRIMARY;
	}
	tc_buf_puts(b, s);
	free(s);
	return isl_prec(e);
}

/* ---- size expressions ---- */

static void put_sx(tc_cg_cexpr *pr, tc_buf *b, const tc_sexpr *e, int paren);

/* a + b with b's sign folded into the operator ("N - 1", "H - KH"). */
static void put_sx_sum(tc_cg_cexpr *pr, tc_buf *b, const tc_sexpr *x, const tc_sexpr *y,
	int paren)
{
	int64_t c;
	if (x->kind == TC_SX_CONST && y->kind != TC_SX_CONST) { /* constants last */
		const tc_sexpr *t = x;
		x = y;
		y = t;
	}
	if (paren)
		tc_buf_putc(b, '(');
	put_sx(pr, b, x, 0);
	if (tc_sx_is_const(y, &c) && c < 0 && c != INT64_MIN) {
		tc_buf_printf(b, " - %lld", (long long)-c);
	} else if (y->kind == TC_SX_MUL && y->c < 0 && y->c != INT64_MIN) {
		tc_buf_puts(b, " - ");
		if (y->c != -1)
			tc_buf_printf(b, "%lld * ", (long long)-y->c);
		put_sx(pr, b, y->a, 1);
	} else {
		tc_buf_puts(b, " + ");
		put_sx(pr, b, y, y->kind == TC_SX_ADD);
	}
	if (paren)
		tc_buf_putc(b, ')');
}

/* A size expression as int64_t C (in parentheses if paren and compound). */
static void put_sx(tc_cg_cexpr *pr, tc_buf *b, const tc_sexpr *e, int paren)
{
	switch (e->kind) {
	case TC_SX_CONST:
		tc_buf_printf(b, e->c < 0 && paren ? "(%lld)" : "%lld", (long long)e->c);
		break;
	case TC_SX_PARAM:
		pr->size_used[e->id] = 1;
		tc_buf_puts(b, pr->size[e->id]);
		break;
	case TC_SX_VAR: /* extents never depend on index variables */
		tc_cg_cexpr_fail(pr, "a tensor extent depends on an index variable");
		break;
	case TC_SX_ADD:
		put_sx_sum(pr, b, e->a, e->b, paren);
		break;
	case TC_SX_MUL:
		if (paren)
			tc_buf_putc(b, '(');
		tc_buf_printf(b, "%lld * ", (long long)e->c);
		put_sx(pr, b, e->a, 1);
		if (paren)
			tc_buf_putc(b, ')');
		break;
	case TC_SX_FLOORDIV:
	case TC_SX_MOD:
		tc_buf_printf(b, "%s(", hname(pr, e->kind == TC_SX_FLOORDIV ? TC_CG_CEXPR_FLOORD
								     : TC_CG_CEXPR_FLOORMOD));
		put_sx(pr, b, e->a, 0);
		tc_buf_printf(b, ", %lld)", (long long)e->c);
		break;
	case TC_SX_MIN:
	case TC_SX_MAX:
		tc_buf_printf(b, "%s(",
			hname(pr, e->kind == TC_SX_MIN ? TC_CG_CEXPR_MIN : TC_CG_CEXPR_MAX));
		put_sx(pr, b, e->a, 0);
		tc_buf_puts(b, ", ");
		put_sx(pr, b, e->b, 0);
		tc_buf_putc(b, ')');
		break;
	}
}

/* ---- values ---- */

/* The statement instance being printed. */
typedef struct site {
	tc_cg_cexpr *pr;
	const tc_poly_inst *inst;
	const tc_ir_expr *unrounded; /* a float16 value the store rounds anyway */
} site;

/* A printer of IR expressions: appends e to b, returns its level. */
typedef int put_fn(const site *s, tc_buf *b, const tc_ir_expr *e);

static put_fn put_bare, put_affine;

/* e printed by put for a context of level prec. */
static void put_in(put_fn *put, const site *s, tc_buf *b, const tc_ir_expr *e, int prec)
{
	tc_buf t;
	int q;
	tc_buf_init(&t);
	q = put(s, &t, e);
	put_at(b, &t, q, prec);
	tc_buf_free(&t);
}

/* "-e", e printed by put: "-(-y)", never "--y"; returns its level. */
static int put_neg(put_fn *put, const site *s, tc_buf *b, const tc_ir_expr *e)
{
	tc_buf t;
	int q;
	tc_buf_init(&t);
	q = put(s, &t, e);
	tc_buf_putc(b, '-');
	put_at(b, &t, q, t.s && t.s[0] == '-' ? P_PRIMARY : P_UNARY);
	tc_buf_free(&t);
	return P_UNARY;
}

/* e as C text for a context of level prec. */
static void put_expr(const site *s, tc_buf *b, const tc_ir_expr *e, int prec)
{
	put_in(put_bare, s, b, e, prec);
}

/* An integer constant of type t (normalised to t as the interpreter does). */
static int put_int_const(tc_buf *b, tc_dtype t, int64_t v)
{
	int bits = tc_dtype_bits(t);
	if (t == TC_T_BOOL) {
		tc_buf_puts(b, v ? "1" : "0");
		return P_PRIMARY;
	}
	if (tc_dtype_is_unsigned(t)) {
		uint64_t u = (uint64_t)v;
		if (bits < 64)
			u &= (UINT64_C(1) << bits) - 1;
		if (u <= INT32_MAX)
			tc_buf_printf(b, "%llu", (unsigned long long)u);
		else
			tc_buf_printf(b, "UINT64_C(%llu)", (unsigned long long)u);
		return P_PRIMARY;
	}
	if (bits < 64) { /* sign-extend from bits */
		uint64_t m = UINT64_C(1) << (bits - 1);
		uint64_t u = (uint64_t)v & ((m << 1) - 1);
		v = (int64_t)(u ^ m) - (int64_t)m;
	}
	if (v == INT64_MIN) {
		tc_buf_puts(b, "INT64_MIN");
		return P_PRIMARY;
	}
	if (v > INT32_MIN && v <= INT32_MAX)
		tc_buf_printf(b, "%lld", (long long)v);
	else
		tc_buf_printf(b, "INT64_C(%lld)", (long long)v);
	return v < 0 ? P_UNARY : P_PRIMARY;
}

/* The shortest decimal that reads back as x (a float literal if is_float),
 * else hexadecimal. */
static int put_float_literal(tc_buf *b, double x, int is_float)
{
	char s[64];
	int prec;
	if (isnan(x)) {
		tc_buf_puts(b, "NAN");
		return P_PRIMARY;
	}
	if (isinf(x)) { /* a float constant: the same value in double */
		tc_buf_puts(b, x < 0 ? "-INFINITY" : "INFINITY");
		return x < 0 ? P_UNARY : P_PRIMARY;
	}
	if (x == floor(x) && fabs(x) < 0x1p53) { /* "100.0", not "1e+02" */
		snprintf(s, sizeof(s), "%.0f", x);
	} else {
		for (prec = 1; prec <= 17; prec++) {
			snprintf(s, sizeof(s), "%.*g", prec, x);
			if (is_float ? strtof(s, NULL) == (float)x : strtod(s, NULL) == x)
				break;
		}
		if (prec > 17)
			snprintf(s, sizeof(s), "%a", x);
	}
	if (!strpbrk(s, ".eEpx"))
		strcat(s, ".0");
	tc_buf_printf(b, "%s%s", s, is_float ? "f" : "");
	return s[0] == '-' ? P_UNARY : P_PRIMARY;
}

static int put_const(const tc_cg_cexpr *pr, tc_buf *b, const tc_ir_expr *e)
{
	switch (e->type) {
	case TC_T_F16: /* a double (or float) holding the float16 value */
		return put_float_literal(b, tc_half_to_double(tc_half_from_double(e->c.f)),
			half_float(pr));
	case TC_T_BF16: /* a double (or float) holding the bfloat16 value */
		return put_float_literal(b, tc_bf16_to_double(tc_bf16_from_double(e->c.f)),
			half_float(pr));
	case TC_T_F32:
		return put_float_literal(b, (double)(float)e->c.f, 1);
	case TC_T_F64:
		return put_float_literal(b, e->c.f, 0);
	default:
		return put_int_const(b, e->type, e->c.i);
	}
}

/* An affine subscript as int64_t arithmetic; returns its level. */
static int put_affine(const site *s, tc_buf *b, const tc_ir_expr *e)
{
	const tc_ir_expr *x, *y;
	tc_buf t;
	int q;
	switch (e->op) {
	case TC_OP_CONST:
		tc_buf_printf(b, "%lld", (long long)e->c.i);
		return e->c.i < 0 ? P_UNARY : P_PRIMARY;
	case TC_OP_INDEX:
	case TC_OP_SIZE:
		return put_bare(s, b, e);
	case TC_OP_CAST:
		return put_affine(s, b, e->args[0]);
	case TC_OP_NEG:
		return put_neg(put_affine, s, b, e->args[0]);
	case TC_OP_ADD: /* int64 sums reassociate: a + (b + c) is a + b + c */
		put_in(put_affine, s, b, e->args[0], P_ADD);
		tc_buf_init(&t);
		q = put_affine(s, &t, e->args[1]);
		put_plus(b, &t, q);
		tc_buf_free(&t);
		return P_ADD;
	case TC_OP_SUB:
		put_in(put_affine, s, b, e->args[0], P_ADD);
		tc_buf_puts(b, " - ");
		put_in(put_affine, s, b, e->args[1], P_MUL);
		return P_ADD;
	case TC_OP_MUL:
		x = e->args[0];
		y = e->args[1];
		if (y->op == TC_OP_CONST) {
			x = e->args[1];
			y = e->args[0];
		}
		tc_buf_printf(b, "%lld * ", (long long)x->c.i);
		put_in(put_affine, s, b, y, P_UNARY);
		return P_MUL;
	case TC_OP_DIV:
	case TC_OP_MOD:
		tc_buf_printf(b, "%s(", hname(s->pr, e->op == TC_OP_DIV ? TC_CG_CEXPR_FLOORD
								      : TC_CG_CEXPR_FLOORMOD));
		put_affine(s, b, e->args[0]);
		tc_buf_printf(b, ", %lld)", (long long)e->args[1]->c.i);
		return P_PRIMARY;
	case TC_OP_CALL:
		tc_buf_printf(b, "%s(",
			hname(s->pr, e->id == TC_BI_MIN ? TC_CG_CEXPR_MIN : TC_CG_CEXPR_MAX));
		put_affine(s, b, e->args[0]);
		tc_buf_puts(b, ", ");
		put_affine(s, b, e->args[1]);
		tc_buf_putc(b, ')');
		return P_PRIMARY;
	default:
		tc_cg_cexpr_fail(s->pr, "internal error: a subscript taken for affine is not");
		return P_PRIMARY;
	}
}

/* One subscript as an int64_t value; returns its level. */
static int put_subscript(const site *s, tc_buf *b, const tc_ir_expr *e)
{
	if (tc_ir_affine(e))
		return put_affine(s, b, e);
	tc_buf_printf(b, "(%s)", store_type(s->pr, TC_T_I64));
	put_expr(s, b, e, P_UNARY);
	return P_UNARY;
}

/* The flat offset of an element of tensor: row-major, by Horner's scheme
 * over the extents, ((s0 * E1 + s1) * E2 + s2), with leading and trailing
 * zero subscripts left out; the subscripts are IR expressions (sub) or,
 * for the element a statement writes, the instance's index expressions
 * (sub NULL). */
static void put_offset(const site *s, tc_buf *b, int tensor, tc_ir_expr *const *sub)
{
	tc_cg_cexpr *pr = s->pr;
	const tc_ir_tensor *t = &pr->p->f->tensors[tensor];
	tc_buf x[TC_MAX_RANK];
	int q[TC_MAX_RANK];
	int k, first = 0, n = t->ndim;

	if (n > TC_MAX_RANK || (!sub && n > s->inst->n)) {
		tc_cg_cexpr_fail(pr,
			"internal error: a tensor of more dimensions than its subscripts");
		return;
	}
	for (k = 0; k < n; k++) {
		tc_buf_init(&x[k]);
		q[k] = sub ? put_subscript(s, &x[k], sub[k])
			   : put_isl_bare(pr, &x[k], s->inst->index[k]);
		if (!x[k].s)
			tc_buf_puts(&x[k], "");
	}
	if (t->panel > 0 && n >= 2) { /* ir/ir.h: ((c / P) * R + row) * P + c % P */
		tc_buf_printf(b, "(((%s) / %d * ", x[n - 1].s, t->panel);
		for (k = 0; k < n - 1; k++) {
			if (k)
				tc_buf_puts(b, " * ");
			put_sx(pr, b, t->ext[k], 1);
		}
		tc_buf_puts(b, " + ");
		for (k = 1; k < n - 1; k++) /* row: Horner's scheme */
			tc_buf_putc(b, '(');
		tc_buf_printf(b, "(%s)", x[0].s);
		for (k = 1; k < n - 1; k++) {
			tc_buf_puts(b, " * ");
			put_sx(pr, b, t->ext[k], 1);
			tc_buf_printf(b, " + (%s))", x[k].s);
		}
		tc_buf_printf(b, ") * %d + (%s) %% %d)", t->panel, x[n - 1].s, t->panel);
		for (k = 0; k < n; k++)
			tc_buf_free(&x[k]);
		return;
	}
	while (first < n - 1 && x[first].s && !strcmp(x[first].s, "0"))
		first++;
	if (n == 0)
		tc_buf_putc(b, '0');
	for (k = first + 1; k < n - 1; k++)
		tc_buf_putc(b, '(');
	for (k = first; k < n; k++) {
		if (k == first && k < n - 1 && x[k].s && !strcmp(x[k].s, "1")) {
			put_sx(pr, b, t->ext[k + 1], 0); /* 1 * E1 is E1 */
			continue;
		}
		if (k == first)
			put_at(b, &x[k], q[k], k < n - 1 ? P_MUL : P_TOP);
		else if (!x[k].s || strcmp(x[k].s, "0"))
			put_plus(b, &x[k], q[k]);
		if (k > first && k < n - 1)
			tc_buf_putc(b, ')');
		if (k < n - 1) {
			tc_buf_puts(b, " * ");
			put_sx(pr, b, t->ext[k + 1], 1);
		}
	}
	for (k = 0; k < n; k++)
		tc_buf_free(&x[k]);
}

void tc_cg_cexpr_put_isl(__tc_keep tc_cg_cexpr *pr, __tc_keep tc_buf *b,
	__tc_keep isl_ast_expr *e)
{
	int paren = isl_prec(e) < P_MUL;
	if (paren)
		tc_buf_putc(b, '(');
	put_isl_bare(pr, b, e);
	if (paren)
		tc_buf_putc(b, ')');
}

/* The element of shared-memory copy c (p->gpu_copies) at index (one
 * expression per dimension of the box): NAME[(i0 * s1 + i1) * s2 + i2]. */
static void put_shared(tc_cg_cexpr *pr, tc_buf *b, int c, isl_ast_expr *const *index)
{
	const tc_poly_gpu_copy *cp = &pr->p->gpu_copies[c];
	int k;
	tc_buf_printf(b, "%s[", pr->shared[c]);
	for (k = 1; k < cp->ndims; k++)
		tc_buf_putc(b, '(');
	for (k = 0; k < cp->ndims; k++) {
		if (k)
			tc_buf_printf(b, ") * %lld + ", (long long)cp->size[k]);
		tc_cg_cexpr_put_isl(pr, b, index[k]);
	}
	tc_buf_putc(b, ']');
}

/* An element of tensor (tensor[offset] in host C), as the dialect
 * addresses it; a GPU kernel's shared-memory copy where the statement
 * reads one (tc_poly_inst.shared). */
static void put_element(const site *s, tc_buf *b, int tensor, tc_ir_expr *const *sub)
{
	tc_cg_cexpr *pr = s->pr;
	tc_buf o;
	int i;

	for (i = 0; s->inst && pr->shared && i < s->inst->nshared; i++)
		if (pr->p->gpu_copies[s->inst->shared[i].copy].tensor == tensor) {
			put_shared(pr, b, s->inst->shared[i].copy, s->inst->shared[i].index);
			return;
		}

	tc_buf_init(&o);
	put_offset(s, &o, tensor, sub);
	pr->tensor_used[tensor] = 1;
	if (o.oom)
		b->oom = 1;
	else
		pr->dl->put_access(pr, b, tensor, o.s ? o.s : "");
	tc_buf_free(&o);
}

/* Read an element as a value of its type. */
static int put_read(const site *s, tc_buf *b, int tensor, tc_ir_expr *const *sub)
{
	tc_dtype t = s->pr->p->f->tensors[tensor].dtype;
	if (tc_dtype_is_half(t)) {
		tc_buf_printf(b, "%s(", hname(s->pr, hh(t, TC_CG_CEXPR_H2D)));
		put_element(s, b, tensor, sub);
		tc_buf_putc(b, ')');
		return P_PRIMARY;
	}
	put_element(s, b, tensor, sub);
	if (t == TC_T_BOOL) { /* any nonzero byte is true */
		tc_buf_puts(b, " != 0");
		return P_EQ;
	}
	return P_PRIMARY;
}

/* Whether a float16 result gets rounded here (not when the store does). */
static int rounds(const site *s, const tc_ir_expr *e)
{
	return e != s->unrounded;
}

/* Convert a (of type from) to type to, as the interpreter's convert(). */
static int put_cast(const site *s, tc_buf *b, const tc_ir_expr *e)
{
	const tc_ir_expr *a = e->args[0];
	tc_dtype from = a->type, to = e->type;

	if (from == to)
		return put_bare(s, b, a);
	if (to == TC_T_BOOL) {
		put_expr(s, b, a, P_ADD);
		tc_buf_puts(b, " != 0");
		return P_EQ;
	}
	if (tc_dtype_is_half(to)) { /* to double (exact, or one rounding), then to 16 bits */
		int r = rounds(s, e);
		if (r)
			tc_buf_printf(b, "%s(", hname(s->pr, hh(to, TC_CG_CEXPR_H)));
		if (from == TC_T_F64 || tc_dtype_is_half(from) ||
			(from == TC_T_F32 && half_float(s->pr))) { /* H takes a float there */
			put_expr(s, b, a, r ? P_TOP : P_PRIMARY);
		} else if (to == TC_T_BF16 && tc_dtype_bits(from) == 64) { /* one rounding */
			tc_buf_printf(b, "%s(", hname(s->pr, tc_dtype_is_signed(from)
				? TC_CG_CEXPR_L2D_ODD : TC_CG_CEXPR_U2D_ODD));
			put_expr(s, b, a, P_TOP);
			tc_buf_putc(b, ')');
		} else {
			tc_buf_puts(b, "(double)");
			put_expr(s, b, a, P_UNARY);
		}
		tc_buf_puts(b, r ? ")" : "");
		return r || from == TC_T_F64 || tc_dtype_is_half(from) ||
				(from == TC_T_F32 && half_float(s->pr)) ||
				(to == TC_T_BF16 && tc_dtype_bits(from) == 64)
			? P_PRIMARY : P_UNARY;
	}
	if (tc_dtype_is_float(to)) {
		if (tc_dtype_is_half(from) && to == (half_float(s->pr) ? TC_T_F32 : TC_T_F64))
			return put_bare(s, b, a); /* already a double (or a float) */
		/* one rounding from an integer; exact, or one rounding, from a float */
		tc_buf_printf(b, "(%s)", value_type(s->pr, to));
		put_expr(s, b, a, P_UNARY);
		return P_UNARY;
	}
	if (tc_dtype_is_float(from)) { /* saturating */
		int u = tc_dtype_is_unsigned(to), wide = to == TC_T_I64 || to == TC_T_U64;
		if (!wide)
			tc_buf_printf(b, "(%s)", value_type(s->pr, to));
		tc_buf_printf(b, "%s(", hname(s->pr, u ? TC_CG_CEXPR_F2U : TC_CG_CEXPR_F2S));
		put_expr(s, b, a, P_TOP);
		tc_buf_printf(b, ", %d)", tc_dtype_bits(to));
		return wide ? P_PRIMARY : P_UNARY;
	}
	tc_buf_printf(b, "(%s)", value_type(s->pr, to)); /* integer to integer: wraps */
	put_expr(s, b, a, P_UNARY);
	return P_UNARY;
}

/* Integer x op y wrapping in t: (T)((U)x op (U)y). */
static int put_wrap_binary(const site *s, tc_buf *b, tc_dtype t, const char *op, int q,
	const tc_ir_expr *x, const tc_ir_expr *y)
{
	const char *u = wrap_type(s->pr, t);
	int same = !strcmp(u, store_type(s->pr, t));
	if (t == TC_T_BOOL)
		tc_buf_putc(b, '(');
	else if (!same)
		tc_buf_printf(b, "(%s)(", value_type(s->pr, t));
	tc_buf_printf(b, "(%s)", u);
	put_expr(s, b, x, P_UNARY);
	tc_buf_printf(b, " %s (%s)", op, u);
	put_expr(s, b, y, P_UNARY);
	if (t == TC_T_BOOL) {
		tc_buf_puts(b, ") != 0");
		return P_EQ;
	}
	if (!same) {
		tc_buf_putc(b, ')');
		return P_UNARY;
	}
	return q;
}

/* Helper h (x, y) on int64 or uint64, the result converted to t. */
static int put_helper2(const site *s, tc_buf *b, tc_dtype t, tc_cg_cexpr_helper h,
	const tc_ir_expr *x, const tc_ir_expr *y)
{
	int cast = t != TC_T_I64 && t != TC_T_U64;
	if (cast)
		tc_buf_printf(b, "(%s)", value_type(s->pr, t));
	tc_buf_printf(b, "%s(", hname(s->pr, h));
	put_expr(s, b, x, P_TOP);
	tc_buf_puts(b, ", ");
	put_expr(s, b, y, P_TOP);
	tc_buf_putc(b, ')');
	return cast ? P_UNARY : P_PRIMARY;
}

static int put_arith(const site *s, tc_buf *b, const tc_ir_expr *e)
{
	static const char *const sym[] = {[TC_OP_ADD] = "+", [TC_OP_SUB] = "-",
		[TC_OP_MUL] = "*", [TC_OP_DIV] = "/", [TC_OP_MOD] = "%"};
	tc_dtype t = e->type;
	const tc_ir_expr *x = e->args[0], *y = e->args[1];
	int q = e->op == TC_OP_ADD || e->op == TC_OP_SUB ? P_ADD : P_MUL;
	tc_ir_fma m;

	if (s->pr->contract && tc_ir_fma_of(e, &m)) { /* rounded once */
		tc_buf_puts(b, t == TC_T_F32 ? "fmaf(" : "fma(");
		tc_buf_puts(b, m.neg_xy ? "-" : "");
		put_expr(s, b, m.x, m.neg_xy ? P_UNARY : P_TOP);
		tc_buf_puts(b, ", ");
		put_expr(s, b, m.y, P_TOP);
		tc_buf_puts(b, m.neg_z ? ", -" : ", ");
		put_expr(s, b, m.z, m.neg_z ? P_UNARY : P_TOP);
		tc_buf_putc(b, ')');
		return P_PRIMARY;
	}
	if (tc_dtype_is_float(t)) {
		int r = tc_dtype_is_half(t) && rounds(s, e);
		if (r)
			tc_buf_printf(b, "%s(", hname(s->pr, hh(t, TC_CG_CEXPR_H)));
		if (e->op == TC_OP_MOD) { /* a - b floor(a / b) in double */
			tc_buf_printf(b, "%s%s(", t == TC_T_F32 ? "(float)" : "",
				hname(s->pr, TC_CG_CEXPR_FMODFLOOR));
			put_expr(s, b, x, P_TOP);
			tc_buf_puts(b, ", ");
			put_expr(s, b, y, P_TOP);
			tc_buf_putc(b, ')');
			q = t == TC_T_F32 ? P_UNARY : P_PRIMARY;
		} else { /* left-associative: (a + b) + c is a + b + c */
			put_expr(s, b, x, q);
			tc_buf_printf(b, " %s ", sym[e->op]);
			put_expr(s, b, y, q + 1);
		}
		tc_buf_puts(b, r ? ")" : "");
		return r ? P_PRIMARY : q;
	}
	if (e->op == TC_OP_DIV || e->op == TC_OP_MOD) {
		int sgn = tc_dtype_is_signed(t); /* bool: unsigned */
		tc_cg_cexpr_helper h = e->op == TC_OP_DIV
			? (sgn ? TC_CG_CEXPR_DIVS : TC_CG_CEXPR_DIVU)
			: (sgn ? TC_CG_CEXPR_MODS : TC_CG_CEXPR_MODU);
		if (t == TC_T_BOOL) {
			put_helper2(s, b, TC_T_U64, h, x, y);
			tc_buf_puts(b, " != 0");
			return P_EQ;
		}
		return put_helper2(s, b, t, h, x, y);
	}
	return put_wrap_binary(s, b, t, sym[e->op], q, x, y);
}

/* The arguments of a call, separated by commas; an int32 argument (n of
 * jn/yn, the exponent of ldexp) as an int; a 16-bit float held in a float
 * as a double when the call is in double (C++ would pick the float
 * overload). */
static void put_args(const site *s, tc_buf *b, const tc_ir_expr *e, int in_double)
{
	int i;
	for (i = 0; i < e->nargs; i++) {
		if (i)
			tc_buf_puts(b, ", ");
		if (in_double && half_float(s->pr) && tc_dtype_is_half(e->args[i]->type)) {
			tc_buf_puts(b, "(double)");
			put_expr(s, b, e->args[i], P_UNARY);
		} else if (!tc_dtype_is_float(e->args[i]->type) && e->args[i]->op != TC_OP_CONST) {
			tc_buf_puts(b, "(int)");
			put_expr(s, b, e->args[i], P_UNARY);
		} else {
			put_expr(s, b, e->args[i], P_TOP);
		}
	}
}

/* The builtin whose reciprocal builtin id is (rsqrt: sqrt), or -1. */
static int reciprocal_of(int id)
{
	switch (id) {
	case TC_BI_RSQRT: return TC_BI_SQRT;
	case TC_BI_RCBRT: return TC_BI_CBRT;
	case TC_BI_RHYPOT: return TC_BI_HYPOT;
	case TC_BI_RNORM3D: return TC_BI_NORM3D;
	default: return -1;
	}
}

/* Builtin id applied to the arguments of e in double precision, as the
 * dialect writes it: its double function, a short definition (exp10 as
 * pow, rsqrt x as 1 / sqrt x, ...), or the extern function; returns its
 * level. */
static int put_double_call(const site *s, tc_buf *b, const tc_ir_expr *e, int id)
{
	tc_cg_cexpr *pr = s->pr;
	const char *name = tc_builtins[id].name;
	int r;

	pr->builtin_used[id] = 1;
	switch (pr->dl->builtin_form((tc_builtin_id)id)) {
	case TC_CG_CEXPR_BI_INLINE:
		if (id == TC_BI_EXP10) {
			tc_buf_puts(b, "pow(10.0, ");
			break;
		}
		if ((r = reciprocal_of(id)) < 0) {
			tc_cg_cexpr_fail(pr, "internal error: a builtin without an inline form");
			return P_PRIMARY;
		}
		tc_buf_puts(b, "1.0 / ");
		put_double_call(s, b, e, r);
		return P_MUL;
	case TC_CG_CEXPR_BI_EXTERN:
		tc_buf_printf(b, "%s%s(", pr->dl->extern_prefix, name);
		break;
	case TC_CG_CEXPR_BI_DOUBLE:
	case TC_CG_CEXPR_BI_C99:
		tc_buf_printf(b, "%s(", name);
		break;
	}
	put_args(s, b, e, 1);
	tc_buf_putc(b, ')');
	return P_PRIMARY;
}

static int put_call(const site *s, tc_buf *b, const tc_ir_expr *e)
{
	tc_cg_cexpr *pr = s->pr;
	tc_dtype t = e->type;
	tc_buf d;
	int q;

	if (e->id == TC_BI_MIN || e->id == TC_BI_MAX) {
		int mx = e->id == TC_BI_MAX;
		if (tc_dtype_is_float(t)) { /* fmin/fmax: a NaN operand is ignored */
			tc_buf_printf(b, "%s%s(", mx ? "fmax" : "fmin", is_cfloat(pr, t) ? "f" : "");
			put_args(s, b, e, 0);
			tc_buf_putc(b, ')');
			return P_PRIMARY;
		}
		if (tc_dtype_is_signed(t))
			return put_helper2(s, b, t, mx ? TC_CG_CEXPR_MAX : TC_CG_CEXPR_MIN,
				e->args[0], e->args[1]);
		return put_helper2(s, b, t, mx ? TC_CG_CEXPR_UMAX : TC_CG_CEXPR_UMIN, e->args[0],
			e->args[1]);
	}
	pr->builtin_used[e->id] = 1;
	if (e->id == TC_BI_ILOGB) { /* an int32 result */
		tc_buf_printf(b, "(%s)ilogb(", value_type(pr, TC_T_I32));
		put_args(s, b, e, 0);
		tc_buf_putc(b, ')');
		return P_UNARY;
	}
	if (tc_dtype_is_half(t) && e->id == TC_BI_NEXTAFTER) { /* steps in the type */
		tc_buf_printf(b, "%s(", hname(pr, hh(t, TC_CG_CEXPR_H_NEXTAFTER)));
		put_args(s, b, e, 0);
		tc_buf_putc(b, ')');
		return P_PRIMARY;
	}
	if (is_cfloat(pr, t) && pr->dl->builtin_form((tc_builtin_id)e->id) == TC_CG_CEXPR_BI_C99 &&
		(t == TC_T_F32 || e->id != TC_BI_FMA)) { /* 16 bits: rounded once */
		int r = tc_dtype_is_half(t) && rounds(s, e);
		if (r)
			tc_buf_printf(b, "%s(", hname(pr, hh(t, TC_CG_CEXPR_H)));
		tc_buf_printf(b, "%sf(", tc_builtins[e->id].name);
		put_args(s, b, e, 0);
		tc_buf_puts(b, r ? "))" : ")");
		return P_PRIMARY;
	}
	/* in double; float16 and float32 results rounded once */
	tc_buf_init(&d);
	q = put_double_call(s, &d, e, e->id);
	if (tc_dtype_is_half(t) && rounds(s, e)) {
		tc_buf_printf(b, "%s(", hname(pr, hh(t, TC_CG_CEXPR_H)));
		put_at(b, &d, q, P_TOP);
		tc_buf_putc(b, ')');
		q = P_PRIMARY;
	} else if (t == TC_T_F32) {
		tc_buf_puts(b, "(float)");
		put_at(b, &d, q, P_UNARY);
		q = P_UNARY;
	} else {
		put_at(b, &d, q, P_TOP);
	}
	tc_buf_free(&d);
	return q;
}

/* An IR expression as a C value of its type (value_type), without
 * parentheses of its own; returns its level. */
static int put_bare(const site *s, tc_buf *b, const tc_ir_expr *e)
{
	tc_cg_cexpr *pr = s->pr;
	static const char *const cmp[] = {[TC_OP_LT] = "<", [TC_OP_GT] = ">",
		[TC_OP_LE] = "<=", [TC_OP_GE] = ">=", [TC_OP_EQ] = "==", [TC_OP_NE] = "!="};

	if (pr->failed)
		return P_PRIMARY;
	switch (e->op) {
	case TC_OP_CONST:
		return put_const(pr, b, e);
	case TC_OP_INDEX: /* the value of domain dimension id, an int64_t */
		if (e->id < 0 || e->id >= s->inst->n) {
			tc_cg_cexpr_fail(pr,
				"internal error: an index the instance has no value for");
			return P_PRIMARY;
		}
		return put_isl_bare(pr, b, s->inst->index[e->id]);
	case TC_OP_SIZE:
		pr->size_used[e->id] = 1;
		tc_buf_puts(b, pr->size[e->id]);
		return P_PRIMARY;
	case TC_OP_READ:
		return put_read(s, b, e->id, e->args);
	case TC_OP_CAST:
		return put_cast(s, b, e);
	case TC_OP_NEG:
		if (e->type == TC_T_BOOL) /* -0 is 0, -1 is nonzero */
			return put_bare(s, b, e->args[0]);
		if (!tc_dtype_is_float(e->type)) { /* wraps */
			const char *u = wrap_type(s->pr, e->type);
			int same = !strcmp(u, store_type(s->pr, e->type));
			if (!same)
				tc_buf_printf(b, "(%s)(", value_type(s->pr, e->type));
			tc_buf_printf(b, "0 - (%s)", u);
			put_expr(s, b, e->args[0], P_UNARY);
			tc_buf_puts(b, same ? "" : ")");
			return same ? P_ADD : P_UNARY;
		}
		return put_neg(put_bare, s, b, e->args[0]);
	case TC_OP_NOT:
		tc_buf_putc(b, '!');
		put_expr(s, b, e->args[0], P_UNARY);
		return P_UNARY;
	case TC_OP_ADD:
	case TC_OP_SUB:
	case TC_OP_MUL:
	case TC_OP_DIV:
	case TC_OP_MOD:
		return put_arith(s, b, e);
	case TC_OP_LT:
	case TC_OP_GT:
	case TC_OP_LE:
	case TC_OP_GE:
	case TC_OP_EQ:
	case TC_OP_NE: /* a comparison in a comparison gets parentheses */
		put_expr(s, b, e->args[0], P_ADD);
		tc_buf_printf(b, " %s ", cmp[e->op]);
		put_expr(s, b, e->args[1], P_ADD);
		return e->op == TC_OP_EQ || e->op == TC_OP_NE ? P_EQ : P_REL;
	case TC_OP_AND: /* && inside || gets parentheses (as -Wparentheses asks) */
		put_expr(s, b, e->args[0], P_AND);
		tc_buf_puts(b, " && ");
		put_expr(s, b, e->args[1], P_EQ);
		return P_AND;
	case TC_OP_OR:
		put_expr(s, b, e->args[0], P_EQ);
		tc_buf_puts(b, " || ");
		put_expr(s, b, e->args[1], P_EQ);
		return P_OR;
	case TC_OP_SELECT: /* the condition in parentheses, for the reader */
		put_expr(s, b, e->args[0], P_PRIMARY);
		tc_buf_puts(b, " ? ");
		put_expr(s, b, e->args[1], P_OR);
		tc_buf_puts(b, " : ");
		put_expr(s, b, e->args[2], P_OR);
		return P_COND;
	case TC_OP_CALL:
		return put_call(s, b, e);
	}
	tc_cg_cexpr_fail(pr, "internal error: an unknown IR operation");
	return P_PRIMARY;
}

/* ---- statements ---- */

/* The identity of red in t (the interpreter's identity()), as stored. */
static void put_identity(const tc_cg_cexpr *pr, tc_buf *b, tc_red red, tc_dtype t)
{
	static const char *const smax[] = {"INT8_MAX", "INT16_MAX", "INT32_MAX", "INT64_MAX"};
	static const char *const smin[] = {"INT8_MIN", "INT16_MIN", "INT32_MIN", "INT64_MIN"};
	static const char *const umax[] = {"UINT8_MAX", "UINT16_MAX", "UINT32_MAX", "UINT64_MAX"};
	int bits = tc_dtype_bits(t);
	int w = bits == 8 ? 0 : bits == 16 ? 1 : bits == 32 ? 2 : 3;
	int is_min = red == TC_RED_MIN;

	if (tc_dtype_is_half(t)) { /* exact in float too */
		tc_buf_printf(b, "%s(%s%s)", hname(pr, hh(t, TC_CG_CEXPR_D2H)),
			red == TC_RED_ADD ? "0.0" : red == TC_RED_MUL ? "1.0"
			: t == TC_T_BF16 ? (is_min ? "0x1.fep127" : "-0x1.fep127")
			: is_min ? "65504.0" : "-65504.0", half_float(pr) ? "f" : "");
	} else if (tc_dtype_is_float(t)) {
		if (red == TC_RED_ADD || red == TC_RED_MUL) {
			tc_buf_printf(b, "%s%s", red == TC_RED_ADD ? "0.0" : "1.0",
				t == TC_T_F32 ? "f" : "");
			return;
		}
		tc_buf_printf(b, "%s%s", is_min ? "" : "-", t == TC_T_F32 ? "FLT_MAX" : "DBL_MAX");
	} else if (red == TC_RED_ADD || (red == TC_RED_MAX && !tc_dtype_is_signed(t))) {
		tc_buf_putc(b, '0');
	} else if (red == TC_RED_MUL || t == TC_T_BOOL) {
		tc_buf_putc(b, '1');
	} else if (tc_dtype_is_unsigned(t)) {
		tc_buf_puts(b, umax[w]);
	} else {
		tc_buf_puts(b, is_min ? smax[w] : smin[w]);
	}
}

/* A scatter's update that other threads may make at once
 * (tc_poly_scatter_atomic): the dialect's atomic addition of the right
 * side, converted to the element's type, at the element's offset (its
 * subscripts evaluated first, then the right side, as everywhere). */
static void put_atomic_update(const site *s, tc_buf *b, const tc_ir_stmt *st)
{
	tc_cg_cexpr *pr = s->pr;
	tc_buf off, val;
	if (!pr->dl->put_atomic_add) {
		tc_cg_cexpr_fail(pr, "internal error: an atomic scatter in a dialect without atomics");
		return;
	}
	tc_buf_init(&off);
	tc_buf_init(&val);
	put_offset(s, &off, st->tensor, st->sub);
	pr->tensor_used[st->tensor] = 1;
	put_expr(s, &val, st->rhs, P_TOP);
	if (off.oom || val.oom || !off.s || !val.s)
		tc_cg_cexpr_fail(pr, "out of memory");
	else
		pr->dl->put_atomic_add(pr, b, st->tensor, off.s, val.s);
	tc_buf_free(&off);
	tc_buf_free(&val);
}

/* tensor[o] = tensor[o] op rhs (the interpreter's reduce()). */
static void put_update(const site *s, tc_buf *b, const tc_ir_stmt *st, tc_dtype t)
{
	tc_cg_cexpr *pr = s->pr;
	const char *op = st->red == TC_RED_ADD ? "+" : "*";
	int mx = st->red == TC_RED_MAX;
	const tc_ir_expr *fx, *fy;
	tc_buf lhs;

	if (tc_poly_scatter_atomic(pr->p, st)) {
		put_atomic_update(s, b, st);
		return;
	}
	tc_buf_init(&lhs);
	put_element(s, &lhs, st->tensor, st->sub); /* a scatter's subscripts, or the instance's */
	if (lhs.oom || !lhs.s) {
		tc_buf_free(&lhs);
		tc_cg_cexpr_fail(pr, "out of memory");
		return;
	}
	if (st->red == TC_RED_MIN || st->red == TC_RED_MAX) {
		if (tc_dtype_is_half(t)) {
			tc_buf_printf(b, "%s = %s(%s%s(%s(%s), ", lhs.s, hname(pr, hh(t, TC_CG_CEXPR_D2H)),
				mx ? "fmax" : "fmin", half_float(pr) ? "f" : "",
				hname(pr, hh(t, TC_CG_CEXPR_H2D)), lhs.s);
		} else if (tc_dtype_is_float(t)) {
			tc_buf_printf(b, "%s = %s%s(%s, ", lhs.s, mx ? "fmax" : "fmin",
				t == TC_T_F32 ? "f" : "", lhs.s);
		} else if (tc_dtype_is_signed(t)) {
			tc_buf_printf(b, "%s = %s(%s, ", lhs.s,
				hname(pr, mx ? TC_CG_CEXPR_MAX : TC_CG_CEXPR_MIN), lhs.s);
		} else {
			tc_buf_printf(b, "%s = %s(%s%s, ", lhs.s,
				hname(pr, mx ? TC_CG_CEXPR_UMAX : TC_CG_CEXPR_UMIN), lhs.s,
				t == TC_T_BOOL ? " != 0" : "");
		}
		put_expr(s, b, st->rhs, P_TOP);
		tc_buf_puts(b, tc_dtype_is_half(t) ? "));" : ");");
	} else if (pr->contract && tc_ir_fma_reduction(st, t, pr->p->f->tensors[st->tensor].widened,
			&fx, &fy)) { /* lhs = fma(x, y, lhs) */
		tc_buf_printf(b, "%s = %s(", lhs.s, t == TC_T_F32 ? "fmaf" : "fma");
		put_expr(s, b, fx, P_TOP);
		tc_buf_puts(b, ", ");
		put_expr(s, b, fy, P_TOP);
		tc_buf_printf(b, ", %s);", lhs.s);
	} else if (t == TC_T_F32 || t == TC_T_F64) { /* lhs = lhs op (rhs) */
		tc_buf_printf(b, "%s %s= ", lhs.s, op);
		put_expr(s, b, st->rhs, P_TOP);
		tc_buf_putc(b, ';');
	} else if (tc_dtype_is_half(t)) { /* one rounding of the exact result */
		tc_buf_printf(b, "%s = %s(%s(%s) %s ", lhs.s, hname(pr, hh(t, TC_CG_CEXPR_D2H)),
			hname(pr, hh(t, TC_CG_CEXPR_H2D)), lhs.s, op);
		put_expr(s, b, st->rhs, P_MUL + 1);
		tc_buf_puts(b, ");");
	} else { /* wraps in the unsigned type; the store converts back */
		const char *u = wrap_type(s->pr, t);
		tc_buf_printf(b, "%s = (%s)%s %s (%s)", lhs.s, u, lhs.s, op, u);
		put_expr(s, b, st->rhs, P_UNARY);
		tc_buf_puts(b, t == TC_T_BOOL ? " != 0;" : ";");
	}
	tc_buf_free(&lhs);
}

/* The C statement of instance inst (see c_expr.h). */
void tc_cg_cexpr_put_stmt(__tc_keep tc_cg_cexpr *pr, __tc_keep tc_buf *b,
	__tc_keep const tc_poly_inst *inst)
{
	site one = {pr, inst, NULL}, *s = &one;
	const tc_poly_stmt *ps = inst->stmt;
	const tc_ir_stmt *st = ps->ir;
	tc_dtype t = pr->p->f->tensors[st->tensor].dtype;

	if (ps->kind == TC_POLY_UPDATE) {
		put_update(s, b, st, t);
		return;
	}
	put_element(s, b, st->tensor, st->sub);
	tc_buf_puts(b, " = ");
	if (ps->kind == TC_POLY_INIT) {
		put_identity(pr, b, st->red, t);
	} else if (tc_dtype_is_half(t)) { /* D2H rounds: the value need not be */
		s->unrounded = st->rhs;
		tc_buf_printf(b, "%s(", hname(pr, hh(t, TC_CG_CEXPR_D2H)));
		put_expr(s, b, st->rhs, P_TOP);
		tc_buf_putc(b, ')');
	} else {
		put_expr(s, b, st->rhs, P_TOP); /* C's conversion on assignment is the store */
	}
	tc_buf_putc(b, ';');
}

void tc_cg_cexpr_put_lhs(__tc_keep tc_cg_cexpr *pr, __tc_keep tc_buf *b,
	__tc_keep const tc_poly_inst *inst)
{
	site one = {pr, inst, NULL};
	put_element(&one, b, inst->stmt->ir->tensor, inst->stmt->ir->sub);
}

void tc_cg_cexpr_put_identity(__tc_keep tc_cg_cexpr *pr, __tc_keep tc_buf *b, tc_red red,
	tc_dtype t)
{
	put_identity(pr, b, red, t);
}

/* ---- helpers ---- */

/* Whether text calls name: name( not preceded by a letter, digit or '_'. */
static int calls(const char *text, const char *name)
{
	size_t len = strlen(name);
	const char *q;
	for (q = strstr(text, name); q; q = strstr(q + 1, name)) {
		int word = q == text || !(q[-1] == '_' || (q[-1] >= '0' && q[-1] <= '9') ||
						 ((q[-1] | 0x20) >= 'a' && (q[-1] | 0x20) <= 'z'));
		if (word && q[len] == '(')
			return 1;
	}
	return 0;
}

/* Which helpers text needs, directly or through other helpers. */
void tc_cg_cexpr_helpers_called(__tc_keep const tc_cg_cexpr_dialect *dl,
	__tc_keep const char *text, __tc_keep int used[TC_CG_CEXPR_NHELPERS])
{
	const tc_cg_cexpr_helper_def *h = dl->helper;
	int i, j, more = 1;
	for (i = 0; i < TC_CG_CEXPR_NHELPERS; i++)
		used[i] = calls(text, h[i].name);
	while (more) {
		more = 0;
		for (i = 0; i < TC_CG_CEXPR_NHELPERS; i++)
			for (j = 0; used[i] && j < TC_CG_CEXPR_NHELPERS; j++)
				if (!used[j] && calls(h[i].text, h[j].name))
					used[j] = more = 1;
	}
}

/* ---- what frames share: the loops' text, names ---- */

/* Sizes in the loop structure (isl_ast_node_foreach_descendant_top_down). */
static isl_bool note_node(isl_ast_node *node, void *user)
{
	tc_cg_cexpr *pr = user;
	isl_ast_expr *e[3] = {NULL, NULL, NULL};
	int i;
	switch (isl_ast_node_get_type(node)) {
	case isl_ast_node_for:
		e[0] = isl_ast_node_for_get_init(node);
		e[1] = isl_ast_node_for_get_cond(node);
		e[2] = isl_ast_node_for_get_inc(node);
		break;
	case isl_ast_node_if:
		e[0] = isl_ast_node_if_get_cond(node);
		break;
	default:
		break;
	}
	for (i = 0; i < 3; i++)
		if (e[i]) {
			tc_cg_cexpr_note_ids(pr, e[i]);
			isl_ast_expr_free(e[i]);
		}
	return isl_bool_true;
}

void tc_cg_cexpr_note_loops(__tc_keep tc_cg_cexpr *pr, __tc_keep isl_ast_node *node)
{
	if (isl_ast_node_foreach_descendant_top_down(node, note_node, pr) < 0)
		tc_cg_cexpr_fail(pr, "isl could not walk the AST");
}

__tc_give char *tc_cg_cexpr_ast_text(__tc_keep tc_cg_cexpr *pr, __tc_keep isl_ast_node *node,
	int indent, tc_cg_cexpr_print_fn print_user, tc_cg_cexpr_print_fn print_for, void *user)
{
	isl_ctx *ctx = pr->p->ctx;
	const char *cur = isl_options_get_ast_iterator_type(ctx);
	char *old_type = cur ? tc_strdup(cur) : NULL, *s, *r;
	isl_printer *prn;
	isl_ast_print_options *opts;
	if (cur && !old_type) {
		tc_cg_cexpr_fail(pr, "out of memory");
		return NULL;
	}
	/* loop iterators as int64_t: the option is read when printing */
	isl_options_set_ast_iterator_type(ctx, pr->dl->type[TC_T_I64]);
	prn = tc_cg_cexpr_isl_printer(pr->dl, isl_printer_to_str(ctx));
	prn = isl_printer_set_indent(prn, indent);
	opts = isl_ast_print_options_alloc(ctx);
	opts = isl_ast_print_options_set_print_user(opts, print_user, user);
	if (print_for)
		opts = isl_ast_print_options_set_print_for(opts, print_for, user);
	prn = isl_ast_node_print(node, prn, opts);
	s = isl_printer_get_str(prn);
	isl_printer_free(prn);
	isl_options_set_ast_iterator_type(ctx, old_type ? old_type : "int");
	tc_free(old_type);
	if (!s) {
		tc_cg_cexpr_fail(pr, "isl could not print the AST");
		return NULL;
	}
	r = tc_strdup(s);
	free(s);
	if (!r)
		tc_cg_cexpr_fail(pr, "out of memory");
	return r;
}

/* Whether s is taken (see tc_cg_cexpr_fresh_name). */
static int name_taken(const char *s, char *const *names, int n, int (*reserved)(const char *))
{
	int i;
	if (reserved(s))
		return 1;
	if (s[0] == 'c' && s[1] >= '0' && s[1] <= '9') { /* c0, c1, c0_0, ... */
		const char *q = s + 1;
		while ((*q >= '0' && *q <= '9') || (*q == '_' && q[1] >= '0' && q[1] <= '9'))
			q++;
		if (!*q)
			return 1;
	}
	for (i = 0; i < n; i++)
		if (names[i] && !strcmp(s, names[i]))
			return 1;
	return 0;
}

__tc_give char *tc_cg_cexpr_fresh_name(__tc_keep const char *name, __tc_keep char *const *taken,
	int n, int (*reserved)(const char *))
{
	tc_buf b;
	tc_buf_init(&b);
	tc_buf_puts(&b, name);
	while (!b.oom && b.s && name_taken(b.s, taken, n, reserved))
		tc_buf_putc(&b, '_');
	return tc_buf_take(&b);
}

__tc_give char *tc_cg_cexpr_size_name(__tc_keep const tc_poly *p, int i, const char **why)
{
	char *s = tc_poly_param_name(p, i);
	if (!s)
		*why = "out of memory";
	return s;
}
