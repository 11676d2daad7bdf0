/* The autotuner's genetic search and its public entry point tc_autotune.
 *
 * A generation is a population of genomes (one value index per option of
 * the space, space.c).  Generation 0 is the seeds (the base options first,
 * then the caller's and the cache's) filled up alternately with mutants of
 * the seeds (each option redrawn with probability SEED_MUTATION) and
 * uniformly random genomes: most random configurations of a big space are
 * far slower than the defaults, and the mutants explore near them.  Each
 * later generation is built from scratch: the elites (the best few, carried
 * over unchanged) and children, each made by uniform crossover of two
 * parents chosen by tournament and then mutated; the children replace the
 * previous generation (unlike Tensor Comprehensions' tuner, which only
 * refilled the slots of dropped candidates).  A memo of canonical options
 * texts (tc_options_print) makes sure no configuration is compiled or timed
 * twice in a run: a child that is already in the memo or in the new
 * generation is drawn again, up to MAX_REDRAWS times, after which a
 * memoised child is kept (it costs nothing) and a duplicate one dropped. */
#include "tune.h"

#include "../runtime/cache_ops.h"
#include "../runtime/backend.h"
#include "../runtime/internal.h"
#include "../runtime/module.h"
#include "../runtime/options.h"
#include "../runtime/pool.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_REDRAWS 20
/* Limits of the settings (include/tcomp.h, docs/language.md section 12):
 * a generation's members are compiled and timed one by one, so a larger
 * population only exhausts memory and time before anything is measured
 * (100,000,000 took 4.8 GB); 10,000 candidates take hours already. */
#define TC_TUNE_MAX_POPULATION 10000
#define TC_TUNE_MAX_GENERATIONS 10000
#define TC_TUNE_MAX_TOURNAMENT 10000 /* draws per selection */
#define STR_(x) #x
#define TC_STR(x) STR_(x)
#define SEED_MUTATION 0.3 /* mutation rate of the seeds' mutants in generation 0 */

/* ---- the memo: canonical options text -> time ---- */

typedef struct memo_entry {
	uint64_t h;
	char *key;
	double time;
} memo_entry;

typedef struct memo {
	memo_entry *e;
	int n, cap;
} memo;

static uint64_t key_hash(const char *k)
{
	return tc_hash_bytes(TC_HASH_INIT, k, strlen(k));
}

static int memo_find(const memo *m, const char *key)
{
	uint64_t h = key_hash(key);
	int i;
	for (i = 0; i < m->n; i++)
		if (m->e[i].h == h && !strcmp(m->e[i].key, key))
			return i;
	return -1;
}

static tc_stat memo_add(memo *m, const char *key, double time)
{
	if (m->n == m->cap) {
		int cap = m->cap * 2 + 64;
		memo_entry *e = tc_realloc(m->e, (size_t)cap * sizeof(memo_entry));
		if (!e)
			return TC_ERR;
		m->e = e;
		m->cap = cap;
	}
	if (!(m->e[m->n].key = tc_strdup(key)))
		return TC_ERR;
	m->e[m->n].h = key_hash(key);
	m->e[m->n].time = time;
	m->n++;
	return TC_OK;
}

static void memo_free(memo *m)
{
	int i;
	for (i = 0; i < m->n; i++)
		tc_free(m->e[i].key);
	tc_free(m->e);
}

/* ---- a population ---- */

typedef struct popu {
	int n;
	int64_t **g; /* genomes, room for the population */
	char **key;
	double *time;
} popu;

/* Room for size members; their genomes are allocated as they are added
 * (popu_add), so a population the search cannot fill costs little. */
static tc_stat popu_init(popu *p, int size)
{
	memset(p, 0, sizeof(*p));
	p->g = tc_calloc((size_t)size, sizeof(int64_t *));
	p->key = tc_calloc((size_t)size, sizeof(char *));
	p->time = tc_calloc((size_t)size, sizeof(double));
	if (!p->g || !p->key || !p->time)
		return TC_ERR;
	return TC_OK;
}

static void popu_clear(popu *p)
{
	int i;
	for (i = 0; i < p->n; i++) {
		tc_free(p->key[i]);
		p->key[i] = NULL;
	}
	p->n = 0;
}

static void popu_free(popu *p, int size)
{
	int i;
	popu_clear(p);
	for (i = 0; p->g && i < size; i++)
		tc_free(p->g[i]);
	tc_free(p->g);
	tc_free(p->key);
	tc_free(p->time);
}

static int popu_has(const popu *p, const char *key)
{
	int i;
	for (i = 0; i < p->n; i++)
		if (!strcmp(p->key[i], key))
			return 1;
	return 0;
}

/* Add genome g with key (taken) to p. */
static tc_stat popu_add(popu *p, int nopts, const int64_t *g, __tc_take char *key)
{
	if (!p->g[p->n] && !(p->g[p->n] = tc_calloc((size_t)nopts + 1, sizeof(int64_t)))) {
		tc_free(key);
		return TC_ERR;
	}
	memcpy(p->g[p->n], g, (size_t)nopts * sizeof(int64_t));
	p->key[p->n] = key;
	p->time[p->n] = INFINITY;
	p->n++;
	return TC_OK;
}

