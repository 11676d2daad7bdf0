/* The isl AST of a tc_poly printed as C (see c.h).
 *
 * isl prints the loop structure (for, if, blocks, marks as comments) with
 * isl_ast_node_print; a print_user callback prints each statement instance
 * from its tc_poly_inst annotation.  Everything else is text of our own:
 * a header comment, the includes, the static inline helpers the function
 * needs (only those), and the function with one typed pointer per tensor
 * and one int64_t per size.
 *
 * Values are computed with the reference interpreter's semantics
 * (ir/interp.c), spelled out so that the text is also a readable statement
 * of them:
 *   - integer + - * and negation are done in an unsigned type (uint32_t
 *     for types of 32 bits or fewer, uint64_t otherwise), where C defines
 *     wrap-around, and converted back to the static type;
 *   - integer / and % are floor division and modulo (helpers), float % is
 *     a - b floor(a / b) computed in double, as the interpreter does;
 *   - float16 values are held in doubles, rounded to float16 (tc_h) after
 *     every operation and stored as their 16 bits (tc_d2h);
 *   - float to integer conversions truncate and saturate, NaN giving 0;
 *   - min and max are fmin/fmax on floats (a NaN operand is ignored);
 *   - reductions: an init statement stores the operator's identity, an
 *     update stores acc op rhs.
 * Conversions to narrower signed types rely on two's complement
 * (implementation-defined in C; modulo in GCC and Clang).
 *
 * Subscripts that are affine in the indices and sizes (those the polyhedral
 * model reads as exact affine functions, see polyhedral/poly.c) are printed
 * as plain int64_t arithmetic ("c2 + c5") instead of the interpreter's
 * int32 wrap-around: the two differ only for index values beyond 2^31,
 * which the model already excludes, and the text stays readable.
 *
 * Builtins: float64 and float16 ones call the double libm function (the
 * float16 result rounded), exactly as the interpreter does; float32 ones
 * call the float version where C99 has one (expf, ...: within an ulp or so
 * of the interpreter's double-then-round), the double one rounded
 * otherwise.  CUDA-only builtins with a short definition (exp10, rsqrt,
 * rcbrt, rhypot) are written inline; the others (sinpi, cospi, erfinv,
 * erfcinv, normcdf, normcdfinv, norm3d) are declared extern tc_cuda_NAME
 * taking and returning double: the text does not define them.
 *
 * Names: sizes keep their isl names (isl prints them in loop bounds, so
 * they cannot be renamed: a size named like a C keyword gets a warning
 * that the text will not compile); tensor pointers and the function get a
 * trailing '_' when their name would clash with a C keyword, a C library
 * name the text uses, an isl iterator (c0, c1, ...), a helper (tc_...) or
 * another name of the function. */
#include "c.h"
#include "../ir/half.h"

#include <isl/id.h>
#include <isl/options.h>
#include <isl/printer.h>
#include <isl/val.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The state of one tc_cg_c_text call. */
typedef struct cg {
	const tc_poly *p;
	const tc_ir_func *f;
	isl_ctx *ctx;
	tc_diags *d;
	char **size;   /* the sizes' names in the text (= their isl names), owned */
	char **tensor; /* the tensor pointers' names, owned */
	char *fname;   /* the function's name, owned */
	char *targ;    /* the name of the tensors parameter, owned */
	unsigned char *size_used, *tensor_used;
	unsigned char cuda[TC_BI_COUNT]; /* extern CUDA-only builtins used */
	int xopen; /* the text calls X/Open functions (j0, jn, y0, ...) */
	int failed;
	const char *why; /* the first failure, for the message */
} cg;

static void fail(cg *g, const char *why)
{
	if (!g->failed)
		g->why = why;
	g->failed = 1;
}

/* ---- names ---- */

static int is_c_keyword(const char *s)
{
	static const char *const kw[] = {"auto", "break", "case", "char", "const", "continue",
		"default", "do", "double", "else", "enum", "extern", "float", "for", "goto", "if",
		"inline", "int", "long", "register", "restrict", "return", "short", "signed",
		"sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void",
		"volatile", "while", "_Bool", "_Complex", "_Imaginary", "_Alignas", "_Alignof",
		"_Atomic", "_Generic", "_Noreturn", "_Static_assert", "_Thread_local"};
	size_t i;
	for (i = 0; i < sizeof(kw) / sizeof(kw[0]); i++)
		if (!strcmp(s, kw[i]))
			return 1;
	return 0;
}

/* Names the text may use from the C library and headers. */
static int is_c_library_name(const char *s)
{
	static const char *const lib[] = {"floor", "trunc", "ldexp", "isnan", "memcpy", "pow",
		"sqrt", "cbrt", "hypot", "fmin", "fmax", "fma", "NAN", "INFINITY", "FLT_MAX",
		"DBL_MAX", "INT8_MAX", "INT16_MAX", "INT32_MAX", "INT64_MAX", "INT8_MIN",
		"INT16_MIN", "INT32_MIN", "INT64_MIN", "UINT8_MAX", "UINT16_MAX", "UINT32_MAX",
		"UINT64_MAX", "INT64_C", "UINT64_C", "int8_t", "int16_t", "int32_t", "int64_t",
		"uint8_t", "uint16_t", "uint32_t", "uint64_t", "NULL", "main"};
	size_t i, n = strlen(s);
	int b;
	for (i = 0; i < sizeof(lib) / sizeof(lib[0]); i++)
		if (!strcmp(s, lib[i]))
			return 1;
	for (b = 0; b < tc_nbuiltins; b++) {
		const char *name = tc_builtins[b].name;
		size_t len = strlen(name);
		if (!strncmp(s, name, len) && (n == len || (n == len + 1 && s[len] == 'f')))
			return 1;
	}
	return 0;
}

/* The names of the helpers the text may define or declare. */
static int is_helper_name(const char *s)
{
	static const char *const helpers[] = {"tc_floord", "tc_floormod", "tc_min", "tc_max",
		"tc_umin", "tc_umax", "tc_divs", "tc_mods", "tc_divu", "tc_modu", "tc_fmodfloor",
		"tc_f2s", "tc_f2u", "tc_d2h", "tc_h2d", "tc_h", "tc_h_nextafter"};
	size_t i;
	for (i = 0; i < sizeof(helpers) / sizeof(helpers[0]); i++)
		if (!strcmp(s, helpers[i]))
			return 1;
	if (!strncmp(s, "tc_cuda_", 8))
		return tc_builtin_lookup(s + 8, (int)strlen(s + 8)) >= 0;
	return 0;
}

/* Whether s is reserved: by C, by the C library, or by the text. */
static int is_reserved(const char *s)
{
	return is_c_keyword(s) || is_c_library_name(s) || is_helper_name(s);
}

/* Whether s is taken: reserved, an isl iterator name (c0, c1, ...), or one
 * of the names given (n entries). */
