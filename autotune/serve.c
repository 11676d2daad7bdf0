/* A rank that serves a distributed tuning run (tc_tune_serve): it says
 * hello to rank 0, then measures the batches of candidates of a search
 * spread over the ranks (SETUP, BATCH: its own evaluator, eval.c) and
 * tunes the whole jobs of a batch (JOB: tc_autotune into a cache file of
 * its own), until rank 0 says QUIT.  autotune/README.md ("Distributed
 * evaluation") gives the protocol. */
#define _DEFAULT_SOURCE /* mkdtemp, usleep */
#include "dist.h"

#include "../runtime/backend.h"
#include "../runtime/cache_ops.h"
#include "../runtime/error.h"
#include "../runtime/internal.h"
#include "../runtime/pool.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The def a rank is set up for. */
typedef struct served {
	unsigned kernel; /* 0: none */
	tc_module *m;
	tc_tune_eval *ev;
	tc_tune_settings set;
	DLTensor in[TC_TUNE_MAX_TENSORS];
	const DLTensor *in_ptrs[TC_TUNE_MAX_TENSORS];
	int64_t shape[TC_TUNE_MAX_TENSORS][8];
	void *data[TC_TUNE_MAX_TENSORS];
} served;

/* A serving rank's state. */
typedef struct server {
	tc_context *ctx;
	const tc_tune_transport *t;
	int jobs;
	volatile sig_atomic_t *stop;
	served s;
	uint32_t gen; /* the batch being measured */
	int quit;     /* QUIT came during a batch */
	void *pending; /* a message that came during a batch, for the loop */
	size_t npending;
	int batches;   /* batches and jobs received so far */
	uint32_t job;  /* the job being tuned (JOB) */
	int lost;           /* the ranks rank 0 gave up (its QUIT says) */
	int gpu_probed;     /* gpu_missing asked the probe */
	char gpu_why[600];  /* and why there is no GPU ("": there is) */
	volatile sig_atomic_t job_stop; /* its stop flag: CANCELs count */
	tc_context *job_ctx;    /* the job's context (its warnings go with it) */
	const char *job_cache;  /* the job's cache file, */
	tc_cache *job_rows;     /* read here (opened on the first progress), */
	int64_t rows_after;     /* its runs up to this id sent to rank 0 */
	char host[64];          /* this machine's name, as the job folders have it */
} server;

/* Whether message rd (a copy: it is read here) of type holds candidate
 * index (BATCH) or is job index (JOB). */
static int holds(reader rd, uint32_t type, int index)
{
	uint32_t n;
	if (type == MSG_JOB)
		return (int)get_u32(&rd) == index;
	get_u32(&rd); /* the run */
	get_u32(&rd); /* the generation */
	get_f64(&rd); /* the best so far */
	n = get_u32(&rd);
	for (uint32_t i = 0; i < n && !rd.bad; i++) {
		size_t len;
		if ((int)get_u32(&rd) == index)
			return !rd.bad;
		get_u32(&rd); /* its fault */
		get_bytes(&rd, &len); /* its options */
	}
	return 0;
}

/* Test-only: TCOMP_TUNE_TEST_RANK_FAULT="R:B:kill" makes rank R kill
 * itself (SIGKILL) when its batch or job B (from 0) comes, "R:#I:kill"
 * when a batch holding candidate I (or job I) comes; "...:stall=S" makes
 * it sleep S seconds before measuring it instead (a rank that hangs for a
 * while).  Several, comma-separated. */
static void planted_fault(int rank, int batch, const reader *rd, uint32_t type)
{
	const char *spec = getenv("TCOMP_TUNE_TEST_RANK_FAULT");
	for (; spec && *spec; spec = strchr(spec, ','), spec = spec ? spec + 1 : NULL) {
		int r, b, by_index = 0;
		double secs = 0;
		char what[16];
		if (sscanf(spec, "%d:%d:%15[a-z]=%lf", &r, &b, what, &secs) < 3) {
			if (sscanf(spec, "%d:#%d:%15[a-z]=%lf", &r, &b, what, &secs) < 3)
				continue;
			by_index = 1;
		}
		if (r != rank || (by_index ? !holds(*rd, type, b) : b != batch))
			continue;
		if (!strcmp(what, "kill")) {
			raise(SIGKILL);
		} else if (!strcmp(what, "stall") && secs > 0) {
			double until = tc_tune_now() + secs;
			while (tc_tune_now() < until)
				usleep(100000);
		}
	}
}

