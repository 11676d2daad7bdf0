/* Band helpers of the schedule passes (see band.h).
 *
 * Owns: what a band member walks (tc_poly_set_member_var,
 * tc_poly_band_member_var, tc_poly_band_member_extent), permuting a band's
 * members (tc_poly_band_permute), recognising a contraction band
 * (tc_poly_contraction_band), finding the first permutable band
 * (tc_poly_first_band) and walking the tree with the passes' error message
 * (tc_poly_walk_schedule, tc_poly_walk_schedule_legal, tc_poly_walk_failed).
 *
 * Uses the model's queries (poly.h) only: it must not know any pass, their
 * order or the driver (schedule.c). */
#include "band.h"

#include "../lang/sexpr.h"

#include <isl/id.h>
#include <isl/ilp.h>
#include <isl/map.h>
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

const tc_ir_expr *tc_poly_window_read(__tc_keep const tc_ir_expr *e, int a, int b)
{
	const tc_ir_expr *r;
	int k;
	for (k = 0; k < e->nargs; k++)
		if (e->op == TC_OP_READ && tc_ir_uses_var(e->args[k], a) &&
			tc_ir_uses_var(e->args[k], b))
			return e;
	for (k = 0; k < e->nargs; k++)
		if ((r = tc_poly_window_read(e->args[k], a, b)))
			return r;
	return NULL;
}

int tc_poly_set_member_var(__tc_keep isl_set *set, __tc_keep isl_union_pw_aff *member)
{
	isl_space *space = isl_space_from_domain(isl_set_get_space(set));
	isl_pw_aff *pa = isl_union_pw_aff_extract_pw_aff(member,
		isl_space_add_dims(space, isl_dim_out, 1));
	piece_var pv = {-1, 0};
	if (pa)
		isl_pw_aff_foreach_piece(pa, piece_cb, &pv);
	isl_pw_aff_free(pa);
	return pv.var;
}

typedef struct member_var_ctx {
	const tc_poly_stmt *st;
	isl_union_pw_aff *member;
	int var;
} member_var_ctx;

static isl_stat member_var_cb(isl_set *set, void *user)
{
	member_var_ctx *mc = user;
	const char *name = isl_set_get_tuple_name(set);
	if (name && !strcmp(name, mc->st->name))
		mc->var = tc_poly_set_member_var(set, mc->member);
	isl_set_free(set);
	return isl_stat_ok;
}

int tc_poly_band_member_var(__tc_keep isl_schedule_node *node, int j,
	__tc_keep const tc_poly_stmt *st)
{
	isl_multi_union_pw_aff *mupa = isl_schedule_node_band_get_partial_schedule(node);
	isl_union_set *dom = isl_schedule_node_get_domain(node);
	member_var_ctx mc = {st, isl_multi_union_pw_aff_get_union_pw_aff(mupa, j), -1};
	isl_union_set_foreach_set(dom, member_var_cb, &mc);
	isl_union_set_free(dom);
	isl_union_pw_aff_free(mc.member);
	isl_multi_union_pw_aff_free(mupa);
	return mc.var;
}

/* The values member j of band node takes over its instances dom (taken;
 * NULL: the band's domain), at p's sizes when p is not NULL; NULL on an
 * isl error or when there are none. */
static isl_set *member_values_on(const tc_poly *p, isl_schedule_node *node, int j,
	isl_union_set *dom)
{
	isl_multi_union_pw_aff *mupa = isl_schedule_node_band_get_partial_schedule(node);
	isl_union_pw_aff *upa = isl_multi_union_pw_aff_get_union_pw_aff(mupa, j);
	isl_union_set *img;
	if (!dom)
		dom = isl_schedule_node_get_domain(node);
	img = isl_union_set_apply(p ? tc_poly_at(p, dom) : dom,
		isl_union_map_from_union_pw_aff(upa));
	isl_multi_union_pw_aff_free(mupa);
	if (isl_union_set_n_set(img) != 1) /* none (or an error) */
		return isl_union_set_free(img), NULL;
	return isl_set_from_union_set(img);
}

__tc_give isl_set *tc_poly_band_member_values(__tc_keep const tc_poly *p,
	__tc_keep isl_schedule_node *node, int j)
{
	return member_values_on(p, node, j, NULL);
}

/* The least and greatest value member j of band node takes over its
 * instances dom (taken; NULL: the band's domain) in *lo and *hi: 0, or -1
 * when they are no known constants (a parametric model). */
