/* End-to-end tests of the kernel corpus (the .tc files in tests/corpus) through the
 * public API, on both targets.
 *
 * Every corpus kernel is compiled for several shape sets, including sizes
 * of 1 and odd/prime sizes, run on fresh seeded random inputs, and compared
 * element by element against plain C loops written here independently of
 * the library.  Each shape set is checked four ways:
 *
 *   cpu     tc_compile(..., NULL): the default options, i.e. compiled for
 *           the host CPU through isl and LLVM and JIT-ed;
 *   interp  tc_compile(..., o) with o's target=interp: the reference
 *           interpreter;
 *   cli     `tcomp run` in a separate process (default target), on .npy
 *           files;
 *   drawn   compiled for the CPU with an option combination drawn from the
 *           case's seed: order on or off, and no tiling or tile sizes of 1
 *           to 7 for up to 4 band members (so the schedule passes are
 *           checked on every kernel; the drawn options are printed on a
 *           failure), unroll, fusion, pack, parallel, register tiles,
 *           vector (auto, 1, 4, 8, 16 lanes) and unroll_inner (auto, 1,
 *           2, 4, 8), interchange and threads (auto or 1: the
 *           schedule made for one thread).  contract is not drawn: it keeps its default (on)
 *           for both targets, which follow one rule (ir/ir.h,
 *           tc_ir_fma_of); tests/test_options.c and test_cgc.c check
 *           that rule bit for bit.
 *
 * The cpu and interp outputs are each compared with the C loops, and then
 * with each other directly (integers and bools exactly, floats within the
 * case's tolerance, NaN equal to NaN), so a disagreement between the two
 * targets is reported as such even where both are within tolerance of the
 * loops.
 *
 * How a case works: a build function declares the inputs (filled with
 * random data) and the expected outputs (computed by its loops) of one shape
 * set; the driver loads the .tc file and, for each target, compiles the
 * entry, checks the output count, dtypes and shapes, runs the kernel twice
 * (outputs poisoned with two different patterns, so elements the kernel
 * never writes are caught), and compares.  To add a kernel: write the def,
 * a build function, and one line in the table at the end.
 *
 * Floating point: the interpreter computes each float32 operation exactly
 * and rounds to float32 after every operation, and computes builtins in
 * double; the compiled code does the same, and both fuse a product into
 * the sum it feeds (contract=on, the default: one rounding instead of
 * two).  The loops below mirror that with float variables and the f_*
 * helpers (builtin in double, then rounded) but round every product, so
 * pointwise results agree to ~1 ulp of the operands (tolerance: 1e-5
 * relative), and cpu and interp with each other to the bit where the
 * schedule keeps the order.  Reductions are summed in the
 * natural order with a float accumulator, like the interpreter; the
 * compiled code may sum in another order (the language treats reductions
 * as associative: the scheduler may reorder several indices, and the
 * vecreduce option, on by default, vectorises a float sum into partial
 * sums), so float sums get reduction_tol() below.
 *
 * Set TC_CORPUS_FILTER to a cmocka filter pattern (e.g. "softmax*") to run a
 * subset. */
#include <float.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tcomp.h"
#include "codegen/nvrtc.h"
#include "lang/diag.h"
#include "tests/testutil.h"
#include "npy.h"

#define MAX_TENSORS 8
#define MAX_SETS 4
#define MAX_SIZES 8

/* The inputs and expected outputs of one shape set of one case. */
typedef struct run {
	uint64_t rng;
	int nin, nout;
	tu_tensor in[MAX_TENSORS];
	tu_tensor want[MAX_TENSORS]; /* expected outputs, filled by the build function */
	tu_tensor init[MAX_TENSORS]; /* initial output contents where has_init */
	int has_init[MAX_TENSORS];
	double rtol[MAX_TENSORS], atol[MAX_TENSORS];
} run;

/* A corpus kernel: tests/corpus/<file>.tc, def <entry>.  sizes holds up to
 * MAX_SETS shape sets (a set whose first size is 0 ends the list); what each
 * number means is written above the build function. */
typedef struct kernel_case {
	const char *name;
	const char *file;
	const char *entry;
	void (*build)(run *r, const int64_t *s);
	int64_t sizes[MAX_SETS][MAX_SIZES];
} kernel_case;

/* DIMS(M, K) expands to an int64_t array and its length; SCALAR is rank 0. */
#define DIMS(...) (const int64_t[]){__VA_ARGS__}, \
	(int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))
#define SCALAR NULL, 0

/* Row-major linear indices. */
#define IX2(i, j, D1) ((i) * (D1) + (j))
#define IX3(i, j, k, D1, D2) (IX2(i, j, D1) * (D2) + (k))
#define IX4(i, j, k, l, D1, D2, D3) (IX3(i, j, k, D1, D2) * (D3) + (l))
#define IX5(i, j, k, l, m, D1, D2, D3, D4) (IX4(i, j, k, l, D1, D2, D3) * (D4) + (m))

/* ---- declaring inputs and expected outputs ---- */

static tu_tensor *new_input(run *r, tu_elt elt, const int64_t *dims, int ndim)
{
	assert_true(r->nin < MAX_TENSORS);
	tu_tensor *t = &r->in[r->nin++];
	tu_tensor_init(t, elt, dims, ndim);
	return t;
}

/* Uniform floats in [lo, hi). */
static float *in_f32(run *r, const int64_t *dims, int ndim, double lo, double hi)
{
	tu_tensor *t = new_input(r, TU_F32, dims, ndim);
	float *p = t->data;
	for (int64_t i = 0; i < t->numel; i++)
		p[i] = (float)(lo + (hi - lo) * tu_rand_unit(&r->rng));
	return p;
}

static double *in_f64(run *r, const int64_t *dims, int ndim, double lo, double hi)
{
	tu_tensor *t = new_input(r, TU_F64, dims, ndim);
	double *p = t->data;
	for (int64_t i = 0; i < t->numel; i++)
		p[i] = lo + (hi - lo) * tu_rand_unit(&r->rng);
	return p;
}

/* Uniform values in [lo, hi) rounded to binary16; returns the bits. */
static uint16_t *in_f16(run *r, const int64_t *dims, int ndim, double lo, double hi)
{
	tu_tensor *t = new_input(r, TU_F16, dims, ndim);
	uint16_t *p = t->data;
	for (int64_t i = 0; i < t->numel; i++)
		p[i] = tu_half_from_double(lo + (hi - lo) * tu_rand_unit(&r->rng));
	return p;
}

/* Uniform integers in [lo, hi]; if they all came out 0, the first is set to
 * a nonzero value of the range (inputs are never all zeros). */
static void fill_int(run *r, tu_tensor *t, int64_t lo, int64_t hi)
{
	int all_zero = 1;
	for (int64_t i = 0; i < t->numel; i++) {
		int64_t v = tu_rand_int(&r->rng, lo, hi);
		all_zero &= v == 0;
		switch (t->elt) {
		case TU_BOOL: ((uint8_t *)t->data)[i] = (uint8_t)v; break;
		case TU_I8: ((int8_t *)t->data)[i] = (int8_t)v; break;
		case TU_U8: ((uint8_t *)t->data)[i] = (uint8_t)v; break;
		case TU_I32: ((int32_t *)t->data)[i] = (int32_t)v; break;
		case TU_I64: ((int64_t *)t->data)[i] = v; break;
		default: fail_msg("fill_int on a float tensor");
		}
	}
	if (all_zero && t->numel > 0 && (lo != 0 || hi != 0)) {
		int64_t v = hi != 0 ? hi : lo;
		switch (t->elt) {
		case TU_BOOL: case TU_U8: ((uint8_t *)t->data)[0] = (uint8_t)v; break;
		case TU_I8: ((int8_t *)t->data)[0] = (int8_t)v; break;
		case TU_I32: ((int32_t *)t->data)[0] = (int32_t)v; break;
		case TU_I64: ((int64_t *)t->data)[0] = v; break;
		default: break;
		}
	}
}

static int8_t *in_i8(run *r, const int64_t *dims, int ndim, int64_t lo, int64_t hi)
{
	tu_tensor *t = new_input(r, TU_I8, dims, ndim);
	fill_int(r, t, lo, hi);
	return t->data;
}

static uint8_t *in_u8(run *r, const int64_t *dims, int ndim, int64_t lo, int64_t hi)
{
	tu_tensor *t = new_input(r, TU_U8, dims, ndim);
	fill_int(r, t, lo, hi);
	return t->data;
}

static int32_t *in_i32(run *r, const int64_t *dims, int ndim, int64_t lo, int64_t hi)
{
	tu_tensor *t = new_input(r, TU_I32, dims, ndim);
	fill_int(r, t, lo, hi);
	return t->data;
}

static int64_t *in_i64(run *r, const int64_t *dims, int ndim, int64_t lo, int64_t hi)
{
	tu_tensor *t = new_input(r, TU_I64, dims, ndim);
	fill_int(r, t, lo, hi);
	return t->data;
}

/* Random 0/1 bytes. */
static uint8_t *in_bool(run *r, const int64_t *dims, int ndim)
{
	tu_tensor *t = new_input(r, TU_BOOL, dims, ndim);
	fill_int(r, t, 0, 1);
	return t->data;
}

/* The next expected output, in the order of the def's '->' list.  Default
 * tolerances: float32 1e-5 relative, float64 1e-12 relative; float16 and
 * integers exact (float16 references round to half after every operation,
 * as the interpreter does). */
static void *new_output(run *r, tu_elt elt, const int64_t *dims, int ndim)
{
	assert_true(r->nout < MAX_TENSORS);
	int i = r->nout++;
	tu_tensor_init(&r->want[i], elt, dims, ndim);
	r->rtol[i] = elt == TU_F32 ? 1e-5 : elt == TU_F64 ? 1e-12 : 0;
	r->atol[i] = 0;
	return r->want[i].data;
}

static float *out_f32(run *r, const int64_t *dims, int ndim)
{
	return new_output(r, TU_F32, dims, ndim);
}

static double *out_f64(run *r, const int64_t *dims, int ndim)
{
	return new_output(r, TU_F64, dims, ndim);
}

static uint16_t *out_f16(run *r, const int64_t *dims, int ndim)
{
	return new_output(r, TU_F16, dims, ndim);
}

static int8_t *out_i8(run *r, const int64_t *dims, int ndim)
{
	return new_output(r, TU_I8, dims, ndim);
}

static uint8_t *out_u8(run *r, const int64_t *dims, int ndim)
{
	return new_output(r, TU_U8, dims, ndim);
}

static int32_t *out_i32(run *r, const int64_t *dims, int ndim)
{
	return new_output(r, TU_I32, dims, ndim);
}

static int64_t *out_i64(run *r, const int64_t *dims, int ndim)
{
	return new_output(r, TU_I64, dims, ndim);
}

static uint8_t *out_bool(run *r, const int64_t *dims, int ndim)
{
	return new_output(r, TU_BOOL, dims, ndim);
}

/* Tolerance of the last declared output: |got - want| <= atol + rtol*|want|. */
static void out_tol(run *r, double rtol, double atol)
{
	r->rtol[r->nout - 1] = rtol;
	r->atol[r->nout - 1] = atol;
}

/* Tolerance of the last output for a float32 reduction over several indices
 * whose order the library may choose: nterms summands, each of magnitude at
 * most max_term.  Reordering a float sum changes each partial sum by about
 * an ulp of the running magnitude; 1e-6 * nterms * max_term covers that with
 * a wide margin and is still far below a missing or doubled summand. */
static void reduction_tol(run *r, int64_t nterms, double max_term)
{
	out_tol(r, 1e-5, 1e-6 * (double)nterms * max_term);
}

/* The last declared float32 output starts from random contents instead of a
 * poison (for reductions without '!', which accumulate into it); returns
 * them so the reference can start from the same values. */
static const float *out_init_f32(run *r)
{
	int i = r->nout - 1;
	tu_tensor *w = &r->want[i];
	assert_int_equal(w->elt, TU_F32);
	tu_tensor_init(&r->init[i], TU_F32, w->shape, (int)w->dl.ndim);
	r->has_init[i] = 1;
	float *p = r->init[i].data;
	for (int64_t j = 0; j < w->numel; j++)
		p[j] = (float)(-1 + 2 * tu_rand_unit(&r->rng));
	return p;
}

/* ---- float32 builtins as the interpreter computes them: in double, then
 * rounded to float32 ---- */

static float f_exp(float x) { return (float)exp(x); }
static float f_sqrt(float x) { return (float)sqrt(x); }
static float f_rsqrt(float x) { return (float)(1.0 / sqrt(x)); }
static float f_tanh(float x) { return (float)tanh(x); }
static float f_fabs(float x) { return (float)fabs(x); }
static float f_fmax(float a, float b) { return (float)fmax(a, b); }
static float f_fmin(float a, float b) { return (float)fmin(a, b); }

/* Integer division and remainder rounding toward negative infinity. */
static int32_t floordiv(int32_t a, int32_t b)
{
	int32_t q = a / b;
	if ((a % b != 0) && ((a < 0) != (b < 0)))
		q--;
	return q;
}

static int32_t floormod(int32_t a, int32_t b)
{
	return a - b * floordiv(a, b);
}

/* ================================================================
 * Build functions: inputs, then the reference loops.  The comment above
 * each names the meaning of s[].
 * ================================================================ */

/* ---- pointwise.tc ---- */

/* s = {N, M} */
static void build_add(run *r, const int64_t *s)
{
	int64_t N = s[0], M = s[1];
	float *A = in_f32(r, DIMS(N, M), -1, 1);
	float *B = in_f32(r, DIMS(N, M), -1, 1);
	float *C = out_f32(r, DIMS(N, M));
	for (int64_t i = 0; i < N * M; i++)
		C[i] = A[i] + B[i];
}

/* s = {N, M} */
static void build_relu(run *r, const int64_t *s)
{
	int64_t N = s[0], M = s[1];
	float *A = in_f32(r, DIMS(N, M), -1, 1);
	float *O = out_f32(r, DIMS(N, M));
	for (int64_t i = 0; i < N * M; i++)
		O[i] = f_fmax(A[i], 0.0f);
}

/* s = {N} */
static void build_sigmoid(run *r, const int64_t *s)
{
	int64_t N = s[0];
	float *A = in_f32(r, DIMS(N), -8, 8);
	float *O = out_f32(r, DIMS(N));
	for (int64_t i = 0; i < N; i++)
		O[i] = 1.0f / (1.0f + f_exp(-A[i]));
}

/* s = {N} */
static void build_scale(run *r, const int64_t *s)
{
	int64_t N = s[0];
	float *A = in_f32(r, DIMS(N), -1, 1);
	float *sc = in_f32(r, SCALAR, -2, 2);
	float *O = out_f32(r, DIMS(N));
	for (int64_t i = 0; i < N; i++)
		O[i] = A[i] * sc[0];
}

/* s = {P, Q, R} */
static void build_builtins(run *r, const int64_t *s)
{
	int64_t n = s[0] * s[1] * s[2];
	float *A = in_f32(r, DIMS(s[0], s[1], s[2]), -2, 2);
	float *B = in_f32(r, DIMS(s[0], s[1], s[2]), -2, 2);
	float *O = out_f32(r, DIMS(s[0], s[1], s[2]));
	/* sqrt(|A|) + ... may cancel: allow an absolute error of a few ulps of
	 * the terms (magnitude <= 4). */
	out_tol(r, 1e-5, 4 * 4 * FLT_EPSILON);
	for (int64_t i = 0; i < n; i++)
		O[i] = f_tanh(A[i]) * f_fabs(B[i]) - f_fmin(A[i], B[i]) + f_sqrt(f_fabs(A[i]));
}

/* ---- transpose.tc ---- */

/* s = {N, M} */
static void build_transpose(run *r, const int64_t *s)
{
	int64_t N = s[0], M = s[1];
	float *A = in_f32(r, DIMS(N, M), -1, 1);
	float *B = out_f32(r, DIMS(M, N));
	for (int64_t n = 0; n < N; n++)
		for (int64_t m = 0; m < M; m++)
			B[IX2(m, n, N)] = A[IX2(n, m, M)];
}

/* s = {P, Q, R} */
static void build_permute3(run *r, const int64_t *s)
{
	int64_t P = s[0], Q = s[1], R = s[2];
	float *X = in_f32(r, DIMS(P, Q, R), -1, 1);
	float *Y = out_f32(r, DIMS(R, P, Q));
	for (int64_t p = 0; p < P; p++)
		for (int64_t q = 0; q < Q; q++)
			for (int64_t k = 0; k < R; k++)
				Y[IX3(k, p, q, P, Q)] = X[IX3(p, q, k, Q, R)];
}

/* ---- matvec.tc ---- */

/* s = {M, K} */
static void build_matvec(run *r, const int64_t *s)
{
	int64_t M = s[0], K = s[1];
	float *A = in_f32(r, DIMS(M, K), -1, 1);
	float *x = in_f32(r, DIMS(K), -1, 1);
	float *y = out_f32(r, DIMS(M));
	reduction_tol(r, K, 1);
	for (int64_t m = 0; m < M; m++) {
		float acc = 0;
		for (int64_t k = 0; k < K; k++)
			acc += A[IX2(m, k, K)] * x[k];
		y[m] = acc;
	}
}