static void served_clear(served *s)
{
	int i;
	tc_tune_eval_free(s->ev);
	tc_module_free(s->m);
	for (i = 0; i < TC_TUNE_MAX_TENSORS; i++)
		tc_free(s->data[i]);
	memset(s, 0, sizeof(*s));
}

/* The record hook of a serving rank: each result goes to rank 0 at once. */
static void serve_record(void *user, const tc_tune_candidate *c)
{
	server *sv = user;
	tc_buf b;
	msg_begin(&b, MSG_RESULT);
	put_u32(&b, sv->s.kernel);
	put_u32(&b, sv->gen);
	put_u32(&b, (uint32_t)c->index);
	put_u32(&b, (uint32_t)c->status);
	put_f64(&b, c->median_s);
	put_f64(&b, c->min_s);
	put_u32(&b, (uint32_t)c->runs);
	put_f64(&b, c->compile_s);
	put_str(&b, c->message ? c->message : "");
	msg_send(sv->t, 0, &b);
}

/* Look, without waiting, for rank 0's word during a batch or a job: a
 * QUIT sets sv->quit; the CANCELs for run are counted (the number
 * returned); anything else is kept for the loop (sv->pending, one). */
static int cancels_from_rank0(server *sv, uint32_t run)
{
	int from, n = 0;
	const void *data;
	size_t len;
	reader rd;
	uint32_t type;
	while (!sv->pending && sv->t->recv(sv->t->user, 0, &from, &data, &len) == 1) {
		if (from != 0)
			continue;
		type = msg_open(&rd, data, len);
		if (type == MSG_QUIT) {
			sv->quit = 1;
			sv->lost = (int)get_u32(&rd);
		}
		else if (type == MSG_CANCEL)
			n += get_u32(&rd) == run;
		else if ((sv->pending = tc_malloc(len ? len : 1))) {
			memcpy(sv->pending, data, len);
			sv->npending = len;
		}
	}
	return n;
}

/* The progress hook of a batch of candidates: 1 (stop the batch) on a
 * CANCEL of its run or a QUIT. */
static int serve_progress(void *user, const tc_tune_progress *p)
{
	server *sv = user;
	(void)p;
	return cancels_from_rank0(sv, sv->s.kernel) > 0 || sv->quit;
}

/* Whether this rank lacks the GPU a def's candidates run on (why filled),
 * learnt once from the probe child (this process never opens the driver):
 * a rank whose CUDA_VISIBLE_DEVICES names no device sits GPU defs out
 * instead of failing every candidate. */
static int gpu_missing(server *sv, char *why, size_t nwhy)
{
	if (!sv->gpu_probed) {
		const tc_rt_backend *b = tc_rt_backend_find("cuda");
		char *key = NULL;
		int arch;
		sv->gpu_probed = 1;
		if (!b)
			snprintf(sv->gpu_why, sizeof(sv->gpu_why), "this tcomp has no CUDA backend");
		else if (tc_tune_probe_device(sv->ctx, b, &key, &arch) < 0)
			snprintf(sv->gpu_why, sizeof(sv->gpu_why), "no GPU here: %s",
				tc_context_error(sv->ctx));
		tc_free(key);
	}
	if (!*sv->gpu_why)
		return 0;
	snprintf(why, nwhy, "%s", sv->gpu_why);
	return 1;
}

