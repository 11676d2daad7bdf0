/* Evaluating the autotuner's candidates, each in its own child process.
 *
 * Why processes: a candidate may crash (a code generation bug), hang, or
 * compute a wrong result; none of that may end the tuning run or corrupt
 * the tuner.  The parent forks one child per candidate.  The child
 * compiles the kernel (several children compile at once, up to the
 * settings' threads), pre-faults its output buffers and says READY over a
 * socket pair; it then waits for GO, the timing token, which the parent
 * hands to one child at a time and only while no child is compiling, so
 * that timings are not disturbed by compiles on the other cores.  With the
 * token the child runs the kernel once into the result buffer shared with
 * the parent (an anonymous MAP_SHARED mapping; the parent zeroes it before
 * each GO), which the parent compares with the first correct candidate's
 * result; then warm-up runs and timed runs into its private buffers until
 * there have been settings->runs taking settings->min_time_s in all; it
 * sends the median and minimum and _exits (no atexit handlers: nothing of
 * the parent's state is flushed or leak-checked twice).  A run that takes
 * more than cutoff times the best median so far ends the timing early (the
 * candidate is CUT: measured roughly, known to be slow): the checked run if
 * it took ten times that, else the first two runs after it.  The parent
 * also gives a timing child a budget of twice what a candidate within the
 * cutoff needs (warm-up, runs, min_time_s) plus 0.5 s, and kills it past
 * that as CUT (its result unchecked), so a candidate a thousand times
 * slower than the best does not hold the machine until the timeout.
 *
 * The parent polls the sockets with deadlines: compile_timeout_s from the
 * fork, timeout_s from GO; a child past its deadline is killed with
 * SIGKILL.  A child that dies without a result is a crash.  Children ignore
 * SIGINT (Ctrl-C on a terminal reaches the whole process group); the
 * parent kills them when it stops.
 *
 * Inputs are made (or copied) once in the parent before any fork and
 * shared copy-on-write (never written), already faulted in.  Forking a
 * process with threads: the child has only the forking thread; the thread
 * pool forgets the parent's workers in the child (runtime/pool.c), and the
 * context's lock is free because the tuner's thread holds it only inside
 * library calls. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "tune.h"

#include "../ir/half.h"
#include "../runtime/internal.h"
#include "../runtime/options.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_TENSORS 64

/* ---- test-only fault planting ---- */

static char *fault_spec; /* tc_tune_test_faults */

typedef struct fault_plan {
	int n;
	int index[32];
	tc_tune_fault kind[32];
} fault_plan;

/* Parse "1:crash,2:hang,3:wrong" into plan; -1 if malformed. */
static tc_stat parse_faults(const char *spec, fault_plan *plan)
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
	fault_plan plan;
	char *copy = NULL;
	if (spec && (parse_faults(spec, &plan) < 0 || !(copy = tc_strdup(spec))))
		return TC_ERR;
	tc_free(fault_spec);
	fault_spec = copy;
	return TC_OK;
}

static tc_tune_fault fault_of(const fault_plan *plan, int index)
{
	int i;
	for (i = 0; i < plan->n; i++)
		if (plan->index[i] == index)
			return plan->kind[i];
	return TC_TUNE_FAULT_NONE;
}

/* ---- the evaluator ---- */

