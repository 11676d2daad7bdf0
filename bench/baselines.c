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
 *   baselines NAME IMPL THREADS REPS [DIR]
 *       IMPL naive|openblas; time REPS runs after a warm-up and print
 *       {"median_ms":..,"min_ms":..,"runs":..,"warmup":..}; with DIR also
 *       write the output of the last run to DIR/out_<IMPL>.npy
 *   baselines cmp REF.npy OUT.npy        compare two float32 .npy files (JSON)
 *
 * Timing: one warm-up run; when it took at least 1 s it is kept as the first
 * sample (its buffers are faulted in already, so a warm-up would only cost
 * time); otherwise warm-up runs continue to 3 runs or 0.2 s.  Then at least
 * REPS runs and at least MIN_TIME seconds of them, as `tcomp bench --runs
 * --min-time` does, but no more once the timed runs passed MAX_TIME.  Exit status 0 ok,
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
#endif

#define MAX_THREADS 64
#define MAX_TENSORS 4
#define MIN_TIME 0.2 /* seconds: time at least REPS runs and at least this long */
#define MAX_TIME 3.0 /* seconds: but stop after the run that passes this */

/* A tensor of the table: its name in the tcomp def, rank and extents. */
struct tspec {
	const char *name;
	int nd;
	long d[4];
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
};

/* One benchmark: a name for the command line, the tcomp def, whether
 * --quick keeps it, the inputs in the def's parameter order and the output. */
struct bench {
	const char *name;
	enum kind kind;
	const char *entry;
	int quick;
	int nin;
	struct tspec in[MAX_TENSORS];
	struct tspec out;
};

static const struct bench benches[] = {
	{"sgemm_256", K_SGEMM, "matmul", 1, 2,
	 {{"A", 2, {256, 256}}, {"B", 2, {256, 256}}}, {"C", 2, {256, 256}}},
	{"sgemm_512", K_SGEMM, "matmul", 1, 2,
	 {{"A", 2, {512, 512}}, {"B", 2, {512, 512}}}, {"C", 2, {512, 512}}},
	{"sgemm_1024", K_SGEMM, "matmul", 1, 2,
	 {{"A", 2, {1024, 1024}}, {"B", 2, {1024, 1024}}}, {"C", 2, {1024, 1024}}},
	{"sgemm_2048", K_SGEMM, "matmul", 0, 2,
	 {{"A", 2, {2048, 2048}}, {"B", 2, {2048, 2048}}}, {"C", 2, {2048, 2048}}},
	{"sgemm_nt_1024", K_SGEMM_NT, "matmul_nt", 1, 2,
	 {{"A", 2, {1024, 1024}}, {"B", 2, {1024, 1024}}}, {"C", 2, {1024, 1024}}},
	{"bmm_500x26x72x26", K_BMM, "batch_matmul", 1, 2,
	 {{"X", 3, {500, 26, 72}}, {"Y", 3, {500, 72, 26}}}, {"Z", 3, {500, 26, 26}}},
	{"conv2d_8x64x56x56_k3", K_CONV2D, "conv2d", 1, 3,
	 {{"I", 4, {8, 64, 56, 56}}, {"W1", 4, {64, 64, 3, 3}}, {"B", 1, {64}}},
	 {"O", 4, {8, 64, 54, 54}}},
	{"softmax_128x1000", K_SOFTMAX, "softmax", 1, 1,
	 {{"I", 2, {128, 1000}}}, {"O", 2, {128, 1000}}},
	{"softmax_4096x4096", K_SOFTMAX, "softmax", 1, 1,
	 {{"I", 2, {4096, 4096}}}, {"O", 2, {4096, 4096}}},
	{"layernorm_4096x1024", K_LAYERNORM, "layernorm", 1, 3,
	 {{"X", 2, {4096, 1024}}, {"G", 1, {1024}}, {"Bt", 1, {1024}}}, {"Y", 2, {4096, 1024}}},
	{"fcrelu_128x784x128", K_FCRELU, "fcrelu", 1, 3,
	 {{"In", 2, {128, 784}}, {"W", 2, {128, 784}}, {"Bias", 1, {128}}},
	 {"Out", 2, {128, 128}}},
	{"fcrelu_128x128x10", K_FCRELU, "fcrelu", 1, 3,
	 {{"In", 2, {128, 128}}, {"W", 2, {10, 128}}, {"Bias", 1, {10}}},
	 {"Out", 2, {128, 10}}},
	{"kron3_256x16", K_KRON3, "kronecker3", 1, 4,
	 {{"W0", 2, {16, 16}}, {"W1", 2, {16, 16}}, {"W2", 2, {16, 16}},
	  {"X", 4, {256, 16, 16, 16}}},
	 {"Y", 4, {256, 16, 16, 16}}},
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
	float *in[MAX_TENSORS];
	float *out;
	float *tmp[2];      /* naive Kronecker temporaries */
	float *scratch[MAX_THREADS][2]; /* per-thread buffers of the OpenBLAS versions */
};

/* ---- naive C: the loops as written from the definition ----------------- */

static void naive_sgemm(void *c, int tid, long lo, long hi)
{
	struct problem *p = c;
	long M = p->b->in[0].d[0], K = p->b->in[0].d[1], N = p->b->in[1].d[1];
	const float *A = p->in[0], *B = p->in[1];
	float *C = p->out;
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
	float *C = p->out;
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
	float *Z = p->out;
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
	float *O = p->out;
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
		float *o = p->out + n * D, mx = -INFINITY, s = 0;
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
		float *y = p->out + n * D, mean = 0, var = 0;
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
			p->out[b * O + o] = s > 0 ? s : 0;
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
	float *XW0 = p->tmp[0], *XW1 = p->tmp[1], *Y = p->out;
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
			    p->out + b * N * K, K);
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
		float *O = p->out + n * F * Ho * Wo;
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
		kron_step(t1, p->in[2], p->out + m * D0 * D1 * D2, N2, D0 * D1, D2);
	}
}
#endif

