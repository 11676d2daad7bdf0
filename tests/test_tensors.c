/* Tensors at the API boundary: zero-size dimensions, strided (non-compact)
 * inputs and outputs, overlapping outputs, and size products that overflow.
 *
 * Every kernel runs on both backends (cpu and interp) on fresh seeded random
 * data, outputs poisoned first (NaN), and is compared with plain C loops
 * written here, which read the operands through their strides
 * independently of the library's copies.  The command (tcomp run, bench)
 * is run as a separate process for the same cases. */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tcomp.h"
#include "autotune/tune.h"
#include "npy.h"
#include "tests/testutil.h"

static const char source[] =
	"def matmul(float(M,K) A, float(K,N) B) -> (C) {\n"
	"    C(i,j) +=! A(i,k) * B(k,j)\n"
	"}\n"
	"def add(float(M,N) X, float(M,N) Y) -> (O) {\n"
	"    O(i,j) = X(i,j) + 2.0 * Y(i,j)\n"
	"}\n"
	"def reds(float(M,K) A, int32(M,K) I) -> (S, P, MN, MX, IMN) {\n"
	"    S(i) +=! A(i,k)\n"
	"    P(i) *=! A(i,k)\n"
	"    MN(i) min=! A(i,k)\n"
	"    MX(i) max=! A(i,k)\n"
	"    IMN(i) min=! I(i,k)\n"
	"}\n"
	"def first(float(N) A, float(M) B) -> (O) {\n"
	"    O(i) = A(i) + B(0)\n"
	"}\n"
	"def diff(float(N) A) -> (O) {\n"
	"    O(i) = A(i + 1) - A(i)\n"
	"}\n"
	"def big(float(N) A) -> (O) {\n"
	"    O(i,j,k,l) = A(i) + A(j) + A(k) + A(l)\n"
	"}\n"
	"def sum4(float(A,B,C,D) X) -> (O) {\n"
	"    O(i) +=! X(i,j,k,l)\n"
	"}\n"
	"def scale3(float(P,Q,R) X) -> (O) {\n"
	"    O(i,j,k) = X(i,j,k) * 3.0\n"
	"}\n";

static const char *const targets[] = {"cpu", "interp"};

typedef struct fixture {
	tc_context *ctx;
	tc_module *m;
	tc_options *opt[2]; /* target=cpu, target=interp */
} fixture;

static int setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	int t;
	f->ctx = tc_context_new();
	assert_non_null(f->ctx);
	f->m = tc_module_parse(f->ctx, source, "tensors.tc");
	if (!f->m)
		fail_msg("source does not parse:\n%s", tc_context_error(f->ctx));
	for (t = 0; t < 2; t++) {
		f->opt[t] = tc_options_new();
		assert_int_equal(tc_options_set(f->opt[t], "target", targets[t], f->ctx), 0);
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fixture *f = *state;
	tc_options_free(f->opt[0]);
	tc_options_free(f->opt[1]);
	tc_module_free(f->m);
	tc_context_free(f->ctx);
	free(f);
	return 0;
}

/* ---- views: a DLTensor over a buffer of its own, with any strides ---- */

typedef struct view {
	DLTensor dl;
	int64_t shape[8], strides[8];
	float *buf;   /* owned, nbuf floats */
	int64_t nbuf;
	int64_t base; /* element 0 is buf[base] */
} view;

/* A float32 view of rank nd with strides st (NULL: compact) over a fresh
 * buffer of nbuf floats (poisoned with NaN), element 0 at buf[base]. */
static void view_init(view *v, int nd, const int64_t *shape, const int64_t *st, int64_t nbuf,
	int64_t base)
{
	int d;
	memset(v, 0, sizeof(*v));
	for (d = 0; d < nd; d++) {
		v->shape[d] = shape[d];
		v->strides[d] = st ? st[d] : 0;
	}
	v->nbuf = nbuf;
	v->base = base;
	v->buf = malloc((size_t)(nbuf > 0 ? nbuf : 1) * sizeof(float));
	assert_non_null(v->buf);
	for (d = 0; d < nbuf; d++)
		v->buf[d] = NAN;
	v->dl.data = v->buf;
	v->dl.byte_offset = (uint64_t)base * sizeof(float);
	v->dl.device.device_type = kDLCPU;
	v->dl.ndim = nd;
	v->dl.dtype = (DLDataType){kDLFloat, 32, 1};
	v->dl.shape = v->shape;
	v->dl.strides = st ? v->strides : NULL;
}

