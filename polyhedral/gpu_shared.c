/* Shared-memory promotion of GPU kernels: part of the gpu pass (gpu.h).
 *
 * A kernel whose outermost band has reduced members below the mapped
 * ones (matmul's r_k; a convolution's channels and window) makes every
 * thread of a block read, in turn, elements that other threads of the
 * block read too (matmul: a row of A is read by each thread of the row).
 * Such a nest is mapped as a tiled band instead of by gpu.c's filters
 * alone:
 *   - member j mapped to dimension d (T threads, G blocks), values from
 *     lo: the tile floor((v - lo) / T), run by block b where tile mod G
 *     = b (tile = b when the blocks cover the tiles), and the point (v -
 *     lo) mod T, run by thread t = point (a filter on tc_t<d>);
 *   - a reduced member, values from lo: the tile floor((v - lo) / R) and
 *     the point (v - lo) mod R, R the shared_tile option (auto: 32), or
 *     the member's count where smaller;
 *   - a coincident member beyond the three mapped: whole, in the tile
 *     band.
 * The tile band's loops depend on the block only, so every thread of the
 * block runs them; below them, in order: one copy statement per promoted
 * tensor (the block's threads copy the tensor's box for this step of the
 * tile loops, each a strided share of its elements), a barrier, the point
 * band under the thread filter (the statements, reading the copies), and
 * a barrier before the next step overwrites the copies.  The copies and
 * barriers are statements of the schedule, extension nodes of isl, whose
 * instances are the tile loops' values: the AST generator puts no guard
 * of the thread indices around them, so no barrier is ever skipped by
 * some threads (the emulator checks that: barrier divergence).
 *
 * Which tensors: those the nest reads and does not write, each statement
 * reading one element of it per instance (two reads of the same element
 * are one), whose elements read in one step of the tile loops lie in a
 * box of fixed size (fixed_box: a per-step offset, constant sizes), read
 * at least twice each on average (the nest's reads over its steps, over
 * the box's elements, counted over bounding boxes; shared=on: once), all
 * boxes within the target's shared memory (shared_bytes, 48 KiB), the
 * most reused first.  A box may reach past the tensor (a partial tile, or
 * a footprint that pad's domain restriction clips at the tensor's border,
 * held by the unclipped box: try_piece): the copy skips those elements,
 * which no statement reads.
 *
 * What it records for the code generator (poly.h): each copy
 * (p->gpu_copies: the tensor, the box's sizes, its origin as a function
 * of the copy statement's instance) and each statement's read of a copy
 * (p->gpu_locals: the element of the box as a function of the
 * statement's instance: the read's subscripts minus the origin of the
 * step that runs it).  polyhedral/ast.c turns both into AST expressions,
 * codegen/cuda.c prints them. */
#include "gpu.h"
#include "band.h"

#include <isl/aff.h>
#include <isl/id.h>
#include <isl/ilp.h>
#include <isl/map.h>
#include <isl/schedule_node.h>
#include <isl/set.h>
#include <isl/union_map.h>
#include <isl/union_set.h>
#include <isl/val.h>

#include <stdio.h>
#include <string.h>

#define SHARED_TILE 32         /* a reduced member's tile (shared_tile auto) */
#define SHARED_BYTES 49152     /* static shared memory of a block, at most */

/* ---- what gpu.c uses too ---- */

int tc_poly_gpu_member_range(__tc_keep isl_schedule_node *node, int j, __tc_keep isl_union_set *on,
	int64_t *lo, int64_t *hi)
{
	isl_multi_union_pw_aff *mupa = isl_schedule_node_band_get_partial_schedule(node);
	isl_union_pw_aff *upa = isl_multi_union_pw_aff_get_union_pw_aff(mupa, j);
	isl_union_set *range;
	isl_set *values;
	isl_val *vlo, *vhi;
	int ok;
	isl_multi_union_pw_aff_free(mupa);
	upa = isl_union_pw_aff_intersect_domain_union_set(upa, isl_schedule_node_get_domain(node));
	if (on)
		upa = isl_union_pw_aff_intersect_domain_union_set(upa, isl_union_set_copy(on));
	range = isl_union_map_range(isl_union_map_from_union_pw_aff(upa));
	values = range ? isl_set_from_union_set(range) : NULL;
	vlo = values ? isl_set_dim_min_val(isl_set_copy(values), 0) : NULL;
	vhi = values ? isl_set_dim_max_val(values, 0) : NULL;
	ok = vlo && vhi && isl_val_is_int(vlo) && isl_val_is_int(vhi);
	if (ok) {
		*lo = isl_val_get_num_si(vlo);
		*hi = isl_val_get_num_si(vhi);
	}
	isl_val_free(vlo);
	isl_val_free(vhi);
	return ok;
}

