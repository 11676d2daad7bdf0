/* GPU mapping: the gpu pass (tc_poly_pass_gpu).
 *
 * Each top-level nest of the schedule (the first node below the root that
 * is no sequence or set: the children of sequences and sets of sequences
 * and sets, or the whole tree) becomes one kernel, launched in the order
 * of the nests, under a TC_POLY_MARK_GPU_KERNEL mark carrying its launch
 * configuration (tc_poly_gpu_kernel).  In the nest's outermost band, the
 * coincident members (moved first where the band is permutable) are
 * mapped, the innermost three of them: the innermost to x (the order pass
 * put the member walking the stride-1 dimension of most accesses
 * innermost, so a warp's threads touch consecutive elements: coalescing),
 * the next to y, then z.  Member j with values from lo, mapped to
 * dimension d with T threads per block and G blocks, runs instance i on
 * block b and thread t of d where
 *
 *     (value_j(i) - lo) mod (T G) = T b + t,
 *
 * a filter on the parameters tc_b<d> and tc_t<d> (0 <= b < G,
 * 0 <= t < T, a context node), from which isl's AST generator makes
 * grid-stride loops (or, where T G covers the values, one guarded
 * iteration).  Every block size and grid is valid: a grid capped below
 * the values' count makes each block take several tiles in turn.  The
 * mapped members carry no dependence (coincident, outermost), so threads
 * never share one; the rest of the nest runs in each thread in order.
 * A nest with no coincident outer member runs on one thread, unless it
 * is a reduction mapped to a block (below).
 *
 * Reductions on a block (map_reduce, the reduce option): a nest that runs
 * one reduction that may combine in any order (sums, max, min; not
 * products) with a long reduced loop (32 values or more: a warp's worth)
 * maps the reduced loop to the threads of x: a TC_POLY_MARK_GPU_REDUCE
 * mark above the reduced band says which loop the threads stride over and
 * how many threads share it, and the code generator prints the
 * per-thread accumulator and the combine there (poly.h,
 * tc_poly_gpu_reduce).  With few rows (the coincident members: fewer
 * than 4096 values in all, too few threads to fill a GPU, whose tens of
 * multiprocessors each keep 1000 and more threads in flight) the rows
 * map to blocks only (one block per row, filters on tc_b<d> alone); with
 * more (the reduce_map option), a warp per row: the innermost row member
 * to blocks of x and the threads of y (8 rows a block), the threads of x
 * the warp's 32 lanes, combined by shuffles alone, where the strided
 * loop walks a row's own operand contiguously (warp_walk_pays; else a
 * thread per row, as column sums' reads are coalesced already).  The
 * reduction's init runs on thread 0 of x, as does the final update of
 * the element.
 *
 * Block sizes: the block option, else block_threads of the target (256)
 * shared out from x: x gets the values' count rounded up to a power of
 * two, at most 32 when y or z is mapped (at most block_threads alone), y
 * what x leaves, z the rest (at most 64).  The grid: enough blocks for
 * every value, capped by the grid option and the device's limits.
 *
 * Shared-memory copies (gpu_shared.c, through gpu.h): a nest that is no
 * reduction on threads and whose band has reduced members below the
 * mapped ones is mapped there instead, as a tiled band whose blocks copy
 * what they reuse into shared memory (map_nest hands it over once the
 * block and grid are chosen; it keeps these filters when nothing pays).
 *
 * Uses the model (poly.h) and the band helpers (band.h); must not know the
 * other passes or the order they run in (schedule.c), nor CUDA. */
#include "band.h"
#include "gpu.h"
#include "passes.h"

#include <isl/aff.h>
#include <isl/id.h>
#include <isl/ilp.h>
#include <isl/schedule_node.h>
#include <isl/set.h>
#include <isl/union_map.h>
#include <isl/union_set.h>
#include <isl/val.h>

#include <string.h>


/* The state of one run of the pass. */
typedef struct gpu_map {
	tc_poly *p;
	int nkernels; /* kernels marked so far */
} gpu_map;

static void record_free(void *user)
{
	tc_free(user);
}

/* node with a mark named name above it carrying record (taken, freed with
 * the mark's id). */
static isl_schedule_node *mark_with(isl_schedule_node *node, const char *name, void *record)
{
	isl_id *id = isl_id_alloc(isl_schedule_node_get_ctx(node), name, record);
	id = isl_id_set_free_user(id, record_free);
	if (!id)
		return isl_schedule_node_free(node);
	return isl_schedule_node_insert_mark(node, id);
}

