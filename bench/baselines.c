/* The C baselines of bench/compare.py: a naive loop nest and, where the
 * benchmark is GEMM-shaped, an OpenBLAS version of every benchmark, timed on
 * buffers allocated and faulted in once.  This file also holds the table of
 * benchmarks (names, tcomp def, tensors and shapes) that compare.py reads
 * with `baselines list`, so the shapes live in one place.
 *
 * Built by compare.py:
 *   gcc -O3 -march=native [-DHAVE_OPENBLAS -I.../openblas-pthread] baselines.c
 *       -o baselines -lpthread -lm [-lopenblas]
 *
 *   baselines list                        one JSON object per benchmark
 *   baselines info                        OpenBLAS build and core (JSON)
 *   baselines NAME inputs 1 0 DIR         write the inputs as DIR/in_<T>.npy
 *                                         (float32; int64 for class labels)
 *   baselines NAME IMPL THREADS REPS [DIR]
 *       IMPL naive|openblas; time REPS runs after a warm-up and print
 *       {"median_ms":..,"min_ms":..,"runs":..,"warmup":..}; with DIR also
 *       write each output of the last run to DIR/out_<IMPL>_<T>.npy
 *   baselines cmp REF.npy OUT.npy        compare two float32 .npy files (JSON)
 *
 * Timing: one warm-up run; when it took at least 1 s it is kept as the first
 * sample (its buffers are faulted in already, so a warm-up would only cost
 * time); otherwise warm-up runs continue to 3 runs or 0.2 s.  Then at least
 * REPS runs and at least MIN_TIME seconds of them, as `tcomp bench --runs
 * --min-time` does, but no more once the timed runs passed MAX_TIME, and
 * no more than SLOW_REPS when the first run took SLOW_RUN seconds or more
 * (the naive loops of the big shapes, a second or more a run, would
 * otherwise take most of a compare.py run).  Exit status 0 ok,
 * 3 when the implementation does not exist (the reason on stdout as
 * {"error":...}), 1 on bad arguments or I/O errors.
 *
 * Threads: the naive loops split their outermost loop into THREADS equal
 * chunks over a persistent pthread pool.  OpenBLAS runs with
 * openblas_set_num_threads(THREADS) for the single big GEMMs (sgemm, the
 * transposed one, the FC layers); for the loops of small GEMMs (batch
 * matmul, Kronecker, conv2d by im2col per image) OpenBLAS runs on one thread
 * and the pool splits the loop, each thread calling sgemm on its own part.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef HAVE_OPENBLAS
#include <cblas.h>
/* OpenBLAS's cblas.h includes <complex.h>, whose macro I (the imaginary
 * unit) would replace the input-size variables named I below. */
#undef I
#endif

#define MAX_THREADS 64
#define MAX_TENSORS 8 /* inputs of one benchmark */
#define MAX_OUTPUTS 4
#define MAX_RANK 5
#define MIN_TIME 0.2 /* seconds: time at least REPS runs and at least this long */
#define MAX_TIME 3.0 /* seconds: but stop after the run that passes this */
#define SLOW_RUN 0.25 /* seconds: a first run this long ... */
#define SLOW_REPS 2   /* ... caps the timed runs at this many */

/* A tensor of the table: its name in the tcomp def, rank and extents.
 * float32 uniform in [-1, 1) times scale (1 when 0; weights get
 * 1/sqrt(fan-in), as layers are initialised, so that logits stay in a
 * range where softmax is not one-hot), unless labels > 0: then int64 class
 * labels in [0, labels). */
struct tspec {
	const char *name;
	int nd;
	long d[MAX_RANK];
	long labels;
	float scale;
};

enum kind {
	K_SGEMM,     /* C = A * B */
	K_SGEMM_NT,  /* C = A * B^T */
	K_BMM,       /* Z_b = X_b * Y_b */
	K_CONV2D,    /* valid 3-D correlation over (c, kh, kw) plus a bias */
	K_SOFTMAX,   /* row softmax */
	K_LAYERNORM, /* row layer norm with scale and shift */
	K_FCRELU,    /* max(In * W^T + bias, 0) */
	K_KRON3,     /* three chained contractions with W0, W1, W2 */
	K_MLP_FWD,   /* fc + bias + ReLU, fc + bias, softmax: (Hd, P) */
	K_MLP_BWD,   /* the MLP's backward from the cross-entropy loss: (dW1, dB1, dW2, dB2) */
	K_SGD,       /* W - 0.01 dW for four parameters */
	K_WGRAD,     /* dW = X^T dH */
	K_BIASGRAD,  /* column sums */
	K_GCONV,     /* group convolution plus a bias */
	K_DWCONV,    /* depthwise convolution plus a bias */
	K_ATTN,      /* softmax(Q K^T / sqrt(D)) V per batch element */
	K_RMSNORM,   /* Hs = X + R, Y = RMSNorm(Hs) * G: (Hs, Y) */
	K_LNBWD,     /* layer norm backward: (dX, dG, dBt) */
};

/* One benchmark: a name for the command line, the tcomp def, whether
 * --quick keeps it, the inputs in the def's parameter order and the
 * outputs in the def's order. */
struct bench {
	const char *name;
	enum kind kind;
	const char *entry;
	int quick;
	int nin;
	struct tspec in[MAX_TENSORS];
	int nout;
	struct tspec out[MAX_OUTPUTS];
};

/* Tensor specs of rank 0 to 5 (float32) and int64 labels of rank 1. */
#define T1(n, a) {n, 1, {a}, 0, 0}
#define T2(n, a, b) {n, 2, {a, b}, 0, 0}
#define T3(n, a, b, c) {n, 3, {a, b, c}, 0, 0}
#define T4(n, a, b, c, d) {n, 4, {a, b, c, d}, 0, 0}
#define T5(n, a, b, c, d, e) {n, 5, {a, b, c, d, e}, 0, 0}
#define LABELS(n, a, classes) {n, 1, {a}, classes, 0}
#define WEIGHTS(n, fan_in, fan_out, scale) {n, 2, {fan_in, fan_out}, 0, scale}

/* The MLP of the training-step benchmarks: batch B, 784 -> 128 -> 10. */
#define MLP_B 128
#define MLP_I 784
#define MLP_H 128
#define MLP_K 10
#define MLP_S1 0.03571429f /* 1/sqrt(MLP_I) */
#define MLP_S2 0.08838835f /* 1/sqrt(MLP_H) */