/* s = {N} */
static void build_dot(run *r, const int64_t *s)
{
	int64_t N = s[0];
	float *a = in_f32(r, DIMS(N), -1, 1);
	float *b = in_f32(r, DIMS(N), -1, 1);
	float *out = out_f32(r, SCALAR);
	reduction_tol(r, N, 1);
	float acc = 0;
	for (int64_t i = 0; i < N; i++)
		acc += a[i] * b[i];
	out[0] = acc;
}

/* s = {M, K} */
static void build_matvec_plus(run *r, const int64_t *s)
{
	int64_t M = s[0], K = s[1];
	float *A = in_f32(r, DIMS(M, K), -1, 1);
	float *x = in_f32(r, DIMS(K), -1, 1);
	float *y0 = in_f32(r, DIMS(M), -1, 1);
	float *y = out_f32(r, DIMS(M));
	reduction_tol(r, K + 1, 1);
	for (int64_t m = 0; m < M; m++) {
		float acc = y0[m];
		for (int64_t k = 0; k < K; k++)
			acc += A[IX2(m, k, K)] * x[k];
		y[m] = acc;
	}
}

/* s = {M, K} */
static void build_row_sum_accumulate(run *r, const int64_t *s)
{
	int64_t M = s[0], K = s[1];
	float *A = in_f32(r, DIMS(M, K), -1, 1);
	float *S = out_f32(r, DIMS(M));
	const float *S0 = out_init_f32(r);
	reduction_tol(r, K + 1, 1);
	for (int64_t m = 0; m < M; m++) {
		float acc = S0[m];
		for (int64_t k = 0; k < K; k++)
			acc += A[IX2(m, k, K)];
		S[m] = acc;
	}
}

/* ---- matmul.tc ---- */

/* s = {M, K, N} */
static void build_matmul(run *r, const int64_t *s)
{
	int64_t M = s[0], K = s[1], N = s[2];
	float *A = in_f32(r, DIMS(M, K), -1, 1);
	float *B = in_f32(r, DIMS(K, N), -1, 1);
	float *C = out_f32(r, DIMS(M, N));
	reduction_tol(r, K, 1);
	for (int64_t m = 0; m < M; m++)
		for (int64_t n = 0; n < N; n++) {
			float acc = 0;
			for (int64_t k = 0; k < K; k++)
				acc += A[IX2(m, k, K)] * B[IX2(k, n, N)];
			C[IX2(m, n, N)] = acc;
		}
}

/* s = {M, K, N} */
static void build_matmul_nt(run *r, const int64_t *s)
{
	int64_t M = s[0], K = s[1], N = s[2];
	float *A = in_f32(r, DIMS(M, K), -1, 1);
	float *B = in_f32(r, DIMS(N, K), -1, 1);
	float *C = out_f32(r, DIMS(M, N));
	reduction_tol(r, K, 1);
	for (int64_t m = 0; m < M; m++)
		for (int64_t n = 0; n < N; n++) {
			float acc = 0;
			for (int64_t k = 0; k < K; k++)
				acc += A[IX2(m, k, K)] * B[IX2(n, k, K)];
			C[IX2(m, n, N)] = acc;
		}
}

/* s = {M, K, N} */
static void build_matmul_tn(run *r, const int64_t *s)
{
	int64_t M = s[0], K = s[1], N = s[2];
	float *A = in_f32(r, DIMS(K, M), -1, 1);
	float *B = in_f32(r, DIMS(K, N), -1, 1);
	float *C = out_f32(r, DIMS(M, N));
	reduction_tol(r, K, 1);
	for (int64_t m = 0; m < M; m++)
		for (int64_t n = 0; n < N; n++) {
			float acc = 0;
			for (int64_t k = 0; k < K; k++)
				acc += A[IX2(k, m, M)] * B[IX2(k, n, N)];
			C[IX2(m, n, N)] = acc;
		}
}

/* s = {B, N, M, K} */
static void build_batch_matmul(run *r, const int64_t *s)
{
	int64_t B = s[0], N = s[1], M = s[2], K = s[3];
	float *X = in_f32(r, DIMS(B, N, M), -1, 1);
	float *Y = in_f32(r, DIMS(B, M, K), -1, 1);
	float *Z = out_f32(r, DIMS(B, N, K));
	reduction_tol(r, M, 1);
	for (int64_t b = 0; b < B; b++)
		for (int64_t n = 0; n < N; n++)
			for (int64_t k = 0; k < K; k++) {
				float acc = 0;
				for (int64_t m = 0; m < M; m++)
					acc += X[IX3(b, n, m, N, M)] * Y[IX3(b, m, k, M, K)];
				Z[IX3(b, n, k, N, K)] = acc;
			}
}

/* ---- tensordot.tc ---- */

/* s = {N, C1, C2, C3, H, W} */
static void build_tensordot(run *r, const int64_t *s)
{
	int64_t N = s[0], C1 = s[1], C2 = s[2], C3 = s[3], H = s[4], W = s[5];
	float *I0 = in_f32(r, DIMS(N, C1, C2, H, W), -1, 1);
	float *I1 = in_f32(r, DIMS(N, C2, C3, H, W), -1, 1);
	float *O = out_f32(r, DIMS(N, C1, C3, H, W));
	reduction_tol(r, C2, 1);
	for (int64_t n = 0; n < N; n++)
		for (int64_t c1 = 0; c1 < C1; c1++)
			for (int64_t c3 = 0; c3 < C3; c3++)
				for (int64_t h = 0; h < H; h++)
					for (int64_t w = 0; w < W; w++) {
						float acc = 0;
						for (int64_t c2 = 0; c2 < C2; c2++)
							acc += I0[IX5(n, c1, c2, h, w, C1, C2, H, W)] *
								I1[IX5(n, c2, c3, h, w, C2, C3, H, W)];
						O[IX5(n, c1, c3, h, w, C1, C3, H, W)] = acc;
					}
}

/* s = {I, J, K, L} */
static void build_tensordot2(run *r, const int64_t *s)
{
	int64_t I = s[0], J = s[1], K = s[2], L = s[3];
	float *A = in_f32(r, DIMS(I, J, K), -1, 1);
	float *B = in_f32(r, DIMS(J, K, L), -1, 1);
	float *O = out_f32(r, DIMS(I, L));
	reduction_tol(r, J * K, 1);
	for (int64_t i = 0; i < I; i++)
		for (int64_t l = 0; l < L; l++) {
			float acc = 0;
			for (int64_t j = 0; j < J; j++)
				for (int64_t k = 0; k < K; k++)
					acc += A[IX3(i, j, k, J, K)] * B[IX3(j, k, l, K, L)];
			O[IX2(i, l, L)] = acc;
		}
}

/* ---- conv2d.tc, conv_strided.tc ---- */

/* Shared by the convolutions: O(n,f,h,w) = sum over c, kh, kw of
 * I(n,c,stride*h+kh,stride*w+kw) * W1(f,c,kh,kw) (+ B(f) when B). */
static void conv2d_ref(run *r, const int64_t *s, int stride, int with_bias)
{
	int64_t N = s[0], C = s[1], H = s[2], W = s[3], F = s[4], KH = s[5], KW = s[6];
	int64_t HO = (H - KH) / stride + 1, WO = (W - KW) / stride + 1;
	float *I = in_f32(r, DIMS(N, C, H, W), -1, 1);
	float *W1 = in_f32(r, DIMS(F, C, KH, KW), -1, 1);
	float *B = with_bias ? in_f32(r, DIMS(F), -1, 1) : NULL;
	float *O = out_f32(r, DIMS(N, F, HO, WO));
	reduction_tol(r, C * KH * KW, 1);
	for (int64_t n = 0; n < N; n++)
		for (int64_t f = 0; f < F; f++)
			for (int64_t h = 0; h < HO; h++)
				for (int64_t w = 0; w < WO; w++) {
					float acc = 0;
					for (int64_t c = 0; c < C; c++)
						for (int64_t kh = 0; kh < KH; kh++)
							for (int64_t kw = 0; kw < KW; kw++)
								acc += I[IX4(n, c, stride * h + kh, stride * w + kw, C, H, W)] *
									W1[IX4(f, c, kh, kw, C, KH, KW)];
					O[IX4(n, f, h, w, F, HO, WO)] = with_bias ? acc + B[f] : acc;
				}
}

/* s = {N, C, H, W, F, KH, KW} */
static void build_conv2d(run *r, const int64_t *s)
{
	conv2d_ref(r, s, 1, 1);
}

/* s = {N, C, H, W, F, KH, KW} */
static void build_conv2d_nobias(run *r, const int64_t *s)
{
	conv2d_ref(r, s, 1, 0);
}

/* s = {N, C, H, W, F, KH, KW} */
static void build_conv2d_stride2(run *r, const int64_t *s)
{
	conv2d_ref(r, s, 2, 0);
}

/* ---- pooling.tc ---- */

/* Windows of K x K with the given stride; kind 'M' max, 'A' average. */
static void pool_ref(run *r, const int64_t *s, int K, int stride, char kind)
{
	int64_t N = s[0], C = s[1], H = s[2], W = s[3];
	int64_t HO = (H - K) / stride + 1, WO = (W - K) / stride + 1;
	float *I = in_f32(r, DIMS(N, C, H, W), -1, 1);
	float *O = out_f32(r, DIMS(N, C, HO, WO));
	if (kind == 'A')
		reduction_tol(r, K * K, 1); /* kh, kw in either order */
	for (int64_t n = 0; n < N; n++)
		for (int64_t c = 0; c < C; c++)
			for (int64_t h = 0; h < HO; h++)
				for (int64_t w = 0; w < WO; w++) {
					float acc = kind == 'M' ? -FLT_MAX : 0;
					for (int64_t kh = 0; kh < K; kh++)
						for (int64_t kw = 0; kw < K; kw++) {
							float v = I[IX4(n, c, stride * h + kh, stride * w + kw, C, H, W)];
							acc = kind == 'M' ? f_fmax(acc, v) : acc + v;
						}
					O[IX4(n, c, h, w, C, HO, WO)] = kind == 'M' ? acc : acc / 4;
				}
}

/* s = {N, C, H, W}, H and W >= 2 */
static void build_maxpool2x2(run *r, const int64_t *s)
{
	pool_ref(r, s, 2, 2, 'M');
}

/* s = {N, C, H, W}, H and W >= 2 */
static void build_avgpool2x2(run *r, const int64_t *s)
{
	pool_ref(r, s, 2, 2, 'A');
}

/* s = {N, C, H, W}, H and W >= 3 */
static void build_maxpool3x3_s1(run *r, const int64_t *s)
{
	pool_ref(r, s, 3, 1, 'M');
}

/* ---- group_conv.tc ---- */

/* s = {N, G, C, H, W, F, KH, KW} */
static void build_group_conv(run *r, const int64_t *s)
{
	int64_t N = s[0], G = s[1], C = s[2], H = s[3], W = s[4], F = s[5], KH = s[6], KW = s[7];
	int64_t HO = H - KH + 1, WO = W - KW + 1;
	float *I = in_f32(r, DIMS(N, G, C, H, W), -1, 1);
	float *W1 = in_f32(r, DIMS(G, F, C, KH, KW), -1, 1);
	float *B = in_f32(r, DIMS(G, F), -1, 1);
	float *O = out_f32(r, DIMS(N, G, F, HO, WO));
	reduction_tol(r, C * KH * KW, 1);
	for (int64_t n = 0; n < N; n++)
		for (int64_t g = 0; g < G; g++)
			for (int64_t f = 0; f < F; f++)
				for (int64_t h = 0; h < HO; h++)
					for (int64_t w = 0; w < WO; w++) {
						float acc = 0;
						for (int64_t c = 0; c < C; c++)
							for (int64_t kh = 0; kh < KH; kh++)
								for (int64_t kw = 0; kw < KW; kw++)
									acc += I[IX5(n, g, c, h + kh, w + kw, G, C, H, W)] *
										W1[IX5(g, f, c, kh, kw, F, C, KH, KW)];
						O[IX5(n, g, f, h, w, G, F, HO, WO)] = acc + B[IX2(g, f, F)];
					}
}

/* ---- softmax.tc ---- */

static void softmax_ref(run *r, const int64_t *s, int with_intermediates)
{
	int64_t N = s[0], D = s[1];
	float *I = in_f32(r, DIMS(N, D), -3, 3);
	float *O = out_f32(r, DIMS(N, D));
	float *mx = with_intermediates ? out_f32(r, DIMS(N)) : malloc(N * sizeof(float));
	float *sm = with_intermediates ? out_f32(r, DIMS(N)) : malloc(N * sizeof(float));
	for (int64_t n = 0; n < N; n++) {
		mx[n] = -FLT_MAX;
		for (int64_t d = 0; d < D; d++)
			mx[n] = f_fmax(mx[n], I[IX2(n, d, D)]);
		sm[n] = 0;
		for (int64_t d = 0; d < D; d++)
			sm[n] += f_exp(I[IX2(n, d, D)] - mx[n]);
		for (int64_t d = 0; d < D; d++)
			O[IX2(n, d, D)] = f_exp(I[IX2(n, d, D)] - mx[n]) / sm[n];
	}
	if (!with_intermediates) {
		free(mx);
		free(sm);
	}
}

/* s = {N, D} */
static void build_softmax_outputs(run *r, const int64_t *s)
{
	softmax_ref(r, s, 1);
}

/* s = {N, D} */
static void build_softmax(run *r, const int64_t *s)
{
	softmax_ref(r, s, 0);
}

/* ---- layernorm.tc, batchnorm.tc ---- */

/* s = {N, D} */
static void build_layernorm(run *r, const int64_t *s)
{
	int64_t N = s[0], D = s[1];
	float *X = in_f32(r, DIMS(N, D), -1, 1);
	float *G = in_f32(r, DIMS(D), 0.5, 1.5);
	float *Bt = in_f32(r, DIMS(D), -1, 1);
	float *Y = out_f32(r, DIMS(N, D));
	/* Y = (normalised value) + Bt can cancel; normalised values are below
	 * ~4 in magnitude, so allow a few ulps of that as absolute error. */
	out_tol(r, 1e-5, 2e-6);
	for (int64_t n = 0; n < N; n++) {
		float mean = 0, var = 0;
		for (int64_t d = 0; d < D; d++)
			mean += X[IX2(n, d, D)];
		mean = mean / (float)D;
		for (int64_t d = 0; d < D; d++) {
			float xc = X[IX2(n, d, D)] - mean;
			var += xc * xc;
		}
		var = var / (float)D;
		for (int64_t d = 0; d < D; d++) {
			float xc = X[IX2(n, d, D)] - mean;
			Y[IX2(n, d, D)] = xc * f_rsqrt(var + 0.00001f) * G[d] + Bt[d];
		}
	}
}

/* s = {N, C, H, W} */
static void build_batchnorm(run *r, const int64_t *s)
{
	int64_t N = s[0], C = s[1], H = s[2], W = s[3];
	int64_t cnt = N * H * W;
	float *X = in_f32(r, DIMS(N, C, H, W), -1, 1);
	float *gamma = in_f32(r, DIMS(C), 0.5, 1.5);
	float *beta = in_f32(r, DIMS(C), -1, 1);
	float *Y = out_f32(r, DIMS(N, C, H, W));
	/* mean and var reduce over n, h, w in an order the library picks; Y
	 * inherits their rounding differences, amplified by rsqrt(var) (about 2
	 * for uniform data) and the final + beta may cancel. */
	reduction_tol(r, cnt, 10);
	float *mean = out_f32(r, DIMS(C));
	reduction_tol(r, cnt, 1);
	float *var = out_f32(r, DIMS(C));
	reduction_tol(r, cnt, 4);
	for (int64_t c = 0; c < C; c++) {
		float acc = 0;
		for (int64_t n = 0; n < N; n++)
			for (int64_t h = 0; h < H; h++)
				for (int64_t w = 0; w < W; w++)
					acc += X[IX4(n, c, h, w, C, H, W)];
		mean[c] = acc / (float)cnt;
		acc = 0;
		for (int64_t n = 0; n < N; n++)
			for (int64_t h = 0; h < H; h++)
				for (int64_t w = 0; w < W; w++) {
					float xc = X[IX4(n, c, h, w, C, H, W)] - mean[c];
					acc += xc * xc;
				}
		var[c] = acc / (float)cnt;
		for (int64_t n = 0; n < N; n++)
			for (int64_t h = 0; h < H; h++)
				for (int64_t w = 0; w < W; w++) {
					int64_t i = IX4(n, c, h, w, C, H, W);
					Y[i] = gamma[c] * (X[i] - mean[c]) * f_rsqrt(var[c] + 0.00001f) + beta[c];
				}
	}
}

/* ---- mlp.tc ---- */

/* s = {B, M, N} */
static void build_fc_relu(run *r, const int64_t *s)
{
	int64_t B = s[0], M = s[1], N = s[2];
	float *I = in_f32(r, DIMS(B, M), -1, 1);
	float *W1 = in_f32(r, DIMS(N, M), -1, 1);
	float *Bias = in_f32(r, DIMS(N), -1, 1);
	float *O = out_f32(r, DIMS(B, N));
	/* The bias addition can cancel the sum: a few ulps of its magnitude. */
	out_tol(r, 1e-5, 1e-6 * (double)M);
	for (int64_t b = 0; b < B; b++)
		for (int64_t n = 0; n < N; n++) {
			float acc = 0;
			for (int64_t m = 0; m < M; m++)
				acc += I[IX2(b, m, M)] * W1[IX2(n, m, M)];
			acc = acc + Bias[n];
			O[IX2(b, n, N)] = f_fmax(acc, 0);
		}
}

