/* CPU code generation through the LLVM-C API (see llvm.h for the contract).
 *
 * One kernel is one LLVM function  void tc_NAME_K(ptr tensors)  built by a
 * walk over the isl AST of a tc_poly:
 *
 *   for    an i64 stack slot for the iterator (alloca in the entry block;
 *          O3's SROA/mem2reg turns it into a phi), a condition block, the
 *          body and the increment; a degenerate loop runs its body once.
 *          The back edge of an innermost loop carries the vector and
 *          unroll_inner options as llvm.loop metadata (loop_hints).
 *   if     a conditional branch; block: the children in order; mark: its
 *          child (marks carry nothing the sequential CPU code needs yet).
 *   user   the tc_poly_inst annotation: each domain dimension of the
 *          statement is evaluated from its isl expression, then the
 *          statement body is generated from the IR expression tree.
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
 *     Division by zero, which the interpreter reports as an error, gives 0
 *     here: the divisor is replaced by 1 through a select first, so the
 *     LLVM division is never undefined behaviour.  x / -1 is computed as
 *     -x (wrapping) and x % -1 as 0, so INT_MIN / -1 is no trap either;
 *   - float16 operations extend to float, operate and truncate: float's
 *     24-bit significand is more than 2 * 11 + 2 bits, so + - * / are
 *     correctly rounded (no double-rounding error);
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

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/DebugInfo.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include <isl/ast.h>
#include <isl/id.h>
#include <isl/val.h>

#include <float.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- code generation state ---- */

/* An AST iterator in scope and its stack slot. */
typedef struct cg_iter {
	isl_id *id;
	LLVMValueRef slot;
} cg_iter;

#define CG_MAX_DIMS 64

typedef struct cg {
	const tc_poly *p;
	tc_diags *d;
	int failed;
	LLVMContextRef C;
	LLVMModuleRef M;
	LLVMBuilderRef B;     /* code */
	LLVMBuilderRef A;     /* the entry block: allocas, tensor pointers */
	LLVMValueRef fn;
	LLVMTypeRef i1, i8, i16, i32, i64, f16, f32, f64, ptr, vd;
	LLVMValueRef *base;   /* data pointer of each tensor */
	LLVMValueRef *scope;  /* per tensor: its alias scope list, then ... */
	LLVMValueRef *noalias; /* ... the list of every other tensor's scope */
	unsigned md_scope, md_noalias; /* metadata kinds alias.scope and noalias */
	int64_t *ext;         /* extents: ext[t * TC_MAX_RANK + k] */
	cg_iter *iters;
	int niters, cap;
	LLVMValueRef dom[CG_MAX_DIMS]; /* domain values of the current statement */
	int ndom;
	LLVMValueRef err;  /* the error record: int64_t[2] */
	LLVMValueRef tensors; /* the current function's tensor array argument */
	const cg_host *h;     /* for the attributes of outlined functions */
	int nparallel;     /* outlined parallel loops so far */
	int guarded;       /* inside a branch of ?: or the right side of && || */
	int ordered;       /* inside a register tile: reductions keep their order */
	unsigned char *streamed; /* per tensor: written with streaming stores */
	int stream;        /* emitting the copy of the code that streams */
	unsigned md_loop;  /* metadata kind llvm.loop */
	tc_cg_site *sites; /* the run-time checks */
	int nsites, capsites;
} cg;

static LLVMValueRef fail(cg *g, const char *what, const char *detail)
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
	case TC_T_F32: return g->f32;
	case TC_T_F64: return g->f64;
	default: return NULL;
	}
}

/* The memory type of elements of type t (bool is a byte). */
static LLVMTypeRef mem_type(cg *g, tc_dtype t)
{
	return t == TC_T_BOOL ? g->i8 : reg_type(g, t);
}

static LLVMValueRef i64c(cg *g, int64_t v)
{
	return LLVMConstInt(g->i64, (unsigned long long)v, 1);
}

/* ---- calls ---- */

/* Call intrinsic name (base name, e.g. "llvm.sin") overloaded on types. */
static LLVMValueRef call_intrinsic(cg *g, const char *name, LLVMTypeRef *over, int nover,
	LLVMValueRef *args, int nargs)
{
	unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
	LLVMValueRef f;
	if (!id)
		return fail(g, "unknown intrinsic ", name);
	f = LLVMGetIntrinsicDeclaration(g->M, id, over, (size_t)nover);
	return LLVMBuildCall2(g->B, LLVMIntrinsicGetType(g->C, id, over, (size_t)nover), f, args,
		(unsigned)nargs, "");
}

static void add_fn_attr(cg *g, LLVMValueRef f, const char *name, uint64_t val)
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
		add_fn_attr(g, f, "nounwind", 0);
		add_fn_attr(g, f, "willreturn", 0);
		if (pure)
			add_fn_attr(g, f, "memory", 0); /* memory(none) */
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

/* A double computed exactly or by a builtin, rounded once to float type t. */
static LLVMValueRef round_double(cg *g, LLVMValueRef v, tc_dtype t)
{
	if (!v)
		return NULL;
	if (t == TC_T_F32)
		return LLVMBuildFPTrunc(g->B, v, g->f32, "");
	if (t == TC_T_F16)
		return half_from_double(g, v);
	return v;
}

static LLVMValueRef to_double(cg *g, LLVMValueRef v, tc_dtype t)
{
	return t == TC_T_F64 ? v : LLVMBuildFPExt(g->B, v, g->f64, "");
}

/* Convert v from type from to type to (the interpreter's convert()). */
static LLVMValueRef convert(cg *g, LLVMValueRef v, tc_dtype from, tc_dtype to)
{
	LLVMTypeRef tt = reg_type(g, to);
	if (!v || from == to)
		return v;
	if (!tt || !reg_type(g, from))
		return fail(g, "conversion between unknown types", NULL);
	if (to == TC_T_BOOL) {
		if (tc_dtype_is_float(from)) /* NaN is true, as in C */
			return LLVMBuildFCmp(g->B, LLVMRealUNE, v, LLVMConstReal(reg_type(g, from), 0),
				"");
		return LLVMBuildICmp(g->B, LLVMIntNE, v, LLVMConstInt(reg_type(g, from), 0, 0), "");
	}
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
						     : LLVMBuildUIToFP(g->B, v, g->f32, "");
			return LLVMBuildFPTrunc(g->B, v, g->f16, "");
		}
		return tc_dtype_is_signed(from) ? LLVMBuildSIToFP(g->B, v, tt, "")
						: LLVMBuildUIToFP(g->B, v, tt, "");
	}
	if (tc_dtype_is_float(from)) { /* saturating, NaN -> 0 */
		LLVMTypeRef over[2];
		if (from == TC_T_F16)
			v = LLVMBuildFPExt(g->B, v, g->f32, "");
		over[0] = tt;
		over[1] = LLVMTypeOf(v);
		return call_intrinsic(g, tc_dtype_is_signed(to) ? "llvm.fptosi.sat" : "llvm.fptoui.sat",
			over, 2, &v, 1);
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

/* ---- isl AST expressions ---- */

static LLVMValueRef as_i64(cg *g, LLVMValueRef v)
{
	if (v && LLVMTypeOf(v) == g->i1)
		return LLVMBuildZExt(g->B, v, g->i64, "");
	return v;
}

static LLVMValueRef as_i1(cg *g, LLVMValueRef v)
{
	if (v && LLVMTypeOf(v) != g->i1)
		return LLVMBuildICmp(g->B, LLVMIntNE, v, i64c(g, 0), "");
	return v;
}

static LLVMValueRef ast_expr(cg *g, isl_ast_expr *e);

static LLVMValueRef ast_int(cg *g, isl_ast_expr *e)
{
	isl_val *v = isl_ast_expr_get_val(e);
	LLVMValueRef r = NULL;
	if (!v || isl_val_is_int(v) != isl_bool_true || isl_val_cmp_si(v, LONG_MAX) > 0 ||
		isl_val_cmp_si(v, LONG_MIN) < 0)
		fail(g, "an integer of the AST does not fit in 64 bits", NULL);
	else
		r = i64c(g, isl_val_get_num_si(v));
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
	} else if ((k = tc_poly_param_index(g->p, name)) >= 0 && g->p->params) {
		r = i64c(g, g->p->params[k]);
	} else {
		fail(g, "unknown identifier in the AST: ", name ? name : "?");
	}
	isl_id_free(id);
	return r;
}

