/* The floor for a kernel that writes a large output: the time glibc's
 * memset takes to fill a buffer, faulted in beforehand, with T threads
 * (each its own contiguous slice, started together at a barrier; the
 * calling thread fills the first, so that no thread waits for a core).
 *
 *     bench_write BYTES [THREADS [REPS]]
 *
 * prints one JSON line: {"bytes":..,"threads":..,"reps":..,"min_ms":..,
 * "median_ms":..,"nt_min_ms":..,"nt_median_ms":..,"zero_min_ms":..,
 * "zero_median_ms":..}.  min and median are of memset with a non-zero byte
 * (0x3f): on the Zen 5 host of docs/performance.md a buffer of zeros is
 * written in about half the time of any other value (memset 0.53 ms
 * against 1.00 ms for 52 MB, one thread, and so are streaming stores of
 * zero vectors), which no computed output gets; the zeros' times are
 * printed beside them for reference.  nt: the same bytes written by a loop
 * of 16-byte streaming stores (SSE2), what a vectorised kernel's
 * streaming stores can do (glibc's memset, rep stosb there, is 10-20%
 * faster than any vector-store loop on that host).  Used by
 * bench/per_sample.py. */
#include <emmintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_THREADS 64
#define MAX_REPS 1000

typedef struct job {
	unsigned char *p;
	size_t n;
	int value, reps;
	pthread_barrier_t *start, *end;
} job;

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* Rounds cycle: memset of the value, memset of zeros, streaming stores. */
#define KINDS 3

static void fill(const job *j, int r)
{
	switch (r % KINDS) {
	case 0:
		memset(j->p, j->value, j->n);
		break;
	case 1:
		memset(j->p, 0, j->n);
		break;
	default: {
		__m128 v = _mm_set1_ps(0.75f);
		size_t i;
		for (i = 0; i + 16 <= j->n; i += 16) /* slices are 64-byte aligned */
			_mm_stream_ps((float *)(j->p + i), v);
		memset(j->p + i, j->value, j->n - i);
		_mm_sfence();
	}
	}
}

static void *worker(void *arg)
{
	job *j = arg;
	int r;
	for (r = 0; r < KINDS * j->reps; r++) {
		pthread_barrier_wait(j->start);
		fill(j, r);
		pthread_barrier_wait(j->end);
	}
	return NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	size_t bytes, slice;
	int threads = argc > 2 ? atoi(argv[2]) : 1, reps = argc > 3 ? atoi(argv[3]) : 30, t, r;
	static double ms[KINDS][MAX_REPS];
	pthread_t tid[MAX_THREADS];
	job jobs[MAX_THREADS];
	pthread_barrier_t start, end;
	unsigned char *buf;
	if (argc < 2 || (bytes = strtoull(argv[1], NULL, 10)) == 0 || threads < 1 ||
		threads > MAX_THREADS || reps < 1 || reps > MAX_REPS) {
		fprintf(stderr, "usage: bench_write BYTES [THREADS (1..%d) [REPS (1..%d)]]\n",
			MAX_THREADS, MAX_REPS);
		return 2;
	}
	if (!(buf = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096))) {
		fprintf(stderr, "bench_write: out of memory\n");
		return 1;
	}
	memset(buf, 1, bytes); /* fault every page in */
	slice = (bytes / (size_t)threads + 63) / 64 * 64;
	pthread_barrier_init(&start, NULL, (unsigned)threads);
	pthread_barrier_init(&end, NULL, (unsigned)threads);
	for (t = 0; t < threads; t++) {
		size_t lo = (size_t)t * slice < bytes ? (size_t)t * slice : bytes;
		size_t hi = lo + slice < bytes ? lo + slice : bytes;
		jobs[t] = (job){buf + lo, hi - lo, 0x3f, reps, &start, &end};
		if (t && pthread_create(&tid[t], NULL, worker, &jobs[t])) {
			fprintf(stderr, "bench_write: cannot start a thread\n");
			return 1;
		}
	}
	for (r = 0; r < KINDS * reps; r++) {
		double t0 = now_ms();
		pthread_barrier_wait(&start);
		fill(&jobs[0], r);
		pthread_barrier_wait(&end);
		ms[r % KINDS][r / KINDS] = now_ms() - t0;
	}
	for (t = 1; t < threads; t++)
		pthread_join(tid[t], NULL);
	for (t = 0; t < KINDS; t++)
		qsort(ms[t], (size_t)reps, sizeof(double), cmp_double);
	printf("{\"bytes\": %zu, \"threads\": %d, \"reps\": %d, \"min_ms\": %.4f, "
	       "\"median_ms\": %.4f, \"nt_min_ms\": %.4f, \"nt_median_ms\": %.4f, "
	       "\"zero_min_ms\": %.4f, \"zero_median_ms\": %.4f}\n",
		bytes, threads, reps, ms[0][0], ms[0][reps / 2], ms[2][0], ms[2][reps / 2],
		ms[1][0], ms[1][reps / 2]);
	free(buf);
	return 0;
}
