/* Clocks and sorting shared by the bench programs (header only: each is
 * one C file linked against the library).
 *
 * bench_wall_ms: CLOCK_MONOTONIC in milliseconds; bench_cpu_ms: the
 * calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID), which other work
 * on the machine skews less; bench_sort: ascending; bench_median: sorts v
 * and returns its median (the mean of the two middle values for even n). */
#ifndef TCOMP_BENCH_TIMING_H
#define TCOMP_BENCH_TIMING_H

#include <stdlib.h>
#include <time.h>

static inline double bench_clock_ms(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static inline double bench_wall_ms(void)
{
	return bench_clock_ms(CLOCK_MONOTONIC);
}

static inline double bench_cpu_ms(void)
{
	return bench_clock_ms(CLOCK_THREAD_CPUTIME_ID);
}

static inline int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static inline void bench_sort(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(double), bench_cmp_double);
}

static inline double bench_median(double *v, int n)
{
	bench_sort(v, n);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif
