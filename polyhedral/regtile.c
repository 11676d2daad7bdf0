/* Register tiles: the register tiling pass (tc_poly_pass_regtile).
 *
 * In every innermost band that is a contraction band
 * (tc_poly_contraction_band, possibly with an epilogue), the parallel members are tiled by the
 * register tile, the reduction members move between the tile loops and the
 * point loops, the init gets its own point loops before the reduction and
 * the epilogue its own after it, and the row loop is marked for unrolling
 * (TC_POLY_MARK_UNROLL and _UNROLLED: the code generator makes the
 * copies): a micro-kernel whose partial sums stay in registers for the
 * whole reduction.  Full tiles are isolated from partial ones where the
 * AST build leaves the point loops to isl (tc_poly_points_exact: elsewhere
 * polyhedral/ast.c builds them from the tile sizes, whole and partial
 * tiles apart).  A band whose only parallel member is the innermost
 * (tc_poly_column_band: column sums) gets a strip of vectors in registers
 * the same way where its input is small (column_sizes), and its rows 4 at
 * a time inside the vectorised loop where it is not (column_rows).
 *
 * Owns the register tile's sizes (lanes of a vector, rows of the tile,
 * MAX_UNROLL) and the TC_POLY_MARK_REGTILE, _UNROLL and _UNROLLED marks.
 * Uses the model's queries (poly.h) and the band helpers (band.h); must
 * not know the other passes or the order they run in (schedule.c). */
#include "band.h"
#include "passes.h"

#include "../lang/sexpr.h"

#include <isl/aff.h>
#include <isl/id.h>
#include <isl/ilp.h>
#include <isl/map.h>
#include <isl/point.h>
#include <isl/schedule_node.h>
#include <isl/set.h>
#include <isl/space.h>
#include <isl/val.h>

#define MAX_UNROLL 32 /* the most copies the unrolled point loops may make */

typedef struct kind_ctx {
	const tc_poly *p;
	tc_poly_kind kind;
	isl_union_set *found;
} kind_ctx;

static isl_stat kind_cb(isl_set *set, void *user)
{
	kind_ctx *kc = user;
	const tc_poly_stmt *st = tc_poly_find_stmt(kc->p, isl_set_get_tuple_name(set));
	if (st && st->kind == kc->kind)
		kc->found = isl_union_set_add_set(kc->found, set);
	else
		isl_set_free(set);
	return isl_stat_ok;
}

/* The instances of node's domain whose statements are of kind kind. */
static isl_union_set *instances_of(const tc_poly *p, isl_schedule_node *node, tc_poly_kind kind)
{
	isl_union_set *dom = isl_schedule_node_get_domain(node);
	kind_ctx kc = {p, kind, isl_union_set_empty(isl_union_set_get_space(dom))};
	isl_union_set_foreach_set(dom, kind_cb, &kc);
	isl_union_set_free(dom);
	return kc.found;
}

/* The lanes of a vector for elements of statement st's tensor: those of a
 * whole register, or fewer when the vector option asks for fewer (the loop
 * vectoriser then uses that many, so a tile of whole registers would hold
 * several of its vectors per register: more live values than registers).
 * More lanes than a register holds are split over registers by LLVM, so
 * the tile keeps counting whole registers then. */
static int64_t lanes(const tc_poly *p, const tc_poly_stmt *st)
{
	int size = tc_dtype_size(p->f->tensors[st->ir->tensor].dtype);
	int vb = p->target->vector_bytes;
	int64_t reg = size > 0 && size < vb ? vb / size : 1;
	return p->opts.vector > 0 && p->opts.vector < reg ? p->opts.vector : reg;
}

/* The vector loads one step of the reduction shares between the rows of a
 * register tile whose rows walk var: reads of e that use the vectorised
 * index inner but not var. */
static int shared_vectors(const tc_ir_expr *e, int var, int inner)
{
	int i, n = e->op == TC_OP_READ && tc_ir_uses_var(e, inner) && !tc_ir_uses_var(e, var);
	if (e->op != TC_OP_READ)
		for (i = 0; i < e->nargs; i++)
			n += shared_vectors(e->args[i], var, inner);
	return n;
}

/* The member of contraction band node whose values the register tile's
 * rows take: the parallel member (the innermost aside) whose rows share
 * the most vector loads (conv2d's output channels f: every row reads the
 * same input vector, where rows of h each read their own); among equals
 * the one with room for the most of the want rows, if want > 0 (a convolution's weight
 * gradient d_W1(f,c,kh,kw), f innermost: rows of c, not of kw's 3, which
 * kept half the accumulators idle and read d_O's 6 MB from the L3 once per
 * 3 rows, 13.2 against 7.8 ms at 8x64x56x56), then the one nearest the
 * innermost; -1 if there is none. */
static int rows_member(const tc_poly *p, isl_schedule_node *node, const tc_poly_stmt *st,
	int64_t want)
{
	isl_size n = isl_schedule_node_band_n_member(node);
	int j, best = -1, best_shared = -1, inner = tc_poly_band_member_var(node, n - 1, st);
	int64_t best_room = 0;
	for (j = n - 2; j >= 0; j--) {
		int var, shared;
		int64_t ext, room;
		if (isl_schedule_node_band_member_get_coincident(node, j) != isl_bool_true)
			continue;
		var = tc_poly_band_member_var(node, j, st);
		shared = var >= 0 && inner >= 0 ? shared_vectors(st->ir->rhs, var, inner) : 0;
		ext = tc_poly_band_member_extent(p, node, j);
		room = ext > 0 && ext < want ? ext : want; /* unknown: room enough; want 0: none */
		if (shared > best_shared || (shared == best_shared && room > best_room)) {
			best_shared = shared;
			best_room = room;
			best = j;
		}
	}
	return best;
}

/* Whether the row of bytes that band node's register tile loads per step
 * of the reduction (its non-coincident members, and those of the bands
 * around it: the reduction's cache blocks, tile.c's image_tiles) adds up
 * to more than the L2 over the whole reduction. */
static int streamed_rows(const tc_poly *p, isl_schedule_node *node, int64_t bytes)
{
	double total = (double)bytes;
	isl_schedule_node *at = isl_schedule_node_copy(node);
	int known = 1;
	while (at && known) {
		if (isl_schedule_node_get_type(at) == isl_schedule_node_band) {
			isl_size n = isl_schedule_node_band_n_member(at), j;
			for (j = 0; j < n && known; j++)
				if (isl_schedule_node_band_member_get_coincident(at, j) != isl_bool_true) {
					int64_t ext = tc_poly_band_member_extent(p, at, j);
					known = ext > 0; /* else unknown */
					total *= (double)ext;
				}
		}
		at = isl_schedule_node_has_parent(at) == isl_bool_true ?
			isl_schedule_node_parent(at) : isl_schedule_node_free(at);
	}
	isl_schedule_node_free(at);
	return known && p->target->l2_bytes > 0 && total > (double)p->target->l2_bytes;
}