static int member_bounds(const tc_poly *p, isl_schedule_node *node, int j, isl_union_set *dom,
	int64_t *lo, int64_t *hi)
{
	isl_set *set = member_values_on(p, node, j, dom);
	isl_val *vlo = isl_set_dim_min_val(isl_set_copy(set), 0);
	isl_val *vhi = isl_set_dim_max_val(set, 0);
	int r = -1;
	if (vlo && vhi && isl_val_is_int(vlo) && isl_val_is_int(vhi)) {
		*lo = isl_val_get_num_si(vlo);
		*hi = isl_val_get_num_si(vhi);
		r = 0;
	}
	isl_val_free(vlo);
	isl_val_free(vhi);
	return r;
}

int64_t tc_poly_band_member_extent(__tc_keep const tc_poly *p, __tc_keep isl_schedule_node *node,
	int j)
{
	return tc_poly_band_member_extent_on(p, node, j, NULL);
}

int64_t tc_poly_band_member_extent_on(__tc_keep const tc_poly *p,
	__tc_keep isl_schedule_node *node, int j, __tc_take isl_union_set *dom)
{
	int64_t lo, hi;
	return member_bounds(p, node, j, dom, &lo, &hi) < 0 ? 0 : hi - lo + 1;
}

int tc_poly_band_has_options(__tc_keep isl_schedule_node *node)
{
	isl_union_set *opts = isl_schedule_node_band_get_ast_build_options(node);
	int empty = opts && isl_union_set_is_empty(opts) == isl_bool_true;
	isl_union_set_free(opts);
	return !empty;
}

__tc_give isl_union_pw_aff *tc_poly_band_linearize(__tc_keep isl_schedule_node *node, int from,
	int k, const int64_t *lo, const int64_t *step, const int64_t *count)
{
	isl_multi_union_pw_aff *mupa = isl_schedule_node_band_get_partial_schedule(node);
	isl_ctx *ctx = isl_schedule_node_get_ctx(node);
	isl_union_pw_aff *sum = NULL;
	int j, i;
	for (j = 0; j < k; j++) {
		isl_union_pw_aff *m = isl_multi_union_pw_aff_get_union_pw_aff(mupa, from + j);
		int64_t below = 1;
		for (i = j + 1; i < k; i++)
			below *= count[i];
		/* (m - lo) / step, in 0 .. count - 1 */
		m = isl_union_pw_aff_add(m, isl_union_pw_aff_val_on_domain(
			isl_union_pw_aff_domain(isl_union_pw_aff_copy(m)),
			isl_val_int_from_si(ctx, -lo[j])));
		m = isl_union_pw_aff_floor(isl_union_pw_aff_scale_down_val(m,
			isl_val_int_from_si(ctx, step[j])));
		m = isl_union_pw_aff_scale_val(m, isl_val_int_from_si(ctx, below));
		sum = sum ? isl_union_pw_aff_add(sum, m) : m;
	}
	isl_multi_union_pw_aff_free(mupa);
	return sum;
}

__tc_give isl_schedule_node *tc_poly_bands_bottom_up(__tc_take isl_schedule_node *node,
	__tc_keep const tc_poly *p, tc_poly_band_fn fn, int *changed)
{
	isl_size n, i;
	if (!node)
		return NULL;
	n = isl_schedule_node_n_children(node);
	for (i = 0; node && i < n; i++) {
		node = isl_schedule_node_child(node, i);
		node = tc_poly_bands_bottom_up(node, p, fn, changed);
		node = isl_schedule_node_parent(node);
	}
	if (node && isl_schedule_node_get_type(node) == isl_schedule_node_band)
		node = fn(node, p, changed);
	return node;
}

int64_t tc_poly_band_member_steps(__tc_keep const tc_poly *p, __tc_keep isl_schedule_node *node,
	int j, int64_t *lo, int64_t *step)
{
	isl_set *v = tc_poly_band_member_values(p, node, j);
	isl_val *vlo = v ? isl_set_dim_min_val(isl_set_copy(v), 0) : NULL;
	isl_val *vhi = v ? isl_set_dim_max_val(isl_set_copy(v), 0) : NULL;
	isl_val *vs = v ? isl_set_get_stride(v, 0) : NULL;
	int64_t e = 0;
	if (vlo && vhi && vs && isl_val_is_int(vlo) && isl_val_is_int(vhi) &&
		isl_val_is_int(vs) && isl_val_is_pos(vs) == isl_bool_true) {
		*lo = isl_val_get_num_si(vlo);
		*step = isl_val_get_num_si(vs);
		e = (isl_val_get_num_si(vhi) - *lo) / *step + 1;
	}
	isl_val_free(vlo);
	isl_val_free(vhi);
	isl_val_free(vs);
	isl_set_free(v);
	return e;
}

