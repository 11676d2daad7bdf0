/* CUDA C from the isl AST of a GPU-mapped tc_poly (see cuda.h).
 *
 * Owns: the prelude of every CUDA text (the contract's names under
 * NVRTC, which has no system headers), with the 16-bit float types when
 * the text uses them; the CUDA dialect of the expression printer
 * (c_expr.h): the host C dialect's element types and helpers, each made a
 * __device__ function, except float16 and bfloat16, stored as __half and
 * __nv_bfloat16 and computed in float (half_in_float: + - * / and sqrt
 * give the interpreter's bits, other builtins CUDA's float functions
 * rounded once), every builtin spelled as CUDA's math library spells it
 * (float and double versions of all of them); the frame: one __global__ function per
 * kernel mark of the AST (polyhedral/gpu.c), its tensor parameters, the
 * block and thread indices its loops read, the sizes as constants.
 *
 * Names: tensors and kernels get a trailing '_' when their name is a C or
 * C++ keyword, a CUDA built-in, a name of the text (helpers, the prelude,
 * the math library) or an isl iterator (c0, ...); kernels are the def's
 * name with _k0, _k1, ... in launch order. */
#include "cuda.h"

#include "c.h"
#include "c_expr.h"

#include "../lang/util.h"

#include <isl/ast.h>
#include <isl/id.h>
#include <isl/printer.h>
#include <isl/val.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Under NVRTC: the fixed-width types and limits the expression printer
 * writes (c_expr.h), and the contract's macros.  NAN and INFINITY are
 * float constants, as in C. */
static const char prelude[] =
	"#ifndef TC_CUDA_EMU\n"
	"typedef signed char int8_t;\n"
	"typedef short int16_t;\n"
	"typedef int int32_t;\n"
	"typedef long long int64_t;\n"
	"typedef unsigned char uint8_t;\n"
	"typedef unsigned short uint16_t;\n"
	"typedef unsigned int uint32_t;\n"
	"typedef unsigned long long uint64_t;\n"
	"#define INT64_C(c) c##LL\n"
	"#define UINT64_C(c) c##ULL\n"
	"#define INT8_MIN (-128)\n"
	"#define INT8_MAX 127\n"
	"#define INT16_MIN (-32767 - 1)\n"
	"#define INT16_MAX 32767\n"
	"#define INT32_MIN (-2147483647 - 1)\n"
	"#define INT32_MAX 2147483647\n"
	"#define INT64_MIN (-INT64_C(9223372036854775807) - 1)\n"
	"#define INT64_MAX INT64_C(9223372036854775807)\n"
	"#define UINT8_MAX 255\n"
	"#define UINT16_MAX 65535\n"
	"#define UINT32_MAX 4294967295u\n"
	"#define UINT64_MAX UINT64_C(18446744073709551615)\n"
	"#define NAN __int_as_float(0x7fc00000)\n"
	"#define INFINITY __int_as_float(0x7f800000)\n"
	"#define FLT_MAX 3.40282346638528859812e+38F\n"
	"#define DBL_MAX 1.79769313486231570815e+308\n"
	"#define TC_GLOBAL(T) T *__restrict__\n"
	"#define TC_LDG(p, i) __ldg((p) + (i))\n"
	"#define TC_SHARED(T, name, n) __shared__ T name[n]\n"
	"#endif\n";

/* Under NVRTC, after the prelude when the text adds atomically (a scatter:
 * tc_poly_scatter_atomic): P[i] += v as atomicAdd; int64 as unsigned long
 * long, whose atomicAdd wraps alike.  The emulator's header defines both. */
static const char prelude_atomic[] =
	"#ifndef TC_CUDA_EMU\n"
	"#define TC_ATOMIC_ADD(p, i, v) atomicAdd((p) + (i), (v))\n"
	"#define TC_ATOMIC_ADD_I64(p, i, v) \\\n"
	"  atomicAdd((unsigned long long *)((p) + (i)), (unsigned long long)(v))\n"
	"#endif\n";

/* Under NVRTC, after the prelude when the text stores float16 or bfloat16
 * (NVRTC 13 finds no cuda_fp16.h without the toolkit's include folder, and
 * that header costs compile time): the 2-byte types __half and
 * __nv_bfloat16 of cuda_fp16.h and cuda_bf16.h (the same layout, so the
 * kernels' pointers are theirs) and the conversions the helpers call, with
 * cuda_fp16.h's names.  float16 <-> float are PTX cvt instructions (every
 * architecture); float -> bfloat16 is cvt on sm_80 and later and the same
 * rounding in integer arithmetic before (a NaN gives the canonical NaN
 * 0x7fff, as cvt and cuda_bf16.h's fallback do); bfloat16 -> float is a
 * shift.  Read-only loads (__ldg) of both types load their 16 bits. */
static const char prelude16[] =
	"#ifndef TC_CUDA_EMU\n"
	"struct __align__(2) __half { unsigned short __x; };\n"
	"struct __align__(2) __nv_bfloat16 { unsigned short __x; };\n"
	"static __device__ __forceinline__ float __half2float(__half h)\n"
	"{\n"
	"  float f;\n"
	"  asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h.__x));\n"
	"  return f;\n"
	"}\n"
	"static __device__ __forceinline__ __half __float2half_rn(float f)\n"
	"{\n"
	"  __half h;\n"
	"  asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h.__x) : \"f\"(f));\n"
	"  return h;\n"
	"}\n"
	"static __device__ __forceinline__ float __bfloat162float(__nv_bfloat16 h)\n"
	"{\n"
	"  return __uint_as_float((unsigned)h.__x << 16);\n"
	"}\n"
	"static __device__ __forceinline__ __nv_bfloat16 __float2bfloat16_rn(float f)\n"
	"{\n"
	"  __nv_bfloat16 h;\n"
	"#if __CUDA_ARCH__ >= 800\n"
	"  asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(h.__x) : \"f\"(f));\n"
	"#else\n"
	"  unsigned u = __float_as_uint(f);\n"
	"  h.__x = (u & 0x7fffffffu) > 0x7f800000u ? (unsigned short)0x7fffu\n"
	"    : (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);\n"
	"#endif\n"
	"  return h;\n"
	"}\n"
	"static __device__ __forceinline__ __half __ldg(const __half *p)\n"
	"{\n"
	"  __half h;\n"
	"  h.__x = __ldg((const unsigned short *)p);\n"
	"  return h;\n"
	"}\n"
	"static __device__ __forceinline__ __nv_bfloat16 __ldg(const __nv_bfloat16 *p)\n"
	"{\n"
	"  __nv_bfloat16 h;\n"
	"  h.__x = __ldg((const unsigned short *)p);\n"
	"  return h;\n"
	"}\n"
	"#endif\n";

