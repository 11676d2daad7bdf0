/* Fusion chosen per nest: what a nest of the isl scheduler's tree costs
 * (tc_poly_nest_measure) and the surgery that puts another schedule of its
 * statements in its place (tc_poly_graft).
 *
 * isl's clustering (fusion max) fuses whatever it can, and sometimes pays
 * for it with every parallel loop of the nest or with skewed loops: the
 * seven statements of a small network's backward pass became one nest of
 * loops over b + h and h + k, serial and unvectorisable, 2.4x slower than
 * the same statements unfused (polyhedral/README.md, "fusion"); the three
 * contractions of a Kronecker product shared one loop in register tiles,
 * 1.7x slower than one nest each (without register tiles, their operand
 * panels in registers, sharing the loop is what pays: chain_cb).  The
 * "fusion" entry (schedule.c) measures each nest of the tree with
 * tc_poly_nest_measure, schedules the statements of a nest that lost
 * something again without that fusion, and keeps whichever costs less;
 * the choice of strategy and the calls to the isl scheduler stay in
 * schedule.c.
 *
 * Uses the model (poly.h) and isl only; must not know the passes, the
 * options or the order the driver runs things in. */
#include "band.h"
#include "passes.h"

#include <isl/aff.h>
#include <isl/schedule_node.h>
#include <isl/set.h>
#include <isl/schedule.h>
#include <isl/union_map.h>
#include <isl/union_set.h>
#include <isl/val.h>

#include <string.h>

/* Whether aff depends on two or more of its input dimensions. */
static isl_stat skew_piece_cb(isl_set *set, isl_aff *aff, void *user)
{
	int *skewed = user;
	isl_size n = isl_aff_dim(aff, isl_dim_in), j;
	int used = 0;
	for (j = 0; j < n; j++) {
		isl_val *v = isl_aff_get_coefficient_val(aff, isl_dim_in, (int)j);
		used += v && isl_val_is_zero(v) == isl_bool_false;
		isl_val_free(v);
	}
	*skewed |= used >= 2;
	isl_set_free(set);
	isl_aff_free(aff);
	return isl_stat_ok;
}

static isl_stat skew_pa_cb(isl_pw_aff *pa, void *user)
{
	isl_stat st = isl_pw_aff_foreach_piece(pa, skew_piece_cb, user);
	isl_pw_aff_free(pa);
	return st;
}

/* Whether a member of band node walks a combination of two dimensions of
 * some statement (a skewed loop: b + h). */
static int band_skewed(isl_schedule_node *node)
{
	isl_multi_union_pw_aff *mupa = isl_schedule_node_band_get_partial_schedule(node);
	isl_size n = isl_multi_union_pw_aff_size(mupa), j;
	int skewed = 0;
	for (j = 0; j < n && !skewed; j++) {
		isl_union_pw_aff *upa = isl_multi_union_pw_aff_get_union_pw_aff(mupa, (int)j);
		if (isl_union_pw_aff_foreach_pw_aff(upa, skew_pa_cb, &skewed) < 0)
			skewed = 1; /* unknown: as bad as the worst */
		isl_union_pw_aff_free(upa);
	}
	isl_multi_union_pw_aff_free(mupa);
	return skewed;
}

/* Whether statement st is a contraction (an update over two or more
 * left-hand indices and one or more reduction indices: a matmul, a
 * convolution), the kind of statement a register tile makes fast. */
static int contraction(const tc_poly_stmt *st)
{
	return st->kind == TC_POLY_UPDATE && st->ir->nlhs >= 2 && st->ir->nvars > st->ir->nlhs &&
		!st->ir->part_rows;
}

/* Whether contraction st reuses an operand element across its outputs
 * (a matmul's, a convolution's), which is what lets a contraction feed on
 * registers and cache; a row reduction (mx(z,i) max=! Sc(z,i,r_j)) reads
 * each element once. */
static int reusing(const tc_poly_stmt *st)
{
	uint64_t lhs = st->ir->nlhs >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << st->ir->nlhs) - 1;
	return contraction(st) && tc_ir_reused_read(st->ir->rhs, lhs);
}

/* The reduction indices of st that band node's members walk. */
static int reduction_members(isl_schedule_node *node, const tc_poly_stmt *st)
{
	isl_size n = isl_schedule_node_band_n_member(node), j;
	int red = 0;
	for (j = 0; j < n; j++)
		red += tc_poly_band_member_var(node, (int)j, st) >= st->ir->nlhs;
	return red;
}

/* Whether the reduction indices of st that band node leaves out are walked
 * by a chain of bands right below it (one child each, down to the last of
 * them), which the merge pass joins to node so that the register tile
 * applies.  A sequence before the chain ends (the fused bias of T(n,f,h,w)
 * +=! ...; O(n,f,h,w) = T(n,f,h,w) + B(f) after a channels-last copy,
 * scheduled apart from the copy back below the reduction's first index)
 * leaves the tile out: the nest ran 64 times slower than with its
 * statements apart. */
static int chained_reduction(isl_schedule_node *node, const tc_poly_stmt *st, int red)
{
	int want = st->ir->nvars - st->ir->nlhs;
	isl_schedule_node *c = isl_schedule_node_copy(node);
	while (red < want && c && isl_schedule_node_n_children(c) == 1) {
		c = isl_schedule_node_child(c, 0);
		if (!c || isl_schedule_node_get_type(c) != isl_schedule_node_band)
			break;
		red += reduction_members(c, st);
	}
	isl_schedule_node_free(c);
	return red >= want;
}

/* Whether band node can hold a register tile of contraction st: it is
 * permutable, and its members walk two of st's left-hand indices as
 * parallel (coincident) members, the last one (the output's stride-1
 * dimension, the tile's vectors) among them, and one of its reduction
 * indices, the others in the bands right below (chained_reduction). */
static int tileable(isl_schedule_node *node, const tc_poly_stmt *st)
{
	isl_size n = isl_schedule_node_band_n_member(node), j;
	int par = 0, red = 0, last = 0;
	if (isl_schedule_node_band_get_permutable(node) != isl_bool_true)
		return 0;
	for (j = 0; j < n; j++) {
		int v = tc_poly_band_member_var(node, (int)j, st);
		int coincident = isl_schedule_node_band_member_get_coincident(node, (int)j) ==
			isl_bool_true;
		if (v < 0)
			continue;
		if (v >= st->ir->nlhs)
			red++;
		else if (coincident) {
			par++;
			last |= v == st->ir->nlhs - 1;
		}
	}
	return par >= 2 && last && red >= 1 && chained_reduction(node, st, red);
}

typedef struct measure_ctx {
	const tc_poly *p;
	tc_poly_nest_cost *c;
	isl_schedule_node *band;
	isl_union_set *tiled;   /* instances of contractions (in a tileable band) */
	isl_union_set *strided; /* instances a band's last member walks in steps */
	int inner; /* misordered_cb: the member of band that ends up innermost */
} measure_ctx;

/* Whether a piece of a member's schedule has a coefficient other than 0, 1
 * and -1 on one of the statement's dimensions. */
static isl_stat stride_piece_cb(isl_set *set, isl_aff *aff, void *user)
{
	int *strided = user;
	isl_size n = isl_aff_dim(aff, isl_dim_in), j;
	for (j = 0; j < n && !*strided; j++) {
		isl_val *v = isl_aff_get_coefficient_val(aff, isl_dim_in, (int)j);
		*strided = v && isl_val_is_zero(v) == isl_bool_false &&
			isl_val_is_one(v) == isl_bool_false && isl_val_is_negone(v) == isl_bool_false;
		isl_val_free(v);
	}
	isl_set_free(set);
	isl_aff_free(aff);
	return isl_stat_ok;
}

/* Add to mc->strided the instances of the statement of pa (the band's last
 * member on one statement) when the member walks it in steps of 2 or more
 * (S0(2 * h + kh): fused with statements over a finer domain, the loop
 * runs it on every other iteration behind a test, and no vector
 * instruction covers the loop). */
