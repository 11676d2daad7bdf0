/* tcomp's thread pool: persistent workers that run the iterations of the
 * parallel loops of compiled kernels (codegen/llvm.h: parallel_for).
 *
 * The workers are started on first use, one fewer than the threads wanted
 * (the calling thread works too), and then wait for jobs.  A job is one
 * parallel loop: its iterations are handed out in chunks through an atomic
 * counter.  One job runs at a time; a kernel whose loop arrives while the
 * pool is busy (another thread's kernel) runs it on its own thread, so runs
 * from several threads never wait for each other or deadlock.
 *
 * Waking a sleeping thread through a condition variable takes tens of
 * microseconds on this kind of machine, as long as a small kernel's whole
 * parallel loop, so both sides spin first: a worker polls for the next job
 * for up to SPIN_NS after finishing one (kernels called in a loop find
 * their workers awake), and the calling thread polls for the job's end
 * for as long, before either sleeps on its condition variable.
 *
 * A job ends when its iterations are done, not when every worker has seen
 * it: a worker that another process keeps off its CPU claims nothing, and
 * the calling thread runs the chunks it would have taken.  (Waiting for
 * every worker made a 2-thread weight gradient of 1.5 us take 420 us with
 * one busy process on the machine, docs/performance.md.)  Chunks are
 * claimed with a compare-and-swap of one word holding the job's
 * generation (high 32 bits) and the next iteration (low 32 bits), so a
 * worker that wakes late for a finished job claims nothing of the next
 * one; a worker copies the job under the lock; loops of 2^32 iterations
 * or more run on the calling thread alone.
 *
 * fork(): a child process has only the thread that forked, so a handler
 * registered with pthread_atfork (when the first worker starts) makes the
 * child forget the parent's workers and start its own on first use; the
 * autotuner compiles and times candidates in forked children. */
#define _GNU_SOURCE /* sched_getaffinity */
#include "pool.h"

#include "../lang/util.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#define MAX_WORKERS 255
#define SPIN_NS 200000 /* how long a thread polls before it sleeps */

typedef struct job {
	tc_rt_loop_body body;
	void *const *tensors;
	int64_t count, lo, step;
	int nworkers;  /* workers taking part, beside the caller */
	uint64_t tag;  /* the generation that posted it, low 32 bits */
} job;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work = PTHREAD_COND_INITIALIZER, done = PTHREAD_COND_INITIALIZER;
static pthread_t workers[MAX_WORKERS];
static int nworkers;
static int busy;
static atomic_uint_fast64_t generation; /* changed under the lock; polled without */
static job current; /* written and copied under the lock */
static atomic_uint_fast64_t claim; /* current.tag << 32 | the next iteration to claim */
static atomic_int_fast64_t completed; /* iterations of the current job done */
static _Thread_local int wanted; /* threads for this thread's kernel runs; 0: all */

/* The iterations a thread claims when left of them remain, threads
 * sharing the job: half of an even share of what is left, at least one
 * (guided scheduling).  Chunks shrink as the job ends, so the threads
 * finish within about one iteration of each other, where fixed chunks of
 * a quarter of a thread's share (the rule before) left them a chunk
 * apart: sgemm 1024 on two threads has 22 blocks of 48 rows, chunks of 2
 * blocks, 6 chunks on one thread and 5 on the other (docs/performance.md,
 * "Guided chunks").  The claims stay few: about 2 x threads x ln(count /
 * threads), 25 for 1000 iterations on two threads. */
static int64_t guided_chunk(int64_t left, int threads)
{
	int64_t c = left / (2 * (int64_t)threads);
	return c < 1 ? 1 : c;
}

/* Claim and run chunks of job j (a copy of the job its tag posted) while
 * it is the current one and has iterations left; a worker (wake set) that
 * completes the job wakes the calling thread, which needs no wake-up of
 * its own. */
static void run_chunks(const job *j, int wake)
{
	uint_fast64_t v = atomic_load_explicit(&claim, memory_order_acquire);
	for (;;) {
		int64_t b = (int64_t)(v & 0xffffffffu), e;
		if (v >> 32 != j->tag || b >= j->count)
			return;
		e = b + guided_chunk(j->count - b, j->nworkers + 1);
		if (!atomic_compare_exchange_weak_explicit(&claim, &v, j->tag << 32 | (uint64_t)e,
			memory_order_acq_rel, memory_order_acquire))
			continue; /* v reloaded */
		j->body(j->tensors, b, e, j->lo, j->step);
		if (atomic_fetch_add_explicit(&completed, e - b, memory_order_acq_rel) + (e - b) ==
			j->count && wake) {
			pthread_mutex_lock(&lock);
			pthread_cond_signal(&done);
			pthread_mutex_unlock(&lock);
		}
		v = atomic_load_explicit(&claim, memory_order_acquire);
	}
}

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* Poll until *v differs from old (or, with equal, equals it) for up to
 * SPIN_NS; whether it did. */
