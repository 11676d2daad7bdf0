/* Kernel cache hit latency: source text to a callable kernel when the
 * kernel cache has the kernel's options, with and without stored object
 * code, against a cold compile (no cache).  Each sample parses a fresh
 * module (so no memo hits) and calls tc_compile with NULL options: parse,
 * checks, the cache lookup (SQLite open and queries), then either the whole
 * isl + LLVM pipeline or, with object code, loading the object into the
 * JIT.  "warm" samples reuse one context (its JIT exists); "fresh" samples
 * create a new context each time (creating the JIT is included).
 *
 *   bench_cache_hit [REPEATS [M K N]]   (matmul M x K times K x N; default 20, 256 256 256)
 *
 * The cache is a temporary file in $TMPDIR (removed at the end); the user's
 * cache is not touched. */
#include "tcomp.h"
#include "timing.h"

#include "../runtime/cache_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const source =
	"def matmul(float(M,K) A, float(K,N) B) -> (C) {\n"
	"    C(m,n) +=! A(m,r_k) * B(r_k,n)\n"
	"}\n";

static const char *const tuned = "tile=64,64\nregtile=6,2\n";

static int64_t sa[2], sb[2];

static void inputs(DLTensor *a, DLTensor *b, const DLTensor **in)
{
	DLTensor t = {NULL, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, NULL, NULL, 0};
	*a = t;
	*b = t;
	a->shape = sa;
	b->shape = sb;
	in[0] = a;
	in[1] = b;
}

/* One compile in ctx reading cache (NULL: none): milliseconds, or -1.
 * *src gets the options' source. */
static double compile_once(tc_context *ctx, const char **src)
{
	DLTensor a, b;
	const DLTensor *in[2];
	double t0, t;
	tc_module *m;
	tc_kernel *k;
	inputs(&a, &b, in);
	t0 = bench_wall_ms();
	m = tc_module_parse(ctx, source, "bench.tc");
	k = m ? tc_compile(m, "matmul", in, 2, NULL) : NULL;
	t = bench_wall_ms() - t0;
	if (!k) {
		fprintf(stderr, "%s", tc_context_error(ctx));
		t = -1;
	}
	*src = k ? tc_kernel_options_source(k) : "error";
	tc_kernel_free(k);
	tc_module_free(m);
	return t;
}

/* Time reps compiles: fresh contexts or one warm one. */
static void measure(const char *label, const char *cache, int fresh, int reps)
{
	double *t = calloc((size_t)reps, sizeof(double)), first = 0;
	tc_context *ctx = NULL;
	const char *src = "?";
	int i;
	for (i = 0; i < reps; i++) {
		if (fresh || !ctx) {
			tc_context_free(ctx);
			ctx = tc_context_new();
			tc_context_set_cache(ctx, cache ? cache : "");
			if (!fresh) /* create the JIT first: a warm context */
				first = compile_once(ctx, &src);
		}
		t[i] = compile_once(ctx, &src);
		if (t[i] < 0)
			exit(1);
	}
	bench_sort(t, (size_t)reps);
	printf("%-34s %-8s median %8.3f ms  min %8.3f ms", label, src, t[reps / 2], t[0]);
	if (!fresh)
		printf("  (first, creating the JIT: %.3f ms)", first);
	printf("\n");
	tc_context_free(ctx);
	free(t);
}

int main(int argc, char **argv)
{
	int reps = argc > 1 ? atoi(argv[1]) : 20;
	const char *tmp = getenv("TMPDIR");
	char path[512], *msg = NULL;
	tc_context *ctx;
	tc_module *m;
	tc_cache *c;
	tc_cache_key key;
	DLTensor a, b;
	const DLTensor *in[2];
	tc_cache_run run = {tuned, 1.0, 1.0, "bench", 1};

	sa[0] = argc > 4 ? atoll(argv[2]) : 256;
	sa[1] = sb[0] = argc > 4 ? atoll(argv[3]) : 256;
	sb[1] = argc > 4 ? atoll(argv[4]) : 256;
	if (reps < 1)
		reps = 1;
	snprintf(path, sizeof(path), "%s/tcomp-bench-cache-%d.sqlite", tmp ? tmp : "/tmp",
		(int)getpid());
	/* a cache with the tuned options; then one with object code too */
	ctx = tc_context_new();
	m = tc_module_parse(ctx, source, "bench.tc");
	inputs(&a, &b, in);
	if (!m || tc_cache_key_init(&key, m, "matmul", in, 2) < 0 ||
		!(c = tc_cache_open(path, TC_CACHE_WRITE, &msg)) || tc_cache_record(c, &key, &run) < 0) {
		fprintf(stderr, "bench_cache_hit: cannot set up the cache: %s%s\n",
			msg ? msg : "", tc_context_error(ctx));
		return 1;
	}
	printf("matmul %lldx%lld times %lldx%lld, %d samples each\n", (long long)sa[0],
		(long long)sa[1], (long long)sb[0], (long long)sb[1], reps);
	measure("cold compile (no cache), warm ctx", NULL, 0, reps);
	measure("cold compile (no cache), fresh ctx", NULL, 1, reps);
	measure("cache hit, options only, warm ctx", path, 0, reps);
	if (tc_cache_store_object(c, &key, m, in, 2, tuned) < 0) {
		fprintf(stderr, "bench_cache_hit: %s\n", tc_cache_error(c));
		return 1;
	}
	measure("cache hit with object, warm ctx", path, 0, reps);
	measure("cache hit with object, fresh ctx", path, 1, reps);
	tc_cache_close(c);
	tc_cache_key_clear(&key);
	tc_module_free(m);
	tc_context_free(ctx);
	unlink(path);
	strcat(path, "-wal");
	unlink(path);
	path[strlen(path) - 4] = 0;
	strcat(path, "-shm");
	unlink(path);
	return 0;
}