static int name_taken(const char *s, char *const *names, int n)
{
	int i;
	if (is_reserved(s))
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

/* name, with '_' appended until it is not taken. */
static char *fresh_name(const char *name, char *const *taken, int n)
{
	tc_buf b;
	tc_buf_init(&b);
	tc_buf_puts(&b, name);
	while (!b.oom && b.s && name_taken(b.s, taken, n))
		tc_buf_putc(&b, '_');
	return tc_buf_take(&b);
}

/* The isl name of size i (its name, with a '_' where isl reserves the
 * name): the name of parameter i of the context, which poly.c declares in
 * the order of the sizes. */
static char *size_name(cg *g, int i)
{
	const char *name = isl_set_get_dim_name(g->p->context, isl_dim_param, (unsigned)i);
	char *s;
	if (!name || tc_poly_param_index(g->p, name) != i) {
		fail(g, "internal error: the model's sizes are not the function's");
		return NULL;
	}
	if (!(s = tc_strdup(name)))
		fail(g, "out of memory");
	return s;
}

static tc_stat make_names(cg *g)
{
	const tc_ir_func *f = g->f;
	int i, n = f->nparams + f->ntensors + 1;
	char **all = tc_calloc((size_t)n + 1, sizeof(char *)); /* sizes, targ, tensors */

	g->size = tc_calloc((size_t)f->nparams + 1, sizeof(char *));
	g->tensor = tc_calloc((size_t)f->ntensors + 1, sizeof(char *));
	g->size_used = tc_calloc((size_t)f->nparams + 1, 1);
	g->tensor_used = tc_calloc((size_t)f->ntensors + 1, 1);
	if (!all || !g->size || !g->tensor || !g->size_used || !g->tensor_used)
		goto oom;
	for (i = 0; i < f->nparams; i++)
		if (!(all[i] = g->size[i] = size_name(g, i))) {
			tc_free(all);
			return TC_ERR;
		}
	for (i = 0; i < f->nparams; i++)
		if (is_reserved(g->size[i])) { /* isl prints the name as it is */
			tc_loc none;
			memset(&none, 0, sizeof(none));
			tc_warning(g->d, none, "the size '%s' of '%s' is a name C reserves (or "
					       "the C text uses), which isl prints as it is: the C "
					       "text will not compile",
				g->size[i], f->name);
		}
	/* the parameter must not hide a size; tensors must hide neither */
	if (!(all[f->nparams] = g->targ = fresh_name("tensors", all, f->nparams)))
		goto oom;
	for (i = 0; i < f->ntensors; i++)
		if (!(all[f->nparams + 1 + i] = g->tensor[i] =
			      fresh_name(f->tensors[i].name, all, f->nparams + 1 + i)))
			goto oom;
	if (!(g->fname = fresh_name(f->name, NULL, 0)))
		goto oom;
	tc_free(all);
	return TC_OK;
oom:
	tc_free(all);
	fail(g, "out of memory");
	return TC_ERR;
}

/* ---- types ---- */

/* The C type that stores an element of t. */
static const char *store_type(tc_dtype t)
{
	switch (t) {
	case TC_T_BOOL: return "uint8_t";
	case TC_T_I8: return "int8_t";
	case TC_T_I16: return "int16_t";
	case TC_T_I32: return "int32_t";
	case TC_T_I64: return "int64_t";
	case TC_T_U8: return "uint8_t";
	case TC_T_U16: return "uint16_t";
	case TC_T_U32: return "uint32_t";
	case TC_T_U64: return "uint64_t";
	case TC_T_F16: return "uint16_t";
	case TC_T_F32: return "float";
	case TC_T_F64: return "double";
	default: return "void";
	}
}

/* The C type a value of t is computed in (bool: int 0 or 1; float16: a
 * double holding a float16 value). */
static const char *value_type(tc_dtype t)
{
	if (t == TC_T_BOOL)
		return "int";
	if (t == TC_T_F16)
		return "double";
	return store_type(t);
}

/* The unsigned type integer arithmetic of t wraps in. */
static const char *wrap_type(tc_dtype t)
{
	return tc_dtype_bits(t) <= 32 ? "uint32_t" : "uint64_t";
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

/* "-x" for x (printed at level q): "-(-y)", never "--y". */
static void put_neg(tc_buf *b, const tc_buf *x, int q)
{
	tc_buf_putc(b, '-');
	put_at(b, x, q, x->s && x->s[0] == '-' ? P_PRIMARY : P_UNARY);
}

/* ---- isl expressions ---- */

/* Mark the sizes e mentions as used. */
static void note_ids(cg *g, isl_ast_expr *e)
{
	if (isl_ast_expr_get_type(e) == isl_ast_expr_id) {
		isl_id *id = isl_ast_expr_id_get_id(e);
		int i = tc_poly_param_index(g->p, isl_id_get_name(id));
		if (i >= 0)
			g->size_used[i] = 1;
		isl_id_free(id);
	} else if (isl_ast_expr_get_type(e) == isl_ast_expr_op) {
		isl_size i, n = isl_ast_expr_op_get_n_arg(e);
		for (i = 0; i < n; i++) {
			isl_ast_expr *a = isl_ast_expr_op_get_arg(e, i);
			if (a)
				note_ids(g, a);
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

/* Set isl's names for the operations it prints as calls to our helpers. */
static isl_printer *set_op_names(isl_printer *prn)
{
	prn = isl_printer_set_output_format(prn, ISL_FORMAT_C);
	prn = isl_ast_expr_op_type_set_print_name(prn, isl_ast_expr_op_fdiv_q, "tc_floord");
	prn = isl_ast_expr_op_type_set_print_name(prn, isl_ast_expr_op_min, "tc_min");
	prn = isl_ast_expr_op_type_set_print_name(prn, isl_ast_expr_op_max, "tc_max");
	return prn;
}

/* An isl expression (an int64_t value) printed by isl; returns its level. */
static int put_isl_bare(cg *g, tc_buf *b, isl_ast_expr *e)
{
	isl_printer *prn;
	char *s;

	note_ids(g, e);
	prn = set_op_names(isl_printer_to_str(g->ctx));
	prn = isl_printer_print_ast_expr(prn, e);
	s = isl_printer_get_str(prn);
	isl_printer_free(prn);
	if (!s) {
		fail(g, "isl could not print an expression");
		return P_PRIMARY;
	}
	tc_buf_puts(b, s);
	free(s);
	return isl_prec(e);
}

/* ---- size expressions ---- */

static void put_sx(cg *g, tc_buf *b, const tc_sexpr *e, int paren);

/* a + b with b's sign folded into the operator ("N - 1", "H - KH"). */
static void put_sx_sum(cg *g, tc_buf *b, const tc_sexpr *x, const tc_sexpr *y, int paren)
{
	int64_t c;
	if (x->kind == TC_SX_CONST && y->kind != TC_SX_CONST) { /* constants last */
		const tc_sexpr *t = x;
		x = y;
		y = t;
	}
	if (paren)
		tc_buf_putc(b, '(');
	put_sx(g, b, x, 0);
	if (tc_sx_is_const(y, &c) && c < 0 && c != INT64_MIN) {
		tc_buf_printf(b, " - %lld", (long long)-c);
	} else if (y->kind == TC_SX_MUL && y->c < 0 && y->c != INT64_MIN) {
		tc_buf_puts(b, " - ");
		if (y->c != -1)
			tc_buf_printf(b, "%lld * ", (long long)-y->c);
		put_sx(g, b, y->a, 1);
	} else {
		tc_buf_puts(b, " + ");
		put_sx(g, b, y, y->kind == TC_SX_ADD);
	}
	if (paren)
		tc_buf_putc(b, ')');
}

/* A size expression as int64_t C (in parentheses if paren and compound). */
static void put_sx(cg *g, tc_buf *b, const tc_sexpr *e, int paren)
{
	switch (e->kind) {
	case TC_SX_CONST:
		tc_buf_printf(b, e->c < 0 && paren ? "(%lld)" : "%lld", (long long)e->c);
		break;
	case TC_SX_PARAM:
		g->size_used[e->id] = 1;
		tc_buf_puts(b, g->size[e->id]);
		break;
	case TC_SX_VAR: /* extents never depend on index variables */
		fail(g, "a tensor extent depends on an index variable");
		break;
	case TC_SX_ADD:
		put_sx_sum(g, b, e->a, e->b, paren);
		break;
	case TC_SX_MUL:
		if (paren)
			tc_buf_putc(b, '(');
		tc_buf_printf(b, "%lld * ", (long long)e->c);
		put_sx(g, b, e->a, 1);
		if (paren)
			tc_buf_putc(b, ')');
		break;
	case TC_SX_FLOORDIV:
	case TC_SX_MOD:
		tc_buf_puts(b, e->kind == TC_SX_FLOORDIV ? "tc_floord(" : "tc_floormod(");
		put_sx(g, b, e->a, 0);
		tc_buf_printf(b, ", %lld)", (long long)e->c);
		break;
	case TC_SX_MIN:
	case TC_SX_MAX:
		tc_buf_puts(b, e->kind == TC_SX_MIN ? "tc_min(" : "tc_max(");
		put_sx(g, b, e->a, 0);
		tc_buf_puts(b, ", ");
		put_sx(g, b, e->b, 0);
		tc_buf_putc(b, ')');
		break;
	}
}

/* ---- values ---- */

/* The statement instance being printed. */
typedef struct site {
	cg *g;
	const tc_poly_inst *inst;
	const tc_ir_expr *unrounded; /* a float16 value the store rounds anyway */
} site;

static int put_bare(const site *s, tc_buf *b, const tc_ir_expr *e);

/* e as C text for a context of level prec. */
static void put_expr(const site *s, tc_buf *b, const tc_ir_expr *e, int prec)
{
	tc_buf t;
	int q;
	tc_buf_init(&t);
	q = put_bare(s, &t, e);
	put_at(b, &t, q, prec);
	tc_buf_free(&t);
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

static int put_const(tc_buf *b, const tc_ir_expr *e)
{
	switch (e->type) {
	case TC_T_F16: /* a double holding the float16 value */
		return put_float_literal(b, tc_half_to_double(tc_half_from_double(e->c.f)), 0);
	case TC_T_F32:
		return put_float_literal(b, (double)(float)e->c.f, 1);
	case TC_T_F64:
		return put_float_literal(b, e->c.f, 0);
	default:
		return put_int_const(b, e->type, e->c.i);
	}
}

static int put_affine(const site *s, tc_buf *b, const tc_ir_expr *e);

static void put_affine_at(const site *s, tc_buf *b, const tc_ir_expr *e, int prec)
{
	tc_buf t;
	int q;
	tc_buf_init(&t);
	q = put_affine(s, &t, e);
	put_at(b, &t, q, prec);
	tc_buf_free(&t);
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
		tc_buf_init(&t);
		q = put_affine(s, &t, e->args[0]);
		put_neg(b, &t, q);
		tc_buf_free(&t);
		return P_UNARY;
	case TC_OP_ADD: /* int64 sums reassociate: a + (b + c) is a + b + c */
		put_affine_at(s, b, e->args[0], P_ADD);
		tc_buf_init(&t);
		q = put_affine(s, &t, e->args[1]);
		put_plus(b, &t, q);
		tc_buf_free(&t);
		return P_ADD;
	case TC_OP_SUB:
		put_affine_at(s, b, e->args[0], P_ADD);
		tc_buf_puts(b, " - ");
		put_affine_at(s, b, e->args[1], P_MUL);
		return P_ADD;
	case TC_OP_MUL:
		x = e->args[0];
		y = e->args[1];
		if (y->op == TC_OP_CONST) {
			x = e->args[1];
			y = e->args[0];
		}
		tc_buf_printf(b, "%lld * ", (long long)x->c.i);
		put_affine_at(s, b, y, P_UNARY);
		return P_MUL;
	case TC_OP_DIV:
	case TC_OP_MOD:
		tc_buf_puts(b, e->op == TC_OP_DIV ? "tc_floord(" : "tc_floormod(");
		put_affine(s, b, e->args[0]);
		tc_buf_printf(b, ", %lld)", (long long)e->args[1]->c.i);
		return P_PRIMARY;
	case TC_OP_CALL:
		tc_buf_puts(b, e->id == TC_BI_MIN ? "tc_min(" : "tc_max(");
		put_affine(s, b, e->args[0]);
		tc_buf_puts(b, ", ");
		put_affine(s, b, e->args[1]);
		tc_buf_putc(b, ')');
		return P_PRIMARY;
	default:
		fail(s->g, "internal error: a subscript taken for affine is not");
		return P_PRIMARY;
	}
}

/* One subscript as an int64_t value; returns its level. */
static int put_subscript(const site *s, tc_buf *b, const tc_ir_expr *e)
{
	if (tc_ir_affine(e))
		return put_affine(s, b, e);
	tc_buf_puts(b, "(int64_t)");
	put_expr(s, b, e, P_UNARY);
	return P_UNARY;
}

/* tensor[flat offset]: row-major, by Horner's scheme over the extents,
 * ((s0 * E1 + s1) * E2 + s2), with leading and trailing zero subscripts
 * left out; the subscripts are IR expressions (sub) or, for the element a
 * statement writes, the instance's index expressions (sub NULL). */
static void put_element(const site *s, tc_buf *b, int tensor, tc_ir_expr *const *sub)
{
	cg *g = s->g;
	const tc_ir_tensor *t = &g->f->tensors[tensor];
	tc_buf x[TC_MAX_RANK];
	int q[TC_MAX_RANK];
	int k, first = 0, n = t->ndim;

	if (n > TC_MAX_RANK || (!sub && n > s->inst->n)) {
		fail(g, "internal error: a tensor of more dimensions than its subscripts");
		return;
	}
	g->tensor_used[tensor] = 1;
	for (k = 0; k < n; k++) {
		tc_buf_init(&x[k]);
		q[k] = sub ? put_subscript(s, &x[k], sub[k])
			   : put_isl_bare(g, &x[k], s->inst->index[k]);
		if (!x[k].s)
			tc_buf_puts(&x[k], "");
	}
	while (first < n - 1 && x[first].s && !strcmp(x[first].s, "0"))
		first++;
	tc_buf_printf(b, "%s[", g->tensor[tensor]);
	if (n == 0)
		tc_buf_putc(b, '0');
	for (k = first + 1; k < n - 1; k++)
		tc_buf_putc(b, '(');
	for (k = first; k < n; k++) {
		if (k == first && k < n - 1 && x[k].s && !strcmp(x[k].s, "1")) {
			put_sx(g, b, t->ext[k + 1], 0); /* 1 * E1 is E1 */
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
			put_sx(g, b, t->ext[k + 1], 1);
		}
	}
	tc_buf_putc(b, ']');
	for (k = 0; k < n; k++)
		tc_buf_free(&x[k]);
}

/* Read an element as a value of its type. */
static int put_read(const site *s, tc_buf *b, int tensor, tc_ir_expr *const *sub)
{
	tc_dtype t = s->g->f->tensors[tensor].dtype;
	if (t == TC_T_F16) {
		tc_buf_puts(b, "tc_h2d(");
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
	if (to == TC_T_F16) { /* to double (exact, or one rounding), then to float16 */
		int r = rounds(s, e);
		tc_buf_puts(b, r ? "tc_h(" : "");
		if (from == TC_T_F64 || from == TC_T_F16) {
			put_expr(s, b, a, r ? P_TOP : P_PRIMARY);
		} else {
			tc_buf_puts(b, "(double)");
			put_expr(s, b, a, P_UNARY);
		}
		tc_buf_puts(b, r ? ")" : "");
		return r || from == TC_T_F64 || from == TC_T_F16 ? P_PRIMARY : P_UNARY;
	}
	if (tc_dtype_is_float(to)) {
		if (from == TC_T_F16 && to == TC_T_F64)
			return put_bare(s, b, a); /* already a double */
		/* one rounding from an integer; exact, or one rounding, from a float */
		tc_buf_printf(b, "(%s)", value_type(to));
		put_expr(s, b, a, P_UNARY);
		return P_UNARY;
	}
	if (tc_dtype_is_float(from)) { /* saturating */
		int u = tc_dtype_is_unsigned(to), wide = to == TC_T_I64 || to == TC_T_U64;
		if (!wide)
			tc_buf_printf(b, "(%s)", value_type(to));
		tc_buf_printf(b, "%s(", u ? "tc_f2u" : "tc_f2s");
		put_expr(s, b, a, P_TOP);
		tc_buf_printf(b, ", %d)", tc_dtype_bits(to));
		return wide ? P_PRIMARY : P_UNARY;
	}
	tc_buf_printf(b, "(%s)", value_type(to)); /* integer to integer: wraps */
	put_expr(s, b, a, P_UNARY);
	return P_UNARY;
}

/* Integer x op y wrapping in t: (T)((U)x op (U)y). */
static int put_wrap_binary(const site *s, tc_buf *b, tc_dtype t, const char *op, int q,
	const tc_ir_expr *x, const tc_ir_expr *y)
{
	const char *u = wrap_type(t);
	int same = !strcmp(u, store_type(t));
	if (t == TC_T_BOOL)
		tc_buf_putc(b, '(');
	else if (!same)
		tc_buf_printf(b, "(%s)(", value_type(t));
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

/* fn(x, y) on int64 or uint64, the result converted to t. */
static int put_helper2(const site *s, tc_buf *b, tc_dtype t, const char *fn,
	const tc_ir_expr *x, const tc_ir_expr *y)
{
	int cast = t != TC_T_I64 && t != TC_T_U64;
	if (cast)
		tc_buf_printf(b, "(%s)", value_type(t));
	tc_buf_printf(b, "%s(", fn);
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

	if (tc_dtype_is_float(t)) {
		int r = t == TC_T_F16 && rounds(s, e);
		tc_buf_puts(b, r ? "tc_h(" : "");
		if (e->op == TC_OP_MOD) { /* a - b floor(a / b) in double */
			tc_buf_puts(b, t == TC_T_F32 ? "(float)tc_fmodfloor(" : "tc_fmodfloor(");
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
		int sgn = tc_dtype_is_signed(t), div = e->op == TC_OP_DIV;
		if (t == TC_T_BOOL) {
			put_helper2(s, b, TC_T_U64, div ? "tc_divu" : "tc_modu", x, y);
			tc_buf_puts(b, " != 0");
			return P_EQ;
		}
		return put_helper2(s, b, t,
			div ? (sgn ? "tc_divs" : "tc_divu") : (sgn ? "tc_mods" : "tc_modu"), x, y);
	}
	return put_wrap_binary(s, b, t, sym[e->op], q, x, y);
}

/* How a builtin is written in C. */
typedef enum bi_form {
	BI_C99,    /* libm, with a float version NAMEf */
	BI_DOUBLE, /* libm (or X/Open), double only */
	BI_INLINE, /* an expression in double (CUDA-only, short) */
	BI_EXTERN, /* tc_cuda_NAME, declared extern (CUDA-only) */
} bi_form;

static bi_form builtin_form(int id)
{
	switch (id) {
	case TC_BI_J0: case TC_BI_J1: case TC_BI_JN:
	case TC_BI_Y0: case TC_BI_Y1: case TC_BI_YN:
	case TC_BI_ILOGB:
		return BI_DOUBLE;
	case TC_BI_EXP10: case TC_BI_RSQRT: case TC_BI_RCBRT: case TC_BI_RHYPOT:
	case TC_BI_RNORM3D:
		return BI_INLINE;
	case TC_BI_SINPI: case TC_BI_COSPI: case TC_BI_ERFINV: case TC_BI_ERFCINV:
	case TC_BI_NORMCDF: case TC_BI_NORMCDFINV: case TC_BI_NORM3D:
		return BI_EXTERN;
	default:
		return BI_C99;
	}
}

/* The arguments of a call, separated by commas; an int32 argument (n of
 * jn/yn, the exponent of ldexp) as an int. */
static void put_args(const site *s, tc_buf *b, const tc_ir_expr *e)
{
	int i;
	for (i = 0; i < e->nargs; i++) {
		if (i)
			tc_buf_puts(b, ", ");
		if (!tc_dtype_is_float(e->args[i]->type) && e->args[i]->op != TC_OP_CONST) {
			tc_buf_puts(b, "(int)");
			put_expr(s, b, e->args[i], P_UNARY);
		} else {
			put_expr(s, b, e->args[i], P_TOP);
		}
	}
}

/* The call in double precision: libm's double function, the definition of
 * a short CUDA-only function, or the extern helper; returns its level. */
static int put_double_call(const site *s, tc_buf *b, const tc_ir_expr *e)
{
	cg *g = s->g;
	const char *name = tc_builtins[e->id].name;
	switch (builtin_form(e->id)) {
	case BI_INLINE:
		if (e->id == TC_BI_EXP10) {
			tc_buf_puts(b, "pow(10.0, ");
			put_args(s, b, e);
			tc_buf_putc(b, ')');
			return P_PRIMARY;
		}
		if (e->id == TC_BI_RNORM3D) {
			g->cuda[TC_BI_NORM3D] = 1;
			tc_buf_puts(b, "1.0 / tc_cuda_norm3d(");
		} else {
			tc_buf_printf(b, "1.0 / %s(", e->id == TC_BI_RSQRT ? "sqrt"
					: e->id == TC_BI_RCBRT ? "cbrt" : "hypot");
		}
		put_args(s, b, e);
		tc_buf_putc(b, ')');
		return P_MUL;
	case BI_EXTERN:
		g->cuda[e->id] = 1;
		tc_buf_printf(b, "tc_cuda_%s(", name);
		break;
	case BI_DOUBLE:
		if (e->id != TC_BI_ILOGB)
			g->xopen = 1;
		tc_buf_printf(b, "%s(", name);
		break;
	case BI_C99:
		tc_buf_printf(b, "%s(", name);
		break;
	}
	put_args(s, b, e);
	tc_buf_putc(b, ')');
	return P_PRIMARY;
}

static int put_call(const site *s, tc_buf *b, const tc_ir_expr *e)
{
	tc_dtype t = e->type;
	tc_buf d;
	int q;

	if (e->id == TC_BI_MIN || e->id == TC_BI_MAX) {
		int mx = e->id == TC_BI_MAX;
		if (tc_dtype_is_float(t)) { /* fmin/fmax: a NaN operand is ignored */
			tc_buf_printf(b, "%s%s(", mx ? "fmax" : "fmin", t == TC_T_F32 ? "f" : "");
			put_args(s, b, e);
			tc_buf_putc(b, ')');
			return P_PRIMARY;
		}
		if (tc_dtype_is_signed(t)) {
			return put_helper2(s, b, t, mx ? "tc_max" : "tc_min", e->args[0], e->args[1]);
		}
		return put_helper2(s, b, t, mx ? "tc_umax" : "tc_umin", e->args[0], e->args[1]);
	}
	if (e->id == TC_BI_ILOGB) { /* an int32 result */
		tc_buf_puts(b, "(int32_t)ilogb(");
		put_args(s, b, e);
		tc_buf_putc(b, ')');
		return P_UNARY;
	}
	if (t == TC_T_F16 && e->id == TC_BI_NEXTAFTER) { /* steps in float16 */
		tc_buf_puts(b, "tc_h_nextafter(");
		put_args(s, b, e);
		tc_buf_putc(b, ')');
		return P_PRIMARY;
	}
	if (t == TC_T_F32 && builtin_form(e->id) == BI_C99) {
		tc_buf_printf(b, "%sf(", tc_builtins[e->id].name);
		put_args(s, b, e);
		tc_buf_putc(b, ')');
		return P_PRIMARY;
	}
	/* in double; float16 and float32 results rounded once */
	tc_buf_init(&d);
	q = put_double_call(s, &d, e);
	if (t == TC_T_F16 && rounds(s, e)) {
		tc_buf_puts(b, "tc_h(");
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
	cg *g = s->g;
	static const char *const cmp[] = {[TC_OP_LT] = "<", [TC_OP_GT] = ">",
		[TC_OP_LE] = "<=", [TC_OP_GE] = ">=", [TC_OP_EQ] = "==", [TC_OP_NE] = "!="};
	tc_buf t;
	int q;

	if (g->failed)
		return P_PRIMARY;
	switch (e->op) {
	case TC_OP_CONST:
		return put_const(b, e);
	case TC_OP_INDEX: /* the value of domain dimension id, an int64_t */
		if (e->id < 0 || e->id >= s->inst->n) {
			fail(g, "internal error: an index the instance has no value for");
			return P_PRIMARY;
		}
		return put_isl_bare(g, b, s->inst->index[e->id]);
	case TC_OP_SIZE:
		g->size_used[e->id] = 1;
		tc_buf_puts(b, g->size[e->id]);
		return P_PRIMARY;
	case TC_OP_READ:
		return put_read(s, b, e->id, e->args);
	case TC_OP_CAST:
		return put_cast(s, b, e);
	case TC_OP_NEG:
		if (e->type == TC_T_BOOL) /* -0 is 0, -1 is nonzero */
			return put_bare(s, b, e->args[0]);
		if (!tc_dtype_is_float(e->type)) { /* wraps */
			const char *u = wrap_type(e->type);
			int same = !strcmp(u, store_type(e->type));
			if (!same)
				tc_buf_printf(b, "(%s)(", value_type(e->type));
			tc_buf_printf(b, "0 - (%s)", u);
			put_expr(s, b, e->args[0], P_UNARY);
			tc_buf_puts(b, same ? "" : ")");
			return same ? P_ADD : P_UNARY;
		}
		tc_buf_init(&t);
		q = put_bare(s, &t, e->args[0]);
		put_neg(b, &t, q);
		tc_buf_free(&t);
		return P_UNARY;
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
	fail(g, "internal error: an unknown IR operation");
	return P_PRIMARY;
}

/* ---- statements ---- */

/* The identity of red in t (the interpreter's identity()), as stored. */
static void put_identity(tc_buf *b, tc_red red, tc_dtype t)
{
	static const char *const smax[] = {"INT8_MAX", "INT16_MAX", "INT32_MAX", "INT64_MAX"};
	static const char *const smin[] = {"INT8_MIN", "INT16_MIN", "INT32_MIN", "INT64_MIN"};
	static const char *const umax[] = {"UINT8_MAX", "UINT16_MAX", "UINT32_MAX", "UINT64_MAX"};
	int bits = tc_dtype_bits(t);
	int w = bits == 8 ? 0 : bits == 16 ? 1 : bits == 32 ? 2 : 3;
	int is_min = red == TC_RED_MIN;

	if (t == TC_T_F16) {
		tc_buf_puts(b, red == TC_RED_ADD ? "tc_d2h(0.0)" : red == TC_RED_MUL ? "tc_d2h(1.0)"
				: is_min ? "tc_d2h(65504.0)" : "tc_d2h(-65504.0)");
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

/* tensor[o] = tensor[o] op rhs (the interpreter's reduce()). */
static void put_update(const site *s, tc_buf *b, const tc_ir_stmt *st, tc_dtype t)
{
	cg *g = s->g;
	const char *op = st->red == TC_RED_ADD ? "+" : "*";
	int mx = st->red == TC_RED_MAX;
	tc_buf lhs;

	tc_buf_init(&lhs);
	put_element(s, &lhs, st->tensor, NULL);
	if (lhs.oom || !lhs.s) {
		tc_buf_free(&lhs);
		fail(g, "out of memory");
		return;
	}
	if (st->red == TC_RED_MIN || st->red == TC_RED_MAX) {
		if (t == TC_T_F16) {
			tc_buf_printf(b, "%s = tc_d2h(%s(tc_h2d(%s), ", lhs.s, mx ? "fmax" : "fmin",
				lhs.s);
		} else if (tc_dtype_is_float(t)) {
			tc_buf_printf(b, "%s = %s%s(%s, ", lhs.s, mx ? "fmax" : "fmin",
				t == TC_T_F32 ? "f" : "", lhs.s);
		} else if (tc_dtype_is_signed(t)) {
			tc_buf_printf(b, "%s = tc_%s(%s, ", lhs.s, mx ? "max" : "min", lhs.s);
		} else {
			tc_buf_printf(b, "%s = tc_u%s(%s%s, ", lhs.s, mx ? "max" : "min", lhs.s,
				t == TC_T_BOOL ? " != 0" : "");
		}
		put_expr(s, b, st->rhs, P_TOP);
		tc_buf_puts(b, t == TC_T_F16 ? "));" : ");");
	} else if (t == TC_T_F32 || t == TC_T_F64) { /* lhs = lhs op (rhs) */
		tc_buf_printf(b, "%s %s= ", lhs.s, op);
		put_expr(s, b, st->rhs, P_TOP);
		tc_buf_putc(b, ';');
	} else if (t == TC_T_F16) { /* one rounding of the exact result */
		tc_buf_printf(b, "%s = tc_d2h(tc_h2d(%s) %s ", lhs.s, lhs.s, op);
		put_expr(s, b, st->rhs, P_MUL + 1);
		tc_buf_puts(b, ");");
	} else { /* wraps in the unsigned type; the store converts back */
		const char *u = wrap_type(t);
		tc_buf_printf(b, "%s = (%s)%s %s (%s)", lhs.s, u, lhs.s, op, u);
		put_expr(s, b, st->rhs, P_UNARY);
		tc_buf_puts(b, t == TC_T_BOOL ? " != 0;" : ";");
	}
	tc_buf_free(&lhs);
}

/* The C statement of one instance. */
static void put_stmt(site *s, tc_buf *b)
{
	cg *g = s->g;
	const tc_poly_stmt *ps = s->inst->stmt;
	const tc_ir_stmt *st = ps->ir;
	tc_dtype t = g->f->tensors[st->tensor].dtype;

	if (ps->kind == TC_POLY_UPDATE) {
		put_update(s, b, st, t);
		return;
	}
	put_element(s, b, st->tensor, NULL);
	tc_buf_puts(b, " = ");
	if (ps->kind == TC_POLY_INIT) {
		put_identity(b, st->red, t);
	} else if (t == TC_T_F16) { /* tc_d2h rounds: the value need not be */
		s->unrounded = st->rhs;
		tc_buf_puts(b, "tc_d2h(");
		put_expr(s, b, st->rhs, P_TOP);
		tc_buf_putc(b, ')');
	} else {
		put_expr(s, b, st->rhs, P_TOP); /* C's conversion on assignment is the store */
	}
	tc_buf_putc(b, ';');
}

/* isl's print_user callback: the statement of a user node. */
static isl_printer *print_user(isl_printer *prn, isl_ast_print_options *options,
	isl_ast_node *node, void *user)
{
	cg *g = user;
	const tc_poly_inst *inst = tc_poly_node_inst(node);
	tc_buf b;

	isl_ast_print_options_free(options);
	tc_buf_init(&b);
	if (!inst || !inst->stmt) {
		fail(g, "internal error: an AST statement without its annotation");
	} else {
		site s = {g, inst, NULL};
		put_stmt(&s, &b);
	}
	if (b.oom)
		fail(g, "out of memory");
	prn = isl_printer_start_line(prn);
	prn = isl_printer_print_str(prn, b.s && !g->failed ? b.s : "/* error */;");
	prn = isl_printer_end_line(prn);
	tc_buf_free(&b);
	return prn;
}

/* Sizes and isl operations in the loop structure (the statements note
 * theirs as they are printed). */
static isl_bool visit_node(isl_ast_node *node, void *user)
{
	cg *g = user;
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
			note_ids(g, e[i]);
			isl_ast_expr_free(e[i]);
		}
	return isl_bool_true;
}

/* The loop nest (isl) with the statements (print_user), indented by 2. */
static char *loops_text(cg *g)
{
	isl_printer *prn;
	isl_ast_print_options *opts;
	char *s, *r;
	char *old_type;
	const char *cur = isl_options_get_ast_iterator_type(g->ctx);

	if (isl_ast_node_foreach_descendant_top_down(g->p->ast, visit_node, g) < 0) {
		fail(g, "isl could not walk the AST");
		return NULL;
	}
	/* loop iterators as int64_t: the option is read when printing; the
	 * caller's setting is restored */
	old_type = cur ? tc_strdup(cur) : NULL;
	if (cur && !old_type) {
		fail(g, "out of memory");
		return NULL;
	}
	isl_options_set_ast_iterator_type(g->ctx, "int64_t");
	prn = set_op_names(isl_printer_to_str(g->ctx));
	prn = isl_printer_set_indent(prn, 2);
	opts = isl_ast_print_options_alloc(g->ctx);
	opts = isl_ast_print_options_set_print_user(opts, print_user, g);
	prn = isl_ast_node_print(g->p->ast, prn, opts);
	s = isl_printer_get_str(prn);
	isl_printer_free(prn);
	isl_options_set_ast_iterator_type(g->ctx, old_type ? old_type : "int");
	tc_free(old_type);
	if (!s) {
		fail(g, "isl could not print the AST");
		return NULL;
	}
	r = tc_strdup(s);
	free(s);
	if (!r)
		fail(g, "out of memory");
	return r;
}

/* ---- the text ---- */

/* The helpers, in the order they are printed (a helper after those it
 * calls).  The text gets those it calls and those they call: the set comes
 * from the text itself (a name followed by '('), so that no helper goes
 * unused (Clang warns about unused static inline functions) or missing. */
static const struct helper {
	const char *name;
	const char *text;
} helpers[] = {
	{"tc_floord",
		"/* floor(n / d) for d > 0 (isl's floord) */\n"
		"static inline int64_t tc_floord(int64_t n, int64_t d)\n"
		"{\n"
		"  return n / d - (n % d != 0 && n < 0);\n"
		"}\n"},
	{"tc_floormod",
		"/* n - d floor(n / d) for d > 0 */\n"
		"static inline int64_t tc_floormod(int64_t n, int64_t d)\n"
		"{\n"
		"  int64_t r = n % d;\n"
		"  return r < 0 ? r + d : r;\n"
		"}\n"},
	{"tc_min", "static inline int64_t tc_min(int64_t a, int64_t b) { return a <= b ? a : b; }\n"},
	{"tc_max", "static inline int64_t tc_max(int64_t a, int64_t b) { return a >= b ? a : b; }\n"},
	{"tc_umin",
		"static inline uint64_t tc_umin(uint64_t a, uint64_t b) { return a <= b ? a : b; }\n"},
	{"tc_umax",
		"static inline uint64_t tc_umax(uint64_t a, uint64_t b) { return a >= b ? a : b; }\n"},
	{"tc_divs",
		"/* integer /: floor division (a zero divisor is an error in the\n"
		"   interpreter; here it gives 0) */\n"
		"static inline int64_t tc_divs(int64_t a, int64_t b)\n"
		"{\n"
		"  int64_t q, r;\n"
		"  if (b == 0)\n"
		"    return 0;\n"
		"  if (b == -1)\n"
		"    return (int64_t)(0 - (uint64_t)a);\n"
		"  q = a / b;\n"
		"  r = a % b;\n"
		"  return (r != 0 && (r < 0) != (b < 0)) ? q - 1 : q;\n"
		"}\n"},
	{"tc_mods",
		"/* integer %: the remainder of floor division, with the sign of b */\n"
		"static inline int64_t tc_mods(int64_t a, int64_t b)\n"
		"{\n"
		"  int64_t r;\n"
		"  if (b == 0 || b == -1)\n"
		"    return 0;\n"
		"  r = a % b;\n"
		"  return (r != 0 && (r < 0) != (b < 0)) ? r + b : r;\n"
		"}\n"},
	{"tc_divu", "static inline uint64_t tc_divu(uint64_t a, uint64_t b) { return b ? a / b : 0; }\n"},
	{"tc_modu", "static inline uint64_t tc_modu(uint64_t a, uint64_t b) { return b ? a % b : 0; }\n"},
	{"tc_fmodfloor",
		"/* float %: floor modulo, computed in double */\n"
		"static inline double tc_fmodfloor(double a, double b) { return a - b * floor(a / b); }\n"},
	{"tc_f2s",
		"/* float -> signed integer of bits bits: truncate, saturate, NaN -> 0 */\n"
		"static inline int64_t tc_f2s(double x, int bits)\n"
		"{\n"
		"  double lo = -ldexp(1, bits - 1), hi = ldexp(1, bits - 1) - 1;\n"
		"  if (isnan(x))\n"
		"    return 0;\n"
		"  x = trunc(x);\n"
		"  return x <= lo ? (int64_t)lo : x >= hi ? (bits == 64 ? INT64_MAX : (int64_t)hi) : (int64_t)x;\n"
		"}\n"},
	{"tc_f2u",
		"/* float -> unsigned integer of bits bits: truncate, saturate, NaN -> 0 */\n"
		"static inline uint64_t tc_f2u(double x, int bits)\n"
		"{\n"
		"  double hi = ldexp(1, bits) - 1;\n"
		"  if (isnan(x))\n"
		"    return 0;\n"
		"  x = trunc(x);\n"
		"  return x <= 0 ? 0 : x >= hi ? (bits == 64 ? UINT64_MAX : (uint64_t)hi) : (uint64_t)x;\n"
		"}\n"},
	{"tc_d2h",
		"/* float16 is stored as its 16 bits and computed in double (every float16\n"
		"   value is a double): the nearest float16, ties to even */\n"
		"static inline uint16_t tc_d2h(double x)\n"
		"{\n"
		"  uint64_t u, frac, sig, rest, half, r;\n"
		"  uint16_t sign;\n"
		"  int exp, e, shift;\n"
		"  memcpy(&u, &x, sizeof(u));\n"
		"  sign = (uint16_t)((u >> 48) & 0x8000u);\n"
		"  exp = (int)((u >> 52) & 0x7ff);\n"
		"  frac = u & ((UINT64_C(1) << 52) - 1);\n"
		"  if (exp == 0x7ff) /* inf, or NaN keeping the top of its payload */\n"
		"    return (uint16_t)(sign | 0x7c00u | (frac && !(frac >> 42) ? 0x200u : frac >> 42));\n"
		"  e = exp - 1023;\n"
		"  if (exp == 0 || e < -25)\n"
		"    return sign;\n"
		"  if (e > 15)\n"
		"    return (uint16_t)(sign | 0x7c00u);\n"
		"  sig = frac | (UINT64_C(1) << 52);\n"
		"  shift = 42 + (e < -14 ? -14 - e : 0);\n"
		"  r = sig >> shift;\n"
		"  rest = sig & ((UINT64_C(1) << shift) - 1);\n"
		"  half = UINT64_C(1) << (shift - 1);\n"
		"  if (rest > half || (rest == half && (r & 1)))\n"
		"    r++;\n"
		"  if (e >= -14)\n"
		"    r += (uint64_t)(e + 14) << 10;\n"
		"  return (uint16_t)(sign | (r >= 0x7c00u ? 0x7c00u : r));\n"
		"}\n"},
	{"tc_h2d",
		"/* the value of float16 bits h */\n"
		"static inline double tc_h2d(uint16_t h)\n"
		"{\n"
		"  uint64_t sign = (uint64_t)(h & 0x8000u) << 48, frac = h & 0x3ffu, u;\n"
		"  int exp = (h >> 10) & 0x1f;\n"
		"  double x;\n"
		"  if (exp == 0) {\n"
		"    x = (double)frac * 0x1p-24;\n"
		"    return sign ? -x : x;\n"
		"  }\n"
		"  u = sign | (exp == 0x1f ? UINT64_C(0x7ff) << 52 : (uint64_t)(exp - 15 + 1023) << 52) | frac << 42;\n"
		"  memcpy(&x, &u, sizeof(x));\n"
		"  return x;\n"
		"}\n"},
	{"tc_h",
		"/* x rounded to float16 */\n"
		"static inline double tc_h(double x) { return tc_h2d(tc_d2h(x)); }\n"},
	{"tc_h_nextafter",
		"/* the float16 value after a in the direction of b */\n"
		"static inline double tc_h_nextafter(double a, double b)\n"
		"{\n"
		"  uint16_t h = tc_d2h(a);\n"
		"  if (isnan(a) || isnan(b))\n"
		"    return a + b;\n"
		"  if (a == b)\n"
		"    return b;\n"
		"  if (a == 0)\n"
		"    return b > 0 ? 0x1p-24 : -0x1p-24;\n"
		"  h = (uint16_t)((b > a) == (a > 0) ? h + 1 : h - 1);\n"
		"  return tc_h2d(h);\n"
		"}\n"},
};

#define NHELPERS ((int)(sizeof(helpers) / sizeof(helpers[0])))

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

/* Which helpers the loops need, directly or through other helpers. */
static void find_helpers(const char *loops, int used[NHELPERS])
{
	int i, j, more = 1;
	for (i = 0; i < NHELPERS; i++)
		used[i] = calls(loops, helpers[i].name);
	while (more) {
		more = 0;
		for (i = 0; i < NHELPERS; i++)
			for (j = 0; used[i] && j < NHELPERS; j++)
				if (!used[j] && calls(helpers[i].text, helpers[j].name))
					used[j] = more = 1;
	}
}

static void put_helpers(cg *g, tc_buf *b, const int used[NHELPERS])
{
	int i, id, any = 0;

	for (i = 0; i < NHELPERS; i++)
		if (used[i]) {
			tc_buf_printf(b, "%s%s", any ? "" : "\n", helpers[i].text);
			any = 1;
		}
	for (id = 0; id < TC_BI_COUNT; id++) {
		int k;
		if (!g->cuda[id])
			continue;
		if (any < 2)
			tc_buf_puts(b, "\n/* CUDA math functions without a C library counterpart: declared,\n"
				       "   not defined here (link an implementation, in double) */\n");
		any = 2;
		tc_buf_printf(b, "extern double tc_cuda_%s(", tc_builtins[id].name);
		for (k = 0; k < tc_builtins[id].arity; k++)
			tc_buf_printf(b, "%sdouble", k ? ", " : "");
		tc_buf_puts(b, ");\n");
	}
}

static void put_header(cg *g, tc_buf *b, const char *loops, const int used[NHELPERS])
{
	const tc_ir_func *f = g->f;
	int i, half = 0;

	tc_buf_printf(b, "/* tcomp: def %s ", f->name);
	if (!f->nparams)
		tc_buf_puts(b, "(no sizes)");
	else
		tc_buf_puts(b, g->p->params ? "specialised to sizes " : "parametric in ");
	for (i = 0; i < f->nparams; i++) {
		tc_buf_printf(b, "%s%s", i ? ", " : "", g->size[i]);
		if (g->p->params)
			tc_buf_printf(b, "=%lld", (long long)g->p->params[i]);
	}
	tc_buf_puts(b, "\n * tensors[t] is the data of tensor t, dense and row-major: inputs, outputs,\n"
		       " * then temporaries (workspace the caller provides).  Float operations round\n"
		       " * as written: compile without contraction (-ffp-contract=off). */\n");
	if (g->xopen)
		tc_buf_puts(b, "#ifndef _XOPEN_SOURCE\n#define _XOPEN_SOURCE 700 /* j0, jn, y0, ... */\n#endif\n");
	if (strstr(loops, "FLT_MAX") || strstr(loops, "DBL_MAX"))
		tc_buf_puts(b, "#include <float.h>\n");
	tc_buf_puts(b, "#include <math.h>\n#include <stdint.h>\n");
	for (i = 0; i < NHELPERS; i++)
		if (used[i] && strstr(helpers[i].text, "memcpy("))
			half = 1;
	if (half)
		tc_buf_puts(b, "#include <string.h>\n");
}

static void put_function(cg *g, tc_buf *b, const char *loops)
{
	const tc_ir_func *f = g->f;
	int i;

	tc_buf_printf(b, "\nvoid %s(void *const *%s", g->fname, g->targ);
	for (i = 0; !g->p->params && i < f->nparams; i++)
		tc_buf_printf(b, ", int64_t %s", g->size[i]);
	tc_buf_puts(b, ")\n{\n");
	for (i = 0; i < f->ntensors; i++) {
		const char *q = f->tensors[i].kind == TC_TENSOR_INPUT ? "const " : "";
		const char *ty = store_type(f->tensors[i].dtype);
		if (!g->tensor_used[i]) {
			tc_buf_printf(b, "  /* %s[%d] (%s) is not accessed */\n", g->targ, i,
				f->tensors[i].name);
			continue;
		}
		tc_buf_printf(b, "  %s%s *%s = (%s%s *)%s[%d];\n", q, ty, g->tensor[i], q, ty,
			g->targ, i);
	}
	for (i = 0; i < f->nparams; i++) {
		if (g->p->params && g->size_used[i])
			tc_buf_printf(b, "  const int64_t %s = %lld;\n", g->size[i],
				(long long)g->p->params[i]);
		else if (!g->p->params && !g->size_used[i])
			tc_buf_printf(b, "  (void)%s;\n", g->size[i]);
	}
	tc_buf_puts(b, loops);
	tc_buf_puts(b, "}\n");
}

static void cg_clear(cg *g)
{
	int i;
	for (i = 0; g->size && i < g->f->nparams; i++)
		tc_free(g->size[i]);
	for (i = 0; g->tensor && i < g->f->ntensors; i++)
		tc_free(g->tensor[i]);
	tc_free(g->size);
	tc_free(g->tensor);
	tc_free(g->fname);
	tc_free(g->targ);
	tc_free(g->size_used);
	tc_free(g->tensor_used);
}

/* The C text of p: the loops come first (they decide which helpers, sizes
 * and tensors the text needs), then the text is put together in order. */
char *tc_cg_c_text(const tc_poly *p, tc_diags *d)
{
	cg g;
	tc_buf b;
	char *loops = NULL, *text = NULL;
	int used[NHELPERS];

	memset(&g, 0, sizeof(g));
	g.p = p;
	g.f = p ? p->f : NULL;
	g.ctx = p ? p->ctx : NULL;
	g.d = d;
	if (!p || !p->ast) {
		fail(&g, "the model has no AST (tc_poly_ast not run)");
		goto done;
	}
	if (make_names(&g) < 0)
		goto done;
	loops = loops_text(&g);
	if (!loops || g.failed)
		goto done;
	find_helpers(loops, used);
	tc_buf_init(&b);
	put_header(&g, &b, loops, used);
	put_helpers(&g, &b, used);
	put_function(&g, &b, loops);
	text = tc_buf_take(&b);
	if (!text)
		fail(&g, "out of memory");
done:
	if (g.failed) {
		tc_loc none;
		memset(&none, 0, sizeof(none));
		tc_error(d, none, "cannot print the C code of '%s': %s",
			g.f ? g.f->name : "?", g.why ? g.why : "error");
		tc_free(text);
		text = NULL;
	}
	tc_free(loops);
	if (g.f)
		cg_clear(&g);
	return text;
}
