/* Tests of the CUDA emulator (codegen/cuda_emu.h, codegen/cuda_emu.hpp).
 *
 * Hand-written CUDA kernels in the form of codegen/cuda.h's contract
 * (tc_cg_cuda_prelude() + text, tc_cg_cuda structs built by hand), run on
 * seeded random data with outputs poisoned, against sums and products
 * computed here in plain C: a block tree reduction through shared memory, a
 * warp-shuffle reduction (with a __syncwarp exchange), a tiled matmul with
 * a 2-D grid and blocks.  Planted bugs are each reported with the message
 * a user would need: a missing barrier (a shared-memory race), a bad index
 * (out of bounds, naming the tensor), two blocks writing one element,
 * threads returning before a barrier or a shuffle, a shuffle mask naming
 * lanes that do not exist.  A compile error carries the compiler's
 * message; a missing compiler is a clear error.  The math functions CUDA
 * has and C++ lacks against long double references and their special
 * values.  Every correct kernel also compiles under NVRTC for sm_90 (the
 * emulated dialect is real CUDA) where NVRTC is available.
 *
 * TC_EMU_BENCH=1 also times the compile (-O0 and -O1 through
 * TCOMP_EMU_CXXFLAGS) and a 256x256 matmul, printing element accesses per
 * second. */
#include <fenv.h>
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dirent.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "codegen/cuda.h"
#include "codegen/cuda_emu.h"
#include "codegen/nvrtc.h"
#include "ir/half.h"
#include "testutil.h"

/* ---- kernels ---- */

static const char *const block_sum_src =
	"extern \"C\" __global__ void __launch_bounds__(256)\n"
	"block_sum(TC_GLOBAL(const float) A, TC_GLOBAL(float) S)\n"
	"{\n"
	"    TC_SHARED(float, buf, 256);\n"
	"    unsigned t = threadIdx.x;\n"
	"    buf[t] = TC_LDG(A, (int64_t)blockIdx.x * 256 + t BAD_INDEX);\n"
	"    MISSING_BARRIER\n"
	"    for (unsigned s = 128; s > 0; s >>= 1) {\n"
	"        if (t < s)\n"
	"            buf[t] = buf[t] + buf[t + s];\n"
	"        __syncthreads();\n"
	"    }\n"
	"    if (t == 0)\n"
	"        S[OUT_INDEX] = buf[0];\n"
	"}\n";

static const char *const warp_sum_src =
	"extern \"C\" __global__ void __launch_bounds__(128)\n"
	"warp_sum(TC_GLOBAL(const float) A, TC_GLOBAL(float) S)\n"
	"{\n"
	"    TC_SHARED(float, xch, 128);\n"
	"    TC_SHARED(float, part, 4);\n"
	"    unsigned t = threadIdx.x, lane = t % 32, w = t / 32;\n"
	"    float v0 = A[(int64_t)blockIdx.x * 128 + t];\n"
	"    xch[t] = v0;\n"
	"    __syncwarp();\n"
	"    float v = v0 + xch[t ^ 1];\n" /* pairs: twice the sum in the end */
	"    for (int o = 16; o > 0; o /= 2)\n"
	"        v += __shfl_down_sync(0xffffffffu, v, o);\n"
	"    if (lane == 0)\n"
	"        part[w] = v;\n"
	"    __syncthreads();\n"
	"    if (w == 0) {\n"
	"        float p = lane < 4 ? (float)part[lane] : 0.0f;\n"
	"        p += __shfl_xor_sync(0xffffffffu, p, 1);\n"
	"        p += __shfl_xor_sync(0xffffffffu, p, 2);\n"
	"        p = __shfl_sync(0xffffffffu, p, 3);\n"
	"        if (lane == 0)\n"
	"            S[blockIdx.x] = p;\n"
	"    }\n"
	"}\n";

/* C = A B for N x N row-major matrices, 16 x 16 tiles through shared
 * memory, a 2-D grid of 2-D blocks. */
static const char *const matmul_src =
	"extern \"C\" __global__ void __launch_bounds__(256)\n"
	"matmul(TC_GLOBAL(const float) A, TC_GLOBAL(const float) B, TC_GLOBAL(float) C)\n"
	"{\n"
	"    TC_SHARED(float, As, 256);\n"
	"    TC_SHARED(float, Bs, 256);\n"
	"    int tx = threadIdx.x, ty = threadIdx.y;\n"
	"    int64_t row = (int64_t)blockIdx.y * 16 + ty, col = (int64_t)blockIdx.x * 16 + tx;\n"
	"    float acc = 0.0f;\n"
	"    for (int k0 = 0; k0 < N; k0 += 16) {\n"
	"        As[ty * 16 + tx] = TC_LDG(A, row * N + k0 + tx);\n"
	"        Bs[ty * 16 + tx] = TC_LDG(B, (int64_t)(k0 + ty) * N + col);\n"
	"        __syncthreads();\n"
	"        for (int k = 0; k < 16; k++)\n"
	"            acc = fmaf(As[ty * 16 + k], Bs[k * 16 + tx], acc);\n"
	"        __syncthreads();\n"
	"    }\n"
	"    C[row * N + col] = acc;\n"
	"}\n";

/* Each math function on X, into Y[i * 15 + f] (double) and F[i * 15 + f]
 * (float). */
#define NFN 15
static const char *const math_src =
	"extern \"C\" __global__ void __launch_bounds__(64)\n"
	"math(TC_GLOBAL(const double) X, TC_GLOBAL(double) Y, TC_GLOBAL(float) F)\n"
	"{\n"
	"    int64_t i = (int64_t)blockIdx.x * 64 + threadIdx.x;\n"
	"    double x = X[i], u = x * 0.5 + 0.5, a = x * 3.0, p = u * 2.0;\n"
	"    float xf = (float)x, uf = (float)u, af = (float)a, pf = (float)p;\n"
	"    Y[i * 15 + 0] = rsqrt(u);        F[i * 15 + 0] = rsqrtf(uf);\n"
	"    Y[i * 15 + 1] = rcbrt(a);        F[i * 15 + 1] = rcbrtf(af);\n"
	"    Y[i * 15 + 2] = rhypot(a, x);    F[i * 15 + 2] = rhypotf(af, xf);\n"
	"    Y[i * 15 + 3] = exp10(a);        F[i * 15 + 3] = exp10f(af);\n"
	"    Y[i * 15 + 4] = sinpi(a);        F[i * 15 + 4] = sinpif(af);\n"
	"    Y[i * 15 + 5] = cospi(a);        F[i * 15 + 5] = cospif(af);\n"
	"    Y[i * 15 + 6] = erfinv(x);       F[i * 15 + 6] = erfinvf(xf);\n"
	"    Y[i * 15 + 7] = erfcinv(p);      F[i * 15 + 7] = erfcinvf(pf);\n"
	"    Y[i * 15 + 8] = normcdf(a);      F[i * 15 + 8] = normcdff(af);\n"
	"    Y[i * 15 + 9] = normcdfinv(u);   F[i * 15 + 9] = normcdfinvf(uf);\n"
	"    Y[i * 15 + 10] = norm3d(a, x, u); F[i * 15 + 10] = norm3df(af, xf, uf);\n"
	"    Y[i * 15 + 11] = isnan(x) ? 1.0 : 0.0; F[i * 15 + 11] = isinf(xf) ? 1.0f : 0.0f;\n"
	"    Y[i * 15 + 12] = expm1(x);       F[i * 15 + 12] = expf(xf);\n"
	"    Y[i * 15 + 13] = (double)INT64_MAX + FLT_MAX; F[i * 15 + 13] = INFINITY;\n"
	"    Y[i * 15 + 14] = DBL_MAX;        F[i * 15 + 14] = NAN;\n"
	"}\n";

