/* Loop order within bands: the order pass, dot products and the
 * interchange pass.
 *
 * tc_poly_pass_order: in every permutable band, move to the innermost
 * position the member that indexes the last (stride-1) dimension of the
 * most accesses, preferring a coincident (parallel) member, so that the
 * innermost loop walks memory contiguously and can be vectorised.  Any order
 * of the members of a permutable band is legal.  Members keep their
 * relative order otherwise, so the reduction indices of a statement keep
 * theirs and every element accumulates in the same order as before.  A dot
 * product's reduction goes innermost, alone in its band (below), and so
 * does a short reduction whose operand panel fits in registers (below); a
 * band with a short sum over a window alone is left as it is (below).
 * Then an innermost loop that a read divides by a constant is split into
 * the quotient and an unrolled remainder (split_rate, below).
 *
 * tc_poly_pass_interchange: the interchange option's explicit order of the
 * members of the band the tile pass tiles, after the order pass, so that it
 * sets the order of the cache-tile loops and of the loops within tiles.
 *
 * Uses the model's queries (poly.h) and the band helpers (band.h); must not
 * know the other passes or the order they run in (schedule.c). */
#include "band.h"
#include "passes.h"

#include "../lang/sexpr.h"

#include <isl/aff.h>
#include <isl/id.h>
#include <isl/schedule_node.h>
#include <isl/set.h>
#include <isl/union_set.h>
#include <isl/val.h>

/* What making var the innermost loop does to the accesses of e: +1 for
 * each access whose last (stride-1) subscript uses var, -STRIDED for each
 * whose other subscripts use it (a strided walk, which costs far more than
 * a contiguous one gains). */
#define STRIDED 4
static int access_score(const tc_ir_expr *e, int var)
{
	int i, n = 0;
	for (i = 0; i < e->nargs; i++)
		n += access_score(e->args[i], var);
	if (e->op == TC_OP_READ)
		for (i = 0; i < e->nargs; i++)
			if (tc_ir_uses_var(e->args[i], var))
				n += i == e->nargs - 1 ? 1 : -STRIDED;
	return n;
}

/* The score of var for statement st: its right-hand side's reads and its
 * left-hand access (written, and read back by an update). */
static int stmt_score(const tc_poly_stmt *st, int var)
{
	int w = st->kind == TC_POLY_UPDATE ? 2 : 1, n = 0;
	if (var < st->ir->nlhs)
		n += w * (var == st->ir->nlhs - 1 ? 1 : -STRIDED);
	if (st->kind != TC_POLY_INIT)
		n += access_score(st->ir->rhs, var);
	return n;
}

typedef struct score_ctx {
	const tc_poly *p;
	isl_union_pw_aff *member;
	int score;
} score_ctx;

/* Add the score of one statement's schedule for one band member (a member
 * that is not a single domain variable for that statement scores 0). */
static isl_stat score_set(isl_set *set, void *user)
{
	score_ctx *s = user;
	const tc_poly_stmt *st = tc_poly_find_stmt(s->p, isl_set_get_tuple_name(set));
	int var = tc_poly_set_member_var(set, s->member);
	if (st && var >= 0)
		s->score += stmt_score(st, var);
	isl_set_free(set);
	return isl_stat_ok;
}

/* Move member j of permutable band node (n members) innermost; the others
 * keep their order. */
static isl_schedule_node *move_innermost(isl_schedule_node *node, isl_size n, int j)
{
	int *perm = tc_malloc((size_t)(n > 0 ? n : 1) * sizeof(int)), k;
	if (!perm)
		return isl_schedule_node_free(node);
	for (k = 0; k < n; k++)
		perm[k] = k < j ? k : k < n - 1 ? k + 1 : j;
	node = tc_poly_band_permute(node, perm);
	tc_free(perm);
	return node;
}

/* ---- dot products ----
 *
 * A contraction whose output rows are shorter than a vector register and
 * whose every operand is read along the reduction (fully connected 128 ->
 * 10: T(b,o) +=! In(b,r_i) * W(o,r_i), 10 outputs per row) is a set of
 * dot products: the register tile would vectorise 10 of 16 lanes and read
 * W with a stride (its rows are too short to pack), where a loop over the
 * reduction reads both operands contiguously and, with vecreduce, sums in
 * vector partial sums (0.0039 ms against 0.021 with the register tile).
 * The order pass puts the reduction innermost, alone in its band (so the
 * init and the epilogue, constant along it, move out of its loop), and the
 * tiling passes leave the band alone (its innermost member is no longer
 * parallel). */