static void view_fini(view *v)
{
	free(v->buf);
}

/* Element (i, j) of a rank-2 view through its strides (compact if NULL). */
static float *at2(view *v, int64_t i, int64_t j)
{
	int64_t s0 = v->dl.strides ? v->strides[0] : v->shape[1];
	int64_t s1 = v->dl.strides ? v->strides[1] : 1;
	return &v->buf[v->base + i * s0 + j * s1];
}

/* Random values in [-1, 1) for every element the view reaches. */
static void view_fill(view *v, uint64_t *rng)
{
	int64_t i, j;
	for (i = 0; i < v->shape[0]; i++)
		for (j = 0; j < v->shape[1]; j++)
			*at2(v, i, j) = (float)(2 * tu_rand_unit(rng) - 1);
}

/* C = A B through the views' strides, in double. */
static void check_matmul(view *A, view *B, view *C, const char *what)
{
	int64_t i, j, k;
	for (i = 0; i < C->shape[0]; i++)
		for (j = 0; j < C->shape[1]; j++) {
			double s = 0;
			for (k = 0; k < A->shape[1]; k++)
				s += (double)*at2(A, i, k) * *at2(B, k, j);
			float got = *at2(C, i, j);
			if (!(fabs(got - s) <= 1e-5 * (1 + fabs(s))))
				fail_msg("%s: C(%lld,%lld) is %g, expected %g", what, (long long)i,
					(long long)j, got, s);
		}
}

static tc_kernel *compile(fixture *f, const char *entry, const DLTensor *const *in, int n,
	int target)
{
	tc_kernel *k = tc_compile(f->m, entry, in, n, f->opt[target]);
	if (!k)
		fail_msg("%s on %s does not compile:\n%s", entry, targets[target],
			tc_context_error(f->ctx));
	return k;
}

static void run_ok(fixture *f, tc_kernel *k, const DLTensor *const *in, int n_in,
	DLTensor *const *out, int n_out, const char *what)
{
	if (tc_kernel_run(k, in, n_in, out, n_out) != 0)
		fail_msg("%s: run failed:\n%s", what, tc_context_error(f->ctx));
}

/* ---- zero-size dimensions ---- */

/* A reduction over an empty range gives the operator's identity: K = 0
 * makes C = A B all zeros (C poisoned first), on both backends. */
static void test_zero_size_reduction_range_gives_identity(void **state)
{
	fixture *f = *state;
	int t;
	for (t = 0; t < 2; t++) {
		view A, B, C;
		view_init(&A, 2, (int64_t[]){3, 0}, NULL, 0, 0);
		view_init(&B, 2, (int64_t[]){0, 4}, NULL, 0, 0);
		view_init(&C, 2, (int64_t[]){3, 4}, NULL, 12, 0);
		A.dl.data = NULL; /* no elements: no data needed (PyTorch gives NULL) */
		const DLTensor *in[2] = {&A.dl, &B.dl};
		DLTensor *out[1] = {&C.dl};
		tc_kernel *k = compile(f, "matmul", in, 2, t);
		run_ok(f, k, in, 2, out, 1, targets[t]);
		for (int i = 0; i < 12; i++)
			if (C.buf[i] != 0.0f || signbit(C.buf[i]))
				fail_msg("%s: C[%d] is %g, expected +0", targets[t], i, C.buf[i]);
		tc_kernel_free(k);
		view_fini(&A);
		view_fini(&B);
		view_fini(&C);
	}
}

/* Every reduction operator's identity over an empty range, as docs/language.md
 * 5.2 lists them: +=! 0, *=! 1, min=! the largest finite value, max=! the
 * lowest, for int32 min=! INT32_MAX. */