/* SETUP: make the module, inputs and evaluator; an error message, or NULL. */
static const char *take_setup(server *sv, reader *rd, char *why, size_t nwhy)
{
	served *s = &sv->s;
	char *name, *text, *entry;
	size_t nref;
	const void *ref;
	int i, n_in;
	served_clear(s);
	s->kernel = get_u32(rd);
	name = get_str(rd);
	text = get_str(rd);
	entry = get_str(rd);
	tc_tune_settings_init(&s->set);
	{
		int device = (int)get_u32(rd), fake = (int)get_u32(rd);
		s->set.warmup = (int)get_u32(rd);
		s->set.runs = (int)get_u32(rd);
		s->set.min_time_s = get_f64(rd);
		s->set.timeout_s = get_f64(rd);
		s->set.compile_timeout_s = get_f64(rd);
		s->set.cutoff = get_f64(rd);
		s->set.threads = sv->jobs;
		s->set.stop = sv->stop;
		s->set.use_cache = 0;
		s->set.record = serve_record;
		s->set.progress = serve_progress;
		s->set.user = sv;
		n_in = (int)get_u32(rd);
		if (rd->bad || !name || !text || !entry || n_in < 0 || n_in > TC_TUNE_MAX_TENSORS) {
			snprintf(why, nwhy, "a malformed setup message");
			goto fail;
		}
		for (i = 0; i < n_in; i++) {
			DLTensor *x = &s->in[i];
			const void *p;
			size_t nb, want;
			int64_t ne = tc_tune_get_tensor(rd, x, s->shape[i]);
			p = get_bytes(rd, &nb);
			want = (size_t)ne * (size_t)((x->dtype.bits * x->dtype.lanes + 7) / 8);
			if (rd->bad || nb != want) {
				snprintf(why, nwhy, "a malformed setup message");
				goto fail;
			}
			if (!(s->data[i] = tc_malloc(nb + TC_TUNE_ALIGN))) {
				snprintf(why, nwhy, "out of memory");
				goto fail;
			}
			x->data = tc_tune_align(s->data[i]);
			memcpy(x->data, p, nb);
			s->in_ptrs[i] = x;
		}
		ref = get_bytes(rd, &nref);
		if (rd->bad) {
			snprintf(why, nwhy, "a malformed setup message");
			goto fail;
		}
		if (!(s->m = tc_module_parse(sv->ctx, text, name)) ||
			!(s->ev = tc_tune_eval_new(s->m, entry, s->in_ptrs, n_in, &s->set))) {
			snprintf(why, nwhy, "%s", tc_context_error(sv->ctx));
			goto fail;
		}
		if (device != kDLCPU && gpu_missing(sv, why, nwhy))
			goto fail;
		tc_tune_eval_set_device(s->ev, device);
		s->ev->fake_fitness = fake;
		if (nref != s->ev->shared_bytes) {
			snprintf(why, nwhy, "its outputs take %zu bytes here, %zu on rank 0",
				s->ev->shared_bytes, nref);
			goto fail;
		}
		if (tc_tune_eval_set_reference(s->ev, ref) < 0) {
			snprintf(why, nwhy, "out of memory");
			goto fail;
		}
	}
	tc_free(name);
	tc_free(text);
	tc_free(entry);
	return NULL;
fail:
	tc_free(name);
	tc_free(text);
	tc_free(entry);
	{
		unsigned kernel = s->kernel;
		served_clear(s);
		s->kernel = kernel; /* batches of it are answered empty */
	}
	return why;
}

/* Rows (export lines) as a message's field: empty when out of memory. */
static void put_rows(tc_buf *b, const tc_buf *rows)
{
	int none = rows->oom || !rows->s;
	put_bytes(b, none ? "" : rows->s, none ? 0 : rows->len);
}

/* The runs the job's cache file recorded since the last call, as export
 * lines into rows (those already sent are not sent again); problems are
 * warnings of ctx, once. */
