/* Distributed evaluation: the candidates of a search compiled and timed by
 * other processes (ranks), over a message transport (tc_tune_transport in
 * include/tcomp.h; tcomp autotune's is MPI, tools/mpi.c).  Rank 0 runs the
 * search and the final stage as tc_autotune always does; its measure
 * function (tc_tune_dist_measure) hands each generation's candidates to
 * the ranks that serve (serve.c), which measure them with their own
 * evaluator (eval.c: forked children, one timing at a time) and send back
 * each result as it comes.  This file also keeps rank 0's state of the
 * ranks (hellos, who is given up) for batch.c, and the fields of a batch's
 * messages.
 *
 *   rank 0                                   rank r > 0
 *                                            HELLO   version, jobs, host,
 *                                                    machine
 *   SETUP   the def's source, entry,
 *           settings, inputs (data), the
 *           reference result
 *   BATCH   generation, best so far,
 *           candidates (index, fault, key)
 *                                            RESULT  one per candidate, as
 *                                                    it finishes
 *                                            BATCH_DONE
 *   CANCEL  (a stop: the batch ends early)
 *   QUIT    (tc_tune_dismiss)
 *
 * The first correct candidate of a run (the base options) is measured on
 * rank 0 before anything is sent: its result is the reference that every
 * rank checks against, so a candidate is judged the same wherever it ran.
 * Candidates keep the indexes rank 0 gave them (planted test faults and
 * the stack offsets follow them), and a generation's times are those of
 * its candidates wherever they were timed, so the search makes the same
 * choices as in one process given the same times (the tests check it with
 * fake times, eval.h).
 *
 * Faults: a rank that stops answering while it holds candidates for
 * compile_timeout_s + timeout_s + 10 s (a healthy one answers within a
 * compile and a timing) is given up: its candidates are queued again for
 * the others, and one lost a second time is recorded as crashed.  With no
 * rank left, rank 0 measures the rest itself.  A rank that cannot set a
 * def up (SETUP_FAILED) sits that def out.  Messages of a rank given up are
 * ignored from then on.
 *
 * Messages: a 4-byte magic and a type, then fixed fields in the senders'
 * byte order (the ranks must share it: HELLO carries the version and a
 * byte-order mark, and rank 0 gives up a rank that differs). */
#include "dist.h"

#include "../runtime/backend.h"
#include "../runtime/error.h"
#include "../runtime/internal.h"
#include "../runtime/module.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the ranks ---- */

void tc_tune_machine(char *buf, size_t n)
{
	const tc_rt_backend *b = tc_rt_backend_find("cpu");
	char *k = b && b->key_target ? b->key_target() : NULL;
	snprintf(buf, n, "%s", k ? k : "");
	tc_free(k);
}

tc_tune_ranks *tc_tune_ranks_state(tc_tune_transport *t)
{
	tc_tune_ranks *ms = t->state;
	if (ms)
		return ms;
	if (!(ms = tc_calloc(1, sizeof(*ms))) ||
		!(ms->r = tc_calloc((size_t)t->size, sizeof(tc_tune_rank)))) {
		tc_free(ms);
		return NULL;
	}
	ms->size = t->size;
	ms->hellos_awaited = 1;
	tc_tune_machine(ms->machine, sizeof(ms->machine));
	t->state = ms;
	return ms;
}

/* A candidate of the generation being measured. */enum { PENDING, QUEUED, SENT, DONE };
typedef struct cand {
	int state;
	int rank; /* SENT: to whom */
	int lost; /* times lost with a rank */
	int index;
	tc_tune_fault fault;
	int first_lost_rank;
} cand;

void tc_tune_give_up(tc_context *ctx, tc_tune_ranks *ms, int r, const char *why)
{
	tc_tune_rank *ri = &ms->r[r];
	if (ri->lost)
		return;
	ri->lost = 1;
	ri->busy = 0;
	tc_tune_warn(ctx, "rank %d%s%s%s: %s; it is given up and its work goes to the other "
		"ranks", r, *ri->host ? " (" : "", ri->host, *ri->host ? ")" : "", why);
}

/* Ranks alive and able to take run d's candidates. */
static int usable(const tc_tune_dist *d, const tc_tune_rank *ri)
{
	return ri->hello && !ri->lost && ri->failed_setup != d->kernel;
}