int64_t tc_poly_band_member_one_tile(__tc_keep isl_schedule_node *node, int j)
{
	int64_t lo, hi;
	if (member_bounds(NULL, node, j, NULL, &lo, &hi) < 0 || lo < 0 || hi >= HUGE_TILE - 1)
		return HUGE_TILE;
	return hi + 1;
}

int tc_poly_band_n_coincident(__tc_keep isl_schedule_node *node)
{
	isl_size n = isl_schedule_node_band_n_member(node), j;
	int c = 0;
	for (j = 0; j < n; j++)
		c += isl_schedule_node_band_member_get_coincident(node, j) == isl_bool_true;
	return c;
}

__tc_give isl_schedule_node *tc_poly_band_permute(__tc_take isl_schedule_node *node,
	__tc_keep const int *perm)
{
	isl_multi_union_pw_aff *mupa = isl_schedule_node_band_get_partial_schedule(node), *out;
	isl_size n = isl_schedule_node_band_n_member(node);
	int j, *coinc = tc_malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
	if (!coinc || n < 0) {
		tc_free(coinc);
		isl_multi_union_pw_aff_free(mupa);
		return isl_schedule_node_free(node);
	}
	out = isl_multi_union_pw_aff_copy(mupa);
	for (j = 0; j < n; j++) {
		out = isl_multi_union_pw_aff_set_union_pw_aff(out, j,
			isl_multi_union_pw_aff_get_union_pw_aff(mupa, perm[j]));
		coinc[j] = isl_schedule_node_band_member_get_coincident(node, perm[j]) == isl_bool_true;
	}
	isl_multi_union_pw_aff_free(mupa);
	node = isl_schedule_node_delete(node);
	node = isl_schedule_node_insert_partial_schedule(node, out);
	node = isl_schedule_node_band_set_permutable(node, 1);
	for (j = 0; j < n; j++)
		node = isl_schedule_node_band_member_set_coincident(node, j, coinc[j]);
	tc_free(coinc);
	return node;
}

/* What a band schedules: the one reduction all its instances belong to
 * (its update, possibly its init), with possibly plain statements (an
 * epilogue such as a bias and an activation), or NULL when it schedules
 * parts of several reductions or none. */
typedef struct band_stmts {
	const tc_poly *p;
	const tc_poly_stmt *update;
	int ir_index, mixed, has_init;
} band_stmts;

static isl_stat band_stmt_cb(isl_set *set, void *user)
{
	band_stmts *b = user;
	const tc_poly_stmt *st = tc_poly_find_stmt(b->p, isl_set_get_tuple_name(set));
	isl_set_free(set);
	if (st && st->kind == TC_POLY_ASSIGN)
		; /* an epilogue: the register tiling moves it after the reduction */
	else if (!st || st->ir->sub || st->ir->part_rows ||
		(b->ir_index >= 0 && b->ir_index != st->ir_index))
		/* a scatter is no reduction into one element per row: its
		 * element changes along the reduced loop; a partial sum
		 * (ir/partial.c) keeps its loop over chunks outermost, for
		 * the threads (polyhedral/parallel.c) */
		b->mixed = 1;
	else {
		b->ir_index = st->ir_index;
		if (st->kind == TC_POLY_UPDATE)
			b->update = st;
		else if (st->kind == TC_POLY_INIT)
			b->has_init = 1;
		else
			b->mixed = 1;
	}
	return isl_stat_ok;
}

static const tc_poly_stmt *band_reduction(const tc_poly *p, isl_schedule_node *node, int *has_init)
{
	band_stmts b = {p, NULL, -1, 0, 0};
	isl_union_set *dom = isl_schedule_node_get_domain(node);
	isl_union_set_foreach_set(dom, band_stmt_cb, &b);
	isl_union_set_free(dom);
	*has_init = b.has_init;
	return b.mixed ? NULL : b.update;
}