/* ---- helpers ---- */

/* The text of d's errors (tc_free). */
static char *messages(tc_diags *d)
{
	tc_buf b;
	tc_buf_init(&b);
	tc_diags_render(d, 1u << TC_SEV_ERROR, &b);
	return tc_buf_take(&b);
}

/* A tc_cg_cuda of one kernel over tensors 0.. named by names (the last
 * nconst of... ) built by hand: params in order, tensor i = param i. */
typedef struct kspec {
	const char *name;
	unsigned grid[3], block[3];
	int nparams;
	const char *names[4];
	const char *ctypes[4];
	int is_const[4];
} kspec;

/* The code of text (after the prelude, with defines before it) and the
 * kernel of spec. */
static tc_cg_cuda *make_code(const char *defines, const char *text, const kspec *spec)
{
	tc_cg_cuda *c = tc_calloc(1, sizeof *c);
	tc_buf b;
	int i;
	assert_non_null(c);
	tc_buf_init(&b);
	tc_buf_puts(&b, tc_cg_cuda_prelude());
	tc_buf_puts(&b, defines);
	tc_buf_puts(&b, text);
	c->source = tc_buf_take(&b);
	c->nkernels = 1;
	c->kernels = tc_calloc(1, sizeof *c->kernels);
	c->ntensors = spec->nparams;
	c->names = tc_calloc((size_t)spec->nparams, sizeof *c->names);
	assert_non_null(c->source);
	assert_non_null(c->kernels);
	assert_non_null(c->names);
	snprintf(c->kernels[0].name, sizeof c->kernels[0].name, "%s", spec->name);
	memcpy(c->kernels[0].grid, spec->grid, sizeof spec->grid);
	memcpy(c->kernels[0].block, spec->block, sizeof spec->block);
	c->kernels[0].nparams = spec->nparams;
	c->kernels[0].params = tc_calloc((size_t)spec->nparams, sizeof(tc_cg_cuda_param));
	assert_non_null(c->kernels[0].params);
	for (i = 0; i < spec->nparams; i++) {
		c->names[i] = tc_strdup(spec->names[i]);
		c->kernels[0].params[i].tensor = i;
		c->kernels[0].params[i].name = c->names[i];
		c->kernels[0].params[i].ctype = spec->ctypes[i];
		c->kernels[0].params[i].is_const = spec->is_const[i];
	}
	return c;
}

/* Compile, expecting success. */
static tc_cg_emu *compile_ok(const tc_cg_cuda *c)
{
	tc_diags d;
	tc_cg_emu *e;
	tc_diags_init(&d, NULL);
	e = tc_cg_emu_compile(c, &d);
	if (!e) {
		char *m = messages(&d);
		fprintf(stderr, "%s\n", m);
		tc_free(m);
	}
	assert_non_null(e);
	assert_int_equal(d.nerrors, 0);
	tc_diags_clear(&d);
	return e;
}

/* Run kernel 0 of e; its error message (tc_free) or NULL. */
static char *run(tc_cg_emu *e, void *const *buf, const int64_t *nelem)
{
	tc_diags d;
	char *m = NULL;
	tc_diags_init(&d, NULL);
	if (tc_cg_emu_run(e, 0, buf, nelem, &d) != TC_OK)
		m = messages(&d);
	else
		assert_int_equal(d.nerrors, 0);
	tc_diags_clear(&d);
	return m;
}

/* The code must compile under NVRTC for sm_90 where NVRTC is available. */
static void nvrtc_compiles(const tc_cg_cuda *c)
{
	tc_diags d;
	char *image = NULL, *log = NULL;
	size_t size = 0;
	tc_diags_init(&d, NULL);
	if (!tc_cg_nvrtc_available(&d)) {
#ifdef TCOMP_HAVE_NVRTC
		fail_msg("NVRTC was found at build time but cannot be opened");
#else
		char *m = messages(&d);
		printf("skipping the NVRTC check of %s: NVRTC unavailable: %s\n",
			c->kernels[0].name, m);
		tc_free(m);
#endif
		tc_diags_clear(&d);
		return;
	}
	if (tc_cg_nvrtc_compile(c->source, "emu.cu", "sm_90", 0, &image, &size, &log, &d) != TC_OK) {
		char *m = messages(&d);
		fail_msg("NVRTC rejects %s: %s", c->kernels[0].name, m);
	}
	assert_non_null(strstr(image, c->kernels[0].name));
	tc_free(image);
	tc_free(log);
	tc_diags_clear(&d);
}

static void poison(float *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		v[i] = NAN;
}

static void fill(float *v, size_t n, uint64_t *rng)
{
	for (size_t i = 0; i < n; i++)
		v[i] = (float)(2.0 * tu_rand_unit(rng) - 1.0);
}

/* Whether s contains every one of the strings (NULL-terminated). */
static void assert_says(const char *s, ...)
{
	va_list ap;
	const char *want;
	assert_non_null(s);
	va_start(ap, s);
	while ((want = va_arg(ap, const char *)))
		if (!strstr(s, want))
			fail_msg("expected \"%s\" in: %s", want, s);
	va_end(ap);
}

static const kspec block_sum_spec = {"block_sum", {8, 1, 1}, {256, 1, 1}, 2, {"A", "S"},
	{"float", "float"}, {1, 0}};

/* The block_sum kernel with the planted changes; its message or NULL, and
 * the sums checked when it passes. */
static char *block_sum_with(const char *defines)
{
	enum { NB = 8, N = NB * 256 };
	float *a = malloc(N * sizeof(float)), s[NB];
	uint64_t rng = tu_seed("block_sum", 1);
	void *buf[2] = {a, s};
	int64_t nelem[2] = {N, NB};
	tc_cg_cuda *c = make_code(defines, block_sum_src, &block_sum_spec);
	tc_cg_emu *e = compile_ok(c);
	char *m;
	assert_non_null(a);
	fill(a, N, &rng);
	poison(s, NB);
	m = run(e, buf, nelem);
	if (!m)
		for (int b = 0; b < NB; b++) {
			double sum = 0, mag = 0;
			for (int i = 0; i < 256; i++) {
				sum += a[b * 256 + i];
				mag += fabs(a[b * 256 + i]);
			}
			assert_true(fabs(s[b] - sum) <= 1e-6 * mag);
		}
	tc_cg_emu_free(e);
	tc_cg_cuda_free(c);
	free(a);
	return m;
}

/* ---- tests ---- */