/* Take a HELLO from rank r. */
void tc_tune_take_hello(tc_context *ctx, tc_tune_ranks *ms, int r, reader *rd)
{
	tc_tune_rank *ri = &ms->r[r];
	char *version = get_str(rd), *host = NULL, *machine = NULL;
	uint32_t bom = get_u32(rd);
	int jobs = (int)get_u32(rd);
	host = get_str(rd);
	machine = get_str(rd);
	if (rd->bad || !version || !host || !machine) {
		tc_tune_give_up(ctx, ms, r, "its hello was malformed");
	} else if (strcmp(version, TCOMP_VERSION) || bom != BYTE_ORDER_MARK) {
		char why[160];
		snprintf(why, sizeof(why), "it runs tcomp %s%s, this process %s", version,
			bom != BYTE_ORDER_MARK ? " with another byte order" : "", TCOMP_VERSION);
		tc_tune_give_up(ctx, ms, r, why);
	} else if (!ri->hello) {
		ri->hello = 1;
		ri->jobs = jobs > 0 ? jobs : 1;
		snprintf(ri->host, sizeof(ri->host), "%s", host);
		snprintf(ri->machine, sizeof(ri->machine), "%s", machine);
		if (strcmp(machine, ms->machine))
			tc_tune_warn(ctx, "rank %d (%s) is another kind of machine (%s; "
				"this one: %s): the search compares its times with the others', and "
				"the final stage re-times on rank 0", r, host, machine, ms->machine);
	}
	tc_free(version);
	tc_free(host);
	tc_free(machine);
}

/* Send SETUP of run d to rank r. */
static tc_stat send_setup(tc_tune_dist *d, int r)
{
	const tc_tune_eval *ev = d->ev;
	const tc_tune_settings *set = ev->set;
	tc_buf b;
	int i, k;
	msg_begin(&b, MSG_SETUP);
	put_u32(&b, d->kernel);
	put_str(&b, d->m->src->name);
	put_str(&b, d->m->src->text);
	put_str(&b, d->entry);
	put_u32(&b, (uint32_t)ev->device);
	put_u32(&b, (uint32_t)ev->fake_fitness);
	put_u32(&b, (uint32_t)set->warmup);
	put_u32(&b, (uint32_t)set->runs);
	put_f64(&b, set->min_time_s);
	put_f64(&b, set->timeout_s);
	put_f64(&b, set->compile_timeout_s);
	put_f64(&b, set->cutoff);
	put_u32(&b, (uint32_t)ev->n_in);
	for (i = 0; i < ev->n_in; i++) {
		const DLTensor *x = &ev->in[i];
		int64_t n = 1;
		tc_tune_put_tensor(&b, x);
		for (k = 0; k < x->ndim; k++)
			n *= x->shape[k];
		/* the evaluator's inputs are compact: its own, or the caller's
		 * with data (tc_autotune takes compact host data) */
		put_bytes(&b, (const char *)x->data + x->byte_offset,
			(size_t)n * (size_t)((x->dtype.bits * x->dtype.lanes + 7) / 8));
	}
	put_bytes(&b, ev->ref, ev->shared_bytes);
	return msg_send(d->t, r, &b);
}

/* Send BATCH: the candidates in which[0..n) to rank r. */
static tc_stat send_batch(tc_tune_dist *d, int r, int gen, const int *which, int n,
	const cand *c, char *const *keys)
{
	tc_buf b;
	int i;
	msg_begin(&b, MSG_BATCH);
	put_u32(&b, d->kernel);
	put_u32(&b, (uint32_t)gen);
	put_f64(&b, d->ev->best);
	put_u32(&b, (uint32_t)n);
	for (i = 0; i < n; i++) {
		put_u32(&b, (uint32_t)c[which[i]].index);
		put_u32(&b, (uint32_t)c[which[i]].fault);
		put_str(&b, keys[which[i]]);
	}
	return msg_send(d->t, r, &b);
}

void tc_tune_send_plain(const tc_tune_transport *t, int r, uint32_t type, uint32_t kernel)
{
	tc_buf b;
	msg_begin(&b, type);
	put_u32(&b, kernel);
	msg_send(t, r, &b);
}