const tc_poly_stmt *tc_poly_contraction_band(__tc_keep const tc_poly *p,
	__tc_keep isl_schedule_node *node, int *has_init)
{
	isl_size n;
	int ncoinc;
	if (isl_schedule_node_get_type(node) != isl_schedule_node_band ||
		isl_schedule_node_band_get_permutable(node) != isl_bool_true)
		return NULL;
	n = isl_schedule_node_band_n_member(node);
	if (n < 3 || isl_schedule_node_band_member_get_coincident(node, n - 1) != isl_bool_true)
		return NULL;
	ncoinc = tc_poly_band_n_coincident(node);
	if (ncoinc < 2 || ncoinc == n)
		return NULL;
	return band_reduction(p, node, has_init);
}

const tc_poly_stmt *tc_poly_column_band(__tc_keep const tc_poly *p,
	__tc_keep isl_schedule_node *node, int *has_init)
{
	isl_size n;
	if (isl_schedule_node_get_type(node) != isl_schedule_node_band ||
		isl_schedule_node_band_get_permutable(node) != isl_bool_true)
		return NULL;
	n = isl_schedule_node_band_n_member(node);
	if (n < 2 || isl_schedule_node_band_member_get_coincident(node, n - 1) != isl_bool_true ||
		tc_poly_band_n_coincident(node) != 1)
		return NULL;
	return band_reduction(p, node, has_init);
}

int tc_poly_within_chunks(__tc_keep const tc_poly *p, __tc_keep isl_schedule_node *node,
	__tc_keep isl_multi_union_pw_aff *chunks)
{
	isl_union_set *dom = isl_schedule_node_get_domain(node), *delta, *zero;
	isl_union_map *dep = isl_union_map_copy(p->deps), *c;
	isl_bool ok;
	dep = isl_union_map_intersect_domain(dep, isl_union_set_copy(dom));
	dep = isl_union_map_intersect_range(dep, dom);
	c = isl_union_map_from_multi_union_pw_aff(isl_multi_union_pw_aff_copy(chunks));
	dep = isl_union_map_apply_domain(dep, isl_union_map_copy(c));
	dep = isl_union_map_apply_range(dep, c);
	delta = isl_union_map_deltas(dep);
	zero = isl_union_set_read_from_str(isl_schedule_node_get_ctx(node), "{ [0] }");
	ok = isl_union_set_is_subset(delta, zero);
	isl_union_set_free(delta);
	isl_union_set_free(zero);
	return ok < 0 ? -1 : ok == isl_bool_true;
}

/* The rows per chunk and first row of the partial sums among a band's
 * statements: rows 0 while none is seen, -1 when two disagree. */
typedef struct part_rows {
	const tc_poly *p;
	int64_t rows, lo;
} part_rows;

static isl_stat part_rows_cb(isl_set *set, void *user)
{
	part_rows *pr = user;
	const tc_poly_stmt *st = tc_poly_find_stmt(pr->p, isl_set_get_tuple_name(set));
	isl_set_free(set);
	if (!st || !st->ir->part_rows || pr->rows < 0)
		return isl_stat_ok;
	if (pr->rows && (pr->rows != st->ir->part_rows || pr->lo != st->ir->part_lo))
		pr->rows = -1;
	else {
		pr->rows = st->ir->part_rows;
		pr->lo = st->ir->part_lo;
	}
	return isl_stat_ok;
}

__tc_give isl_multi_union_pw_aff *tc_poly_partial_chunks(__tc_keep const tc_poly *p,
	__tc_keep isl_schedule_node *node)
{
	part_rows pr = {p, 0, 0};
	isl_ctx *ctx = isl_schedule_node_get_ctx(node);
	isl_union_set *dom, *values;
	isl_multi_union_pw_aff *mupa;
	isl_union_pw_aff *upa;
	isl_union_map *m;
	isl_bool single;
	if (isl_schedule_node_get_type(node) != isl_schedule_node_band ||
		isl_schedule_node_band_n_member(node) < 1)
		return NULL;
	dom = isl_schedule_node_get_domain(node);
	isl_union_set_foreach_set(dom, part_rows_cb, &pr);
	if (pr.rows <= 0) {
		isl_union_set_free(dom);
		return NULL;
	}
	mupa = isl_schedule_node_band_get_partial_schedule(node);
	upa = isl_multi_union_pw_aff_get_union_pw_aff(mupa, 0);
	isl_multi_union_pw_aff_free(mupa);
	if (pr.lo)
		upa = isl_union_pw_aff_add(upa, isl_union_pw_aff_val_on_domain(isl_union_set_copy(dom),
			isl_val_int_from_si(ctx, -pr.lo)));
	mupa = isl_multi_union_pw_aff_from_union_pw_aff(upa);
	mupa = isl_multi_union_pw_aff_scale_down_val(mupa, isl_val_int_from_si(ctx, pr.rows));
	mupa = isl_multi_union_pw_aff_floor(mupa);
	/* at least two chunks: the first member walks the rows */
	m = isl_union_map_from_multi_union_pw_aff(isl_multi_union_pw_aff_copy(mupa));
	values = isl_union_set_apply(dom, m);
	single = isl_union_set_is_empty(values);
	if (single == isl_bool_false) {
		isl_set *v = isl_set_from_union_set(values);
		single = isl_set_is_singleton(v);
		isl_set_free(v);
	} else {
		isl_union_set_free(values);
	}
	if (single != isl_bool_false || tc_poly_within_chunks(p, node, mupa) != 1)
		return isl_multi_union_pw_aff_free(mupa);
	return mupa;
}

