/* Values of the LLVM back end: the code-generation state's helpers for
 * types, constants, calls, conversions, integer division, isl AST
 * expressions, tensor accesses (addresses, alias scopes, row buffers),
 * run-time checks, IR expressions, builtins, reductions and statement
 * bodies.  Each function emits at g->B, in the function being generated.
 *
 * It knows the code-generation state (struct cg, llvm_internal.h) but not
 * how the AST walk fills it: it reads the iterators in scope, the domain
 * values of the statement and the flags (guarded, ordered) and calls
 * nothing in llvm_loop.c or llvm_jit.c; it knows nothing of the pass
 * pipeline, the JIT or object files.  The two helpers generated code
 * calls by name (tc_cg_builtin_call, tc_cg_half_from_double) are defined
 * in llvm_jit.c, which gives the JIT their addresses.
 *
 * isl expressions are computed in i64 (conditions in i1); their divisions
 * have constant positive divisors, and any other divisor is guarded as the
 * IR's integer divisions are (below).
 *
 * Values follow the reference interpreter (ir/interp.c) bit for bit:
 *   - registers hold the static type: i1 for bool (i8 0/1 in memory), iN
 *     for both signednesses (the operations pick signed or unsigned
 *     forms), half/float/double;
 *   - integer + - * wrap (no nsw/nuw on values); / and % round toward
 *     negative infinity for signed types, are udiv/urem for unsigned ones.
 *     Division by zero is reported as the interpreter reports it (a
 *     run-time check, also when the sizes make the divisor a constant 0)
 *     and gives 0, computing on: the divisor is replaced by 1 through a
 *     select first, so the LLVM division is never undefined behaviour.
 *     x / -1 is computed as -x (wrapping) and x % -1 as 0, so INT_MIN / -1
 *     wraps to INT_MIN, as in the interpreter, and never traps (x86's
 *     idiv raises SIGFPE on it);
 *   - float16 operations extend to float, operate and truncate: float's
 *     24-bit significand is more than 2 * 11 + 2 bits, so + - * / are
 *     correctly rounded (no double-rounding error);
 *   - bfloat16 values are held in float registers (their values are
 *     exactly floats) and stored as the top 16 bits of the float; each
 *     operation computes in float and rounds to nearest even with integer
 *     operations on the bits (bf16_round: add 0x7fff plus the kept lowest
 *     bit, clear the low half; a NaN gets its quiet bit), which vectorise;
 *     from double, a round to odd into float first (bf16_from_double) and
 *     from 64-bit integers a sticky bit beyond 2^53, as ir/half.c does;
 *   - float '%' is a - b * floor(a / b) computed in double and rounded
 *     once to the type, as the interpreter does;
 *   - float to integer conversion is llvm.fpto[su]i.sat (truncation,
 *     saturation, NaN -> 0); integer to float32 is one sitofp/uitofp;
 *     integer to float16 goes through float (exact below 2^24; anything
 *     larger is infinite in half anyway); float64 to float16 calls
 *     tc_cg_half_from_double, the interpreter's own correctly rounded
 *     conversion, so no libgcc helper (__truncdfhf2) is needed;
 *   - comparisons of floats are ordered except != (unordered or not
 *     equal); min/max, fmin/fmax and min=/max= ignore a NaN operand,
 *     and between equal operands (-0 and +0) take the first, the
 *     interpreter's rule for integers (llvm.minnum/maxnum, like C's
 *     fmin/fmax, leave that choice open, so results could differ between
 *     builds);
 *   - && and || short-circuit and ?: evaluates only the chosen branch,
 *     with basic blocks and phis (LLVM if-converts where it is safe).
 *
 * Builtins: LLVM intrinsics where LLVM has one (llvm.sin, llvm.fma,
 * llvm.ldexp, ...), libm for the rest (the float version for float32 where
 * glibc's is accurate; the double version rounded once where it is not, as
 * the Bessel and gamma functions), and tc_cg_builtin_call, a wrapper over
 * the interpreter's tc_interp_builtin, for CUDA-only functions (rsqrt,
 * sinpi, erfinv, normcdf, norm3d, exp10 = pow(10, x), ...) and the ones with
 * integer arguments or results (ilogb, jn, yn): computed in double and
 * rounded once, exactly as the interpreter does.  float16 builtins are
 * computed in double and rounded once (so they match the interpreter too);
 * float32 nextafter and fma are nextafterf and llvm.fma.f32 (exact), and
 * float16 nextafter is built from the bits like the interpreter's. */

#include "llvm_internal.h"

#include <llvm-c/Core.h>

#include <isl/ast.h>
#include <isl/id.h>
#include <isl/val.h>

#include <float.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

/* Record the failure (the first only) and return NULL. */
LLVMValueRef tc_cg_llvm_fail(__tc_keep cg *g, const char *what, const char *detail)
{
	if (!g->failed)
		tc_error(g->d, noloc, "LLVM code generation: %s%s", what, detail ? detail : "");
	g->failed = 1;
	return NULL;
}

/* The register type of values of type t. */
static LLVMTypeRef reg_type(cg *g, tc_dtype t)
{
	switch (t) {
	case TC_T_BOOL: return g->i1;
	case TC_T_I8:
	case TC_T_U8: return g->i8;
	case TC_T_I16:
	case TC_T_U16: return g->i16;
	case TC_T_I32:
	case TC_T_U32: return g->i32;
	case TC_T_I64:
	case TC_T_U64: return g->i64;
	case TC_T_F16: return g->f16;
	case TC_T_BF16: /* held as the float of the same value */
	case TC_T_F32: return g->f32;
	case TC_T_F64: return g->f64;
	default: return NULL;
	}
}

/* The memory type of elements of type t (bool is a byte, bfloat16 its 16
 * bits). */
static LLVMTypeRef mem_type(cg *g, tc_dtype t)
{
	return t == TC_T_BOOL ? g->i8 : t == TC_T_BF16 ? g->i16 : reg_type(g, t);
}

/* The i64 constant v. */
LLVMValueRef tc_cg_llvm_i64c(__tc_keep cg *g, int64_t v)
{
	return LLVMConstInt(g->i64, (unsigned long long)v, 1);
}

/* ---- calls ---- */

/* Call intrinsic name (base name, e.g. "llvm.sin") overloaded on types. */
LLVMValueRef tc_cg_llvm_call_intrinsic(__tc_keep cg *g, const char *name,
	__tc_keep LLVMTypeRef *over, int nover, __tc_keep LLVMValueRef *args, int nargs)
{
	unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
	LLVMValueRef f;
	if (!id)
		return tc_cg_llvm_fail(g, "unknown intrinsic ", name);
	f = LLVMGetIntrinsicDeclaration(g->M, id, over, (size_t)nover);
	return LLVMBuildCall2(g->B, LLVMIntrinsicGetType(g->C, id, over, (size_t)nover), f, args,
		(unsigned)nargs, "");
}

/* The enum attribute name = val on function f (none if LLVM does not know
 * the name). */
void tc_cg_llvm_add_fn_attr(__tc_keep cg *g, __tc_keep LLVMValueRef f, const char *name,
	uint64_t val)
{
	unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
	if (kind)
		LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex,
			LLVMCreateEnumAttribute(g->C, kind, val));
}

/* Call the external function name (libm or a helper above).  pure: it
 * reads and writes no memory the kernel can see, so LLVM may move, merge or
 * drop calls.  libm functions count as pure although they may set errno,
 * as clang treats them under -fno-math-errno: generated code never reads
 * errno.  lgamma is not pure: it writes the global signgam. */
static LLVMValueRef call_extern(cg *g, const char *name, LLVMTypeRef ret, LLVMTypeRef *params,
	int n, LLVMValueRef *args, int pure)
{
	LLVMTypeRef ft = LLVMFunctionType(ret, params, (unsigned)n, 0);
	LLVMValueRef f = LLVMGetNamedFunction(g->M, name);
	if (!f) {
		f = LLVMAddFunction(g->M, name, ft);
		tc_cg_llvm_add_fn_attr(g, f, "nounwind", 0);
		tc_cg_llvm_add_fn_attr(g, f, "willreturn", 0);
		if (pure)
			tc_cg_llvm_add_fn_attr(g, f, "memory", 0); /* memory(none) */
	}
	return LLVMBuildCall2(g->B, ft, f, args, (unsigned)n, "");
}

/* ---- conversions ---- */

static LLVMValueRef half_from_double(cg *g, LLVMValueRef v)
{
	LLVMTypeRef dt = g->f64;
	LLVMValueRef bits = call_extern(g, "tc_cg_half_from_double", g->i16, &dt, 1, &v, 1);
	return bits ? LLVMBuildBitCast(g->B, bits, g->f16, "") : NULL;
}

/* Float v rounded to the nearest bfloat16 (ties to even), as a float:
 * ir/half.c's tc_bf16_from_float on the bits. */
static LLVMValueRef bf16_round(cg *g, LLVMValueRef v)
{
	LLVMValueRef u, r, n, nan;
	if (!v)
		return NULL;
	u = LLVMBuildBitCast(g->B, v, g->i32, "");
	r = LLVMBuildAnd(g->B, LLVMBuildLShr(g->B, u, LLVMConstInt(g->i32, 16, 0), ""),
		LLVMConstInt(g->i32, 1, 0), "");
	r = LLVMBuildAdd(g->B, u, LLVMBuildAdd(g->B, r, LLVMConstInt(g->i32, 0x7fff, 0), ""), "");
	n = LLVMBuildOr(g->B, u, LLVMConstInt(g->i32, 0x400000, 0), ""); /* quiet NaN */
	nan = LLVMBuildFCmp(g->B, LLVMRealUNO, v, v, "");
	r = LLVMBuildSelect(g->B, nan, n, r, "");
	r = LLVMBuildAnd(g->B, r, LLVMConstInt(g->i32, 0xffff0000u, 0), "");
	return LLVMBuildBitCast(g->B, r, g->f32, "");
}

/* Double v rounded once to bfloat16 (as a float): to float rounding to
 * odd (the float toward zero, lowest bit set when inexact), then
 * bf16_round; tc_bf16_from_double's steps. */
static LLVMValueRef bf16_from_double(cg *g, LLVMValueRef v)
{
	LLVMTypeRef dt = g->f64;
	LLVMValueRef f, back, inexact, away, u, ad, ab;
	if (!v)
		return NULL;
	f = LLVMBuildFPTrunc(g->B, v, g->f32, "");
	back = LLVMBuildFPExt(g->B, f, g->f64, "");
	inexact = LLVMBuildFCmp(g->B, LLVMRealONE, back, v, ""); /* false for NaN */
	ad = tc_cg_llvm_call_intrinsic(g, "llvm.fabs", &dt, 1, &v, 1);
	ab = tc_cg_llvm_call_intrinsic(g, "llvm.fabs", &dt, 1, &back, 1);
	if (!ad || !ab)
		return NULL;
	away = LLVMBuildFCmp(g->B, LLVMRealOGT, ab, ad, "");
	u = LLVMBuildBitCast(g->B, f, g->i32, "");
	u = LLVMBuildSub(g->B, u, LLVMBuildZExt(g->B, away, g->i32, ""), "");
	u = LLVMBuildOr(g->B, u, LLVMConstInt(g->i32, 1, 0), "");
	f = LLVMBuildSelect(g->B, inexact, LLVMBuildBitCast(g->B, u, g->f32, ""), f, "");
	return bf16_round(g, f);
}

static LLVMValueRef unsigned_to_float(cg *g, LLVMValueRef v, LLVMTypeRef ft);

/* Integer v of type from rounded once to bfloat16 (as a float): through
 * double, exact for 32 bits or fewer; a 64-bit magnitude at or above 2^53
 * keeps its top bits with the others as a sticky bit (ir/half.c). */
static LLVMValueRef bf16_from_int(cg *g, LLVMValueRef v, tc_dtype from)
{
	LLVMValueRef neg, m, big, small, d;
	/* unsigned: no uitofp, which LLVM 19's SLP vectoriser narrows
	 * (unsigned_to_float; uint32(B(i)) of an int16 B converted to
	 * bfloat16 gave 65536 for 2^32 - 5: fuzz_diff seed 20261206 case
	 * 15933) */
	if (tc_dtype_bits(from) < 64)
		return bf16_from_double(g, tc_dtype_is_signed(from) ? LLVMBuildSIToFP(g->B, v, g->f64, "")
								    : unsigned_to_float(g, v, g->f64));
	neg = tc_dtype_is_signed(from) ? LLVMBuildICmp(g->B, LLVMIntSLT, v, tc_cg_llvm_i64c(g, 0), "")
				       : LLVMConstInt(g->i1, 0, 0);
	m = LLVMBuildSelect(g->B, neg, LLVMBuildNeg(g->B, v, ""), v, "");
	big = LLVMBuildICmp(g->B, LLVMIntUGE, m, tc_cg_llvm_i64c(g, INT64_C(1) << 53), "");
	small = LLVMBuildOr(g->B, LLVMBuildLShr(g->B, m, tc_cg_llvm_i64c(g, 11), ""),
		LLVMBuildZExt(g->B, LLVMBuildICmp(g->B, LLVMIntNE,
			LLVMBuildAnd(g->B, m, tc_cg_llvm_i64c(g, 0x7ff), ""), tc_cg_llvm_i64c(g, 0), ""),
			g->i64, ""), "");
	/* below 2^53 either way: sitofp is exact (and no uitofp, above) */
	d = LLVMBuildSIToFP(g->B, LLVMBuildSelect(g->B, big, small, m, ""), g->f64, "");
	d = LLVMBuildFMul(g->B, d, LLVMBuildSelect(g->B, big, LLVMConstReal(g->f64, 2048.0),
		LLVMConstReal(g->f64, 1.0), ""), "");
	d = LLVMBuildSelect(g->B, neg, LLVMBuildFNeg(g->B, d, ""), d, "");
	return bf16_from_double(g, d);
}

/* A double computed exactly or by a builtin, rounded once to float type t. */
static LLVMValueRef round_double(cg *g, LLVMValueRef v, tc_dtype t)
{
	if (!v)
		return NULL;
	if (t == TC_T_F32)
		return LLVMBuildFPTrunc(g->B, v, g->f32, "");
	if (t == TC_T_F16)
		return half_from_double(g, v);
	if (t == TC_T_BF16)
		return bf16_from_double(g, v);
	return v;
}

static LLVMValueRef to_double(cg *g, LLVMValueRef v, tc_dtype t)
{
	return t == TC_T_F64 ? v : LLVMBuildFPExt(g->B, v, g->f64, "");
}