/* Whether every tensor read in e reads along reduction index of s (its
 * last subscript a plain reduction index), counting the reads in *n. */
static int reads_along_reduction(const tc_ir_stmt *s, const tc_ir_expr *e, int *n)
{
	int i;
	if (e->op == TC_OP_READ) {
		int v = e->nargs ? tc_ir_plain_var(e->args[e->nargs - 1]) : -1;
		++*n;
		return v >= 0 && v < s->nvars && s->vars[v].is_reduction;
	}
	for (i = 0; i < e->nargs; i++)
		if (!reads_along_reduction(s, e->args[i], n))
			return 0;
	return 1;
}

/* The reduction index statement st sums along as a dot product (see
 * above), or -1. */
static int dot_var(const tc_poly *p, const tc_poly_stmt *st)
{
	const tc_ir_stmt *ir = st->ir;
	const tc_ir_tensor *t = &p->f->tensors[ir->tensor];
	const tc_ir_expr *first = ir->rhs;
	int64_t ext, lanes_;
	int n = 0, size = tc_dtype_size(t->dtype);
	if (!p->opts.vecreduce || !p->params || st->kind != TC_POLY_UPDATE || ir->red != TC_RED_ADD ||
		(t->dtype != TC_T_F32 && t->dtype != TC_T_F64) || ir->nlhs < 1 || ir->nvars <= ir->nlhs)
		return -1;
	lanes_ = p->target->vector_bytes / size;
	if (tc_sx_eval(t->ext[ir->nlhs - 1], p->params, NULL, &ext) < 0 || ext >= lanes_ ||
		!reads_along_reduction(ir, ir->rhs, &n) || n < 2)
		return -1;
	while (first->op != TC_OP_READ && first->nargs) /* the first read's reduction index */
		first = first->args[0];
	return first->op == TC_OP_READ ? tc_ir_plain_var(first->args[first->nargs - 1]) : -1;
}

/* ---- operand panels held in registers ----
 *
 * A contraction over a short reduction whose output rows are whole vectors
 * (each factor of the Kronecker product 256 x 16^3: XW0(m,n1,n2,d0) +=!
 * X(m,r_n0,n1,n2) * W0(d0,r_n0), 16 terms into rows of 16) needs the
 * operand walked along the rows (W0's packed copy: 16 vectors) at every
 * step of every register tile, and each tile runs only 16 steps between
 * its init and its stores.  With the reduction innermost, alone in its
 * band, below the rows' member, LLVM unrolls the 16 terms and vectorises
 * the row: the whole panel stays in 16 registers for the nest and each
 * output vector is 16 broadcast multiplies and adds, in the terms' order.
 * Kronecker 256 x 16^3 on a Zen 4: 0.90x the time by minima, 0.5x by
 * medians (one and two threads; docs/performance.md, "Training
 * contractions").  Only where it was measured to gain: the reduction at
 * most a vector's lanes, the rows whole vectors, the panel at most the
 * target's accumulators (8 x 8 factors, half a vector, took 1.10x; 16 x 32,
 * 32 terms, 3.7x; 12 x 12 1.06x; 32 x 16, a panel of 32 vectors, 0.94x,
 * left out). */

/* ---- short window sums ----
 *
 * A sum over a kernel window alone (a depthwise convolution:
 * O(n,c,h,w) +=! I(n,c,h+r_kh,w+r_kw) * W1(c,r_kh,r_kw), no reduction over
 * channels) runs best with its few taps innermost, as the scheduler
 * leaves them: LLVM unrolls the taps and vectorises the output row above
 * them, each output vector one load and one multiply-add per tap, its
 * weights broadcast once per row.  The order pass would move the row
 * innermost and make it a register tile of 6 rows, which over 9 taps took
 * 1.35x to 5x the time (one thread, Zen 4: 8x256x56x56 3.09 against 2.28
 * ms, 8x64x112x112 10.8 against 2.19, 32x128x28x28 3.38 against 0.93,
 * 8x512x14x14 0.29 against 0.19; 5 x 5 taps, 8x128x56x56, 2.63 against
 * 2.09), but less time from 7 x 7 taps (4.57 against 6.02): so up to
 * MAX_TAPS taps.  docs/performance.md, Convolutions. */
#define MAX_TAPS 25

/* The reduction indices of ir that a subscript of a read in e uses
 * together with a left-hand index in an affine subscript (h + r_kh: a
 * window's taps; not a gather's index, LUT(I(i,r_k),j)), a bit each, into
 * *taps. */
