/* What the evaluator's parent and children share (eval.h): the messages
 * on their socket and how they are sent and received whole, the clock,
 * the median of timings and buffer alignment.  The lowest of the
 * evaluator's files: eval_slots.c (the parent's engine), eval_child.c
 * (the child side) and eval.c all call it, and it calls none of them. */
#include "eval.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

double tc_tune_median(__tc_keep double *v, int n)
{
	qsort(v, (size_t)n, sizeof(double), cmp_double);
	return n == 0 ? INFINITY : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void *tc_tune_align(__tc_keep void *p)
{
	return (void *)(((uintptr_t)p + TC_TUNE_ALIGN - 1) / TC_TUNE_ALIGN * TC_TUNE_ALIGN);
}

/* The monotonic clock in seconds. */
double tc_tune_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

tc_stat tc_tune_msg_send(int fd, __tc_keep const tc_tune_msg *m)
{
	const char *c = (const char *)m;
	size_t n = sizeof(*m);
	while (n) {
		ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return TC_ERR;
		c += w;
		n -= (size_t)w;
	}
	return TC_OK;
}

tc_stat tc_tune_msg_recv(int fd, __tc_keep tc_tune_msg *m)
{
	char *c = (char *)m;
	size_t n = sizeof(*m);
	while (n) {
		ssize_t r = read(fd, c, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return TC_ERR;
		c += r;
		n -= (size_t)r;
	}
	return TC_OK;
}