/* ---- rows of a convolution ----
 *
 * In a convolution written with its output rows as vectors
 * (O(n,g,f,h,w) +=! I(n,g,r_c,h+r_kh,w+r_kw) * W1(g,f,r_c,r_kh,r_kw), the
 * channels-last rewrite of ir/pack.c left out) two members can give the
 * tile's rows: the output channels f, whose rows share the input vector
 * and each broadcast a weight, and the output rows h, whose rows share the
 * weight's broadcast and each load an input vector.  Both take one load
 * per row and step, so what decides is (conv_rows):
 *   - whole tiles: rows that divide the member's extent (the largest
 *     divisor from half the rows up: 16 channels in 2 tiles of 8, not
 *     12 + 4), since a partial tile's point loops keep bounds that are no
 *     constants (a min) and run several times slower;
 *   - then fewer loads per multiply: more rows (12 rows of h against 8 of
 *     f at 14 x 14);
 *   - rows of h read a slice of the input per output channel (C x H x W of
 *     one image and group): only when it fits the L1 (at 56 x 56 with 16
 *     channels, 200 KiB, 12 rows of h took 1.8x the time of 12 of f);
 *   - among equals, the member nearest the innermost (rows_member's rule);
 *   - then, where both h and f are candidates, rows of both in one tile
 *     when whole tiles of them load no more per multiply (tile_loads):
 *     h's rows the most that divide its extent up to 6, leaving room for 2
 *     rows of f, then f's the most that divide its extent up to 4, at
 *     most 16 accumulators in all, with registers left for the operands
 *     that a step keeps (the code generator's vector code takes the two
 *     row loops; codegen/llvm_loop.c, vtile_step).  One thread, Zen 5,
 *     masked rows: 16 channels per group at 14 x 14, 2 x 6 rows 0.83x the
 *     time of 6 rows of h; 8 channels at 28 x 28, 4 x 2 rows of two
 *     vectors 0.54x that of 8 rows of f; at 16 x 16, 4 x 2 rows 0.84-0.88x
 *     that of 8 x 2, 2 x 7 or 8 x 1, 16 x 1 1.6x; 4 channels at 56 x 56
 *     keep 4 rows of f (2 x 2 rows took 1.1x the time, 2 x 3 1.7x).  More
 *     rows of f or accumulators (4 x 6, 8 x 3, 8 x 2) never ran faster and
 *     varied more between runs (docs/performance.md, "Rows of f and h
 *     together").
 * Grouped 3 x 3 convolution, 16 channels per group, 14 x 14 images, one
 * thread: 12 rows of h x 8 lanes (+ 4) took 0.6x the time of channels last
 * and 0.2x that of 12 + 4 rows of f; 28 x 28: 8 rows of f 0.25x that of
 * 12 + 4 (docs/performance.md, Convolutions).  Bands without a window
 * read keep rows_member's choice; with one member whose rows share a load,
 * only its count of rows changes (whole tiles).  A row of one vector and a
 * rest of half a vector or more takes vectors of half the lanes instead
 * (regtile_sizes): grouped, 8 channels per group at 28 x 28, 8 rows of f
 * x 8 lanes (26 = 3 x 8 + 2) took 0.74x the time of 8 x 16 lanes (+ 10),
 * whose partial tile's epilogue LLVM vectorised across the rows, with
 * gathers and scatters.  Where the target takes a masked rest
 * (tc_target.masked_rest) the tile spans the whole row instead, up to 4
 * vectors, the last one masked (rows of 14: one vector, 26: two, 54: four),
 * and from one row member only (regtile_sizes). */

/* The reads in e, in *n, and those that do not use index var, returned:
 * the loads a step of the reduction shares between rows of var. */
static int shared_reads(const tc_ir_expr *e, int var, int *n)
{
	int i, shared = 0;
	if (e->op == TC_OP_READ) {
		++*n;
		return !tc_ir_uses_var(e, var);
	}
	for (i = 0; i < e->nargs; i++)
		shared += shared_reads(e->args[i], var, n);
	return shared;
}

/* The rows a tile takes of a member of ext values, at most max: all of
 * them when they fit, else the largest divisor of ext from max / 2 up
 * (whole tiles), else max. */
static int64_t whole_rows(int64_t ext, int64_t max)
{
	int64_t r;
	if (ext <= max)
		return ext;
	for (r = max; 2 * r >= max; r--)
		if (ext % r == 0)
			return r;
	return max;
}

/* Bytes of window read x that rows of var read per value of the other
 * parallel members (the dimensions whose subscripts use var, the innermost
 * index inner or a reduction index), or -1 when unknown. */
static int64_t window_slice(const tc_poly *p, const tc_poly_stmt *st, const tc_ir_expr *x,
	int var, int inner)
{
	const tc_ir_tensor *t = &p->f->tensors[x->id];
	int64_t bytes = tc_dtype_size(t->dtype), ext;
	int k, v;
	for (k = 0; k < x->nargs; k++)
		for (v = 0; v < st->ir->nvars; v++)
			if (tc_ir_uses_var(x->args[k], v) &&
				(v == var || v == inner || st->ir->vars[v].is_reduction)) {
				if (!p->params || tc_sx_eval(t->ext[k], p->params, NULL, &ext) < 0)
					return -1;
				bytes *= ext;
				break;
			}
	return bytes;
}

/* The read of contraction band node's statement st through a window along
 * the innermost member (I(n,r_c,h+r_kh,w+r_kw) with w innermost, r_kw a
 * reduction member): node is a convolution; or NULL. */
static const tc_ir_expr *conv_window(isl_schedule_node *node, const tc_poly_stmt *st)
{
	isl_size n = isl_schedule_node_band_n_member(node);
	int k, inner = n > 0 ? tc_poly_band_member_var(node, n - 1, st) : -1;
	const tc_ir_expr *x = NULL;
	for (k = 0; k < n && inner >= 0 && !x; k++) {
		int vk = tc_poly_band_member_var(node, k, st);
		if (vk >= 0 && isl_schedule_node_band_member_get_coincident(node, k) != isl_bool_true)
			x = tc_poly_window_read(st->ir->rhs, inner, vk);
	}
	return x;
}

/* Whether contraction band node's statement st is a pooling whose window
 * strides along the innermost member (O(n,c,h,w) max=!
 * I(n,c,2*h+r_kh,2*w+r_kw)): one read, so no operand that the rows of a
 * tile share, and each vector of it a gather.  Such a tile only holds the
 * results in registers, and costs more than it saves: 16 x 64 x 56 x 56,
 * one thread on a Zen 3, max over 2 x 2 windows of stride 2 took 3.2 ms
 * tiled against 1.5, 3 x 3 windows of stride 2 3.25 against 2.55, the
 * average over 2 x 2 windows 1.2 against 1.1 (bench, --no-cache); a
 * stride-1 3 x 3 max keeps its tile (3.3 ms against 4.6 untiled).  The
 * regtile option's sizes apply as they are. */
static int strided_pooling(const tc_poly *p, isl_schedule_node *node, const tc_poly_stmt *st)
{
	isl_size n = isl_schedule_node_band_n_member(node);
	int k, inner = n > 0 ? tc_poly_band_member_var(node, n - 1, st) : -1;
	const tc_ir_expr *x;
	if (p->opts.nregtile || inner < 0 || tc_ir_count_reads(st->ir->rhs) != 1 ||
		!(x = conv_window(node, st)))
		return 0;
	for (k = 0; k < x->nargs; k++)
		if (tc_ir_uses_var(x->args[k], inner)) {
			int64_t step = tc_ir_var_step(x->args[k], inner);
			return step != 1 && step != -1;
		}
	return 0;
}

/* The most rows of h, of f, and of accumulators in a tile with rows of
 * both (see above). */
#define CONV_H_ROWS 6
#define CONV_F_ROWS 4
#define CONV_PAIR_ACC 16

/* Loads of one step of a register tile of convolution statement st with
 * ra rows of index a and rb of index b, nv vectors per row along index
 * inner: per read, its rows' and vectors' copies (a broadcast does not
 * use inner; the input vector of I(..., h + r_kh, w + r_kw) is loaded per
 * row of h and vector, and shared by the rows of f). */
static int64_t tile_loads(const tc_ir_expr *e, int a, int64_t ra, int b, int64_t rb, int inner,
	int64_t nv)
{
	int64_t n = 0;
	int k;
	if (e->op == TC_OP_READ)
		return (tc_ir_uses_var(e, a) ? ra : 1) * (tc_ir_uses_var(e, b) ? rb : 1) *
			(tc_ir_uses_var(e, inner) ? nv : 1);
	for (k = 0; k < e->nargs; k++)
		n += tile_loads(e->args[k], a, ra, b, rb, inner, nv);
	return n;
}

/* The rows of the register tile of convolution band node, x its window
 * read, nv vectors per row (see above): sets *row to the member and
 * *rows to its rows (max at most) when two members or more are to choose
 * from; with one that is already *row, only *rows; else leaves them.
 * When the choice is a member the window read uses (h) and another member
 * whose rows share the input vector (f) has whole tiles too, the rows are
 * those of both (*row2, *rows2 for f) that take the fewest loads per
 * multiply (tile_loads) in whole tiles of at most the target's
 * accumulators, with registers left for the operands that a step keeps
 * (the code generator keeps the fewer of f's broadcasts and h's input
 * vectors: codegen/llvm_loop.c, vtile_step), if that beats h's rows
 * alone; else *row2 is left alone. */