/* Wait for the hellos of every rank (the first run only): those silent
 * for HELLO_WAIT_S are given up. */
tc_stat tc_tune_await_hellos(tc_context *ctx, tc_tune_transport *t, tc_tune_ranks *ms)
{
	double t0 = tc_tune_now();
	int r, missing;
	if (!ms->hellos_awaited)
		return TC_OK;
	ms->hellos_awaited = 0;
	for (;;) {
		int from, got;
		const void *data;
		size_t len;
		reader rd;
		for (missing = 0, r = 1; r < ms->size; r++)
			missing += !ms->r[r].hello && !ms->r[r].lost;
		if (!missing)
			return TC_OK;
		if (tc_tune_now() - t0 > HELLO_WAIT_S) {
			for (r = 1; r < ms->size; r++)
				if (!ms->r[r].hello)
					tc_tune_give_up(ctx, ms, r, "it did not say hello within a minute");
			return TC_OK;
		}
		got = t->recv(t->user, 0.1, &from, &data, &len);
		if (got < 0) {
			tc_rt_set_error(ctx, "tc_autotune: the transport failed");
			return TC_ERR;
		}
		if (got && from > 0 && from < ms->size && !len)
			tc_tune_give_up(ctx, ms, from, GONE);
		else if (got && from > 0 && from < ms->size && msg_open(&rd, data, len) == MSG_HELLO)
			tc_tune_take_hello(ctx, ms, from, &rd);
	}
}

/* A rank's message during a generation: a late hello, a result, the end
 * of a batch, a failed setup. */
static void take_message(tc_tune_dist *d, tc_tune_ranks *ms, int from, const void *data, size_t len,
	int gen, int n, cand *c, char *const *keys, double *times, int *done)
{
	tc_tune_rank *ri = &ms->r[from];
	reader rd;
	uint32_t type = msg_open(&rd, data, len), kernel;
	int i;
	if (ri->lost)
		return;
	if (type == MSG_HELLO) {
		tc_tune_take_hello(d->ev->m->ctx, ms, from, &rd);
		return;
	}
	ri->heard = tc_tune_now();
	kernel = get_u32(&rd);
	if (type == MSG_BATCH_DONE) {
		/* the batch is over (a cancelled one of an earlier run too): what
		 * it did not answer goes back to the queue */
		ri->busy = 0;
		for (i = 0; kernel == d->kernel && i < n; i++)
			if (c[i].state == SENT && c[i].rank == from)
				c[i].state = QUEUED;
	} else if (type == MSG_SETUP_FAILED && kernel == d->kernel) {
		char *why = get_str(&rd);
		if (ri->failed_setup != d->kernel)
			tc_tune_warn(d->ev->m->ctx, "rank %d (%s) cannot set '%s' up: %s; it sits "
				"this run out", from, ri->host, d->entry, why ? why : "?");
		ri->failed_setup = d->kernel;
		tc_free(why);
	} else if (type == MSG_RESULT && kernel == d->kernel) {
		uint32_t g = get_u32(&rd);
		int index = (int)get_u32(&rd);
		tc_tune_msg m;
		char *text;
		memset(&m, 0, sizeof(m));
		m.status = (int)get_u32(&rd);
		m.median_s = get_f64(&rd);
		m.min_s = get_f64(&rd);
		m.runs = (int)get_u32(&rd);
		m.compile_s = get_f64(&rd);
		text = get_str(&rd);
		for (i = 0; !rd.bad && text && g == (uint32_t)gen && i < n; i++)
			if (c[i].index == index && c[i].state == SENT && c[i].rank == from) {
				if (m.status < TC_TUNE_OK || m.status > TC_TUNE_WRONG)
					m.status = TC_TUNE_CRASH;
				c[i].state = DONE;
				(*done)++;
				ri->measured++;
				tc_tune_eval_account(d->ev, gen, index, keys[i], (tc_tune_status)m.status,
					&m, text, &times[i]);
				break;
			}
		tc_free(text);
	}
}

/* Rank r is given up: its candidates go back to the queue, or, lost a
 * second time, are recorded as crashed. */
