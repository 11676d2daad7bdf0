/* Distributed tuning (tc_tune_settings.transport, tc_tune_serve) over a
 * transport of socket pairs with forked serving ranks, so that it is
 * tested where MPI is not installed (tests/test_tune_mpi.sh runs the MPI
 * transport of tcomp autotune).  With fake times (TCOMP_TUNE_TEST_FITNESS:
 * every candidate is still compiled, run and checked, but reports a time
 * made from its options) a run spread over ranks measures the same
 * configurations with the same times and returns the same best as one
 * process with the same seed; planted candidate faults travel with their
 * candidates; ranks that die cost only their candidates (the others, or
 * rank 0 when none is left, measure them; the socket's end of file tells
 * rank 0 at once); bad transports are errors; a batch's whole jobs on the
 * ranks give the choices of one process, job for job, and their rows
 * reach rank 0's cache, also when a rank dies on its job. */
#define _DEFAULT_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tcomp.h"
#include "autotune/tune.h" /* tc_tune_test_faults */
#include "runtime/cache_ops.h" /* tc_cache_export: the rows a batch left */

static const char *const src =
	"def matmul(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }\n";

/* ---- a transport of socket pairs: each message a length and its bytes ---- */

#define MAX_RANKS 4

typedef struct socks {
	int fd[MAX_RANKS]; /* by rank; -1: none or closed */
	unsigned char *buf;
	size_t cap;
} socks;

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

