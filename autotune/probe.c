/* The GPU probe of the autotuner: what the tuner's own process needs to
 * know of the CUDA device, learnt in a short-lived child process.
 *
 * Why a child: the CUDA driver does not survive fork().  A process that
 * has opened it (cuInit, a context) hands its children a driver state
 * they cannot use, and the tuner forks a child per candidate.  So the
 * tuner's process never opens the driver: each candidate's child opens it
 * itself (eval_child.c), and what the parent needs -- the kernel cache
 * key's machine part ("cuda;GPU name;sm_XY;driver N": the name, compute
 * capability and driver version) and the compute capability the
 * candidates are compiled for -- comes from this probe: fork, open the
 * driver, query, write one line to a pipe, exit.  Without a driver (or
 * with the toolkit's stub library, or no device) the probe answers the
 * driver's reason, which tc_autotune reports as its error before it has
 * made anything or opened the cache.
 *
 * Owns: tc_tune_probe_device. */
#include "tune.h"

#include "../runtime/backend.h"
#include "../runtime/error.h"
#include "../runtime/internal.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROBE_TIMEOUT_MS 30000 /* cuInit on a cold machine takes seconds */

/* The child: one answer into fd, "K<key part>" or "E<why>"; never
 * returns. */
static void probe_child(int fd, const tc_rt_backend *b)
{
	char buf[1024];
	const char *e;
	void *p = NULL;
	char *key = NULL;
	tc_context *ctx = tc_context_new();
	size_t n, done = 0;
	signal(SIGINT, SIG_IGN); /* the parent decides */
	if (!ctx) {
		snprintf(buf, sizeof(buf), "Eout of memory");
	} else if (tc_device_alloc(ctx, (DLDevice){kDLCUDA, 0}, 1, &p) < 0) {
		/* "tc_device_alloc: no CUDA driver: libcuda.so.1 not found (...)" */
		e = tc_context_error(ctx);
		if (!strncmp(e, "error: ", 7))
			e += 7;
		if (!strncmp(e, "tc_device_alloc: ", 17))
			e += 17;
		snprintf(buf, sizeof(buf), "E%s", e);
	} else if (tc_device_free(ctx, (DLDevice){kDLCUDA, 0}, p), !(key = b->key_target())) {
		snprintf(buf, sizeof(buf), "ECUDA device 0 does not give its name and compute "
					   "capability");
	} else {
		snprintf(buf, sizeof(buf), "K%s", key);
	}
	n = strcspn(buf, "\n") + 1; /* one line: the driver's text may have more */
	buf[n - 1] = '\n';
	while (done < n) {
		ssize_t w = write(fd, buf + done, n - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		done += (size_t)w;
	}
	_exit(0);
}

tc_stat tc_tune_probe_device(__tc_keep tc_context *ctx, __tc_keep const tc_rt_backend *b,
	__tc_give char **key_target, int *arch)
{
	char buf[1024];
	size_t len = 0;
	int fds[2], status, ms = PROBE_TIMEOUT_MS;
	const char *sm;
	pid_t pid;
	*key_target = NULL;
	*arch = 0;
	if (pipe(fds) < 0) {
		tc_rt_set_error(ctx, "tc_autotune: target=%s: cannot make a pipe: %s", b->name,
			strerror(errno));
		return TC_ERR;
	}
	fflush(NULL); /* nothing buffered is written twice */
	if ((pid = fork()) < 0) {
		close(fds[0]);
		close(fds[1]);
		tc_rt_set_error(ctx, "tc_autotune: target=%s: cannot fork the device probe: %s",
			b->name, strerror(errno));
		return TC_ERR;
	}
	if (pid == 0) {
		close(fds[0]);
		probe_child(fds[1], b);
	}
	close(fds[1]);
	while (len < sizeof(buf) - 1 && !memchr(buf, '\n', len)) {
		struct pollfd pf = {fds[0], POLLIN, 0};
		struct timespec t0, t1;
		ssize_t r;
		int pr;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		pr = poll(&pf, 1, ms);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0)
			break; /* a hung driver: killed below */
		if ((r = read(fds[0], buf + len, sizeof(buf) - 1 - len)) <= 0)
			break;
		len += (size_t)r;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		ms -= (int)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
		if (ms <= 0)
			break;
	}
	buf[len] = 0;
	close(fds[0]);
	kill(pid, SIGKILL); /* done (or hung): it has nothing more to say */
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	buf[strcspn(buf, "\n")] = 0;
	if (buf[0] == 'E') {
		tc_rt_set_error(ctx, "target=%s: %s", b->name, buf + 1);
		return TC_ERR;
	}
	/* "cuda;NAME;sm_XY;driver N": XY is major and one digit of minor */
	if (buf[0] != 'K' || !(sm = strstr(buf, ";sm_")) || sscanf(sm, ";sm_%d", arch) != 1 ||
		*arch < 10) {
		tc_rt_set_error(ctx, "tc_autotune: target=%s: the device probe %s", b->name,
			len ? "gave no device description" : "did not answer (it died or hung)");
		return TC_ERR;
	}
	if (!(*key_target = tc_strdup(buf + 1))) {
		tc_rt_set_error(ctx, "out of memory");
		return TC_ERR;
	}
	return TC_OK;
}