static LLVMValueRef ast_arg(cg *g, isl_ast_expr *e, int i)
{
	isl_ast_expr *a = isl_ast_expr_op_get_arg(e, i);
	LLVMValueRef r = a ? ast_expr(g, a) : fail(g, "malformed AST expression", NULL);
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
		return fail(g, "malformed AST expression", NULL);
	switch (op) {
	case isl_ast_expr_op_minus:
		a = as_i64(g, ast_arg(g, e, 0));
		return a ? LLVMBuildNSWNeg(g->B, a, "") : NULL;
	case isl_ast_expr_op_min:
	case isl_ast_expr_op_max:
		r = as_i64(g, ast_arg(g, e, 0));
		for (i = 1; i < n && r; i++) {
			b = as_i64(g, ast_arg(g, e, i));
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
			return fail(g, "malformed AST conditional", NULL);
		c = as_i1(g, ast_arg(g, e, 0));
		a = ast_arg(g, e, 1);
		b = ast_arg(g, e, 2);
		if (!c || !a || !b)
			return NULL;
		if (LLVMTypeOf(a) != LLVMTypeOf(b)) {
			a = as_i64(g, a);
			b = as_i64(g, b);
		}
		return LLVMBuildSelect(g->B, c, a, b, "");
	default:
		break;
	}
	if (n != 2)
		return fail(g, "unsupported AST operation", NULL);
	a = ast_arg(g, e, 0);
	b = ast_arg(g, e, 1);
	if (!a || !b)
		return NULL;
	switch (op) {
	case isl_ast_expr_op_and:
	case isl_ast_expr_op_and_then: /* no side effects: no need to branch */
		return LLVMBuildAnd(g->B, as_i1(g, a), as_i1(g, b), "");
	case isl_ast_expr_op_or:
	case isl_ast_expr_op_or_else:
		return LLVMBuildOr(g->B, as_i1(g, a), as_i1(g, b), "");
	default:
		break;
	}
	a = as_i64(g, a);
	b = as_i64(g, b);
	switch (op) {
	case isl_ast_expr_op_add: return LLVMBuildNSWAdd(g->B, a, b, "");
	case isl_ast_expr_op_sub: return LLVMBuildNSWSub(g->B, a, b, "");
	case isl_ast_expr_op_mul: return LLVMBuildNSWMul(g->B, a, b, "");
	case isl_ast_expr_op_div: /* exact */
		if (LLVMIsAConstantInt(b) && LLVMConstIntGetSExtValue(b) > 0)
			return LLVMBuildExactSDiv(g->B, a, b, "");
		return int_divmod(g, a, b, 1, 0, 0);
	case isl_ast_expr_op_fdiv_q: return int_divmod(g, a, b, 1, 1, 0);
	case isl_ast_expr_op_pdiv_q: return int_divmod(g, a, b, 1, 0, 0);
	case isl_ast_expr_op_pdiv_r:
	case isl_ast_expr_op_zdiv_r: return int_divmod(g, a, b, 1, 0, 1);
	case isl_ast_expr_op_eq: return LLVMBuildICmp(g->B, LLVMIntEQ, a, b, "");
	case isl_ast_expr_op_le: return LLVMBuildICmp(g->B, LLVMIntSLE, a, b, "");
	case isl_ast_expr_op_lt: return LLVMBuildICmp(g->B, LLVMIntSLT, a, b, "");
	case isl_ast_expr_op_ge: return LLVMBuildICmp(g->B, LLVMIntSGE, a, b, "");
	case isl_ast_expr_op_gt: return LLVMBuildICmp(g->B, LLVMIntSGT, a, b, "");
	default: return fail(g, "unsupported AST operation", NULL);
	}
}

/* An isl AST expression: i64, or i1 for conditions. */
static LLVMValueRef ast_expr(cg *g, isl_ast_expr *e)
{
	if (g->failed)
		return NULL;
	switch (isl_ast_expr_get_type(e)) {
	case isl_ast_expr_int: return ast_int(g, e);
	case isl_ast_expr_id: return ast_id(g, e);
	case isl_ast_expr_op: return ast_op(g, e);
	default: return fail(g, "malformed AST expression", NULL);
	}
}

/* ---- tensor accesses ---- */

/* How many leading subscripts of tensor t select a row of its row buffer
 * (polyhedral/contract.c), or 0: t is kept whole. */
static int row_dims(cg *g, int t)
{
	return g->p->rowbuf ? g->p->rowbuf[t] : 0;
}

/* The row buffer of tensor t (j leading subscripts dropped): an array on
 * the stack of the function being generated, allocated in its entry block,
 * so that each outlined parallel loop's activation, one per thread and
 * chunk, has its own. */
static LLVMValueRef row_buffer(cg *g, int t, int j)
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
static LLVMValueRef element(cg *g, int t, LLVMValueRef *idx, int n)
{
	const tc_ir_tensor *tt = &g->p->f->tensors[t];
	LLVMTypeRef ty = mem_type(g, tt->dtype);
	int k, j = row_dims(g, t); /* a row buffer: its row's subscripts only */
	if (n != tt->ndim)
		return fail(g, "wrong number of subscripts for ", tt->name);
	for (k = 0; k < n; k++)
		if (!idx[k])
			return NULL;
	for (k = n - 1; k >= j + 1; k--)
		ty = LLVMArrayType2(ty, (uint64_t)g->ext[t * TC_MAX_RANK + k]);
	return LLVMBuildInBoundsGEP2(g->B, ty, g->base[t], idx + j, (unsigned)(n - j), "");
}

/* Tensors never overlap (tc_kernel_run refuses outputs that overlap another
 * tensor; the workspace gives each intermediate its own region), so every
 * access says which tensor it touches: scoped noalias metadata, one scope
 * per tensor.  Without it LLVM must assume a store to C may change A or B,
 * and can neither keep C's accumulators in registers across a reduction
 * loop nor vectorise without run-time overlap checks. */
static void alias_scopes(cg *g)
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
		fail(g, "out of memory", NULL);
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
	return v;
}

static void store(cg *g, int t, LLVMValueRef addr, LLVMValueRef v)
{
	if (!addr || !v)
		return;
	if (g->p->f->tensors[t].dtype == TC_T_BOOL)
		v = LLVMBuildZExt(g->B, v, g->i8, "");
	tag_access(g, t, LLVMBuildStore(g->B, v, addr));
}

static LLVMBasicBlockRef new_block(cg *g, const char *name);

/* ---- run-time checks ---- */