static void test_zero_size_reduction_identities(void **state)
{
	fixture *f = *state;
	int t, i;
	for (t = 0; t < 2; t++) {
		tu_tensor A, I, S, P, MN, MX, IMN;
		tu_tensor_init(&A, TU_F32, (int64_t[]){5, 0}, 2);
		tu_tensor_init(&I, TU_I32, (int64_t[]){5, 0}, 2);
		tu_tensor *outs[5] = {&S, &P, &MN, &MX, &IMN};
		for (i = 0; i < 5; i++) {
			tu_tensor_init(outs[i], i == 4 ? TU_I32 : TU_F32, (int64_t[]){5}, 1);
			tu_poison(outs[i]);
		}
		const DLTensor *in[2] = {&A.dl, &I.dl};
		DLTensor *out[5] = {&S.dl, &P.dl, &MN.dl, &MX.dl, &IMN.dl};
		tc_kernel *k = compile(f, "reds", in, 2, t);
		run_ok(f, k, in, 2, out, 5, targets[t]);
		for (i = 0; i < 5; i++) {
			assert_true(((float *)S.data)[i] == 0.0f);
			assert_true(((float *)P.data)[i] == 1.0f);
			assert_true(((float *)MN.data)[i] == FLT_MAX);
			assert_true(((float *)MX.data)[i] == -FLT_MAX);
			assert_int_equal(((int32_t *)IMN.data)[i], INT32_MAX);
		}
		tc_kernel_free(k);
		tu_tensor_fini(&A);
		tu_tensor_fini(&I);
		for (i = 0; i < 5; i++)
			tu_tensor_fini(outs[i]);
	}
}

/* An output with a zero extent is empty: M = 0 gives C of 0 x N, which a
 * run with NULL data pointers fills (nothing); N = 0 as well. */
static void test_zero_size_outputs_are_empty(void **state)
{
	fixture *f = *state;
	int t, c;
	static const int64_t cases[2][3] = {{0, 3, 4}, {3, 4, 0}}; /* M, K, N */
	for (t = 0; t < 2; t++)
		for (c = 0; c < 2; c++) {
			int64_t M = cases[c][0], K = cases[c][1], N = cases[c][2];
			uint64_t rng = tu_seed("zero-out", (uint64_t)(2 * t + c));
			view A, B, C;
			DLDataType dt;
			int nd;
			int64_t shape[2];
			view_init(&A, 2, (int64_t[]){M, K}, NULL, M * K, 0);
			view_init(&B, 2, (int64_t[]){K, N}, NULL, K * N, 0);
			view_init(&C, 2, (int64_t[]){M, N}, NULL, 0, 0);
			view_fill(&A, &rng);
			view_fill(&B, &rng);
			C.dl.data = NULL;
			const DLTensor *in[2] = {&A.dl, &B.dl};
			DLTensor *out[1] = {&C.dl};
			tc_kernel *k = compile(f, "matmul", in, 2, t);
			assert_int_equal(tc_kernel_output_shape(k, 0, &dt, &nd, shape), 0);
			assert_int_equal(nd, 2);
			assert_int_equal(shape[0], M);
			assert_int_equal(shape[1], N);
			run_ok(f, k, in, 2, out, 1, targets[t]);
			tc_kernel_free(k);
			view_fini(&A);
			view_fini(&B);
			view_fini(&C);
		}
}

/* A statement that runs but reads a tensor without elements is refused at
 * tc_compile, located at the read: O(i) = A(i) + B(0) with B empty and A
 * not.  With A empty too, nothing runs and the output is empty. */
static void test_read_of_empty_tensor_is_a_located_error(void **state)
{
	fixture *f = *state;
	int t;
	for (t = 0; t < 2; t++) {
		tu_tensor A, B, E, O;
		tu_tensor_init(&A, TU_F32, (int64_t[]){3}, 1);
		tu_tensor_init(&B, TU_F32, (int64_t[]){0}, 1);
		tu_tensor_init(&E, TU_F32, (int64_t[]){0}, 1);
		tu_tensor_init(&O, TU_F32, (int64_t[]){0}, 1);
		const DLTensor *in[2] = {&A.dl, &B.dl};
		assert_null(tc_compile(f->m, "first", in, 2, f->opt[t]));
		assert_true(tu_contains(tc_context_error(f->ctx), "tensors.tc:15:19:"));
		assert_true(tu_contains(tc_context_error(f->ctx), "'B' has no elements"));
		const DLTensor *in2[2] = {&E.dl, &B.dl};
		DLTensor *out[1] = {&O.dl};
		tc_kernel *k = compile(f, "first", in2, 2, t);
		run_ok(f, k, in2, 2, out, 1, targets[t]);
		tc_kernel_free(k);
		tu_tensor_fini(&A);
		tu_tensor_fini(&B);
		tu_tensor_fini(&E);
		tu_tensor_fini(&O);
	}
}