static isl_stat stride_pa_cb(isl_pw_aff *pa, void *user)
{
	measure_ctx *mc = user;
	int strided = 0;
	if (isl_pw_aff_foreach_piece(pa, stride_piece_cb, &strided) < 0)
		strided = 0;
	if (strided) {
		isl_set *dom = isl_pw_aff_domain(isl_pw_aff_copy(pa));
		mc->strided = isl_union_set_union(mc->strided, isl_union_set_from_set(dom));
	}
	isl_pw_aff_free(pa);
	return isl_stat_ok;
}

static isl_stat tiled_cb(isl_set *set, void *user)
{
	measure_ctx *mc = user;
	const tc_poly_stmt *st = tc_poly_find_stmt(mc->p, isl_set_get_tuple_name(set));
	if (st && contraction(st) && (!mc->band || tileable(mc->band, st)))
		mc->tiled = isl_union_set_union(mc->tiled, isl_union_set_from_set(set));
	else
		isl_set_free(set);
	return isl_stat_ok;
}

/* Counts the band nodes below the node a walk starts at (not itself). */
static isl_bool count_band_cb(isl_schedule_node *node, void *user)
{
	int *n = user;
	*n += isl_schedule_node_get_type(node) == isl_schedule_node_band;
	return *n > 1 ? isl_bool_false : isl_bool_true;
}

/* The member of band mc->band that ends up innermost: the one walking the
 * output's stride-1 dimension of a contraction that reuses its operands
 * and that the band can register-tile (the tile's vectors: regtile.c moves
 * it last; row reductions get no tile), else the last one. */
typedef struct inner_ctx {
	const tc_poly *p;
	isl_schedule_node *band;
	int member;
} inner_ctx;

static isl_stat inner_cb(isl_set *set, void *user)
{
	inner_ctx *ic = user;
	const tc_poly_stmt *st = tc_poly_find_stmt(ic->p, isl_set_get_tuple_name(set));
	isl_size n = isl_schedule_node_band_n_member(ic->band), j;
	if (st && reusing(st) && tileable(ic->band, st))
		for (j = 0; j < n; j++)
			if (tc_poly_band_member_var(ic->band, (int)j, st) == st->ir->nlhs - 1)
				ic->member = (int)j;
	isl_set_free(set);
	return isl_stat_ok;
}

/* Add to mc->strided the instances of set (taken) when member mc->inner of
 * the band mc->band (innermost for them: no band below) walks their
 * output along another of its dimensions while another member walks the
 * output's stride-1 dimension: every innermost step writes a row apart,
 * where the statement alone would have the stride-1 loop innermost (the
 * order pass moves it there in a band of its own).  Fused with a
 * contraction whose register tile puts another member last (d_W1(b,h,i) =
 * d_A(b,h) * X(b,i) sharing d_A's band over b, h and k: h last), it
 * writes 52 MB a float at a time, three times slower than alone. */
static isl_stat misordered_cb(isl_set *set, void *user)
{
	measure_ctx *mc = user;
	const tc_poly_stmt *st = tc_poly_find_stmt(mc->p, isl_set_get_tuple_name(set));
	isl_size n = isl_schedule_node_band_n_member(mc->band), j;
	int last, v, walks = 0;
	if (!st || st->ir->nlhs < 2 || n < 2) {
		isl_set_free(set);
		return isl_stat_ok;
	}
	last = st->ir->nlhs - 1;
	v = tc_poly_band_member_var(mc->band, mc->inner, st);
	for (j = 0; j < n && !walks; j++)
		walks = (int)j != mc->inner && tc_poly_band_member_var(mc->band, (int)j, st) == last;
	if (v >= 0 && v < last && walks)
		mc->strided = isl_union_set_union(mc->strided, isl_union_set_from_set(set));
	else
		isl_set_free(set);
	return isl_stat_ok;
}

/* At every band: count it when skewed, and add to mc->tiled the
 * contraction instances it can hold in register tiles; in a band of two
 * or more statements with no band below, the instances misordered_cb
 * finds. */
static isl_bool band_cb(isl_schedule_node *node, void *user)
{
	measure_ctx *mc = user;
	isl_union_set *dom;
	int below = 0;
	if (isl_schedule_node_get_type(node) != isl_schedule_node_band ||
		isl_schedule_node_band_n_member(node) <= 0)
		return isl_bool_true;
	mc->c->skewed += band_skewed(node);
	isl_schedule_node_foreach_descendant_top_down(node, count_band_cb, &below);
	if (below == 1) { /* the node itself: innermost */
		isl_union_set *d = isl_schedule_node_get_domain(node);
		if (isl_union_set_n_set(d) >= 2) {
			inner_ctx ic = {mc->p, node, isl_schedule_node_band_n_member(node) - 1};
			isl_union_set_foreach_set(d, inner_cb, &ic);
			mc->band = node;
			mc->inner = ic.member;
			isl_union_set_foreach_set(d, misordered_cb, mc);
		}
		isl_union_set_free(d);
	}
	{
		isl_multi_union_pw_aff *mupa = isl_schedule_node_band_get_partial_schedule(node);
		isl_size n = isl_multi_union_pw_aff_size(mupa);
		isl_union_pw_aff *upa = n > 0 ? isl_multi_union_pw_aff_get_union_pw_aff(mupa,
			(int)n - 1) : NULL;
		if (upa && isl_union_pw_aff_foreach_pw_aff(upa, stride_pa_cb, mc) < 0)
			mc->c->skewed++; /* unknown: as bad as a skewed band */
		isl_union_pw_aff_free(upa);
		isl_multi_union_pw_aff_free(mupa);
	}
	dom = isl_schedule_node_get_domain(node);
	mc->band = node;
	isl_union_set_foreach_set(dom, tiled_cb, mc);
	isl_union_set_free(dom);
	return isl_bool_true;
}

/* The contractions among the statements of a nest that reuse an operand
 * (reusing) and take a register tile: how many, and their instances
 * (chain_cb collects them).  A contraction whose operand panel the order
 * pass holds in registers (tc_poly_panel_var: each factor of a Kronecker
 * product) gets no register tile and is not counted: the three factors of
 * 256 x 16^3 under one loop over m, each m's 16 KiB temporaries staying
 * in L1, took 0.91 ms against 1.36 as three nests over all of m, whose
 * 4 MiB temporaries went through the L3 (one thread; 0.44 against 0.65
 * on two; Intel Xeon, docs/performance.md "Kronecker factors under one
 * loop"). */
typedef struct chain_ctx {
	const tc_poly *p;
	int n;              /* contractions seen */
	isl_union_set *dom; /* their instances */
} chain_ctx;

/* Add the instances set (taken) to cc when they are a reusing
 * contraction's that takes a register tile. */
static isl_stat chain_cb(isl_set *set, void *user)
{
	chain_ctx *cc = user;
	const tc_poly_stmt *st = tc_poly_find_stmt(cc->p, isl_set_get_tuple_name(set));
	if (st && reusing(st) && tc_poly_panel_var(cc->p, st) < 0) {
		cc->n++;
		cc->dom = isl_union_set_union(cc->dom, isl_union_set_from_set(set));
	} else {
		isl_set_free(set);
	}
	return isl_stat_ok;
}

/* The instances of a scatter that adds with atomics (on a GPU,
 * tc_poly_scatter_atomic) in the top band node when no parallel
 * (coincident) member of it walks one of the scatter's gathered indices:
 * the mapping spreads only those over threads, so the gathered loops, its
 * many iterations, stay in one thread (the embedding backward fused with
 * its fill, whose order the shared member keeps: the rows' 64 values on
 * threads, the 4096 reads in a loop).  Added to the serial
 * instances; 0 without such scatters, on the CPU always. */
typedef struct scatter_ctx {
	const tc_poly *p;
	isl_schedule_node *band;
	double serial;
} scatter_ctx;

