/* Matmul GFLOP/s: tcomp's compiled kernel (default options: the isl
 * scheduler's schedule, no tiling yet) against a naive C triple loop compiled
 * with -O3 -march=native, measured in the same run on the same buffers.
 * Buffers are allocated and touched once (pages faulted in) and reused;
 * each variant is warmed up, then timed RUNS times; the median is reported.
 *
 *   bench_matmul [N] [RUNS] [THREADS-is-1-only] */
#include "tcomp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The naive loop: i, j, k with the k loop innermost, as written by hand. */
static void naive(int n, const float *a, const float *b, float *c)
{
	int i, j, k;
	for (i = 0; i < n; i++)
		for (j = 0; j < n; j++) {
			float s = 0;
			for (k = 0; k < n; k++)
				s += a[(size_t)i * n + k] * b[(size_t)k * n + j];
			c[(size_t)i * n + j] = s;
		}
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1024, runs = argc > 2 ? atoi(argv[2]) : 5, r;
	size_t nn = (size_t)n * n;
	float *a = malloc(nn * 4), *b = malloc(nn * 4), *c = malloc(nn * 4), *c2 = malloc(nn * 4);
	double *t = calloc((size_t)runs, sizeof(double)), flops = 2.0 * n * n * n, err = 0;
	int64_t sa[2] = {n, n}, sb[2] = {n, n}, sc[2] = {n, n};
	DLTensor A = {a, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sa, NULL, 0};
	DLTensor B = {b, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sb, NULL, 0};
	DLTensor C = {c, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sc, NULL, 0};
	const DLTensor *in[2] = {&A, &B};
	DLTensor *out[1] = {&C};
	tc_context *ctx = tc_context_new();
	tc_module *m;
	tc_kernel *k;
	size_t i;

	if (!a || !b || !c || !c2 || !t || !ctx || runs < 1 ||
		tc_context_set_cache(ctx, "") < 0) /* the defaults, not a tuned entry */
		return 2;
	srand(1);
	for (i = 0; i < nn; i++) { /* fills and faults the pages in */
		a[i] = (float)rand() / RAND_MAX - 0.5f;
		b[i] = (float)rand() / RAND_MAX - 0.5f;
		c[i] = c2[i] = 0;
	}
	m = tc_module_parse(ctx, "def matmul(float(M,K) A, float(K,N) B) -> (C) {\n"
				 "    C(m,n) +=! A(m,r_k) * B(r_k,n)\n}\n", "matmul.tc");
	k = m ? tc_compile(m, "matmul", in, 2, NULL) : NULL;
	if (!k) {
		fprintf(stderr, "%s", tc_context_error(ctx));
		return 1;
	}
	printf("matmul %dx%dx%d float32, 1 thread, median of %d runs after a warm-up\n", n, n, n,
		runs);
	tc_kernel_run(k, in, 2, out, 1);
	for (r = 0; r < runs; r++) {
		double t0 = now_s();
		if (tc_kernel_run(k, in, 2, out, 1) < 0) {
			fprintf(stderr, "%s", tc_context_error(ctx));
			return 1;
		}
		t[r] = now_s() - t0;
	}
	qsort(t, (size_t)runs, sizeof(double), cmp);
	printf("tcomp (default options) %8.2f ms  %7.2f GFLOP/s\n", t[runs / 2] * 1e3,
		flops / t[runs / 2] / 1e9);
	naive(n, a, b, c2);
	for (r = 0; r < runs; r++) {
		double t0 = now_s();
		naive(n, a, b, c2);
		t[r] = now_s() - t0;
	}
	qsort(t, (size_t)runs, sizeof(double), cmp);
	printf("naive C (-O3 -march=native) %8.2f ms  %7.2f GFLOP/s\n", t[runs / 2] * 1e3,
		flops / t[runs / 2] / 1e9);
	for (i = 0; i < nn; i++) /* the two agree */
		if (c[i] - c2[i] > err || c2[i] - c[i] > err)
			err = c[i] > c2[i] ? c[i] - c2[i] : c2[i] - c[i];
	printf("largest difference between the two: %.3g\n", err);
	tc_kernel_free(k);
	tc_module_free(m);
	tc_context_free(ctx);
	free(a);
	free(b);
	free(c);
	free(c2);
	free(t);
	return 0;
}