/* s = {B, M, N, P} */
static void build_mlp2(run *r, const int64_t *s)
{
	int64_t B = s[0], M = s[1], N = s[2], P = s[3];
	float *I = in_f32(r, DIMS(B, M), -1, 1);
	float *W1 = in_f32(r, DIMS(N, M), -1, 1);
	float *B1 = in_f32(r, DIMS(N), -1, 1);
	float *W2 = in_f32(r, DIMS(P, N), -1, 1);
	float *B2 = in_f32(r, DIMS(P), -1, 1);
	float *O = out_f32(r, DIMS(B, P));
	out_tol(r, 1e-5, 1e-6 * (double)(M * N)); /* as for fc_relu, two layers deep */
	float *H1 = malloc((size_t)(B * N) * sizeof(float));
	for (int64_t b = 0; b < B; b++)
		for (int64_t n = 0; n < N; n++) {
			float acc = 0;
			for (int64_t m = 0; m < M; m++)
				acc += I[IX2(b, m, M)] * W1[IX2(n, m, M)];
			H1[IX2(b, n, N)] = f_fmax(acc + B1[n], 0);
		}
	for (int64_t b = 0; b < B; b++)
		for (int64_t p = 0; p < P; p++) {
			float acc = 0;
			for (int64_t n = 0; n < N; n++)
				acc += H1[IX2(b, n, N)] * W2[IX2(p, n, N)];
			O[IX2(b, p, P)] = f_fmax(acc + B2[p], 0);
		}
	free(H1);
}

/* ---- kronecker.tc ---- */

static void kronecker_ref(run *r, const int64_t *s, int with_partials)
{
	int64_t M = s[0], N0 = s[1], N1 = s[2], N2 = s[3], D0 = s[4], D1 = s[5], D2 = s[6];
	float *W0 = in_f32(r, DIMS(D0, N0), -1, 1);
	float *W1 = in_f32(r, DIMS(D1, N1), -1, 1);
	float *W2 = in_f32(r, DIMS(D2, N2), -1, 1);
	float *X = in_f32(r, DIMS(M, N0, N1, N2), -1, 1);
	float *Y = out_f32(r, DIMS(M, D0, D1, D2));
	/* Three chained contractions: later ones amplify the ulp differences
	 * an earlier one may have (it cannot when single-index sums run in
	 * order, but the chain is allowed a little slack). */
	out_tol(r, 1e-5, 1e-6 * (double)(N0 * N1 * N2));
	size_t n0 = (size_t)(M * N1 * N2 * D0), n1 = (size_t)(M * N2 * D0 * D1);
	float *XW0 = with_partials ? out_f32(r, DIMS(M, N1, N2, D0)) : malloc(n0 * sizeof(float));
	float *XW1 = with_partials ? out_f32(r, DIMS(M, N2, D0, D1)) : malloc(n1 * sizeof(float));
	for (int64_t m = 0; m < M; m++)
		for (int64_t a = 0; a < N1; a++)
			for (int64_t b = 0; b < N2; b++)
				for (int64_t d0 = 0; d0 < D0; d0++) {
					float acc = 0;
					for (int64_t k = 0; k < N0; k++)
						acc += X[IX4(m, k, a, b, N0, N1, N2)] * W0[IX2(d0, k, N0)];
					XW0[IX4(m, a, b, d0, N1, N2, D0)] = acc;
				}
	for (int64_t m = 0; m < M; m++)
		for (int64_t b = 0; b < N2; b++)
			for (int64_t d0 = 0; d0 < D0; d0++)
				for (int64_t d1 = 0; d1 < D1; d1++) {
					float acc = 0;
					for (int64_t k = 0; k < N1; k++)
						acc += XW0[IX4(m, k, b, d0, N1, N2, D0)] * W1[IX2(d1, k, N1)];
					XW1[IX4(m, b, d0, d1, N2, D0, D1)] = acc;
				}
	for (int64_t m = 0; m < M; m++)
		for (int64_t d0 = 0; d0 < D0; d0++)
			for (int64_t d1 = 0; d1 < D1; d1++)
				for (int64_t d2 = 0; d2 < D2; d2++) {
					float acc = 0;
					for (int64_t k = 0; k < N2; k++)
						acc += XW1[IX4(m, k, d0, d1, N2, D0, D1)] * W2[IX2(d2, k, N2)];
					Y[IX4(m, d0, d1, d2, D0, D1, D2)] = acc;
				}
	if (!with_partials) {
		free(XW0);
		free(XW1);
	}
}

/* s = {M, N0, N1, N2, D0, D1, D2} */
static void build_kronecker3(run *r, const int64_t *s)
{
	kronecker_ref(r, s, 0);
}

/* s = {M, N0, N1, N2, D0, D1, D2} */
static void build_kronecker3_outputs(run *r, const int64_t *s)
{
	kronecker_ref(r, s, 1);
}

/* ---- embedding.tc ---- */

/* s = {V, D, B, L}; index_elt is TU_I32 or TU_I64. */
static void lookup_sum_ref(run *r, const int64_t *s, tu_elt index_elt)
{
	int64_t V = s[0], D = s[1], B = s[2], L = s[3];
	float *LUT = in_f32(r, DIMS(V, D), -1, 1);
	int32_t *I32 = index_elt == TU_I32 ? in_i32(r, DIMS(B, L), 0, V - 1) : NULL;
	int64_t *I64 = index_elt == TU_I64 ? in_i64(r, DIMS(B, L), 0, V - 1) : NULL;
	float *O = out_f32(r, DIMS(B, D));
	reduction_tol(r, L, 1); /* a GPU block may sum the L rows in another order */
	for (int64_t i = 0; i < B; i++)
		for (int64_t j = 0; j < D; j++) {
			float acc = 0;
			for (int64_t k = 0; k < L; k++) {
				int64_t row = I32 ? I32[IX2(i, k, L)] : I64[IX2(i, k, L)];
				acc += LUT[IX2(row, j, D)];
			}
			O[IX2(i, j, D)] = acc;
		}
}

/* s = {V, D, B, L} */
static void build_lookup_sum_i32(run *r, const int64_t *s)
{
	lookup_sum_ref(r, s, TU_I32);
}

/* s = {V, D, B, L} */
static void build_lookup_sum_i64(run *r, const int64_t *s)
{
	lookup_sum_ref(r, s, TU_I64);
}

/* s = {V, D, B} */
static void build_gather_rows(run *r, const int64_t *s)
{
	int64_t V = s[0], D = s[1], B = s[2];
	float *LUT = in_f32(r, DIMS(V, D), -1, 1);
	int32_t *I = in_i32(r, DIMS(B), 0, V - 1);
	float *O = out_f32(r, DIMS(B, D));
	for (int64_t i = 0; i < B; i++)
		for (int64_t j = 0; j < D; j++)
			O[IX2(i, j, D)] = LUT[IX2(I[i], j, D)];
}

/* s = {V, D, B}, V <= 256 */
static void build_gather_rows_u8(run *r, const int64_t *s)
{
	int64_t V = s[0], D = s[1], B = s[2];
	float *LUT = in_f32(r, DIMS(V, D), -1, 1);
	uint8_t *I = in_u8(r, DIMS(B), 0, V - 1);
	float *O = out_f32(r, DIMS(B, D));
	for (int64_t i = 0; i < B; i++)
		for (int64_t j = 0; j < D; j++)
			O[IX2(i, j, D)] = LUT[IX2(I[i], j, D)];
}

/* s = {R, C, B} */
static void build_gather2d(run *r, const int64_t *s)
{
	int64_t R = s[0], C = s[1], B = s[2];
	float *A = in_f32(r, DIMS(R, C), -1, 1);
	int32_t *I = in_i32(r, DIMS(B), 0, R - 1);
	int64_t *J = in_i64(r, DIMS(B), 0, C - 1);
	float *O = out_f32(r, DIMS(B));
	for (int64_t i = 0; i < B; i++)
		O[i] = A[IX2(I[i], J[i], C)];
}

/* ---- scatter.tc ---- */

/* s = {V, D, B}; index_elt is TU_I32 or TU_I64.  Up to 100 rows, indices
 * drawn from the first 5 at most, so that rows are named several times and
 * some never (they stay 0); beyond, from every row. */
static void embedding_bwd_ref(run *r, const int64_t *s, tu_elt index_elt)
{
	int64_t V = s[0], D = s[1], B = s[2], hi = V > 100 ? V - 1 : V - 1 < 4 ? V - 1 : 4;
	in_f32(r, DIMS(V, D), -1, 1); /* LUT: its shape only */
	int32_t *I32 = index_elt == TU_I32 ? in_i32(r, DIMS(B), 0, hi) : NULL;
	int64_t *I64 = index_elt == TU_I64 ? in_i64(r, DIMS(B), 0, hi) : NULL;
	float *dO = in_f32(r, DIMS(B, D), -1, 1);
	float *dL = out_f32(r, DIMS(V, D));
	reduction_tol(r, B, 1);
	for (int64_t k = 0; k < V * D; k++)
		dL[k] = 0;
	for (int64_t i = 0; i < B; i++) {
		int64_t row = I32 ? I32[i] : I64[i];
		for (int64_t j = 0; j < D; j++)
			dL[IX2(row, j, D)] += dO[IX2(i, j, D)];
	}
}

/* s = {V, D, B} */
static void build_embedding_bwd_i64(run *r, const int64_t *s)
{
	embedding_bwd_ref(r, s, TU_I64);
}

/* s = {V, D, B} */
static void build_embedding_bwd_i32(run *r, const int64_t *s)
{
	embedding_bwd_ref(r, s, TU_I32);
}

/* s = {V, N} */
static void build_histogram(run *r, const int64_t *s)
{
	int64_t V = s[0], N = s[1];
	in_f32(r, DIMS(V), -1, 1);
	int32_t *I = in_i32(r, DIMS(N), 0, V - 1);
	float *H = out_f32(r, DIMS(V));
	for (int64_t v = 0; v < V; v++)
		H[v] = 0;
	for (int64_t i = 0; i < N; i++)
		H[I[i]] += 1;
}

/* s = {R, C, N} */
static void build_scatter_prod(run *r, const int64_t *s)
{
	int64_t R = s[0], C = s[1], N = s[2];
	in_f32(r, DIMS(R, C), -1, 1);
	int64_t *J = in_i64(r, DIMS(N), 0, C - 1);
	float *G = in_f32(r, DIMS(N), -1, 1);
	float *X = in_f32(r, DIMS(R, N), -1, 1);
	float *O = out_f32(r, DIMS(R, C));
	reduction_tol(r, N, 1);
	for (int64_t k = 0; k < R * C; k++)
		O[k] = 0;
	for (int64_t rr = 0; rr < R; rr++)
		for (int64_t n = 0; n < N; n++)
			O[IX2(rr, J[n], C)] += G[n] * X[IX2(rr, n, N)];
}

/* s = {R, C, N} */
static void build_scatter2d(run *r, const int64_t *s)
{
	int64_t R = s[0], C = s[1], N = s[2];
	in_f32(r, DIMS(R, C), -1, 1);
	int32_t *I = in_i32(r, DIMS(N), 0, R - 1);
	int64_t *J = in_i64(r, DIMS(N), 0, C - 1);
	float *X = in_f32(r, DIMS(N), -1, 1);
	float *O = out_f32(r, DIMS(R, C));
	reduction_tol(r, N, 1);
	for (int64_t k = 0; k < R * C; k++)
		O[k] = 0;
	for (int64_t n = 0; n < N; n++)
		O[IX2(I[n], J[n], C)] += X[n];
}

/* s = {V, N} */
static void build_segment_max(run *r, const int64_t *s)
{
	int64_t V = s[0], N = s[1];
	in_f32(r, DIMS(V), -1, 1);
	int32_t *I = in_i32(r, DIMS(N), 0, V - 1);
	float *X = in_f32(r, DIMS(N), -1, 1);
	float *M = out_f32(r, DIMS(V));
	for (int64_t v = 0; v < V; v++)
		M[v] = -FLT_MAX;
	for (int64_t i = 0; i < N; i++)
		M[I[i]] = X[i] > M[I[i]] ? X[i] : M[I[i]];
}

/* s = {V, D, B} */
static void build_scatter_accumulate(run *r, const int64_t *s)
{
	int64_t V = s[0], D = s[1], B = s[2];
	float *Base = in_f32(r, DIMS(V, D), -1, 1);
	int32_t *I = in_i32(r, DIMS(B), 0, V - 1);
	float *X = in_f32(r, DIMS(B, D), -1, 1);
	float *O = out_f32(r, DIMS(V));
	float *S = malloc((size_t)(V * D) * sizeof(float));
	assert_non_null(S);
	reduction_tol(r, D * (B + 1), 2);
	memcpy(S, Base, (size_t)(V * D) * sizeof(float));
	for (int64_t i = 0; i < B; i++)
		for (int64_t j = 0; j < D; j++)
			S[IX2(I[i], j, D)] += X[IX2(i, j, D)];
	for (int64_t v = 0; v < V; v++) {
		float acc = 0;
		for (int64_t j = 0; j < D; j++)
			acc += S[IX2(v, j, D)];
		O[v] = acc;
	}
	free(S);
}

/* s = {N, M}: X's elements M >= (N + 1) / 2; O(2 i) = X(i) for i < (N + 1) / 2 */
static void build_scatter_strided(run *r, const int64_t *s)
{
	int64_t N = s[0], M = s[1];
	in_f32(r, DIMS(N), -1, 1);
	float *X = in_f32(r, DIMS(M), -1, 1);
	float *O = out_f32(r, DIMS(N));
	for (int64_t k = 0; k < N; k++)
		O[k] = 0;
	for (int64_t i = 0; i < (N + 1) / 2; i++)
		O[2 * i] += X[i];
}

/* s = {N, M} */
static void build_scatter_folded(run *r, const int64_t *s)
{
	int64_t N = s[0], M = s[1];
	in_f32(r, DIMS(N), -1, 1);
	float *X = in_f32(r, DIMS(M), -1, 1);
	float *O = out_f32(r, DIMS(N));
	reduction_tol(r, M / N + 1, 1);
	for (int64_t k = 0; k < N; k++)
		O[k] = 0;
	for (int64_t i = 0; i < M; i++)
		O[i % N] += X[i] * X[i];
}

/* ---- concat.tc (and concat_exists in let_exists.tc) ---- */

/* s = {N, M, D} */
static void build_concat_rows(run *r, const int64_t *s)
{
	int64_t N = s[0], M = s[1], D = s[2];
	float *A = in_f32(r, DIMS(N, D), -1, 1);
	float *B = in_f32(r, DIMS(M, D), -1, 1);
	float *O = out_f32(r, DIMS(N + M, D));
	for (int64_t i = 0; i < N + M; i++)
		for (int64_t d = 0; d < D; d++)
			O[IX2(i, d, D)] = i < N ? A[IX2(i, d, D)] : B[IX2(i - N, d, D)];
}

/* s = {N, D1, D2} */
static void build_concat_cols(run *r, const int64_t *s)
{
	int64_t N = s[0], D1 = s[1], D2 = s[2];
	float *A = in_f32(r, DIMS(N, D1), -1, 1);
	float *B = in_f32(r, DIMS(N, D2), -1, 1);
	float *O = out_f32(r, DIMS(N, D1 + D2));
	for (int64_t n = 0; n < N; n++)
		for (int64_t j = 0; j < D1 + D2; j++)
			O[IX2(n, j, D1 + D2)] = j < D1 ? A[IX2(n, j, D1)] : B[IX2(n, j - D1, D2)];
}

/* ---- pad.tc: pad(e, v), reads that give v outside the tensor ---- */

/* A row-major NCHW element or 0 (pad) outside: the independent reference
 * of the padded convolutions. */
static float at4_or(const float *X, int64_t n, int64_t c, int64_t h, int64_t w, int64_t C,
	int64_t H, int64_t W, float v)
{
	return h < 0 || h >= H || w < 0 || w >= W ? v : X[IX4(n, c, h, w, C, H, W)];
}

/* s = {N, C, H, W, F}; stride 1 or 2, padding 1, 3x3 */
static void conv_pad1(run *r, const int64_t *s, int stride)
{
	int64_t N = s[0], C = s[1], H = s[2], W = s[3], F = s[4];
	int64_t HO = (H + stride - 1) / stride, WO = (W + stride - 1) / stride;
	float *I = in_f32(r, DIMS(N, C, H, W), -1, 1);
	float *Wt = in_f32(r, DIMS(F, C, 3, 3), -1, 1);
	float *O = out_f32(r, DIMS(N, F, HO, WO));
	reduction_tol(r, C * 9, 1);
	for (int64_t n = 0; n < N; n++)
		for (int64_t f = 0; f < F; f++)
			for (int64_t h = 0; h < HO; h++)
				for (int64_t w = 0; w < WO; w++) {
					float acc = 0;
					for (int64_t c = 0; c < C; c++)
						for (int64_t kh = 0; kh < 3; kh++)
							for (int64_t kw = 0; kw < 3; kw++)
								acc += at4_or(I, n, c, stride * h + kh - 1,
									stride * w + kw - 1, C, H, W, 0) *
									Wt[IX4(f, c, kh, kw, C, 3, 3)];
					O[IX4(n, f, h, w, F, HO, WO)] = acc;
				}
}

static void build_conv_same(run *r, const int64_t *s)
{
	conv_pad1(r, s, 1);
}