static int read_all(int fd, void *p, size_t n)
{
	char *c = p;
	while (n) {
		ssize_t r = read(fd, c, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		c += r;
		n -= (size_t)r;
	}
	return 0;
}

static int sock_send(void *user, int to, const void *data, size_t len)
{
	socks *s = user;
	uint64_t n = len;
	if (to < 0 || to >= MAX_RANKS || s->fd[to] < 0)
		return -1;
	return write_all(s->fd[to], &n, sizeof(n)) || write_all(s->fd[to], data, len) ? -1 : 0;
}

static int sock_recv(void *user, double timeout_s, int *from, const void **data, size_t *len)
{
	socks *s = user;
	struct pollfd pf[MAX_RANKS];
	int rank[MAX_RANKS], n = 0, i;
	for (i = 0; i < MAX_RANKS; i++)
		if (s->fd[i] >= 0) {
			pf[n].fd = s->fd[i];
			pf[n].events = POLLIN;
			rank[n++] = i;
		}
	if (!n) {
		usleep((useconds_t)(timeout_s * 1e6));
		return 0;
	}
	if (poll(pf, (nfds_t)n, (int)(timeout_s * 1000)) <= 0)
		return 0;
	for (i = 0; i < n; i++) {
		uint64_t m;
		if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		if (read_all(pf[i].fd, &m, sizeof(m)) < 0) { /* the peer is gone: say so */
			close(pf[i].fd);
			s->fd[rank[i]] = -1;
			*from = rank[i];
			*data = s->buf;
			*len = 0;
			return 1;
		}
		if (m > s->cap) {
			unsigned char *b = realloc(s->buf, m);
			if (!b)
				return -1;
			s->buf = b;
			s->cap = m;
		}
		if (read_all(pf[i].fd, s->buf, m) < 0) {
			close(pf[i].fd);
			s->fd[rank[i]] = -1;
			continue;
		}
		*from = rank[i];
		*data = s->buf;
		*len = m;
		return 1;
	}
	return 0;
}

/* Rank 0's transport t over ranks-1 forked serving ranks (pids). */
typedef struct world {
	socks s;
	tc_tune_transport t;
	pid_t pid[MAX_RANKS];
	int ranks;
} world;

static void world_start(world *w, int ranks)
{
	int r, i;
	memset(w, 0, sizeof(*w));
	for (i = 0; i < MAX_RANKS; i++)
		w->s.fd[i] = -1;
	w->ranks = ranks;
	for (r = 1; r < ranks; r++) {
		int sv[2];
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
		fflush(NULL);
		w->pid[r] = fork();
		assert_true(w->pid[r] >= 0);
		if (w->pid[r] == 0) { /* a serving rank */
			socks mine;
			tc_tune_transport t;
			tc_context *ctx = tc_context_new();
			int rc;
			close(sv[0]);
			for (i = 0; i < MAX_RANKS; i++) /* the other ranks' sockets are not its */
				if (w->s.fd[i] >= 0)
					close(w->s.fd[i]);
			memset(&mine, 0, sizeof(mine));
			for (i = 0; i < MAX_RANKS; i++)
				mine.fd[i] = -1;
			mine.fd[0] = sv[1];
			memset(&t, 0, sizeof(t));
			t.rank = r;
			t.size = ranks;
			t.send = sock_send;
			t.recv = sock_recv;
			t.user = &mine;
			rc = tc_tune_serve(ctx, &t, 1, NULL);
			if (rc < 0)
				fprintf(stderr, "rank %d: %s\n", r, tc_context_error(ctx));
			_exit(rc < 0 ? 3 : 0);
		}
		close(sv[1]);
		w->s.fd[r] = sv[0];
	}
	w->t.rank = 0;
	w->t.size = ranks;
	w->t.send = sock_send;
	w->t.recv = sock_recv;
	w->t.user = &w->s;
}

/* Dismiss the ranks (measured[r]: what each measured) and reap them:
 * returns the ranks given up; *died the ranks that did not exit 0. */
static int world_end(world *w, int *measured, int *died)
{
	int r, lost = tc_tune_dismiss(&w->t, measured);
	*died = 0;
	for (r = 1; r < w->ranks; r++) {
		int st;
		assert_int_equal(waitpid(w->pid[r], &st, 0), w->pid[r]);
		*died += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		if (w->s.fd[r] >= 0)
			close(w->s.fd[r]);
	}
	free(w->s.buf);
	return lost;
}

/* ---- what a run measured ---- */

#define MAX_SEEN 128

typedef struct seen {
	int n;
	int index[MAX_SEEN];
	tc_tune_status status[MAX_SEEN];
	double median[MAX_SEEN];
	char opts[MAX_SEEN][600];
	char msg[MAX_SEEN][160];
	int nfinal, chosen;
} seen;

static void record(void *user, const tc_tune_candidate *c)
{
	seen *s = user;
	if (c->final) {
		s->nfinal++;
		s->chosen += c->chosen;
		return;
	}
	if (s->n < MAX_SEEN) {
		s->index[s->n] = c->index;
		s->status[s->n] = c->status;
		s->median[s->n] = c->median_s;
		snprintf(s->opts[s->n], sizeof(s->opts[0]), "%s", c->options);
		snprintf(s->msg[s->n], sizeof(s->msg[0]), "%s", c->message);
		s->n++;
	}
}

/* The record of candidate index (-1 if none). */
static int rec_of(const seen *s, int index)
{
	for (int i = 0; i < s->n; i++)
		if (s->index[i] == index)
			return i;
	return -1;
}

/* a and b measured the same candidates (index, options, status, time). */
static void assert_same_runs(const seen *a, const seen *b)
{
	assert_int_equal(a->n, b->n);
	for (int i = 0; i < a->n; i++) {
		int j = rec_of(b, a->index[i]);
		if (j < 0)
			fail_msg("candidate %d was not measured", a->index[i]);
		assert_string_equal(a->opts[i], b->opts[j]);
		assert_int_equal(a->status[i], b->status[j]);
		if (a->status[i] == TC_TUNE_OK)
			assert_true(a->median[i] == b->median[j]);
	}
	assert_int_equal(a->nfinal, b->nfinal);
	assert_int_equal(a->chosen, b->chosen);
}

typedef struct run {
	seen s;
	char *best;
	tc_tune_report rep;
	char warnings[2048];
} run;

/* Tune matmul 24x24 with seed 5 (fake times), over w when not NULL. */
static void tune(world *w, run *out)
{
	tc_context *ctx = tc_context_new();
	tc_module *m = tc_module_parse(ctx, src, "mm.tc");
	int64_t shape[2] = {24, 24};
	DLTensor A = {NULL, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, NULL, 0};
	DLTensor B = A;
	const DLTensor *in[2] = {&A, &B};
	tc_tune_settings st;
	tc_options *best = NULL;
	assert_non_null(m);
	memset(out, 0, sizeof(*out));
	tc_tune_settings_init(&st);
	st.generations = 3;
	st.population = 6;
	st.elites = 1;
	st.seed = 5;
	st.use_cache = 0;
	st.runs = 2;
	st.min_time_s = 0.001;
	st.timeout_s = 1;
	st.compile_timeout_s = 30;
	st.threads = 1;
	st.final_candidates = 2;
	st.final_rounds = 2;
	st.final_time_s = 0.001;
	st.final_warmup_s = 0.001;
	st.record = record;
	st.user = &out->s;
	st.transport = w ? &w->t : NULL;
	if (tc_autotune(m, "matmul", in, 2, NULL, &st, &best, &out->rep) < 0)
		fail_msg("%s", tc_context_error(ctx));
	out->best = tc_options_print(best);
	snprintf(out->warnings, sizeof(out->warnings), "%s", tc_context_warnings(ctx));
	tc_options_free(best);
	tc_module_free(m);
	tc_context_free(ctx);
}

static void run_free(run *r)
{
	tc_string_free(r->best);
}

static int setup(void **state)
{
	(void)state;
	setenv("TCOMP_TUNE_TEST_FITNESS", "1", 1);
	return 0;
}

static void spread_over_ranks_the_search_is_the_same(void **state)
{
	run one, three, dead;
	world w;
	int measured[3], died, r, total = 0;
	(void)state;
	tune(NULL, &one);
	world_start(&w, 3);
	tune(&w, &three);
	assert_int_equal(world_end(&w, measured, &died), 0);
	assert_int_equal(died, 0);
	assert_same_runs(&one.s, &three.s);
	assert_string_equal(one.best, three.best);
	assert_int_equal(one.rep.measured, three.rep.measured);
	assert_true(one.rep.final_measured >= 2);
	/* rank 0 measured the reference (the defaults); the others the rest */
	assert_int_equal(measured[0], 1);
	for (r = 0; r < 3; r++)
		total += measured[r];
	assert_int_equal(total, three.rep.measured);
	assert_true(measured[1] > 0 && measured[2] > 0);
	/* a rank that dies costs only its candidates: rank 1 dies on its first
	 * batch, whose candidate rank 2 then measures with the rest; the run
	 * is the same */
	setenv("TCOMP_TUNE_TEST_RANK_FAULT", "1:0:kill", 1);
	world_start(&w, 3);
	unsetenv("TCOMP_TUNE_TEST_RANK_FAULT");
	tune(&w, &dead);
	assert_int_equal(world_end(&w, measured, &died), 1);
	assert_int_equal(died, 1);
	assert_same_runs(&one.s, &dead.s);
	assert_string_equal(one.best, dead.best);
	assert_non_null(strstr(dead.warnings, "rank 1"));
	assert_non_null(strstr(dead.warnings, "given up"));
	assert_int_equal(measured[0], 1);
	assert_int_equal(measured[1], 0);
	assert_int_equal(measured[2], dead.rep.measured - 1);
	run_free(&dead);
	/* a candidate lost twice is recorded as crashed, and with no rank left
	 * rank 0 measures the rest: candidate 1 kills rank 1, then rank 2,
	 * which takes it next */
	setenv("TCOMP_TUNE_TEST_RANK_FAULT", "1:#1:kill,2:#1:kill", 1);
	world_start(&w, 3);
	unsetenv("TCOMP_TUNE_TEST_RANK_FAULT");
	tune(&w, &dead);
	assert_int_equal(world_end(&w, measured, &died), 2);
	assert_int_equal(died, 2);
	r = rec_of(&dead.s, 1);
	assert_true(r >= 0);
	assert_int_equal(dead.s.status[r], TC_TUNE_CRASH);
	assert_non_null(strstr(dead.s.msg[r], "lost with ranks 1 and 2"));
	assert_non_null(strstr(dead.warnings, "rank 2"));
	assert_int_equal(dead.rep.generations, one.rep.generations); /* the run went on */
	assert_int_equal(measured[1], 0);
	assert_int_equal(measured[0], dead.rep.measured - 1 - measured[2]);
	run_free(&one);
	run_free(&three);
	run_free(&dead);
}

static void planted_faults_follow_their_candidates(void **state)
{
	run one, three;
	world w;
	int measured[3], died;
	(void)state;
	assert_int_equal(tc_tune_test_faults("2:crash,3:wrong"), 0);
	tune(NULL, &one);
	world_start(&w, 3); /* the ranks get the faults from rank 0 */
	tune(&w, &three);
	assert_int_equal(tc_tune_test_faults(NULL), 0);
	assert_int_equal(world_end(&w, measured, &died), 0);
	assert_int_equal(died, 0);
	assert_int_equal(three.s.status[rec_of(&three.s, 2)], TC_TUNE_CRASH);
	assert_int_equal(three.s.status[rec_of(&three.s, 3)], TC_TUNE_WRONG);
	assert_same_runs(&one.s, &three.s);
	assert_string_equal(one.best, three.best);
	run_free(&one);
	run_free(&three);
}

static void bad_transports_are_errors(void **state)
{
	tc_context *ctx = tc_context_new();
	tc_module *m = tc_module_parse(ctx, src, "mm.tc");
	int64_t shape[2] = {8, 8};
	float data[64];
	int64_t strides[2] = {1, 8};
	DLTensor A = {NULL, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, NULL, 0};
	DLTensor B = A;
	const DLTensor *in[2] = {&A, &B};
	tc_tune_settings st;
	tc_tune_transport t;
	world w;
	int died;
	(void)state;
	memset(&t, 0, sizeof(t));
	t.rank = 1;
	t.size = 2;
	t.send = sock_send;
	t.recv = sock_recv;
	tc_tune_settings_init(&st);
	st.use_cache = 0;
	st.transport = &t; /* not rank 0's */
	assert_int_equal(tc_autotune(m, "matmul", in, 2, NULL, &st, NULL, NULL), -1);
	assert_non_null(strstr(tc_context_error(ctx), "transport"));
	t.rank = 0; /* serving needs another rank */
	assert_int_equal(tc_tune_serve(ctx, &t, 1, NULL), -1);
	assert_non_null(strstr(tc_context_error(ctx), "rank other than 0"));
	assert_int_equal(tc_tune_serve(ctx, NULL, 1, NULL), -1);
	assert_int_equal(tc_tune_serve(NULL, &t, 1, NULL), -1);
	/* the ranks get a copy of the inputs: strided data is refused */
	for (int i = 0; i < 64; i++)
		data[i] = (float)i + 1;
	A.data = data;
	B.data = data;
	A.strides = strides;
	world_start(&w, 2);
	st.transport = &w.t;
	assert_int_equal(tc_autotune(m, "matmul", in, 2, NULL, &st, NULL, NULL), -1);
	assert_non_null(strstr(tc_context_error(ctx), "compact"));
	assert_int_equal(world_end(&w, NULL, &died), 0);
	assert_int_equal(died, 0);
	assert_int_equal(tc_tune_dismiss(NULL, NULL), 0);
	tc_module_free(m);
	tc_context_free(ctx);
}

/* ---- batches: whole jobs on the ranks ---- */

/* Three defs: a job tuned before another of the same def seeds it from
 * the cache in one process, not when they run at once on the ranks. */
static const char *const batch_src =
	"def matmul(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }\n"
	"def rowsum(float(M,N) X) -> (S) { S(m) +=! X(m,r_n) }\n"
	"def scale(float(N) X) -> (Y) { Y(n) = 2 * X(n) + 1 }\n";

typedef struct batch_seen {
	int finished, calls, max_finished;
} batch_seen;

static int on_batch(void *user, const tc_tune_batch_progress *p)
{
	batch_seen *b = user;
	b->calls++;
	assert_true(p->job >= 0 && p->job < p->jobs);
	assert_true(p->finished <= p->jobs && p->running <= p->jobs);
	if (!p->p)
		b->finished++;
	if (p->finished > b->max_finished)
		b->max_finished = p->finished;
	return 0;
}

/* Tune three jobs (fake times, seed 9) with a fresh cache in dir, over w
 * when not NULL; the rows the cache holds afterwards into *rows. */
static void tune_batch(world *w, tc_tune_job *jobs, batch_seen *bs, const char *dir, int *rows,
	tc_context *ctx, tc_module *m)
{
	static int64_t s1[2] = {24, 24}, s2[2] = {48, 40}, s4[1] = {4096};
	static DLTensor A = {NULL, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, s1, NULL, 0};
	static DLTensor B = {NULL, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, s1, NULL, 0};
	static DLTensor C = {NULL, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, s2, NULL, 0};
	static DLTensor X = {NULL, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, s4, NULL, 0};
	static const DLTensor *in1[2] = {&A, &B}, *in2[1] = {&C}, *in3[1] = {&X};
	tc_tune_settings st;
	char path[600], *msg = NULL;
	tc_cache *c;
	tc_buf b;
	int n;
	memset(jobs, 0, 3 * sizeof(*jobs));
	memset(bs, 0, sizeof(*bs));
	jobs[0] = (tc_tune_job){.m = m, .entry = "matmul", .inputs = in1, .n_inputs = 2};
	jobs[1] = (tc_tune_job){.m = m, .entry = "rowsum", .inputs = in2, .n_inputs = 1};
	jobs[2] = (tc_tune_job){.m = m, .entry = "scale", .inputs = in3, .n_inputs = 1};
	tc_tune_settings_init(&st);
	st.generations = 2;
	st.population = 5;
	st.elites = 1;
	st.seed = 9;
	st.runs = 2;
	st.min_time_s = 0.001;
	st.timeout_s = 1;
	st.compile_timeout_s = 2;
	st.threads = 1;
	st.final_candidates = 1;
	st.final_rounds = 2;
	st.final_time_s = 0.001;
	st.final_warmup_s = 0.001;
	snprintf(path, sizeof(path), "%s/kernels.sqlite", dir);
	st.cache_path = path;
	st.transport = w ? &w->t : NULL;
	n = tc_autotune_batch(ctx, jobs, 3, &st, on_batch, bs);
	if (n != 0)
		fail_msg("%d jobs not tuned: %s / %s / %s (%s)", n, jobs[0].message, jobs[1].message,
			jobs[2].message, tc_context_error(ctx));
	c = tc_cache_open(path, TC_CACHE_READ, &msg);
	assert_non_null(c);
	tc_buf_init(&b);
	assert_int_equal(tc_cache_export(c, &b), 0);
	*rows = 0;
	for (size_t i = 0; i < b.len; i++)
		*rows += b.s[i] == '\n';
	tc_buf_free(&b);
	tc_cache_close(c);
}

static void batch_clear(tc_tune_job *jobs)
{
	for (int i = 0; i < 3; i++)
		tc_options_free(jobs[i].best);
}

static void remove_cache(const char *dir)
{
	char cmd[700];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

/* A batch on the ranks makes the choices one process makes, job for job,
 * and fills the cache as well; a rank that dies costs only its job. */
static void batch_jobs_go_whole_to_ranks(void **state)
{
	tc_context *ctx = tc_context_new();
	tc_module *m = tc_module_parse(ctx, batch_src, "batch.tc");
	tc_tune_job here[3], there[3];
	batch_seen bh, bt;
	char d1[] = "/tmp/tcomp-batch-XXXXXX", d2[] = "/tmp/tcomp-batch-XXXXXX";
	char d3[] = "/tmp/tcomp-batch-XXXXXX";
	int rows_here, rows_there, measured[3], died, i, expect = 0, used[3] = {0};
	world w;
	(void)state;
	assert_non_null(m);
	assert_non_null(mkdtemp(d1));
	assert_non_null(mkdtemp(d2));
	tune_batch(NULL, here, &bh, d1, &rows_here, ctx, m);
	world_start(&w, 3);
	tune_batch(&w, there, &bt, d2, &rows_there, ctx, m);
	assert_int_equal(world_end(&w, measured, &died), 0);
	assert_int_equal(died, 0);
	for (i = 0; i < 3; i++) {
		char *a = tc_options_print(here[i].best), *b = tc_options_print(there[i].best);
		assert_true(here[i].ok && there[i].ok);
		assert_int_equal(here[i].rank, 0);
		assert_true(there[i].rank == 1 || there[i].rank == 2);
		used[there[i].rank] = 1;
		/* the same search and final stage on a rank as here */
		assert_string_equal(a, b);
		assert_int_equal(here[i].report.measured, there[i].report.measured);
		assert_int_equal(here[i].report.final_measured, there[i].report.final_measured);
		assert_true(here[i].report.best_s == there[i].report.best_s);
		expect += there[i].report.measured + there[i].report.final_measured;
		tc_string_free(a);
		tc_string_free(b);
	}
	assert_true(used[1] && used[2]); /* both ranks tuned */
	assert_int_equal(measured[1] + measured[2], 3);
	/* every candidate and re-timing of the ranks reached rank 0's cache */
	assert_int_equal(rows_there, expect);
	assert_int_equal(rows_here, expect);
	assert_int_equal(bh.finished, 3);
	assert_int_equal(bt.finished, 3);
	assert_int_equal(bt.max_finished, 3);
	assert_true(bt.calls > 3); /* the ranks' progress came through */
	/* a rank that dies costs only its job: rank 1 dies on its first, which
	 * rank 2 then tunes, with the others */
	batch_clear(there);
	remove_cache(d2);
	assert_non_null(mkdtemp(d3));
	setenv("TCOMP_TUNE_TEST_RANK_FAULT", "1:0:kill", 1);
	world_start(&w, 3);
	unsetenv("TCOMP_TUNE_TEST_RANK_FAULT");
	tune_batch(&w, there, &bt, d3, &rows_there, ctx, m);
	assert_int_equal(world_end(&w, measured, &died), 1);
	assert_int_equal(died, 1);
	for (i = 0; i < 3; i++) {
		char *a = tc_options_print(here[i].best), *b = tc_options_print(there[i].best);
		assert_true(there[i].ok);
		assert_int_equal(there[i].rank, 2);
		assert_string_equal(a, b);
		tc_string_free(a);
		tc_string_free(b);
	}
	assert_int_equal(rows_there, rows_here);
	assert_non_null(strstr(tc_context_warnings(ctx), "rank 1"));
	batch_clear(here);
	batch_clear(there);
	remove_cache(d1);
	remove_cache(d3);
	tc_module_free(m);
	tc_context_free(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(spread_over_ranks_the_search_is_the_same),
		cmocka_unit_test(planted_faults_follow_their_candidates),
		cmocka_unit_test(bad_transports_are_errors),
		cmocka_unit_test(batch_jobs_go_whole_to_ranks),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