static void conv_rows(const tc_poly *p, isl_schedule_node *node, const tc_poly_stmt *st,
	const tc_ir_expr *x, int64_t max, int64_t nv, int *row, int64_t *rows, int *row2,
	int64_t *rows2)
{
	isl_size n = isl_schedule_node_band_n_member(node);
	int j, inner = tc_poly_band_member_var(node, n - 1, st), best = -1, cands = 0;
	int other = -1, win = -1, va, vb;
	int64_t best_r = 0, best_loads = 0, best_whole = 0, win_ext = 0, other_ext = 0;
	int64_t acc = p->target->accumulators, regs = p->target->vector_regs, pa, pb;
	for (j = n - 2; j >= 0; j--) {
		int var = tc_poly_band_member_var(node, j, st), nreads = 0, shared;
		int64_t ext = tc_poly_band_member_extent(p, node, j), r, loads, whole, slice;
		if (var < 0 || ext <= 1 ||
			isl_schedule_node_band_member_get_coincident(node, j) != isl_bool_true)
			continue;
		if (!(shared = shared_reads(st->ir->rhs, var, &nreads)))
			continue;
		if (tc_ir_uses_var(x, var) && ((slice = window_slice(p, st, x, var, inner)) < 0 ||
			slice > p->target->l1_bytes))
			continue;
		cands++;
		if (!tc_ir_uses_var(x, var) && other < 0) {
			other = j;
			other_ext = ext;
		} else if (tc_ir_uses_var(x, var) && win < 0) {
			win = j;
			win_ext = ext;
		}
		r = whole_rows(ext, max);
		whole = ext % r == 0;
		loads = shared + (nreads - shared) * r; /* per step, for r multiplies */
		/* whole tiles first, then fewer loads per multiply */
		if (best < 0 || whole > best_whole ||
			(whole == best_whole && loads * best_r < best_loads * r)) {
			best = j;
			best_r = r;
			best_loads = loads;
			best_whole = whole;
		}
	}
	if (best < 0 || (cands < 2 && best != *row)) /* one: only its rows' count */
		return;
	*row = best;
	*rows = best_r;
	if (other < 0 || win < 0 || regs <= 0 || nv < 1)
		return;
	/* rows of both in whole tiles: h's as many as divide its extent up
	 * to CONV_H_ROWS, leaving room for 2 rows of f, then f's as many as
	 * divide its extent up to CONV_F_ROWS and fit; taken when they load
	 * no more per multiply than the rows of one member chosen above */
	if (acc > CONV_PAIR_ACC)
		acc = CONV_PAIR_ACC;
	for (pa = CONV_H_ROWS; pa > 1 && (win_ext % pa || 2 * pa * nv > acc ||
		2 * pa * nv + 3 > regs); pa--)
		;
	for (pb = CONV_F_ROWS; pb > 1 && (other_ext % pb || pa * pb * nv > acc ||
		pa * pb * nv + (pa * nv < pb ? pa * nv : pb) + 1 > regs); pb--)
		;
	if (pa < 2 || pb < 2)
		return;
	va = tc_poly_band_member_var(node, win, st);
	vb = tc_poly_band_member_var(node, other, st);
	if (best_whole && tile_loads(st->ir->rhs, va, best == win ? best_r : 1, vb,
		best == win ? 1 : best_r, inner, nv) * pa * pb <
		tile_loads(st->ir->rhs, va, pa, vb, pb, inner, nv) * best_r)
		return;
	*row = win;
	*rows = pa;
	*row2 = other;
	*rows2 = pb;
}

/* Whether a read of contraction statement st combines an index of its
 * output and a reduction index in one subscript (a window: w + r_kw): a
 * convolution, also one written channels last, whose window runs along
 * another member than the innermost (conv_window's). */
static int any_window(const tc_poly_stmt *st)
{
	int a, b;
	for (a = 0; a < st->ir->nvars; a++)
		for (b = 0; b < st->ir->nvars; b++)
			if (!st->ir->vars[a].is_reduction && st->ir->vars[b].is_reduction &&
				tc_poly_window_read(st->ir->rhs, a, b))
				return 1;
	return 0;
}

/* The rows of a contraction's register tile (not a convolution's) of a
 * member of ext values that the tile pass leaves whole (shorter than 1.5
 * of the target's MC), rows chosen so far, at most max by the
 * accumulators: as few tiles as rows allow, or fewer, of equal rows (up
 * to 16) where they divide ext, so that no tile is a partial one (27 rows
 * of 2 vectors: 9 + 9 + 9, not 12 + 12 + 3).  Batch matmul 500 x 26 x 72 x
 * 26, one thread: 2 tiles of 13 rows (of 16 and of 10 lanes) took 0.95x
 * the time of 12 + 12 + 2, whose tile of 2 rows waits on its 2 chains of
 * multiply-adds (where whole_row takes its 26 columns, on the Zen 4, 8 + 8
 * + 8 + 2 rows of 3 registers: no split in equal rows of 8 or fewer). */
static int64_t even_rows(const tc_poly *p, int64_t ext, int64_t rows, int64_t max)
{
	int64_t t;
	if (max > 16)
		max = 16;
	if (ext <= rows || rows < 1 || max < 1 || 2 * ext >= 3 * p->target->block_rows)
		return rows;
	for (t = (ext + max - 1) / max; t <= (ext + rows - 1) / rows; t++)
		if (ext % t == 0)
			return ext / t;
	return rows;
}

/* The vector registers that a register tile's row of size columns takes
 * in vectors of vl lanes: whole vectors, then one of each power of two
 * that the rest holds (codegen/llvm_loop.c, vector_columns: 26 = 16 + 8 +
 * 2, three registers).  Rows of whole vectors and the rows of a masked
 * rest (a multiple of vl here) take size / vl. */
static int64_t row_registers(int64_t size, int64_t vl)
{
	int64_t regs = size / vl, rest = size % vl;
	for (; rest; rest &= rest - 1)
		regs++;
	return regs > 0 ? regs : 1;
}

/* Whether a contraction's register tile takes the whole of its innermost
 * member's ext values, vectors of vl lanes and a rest in narrower ones,
 * instead of size's whole vectors and a partial tile for the rest: where
 * the row is longer than a vector but shorter than the tile's size and
 * 512-bit vectors take no masked rest (the Zen 4 and x86-64-v4).  Batch
 * matmul 500 x 26 x 72 x 26 on the Zen 4, one thread: tiles of 6 rows of
 * 26 columns (16 + 8 + 2 lanes) 0.530 ms at best against 0.581 for 13
 * rows of 16 and 13 of 10 (docs/performance.md, "Whole rows of 26"). */
static int whole_row(const tc_poly *p, int64_t ext, int64_t vl, int64_t size)
{
	return ext > vl && ext < size && ext % vl && p->target->vector_bytes == 64 &&
		!p->target->masked_rest && !p->opts.unroll_inner && p->opts.vector <= 0;
}

/* The register tile sizes of every member of contraction band node
 * (sizes[n]): the reduction members untiled, the parallel ones from the
 * option (innermost last; members it does not reach get 1) or, when
 * automatic, up to 4 whole vectors of the innermost member (the rest of
 * shorter rows in partial tiles) by rows of rows_member, as many
 * accumulators in all as the target gives a register tile (24 of 32 vector
 * registers: 6 x 4, 8 x 3, 12 x 2 or 1; runtime/backend_cpu.c says the
 * host's), the rest for the shared vector loads and broadcasts: where 4
 * vectors would leave too few (12 of AVX2's 16: 3 x 4 plus 4 loads and a
 * broadcast), 2 vectors of 6 rows; clipped to the extents.  A row shorter than
 * a vector gets one vector and 6 rows (fcrelu 128x128x10: 0.022 ms,
 * against 0.029 with 12 rows of 10).  unroll_inner=U makes that U vectors
 * per row (accumulators / U rows, at most 12), so that the innermost point
 * loop is one trip of U interleaved vectors; vector=N makes the vectors N
 * lanes (lanes()). */
