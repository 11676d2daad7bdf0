/* Parallel loops: the parallel pass (tc_poly_pass_parallel).
 *
 * Marks the outermost band of every top-level loop nest whose first member
 * is coincident (carries no dependence) with TC_POLY_MARK_PARALLEL, split
 * after that member, when the nest has work enough to share among threads;
 * a permutable band whose first member carries a dependence but a later
 * one does not gets a loop over chunks of that member above it, one per
 * thread, marked instead (strip_parallel); a band whose first member
 * walks the rows of partial sums (ir/partial.c) gets a loop over their
 * chunks of rows above it, marked (tc_poly_partial_chunks).
 * Code generators outline the marked loop and hand its iterations to the
 * runtime's pool.
 *
 * The work threshold is the target's (parallel_min_instances, ir/target.h).
 * Uses the model (poly.h) and the band helpers (band.h); must not know the
 * other passes or the order they run in (schedule.c). */
#include "band.h"
#include "passes.h"

#include <isl/id.h>
#include <isl/ilp.h>
#include <isl/aff.h>
#include <isl/schedule_node.h>
#include <isl/union_map.h>
#include <isl/union_set.h>
#include <isl/val.h>

#include <string.h>

/* The instances of the register tiles below node (under a
 * TC_POLY_MARK_REGTILE mark) into *tiled, and the widest element among
 * their statements' outputs into *size. */
typedef struct regtile_ctx {
	const tc_poly *p;
	isl_union_set *tiled;
	int size;
} regtile_ctx;

static isl_stat widest_cb(isl_set *set, void *user)
{
	regtile_ctx *rc = user;
	const tc_poly_stmt *st = tc_poly_find_stmt(rc->p, isl_set_get_tuple_name(set));
	int size = st ? tc_dtype_size(rc->p->f->tensors[st->ir->tensor].dtype) : 0;
	if (size > rc->size)
		rc->size = size;
	isl_set_free(set);
	return isl_stat_ok;
}

static isl_bool regtile_cb(isl_schedule_node *node, void *user)
{
	regtile_ctx *rc = user;
	isl_id *id;
	int tile;
	if (isl_schedule_node_get_type(node) != isl_schedule_node_mark)
		return isl_bool_true;
	id = isl_schedule_node_mark_get_id(node);
	tile = id && !strcmp(isl_id_get_name(id), TC_POLY_MARK_REGTILE);
	isl_id_free(id);
	if (tile) {
		isl_union_set *dom = isl_schedule_node_get_domain(node);
		isl_union_set_foreach_set(dom, widest_cb, rc);
		rc->tiled = isl_union_set_union(rc->tiled, dom);
	}
	return tile ? isl_bool_false : isl_bool_true;
}

/* Whether the loop nest at node has too little work to share: fewer
 * statement instances (counted over each statement's bounding box) than
 * the target's parallel_min_instances (on the CPU 32768: handing the work
 * out costs more than it saves; 262144 while the pool's workers slept
 * between jobs, when a wake-up cost as much as fcrelu 128x128x10's whole
 * run; with polling workers, fcrelu 784's weight copy, 100k instances,
 * gains from two threads), when the parallel option is auto.  The
 * instances of register tiles (regtile.c: vector code, a vector's lanes
 * of them per multiply-add) count a lane's worth each: the weight
 * gradient 128 x 128 x 10, 163840 instances in tiles, took 2.49 us on two
 * threads against 2.07 on one (Intel Xeon; 1.51 against 1.70 on a Zen 5),
 * where fully connected 128 x 128 x 10, the same instances as dot
 * products, gains from two (3.19 against 4.08 us).  Only where no other
 * nest of the kernel shares its work anyway (other_nest_shared): then the
 * pool's workers are busy already, and the MLP's forward pass, its 128 x
 * 128 x 10 layer after the 784 x 128 one, took 1.03x the time with that
 * layer on one thread.  Parametric models (no sizes) always share. */
typedef struct other_ctx {
	const tc_poly *p;
	isl_schedule_node *self;
	int found;
} other_ctx;