/* The unsigned integer v (i1 to i64) as float type ft, rounded once,
 * without uitofp: LLVM 19's SLP vectoriser narrows uitofp of a sign
 * extension (or of arithmetic on one) to a uitofp of the narrow type:
 * uitofp(sext i16 x to i64) gave 65531 for -5 instead of 2^64 - 5
 * (fuzz_diff seed 4 case 1043), uitofp(sext i8 x to i32) 251 for -5.
 * Below 64 bits, no integer conversion at all: the value zero-extended
 * into the mantissa of 2^52 (the bits 0x4330... | v), less 2^52, is v as
 * a double, exactly, then rounded once to ft.  (Zero extension to i64 and
 * sitofp came back from instcombine as a uitofp of the narrow value, and
 * where it did so before SLP ran, SLP narrowed it: uint32(min(C(i,0), i))
 * of an int8 C, the min narrowed to i8 first, gave 245 for 2^32 - 11,
 * fuzz_diff seed 20261207 case 8964.  A freeze did not stop it:
 * instcombine moved it to the loads.)  At 64
 * bits, sitofp when the sign bit is clear, else the halved value with its
 * lost bit kept as a sticky bit, (v >> 1) | (v & 1), converted and doubled
 * (exact): the rounding is the one of v, as the lost bit lies far below
 * the last place of float64.  x86 without AVX-512 lowers uitofp i64 this
 * way too.  tests/test_codegen.c pins both at vector lengths 1 to 17. */
static LLVMValueRef unsigned_to_float(cg *g, LLVMValueRef v, LLVMTypeRef ft)
{
	LLVMValueRef neg, half, f;
	if (LLVMTypeOf(v) != g->i64) { /* 2^52 + v as a double's bits, less 2^52: see above */
		f = LLVMBuildBitCast(g->B, LLVMBuildOr(g->B, LLVMBuildZExt(g->B, v, g->i64, ""),
			tc_cg_llvm_i64c(g, INT64_C(0x4330000000000000)), ""), g->f64, "");
		f = LLVMBuildFSub(g->B, f, LLVMConstReal(g->f64, 4503599627370496.0), "");
		return ft == g->f64 ? f : LLVMBuildFPTrunc(g->B, f, ft, "");
	}
	neg = LLVMBuildICmp(g->B, LLVMIntSLT, v, tc_cg_llvm_i64c(g, 0), "");
	half = LLVMBuildOr(g->B, LLVMBuildLShr(g->B, v, tc_cg_llvm_i64c(g, 1), ""),
		LLVMBuildAnd(g->B, v, tc_cg_llvm_i64c(g, 1), ""), "");
	f = LLVMBuildSIToFP(g->B, half, ft, "");
	f = LLVMBuildFAdd(g->B, f, f, "");
	return LLVMBuildSelect(g->B, neg, f, LLVMBuildSIToFP(g->B, v, ft, ""), "");
}

/* Convert v from type from to type to (the interpreter's convert()). */
static LLVMValueRef convert(cg *g, LLVMValueRef v, tc_dtype from, tc_dtype to)
{
	LLVMTypeRef tt = reg_type(g, to);
	if (!v || from == to)
		return v;
	if (!tt || !reg_type(g, from))
		return tc_cg_llvm_fail(g, "conversion between unknown types", NULL);
	if (to == TC_T_BOOL) {
		if (tc_dtype_is_float(from)) /* NaN is true, as in C */
			return LLVMBuildFCmp(g->B, LLVMRealUNE, v, LLVMConstReal(reg_type(g, from), 0),
				"");
		return LLVMBuildICmp(g->B, LLVMIntNE, v, LLVMConstInt(reg_type(g, from), 0, 0), "");
	}
	if (to == TC_T_BF16) {
		if (from == TC_T_F64)
			return bf16_from_double(g, v);
		if (from == TC_T_F16)
			return bf16_round(g, LLVMBuildFPExt(g->B, v, g->f32, "")); /* exact, then once */
		if (from == TC_T_F32)
			return bf16_round(g, v);
		return bf16_from_int(g, v, from); /* integers, bool as unsigned */
	}
	if (from == TC_T_BF16 && tc_dtype_is_float(to)) /* v is a float */
		return to == TC_T_F32 ? v : to == TC_T_F64 ? LLVMBuildFPExt(g->B, v, g->f64, "")
							   : LLVMBuildFPTrunc(g->B, v, g->f16, "");
	if (tc_dtype_is_float(to)) {
		if (tc_dtype_is_float(from)) {
			if (tc_dtype_bits(from) < tc_dtype_bits(to))
				return LLVMBuildFPExt(g->B, v, tt, "");
			if (from == TC_T_F64 && to == TC_T_F16)
				return half_from_double(g, v);
			return LLVMBuildFPTrunc(g->B, v, tt, "");
		}
		/* integers (bool as unsigned): one rounding; to float16 through
		 * float, exact wherever the half result is finite */
		if (to == TC_T_F16) {
			v = tc_dtype_is_signed(from) ? LLVMBuildSIToFP(g->B, v, g->f32, "")
						     : unsigned_to_float(g, v, g->f32);
			return LLVMBuildFPTrunc(g->B, v, g->f16, "");
		}
		return tc_dtype_is_signed(from) ? LLVMBuildSIToFP(g->B, v, tt, "")
						: unsigned_to_float(g, v, tt);
	}
	if (tc_dtype_is_float(from)) { /* saturating, NaN -> 0 */
		LLVMTypeRef over[2];
		if (from == TC_T_F16)
			v = LLVMBuildFPExt(g->B, v, g->f32, "");
		over[0] = tt;
		over[1] = LLVMTypeOf(v);
		return tc_cg_llvm_call_intrinsic(g,
			tc_dtype_is_signed(to) ? "llvm.fptosi.sat" : "llvm.fptoui.sat", over, 2, &v, 1);
	}
	/* integer to integer: wrap */
	if (tc_dtype_bits(to) < (from == TC_T_BOOL ? 1 : tc_dtype_bits(from)))
		return LLVMBuildTrunc(g->B, v, tt, "");
	if (LLVMTypeOf(v) == tt)
		return v;
	return tc_dtype_is_signed(from) ? LLVMBuildSExt(g->B, v, tt, "") : LLVMBuildZExt(g->B, v, tt, "");
}

/* ---- integer division ---- */

/* a / b (rem = 0) or a % b (rem = 1) in a's integer type, defined for every
 * b: signed with floor rounding (fl = 1, the IR's) or truncation (fl = 0,
 * isl's exact division), or unsigned.  b == 0 gives 0; signed b == -1 gives
 * -a (wrapping) and 0.  Constant divisors other than 0 and -1 skip the
 * guards. */
static LLVMValueRef int_divmod(cg *g, LLVMValueRef a, LLVMValueRef b, int is_signed, int fl,
	int rem)
{
	LLVMTypeRef t = LLVMTypeOf(a);
	LLVMValueRef zero = LLVMConstInt(t, 0, 0), one = LLVMConstInt(t, 1, 0);
	LLVMValueRef bz = NULL, bm1 = NULL, bad = NULL, bs = b, q, r;
	int known = 0;

	if (LLVMIsAConstantInt(b)) {
		long long v = LLVMConstIntGetSExtValue(b);
		known = v != 0 && (!is_signed || v != -1);
	}
	if (!known) {
		bz = LLVMBuildICmp(g->B, LLVMIntEQ, b, zero, "");
		bad = bz;
		if (is_signed) {
			bm1 = LLVMBuildICmp(g->B, LLVMIntEQ, b, LLVMConstAllOnes(t), "");
			bad = LLVMBuildOr(g->B, bz, bm1, "");
		}
		bs = LLVMBuildSelect(g->B, bad, one, b, "");
	}
	if (!is_signed) {
		q = rem ? LLVMBuildURem(g->B, a, bs, "") : LLVMBuildUDiv(g->B, a, bs, "");
		return known ? q : LLVMBuildSelect(g->B, bad, zero, q, "");
	}
	q = LLVMBuildSDiv(g->B, a, bs, "");
	r = LLVMBuildSRem(g->B, a, bs, "");
	if (fl) { /* r != 0 and r, b of opposite signs: step toward -inf */
		LLVMValueRef fix = LLVMBuildAnd(g->B, LLVMBuildICmp(g->B, LLVMIntNE, r, zero, ""),
			LLVMBuildICmp(g->B, LLVMIntSLT, LLVMBuildXor(g->B, r, bs, ""), zero, ""), "");
		q = LLVMBuildSub(g->B, q, LLVMBuildZExt(g->B, fix, t, ""), "");
		r = LLVMBuildSelect(g->B, fix, LLVMBuildAdd(g->B, r, bs, ""), r, "");
	}
	if (known)
		return rem ? r : q;
	if (rem)
		return LLVMBuildSelect(g->B, bad, zero, r, "");
	q = LLVMBuildSelect(g->B, bz, zero, q, "");
	return LLVMBuildSelect(g->B, bm1, LLVMBuildNeg(g->B, a, ""), q, "");
}

int tc_cg_llvm_size_free(__tc_keep cg *g, int k)
{
	return g->p->free && k >= 0 && k < g->p->f->nparams && g->p->free[k] && g->size &&
		g->size[k];
}

/* Size expression e as an i64 value (extents: no index variables). */
static LLVMValueRef size_value(cg *g, const tc_sexpr *e)
{
	LLVMValueRef a, b;
	if (e->kind == TC_SX_CONST)
		return tc_cg_llvm_i64c(g, e->c);
	if (e->kind == TC_SX_PARAM)
		return tc_cg_llvm_size_free(g, e->id) ? g->size[e->id]
						      : tc_cg_llvm_i64c(g, g->p->params[e->id]);
	if (e->kind == TC_SX_VAR || !(a = size_value(g, e->a)))
		return tc_cg_llvm_fail(g, "an extent that depends on an index", NULL);
	switch (e->kind) {
	case TC_SX_ADD:
		return (b = size_value(g, e->b)) ? LLVMBuildAdd(g->B, a, b, "") : NULL;
	case TC_SX_MUL:
		return LLVMBuildMul(g->B, tc_cg_llvm_i64c(g, e->c), a, "");
	case TC_SX_FLOORDIV:
	case TC_SX_MOD:
		return int_divmod(g, a, tc_cg_llvm_i64c(g, e->c), 1, 1, e->kind == TC_SX_MOD);
	case TC_SX_MIN:
	case TC_SX_MAX:
		if (!(b = size_value(g, e->b)))
			return NULL;
		return LLVMBuildSelect(g->B, LLVMBuildICmp(g->B, LLVMIntSLT, a, b, ""),
			e->kind == TC_SX_MIN ? a : b, e->kind == TC_SX_MIN ? b : a, "");
	default:
		return tc_cg_llvm_fail(g, "unknown size expression", NULL);
	}
}

LLVMValueRef tc_cg_llvm_extent(__tc_keep cg *g, int t, int k)
{
	const tc_sexpr *e = g->p->f->tensors[t].ext[k];
	int i;
	for (i = 0; i < g->p->f->nparams; i++)
		if (tc_cg_llvm_size_free(g, i) && tc_sx_mentions(e, TC_SX_PARAM, i))
			return size_value(g, e);
	return tc_cg_llvm_i64c(g, g->ext[t * TC_MAX_RANK + k]);
}

/* ---- isl AST expressions ---- */

/* v (i1 or i64) as i64. */
LLVMValueRef tc_cg_llvm_as_i64(__tc_keep cg *g, __tc_keep LLVMValueRef v)
{
	if (v && LLVMTypeOf(v) == g->i1)
		return LLVMBuildZExt(g->B, v, g->i64, "");
	return v;
}

/* v (i1 or i64) as i1. */
LLVMValueRef tc_cg_llvm_as_i1(__tc_keep cg *g, __tc_keep LLVMValueRef v)
{
	if (v && LLVMTypeOf(v) != g->i1)
		return LLVMBuildICmp(g->B, LLVMIntNE, v, tc_cg_llvm_i64c(g, 0), "");
	return v;
}

static LLVMValueRef ast_int(cg *g, isl_ast_expr *e)
{
	isl_val *v = isl_ast_expr_get_val(e);
	LLVMValueRef r = NULL;
	if (!v || isl_val_is_int(v) != isl_bool_true || isl_val_cmp_si(v, LONG_MAX) > 0 ||
		isl_val_cmp_si(v, LONG_MIN) < 0)
		tc_cg_llvm_fail(g, "an integer of the AST does not fit in 64 bits", NULL);
	else
		r = tc_cg_llvm_i64c(g, isl_val_get_num_si(v));
	isl_val_free(v);
	return r;
}

static LLVMValueRef ast_id(cg *g, isl_ast_expr *e)
{
	isl_id *id = isl_ast_expr_get_id(e);
	const char *name = id ? isl_id_get_name(id) : NULL;
	LLVMValueRef r = NULL;
	int i, k;

	for (i = g->niters - 1; i >= 0; i--)
		if (g->iters[i].id == id)
			break;
	if (i >= 0) {
		r = LLVMBuildLoad2(g->B, g->i64, g->iters[i].slot, name ? name : "");
	} else if ((k = tc_poly_param_index(g->p, name)) >= 0 && tc_cg_llvm_size_free(g, k)) {
		r = g->size[k];
	} else if (k >= 0 && g->p->params) {
		r = tc_cg_llvm_i64c(g, g->p->params[k]);
	} else {
		tc_cg_llvm_fail(g, "unknown identifier in the AST: ", name ? name : "?");
	}
	isl_id_free(id);
	return r;
}

static LLVMValueRef ast_arg(cg *g, isl_ast_expr *e, int i)
{
	isl_ast_expr *a = isl_ast_expr_op_get_arg(e, i);
	LLVMValueRef r = a ? tc_cg_llvm_ast_expr(g, a)
			   : tc_cg_llvm_fail(g, "malformed AST expression", NULL);
	isl_ast_expr_free(a);
	return r;
}

