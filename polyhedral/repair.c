/* Repairs of the isl scheduler's tree: tc_poly_fuse_nests and
 * tc_poly_hoist_constant.
 *
 * isl's scheduler sometimes leaves statements that share an outer parallel
 * loop in separate nests (softmax's division, layer norm's last two
 * statements: after the first nest's inner band it found no way to place
 * them in the same band), and sometimes places a statement that runs once
 * per row inside the row's loop at the loop's first iteration (the init
 * of a sum: "if (c1 == 999) sm = 0" in the loop, which keeps LLVM from
 * vectorising it).  tc_poly_fuse_nests repairs the first on the
 * scheduler's own tree, before the passes and before the packing copies
 * join it; tc_poly_hoist_constant the second, after the passes (which place
 * a register tile's init themselves).  Each change is kept only when the
 * schedule still respects the dependences.
 *
 * Both work on a schedule and a set of dependences alone: they use the
 * model's legality check (poly.h) and must not know the model's options,
 * the passes or when the driver (schedule.c) runs them; the hoisting
 * passes over a band with a register tile's mark (poly.h) below it. */
#include "passes.h"

#include <isl/aff.h>
#include <isl/id.h>
#include <isl/schedule_node.h>
#include <isl/set.h>

#include <string.h>

/* Member j of band node's partial schedule. */
static isl_union_pw_aff *band_member(isl_schedule_node *node, int j)
{
	isl_multi_union_pw_aff *mupa = isl_schedule_node_band_get_partial_schedule(node);
	isl_union_pw_aff *upa = isl_multi_union_pw_aff_get_union_pw_aff(mupa, j);
	isl_multi_union_pw_aff_free(mupa);
	return upa;
}

/* Whether the dependences deps between instances of dom all have equal
 * values of upa (the fused loop carries none: it stays parallel). */
static int carries_none(isl_union_pw_aff *upa, isl_union_set *dom, isl_union_map *deps)
{
	isl_union_map *s = isl_union_map_from_union_pw_aff(isl_union_pw_aff_copy(upa));
	isl_union_map *d = isl_union_map_intersect_range(
		isl_union_map_intersect_domain(isl_union_map_copy(deps), isl_union_set_copy(dom)),
		isl_union_set_copy(dom));
	isl_union_set *delta;
	isl_bool zero;
	d = isl_union_map_apply_domain(d, isl_union_map_copy(s));
	d = isl_union_map_apply_range(d, s);
	delta = isl_union_map_deltas(d);
	zero = isl_union_set_is_empty(delta);
	if (zero == isl_bool_false) {
		isl_set *set = isl_set_from_union_set(isl_union_set_copy(delta));
		isl_set *origin = isl_set_universe(isl_set_get_space(set));
		origin = isl_set_fix_si(origin, isl_dim_set, 0, 0);
		zero = isl_set_is_subset(set, origin);
		isl_set_free(set);
		isl_set_free(origin);
	}
	isl_union_set_free(delta);
	return zero == isl_bool_true;
}

/* Whether schedule s orders every dependence of deps. */
static int respects(isl_schedule *s, isl_union_map *deps)
{
	return tc_poly_schedule_legal_for(s, deps) == 1;
}

/* The values upa takes over its domain. */
static isl_union_set *member_values(isl_union_pw_aff *upa)
{
	isl_union_map *m = isl_union_map_from_union_pw_aff(isl_union_pw_aff_copy(upa));
	return isl_union_map_range(m);
}

/* The union of member j of the bands of the n nests under sequence seq,
 * when each nest is a band whose member j is parallel and, for j >= 1,
 * takes the same values as every other nest's (loops over the same
 * range: the channels of max-pool's arg-max and of its data gradient);
 * NULL otherwise. */
