/* Batches: whole jobs (a def at input shapes, tuned as tc_autotune does)
 * spread over the ranks of a transport, or tuned here one after another
 * (tc_autotune_batch).  A job goes to an idle rank, largest first; the rank
 * tunes it alone into a kernel cache file of its own and sends rank 0 the
 * rows, which rank 0 adds to its cache.  autotune/README.md ("Batches")
 * gives the design. */
#include "dist.h"

#include "../runtime/cache_ops.h"
#include "../runtime/error.h"
#include "../runtime/internal.h"
#include "../runtime/module.h"
#include "../runtime/options.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A job on rank 0's side. */
enum { JOB_QUEUED, JOB_SENT, JOB_FINISHED };
typedef struct bjob {
	int state, rank, lost, first_lost;
	/* candidates (s) and final re-timings (f) measured and planned, from
	 * its progress (planned: the settings' until it says) */
	int sdone, splanned, fdone, fplanned;
	double size; /* for largest first: the elements of its inputs */
} bjob;

/* Job j's progress p taken into its counts. */
static void job_counts(bjob *j, const tc_tune_progress *p)
{
	if (p->final_round) {
		j->fdone = p->done;
		j->fplanned = p->planned;
	} else {
		j->sdone = p->done;
		j->splanned = p->planned;
	}
}

/* The batch on rank 0. */
typedef struct batch {
	tc_context *ctx;
	tc_tune_job *jobs;
	int n;
	bjob *b;
	const tc_tune_settings *set;
	int (*progress)(void *user, const tc_tune_batch_progress *p);
	void *user;
	double t0;
	int stop;      /* the progress callback asked to stop */
	int cur;       /* the job tuned here (local progress) */
} batch;

static void batch_counts(const batch *bt, tc_tune_batch_progress *bp, int job)
{
	int i, done = 0, planned = 0;
	memset(bp, 0, sizeof(*bp));
	bp->job = job;
	bp->jobs = bt->n;
	for (i = 0; i < bt->n; i++) {
		const bjob *j = &bt->b[i];
		int d = j->sdone + j->fdone;
		bp->finished += j->state == JOB_FINISHED;
		bp->running += j->state == JOB_SENT;
		done += d;
		planned += j->state == JOB_FINISHED ? d : (j->splanned > j->sdone ? j->splanned
			: j->sdone) + (j->fplanned > j->fdone ? j->fplanned : j->fdone);
	}
	bp->elapsed_s = tc_tune_now() - bt->t0;
	bp->eta_s = done ? bp->elapsed_s / done * (planned - done) : INFINITY;
}

/* Tell the caller about job's progress p (NULL: it finished). */
static void batch_report(batch *bt, int job, const tc_tune_progress *p)
{
	tc_tune_batch_progress bp;
	if (!bt->progress)
		return;
	batch_counts(bt, &bp, job);
	bp.p = p;
	if (bt->progress(bt->user, &bp))
		bt->stop = 1;
}

/* The progress hook of a job tuned here. */
static int local_progress(void *user, const tc_tune_progress *p)
{
	batch *bt = user;
	job_counts(&bt->b[bt->cur], p);
	batch_report(bt, bt->cur, p);
	return bt->stop;
}

/* The record hook of a job tuned here: the caller's, with its user. */
static void local_record(void *user, const tc_tune_candidate *c)
{
	batch *bt = user;
	bt->set->record(bt->set->user, c);
}

/* Tune job i here with tc_autotune. */
static void tune_here(batch *bt, int i)
{
	tc_tune_job *jb = &bt->jobs[i];
	tc_tune_settings s = *bt->set;
	bjob *j = &bt->b[i];
	s.transport = NULL;
	s.progress = local_progress;
	s.user = bt;
	bt->cur = i;
	j->state = JOB_SENT;
	j->rank = 0;
	s.record = bt->set->record ? local_record : NULL;
	jb->rank = 0;
	jb->ok = tc_autotune(jb->m, jb->entry, jb->inputs, jb->n_inputs, jb->base, &s, &jb->best,
		&jb->report) == 0;
	if (!jb->ok)
		snprintf(jb->message, sizeof(jb->message), "%s", tc_context_error(jb->m->ctx));
	j->state = JOB_FINISHED;
	batch_report(bt, i, NULL);
}

