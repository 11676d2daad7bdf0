/* The autotuner's option space: for every row of the option table
 * (runtime/options.c, read through its row accessors, never copied) a
 * discrete set of candidate values.
 *
 * Generators (documented for users in tcomp.h's autotuner section):
 *   enum options      the words of the range (order, parallel, fusion, ...)
 *   tile              the range's words (auto, none) and lists of one size
 *                     per loop of the deepest statement (shape->depth), each
 *                     size a power of two from 8 or three times one from 24
 *                     (BLIS-like blocks such as 48, 96, 192, 384) below the
 *                     largest extent, or that extent itself (which leaves
 *                     the member untiled: one tile covers it)
 *   regtile           the words and R,V*lanes for R rows 1..8 and V vector
 *                     registers 1..4 (lanes: elements per 64-byte register)
 *   threads           the words (auto) and 1..ncpu (every count up to 8,
 *                     then powers of two and ncpu)
 *   interchange       auto and orders of the tiled band's first members that
 *                     keep its innermost in place: 1,0 for statements of 3
 *                     loops or more, and the other four orders of 3 for 4
 *                     or more; kept as words; random genomes draw auto
 *                     half the time, so most keep the order pass's order
 *   other INT options the words and the powers of two in the range up to
 *                     65536; other LIST options their words only
 * target, gpu_arch, cpu, contract and fastmath are fixed (target, gpu_arch
 * and cpu choose the machine, contract and fastmath change results), as is every
 * option the base options set explicitly.
 *
 * Which options are searched depends on the base's target:
 *   cpu           everything above but the GPU's mapping options (block,
 *                 grid, reduce, reduce_threads, reduce_map, shared,
 *                 shared_tile), which the CPU ignores
 *   cuda, cuda-emu  block, grid, reduce, reduce_threads, reduce_map, shared,
 *                 shared_tile, fusion, order, inline and share only; the
 *                 CPU's code options (tile, regtile, unroll, unroll_inner,
 *                 vector, pack, parallel, threads, stream, vecreduce,
 *                 interchange) are fixed at the base's values, since the
 *                 GPU mapping ignores them
 *   block         auto (drawn a quarter of the time) and lists of 1 to 3
 *                 sizes of at most 1024 threads in all, x a multiple of the
 *                 warp (32) but for a few square 2-D and 3-D shapes
 *   grid          auto (drawn a quarter of the time) and caps of 16 to 4096
 *                 blocks in x (fewer blocks than tiles: grid-stride loops)
 * Values outside these sets (a seed's, a fixed value) are kept as extra
 * values of their option. */
#include "tune.h"

#include "../runtime/options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the PRNG ---- */

void tc_tune_rng_seed(tc_tune_rng *r, uint64_t seed)
{
	r->s = seed;
}

