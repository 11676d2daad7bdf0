/* float16 and bfloat16 in the CUDA code (codegen/cuda.c's dialect:
 * stored as __half and __nv_bfloat16, computed in float).
 *
 * Defs with 16-bit floats run under the emulator (target=cuda-emu) and the
 * reference interpreter on seeded random inputs (no zeros among them),
 * the outputs poisoned (0xff bytes, NaN) before each run:
 *   - + - * / and sqrt of halves and bfloat16s, min and max, constants,
 *     casts from float64, int32, int64 and float32 and between the two
 *     16-bit types: the interpreter's bits (a float operation rounded
 *     once is the correctly rounded one: float32's 24 bits > 2 * 11 + 2);
 *   - exp, tanh and pow: CUDA's float functions rounded once, within one
 *     unit in the last place of the 16-bit type;
 *   - a sum of 1000 float16 products per row (accumulated in float32,
 *     rounded once): the interpreter's bits with the serial order
 *     (reduce=off), and within one float16 ulp of the exact sum rounded
 *     (computed here in double) under the default mapping, where a
 *     float16 accumulator would be off by dozens of ulps.
 * The CUDA text of each (tc_kernel_emit, "cuda") has __half or
 * __nv_bfloat16 parameters, and its kernels no double except for casts
 * from float64 and integers; where NVRTC was found it compiles that text
 * for sm_90 and sm_75 (the bfloat16 conversion without sm_80's cvt; the
 * corpus covers sm_80). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codegen/nvrtc.h"
#include "include/tcomp.h"
#include "ir/half.h"
#include "lang/diag.h"

#define N 257  /* elements of the pointwise defs */
#define ROWS 3 /* rows of the sum */
#define COLS 1000

static const char src[] =
	"def arith(float16(N) A, float16(N) B, bfloat16(N) C, bfloat16(N) D)\n"
	"    -> (float16(N) O1, float16(N) O2, bfloat16(N) O3, bfloat16(N) O4) {\n"
	"    O1(i) = A(i) * B(i) + A(i) / (B(i) - 0.3) - sqrt(fabs(A(i))) * 1.7\n"
	"    O2(i) = max(A(i), B(i)) - min(A(i) * 3, B(i)) + (A(i) - B(i)) / 7\n"
	"    O3(i) = C(i) * D(i) - C(i) / (D(i) + 0.1) + sqrt(fabs(D(i)))\n"
	"    O4(i) = max(C(i), D(i)) * 0.75 - (C(i) + D(i)) * (C(i) - D(i))\n"
	"}\n"
	"def casts(float64(N) X, int32(N) I, int64(N) L, float(N) F, float16(N) A,\n"
	"    bfloat16(N) C) -> (float16(N) H1, bfloat16(N) B1, float16(N) H2, bfloat16(N) B2,\n"
	"    float(N) F1) {\n"
	"    H1(i) = float16(X(i)) + float16(I(i)) + float16(F(i) * 3)\n"
	"    B1(i) = bfloat16(X(i)) + bfloat16(L(i)) + bfloat16(F(i) * 3)\n"
	"    H2(i) = float16(C(i) * 1.5) - A(i)\n"
	"    B2(i) = bfloat16(A(i) * 1.5) - C(i)\n"
	"    F1(i) = float(A(i)) * F(i) + float(C(i))\n"
	"}\n"
	"def builtins(float16(N) A, bfloat16(N) C) -> (float16(N) E, bfloat16(N) T) {\n"
	"    E(i) = exp(A(i)) + tanh(A(i) * 2)\n"
	"    T(i) = pow(fabs(C(i)), 1.5) - exp(C(i))\n"
	"}\n"
	"def rowsum(float16(M,K) A, float16(M,K) B) -> (float16(M) S) {\n"
	"    S(i) +=! A(i, k) * B(i, k)\n"
	"}\n";

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static double uniform(double lo, double hi)
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return lo + (hi - lo) * (double)(rng_state >> 11) * 0x1p-53;
}

/* A tensor of n elements of dtype (code, bits), rank 1 or 2. */
typedef struct tensor {
	DLTensor dl;
	int64_t shape[2];
	void *data;
} tensor;