/* The size conditions of range inference (docs/language.md 9.7) still hold
 * with sizes of 0: diff's range of i must be non-empty (N = 1 is refused)
 * and N = 0 is refused too (O would have extent -1). */
static void test_zero_size_range_conditions_still_checked(void **state)
{
	fixture *f = *state;
	int t;
	for (t = 0; t < 2; t++) {
		tu_tensor A1, A0;
		tu_tensor_init(&A1, TU_F32, (int64_t[]){1}, 1);
		tu_tensor_init(&A0, TU_F32, (int64_t[]){0}, 1);
		const DLTensor *in1[1] = {&A1.dl}, *in0[1] = {&A0.dl};
		assert_null(tc_compile(f->m, "diff", in1, 1, f->opt[t]));
		assert_true(tu_contains(tc_context_error(f->ctx), "the range of 'i' is empty"));
		assert_true(tu_contains(tc_context_error(f->ctx), "(here N = 1)"));
		assert_null(tc_compile(f->m, "diff", in0, 1, f->opt[t]));
		assert_true(tu_contains(tc_context_error(f->ctx), "(here N = 0)"));
		tu_tensor_fini(&A1);
		tu_tensor_fini(&A0);
	}
}

/* ---- strided inputs and outputs ---- */

enum { M = 37, K = 29, N = 23, PAD = 5 };

/* matmul with A a transposed view (a K x M buffer read with strides
 * {1, M}), B with padded rows (stride N + PAD), each against compact C;
 * then C itself transposed, padded (the padding left untouched), and
 * with rows in reverse order (a negative stride). */
static void test_strided_matmul_operands(void **state)
{
	fixture *f = *state;
	int t, c;
	for (t = 0; t < 2; t++)
		for (c = 0; c < 6; c++) {
			uint64_t rng = tu_seed("strided-mm", (uint64_t)(10 * t + c));
			view A, B, C;
			char what[64];
			snprintf(what, sizeof(what), "%s case %d", targets[t], c);
			if (c == 1 || c == 5)
				view_init(&A, 2, (int64_t[]){M, K}, (int64_t[]){1, M}, M * K, 0);
			else
				view_init(&A, 2, (int64_t[]){M, K}, NULL, M * K, 0);
			if (c == 2 || c == 5)
				view_init(&B, 2, (int64_t[]){K, N}, (int64_t[]){N + PAD, 1},
					K * (N + PAD), 0);
			else
				view_init(&B, 2, (int64_t[]){K, N}, NULL, K * N, 0);
			if (c == 3)
				view_init(&C, 2, (int64_t[]){M, N}, (int64_t[]){1, M}, M * N, 0);
			else if (c == 4)
				view_init(&C, 2, (int64_t[]){M, N}, (int64_t[]){N + PAD, 1},
					M * (N + PAD), 0);
			else if (c == 5) /* last row first */
				view_init(&C, 2, (int64_t[]){M, N}, (int64_t[]){-N, 1}, M * N,
					(M - 1) * N);
			else
				view_init(&C, 2, (int64_t[]){M, N}, NULL, M * N, 0);
			view_fill(&A, &rng);
			view_fill(&B, &rng);
			if (c == 4) /* the padding: a value the kernel must not write */
				for (int64_t i = 0; i < C.nbuf; i++)
					C.buf[i] = 1234.5f;
			const DLTensor *in[2] = {&A.dl, &B.dl};
			DLTensor *out[1] = {&C.dl};
			tc_kernel *k = compile(f, "matmul", in, 2, t);
			run_ok(f, k, in, 2, out, 1, what);
			check_matmul(&A, &B, &C, what);
			if (c == 4)
				for (int64_t i = 0; i < M; i++)
					for (int64_t j = N; j < N + PAD; j++)
						assert_true(C.buf[i * (N + PAD) + j] == 1234.5f);
			tc_kernel_free(k);
			view_fini(&A);
			view_fini(&B);
			view_fini(&C);
		}
}

/* Broadcast (stride 0) and reversed (negative stride) inputs: Y a row
 * broadcast over M rows (strides {0, 1}), X with its columns reversed. */