/* node with a kernel mark above it carrying k (taken). */
static isl_schedule_node *mark_kernel(isl_schedule_node *node, tc_poly_gpu_kernel *k)
{
	return mark_with(node, TC_POLY_MARK_GPU_KERNEL, k);
}

/* The least and greatest value of member j of band node over its domain,
 * in *lo and *hi: 1, or 0 when they are not known constants (a
 * parametric model). */
static int member_range_on(isl_schedule_node *node, int j, isl_union_set *on, int64_t *lo,
	int64_t *hi);

static int member_range(isl_schedule_node *node, int j, int64_t *lo, int64_t *hi)
{
	return member_range_on(node, j, NULL, lo, hi);
}

/* member_range over the instances in on (borrowed; NULL: all). */
static int member_range_on(isl_schedule_node *node, int j, isl_union_set *on, int64_t *lo,
	int64_t *hi)
{
	return tc_poly_gpu_member_range(node, j, on, lo, hi);
}

static int64_t pow2_at_least(int64_t n)
{
	int64_t r = 1;
	while (r < n && r < (INT64_C(1) << 30))
		r <<= 1;
	return r;
}

/* The threads per block of each mapped dimension (d = 0: x) for values'
 * counts count[d] (0: unknown), n dimensions mapped. */
static void block_sizes(const tc_poly *p, int n, const int64_t *count, int64_t *block)
{
	const tc_target *t = p->target;
	int64_t budget = t->block_threads > 0 ? t->block_threads : 256;
	int d;
	for (d = 0; d < 3; d++)
		block[d] = 1;
	if (p->opts.nblock > 0) {
		for (d = 0; d < n && d < p->opts.nblock; d++)
			block[d] = p->opts.block[d];
		return;
	}
	for (d = 0; d < n; d++) {
		int64_t want = count[d] > 0 ? pow2_at_least(count[d]) : budget;
		int64_t cap = budget;
		if (d == 0 && n > 1)
			cap = t->warp_size > 0 ? t->warp_size : 32;
		if (d == 2 && cap > 64)
			cap = 64;
		if (t->max_block[d] > 0 && cap > t->max_block[d])
			cap = t->max_block[d];
		block[d] = want < cap ? want : cap;
		budget /= block[d];
		if (budget < 1)
			budget = 1;
	}
}

/* The set of instances of band node that block b<d> and thread t<td>
 * run for member j mapped to blocks of dimension d (see the top of the
 * file), or NULL; td < 0: blocks only (threads 1). */
static isl_union_set *member_filter(isl_schedule_node *node, int j, int d, int64_t lo,
	int64_t threads, int64_t blocks, int wraps, int td)
{
	isl_ctx *ctx = isl_schedule_node_get_ctx(node);
	isl_union_set *dom = isl_schedule_node_get_domain(node);
	isl_multi_union_pw_aff *mupa = isl_schedule_node_band_get_partial_schedule(node);
	isl_union_pw_aff *v = isl_multi_union_pw_aff_get_union_pw_aff(mupa, j), *b, *t;
	isl_multi_union_pw_aff_free(mupa);
	v = isl_union_pw_aff_intersect_domain_union_set(v, isl_union_set_copy(dom));
	v = isl_union_pw_aff_sub(v, isl_union_pw_aff_val_on_domain(isl_union_set_copy(dom),
					    isl_val_int_from_si(ctx, lo)));
	if (wraps)
		v = isl_union_pw_aff_mod_val(v, isl_val_int_from_si(ctx, threads * blocks));
	b = isl_union_pw_aff_param_on_domain_id(isl_union_set_copy(dom),
		isl_id_alloc(ctx, TC_POLY_GPU_BLOCK[d], NULL));
	b = isl_union_pw_aff_scale_val(b, isl_val_int_from_si(ctx, threads));
	if (td >= 0) {
		t = isl_union_pw_aff_param_on_domain_id(dom,
			isl_id_alloc(ctx, TC_POLY_GPU_THREAD[td], NULL));
		b = isl_union_pw_aff_add(b, t);
	} else {
		isl_union_set_free(dom);
	}
	v = isl_union_pw_aff_sub(v, b);
	return isl_union_pw_aff_zero_union_set(v);
}

/* The context of a kernel (gpu.h). */
static isl_set *kernel_context(isl_ctx *ctx, int n, const tc_poly_gpu_kernel *k)
{
	return tc_poly_gpu_kernel_context(ctx, n, k);
}

/* Move the coincident members of permutable band node first, keeping
 * the order within both groups. */