static void build_conv_s2_same(run *r, const int64_t *s)
{
	conv_pad1(r, s, 2);
}

/* s = {N, F, HO, WO, C} */
static void build_conv_input_grad(run *r, const int64_t *s)
{
	int64_t N = s[0], F = s[1], HO = s[2], WO = s[3], C = s[4];
	int64_t H = HO + 2, W = WO + 2;
	float *dO = in_f32(r, DIMS(N, F, HO, WO), -1, 1);
	float *Wt = in_f32(r, DIMS(F, C, 3, 3), -1, 1);
	float *dI = out_f32(r, DIMS(N, C, H, W));
	reduction_tol(r, F * 9, 1);
	for (int64_t n = 0; n < N; n++)
		for (int64_t c = 0; c < C; c++)
			for (int64_t x = 0; x < H; x++)
				for (int64_t y = 0; y < W; y++) {
					float acc = 0;
					for (int64_t f = 0; f < F; f++)
						for (int64_t kh = 0; kh < 3; kh++)
							for (int64_t kw = 0; kw < 3; kw++)
								acc += at4_or(dO, n, f, x - kh, y - kw, F, HO, WO, 0) *
									Wt[IX4(f, c, kh, kw, C, 3, 3)];
					dI[IX4(n, c, x, y, C, H, W)] = acc;
				}
}

/* s = {N} */
static void build_pad_shift_right(run *r, const int64_t *s)
{
	int64_t N = s[0];
	float *A = in_f32(r, DIMS(N), -1, 1);
	float *O = out_f32(r, DIMS(N + 1));
	for (int64_t i = 0; i < N + 1; i++)
		O[i] = i >= 1 ? A[i - 1] : 0.0f;
}

static void build_shift_left(run *r, const int64_t *s)
{
	int64_t N = s[0];
	float *A = in_f32(r, DIMS(N), -1, 1);
	float *O = out_f32(r, DIMS(N));
	for (int64_t i = 0; i < N; i++)
		O[i] = i + 1 < N ? A[i + 1] : -1.0f;
}

/* s = {N, C, H, W} */
static void build_maxpool_same(run *r, const int64_t *s)
{
	int64_t N = s[0], C = s[1], H = s[2], W = s[3];
	int64_t HO = (H + 1) / 2, WO = (W + 1) / 2;
	float *X = in_f32(r, DIMS(N, C, H, W), -1, 1);
	float *O = out_f32(r, DIMS(N, C, HO, WO));
	for (int64_t n = 0; n < N; n++)
		for (int64_t c = 0; c < C; c++)
			for (int64_t h = 0; h < HO; h++)
				for (int64_t w = 0; w < WO; w++) {
					float m = -INFINITY;
					for (int64_t kh = 0; kh < 3; kh++)
						for (int64_t kw = 0; kw < 3; kw++)
							m = fmaxf(m, at4_or(X, n, c, 2 * h + kh - 1,
								2 * w + kw - 1, C, H, W, -3.4e38f));
					O[IX4(n, c, h, w, C, HO, WO)] = m;
				}
}

/* s = {N, K} */
static void build_conv1d_f16(run *r, const int64_t *s)
{
	int64_t N = s[0], K = s[1];
	uint16_t *A = in_f16(r, DIMS(N), -1, 1);
	uint16_t *Kw = in_f16(r, DIMS(K), -1, 1);
	uint16_t *O = out_f16(r, DIMS(N));
	for (int64_t i = 0; i < N; i++) {
		float acc = 0; /* float16 products, rounded; summed in float32 */
		for (int64_t k = 0; k < K; k++)
			if (i + k - 1 >= 0 && i + k - 1 < N)
				acc += (float)tu_half_to_double(tu_half_from_double(
					tu_half_to_double(A[i + k - 1]) * tu_half_to_double(Kw[k])));
		O[i] = tu_half_from_double(acc);
	}
}

/* s = {N, K} */
static void build_conv1d_i32(run *r, const int64_t *s)
{
	int64_t N = s[0], K = s[1];
	int32_t *A = in_i32(r, DIMS(N), -1000, 1000);
	int32_t *Kw = in_i32(r, DIMS(K), -9, 9);
	int32_t *O = out_i32(r, DIMS(N));
	for (int64_t i = 0; i < N; i++) {
		int32_t acc = 0;
		for (int64_t k = 0; k < K; k++)
			acc += i + k - 2 >= 0 && i + k - 2 < N ? A[i + k - 2] * Kw[k] : 0;
		O[i] = acc;
	}
}

static void build_shift_i8(run *r, const int64_t *s)
{
	int64_t N = s[0];
	int8_t *A = in_i8(r, DIMS(N), -128, 127);
	int8_t *O = out_i8(r, DIMS(N + 2));
	for (int64_t i = 0; i < N + 2; i++)
		O[i] = i >= 2 ? A[i - 2] : 7;
}

/* s = {N, M}: indices from -2 to N + 1, so both sides go out */
static void build_gather_pad(run *r, const int64_t *s)
{
	int64_t N = s[0], M = s[1];
	float *A = in_f32(r, DIMS(N), -1, 1);
	int32_t *Idx = in_i32(r, DIMS(M), -2, N + 1);
	float *O = out_f32(r, DIMS(M));
	for (int64_t i = 0; i < M; i++)
		O[i] = Idx[i] >= 0 && Idx[i] < N ? A[Idx[i]] : -2.0f;
}

/* s = {N, M, K} */
static void build_gather_sum(run *r, const int64_t *s)
{
	int64_t N = s[0], M = s[1], K = s[2];
	float *A = in_f32(r, DIMS(N), -1, 1);
	int32_t *Idx = in_i32(r, DIMS(M, K), -2, N + 1);
	float *Wg = in_f32(r, DIMS(K), -1, 1);
	float *O = out_f32(r, DIMS(M));
	reduction_tol(r, K, 1);
	for (int64_t i = 0; i < M; i++) {
		float acc = 0;
		for (int64_t j = 0; j < K; j++) {
			int32_t x = Idx[IX2(i, j, K)];
			acc += (x >= 0 && x < N ? A[x] : 0.0f) * Wg[j];
		}
		O[i] = acc;
	}
}

/* s = {N} */
static void build_nested(run *r, const int64_t *s)
{
	int64_t N = s[0];
	float *A = in_f32(r, DIMS(N), -1, 1);
	float *B = in_f32(r, DIMS(N), -1, 1);
	float *O = out_f32(r, DIMS(N + 1));
	for (int64_t i = 0; i < N + 1; i++)
		O[i] = i >= 1 && i - 1 < N ? A[i - 1] + (i + 1 < N ? B[i + 1] : 0.5f) : -2.0f;
}

/* s = {N, K} */
static void build_let_factor(run *r, const int64_t *s)
{
	int64_t N = s[0], K = s[1];
	float *A = in_f32(r, DIMS(N), -1, 1);
	float *Kw = in_f32(r, DIMS(K), -1, 1);
	float *O = out_f32(r, DIMS(N));
	reduction_tol(r, K, 1);
	for (int64_t i = 0; i < N; i++) {
		float acc = 0;
		for (int64_t k = 0; k < K; k++)
			acc += (i + k - 1 >= 0 && i + k - 1 < N ? A[i + k - 1] : 0.0f) * Kw[k];
		O[i] = acc;
	}
}

/* s = {N} */
static void build_two_pads(run *r, const int64_t *s)
{
	int64_t N = s[0];
	float *A = in_f32(r, DIMS(N), -1, 1);
	float *B = in_f32(r, DIMS(N), -1, 1);
	float *O = out_f32(r, DIMS(N));
	for (int64_t i = 0; i < N; i++)
		O[i] = i >= 1 && i + 1 < N ? A[i - 1] * B[i + 1] : 0.0f;
}

/* ---- guarded.tc: TC programs whose reads under ?: bound indices ---- */

/* s = {M, N} */
static void build_concat_tc(run *r, const int64_t *s)
{
	int64_t M = s[0], N = s[1];
	float *A = in_f32(r, DIMS(M, N), -1, 1);
	float *B = in_f32(r, DIMS(M, N), -1, 1);
	float *O = out_f32(r, DIMS(N, 2, M));
	for (int64_t n = 0; n < N; n++)
		for (int64_t m = 0; m < M; m++) {
			O[IX3(n, 0, m, 2, M)] = A[IX2(m, n, N)];
			O[IX3(n, 1, m, 2, M)] = B[IX2(m, n, N)];
		}
}

/* s = {B, C, H, W, F, K} */
static void build_masked_convolve(run *r, const int64_t *s)
{
	int64_t B = s[0], C = s[1], H = s[2], W = s[3], F = s[4], K = s[5];
	int64_t HO = H - K + 1, WO = W - K + 1;
	float *I = in_f32(r, DIMS(B, C, H, W), -1, 1);
	float *Wt = in_f32(r, DIMS(F, C, K, K), -1, 1);
	uint8_t *Mask = in_u8(r, DIMS(F, C), 0, 2);
	float *O = out_f32(r, DIMS(B, F, HO, WO));
	reduction_tol(r, C * K * K, 1);
	for (int64_t b = 0; b < B; b++)
		for (int64_t f = 0; f < F; f++)
			for (int64_t h = 0; h < HO; h++)
				for (int64_t w = 0; w < WO; w++) {
					float acc = 0;
					for (int64_t c = 0; c < C; c++)
						for (int64_t k1 = 0; k1 < K; k1++)
							for (int64_t k2 = 0; k2 < K; k2++)
								acc += Mask[IX2(f, c, C)] == 1
									? f_fmax(0.0f, I[IX4(b, c, h + k1, w + k2, C, H, W)]) *
										Wt[IX4(f, c, k1, k2, C, K, K)]
									: 0.0f;
					O[IX4(b, f, h, w, F, HO, WO)] = acc;
				}
}

/* s = {M, K} */
static void build_tri_matmul(run *r, const int64_t *s)
{
	int64_t M = s[0], K = s[1];
	float *L = in_f32(r, DIMS(M, K), -1, 1);
	float *U = in_f32(r, DIMS(K, M), -1, 1);
	float *LU = out_f32(r, DIMS(M, M));
	reduction_tol(r, K, 1);
	for (int64_t m1 = 0; m1 < M; m1++)
		for (int64_t m2 = 0; m2 < M; m2++) {
			float acc = 0;
			for (int64_t k = 0; k < K; k++)
				acc += k >= m1 && k <= m2 ? L[IX2(m1, k, K)] * U[IX2(k, m2, M)] : 0.0f;
			LU[IX2(m1, m2, M)] = acc;
		}
}

/* s = {M, K} */
static void build_checker_sum(run *r, const int64_t *s)
{
	int64_t M = s[0], K = s[1];
	float *A = in_f32(r, DIMS(M, K), -1, 1);
	float *O = out_f32(r, DIMS(M));
	reduction_tol(r, K, 1);
	for (int64_t m = 0; m < M; m++) {
		float acc = 0;
		for (int64_t k = 0; k < K; k++)
			if (k % 2 != m % 2)
				acc += A[IX2(m, k, K)];
		O[m] = acc;
	}
}

/* s = {K} */
static void build_make_idx(run *r, const int64_t *s)
{
	int64_t K = s[0];
	int32_t *Seg = in_i32(r, DIMS(K), 0, 9);
	int32_t *Idx = out_i32(r, DIMS(K + 1));
	for (int64_t k = 0; k < K + 1; k++) {
		int32_t acc = 0;
		for (int64_t j = 0; j < k; j++)
			acc += Seg[j];
		Idx[k] = acc;
	}
}

/* s = {N, C, K, MAX_L}: K segments of at most MAX_L + 1 rows of N, their
 * starts in Idx (non-decreasing, at most N). */
static void build_dots(run *r, const int64_t *s)
{
	int64_t N = s[0], C = s[1], K = s[2], L = s[3];
	float *ND = in_f32(r, DIMS(N, C), -1, 1);
	int32_t *Idx = in_i32(r, DIMS(K + 1), 0, 0);
	float *Beta = in_f32(r, DIMS(K, L, L), -1, 1);
	float *D = out_f32(r, DIMS(K, L, L));
	(void)Beta;
	reduction_tol(r, C, 1);
	Idx[0] = (int32_t)tu_rand_int(&r->rng, 0, N);
	for (int64_t k = 1; k <= K; k++) {
		int64_t next = Idx[k - 1] + tu_rand_int(&r->rng, 0, L + 1);
		Idx[k] = (int32_t)(next < N ? next : N);
	}
	for (int64_t k = 0; k < K; k++)
		for (int64_t l1 = 0; l1 < L; l1++)
			for (int64_t l2 = 0; l2 < L; l2++) {
				float acc = 0;
				for (int64_t c = 0; c < C; c++)
					acc += l1 >= l2 ? 0.0f :
						Idx[k] + l1 >= Idx[k + 1] || Idx[k] + l2 >= Idx[k + 1] ? 0.0f :
						ND[IX2(Idx[k] + l1, c, C)] * ND[IX2(Idx[k] + l2, c, C)];
				D[IX3(k, l1, l2, L, L)] = acc;
			}
}

/* s = {K, MAX_L} */
static void build_result(run *r, const int64_t *s)
{
	int64_t K = s[0], L = s[1];
	float *Beta = in_f32(r, DIMS(K, L, L), -1, 1);
	float *Dots = in_f32(r, DIMS(K, L, L), -1, 1);
	float *O = out_f32(r, DIMS(K));
	reduction_tol(r, L * L, 1);
	float *tmpO = out_f32(r, DIMS(K, L));
	reduction_tol(r, L, 1);
	for (int64_t k = 0; k < K; k++) {
		float sum = 0;
		for (int64_t l1 = 0; l1 < L; l1++) {
			float acc = 0;
			for (int64_t l2 = 0; l2 < L; l2++)
				acc += l1 >= l2 ? 0.0f : Dots[IX3(k, l1, l2, L, L)] * Beta[IX3(k, l1, l2, L, L)];
			tmpO[IX2(k, l1, L)] = acc;
			sum += acc;
		}
		O[k] = sum;
	}
}

/* ---- argmin.tc ---- */

/* s = {N, M} */
static void build_argmin(run *r, const int64_t *s)
{
	int64_t N = s[0], M = s[1];
	float *A = in_f32(r, DIMS(N, M), -1, 1);
	float *mn = out_f32(r, DIMS(N));
	int32_t *idx = out_i32(r, DIMS(N));
	for (int64_t i = 0; i < N; i++) {
		mn[i] = FLT_MAX; /* the identity of min=! on float32 */
		for (int64_t j = 0; j < M; j++)
			mn[i] = f_fmin(mn[i], A[IX2(i, j, M)]);
		idx[i] = (int32_t)M;
		for (int64_t j = 0; j < M; j++)
			if (A[IX2(i, j, M)] == mn[i] && j < idx[i])
				idx[i] = (int32_t)j;
	}
}

/* s = {N, M} */
static void build_argmax_int(run *r, const int64_t *s)
{
	int64_t N = s[0], M = s[1];
	int32_t *A = in_i32(r, DIMS(N, M), -3, 3);
	int32_t *mx = out_i32(r, DIMS(N));
	int32_t *idx = out_i32(r, DIMS(N));
	for (int64_t i = 0; i < N; i++) {
		mx[i] = INT32_MIN;
		for (int64_t j = 0; j < M; j++)
			if (A[IX2(i, j, M)] > mx[i])
				mx[i] = A[IX2(i, j, M)];
		idx[i] = (int32_t)M;
		for (int64_t j = 0; j < M; j++)
			if (A[IX2(i, j, M)] == mx[i] && j < idx[i])
				idx[i] = (int32_t)j;
	}
}

/* s = {N, M} */
static void build_minmax_int8(run *r, const int64_t *s)
{
	int64_t N = s[0], M = s[1];
	int8_t *A = in_i8(r, DIMS(N, M), -128, 127);
	int8_t *lo = out_i8(r, DIMS(N));
	int8_t *hi = out_i8(r, DIMS(N));
	for (int64_t i = 0; i < N; i++) {
		lo[i] = INT8_MAX;
		hi[i] = INT8_MIN;
		for (int64_t j = 0; j < M; j++) {
			int8_t v = A[IX2(i, j, M)];
			lo[i] = v < lo[i] ? v : lo[i];
			hi[i] = v > hi[i] ? v : hi[i];
		}
	}
}

/* ---- let_exists.tc ---- */

/* s = {N} */
static void build_let_poly(run *r, const int64_t *s)
{
	int64_t N = s[0];
	float *A = in_f32(r, DIMS(N), -1, 1);
	float *O = out_f32(r, DIMS(N));
	out_tol(r, 1e-5, 1e-6); /* x*x + x cancels near x = -1 */
	for (int64_t i = 0; i < N; i++) {
		float x = A[i] * 2;
		O[i] = x * x + x;
	}
}

/* s = {N, M} */
static void build_let_sumsq(run *r, const int64_t *s)
{
	int64_t N = s[0], M = s[1];
	float *A = in_f32(r, DIMS(N, M), -1, 1);
	float *O = out_f32(r, DIMS(N));
	reduction_tol(r, M, 4);
	for (int64_t i = 0; i < N; i++) {
		float acc = 0;
		for (int64_t j = 0; j < M; j++) {
			float t = A[IX2(i, j, M)] - 1;
			acc += t * t;
		}
		O[i] = acc;
	}
}