static isl_stat scatter_cb(isl_set *set, void *user)
{
	scatter_ctx *sc = user;
	const tc_poly_stmt *st = tc_poly_find_stmt(sc->p, isl_set_get_tuple_name(set));
	isl_size n = isl_schedule_node_band_n_member(sc->band);
	int j, v, walks = 0;
	if (st && st->kind == TC_POLY_UPDATE && tc_poly_scatter_atomic(sc->p, st->ir)) {
		for (j = 0; j < n && !walks; j++)
			walks = (v = tc_poly_band_member_var(sc->band, j, st)) >= 0 &&
				st->ir->vars[v].is_reduction &&
				isl_schedule_node_band_member_get_coincident(sc->band, j) ==
					isl_bool_true;
		if (!walks) {
			isl_union_set *u = isl_union_set_from_set(isl_set_copy(set));
			sc->serial += tc_poly_box_instances(sc->p, u, 1e6);
			isl_union_set_free(u);
		}
	}
	isl_set_free(set);
	return isl_stat_ok;
}

/* At the band that starts each top-level loop nest: add its instances
 * to the serial ones unless its first member is coincident (and those of
 * atomic scatters whose gathered loops it does not walk: scatter_cb), and
 * those of its contractions to the chained ones when it holds two or
 * more; nothing below it (statements without loops have no loop to share
 * either). */
static isl_bool nest_cb(isl_schedule_node *node, void *user)
{
	measure_ctx *mc = user;
	isl_union_set *dom;
	chain_ctx cc = {mc->p, 0, NULL};
	if (isl_schedule_node_get_type(node) != isl_schedule_node_band ||
		isl_schedule_node_band_n_member(node) <= 0)
		return isl_bool_true;
	dom = isl_schedule_node_get_domain(node);
	if (isl_schedule_node_band_member_get_coincident(node, 0) != isl_bool_true) {
		mc->c->serial += tc_poly_box_instances(mc->p, dom, 1e6);
	} else {
		scatter_ctx sc = {mc->p, node, 0};
		isl_union_set_foreach_set(dom, scatter_cb, &sc);
		mc->c->serial += sc.serial;
	}
	cc.dom = isl_union_set_empty(isl_union_set_get_space(dom));
	isl_union_set_foreach_set(dom, chain_cb, &cc);
	if (cc.n >= 2 && cc.dom)
		mc->c->chained += tc_poly_box_instances(mc->p, cc.dom, 1e6);
	isl_union_set_free(cc.dom);
	isl_union_set_free(dom);
	return isl_bool_false;
}

void tc_poly_nest_measure(__tc_keep const tc_poly *p, __tc_keep isl_schedule_node *node,
	__tc_keep tc_poly_nest_cost *c)
{
	isl_schedule_node *below = NULL;
	isl_union_set *dom, *all;
	measure_ctx mc = {p, c, NULL, NULL, NULL, 0};
	isl_size ns;
	c->serial = c->untiled = c->chained = c->strided = 0;
	c->skewed = 0;
	c->statements = 0;
	if (!node)
		return;
	/* a domain node: the instances that reach it are its child's */
	if (isl_schedule_node_get_type(node) == isl_schedule_node_domain)
		node = below = isl_schedule_node_get_child(node, 0);
	if (!node)
		return;
	dom = isl_schedule_node_get_domain(node);
	ns = isl_union_set_n_set(dom);
	c->statements = ns < 0 ? 0 : (int)ns;
	isl_schedule_node_foreach_descendant_top_down(node, nest_cb, &mc);
	/* the untiled contractions: all of them (band NULL) but the tiled */
	mc.tiled = isl_union_set_empty(isl_union_set_get_space(dom));
	isl_union_set_foreach_set(dom, tiled_cb, &mc);
	all = mc.tiled;
	mc.tiled = isl_union_set_empty(isl_union_set_get_space(dom));
	mc.strided = isl_union_set_empty(isl_union_set_get_space(dom));
	isl_union_set_free(dom);
	isl_schedule_node_foreach_descendant_top_down(node, band_cb, &mc);
	all = isl_union_set_subtract(all, mc.tiled);
	c->untiled = all ? tc_poly_box_instances(p, all, 1e6) : 0;
	isl_union_set_free(all);
	c->strided = mc.strided ? tc_poly_box_instances(p, mc.strided, 1e6) : 0;
	isl_union_set_free(mc.strided);
	isl_schedule_node_free(below);
}

int tc_poly_nest_cost_less(__tc_keep const tc_poly_nest_cost *a,
	__tc_keep const tc_poly_nest_cost *b)
{
	double ca = a->serial + a->untiled + a->chained + a->strided;
	double cb = b->serial + b->untiled + b->chained + b->strided;
	if (ca != cb)
		return ca < cb;
	return a->skewed < b->skewed;
}

/* The filters of the children of sequence or set node src, as a list. */
static isl_union_set_list *child_filters(isl_schedule_node *src)
{
	isl_size n = isl_schedule_node_n_children(src), i;
	isl_union_set_list *l;
	if (n < 0)
		return NULL;
	l = isl_union_set_list_alloc(isl_schedule_node_get_ctx(src), n);
	for (i = 0; l && i < n; i++) {
		isl_schedule_node *f = isl_schedule_node_get_child(src, (int)i);
		l = isl_union_set_list_add(l, isl_schedule_node_filter_get_filter(f));
		isl_schedule_node_free(f);
	}
	return l;
}

/* Copy the tree below src (kept) to leaf node dst (taken): the same
 * bands (permutability and coincidence included), sequences, sets and
 * filters.  Returns the node at dst's position, or NULL (an isl error, or
 * a node type the scheduler does not make). */
static isl_schedule_node *replay(isl_schedule_node *dst, isl_schedule_node *src)
{
	enum isl_schedule_node_type t;
	isl_schedule_node *child;
	isl_size n, i;
	if (!dst || !src) {
		isl_schedule_node_free(dst);
		return NULL;
	}
	t = isl_schedule_node_get_type(src);
	switch (t) {
	case isl_schedule_node_leaf:
		return dst;
	case isl_schedule_node_domain:
	case isl_schedule_node_filter:
		/* a filter's instances are the dst leaf's already (its parent
		 * inserted it), and the domain is the group's */
		child = isl_schedule_node_get_child(src, 0);
		dst = replay(dst, child);
		isl_schedule_node_free(child);
		return dst;
	case isl_schedule_node_band:
		n = isl_schedule_node_band_n_member(src);
		dst = isl_schedule_node_insert_partial_schedule(dst,
			isl_schedule_node_band_get_partial_schedule(src));
		dst = isl_schedule_node_band_set_permutable(dst,
			isl_schedule_node_band_get_permutable(src) == isl_bool_true);
		for (i = 0; dst && i < n; i++)
			dst = isl_schedule_node_band_member_set_coincident(dst, (int)i,
				isl_schedule_node_band_member_get_coincident(src, (int)i) ==
				isl_bool_true);
		child = isl_schedule_node_get_child(src, 0);
		dst = replay(isl_schedule_node_child(dst, 0), child);
		isl_schedule_node_free(child);
		return isl_schedule_node_parent(dst);
	case isl_schedule_node_sequence:
	case isl_schedule_node_set:
		n = isl_schedule_node_n_children(src);
		dst = t == isl_schedule_node_sequence
			? isl_schedule_node_insert_sequence(dst, child_filters(src))
			: isl_schedule_node_insert_set(dst, child_filters(src));
		for (i = 0; dst && i < n; i++) {
			/* below the i-th filter, the i-th subtree */
			child = isl_schedule_node_get_child(src, (int)i);
			dst = isl_schedule_node_child(isl_schedule_node_child(dst, (int)i), 0);
			dst = replay(dst, child);
			isl_schedule_node_free(child);
			dst = isl_schedule_node_parent(isl_schedule_node_parent(dst));
		}
		return dst;
	default:
		isl_schedule_node_free(dst);
		return NULL;
	}
}

__tc_give isl_schedule_node *tc_poly_graft(__tc_take isl_schedule_node *node,
	__tc_keep isl_schedule *s)
{
	isl_schedule_node *root = isl_schedule_get_root(s);
	node = isl_schedule_node_cut(node);
	node = replay(node, root);
	isl_schedule_node_free(root);
	return node;
}