isl_set *tc_poly_gpu_kernel_context(__tc_keep isl_ctx *ctx, int n,
	__tc_keep const tc_poly_gpu_kernel *k)
{
	isl_space *space = isl_space_params_alloc(ctx, 2 * n);
	isl_set *s;
	int d;
	for (d = 0; d < n; d++) {
		space = isl_space_set_dim_id(space, isl_dim_param, (unsigned)(2 * d),
			isl_id_alloc(ctx, TC_POLY_GPU_BLOCK[d], NULL));
		space = isl_space_set_dim_id(space, isl_dim_param, (unsigned)(2 * d + 1),
			isl_id_alloc(ctx, TC_POLY_GPU_THREAD[d], NULL));
	}
	s = isl_set_universe(space);
	for (d = 0; d < n; d++) {
		s = isl_set_lower_bound_si(s, isl_dim_param, (unsigned)(2 * d), 0);
		s = isl_set_upper_bound_si(s, isl_dim_param, (unsigned)(2 * d), (long)k->grid[d] - 1);
		s = isl_set_lower_bound_si(s, isl_dim_param, (unsigned)(2 * d + 1), 0);
		s = isl_set_upper_bound_si(s, isl_dim_param, (unsigned)(2 * d + 1), (long)k->block[d] - 1);
	}
	return s;
}

/* ---- the copies ---- */

/* A tensor the block may copy. */
typedef struct cand {
	isl_union_map *reads;  /* the block's instances -> its elements read */
	isl_multi_aff *offset; /* tile values -> the box's origin */
	int64_t size[TC_MAX_RANK];
	int ndims;
	double bytes, reuse;
	int chosen;
} cand;

/* One promotion attempt. */
typedef struct promo {
	tc_poly *p;
	isl_union_set *all;          /* the nest's instances (borrowed) */
	isl_union_set *dom;          /* the instances one block runs */
	isl_union_map *prefix;       /* ... -> their tile values */
	double steps;                /* the tile loops' values, all blocks */
	cand *c;                     /* per tensor */
} promo;

/* member j of mupa over dom, less lo. */
static isl_union_pw_aff *from_lo(isl_multi_union_pw_aff *mupa, int j, isl_union_set *dom,
	int64_t lo)
{
	isl_union_pw_aff *v = isl_multi_union_pw_aff_get_union_pw_aff(mupa, j);
	v = isl_union_pw_aff_intersect_domain_union_set(v, isl_union_set_copy(dom));
	return isl_union_pw_aff_sub(v, isl_union_pw_aff_val_on_domain(isl_union_set_copy(dom),
		isl_val_int_from_si(isl_union_set_get_ctx(dom), lo)));
}

/* The instances of dom where v equals the parameter named param. */
static isl_union_set *equals_param(isl_union_pw_aff *v, isl_union_set *dom, const char *param)
{
	isl_ctx *ctx = isl_union_set_get_ctx(dom);
	isl_union_pw_aff *q = isl_union_pw_aff_param_on_domain_id(isl_union_set_copy(dom),
		isl_id_alloc(ctx, param, NULL));
	return isl_union_pw_aff_zero_union_set(isl_union_pw_aff_sub(v, q));
}

static isl_stat single_valued(isl_map *m, void *user)
{
	int *ok = user;
	if (isl_map_is_single_valued(m) != isl_bool_true)
		*ok = 0;
	isl_map_free(m);
	return isl_stat_ok;
}

/* user: {the model, NULL}; the second becomes the statement of read
 * access m when that statement's update has a guard (ir/ir.h): its domain
 * is restricted by pad's bounds tests, which clip its footprint. */
