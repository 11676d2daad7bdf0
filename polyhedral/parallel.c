/* Parallel loops: the parallel pass (tc_poly_pass_parallel).
 *
 * Marks the outermost band of every top-level loop nest whose first member
 * is coincident (carries no dependence) with TC_POLY_MARK_PARALLEL, split
 * after that member, when the nest has work enough to share among threads.
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

/* The statement instances of each set's bounding box, added to
 * *bc->count; an unbounded or unknown box counts as bc->enough. */
typedef struct box_count {
	double count, enough;
} box_count;

static isl_stat count_box_cb(isl_set *set, void *user)
{
	box_count *bc = user;
	double pts = 1;
	isl_size n = isl_set_dim(set, isl_dim_set), j;
	for (j = 0; j < n && pts > 0; j++) {
		isl_val *lo = isl_set_dim_min_val(isl_set_copy(set), (int)j);
		isl_val *hi = isl_set_dim_max_val(isl_set_copy(set), (int)j);
		if (lo && hi && isl_val_is_int(lo) == isl_bool_true && isl_val_is_int(hi) == isl_bool_true)
			pts *= (double)(isl_val_get_num_si(hi) - isl_val_get_num_si(lo) + 1);
		else
			pts = bc->enough; /* unbounded or unknown: parallel */
		isl_val_free(lo);
		isl_val_free(hi);
	}
	bc->count += pts;
	isl_set_free(set);
	return isl_stat_ok;
}

/* Whether the loop nest at node has too little work to share: fewer
 * statement instances (counted over each statement's bounding box) than
 * the target's parallel_min_instances (on the CPU 32768: handing the work
 * out costs more than it saves; 262144 while the pool's workers slept
 * between jobs, when a wake-up cost as much as fcrelu 128x128x10's whole
 * run; with polling workers, fcrelu 784's weight copy, 100k instances,
 * gains from two threads), when the parallel option is auto.  Parametric
 * models (no sizes) always share. */
static int too_small_to_share(const tc_poly *p, isl_schedule_node *node)
{
	isl_union_set *dom;
	box_count bc = {0, p->target->parallel_min_instances};
	if (!p->params || p->opts.parallel != 2)
		return 0;
	dom = isl_schedule_node_get_domain(node);
	isl_union_set_foreach_set(dom, count_box_cb, &bc);
	isl_union_set_free(dom);
	return bc.count < bc.enough;
}

/* Whether the first member of band node takes one value over the band's
 * domain (a tile loop over a dimension shorter than the tile, at bound
 * sizes): isl's AST leaves such a loop out, and a mark above it would
 * stand over the next loop down instead, which may carry a dependence (a
 * reduction's loop, with its init and final statements fused into it). */
static int single_iteration(isl_schedule_node *node)
{
	isl_multi_union_pw_aff *mupa = isl_schedule_node_band_get_partial_schedule(node);
	isl_union_pw_aff *upa = isl_multi_union_pw_aff_get_union_pw_aff(mupa, 0);
	isl_union_set *range;
	isl_set *values;
	int single;
	isl_multi_union_pw_aff_free(mupa);
	upa = isl_union_pw_aff_intersect_domain_union_set(upa, isl_schedule_node_get_domain(node));
	range = isl_union_map_range(isl_union_map_from_union_pw_aff(upa));
	values = range ? isl_set_from_union_set(range) : NULL;
	single = values && isl_set_is_singleton(values) == isl_bool_true;
	isl_set_free(values);
	return single;
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
		if (isl_schedule_node_band_n_member(node) < 1 ||
			isl_schedule_node_band_member_get_coincident(node, 0) != isl_bool_true ||
			too_small_to_share(p, node) || single_iteration(node))
			return node;
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