const char *tc_cg_cuda_prelude(void)
{
	return prelude;
}

const char *tc_cg_cuda_prelude16(void)
{
	return prelude16;
}

void tc_cg_cuda_free(tc_cg_cuda *c)
{
	int i;
	if (!c)
		return;
	for (i = 0; i < c->nkernels; i++)
		tc_free(c->kernels[i].params);
	tc_free(c->kernels);
	if (c->names)
		for (i = 0; i < c->ntensors; i++)
			tc_free(c->names[i]);
	tc_free(c->names);
	tc_free(c->source);
	tc_free(c);
}

/* ---- the CUDA dialect ---- */

static tc_cg_cexpr_helper_def cuda_helpers[TC_CG_CEXPR_NHELPERS];
static char *cuda_helper_text[TC_CG_CEXPR_NHELPERS];
static const char *cuda_types[TC_T_COUNT];

/* The 16-bit float roles of the CUDA dialect (half_in_float, c_expr.h):
 * values in floats, stored as __half and __nv_bfloat16.  A float rounds
 * to 16 bits in one cvt; a double (a cast from float64 or an integer)
 * through a float rounded to odd (toward zero, the last bit set when
 * inexact: float's 24 bits are more than 11 + 2), so it rounds once, as
 * the interpreter's conversion does. */
static const tc_cg_cexpr_helper_def cuda_half_helpers[TC_CG_CEXPR_NHELPERS] = {
	[TC_CG_CEXPR_D2H] = {"tc_f2h",
		"/* float16 is stored as __half and computed in float: the nearest float16\n"
		"   (ties to even) to a float, or to a double in one rounding (through a\n"
		"   float rounded to odd) */\n"
		"static __device__ __forceinline__ __half tc_f2h(float x) { return __float2half_rn(x); }\n"
		"static __device__ __forceinline__ __half tc_f2h(double x)\n"
		"{\n"
		"  float f = __double2float_rz(x);\n"
		"  if (x == x && (double)f != x)\n"
		"    f = __uint_as_float(__float_as_uint(f) | 1u);\n"
		"  return __float2half_rn(f);\n"
		"}\n"},
	[TC_CG_CEXPR_H2D] = {"tc_h2f",
		"/* the value of a float16 (exact in float) */\n"
		"static __device__ __forceinline__ float tc_h2f(__half h) { return __half2float(h); }\n"},
	[TC_CG_CEXPR_H] = {"tc_h",
		"/* x rounded to float16, as a float */\n"
		"static __device__ __forceinline__ float tc_h(float x) { return tc_h2f(tc_f2h(x)); }\n"
		"static __device__ __forceinline__ float tc_h(double x) { return tc_h2f(tc_f2h(x)); }\n"},
	[TC_CG_CEXPR_H_NEXTAFTER] = {"tc_h_nextafter",
		"/* the float16 value after a in the direction of b */\n"
		"static __device__ __forceinline__ float tc_h_nextafter(float a, float b)\n"
		"{\n"
		"  __half h = tc_f2h(a);\n"
		"  if (a != a || b != b)\n"
		"    return a + b;\n"
		"  if (a == b)\n"
		"    return b;\n"
		"  if (a == 0)\n"
		"    return b > 0 ? 0x1p-24f : -0x1p-24f;\n"
		"  h.__x = (unsigned short)((b > a) == (a > 0) ? h.__x + 1 : h.__x - 1);\n"
		"  return tc_h2f(h);\n"
		"}\n"},
	[TC_CG_CEXPR_D2B] = {"tc_f2b",
		"/* bfloat16 is stored as __nv_bfloat16 and computed in float: the nearest\n"
		"   bfloat16 (ties to even) to a float, or to a double in one rounding */\n"
		"static __device__ __forceinline__ __nv_bfloat16 tc_f2b(float x) { return __float2bfloat16_rn(x); }\n"
		"static __device__ __forceinline__ __nv_bfloat16 tc_f2b(double x)\n"
		"{\n"
		"  float f = __double2float_rz(x);\n"
		"  if (x == x && (double)f != x)\n"
		"    f = __uint_as_float(__float_as_uint(f) | 1u);\n"
		"  return __float2bfloat16_rn(f);\n"
		"}\n"},
	[TC_CG_CEXPR_B2D] = {"tc_b2f",
		"/* the value of a bfloat16 (exact in float) */\n"
		"static __device__ __forceinline__ float tc_b2f(__nv_bfloat16 h) { return __bfloat162float(h); }\n"},
	[TC_CG_CEXPR_B] = {"tc_b",
		"/* x rounded to bfloat16, as a float */\n"
		"static __device__ __forceinline__ float tc_b(float x) { return tc_b2f(tc_f2b(x)); }\n"
		"static __device__ __forceinline__ float tc_b(double x) { return tc_b2f(tc_f2b(x)); }\n"},
	[TC_CG_CEXPR_B_NEXTAFTER] = {"tc_b_nextafter",
		"/* the bfloat16 value after a in the direction of b */\n"
		"static __device__ __forceinline__ float tc_b_nextafter(float a, float b)\n"
		"{\n"
		"  __nv_bfloat16 h = tc_f2b(a);\n"
		"  if (a != a || b != b)\n"
		"    return a + b;\n"
		"  if (a == b)\n"
		"    return b;\n"
		"  if (a == 0)\n"
		"    return b > 0 ? 0x1p-133f : -0x1p-133f;\n"
		"  h.__x = (unsigned short)((b > a) == (a > 0) ? h.__x + 1 : h.__x - 1);\n"
		"  return tc_b2f(h);\n"
		"}\n"},
};
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static int cuda_ready; /* the helpers were made */

static tc_cg_cexpr_bi_form cuda_builtin_form(tc_builtin_id id)
{
	(void)id;
	return TC_CG_CEXPR_BI_C99;
}

/* An element: an input's read through the read-only data cache
 * (TC_LDG, __ldg under NVRTC: inputs are never written during a launch),
 * every other tensor's through its pointer. */
static void cuda_put_access(const tc_cg_cexpr *pr, tc_buf *b, int tensor, const char *offset)
{
	if (pr->p->f->tensors[tensor].kind == TC_TENSOR_INPUT)
		tc_buf_printf(b, "TC_LDG(%s, %s)", pr->tensor[tensor], offset);
	else
		tc_buf_printf(b, "%s[%s]", pr->tensor[tensor], offset);
}

