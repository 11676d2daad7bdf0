/* The autotuner's internals: the option space (space.c), the genetic search
 * (tune.c) and the isolated evaluation of candidates (eval.c, eval_slots.c,
 * eval_child.c; their internals in eval.h).  The public
 * entry point is tc_autotune in include/tcomp.h; autotune/README.md gives
 * the design.  Exposed here for the tests (tests/test_tune.c), which drive
 * the search with a fake fitness.
 *
 * Ownership: spaces, evaluators, options and keys made here are the
 * caller's (their _free, tc_options_free, tc_free); a result struct is the
 * caller's and owns its genomes (tc_tune_result_clear).  Arrays passed in
 * (genomes, options, keys, times) are borrowed for the call; the PRNG is a
 * plain value the caller keeps. */
#ifndef TC_TUNE_H
#define TC_TUNE_H

#include "tcomp.h"

#include "../lang/util.h"

#include <stdint.h>

/* ---- a small PRNG (splitmix64): the search's choices depend on the seed
 * alone, never on rand() or the clock ---- */
typedef struct tc_tune_rng {
	uint64_t s;
} tc_tune_rng;

/* Start r from seed. */
void tc_tune_rng_seed(tc_tune_rng *r, uint64_t seed);
/* The next 64 random bits of r. */
uint64_t tc_tune_rng_next(tc_tune_rng *r);
/* Uniform in [0, n) for n >= 1. */
int64_t tc_tune_rng_below(tc_tune_rng *r, int64_t n);
/* Uniform in [0, 1). */
double tc_tune_rng_unit(tc_tune_rng *r);

/* ---- the option space ---- */

#define TC_TUNE_MAX_POS 16 /* positions of a generated list value (TC_OPT_LIST_MAX) */

/* The candidate values of one option (one row of the option table).  A
 * value is named by an index v in [0, count):
 *   v < nwords                   words[v]                ("auto", "on", and
 *                                interchange's orders "2,0,1")
 *   v < nwords + ngen            a generated value: with npos positions,
 *                                the mixed-radix digits of v - nwords pick
 *                                sizes[p][digit] for each position p and
 *                                the value is their comma-separated list
 *   otherwise                    extra[v - nwords - ngen] (a seed's or the
 *                                fixed value outside the generated set)
 * A fixed option has count 1 (its one value in extra). */
typedef struct tc_tune_dim {
	/* words, extra (and their strings) and sizes are owned by the space */
	int row;          /* row of the option table */
	const char *name; /* static */
	int searched;
	int nwords;
	char **words;
	int npos;
	int nsizes[TC_TUNE_MAX_POS];
	int64_t *sizes[TC_TUNE_MAX_POS];
	int64_t ngen; /* product of nsizes (0 when npos is 0) */
	int nextra;
	char **extra;
	int64_t count;
	double first; /* random genomes draw value 0 with this probability, the
		       * others uniformly (0: all uniformly) */
} tc_tune_dim;

/* What the generators of tile, regtile and threads need to know about the
 * kernel and the host. */
typedef struct tc_tune_shape {
	int depth;      /* loops of the deepest statement: positions of tile */
	int64_t extent; /* largest extent of any dimension of any input or output */
	int lanes;      /* elements of the output in one vector register (16 for float32) */
	int ncpu;       /* CPUs this process may run on (tc_rt_cpus) */
} tc_tune_shape;

/* The option space: one dim per option, in table order. */
typedef struct tc_tune_space {
	int n;
	tc_tune_dim *d;
} tc_tune_space;

/* The space for base options (NULL: defaults) and a kernel's shape: options
 * base sets explicitly, target and contract are fixed at base's values; the
 * others are searched with the generators of tcomp.h's autotuner section.
 * NULL when out of memory. */
__tc_give tc_tune_space *tc_tune_space_new(__tc_keep const tc_options *base,
	const tc_tune_shape *shape);
void tc_tune_space_free(__tc_take tc_tune_space *s);
/* Append the text of value v of dim i to b. */
void tc_tune_space_value(__tc_keep const tc_tune_space *s, int i, int64_t v, __tc_keep tc_buf *b);
/* The options of genome g (one value index per dim); NULL when out of memory. */
__tc_give tc_options *tc_tune_space_options(__tc_keep const tc_tune_space *s,
	__tc_keep const int64_t *g);
