/* The autotuner: the option space read from the option table, the genetic
 * operators and the search driven by a fake fitness (selection, crossover,
 * mutation rate, elitism, memoisation, replacement, reproducibility), the
 * final stage's choice with a fake re-timing, and real tuning runs in
 * child processes: a small matmul whose tuned options give the
 * interpreter's result, planted crashing, hanging and wrong candidates
 * that are recorded as failed while the run goes on, and planted decoys
 * (fast in the search, slow when re-timed) that the final stage sees
 * through. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tcomp.h"
#include "autotune/tune.h"
#include "runtime/cache_ops.h"
#include "runtime/options.h"

#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "testutil.h"

static tc_tune_shape matmul_shape = {3, 1024, 16, 2};

static int find_dim(const tc_tune_space *s, const char *name)
{
	int i;
	for (i = 0; i < s->n; i++)
		if (!strcmp(s->d[i].name, name))
			return i;
	fail_msg("no option '%s' in the space", name);
	return -1;
}

static void rng_depends_on_the_seed_alone(void **state)
{
	tc_tune_rng a, b, c;
	int i, same = 1, differ = 0;
	(void)state;
	tc_tune_rng_seed(&a, 42);
	tc_tune_rng_seed(&b, 42);
	tc_tune_rng_seed(&c, 43);
	for (i = 0; i < 100; i++) {
		uint64_t x = tc_tune_rng_next(&a), y = tc_tune_rng_next(&b), z = tc_tune_rng_next(&c);
		same &= x == y;
		differ += x != z;
	}
	assert_true(same);
	assert_true(differ > 90);
	for (i = 0; i < 1000; i++) {
		int64_t v = tc_tune_rng_below(&a, 7);
		double u = tc_tune_rng_unit(&a);
		assert_true(v >= 0 && v < 7);
		assert_true(u >= 0 && u < 1);
	}
}

static void space_is_read_from_the_option_table(void **state)
{
	tc_tune_space *s = tc_tune_space_new(NULL, &matmul_shape);
	tc_buf b;
	int i, tile, reg, thr;
	int64_t *g;
	char *k1, *k2;
	tc_options *o;
	(void)state;
	assert_non_null(s);
	assert_int_equal(s->n, tc_rt_opt_count());
	for (i = 0; i < s->n; i++) {
		assert_string_equal(s->d[i].name, tc_rt_opt_name(i));
		if (!strcmp(s->d[i].name, "target") || !strcmp(s->d[i].name, "contract") ||
			!strcmp(s->d[i].name, "fastmath") || !strcmp(s->d[i].name, "sizes") ||
			!strcmp(s->d[i].name, "block") || !strcmp(s->d[i].name, "grid") ||
			!strcmp(s->d[i].name, "reduce") || !strcmp(s->d[i].name, "reduce_threads") ||
			!strcmp(s->d[i].name, "shared") || !strcmp(s->d[i].name, "shared_tile") ||
			!strcmp(s->d[i].name, "reduce_map") ||
			!strcmp(s->d[i].name, "gpu_arch") || !strcmp(s->d[i].name, "cpu")) {
			assert_false(s->d[i].searched);
			assert_int_equal(s->d[i].count, 1);
		} else {
			assert_true(s->d[i].searched);
			assert_true(s->d[i].count >= 2);
		}
	}
	tile = find_dim(s, "tile");
	assert_int_equal(s->d[tile].npos, 3);
	/* 8,16,...,512 and 24,...,768 below 1024, and 1024 itself */
	assert_int_equal(s->d[tile].nsizes[0], 14);
	reg = find_dim(s, "regtile");
	assert_int_equal(s->d[reg].ngen, 32);
	tc_buf_init(&b);
	tc_tune_space_value(s, reg, s->d[reg].count - 1, &b);
	assert_string_equal(b.s, "8,64");
	tc_buf_free(&b);
	thr = find_dim(s, "threads");
	assert_int_equal(s->d[thr].count, 3); /* auto, 1, 2 */
	/* enum options are searched through their words: vector's lanes and
	 * unroll_inner's counts, auto (LLVM's choice) included */
	assert_true(s->d[find_dim(s, "vector")].searched);
	assert_int_equal(s->d[find_dim(s, "vector")].count, 8); /* auto, 1, 2, ..., 64 */
	assert_true(s->d[find_dim(s, "unroll_inner")].searched);
	assert_int_equal(s->d[find_dim(s, "unroll_inner")].count, 5); /* auto, 1, 2, 4, 8 */
	/* the defaults' genome prints as the defaults */
	g = calloc((size_t)s->n, sizeof(int64_t));
	assert_int_equal(tc_tune_space_genome(s, NULL, g), 0);
	k1 = tc_tune_space_key(s, g);
	o = tc_options_new();
	k2 = tc_options_print(o);
	assert_string_equal(k1, k2);
	tc_string_free(k1);
	tc_string_free(k2);
	/* a value outside the generated set becomes an extra value */
	tc_options_set(o, "tile", "100,7", NULL);
	assert_int_equal(tc_tune_space_genome(s, o, g), 0);
	k1 = tc_tune_space_key(s, g);
	assert_non_null(strstr(k1, "tile=100,7\n"));
	tc_string_free(k1);
	tc_options_free(o);
	free(g);
	tc_tune_space_free(s);
}

/* interchange is searched over auto and the orders that keep the band's
 * innermost member in place (1,0 for kernels of 3 loops, and the other
 * orders of the first 3 for 4 or more; none for 2 or 1); random genomes
 * draw auto half the time and each order about equally often otherwise;
 * every drawn value is a valid option; a seed's order outside the set is
 * kept as an extra value. */
static void interchange_is_searched_with_auto_drawn_often(void **state)
{
	static const char *const orders[] = {"auto", "1,0", "0,2,1", "1,2,0", "2,0,1", "2,1,0"};
	tc_tune_shape four = matmul_shape, three = matmul_shape, two = matmul_shape;
	tc_tune_space *s;
	int64_t *g, drawn[6] = {0};
	tc_options *o;
	tc_tune_rng r;
	int d, i;
	(void)state;
	four.depth = 4;
	s = tc_tune_space_new(NULL, &four);
	assert_non_null(s);
	d = find_dim(s, "interchange");
	assert_true(s->d[d].searched);
	assert_int_equal(s->d[d].count, 6);
	g = calloc((size_t)s->n, sizeof(int64_t));
	assert_non_null(g);
	tc_tune_rng_seed(&r, 11);
	for (i = 0; i < 4000; i++) {
		tc_tune_space_random(s, &r, g);
		assert_true(g[d] >= 0 && g[d] < 6);
		drawn[g[d]]++;
		if (i < 50) { /* the whole genome makes valid options */
			o = tc_tune_space_options(s, g);
			assert_non_null(o);
			assert_string_equal(tc_options_get(o, "interchange"), orders[g[d]]);
			tc_options_free(o);
		}
	}
	print_message("interchange drawn: auto %lld, orders %lld %lld %lld %lld %lld\n",
		(long long)drawn[0], (long long)drawn[1], (long long)drawn[2], (long long)drawn[3],
		(long long)drawn[4], (long long)drawn[5]);
	assert_in_range(drawn[0], 1800, 2200); /* half of 4000 */
	for (i = 1; i < 6; i++)
		assert_in_range(drawn[i], 300, 500); /* a fifth of the rest: 400 */
	/* a seed's order is found among the words, another becomes extra */
	o = tc_options_new();
	assert_int_equal(tc_options_set(o, "interchange", "2,0,1", NULL), 0);
	assert_int_equal(tc_tune_space_genome(s, o, g), 0);
	assert_int_equal(g[d], 4);
	assert_int_equal(tc_options_set(o, "interchange", "3,2,1,0", NULL), 0);
	assert_int_equal(tc_tune_space_genome(s, o, g), 0);
	assert_int_equal(g[d], 6);
	assert_int_equal(s->d[d].count, 7);
	tc_options_free(o);
	free(g);
	tc_tune_space_free(s);
	three.depth = 3;
	s = tc_tune_space_new(NULL, &three);
	assert_non_null(s);
	assert_int_equal(s->d[find_dim(s, "interchange")].count, 2); /* auto, 1,0 */
	tc_tune_space_free(s);
	two.depth = 2;
	s = tc_tune_space_new(NULL, &two);
	assert_non_null(s);
	assert_int_equal(s->d[find_dim(s, "interchange")].count, 1);
	tc_tune_space_free(s);
}