/* A scatter's atomic addition (tc_poly_scatter_atomic): atomicAdd on
 * float, double, int, unsigned and unsigned long long; int64 elements as
 * unsigned long long (the same bits: two's complement wraps alike). */
static void cuda_put_atomic_add(const tc_cg_cexpr *pr, tc_buf *b, int tensor, const char *offset,
	const char *value)
{
	tc_buf_printf(b, "%s(%s, %s, %s);", pr->p->f->tensors[tensor].dtype == TC_T_I64
		? "TC_ATOMIC_ADD_I64" : "TC_ATOMIC_ADD", pr->tensor[tensor], offset, value);
}

static tc_cg_cexpr_dialect cuda_dialect = {
	.type = cuda_types,
	.helper = cuda_helpers,
	.builtin_form = cuda_builtin_form,
	.put_access = cuda_put_access,
	.half_in_float = 1,
	.put_atomic_add = cuda_put_atomic_add,
};

/* The host types, but float16 and bfloat16 as __half and __nv_bfloat16
 * (prelude16); the host helpers made device functions ("static inline"
 * becomes "static __device__ __forceinline__": memcpy, floor, ldexp, isnan
 * and trunc exist in device code), but the 16-bit float roles, which are
 * CUDA's own (cuda_half_helpers). */
static void cuda_init(void)
{
	const tc_cg_cexpr_dialect *host = tc_cg_c_dialect();
	static const char from[] = "static inline", to[] = "static __device__ __forceinline__";
	int i;
	for (i = 0; i < TC_T_COUNT; i++)
		cuda_types[i] = host->type[i];
	cuda_types[TC_T_F16] = "__half";
	cuda_types[TC_T_BF16] = "__nv_bfloat16";
	for (i = 0; i < TC_CG_CEXPR_NHELPERS; i++) {
		const char *t = host->helper[i].text, *q;
		tc_buf b;
		if (cuda_half_helpers[i].name) {
			cuda_helpers[i] = cuda_half_helpers[i];
			continue;
		}
		tc_buf_init(&b);
		while ((q = strstr(t, from))) {
			tc_buf_putn(&b, t, (size_t)(q - t));
			tc_buf_puts(&b, to);
			t = q + strlen(from);
		}
		tc_buf_puts(&b, t);
		if (!(cuda_helper_text[i] = tc_buf_take(&b)))
			return;
		cuda_helpers[i].name = host->helper[i].name;
		cuda_helpers[i].text = cuda_helper_text[i];
	}
	cuda_ready = 1;
}

/* ---- names ---- */

/* C++ keywords and CUDA's names, which C's list (tc_cg_c_name_reserved)
 * lacks. */
static int is_cuda_reserved(const char *s)
{
	static const char *const words[] = {"alignas", "alignof", "and", "asm", "bool", "catch",
		"class", "compl", "concept", "constexpr", "consteval", "constinit", "const_cast",
		"decltype", "delete", "dynamic_cast", "explicit", "export", "false", "friend",
		"mutable", "namespace", "new", "noexcept", "not", "nullptr", "operator", "or",
		"private", "protected", "public", "reinterpret_cast", "requires", "static_assert",
		"static_cast", "template", "this", "thread_local", "throw", "true", "try",
		"typeid", "typename", "using", "virtual", "wchar_t", "xor", "threadIdx", "blockIdx",
		"blockDim", "gridDim", "warpSize", "dim3", "uint3", "fabs", "fmaf", "memset",
		"fminf", "fmaxf", "floorf", "truncf"};
	size_t i;
	if (!strncmp(s, "tc_", 3) || !strncmp(s, "TC_", 3) || !strncmp(s, "__", 2))
		return 1;
	for (i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (!strcmp(s, words[i]))
			return 1;
	return tc_cg_c_name_reserved(s);
}

/* name with '_' appended until it is free (c_expr.h). */
static char *cuda_fresh_name(const char *name, char *const *taken, int n)
{
	return tc_cg_cexpr_fresh_name(name, taken, n, is_cuda_reserved);
}

/* ---- the frame ---- */

/* The state of one tc_cg_cuda_build. */
typedef struct cu {
	tc_cg_cexpr pr;
	const tc_poly *p;
	const tc_ir_func *f;
	tc_cg_cuda *out;
	char **size;   /* the sizes' names (their isl names), owned */
	tc_buf text;   /* the kernels, after the helpers */
	tc_buf guard;  /* the conditions of the ifs above the kernel printed */
	int kernel;    /* kernels printed */
	char *prefix;  /* the kernels' names before _k<i> (owned) */
	/* the reduction on a block of the kernel printed (one at most, see
	 * poly.h, tc_poly_gpu_reduce) */
	const tc_poly_gpu_reduce *red; /* its record, or NULL */
	isl_ast_node *red_outer;       /* the for loop below its mark */
	isl_ast_node *red_stripe;      /* the strided loop (within red_outer) */
	const tc_poly_stmt *red_stmt;  /* the update */
	tc_buf red_iters;              /* the iterators below the mark, each
					* followed by a space */
	char *red_lhs;                 /* the element it updates, as printed */
	int in_red;                    /* printing the loops below the mark */
	char **shared;                 /* the names of the shared-memory
					* copies (p->gpu_copies), owned */
	const tc_poly_gpu_kernel *k;   /* the kernel printed */
} cu;

static void fail(cu *g, const char *why)
{
	tc_cg_cexpr_fail(&g->pr, why);
}

static isl_printer *print_line(isl_printer *prn, const char *s)
{
	prn = isl_printer_start_line(prn);
	prn = isl_printer_print_str(prn, s);
	return isl_printer_end_line(prn);
}

static int is_word_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		c == '_';
}

/* text with every occurrence of from that starts a word replaced by to
 * (the caller frees it; NULL when out of memory). */
static char *replace_word(const char *text, const char *from, const char *to)
{
	size_t n = strlen(from);
	const char *q = text, *hit;
	tc_buf b;
	tc_buf_init(&b);
	while ((hit = strstr(q, from))) {
		int word = hit == text || !is_word_char(hit[-1]);
		tc_buf_putn(&b, q, (size_t)(hit - q));
		tc_buf_puts(&b, word ? to : from);
		q = hit + n;
	}
	tc_buf_puts(&b, q);
	return tc_buf_take(&b);
}

static int mentions(const char *text, const char *id);

/* The update of the reduction on a block, inside its loops: into the
 * thread's accumulator tc_acc instead of the element (appended to b). */
