/* The evaluator: the autotuner's candidates measured in child processes,
 * and the parent's side of it.
 *
 * Why processes: a candidate may crash (a code generation bug), hang, or
 * compute a wrong result; none of that may end the tuning run or corrupt
 * the tuner.  So each candidate is compiled and timed in a forked child
 * (eval_child.c), run through the slots (eval_slots.c).  This file holds
 * what both serve:
 *
 *   - the evaluator (tc_tune_eval_new): the inputs, made (or copied) once
 *     before any fork and shared copy-on-write, already faulted in; the
 *     outputs' shapes; the result buffer shared with the children (an
 *     anonymous MAP_SHARED mapping), and the reference it is checked
 *     against (the first correct candidate's result, check_result);
 *   - the search's measure (tc_tune_eval_measure): several children
 *     compile at once (up to the settings' threads, at most twice that
 *     alive); the timing token goes to the lowest-numbered ready child
 *     only while no child is compiling and none is timing, so that
 *     timings are not disturbed by compiles on the other cores; a timing
 *     child gets a budget of twice what a candidate within the cutoff
 *     needs (warm-up, runs, min_time_s) plus 0.5 s and is killed past it
 *     as CUT (its result unchecked), so a candidate a thousand times
 *     slower than the best does not hold the machine until the timeout;
 *     every outcome is counted, recorded and reported (finish);
 *   - the final stage's re-timing (tc_tune_eval_retime): one child per
 *     configuration, compiled once (as many at once as the search's
 *     compiles) and kept; the token handed round robin, one child at a
 *     time, a round per GO; the first round's result checked.
 *
 * Each search child times at a stack offset of its own, each final round
 * at another (stack_shift; time_shifted in eval_child.c says why).
 * Forking a process with threads: the child has only the forking thread;
 * the thread pool forgets the parent's workers in the child
 * (runtime/pool.c), and the context's lock is free because the tuner's
 * thread holds it only inside library calls. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "eval.h"

#include "../ir/half.h"
#include "../runtime/internal.h"
#include "../runtime/options.h"
#include "../runtime/pool.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* ---- test-only fault planting ---- */

static char *fault_spec; /* tc_tune_test_faults */

/* Parse "1:crash,2:hang,3:wrong,4:decoy" into plan; -1 if malformed. */
static tc_stat parse_faults(const char *spec, tc_tune_fault_plan *plan)
{
	const char *p = spec;
	plan->n = 0;
	while (p && *p) {
		char *end;
		long i = strtol(p, &end, 10);
		size_t n;
		tc_tune_fault k;
		if (end == p || *end != ':' || i < 0 || plan->n == 32)
			return TC_ERR;
		p = end + 1;
		n = strcspn(p, ",");
		if (n == 5 && !strncmp(p, "crash", 5))
			k = TC_TUNE_FAULT_CRASH;
		else if (n == 4 && !strncmp(p, "hang", 4))
			k = TC_TUNE_FAULT_HANG;
		else if (n == 5 && !strncmp(p, "wrong", 5))
			k = TC_TUNE_FAULT_WRONG;
		else if (n == 5 && !strncmp(p, "decoy", 5))
			k = TC_TUNE_FAULT_DECOY;
		else
			return TC_ERR;
		plan->index[plan->n] = (int)i;
		plan->kind[plan->n++] = k;
		p += n + (p[n] == ',');
	}
	return TC_OK;
}

tc_stat tc_tune_test_faults(const char *spec)
{
	tc_tune_fault_plan plan;
	char *copy = NULL;
	if (spec && (parse_faults(spec, &plan) < 0 || !(copy = tc_strdup(spec))))
		return TC_ERR;
	tc_free(fault_spec);
	fault_spec = copy;
	return TC_OK;
}

static tc_tune_fault fault_of(const tc_tune_fault_plan *plan, int index)
{
	int i;
	for (i = 0; i < plan->n; i++)
		if (plan->index[i] == index)
			return plan->kind[i];
	return TC_TUNE_FAULT_NONE;
}

/* ---- the evaluator ---- */

/* Random values as tcomp bench makes them: floats uniform in [-1,1)
 * without 0, integers in [1, ihi], bools 0 or 1. */