/* The options o sets explicitly (those a tuner keeps fixed), as
 * tc_options_parse reads them ("" for NULL); NULL when out of memory. */
static char *set_options_text(const tc_options *o)
{
	tc_buf b;
	tc_buf_init(&b);
	tc_buf_puts(&b, ""); /* "" when o sets nothing */
	for (int i = 0; o && i < tc_rt_opt_count(); i++)
		if (tc_rt_options_is_set(o, i))
			tc_buf_printf(&b, "%s=%s\n", tc_rt_opt_name(i),
				tc_options_get(o, tc_rt_opt_name(i)));
	return tc_buf_take(&b);
}

/* Send job i to rank r: the def's text, entry, base options, shapes,
 * settings and seeds from cache c (NULL: none). */
static tc_stat send_job(batch *bt, int i, int r, tc_tune_transport *t, tc_cache *c)
{
	tc_tune_job *jb = &bt->jobs[i];
	char *base = set_options_text(jb->base);
	char **seeds = NULL;
	int nseeds = 0, k;
	tc_cache_key key;
	tc_buf b;
	tc_stat st;
	if (!base)
		return TC_ERR;
	if (c && tc_cache_key_init_for(&key, jb->m, jb->entry, jb->inputs, jb->n_inputs, jb->base,
			NULL) == 0) {
		if (tc_cache_seeds(c, &key, TC_TUNE_CACHE_SEEDS, &seeds, &nseeds) < 0)
			nseeds = 0;
		tc_cache_key_clear(&key);
	}
	msg_begin(&b, MSG_JOB);
	put_u32(&b, (uint32_t)i);
	put_str(&b, jb->m->src->name);
	put_str(&b, jb->m->src->text);
	put_str(&b, jb->entry);
	put_str(&b, base);
	put_u32(&b, (uint32_t)jb->n_inputs);
	for (k = 0; k < jb->n_inputs; k++)
		tc_tune_put_tensor(&b, jb->inputs[k]);
	tc_tune_put_settings(&b, bt->set);
	put_u32(&b, (uint32_t)(bt->set->n_seeds + nseeds));
	for (k = 0; k < bt->set->n_seeds; k++)
		put_str(&b, bt->set->seeds[k] ? bt->set->seeds[k] : "");
	for (k = 0; k < nseeds; k++)
		put_str(&b, seeds[k]);
	st = msg_send(t, r, &b);
	for (k = 0; k < nseeds; k++)
		tc_free(seeds[k]);
	tc_free(seeds);
	tc_free(base);
	return st;
}

/* Rank r's runs of job i (export lines) into cache c (NULL: none). */
static void add_rows(batch *bt, int i, int r, const char *rows, tc_cache *c)
{
	if (c && rows && *rows && tc_cache_import(c, rows, NULL, NULL, NULL) < 0)
		tc_tune_warn(bt->ctx, "kernel cache %s: cannot add rank %d's runs of %s: %s",
			tc_cache_path(c), r, bt->jobs[i].entry, tc_cache_error(c));
}

/* A PROGRESS of job i from rank r: the runs it recorded since the last
 * into cache c, then the caller's progress callback. */
