/* Element types, promotion rules and the builtin function table.
 *
 * Ownership: none to speak of.  Pure functions on values and static
 * tables: nothing here allocates, and every string returned is static. */
#ifndef TC_TYPES_H
#define TC_TYPES_H

#include <stdint.h>

/* Element types of the language, narrowest first within each family. */
typedef enum tc_dtype {
	TC_T_NONE = 0, /* not yet known (untyped output before inference) */
	TC_T_BOOL,     /* stored as one byte, 0 or 1 */
	TC_T_I8,
	TC_T_I16,
	TC_T_I32,
	TC_T_I64,
	TC_T_U8,
	TC_T_U16,
	TC_T_U32,
	TC_T_U64,
	TC_T_F16, /* IEEE binary16, stored as its 16 bits */
	TC_T_F32,
	TC_T_F64,
	TC_T_BF16, /* bfloat16: float32's top 16 bits, stored as those bits;
		    * last so that the numbers of the others stay put */
	TC_T_COUNT
} tc_dtype;

/* The name of t: "float32", "int8", ... ("?" for none); static. */
const char *tc_dtype_name(tc_dtype t);
/* Parse a scalar type name s[0..len) (also "float" and "double");
 * TC_T_NONE if not one. */
tc_dtype tc_dtype_from_name(const char *s, int len);
/* Bytes per element, and bits per element (bool: 8). */
int tc_dtype_size(tc_dtype t);
int tc_dtype_bits(tc_dtype t);
/* Whether t is a floating type (float16, bfloat16, float32, float64). */
int tc_dtype_is_float(tc_dtype t);
/* Whether t is a 16-bit float (float16 or bfloat16): stored in 16 bits,
 * each operation computed in float32 and rounded back, reductions
 * accumulated in float32 (docs/language.md, 6.1 and 6.8). */
int tc_dtype_is_half(tc_dtype t);
int tc_dtype_is_int(tc_dtype t); /* signed or unsigned integer, not bool */
int tc_dtype_is_signed(tc_dtype t); /* signed integers */
int tc_dtype_is_unsigned(tc_dtype t); /* unsigned integers */

/* The type of a binary arithmetic operation on a and b (C-like promotion,
 * see docs/language.md).  a_weak/b_weak mark untyped literals, which take the
 * other operand's type within the same family. */
tc_dtype tc_dtype_promote(tc_dtype a, int a_weak, tc_dtype b, int b_weak);
/* Whether a value of type from may be stored into to without a cast. */
int tc_dtype_implicit_ok(tc_dtype from, int from_weak, tc_dtype to);

/* Builtin functions: the CUDA math library's scalar functions with fixed
 * arity, plus min and max (keywords).  Arguments are converted to the
 * result type; integer-only arguments (the n of jn/yn, the exponent of ldexp)
 * are int32. */
typedef enum tc_builtin_kind {
	TC_BK_FLOAT, /* float result; float args promoted together */
	TC_BK_INT_RESULT, /* ilogb: float args, int32 result */
	TC_BK_INT_FIRST, /* jn, yn: (int32 n, float x) */
	TC_BK_INT_SECOND, /* ldexp, scalbn: (float x, int32 n) */
	TC_BK_ANY, /* min, max: any numeric types, promoted */
} tc_builtin_kind;

/* The builtin table: X(ID, name, arity, kind).  All but min and max are CUDA
 * math functions; the CPU backends lower them to libm or LLVM intrinsics. */