static void regtile_sizes(const tc_poly *p, isl_schedule_node *node, const tc_poly_stmt *st,
	int64_t *sizes)
{
	isl_size n = isl_schedule_node_band_n_member(node);
	int64_t vl = lanes(p, st), rows = 6, nvec = p->opts.unroll_inner ? p->opts.unroll_inner : 4;
	int64_t acc = p->target->accumulators;
	int j, k = p->opts.nregtile, row = p->opts.nregtile ? -1 : rows_member(p, node, st, 0);
	int row2 = -1;
	int64_t rows2 = 1;
	const tc_ir_expr *x = p->opts.nregtile ? NULL : conv_window(node, st);
	/* a convolution's row ending in a masked vector (see conv_rows) */
	int masked = x && p->target->masked_rest && !p->opts.unroll_inner && p->opts.vector <= 0;
	for (j = n - 1; j >= 0; j--) {
		int64_t ext = tc_poly_band_member_extent(p, node, j), size;
		if (isl_schedule_node_band_member_get_coincident(node, j) != isl_bool_true) {
			sizes[j] = HUGE_TILE;
			continue;
		}
		if (p->opts.nregtile) {
			size = k > 0 ? p->opts.regtile[--k] : 1;
		} else if (j == n - 1) {
			/* the sums, a row's vectors and a broadcast in registers:
			 * AVX2's 16 take 6 rows of 2 vectors (15), not 3 of 4
			 * (17: LLVM spilled and shuffled the sums every step;
			 * sgemm 1024 took 0.8x the time as 6 x 2 on a Zen 3) */
			if (!p->opts.unroll_inner)
				nvec = tc_poly_row_vectors(p->target, nvec);
			size = nvec * vl;
			int64_t half = vl;
			while (ext > 0 && half > ext)
				half /= 2;
			if (masked && ext > 0 && ext < vl) { /* one masked vector */
				size = vl;
				rows = acc > 12 ? 12 : acc;
			} else if (ext > 0 && ext < vl && half >= 4) {
				/* a row shorter than a register: one whole vector
				 * of fewer lanes (8 of 10 outputs, 10 x 8 x 128
				 * weight gradient: 0.0082 ms against 0.017 with a
				 * 10-wide one), the rest a partial tile */
				size = half;
				rows = acc > 12 ? 12 : acc;
			} else if (ext > 0 && ext < vl) { /* one partial vector, 6 rows */
				size = vl;
				rows = 6;
			} else {
				if (masked && ext > 0 && ext < size) /* the row, its rest masked */
					size = (ext + vl - 1) / vl * vl;
				else if (!x && whole_row(p, ext, vl, size))
					size = ext;
				else if (ext > 0 && ext < size) /* whole vectors; the rest a partial tile */
					size = ext / vl * vl;
				rows = acc / row_registers(size, vl);
				if (rows > 12)
					rows = 12;
				/* a convolution's row of one vector and a rest of
				 * half a vector or more: vectors of half the lanes
				 * (26 = 3 x 8 + 2, not 16 + 10; see conv_rows),
				 * unless the options set the vectors */
				if (x && !masked && !p->opts.unroll_inner && p->opts.vector <= 0 && size == vl &&
					vl >= 8 && 2 * (ext % vl) >= vl) {
					size = vl / 2;
					rows = acc > 12 ? 12 : acc;
				}
			}
			/* again with the rows a tile takes, where no window
			 * read decides and the vectors the rows share stream
			 * from beyond the L2 over the reduction (a weight
			 * gradient's d_O); where they stay in cache, the rows
			 * nearest the innermost (a group convolution's rows of
			 * 12 images, not of its 5 columns, took 1.08x / 1.26x
			 * the time at 32 channels and 7 x 7) */
			if (!p->opts.nregtile && !x &&
				streamed_rows(p, node, size * tc_dtype_size(p->f->tensors[st->ir->tensor].dtype)))
				row = rows_member(p, node, st, rows);
			if (x)
				conv_rows(p, node, st, x, rows, (size + vl - 1) / vl, &row, &rows, &row2,
					&rows2);
		} else {
			size = j == row ? rows : j == row2 ? rows2 : 1;
			if (j == row && !x && !p->opts.nregtile && !any_window(st))
				size = even_rows(p, ext, size,
					acc / row_registers(sizes[n - 1], vl));
			if (ext > 0 && size > ext)
				size = ext;
		}
		sizes[j] = size;
	}
}

/* The register tile of a column band (tc_poly_column_band): a strip of
 * whole vectors of the innermost member, 8 of them (no rows: each step
 * loads one vector per accumulator, and 8 adds in flight cover their
 * latency), the reduction members untiled.  Only where the band's
 * instances span at most half the L2 (the bias gradient of a 128 x 128
 * layer): over bigger inputs a strip's reads, one short piece per row,
 * ran slower than the plain nest streaming whole rows with its
 * accumulators in the L1 (docs/performance.md, Training contractions).
 * Returns 0 to leave the band alone; the regtile option's sizes apply
 * as they are. */
static int column_sizes(const tc_poly *p, isl_schedule_node *node, const tc_poly_stmt *st,
	int64_t *sizes)
{
	isl_size n = isl_schedule_node_band_n_member(node);
	int64_t vl = lanes(p, st), ext = tc_poly_band_member_extent(p, node, n - 1), bytes;
	int j, size = tc_dtype_size(p->f->tensors[st->ir->tensor].dtype);
	if (p->opts.nregtile)
		return 1;
	bytes = size;
	for (j = 0; j < n && bytes > 0; j++) {
		int64_t e = tc_poly_band_member_extent(p, node, j);
		bytes = e > 0 && bytes <= p->target->l2_bytes ? bytes * e : -1;
	}
	if (bytes <= 0 || p->target->l2_bytes <= 0 || 2 * bytes > p->target->l2_bytes)
		return 0;
	sizes[n - 1] = (p->opts.unroll_inner ? p->opts.unroll_inner : 8) * vl;
	if (ext < sizes[n - 1])
		sizes[n - 1] = ext >= vl ? ext / vl * vl : vl;
	return 1;
}

/* The rows of a column band's reduction that each step of its vector
 * loop adds (column_rows). */
#define COLUMN_ROWS 4

static isl_schedule_node *isolate_full_tiles(isl_schedule_node *node, const int64_t *sizes,
	isl_union_set *updates, const int *keep, isl_union_set **red_iso);

/* The number of values from the least to the greatest that member j of
 * band node takes over its update instances (the other statements'
 * values do not count: a combination of per-thread sums runs at values
 * 2047 and 2048 after its init at 1); 0 when not known constants. */
static int64_t update_span(const tc_poly *p, isl_schedule_node *node, int j)
{
	return tc_poly_band_member_extent_on(p, node, j, instances_of(p, node, TC_POLY_UPDATE));
}

/* A column band (tc_poly_column_band) too big for column_sizes' strip:
 * the innermost reduction member tiled by COLUMN_ROWS, the tile band
 * otherwise the band as it was (the parallel member's loop in it, where
 * the parallel pass can still cut it into chunks for the threads), and the
 * rows of a tile inside the loop over the parallel member (vectorised),
 * unrolled by the code generator (TC_POLY_MARK_UNROLL): each vector of
 * sums is loaded once, gets the rows' elements added in the reduction's
 * order (the same bits as the plain nest) and is stored once per
 * COLUMN_ROWS rows, and the reads walk COLUMN_ROWS rows at once.  The
 * plain nest loaded and stored every vector of sums once per row and read
 * one row after the other: the bias gradient 4096 x 1024 ran at 0.61x
 * OpenBLAS's sgemv on one thread of the Zen 3 host, whose gemv reads 4
 * columns of its matrix at once.  Written out in C, 2, 4, 8 and 16 rows
 * took 0.66, 0.57, 0.71 and 0.70 ms against the plain nest's 1.01 (OpenBLAS
 * 0.57): rows 4 KiB apart share the L1's sets, 8 ways, so 8 rows and the
 * sums no longer fit one set.  The init runs in a nest of its own before
 * the band; full tiles are isolated so that their rows have constant
 * bounds.  Returns node itself where the band is not such (the innermost
 * reduction member shorter than two tiles, the parallel one shorter than
 * a vector). */