static void block_reduction_equals_the_sum(void **state)
{
	tc_cg_cuda *c;
	(void)state;
	assert_null(block_sum_with("#define BAD_INDEX\n#define MISSING_BARRIER __syncthreads();\n"
				   "#define OUT_INDEX blockIdx.x\n"));
	c = make_code("#define BAD_INDEX\n#define MISSING_BARRIER __syncthreads();\n"
		      "#define OUT_INDEX blockIdx.x\n",
		block_sum_src, &block_sum_spec);
	nvrtc_compiles(c);
	tc_cg_cuda_free(c);
}

static void missing_barrier_is_a_shared_race(void **state)
{
	char *m;
	(void)state;
	m = block_sum_with("#define BAD_INDEX\n#define MISSING_BARRIER\n#define OUT_INDEX blockIdx.x\n");
	assert_says(m, "CUDA emulator: kernel block_sum: race on shared buf[128]: ",
		"thread (128,0,0) of block (0,0,0) writes it, thread (0,0,0) of block (0,0,0) "
		"read it since the last barrier",
		"more problems)", NULL);
	tc_free(m);
}

static void bad_index_is_out_of_bounds(void **state)
{
	char *m;
	(void)state;
	m = block_sum_with("#define BAD_INDEX + (t == 255)\n#define MISSING_BARRIER __syncthreads();\n"
			   "#define OUT_INDEX blockIdx.x\n");
	assert_says(m,
		"out of bounds: thread (255,0,0) of block (7,0,0) reads A[2048] (A has 2048 "
		"elements)",
		NULL);
	assert_null(strstr(m, "more problem"));
	tc_free(m);
}

static void blocks_writing_one_element_race(void **state)
{
	char *m;
	(void)state;
	m = block_sum_with("#define BAD_INDEX\n#define MISSING_BARRIER __syncthreads();\n"
			   "#define OUT_INDEX 0\n");
	assert_says(m,
		"race on S[0]: thread (0,0,0) of block (1,0,0) writes it, thread (0,0,0) of "
		"block (0,0,0) wrote it (another block of the same launch)",
		"(and 6 more problems)", NULL);
	tc_free(m);
}

static void warp_shuffle_reduction_equals_the_sum(void **state)
{
	enum { NB = 5, N = NB * 128 };
	static const kspec spec = {"warp_sum", {NB, 1, 1}, {128, 1, 1}, 2, {"A", "S"},
		{"float", "float"}, {1, 0}};
	float a[N], s[NB];
	uint64_t rng = tu_seed("warp_sum", 1);
	void *buf[2] = {a, s};
	int64_t nelem[2] = {N, NB};
	tc_cg_cuda *c = make_code("", warp_sum_src, &spec);
	tc_cg_emu *e = compile_ok(c);
	(void)state;
	fill(a, N, &rng);
	poison(s, NB);
	assert_null(run(e, buf, nelem));
	for (int b = 0; b < NB; b++) {
		double sum = 0, mag = 0;
		for (int i = 0; i < 128; i++) {
			sum += a[b * 128 + i];
			mag += fabs(a[b * 128 + i]);
		}
		assert_true(fabs(s[b] - 2 * sum) <= 2e-6 * mag);
	}
	nvrtc_compiles(c);
	tc_cg_emu_free(e);
	tc_cg_cuda_free(c);
}

static void matmul_tiles_equal_the_product(void **state)
{
	enum { N = 48 };
	static const kspec spec = {"matmul", {N / 16, N / 16, 1}, {16, 16, 1}, 3, {"A", "B", "C"},
		{"float", "float", "float"}, {1, 1, 0}};
	float a[N * N], b[N * N], cm[N * N];
	uint64_t rng = tu_seed("matmul", 1);
	void *buf[3] = {a, b, cm};
	int64_t nelem[3] = {N * N, N * N, N * N};
	tc_cg_cuda *c = make_code("#define N 48\n", matmul_src, &spec);
	tc_cg_emu *e = compile_ok(c);
	(void)state;
	fill(a, N * N, &rng);
	fill(b, N * N, &rng);
	poison(cm, N * N);
	assert_null(run(e, buf, nelem));
	for (int i = 0; i < N; i++)
		for (int j = 0; j < N; j++) {
			float acc = 0.0f;
			for (int k = 0; k < N; k++)
				acc = fmaf(a[i * N + k], b[k * N + j], acc);
			/* the same fmaf chain in k order: bit for bit */
			assert_memory_equal(&cm[i * N + j], &acc, sizeof acc);
		}
	nvrtc_compiles(c);
	tc_cg_emu_free(e);
	tc_cg_cuda_free(c);
}

/* One kernel of 64 threads with the body text: its message. */
static char *run_small(const char *body, unsigned threads)
{
	kspec spec = {"k", {2, 1, 1}, {threads, 1, 1}, 1, {"X"}, {"float"}, {0}};
	char text[2048];
	float x[128];
	void *buf[1] = {x};
	int64_t nelem[1] = {128};
	tc_cg_cuda *c;
	tc_cg_emu *e;
	char *m;
	snprintf(text, sizeof text,
		"extern \"C\" __global__ void k(TC_GLOBAL(float) X)\n{\n"
		"    unsigned t = threadIdx.x;\n    float v = 1.0f;\n%s\n"
		"    X[blockIdx.x * 64 + t] = v;\n}\n",
		body);
	c = make_code("", text, &spec);
	e = compile_ok(c);
	poison(x, 128);
	m = run(e, buf, nelem);
	tc_cg_emu_free(e);
	tc_cg_cuda_free(c);
	return m;
}

static void divergence_is_reported(void **state)
{
	char *m;
	(void)state;
	/* the prelude's lines come first: the line numbers are the text's */
	m = run_small("    if (t < 16)\n        return;\n    __syncthreads();", 64);
	assert_says(m,
		"barrier divergence: thread (0,0,0) of block (0,0,0) has returned while 48 "
		"threads, thread (16,0,0) first, wait at __syncthreads() (line ",
		NULL);
	tc_free(m);
	m = run_small("    if (t == 5)\n        return;\n"
		      "    v = __shfl_down_sync(0xffffffffu, v, 1);",
		64);
	assert_says(m,
		"warp divergence: thread (5,0,0) of block (0,0,0) has returned while lanes "
		"0xffffffdf of its warp wait at __shfl_down_sync (line ",
		NULL);
	tc_free(m);
	m = run_small("    if (t < 32)\n        __syncthreads();\n    else\n        __syncthreads();",
		64);
	assert_says(m, "barrier divergence: in block (0,0,0) thread (32,0,0) waits at "
		       "__syncthreads() (line ",
		NULL);
	tc_free(m);
	m = run_small("    v = __shfl_xor_sync(0xffffffffu, v, 1);", 16);
	assert_says(m,
		"__shfl_xor_sync (line ", "): thread (0,0,0) of block (0,0,0) names lanes "
		"0xffff0000 of warp 0 in its mask, which has no such threads",
		NULL);
	tc_free(m);
	/* correct ones pass: a shuffle within 16 lanes, barriers all reach */
	m = run_small("    v = __shfl_xor_sync(0xffffu, v + t, 1);\n    __syncthreads();", 16);
	assert_null(m);
}

/* Lanes exchanging through shared memory: a race without __syncwarp(),
 * ordered with it. */