/* The canonical text of genome g (tc_options_print): the memo key; NULL
 * when out of memory. */
__tc_give char *tc_tune_space_key(__tc_keep const tc_tune_space *s, __tc_keep const int64_t *g);
/* The genome of options o (NULL: defaults), fixed dims at their value; a
 * value outside a dim's set is added to its extra values.  -1 when out of
 * memory. */
tc_stat tc_tune_space_genome(__tc_keep tc_tune_space *s, __tc_keep const tc_options *o,
	__tc_keep int64_t *g);
/* A random genome: each searched option's value uniformly, but value 0
 * with probability first where a dim sets it (interchange's auto). */
void tc_tune_space_random(__tc_keep const tc_tune_space *s, tc_tune_rng *r,
	__tc_keep int64_t *g);

/* ---- the genetic operators (one genome = s->n value indices) ---- */

/* Uniform crossover: each searched option from a or b with even odds. */
void tc_tune_crossover(__tc_keep const tc_tune_space *s, tc_tune_rng *r,
	__tc_keep const int64_t *a, __tc_keep const int64_t *b, __tc_keep int64_t *child);
/* Redraw each searched option that has another value with probability
 * rate, to a different value chosen uniformly. */
void tc_tune_mutate(__tc_keep const tc_tune_space *s, tc_tune_rng *r, __tc_keep int64_t *g,
	double rate);
/* Tournament selection: the fittest (smallest time; ties to the earlier)
 * of size individuals drawn uniformly with replacement from times[0..n). */
int tc_tune_select(tc_tune_rng *r, __tc_keep const double *times, int n, int size);

/* ---- the search ---- */

/* Measure n new configurations (options[i], keys[i] their canonical text,
 * all distinct and never measured before in the run) of generation gen:
 * times[i] = the fitness (median seconds; INFINITY for a failed one).
 * Returns 0, or 1 to stop the search (the times written so far count; the
 * others must be INFINITY), or -1 on an error that ends the run. */
typedef int (*tc_tune_measure_fn)(void *user, int gen, int n,
	__tc_keep tc_options *const *options, __tc_keep char *const *keys, __tc_keep double *times);

/* A search's settings and hooks; the genetic parameters are those of
 * tc_tune_settings.  Everything in it is the caller's, borrowed by the
 * search. */
typedef struct tc_tune_search {
	int generations, population, elites, tournament;
	double mutation_rate;
	uint64_t seed;
	int64_t **seeds; /* starting genomes (the base first), nseeds of them */
	int nseeds;
	int keep;        /* how many best distinct correct genomes to return in top */
	tc_tune_measure_fn measure;
	void *user;
	/* for the tests: called with each generation's population once it is
	 * measured (keys[i], times[i]) */
	void (*on_generation)(void *user, int gen, int n, char *const *keys, const double *times);
} tc_tune_search;

/* The outcome of tc_tune_search_run. */
typedef struct tc_tune_result {
	int64_t *best;     /* the best genome (owned; NULL if none was correct) */
	double best_time;  /* INFINITY if none */
	int measured;      /* configurations measured */
	int generations;   /* generations completed */
	int stopped;
	/* the keep best distinct configurations with a finite time, best first
	 * (ties: the one measured first); ntop of them, each genome owned */
	int64_t **top;
	double *top_time;
	int ntop;
} tc_tune_result;

/* Free what res owns (best, top). */
void tc_tune_result_clear(__tc_keep tc_tune_result *res);

/* Run the genetic search over s.  Generation 0 is the seeds (duplicates
 * dropped) filled up with random genomes; each next generation is the
 * elites plus children of tournament-selected parents (crossover, then
 * mutation) and replaces the previous one.  Every configuration is
 * measured once: a memo of canonical options texts gives the time of one
 * seen before, and children already measured or already in the generation
 * are drawn again (a bounded number of times).  0 ok (res filled: what it
 * owns is the caller's, freed with tc_tune_result_clear), -1 error (out of
 * memory, measure failed; res left empty). */