static const struct bench benches[] = {
	{"sgemm_256", K_SGEMM, "matmul", 1, 2, {T2("A", 256, 256), T2("B", 256, 256)},
	 1, {T2("C", 256, 256)}},
	{"sgemm_512", K_SGEMM, "matmul", 1, 2, {T2("A", 512, 512), T2("B", 512, 512)},
	 1, {T2("C", 512, 512)}},
	{"sgemm_1024", K_SGEMM, "matmul", 1, 2, {T2("A", 1024, 1024), T2("B", 1024, 1024)},
	 1, {T2("C", 1024, 1024)}},
	{"sgemm_2048", K_SGEMM, "matmul", 0, 2, {T2("A", 2048, 2048), T2("B", 2048, 2048)},
	 1, {T2("C", 2048, 2048)}},
	{"sgemm_nt_1024", K_SGEMM_NT, "matmul_nt", 1, 2,
	 {T2("A", 1024, 1024), T2("B", 1024, 1024)}, 1, {T2("C", 1024, 1024)}},
	{"bmm_500x26x72x26", K_BMM, "batch_matmul", 1, 2,
	 {T3("X", 500, 26, 72), T3("Y", 500, 72, 26)}, 1, {T3("Z", 500, 26, 26)}},
	{"conv2d_8x64x56x56_k3", K_CONV2D, "conv2d", 1, 3,
	 {T4("I", 8, 64, 56, 56), T4("W1", 64, 64, 3, 3), T1("B", 64)},
	 1, {T4("O", 8, 64, 54, 54)}},
	{"softmax_128x1000", K_SOFTMAX, "softmax", 1, 1, {T2("I", 128, 1000)},
	 1, {T2("O", 128, 1000)}},
	{"softmax_4096x4096", K_SOFTMAX, "softmax", 1, 1, {T2("I", 4096, 4096)},
	 1, {T2("O", 4096, 4096)}},
	{"layernorm_4096x1024", K_LAYERNORM, "layernorm", 1, 3,
	 {T2("X", 4096, 1024), T1("G", 1024), T1("Bt", 1024)}, 1, {T2("Y", 4096, 1024)}},
	{"fcrelu_128x784x128", K_FCRELU, "fcrelu", 1, 3,
	 {T2("In", 128, 784), T2("W", 128, 784), T1("Bias", 128)}, 1, {T2("Out", 128, 128)}},
	{"fcrelu_128x128x10", K_FCRELU, "fcrelu", 1, 3,
	 {T2("In", 128, 128), T2("W", 10, 128), T1("Bias", 10)}, 1, {T2("Out", 128, 10)}},
	{"kron3_256x16", K_KRON3, "kronecker3", 1, 4,
	 {T2("W0", 16, 16), T2("W1", 16, 16), T2("W2", 16, 16), T4("X", 256, 16, 16, 16)},
	 1, {T4("Y", 256, 16, 16, 16)}},
	/* The training step of the MLP: forward, backward, SGD update. */
	{"mlp_fwd_128x784x128x10", K_MLP_FWD, "mlp_fwd", 1, 5,
	 {T2("X", MLP_B, MLP_I), WEIGHTS("W1", MLP_I, MLP_H, MLP_S1), T1("B1", MLP_H),
	  WEIGHTS("W2", MLP_H, MLP_K, MLP_S2), T1("B2", MLP_K)},
	 2, {T2("Hd", MLP_B, MLP_H), T2("P", MLP_B, MLP_K)}},
	{"mlp_bwd_128x784x128x10", K_MLP_BWD, "mlp_bwd", 1, 5,
	 {T2("X", MLP_B, MLP_I), T2("Hd", MLP_B, MLP_H), T2("P", MLP_B, MLP_K),
	  LABELS("Y", MLP_B, MLP_K), WEIGHTS("W2", MLP_H, MLP_K, MLP_S2)},
	 4, {T2("dW1", MLP_I, MLP_H), T1("dB1", MLP_H), T2("dW2", MLP_H, MLP_K), T1("dB2", MLP_K)}},
	{"sgd_784x128x10", K_SGD, "sgd", 1, 8,
	 {T2("W1", MLP_I, MLP_H), T1("B1", MLP_H), T2("W2", MLP_H, MLP_K), T1("B2", MLP_K),
	  T2("dW1", MLP_I, MLP_H), T1("dB1", MLP_H), T2("dW2", MLP_H, MLP_K), T1("dB2", MLP_K)},
	 4, {T2("W1n", MLP_I, MLP_H), T1("B1n", MLP_H), T2("W2n", MLP_H, MLP_K), T1("B2n", MLP_K)}},
	/* Weight and bias gradients: (B,I,H) and (B,H). */
	{"wgrad_128x784x128", K_WGRAD, "wgrad", 1, 2, {T2("X", 128, 784), T2("dH", 128, 128)},
	 1, {T2("dW", 784, 128)}},
	{"wgrad_128x128x10", K_WGRAD, "wgrad", 1, 2, {T2("X", 128, 128), T2("dH", 128, 10)},
	 1, {T2("dW", 128, 10)}},
	{"wgrad_256x1024x1024", K_WGRAD, "wgrad", 0, 2, {T2("X", 256, 1024), T2("dH", 256, 1024)},
	 1, {T2("dW", 1024, 1024)}},
	{"biasgrad_128x128", K_BIASGRAD, "biasgrad", 1, 1, {T2("dH", 128, 128)},
	 1, {T1("dB", 128)}},
	{"biasgrad_4096x1024", K_BIASGRAD, "biasgrad", 1, 1, {T2("dH", 4096, 1024)},
	 1, {T1("dB", 1024)}},
	/* Tensor Comprehensions' group convolutions: N=32, G=32, 3x3, C=F. */
	{"groupconv_32x32x4x56x56_k3", K_GCONV, "group_conv", 1, 3,
	 {T5("I", 32, 32, 4, 56, 56), T5("W1", 32, 4, 4, 3, 3), T2("B", 32, 4)},
	 1, {T5("O", 32, 32, 4, 54, 54)}},
	{"groupconv_32x32x8x28x28_k3", K_GCONV, "group_conv", 1, 3,
	 {T5("I", 32, 32, 8, 28, 28), T5("W1", 32, 8, 8, 3, 3), T2("B", 32, 8)},
	 1, {T5("O", 32, 32, 8, 26, 26)}},
	{"groupconv_32x32x16x14x14_k3", K_GCONV, "group_conv", 1, 3,
	 {T5("I", 32, 32, 16, 14, 14), T5("W1", 32, 16, 16, 3, 3), T2("B", 32, 16)},
	 1, {T5("O", 32, 32, 16, 12, 12)}},
	{"groupconv_32x32x32x7x7_k3", K_GCONV, "group_conv", 1, 3,
	 {T5("I", 32, 32, 32, 7, 7), T5("W1", 32, 32, 32, 3, 3), T2("B", 32, 32)},
	 1, {T5("O", 32, 32, 32, 5, 5)}},
	{"depthwise_8x256x56x56_k3", K_DWCONV, "depthwise", 1, 3,
	 {T4("I", 8, 256, 56, 56), T3("W1", 256, 3, 3), T1("B", 256)},
	 1, {T4("O", 8, 256, 54, 54)}},
	/* Multi-statement kernels of models. */
	{"attention_8x256x64", K_ATTN, "attention", 1, 3,
	 {T3("Q", 8, 256, 64), T3("K", 8, 256, 64), T3("V", 8, 256, 64)},
	 1, {T3("O", 8, 256, 64)}},
	{"rmsnorm_res_2048x1024", K_RMSNORM, "rmsnorm_res", 1, 3,
	 {T2("X", 2048, 1024), T2("R", 2048, 1024), T1("G", 1024)},
	 2, {T2("Hs", 2048, 1024), T2("Y", 2048, 1024)}},
	{"layernorm_bwd_4096x1024", K_LNBWD, "layernorm_bwd", 1, 3,
	 {T2("X", 4096, 1024), T2("dY", 4096, 1024), T1("G", 1024)},
	 3, {T2("dX", 4096, 1024), T1("dG", 1024), T1("dBt", 1024)}},
};

#define NBENCH (sizeof(benches) / sizeof(benches[0]))

/* ---- helpers ---------------------------------------------------------- */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static long numel(const struct tspec *t)
{
	long n = 1;
	for (int i = 0; i < t->nd; i++)
		n *= t->d[i];
	return n;
}

/* Bytes of one element: 8 for int64 labels, else 4. */
static long elem_size(const struct tspec *t)
{
	return t->labels > 0 ? 8 : 4;
}

/* A zeroed, 64-byte aligned buffer whose pages are faulted in now (this
 * machine's first-touch faults cost about 10 us per 4 KiB page). */
static float *alloc_floats(long n)
{
	void *p = NULL;
	size_t bytes = ((size_t)(n > 0 ? n : 1) * sizeof(float) + 63) & ~(size_t)63;
	if (posix_memalign(&p, 64, bytes)) {
		fprintf(stderr, "baselines: out of memory (%zu bytes)\n", bytes);
		exit(1);
	}
	memset(p, 0, bytes);
	return p;
}