static void syncwarp_orders_the_lanes(void **state)
{
	char *m;
	(void)state;
	m = run_small("    TC_SHARED(float, s, 64);\n    s[t] = v + t;\n    v = s[t ^ 1];", 64);
	assert_says(m,
		"race on shared s[1]: thread (1,0,0) of block (0,0,0) writes it, thread (0,0,0) "
		"of block (0,0,0) read it since the last barrier",
		NULL);
	tc_free(m);
	m = run_small("    TC_SHARED(float, s, 64);\n    s[t] = v + t;\n    __syncwarp();\n"
		      "    v = s[t ^ 1];",
		64);
	assert_null(m);
}

static void compile_errors_carry_the_compilers_message(void **state)
{
	static const kspec spec = {"k", {1, 1, 1}, {1, 1, 1}, 1, {"X"}, {"float"}, {0}};
	tc_cg_cuda *c = make_code("", "extern \"C\" __global__ void k(TC_GLOBAL(float) X)\n{\n"
				      "    X[0] = undeclared_name;\n}\n",
		&spec);
	tc_diags d;
	char *m;
	(void)state;
	tc_diags_init(&d, NULL);
	assert_null(tc_cg_emu_compile(c, &d));
	m = messages(&d);
	assert_says(m, "CUDA emulator: the C++ compiler '", "failed (exit status", "cuda.cu:",
		"undeclared_name", NULL);
	tc_free(m);
	tc_diags_clear(&d);
	/* a launch configuration out of CUDA's limits */
	c->kernels[0].block[0] = 1024;
	c->kernels[0].block[1] = 2;
	tc_diags_init(&d, NULL);
	assert_null(tc_cg_emu_compile(c, &d));
	m = messages(&d);
	assert_says(m, "kernel k: 2048 threads per block (at most 1024)", NULL);
	tc_free(m);
	tc_diags_clear(&d);
	tc_cg_cuda_free(c);
}

static void a_missing_compiler_is_a_clear_error(void **state)
{
	static const kspec spec = {"k", {1, 1, 1}, {1, 1, 1}, 1, {"X"}, {"float"}, {0}};
	tc_cg_cuda *c = make_code("", "extern \"C\" __global__ void k(TC_GLOBAL(float) X)\n"
				      "{\n    X[0] = 1.0f;\n}\n",
		&spec);
	char *old = getenv("TCOMP_CXX") ? tc_strdup(getenv("TCOMP_CXX")) : NULL;
	tc_diags d;
	char *m;
	(void)state;
	setenv("TCOMP_CXX", "/nonexistent/tcomp-no-such-c++", 1);
	tc_diags_init(&d, NULL);
	assert_null(tc_cg_emu_compile(c, &d));
	m = messages(&d);
	assert_says(m,
		"CUDA emulator: cannot run the C++ compiler '/nonexistent/tcomp-no-such-c++' "
		"(from TCOMP_CXX): No such file or directory",
		NULL);
	tc_free(m);
	tc_diags_clear(&d);
	if (old)
		setenv("TCOMP_CXX", old, 1);
	else
		unsetenv("TCOMP_CXX");
	tc_free(old);
	tc_cg_cuda_free(c);
}

/* ---- the precompiled header's store (codegen/cuda_emu.c) ---- */

/* mkdir path with a file name in it, its time (and the folder's) t
 * seconds ago. */
static void make_aged(const char *dir, const char *name, const char *file, long ago)
{
	char path[600];
	struct timeval tv[2];
	FILE *f;
	snprintf(path, sizeof path, "%s/%s", dir, name);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(path, sizeof path, "%s/%s/%s", dir, name, file);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("not a precompiled header\n", f);
	fclose(f);
	gettimeofday(&tv[0], NULL);
	tv[0].tv_sec -= ago;
	tv[1] = tv[0];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	assert_int_equal(utimes(path, tv), 0);
}

/* The names in dir that start with prefix, counted. */
static int count_entries(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int k = 0;
	assert_non_null(d);
	while ((de = readdir(d)))
		k += !strncmp(de->d_name, prefix, strlen(prefix));
	closedir(d);
	return k;
}

/* rm -r of a folder of files. */
static void remove_tree(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char path[700];
	if (!d)
		return;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
			if (unlink(path) < 0)
				remove_tree(path);
		}
	closedir(d);
	rmdir(dir);
}

/* Replace the file at path by text. */
static void overwrite(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* The values of the environment variables names[0..n) into old (tc_free;
 * NULL: unset). */
static void env_save(const char *const *names, int n, char **old)
{
	int i;
	for (i = 0; i < n; i++)
		old[i] = getenv(names[i]) ? tc_strdup(getenv(names[i])) : NULL;
}

/* The environment variables names[0..n) back to old (freed). */
static void env_restore(const char *const *names, int n, char **old)
{
	int i;
	for (i = 0; i < n; i++) {
		if (old[i])
			setenv(names[i], old[i], 1);
		else
			unsetenv(names[i]);
		tc_free(old[i]);
	}
}

/* With TCOMP_EMU_STORE naming a store, a compile makes the precompiled
 * header there once (pch-<key>/cuda_emu.hpp.gch) and later compiles use
 * it; the store keeps the 4 entries used last and drops temporary folders
 * an hour old; a broken or removed entry still gives right results (the
 * header's text; the entry made again); a store that cannot be made
 * (its path a file) and "off" compile without one.  Each compile's
 * kernel runs and its sums are checked (block_sum_with). */
/* block_sum_with the correct defines and a comment of its own, so that
 * the unit is compiled (the memo of compiled modules does not serve it). */
static char *block_sum_compiled(void)
{
	static int n;
	char text[200];
	snprintf(text, sizeof text, "#define BAD_INDEX\n#define MISSING_BARRIER __syncthreads();\n"
				    "#define OUT_INDEX blockIdx.x\n// compile %d\n", ++n);
	return block_sum_with(text);
}

static void precompiled_header_store(void **state)
{
	char tmpl[] = "/tmp/tcomp-test-pch-XXXXXX", store[600], entry[900], gch[1200], name[256];
	static const char *const names[] = {"TCOMP_EMU_STORE"};
	char *old[1];
	struct stat st;
	struct dirent *de;
	DIR *dir;
	FILE *f;
	int i;
	(void)state;
	env_save(names, 1, old);
	assert_non_null(mkdtemp(tmpl));
	snprintf(store, sizeof store, "%s/store", tmpl);
	assert_int_equal(mkdir(store, 0700), 0);
	for (i = 0; i < 5; i++) { /* entries of other compilers, used 1000 + i s ago */
		snprintf(name, sizeof name, "pch-%016x", i + 1);
		make_aged(store, name, "cuda_emu.hpp", 1000 + i);
	}
	make_aged(store, ".tmp-old", "cuda_emu.hpp", 7200);
	make_aged(store, ".tmp-new", "cuda_emu.hpp", 60);
	setenv("TCOMP_EMU_STORE", store, 1);

	assert_null(block_sum_compiled());
	assert_int_equal(count_entries(store, "pch-"), 4); /* ours and 3 newest */
	for (i = 0; i < 2; i++) { /* the two oldest went */
		snprintf(entry, sizeof entry, "%s/pch-%016x", store, 5 - i);
		assert_int_equal(stat(entry, &st), -1);
	}
	assert_int_equal(count_entries(store, ".tmp-old"), 0);
	assert_int_equal(count_entries(store, ".tmp-new"), 1);
	snprintf(entry, sizeof entry, "%s/pch-0000000000000001", store);
	assert_int_equal(stat(entry, &st), 0);
	name[0] = 0; /* ours: the one with a .gch */
	dir = opendir(store);
	assert_non_null(dir);
	while ((de = readdir(dir))) {
		snprintf(gch, sizeof gch, "%s/%s/cuda_emu.hpp.gch", store, de->d_name);
		if (!strncmp(de->d_name, "pch-", 4) && stat(gch, &st) == 0 && st.st_size > 0)
			snprintf(name, sizeof name, "%s", de->d_name);
	}
	closedir(dir);
	assert_true(name[0]);
	snprintf(entry, sizeof entry, "%s/%s", store, name);
	snprintf(gch, sizeof gch, "%s/cuda_emu.hpp.gch", entry);

	assert_null(block_sum_compiled()); /* uses it */
	overwrite(gch, "garbage"); /* broken: the compiler reads the header's text */
	assert_null(block_sum_compiled());
	remove_tree(entry); /* removed: made again */
	assert_null(block_sum_compiled());
	assert_int_equal(stat(gch, &st), 0);
	assert_true(st.st_size > 1000);

	snprintf(entry, sizeof entry, "%s/file", tmpl); /* a store that cannot be made */
	f = fopen(entry, "w");
	assert_non_null(f);
	fclose(f);
	snprintf(entry, sizeof entry, "%s/file/store", tmpl);
	setenv("TCOMP_EMU_STORE", entry, 1);
	assert_null(block_sum_compiled());
	setenv("TCOMP_EMU_STORE", "off", 1);
	assert_null(block_sum_compiled());

	env_restore(names, 1, old);
	remove_tree(tmpl);
}

/* A compiler command in dir (script) that runs the emulator's compiler
 * and, for each compile of a unit (not of the precompiled header), adds a
 * line to dir/runs (log). */
static void counting_cxx(const char *dir, char *script, size_t n, char *log, size_t m)
{
	FILE *f;
	snprintf(script, n, "%s/cxx", dir);
	snprintf(log, m, "%s/runs", dir);
	f = fopen(script, "w");
	assert_non_null(f);
	fprintf(f, "#!/bin/sh\ncase \"$*\" in *unit.cpp*) echo run >> '%s';; esac\nexec %s \"$@\"\n",
		log, tc_cg_emu_cxx());
	fclose(f);
	assert_int_equal(chmod(script, 0700), 0);
}

/* The lines of the file at path (0 when there is none). */
static int count_lines(const char *path)
{
	char line[256];
	int n = 0;
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof line, f))
		n++;
	fclose(f);
	return n;
}