/* Whether node schedules packing copies only (left untiled). */
static int is_pack_band(const tc_poly *p, isl_schedule_node *node)
{
	isl_union_set *dom = isl_schedule_node_get_domain(node);
	int pack = tc_poly_is_pack(p, dom);
	isl_union_set_free(dom);
	return pack;
}

__tc_give isl_schedule_node *tc_poly_first_band(__tc_take isl_schedule_node *node,
	__tc_keep const tc_poly *p, tc_poly_band_fn fn, int *found, int *changed)
{
	isl_size n, i;
	if (*found || !node)
		return node;
	if (isl_schedule_node_get_type(node) == isl_schedule_node_band &&
		isl_schedule_node_band_get_permutable(node) == isl_bool_true &&
		isl_schedule_node_band_n_member(node) > 0 && !is_pack_band(p, node)) {
		*found = 1;
		return fn(node, p, changed);
	}
	n = isl_schedule_node_n_children(node);
	for (i = 0; i < n && !*found; i++) {
		node = isl_schedule_node_child(node, i);
		node = tc_poly_first_band(node, p, fn, found, changed);
		node = isl_schedule_node_parent(node);
	}
	return node;
}

int tc_poly_panel_var(__tc_keep const tc_poly *p, __tc_keep const tc_poly_stmt *st)
{
	const tc_ir_stmt *ir = st->ir;
	const tc_ir_tensor *t = &p->f->tensors[ir->tensor];
	int64_t ext, lo, hi, lanes_;
	int i;
	if (!p->params || st->kind != TC_POLY_UPDATE || ir->red != TC_RED_ADD ||
		(t->dtype != TC_T_F32 && t->dtype != TC_T_F64) || ir->nlhs < 2 ||
		ir->nvars != ir->nlhs + 1 || !ir->vars[ir->nlhs].is_reduction)
		return -1;
	lanes_ = p->target->vector_bytes / tc_dtype_size(t->dtype);
	if (lanes_ < 2 || tc_sx_eval(t->ext[ir->nlhs - 1], p->params, NULL, &ext) < 0 ||
		ext <= 0 || ext % lanes_ || !tc_ir_var_range(&ir->vars[ir->nlhs], p->params, &lo, &hi) ||
		hi - lo < 2 || hi - lo > lanes_ || (hi - lo) * (ext / lanes_) > p->target->accumulators)
		return -1;
	for (i = 0; p->free && i < p->f->nparams; i++) /* code for every value of a free size */
		if (p->free[i] && (tc_sx_mentions(t->ext[ir->nlhs - 1], TC_SX_PARAM, i) ||
			tc_sx_mentions(ir->vars[ir->nlhs].lo, TC_SX_PARAM, i) ||
			tc_sx_mentions(ir->vars[ir->nlhs].hi, TC_SX_PARAM, i)))
			return -1;
	return ir->nlhs;
}

int64_t tc_poly_row_vectors(__tc_keep const tc_target *t, int64_t want)
{
	int64_t acc = t->accumulators, regs = t->vector_regs > 0 ? t->vector_regs : acc * 4 / 3;
	while (want > 1 && acc / want * want + want + 1 > regs)
		want /= 2;
	return want;
}