static LLVMValueRef ast_op(cg *g, isl_ast_expr *e)
{
	enum isl_ast_expr_op_type op = isl_ast_expr_op_get_type(e);
	isl_size n = isl_ast_expr_op_get_n_arg(e);
	LLVMValueRef a, b, c, r;
	int i;

	if (n < 1)
		return tc_cg_llvm_fail(g, "malformed AST expression", NULL);
	switch (op) {
	case isl_ast_expr_op_minus:
		a = tc_cg_llvm_as_i64(g, ast_arg(g, e, 0));
		return a ? LLVMBuildNSWNeg(g->B, a, "") : NULL;
	case isl_ast_expr_op_min:
	case isl_ast_expr_op_max:
		r = tc_cg_llvm_as_i64(g, ast_arg(g, e, 0));
		for (i = 1; i < n && r; i++) {
			b = tc_cg_llvm_as_i64(g, ast_arg(g, e, i));
			if (!b)
				return NULL;
			c = LLVMBuildICmp(g->B, op == isl_ast_expr_op_min ? LLVMIntSLT : LLVMIntSGT, r, b,
				"");
			r = LLVMBuildSelect(g->B, c, r, b, "");
		}
		return r;
	case isl_ast_expr_op_select:
	case isl_ast_expr_op_cond:
		/* both arms are side-effect free and cannot trap: a select */
		if (n != 3)
			return tc_cg_llvm_fail(g, "malformed AST conditional", NULL);
		c = tc_cg_llvm_as_i1(g, ast_arg(g, e, 0));
		a = ast_arg(g, e, 1);
		b = ast_arg(g, e, 2);
		if (!c || !a || !b)
			return NULL;
		if (LLVMTypeOf(a) != LLVMTypeOf(b)) {
			a = tc_cg_llvm_as_i64(g, a);
			b = tc_cg_llvm_as_i64(g, b);
		}
		return LLVMBuildSelect(g->B, c, a, b, "");
	default:
		break;
	}
	if (n != 2)
		return tc_cg_llvm_fail(g, "unsupported AST operation", NULL);
	a = ast_arg(g, e, 0);
	b = ast_arg(g, e, 1);
	if (!a || !b)
		return NULL;
	switch (op) {
	case isl_ast_expr_op_and:
	case isl_ast_expr_op_and_then: /* no side effects: no need to branch */
		return LLVMBuildAnd(g->B, tc_cg_llvm_as_i1(g, a), tc_cg_llvm_as_i1(g, b), "");
	case isl_ast_expr_op_or:
	case isl_ast_expr_op_or_else:
		return LLVMBuildOr(g->B, tc_cg_llvm_as_i1(g, a), tc_cg_llvm_as_i1(g, b), "");
	default:
		break;
	}
	a = tc_cg_llvm_as_i64(g, a);
	b = tc_cg_llvm_as_i64(g, b);
	switch (op) {
	case isl_ast_expr_op_add: return LLVMBuildNSWAdd(g->B, a, b, "");
	case isl_ast_expr_op_sub: return LLVMBuildNSWSub(g->B, a, b, "");
	case isl_ast_expr_op_mul: return LLVMBuildNSWMul(g->B, a, b, "");
	/* isl's exact division, by a positive constant a plain sdiv: not
	 * `sdiv exact`, which LLVM 19 miscompiles when the AST computes the
	 * divisibility test c % d == 0 that guards the division.  DivRemPairs
	 * hoists the guarded `sdiv exact` next to the `srem` of the test
	 * keeping its flag, and the DAG combiner then derives the srem from
	 * the exact quotient (c - (c /exact d) * d, always 0): the guard
	 * held for every c, and a collapsed loop's diagonal statement
	 * (T(i) = O(i, i, i) under c0 % 21 == 0) stored out of bounds
	 * (llvm/llvm-project#145360, fixed in LLVM 21; tests/fuzz/regress/
	 * exact-division-guard.tc).  Where the division is exact the
	 * quotient is the same. */
	case isl_ast_expr_op_div:
		if (LLVMIsAConstantInt(b) && LLVMConstIntGetSExtValue(b) > 0)
			return LLVMBuildSDiv(g->B, a, b, "");
		return int_divmod(g, a, b, 1, 0, 0);
	case isl_ast_expr_op_fdiv_q: return int_divmod(g, a, b, 1, 1, 0);
	/* isl's pdiv: a dividend known not to be negative.  By a positive
	 * constant, unsigned, so that a collapsed loop's (c / 54) * 54 +
	 * c % 54 folds back to c (polyhedral/collapse.c): LLVM does not
	 * fold the signed pair (an SGD update's 128 x 10 rows were stored
	 * by scatters) */
	case isl_ast_expr_op_pdiv_q:
	case isl_ast_expr_op_pdiv_r:
		return int_divmod(g, a, b, !(LLVMIsAConstantInt(b) &&
			LLVMConstIntGetSExtValue(b) > 0), 0, op == isl_ast_expr_op_pdiv_r);
	case isl_ast_expr_op_zdiv_r: return int_divmod(g, a, b, 1, 0, 1);
	case isl_ast_expr_op_eq: return LLVMBuildICmp(g->B, LLVMIntEQ, a, b, "");
	case isl_ast_expr_op_le: return LLVMBuildICmp(g->B, LLVMIntSLE, a, b, "");
	case isl_ast_expr_op_lt: return LLVMBuildICmp(g->B, LLVMIntSLT, a, b, "");
	case isl_ast_expr_op_ge: return LLVMBuildICmp(g->B, LLVMIntSGE, a, b, "");
	case isl_ast_expr_op_gt: return LLVMBuildICmp(g->B, LLVMIntSGT, a, b, "");
	default: return tc_cg_llvm_fail(g, "unsupported AST operation", NULL);
	}
}

/* An isl AST expression: i64, or i1 for conditions. */
LLVMValueRef tc_cg_llvm_ast_expr(__tc_keep cg *g, __tc_keep isl_ast_expr *e)
{
	if (g->failed)
		return NULL;
	switch (isl_ast_expr_get_type(e)) {
	case isl_ast_expr_int: return ast_int(g, e);
	case isl_ast_expr_id: return ast_id(g, e);
	case isl_ast_expr_op: return ast_op(g, e);
	default: return tc_cg_llvm_fail(g, "malformed AST expression", NULL);
	}
}

/* ---- tensor accesses ---- */

/* How many leading subscripts of tensor t select a row of its row buffer
 * (polyhedral/contract.c), or 0: t is kept whole. */
int tc_cg_llvm_row_dims(__tc_keep cg *g, int t)
{
	return g->p->rowbuf ? g->p->rowbuf[t] : 0;
}

/* The row buffer of tensor t (j leading subscripts dropped): an array on
 * the stack of the function being generated, allocated in its entry block,
 * so that each outlined parallel loop's activation, one per thread and
 * chunk, has its own. */
LLVMValueRef tc_cg_llvm_row_buffer(__tc_keep cg *g, int t, int j)
{
	const tc_ir_tensor *tt = &g->p->f->tensors[t];
	uint64_t n = 1;
	int k;
	LLVMValueRef a;
	for (k = j; k < tt->ndim; k++)
		n *= (uint64_t)g->ext[t * TC_MAX_RANK + k];
	a = LLVMBuildAlloca(g->A, LLVMArrayType2(mem_type(g, tt->dtype), n), tt->name);
	LLVMSetAlignment(a, 64);
	return a;
}

/* The address of element idx[0..n) (i64 values) of tensor t: one GEP over
 * the tensor as a nested array type, one index per dimension.  Alias
 * analysis then sees rows (c0 + 1, j) and (c0 + 2, j) as constant offsets
 * apart; a flattened index, which instcombine turns into or-disjoint
 * chains, hides that, and the accumulators of a register tile could not
 * stay in registers. */
/* The address of element idx[0 .. n) of tensor t laid out in panels of
 * P columns (tc_ir_tensor.panel): ((c / P) * R + row) * P + c % P, c the
 * last subscript (never negative: subscripts are in bounds), row the
 * row-major offset of the others and R the product of their extents (run-
 * time values where a size is free). */
static LLVMValueRef panel_element(cg *g, int t, LLVMValueRef *idx, int n)
{
	const tc_ir_tensor *tt = &g->p->f->tensors[t];
	LLVMValueRef w = tc_cg_llvm_i64c(g, tt->panel), row = idx[0], rows, off;
	int k;
	rows = tc_cg_llvm_extent(g, t, 0);
	for (k = 1; k < n - 1 && rows; k++) {
		LLVMValueRef e = tc_cg_llvm_extent(g, t, k);
		if (!e)
			return NULL;
		row = LLVMBuildNSWAdd(g->B, LLVMBuildNSWMul(g->B, row, e, ""), idx[k], "");
		rows = LLVMBuildNSWMul(g->B, rows, e, "");
	}
	if (!rows)
		return NULL;
	off = LLVMBuildNSWAdd(g->B, LLVMBuildNSWMul(g->B, LLVMBuildUDiv(g->B, idx[n - 1], w, ""),
		rows, ""), row, "");
	off = LLVMBuildNSWAdd(g->B, LLVMBuildNSWMul(g->B, off, w, ""),
		LLVMBuildURem(g->B, idx[n - 1], w, ""), "");
	return LLVMBuildInBoundsGEP2(g->B, mem_type(g, tt->dtype), g->base[t], &off, 1, "");
}

/* v without the integer extensions and truncations around it. */
static LLVMValueRef uncast(LLVMValueRef v)
{
	while (LLVMIsAInstruction(v) && (LLVMGetInstructionOpcode(v) == LLVMSExt ||
		LLVMGetInstructionOpcode(v) == LLVMZExt || LLVMGetInstructionOpcode(v) == LLVMTrunc))
		v = LLVMGetOperand(v, 0);
	return v;
}

/* Whether a and b are one value: the same, or two loads of one loop
 * iterator's slot in one block (each use of an iterator loads it; the
 * code of a statement's subscripts stores no iterator). */
static int same_value(LLVMValueRef a, LLVMValueRef b)
{
	return a == b || (LLVMIsAInstruction(a) && LLVMIsAInstruction(b) &&
		LLVMGetInstructionOpcode(a) == LLVMLoad && LLVMGetInstructionOpcode(b) == LLVMLoad &&
		LLVMGetOperand(a, 0) == LLVMGetOperand(b, 0) && LLVMIsAAllocaInst(LLVMGetOperand(a, 0)) &&
		LLVMGetInstructionParent(a) == LLVMGetInstructionParent(b));
}

/* Whether subscripts q, r are x / d and x % d (unsigned, d a constant)
 * of one x: a row and a column of a loop over whole rows of d elements
 * (polyhedral/collapse.c); *x is x. */
static int row_and_column(LLVMValueRef q, LLVMValueRef r, int64_t d, LLVMValueRef *x)
{
	LLVMValueRef dq, dr;
	q = uncast(q); /* subscripts are int32 (ir/ir.h), in bounds */
	r = uncast(r);
	if (!LLVMIsAInstruction(q) || !LLVMIsAInstruction(r) ||
		LLVMGetInstructionOpcode(q) != LLVMUDiv || LLVMGetInstructionOpcode(r) != LLVMURem ||
		!same_value(LLVMGetOperand(q, 0), LLVMGetOperand(r, 0)))
		return 0;
	dq = LLVMGetOperand(q, 1);
	dr = LLVMGetOperand(r, 1);
	if (!LLVMIsAConstantInt(dq) || !LLVMIsAConstantInt(dr) ||
		LLVMConstIntGetSExtValue(dq) != d || LLVMConstIntGetSExtValue(dr) != d)
		return 0;
	*x = LLVMGetOperand(q, 0);
	return 1;
}

static LLVMValueRef element(cg *g, int t, LLVMValueRef *idx, int n)
{
	const tc_ir_tensor *tt = &g->p->f->tensors[t];
	LLVMTypeRef ty = mem_type(g, tt->dtype);
	int k, j = tc_cg_llvm_row_dims(g, t); /* a row buffer: its row's subscripts only */
	if (n != tt->ndim)
		return tc_cg_llvm_fail(g, "wrong number of subscripts for ", tt->name);
	for (k = 0; k < n; k++)
		if (!idx[k])
			return NULL;
	/* a rank-0 tensor (or a row buffer of one element) is its pointer:
	 * a GEP without indices is valid IR, but LLVM 19's fast path for
	 * "getelementptr i8" (GEPOperator::accumulateConstantOffset) reads
	 * the first index of the empty list, so SimplifyCFG crashed the host
	 * when it tried to speculate such a load of an int8, uint8 or bool
	 * rank-0 temporary out of a branch of ?: */
	if (n == j)
		return g->base[t];
	if (tt->panel > 0 && j == 0) /* ir/ir.h: panels of the last dimension */
		return panel_element(g, t, idx, n);
	for (k = n - 1; k >= j + 1; k--)
		ty = LLVMArrayType2(ty, (uint64_t)g->ext[t * TC_MAX_RANK + k]);
	if (n - j >= 2) {
		/* element (x / d, x % d) of rows of d as (0, x): the same
		 * address, and one the vectoriser sees step by one element
		 * as x does (it took (x / d, x % d) for a gather) */
		LLVMValueRef x, flat[TC_MAX_RANK];
		if (row_and_column(idx[n - 2], idx[n - 1], g->ext[t * TC_MAX_RANK + n - 1], &x)) {
			memcpy(flat, idx + j, (size_t)(n - j) * sizeof(LLVMValueRef));
			flat[n - j - 2] = tc_cg_llvm_i64c(g, 0);
			flat[n - j - 1] = tc_cg_llvm_as_i64(g, x);
			return LLVMBuildInBoundsGEP2(g->B, ty, g->base[t], flat, (unsigned)(n - j), "");
		}
	}
	return LLVMBuildInBoundsGEP2(g->B, ty, g->base[t], idx + j, (unsigned)(n - j), "");
}

/* Tensors never overlap (tc_kernel_run refuses outputs that overlap another
 * tensor; the workspace gives each intermediate its own region), so every
 * access says which tensor it touches: scoped noalias metadata, one scope
 * per tensor.  Without it LLVM must assume a store to C may change A or B,
 * and can neither keep C's accumulators in registers across a reduction
 * loop nor vectorise without run-time overlap checks. */