static isl_stat guarded_reader(isl_map *m, void *user)
{
	const void **ctx = user; /* the model, then the result */
	const tc_poly_stmt *st = tc_poly_find_stmt(ctx[0], isl_map_get_tuple_name(m, isl_dim_in));
	if (st && st->ir->guard && st->kind != TC_POLY_INIT)
		ctx[1] = st;
	isl_map_free(m);
	return isl_stat_ok;
}

/* The piece of a pw_aff of one piece. */
static isl_stat take_piece(isl_set *set, isl_aff *aff, void *user)
{
	isl_aff **out = user;
	isl_set_free(set);
	isl_aff_free(*out);
	*out = aff;
	return isl_stat_ok;
}

/* A piece of pa whose affine function is at most pa on all of pa's domain
 * (into *out, or left NULL).  Such a lower bound stands for the least
 * element where pa has several pieces: the footprint of a statement whose
 * domain pad's bounds tests restrict (ir/lower.c) is clipped at the
 * tensor's border, max(0, h - 1) say, and h - 1 bounds it; the box then
 * reaches past the tensor there, and the copy skips those elements. */
typedef struct lower_bound {
	isl_pw_aff *pa;
	isl_aff *found;
	int failed;
} lower_bound;

static isl_stat try_piece(isl_set *set, isl_aff *aff, void *user)
{
	lower_bound *lb = user;
	isl_set *dom = isl_pw_aff_domain(isl_pw_aff_copy(lb->pa));
	isl_pw_aff *a = isl_pw_aff_intersect_domain(isl_pw_aff_from_aff(isl_aff_copy(aff)),
		isl_set_copy(dom));
	isl_set *le = isl_pw_aff_le_set(a, isl_pw_aff_copy(lb->pa));
	isl_bool all = le && dom ? isl_set_is_subset(dom, le) : isl_bool_error;
	isl_set_free(set);
	isl_set_free(le);
	isl_set_free(dom);
	if (all < 0)
		lb->failed = 1;
	if (all == isl_bool_true && !lb->found)
		lb->found = aff;
	else
		isl_aff_free(aff);
	return all < 0 ? isl_stat_error : isl_stat_ok;
}

/* The box that holds f's range for each value of its domain: the least
 * element in each dimension (*offset: one affine function of the domain
 * values, or, with clipped (a guarded statement reads it), one that bounds
 * it from below: try_piece; or no box) and the sizes (size[0 .. *ndims):
 * the greatest distance from it, plus one).  1 a box, 0 none of fixed size, -1 on an
 * isl error.  (isl_map_get_range_simple_fixed_box_hull does this, but the
 * isl inside libLLVM does not export it.) */
static int fixed_box(isl_map *f, int clipped, isl_multi_aff **offset, int64_t *size, int *ndims)
{
	isl_ctx *ctx = isl_map_get_ctx(f);
	isl_size n = isl_map_dim(f, isl_dim_out);
	isl_aff_list *list;
	isl_multi_aff *ma;
	isl_set *delta;
	int k, ok = 1;
	*offset = NULL;
	if (n < 1 || n > TC_MAX_RANK)
		return n < 0 ? -1 : 0;
	*ndims = (int)n;
	list = isl_aff_list_alloc(ctx, (int)n);
	for (k = 0; ok > 0 && k < n; k++) {
		isl_pw_aff *pa = isl_pw_aff_coalesce(isl_map_dim_min(isl_map_copy(f), k));
		isl_aff *a = NULL;
		lower_bound lb = {pa, NULL, 0};
		if (!pa || isl_pw_aff_n_piece(pa) < 1 || isl_pw_aff_involves_nan(pa) != isl_bool_false)
			ok = pa ? 0 : -1;
		else if (isl_pw_aff_n_piece(pa) == 1) {
			if (isl_pw_aff_foreach_piece(pa, take_piece, &a) < 0 || !a)
				ok = -1;
		} else if (!clipped)
			ok = 0;
		else if (isl_pw_aff_foreach_piece(pa, try_piece, &lb) < 0 || lb.failed)
			ok = -1;
		else if (!(a = lb.found))
			ok = 0;
		isl_pw_aff_free(pa);
		if (ok > 0)
			list = isl_aff_list_add(list, a);
		else
			isl_aff_free(a);
	}
	if (ok <= 0) {
		isl_aff_list_free(list);
		return ok;
	}
	ma = isl_multi_aff_from_aff_list(isl_map_get_space(f), list);
	delta = isl_map_range(isl_map_sum(isl_map_copy(f),
		isl_map_neg(isl_map_from_multi_aff(isl_multi_aff_copy(ma)))));
	for (k = 0; ok > 0 && k < n; k++) {
		isl_val *lo = isl_set_dim_min_val(isl_set_copy(delta), k);
		isl_val *hi = isl_set_dim_max_val(isl_set_copy(delta), k);
		if (!lo || !hi)
			ok = -1;
		else if (!isl_val_is_int(lo) || !isl_val_is_int(hi) || isl_val_is_zero(lo) != isl_bool_true)
			ok = 0;
		else
			size[k] = isl_val_get_num_si(hi) + 1;
		isl_val_free(lo);
		isl_val_free(hi);
	}
	isl_set_free(delta);
	if (ok > 0 && ma)
		*offset = ma;
	else
		isl_multi_aff_free(ma);
	return ok > 0 && !ma ? -1 : ok;
}

