/* What the evaluator's parent and children share (eval.h): the messages
 * on their socket and how they are sent and received whole, the clock,
 * the median of timings and buffer alignment; and what every file of the
 * tuner uses: warnings (tc_tune_warn) and the test-only fake fitness
 * (tc_tune_fake_time).  The lowest of the
 * evaluator's files: eval_slots.c (the parent's engine), eval_child.c
 * (the child side) and eval.c all call it, and it calls none of them. */
#include "eval.h"

#include "../runtime/internal.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
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

double tc_tune_fake_time(const char *key)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */
	for (; *key; key++)
		h = (h ^ (unsigned char)*key) * 1099511628211ULL;
	return 1e-4 * (1 + (double)(h % 997) / 100);
}

void tc_tune_warn(__tc_keep tc_context *ctx, const char *fmt, ...)
{
	tc_buf buf;
	va_list ap;
	tc_buf_init(&buf);
	tc_buf_puts(&buf, ctx->warnings ? ctx->warnings : "");
	tc_buf_puts(&buf, "warning: ");
	va_start(ap, fmt);
	tc_buf_vprintf(&buf, fmt, ap);
	va_end(ap);
	tc_buf_putc(&buf, '\n');
	if (!buf.oom) {
		tc_free(ctx->warnings);
		ctx->warnings = tc_buf_take(&buf);
	} else {
		tc_buf_free(&buf);
	}
}