static void take_progress(batch *bt, int i, int r, reader *rd, tc_cache *cache)
{
	tc_tune_progress p;
	tc_tune_candidate c;
	char *opts, *msg, *rows;
	bjob *j = &bt->b[i];
	memset(&p, 0, sizeof(p));
	memset(&c, 0, sizeof(c));
	p.generation = (int)get_u32(rd);
	p.generations = (int)get_u32(rd);
	p.done = (int)get_u32(rd);
	p.planned = (int)get_u32(rd);
	p.failed = (int)get_u32(rd);
	p.best_s = get_f64(rd);
	p.gen_median_s = get_f64(rd);
	p.elapsed_s = get_f64(rd);
	p.eta_s = get_f64(rd);
	p.final_round = (int)get_u32(rd);
	p.final_rounds = (int)get_u32(rd);
	c.status = (tc_tune_status)get_u32(rd);
	c.median_s = get_f64(rd);
	c.index = (int)get_u32(rd);
	c.final = p.final_round > 0;
	opts = get_str(rd);
	msg = get_str(rd);
	rows = get_str(rd);
	if (!rd->bad && rows)
		add_rows(bt, i, r, rows, cache);
	if (!rd->bad && opts && msg) {
		c.options = opts;
		c.message = msg;
		p.last = &c;
		job_counts(j, &p);
		batch_report(bt, i, &p);
	}
	tc_free(opts);
	tc_free(msg);
	tc_free(rows);
}

/* A JOB_DONE of job i from rank r: its result, its rows into cache c. */
static void take_job_done(batch *bt, int i, int r, reader *rd, tc_cache *c)
{
	tc_tune_job *jb = &bt->jobs[i];
	bjob *j = &bt->b[i];
	int ok = (int)get_u32(rd);
	char *msg = get_str(rd), *best = get_str(rd), *warnings = NULL, *rows = NULL;
	tc_tune_report rep;
	memset(&rep, 0, sizeof(rep));
	tc_tune_get_report(rd, &rep);
	warnings = get_str(rd);
	rows = get_str(rd);
	j->state = JOB_FINISHED;
	jb->rank = r;
	if (rd->bad || !msg || !best || !warnings || !rows) {
		snprintf(jb->message, sizeof(jb->message), "rank %d sent a malformed result", r);
		goto out;
	}
	jb->report = rep;
	if (*warnings)
		tc_tune_warn(bt->ctx, "rank %d, %s: %s", r, jb->entry, warnings);
	add_rows(bt, i, r, rows, c);
	if (!ok) {
		snprintf(jb->message, sizeof(jb->message), "%s", msg);
		goto out;
	}
	if (!(jb->best = tc_options_new()) || tc_options_parse(jb->best, best, bt->ctx) < 0) {
		tc_options_free(jb->best);
		jb->best = NULL;
		snprintf(jb->message, sizeof(jb->message), "rank %d's choice does not parse: %s", r,
			tc_context_error(bt->ctx));
		goto out;
	}
	jb->ok = 1;
out:
	tc_free(msg);
	tc_free(best);
	tc_free(warnings);
	tc_free(rows);
	batch_report(bt, i, NULL);
}

/* Give rank r up (why): its job goes back to the queue, or, lost a second
 * time, fails. */
static void lose_rank(batch *bt, tc_tune_ranks *ms, int r, const char *why)
{
	tc_tune_give_up(bt->ctx, ms, r, why);
	for (int i = 0; i < bt->n; i++) {
		bjob *j = &bt->b[i];
		if (j->state != JOB_SENT || j->rank != r)
			continue;
		if (j->lost++) {
			j->state = JOB_FINISHED;
			snprintf(bt->jobs[i].message, sizeof(bt->jobs[i].message),
				"lost with ranks %d and %d (given up)", j->first_lost, r);
			batch_report(bt, i, NULL);
		} else {
			j->first_lost = r;
			j->state = JOB_QUEUED;
			j->sdone = j->fdone = 0;
		}
	}
}

/* The largest job queued (-1: none). */
static int largest_queued(const batch *bt)
{
	int i, best = -1;
	for (i = 0; i < bt->n; i++)
		if (bt->b[i].state == JOB_QUEUED && (best < 0 || bt->b[i].size > bt->b[best].size))
			best = i;
	return best;
}