static void put_red_update(cu *g, tc_buf *b, const tc_poly_inst *inst)
{
	tc_buf st, lhs;
	const char *q;
	char *acc;
	tc_buf_init(&st);
	tc_buf_init(&lhs);
	tc_cg_cexpr_put_stmt(&g->pr, &st, inst);
	tc_cg_cexpr_put_lhs(&g->pr, &lhs, inst);
	if (st.oom || lhs.oom || !st.s || !lhs.s) {
		fail(g, "out of memory");
		goto done;
	}
	for (q = g->red_iters.s; q && *q; q = strchr(q, ' ') + 1) {
		char name[64];
		size_t len = (size_t)(strchr(q, ' ') - q);
		snprintf(name, sizeof(name), "%.*s", (int)(len < 63 ? len : 63), q);
		if (mentions(lhs.s, name))
			fail(g, "internal error: a reduction on a block whose element depends "
				"on its loops");
	}
	if (!g->red_lhs && !(g->red_lhs = tc_strdup(lhs.s)))
		fail(g, "out of memory");
	else if (strcmp(g->red_lhs, lhs.s))
		fail(g, "internal error: a reduction on a block that updates two elements");
	if (!(acc = replace_word(st.s, lhs.s, "tc_acc"))) {
		fail(g, "out of memory");
		goto done;
	}
	tc_buf_puts(b, acc);
	tc_free(acc);
done:
	tc_buf_free(&st);
	tc_buf_free(&lhs);
}

/* The lines of text, each printed as a line of prn (indented as it is). */
static isl_printer *print_lines(isl_printer *prn, const char *text)
{
	const char *q = text, *nl;
	while (prn && *q) {
		char *line;
		nl = strchr(q, '\n');
		line = tc_strndup(q, nl ? (size_t)(nl - q) : strlen(q));
		if (!line)
			return isl_printer_free(prn);
		prn = print_line(prn, line);
		tc_free(line);
		q = nl ? nl + 1 : q + strlen(q);
	}
	return prn;
}

/* The copy of a box of a tensor into shared memory (polyhedral/gpu_shared.c)
 * that inst stands for, appended to b: the block's threads take its
 * elements in turn (consecutive threads consecutive elements: the
 * innermost dimension's reads coalesced), those inside the tensor. */
static void put_copy(cu *g, tc_buf *b, const tc_poly_inst *inst)
{
	const tc_poly_gpu_copy *c = &g->p->gpu_copies[inst->copy];
	const tc_poly_gpu_kernel *k = g->k;
	int64_t shape[TC_MAX_RANK], vol = 1, inner = 1, threads;
	int d;
	tc_buf off;
	tc_diags dg;
	tc_diags_init(&dg, NULL);
	if (!k || c->kernel != k->index || tc_ir_shape(g->f, c->tensor, g->p->params, shape, &dg) < 0) {
		tc_diags_clear(&dg);
		fail(g, "internal error: a shared-memory copy outside its kernel");
		return;
	}
	tc_diags_clear(&dg);
	threads = (int64_t)k->block[0] * k->block[1] * k->block[2];
	for (d = 0; d < c->ndims; d++)
		vol *= c->size[d];
	tc_buf_printf(b, "/* %s's box:", g->out->names[c->tensor]);
	for (d = 0; d < c->ndims; d++)
		tc_buf_printf(b, "%s %lld", d ? " x" : "", (long long)c->size[d]);
	tc_buf_printf(b, " elements into shared memory */\n"
		"for (int64_t tc_e = threadIdx.x + %u * (threadIdx.y + %u * (int64_t)threadIdx.z); "
		"tc_e < %lld; tc_e += %lld) {\n", k->block[0], k->block[1], (long long)vol,
		(long long)threads);
	for (d = 0; d < c->ndims; d++) { /* element tc_e of the box: its index d */
		int e;
		for (inner = 1, e = d + 1; e < c->ndims; e++)
			inner *= c->size[e];
		tc_buf_printf(b, "  const int64_t tc_i%d = ", d);
		tc_cg_cexpr_put_isl(&g->pr, b, inst->index[d]);
		tc_buf_printf(b, " + tc_e");
		if (inner > 1)
			tc_buf_printf(b, " / %lld", (long long)inner);
		if (d > 0)
			tc_buf_printf(b, " %% %lld", (long long)c->size[d]);
		tc_buf_puts(b, ";\n");
	}
	tc_buf_puts(b, "  if (");
	for (d = 0; d < c->ndims; d++)
		tc_buf_printf(b, "%stc_i%d >= 0 && tc_i%d < %lld", d ? " && " : "", d, d,
			(long long)shape[d]);
	tc_buf_printf(b, ")\n    %s[tc_e] = ", g->shared[inst->copy]);
	tc_buf_init(&off);
	for (d = 1; d < c->ndims; d++)
		tc_buf_putc(&off, '(');
	for (d = 0; d < c->ndims; d++) {
		if (d)
			tc_buf_printf(&off, ") * %lld + ", (long long)shape[d]);
		tc_buf_printf(&off, "tc_i%d", d);
	}
	if (off.oom || !off.s)
		fail(g, "out of memory");
	else
		cuda_put_access(&g->pr, b, c->tensor, off.s);
	tc_buf_free(&off);
	tc_buf_puts(b, ";\n}");
	g->pr.tensor_used[c->tensor] = 1;
}

static isl_printer *print_user(isl_printer *prn, isl_ast_print_options *options,
	isl_ast_node *node, void *user)
{
	cu *g = user;
	const tc_poly_inst *inst = tc_poly_node_inst(node);
	tc_buf b;
	isl_ast_print_options_free(options);
	tc_buf_init(&b);
	if (inst && !inst->stmt && inst->copy < 0 && !g->in_red)
		tc_buf_puts(&b, "__syncthreads();");
	else if (inst && !inst->stmt && !g->in_red)
		put_copy(g, &b, inst);
	else if (!inst || !inst->stmt || inst->points)
		fail(g, "internal error: an AST statement without its annotation, or a register "
			"tile (the GPU passes make none)");
	else if (g->in_red && inst->stmt == g->red_stmt)
		put_red_update(g, &b, inst);
	else if (g->in_red)
		fail(g, "internal error: a reduction on a block runs another statement");
	else
		tc_cg_cexpr_put_stmt(&g->pr, &b, inst);
	if (b.oom)
		fail(g, "out of memory");
	prn = print_lines(prn, b.s && !g->pr.failed ? b.s : "/* error */;");
	tc_buf_free(&b);
	return prn;
}

/* ---- reductions on a block ---- */