static void job_new_rows(server *sv, tc_buf *rows)
{
	tc_context *ctx = sv->job_ctx;
	char *msg = NULL;
	if (!sv->job_rows && !(sv->job_rows = tc_cache_open(sv->job_cache, TC_CACHE_READ, &msg))) {
		tc_tune_warn(ctx, "its kernel cache %s: %s", sv->job_cache,
			msg ? msg : "cannot open it");
		tc_free(msg);
		sv->job_cache = NULL; /* no more tries */
		return;
	}
	if (tc_cache_export_after(sv->job_rows, &sv->rows_after, rows) < 0) {
		tc_tune_warn(ctx, "its kernel cache %s: %s", sv->job_cache,
			tc_cache_error(sv->job_rows));
		sv->job_cache = NULL;
	}
}

/* The progress hook of a job tuned for rank 0: its progress goes to rank
 * 0 with the runs recorded since the last (so that rank 0's cache holds
 * them however the job ends: a Ctrl-C under mpirun kills ranks a second
 * after it); a CANCEL from it counts as a Ctrl-C (the first ends the
 * search, the second the final stage), a QUIT as two. */
static int job_progress(void *user, const tc_tune_progress *p)
{
	server *sv = user;
	const tc_tune_candidate *c = p->last;
	int quit = sv->quit;
	tc_buf b, rows;
	tc_buf_init(&rows);
	if (sv->job_cache)
		job_new_rows(sv, &rows);
	msg_begin(&b, MSG_PROGRESS);
	put_u32(&b, sv->job);
	put_u32(&b, (uint32_t)p->generation);
	put_u32(&b, (uint32_t)p->generations);
	put_u32(&b, (uint32_t)p->done);
	put_u32(&b, (uint32_t)p->planned);
	put_u32(&b, (uint32_t)p->failed);
	put_f64(&b, p->best_s);
	put_f64(&b, p->gen_median_s);
	put_f64(&b, p->elapsed_s);
	put_f64(&b, p->eta_s);
	put_u32(&b, (uint32_t)p->final_round);
	put_u32(&b, (uint32_t)p->final_rounds);
	put_u32(&b, (uint32_t)(c ? c->status : TC_TUNE_OK));
	put_f64(&b, c ? c->median_s : INFINITY);
	put_u32(&b, (uint32_t)(c ? c->index : 0));
	put_str(&b, c && c->options ? c->options : "");
	put_str(&b, c && c->message ? c->message : "");
	put_rows(&b, &rows);
	msg_send(sv->t, 0, &b);
	tc_buf_free(&rows);
	sv->job_stop += cancels_from_rank0(sv, 0); /* a batch's CANCELs carry run 0 */
	if (sv->quit && !quit) /* a QUIT ends the search and the final stage */
		sv->job_stop += 2;
	return 0;
}

/* Remove the job's cache file (and SQLite's companions) and its folder. */
static void remove_job_cache(const char *dir)
{
	static const char *const names[] = {"kernels.sqlite", "kernels.sqlite-wal",
		"kernels.sqlite-shm", "kernels.sqlite-journal", NULL};
	char path[4300]; /* the folder (under 4200) and a name */
	for (int i = 0; names[i]; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		unlink(path);
	}
	rmdir(dir);
}

/* The folder for the jobs' caches: $TMPDIR, else /tmp. */
static const char *job_tmp(void)
{
	const char *tmp = getenv("TMPDIR");
	return tmp && *tmp ? tmp : "/tmp";
}

/* Whether process pid is gone: no such process, or a zombie (a killed
 * rank whose parent, mpirun, ended first waits for its new parent). */
static int process_gone(long pid)
{
	char path[64], stat[256];
	FILE *f;
	const char *paren;
	int gone = 0;
	if (kill((pid_t)pid, 0) < 0)
		return errno == ESRCH;
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	if ((f = fopen(path, "r"))) { /* "pid (comm) S ...": after the last ')' */
		if (fgets(stat, sizeof(stat), f) && (paren = strrchr(stat, ')')))
			gone = paren[1] == ' ' && paren[2] == 'Z';
		fclose(f);
	}
	return gone;
}

/* Remove the job folders (tcomp-rank-HOST-PID-XXXXXX) that ranks of this
 * machine left in job_tmp() when killed (mpirun kills its ranks a second
 * after a Ctrl-C): those of this host whose process is gone. */