/* Uniform in [-1, 1) without 0, from a fixed per-tensor seed (splitmix64). */
static void fill_random(float *x, long n, uint64_t seed)
{
	uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
	for (long i = 0; i < n; i++) {
		uint64_t z = (s += 0x9E3779B97F4A7C15ull);
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
		z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
		z ^= z >> 31;
		float v = (float)((double)(z >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
		x[i] = v != 0.0f ? v : 0.5f;
	}
}

/* Labels uniform in [0, classes), from a fixed per-tensor seed. */
static void fill_labels(int64_t *x, long n, long classes, uint64_t seed)
{
	uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
	for (long i = 0; i < n; i++) {
		uint64_t z = (s += 0x9E3779B97F4A7C15ull);
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
		z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
		z ^= z >> 31;
		x[i] = (int64_t)((z >> 11) % (uint64_t)classes);
	}
}

/* ---- the thread pool -------------------------------------------------- */

/* The body of a parallel loop: iterations [lo, hi) on thread tid. */
typedef void loop_fn(void *ctx, int tid, long lo, long hi);

static struct {
	int n;                      /* threads, the caller included */
	pthread_t th[MAX_THREADS];
	pthread_barrier_t start, done;
	loop_fn *fn;
	void *ctx;
	long total;
} pool = {.n = 1};

static void pool_chunk(int tid)
{
	long lo = pool.total * tid / pool.n, hi = pool.total * (tid + 1) / pool.n;
	if (lo < hi)
		pool.fn(pool.ctx, tid, lo, hi);
}

static void *pool_worker(void *arg)
{
	int tid = (int)(intptr_t)arg;
	for (;;) {
		pthread_barrier_wait(&pool.start);
		pool_chunk(tid);
		pthread_barrier_wait(&pool.done);
	}
	return NULL;
}

static void pool_init(int n)
{
	pool.n = n;
	if (n == 1)
		return;
	pthread_barrier_init(&pool.start, NULL, n);
	pthread_barrier_init(&pool.done, NULL, n);
	for (int i = 1; i < n; i++)
		if (pthread_create(&pool.th[i], NULL, pool_worker, (void *)(intptr_t)i)) {
			fprintf(stderr, "baselines: cannot create thread %d\n", i);
			exit(1);
		}
}

/* Run fn over [0, total) split into equal chunks, one per thread. */
static void par_for(long total, loop_fn *fn, void *ctx)
{
	if (pool.n == 1) {
		fn(ctx, 0, 0, total);
		return;
	}
	pool.fn = fn;
	pool.ctx = ctx;
	pool.total = total;
	pthread_barrier_wait(&pool.start);
	pool_chunk(0);
	pthread_barrier_wait(&pool.done);
}

/* ---- the problem: buffers and shapes ---------------------------------- */

struct problem {
	const struct bench *b;
	float *in[MAX_TENSORS]; /* float32, or int64 for a tspec with labels */
	float *out[MAX_OUTPUTS];
	float *tmp[2];      /* temporaries of the naive and OpenBLAS versions */
	float *scratch[MAX_THREADS][2]; /* per-thread buffers of the OpenBLAS versions */
};

/* ---- naive C: the loops as written from the definition ----------------- */

static void naive_sgemm(void *c, int tid, long lo, long hi)
{
	struct problem *p = c;
	long M = p->b->in[0].d[0], K = p->b->in[0].d[1], N = p->b->in[1].d[1];
	const float *A = p->in[0], *B = p->in[1];
	float *C = p->out[0];
	(void)tid; (void)M;
	for (long i = lo; i < hi; i++)
		for (long j = 0; j < N; j++) {
			float s = 0;
			for (long k = 0; k < K; k++)
				s += A[i * K + k] * B[k * N + j];
			C[i * N + j] = s;
		}
}

static void naive_sgemm_nt(void *c, int tid, long lo, long hi)
{
	struct problem *p = c;
	long K = p->b->in[0].d[1], N = p->b->in[1].d[0];
	const float *A = p->in[0], *B = p->in[1];
	float *C = p->out[0];
	(void)tid;
	for (long i = lo; i < hi; i++)
		for (long j = 0; j < N; j++) {
			float s = 0;
			for (long k = 0; k < K; k++)
				s += A[i * K + k] * B[j * K + k];
			C[i * N + j] = s;
		}
}

static void naive_bmm(void *c, int tid, long lo, long hi)
{
	struct problem *p = c;
	long N = p->b->in[0].d[1], M = p->b->in[0].d[2], K = p->b->in[1].d[2];
	const float *X = p->in[0], *Y = p->in[1];
	float *Z = p->out[0];
	(void)tid;
	for (long b = lo; b < hi; b++)
		for (long n = 0; n < N; n++)
			for (long k = 0; k < K; k++) {
				float s = 0;
				for (long m = 0; m < M; m++)
					s += X[(b * N + n) * M + m] * Y[(b * M + m) * K + k];
				Z[(b * N + n) * K + k] = s;
			}
}

static void naive_conv2d(void *c, int tid, long lo, long hi)
{
	struct problem *p = c;
	const struct tspec *ti = &p->b->in[0], *tw = &p->b->in[1];
	long C = ti->d[1], H = ti->d[2], W = ti->d[3];
	long F = tw->d[0], KH = tw->d[2], KW = tw->d[3], Ho = H - KH + 1, Wo = W - KW + 1;
	const float *Img = p->in[0], *Wt = p->in[1], *Bias = p->in[2];
	float *O = p->out[0];
	(void)tid;
	for (long n = lo; n < hi; n++)
		for (long f = 0; f < F; f++)
			for (long h = 0; h < Ho; h++)
				for (long w = 0; w < Wo; w++) {
					float s = 0;
					for (long cc = 0; cc < C; cc++)
						for (long kh = 0; kh < KH; kh++)
							for (long kw = 0; kw < KW; kw++)
								s += Img[((n * C + cc) * H + h + kh) * W + w + kw] *
								     Wt[((f * C + cc) * KH + kh) * KW + kw];
					O[((n * F + f) * Ho + h) * Wo + w] = s + Bias[f];
				}
}

static void naive_softmax(void *c, int tid, long lo, long hi)
{
	struct problem *p = c;
	long D = p->b->in[0].d[1];
	(void)tid;
	for (long n = lo; n < hi; n++) {
		const float *x = p->in[0] + n * D;
		float *o = p->out[0] + n * D, mx = -INFINITY, s = 0;
		for (long d = 0; d < D; d++)
			mx = x[d] > mx ? x[d] : mx;
		for (long d = 0; d < D; d++)
			s += expf(x[d] - mx);
		for (long d = 0; d < D; d++)
			o[d] = expf(x[d] - mx) / s;
	}
}

static void naive_layernorm(void *c, int tid, long lo, long hi)
{
	struct problem *p = c;
	long D = p->b->in[0].d[1];
	const float *G = p->in[1], *Bt = p->in[2];
	(void)tid;
	for (long n = lo; n < hi; n++) {
		const float *x = p->in[0] + n * D;
		float *y = p->out[0] + n * D, mean = 0, var = 0;
		for (long d = 0; d < D; d++)
			mean += x[d];
		mean /= D;
		for (long d = 0; d < D; d++)
			var += (x[d] - mean) * (x[d] - mean);
		var /= D;
		float r = 1.0f / sqrtf(var + 1e-5f);
		for (long d = 0; d < D; d++)
			y[d] = (x[d] - mean) * r * G[d] + Bt[d];
	}
}

static void naive_fcrelu(void *c, int tid, long lo, long hi)
{
	struct problem *p = c;
	long Nin = p->b->in[0].d[1], O = p->b->in[1].d[0];
	const float *In = p->in[0], *W = p->in[1], *Bias = p->in[2];
	(void)tid;
	for (long b = lo; b < hi; b++)
		for (long o = 0; o < O; o++) {
			float s = 0;
			for (long i = 0; i < Nin; i++)
				s += In[b * Nin + i] * W[o * Nin + i];
			s += Bias[o];
			p->out[0][b * O + o] = s > 0 ? s : 0;
		}
}

/* Kronecker extents: W0 (D0,N0), W1 (D1,N1), W2 (D2,N2), X (M,N0,N1,N2). */
#define KRON_DIMS(p)                                                              \
	long D0 = (p)->b->in[0].d[0], N0 = (p)->b->in[0].d[1];                    \
	long D1 = (p)->b->in[1].d[0], N1 = (p)->b->in[1].d[1];                    \
	long D2 = (p)->b->in[2].d[0], N2 = (p)->b->in[2].d[1]

static void naive_kron3(void *c, int tid, long lo, long hi)
{
	struct problem *p = c;
	KRON_DIMS(p);
	const float *W0 = p->in[0], *W1 = p->in[1], *W2 = p->in[2], *X = p->in[3];
	float *XW0 = p->tmp[0], *XW1 = p->tmp[1], *Y = p->out[0];
	(void)tid;
	/* XW0(m,n1,n2,d0) = sum_n0 X(m,n0,n1,n2) * W0(d0,n0) */
	for (long m = lo; m < hi; m++)
		for (long n1 = 0; n1 < N1; n1++)
			for (long n2 = 0; n2 < N2; n2++)
				for (long d0 = 0; d0 < D0; d0++) {
					float s = 0;
					for (long n0 = 0; n0 < N0; n0++)
						s += X[((m * N0 + n0) * N1 + n1) * N2 + n2] * W0[d0 * N0 + n0];
					XW0[((m * N1 + n1) * N2 + n2) * D0 + d0] = s;
				}
	/* XW1(m,n2,d0,d1) = sum_n1 XW0(m,n1,n2,d0) * W1(d1,n1) */
	for (long m = lo; m < hi; m++)
		for (long n2 = 0; n2 < N2; n2++)
			for (long d0 = 0; d0 < D0; d0++)
				for (long d1 = 0; d1 < D1; d1++) {
					float s = 0;
					for (long n1 = 0; n1 < N1; n1++)
						s += XW0[((m * N1 + n1) * N2 + n2) * D0 + d0] * W1[d1 * N1 + n1];
					XW1[((m * N2 + n2) * D0 + d0) * D1 + d1] = s;
				}
	/* Y(m,d0,d1,d2) = sum_n2 XW1(m,n2,d0,d1) * W2(d2,n2) */
	for (long m = lo; m < hi; m++)
		for (long d0 = 0; d0 < D0; d0++)
			for (long d1 = 0; d1 < D1; d1++)
				for (long d2 = 0; d2 < D2; d2++) {
					float s = 0;
					for (long n2 = 0; n2 < N2; n2++)
						s += XW1[((m * N2 + n2) * D0 + d0) * D1 + d1] * W2[d2 * N2 + n2];
					Y[((m * D0 + d0) * D1 + d1) * D2 + d2] = s;
				}
}

/* ---- naive C: the kernels of models (issue 15) --------------------------
 * Each runs as phases, one par_for per phase over a loop that the phase's
 * outputs split along (rows for row-wise work, output rows for reductions
 * over the batch), so no two threads write the same element. */

/* MLP forward, rows b: Hd = max(X W1 + B1, 0), L = Hd W2 + B2, P = softmax(L). */
static void naive_mlp_fwd(void *c, int tid, long lo, long hi)
{
	struct problem *p = c;
	long I = p->b->in[0].d[1], H = p->b->in[1].d[1], K = p->b->in[3].d[1];
	const float *X = p->in[0], *W1 = p->in[1], *B1 = p->in[2], *W2 = p->in[3], *B2 = p->in[4];
	float *Hd = p->out[0], *P = p->out[1], *L = p->tmp[0];
	(void)tid;
	for (long b = lo; b < hi; b++) {
		for (long h = 0; h < H; h++) {
			float s = 0;
			for (long i = 0; i < I; i++)
				s += X[b * I + i] * W1[i * H + h];
			s += B1[h];
			Hd[b * H + h] = s > 0 ? s : 0;
		}
		float mx = -INFINITY, sm = 0;
		for (long k = 0; k < K; k++) {
			float s = 0;
			for (long h = 0; h < H; h++)
				s += Hd[b * H + h] * W2[h * K + k];
			L[b * K + k] = s + B2[k];
			mx = L[b * K + k] > mx ? L[b * K + k] : mx;
		}
		for (long k = 0; k < K; k++)
			sm += expf(L[b * K + k] - mx);
		for (long k = 0; k < K; k++)
			P[b * K + k] = expf(L[b * K + k] - mx) / sm;
	}
}

/* MLP backward extents: X (B,I), Hd (B,H), P (B,K), Y (B), W2 (H,K). */
#define MLP_DIMS(p)                                                              \
	long B = (p)->b->in[0].d[0], I = (p)->b->in[0].d[1];                     \
	long H = (p)->b->in[1].d[1], K = (p)->b->in[2].d[1]

/* Rows b: dL = (P - onehot(Y)) / B, dH = (dL W2^T) masked by Hd > 0. */
static void naive_mlp_bwd_rows(void *c, int tid, long lo, long hi)
{
	struct problem *p = c;
	MLP_DIMS(p);
	const float *Hd = p->in[1], *P = p->in[2], *W2 = p->in[4];
	const int64_t *Y = (const int64_t *)p->in[3];
	float *dL = p->tmp[0], *dH = p->tmp[1];
	(void)tid; (void)I;
	for (long b = lo; b < hi; b++) {
		for (long k = 0; k < K; k++)
			dL[b * K + k] = (P[b * K + k] - (Y[b] == k ? 1.0f : 0.0f)) / (float)B;
		for (long h = 0; h < H; h++) {
			float s = 0;
			for (long k = 0; k < K; k++)
				s += dL[b * K + k] * W2[h * K + k];
			dH[b * H + h] = Hd[b * H + h] > 0 ? s : 0.0f;
		}
	}
}

/* Rows i of dW1 = X^T dH. */
static void naive_mlp_bwd_dw1(void *c, int tid, long lo, long hi)
{
	struct problem *p = c;
	MLP_DIMS(p);
	const float *X = p->in[0], *dH = p->tmp[1];
	float *dW1 = p->out[0];
	(void)tid; (void)K;
	for (long i = lo; i < hi; i++)
		for (long h = 0; h < H; h++) {
			float s = 0;
			for (long b = 0; b < B; b++)
				s += X[b * I + i] * dH[b * H + h];
			dW1[i * H + h] = s;
		}
}

/* Rows h of dW2 = Hd^T dL and dB1(h) = sum_b dH(b,h). */
static void naive_mlp_bwd_dw2(void *c, int tid, long lo, long hi)
{
	struct problem *p = c;
	MLP_DIMS(p);
	const float *Hd = p->in[1], *dL = p->tmp[0], *dH = p->tmp[1];
	float *dB1 = p->out[1], *dW2 = p->out[2];
	(void)tid; (void)I;
	for (long h = lo; h < hi; h++) {
		for (long k = 0; k < K; k++) {
			float s = 0;
			for (long b = 0; b < B; b++)
				s += Hd[b * H + h] * dL[b * K + k];
			dW2[h * K + k] = s;
		}
		float s = 0;
		for (long b = 0; b < B; b++)
			s += dH[b * H + h];
		dB1[h] = s;
	}
}

/* dB2(k) = sum_b dL(b,k): K columns, run on one thread. */
static void mlp_bwd_db2(struct problem *p)
{
	MLP_DIMS(p);
	(void)I; (void)H;
	for (long k = 0; k < K; k++) {
		float s = 0;
		for (long b = 0; b < B; b++)
			s += p->tmp[0][b * K + k];
		p->out[3][k] = s;
	}
}

/* Elements [lo, hi) of all four SGD updates, one index space laid end to end. */
static void naive_sgd(void *c, int tid, long lo, long hi)
{
	struct problem *p = c;
	(void)tid;
	long base = 0;
	for (int t = 0; t < 4; t++) {
		long n = numel(&p->b->in[t]);
		long a = lo > base ? lo - base : 0, z = hi - base < n ? hi - base : n;
		for (long i = a; i < z; i++)
			p->out[t][i] = p->in[t][i] - 0.01f * p->in[t + 4][i];
		base += n;
	}
}

/* Rows i of dW = X^T dH, X (B,I), dH (B,H). */
static void naive_wgrad(void *c, int tid, long lo, long hi)
{
	struct problem *p = c;
	long B = p->b->in[0].d[0], I = p->b->in[0].d[1], H = p->b->in[1].d[1];
	const float *X = p->in[0], *dH = p->in[1];
	(void)tid;
	for (long i = lo; i < hi; i++)
		for (long h = 0; h < H; h++) {
			float s = 0;
			for (long b = 0; b < B; b++)
				s += X[b * I + i] * dH[b * H + h];
			p->out[0][i * H + h] = s;
		}
}

/* Columns h of dB(h) = sum_b dH(b,h). */
static void naive_biasgrad(void *c, int tid, long lo, long hi)
{
	struct problem *p = c;
	long B = p->b->in[0].d[0], H = p->b->in[0].d[1];
	(void)tid;
	for (long h = lo; h < hi; h++) {
		float s = 0;
		for (long b = 0; b < B; b++)
			s += p->in[0][b * H + h];
		p->out[0][h] = s;
	}
}

/* Images n of the group convolution: I (N,G,C,H,W), W1 (G,F,C,KH,KW), B (G,F). */
static void naive_gconv(void *c, int tid, long lo, long hi)
{
	struct problem *p = c;
	const struct tspec *ti = &p->b->in[0], *tw = &p->b->in[1];
	long G = ti->d[1], C = ti->d[2], H = ti->d[3], W = ti->d[4];
	long F = tw->d[1], KH = tw->d[3], KW = tw->d[4], Ho = H - KH + 1, Wo = W - KW + 1;
	const float *Img = p->in[0], *Wt = p->in[1], *Bias = p->in[2];
	float *O = p->out[0];
	(void)tid;
	for (long n = lo; n < hi; n++)
		for (long g = 0; g < G; g++)
			for (long f = 0; f < F; f++)
				for (long h = 0; h < Ho; h++)
					for (long w = 0; w < Wo; w++) {
						float s = 0;
						for (long cc = 0; cc < C; cc++)
							for (long kh = 0; kh < KH; kh++)
								for (long kw = 0; kw < KW; kw++)
									s += Img[(((n * G + g) * C + cc) * H + h + kh) * W + w + kw] *
									     Wt[(((g * F + f) * C + cc) * KH + kh) * KW + kw];
						O[(((n * G + g) * F + f) * Ho + h) * Wo + w] = s + Bias[g * F + f];
					}
}

/* Images n of the depthwise convolution: I (N,C,H,W), W1 (C,KH,KW), B (C). */
static void naive_dwconv(void *c, int tid, long lo, long hi)
{
	struct problem *p = c;
	const struct tspec *ti = &p->b->in[0], *tw = &p->b->in[1];
	long C = ti->d[1], H = ti->d[2], W = ti->d[3];
	long KH = tw->d[1], KW = tw->d[2], Ho = H - KH + 1, Wo = W - KW + 1;
	const float *Img = p->in[0], *Wt = p->in[1], *Bias = p->in[2];
	(void)tid;
	for (long n = lo; n < hi; n++)
		for (long cc = 0; cc < C; cc++)
			for (long h = 0; h < Ho; h++)
				for (long w = 0; w < Wo; w++) {
					float s = 0;
					for (long kh = 0; kh < KH; kh++)
						for (long kw = 0; kw < KW; kw++)
							s += Img[((n * C + cc) * H + h + kh) * W + w + kw] *
							     Wt[(cc * KH + kh) * KW + kw];
					p->out[0][((n * C + cc) * Ho + h) * Wo + w] = s + Bias[cc];
				}
}

/* Heads z of attention: Q, K, V (Z,S,D); the scores of one row in a local
 * buffer (S at most 4096), softmax, then the weighted sum of V's rows. */
static void naive_attn(void *c, int tid, long lo, long hi)
{
	struct problem *p = c;
	long S = p->b->in[0].d[1], D = p->b->in[0].d[2];
	float sc[4096], scale = 1.0f / sqrtf((float)D);
	(void)tid;
	for (long z = lo; z < hi; z++) {
		const float *Q = p->in[0] + z * S * D, *K = p->in[1] + z * S * D;
		const float *V = p->in[2] + z * S * D;
		float *O = p->out[0] + z * S * D;
		for (long i = 0; i < S; i++) {
			float mx = -INFINITY, sm = 0;
			for (long j = 0; j < S; j++) {
				float s = 0;
				for (long d = 0; d < D; d++)
					s += Q[i * D + d] * K[j * D + d];
				sc[j] = s * scale;
				mx = sc[j] > mx ? sc[j] : mx;
			}
			for (long j = 0; j < S; j++)
				sm += expf(sc[j] - mx);
			for (long j = 0; j < S; j++)
				sc[j] = expf(sc[j] - mx) / sm;
			for (long d = 0; d < D; d++) {
				float s = 0;
				for (long j = 0; j < S; j++)
					s += sc[j] * V[j * D + d];
				O[i * D + d] = s;
			}
		}
	}
}

/* Rows n: Hs = X + R, Y = Hs / sqrt(mean(Hs^2) + 1e-6) * G. */
static void naive_rmsnorm(void *c, int tid, long lo, long hi)
{
	struct problem *p = c;
	long D = p->b->in[0].d[1];
	const float *G = p->in[2];
	(void)tid;
	for (long n = lo; n < hi; n++) {
		const float *x = p->in[0] + n * D, *r = p->in[1] + n * D;
		float *hs = p->out[0] + n * D, *y = p->out[1] + n * D, ms = 0;
		for (long d = 0; d < D; d++) {
			hs[d] = x[d] + r[d];
			ms += hs[d] * hs[d];
		}
		float rs = 1.0f / sqrtf(ms / D + 1e-6f);
		for (long d = 0; d < D; d++)
			y[d] = hs[d] * rs * G[d];
	}
}

/* Rows n of the layer norm backward: the statistics, xh (kept for the
 * column sums), and dX. */
static void naive_lnbwd_rows(void *c, int tid, long lo, long hi)
{
	struct problem *p = c;
	long D = p->b->in[0].d[1];
	const float *G = p->in[2];
	(void)tid;
	for (long n = lo; n < hi; n++) {
		const float *x = p->in[0] + n * D, *dy = p->in[1] + n * D;
		float *xh = p->tmp[0] + n * D, *dx = p->out[0] + n * D;
		float mean = 0, var = 0, s1 = 0, s2 = 0;
		for (long d = 0; d < D; d++)
			mean += x[d];
		mean /= D;
		for (long d = 0; d < D; d++)
			var += (x[d] - mean) * (x[d] - mean);
		float rstd = 1.0f / sqrtf(var / D + 1e-5f);
		for (long d = 0; d < D; d++) {
			xh[d] = (x[d] - mean) * rstd;
			s1 += dy[d] * G[d];
			s2 += dy[d] * G[d] * xh[d];
		}
		for (long d = 0; d < D; d++)
			dx[d] = rstd * (dy[d] * G[d] - s1 / D - xh[d] * s2 / D);
	}
}

/* Columns d of the layer norm backward: dG = sum_n dY xh, dBt = sum_n dY. */
static void naive_lnbwd_cols(void *c, int tid, long lo, long hi)
{
	struct problem *p = c;
	long N = p->b->in[0].d[0], D = p->b->in[0].d[1];
	const float *dY = p->in[1], *xh = p->tmp[0];
	(void)tid;
	for (long d = lo; d < hi; d++) {
		float g = 0, bt = 0;
		for (long n = 0; n < N; n++) {
			g += dY[n * D + d] * xh[n * D + d];
			bt += dY[n * D + d];
		}
		p->out[1][d] = g;
		p->out[2][d] = bt;
	}
}

/* ---- OpenBLAS --------------------------------------------------------- */

#ifdef HAVE_OPENBLAS
static void blas_bmm(void *c, int tid, long lo, long hi)
{
	struct problem *p = c;
	long N = p->b->in[0].d[1], M = p->b->in[0].d[2], K = p->b->in[1].d[2];
	(void)tid;
	for (long b = lo; b < hi; b++)
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, K, M, 1.0f,
			    p->in[0] + b * N * M, M, p->in[1] + b * M * K, K, 0.0f,
			    p->out[0] + b * N * K, K);
}

/* im2col of one image into this thread's buffer, one sgemm, the bias. */
static void blas_conv2d(void *c, int tid, long lo, long hi)
{
	struct problem *p = c;
	const struct tspec *ti = &p->b->in[0], *tw = &p->b->in[1];
	long C = ti->d[1], H = ti->d[2], W = ti->d[3];
	long F = tw->d[0], KH = tw->d[2], KW = tw->d[3], Ho = H - KH + 1, Wo = W - KW + 1;
	float *col = p->scratch[tid][0];
	for (long n = lo; n < hi; n++) {
		const float *img = p->in[0] + n * C * H * W;
		float *O = p->out[0] + n * F * Ho * Wo;
		for (long cc = 0; cc < C; cc++)
			for (long kh = 0; kh < KH; kh++)
				for (long kw = 0; kw < KW; kw++) {
					float *row = col + ((cc * KH + kh) * KW + kw) * Ho * Wo;
					for (long h = 0; h < Ho; h++)
						memcpy(row + h * Wo, img + (cc * H + h + kh) * W + kw,
						       Wo * sizeof(float));
				}
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, F, Ho * Wo, C * KH * KW,
			    1.0f, p->in[1], C * KH * KW, col, Ho * Wo, 0.0f, O, Ho * Wo);
		for (long f = 0; f < F; f++)
			for (long i = 0; i < Ho * Wo; i++)
				O[f * Ho * Wo + i] += p->in[2][f];
	}
}

