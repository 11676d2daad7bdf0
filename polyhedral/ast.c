/* The AST build (tc_poly_ast) and the annotations of its user nodes.
 *
 * isl builds the loops of the tile bands; the point loops of a register
 * tile (the subtree below a TC_POLY_MARK_REGTILE mark) are built apart,
 * from the tile sizes, whenever that is exact: isl's build of the nested
 * tiling (`m - m mod 48`, `m mod 48 - m mod 6`, `m mod 6`) and of the
 * isolated full tiles cost most of a matmul's AST build (docs/performance.md,
 * Compile latency).  For each statement below such a mark:
 *
 * - every member of a band below the mark is a constant or `x mod T` for
 *   one of the statement's dimensions x (T, the tile's size in x, is the
 *   member's largest value plus one, the same in every band), and no
 *   sequence or set lies below a band;
 * - the statement's domain at the mark is a box whose tiles' origins
 *   (x - x mod T in every tiled dimension) are instances, and the mark's
 *   prefix schedule maps every instance where it maps its origin (it is
 *   then one to one on the origins whenever the schedule was: the point
 *   members are 0 there).
 *
 * Then the tree isl builds keeps, below the mark, only the sequences and
 * filters (one statement each) and no band; its domain is the tiles'
 * origins, renamed by their tile indices (x = T t), with the bands of
 * those statements divided by their members' strides, so that isl builds
 * over boxes without `x mod T = 0` existentials (over_indices; the call's
 * arguments are T times the indices); the band above the mark loses its
 * isolate option.  Each user
 * node of the statement stands for its tile (tc_poly_points, poly.h):
 * small ASTs of the point loops over p in [0, T) per dimension, built by
 * isl from the mark's subtree with `x mod T` read as p.  With the sizes
 * known, the only short extent of a dimension is end mod T, so there is a
 * piece of constant bounds per combination of short dimensions that
 * occurs (up to TC_POLY_MAX_PART of them); else a whole tile and one
 * partial tile bounded by the extents (parameters tc_e<v>).  A dimension
 * whose loop lies above the unrolled rows (TC_POLY_MARK_UNROLL) reads its
 * extent in every piece instead: a run-time trip count costs nothing
 * there.  A mark where any statement fails a test is built by isl as
 * before.
 *
 * Uses the model (poly.h).  The runtime's pipeline calls tc_poly_ast; the
 * regtile pass asks tc_poly_points_exact whether to isolate full tiles
 * for isl; nothing else here calls it. */
#include "band.h"
#include "poly.h"

#include <isl/aff.h>
#include <isl/ast_build.h>
#include <isl/id.h>
#include <isl/ilp.h>
#include <isl/map.h>
#include <isl/point.h>
#include <isl/printer.h>
#include <isl/schedule_node.h>
#include <isl/stride_info.h>
#include <isl/val.h>

#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#define MAX_PATH 16 /* the most bands and marks below a mark */

static void points_free(tc_poly_points *pt)
{
	int v;
	if (!pt || --pt->refs > 0)
		return;
	for (v = 0; v < pt->n; v++) {
		if (pt->origin)
			isl_id_free(pt->origin[v]);
		if (pt->extent)
			isl_id_free(pt->extent[v]);
		if (pt->end)
			isl_ast_expr_free(pt->end[v]);
	}
	tc_free(pt->size);
	tc_free(pt->may_partial);
	tc_free(pt->origin);
	tc_free(pt->extent);
	tc_free(pt->end);
	for (v = 0; v < 1 << TC_POLY_MAX_PART; v++)
		isl_ast_node_free(pt->piece[v]);
	isl_ast_node_free(pt->partial);
	tc_free(pt);
}

static tc_poly_points *points_alloc(isl_ctx *ctx, int n)
{
	tc_poly_points *pt = tc_calloc(1, sizeof(*pt));
	int v;
	if (!pt)
		return NULL;
	pt->refs = 1;
	pt->n = n;
	pt->size = tc_calloc((size_t)n + 1, sizeof(*pt->size));
	pt->may_partial = tc_calloc((size_t)n + 1, sizeof(*pt->may_partial));
	pt->origin = tc_calloc((size_t)n + 1, sizeof(*pt->origin));
	pt->extent = tc_calloc((size_t)n + 1, sizeof(*pt->extent));
	pt->end = tc_calloc((size_t)n + 1, sizeof(*pt->end));
	if (!pt->size || !pt->may_partial || !pt->origin || !pt->extent || !pt->end) {
		points_free(pt);
		return NULL;
	}
	for (v = 0; v < n; v++) {
		char name[24];
		pt->size[v] = 1;
		snprintf(name, sizeof(name), "tc_o%d", v);
		if (!(pt->origin[v] = isl_id_alloc(ctx, name, NULL))) {
			points_free(pt);
			return NULL;
		}
	}
	return pt;
}

/* Free n expressions e[0 .. n) and the array. */
static void exprs_free(isl_ast_expr **e, int n)
{
	int i;
	for (i = 0; e && i < n; i++)
		isl_ast_expr_free(e[i]);
	tc_free(e);
}

static void inst_free(void *user)
{
	tc_poly_inst *inst = user;
	int i;
	exprs_free(inst->index, inst->n);
	for (i = 0; i < inst->nshared; i++)
		exprs_free(inst->shared[i].index, TC_MAX_RANK);
	tc_free(inst->shared);
	points_free(inst->points);
	tc_free(inst);
}

const tc_poly_inst *tc_poly_node_inst(__tc_keep isl_ast_node *node)
{
	isl_id *id = isl_ast_node_get_annotation(node);
	const tc_poly_inst *inst = id ? isl_id_get_user(id) : NULL;
	isl_id_free(id); /* the node keeps its reference */
	return inst;
}

/* What the at_each_domain callbacks read: the model, and either the
 * points of each statement (by its index in p->stmts; the tile loops'
 * AST) or the points whose origins the index expressions add (a point
 * loops' AST). */
typedef struct ast_ctx {
	const tc_poly *p;
	tc_poly_points **pts;
	const tc_poly_points *origin_of;
} ast_ctx;

/* The value of each dimension of pma (taken; its domain: the instances of
 * the statement at this point of build) as an expression of the AST's
 * iterators, in TC_MAX_RANK entries (unused ones NULL), or NULL: the
 * inverse of the build's schedule pulled back, as PPCG does. */
static isl_ast_expr **build_exprs(isl_ast_build *build, isl_pw_multi_aff *pma)
{
	isl_map *m = isl_map_reverse(isl_map_from_union_map(isl_ast_build_get_schedule(build)));
	isl_ast_expr **e = tc_calloc(TC_MAX_RANK, sizeof(*e));
	isl_size k, n;
	pma = isl_pw_multi_aff_pullback_pw_multi_aff(pma, isl_pw_multi_aff_from_map(m));
	n = isl_pw_multi_aff_dim(pma, isl_dim_out);
	if (!e || n < 0 || n > TC_MAX_RANK) {
		isl_pw_multi_aff_free(pma);
		tc_free(e);
		return NULL;
	}
	for (k = 0; k < n; k++)
		if (!(e[k] = isl_ast_build_expr_from_pw_aff(build, isl_pw_multi_aff_get_pw_aff(pma,
			(int)k)))) {
			isl_pw_multi_aff_free(pma);
			exprs_free(e, TC_MAX_RANK);
			return NULL;
		}
	isl_pw_multi_aff_free(pma);
	return e;
}

/* at_each_domain for a GPU kernel's copy (its box's origin) or barrier
 * (polyhedral/gpu_shared.c), name: the statement's: inst filled. */
static tc_stat gpu_stmt(const tc_poly *p, isl_ast_build *build, const char *name,
	tc_poly_inst *inst)
{
	int c;
	inst->copy = -1;
	if (!strncmp(name, TC_POLY_GPU_SYNC, strlen(TC_POLY_GPU_SYNC)))
		return TC_OK;
	for (c = 0; c < p->ngpu_copies && strcmp(p->gpu_copies[c].stmt, name); c++)
		;
	if (c == p->ngpu_copies)
		return TC_ERR;
	inst->copy = c;
	inst->n = p->gpu_copies[c].ndims;
	inst->index = build_exprs(build, isl_pw_multi_aff_copy(p->gpu_copies[c].offset));
	return inst->index ? TC_OK : TC_ERR;
}