static void tensor_init(tensor *t, uint8_t code, uint8_t bits, int64_t d0, int64_t d1)
{
	memset(t, 0, sizeof(*t));
	t->shape[0] = d0;
	t->shape[1] = d1;
	t->dl.ndim = d1 ? 2 : 1;
	t->dl.shape = t->shape;
	t->dl.dtype.code = code;
	t->dl.dtype.bits = bits;
	t->dl.dtype.lanes = 1;
	t->dl.device.device_type = kDLCPU;
	t->data = calloc((size_t)(d0 * (d1 ? d1 : 1)), bits / 8);
	assert_non_null(t->data);
	t->dl.data = t->data;
}

static int64_t numel(const tensor *t)
{
	return t->shape[0] * (t->shape[1] ? t->shape[1] : 1);
}

/* Random values in [lo, hi), none zero, rounded to the tensor's type. */
static void fill(tensor *t, double lo, double hi)
{
	int64_t i;
	for (i = 0; i < numel(t); i++) {
		double x = uniform(lo, hi);
		if (x == 0)
			x = 0.25;
		switch (t->dl.dtype.code * 100 + t->dl.dtype.bits) {
		case kDLFloat * 100 + 16:
			((uint16_t *)t->data)[i] = tc_half_from_double(x);
			break;
		case kDLBfloat * 100 + 16:
			((uint16_t *)t->data)[i] = tc_bf16_from_double(x);
			break;
		case kDLFloat * 100 + 32:
			((float *)t->data)[i] = (float)x;
			break;
		case kDLFloat * 100 + 64:
			((double *)t->data)[i] = x;
			break;
		case kDLInt * 100 + 32:
			((int32_t *)t->data)[i] = (int32_t)(x * 1000);
			break;
		case kDLInt * 100 + 64: /* beyond 2^53: bfloat16 rounds once */
			((int64_t *)t->data)[i] = (int64_t)(x * 0x1p60) + 12345;
			break;
		default:
			fail_msg("no fill for this dtype");
		}
	}
}

/* The value of element i of a float tensor. */
static double value(const tensor *t, int64_t i)
{
	switch (t->dl.dtype.code * 100 + t->dl.dtype.bits) {
	case kDLFloat * 100 + 16: return tc_half_to_double(((const uint16_t *)t->data)[i]);
	case kDLBfloat * 100 + 16: return tc_bf16_to_double(((const uint16_t *)t->data)[i]);
	case kDLFloat * 100 + 32: return ((const float *)t->data)[i];
	default: return ((const double *)t->data)[i];
	}
}

/* The position of a 16-bit float on the number line, in steps of one ulp
 * (-0 and +0 both 0). */
static long ordinal16(uint16_t h)
{
	return h & 0x8000 ? -(long)(h & 0x7fff) : (long)h;
}

/* got against want, output name: bit for bit (NaN as NaN), or within ulps
 * steps of the 16-bit type. */
static void compare(const char *name, const tensor *got, const tensor *want, long ulps)
{
	int64_t i, bad = 0;
	int is16 = got->dl.dtype.bits == 16;
	for (i = 0; i < numel(want); i++) {
		double g = value(got, i), w = value(want, i);
		int ok;
		if (isnan(g) || isnan(w))
			ok = isnan(g) && isnan(w);
		else if (is16)
			ok = labs(ordinal16(((const uint16_t *)got->data)[i]) -
				     ordinal16(((const uint16_t *)want->data)[i])) <= ulps;
		else
			ok = g == w;
		if (!ok && bad++ < 5)
			print_error("%s[%lld]: cuda-emu %.9g, interpreter %.9g\n", name, (long long)i,
				g, w);
	}
	if (bad)
		fail_msg("%s: %lld of %lld elements differ", name, (long long)bad,
			(long long)numel(want));
}

/* Compile entry for inputs with options; the kernel. */
static tc_kernel *compile(tc_context *ctx, tc_module *m, const char *entry, tensor *in, int nin,
	const char *options)
{
	const DLTensor *ins[8];
	tc_options *o = tc_options_new();
	tc_kernel *k;
	int i;
	for (i = 0; i < nin; i++)
		ins[i] = &in[i].dl;
	assert_non_null(o);
	if (tc_options_parse(o, options, ctx) != 0)
		fail_msg("options %s: %s", options, tc_context_error(ctx));
	k = tc_compile(m, entry, ins, nin, o);
	tc_options_free(o);
	if (!k)
		fail_msg("%s [%s]: %s", entry, options, tc_context_error(ctx));
	return k;
}

static void check_text(const char *entry, const char *text, int doubles_allowed);

/* Run entry under options into out (its tensors allocated here from the
 * kernel's output shapes, poisoned with 0xff bytes first); the CUDA text
 * checked by check_text when doubles_allowed is 0 or 1. */