static int spin_until(const atomic_uint_fast64_t *v, uint64_t old)
{
	int64_t start = 0;
	int i;
	for (;;) {
		for (i = 0; i < 256; i++) {
			if (atomic_load_explicit(v, memory_order_acquire) != old)
				return 1;
			cpu_relax();
		}
		if (!start)
			start = now_ns();
		else if (now_ns() - start > SPIN_NS)
			return 0;
	}
}

static atomic_int stack_shift; /* see tc_rt_pool_set_stack_shift */

static void worker_loop(int index)
{
	uint64_t seen = 0;
	job j;
	for (;;) {
		spin_until(&generation, seen); /* the next job, often right away */
		pthread_mutex_lock(&lock);
		while (atomic_load(&generation) == seen)
			pthread_cond_wait(&work, &lock);
		seen = atomic_load(&generation);
		j = current;
		pthread_mutex_unlock(&lock);
		if (index < j.nworkers) /* else not needed for this job */
			run_chunks(&j, 1);
	}
}

static void *worker(void *arg)
{
	int shift = atomic_load(&stack_shift);
	volatile char pad[shift + 16];
	pad[0] = 0;
	worker_loop((int)(intptr_t)arg); /* never returns */
	pad[shift] = pad[0]; /* pad, and so the shift, lives across the call */
	return NULL;
}

void tc_rt_pool_set_stack_shift(int bytes)
{
	atomic_store(&stack_shift, bytes < 0 ? 0 : bytes > 65536 ? 65536 : bytes);
}

int tc_rt_cpus(void)
{
	cpu_set_t set;
	long n;
	/* the mask taskset, a cpuset cgroup or mpirun --bind-to gave this
	 * process: one thread per CPU it may run on, not per CPU online */
	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return CPU_COUNT(&set);
	n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : n > 1024 ? 1024 : (int)n;
}

static int online_cpus(void)
{
	int n = tc_rt_cpus();
	return n > MAX_WORKERS + 1 ? MAX_WORKERS + 1 : n;
}

void tc_rt_pool_set_threads(int n)
{
	wanted = n;
}

/* In a forked child: none of the parent's workers exist there, and the
 * lock may have been held by one of them at the fork. */
static void forget_workers(void)
{
	pthread_mutex_init(&lock, NULL);
	pthread_cond_init(&work, NULL);
	pthread_cond_init(&done, NULL);
	nworkers = 0;
	busy = 0;
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void register_atfork(void)
{
	pthread_atfork(NULL, NULL, forget_workers);
}

/* Start workers until there are n (under the lock); how many there are. */
static int ensure_workers(int n)
{
	pthread_once(&atfork_once, register_atfork);
	while (nworkers < n && nworkers < MAX_WORKERS) {
		if (pthread_create(&workers[nworkers], NULL, worker, (void *)(intptr_t)nworkers) != 0)
			break;
		pthread_detach(workers[nworkers]);
		nworkers++;
	}
	return nworkers < n ? nworkers : n;
}

void tc_rt_parallel_for(tc_rt_loop_body body, __tc_keep void *const *tensors, int64_t count,
	int64_t lo, int64_t step)
{
	int threads = wanted > 0 ? wanted : online_cpus(), helpers;
	job mine;
	if (count <= 0)
		return;
	if (threads <= 1 || count == 1 || count > (int64_t)0xffffffffu)
		goto alone;
	pthread_mutex_lock(&lock);
	if (busy) { /* another thread's loop has the pool */
		pthread_mutex_unlock(&lock);
		goto alone;
	}
	helpers = ensure_workers(threads - 1);
	if (helpers == 0) {
		pthread_mutex_unlock(&lock);
		goto alone;
	}
	busy = 1;
	current.body = body;
	current.tensors = tensors;
	current.count = count;
	current.lo = lo;
	current.step = step;
	current.nworkers = helpers;
	current.tag = (atomic_load(&generation) + 1) & 0xffffffffu;
	mine = current;
	atomic_store(&completed, 0);
	atomic_store(&claim, mine.tag << 32);
	atomic_fetch_add(&generation, 1);
	pthread_cond_broadcast(&work);
	pthread_mutex_unlock(&lock);
	run_chunks(&mine, 0);
	{ /* the job's end (a worker's last chunk), polled for a while first */
		int64_t start = now_ns();
		while (atomic_load_explicit(&completed, memory_order_acquire) < count &&
			now_ns() - start < SPIN_NS)
			cpu_relax();
	}
	pthread_mutex_lock(&lock);
	while (atomic_load(&completed) < count)
		pthread_cond_wait(&done, &lock);
	busy = 0;
	pthread_mutex_unlock(&lock);
	return;
alone:
	body(tensors, 0, count, lo, step);
}