/* Annotate inst (a statement's) with the elements of the shared-memory
 * copies its reads read (polyhedral/gpu_shared.c). */
static tc_stat gpu_locals(const tc_poly *p, isl_ast_build *build, tc_poly_inst *inst)
{
	int i, s = (int)(inst->stmt - p->stmts), n = 0;
	for (i = 0; i < p->ngpu_locals; i++)
		n += p->gpu_locals[i].stmt == s;
	if (!n)
		return TC_OK;
	if (!(inst->shared = tc_calloc((size_t)n, sizeof(*inst->shared))))
		return TC_ERR;
	for (i = 0; i < p->ngpu_locals; i++) {
		const tc_poly_gpu_local *l = &p->gpu_locals[i];
		if (l->stmt != s)
			continue;
		inst->shared[inst->nshared].copy = l->copy;
		inst->shared[inst->nshared].index = build_exprs(build,
			isl_pw_multi_aff_copy(l->index));
		if (!inst->shared[inst->nshared++].index)
			return TC_ERR;
	}
	return TC_OK;
}

/* at_each_domain: annotate the user node with its statement and the value
 * of each domain dimension as an expression of the AST iterators.  Those
 * are the arguments of the node's call expression, which isl has just
 * built from the inverse of the schedule at this point of the build
 * (isl_ast_build_call_from_executed): computing that inverse again here
 * took a tenth of the AST build of a matmul.  In a point loops' AST the
 * arguments are the offsets in the tile, to which the origins are added. */
static isl_ast_node *at_domain(isl_ast_node *node, isl_ast_build *build, void *user)
{
	ast_ctx *ac = user;
	const tc_poly *p = ac->p;
	isl_ast_expr *call = isl_ast_node_user_get_expr(node);
	isl_ast_expr *fn = call ? isl_ast_expr_get_op_arg(call, 0) : NULL;
	isl_id *id = fn ? isl_ast_expr_get_id(fn) : NULL;
	isl_size nargs = call ? isl_ast_expr_op_get_n_arg(call) : isl_size_error;
	const tc_poly_points *o = ac->origin_of;
	tc_poly_inst *inst;
	int i;

	isl_ast_expr_free(fn);
	if (!id || nargs < 1)
		goto error_isl;
	inst = tc_calloc(1, sizeof(*inst));
	if (!inst)
		goto error_isl;
	if (p->ngpu_copies && !tc_poly_find_stmt(p, isl_id_get_name(id))) {
		/* a GPU kernel's copy or barrier */
		tc_stat r = gpu_stmt(p, build, isl_id_get_name(id), inst);
		isl_id_free(id);
		id = NULL;
		if (r < 0)
			goto error;
		isl_ast_expr_free(call);
		call = NULL;
		goto annotate;
	}
	inst->stmt = tc_poly_find_stmt(p, isl_id_get_name(id));
	isl_id_free(id);
	id = NULL;
	if (!inst->stmt || nargs - 1 != inst->stmt->ndims || (o && o->n != inst->stmt->ndims))
		goto error;
	inst->index = tc_calloc((size_t)inst->stmt->ndims + 1, sizeof(isl_ast_expr *));
	if (!inst->index)
		goto error;
	inst->n = inst->stmt->ndims;
	for (i = 0; i < inst->n; i++) {
		isl_ast_expr *arg = isl_ast_expr_get_op_arg(call, i + 1), *org;
		isl_val *c = arg && isl_ast_expr_get_type(arg) == isl_ast_expr_int
			? isl_ast_expr_get_val(arg) : NULL;
		if (o) { /* origin + offset, or the origin where the offset is 0 */
			org = isl_ast_expr_from_id(isl_id_copy(o->origin[i]));
			if (c && isl_val_is_zero(c) == isl_bool_true) {
				isl_ast_expr_free(arg);
				arg = org;
			} else {
				arg = isl_ast_expr_add(org, arg);
			}
		}
		isl_val_free(c);
		if (!(inst->index[i] = arg))
			goto error;
	}
	if (!o && ac->pts && ac->pts[inst->stmt - p->stmts]) {
		inst->points = ac->pts[inst->stmt - p->stmts];
		inst->points->refs++;
		/* the tile loops run over tile indices (over_indices): the
		 * origin is the index times the tile's size */
		for (i = 0; i < inst->n; i++) {
			isl_val *t;
			isl_ast_expr *x = inst->index[i];
			if (inst->points->size[i] <= 1)
				continue;
			t = isl_val_int_from_si(p->ctx, inst->points->size[i]);
			if (isl_ast_expr_get_type(x) == isl_ast_expr_int)
				x = isl_ast_expr_from_val(isl_val_mul(isl_ast_expr_get_val(x), t));
			else
				x = isl_ast_expr_mul(isl_ast_expr_from_val(t), isl_ast_expr_copy(x));
			isl_ast_expr_free(inst->index[i]);
			if (!(inst->index[i] = x))
				goto error;
		}
	}
	if (p->ngpu_locals && gpu_locals(p, build, inst) < 0)
		goto error;
	isl_ast_expr_free(call);
annotate:
	id = isl_id_alloc(p->ctx, inst->stmt ? inst->stmt->name : "tc_gpu", inst);
	id = isl_id_set_free_user(id, inst_free);
	if (!id) {
		inst_free(inst);
		return isl_ast_node_free(node);
	}
	return isl_ast_node_set_annotation(node, id);
error:
	inst_free(inst);
error_isl:
	isl_id_free(id);
	isl_ast_expr_free(call);
	return isl_ast_node_free(node);
}

/* ---- the point loops ---- */

/* The tile's point loops of one statement below a mark: the bands and
 * marks from the mark down to the statement's leaf. */
typedef struct path {
	isl_schedule_node *node[MAX_PATH];
	int n;
} path;

static void path_clear(path *pa)
{
	int i;
	for (i = 0; i < pa->n; i++)
		isl_schedule_node_free(pa->node[i]);
	pa->n = 0;
}

/* The path from node (taken; the mark's child) to the leaf of the
 * statement of space sp: 0 when it passes a sequence or set below a band
 * (unless loose: the regtile pass asks before it moves its sequence
 * above its bands), a filter of more than this statement, or a node of
 * another kind. */
static int path_of(isl_schedule_node *node, isl_space *sp, path *pa, int loose)
{
	int band_seen = 0;
	while (node) {
		enum isl_schedule_node_type t = isl_schedule_node_get_type(node);
		if (t == isl_schedule_node_leaf) {
			isl_schedule_node_free(node);
			return 1;
		}
		if (t == isl_schedule_node_band || t == isl_schedule_node_mark) {
			if (pa->n == MAX_PATH)
				break;
			band_seen |= t == isl_schedule_node_band;
			pa->node[pa->n++] = isl_schedule_node_copy(node);
			node = isl_schedule_node_child(node, 0);
		} else if ((t == isl_schedule_node_sequence || t == isl_schedule_node_set) &&
			   (!band_seen || loose)) {
			isl_size n = isl_schedule_node_n_children(node), i, found = -1;
			for (i = 0; i < n; i++) {
				isl_schedule_node *c = isl_schedule_node_get_child(node, i);
				isl_union_set *f = isl_schedule_node_filter_get_filter(c);
				isl_set *s = isl_union_set_extract_set(f, isl_space_copy(sp));
				isl_bool e = isl_set_is_empty(s);
				isl_size ns = isl_union_set_n_set(f);
				isl_set_free(s);
				isl_union_set_free(f);
				isl_schedule_node_free(c);
				if (e < 0 || ns < 0)
					found = -2;
				if (e == isl_bool_false) {
					found = found == -1 && ns == 1 ? i : -2;
				}
			}
			if (found < 0)
				break;
			node = isl_schedule_node_child(node, found);
		} else if (t == isl_schedule_node_filter && (!band_seen || loose)) {
			node = isl_schedule_node_child(node, 0);
		} else {
			break;
		}
	}
	isl_schedule_node_free(node);
	return 0;
}

/* Points of a statement's domain at which member_dim evaluates a member
 * before its exact test: a sample point of the domain and the points one
 * step up from it in each dimension (NULL where that is outside the
 * domain).  A candidate `x_v mod T` that differs from the member at one of
 * them is not the member, and needs no set comparison (the most costly
 * part of the test: a tile band's members are tried against every
 * dimension in turn).  The probes only rule candidates out, so the
 * dimension found is the one the exact test alone would find. */
typedef struct probes {
	isl_point **pt;
	int n;
} probes;