static void options_set_by_the_base_are_fixed(void **state)
{
	tc_options *base = tc_options_new();
	tc_tune_space *s;
	tc_tune_rng r;
	int64_t *g;
	int i;
	(void)state;
	tc_options_set(base, "fusion", "min", NULL);
	tc_options_set(base, "contract", "on", NULL);
	s = tc_tune_space_new(base, &matmul_shape);
	assert_non_null(s);
	assert_false(s->d[find_dim(s, "fusion")].searched);
	g = calloc((size_t)s->n, sizeof(int64_t));
	tc_tune_rng_seed(&r, 7);
	for (i = 0; i < 50; i++) {
		char *k;
		tc_tune_space_random(s, &r, g);
		k = tc_tune_space_key(s, g);
		assert_non_null(strstr(k, "fusion=min\n"));
		assert_non_null(strstr(k, "contract=on\n"));
		assert_non_null(strstr(k, "target=cpu\n"));
		tc_string_free(k);
	}
	free(g);
	tc_tune_space_free(s);
	tc_options_free(base);
}

/* For target=cuda and cuda-emu the tuner searches the GPU mapping (block,
 * grid) and the schedule options the GPU passes read (fusion, order,
 * inline, share); the CPU's code options are fixed.  Every block drawn has
 * 1 to 3 sizes and at most 1024 threads, x mostly a multiple of 32; every
 * grid is auto or a cap. */
static void gpu_targets_search_the_mapping(void **state)
{
	static const char *const searched[] = {"block", "grid", "fusion", "order", "inline",
		"share", "reduce", "reduce_threads", "reduce_map", "shared", "shared_tile"};
	const char *targets[] = {"cuda", "cuda-emu"};
	int t, i, j, x32 = 0, nblocks = 0;
	(void)state;
	for (t = 0; t < 2; t++) {
		tc_options *base = tc_options_new();
		tc_tune_space *s;
		tc_tune_rng r;
		int64_t *g;
		tc_options_set(base, "target", targets[t], NULL);
		s = tc_tune_space_new(base, &matmul_shape);
		assert_non_null(s);
		for (i = 0; i < s->n; i++) {
			int want = 0;
			for (j = 0; j < 11; j++)
				want |= !strcmp(s->d[i].name, searched[j]);
			if (want != s->d[i].searched)
				fail_msg("target=%s: %s is%s searched", targets[t], s->d[i].name,
					s->d[i].searched ? "" : " not");
			if (!want)
				assert_int_equal(s->d[i].count, 1);
		}
		i = find_dim(s, "block");
		assert_true(s->d[i].count >= 20);
		assert_string_equal(s->d[i].words[0], "auto");
		for (j = 1; j < s->d[i].nwords; j++) {
			const char *w = s->d[i].words[j];
			long v[3] = {1, 1, 1};
			int n = sscanf(w, "%ld,%ld,%ld", &v[0], &v[1], &v[2]);
			char *canon = NULL;
			assert_true(n >= 1 && n <= 3);
			assert_true(v[0] * v[1] * v[2] <= 1024 && v[2] <= 64);
			x32 += v[0] % 32 == 0;
			nblocks++;
			assert_int_equal(tc_rt_opt_value(tc_rt_opt_type(s->d[i].row),
						 tc_rt_opt_range(s->d[i].row), w, &canon), 0);
			tc_free(canon);
		}
		i = find_dim(s, "grid");
		assert_string_equal(s->d[i].words[0], "auto");
		assert_true(s->d[i].count >= 4);
		g = calloc((size_t)s->n, sizeof(int64_t));
		tc_tune_rng_seed(&r, 11);
		for (i = 0; i < 40; i++) {
			char *k;
			tc_tune_space_random(s, &r, g);
			k = tc_tune_space_key(s, g);
			assert_non_null(strstr(k, targets[t]));
			assert_non_null(strstr(k, "\ntile=auto\n"));
			assert_non_null(strstr(k, "\nthreads=auto\n"));
			assert_non_null(strstr(k, "\nvecreduce=on\n"));
			tc_string_free(k);
		}
		free(g);
		tc_tune_space_free(s);
		tc_options_free(base);
	}
	assert_true(x32 * 10 >= nblocks * 8); /* x a multiple of the warp mostly */
	{ /* the CPU ignores the GPU mapping's options: not searched there */
		tc_tune_space *s = tc_tune_space_new(NULL, &matmul_shape);
		assert_non_null(s);
		for (j = 0; j < 7; j++) {
			i = find_dim(s, (const char *const[]){"block", "grid", "reduce",
						   "reduce_threads", "reduce_map", "shared", "shared_tile"}[j]);
			assert_false(s->d[i].searched);
		}
		assert_true(s->d[find_dim(s, "reduce")].count == 1);
		tc_tune_space_free(s);
	}
}

static void selection_prefers_the_fitter(void **state)
{
	double times[5] = {5, 1, 3, 2, INFINITY};
	int count[5] = {0}, i;
	tc_tune_rng r;
	(void)state;
	tc_tune_rng_seed(&r, 1);
	for (i = 0; i < 20000; i++)
		count[tc_tune_select(&r, times, 5, 2)]++;
	/* binary tournament: the best wins 1 - (4/5)^2 = 36% of the time, the
	 * worst (failed) only when drawn twice: 4% */
	assert_true(count[1] > count[3] && count[3] > count[2] && count[2] > count[0] &&
		count[0] > count[4]);
	assert_in_range(count[1], 6800, 7600);
	assert_in_range(count[4], 600, 1000);
}

static void crossover_takes_each_option_from_a_parent(void **state)
{
	tc_tune_space *s = tc_tune_space_new(NULL, &matmul_shape);
	int64_t a[32], b[32], c[32];
	int i, t, from_a = 0, from_b = 0;
	tc_tune_rng r;
	(void)state;
	assert_non_null(s);
	tc_tune_rng_seed(&r, 3);
	for (t = 0; t < 500; t++) {
		tc_tune_space_random(s, &r, a);
		tc_tune_space_random(s, &r, b);
		tc_tune_crossover(s, &r, a, b, c);
		for (i = 0; i < s->n; i++) {
			assert_true(c[i] == a[i] || c[i] == b[i]);
			if (a[i] != b[i]) {
				from_a += c[i] == a[i];
				from_b += c[i] == b[i];
			}
		}
	}
	/* even odds */
	assert_true(from_a > 0.45 * (from_a + from_b) && from_b > 0.45 * (from_a + from_b));
	tc_tune_space_free(s);
}

static void mutation_rate_is_respected(void **state)
{
	tc_tune_space *s = tc_tune_space_new(NULL, &matmul_shape);
	int64_t g[32], h[32];
	int i, t, changed = 0, eligible = 0;
	tc_tune_rng r;
	(void)state;
	assert_non_null(s);
	tc_tune_rng_seed(&r, 5);
	for (t = 0; t < 4000; t++) {
		tc_tune_space_random(s, &r, g);
		memcpy(h, g, sizeof(g));
		tc_tune_mutate(s, &r, h, 0.25);
		for (i = 0; i < s->n; i++) {
			if (!s->d[i].searched) {
				assert_true(h[i] == g[i]);
				continue;
			}
			assert_true(h[i] >= 0 && h[i] < s->d[i].count);
			eligible++;
			changed += h[i] != g[i];
		}
	}
	/* binomial: sd ~ 0.0023 for ~32000 draws */
	assert_true(fabs((double)changed / eligible - 0.25) < 0.012);
	tc_tune_space_free(s);
}

/* ---- the search with a fake fitness ---- */

typedef struct fake {
	int nkeys;
	char *keys[4096]; /* every measured configuration, in order */
	int gens;
	int popn[16];
	char *pop[16][64];
	double times[16][64];
	int stop_after;
} fake;

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* A fitness that depends on the configuration only. */
static double fake_time(const char *key)
{
	return 1e-3 + (double)(tc_hash_bytes(TC_HASH_INIT, key, strlen(key)) % 100000) * 1e-6;
}