static void window_taps(const tc_ir_stmt *ir, const tc_ir_expr *e, unsigned *taps)
{
	int i, k;
	if (e->op != TC_OP_READ) {
		for (i = 0; i < e->nargs; i++)
			window_taps(ir, e->args[i], taps);
		return;
	}
	for (i = 0; i < e->nargs; i++) {
		unsigned red = 0;
		int lhs = 0;
		if (!tc_ir_affine(e->args[i])) { /* a gather's index: no window */
			window_taps(ir, e->args[i], taps);
			continue;
		}
		for (k = 0; k < ir->nvars && k < 32; k++)
			if (tc_ir_uses_var(e->args[i], k)) {
				if (k < ir->nlhs)
					lhs = 1;
				else
					red |= 1u << k;
			}
		if (lhs)
			*taps |= red;
	}
}

/* Whether statement st sums over window taps only (every reduction index
 * shifts a left-hand index in some read; a channel's r_c, which none
 * shifts, makes it no window sum), at most MAX_TAPS of them (see above),
 * at the bound sizes. */
static int window_sum(const tc_poly *p, const tc_poly_stmt *st)
{
	const tc_ir_stmt *ir = st->ir;
	unsigned used = 0;
	int64_t taps = 1, lo, hi;
	int k;
	if (!p->params || st->kind != TC_POLY_UPDATE ||
		(ir->red != TC_RED_ADD && ir->red != TC_RED_MAX && ir->red != TC_RED_MIN) ||
		ir->nvars <= ir->nlhs || ir->nvars > 32)
		return 0;
	window_taps(ir, ir->rhs, &used);
	for (k = ir->nlhs; k < ir->nvars; k++) {
		if (!(used & (1u << k)) || !tc_ir_var_range(&ir->vars[k], p->params, &lo, &hi) ||
			hi - lo < 1)
			return 0;
		taps *= hi - lo;
		if (taps > MAX_TAPS)
			return 0;
	}
	return 1;
}

typedef struct window_ctx {
	const tc_poly *p;
	int found;
} window_ctx;

static isl_stat window_cb(isl_set *set, void *user)
{
	window_ctx *wc = user;
	const tc_poly_stmt *st = tc_poly_find_stmt(wc->p, isl_set_get_tuple_name(set));
	wc->found |= st && window_sum(wc->p, st);
	isl_set_free(set);
	return isl_stat_ok;
}

/* The reduction index a band member should walk innermost, alone, for a
 * statement (dot_var or tc_poly_panel_var, band.c). */
typedef int (*inner_var_fn)(const tc_poly *p, const tc_poly_stmt *st);

typedef struct dot_ctx {
	const tc_poly *p;
	isl_union_pw_aff *member;
	inner_var_fn var;
	int found;
} dot_ctx;

static isl_stat dot_cb(isl_set *set, void *user)
{
	dot_ctx *dc = user;
	const tc_poly_stmt *st = tc_poly_find_stmt(dc->p, isl_set_get_tuple_name(set));
	int v = st ? dc->var(dc->p, st) : -1;
	if (v >= 0 && tc_poly_set_member_var(set, dc->member) == v)
		dc->found = 1;
	isl_set_free(set);
	return isl_stat_ok;
}

/* The member of band node that walks a reduction var says goes innermost
 * (a dot product's, an operand panel's), or -1. */
static int dot_member(const tc_poly *p, isl_schedule_node *node, isl_multi_union_pw_aff *mupa,
	isl_union_set *dom, isl_size n, inner_var_fn var)
{
	int j;
	for (j = 0; j < n; j++) {
		dot_ctx dc = {p, isl_multi_union_pw_aff_get_union_pw_aff(mupa, j), var, 0};
		if (isl_schedule_node_band_member_get_coincident(node, j) != isl_bool_true)
			isl_union_set_foreach_set(dom, dot_cb, &dc);
		isl_union_pw_aff_free(dc.member);
		if (dc.found)
			return j;
	}
	return -1;
}

