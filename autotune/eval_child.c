/* The child side of the evaluator: what a forked candidate does.
 *
 * The child compiles the kernel, pre-faults its private output buffers and
 * the pages of the result buffer shared with the parent, says READY and
 * waits for GO, the timing token.  With it, the child of a search
 * candidate runs the kernel once into the shared buffer (the checked run,
 * which the parent compares with the reference), then warm-up runs and
 * timed runs into its private buffers until there have been settings->runs
 * taking settings->min_time_s in all, sends the median and minimum and
 * _exits.  A run that takes more than the GO's cutoff ends the timing
 * early (the candidate is CUT: measured roughly, known to be slow): the
 * checked run if it took ten times that, else the first two runs after
 * it.  The child of a final-stage configuration times a round per GO (the
 * first round starts with the checked run and a longer warm-up) until the
 * parent closes its socket.  Each round is timed at the GO's stack offset
 * (see time_shifted).  Planted test faults act here.  Children ignore
 * SIGINT: Ctrl-C on a terminal reaches the whole process group, and the
 * parent kills them when it stops. */
#include "eval.h"

#include "../runtime/internal.h"
#include "../runtime/pool.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
	else if (dt.code == kDLFloat || dt.code == kDLBfloat) /* 16 bits */
		*(uint16_t *)p ^= 0x4000;
	else
		*p ^= 1;
}

/* Send DONE with status st and text, and exit. */
static void child_send_fail(int fd, tc_tune_msg *m, tc_tune_status st, const char *text)
{
	m->type = TC_TUNE_MSG_DONE;
	m->status = st;
	snprintf(m->text, sizeof(m->text), "%s", text);
	tc_tune_msg_send(fd, m);
	_exit(0);
}

/* A child's kernel and buffers. */
typedef struct child {
	tc_tune_eval *ev;
	int fd;
	tc_kernel *k;
	/* the inputs runs read: the evaluator's (host memory), or for a GPU
	 * candidate copies of them in device memory */
	DLTensor din[TC_TUNE_MAX_TENSORS];
	const DLTensor *in_ptrs[TC_TUNE_MAX_TENSORS];
	DLTensor shared[TC_TUNE_MAX_TENSORS], priv[TC_TUNE_MAX_TENSORS];
	DLTensor *shared_ptrs[TC_TUNE_MAX_TENSORS], *priv_ptrs[TC_TUNE_MAX_TENSORS];
	double *times; /* the timed runs of a round */
	int cap;
	tc_tune_msg m;
} child;

/* The bytes of compact tensor t. */
static size_t dl_bytes(const DLTensor *t)
{
	size_t n = (size_t)(t->dtype.bits * t->dtype.lanes + 7) / 8;
	int d;
	for (d = 0; d < t->ndim; d++)
		n *= (size_t)t->shape[d];
	return n;
}

/* A GPU candidate's device memory: every input copied in (the parent made
 * them in host memory, compact), and an output buffer per output, into
 * priv (shared stays the host's: the checked run's outputs are copied
 * there, child_checked_run).  The first call opens the CUDA driver: the
 * parent never does (probe.c says why).  Exits on failure. */
static void child_device_buffers(child *c)
{
	tc_tune_eval *ev = c->ev;
	tc_context *ctx = ev->m->ctx;
	DLDevice gpu = {kDLCUDA, 0}, cpu = {kDLCPU, 0};
	void *p;
	int i;
	for (i = 0; i < ev->n_in; i++) {
		size_t bytes = dl_bytes(&ev->in[i]);
		if (tc_device_alloc(ctx, gpu, bytes, &p) < 0 ||
			tc_device_copy(ctx, p, gpu, (const char *)ev->in[i].data + ev->in[i].byte_offset,
				cpu, bytes) < 0)
			child_send_fail(c->fd, &c->m, TC_TUNE_RUN_ERROR, tc_context_error(ctx));
		c->din[i].data = p;
	}
	for (i = 0; i < ev->n_out; i++) {
		if (tc_device_alloc(ctx, gpu, ev->out_bytes[i], &p) < 0)
			child_send_fail(c->fd, &c->m, TC_TUNE_RUN_ERROR, tc_context_error(ctx));
		c->priv[i].data = p;
		c->priv[i].device = gpu;
	}
}

/* One run into outs; its time into *dt: a GPU candidate's device time
 * between CUDA events (tc_kernel_run_timed), else the host clock's.
 * Exits on a run error. */
static void child_run(child *c, DLTensor *const *outs, double *dt)
{
	tc_tune_eval *ev = c->ev;
	double t0 = tc_tune_now(), ms = 0;
	int r = ev->device == kDLCUDA
		? tc_kernel_run_timed(c->k, c->in_ptrs, ev->n_in, outs, ev->n_out, &ms)
		: tc_kernel_run(c->k, c->in_ptrs, ev->n_in, outs, ev->n_out);
	if (r < 0)
		child_send_fail(c->fd, &c->m, TC_TUNE_RUN_ERROR, tc_context_error(ev->m->ctx));
	*dt = ev->device == kDLCUDA ? ms * 1e-3 : tc_tune_now() - t0;
}

/* Set c up for ev, talking on fd; compile o, allocate and pre-fault the
 * buffers (a GPU candidate: device memory, the inputs copied in), say
 * READY and wait for the first GO into *go, whose stack offset the pool's
 * workers get; exits on failure. */