static void test_broadcast_and_reversed_inputs(void **state)
{
	fixture *f = *state;
	int t;
	for (t = 0; t < 2; t++) {
		uint64_t rng = tu_seed("broadcast", (uint64_t)t);
		view X, Y, O;
		view_init(&X, 2, (int64_t[]){M, N}, (int64_t[]){N, -1}, M * N, N - 1);
		view_init(&Y, 2, (int64_t[]){M, N}, (int64_t[]){0, 1}, N, 0);
		view_init(&O, 2, (int64_t[]){M, N}, NULL, M * N, 0);
		view_fill(&X, &rng);
		view_fill(&Y, &rng); /* the one row */
		const DLTensor *in[2] = {&X.dl, &Y.dl};
		DLTensor *out[1] = {&O.dl};
		tc_kernel *k = compile(f, "add", in, 2, t);
		run_ok(f, k, in, 2, out, 1, targets[t]);
		for (int64_t i = 0; i < M; i++)
			for (int64_t j = 0; j < N; j++) {
				float want = X.buf[i * N + (N - 1 - j)] + 2.0f * Y.buf[j];
				assert_true(*at2(&O, i, j) == want);
			}
		tc_kernel_free(k);
		view_fini(&X);
		view_fini(&Y);
		view_fini(&O);
	}
}

/* Rank 3: X a permuted view (its buffer holds X by (k, i, j): strides
 * {Q, 1, P Q}), O with padded rows in both outer dimensions; the padding is
 * left untouched. */
static void test_rank3_permuted_and_padded(void **state)
{
	fixture *f = *state;
	enum { P = 5, Q = 33, R = 7 };
	int t;
	for (t = 0; t < 2; t++) {
		uint64_t rng = tu_seed("rank3", (uint64_t)t);
		int64_t xs[3] = {Q, 1, P * Q}, os[3] = {(R + 2) * (Q + 1), R + 2, 1};
		int64_t nbo = P * (R + 2) * (Q + 1);
		view X, O;
		view_init(&X, 3, (int64_t[]){P, Q, R}, xs, P * Q * R, 0);
		view_init(&O, 3, (int64_t[]){P, Q, R}, os, nbo, 0);
		for (int64_t i = 0; i < X.nbuf; i++)
			X.buf[i] = (float)(2 * tu_rand_unit(&rng) - 1);
		for (int64_t i = 0; i < nbo; i++)
			O.buf[i] = 1234.5f;
		const DLTensor *in[1] = {&X.dl};
		DLTensor *out[1] = {&O.dl};
		tc_kernel *k = compile(f, "scale3", in, 1, t);
		run_ok(f, k, in, 1, out, 1, targets[t]);
		int64_t written = 0;
		for (int64_t i = 0; i < P; i++)
			for (int64_t j = 0; j < Q; j++)
				for (int64_t l = 0; l < R; l++) {
					float x = X.buf[i * xs[0] + j * xs[1] + l * xs[2]];
					float o = O.buf[i * os[0] + j * os[1] + l * os[2]];
					if (o != x * 3.0f)
						fail_msg("%s: O(%lld,%lld,%lld) is %g, expected %g", targets[t],
							(long long)i, (long long)j, (long long)l, o, x * 3.0f);
					written++;
				}
		for (int64_t i = 0; i < nbo; i++) /* everything else untouched */
			written -= O.buf[i] != 1234.5f;
		assert_int_equal(written, 0);
		tc_kernel_free(k);
		view_fini(&X);
		view_fini(&O);
	}
}

/* Kernels are compiled for compact tensors whatever the layout of the
 * tensors given to tc_compile, and tc_kernel_run copies strided ones: one
 * kernel, compiled with a transposed A, runs compact, strided and compact
 * operands in turn, each right. */