static isl_schedule_node *coincident_first(isl_schedule_node *node)
{
	isl_size n = isl_schedule_node_band_n_member(node);
	int perm[64], j, k = 0, moved = 0;
	if (n < 2 || n > 64 || isl_schedule_node_band_get_permutable(node) != isl_bool_true)
		return node;
	for (j = 0; j < n; j++)
		if (isl_schedule_node_band_member_get_coincident(node, j) == isl_bool_true)
			perm[k++] = j;
	for (j = 0; j < n; j++)
		if (isl_schedule_node_band_member_get_coincident(node, j) != isl_bool_true)
			perm[k++] = j;
	for (j = 0; j < n; j++)
		moved |= perm[j] != j;
	return moved ? tc_poly_band_permute(node, perm) : node;
}

/* ---- reductions on the threads of a block ---- */

/* The statements of a nest, for the reduction mapping. */
typedef struct reduce_find {
	const tc_poly *p;
	const tc_poly_stmt *update, *init;
	int bad; /* another statement, or a second update or init */
} reduce_find;

static isl_stat find_stmt(isl_set *set, void *user)
{
	reduce_find *rf = user;
	const tc_poly_stmt *st = tc_poly_find_stmt(rf->p, isl_set_get_tuple_name(set));
	isl_set_free(set);
	if (st && st->kind == TC_POLY_UPDATE && !rf->update)
		rf->update = st;
	else if (st && st->kind == TC_POLY_INIT && !rf->init)
		rf->init = st;
	else
		rf->bad = 1;
	return isl_stat_ok;
}

/* Whether e reads tensor. */
static int reads_tensor(const tc_ir_expr *e, int tensor)
{
	int i;
	if (!e)
		return 0;
	if (e->op == TC_OP_READ && e->id == tensor)
		return 1;
	for (i = 0; i < e->nargs; i++)
		if (reads_tensor(e->args[i], tensor))
			return 1;
	return 0;
}

/* Whether the update st may combine its values in any order: sums, max
 * and min of float32, float64 and integers, whose right-hand side does
 * not read the reduced tensor.  Products keep the interpreter's order
 * (docs/language.md: partial products overflow and underflow in other
 * orders), 16-bit floats their rounding per step. */
static int reorderable(const tc_ir_func *f, const tc_ir_stmt *st)
{
	tc_dtype t = f->tensors[st->tensor].dtype;
	if (st->sub) /* a scatter: no one element per row to combine into */
		return 0;
	if (st->red != TC_RED_ADD && st->red != TC_RED_MAX && st->red != TC_RED_MIN)
		return 0;
	if (tc_dtype_is_half(t) || t == TC_T_BOOL)
		return 0;
	return !reads_tensor(st->rhs, st->tensor);
}

/* Whether e has a read whose last (stride-1) subscript uses index var
 * and whose subscripts use every one of the first nlhs indices (the
 * left side's: the row's own operand). */
static int own_row_walk(const tc_ir_expr *e, int var, int nlhs)
{
	int i, v, ok;
	if (!e)
		return 0;
	for (i = 0; i < e->nargs; i++)
		if (own_row_walk(e->args[i], var, nlhs))
			return 1;
	if (e->op != TC_OP_READ || e->nargs < 1 || !tc_ir_uses_var(e->args[e->nargs - 1], var))
		return 0;
	for (v = 0, ok = 1; ok && v < nlhs; v++)
		for (i = 0, ok = 0; !ok && i < e->nargs; i++)
			ok = tc_ir_uses_var(e->args[i], v);
	return ok;
}

/* Whether a warp per row pays for reduction st strided over its index
 * var (-1: unknown, no): a read of the row's own operand walks var along
 * its stride-1 dimension (matvec's A(m,r_k), softmax's I(n,r_d)), so a
 * warp's lanes read consecutive elements where a thread per row would
 * read 32 rows apart.  Not column sums S(j) +=! A(i,j) nor a
 * convolution's input channels, whose thread per row (per column)
 * already reads consecutive elements; nor contractions (matmul_nt's
 * C(i,j) +=! A(i,r_k) * B(j,r_k): no operand is a row's own), whose
 * operands every row shares, which want tiles, not a warp per element. */
static int warp_walk_pays(const tc_ir_stmt *st, int var)
{
	return var >= 0 && st->nlhs > 0 && own_row_walk(st->rhs, var, st->nlhs);
}

/* Whether each value of the first lead members of band writes one
 * element of the update's output (the instances upd, borrowed): 1 yes, 0
 * no or unknown. */