/* A new check site: its number, or -1 (failure recorded). */
static int add_site(cg *g, tc_cg_site site)
{
	if (g->nsites == g->capsites) {
		int cap = g->capsites ? 2 * g->capsites : 8;
		tc_cg_site *v = tc_realloc(g->sites, (size_t)cap * sizeof(*v));
		if (!v) {
			fail(g, "out of memory", NULL);
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
	LLVMBasicBlockRef fail_b = new_block(g, "check.fail");
	LLVMBasicBlockRef rec = new_block(g, "check.record");
	LLVMBasicBlockRef cont = new_block(g, "check.ok");
	LLVMValueRef one = i64c(g, 1), first, slot1;
	LLVMBuildCondBr(g->B, bad, fail_b, cont);
	LLVMPositionBuilderAtEnd(g->B, fail_b);
	/* the first failure wins, also between the threads of a parallel loop */
	first = LLVMBuildAtomicCmpXchg(g->B, g->err, i64c(g, 0), i64c(g, site + 1),
		LLVMAtomicOrderingSequentiallyConsistent, LLVMAtomicOrderingMonotonic, 0);
	LLVMBuildCondBr(g->B, LLVMBuildExtractValue(g->B, first, 1, ""), rec, cont);
	LLVMPositionBuilderAtEnd(g->B, rec);
	slot1 = LLVMBuildInBoundsGEP2(g->B, g->i64, g->err, &one, 1, "");
	LLVMBuildStore(g->B, v, slot1);
	LLVMBuildBr(g->B, cont);
	LLVMPositionBuilderAtEnd(g->B, cont);
}

/* ---- IR expressions ---- */

static LLVMValueRef expr(cg *g, const tc_ir_expr *e);

static LLVMValueRef constant(cg *g, tc_dtype t, int64_t i, double f)
{
	LLVMTypeRef ty = reg_type(g, t);
	if (!ty)
		return fail(g, "constant of unknown type", NULL);
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
		q = call_intrinsic(g, "llvm.floor", &dt, 1, &q, 1);
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
	/* the contract option: let LLVM fuse a multiply and an add into an
	 * FMA (one rounding instead of two); fastmath also lets it reorder
	 * sums and products (vectorised reductions) and divide by a
	 * reciprocal (a / b as a * (1 / b), 1 / b hoisted out of loops);
	 * float16 keeps its exact steps */
	if (g->p->opts.contract && t != TC_T_F16 && LLVMIsAInstruction(r))
		LLVMSetFastMathFlags(r, (op != TC_OP_DIV ? LLVMFastMathAllowContract : 0) |
			(g->p->opts.fastmath ? LLVMFastMathAllowReassoc | LLVMFastMathNoSignedZeros |
				(op == TC_OP_DIV ? LLVMFastMathAllowReciprocal : 0) : 0));
	return t == TC_T_F16 ? LLVMBuildFPTrunc(g->B, r, g->f16, "") : r;
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
	default: return fail(g, "bad arithmetic operation", NULL);
	}
}

/* min or max of a and b of type t.  The interpreter's rule for integers,
 * a <= b ? a : b (max: a >= b ? a : b), and for floats the same with a NaN
 * b ignored: (a <= b || b is NaN) ? a : b.  That is NaN-ignoring like
 * llvm.minnum, and also fixes the choice between -0 and +0 (the first
 * operand), which llvm.minnum and C's fmin (what the interpreter calls)
 * leave open.  (glibc's x86-64 fmin returns the second operand of a tie,
 * but GCC may swap the operands of that commutative builtin, so the
 * interpreter's choice depends on how it was compiled.) */
/* llvm.maxnum/minnum of floats a and b with either zero of a tie and no
 * NaN operands assumed (what LLVM's vectoriser needs for min/max
 * reductions). */
static LLVMValueRef nnan_minmax(cg *g, LLVMValueRef a, LLVMValueRef b, int is_max)
{
	LLVMValueRef c, args[2];
	LLVMTypeRef ty = LLVMTypeOf(a);
	args[0] = a;
	args[1] = b;
	c = call_intrinsic(g, is_max ? "llvm.maxnum" : "llvm.minnum", &ty, 1, args, 2);
	if (c)
		LLVMSetFastMathFlags(c, LLVMFastMathNoSignedZeros | LLVMFastMathNoNaNs);
	return c;
}

static LLVMValueRef minmax(cg *g, tc_dtype t, LLVMValueRef a, LLVMValueRef b, int is_max)
{
	LLVMValueRef c;
	if (!a || !b)
		return NULL;
	if (tc_dtype_is_float(t) && t != TC_T_F16 && g->p->opts.fastmath)
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

static LLVMBasicBlockRef new_block(cg *g, const char *name)
{
	return LLVMAppendBasicBlockInContext(g->C, g->fn, name);
}

/* a && b, a || b: b is evaluated only when it decides. */
static LLVMValueRef short_circuit(cg *g, const tc_ir_expr *e)
{
	int is_and = e->op == TC_OP_AND;
	LLVMValueRef a = expr(g, e->args[0]), b, phi, vals[2];
	LLVMBasicBlockRef from, rhs, join, blocks[2];
	if (!a)
		return NULL;
	from = LLVMGetInsertBlock(g->B);
	rhs = new_block(g, is_and ? "and.rhs" : "or.rhs");
	join = new_block(g, is_and ? "and.end" : "or.end");
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

/* a ? b : c with only the chosen branch evaluated. */
static LLVMValueRef select_expr(cg *g, const tc_ir_expr *e)
{
	LLVMValueRef c = expr(g, e->args[0]), vals[2], phi;
	LLVMBasicBlockRef yes, no, join, blocks[2];
	if (!c)
		return NULL;
	yes = new_block(g, "sel.then");
	no = new_block(g, "sel.else");
	join = new_block(g, "sel.end");
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

/* float16 nextafter from the bits, as the interpreter's half_nextafter. */
static LLVMValueRef half_nextafter(cg *g, LLVMValueRef a, LLVMValueRef b)
{
	LLVMValueRef h = LLVMBuildBitCast(g->B, a, g->i16, "");
	LLVMValueRef zero = LLVMConstReal(g->f16, 0);
	LLVMValueRef nan = LLVMBuildFCmp(g->B, LLVMRealUNO, a, b, "");
	LLVMValueRef eq = LLVMBuildFCmp(g->B, LLVMRealOEQ, a, b, "");
	LLVMValueRef az = LLVMBuildFCmp(g->B, LLVMRealOEQ, a, zero, "");
	LLVMValueRef up = LLVMBuildICmp(g->B, LLVMIntEQ, LLVMBuildFCmp(g->B, LLVMRealOGT, b, a, ""),
		LLVMBuildFCmp(g->B, LLVMRealOGT, a, zero, ""), "");
	LLVMValueRef step = LLVMBuildSelect(g->B, up,
		LLVMBuildAdd(g->B, h, LLVMConstInt(g->i16, 1, 0), ""),
		LLVMBuildSub(g->B, h, LLVMConstInt(g->i16, 1, 0), ""), "");
	LLVMValueRef tiny = LLVMBuildSelect(g->B, LLVMBuildFCmp(g->B, LLVMRealOGT, b, zero, ""),
		LLVMConstInt(g->i16, 0x0001, 0), LLVMConstInt(g->i16, 0x8001, 0), "");
	LLVMValueRef r = LLVMBuildBitCast(g->B, LLVMBuildSelect(g->B, az, tiny, step, ""), g->f16, "");
	r = LLVMBuildSelect(g->B, eq, b, r, "");
	return LLVMBuildSelect(g->B, nan, float_arith(g, TC_OP_ADD, TC_T_F16, a, b), r, "");
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
	t = call_intrinsic(g, "llvm.fma", &f, 1, a, 3);
	n = LLVMBuildFSub(g->B, t, FC(magic), "");
	a[0] = n;
	a[1] = FC(-0.693359375);
	a[2] = r;
	r = call_intrinsic(g, "llvm.fma", &f, 1, a, 3);
	a[1] = FC(2.12194440e-4);
	a[2] = r;
	r = call_intrinsic(g, "llvm.fma", &f, 1, a, 3);
	p = FC(poly[0]);
	for (i = 1; i < sizeof(poly) / sizeof(poly[0]); i++) {
		a[0] = p;
		a[1] = r;
		a[2] = FC(poly[i]);
		p = call_intrinsic(g, "llvm.fma", &f, 1, a, 3);
	}
	a[0] = p;
	a[1] = LLVMBuildFMul(g->B, r, r, "");
	a[2] = LLVMBuildFAdd(g->B, r, FC(1.0), "");
	e = call_intrinsic(g, "llvm.fma", &f, 1, a, 3);
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
static LLVMValueRef plain_index(cg *g, const tc_ir_expr *sub, int t, int k)
{
	while (sub->op == TC_OP_CAST && tc_dtype_is_int(sub->type) && tc_dtype_bits(sub->type) >= 32 &&
		tc_dtype_is_int(sub->args[0]->type))
		sub = sub->args[0];
	if (sub->op != TC_OP_INDEX || g->guarded || sub->id < 0 || sub->id >= g->ndom ||
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
		return call_intrinsic(g, "llvm.ldexp", over, 2, a, 2);
	}
	if (id == TC_BI_JN || id == TC_BI_YN) {
		d[0] = LLVMBuildSIToFP(g->B, a[0], g->f64, "");
		d[1] = to_double(g, a[1], t);
		return round_double(g, call_wrapper(g, id, d, 2), t);
	}
	if (id == TC_BI_EXP && t == TC_T_F32)
		return inline_expf(g, a[0]);
	if (bi->intr)
		return call_intrinsic(g, bi->intr, &ft, 1, a, n);
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
		return fail(g, "malformed builtin call", NULL);
	for (i = 0; i < n; i++) /* every argument is evaluated, as in the interpreter */
		if (!(a[i] = expr(g, e->args[i])))
			return NULL;
	if (id == TC_BI_MIN || id == TC_BI_MAX || id == TC_BI_FMIN || id == TC_BI_FMAX) {
		if (n != 2)
			return fail(g, "malformed builtin call", NULL);
		return minmax(g, t, a[0], a[1], id == TC_BI_MAX || id == TC_BI_FMAX);
	}
	if (id == TC_BI_ILOGB) { /* int result of the double computation */
		LLVMValueRef x = to_double(g, a[0], e->args[0]->type);
		r = call_wrapper(g, id, &x, 1);
		return r ? LLVMBuildFPToSI(g->B, r, reg_type(g, t), "") : NULL;
	}
	if (!tc_dtype_is_float(t))
		return fail(g, "builtin of non-float type", NULL);
	if (t != TC_T_F16)
		return float_builtin(g, id, t, a, n);
	if (id == TC_BI_NEXTAFTER)
		return half_nextafter(g, a[0], a[1]);
	/* float16: in double, rounded once (as the interpreter) */
	for (i = 0; i < n; i++)
		if (e->args[i]->type == TC_T_F16)
			a[i] = LLVMBuildFPExt(g->B, a[i], g->f64, "");
	return round_double(g, float_builtin(g, id, TC_T_F64, a, n), TC_T_F16);
}

/* The value of IR expression e, in its register type. */
static LLVMValueRef expr(cg *g, const tc_ir_expr *e)
{
	LLVMValueRef a, b, idx[TC_MAX_RANK];
	tc_dtype at;
	int i;

	if (g->failed)
		return NULL;
	switch (e->op) {
	case TC_OP_CONST:
		return constant(g, e->type, e->c.i, e->c.f);
	case TC_OP_INDEX:
		if (e->id < 0 || e->id >= g->ndom)
			return fail(g, "index variable outside the statement's domain", NULL);
		return convert(g, g->dom[e->id], TC_T_I64, e->type);
	case TC_OP_SIZE:
		if (!g->p->params || e->id < 0 || e->id >= g->p->f->nparams)
			return fail(g, "unknown size", NULL);
		return constant(g, e->type, g->p->params[e->id], 0);
	case TC_OP_READ:
		if (e->nargs > TC_MAX_RANK || e->id < 0 || e->id >= g->p->f->ntensors)
			return fail(g, "malformed tensor read", NULL);
		for (i = 0; i < e->nargs; i++) {
			at = e->args[i]->type;
			if (!tc_dtype_is_int(at))
				return fail(g, "non-integer subscript", NULL);
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
					i64c(g, g->ext[e->id * TC_MAX_RANK + i]), "");
				check(g, bad, n, idx[i]);
				idx[i] = LLVMBuildSelect(g->B, bad, i64c(g, 0), idx[i], "");
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
		a = expr(g, e->args[0]);
		b = expr(g, e->args[1]);
		if (a && b && (e->op == TC_OP_DIV || e->op == TC_OP_MOD) &&
			!tc_dtype_is_float(e->type) && !LLVMIsAConstantInt(b)) {
			tc_cg_site site = {TC_CG_CHECK_DIV, e->loc, -1, -1,
				e->op == TC_OP_DIV ? '/' : '%'};
			int n = add_site(g, site);
			if (n < 0)
				return NULL;
			check(g, LLVMBuildICmp(g->B, LLVMIntEQ, b, LLVMConstInt(LLVMTypeOf(b), 0, 0), ""),
				n, i64c(g, 0));
		}
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
	return fail(g, "unknown IR operation", NULL);
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
			return constant(g, t, 0, t == TC_T_F16 ? 65504.0 : t == TC_T_F32 ? FLT_MAX : DBL_MAX);
		if (t == TC_T_BOOL || tc_dtype_is_unsigned(t))
			return LLVMConstAllOnes(reg_type(g, t));
		return constant(g, t, bits == 64 ? INT64_MAX : (INT64_C(1) << (bits - 1)) - 1, 0);
	case TC_RED_MAX: /* the lowest value */
		if (fl)
			return constant(g, t, 0,
				t == TC_T_F16 ? -65504.0 : t == TC_T_F32 ? -FLT_MAX : -DBL_MAX);
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
 * A sum or product gets the reassoc flag on its accumulating operation
 * only (the right-hand side keeps its exact steps).  max/min with init
 * keep the interpreter's value: a NaN v is replaced by the identity, which
 * acc (never NaN, never beyond the identity) absorbs, so llvm.maxnum may
 * assume no NaN operands, and every order gives the same maximum (but for
 * the sign of a zero in a tie of -0 and +0). */
static LLVMValueRef reduce(cg *g, tc_red red, tc_dtype t, LLVMValueRef acc, LLVMValueRef v,
	int init)
{
	int vec = g->p->opts.vecreduce && !g->ordered && (t == TC_T_F32 || t == TC_T_F64);
	LLVMValueRef r;
	switch (red) {
	case TC_RED_ADD:
	case TC_RED_MUL:
		r = arith(g, red == TC_RED_ADD ? TC_OP_ADD : TC_OP_MUL, t, acc, v);
		if (vec && r && LLVMIsAInstruction(r) && LLVMCanValueUseFastMathFlags(r))
			LLVMSetFastMathFlags(r, LLVMGetFastMathFlags(r) | LLVMFastMathAllowReassoc);
		return r;
	case TC_RED_MIN:
	case TC_RED_MAX:
		if (!vec || !init || g->p->opts.fastmath || !acc || !v)
			return minmax(g, t, acc, v, red == TC_RED_MAX);
		return nnan_minmax(g, acc, LLVMBuildSelect(g->B, LLVMBuildFCmp(g->B, LLVMRealUNO, v, v, ""),
			identity(g, red, t), v, ""), red == TC_RED_MAX);
	default: return v;
	}
}

static void statement(cg *g, const tc_poly_inst *inst)
{
	const tc_poly_stmt *s = inst->stmt;
	const tc_ir_stmt *ir = s ? s->ir : NULL;
	tc_dtype dt;
	LLVMValueRef addr, v;
	int k;

	if (!ir || inst->n != s->ndims || inst->n > CG_MAX_DIMS || ir->nlhs > inst->n) {
		fail(g, "malformed statement instance", NULL);
		return;
	}
	for (k = 0; k < inst->n; k++)
		if (!(g->dom[k] = as_i64(g, ast_expr(g, inst->index[k]))))
			return;
	g->ndom = inst->n;
	dt = g->p->f->tensors[ir->tensor].dtype;
	addr = element(g, ir->tensor, g->dom, ir->nlhs);
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
		v = convert(g, expr(g, ir->rhs), ir->rhs->type, dt);
		if (ir->red != TC_RED_ASSIGN)
			v = reduce(g, ir->red, dt, load(g, ir->tensor, addr), v, ir->init);
		break;
	}
	store(g, ir->tensor, addr, v);
	g->ndom = 0;
}

/* ---- AST nodes ---- */

static void node(cg *g, isl_ast_node *n);

static LLVMValueRef iter_slot(cg *g, const char *name)
{
	return LLVMBuildAlloca(g->A, g->i64, name ? name : "it");
}

/* Room for one more iterator binding in g->iters; 0 (failure recorded) if
 * out of memory. */
static int room_for_iter(cg *g)
{
	if (g->niters == g->cap) {
		int cap = g->cap ? 2 * g->cap : 16;
		cg_iter *ni = tc_realloc(g->iters, (size_t)cap * sizeof(*ni));
		if (!ni) {
			fail(g, "out of memory", NULL);
			return 0;
		}
		g->iters = ni;
		g->cap = cap;
	}
	return 1;
}

/* ---- loop metadata: the vector and unroll_inner options ---- */

/* The bytes of a vector register the hints assume when LLVM chooses the
 * width (AVX-512, as the register tile's sizes do). */
#define HINT_VECTOR_BYTES 64

/* Whether n is a non-degenerate for node (*user set, and the walk skips
 * what lies below). */
static isl_bool loop_below_cb(isl_ast_node *n, void *user)
{
	int *found = user;
	if (*found)
		return isl_bool_false;
	if (isl_ast_node_get_type(n) == isl_ast_node_for &&
		isl_ast_node_for_is_degenerate(n) == isl_bool_false) {
		*found = 1;
		return isl_bool_false;
	}
	return isl_bool_true;
}

/* Whether body (of a for node) holds no loop: a degenerate for runs once
 * and is none; neither is a loop isl unrolled. */
static int is_innermost(isl_ast_node *body)
{
	int found = 0;
	if (isl_ast_node_foreach_descendant_top_down(body, loop_below_cb, &found) < 0)
		return 0;
	return !found;
}

/* The integer value of AST expression e, or 0 (with *ok cleared) if it is
 * not an integer. */
static int64_t ast_const(isl_ast_expr *e, int *ok)
{
	isl_val *v = e && isl_ast_expr_get_type(e) == isl_ast_expr_int ? isl_ast_expr_get_val(e) : NULL;
	int64_t r = 0;
	if (v && isl_val_is_int(v) == isl_bool_true)
		r = isl_val_get_num_si(v);
	else
		*ok = 0;
	isl_val_free(v);
	return r;
}

/* The number of iterations of for node n when its bounds and step are
 * constants ("for (i = LO; i <= HI; i += S)", or "<"), else 0. */
static int64_t trip_count(isl_ast_node *n)
{
	isl_ast_expr *init = isl_ast_node_for_get_init(n), *cond = isl_ast_node_for_get_cond(n);
	isl_ast_expr *inc = isl_ast_node_for_get_inc(n), *hi = NULL;
	int ok = init && cond && inc && isl_ast_expr_get_type(cond) == isl_ast_expr_op;
	int64_t lo = 0, ub = 0, step = 0, n_it = 0;
	enum isl_ast_expr_op_type op = ok ? isl_ast_expr_op_get_type(cond) : isl_ast_expr_op_error;
	if (op == isl_ast_expr_op_le || op == isl_ast_expr_op_lt) {
		hi = isl_ast_expr_op_get_arg(cond, 1);
		lo = ast_const(init, &ok);
		ub = ast_const(hi, &ok) - (op == isl_ast_expr_op_lt);
		step = ast_const(inc, &ok);
		if (ok && step > 0 && ub >= lo)
			n_it = (ub - lo) / step + 1;
	}
	isl_ast_expr_free(hi);
	isl_ast_expr_free(inc);
	isl_ast_expr_free(cond);
	isl_ast_expr_free(init);
	return n_it;
}

typedef struct widest_ctx {
	const tc_poly *p;
	int size;
} widest_ctx;

static void widest_read(const tc_ir_expr *e, int *size)
{
	int i, s;
	if (e->op == TC_OP_READ && (s = tc_dtype_size(e->type)) > *size)
		*size = s;
	for (i = 0; i < e->nargs; i++)
		widest_read(e->args[i], size);
}

static isl_bool widest_cb(isl_ast_node *n, void *user)
{
	widest_ctx *w = user;
	const tc_poly_inst *inst;
	int s;
	if (isl_ast_node_get_type(n) != isl_ast_node_user || !(inst = tc_poly_node_inst(n)))
		return isl_bool_true;
	s = tc_dtype_size(w->p->f->tensors[inst->stmt->ir->tensor].dtype);
	w->size = s > w->size ? s : w->size;
	widest_read(inst->stmt->ir->rhs, &w->size);
	return isl_bool_true;
}

/* The lanes the loop vectoriser gives loop body when it chooses: a
 * register of the widest element the body reads or writes (its rule). */
static int64_t auto_lanes(cg *g, isl_ast_node *body)
{
	widest_ctx w = {g->p, 0};
	isl_ast_node_foreach_descendant_top_down(body, widest_cb, &w);
	return w.size > 0 && w.size < HINT_VECTOR_BYTES ? HINT_VECTOR_BYTES / w.size : 1;
}

/* Whether AST expression e mentions the iterator id. */
static int expr_uses(isl_ast_expr *e, isl_id *id)
{
	isl_size i, n;
	int found = 0;
	if (isl_ast_expr_get_type(e) == isl_ast_expr_id) {
		isl_id *x = isl_ast_expr_get_id(e);
		found = x == id;
		isl_id_free(x);
		return found;
	}
	if (isl_ast_expr_get_type(e) != isl_ast_expr_op)
		return 0;
	n = isl_ast_expr_op_get_n_arg(e);
	for (i = 0; i < n && !found; i++) {
		isl_ast_expr *a = isl_ast_expr_op_get_arg(e, i);
		found = a && expr_uses(a, id);
		isl_ast_expr_free(a);
	}
	return found;
}

typedef struct carried_ctx {
	cg *g;
	isl_id *id;
	int ordered; /* inside a register tile (as g->ordered) */
	int found;
} carried_ctx;

/* Whether the reductions of statement st may run in another order than
 * the interpreter's: what reduce() and the float arithmetic allow (float32
 * and float64 only; fastmath, or vecreduce outside register tiles for sums,
 * products and max/min with init). */
static int reorderable(cg *g, const tc_poly_stmt *st, int ordered)
{
	tc_dtype t = g->p->f->tensors[st->ir->tensor].dtype;
	if (t != TC_T_F32 && t != TC_T_F64)
		return 0;
	if (g->p->opts.fastmath)
		return 1;
	return g->p->opts.vecreduce && !ordered &&
		(st->ir->red == TC_RED_ADD || st->ir->red == TC_RED_MUL || st->ir->init);
}

static isl_bool carried_cb(isl_ast_node *n, void *user)
{
	carried_ctx *c = user;
	const tc_poly_inst *inst;
	const tc_poly_stmt *st;
	int j, uses = 0;
	if (c->found)
		return isl_bool_false;
	if (isl_ast_node_get_type(n) == isl_ast_node_mark) {
		isl_id *mark = isl_ast_node_mark_get_id(n);
		c->ordered |= mark && !strcmp(isl_id_get_name(mark), TC_POLY_MARK_REGTILE);
		isl_id_free(mark);
		return isl_bool_true;
	}
	if (isl_ast_node_get_type(n) != isl_ast_node_user || !(inst = tc_poly_node_inst(n)))
		return isl_bool_true;
	st = inst->stmt;
	if (st->kind != TC_POLY_UPDATE ||
		!tc_dtype_is_float(c->g->p->f->tensors[st->ir->tensor].dtype) ||
		reorderable(c->g, st, c->ordered))
		return isl_bool_true;
	for (j = 0; j < st->ir->nlhs && j < inst->n && !uses; j++)
		uses = expr_uses(inst->index[j], c->id);
	c->found = !uses;
	return isl_bool_true;
}

/* Whether the loop over iterator id with body body carries a float
 * reduction that must keep the interpreter's order: an update of one
 * element (its left-hand indices independent of id) on every iteration
 * that reorderable() does not release.  A vectorisation width in the
 * loop's metadata lets the vectoriser reorder it all the same (LLVM's
 * hints-allow-reordering): a row sum under vector=2 came out 1 ulp off. */
static int carries_float_reduction(cg *g, isl_ast_node *body, isl_id *id)
{
	carried_ctx c = {g, id, g->ordered, 0};
	isl_ast_node_foreach_descendant_top_down(body, carried_cb, &c);
	return c.found;
}

/* One loop property {!"name", i32 v} (i1 when is_bool). */
static LLVMMetadataRef loop_prop(cg *g, const char *name, int64_t v, int is_bool)
{
	LLVMMetadataRef ops[2];
	ops[0] = LLVMMDStringInContext2(g->C, name, strlen(name));
	ops[1] = LLVMValueAsMetadata(LLVMConstInt(is_bool ? g->i1 : g->i32, (unsigned long long)v, 0));
	return LLVMMDNodeInContext2(g->C, ops, 2);
}

/* A loop property without a value, {!"name"}. */
static LLVMMetadataRef loop_flag(cg *g, const char *name)
{
	LLVMMetadataRef s = LLVMMDStringInContext2(g->C, name, strlen(name));
	return LLVMMDNodeInContext2(g->C, &s, 1);
}

/* A followup property {!"name", props[0..n)}: the properties of the loops
 * a transformation leaves (n <= 2). */
static LLVMMetadataRef loop_followup(cg *g, const char *name, LLVMMetadataRef *props, size_t n)
{
	LLVMMetadataRef ops[3];
	size_t i;
	ops[0] = LLVMMDStringInContext2(g->C, name, strlen(name));
	for (i = 0; i < n && i < 2; i++)
		ops[i + 1] = props[i];
	return LLVMMDNodeInContext2(g->C, ops, i + 1);
}

/* Put the vector and unroll_inner options on the back edge br of an
 * innermost loop (body its body, it its iterator, trips its constant trip
 * count or 0) as its loop ID: a node whose first operand is itself, built
 * around a temporary node that is then replaced.  Nothing with both
 * options auto: LLVM decides, as before the options existed.
 *
 * vector=1: llvm.loop.vectorize.width 1, and unroll_inner=U becomes
 * llvm.loop.unroll.count U (the unroller's factor).  build_module marks the
 * functions noimplicitfloat, which keeps the loop and SLP vectorisers out
 * altogether: the SLP vectoriser would pack the scalar copies of unrolled
 * loops (a register tile's rows) into vectors, and the pass builder's
 * option to turn it off is overridden by default<O3>.
 *
 * Otherwise the loop vectoriser does the work:
 *   vector=N       llvm.loop.vectorize.enable true and .width N: N lanes,
 *                  whatever the cost model prefers, where the loop can be
 *                  vectorised; and llvm.loop.unroll.disable, with followups
 *                  that give the loops the vectoriser leaves only
 *                  llvm.loop.isvectorized (and the scalar remainder no
 *                  runtime unrolling, the vectoriser's default).  LLVM
 *                  fully unrolls short loops before it vectorises, and
 *                  the SLP vectoriser then chooses the width (a register
 *                  tile's row of 4 vectors of 4 lanes became one zmm);
 *                  after the vectoriser the unroller is free again, which
 *                  a register tile needs: its vector loop must be fully
 *                  unrolled to keep the sums in registers.  A loop that
 *                  cannot be vectorised is then not unrolled at all.  A
 *                  loop that carries a float reduction which must keep
 *                  its order gets no width (carries_float_reduction).
 *   unroll_inner=U llvm.loop.interleave.count U: U vector iterations per
 *                  trip, each with its own partial sums where a reduction
 *                  may be reordered.  Without vector=N a short loop may
 *                  still be fully unrolled first, as by default.
 * A loop of a known trip count gets no more lanes than it has iterations
 * (the largest power of two below) and no more vector iterations per trip
 * than it has vectors (lanes as above, or a register's worth of its widest
 * element when LLVM chooses): beyond that the vector loop would never run
 * and every iteration would take the scalar remainder (conv2d 1x16x30x30
 * with 32 3x3 filters, whose rows of 28 leave partial register tiles of 4
 * columns: vector=8 unroll_inner=4 0.76 ms unclamped, 0.081 clamped;
 * vector=16 0.54 and 0.41 ms; defaults 0.21 ms; one thread). */
/* The interleave count of an innermost loop with unroll_inner=auto: 2
 * outside register tiles (whose point loops are unrolled by the tile),
 * LLVM's choice (0) inside.  LLVM picks 4 for most loops here, and 2 is
 * faster for the row reductions and streams around contractions: one
 * thread, 4096 x 4096, row max 2.15 -> 1.65 ms, copy 2.92 -> 2.67,
 * softmax 5.94 -> 5.25-5.57 (the inline exp's 18 constants and the
 * temporaries of 4 copies do not fit in 32 vector registers: 16 register
 * copies per 4 vectors); docs/performance.md. */
static int64_t auto_interleave(cg *g)
{
	return g->ordered ? 0 : 2;
}

static void loop_hints(cg *g, LLVMValueRef br, isl_ast_node *body, isl_id *it, int64_t trips)
{
	const tc_poly_opts *o = &g->p->opts;
	LLVMMetadataRef props[8], after[2], self, id;
	int64_t width = o->vector, ic = o->unroll_inner;
	size_t n = 0;
	if (width > 1 && carries_float_reduction(g, body, it))
		width = 0; /* LLVM chooses: it keeps the order */
	if (!ic && o->vector != 1)
		ic = auto_interleave(g);
	if (!br || (!width && !ic))
		return;
	self = LLVMTemporaryMDNode(g->C, NULL, 0);
	props[n++] = self;
	if (o->vector == 1) {
		props[n++] = loop_prop(g, "llvm.loop.vectorize.width", 1, 0);
		if (ic)
			props[n++] = loop_prop(g, "llvm.loop.unroll.count", ic, 0);
	} else {
		if (width) {
			while (trips > 1 && width > trips)
				width /= 2;
			props[n++] = loop_prop(g, "llvm.loop.vectorize.enable", 1, 1);
			props[n++] = loop_prop(g, "llvm.loop.vectorize.width", width, 0);
		}
		if (ic) {
			int64_t vf = width ? width : auto_lanes(g, body);
			if (trips > 0 && ic > trips / vf)
				ic = trips / vf > 1 ? trips / vf : 1;
			props[n++] = loop_prop(g, "llvm.loop.interleave.count", ic, 0);
		}
		if (width) {
			after[0] = loop_prop(g, "llvm.loop.isvectorized", 1, 0);
			after[1] = loop_flag(g, "llvm.loop.unroll.runtime.disable");
			props[n++] = loop_flag(g, "llvm.loop.unroll.disable");
			props[n++] = loop_followup(g, "llvm.loop.vectorize.followup_vectorized", after, 1);
			props[n++] = loop_followup(g, "llvm.loop.vectorize.followup_epilogue", after, 2);
		}
	}
	id = LLVMMDNodeInContext2(g->C, props, n);
	LLVMMetadataReplaceAllUsesWith(self, id);
	LLVMSetMetadata(br, g->md_loop, LLVMMetadataAsValue(g->C, id));
}

static void for_node(cg *g, isl_ast_node *n)
{
	isl_ast_expr *it = isl_ast_node_for_get_iterator(n);
	isl_id *id = it ? isl_ast_expr_get_id(it) : NULL;
	isl_ast_expr *init = isl_ast_node_for_get_init(n);
	isl_ast_node *body = isl_ast_node_for_get_body(n);
	isl_ast_expr *cond = NULL, *inc = NULL;
	LLVMValueRef slot, v, c;
	LLVMBasicBlockRef bcond, bbody, bexit;
	isl_bool degenerate = isl_ast_node_for_is_degenerate(n);

	if (!id || !init || !body || degenerate < 0) {
		fail(g, "malformed for node", NULL);
		goto done;
	}
	if (!room_for_iter(g))
		goto done;
	slot = iter_slot(g, isl_id_get_name(id));
	if (!(v = as_i64(g, ast_expr(g, init))))
		goto done;
	LLVMBuildStore(g->B, v, slot);
	g->iters[g->niters].id = id;
	g->iters[g->niters].slot = slot;
	g->niters++;
	if (degenerate) {
		node(g, body);
		g->niters--;
		goto done;
	}
	cond = isl_ast_node_for_get_cond(n);
	inc = isl_ast_node_for_get_inc(n);
	bcond = new_block(g, "for.cond");
	bbody = new_block(g, "for.body");
	bexit = new_block(g, "for.end");
	LLVMBuildBr(g->B, bcond);
	LLVMPositionBuilderAtEnd(g->B, bcond);
	c = cond ? as_i1(g, ast_expr(g, cond)) : fail(g, "malformed for node", NULL);
	if (c) {
		LLVMBuildCondBr(g->B, c, bbody, bexit);
		LLVMPositionBuilderAtEnd(g->B, bbody);
		node(g, body);
		v = inc ? as_i64(g, ast_expr(g, inc)) : fail(g, "malformed for node", NULL);
		if (v) {
			LLVMValueRef latch;
			v = LLVMBuildNSWAdd(g->B, LLVMBuildLoad2(g->B, g->i64, slot, ""), v, "");
			LLVMBuildStore(g->B, v, slot);
			latch = LLVMBuildBr(g->B, bcond);
			if (is_innermost(body))
				loop_hints(g, latch, body, id, trip_count(n));
		}
		LLVMPositionBuilderAtEnd(g->B, bexit);
	}
	g->niters--;
done:
	isl_ast_expr_free(cond);
	isl_ast_expr_free(inc);
	isl_ast_node_free(body);
	isl_ast_expr_free(init);
	isl_id_free(id);
	isl_ast_expr_free(it);
}

static void if_node(cg *g, isl_ast_node *n)
{
	isl_ast_expr *cond = isl_ast_node_if_get_cond(n);
	isl_ast_node *then = isl_ast_node_if_get_then_node(n);
	isl_ast_node *els = isl_ast_node_if_has_else_node(n) == isl_bool_true
				    ? isl_ast_node_if_get_else_node(n) : NULL;
	LLVMValueRef c = cond && then ? as_i1(g, ast_expr(g, cond))
				      : fail(g, "malformed if node", NULL);
	LLVMBasicBlockRef bthen, belse, bend;

	if (c) {
		bthen = new_block(g, "if.then");
		belse = els ? new_block(g, "if.else") : NULL;
		bend = new_block(g, "if.end");
		LLVMBuildCondBr(g->B, c, bthen, belse ? belse : bend);
		LLVMPositionBuilderAtEnd(g->B, bthen);
		node(g, then);
		if (!g->failed)
			LLVMBuildBr(g->B, bend);
		if (els) {
			LLVMPositionBuilderAtEnd(g->B, belse);
			node(g, els);
			if (!g->failed)
				LLVMBuildBr(g->B, bend);
		}
		LLVMPositionBuilderAtEnd(g->B, bend);
	}
	isl_ast_node_free(els);
	isl_ast_node_free(then);
	isl_ast_expr_free(cond);
}

static void add_string_attr(cg *g, LLVMValueRef f, const char *k, const char *v);

/* Pointer k of the tensor array arr (tensors, then the error record and
 * the pool's parallel_for), loaded with builder b. */
static LLVMValueRef array_slot(cg *g, LLVMBuilderRef b, LLVMValueRef arr, int k, const char *name)
{
	LLVMValueRef ix = i64c(g, k);
	return LLVMBuildLoad2(b, g->ptr, LLVMBuildInBoundsGEP2(b, g->ptr, arr, &ix, 1, ""), name);
}

/* ---- streaming stores ----
 *
 * An output written once per element by a single assignment and larger
 * than STREAM_MIN_BYTES (layer norm's and softmax's results) is stored
 * with non-temporal stores (vmovntps): they write whole cache lines to
 * memory without first reading them, a third less memory traffic for a
 * kernel that reads one array and writes another, and they leave the
 * caches to the inputs.  x86 has such stores only for aligned vectors,
 * and LLVM's vectoriser cannot make them from scalar stores, so:
 * - the kernel tests at run time that every streamed output is 64-byte
 *   aligned, and runs one of two copies of its loop nest: the plain one,
 *   or one (g->stream) whose loads of those outputs' pointers carry !align
 *   64, so that after vectorisation InstCombine knows the vector stores
 *   to be aligned;
 * - after the pass pipeline (llvm_jit.c's optimize),
 *   tc_cg_llvm_mark_streaming_stores() gives every vector store of 64
 *   bytes or more that is 64-byte aligned and writes a streamed output
 *   (its alias scope, listed in the module's tc.stream metadata) the
 *   !nontemporal flag;
 * - the streaming copy ends with an sfence (non-temporal stores are weakly
 *   ordered), as does each of its outlined parallel loops. */
#define STREAM_MIN_BYTES (4 << 20)

static void align_64(cg *g, LLVMValueRef load)
{
	LLVMMetadataRef a = LLVMValueAsMetadata(LLVMConstInt(g->i64, 64, 0));
	LLVMSetMetadata(load, LLVMGetMDKindIDInContext(g->C, "align", 5),
		LLVMMetadataAsValue(g->C, LLVMMDNodeInContext2(g->C, &a, 1)));
}

static void sfence(cg *g)
{
	call_intrinsic(g, "llvm.x86.sse.sfence", NULL, 0, NULL, 0);
}

/* Which tensors get streaming stores (g->streamed); returns how many. */
static int choose_streamed(cg *g)
{
	const tc_ir_func *f = g->p->f;
	int t, i, n = 0;
	if (!g->p->opts.stream || !g->p->params || strncmp(g->h->triple, "x86_64", 6))
		return 0;
	for (t = f->ninputs; t < f->ninputs + f->noutputs; t++) {
		int64_t bytes = tc_dtype_size(f->tensors[t].dtype), k, writers = 0, ok = 1;
		for (k = 0; k < f->tensors[t].ndim; k++)
			bytes *= g->ext[(size_t)t * TC_MAX_RANK + k];
		for (i = 0; i < f->nstmts; i++)
			if (f->stmts[i].tensor == t) {
				writers++;
				ok &= f->stmts[i].red == TC_RED_ASSIGN &&
					f->stmts[i].nvars == f->stmts[i].nlhs;
			}
		if (bytes >= STREAM_MIN_BYTES && writers == 1 && ok &&
			f->tensors[t].dtype != TC_T_BOOL && f->tensors[t].dtype != TC_T_F16) {
			g->streamed[t] = 1;
			n++;
		}
	}
	return n;
}

/* The loop nest twice, behind a test that the streamed outputs are 64-byte
 * aligned (see above), or once when nothing streams. */
static void kernel_body(cg *g, isl_ast_node *ast)
{
	const tc_ir_func *f = g->p->f;
	LLVMValueRef aligned = NULL, *plain;
	LLVMBasicBlockRef bs, bp;
	LLVMMetadataRef *ops;
	int t, n = choose_streamed(g);
	if (!n) {
		node(g, ast);
		return;
	}
	plain = tc_calloc((size_t)f->ntensors, sizeof(*plain));
	ops = tc_calloc((size_t)n, sizeof(*ops));
	if (!plain || !ops) {
		tc_free(plain);
		tc_free(ops);
		fail(g, "out of memory", NULL);
		return;
	}
	for (t = n = 0; t < f->ntensors; t++)
		if (g->streamed[t]) {
			LLVMValueRef low = LLVMBuildAnd(g->B, LLVMBuildPtrToInt(g->B, g->base[t], g->i64, ""),
				i64c(g, 63), "");
			LLVMValueRef ok = LLVMBuildICmp(g->B, LLVMIntEQ, low, i64c(g, 0), "");
			aligned = aligned ? LLVMBuildAnd(g->B, aligned, ok, "") : ok;
			ops[n++] = LLVMValueAsMetadata(g->scope[t]);
		}
	LLVMAddNamedMetadataOperand(g->M, "tc.stream",
		LLVMMetadataAsValue(g->C, LLVMMDNodeInContext2(g->C, ops, (size_t)n)));
	tc_free(ops);
	bs = new_block(g, "stream");
	bp = new_block(g, "plain");
	LLVMBuildCondBr(g->B, aligned, bs, bp);
	LLVMPositionBuilderAtEnd(g->B, bs);
	memcpy(plain, g->base, (size_t)f->ntensors * sizeof(*plain));
	for (t = 0; t < f->ntensors; t++)
		if (g->streamed[t]) { /* the pointer again, known aligned here */
			g->base[t] = array_slot(g, g->B, g->tensors, t, f->tensors[t].name);
			align_64(g, g->base[t]);
		}
	g->stream = 1;
	node(g, ast);
	g->stream = 0;
	if (!g->failed) {
		sfence(g);
		LLVMBuildRetVoid(g->B);
	}
	memcpy(g->base, plain, (size_t)f->ntensors * sizeof(*plain));
	tc_free(plain);
	LLVMPositionBuilderAtEnd(g->B, bp);
	node(g, ast);
}

/* After optimisation: the non-temporal flag on the aligned vector stores
 * of streamed outputs (see above). */
void tc_cg_llvm_mark_streaming_stores(__tc_keep LLVMModuleRef M)
{
	LLVMContextRef C = LLVMGetModuleContext(M);
	unsigned n = LLVMGetNamedMetadataNumOperands(M, "tc.stream"), k, i;
	unsigned scope_kind = LLVMGetMDKindIDInContext(C, "alias.scope", 11);
	unsigned nt_kind = LLVMGetMDKindIDInContext(C, "nontemporal", 11);
	LLVMValueRef lists[1], one, fn, in, nt;
	LLVMBasicBlockRef bb;
	LLVMMetadataRef onem;
	if (n != 1)
		return;
	LLVMGetNamedMetadataOperands(M, "tc.stream", lists);
	one = LLVMConstInt(LLVMInt32TypeInContext(C), 1, 0);
	onem = LLVMValueAsMetadata(one);
	nt = LLVMMetadataAsValue(C, LLVMMDNodeInContext2(C, &onem, 1));
	for (fn = LLVMGetFirstFunction(M); fn; fn = LLVMGetNextFunction(fn))
		for (bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb))
			for (in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) {
				LLVMValueRef scope;
				LLVMTypeRef ty;
				if (LLVMGetInstructionOpcode(in) != LLVMStore || LLVMGetAlignment(in) < 64)
					continue;
				ty = LLVMTypeOf(LLVMGetOperand(in, 0));
				if (LLVMGetTypeKind(ty) != LLVMVectorTypeKind ||
					!(scope = LLVMGetMetadata(in, scope_kind)))
					continue;
				k = LLVMGetMDNodeNumOperands(lists[0]);
				{
					LLVMValueRef ops[64];
					if (k > 64)
						continue;
					LLVMGetMDNodeOperands(lists[0], ops);
					for (i = 0; i < k; i++)
						if (ops[i] == scope)
							LLVMSetMetadata(in, nt_kind, nt);
				}
			}
}

/* In the entry block (g->A): the data pointer of every tensor and the error
 * record, from the tensor array argument arg. */
static void load_pointers(cg *g, LLVMValueRef arg)
{
	const tc_ir_func *f = g->p->f;
	int t;
	for (t = 0; t < f->ntensors; t++) {
		g->base[t] = row_dims(g, t) ? row_buffer(g, t, row_dims(g, t))
					    : array_slot(g, g->A, arg, t, f->tensors[t].name);
		if (g->stream && g->streamed[t])
			align_64(g, g->base[t]);
	}
	g->err = array_slot(g, g->A, arg, f->ntensors, "err"); /* after the tensors */
	g->tensors = arg;
}

/* A loop under a TC_POLY_MARK_PARALLEL mark: its body becomes a function
 *     void body(void *const *tensors, int64_t begin, int64_t end, int64_t lo, int64_t step)
 * running iterations begin..end-1 (iterator lo + k * step), and the loop
 * becomes a call of the runtime's parallel_for (a pointer in the tensor array
 * after the error record):
 *     parallel_for(body, tensors, count, lo, step)
 * which runs the iterations on its threads.  Only loops with no enclosing
 * loop are outlined (nothing else to capture); others run sequentially. */
static int parallel_loop(cg *g, isl_ast_node *n)
{
	isl_ast_expr *cond = NULL, *inc = NULL, *init = NULL, *it = NULL, *bound = NULL;
	isl_ast_node *body = NULL;
	isl_id *id = NULL;
	isl_val *stepv = NULL;
	LLVMValueRef lo, ub, count, pf, args[5], fn, saved_fn, saved_tensors, saved_err;
	LLVMValueRef *saved_base = NULL, slot, k, v, latch;
	LLVMBuilderRef saved_A, saved_B;
	LLVMBasicBlockRef entry, code, bcond, bbody, bexit;
	LLVMTypeRef params[5], bty, pty;
	enum isl_ast_expr_op_type op;
	int64_t step;
	char name[64];
	int ok = 0;

	if (g->niters || isl_ast_node_get_type(n) != isl_ast_node_for ||
		isl_ast_node_for_is_degenerate(n) != isl_bool_false)
		return 0;
	cond = isl_ast_node_for_get_cond(n);
	inc = isl_ast_node_for_get_inc(n);
	init = isl_ast_node_for_get_init(n);
	it = isl_ast_node_for_get_iterator(n);
	body = isl_ast_node_for_get_body(n);
	id = it ? isl_ast_expr_get_id(it) : NULL;
	if (!cond || !inc || !init || !id || !body ||
		isl_ast_expr_get_type(cond) != isl_ast_expr_op ||
		isl_ast_expr_get_type(inc) != isl_ast_expr_int)
		goto done;
	op = isl_ast_expr_op_get_type(cond);
	if (op != isl_ast_expr_op_le && op != isl_ast_expr_op_lt)
		goto done;
	{ /* the condition must be "iterator < bound" or "iterator <= bound" */
		isl_ast_expr *lhs = isl_ast_expr_op_get_arg(cond, 0);
		isl_id *lid = lhs && isl_ast_expr_get_type(lhs) == isl_ast_expr_id
			? isl_ast_expr_get_id(lhs) : NULL;
		int same = lid == id;
		isl_id_free(lid);
		isl_ast_expr_free(lhs);
		if (!same)
			goto done;
	}
	stepv = isl_ast_expr_get_val(inc);
	if (!stepv || !isl_val_is_int(stepv) || isl_val_cmp_si(stepv, 1) < 0)
		goto done;
	step = isl_val_get_num_si(stepv);
	bound = isl_ast_expr_op_get_arg(cond, 1);
	/* in the caller: lo, the last value ub, and the number of iterations */
	lo = as_i64(g, ast_expr(g, init));
	ub = as_i64(g, ast_expr(g, bound));
	if (!lo || !ub)
		goto done;
	if (op == isl_ast_expr_op_lt)
		ub = LLVMBuildSub(g->B, ub, i64c(g, 1), "");
	count = LLVMBuildAdd(g->B, LLVMBuildSDiv(g->B, LLVMBuildSub(g->B, ub, lo, ""),
		i64c(g, step), ""), i64c(g, 1), "");
	count = LLVMBuildSelect(g->B, LLVMBuildICmp(g->B, LLVMIntSLT, ub, lo, ""), i64c(g, 0),
		count, "");

	/* the body function */
	params[0] = g->ptr;
	params[1] = params[2] = params[3] = params[4] = g->i64;
	bty = LLVMFunctionType(g->vd, params, 5, 0);
	snprintf(name, sizeof(name), "%s.par%d", LLVMGetValueName(g->fn), g->nparallel++);
	fn = LLVMAddFunction(g->M, name, bty);
	LLVMSetLinkage(fn, LLVMInternalLinkage);
	add_string_attr(g, fn, "target-cpu", g->h->cpu);
	add_string_attr(g, fn, "target-features", g->h->features);
	add_fn_attr(g, fn, "nounwind", 0);
	if (g->p->opts.vector == 1)
		add_fn_attr(g, fn, "noimplicitfloat", 0);
	saved_base = tc_malloc((size_t)(g->p->f->ntensors + 1) * sizeof(LLVMValueRef));
	if (!saved_base) {
		fail(g, "out of memory", NULL);
		goto done;
	}
	memcpy(saved_base, g->base, (size_t)g->p->f->ntensors * sizeof(LLVMValueRef));
	saved_fn = g->fn;
	saved_A = g->A;
	saved_B = g->B;
	saved_err = g->err;
	saved_tensors = g->tensors;
	g->fn = fn;
	g->A = LLVMCreateBuilderInContext(g->C);
	g->B = LLVMCreateBuilderInContext(g->C);
	entry = LLVMAppendBasicBlockInContext(g->C, fn, "entry");
	code = LLVMAppendBasicBlockInContext(g->C, fn, "code");
	LLVMPositionBuilderAtEnd(g->A, entry);
	load_pointers(g, LLVMGetParam(fn, 0));
	LLVMPositionBuilderAtEnd(g->B, code);
	/* for (k = begin; k < end; k++) { iterator = lo + k * step; body } */
	slot = LLVMBuildAlloca(g->A, g->i64, "k");
	LLVMBuildStore(g->B, LLVMGetParam(fn, 1), slot);
	room_for_iter(g);
	bcond = new_block(g, "par.cond");
	bbody = new_block(g, "par.body");
	bexit = new_block(g, "par.end");
	LLVMBuildBr(g->B, bcond);
	LLVMPositionBuilderAtEnd(g->B, bcond);
	k = LLVMBuildLoad2(g->B, g->i64, slot, "");
	LLVMBuildCondBr(g->B, LLVMBuildICmp(g->B, LLVMIntSLT, k, LLVMGetParam(fn, 2), ""), bbody,
		bexit);
	LLVMPositionBuilderAtEnd(g->B, bbody);
	if (!g->failed) {
		LLVMValueRef itslot = iter_slot(g, isl_id_get_name(id));
		v = LLVMBuildNSWAdd(g->B, LLVMGetParam(fn, 3),
			LLVMBuildNSWMul(g->B, k, LLVMGetParam(fn, 4), ""), "");
		LLVMBuildStore(g->B, v, itslot);
		g->iters[g->niters].id = id;
		g->iters[g->niters].slot = itslot;
		g->niters++;
		node(g, body);
		g->niters--;
		LLVMBuildStore(g->B, LLVMBuildNSWAdd(g->B, k, i64c(g, 1), ""), slot);
		latch = LLVMBuildBr(g->B, bcond); /* a chunk: no trip count known */
		if (is_innermost(body))
			loop_hints(g, latch, body, id, 0);
	}
	LLVMPositionBuilderAtEnd(g->B, bexit);
	if (g->stream)
		sfence(g);
	LLVMBuildRetVoid(g->B);
	LLVMBuildBr(g->A, code);
	LLVMDisposeBuilder(g->A);
	LLVMDisposeBuilder(g->B);
	g->fn = saved_fn;
	g->A = saved_A;
	g->B = saved_B;
	g->err = saved_err;
	g->tensors = saved_tensors;
	memcpy(g->base, saved_base, (size_t)g->p->f->ntensors * sizeof(LLVMValueRef));

	/* the call: parallel_for(body, tensors, count, lo, step) */
	{
		LLVMTypeRef pp[5] = {g->ptr, g->ptr, g->i64, g->i64, g->i64};
		pf = array_slot(g, g->B, g->tensors, g->p->f->ntensors + 1, "parallel_for");
		pty = LLVMFunctionType(g->vd, pp, 5, 0);
		args[0] = fn;
		args[1] = g->tensors;
		args[2] = count;
		args[3] = lo;
		args[4] = i64c(g, step);
		LLVMBuildCall2(g->B, pty, pf, args, 5, "");
	}
	ok = !g->failed;
done:
	tc_free(saved_base);
	isl_val_free(stepv);
	isl_ast_expr_free(bound);
	isl_id_free(id);
	isl_ast_expr_free(it);
	isl_ast_expr_free(init);
	isl_ast_expr_free(inc);
	isl_ast_expr_free(cond);
	isl_ast_node_free(body);
	return ok;
}

static void node(cg *g, isl_ast_node *n)
{
	isl_ast_node_list *list;
	isl_ast_node *child;
	const tc_poly_inst *inst;
	isl_size i, k;

	if (g->failed)
		return;
	switch (isl_ast_node_get_type(n)) {
	case isl_ast_node_for:
		for_node(g, n);
		break;
	case isl_ast_node_if:
		if_node(g, n);
		break;
	case isl_ast_node_block:
		list = isl_ast_node_block_get_children(n);
		k = isl_ast_node_list_n_ast_node(list);
		if (k < 0)
			fail(g, "malformed block node", NULL);
		for (i = 0; i < k && !g->failed; i++) {
			child = isl_ast_node_list_get_at(list, i);
			if (child)
				node(g, child);
			else
				fail(g, "malformed block node", NULL);
			isl_ast_node_free(child);
		}
		isl_ast_node_list_free(list);
		break;
	case isl_ast_node_mark: {
		isl_id *mark = isl_ast_node_mark_get_id(n);
		int par = mark && !strcmp(isl_id_get_name(mark), TC_POLY_MARK_PARALLEL);
		int tile = mark && !strcmp(isl_id_get_name(mark), TC_POLY_MARK_REGTILE);
		isl_id_free(mark);
		child = isl_ast_node_mark_get_node(n);
		g->ordered += tile;
		if (!child)
			fail(g, "malformed mark node", NULL);
		else if (!(par && parallel_loop(g, child)) && !g->failed)
			node(g, child);
		g->ordered -= tile;
		isl_ast_node_free(child);
		break;
	}
	case isl_ast_node_user:
		inst = tc_poly_node_inst(n);
		if (inst)
			statement(g, inst);
		else
			fail(g, "a statement without its annotation", NULL);
		break;
	default:
		fail(g, "malformed AST node", NULL);
		break;
	}
}

/* ---- modules ---- */

static void cg_clear(cg *g)
{
	if (g->B)
		LLVMDisposeBuilder(g->B);
	if (g->A)
		LLVMDisposeBuilder(g->A);
	tc_free(g->base);
	tc_free(g->scope);
	tc_free(g->noalias);
	tc_free(g->ext);
	tc_free(g->streamed);
	tc_free(g->iters);
	tc_free(g->sites);
}

static void add_string_attr(cg *g, LLVMValueRef f, const char *k, const char *v)
{
	LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex,
		LLVMCreateStringAttribute(g->C, k, (unsigned)strlen(k), v, (unsigned)strlen(v)));
}

/* LLVM's diagnostics about a module: remarks, notes and warnings are
 * dropped (a loop whose llvm.loop hints the vectoriser cannot follow makes
 * it remark and warn, which LLVM would print on stderr for every kernel
 * compiled); an error is printed as LLVM prints it, but without LLVM's
 * exit, which a library must not call. */
static void diag_handler(LLVMDiagnosticInfoRef di, void *unused)
{
	char *msg;
	(void)unused;
	if (LLVMGetDiagInfoSeverity(di) != LLVMDSError)
		return;
	msg = LLVMGetDiagInfoDescription(di);
	fprintf(stderr, "tcomp: LLVM error: %s\n", msg ? msg : "?");
	LLVMDisposeMessage(msg);
}

/* Build the module of p in C with one function fname for the host h and
 * the data layout of tm, and the sites of its run-time checks (when sites
 * is not NULL; the caller frees them).  NULL with a message in d on
 * failure; the caller owns the module (it lives in C). */
__tc_give LLVMModuleRef tc_cg_llvm_build_module(__tc_keep LLVMContextRef C,
	__tc_keep const tc_poly *p, const char *fname, __tc_keep const cg_host *h,
	__tc_keep LLVMTargetMachineRef tm, __tc_keep tc_diags *d, __tc_give tc_cg_site **sites,
	int *nsites)
{
	cg g;
	LLVMTypeRef fty;
	LLVMTargetDataRef td;
	LLVMBasicBlockRef entry, code;
	LLVMValueRef arg;
	char *layout, *msg = NULL;
	const tc_ir_func *f = p->f;
	int t;
	unsigned kind;

	memset(&g, 0, sizeof(g));
	g.p = p;
	g.d = d;
	g.C = C;
	if (!p->ast || !p->params) {
		tc_error(d, noloc, "%s",
			"LLVM code generation needs a model built with concrete sizes and its AST");
		return NULL;
	}
	LLVMContextSetDiagnosticHandler(C, diag_handler, NULL);
	g.M = LLVMModuleCreateWithNameInContext(fname, C);
	LLVMSetTarget(g.M, h->triple);
	td = LLVMCreateTargetDataLayout(tm);
	layout = LLVMCopyStringRepOfTargetData(td);
	LLVMSetDataLayout(g.M, layout);
	LLVMDisposeMessage(layout);
	LLVMDisposeTargetData(td);

	g.i1 = LLVMInt1TypeInContext(C);
	g.i8 = LLVMInt8TypeInContext(C);
	g.i16 = LLVMInt16TypeInContext(C);
	g.i32 = LLVMInt32TypeInContext(C);
	g.i64 = LLVMInt64TypeInContext(C);
	g.f16 = LLVMHalfTypeInContext(C);
	g.f32 = LLVMFloatTypeInContext(C);
	g.f64 = LLVMDoubleTypeInContext(C);
	g.ptr = LLVMPointerTypeInContext(C, 0);
	g.vd = LLVMVoidTypeInContext(C);

	fty = LLVMFunctionType(g.vd, &g.ptr, 1, 0);
	g.fn = LLVMAddFunction(g.M, fname, fty);
	add_string_attr(&g, g.fn, "target-cpu", h->cpu);
	add_string_attr(&g, g.fn, "target-features", h->features);
	add_fn_attr(&g, g.fn, "nounwind", 0);
	if (p->opts.vector == 1)
		add_fn_attr(&g, g.fn, "noimplicitfloat", 0);
	arg = LLVMGetParam(g.fn, 0);
	LLVMSetValueName2(arg, "tensors", 7);
	/* the pointer array is only read, and nothing else reaches it */
	kind = LLVMGetEnumAttributeKindForName("readonly", 8);
	LLVMAddAttributeAtIndex(g.fn, 1, LLVMCreateEnumAttribute(C, kind, 0));
	kind = LLVMGetEnumAttributeKindForName("noalias", 7);
	LLVMAddAttributeAtIndex(g.fn, 1, LLVMCreateEnumAttribute(C, kind, 0));
	kind = LLVMGetEnumAttributeKindForName("nocapture", 9);
	LLVMAddAttributeAtIndex(g.fn, 1, LLVMCreateEnumAttribute(C, kind, 0));

	g.base = tc_calloc((size_t)f->ntensors + 1, sizeof(LLVMValueRef));
	g.scope = tc_calloc((size_t)f->ntensors + 1, sizeof(LLVMValueRef));
	g.noalias = tc_calloc((size_t)f->ntensors + 1, sizeof(LLVMValueRef));
	g.ext = tc_calloc((size_t)f->ntensors * TC_MAX_RANK + 1, sizeof(int64_t));
	g.streamed = tc_calloc((size_t)f->ntensors + 1, 1);
	if (!g.base || !g.ext || !g.scope || !g.noalias || !g.streamed) {
		fail(&g, "out of memory", NULL);
		goto error;
	}
	g.A = LLVMCreateBuilderInContext(C);
	g.B = LLVMCreateBuilderInContext(C);
	entry = LLVMAppendBasicBlockInContext(C, g.fn, "entry");
	code = LLVMAppendBasicBlockInContext(C, g.fn, "code");
	LLVMPositionBuilderAtEnd(g.A, entry);
	for (t = 0; t < f->ntensors; t++)
		if (f->tensors[t].ndim > TC_MAX_RANK ||
			tc_ir_shape(f, t, p->params, g.ext + (size_t)t * TC_MAX_RANK, d) < 0) {
			fail(&g, "cannot compute the shape of ", f->tensors[t].name);
			goto error;
		}
	g.h = h;
	g.md_loop = LLVMGetMDKindIDInContext(C, "llvm.loop", 9);
	alias_scopes(&g);
	load_pointers(&g, arg);
	LLVMPositionBuilderAtEnd(g.B, code);
	kernel_body(&g, p->ast);
	if (g.failed)
		goto error;
	LLVMBuildRetVoid(g.B);
	LLVMBuildBr(g.A, code);
	if (LLVMVerifyModule(g.M, LLVMReturnStatusAction, &msg)) {
		tc_error(d, noloc, "LLVM code generation: internal error, invalid module: %s",
			msg ? msg : "?");
		LLVMDisposeMessage(msg);
		goto error;
	}
	LLVMDisposeMessage(msg);
	if (sites) {
		*sites = g.sites;
		*nsites = g.nsites;
		g.sites = NULL;
	}
	cg_clear(&g);
	return g.M;
error:
	cg_clear(&g);
	LLVMDisposeModule(g.M);
	return NULL;
}
