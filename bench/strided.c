/* The cost of strided tensors: tc_kernel_run copies a non-compact input into
 * a compact buffer before the run (and computes a non-compact output into
 * one, copied back after), so one compiled kernel serves every layout.
 * This times matmul N x N x N with compact operands against the same
 * kernel given a transposed view of A (strides {1, N}), A or B with padded
 * rows (stride N + 8), and a transposed view of C as the output; and, as
 * the alternative of generated code reading the strides itself, a kernel
 * written for the transposed layout (C(i,j) +=! At(k,i) * B(k,j)) on a
 * compact At, which is the best such code could do.
 *
 *   bench_strided [N [ROUNDS [THREADS]]]   (default 512, 7, 1)
 *
 * Each round times every case once (median of 5 runs after one warm-up),
 * in a fixed order; the median over rounds is printed, so a slow moment of
 * the machine hits every case alike, and the fastest run of each case (on a
 * loaded machine the less disturbed figure).  Results are checked against
 * the compact run. */
#include "tcomp.h"
#include "timing.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const source =
	"def matmul(float(M,K) A, float(K,N) B) -> (C) {\n"
	"    C(m,n) +=! A(m,r_k) * B(r_k,n)\n"
	"}\n"
	"def matmul_tn(float(K,M) At, float(K,N) B) -> (C) {\n"
	"    C(m,n) +=! At(r_k,m) * B(r_k,n)\n"
	"}\n";

enum { NCASES = 6, RUNS = 5, MAXROUNDS = 64 };
static const char *const names[NCASES] = {
	"compact A, B, C",
	"A transposed view (copied)",
	"A rows padded (copied)",
	"B rows padded (copied)",
	"C transposed view (copied back)",
	"kernel for transposed A, compact",
};

static DLTensor tensor(float *data, int64_t *shape, int64_t *strides)
{
	DLTensor t = {data, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, strides, 0};
	return t;
}

int main(int argc, char **argv)
{
	int64_t n = argc > 1 ? atoll(argv[1]) : 512;
	int rounds = argc > 2 ? atoi(argv[2]) : 7, threads = argc > 3 ? atoi(argv[3]) : 1;
	int64_t ld = n + 8, sq[2] = {n, n}, s_t[2] = {1, n}, s_pad[2] = {ld, 1};
	double ms[NCASES][MAXROUNDS], best[NCASES], base = 1, base_best = 1;
	float *a, *at, *apad, *b, *bpad, *c, *ct, *ref;
	tc_context *ctx;
	tc_module *m;
	tc_options *o;
	tc_kernel *k, *kt;
	char th[16];
	int r, i, cse;
	int64_t x, y;

	if (n < 1 || rounds < 1 || rounds > MAXROUNDS || threads < 1) {
		fprintf(stderr, "usage: bench_strided [N [ROUNDS (1..64) [THREADS]]]\n");
		return 2;
	}
	a = malloc((size_t)(n * n) * 4);
	at = malloc((size_t)(n * n) * 4);
	apad = malloc((size_t)(n * ld) * 4);
	b = malloc((size_t)(n * n) * 4);
	bpad = malloc((size_t)(n * ld) * 4);
	c = malloc((size_t)(n * n) * 4);
	ct = malloc((size_t)(n * n) * 4);
	ref = malloc((size_t)(n * n) * 4);
	if (!a || !at || !apad || !b || !bpad || !c || !ct || !ref)
		return 2;
	srand(1);
	for (x = 0; x < n; x++)
		for (y = 0; y < n; y++) {
			a[x * n + y] = apad[x * ld + y] = at[y * n + x] = (float)rand() / RAND_MAX - 0.5f;
			b[x * n + y] = bpad[x * ld + y] = (float)rand() / RAND_MAX - 0.5f;
		}
	ctx = tc_context_new();
	m = ctx ? tc_module_parse(ctx, source, "strided.tc") : NULL;
	o = tc_options_new();
	snprintf(th, sizeof(th), "%d", threads);
	if (!m || !o || tc_options_set(o, "threads", th, ctx) < 0) {
		fprintf(stderr, "%s\n", ctx ? tc_context_error(ctx) : "no context");
		return 1;
	}
	{
		DLTensor ta = tensor(a, sq, NULL), tb = tensor(b, sq, NULL);
		const DLTensor *in[2] = {&ta, &tb};
		k = tc_compile(m, "matmul", in, 2, o);
		kt = k ? tc_compile(m, "matmul_tn", in, 2, o) : NULL;
		if (!kt) {
			fprintf(stderr, "%s\n", tc_context_error(ctx));
			return 1;
		}
	}
	for (r = 0; r < rounds; r++)
		for (cse = 0; cse < NCASES; cse++) {
			DLTensor ta = tensor(a, sq, NULL), tb = tensor(b, sq, NULL),
				 tc = tensor(c, sq, NULL);
			double t[RUNS];
			tc_kernel *kk = k;
			if (cse == 1)
				ta = tensor(at, sq, s_t);
			else if (cse == 2)
				ta = tensor(apad, sq, s_pad);
			else if (cse == 3)
				tb = tensor(bpad, sq, s_pad);
			else if (cse == 4)
				tc = tensor(ct, sq, s_t);
			else if (cse == 5) {
				ta = tensor(at, sq, NULL);
				kk = kt;
			}
			const DLTensor *in[2] = {&ta, &tb};
			DLTensor *out[1] = {&tc};
			for (i = -1; i < RUNS; i++) {
				double t0 = bench_wall_ms();
				if (tc_kernel_run(kk, in, 2, out, 1) < 0) {
					fprintf(stderr, "%s\n", tc_context_error(ctx));
					return 1;
				}
				if (i >= 0)
					t[i] = bench_wall_ms() - t0;
			}
			bench_sort(t, RUNS);
			ms[cse][r] = t[RUNS / 2];
			if (r == 0 || t[0] < best[cse])
				best[cse] = t[0];
			if (cse == 0 && r == 0)
				memcpy(ref, c, (size_t)(n * n) * 4);
			for (x = 0; x < n; x++) /* every case computes the same C */
				for (y = 0; y < n; y++) {
					float got = cse == 4 ? ct[y * n + x] : c[x * n + y];
					if (!(fabsf(got - ref[x * n + y]) <= 1e-4f * (1 + fabsf(ref[x * n + y])))) {
						fprintf(stderr, "%s: C(%lld,%lld) is %g, not %g\n", names[cse],
							(long long)x, (long long)y, got, ref[x * n + y]);
						return 1;
					}
				}
		}
	printf("matmul %lld^3 float32, threads=%d: median of %d rounds (each the median of %d "
	       "runs), and the fastest run\n",
		(long long)n, threads, rounds, RUNS);
	for (cse = 0; cse < NCASES; cse++) {
		double med;
		bench_sort(ms[cse], (size_t)rounds);
		med = ms[cse][rounds / 2];
		if (cse == 0) {
			base = med;
			base_best = best[0];
		}
		printf("  %-34s median %9.3f ms %+6.1f%%   fastest %9.3f ms %+6.1f%%\n", names[cse],
			med, 100 * (med / base - 1), best[cse], 100 * (best[cse] / base_best - 1));
	}
	tc_kernel_free(k);
	tc_kernel_free(kt);
	tc_options_free(o);
	tc_module_free(m);
	tc_context_free(ctx);
	free(a);
	free(at);
	free(apad);
	free(b);
	free(bpad);
	free(c);
	free(ct);
	free(ref);
	return 0;
}