/* Whether tensor t may be copied for the block: c->... filled.  0 no,
 * 1 yes, -1 on an isl error. */
static int consider(promo *pr, int t, cand *c)
{
	tc_poly *p = pr->p;
	isl_union_map *w, *foot, *all;
	isl_union_set *readers;
	isl_map *f;
	int ok = 1, k, empty;
	double elems = 1, reads;
	const void *guarded[2] = {p, NULL}; /* the model; a guarded reader */
	w = tc_poly_tensor_accesses(p, p->writes, t, pr->dom);
	empty = w ? isl_union_map_is_empty(w) : isl_bool_error;
	isl_union_map_free(w);
	if (empty != isl_bool_true)
		return empty < 0 ? -1 : 0;
	if (!(c->reads = tc_poly_tensor_accesses(p, p->reads, t, pr->dom)))
		return -1;
	empty = isl_union_map_is_empty(c->reads);
	if (empty != isl_bool_false)
		return empty < 0 ? -1 : 0;
	if (isl_union_map_foreach_map(c->reads, single_valued, &ok) < 0)
		return -1;
	if (!ok)
		return 0;
	foot = isl_union_map_apply_range(isl_union_map_reverse(isl_union_map_copy(pr->prefix)),
		isl_union_map_copy(c->reads));
	if (!foot)
		return -1;
	if (isl_union_map_n_map(foot) != 1) {
		isl_union_map_free(foot);
		return 0;
	}
	f = isl_map_from_union_map(foot);
	if (isl_union_map_foreach_map(c->reads, guarded_reader, guarded) < 0) {
		isl_map_free(f);
		return -1;
	}
	ok = fixed_box(f, guarded[1] != NULL, &c->offset, c->size, &c->ndims);
	isl_map_free(f);
	if (ok <= 0)
		return ok;
	for (k = 0; k < c->ndims; k++)
		elems *= (double)c->size[k];
	if (!c->offset)
		return -1;
	/* the reads of a step, on average over the steps of every block */
	all = tc_poly_tensor_accesses(p, p->reads, t, pr->all);
	if (!all)
		return -1;
	readers = isl_union_map_domain(all);
	reads = tc_poly_box_instances(p, readers, 0);
	isl_union_set_free(readers);
	c->bytes = elems * tc_dtype_size(p->f->tensors[t].dtype);
	c->reuse = pr->steps > 0 ? reads / pr->steps / elems : 0;
	return 1;
}

/* The extension statement named name whose instances are the tile values
 * of the block (the range of pr->prefix), as a tree to graft. */
static isl_schedule_node *extension(promo *pr, const char *name)
{
	isl_union_set *steps = isl_union_map_range(isl_union_map_copy(pr->prefix));
	isl_set *s = steps ? isl_set_from_union_set(steps) : NULL;
	isl_map *m;
	if (!s)
		return NULL;
	m = isl_map_identity(isl_space_map_from_set(isl_set_get_space(s)));
	m = isl_map_intersect_domain(m, s);
	m = isl_map_set_tuple_name(m, isl_dim_out, name);
	return m ? isl_schedule_node_from_extension(isl_union_map_from_map(m)) : NULL;
}