static isl_union_pw_aff *shared_member(isl_schedule_node *seq, isl_size n, int j)
{
	isl_union_pw_aff *fused = NULL;
	isl_union_set *values = NULL;
	isl_size i;
	int ok = 1;
	for (i = 0; ok && i < n; i++) {
		isl_schedule_node *node = isl_schedule_node_child(isl_schedule_node_get_child(seq, i), 0);
		ok = node && isl_schedule_node_get_type(node) == isl_schedule_node_band &&
			isl_schedule_node_band_n_member(node) > j &&
			isl_schedule_node_band_member_get_coincident(node, j) == isl_bool_true;
		if (ok) {
			isl_union_pw_aff *upa = band_member(node, j);
			if (j) {
				isl_union_set *v = member_values(upa);
				if (!values)
					values = v;
				else {
					ok = isl_union_set_is_equal(values, v) == isl_bool_true;
					isl_union_set_free(v);
				}
			}
			fused = fused ? isl_union_pw_aff_union_add(fused, upa) : upa;
		}
		isl_schedule_node_free(node);
	}
	isl_union_set_free(values);
	if (!ok) {
		isl_union_pw_aff_free(fused);
		return NULL;
	}
	return fused;
}

/* The nests under seq (n of them) under a band of the k members of
 * fused; each nest loses its first k members (the whole band when it had
 * no more).  The schedule made, or NULL when it breaks a dependence. */
static isl_schedule *fuse_members(isl_schedule_node *seq, isl_size n,
	isl_multi_union_pw_aff *fused, int k, isl_union_map *deps)
{
	isl_schedule *t;
	isl_size i;
	int j;
	seq = isl_schedule_node_insert_partial_schedule(isl_schedule_node_copy(seq), fused);
	seq = isl_schedule_node_band_set_permutable(seq, 1);
	for (j = 0; j < k; j++)
		seq = isl_schedule_node_band_member_set_coincident(seq, j, 1);
	seq = isl_schedule_node_child(seq, 0);
	for (i = 0; seq && i < n; i++) {
		seq = isl_schedule_node_child(isl_schedule_node_child(seq, i), 0);
		if (isl_schedule_node_band_n_member(seq) > k)
			seq = isl_schedule_node_band_split(seq, k);
		seq = isl_schedule_node_delete(seq);
		seq = isl_schedule_node_parent(isl_schedule_node_parent(seq));
	}
	t = seq ? isl_schedule_node_get_schedule(seq) : NULL;
	isl_schedule_node_free(seq);
	if (t && !respects(t, deps)) {
		isl_schedule_free(t);
		t = NULL;
	}
	return t;
}

__tc_give isl_schedule *tc_poly_fuse_nests(__tc_take isl_schedule *s, __tc_keep isl_union_map *deps)
{
	isl_schedule_node *seq;
	isl_multi_union_pw_aff *fused = NULL;
	isl_union_set *dom;
	isl_schedule *t = NULL;
	isl_size n;
	int k;
	if (!s)
		return NULL;
	seq = isl_schedule_node_child(isl_schedule_get_root(s), 0);
	if (!seq || isl_schedule_node_get_type(seq) != isl_schedule_node_sequence ||
		(n = isl_schedule_node_n_children(seq)) < 2) {
		isl_schedule_node_free(seq);
		return s;
	}
	dom = isl_schedule_get_domain(s);
	/* as many leading members as every nest shares, each parallel and
	 * carrying no dependence between the nests: the outermost alone
	 * (softmax's rows), or more (max-pool's backward: images and
	 * channels, so that each channel's arg-max is read back from the
	 * cache right after it is made) */
	for (k = 0; k < TC_POLY_MAX_TILE; k++) {
		isl_union_pw_aff *upa = shared_member(seq, n, k);
		isl_schedule *u;
		if (!upa || !carries_none(upa, dom, deps)) {
			isl_union_pw_aff_free(upa);
			break;
		}
		fused = fused ? isl_multi_union_pw_aff_flat_range_product(fused,
					isl_multi_union_pw_aff_from_union_pw_aff(upa))
			      : isl_multi_union_pw_aff_from_union_pw_aff(upa);
		u = fuse_members(seq, n, isl_multi_union_pw_aff_copy(fused), k + 1, deps);
		if (!u)
			break;
		isl_schedule_free(t);
		t = u;
	}
	isl_multi_union_pw_aff_free(fused);
	isl_union_set_free(dom);
	isl_schedule_node_free(seq);
	if (!t)
		return s;
	isl_schedule_free(s);
	return t;
}

typedef struct const_ctx {
	isl_union_map *prefix, *part; /* of the band */
	isl_union_set *consts;        /* the statements constant in it */
	int nconst, nother;
} const_ctx;