static void fill_random(tc_tune_rng *r, void *data, int64_t n, DLDataType dt, int64_t ihi)
{
	int64_t i;
	for (i = 0; i < n; i++) {
		if (dt.code == kDLFloat || dt.code == kDLBfloat) {
			double x;
			do
				x = 2 * tc_tune_rng_unit(r) - 1;
			while (x == 0 || (dt.bits == 32 && (float)x == 0));
			if (dt.code == kDLBfloat) {
				uint16_t h = tc_bf16_from_double(x);
				((uint16_t *)data)[i] = h & 0x7fff ? h : tc_bf16_from_double(0.5);
			} else if (dt.bits == 16) {
				uint16_t h = tc_half_from_double(x);
				((uint16_t *)data)[i] = h & 0x7fff ? h : tc_half_from_double(0.5);
			} else if (dt.bits == 32) {
				((float *)data)[i] = (float)x;
			} else {
				((double *)data)[i] = x;
			}
		} else if (dt.code == TC_DL_BOOL) {
			((uint8_t *)data)[i] = (uint8_t)(tc_tune_rng_next(r) >> 63);
		} else {
			uint64_t v = ihi ? 1 + (uint64_t)tc_tune_rng_below(r, ihi) : 0;
			switch (dt.bits) {
			case 8: ((uint8_t *)data)[i] = (uint8_t)v; break;
			case 16: ((uint16_t *)data)[i] = (uint16_t)v; break;
			case 32: ((uint32_t *)data)[i] = (uint32_t)v; break;
			default: ((uint64_t *)data)[i] = v; break;
			}
		}
	}
}

static int64_t elements(int nd, const int64_t *shape)
{
	int64_t n = 1;
	int d;
	for (d = 0; d < nd; d++)
		n *= shape[d];
	return n;
}

