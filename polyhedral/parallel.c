/* Parallel loops: the parallel pass (tc_poly_pass_parallel).
 *
 * Marks the outermost band of every top-level loop nest whose first member
 * is coincident (carries no dependence) with TC_POLY_MARK_PARALLEL, split
 * after that member, when the nest has work enough to share among threads.
 * Code generators outline the marked loop and hand its iterations to the
 * runtime's pool.
 *
 * Owns the work threshold (PARALLEL_MIN_INSTANCES).  Uses the model (poly.h)
 * and the band helpers (band.h); must not know the other passes or the
 * order they run in (schedule.c). */
#include "band.h"
#include "passes.h"

#include <isl/id.h>
#include <isl/ilp.h>
#include <isl/schedule_node.h>
#include <isl/val.h>

/* Loop nests with fewer statement instances than this run on the calling
 * thread: handing the work out costs more than it saves.  (262144 while the
 * pool's workers slept between jobs: a wake-up cost as much as fcrelu
 * 128x128x10's whole run; with polling workers, fcrelu 784's weight copy,
 * 100k instances, gains from two threads.) */
#define PARALLEL_MIN_INSTANCES 32768.0

static isl_stat count_box_cb(isl_set *set, void *user)
{
	double *count = user, pts = 1;
	isl_size n = isl_set_dim(set, isl_dim_set), j;
	for (j = 0; j < n && pts > 0; j++) {
		isl_val *lo = isl_set_dim_min_val(isl_set_copy(set), (int)j);
		isl_val *hi = isl_set_dim_max_val(isl_set_copy(set), (int)j);
		if (lo && hi && isl_val_is_int(lo) == isl_bool_true && isl_val_is_int(hi) == isl_bool_true)
			pts *= (double)(isl_val_get_num_si(hi) - isl_val_get_num_si(lo) + 1);
		else
			pts = PARALLEL_MIN_INSTANCES; /* unbounded or unknown: parallel */
		isl_val_free(lo);
		isl_val_free(hi);
	}
	*count += pts;
	isl_set_free(set);
	return isl_stat_ok;
}

/* Whether the loop nest at node has too little work to share: fewer
 * statement instances (counted over each statement's bounding box) than
 * PARALLEL_MIN_INSTANCES, when the parallel option is auto.  Parametric
 * models (no sizes) always share. */
static int too_small_to_share(const tc_poly *p, isl_schedule_node *node)
{
	isl_union_set *dom;
	double count = 0;
	if (!p->params || p->opts.parallel != 2)
		return 0;
	dom = isl_schedule_node_get_domain(node);
	isl_union_set_foreach_set(dom, count_box_cb, &count);
	isl_union_set_free(dom);
	return count < PARALLEL_MIN_INSTANCES;
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
			too_small_to_share(p, node))
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

tc_stat tc_poly_pass_parallel(tc_poly *p, tc_diags *d)
{
	int unused;
	if (!p->opts.parallel)
		return TC_OK;
	return tc_poly_walk_schedule(p, d, mark_parallel, "mark parallel loops", &unused);
}
