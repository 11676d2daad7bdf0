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
 * Each child times at a stack offset of its own (see time_shifted).
 *
 * The final stage (tc_tune_eval_retime) forks one child per configuration
 * that compiles once and then times a round per GO, until the parent is
 * done with it; the parent hands out the GOs round robin, one child at a
 * time, and checks the result of each one's first round.
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
#include "../runtime/pool.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_TENSORS 64

/* ---- test-only fault planting ---- */

/* Inputs and outputs are 64-byte aligned, as tcomp bench's and framework
 * tensors are: a kernel's speed can depend on it (fully connected 128 ->
 * 10 took 4.9 us on malloc's 16-byte aligned buffers in the tuner and 3.7
 * us on aligned ones in tcomp bench, so the tuner chose options that were
 * slower where it mattered). */
#define ALIGN 64
static void *aligned(void *p)
{
	return (void *)(((uintptr_t)p + ALIGN - 1) / ALIGN * ALIGN);
}

static char *fault_spec; /* tc_tune_test_faults */

typedef struct fault_plan {
	int n;
	int index[32];
	tc_tune_fault kind[32];
} fault_plan;

/* Parse "1:crash,2:hang,3:wrong,4:decoy" into plan; -1 if malformed. */
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
	/* every candidate started by the search: its key, index and planted
	 * fault, for the final stage (which reports the search's index and
	 * keeps a decoy a decoy) */
	struct started_cand {
		char *key;
		int index;
		tc_tune_fault fault;
	} *cands;
	int ncands, capcands;
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
		if (!(ev->in_data[i] = tc_malloc(bytes + ALIGN)))
			goto oom;
		ev->in[i].data = aligned(ev->in_data[i]);
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
	for (i = 0; i < ev->ncands; i++)
		tc_free(ev->cands[i].key);
	tc_free(ev->cands);
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
	int round;  /* MSG_GO of the final stage: the round, from 0 */
	int shift;  /* MSG_GO: bytes to move the stack down by while timing */
	double compile_s, median_s, min_s;
	double cutoff_s; /* MSG_GO: stop timing above this (0: none) */
	char text[512];
} msg;

/* Write n bytes to socket fd; a closed peer is an error, not SIGPIPE. */
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

/* A child's kernel and buffers. */
typedef struct child {
	tc_tune_eval *ev;
	int fd;
	tc_kernel *k;
	DLTensor shared[MAX_TENSORS], priv[MAX_TENSORS];
	DLTensor *shared_ptrs[MAX_TENSORS], *priv_ptrs[MAX_TENSORS];
	double *times; /* the timed runs of a round */
	int cap;
	msg m;
} child;

/* Set c up for ev, talking on fd; compile o, allocate and pre-fault the
 * buffers, say READY and wait for the first GO into *go, whose stack
 * offset the pool's workers get; exits on failure. */