/* out (P,D) = in^T W^T, in stored (N,P) and W (D,N): one contraction of a
 * Kronecker factor for one m. */
static void kron_step(const float *in, const float *W, float *out, long N, long P, long D)
{
	cblas_sgemm(CblasRowMajor, CblasTrans, CblasTrans, P, D, N, 1.0f, in, P, W, N, 0.0f,
		    out, D);
}

static void blas_kron3(void *c, int tid, long lo, long hi)
{
	struct problem *p = c;
	KRON_DIMS(p);
	float *t0 = p->scratch[tid][0], *t1 = p->scratch[tid][1];
	for (long m = lo; m < hi; m++) {
		kron_step(p->in[3] + m * N0 * N1 * N2, p->in[0], t0, N0, N1 * N2, D0);
		kron_step(t0, p->in[1], t1, N1, N2 * D0, D1);
		kron_step(t1, p->in[2], p->out[0] + m * D0 * D1 * D2, N2, D0 * D1, D2);
	}
}
/* im2col of one group of one image, one sgemm (F x Ho*Wo x C*KH*KW), the
 * bias; images split over the pool. */
static void blas_gconv(void *c, int tid, long lo, long hi)
{
	struct problem *p = c;
	const struct tspec *ti = &p->b->in[0], *tw = &p->b->in[1];
	long G = ti->d[1], C = ti->d[2], H = ti->d[3], W = ti->d[4];
	long F = tw->d[1], KH = tw->d[3], KW = tw->d[4], Ho = H - KH + 1, Wo = W - KW + 1;
	float *col = p->scratch[tid][0];
	for (long n = lo; n < hi; n++)
		for (long g = 0; g < G; g++) {
			const float *img = p->in[0] + (n * G + g) * C * H * W;
			float *O = p->out[0] + (n * G + g) * F * Ho * Wo;
			for (long cc = 0; cc < C; cc++)
				for (long kh = 0; kh < KH; kh++)
					for (long kw = 0; kw < KW; kw++) {
						float *row = col + ((cc * KH + kh) * KW + kw) * Ho * Wo;
						for (long h = 0; h < Ho; h++)
							memcpy(row + h * Wo, img + (cc * H + h + kh) * W + kw,
							       Wo * sizeof(float));
					}
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, F, Ho * Wo,
				    C * KH * KW, 1.0f, p->in[1] + g * F * C * KH * KW, C * KH * KW,
				    col, Ho * Wo, 0.0f, O, Ho * Wo);
			for (long f = 0; f < F; f++)
				for (long i = 0; i < Ho * Wo; i++)
					O[f * Ho * Wo + i] += p->in[2][g * F + f];
		}
}

