/* Concurrency through the public API (see "Threads" in include/tcomp.h):
 *
 *   runs      one compiled (target cpu) kernel, matmul 64x48x32 or softmax
 *             37x61 (which has temporaries, so it takes workspaces from the
 *             kernel's pool), run from 2 and from 4 threads at once, RUNS
 *             times per thread (and softmax on target interp from 4
 *             threads, fewer times); every thread has its own random
 *             inputs and outputs (fresh inputs and NaN-poisoned outputs
 *             before each run) and checks every result against plain C
 *             loops;
 *   errors    errors are per thread: one thread runs matmul successfully in
 *             a loop and sees "" after each run while another provokes
 *             errors on the same context (wrong shapes, out-of-range
 *             gathers in a second kernel of the same module) and sees its
 *             own messages, with the numbers it provoked; the main thread's
 *             own earlier error survives both;
 *   compile   tc_compile from 2 threads at once on the same fresh module,
 *             same shapes (one memo entry), different shapes, and the same
 *             shapes for different targets: every kernel returned works;
 *   free      kernels freed on other threads than the one that compiled
 *             them, including the last reference to their module, and
 *             several handles on one memoised kernel freed from 4 threads
 *             at once while they run it.
 *
 * cmocka's assertions must not be used off the main thread (they longjmp
 * into the test), so worker threads record failures in their job (a count
 * and the first message) and the main thread asserts after joining.
 * Threads start together at a barrier.  The tests are meant for the
 * sanitizer build too (TCOMP_SANITIZE=ON: ASan and UBSan), where they also
 * check that no handle is freed twice or leaked. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_SET */
#include <float.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tcomp.h"
#include "runtime/pool.h" /* tc_rt_cpus */
#include "tests/testutil.h"

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#define RUNS 200        /* runs per thread in the "runs" tests */
#define MAX_THREADS 4

/* The module every test parses (filename "threads.tc").  The gather read is
 * on line 10. */
static const char source[] =
	"def matmul(float(M,K) A, float(K,N) B) -> (C) {\n"
	"    C(m,n) +=! A(m,r_k) * B(r_k,n)\n"
	"}\n"
	"def softmax(float(N,D) I) -> (O) {\n"
	"    mx(n) max=! I(n,r_d)\n"
	"    sm(n) +=! exp(I(n,r_d) - mx(n))\n"
	"    O(n,d) = exp(I(n,d) - mx(n)) / sm(n)\n"
	"}\n"
	"def gather_rows(float(V,D) LUT, int32(B) I) -> (O) {\n"
	"    O(i,j) = LUT(I(i),j)\n"
	"}\n";

/* ---- problems: a kernel, its shapes, random inputs and C loops ---- */

typedef struct problem {
	const char *entry;
	int64_t in_shape[2][2]; /* two rank-2 inputs at most */
	int nin;
	int64_t out_shape[2];
	double rtol, atol;
	/* Fill the inputs from rng and compute the expected output. */
	void (*fill)(const struct problem *p, uint64_t *rng, tu_tensor *in, tu_tensor *want);
} problem;

static void fill_uniform(tu_tensor *t, uint64_t *rng, double lo, double hi)
{
	float *p = t->data;
	for (int64_t i = 0; i < t->numel; i++)
		p[i] = (float)(lo + (hi - lo) * tu_rand_unit(rng));
}

/* C(m,n) = sum over k in natural order with a float accumulator. */
static void fill_matmul(const problem *p, uint64_t *rng, tu_tensor *in, tu_tensor *want)
{
	int64_t M = p->in_shape[0][0], K = p->in_shape[0][1], N = p->in_shape[1][1];
	fill_uniform(&in[0], rng, -1, 1);
	fill_uniform(&in[1], rng, -1, 1);
	const float *A = in[0].data, *B = in[1].data;
	float *C = want->data;
	for (int64_t m = 0; m < M; m++)
		for (int64_t n = 0; n < N; n++) {
			float acc = 0;
			for (int64_t k = 0; k < K; k++)
				acc += A[m * K + k] * B[k * N + n];
			C[m * N + n] = acc;
		}
}

/* Row maximum, sum of exponentials (exp in double, rounded), divide. */
static void fill_softmax(const problem *p, uint64_t *rng, tu_tensor *in, tu_tensor *want)
{
	int64_t N = p->in_shape[0][0], D = p->in_shape[0][1];
	fill_uniform(&in[0], rng, -3, 3);
	const float *I = in[0].data;
	float *O = want->data;
	for (int64_t n = 0; n < N; n++) {
		float mx = -FLT_MAX, sm = 0;
		for (int64_t d = 0; d < D; d++)
			mx = (float)fmax(mx, I[n * D + d]);
		for (int64_t d = 0; d < D; d++)
			sm += (float)exp(I[n * D + d] - mx);
		for (int64_t d = 0; d < D; d++)
			O[n * D + d] = (float)exp(I[n * D + d] - mx) / sm;
	}
}