/* A kernel k(X, Y) of 4 blocks of 64 threads, Y[i] = y (a C expression
 * of X[i]), its text marked with tag and the process id so that no other
 * test compiles the same unit. */
static tc_cg_cuda *xy_code(const char *y, const char *tag)
{
	static const kspec spec = {"k", {4, 1, 1}, {64, 1, 1}, 2, {"X", "Y"}, {"float", "float"},
		{1, 0}};
	char unit[300];
	snprintf(unit, sizeof unit,
		"extern \"C\" __global__ void k(TC_GLOBAL(const float) X, TC_GLOBAL(float) Y)\n"
		"{\n    int i = blockIdx.x * 64 + threadIdx.x;\n"
		"    Y[i] = %s; // %s %d\n}\n",
		y, tag, (int)getpid());
	return make_code("", unit, &spec);
}

/* The memo of compiled modules (codegen/cuda_emu.c): the same unit
 * compiled again in the process, while the first module lives and after
 * it was freed, runs the compiler once (a TCOMP_CXX wrapper counts the
 * runs; no precompiled header, whose compile would count too), and each
 * module's kernel computes right, the stacks made again after the others
 * were freed; other flags ($TCOMP_EMU_CXXFLAGS) compile again. */
static void compiled_modules_are_reused(void **state)
{
	static const char *const names[] = {"TCOMP_CXX", "TCOMP_EMU_STORE", "TCOMP_EMU_CXXFLAGS"};
	char tmpl[] = "/tmp/tcomp-test-memo-XXXXXX", script[600], log[600];
	char *old[3];
	tc_cg_emu *e[3];
	tc_cg_cuda *c;
	int i, k, runs;
	(void)state;
	env_save(names, 3, old);
	assert_non_null(mkdtemp(tmpl));
	counting_cxx(tmpl, script, sizeof script, log, sizeof log);
	setenv("TCOMP_CXX", script, 1);
	setenv("TCOMP_EMU_STORE", "off", 1);
	unsetenv("TCOMP_EMU_CXXFLAGS");
	c = xy_code("2.0f * X[i] + 1.0f", "memo");
	/* 0 and 1 live at once, 2 beside them, 3 after all were freed, 4
	 * with other flags */
	for (k = 0; k < 5; k++) {
		float x[256], y[256];
		void *buf[2] = {x, y};
		int64_t nelem[2] = {256, 256};
		uint64_t rng = tu_seed("memo", (uint64_t)k);
		i = k < 2 ? k : 2;
		if (k == 3) { /* every module freed: the object idle in the memo */
			tc_cg_emu_free(e[0]);
			tc_cg_emu_free(e[1]);
			tc_cg_emu_free(e[2]);
		}
		if (k == 4) {
			tc_cg_emu_free(e[2]);
			setenv("TCOMP_EMU_CXXFLAGS", "-DTC_TEST_OTHER_FLAGS=1", 1);
		}
		e[i] = compile_ok(c);
		fill(x, 256, &rng);
		poison(y, 256);
		assert_null(run(e[i], buf, nelem));
		for (int j = 0; j < 256; j++)
			assert_true(y[j] == 2.0f * x[j] + 1.0f);
		runs = count_lines(log); /* one for the unit, one more for the other flags */
		if (runs != (k < 4 ? 1 : 2))
			fail_msg("compile %d: the compiler ran %d times", k, runs);
	}
	tc_cg_emu_free(e[2]);
	tc_cg_cuda_free(c);
	env_restore(names, 3, old);
	remove_tree(tmpl);
}

/* Compile c and run its kernel in a process of its own (a fork, as a
 * later tcomp command would): 0 when it ran and computed Y = 3 X - 1,
 * else what failed (1 compile, 2 launch, 3 result). */