/* Measure the members of p not in the memo, then give every member its
 * time.  0 ok, 1 stop requested, -1 error. */
static int measure_generation(const tc_tune_space *s, const tc_tune_search *sp, int gen, popu *p,
	memo *mm)
{
	tc_options **opts = tc_calloc((size_t)p->n + 1, sizeof(tc_options *));
	char **keys = tc_calloc((size_t)p->n + 1, sizeof(char *));
	double *times = tc_calloc((size_t)p->n + 1, sizeof(double));
	int i, n = 0, rc = -1, j;
	if (!opts || !keys || !times)
		goto done;
	for (i = 0; i < p->n; i++)
		if (memo_find(mm, p->key[i]) < 0) {
			if (!(opts[n] = tc_tune_space_options(s, p->g[i])))
				goto done;
			keys[n++] = p->key[i];
		}
	for (i = 0; i < n; i++)
		times[i] = NAN;
	rc = n ? sp->measure(sp->user, gen, n, opts, keys, times) : 0;
	if (rc < 0)
		goto done;
	for (i = 0; i < n; i++)
		if (!isnan(times[i]) && memo_add(mm, keys[i], times[i]) < 0) {
			rc = -1;
			goto done;
		}
	for (i = 0; i < p->n; i++) {
		j = memo_find(mm, p->key[i]);
		p->time[i] = j >= 0 ? mm->e[j].time : INFINITY;
	}
done:
	for (i = 0; opts && i < n; i++)
		tc_options_free(opts[i]);
	tc_free(opts);
	tc_free(keys);
	tc_free(times);
	return rc;
}

/* Indices of p sorted by time (stable). */
static int *rank(const popu *p)
{
	int *order = tc_malloc((size_t)(p->n + 1) * sizeof(int)), i, j;
	if (!order)
		return NULL;
	for (i = 0; i < p->n; i++) { /* insertion sort: populations are small */
		int x = i;
		for (j = i; j > 0 && p->time[order[j - 1]] > p->time[x]; j--)
			order[j] = order[j - 1];
		order[j] = x;
	}
	return order;
}

/* Build the next generation from cur into next. */
static tc_stat breed(const tc_tune_space *s, const tc_tune_search *sp, tc_tune_rng *r,
	const popu *cur, popu *next, const memo *mm, int64_t *child)
{
	int *order = rank(cur), k, tries = 0, redraws = 0;
	if (!order)
		return TC_ERR;
	popu_clear(next);
	for (k = 0; k < sp->elites && k < cur->n && isfinite(cur->time[order[k]]); k++) {
		char *key = tc_strdup(cur->key[order[k]]);
		if (!key) {
			tc_free(order);
			return TC_ERR;
		}
		if (popu_add(next, s->n, cur->g[order[k]], key) < 0) {
			tc_free(order);
			return TC_ERR;
		}
		next->time[next->n - 1] = cur->time[order[k]];
	}
	tc_free(order);
	while (next->n < sp->population && tries++ < 50 * sp->population) {
		int a = tc_tune_select(r, cur->time, cur->n, sp->tournament);
		int b = tc_tune_select(r, cur->time, cur->n, sp->tournament);
		char *key;
		tc_tune_crossover(s, r, cur->g[a], cur->g[b], child);
		tc_tune_mutate(s, r, child, sp->mutation_rate);
		if (!(key = tc_tune_space_key(s, child)))
			return TC_ERR;
		if (popu_has(next, key) || (memo_find(mm, key) >= 0 && redraws < MAX_REDRAWS)) {
			redraws++;
			tc_free(key);
			continue;
		}
		if (popu_add(next, s->n, child, key) < 0)
			return TC_ERR;
		redraws = 0;
	}
	return TC_OK;
}

/* Offer member i of p to res's top list (the sp->keep best distinct
 * configurations with a finite time, best first; keys are its texts). */
static tc_stat top_offer(const tc_tune_space *s, int keep, const popu *p, int i,
	tc_tune_result *res, char **keys)
{
	int j, at;
	if (!isfinite(p->time[i]) || keep <= 0)
		return TC_OK;
	for (j = 0; j < res->ntop; j++)
		if (!strcmp(keys[j], p->key[i]))
			return TC_OK;
	for (at = res->ntop; at > 0 && res->top_time[at - 1] > p->time[i]; at--)
		;
	if (at == keep)
		return TC_OK;
	if (res->ntop == keep) { /* drop the last */
		res->ntop--;
		tc_free(res->top[res->ntop]);
		tc_free(keys[res->ntop]);
	}
	memmove(&res->top[at + 1], &res->top[at], (size_t)(res->ntop - at) * sizeof(int64_t *));
	memmove(&res->top_time[at + 1], &res->top_time[at], (size_t)(res->ntop - at) * sizeof(double));
	memmove(&keys[at + 1], &keys[at], (size_t)(res->ntop - at) * sizeof(char *));
	res->top[at] = tc_malloc(((size_t)s->n + 1) * sizeof(int64_t));
	keys[at] = tc_strdup(p->key[i]);
	res->top_time[at] = p->time[i];
	res->ntop++;
	if (!res->top[at] || !keys[at])
		return TC_ERR; /* the caller clears res (and keys) */
	memcpy(res->top[at], p->g[i], (size_t)s->n * sizeof(int64_t));
	return TC_OK;
}