/* The update's statement and the iterators below the reduce mark. */
static isl_bool note_red(isl_ast_node *node, void *user)
{
	cu *g = user;
	if (isl_ast_node_get_type(node) == isl_ast_node_for) {
		isl_ast_expr *it = isl_ast_node_for_get_iterator(node);
		isl_id *id = isl_ast_expr_get_id(it);
		tc_buf_printf(&g->red_iters, "%s ", id ? isl_id_get_name(id) : "?");
		isl_id_free(id);
		isl_ast_expr_free(it);
	} else if (isl_ast_node_get_type(node) == isl_ast_node_user) {
		const tc_poly_inst *inst = tc_poly_node_inst(node);
		if (inst && inst->stmt && !g->red_stmt)
			g->red_stmt = inst->stmt;
	}
	return isl_bool_true;
}

/* Find the reduce mark of a kernel's body (before it is printed): its
 * record, its loop and the strided loop. */
static isl_bool find_red(isl_ast_node *node, void *user)
{
	cu *g = user;
	isl_id *id;
	isl_ast_node *loop;
	int i;
	if (isl_ast_node_get_type(node) != isl_ast_node_mark)
		return isl_bool_true;
	id = isl_ast_node_mark_get_id(node);
	if (!id || strcmp(isl_id_get_name(id), TC_POLY_MARK_GPU_REDUCE)) {
		isl_id_free(id);
		return isl_bool_true;
	}
	if (g->red) {
		isl_id_free(id);
		fail(g, "internal error: two reductions on a block in one kernel");
		return isl_bool_false;
	}
	g->red = isl_id_get_user(id);
	isl_id_free(id);
	loop = isl_ast_node_mark_get_node(node);
	g->red_outer = isl_ast_node_copy(loop);
	for (i = 0; loop && isl_ast_node_get_type(loop) == isl_ast_node_for && i < g->red->depth;
		i++) {
		isl_ast_node *body = isl_ast_node_for_get_body(loop);
		isl_ast_node_free(loop);
		loop = body;
	}
	if (!loop || isl_ast_node_get_type(loop) != isl_ast_node_for ||
		isl_ast_node_get_type(g->red_outer) != isl_ast_node_for) {
		isl_ast_node_free(loop);
		fail(g, "internal error: a reduction on a block without its loops");
		return isl_bool_false;
	}
	g->red_stripe = loop;
	if (isl_ast_node_foreach_descendant_top_down(g->red_outer, note_red, g) < 0 ||
		!g->red_stmt)
		fail(g, "internal error: a reduction on a block without its statement");
	return isl_bool_false; /* nothing to find below */
}

/* x op y for the reduction red in type t, as a C expression (appended to
 * b): sums of integers wrap in their unsigned type, as the update does. */
static void put_combine(tc_buf *b, tc_dtype t, tc_red red, const char *x, const char *y)
{
	const char *ct = cuda_dialect.type[t];
	if (tc_dtype_is_float(t)) {
		if (red == TC_RED_ADD)
			tc_buf_printf(b, "%s + %s", x, y);
		else
			tc_buf_printf(b, "%s%s(%s, %s)", red == TC_RED_MAX ? "fmax" : "fmin",
				t == TC_T_F32 ? "f" : "", x, y);
	} else if (red == TC_RED_ADD) {
		const char *u = tc_dtype_bits(t) > 32 ? "uint64_t" : "uint32_t";
		tc_buf_printf(b, "(%s)((%s)%s + (%s)%s)", ct, u, x, u, y);
	} else {
		tc_buf_printf(b, "(%s %s %s ? %s : %s)", x, red == TC_RED_MAX ? ">" : "<", y, x, y);
	}
}

/* The warp's combine: lane 0 of each warp gets the warp's value. */
static isl_printer *put_warp_combine(cu *g, isl_printer *prn, tc_dtype t, tc_red red)
{
	tc_buf b, sh;
	int narrow = !tc_dtype_is_float(t) && tc_dtype_bits(t) < 32;
	tc_buf_init(&b);
	tc_buf_init(&sh);
	if (narrow)
		tc_buf_printf(&sh, "(%s)__shfl_down_sync(0xffffffffu, (int)tc_acc, tc_o)",
			cuda_dialect.type[t]);
	else
		tc_buf_puts(&sh, "__shfl_down_sync(0xffffffffu, tc_acc, tc_o)");
	/* every lane shuffles (a shuffle inside the combine's ?: would run
	 * on some lanes only) */
	tc_buf_printf(&b, "%s tc_v = %s;", cuda_dialect.type[t], sh.s ? sh.s : "");
	prn = print_line(prn, "for (int tc_o = 16; tc_o > 0; tc_o /= 2) {");
	prn = isl_printer_indent(prn, 2);
	prn = print_line(prn, b.s ? b.s : "");
	b.len = 0;
	if (b.s)
		b.s[0] = 0;
	tc_buf_puts(&b, "tc_acc = ");
	put_combine(&b, t, red, "tc_acc", "tc_v");
	tc_buf_putc(&b, ';');
	prn = print_line(prn, b.s ? b.s : "");
	prn = isl_printer_indent(prn, -2);
	prn = print_line(prn, "}");
	if (b.oom || sh.oom)
		fail(g, "out of memory");
	tc_buf_free(&b);
	tc_buf_free(&sh);
	return prn;
}

/* The strided loop of the reduction: thread t of x from init + s * t, in
 * steps of s times the threads, where s is the loop's own step (1, or
 * more where a guard of the statement leaves every other value: (r_k % 2)
 * != (m % 2)); the body as isl prints it. */
static isl_printer *put_strided(cu *g, isl_printer *prn, isl_ast_print_options *options,
	isl_ast_node *node)
{
	isl_ast_expr *it = isl_ast_node_for_get_iterator(node);
	isl_ast_expr *init = isl_ast_node_for_get_init(node);
	isl_ast_expr *cond = isl_ast_node_for_get_cond(node);
	isl_ast_expr *inc = isl_ast_node_for_get_inc(node);
	isl_ast_node *body = isl_ast_node_for_get_body(node);
	isl_val *step = inc ? isl_ast_expr_get_val(inc) : NULL;
	long st = step && isl_val_is_int(step) == isl_bool_true ? isl_val_get_num_si(step) : 0;
	if (st < 1 || st > INT32_MAX / 1024)
		fail(g, "internal error: a reduction on a block over a loop whose step is no "
			"positive constant");
	prn = isl_printer_start_line(prn);
	prn = isl_printer_print_str(prn, "for (int64_t ");
	prn = isl_printer_print_ast_expr(prn, it);
	prn = isl_printer_print_str(prn, " = ");
	prn = isl_printer_print_ast_expr(prn, init);
	prn = isl_printer_print_str(prn, st == 1 ? " + tc_tx; " : " + ");
	if (st != 1) {
		prn = isl_printer_print_int(prn, (int)st);
		prn = isl_printer_print_str(prn, " * tc_tx; ");
	}
	prn = isl_printer_print_ast_expr(prn, cond);
	prn = isl_printer_print_str(prn, "; ");
	prn = isl_printer_print_ast_expr(prn, it);
	prn = isl_printer_print_str(prn, " += ");
	prn = isl_printer_print_int(prn, (int)st * g->red->threads);
	prn = isl_printer_print_str(prn, ") {");
	prn = isl_printer_end_line(prn);
	prn = isl_printer_indent(prn, 2);
	prn = isl_ast_node_print(body, prn, options);
	prn = isl_printer_indent(prn, -2);
	prn = print_line(prn, "}");
	isl_val_free(step);
	isl_ast_expr_free(it);
	isl_ast_expr_free(init);
	isl_ast_expr_free(cond);
	isl_ast_expr_free(inc);
	isl_ast_node_free(body);
	return prn;
}