/* ---- nests that read the same data ----
 *
 * isl schedules statements with no dependence between them (layer norm's
 * backward: the rows' d_X, and the column sums d_G(d) +=! d_Y(n,d) *
 * xh(n,d) and d_Bt(d) +=! d_Y(n,d)) as separate nests under a set, each
 * reading d_Y from memory again.  tc_poly_fuse_reuse puts nests that read
 * a common tensor under shared loops:
 * - nests whose first bands have the same members over the same values
 *   (the two column sums) and no dependence between them share the whole
 *   band, its coincidence and permutability those of both: the threads
 *   share it as they shared each (strip_parallel);
 * - with one thread, nests whose first members take the same values (the
 *   rows of d_X and the column sums, all over n) share that loop, which
 *   then carries the sums' dependence: one pass over d_Y instead of three
 *   (derived layer-norm backward, 4096 x 1024, one thread: 2.7-2.8 ->
 *   1.9-2.1 ms, its d_xc a row buffer, polyhedral/contract.c).
 * Only over a tensor of more than half the L2 (smaller data stays in cache
 * from one nest to the next).  A nest with a contraction (its tiles want
 * its band alone) or whose top is no band stays as it is, and so does the
 * tree when the result would break a dependence. */

typedef struct reuse_nest {
	isl_union_set *dom;      /* the filter's instances */
	isl_schedule_node *band; /* the band below the filter (NULL: none) */
	uint64_t reads;          /* tensors (the first 64) its statements read */
	int members, ok;
} reuse_nest;

typedef struct reuse_ctx {
	const tc_poly *p;
	reuse_nest *nest;
} reuse_ctx;

static isl_stat reuse_stmt_cb(isl_set *set, void *user)
{
	reuse_ctx *rc = user;
	const tc_poly_stmt *st = tc_poly_find_stmt(rc->p, isl_set_get_tuple_name(set));
	int t;
	isl_set_free(set);
	if (!st || contraction(st) || st->ir->sub)
		rc->nest->ok = 0;
	else
		for (t = 0; t < rc->p->f->ntensors && t < 64; t++)
			if (tc_ir_reads(st->ir->rhs, t))
				rc->nest->reads |= (uint64_t)1 << t;
	return isl_stat_ok;
}

/* Whether the first k members of the bands of a and b take the same
 * values. */
static int same_values(reuse_nest *a, reuse_nest *b, int k)
{
	int j, same = 1;
	for (j = 0; j < k && same; j++) {
		isl_set *va = tc_poly_band_member_values(NULL, a->band, j),
			*vb = tc_poly_band_member_values(NULL, b->band, j);
		same = va && vb && isl_set_is_equal(va, vb) == isl_bool_true;
		isl_set_free(va);
		isl_set_free(vb);
	}
	return same;
}

/* Whether deps join an instance of a to one of b, either way. */
static int joined(isl_union_map *deps, isl_union_set *a, isl_union_set *b)
{
	isl_union_map *ab = isl_union_map_intersect_range(isl_union_map_intersect_domain(
		isl_union_map_copy(deps), isl_union_set_copy(a)), isl_union_set_copy(b));
	isl_union_map *ba = isl_union_map_intersect_range(isl_union_map_intersect_domain(
		isl_union_map_copy(deps), isl_union_set_copy(b)), isl_union_set_copy(a));
	int none = isl_union_map_is_empty(ab) == isl_bool_true &&
		isl_union_map_is_empty(ba) == isl_bool_true;
	isl_union_map_free(ab);
	isl_union_map_free(ba);
	return !none;
}

/* The first k members of the bands of the nests in group (of n), as one
 * partial schedule. */
static isl_multi_union_pw_aff *group_members(reuse_nest *nest, int n, const int *group, int k)
{
	isl_multi_union_pw_aff *out = NULL;
	int j, i;
	for (j = 0; j < k; j++) {
		isl_union_pw_aff *u = NULL;
		for (i = 0; i < n; i++) {
			isl_multi_union_pw_aff *m;
			isl_union_pw_aff *upa;
			if (!group[i])
				continue;
			m = isl_schedule_node_band_get_partial_schedule(nest[i].band);
			upa = isl_multi_union_pw_aff_get_union_pw_aff(m, j);
			isl_multi_union_pw_aff_free(m);
			upa = isl_union_pw_aff_intersect_domain_union_set(upa,
				isl_union_set_copy(nest[i].dom));
			u = u ? isl_union_pw_aff_union_add(u, upa) : upa;
		}
		out = !out ? isl_multi_union_pw_aff_from_union_pw_aff(u)
			   : isl_multi_union_pw_aff_flat_range_product(out,
				     isl_multi_union_pw_aff_from_union_pw_aff(u));
	}
	return out;
}

/* Below leaf dst: what nest i's tree holds below its first k band
 * members.  Returns the node at dst's position. */
static isl_schedule_node *replay_rest(isl_schedule_node *dst, reuse_nest *nest, int k)
{
	isl_schedule_node *src;
	if (k < isl_schedule_node_band_n_member(nest->band)) {
		src = isl_schedule_node_band_split(isl_schedule_node_copy(nest->band), k);
		src = isl_schedule_node_child(src, 0);
	} else {
		src = isl_schedule_node_get_child(nest->band, 0);
	}
	dst = replay(dst, src);
	isl_schedule_node_free(src);
	return dst;
}

/* The tree of s with the nests of group (children of top, n of them) under
 * one band of their first k members (coincident where coinc[j],
 * permutable as asked), at the place of the group's first, their trees
 * below it in order; NULL on an isl error. */
static isl_schedule *fuse_group(isl_schedule *s, isl_schedule_node *top, reuse_nest *nest,
	int n, const int *group, int k, const int *coinc, int permutable)
{
	isl_schedule *t = isl_schedule_from_domain(isl_schedule_get_domain(s));
	isl_schedule_node *dst = isl_schedule_node_child(isl_schedule_get_root(t), 0);
	isl_ctx *ctx = isl_schedule_get_ctx(s);
	isl_union_set_list *filters = isl_union_set_list_alloc(ctx, n);
	isl_union_set *all = NULL;
	int i, j, pos, first = -1, ng = 0;
	isl_schedule_free(t);
	for (i = 0; i < n; i++)
		if (group[i]) {
			all = all ? isl_union_set_union(all, isl_union_set_copy(nest[i].dom))
				  : isl_union_set_copy(nest[i].dom);
			ng++;
			if (first < 0)
				first = i;
		}
	for (i = 0; i < n; i++)
		if (!group[i])
			filters = isl_union_set_list_add(filters, isl_union_set_copy(nest[i].dom));
		else if (i == first)
			filters = isl_union_set_list_add(filters, isl_union_set_copy(all));
	isl_union_set_free(all);
	dst = isl_schedule_node_get_type(top) == isl_schedule_node_sequence
		? isl_schedule_node_insert_sequence(dst, filters)
		: isl_schedule_node_insert_set(dst, filters);
	for (i = 0, pos = 0; dst && i < n; i++) {
		if (group[i] && i != first)
			continue;
		dst = isl_schedule_node_child(isl_schedule_node_child(dst, pos++), 0);
		if (!group[i]) {
			isl_schedule_node *src = isl_schedule_node_get_child(top, i);
			dst = replay(dst, src);
			isl_schedule_node_free(src);
		} else {
			int g = 0, jn;
			isl_union_set_list *inner = isl_union_set_list_alloc(ctx, ng);
			dst = isl_schedule_node_insert_partial_schedule(dst,
				group_members(nest, n, group, k));
			dst = isl_schedule_node_band_set_permutable(dst, permutable);
			for (j = 0; dst && j < k; j++)
				dst = isl_schedule_node_band_member_set_coincident(dst, j, coinc[j]);
			dst = isl_schedule_node_child(dst, 0);
			for (jn = 0; jn < n; jn++)
				if (group[jn])
					inner = isl_union_set_list_add(inner,
						isl_union_set_copy(nest[jn].dom));
			dst = isl_schedule_node_insert_sequence(dst, inner);
			for (jn = 0; dst && jn < n; jn++) {
				if (!group[jn])
					continue;
				dst = isl_schedule_node_child(isl_schedule_node_child(dst, g++), 0);
				dst = replay_rest(dst, &nest[jn], k);
				dst = isl_schedule_node_parent(isl_schedule_node_parent(dst));
			}
			dst = isl_schedule_node_parent(dst); /* the band */
		}
		dst = isl_schedule_node_parent(isl_schedule_node_parent(dst));
	}
	t = dst ? isl_schedule_node_get_schedule(dst) : NULL;
	isl_schedule_node_free(dst);
	return t;
}