__tc_give tc_tune_eval *tc_tune_eval_new(__tc_keep tc_module *m, const char *entry,
	__tc_keep const DLTensor *const *inputs, int n_inputs,
	__tc_keep const tc_tune_settings *settings)
{
	tc_tune_eval *ev = tc_calloc(1, sizeof(*ev));
	tc_options *interp = NULL;
	tc_kernel *k = NULL;
	const char *spec;
	int i, d, n_in, n_out;
	int64_t min_ext = INT64_MAX, ihi;
	tc_tune_rng r;
	int ncpu = tc_rt_cpus();
	if (!ev) {
		tc_rt_set_error(m->ctx, "out of memory");
		return NULL;
	}
	ev->m = m;
	ev->set = settings;
	ev->first_time = ev->best = INFINITY;
	ev->shared = MAP_FAILED;
	ev->workers = settings->threads > 0 ? settings->threads : ncpu;
	ev->t_start = tc_tune_now();
	ev->gen_of_medians = -1;
	ev->device = kDLCPU;
	if (!(ev->entry = tc_strdup(entry)))
		goto oom;
	if (tc_module_def_arity(m, entry, &n_in, &n_out) < 0)
		goto error;
	if (n_in != n_inputs || n_in > TC_TUNE_MAX_TENSORS || n_out > TC_TUNE_MAX_TENSORS) {
		goto count_error;
	}
	ev->fake_fitness = getenv("TCOMP_TUNE_TEST_FITNESS") != NULL;
	spec = fault_spec ? fault_spec : getenv("TCOMP_TUNE_TEST_FAULTS");
	if (spec && parse_faults(spec, &ev->faults) < 0)
		ev->faults.n = 0;
	ev->n_in = n_in;
	ev->n_out = n_out;
	/* the inputs: the caller's data, or (data NULL) random values made once */
	for (i = 0; i < n_in; i++) {
		if (!inputs[i] || inputs[i]->ndim < 0 || inputs[i]->ndim > 8)
			goto count_error;
		ev->in[i] = *inputs[i];
		if (!inputs[i]->data) {
			for (d = 0; d < inputs[i]->ndim; d++)
				ev->in_shape[i][d] = inputs[i]->shape[d];
			ev->in[i].shape = ev->in_shape[i];
			ev->in[i].strides = NULL;
			ev->in[i].byte_offset = 0;
			ev->in[i].device = (DLDevice){kDLCPU, 0}; /* made here, in host memory */
		}
		ev->in_ptrs[i] = &ev->in[i];
	}
	/* shapes of the outputs: an interpreter kernel is bound without JIT */
	if (!(interp = tc_options_new()) || tc_options_set(interp, "target", "interp", NULL) < 0)
		goto oom;
	if (!(k = tc_compile(m, entry, ev->in_ptrs, n_in, interp)))
		goto error;
	for (i = 0; i < n_out; i++) {
		tc_kernel_output_shape(k, i, &ev->out_dt[i], &ev->out_nd[i], ev->out_shape[i]);
		/* each tensor's bytes fit in int64 (tc_compile checks); their sum
		 * may not */
		ev->out_bytes[i] = (size_t)elements(ev->out_nd[i], ev->out_shape[i]) *
			(size_t)((ev->out_dt[i].bits + 7) / 8);
		ev->out_off[i] = ev->shared_bytes;
		if (__builtin_add_overflow(ev->shared_bytes, (ev->out_bytes[i] + 63) / 64 * 64,
			    &ev->shared_bytes)) {
			tc_rt_set_error(m->ctx, "tc_autotune: the outputs of '%s' are too large for memory",
				entry);
			goto error;
		}
		for (d = 0; d < ev->out_nd[i]; d++)
			min_ext = ev->out_shape[i][d] < min_ext ? ev->out_shape[i][d] : min_ext;
	}
	for (i = 0; i < n_in; i++)
		for (d = 0; d < ev->in[i].ndim; d++)
			min_ext = ev->in[i].shape[d] < min_ext ? ev->in[i].shape[d] : min_ext;
	ihi = min_ext == INT64_MAX ? 16 : min_ext < 1 ? 0 : min_ext - 1 < 16 ? min_ext - 1 : 16;
	tc_tune_rng_seed(&r, 0x2545F4914F6CDD1DULL);
	for (i = 0; i < n_in; i++) {
		int64_t n = elements(ev->in[i].ndim, ev->in[i].shape);
		size_t bytes = (size_t)n * (size_t)((ev->in[i].dtype.bits + 7) / 8);
		if (inputs[i]->data)
			continue;
		if (!(ev->in_data[i] = tc_malloc(bytes + TC_TUNE_ALIGN)))
			goto oom;
		ev->in[i].data = tc_tune_align(ev->in_data[i]);
		fill_random(&r, ev->in[i].data, n, ev->in[i].dtype, ihi); /* touches every page */
	}
	ev->shared = mmap(NULL, ev->shared_bytes ? ev->shared_bytes : 64, PROT_READ | PROT_WRITE,
		MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ev->shared == MAP_FAILED) {
		tc_rt_set_error(m->ctx, "tc_autotune: cannot map %zu bytes: %s",
			ev->shared_bytes, strerror(errno));
		goto error;
	}
	memset(ev->shared, 0, ev->shared_bytes);
	tc_kernel_free(k);
	tc_options_free(interp);
	return ev;
count_error:
	tc_rt_set_error(m->ctx, "tc_autotune: '%s' takes %d inputs (at most %d) "
		"but %d were given", entry, n_in, TC_TUNE_MAX_TENSORS, n_inputs);
	goto error;
oom:
	tc_rt_set_error(m->ctx, "out of memory");
error:
	tc_kernel_free(k);
	tc_options_free(interp);
	tc_tune_eval_free(ev);
	return NULL;
}

void tc_tune_eval_free(__tc_take tc_tune_eval *ev)
{
	int i;
	if (!ev)
		return;
	for (i = 0; i < TC_TUNE_MAX_TENSORS; i++)
		tc_free(ev->in_data[i]);
	if (ev->shared != MAP_FAILED)
		munmap(ev->shared, ev->shared_bytes ? ev->shared_bytes : 64);
	tc_free(ev->ref);
	tc_free(ev->gen_medians);
	for (i = 0; i < ev->ncands; i++)
		tc_free(ev->cands[i].key);
	tc_free(ev->cands);
	tc_free(ev->entry);
	tc_free(ev);
}

void tc_tune_eval_set_device(__tc_keep tc_tune_eval *ev, int dev)
{
	ev->device = dev;
}

void tc_tune_eval_counts(__tc_keep const tc_tune_eval *ev, int *measured, int *failed, int *cut)
{
	*measured = ev->measured;
	*failed = ev->failed;
	*cut = ev->cut;
}

void tc_tune_eval_plan(__tc_keep tc_tune_eval *ev, int generations, int planned)
{
	ev->generations = generations;
	ev->planned = planned;
}

