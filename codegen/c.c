/* The isl AST of a tc_poly printed as host C (see c.h): the frame around
 * the statements.
 *
 * Owns: the host C dialect of the expression printer (element types with
 * float16 as uint16_t bits, the static inline helpers, how libm spells the
 * builtins, NAME[offset] through typed pointers), the names of the
 * function, its parameter and the tensor pointers, the loop structure
 * (for, if, blocks, marks as comments) printed by isl_ast_node_print with
 * a print_user callback, a header comment, the includes, the helpers the
 * function needs (only those), and the function with one typed pointer per
 * tensor and one int64_t per size.
 *
 * Must not know: how an expression or a statement body is printed, nor
 * the interpreter's semantics: every statement comes from the shared
 * C-expression printer (c_expr.h), which a CUDA frame will share.
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
#include "c_expr.h"

#include <isl/printer.h>

#include <stdlib.h>
#include <string.h>

/* ---- the host C dialect ---- */

/* The C type that stores an element of each type. */
static const char *const host_types[TC_T_COUNT] = {
	[TC_T_NONE] = "void",
	[TC_T_BOOL] = "uint8_t",
	[TC_T_I8] = "int8_t",
	[TC_T_I16] = "int16_t",
	[TC_T_I32] = "int32_t",
	[TC_T_I64] = "int64_t",
	[TC_T_U8] = "uint8_t",
	[TC_T_U16] = "uint16_t",
	[TC_T_U32] = "uint32_t",
	[TC_T_U64] = "uint64_t",
	[TC_T_F16] = "uint16_t",
	[TC_T_F32] = "float",
	[TC_T_F64] = "double",
	[TC_T_BF16] = "uint16_t",
};

/* The helpers, in the order they are printed (a helper after those it
 * calls).  The text gets those it calls and those they call: the set comes
 * from the text itself (tc_cg_cexpr_helpers_called), so that no helper
 * goes unused (Clang warns about unused static inline functions) or
 * missing. */