static int one_element(isl_schedule_node *band, int lead, const tc_poly *p, isl_union_set *upd)
{
	isl_union_map *w = isl_union_map_intersect_domain(isl_union_map_copy(p->writes),
		isl_union_set_copy(upd));
	isl_bool ok;
	if (lead > 0) {
		isl_multi_union_pw_aff *mupa = isl_schedule_node_band_get_partial_schedule(band);
		isl_size nm = isl_multi_union_pw_aff_size(mupa);
		isl_union_map *pre;
		mupa = isl_multi_union_pw_aff_drop_dims(mupa, isl_dim_set, (unsigned)lead,
			(unsigned)(nm - lead));
		pre = isl_union_map_from_multi_union_pw_aff(mupa);
		pre = isl_union_map_intersect_domain(pre, isl_union_set_copy(upd));
		w = isl_union_map_apply_range(isl_union_map_reverse(pre), w);
		ok = isl_union_map_is_single_valued(w);
		isl_union_map_free(w);
	} else {
		isl_union_set *range = isl_union_map_range(w);
		isl_set *set = range && isl_union_set_n_set(range) == 1
			? isl_set_from_union_set(range) : (isl_union_set_free(range), NULL);
		ok = set ? isl_set_is_singleton(set) : isl_bool_false;
		isl_set_free(set);
	}
	return ok == isl_bool_true;
}

/* The instances of the statements of the children of sequence node
 * each of one statement: 1 when every child's filter names one, else 0. */
static int one_stmt_children(isl_schedule_node *node)
{
	isl_size i, n = isl_schedule_node_n_children(node);
	int ok = n > 0;
	for (i = 0; ok && i < n; i++) {
		isl_schedule_node *c = isl_schedule_node_get_child(node, i);
		isl_union_set *f = isl_schedule_node_filter_get_filter(c);
		ok = f && isl_union_set_n_set(f) == 1;
		isl_union_set_free(f);
		isl_schedule_node_free(c);
	}
	return ok;
}

/* node with a reduce mark above it carrying r (taken). */
static isl_schedule_node *mark_reduce(isl_schedule_node *node, tc_poly_gpu_reduce *r)
{
	return mark_with(node, TC_POLY_MARK_GPU_REDUCE, r);
}

/* The instances of st restricted to thread 0 of x. */
static isl_union_set *on_thread0(const tc_poly *p, const tc_poly_stmt *st)
{
	isl_space *space = isl_space_params_alloc(p->ctx, 1);
	isl_set *zero;
	space = isl_space_set_dim_id(space, isl_dim_param, 0,
		isl_id_alloc(p->ctx, TC_POLY_GPU_THREAD[0], NULL));
	zero = isl_set_fix_si(isl_set_universe(space), isl_dim_param, 0, 0);
	return isl_union_set_intersect_params(tc_poly_stmt_instances(p, st), zero);
}

/* Whether a reduction whose n mapped rows count nrows values (0:
 * unknown) runs a warp per row rather than a block per row (the
 * reduce_map option): never without rows (one reduction: a block); auto:
 * from 4096 rows on (one thread per row would then fill a GPU's warps,
 * but each warp's reads would stride across rows: a row per warp reads
 * them coalesced and still gives 4096 warps, about 30 on each of 132
 * SMs), unless reduce_threads asks for more than a warp. */
static int warp_per_row(const tc_poly *p, int n, int64_t nrows)
{
	if (n == 0 || p->opts.reduce_map == TC_POLY_REDUCE_MAP_BLOCK)
		return 0;
	if (p->opts.reduce_map == TC_POLY_REDUCE_MAP_WARP)
		return 1;
	return nrows >= 4096 && (p->opts.reduce_threads <= 0 || p->opts.reduce_threads == 32);
}

/* The rows per block of a warp-per-row reduction whose innermost row
 * member (the one on the threads of y) takes inner values (0: unknown):
 * the target's block_threads (256) in warps (8), fewer when that member's
 * values are fewer (no idle warp in every block). */
static int64_t warp_rows_per_block(const tc_target *t, int64_t inner)
{
	int64_t budget = t->block_threads > 0 ? t->block_threads : 256;
	int64_t most = t->max_block_threads > 0 ? t->max_block_threads : 1024;
	int64_t r = (budget < most ? budget : most) / 32;
	if (inner > 0 && inner < r)
		r = inner;
	if (t->max_block[1] > 0 && r > t->max_block[1])
		r = t->max_block[1];
	return r < 1 ? 1 : r;
}