void tc_cg_llvm_alias_scopes(__tc_keep cg *g)
{
	const tc_ir_func *f = g->p->f;
	LLVMMetadataRef dom, *scopes, one;
	int t, u, n;
	char name[64];
	g->md_scope = LLVMGetMDKindIDInContext(g->C, "alias.scope", 11);
	g->md_noalias = LLVMGetMDKindIDInContext(g->C, "noalias", 7);
	/* scopes[0..n): one per tensor; scopes[n..2n): scratch for the lists */
	scopes = tc_calloc(2 * (size_t)f->ntensors + 1, sizeof(LLVMMetadataRef));
	if (!scopes) {
		tc_cg_llvm_fail(g, "out of memory", NULL);
		return;
	}
	one = LLVMMDStringInContext2(g->C, "tcomp tensors", 13);
	dom = LLVMMDNodeInContext2(g->C, &one, 1);
	for (t = 0; t < f->ntensors; t++) {
		LLVMMetadataRef ops[2];
		snprintf(name, sizeof(name), "tcomp tensor %d", t);
		ops[0] = LLVMMDStringInContext2(g->C, name, strlen(name));
		ops[1] = dom;
		scopes[t] = LLVMMDNodeInContext2(g->C, ops, 2);
	}
	for (t = 0; t < f->ntensors; t++) {
		LLVMMetadataRef *list = scopes + f->ntensors;
		g->scope[t] = LLVMMetadataAsValue(g->C, LLVMMDNodeInContext2(g->C, &scopes[t], 1));
		for (u = n = 0; u < f->ntensors; u++)
			if (u != t)
				list[n++] = scopes[u];
		g->noalias[t] = LLVMMetadataAsValue(g->C, LLVMMDNodeInContext2(g->C, list, (size_t)n));
	}
	tc_free(scopes);
}

static void tag_access(cg *g, int t, LLVMValueRef inst)
{
	if (!g->scope || !g->scope[t])
		return;
	LLVMSetMetadata(inst, g->md_scope, g->scope[t]);
	LLVMSetMetadata(inst, g->md_noalias, g->noalias[t]);
}

static LLVMValueRef load(cg *g, int t, LLVMValueRef addr)
{
	tc_dtype dt = g->p->f->tensors[t].dtype;
	LLVMValueRef v;
	if (!addr)
		return NULL;
	v = LLVMBuildLoad2(g->B, mem_type(g, dt), addr, "");
	tag_access(g, t, v);
	if (dt == TC_T_BOOL)
		v = LLVMBuildICmp(g->B, LLVMIntNE, v, LLVMConstInt(g->i8, 0, 0), "");
	if (dt == TC_T_BF16) /* the top 16 bits of a float */
		v = LLVMBuildBitCast(g->B, LLVMBuildShl(g->B, LLVMBuildZExt(g->B, v, g->i32, ""),
			LLVMConstInt(g->i32, 16, 0), ""), g->f32, "");
	return v;
}

static void store(cg *g, int t, LLVMValueRef addr, LLVMValueRef v)
{
	if (!addr || !v)
		return;
	if (g->p->f->tensors[t].dtype == TC_T_BOOL)
		v = LLVMBuildZExt(g->B, v, g->i8, "");
	if (g->p->f->tensors[t].dtype == TC_T_BF16) /* a bfloat16 value: its top half */
		v = LLVMBuildTrunc(g->B, LLVMBuildLShr(g->B, LLVMBuildBitCast(g->B, v, g->i32, ""),
			LLVMConstInt(g->i32, 16, 0), ""), g->i16, "");
	tag_access(g, t, LLVMBuildStore(g->B, v, addr));
}

/* ---- run-time checks ---- */

/* A new check site: its number, or -1 (failure recorded). */
static int add_site(cg *g, tc_cg_site site)
{
	if (g->nsites == g->capsites) {
		int cap = g->capsites ? 2 * g->capsites : 8;
		tc_cg_site *v = tc_realloc(g->sites, (size_t)cap * sizeof(*v));
		if (!v) {
			tc_cg_llvm_fail(g, "out of memory", NULL);
			return -1;
		}
		g->sites = v;
		g->capsites = cap;
	}
	g->sites[g->nsites] = site;
	return g->nsites++;
}

/* If bad: record the site (unless an error is recorded already: an atomic
 * compare-and-swap on err[0]) with the value v; code goes on after the
 * check. */
static void check(cg *g, LLVMValueRef bad, int site, LLVMValueRef v)
{
	LLVMBasicBlockRef fail_b = tc_cg_llvm_new_block(g, "check.fail");
	LLVMBasicBlockRef rec = tc_cg_llvm_new_block(g, "check.record");
	LLVMBasicBlockRef cont = tc_cg_llvm_new_block(g, "check.ok");
	LLVMValueRef one = tc_cg_llvm_i64c(g, 1), first, slot1;
	LLVMBuildCondBr(g->B, bad, fail_b, cont);
	LLVMPositionBuilderAtEnd(g->B, fail_b);
	/* the first failure wins, also between the threads of a parallel loop */
	first = LLVMBuildAtomicCmpXchg(g->B, g->err, tc_cg_llvm_i64c(g, 0),
		tc_cg_llvm_i64c(g, site + 1), LLVMAtomicOrderingSequentiallyConsistent,
		LLVMAtomicOrderingMonotonic, 0);
	LLVMBuildCondBr(g->B, LLVMBuildExtractValue(g->B, first, 1, ""), rec, cont);
	LLVMPositionBuilderAtEnd(g->B, rec);
	slot1 = LLVMBuildInBoundsGEP2(g->B, g->i64, g->err, &one, 1, "");
	LLVMBuildStore(g->B, v, slot1);
	LLVMBuildBr(g->B, cont);
	LLVMPositionBuilderAtEnd(g->B, cont);
}

/* The check of integer division or modulo e by b: a zero divisor is
 * reported where the code runs, as the interpreter reports it when it
 * evaluates e.  A constant divisor other than 0 needs none; a constant 0
 * (a size expression such as N - 5 once the sizes are known) is reported
 * every time the code reaches it, so a division the kernel never evaluates
 * (under the other branch of ?:, in a statement with no instances at these
 * sizes) is no error, as in the interpreter.  0 on failure. */
static int div_check(cg *g, const tc_ir_expr *e, LLVMValueRef b)
{
	tc_cg_site site = {TC_CG_CHECK_DIV, e->loc, -1, -1, e->op == TC_OP_DIV ? '/' : '%'};
	LLVMValueRef bad;
	int n;
	if (LLVMIsAConstantInt(b) && LLVMConstIntGetZExtValue(b) != 0)
		return 1;
	if ((n = add_site(g, site)) < 0)
		return 0;
	bad = LLVMBuildICmp(g->B, LLVMIntEQ, b, LLVMConstInt(LLVMTypeOf(b), 0, 0), "");
	check(g, bad, n, tc_cg_llvm_i64c(g, 0));
	return 1;
}

/* ---- IR expressions ---- */

static LLVMValueRef expr(cg *g, const tc_ir_expr *e);

static LLVMValueRef constant(cg *g, tc_dtype t, int64_t i, double f)
{
	LLVMTypeRef ty = reg_type(g, t);
	if (!ty)
		return tc_cg_llvm_fail(g, "constant of unknown type", NULL);
	if (tc_dtype_is_float(t))
		return LLVMConstReal(ty, f);
	if (t == TC_T_BOOL)
		return LLVMConstInt(ty, i != 0, 0);
	return LLVMConstInt(ty, (unsigned long long)i, 0);
}

/* a op b on floats of type t (op: ADD SUB MUL DIV MOD). */
static LLVMValueRef float_arith(cg *g, tc_ir_op op, tc_dtype t, LLVMValueRef a, LLVMValueRef b)
{
	LLVMValueRef r;
	if (op == TC_OP_MOD) { /* a - b * floor(a / b) in double, one rounding */
		LLVMValueRef q;
		LLVMTypeRef dt = g->f64;
		a = to_double(g, a, t);
		b = to_double(g, b, t);
		q = LLVMBuildFDiv(g->B, a, b, "");
		q = tc_cg_llvm_call_intrinsic(g, "llvm.floor", &dt, 1, &q, 1);
		if (!q)
			return NULL;
		r = LLVMBuildFSub(g->B, a, LLVMBuildFMul(g->B, b, q, ""), "");
		return round_double(g, r, t);
	}
	if (t == TC_T_F16) { /* in float, correctly rounded back */
		a = LLVMBuildFPExt(g->B, a, g->f32, "");
		b = LLVMBuildFPExt(g->B, b, g->f32, "");
	}
	switch (op) {
	case TC_OP_ADD: r = LLVMBuildFAdd(g->B, a, b, ""); break;
	case TC_OP_SUB: r = LLVMBuildFSub(g->B, a, b, ""); break;
	case TC_OP_MUL: r = LLVMBuildFMul(g->B, a, b, ""); break;
	default: r = LLVMBuildFDiv(g->B, a, b, ""); break;
	}
	/* fastmath: let LLVM fuse multiplies and adds wherever it likes,
	 * reorder sums and products (vectorised reductions) and divide by a
	 * reciprocal (a / b as a * (1 / b), 1 / b hoisted out of loops);
	 * float16 keeps its exact steps.  (contract alone fuses by the IR's
	 * rule only: fused() below.) */
	if (g->opts.fastmath && !tc_dtype_is_half(t) && LLVMIsAInstruction(r))
		LLVMSetFastMathFlags(r, (op != TC_OP_DIV ? LLVMFastMathAllowContract : 0) |
			LLVMFastMathAllowReassoc | LLVMFastMathNoSignedZeros |
			(op == TC_OP_DIV ? LLVMFastMathAllowReciprocal : 0));
	if (t == TC_T_BF16) /* in float (exact operands), correctly rounded back */
		return bf16_round(g, r);
	return t == TC_T_F16 ? LLVMBuildFPTrunc(g->B, r, g->f16, "") : r;
}

/* fma(x, y, z) in type t (float32 or float64), rounded once: the contract
 * option's rule (tc_ir_fma_of).  llvm.fmuladd is one FMA instruction on a
 * CPU that has them (LLVM fuses it whenever that is faster, which it is
 * on every CPU with FMA), and the loop vectoriser knows it as a
 * reduction; elsewhere llvm.fma, a library call with the same bits.
 * reassoc: the accumulating call of a sum reduction that may run as
 * vector partial sums (vecreduce).  NULL stays NULL. */
static LLVMValueRef fused(cg *g, tc_dtype t, LLVMValueRef x, LLVMValueRef y, LLVMValueRef z,
	int reassoc)
{
	LLVMTypeRef ty = reg_type(g, t);
	LLVMValueRef args[3] = {x, y, z}, r;
	if (!x || !y || !z)
		return NULL;
	r = tc_cg_llvm_call_intrinsic(g, !g->h || g->h->fma ? "llvm.fmuladd" : "llvm.fma", &ty, 1,
		args, 3);
	if (r && (reassoc || g->opts.fastmath))
		LLVMSetFastMathFlags(r, LLVMFastMathAllowReassoc |
			(g->opts.fastmath ? LLVMFastMathAllowContract | LLVMFastMathNoSignedZeros : 0));
	return r;
}

static LLVMValueRef arith(cg *g, tc_ir_op op, tc_dtype t, LLVMValueRef a, LLVMValueRef b)
{
	if (!a || !b)
		return NULL;
	if (tc_dtype_is_float(t))
		return float_arith(g, op, t, a, b);
	switch (op) {
	case TC_OP_ADD: return LLVMBuildAdd(g->B, a, b, "");
	case TC_OP_SUB: return LLVMBuildSub(g->B, a, b, "");
	case TC_OP_MUL: return LLVMBuildMul(g->B, a, b, "");
	case TC_OP_DIV:
	case TC_OP_MOD:
		return int_divmod(g, a, b, tc_dtype_is_signed(t), 1, op == TC_OP_MOD);
	default: return tc_cg_llvm_fail(g, "bad arithmetic operation", NULL);
	}
}

/* llvm.maxnum/minnum of floats a and b with either zero of a tie and no
 * NaN operands assumed (what LLVM's vectoriser needs for min/max
 * reductions). */
static LLVMValueRef nnan_minmax(cg *g, LLVMValueRef a, LLVMValueRef b, int is_max)
{
	LLVMValueRef c, args[2];
	LLVMTypeRef ty = LLVMTypeOf(a);
	args[0] = a;
	args[1] = b;
	c = tc_cg_llvm_call_intrinsic(g, is_max ? "llvm.maxnum" : "llvm.minnum", &ty, 1, args, 2);
	if (c)
		LLVMSetFastMathFlags(c, LLVMFastMathNoSignedZeros | LLVMFastMathNoNaNs);
	return c;
}

/* min or max of a and b of type t.  The interpreter's rule for integers,
 * a <= b ? a : b (max: a >= b ? a : b), and for floats the same with a NaN
 * b ignored: (a <= b || b is NaN) ? a : b.  That is NaN-ignoring like
 * llvm.minnum, and also fixes the choice between -0 and +0 (the first
 * operand), which llvm.minnum and C's fmin leave open (glibc's x86-64 fmin
 * returns the second operand of a tie, but GCC may swap the operands of
 * that commutative builtin; the interpreter spells the rule out instead).
 * Under fastmath: nnan_minmax. */
static LLVMValueRef minmax(cg *g, tc_dtype t, LLVMValueRef a, LLVMValueRef b, int is_max)
{
	LLVMValueRef c;
	if (!a || !b)
		return NULL;
	if (tc_dtype_is_float(t) && !tc_dtype_is_half(t) && g->opts.fastmath)
		return nnan_minmax(g, a, b, is_max);
	if (tc_dtype_is_float(t)) {
		c = LLVMBuildFCmp(g->B, is_max ? LLVMRealOGE : LLVMRealOLE, a, b, "");
		c = LLVMBuildOr(g->B, c, LLVMBuildFCmp(g->B, LLVMRealUNO, b, b, ""), "");
	} else if (tc_dtype_is_signed(t)) {
		c = LLVMBuildICmp(g->B, is_max ? LLVMIntSGE : LLVMIntSLE, a, b, "");
	} else {
		c = LLVMBuildICmp(g->B, is_max ? LLVMIntUGE : LLVMIntULE, a, b, "");
	}
	return LLVMBuildSelect(g->B, c, a, b, is_max ? "max" : "min");
}

static LLVMValueRef compare(cg *g, tc_ir_op op, tc_dtype t, LLVMValueRef a, LLVMValueRef b)
{
	if (!a || !b)
		return NULL;
	if (tc_dtype_is_float(t)) {
		LLVMRealPredicate pr;
		switch (op) {
		case TC_OP_LT: pr = LLVMRealOLT; break;
		case TC_OP_GT: pr = LLVMRealOGT; break;
		case TC_OP_LE: pr = LLVMRealOLE; break;
		case TC_OP_GE: pr = LLVMRealOGE; break;
		case TC_OP_EQ: pr = LLVMRealOEQ; break;
		default: pr = LLVMRealUNE; break; /* NaN != anything */
		}
		return LLVMBuildFCmp(g->B, pr, a, b, "");
	} else {
		int s = tc_dtype_is_signed(t); /* bool compares as unsigned 0/1 */
		LLVMIntPredicate pr;
		switch (op) {
		case TC_OP_LT: pr = s ? LLVMIntSLT : LLVMIntULT; break;
		case TC_OP_GT: pr = s ? LLVMIntSGT : LLVMIntUGT; break;
		case TC_OP_LE: pr = s ? LLVMIntSLE : LLVMIntULE; break;
		case TC_OP_GE: pr = s ? LLVMIntSGE : LLVMIntUGE; break;
		case TC_OP_EQ: pr = LLVMIntEQ; break;
		default: pr = LLVMIntNE; break;
		}
		return LLVMBuildICmp(g->B, pr, a, b, "");
	}
}