static const tc_cg_cexpr_helper_def host_helpers[TC_CG_CEXPR_NHELPERS] = {
	[TC_CG_CEXPR_FLOORD] = {"tc_floord",
		"/* floor(n / d) for d > 0 (isl's floord) */\n"
		"static inline int64_t tc_floord(int64_t n, int64_t d)\n"
		"{\n"
		"  return n / d - (n % d != 0 && n < 0);\n"
		"}\n"},
	[TC_CG_CEXPR_FLOORMOD] = {"tc_floormod",
		"/* n - d floor(n / d) for d > 0 */\n"
		"static inline int64_t tc_floormod(int64_t n, int64_t d)\n"
		"{\n"
		"  int64_t r = n % d;\n"
		"  return r < 0 ? r + d : r;\n"
		"}\n"},
	[TC_CG_CEXPR_MIN] = {"tc_min",
		"static inline int64_t tc_min(int64_t a, int64_t b) { return a <= b ? a : b; }\n"},
	[TC_CG_CEXPR_MAX] = {"tc_max",
		"static inline int64_t tc_max(int64_t a, int64_t b) { return a >= b ? a : b; }\n"},
	[TC_CG_CEXPR_UMIN] = {"tc_umin",
		"static inline uint64_t tc_umin(uint64_t a, uint64_t b) { return a <= b ? a : b; }\n"},
	[TC_CG_CEXPR_UMAX] = {"tc_umax",
		"static inline uint64_t tc_umax(uint64_t a, uint64_t b) { return a >= b ? a : b; }\n"},
	[TC_CG_CEXPR_DIVS] = {"tc_divs",
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
	[TC_CG_CEXPR_MODS] = {"tc_mods",
		"/* integer %: the remainder of floor division, with the sign of b */\n"
		"static inline int64_t tc_mods(int64_t a, int64_t b)\n"
		"{\n"
		"  int64_t r;\n"
		"  if (b == 0 || b == -1)\n"
		"    return 0;\n"
		"  r = a % b;\n"
		"  return (r != 0 && (r < 0) != (b < 0)) ? r + b : r;\n"
		"}\n"},
	[TC_CG_CEXPR_DIVU] = {"tc_divu",
		"static inline uint64_t tc_divu(uint64_t a, uint64_t b) { return b ? a / b : 0; }\n"},
	[TC_CG_CEXPR_MODU] = {"tc_modu",
		"static inline uint64_t tc_modu(uint64_t a, uint64_t b) { return b ? a % b : 0; }\n"},
	[TC_CG_CEXPR_FMODFLOOR] = {"tc_fmodfloor",
		"/* float %: floor modulo, computed in double */\n"
		"static inline double tc_fmodfloor(double a, double b) { return a - b * floor(a / b); }\n"},
	[TC_CG_CEXPR_F2S] = {"tc_f2s",
		"/* float -> signed integer of bits bits: truncate, saturate, NaN -> 0 */\n"
		"static inline int64_t tc_f2s(double x, int bits)\n"
		"{\n"
		"  double lo = -ldexp(1.0, bits - 1), hi = ldexp(1.0, bits - 1) - 1;\n"
		"  if (isnan(x))\n"
		"    return 0;\n"
		"  x = trunc(x);\n"
		"  return x <= lo ? (int64_t)lo : x >= hi ? (bits == 64 ? INT64_MAX : (int64_t)hi) : (int64_t)x;\n"
		"}\n"},
	[TC_CG_CEXPR_F2U] = {"tc_f2u",
		"/* float -> unsigned integer of bits bits: truncate, saturate, NaN -> 0 */\n"
		"static inline uint64_t tc_f2u(double x, int bits)\n"
		"{\n"
		"  double hi = ldexp(1.0, bits) - 1;\n"
		"  if (isnan(x))\n"
		"    return 0;\n"
		"  x = trunc(x);\n"
		"  return x <= 0 ? 0 : x >= hi ? (bits == 64 ? UINT64_MAX : (uint64_t)hi) : (uint64_t)x;\n"
		"}\n"},
	[TC_CG_CEXPR_D2H] = {"tc_d2h",
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
	[TC_CG_CEXPR_H2D] = {"tc_h2d",
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
	[TC_CG_CEXPR_H] = {"tc_h",
		"/* x rounded to float16 */\n"
		"static inline double tc_h(double x) { return tc_h2d(tc_d2h(x)); }\n"},
	[TC_CG_CEXPR_H_NEXTAFTER] = {"tc_h_nextafter",
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
	[TC_CG_CEXPR_D2B] = {"tc_d2b",
		"/* bfloat16 is stored as its 16 bits (the top half of a float) and computed\n"
		"   in double: the nearest bfloat16, ties to even, in one rounding (to float\n"
		"   rounding to odd, then to nearest even); a NaN made quiet */\n"
		"static inline uint16_t tc_d2b(double x)\n"
		"{\n"
		"  float f = (float)x;\n"
		"  uint32_t u;\n"
		"  memcpy(&u, &f, sizeof(u));\n"
		"  if (x != x)\n"
		"    return (uint16_t)((u >> 16) | 0x40u);\n"
		"  if ((double)f != x)\n"
		"    u = (u - (fabs((double)f) > fabs(x))) | 1u;\n"
		"  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);\n"
		"}\n"},
	[TC_CG_CEXPR_B2D] = {"tc_b2d",
		"/* the value of bfloat16 bits h */\n"
		"static inline double tc_b2d(uint16_t h)\n"
		"{\n"
		"  uint32_t u = (uint32_t)h << 16;\n"
		"  float f;\n"
		"  memcpy(&f, &u, sizeof(f));\n"
		"  return f;\n"
		"}\n"},
	[TC_CG_CEXPR_B] = {"tc_b",
		"/* x rounded to bfloat16 */\n"
		"static inline double tc_b(double x) { return tc_b2d(tc_d2b(x)); }\n"},
	[TC_CG_CEXPR_B_NEXTAFTER] = {"tc_b_nextafter",
		"/* the bfloat16 value after a in the direction of b */\n"
		"static inline double tc_b_nextafter(double a, double b)\n"
		"{\n"
		"  uint16_t h = tc_d2b(a);\n"
		"  if (isnan(a) || isnan(b))\n"
		"    return a + b;\n"
		"  if (a == b)\n"
		"    return b;\n"
		"  if (a == 0)\n"
		"    return b > 0 ? 0x1p-133 : -0x1p-133;\n"
		"  h = (uint16_t)((b > a) == (a > 0) ? h + 1 : h - 1);\n"
		"  return tc_b2d(h);\n"
		"}\n"},
	[TC_CG_CEXPR_U2D_ODD] = {"tc_u2d_odd",
		"/* m as a double, exact below 2^53, else rounded to odd (the bits shifted\n"
		"   out kept as a sticky bit), so that a later rounding to bfloat16 is the\n"
		"   correct one */\n"
		"static inline double tc_u2d_odd(uint64_t m)\n"
		"{\n"
		"  if (m < (UINT64_C(1) << 53))\n"
		"    return (double)m;\n"
		"  return (double)((m >> 11) | ((m & 0x7ffu) != 0)) * 2048.0;\n"
		"}\n"},
	[TC_CG_CEXPR_L2D_ODD] = {"tc_l2d_odd",
		"/* v as a double rounded to odd, as tc_u2d_odd */\n"
		"static inline double tc_l2d_odd(int64_t v)\n"
		"{\n"
		"  return v < 0 ? -tc_u2d_odd(0 - (uint64_t)v) : tc_u2d_odd((uint64_t)v);\n"
		"}\n"},
};

/* The Bessel functions: X/Open, not C99 (the text defines _XOPEN_SOURCE). */
static int is_xopen(int id)
{
	switch (id) {
	case TC_BI_J0: case TC_BI_J1: case TC_BI_JN:
	case TC_BI_Y0: case TC_BI_Y1: case TC_BI_YN:
		return 1;
	default:
		return 0;
	}
}

/* How libm (or the text) provides builtin id. */
static tc_cg_cexpr_bi_form host_builtin_form(tc_builtin_id id)
{
	switch (id) {
	case TC_BI_ILOGB:
		return TC_CG_CEXPR_BI_DOUBLE;
	case TC_BI_EXP10: case TC_BI_RSQRT: case TC_BI_RCBRT: case TC_BI_RHYPOT:
	case TC_BI_RNORM3D:
		return TC_CG_CEXPR_BI_INLINE;
	case TC_BI_SINPI: case TC_BI_COSPI: case TC_BI_ERFINV: case TC_BI_ERFCINV:
	case TC_BI_NORMCDF: case TC_BI_NORMCDFINV: case TC_BI_NORM3D:
		return TC_CG_CEXPR_BI_EXTERN;
	default:
		return is_xopen(id) ? TC_CG_CEXPR_BI_DOUBLE : TC_CG_CEXPR_BI_C99;
	}
}

/* tensor[offset], through the typed pointer the function sets up. */
static void host_put_access(const tc_cg_cexpr *pr, tc_buf *b, int tensor, const char *offset)
{
	tc_buf_printf(b, "%s[%s]", pr->tensor[tensor], offset);
}

/* Host C, compiled by a C99 compiler with libm (the dialect seam is
 * described in c_expr.h). */
static const tc_cg_cexpr_dialect host_c = {
	.type = host_types,
	.helper = host_helpers,
	.builtin_form = host_builtin_form,
	.extern_prefix = "tc_cuda_",
	.put_access = host_put_access,
};

/* The state of one tc_cg_c_text call. */
typedef struct cg {
	tc_cg_cexpr pr; /* the statements' printer: what they use, the first failure */
	const tc_poly *p;
	const tc_ir_func *f;
	tc_diags *d;
	char **size;   /* the sizes' names in the text (= their isl names), owned */
	char **tensor; /* the tensor pointers' names, owned */
	char *fname;   /* the function's name, owned */
	char *targ;    /* the name of the tensors parameter, owned */
} cg;

static void fail(cg *g, const char *why)
{
	tc_cg_cexpr_fail(&g->pr, why);
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
	size_t n = strlen(host_c.extern_prefix);
	int i;
	for (i = 0; i < TC_CG_CEXPR_NHELPERS; i++)
		if (!strcmp(s, host_helpers[i].name))
			return 1;
	if (!strncmp(s, host_c.extern_prefix, n))
		return tc_builtin_lookup(s + n, (int)strlen(s + n)) >= 0;
	return 0;
}

/* Whether s is reserved: by C, by the C library, or by the text. */
static int is_reserved(const char *s)
{
	return is_c_keyword(s) || is_c_library_name(s) || is_helper_name(s);
}

int tc_cg_c_name_reserved(__tc_keep const char *s)
{
	return is_reserved(s);
}

const tc_cg_cexpr_dialect *tc_cg_c_dialect(void)
{
	return &host_c;
}

/* name, with '_' appended until it is free (c_expr.h). */
static char *fresh_name(const char *name, char *const *taken, int n)
{
	return tc_cg_cexpr_fresh_name(name, taken, n, is_reserved);
}

static char *size_name(cg *g, int i)
{
	const char *why = NULL;
	char *s = tc_cg_cexpr_size_name(g->p, i, &why);
	if (!s)
		fail(g, why);
	return s;
}

static tc_stat make_names(cg *g)
{
	const tc_ir_func *f = g->f;
	int i, n = f->nparams + f->ntensors + 1;
	char **all = tc_calloc((size_t)n + 1, sizeof(char *)); /* sizes, targ, tensors */

	g->size = tc_calloc((size_t)f->nparams + 1, sizeof(char *));
	g->tensor = tc_calloc((size_t)f->ntensors + 1, sizeof(char *));
	if (!all || !g->size || !g->tensor)
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

/* ---- the loops ---- */

static isl_printer *print_line(isl_printer *prn, const char *s)
{
	prn = isl_printer_start_line(prn);
	prn = isl_printer_print_str(prn, s);
	return isl_printer_end_line(prn);
}

/* A register tile's point loops (inst->points, polyhedral/ast.c) in a
 * block: the origin tc_o<v> from the node's index expressions, whether
 * each dimension that may be short is (tc_s<v>), then the piece of the
 * tile's kind (a switch on the short dimensions, or whole against
 * partial, the partial tile's extents tc_e<v>). */
static isl_printer *print_points(cg *g, isl_printer *prn, isl_ast_print_options *options,
	const tc_poly_inst *inst)
{
	const tc_poly_points *pt = inst->points;
	char buf[96];
	int v, k, pieces = 0;
	for (k = 0; k < 1 << TC_POLY_MAX_PART; k++)
		pieces += pt->piece[k] != NULL;
	pieces += pt->partial != NULL;
	prn = print_line(prn, "{");
	prn = isl_printer_indent(prn, 2);
	for (v = 0; v < pt->n; v++) {
		snprintf(buf, sizeof(buf), "const int64_t tc_o%d = ", v);
		prn = isl_printer_start_line(prn);
		prn = isl_printer_print_str(prn, buf);
		prn = isl_printer_print_ast_expr(prn, inst->index[v]);
		prn = isl_printer_print_str(prn, ";");
		prn = isl_printer_end_line(prn);
		tc_cg_cexpr_note_ids(&g->pr, inst->index[v]);
		if (!pt->extent[v] && (pt->may_partial[v] != 1 || pieces < 2))
			continue;
		tc_cg_cexpr_note_ids(&g->pr, pt->end[v]);
		snprintf(buf, sizeof(buf), "const int64_t tc_%c%d = ", pt->extent[v] ? 'e' : 'x', v);
		prn = isl_printer_start_line(prn);
		prn = isl_printer_print_str(prn, buf);
		prn = isl_printer_print_ast_expr(prn, pt->end[v]);
		snprintf(buf, sizeof(buf), " - tc_o%d;", v);
		prn = isl_printer_print_str(prn, buf);
		prn = isl_printer_end_line(prn);
		if (pt->may_partial[v] != 1 || pieces < 2)
			continue;
		snprintf(buf, sizeof(buf), "const int tc_s%d = tc_%c%d < %lld;", v,
			pt->extent[v] ? 'e' : 'x', v, (long long)pt->size[v]);
		prn = print_line(prn, buf);
	}
	if (pieces > 1) {
		prn = isl_printer_start_line(prn);
		prn = isl_printer_print_str(prn, "switch (");
		for (k = 0; k < pt->npart; k++) {
			snprintf(buf, sizeof(buf), "%s(tc_s%d << %d)", k ? " | " : "", pt->part[k], k);
			prn = isl_printer_print_str(prn, buf);
		}
		for (v = 0, k = 0; !pt->npart && v < pt->n; v++)
			if (pt->may_partial[v] == 1) {
				snprintf(buf, sizeof(buf), "%stc_s%d", k++ ? " | " : "", v);
				prn = isl_printer_print_str(prn, buf);
			}
		prn = isl_printer_print_str(prn, ") {");
		prn = isl_printer_end_line(prn);
	}
	for (k = 0; k <= 1 << TC_POLY_MAX_PART; k++) {
		isl_ast_node *a = k < 1 << TC_POLY_MAX_PART ? pt->piece[k] : pt->partial;
		if (!a)
			continue;
		if (pieces > 1) {
			snprintf(buf, sizeof(buf), "case %d: {", k < 1 << TC_POLY_MAX_PART ? k : 1);
			prn = print_line(prn, buf);
			prn = isl_printer_indent(prn, 2);
		}
		tc_cg_cexpr_note_loops(&g->pr, a);
		prn = isl_ast_node_print(a, prn, isl_ast_print_options_copy(options));
		if (pieces > 1) {
			prn = print_line(prn, "break;");
			prn = isl_printer_indent(prn, -2);
			prn = print_line(prn, "}");
		}
	}
	if (pieces > 1)
		prn = print_line(prn, "}");
	prn = isl_printer_indent(prn, -2);
	return print_line(prn, "}");
}

/* isl's print_user callback: the statement of a user node (or, for a
 * register tile's origin, the tile's point loops). */
static isl_printer *print_user(isl_printer *prn, isl_ast_print_options *options,
	isl_ast_node *node, void *user)
{
	cg *g = user;
	const tc_poly_inst *inst = tc_poly_node_inst(node);
	tc_buf b;

	if (inst && inst->points) {
		prn = print_points(g, prn, options, inst);
		isl_ast_print_options_free(options);
		return prn;
	}
	isl_ast_print_options_free(options);
	tc_buf_init(&b);
	if (!inst || !inst->stmt) {
		fail(g, "internal error: an AST statement without its annotation");
	} else {
		tc_cg_cexpr_put_stmt(&g->pr, &b, inst);
	}
	if (b.oom)
		fail(g, "out of memory");
	prn = isl_printer_start_line(prn);
	prn = isl_printer_print_str(prn, b.s && !g->pr.failed ? b.s : "/* error */;");
	prn = isl_printer_end_line(prn);
	tc_buf_free(&b);
	return prn;
}

/* The loop nest (isl) with the statements (print_user), indented by 2. */
static char *loops_text(cg *g)
{
	tc_cg_cexpr_note_loops(&g->pr, g->p->ast);
	if (g->pr.failed)
		return NULL;
	return tc_cg_cexpr_ast_text(&g->pr, g->p->ast, 2, print_user, NULL, g);
}

/* ---- the text ---- */

/* The definitions of the helpers used, then the declarations of the
 * extern builtins called. */
static void put_helpers(cg *g, tc_buf *b, const int used[TC_CG_CEXPR_NHELPERS])
{
	int i, id, any = 0;

	for (i = 0; i < TC_CG_CEXPR_NHELPERS; i++)
		if (used[i]) {
			tc_buf_printf(b, "%s%s", any ? "" : "\n", host_helpers[i].text);
			any = 1;
		}
	for (id = 0; id < TC_BI_COUNT; id++) {
		int k;
		if (!g->pr.builtin_used[id] || host_builtin_form(id) != TC_CG_CEXPR_BI_EXTERN)
			continue;
		if (any < 2)
			tc_buf_puts(b, "\n/* CUDA math functions without a C library counterpart: declared,\n"
				       "   not defined here (link an implementation, in double) */\n");
		any = 2;
		tc_buf_printf(b, "extern double %s%s(", host_c.extern_prefix, tc_builtins[id].name);
		for (k = 0; k < tc_builtins[id].arity; k++)
			tc_buf_printf(b, "%sdouble", k ? ", " : "");
		tc_buf_puts(b, ");\n");
	}
}

/* Whether size i is an argument of the function: every size of a
 * parametric model, the free ones of a model with sizes (p->free). */
static int is_free(const cg *g, int i)
{
	return !g->p->params || (g->p->free && g->p->free[i]);
}

/* The header comment and the includes (and the feature macro) the text
 * needs. */
static void put_header(cg *g, tc_buf *b, const char *loops,
	const int used[TC_CG_CEXPR_NHELPERS])
{
	const tc_ir_func *f = g->f;
	int i, half = 0, xopen = 0;

	tc_buf_printf(b, "/* tcomp: def %s ", f->name);
	if (!f->nparams)
		tc_buf_puts(b, "(no sizes)");
	else
		tc_buf_puts(b, g->p->params ? "specialised to sizes " : "parametric in ");
	for (i = 0; i < f->nparams; i++) {
		tc_buf_printf(b, "%s%s", i ? ", " : "", g->size[i]);
		if (g->p->params && !is_free(g, i))
			tc_buf_printf(b, "=%lld", (long long)g->p->params[i]);
		else if (g->p->params) /* the passes measured at params */
			tc_buf_printf(b, " (free; choices made at %lld)", (long long)g->p->params[i]);
	}
	tc_buf_puts(b, "\n * tensors[t] is the data of tensor t, dense and row-major: inputs, outputs,\n"
		       " * then temporaries (workspace the caller provides).  Float operations round\n"
		       " * as written: compile without contraction (-ffp-contract=off). */\n");
	for (i = 0; i < TC_BI_COUNT; i++)
		if (g->pr.builtin_used[i] && is_xopen(i))
			xopen = 1;
	if (xopen)
		tc_buf_puts(b, "#ifndef _XOPEN_SOURCE\n#define _XOPEN_SOURCE 700 /* j0, jn, y0, ... */\n#endif\n");
	if (strstr(loops, "FLT_MAX") || strstr(loops, "DBL_MAX"))
		tc_buf_puts(b, "#include <float.h>\n");
	tc_buf_puts(b, "#include <math.h>\n#include <stdint.h>\n");
	for (i = 0; i < TC_CG_CEXPR_NHELPERS; i++)
		if (used[i] && strstr(host_helpers[i].text, "memcpy("))
			half = 1;
	if (half)
		tc_buf_puts(b, "#include <string.h>\n");
}

/* The function: its signature, the tensor pointers and sizes it sets up,
 * the loops. */
static void put_function(cg *g, tc_buf *b, const char *loops)
{
	const tc_ir_func *f = g->f;
	int i;

	tc_buf_printf(b, "\nvoid %s(void *const *%s", g->fname, g->targ);
	for (i = 0; i < f->nparams; i++)
		if (is_free(g, i))
			tc_buf_printf(b, ", int64_t %s", g->size[i]);
	tc_buf_puts(b, ")\n{\n");
	for (i = 0; i < f->ntensors; i++) {
		const char *q = f->tensors[i].kind == TC_TENSOR_INPUT ? "const " : "";
		const char *ty = host_types[f->tensors[i].dtype];
		if (!g->pr.tensor_used[i]) {
			tc_buf_printf(b, "  /* %s[%d] (%s) is not accessed */\n", g->targ, i,
				f->tensors[i].name);
			continue;
		}
		tc_buf_printf(b, "  %s%s *%s = (%s%s *)%s[%d];\n", q, ty, g->tensor[i], q, ty,
			g->targ, i);
	}
	for (i = 0; i < f->nparams; i++) {
		if (!is_free(g, i) && g->pr.size_used[i])
			tc_buf_printf(b, "  const int64_t %s = %lld;\n", g->size[i],
				(long long)g->p->params[i]);
		else if (is_free(g, i) && !g->pr.size_used[i])
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
	tc_cg_cexpr_clear(&g->pr);
}

/* The C text of p: the loops come first (they decide which helpers, sizes
 * and tensors the text needs), then the text is put together in order.
 * NULL with a message in d on failure; the caller owns the string. */
__tc_give char *tc_cg_c_text(__tc_keep const tc_poly *p, int contract, __tc_keep tc_diags *d)
{
	cg g;
	tc_buf b;
	char *loops = NULL, *text = NULL;
	int used[TC_CG_CEXPR_NHELPERS];

	memset(&g, 0, sizeof(g));
	g.p = p;
	g.f = p ? p->f : NULL;
	g.d = d;
	if (!p || !p->ast) {
		fail(&g, "the model has no AST (tc_poly_ast not run)");
		goto done;
	}
	if (make_names(&g) < 0 || tc_cg_cexpr_init(&g.pr, &host_c, p, g.size, g.tensor) < 0)
		goto done;
	g.pr.contract = contract;
	loops = loops_text(&g);
	if (!loops || g.pr.failed)
		goto done;
	tc_cg_cexpr_helpers_called(&host_c, loops, used);
	tc_buf_init(&b);
	put_header(&g, &b, loops, used);
	put_helpers(&g, &b, used);
	put_function(&g, &b, loops);
	text = tc_buf_take(&b);
	if (!text)
		fail(&g, "out of memory");
done:
	if (g.pr.failed) {
		tc_loc none;
		memset(&none, 0, sizeof(none));
		tc_error(d, none, "cannot print the C code of '%s': %s",
			g.f ? g.f->name : "?", g.pr.why ? g.pr.why : "error");
		tc_free(text);
		text = NULL;
	}
	tc_free(loops);
	if (g.f)
		cg_clear(&g);
	return text;
}