/* Heads z of attention: scores by sgemm (Q K^T, scaled), a softmax loop,
 * sgemm of the probabilities with V. */
static void blas_attn(void *c, int tid, long lo, long hi)
{
	struct problem *p = c;
	long S = p->b->in[0].d[1], D = p->b->in[0].d[2];
	float *sc = p->scratch[tid][0];
	for (long z = lo; z < hi; z++) {
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, S, S, D,
			    1.0f / sqrtf((float)D), p->in[0] + z * S * D, D, p->in[1] + z * S * D, D,
			    0.0f, sc, S);
		for (long i = 0; i < S; i++) {
			float *r = sc + i * S, mx = -INFINITY, sm = 0;
			for (long j = 0; j < S; j++)
				mx = r[j] > mx ? r[j] : mx;
			for (long j = 0; j < S; j++) {
				r[j] = expf(r[j] - mx);
				sm += r[j];
			}
			for (long j = 0; j < S; j++)
				r[j] /= sm;
		}
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, S, D, S, 1.0f, sc, S,
			    p->in[2] + z * S * D, D, 0.0f, p->out[0] + z * S * D, D);
	}
}

/* MLP forward: two sgemm, bias + ReLU and bias + softmax loops. */
static void blas_mlp_fwd(struct problem *p)
{
	long B = p->b->in[0].d[0], I = p->b->in[0].d[1], H = p->b->in[1].d[1];
	long K = p->b->in[3].d[1];
	float *Hd = p->out[0], *P = p->out[1], *L = p->tmp[0];
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, H, I, 1.0f, p->in[0], I,
		    p->in[1], H, 0.0f, Hd, H);
	for (long b = 0; b < B; b++)
		for (long h = 0; h < H; h++) {
			float v = Hd[b * H + h] + p->in[2][h];
			Hd[b * H + h] = v > 0 ? v : 0;
		}
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, K, H, 1.0f, Hd, H, p->in[3],
		    K, 0.0f, L, K);
	for (long b = 0; b < B; b++) {
		float mx = -INFINITY, sm = 0;
		for (long k = 0; k < K; k++) {
			L[b * K + k] += p->in[4][k];
			mx = L[b * K + k] > mx ? L[b * K + k] : mx;
		}
		for (long k = 0; k < K; k++) {
			P[b * K + k] = expf(L[b * K + k] - mx);
			sm += P[b * K + k];
		}
		for (long k = 0; k < K; k++)
			P[b * K + k] /= sm;
	}
}