static isl_schedule_node *column_rows(isl_schedule_node *node, const tc_poly *p,
	const tc_poly_stmt *st, int has_init)
{
	isl_size n = isl_schedule_node_band_n_member(node);
	int64_t sizes[TC_POLY_MAX_TILE * 2];
	isl_multi_val *mv;
	int j;
	if (n < 2 || n > TC_POLY_MAX_TILE * 2 || p->opts.nregtile || !p->opts.unroll ||
		update_span(p, node, (int)n - 2) < 2 * COLUMN_ROWS ||
		tc_poly_band_member_extent(p, node, n - 1) < lanes(p, st))
		return node;
	mv = isl_multi_val_zero(isl_schedule_node_band_get_space(node));
	for (j = 0; j < n; j++) {
		sizes[j] = j == n - 2 ? COLUMN_ROWS : 1;
		mv = isl_multi_val_set_val(mv, j, isl_val_int_from_si(p->ctx, sizes[j]));
	}
	node = isl_schedule_node_band_tile(node, mv);
	node = isolate_full_tiles(node, sizes, NULL, NULL, NULL);
	if (has_init) /* node stays on the band of the other instances */
		node = isl_schedule_node_order_before(node, instances_of(p, node, TC_POLY_INIT));
	/* the point band: the rows, the other members one value each */
	node = isl_schedule_node_child(node, 0);
	return isl_schedule_node_insert_mark(node, isl_id_alloc(p->ctx, TC_POLY_MARK_UNROLL, NULL));
}

/* Whether member j of a band tiled by sizes[] is tiled by the register
 * tile (the others: parallel members of one row, and the reduction
 * members, tiled by their whole extent). */
static int is_tiled(const int64_t *sizes, int j)
{
	return sizes[j] > 1 && sizes[j] < HUGE_TILE;
}

/* What holes_cb reads and writes (tiles_with_holes). */
typedef struct holes_ctx {
	isl_size depth, n;    /* the tile band's schedule depth and members */
	const int64_t *sizes; /* its tile sizes */
	const int *keep;      /* the point members the result keeps, or NULL */
	int capped;           /* the box only within each member's values */
	isl_union_set *tiles;
} holes_ctx;

/* isl_union_map_foreach_map callback of tiles_with_holes: m (taken) maps
 * one statement's instances to [tile values, point values]; add its holes
 * to hc->tiles. */
static isl_stat holes_cb(isl_map *m, void *user)
{
	holes_ctx *hc = user;
	isl_set *img = isl_map_range(m), *box;
	isl_map *fill;
	isl_size t = hc->depth + hc->n;
	int j;
	/* [T, P] -> [T, P']: P' the same in the members not tiled, anything
	 * of the tile in the others */
	fill = isl_map_universe(isl_space_map_from_set(isl_set_get_space(img)));
	for (j = 0; j < t; j++)
		fill = isl_map_equate(fill, isl_dim_in, j, isl_dim_out, j);
	for (j = 0; j < hc->n; j++) {
		if (!is_tiled(hc->sizes, j)) {
			fill = isl_map_equate(fill, isl_dim_in, t + j, isl_dim_out, t + j);
			continue;
		}
		fill = isl_map_lower_bound_si(fill, isl_dim_out, (unsigned)(t + j), 0);
		fill = isl_map_upper_bound_si(fill, isl_dim_out, (unsigned)(t + j),
			(int)(hc->sizes[j] - 1));
	}
	box = isl_set_apply(isl_set_copy(img), fill);
	/* a tiled member's value is its tile's plus its point's: capped,
	 * the box keeps the values some instance has (a partial tile's) */
	for (j = 0; hc->capped && j < hc->n; j++) {
		isl_local_space *ls;
		isl_multi_aff *ma;
		isl_set *vals;
		if (!is_tiled(hc->sizes, j))
			continue;
		ls = isl_local_space_from_space(isl_set_get_space(img));
		ma = isl_multi_aff_from_aff(isl_aff_add(isl_aff_var_on_domain(
			isl_local_space_copy(ls), isl_dim_set, (unsigned)(hc->depth + j)),
			isl_aff_var_on_domain(ls, isl_dim_set, (unsigned)(t + j))));
		vals = isl_set_apply(isl_set_copy(img), isl_map_from_multi_aff(
			isl_multi_aff_copy(ma)));
		box = isl_set_intersect(box, isl_set_preimage_multi_aff(vals, ma));
	}
	box = isl_set_subtract(box, img);
	for (j = hc->n - 1; j >= 0; j--)
		if (!hc->keep || !hc->keep[j])
			box = isl_set_project_out(box, isl_dim_set, (unsigned)(t + j), 1);
	hc->tiles = isl_union_set_add_set(hc->tiles, isl_set_coalesce(box));
	return hc->tiles ? isl_stat_ok : isl_stat_error;
}

/* The holes of the tiles of the instances that both (kept) maps to
 * [T, P], the values of the tile band's prefix schedule and members (T:
 * depth + n of them) and of the point band's members (P: n): the points
 * of a tile's box (P in [0, sizes[j]) where member j is tiled; capped:
 * and the member's value, tile plus point, one that some instance has)
 * that are no instance of a statement while an instance of it has the
 * same values of the untiled members.  A padded convolution's tile of
 * output columns w = 0 .. 2 lacks column 0 at the tap kw = 0, where
 * w + kw - 1 is outside the input, and has columns 1 and 2 there.  The
 * result: the holes' values of T and of the point members keep[] names
 * (NULL: none).  NULL on failure. */
static isl_union_set *tiles_with_holes(isl_union_map *both, isl_size depth, isl_size n,
	const int64_t *sizes, const int *keep, int capped)
{
	holes_ctx hc = {depth, n, sizes, keep, capped, NULL};
	hc.tiles = isl_union_set_empty(isl_union_map_get_space(both));
	if (isl_union_map_foreach_map(both, holes_cb, &hc) < 0)
		hc.tiles = isl_union_set_free(hc.tiles);
	return hc.tiles;
}

/* The most points convex_hull_on takes the hull of. */
#define HULL_POINTS 512

/* isl_set_foreach_point callback of convex_hull_on: pt added to the
 * union *user, until it holds HULL_POINTS. */
static isl_stat hull_point(isl_point *pt, void *user)
{
	isl_set **u = user;
	if (isl_set_n_basic_set(*u) >= HULL_POINTS) {
		isl_point_free(pt);
		return isl_stat_error;
	}
	*u = isl_set_union(*u, isl_set_from_point(pt));
	return *u ? isl_stat_ok : isl_stat_error;
}

/* The points of set (taken, bounded, without parameters) that end its
 * lines along its longest dimension: for each value of the other
 * dimensions, the least and the greatest value there.  Their convex hull
 * is set's where every line is an interval, and holds a point between two
 * of a line's where one is not, which the caller's test against the holes
 * then rejects.  A padded convolution's row of 224 columns in tiles of 3
 * gives 6 points (3 taps) instead of 223, whose hull took isl 0.3 s. */
static isl_set *line_ends(isl_set *set)
{
	isl_size nd = isl_set_dim(set, isl_dim_set);
	isl_map *m, *lo;
	int64_t span = -1;
	int d, v = -1;
	for (d = 0; d < nd; d++) {
		isl_val *hi = isl_pw_aff_max_val(isl_set_dim_max(isl_set_copy(set), d));
		isl_val *lo_ = isl_pw_aff_min_val(isl_set_dim_min(isl_set_copy(set), d));
		if (hi && lo_ && isl_val_is_int(hi) == isl_bool_true &&
			isl_val_is_int(lo_) == isl_bool_true &&
			isl_val_get_num_si(hi) - isl_val_get_num_si(lo_) > span) {
			span = isl_val_get_num_si(hi) - isl_val_get_num_si(lo_);
			v = d;
		}
		isl_val_free(hi);
		isl_val_free(lo_);
	}
	if (v < 0)
		return set;
	m = isl_map_move_dims(isl_map_from_domain(set), isl_dim_out, 0, isl_dim_in,
		(unsigned)v, 1);
	lo = isl_map_lexmin(isl_map_copy(m));
	m = isl_map_union(lo, isl_map_lexmax(m));
	m = isl_map_move_dims(m, isl_dim_in, (unsigned)v, isl_dim_out, 0, 1);
	return isl_map_domain(m);
}