/* A new block at the end of the function being generated. */
LLVMBasicBlockRef tc_cg_llvm_new_block(__tc_keep cg *g, const char *name)
{
	return LLVMAppendBasicBlockInContext(g->C, g->fn, name);
}

/* ---- speculation ----
 *
 * The language evaluates only the chosen side of ?: and the right side of
 * && and || only when it decides, and the code does so with branches.  In
 * a vector loop LLVM turns such branches into masked operations, but the
 * scalar rest of the loop keeps them, and a condition that the data
 * decides (I(n,c,y,x) == O(n,c,y/2,x/2): which of a pooling window's four
 * elements is its maximum) then mispredicts about once a window: max-pool's
 * backward on its real outputs took twice its time on random ones.  A
 * side is evaluated anyway, and ?: becomes a select, where evaluating it
 * can change nothing: no builtin call, at most SPECULATE_OPS operations,
 * and every read at subscripts inside the tensor at every point of the
 * statement's index box (interval arithmetic over the index ranges at the
 * model's sizes; no size left free), integer division only by a positive
 * constant (a zero divisor is a run-time error); float operations do not
 * trap. */
#define SPECULATE_OPS 24

/* The values of integer IR expression e at the points of the current
 * statement's index box: [*lo, *hi]; 0 when not known. */
static int interval(cg *g, const tc_ir_expr *e, int64_t *lo, int64_t *hi)
{
	int64_t a, b, c, d, p[4];
	int i;
	if (!tc_dtype_is_int(e->type))
		return 0;
	switch (e->op) {
	case TC_OP_CONST:
		*lo = *hi = e->c.i;
		return !tc_dtype_is_unsigned(e->type) || e->c.i >= 0;
	case TC_OP_INDEX:
		if (!g->dom_ir || e->id < 0 || e->id >= g->dom_ir->nvars ||
			!tc_ir_var_range(&g->dom_ir->vars[e->id], g->p->params, lo, hi) || *hi <= *lo)
			return 0;
		--*hi;
		return 1;
	case TC_OP_SIZE:
		if (e->id < 0 || e->id >= g->p->f->nparams)
			return 0;
		*lo = *hi = g->p->params[e->id];
		return 1;
	case TC_OP_CAST: { /* the values unchanged when the type holds them all */
		int bits = tc_dtype_bits(e->type) < 32 ? tc_dtype_bits(e->type) : 32;
		int64_t top = tc_dtype_is_unsigned(e->type) ? (INT64_C(1) << bits) - 1
							 : (INT64_C(1) << (bits - 1)) - 1;
		int64_t bottom = tc_dtype_is_unsigned(e->type) ? 0 : -top - 1;
		return interval(g, e->args[0], lo, hi) && *lo >= bottom && *hi <= top;
	}
	case TC_OP_NEG:
		if (!interval(g, e->args[0], &a, &b) || a == INT64_MIN)
			return 0;
		*lo = -b;
		*hi = -a;
		return 1;
	case TC_OP_ADD:
	case TC_OP_SUB:
	case TC_OP_MUL:
		if (!interval(g, e->args[0], &a, &b) || !interval(g, e->args[1], &c, &d))
			return 0;
		if (e->op == TC_OP_ADD)
			return !__builtin_add_overflow(a, c, lo) && !__builtin_add_overflow(b, d, hi);
		if (e->op == TC_OP_SUB)
			return !__builtin_sub_overflow(a, d, lo) && !__builtin_sub_overflow(b, c, hi);
		if (__builtin_mul_overflow(a, c, &p[0]) || __builtin_mul_overflow(a, d, &p[1]) ||
			__builtin_mul_overflow(b, c, &p[2]) || __builtin_mul_overflow(b, d, &p[3]))
			return 0;
		*lo = *hi = p[0];
		for (i = 1; i < 4; i++) {
			*lo = p[i] < *lo ? p[i] : *lo;
			*hi = p[i] > *hi ? p[i] : *hi;
		}
		return 1;
	case TC_OP_DIV: /* floor division by a positive constant: monotone */
	case TC_OP_MOD: /* floor modulo by a positive constant: 0 .. d - 1 */
		if (e->args[1]->op != TC_OP_CONST || (d = e->args[1]->c.i) <= 0 ||
			!interval(g, e->args[0], &a, &b))
			return 0;
		if (e->op == TC_OP_MOD) {
			*lo = 0;
			*hi = d - 1;
			return 1;
		}
		*lo = a / d - (a % d != 0 && a < 0);
		*hi = b / d - (b % d != 0 && b < 0);
		return 1;
	default:
		return 0;
	}
}

/* Whether evaluating e where the language would not changes nothing (see
 * above); *ops counts its operations. */
static int speculatable(cg *g, const tc_ir_expr *e, int *ops)
{
	int i;
	int64_t lo, hi;
	if (++*ops > SPECULATE_OPS)
		return 0;
	switch (e->op) {
	case TC_OP_CONST:
	case TC_OP_INDEX:
	case TC_OP_SIZE:
		return 1;
	case TC_OP_CALL:
		return 0;
	case TC_OP_DIV:
	case TC_OP_MOD: /* an integer divisor of 0 is an error (a run-time check) */
		if (tc_dtype_is_int(e->type) && !(e->args[1]->op == TC_OP_CONST && e->args[1]->c.i > 0))
			return 0;
		return speculatable(g, e->args[0], ops) && speculatable(g, e->args[1], ops);
	case TC_OP_READ:
		if (e->id < 0 || e->id >= g->p->f->ntensors || e->nargs != g->p->f->tensors[e->id].ndim)
			return 0;
		for (i = 0; i < e->nargs; i++)
			if (!interval(g, e->args[i], &lo, &hi) || lo < 0 ||
				hi >= g->ext[e->id * TC_MAX_RANK + i])
				return 0;
		return 1;
	default:
		for (i = 0; i < e->nargs; i++)
			if (!speculatable(g, e->args[i], ops))
				return 0;
		return 1;
	}
}

/* Whether side e of ?: or && || may be evaluated unconditionally. */
static int speculate(cg *g, const tc_ir_expr *e)
{
	int ops = 0, k;
	if (!g->p->params || !g->dom_ir)
		return 0;
	for (k = 0; g->p->free && k < g->p->f->nparams; k++)
		if (g->p->free[k]) /* run-time sizes: the box is not known */
			return 0;
	return speculatable(g, e, &ops);
}

/* a && b, a || b: b is evaluated only when it decides (or always, and the
 * two combined, where that changes nothing: speculate). */
static LLVMValueRef short_circuit(cg *g, const tc_ir_expr *e)
{
	int is_and = e->op == TC_OP_AND;
	LLVMValueRef a = expr(g, e->args[0]), b, phi, vals[2];
	LLVMBasicBlockRef from, rhs, join, blocks[2];
	if (!a)
		return NULL;
	if (speculate(g, e->args[1])) {
		b = expr(g, e->args[1]);
		return b ? (is_and ? LLVMBuildAnd(g->B, a, b, "") : LLVMBuildOr(g->B, a, b, "")) : NULL;
	}
	from = LLVMGetInsertBlock(g->B);
	rhs = tc_cg_llvm_new_block(g, is_and ? "and.rhs" : "or.rhs");
	join = tc_cg_llvm_new_block(g, is_and ? "and.end" : "or.end");
	if (is_and)
		LLVMBuildCondBr(g->B, a, rhs, join);
	else
		LLVMBuildCondBr(g->B, a, join, rhs);
	LLVMPositionBuilderAtEnd(g->B, rhs);
	g->guarded++;
	b = expr(g, e->args[1]);
	g->guarded--;
	if (!b)
		return NULL;
	blocks[1] = LLVMGetInsertBlock(g->B);
	LLVMBuildBr(g->B, join);
	LLVMPositionBuilderAtEnd(g->B, join);
	phi = LLVMBuildPhi(g->B, g->i1, "");
	vals[0] = LLVMConstInt(g->i1, !is_and, 0);
	blocks[0] = from;
	vals[1] = b;
	LLVMAddIncoming(phi, vals, blocks, 2);
	return phi;
}

/* a ? b : c with only the chosen branch evaluated (or both, and a
 * select, where that changes nothing: speculate). */
static LLVMValueRef select_expr(cg *g, const tc_ir_expr *e)
{
	LLVMValueRef c = expr(g, e->args[0]), vals[2], phi;
	LLVMBasicBlockRef yes, no, join, blocks[2];
	if (!c)
		return NULL;
	if (speculate(g, e->args[1]) && speculate(g, e->args[2])) {
		vals[0] = expr(g, e->args[1]);
		vals[1] = vals[0] ? expr(g, e->args[2]) : NULL;
		if (!vals[1])
			return NULL;
		phi = LLVMBuildSelect(g->B, c, vals[0], vals[1], "");
		/* a condition the data decides: !unpredictable, so that LLVM's
		 * x86 back end keeps a conditional move in a loop rather than
		 * turning it into a branch (X86CmovConverter; with it max-pool's
		 * arg-max still branched on which element is the maximum).  x86
		 * has no conditional move of 8 bits: an int8 select stays a
		 * branch (the gradient's positions are int32: lang/grad.c) */
		if (tc_ir_count_reads(e->args[0]) && LLVMIsAInstruction(phi))
			LLVMSetMetadata(phi, LLVMGetMDKindIDInContext(g->C, "unpredictable", 13),
				LLVMMetadataAsValue(g->C, LLVMMDNodeInContext2(g->C, NULL, 0)));
		return phi;
	}
	yes = tc_cg_llvm_new_block(g, "sel.then");
	no = tc_cg_llvm_new_block(g, "sel.else");
	join = tc_cg_llvm_new_block(g, "sel.end");
	LLVMBuildCondBr(g->B, c, yes, no);
	LLVMPositionBuilderAtEnd(g->B, yes);
	g->guarded++;
	vals[0] = expr(g, e->args[1]);
	g->guarded--;
	if (!vals[0])
		return NULL;
	blocks[0] = LLVMGetInsertBlock(g->B);
	LLVMBuildBr(g->B, join);
	LLVMPositionBuilderAtEnd(g->B, no);
	g->guarded++;
	vals[1] = expr(g, e->args[2]);
	g->guarded--;
	if (!vals[1])
		return NULL;
	blocks[1] = LLVMGetInsertBlock(g->B);
	LLVMBuildBr(g->B, join);
	LLVMPositionBuilderAtEnd(g->B, join);
	phi = LLVMBuildPhi(g->B, reg_type(g, e->type), "");
	LLVMAddIncoming(phi, vals, blocks, 2);
	return phi;
}

/* ---- builtins ---- */

/* How a floating builtin is computed for float32/float64: an LLVM
 * intrinsic (intr), else libm (dbl, and flt for float32 where glibc's float
 * version is accurate; without flt float32 calls dbl and rounds once), else
 * (all NULL) tc_cg_builtin_call.  min/max, ldexp, ilogb, jn, yn are
 * handled apart. */
typedef struct cg_bi {
	const char *intr, *dbl, *flt;
} cg_bi;

static const cg_bi cg_bis[TC_BI_COUNT] = {
	[TC_BI_ACOS] = {NULL, "acos", "acosf"},
	[TC_BI_ACOSH] = {NULL, "acosh", "acoshf"},
	[TC_BI_ASIN] = {NULL, "asin", "asinf"},
	[TC_BI_ASINH] = {NULL, "asinh", "asinhf"},
	[TC_BI_ATAN] = {NULL, "atan", "atanf"},
	[TC_BI_ATANH] = {NULL, "atanh", "atanhf"},
	[TC_BI_CBRT] = {NULL, "cbrt", "cbrtf"},
	[TC_BI_CEIL] = {"llvm.ceil", NULL, NULL},
	[TC_BI_COS] = {"llvm.cos", NULL, NULL},
	[TC_BI_COSH] = {NULL, "cosh", "coshf"},
	[TC_BI_ERF] = {NULL, "erf", "erff"},
	[TC_BI_ERFC] = {NULL, "erfc", "erfcf"},
	[TC_BI_EXP] = {"llvm.exp", NULL, NULL},
	[TC_BI_EXP2] = {"llvm.exp2", NULL, NULL},
	[TC_BI_EXPM1] = {NULL, "expm1", "expm1f"},
	[TC_BI_FABS] = {"llvm.fabs", NULL, NULL},
	[TC_BI_FLOOR] = {"llvm.floor", NULL, NULL},
	[TC_BI_J0] = {NULL, "j0", NULL},
	[TC_BI_J1] = {NULL, "j1", NULL},
	[TC_BI_LGAMMA] = {NULL, "lgamma", NULL},
	[TC_BI_LOG] = {"llvm.log", NULL, NULL},
	[TC_BI_LOG10] = {"llvm.log10", NULL, NULL},
	[TC_BI_LOG1P] = {NULL, "log1p", "log1pf"},
	[TC_BI_LOG2] = {"llvm.log2", NULL, NULL},
	[TC_BI_LOGB] = {NULL, "logb", "logbf"},
	[TC_BI_NEARBYINT] = {"llvm.nearbyint", NULL, NULL},
	[TC_BI_RINT] = {"llvm.rint", NULL, NULL},
	[TC_BI_ROUND] = {"llvm.round", NULL, NULL},
	[TC_BI_SIN] = {"llvm.sin", NULL, NULL},
	[TC_BI_SINH] = {NULL, "sinh", "sinhf"},
	[TC_BI_SQRT] = {"llvm.sqrt", NULL, NULL},
	[TC_BI_TAN] = {NULL, "tan", "tanf"},
	[TC_BI_TANH] = {NULL, "tanh", "tanhf"},
	[TC_BI_TGAMMA] = {NULL, "tgamma", NULL},
	[TC_BI_TRUNC] = {"llvm.trunc", NULL, NULL},
	[TC_BI_Y0] = {NULL, "y0", NULL},
	[TC_BI_Y1] = {NULL, "y1", NULL},
	[TC_BI_ATAN2] = {NULL, "atan2", "atan2f"},
	[TC_BI_COPYSIGN] = {"llvm.copysign", NULL, NULL},
	[TC_BI_FDIM] = {NULL, "fdim", "fdimf"},
	[TC_BI_FMOD] = {NULL, "fmod", "fmodf"},
	[TC_BI_HYPOT] = {NULL, "hypot", "hypotf"},
	[TC_BI_NEXTAFTER] = {NULL, "nextafter", "nextafterf"},
	[TC_BI_POW] = {"llvm.pow", NULL, NULL},
	[TC_BI_REMAINDER] = {NULL, "remainder", "remainderf"},
	[TC_BI_FMA] = {"llvm.fma", NULL, NULL},
	/* everything else: tc_cg_builtin_call */
};