static void run(tc_context *ctx, tc_module *m, const char *entry, tensor *in, int nin,
	tensor *out, int nout, const char *options, int doubles_allowed)
{
	const DLTensor *ins[8];
	DLTensor *outs[8];
	tc_kernel *k = compile(ctx, m, entry, in, nin, options);
	int i;
	assert_int_equal(tc_kernel_num_outputs(k), nout);
	for (i = 0; i < nin; i++)
		ins[i] = &in[i].dl;
	for (i = 0; i < nout; i++) {
		DLDataType dt;
		int nd;
		int64_t sh[8] = {0, 0};
		assert_int_equal(tc_kernel_output_shape(k, i, &dt, &nd, sh), 0);
		tensor_init(&out[i], dt.code, dt.bits, sh[0], nd == 2 ? sh[1] : 0);
		memset(out[i].data, 0xff, (size_t)numel(&out[i]) * dt.bits / 8);
		outs[i] = &out[i].dl;
	}
	if (tc_kernel_run(k, ins, nin, outs, nout) != 0)
		fail_msg("%s [%s]: run failed: %s", entry, options, tc_context_error(ctx));
	if (doubles_allowed >= 0) {
		char *text = tc_kernel_emit(k, "cuda");
		assert_non_null(text);
		check_text(entry, text, doubles_allowed);
		tc_string_free(text);
	}
	tc_kernel_free(k);
}

static void free_all(tensor *t, int n)
{
	int i;
	for (i = 0; i < n; i++)
		free(t[i].data);
}

/* Run entry on the emulator and the interpreter and compare every output
 * (ulps: the tolerance of 16-bit outputs). */
static void check_entry(const char *entry, tensor *in, int nin, int nout, long ulps,
	const char *options, int doubles_allowed)
{
	tc_context *ctx = tc_context_new();
	tc_module *m = tc_module_parse(ctx, src, "half.tc");
	tensor emu[8], ref[8];
	char opts[256];
	int i;
	assert_non_null(m);
	snprintf(opts, sizeof(opts), "target=cuda-emu %s", options);
	run(ctx, m, entry, in, nin, emu, nout, opts, doubles_allowed);
	run(ctx, m, entry, in, nin, ref, nout, "target=interp", -1);
	for (i = 0; i < nout; i++) {
		char name[64];
		snprintf(name, sizeof(name), "%s output %d", entry, i);
		compare(name, &emu[i], &ref[i], ulps);
	}
	free_all(emu, nout);
	free_all(ref, nout);
	tc_module_free(m);
	tc_context_free(ctx);
}

static void arithmetic_gives_the_interpreters_bits(void **state)
{
	tensor in[4];
	(void)state;
	tensor_init(&in[0], kDLFloat, 16, N, 0);
	tensor_init(&in[1], kDLFloat, 16, N, 0);
	tensor_init(&in[2], kDLBfloat, 16, N, 0);
	tensor_init(&in[3], kDLBfloat, 16, N, 0);
	fill(&in[0], -40, 40);
	fill(&in[1], -3, 3);
	fill(&in[2], -1e30, 1e30);
	fill(&in[3], -2, 2);
	check_entry("arith", in, 4, 4, 0, "", 0);
	free_all(in, 4);
}

static void casts_give_the_interpreters_bits(void **state)
{
	tensor in[6];
	(void)state;
	tensor_init(&in[0], kDLFloat, 64, N, 0);
	tensor_init(&in[1], kDLInt, 32, N, 0);
	tensor_init(&in[2], kDLInt, 64, N, 0);
	tensor_init(&in[3], kDLFloat, 32, N, 0);
	tensor_init(&in[4], kDLFloat, 16, N, 0);
	tensor_init(&in[5], kDLBfloat, 16, N, 0);
	fill(&in[0], -70000, 70000); /* beyond float16's range too */
	fill(&in[1], -20, 20);
	fill(&in[2], -1, 1);
	fill(&in[3], -20000, 20000);
	fill(&in[4], -60000, 60000);
	fill(&in[5], -1e5, 1e5);
	check_entry("casts", in, 6, 5, 0, "", 1); /* float64, integers: in double */
	free_all(in, 6);
}

static void builtins_within_one_ulp(void **state)
{
	tensor in[2];
	(void)state;
	tensor_init(&in[0], kDLFloat, 16, N, 0);
	tensor_init(&in[1], kDLBfloat, 16, N, 0);
	fill(&in[0], -6, 6);
	fill(&in[1], -20, 20);
	check_entry("builtins", in, 2, 2, 1, "", 0);
	free_all(in, 2);
}