static int fake_measure(void *user, int gen, int n, tc_options *const *options, char *const *keys,
	double *times)
{
	fake *f = user;
	int i, j;
	(void)gen;
	for (i = 0; i < n; i++) {
		char *k = tc_options_print(options[i]);
		assert_string_equal(k, keys[i]); /* the key is the canonical text */
		tc_string_free(k);
		for (j = 0; j < f->nkeys; j++)
			if (!strcmp(f->keys[j], keys[i]))
				fail_msg("configuration measured twice:\n%s", keys[i]);
		assert_true(f->nkeys < 4096);
		f->keys[f->nkeys++] = strdup(keys[i]);
		times[i] = fake_time(keys[i]);
		if (f->stop_after && f->nkeys == f->stop_after)
			return 1;
	}
	return 0;
}

static void fake_generation(void *user, int gen, int n, char *const *keys, const double *times)
{
	fake *f = user;
	int i;
	assert_true(gen < 16 && n <= 64);
	f->gens = gen + 1;
	f->popn[gen] = n;
	for (i = 0; i < n; i++) {
		f->pop[gen][i] = strdup(keys[i]);
		f->times[gen][i] = times[i];
	}
}

static void fake_free(fake *f)
{
	int i, j;
	for (i = 0; i < f->nkeys; i++)
		free(f->keys[i]);
	for (i = 0; i < f->gens; i++)
		for (j = 0; j < f->popn[i]; j++)
			free(f->pop[i][j]);
}

static void run_fake(fake *f, uint64_t seed, int gens, int pop, int elites, tc_tune_result *res)
{
	tc_tune_space *s = tc_tune_space_new(NULL, &matmul_shape);
	tc_tune_search sp;
	int64_t *g0 = calloc(32, sizeof(int64_t));
	assert_non_null(s);
	memset(f, 0, sizeof(*f));
	memset(&sp, 0, sizeof(sp));
	assert_int_equal(tc_tune_space_genome(s, NULL, g0), 0);
	sp.generations = gens;
	sp.population = pop;
	sp.elites = elites;
	sp.tournament = 2;
	sp.mutation_rate = 0.15;
	sp.seed = seed;
	sp.seeds = &g0;
	sp.nseeds = 1;
	sp.measure = fake_measure;
	sp.user = f;
	sp.on_generation = fake_generation;
	assert_int_equal(tc_tune_search_run(s, &sp, res), 0);
	free(g0);
	tc_tune_space_free(s);
}

static int in_pop(const fake *f, int gen, const char *key)
{
	int i;
	for (i = 0; i < f->popn[gen]; i++)
		if (!strcmp(f->pop[gen][i], key))
			return 1;
	return 0;
}

static void search_memoises_replaces_and_keeps_elites(void **state)
{
	fake *f = calloc(1, sizeof(fake));
	tc_tune_result res;
	char *def;
	int g, i;
	(void)state;
	run_fake(f, 11, 6, 12, 2, &res);
	assert_int_equal(res.generations, 6);
	assert_int_equal(f->gens, 6);
	assert_int_equal(res.measured, f->nkeys); /* each configuration once (fake_measure checks) */
	/* generation 0 starts from the seed: the defaults */
	def = tc_options_print(NULL);
	assert_string_equal(f->pop[0][0], def);
	assert_string_equal(f->keys[0], def);
	tc_string_free(def);
	for (g = 0; g < 6; g++) {
		double best = INFINITY;
		int j, bi = 0, carried = 0;
		assert_int_equal(f->popn[g], 12);
		for (i = 0; i < 12; i++) { /* no duplicates in a generation */
			for (j = 0; j < i; j++)
				assert_string_not_equal(f->pop[g][i], f->pop[g][j]);
			if (f->times[g][i] < best) {
				best = f->times[g][i];
				bi = i;
			}
		}
		if (g + 1 < 6) {
			/* elitism: the best survives; replacement: only the 2 elites do */
			assert_true(in_pop(f, g + 1, f->pop[g][bi]));
			for (i = 0; i < 12; i++)
				carried += in_pop(f, g + 1, f->pop[g][i]);
			assert_int_equal(carried, 2);
		}
		if (g > 0) { /* the best never gets worse */
			double prev = INFINITY;
			for (i = 0; i < 12; i++)
				prev = f->times[g - 1][i] < prev ? f->times[g - 1][i] : prev;
			assert_true(best <= prev);
		}
	}
	assert_true(res.best_time <= f->times[0][0]);
	tc_tune_result_clear(&res);
	fake_free(f);
	free(f);
}

static void search_is_reproducible_with_a_seed(void **state)
{
	fake *a = calloc(1, sizeof(fake)), *b = calloc(1, sizeof(fake)), *c = calloc(1, sizeof(fake));
	tc_tune_result ra, rb, rc;
	int i, same = 1;
	(void)state;
	run_fake(a, 99, 4, 10, 1, &ra);
	run_fake(b, 99, 4, 10, 1, &rb);
	run_fake(c, 100, 4, 10, 1, &rc);
	assert_int_equal(a->nkeys, b->nkeys);
	for (i = 0; i < a->nkeys; i++)
		assert_string_equal(a->keys[i], b->keys[i]);
	for (i = 0; i < a->nkeys && i < c->nkeys; i++)
		same &= !strcmp(a->keys[i], c->keys[i]);
	assert_false(same);
	free(ra.best);
	free(rb.best);
	free(rc.best);
	fake_free(a);
	fake_free(b);
	fake_free(c);
	free(a);
	free(b);
	free(c);
}

static void search_stops_when_asked(void **state)
{
	fake *f = calloc(1, sizeof(fake));
	tc_tune_result res;
	(void)state;
	memset(f, 0, sizeof(*f));
	{
		tc_tune_space *s = tc_tune_space_new(NULL, &matmul_shape);
		tc_tune_search sp;
		memset(&sp, 0, sizeof(sp));
		sp.generations = 5;
		sp.population = 10;
		sp.elites = 1;
		sp.tournament = 2;
		sp.seed = 1;
		sp.measure = fake_measure;
		sp.user = f;
		f->stop_after = 15;
		assert_int_equal(tc_tune_search_run(s, &sp, &res), 0);
		tc_tune_space_free(s);
	}
	assert_true(res.stopped);
	assert_int_equal(f->nkeys, 15);
	assert_int_equal(res.measured, 15);
	assert_non_null(res.best);
	tc_tune_result_clear(&res);
	fake_free(f);
	free(f);
}

static void search_keeps_the_best_distinct_configurations(void **state)
{
	fake *f = calloc(1, sizeof(fake));
	tc_tune_space *s = tc_tune_space_new(NULL, &matmul_shape);
	tc_tune_search sp;
	tc_tune_result res;
	int64_t *g0 = calloc(32, sizeof(int64_t));
	double sorted[4096];
	int i, j;
	(void)state;
	memset(&sp, 0, sizeof(sp));
	assert_int_equal(tc_tune_space_genome(s, NULL, g0), 0);
	sp.generations = 4;
	sp.population = 10;
	sp.elites = 2;
	sp.tournament = 2;
	sp.mutation_rate = 0.15;
	sp.seed = 21;
	sp.seeds = &g0;
	sp.nseeds = 1;
	sp.keep = 4;
	sp.measure = fake_measure;
	sp.user = f;
	assert_int_equal(tc_tune_search_run(s, &sp, &res), 0);
	/* the 4 least fake times of all measured, best first, each once */
	for (i = 0; i < f->nkeys; i++)
		sorted[i] = fake_time(f->keys[i]);
	qsort(sorted, (size_t)f->nkeys, sizeof(double), cmp_dbl);
	assert_int_equal(res.ntop, 4);
	assert_true(res.top_time[0] == res.best_time);
	for (i = 0; i < 4; i++) {
		char *k = tc_tune_space_key(s, res.top[i]);
		assert_true(res.top_time[i] == sorted[i]);
		assert_true(fake_time(k) == res.top_time[i]); /* the genome goes with its time */
		for (j = 0; j < i; j++) {
			char *o = tc_tune_space_key(s, res.top[j]);
			assert_string_not_equal(k, o);
			tc_string_free(o);
		}
		tc_string_free(k);
	}
	tc_tune_result_clear(&res);
	assert_null(res.best);
	free(g0);
	tc_tune_space_free(s);
	fake_free(f);
	free(f);
}