/* The reduction on a block (see poly.h, tc_poly_gpu_reduce): each
 * thread's accumulator from the identity, the loops with the strided one,
 * the warps' combine (__shfl_down_sync), one value per warp through
 * shared memory, the first warp's combine, thread 0's update of the
 * element, and a barrier (the shared array is reused when the rows loop;
 * later statements of the block may read the element).  A warp per row
 * (warp): the warp's combine and lane 0's update alone: the row's
 * threads are one warp, whose shuffles synchronise it, and lane 0 wrote
 * the init it updates. */
static isl_printer *put_reduce(cu *g, isl_printer *prn, isl_ast_print_options *options,
	isl_ast_node *node)
{
	tc_dtype t = g->f->tensors[g->red_stmt->ir->tensor].dtype;
	tc_red red = g->red_stmt->ir->red;
	const char *ct = cuda_dialect.type[t];
	int warps = g->red->warp ? 1 : g->red->threads / 32;
	tc_buf b, id;
	tc_buf_init(&b);
	tc_buf_init(&id);
	tc_cg_cexpr_put_identity(&g->pr, &id, red, t);
	prn = print_line(prn, g->red->warp ? "{ /* a reduction on the warp's lanes in x: a row per warp */"
		: "{ /* a reduction on the block's threads in x */");
	prn = isl_printer_indent(prn, 2);
	tc_buf_printf(&b, "%s tc_acc = %s;", ct, id.s ? id.s : "");
	prn = print_line(prn, b.s ? b.s : "");
	g->in_red = 1;
	if (node == g->red_stripe)
		prn = put_strided(g, prn, options, node);
	else
		prn = isl_ast_node_for_print(node, prn, options);
	g->in_red = 0;
	prn = put_warp_combine(g, prn, t, red);
	if (warps > 1) {
		b.len = 0;
		tc_buf_printf(&b, "TC_SHARED(%s, tc_red, %d);", ct, warps);
		prn = print_line(prn, b.s ? b.s : "");
		prn = print_line(prn, "if (tc_tx % 32 == 0)");
		prn = print_line(prn, "  tc_red[tc_tx / 32] = tc_acc;");
		prn = print_line(prn, "__syncthreads();");
		prn = print_line(prn, "if (tc_tx < 32) {");
		prn = isl_printer_indent(prn, 2);
		b.len = 0;
		tc_buf_printf(&b, "tc_acc = tc_tx < %d ? (%s)tc_red[tc_tx] : (%s)%s;", warps, ct, ct,
			id.s ? id.s : "");
		prn = print_line(prn, b.s ? b.s : "");
		prn = put_warp_combine(g, prn, t, red);
		prn = isl_printer_indent(prn, -2);
		prn = print_line(prn, "}");
	}
	prn = print_line(prn, "if (tc_tx == 0)");
	b.len = 0;
	tc_buf_printf(&b, "  %s = ", g->red_lhs ? g->red_lhs : "?");
	put_combine(&b, t, red, g->red_lhs ? g->red_lhs : "?", "tc_acc");
	tc_buf_putc(&b, ';');
	prn = print_line(prn, b.s ? b.s : "");
	if (!g->red->warp)
		prn = print_line(prn, "__syncthreads();");
	prn = isl_printer_indent(prn, -2);
	prn = print_line(prn, "}");
	if (b.oom || id.oom)
		fail(g, "out of memory");
	tc_buf_free(&b);
	tc_buf_free(&id);
	return prn;
}

static isl_printer *print_for(isl_printer *prn, isl_ast_print_options *options,
	isl_ast_node *node, void *user)
{
	cu *g = user;
	if (g->red && node == g->red_outer)
		return put_reduce(g, prn, options, node);
	if (g->red && node == g->red_stripe)
		return put_strided(g, prn, options, node);
	return isl_ast_node_for_print(node, prn, options);
}

/* Forget the reduction of the kernel printed. */
static void red_clear(cu *g)
{
	isl_ast_node_free(g->red_outer);
	isl_ast_node_free(g->red_stripe);
	tc_free(g->red_lhs);
	tc_buf_free(&g->red_iters);
	g->red = NULL;
	g->red_outer = g->red_stripe = NULL;
	g->red_stmt = NULL;
	g->red_lhs = NULL;
	g->in_red = 0;
}

/* The loops of a kernel's body (indented by 2, or 4 inside a guard), or
 * NULL; a reduction on a block (its mark) through print_for. */
static char *body_text(cu *g, isl_ast_node *body)
{
	char *r;
	tc_cg_cexpr_note_loops(&g->pr, body);
	if (g->pr.failed)
		return NULL;
	red_clear(g);
	if (isl_ast_node_foreach_descendant_top_down(body, find_red, g) < 0 && !g->pr.failed)
		fail(g, "isl could not walk the AST");
	r = g->pr.failed ? NULL : tc_cg_cexpr_ast_text(&g->pr, body,
		g->guard.s && g->guard.s[0] ? 4 : 2, print_user, print_for, g);
	red_clear(g);
	return r;
}

/* Whether text mentions the identifier id (not as part of a longer one). */
static int mentions(const char *text, const char *id)
{
	size_t n = strlen(id);
	const char *q;
	for (q = strstr(text, id); q; q = strstr(q + 1, id)) {
		char before = q == text ? ' ' : q[-1], after = q[n];
		int word_before = (before >= 'a' && before <= 'z') || (before >= 'A' && before <= 'Z') ||
			(before >= '0' && before <= '9') || before == '_';
		int word_after = (after >= 'a' && after <= 'z') || (after >= 'A' && after <= 'Z') ||
			(after >= '0' && after <= '9') || after == '_';
		if (!word_before && !word_after)
			return 1;
	}
	return 0;
}