static void requeue_lost(tc_tune_dist *d, int r, int gen, int n, cand *c, char *const *keys,
	double *times, int *done)
{
	int i;
	for (i = 0; i < n; i++) {
		if (c[i].state != SENT || c[i].rank != r)
			continue;
		if (c[i].lost++) {
			char why[128];
			snprintf(why, sizeof(why), "lost with ranks %d and %d (given up)",
				c[i].first_lost_rank, r);
			c[i].state = DONE;
			(*done)++;
			tc_tune_eval_account(d->ev, gen, c[i].index, keys[i], TC_TUNE_CRASH, NULL, why,
				&times[i]);
		} else {
			c[i].first_lost_rank = r;
			c[i].state = QUEUED;
		}
	}
}

/* Measure candidates which[0..n) here, one call of the evaluator. */
static int measure_here(tc_tune_dist *d, int gen, const int *which, int n, cand *c,
	tc_options *const *options, char *const *keys, double *times, int *done)
{
	tc_options **o = tc_calloc((size_t)n + 1, sizeof(*o));
	char **k = tc_calloc((size_t)n + 1, sizeof(*k));
	int *idx = tc_calloc((size_t)n + 1, sizeof(int));
	tc_tune_fault *f = tc_calloc((size_t)n + 1, sizeof(*f));
	double *t = tc_calloc((size_t)n + 1, sizeof(double));
	int i, rc = -1;
	if (o && k && idx && f && t) {
		for (i = 0; i < n; i++) {
			o[i] = options[which[i]];
			k[i] = keys[which[i]];
			idx[i] = c[which[i]].index;
			f[i] = c[which[i]].fault;
			t[i] = INFINITY;
		}
		rc = tc_tune_eval_measure_at(d->ev, gen, n, o, k, idx, f, t);
		if (d->t->state) /* the tc_tune_ranks's: what this rank measured */
			((tc_tune_ranks *)d->t->state)->r[0].measured += n;
		for (i = 0; i < n; i++) {
			times[which[i]] = t[i];
			/* measured, or stopped before it was: either way not the ranks' */
			c[which[i]].state = DONE;
		}
		*done += n;
	} else {
		tc_rt_set_error(d->ev->m->ctx, "out of memory");
	}
	tc_free(o);
	tc_free(k);
	tc_free(idx);
	tc_free(f);
	tc_free(t);
	return rc;
}