static void test_one_kernel_serves_every_layout(void **state)
{
	fixture *f = *state;
	int t, r;
	for (t = 0; t < 2; t++) {
		view At, Ac, B, C;
		uint64_t rng = tu_seed("reuse", (uint64_t)t);
		view_init(&At, 2, (int64_t[]){M, K}, (int64_t[]){1, M}, M * K, 0);
		view_init(&Ac, 2, (int64_t[]){M, K}, NULL, M * K, 0);
		view_init(&B, 2, (int64_t[]){K, N}, NULL, K * N, 0);
		view_init(&C, 2, (int64_t[]){M, N}, NULL, M * N, 0);
		view_fill(&At, &rng);
		view_fill(&Ac, &rng);
		view_fill(&B, &rng);
		const DLTensor *ins[2] = {&At.dl, &B.dl}, *inc[2] = {&Ac.dl, &B.dl};
		DLTensor *out[1] = {&C.dl};
		tc_kernel *k = compile(f, "matmul", ins, 2, t);
		for (r = 0; r < 3; r++) {
			view *A = r == 1 ? &At : &Ac;
			for (int64_t i = 0; i < C.nbuf; i++)
				C.buf[i] = NAN;
			run_ok(f, k, r == 1 ? ins : inc, 2, out, 1, targets[t]);
			check_matmul(A, &B, &C, targets[t]);
		}
		tc_kernel_free(k);
		view_fini(&At);
		view_fini(&Ac);
		view_fini(&B);
		view_fini(&C);
	}
}

/* Outputs two of whose elements may share memory are refused before
 * anything runs: a stride of 0 on a dimension of extent M, and strides
 * that interleave ({1, 1}); so are outputs whose spans overlap an input's. */
static void test_overlapping_output_views_refused(void **state)
{
	fixture *f = *state;
	int t, c;
	for (t = 0; t < 2; t++) {
		view A, B, C;
		view_init(&A, 2, (int64_t[]){M, K}, NULL, M * K, 0);
		view_init(&B, 2, (int64_t[]){K, N}, NULL, K * N, 0);
		const DLTensor *in[2] = {&A.dl, &B.dl};
		tc_kernel *k = compile(f, "matmul", in, 2, t);
		for (c = 0; c < 2; c++) {
			view_init(&C, 2, (int64_t[]){M, N}, c ? (int64_t[]){1, 1} : (int64_t[]){0, 1},
				M * N, 0);
			C.buf[0] = 7.0f;
			DLTensor *out[1] = {&C.dl};
			assert_int_equal(tc_kernel_run(k, in, 2, out, 1), -1);
			assert_true(tu_contains(tc_context_error(f->ctx), "output 'C' overlaps itself"));
			assert_true(tu_contains(tc_context_error(f->ctx),
				c ? "has stride 1" : "dimension 0 has stride 0"));
			assert_true(C.buf[0] == 7.0f); /* nothing written */
			view_fini(&C);
		}
		/* C as a transposed view over A's buffer */
		view_init(&C, 2, (int64_t[]){M, N}, (int64_t[]){1, M}, 1, 0);
		C.dl.data = A.buf;
		DLTensor *out[1] = {&C.dl};
		assert_int_equal(tc_kernel_run(k, in, 2, out, 1), -1);
		assert_true(tu_contains(tc_context_error(f->ctx), "shares memory with input 'A'"));
		view_fini(&C);
		tc_kernel_free(k);
		view_fini(&A);
		view_fini(&B);
	}
}

/* Strides whose span does not fit in the address space are an error, not
 * a wild pointer. */
static void test_strides_beyond_the_address_space_refused(void **state)
{
	fixture *f = *state;
	view A, B, C;
	view_init(&A, 2, (int64_t[]){M, K}, (int64_t[]){INT64_MAX / 4, 1}, M * K, 0);
	view_init(&B, 2, (int64_t[]){K, N}, NULL, K * N, 0);
	view_init(&C, 2, (int64_t[]){M, N}, NULL, M * N, 0);
	const DLTensor *in[2] = {&A.dl, &B.dl};
	DLTensor *out[1] = {&C.dl};
	tc_kernel *k = compile(f, "matmul", in, 2, 0);
	assert_int_equal(tc_kernel_run(k, in, 2, out, 1), -1);
	assert_true(tu_contains(tc_context_error(f->ctx), "input 'A': its strides reach beyond"));
	tc_kernel_free(k);
	view_fini(&A);
	view_fini(&B);
	view_fini(&C);
}

/* ---- size products ---- */

/* An output of 65536^4 float32 elements (2^66 bytes) is refused by
 * tc_compile on both backends, located at the output; so is an input
 * described as 65536^4 (a shape-only DLTensor). */