/* ---- the final stage with a fake re-timing ---- */

typedef struct fake_rt {
	int rounds, calls;
	double t[8][8];        /* t[configuration][round], seconds */
	tc_tune_status st[8];  /* each configuration's status */
	int stop;              /* return 1 */
} fake_rt;

static int fake_retime(void *user, int n, tc_options *const *options, char *const *keys,
	int rounds, double *rt, tc_tune_retimed *out)
{
	fake_rt *f = user;
	int i, r;
	f->calls++;
	assert_int_equal(rounds, f->rounds);
	for (i = 0; i < n; i++) {
		char *k = tc_options_print(options[i]);
		assert_string_equal(k, keys[i]);
		tc_string_free(k);
		memset(&out[i], 0, sizeof(out[i]));
		out[i].status = f->st[i];
		out[i].index = i;
		out[i].min_s = INFINITY;
		for (r = 0; r < rounds; r++) {
			rt[r * n + i] = f->st[i] == TC_TUNE_OK ? f->t[i][r] : INFINITY;
			out[i].min_s = f->t[i][r] < out[i].min_s ? f->t[i][r] : out[i].min_s;
		}
	}
	return f->stop;
}

/* n configurations: the defaults and n - 1 with another tile (so the keys
 * differ), into o[] and k[]. */
static void final_configs(int n, tc_options **o, char **k)
{
	int i;
	for (i = 0; i < n; i++) {
		char tile[32];
		o[i] = tc_options_new();
		if (i) {
			snprintf(tile, sizeof(tile), "%d,%d,%d", 8 * i, 16, 32);
			assert_int_equal(tc_options_set(o[i], "tile", tile, NULL), 0);
		}
		k[i] = tc_options_print(o[i]);
	}
}

static void final_configs_free(int n, tc_options **o, char **k)
{
	int i;
	for (i = 0; i < n; i++) {
		tc_options_free(o[i]);
		tc_string_free(k[i]);
	}
}

/* Run the final stage over 4 configurations (0 the base) with f's times. */
static int run_final(fake_rt *f, int base, double *median, int *winner, int *base_won)
{
	tc_options *o[4];
	char *k[4];
	tc_tune_retimed out[4];
	tc_tune_final fin;
	int rc;
	final_configs(4, o, k);
	fin.rounds = f->rounds;
	fin.margin = 0.02;
	fin.retime = fake_retime;
	fin.user = f;
	rc = tc_tune_final_run(&fin, 4, o, k, base, median, out, winner, base_won);
	final_configs_free(4, o, k);
	return rc;
}

static void final_stage_returns_what_is_fastest_on_a_second_look(void **state)
{
	fake_rt f;
	double med[4];
	int w, bw, r;
	(void)state;
	memset(&f, 0, sizeof(f));
	f.rounds = 5;
	for (r = 0; r < 5; r++) {
		f.t[0][r] = 1.0e-3;              /* the defaults */
		f.t[1][r] = 1.3e-3;              /* the search's best: slower now */
		f.t[2][r] = r == 3 ? 2e-3 : 0.9e-3; /* faster, one round disturbed */
		f.t[3][r] = 0.5e-3;              /* fastest of all, but wrong this time */
	}
	f.st[3] = TC_TUNE_WRONG;
	assert_int_equal(run_final(&f, 0, med, &w, &bw), 0);
	assert_int_equal(f.calls, 1);
	assert_int_equal(w, 2);
	assert_false(bw);
	assert_true(med[0] == 1.0e-3 && med[1] == 1.3e-3);
	assert_true(med[2] == 0.9e-3); /* the median of the rounds: the spike does not count */
	assert_false(isfinite(med[3]));
	/* without the base among them: the least median */
	f.t[2][0] = f.t[2][1] = f.t[2][2] = 1.1e-3;
	assert_int_equal(run_final(&f, -1, med, &w, &bw), 0);
	assert_int_equal(w, 0);
	assert_false(bw);
}

static void final_stage_keeps_the_defaults_unless_beaten_beyond_noise(void **state)
{
	fake_rt f;
	double med[4];
	int w, bw, r;
	(void)state;
	memset(&f, 0, sizeof(f));
	f.rounds = 4;
	for (r = 0; r < 4; r++) {
		f.t[0][r] = 1.0e-3;   /* the defaults */
		f.t[1][r] = 0.99e-3;  /* 1% faster: within the 2% margin */
		f.t[2][r] = 1.2e-3;
		f.t[3][r] = 1.5e-3;
	}
	assert_int_equal(run_final(&f, 0, med, &w, &bw), 0);
	assert_int_equal(w, 0);
	assert_true(bw);
	/* a far lower median that comes from half of the rounds only */
	f.t[1][0] = f.t[1][1] = 0.3e-3;
	f.t[1][2] = f.t[1][3] = 1.01e-3;
	assert_int_equal(run_final(&f, 0, med, &w, &bw), 0);
	assert_true(med[1] < 0.98 * med[0]);
	assert_int_equal(w, 0);
	assert_true(bw);
	/* faster beyond the margin in three rounds of four: it wins */
	f.t[1][2] = 0.95e-3;
	assert_int_equal(run_final(&f, 0, med, &w, &bw), 0);
	assert_int_equal(w, 1);
	assert_false(bw);
	/* the defaults fastest outright */
	for (r = 0; r < 4; r++)
		f.t[1][r] = 1.1e-3;
	assert_int_equal(run_final(&f, 0, med, &w, &bw), 0);
	assert_int_equal(w, 0);
	assert_true(bw);
	/* a stop request: nothing is chosen */
	f.stop = 1;
	assert_int_equal(run_final(&f, 0, med, &w, &bw), 1);
	assert_int_equal(w, -1);
	/* none correct: no winner */
	f.stop = 0;
	for (r = 0; r < 4; r++)
		f.st[r] = TC_TUNE_CRASH;
	assert_int_equal(run_final(&f, 0, med, &w, &bw), 0);
	assert_int_equal(w, -1);
	assert_false(bw);
}

/* ---- real runs ---- */

static const char *matmul_src =
	"def matmul(float(M,K) A, float(K,N) B) -> (C) {\n"
	"    C(m,n) +=! A(m,r_k) * B(r_k,n)\n"
	"}\n";

/* The candidates a run recorded: the search's (n of them), then the final
 * stage's re-timings (nfinal). */
typedef struct seen {
	int n;
	tc_tune_status status[256];
	int index[256];
	double median[256];
	char msg[256][160];
	char opts[256][400];
	int nfinal;
	tc_tune_status fstatus[16];
	int findex[16], fchosen[16];
	double fmedian[16];
	char fopts[16][400];
} seen;

static void record(void *user, const tc_tune_candidate *c)
{
	seen *s = user;
	assert_non_null(c->options);
	if (c->final) {
		assert_int_equal(s->n > 0, 1); /* after the search */
		if (s->nfinal < 16) {
			s->fstatus[s->nfinal] = c->status;
			s->findex[s->nfinal] = c->index;
			s->fchosen[s->nfinal] = c->chosen;
			s->fmedian[s->nfinal] = c->median_s;
			snprintf(s->fopts[s->nfinal], sizeof(s->fopts[0]), "%s", c->options);
			s->nfinal++;
		}
		return;
	}
	assert_int_equal(s->nfinal, 0);
	assert_false(c->chosen);
	if (s->n < 256) {
		s->status[s->n] = c->status;
		s->index[s->n] = c->index;
		s->median[s->n] = c->median_s;
		snprintf(s->msg[s->n], sizeof(s->msg[0]), "%s", c->message);
		snprintf(s->opts[s->n], sizeof(s->opts[0]), "%s", c->options);
		s->n++;
	}
}

/* The record of search candidate index. */
static int record_of(const seen *s, int index)
{
	int i;
	for (i = 0; i < s->n; i++)
		if (s->index[i] == index)
			return i;
	fail_msg("candidate %d was not recorded", index);
	return 0;
}