static void probes_clear(probes *pr)
{
	int i;
	for (i = 0; i < pr->n; i++)
		isl_point_free(pr->pt[i]);
	tc_free(pr->pt);
	pr->pt = NULL;
	pr->n = 0;
}

/* The probes of dom (kept); none (n 0) if dom is empty or on failure. */
static probes probes_of(isl_set *dom)
{
	probes pr = {NULL, 0};
	isl_size n = isl_set_dim(dom, isl_dim_set);
	isl_point *q = n >= 0 ? isl_set_sample_point(isl_set_copy(dom)) : NULL;
	int v;
	if (!q || isl_point_is_void(q) != isl_bool_false ||
		!(pr.pt = tc_calloc((size_t)n + 1, sizeof(*pr.pt)))) {
		isl_point_free(q);
		return pr;
	}
	for (v = 0; v < n; v++) {
		isl_point *up = isl_point_add_ui(isl_point_copy(q), isl_dim_set, v, 1);
		isl_set *one = isl_set_from_point(isl_point_copy(up));
		if (isl_set_is_subset(one, dom) == isl_bool_true)
			pr.pt[pr.n++] = up;
		else
			isl_point_free(up);
		isl_set_free(one);
	}
	pr.pt[pr.n++] = q;
	return pr;
}

/* The value of pa (kept) at pt (kept) as an integer in *x: 0 where it has
 * none there (outside its domain, or not an integer). */
static int value_at(isl_pw_aff *pa, isl_point *pt, int64_t *x)
{
	isl_val *val = isl_pw_aff_eval(isl_pw_aff_copy(pa), isl_point_copy(pt));
	int ok = val && isl_val_is_int(val) == isl_bool_true;
	if (ok)
		*x = isl_val_get_num_si(val);
	isl_val_free(val);
	return ok;
}

/* Whether `x_v mod t` differs from pa (kept, on the domain) at one of the
 * probes pr. */
static int refuted(isl_pw_aff *pa, int v, int64_t t, const probes *pr)
{
	isl_space *sp = pr->n ? isl_pw_aff_get_domain_space(pa) : NULL;
	isl_space *at = pr->n ? isl_point_get_space(pr->pt[0]) : NULL;
	int i, same = sp && at && isl_space_is_equal(sp, at) == isl_bool_true;
	isl_space_free(sp);
	isl_space_free(at);
	for (i = 0; same && i < pr->n; i++) {
		isl_val *c = isl_point_get_coordinate_val(pr->pt[i], isl_dim_set, v);
		int64_t x, want;
		int known = c && isl_val_is_int(c) == isl_bool_true;
		want = known ? isl_val_get_num_si(c) % t : 0;
		isl_val_free(c);
		want += want < 0 ? t : 0;
		if (known && value_at(pa, pr->pt[i], &x) && x != want)
			return 1;
	}
	return 0;
}

/* The dimension v of dom's space that member pa (taken, on dom) is
 * `x_v mod *size` of, with *size its largest value plus one; -2 if pa is
 * a constant on dom (then *size is its value), -1 if neither.  pr: probes
 * of dom (probes_of) that rule candidates out first. */
static int member_dim(isl_pw_aff *pa, isl_set *dom, int64_t *size, const probes *pr)
{
	isl_val *max, *min;
	isl_size n = isl_set_dim(dom, isl_dim_set);
	int v, found = -1, cst;
	pa = isl_pw_aff_intersect_domain(pa, isl_set_copy(dom));
	max = isl_pw_aff_max_val(isl_pw_aff_copy(pa));
	min = isl_pw_aff_min_val(isl_pw_aff_copy(pa));
	if (!max || !min || !isl_val_is_int(max) || !isl_val_is_int(min) ||
		isl_val_is_neg(min) == isl_bool_true || isl_val_cmp_si(max, 1L << 30) > 0) {
		isl_val_free(max);
		isl_val_free(min);
		isl_pw_aff_free(pa);
		return -1;
	}
	cst = isl_val_eq(min, max) == isl_bool_true;
	*size = isl_val_get_num_si(max) + !cst;
	isl_val_free(max);
	isl_val_free(min);
	for (v = cst ? -2 : 0; v < n && found == -1; v++) {
		isl_local_space *ls;
		isl_pw_aff *cand;
		isl_set *eq;
		if (!cst && refuted(pa, v, *size, pr))
			continue;
		ls = isl_local_space_from_space(isl_set_get_space(dom));
		cand = cst ? isl_pw_aff_val_on_domain(isl_set_copy(dom),
			isl_val_int_from_si(isl_set_get_ctx(dom), *size)) :
			isl_pw_aff_mod_val(isl_pw_aff_var_on_domain(ls, isl_dim_set, (unsigned)v),
				isl_val_int_from_si(isl_set_get_ctx(dom), *size));
		eq = isl_pw_aff_eq_set(isl_pw_aff_copy(pa), cand);
		if (isl_set_is_subset(dom, eq) == isl_bool_true)
			found = v;
		isl_set_free(eq);
		if (cst) {
			isl_local_space_free(ls);
			break; /* the only candidate */
		}
	}
	isl_pw_aff_free(pa);
	return found;
}

/* The statement's origins { S[x] -> S[x - x mod size] } (size 1: x) on
 * dom. */
static isl_pw_multi_aff *origin_of(isl_set *dom, const int64_t *size)
{
	isl_space *sp = isl_set_get_space(dom);
	isl_size n = isl_space_dim(sp, isl_dim_set);
	isl_local_space *ls = isl_local_space_from_space(isl_space_copy(sp));
	isl_pw_multi_aff *pma = isl_pw_multi_aff_identity(
		isl_space_map_from_set(isl_space_copy(sp)));
	int v;
	for (v = 0; v < n; v++) {
		isl_pw_aff *x, *mod;
		if (size[v] <= 1)
			continue;
		x = isl_pw_aff_var_on_domain(isl_local_space_copy(ls), isl_dim_set, (unsigned)v);
		mod = isl_pw_aff_mod_val(isl_pw_aff_copy(x),
			isl_val_int_from_si(isl_space_get_ctx(sp), size[v]));
		x = isl_pw_aff_sub(x, mod);
		pma = isl_pw_multi_aff_set_pw_aff(pma, (unsigned)v, x);
	}
	isl_local_space_free(ls);
	isl_space_free(sp);
	return isl_pw_multi_aff_intersect_domain(pma, isl_set_copy(dom));
}

/* Whether dom is the product of its dimensions' ranges. */
static isl_bool is_box(isl_set *dom)
{
	isl_size n = isl_set_dim(dom, isl_dim_set);
	isl_set *box = isl_set_universe(isl_set_get_space(dom));
	isl_bool r;
	int v;
	for (v = 0; v < n; v++) {
		isl_set *one = isl_set_copy(dom);
		one = isl_set_project_out(one, isl_dim_set, (unsigned)v + 1, (unsigned)(n - v - 1));
		one = isl_set_project_out(one, isl_dim_set, 0, (unsigned)v);
		one = isl_set_insert_dims(one, isl_dim_set, 0, (unsigned)v);
		one = isl_set_add_dims(one, isl_dim_set, (unsigned)(n - v - 1));
		one = isl_set_reset_space(one, isl_set_get_space(dom));
		box = isl_set_intersect(box, one);
	}
	r = isl_set_is_subset(box, dom);
	isl_set_free(box);
	return r;
}

/* The schedule tree text of the point loops of the statement named name
 * with dimensions p0 ... p<n-1> (path pa, tiled dimensions `dim[k]` of each
 * member k in order, -2 for a constant member cst[k]): over [0, size) in
 * each dimension, and below bound[v] where that is positive, below the
 * extent tc_e<v> (a parameter) where it is negative.
 *
 * With chunk > 0 (a piece short of the register tile's rows, whose one row
 * member is dimension row): the rows run in chunks of chunk rows, a loop
 * over the chunks outermost (floor(p/chunk)) and the unrolled rows the
 * chunk's (p mod chunk), under a mark tc_rolled that tells the code
 * generator to keep the loops above the unrolled rows rolled
 * (short_rows_chunk says when and how large). */