static int stored_unit_in_a_process(const tc_cg_cuda *c)
{
	int status = -1;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		float x[256], y[256];
		void *buf[2] = {x, y};
		int64_t nelem[2] = {256, 256};
		uint64_t rng = tu_seed("store", 1);
		tc_diags d;
		tc_cg_emu *e;
		int i, r = 0;
		tc_diags_init(&d, NULL);
		if (!(e = tc_cg_emu_compile(c, &d)))
			_exit(1);
		fill(x, 256, &rng);
		poison(y, 256);
		if (tc_cg_emu_run(e, 0, buf, nelem, &d) != TC_OK)
			_exit(2);
		for (i = 0; i < 256; i++)
			if (y[i] != 3.0f * x[i] - 1.0f)
				r = 3;
		_exit(r);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

/* The entry of the store (TCOMP_EMU_STORE) other than the test's aged
 * ones into path: the obj- folder the unit went to. */
static void stored_entry(const char *store, char *path, size_t n)
{
	DIR *dir = opendir(store);
	struct dirent *de;
	int found = 0;
	assert_non_null(dir);
	while ((de = readdir(dir)))
		if (!strncmp(de->d_name, "obj-", 4) && strncmp(de->d_name, "obj-00000000000000a", 19)) {
			snprintf(path, n, "%s/%s", store, de->d_name);
			found++;
		}
	closedir(dir);
	assert_int_equal(found, 1);
}

/* The store of compiled units (codegen/cuda_emu.c): a unit one process
 * compiled, the next loads from the store's obj-<key> folder without
 * running the compiler (a TCOMP_CXX wrapper counts the compiles of units),
 * and computes right; an entry whose object is broken, or whose text is
 * another's, is compiled again and replaced; the first entry a process
 * keeps prunes the store to its 256 MiB, the entries used longest ago
 * first (aged entries of sparse files stand for the bytes); the process
 * that compiled first loads it too (its memo does not hold it); "off"
 * compiles; the older name TCOMP_EMU_PCH names the store when
 * TCOMP_EMU_STORE is not set. */
static void compiled_units_are_stored(void **state)
{
	static const char *const names[] = {"TCOMP_CXX", "TCOMP_EMU_STORE", "TCOMP_EMU_PCH",
		"TCOMP_EMU_CXXFLAGS"};
	static const struct {
		const char *name;
		long ago, mib;
	} aged[] = {{"obj-00000000000000a1", 1000, 200}, {"obj-00000000000000a2", 2000, 100},
		{"obj-00000000000000a3", 3000, 0}};
	char tmpl[] = "/tmp/tcomp-test-store-XXXXXX", script[600], log[600], *text;
	char store[600], entry[900], path[1000], *old[4];
	tc_cg_cuda *c;
	struct stat st;
	size_t i;
	(void)state;
	env_save(names, 4, old);
	assert_non_null(mkdtemp(tmpl));
	counting_cxx(tmpl, script, sizeof script, log, sizeof log);
	snprintf(store, sizeof store, "%s/store", tmpl);
	assert_int_equal(mkdir(store, 0700), 0);
	for (i = 0; i < 3; i++) {
		make_aged(store, aged[i].name, "unit.so", aged[i].ago);
		snprintf(path, sizeof path, "%s/%s/unit.so", store, aged[i].name);
		assert_int_equal(truncate(path, aged[i].mib << 20), 0); /* sparse */
	}
	setenv("TCOMP_CXX", script, 1);
	setenv("TCOMP_EMU_STORE", store, 1);
	unsetenv("TCOMP_EMU_PCH");
	unsetenv("TCOMP_EMU_CXXFLAGS");
	c = xy_code("3.0f * X[i] - 1.0f", "store");

	assert_int_equal(stored_unit_in_a_process(c), 0); /* compiled and kept */
	assert_int_equal(count_lines(log), 1);
	stored_entry(store, entry, sizeof entry);
	snprintf(path, sizeof path, "%s/unit.so", entry);
	assert_int_equal(stat(path, &st), 0);
	assert_true(st.st_size > 1000);
	snprintf(path, sizeof path, "%s/%s", store, aged[0].name); /* 200 MiB: fits */
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(count_entries(store, "obj-00000000000000a2"), 0); /* beyond */
	assert_int_equal(count_entries(store, "obj-00000000000000a3"), 0);

	assert_int_equal(stored_unit_in_a_process(c), 0); /* loaded */
	assert_int_equal(count_lines(log), 1);

	snprintf(path, sizeof path, "%s/unit.so", entry); /* a broken object */
	overwrite(path, "not an object");
	assert_int_equal(stored_unit_in_a_process(c), 0);
	assert_int_equal(count_lines(log), 2);
	assert_int_equal(stat(path, &st), 0); /* replaced */
	assert_true(st.st_size > 1000);

	snprintf(path, sizeof path, "%s/unit.cpp", entry); /* another unit's text */
	overwrite(path, "// another unit\n");
	assert_int_equal(stored_unit_in_a_process(c), 0);
	assert_int_equal(count_lines(log), 3);
	text = tu_read_file(path); /* replaced by the unit's */
	assert_non_null(text);
	assert_non_null(strstr(text, "Y[i] = 3.0f * X[i] - 1.0f; // store"));
	free(text);

	assert_int_equal(stored_unit_in_a_process(c), 0); /* loaded again */
	assert_int_equal(count_lines(log), 3);
	setenv("TCOMP_EMU_STORE", "off", 1);
	assert_int_equal(stored_unit_in_a_process(c), 0);
	assert_int_equal(count_lines(log), 4);
	stored_entry(store, entry, sizeof entry); /* still the one */
	unsetenv("TCOMP_EMU_STORE"); /* the older name */
	setenv("TCOMP_EMU_PCH", store, 1);
	tc_cg_emu_free(compile_ok(c)); /* this process, whose memo lacks it */
	assert_int_equal(count_lines(log), 4);

	tc_cg_cuda_free(c);
	env_restore(names, 4, old);
	remove_tree(tmpl);
}

/* |got - want| in units of the last place of want rounded to double (or
 * float when f). */
static double ulps(double got, long double want, int f)
{
	double w = f ? (double)(float)want : (double)want, ulp;
	if ((isnan(got) && isnan(w)) || got == w)
		return 0;
	if (isnan(got) || isnan(w) || isinf(got) || isinf(w))
		return 1e9;
	ulp = f ? (double)(nextafterf((float)fabs(w), INFINITY) - (float)fabs(w))
		: nextafter(fabs(w), INFINITY) - fabs(w);
	if (w == 0)
		ulp = f ? 0x1p-149 : 0x1p-1074;
	return (double)(fabsl((long double)got - want) / ulp);
}

/* The reference of math function k of the kernel at arguments x, u, a, p
 * (as the kernel had them), in long double; for the inverse functions one
 * Newton step from the kernel's result got. */
static long double reference(int k, long double x, long double u, long double a, long double p,
	double got)
{
	const long double pi = 3.141592653589793238462643383279502884L;
	const long double two_sqrtpi = 1.128379167095512573896158903121545172L;
	long double z = got;
	switch (k) {
	case 0: return 1.0L / sqrtl(u);
	case 1: return 1.0L / cbrtl(a);
	case 2: return 1.0L / hypotl(a, x);
	case 3: return powl(10.0L, a);
	case 4: return a == rintl(a) ? copysignl(0.0L, a) : sinl(pi * a);
	case 5: return a - floorl(a) == 0.5L ? 0.0L : cosl(pi * a);
	case 6: return isinf(got) ? z : z - (erfl(z) - x) / (two_sqrtpi * expl(-z * z));
	case 7: return isinf(got) ? z : z + (erfcl(z) - p) / (two_sqrtpi * expl(-z * z));
	case 8: return 0.5L * erfcl(-a / sqrtl(2.0L));
	case 9:
		return isinf(got) ? z
				  : z - (0.5L * erfcl(-z / sqrtl(2.0L)) - u) /
						(expl(-z * z / 2) / sqrtl(2 * pi));
	case 10: return sqrtl(a * a + x * x + u * u);
	case 12: return expm1l(x);
	}
	return 0;
}

static void math_functions_match_references(void **state)
{
	enum { NB = 4, N = NB * 64 };
	static const kspec spec = {"math", {NB, 1, 1}, {64, 1, 1}, 3, {"X", "Y", "F"},
		{"double", "double", "float"}, {1, 0, 0}};
	static const int checked[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12};
	static double x[N], y[N * NFN];
	static float f[N * NFN];
	uint64_t rng = tu_seed("math", 1);
	void *buf[3] = {x, y, f};
	int64_t nelem[3] = {N, N * NFN, N * NFN};
	tc_cg_cuda *c = make_code("", math_src, &spec);
	tc_cg_emu *e = compile_ok(c);
	(void)state;
	for (int i = 0; i < N; i++)
		x[i] = 2.0 * tu_rand_unit(&rng) - 1.0;
	/* special points: exact zeros and ones of sinpi/cospi, erfinv's ends */
	x[0] = 1.0 / 3; /* a = 1: sinpi +0, cospi -1 */
	x[1] = -2.0 / 3; /* a = -2: sinpi -0 */
	x[2] = 0.5 / 3; /* a = 0.5: cospi +0 */
	x[3] = 1.0; /* erfinv(1) = inf, erfcinv(2) = -inf, normcdfinv(1) = inf */
	x[4] = -1.0; /* erfinv(-1) = -inf, erfcinv(0) = inf */
	x[5] = 0.0;
	for (int i = 0; i < N * NFN; i++) {
		y[i] = NAN;
		f[i] = NAN;
	}
	assert_null(run(e, buf, (const int64_t *)nelem));
	for (int i = 0; i < N; i++) {
		/* the arguments as the kernel computed them */
		double xd = x[i], ud = xd * 0.5 + 0.5, ad = xd * 3.0, pd = ud * 2.0;
		float xf = (float)xd, uf = (float)ud, af = (float)ad, pf = (float)pd;
		for (size_t j = 0; j < sizeof checked / sizeof checked[0]; j++) {
			int k = checked[j];
			double gd = y[i * NFN + k], gf = f[i * NFN + k];
			long double wd = reference(k, xd, ud, ad, pd, gd);
			long double wf = reference(k, xf, uf, af, pf, gf);
			if (k == 12) /* expm1 (double) and expf (float) */
				wf = expl(xf);
			if (ulps(gd, wd, 0) > 4)
				fail_msg("function %d at x = %.17g: %.17g, want %.20Lg (%.1f ulp)", k, xd,
					gd, wd, ulps(gd, wd, 0));
			if (ulps(gf, wf, 1) > 2)
				fail_msg("float function %d at x = %.9g: %.9g, want %.12Lg (%.1f ulp)", k,
					(double)xf, gf, wf, ulps(gf, wf, 1));
		}
		assert_true(y[i * NFN + 11] == (isnan(xd) ? 1 : 0) && f[i * NFN + 11] == 0);
		assert_true(y[i * NFN + 13] == (double)INT64_MAX + FLT_MAX);
		assert_true(isinf(f[i * NFN + 13]) && isnan(f[i * NFN + 14]));
		assert_true(y[i * NFN + 14] == DBL_MAX);
	}
	/* the exact points */
	assert_true(y[0 * NFN + 4] == 0 && !signbit(y[0 * NFN + 4]));
	assert_true(y[0 * NFN + 5] == -1.0);
	assert_true(y[1 * NFN + 4] == 0 && signbit(y[1 * NFN + 4]));
	assert_true(y[2 * NFN + 5] == 0 && !signbit(y[2 * NFN + 5]));
	assert_true(isinf(y[3 * NFN + 6]) && y[3 * NFN + 6] > 0);
	assert_true(isinf(y[3 * NFN + 7]) && y[3 * NFN + 7] < 0);
	assert_true(isinf(y[3 * NFN + 9]) && y[3 * NFN + 9] > 0);
	assert_true(isinf(y[4 * NFN + 6]) && y[4 * NFN + 6] < 0);
	assert_true(isinf(y[4 * NFN + 7]) && y[4 * NFN + 7] > 0);
	assert_true(y[5 * NFN + 6] == 0 && y[5 * NFN + 0] == 1.0 / sqrt(0.5));
	assert_true(f[0 * NFN + 4] == 0 && f[0 * NFN + 5] == -1.0f);
	assert_true(isinf(f[3 * NFN + 6]) && isinf(f[4 * NFN + 7]));
	nvrtc_compiles(c);
	tc_cg_emu_free(e);
	tc_cg_cuda_free(c);
}

/* The 16-bit float conversions of the emulation header (those of
 * codegen/cuda.c's prelude16) on every float16 and bfloat16 value, every
 * midpoint between neighbours and the floats next to each midpoint, and
 * __double2float_rz on doubles just above each: R holds, per element,
 * __half2float and __bfloat162float of the pattern i % 65536, the bits of
 * __float2half_rn and __float2bfloat16_rn of X[i], and __double2float_rz
 * of X[i] * (1 + 2^-30). */
static const char *const conv_src =
	"extern \"C\" __global__ void __launch_bounds__(256)\n"
	"conv(TC_GLOBAL(const float) X, TC_GLOBAL(const __half) P, TC_GLOBAL(float) R)\n"
	"{\n"
	"    for (int64_t i = (int64_t)blockIdx.x * 256 + threadIdx.x; i < NCONV; i += 256 * 128) {\n"
	"        __half h = TC_LDG(P, i % 65536);\n"
	"        __nv_bfloat16 b;\n"
	"        float x = TC_LDG(X, i);\n"
	"        b.__x = h.__x;\n"
	"        R[5 * i] = __half2float(h);\n"
	"        R[5 * i + 1] = __bfloat162float(b);\n"
	"        R[5 * i + 2] = (float)__float2half_rn(x).__x;\n"
	"        R[5 * i + 3] = (float)__float2bfloat16_rn(x).__x;\n"
	"        R[5 * i + 4] = __double2float_rz((double)x * (1.0 + 0x1p-30));\n"
	"    }\n"
	"}\n";

/* The float nearest to x toward zero (the C library's conversion under
 * FE_TOWARDZERO). */
static float float_rz(double x)
{
	volatile double v = x;
	volatile float f;
	int old = fegetround();
	fesetround(FE_TOWARDZERO);
	f = (float)v;
	fesetround(old);
	return f;
}

static void half_conversions_round_as_the_gpu(void **state)
{
	enum { NCONV = 8 * 65536 };
	static const kspec spec = {"conv", {128, 1, 1}, {256, 1, 1}, 3, {"X", "P", "R"},
		{"float", "__half", "float"}, {1, 1, 0}};
	static float x[NCONV], r[5 * NCONV];
	static uint16_t pat[65536];
	void *buf[3] = {x, pat, r};
	int64_t nelem[3] = {NCONV, 65536, 5 * NCONV};
	tc_buf defs;
	tc_cg_cuda *c;
	tc_cg_emu *e;
	int64_t i;
	(void)state;
	for (i = 0; i < 65536; i++) { /* a value, a midpoint, the floats beside it */
		uint16_t h = (uint16_t)i, h1 = (uint16_t)(i + 1);
		double v = tc_half_to_double(h), m = (v + tc_half_to_double(h1)) / 2;
		double bv = tc_bf16_to_double(h), bm = (bv + tc_bf16_to_double(h1)) / 2;
		pat[i] = h;
		x[8 * i] = (float)v;
		x[8 * i + 1] = (float)m; /* exact: 12 bits */
		x[8 * i + 2] = nextafterf((float)m, INFINITY);
		x[8 * i + 3] = nextafterf((float)m, -INFINITY);
		x[8 * i + 4] = (float)bv;
		x[8 * i + 5] = (float)bm; /* exact: 9 bits (inf, NaN where h1 is) */
		x[8 * i + 6] = nextafterf((float)bm, INFINITY);
		x[8 * i + 7] = nextafterf((float)bm, -INFINITY);
	}
	x[2] = FLT_MAX; /* beyond half's range; rz of just above FLT_MAX */
	x[3] = 0x1p-149f; /* the smallest float subnormal */
	for (i = 0; i < 5 * NCONV; i++)
		r[i] = NAN;
	tc_buf_init(&defs);
	tc_buf_printf(&defs, "%s#define NCONV %d\n", tc_cg_cuda_prelude16(), (int)NCONV);
	assert_non_null(defs.s);
	c = make_code(defs.s, conv_src, &spec);
	tc_buf_free(&defs);
	e = compile_ok(c);
	assert_null(run(e, buf, nelem));
	for (i = 0; i < NCONV; i++) {
		uint16_t p = pat[i % 65536];
		double hv = tc_half_to_double(p), bv = tc_bf16_to_double(p);
		float xi = x[i], rz = float_rz((double)xi * (1.0 + 0x1p-30));
		uint16_t wh = isnan(xi) ? 0x7fff : tc_half_from_double(xi);
		uint16_t wb = isnan(xi) ? 0x7fff : tc_bf16_from_float(xi);
		if (!(isnan(hv) ? isnan(r[5 * i]) : r[5 * i] == hv) ||
			!(isnan(bv) ? isnan(r[5 * i + 1]) : r[5 * i + 1] == bv))
			fail_msg("pattern 0x%04x: __half2float %.9g (want %.9g), __bfloat162float "
				 "%.9g (want %.9g)",
				p, r[5 * i], hv, r[5 * i + 1], bv);
		if (r[5 * i + 2] != wh || r[5 * i + 3] != wb)
			fail_msg("x = %a: __float2half_rn 0x%04x (want 0x%04x), __float2bfloat16_rn "
				 "0x%04x (want 0x%04x)",
				(double)xi, (unsigned)r[5 * i + 2], wh, (unsigned)r[5 * i + 3], wb);
		if (!(isnan(rz) ? isnan(r[5 * i + 4]) : r[5 * i + 4] == rz))
			fail_msg("x = %a: __double2float_rz %a (want %a)", (double)xi,
				(double)r[5 * i + 4], (double)rz);
	}
	nvrtc_compiles(c);
	tc_cg_emu_free(e);
	tc_cg_cuda_free(c);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* TC_EMU_BENCH=1: compile time at -O0 and -O1 (alternating, 3 rounds,
 * medians) and the 256 x 256 matmul's run time at each. */
static void bench(void **state)
{
	enum { N = 256, R = 3 };
	static const kspec spec = {"matmul", {N / 16, N / 16, 1}, {16, 16, 1}, 3, {"A", "B", "C"},
		{"float", "float", "float"}, {1, 1, 0}};
	static float a[N * N], b[N * N], cm[N * N];
	static const char *const opts[2] = {"-O0", "-O1"};
	double tc[2][R], tr[2][R];
	uint64_t rng = tu_seed("bench", 1);
	void *buf[3] = {a, b, cm};
	int64_t nelem[3] = {N * N, N * N, N * N};
	tc_cg_cuda *c = make_code("#define N 256\n", matmul_src, &spec);
	(void)state;
	if (!getenv("TC_EMU_BENCH")) {
		tc_cg_cuda_free(c);
		skip();
	}
	fill(a, N * N, &rng);
	fill(b, N * N, &rng);
	for (int r = 0; r < R; r++)
		for (int o = 0; o < 2; o++) {
			double t0, t1, t2;
			tc_cg_emu *e;
			setenv("TCOMP_EMU_CXXFLAGS", opts[o], 1); /* the last -O wins */
			t0 = now();
			e = compile_ok(c);
			t1 = now();
			poison(cm, N * N);
			assert_null(run(e, buf, nelem));
			t2 = now();
			tc[o][r] = t1 - t0;
			tr[o][r] = t2 - t1;
			tc_cg_emu_free(e);
		}
	unsetenv("TCOMP_EMU_CXXFLAGS");
	for (int o = 0; o < 2; o++) {
		/* accesses: per thread and tile 2 global reads, 2 shared writes,
		 * 32 shared reads; one write of C */
		double acc = (double)N * N * ((N / 16) * 36.0 + 1);
		double cs[R], rs[R], c0, r0; /* medians */
		memcpy(cs, tc[o], sizeof cs);
		memcpy(rs, tr[o], sizeof rs);
		for (int i = 0; i < R; i++)
			for (int j = i + 1; j < R; j++) {
				if (cs[j] < cs[i]) { double t = cs[i]; cs[i] = cs[j]; cs[j] = t; }
				if (rs[j] < rs[i]) { double t = rs[i]; rs[i] = rs[j]; rs[j] = t; }
			}
		c0 = cs[R / 2];
		r0 = rs[R / 2];
		printf("emulator %s: compile %.3f s, matmul %dx%d run %.3f s, %.1f M accesses/s, "
		       "%.1f M barrier waits/s\n",
			opts[o], c0, N, N, r0, acc / r0 / 1e6,
			(double)N * N * (N / 16) * 2 / r0 / 1e6);
	}
	tc_cg_cuda_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(block_reduction_equals_the_sum),
		cmocka_unit_test(missing_barrier_is_a_shared_race),
		cmocka_unit_test(bad_index_is_out_of_bounds),
		cmocka_unit_test(blocks_writing_one_element_race),
		cmocka_unit_test(warp_shuffle_reduction_equals_the_sum),
		cmocka_unit_test(matmul_tiles_equal_the_product),
		cmocka_unit_test(divergence_is_reported),
		cmocka_unit_test(syncwarp_orders_the_lanes),
		cmocka_unit_test(compile_errors_carry_the_compilers_message),
		cmocka_unit_test(a_missing_compiler_is_a_clear_error),
		cmocka_unit_test(precompiled_header_store),
		cmocka_unit_test(compiled_modules_are_reused),
		cmocka_unit_test(compiled_units_are_stored),
		cmocka_unit_test(math_functions_match_references),
		cmocka_unit_test(half_conversions_round_as_the_gpu),
		cmocka_unit_test(bench),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