/* Map the reduction of the nest whose top is band node, whose first lead
 * members are coincident (the rows; rows[0..n) their values' counts, 0
 * unknown), to the threads of x, where the rule of the reduce option
 * says so (see polyhedral/README.md, "Reductions on a block"):
 *   - the nest runs one reorderable update (and maybe its init), and
 *     each value of the rows writes one element;
 *   - the band's other members (and, with no init, the members of the
 *     bands below) are the reduced loops; the strided one is the
 *     innermost with at least 32 values (the stride-1 walk of the order
 *     pass: coalesced), else the longest;
 *   - auto: the rows' count known, no block option and a strided loop of
 *     at least 32 values (a warp's worth); on: any strided loop of 2 or
 *     more;
 *   - a block per row, or a warp per row (warp_per_row).
 * The band is split after the rows, the rest sunk into the sequence of
 * init and update, the init restricted to thread 0 of x and the
 * reduced band marked.  *threads: the threads of x, 0 when not mapped
 * (node unchanged); *warp_rows: 0 for a block per row, else the rows of
 * a block (on the threads of y, a warp each).  Returns the node at the
 * same position (the rows' band, or the mark or sequence when there are
 * no rows), NULL on an isl error. */
static isl_schedule_node *map_reduce(isl_schedule_node *node, int lead, int n,
	const int64_t *rows, gpu_map *g, int *threads, int *warp_rows)
{
	const tc_poly *p = g->p;
	const tc_target *t = p->target;
	reduce_find rf = {p, NULL, NULL, 0};
	isl_union_set *dom = isl_schedule_node_get_domain(node), *upd;
	isl_schedule_node *b;
	isl_size nm = isl_schedule_node_band_n_member(node);
	int64_t nrows = 1, best = 0, cnt, lo, hi, T;
	int depth = 0, before = 0, d, j, seq, best_before = 0, best_var = -1, warp;
	tc_poly_gpu_reduce *r;
	*threads = *warp_rows = 0;
	if (!dom)
		return isl_schedule_node_free(node);
	isl_union_set_foreach_set(dom, find_stmt, &rf);
	isl_union_set_free(dom);
	if (rf.bad || !rf.update || lead >= nm || !reorderable(p->f, rf.update->ir) ||
		(rf.init && rf.init->ir_index != rf.update->ir_index))
		return node;
	for (d = 0; d < n; d++)
		nrows = rows[d] > 0 && nrows > 0 ? nrows * rows[d] : 0;
	b = isl_schedule_node_get_child(node, 0);
	seq = isl_schedule_node_get_type(b) == isl_schedule_node_sequence;
	if ((rf.init && !(seq && one_stmt_children(b))) || (!rf.init && seq)) {
		isl_schedule_node_free(b);
		return node;
	}
	upd = tc_poly_stmt_instances(p, rf.update);
	if (!one_element(node, lead, p, upd)) {
		isl_schedule_node_free(b);
		isl_union_set_free(upd);
		return node;
	}
	/* the reduced members: node's from lead, then (update alone) the bands below */
	isl_schedule_node_free(b);
	b = isl_schedule_node_copy(node);
	for (j = lead; b; j++) {
		if (j >= isl_schedule_node_band_n_member(b)) {
			isl_schedule_node *c = rf.init ? NULL : isl_schedule_node_get_child(b, 0);
			isl_schedule_node_free(b);
			b = c;
			j = -1;
			if (b && isl_schedule_node_get_type(b) != isl_schedule_node_band)
				b = isl_schedule_node_free(b);
			continue;
		}
		if (!member_range_on(b, j, upd, &lo, &hi))
			break;
		cnt = hi - lo + 1;
		if ((cnt >= 32 && cnt > 1) || (best < 32 && cnt > best)) {
			best = cnt;
			best_before = before;
			best_var = tc_poly_band_member_var(b, j, rf.update);
		}
		before += cnt > 1;
	}
	isl_union_set_free(upd);
	if (b) { /* a range unknown */
		isl_schedule_node_free(b);
		return node;
	}
	depth = best_before;
	if (p->opts.reduce == 2 ? (p->opts.nblock > 0 || nrows <= 0 || best < 32) : best < 2)
		return node;
	if (p->opts.reduce == 2 && p->opts.reduce_map == TC_POLY_REDUCE_MAP_AUTO &&
		nrows >= 4096 && !warp_walk_pays(rf.update->ir, best_var))
		return node; /* a thread per row: enough threads, reads as coalesced */
	warp = warp_per_row(p, n, nrows);
	T = warp ? 32 : p->opts.reduce_threads;
	if (T <= 0) {
		int64_t sms = t->multiprocessors > 0 ? t->multiprocessors : 64;
		int64_t cap = nrows < sms ? 1024 : (t->block_threads > 0 ? t->block_threads : 256);
		T = pow2_at_least(best);
		T = T < 32 ? 32 : T > cap ? cap : T;
	}
	if (t->max_block_threads > 0 && T > t->max_block_threads)
		T = t->max_block_threads;
	if (!(r = tc_calloc(1, sizeof(*r))))
		return isl_schedule_node_free(node);
	r->threads = (int)T;
	r->depth = depth;
	r->warp = warp;
	if (lead > 0) {
		node = isl_schedule_node_band_split(node, lead);
		node = isl_schedule_node_child(node, 0);
	}
	if (rf.init) {
		isl_size i, nc;
		node = isl_schedule_node_band_sink(node); /* the band into each child */
		nc = isl_schedule_node_n_children(node);
		for (i = 0; node && i < nc; i++) {
			isl_union_set *f, *ini;
			int is_init;
			node = isl_schedule_node_child(node, i);
			f = isl_schedule_node_filter_get_filter(node);
			ini = tc_poly_stmt_instances(p, rf.init);
			is_init = f && ini && isl_union_set_is_disjoint(f, ini) == isl_bool_false;
			isl_union_set_free(f);
			isl_union_set_free(ini);
			node = isl_schedule_node_child(node, 0);
			if (is_init)
				node = isl_schedule_node_insert_filter(node, on_thread0(p, rf.init));
			else if (r)
				node = mark_reduce(node, r), r = NULL;
			node = isl_schedule_node_parent(node);
			node = isl_schedule_node_parent(node);
		}
	} else {
		node = mark_reduce(node, r);
		r = NULL;
	}
	tc_free(r); /* no update child: cannot happen (one_stmt_children) */
	if (lead > 0)
		node = isl_schedule_node_parent(node);
	*threads = (int)T;
	*warp_rows = warp ? (int)warp_rows_per_block(t, rows[0]) : 0;
	return node;
}