/* The convex hull of the integer points of set (taken) over the
 * dimensions that set sep (taken: the constraints that separate the
 * holes from the instances) involves, the others unconstrained, or NULL
 * (no such dimension, parameters not fixed, more than HULL_POINTS points
 * at its lines' ends, or a failure).  Over all the dimensions (the tile
 * band's prefix, 17 in a padded convolution) isl's hull ran past the
 * pass's budget, and on the set isl's projection gives (with the tiles'
 * strides and the points' ranges as existentials) it is the hull of more
 * than the points; the points of the ones that matter (the tile of
 * output columns and the tap kw there: 19 tiles of 56 columns x 3 taps,
 * 6 of them at the lines' ends) take a few operations. */
static isl_set *convex_hull_on(isl_set *set, isl_set *sep)
{
	isl_size nd = isl_set_dim(set, isl_dim_set), np = isl_set_dim(set, isl_dim_param);
	isl_space *sp = isl_set_get_space(set);
	isl_set *pts;
	int d, ok = sep != NULL && nd >= 0 && np >= 0, any = 0, in[TC_POLY_MAX_TILE * 8];
	ok = ok && nd <= (isl_size)(sizeof(in) / sizeof(in[0]));
	for (d = 0; ok && d < nd; d++)
		any |= in[d] = isl_set_involves_dims(sep, isl_dim_set, (unsigned)d, 1) ==
			isl_bool_true;
	isl_set_free(sep);
	for (d = 0; ok && d < np; d++) { /* sizes known: the points are finite */
		isl_val *v = isl_set_plain_get_val_if_fixed(set, isl_dim_param, (unsigned)d);
		ok = v && isl_val_is_nan(v) == isl_bool_false;
		isl_val_free(v);
	}
	if (!ok || !any) {
		isl_space_free(sp);
		return isl_set_free(set);
	}
	for (d = nd - 1; d >= 0; d--)
		if (!in[d])
			set = isl_set_project_out(set, isl_dim_set, (unsigned)d, 1);
	set = line_ends(isl_set_project_out(set, isl_dim_param, 0, (unsigned)np));
	pts = isl_set_empty(isl_set_get_space(set));
	if (isl_set_foreach_point(set, hull_point, &pts) < 0)
		pts = isl_set_free(pts);
	isl_set_free(set);
	set = pts ? isl_set_from_basic_set(isl_set_convex_hull(pts)) : NULL;
	for (d = 0; d < nd; d++)
		if (!in[d])
			set = isl_set_insert_dims(set, isl_dim_set, (unsigned)d, 1);
	set = isl_set_align_params(set, isl_space_params(sp));
	return set;
}

/* The isolate option of the reduction's band, or NULL: the values of
 * the tile band's prefix and members and of the reduction members (T and
 * R; keep[j] says which members j of the tile band are the reduction's)
 * at which no tile of the update has a hole (tiles_with_holes, capped: a
 * partial tile's box is its own rows), where some have one.  isl's AST
 * build isolates the "unshifted simple hull" of what an option gives it
 * (isl_ast_codegen.c, generate_shifted_component_tree), which is all of
 * the reduction's values for a union such as the padded convolution's
 * (kw >= 1 at w0 = 0, kw <= 1 at w0 = 54, every kw between): so the
 * option is the convex hull of those values (i9 + kw >= 1 and i9 + kw <=
 * 55 there, with i9 the tile's w0), and none when the hull holds a hole.
 * red (taken) maps the update's instances to [T, P] as in
 * tiles_with_holes. */
static isl_union_set *reduction_isolate(isl_union_map *red, isl_size depth, isl_size n,
	const int64_t *sizes, const int *keep)
{
	isl_ctx *ctx = isl_union_map_get_ctx(red);
	isl_union_set *holes = tiles_with_holes(red, depth, n, sizes, keep, 1);
	isl_union_set *img = isl_union_map_range(red), *opt = NULL;
	isl_set *h = NULL, *all = NULL, *hull;
	isl_size t = depth + n;
	int j;
	/* the holes and the instances as one set each over [T, R] */
	if (holes && isl_union_set_n_set(holes) == 1)
		h = isl_set_from_union_set(isl_union_set_copy(holes));
	if (img && isl_union_set_n_set(img) == 1)
		all = isl_set_from_union_set(isl_union_set_copy(img));
	for (j = n - 1; all && j >= 0; j--)
		if (!keep[j])
			all = isl_set_project_out(all, isl_dim_set, (unsigned)(t + j), 1);
	if (h && all && isl_set_is_empty(h) == isl_bool_false) {
		hull = convex_hull_on(isl_set_subtract(isl_set_copy(all), isl_set_copy(h)),
			isl_set_gist(isl_set_copy(h), isl_set_copy(all)));
		if (hull && isl_set_is_disjoint(hull, h) == isl_bool_true)
			opt = isl_union_set_from_set(isl_set_coalesce(isl_set_gist(hull,
				isl_set_copy(all))));
		else
			isl_set_free(hull);
	}
	isl_set_free(h);
	isl_set_free(all);
	isl_union_set_free(holes);
	isl_union_set_free(img);
	return tc_poly_isolate_option(ctx, opt, t);
}

/* Tell the AST generator to generate the full tiles of tile band node
 * (its child the point band, sizes[] the tile sizes) apart from the partial
 * ones (isl's "isolate" option), so that the unrolled point loops of full
 * tiles have constant bounds and no guards.  A tile counts as full when,
 * for every tiled member, some instance of it sits at the tile's last
 * position, and when no statement has a hole in it (tiles_with_holes).
 *
 * The first test alone is exact for box domains (every TC domain without
 * a where or a pad); for others it isolated tiles whose point loops still
 * had bounds of the tile's position.  A padded convolution (O(n,f,h,w)
 * +=! pad(I(n,c,h+kh-1,w+kw-1), 0.0) * W1(f,c,kh,kw), whose pad restricts
 * the domain to 0 <= w + kw - 1 < W) had one isolated piece for every
 * tile of output columns w, the first included, whose rows loop ran from
 * max(0, 1 - w0 - kw): no constant bounds, so no vector code for any tile
 * (codegen/llvm_loop.c, vector_tile), and on an AVX2 host LLVM's
 * vectorisers left its columns scalar (8x64x56x56, 3 x 3, one thread:
 * about 400 ms against 50 for the valid convolution; docs/performance.md,
 * "Padded convolutions").  Without the tiles with holes the isolated
 * piece is the interior (w0 from 3 to 51 there), whose rows have constant
 * bounds; a box domain has holes in partial tiles only, which the first
 * test leaves out already, so its set stays as it was.  Where every full
 * tile has a hole (no interior: 14 columns in tiles of 12 and 2), the
 * full tiles stay isolated from the partial one, as before.
 *
 * The border tiles (w0 = 0, and the partial tile at 54) have holes at
 * some values of the reduction members only (kw = 0 at w0 = 0, kw = 2 at
 * 54).  Where the update's tiles have holes, *red_iso gets the isolate
 * option of the reduction's band (reduction_isolate: the values of T and
 * of the reduction members, keep[j] for member j, without holes, capped:
 * a partial tile's box is its own rows), so that the AST build generates
 * them apart too, with constant row bounds (kw = 1, 2 on the 3 rows at w0
 * = 0, kw = 0 on rows 1 and 2 apart); else it is left NULL.  updates
 * (kept): the update's instances. */