/* s = {N} */
static void build_let_chain(run *r, const int64_t *s)
{
	int64_t N = s[0];
	float *A = in_f32(r, DIMS(N), -1, 1);
	float *B = in_f32(r, DIMS(N), -1, 1);
	float *O = out_f32(r, DIMS(N));
	for (int64_t i = 0; i < N; i++) {
		float u = A[i] + B[i];
		float v = u - 1;
		O[i] = u * v;
	}
}

/* s = {N} */
static void build_shift_right(run *r, const int64_t *s)
{
	int64_t N = s[0];
	float *A = in_f32(r, DIMS(N), -1, 1);
	float *O = out_f32(r, DIMS(N));
	for (int64_t i = 0; i < N; i++)
		O[i] = i > 0 ? A[i - 1] : 0;
}

/* ---- casts.tc ---- */

/* s = {N} */
static void build_i8_times3(run *r, const int64_t *s)
{
	int64_t N = s[0];
	int8_t *A = in_i8(r, DIMS(N), -128, 127);
	int8_t *O = out_i8(r, DIMS(N));
	for (int64_t i = 0; i < N; i++)
		O[i] = (int8_t)(uint8_t)(A[i] * 3); /* wraps modulo 2^8 */
}

/* s = {N} */
static void build_u8_add(run *r, const int64_t *s)
{
	int64_t N = s[0];
	uint8_t *A = in_u8(r, DIMS(N), 0, 255);
	uint8_t *B = in_u8(r, DIMS(N), 0, 255);
	uint8_t *O = out_u8(r, DIMS(N));
	for (int64_t i = 0; i < N; i++)
		O[i] = (uint8_t)(A[i] + B[i]);
}

/* s = {N} */
static void build_mixed_ints(run *r, const int64_t *s)
{
	int64_t N = s[0];
	int8_t *A = in_i8(r, DIMS(N), -100, 100);
	int32_t *B = in_i32(r, DIMS(N), -1000, 1000);
	int64_t *C = in_i64(r, DIMS(N), -3000000000LL, 3000000000LL); /* beyond int32 */
	int32_t *O1 = out_i32(r, DIMS(N));
	int64_t *O2 = out_i64(r, DIMS(N));
	for (int64_t i = 0; i < N; i++) {
		O1[i] = A[i] + B[i];
		O2[i] = C[i] * B[i] + 1;
	}
}

/* s = {N} */
static void build_u8_plus_i8(run *r, const int64_t *s)
{
	int64_t N = s[0];
	uint8_t *A = in_u8(r, DIMS(N), 0, 255);
	int8_t *B = in_i8(r, DIMS(N), -128, 127);
	int8_t *O = out_i8(r, DIMS(N));
	for (int64_t i = 0; i < N; i++)
		O[i] = (int8_t)(uint8_t)(A[i] + B[i]); /* int8 arithmetic wraps */
}

/* s = {N} */
static void build_int_divmod(run *r, const int64_t *s)
{
	int64_t N = s[0];
	int32_t *A = in_i32(r, DIMS(N), -20, 20);
	int32_t *B = in_i32(r, DIMS(N), 1, 5);
	for (int64_t i = 0; i < N; i++) /* divisors of both signs, never 0 */
		if (tu_rand_int(&r->rng, 0, 1))
			B[i] = -B[i];
	int32_t *Q = out_i32(r, DIMS(N));
	int32_t *R = out_i32(r, DIMS(N));
	for (int64_t i = 0; i < N; i++) {
		Q[i] = floordiv(A[i], B[i]);
		R[i] = floormod(A[i], B[i]);
	}
}

/* s = {N} */
static void build_to_int32(run *r, const int64_t *s)
{
	int64_t N = s[0];
	float *A = in_f32(r, DIMS(N), -3, 3);
	int32_t *O = out_i32(r, DIMS(N));
	int32_t *F = out_i32(r, DIMS(N));
	for (int64_t i = 0; i < N; i++) {
		float x = A[i] * 4;
		O[i] = (int32_t)x; /* toward zero, as C */
		F[i] = (int32_t)(float)floor(x);
	}
}

/* s = {N} */
static void build_to_int8(run *r, const int64_t *s)
{
	int64_t N = s[0];
	int32_t *A = in_i32(r, DIMS(N), -300, 300);
	int8_t *O = out_i8(r, DIMS(N));
	for (int64_t i = 0; i < N; i++)
		O[i] = (int8_t)(uint8_t)(uint32_t)A[i]; /* keeps the low 8 bits */
}

/* s = {N} */
static void build_u8_to_float(run *r, const int64_t *s)
{
	int64_t N = s[0];
	uint8_t *A = in_u8(r, DIMS(N), 0, 255);
	float *O = out_f32(r, DIMS(N));
	for (int64_t i = 0; i < N; i++)
		O[i] = (float)A[i] / 255;
}

/* s = {N} */
static void build_f64_axpy(run *r, const int64_t *s)
{
	int64_t N = s[0];
	double *X = in_f64(r, DIMS(N), -1, 1);
	double *Y = in_f64(r, DIMS(N), -1, 1);
	float *Z = in_f32(r, DIMS(N), -1, 1);
	double *O = out_f64(r, DIMS(N));
	for (int64_t i = 0; i < N; i++)
		O[i] = X[i] * 2.5 + Y[i] - (double)Z[i];
}

/* s = {N} */
static void build_f64_to_f32(run *r, const int64_t *s)
{
	int64_t N = s[0];
	double *X = in_f64(r, DIMS(N), -1, 1);
	float *O = out_f32(r, DIMS(N));
	for (int64_t i = 0; i < N; i++)
		O[i] = (float)(X[i] * 3);
}

/* s = {N} */
static void build_f16_fma(run *r, const int64_t *s)
{
	int64_t N = s[0];
	uint16_t *A = in_f16(r, DIMS(N), -4, 4);
	uint16_t *B = in_f16(r, DIMS(N), -4, 4);
	uint16_t *O = out_f16(r, DIMS(N));
	for (int64_t i = 0; i < N; i++) {
		double t = tu_round_half(tu_half_to_double(A[i]) * 0.5);
		O[i] = tu_half_from_double(t + tu_half_to_double(B[i])); /* exact in double, one rounding */
	}
}

/* s = {N} */
static void build_f16_to_f32(run *r, const int64_t *s)
{
	int64_t N = s[0];
	uint16_t *A = in_f16(r, DIMS(N), -4, 4);
	float *O = out_f32(r, DIMS(N));
	for (int64_t i = 0; i < N; i++)
		O[i] = (float)tu_half_to_double(A[i]) * 3;
}

/* s = {N} */
static void build_f32_to_f16(run *r, const int64_t *s)
{
	int64_t N = s[0];
	float *A = in_f32(r, DIMS(N), -4, 4);
	uint16_t *O = out_f16(r, DIMS(N));
	for (int64_t i = 0; i < N; i++)
		O[i] = tu_half_from_double(A[i] * 3); /* float product (exact ops), then to half */
}

/* Uniform values in [lo, hi) rounded to bfloat16; returns the bits. */
static uint16_t *in_bf16(run *r, const int64_t *dims, int ndim, double lo, double hi)
{
	tu_tensor *t = new_input(r, TU_BF16, dims, ndim);
	uint16_t *p = t->data;
	for (int64_t i = 0; i < t->numel; i++)
		p[i] = tu_bf16_from_double(lo + (hi - lo) * tu_rand_unit(&r->rng));
	return p;
}

static uint16_t *out_bf16(run *r, const int64_t *dims, int ndim)
{
	return new_output(r, TU_BF16, dims, ndim);
}

/* s = {N} */
static void build_bf16_fma(run *r, const int64_t *s)
{
	int64_t N = s[0];
	uint16_t *A = in_bf16(r, DIMS(N), -4, 4);
	uint16_t *B = in_bf16(r, DIMS(N), -4, 4);
	uint16_t *O = out_bf16(r, DIMS(N));
	for (int64_t i = 0; i < N; i++) {
		double t = tu_bf16_to_double(tu_bf16_from_double(tu_bf16_to_double(A[i]) * 0.5));
		O[i] = tu_bf16_from_double(t + tu_bf16_to_double(B[i])); /* exact, one rounding */
	}
}

/* s = {N} */
static void build_bf16_to_f32(run *r, const int64_t *s)
{
	int64_t N = s[0];
	uint16_t *A = in_bf16(r, DIMS(N), -4, 4);
	float *O = out_f32(r, DIMS(N));
	for (int64_t i = 0; i < N; i++)
		O[i] = (float)tu_bf16_to_double(A[i]) * 3;
}

/* s = {N} */
static void build_f32_to_bf16(run *r, const int64_t *s)
{
	int64_t N = s[0];
	float *A = in_f32(r, DIMS(N), -4, 4);
	uint16_t *O = out_bf16(r, DIMS(N));
	for (int64_t i = 0; i < N; i++)
		O[i] = tu_bf16_from_double((float)(A[i] * 3)); /* float product, then bfloat16 */
}

/* s = {N} */
static void build_greater(run *r, const int64_t *s)
{
	int64_t N = s[0];
	float *A = in_f32(r, DIMS(N), -1, 1);
	float *B = in_f32(r, DIMS(N), -1, 1);
	uint8_t *O = out_bool(r, DIMS(N));
	for (int64_t i = 0; i < N; i++)
		O[i] = A[i] > B[i];
}

/* s = {N} */
static void build_bool_logic(run *r, const int64_t *s)
{
	int64_t N = s[0];
	uint8_t *P = in_bool(r, DIMS(N));
	uint8_t *Q = in_bool(r, DIMS(N));
	uint8_t *O = out_bool(r, DIMS(N));
	for (int64_t i = 0; i < N; i++)
		O[i] = (P[i] && !Q[i]) || (!P[i] && Q[i]);
}

/* s = {N} */
static void build_bool_select(run *r, const int64_t *s)
{
	int64_t N = s[0];
	uint8_t *P = in_bool(r, DIMS(N));
	float *A = in_f32(r, DIMS(N), -1, 1);
	float *B = in_f32(r, DIMS(N), -1, 1);
	float *O = out_f32(r, DIMS(N));
	for (int64_t i = 0; i < N; i++)
		O[i] = P[i] ? A[i] : B[i];
}

/* s = {N} */
static void build_bool_to_int(run *r, const int64_t *s)
{
	int64_t N = s[0];
	uint8_t *P = in_bool(r, DIMS(N));
	int32_t *O = out_i32(r, DIMS(N));
	for (int64_t i = 0; i < N; i++)
		O[i] = P[i] * 2;
}

/* ---- shapes.tc ---- */

/* s = {N} */
static void build_outer3(run *r, const int64_t *s)
{
	int64_t N = s[0];
	float *A = in_f32(r, DIMS(N), -1, 1);
	float *O = out_f32(r, DIMS(N, 3));
	for (int64_t i = 0; i < N; i++)
		for (int64_t j = 0; j < 3; j++)
			O[IX2(i, j, 3)] = A[i] * (float)j;
}

/* s = {N, M} */
static void build_iota_scaled(run *r, const int64_t *s)
{
	int64_t N = s[0], M = s[1];
	float *A = in_f32(r, DIMS(N, M), -1, 1);
	float *O = out_f32(r, DIMS(N, M));
	for (int64_t i = 0; i < N; i++)
		for (int64_t j = 0; j < M; j++)
			O[IX2(i, j, M)] = A[IX2(i, j, M)] + (float)(int32_t)(i * M) + (float)j;
}

/* s = {N, M} */
static void build_row_mean(run *r, const int64_t *s)
{
	int64_t N = s[0], M = s[1];
	float *A = in_f32(r, DIMS(N, M), -1, 1);
	float *O = out_f32(r, DIMS(N));
	reduction_tol(r, M, 1);
	for (int64_t i = 0; i < N; i++) {
		float acc = 0;
		for (int64_t j = 0; j < M; j++)
			acc += A[IX2(i, j, M)];
		O[i] = acc / (float)M;
	}
}

/* ---- reductions.tc ---- */

/* s = {N, M} */
static void build_row_prod(run *r, const int64_t *s)
{
	int64_t N = s[0], M = s[1];
	float *A = in_f32(r, DIMS(N, M), 0.5, 1.5);
	float *P = out_f32(r, DIMS(N));
	for (int64_t i = 0; i < N; i++) {
		float acc = 1;
		for (int64_t j = 0; j < M; j++)
			acc *= A[IX2(i, j, M)];
		P[i] = acc;
	}
}

/* s = {N, M} */
static void build_max_into(run *r, const int64_t *s)
{
	int64_t N = s[0], M = s[1];
	float *A = in_f32(r, DIMS(N, M), -1, 1);
	float *B = in_f32(r, DIMS(N), -1, 1);
	float *O = out_f32(r, DIMS(N));
	for (int64_t i = 0; i < N; i++) {
		O[i] = B[i];
		for (int64_t j = 0; j < M; j++)
			O[i] = f_fmax(O[i], A[IX2(i, j, M)]);
	}
}

/* s = {N, M} */
static void build_min_of_sums(run *r, const int64_t *s)
{
	int64_t N = s[0], M = s[1];
	float *A = in_f32(r, DIMS(N, M), -1, 1);
	float *B = in_f32(r, DIMS(N, M), -1, 1);
	float *O = out_f32(r, DIMS(N));
	reduction_tol(r, M, 1);
	for (int64_t i = 0; i < N; i++) {
		float acc = 0;
		for (int64_t j = 0; j < M; j++)
			acc += A[IX2(i, j, M)];
		for (int64_t j = 0; j < M; j++)
			acc = f_fmin(acc, B[IX2(i, j, M)]);
		O[i] = acc;
	}
}

/* s = {N, M} */
static void build_sum_all(run *r, const int64_t *s)
{
	int64_t N = s[0], M = s[1];
	float *A = in_f32(r, DIMS(N, M), -1, 1);
	float *out = out_f32(r, SCALAR);
	reduction_tol(r, N * M, 1);
	float acc = 0;
	for (int64_t i = 0; i < N * M; i++)
		acc += A[i];
	out[0] = acc;
}

/* s = {N, M}, M >= 2 */
static void build_sum_except_first(run *r, const int64_t *s)
{
	int64_t N = s[0], M = s[1];
	float *A = in_f32(r, DIMS(N, M), -1, 1);
	float *O = out_f32(r, DIMS(N));
	reduction_tol(r, M, 1);
	for (int64_t i = 0; i < N; i++) {
		float acc = 0;
		for (int64_t k = 1; k < M; k++)
			acc += A[IX2(i, k, M)];
		O[i] = acc;
	}
}

/* s = {N, M} */
static void build_int8_sum(run *r, const int64_t *s)
{
	int64_t N = s[0], M = s[1];
	int8_t *A = in_i8(r, DIMS(N, M), -128, 127);
	int8_t *S = out_i8(r, DIMS(N));
	int32_t *W = out_i32(r, DIMS(N));
	for (int64_t i = 0; i < N; i++) {
		int8_t acc = 0;
		int32_t wide = 0;
		for (int64_t j = 0; j < M; j++) {
			acc = (int8_t)(uint8_t)(acc + A[IX2(i, j, M)]);
			wide += A[IX2(i, j, M)];
		}
		S[i] = acc;
		W[i] = wide;
	}
}

/* s = {N, M} */
static void build_f16_row_sum(run *r, const int64_t *s)
{
	int64_t N = s[0], M = s[1];
	uint16_t *A = in_f16(r, DIMS(N, M), -1, 1);
	uint16_t *S = out_f16(r, DIMS(N));
	for (int64_t i = 0; i < N; i++) {
		float acc = 0; /* float16 sums accumulate in float32, rounded once */
		for (int64_t j = 0; j < M; j++)
			acc += (float)tu_half_to_double(A[IX2(i, j, M)]);
		S[i] = tu_half_from_double(acc);
	}
}

/* s = {N, M} */
static void build_bf16_row_sum(run *r, const int64_t *s)
{
	int64_t N = s[0], M = s[1];
	uint16_t *A = in_bf16(r, DIMS(N, M), -1, 1);
	uint16_t *S = out_bf16(r, DIMS(N));
	for (int64_t i = 0; i < N; i++) {
		float acc = 0; /* in float32, in index order, rounded once */
		for (int64_t j = 0; j < M; j++)
			acc += (float)tu_bf16_to_double(A[IX2(i, j, M)]);
		S[i] = tu_bf16_from_double(acc);
	}
}

/* s = {M, K, N} */
static void build_bf16_matmul(run *r, const int64_t *s)
{
	int64_t M = s[0], K = s[1], N = s[2];
	uint16_t *A = in_bf16(r, DIMS(M, K), -1, 1);
	uint16_t *B = in_bf16(r, DIMS(K, N), -1, 1);
	uint16_t *C = out_bf16(r, DIMS(M, N));
	for (int64_t m = 0; m < M; m++)
		for (int64_t n = 0; n < N; n++) {
			float acc = 0; /* each product rounded to bfloat16, summed in float32 */
			for (int64_t k = 0; k < K; k++)
				acc += (float)tu_bf16_to_double(tu_bf16_from_double(
					tu_bf16_to_double(A[IX2(m, k, K)]) * tu_bf16_to_double(B[IX2(k, n, N)])));
			C[IX2(m, n, N)] = tu_bf16_from_double(acc);
		}
}