/* At each top-level nest's outermost band other than oc->self: whether
 * its instances are enough to share (then the pool runs anyway). */
static isl_bool other_cb(isl_schedule_node *node, void *user)
{
	other_ctx *oc = user;
	double enough = oc->p->target->parallel_min_instances;
	isl_union_set *dom;
	if (oc->found)
		return isl_bool_false;
	if (isl_schedule_node_get_type(node) != isl_schedule_node_band ||
		isl_schedule_node_band_n_member(node) < 1)
		return isl_bool_true;
	if (isl_schedule_node_is_equal(node, oc->self) != isl_bool_true) {
		dom = isl_schedule_node_get_domain(node);
		oc->found = tc_poly_box_instances(oc->p, dom, enough) >= enough;
		isl_union_set_free(dom);
	}
	return isl_bool_false;
}

/* Whether another top-level nest of node's tree has instances enough to
 * share among threads. */
static int other_nest_shared(const tc_poly *p, isl_schedule_node *node)
{
	other_ctx oc = {p, node, 0};
	isl_schedule_node *root = isl_schedule_node_root(isl_schedule_node_copy(node));
	if (!root || isl_schedule_node_foreach_descendant_top_down(root, other_cb, &oc) < 0)
		oc.found = 1; /* unknown: as before */
	isl_schedule_node_free(root);
	return oc.found;
}

static int too_small_to_share(const tc_poly *p, isl_schedule_node *node)
{
	isl_union_set *dom;
	double enough = p->target->parallel_min_instances, count;
	regtile_ctx rc = {p, NULL, 0};
	if (!p->params || p->opts.parallel != 2)
		return 0;
	dom = isl_schedule_node_get_domain(node);
	rc.tiled = isl_union_set_empty(isl_union_set_get_space(dom));
	if (isl_schedule_node_foreach_descendant_top_down(node, regtile_cb, &rc) < 0 ||
		!rc.tiled || rc.size <= 0 || p->target->vector_bytes < rc.size ||
		other_nest_shared(p, node)) {
		count = tc_poly_box_instances(p, dom, enough);
	} else {
		/* the rest's bounding box may be the whole one (an L-shaped
		 * rest of partial tiles): never more than the whole count */
		double tiled = tc_poly_box_instances(p, rc.tiled, 1e12);
		double whole = tc_poly_box_instances(p, dom, enough);
		dom = isl_union_set_subtract(dom, isl_union_set_copy(rc.tiled));
		count = tc_poly_box_instances(p, dom, enough) +
			tiled / (double)(p->target->vector_bytes / rc.size);
		if (count > whole)
			count = whole;
	}
	isl_union_set_free(rc.tiled);
	isl_union_set_free(dom);
	return count < enough;
}

/* Whether the first member of band node takes one value over the band's
 * domain (a tile loop over a dimension shorter than the tile, at bound
 * sizes): isl's AST leaves such a loop out, and a mark above it would
 * stand over the next loop down instead, which may carry a dependence (a
 * reduction's loop, with its init and final statements fused into it). */
static int single_iteration(isl_schedule_node *node)
{
	isl_set *values = tc_poly_band_member_values(NULL, node, 0);
	int single = values && isl_set_is_singleton(values) == isl_bool_true;
	isl_set_free(values);
	return single;
}

/* Band node's first member carries a dependence (a column sum, dB(h) +=!
 * dH(r_b,h): the reduction's loop outermost, the columns inner and
 * stride-1, where the order pass puts them), but the band is permutable
 * and a later member j is coincident: with sizes known and more than one
 * thread expected, strip member j into one chunk per thread (whole
 * vectors of float32 each) and put the chunks' loop above the band,
 * coincident (every dependence stays within one value of member j, so
 * within one chunk; checked against the dependences, within_chunks) and
 * marked parallel.  Without it such a nest ran on one thread at any
 * thread count.  NULL on an isl error; node itself when
 * the band does not qualify (*stripped stays 0). */