/* Map the nest at node (its top: a band, or anything else, which then
 * runs on one thread) as kernel number g->nkernels; returns the node at
 * the same position (the kernel's mark), NULL on an isl error. */
static isl_schedule_node *map_nest(isl_schedule_node *node, gpu_map *g)
{
	tc_poly *p = g->p;
	tc_poly_gpu_kernel *k = tc_calloc(1, sizeof(*k));
	isl_union_set *filter = NULL;
	int64_t count[3] = {0, 0, 0}, lo[3] = {0, 0, 0}, block[3];
	int member[3], wraps[3] = {0, 0, 0}, lead = 0, n = 0, d, threads = 0, warp_rows = 0;
	if (!k) /* the walk's caller says out of memory */
		return isl_schedule_node_free(node);
	k->index = g->nkernels++;
	for (d = 0; d < 3; d++)
		k->grid[d] = k->block[d] = 1;
	if (isl_schedule_node_get_type(node) == isl_schedule_node_band) {
		isl_size nm;
		node = coincident_first(node);
		nm = isl_schedule_node_band_n_member(node);
		while (lead < nm && isl_schedule_node_band_member_get_coincident(node, lead) == isl_bool_true)
			lead++;
	}
	n = lead < 3 ? lead : 3;
	for (d = 0; d < n; d++) { /* the innermost mapped member is x */
		int64_t hi;
		member[d] = lead - 1 - d;
		if (member_range(node, member[d], &lo[d], &hi))
			count[d] = hi - lo[d] + 1;
	}
	if (p->opts.reduce && isl_schedule_node_get_type(node) == isl_schedule_node_band) {
		node = map_reduce(node, lead, n, count, g, &threads, &warp_rows);
		if (!node) {
			tc_free(k);
			return NULL;
		}
	}
	if (threads) { /* the rows to blocks only, or x's to warp_rows threads of y too */
		block[0] = warp_rows ? warp_rows : 1;
		block[1] = block[2] = 1;
	} else
		block_sizes(p, n, count, block);
	for (d = 0; d < n; d++) {
		int64_t limit = p->target->max_grid[d] > 0 ? p->target->max_grid[d] : 65535;
		int64_t blocks = count[d] > 0 ? (count[d] + block[d] - 1) / block[d] : limit;
		if (p->opts.ngrid > d && p->opts.grid[d] < limit)
			limit = p->opts.grid[d];
		if (blocks > limit)
			blocks = limit;
		k->block[d] = (unsigned)block[d];
		k->grid[d] = (unsigned)blocks;
		wraps[d] = count[d] <= 0 || block[d] * blocks < count[d];
	}
	k->nmapped = n;
	if (!threads && n > 0) { /* shared-memory copies (gpu_shared.c) */
		int promoted;
		node = tc_poly_gpu_promote(node, p, k, lead, member, lo, wraps, &promoted);
		if (!node || promoted) {
			if (!node)
				tc_free(k);
			return node ? mark_kernel(node, k) : NULL;
		}
	}
	for (d = 0; d < n; d++) {
		isl_union_set *f = member_filter(node, member[d], d, lo[d], k->block[d], k->grid[d],
			wraps[d], !threads ? d : warp_rows && d == 0 ? 1 : -1);
		filter = filter ? isl_union_set_intersect(filter, f) : f;
	}
	if (threads) {
		k->block[0] = (unsigned)threads;
		k->reduce = threads;
	}
	if (warp_rows) {
		k->block[1] = (unsigned)warp_rows;
		k->warp_rows = warp_rows;
	}
	if (n > 0) /* the parameters are the model's (tc_poly_pass_gpu) */
		node = isl_schedule_node_insert_filter(node, isl_union_set_intersect_params(filter,
			kernel_context(isl_schedule_node_get_ctx(node),
				warp_rows && n < 2 ? 2 : n, k)));
	return mark_kernel(node, k);
}

