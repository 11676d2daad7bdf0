/* The evaluator's internals, shared by its three files and by nothing else
 * (tune.h is the autotuner's interface):
 *
 *   eval.c        the evaluator: inputs, the shared result buffer and the
 *                 reference, test faults, and the two callers of the
 *                 slots: the search's measure and the final stage's
 *                 re-timing (what to start, when to hand out the timing
 *                 token, what each outcome means)
 *   eval_slots.c  the slots: children forked into slots, the timing token
 *                 (GO) sent, their sockets polled, their messages, deaths,
 *                 deadlines and budgets turned into events, children
 *                 killed and reaped
 *   eval_child.c  the child side: compile, pre-fault, wait for GO, run,
 *                 check, time, send the result
 *
 * The design and its measurements: autotune/README.md.
 *
 * Ownership: the evaluator owns what its struct says; slots are the
 * caller's struct (on the stack), owning their arrays, children and
 * sockets until tc_tune_slots_clear; messages and events are plain values
 * in the caller's structs.  Everything else passed in is borrowed. */
#ifndef TC_TUNE_EVAL_H
#define TC_TUNE_EVAL_H

#include "tune.h"

#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <sys/types.h>

#define TC_TUNE_MAX_TENSORS 64

/* Inputs and outputs are 64-byte aligned, as tcomp bench's and framework
 * tensors are: a kernel's speed can depend on it (fully connected 128 ->
 * 10 took 4.9 us on malloc's 16-byte aligned buffers in the tuner and 3.7
 * us on aligned ones in tcomp bench, so the tuner chose options that were
 * slower where it mattered).  Allocate TC_TUNE_ALIGN bytes more and align
 * with tc_tune_align. */
#define TC_TUNE_ALIGN 64

/* Faults planted in candidates by their start index (tc_tune_test_faults);
 * plain values. */
typedef struct tc_tune_fault_plan {
	int n;
	int index[32];
	tc_tune_fault kind[32];
} tc_tune_fault_plan;

/* The evaluator of one tuning run.  Made in the parent before any fork;
 * children read it (copy-on-write) and never write its inputs.  It owns
 * entry, in_data, the shared mapping, ref, gen_medians and cands (and
 * their keys); m and set are borrowed from tc_autotune, and so are the
 * shapes, strides and data of in[] when the caller's inputs had data. */