/* MLP backward: dL loop, dW2 = Hd^T dL (sgemm TN), dB2, dH = dL W2^T
 * (sgemm NT), the ReLU mask, dW1 = X^T dH (sgemm TN), dB1. */
static void blas_mlp_bwd(struct problem *p)
{
	MLP_DIMS(p);
	const int64_t *Y = (const int64_t *)p->in[3];
	const float *X = p->in[0], *Hd = p->in[1], *P = p->in[2], *W2 = p->in[4];
	float *dL = p->tmp[0], *dH = p->tmp[1];
	float *dW1 = p->out[0], *dB1 = p->out[1], *dW2 = p->out[2];
	for (long b = 0; b < B; b++)
		for (long k = 0; k < K; k++)
			dL[b * K + k] = (P[b * K + k] - (Y[b] == k ? 1.0f : 0.0f)) / (float)B;
	cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, H, K, B, 1.0f, Hd, H, dL, K, 0.0f,
		    dW2, K);
	mlp_bwd_db2(p);
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, H, K, 1.0f, dL, K, W2, K, 0.0f,
		    dH, H);
	for (long i = 0; i < B * H; i++)
		dH[i] = Hd[i] > 0 ? dH[i] : 0.0f;
	cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, I, H, B, 1.0f, X, I, dH, H, 0.0f,
		    dW1, H);
	for (long h = 0; h < H; h++)
		dB1[h] = 0;
	for (long b = 0; b < B; b++)
		for (long h = 0; h < H; h++)
			dB1[h] += dH[b * H + h];
}
#endif

/* One run of the naive version: one par_for over the outermost loop (rows,
 * batch, images or m; the Kronecker nests each split over m, the three run
 * in one call per chunk, in order), or the phases of a multi-output kernel. */
static void naive_run(struct problem *p)
{
	const struct bench *b = p->b;
	static loop_fn *const fns[] = {
		[K_SGEMM] = naive_sgemm, [K_SGEMM_NT] = naive_sgemm_nt,
		[K_BMM] = naive_bmm, [K_CONV2D] = naive_conv2d,
		[K_SOFTMAX] = naive_softmax, [K_LAYERNORM] = naive_layernorm,
		[K_FCRELU] = naive_fcrelu, [K_KRON3] = naive_kron3,
		[K_MLP_FWD] = naive_mlp_fwd, [K_GCONV] = naive_gconv,
		[K_DWCONV] = naive_dwconv, [K_ATTN] = naive_attn, [K_RMSNORM] = naive_rmsnorm,
	};
	switch (b->kind) {
	case K_MLP_BWD:
		par_for(b->in[0].d[0], naive_mlp_bwd_rows, p);
		par_for(b->in[0].d[1], naive_mlp_bwd_dw1, p);
		par_for(b->in[1].d[1], naive_mlp_bwd_dw2, p);
		mlp_bwd_db2(p);
		return;
	case K_SGD: {
		long n = 0;
		for (int t = 0; t < 4; t++)
			n += numel(&b->in[t]);
		par_for(n, naive_sgd, p);
		return;
	}
	case K_WGRAD:
		par_for(b->in[0].d[1], naive_wgrad, p);
		return;
	case K_BIASGRAD:
		par_for(b->in[0].d[1], naive_biasgrad, p);
		return;
	case K_LNBWD:
		par_for(b->in[0].d[0], naive_lnbwd_rows, p);
		par_for(b->in[0].d[1], naive_lnbwd_cols, p);
		return;
	default:
		par_for(b->in[b->kind == K_KRON3 ? 3 : 0].d[0], fns[b->kind], p);
		return;
	}
}

/* One run of IMPL on the problem; returns -1 when IMPL does not exist for
 * this benchmark (with the reason in *why). */
static int run_once(struct problem *p, const char *impl, const char **why)
{
	const struct bench *b = p->b;
	if (!strcmp(impl, "naive")) {
		naive_run(p);
		return 0;
	}
	if (strcmp(impl, "openblas")) {
		*why = "unknown implementation (naive or openblas)";
		return -1;
	}
#ifndef HAVE_OPENBLAS
	(void)b;
	*why = "built without OpenBLAS (cblas.h or -lopenblas not found)";
	return -1;
#else
	switch (b->kind) {
	case K_SGEMM: {
		long M = b->in[0].d[0], K = b->in[0].d[1], N = b->in[1].d[1];
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, p->in[0], K,
			    p->in[1], N, 0.0f, p->out[0], N);
		return 0;
	}
	case K_SGEMM_NT: {
		long M = b->in[0].d[0], K = b->in[0].d[1], N = b->in[1].d[0];
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, p->in[0], K,
			    p->in[1], K, 0.0f, p->out[0], N);
		return 0;
	}
	case K_FCRELU: {
		long B = b->in[0].d[0], Nin = b->in[0].d[1], O = b->in[1].d[0];
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, O, Nin, 1.0f, p->in[0], Nin,
			    p->in[1], Nin, 0.0f, p->out[0], O);
		for (long i = 0; i < B; i++)
			for (long o = 0; o < O; o++) {
				float v = p->out[0][i * O + o] + p->in[2][o];
				p->out[0][i * O + o] = v > 0 ? v : 0;
			}
		return 0;
	}
	case K_BMM:
		par_for(b->in[0].d[0], blas_bmm, p);
		return 0;
	case K_CONV2D:
		par_for(b->in[0].d[0], blas_conv2d, p);
		return 0;
	case K_KRON3:
		par_for(b->in[3].d[0], blas_kron3, p);
		return 0;
	case K_MLP_FWD:
		blas_mlp_fwd(p);
		return 0;
	case K_MLP_BWD:
		blas_mlp_bwd(p);
		return 0;
	case K_SGD: /* W1n = W1, then W1n += -0.01 dW1: a copy and an saxpy each */
		for (int t = 0; t < 4; t++) {
			long n = numel(&b->in[t]);
			cblas_scopy(n, p->in[t], 1, p->out[t], 1);
			cblas_saxpy(n, -0.01f, p->in[t + 4], 1, p->out[t], 1);
		}
		return 0;
	case K_WGRAD: {
		long B = b->in[0].d[0], I = b->in[0].d[1], H = b->in[1].d[1];
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, I, H, B, 1.0f, p->in[0], I,
			    p->in[1], H, 0.0f, p->out[0], H);
		return 0;
	}
	case K_BIASGRAD: { /* dH^T times a vector of ones */
		long B = b->in[0].d[0], H = b->in[0].d[1];
		cblas_sgemv(CblasRowMajor, CblasTrans, B, H, 1.0f, p->in[0], H, p->tmp[0], 1, 0.0f,
			    p->out[0], 1);
		return 0;
	}
	case K_GCONV:
		par_for(b->in[0].d[0], blas_gconv, p);
		return 0;
	case K_ATTN:
		par_for(b->in[0].d[0], blas_attn, p);
		return 0;
	default:
		*why = "no BLAS routine for this operation";
		return -1;
	}