/* s = {M, K, N} */
static void build_f64_matmul(run *r, const int64_t *s)
{
	int64_t M = s[0], K = s[1], N = s[2];
	double *A = in_f64(r, DIMS(M, K), -1, 1);
	double *B = in_f64(r, DIMS(K, N), -1, 1);
	double *C = out_f64(r, DIMS(M, N));
	out_tol(r, 1e-12, 1e-15 * (double)K);
	for (int64_t m = 0; m < M; m++)
		for (int64_t n = 0; n < N; n++) {
			double acc = 0;
			for (int64_t k = 0; k < K; k++)
				acc += A[IX2(m, k, K)] * B[IX2(k, n, N)];
			C[IX2(m, n, N)] = acc;
		}
}

/* ---- indexing.tc ---- */

/* s = {N} */
static void build_reverse(run *r, const int64_t *s)
{
	int64_t N = s[0];
	float *A = in_f32(r, DIMS(N), -1, 1);
	float *O = out_f32(r, DIMS(N));
	for (int64_t i = 0; i < N; i++)
		O[i] = A[N - 1 - i];
}

/* s = {N} */
static void build_tile2(run *r, const int64_t *s)
{
	int64_t N = s[0];
	float *A = in_f32(r, DIMS(N), -1, 1);
	float *O = out_f32(r, DIMS(2 * N));
	for (int64_t i = 0; i < 2 * N; i++)
		O[i] = A[i % N];
}

/* s = {N} */
static void build_upsample2(run *r, const int64_t *s)
{
	int64_t N = s[0];
	float *A = in_f32(r, DIMS(N), -1, 1);
	float *O = out_f32(r, DIMS(2 * N));
	for (int64_t i = 0; i < 2 * N; i++)
		O[i] = A[i / 2];
}

/* s = {N} */
static void build_pad1(run *r, const int64_t *s)
{
	int64_t N = s[0];
	float *A = in_f32(r, DIMS(N), -1, 1);
	float *O = out_f32(r, DIMS(N + 2));
	for (int64_t i = 0; i < N + 2; i++)
		O[i] = i >= 1 && i <= N ? A[i - 1] : 0;
}

/* s = {H, W} */
static void build_rgb_to_gray(run *r, const int64_t *s)
{
	int64_t H = s[0], W = s[1];
	float *I = in_f32(r, DIMS(3, H, W), 0, 1);
	float *O = out_f32(r, DIMS(H, W));
	for (int64_t h = 0; h < H; h++)
		for (int64_t w = 0; w < W; w++)
			O[IX2(h, w, W)] = 0.299f * I[IX3(0, h, w, H, W)] + 0.587f * I[IX3(1, h, w, H, W)] +
				0.114f * I[IX3(2, h, w, H, W)];
}

/* s = {N} */
static void build_diag(run *r, const int64_t *s)
{
	int64_t N = s[0];
	float *A = in_f32(r, DIMS(N, N), -1, 1);
	float *d = out_f32(r, DIMS(N));
	for (int64_t i = 0; i < N; i++)
		d[i] = A[IX2(i, i, N)];
}

/* s = {N} */
static void build_trace(run *r, const int64_t *s)
{
	int64_t N = s[0];
	float *A = in_f32(r, DIMS(N, N), -1, 1);
	float *t = out_f32(r, SCALAR);
	float acc = 0;
	for (int64_t i = 0; i < N; i++)
		acc += A[IX2(i, i, N)];
	t[0] = acc;
}

/* ================================================================
 * The table.  Each kernel: at least three shape sets, with sizes of 1 and
 * odd/prime sizes.
 * ================================================================ */

#define CASE(file, entry, build, ...) {file "/" entry, file, entry, build, {__VA_ARGS__}}

static const kernel_case cases[] = {
	CASE("pointwise", "add", build_add, {1, 1}, {7, 13}, {31, 1}, {3, 64}),
	CASE("pointwise", "relu", build_relu, {1, 1}, {7, 13}, {1, 31}),
	CASE("pointwise", "sigmoid", build_sigmoid, {1}, {7}, {131}),
	CASE("pointwise", "scale", build_scale, {1}, {13}, {31}),
	CASE("pointwise", "builtins", build_builtins, {1, 1, 1}, {2, 7, 13}, {31, 1, 3}),
	CASE("transpose", "transpose", build_transpose, {1, 1}, {7, 13}, {1, 31}, {17, 1}),
	CASE("transpose", "permute3", build_permute3, {1, 1, 1}, {2, 7, 13}, {5, 1, 3}),
	CASE("matvec", "matvec", build_matvec, {1, 1}, {7, 13}, {31, 1}, {1, 29}),
	CASE("matvec", "dot", build_dot, {1}, {13}, {31}),
	CASE("matvec", "matvec_plus", build_matvec_plus, {1, 1}, {7, 13}, {31, 3}),
	CASE("matvec", "row_sum_accumulate", build_row_sum_accumulate, {1, 1}, {7, 13}, {3, 1}),
	CASE("matmul", "matmul", build_matmul, {1, 1, 1}, {7, 13, 31}, {13, 1, 7}, {1, 31, 1}),
	CASE("matmul", "matmul_nt", build_matmul_nt, {1, 1, 1}, {7, 13, 31}, {31, 7, 1}),
	CASE("matmul", "matmul_tn", build_matmul_tn, {1, 1, 1}, {45, 17, 7}, {7, 13, 31}, {33, 20, 10}),
	CASE("matmul", "matmul_declared", build_matmul, {1, 1, 1}, {7, 13, 31}, {5, 2, 3}),
	CASE("matmul", "batch_matmul", build_batch_matmul, {1, 1, 1, 1}, {3, 7, 13, 5},
		{1, 31, 2, 7}),
	CASE("tensordot", "tensordot", build_tensordot, {1, 1, 1, 1, 1, 1}, {2, 3, 7, 5, 3, 4},
		{1, 5, 13, 1, 7, 2}),
	CASE("tensordot", "tensordot2", build_tensordot2, {1, 1, 1, 1}, {3, 7, 13, 5},
		{7, 1, 31, 2}),
	CASE("conv2d", "conv2d", build_conv2d, {1, 1, 1, 1, 1, 1, 1}, {2, 3, 13, 11, 5, 3, 3},
		{1, 7, 7, 31, 2, 7, 1}, {1, 3, 6, 11, 17, 3, 3}),
	CASE("conv2d", "conv2d_nobias", build_conv2d_nobias, {1, 1, 1, 1, 1, 1, 1},
		{2, 3, 13, 11, 5, 3, 3}, {1, 2, 5, 9, 3, 1, 4}),
	CASE("conv_strided", "conv2d_stride2", build_conv2d_stride2, {1, 1, 1, 1, 1, 1, 1},
		{2, 3, 13, 11, 5, 3, 3}, {1, 4, 8, 7, 3, 2, 1}),
	CASE("pooling", "maxpool2x2", build_maxpool2x2, {1, 1, 2, 2}, {2, 3, 7, 9}, {1, 5, 13, 4}),
	CASE("pooling", "avgpool2x2", build_avgpool2x2, {1, 1, 2, 2}, {2, 3, 7, 9}, {1, 5, 13, 4}),
	CASE("pooling", "maxpool3x3_s1", build_maxpool3x3_s1, {1, 1, 3, 3}, {2, 3, 7, 9},
		{1, 2, 13, 5}),
	CASE("group_conv", "group_conv", build_group_conv, {1, 1, 1, 1, 1, 1, 1, 1},
		{2, 3, 2, 7, 9, 5, 3, 3}, {1, 2, 5, 13, 6, 1, 2, 5}, {1, 2, 3, 5, 9, 16, 3, 3}),
	CASE("softmax", "softmax_outputs", build_softmax_outputs, {1, 1}, {7, 13}, {3, 31}),
	CASE("softmax", "softmax", build_softmax, {1, 1}, {7, 13}, {3, 31}, {1, 257}),
	CASE("layernorm", "layernorm", build_layernorm, {1, 1}, {7, 13}, {3, 31}),
	CASE("batchnorm", "batchnorm", build_batchnorm, {1, 1, 1, 1}, {2, 3, 7, 5}, {1, 7, 13, 1}),
	CASE("mlp", "fc_relu", build_fc_relu, {1, 1, 1}, {7, 13, 31}, {3, 31, 1}),
	CASE("mlp", "mlp2", build_mlp2, {1, 1, 1, 1}, {7, 13, 31, 5}, {2, 1, 7, 13},
		{3, 20, 17, 33}),
	CASE("kronecker", "kronecker3", build_kronecker3, {1, 1, 1, 1, 1, 1, 1},
		{2, 3, 5, 7, 4, 3, 2}, {3, 7, 1, 3, 5, 1, 7}, {3, 13, 5, 16, 16, 16, 16}),
	CASE("kronecker", "kronecker3_outputs", build_kronecker3_outputs, {1, 1, 1, 1, 1, 1, 1},
		{2, 3, 5, 7, 4, 3, 2}, {1, 2, 3, 1, 7, 5, 1}),
	CASE("embedding", "lookup_sum_i32", build_lookup_sum_i32, {1, 1, 1, 1}, {13, 7, 5, 3},
		{31, 4, 7, 13}),
	CASE("embedding", "lookup_sum_i64", build_lookup_sum_i64, {1, 1, 1, 1}, {13, 7, 5, 3},
		{31, 4, 7, 13}),
	CASE("embedding", "gather_rows", build_gather_rows, {1, 1, 1}, {13, 7, 31}, {5, 31, 1}),
	CASE("embedding", "gather_rows_u8", build_gather_rows_u8, {1, 1, 1}, {13, 7, 31},
		{256, 3, 64}),
	CASE("embedding", "gather2d", build_gather2d, {1, 1, 1}, {13, 7, 31}, {1, 5, 3}),
	CASE("scatter", "embedding_bwd_i64", build_embedding_bwd_i64, {1, 1, 1}, {13, 7, 31},
		{1000, 64, 257}, {3, 1, 5}),
	CASE("scatter", "embedding_bwd_i32", build_embedding_bwd_i32, {1, 1, 1}, {13, 7, 31},
		{6, 33, 100}),
	CASE("scatter", "histogram", build_histogram, {1, 1}, {7, 31}, {13, 1}, {3, 200}),
	CASE("scatter", "scatter_prod", build_scatter_prod, {1, 1, 1}, {7, 13, 31}, {3, 1, 5},
		{2, 5, 64}),
	CASE("scatter", "scatter2d", build_scatter2d, {1, 1, 1}, {7, 13, 31}, {1, 1, 3}),
	CASE("scatter", "segment_max", build_segment_max, {1, 1}, {7, 31}, {13, 1}, {5, 100}),
	CASE("scatter", "scatter_accumulate", build_scatter_accumulate, {1, 1, 1}, {7, 13, 31},
		{3, 1, 5}),
	CASE("scatter", "scatter_strided", build_scatter_strided, {1, 1}, {13, 7}, {4, 9}),
	CASE("scatter", "scatter_folded", build_scatter_folded, {1, 1}, {7, 13}, {3, 40}, {5, 5}),
	CASE("concat", "concat_rows", build_concat_rows, {1, 1, 1}, {7, 13, 3}, {31, 1, 5}),
	CASE("concat", "concat_cols", build_concat_cols, {1, 1, 1}, {7, 13, 3}, {3, 1, 31}),
	CASE("guarded", "concat_tc", build_concat_tc, {1, 1}, {24, 16}, {7, 3}),
	CASE("guarded", "masked_convolve", build_masked_convolve, {1, 1, 1, 1, 1, 1},
		{2, 3, 7, 6, 3, 3}, {1, 4, 5, 9, 2, 2}),
	CASE("guarded", "tri_matmul", build_tri_matmul, {1, 1}, {7, 5}, {13, 31}),
	CASE("guarded", "checker_sum", build_checker_sum, {1, 1}, {7, 5}, {13, 64}),
	CASE("guarded", "make_idx", build_make_idx, {1}, {7}, {31}),
	CASE("guarded", "dots", build_dots, {1, 1, 1, 1}, {13, 5, 3, 4}, {40, 3, 7, 6}),
	CASE("guarded", "result", build_result, {1, 1}, {3, 7}, {5, 1}),
	CASE("pad", "conv_same", build_conv_same, {1, 1, 1, 1, 1}, {2, 3, 7, 6, 5}, {1, 2, 2, 9, 17},
		{1, 17, 5, 5, 16}),
	CASE("pad", "conv_s2_same", build_conv_s2_same, {1, 1, 1, 1, 1}, {2, 3, 7, 6, 5},
		{1, 2, 2, 9, 4}, {1, 3, 8, 13, 16}),
	CASE("pad", "conv_input_grad", build_conv_input_grad, {1, 1, 1, 1, 1}, {2, 3, 5, 4, 6},
		{1, 16, 3, 7, 2}),
	CASE("pad", "shift_right", build_pad_shift_right, {1}, {2}, {31}),
	CASE("pad", "shift_left", build_shift_left, {1}, {2}, {31}),
	CASE("pad", "maxpool_same", build_maxpool_same, {1, 1, 1, 1}, {2, 3, 7, 6}, {1, 2, 2, 13}),
	CASE("pad", "conv1d_f16", build_conv1d_f16, {1, 1}, {13, 3}, {31, 5}, {2, 7}),
	CASE("pad", "conv1d_i32", build_conv1d_i32, {1, 1}, {13, 5}, {31, 3}, {2, 7}),
	CASE("pad", "shift_i8", build_shift_i8, {1}, {13}, {31}),
	CASE("pad", "gather_pad", build_gather_pad, {1, 1}, {13, 7}, {5, 31}),
	CASE("pad", "gather_sum", build_gather_sum, {1, 1, 1}, {13, 7, 3}, {5, 31, 8}),
	CASE("pad", "nested", build_nested, {1}, {2}, {31}),
	CASE("pad", "let_factor", build_let_factor, {1, 1}, {13, 3}, {2, 7}),
	CASE("pad", "two_pads", build_two_pads, {1}, {2}, {31}),
	CASE("argmin", "argmin", build_argmin, {1, 1}, {7, 13}, {31, 1}, {2, 31}),
	CASE("argmin", "argmax_int", build_argmax_int, {1, 1}, {7, 13}, {31, 1}, {5, 31}),
	CASE("argmin", "minmax_int8", build_minmax_int8, {1, 1}, {31, 1}, {7, 13}),
	CASE("let_exists", "let_poly", build_let_poly, {1}, {7}, {31}),
	CASE("let_exists", "let_sumsq", build_let_sumsq, {1, 1}, {7, 13}, {31, 1}),
	CASE("let_exists", "let_chain", build_let_chain, {1}, {7}, {31}),
	CASE("let_exists", "shift_right", build_shift_right, {1}, {2}, {31}),
	CASE("let_exists", "concat_exists", build_concat_rows, {1, 1, 1}, {7, 13, 3}, {31, 1, 5}),
	CASE("casts", "i8_times3", build_i8_times3, {1}, {13}, {257}),
	CASE("casts", "u8_add", build_u8_add, {1}, {13}, {257}),
	CASE("casts", "mixed_ints", build_mixed_ints, {1}, {13}, {31}),
	CASE("casts", "u8_plus_i8", build_u8_plus_i8, {1}, {13}, {257}),
	CASE("casts", "int_divmod", build_int_divmod, {1}, {13}, {127}),
	CASE("casts", "to_int32", build_to_int32, {1}, {13}, {127}),
	CASE("casts", "to_int8", build_to_int8, {1}, {13}, {127}),
	CASE("casts", "u8_to_float", build_u8_to_float, {1}, {13}, {257}),
	CASE("casts", "f64_axpy", build_f64_axpy, {1}, {13}, {31}),
	CASE("casts", "f64_to_f32", build_f64_to_f32, {1}, {13}, {31}),
	CASE("casts", "f16_fma", build_f16_fma, {1}, {13}, {257}),
	CASE("casts", "f16_to_f32", build_f16_to_f32, {1}, {13}, {31}),
	CASE("casts", "f32_to_f16", build_f32_to_f16, {1}, {13}, {257}),
	CASE("casts", "bf16_fma", build_bf16_fma, {1}, {13}, {257}),
	CASE("casts", "bf16_to_f32", build_bf16_to_f32, {1}, {13}, {31}),
	CASE("casts", "f32_to_bf16", build_f32_to_bf16, {1}, {13}, {257}),
	CASE("casts", "greater", build_greater, {1}, {13}, {31}),
	CASE("casts", "bool_logic", build_bool_logic, {1}, {13}, {31}),
	CASE("casts", "bool_select", build_bool_select, {1}, {13}, {31}),
	CASE("casts", "bool_to_int", build_bool_to_int, {1}, {13}, {31}),
	CASE("shapes", "outer3", build_outer3, {1}, {7}, {31}),
	CASE("shapes", "iota_scaled", build_iota_scaled, {1, 1}, {7, 13}, {31, 1}),
	CASE("shapes", "row_mean", build_row_mean, {1, 1}, {7, 13}, {31, 1}),
	CASE("reductions", "row_prod", build_row_prod, {1, 1}, {7, 13}, {31, 1}, {2, 31}),
	CASE("reductions", "max_into", build_max_into, {1, 1}, {7, 13}, {31, 1}),
	CASE("reductions", "min_of_sums", build_min_of_sums, {1, 1}, {7, 13}, {31, 1}),
	CASE("reductions", "sum_all", build_sum_all, {1, 1}, {7, 13}, {31, 1}),
	CASE("reductions", "sum_except_first", build_sum_except_first, {1, 2}, {7, 13}, {31, 2}),
	CASE("reductions", "int8_sum", build_int8_sum, {1, 1}, {7, 13}, {3, 31}),
	CASE("reductions", "f16_row_sum", build_f16_row_sum, {1, 1}, {7, 13}, {3, 31}),
	CASE("reductions", "bf16_row_sum", build_bf16_row_sum, {1, 1}, {7, 13}, {3, 300}),
	CASE("reductions", "bf16_matmul", build_bf16_matmul, {1, 1, 1}, {7, 13, 31}, {40, 67, 70}),
	CASE("reductions", "f64_matmul", build_f64_matmul, {1, 1, 1}, {7, 13, 31}, {5, 1, 3}),
	CASE("indexing", "reverse", build_reverse, {1}, {7}, {31}),
	CASE("indexing", "tile2", build_tile2, {1}, {7}, {31}),
	CASE("indexing", "upsample2", build_upsample2, {1}, {7}, {31}),
	CASE("indexing", "pad1", build_pad1, {1}, {7}, {31}),
	CASE("indexing", "rgb_to_gray", build_rgb_to_gray, {1, 1}, {7, 13}, {31, 1}),
	CASE("indexing", "diag", build_diag, {1}, {7}, {31}),
	CASE("indexing", "trace", build_trace, {1}, {7}, {31}),
};