static isl_schedule_node *order_band(isl_schedule_node *node, void *user)
{
	const tc_poly *p = user;
	isl_multi_union_pw_aff *mupa;
	isl_union_set *dom;
	isl_size n;
	int j, best = -1, best_score = 0, dot, panel;
	window_ctx wc = {p, 0};

	if (isl_schedule_node_get_type(node) != isl_schedule_node_band ||
		isl_schedule_node_band_get_permutable(node) != isl_bool_true)
		return node;
	n = isl_schedule_node_band_n_member(node);
	if (n < 2)
		return node;
	dom = isl_schedule_node_get_domain(node);
	isl_union_set_foreach_set(dom, window_cb, &wc);
	if (wc.found) { /* the taps stay innermost, as the scheduler put them */
		isl_union_set_free(dom);
		return node;
	}
	mupa = isl_schedule_node_band_get_partial_schedule(node);
	if ((dot = dot_member(p, node, mupa, dom, n, dot_var)) >= 0) {
		isl_union_set_free(dom);
		isl_multi_union_pw_aff_free(mupa);
		node = move_innermost(node, n, dot);
		return isl_schedule_node_band_split(node, (int)n - 1);
	}
	for (j = 0; j < n; j++) {
		score_ctx s = {p, isl_multi_union_pw_aff_get_union_pw_aff(mupa, j), 0};
		int coincident = isl_schedule_node_band_member_get_coincident(node, j) == isl_bool_true;
		int key;
		isl_union_set_foreach_set(dom, score_set, &s);
		isl_union_pw_aff_free(s.member);
		/* a coincident (parallel, vectorisable) member before any other,
		 * then the best score; a member without a positive score never
		 * moves */
		key = s.score > 0 ? (coincident ? 1 << 20 : 0) + s.score : 0;
		if (key > best_score) {
			best_score = key;
			best = j;
		}
	}
	panel = dot_member(p, node, mupa, dom, n, tc_poly_panel_var);
	isl_union_set_free(dom);
	isl_multi_union_pw_aff_free(mupa);
	if (best >= 0 && best != n - 1) {
		node = move_innermost(node, n, best);
		if (panel == best)
			panel = (int)n - 1;
		else if (panel > best) /* the members after best moved up by one */
			panel--;
	}
	if (panel < 0)
		return node;
	if (panel != n - 1)
		node = move_innermost(node, n, panel);
	return isl_schedule_node_band_split(node, (int)n - 1);
}

/* ---- loops at a fraction of a read's rate ----
 *
 * A statement that reads with the innermost loop's index divided by a
 * constant s (max-pooling's backward d_I(n,c,x,x1) = ... d_O(n,c,x/2,x1/2)
 * ..., an upsampling) reads one element per s iterations: vectorised along
 * x1, those reads become gathers (vgatherqps, and a byte at a time for an
 * int8 arg-max), 1.27 ms for the 16x64x56x56 max-pool backward.  Split
 * that loop into x1 / s and x1 % s, the second innermost and unrolled
 * (TC_POLY_MARK_UNROLL): the loop over x1 / s reads d_O contiguously, and
 * its s copies of the statement, x1 % s a constant in each, write the
 * output's elements s apart, which LLVM's vectoriser interleaves. */

#define MAX_RATE 8

/* The constant s when e (a subscript) is var / s; 0 otherwise. */
static int64_t div_of(const tc_ir_expr *e, int var)
{
	if (e->op != TC_OP_DIV || e->nargs != 2 || e->args[0]->op != TC_OP_INDEX ||
		e->args[0]->id != var || e->args[1]->op != TC_OP_CONST)
		return 0;
	return e->args[1]->c.i;
}

/* Over the reads of e: *s the divisor of var in their subscripts (-1 when
 * two differ or one is out of range); returns whether one divides var. */
static int divided_reads(const tc_ir_expr *e, int var, int64_t *s)
{
	int i, found = 0;
	if (e->op == TC_OP_READ)
		for (i = 0; i < e->nargs; i++) {
			int64_t d = div_of(e->args[i], var);
			if (!d)
				continue;
			if (d < 2 || d > MAX_RATE || (*s && *s != d))
				*s = -1;
			else
				*s = d;
			found = 1;
		}
	for (i = 0; i < e->nargs; i++)
		found |= divided_reads(e->args[i], var, s);
	return found;
}

/* Band node (one statement, a plain assignment, its last member walking
 * var) split as above when a read divides var by a constant; else node. */
