/* Compile latency: source text to a callable kernel, for matmul and
 * softmax, through the public API.  Each sample parses a fresh module from
 * the text and compiles it for the CPU (so the memo never hits): parse,
 * checks, range inference, IR, isl model and scheduling, AST, LLVM IR, O3,
 * JIT.  The JIT itself is created once per context; the first sample of a
 * fresh context (which includes creating it) is reported apart.
 *
 *   bench_compile [REPEATS]      prints one line per kernel: median, min, first */
#include "tcomp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const source =
	"def matmul(float(M,K) A, float(K,N) B) -> (C) {\n"
	"    C(m,n) +=! A(m,r_k) * B(r_k,n)\n"
	"}\n"
	"def softmax(float(N,D) I) -> (O) {\n"
	"    mx(n) max=! I(n,r_d)\n"
	"    sm(n) +=! exp(I(n,r_d) - mx(n))\n"
	"    O(n,d) = exp(I(n,d) - mx(n)) / sm(n)\n"
	"}\n";

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* One cold compile of entry in ctx: milliseconds, or -1. */
static double compile_once(tc_context *ctx, const char *entry, int64_t *sa, int64_t *sb, int two)
{
	DLTensor a = {NULL, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sa, NULL, 0};
	DLTensor b = {NULL, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sb, NULL, 0};
	const DLTensor *in[2] = {&a, &b};
	double t0 = now_ms(), t;
	tc_module *m = tc_module_parse(ctx, source, "bench.tc");
	tc_kernel *k = m ? tc_compile(m, entry, in, two ? 2 : 1, NULL) : NULL;
	t = now_ms() - t0;
	if (!k) {
		fprintf(stderr, "%s", tc_context_error(ctx));
		t = -1;
	}
	tc_kernel_free(k);
	tc_module_free(m);
	return t;
}

int main(int argc, char **argv)
{
	int reps = argc > 1 ? atoi(argv[1]) : 30, e, i;
	static const char *const entries[] = {"matmul", "softmax"};
	int64_t sa[2] = {1024, 1024}, sb[2] = {1024, 1024};

	if (reps < 1)
		reps = 1;
	printf("compile latency, source text to callable kernel (%d cold compiles each)\n", reps);
	for (e = 0; e < 2; e++) {
		double *t = calloc((size_t)reps, sizeof(double)), first;
		tc_context *ctx = tc_context_new();
		if (!t || !ctx || tc_context_set_cache(ctx, "") < 0) /* cold: no kernel cache */
			return 2;
		first = compile_once(ctx, entries[e], sa, sb, e == 0); /* creates the JIT */
		for (i = 0; i < reps; i++)
			if ((t[i] = compile_once(ctx, entries[e], sa, sb, e == 0)) < 0)
				return 1;
		qsort(t, (size_t)reps, sizeof(double), cmp);
		printf("%-8s median %7.2f ms  min %7.2f ms  first in a new context %7.2f ms\n",
			entries[e], t[reps / 2], t[0], first);
		free(t);
		tc_context_free(ctx);
	}
	return 0;
}