static isl_stat const_cb(isl_set *set, void *user)
{
	const_ctx *cc = user;
	isl_union_set *us = isl_union_set_from_set(set);
	isl_union_map *rel = isl_union_map_apply_range(
		isl_union_map_reverse(isl_union_map_intersect_domain(isl_union_map_copy(cc->prefix),
			isl_union_set_copy(us))),
		isl_union_map_intersect_domain(isl_union_map_copy(cc->part), isl_union_set_copy(us)));
	isl_bool single = isl_union_map_is_single_valued(rel);
	isl_union_map_free(rel);
	if (single == isl_bool_true) {
		cc->consts = isl_union_set_union(cc->consts, us);
		cc->nconst++;
	} else {
		isl_union_set_free(us);
		cc->nother++;
	}
	return single < 0 ? isl_stat_error : isl_stat_ok;
}

/* The statements of band node whose band values are a function of the outer
 * loops' (run once per iteration of them), when some but not all are;
 * NULL otherwise. */
static isl_union_set *constant_statements(isl_schedule_node *node)
{
	isl_union_set *dom = isl_schedule_node_get_domain(node);
	const_ctx cc;
	/* one statement cannot be both: no isl work (the point bands of a
	 * register tile, two thirds of the repair's instructions at matmul
	 * 256: 232 -> 78 million) */
	if (isl_union_set_n_set(dom) < 2) {
		isl_union_set_free(dom);
		return NULL;
	}
	cc.prefix = isl_schedule_node_get_prefix_schedule_union_map(node);
	cc.part = isl_schedule_node_band_get_partial_schedule_union_map(node);
	cc.consts = isl_union_set_empty(isl_union_set_get_space(dom));
	cc.nconst = cc.nother = 0;
	if (isl_union_set_foreach_set(dom, const_cb, &cc) < 0)
		cc.nconst = 0;
	isl_union_set_free(dom);
	isl_union_map_free(cc.prefix);
	isl_union_map_free(cc.part);
	if (cc.nconst && cc.nother)
		return cc.consts;
	isl_union_set_free(cc.consts);
	return NULL;
}

/* Whether band node is a register tile's tile band (a TC_POLY_MARK_REGTILE
 * mark below it): the register tiling placed the tile's init and epilogue
 * itself, and the test for constant statements on its tile loops (the
 * prefix schedule of cache and register tiles, with their divisions) was
 * most of the repair's time at matmul 256 (8 of 10 ms) and found nothing. */
static int tile_band(isl_schedule_node *node)
{
	isl_schedule_node *child = isl_schedule_node_get_child(node, 0);
	isl_id *id = child && isl_schedule_node_get_type(child) == isl_schedule_node_mark
			     ? isl_schedule_node_mark_get_id(child) : NULL;
	int tile = id && !strcmp(isl_id_get_name(id), TC_POLY_MARK_REGTILE);
	isl_id_free(id);
	isl_schedule_node_free(child);
	return tile;
}

/* Whether running the instances consts of band node's domain before (or
 * after) the band's other instances keeps every dependence of deps: such
 * a move reorders only a pair of an instance of consts and another of the
 * band that share the band's prefix schedule (the outer loops' values),
 * so the move is legal exactly when no dependence runs from the others to
 * consts (to be moved before) or from consts to the others (after) within
 * one prefix.  The check of the whole schedule with the move made cost
 * conv2d 400 ms of its 1.2 s compile (two refused moves of its init). */
static int move_keeps(isl_schedule_node *node, isl_union_set *consts, isl_union_map *deps,
	int after)
{
	isl_union_set *dom = isl_schedule_node_get_domain(node);
	isl_union_set *others = isl_union_set_subtract(isl_union_set_copy(dom),
		isl_union_set_copy(consts));
	isl_union_map *d = isl_union_map_copy(deps);
	isl_bool none;
	isl_union_set_free(dom);
	d = after ? isl_union_map_intersect_range(isl_union_map_intersect_domain(d,
			    isl_union_set_copy(consts)), others)
		  : isl_union_map_intersect_range(isl_union_map_intersect_domain(d, others),
			    isl_union_set_copy(consts));
	/* pairs of instances with one prefix (every pair, with no band above) */
	if (isl_schedule_node_get_schedule_depth(node) > 0) {
		isl_union_map *prefix = isl_schedule_node_get_prefix_schedule_union_map(node);
		isl_union_map *back = isl_union_map_reverse(isl_union_map_copy(prefix));
		d = isl_union_map_intersect(d, isl_union_map_apply_range(prefix, back));
	}
	none = isl_union_map_is_empty(d);
	isl_union_map_free(d);
	return none == isl_bool_true;
}