/* Record the copy of tensor t (its candidate c) named name, and each
 * statement's read of it: TC_OK, TC_ERR out of memory or on an isl
 * error. */
static isl_stat add_local(isl_map *m, void *user);

typedef struct local_ctx {
	promo *pr;
	isl_multi_union_pw_aff *tile;
	isl_pw_multi_aff *offset; /* tile values -> the origin */
	int copy;
	int failed;
} local_ctx;

static tc_stat record(promo *pr, isl_multi_union_pw_aff *tile, int kernel, int t, cand *c,
	const char *name)
{
	tc_poly *p = pr->p;
	tc_poly_gpu_copy *grown = tc_realloc(p->gpu_copies,
		(size_t)(p->ngpu_copies + 1) * sizeof(*grown)), *cp;
	local_ctx lc;
	if (!grown)
		return TC_ERR;
	p->gpu_copies = grown;
	cp = &p->gpu_copies[p->ngpu_copies];
	memset(cp, 0, sizeof(*cp));
	snprintf(cp->stmt, sizeof(cp->stmt), "%s", name);
	cp->kernel = kernel;
	cp->tensor = t;
	cp->ndims = c->ndims;
	memcpy(cp->size, c->size, sizeof(cp->size));
	cp->offset = isl_pw_multi_aff_from_multi_aff(isl_multi_aff_set_tuple_name(
		isl_multi_aff_copy(c->offset), isl_dim_in, name));
	if (!cp->offset)
		return TC_ERR;
	lc.pr = pr;
	lc.tile = tile;
	lc.offset = isl_pw_multi_aff_from_multi_aff(isl_multi_aff_copy(c->offset));
	lc.copy = p->ngpu_copies++;
	lc.failed = 0;
	if (isl_union_map_foreach_map(c->reads, add_local, &lc) < 0)
		lc.failed = 1;
	isl_pw_multi_aff_free(lc.offset);
	return lc.failed ? TC_ERR : TC_OK;
}

/* A statement's read m (its instances -> the tensor's elements, single
 * valued) of the copy lc->copy: the element of the box, recorded. */
static isl_stat add_local(isl_map *m, void *user)
{
	local_ctx *lc = user;
	tc_poly *p = lc->pr->p;
	const tc_poly_stmt *st = tc_poly_find_stmt(p, isl_map_get_tuple_name(m, isl_dim_in));
	isl_union_pw_multi_aff *upma;
	isl_pw_multi_aff *at, *origin, *index;
	isl_space *dsp, *rsp;
	tc_poly_gpu_local *grown;
	if (!st) {
		isl_map_free(m);
		lc->failed = 1;
		return isl_stat_error;
	}
	upma = isl_union_pw_multi_aff_from_multi_union_pw_aff(
		isl_multi_union_pw_aff_copy(lc->tile));
	dsp = isl_space_domain(isl_map_get_space(m));
	rsp = isl_space_align_params(isl_multi_union_pw_aff_get_space(lc->tile), isl_space_copy(dsp));
	dsp = isl_space_align_params(dsp, isl_space_copy(rsp));
	at = isl_union_pw_multi_aff_extract_pw_multi_aff(upma,
		isl_space_map_from_domain_and_range(dsp, rsp));
	isl_union_pw_multi_aff_free(upma);
	origin = isl_pw_multi_aff_pullback_pw_multi_aff(isl_pw_multi_aff_copy(lc->offset), at);
	index = isl_pw_multi_aff_sub(isl_pw_multi_aff_from_map(m), origin);
	grown = index ? tc_realloc(p->gpu_locals, (size_t)(p->ngpu_locals + 1) * sizeof(*grown))
		: NULL;
	if (!grown) {
		isl_pw_multi_aff_free(index);
		lc->failed = 1;
		return isl_stat_error;
	}
	p->gpu_locals = grown;
	grown[p->ngpu_locals].stmt = (int)(st - p->stmts);
	grown[p->ngpu_locals].copy = lc->copy;
	grown[p->ngpu_locals].index = index;
	p->ngpu_locals++;
	return isl_stat_ok;
}