static isl_schedule_node *strip_parallel(isl_schedule_node *node, const tc_poly *p, int *stripped)
{
	isl_multi_union_pw_aff *mupa;
	isl_union_pw_aff *upa;
	isl_size n = isl_schedule_node_band_n_member(node);
	int64_t ext, chunk, lanes = p->target->vector_bytes / 4;
	int threads = p->target->threads, j;
	*stripped = 0;
	if (!p->params || threads < 2 || n < 2 || isl_schedule_node_band_get_permutable(node) != isl_bool_true)
		return node;
	for (j = 1; j < n && isl_schedule_node_band_member_get_coincident(node, j) != isl_bool_true; j++)
		;
	if (j >= n || (ext = tc_poly_band_member_extent(p, node, j)) <= 0)
		return node;
	if (lanes < 1)
		lanes = 1;
	chunk = (ext + threads - 1) / threads;
	chunk = (chunk + lanes - 1) / lanes * lanes;
	if (chunk >= ext)
		return node;
	mupa = isl_schedule_node_band_get_partial_schedule(node);
	upa = isl_multi_union_pw_aff_get_union_pw_aff(mupa, j);
	isl_multi_union_pw_aff_free(mupa);
	mupa = isl_multi_union_pw_aff_from_union_pw_aff(upa);
	mupa = isl_multi_union_pw_aff_scale_down_val(mupa,
		isl_val_int_from_si(isl_schedule_node_get_ctx(node), chunk));
	mupa = isl_multi_union_pw_aff_floor(mupa);
	switch (tc_poly_within_chunks(p, node, mupa)) {
	case 1:
		break;
	case 0: /* a dependence across chunks: the coincidence was not ours to trust */
		isl_multi_union_pw_aff_free(mupa);
		return node;
	default:
		isl_multi_union_pw_aff_free(mupa);
		return isl_schedule_node_free(node);
	}
	node = isl_schedule_node_insert_partial_schedule(node, mupa);
	node = isl_schedule_node_band_member_set_coincident(node, 0, 1);
	node = isl_schedule_node_band_set_permutable(node, 1);
	*stripped = node != NULL;
	return node;
}

/* Whether e iterations leave threads threads more than 2% apart: the
 * last round of iterations only partly filled. */
static int unbalanced(int64_t e, int threads)
{
	int64_t rounds = (e + threads - 1) / threads;
	return (rounds * threads - e) * 50 > e;
}

/* Band node's first member is coincident, but its few values leave the
 * threads unevenly loaded (unbalanced: conv2d's weight gradient, 11 tiles
 * of 6 input channels on two threads, one thread 6 of them): while the
 * next member is coincident too, take them as one member, the first's
 * index times the second's count plus the second's index (the same order
 * of the instances, so every dependence holds), above the band's other
 * members (a band as before, permutable as before).  Only where those
 * members have no AST options (isolated tiles, unrolling) and nothing
 * below depends on them (an anchored subtree: the isolated register tiles
 * of a padded convolution's weight gradient in cache blocks, tile.c's
 * image_tiles, which isl cannot move under a new band), sizes known.
 * node itself when it does not apply, NULL on an isl error. */
static isl_schedule_node *balance_members(isl_schedule_node *node, const tc_poly *p)
{
	isl_size n = isl_schedule_node_band_n_member(node);
	isl_union_pw_aff *sum;
	isl_schedule_node *top;
	int64_t lo[8], step[8], count[8], total = 1;
	int threads = p->target->threads, k = 0;
	if (!p->params || threads < 2 || n < 2)
		return node;
	while (k < n && k < 8 && (k == 0 || unbalanced(total, threads)) &&
		isl_schedule_node_band_member_get_coincident(node, k) == isl_bool_true &&
		isl_schedule_node_band_member_get_ast_loop_type(node, k) == isl_ast_loop_default &&
		(count[k] = tc_poly_band_member_steps(p, node, k, &lo[k], &step[k])) > 0 &&
		total <= ((int64_t)1 << 40) / count[k]) {
		total *= count[k];
		k++;
	}
	if (k < 2 || count[0] < 2 || !unbalanced(count[0], threads) ||
		tc_poly_band_has_options(node) ||
		isl_schedule_node_is_subtree_anchored(node) != isl_bool_false)
		return node; /* count[0] 1: single_iteration's case */
	sum = tc_poly_band_linearize(node, 0, k, lo, step, count);
	/* the first k members out, the sum above the rest */
	top = k < n ? isl_schedule_node_band_split(node, k) : node;
	top = isl_schedule_node_delete(top);
	top = isl_schedule_node_insert_partial_schedule(top,
		isl_multi_union_pw_aff_from_union_pw_aff(sum));
	top = isl_schedule_node_band_member_set_coincident(top, 0, 1);
	return isl_schedule_node_band_set_permutable(top, 1);
}