int tc_tune_dist_measure(__tc_keep void *user, int gen, int n,
	__tc_keep tc_options *const *options, __tc_keep char *const *keys, __tc_keep double *times)
{
	tc_tune_dist *d = user;
	tc_tune_eval *ev = d->ev;
	tc_tune_ranks *ms = tc_tune_ranks_state(d->t);
	cand *c = tc_calloc((size_t)n + 1, sizeof(cand));
	int *which = tc_calloc((size_t)n + 1, sizeof(int));
	sig_atomic_t stop0 = ev->set->stop ? *ev->set->stop : 0;
	double give_up_s = ev->set->compile_timeout_s + ev->set->timeout_s + ANSWER_SLACK_S;
	int i, r, done = 0, rc = 0;
	if (!ms || !c || !which) {
		tc_rt_set_error(ev->m->ctx, "out of memory");
		rc = -1;
		goto out;
	}
	for (i = 0; i < n; i++) {
		times[i] = INFINITY;
		c[i].state = QUEUED;
		if (tc_tune_eval_start(ev, keys[i], &c[i].index, &c[i].fault) < 0) {
			tc_rt_set_error(ev->m->ctx, "out of memory");
			rc = -1;
			goto out;
		}
	}
	/* the reference first, here: every rank checks against it */
	for (i = 0; i < n && !ev->ref && rc == 0; i++) {
		which[0] = i;
		rc = measure_here(d, gen, which, 1, c, options, keys, times, &done);
	}
	if (rc || done == n)
		goto out;
	if (!d->kernel) {
		if (tc_tune_await_hellos(ev->m->ctx, d->t, ms) < 0) {
			rc = -1;
			goto out;
		}
		d->kernel = ++ms->runs;
	}
	while (done < n) {
		int queued = 0, alive = 0, from, got;
		const void *data;
		size_t len;
		double now = tc_tune_now();
		if (ev->stop || (ev->set->stop && *ev->set->stop != stop0)) {
			for (r = 1; r < ms->size; r++)
				if (ms->r[r].busy && !ms->r[r].lost)
					tc_tune_send_plain(d->t, r, MSG_CANCEL, d->kernel);
			rc = 1;
			break;
		}
		for (i = 0; i < n; i++)
			queued += c[i].state == QUEUED;
		for (r = 1; r < ms->size; r++) {
			tc_tune_rank *ri = &ms->r[r];
			if (!usable(d, ri))
				continue;
			alive++;
			if (ri->busy && now - ri->heard > give_up_s) {
				char why[96];
				snprintf(why, sizeof(why), "no answer for %.0f s", now - ri->heard);
				tc_tune_give_up(ev->m->ctx, ms, r, why);
				requeue_lost(d, r, gen, n, c, keys, times, &done);
				alive--;
			}
		}
		if (!alive) { /* nobody left: the rest here */
			int k = 0;
			for (i = 0; i < n; i++)
				if (c[i].state == QUEUED)
					which[k++] = i;
			if (k)
				rc = measure_here(d, gen, which, k, c, options, keys, times, &done);
			if (rc || done == n)
				break;
		}
		/* an idle rank gets up to its jobs, the queue shared among the ranks */
		for (r = 1; r < ms->size && queued; r++) {
			tc_tune_rank *ri = &ms->r[r];
			int share = (queued + alive - 1) / (alive ? alive : 1), k = 0;
			if (!usable(d, ri) || ri->busy)
				continue;
			if (ri->setup != d->kernel) {
				if (send_setup(d, r) < 0) {
					tc_tune_give_up(ev->m->ctx, ms, r, "the def could not be sent to it");
					continue;
				}
				ri->setup = d->kernel;
			}
			if (share > ri->jobs)
				share = ri->jobs;
			for (i = 0; i < n && k < share; i++)
				if (c[i].state == QUEUED)
					which[k++] = i;
			if (send_batch(d, r, gen, which, k, c, keys) < 0) {
				tc_tune_give_up(ev->m->ctx, ms, r, "a batch could not be sent to it");
				continue;
			}
			for (i = 0; i < k; i++) {
				c[which[i]].state = SENT;
				c[which[i]].rank = r;
			}
			ri->busy = 1;
			ri->heard = now;
			queued -= k;
		}
		got = d->t->recv(d->t->user, 0.1, &from, &data, &len);
		if (got < 0) {
			tc_rt_set_error(ev->m->ctx, "tc_autotune: the transport failed");
			rc = -1;
			break;
		}
		if (got && from > 0 && from < ms->size && !len && !ms->r[from].lost) {
			tc_tune_give_up(ev->m->ctx, ms, from, GONE);
			requeue_lost(d, from, gen, n, c, keys, times, &done);
		} else if (got && from > 0 && from < ms->size) {
			take_message(d, ms, from, data, len, gen, n, c, keys, times, &done);
		}
	}
out:
	tc_free(c);
	tc_free(which);
	return rc;
}

int tc_tune_dismiss(tc_tune_transport *t, int *measured)
{
	tc_tune_ranks *ms;
	int r, lost = 0;
	if (!t)
		return 0;
	ms = t->state;
	for (r = 0; r < t->size; r++) {
		lost += ms && ms->r[r].lost;
		if (measured)
			measured[r] = ms ? ms->r[r].measured : 0;
	}
	for (r = 1; r < t->size; r++) /* with how many ranks were given up */
		tc_tune_send_plain(t, r, MSG_QUIT, (uint32_t)lost);
	if (ms)
		tc_free(ms->r);
	tc_free(ms);
	t->state = NULL;
	return lost;
}

/* ---- the fields of a batch's messages ---- */

/* Shapes and dtypes of n inputs, for a JOB. */
void tc_tune_put_tensor(tc_buf *b, const DLTensor *x)
{
	put_u32(b, x->dtype.code);
	put_u32(b, x->dtype.bits);
	put_u32(b, x->dtype.lanes);
	put_u32(b, (uint32_t)x->ndim);
	for (int k = 0; k < x->ndim; k++)
		put_i64(b, x->shape[k]);
}