static void test_size_products_overflow_refused(void **state)
{
	fixture *f = *state;
	int t;
	for (t = 0; t < 2; t++) {
		tu_tensor A;
		tu_tensor_init(&A, TU_F32, (int64_t[]){65536}, 1);
		const DLTensor *in[1] = {&A.dl};
		assert_null(tc_compile(f->m, "big", in, 1, f->opt[t]));
		assert_true(tu_contains(tc_context_error(f->ctx), "tensors.tc:20:25:"));
		assert_true(tu_contains(tc_context_error(f->ctx),
			"'O' would have 65536 x 65536 x 65536 x 65536 elements of 4 bytes"));
		tu_tensor_fini(&A);

		DLTensor X;
		int64_t xs[4] = {65536, 65536, 65536, 65536};
		memset(&X, 0, sizeof(X));
		X.device.device_type = kDLCPU;
		X.ndim = 4;
		X.shape = xs;
		X.dtype = (DLDataType){kDLFloat, 32, 1};
		const DLTensor *xin[1] = {&X};
		assert_null(tc_compile(f->m, "sum4", xin, 1, f->opt[t]));
		assert_true(tu_contains(tc_context_error(f->ctx), "'X' would have 65536 x"));
	}
}

/* The autotuner's tile space is a product of per-position size counts: a
 * 16-deep nest over extents of 2^31 - 1 (27 sizes a position) would
 * overflow int64; the positions that do not fit are dropped, and every
 * value of the space still prints as a tile list the option table takes. */
static void test_tune_space_product_does_not_overflow(void **state)
{
	tc_tune_shape sh = {16, INT32_MAX, 16, 2};
	tc_tune_space *sp = tc_tune_space_new(NULL, &sh);
	uint64_t rng = tu_seed("space", 0);
	int i, r;
	(void)state;
	assert_non_null(sp);
	for (i = 0; i < sp->n && strcmp(sp->d[i].name, "tile"); i++)
		;
	assert_true(i < sp->n);
	tc_tune_dim *d = &sp->d[i];
	assert_true(d->npos >= 1 && d->npos < 16);
	assert_true(d->ngen > 0 && d->count > d->ngen);
	for (r = 0; r < 100; r++) {
		int64_t v = d->nwords + (int64_t)(tu_rand_unit(&rng) * (double)d->ngen);
		tc_buf b;
		tc_options *o = tc_options_new();
		tc_buf_init(&b);
		tc_tune_space_value(sp, i, v < d->nwords + d->ngen ? v : d->nwords, &b);
		assert_non_null(b.s);
		assert_int_equal(tc_options_set(o, "tile", b.s, NULL), 0);
		tc_buf_free(&b);
		tc_options_free(o);
	}
	tc_tune_space_free(sp);
}

/* ---- the command ---- */

static char dir[256];
static char out_text[16384];

static const char *path(const char *name)
{
	static char buf[4][512];
	static int k;
	k = (k + 1) % 4;
	snprintf(buf[k], sizeof(buf[k]), "%s/%s", dir, name);
	return buf[k];
}

/* Run "tcomp ARGS" in dir; its exit status, its output in out_text. */
static int tcomp(const char *fmt, ...)
{
	char cmd[4096], args[2048];
	va_list ap;
	FILE *fp;
	size_t n;
	int st;
	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof(cmd), "cd %s && %s/tcomp %s > out.txt 2>&1",
		dir, TC_BINARY_DIR, args);
	st = system(cmd);
	fp = fopen(path("out.txt"), "rb");
	n = fp ? fread(out_text, 1, sizeof(out_text) - 1, fp) : 0;
	out_text[n] = 0;
	if (fp)
		fclose(fp);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int cli_setup(void **state)
{
	FILE *fp;
	if (setup(state) < 0)
		return -1;
	snprintf(dir, sizeof(dir), "%s/tmp-tensors-XXXXXX", TC_BINARY_DIR);
	if (!mkdtemp(dir))
		return -1;
	if (!(fp = fopen(path("t.tc"), "w")))
		return -1;
	fputs(source, fp);
	fclose(fp);
	return 0;
}

static int cli_teardown(void **state)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	teardown(state);
	return system(cmd) == 0 ? 0 : -1;
}

/* tcomp run on .npy files with a zero dimension, both targets: K = 0 gives
 * a C of zeros, M = 0 an empty C written as a 0 x 4 .npy. */