/* Whether the kernels' text or the helpers it calls (used, by role) name
 * the 16-bit float types (prelude16 defines them). */
static int uses_16bit_floats(const char *kernels, const int *used)
{
	int i;
	if (mentions(kernels, "__half") || mentions(kernels, "__nv_bfloat16"))
		return 1;
	for (i = 0; i < TC_CG_CEXPR_NHELPERS; i++)
		if (used[i] && (mentions(cuda_helpers[i].text, "__half") ||
				       mentions(cuda_helpers[i].text, "__nv_bfloat16")))
			return 1;
	return 0;
}

/* Print the kernel below mark node (its record k) into g->text and add
 * it to g->out. */
static void put_kernel(cu *g, const tc_poly_gpu_kernel *k, isl_ast_node *body)
{
	const tc_ir_func *f = g->f;
	tc_cg_cuda *out = g->out;
	tc_cg_cuda_kernel *kn, *grown;
	char *loops;
	int i, d;
	static const char xyz[] = "xyz";
	const char *guard = g->guard.s ? g->guard.s : "";
	memset(g->pr.tensor_used, 0, (size_t)f->ntensors);
	g->k = k;
	loops = body_text(g, body);
	if (!loops || g->pr.failed) {
		tc_free(loops);
		return;
	}
	grown = tc_realloc(out->kernels, (size_t)(out->nkernels + 1) * sizeof(*grown));
	if (!grown) {
		tc_free(loops);
		fail(g, "out of memory");
		return;
	}
	out->kernels = grown;
	kn = &out->kernels[out->nkernels++];
	memset(kn, 0, sizeof(*kn));
	snprintf(kn->name, sizeof(kn->name), "%s_k%d", g->prefix, g->kernel++);
	for (d = 0; d < 3; d++) {
		kn->grid[d] = k->grid[d];
		kn->block[d] = k->block[d];
	}
	kn->params = tc_calloc((size_t)f->ntensors + 1, sizeof(*kn->params));
	if (!kn->params) {
		tc_free(loops);
		fail(g, "out of memory");
		return;
	}
	for (i = 0; i < f->ntensors; i++)
		if (g->pr.tensor_used[i]) {
			tc_cg_cuda_param *pa = &kn->params[kn->nparams++];
			pa->tensor = i;
			pa->name = out->names[i];
			pa->ctype = cuda_dialect.type[f->tensors[i].dtype];
			pa->is_const = f->tensors[i].kind == TC_TENSOR_INPUT;
		}
	tc_buf_printf(&g->text, "\n/* kernel %d: grid (%u, %u, %u), block (%u, %u, %u)%s */\n",
		k->index, kn->grid[0], kn->grid[1], kn->grid[2], kn->block[0],
		kn->block[1], kn->block[2], k->warp_rows ? ", a reduction on the threads in x, "
		"a warp per row (the rows on y)" : k->reduce ? ", a reduction on the threads in x"
		: k->nmapped ? "" : ", nothing mapped: one thread");
	tc_buf_printf(&g->text, "extern \"C\" __global__ void __launch_bounds__(%u) %s(",
		kn->block[0] * kn->block[1] * kn->block[2], kn->name);
	for (i = 0; i < kn->nparams; i++)
		tc_buf_printf(&g->text, "%sTC_GLOBAL(%s%s) %s", i ? ", " : "",
			kn->params[i].is_const ? "const " : "", kn->params[i].ctype, kn->params[i].name);
	tc_buf_puts(&g->text, ")\n{\n");
	for (d = 0; d < 3; d++) {
		if (mentions(loops, TC_POLY_GPU_BLOCK[d]) || mentions(guard, TC_POLY_GPU_BLOCK[d]))
			tc_buf_printf(&g->text, "  const int64_t %s = blockIdx.%c;\n",
				TC_POLY_GPU_BLOCK[d], xyz[d]);
		if (mentions(loops, TC_POLY_GPU_THREAD[d]) || mentions(guard, TC_POLY_GPU_THREAD[d]))
			tc_buf_printf(&g->text, "  const int64_t %s = threadIdx.%c;\n",
				TC_POLY_GPU_THREAD[d], xyz[d]);
	}
	for (i = 0; i < g->p->ngpu_copies; i++) {
		const tc_poly_gpu_copy *c = &g->p->gpu_copies[i];
		int64_t vol = 1;
		if (c->kernel != k->index)
			continue;
		for (d = 0; d < c->ndims; d++)
			vol *= c->size[d];
		tc_buf_printf(&g->text, "  TC_SHARED(%s, %s, %lld);\n",
			cuda_dialect.type[f->tensors[c->tensor].dtype], g->shared[i], (long long)vol);
	}
	for (i = 0; i < f->nparams; i++)
		if (g->pr.size_used[i] || mentions(guard, g->size[i]))
			tc_buf_printf(&g->text, "  const int64_t %s = %lld;\n", g->size[i],
				(long long)g->p->params[i]);
	memset(g->pr.size_used, 0, (size_t)f->nparams);
	if (*guard) {
		tc_buf_printf(&g->text, "  if (%s) {\n", guard);
		tc_buf_puts(&g->text, loops);
		tc_buf_puts(&g->text, "  }\n}\n");
	} else {
		tc_buf_puts(&g->text, loops);
		tc_buf_puts(&g->text, "}\n");
	}
	tc_free(loops);
}

/* Print every kernel below node: kernel marks, within the root's marks
 * and blocks. */