typedef struct hoist_ctx {
	isl_schedule *s;       /* the schedule being repaired */
	isl_union_map *deps;
	int changed;
	int tried, skip;       /* bands seen in this walk; bands to pass over */
} hoist_ctx;

/* Move the instances consts (kept) of band before the band's loops, or
 * after them if that breaks a dependence, into hc->s (hc->changed); nothing
 * if neither keeps every dependence. */
static void try_move_set(hoist_ctx *hc, isl_schedule_node *band, isl_union_set *consts)
{
	int side;
	for (side = 0; side < 2 && !hc->changed; side++) {
		isl_schedule_node *n;
		isl_schedule *t;
		if (!move_keeps(band, consts, hc->deps, side))
			continue;
		n = isl_schedule_node_copy(band);
		n = side ? isl_schedule_node_order_after(n, isl_union_set_copy(consts))
			 : isl_schedule_node_order_before(n, isl_union_set_copy(consts));
		t = n ? isl_schedule_node_get_schedule(n) : NULL;
		isl_schedule_node_free(n);
		if (t) {
			isl_schedule_free(hc->s);
			hc->s = t;
			hc->changed = 1;
		}
	}
}

/* Find the skip-th band (top-down) with constant statements and move them
 * before (or, if that breaks a dependence, after) the band's loops. */
static isl_bool hoist_cb(isl_schedule_node *node, void *user)
{
	hoist_ctx *hc = user;
	isl_union_set *consts;
	isl_schedule_node *band;
	if (hc->changed || isl_schedule_node_get_type(node) != isl_schedule_node_band ||
		tile_band(node))
		return isl_bool_true;
	band = isl_schedule_node_copy(node);
	if (!(consts = constant_statements(band)) && isl_schedule_node_band_n_member(band) > 1) {
		/* constant in the band's later members only (a row loop and
		 * its inner loop in one band, when nothing runs in parallel):
		 * the band split after its first member, the rest tried */
		band = isl_schedule_node_child(isl_schedule_node_band_split(band, 1), 0);
		consts = band ? constant_statements(band) : NULL;
	}
	if (!consts) {
		isl_schedule_node_free(band);
		return isl_bool_true;
	}
	if (hc->tried++ < hc->skip) {
		isl_schedule_node_free(band);
		isl_union_set_free(consts);
		return isl_bool_true;
	}
	try_move_set(hc, band, consts);
	if (!hc->changed && isl_union_set_n_set(consts) > 1) {
		/* not all together (a sum's init that must come first with
		 * a statement that reads the sum before the next loop: derived
		 * layer norm's d_mean(n) = 0 and d_var(n), and the init stayed
		 * in the first loop behind "if (c1 == 1023)"): one statement
		 * at a time, the next rounds the others */
		isl_set_list *l = isl_union_set_get_set_list(consts);
		isl_size k, nl = isl_set_list_n_set(l);
		for (k = 0; k < nl && !hc->changed; k++) {
			isl_union_set *one = isl_union_set_from_set(isl_set_list_get_set(l, k));
			try_move_set(hc, band, one);
			isl_union_set_free(one);
		}
		isl_set_list_free(l);
	}
	isl_union_set_free(consts);
	isl_schedule_node_free(band);
	if (!hc->changed)
		hc->skip++;
	return isl_bool_false;
}

__tc_give isl_schedule *tc_poly_hoist_constant(__tc_take isl_schedule *s,
	__tc_keep isl_union_map *deps)
{
	hoist_ctx hc = {s, deps, 0, 0, 0};
	int round;
	for (round = 0; hc.s && round < 32; round++) {
		isl_schedule_node *root = isl_schedule_get_root(hc.s);
		hc.changed = 0;
		hc.tried = 0;
		isl_schedule_node_foreach_descendant_top_down(root, hoist_cb, &hc);
		isl_schedule_node_free(root);
		if (!hc.changed && hc.tried <= hc.skip)
			break; /* every candidate band tried */
	}
	return hc.s;
}