#define NCASES ((int)(sizeof(cases) / sizeof(cases[0])))

/* ================================================================
 * The driver.
 * ================================================================ */

static const char *dtype_str(DLDataType t)
{
	static char buf[32];
	const char *code = t.code == kDLInt ? "int" : t.code == kDLUInt ? "uint" :
		t.code == kDLFloat ? "float" : t.code == TC_DL_BOOL ? "bool" : "code?";
	snprintf(buf, sizeof(buf), "%s%d (code %d lanes %d)", code, t.bits, t.code, t.lanes);
	return buf;
}

static void format_index(char *buf, size_t n, const tu_tensor *t, int64_t lin)
{
	int64_t idx[TU_MAX_RANK];
	for (int d = (int)t->dl.ndim - 1; d >= 0; d--) {
		idx[d] = t->shape[d] ? lin % t->shape[d] : 0;
		lin = t->shape[d] ? lin / t->shape[d] : 0;
	}
	size_t len = (size_t)snprintf(buf, n, "(");
	for (int d = 0; d < t->dl.ndim && len < n; d++)
		len += (size_t)snprintf(buf + len, n - len, "%s%lld", d ? "," : "", (long long)idx[d]);
	if (len < n)
		snprintf(buf + len, n - len, ")");
}

static void format_sizes(char *buf, size_t n, const int64_t *s)
{
	size_t len = (size_t)snprintf(buf, n, "{");
	for (int i = 0; i < MAX_SIZES && s[i] && len < n; i++)
		len += (size_t)snprintf(buf + len, n - len, "%s%lld", i ? "," : "", (long long)s[i]);
	if (len < n)
		snprintf(buf + len, n - len, "}");
}

/* Compare output i; prints the first few mismatches.  Returns 1 if all match. */
static int compare_output(const char *what, int i, const tu_tensor *got, const tu_tensor *want,
	double rtol, double atol)
{
	int64_t bad = 0;
	for (int64_t j = 0; j < want->numel; j++) {
		double g = tu_get(got, j), w = tu_get(want, j);
		int ok;
		if (got->elt == TU_BOOL) {
			uint8_t raw = ((const uint8_t *)got->data)[j];
			ok = raw == (uint8_t)w; /* a bool must be stored as exactly 0 or 1 */
		} else if (!tu_elt_is_float(want->elt)) {
			ok = g == w;
		} else {
			ok = !isnan(g) && fabs(g - w) <= atol + rtol * fabs(w);
		}
		if (!ok && bad++ < 5) {
			char ix[96];
			format_index(ix, sizeof(ix), want, j);
			print_error("%s: output %d (%s) element %s: got %.9g, expected %.9g "
				    "(rtol %g, atol %g)\n", what, i, tu_elt_name(want->elt), ix, g, w,
				rtol, atol);
		}
	}
	if (bad)
		print_error("%s: output %d: %lld of %lld elements differ\n", what, i, (long long)bad,
			(long long)want->numel);
	return bad == 0;
}

/* The same shape set through the tcomp command: inputs written as .npy,
 * `tcomp run` in a separate process, outputs read back and compared with the
 * same reference.  Cases whose outputs start from given contents (reductions
 * without '!') are skipped here: `tcomp run` starts outputs from zero. */