/* The first read of tensor t in e, or NULL. */
static const tc_ir_expr *read_of(const tc_ir_expr *e, int t)
{
	const tc_ir_expr *r = NULL;
	int k;
	if (e->op == TC_OP_READ && e->id == t)
		return e;
	for (k = 0; k < e->nargs && !r; k++)
		r = read_of(e->args[k], t);
	return r;
}

typedef struct dim_ctx {
	const tc_poly *p;
	isl_schedule_node *band;
	int member, t, dim;
} dim_ctx;

static isl_stat dim_cb(isl_set *set, void *user)
{
	dim_ctx *dc = user;
	const tc_poly_stmt *st = tc_poly_find_stmt(dc->p, isl_set_get_tuple_name(set));
	const tc_ir_expr *r;
	int v, k;
	isl_set_free(set);
	if (dc->dim != -2 || !st || (st->kind != TC_POLY_UPDATE && st->kind != TC_POLY_ASSIGN) ||
		!(r = read_of(st->ir->rhs, dc->t)))
		return isl_stat_ok;
	dc->dim = -1;
	if ((v = tc_poly_band_member_var(dc->band, dc->member, st)) < 0)
		return isl_stat_ok;
	for (k = 0; k < r->nargs; k++)
		if (tc_ir_uses_var(r->args[k], v)) {
			dc->dim = k;
			break;
		}
	return isl_stat_ok;
}

/* The dimension of tensor t that member m of band walks in the first of
 * its statements that reads t (-1: none). */
static int member_dim(const tc_poly *p, isl_schedule_node *band, int m, int t)
{
	isl_union_set *dom = isl_schedule_node_get_domain(band);
	dim_ctx dc = {p, band, m, t, -2};
	isl_union_set_foreach_set(dom, dim_cb, &dc);
	isl_union_set_free(dom);
	return dc.dim < 0 ? -1 : dc.dim;
}

/* Whether tensor t takes more than half of the L2, so that a nest reading
 * it after another would read it from beyond the L2 again. */
static int big_enough(const tc_poly *p, int t)
{
	int64_t bytes = tc_ir_tail_bytes(p->f, t, 0, p->params);
	return p->target->l2_bytes > 0 && bytes > p->target->l2_bytes / 2;
}

/* The lowest tensor in the bit set m. */
static int lowest(uint64_t m)
{
	int t = 0;
	while (t < 63 && !(m >> t & 1))
		t++;
	return t;
}

/* Whether members 0..k-1 of the bands of nests a and b walk the same
 * values and the same dimensions of tensor t, which both read. */
static int same_loops(const tc_poly *p, reuse_nest *a, reuse_nest *b, int k, int t)
{
	int j;
	for (j = 0; j < k; j++) {
		int da = member_dim(p, a->band, j, t);
		if (da < 0 || da != member_dim(p, b->band, j, t))
			return 0;
	}
	return same_values(a, b, k);
}

/* Nest b's band with a member that walks dimension dim of tensor t first
 * (moved there when the band is permutable), as a new node, or NULL when
 * none does.  With one thread the nests share the loop over t's first
 * dimension, its rows: a loop over its columns outermost would walk the
 * rows' sums down the columns. */
static isl_schedule_node *align_dim(const tc_poly *p, reuse_nest *b, int t, int dim)
{
	int perm[TC_POLY_MAX_TILE], m, j, n = b->members;
	if (member_dim(p, b->band, 0, t) == dim)
		return isl_schedule_node_copy(b->band);
	if (n > TC_POLY_MAX_TILE || isl_schedule_node_band_get_permutable(b->band) != isl_bool_true)
		return NULL;
	for (m = 1; m < n; m++)
		if (member_dim(p, b->band, m, t) == dim) {
			perm[0] = m;
			for (j = 1; j < n; j++)
				perm[j] = j <= m ? j - 1 : j;
			return tc_poly_band_permute(isl_schedule_node_copy(b->band), perm);
		}
	return NULL;
}

/* ---- partial sums on several threads (ir/partial.c) ----
 *
 * A column sum rewritten into partial sums over chunks of rows,
 * d_G_part(n_t,d) +=! d_Y(C*n_t + n_q, d) * ..., shares the rows' loop with
 * the statements that walk the same rows, as on one thread, and the
 * parallel pass hands out its chunks of rows (tc_poly_partial_chunks).
 * For that, its nest's band gets one member for the row, C*n_t + n_q + lo
 * (its init's C*n_t + lo: the chunk's first row), in place of n_t and n_q
 * (partial_band). */

/* The rows per chunk and first row of the partial sums under nest a (every
 * statement of it one, of one size), 0 when it is no such nest. */
typedef struct part_nest {
	const tc_poly *p;
	int64_t rows, lo;
	int other;
	const tc_poly_stmt *update;
} part_nest;

static isl_stat part_nest_cb(isl_set *set, void *user)
{
	part_nest *pn = user;
	const tc_poly_stmt *st = tc_poly_find_stmt(pn->p, isl_set_get_tuple_name(set));
	isl_set_free(set);
	if (!st || !st->ir->part_rows || (pn->rows && (pn->rows != st->ir->part_rows ||
		pn->lo != st->ir->part_lo))) {
		pn->other = 1;
		return isl_stat_ok;
	}
	pn->rows = st->ir->part_rows;
	pn->lo = st->ir->part_lo;
	if (st->kind == TC_POLY_UPDATE)
		pn->update = st;
	return isl_stat_ok;
}

static int64_t partial_nest(const tc_poly *p, reuse_nest *a, int64_t *lo,
	const tc_poly_stmt **update)
{
	part_nest pn = {p, 0, 0, 0, NULL};
	isl_union_set_foreach_set(a->dom, part_nest_cb, &pn);
	*lo = pn.lo;
	*update = pn.update;
	return pn.other || !pn.update ? 0 : pn.rows;
}

/* Nest a's band (of partial sums of rows rows per chunk from row lo, its
 * update statement st) with its members over the chunks and over a
 * chunk's rows made one, the row: first, then the others; a new node, or
 * NULL when the band does not walk them (or is not permutable when they
 * must move). */