/* splitmix64 (Steele, Lea and Flood): every seed, 0 included, is fine. */
uint64_t tc_tune_rng_next(tc_tune_rng *r)
{
	uint64_t z = (r->s += 0x9E3779B97F4A7C15ULL);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

int64_t tc_tune_rng_below(tc_tune_rng *r, int64_t n)
{
	uint64_t lim, x;
	if (n <= 1)
		return 0;
	/* rejection keeps it uniform */
	lim = UINT64_MAX - UINT64_MAX % (uint64_t)n;
	do
		x = tc_tune_rng_next(r);
	while (x >= lim);
	return (int64_t)(x % (uint64_t)n);
}

double tc_tune_rng_unit(tc_tune_rng *r)
{
	return (double)(tc_tune_rng_next(r) >> 11) * 0x1p-53;
}

/* ---- building the dims ---- */

static tc_stat push_str(char ***v, int *n, const char *s, size_t len)
{
	char **t = tc_realloc(*v, (size_t)(*n + 1) * sizeof(char *));
	if (!t)
		return TC_ERR;
	*v = t;
	if (!(t[*n] = tc_strndup(s, len)))
		return TC_ERR;
	(*n)++;
	return TC_OK;
}

/* The words of a '|'-separated range (alternatives without ".."). */
static tc_stat range_words(tc_tune_dim *d, const char *range)
{
	const char *p = range;
	while (*p) {
		const char *bar = strchr(p, '|');
		size_t n = bar ? (size_t)(bar - p) : strlen(p);
		int interval = 0;
		size_t i;
		for (i = 0; i + 1 < n; i++)
			interval |= p[i] == '.' && p[i + 1] == '.';
		if (!interval && n && push_str(&d->words, &d->nwords, p, n) < 0)
			return TC_ERR;
		p += n + (bar ? 1 : 0);
	}
	return TC_OK;
}

/* Whether the single integer v is a valid value of row (inside an interval). */
static int int_allowed(int row, int64_t v)
{
	char text[32], *canon = NULL;
	int ok;
	snprintf(text, sizeof(text), "%lld", (long long)v);
	ok = tc_rt_opt_value(tc_rt_opt_type(row), tc_rt_opt_range(row), text, &canon) == 0;
	tc_free(canon);
	return ok;
}

/* Add size v to position p of d if the option allows it and it is new. */
static tc_stat add_size(tc_tune_dim *d, int p, int64_t v)
{
	int64_t *t;
	int i;
	if (!int_allowed(d->row, v))
		return TC_OK;
	for (i = 0; i < d->nsizes[p]; i++)
		if (d->sizes[p][i] == v)
			return TC_OK;
	if (!(t = tc_realloc(d->sizes[p], (size_t)(d->nsizes[p] + 1) * sizeof(int64_t))))
		return TC_ERR;
	d->sizes[p] = t;
	t[d->nsizes[p]++] = v;
	return TC_OK;
}

/* Tile sizes: powers of two from 8 and three times them from 24 below
 * extent, then extent itself (one tile: untiled). */
static tc_stat tile_sizes(tc_tune_dim *d, int p, int64_t extent)
{
	int64_t v;
	for (v = 8; v < extent && v <= 65536; v *= 2)
		if (add_size(d, p, v) < 0 || (3 * v < extent && add_size(d, p, 3 * v) < 0))
			return TC_ERR;
	return add_size(d, p, extent < 65536 ? extent : 65536);
}

/* The block shapes the GPU search draws from (words: the generated values'
 * positions are independent, which cannot keep a product under 1024). */
static const char *const gpu_blocks[] = {"32", "64", "128", "256", "512", "1024", "32,2",
	"32,4", "32,8", "32,16", "32,32", "64,2", "64,4", "64,8", "64,16", "128,2", "128,4",
	"128,8", "256,2", "256,4", "16,16", "8,8", "32,2,2", "32,4,2", "32,4,4", "32,8,4",
	"8,8,8"};
static const char *const gpu_grids[] = {"16", "64", "256", "1024", "4096"};

/* The GPU mapping's own options (polyhedral/gpu.c and codegen/cuda.c read
 * them; the CPU's passes ignore them): searched for GPU targets only, each
 * with its range's words but block and grid (gpu_blocks, gpu_grids).
 * gpu_arch is not among them: it is fixed (the device's). A new GPU
 * mapping option goes here -- the shared-memory promotion's `shared`, or
 * another reduction option, once the option table has it. */
static const char *const gpu_only[] = {"block", "grid", "reduce", "reduce_threads", "reduce_map",
	"shared", "shared_tile"};
/* The schedule options the GPU passes read as the CPU's do: searched for
 * every target. */
static const char *const gpu_also[] = {"fusion", "order", "inline", "share"};

static int listed(const char *name, const char *const *list, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++)
		if (!strcmp(name, list[i]))
			return 1;
	return 0;
}

/* Whether option name is searched for a GPU target (cuda, cuda-emu). */
static int gpu_searched(const char *name)
{
	return listed(name, gpu_only, sizeof(gpu_only) / sizeof(gpu_only[0])) ||
		listed(name, gpu_also, sizeof(gpu_also) / sizeof(gpu_also[0]));
}