void tc_tune_result_clear(__tc_keep tc_tune_result *res)
{
	int i;
	for (i = 0; i < res->ntop; i++)
		tc_free(res->top[i]);
	tc_free(res->top);
	tc_free(res->top_time);
	tc_free(res->best);
	res->top = NULL;
	res->top_time = NULL;
	res->best = NULL;
	res->ntop = 0;
}

tc_stat tc_tune_search_run(__tc_keep tc_tune_space *s, __tc_keep const tc_tune_search *sp,
	__tc_keep tc_tune_result *res)
{
	popu pa = {0}, pb = {0}, *cur = &pa, *next = &pb; /* zeroed: popu_free of either is safe */
	memo mm = {0};
	char **top_keys = NULL;
	tc_tune_rng r;
	int64_t *child = NULL;
	int i, gen, tries = 0, rc, size = sp->population > 0 ? sp->population : 1;
	tc_stat st = TC_ERR;
	memset(res, 0, sizeof(*res));
	res->best_time = INFINITY;
	tc_tune_rng_seed(&r, sp->seed);
	if (popu_init(&pa, size) < 0 || popu_init(&pb, size) < 0 ||
		!(child = tc_calloc((size_t)s->n + 1, sizeof(int64_t))))
		goto done;
	if (sp->keep > 0 && (!(res->top = tc_calloc((size_t)sp->keep, sizeof(int64_t *))) ||
		!(res->top_time = tc_calloc((size_t)sp->keep, sizeof(double))) ||
		!(top_keys = tc_calloc((size_t)sp->keep, sizeof(char *)))))
		goto done;
	/* generation 0: the seeds, then random genomes */
	for (i = 0; i < sp->nseeds && cur->n < size; i++) {
		char *key = tc_tune_space_key(s, sp->seeds[i]);
		if (!key)
			goto done;
		if (popu_has(cur, key))
			tc_free(key);
		else if (popu_add(cur, s->n, sp->seeds[i], key) < 0)
			goto done;
	}
	while (cur->n < size && tries++ < 50 * size) {
		char *key;
		/* every other one a mutant of a seed (local search around the
		 * defaults and the cache's best), the rest uniformly random */
		if (sp->nseeds && tries % 2) {
			memcpy(child, sp->seeds[(tries / 2) % sp->nseeds], (size_t)s->n * sizeof(int64_t));
			tc_tune_mutate(s, &r, child, SEED_MUTATION);
		} else {
			tc_tune_space_random(s, &r, child);
		}
		if (!(key = tc_tune_space_key(s, child)))
			goto done;
		if (popu_has(cur, key))
			tc_free(key);
		else if (popu_add(cur, s->n, child, key) < 0)
			goto done;
	}
	for (gen = 0; gen < sp->generations; gen++) {
		popu *t;
		rc = measure_generation(s, sp, gen, cur, &mm);
		if (rc < 0)
			goto done;
		for (i = 0; i < cur->n; i++) {
			if (cur->time[i] < res->best_time) {
				res->best_time = cur->time[i];
				if (!res->best && !(res->best = tc_calloc((size_t)s->n + 1, sizeof(int64_t))))
					goto done;
				memcpy(res->best, cur->g[i], (size_t)s->n * sizeof(int64_t));
			}
			if (top_offer(s, sp->keep, cur, i, res, top_keys) < 0)
				goto done;
		}
		if (sp->on_generation)
			sp->on_generation(sp->user, gen, cur->n, cur->key, cur->time);
		if (rc == 1) {
			res->stopped = 1;
			break;
		}
		res->generations = gen + 1;
		if (gen + 1 == sp->generations)
			break;
		if (breed(s, sp, &r, cur, next, &mm, child) < 0)
			goto done;
		t = cur; /* the children replace the population */
		cur = next;
		next = t;
	}
	res->measured = mm.n;
	st = TC_OK;
done:
	if (st < 0)
		tc_tune_result_clear(res);
	for (i = 0; top_keys && i < sp->keep; i++)
		tc_free(top_keys[i]);
	tc_free(top_keys);
	tc_free(child);
	popu_free(&pa, size);
	popu_free(&pb, size);
	memo_free(&mm);
	return st;
}

/* ---- the final stage ----
 *
 * The search times each configuration once, briefly (a warm-up run and a
 * few timed runs), in whatever state of the machine it meets, so its best
 * is partly luck: on a second look it may be no faster than the defaults,
 * or slower (docs/design.md tells how fcrelu 784 was).  The final stage
 * looks again at the few best and the base options, under the same
 * conditions for all: each in its own child, compiled once, timed in turn
 * over several rounds so that a change of machine load hits them alike. */

