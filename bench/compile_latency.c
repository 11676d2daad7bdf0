/* Compile latency: source text to a callable kernel, through the public
 * API, for matmul at 256 and 1024 (the target: at most 50 ms cold;
 * 100 and 1000, whose tiles leave partial rows, columns and reduction blocks)
 * and the other kernels of bench/kernels.tc at the shapes of bench/
 * baselines.c.  Each sample parses a fresh module from the text and
 * compiles it for the CPU with the default options and no kernel cache (so
 * neither the memo nor the cache hits): parse, checks, range inference, IR,
 * isl model and scheduling, AST, LLVM IR, the LLVM passes, JIT.  The JIT
 * itself is created once per context; the first sample of a fresh context
 * (which includes creating it) is reported apart.
 *
 *   bench_compile [REPEATS [NAME...]]   one line per case: median, min, first
 *                                     (REPEATS cold compiles each, default 10)
 *
 * NAMEs pick cases by name (matmul_256, matmul_1024, softmax, ...); the
 * names are the first word of each line, which bench/ab.py --compile reads. */
#include "tcomp.h"
#include "timing.h"

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
	"}\n"
	"def conv2d(float(N,C,H,W) I, float(F,C,KH,KW) W1, float(F) B) -> (O) {\n"
	"    O(n,f,h,w) +=! I(n,r_c,h+r_kh,w+r_kw) * W1(f,r_c,r_kh,r_kw)\n"
	"    O(n,f,h,w) = O(n,f,h,w) + B(f)\n"
	"}\n"
	"def fcrelu(float(B,I) In, float(O,I) W, float(O) Bias) -> (Out) {\n"
	"    T(b,o) +=! In(b,r_i) * W(o,r_i)\n"
	"    Out(b,o) = fmax(T(b,o) + Bias(o), 0)\n"
	"}\n"
	"def layernorm(float(N,D) X, float(D) G, float(D) Bt) -> (Y) {\n"
	"    mean(n) +=! X(n,r_d)\n"
	"    mean(n) = mean(n) / D\n"
	"    xc(n,d) = X(n,d) - mean(n)\n"
	"    var(n) +=! xc(n,r_d) * xc(n,r_d)\n"
	"    var(n) = var(n) / D\n"
	"    Y(n,d) = xc(n,d) * rsqrt(var(n) + 0.00001) * G(d) + Bt(d)\n"
	"}\n";

#define MAX_IN 3

/* One case: a def compiled for inputs of these shapes (float32). */
typedef struct bench_case {
	const char *name, *entry;
	int nin, ndim[MAX_IN];
	int64_t shape[MAX_IN][4];
} bench_case;

static const bench_case cases[] = {
	{"matmul_256", "matmul", 2, {2, 2}, {{256, 256}, {256, 256}}},
	{"matmul_1024", "matmul", 2, {2, 2}, {{1024, 1024}, {1024, 1024}}},
	{"matmul_100", "matmul", 2, {2, 2}, {{100, 100}, {100, 100}}},
	{"matmul_1000", "matmul", 2, {2, 2}, {{1000, 1000}, {1000, 1000}}},
	{"softmax", "softmax", 1, {2}, {{1024, 1024}}},
	{"conv2d", "conv2d", 3, {4, 4, 1}, {{8, 64, 56, 56}, {64, 64, 3, 3}, {64}}},
	{"fcrelu", "fcrelu", 3, {2, 2, 1}, {{128, 784}, {128, 784}, {128}}},
	{"layernorm", "layernorm", 3, {2, 1, 1}, {{4096, 1024}, {1024}, {1024}}},
};

/* One cold compile of case c in ctx: milliseconds, or -1. */
static double compile_once(tc_context *ctx, const bench_case *c)
{
	DLTensor t[MAX_IN];
	const DLTensor *in[MAX_IN];
	double t0, ms;
	tc_module *m;
	tc_kernel *k;
	int i;
	for (i = 0; i < c->nin; i++) {
		DLTensor x = {NULL, {kDLCPU, 0}, c->ndim[i], {kDLFloat, 32, 1},
			(int64_t *)c->shape[i], NULL, 0};
		t[i] = x;
		in[i] = &t[i];
	}
	t0 = bench_wall_ms();
	m = tc_module_parse(ctx, source, "bench.tc");
	k = m ? tc_compile(m, c->entry, in, c->nin, NULL) : NULL;
	ms = bench_wall_ms() - t0;
	if (!k) {
		fprintf(stderr, "%s: %s", c->name, tc_context_error(ctx));
		ms = -1;
	}
	tc_kernel_free(k);
	tc_module_free(m);
	return ms;
}

/* Whether case name was asked for (no names: every case). */
static int wanted(const char *name, int argc, char **argv)
{
	int i;
	if (argc <= 2)
		return 1;
	for (i = 2; i < argc; i++)
		if (!strcmp(argv[i], name))
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	int reps = argc > 1 ? atoi(argv[1]) : 10, i;
	size_t e;

	if (reps < 1)
		reps = 1;
	printf("compile latency, source text to callable kernel (%d cold compiles each)\n", reps);
	for (e = 0; e < sizeof(cases) / sizeof(cases[0]); e++) {
		double *t, first;
		tc_context *ctx;
		if (!wanted(cases[e].name, argc, argv))
			continue;
		t = calloc((size_t)reps, sizeof(double));
		ctx = tc_context_new();
		if (!t || !ctx || tc_context_set_cache(ctx, "") < 0) /* cold: no kernel cache */
			return 2;
		first = compile_once(ctx, &cases[e]); /* creates the JIT */
		for (i = 0; i < reps; i++)
			if ((t[i] = compile_once(ctx, &cases[e])) < 0)
				return 1;
		bench_sort(t, (size_t)reps);
		printf("%-12s median %7.2f ms  min %7.2f ms  first in a new context %7.2f ms\n",
			cases[e].name, t[reps / 2], t[0], first);
		fflush(stdout);
		free(t);
		tc_context_free(ctx);
	}
	return 0;
}