__tc_give isl_schedule_node *tc_poly_each_band(__tc_take isl_schedule_node *node,
	__tc_keep const tc_poly *p, tc_poly_band_fn fn, int *changed)
{
	isl_size n, i;
	if (!node)
		return node;
	if (isl_schedule_node_get_type(node) == isl_schedule_node_band &&
		isl_schedule_node_band_get_permutable(node) == isl_bool_true &&
		isl_schedule_node_band_n_member(node) > 0 && !is_pack_band(p, node))
		return fn(node, p, changed);
	n = isl_schedule_node_n_children(node);
	for (i = 0; node && i < n; i++) {
		node = isl_schedule_node_child(node, i);
		node = tc_poly_each_band(node, p, fn, changed);
		node = node ? isl_schedule_node_parent(node) : NULL;
	}
	return node;
}

tc_stat tc_poly_walk_failed(__tc_keep tc_poly *p, __tc_keep tc_diags *d, const char *what)
{
	tc_loc none;
	memset(&none, 0, sizeof(none));
	/* isl reports nothing when one of our callbacks gave up, which they do
	 * only when an allocation (tc_malloc) failed */
	if (isl_ctx_last_error(p->ctx) == isl_error_none)
		tc_error(d, none, "out of memory (%s)", what);
	else
		tc_error(d, none, "internal error: isl could not %s: %s", what,
			isl_ctx_last_error_msg(p->ctx) ? isl_ctx_last_error_msg(p->ctx) : "?");
	return TC_ERR;
}

tc_stat tc_poly_walk_schedule(__tc_keep tc_poly *p, __tc_keep tc_diags *d, tc_poly_walk_fn walk,
	const char *what, int *flag)
{
	isl_schedule_node *node;
	*flag = 0;
	node = walk(isl_schedule_get_root(p->schedule), p, flag);
	isl_schedule_free(p->schedule);
	p->schedule = node ? isl_schedule_node_get_schedule(node) : NULL;
	isl_schedule_node_free(node);
	return p->schedule ? TC_OK : tc_poly_walk_failed(p, d, what);
}

tc_stat tc_poly_walk_schedule_legal(__tc_keep tc_poly *p, __tc_keep tc_diags *d,
	tc_poly_walk_fn walk, const char *what, const char *check)
{
	isl_schedule *before = isl_schedule_copy(p->schedule);
	int changed, legal;
	if (tc_poly_walk_schedule(p, d, walk, what, &changed) < 0) {
		isl_schedule_free(before);
		return TC_ERR;
	}
	legal = changed ? tc_poly_schedule_legal(p, p->schedule) : 1;
	if (legal == 0) {
		isl_schedule_free(p->schedule);
		p->schedule = isl_schedule_copy(before);
	}
	isl_schedule_free(before);
	return legal < 0 ? tc_poly_walk_failed(p, d, check) : TC_OK;
}

/* The points of set's bounding box, added to *bc->count; an unbounded or
 * unknown box counts as bc->unknown points. */
typedef struct box_count {
	double count, unknown;
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
			pts = bc->unknown;
		isl_val_free(lo);
		isl_val_free(hi);
	}
	bc->count += pts;
	isl_set_free(set);
	return isl_stat_ok;
}

double tc_poly_box_instances(__tc_keep const tc_poly *p, __tc_keep isl_union_set *dom,
	double unknown)
{
	box_count bc = {0, unknown};
	isl_union_set *at = tc_poly_at(p, isl_union_set_copy(dom));
	isl_union_set_foreach_set(at, count_box_cb, &bc);
	isl_union_set_free(at);
	return bc.count;
}

__tc_give isl_union_set *tc_poly_isolate_option(isl_ctx *ctx, __tc_take isl_union_set *s,
	isl_size depth)
{
	isl_set *set;
	isl_size dim;
	isl_map *rel;
	/* nothing to isolate (a member shorter than its tile) leaves the
	 * union empty, with no space to convert */
	if (!s || isl_union_set_n_set(s) != 1) {
		isl_union_set_free(s);
		return NULL;
	}
	set = isl_set_from_union_set(s);
	dim = isl_set_dim(set, isl_dim_set);
	if (dim < depth || isl_set_is_empty(set) != isl_bool_false) {
		isl_set_free(set);
		return NULL;
	}
	set = isl_set_reset_tuple_id(set);
	rel = isl_map_from_domain(set);
	rel = isl_map_move_dims(rel, isl_dim_out, 0, isl_dim_in, (unsigned)depth,
		(unsigned)(dim - depth));
	set = isl_map_wrap(rel);
	set = isl_set_set_tuple_id(set, isl_id_alloc(ctx, "isolate", NULL));
	return isl_union_set_from_set(set);
}