/* tc_cg_builtin_call(id, args...) on double arguments. */
static LLVMValueRef call_wrapper(cg *g, int id, LLVMValueRef *dargs, int n)
{
	LLVMTypeRef pt[4] = {g->i32, g->f64, g->f64, g->f64};
	LLVMValueRef a[4];
	int i;
	a[0] = LLVMConstInt(g->i32, (unsigned long long)id, 0);
	for (i = 0; i < 3; i++)
		a[i + 1] = i < n ? dargs[i] : LLVMConstReal(g->f64, 0);
	return call_extern(g, "tc_cg_builtin_call", g->f64, pt, 4, a, 1);
}

/* float16 (or bfloat16, t) nextafter from the bits, as the interpreter's
 * half_nextafter (bf16_nextafter): bfloat16 steps by 2^16 on the bits of
 * its float. */
static LLVMValueRef half_nextafter(cg *g, tc_dtype t, LLVMValueRef a, LLVMValueRef b)
{
	int bf = t == TC_T_BF16;
	LLVMTypeRef it = bf ? g->i32 : g->i16, ft = bf ? g->f32 : g->f16;
	unsigned long long one = bf ? 0x10000u : 1u, tp = bf ? 0x00010000u : 0x0001u,
			   tn = bf ? 0x80010000u : 0x8001u;
	LLVMValueRef h = LLVMBuildBitCast(g->B, a, it, "");
	LLVMValueRef zero = LLVMConstReal(ft, 0);
	LLVMValueRef nan = LLVMBuildFCmp(g->B, LLVMRealUNO, a, b, "");
	LLVMValueRef eq = LLVMBuildFCmp(g->B, LLVMRealOEQ, a, b, "");
	LLVMValueRef az = LLVMBuildFCmp(g->B, LLVMRealOEQ, a, zero, "");
	LLVMValueRef up = LLVMBuildICmp(g->B, LLVMIntEQ, LLVMBuildFCmp(g->B, LLVMRealOGT, b, a, ""),
		LLVMBuildFCmp(g->B, LLVMRealOGT, a, zero, ""), "");
	LLVMValueRef step = LLVMBuildSelect(g->B, up,
		LLVMBuildAdd(g->B, h, LLVMConstInt(it, one, 0), ""),
		LLVMBuildSub(g->B, h, LLVMConstInt(it, one, 0), ""), "");
	LLVMValueRef tiny = LLVMBuildSelect(g->B, LLVMBuildFCmp(g->B, LLVMRealOGT, b, zero, ""),
		LLVMConstInt(it, tp, 0), LLVMConstInt(it, tn, 0), "");
	LLVMValueRef r = LLVMBuildBitCast(g->B, LLVMBuildSelect(g->B, az, tiny, step, ""), ft, "");
	r = LLVMBuildSelect(g->B, eq, b, r, "");
	return LLVMBuildSelect(g->B, nan, float_arith(g, TC_OP_ADD, t, a, b), r, "");
}

/* float32 exp(x), inline so that loops vectorise (a call to libm's expf
 * keeps a loop scalar): x = n ln 2 + r with |r| <= ln 2 / 2 (Cody-Waite,
 * ln 2 in two parts), exp(r) by the Cephes expf polynomial, times 2^n.
 * n comes from one FMA: t = x log2(e) + (1.5 * 2^23 + 126) rounds to an
 * integer, n = t - (1.5 * 2^23 + 126) exactly, and the low bits of t's
 * encoding hold n + 126, so t's bits shifted left by 23 are those of
 * 2^(n-1) (the bits of 1.5 * 2^23 shift out): no float-to-integer
 * conversion, which is poison on NaN in LLVM and would need a select.  The
 * result is exp(r) * 2^(n-1) (exact) * 2, which rounds once (to +inf
 * where exp(x) overflows); for n <= -126, where 2^(n-1) is not a normal
 * number, exp(r) * 2^(n+63) * 2^-63 instead, which rounds once into the
 * subnormals.  Within 2 ulp of the correctly rounded result (1 ulp from
 * glibc's expf at worst over the arguments test_options draws); above
 * 88.72, +inf; below -103.97 (where the result rounds to 0), 0; NaN stays
 * NaN (every step propagates it).  About 20 vector instructions per
 * vector. */
static LLVMValueRef inline_expf(cg *g, LLVMValueRef x)
{
	static const double poly[] = {1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3,
		4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1};
	const double magic = 12582912.0 + 126.0; /* 1.5 * 2^23 + 126 */
	LLVMTypeRef f = g->f32;
	LLVMValueRef a[3], t, n, r, p, e, low, bits, res;
	unsigned i;
#define FC(v) LLVMConstReal(f, (v))
	/* clamped to [-104, 89] (compare and select: one vminps/vmaxps; a
	 * NaN goes through): beyond, the result rounds to 0 or overflows to
	 * +inf by itself, and n stays within [-150, 129] */
	r = LLVMBuildSelect(g->B, LLVMBuildFCmp(g->B, LLVMRealOGT, x, FC(89.0), ""), FC(89.0), x, "");
	r = LLVMBuildSelect(g->B, LLVMBuildFCmp(g->B, LLVMRealOLT, r, FC(-104.0), ""), FC(-104.0),
		r, "");
	a[0] = r;
	a[1] = FC(1.44269504088896341);
	a[2] = FC(magic);
	t = tc_cg_llvm_call_intrinsic(g, "llvm.fma", &f, 1, a, 3);
	n = LLVMBuildFSub(g->B, t, FC(magic), "");
	a[0] = n;
	a[1] = FC(-0.693359375);
	a[2] = r;
	r = tc_cg_llvm_call_intrinsic(g, "llvm.fma", &f, 1, a, 3);
	a[1] = FC(2.12194440e-4);
	a[2] = r;
	r = tc_cg_llvm_call_intrinsic(g, "llvm.fma", &f, 1, a, 3);
	p = FC(poly[0]);
	for (i = 1; i < sizeof(poly) / sizeof(poly[0]); i++) {
		a[0] = p;
		a[1] = r;
		a[2] = FC(poly[i]);
		p = tc_cg_llvm_call_intrinsic(g, "llvm.fma", &f, 1, a, 3);
	}
	a[0] = p;
	a[1] = LLVMBuildFMul(g->B, r, r, "");
	a[2] = LLVMBuildFAdd(g->B, r, FC(1.0), "");
	e = tc_cg_llvm_call_intrinsic(g, "llvm.fma", &f, 1, a, 3);
	/* 2^(n-1), or 2^(n+63) when n <= -126 */
	low = LLVMBuildFCmp(g->B, LLVMRealOLT, n, FC(-125.5), "");
	bits = LLVMBuildAdd(g->B, LLVMBuildBitCast(g->B, t, g->i32, ""),
		LLVMBuildSelect(g->B, low, LLVMConstInt(g->i32, 64, 0), LLVMConstInt(g->i32, 0, 0), ""),
		"");
	bits = LLVMBuildShl(g->B, bits, LLVMConstInt(g->i32, 23, 0), "");
	res = LLVMBuildFMul(g->B, e, LLVMBuildBitCast(g->B, bits, f, ""), "");
	return LLVMBuildFMul(g->B, res,
		LLVMBuildSelect(g->B, low, FC(0x1p-63), FC(2.0), ""), "");
#undef FC
}

/* A subscript that is an index variable of the statement (under casts to
 * integers of 32 bits or more) reading dimension k of tensor t, unguarded
 * and with an extent that fits in int32: the domain value itself, as i64.
 * It equals the int32 index converted back (the value lies in [0, extent)),
 * and it is what stores to the statement's own tensor use, so LLVM sees
 * that a read of an element the loop also writes is the same address
 * (softmax's shared exponentials, written then summed in one loop).  NULL
 * otherwise. */
static const tc_ir_expr *strip_int_casts(const tc_ir_expr *sub)
{
	while (sub->op == TC_OP_CAST && tc_dtype_is_int(sub->type) && tc_dtype_bits(sub->type) >= 32 &&
		tc_dtype_is_int(sub->args[0]->type))
		sub = sub->args[0];
	return sub;
}

/* Whether the subscript sub of dimension k of tensor t is an index
 * variable whose range lies inside the dimension for every size (it
 * starts at 0 or more and ends at the extent or a constant before it):
 * the read is in bounds at every point of the statement's domain, so a
 * read in a branch of ?: (d_picked(n) in Y(n) == c ? d_picked(n) : 0.0)
 * needs no run-time check either. */
static int index_within(cg *g, const tc_ir_expr *sub, int t, int k)
{
	const tc_ir_var *v;
	int64_t c, d;
	sub = strip_int_casts(sub);
	if (sub->op != TC_OP_INDEX || !g->dom_ir || sub->id < 0 || sub->id >= g->dom_ir->nvars ||
		sub->id >= g->ndom || k >= g->p->f->tensors[t].ndim)
		return 0;
	v = &g->dom_ir->vars[sub->id];
	return tc_sx_is_const(v->lo, &c) && c >= 0 &&
		(tc_sx_equal(v->hi, g->p->f->tensors[t].ext[k]) ||
			(tc_sx_const_diff(g->p->f->tensors[t].ext[k], v->hi, &d) && d >= 0));
}

static LLVMValueRef plain_index(cg *g, const tc_ir_expr *sub, int t, int k)
{
	if ((g->guarded && !index_within(g, sub, t, k)))
		return NULL;
	sub = strip_int_casts(sub);
	if (sub->op != TC_OP_INDEX || sub->id < 0 || sub->id >= g->ndom ||
		g->ext[t * TC_MAX_RANK + k] > INT32_MAX)
		return NULL;
	return g->dom[sub->id];
}

/* A floating builtin (not min/max/ilogb) of float32/float64 type t on args
 * of their IR types (jn/yn: int32 n first; ldexp: int32 exponent second). */
static LLVMValueRef float_builtin(cg *g, int id, tc_dtype t, LLVMValueRef *a, int n)
{
	LLVMTypeRef ft = reg_type(g, t), pt[3];
	LLVMValueRef d[3];
	const cg_bi *bi = &cg_bis[id];
	int i;

	if (id == TC_BI_LDEXP) {
		LLVMTypeRef over[2];
		over[0] = ft;
		over[1] = g->i32;
		return tc_cg_llvm_call_intrinsic(g, "llvm.ldexp", over, 2, a, 2);
	}
	if (id == TC_BI_JN || id == TC_BI_YN) {
		d[0] = LLVMBuildSIToFP(g->B, a[0], g->f64, "");
		d[1] = to_double(g, a[1], t);
		return round_double(g, call_wrapper(g, id, d, 2), t);
	}
	if (id == TC_BI_EXP && t == TC_T_F32)
		return inline_expf(g, a[0]);
	if (bi->intr)
		return tc_cg_llvm_call_intrinsic(g, bi->intr, &ft, 1, a, n);
	if (bi->dbl && (t == TC_T_F64 || bi->flt)) {
		for (i = 0; i < n; i++)
			pt[i] = ft;
		return call_extern(g, t == TC_T_F64 ? bi->dbl : bi->flt, ft, pt, n, a,
			id != TC_BI_LGAMMA);
	}
	for (i = 0; i < n; i++)
		d[i] = to_double(g, a[i], t);
	if (bi->dbl) {
		for (i = 0; i < n; i++)
			pt[i] = g->f64;
		return round_double(g, call_extern(g, bi->dbl, g->f64, pt, n, d, id != TC_BI_LGAMMA),
			t);
	}
	return round_double(g, call_wrapper(g, id, d, n), t);
}

static LLVMValueRef builtin(cg *g, const tc_ir_expr *e)
{
	LLVMValueRef a[3], r;
	tc_dtype t = e->type;
	int i, n = e->nargs, id = e->id;

	if (n < 1 || n > 3 || id < 0 || id >= TC_BI_COUNT)
		return tc_cg_llvm_fail(g, "malformed builtin call", NULL);
	for (i = 0; i < n; i++) /* every argument is evaluated, as in the interpreter */
		if (!(a[i] = expr(g, e->args[i])))
			return NULL;
	if (id == TC_BI_MIN || id == TC_BI_MAX || id == TC_BI_FMIN || id == TC_BI_FMAX) {
		if (n != 2)
			return tc_cg_llvm_fail(g, "malformed builtin call", NULL);
		return minmax(g, t, a[0], a[1], id == TC_BI_MAX || id == TC_BI_FMAX);
	}
	if (id == TC_BI_ILOGB) { /* int result of the double computation */
		LLVMValueRef x = to_double(g, a[0], e->args[0]->type);
		r = call_wrapper(g, id, &x, 1);
		return r ? LLVMBuildFPToSI(g->B, r, reg_type(g, t), "") : NULL;
	}
	if (!tc_dtype_is_float(t))
		return tc_cg_llvm_fail(g, "builtin of non-float type", NULL);
	if (!tc_dtype_is_half(t))
		return float_builtin(g, id, t, a, n);
	if (id == TC_BI_NEXTAFTER)
		return half_nextafter(g, t, a[0], a[1]);
	/* float16 and bfloat16: in double, rounded once (as the interpreter) */
	for (i = 0; i < n; i++)
		if (tc_dtype_is_half(e->args[i]->type))
			a[i] = LLVMBuildFPExt(g->B, a[i], g->f64, "");
	return round_double(g, float_builtin(g, id, TC_T_F64, a, n), t);
}