static const problem matmul_64x48x32 = {
	"matmul", {{64, 48}, {48, 32}}, 2, {64, 32}, 1e-5, 1e-6 * 48, fill_matmul};
static const problem matmul_17x5x9 = {
	"matmul", {{17, 5}, {5, 9}}, 2, {17, 9}, 1e-5, 1e-6 * 5, fill_matmul};
static const problem softmax_37x61 = {
	"softmax", {{37, 61}}, 1, {37, 61}, 1e-5, 1e-7, fill_softmax};

/* ---- a worker's record of failures ---- */

typedef struct job {
	int id;
	uint64_t rng;
	tc_context *ctx;
	tc_module *m;
	tc_kernel *k, *k2;
	const problem *p;
	const tc_options *options;
	pthread_barrier_t *start;
	int runs;     /* runs done */
	int runs_wanted; /* runs to do in runs_thread (0: RUNS) */
	int errors;   /* errors provoked and seen (errors test) */
	int bad;      /* failures */
	char first[1024]; /* the first failure */
} job;

static void job_fail(job *j, const char *fmt, ...)
{
	va_list ap;
	if (j->bad++)
		return;
	va_start(ap, fmt);
	vsnprintf(j->first, sizeof(j->first), fmt, ap);
	va_end(ap);
}

/* The main thread's verdict on finished jobs. */
static void expect_jobs_ok(const job *jobs, int n)
{
	int bad = 0;
	for (int i = 0; i < n; i++)
		if (jobs[i].bad) {
			print_error("thread %d: %d failure(s); the first: %s\n", jobs[i].id, jobs[i].bad,
				jobs[i].first);
			bad++;
		}
	if (bad)
		fail_msg("%d of %d threads failed", bad, n);
}

/* Owned input, output and expected tensors for one problem. */
typedef struct bufs {
	tu_tensor in[2], got, want;
	const DLTensor *ins[2];
	DLTensor *outs[1];
} bufs;

static void bufs_init(bufs *b, const problem *p)
{
	for (int i = 0; i < p->nin; i++) {
		tu_tensor_init(&b->in[i], TU_F32, p->in_shape[i], 2);
		b->ins[i] = &b->in[i].dl;
	}
	tu_tensor_init(&b->got, TU_F32, p->out_shape, 2);
	tu_tensor_init(&b->want, TU_F32, p->out_shape, 2);
	b->outs[0] = &b->got.dl;
}

static void bufs_fini(bufs *b, const problem *p)
{
	for (int i = 0; i < p->nin; i++)
		tu_tensor_fini(&b->in[i]);
	tu_tensor_fini(&b->got);
	tu_tensor_fini(&b->want);
}

/* Fresh inputs, poisoned output, one run of k, the result checked against
 * the loops and the thread's error against "".  Returns 1 if all is well. */
static int run_checked(job *j, tc_kernel *k, const problem *p, bufs *b, const char *what)
{
	p->fill(p, &j->rng, b->in, &b->want);
	tu_poison(&b->got);
	if (tc_kernel_run(k, b->ins, p->nin, b->outs, 1) != 0) {
		job_fail(j, "%s: run %d of %s failed: %s", what, j->runs, p->entry,
			tc_context_error(j->ctx));
		return 0;
	}
	j->runs++;
	const char *err = tc_context_error(j->ctx);
	if (!err || *err) {
		job_fail(j, "%s: after a successful run of %s the thread's error is \"%s\"", what,
			p->entry, err ? err : "(null)");
		return 0;
	}
	const float *got = b->got.data, *want = b->want.data;
	for (int64_t i = 0; i < b->want.numel; i++)
		if (!(fabs((double)got[i] - want[i]) <= p->atol + p->rtol * fabs((double)want[i]))) {
			job_fail(j, "%s: run %d of %s: element %lld is %.9g, expected %.9g", what,
				j->runs, p->entry, (long long)i, got[i], want[i]);
			return 0;
		}
	return 1;
}

/* ---- setup shared by the tests ---- */

static tc_module *parse(tc_context *ctx)
{
	tc_module *m = tc_module_parse(ctx, source, "threads.tc");
	if (!m)
		fail_msg("the module does not parse:\n%s", tc_context_error(ctx));
	return m;
}

/* Compile p's entry from m (data is not read: shapes only). */
static tc_kernel *compile(tc_module *m, tc_context *ctx, const problem *p,
	const tc_options *options)
{
	bufs b;
	bufs_init(&b, p);
	tc_kernel *k = tc_compile(m, p->entry, b.ins, p->nin, options);
	bufs_fini(&b, p);
	if (!k)
		fail_msg("tc_compile(%s) failed:\n%s", p->entry, tc_context_error(ctx));
	return k;
}

static void start_threads(pthread_t *th, job *jobs, int n, void *(*fn)(void *))
{
	for (int i = 0; i < n; i++)
		assert_int_equal(pthread_create(&th[i], NULL, fn, &jobs[i]), 0);
}