static isl_schedule_node *isolate_full_tiles(isl_schedule_node *node, const int64_t *sizes,
	isl_union_set *updates, const int *keep, isl_union_set **red_iso)
{
	isl_union_map *pt, *q, *both;
	isl_union_set *full = NULL;
	isl_size n = isl_schedule_node_band_n_member(node), depth;
	isl_ctx *ctx = isl_schedule_node_get_ctx(node);
	isl_schedule_node *child;
	int j;
	if (!node || n < 0)
		return node;
	depth = isl_schedule_node_get_schedule_depth(node);
	pt = isl_union_map_flat_range_product(isl_schedule_node_get_prefix_schedule_union_map(node),
		isl_schedule_node_band_get_partial_schedule_union_map(node));
	child = isl_schedule_node_get_child(node, 0);
	q = isl_union_map_intersect_domain(isl_schedule_node_band_get_partial_schedule_union_map(child),
		isl_schedule_node_get_domain(node));
	for (j = 0; j < n; j++) {
		isl_set *last;
		isl_union_set *at;
		if (!is_tiled(sizes, j))
			continue;
		last = isl_set_universe(isl_schedule_node_band_get_space(child));
		last = isl_set_fix_si(last, isl_dim_set, (unsigned)j, (int)(sizes[j] - 1));
		at = isl_union_map_domain(isl_union_map_intersect_range(isl_union_map_copy(q),
			isl_union_set_from_set(last)));
		at = isl_union_set_apply(at, isl_union_map_copy(pt));
		full = full ? isl_union_set_intersect(full, at) : at;
	}
	isl_schedule_node_free(child);
	both = isl_union_map_flat_range_product(isl_union_map_copy(pt), q);
	if (full) { /* tiles with holes are no full tiles (see above) */
		isl_union_set *holes = tiles_with_holes(both, depth, n, sizes, NULL, 0), *inner;
		isl_bool none = holes ? isl_union_set_is_disjoint(full, holes) : isl_bool_error;
		if (none < 0) {
			full = isl_union_set_free(full);
		} else if (!none) {
			inner = isl_union_set_subtract(isl_union_set_copy(full),
				isl_union_set_copy(holes));
			none = isl_union_set_is_empty(inner);
			if (none == isl_bool_false) {
				isl_union_set_free(full);
				full = inner;
			} else {
				isl_union_set_free(inner);
			}
		}
		isl_union_set_free(holes);
	}
	if (updates && keep) /* the reduction's values without holes */
		*red_iso = reduction_isolate(isl_union_map_intersect_domain(
			isl_union_map_copy(both), isl_union_set_copy(updates)), depth, n, sizes,
			keep);
	isl_union_map_free(both);
	/* only the constraints the schedule's own values do not imply: the
	 * exact set carries the tiles' divisibility and the domain's bounds
	 * as existentials and unions (a third of the AST build's time at
	 * matmul 1024), where the full tiles are a few inequalities on the
	 * tile loops */
	if (full)
		full = isl_union_set_coalesce(isl_union_set_gist(full, isl_union_set_coalesce(
			isl_union_set_apply(isl_schedule_node_get_domain(node),
				isl_union_map_copy(pt)))));
	isl_union_map_free(pt);
	full = tc_poly_isolate_option(ctx, full, depth);
	return full ? isl_schedule_node_band_set_ast_build_options(node, full) : node;
}

/* Whether moving the epilogue's instances after every reduction instance
 * of their tile keeps every dependence, known without the schedule: no
 * dependence runs from an epilogue instance to an instance of the band's
 * update or init (updates, inits: taken; NULL for none).  Only such
 * a pair can change its order: the tile's instances keep their band's
 * order among themselves otherwise (the band is permutable), and flow from
 * the reduction to the epilogue only gets later.  0 (the pass then checks
 * the whole schedule, which for fcrelu 128 x 784 x 128 cost a third of its
 * compile) also when isl fails. */
static int epilogue_may_move(const tc_poly *p, isl_union_set *epilogue,
	isl_union_set *updates, isl_union_set *inits)
{
	isl_union_map *d = isl_union_map_intersect_domain(isl_union_map_copy(p->deps),
		isl_union_set_copy(epilogue));
	isl_bool none;
	if (inits)
		updates = isl_union_set_union(updates, isl_union_set_copy(inits));
	d = isl_union_map_intersect_range(d, updates);
	none = isl_union_map_is_empty(d);
	isl_union_map_free(d);
	return none == isl_bool_true;
}

/* Band node with its members simplified on the band's instances (isl's
 * gist), where that changes one: a cache tile that spans the whole extent
 * of a member leaves `n mod 100` at 100, which the register tile then
 * splits into `(n + 28*floor(n/100)) mod 64`; its point loops' exactness
 * test (polyhedral/ast.c, analyse) compared such schedules for 5 ms per
 * statement, twice per compile (the pass, then the AST build), and the AST
 * build of the tile loops carried the floors too.  `n` instead: the same
 * values on every instance, so the same schedule.  Permutability,
 * coincidence and the AST build options go with the members. */
static isl_schedule_node *gist_band(isl_schedule_node *node)
{
	isl_multi_union_pw_aff *mupa = isl_schedule_node_band_get_partial_schedule(node), *g;
	isl_size n = isl_schedule_node_band_n_member(node), j;
	isl_union_set *opts;
	isl_bool same, perm;
	int coinc[TC_POLY_MAX_TILE * 2];
	g = isl_multi_union_pw_aff_gist(isl_multi_union_pw_aff_copy(mupa),
		isl_schedule_node_get_domain(node));
	same = g ? isl_multi_union_pw_aff_plain_is_equal(mupa, g) : isl_bool_error;
	isl_multi_union_pw_aff_free(mupa);
	if (same != isl_bool_false || n < 0 || n > TC_POLY_MAX_TILE * 2) {
		isl_multi_union_pw_aff_free(g);
		return node;
	}
	perm = isl_schedule_node_band_get_permutable(node);
	for (j = 0; j < n; j++)
		coinc[j] = isl_schedule_node_band_member_get_coincident(node, j) == isl_bool_true;
	opts = isl_schedule_node_band_get_ast_build_options(node);
	node = isl_schedule_node_delete(node);
	node = isl_schedule_node_insert_partial_schedule(node, g);
	node = isl_schedule_node_band_set_permutable(node, perm == isl_bool_true);
	for (j = 0; j < n; j++)
		node = isl_schedule_node_band_member_set_coincident(node, j, coinc[j]);
	return isl_schedule_node_band_set_ast_build_options(node, opts);
}

/* Whether register tiles of sizes[] leave a floor in band node's members
 * that gist_band removes: some member tiled by a size that does not divide
 * the number of its values (n mod 100 by 64, not n mod 256 or n mod 512),
 * or whose values are not known.  Asked first, since the gist costs about
 * a sixth of the pass where it changes nothing (matmul 256). */
static int needs_gist(isl_schedule_node *node, const int64_t *sizes)
{
	isl_size n = isl_schedule_node_band_n_member(node), j;
	for (j = 0; j < n; j++) {
		int64_t vals;
		if (sizes[j] <= 1 || sizes[j] >= HUGE_TILE)
			continue;
		vals = tc_poly_band_member_one_tile(node, (int)j);
		if (vals >= HUGE_TILE || vals % sizes[j] != 0)
			return 1;
	}
	return 0;
}