static char *point_tree(const char *name, int n, const int64_t *size, const int64_t *bound,
	const path *pa, const int *dim, const int64_t *cst, int row, int64_t chunk)
{
	tc_buf b;
	int v, k, m = 0, nparams = 0, depth = 0;
	tc_buf_init(&b);
	tc_buf_puts(&b, "{ domain: \"[");
	for (v = 0; v < n; v++)
		if (size[v] > 1 && bound[v] < 0)
			tc_buf_printf(&b, "%stc_e%d", nparams++ ? ", " : "", v);
	tc_buf_printf(&b, "] -> { %s[", name);
	for (v = 0; v < n; v++)
		tc_buf_printf(&b, "%sp%d", v ? ", " : "", v);
	tc_buf_puts(&b, "] : ");
	for (v = 0; v < n; v++) {
		if (v)
			tc_buf_puts(&b, " and ");
		if (size[v] <= 1)
			tc_buf_printf(&b, "p%d = 0", v);
		else
			tc_buf_printf(&b, "0 <= p%d <= %lld", v, (long long)size[v] - 1);
		if (size[v] > 1 && bound[v] > 0)
			tc_buf_printf(&b, " and p%d < %lld", v, (long long)bound[v]);
		else if (size[v] > 1 && bound[v] < 0)
			tc_buf_printf(&b, " and p%d < tc_e%d", v, v);
	}
	tc_buf_puts(&b, " }\"");
	if (chunk > 0) {
		tc_buf_printf(&b, ", child: { mark: \"%s\", child: { schedule: \"[{ %s[",
			TC_POLY_MARK_ROLLED, name);
		for (v = 0; v < n; v++)
			tc_buf_printf(&b, "%sp%d", v ? ", " : "", v);
		tc_buf_printf(&b, "] -> [(floor((p%d)/%lld))] }]\"", row, (long long)chunk);
		depth += 2;
	}
	for (k = 0; k < pa->n; k++) {
		isl_schedule_node *node = pa->node[k];
		if (isl_schedule_node_get_type(node) == isl_schedule_node_mark) {
			isl_id *id = isl_schedule_node_mark_get_id(node);
			int last = 1, j;
			for (j = k + 1; j < pa->n; j++)
				last &= isl_schedule_node_get_type(pa->node[j]) !=
					isl_schedule_node_band;
			if (!last)
				tc_buf_printf(&b, ", child: { mark: \"%s\"", isl_id_get_name(id));
			depth += !last;
			isl_id_free(id);
		} else {
			isl_size nm = isl_schedule_node_band_n_member(node), j;
			tc_buf_puts(&b, ", child: { schedule: \"[");
			for (j = 0; j < nm; j++, m++) {
				tc_buf_printf(&b, "%s{ %s[", j ? ", " : "", name);
				for (v = 0; v < n; v++)
					tc_buf_printf(&b, "%sp%d", v ? ", " : "", v);
				if (dim[m] >= 0 && chunk > 0 && dim[m] == row)
					tc_buf_printf(&b, "] -> [((p%d) mod %lld)] }", dim[m],
						(long long)chunk);
				else if (dim[m] >= 0)
					tc_buf_printf(&b, "] -> [(p%d)] }", dim[m]);
				else
					tc_buf_printf(&b, "] -> [(%lld)] }", (long long)cst[m]);
			}
			tc_buf_puts(&b, "]\"");
			depth++;
		}
	}
	for (k = 0; k <= depth; k++)
		tc_buf_puts(&b, " }");
	return tc_buf_take(&b);
}

/* The AST of the point loops' tree text (freed), iterators tc_p0, ...,
 * every extent >= 1; NULL on failure. */
static isl_ast_node *point_ast(const tc_poly *p, char *text, const tc_poly_points *pt)
{
	isl_schedule *s = text ? isl_schedule_read_from_str(p->ctx, text) : NULL;
	isl_set *context = s ? isl_set_params(isl_union_set_params(isl_schedule_get_domain(s)))
			     : NULL;
	isl_id_list *iters = isl_id_list_alloc(p->ctx, MAX_PATH * 4);
	isl_ast_build *build;
	isl_ast_node *ast;
	ast_ctx ac = {p, NULL, pt};
	isl_size np = context ? isl_set_dim(context, isl_dim_param) : isl_size_error;
	int i;
	tc_free(text);
	if (!s || np < 0) {
		isl_set_free(context);
		isl_id_list_free(iters);
		isl_schedule_free(s);
		return NULL;
	}
	for (i = 0; i < np; i++)
		context = isl_set_lower_bound_si(context, isl_dim_param, (unsigned)i, 1);
	for (i = 0; i < MAX_PATH * 4; i++) {
		char name[16];
		snprintf(name, sizeof(name), "tc_p%d", i);
		iters = isl_id_list_add(iters, isl_id_alloc(p->ctx, name, NULL));
	}
	build = isl_ast_build_from_context(context);
	build = isl_ast_build_set_iterators(build, iters);
	build = isl_ast_build_set_at_each_domain(build, at_domain, &ac);
	ast = isl_ast_build_node_from_schedule(build, s);
	isl_ast_build_free(build);
	return ast;
}

/* The tiles of the statement whose instances in the subtree top are dom:
 * size[] (1 where untiled) and the path of bands and marks from top (pa;
 * dim[] the dimension each band member walks, -2 for a constant member,
 * its value in cst[]) when
 * they are exact (see the top of the file; 0 otherwise), and then the
 * tiles' origins (*origins).  prefix (kept): top's prefix schedule, which
 * the caller computes once for all the statements below top. */
static int analyse(const tc_poly *p, isl_schedule_node *top, isl_union_pw_multi_aff *prefix,
	isl_set *dom, int64_t *size, path *pa, int *dim, int64_t *cst, int maxdim,
	isl_set **origins, int loose)
{
	const tc_poly_stmt *st = tc_poly_find_stmt(p, isl_set_get_tuple_name(dom));
	isl_space *sp = isl_set_get_space(dom);
	isl_pw_multi_aff *org = NULL, *pre = NULL;
	int nmem = 0, k, v, ok = st && isl_set_dim(dom, isl_dim_set) == st->ndims;
	probes pr = {NULL, 0};
	for (v = 0; st && v < st->ndims; v++)
		size[v] = 1;
	ok = ok && path_of(isl_schedule_node_copy(top), sp, pa, loose);
	if (ok)
		pr = probes_of(dom);
	for (k = 0; ok && k < pa->n; k++) {
		isl_multi_union_pw_aff *mupa;
		isl_size nm, j;
		if (isl_schedule_node_get_type(pa->node[k]) != isl_schedule_node_band)
			continue;
		mupa = isl_schedule_node_band_get_partial_schedule(pa->node[k]);
		nm = isl_multi_union_pw_aff_size(mupa);
		for (j = 0; ok && j < nm; j++) {
			isl_union_pw_aff *upa = isl_multi_union_pw_aff_get_union_pw_aff(mupa, j);
			isl_pw_aff *pw = isl_union_pw_aff_extract_pw_aff(upa, isl_space_add_dims(
				isl_space_from_domain(isl_space_copy(sp)), isl_dim_out, 1));
			isl_union_pw_aff_free(upa);
			int64_t t = 1;
			int d = member_dim(pw, dom, &t, &pr);
			if (d == -1 || nmem == maxdim)
				ok = 0;
			else if (d >= 0 && size[d] > 1 && size[d] != t)
				ok = 0;
			else if (d >= 0)
				size[d] = t;
			if (ok) {
				cst[nmem] = d == -2 ? t : 0;
				dim[nmem++] = d;
			}
		}
		isl_multi_union_pw_aff_free(mupa);
	}
	/* the origins are instances, the tiles boxes, and top's prefix
	 * schedule maps each instance where it maps its origin (one to one on
	 * the origins: there the point members are 0, so it is as injective
	 * as the schedule was; where it was not, instances at one point of
	 * the schedule had no order before either) */
	if (ok) {
		org = origin_of(dom, size);
		*origins = isl_set_coalesce(isl_map_range(isl_map_from_pw_multi_aff(
			isl_pw_multi_aff_copy(org))));
		ok = isl_set_is_subset(*origins, dom) == isl_bool_true &&
			is_box(dom) == isl_bool_true;
	}
	if (ok) {
		isl_union_pw_multi_aff *u = isl_union_pw_multi_aff_intersect_domain(
			isl_union_pw_multi_aff_copy(prefix),
			isl_union_set_from_set(isl_set_copy(dom)));
		isl_pw_multi_aff *moved;
		pre = isl_union_pw_multi_aff_as_pw_multi_aff(u);
		moved = isl_pw_multi_aff_pullback_pw_multi_aff(isl_pw_multi_aff_copy(pre),
			isl_pw_multi_aff_copy(org));
		ok = isl_pw_multi_aff_is_equal(moved, pre) == isl_bool_true;
		isl_pw_multi_aff_free(moved);
	}
	probes_clear(&pr);
	isl_pw_multi_aff_free(pre);
	isl_pw_multi_aff_free(org);
	isl_space_free(sp);
	return ok;
}