/* The value of IR expression e, in its register type. */
static LLVMValueRef expr(cg *g, const tc_ir_expr *e)
{
	LLVMValueRef a, b, idx[TC_MAX_RANK];
	tc_ir_fma m;
	tc_dtype at;
	int i;

	if (g->failed)
		return NULL;
	switch (e->op) {
	case TC_OP_CONST:
		return constant(g, e->type, e->c.i, e->c.f);
	case TC_OP_INDEX:
		if (e->id < 0 || e->id >= g->ndom)
			return tc_cg_llvm_fail(g, "index variable outside the statement's domain", NULL);
		return convert(g, g->dom[e->id], TC_T_I64, e->type);
	case TC_OP_SIZE:
		if (!g->p->params || e->id < 0 || e->id >= g->p->f->nparams)
			return tc_cg_llvm_fail(g, "unknown size", NULL);
		if (tc_cg_llvm_size_free(g, e->id))
			return convert(g, g->size[e->id], TC_T_I64, e->type);
		return constant(g, e->type, g->p->params[e->id], 0);
	case TC_OP_READ:
		if (e->nargs > TC_MAX_RANK || e->id < 0 || e->id >= g->p->f->ntensors)
			return tc_cg_llvm_fail(g, "malformed tensor read", NULL);
		for (i = 0; i < e->nargs; i++) {
			at = e->args[i]->type;
			if (!tc_dtype_is_int(at))
				return tc_cg_llvm_fail(g, "non-integer subscript", NULL);
			if ((idx[i] = plain_index(g, e->args[i], e->id, i)))
				continue;
			/* to i64: sign-extended if signed, zero-extended if not */
			idx[i] = convert(g, expr(g, e->args[i]), at,
				tc_dtype_is_signed(at) ? TC_T_I64 : TC_T_U64);
			if (!idx[i])
				return NULL;
			if (g->guarded || !tc_ir_affine(e->args[i])) { /* not proven in bounds */
				tc_cg_site site = {TC_CG_CHECK_BOUNDS, e->loc, e->id, i, 0};
				int n = add_site(g, site);
				LLVMValueRef bad;
				if (n < 0)
					return NULL;
				bad = LLVMBuildICmp(g->B, LLVMIntUGE, idx[i],
					tc_cg_llvm_extent(g, e->id, i), "");
				check(g, bad, n, idx[i]);
				idx[i] = LLVMBuildSelect(g->B, bad, tc_cg_llvm_i64c(g, 0), idx[i], "");
			}
		}
		return load(g, e->id, element(g, e->id, idx, e->nargs));
	case TC_OP_CAST:
		return convert(g, expr(g, e->args[0]), e->args[0]->type, e->type);
	case TC_OP_NEG:
		a = expr(g, e->args[0]);
		if (!a)
			return NULL;
		return tc_dtype_is_float(e->type) ? LLVMBuildFNeg(g->B, a, "") : LLVMBuildNeg(g->B, a, "");
	case TC_OP_NOT:
		a = expr(g, e->args[0]);
		return a ? LLVMBuildNot(g->B, a, "") : NULL;
	case TC_OP_ADD:
	case TC_OP_SUB:
	case TC_OP_MUL:
	case TC_OP_DIV:
	case TC_OP_MOD:
		if (g->opts.contract && tc_ir_fma_of(e, &m)) {
			LLVMValueRef x, y, z = NULL;
			if (!m.product_first && !(z = expr(g, m.z))) /* in the order written */
				return NULL;
			if (!(x = expr(g, m.x)) || !(y = expr(g, m.y)) || (!z && !(z = expr(g, m.z))))
				return NULL;
			return fused(g, e->type, m.neg_xy ? LLVMBuildFNeg(g->B, x, "") : x, y,
				m.neg_z ? LLVMBuildFNeg(g->B, z, "") : z, 0);
		}
		a = expr(g, e->args[0]);
		b = expr(g, e->args[1]);
		if (a && b && (e->op == TC_OP_DIV || e->op == TC_OP_MOD) &&
			!tc_dtype_is_float(e->type) && !div_check(g, e, b))
			return NULL;
		return arith(g, e->op, e->type, a, b);
	case TC_OP_LT:
	case TC_OP_GT:
	case TC_OP_LE:
	case TC_OP_GE:
	case TC_OP_EQ:
	case TC_OP_NE:
		a = expr(g, e->args[0]);
		b = expr(g, e->args[1]);
		return compare(g, e->op, e->args[0]->type, a, b);
	case TC_OP_AND:
	case TC_OP_OR:
		return short_circuit(g, e);
	case TC_OP_SELECT:
		return select_expr(g, e);
	case TC_OP_CALL:
		return builtin(g, e);
	}
	return tc_cg_llvm_fail(g, "unknown IR operation", NULL);
}

/* ---- statements ---- */

/* The identity of reduction red in type t (the interpreter's identity()). */
static LLVMValueRef identity(cg *g, tc_red red, tc_dtype t)
{
	int bits = tc_dtype_bits(t);
	int fl = tc_dtype_is_float(t);
	switch (red) {
	case TC_RED_MUL:
		return constant(g, t, 1, 1.0);
	case TC_RED_MIN: /* the largest value */
		if (fl)
			return constant(g, t, 0, t == TC_T_F16 ? 65504.0 : t == TC_T_BF16 ? 0x1.fep127
				: t == TC_T_F32 ? FLT_MAX : DBL_MAX);
		if (t == TC_T_BOOL || tc_dtype_is_unsigned(t))
			return LLVMConstAllOnes(reg_type(g, t));
		return constant(g, t, bits == 64 ? INT64_MAX : (INT64_C(1) << (bits - 1)) - 1, 0);
	case TC_RED_MAX: /* the lowest value */
		if (fl)
			return constant(g, t, 0,
				t == TC_T_F16 ? -65504.0 : t == TC_T_BF16 ? -0x1.fep127
				: t == TC_T_F32 ? -FLT_MAX : -DBL_MAX);
		if (tc_dtype_is_signed(t))
			return constant(g, t, bits == 64 ? INT64_MIN : -(INT64_C(1) << (bits - 1)), 0);
		return constant(g, t, 0, 0);
	default:
		return constant(g, t, 0, 0.0);
	}
}

/* acc red v in type t (the interpreter's reduce()); init: the reduction
 * starts from its identity (op=!), so acc is never NaN.
 *
 * vecreduce: outside register tiles, a float32/float64 reduction may run
 * as vector partial results that LLVM's vectoriser combines at the end.
 * A sum gets the reassoc flag on its accumulating add only (the
 * right-hand side keeps its exact steps): another order changes the
 * rounding, and the result only where partial sums overflow, which needs
 * terms near the largest finite value.  A product keeps the interpreter's
 * order (only fastmath reorders it): its partial products overflow and
 * underflow on ordinary data (the product of (r0 + r1) over 69 x 69 terms
 * is 0 in order, from its first term, but lanes without that term reach
 * +inf, and 0 * inf is NaN).  max/min with init
 * keep the interpreter's value: a NaN v is replaced by the identity, which
 * acc (never NaN, never beyond the identity) absorbs, so llvm.maxnum may
 * assume no NaN operands, and every order gives the same maximum (but for
 * the sign of a zero in a tie of -0 and +0).
 *
 * widened: the float32 accumulator of a 16-bit float (ir/widen.c) keeps
 * the interpreter's order and exact steps whatever the options. */
static LLVMValueRef reduce(cg *g, tc_red red, tc_dtype t, LLVMValueRef acc, LLVMValueRef v,
	int init, int widened)
{
	int vec = g->opts.vecreduce && !g->ordered && (t == TC_T_F32 || t == TC_T_F64) && !widened;
	LLVMValueRef r;
	switch (red) {
	case TC_RED_ADD:
	case TC_RED_MUL:
		/* bool is i1 in registers, where add is xor: += on bool is or
		 * (any), as in the interpreter; mul is and (all) already */
		if (t == TC_T_BOOL && red == TC_RED_ADD)
			return acc && v ? LLVMBuildOr(g->B, acc, v, "") : NULL;
		if (widened && acc && v) /* plain IEEE steps, no fast-math flags */
			return red == TC_RED_ADD ? LLVMBuildFAdd(g->B, acc, v, "")
						 : LLVMBuildFMul(g->B, acc, v, "");
		r = arith(g, red == TC_RED_ADD ? TC_OP_ADD : TC_OP_MUL, t, acc, v);
		if (vec && red == TC_RED_ADD && r && LLVMIsAInstruction(r) &&
			LLVMCanValueUseFastMathFlags(r))
			LLVMSetFastMathFlags(r, LLVMGetFastMathFlags(r) | LLVMFastMathAllowReassoc);
		return r;
	case TC_RED_MIN:
	case TC_RED_MAX:
		if (!vec || !init || g->opts.fastmath || !acc || !v)
			return minmax(g, t, acc, v, red == TC_RED_MAX);
		return nnan_minmax(g, acc, LLVMBuildSelect(g->B, LLVMBuildFCmp(g->B, LLVMRealUNO, v, v, ""),
			identity(g, red, t), v, ""), red == TC_RED_MAX);
	default: return v;
	}
}

/* The address of the element a scatter writes (g->dom holding the
 * instance's domain values): its subscripts in order, as a read's are
 * (TC_OP_READ in expr), each but a plain index checked against its
 * dimension at run time with the interpreter's error at the subscript.
 * NULL on failure. */
static LLVMValueRef scatter_address(cg *g, const tc_ir_stmt *ir)
{
	const tc_ir_tensor *tt = &g->p->f->tensors[ir->tensor];
	LLVMValueRef idx[TC_MAX_RANK];
	int k;
	for (k = 0; k < tt->ndim; k++) {
		const tc_ir_expr *sub = ir->sub[k];
		tc_dtype at = sub->type;
		if (!tc_dtype_is_int(at))
			return tc_cg_llvm_fail(g, "non-integer subscript", NULL);
		if ((idx[k] = plain_index(g, sub, ir->tensor, k)))
			continue;
		idx[k] = convert(g, expr(g, sub), at, tc_dtype_is_signed(at) ? TC_T_I64 : TC_T_U64);
		if (!idx[k])
			return NULL;
		/* range inference bounds no scatter subscript by the tensor written
		 * (an affine one, 2 * i, included: docs/language.md 5.5) */
		{
			tc_cg_site site = {TC_CG_CHECK_BOUNDS, sub->loc, ir->tensor, k, 0};
			int n = add_site(g, site);
			LLVMValueRef bad;
			if (n < 0)
				return NULL;
			bad = LLVMBuildICmp(g->B, LLVMIntUGE, idx[k],
				tc_cg_llvm_extent(g, ir->tensor, k), "");
			check(g, bad, n, idx[k]);
			idx[k] = LLVMBuildSelect(g->B, bad, tc_cg_llvm_i64c(g, 0), idx[k], "");
		}
	}
	return element(g, ir->tensor, idx, tt->ndim);
}

/* The code of statement instance inst: its domain values, then the store
 * of its value. */
void tc_cg_llvm_statement(__tc_keep cg *g, __tc_keep const tc_poly_inst *inst)
{
	const tc_poly_stmt *s = inst->stmt;
	const tc_ir_stmt *ir = s ? s->ir : NULL;
	const tc_ir_expr *fx, *fy;
	tc_dtype dt;
	LLVMValueRef addr, v;
	int k;

	if (!ir || inst->n != s->ndims || inst->n > CG_MAX_DIMS || ir->nlhs > inst->n) {
		tc_cg_llvm_fail(g, "malformed statement instance", NULL);
		return;
	}
	for (k = 0; k < inst->n; k++)
		if (!(g->dom[k] = tc_cg_llvm_as_i64(g, tc_cg_llvm_ast_expr(g, inst->index[k]))))
			return;
	g->ndom = inst->n;
	g->dom_ir = ir;
	dt = g->p->f->tensors[ir->tensor].dtype;
	addr = ir->sub ? scatter_address(g, ir) : element(g, ir->tensor, g->dom, ir->nlhs);
	if (!addr)
		return;
	switch (s->kind) {
	case TC_POLY_INIT:
		v = identity(g, ir->red, dt);
		break;
	case TC_POLY_ASSIGN:
		v = convert(g, expr(g, ir->rhs), ir->rhs->type, dt);
		break;
	default:
		if (g->opts.contract && tc_ir_fma_reduction(ir, dt, g->p->f->tensors[ir->tensor].widened,
			&fx, &fy)) { /* acc = fma(x, y, acc) */
			LLVMValueRef x = expr(g, fx), y = x ? expr(g, fy) : NULL;
			v = fused(g, dt, x, y, y ? load(g, ir->tensor, addr) : NULL,
				g->opts.vecreduce && !g->ordered);
			break;
		}
		v = convert(g, expr(g, ir->rhs), ir->rhs->type, dt);
		if (ir->red != TC_RED_ASSIGN)
			v = reduce(g, ir->red, dt, load(g, ir->tensor, addr), v, ir->init,
				g->p->f->tensors[ir->tensor].widened);
		break;
	}
	store(g, ir->tensor, addr, v);
	g->ndom = 0;
}

/* ---- register tiles as vector code ----
 *
 * A register tile's micro-kernel (llvm_loop.c, vector_tile) computes a
 * statement `lanes` elements at a time along its last left-hand dimension
 * vc: lane l is the instance whose domain value vc is lane 0's plus l, and
 * every other domain value is lane 0's (g->dom holds lane 0's values).
 * Each lane computes exactly the scalar code's operations on its own
 * element, so the results are the same bits: reads that do not use vc are
 * one scalar load broadcast, reads whose last subscript is vc plus terms
 * without it are one vector load, and arithmetic is the same IR operation
 * on vectors (llvm.fmuladd where the contract rule fuses, as in the scalar
 * code). Only what is checked below is emitted this way; anything else
 * keeps the scalar statement and LLVM's vectoriser. */

/* Whether subscript sub is domain dimension v plus terms without it (under
 * widening integer casts), so that its value at lane l is lane 0's plus l. */
static int unit_in(const tc_ir_expr *sub, int v)
{
	while (sub->op == TC_OP_CAST && tc_dtype_is_int(sub->type) && tc_dtype_bits(sub->type) >= 32 &&
		tc_dtype_is_int(sub->args[0]->type))
		sub = sub->args[0];
	if (sub->op == TC_OP_INDEX)
		return sub->id == v;
	if (sub->op == TC_OP_ADD && sub->nargs == 2)
		return (unit_in(sub->args[0], v) && !tc_ir_uses_var(sub->args[1], v)) ||
			(!tc_ir_uses_var(sub->args[0], v) && unit_in(sub->args[1], v));
	if (sub->op == TC_OP_SUB && sub->nargs == 2)
		return unit_in(sub->args[0], v) && !tc_ir_uses_var(sub->args[1], v);
	return 0;
}

/* Whether e (of float type t) can be computed along vc as vectors: float
 * constants, reads of tensors of type t with affine subscripts (proven in
 * bounds: no run-time check) that are broadcasts or unit-stride rows, and
 * + - * / and negation; with calls set also min, max, fmin and fmax
 * (minmax's compare and select, the scalar code's rule, on vectors). */