static void child_prepare(child *c, tc_tune_eval *ev, int fd, const tc_options *o, tc_tune_msg *go)
{
	double t0;
	size_t b;
	int i;
	memset(c, 0, sizeof(*c));
	c->ev = ev;
	c->fd = fd;
	signal(SIGINT, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	for (i = 0; i < ev->n_in; i++) {
		c->din[i] = ev->in[i];
		if (ev->device == kDLCUDA) { /* shapes for the compile; data below */
			c->din[i].device = (DLDevice){kDLCUDA, 0};
			c->din[i].data = NULL;
			c->din[i].strides = NULL;
			c->din[i].byte_offset = 0;
		}
		c->in_ptrs[i] = ev->device == kDLCUDA ? &c->din[i] : ev->in_ptrs[i];
	}
	t0 = tc_tune_now();
	c->k = tc_compile(ev->m, ev->entry, c->in_ptrs, ev->n_in, o);
	c->m.compile_s = tc_tune_now() - t0;
	if (!c->k)
		child_send_fail(c->fd, &c->m, TC_TUNE_COMPILE_ERROR, tc_context_error(ev->m->ctx));
	for (i = 0; i < ev->n_out; i++) {
		void *buf = tc_malloc(ev->out_bytes[i] + TC_TUNE_ALIGN); /* the child exits, never frees */
		if (!buf)
			child_send_fail(c->fd, &c->m, TC_TUNE_RUN_ERROR, "out of memory");
		buf = tc_tune_align(buf);
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
	if (ev->device == kDLCUDA)
		child_device_buffers(c);
	/* map the shared result's pages in (reading: another child may be
	 * timing into them) */
	for (b = 0; b < ev->shared_bytes; b += 4096)
		(void)((volatile unsigned char *)ev->shared)[b];
	c->m.type = TC_TUNE_MSG_READY;
	if (tc_tune_msg_send(c->fd, &c->m) < 0 || tc_tune_msg_recv(c->fd, go) < 0)
		_exit(1);
	/* pool workers, started by the first run, at the same offset (in the
	 * final stage they keep the first round's) */
	tc_rt_pool_set_stack_shift(go->shift);
}

/* The checked run, into the shared buffers; its time.  A GPU candidate
 * runs into its device outputs, which get the shared buffer's zeroed
 * contents first and go back into it after (so the parent checks what the
 * kernel wrote, as for the CPU).  Exits on an error. */
static double child_checked_run(child *c)
{
	tc_tune_eval *ev = c->ev;
	tc_context *ctx = ev->m->ctx;
	DLDevice gpu = {kDLCUDA, 0}, cpu = {kDLCPU, 0};
	double dt;
	int i;
	if (ev->device != kDLCUDA) {
		child_run(c, c->shared_ptrs, &dt);
		return dt;
	}
	for (i = 0; i < ev->n_out; i++)
		if (tc_device_copy(ctx, c->priv[i].data, gpu, c->shared[i].data, cpu,
			    ev->out_bytes[i]) < 0)
			child_send_fail(c->fd, &c->m, TC_TUNE_RUN_ERROR, tc_context_error(ctx));
	child_run(c, c->priv_ptrs, &dt);
	for (i = 0; i < ev->n_out; i++)
		if (tc_device_copy(ctx, c->shared[i].data, cpu, c->priv[i].data, gpu,
			    ev->out_bytes[i]) < 0)
			child_send_fail(c->fd, &c->m, TC_TUNE_RUN_ERROR, tc_context_error(ctx));
	return dt;
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
	double t0, dt, total = 0;
	int i, n = 0, slow = 0;
	c->m.status = TC_TUNE_OK;
	/* warm-up, then timed runs; when the first two runs after the checked
	 * one (which pays for first touches) both take more than the cutoff,
	 * the candidate is cut short */
	for (i = 0, t0 = tc_tune_now(); i < t->warm_runs || tc_tune_now() - t0 < t->warm_s; i++) {
		child_run(c, c->priv_ptrs, &dt);
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
		child_run(c, c->priv_ptrs, &dt);
		if (t->decoy) {
			struct timespec ts = {0, 2000000};
			nanosleep(&ts, NULL);
			dt += 2e-3;
		}
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
	c->m.median_s = tc_tune_median(c->times, n); /* sorts them */
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

/* Replace c's times by the fake fitness of options o (a status other than
 * OK stays). */
static void fake(child *c, const tc_options *o)
{
	char *key = tc_options_print(o);
	if (c->m.status == TC_TUNE_OK && key)
		c->m.median_s = c->m.min_s = tc_tune_fake_time(key);
	tc_string_free(key);
}

/* A search candidate: compile, wait for the token, check and time it once;
 * never returns. */
static void child_main(tc_tune_eval *ev, int fd, const tc_options *o, tc_tune_fault fault)
{
	const tc_tune_settings *set = ev->set;
	child c;
	timing tm;
	tc_tune_msg go;
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
	c.m.type = TC_TUNE_MSG_DONE;
	c.m.status = TC_TUNE_OK;
	/* ten times the cutoff is far beyond what first touches cost */
	if (go.cutoff_s > 0 && t > 10 * go.cutoff_s) {
		c.m.status = TC_TUNE_CUT;
		c.m.median_s = c.m.min_s = t;
		c.m.runs = 1;
		tc_tune_msg_send(fd, &c.m);
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
	if (ev->fake_fitness)
		fake(&c, o);
	tc_tune_msg_send(fd, &c.m);
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
	tc_tune_msg go;
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
		c.m.type = TC_TUNE_MSG_DONE;
		if (ev->fake_fitness)
			fake(&c, o);
		if (tc_tune_msg_send(fd, &c.m) < 0 || tc_tune_msg_recv(fd, &go) < 0)
			_exit(0);
	}
}

void tc_tune_child_main(__tc_keep tc_tune_eval *ev, int fd, __tc_keep const tc_options *o,
	tc_tune_fault fault, int final)
{
	if (final)
		child_final_main(ev, fd, o, fault);
	child_main(ev, fd, o, fault);
	_exit(1);
}