static tc_tune_status status_of(const seen *s, int index)
{
	int i;
	for (i = 0; i < s->n; i++)
		if (s->index[i] == index)
			return s->status[i];
	fail_msg("candidate %d was not recorded", index);
	return TC_TUNE_OK;
}

static void quick_settings(tc_tune_settings *st, seen *s)
{
	tc_tune_settings_init(st);
	st->generations = 2;
	st->population = 4;
	st->elites = 1;
	st->seed = 7;
	st->use_cache = 0;
	st->runs = 3;
	st->min_time_s = 0.001;
	st->timeout_s = 1;
	st->compile_timeout_s = 30;
	st->threads = 2;
	st->final_rounds = 3;
	st->final_time_s = 0.001;
	st->final_warmup_s = 0.001;
	st->record = record;
	st->user = s;
}

static const char *const near_defaults[2] = {"unroll=off", "regtile=auto\npack=off"};

static void tuned_matmul_matches_the_interpreter(void **state)
{
	tc_context *ctx = tc_context_new();
	tc_module *m = tc_module_parse(ctx, matmul_src, "mm.tc");
	tc_tune_settings st;
	tc_tune_report rep;
	tc_options *best = NULL, *interp = tc_options_new();
	seen *s = calloc(1, sizeof(seen));
	uint64_t rng = tu_seed("tune", 1);
	int64_t dims[2] = {32, 32};
	tu_tensor A, B, C1, C2;
	const DLTensor *in[2];
	DLTensor *o1[1], *o2[1];
	tc_kernel *k1, *k2;
	int i;
	(void)state;
	assert_non_null(m);
	tu_tensor_init(&A, TU_F32, dims, 2);
	tu_tensor_init(&B, TU_F32, dims, 2);
	tu_tensor_init(&C1, TU_F32, dims, 2);
	tu_tensor_init(&C2, TU_F32, dims, 2);
	for (i = 0; i < 32 * 32; i++) {
		((float *)A.data)[i] = (float)(2 * tu_rand_unit(&rng) - 1);
		((float *)B.data)[i] = (float)(2 * tu_rand_unit(&rng) - 1);
	}
	in[0] = &A.dl;
	in[1] = &B.dl;
	o1[0] = &C1.dl;
	o2[0] = &C2.dl;
	quick_settings(&st, s);
	/* seeds as fast as the defaults, so that the final stage has others to
	 * re-time (it leaves out those 3 times slower than the defaults) */
	st.seeds = near_defaults;
	st.n_seeds = 2;
	/* and none cut or left out for looking slow on a loaded machine (it
	 * happened under ASan with other tests alongside) */
	st.cutoff = 1e6;
	if (tc_autotune(m, "matmul", in, 2, NULL, &st, &best, &rep) < 0)
		fail_msg("%s", tc_context_error(ctx));
	assert_non_null(best);
	assert_int_equal(rep.generations, 2);
	assert_true(rep.measured >= 4 && rep.measured <= 7);
	assert_int_equal(rep.measured, s->n);
	assert_true(isfinite(rep.default_s) && isfinite(rep.best_s));
	assert_true(rep.best_s <= rep.default_s);
	for (i = 0; i < s->n; i++)
		if (s->status[i] != TC_TUNE_OK && s->status[i] != TC_TUNE_CUT)
			fail_msg("candidate %d failed: %s", s->index[i], s->msg[i]);
	/* the final stage re-timed the defaults and some others; it chose one,
	 * the one returned, and its times are the report's */
	assert_true(rep.final_measured >= 2 && rep.final_measured <= 4);
	assert_int_equal(rep.final_rounds, 3);
	assert_int_equal(s->nfinal, rep.final_measured);
	assert_int_equal(s->findex[0], 0); /* the defaults first */
	{
		char *text = tc_options_print(best);
		int chosen = 0;
		for (i = 0; i < s->nfinal; i++) {
			assert_int_equal(s->fstatus[i], TC_TUNE_OK);
			assert_true(s->findex[i] >= 0 && s->findex[i] < s->n);
			if (s->fchosen[i]) {
				chosen++;
				assert_string_equal(s->fopts[i], text);
				assert_true(s->fmedian[i] == rep.best_s);
			}
		}
		assert_int_equal(chosen, 1);
		assert_true(s->fmedian[0] == rep.default_s);
		assert_int_equal(rep.defaults_won, !strcmp(s->fopts[0], text));
		tc_string_free(text);
	}
	/* the tuned kernel computes what the interpreter computes */
	tc_options_set(interp, "target", "interp", NULL);
	k1 = tc_compile(m, "matmul", in, 2, best);
	k2 = tc_compile(m, "matmul", in, 2, interp);
	assert_non_null(k1);
	assert_non_null(k2);
	assert_int_equal(tc_kernel_run(k1, in, 2, o1, 1), 0);
	assert_int_equal(tc_kernel_run(k2, in, 2, o2, 1), 0);
	for (i = 0; i < 32 * 32; i++) {
		float x = ((float *)C1.data)[i], y = ((float *)C2.data)[i];
		assert_true(fabsf(x - y) <= 1e-4f * (fabsf(y) + 1));
	}
	tc_kernel_free(k1);
	tc_kernel_free(k2);
	tc_options_free(best);
	tc_options_free(interp);
	tu_tensor_fini(&A);
	tu_tensor_fini(&B);
	tu_tensor_fini(&C1);
	tu_tensor_fini(&C2);
	free(s);
	tc_module_free(m);
	tc_context_free(ctx);
}

static void planted_faults_are_recorded_and_the_run_goes_on(void **state)
{
	tc_context *ctx = tc_context_new();
	tc_module *m = tc_module_parse(ctx, matmul_src, "mm.tc");
	int64_t sa[2] = {32, 32}, sb[2] = {32, 32};
	DLTensor A = {NULL, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sa, NULL, 0};
	DLTensor B = {NULL, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sb, NULL, 0};
	const DLTensor *in[2] = {&A, &B};
	tc_tune_settings st;
	tc_tune_report rep;
	tc_options *best = NULL, *best2 = NULL;
	seen *s = calloc(1, sizeof(seen));
	(void)state;
	assert_non_null(m);
	/* the first candidate hangs (no best yet: it runs into the timeout), the
	 * second crashes, the third is the reference, the fourth is wrong */
	assert_int_equal(tc_tune_test_faults("0:hang,1:crash,3:wrong"), 0);
	quick_settings(&st, s);
	if (tc_autotune(m, "matmul", in, 2, NULL, &st, &best, &rep) < 0)
		fail_msg("%s", tc_context_error(ctx));
	assert_int_equal(tc_tune_test_faults(NULL), 0);
	assert_int_equal(rep.generations, 2);
	assert_int_equal(status_of(s, 0), TC_TUNE_TIMEOUT);
	assert_int_equal(status_of(s, 1), TC_TUNE_CRASH);
	assert_int_equal(status_of(s, 2), TC_TUNE_OK);
	assert_int_equal(status_of(s, 3), TC_TUNE_WRONG);
	assert_false(isfinite(rep.default_s)); /* the defaults hung */
	assert_true(rep.failed >= 3);
	assert_true(rep.measured > 4); /* the second generation ran */
	assert_non_null(best);
	assert_true(isfinite(rep.best_s));
	assert_int_equal(tc_tune_test_faults("1:explode"), -1);
	/* a hang after a best is known is stopped by the timing budget */
	memset(s, 0, sizeof(*s));
	assert_int_equal(tc_tune_test_faults("1:hang"), 0);
	st.generations = 1;
	if (tc_autotune(m, "matmul", in, 2, NULL, &st, &best2, &rep) < 0)
		fail_msg("%s", tc_context_error(ctx));
	assert_int_equal(tc_tune_test_faults(NULL), 0);
	assert_int_equal(status_of(s, 1), TC_TUNE_CUT);
	assert_non_null(strstr(s->msg[1], "far slower than the best"));
	tc_options_free(best2);
	tc_options_free(best);
	free(s);
	tc_module_free(m);
	tc_context_free(ctx);
}

/* 32x32 shape-only inputs of matmul_src. */
static int64_t sq32[2] = {32, 32};
static DLTensor A32 = {NULL, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sq32, NULL, 0};
static DLTensor B32 = {NULL, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sq32, NULL, 0};