/* Whether option name is the GPU mapping's alone (never searched for the
 * CPU). */
static int gpu_option(const char *name)
{
	return listed(name, gpu_only, sizeof(gpu_only) / sizeof(gpu_only[0]));
}

/* Whether base's target runs on a GPU's mapping (cuda, cuda-emu). */
static int gpu_target(const tc_options *base)
{
	return !strncmp(tc_options_get(base, "target"), "cuda", 4);
}

/* d's values: the words of list (n of them) after auto, auto drawn with
 * probability first. */
static tc_stat gpu_words(tc_tune_dim *d, const char *const *list, int n)
{
	int k;
	if (push_str(&d->words, &d->nwords, "auto", 4) < 0)
		return TC_ERR;
	for (k = 0; k < n; k++)
		if (push_str(&d->words, &d->nwords, list[k], strlen(list[k])) < 0)
			return TC_ERR;
	d->first = 0.25;
	d->count = d->nwords;
	return TC_OK;
}

static tc_stat build_dim(tc_tune_dim *d, const tc_options *base, const tc_tune_shape *sh)
{
	const char *name = d->name;
	tc_opt_type type = tc_rt_opt_type(d->row);
	int p, k, gpu = gpu_target(base);
	d->searched = strcmp(name, "target") && strcmp(name, "contract") &&
		strcmp(name, "fastmath") && strcmp(name, "sizes") && strcmp(name, "gpu_arch") &&
		strcmp(name, "cpu") &&
		(gpu ? gpu_searched(name) : !gpu_option(name)) &&
		!tc_rt_options_is_set(base, d->row);
	if (!d->searched) {
		const char *v = tc_options_get(base, name);
		if (push_str(&d->extra, &d->nextra, v, strlen(v)) < 0)
			return TC_ERR;
		d->count = 1;
		return TC_OK;
	}
	if (!strcmp(name, "block"))
		return gpu_words(d, gpu_blocks, (int)(sizeof(gpu_blocks) / sizeof(gpu_blocks[0])));
	if (!strcmp(name, "grid"))
		return gpu_words(d, gpu_grids, (int)(sizeof(gpu_grids) / sizeof(gpu_grids[0])));
	if (range_words(d, tc_rt_opt_range(d->row)) < 0)
		return TC_ERR;
	if (!strcmp(name, "tile")) {
		d->npos = sh->depth < 1 ? 1 : sh->depth > TC_TUNE_MAX_POS ? TC_TUNE_MAX_POS
									: sh->depth;
		for (p = 0; p < d->npos; p++)
			if (tile_sizes(d, p, sh->extent > 1 ? sh->extent : 1) < 0)
				return TC_ERR;
	} else if (!strcmp(name, "regtile")) {
		d->npos = 2;
		for (k = 1; k <= 8; k++)
			if (add_size(d, 0, k) < 0)
				return TC_ERR;
		for (k = 1; k <= 4; k++)
			if (add_size(d, 1, (int64_t)k * (sh->lanes > 0 ? sh->lanes : 1)) < 0)
				return TC_ERR;
	} else if (!strcmp(name, "threads")) {
		d->npos = 1;
		for (k = 1; k <= sh->ncpu; k = k < 8 ? k + 1 : 2 * k)
			if (add_size(d, 0, k) < 0)
				return TC_ERR;
		if (sh->ncpu > 1 && add_size(d, 0, sh->ncpu) < 0)
			return TC_ERR;
	} else if (!strcmp(name, "interchange")) {
		/* a word per order: they do not fit the generated values'
		 * digits, which pick each position's value independently.
		 * Only orders that leave the innermost loop (the order pass's
		 * stride-1 choice) in place: moving it made matmul 1024 run
		 * 3.7 to 11 s against 9.8 ms, a full run of each such
		 * candidate before the tuner could cut it */
		static const char *const perms[] = {"1,0", "0,2,1", "1,2,0", "2,0,1", "2,1,0"};
		int nperm = sh->depth >= 4 ? 5 : sh->depth == 3 ? 1 : 0;
		for (k = 0; k < nperm; k++)
			if (push_str(&d->words, &d->nwords, perms[k], strlen(perms[k])) < 0)
				return TC_ERR;
		d->first = 0.5;
	} else if (type == TC_OPT_INT) {
		d->npos = 1;
		for (k = 0; k <= 16; k++)
			if (add_size(d, 0, (int64_t)1 << k) < 0)
				return TC_ERR;
	}
	/* the product of the positions' size counts, checked: a deep nest of
	 * large extents (27 tile sizes at each of 14 positions) would overflow
	 * int64, so the positions from the first that does not fit (with room
	 * for the words and extras) on are not searched: the generated lists
	 * end before them */
	d->ngen = d->npos ? 1 : 0;
	for (p = 0; p < d->npos; p++) {
		int64_t n;
		if (__builtin_mul_overflow(d->ngen, (int64_t)d->nsizes[p], &n) || n > INT64_MAX / 4) {
			d->npos = p;
			break;
		}
		d->ngen = n;
	}
	if (d->npos && !d->ngen) /* a position without sizes: no generated values */
		d->npos = 0;
	d->count = d->nwords + d->ngen;
	return TC_OK;
}