static void join_threads(pthread_t *th, int n)
{
	for (int i = 0; i < n; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
}

/* ================================================================
 * runs: one kernel from several threads at once
 * ================================================================ */

static void *runs_thread(void *arg)
{
	job *j = arg;
	bufs b;
	char what[64];
	snprintf(what, sizeof(what), "thread %d", j->id);
	bufs_init(&b, j->p);
	pthread_barrier_wait(j->start);
	int runs = j->runs_wanted ? j->runs_wanted : RUNS;
	for (int r = 0; r < runs; r++)
		if (!run_checked(j, j->k, j->p, &b, what))
			break;
	bufs_fini(&b, j->p);
	return NULL;
}

/* p's kernel compiled with options run from nthreads threads at once, runs
 * times each. */
static void concurrent_runs(const problem *p, const tc_options *options, int nthreads, int runs)
{
	tc_context *ctx = tc_context_new();
	assert_non_null(ctx);
	tc_module *m = parse(ctx);
	tc_kernel *k = compile(m, ctx, p, options);
	pthread_t th[MAX_THREADS];
	job jobs[MAX_THREADS];
	pthread_barrier_t start;
	pthread_barrier_init(&start, NULL, (unsigned)nthreads);
	for (int i = 0; i < nthreads; i++) {
		memset(&jobs[i], 0, sizeof(jobs[i]));
		jobs[i].id = i;
		jobs[i].rng = tu_seed(p->entry, (uint64_t)(nthreads * 10 + i));
		jobs[i].ctx = ctx;
		jobs[i].k = k;
		jobs[i].p = p;
		jobs[i].runs_wanted = runs;
		jobs[i].start = &start;
	}
	start_threads(th, jobs, nthreads, runs_thread);
	join_threads(th, nthreads);
	pthread_barrier_destroy(&start);
	tc_kernel_free(k);
	tc_module_free(m);
	tc_context_free(ctx);
	expect_jobs_ok(jobs, nthreads);
	for (int i = 0; i < nthreads; i++)
		assert_int_equal(jobs[i].runs, runs);
}

/* threads=auto counts the CPUs the process may run on, not those online: a
 * process bound to one CPU (taskset, mpirun --bind-to) runs one thread.
 * Checked in a forked child, whose mask can shrink without touching the
 * test's. */
/* Run fn in a forked child bound to the first CPU of this process's
 * affinity mask; the child exits 0 when fn returns nonzero. */
static void on_one_cpu(int (*fn)(void))
{
	cpu_set_t all;
	pid_t pid;
	int st, first = -1;
	assert_int_equal(sched_getaffinity(0, sizeof(all), &all), 0);
	for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
		if (CPU_ISSET(c, &all))
			first = c;
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		cpu_set_t one;
		CPU_ZERO(&one);
		CPU_SET(first, &one);
		if (sched_setaffinity(0, sizeof(one), &one) != 0)
			_exit(2);
		_exit(fn() ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static int one_cpu_counted(void)
{
	return tc_rt_cpus() == 1;
}

static void test_auto_threads_follow_the_affinity_mask(void **state)
{
	cpu_set_t all;
	(void)state;
	assert_int_equal(sched_getaffinity(0, sizeof(all), &all), 0);
	assert_int_equal(tc_rt_cpus(), CPU_COUNT(&all));
	on_one_cpu(one_cpu_counted);
}

/* The pool's jobs end when their iterations are done, not when every
 * worker has seen them (runtime/pool.c): back-to-back jobs of different
 * sizes, each counting its own iterations in its own array, on 2 and 4
 * threads, in a forked child bound to one CPU (the workers then rarely
 * get to run while the caller works) and in the process as it is.  Every
 * iteration of every job must run exactly once, with its own job's body
 * and data: a worker that woke late for a finished job and took part in
 * the next one would count into the wrong array, run the next job's
 * iterations twice, or leave some out.  No timing is asserted; a job
 * waiting on a worker that cannot run would only be slow. */
#define POOL_JOBS 3000

static void count_iterations(void *const *tensors, int64_t begin, int64_t end, int64_t lo,
	int64_t step)
{
	atomic_int *seen = tensors[0];
	int64_t k;
	for (k = begin; k < end; k++)
		atomic_fetch_add(&seen[lo + k * step], 1);
}

static int pool_jobs_count_once(int threads)
{
	static atomic_int seen[2][97];
	int j, k, bad = 0;
	tc_rt_pool_set_threads(threads);
	for (j = 0; j < POOL_JOBS && !bad; j++) {
		atomic_int *mine = seen[j % 2];
		void *t[1] = {mine};
		int n = 1 + (j * 37) % 97;
		for (k = 0; k < 97; k++)
			atomic_store(&mine[k], 0);
		tc_rt_parallel_for(count_iterations, t, n, 0, 1);
		for (k = 0; k < 97; k++)
			bad |= atomic_load(&mine[k]) != (k < n);
	}
	tc_rt_pool_set_threads(0);
	return bad;
}

static int pool_jobs_ok(void)
{
	return !pool_jobs_count_once(2) && !pool_jobs_count_once(4);
}

static void test_pool_jobs_end_with_their_iterations(void **state)
{
	(void)state;
	assert_true(pool_jobs_ok());
	on_one_cpu(pool_jobs_ok);
}

/* The context's thread count: set and read back, refused out of range,
 * and kernels with threads=auto give the loops' results under each count
 * (a kernel's own threads=N is the per-kernel path, tested above). */
static void test_context_thread_setting(void **state)
{
	(void)state;
	tc_context *ctx = tc_context_new();
	assert_non_null(ctx);
	assert_int_equal(tc_context_threads(ctx), 0);
	assert_int_equal(tc_context_set_threads(ctx, 300), -1);
	assert_non_null(strstr(tc_context_error(ctx), "thread count 300 is out of range"));
	assert_int_equal(tc_context_set_threads(ctx, -1), -1);
	assert_int_equal(tc_context_threads(ctx), 0);
	tc_module *m = parse(ctx);
	const problem *p = &matmul_64x48x32;
	tc_kernel *k = compile(m, ctx, p, NULL);
	job j;
	bufs b;
	memset(&j, 0, sizeof(j));
	j.ctx = ctx;
	j.rng = tu_seed("context threads", 0);
	bufs_init(&b, p);
	for (int n = 0; n <= 3; n++) {
		assert_int_equal(tc_context_set_threads(ctx, n), 0);
		assert_int_equal(tc_context_threads(ctx), n);
		assert_true(run_checked(&j, k, p, &b, "context threads"));
	}
	bufs_fini(&b, p);
	tc_kernel_free(k);
	tc_module_free(m);
	tc_context_free(ctx);
	expect_jobs_ok(&j, 1);
}

static void test_matmul_from_2_threads(void **state)
{
	(void)state;
	concurrent_runs(&matmul_64x48x32, NULL, 2, RUNS);
}

static void test_matmul_from_4_threads(void **state)
{
	(void)state;
	concurrent_runs(&matmul_64x48x32, NULL, 4, RUNS);
}

static void test_softmax_from_2_threads(void **state)
{
	(void)state;
	concurrent_runs(&softmax_37x61, NULL, 2, RUNS);
}

static void test_softmax_from_4_threads(void **state)
{
	(void)state;
	concurrent_runs(&softmax_37x61, NULL, 4, RUNS);
}

/* The interpreter is reentrant too (fewer runs: it is slower). */
static void test_softmax_interp_from_4_threads(void **state)
{
	(void)state;
	tc_options *interp = tc_options_new();
	assert_non_null(interp);
	assert_int_equal(tc_options_set(interp, "target", "interp", NULL), 0);
	concurrent_runs(&softmax_37x61, interp, 4, RUNS / 10);
	tc_options_free(interp);
}

/* Two kernels of one module at once: two threads on matmul, two on
 * softmax. */
static void test_two_kernels_from_4_threads(void **state)
{
	(void)state;
	tc_context *ctx = tc_context_new();
	assert_non_null(ctx);
	tc_module *m = parse(ctx);
	tc_kernel *km = compile(m, ctx, &matmul_64x48x32, NULL);
	tc_kernel *ks = compile(m, ctx, &softmax_37x61, NULL);
	pthread_t th[4];
	job jobs[4];
	pthread_barrier_t start;
	pthread_barrier_init(&start, NULL, 4);
	for (int i = 0; i < 4; i++) {
		memset(&jobs[i], 0, sizeof(jobs[i]));
		jobs[i].id = i;
		jobs[i].rng = tu_seed("two kernels", (uint64_t)i);
		jobs[i].ctx = ctx;
		jobs[i].k = i % 2 ? ks : km;
		jobs[i].p = i % 2 ? &softmax_37x61 : &matmul_64x48x32;
		jobs[i].start = &start;
	}
	start_threads(th, jobs, 4, runs_thread);
	join_threads(th, 4);
	pthread_barrier_destroy(&start);
	tc_kernel_free(km);
	tc_kernel_free(ks);
	tc_module_free(m);
	tc_context_free(ctx);
	expect_jobs_ok(jobs, 4);
}

/* ================================================================
 * errors: kept per thread
 * ================================================================ */

#define ERROR_ROUNDS 100 /* rounds of provoked errors */
#define MIN_GOOD_RUNS 300

static atomic_int errors_done;

/* Runs matmul until the error thread is done (at least MIN_GOOD_RUNS
 * times); its error must be "" after every run. */
static void *good_thread(void *arg)
{
	job *j = arg;
	bufs b;
	bufs_init(&b, j->p);
	pthread_barrier_wait(j->start);
	while (j->runs < MIN_GOOD_RUNS || !atomic_load(&errors_done))
		if (!run_checked(j, j->k, j->p, &b, "the good thread"))
			break;
	bufs_fini(&b, j->p);
	return NULL;
}

/* The thread's error after a failed call: not "", containing every needle,
 * and the same when read again. */
static void expect_own_error(job *j, int rc, const char *what, const char **needles)
{
	const char *err = tc_context_error(j->ctx);
	if (rc == 0) {
		job_fail(j, "%s succeeded", what);
		return;
	}
	if (!err || !*err) {
		job_fail(j, "%s failed with no message", what);
		return;
	}
	for (; *needles; needles++)
		if (!strstr(err, *needles)) {
			job_fail(j, "%s: the message lacks \"%s\"; it is:\n%s", what, *needles, err);
			return;
		}
	if (strcmp(tc_context_error(j->ctx), err) != 0)
		job_fail(j, "%s: the message changed when read again", what);
	j->errors++;
}

/* Provokes errors on the shared context: j->k is the gather kernel, j->k2
 * the good thread's matmul kernel, j->m their module. */
static void *error_thread(void *arg)
{
	job *j = arg;
	tu_tensor lut, idx, out, a, c, bad_b;
	char num[64], shape[64];
	tu_tensor_init(&lut, TU_F32, (const int64_t[]){13, 7}, 2);
	tu_tensor_init(&idx, TU_I32, (const int64_t[]){5}, 1);
	tu_tensor_init(&out, TU_F32, (const int64_t[]){5, 7}, 2);
	tu_tensor_init(&a, TU_F32, matmul_64x48x32.in_shape[0], 2);
	tu_tensor_init(&c, TU_F32, matmul_64x48x32.out_shape, 2);
	fill_uniform(&lut, &j->rng, -1, 1);
	const DLTensor *gin[2] = {&lut.dl, &idx.dl};
	DLTensor *gout[1] = {&out.dl}, *mout[1] = {&c.dl};
	int32_t *I = idx.data;

	pthread_barrier_wait(j->start);
	for (int r = 0; r < ERROR_ROUNDS && !j->bad; r++) {
		/* An index out of range (13 + r % 20, or negative): the message
		 * names this round's index, the tensor and the line. */
		int32_t bad = r % 2 ? 13 + r % 20 : -1 - r % 7;
		for (int i = 0; i < 5; i++)
			I[i] = i;
		I[r % 5] = bad;
		snprintf(num, sizeof(num), "index %d is out of bounds", (int)bad);
		expect_own_error(j, tc_kernel_run(j->k, gin, 2, gout, 1), "the out-of-range gather",
			(const char *[]){num, "'LUT'", "threads.tc:10:", NULL});

		/* The gather on a LUT with 1 to 3 rows too many. */
		lut.shape[0] = 14 + r % 3;
		snprintf(shape, sizeof(shape), "float32[%dx7]", 14 + r % 3);
		expect_own_error(j, tc_kernel_run(j->k, gin, 2, gout, 1), "the gather on wrong shapes",
			(const char *[]){"'LUT'", shape, "compiled for", NULL});
		lut.shape[0] = 13;

		/* The good thread's own kernel, with a B of the wrong height. */
		int64_t K = 49 + r % 4;
		tu_tensor_init(&bad_b, TU_F32, (const int64_t[]){K, 32}, 2);
		const DLTensor *min[2] = {&a.dl, &bad_b.dl};
		snprintf(shape, sizeof(shape), "float32[%lldx32]", (long long)K);
		expect_own_error(j, tc_kernel_run(j->k2, min, 2, mout, 1), "matmul on wrong shapes",
			(const char *[]){"'B'", shape, "compiled for", NULL});
		tu_tensor_fini(&bad_b);

		/* A compile error on the same module: one input of two. */
		tc_kernel *k = tc_compile(j->m, "matmul", min, 1, NULL);
		expect_own_error(j, k ? 0 : -1, "tc_compile with one input",
			(const char *[]){"'matmul' takes 2 inputs", "1 was given", NULL});
		tc_kernel_free(k);

		/* And a good gather: the message is gone again. */
		I[r % 5] = 12;
		if (tc_kernel_run(j->k, gin, 2, gout, 1) != 0)
			job_fail(j, "the good gather failed: %s", tc_context_error(j->ctx));
		else if (*tc_context_error(j->ctx))
			job_fail(j, "after a good gather the error thread's message is \"%s\"",
				tc_context_error(j->ctx));
		else if (((float *)out.data)[(r % 5) * 7] != ((float *)lut.data)[12 * 7])
			job_fail(j, "the good gather read the wrong row");
	}
	atomic_store(&errors_done, 1);
	tu_tensor_fini(&lut);
	tu_tensor_fini(&idx);
	tu_tensor_fini(&out);
	tu_tensor_fini(&a);
	tu_tensor_fini(&c);
	return NULL;
}

static void test_errors_are_per_thread(void **state)
{
	(void)state;
	tc_context *ctx = tc_context_new();
	assert_non_null(ctx);
	tc_module *m = parse(ctx);
	tc_kernel *km = compile(m, ctx, &matmul_64x48x32, NULL);
	tu_tensor lut, idx;
	tu_tensor_init(&lut, TU_F32, (const int64_t[]){13, 7}, 2);
	tu_tensor_init(&idx, TU_I32, (const int64_t[]){5}, 1);
	tc_kernel *kg = tc_compile(m, "gather_rows", (const DLTensor *const[]){&lut.dl, &idx.dl},
		2, NULL);
	tu_tensor_fini(&lut);
	tu_tensor_fini(&idx);
	assert_non_null(kg);

	/* The main thread's own error, which the workers must not touch. */
	assert_null(tc_compile(m, "no_such_def", NULL, 0, NULL));
	char mine[1024];
	snprintf(mine, sizeof(mine), "%s", tc_context_error(ctx));
	assert_true(tu_contains(mine, "no_such_def"));

	pthread_t th[2];
	job jobs[2];
	pthread_barrier_t start;
	pthread_barrier_init(&start, NULL, 2);
	atomic_store(&errors_done, 0);
	for (int i = 0; i < 2; i++) {
		memset(&jobs[i], 0, sizeof(jobs[i]));
		jobs[i].id = i;
		jobs[i].rng = tu_seed("errors", (uint64_t)i);
		jobs[i].ctx = ctx;
		jobs[i].m = m;
		jobs[i].start = &start;
	}
	jobs[0].k = km;
	jobs[0].p = &matmul_64x48x32;
	jobs[1].k = kg;
	jobs[1].k2 = km;
	assert_int_equal(pthread_create(&th[0], NULL, good_thread, &jobs[0]), 0);
	assert_int_equal(pthread_create(&th[1], NULL, error_thread, &jobs[1]), 0);
	join_threads(th, 2);
	pthread_barrier_destroy(&start);

	assert_string_equal(tc_context_error(ctx), mine);
	tc_kernel_free(km);
	tc_kernel_free(kg);
	tc_module_free(m);
	tc_context_free(ctx);
	expect_jobs_ok(jobs, 2);
	assert_true(jobs[0].runs >= MIN_GOOD_RUNS);
	assert_int_equal(jobs[1].errors, 4 * ERROR_ROUNDS);
}

/* ================================================================
 * compile: tc_compile from 2 threads at once on one module
 * ================================================================ */

#define COMPILE_ROUNDS 4 /* fresh context and module each round: empty memo */

/* Compiles j->p with j->options right after the barrier, then runs the
 * kernel a few times; the kernel is left in j->k for the main thread. */
static void *compile_thread(void *arg)
{
	job *j = arg;
	bufs b;
	bufs_init(&b, j->p);
	pthread_barrier_wait(j->start);
	j->k = tc_compile(j->m, j->p->entry, b.ins, j->p->nin, j->options);
	if (!j->k)
		job_fail(j, "tc_compile(%s) failed: %s", j->p->entry, tc_context_error(j->ctx));
	else if (*tc_context_error(j->ctx))
		job_fail(j, "after tc_compile succeeded the error is \"%s\"",
			tc_context_error(j->ctx));
	for (int r = 0; r < 5 && j->k && !j->bad; r++)
		run_checked(j, j->k, j->p, &b, "compile thread");
	bufs_fini(&b, j->p);
	return NULL;
}

/* Two threads compile p0 and p1 (with options o0, o1) at once on a fresh
 * module; the main thread then runs both kernels too, compiles p0 once more
 * (from the memo now) and frees everything. */
static void concurrent_compiles(const problem *p0, const tc_options *o0, const problem *p1,
	const tc_options *o1)
{
	for (int round = 0; round < COMPILE_ROUNDS; round++) {
		tc_context *ctx = tc_context_new();
		assert_non_null(ctx);
		tc_module *m = parse(ctx);
		pthread_t th[2];
		job jobs[2];
		pthread_barrier_t start;
		pthread_barrier_init(&start, NULL, 2);
		for (int i = 0; i < 2; i++) {
			memset(&jobs[i], 0, sizeof(jobs[i]));
			jobs[i].id = i;
			jobs[i].rng = tu_seed("compile", (uint64_t)(round * 2 + i));
			jobs[i].ctx = ctx;
			jobs[i].m = m;
			jobs[i].p = i ? p1 : p0;
			jobs[i].options = i ? o1 : o0;
			jobs[i].start = &start;
		}
		start_threads(th, jobs, 2, compile_thread);
		join_threads(th, 2);
		pthread_barrier_destroy(&start);
		expect_jobs_ok(jobs, 2);

		/* The kernels work on this thread too, and again from the memo. */
		job me = {.id = -1, .rng = tu_seed("compile main", (uint64_t)round), .ctx = ctx};
		tc_kernel *again = compile(m, ctx, p0, o0);
		for (int i = 0; i < 2; i++) {
			bufs b;
			bufs_init(&b, jobs[i].p);
			run_checked(&me, jobs[i].k, jobs[i].p, &b, "main thread");
			if (i == 0)
				run_checked(&me, again, p0, &b, "main thread, memoised");
			bufs_fini(&b, jobs[i].p);
		}
		tc_module_free(m); /* the kernels keep it alive */
		tc_kernel_free(jobs[1].k);
		tc_kernel_free(again);
		tc_kernel_free(jobs[0].k);
		tc_context_free(ctx);
		expect_jobs_ok(&me, 1);
	}
}

static void test_compile_same_shapes_from_2_threads(void **state)
{
	(void)state;
	concurrent_compiles(&matmul_64x48x32, NULL, &matmul_64x48x32, NULL);
}

static void test_compile_different_shapes_from_2_threads(void **state)
{
	(void)state;
	concurrent_compiles(&matmul_64x48x32, NULL, &matmul_17x5x9, NULL);
}

static void test_compile_different_kernels_from_2_threads(void **state)
{
	(void)state;
	concurrent_compiles(&softmax_37x61, NULL, &matmul_17x5x9, NULL);
}

/* The same shapes for the CPU and for the interpreter: two memo entries. */
static void test_compile_cpu_and_interp_from_2_threads(void **state)
{
	(void)state;
	tc_options *interp = tc_options_new();
	assert_non_null(interp);
	assert_int_equal(tc_options_set(interp, "target", "interp", NULL), 0);
	concurrent_compiles(&softmax_37x61, NULL, &softmax_37x61, interp);
	tc_options_free(interp);
}

/* ================================================================
 * free: kernels freed on other threads
 * ================================================================ */

/* Runs j->k (and j->k2 if set) a few times, then frees them (and j->m if
 * set). */
static void *run_and_free_thread(void *arg)
{
	job *j = arg;
	bufs b;
	bufs_init(&b, j->p);
	if (j->start)
		pthread_barrier_wait(j->start);
	for (int r = 0; r < 20 && !j->bad; r++)
		run_checked(j, r % 2 && j->k2 ? j->k2 : j->k, j->p, &b, "freeing thread");
	tc_kernel_free(j->k);
	tc_kernel_free(j->k2);
	j->k = j->k2 = NULL;
	tc_module_free(j->m);
	j->m = NULL;
	bufs_fini(&b, j->p);
	return NULL;
}

/* Compiled here, freed there: the module's last reference goes with the
 * kernel, so the module and the compiled code are freed on that thread. */
static void test_kernel_freed_on_another_thread(void **state)
{
	(void)state;
	tc_context *ctx = tc_context_new();
	assert_non_null(ctx);
	const problem *ps[2] = {&matmul_64x48x32, &softmax_37x61};
	for (int i = 0; i < 2; i++) {
		tc_module *m = parse(ctx);
		job j = {.id = i, .rng = tu_seed("free", (uint64_t)i), .ctx = ctx, .p = ps[i]};
		j.k = compile(m, ctx, ps[i], NULL);
		if (i == 1)
			j.m = m; /* the thread frees the module too, after the kernel */
		else
			tc_module_free(m); /* the kernel holds the last reference */
		pthread_t th;
		assert_int_equal(pthread_create(&th, NULL, run_and_free_thread, &j), 0);
		assert_int_equal(pthread_join(th, NULL), 0);
		expect_jobs_ok(&j, 1);
	}
	/* The context's JIT still works after code was removed from it on other
	 * threads. */
	tc_module *m = parse(ctx);
	tc_kernel *k = compile(m, ctx, &matmul_17x5x9, NULL);
	job me = {.id = -1, .rng = tu_seed("free main", 0), .ctx = ctx};
	bufs b;
	bufs_init(&b, &matmul_17x5x9);
	run_checked(&me, k, &matmul_17x5x9, &b, "main thread");
	bufs_fini(&b, &matmul_17x5x9);
	tc_kernel_free(k);
	tc_module_free(m);
	tc_context_free(ctx);
	expect_jobs_ok(&me, 1);
}

/* Compiled there, freed here. */
static void test_kernel_compiled_on_another_thread(void **state)
{
	(void)state;
	tc_context *ctx = tc_context_new();
	assert_non_null(ctx);
	tc_module *m = parse(ctx);
	job j = {.id = 0, .rng = tu_seed("compiled there", 0), .ctx = ctx, .m = m,
		.p = &softmax_37x61};
	pthread_barrier_t start;
	pthread_barrier_init(&start, NULL, 1);
	j.start = &start;
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, compile_thread, &j), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	pthread_barrier_destroy(&start);
	expect_jobs_ok(&j, 1);
	tc_module_free(m);
	job me = {.id = -1, .rng = tu_seed("compiled there", 1), .ctx = ctx};
	bufs b;
	bufs_init(&b, &softmax_37x61);
	run_checked(&me, j.k, &softmax_37x61, &b, "main thread");
	bufs_fini(&b, &softmax_37x61);
	tc_kernel_free(j.k); /* the last reference: frees the module here */
	tc_context_free(ctx);
	expect_jobs_ok(&me, 1);
}

/* Eight handles on one memoised kernel, run and freed by 4 threads at once
 * (two each); the module's caller reference goes first, so whichever thread
 * frees the last handle frees the module. */
static void test_handles_freed_from_4_threads_at_once(void **state)
{
	(void)state;
	for (int round = 0; round < 4; round++) {
		tc_context *ctx = tc_context_new();
		assert_non_null(ctx);
		tc_module *m = parse(ctx);
		const problem *p = round % 2 ? &softmax_37x61 : &matmul_64x48x32;
		pthread_t th[4];
		job jobs[4];
		pthread_barrier_t start;
		pthread_barrier_init(&start, NULL, 4);
		for (int i = 0; i < 4; i++) {
			memset(&jobs[i], 0, sizeof(jobs[i]));
			jobs[i].id = i;
			jobs[i].rng = tu_seed("handles", (uint64_t)(round * 4 + i));
			jobs[i].ctx = ctx;
			jobs[i].k = compile(m, ctx, p, NULL);
			jobs[i].k2 = compile(m, ctx, p, NULL);
			jobs[i].p = p;
			jobs[i].start = &start;
		}
		tc_module_free(m);
		start_threads(th, jobs, 4, run_and_free_thread);
		join_threads(th, 4);
		pthread_barrier_destroy(&start);
		tc_context_free(ctx);
		expect_jobs_ok(jobs, 4);
	}
}

/* An error about one context survives a successful call on another. */
static void test_errors_are_per_context(void **state)
{
	tc_context *a = tc_context_new(), *b = tc_context_new();
	tc_module *bad, *good;
	(void)state;
	assert_non_null(a);
	assert_non_null(b);
	bad = tc_module_parse(a, "def f(float(N) X) -> (Y) { Y(i) = Z(i) }\n", "a.tc");
	assert_null(bad);
	good = tc_module_parse(b, "def f(float(N) X) -> (Y) { Y(i) = X(i) }\n", "b.tc");
	assert_non_null(good);
	assert_non_null(strstr(tc_context_error(a), "a.tc:1:35: error: unknown tensor or function 'Z'"));
	assert_string_equal(tc_context_error(b), "");
	tc_module_free(good);
	tc_context_free(b);
	tc_context_free(a);
}

typedef struct stale_arg {
	tc_context *ctx;
	pthread_barrier_t *step;
	char seen[256];
} stale_arg;

/* Fail on ctx, wait while the main thread replaces it, then read the error
 * of the new context (which must be "": nothing failed on it). */
static void *stale_worker(void *p)
{
	stale_arg *a = p;
	tc_module *m = tc_module_parse(a->ctx, "def f(float(N) X) -> (Y) { Y(i) = Z(i) }\n", "w.tc");
	tc_module_free(m);
	pthread_barrier_wait(a->step); /* failed */
	pthread_barrier_wait(a->step); /* the main thread made a new context */
	snprintf(a->seen, sizeof(a->seen), "%s", tc_context_error(a->ctx));
	return NULL;
}

/* A context made after another was freed (perhaps at the same address)
 * does not inherit a thread's message about the old one. */
static void test_new_context_has_no_stale_error(void **state)
{
	pthread_barrier_t step;
	pthread_t t;
	stale_arg a;
	(void)state;
	assert_int_equal(pthread_barrier_init(&step, NULL, 2), 0);
	a.ctx = tc_context_new();
	a.step = &step;
	assert_non_null(a.ctx);
	assert_int_equal(pthread_create(&t, NULL, stale_worker, &a), 0);
	pthread_barrier_wait(&step);
	tc_context_free(a.ctx);
	a.ctx = tc_context_new();
	assert_non_null(a.ctx);
	pthread_barrier_wait(&step);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_string_equal(a.seen, "");
	tc_context_free(a.ctx);
	pthread_barrier_destroy(&step);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_auto_threads_follow_the_affinity_mask),
		cmocka_unit_test(test_context_thread_setting),
		cmocka_unit_test(test_pool_jobs_end_with_their_iterations),
		cmocka_unit_test(test_matmul_from_2_threads),
		cmocka_unit_test(test_matmul_from_4_threads),
		cmocka_unit_test(test_softmax_from_2_threads),
		cmocka_unit_test(test_softmax_from_4_threads),
		cmocka_unit_test(test_softmax_interp_from_4_threads),
		cmocka_unit_test(test_two_kernels_from_4_threads),
		cmocka_unit_test(test_errors_are_per_thread),
		cmocka_unit_test(test_errors_are_per_context),
		cmocka_unit_test(test_new_context_has_no_stale_error),
		cmocka_unit_test(test_compile_same_shapes_from_2_threads),
		cmocka_unit_test(test_compile_different_shapes_from_2_threads),
		cmocka_unit_test(test_compile_different_kernels_from_2_threads),
		cmocka_unit_test(test_compile_cpu_and_interp_from_2_threads),
		cmocka_unit_test(test_kernel_freed_on_another_thread),
		cmocka_unit_test(test_kernel_compiled_on_another_thread),
		cmocka_unit_test(test_handles_freed_from_4_threads_at_once),
	};
	return cmocka_run_group_tests_name("threads", tests, NULL, NULL);
}