void tc_tune_eval_shape(__tc_keep const tc_tune_eval *ev, int64_t *extent, int *lanes)
{
	int i, d, bytes;
	*extent = 1;
	for (i = 0; i < ev->n_in; i++)
		for (d = 0; d < ev->in[i].ndim; d++)
			*extent = ev->in[i].shape[d] > *extent ? ev->in[i].shape[d] : *extent;
	for (i = 0; i < ev->n_out; i++)
		for (d = 0; d < ev->out_nd[i]; d++)
			*extent = ev->out_shape[i][d] > *extent ? ev->out_shape[i][d] : *extent;
	bytes = ev->n_out ? (ev->out_dt[0].bits + 7) / 8 : 4;
	*lanes = bytes > 0 && bytes < 64 ? 64 / bytes : 1;
}

double tc_tune_eval_first_time(__tc_keep const tc_tune_eval *ev)
{
	return ev->first_time;
}

const char *tc_tune_eval_first_failure(__tc_keep const tc_tune_eval *ev)
{
	return ev->first_failure;
}

/* ---- shared by the search and the final stage ---- */

/* Element i of float data p of type dt (float16, bfloat16, float32 or
 * float64) as a double. */
static double float_at(DLDataType dt, const unsigned char *p, int64_t i)
{
	if (dt.code == kDLBfloat)
		return tc_bf16_to_double(((const uint16_t *)p)[i]);
	return dt.bits == 32 ? ((const float *)p)[i] : dt.bits == 64 ? ((const double *)p)[i]
		: tc_half_to_double(((const uint16_t *)p)[i]);
}

tc_stat tc_tune_eval_set_reference(__tc_keep tc_tune_eval *ev, __tc_keep const void *outputs)
{
	int o;
	int64_t i, n;
	tc_free(ev->ref);
	if (!(ev->ref = tc_malloc(ev->shared_bytes ? ev->shared_bytes : 1)))
		return TC_ERR;
	memcpy(ev->ref, outputs, ev->shared_bytes);
	for (o = 0; o < ev->n_out; o++) {
		DLDataType dt = ev->out_dt[o];
		double sum = 0;
		n = elements(ev->out_nd[o], ev->out_shape[o]);
		for (i = 0; (dt.code == kDLFloat || dt.code == kDLBfloat) && i < n; i++) {
			double x = float_at(dt, ev->ref + ev->out_off[o], i);
			sum += isfinite(x) ? fabs(x) : 0;
		}
		ev->ref_scale[o] = n ? sum / (double)n : 0;
	}
	return TC_OK;
}

/* Compare the shared result with the reference (or make it the reference);
 * 0 equal, -1 different (why filled). */
static int check_result(tc_tune_eval *ev, char *why, size_t len)
{
	int o;
	int64_t i, n;
	if (!ev->ref) {
		tc_tune_eval_set_reference(ev, ev->shared); /* out of memory: nothing to check */
		return 0;
	}
	for (o = 0; o < ev->n_out; o++) {
		DLDataType dt = ev->out_dt[o];
		const unsigned char *got = ev->shared + ev->out_off[o], *ref = ev->ref + ev->out_off[o];
		double rtol = dt.bits == 16 ? 1e-2 : dt.bits == 32 ? 1e-4 : 1e-10;
		n = elements(ev->out_nd[o], ev->out_shape[o]);
		if (dt.code != kDLFloat && dt.code != kDLBfloat) {
			if (memcmp(got, ref, ev->out_bytes[o])) {
				for (i = 0; i < (int64_t)ev->out_bytes[o] && got[i] == ref[i]; i++)
					;
				snprintf(why, len, "output '%s' differs from the reference at byte %lld",
					tc_module_tensor_name(ev->m, ev->entry, ev->n_in + o), (long long)i);
				return -1;
			}
			continue;
		}
		for (i = 0; i < n; i++) {
			double x = float_at(dt, got, i), y = float_at(dt, ref, i);
			if (x == y || (isnan(x) && isnan(y)))
				continue;
			if (fabs(x - y) <= rtol * (fabs(y) + ev->ref_scale[o]))
				continue;
			snprintf(why, len, "output '%s' element %lld is %.9g but the reference has %.9g",
				tc_module_tensor_name(ev->m, ev->entry, ev->n_in + o), (long long)i, x, y);
			return -1;
		}
	}
	return 0;
}

/* The stack offset of search candidate index, or of final round r: 64
 * offsets 64 bytes apart, over the page, visited in a scattered order
 * (see time_shifted in eval_child.c). */
static int stack_shift(int i)
{
	return (int)(((unsigned)i * 37u + 11u) % 64u) * 64;
}

/* ---- the search ---- */