static void remove_stale_job_caches(const char *host)
{
	char prefix[200], dir[4200];
	struct dirent *e;
	DIR *d = opendir(job_tmp());
	size_t n;
	snprintf(prefix, sizeof(prefix), "tcomp-rank-%s-", host);
	n = strlen(prefix);
	while (d && (e = readdir(d))) {
		char *end;
		long pid;
		if (strncmp(e->d_name, prefix, n))
			continue;
		pid = strtol(e->d_name + n, &end, 10);
		/* then exactly -XXXXXX (mkdtemp's: letters and digits) */
		if (end == e->d_name + n || *end != '-' || strlen(end) != 7 || strchr(end + 1, '-') ||
			pid <= 0 || pid == (long)getpid() || !process_gone(pid))
			continue;
		if (snprintf(dir, sizeof(dir), "%s/%s", job_tmp(), e->d_name) < (int)sizeof(dir))
			remove_job_cache(dir);
	}
	if (d)
		closedir(d);
}

/* JOB: tune a whole def here with tc_autotune, into a cache file of this
 * rank's own, and send rank 0 the result and the file's rows (JOB_DONE).
 * -1 when out of memory. */
static tc_stat take_job(server *sv, reader *rd)
{
	tc_context *ctx = tc_context_new();
	char *name = NULL, *text = NULL, *entry = NULL, *base_text = NULL, *best_text = NULL;
	char **seeds = NULL, dir[4096], path[4200], why[600] = "";
	tc_module *m = NULL;
	tc_options *base = NULL, *best = NULL;
	tc_tune_settings set;
	tc_tune_report rep;
	DLTensor in[TC_TUNE_MAX_TENSORS];
	const DLTensor *in_ptrs[TC_TUNE_MAX_TENSORS];
	int64_t shape[TC_TUNE_MAX_TENSORS][8];
	uint32_t nseeds = 0, i;
	int n_in, ok = 0, have_dir = 0;
	tc_buf b, rows;
	tc_stat st = TC_OK;
	tc_buf_init(&rows);
	memset(&rep, 0, sizeof(rep));
	rep.default_s = rep.best_s = rep.search_default_s = rep.search_best_s = INFINITY;
	sv->job = get_u32(rd);
	sv->job_stop = 0;
	if (!ctx) {
		st = TC_ERR;
		goto send;
	}
	name = get_str(rd);
	text = get_str(rd);
	entry = get_str(rd);
	base_text = get_str(rd);
	n_in = (int)get_u32(rd);
	if (n_in < 0 || n_in > TC_TUNE_MAX_TENSORS)
		rd->bad = 1;
	for (int k = 0; !rd->bad && k < n_in; k++) {
		tc_tune_get_tensor(rd, &in[k], shape[k]);
		in_ptrs[k] = &in[k];
	}
	tc_tune_settings_init(&set);
	tc_tune_get_settings(rd, &set);
	nseeds = get_u32(rd);
	if (!rd->bad && nseeds <= 10000 && !(seeds = tc_calloc(nseeds + 1, sizeof(char *))))
		st = TC_ERR;
	for (i = 0; seeds && i < nseeds && !rd->bad; i++)
		seeds[i] = get_str(rd);
	if (st < 0 || rd->bad || !name || !text || !entry || !base_text || !seeds) {
		snprintf(why, sizeof(why), st < 0 ? "out of memory" : "a malformed job message");
		goto send;
	}
	remove_stale_job_caches(sv->host);
	snprintf(dir, sizeof(dir), "%s/tcomp-rank-%s-%ld-XXXXXX", job_tmp(), sv->host,
		(long)getpid());
	if (!mkdtemp(dir)) {
		snprintf(why, sizeof(why), "cannot make a folder for its kernel cache in %s: %s",
			job_tmp(), strerror(errno));
		goto send;
	}
	have_dir = 1;
	snprintf(path, sizeof(path), "%s/kernels.sqlite", dir);
	set.cache_path = path;
	set.use_cache = 1;
	sv->job_ctx = ctx;
	sv->job_cache = path;
	sv->rows_after = 0;
	set.threads = sv->jobs;
	set.seeds = (const char *const *)seeds;
	set.n_seeds = (int)nseeds;
	set.progress = job_progress;
	set.user = sv;
	set.stop = &sv->job_stop;
	if (!(m = tc_module_parse(ctx, text, name)) || !(base = tc_options_new()) ||
		tc_options_parse(base, base_text, ctx) < 0) {
		snprintf(why, sizeof(why), "%s", tc_context_error(ctx));
		goto send;
	}
	if (tc_autotune(m, entry, in_ptrs, n_in, base, &set, &best, &rep) < 0) {
		snprintf(why, sizeof(why), "%s", tc_context_error(ctx));
	} else if (!(best_text = tc_options_print(best))) {
		st = TC_ERR;
	} else {
		ok = 1;
	}
	if (sv->job_cache) /* the runs not sent with a progress */
		job_new_rows(sv, &rows);
send:
	msg_begin(&b, MSG_JOB_DONE);
	put_u32(&b, sv->job);
	put_u32(&b, (uint32_t)ok);
	put_str(&b, st < 0 ? "out of memory" : why);
	put_str(&b, best_text ? best_text : "");
	tc_tune_put_report(&b, &rep);
	put_str(&b, ctx ? tc_context_warnings(ctx) : "");
	put_rows(&b, &rows);
	msg_send(sv->t, 0, &b);
	tc_buf_free(&rows);
	tc_cache_close(sv->job_rows);
	sv->job_rows = NULL;
	sv->job_cache = NULL;
	sv->job_ctx = NULL; /* freed below */
	if (have_dir)
		remove_job_cache(dir);
	for (i = 0; seeds && i < nseeds; i++)
		tc_free(seeds[i]);
	tc_free(seeds);
	tc_free(name);
	tc_free(text);
	tc_free(entry);
	tc_free(base_text);
	tc_string_free(best_text);
	tc_options_free(base);
	tc_options_free(best);
	tc_module_free(m);
	tc_context_free(ctx);
	return st;
}