static void final_stage_is_not_fooled_by_a_decoy(void **state)
{
	tc_context *ctx = tc_context_new();
	tc_module *m = tc_module_parse(ctx, matmul_src, "mm.tc");
	const DLTensor *in[2] = {&A32, &B32};
	tc_tune_settings st;
	tc_tune_report rep;
	tc_options *best = NULL;
	seen *s = calloc(1, sizeof(seen));
	char *text;
	int i, d, fd = -1;
	(void)state;
	assert_non_null(m);
	/* candidate 1 reports a thousandth of its times in the search, so it
	 * is the search's best by far, and sleeps 2 ms a run when re-timed */
	assert_int_equal(tc_tune_test_faults("1:decoy"), 0);
	quick_settings(&st, s);
	st.generations = 1;
	if (tc_autotune(m, "matmul", in, 2, NULL, &st, &best, &rep) < 0)
		fail_msg("%s", tc_context_error(ctx));
	d = record_of(s, 1);
	for (i = 0; i < s->n; i++)
		assert_true(s->median[d] <= s->median[i]);
	assert_true(rep.search_best_s == s->median[d]);
	for (i = 0; i < s->nfinal; i++)
		if (!strcmp(s->fopts[i], s->opts[d]))
			fd = i;
	assert_true(fd > 0); /* it was re-timed ... */
	assert_int_equal(s->findex[fd], 1);
	assert_true(s->fmedian[fd] >= 2e-3); /* ... as slow as it is ... */
	assert_false(s->fchosen[fd]);        /* ... and not chosen */
	text = tc_options_print(best);
	assert_string_not_equal(text, s->opts[d]);
	assert_true(rep.best_s < 2e-3 && rep.best_s <= rep.default_s);
	tc_string_free(text);
	tc_options_free(best);
	best = NULL;
	/* without the final stage the search's best is returned: the decoy */
	memset(s, 0, sizeof(*s));
	st.final_candidates = 0;
	if (tc_autotune(m, "matmul", in, 2, NULL, &st, &best, &rep) < 0)
		fail_msg("%s", tc_context_error(ctx));
	assert_int_equal(tc_tune_test_faults(NULL), 0);
	text = tc_options_print(best);
	assert_string_equal(text, s->opts[record_of(s, 1)]);
	assert_int_equal(s->nfinal, 0);
	assert_int_equal(rep.final_measured, 0);
	assert_false(rep.defaults_won);
	assert_true(rep.best_s == rep.search_best_s && rep.best_s == s->median[record_of(s, 1)]);
	tc_string_free(text);
	tc_options_free(best);
	free(s);
	tc_module_free(m);
	tc_context_free(ctx);
}

static void final_stage_returns_the_defaults_when_they_are_fastest(void **state)
{
	tc_context *ctx = tc_context_new();
	tc_module *m = tc_module_parse(ctx, matmul_src, "mm.tc");
	const DLTensor *in[2] = {&A32, &B32};
	tc_tune_settings st;
	tc_tune_report rep;
	tc_options *best = NULL;
	seen *s = calloc(1, sizeof(seen));
	char path[256], *text, *def, *msg = NULL;
	tc_cache *c;
	tc_cache_key key;
	tc_cache_hit hit;
	int i;
	(void)state;
	assert_non_null(m);
	snprintf(path, sizeof(path), "%s/test_tune_final_%ld.sqlite", TC_BINARY_DIR,
		(long)getpid());
	tu_remove_db(path);
	/* every candidate but the defaults is a decoy: each looks far faster
	 * than the defaults in the search, and is slower when re-timed */
	assert_int_equal(tc_tune_test_faults("1:decoy,2:decoy,3:decoy"), 0);
	quick_settings(&st, s);
	st.generations = 1;
	st.use_cache = 1;
	st.cache_path = path;
	if (tc_autotune(m, "matmul", in, 2, NULL, &st, &best, &rep) < 0)
		fail_msg("%s", tc_context_error(ctx));
	assert_int_equal(tc_tune_test_faults(NULL), 0);
	assert_int_equal(s->n, 4);
	assert_true(rep.search_best_s < rep.search_default_s);
	assert_int_equal(rep.final_measured, 4);
	assert_true(rep.defaults_won);
	assert_true(rep.best_s == rep.default_s); /* a speedup of 1.00x */
	text = tc_options_print(best);
	def = tc_options_print(NULL);
	assert_string_equal(text, def);
	for (i = 0; i < s->nfinal; i++)
		assert_int_equal(s->fchosen[i], i == 0);
	/* the cache's best for these shapes is the choice, although the
	 * decoys' search rows have far smaller medians */
	c = tc_cache_open(path, TC_CACHE_READ, &msg);
	if (!c)
		fail_msg("%s", msg ? msg : "no cache file");
	assert_int_equal(tc_cache_key_init(&key, m, "matmul", in, 2), 0);
	memset(&hit, 0, sizeof(hit));
	assert_int_equal(tc_cache_lookup(c, &key, &hit), 1);
	assert_string_equal(hit.text, def);
	assert_true(fabs(hit.median_ms - rep.best_s * 1e3) < 1e-9 * (1 + hit.median_ms));
	tc_cache_hit_clear(&hit);
	tc_cache_key_clear(&key);
	tc_cache_close(c);
	tc_string_free(text);
	tc_string_free(def);
	tc_options_free(best);
	free(s);
	tu_remove_db(path);
	tc_module_free(m);
	tc_context_free(ctx);
}

static void bad_arguments_are_errors(void **state)
{
	tc_context *ctx = tc_context_new();
	tc_module *m = tc_module_parse(ctx, matmul_src, "mm.tc");
	int64_t sa[2] = {4, 5}, sb[2] = {6, 7};
	DLTensor A = {NULL, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sa, NULL, 0};
	DLTensor B = {NULL, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sb, NULL, 0};
	const DLTensor *in[2] = {&A, &B};
	tc_tune_settings st;
	tc_options *best = (tc_options *)1;
	(void)state;
	tc_tune_settings_init(&st);
	st.use_cache = 0;
	st.population = 0;
	assert_int_equal(tc_autotune(m, "matmul", in, 2, NULL, &st, &best, NULL), -1);
	assert_null(best);
	assert_non_null(strstr(tc_context_error(ctx), "population"));
	/* limits, checked before anything is allocated (100,000,000 took
	 * 4.8 GB before measuring anything) */
	st.population = 100000000;
	assert_int_equal(tc_autotune(m, "matmul", in, 2, NULL, &st, &best, NULL), -1);
	assert_non_null(strstr(tc_context_error(ctx), "population must be between 1 and 10000"));
	st.population = 4;
	st.generations = 10001;
	assert_int_equal(tc_autotune(m, "matmul", in, 2, NULL, &st, &best, NULL), -1);
	assert_non_null(strstr(tc_context_error(ctx), "generations must be between 1 and 10000"));
	st.generations = 5;
	st.tournament = 1000000;
	assert_int_equal(tc_autotune(m, "matmul", in, 2, NULL, &st, &best, NULL), -1);
	assert_non_null(strstr(tc_context_error(ctx), "tournament"));
	st.tournament = 2;
	st.final_candidates = -1;
	assert_int_equal(tc_autotune(m, "matmul", in, 2, NULL, &st, &best, NULL), -1);
	assert_non_null(strstr(tc_context_error(ctx), "final_candidates"));
	st.final_candidates = 3;
	st.final_rounds = 0;
	assert_int_equal(tc_autotune(m, "matmul", in, 2, NULL, &st, &best, NULL), -1);
	assert_non_null(strstr(tc_context_error(ctx), "final_rounds"));
	st.final_rounds = 5;
	assert_int_equal(tc_autotune(m, "matmul", in, 2, NULL, &st, &best, NULL), -1);
	assert_non_null(strstr(tc_context_error(ctx), "size K"));
	assert_int_equal(tc_autotune(m, "nope", in, 2, NULL, &st, &best, NULL), -1);
	assert_int_equal(tc_autotune(m, "matmul", in, 1, NULL, &st, &best, NULL), -1);
	tc_module_free(m);
	tc_context_free(ctx);
}