static void put_kernels(cu *g, isl_ast_node *node)
{
	enum isl_ast_node_type type = isl_ast_node_get_type(node);
	if (g->pr.failed)
		return;
	if (type == isl_ast_node_block) {
		isl_ast_node_list *l = isl_ast_node_block_get_children(node);
		isl_size i, n = isl_ast_node_list_n_ast_node(l);
		for (i = 0; i < n; i++) {
			isl_ast_node *c = isl_ast_node_list_get_ast_node(l, i);
			put_kernels(g, c);
			isl_ast_node_free(c);
		}
		isl_ast_node_list_free(l);
		return;
	}
	if (type == isl_ast_node_mark) {
		isl_id *id = isl_ast_node_mark_get_id(node);
		isl_ast_node *child = isl_ast_node_mark_get_node(node);
		const char *name = id ? isl_id_get_name(id) : NULL;
		if (name && !strcmp(name, TC_POLY_MARK_GPU_KERNEL))
			put_kernel(g, isl_id_get_user(id), child);
		else
			put_kernels(g, child);
		isl_id_free(id);
		isl_ast_node_free(child);
		return;
	}
	if (type == isl_ast_node_if && !isl_ast_node_if_has_else_node(node)) {
		/* a guard on the block and thread indices (and sizes) that isl
		 * hoisted above the kernels: it goes into each kernel below */
		isl_ast_expr *cond = isl_ast_node_if_get_cond(node);
		isl_ast_node *then = isl_ast_node_if_get_then_node(node);
		isl_printer *prn = tc_cg_cexpr_isl_printer(&cuda_dialect, isl_printer_to_str(g->p->ctx));
		size_t len = g->guard.s ? strlen(g->guard.s) : 0;
		char *c;
		tc_cg_cexpr_note_ids(&g->pr, cond);
		prn = isl_printer_print_ast_expr(prn, cond);
		c = isl_printer_get_str(prn);
		isl_printer_free(prn);
		isl_ast_expr_free(cond);
		if (!c)
			fail(g, "isl could not print an expression");
		else
			tc_buf_printf(&g->guard, "%s(%s)", len ? " && " : "", c);
		free(c);
		put_kernels(g, then);
		isl_ast_node_free(then);
		if (g->guard.s)
			g->guard.s[len] = 0;
		g->guard.len = len;
		return;
	}
	fail(g, "internal error: code outside every GPU kernel (the gpu pass did not run)");
}

static char *size_name(cu *g, int i)
{
	const char *why = NULL;
	char *s = tc_cg_cexpr_size_name(g->p, i, &why);
	if (!s)
		fail(g, why);
	return s;
}

static tc_stat make_names(cu *g)
{
	const tc_ir_func *f = g->f;
	int i;
	char **taken = tc_calloc((size_t)(f->nparams + f->ntensors) + 1, sizeof(char *));
	g->size = tc_calloc((size_t)f->nparams + 1, sizeof(char *));
	g->out->names = tc_calloc((size_t)f->ntensors + 1, sizeof(char *));
	g->out->ntensors = f->ntensors;
	if (!taken || !g->size || !g->out->names)
		goto oom;
	for (i = 0; i < f->nparams; i++)
		if (!(taken[i] = g->size[i] = size_name(g, i)))
			goto fail;
	for (i = 0; i < f->ntensors; i++)
		if (!(taken[f->nparams + i] = g->out->names[i] =
			      cuda_fresh_name(f->tensors[i].name, taken, f->nparams + i)))
			goto oom;
	if (!(g->prefix = cuda_fresh_name(f->name, taken, f->nparams + f->ntensors)))
		goto oom;
	if (!(g->shared = tc_calloc((size_t)g->p->ngpu_copies + 1, sizeof(char *))))
		goto oom;
	for (i = 0; i < g->p->ngpu_copies; i++) { /* tc_ names are never the user's */
		const char *t = g->out->names[g->p->gpu_copies[i].tensor];
		if (!(g->shared[i] = tc_malloc(strlen(t) + 7)))
			goto oom;
		sprintf(g->shared[i], "tc_sh_%s", t);
	}
	tc_free(taken);
	return TC_OK;
oom:
	fail(g, "out of memory");
fail:
	tc_free(taken);
	return TC_ERR;
}

__tc_give tc_cg_cuda *tc_cg_cuda_build(__tc_keep const tc_poly *p, int contract,
	__tc_keep tc_diags *d)
{
	cu g;
	tc_buf all;
	int used[TC_CG_CEXPR_NHELPERS], i;
	char *kernels;
	memset(&g, 0, sizeof(g));
	g.p = p;
	g.f = p ? p->f : NULL;
	pthread_once(&cuda_once, cuda_init);
	tc_buf_init(&g.text);
	tc_buf_init(&g.guard);
	if (!cuda_ready || !(g.out = tc_calloc(1, sizeof(*g.out)))) {
		fail(&g, "out of memory");
		goto done;
	}
	if (!p || !p->ast || !p->params) {
		fail(&g, "the model has no AST or no sizes (CUDA code is made for concrete sizes)");
		goto done;
	}
	if (make_names(&g) < 0 ||
		tc_cg_cexpr_init(&g.pr, &cuda_dialect, p, g.size, g.out->names) < 0)
		goto done;
	g.pr.contract = contract;
	g.pr.shared = g.shared;
	put_kernels(&g, p->ast);
	if (g.pr.failed)
		goto done;
	if (!g.out->nkernels) {
		fail(&g, "internal error: no GPU kernel in the AST");
		goto done;
	}
	kernels = g.text.s;
	if (g.text.oom || !kernels) {
		fail(&g, "out of memory");
		goto done;
	}
	tc_cg_cexpr_helpers_called(&cuda_dialect, kernels, used);
	tc_buf_init(&all);
	tc_buf_printf(&all, "/* tcomp: def %s, CUDA C for NVRTC, specialised to sizes", g.f->name);
	for (i = 0; i < g.f->nparams; i++)
		tc_buf_printf(&all, "%s %s=%lld", i ? "," : "", g.size[i], (long long)p->params[i]);
	tc_buf_printf(&all, "%s\n * %d kernel%s, launched in order on one stream.  Float operations "
		"round as written\n * (compile with --fmad=false). */\n", g.f->nparams ? "" : " (none)",
		g.out->nkernels, g.out->nkernels == 1 ? "" : "s");
	tc_buf_puts(&all, prelude);
	if (strstr(kernels, "TC_ATOMIC_ADD"))
		tc_buf_puts(&all, prelude_atomic);
	if (uses_16bit_floats(kernels, used))
		tc_buf_puts(&all, prelude16);
	for (i = 0; i < TC_CG_CEXPR_NHELPERS; i++)
		if (used[i])
			tc_buf_printf(&all, "\n%s", cuda_helpers[i].text);
	tc_buf_puts(&all, kernels);
	if (!(g.out->source = tc_buf_take(&all)))
		fail(&g, "out of memory");
done:
	if (g.pr.failed) {
		tc_error(d, (tc_loc){0}, "cannot print the CUDA code of '%s': %s",
			g.f ? g.f->name : "?", g.pr.why ? g.pr.why : "error");
		tc_cg_cuda_free(g.out);
		g.out = NULL;
	}
	tc_buf_free(&g.text);
	tc_buf_free(&g.guard);
	for (i = 0; g.size && i < g.f->nparams; i++)
		tc_free(g.size[i]);
	tc_free(g.size);
	for (i = 0; g.shared && i < p->ngpu_copies; i++)
		tc_free(g.shared[i]);
	tc_free(g.shared);
	tc_free(g.prefix);
	tc_cg_cexpr_clear(&g.pr);
	return g.out;
}