#define TC_BUILTINS(X) \
	X(ACOS, acos, 1, TC_BK_FLOAT) \
	X(ACOSH, acosh, 1, TC_BK_FLOAT) \
	X(ASIN, asin, 1, TC_BK_FLOAT) \
	X(ASINH, asinh, 1, TC_BK_FLOAT) \
	X(ATAN, atan, 1, TC_BK_FLOAT) \
	X(ATANH, atanh, 1, TC_BK_FLOAT) \
	X(CBRT, cbrt, 1, TC_BK_FLOAT) \
	X(CEIL, ceil, 1, TC_BK_FLOAT) \
	X(COS, cos, 1, TC_BK_FLOAT) \
	X(COSH, cosh, 1, TC_BK_FLOAT) \
	X(COSPI, cospi, 1, TC_BK_FLOAT) \
	X(ERF, erf, 1, TC_BK_FLOAT) \
	X(ERFC, erfc, 1, TC_BK_FLOAT) \
	X(ERFCINV, erfcinv, 1, TC_BK_FLOAT) \
	X(ERFINV, erfinv, 1, TC_BK_FLOAT) \
	X(EXP, exp, 1, TC_BK_FLOAT) \
	X(EXP10, exp10, 1, TC_BK_FLOAT) \
	X(EXP2, exp2, 1, TC_BK_FLOAT) \
	X(EXPM1, expm1, 1, TC_BK_FLOAT) \
	X(FABS, fabs, 1, TC_BK_FLOAT) \
	X(FLOOR, floor, 1, TC_BK_FLOAT) \
	X(J0, j0, 1, TC_BK_FLOAT) \
	X(J1, j1, 1, TC_BK_FLOAT) \
	X(LGAMMA, lgamma, 1, TC_BK_FLOAT) \
	X(LOG, log, 1, TC_BK_FLOAT) \
	X(LOG10, log10, 1, TC_BK_FLOAT) \
	X(LOG1P, log1p, 1, TC_BK_FLOAT) \
	X(LOG2, log2, 1, TC_BK_FLOAT) \
	X(LOGB, logb, 1, TC_BK_FLOAT) \
	X(NEARBYINT, nearbyint, 1, TC_BK_FLOAT) \
	X(NORMCDF, normcdf, 1, TC_BK_FLOAT) \
	X(NORMCDFINV, normcdfinv, 1, TC_BK_FLOAT) \
	X(RCBRT, rcbrt, 1, TC_BK_FLOAT) \
	X(RINT, rint, 1, TC_BK_FLOAT) \
	X(ROUND, round, 1, TC_BK_FLOAT) \
	X(RSQRT, rsqrt, 1, TC_BK_FLOAT) \
	X(SIN, sin, 1, TC_BK_FLOAT) \
	X(SINH, sinh, 1, TC_BK_FLOAT) \
	X(SINPI, sinpi, 1, TC_BK_FLOAT) \
	X(SQRT, sqrt, 1, TC_BK_FLOAT) \
	X(TAN, tan, 1, TC_BK_FLOAT) \
	X(TANH, tanh, 1, TC_BK_FLOAT) \
	X(TGAMMA, tgamma, 1, TC_BK_FLOAT) \
	X(TRUNC, trunc, 1, TC_BK_FLOAT) \
	X(Y0, y0, 1, TC_BK_FLOAT) \
	X(Y1, y1, 1, TC_BK_FLOAT) \
	X(ATAN2, atan2, 2, TC_BK_FLOAT) \
	X(COPYSIGN, copysign, 2, TC_BK_FLOAT) \
	X(FDIM, fdim, 2, TC_BK_FLOAT) \
	X(FMAX, fmax, 2, TC_BK_FLOAT) \
	X(FMIN, fmin, 2, TC_BK_FLOAT) \
	X(FMOD, fmod, 2, TC_BK_FLOAT) \
	X(HYPOT, hypot, 2, TC_BK_FLOAT) \
	X(NEXTAFTER, nextafter, 2, TC_BK_FLOAT) \
	X(POW, pow, 2, TC_BK_FLOAT) \
	X(REMAINDER, remainder, 2, TC_BK_FLOAT) \
	X(RHYPOT, rhypot, 2, TC_BK_FLOAT) \
	X(FMA, fma, 3, TC_BK_FLOAT) \
	X(NORM3D, norm3d, 3, TC_BK_FLOAT) \
	X(RNORM3D, rnorm3d, 3, TC_BK_FLOAT) \
	X(ILOGB, ilogb, 1, TC_BK_INT_RESULT) \
	X(JN, jn, 2, TC_BK_INT_FIRST) \
	X(YN, yn, 2, TC_BK_INT_FIRST) \
	X(LDEXP, ldexp, 2, TC_BK_INT_SECOND) \
	X(MIN, min, 2, TC_BK_ANY) \
	X(MAX, max, 2, TC_BK_ANY)

/* Builtin ids: TC_BI_EXP, TC_BI_MIN, ... in table order. */
typedef enum tc_builtin_id {
#define TC_BI_ENUM(id, name, arity, kind) TC_BI_##id,
	TC_BUILTINS(TC_BI_ENUM)
#undef TC_BI_ENUM
	TC_BI_COUNT
} tc_builtin_id;

/* A row of the builtin table: the name (static), the number of arguments
 * and how their types are treated. */
typedef struct tc_builtin {
	const char *name;
	int arity;
	tc_builtin_kind kind;
} tc_builtin;

/* The builtin table, indexed by tc_builtin_id, tc_nbuiltins rows. */
extern const tc_builtin tc_builtins[];
extern const int tc_nbuiltins;
/* Index of the builtin named name[0..len), or -1. */
int tc_builtin_lookup(const char *name, int len);

/* The name of the language builtin pad(e, v) (docs/language.md, 6.8): a
 * builtin like those of the table for naming (no tensor, size, index or
 * let may be called so), but no function: sema and lowering treat it
 * apart (it tests the reads of e), so it has no row in TC_BUILTINS and no
 * code generator sees it. */
#define TC_PAD_NAME "pad"
/* Whether name[0..len) is pad. */
int tc_builtin_is_pad(const char *name, int len);
/* Whether name[0..len) is reserved for a builtin: a row of the table or
 * pad. */
int tc_builtin_reserved(const char *name, int len);

#endif