int tc_poly_points_exact(__tc_keep const tc_poly *p, __tc_keep isl_schedule_node *top)
{
	isl_union_set *dom = p->params ? isl_schedule_node_get_domain(top) : NULL;
	isl_set_list *list = dom ? isl_union_set_get_set_list(dom) : NULL;
	isl_size n = list ? isl_set_list_size(list) : isl_size_error, i;
	isl_union_pw_multi_aff *prefix = n > 0 ?
		isl_schedule_node_get_prefix_schedule_union_pw_multi_aff(top) : NULL;
	int ok = n > 0 && prefix;
	for (i = 0; ok && i < n; i++) {
		isl_set *s = isl_set_list_get_at(list, i), *origins = NULL;
		isl_size nd = isl_set_dim(s, isl_dim_set);
		int64_t *size = nd >= 0 ? tc_calloc((size_t)nd + 1, sizeof(*size)) : NULL;
		int dim[MAX_PATH * TC_POLY_MAX_TILE * 2];
		int64_t cst[MAX_PATH * TC_POLY_MAX_TILE * 2];
		path pa = {{NULL}, 0};
		ok = size && analyse(p, top, prefix, s, size, &pa, dim, cst,
			(int)(sizeof(dim) / sizeof(dim[0])), &origins, 1);
		path_clear(&pa);
		isl_set_free(origins);
		isl_set_free(s);
		tc_free(size);
	}
	isl_union_pw_multi_aff_free(prefix);
	isl_set_list_free(list);
	isl_union_set_free(dom);
	return ok;
}

/* Whether e reads tensor t only at the element (vars 0 .. n-1). */
static int reads_own_element(const tc_ir_expr *e, int t, int n)
{
	int i;
	if (e->op == TC_OP_READ && e->id == t) {
		if (e->nargs != n)
			return 0;
		for (i = 0; i < n; i++)
			if (e->args[i]->op != TC_OP_INDEX || e->args[i]->id != i)
				return 0;
	}
	for (i = 0; i < e->nargs; i++)
		if (!reads_own_element(e->args[i], t, n))
			return 0;
	return 1;
}

/* Independent sums a piece's rows must keep in flight to fill the vector
 * FMA units: two pipes with a latency of four (Zen 4, and Intel's cores
 * since Skylake).  A piece short of its rows runs chunks of at least this
 * many vectors (short_rows_chunk). */
#define FMA_CHAINS 8

/* The register tile's row dimension of statement st on path pa (members'
 * dimensions dim) when a piece short of its rows may run them in chunks
 * (point_tree's chunk), else -1; *cols gets a bit for each dimension of
 * the members below tc_unrolled (the tile's columns).  It may when the
 * tile has one row member, between the marks tc_unroll and tc_unrolled
 * (the only marks on the path), that is a left-hand variable, and st reads
 * the tensor it writes at the element it writes only: then instances of
 * different rows touch no common element that st writes, and moving a loop
 * over the rows outward keeps the order of every instance that shares one
 * (a reduction's order included). */
static int short_rows_dim(const tc_poly_stmt *st, const path *pa, const int *dim,
	uint64_t *cols)
{
	int k, j, m = 0, in_rows = 0, after = 0, ok = 1, row = -1, nrow = 0;
	*cols = 0;
	for (k = 0; k < pa->n && ok; k++) {
		isl_schedule_node *nd = pa->node[k];
		if (isl_schedule_node_get_type(nd) == isl_schedule_node_mark) {
			isl_id *id = isl_schedule_node_mark_get_id(nd);
			const char *mk = id ? isl_id_get_name(id) : "";
			if (!strcmp(mk, TC_POLY_MARK_UNROLL))
				in_rows = 1;
			else if (!strcmp(mk, TC_POLY_MARK_UNROLLED))
				in_rows = 0, after = 1;
			else
				ok = 0;
			isl_id_free(id);
			continue;
		}
		for (j = 0; j < isl_schedule_node_band_n_member(nd); j++, m++) {
			if (in_rows) {
				row = dim[m];
				nrow++;
			} else if (after && dim[m] >= 0 && dim[m] < 64) {
				*cols |= (uint64_t)1 << dim[m];
			}
		}
	}
	ok = ok && nrow == 1 && row >= 0 && row < st->ir->nlhs && (st->kind == TC_POLY_INIT ||
		reads_own_element(st->ir->rhs, st->ir->tensor, st->ir->nlhs));
	return ok ? row : -1;
}

/* The chunk of rows (see point_tree) for a piece whose row dimension row
 * has bound[row] rows (short of the tile's; the columns, dimensions cols,
 * size[v] or bound[v] where positive): the fewest rows that divide them
 * and keep FMA_CHAINS vector sums in flight, or 0 (the piece as the whole
 * tile's, its rows unrolled) if only all of them do.  Matmul at 256 with
 * AVX-512 (rows of 4 vectors, 6 rows a tile): the 4 rows left run as 2
 * chunks of 2 rows, 8 vector FMAs of code instead of 16. */
static int64_t short_rows_chunk(const tc_poly *p, const tc_poly_stmt *st, int row,
	uint64_t cols, const int64_t *size, const int64_t *bound)
{
	int bytes = tc_dtype_size(p->f->tensors[st->ir->tensor].dtype);
	int64_t lanes = bytes > 0 && bytes < p->target->vector_bytes
		? p->target->vector_bytes / bytes : 1, n = 1, vectors, d;
	int v;
	if (p->opts.vector > 0 && p->opts.vector < lanes)
		lanes = p->opts.vector;
	for (v = 0; v < 64 && v < st->ndims; v++)
		if (cols >> v & 1)
			n *= bound[v] > 0 ? bound[v] : size[v];
	vectors = (n + lanes - 1) / lanes;
	for (d = 1; d < bound[row]; d++)
		if (bound[row] % d == 0 && d * vectors >= FMA_CHAINS)
			return d;
	return 0;
}

/* The points of the statement whose instances at mark are dom (taken), or
 * NULL (not exact: see the top of the file; or an error).  restrict_to
 * collects the tiles' origins; prefix (kept) is the prefix schedule of
 * mark's child. */