static isl_schedule_node *split_rate(isl_schedule_node *node, const tc_poly *p)
{
	isl_union_set *dom = isl_schedule_node_get_domain(node);
	isl_size n = isl_schedule_node_band_n_member(node);
	const tc_poly_stmt *st = NULL;
	isl_multi_union_pw_aff *mupa;
	isl_union_pw_aff *upa, *q, *r;
	isl_val *sv;
	int64_t s = 0;
	int var, coinc;
	if (isl_union_set_n_set(dom) == 1) {
		isl_set *set = isl_set_from_union_set(isl_union_set_copy(dom));
		st = set ? tc_poly_find_stmt(p, isl_set_get_tuple_name(set)) : NULL;
		isl_set_free(set);
	}
	isl_union_set_free(dom);
	if (!st || st->kind != TC_POLY_ASSIGN || st->ir->sub || n < 1 ||
		(var = tc_poly_band_member_var(node, (int)n - 1, st)) < 0 ||
		!divided_reads(st->ir->rhs, var, &s) || s < 2)
		return node;
	coinc = isl_schedule_node_band_member_get_coincident(node, (int)n - 1) == isl_bool_true;
	if (n > 1)
		node = isl_schedule_node_child(isl_schedule_node_band_split(node, (int)n - 1), 0);
	mupa = isl_schedule_node_band_get_partial_schedule(node);
	upa = isl_multi_union_pw_aff_get_union_pw_aff(mupa, 0);
	isl_multi_union_pw_aff_free(mupa);
	sv = isl_val_int_from_si(p->ctx, s);
	q = isl_union_pw_aff_floor(isl_union_pw_aff_scale_down_val(isl_union_pw_aff_copy(upa),
		isl_val_copy(sv)));
	r = isl_union_pw_aff_mod_val(upa, sv);
	node = isl_schedule_node_delete(node);
	node = isl_schedule_node_insert_partial_schedule(node,
		isl_multi_union_pw_aff_from_union_pw_aff(r));
	node = isl_schedule_node_band_set_permutable(node, 1);
	node = isl_schedule_node_band_member_set_coincident(node, 0, coinc);
	node = isl_schedule_node_insert_mark(node, isl_id_alloc(p->ctx, TC_POLY_MARK_UNROLL, NULL));
	node = isl_schedule_node_insert_partial_schedule(node,
		isl_multi_union_pw_aff_from_union_pw_aff(q));
	node = isl_schedule_node_band_set_permutable(node, 1);
	node = isl_schedule_node_band_member_set_coincident(node, 0, coinc);
	return n > 1 ? isl_schedule_node_parent(node) : node;
}

/* A band with no band below it: split_rate. */
static isl_schedule_node *split_band(isl_schedule_node *node, void *user)
{
	isl_schedule_node *child;
	int leaf;
	if (isl_schedule_node_get_type(node) != isl_schedule_node_band)
		return node;
	child = isl_schedule_node_get_child(node, 0);
	leaf = child && isl_schedule_node_get_type(child) == isl_schedule_node_leaf;
	isl_schedule_node_free(child);
	return leaf ? split_rate(node, user) : node;
}

tc_stat tc_poly_pass_order(__tc_keep tc_poly *p, __tc_keep tc_diags *d)
{
	if (!p->opts.order)
		return TC_OK;
	p->schedule = isl_schedule_map_schedule_node_bottom_up(p->schedule, order_band, p);
	if (p->schedule && p->params && !p->target->warp_size)
		p->schedule = isl_schedule_map_schedule_node_bottom_up(p->schedule, split_band, p);
	return p->schedule ? TC_OK : tc_poly_walk_failed(p, d, "reorder a band");
}

/* ---- interchange ---- */

/* Reorder the members of band node as p->opts.interchange says (see
 * tc_poly_pass_interchange); a list longer than the band leaves it as is. */
static isl_schedule_node *interchange_band(isl_schedule_node *node, const tc_poly *p,
	int *changed)
{
	isl_size n = isl_schedule_node_band_n_member(node);
	int perm[TC_POLY_MAX_TILE], k, moved = 0;
	if (n < 0 || n > TC_POLY_MAX_TILE || p->opts.ninterchange > n)
		return node;
	for (k = 0; k < n; k++) {
		perm[k] = k < p->opts.ninterchange ? p->opts.interchange[k] : k;
		moved |= perm[k] != k;
	}
	if (!moved)
		return node;
	*changed = 1;
	return tc_poly_band_permute(node, perm);
}

static isl_schedule_node *interchange_first_band(isl_schedule_node *node, const tc_poly *p,
	int *changed)
{
	int found = 0;
	return tc_poly_first_band(node, p, interchange_band, &found, changed);
}

/* Any order of a permutable band's members is legal, but the merge pass
 * marks bands permutable that are not in isl's sense (a reduction over
 * several indices, whose members must keep their order), so the result is
 * checked against the dependences and dropped when it breaks one.  The
 * check costs compile time, so it runs only when a band changed. */
tc_stat tc_poly_pass_interchange(__tc_keep tc_poly *p, __tc_keep tc_diags *d)
{
	if (!p->opts.ninterchange)
		return TC_OK;
	return tc_poly_walk_schedule_legal(p, d, interchange_first_band, "interchange a band",
		"check an interchange");
}