/* Remember search candidate index (key, planted fault) for the final stage. */
static tc_stat remember(tc_tune_eval *ev, const char *key, int index, tc_tune_fault fault)
{
	if (ev->ncands == ev->capcands) {
		int cap = ev->capcands * 2 + 64;
		struct started_cand *c = tc_realloc(ev->cands, (size_t)cap * sizeof(*c));
		if (!c)
			return TC_ERR;
		ev->cands = c;
		ev->capcands = cap;
	}
	if (!(ev->cands[ev->ncands].key = tc_strdup(key)))
		return TC_ERR;
	ev->cands[ev->ncands].index = index;
	ev->cands[ev->ncands].fault = fault;
	ev->ncands++;
	return TC_OK;
}

tc_stat tc_tune_eval_start(__tc_keep tc_tune_eval *ev, const char *key, int *index,
	tc_tune_fault *fault)
{
	*index = ev->started++;
	*fault = fault_of(&ev->faults, *index);
	return remember(ev, key, *index, *fault);
}

void tc_tune_eval_account(__tc_keep tc_tune_eval *ev, int gen, int index, const char *key,
	tc_tune_status st, __tc_keep const tc_tune_msg *m, const char *text, double *time)
{
	tc_tune_candidate c;
	tc_tune_progress p;
	double *gm;
	memset(&c, 0, sizeof(c));
	c.options = key;
	c.status = st;
	c.median_s = c.min_s = INFINITY;
	c.runs = m ? m->runs : 0;
	c.compile_s = m ? m->compile_s : 0;
	c.message = text ? text : "";
	c.generation = gen;
	c.index = index;
	if (st == TC_TUNE_OK || st == TC_TUNE_CUT) {
		c.median_s = m->median_s;
		c.min_s = m->min_s;
	}
	*time = c.median_s;
	ev->measured++;
	ev->failed += st != TC_TUNE_OK && st != TC_TUNE_CUT;
	if (st != TC_TUNE_OK && st != TC_TUNE_CUT && !ev->first_failure[0] && text)
		snprintf(ev->first_failure, sizeof(ev->first_failure), "%s", text);
	ev->cut += st == TC_TUNE_CUT;
	if (index == 0)
		ev->first_time = c.median_s;
	if (st == TC_TUNE_OK && c.median_s < ev->best)
		ev->best = c.median_s;
	if (gen != ev->gen_of_medians) {
		ev->ngen_medians = 0;
		ev->gen_of_medians = gen;
	}
	if (st == TC_TUNE_OK &&
		(gm = tc_realloc(ev->gen_medians, (size_t)(ev->ngen_medians + 1) * sizeof(double)))) {
		ev->gen_medians = gm;
		gm[ev->ngen_medians++] = c.median_s;
	}
	if (ev->set->record)
		ev->set->record(ev->set->user, &c);
	if (ev->set->progress) {
		double *copy = tc_malloc((size_t)(ev->ngen_medians + 1) * sizeof(double));
		memset(&p, 0, sizeof(p));
		p.generation = gen;
		p.generations = ev->generations;
		p.done = ev->measured;
		p.planned = ev->planned > ev->measured ? ev->planned : ev->measured;
		p.failed = ev->failed;
		p.best_s = ev->best;
		p.gen_median_s = INFINITY;
		if (copy && ev->ngen_medians) {
			memcpy(copy, ev->gen_medians, (size_t)ev->ngen_medians * sizeof(double));
			p.gen_median_s = tc_tune_median(copy, ev->ngen_medians);
		}
		tc_free(copy);
		p.elapsed_s = tc_tune_now() - ev->t_start;
		p.eta_s = p.elapsed_s / p.done * (p.planned - p.done);
		p.last = &c;
		if (ev->set->progress(ev->set->user, &p))
			ev->stop = 1;
	}
}

/* The candidate of slot i of S is finished: its slot ended, then counts,
 * callbacks, its time (tc_tune_eval_account). */
static void finish(tc_tune_eval *ev, tc_tune_slots *S, int i, int gen, const char *key,
	tc_tune_status st, const tc_tune_msg *m, const char *text, double *time)
{
	tc_tune_slots_end(S, i); /* the slot keeps its last message */
	tc_tune_eval_account(ev, gen, S->sl[i].index, key, st, m, text, time);
}

/* What happened to search candidate e->i of generation gen: a result, a
 * death, a deadline or the budget passed.  1 when it is finished. */