/* BATCH: measure its candidates; the results go out one by one
 * (serve_record), then BATCH_DONE.  -1 when out of memory. */
static tc_stat take_batch(server *sv, reader *rd)
{
	served *s = &sv->s;
	uint32_t kernel = get_u32(rd), n;
	double best;
	tc_options **o = NULL;
	char **keys = NULL;
	int *idx = NULL;
	tc_tune_fault *f = NULL;
	double *t = NULL;
	uint32_t i, made = 0;
	tc_stat st = TC_OK;
	tc_buf b;
	sv->gen = get_u32(rd);
	best = get_f64(rd);
	n = get_u32(rd);
	if (!rd->bad && kernel == s->kernel && s->ev && n > 0 && n <= 100000) {
		o = tc_calloc(n, sizeof(*o));
		keys = tc_calloc(n, sizeof(*keys));
		idx = tc_calloc(n, sizeof(int));
		f = tc_calloc(n, sizeof(*f));
		t = tc_calloc(n, sizeof(double));
		if (!o || !keys || !idx || !f || !t)
			st = TC_ERR;
		for (i = 0; st == TC_OK && i < n; i++) {
			idx[i] = (int)get_u32(rd);
			f[i] = (tc_tune_fault)get_u32(rd);
			if (!(keys[i] = get_str(rd)) || rd->bad)
				break;
			if (!(o[i] = tc_options_new()) ||
				tc_options_parse(o[i], keys[i], sv->ctx) < 0) {
				made = i + 1;
				break;
			}
			made = i + 1;
		}
		if (st == TC_OK && made == n && !rd->bad) {
			if (isfinite(best) && best < s->ev->best)
				s->ev->best = best;
			s->ev->stop = 0;
			if (tc_tune_eval_measure_at(s->ev, (int)sv->gen, (int)n, o, keys, idx, f, t) < 0)
				st = TC_ERR;
		}
		for (i = 0; i < n && o; i++) {
			tc_options_free(o[i]);
			tc_free(keys[i]);
		}
	}
	/* what was not measured (a malformed batch, a def this rank could not
	 * set up, a cancel) goes back to rank 0's queue with this */
	msg_begin(&b, MSG_BATCH_DONE);
	put_u32(&b, kernel);
	msg_send(sv->t, 0, &b);
	tc_free(o);
	tc_free(keys);
	tc_free(idx);
	tc_free(f);
	tc_free(t);
	return st;
}