static isl_schedule_node *partial_band(reuse_nest *a, const tc_poly_stmt *st, int64_t rows,
	int64_t lo)
{
	isl_schedule_node *b;
	isl_multi_union_pw_aff *m, *rest = NULL;
	isl_union_pw_aff *row;
	isl_ctx *ctx;
	int perm[TC_POLY_MAX_TILE], n = a->members, mt = -1, mq = -1, j, k, coinc[TC_POLY_MAX_TILE];
	int permutable;
	if (n < 2 || n > TC_POLY_MAX_TILE)
		return NULL;
	for (j = 0; j < n; j++) {
		int v = tc_poly_band_member_var(a->band, j, st);
		if (v == 0)
			mt = j;
		else if (v == st->ir->nlhs)
			mq = j;
	}
	if (mt < 0 || mq < 0)
		return NULL;
	permutable = isl_schedule_node_band_get_permutable(a->band) == isl_bool_true;
	perm[0] = mt;
	perm[1] = mq;
	for (j = 0, k = 2; j < n; j++)
		if (j != mt && j != mq)
			perm[k++] = j;
	for (j = 0; j < n && perm[j] == j; j++)
		;
	if (j < n && !permutable)
		return NULL;
	b = j < n ? tc_poly_band_permute(isl_schedule_node_copy(a->band), perm)
		  : isl_schedule_node_copy(a->band);
	if (!b)
		return NULL;
	ctx = isl_schedule_node_get_ctx(b);
	for (j = 2; j < n; j++)
		coinc[j - 1] = isl_schedule_node_band_member_get_coincident(b, j) == isl_bool_true;
	m = isl_schedule_node_band_get_partial_schedule(b);
	row = isl_union_pw_aff_add(
		isl_union_pw_aff_scale_val(isl_multi_union_pw_aff_get_union_pw_aff(m, 0),
			isl_val_int_from_si(ctx, rows)),
		isl_multi_union_pw_aff_get_union_pw_aff(m, 1));
	if (lo)
		row = isl_union_pw_aff_add(row, isl_union_pw_aff_val_on_domain(
			isl_union_set_copy(a->dom), isl_val_int_from_si(ctx, lo)));
	rest = isl_multi_union_pw_aff_from_union_pw_aff(row);
	for (j = 2; j < n; j++)
		rest = isl_multi_union_pw_aff_flat_range_product(rest,
			isl_multi_union_pw_aff_from_union_pw_aff(
				isl_multi_union_pw_aff_get_union_pw_aff(m, j)));
	isl_multi_union_pw_aff_free(m);
	b = isl_schedule_node_delete(b);
	b = isl_schedule_node_insert_partial_schedule(b, rest);
	b = isl_schedule_node_band_set_permutable(b, permutable);
	b = isl_schedule_node_band_member_set_coincident(b, 0, 0); /* it carries the sums */
	for (j = 1; b && j < n - 1; j++)
		b = isl_schedule_node_band_member_set_coincident(b, j, coinc[j]);
	return b;
}

typedef struct part_set {
	const tc_poly *p;
	isl_union_set *part;
	int other;
} part_set;

static isl_stat part_set_cb(isl_set *set, void *user)
{
	part_set *ps = user;
	const tc_poly_stmt *st = tc_poly_find_stmt(ps->p, isl_set_get_tuple_name(set));
	if (st && st->ir->part_rows)
		ps->part = isl_union_set_add_set(ps->part, set);
	else {
		ps->other = 1;
		isl_set_free(set);
	}
	return isl_stat_ok;
}

/* The children of sequence node (taken) that are bands of instances that
 * cb puts in its part_set's part and of others, where cb sets other to 1
 * for each of those (not 2: the band is left alone), split into the
 * part's nest and then the others' (isl_schedule_node_order_before),
 * spliced into node; a sequence. */
static isl_schedule_node *parts_first(const tc_poly *p, isl_schedule_node *node,
	isl_stat (*cb)(isl_set *set, void *user))
{
	isl_size n = isl_schedule_node_n_children(node), i, depth = isl_schedule_node_get_tree_depth(node);
	/* from the last: isl may splice a split into node's sequence */
	for (i = n - 1; node && i >= 0; i--) {
		isl_schedule_node *c = isl_schedule_node_child(isl_schedule_node_child(node, (int)i), 0);
		if (c && isl_schedule_node_get_type(c) == isl_schedule_node_band) {
			isl_union_set *dom = isl_schedule_node_get_domain(c);
			part_set ps = {p, isl_union_set_empty(isl_union_set_get_space(dom)), 0};
			isl_union_set_foreach_set(dom, cb, &ps);
			isl_union_set_free(dom);
			if (ps.other == 1 && isl_union_set_is_empty(ps.part) == isl_bool_false)
				c = isl_schedule_node_order_before(c, ps.part);
			else
				isl_union_set_free(ps.part);
		}
		node = c ? isl_schedule_node_ancestor(c, isl_schedule_node_get_tree_depth(c) - depth)
			 : NULL;
	}
	return isl_schedule_node_sequence_splice_children(node);
}

/* The children of top-level sequence node that are bands of partial sums
 * together with other statements (the scheduler puts the sum of the
 * partials in the partial sums' band, skewed) split into the partial
 * sums' nest and then the others' (the others read the partial sums,
 * never the other way); a sequence. */
static isl_schedule_node *split_partials(const tc_poly *p, isl_schedule_node *node)
{
	return parts_first(p, node, part_set_cb);
}

static isl_stat init_cb(isl_set *set, void *user)
{
	const tc_poly_stmt *st = tc_poly_find_stmt(user, isl_set_get_tuple_name(set));
	isl_set_free(set);
	return st && st->ir->part_rows && st->kind == TC_POLY_INIT ? isl_stat_ok : isl_stat_error;
}

/* Whether the instances of filter node are the inits of partial sums
 * only. */
static int partial_inits(const tc_poly *p, isl_schedule_node *node)
{
	isl_union_set *dom = isl_schedule_node_filter_get_filter(node);
	int only = isl_union_set_is_empty(dom) == isl_bool_false &&
		isl_union_set_foreach_set(dom, init_cb, (void *)p) == isl_stat_ok;
	isl_union_set_free(dom);
	return only;
}

/* A new schedule over domain (taken): a sequence of filters (taken), below
 * the i-th of them the tree of nests[i] (kept) replayed; NULL on an isl
 * error. */
static isl_schedule *sequence_of(isl_union_set *domain, isl_union_set_list *filters,
	isl_schedule_node **nests, int n)
{
	isl_schedule *t = isl_schedule_from_domain(domain);
	isl_schedule_node *dst = isl_schedule_node_child(isl_schedule_get_root(t), 0);
	int i;
	isl_schedule_free(t);
	dst = isl_schedule_node_insert_sequence(dst, filters);
	for (i = 0; dst && i < n; i++) {
		dst = isl_schedule_node_child(isl_schedule_node_child(dst, i), 0);
		dst = replay(dst, nests[i]);
		dst = isl_schedule_node_parent(isl_schedule_node_parent(dst));
	}
	t = dst ? isl_schedule_node_get_schedule(dst) : NULL;
	isl_schedule_node_free(dst);
	return t;
}

/* Sequence node (taken) rebuilt with the nests that init partial sums
 * first (nothing before them reads or writes the partial sums): then the
 * partial sums' nests can move up to share the rows' loop.  The new
 * schedule, or NULL on an isl error. */
static isl_schedule *inits_first(const tc_poly *p, isl_schedule_node *node)
{
	isl_size n = isl_schedule_node_n_children(node), i;
	isl_union_set_list *filters = isl_union_set_list_alloc(isl_schedule_node_get_ctx(node), n);
	isl_schedule_node **kids = calloc((size_t)(n > 0 ? n : 1), sizeof(*kids));
	int *first = calloc((size_t)(n > 0 ? n : 1), sizeof(*first)), pass, k = 0;
	isl_schedule *t = NULL;
	if (kids && first) {
		for (i = 0; i < n; i++) {
			isl_schedule_node *c = isl_schedule_node_get_child(node, (int)i);
			first[i] = partial_inits(p, c);
			isl_schedule_node_free(c);
		}
		for (pass = 1; pass >= 0; pass--)
			for (i = 0; i < n; i++)
				if (first[i] == pass) {
					isl_schedule_node *c = isl_schedule_node_get_child(node, (int)i);
					filters = isl_union_set_list_add(filters,
						isl_schedule_node_filter_get_filter(c));
					kids[k++] = isl_schedule_node_child(c, 0);
				}
		t = sequence_of(isl_schedule_node_get_domain(node), filters, kids, k);
	} else {
		isl_union_set_list_free(filters);
	}
	for (i = 0; i < k; i++)
		isl_schedule_node_free(kids[i]);
	free(kids);
	free(first);
	isl_schedule_node_free(node);
	return t;
}

/* The nests below set or sequence node, in tree order, as the filters
 * (within = what the filters above keep) and subtrees that are neither:
 * appended to filters and nests (n of them so far, at most 64). */