/* Free pr's candidates (ntensors of them). */
static void cands_free(cand *c, int n)
{
	int i;
	for (i = 0; c && i < n; i++) {
		isl_union_map_free(c[i].reads);
		isl_multi_aff_free(c[i].offset);
	}
	tc_free(c);
}

isl_schedule_node *tc_poly_gpu_promote(__tc_take isl_schedule_node *node, __tc_keep tc_poly *p,
	__tc_keep tc_poly_gpu_kernel *k, int lead, const int *member, const int64_t *lo,
	const int *wraps, int *done)
{
	isl_ctx *ctx = isl_schedule_node_get_ctx(node);
	int n = k->nmapped, nt = p->f->ntensors, j, d, t, any = 0, depth, ok = 1;
	isl_size nm;
	int64_t rlo[64], tsize[64], budget;
	isl_multi_union_pw_aff *mupa = NULL, *tile = NULL, *point = NULL;
	isl_union_set *dom = NULL, *bfilter = NULL, *tfilter = NULL;
	promo pr;
	double used = 0;
	memset(&pr, 0, sizeof(pr));
	*done = 0;
	if (!p->opts.shared || n < 1 || isl_schedule_node_get_type(node) != isl_schedule_node_band ||
		isl_schedule_node_band_get_permutable(node) != isl_bool_true)
		return node;
	nm = isl_schedule_node_band_n_member(node);
	if (nm <= lead || nm > 64)
		return node;
	for (j = lead; j < nm; j++) {
		int64_t hi, r = p->opts.shared_tile > 0 ? p->opts.shared_tile : SHARED_TILE;
		if (!tc_poly_gpu_member_range(node, j, NULL, &rlo[j], &hi))
			return node;
		tsize[j] = hi - rlo[j] + 1 < r ? hi - rlo[j] + 1 : r;
	}
	/* the tile and point schedules, the block's and the thread's filters */
	mupa = isl_schedule_node_band_get_partial_schedule(node);
	dom = isl_schedule_node_get_domain(node);
	tile = isl_multi_union_pw_aff_copy(mupa);
	point = isl_multi_union_pw_aff_copy(mupa);
	for (j = lead - n; j < nm; j++) {
		int64_t size = 0, at = 0;
		isl_union_pw_aff *v, *tv, *pv;
		for (d = 0; d < n; d++)
			if (member[d] == j) {
				size = k->block[d];
				at = lo[d];
				break;
			}
		if (j >= lead) {
			size = tsize[j];
			at = rlo[j];
		}
		v = from_lo(mupa, j, dom, at);
		tv = isl_union_pw_aff_floor(isl_union_pw_aff_scale_down_val(isl_union_pw_aff_copy(v),
			isl_val_int_from_si(ctx, size)));
		pv = isl_union_pw_aff_mod_val(v, isl_val_int_from_si(ctx, size));
		if (d < n) {
			isl_union_pw_aff *bv = isl_union_pw_aff_copy(tv);
			isl_union_set *fb, *ft;
			if (wraps[d])
				bv = isl_union_pw_aff_mod_val(bv, isl_val_int_from_si(ctx, k->grid[d]));
			fb = equals_param(bv, dom, TC_POLY_GPU_BLOCK[d]);
			ft = equals_param(isl_union_pw_aff_copy(pv), dom, TC_POLY_GPU_THREAD[d]);
			bfilter = bfilter ? isl_union_set_intersect(bfilter, fb) : fb;
			tfilter = tfilter ? isl_union_set_intersect(tfilter, ft) : ft;
		}
		tile = isl_multi_union_pw_aff_set_union_pw_aff(tile, j, tv);
		point = isl_multi_union_pw_aff_set_union_pw_aff(point, j, pv);
	}
	point = isl_multi_union_pw_aff_drop_dims(point, isl_dim_set, 0, (unsigned)(lead - n));
	bfilter = isl_union_set_intersect_params(bfilter,
		tc_poly_gpu_kernel_context(ctx, n, k));
	/* what the block reads in one step */
	pr.p = p;
	pr.all = dom;
	{
		isl_union_set *steps = isl_union_map_range(isl_union_map_intersect_domain(
			isl_union_map_from_multi_union_pw_aff(isl_multi_union_pw_aff_copy(tile)),
			isl_union_set_copy(dom)));
		pr.steps = tc_poly_box_instances(p, steps, 0);
		isl_union_set_free(steps);
	}
	pr.dom = isl_union_set_intersect(isl_union_set_copy(dom), isl_union_set_copy(bfilter));
	pr.prefix = isl_union_map_intersect_domain(isl_union_map_from_multi_union_pw_aff(
		isl_multi_union_pw_aff_copy(tile)), isl_union_set_copy(pr.dom));
	pr.c = tc_calloc((size_t)nt + 1, sizeof(*pr.c));
	if (!pr.dom || !pr.prefix || !pr.c || !point || !tfilter || !bfilter)
		goto error;
	for (t = 0; t < nt; t++) {
		int r = consider(&pr, t, &pr.c[t]);
		if (r < 0)
			goto error;
		pr.c[t].chosen = r > 0 && pr.c[t].reuse >= (p->opts.shared == 2 ? 2.0 : 1.0);
	}
	/* the most reused first, within the budget */
	budget = p->target->shared_bytes > 0 && p->target->shared_bytes < SHARED_BYTES
		? p->target->shared_bytes : SHARED_BYTES;
	for (;;) {
		int best = -1;
		for (t = 0; t < nt; t++)
			if (pr.c[t].chosen == 1 && (best < 0 || pr.c[t].reuse > pr.c[best].reuse))
				best = t;
		if (best < 0)
			break;
		pr.c[best].chosen = used + pr.c[best].bytes <= (double)budget ? 2 : 0;
		if (pr.c[best].chosen)
			used += pr.c[best].bytes, any = 1;
	}
	if (!any) /* node unchanged */
		goto done;
	/* the tree: block filter, tile band, copies, barrier, thread filter,
	 * point band, the band's children, barrier */
	node = isl_schedule_node_delete(node);
	node = isl_schedule_node_insert_partial_schedule(node, point);
	node = isl_schedule_node_insert_filter(node, tfilter);
	node = isl_schedule_node_insert_partial_schedule(node, isl_multi_union_pw_aff_copy(tile));
	node = isl_schedule_node_insert_filter(node, bfilter);
	point = NULL;
	tfilter = bfilter = NULL;
	depth = node ? isl_schedule_node_get_tree_depth(node) : -1;
	node = isl_schedule_node_child(isl_schedule_node_child(node, 0), 0);
	for (t = 0; node && t < nt; t++) {
		char name[40];
		if (pr.c[t].chosen != 2)
			continue;
		snprintf(name, sizeof(name), "%s%d_%d", TC_POLY_GPU_COPY, k->index, t);
		if (record(&pr, tile, k->index, t, &pr.c[t], name) < 0)
			ok = 0;
		node = isl_schedule_node_graft_before(node, extension(&pr, name));
	}
	if (node) {
		char name[40];
		snprintf(name, sizeof(name), "%s%d_0", TC_POLY_GPU_SYNC, k->index);
		node = isl_schedule_node_graft_before(node, extension(&pr, name));
		snprintf(name, sizeof(name), "%s%d_1", TC_POLY_GPU_SYNC, k->index);
		node = isl_schedule_node_graft_after(node, extension(&pr, name));
	}
	if (node && depth >= 0)
		node = isl_schedule_node_ancestor(node, isl_schedule_node_get_tree_depth(node) - depth);
	*done = ok;
done:
	isl_multi_union_pw_aff_free(mupa);
	isl_multi_union_pw_aff_free(tile);
	isl_multi_union_pw_aff_free(point);
	isl_union_set_free(dom);
	isl_union_set_free(bfilter);
	isl_union_set_free(tfilter);
	isl_union_set_free(pr.dom);
	isl_union_map_free(pr.prefix);
	cands_free(pr.c, nt);
	return ok ? node : isl_schedule_node_free(node);
error:
	ok = 0;
	goto done;
}