static tc_poly_points *stmt_points(const tc_poly *p, isl_schedule_node *mark,
	isl_union_pw_multi_aff *prefix, isl_set *dom, isl_ast_build *pbuild,
	isl_union_set **restrict_to)
{
	const tc_poly_stmt *st = tc_poly_find_stmt(p, isl_set_get_tuple_name(dom));
	tc_poly_points *pt = st ? points_alloc(p->ctx, st->ndims) : NULL;
	path pa = {{NULL}, 0};
	int dim[MAX_PATH * TC_POLY_MAX_TILE * 2], v, ok = pt != NULL;
	int64_t cst[MAX_PATH * TC_POLY_MAX_TILE * 2];
	int nvar = 0, mask, row;
	uint64_t cols = 0;
	int64_t *rest = tc_calloc(3 * ((size_t)(st ? st->ndims : 0) + 1), sizeof(*rest));
	int64_t *bound = rest ? rest + (st ? st->ndims : 0) + 1 : NULL;
	int64_t *full_in = bound ? bound + (st ? st->ndims : 0) + 1 : NULL;
	isl_set *origins = NULL;
	isl_schedule_node *top = isl_schedule_node_get_child(mark, 0);
	ok = ok && rest && analyse(p, top, prefix, dom, pt->size, &pa, dim, cst,
		(int)(sizeof(dim) / sizeof(dim[0])), &origins, 0);
	isl_schedule_node_free(top);
	/* the dimensions of members above the unrolled rows: their loops hold
	 * the micro-kernel, a trip count read at run time costs nothing there */
	for (v = 0; ok && v < pt->n; v++)
		full_in[v] = 0;
	{
		int k, j, m = 0, unroll = 0;
		for (k = 0; ok && k < pa.n; k++) {
			isl_schedule_node *nd = pa.node[k];
			if (isl_schedule_node_get_type(nd) == isl_schedule_node_mark) {
				isl_id *id = isl_schedule_node_mark_get_id(nd);
				unroll |= id && !strcmp(isl_id_get_name(id), TC_POLY_MARK_UNROLL);
				isl_id_free(id);
				continue;
			}
			for (j = 0; j < isl_schedule_node_band_n_member(nd); j++, m++)
				if (!unroll && dim[m] >= 0)
					full_in[dim[m]] = -1; /* outer, if a tc_unroll follows */
		}
		for (v = 0; ok && v < pt->n; v++)
			full_in[v] = unroll && full_in[v] < 0 ? -1 : 0;
	}
	for (v = 0; ok && v < pt->n; v++) {
		isl_pw_aff *end;
		int outer = full_in[v] < 0;
		isl_val *c;
		rest[v] = 0;
		if (pt->size[v] <= 1)
			continue;
		end = isl_pw_aff_add(isl_set_dim_max(isl_set_copy(dom), v),
			isl_pw_aff_val_on_domain(isl_set_params(isl_set_copy(dom)),
				isl_val_one(p->ctx)));
		end = isl_pw_aff_coalesce(end);
		pt->end[v] = isl_ast_build_expr_from_pw_aff(pbuild, end);
		c = pt->end[v] && isl_ast_expr_get_type(pt->end[v]) == isl_ast_expr_int
			? isl_ast_expr_get_val(pt->end[v]) : NULL;
		pt->may_partial[v] = !c || isl_val_get_num_si(c) % pt->size[v] != 0;
		pt->may_partial[v] *= outer ? 2 : 1;
		if (c) { /* the origins are multiples of the size: one partial extent */
			rest[v] = isl_val_get_num_si(c) % pt->size[v];
			full_in[v] = isl_val_get_num_si(c) >= pt->size[v];
		} else {
			full_in[v] = 1;
		}
		isl_val_free(c);
		if (pt->may_partial[v] != 1)
			continue;
		nvar += rest[v] <= 0;
		if (pt->npart < TC_POLY_MAX_PART)
			pt->part[pt->npart] = v;
		pt->npart++;
		ok = pt->end[v] != NULL;
	}
	/* constant bounds for every combination of short dimensions (as isl's
	 * isolated tiles had, the pieces of a combination that occurs) when
	 * each has one partial extent and there are few; else one partial tile
	 * bounded by the extents */
	if (nvar || pt->npart > TC_POLY_MAX_PART)
		pt->npart = 0;
	for (v = 0; ok && v < pt->n; v++) {
		char name[24];
		bound[v] = pt->may_partial[v] == 2 || (pt->may_partial[v] && !pt->npart) ? -1 : 0;
		if (bound[v] >= 0)
			continue;
		snprintf(name, sizeof(name), "tc_e%d", v);
		ok = (pt->extent[v] = isl_id_alloc(p->ctx, name, NULL)) != NULL;
	}
	row = ok ? short_rows_dim(st, &pa, dim, &cols) : -1;
	for (mask = 0; ok && mask < 1 << pt->npart; mask++) {
		int k, occurs = 1;
		int64_t chunk;
		for (v = 0; v < pt->n; v++)
			bound[v] = pt->may_partial[v] == 2 ? -1 : 0;
		for (k = 0; k < pt->npart; k++)
			bound[pt->part[k]] = mask & 1 << k ? rest[pt->part[k]] : 0;
		for (v = 0; v < pt->n; v++)
			occurs &= pt->size[v] <= 1 || bound[v] != 0 || full_in[v];
		chunk = row >= 0 && bound[row] > 0
			? short_rows_chunk(p, st, row, cols, pt->size, bound) : 0;
		if (occurs)
			ok = (pt->piece[mask] = point_ast(p, point_tree(st->name, pt->n, pt->size,
				bound, &pa, dim, cst, row, chunk), pt)) != NULL;
	}
	for (v = 0, mask = 0; ok && v < pt->n; v++) {
		bound[v] = pt->extent[v] ? -1 : 0;
		mask |= pt->may_partial[v] == 1;
	}
	if (ok && mask && !pt->npart)
		ok = (pt->partial = point_ast(p, point_tree(st->name, pt->n, pt->size, bound, &pa,
			dim, cst, -1, 0), pt)) != NULL;
	if (ok)
		*restrict_to = isl_union_set_add_set(*restrict_to, isl_set_copy(origins));
	isl_set_free(origins);
	path_clear(&pa);
	tc_free(rest);
	isl_set_free(dom);
	if (!ok) {
		points_free(pt);
		return NULL;
	}
	return pt;
}

/* Below the mark node: every band and mark removed, the sequences and
 * filters kept.  Bottom up, each band's AST build options dropped first:
 * isl deletes no node above a band whose options refer to the outer
 * schedule (an isolate option: "cannot delete band node with anchored
 * subtree"), which a register tile's reduction band can keep when the
 * statements were scheduled for every size (test_codegen,
 * test_generic_schedule_of_attention); the point loops that replace
 * these bands need none of them. */
static isl_schedule_node *cut(isl_schedule_node *node)
{
	enum isl_schedule_node_type t;
	isl_size n, i;
	if (!node)
		return NULL;
	n = isl_schedule_node_n_children(node);
	for (i = 0; node && i < n; i++)
		node = isl_schedule_node_parent(cut(isl_schedule_node_child(node, i)));
	t = isl_schedule_node_get_type(node);
	if (t == isl_schedule_node_band)
		node = isl_schedule_node_band_set_ast_build_options(node,
			isl_union_set_empty(isl_space_params_alloc(
				isl_schedule_node_get_ctx(node), 0)));
	if (t == isl_schedule_node_band || t == isl_schedule_node_mark)
		node = isl_schedule_node_delete(node);
	return node;
}

typedef struct convert_ctx {
	const tc_poly *p;
	tc_poly_points **pts;
	isl_ast_build *pbuild;
	isl_union_set *restrict_to; /* the converted statements' origins */
	isl_union_set *converted;   /* the converted statements' instances */
} convert_ctx;

/* A register tile's mark: its statements' point loops (stmt_points) and,
 * when every statement has them, the tree below it cut. */
static isl_schedule_node *convert_mark(isl_schedule_node *mark, convert_ctx *cc)
{
	isl_union_set *dom = isl_schedule_node_get_domain(mark);
	isl_set_list *list = isl_union_set_get_set_list(dom);
	isl_size n = isl_set_list_size(list), i;
	isl_union_set *origins = isl_union_set_empty(isl_union_set_get_space(dom));
	tc_poly_points *got[64] = {NULL};
	isl_schedule_node *top = isl_schedule_node_get_child(mark, 0);
	isl_union_pw_multi_aff *prefix =
		isl_schedule_node_get_prefix_schedule_union_pw_multi_aff(top);
	int ok = n > 0 && n <= 64 && prefix;
	isl_schedule_node_free(top);
	for (i = 0; ok && i < n; i++) {
		isl_set *s = isl_set_list_get_at(list, i);
		const tc_poly_stmt *st = tc_poly_find_stmt(cc->p, isl_set_get_tuple_name(s));
		if (!st || cc->pts[st - cc->p->stmts]) {
			isl_set_free(s);
			ok = 0;
		} else {
			ok = (got[i] = stmt_points(cc->p, mark, prefix, s, cc->pbuild,
				&origins)) != NULL;
		}
	}
	if (ok) {
		for (i = 0; i < n; i++) {
			isl_set *s = isl_set_list_get_at(list, i);
			cc->pts[tc_poly_find_stmt(cc->p, isl_set_get_tuple_name(s)) - cc->p->stmts] =
				got[i];
			isl_set_free(s);
		}
		cc->restrict_to = isl_union_set_union(cc->restrict_to, origins);
		cc->converted = isl_union_set_union(cc->converted, isl_union_set_copy(dom));
		mark = isl_schedule_node_parent(cut(isl_schedule_node_child(mark, 0)));
		/* the full tiles are the code generator's: no isolate option */
		if (isl_schedule_node_has_parent(mark) == isl_bool_true) {
			mark = isl_schedule_node_parent(mark);
			if (isl_schedule_node_get_type(mark) == isl_schedule_node_band)
				mark = isl_schedule_node_band_set_ast_build_options(mark,
					isl_union_set_empty(isl_space_params_alloc(cc->p->ctx, 0)));
			mark = isl_schedule_node_child(mark, 0);
		}
	} else {
		for (i = 0; i < n && i < 64; i++)
			points_free(got[i]);
		isl_union_set_free(origins);
	}
	isl_union_pw_multi_aff_free(prefix);
	isl_set_list_free(list);
	isl_union_set_free(dom);
	return mark;
}