tc_stat tc_tune_search_run(__tc_keep tc_tune_space *s, __tc_keep const tc_tune_search *p,
	__tc_keep tc_tune_result *res);

/* ---- the final stage (tune.c) ---- */

/* What the final stage measured of one configuration. */
typedef struct tc_tune_retimed {
	tc_tune_status status; /* TC_TUNE_OK, or why it failed (then no time counts) */
	char message[256];
	double min_s;          /* fastest timed run of all rounds */
	int runs;              /* timed runs of all rounds */
	double compile_s;
	int index;             /* the configuration's index in the search (-1: unknown) */
} tc_tune_retimed;

/* Re-time n configurations (options[i], keys[i]) round robin, rounds
 * rounds: rt[r * n + i] = the median seconds of configuration i in round r
 * (INFINITY once it failed); out[i] the rest.  Returns 0, 1 when stopped
 * (the caller then ignores rt), -1 on an error that ends the run. */
typedef int (*tc_tune_retime_fn)(void *user, int n, __tc_keep tc_options *const *options,
	__tc_keep char *const *keys, int rounds, __tc_keep double *rt,
	__tc_keep tc_tune_retimed *out);

/* The final stage's settings (see tc_tune_settings.final_*). */
typedef struct tc_tune_final {
	int rounds;
	double margin;
	tc_tune_retime_fn retime;
	void *user;
} tc_tune_final;

/* Re-time n configurations (n >= 1), base the index of the base options
 * among them (-1: not among them), and choose: median[i] = the median of
 * i's round medians (INFINITY if it failed); *winner = the one with the
 * least median, unless base is among them and the winner is not faster
 * than it by more than margin (median < (1 - margin) x base's) and in more
 * than half of the rounds: then base, and *base_won = 1 (also when base
 * has the least median).  *winner = -1 when none succeeded.  Returns what
 * retime returns (0, 1 stopped: winner and medians unset, -1). */
int tc_tune_final_run(__tc_keep const tc_tune_final *f, int n,
	__tc_keep tc_options *const *options, __tc_keep char *const *keys, int base,
	__tc_keep double *median, __tc_keep tc_tune_retimed *out, int *winner, int *base_won);

/* ---- evaluation in child processes (eval.c; eval.h has the rest) ---- */

/* Faults the tests plant in candidates (test-only). */
typedef enum tc_tune_fault {
	TC_TUNE_FAULT_NONE,
	TC_TUNE_FAULT_CRASH, /* the child kills itself with SIGSEGV before its first run */
	TC_TUNE_FAULT_HANG,  /* the child sleeps forever instead of running */
	TC_TUNE_FAULT_WRONG, /* the child changes one element of its result */
	TC_TUNE_FAULT_DECOY, /* the child reports a thousandth of its times in the
	                        search, and sleeps 2 ms in every timed run of the
	                        final stage: fastest in the search, slow after */
} tc_tune_fault;

/* Test-only: plant faults in the candidates of the next tc_autotune runs by
 * their index (the order in which candidates are started, from 0):
 * "1:crash,2:hang,3:wrong,4:decoy".  NULL clears.  A decoy stays one in the
 * final stage (its configuration's re-timing sleeps); the other faults
 * only hit the search's children.  The environment variable
 * TCOMP_TUNE_TEST_FAULTS (same syntax, also test-only) is read when no spec
 * is set this way, so the CLI's tests can plant faults too.  -1 for a
 * malformed spec. */
tc_stat tc_tune_test_faults(const char *spec);

typedef struct tc_tune_eval tc_tune_eval;

/* Append "warning: " and the printf-formatted text as a line to ctx's
 * warnings (tc_context_warnings); out of memory: nothing. */
void tc_tune_warn(__tc_keep tc_context *ctx, const char *fmt, ...) TC_PRINTF(2, 3);

/* Seeds tc_autotune takes from the kernel cache: this key's and the
 * nearest shapes' (tune.c; and a batch's jobs on other ranks, dist.c). */
#define TC_TUNE_CACHE_SEEDS 4