__tc_give tc_tune_space *tc_tune_space_new(__tc_keep const tc_options *base,
	const tc_tune_shape *shape)
{
	tc_tune_space *s = tc_calloc(1, sizeof(*s));
	int i;
	if (!s)
		return NULL;
	s->n = tc_rt_opt_count();
	if (!(s->d = tc_calloc((size_t)s->n, sizeof(tc_tune_dim))))
		goto error;
	for (i = 0; i < s->n; i++) {
		s->d[i].row = i;
		s->d[i].name = tc_rt_opt_name(i);
		if (build_dim(&s->d[i], base, shape) < 0)
			goto error;
	}
	return s;
error:
	tc_tune_space_free(s);
	return NULL;
}

void tc_tune_space_free(__tc_take tc_tune_space *s)
{
	int i, j;
	if (!s)
		return;
	for (i = 0; s->d && i < s->n; i++) {
		tc_tune_dim *d = &s->d[i];
		for (j = 0; j < d->nwords; j++)
			tc_free(d->words[j]);
		for (j = 0; j < d->nextra; j++)
			tc_free(d->extra[j]);
		for (j = 0; j < TC_TUNE_MAX_POS; j++)
			tc_free(d->sizes[j]);
		tc_free(d->words);
		tc_free(d->extra);
	}
	tc_free(s->d);
	tc_free(s);
}

/* ---- values ---- */

void tc_tune_space_value(__tc_keep const tc_tune_space *s, int i, int64_t v, __tc_keep tc_buf *b)
{
	const tc_tune_dim *d = &s->d[i];
	int p;
	if (v < d->nwords) {
		tc_buf_puts(b, d->words[v]);
		return;
	}
	v -= d->nwords;
	if (v < d->ngen) {
		for (p = 0; p < d->npos; p++) {
			tc_buf_printf(b, "%s%lld", p ? "," : "",
				(long long)d->sizes[p][v % d->nsizes[p]]);
			v /= d->nsizes[p];
		}
		return;
	}
	v -= d->ngen;
	tc_buf_puts(b, v < d->nextra ? d->extra[v] : "?");
}

__tc_give tc_options *tc_tune_space_options(__tc_keep const tc_tune_space *s,
	__tc_keep const int64_t *g)
{
	tc_options *o = tc_options_new();
	tc_buf b;
	int i;
	if (!o)
		return NULL;
	for (i = 0; i < s->n; i++) {
		int bad;
		tc_buf_init(&b);
		tc_tune_space_value(s, i, g[i], &b);
		bad = b.oom || tc_options_set(o, s->d[i].name, b.s ? b.s : "", NULL) < 0;
		tc_buf_free(&b);
		if (bad) {
			tc_options_free(o);
			return NULL;
		}
	}
	return o;
}