static int collect_nests(isl_schedule_node *node, isl_union_set *within,
	isl_union_set_list **filters, isl_schedule_node **nests, int n)
{
	isl_size nc = isl_schedule_node_n_children(node), i;
	for (i = 0; n >= 0 && i < nc; i++) {
		isl_schedule_node *f = isl_schedule_node_get_child(node, (int)i);
		isl_schedule_node *c = isl_schedule_node_get_child(f, 0);
		isl_union_set *in = isl_union_set_intersect(isl_union_set_copy(within),
			isl_schedule_node_filter_get_filter(f));
		enum isl_schedule_node_type t = isl_schedule_node_get_type(c);
		isl_schedule_node_free(f);
		if (t == isl_schedule_node_set || t == isl_schedule_node_sequence) {
			n = collect_nests(c, in, filters, nests, n);
			isl_schedule_node_free(c);
		} else if (n < 64) {
			*filters = isl_union_set_list_add(*filters, in);
			nests[n++] = c;
		} else {
			isl_union_set_free(in);
			isl_schedule_node_free(c);
			n = -1;
		}
	}
	isl_union_set_free(within);
	return n;
}

/* With partial sums on several threads, the isl scheduler's tree of
 * components (sets and sequences: a partial sum and the sum of the
 * partials in one, the rows' statements in another, layer norm's
 * statistics in a set beside an init) as one sequence of their nests in
 * tree order (the members of a set are independent), the partial sums in
 * nests of their own (split_partials) and their inits first
 * (inits_first), so that the rows' loop can be shared across them; a
 * tree that is one band (a column sum alone, with its partials' sum) as
 * a sequence of that nest. */
static isl_schedule *flat_sequence(const tc_poly *p, isl_schedule *s)
{
	isl_schedule_node *top = isl_schedule_node_child(isl_schedule_get_root(s), 0), *dst;
	isl_schedule_node *nests[64];
	isl_union_set_list *filters;
	isl_schedule *t;
	enum isl_schedule_node_type type = top ? isl_schedule_node_get_type(top)
					       : isl_schedule_node_error;
	int n, i;
	if (type != isl_schedule_node_set && type != isl_schedule_node_sequence &&
		type != isl_schedule_node_band) {
		isl_schedule_node_free(top);
		return s;
	}
	filters = isl_union_set_list_alloc(isl_schedule_get_ctx(s), 8);
	if (type == isl_schedule_node_band) { /* one nest (a column sum alone) */
		filters = isl_union_set_list_add(filters, isl_schedule_get_domain(s));
		nests[0] = top;
		n = 1;
	} else {
		n = collect_nests(top, isl_schedule_get_domain(s), &filters, nests, 0);
		isl_schedule_node_free(top);
	}
	if (n < 1) {
		isl_union_set_list_free(filters);
		for (i = 0; i < n; i++)
			isl_schedule_node_free(nests[i]);
		return s;
	}
	t = sequence_of(isl_schedule_get_domain(s), filters, nests, n);
	for (i = 0; i < n; i++)
		isl_schedule_node_free(nests[i]);
	dst = t ? isl_schedule_node_child(isl_schedule_get_root(t), 0) : NULL;
	isl_schedule_free(t);
	dst = split_partials(p, dst);
	t = dst ? inits_first(p, dst) : NULL;
	if (!t)
		return s;
	isl_schedule_free(s);
	return t;
}

/* Whether p has partial sums (ir/partial.c). */
static int has_partials(const tc_poly *p)
{
	int i;
	for (i = 0; i < p->nstmts; i++)
		if (p->stmts[i].ir->part_rows)
			return 1;
	return 0;
}

/* Whether nest a holds partial sums only. */
static int is_partial(const tc_poly *p, reuse_nest *a)
{
	int64_t lo;
	const tc_poly_stmt *st;
	return partial_nest(p, a, &lo, &st) > 0;
}

/* Nest a's band with a member over the rows of tensor t first (a new
 * node), or NULL: align_dim's, or with several threads partial_band's for
 * a nest of partial sums. */
static isl_schedule_node *rows_band(const tc_poly *p, reuse_nest *a, int t, int threads)
{
	const tc_poly_stmt *st;
	int64_t lo, rows = partial_nest(p, a, &lo, &st);
	if (rows)
		return threads ? partial_band(a, st, rows, lo) : NULL;
	return align_dim(p, a, t, 0);
}

/* Nest b's band with a member over the rows of tensor t first
 * (rows_band), or with other tensors given (a bit set, 0 for none), of
 * the first of them, t included, that b reads and is big enough that it
 * walks; a new node or NULL. */
static isl_schedule_node *joiner_band(const tc_poly *p, reuse_nest *b, int t, uint64_t other)
{
	uint64_t m = (other | (uint64_t)1 << t) & b->reads;
	isl_schedule_node *r = NULL;
	int u;
	if (!other)
		return b->reads >> t & 1 ? rows_band(p, b, t, 0) : NULL;
	for (u = 0; u < 64 && !r; u++)
		if (m >> u & 1 && big_enough(p, u))
			r = rows_band(p, b, u, 1);
	return r;
}

/* Whether the group's fused band in schedule t (at the place of its first
 * nest) hands its chunks of rows to the threads (tc_poly_partial_chunks). */
static int chunked(const tc_poly *p, isl_schedule *t, const int *group)
{
	isl_schedule_node *b = isl_schedule_node_child(isl_schedule_get_root(t), 0);
	isl_multi_union_pw_aff *c = NULL;
	int first = 0;
	while (!group[first])
		first++;
	b = isl_schedule_node_child(isl_schedule_node_child(b, first), 0);
	if (b)
		c = tc_poly_partial_chunks(p, b);
	isl_schedule_node_free(b);
	isl_multi_union_pw_aff_free(c);
	return c != NULL;
}

/* One fusion of tc_poly_fuse_reuse's (see above) on the children of top:
 * the schedule made, or NULL when there is none to make.  Pass 0 fuses
 * whole bands, pass 1 (one thread) first members. */