struct tc_tune_eval {
	tc_module *m;
	char *entry;
	const tc_tune_settings *set;
	int n_in, n_out, workers;
	DLTensor in[TC_TUNE_MAX_TENSORS];
	const DLTensor *in_ptrs[TC_TUNE_MAX_TENSORS];
	int64_t in_shape[TC_TUNE_MAX_TENSORS][8];
	void *in_data[TC_TUNE_MAX_TENSORS]; /* owned (random inputs), or NULL */
	DLDataType out_dt[TC_TUNE_MAX_TENSORS];
	int out_nd[TC_TUNE_MAX_TENSORS];
	int64_t out_shape[TC_TUNE_MAX_TENSORS][8];
	size_t out_bytes[TC_TUNE_MAX_TENSORS], out_off[TC_TUNE_MAX_TENSORS], shared_bytes;
	unsigned char *shared; /* the checked run's outputs (MAP_SHARED) */
	unsigned char *ref;    /* the first correct candidate's outputs */
	double ref_scale[TC_TUNE_MAX_TENSORS]; /* mean |x| of each float output of ref */
	tc_tune_fault_plan faults;
	int device; /* where candidates run: kDLCPU, or kDLCUDA (tc_tune_eval_set_device) */
	/* test-only (TCOMP_TUNE_TEST_FITNESS, tc_tune_eval_new; or the master's
	 * word to a worker): every candidate is run and checked, but reports a
	 * time made from its options text, the same on every machine and run,
	 * and nothing is cut; so that runs can be compared candidate for
	 * candidate (the distributed search against one process) */
	int fake_fitness;
	int started, measured, failed, cut, stop;
	int generations, planned;
	double first_time, best, t_start;
	char first_failure[1024]; /* the first failed candidate's message, or "" */
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

/* Seconds on the monotonic clock. */
double tc_tune_now(void);
/* The median of v[0..n) (sorted in place); INFINITY when n is 0. */
double tc_tune_median(__tc_keep double *v, int n);
/* p rounded up to a multiple of TC_TUNE_ALIGN: a pointer into p's block
 * (allocated TC_TUNE_ALIGN bytes larger), not a block of its own. */
void *tc_tune_align(__tc_keep void *p);

/* ---- messages between a child and the parent ---- */

typedef enum tc_tune_msg_type {
	TC_TUNE_MSG_READY, /* child: compiled and pre-faulted, waiting for GO */
	TC_TUNE_MSG_DONE,  /* child: a result (status, times), or why it failed */
	TC_TUNE_MSG_GO,    /* parent: the timing token */
} tc_tune_msg_type;

/* A message (fixed size, over a stream socket). */
typedef struct tc_tune_msg {
	int type;   /* tc_tune_msg_type */
	int status; /* tc_tune_status (MSG_DONE) */
	int runs;
	int round;  /* MSG_GO of the final stage: the round, from 0 */
	int shift;  /* MSG_GO: bytes to move the stack down by while timing */
	double compile_s, median_s, min_s;
	double cutoff_s; /* MSG_GO: stop timing above this (0: none) */
	char text[512];
} tc_tune_msg;

/* Write message m whole to socket fd; a closed peer is -1, not SIGPIPE. */
tc_stat tc_tune_msg_send(int fd, __tc_keep const tc_tune_msg *m);
/* Read a whole message from fd into m, blocking; -1 at the end or an error. */
tc_stat tc_tune_msg_recv(int fd, __tc_keep tc_tune_msg *m);

/* ---- what the distributed search (dist.c) shares with the evaluator ---- */

/* Start a search candidate (key): its index in the run (the next), its
 * planted fault, and key remembered for the final stage.  -1 when out of
 * memory. */
tc_stat tc_tune_eval_start(__tc_keep tc_tune_eval *ev, const char *key, int *index,
	tc_tune_fault *fault);
/* Search candidate index (key) of generation gen is finished with status
 * st, m its result (NULL: none; median, min, runs, compile_s), text why it
 * failed: counted, recorded, reported to the progress callback (which may
 * ask to stop: ev->stop); *time its fitness (INFINITY unless OK or CUT). */
void tc_tune_eval_account(__tc_keep tc_tune_eval *ev, int gen, int index, const char *key,
	tc_tune_status st, __tc_keep const tc_tune_msg *m, const char *text, double *time);
/* tc_tune_eval_measure with the candidates' indexes and planted faults
 * given (NULL, NULL: started here, tc_tune_eval_start): a worker measures
 * what its master started. */
int tc_tune_eval_measure_at(__tc_keep tc_tune_eval *ev, int gen, int n,
	__tc_keep tc_options *const *options, __tc_keep char *const *keys,
	__tc_keep const int *indexes, __tc_keep const tc_tune_fault *faults,
	__tc_keep double *times);
/* Make outputs (shared_bytes, laid out as the shared buffer) the
 * reference the candidates' results are checked against.  -1 when out of
 * memory (no reference). */
tc_stat tc_tune_eval_set_reference(__tc_keep tc_tune_eval *ev, __tc_keep const void *outputs);
/* The fitness a fake-fitness candidate with options text key reports. */
double tc_tune_fake_time(const char *key);

/* ---- the child side (eval_child.c) ---- */

/* The forked child of a candidate, talking on socket fd: compile options
 * o, say READY, then on GO check and time the kernel and send DONE; for
 * the search (final 0) once, with planted fault; for the final stage
 * (final 1) once per GO until the parent closes the socket.  Never
 * returns; the child _exits (no atexit handlers, no flushing or leak
 * check of the parent's state). */
void tc_tune_child_main(__tc_keep tc_tune_eval *ev, int fd, __tc_keep const tc_options *o,
	tc_tune_fault fault, int final) __attribute__((noreturn));

/* ---- the slots (eval_slots.c) ---- */

/* Where a slot's child is.  A slot goes IDLE -> COMPILING (spawned) ->
 * READY (its READY message) -> TIMING (GO sent) -> READY (its DONE
 * message: the token is back) -> TIMING ... and ends DONE (ended by its
 * caller: killed if alive, reaped, socket closed) from any state. */
typedef enum tc_tune_slot_state {
	TC_TUNE_SLOT_IDLE,      /* no child yet */
	TC_TUNE_SLOT_COMPILING, /* forked; deadline compile_timeout_s from the fork */
	TC_TUNE_SLOT_READY,     /* compiled, waiting for GO; no deadline */
	TC_TUNE_SLOT_TIMING,    /* has the token; deadline and budget from GO */
	TC_TUNE_SLOT_DONE,      /* no child any more */
} tc_tune_slot_state;

/* One child. */
typedef struct tc_tune_slot {
	tc_tune_slot_state state;
	pid_t pid;     /* 0 once reaped */
	int fd;        /* the parent's end of its socket; -1 when closed */
	int index;     /* the caller's: the candidate's index in the run */
	double limit;  /* seconds from spawn or GO to deadline (for the message) */
	double deadline;
	double go_time;
	double budget; /* timing: past this, the candidate is far slower than the best */
	tc_tune_msg m; /* the last message (whole once an event says so) */
	size_t got;    /* bytes of the next message read so far */
} tc_tune_slot;

/* What happened to a slot (tc_tune_slots_event). */
typedef enum tc_tune_slot_what {
	TC_TUNE_SLOT_MESSAGE, /* a whole message, in the slot's m; a READY
	                       * while compiling made it READY, a DONE while
	                       * timing made it READY again */
	TC_TUNE_SLOT_DIED,    /* its socket closed without a (whole) message:
	                       * the child is reaped (pid 0); text says how */
	TC_TUNE_SLOT_LATE,    /* past its deadline: killed; text says what took
	                       * longer than what */
	TC_TUNE_SLOT_SLOW,    /* timing past its budget, before its deadline:
	                       * killed; elapsed_s since GO */
} tc_tune_slot_what;

/* An event of tc_tune_slots_event. */
typedef struct tc_tune_slot_event {
	int i; /* the slot */
	tc_tune_slot_what what;
	double elapsed_s; /* SLOW: seconds since GO */
	char text[700];   /* DIED, LATE */
} tc_tune_slot_event;

/* The children of one call of measure or retime, in slots 0..n-1, and the
 * last poll of their sockets.  The slots drive children; their callers
 * decide whom to spawn, whom to hand GO and what events mean. */
typedef struct tc_tune_slots {
	tc_tune_eval *ev; /* borrowed */
	int n;
	tc_tune_slot *sl;
	/* watch READY children too: the search does, so a child that dies
	 * while waiting for the token is recorded at once; the final stage
	 * looks at a waiting child only when it hands it the token */
	int watch_ready;
	sig_atomic_t stop0; /* stopped: the stop flag differs from this */
	const char *timing_what; /* static: what took too long while timing */
	struct pollfd *pf;  /* the last poll: np sockets, of slots pi[] */
	int *pi;
	int np, cur;        /* cur: the next of them for tc_tune_slots_event */
	double now;         /* the clock after the last poll */
} tc_tune_slots;

/* Set S up with n IDLE slots for ev's children; watch_ready, stop0 and
 * timing_what (static) as in tc_tune_slots.  S keeps ev and timing_what
 * (borrowed: they must outlive S).  -1 when out of memory (error in ev's
 * context; nothing to clear). */
tc_stat tc_tune_slots_init(__tc_keep tc_tune_slots *S, __tc_keep tc_tune_eval *ev, int n,
	int watch_ready, sig_atomic_t stop0, __tc_keep const char *timing_what);
/* Kill and reap every child still in S, close the sockets, free S's arrays
 * (S itself is the caller's). */
void tc_tune_slots_clear(__tc_keep tc_tune_slots *S);
/* Has the run been asked to stop: the progress callback returned non-zero
 * (ev->stop), or the settings' stop flag differs from stop0? */
int tc_tune_slots_stopped(__tc_keep const tc_tune_slots *S);
/* Fork the child of candidate index (options o, planted fault; of the
 * final stage if final) into IDLE slot i: COMPILING.  -1 (errno set) if it
 * could not start; the slot stays IDLE. */
tc_stat tc_tune_slots_spawn(__tc_keep tc_tune_slots *S, int i, __tc_keep const tc_options *o,
	int index, tc_tune_fault fault, int final);
/* Hand READY slot i the token: go (its type set here) with a deadline
 * limit seconds and a budget budget seconds (INFINITY: none) from now:
 * TIMING.  -1 if the child is gone: reaped, why in text; the caller ends
 * the slot. */
tc_stat tc_tune_slots_go(__tc_keep tc_tune_slots *S, int i, __tc_keep tc_tune_msg *go,
	double limit, double budget, __tc_keep char *text, size_t len);
/* Poll the watched children (COMPILING, TIMING, and READY if
 * watch_ready) for at most 100 ms, less when a deadline comes sooner.
 * Nothing watched: returns at once.  -1 if poll failed (error in ev's
 * context). */
tc_stat tc_tune_slots_poll(__tc_keep tc_tune_slots *S);
/* The next event of the last poll, in slot order: 1 with *e filled, 0
 * when there is none left. */
int tc_tune_slots_event(__tc_keep tc_tune_slots *S, __tc_keep tc_tune_slot_event *e);
/* Slot i is finished with: its child killed if alive and reaped, its
 * socket closed: DONE. */
void tc_tune_slots_end(__tc_keep tc_tune_slots *S, int i);

#endif