static int vec_ok_in(cg *g, const tc_ir_expr *e, int vc, tc_dtype t, int calls)
{
	int i;
	if (e->type != t)
		return 0;
	switch (e->op) {
	case TC_OP_CONST:
		return 1;
	case TC_OP_READ:
		if (e->id < 0 || e->id >= g->p->f->ntensors || g->p->f->tensors[e->id].dtype != t ||
			e->nargs < 1 || e->nargs > TC_MAX_RANK)
			return 0;
		for (i = 0; i < e->nargs; i++)
			if (!tc_dtype_is_int(e->args[i]->type) || !tc_ir_affine(e->args[i]) ||
				(i < e->nargs - 1 && tc_ir_uses_var(e->args[i], vc)))
				return 0;
		if (g->p->f->tensors[e->id].panel > 0) /* in panels: vc itself (llvm_loop.c) */
			return !tc_ir_uses_var(e->args[e->nargs - 1], vc) ||
				strip_int_casts(e->args[e->nargs - 1])->op == TC_OP_INDEX;
		return !tc_ir_uses_var(e->args[e->nargs - 1], vc) || unit_in(e->args[e->nargs - 1], vc);
	case TC_OP_NEG:
		return vec_ok_in(g, e->args[0], vc, t, calls);
	case TC_OP_CALL:
		if (!calls || e->nargs != 2 || (e->id != TC_BI_MIN && e->id != TC_BI_MAX &&
						   e->id != TC_BI_FMIN && e->id != TC_BI_FMAX))
			return 0;
		/* fall through */
	case TC_OP_ADD:
	case TC_OP_SUB:
	case TC_OP_MUL:
	case TC_OP_DIV:
		return vec_ok_in(g, e->args[0], vc, t, calls) &&
		       vec_ok_in(g, e->args[1], vc, t, calls);
	default:
		return 0;
	}
}

static int vec_ok(cg *g, const tc_ir_expr *e, int vc, tc_dtype t)
{
	return vec_ok_in(g, e, vc, t, 0);
}

/* Whether statement s can be computed along its domain dimension vc as
 * vectors (see above): an init, or a sum reduction whose right-hand side
 * vec_ok accepts and which does not read its own tensor (the tile keeps
 * its sums in registers), of a float32 or float64 tensor (not a 16-bit
 * float's accumulator) whose last left-hand dimension is vc. */
int tc_cg_llvm_vector_ok(__tc_keep cg *g, __tc_keep const tc_poly_stmt *s, int vc)
{
	const tc_ir_stmt *ir = s ? s->ir : NULL;
	const tc_ir_tensor *tt = ir ? &g->p->f->tensors[ir->tensor] : NULL;
	if (!ir || (tt->dtype != TC_T_F32 && tt->dtype != TC_T_F64) || tt->widened ||
		ir->nlhs < 1 || vc != ir->nlhs - 1 || s->ndims > CG_MAX_DIMS ||
		(g->stream && g->streamed[ir->tensor]))
		return 0;
	if (s->kind == TC_POLY_INIT)
		return 1;
	return s->kind == TC_POLY_UPDATE && ir->red == TC_RED_ADD &&
		!tc_ir_reads(ir->rhs, ir->tensor) && vec_ok(g, ir->rhs, vc, tt->dtype);
}

static LLVMValueRef vexpr(cg *g, const tc_ir_expr *e, int vc, int lanes);

/* Whether e reads a tensor in panels. */
static int reads_panels(cg *g, const tc_ir_expr *e)
{
	int i;
	if (e->op == TC_OP_READ && e->id >= 0 && e->id < g->p->f->ntensors &&
		g->p->f->tensors[e->id].panel > 0)
		return 1;
	for (i = 0; i < e->nargs; i++)
		if (reads_panels(g, e->args[i]))
			return 1;
	return 0;
}

int tc_cg_llvm_copy_ok(__tc_keep cg *g, __tc_keep const tc_poly_stmt *s, int va, int vb)
{
	const tc_ir_stmt *ir = s ? s->ir : NULL;
	const tc_ir_tensor *tt = ir ? &g->p->f->tensors[ir->tensor] : NULL;
	const tc_ir_expr *r = ir ? ir->rhs : NULL;
	int64_t lanes = tt ? g->p->target->vector_bytes / tc_dtype_size(tt->dtype) : 0;
	if (!ir || s->kind != TC_POLY_ASSIGN || (tt->dtype != TC_T_F32 && tt->dtype != TC_T_F64) ||
		tt->widened || ir->nlhs < 1 || vb != ir->nlhs - 1 || va < 0 || va > vb ||
		s->ndims > CG_MAX_DIMS || (g->stream && g->streamed[ir->tensor] && va == vb))
		return 0;
	/* a transpose computes from its reads (+ - * /, min and max of
	 * transposed reads, broadcasts and constants: vec_ok_in along va, each
	 * row of the square with its own value of vb); a copy along its rows
	 * reads once */
	if (va != vb && r->op != TC_OP_READ)
		return !tc_ir_reads(r, ir->tensor) && !reads_panels(g, r) &&
		       vec_ok_in(g, r, va, tt->dtype, 1) && tt->panel <= 0;
	if (r->op != TC_OP_READ ||
		r->id == ir->tensor || r->nargs < 1 || g->p->f->tensors[r->id].panel > 0 ||
		!unit_in(r->args[r->nargs - 1], va) ||
		(va != vb && (r->nargs < 2 || tc_ir_uses_var(r->args[r->nargs - 1], vb))))
		return 0;
	/* a packing copy's panels (ir/ir.h) hold whole vectors of a row */
	if (tt->panel > 0 && (!ir->pack || lanes < 1 || tt->panel % lanes))
		return 0;
	return vec_ok(g, r, va, tt->dtype);
}

LLVMValueRef tc_cg_llvm_vector_rhs(__tc_keep cg *g, __tc_keep const tc_poly_stmt *s, int va,
	int lanes)
{
	return vexpr(g, s->ir->rhs, va, lanes);
}

/* The vector type of `lanes` elements of tensor t. */
static LLVMTypeRef vec_type(cg *g, int t, int lanes)
{
	return LLVMVectorType(reg_type(g, g->p->f->tensors[t].dtype), (unsigned)lanes);
}

/* Scalar v in every lane of a vector of `lanes`. */
static LLVMValueRef splat(cg *g, LLVMValueRef v, int lanes)
{
	LLVMTypeRef vt = LLVMVectorType(LLVMTypeOf(v), (unsigned)lanes);
	LLVMValueRef one = LLVMBuildInsertElement(g->B, LLVMGetUndef(vt), v,
		LLVMConstInt(g->i32, 0, 0), "");
	return LLVMBuildShuffleVector(g->B, one, LLVMGetUndef(vt),
		LLVMConstNull(LLVMVectorType(g->i32, (unsigned)lanes)), "");
}

/* The mask of a vector of `lanes` whose first g->vactive lanes are in use. */
static LLVMValueRef lane_mask(cg *g, int lanes)
{
	LLVMValueRef bits[64];
	int i;
	for (i = 0; i < lanes && i < 64; i++)
		bits[i] = LLVMConstInt(g->i1, i < g->vactive, 0);
	return LLVMConstVector(bits, (unsigned)(lanes < 64 ? lanes : 64));
}

/* The vector of `lanes` elements of tensor t from addr (lane 0's element). */
LLVMValueRef tc_cg_llvm_vector_load(__tc_keep cg *g, int t, __tc_keep LLVMValueRef addr,
	int lanes)
{
	LLVMValueRef v;
	if (!addr)
		return NULL;
	if (g->vactive > 0 && g->vactive < lanes) {
		LLVMTypeRef over[2] = {vec_type(g, t, lanes), g->ptr};
		LLVMValueRef args[4] = {addr, LLVMConstInt(g->i32,
			(unsigned long long)tc_dtype_size(g->p->f->tensors[t].dtype), 0),
			lane_mask(g, lanes), LLVMConstNull(over[0])};
		v = tc_cg_llvm_call_intrinsic(g, "llvm.masked.load", over, 2, args, 4);
	} else {
		v = LLVMBuildLoad2(g->B, vec_type(g, t, lanes), addr, "");
		LLVMSetAlignment(v, (unsigned)tc_dtype_size(g->p->f->tensors[t].dtype));
	}
	if (v)
		tag_access(g, t, v);
	return v;
}

/* Store vector v into `lanes` elements of tensor t from addr. */
LLVMValueRef tc_cg_llvm_vector_store(__tc_keep cg *g, int t, __tc_keep LLVMValueRef addr,
	__tc_keep LLVMValueRef v)
{
	LLVMValueRef st;
	int lanes;
	if (!addr || !v)
		return NULL;
	lanes = (int)LLVMGetVectorSize(LLVMTypeOf(v));
	if (g->vactive > 0 && g->vactive < lanes) {
		LLVMTypeRef over[2] = {LLVMTypeOf(v), g->ptr};
		LLVMValueRef args[4] = {v, addr, LLVMConstInt(g->i32,
			(unsigned long long)tc_dtype_size(g->p->f->tensors[t].dtype), 0),
			lane_mask(g, lanes)};
		st = tc_cg_llvm_call_intrinsic(g, "llvm.masked.store", over, 2, args, 4);
	} else {
		st = LLVMBuildStore(g->B, v, addr);
		LLVMSetAlignment(st, (unsigned)tc_dtype_size(g->p->f->tensors[t].dtype));
	}
	if (st)
		tag_access(g, t, st);
	return st;
}

/* fused() on vectors of float type t. */
static LLVMValueRef vfused(cg *g, LLVMValueRef x, LLVMValueRef y, LLVMValueRef z)
{
	LLVMTypeRef ty;
	LLVMValueRef args[3] = {x, y, z}, r;
	if (!x || !y || !z)
		return NULL;
	ty = LLVMTypeOf(x);
	r = tc_cg_llvm_call_intrinsic(g, !g->h || g->h->fma ? "llvm.fmuladd" : "llvm.fma", &ty, 1,
		args, 3);
	if (r && g->opts.fastmath)
		LLVMSetFastMathFlags(r, LLVMFastMathAllowReassoc | LLVMFastMathAllowContract |
			LLVMFastMathNoSignedZeros);
	return r;
}

/* The value of e (vec_ok) as a vector of `lanes` along vc, g->dom holding
 * lane 0's domain values. */
static LLVMValueRef vexpr(cg *g, const tc_ir_expr *e, int vc, int lanes)
{
	LLVMValueRef a, b, idx[TC_MAX_RANK], addr;
	tc_ir_fma m;
	int i;
	if (g->failed)
		return NULL;
	switch (e->op) {
	case TC_OP_CONST:
		return splat(g, constant(g, e->type, e->c.i, e->c.f), lanes);
	case TC_OP_READ:
		for (i = 0; i < e->nargs; i++) {
			tc_dtype at = e->args[i]->type;
			if ((idx[i] = plain_index(g, e->args[i], e->id, i)))
				continue;
			idx[i] = convert(g, expr(g, e->args[i]), at,
				tc_dtype_is_signed(at) ? TC_T_I64 : TC_T_U64);
			if (!idx[i])
				return NULL;
		}
		addr = element(g, e->id, idx, e->nargs);
		if (tc_ir_uses_var(e->args[e->nargs - 1], vc))
			return tc_cg_llvm_vector_load(g, e->id, addr, lanes);
		a = load(g, e->id, addr);
		return a ? splat(g, a, lanes) : NULL;
	case TC_OP_NEG:
		a = vexpr(g, e->args[0], vc, lanes);
		return a ? LLVMBuildFNeg(g->B, a, "") : NULL;
	case TC_OP_CALL: /* min, max, fmin, fmax (vec_ok_in) */
		a = vexpr(g, e->args[0], vc, lanes);
		b = vexpr(g, e->args[1], vc, lanes);
		return minmax(g, e->type, a, b, e->id == TC_BI_MAX || e->id == TC_BI_FMAX);
	default:
		if (g->opts.contract && tc_ir_fma_of(e, &m)) {
			LLVMValueRef x, y, z = NULL;
			if (!m.product_first && !(z = vexpr(g, m.z, vc, lanes))) /* in the order written */
				return NULL;
			if (!(x = vexpr(g, m.x, vc, lanes)) || !(y = vexpr(g, m.y, vc, lanes)) ||
				(!z && !(z = vexpr(g, m.z, vc, lanes))))
				return NULL;
			return vfused(g, m.neg_xy ? LLVMBuildFNeg(g->B, x, "") : x, y,
				m.neg_z ? LLVMBuildFNeg(g->B, z, "") : z);
		}
		a = vexpr(g, e->args[0], vc, lanes);
		b = vexpr(g, e->args[1], vc, lanes);
		return a && b ? float_arith(g, e->op, e->type, a, b) : NULL;
	}
}

/* The address of lane 0's left-hand element of statement s, g->dom
 * holding its domain values (at least the left-hand ones). */
LLVMValueRef tc_cg_llvm_lhs_address(__tc_keep cg *g, __tc_keep const tc_poly_stmt *s)
{
	return element(g, s->ir->tensor, g->dom, s->ir->nlhs);
}

/* The new value of `lanes` elements of statement s (tc_cg_llvm_vector_ok
 * along vc) at g->dom (lane 0's domain values): the identity for an init;
 * for a sum, acc (the elements' current values) plus the right-hand side,
 * as the scalar statement computes it per element (fused by the contract
 * rule). */
LLVMValueRef tc_cg_llvm_vector_value(__tc_keep cg *g, __tc_keep const tc_poly_stmt *s, int vc,
	int lanes, __tc_keep LLVMValueRef acc)
{
	const tc_ir_stmt *ir = s->ir;
	tc_dtype dt = g->p->f->tensors[ir->tensor].dtype;
	const tc_ir_expr *fx, *fy;
	LLVMValueRef v;
	if (s->kind == TC_POLY_INIT)
		return splat(g, identity(g, ir->red, dt), lanes);
	if (!acc)
		return NULL;
	if (g->opts.contract && tc_ir_fma_reduction(ir, dt, 0, &fx, &fy)) {
		LLVMValueRef x = vexpr(g, fx, vc, lanes), y = x ? vexpr(g, fy, vc, lanes) : NULL;
		return vfused(g, x, y, acc);
	}
	v = vexpr(g, ir->rhs, vc, lanes);
	return v ? float_arith(g, TC_OP_ADD, dt, acc, v) : NULL;
}
