/* Merging band chains: the merge pass (tc_poly_pass_merge).
 *
 * A reduction over several indices keeps its order, so the isl scheduler
 * puts each reduction index after the first in a band of its own; the pass
 * merges such a chain into one band marked permutable, so that the order
 * pass can move a parallel member below the reduction members (conv2d).
 * It records in p->merged that it did: the merged band is not permutable
 * in isl's sense, and the driver (schedule.c), not this pass, checks the
 * final schedule and schedules again without merging (p->no_merge) when
 * it breaks a dependence.
 *
 * Uses the model (poly.h) and the band helpers (band.h); must not know the
 * other passes or the order they run in. */
#include "band.h"
#include "passes.h"

#include <isl/schedule_node.h>

/* Merge band node with the chain of bands directly below it into one band
 * marked permutable, members and coincidence kept in order. */
static isl_schedule_node *merge_chain(isl_schedule_node *node, int *merged)
{
	isl_multi_union_pw_aff *mupa = isl_schedule_node_band_get_partial_schedule(node);
	int coinc[TC_POLY_MAX_TILE], n = 0, j;
	isl_size m;
	for (;;) {
		m = isl_schedule_node_band_n_member(node);
		for (j = 0; j < m && n < TC_POLY_MAX_TILE; j++)
			coinc[n++] = isl_schedule_node_band_member_get_coincident(node, j) == isl_bool_true;
		node = isl_schedule_node_delete(node);
		if (!node || isl_schedule_node_get_type(node) != isl_schedule_node_band)
			break;
		mupa = isl_multi_union_pw_aff_flat_range_product(mupa,
			isl_schedule_node_band_get_partial_schedule(node));
	}
	node = isl_schedule_node_insert_partial_schedule(node, mupa);
	node = isl_schedule_node_band_set_permutable(node, 1);
	for (j = 0; j < n; j++)
		node = isl_schedule_node_band_member_set_coincident(node, j, coinc[j]);
	*merged = 1;
	return node;
}

/* Merge the chains of nested bands that the isl scheduler splits around a
 * reduction's later members.  A reduction over several indices keeps its
 * order (the interpreter's, for bit-identical sums), so the scheduler puts
 * every reduction member after the first in a band of its own, below the
 * parallel members: conv2d's O(n,f,h,w) +=! I(n,r_c,h+r_kh,w+r_kw) *
 * W1(f,r_c,r_kh,r_kw) gets bands (f,h,r_c,w), (r_kh), (r_kw), with the
 * vectorisable w outside two reduction loops.  A parallel member carries no
 * dependence, so it may move below the reduction members as long as those
 * keep their order: the chain becomes one band marked permutable, the order
 * pass moves w innermost and the register tile applies.  Such a band is
 * not permutable in isl's sense (tiling two of its reduction members
 * would reorder the sum), so the schedule driver (schedule.c) checks the
 * final schedule against the dependences and schedules again without
 * merging when it fails.  Merges a chain only when its upper band has both parallel and
 * reduction members (a reduction continues below) and the chain ends in a
 * band without parallel members. */
static isl_schedule_node *merge_walk(isl_schedule_node *node, const tc_poly *p, int *merged)
{
	isl_size n, i;
	if (!node)
		return NULL;
	if (isl_schedule_node_get_type(node) == isl_schedule_node_band &&
		isl_schedule_node_band_get_permutable(node) == isl_bool_true &&
		tc_poly_band_n_coincident(node) > 0 &&
		tc_poly_band_n_coincident(node) < isl_schedule_node_band_n_member(node)) {
		isl_schedule_node *last = isl_schedule_node_copy(node);
		int depth = 0, total = isl_schedule_node_band_n_member(node);
		while (last && isl_schedule_node_n_children(last) == 1) {
			last = isl_schedule_node_child(last, 0);
			if (isl_schedule_node_get_type(last) != isl_schedule_node_band) {
				last = isl_schedule_node_parent(last);
				break;
			}
			depth++;
			total += isl_schedule_node_band_n_member(last);
		}
		if (depth > 0 && total <= TC_POLY_MAX_TILE && !tc_poly_band_n_coincident(last))
			node = merge_chain(node, merged);
		isl_schedule_node_free(last);
	}
	n = node ? isl_schedule_node_n_children(node) : 0;
	for (i = 0; i < n && node; i++) {
		node = isl_schedule_node_child(node, i);
		node = merge_walk(node, p, merged);
		node = isl_schedule_node_parent(node);
	}
	return node;
}

tc_stat tc_poly_pass_merge(__tc_keep tc_poly *p, __tc_keep tc_diags *d)
{
	isl_schedule_node *node;
	p->merged = 0;
	if (p->no_merge)
		return TC_OK;
	node = merge_walk(isl_schedule_get_root(p->schedule), p, &p->merged);
	if (!node)
		return tc_poly_walk_failed(p, d, "merge bands");
	if (p->merged) { /* else the tree as the scheduler printed it */
		isl_schedule_free(p->schedule);
		p->schedule = isl_schedule_node_get_schedule(node);
	}
	isl_schedule_node_free(node);
	return p->schedule ? TC_OK : tc_poly_walk_failed(p, d, "merge bands");
}