/* How long a rank tuning a job may stay silent (a compile, a timing or a
 * re-timing, and slack). */
static double job_silence_s(const tc_tune_settings *s)
{
	return s->compile_timeout_s + s->timeout_s + 2 * (s->final_time_s + s->final_warmup_s) +
		ANSWER_SLACK_S;
}

/* Rank 0's side of a batch over transport t; the number of jobs not
 * tuned, or -1. */
static int batch_remote(batch *bt, tc_tune_transport *t)
{
	tc_tune_ranks *ms = tc_tune_ranks_state(t);
	tc_cache *c = NULL;
	char *msg = NULL;
	int i, r, failed = 0, cancels = 0;
	sig_atomic_t stop0 = bt->set->stop ? *bt->set->stop : 0;
	if (!ms) {
		tc_rt_set_error(bt->ctx, "out of memory");
		return -1;
	}
	if (bt->set->use_cache && !(c = tc_cache_open(bt->set->cache_path, TC_CACHE_WRITE, &msg))) {
		tc_tune_warn(bt->ctx, "kernel cache not used: %s", msg ? msg : "cannot open it");
		tc_free(msg);
	}
	if (tc_tune_await_hellos(bt->ctx, t, ms) < 0) {
		tc_cache_close(c);
		return -1;
	}
	for (;;) {
		int from, got, alive = 0, open = 0;
		const void *data;
		size_t len;
		reader rd;
		uint32_t type;
		double now = tc_tune_now();
		int stopping = bt->stop || (bt->set->stop && *bt->set->stop != stop0);
		/* a stop (each one) goes to the ranks tuning: they end their search,
		 * then (the second) their final stage */
		int want = bt->set->stop ? (int)(*bt->set->stop - stop0) : 0;
		if (bt->stop && want < 1)
			want = 1;
		for (; cancels < want; cancels++)
			for (r = 1; r < ms->size; r++)
				if (ms->r[r].busy && !ms->r[r].lost)
					tc_tune_send_plain(t, r, MSG_CANCEL, 0);
		for (i = 0; i < bt->n; i++)
			open += bt->b[i].state != JOB_FINISHED && !(stopping && bt->b[i].state == JOB_QUEUED);
		if (!open)
			break;
		for (r = 1; r < ms->size; r++) {
			tc_tune_rank *ri = &ms->r[r];
			if (ri->lost || !ri->hello)
				continue;
			if (ri->busy && now - ri->heard > job_silence_s(bt->set)) {
				char why[96];
				snprintf(why, sizeof(why), "no answer for %.0f s", now - ri->heard);
				lose_rank(bt, ms, r, why);
				continue;
			}
			alive++;
			if (ri->busy || stopping)
				continue;
			if ((i = largest_queued(bt)) < 0)
				continue;
			if (send_job(bt, i, r, t, c) < 0) {
				tc_tune_give_up(bt->ctx, ms, r, "a job could not be sent to it");
				continue;
			}
			bt->b[i].state = JOB_SENT;
			bt->b[i].rank = r;
			ri->busy = 1;
			ri->heard = now;
		}
		if (!alive && !stopping) { /* nobody left: the rest here */
			for (i = 0; i < bt->n; i++)
				if (bt->b[i].state == JOB_QUEUED)
					tune_here(bt, i);
			continue;
		}
		got = t->recv(t->user, 0.1, &from, &data, &len);
		if (got < 0) {
			tc_rt_set_error(bt->ctx, "tc_autotune_batch: the transport failed");
			tc_cache_close(c);
			return -1;
		}
		if (!got || from <= 0 || from >= ms->size || ms->r[from].lost)
			continue;
		if (!len) {
			lose_rank(bt, ms, from, GONE);
			continue;
		}
		type = msg_open(&rd, data, len);
		if (type == MSG_HELLO) {
			tc_tune_take_hello(bt->ctx, ms, from, &rd);
			continue;
		}
		ms->r[from].heard = tc_tune_now();
		i = (int)get_u32(&rd);
		if (i < 0 || i >= bt->n || bt->b[i].state != JOB_SENT || bt->b[i].rank != from)
			continue;
		if (type == MSG_PROGRESS) {
			take_progress(bt, i, from, &rd, c);
		} else if (type == MSG_JOB_DONE) {
			ms->r[from].busy = 0;
			ms->r[from].measured += 1;
			take_job_done(bt, i, from, &rd, c);
		}
	}
	for (i = 0; i < bt->n; i++) {
		if (bt->b[i].state != JOB_FINISHED)
			snprintf(bt->jobs[i].message, sizeof(bt->jobs[i].message), "not tuned: stopped");
		failed += !bt->jobs[i].ok;
	}
	tc_cache_close(c);
	return failed;
}