/* What tc_poly_gpu_split_nest counts of a nest's statements. */
typedef struct split_count {
	const tc_poly *p;
	int stmts;      /* statements of the nest */
	int long_sums;  /* reorderable reductions of 32 values or more ... */
	int strided;    /* ... of them, those with a reduced index of 32
			 * values or more along which a warp per row pays
			 * (warp_walk_pays) */
} split_count;

static isl_stat count_stmt(isl_set *set, void *user)
{
	split_count *c = user;
	const tc_poly_stmt *st = tc_poly_find_stmt(c->p, isl_set_get_tuple_name(set));
	const tc_ir_stmt *ir = st ? st->ir : NULL;
	isl_set_free(set);
	c->stmts++;
	if (ir && st->kind == TC_POLY_UPDATE && reorderable(c->p->f, ir)) {
		int64_t n = 1, lo, hi;
		int v;
		for (v = ir->nlhs; v < ir->nvars && n > 0; v++)
			n = ir->vars[v].is_reduction && tc_ir_var_range(&ir->vars[v], c->p->params, &lo,
				&hi) ? n * (hi - lo) : ir->vars[v].is_reduction ? 0 : n;
		c->long_sums += n >= 32;
		for (v = ir->nlhs; v < ir->nvars && n >= 32; v++)
			if (ir->vars[v].is_reduction && tc_ir_var_range(&ir->vars[v], c->p->params,
				&lo, &hi) && hi - lo >= 32 && warp_walk_pays(ir, v)) {
				c->strided++;
				break;
			}
	}
	return isl_stat_ok;
}

int tc_poly_gpu_split_nest(__tc_keep const tc_poly *p, __tc_keep isl_schedule_node *node)
{
	isl_union_set *dom;
	split_count c = {p, 0, 0, 0};
	int64_t rows = 1, lo, hi;
	int lead = 0;
	if (p->opts.reduce != 2 || p->opts.nblock > 0 || !p->params)
		return 0;
	dom = isl_schedule_node_get_domain(node);
	if (!dom || isl_union_set_foreach_set(dom, count_stmt, &c) < 0) {
		isl_union_set_free(dom);
		return 0;
	}
	isl_union_set_free(dom);
	if (c.stmts <= 2 || !c.long_sums) /* none, or a lone reduction with its init */
		return 0;
	if (isl_schedule_node_get_type(node) == isl_schedule_node_band) {
		isl_size nm = isl_schedule_node_band_n_member(node);
		while (lead < nm && isl_schedule_node_band_member_get_coincident(node, lead) ==
			isl_bool_true) {
			if (!member_range(node, lead, &lo, &hi))
				return 0;
			rows *= hi - lo + 1;
			lead++;
		}
	}
	/* few rows: a block each; many: a warp each where a long reduced
	 * index is a row's own operand's stride-1 walk (map_reduce's rule) */
	return rows < 4096 || c.strided > 0 || p->opts.reduce_map != TC_POLY_REDUCE_MAP_AUTO;
}

/* Map the nests at node: each child of a sequence or set (run in order,
 * or independent: kernels launched in order serve both), down to the
 * first node that is neither; returns the node at the same position. */