int64_t tc_tune_get_tensor(reader *rd, DLTensor *x, int64_t *shape)
{
	int64_t n = 1;
	memset(x, 0, sizeof(*x));
	x->dtype.code = (uint8_t)get_u32(rd);
	x->dtype.bits = (uint8_t)get_u32(rd);
	x->dtype.lanes = (uint16_t)get_u32(rd);
	x->ndim = (int)get_u32(rd);
	if (x->ndim < 0 || x->ndim > 8) {
		rd->bad = 1;
		x->ndim = 0;
	}
	for (int k = 0; k < x->ndim; k++) {
		shape[k] = get_i64(rd);
		n *= shape[k] >= 0 ? shape[k] : 0;
	}
	x->shape = shape;
	x->device = (DLDevice){kDLCPU, 0};
	return n;
}

/* The settings of a job's tuning run (what tc_autotune reads of them but
 * the hooks, the cache and the transport). */
void tc_tune_put_settings(tc_buf *b, const tc_tune_settings *s)
{
	put_u32(b, (uint32_t)s->generations);
	put_u32(b, (uint32_t)s->population);
	put_u32(b, (uint32_t)s->elites);
	put_u32(b, (uint32_t)s->tournament);
	put_f64(b, s->mutation_rate);
	put_i64(b, (int64_t)s->seed);
	put_f64(b, s->timeout_s);
	put_f64(b, s->compile_timeout_s);
	put_u32(b, (uint32_t)s->warmup);
	put_u32(b, (uint32_t)s->runs);
	put_f64(b, s->min_time_s);
	put_f64(b, s->cutoff);
	put_u32(b, (uint32_t)s->final_candidates);
	put_u32(b, (uint32_t)s->final_rounds);
	put_f64(b, s->final_time_s);
	put_f64(b, s->final_warmup_s);
	put_f64(b, s->final_margin);
}

void tc_tune_get_settings(reader *rd, tc_tune_settings *s)
{
	s->generations = (int)get_u32(rd);
	s->population = (int)get_u32(rd);
	s->elites = (int)get_u32(rd);
	s->tournament = (int)get_u32(rd);
	s->mutation_rate = get_f64(rd);
	s->seed = (uint64_t)get_i64(rd);
	s->timeout_s = get_f64(rd);
	s->compile_timeout_s = get_f64(rd);
	s->warmup = (int)get_u32(rd);
	s->runs = (int)get_u32(rd);
	s->min_time_s = get_f64(rd);
	s->cutoff = get_f64(rd);
	s->final_candidates = (int)get_u32(rd);
	s->final_rounds = (int)get_u32(rd);
	s->final_time_s = get_f64(rd);
	s->final_warmup_s = get_f64(rd);
	s->final_margin = get_f64(rd);
}

void tc_tune_put_report(tc_buf *b, const tc_tune_report *r)
{
	put_f64(b, r->default_s);
	put_f64(b, r->best_s);
	put_u32(b, (uint32_t)r->measured);
	put_u32(b, (uint32_t)r->failed);
	put_u32(b, (uint32_t)r->cut);
	put_u32(b, (uint32_t)r->generations);
	put_u32(b, (uint32_t)r->stopped);
	put_f64(b, r->elapsed_s);
	put_f64(b, r->search_default_s);
	put_f64(b, r->search_best_s);
	put_u32(b, (uint32_t)r->final_measured);
	put_u32(b, (uint32_t)r->final_rounds);
	put_u32(b, (uint32_t)r->final_stopped);
	put_u32(b, (uint32_t)r->defaults_won);
}

void tc_tune_get_report(reader *rd, tc_tune_report *r)
{
	r->default_s = get_f64(rd);
	r->best_s = get_f64(rd);
	r->measured = (int)get_u32(rd);
	r->failed = (int)get_u32(rd);
	r->cut = (int)get_u32(rd);
	r->generations = (int)get_u32(rd);
	r->stopped = (int)get_u32(rd);
	r->elapsed_s = get_f64(rd);
	r->search_default_s = get_f64(rd);
	r->search_best_s = get_f64(rd);
	r->final_measured = (int)get_u32(rd);
	r->final_rounds = (int)get_u32(rd);
	r->final_stopped = (int)get_u32(rd);
	r->defaults_won = (int)get_u32(rd);
}