static int cmp_time(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int tc_tune_final_run(__tc_keep const tc_tune_final *f, int n, __tc_keep tc_options *const *options,
	__tc_keep char *const *keys, int base, __tc_keep double *median,
	__tc_keep tc_tune_retimed *out, int *winner, int *base_won)
{
	double *rt = tc_malloc(((size_t)n * (size_t)f->rounds + 1) * sizeof(double));
	double *v = tc_malloc(((size_t)f->rounds + 1) * sizeof(double));
	int i, r, rc = -1, w = -1, wins = 0;
	*winner = -1;
	*base_won = 0;
	if (!rt || !v)
		goto done;
	for (i = 0; i < n * f->rounds; i++)
		rt[i] = INFINITY;
	rc = f->retime(f->user, n, options, keys, f->rounds, rt, out);
	if (rc != 0)
		goto done;
	for (i = 0; i < n; i++) {
		int ok = out[i].status == TC_TUNE_OK;
		for (r = 0; r < f->rounds; r++) {
			v[r] = rt[r * n + i];
			ok &= isfinite(v[r]);
		}
		qsort(v, (size_t)f->rounds, sizeof(double), cmp_time);
		median[i] = !ok ? INFINITY : f->rounds % 2 ? v[f->rounds / 2]
			: (v[f->rounds / 2 - 1] + v[f->rounds / 2]) / 2;
		/* the least median; ties to the base, then to the earlier */
		if (isfinite(median[i]) && (w < 0 || median[i] < median[w] ||
			(median[i] == median[w] && i == base)))
			w = i;
	}
	if (w >= 0 && base >= 0 && w != base && isfinite(median[base])) {
		for (r = 0; r < f->rounds; r++)
			wins += rt[r * n + w] < rt[r * n + base];
		if (!(median[w] < (1 - f->margin) * median[base]) || 2 * wins <= f->rounds)
			w = base; /* not faster beyond the noise: keep the base */
	}
	*winner = w;
	*base_won = w >= 0 && w == base;
done:
	tc_free(rt);
	tc_free(v);
	return rc;
}

/* ---- tc_autotune ---- */

void tc_tune_settings_init(tc_tune_settings *s)
{
	if (!s)
		return; /* documented as a no-op */
	memset(s, 0, sizeof(*s));
	s->generations = 5;
	s->population = 20;
	s->elites = 2;
	s->mutation_rate = 0.15;
	s->tournament = 2;
	s->timeout_s = 10;
	s->compile_timeout_s = 120;
	s->warmup = 1;
	s->runs = 5;
	s->min_time_s = 0.1;
	s->cutoff = 3;
	s->final_candidates = 3;
	s->final_rounds = 5;
	s->final_time_s = 0.2;
	s->final_warmup_s = 0.5;
	s->final_margin = 0.02;
	s->use_cache = 1;
}

/* A message for settings out of range, or NULL. */
static const char *bad_settings(const tc_tune_settings *s)
{
	if (s->generations < 1 || s->generations > TC_TUNE_MAX_GENERATIONS)
		return "generations must be between 1 and " TC_STR(TC_TUNE_MAX_GENERATIONS);
	if (s->population < 1 || s->population > TC_TUNE_MAX_POPULATION)
		return "population must be between 1 and " TC_STR(TC_TUNE_MAX_POPULATION);
	if (s->elites < 0 || s->elites > s->population)
		return "elites must be between 0 and the population";
	if (!(s->mutation_rate >= 0 && s->mutation_rate <= 1))
		return "mutation_rate must be between 0 and 1";
	if (s->tournament < 1 || s->tournament > TC_TUNE_MAX_TOURNAMENT)
		return "tournament must be between 1 and " TC_STR(TC_TUNE_MAX_TOURNAMENT);
	if (s->threads < 0 || s->threads > 256)
		return "threads must be between 0 (one per CPU) and 256";
	if (!(s->timeout_s > 0) || !(s->compile_timeout_s > 0))
		return "timeouts must be positive";
	if (s->warmup < 0 || s->runs < 1 || !(s->min_time_s >= 0))
		return "warmup must be at least 0, runs at least 1 and min_time_s at least 0";
	if (!(s->cutoff >= 1))
		return "cutoff must be at least 1";
	if (s->final_candidates < 0 || s->final_candidates > 64)
		return "final_candidates must be between 0 (no final stage) and 64";
	if (s->final_rounds < 1 || s->final_rounds > 100)
		return "final_rounds must be between 1 and 100";
	if (!(s->final_time_s >= 0) || !(s->final_warmup_s >= 0) ||
		!(s->final_margin >= 0 && s->final_margin < 1))
		return "final_time_s and final_warmup_s must be at least 0 and final_margin in [0, 1)";
	if (s->n_seeds < 0 || (s->n_seeds > 0 && !s->seeds))
		return "n_seeds seeds are missing";
	if (s->transport && (s->transport->rank != 0 || s->transport->size < 1 ||
		!s->transport->send || !s->transport->recv))
		return "the transport must be rank 0's, with send and recv";
	return NULL;
}

/* Loops of the deepest statement of entry (the positions of tile). */
static int loop_depth(tc_module *m, const char *entry)
{
	int i = tc_rt_find_def(m, entry), j, depth = 1;
	const tc_ir_func *f = i >= 0 ? tc_rt_module_func(m, i) : NULL;
	for (j = 0; f && j < f->nstmts; j++)
		depth = f->stmts[j].nvars > depth ? f->stmts[j].nvars : depth;
	return depth;
}

/* Add the genome of options text (or o) to the seeds; invalid text is skipped. */
static tc_stat add_seed(tc_tune_space *s, tc_tune_search *sp, const tc_options *o,
	const char *text)
{
	tc_options *parsed = NULL;
	int64_t *g, **t;
	tc_stat st = TC_ERR;
	if (text) {
		if (!(parsed = tc_options_new()))
			return TC_ERR;
		if (tc_options_parse(parsed, text, NULL) < 0) {
			tc_options_free(parsed);
			return TC_OK;
		}
		o = parsed;
	}
	g = tc_calloc((size_t)s->n + 1, sizeof(int64_t));
	t = tc_realloc(sp->seeds, (size_t)(sp->nseeds + 1) * sizeof(int64_t *));
	if (t)
		sp->seeds = t;
	if (!g || !t || tc_tune_space_genome(s, o, g) < 0) {
		tc_free(g);
		goto done;
	}
	sp->seeds[sp->nseeds++] = g;
	st = TC_OK;
done:
	tc_options_free(parsed);
	return st;
}

/* ---- the kernel cache: seeds in, every candidate out ---- */

/* The run's link to the kernel cache and the caller's callbacks, which the
 * evaluator reaches through it. */
typedef struct tune_link {
	const tc_tune_settings *caller;
	tc_context *ctx;
	tc_cache *cache; /* NULL: none */
	tc_cache_key key;
	int have_key, warned;
	char run_id[64];
} tune_link;

static void link_record(void *user, const tc_tune_candidate *c)
{
	tune_link *l = user;
	if (l->cache && l->have_key) {
		tc_cache_run run;
		char id[80];
		/* final re-timings are marked, the choice as chosen: the cache's
		 * best of a key is its chosen run when it has one (runtime/cache.h) */
		snprintf(id, sizeof(id), "%s%s", l->run_id,
			c->chosen ? TC_CACHE_CHOSEN : c->final ? TC_CACHE_FINAL : "");
		run.options = c->options;
		run.median_ms = c->median_s * 1e3;
		run.min_ms = c->min_s * 1e3;
		run.run_id = id;
		/* a candidate stopped by the budget was never checked: not ok */
		run.ok = c->status == TC_TUNE_OK || (c->status == TC_TUNE_CUT && !*c->message);
		if (tc_cache_record(l->cache, &l->key, &run) < 0 && !l->warned) {
			tc_tune_warn(l->ctx, "kernel cache %s: cannot record a candidate: %s",
				tc_cache_path(l->cache), tc_cache_error(l->cache));
			l->warned = 1;
		}
	}
	if (l->caller->record)
		l->caller->record(l->caller->user, c);
}

static int link_progress(void *user, const tc_tune_progress *p)
{
	tune_link *l = user;
	return l->caller->progress ? l->caller->progress(l->caller->user, p) : 0;
}

/* Open the cache of settings (write mode) and make the key for the
 * target of base, its machine part gpu_key when not NULL (target=cuda: the
 * probe's); problems are warnings and leave the run without a cache. */
static void link_open(tune_link *l, tc_module *m, const char *entry, const DLTensor *const *inputs,
	int n_inputs, const tc_options *base, const char *gpu_key)
{
	char *msg = NULL;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(l->run_id, sizeof(l->run_id), "tune-%lld-%ld", (long long)ts.tv_sec,
		(long)getpid());
	if (!l->caller->use_cache)
		return;
	if (!(l->cache = tc_cache_open(l->caller->cache_path, TC_CACHE_WRITE, &msg))) {
		tc_tune_warn(l->ctx, "kernel cache not used: %s%s", msg ? msg : "cannot open it", "");
		tc_free(msg);
		return;
	}
	if (tc_cache_key_init_for(&l->key, m, entry, inputs, n_inputs, base, gpu_key) < 0) {
		tc_tune_warn(l->ctx, "kernel cache not used: %s%s", tc_context_error(l->ctx), "");
		tc_cache_close(l->cache);
		l->cache = NULL;
		return;
	}
	l->have_key = 1;
}

static void link_close(tune_link *l)
{
	if (l->have_key)
		tc_cache_key_clear(&l->key);
	tc_cache_close(l->cache);
}



/* tc_autotune's final stage over the search's result res: the base (genome
 * base_g, if the search measured it correct: it was the first candidate)
 * and the final_candidates best others (those within cutoff times the
 * base's search time) are re-timed (tc_tune_final_run
 * over the evaluator) and every re-timing is recorded through link.
 * *chosen = the genome to return (res->best when the stage is skipped,
 * stopped or found nothing correct); rep's final fields and times are
 * filled.  -1 when out of memory or the evaluator failed. */
static tc_stat final_stage(tc_tune_space *space, tc_tune_eval *ev, tune_link *link,
	const tc_tune_settings *set, const tc_tune_result *res, const int64_t *base_g,
	const int64_t **chosen, tc_tune_report *rep)
{
	int cap = set->final_candidates + 1, n = 0, i, base = -1, winner = -1, base_won = 0, rc;
	const int64_t **g = tc_calloc((size_t)cap, sizeof(int64_t *));
	tc_options **opts = tc_calloc((size_t)cap, sizeof(tc_options *));
	char **keys = tc_calloc((size_t)cap, sizeof(char *)), *base_key = NULL;
	double *median = tc_calloc((size_t)cap, sizeof(double));
	tc_tune_retimed *out = tc_calloc((size_t)cap, sizeof(tc_tune_retimed));
	tc_tune_final f;
	tc_stat st = TC_ERR;
	double base_time = tc_tune_eval_first_time(ev);
	*chosen = res->best;
	if (!g || !opts || !keys || !median || !out || !(base_key = tc_tune_space_key(space, base_g)))
		goto done;
	if (isfinite(base_time)) {
		base = n;
		g[n++] = base_g;
	}
	for (i = 0; i < res->ntop && n < cap; i++) {
		char *k;
		int same;
		/* cutoff times slower than the base (or, when the base failed, than
		 * the best: a fluke of the search may be far faster than the rest)
		 * is hopeless */
		if (res->top_time[i] > set->cutoff * (base >= 0 ? base_time : res->best_time))
			break;
		if (!(k = tc_tune_space_key(space, res->top[i])))
			goto done;
		same = !strcmp(k, base_key);
		tc_free(k);
		if (!same)
			g[n++] = res->top[i];
	}
	if (n < 2) { /* nothing to compare: the search's best stands */
		st = TC_OK;
		goto done;
	}
	for (i = 0; i < n; i++)
		if (!(opts[i] = tc_tune_space_options(space, g[i])) ||
			!(keys[i] = tc_tune_space_key(space, g[i])))
			goto done;
	f.rounds = set->final_rounds;
	f.margin = set->final_margin;
	f.retime = tc_tune_eval_retime;
	f.user = ev;
	rc = tc_tune_final_run(&f, n, opts, keys, base, median, out, &winner, &base_won);
	if (rc < 0)
		goto done;
	st = TC_OK;
	if (rc == 1) {
		rep->final_stopped = 1;
		goto done;
	}
	for (i = 0; i < n; i++) {
		tc_tune_candidate c;
		memset(&c, 0, sizeof(c));
		c.options = keys[i];
		c.status = out[i].status;
		c.median_s = median[i];
		c.min_s = c.status == TC_TUNE_OK ? out[i].min_s : INFINITY;
		c.runs = out[i].runs;
		c.compile_s = out[i].compile_s;
		c.message = out[i].message;
		c.generation = res->generations;
		c.index = out[i].index;
		c.final = 1;
		c.chosen = i == winner;
		link_record(link, &c);
	}
	rep->final_measured = n;
	rep->final_rounds = set->final_rounds;
	if (winner < 0) /* every one failed this time: the search's best stands */
		goto done;
	*chosen = g[winner];
	rep->defaults_won = base_won;
	rep->default_s = base >= 0 ? median[base] : INFINITY;
	rep->best_s = median[winner];
done:
	for (i = 0; i < cap && opts && keys; i++) {
		tc_options_free(opts[i]);
		tc_free(keys[i]);
	}
	tc_free(g);
	tc_free(opts);
	tc_free(keys);
	tc_free(base_key);
	tc_free(median);
	tc_free(out);
	return st;
}

/* Is t compact row-major (no strides, or the compact ones)? */
static int compact(const DLTensor *t)
{
	int64_t s = 1;
	int d;
	for (d = t->ndim - 1; t->strides && d >= 0; d--) {
		if (t->shape[d] != 1 && t->strides[d] != s)
			return 0;
		s *= t->shape[d];
	}
	return 1;
}

/* The first of inputs[0..n) with data that is not compact host memory
 * (-1: none): what the tuner cannot hand to other processes as it is. */
static int foreign_input(const DLTensor *const *inputs, int n)
{
	for (int i = 0; i < n; i++)
		if (inputs[i] && inputs[i]->data &&
			(inputs[i]->device.device_type != kDLCPU || !compact(inputs[i])))
			return i;
	return -1;
}

#define TC_TUNE_MAX_INPUTS 64

/* tc_autotune for a GPU target (backend b): the inputs must be host data
 * (copied to the device in each child) or shapes only; the probe child
 * gives the cache key's machine part (*gpu_key, the caller's) and the
 * compute capability, which becomes the gpu_arch of the base options
 * unless they name one (*base then points to *gpu_base, the caller's), so
 * that every candidate and the stored object code are compiled for the
 * device without asking the driver.  -1 with an error in ctx. */
static tc_stat gpu_setup(tc_context *ctx, const tc_rt_backend *b, const DLTensor *const *inputs,
	int n_inputs, const tc_options **base, tc_options **gpu_base, char **gpu_key)
{
	char sm[16];
	int i, arch;
	if ((i = foreign_input(inputs, n_inputs)) >= 0) {
		tc_rt_set_error(ctx, "tc_autotune: target=%s: input %d is not compact host "
			"memory: the tuner takes host tensors (each candidate's process copies "
			"them to the device) or shapes without data (random inputs)", b->name, i);
		return TC_ERR;
	}
	if (n_inputs > TC_TUNE_MAX_INPUTS) {
		tc_rt_set_error(ctx, "tc_autotune: at most %d inputs", TC_TUNE_MAX_INPUTS);
		return TC_ERR;
	}
	if (tc_tune_probe_device(ctx, b, gpu_key, &arch) < 0)
		return TC_ERR;
	if (strcmp(tc_options_get(*base, "gpu_arch"), "auto"))
		return TC_OK; /* the caller's: the children's devices must take it */
	snprintf(sm, sizeof(sm), "sm_%d", arch);
	if (!(*gpu_base = tc_options_copy(*base))) {
		tc_rt_set_error(ctx, "out of memory");
		return TC_ERR;
	}
	/* an architecture the option does not list stays auto: each child
	 * compiles for its device then, and no object code is stored */
	if (tc_options_set(*gpu_base, "gpu_arch", sm, NULL) == 0)
		*base = *gpu_base;
	return TC_OK;
}

int tc_autotune(tc_module *m, const char *entry, const DLTensor *const *inputs, int n_inputs,
	const tc_options *base, const tc_tune_settings *settings, tc_options **best,
	tc_tune_report *report)
{
	tc_tune_settings defaults, local;
	tune_link link;
	tc_tune_shape shape;
	tc_tune_space *space = NULL;
	tc_tune_eval *ev = NULL;
	tc_tune_search sp;
	tc_tune_dist dist;
	tc_tune_result res;
	tc_tune_report scratch;
	const tc_rt_backend *backend;
	const int64_t *chosen;
	tc_options *gpu_base = NULL;
	char *gpu_key = NULL;
	tc_context *ctx;
	const char *why;
	struct timespec t0, t1;
	int i, st = -1, planned;
	memset(&sp, 0, sizeof(sp));
	memset(&dist, 0, sizeof(dist));
	memset(&res, 0, sizeof(res));
	memset(&link, 0, sizeof(link));
	memset(&scratch, 0, sizeof(scratch));
	if (best)
		*best = NULL;
	if (report) {
		memset(report, 0, sizeof(*report));
		report->default_s = report->best_s = INFINITY;
		report->search_default_s = report->search_best_s = INFINITY;
	}
	if (!m)
		return -1;
	ctx = m->ctx;
	tc_rt_clear_error(ctx);
	if (!entry || (n_inputs > 0 && !inputs) || n_inputs < 0) {
		tc_rt_set_error(ctx, "tc_autotune: NULL argument");
		return -1;
	}
	if (!settings) {
		tc_tune_settings_init(&defaults);
		settings = &defaults;
	}
	if ((why = bad_settings(settings)) != NULL) {
		tc_rt_set_error(ctx, "tc_autotune: %s", why);
		return -1;
	}
	if (!(backend = tc_rt_backend_of(base)) || !backend->compile) {
		/* the interpreter runs the IR as it is: no mapping to search */
		tc_rt_set_error(ctx, "tc_autotune: target=%s has nothing to tune",
			tc_options_get(base, "target"));
		return -1;
	}
	/* a GPU target: the device's facts from the probe child, so that
	 * this process never opens the driver (probe.c) */
	if (backend->device != kDLCPU && gpu_setup(ctx, backend, inputs, n_inputs, &base,
					     &gpu_base, &gpu_key) < 0)
		return -1;
	/* the ranks get a copy of the data: compact host memory */
	if (settings->transport && settings->transport->size > 1 &&
		(i = foreign_input(inputs, n_inputs)) >= 0) {
		tc_rt_set_error(ctx, "tc_autotune: with a transport, input %d must be compact "
			"host memory (the other ranks get a copy) or a shape without data", i);
		return -1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	link.caller = settings;
	link.ctx = ctx;
	local = *settings; /* the evaluator calls back through the link */
	local.record = link_record;
	local.progress = link_progress;
	local.user = &link;
	if (!(ev = tc_tune_eval_new(m, entry, inputs, n_inputs, &local)))
		goto done;
	tc_tune_eval_set_device(ev, (int)backend->device);
	link_open(&link, m, entry, inputs, n_inputs, base, gpu_key);
	shape.depth = loop_depth(m, entry);
	tc_tune_eval_shape(ev, &shape.extent, &shape.lanes);
	{
		int n = tc_rt_cpus(); /* a rank bound to some cores searches up to them */
		shape.ncpu = n > 256 ? 256 : n;
	}
	if (!(space = tc_tune_space_new(base, &shape)))
		goto oom;
	if (add_seed(space, &sp, base, NULL) < 0)
		goto oom;
	for (i = 0; i < settings->n_seeds; i++)
		if (settings->seeds[i] && add_seed(space, &sp, NULL, settings->seeds[i]) < 0)
			goto oom;
	if (link.cache) {
		char **texts = NULL;
		int n = 0, j;
		if (tc_cache_seeds(link.cache, &link.key, TC_TUNE_CACHE_SEEDS, &texts, &n) < 0)
			tc_tune_warn(ctx, "kernel cache %s: no seeds: %s", tc_cache_path(link.cache),
				tc_cache_error(link.cache));
		for (j = 0; j < n; j++) {
			if (add_seed(space, &sp, NULL, texts[j]) < 0)
				n = -1;
			tc_free(texts[j]);
		}
		tc_free(texts);
		if (n < 0)
			goto oom;
	}
	sp.generations = settings->generations;
	sp.population = settings->population;
	sp.elites = settings->elites;
	sp.tournament = settings->tournament;
	sp.mutation_rate = settings->mutation_rate;
	sp.seed = settings->seed;
	if (!sp.seed) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		sp.seed = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^
			((uint64_t)getpid() << 40);
	}
	sp.measure = tc_tune_eval_measure;
	sp.user = ev;
	if (settings->transport && settings->transport->size > 1) {
		dist.t = settings->transport;
		dist.ev = ev;
		dist.m = m;
		dist.entry = entry;
		sp.measure = tc_tune_dist_measure;
		sp.user = &dist;
	}
	sp.keep = settings->final_candidates ? settings->final_candidates + 1 : 0;
	planned = sp.population + (sp.generations - 1) * (sp.population - sp.elites);
	tc_tune_eval_plan(ev, sp.generations, planned);
	if (tc_tune_search_run(space, &sp, &res) < 0) {
		if (!*tc_context_error(ctx))
			tc_rt_set_error(ctx, "out of memory");
		goto done;
	}
	if (!res.best) {
		if (!*tc_context_error(ctx))
			tc_rt_set_error(ctx, "tc_autotune: no candidate of '%s' compiled and ran "
				"correctly (%s)%s%s", entry, res.stopped ? "stopped" : "all failed",
				*tc_tune_eval_first_failure(ev) ? "; the first failure: " : "",
				tc_tune_eval_first_failure(ev));
		goto done;
	}
	if (report) {
		report->default_s = report->search_default_s = tc_tune_eval_first_time(ev);
		report->best_s = report->search_best_s = res.best_time;
	}
	chosen = res.best;
	if (settings->final_candidates &&
		final_stage(space, ev, &link, settings, &res, sp.seeds[0], &chosen,
			report ? report : &scratch) < 0) {
		if (!*tc_context_error(ctx))
			tc_rt_set_error(ctx, "out of memory");
		goto done;
	}
	if (best && !(*best = tc_tune_space_options(space, chosen)))
		goto oom;
	/* the chosen one's object code, for compiles without LLVM (or NVRTC);
	 * for a GPU only when compiled for an architecture named in the
	 * options (else the compile would ask the driver which) */
	if (link.cache && (backend->device == kDLCPU ||
				  strcmp(tc_options_get(base, "gpu_arch"), "auto"))) {
		char *text = tc_tune_space_key(space, chosen);
		DLTensor dev_in[TC_TUNE_MAX_INPUTS];
		const DLTensor *dev_ptrs[TC_TUNE_MAX_INPUTS];
		for (i = 0; backend->device != kDLCPU && i < n_inputs && i < TC_TUNE_MAX_INPUTS; i++) {
			/* shapes only, on the device: nothing is read */
			dev_in[i] = *inputs[i];
			dev_in[i].device = (DLDevice){backend->device, 0};
			dev_in[i].data = NULL;
			dev_in[i].strides = NULL;
			dev_in[i].byte_offset = 0;
			dev_ptrs[i] = &dev_in[i];
		}
		if (text && tc_cache_store_object(link.cache, &link.key, m,
				    backend->device != kDLCPU ? dev_ptrs : inputs, n_inputs, text) < 0)
			tc_tune_warn(ctx, "kernel cache %s: cannot store the object code: %s",
				tc_cache_path(link.cache), tc_cache_error(link.cache));
		tc_free(text);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (report) {
		int measured, failed, cut;
		tc_tune_eval_counts(ev, &measured, &failed, &cut);
		report->measured = measured;
		report->failed = failed;
		report->cut = cut;
		report->generations = res.generations;
		report->stopped = res.stopped;
		report->elapsed_s = (double)(t1.tv_sec - t0.tv_sec) +
			1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
	}
	st = 0;
	goto done;
oom:
	tc_rt_set_error(ctx, "out of memory");
done:
	for (i = 0; i < sp.nseeds; i++)
		tc_free(sp.seeds[i]);
	tc_free(sp.seeds);
	tc_tune_result_clear(&res);
	tc_tune_space_free(space);
	tc_tune_eval_free(ev);
	link_close(&link);
	tc_options_free(gpu_base);
	tc_free(gpu_key);
	return st;
}