#endif
}

/* Whether IMPL sets OpenBLAS's own threads to THREADS (single big GEMMs)
 * or to 1 (loops of small GEMMs split over the pool). */
static int blas_uses_own_threads(enum kind k)
{
	return k == K_SGEMM || k == K_SGEMM_NT || k == K_FCRELU || k == K_MLP_FWD ||
	       k == K_MLP_BWD || k == K_SGD || k == K_WGRAD || k == K_BIASGRAD;
}

/* Whether the benchmark has an OpenBLAS version (run_once's switch). */
static int has_blas(enum kind k)
{
	return k != K_SOFTMAX && k != K_LAYERNORM && k != K_DWCONV && k != K_RMSNORM &&
	       k != K_LNBWD;
}

/* ---- .npy ------------------------------------------------------------- */

/* Write a tensor of the table as a .npy file: float32, or int64 labels. */
static int npy_write(const char *path, const void *x, const struct tspec *t)
{
	char hdr[256], shape[128] = "";
	int len = 0;
	for (int i = 0; i < t->nd; i++)
		len += snprintf(shape + len, sizeof shape - len, "%ld,%s", t->d[i],
				i + 1 < t->nd ? " " : "");
	if (t->nd > 1 && len > 0)
		shape[len - 1] = 0; /* "(a, b)" but "(a,)" for rank 1 */
	int n = snprintf(hdr, sizeof hdr,
			 "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
			 t->labels > 0 ? "<i8" : "<f4", shape);
	int total = 10 + n + 1, pad = (64 - total % 64) % 64;
	FILE *f = fopen(path, "wb");
	if (!f)
		return -1;
	unsigned short hl = (unsigned short)(n + pad + 1);
	fwrite("\x93NUMPY\x01\x00", 1, 8, f);
	fwrite(&hl, 2, 1, f);
	fwrite(hdr, 1, n, f);
	for (int i = 0; i < pad; i++)
		fputc(' ', f);
	fputc('\n', f);
	size_t cnt = (size_t)numel(t);
	int ok = fwrite(x, (size_t)elem_size(t), cnt, f) == cnt;
	return fclose(f) == 0 && ok ? 0 : -1;
}

/* Read a little-endian float32 .npy file; *shape gets "a,b,c". */
static float *npy_read(const char *path, long *count, char *shape, size_t shape_size)
{
	FILE *f = fopen(path, "rb");
	unsigned char magic[10];
	char hdr[4096];
	if (!f)
		return NULL;
	if (fread(magic, 1, 10, f) != 10 || memcmp(magic, "\x93NUMPY", 6)) {
		fclose(f);
		return NULL;
	}
	unsigned long hl = magic[8] | magic[9] << 8;
	if (magic[6] >= 2) {
		unsigned char ext[2];
		if (fread(ext, 1, 2, f) != 2) {
			fclose(f);
			return NULL;
		}
		hl |= (unsigned long)ext[0] << 16 | (unsigned long)ext[1] << 24;
	}
	if (hl >= sizeof hdr || fread(hdr, 1, hl, f) != hl) {
		fclose(f);
		return NULL;
	}
	hdr[hl] = 0;
	if (!strstr(hdr, "'<f4'") || strstr(hdr, "'fortran_order': True")) {
		fclose(f);
		return NULL;
	}
	const char *s = strstr(hdr, "'shape'");
	size_t k = 0;
	long n = 1, v = -1;
	s = s ? strchr(s, '(') : NULL;
	for (s = s ? s + 1 : ""; *s && *s != ')'; s++) {
		if (*s >= '0' && *s <= '9') {
			v = (v < 0 ? 0 : v * 10) + (*s - '0');
		} else if (*s == ',' && v >= 0) {
			n *= v;
			k += snprintf(shape + k, shape_size - k, "%s%ld", k ? "," : "", v);
			v = -1;
		}
		if (k >= shape_size)
			k = shape_size - 1;
	}
	if (v >= 0) {
		n *= v;
		snprintf(shape + k, shape_size - k, "%s%ld", k ? "," : "", v);
	}
	float *x = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
	if (!x || fread(x, sizeof(float), (size_t)n, f) != (size_t)n) {
		free(x);
		fclose(f);
		return NULL;
	}
	fclose(f);
	*count = n;
	return x;
}

/* compare REF OUT: max |out - ref|, max |ref|, their ratio, non-finite
 * values of OUT, and whether the shapes agree. */
static int cmd_cmp(const char *ref_path, const char *out_path)
{
	char sr[128] = "", so[128] = "";
	long nr = 0, no = 0, bad = 0;
	float *r = npy_read(ref_path, &nr, sr, sizeof sr);
	float *o = npy_read(out_path, &no, so, sizeof so);
	if (!r || !o) {
		printf("{\"error\":\"cannot read %s as float32 .npy\"}\n", !r ? ref_path : out_path);
		return 1;
	}
	double maxdiff = 0, maxref = 0;
	for (long i = 0; i < nr && i < no; i++) {
		if (!isfinite(o[i])) {
			bad++;
			continue;
		}
		double d = fabs((double)o[i] - r[i]);
		maxdiff = d > maxdiff ? d : maxdiff;
		maxref = fabs(r[i]) > maxref ? fabs(r[i]) : maxref;
	}
	printf("{\"shape_ok\":%s,\"ref_shape\":\"%s\",\"out_shape\":\"%s\",\"max_abs_diff\":%.9g,"
	       "\"max_abs_ref\":%.9g,\"rel\":%.9g,\"nonfinite\":%ld}\n",
	       strcmp(sr, so) || nr != no ? "false" : "true", sr, so, maxdiff, maxref,
	       maxref > 0 ? maxdiff / maxref : maxdiff, bad);
	free(r);
	free(o);
	return 0;
}

/* ---- commands --------------------------------------------------------- */

static void print_spec(const struct tspec *t)
{
	printf("{\"name\":\"%s\",\"dtype\":\"%s\",\"shape\":[", t->name,
	       t->labels > 0 ? "int64" : "float32");
	for (int i = 0; i < t->nd; i++)
		printf("%s%ld", i ? "," : "", t->d[i]);
	printf("]");
	if (t->labels > 0)
		printf(",\"labels\":%ld", t->labels);
	printf("}");
}

/* Floating-point operations of one run (a multiply-add counts 2; the bias,
 * ReLU, exp and normalisation are not counted: GB/s is the measure there). */
static double flops(const struct bench *b)
{
	const struct tspec *in = b->in;
	switch (b->kind) {
	case K_SGEMM:
		return 2.0 * in[0].d[0] * in[0].d[1] * in[1].d[1];
	case K_SGEMM_NT:
		return 2.0 * in[0].d[0] * in[0].d[1] * in[1].d[0];
	case K_BMM:
		return 2.0 * in[0].d[0] * in[0].d[1] * in[0].d[2] * in[1].d[2];
	case K_CONV2D:
		return 2.0 * numel(&b->out[0]) * in[1].d[1] * in[1].d[2] * in[1].d[3];
	case K_FCRELU:
		return 2.0 * in[0].d[0] * in[0].d[1] * in[1].d[0];
	case K_KRON3: {
		double M = in[3].d[0], D0 = in[0].d[0], N0 = in[0].d[1], D1 = in[1].d[0],
		       N1 = in[1].d[1], D2 = in[2].d[0], N2 = in[2].d[1];
		return 2.0 * M * (N1 * N2 * D0 * N0 + N2 * D0 * D1 * N1 + D0 * D1 * D2 * N2);
	}
	case K_MLP_FWD: /* X W1 and Hd W2 */
		return 2.0 * in[0].d[0] * in[1].d[1] * (in[0].d[1] + in[3].d[1]);
	case K_MLP_BWD: { /* dW2, dH and dW1 */
		double B = in[0].d[0], I = in[0].d[1], H = in[1].d[1], K = in[2].d[1];
		return 2.0 * B * H * (2 * K + I);
	}
	case K_WGRAD:
		return 2.0 * in[0].d[0] * in[0].d[1] * in[1].d[1];
	case K_GCONV:
		return 2.0 * numel(&b->out[0]) * in[1].d[2] * in[1].d[3] * in[1].d[4];
	case K_DWCONV:
		return 2.0 * numel(&b->out[0]) * in[1].d[1] * in[1].d[2];
	case K_ATTN: /* Q K^T and P V */
		return 4.0 * in[0].d[0] * in[0].d[1] * in[0].d[1] * in[0].d[2];
	default:
		return 0;
	}
}