static isl_schedule_node *map_nests(isl_schedule_node *node, gpu_map *g)
{
	enum isl_schedule_node_type type = isl_schedule_node_get_type(node);
	if (type == isl_schedule_node_sequence || type == isl_schedule_node_set) {
		isl_size i, n = isl_schedule_node_n_children(node);
		for (i = 0; node && i < n; i++) {
			node = isl_schedule_node_child(node, i);
			node = isl_schedule_node_child(node, 0); /* below the filter */
			node = map_nests(node, g);
			node = isl_schedule_node_parent(node);
			node = isl_schedule_node_parent(node);
		}
		return node;
	}
	return map_nest(node, g);
}

/* Map every top-level nest of p's schedule (node: its root). */
static isl_schedule_node *map_all(isl_schedule_node *node, tc_poly *p)
{
	gpu_map g = {p, 0};
	node = isl_schedule_node_child(node, 0); /* below the domain */
	return isl_schedule_node_root(map_nests(node, &g));
}

/* Whether the block and grid options fit the target: TC_OK, or TC_ERR
 * with the reason in d. */
static tc_stat check_options(const tc_poly *p, tc_diags *d)
{
	const tc_target *t = p->target;
	int64_t threads = 1, most = t->max_block_threads > 0 ? t->max_block_threads : 1024;
	int k;
	static const char xyz[] = "xyz";
	if (p->opts.nblock > 3 || p->opts.ngrid > 3) {
		tc_error(d, (tc_loc){0}, "the %s option takes at most 3 sizes (x, y, z), not %d",
			p->opts.nblock > 3 ? "block" : "grid",
			p->opts.nblock > 3 ? p->opts.nblock : p->opts.ngrid);
		return TC_ERR;
	}
	for (k = 0; k < p->opts.nblock; k++) {
		threads *= p->opts.block[k];
		if (t->max_block[k] > 0 && p->opts.block[k] > t->max_block[k]) {
			tc_error(d, (tc_loc){0}, "block: %lld threads in %c, more than the %lld a block "
				"of this device may have", (long long)p->opts.block[k], xyz[k],
				(long long)t->max_block[k]);
			return TC_ERR;
		}
	}
	if (threads > most) {
		tc_error(d, (tc_loc){0}, "block: %lld threads per block, more than the %lld this "
			"device allows", (long long)threads, (long long)most);
		return TC_ERR;
	}
	return TC_OK;
}

/* The parameters of every kernel's block and thread indices added to
 * p's context and to its schedule's domain (unconstrained there: each
 * kernel's filter bounds them), so that the filters introduce none, which
 * isl's AST generator refuses.  (A context node per kernel introducing
 * them, as isl intends, made the AST generator of the isl inside LLVM 19
 * fail with "spaces don't match".) */
static tc_stat add_parameters(tc_poly *p, tc_diags *d)
{
	isl_space *space = isl_space_params_alloc(p->ctx, 6);
	isl_union_set *dom;
	isl_size sizes = isl_set_dim(p->context, isl_dim_param); /* 0 at fixed sizes */
	int k;
	for (k = 0; k < 3; k++) {
		space = isl_space_set_dim_id(space, isl_dim_param, (unsigned)k,
			isl_id_alloc(p->ctx, TC_POLY_GPU_BLOCK[k], NULL));
		space = isl_space_set_dim_id(space, isl_dim_param, (unsigned)(3 + k),
			isl_id_alloc(p->ctx, TC_POLY_GPU_THREAD[k], NULL));
	}
	space = isl_space_align_params(space, isl_set_get_space(p->context)); /* sizes first */
	p->context = isl_set_align_params(p->context, isl_space_copy(space));
	for (k = 0; sizes >= 0 && k < 6; k++) /* indices are never negative */
		p->context = isl_set_lower_bound_si(p->context, isl_dim_param,
			(unsigned)(sizes + k), 0);
	dom = isl_union_set_align_params(isl_schedule_get_domain(p->schedule), space);
	p->schedule = isl_schedule_intersect_domain(p->schedule, dom);
	if (!p->context || !p->schedule) {
		tc_poly_isl_failed(p->ctx, d, "add the GPU's block and thread indices");
		return TC_ERR;
	}
	return TC_OK;
}

tc_stat tc_poly_pass_gpu(__tc_keep tc_poly *p, __tc_keep tc_diags *d)
{
	isl_schedule_node *node;
	if (check_options(p, d) < 0 || add_parameters(p, d) < 0)
		return TC_ERR;
	tc_poly_gpu_copies_free(p);
	node = map_all(isl_schedule_get_root(p->schedule), p);
	isl_schedule_free(p->schedule);
	p->schedule = node ? isl_schedule_node_get_schedule(node) : NULL;
	isl_schedule_node_free(node);
	return p->schedule ? TC_OK
		: tc_poly_walk_failed(p, d, "map the schedule to GPU blocks and threads");
}