static int measure_event(tc_tune_eval *ev, tc_tune_slots *S, tc_tune_slot_event *e, int gen,
	char *const *keys, double *times)
{
	tc_tune_slot *s = &S->sl[e->i];
	int i = e->i;
	if (e->what == TC_TUNE_SLOT_MESSAGE) {
		tc_tune_status st = (tc_tune_status)s->m.status;
		const char *why = s->m.text;
		if (s->m.type != TC_TUNE_MSG_DONE)
			return 0;
		if ((st == TC_TUNE_OK || st == TC_TUNE_CUT) &&
			check_result(ev, e->text, sizeof(e->text)) < 0) {
			st = TC_TUNE_WRONG;
			why = e->text;
		}
		finish(ev, S, i, gen, keys[i], st, &s->m, why, &times[i]);
	} else if (e->what == TC_TUNE_SLOT_SLOW) {
		tc_tune_msg cut;
		memset(&cut, 0, sizeof(cut));
		snprintf(e->text, sizeof(e->text), "stopped after %.3g s: far slower than the "
			"best (unchecked)", e->elapsed_s);
		cut.median_s = cut.min_s = e->elapsed_s;
		finish(ev, S, i, gen, keys[i], TC_TUNE_CUT, &cut, e->text, &times[i]);
	} else {
		finish(ev, S, i, gen, keys[i], e->what == TC_TUNE_SLOT_DIED ? TC_TUNE_CRASH
			: TC_TUNE_TIMEOUT, NULL, e->text, &times[i]);
	}
	return 1;
}

int tc_tune_eval_measure(__tc_keep void *user, int gen, int n, __tc_keep tc_options *const *options,
	__tc_keep char *const *keys, __tc_keep double *times)
{
	return tc_tune_eval_measure_at(user, gen, n, options, keys, NULL, NULL, times);
}

int tc_tune_eval_measure_at(__tc_keep tc_tune_eval *ev, int gen, int n,
	__tc_keep tc_options *const *options, __tc_keep char *const *keys,
	__tc_keep const int *indexes, __tc_keep const tc_tune_fault *faults,
	__tc_keep double *times)
{
	tc_tune_slots S;
	tc_tune_slot_event e;
	int next = 0, done = 0, i, rc = 0;
	if (tc_tune_slots_init(&S, ev, n, 1, 0, "the runs") < 0)
		return -1;
	while (done < n) {
		int timing = 0, compiling = 0, alive = 0, ready = -1;
		if (tc_tune_slots_stopped(&S)) {
			rc = 1;
			break;
		}
		for (i = 0; i < next; i++) {
			tc_tune_slot_state state = S.sl[i].state;
			timing += state == TC_TUNE_SLOT_TIMING;
			compiling += state == TC_TUNE_SLOT_COMPILING;
			alive += state >= TC_TUNE_SLOT_COMPILING && state <= TC_TUNE_SLOT_TIMING;
			if (state == TC_TUNE_SLOT_READY && ready < 0)
				ready = i;
		}
		/* start compiles while nobody is timing */
		while (!timing && compiling < ev->workers && alive < 2 * ev->workers && next < n) {
			int index;
			tc_tune_fault fault;
			tc_stat ok = TC_OK;
			if (indexes) { /* a worker's: the master started them */
				index = indexes[next];
				fault = faults[next];
			} else {
				ok = tc_tune_eval_start(ev, keys[next], &index, &fault);
			}
			if (ok < 0 || tc_tune_slots_spawn(&S, next, options[next], index, fault, 0) < 0) {
				snprintf(e.text, sizeof(e.text), "cannot start a process: %s",
					strerror(errno));
				S.sl[next].index = index;
				finish(ev, &S, next, gen, keys[next], TC_TUNE_CRASH, NULL, e.text,
					&times[next]);
				done++;
			} else {
				compiling++;
				alive++;
			}
			next++;
		}
		/* hand the token to the first ready child once every compile is done */
		if (!timing && !compiling && ready >= 0) {
			tc_tune_msg go;
			double budget = INFINITY;
			memset(&go, 0, sizeof(go));
			go.cutoff_s = isfinite(ev->best) ? ev->best * ev->set->cutoff : 0;
			go.shift = stack_shift(S.sl[ready].index);
			if (ev->fake_fitness) /* its times are not the run's: nothing is cut */
				go.cutoff_s = 0;
			else if (isfinite(ev->best)) /* what a candidate within the cutoff needs, twice */
				budget = 0.5 + 2 * (ev->set->min_time_s +
					(ev->set->warmup + ev->set->runs + 1) * go.cutoff_s);
			memset(ev->shared, 0, ev->shared_bytes);
			if (tc_tune_slots_go(&S, ready, &go, ev->set->timeout_s, budget, e.text,
				sizeof(e.text)) < 0) {
				finish(ev, &S, ready, gen, keys[ready], TC_TUNE_CRASH, NULL, e.text,
					&times[ready]);
				done++;
			}
			continue;
		}
		if (tc_tune_slots_poll(&S) < 0) {
			rc = -1;
			break;
		}
		while (tc_tune_slots_event(&S, &e))
			done += measure_event(ev, &S, &e, gen, keys, times);
	}
	tc_tune_slots_clear(&S);
	return rc;
}