static isl_schedule_node *convert_walk(isl_schedule_node *node, convert_ctx *cc)
{
	isl_size n, i;
	if (!node)
		return NULL;
	if (isl_schedule_node_get_type(node) == isl_schedule_node_mark) {
		isl_id *id = isl_schedule_node_mark_get_id(node);
		int tile = id && !strcmp(isl_id_get_name(id), TC_POLY_MARK_REGTILE);
		isl_id_free(id);
		if (tile)
			return convert_mark(node, cc);
	}
	n = isl_schedule_node_n_children(node);
	for (i = 0; node && i < n; i++)
		node = isl_schedule_node_parent(convert_walk(isl_schedule_node_child(node, i), cc));
	return node;
}

/* The stride of band member upa's values (kept) on the domain dom (kept),
 * the largest g such that every value is a multiple of g: 1 when none is
 * found (or on failure). */
static int64_t member_stride(isl_union_pw_aff *upa, isl_union_set *dom)
{
	isl_union_map *um = isl_union_map_from_union_pw_aff(isl_union_pw_aff_copy(upa));
	isl_union_set *r = isl_union_map_range(isl_union_map_intersect_domain(um,
		isl_union_set_copy(dom)));
	isl_set *range = isl_set_from_union_set(r);
	isl_stride_info *si = range ? isl_set_get_stride_info(range, 0) : NULL;
	isl_val *g = si ? isl_stride_info_get_stride(si) : NULL;
	isl_aff *off = si ? isl_stride_info_get_offset(si) : NULL;
	isl_bool zero = off ? isl_aff_plain_is_zero(off) : isl_bool_error;
	int64_t stride = 1;
	if (zero == isl_bool_true && g && isl_val_is_int(g) == isl_bool_true &&
		isl_val_cmp_si(g, 1) > 0 && isl_val_cmp_si(g, 1L << 30) < 0)
		stride = isl_val_get_num_si(g);
	isl_aff_free(off);
	isl_val_free(g);
	isl_stride_info_free(si);
	isl_set_free(range);
	return stride;
}

/* Whether every statement of dom (kept) has its register tile's points
 * in cc (their instances are tile indices in over_indices' tree). */
static int all_converted(const convert_ctx *cc, isl_union_set *dom)
{
	isl_set_list *list = dom ? isl_union_set_get_set_list(dom) : NULL;
	isl_size n = list ? isl_set_list_size(list) : isl_size_error, i;
	int ok = n > 0;
	for (i = 0; ok && i < n; i++) {
		isl_set *set = isl_set_list_get_at(list, i);
		const tc_poly_stmt *st = set ? tc_poly_find_stmt(cc->p,
			isl_set_get_tuple_name(set)) : NULL;
		ok = st && cc->pts[st - cc->p->stmts];
		isl_set_free(set);
	}
	isl_set_list_free(list);
	return ok;
}

/* isl_schedule_map_schedule_node_bottom_up callback of over_indices: a
 * band of converted statements only (convert_ctx user) without AST build
 * options, each member divided by the stride of its values (a tile band
 * over tile indices: `48 floor(t/8)` becomes `floor(t/8)`, `6 (t mod 8)`
 * becomes `t mod 8`).  Dividing a member by a positive constant keeps the
 * order it gives; the other bands (a packing copy's tiles) are left as
 * they were, so that their code stays the same. */
static isl_schedule_node *scale_band(isl_schedule_node *node, void *user)
{
	const convert_ctx *cc = user;
	isl_union_set *dom;
	isl_multi_union_pw_aff *mupa;
	isl_multi_val *mv;
	isl_size n, j;
	int any = 0;
	if (isl_schedule_node_get_type(node) != isl_schedule_node_band ||
		tc_poly_band_has_options(node))
		return node;
	dom = isl_schedule_node_get_domain(node);
	if (!all_converted(cc, dom)) {
		isl_union_set_free(dom);
		return node;
	}
	mupa = isl_schedule_node_band_get_partial_schedule(node);
	n = isl_multi_union_pw_aff_size(mupa);
	mv = isl_multi_val_zero(isl_multi_union_pw_aff_get_space(mupa));
	for (j = 0; j < n; j++) {
		isl_union_pw_aff *upa = isl_multi_union_pw_aff_get_at(mupa, j);
		int64_t g = member_stride(upa, dom);
		isl_union_pw_aff_free(upa);
		any |= g > 1;
		mv = isl_multi_val_set_at(mv, j, isl_val_int_from_si(isl_schedule_node_get_ctx(
			node), g));
	}
	isl_multi_union_pw_aff_free(mupa);
	isl_union_set_free(dom);
	if (n < 0 || !any) {
		isl_multi_val_free(mv);
		return n < 0 ? isl_schedule_node_free(node) : node;
	}
	return isl_schedule_node_band_scale_down(node, mv);
}

/* s (taken) with the converted statements' instances, their tiles'
 * origins, renamed by their tile indices (x = T t in each tiled
 * dimension), and each band's members divided by their values' strides:
 * the domain isl builds over is a box without the origins' `x mod T = 0`
 * existentials, which made every set operation of the build costly
 * (docs/performance.md, "Sixth pass": 18 -> 8 ms at matmul 256).  at_domain
 * multiplies the indices back. */
static isl_schedule *over_indices(const tc_poly *p, convert_ctx *cc, isl_schedule *s)
{
	isl_union_set *dom = isl_schedule_get_domain(s);
	isl_set_list *list = dom ? isl_union_set_get_set_list(dom) : NULL;
	isl_size n = list ? isl_set_list_size(list) : isl_size_error, i;
	isl_union_pw_multi_aff *up = dom ? isl_union_pw_multi_aff_empty(
		isl_union_set_get_space(dom)) : NULL;
	for (i = 0; i < n; i++) {
		isl_set *set = isl_set_list_get_at(list, i);
		const tc_poly_stmt *st = set ? tc_poly_find_stmt(p, isl_set_get_tuple_name(set))
					     : NULL;
		const tc_poly_points *pt = st ? cc->pts[st - p->stmts] : NULL;
		isl_space *sp = isl_set_get_space(set);
		isl_multi_aff *ma = isl_multi_aff_identity(isl_space_map_from_set(
			isl_space_copy(sp)));
		isl_size nd = isl_space_dim(sp, isl_dim_set);
		int v;
		if (pt && pt->n == nd) {
			isl_multi_val *mv = isl_multi_val_zero(isl_space_copy(sp));
			for (v = 0; v < nd; v++)
				mv = isl_multi_val_set_at(mv, v, isl_val_int_from_si(p->ctx,
					pt->size[v]));
			ma = isl_multi_aff_scale_multi_val(ma, mv);
		}
		isl_space_free(sp);
		isl_set_free(set);
		up = isl_union_pw_multi_aff_add_pw_multi_aff(up,
			isl_pw_multi_aff_from_multi_aff(ma));
	}
	isl_set_list_free(list);
	isl_union_set_free(dom);
	if (n < 0) {
		isl_union_pw_multi_aff_free(up);
		return isl_schedule_free(s);
	}
	s = isl_schedule_pullback_union_pw_multi_aff(s, up);
	return isl_schedule_map_schedule_node_bottom_up(s, scale_band, cc);
}

/* The tree isl builds: p's schedule with the register tiles' point loops
 * taken out where they can be (cc->pts set for their statements), over
 * the tiles' indices (over_indices). */
static isl_schedule *tile_loops_only(const tc_poly *p, convert_ctx *cc)
{
	isl_schedule_node *root = isl_schedule_get_root(p->schedule);
	isl_schedule *s;
	isl_union_set *keep;
	root = convert_walk(root, cc);
	s = isl_schedule_node_get_schedule(root);
	isl_schedule_node_free(root);
	if (!cc->restrict_to || !cc->converted || isl_union_set_is_empty(cc->converted) ==
		isl_bool_true)
		return s;
	/* the converted statements at their origins, the others whole */
	keep = isl_union_set_subtract(isl_schedule_get_domain(s),
		isl_union_set_copy(cc->converted));
	keep = isl_union_set_union(keep, isl_union_set_copy(cc->restrict_to));
	return over_indices(p, cc, isl_schedule_intersect_domain(s, keep));
}