__tc_give char *tc_tune_space_key(__tc_keep const tc_tune_space *s, __tc_keep const int64_t *g)
{
	tc_options *o = tc_tune_space_options(s, g);
	char *k = o ? tc_options_print(o) : NULL;
	tc_options_free(o);
	return k;
}

/* The index of generated value text in d, or -1. */
static int64_t find_generated(const tc_tune_dim *d, const char *text)
{
	int64_t v = 0, mul = 1;
	int p, j;
	const char *q = text;
	for (p = 0; p < d->npos; p++) {
		char *end;
		long long x = strtoll(q, &end, 10);
		if (end == q || (p + 1 < d->npos ? *end != ',' : *end != 0))
			return -1;
		for (j = 0; j < d->nsizes[p] && d->sizes[p][j] != x; j++)
			;
		if (j == d->nsizes[p])
			return -1;
		v += mul * j;
		mul *= d->nsizes[p];
		q = end + 1;
	}
	return d->npos ? v : -1;
}

tc_stat tc_tune_space_genome(__tc_keep tc_tune_space *s, __tc_keep const tc_options *o,
	__tc_keep int64_t *g)
{
	int i, j;
	for (i = 0; i < s->n; i++) {
		tc_tune_dim *d = &s->d[i];
		const char *text = tc_options_get(o, d->name);
		int64_t v;
		if (!d->searched) {
			g[i] = 0;
			continue;
		}
		for (j = 0; j < d->nwords && strcmp(d->words[j], text); j++)
			;
		if (j < d->nwords) {
			g[i] = j;
			continue;
		}
		if ((v = find_generated(d, text)) >= 0) {
			g[i] = d->nwords + v;
			continue;
		}
		for (j = 0; j < d->nextra && strcmp(d->extra[j], text); j++)
			;
		if (j == d->nextra) {
			if (push_str(&d->extra, &d->nextra, text, strlen(text)) < 0)
				return TC_ERR;
			d->count++;
		}
		g[i] = d->nwords + d->ngen + j;
	}
	return TC_OK;
}

void tc_tune_space_random(__tc_keep const tc_tune_space *s, tc_tune_rng *r, __tc_keep int64_t *g)
{
	int i;
	for (i = 0; i < s->n; i++) {
		const tc_tune_dim *d = &s->d[i];
		if (!d->searched)
			g[i] = 0;
		else if (d->first > 0 && d->count > 1)
			g[i] = tc_tune_rng_unit(r) < d->first ? 0 : 1 + tc_tune_rng_below(r, d->count - 1);
		else
			g[i] = tc_tune_rng_below(r, d->count);
	}
}

/* ---- genetic operators ---- */

void tc_tune_crossover(__tc_keep const tc_tune_space *s, tc_tune_rng *r, __tc_keep const int64_t *a,
	__tc_keep const int64_t *b, __tc_keep int64_t *child)
{
	int i;
	for (i = 0; i < s->n; i++)
		child[i] = !s->d[i].searched ? 0 : (tc_tune_rng_next(r) >> 63) ? b[i] : a[i];
}

void tc_tune_mutate(__tc_keep const tc_tune_space *s, tc_tune_rng *r, __tc_keep int64_t *g,
	double rate)
{
	int i;
	for (i = 0; i < s->n; i++) {
		int64_t v;
		if (!s->d[i].searched || s->d[i].count < 2 || !(tc_tune_rng_unit(r) < rate))
			continue;
		v = tc_tune_rng_below(r, s->d[i].count - 1); /* any other value */
		g[i] = v >= g[i] ? v + 1 : v;
	}
}

int tc_tune_select(tc_tune_rng *r, __tc_keep const double *times, int n, int size)
{
	int best = (int)tc_tune_rng_below(r, n), k;
	for (k = 1; k < size; k++) {
		int c = (int)tc_tune_rng_below(r, n);
		if (times[c] < times[best] || (times[c] == times[best] && c < best))
			best = c;
	}
	return best;
}