int tc_tune_serve(tc_context *ctx, const tc_tune_transport *t, int jobs,
	volatile sig_atomic_t *stop)
{
	server sv;
	tc_buf b;
	char host[128] = "", machine[256];
	int rc = -1;
	if (!ctx)
		return -1;
	tc_rt_clear_error(ctx);
	if (!t || t->rank <= 0 || t->rank >= t->size || !t->send || !t->recv) {
		tc_rt_set_error(ctx, "tc_tune_serve: a transport of a rank other than 0 is needed");
		return -1;
	}
	memset(&sv, 0, sizeof(sv));
	sv.ctx = ctx;
	sv.t = t;
	sv.stop = stop;
	sv.jobs = jobs > 0 ? jobs : tc_rt_cpus();
	gethostname(host, sizeof(host) - 1);
	for (size_t i = 0; i + 1 < sizeof(sv.host) && host[i]; i++) /* a file name's part */
		sv.host[i] = isalnum((unsigned char)host[i]) || host[i] == '.' || host[i] == '_'
			? host[i] : '_';
	tc_tune_machine(machine, sizeof(machine));
	msg_begin(&b, MSG_HELLO);
	put_str(&b, TCOMP_VERSION);
	put_u32(&b, BYTE_ORDER_MARK);
	put_u32(&b, (uint32_t)sv.jobs);
	put_str(&b, host);
	put_str(&b, machine);
	if (msg_send(t, 0, &b) < 0) {
		tc_rt_set_error(ctx, "tc_tune_serve: cannot reach rank 0");
		return -1;
	}
	while (!sv.quit && !(stop && *stop)) {
		int from, got;
		const void *data;
		size_t len;
		void *own = NULL;
		reader rd;
		uint32_t type;
		char why[700];
		if (sv.pending) {
			own = sv.pending;
			data = own;
			len = sv.npending;
			from = 0;
			got = 1;
			sv.pending = NULL;
		} else {
			got = t->recv(t->user, 1.0, &from, &data, &len);
		}
		if (got < 0) {
			tc_rt_set_error(ctx, "tc_tune_serve: the transport failed");
			goto out;
		}
		if (!got || from != 0) {
			tc_free(own);
			continue;
		}
		if (!len) {
			tc_free(own);
			tc_rt_set_error(ctx, "tc_tune_serve: rank 0 is gone");
			goto out;
		}
		type = msg_open(&rd, data, len);
		if (type == MSG_QUIT) {
			uint32_t lost = get_u32(&rd);
			sv.lost = rd.bad ? 0 : (int)lost;
			tc_free(own);
			break;
		}
		if (type == MSG_SETUP) {
			const char *err = take_setup(&sv, &rd, why, sizeof(why));
			if (err) {
				msg_begin(&b, MSG_SETUP_FAILED);
				put_u32(&b, sv.s.kernel);
				put_str(&b, err);
				msg_send(t, 0, &b);
			}
		} else if (type == MSG_JOB || type == MSG_BATCH) {
			planted_fault(t->rank, sv.batches++, &rd, type);
			if ((type == MSG_JOB ? take_job(&sv, &rd) : take_batch(&sv, &rd)) < 0) {
				tc_free(own);
				tc_rt_set_error(ctx, "out of memory");
				goto out;
			}
		}
		tc_free(own);
	}
	rc = sv.lost;
out:
	tc_free(sv.pending);
	served_clear(&sv.s);
	return rc;
}