static void tuning_records_in_the_cache_and_seeds_from_it(void **state)
{
	tc_context *ctx = tc_context_new();
	tc_module *m = tc_module_parse(ctx, matmul_src, "mm.tc");
	int64_t sa[2] = {32, 32}, sb[2] = {32, 32};
	DLTensor A = {NULL, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sa, NULL, 0};
	DLTensor B = {NULL, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sb, NULL, 0};
	const DLTensor *in[2] = {&A, &B};
	char path[256], *text, *msg = NULL;
	tc_tune_settings st;
	tc_tune_report rep;
	tc_options *best = NULL, *best2 = NULL;
	seen *s = calloc(1, sizeof(seen));
	tc_cache *c;
	tc_cache_key key;
	tc_cache_hit hit;
	(void)state;
	snprintf(path, sizeof(path), "%s/test_tune_%ld.sqlite", TC_BINARY_DIR, (long)getpid());
	tu_remove_db(path);
	quick_settings(&st, s);
	st.use_cache = 1;
	st.cache_path = path;
	if (tc_autotune(m, "matmul", in, 2, NULL, &st, &best, &rep) < 0)
		fail_msg("%s", tc_context_error(ctx));
	text = tc_options_print(best);
	/* every candidate is in the cache; its best is the run's best */
	c = tc_cache_open(path, TC_CACHE_READ, &msg);
	if (!c)
		fail_msg("%s", msg ? msg : "no cache file");
	assert_int_equal(tc_cache_key_init(&key, m, "matmul", in, 2), 0);
	memset(&hit, 0, sizeof(hit));
	assert_int_equal(tc_cache_lookup(c, &key, &hit), 1);
	assert_string_equal(hit.text, text);
	tc_cache_hit_clear(&hit);
	tc_cache_key_clear(&key);
	tc_cache_close(c);
	/* a second run starts from the cache's best: it is measured in
	 * generation 0 (first after the base, which the defaults are) */
	memset(s, 0, sizeof(*s));
	st.seed = 8;
	st.generations = 1;
	if (tc_autotune(m, "matmul", in, 2, NULL, &st, &best2, &rep) < 0)
		fail_msg("%s", tc_context_error(ctx));
	assert_true(rep.best_s <= rep.default_s);
	{
		int i, found = 0;
		for (i = 0; i < s->n; i++)
			found |= !strcmp(s->opts[i], text);
		assert_true(found); /* a single generation: the cache's best was a seed */
	}
	tc_string_free(text);
	tc_options_free(best);
	tc_options_free(best2);
	free(s);
	tu_remove_db(path);
	tc_module_free(m);
	tc_context_free(ctx);
}