int tc_autotune_batch(tc_context *ctx, tc_tune_job *jobs, int n, const tc_tune_settings *settings,
	int (*progress)(void *user, const tc_tune_batch_progress *p), void *user)
{
	tc_tune_settings defaults;
	batch bt;
	int i, k, failed = 0, rc;
	sig_atomic_t stop0;
	if (!ctx)
		return -1;
	tc_rt_clear_error(ctx);
	if (n < 0 || (n > 0 && !jobs)) {
		tc_rt_set_error(ctx, "tc_autotune_batch: NULL argument");
		return -1;
	}
	for (i = 0; i < n; i++) {
		if (!jobs[i].m || !jobs[i].entry || (jobs[i].n_inputs > 0 && !jobs[i].inputs)) {
			tc_rt_set_error(ctx, "tc_autotune_batch: job %d lacks its module, entry or inputs", i);
			return -1;
		}
		if (!jobs[i].m->src) {
			tc_rt_set_error(ctx, "tc_autotune_batch: job %d's module has no source text", i);
			return -1;
		}
		jobs[i].ok = 0;
		jobs[i].message[0] = 0;
		jobs[i].best = NULL;
		jobs[i].rank = 0;
		memset(&jobs[i].report, 0, sizeof(jobs[i].report));
	}
	if (!settings) {
		tc_tune_settings_init(&defaults);
		settings = &defaults;
	}
	memset(&bt, 0, sizeof(bt));
	bt.ctx = ctx;
	bt.jobs = jobs;
	bt.n = n;
	bt.set = settings;
	bt.progress = progress;
	bt.user = user;
	bt.t0 = tc_tune_now();
	if (!(bt.b = tc_calloc((size_t)n + 1, sizeof(bjob)))) {
		tc_rt_set_error(ctx, "out of memory");
		return -1;
	}
	for (i = 0; i < n; i++) {
		bjob *j = &bt.b[i];
		j->splanned = settings->population +
			(settings->generations - 1) * (settings->population - settings->elites);
		j->fplanned = settings->final_candidates ?
			(settings->final_candidates + 1) * settings->final_rounds : 0;
		for (k = 0; k < jobs[i].n_inputs; k++) {
			double e = 1;
			for (int d = 0; jobs[i].inputs[k] && d < jobs[i].inputs[k]->ndim; d++)
				e *= (double)jobs[i].inputs[k]->shape[d];
			j->size += e;
		}
	}
	stop0 = settings->stop ? *settings->stop : 0;
	if (settings->transport && settings->transport->size > 1) {
		rc = batch_remote(&bt, settings->transport);
	} else {
		for (i = 0; i < n; i++) {
			if (bt.stop || (settings->stop && *settings->stop != stop0)) {
				snprintf(jobs[i].message, sizeof(jobs[i].message), "not tuned: stopped");
				bt.b[i].state = JOB_FINISHED;
				continue;
			}
			tune_here(&bt, i);
		}
		for (i = 0; i < n; i++)
			failed += !jobs[i].ok;
		rc = failed;
	}
	tc_free(bt.b);
	return rc;
}
