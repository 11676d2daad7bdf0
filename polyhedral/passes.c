/* Schedule passes (tc_poly_pass): transformations of the schedule tree
 * after the isl scheduler.
 *
 * tc_poly_pass_order: in every permutable band, move to the innermost
 * position the member that indexes the last (stride-1) dimension of the
 * most accesses, preferring a coincident (parallel) member, so that the
 * innermost loop walks memory contiguously and can be vectorised.  Any order
 * of the members of a permutable band is legal.  Members keep their
 * relative order otherwise, so the reduction indices of a statement keep
 * theirs and every element accumulates in the same order as before. */
#include "poly.h"

#include <isl/aff.h>
#include <isl/id.h>
#include <isl/schedule_node.h>
#include <isl/space.h>
#include <isl/val.h>

#include <string.h>

/* The domain variable that piece aff of a statement's schedule is (a single
 * variable with coefficient 1 plus a constant), or -1. */
static int single_var(isl_aff *aff)
{
	isl_size n = isl_aff_dim(aff, isl_dim_in);
	int i, var = -1;
	for (i = 0; i < n; i++) {
		isl_val *v = isl_aff_get_coefficient_val(aff, isl_dim_in, i);
		int zero = isl_val_is_zero(v), one = isl_val_is_one(v);
		isl_val_free(v);
		if (zero)
			continue;
		if (!one || var >= 0)
			return -1;
		var = i;
	}
	for (i = 0; i < isl_aff_dim(aff, isl_dim_div); i++) {
		isl_val *v = isl_aff_get_coefficient_val(aff, isl_dim_div, i);
		int zero = isl_val_is_zero(v);
		isl_val_free(v);
		if (!zero)
			return -1;
	}
	return var;
}

typedef struct piece_var {
	int var;
	int n;
} piece_var;

static isl_stat piece_cb(isl_set *set, isl_aff *aff, void *user)
{
	piece_var *pv = user;
	int v = single_var(aff);
	pv->var = pv->n++ ? (pv->var == v ? v : -1) : v;
	isl_set_free(set);
	isl_aff_free(aff);
	return isl_stat_ok;
}

/* Whether e mentions index variable var. */
static int uses(const tc_ir_expr *e, int var)
{
	int i;
	if (e->op == TC_OP_INDEX)
		return e->id == var;
	for (i = 0; i < e->nargs; i++)
		if (uses(e->args[i], var))
			return 1;
	return 0;
}

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
			if (uses(e->args[i], var))
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
	const char *name = isl_set_get_tuple_name(set);
	isl_space *space = isl_set_get_space(set);
	isl_pw_aff *pa;
	piece_var pv = {-1, 0};
	int i;
	isl_set_free(set);
	space = isl_space_add_dims(isl_space_from_domain(space), isl_dim_out, 1);
	pa = isl_union_pw_aff_extract_pw_aff(s->member, space);
	if (!pa)
		return isl_stat_error;
	isl_pw_aff_foreach_piece(pa, piece_cb, &pv);
	isl_pw_aff_free(pa);
	for (i = 0; pv.var >= 0 && name && i < s->p->nstmts; i++)
		if (!strcmp(s->p->stmts[i].name, name))
			s->score += stmt_score(&s->p->stmts[i], pv.var);
	return isl_stat_ok;
}

static isl_schedule_node *order_band(isl_schedule_node *node, void *user)
{
	const tc_poly *p = user;
	isl_multi_union_pw_aff *mupa, *perm;
	isl_union_set *dom;
	isl_size n;
	int j, best = -1, best_score = 0, *coinc;

	if (isl_schedule_node_get_type(node) != isl_schedule_node_band ||
		isl_schedule_node_band_get_permutable(node) != isl_bool_true)
		return node;
	n = isl_schedule_node_band_n_member(node);
	if (n < 2)
		return node;
	mupa = isl_schedule_node_band_get_partial_schedule(node);
	dom = isl_schedule_node_get_domain(node);
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
	isl_union_set_free(dom);
	if (best < 0 || best == n - 1) {
		isl_multi_union_pw_aff_free(mupa);
		return node;
	}
	/* the new order: every member but best in order, then best */
	coinc = tc_malloc((size_t)n * sizeof(int));
	perm = isl_multi_union_pw_aff_copy(mupa);
	for (j = 0; j < n && coinc; j++) {
		int from = j < best ? j : j < n - 1 ? j + 1 : best;
		perm = isl_multi_union_pw_aff_set_union_pw_aff(perm, j,
			isl_multi_union_pw_aff_get_union_pw_aff(mupa, from));
		coinc[j] = isl_schedule_node_band_member_get_coincident(node, from) == isl_bool_true;
	}
	isl_multi_union_pw_aff_free(mupa);
	if (!coinc) {
		isl_multi_union_pw_aff_free(perm);
		return isl_schedule_node_free(node);
	}
	node = isl_schedule_node_delete(node);
	node = isl_schedule_node_insert_partial_schedule(node, perm);
	node = isl_schedule_node_band_set_permutable(node, 1);
	for (j = 0; j < n; j++)
		node = isl_schedule_node_band_member_set_coincident(node, j, coinc[j]);
	tc_free(coinc);
	return node;
}