static void cmd_list(void)
{
	for (size_t i = 0; i < NBENCH; i++) {
		const struct bench *b = &benches[i];
		double bytes = 0;
		for (int j = 0; j < b->nout; j++)
			bytes += 4.0 * numel(&b->out[j]);
		for (int j = 0; j < b->nin; j++)
			bytes += (double)elem_size(&b->in[j]) * numel(&b->in[j]);
		printf("{\"name\":\"%s\",\"entry\":\"%s\",\"quick\":%s,\"inputs\":[", b->name,
		       b->entry, b->quick ? "true" : "false");
		for (int j = 0; j < b->nin; j++) {
			if (j)
				printf(",");
			print_spec(&b->in[j]);
		}
		printf("],\"outputs\":[");
		for (int j = 0; j < b->nout; j++) {
			if (j)
				printf(",");
			print_spec(&b->out[j]);
		}
		printf("],\"output\":");
		print_spec(&b->out[0]);
		printf(",\"flops\":%.0f,\"bytes\":%.0f,\"metric\":\"%s\","
		       "\"openblas\":%s,\"blas_threads\":\"%s\"}\n",
		       flops(b), bytes, flops(b) > 0 ? "gflops" : "gbs",
		       has_blas(b->kind) ? "true" : "false",
		       blas_uses_own_threads(b->kind) ? "openblas" : "pool");
	}
}

static void cmd_info(void)
{
#ifdef HAVE_OPENBLAS
	printf("{\"openblas\":true,\"config\":\"%s\",\"corename\":\"%s\"}\n",
	       openblas_get_config(), openblas_get_corename());
#else
	printf("{\"openblas\":false}\n");
#endif
}

static const struct bench *find_bench(const char *name)
{
	for (size_t i = 0; i < NBENCH; i++)
		if (!strcmp(benches[i].name, name))
			return &benches[i];
	return NULL;
}

static void problem_init(struct problem *p, const struct bench *b, int threads)
{
	memset(p, 0, sizeof *p);
	p->b = b;
	for (int i = 0; i < b->nin; i++) {
		const struct tspec *t = &b->in[i];
		p->in[i] = alloc_floats(numel(t) * (elem_size(t) / 4));
		if (t->labels > 0)
			fill_labels((int64_t *)p->in[i], numel(t), t->labels, (uint64_t)i + 1);
		else
			fill_random(p->in[i], numel(t), (uint64_t)i + 1);
		if (t->scale != 0)
			for (long j = 0; j < numel(t); j++)
				p->in[i][j] *= t->scale;
	}
	for (int i = 0; i < b->nout; i++)
		p->out[i] = alloc_floats(numel(&b->out[i]));
	switch (b->kind) {
	case K_MLP_FWD: /* the logits */
		p->tmp[0] = alloc_floats(b->out[1].d[0] * b->out[1].d[1]);
		break;
	case K_MLP_BWD: /* dL (B,K) and dH (B,H) */
		p->tmp[0] = alloc_floats(b->in[2].d[0] * b->in[2].d[1]);
		p->tmp[1] = alloc_floats(b->in[1].d[0] * b->in[1].d[1]);
		break;
	case K_BIASGRAD: /* a vector of ones for sgemv */
		p->tmp[0] = alloc_floats(b->in[0].d[0]);
		for (long i = 0; i < b->in[0].d[0]; i++)
			p->tmp[0][i] = 1.0f;
		break;
	case K_ATTN: /* the scores (S,S) of one head, per thread */
		for (int t = 0; t < threads; t++)
			p->scratch[t][0] = alloc_floats(b->in[0].d[1] * b->in[0].d[1]);
		break;
	case K_LNBWD: /* the normalised input xh (N,D) */
		p->tmp[0] = alloc_floats(numel(&b->in[0]));
		break;
	case K_GCONV: { /* im2col of one group of one image, per thread */
		const struct tspec *ti = &b->in[0], *tw = &b->in[1];
		long rows = tw->d[2] * tw->d[3] * tw->d[4];
		long cols = (ti->d[3] - tw->d[3] + 1) * (ti->d[4] - tw->d[4] + 1);
		for (int t = 0; t < threads; t++)
			p->scratch[t][0] = alloc_floats(rows * cols);
		break;
	}
	default:
		break;
	}
	if (b->kind == K_KRON3) {
		KRON_DIMS(p);
		long M = b->in[3].d[0];
		p->tmp[0] = alloc_floats(M * N1 * N2 * D0);
		p->tmp[1] = alloc_floats(M * N2 * D0 * D1);
		for (int t = 0; t < threads; t++) {
			p->scratch[t][0] = alloc_floats(N1 * N2 * D0);
			p->scratch[t][1] = alloc_floats(N2 * D0 * D1);
		}
		(void)N0;
		(void)D2;
	}
	if (b->kind == K_CONV2D) {
		const struct tspec *ti = &b->in[0], *tw = &b->in[1];
		long rows = tw->d[1] * tw->d[2] * tw->d[3];
		long cols = (ti->d[2] - tw->d[2] + 1) * (ti->d[3] - tw->d[3] + 1);
		for (int t = 0; t < threads; t++)
			p->scratch[t][0] = alloc_floats(rows * cols);
	}
}

static int cmd_run(const struct bench *b, const char *impl, int threads, int reps,
		   const char *dir)
{
	struct problem p;
	const char *why = NULL;
	char path[4096];

	problem_init(&p, b, threads);
	if (!strcmp(impl, "inputs")) {
		for (int i = 0; i < b->nin; i++) {
			snprintf(path, sizeof path, "%s/in_%s.npy", dir ? dir : ".", b->in[i].name);
			if (npy_write(path, p.in[i], &b->in[i])) {
				fprintf(stderr, "baselines: cannot write %s: %s\n", path,
					strerror(errno));
				return 1;
			}
		}
		printf("{\"ok\":true}\n");
		return 0;
	}
	pool_init(threads);
#ifdef HAVE_OPENBLAS
	openblas_set_num_threads(blas_uses_own_threads(b->kind) ? threads : 1);
#endif
	int n = 0, w = 0, cap = reps + 16;
	double *t = calloc((size_t)cap, sizeof(double)), total = 0, warm = 0, t0;
	if (!t)
		return 1;
	t0 = now_s();
	if (run_once(&p, impl, &why) < 0) {
		printf("{\"error\":\"%s\"}\n", why);
		return 3;
	}
	warm = now_s() - t0;
	w = 1;
	if (warm >= SLOW_RUN && reps > SLOW_REPS)
		reps = SLOW_REPS;
	if (warm >= 1.0) {
		t[n++] = warm; /* a long run: the warm-up is the first sample */
		total = warm;
		w = 0;
	} else {
		while (w < 3 && warm < 0.2) {
			t0 = now_s();
			run_once(&p, impl, &why);
			warm += now_s() - t0;
			w++;
		}
	}
	while ((n < reps || total < MIN_TIME) && (n == 0 || total < MAX_TIME)) {
		if (n == cap) {
			cap *= 2;
			if (!(t = realloc(t, (size_t)cap * sizeof(double))))
				return 1;
		}
		t0 = now_s();
		run_once(&p, impl, &why);
		t[n] = now_s() - t0;
		total += t[n++];
	}
	if (dir) {
		for (int i = 0; i < b->nout; i++) {
			snprintf(path, sizeof path, "%s/out_%s_%s.npy", dir, impl, b->out[i].name);
			if (npy_write(path, p.out[i], &b->out[i])) {
				fprintf(stderr, "baselines: cannot write %s: %s\n", path,
					strerror(errno));
				return 1;
			}
		}
	}
	qsort(t, (size_t)n, sizeof(double), cmp_double);
	printf("{\"median_ms\":%.6f,\"min_ms\":%.6f,\"runs\":%d,\"warmup\":%d}\n",
	       1e3 * (n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2), 1e3 * t[0], n, w);
	fflush(stdout);
	_exit(0); /* the pool's threads wait on a barrier: do not join them */
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "list")) {
		cmd_list();
		return 0;
	}
	if (argc == 2 && !strcmp(argv[1], "info")) {
		cmd_info();
		return 0;
	}
	if (argc == 4 && !strcmp(argv[1], "cmp"))
		return cmd_cmp(argv[2], argv[3]);
	if (argc == 5 || argc == 6) {
		const struct bench *b = find_bench(argv[1]);
		int threads = atoi(argv[3]), reps = atoi(argv[4]);
		if (!b) {
			fprintf(stderr, "baselines: unknown benchmark '%s' (see baselines list)\n",
				argv[1]);
			return 1;
		}
		if (threads < 1 || threads > MAX_THREADS || reps < 0 ||
		    (reps == 0 && strcmp(argv[2], "inputs"))) {
			fprintf(stderr, "baselines: bad thread count or repetitions\n");
			return 1;
		}
		return cmd_run(b, argv[2], threads, reps, argc == 6 ? argv[5] : NULL);
	}
	fprintf(stderr, "usage: baselines list | info | cmp REF.npy OUT.npy\n"
			"       baselines NAME naive|openblas THREADS REPS [DIR]\n"
			"       baselines NAME inputs 1 0 DIR\n");
	return 1;
}
