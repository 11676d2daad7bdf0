/* How evenly tcomp's thread pool (runtime/pool.c) shares a parallel loop
 * of few, equal iterations among its threads: the loop's time against the
 * best split the iterations allow.  Each iteration busy-waits a fixed
 * time, so the figure is the pool's hand-out alone, whatever the kernel:
 * N iterations of T/N ms each (T = 11 ms), the last a third of the others
 * (sgemm 1024's 22 blocks of 48 rows, the last of 16, on two threads).
 * The loop can end no sooner than the thread with the most full
 * iterations in the best split, which puts the short one on a thread with
 * fewer full ones where there is one.
 *
 *   bench_pool [THREADS [ROUNDS]]   one line per N: best and median time
 *                                   over ROUNDS runs (default 2, 25), the
 *                                   best possible, and best / possible
 *
 * (docs/performance.md, "Guided chunks".) */
#include "../runtime/pool.h"
#include "timing.h"

#include <stdio.h>
#include <stdlib.h>

#define TOTAL_MS 11.0
#define MAX_ROUNDS 1000

static int64_t iterations;
static double iteration_ms;

/* Busy for ms milliseconds of wall time. */
static void busy(double ms)
{
	double start = bench_wall_ms();
	while (bench_wall_ms() - start < ms)
		;
}

static void body(void *const *tensors, int64_t begin, int64_t end, int64_t lo, int64_t step)
{
	int64_t i;
	(void)tensors;
	(void)lo;
	(void)step;
	for (i = begin; i < end; i++)
		busy(i == iterations - 1 ? iteration_ms / 3 : iteration_ms);
}

int main(int argc, char **argv)
{
	static const int64_t counts[] = {8, 22, 54, 100, 432};
	static double times[MAX_ROUNDS];
	int threads = argc > 1 ? atoi(argv[1]) : 2, rounds = argc > 2 ? atoi(argv[2]) : 25;
	size_t c;
	if (threads < 1 || rounds < 1 || rounds > MAX_ROUNDS) {
		fprintf(stderr, "usage: bench_pool [THREADS [ROUNDS (1..%d)]]\n", MAX_ROUNDS);
		return 2;
	}
	tc_rt_pool_set_threads(threads);
	printf("| iterations | threads | best ms | median ms | possible ms | best / possible |\n");
	printf("|---|---|---|---|---|---|\n");
	for (c = 0; c < sizeof counts / sizeof counts[0]; c++) {
		int64_t full = counts[c] - 1, most = (full + threads - 1) / threads;
		double possible;
		double median;
		int r;
		iterations = counts[c];
		iteration_ms = TOTAL_MS / (double)counts[c];
		/* the thread with the most full iterations; the short one goes
		 * to a thread with fewer where there is one */
		possible = most * iteration_ms + (full % threads == 0 ? iteration_ms / 3 : 0);
		for (r = 0; r < rounds; r++) {
			double start = bench_wall_ms();
			tc_rt_parallel_for(body, NULL, iterations, 0, 1);
			times[r] = bench_wall_ms() - start;
		}
		median = bench_median(times, rounds); /* sorts: times[0] the best */
		printf("| %lld | %d | %.3f | %.3f | %.3f | %.3f |\n", (long long)iterations, threads,
			times[0], median, possible, times[0] / possible);
	}
	return 0;
}