tc_stat tc_poly_pass_order(tc_poly *p, tc_diags *d)
{
	if (!p->opts.order)
		return TC_OK;
	p->schedule = isl_schedule_map_schedule_node_bottom_up(p->schedule, order_band, p);
	if (!p->schedule) {
		tc_loc none;
		memset(&none, 0, sizeof(none));
		tc_error(d, none, "internal error: isl could not reorder a band: %s",
			isl_ctx_last_error_msg(p->ctx) ? isl_ctx_last_error_msg(p->ctx) : "?");
		return TC_ERR;
	}
	return TC_OK;
}

/* Find the outermost permutable band with at least one member (in tree
 * order) and tile it. */
static isl_schedule_node *tile_first_band(isl_schedule_node *node, const tc_poly *p, int *done)
{
	isl_size n, i;
	if (*done || !node)
		return node;
	if (isl_schedule_node_get_type(node) == isl_schedule_node_band &&
		isl_schedule_node_band_get_permutable(node) == isl_bool_true &&
		(n = isl_schedule_node_band_n_member(node)) > 0) {
		isl_multi_val *sizes = isl_multi_val_zero(isl_schedule_node_band_get_space(node));
		for (i = 0; i < n; i++) /* untiled members: one tile covers them */
			sizes = isl_multi_val_set_val(sizes, i, isl_val_int_from_si(p->ctx,
				i < p->opts.ntile ? p->opts.tile[i] : INT64_C(1) << 40));
		*done = 1;
		return isl_schedule_node_band_tile(node, sizes);
	}
	n = isl_schedule_node_n_children(node);
	for (i = 0; i < n && !*done; i++) {
		node = isl_schedule_node_child(node, i);
		node = tile_first_band(node, p, done);
		node = isl_schedule_node_parent(node);
	}
	return node;
}

/* Apply walk to the schedule tree from its root; what names the work in
 * the error message. */
static tc_stat walk_schedule(tc_poly *p, tc_diags *d,
	isl_schedule_node *(*walk)(isl_schedule_node *node, const tc_poly *p, int *done),
	const char *what)
{
	isl_schedule_node *node;
	int done = 0;
	node = walk(isl_schedule_get_root(p->schedule), p, &done);
	isl_schedule_free(p->schedule);
	p->schedule = node ? isl_schedule_node_get_schedule(node) : NULL;
	isl_schedule_node_free(node);
	if (!p->schedule) {
		tc_loc none;
		memset(&none, 0, sizeof(none));
		tc_error(d, none, "internal error: isl could not %s: %s", what,
			isl_ctx_last_error_msg(p->ctx) ? isl_ctx_last_error_msg(p->ctx) : "?");
		return TC_ERR;
	}
	return TC_OK;
}

tc_stat tc_poly_pass_tile(tc_poly *p, tc_diags *d)
{
	if (!p->opts.ntile)
		return TC_OK;
	return walk_schedule(p, d, tile_first_band, "tile a band");
}

/* Mark the outermost band of every top-level loop nest whose first member
 * is coincident (carries no dependence): split it after that member and put
 * a TC_POLY_MARK_PARALLEL mark above.  Bands below a band are left alone, so
 * parallel loops never nest. */
static isl_schedule_node *mark_parallel(isl_schedule_node *node, const tc_poly *p, int *done)
{
	isl_size n, i;
	(void)done; /* every top-level nest is visited */
	if (!node)
		return NULL;
	if (isl_schedule_node_get_type(node) == isl_schedule_node_band) {
		if (isl_schedule_node_band_n_member(node) < 1 ||
			isl_schedule_node_band_member_get_coincident(node, 0) != isl_bool_true)
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
	if (!p->opts.parallel)
		return TC_OK;
	return walk_schedule(p, d, mark_parallel, "mark parallel loops");
}

const tc_poly_pass tc_poly_default_passes[] = {tc_poly_pass_order, tc_poly_pass_tile,
	tc_poly_pass_parallel};
const int tc_poly_ndefault_passes = 3;