static isl_schedule *fuse_reuse_once(const tc_poly *p, isl_schedule *s, isl_schedule_node *top,
	reuse_nest *nest, int n, isl_union_map *deps)
{
	int group[64], coinc[TC_POLY_MAX_TILE], i, j, k, g, pass;
	int threads = p->target->threads != 1, parts = threads && has_partials(p);
	for (pass = 0; pass < 2; pass++) {
		/* with several threads the rows' loop is shared only with
		 * partial sums (the loop carries a column sum otherwise) */
		if (pass == 1 && threads && !parts)
			break;
		for (i = 0; i < n; i++) {
			int ng = 1, cross = 0, perm = pass == 0, npart = 0;
			uint64_t greads = nest[i].reads; /* what the group's nests read */
			isl_schedule_node *saved[64] = {NULL};
			isl_union_set *gdom; /* the group's instances */
			isl_schedule *t = NULL;
			int tt = -1;
			if (!nest[i].ok || (pass == 0 && nest[i].members < 2))
				continue;
			k = pass == 0 ? nest[i].members : 1;
			if (k > TC_POLY_MAX_TILE)
				continue;
			memset(group, 0, sizeof(group));
			group[i] = 1;
			gdom = isl_union_set_copy(nest[i].dom);
			for (j = i + 1; j < n; j++) {
				isl_schedule_node *b = NULL;
				int c, tj;
				/* with partial sums, a nest joins the group over
				 * data any of its nests reads (d_X(n,d) = d_xc(n,d)
				 * + ... over the rows of d_xc, the others over d_Y) */
				uint64_t common = nest[j].reads & (pass == 1 && parts ? greads : nest[i].reads);
				if (!nest[j].ok || !common || (pass == 0 && nest[j].members != k))
					continue;
				tj = lowest(common);
				/* the data would stay in cache between the nests: no
				 * reuse to gain (mlp_fwd's 128 x 10 softmax: its
				 * division sharing the rows' loop took 1.02x the time) */
				if (!big_enough(p, tj))
					continue;
				if (pass == 1) {
					/* the loop over the rows of one tensor both
					 * read, the same for the whole group */
					if (tt < 0) {
						isl_schedule_node *a = rows_band(p, &nest[i], tj, threads);
						if (!a)
							continue;
						saved[i] = nest[i].band;
						nest[i].band = a;
						tt = tj;
					}
					if (!(b = joiner_band(p, &nest[j], tt, parts ? greads : 0)))
						continue;
					saved[j] = nest[j].band;
					nest[j].band = b;
					if (!same_values(&nest[i], &nest[j], 1)) {
						isl_schedule_node_free(nest[j].band);
						nest[j].band = saved[j];
						saved[j] = NULL;
						continue;
					}
				} else if (!same_loops(p, &nest[i], &nest[j], k, tj)) {
					continue;
				}
				/* a dependence with any nest of the group: none
				 * for whole bands, whose coincidence and
				 * permutability are then those of each */
				c = joined(deps, gdom, nest[j].dom);
				if (pass == 0 && c)
					continue;
				cross |= c;
				gdom = isl_union_set_union(gdom, isl_union_set_copy(nest[j].dom));
				greads |= nest[j].reads;
				group[j] = 1;
				ng++;
			}
			isl_union_set_free(gdom);
			for (g = 0; pass == 1 && threads && g < n; g++)
				npart += group[g] && is_partial(p, &nest[g]);
			if (ng >= 2 && (pass == 0 || !threads || npart)) {
				for (j = 0; j < k; j++) {
					coinc[j] = !cross;
					for (g = 0; g < n; g++)
						if (group[g])
							coinc[j] &= isl_schedule_node_band_member_get_coincident(
								nest[g].band, j) == isl_bool_true;
				}
				for (g = 0; g < n && perm; g++)
					if (group[g])
						perm = isl_schedule_node_band_get_permutable(nest[g].band) ==
							isl_bool_true;
				t = fuse_group(s, top, nest, n, group, k, coinc, perm);
				if (t && (tc_poly_schedule_legal_for(t, deps) != 1 ||
					(pass == 1 && threads && !chunked(p, t, group)))) {
					isl_schedule_free(t);
					t = NULL;
				}
			}
			for (j = 0; j < n; j++)
				if (saved[j]) {
					isl_schedule_node_free(nest[j].band);
					nest[j].band = saved[j];
				}
			if (t)
				return t;
		}
	}
	return NULL;
}

/* part_set's other: 1 for an update of partial sums, 2 for a statement
 * that is no partial sum. */
static isl_stat part_init_cb(isl_set *set, void *user)
{
	part_set *ps = user;
	const tc_poly_stmt *st = tc_poly_find_stmt(ps->p, isl_set_get_tuple_name(set));
	if (st && st->ir->part_rows && st->kind == TC_POLY_INIT)
		ps->part = isl_union_set_add_set(ps->part, set);
	else {
		ps->other |= st && st->ir->part_rows ? 1 : 2;
		isl_set_free(set);
	}
	return isl_stat_ok;
}

/* Sequence node (taken) with the inits of partial sums that share a band
 * with their updates only (the isl scheduler's tree of a column sum
 * alone; a band that fusion shared with the rows' statements stays as it
 * is) ordered before them, in nests of their own spliced into node: an init
 * inside the rows' loop, at each chunk's first row, stayed a test in the
 * loop over the columns (2301 x 300, two threads: 0.030-0.050 ms against
 * 0.013 for 2304 x 300, whose inits the scheduler put apart). */
static isl_schedule_node *inits_apart(const tc_poly *p, isl_schedule_node *node)
{
	return parts_first(p, node, part_init_cb);
}

/* Schedule s with each top-level nest of partial sums that no fusion
 * gave a member over the rows first (a column sum alone: ir/partial.c,
 * short_rows) given one (partial_band), its inits apart (inits_apart), so
 * that the parallel pass hands out its chunks of rows rather than its
 * columns; s when there is none. */
static isl_schedule *lone_partials(const tc_poly *p, isl_schedule *s)
{
	isl_schedule_node *top = isl_schedule_node_child(isl_schedule_get_root(s), 0);
	isl_size n;
	isl_size i;
	enum isl_schedule_node_type type = top ? isl_schedule_node_get_type(top)
					       : isl_schedule_node_error;
	if (type != isl_schedule_node_sequence) {
		isl_schedule_node_free(top);
		return s;
	}
	top = inits_apart(p, top);
	n = top ? isl_schedule_node_n_children(top) : 0;
	if (top) {
		isl_schedule_free(s);
		s = isl_schedule_node_get_schedule(top);
	}
	isl_schedule_node_free(top);
	for (i = 0; s && i < n; i++) {
		isl_schedule_node *f = isl_schedule_node_child(
			isl_schedule_node_child(isl_schedule_get_root(s), 0), (int)i);
		reuse_nest a = {NULL, NULL, 0, 0, 0};
		isl_schedule_node *b = NULL;
		isl_multi_union_pw_aff *chunks = NULL;
		const tc_poly_stmt *st = NULL;
		int64_t lo = 0, rows = 0;
		a.dom = f ? isl_schedule_node_filter_get_filter(f) : NULL;
		a.band = f ? isl_schedule_node_get_child(f, 0) : NULL;
		isl_schedule_node_free(f);
		if (a.dom && a.band && isl_schedule_node_get_type(a.band) == isl_schedule_node_band) {
			a.members = isl_schedule_node_band_n_member(a.band);
			rows = partial_nest(p, &a, &lo, &st);
			chunks = rows ? tc_poly_partial_chunks(p, a.band) : NULL;
			if (rows && !chunks)
				b = partial_band(&a, st, rows, lo);
		}
		isl_multi_union_pw_aff_free(chunks);
		isl_union_set_free(a.dom);
		isl_schedule_node_free(a.band);
		if (b) {
			isl_schedule_free(s);
			s = isl_schedule_node_get_schedule(b);
			isl_schedule_node_free(b);
		}
	}
	return s;
}

__tc_give isl_schedule *tc_poly_fuse_reuse(__tc_keep const tc_poly *p, __tc_take isl_schedule *s,
	__tc_keep isl_union_map *deps)
{
	int round;
	if (s && p->target->threads != 1 && has_partials(p))
		s = flat_sequence(p, s);
	for (round = 0; s && round < 8; round++) {
		isl_schedule_node *top = isl_schedule_node_child(isl_schedule_get_root(s), 0);
		reuse_nest nest[64];
		isl_schedule *t = NULL;
		isl_size n = top ? isl_schedule_node_n_children(top) : 0, i;
		enum isl_schedule_node_type type = top ? isl_schedule_node_get_type(top)
						       : isl_schedule_node_error;
		if ((type != isl_schedule_node_sequence && type != isl_schedule_node_set) || n < 2 ||
			n > 64) {
			isl_schedule_node_free(top);
			break;
		}
		for (i = 0; i < n; i++) {
			isl_schedule_node *f = isl_schedule_node_get_child(top, (int)i);
			reuse_ctx rc = {p, &nest[i]};
			nest[i].dom = isl_schedule_node_filter_get_filter(f);
			nest[i].band = isl_schedule_node_get_child(f, 0);
			nest[i].reads = 0;
			nest[i].ok = nest[i].band &&
				isl_schedule_node_get_type(nest[i].band) == isl_schedule_node_band;
			nest[i].members = nest[i].ok ? isl_schedule_node_band_n_member(nest[i].band) : 0;
			nest[i].ok &= nest[i].members > 0;
			isl_schedule_node_free(f);
			if (nest[i].ok)
				isl_union_set_foreach_set(nest[i].dom, reuse_stmt_cb, &rc);
		}
		t = fuse_reuse_once(p, s, top, nest, (int)n, deps);
		for (i = 0; i < n; i++) {
			isl_union_set_free(nest[i].dom);
			isl_schedule_node_free(nest[i].band);
		}
		isl_schedule_node_free(top);
		if (!t)
			break;
		isl_schedule_free(s);
		s = t;
	}
	if (s && p->target->threads != 1 && has_partials(p))
		s = lone_partials(p, s);
	return s;
}