/* S(i) = the exact sum of A(i,k) * B(i,k), k < COLS, each product rounded
 * to float16 first (as the def computes it), rounded once to float16. */
static void exact_row_sums(const tensor *a, const tensor *b, uint16_t *s)
{
	int i, k;
	for (i = 0; i < ROWS; i++) {
		double sum = 0; /* products of halves are exact in double; the sum
				 * of 1000 of them below 2^30 too */
		for (k = 0; k < COLS; k++)
			sum += tc_half_to_double(tc_half_from_double(value(a, i * COLS + k) *
				value(b, i * COLS + k)));
		s[i] = tc_half_from_double(sum);
	}
}

static void sum_of_1000_halves_accumulates_in_float(void **state)
{
	static const char *const opts[] = {"reduce=off", ""};
	tensor in[2], exact;
	int o;
	(void)state;
	tensor_init(&in[0], kDLFloat, 16, ROWS, COLS);
	tensor_init(&in[1], kDLFloat, 16, ROWS, COLS);
	tensor_init(&exact, kDLFloat, 16, ROWS, 0);
	fill(&in[0], 0.5, 1.5);
	fill(&in[1], 0.5, 2);
	exact_row_sums(&in[0], &in[1], exact.data);
	for (o = 0; o < 2; o++) {
		tc_context *ctx = tc_context_new();
		tc_module *m = tc_module_parse(ctx, src, "half.tc");
		tensor emu[1], ref[1];
		char text[64];
		assert_non_null(m);
		snprintf(text, sizeof(text), "target=cuda-emu %s", opts[o]);
		run(ctx, m, "rowsum", in, 2, emu, 1, text, o == 0 ? 0 : -1);
		compare("rowsum against the exact sum", emu, &exact, 1);
		if (o == 0) { /* the interpreter's order: its bits */
			run(ctx, m, "rowsum", in, 2, ref, 1, "target=interp", -1);
			compare("rowsum (reduce=off)", emu, ref, 0);
			free_all(ref, 1);
		}
		free_all(emu, 1);
		tc_module_free(m);
		tc_context_free(ctx);
	}
	free_all(in, 2);
	free(exact.data);
}

/* The CUDA text of entry: 16-bit parameters, no double in the kernels
 * unless doubles_allowed, no uint16_t storage; NVRTC compiles it (for
 * sm_90, and sm_75 without the bfloat16 conversion instruction) where
 * found. */
static void check_text(const char *entry, const char *text, int doubles_allowed)
{
	const char *kernels = strstr(text, "extern \"C\" __global__");
	assert_non_null(kernels);
	if (!strstr(kernels, "TC_GLOBAL(const __half)") &&
		!strstr(kernels, "TC_GLOBAL(const __nv_bfloat16)"))
		fail_msg("%s: no 16-bit float parameter in\n%s", entry, kernels);
	if (!doubles_allowed && strstr(kernels, "double"))
		fail_msg("%s: double in the kernels of plain 16-bit arithmetic:\n%s", entry,
			kernels);
	if (strstr(kernels, "uint16_t"))
		fail_msg("%s: 16-bit floats stored as uint16_t:\n%s", entry, kernels);
#ifdef TCOMP_HAVE_NVRTC
	{
		static const char *const archs[] = {"sm_90", "sm_75"};
		int a;
		for (a = 0; a < 2; a++) {
			tc_diags d;
			char *image = NULL, *log = NULL;
			size_t size = 0;
			tc_diags_init(&d, NULL);
			if (tc_cg_nvrtc_compile(text, "half.cu", archs[a], 0, &image, &size, &log, &d) !=
				TC_OK) {
				tc_buf b;
				tc_buf_init(&b);
				tc_diags_render(&d, 1u << TC_SEV_ERROR, &b);
				fail_msg("%s: NVRTC (%s): %s", entry, archs[a], b.s ? b.s : "?");
			}
			tc_free(image);
			tc_free(log);
			tc_diags_clear(&d);
		}
	}
#endif
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(arithmetic_gives_the_interpreters_bits),
		cmocka_unit_test(casts_give_the_interpreters_bits),
		cmocka_unit_test(builtins_within_one_ulp),
		cmocka_unit_test(sum_of_1000_halves_accumulates_in_float),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