/* The register tiling of one contraction or column band (see above). */
static isl_schedule_node *regtile_band(isl_schedule_node *node, const tc_poly *p, int *moved)
{
	isl_size n = isl_schedule_node_band_n_member(node);
	int64_t sizes[TC_POLY_MAX_TILE * 2];
	int perm[TC_POLY_MAX_TILE * 2] = {0};
	int has_init, j, k, nred = 0, unrolled = 1;
	int keep[TC_POLY_MAX_TILE * 2];
	int column = 0, gist, unknown = 0;
	isl_union_set *red_iso = NULL;
	const tc_poly_stmt *st = tc_poly_contraction_band(p, node, &has_init);
	isl_size depth = isl_schedule_node_get_tree_depth(node);
	isl_union_set *epilogue, *inits;
	isl_multi_val *mv;
	if (!st && (st = tc_poly_column_band(p, node, &has_init)))
		column = 1;
	if (!st || n > TC_POLY_MAX_TILE * 2 || depth < 0 || (!column && strided_pooling(p, node, st)))
		return node;
	regtile_sizes(p, node, st, sizes);
	if (column && !column_sizes(p, node, st, sizes)) {
		node = column_rows(node, p, st, has_init);
		return isl_schedule_node_ancestor(node, isl_schedule_node_get_tree_depth(node) - depth);
	}
	gist = needs_gist(node, sizes);
	if (gist && isl_schedule_node_has_parent(node) == isl_bool_true) {
		/* the cache tile above too: n - n mod 100 is 0 */
		node = isl_schedule_node_parent(node);
		if (isl_schedule_node_get_type(node) == isl_schedule_node_band)
			node = gist_band(node);
		node = isl_schedule_node_child(node, 0);
	}
	if (gist)
		node = gist_band(node);
	mv = isl_multi_val_zero(isl_schedule_node_band_get_space(node));
	for (j = 0; j < n; j++) {
		int64_t t = sizes[j] >= HUGE_TILE ? tc_poly_band_member_one_tile(node, j) : sizes[j];
		unknown |= t >= HUGE_TILE;
		mv = isl_multi_val_set_val(mv, j, isl_val_int_from_si(p->ctx, t));
	}
	node = isl_schedule_node_band_tile(node, mv);
	if (gist) /* the tile members of a whole extent: r_k - r_k mod 100 is 0 */
		node = gist_band(node);
	node = isl_schedule_node_child(node, 0); /* the point band */
	/* isl's AST build needs the full tiles isolated where it builds the
	 * point loops; where polyhedral/ast.c builds them from the tile sizes
	 * (box domains: most contractions) it tests the extents itself, and
	 * computing the isolated set cost a tenth of a matmul's compile */
	/* not where a member's values are not known (one tile of
	 * HUGE_TILE values: a reduction over a parametric size) and an
	 * epilogue shares the band, at the end of that member (N - N mod
	 * HUGE_TILE): isl then built the partial tile as a loop over all of
	 * HUGE_TILE's values, each behind a test of N mod HUGE_TILE (sizes=
	 * parametric vector=2 ran for hours: fuzz_diff seed 20261206 case
	 * 51).  Without an epilogue (a weight gradient's reduction over the
	 * run-time batch) the full row tiles stay isolated */
	if (unknown) {
		isl_union_set *epi = instances_of(p, node, TC_POLY_ASSIGN);
		unknown = !epi || isl_union_set_is_empty(epi) != isl_bool_true;
		isl_union_set_free(epi);
	}
	if (!unknown && !tc_poly_points_exact(p, node)) {
		isl_union_set *updates = instances_of(p, node, TC_POLY_UPDATE);
		for (j = 0; j < n; j++)
			keep[j] = isl_schedule_node_band_member_get_coincident(node, j) !=
				isl_bool_true;
		node = isl_schedule_node_child(isolate_full_tiles(isl_schedule_node_parent(node),
			sizes, updates, keep, &red_iso), 0);
		isl_union_set_free(updates);
	}
	/* the mark tells code generators that the tile's reductions keep
	 * their order (vecreduce does not apply: the accumulators are the
	 * tile's, and a reduction loop vectorised along the reduction would
	 * undo the tile) */
	node = isl_schedule_node_insert_mark(node, isl_id_alloc(p->ctx, TC_POLY_MARK_REGTILE, NULL));
	node = isl_schedule_node_child(node, 0);
	/* the init's point loops first, then the reduction's, then those of the
	 * epilogue (order_before/after leave node on the band of the instances
	 * outside the filter); the pass checks the result against the
	 * dependences */
	inits = has_init ? instances_of(p, node, TC_POLY_INIT) : NULL;
	if (has_init)
		node = isl_schedule_node_order_before(node, isl_union_set_copy(inits));
	epilogue = instances_of(p, node, TC_POLY_ASSIGN);
	if (epilogue && isl_union_set_is_empty(epilogue) == isl_bool_false) {
		if (!epilogue_may_move(p, epilogue, instances_of(p, node, TC_POLY_UPDATE), inits))
			*moved = 1;
		node = isl_schedule_node_order_after(node, epilogue);
	} else
		isl_union_set_free(epilogue);
	isl_union_set_free(inits);
	/* reduction members first, then the parallel ones */
	for (j = k = 0; j < n; j++)
		if (isl_schedule_node_band_member_get_coincident(node, j) != isl_bool_true)
			perm[k++] = j;
	nred = k;
	for (j = 0; j < n; j++)
		if (isl_schedule_node_band_member_get_coincident(node, j) == isl_bool_true)
			perm[k++] = j;
	node = tc_poly_band_permute(node, perm);
	node = isl_schedule_node_band_split(node, nred);
	if (red_iso) /* a hole's reduction values apart (isolate_full_tiles) */
		node = isl_schedule_node_band_set_ast_build_options(node, red_iso);
	node = isl_schedule_node_child(node, 0); /* the parallel point loops */
	for (j = 0; j < n - nred - 1; j++)
		unrolled *= (int)sizes[perm[nred + j]];
	/* the rows are unrolled by the code generator, not by isl: a mark
	 * above the point loops rather than isl_ast_loop_unroll on their
	 * members, whose copies isl's AST build made one by one (a third of
	 * a matmul's compile: docs/performance.md, Compile latency) */
	if (p->opts.unroll && unrolled > 1 && unrolled <= MAX_UNROLL) {
		/* the rows in a band of their own between the two marks: the
		 * copies are the loops between them, whether or not isl
		 * leaves a loop for the innermost member (a partial tile one
		 * column wide has none) */
		node = isl_schedule_node_band_split(node, n - nred - 1);
		node = isl_schedule_node_insert_mark(node,
			isl_id_alloc(p->ctx, TC_POLY_MARK_UNROLL, NULL));
		node = isl_schedule_node_child(isl_schedule_node_child(node, 0), 0);
		node = isl_schedule_node_insert_mark(node,
			isl_id_alloc(p->ctx, TC_POLY_MARK_UNROLLED, NULL));
	}
	/* back to the position node had (now the tile band): the init and
	 * epilogue put a sequence and filters between it and the point loops */
	return isl_schedule_node_ancestor(node, isl_schedule_node_get_tree_depth(node) - depth);
}

static isl_bool band_below_cb(isl_schedule_node *node, void *user)
{
	int *found = user;
	if (*found)
		return isl_bool_false;
	if (isl_schedule_node_get_type(node) == isl_schedule_node_band) {
		*found = 1;
		return isl_bool_false;
	}
	return isl_bool_true;
}

/* Whether a band node lies below node. */
static int has_band_below(isl_schedule_node *node)
{
	int found = 0, i;
	isl_size n = isl_schedule_node_n_children(node);
	for (i = 0; i < n && !found; i++) {
		isl_schedule_node *c = isl_schedule_node_get_child(node, i);
		isl_schedule_node_foreach_descendant_top_down(c, band_below_cb, &found);
		isl_schedule_node_free(c);
	}
	return found;
}

/* regtile_band on band node when it is innermost (no band below). */
static isl_schedule_node *regtile_innermost(isl_schedule_node *node, const tc_poly *p, int *moved)
{
	return has_band_below(node) ? node : regtile_band(node, p, moved);
}

/* Apply regtile_band to every innermost band (one without a band below);
 * *moved is set when an epilogue moved that epilogue_may_move could not
 * clear. */
static isl_schedule_node *regtile_walk(isl_schedule_node *node, const tc_poly *p, int *moved)
{
	return tc_poly_bands_bottom_up(node, p, regtile_innermost, moved);
}

/* Running each element's init before its reduction is what TC's
 * semantics say; an epilogue (statements after the reduction in the same
 * band) moved after the tile's reduction is checked against the
 * dependences where epilogue_may_move cannot tell (the check costs compile
 * time, so only then: regtile_walk's flag), and a kernel it would break
 * keeps the schedule it had. */
tc_stat tc_poly_pass_regtile(__tc_keep tc_poly *p, __tc_keep tc_diags *d)
{
	if (!p->opts.nregtile && !p->opts.regtile_auto)
		return TC_OK;
	return tc_poly_walk_schedule_legal(p, d, regtile_walk, "tile for registers",
		"check a register tiling");
}