/* Mark the outermost band of every top-level loop nest whose first member
 * is coincident (carries no dependence) and that has work enough to share
 * (too_small_to_share): split it after that member and put a
 * TC_POLY_MARK_PARALLEL mark above.  Bands below a band are left alone, so
 * parallel loops never nest. */
static isl_schedule_node *mark_parallel(isl_schedule_node *node, const tc_poly *p, int *done)
{
	isl_size n, i;
	(void)done; /* every top-level nest is visited */
	if (!node)
		return NULL;
	if (isl_schedule_node_get_type(node) == isl_schedule_node_band) {
		isl_multi_union_pw_aff *chunks = NULL;
		int stripped;
		if (isl_schedule_node_band_n_member(node) < 1 || too_small_to_share(p, node))
			return node;
		if (isl_schedule_node_band_member_get_coincident(node, 0) != isl_bool_true) {
			/* a band of chunks or strips goes above the band, which
			 * isl refuses where something below depends on the
			 * outer schedule (an isolate option of tiles: "cannot
			 * insert band node in anchored subtree", fuzz_diff seed
			 * 20261203 case 5724): the nest then stays on one
			 * thread */
			if (isl_schedule_node_is_subtree_anchored(node) != isl_bool_false)
				return node;
			if (p->target->threads >= 2 && (chunks = tc_poly_partial_chunks(p, node))) {
				/* the rows' loop of partial sums (ir/partial.c):
				 * a chunk of rows per thread, each its own sums */
				node = isl_schedule_node_insert_partial_schedule(node, chunks);
				node = isl_schedule_node_band_member_set_coincident(node, 0, 1);
				node = isl_schedule_node_band_set_permutable(node, 1);
				if (!node)
					return NULL;
			} else {
				node = strip_parallel(node, p, &stripped);
				if (!node || !stripped)
					return node;
			}
		}
		if (isl_schedule_node_band_member_get_coincident(node, 0) == isl_bool_true &&
			!(node = balance_members(node, p)))
			return NULL;
		if (single_iteration(node)) {
			/* no loop in the AST: the next member's loop is the
			 * outermost one (an attention head's scores: the
			 * batch of 8 heads in one tile of 8 above the rows'
			 * blocks had left the nest on one thread) */
			if (isl_schedule_node_band_n_member(node) < 2 ||
				isl_schedule_node_band_member_get_coincident(node, 1) != isl_bool_true)
				return node;
			node = isl_schedule_node_child(isl_schedule_node_band_split(node, 1), 0);
			return isl_schedule_node_parent(mark_parallel(node, p, done));
		}
		if (isl_schedule_node_band_n_member(node) > 1)
			node = isl_schedule_node_band_split(node, 1);
		return isl_schedule_node_insert_mark(node,
			isl_id_alloc(p->ctx, TC_POLY_MARK_PARALLEL, NULL));
	}
	n = isl_schedule_node_n_children(node);
	for (i = 0; node && i < n; i++) {
		node = isl_schedule_node_child(node, i);
		node = mark_parallel(node, p, done);
		node = isl_schedule_node_parent(node);
	}
	return node;
}

tc_stat tc_poly_pass_parallel(__tc_keep tc_poly *p, __tc_keep tc_diags *d)
{
	int unused;
	if (!p->opts.parallel)
		return TC_OK;
	return tc_poly_walk_schedule(p, d, mark_parallel, "mark parallel loops", &unused);
}