struct tc_tune_eval {
	tc_module *m;
	char *entry;
	const tc_tune_settings *set;
	int n_in, n_out, workers;
	DLTensor in[MAX_TENSORS];
	const DLTensor *in_ptrs[MAX_TENSORS];
	int64_t in_shape[MAX_TENSORS][8];
	void *in_data[MAX_TENSORS]; /* owned (random inputs), or NULL */
	DLDataType out_dt[MAX_TENSORS];
	int out_nd[MAX_TENSORS];
	int64_t out_shape[MAX_TENSORS][8];
	size_t out_bytes[MAX_TENSORS], out_off[MAX_TENSORS], shared_bytes;
	unsigned char *shared; /* the checked run's outputs (MAP_SHARED) */
	unsigned char *ref;    /* the first correct candidate's outputs */
	double ref_scale[MAX_TENSORS]; /* mean |x| of each float output of ref */
	fault_plan faults;
	int started, measured, failed, cut, stop;
	int generations, planned;
	double first_time, best, t_start;
	double *gen_medians;
	int ngen_medians, gen_of_medians;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Random values as tcomp bench makes them: floats uniform in [-1,1)
 * without 0, integers in [1, ihi], bools 0 or 1. */
static void fill_random(tc_tune_rng *r, void *data, int64_t n, DLDataType dt, int64_t ihi)
{
	int64_t i;
	for (i = 0; i < n; i++) {
		if (dt.code == kDLFloat) {
			double x;
			do
				x = 2 * tc_tune_rng_unit(r) - 1;
			while (x == 0 || (dt.bits == 32 && (float)x == 0));
			if (dt.bits == 16) {
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

tc_tune_eval *tc_tune_eval_new(tc_module *m, const char *entry, const DLTensor *const *inputs,
	int n_inputs, const tc_tune_settings *settings)
{
	tc_tune_eval *ev = tc_calloc(1, sizeof(*ev));
	tc_options *interp = NULL;
	tc_kernel *k = NULL;
	const char *spec;
	int i, d, have_data = n_inputs > 0, n_in, n_out;
	int64_t min_ext = INT64_MAX, ihi;
	tc_tune_rng r;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	if (!ev)
		return NULL;
	ev->m = m;
	ev->set = settings;
	ev->first_time = ev->best = INFINITY;
	ev->shared = MAP_FAILED;
	ev->workers = settings->threads > 0 ? settings->threads : ncpu > 0 ? (int)ncpu : 1;
	ev->t_start = now_s();
	ev->gen_of_medians = -1;
	if (!(ev->entry = tc_strdup(entry)))
		goto oom;
	if (tc_module_def_arity(m, entry, &n_in, &n_out) < 0)
		goto error;
	if (n_in != n_inputs || n_in > MAX_TENSORS || n_out > MAX_TENSORS) {
		goto count_error;
	}
	spec = fault_spec ? fault_spec : getenv("TCOMP_TUNE_TEST_FAULTS");
	if (spec && parse_faults(spec, &ev->faults) < 0)
		ev->faults.n = 0;
	ev->n_in = n_in;
	ev->n_out = n_out;
	/* the inputs: the caller's data, or random values made once */
	for (i = 0; i < n_in; i++)
		have_data &= inputs[i] && inputs[i]->data != NULL;
	for (i = 0; i < n_in; i++) {
		if (!inputs[i] || inputs[i]->ndim < 0 || inputs[i]->ndim > 8)
			goto count_error;
		ev->in[i] = *inputs[i];
		if (!have_data) {
			for (d = 0; d < inputs[i]->ndim; d++)
				ev->in_shape[i][d] = inputs[i]->shape[d];
			ev->in[i].shape = ev->in_shape[i];
			ev->in[i].strides = NULL;
			ev->in[i].byte_offset = 0;
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
		ev->out_bytes[i] = (size_t)elements(ev->out_nd[i], ev->out_shape[i]) *
			(size_t)((ev->out_dt[i].bits + 7) / 8);
		ev->out_off[i] = ev->shared_bytes;
		ev->shared_bytes += (ev->out_bytes[i] + 63) / 64 * 64;
		for (d = 0; d < ev->out_nd[i]; d++)
			min_ext = ev->out_shape[i][d] < min_ext ? ev->out_shape[i][d] : min_ext;
	}
	for (i = 0; i < n_in; i++)
		for (d = 0; d < ev->in[i].ndim; d++)
			min_ext = ev->in[i].shape[d] < min_ext ? ev->in[i].shape[d] : min_ext;
	ihi = min_ext == INT64_MAX ? 16 : min_ext - 1 < 16 ? min_ext - 1 : 16;
	tc_tune_rng_seed(&r, 0x2545F4914F6CDD1DULL);
	for (i = 0; i < n_in && !have_data; i++) {
		int64_t n = elements(ev->in[i].ndim, ev->in[i].shape);
		size_t bytes = (size_t)n * (size_t)((ev->in[i].dtype.bits + 7) / 8);
		if (!(ev->in_data[i] = tc_malloc(bytes ? bytes : 1)))
			goto oom;
		fill_random(&r, ev->in_data[i], n, ev->in[i].dtype, ihi); /* touches every page */
		ev->in[i].data = ev->in_data[i];
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
		"but %d were given", entry, n_in, MAX_TENSORS, n_inputs);
	goto error;
oom:
	tc_rt_set_error(m->ctx, "out of memory");
error:
	tc_kernel_free(k);
	tc_options_free(interp);
	tc_tune_eval_free(ev);
	return NULL;
}

void tc_tune_eval_free(tc_tune_eval *ev)
{
	int i;
	if (!ev)
		return;
	for (i = 0; i < MAX_TENSORS; i++)
		tc_free(ev->in_data[i]);
	if (ev->shared != MAP_FAILED)
		munmap(ev->shared, ev->shared_bytes ? ev->shared_bytes : 64);
	tc_free(ev->ref);
	tc_free(ev->gen_medians);
	tc_free(ev->entry);
	tc_free(ev);
}

void tc_tune_eval_counts(const tc_tune_eval *ev, int *measured, int *failed, int *cut)
{
	*measured = ev->measured;
	*failed = ev->failed;
	*cut = ev->cut;
}

void tc_tune_eval_plan(tc_tune_eval *ev, int generations, int planned)
{
	ev->generations = generations;
	ev->planned = planned;
}

void tc_tune_eval_shape(const tc_tune_eval *ev, int64_t *extent, int *lanes)
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

double tc_tune_eval_first_time(const tc_tune_eval *ev)
{
	return ev->first_time;
}

/* ---- the child ---- */

enum { MSG_READY, MSG_DONE, MSG_GO };

/* Child <-> parent messages (fixed size, over a stream socket). */
typedef struct msg {
	int type;
	int status; /* tc_tune_status (MSG_DONE) */
	int runs;
	double compile_s, median_s, min_s;
	double cutoff_s; /* MSG_GO: stop timing above this (0: none) */
	char text[512];
} msg;

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		ssize_t w = write(fd, c, n);
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

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Make element 0 of the first output clearly different (FAULT_WRONG). */
static void spoil(tc_tune_eval *ev)
{
	unsigned char *p = ev->shared + ev->out_off[0];
	DLDataType dt = ev->out_dt[0];
	if (!ev->n_out || !ev->out_bytes[0])
		return;
	if (dt.code == kDLFloat && dt.bits == 32)
		*(float *)p = *(float *)p * -2 + 7;
	else if (dt.code == kDLFloat && dt.bits == 64)
		*(double *)p = *(double *)p * -2 + 7;
	else if (dt.code == kDLFloat)
		*(uint16_t *)p ^= 0x4000;
	else
		*p ^= 1;
}

static void child_send_fail(int fd, msg *m, tc_tune_status st, const char *text)
{
	m->type = MSG_DONE;
	m->status = st;
	snprintf(m->text, sizeof(m->text), "%s", text);
	write_all(fd, m, sizeof(*m));
	_exit(0);
}

/* Compile, wait for the token, check and time one candidate; never returns. */
static void child_main(tc_tune_eval *ev, int fd, const tc_options *o, tc_tune_fault fault)
{
	const tc_tune_settings *set = ev->set;
	DLTensor shared[MAX_TENSORS], priv[MAX_TENSORS];
	DLTensor *shared_ptrs[MAX_TENSORS], *priv_ptrs[MAX_TENSORS];
	double t0, t, total = 0, *times = NULL;
	int i, n = 0, cap = 0, slow = 0;
	size_t b;
	tc_kernel *k;
	msg m, go;
	signal(SIGINT, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	memset(&m, 0, sizeof(m));
	t0 = now_s();
	k = tc_compile(ev->m, ev->entry, ev->in_ptrs, ev->n_in, o);
	m.compile_s = now_s() - t0;
	if (!k)
		child_send_fail(fd, &m, TC_TUNE_COMPILE_ERROR,
			tc_context_error(ev->m->ctx));
	for (i = 0; i < ev->n_out; i++) {
		void *buf = tc_malloc(ev->out_bytes[i] ? ev->out_bytes[i] : 1);
		if (!buf)
			child_send_fail(fd, &m, TC_TUNE_RUN_ERROR, "out of memory");
		memset(buf, 0, ev->out_bytes[i]); /* fault the pages in before timing */
		memset(&shared[i], 0, sizeof(DLTensor));
		shared[i].device.device_type = kDLCPU;
		shared[i].dtype = ev->out_dt[i];
		shared[i].ndim = ev->out_nd[i];
		shared[i].shape = ev->out_shape[i];
		priv[i] = shared[i];
		shared[i].data = ev->shared + ev->out_off[i];
		priv[i].data = buf;
		shared_ptrs[i] = &shared[i];
		priv_ptrs[i] = &priv[i];
	}
	/* map the shared result's pages in (reading: another child may be
	 * timing into them) */
	for (b = 0; b < ev->shared_bytes; b += 4096)
		(void)((volatile unsigned char *)ev->shared)[b];
	m.type = MSG_READY;
	if (write_all(fd, &m, sizeof(m)) < 0 || read_all(fd, &go, sizeof(go)) < 0)
		_exit(1);
	if (fault == TC_TUNE_FAULT_CRASH) {
		signal(SIGSEGV, SIG_DFL);
		raise(SIGSEGV);
	}
	while (fault == TC_TUNE_FAULT_HANG)
		pause();
	/* the checked run, into the shared buffers */
	t0 = now_s();
	if (tc_kernel_run(k, ev->in_ptrs, ev->n_in, shared_ptrs, ev->n_out) < 0)
		child_send_fail(fd, &m, TC_TUNE_RUN_ERROR,
			tc_context_error(ev->m->ctx));
	t = now_s() - t0;
	if (fault == TC_TUNE_FAULT_WRONG)
		spoil(ev);
	m.type = MSG_DONE;
	m.status = TC_TUNE_OK;
	/* ten times the cutoff is far beyond what first touches cost */
	if (go.cutoff_s > 0 && t > 10 * go.cutoff_s) {
		m.status = TC_TUNE_CUT;
		m.median_s = m.min_s = t;
		m.runs = 1;
		write_all(fd, &m, sizeof(m));
		_exit(0);
	}
	/* warm-up, then timed runs; when the first two runs after the checked
	 * one (which pays for first touches) both take more than the cutoff,
	 * the candidate is cut short */
	for (i = 0; i < set->warmup; i++) {
		t0 = now_s();
		if (tc_kernel_run(k, ev->in_ptrs, ev->n_in, priv_ptrs, ev->n_out) < 0)
			child_send_fail(fd, &m, TC_TUNE_RUN_ERROR, tc_context_error(ev->m->ctx));
		t = now_s() - t0;
		slow = go.cutoff_s > 0 && t > go.cutoff_s ? slow + 1 : 0;
	}
	while (n < set->runs || total < set->min_time_s) {
		if (n == cap) {
			double *tt = tc_realloc(times, (size_t)(cap = 2 * cap + 64) * sizeof(double));
			if (!tt)
				child_send_fail(fd, &m, TC_TUNE_RUN_ERROR, "out of memory");
			times = tt;
		}
		t0 = now_s();
		if (tc_kernel_run(k, ev->in_ptrs, ev->n_in, priv_ptrs, ev->n_out) < 0)
			child_send_fail(fd, &m, TC_TUNE_RUN_ERROR, tc_context_error(ev->m->ctx));
		t = now_s() - t0;
		times[n++] = t;
		total += t;
		slow = go.cutoff_s > 0 && t > go.cutoff_s ? slow + 1 : 0;
		if (slow >= 2 && n <= 2) { /* only at the start: later spikes are noise */
			m.status = TC_TUNE_CUT;
			break;
		}
		if (n >= 1000000)
			break;
	}
	qsort(times, (size_t)n, sizeof(double), cmp_double);
	m.median_s = n % 2 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
	m.min_s = times[0];
	m.runs = n;
	write_all(fd, &m, sizeof(m));
	_exit(0);
}

/* ---- the parent ---- */

enum { SLOT_IDLE, SLOT_COMPILING, SLOT_READY, SLOT_TIMING, SLOT_DONE };

typedef struct slot {
	int state;
	pid_t pid;
	int fd;
	int index; /* the candidate's index in the run */
	double deadline;
	double go_time;
	double budget; /* timing: past this, the candidate is far slower than the best */
	msg m;
	size_t got;
} slot;

/* Compare the shared result with the reference (or make it the reference);
 * 0 equal, -1 different (why filled). */
static int check_result(tc_tune_eval *ev, char *why, size_t len)
{
	int o;
	int64_t i, n;
	if (!ev->ref) {
		if (!(ev->ref = tc_malloc(ev->shared_bytes ? ev->shared_bytes : 1)))
			return 0; /* no reference: nothing to check against */
		memcpy(ev->ref, ev->shared, ev->shared_bytes);
		for (o = 0; o < ev->n_out; o++) {
			DLDataType dt = ev->out_dt[o];
			double sum = 0;
			n = elements(ev->out_nd[o], ev->out_shape[o]);
			for (i = 0; dt.code == kDLFloat && i < n; i++) {
				const unsigned char *p = ev->ref + ev->out_off[o];
				double x = dt.bits == 32 ? ((const float *)p)[i] : dt.bits == 64
					? ((const double *)p)[i] : tc_half_to_double(((const uint16_t *)p)[i]);
				sum += isfinite(x) ? fabs(x) : 0;
			}
			ev->ref_scale[o] = n ? sum / (double)n : 0;
		}
		return 0;
	}
	for (o = 0; o < ev->n_out; o++) {
		DLDataType dt = ev->out_dt[o];
		const unsigned char *got = ev->shared + ev->out_off[o], *ref = ev->ref + ev->out_off[o];
		double rtol = dt.bits == 16 ? 1e-2 : dt.bits == 32 ? 1e-4 : 1e-10;
		n = elements(ev->out_nd[o], ev->out_shape[o]);
		if (dt.code != kDLFloat) {
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
			double x, y;
			if (dt.bits == 32) {
				x = ((const float *)got)[i];
				y = ((const float *)ref)[i];
			} else if (dt.bits == 64) {
				x = ((const double *)got)[i];
				y = ((const double *)ref)[i];
			} else {
				x = tc_half_to_double(((const uint16_t *)got)[i]);
				y = tc_half_to_double(((const uint16_t *)ref)[i]);
			}
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

/* Start candidate index (options o) in slot s; -1 if it could not start. */
static int spawn(tc_tune_eval *ev, slot *s, const tc_options *o, int index)
{
	int sv[2];
	pid_t pid;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		return -1;
	fflush(NULL); /* the child never flushes the parent's buffers (_exit) */
	pid = fork();
	if (pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (pid == 0) {
		close(sv[0]);
		child_main(ev, sv[1], o, fault_of(&ev->faults, index));
		_exit(1);
	}
	close(sv[1]);
	s->state = SLOT_COMPILING;
	s->pid = pid;
	s->fd = sv[0];
	s->index = index;
	s->got = 0;
	s->deadline = now_s() + ev->set->compile_timeout_s;
	return 0;
}

static double median_of(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(double), cmp_double);
	return n == 0 ? INFINITY : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* A candidate is finished: counts, callbacks, its time. */
static void finish(tc_tune_eval *ev, slot *s, int gen, const char *key, tc_tune_status st,
	const msg *m, const char *text, double *time)
{
	tc_tune_candidate c;
	tc_tune_progress p;
	double *gm;
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	if (s->pid > 0)
		waitpid(s->pid, NULL, 0);
	s->pid = 0;
	s->state = SLOT_DONE;
	memset(&c, 0, sizeof(c));
	c.options = key;
	c.status = st;
	c.median_s = c.min_s = INFINITY;
	c.runs = m ? m->runs : 0;
	c.compile_s = m ? m->compile_s : 0;
	c.message = text ? text : "";
	c.generation = gen;
	c.index = s->index;
	if (st == TC_TUNE_OK || st == TC_TUNE_CUT) {
		c.median_s = m->median_s;
		c.min_s = m->min_s;
	}
	*time = c.median_s;
	ev->measured++;
	ev->failed += st != TC_TUNE_OK && st != TC_TUNE_CUT;
	ev->cut += st == TC_TUNE_CUT;
	if (s->index == 0)
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
			p.gen_median_s = median_of(copy, ev->ngen_medians);
		}
		tc_free(copy);
		p.elapsed_s = now_s() - ev->t_start;
		p.eta_s = p.elapsed_s / p.done * (p.planned - p.done);
		p.last = &c;
		if (ev->set->progress(ev->set->user, &p))
			ev->stop = 1;
	}
}

/* How a child that closed its socket without a result ended. */
static void death_text(pid_t pid, char *buf, size_t len)
{
	int status = 0;
	if (waitpid(pid, &status, 0) < 0)
		snprintf(buf, len, "the candidate's process ended without a result");
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "the candidate's process was killed by signal %d (%s)",
			WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		snprintf(buf, len, "the candidate's process exited with status %d without a result",
			WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

int tc_tune_eval_measure(void *user, int gen, int n, tc_options *const *options,
	char *const *keys, double *times)
{
	tc_tune_eval *ev = user;
	slot *sl = tc_calloc((size_t)n, sizeof(slot));
	struct pollfd *pf = tc_calloc((size_t)n, sizeof(struct pollfd));
	int *pi = tc_calloc((size_t)n, sizeof(int));
	int next = 0, done = 0, i, rc = 0;
	char text[700];
	if (!sl || !pf || !pi) {
		tc_rt_set_error(ev->m->ctx, "out of memory");
		rc = -1;
		goto out;
	}
	for (i = 0; i < n; i++)
		sl[i].fd = -1;
	while (done < n) {
		int timing = 0, compiling = 0, alive = 0, ready = -1, np = 0, wait_ms;
		double now = now_s(), first = INFINITY;
		if (ev->stop || (ev->set->stop && *ev->set->stop)) {
			rc = 1;
			break;
		}
		for (i = 0; i < next; i++) {
			timing += sl[i].state == SLOT_TIMING;
			compiling += sl[i].state == SLOT_COMPILING;
			alive += sl[i].state >= SLOT_COMPILING && sl[i].state <= SLOT_TIMING;
			if (sl[i].state == SLOT_READY && ready < 0)
				ready = i;
		}
		/* start compiles while nobody is timing */
		while (!timing && compiling < ev->workers && alive < 2 * ev->workers && next < n) {
			int index = ev->started++;
			if (spawn(ev, &sl[next], options[next], index) < 0) {
				snprintf(text, sizeof(text), "cannot start a process: %s", strerror(errno));
				sl[next].index = index;
				finish(ev, &sl[next], gen, keys[next], TC_TUNE_CRASH, NULL, text,
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
			msg go;
			memset(&go, 0, sizeof(go));
			go.type = MSG_GO;
			go.cutoff_s = isfinite(ev->best) ? ev->best * ev->set->cutoff : 0;
			memset(ev->shared, 0, ev->shared_bytes);
			sl[ready].state = SLOT_TIMING;
			sl[ready].deadline = now_s() + ev->set->timeout_s;
			sl[ready].budget = INFINITY;
			sl[ready].go_time = now_s();
			if (isfinite(ev->best)) /* what a candidate within the cutoff needs, twice */
				sl[ready].budget = now_s() + 0.5 + 2 * (ev->set->min_time_s +
					(ev->set->warmup + ev->set->runs + 1) * go.cutoff_s);
			if (write_all(sl[ready].fd, &go, sizeof(go)) < 0) {
				death_text(sl[ready].pid, text, sizeof(text));
				sl[ready].pid = 0;
				finish(ev, &sl[ready], gen, keys[ready], TC_TUNE_CRASH, NULL, text,
					&times[ready]);
				done++;
			}
			continue;
		}
		for (i = 0; i < next; i++)
			if (sl[i].state >= SLOT_COMPILING && sl[i].state <= SLOT_TIMING) {
				pf[np].fd = sl[i].fd;
				pf[np].events = POLLIN;
				pf[np].revents = 0;
				pi[np++] = i;
				if (sl[i].state != SLOT_READY && sl[i].deadline < first)
					first = sl[i].deadline;
			}
		if (!np)
			continue;
		wait_ms = first == INFINITY ? 100 : (int)((first - now) * 1e3) + 1;
		wait_ms = wait_ms < 0 ? 0 : wait_ms > 100 ? 100 : wait_ms;
		if (poll(pf, (nfds_t)np, wait_ms) < 0 && errno != EINTR) {
			tc_rt_set_error(ev->m->ctx, "tc_autotune: poll: %s",
				strerror(errno));
			rc = -1;
			break;
		}
		now = now_s();
		for (i = 0; i < np; i++) {
			slot *s = &sl[pi[i]];
			int j = pi[i];
			if (pf[i].revents) {
				ssize_t r = read(s->fd, (char *)&s->m + s->got, sizeof(msg) - s->got);
				if (r < 0 && (errno == EINTR || errno == EAGAIN))
					continue;
				if (r <= 0) { /* closed without a (whole) result */
					death_text(s->pid, text, sizeof(text));
					s->pid = 0;
					finish(ev, s, gen, keys[j], TC_TUNE_CRASH, NULL, text, &times[j]);
					done++;
					continue;
				}
				s->got += (size_t)r;
				if (s->got < sizeof(msg))
					continue;
				s->got = 0;
				s->m.text[sizeof(s->m.text) - 1] = 0;
				if (s->m.type == MSG_READY && s->state == SLOT_COMPILING) {
					s->state = SLOT_READY;
					continue;
				}
				if (s->m.type == MSG_DONE) {
					tc_tune_status st = (tc_tune_status)s->m.status;
					const char *why = s->m.text;
					if ((st == TC_TUNE_OK || st == TC_TUNE_CUT) &&
						check_result(ev, text, sizeof(text)) < 0) {
						st = TC_TUNE_WRONG;
						why = text;
					}
					finish(ev, s, gen, keys[j], st, &s->m, why, &times[j]);
					done++;
				}
				continue;
			}
			if (s->state == SLOT_TIMING && now > s->budget && now <= s->deadline) {
				msg cut;
				memset(&cut, 0, sizeof(cut));
				kill(s->pid, SIGKILL);
				snprintf(text, sizeof(text), "stopped after %.3g s: far slower than the "
					"best (unchecked)", now - s->go_time);
				cut.median_s = cut.min_s = now - s->go_time;
				finish(ev, s, gen, keys[j], TC_TUNE_CUT, &cut, text, &times[j]);
				done++;
				continue;
			}
			if (s->state != SLOT_READY && now > s->deadline) {
				kill(s->pid, SIGKILL);
				snprintf(text, sizeof(text), "%s took longer than %g s (killed)",
					s->state == SLOT_COMPILING ? "compiling" : "the runs",
					s->state == SLOT_COMPILING ? ev->set->compile_timeout_s
								   : ev->set->timeout_s);
				finish(ev, s, gen, keys[j], TC_TUNE_TIMEOUT, NULL, text, &times[j]);
				done++;
			}
		}
	}
out:
	for (i = 0; sl && i < next; i++)
		if (sl[i].state >= SLOT_COMPILING && sl[i].state <= SLOT_TIMING) {
			kill(sl[i].pid, SIGKILL);
			waitpid(sl[i].pid, NULL, 0);
			close(sl[i].fd);
		}
	tc_free(sl);
	tc_free(pf);
	tc_free(pi);
	return rc;
}