/* ---- the final stage ---- */

/* The index and planted fault of the search candidate with key (-1, NONE
 * if none). */
static void recall(const tc_tune_eval *ev, const char *key, int *index, tc_tune_fault *fault)
{
	int i;
	*index = -1;
	*fault = TC_TUNE_FAULT_NONE;
	for (i = 0; i < ev->ncands; i++)
		if (!strcmp(ev->cands[i].key, key)) {
			*index = ev->cands[i].index;
			*fault = ev->cands[i].fault;
			return;
		}
}

/* Configuration i (slot i of S) failed: why, and its slot ended. */
static void final_fail(tc_tune_slots *S, int i, tc_tune_retimed *out, tc_tune_status st,
	const char *why)
{
	size_t n = strlen(why);
	out->status = st;
	if (n >= sizeof(out->message)) /* cut to fit */
		n = sizeof(out->message) - 1;
	memcpy(out->message, why, n);
	out->message[n] = 0;
	tc_tune_slots_end(S, i);
}

/* What happened to configuration e->i of the n of the final stage while
 * compiling (r < 0) or in round r: READY, a round's result (rt[r * n + i];
 * the first round's is checked against the search's reference), a failure
 * (out[i], slot ended). */
static void final_event(tc_tune_eval *ev, tc_tune_slots *S, tc_tune_slot_event *e, int r, int n,
	double *rt, tc_tune_retimed *out)
{
	int i = e->i;
	tc_tune_slot *s = &S->sl[i];
	if (e->what != TC_TUNE_SLOT_MESSAGE)
		final_fail(S, i, &out[i], e->what == TC_TUNE_SLOT_DIED ? TC_TUNE_CRASH
			: TC_TUNE_TIMEOUT, e->text);
	else if (r < 0 && s->m.type == TC_TUNE_MSG_READY)
		out[i].compile_s = s->m.compile_s;
	else if (r < 0 || s->m.status != TC_TUNE_OK)
		final_fail(S, i, &out[i], (tc_tune_status)s->m.status, s->m.text);
	else if (r == 0 && check_result(ev, e->text, sizeof(e->text)) < 0)
		final_fail(S, i, &out[i], TC_TUNE_WRONG, e->text);
	else {
		rt[r * n + i] = s->m.median_s;
		out[i].runs += s->m.runs;
		if (s->m.min_s < out[i].min_s)
			out[i].min_s = s->m.min_s;
	}
}

/* Wait once for the final stage's children (compiling if r < 0, else
 * timing round r) and take what happened to them: 0, 1 stopped, -1 error. */
static int final_wait(tc_tune_eval *ev, tc_tune_slots *S, int r, int n, double *rt,
	tc_tune_retimed *out)
{
	tc_tune_slot_event e;
	if (tc_tune_slots_stopped(S))
		return 1;
	if (tc_tune_slots_poll(S) < 0)
		return -1;
	while (tc_tune_slots_event(S, &e))
		final_event(ev, S, &e, r, n, rt, out);
	return 0;
}

/* Report configuration i's round r to the progress callback; done of
 * total re-timings so far, the stage begun at t_stage. */