/* isl_schedule_foreach_schedule_node_top_down: count band members. */
static isl_bool count_members(isl_schedule_node *node, void *user)
{
	if (isl_schedule_node_get_type(node) == isl_schedule_node_band)
		*(int *)user += (int)isl_schedule_node_band_n_member(node);
	return isl_bool_true;
}

/* Whether a size of p is named like an isl iterator ("c" and digits). */
static int size_like_iterator(const tc_poly *p)
{
	int i;
	for (i = 0; i < p->f->nparams; i++) {
		const char *n = p->f->params[i].name;
		if (n[0] == 'c' && n[1] >= '0' && n[1] <= '9')
			return 1;
	}
	return 0;
}

/* Where the model has no parameters (fixed sizes, tc_poly_build) and a
 * size is named like an iterator, the iterators' names for s (kept) as isl
 * gives them around parameters of those names (c<k>, else c<k>_<j> with
 * the first j free), so that the code generators' names of the sizes and
 * the loops stay apart; NULL (isl's own names) otherwise. */
static isl_id_list *iterators_of(const tc_poly *p, isl_schedule *s)
{
	isl_id_list *list;
	int depth = 0, k;
	if (!p->params || p->free || !size_like_iterator(p) ||
		isl_schedule_foreach_schedule_node_top_down(s, count_members, &depth) < 0)
		return NULL;
	list = isl_id_list_alloc(p->ctx, depth + 1);
	for (k = 0; list && k <= depth; k++) {
		char name[48];
		int j = 0, i;
		snprintf(name, sizeof(name), "c%d", k);
		for (i = 0; i < p->f->nparams; i++)
			if (!strcmp(name, p->f->params[i].name)) {
				snprintf(name, sizeof(name), "c%d_%d", k, j++);
				i = -1; /* every size again */
			}
		list = isl_id_list_add(list, isl_id_alloc(p->ctx, name, NULL));
	}
	return list;
}

tc_stat tc_poly_ast(__tc_keep tc_poly *p, __tc_keep tc_diags *d)
{
	isl_id_list *iters;
	isl_ast_build *build;
	isl_schedule *s;
	convert_ctx cc = {p, NULL, NULL, NULL, NULL};
	ast_ctx ac = {p, NULL, NULL};
	int i;
	tc_poly_budget(p);
	cc.pts = tc_calloc((size_t)p->nstmts + 1, sizeof(*cc.pts));
	if (!cc.pts) {
		tc_poly_budget_done(p);
		tc_poly_isl_failed(p->ctx, d, "generate the AST");
		return TC_ERR;
	}
	if (p->params) { /* code generation needs sizes: the points serve it only */
		cc.pbuild = isl_ast_build_from_context(tc_poly_ast_context(p));
		cc.restrict_to = isl_union_set_empty(isl_space_params_alloc(p->ctx, 0));
		cc.converted = isl_union_set_empty(isl_space_params_alloc(p->ctx, 0));
		s = tile_loops_only(p, &cc);
	} else {
		s = isl_schedule_copy(p->schedule);
	}
	ac.pts = cc.pts;
	build = isl_ast_build_from_context(tc_poly_ast_context(p));
	if ((iters = iterators_of(p, s)))
		build = isl_ast_build_set_iterators(build, iters);
	build = isl_ast_build_set_at_each_domain(build, at_domain, &ac);
	isl_ast_node_free(p->ast);
	p->ast = isl_ast_build_node_from_schedule(build, s);
	isl_ast_build_free(build);
	isl_ast_build_free(cc.pbuild);
	isl_union_set_free(cc.restrict_to);
	isl_union_set_free(cc.converted);
	for (i = 0; i < p->nstmts; i++)
		points_free(cc.pts[i]);
	tc_free(cc.pts);
	tc_poly_budget_done(p);
	if (!p->ast) {
		tc_poly_isl_failed(p->ctx, d, "generate the AST");
		return TC_ERR;
	}
	return TC_OK;
}

/* ---- printing ---- */

/* Print the point loops of inst (a tile's origin) with prn and options,
 * each piece headed by a line of the comment string comment saying which
 * dimensions are short in it. */
static isl_printer *print_points(isl_printer *prn, const tc_poly_inst *inst,
	isl_ast_print_options *options, const char *comment)
{
	const tc_poly_points *pt = inst->points;
	int v, k;
	for (k = 0; k <= 1 << TC_POLY_MAX_PART; k++) {
		isl_ast_node *a = k < 1 << TC_POLY_MAX_PART ? pt->piece[k] : pt->partial;
		int j, any = 0;
		if (!a)
			continue;
		prn = isl_printer_start_line(prn);
		prn = isl_printer_print_str(prn, comment);
		prn = isl_printer_print_str(prn, " its tile from tc_o0 ... (the arguments above)");
		for (j = 0; k < 1 << TC_POLY_MAX_PART && j < pt->npart; j++) {
			char buf[64];
			snprintf(buf, sizeof(buf), "%s dimension %d %s %lld", any++ ? "," : ":",
				pt->part[j], k & 1 << j ? "short of" : "whole,", (long long)pt->size[pt->part[j]]);
			prn = isl_printer_print_str(prn, buf);
		}
		for (v = 0; v < pt->n; v++)
			if (!pt->npart && pt->may_partial[v] == 1) {
				char buf[64];
				snprintf(buf, sizeof(buf), "%s dimension %d %s %lld", any++ ? "," : ":",
					v, k ? "maybe short of" : "whole,", (long long)pt->size[v]);
				prn = isl_printer_print_str(prn, buf);
			}
		for (v = 0; v < pt->n; v++)
			if (pt->extent[v] && (k == 1 << TC_POLY_MAX_PART || pt->may_partial[v] == 2)) {
				prn = isl_printer_print_str(prn, ", ");
				prn = isl_printer_print_str(prn, isl_id_get_name(pt->extent[v]));
				prn = isl_printer_print_str(prn, " = ");
				prn = isl_printer_print_ast_expr(prn, pt->end[v]);
				prn = isl_printer_print_str(prn, " - ");
				prn = isl_printer_print_str(prn, isl_id_get_name(pt->origin[v]));
			}
		prn = isl_printer_end_line(prn);
		prn = isl_printer_indent(prn, 2);
		prn = isl_ast_node_print(a, prn, isl_ast_print_options_copy(options));
		prn = isl_printer_indent(prn, -2);
	}
	return prn;
}

/* isl's print_user callback for tc_poly_ast_str: the statement's call and,
 * for a tile's origin, its point loops below it. */
static isl_printer *print_user(isl_printer *prn, isl_ast_print_options *options,
	isl_ast_node *node, void *user)
{
	const tc_poly_inst *inst = tc_poly_node_inst(node);
	isl_ast_expr *call = isl_ast_node_user_get_expr(node);
	int i;
	(void)user;
	prn = isl_printer_start_line(prn);
	if (inst && inst->stmt) { /* the index expressions: a point's add the origin */
		prn = isl_printer_print_str(prn, inst->stmt->name);
		prn = isl_printer_print_str(prn, "(");
		for (i = 0; i < inst->n; i++) {
			prn = isl_printer_print_str(prn, i ? ", " : "");
			prn = isl_printer_print_ast_expr(prn, inst->index[i]);
		}
		prn = isl_printer_print_str(prn, ")");
	} else {
		prn = isl_printer_print_ast_expr(prn, call);
	}
	prn = isl_printer_print_str(prn, ";");
	prn = isl_printer_end_line(prn);
	isl_ast_expr_free(call);
	if (inst && inst->points)
		prn = print_points(prn, inst, options, "//");
	isl_ast_print_options_free(options);
	return prn;
}

__tc_give char *tc_poly_ast_str(__tc_keep const tc_poly *p)
{
	isl_printer *prn = isl_printer_to_str(p->ctx);
	isl_ast_print_options *opts = isl_ast_print_options_alloc(p->ctx);
	char *s, *r;
	opts = isl_ast_print_options_set_print_user(opts, print_user, NULL);
	prn = isl_printer_set_output_format(prn, ISL_FORMAT_C);
	prn = isl_ast_node_print(p->ast, prn, opts);
	s = isl_printer_get_str(prn);
	isl_printer_free(prn);
	r = s ? tc_strdup(s) : NULL;
	free(s);
	return r;
}