/* Run "tcomp ARGS" with the shell; its exit status, output in out. */
static int run_tcomp(char *out, size_t n, const char *args)
{
	char cmd[2048], file[256];
	FILE *fp;
	size_t got;
	int st;
	snprintf(file, sizeof(file), "%s/test_tune_%ld.out", TC_BINARY_DIR, (long)getpid());
	snprintf(cmd, sizeof(cmd), "cd %s && %s/tcomp %s > %s 2>&1", TC_SOURCE_DIR, TC_BINARY_DIR,
		args, file);
	st = system(cmd);
	fp = fopen(file, "rb");
	got = fp ? fread(out, 1, n - 1, fp) : 0;
	out[got] = 0;
	if (fp)
		fclose(fp);
	unlink(file);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void cli_autotune_prints_the_best_options(void **state)
{
	static char out1[65536], out2[65536];
	const char *args = "autotune examples/matmul.tc -e matmul --shape A=32x32 --shape B=32x32 "
		"--generations 2 --population 3 --seed 5 --no-cache --timeout 1 --runs 2 "
		"--min-time 0.001 --threads 1 --jobs 2 --final-rounds 2 --final-time 0.001 "
		"--cutoff 1000000 "
		"--final-warmup 0.001";
	char cmd[1024];
	const char *p1, *p2;
	(void)state;
	assert_int_equal(run_tcomp(out1, sizeof(out1), args), 0);
	assert_non_null(strstr(out1, "gen 1/2  candidate 1/"));
	assert_non_null(strstr(out1, "x speedup over the defaults"));
	assert_non_null(strstr(out1, "\n# final stage: "));
	assert_non_null(strstr(out1, " over 2 rounds"));
	assert_non_null(strstr(out1, "\n#  * ")); /* the choice is marked */
	assert_non_null(strstr(out1, "(defaults) target=cpu;"));
	assert_non_null(strstr(out1, "\n# search: best "));
	assert_non_null(strstr(out1, "final round 2/2  re-timing "));
	assert_non_null(strstr(out1, "\ntarget=cpu\norder="));
	assert_non_null(strstr(out1, "\nthreads=1\n")); /* --threads fixes the option */
	/* the same seed makes the same choices: the same candidates in order */
	assert_int_equal(run_tcomp(out2, sizeof(out2), args), 0);
	/* (generation 1 only: later ones depend on the measured times) */
	for (p1 = out1, p2 = out2; (p1 = strstr(p1, "gen 1/2")) && (p2 = strstr(p2, "gen 1/2"));
		p1++, p2++) {
		p1 = strstr(p1, "target=cpu;");
		p2 = strstr(p2, "target=cpu;");
		assert_non_null(p1);
		assert_non_null(p2);
		assert_memory_equal(p1, p2, strcspn(p1, " \n"));
	}
	/* a planted crash is reported and the run finishes */
	snprintf(cmd, sizeof(cmd), "%s", args);
	setenv("TCOMP_TUNE_TEST_FAULTS", "1:crash", 1);
	assert_int_equal(run_tcomp(out1, sizeof(out1), cmd), 0);
	unsetenv("TCOMP_TUNE_TEST_FAULTS");
	assert_non_null(strstr(out1, "crashed"));
	assert_non_null(strstr(out1, "(1 failed"));
	/* usage errors */
	assert_int_equal(run_tcomp(out1, sizeof(out1), "autotune examples/matmul.tc "
		"--shape A=32x32 --shape B=32x32 --generations 0"), 1);
	assert_non_null(strstr(out1, "--generations needs an integer of at least 1"));
	assert_int_equal(run_tcomp(out1, sizeof(out1), "autotune examples/matmul.tc "
		"-e matmul --shape A=32x32"), 1);
	assert_non_null(strstr(out1, "no --shape or --in for input 'B'"));
	assert_int_equal(run_tcomp(out1, sizeof(out1), "autotune --help"), 0);
	assert_non_null(strstr(out1, "usage: tcomp autotune"));
}

/* tcomp autotune --option target=cuda-emu runs end to end (candidates
 * emulated in child processes) and stores its choice in the kernel cache
 * under cuda-emu's own key: tcomp bench --target cuda-emu takes it
 * (source "cache", GPU options), a CPU compile does not (neither tcomp
 * bench without options nor tc_compile without options, even taking the
 * cache's result options); the entry's options, compiled, run the
 * emulated kernel equal to C loops on fresh random data. */
static void cli_autotune_cuda_emu_stores_what_tc_compile_reads(void **state)
{
	static char out[65536];
	enum { M = 24, K = 16, N = 8 };
	char args[1024], cache[256], shapes[64];
	tc_context *ctx;
	tc_module *m;
	tc_kernel *k;
	tc_options *emu;
	tc_cache *cc;
	tc_cache_key key;
	tc_cache_hit hit;
	char *opts;
	float a[M * K], b[K * N], c[M * N];
	int64_t sa[2] = {M, K}, sb[2] = {K, N}, sc[2] = {M, N};
	DLTensor A = {a, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sa, NULL, 0};
	DLTensor B = {b, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sb, NULL, 0};
	DLTensor C = {c, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sc, NULL, 0};
	const DLTensor *in[2] = {&A, &B};
	DLTensor *outs[1] = {&C};
	uint64_t rs = tu_seed("cuda-emu tune", 1);
	int i, j, r;
	(void)state;
	snprintf(cache, sizeof(cache), "%s/test_tune_emu_%ld.sqlite", TC_BINARY_DIR, (long)getpid());
	snprintf(shapes, sizeof(shapes), "--shape A=%dx%d --shape B=%dx%d", M, K, K, N);
	tu_remove_db(cache);
	snprintf(args, sizeof(args), "autotune examples/matmul.tc -e matmul %s "
		"--option target=cuda-emu --generations 1 --population 3 --seed 3 "
		"--cache %s --timeout 20 --runs 1 --min-time 0.001 --jobs 2 --final-candidates 1 "
		"--final-rounds 1 --final-time 0.001 --final-warmup 0.001", shapes, cache);
	assert_int_equal(run_tcomp(out, sizeof(out), args), 0);
	assert_non_null(strstr(out, "\ntarget=cuda-emu\n"));
	assert_non_null(strstr(out, "block=")); /* the GPU options are printed */
	assert_null(strstr(out, "failed)"));
	/* tcomp bench --target cuda-emu alone reads cuda-emu's entry */
	snprintf(args, sizeof(args), "bench examples/matmul.tc -e matmul %s --target cuda-emu "
		"--runs 1 --warmup 0 --min-time 0 --json --cache %s", shapes, cache);
	assert_int_equal(run_tcomp(out, sizeof(out), args), 0);
	if (!strstr(out, "\"source\":\"cache\""))
		fail_msg("bench --target cuda-emu did not take the cache's entry:\n%s", out);
	assert_non_null(strstr(out, "target=cuda-emu"));
	/* a CPU run does not: its key is another */
	snprintf(args, sizeof(args), "bench examples/matmul.tc -e matmul %s --runs 1 --warmup 0 "
		"--min-time 0 --json --cache %s --cache-result-options", shapes, cache);
	assert_int_equal(run_tcomp(out, sizeof(out), args), 0);
	if (!strstr(out, "\"source\":\"default\"") || strstr(out, "cuda-emu"))
		fail_msg("a CPU bench took the cuda-emu entry:\n%s", out);
	ctx = tc_context_new();
	assert_int_equal(tc_context_set_cache(ctx, cache), 0);
	assert_int_equal(tc_context_set_cache_result_options(ctx, 1), 0);
	m = tc_module_load(ctx, TC_SOURCE_DIR "/examples/matmul.tc");
	assert_non_null(m);
	k = tc_compile(m, "matmul", in, 2, NULL);
	if (!k)
		fail_msg("%s", tc_context_error(ctx));
	assert_string_equal(tc_kernel_options_source(k), "default");
	opts = tc_kernel_options(k);
	assert_non_null(strstr(opts, "target=cpu\n"));
	tc_string_free(opts);
	tc_kernel_free(k);
	/* the entry under cuda-emu's key: GPU options that compute matmul */
	emu = tc_options_new();
	assert_int_equal(tc_options_set(emu, "target", "cuda-emu", NULL), 0);
	assert_int_equal(tc_cache_key_init_for(&key, m, "matmul", in, 2, emu, NULL), 0);
	assert_int_equal(strncmp(key.target, "cuda-emu;", 9), 0);
	cc = tc_cache_open(cache, TC_CACHE_READ, NULL);
	assert_non_null(cc);
	memset(&hit, 0, sizeof(hit));
	assert_int_equal(tc_cache_lookup(cc, &key, &hit), 1);
	assert_string_equal(tc_options_get(hit.options, "target"), "cuda-emu");
	assert_non_null(strstr(hit.text, "block="));
	k = tc_compile(m, "matmul", in, 2, hit.options);
	if (!k)
		fail_msg("%s", tc_context_error(ctx));
	for (i = 0; i < M * K; i++)
		a[i] = (float)(tu_rand_unit(&rs) * 2 - 1);
	for (i = 0; i < K * N; i++)
		b[i] = (float)(tu_rand_unit(&rs) * 2 - 1);
	for (i = 0; i < M * N; i++)
		c[i] = NAN;
	if (tc_kernel_run(k, in, 2, outs, 1) < 0)
		fail_msg("%s", tc_context_error(ctx));
	for (i = 0; i < M; i++)
		for (j = 0; j < N; j++) {
			double sum = 0;
			for (r = 0; r < K; r++)
				sum += (double)a[i * K + r] * b[r * N + j];
			assert_true(fabs(c[i * N + j] - sum) <= 1e-5 * (1 + fabs(sum)));
		}
	tc_kernel_free(k);
	tc_cache_hit_clear(&hit);
	tc_cache_close(cc);
	tc_cache_key_clear(&key);
	tc_options_free(emu);
	tc_module_free(m);
	tc_context_free(ctx);
	tu_remove_db(cache);
}

static double tc_tune_now_for_tests(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Where no CUDA driver opens (a missing library; the toolkit's stub,
 * which answers CUDA_ERROR_STUB_LIBRARY), tcomp autotune --option
 * target=cuda fails once with the driver's reason and a user error's exit
 * status, quickly (the probe child asks; no candidate is started) and
 * writes nothing: the cache file is not even made. */
static void cli_autotune_cuda_without_a_driver_fails_cleanly(void **state)
{
	static char out[65536];
	const char *stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
	char args[1024], cache[256];
	const char *p;
	double t0;
	int n;
	(void)state;
	snprintf(cache, sizeof(cache), "%s/test_tune_cuda_%ld.sqlite", TC_BINARY_DIR,
		(long)getpid());
	tu_remove_db(cache);
	snprintf(args, sizeof(args), "autotune examples/matmul.tc -e matmul --shape A=8x8 "
		"--shape B=8x8 --option target=cuda --generations 1 --population 2 --cache %s",
		cache);
	setenv("TCOMP_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
	t0 = tc_tune_now_for_tests();
	assert_int_equal(run_tcomp(out, sizeof(out), args), 1);
	assert_true(tc_tune_now_for_tests() - t0 < 10);
	if (!strstr(out, "tcomp: error: target=cuda: no CUDA driver: /nonexistent/libcuda.so.1 "
			 "not found"))
		fail_msg("%s", out);
	for (n = 0, p = out; (p = strstr(p, "no CUDA driver")); p++)
		n++;
	assert_int_equal(n, 1);
	assert_int_equal(access(cache, F_OK), -1);
	if (!access(stub, R_OK)) {
		setenv("TCOMP_CUDA_DRIVER", stub, 1);
		assert_int_equal(run_tcomp(out, sizeof(out), args), 1);
		if (!strstr(out, "tcomp: error: target=cuda: CUDA driver") ||
			!strstr(out, "cuInit failed: CUDA_ERROR_STUB_LIBRARY"))
			fail_msg("%s", out);
		assert_int_equal(access(cache, F_OK), -1);
	}
	unsetenv("TCOMP_CUDA_DRIVER");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(rng_depends_on_the_seed_alone),
		cmocka_unit_test(space_is_read_from_the_option_table),
		cmocka_unit_test(options_set_by_the_base_are_fixed),
		cmocka_unit_test(interchange_is_searched_with_auto_drawn_often),
		cmocka_unit_test(gpu_targets_search_the_mapping),
		cmocka_unit_test(selection_prefers_the_fitter),
		cmocka_unit_test(crossover_takes_each_option_from_a_parent),
		cmocka_unit_test(mutation_rate_is_respected),
		cmocka_unit_test(search_memoises_replaces_and_keeps_elites),
		cmocka_unit_test(search_is_reproducible_with_a_seed),
		cmocka_unit_test(search_stops_when_asked),
		cmocka_unit_test(search_keeps_the_best_distinct_configurations),
		cmocka_unit_test(final_stage_returns_what_is_fastest_on_a_second_look),
		cmocka_unit_test(final_stage_keeps_the_defaults_unless_beaten_beyond_noise),
		cmocka_unit_test(tuned_matmul_matches_the_interpreter),
		cmocka_unit_test(planted_faults_are_recorded_and_the_run_goes_on),
		cmocka_unit_test(final_stage_is_not_fooled_by_a_decoy),
		cmocka_unit_test(final_stage_returns_the_defaults_when_they_are_fastest),
		cmocka_unit_test(bad_arguments_are_errors),
		cmocka_unit_test(tuning_records_in_the_cache_and_seeds_from_it),
		cmocka_unit_test(cli_autotune_prints_the_best_options),
		cmocka_unit_test(cli_autotune_cuda_emu_stores_what_tc_compile_reads),
		cmocka_unit_test(cli_autotune_cuda_without_a_driver_fails_cleanly),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