static void final_progress(tc_tune_eval *ev, tc_tune_slots *S, int i, int r, int rounds, int n,
	const double *rt, const tc_tune_retimed *out, char *const *keys, int done, double t_stage)
{
	const tc_tune_slot *s = &S->sl[i];
	tc_tune_candidate c;
	tc_tune_progress p;
	int total = n * rounds;
	memset(&c, 0, sizeof(c));
	c.options = keys[i];
	c.status = out[i].status;
	c.median_s = c.status == TC_TUNE_OK ? rt[r * n + i] : INFINITY;
	c.min_s = c.status == TC_TUNE_OK ? s->m.min_s : INFINITY;
	c.runs = c.status == TC_TUNE_OK ? s->m.runs : 0;
	c.compile_s = out[i].compile_s;
	c.message = out[i].message;
	c.generation = ev->generations;
	c.index = out[i].index;
	c.final = 1;
	memset(&p, 0, sizeof(p));
	p.generation = ev->generations - 1;
	p.generations = ev->generations;
	p.done = done;
	p.planned = total;
	p.failed = ev->failed;
	p.best_s = ev->best;
	p.gen_median_s = INFINITY;
	p.elapsed_s = tc_tune_now() - ev->t_start;
	p.eta_s = (tc_tune_now() - t_stage) / done * (total - done);
	p.last = &c;
	p.final_round = r + 1;
	p.final_rounds = rounds;
	if (ev->set->progress(ev->set->user, &p))
		ev->stop = 1;
}

int tc_tune_eval_retime(__tc_keep void *user, int n, __tc_keep tc_options *const *options,
	__tc_keep char *const *keys, int rounds, __tc_keep double *rt,
	__tc_keep tc_tune_retimed *out)
{
	tc_tune_eval *ev = user;
	tc_tune_slots S;
	tc_tune_fault *fault = tc_calloc((size_t)n + 1, sizeof(tc_tune_fault));
	sig_atomic_t stop0 = ev->set->stop ? *ev->set->stop : 0;
	int i, r, next = 0, rc = 0, done = 0;
	double t_stage = tc_tune_now();
	char text[700];
	if (!fault) {
		tc_rt_set_error(ev->m->ctx, "out of memory");
		return -1;
	}
	if (tc_tune_slots_init(&S, ev, n, 0, stop0, "a round of re-timing") < 0) {
		tc_free(fault);
		return -1;
	}
	ev->stop = 0; /* a stop of the search does not stop this stage */
	for (i = 0; i < n; i++) {
		memset(&out[i], 0, sizeof(out[i]));
		out[i].status = TC_TUNE_OK;
		out[i].min_s = INFINITY;
		recall(ev, keys[i], &out[i].index, &fault[i]);
		if (fault[i] != TC_TUNE_FAULT_DECOY) /* the others were the search's */
			fault[i] = TC_TUNE_FAULT_NONE;
	}
	/* compile: up to workers at a time; every child stays, ready */
	while (rc == 0) {
		int compiling = 0;
		for (i = 0; i < next; i++)
			compiling += S.sl[i].state == TC_TUNE_SLOT_COMPILING;
		for (; compiling < ev->workers && next < n; next++) {
			if (tc_tune_slots_spawn(&S, next, options[next], out[next].index, fault[next],
				1) < 0) {
				snprintf(text, sizeof(text), "cannot start a process: %s",
					strerror(errno));
				final_fail(&S, next, &out[next], TC_TUNE_CRASH, text);
			} else {
				compiling++;
			}
		}
		if (!compiling)
			break;
		rc = final_wait(ev, &S, -1, n, rt, out);
	}
	/* the rounds: each configuration in turn, alone on the machine */
	for (r = 0; r < rounds && rc == 0; r++)
		for (i = 0; i < n && rc == 0; i++) {
			tc_tune_msg go;
			if (S.sl[i].state != TC_TUNE_SLOT_READY) {
				done++;
				continue;
			}
			if (tc_tune_slots_stopped(&S)) {
				rc = 1;
				break;
			}
			memset(&go, 0, sizeof(go));
			go.round = r;
			go.shift = stack_shift(r);
			if (r == 0)
				memset(ev->shared, 0, ev->shared_bytes);
			if (tc_tune_slots_go(&S, i, &go, ev->set->timeout_s + 2 * (ev->set->final_time_s +
				(r == 0 ? ev->set->final_warmup_s : 0)), INFINITY, text, sizeof(text)) < 0)
				final_fail(&S, i, &out[i], TC_TUNE_CRASH, text);
			while (rc == 0 && S.sl[i].state == TC_TUNE_SLOT_TIMING)
				rc = final_wait(ev, &S, r, n, rt, out);
			if (rc)
				break;
			done++;
			if (ev->set->progress)
				final_progress(ev, &S, i, r, rounds, n, rt, out, keys, done, t_stage);
		}
	tc_tune_slots_clear(&S);
	tc_free(fault);
	return rc;
}