static void child_prepare(child *c, tc_tune_eval *ev, int fd, const tc_options *o, msg *go)
{
	double t0;
	size_t b;
	int i;
	memset(c, 0, sizeof(*c));
	c->ev = ev;
	c->fd = fd;
	signal(SIGINT, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	t0 = now_s();
	c->k = tc_compile(ev->m, ev->entry, ev->in_ptrs, ev->n_in, o);
	c->m.compile_s = now_s() - t0;
	if (!c->k)
		child_send_fail(c->fd, &c->m, TC_TUNE_COMPILE_ERROR, tc_context_error(ev->m->ctx));
	for (i = 0; i < ev->n_out; i++) {
		void *buf = tc_malloc(ev->out_bytes[i] + ALIGN); /* the child exits, never frees */
		if (!buf)
			child_send_fail(c->fd, &c->m, TC_TUNE_RUN_ERROR, "out of memory");
		buf = aligned(buf);
		memset(buf, 0, ev->out_bytes[i]); /* fault the pages in before timing */
		memset(&c->shared[i], 0, sizeof(DLTensor));
		c->shared[i].device.device_type = kDLCPU;
		c->shared[i].dtype = ev->out_dt[i];
		c->shared[i].ndim = ev->out_nd[i];
		c->shared[i].shape = ev->out_shape[i];
		c->priv[i] = c->shared[i];
		c->shared[i].data = ev->shared + ev->out_off[i];
		c->priv[i].data = buf;
		c->shared_ptrs[i] = &c->shared[i];
		c->priv_ptrs[i] = &c->priv[i];
	}
	/* map the shared result's pages in (reading: another child may be
	 * timing into them) */
	for (b = 0; b < ev->shared_bytes; b += 4096)
		(void)((volatile unsigned char *)ev->shared)[b];
	c->m.type = MSG_READY;
	if (write_all(c->fd, &c->m, sizeof(c->m)) < 0 || read_all(c->fd, go, sizeof(*go)) < 0)
		_exit(1);
	/* pool workers, started by the first run, at the same offset (in the
	 * final stage they keep the first round's) */
	tc_rt_pool_set_stack_shift(go->shift);
}

/* The checked run, into the shared buffers; its time.  Exits on an error. */
static double child_checked_run(child *c)
{
	double t0 = now_s();
	if (tc_kernel_run(c->k, c->ev->in_ptrs, c->ev->n_in, c->shared_ptrs, c->ev->n_out) < 0)
		child_send_fail(c->fd, &c->m, TC_TUNE_RUN_ERROR, tc_context_error(c->ev->m->ctx));
	return now_s() - t0;
}

/* One round of timing into the private buffers. */
typedef struct timing {
	child *c;
	int warm_runs;   /* at least this many warm-up runs ... */
	double warm_s;   /* ... taking at least this long */
	int runs;        /* at least this many timed runs ... */
	double min_s;    /* ... taking at least this long */
	double cutoff_s; /* > 0: cut short when the first two runs both exceed it */
	int decoy;       /* sleep 2 ms in every timed run (TC_TUNE_FAULT_DECOY) */
} timing;

/* Warm-up and timed runs as t says; c->m gets the median, minimum, runs
 * and status (OK, or CUT).  Exits on a run error. */
static void time_round(timing *t)
{
	child *c = t->c;
	tc_tune_eval *ev = c->ev;
	double t0, dt, total = 0;
	int i, n = 0, slow = 0;
	c->m.status = TC_TUNE_OK;
	/* warm-up, then timed runs; when the first two runs after the checked
	 * one (which pays for first touches) both take more than the cutoff,
	 * the candidate is cut short */
	for (i = 0, t0 = now_s(); i < t->warm_runs || now_s() - t0 < t->warm_s; i++) {
		double t1 = now_s();
		if (tc_kernel_run(c->k, ev->in_ptrs, ev->n_in, c->priv_ptrs, ev->n_out) < 0)
			child_send_fail(c->fd, &c->m, TC_TUNE_RUN_ERROR, tc_context_error(ev->m->ctx));
		dt = now_s() - t1;
		slow = t->cutoff_s > 0 && dt > t->cutoff_s ? slow + 1 : 0;
	}
	while (n < t->runs || total < t->min_s) {
		if (n == c->cap) {
			double *tt = tc_realloc(c->times, (size_t)(c->cap = 2 * c->cap + 64) *
				sizeof(double));
			if (!tt)
				child_send_fail(c->fd, &c->m, TC_TUNE_RUN_ERROR, "out of memory");
			c->times = tt;
		}
		t0 = now_s();
		if (tc_kernel_run(c->k, ev->in_ptrs, ev->n_in, c->priv_ptrs, ev->n_out) < 0)
			child_send_fail(c->fd, &c->m, TC_TUNE_RUN_ERROR, tc_context_error(ev->m->ctx));
		if (t->decoy) {
			struct timespec ts = {0, 2000000};
			nanosleep(&ts, NULL);
		}
		dt = now_s() - t0;
		c->times[n++] = dt;
		total += dt;
		slow = t->cutoff_s > 0 && dt > t->cutoff_s ? slow + 1 : 0;
		if (slow >= 2 && n <= 2) { /* only at the start: later spikes are noise */
			c->m.status = TC_TUNE_CUT;
			break;
		}
		if (n >= 1000000)
			break;
	}
	qsort(c->times, (size_t)n, sizeof(double), cmp_double);
	c->m.median_s = n % 2 ? c->times[n / 2] : (c->times[n / 2 - 1] + c->times[n / 2]) / 2;
	c->m.min_s = c->times[0];
	c->m.runs = n;
}

/* Run time_round(t) with the stack pointer shift bytes lower.  Why: the
 * speed of some kernels depends on where the stack lies in its page.
 * fcrelu 128x784x128 with tile=384,256,8 regtile=2,32 (its packing copy
 * keeps 32 row pointers on the stack and reloads them between stores into
 * the packed buffer) takes 0.146 ms at some offsets and 0.23 ms at most
 * others; the kernel's layout is otherwise fixed, so the offset, which
 * the kernel randomises per process (ASLR), decides: 4K aliasing of the
 * reloads with the stores, we think.  Children are forked, so without
 * this every candidate of a run would be timed at the parent's one offset
 * and some would look faster (or slower) than a fresh process finds them
 * on average.  So each candidate of the search is timed at an offset of
 * its own, and each round of the final stage at another one. */
static void __attribute__((noinline)) time_shifted(int shift, timing *t)
{
	volatile char pad[shift + 16];
	pad[0] = 0;
	time_round(t);
	pad[shift] = pad[0]; /* pad, and so the shift, lives across the call */
}

/* The stack offset of search candidate index, or of final round r: 64
 * offsets 64 bytes apart, over the page, visited in a scattered order. */
static int stack_shift(int i)
{
	return (int)(((unsigned)i * 37u + 11u) % 64u) * 64;
}

/* A search candidate: compile, wait for the token, check and time it once;
 * never returns. */
static void child_main(tc_tune_eval *ev, int fd, const tc_options *o, tc_tune_fault fault)
{
	const tc_tune_settings *set = ev->set;
	child c;
	timing tm;
	msg go;
	double t;
	child_prepare(&c, ev, fd, o, &go);
	if (fault == TC_TUNE_FAULT_CRASH) {
		signal(SIGSEGV, SIG_DFL);
		raise(SIGSEGV);
	}
	while (fault == TC_TUNE_FAULT_HANG)
		pause();
	if (fault == TC_TUNE_FAULT_DECOY)
		go.cutoff_s = 0; /* it is to look fast: never cut short */
	t = child_checked_run(&c);
	if (fault == TC_TUNE_FAULT_WRONG)
		spoil(ev);
	c.m.type = MSG_DONE;
	c.m.status = TC_TUNE_OK;
	/* ten times the cutoff is far beyond what first touches cost */
	if (go.cutoff_s > 0 && t > 10 * go.cutoff_s) {
		c.m.status = TC_TUNE_CUT;
		c.m.median_s = c.m.min_s = t;
		c.m.runs = 1;
		write_all(fd, &c.m, sizeof(c.m));
		_exit(0);
	}
	memset(&tm, 0, sizeof(tm));
	tm.c = &c;
	tm.warm_runs = set->warmup;
	tm.runs = set->runs;
	tm.min_s = set->min_time_s;
	tm.cutoff_s = go.cutoff_s;
	time_shifted(go.shift, &tm);
	if (fault == TC_TUNE_FAULT_DECOY) {
		c.m.median_s *= 1e-3;
		c.m.min_s *= 1e-3;
	}
	write_all(fd, &c.m, sizeof(c.m));
	_exit(0);
}

/* A configuration of the final stage: compile, then a round of timing per
 * GO until the parent closes the socket; the first round starts with the
 * checked run and warms up for at least final_warmup_s.  Never returns. */
static void child_final_main(tc_tune_eval *ev, int fd, const tc_options *o, tc_tune_fault fault)
{
	const tc_tune_settings *set = ev->set;
	child c;
	timing tm;
	msg go;
	child_prepare(&c, ev, fd, o, &go);
	for (;;) {
		if (go.round == 0)
			child_checked_run(&c);
		memset(&tm, 0, sizeof(tm));
		tm.c = &c;
		tm.warm_runs = set->warmup > 1 ? set->warmup : 1;
		tm.warm_s = go.round == 0 ? set->final_warmup_s : 0;
		tm.runs = set->runs;
		tm.min_s = set->final_time_s;
		tm.decoy = fault == TC_TUNE_FAULT_DECOY;
		time_shifted(go.shift, &tm);
		c.m.type = MSG_DONE;
		if (write_all(fd, &c.m, sizeof(c.m)) < 0 || read_all(fd, &go, sizeof(go)) < 0)
			_exit(0);
	}
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

/* Start candidate index (options o, planted fault) in slot s, of the
 * final stage if final; -1 if it could not start.  The child closes the
 * parent's ends of the sockets of the other slots (all[0..nall)), so that
 * each child sees the end of its socket when the parent closes it or
 * dies, and on Linux it is killed when the parent dies. */
static int spawn(tc_tune_eval *ev, slot *s, const tc_options *o, int index, tc_tune_fault fault,
	int final, const slot *all, int nall)
{
	int sv[2], i;
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
		for (i = 0; i < nall; i++)
			if (all[i].fd >= 0)
				close(all[i].fd);
#ifdef __linux__
		prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
		if (final)
			child_final_main(ev, sv[1], o, fault);
		child_main(ev, sv[1], o, fault);
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
			tc_tune_fault fault = fault_of(&ev->faults, index);
			if (remember(ev, keys[next], index, fault) < 0 ||
				spawn(ev, &sl[next], options[next], index, fault, 0, sl, next) < 0) {
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
			go.shift = stack_shift(sl[ready].index);
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

/* Has the final stage been asked to stop?  A progress callback returning
 * non-zero, or the stop flag changing from stop0, its value when the stage
 * began (the search may have been stopped by it already). */
static int final_stop(const tc_tune_eval *ev, sig_atomic_t stop0)
{
	return ev->stop || (ev->set->stop && *ev->set->stop != stop0);
}

/* Read slot s's next message into s->m, waiting until its deadline: 0
 * got it, 1 stopped (final_stop), -1 the child died or ran past the
 * deadline (killed; why in text). */
static int final_wait(tc_tune_eval *ev, slot *s, sig_atomic_t stop0, char *text, size_t len)
{
	for (;;) {
		struct pollfd pf;
		double now = now_s();
		int wait_ms;
		ssize_t r;
		if (final_stop(ev, stop0))
			return 1;
		if (now > s->deadline) {
			kill(s->pid, SIGKILL);
			snprintf(text, len, "%s took longer than %g s (killed)",
				s->state == SLOT_COMPILING ? "compiling" : "a round of re-timing",
				s->deadline - s->go_time);
			return -1;
		}
		wait_ms = (int)((s->deadline - now) * 1e3) + 1;
		pf.fd = s->fd;
		pf.events = POLLIN;
		pf.revents = 0;
		if (poll(&pf, 1, wait_ms > 100 ? 100 : wait_ms) <= 0)
			continue; /* timeout, or EINTR: look at the flags and the clock */
		r = read(s->fd, (char *)&s->m + s->got, sizeof(msg) - s->got);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0) {
			death_text(s->pid, text, len);
			s->pid = 0;
			return -1;
		}
		s->got += (size_t)r;
		if (s->got == sizeof(msg)) {
			s->got = 0;
			s->m.text[sizeof(s->m.text) - 1] = 0;
			return 0;
		}
	}
}

/* Configuration i failed: why, and the child is gone. */
static void final_fail(slot *s, tc_tune_retimed *out, tc_tune_status st, const char *why)
{
	size_t n = strlen(why);
	out->status = st;
	if (n >= sizeof(out->message)) /* cut to fit */
		n = sizeof(out->message) - 1;
	memcpy(out->message, why, n);
	out->message[n] = 0;
	if (s->pid > 0) {
		kill(s->pid, SIGKILL);
		waitpid(s->pid, NULL, 0);
	}
	s->pid = 0;
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	s->state = SLOT_DONE;
}

int tc_tune_eval_retime(void *user, int n, tc_options *const *options, char *const *keys,
	int rounds, double *rt, tc_tune_retimed *out)
{
	tc_tune_eval *ev = user;
	slot *sl = tc_calloc((size_t)n + 1, sizeof(slot));
	tc_tune_fault *fault = tc_calloc((size_t)n + 1, sizeof(tc_tune_fault));
	sig_atomic_t stop0 = ev->set->stop ? *ev->set->stop : 0;
	int i, r, rc = 0, done = 0, total = n * rounds;
	double t_stage = now_s();
	char text[700];
	if (!sl || !fault) {
		tc_rt_set_error(ev->m->ctx, "out of memory");
		tc_free(sl);
		tc_free(fault);
		return -1;
	}
	ev->stop = 0; /* a stop of the search does not stop this stage */
	for (i = 0; i < n; i++) {
		sl[i].fd = -1;
		memset(&out[i], 0, sizeof(out[i]));
		out[i].status = TC_TUNE_OK;
		out[i].min_s = INFINITY;
		recall(ev, keys[i], &out[i].index, &fault[i]);
		if (fault[i] != TC_TUNE_FAULT_DECOY) /* the others were the search's */
			fault[i] = TC_TUNE_FAULT_NONE;
	}
	/* compile: up to workers at a time; every child stays, ready */
	for (i = 0; i < n && rc == 0; i++) {
		int j, compiling = 0;
		for (j = 0; j < i; j++)
			compiling += sl[j].state == SLOT_COMPILING;
		for (j = 0; compiling >= ev->workers && j < i; j++) {
			int w;
			if (sl[j].state != SLOT_COMPILING)
				continue;
			w = final_wait(ev, &sl[j], stop0, text, sizeof(text));
			if (w == 1) {
				rc = 1;
				break;
			}
			compiling--;
			if (w < 0)
				final_fail(&sl[j], &out[j], sl[j].pid ? TC_TUNE_TIMEOUT : TC_TUNE_CRASH,
					text);
			else if (sl[j].m.type != MSG_READY)
				final_fail(&sl[j], &out[j], (tc_tune_status)sl[j].m.status, sl[j].m.text);
			else {
				sl[j].state = SLOT_READY;
				out[j].compile_s = sl[j].m.compile_s;
			}
		}
		if (rc)
			break;
		sl[i].go_time = now_s();
		if (spawn(ev, &sl[i], options[i], out[i].index, fault[i], 1, sl, i) < 0) {
			snprintf(text, sizeof(text), "cannot start a process: %s", strerror(errno));
			final_fail(&sl[i], &out[i], TC_TUNE_CRASH, text);
		}
	}
	for (i = 0; i < n && rc == 0; i++) {
		int w;
		if (sl[i].state != SLOT_COMPILING)
			continue;
		w = final_wait(ev, &sl[i], stop0, text, sizeof(text));
		if (w == 1)
			rc = 1;
		else if (w < 0)
			final_fail(&sl[i], &out[i], sl[i].pid ? TC_TUNE_TIMEOUT : TC_TUNE_CRASH, text);
		else if (sl[i].m.type != MSG_READY)
			final_fail(&sl[i], &out[i], (tc_tune_status)sl[i].m.status, sl[i].m.text);
		else {
			sl[i].state = SLOT_READY;
			out[i].compile_s = sl[i].m.compile_s;
		}
	}
	/* the rounds: each configuration in turn, alone on the machine */
	for (r = 0; r < rounds && rc == 0; r++)
		for (i = 0; i < n && rc == 0; i++) {
			msg go;
			int w;
			if (sl[i].state != SLOT_READY) {
				done++;
				continue;
			}
			if (final_stop(ev, stop0)) {
				rc = 1;
				break;
			}
			memset(&go, 0, sizeof(go));
			go.type = MSG_GO;
			go.round = r;
			go.shift = stack_shift(r);
			if (r == 0)
				memset(ev->shared, 0, ev->shared_bytes);
			sl[i].go_time = now_s();
			sl[i].deadline = sl[i].go_time + ev->set->timeout_s +
				2 * (ev->set->final_time_s + (r == 0 ? ev->set->final_warmup_s : 0));
			sl[i].state = SLOT_TIMING;
			if (write_all(sl[i].fd, &go, sizeof(go)) < 0) {
				death_text(sl[i].pid, text, sizeof(text));
				sl[i].pid = 0;
				w = -1;
			} else {
				w = final_wait(ev, &sl[i], stop0, text, sizeof(text));
			}
			if (w == 1) {
				rc = 1;
				break;
			}
			if (w < 0) {
				final_fail(&sl[i], &out[i], sl[i].pid ? TC_TUNE_TIMEOUT : TC_TUNE_CRASH,
					text);
			} else if (sl[i].m.status != TC_TUNE_OK) {
				final_fail(&sl[i], &out[i], (tc_tune_status)sl[i].m.status, sl[i].m.text);
			} else if (r == 0 && check_result(ev, text, sizeof(text)) < 0) {
				final_fail(&sl[i], &out[i], TC_TUNE_WRONG, text);
			} else {
				sl[i].state = SLOT_READY;
				rt[r * n + i] = sl[i].m.median_s;
				out[i].runs += sl[i].m.runs;
				if (sl[i].m.min_s < out[i].min_s)
					out[i].min_s = sl[i].m.min_s;
			}
			done++;
			if (ev->set->progress) {
				tc_tune_candidate c;
				tc_tune_progress p;
				memset(&c, 0, sizeof(c));
				c.options = keys[i];
				c.status = out[i].status;
				c.median_s = c.status == TC_TUNE_OK ? rt[r * n + i] : INFINITY;
				c.min_s = c.status == TC_TUNE_OK ? sl[i].m.min_s : INFINITY;
				c.runs = c.status == TC_TUNE_OK ? sl[i].m.runs : 0;
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
				p.elapsed_s = now_s() - ev->t_start;
				p.eta_s = (now_s() - t_stage) / done * (total - done);
				p.last = &c;
				p.final_round = r + 1;
				p.final_rounds = rounds;
				if (ev->set->progress(ev->set->user, &p))
					ev->stop = 1;
			}
		}
	for (i = 0; i < n; i++)
		if (sl[i].pid > 0) { /* done with it (the socket's end would do, too) */
			kill(sl[i].pid, SIGKILL);
			waitpid(sl[i].pid, NULL, 0);
		}
	for (i = 0; i < n; i++)
		if (sl[i].fd >= 0)
			close(sl[i].fd);
	tc_free(sl);
	tc_free(fault);
	return rc;
}