static void test_cli_run_zero_size(void **state)
{
	float a[12], b[12];
	uint64_t rng = tu_seed("cli", 0);
	char *err = NULL;
	tc_npy c;
	int t, i;
	(void)state;
	for (i = 0; i < 12; i++) {
		a[i] = (float)tu_rand_unit(&rng);
		b[i] = (float)tu_rand_unit(&rng);
	}
	assert_int_equal(tc_npy_write(path("a30.npy"), TC_T_F32, 2, (int64_t[]){3, 0}, a, &err), 0);
	assert_int_equal(tc_npy_write(path("b04.npy"), TC_T_F32, 2, (int64_t[]){0, 4}, b, &err), 0);
	assert_int_equal(tc_npy_write(path("a03.npy"), TC_T_F32, 2, (int64_t[]){0, 3}, a, &err), 0);
	assert_int_equal(tc_npy_write(path("b34.npy"), TC_T_F32, 2, (int64_t[]){3, 4}, b, &err), 0);
	for (t = 0; t < 2; t++) {
		if (tcomp("run t.tc -e matmul --in A=a30.npy --in B=b04.npy --out C=c.npy --target %s",
			    targets[t]))
			fail_msg("%s", out_text);
		assert_int_equal(tc_npy_read(path("c.npy"), &c, &err), 0);
		assert_int_equal(c.ndim, 2);
		assert_int_equal(c.shape[0], 3);
		assert_int_equal(c.shape[1], 4);
		for (i = 0; i < 12; i++)
			assert_true(((float *)c.data)[i] == 0.0f);
		tc_npy_free(&c);
		if (tcomp("run t.tc -e matmul --in A=a03.npy --in B=b34.npy --out C=c.npy --print "
			  "--target %s", targets[t]))
			fail_msg("%s", out_text);
		assert_true(tu_contains(out_text, "C: float32[0x4] -> c.npy"));
		assert_int_equal(tc_npy_read(path("c.npy"), &c, &err), 0);
		assert_int_equal(c.ndim, 2);
		assert_int_equal(c.shape[0], 0);
		assert_int_equal(c.shape[1], 4);
		tc_npy_free(&c);
	}
}

/* tcomp run and bench on a kernel whose output's size overflows: exit 1
 * with the located message, not a crash; bench times empty tensors. */
static void test_cli_size_overflow_and_bench_zero(void **state)
{
	static float a[65536];
	char *err = NULL;
	int t;
	(void)state;
	assert_int_equal(tc_npy_write(path("a.npy"), TC_T_F32, 1, (int64_t[]){65536}, a, &err), 0);
	for (t = 0; t < 2; t++) {
		assert_int_equal(tcomp("run t.tc -e big --in A=a.npy --target %s", targets[t]), 1);
		assert_true(tu_contains(out_text, "t.tc:20:25: error: for these input sizes, 'O' would "
						  "have 65536 x 65536 x 65536 x 65536 elements"));
		assert_int_equal(
			tcomp("bench t.tc -e big --shape A=65536 --runs 1 --target %s", targets[t]), 1);
		assert_true(tu_contains(out_text, "'O' would have 65536 x"));
		if (tcomp("bench t.tc -e matmul --shape A=3x0 --shape B=0x4 --runs 2 --warmup 0 "
			  "--min-time 0 --target %s", targets[t]))
			fail_msg("%s", out_text);
		assert_true(tu_contains(out_text, "kernel   matmul (A=3x0 B=0x4)"));
	}
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
#define TC(f) cmocka_unit_test_setup_teardown(f, cli_setup, cli_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_zero_size_reduction_range_gives_identity),
		T(test_zero_size_reduction_identities),
		T(test_zero_size_outputs_are_empty),
		T(test_read_of_empty_tensor_is_a_located_error),
		T(test_zero_size_range_conditions_still_checked),
		T(test_strided_matmul_operands),
		T(test_broadcast_and_reversed_inputs),
		T(test_rank3_permuted_and_padded),
		T(test_one_kernel_serves_every_layout),
		T(test_overlapping_output_views_refused),
		T(test_strides_beyond_the_address_space_refused),
		T(test_size_products_overflow_refused),
		T(test_tune_space_product_does_not_overflow),
		TC(test_cli_run_zero_size),
		TC(test_cli_size_overflow_and_bench_zero),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