/* ---- distributed evaluation (dist.c; tc_tune_settings.transport) ---- */

/* One tc_autotune's use of a transport (rank 0): its evaluator, and the
 * module and entry the ranks are set up with. */
typedef struct tc_tune_dist {
	tc_tune_transport *t;
	tc_tune_eval *ev;
	tc_module *m;
	const char *entry;
	unsigned kernel; /* the run's number for the ranks (0: not set up yet) */
} tc_tune_dist;
/* The measure function of a distributed search (user = a tc_tune_dist):
 * the first correct candidate runs here, the others on the ranks. */
int tc_tune_dist_measure(__tc_keep void *user, int gen, int n,
	__tc_keep tc_options *const *options, __tc_keep char *const *keys, __tc_keep double *times);

/* ---- the GPU probe (probe.c) ---- */

struct tc_rt_backend; /* runtime/backend.h */
/* Learn in a short-lived child process what the tuner needs of the device
 * of backend b (target=cuda), so that this process never opens the CUDA
 * driver (it does not survive fork): *key_target gets the kernel cache
 * key's machine part ("cuda;GPU name;sm_XY;driver N", the caller's) and
 * *arch the compute capability (90 for sm_90).  -1 with the driver's
 * reason in ctx ("target=cuda: no CUDA driver: libcuda.so.1 not found
 * (...)"), or the probe's failure (it died, or hung for 30 s). */
tc_stat tc_tune_probe_device(__tc_keep tc_context *ctx, __tc_keep const struct tc_rt_backend *b,
	__tc_give char **key_target, int *arch);
/* Make ev's candidates run on device type dev (kDLCUDA: each child
 * copies the inputs to device memory and the checked run's outputs back,
 * and times with CUDA events; eval_child.c).  Default kDLCPU. */
void tc_tune_eval_set_device(__tc_keep tc_tune_eval *ev, int dev);

/* An evaluator for entry of m at the inputs' shapes: makes random inputs
 * when the inputs have no data, else uses the given ones, and the shared
 * result buffer.  m, settings and inputs with data are borrowed and must
 * outlive the evaluator (it keeps their pointers: the inputs' shapes,
 * strides and data are not copied); entry is copied.  NULL with an error
 * in m's context. */
__tc_give tc_tune_eval *tc_tune_eval_new(__tc_keep tc_module *m, const char *entry,
	__tc_keep const DLTensor *const *inputs, int n_inputs,
	__tc_keep const tc_tune_settings *settings);
/* Free ev, its inputs and buffers (NULL: nothing). */
void tc_tune_eval_free(__tc_take tc_tune_eval *ev);
/* The measure function of a search over ev (user = ev). */
int tc_tune_eval_measure(__tc_keep void *user, int gen, int n,
	__tc_keep tc_options *const *options, __tc_keep char *const *keys, __tc_keep double *times);
/* The retime function of the final stage over ev (user = ev): one child
 * per configuration, compiled once and kept; its first round checks the
 * result against the search's reference. */
int tc_tune_eval_retime(__tc_keep void *user, int n, __tc_keep tc_options *const *options,
	__tc_keep char *const *keys, int rounds, __tc_keep double *rt,
	__tc_keep tc_tune_retimed *out);
/* The evaluator's counts: measured, failed, cut; set its planned
 * generations and total for ETAs. */
void tc_tune_eval_counts(__tc_keep const tc_tune_eval *ev, int *measured, int *failed, int *cut);
void tc_tune_eval_plan(__tc_keep tc_tune_eval *ev, int generations, int planned);
/* The median time of the first candidate (the base options; INFINITY if
 * it failed or was not measured). */
double tc_tune_eval_first_time(__tc_keep const tc_tune_eval *ev);
/* The message of the first candidate that failed ("" if none did or it
 * said nothing), borrowed from ev. */
const char *tc_tune_eval_first_failure(__tc_keep const tc_tune_eval *ev);
/* Output extents and dtype of the kernel, for the space (after _new). */
void tc_tune_eval_shape(__tc_keep const tc_tune_eval *ev, int64_t *extent, int *lanes);

#endif