/* One run of IMPL on the problem; returns -1 when IMPL does not exist for
 * this benchmark (with the reason in *why). */
static int run_once(struct problem *p, const char *impl, const char **why)
{
	const struct bench *b = p->b;
	if (!strcmp(impl, "naive")) {
		static loop_fn *const fns[] = {
			[K_SGEMM] = naive_sgemm, [K_SGEMM_NT] = naive_sgemm_nt,
			[K_BMM] = naive_bmm, [K_CONV2D] = naive_conv2d,
			[K_SOFTMAX] = naive_softmax, [K_LAYERNORM] = naive_layernorm,
			[K_FCRELU] = naive_fcrelu, [K_KRON3] = naive_kron3,
		};
		/* Outer loop: rows, batch, images or m; the Kronecker nests each
		 * split over m (the three run in one call per chunk, in order). */
		par_for(b->in[b->kind == K_KRON3 ? 3 : 0].d[0], fns[b->kind], p);
		return 0;
	}
	if (strcmp(impl, "openblas")) {
		*why = "unknown implementation (naive or openblas)";
		return -1;
	}
#ifndef HAVE_OPENBLAS
	*why = "built without OpenBLAS (cblas.h or -lopenblas not found)";
	return -1;
#else
	switch (b->kind) {
	case K_SGEMM: {
		long M = b->in[0].d[0], K = b->in[0].d[1], N = b->in[1].d[1];
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, p->in[0], K,
			    p->in[1], N, 0.0f, p->out, N);
		return 0;
	}
	case K_SGEMM_NT: {
		long M = b->in[0].d[0], K = b->in[0].d[1], N = b->in[1].d[0];
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, p->in[0], K,
			    p->in[1], K, 0.0f, p->out, N);
		return 0;
	}
	case K_FCRELU: {
		long B = b->in[0].d[0], Nin = b->in[0].d[1], O = b->in[1].d[0];
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, O, Nin, 1.0f, p->in[0], Nin,
			    p->in[1], Nin, 0.0f, p->out, O);
		for (long i = 0; i < B; i++)
			for (long o = 0; o < O; o++) {
				float v = p->out[i * O + o] + p->in[2][o];
				p->out[i * O + o] = v > 0 ? v : 0;
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
	return k == K_SGEMM || k == K_SGEMM_NT || k == K_FCRELU;
}

/* ---- .npy ------------------------------------------------------------- */

static int npy_write(const char *path, const float *x, const struct tspec *t)
{
	char hdr[256], shape[128] = "";
	int len = 0;
	for (int i = 0; i < t->nd; i++)
		len += snprintf(shape + len, sizeof shape - len, "%ld,%s", t->d[i],
				i + 1 < t->nd ? " " : "");
	if (t->nd > 1 && len > 0)
		shape[len - 1] = 0; /* "(a, b)" but "(a,)" for rank 1 */
	int n = snprintf(hdr, sizeof hdr,
			 "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }", shape);
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
	int ok = fwrite(x, sizeof(float), cnt, f) == cnt;
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
	printf("{\"name\":\"%s\",\"shape\":[", t->name);
	for (int i = 0; i < t->nd; i++)
		printf("%s%ld", i ? "," : "", t->d[i]);
	printf("]}");
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
		return 2.0 * numel(&b->out) * in[1].d[1] * in[1].d[2] * in[1].d[3];
	case K_FCRELU:
		return 2.0 * in[0].d[0] * in[0].d[1] * in[1].d[0];
	case K_KRON3: {
		double M = in[3].d[0], D0 = in[0].d[0], N0 = in[0].d[1], D1 = in[1].d[0],
		       N1 = in[1].d[1], D2 = in[2].d[0], N2 = in[2].d[1];
		return 2.0 * M * (N1 * N2 * D0 * N0 + N2 * D0 * D1 * N1 + D0 * D1 * D2 * N2);
	}
	default:
		return 0;
	}
}

static void cmd_list(void)
{
	for (size_t i = 0; i < NBENCH; i++) {
		const struct bench *b = &benches[i];
		double bytes = 4.0 * numel(&b->out);
		for (int j = 0; j < b->nin; j++)
			bytes += 4.0 * numel(&b->in[j]);
		printf("{\"name\":\"%s\",\"entry\":\"%s\",\"quick\":%s,\"inputs\":[", b->name,
		       b->entry, b->quick ? "true" : "false");
		for (int j = 0; j < b->nin; j++) {
			if (j)
				printf(",");
			print_spec(&b->in[j]);
		}
		printf("],\"output\":");
		print_spec(&b->out);
		printf(",\"flops\":%.0f,\"bytes\":%.0f,\"metric\":\"%s\","
		       "\"openblas\":%s,\"blas_threads\":\"%s\"}\n",
		       flops(b), bytes, flops(b) > 0 ? "gflops" : "gbs",
		       b->kind == K_SOFTMAX || b->kind == K_LAYERNORM ? "false" : "true",
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
		p->in[i] = alloc_floats(numel(&b->in[i]));
		fill_random(p->in[i], numel(&b->in[i]), (uint64_t)i + 1);
	}
	p->out = alloc_floats(numel(&b->out));
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
		snprintf(path, sizeof path, "%s/out_%s.npy", dir, impl);
		if (npy_write(path, p.out, &b->out)) {
			fprintf(stderr, "baselines: cannot write %s: %s\n", path, strerror(errno));
			return 1;
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