static int check_via_cli(const kernel_case *kc, run *r, tc_module *m, const char *tc_path,
	const char *what)
{
	char dir[512], cmd[8192], file[600];
	int ok = 1, n = 0;
	for (int i = 0; i < r->nout; i++)
		if (r->has_init[i])
			return 1;
	snprintf(dir, sizeof(dir), "%s/tmp-corpus-XXXXXX", TC_BINARY_DIR);
	if (!mkdtemp(dir)) {
		print_error("%s: mkdtemp failed\n", what);
		return 0;
	}
	n = snprintf(cmd, sizeof(cmd), "%s/tcomp run %s -e %s", TC_BINARY_DIR, tc_path, kc->entry);
	for (int i = 0; i < r->nin + r->nout && ok; i++) {
		const char *name = tc_module_tensor_name(m, kc->entry, i);
		snprintf(file, sizeof(file), "%s/t%d.npy", dir, i);
		n += snprintf(cmd + n, sizeof(cmd) - (size_t)n, " --%s %s=%s",
			i < r->nin ? "in" : "out", name, file);
		if (i < r->nin) {
			const tu_tensor *t = &r->in[i];
			const char *tn = tc_dtype_str(t->dl.dtype);
			char *err = NULL;
			if (tc_npy_write(file, tc_dtype_from_name(tn, (int)strlen(tn)), (int)t->dl.ndim,
				    t->shape, t->data, &err) < 0) {
				print_error("%s: writing %s: %s\n", what, file, err);
				tc_free(err);
				ok = 0;
			}
		}
	}
	snprintf(cmd + n, sizeof(cmd) - (size_t)n, " > %s/out.txt 2>&1", dir);
	if (ok && system(cmd) != 0) {
		print_error("%s: `tcomp run` failed: %s\n", what, cmd);
		ok = 0;
	}
	for (int i = 0; i < r->nout && ok; i++) {
		tc_npy got;
		tu_tensor t;
		char *err = NULL;
		snprintf(file, sizeof(file), "%s/t%d.npy", dir, r->nin + i);
		if (tc_npy_read(file, &got, &err) < 0) {
			print_error("%s: reading %s: %s\n", what, file, err);
			tc_free(err);
			ok = 0;
			break;
		}
		tu_tensor_init(&t, r->want[i].elt, r->want[i].shape, (int)r->want[i].dl.ndim);
		if (got.ndim != t.dl.ndim || got.nbytes != (size_t)t.numel * tu_elt_size(t.elt)) {
			print_error("%s: `tcomp run` output %d has rank %d and %zu bytes\n", what, i,
				got.ndim, got.nbytes);
			ok = 0;
		} else {
			memcpy(t.data, got.data, got.nbytes);
			ok &= compare_output(what, i, &t, &r->want[i], r->rtol[i], r->atol[i]);
		}
		tu_tensor_fini(&t);
		tc_npy_free(&got);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		ok = 0;
	return ok;
}

/* Compile the case's entry from m (loaded in ctx) with options (NULL: the
 * defaults), check the output count, dtypes and shapes, run it twice with
 * different poisons and compare with the reference.  what names the shape
 * set and the target.
 * The outputs of the last run are left in got[0 .. *ngot) (allocated here,
 * freed by the caller, also on failure); *ran is set if a run completed.
 * With cuda_text (check_target_text), the kernel's CUDA text
 * (tc_kernel_emit "cuda", the very text compiled) is left in *cuda_text
 * for the caller to free.
 * Returns 1 on success; failures are printed. */
static int check_target_text(const kernel_case *kc, run *r, tc_context *ctx, tc_module *m,
	const tc_options *options, const char *what, tu_tensor *got, int *ngot, int *ran,
	char **cuda_text)
{
	const DLTensor *ins[MAX_TENSORS];
	DLTensor *outs[MAX_TENSORS];
	int ok = 0;

	for (int i = 0; i < r->nin; i++)
		ins[i] = &r->in[i].dl;
	tc_kernel *k = tc_compile(m, kc->entry, ins, r->nin, options);
	if (!k) {
		print_error("%s: tc_compile failed:\n%s\n", what, tc_context_error(ctx));
		return 0;
	}
	int nout = tc_kernel_num_outputs(k);
	if (nout != r->nout) {
		print_error("%s: tc_kernel_num_outputs is %d, expected %d\n", what, nout, r->nout);
		goto done;
	}
	int shapes_ok = 1;
	for (int i = 0; i < r->nout; i++) {
		const tu_tensor *w = &r->want[i];
		DLDataType dt;
		int ndim = -1;
		int64_t shape[TU_MAX_RANK];
		if (tc_kernel_output_shape(k, i, &dt, &ndim, shape) != 0) {
			print_error("%s: tc_kernel_output_shape(%d) failed:\n%s\n", what, i,
				tc_context_error(ctx));
			shapes_ok = 0;
			continue;
		}
		DLDataType wt = w->dl.dtype;
		if (dt.code != wt.code || dt.bits != wt.bits || dt.lanes != wt.lanes) {
			print_error("%s: output %d has dtype %s,", what, i, dtype_str(dt));
			print_error(" expected %s\n", dtype_str(wt));
			shapes_ok = 0;
		}
		int same = ndim == w->dl.ndim;
		for (int d = 0; same && d < ndim; d++)
			same = shape[d] == w->shape[d];
		if (!same) {
			char gs[96], ws[96];
			int64_t tmp[TU_MAX_RANK + 1] = {0};
			for (int d = 0; d < ndim && d < TU_MAX_RANK; d++)
				tmp[d] = shape[d];
			format_sizes(gs, sizeof(gs), tmp);
			memset(tmp, 0, sizeof(tmp));
			for (int d = 0; d < w->dl.ndim; d++)
				tmp[d] = w->shape[d];
			format_sizes(ws, sizeof(ws), tmp);
			print_error("%s: output %d has rank %d shape %s, expected rank %d shape %s\n",
				what, i, ndim, gs, (int)w->dl.ndim, ws);
			shapes_ok = 0;
		}
	}
	if (!shapes_ok)
		goto done;

	for (int i = 0; i < r->nout; i++) {
		tu_tensor_init(&got[i], r->want[i].elt, r->want[i].shape, (int)r->want[i].dl.ndim);
		++*ngot;
		outs[i] = &got[i].dl;
	}

	/* Run twice, with different poisons, to catch elements never written
	 * (an int8 output could equal 0x5A by chance, not also 0xA5) and to
	 * check that a compiled kernel can be run again. */
	ok = 1;
	for (int pass = 0; pass < 2 && ok; pass++) {
		for (int i = 0; i < r->nout; i++) {
			size_t bytes = (size_t)got[i].numel * tu_elt_size(got[i].elt);
			if (r->has_init[i])
				memcpy(got[i].data, r->init[i].data, bytes);
			else if (pass == 0)
				tu_poison(&got[i]);
			else if (tu_elt_is_float(got[i].elt))
				memset(got[i].data, 0xFF, bytes); /* NaNs with other bits */
			else
				memset(got[i].data, 0xA5, bytes);
		}
		if (tc_kernel_run(k, ins, r->nin, outs, r->nout) != 0) {
			print_error("%s: tc_kernel_run failed (pass %d):\n%s\n", what, pass,
				tc_context_error(ctx));
			ok = 0;
			break;
		}
		*ran = 1;
		for (int i = 0; i < r->nout; i++)
			ok &= compare_output(what, i, &got[i], &r->want[i], r->rtol[i], r->atol[i]);
	}
	if (cuda_text && !(*cuda_text = tc_kernel_emit(k, "cuda"))) {
		print_error("%s: tc_kernel_emit(cuda) failed:\n%s\n", what, tc_context_error(ctx));
		ok = 0;
	}
done:
	tc_kernel_free(k);
	return ok;
}

static int check_target(const kernel_case *kc, run *r, tc_context *ctx, tc_module *m,
	const tc_options *options, const char *what, tu_tensor *got, int *ngot, int *ran)
{
	return check_target_text(kc, r, ctx, m, options, what, got, ngot, ran, NULL);
}

/* The CPU outputs against the interpreter's, element by element: integers
 * exactly, bools as stored bytes, floats within the output's tolerance with
 * NaN equal to NaN.  Returns 1 if they agree. */
static int compare_targets(const char *what, const run *r, const tu_tensor *cpu,
	const tu_tensor *interp)
{
	int all = 1;
	for (int i = 0; i < r->nout; i++) {
		int64_t bad = 0;
		for (int64_t j = 0; j < cpu[i].numel; j++) {
			double c = tu_get(&cpu[i], j), v = tu_get(&interp[i], j);
			int ok;
			if (cpu[i].elt == TU_BOOL)
				ok = ((const uint8_t *)cpu[i].data)[j] == ((const uint8_t *)interp[i].data)[j];
			else if (!tu_elt_is_float(cpu[i].elt))
				ok = c == v;
			else if (isnan(c) || isnan(v))
				ok = isnan(c) && isnan(v);
			else
				ok = fabs(c - v) <= r->atol[i] + r->rtol[i] * fabs(v);
			if (!ok && bad++ < 5) {
				char ix[96];
				format_index(ix, sizeof(ix), &cpu[i], j);
				print_error("%s: the CPU and the interpreter disagree: output %d (%s) "
					    "element %s: cpu %.9g, interp %.9g (rtol %g, atol %g)\n",
					what, i, tu_elt_name(cpu[i].elt), ix, c, v, r->rtol[i], r->atol[i]);
			}
		}
		if (bad) {
			print_error("%s: output %d: %lld of %lld elements differ between the CPU and "
				    "the interpreter\n", what, i, (long long)bad, (long long)cpu[i].numel);
			all = 0;
		}
	}
	return all;
}

/* Check one shape set of a case on both targets, against each other, and
 * through the CLI.  Returns 1 on success; failures are printed, so all
 * shape sets of a case run and report. */
/* An option combination drawn from rng, as tc_options_parse text. */
/* A size list of 1 to max sizes drawn from sizes[0..nsizes), appended. */
static int draw_list(uint64_t *rng, char *buf, size_t n, int len, int max, const int *sizes,
	int nsizes)
{
	int k, count = (int)tu_rand_int(rng, 1, max);
	for (k = 0; k < count && (size_t)len < n; k++)
		len += snprintf(buf + len, n - (size_t)len, "%s%d", k ? "," : "",
			sizes[tu_rand_int(rng, 0, nsizes - 1)]);
	return len;
}

static void draw_options(uint64_t *rng, char *buf, size_t n)
{
	static const int tiles[] = {1, 2, 3, 4, 5, 6, 7};
	static const int regs[] = {1, 2, 3, 4, 6, 16, 32};
	static const char *const fusion[] = {"max", "preserve3coincident", "min", "auto"};
	static const char *const vectors[] = {"auto", "1", "4", "8", "16"};
	static const char *const unrolls[] = {"auto", "1", "2", "4", "8"};
	static const char *const orders[] = {"1,0", "0,2,1", "1,0,2", "1,2,0", "2,0,1", "2,1,0",
		"3,2,1,0", "0,3,1,2"};
	int len, pick;
	len = snprintf(buf, n, "order=%s unroll=%s fusion=%s", tu_rand_int(rng, 0, 1) ? "on" : "off",
		tu_rand_int(rng, 0, 1) ? "on" : "off", fusion[tu_rand_int(rng, 0, 3)]);
	len += snprintf(buf + len, n - (size_t)len, " pack=%s parallel=%s",
		tu_rand_int(rng, 0, 1) ? "on" : "off", tu_rand_int(rng, 0, 1) ? "on" : "auto");
	len += snprintf(buf + len, n - (size_t)len, " inline=%s vecreduce=%s",
		tu_rand_int(rng, 0, 1) ? "on" : "off", tu_rand_int(rng, 0, 1) ? "on" : "off");
	pick = (int)tu_rand_int(rng, 0, 5); /* tiles: none, auto, or 1 to 4 sizes */
	len += snprintf(buf + len, n - (size_t)len, " tile=%s", pick == 0 ? "none" : pick == 1 ? "auto" : "");
	if (pick > 1)
		len = draw_list(rng, buf, n, len, 4, tiles, 7);
	pick = (int)tu_rand_int(rng, 0, 3); /* register tiles: none, auto, 1 or 2 sizes */
	len += snprintf(buf + len, n - (size_t)len, " regtile=%s", pick == 0 ? "none" : pick == 1 ? "auto" : "");
	if (pick > 1)
		len = draw_list(rng, buf, n, len, 2, regs, 7);
	/* drawn last, so the draws above stay what they were */
	len += snprintf(buf + len, n - (size_t)len, " vector=%s", vectors[tu_rand_int(rng, 0, 4)]);
	len += snprintf(buf + len, n - (size_t)len, " unroll_inner=%s", unrolls[tu_rand_int(rng, 0, 4)]);
	/* loop orders: auto half the time; orders of 2, 3 and 4 members (the
	 * last longer than many bands: then nothing changes) */
	len += snprintf(buf + len, n - (size_t)len, " interchange=%s",
		tu_rand_int(rng, 0, 1) ? "auto" : orders[tu_rand_int(rng, 0, 7)]);
	/* the thread count the schedule is made for: with one, nests that
	 * read the same rows share their loop over them (polyhedral/fusion.c,
	 * tc_poly_fuse_reuse) */
	snprintf(buf + len, n - (size_t)len, " threads=%s", tu_rand_int(rng, 0, 1) ? "auto" : "1");
}

/* A GPU mapping drawn from rng, as tc_options_parse text: block sizes of
 * 1 to 3 dimensions (at most 1024 threads), a grid cap that makes blocks
 * wrap around (or auto), the reduction's mapping (reduce, reduce_threads;
 * 32 threads as a warp per row), the schedule's own options and the
 * shared-memory copies'. */
static void draw_gpu_options(uint64_t *rng, char *buf, size_t n)
{
	static const int sizes[] = {1, 2, 3, 4, 5, 7, 8, 16, 32, 64};
	static const char *const fusion[] = {"max", "preserve3coincident", "min", "auto"};
	int len, k, nb = (int)tu_rand_int(rng, 0, 3), threads = 1;
	len = snprintf(buf, n, "order=%s fusion=%s inline=%s share=%s block=",
		tu_rand_int(rng, 0, 1) ? "on" : "off", fusion[tu_rand_int(rng, 0, 3)],
		tu_rand_int(rng, 0, 1) ? "on" : "off", tu_rand_int(rng, 0, 1) ? "on" : "off");
	if (!nb)
		len += snprintf(buf + len, n - (size_t)len, "auto");
	for (k = 0; k < nb; k++) {
		int b = sizes[tu_rand_int(rng, 0, 9)];
		if (threads * b > 1024 || (k == 2 && b > 64))
			b = 1;
		threads *= b;
		len += snprintf(buf + len, n - (size_t)len, "%s%d", k ? "," : "", b);
	}
	nb = (int)tu_rand_int(rng, 0, 3);
	len += snprintf(buf + len, n - (size_t)len, " grid=%s", nb ? "" : "auto");
	for (k = 0; k < nb; k++)
		len += snprintf(buf + len, n - (size_t)len, "%s%d", k ? "," : "",
			(int)tu_rand_int(rng, 1, 3));
	{
		static const char *const reduce[] = {"auto", "on", "off"};
		static const char *const rthreads[] = {"auto", "32", "64", "256", "1024"};
		const char *r = reduce[tu_rand_int(rng, 0, 2)];
		int t = (int)tu_rand_int(rng, 0, 4);
		/* reduce_threads=32 comes with a warp per row (reduce_map=warp): no
		 * draw of its own, so the draws after it stay what they were */
		len += snprintf(buf + len, n - (size_t)len, " reduce=%s reduce_threads=%s%s", r,
			rthreads[t], t == 1 ? " reduce_map=warp" : "");
	}
	{ /* drawn last, so the draws above stay what they were */
		static const char *const shared[] = {"auto", "on", "off"};
		static const char *const stile[] = {"auto", "1", "4", "16", "64"};
		snprintf(buf + len, n - (size_t)len, " shared=%s shared_tile=%s",
			shared[tu_rand_int(rng, 0, 2)], stile[tu_rand_int(rng, 0, 4)]);
	}
}

/* Whether the tests run the CUDA checks (test_corpus cuda) instead of the
 * CPU's; gpu_mode: on a GPU (test_corpus gpu, bench/gpu.sh). */
static int cuda_mode, gpu_mode;

/* One shape set on a GPU (test_corpus gpu: not in ctest, for machines with
 * a CUDA device, bench/gpu.sh): target=cuda under the default mapping and
 * a drawn one, inputs copied to device memory, outputs poisoned there
 * (two patterns, as check_target does), run, copied back and compared
 * with the C loops.  No GPU is a failure of every case. */
static int check_gpu(const kernel_case *kc, run *r, tc_context *ctx, tc_module *m,
	const char *what)
{
	DLDevice dev = {kDLCUDA, 0}, host = {kDLCPU, 0};
	DLTensor din[MAX_TENSORS], dout[MAX_TENSORS];
	const DLTensor *ins[MAX_TENSORS];
	DLTensor *outs[MAX_TENSORS];
	tu_tensor got[MAX_TENSORS];
	void *dptr[2 * MAX_TENSORS] = {0};
	char opts[256], text[512], what_t[1024];
	int ok = 1, ngot = 0, i, pass, mapping;
	draw_gpu_options(&r->rng, opts, sizeof(opts));
	for (i = 0; ok && i < r->nin; i++) {
		size_t bytes = (size_t)r->in[i].numel * tu_elt_size(r->in[i].elt);
		din[i] = r->in[i].dl;
		din[i].device = dev;
		if (tc_device_alloc(ctx, dev, bytes, &dptr[i]) != 0 ||
			tc_device_copy(ctx, dptr[i], dev, r->in[i].data, host, bytes) != 0) {
			print_error("%s [gpu]: device memory for input %d:\n%s\n", what, i,
				tc_context_error(ctx));
			ok = 0;
		}
		din[i].data = dptr[i];
		ins[i] = &din[i];
	}
	for (i = 0; ok && i < r->nout; i++) {
		size_t bytes = (size_t)r->want[i].numel * tu_elt_size(r->want[i].elt);
		tu_tensor_init(&got[i], r->want[i].elt, r->want[i].shape, (int)r->want[i].dl.ndim);
		ngot++;
		dout[i] = got[i].dl;
		dout[i].device = dev;
		if (tc_device_alloc(ctx, dev, bytes, &dptr[MAX_TENSORS + i]) != 0) {
			print_error("%s [gpu]: device memory for output %d:\n%s\n", what, i,
				tc_context_error(ctx));
			ok = 0;
		}
		dout[i].data = dptr[MAX_TENSORS + i];
		outs[i] = &dout[i];
	}
	for (mapping = 0; ok && mapping < 2; mapping++) {
		tc_options *o = tc_options_new();
		tc_kernel *k = NULL;
		snprintf(text, sizeof(text), "target=cuda %s", mapping ? opts : "");
		snprintf(what_t, sizeof(what_t), "%s [%s]", what, text);
		if (!o || tc_options_parse(o, text, ctx) != 0 ||
			!(k = tc_compile(m, kc->entry, ins, r->nin, o))) {
			print_error("%s: tc_compile failed:\n%s\n", what_t, tc_context_error(ctx));
			ok = 0;
		}
		for (pass = 0; ok && k && pass < 2; pass++) {
			for (i = 0; i < r->nout; i++) {
				size_t bytes = (size_t)got[i].numel * tu_elt_size(got[i].elt);
				if (r->has_init[i])
					memcpy(got[i].data, r->init[i].data, bytes);
				else if (pass == 0)
					tu_poison(&got[i]);
				else
					memset(got[i].data, tu_elt_is_float(got[i].elt) ? 0xFF : 0xA5, bytes);
				if (tc_device_copy(ctx, dout[i].data, dev, got[i].data, host, bytes) != 0)
					ok = 0;
			}
			if (ok && tc_kernel_run(k, ins, r->nin, outs, r->nout) != 0) {
				print_error("%s: tc_kernel_run failed (pass %d):\n%s\n", what_t, pass,
					tc_context_error(ctx));
				ok = 0;
			}
			for (i = 0; ok && i < r->nout; i++) {
				size_t bytes = (size_t)got[i].numel * tu_elt_size(got[i].elt);
				if (tc_device_copy(ctx, got[i].data, host, dout[i].data, dev, bytes) != 0) {
					print_error("%s: copying output %d back:\n%s\n", what_t, i,
						tc_context_error(ctx));
					ok = 0;
				} else {
					ok &= compare_output(what_t, i, &got[i], &r->want[i], r->rtol[i],
						r->atol[i]);
				}
			}
		}
		tc_kernel_free(k);
		tc_options_free(o);
	}
	for (i = 0; i < 2 * MAX_TENSORS; i++)
		if (dptr[i])
			tc_device_free(ctx, dev, dptr[i]);
	for (i = 0; i < ngot; i++)
		tu_tensor_fini(&got[i]);
	return ok;
}

/* The CUDA checks of one shape set (test_corpus cuda): the cuda-emu
 * target (the CUDA code run by the emulator, which also reports races and
 * out-of-bounds accesses) under the default mapping and a drawn one,
 * against the C loops and the interpreter; and NVRTC compiling the very
 * text the emulator ran, of the default mapping for sm_90 and of the drawn
 * one for sm_80, to cubins, as target=cuda compiles it (the CUDA text does
 * not depend on gpu_arch; the target=cuda compile path itself is
 * test_cuda_files' and test_cli's). */
static int check_cuda(const kernel_case *kc, run *r, tc_context *ctx, tc_module *m,
	const char *what)
{
	tu_tensor got_emu[MAX_TENSORS], got_interp[MAX_TENSORS], got_drawn[MAX_TENSORS];
	int ngot_emu = 0, ngot_interp = 0, ngot_drawn = 0, ran_emu = 0, ran_interp = 0, ran = 0;
	char *text_of[2] = {NULL, NULL}; /* the default mapping's CUDA text, the drawn one's */
	char what_t[1024], opts[256], text[512];
	tc_options *emu = tc_options_new(), *interp = tc_options_new(), *drawn = tc_options_new();
	int ok = emu && interp && drawn;
	draw_gpu_options(&r->rng, opts, sizeof(opts));
	snprintf(text, sizeof(text), "target=cuda-emu %s", opts);
	if (!ok || tc_options_set(emu, "target", "cuda-emu", ctx) != 0 ||
		tc_options_set(interp, "target", "interp", ctx) != 0 ||
		tc_options_parse(drawn, text, ctx) != 0) {
		print_error("%s: options failed:\n%s\n", what, tc_context_error(ctx));
		ok = 0;
		goto done;
	}
	snprintf(what_t, sizeof(what_t), "%s [cuda-emu]", what);
	ok = check_target_text(kc, r, ctx, m, emu, what_t, got_emu, &ngot_emu, &ran_emu,
		&text_of[0]);
	snprintf(what_t, sizeof(what_t), "%s [interp]", what);
	ok &= check_target(kc, r, ctx, m, interp, what_t, got_interp, &ngot_interp, &ran_interp);
	if (ran_emu && ran_interp)
		ok &= compare_targets(what, r, got_emu, got_interp);
	snprintf(what_t, sizeof(what_t), "%s [%s]", what, text);
	ok &= check_target_text(kc, r, ctx, m, drawn, what_t, got_drawn, &ngot_drawn, &ran,
		&text_of[1]);
#ifdef TCOMP_HAVE_NVRTC
	for (int pass = 0; pass < 2; pass++) { /* NVRTC compiles both mappings' text */
		char name[96], *image = NULL, *msg;
		size_t size = 0;
		tc_diags d;
		tc_buf b;
		if (!text_of[pass])
			continue; /* its failure is printed */
		snprintf(name, sizeof(name), "%s.cu", kc->entry);
		tc_diags_init(&d, NULL);
		if (tc_cg_nvrtc_compile(text_of[pass], name, pass ? "sm_80" : "sm_90", 1, &image,
			    &size, NULL, &d) < 0 || !image || !size) {
			tc_buf_init(&b);
			tc_diags_render(&d, 1u << TC_SEV_ERROR, &b);
			msg = tc_buf_take(&b);
			print_error("%s [NVRTC, %s, %s mapping]: the CUDA text does not compile:\n%s\n",
				what, pass ? "sm_80" : "sm_90", pass ? opts : "default", msg ? msg : "");
			tc_free(msg);
			ok = 0;
		}
		tc_free(image);
		tc_diags_clear(&d);
	}
#endif
done:
	free(text_of[0]);
	free(text_of[1]);
	for (int i = 0; i < ngot_emu; i++)
		tu_tensor_fini(&got_emu[i]);
	for (int i = 0; i < ngot_interp; i++)
		tu_tensor_fini(&got_interp[i]);
	for (int i = 0; i < ngot_drawn; i++)
		tu_tensor_fini(&got_drawn[i]);
	tc_options_free(emu);
	tc_options_free(interp);
	tc_options_free(drawn);
	return ok;
}

static int check_shape_set(const kernel_case *kc, int set)
{
	const int64_t *sizes = kc->sizes[set];
	char what[256], what_t[544], sz[96], path[512];
	format_sizes(sz, sizeof(sz), sizes);
	snprintf(what, sizeof(what), "%s sizes %s", kc->name, sz);
	/* the checkout's tests/corpus; TC_SOURCE_DIR in the environment names
	 * another (bench/gpu.sh runs a binary built elsewhere) */
	snprintf(path, sizeof(path), "%s/tests/corpus/%s.tc",
		getenv("TC_SOURCE_DIR") && *getenv("TC_SOURCE_DIR") ? getenv("TC_SOURCE_DIR")
								    : TC_SOURCE_DIR, kc->file);

	run r;
	memset(&r, 0, sizeof(r));
	r.rng = tu_seed(kc->name, (uint64_t)set);
	kc->build(&r, sizes);

	int ok = 0;
	tu_tensor got_cpu[MAX_TENSORS], got_interp[MAX_TENSORS];
	int ngot_cpu = 0, ngot_interp = 0, ran_cpu = 0, ran_interp = 0;
	tc_options *interp = tc_options_new();
	tc_module *m = NULL;
	tc_context *ctx = tc_context_new();
	if (!ctx || !interp) {
		print_error("%s: tc_context_new or tc_options_new failed\n", what);
		goto done;
	}
	if (tc_options_set(interp, "target", "interp", ctx) != 0) {
		print_error("%s: tc_options_set(target=interp) failed:\n%s\n", what,
			tc_context_error(ctx));
		goto done;
	}
	m = tc_module_load(ctx, path);
	if (!m) {
		print_error("%s: tc_module_load(%s) failed:\n%s\n", what, path,
			tc_context_error(ctx));
		goto done;
	}
	if (cuda_mode) {
		ok = gpu_mode ? check_gpu(kc, &r, ctx, m, what) : check_cuda(kc, &r, ctx, m, what);
		goto done;
	}
	snprintf(what_t, sizeof(what_t), "%s [cpu]", what);
	int cpu_ok = check_target(kc, &r, ctx, m, NULL, what_t, got_cpu, &ngot_cpu, &ran_cpu);
	snprintf(what_t, sizeof(what_t), "%s [interp]", what);
	int interp_ok = check_target(kc, &r, ctx, m, interp, what_t, got_interp, &ngot_interp,
		&ran_interp);
	ok = cpu_ok && interp_ok;
	/* Where both ran (even if one missed the reference), say whether they
	 * agree with each other. */
	if (ran_cpu && ran_interp)
		ok &= compare_targets(what, &r, got_cpu, got_interp);
	snprintf(what_t, sizeof(what_t), "%s [cli]", what);
	if (ok)
		ok = check_via_cli(kc, &r, m, path, what_t);
	if (ok) { /* a drawn option combination, against the C loops */
		tu_tensor got_drawn[MAX_TENSORS];
		int ngot_drawn = 0, ran_drawn = 0;
		char opts[256];
		tc_options *o = tc_options_new();
		draw_options(&r.rng, opts, sizeof(opts));
		snprintf(what_t, sizeof(what_t), "%s [cpu, %s]", what, opts);
		if (!o || tc_options_parse(o, opts, ctx) != 0) {
			print_error("%s: tc_options_parse failed:\n%s\n", what_t, tc_context_error(ctx));
			ok = 0;
		} else {
			ok = check_target(kc, &r, ctx, m, o, what_t, got_drawn, &ngot_drawn,
				&ran_drawn);
		}
		for (int i = 0; i < ngot_drawn; i++)
			tu_tensor_fini(&got_drawn[i]);
		tc_options_free(o);
	}

done:
	for (int i = 0; i < ngot_cpu; i++)
		tu_tensor_fini(&got_cpu[i]);
	for (int i = 0; i < ngot_interp; i++)
		tu_tensor_fini(&got_interp[i]);
	for (int i = 0; i < r.nin; i++)
		tu_tensor_fini(&r.in[i]);
	for (int i = 0; i < r.nout; i++) {
		tu_tensor_fini(&r.want[i]);
		if (r.has_init[i])
			tu_tensor_fini(&r.init[i]);
	}
	tc_module_free(m);
	tc_options_free(interp);
	tc_context_free(ctx);
	return ok;
}

static void test_kernel(void **state)
{
	const kernel_case *kc = *state;
	int failures = 0;
	for (int set = 0; set < MAX_SETS && kc->sizes[set][0] != 0; set++)
		failures += !check_shape_set(kc, set);
	if (failures)
		fail_msg("%s: %d shape set(s) failed", kc->name, failures);
}

int main(int argc, char **argv)
{
	static struct CMUnitTest tests[NCASES];
	gpu_mode = argc > 1 && !strcmp(argv[1], "gpu");
	cuda_mode = gpu_mode || (argc > 1 && !strcmp(argv[1], "cuda"));
	for (int i = 0; i < NCASES; i++) {
		tests[i].name = cases[i].name;
		tests[i].test_func = test_kernel;
		tests[i].setup_func = NULL;
		tests[i].teardown_func = NULL;
		tests[i].initial_state = (void *)&cases[i];
	}
	const char *filter = getenv("TC_CORPUS_FILTER");
	if (filter && *filter)
		cmocka_set_test_filter(filter);
	return cmocka_run_group_tests_name(gpu_mode ? "corpus on a GPU" : cuda_mode
		? "corpus on the CUDA code" : "corpus", tests, NULL, NULL);
}
