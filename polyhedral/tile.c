/* Cache tiles: the tile pass (tc_poly_pass_tile).
 *
 * Tiles the outermost permutable band (packing copies aside: the band
 * tc_poly_first_band finds) with the tile option's sizes or, without
 * them, every nest's outermost permutable band (tc_poly_each_band) that is
 * a contraction's with BLIS-style blocks (below): a backward's several
 * matmuls each get theirs, where only the first nest's did (the derived
 * two-layer MLP backward, 256 x 1024 x 1024, 7.8-9.4 -> 7.0-7.2 ms on one
 * thread).  Tile loops run in
 * increasing order, so each element still accumulates in the same order.
 *
 * The block sizes come from the target description (p->target: MC, KC,
 * NC and the long-row MC, ir/target.h).  Uses the model's queries (poly.h)
 * and the band helpers (band.h); must not know the other passes or the
 * order they run in (schedule.c). */
#include "band.h"
#include "passes.h"

#include <isl/schedule_node.h>
#include <isl/val.h>

/* The row blocks' size: the target's MC (block_rows), or the long-row MC
 * (block_rows_long) for row members of long_rows or more (on the CPU 192
 * rows from 1536: B's blocks reloaded 4x less; sgemm 2048: 107.6 ms with
 * 48-row blocks, 91.5 with 96, 87.9 with 192; 1024 is the same with 48 or
 * 96), or, where the target asks for rows_per_thread, the outermost
 * band's row member (the parallel loop) in one block per thread, whose
 * rows the right operand's KC x NC blocks then all serve (the Intel host
 * of docs/performance.md), or, when that member
 * (the parallel loop) would split into a number of blocks the threads do
 * not share evenly, blocks of whole register tiles (6 rows) as even as
 * the threads allow (fully connected 784 -> 128 at 2 threads: 3 blocks of
 * 48 rows left one thread idle a third of the time; now 66 + 62). */
static int64_t rows_tile(const tc_poly *p, isl_schedule_node *node, int j, int64_t ext)
{
	const tc_target *tg = p->target;
	int64_t mc = ext >= tg->long_rows ? tg->block_rows_long : tg->block_rows, blocks, per, size;
	int64_t t = tg->threads;
	if (j != 0 || ext <= 0 || isl_schedule_node_get_tree_depth(node) > 3)
		return mc;
	if (tg->rows_per_thread) /* each thread's share: one block, split below */
		mc = ext;
	if (t < 2)
		return mc;
	blocks = (ext + mc - 1) / mc;
	if (blocks % t == 0)
		return mc;
	per = blocks / t > 0 ? blocks / t : 1;
	size = (ext + per * t - 1) / (per * t);
	size = (size + 5) / 6 * 6;
	return size >= 6 ? size : mc;
}

/* Cache tiles for a band whose window runs over whole images (sizes[n];
 * st its reduction): a convolution's weight gradient, d_W1(f,c,kh,kw) +=!
 * d_O(n,f,h,w) * I(n,c,h+kh,w+kw), whose reduction (n, h, w) reads rows of
 * the innermost member (d_O's 64 channels) that add up to more than half
 * the L2.  Untiled, every kernel tap (kh, kw) and tile of rows (c) streamed
 * all of d_O from the L3.  Here the reduction members from the innermost
 * outward stay whole while their points stay within the target's KC, the
 * next goes in blocks that keep them about KC, the outer ones in tiles of
 * 1; the outermost parallel member (the parallel loop) in tiles of a
 * register tile's rows (regtile_sizes': the accumulators over a row's
 * whole vectors of the innermost member, tc_poly_row_vectors' of them, at
 * most 12 rows; 6 rows for 64 floats on AVX-512 and on AVX2), the others
 * whole: a tile of rows
 * sweeps each block of d_O from the L2 once per tap.  8x64x56x56, d_O
 * 54 x 54 (docs/performance.md, "Weight gradients in blocks of the
 * reduction"): one thread 8.8 -> 7.5-8.0 ms, two 4.6 -> 4.2-4.3; blocks of
 * 4, 8 or 16 rows of h within the spread; tiles of 12 or 24 channels took
 * 1.04x and 1.13x the time of 6 on two threads.  0 when the rows stay in
 * the L2 or the sizes are unknown. */
static int image_tiles(const tc_poly *p, isl_schedule_node *node, const tc_poly_stmt *st,
	int64_t *sizes)
{
	isl_size n = isl_schedule_node_band_n_member(node);
	int64_t bytes = tc_dtype_size(p->f->tensors[st->ir->tensor].dtype);
	int64_t kc = p->target->block_depth, cols = tc_poly_band_member_extent(p, node, n - 1);
	int64_t lanes = bytes > 0 && bytes < p->target->vector_bytes ? p->target->vector_bytes / bytes : 1;
	int64_t vectors = tc_poly_row_vectors(p->target, 4), rows, inner = 1;
	double depth = 1;
	int j, outer = -1, blocked = 0;
	/* whole vectors of the row, one if it is shorter (regtile_sizes') */
	if (cols < vectors * lanes)
		vectors = cols >= lanes ? cols / lanes : 1;
	rows = p->target->accumulators / vectors > 12 ? 12 : p->target->accumulators / vectors;
	if (p->target->l2_bytes <= 0 || kc <= 0 || cols <= 0 || rows < 1 ||
		isl_schedule_node_band_member_get_coincident(node, n - 1) != isl_bool_true)
		return 0;
	for (j = 0; j < n; j++) {
		int64_t ext = tc_poly_band_member_extent(p, node, j);
		if (ext <= 0)
			return 0;
		if (isl_schedule_node_band_member_get_coincident(node, j) != isl_bool_true)
			depth *= (double)ext;
		else if (outer < 0 && j < n - 1)
			outer = j;
	}
	/* as many tiles of rows as threads at least (else the taps' parallel
	 * loop is kept: 8 channels, two threads) */
	if (outer < 0 || 2 * depth * (double)cols * (double)bytes <= (double)p->target->l2_bytes ||
		(tc_poly_band_member_extent(p, node, outer) + rows - 1) / rows < p->target->threads)
		return 0;
	for (j = n - 1; j >= 0; j--) {
		int64_t ext = tc_poly_band_member_extent(p, node, j), size, blocks;
		if (isl_schedule_node_band_member_get_coincident(node, j) == isl_bool_true) {
			sizes[j] = j == outer && ext > rows ? rows : HUGE_TILE;
			continue;
		}
		if (blocked) {
			sizes[j] = 1;
			continue;
		}
		if (inner * ext <= kc) {
			sizes[j] = HUGE_TILE;
			inner *= ext;
			continue;
		}
		size = kc / inner > 0 ? kc / inner : 1;
		blocks = (ext + size - 1) / size;
		sizes[j] = (ext + blocks - 1) / blocks;
		blocked = 1;
	}
	return blocked;
}

/* Cache tiles for a convolution's contraction band (sizes[n]; st its
 * reduction): a band with a parallel member and a reduction member that one
 * subscript of a read combines (w + r_kw).  Its weights' block for the
 * outermost reduction member (input channels) and the inner reduction
 * members whole (the kernel window) is the depth of a contraction: the
 * outermost reduction member goes in blocks of the target's conv_depth
 * over the window's points, evened out, so that the weights of a block
 * (22 of 64 channels x 3 x 3 x 64 output channels: 50 KiB) stay in L1
 * while the register tiles of a row of outputs sweep them; the parallel
 * members outside the register tile's (all but the innermost two) in tiles
 * of 1, so that the row's partial sums stay in cache between blocks.
 * conv2d 8x64x56x56 channels last: 0.7x the time with the weights (147
 * KiB) swept from L2 by every register tile.  0
 * when node is no convolution or its channels fit one block. */
static int conv_tiles(const tc_poly *p, isl_schedule_node *node, const tc_poly_stmt *st,
	int64_t *sizes)
{
	isl_size n = isl_schedule_node_band_n_member(node);
	int64_t window = 1, ext, blocks;
	int j, k, np, red = -1, window_member = 0;
	for (j = 0; j < n; j++) {
		int vj = tc_poly_band_member_var(node, j, st);
		if (isl_schedule_node_band_member_get_coincident(node, j) == isl_bool_true || vj < 0)
			continue;
		if (red < 0)
			red = j;
		else
			window *= tc_poly_band_member_extent(p, node, j);
		for (k = 0; k < n; k++) {
			int vk = tc_poly_band_member_var(node, k, st);
			if (vk >= 0 && isl_schedule_node_band_member_get_coincident(node, k) ==
				isl_bool_true && tc_poly_window_read(st->ir->rhs, vk, vj))
				window_member = 1;
		}
	}
	/* a window of more points than a block holds is no kernel window but
	 * a whole image (a convolution's weight gradient, d_W1(f,c,kh,kw) +=!
	 * d_O(n,f,h,w) * I(n,c,h+kh,w+kw): h and w): image_tiles (tiles of 1
	 * for c and kh left its register tiles rows of kw's 3 only, 13.2
	 * against 7.8 ms at 8x64x56x56) */
	if (window_member && red >= 0 && n >= 3 && window > p->target->conv_depth)
		return image_tiles(p, node, st, sizes);
	if (!window_member || red < 0 || window <= 0 || n < 3)
		return 0;
	ext = tc_poly_band_member_extent(p, node, red);
	sizes[red] = p->target->conv_depth / window > 0 ? p->target->conv_depth / window : 1;
	if (ext <= 0 || 2 * ext < 3 * sizes[red])
		return 0;
	blocks = (ext + sizes[red] - 1) / sizes[red];
	sizes[red] = (ext + blocks - 1) / blocks;
	for (j = 0, np = 0; j < n; j++)
		np += isl_schedule_node_band_member_get_coincident(node, j) == isl_bool_true;
	for (j = 0, k = 0; j < n; j++)
		if (j != red)
			sizes[j] = isl_schedule_node_band_member_get_coincident(node, j) == isl_bool_true &&
				k++ < np - 2 ? 1 : HUGE_TILE;
	return 1;
}

/* The reduction's block (KC) of contraction statement st whose innermost
 * member is cut into blocks of cols (the extent when shorter): 0, no
 * blocks, when the right operand's whole depth ext of those columns takes
 * less than half of the L2, where it stays as it is read (fully connected
 * 784 -> 128 with KC 128: its 392 KiB in 7 blocks took 1.01x the time of
 * 4 of 256, and unblocked 0.99x), else the target's KC. */
static int64_t depth_tile(const tc_poly *p, const tc_poly_stmt *st, int64_t ext, int64_t cols)
{
	int64_t bytes = tc_dtype_size(p->f->tensors[st->ir->tensor].dtype);
	if (p->target->l2_bytes > 0 && ext > 0 && cols > 0 &&
		2 * ext * cols * bytes < p->target->l2_bytes)
		return 0;
	return p->target->block_depth;
}

/* The reduction's block *kc (0: whole) and the columns' block *nc of
 * contraction statement st on a target with deep_blocks, where a register
 * tile keeps its rows of the left operand (MR x KC) in L1 while the
 * right operand's NR-wide panels of the KC x NC block stream from the L2
 * past it: KC is bounded by the L1 (MR x KC in half of it: 1024 floats for
 * 6 rows and 48 KiB), not by a KC x NR panel of the right operand, and the
 * outputs' partial sums go to memory and back once per block of the
 * reduction; NC follows from the L2 (the KC x NC block in half of it),
 * at most the target's NC.  Blocks of the reduction are evened out; a
 * reduction shorter than 1.5 blocks stays whole.  On the Intel host of
 * docs/performance.md (48 KiB L1d, 2 MiB L2: KC 1024, NC 256 for a
 * reduction of 1024 or 2048), sgemm 1024 on one thread 10.6-11.1 ->
 * 9.9-10.2 ms against KC 192 and NC 640, on two 5.6 -> 5.2-5.3, sgemm 2048
 * 88.6 -> 83-84 ("Deep blocks of the reduction").  0 where the band has
 * other than one reduction member or the sizes are unknown. */
static int deep_blocks(const tc_poly *p, isl_schedule_node *node, const tc_poly_stmt *st,
	int64_t *kc, int64_t *nc)
{
	const tc_target *tg = p->target;
	isl_size n = isl_schedule_node_band_n_member(node);
	int64_t bytes = tc_dtype_size(p->f->tensors[st->ir->tensor].dtype);
	int64_t vectors = tc_poly_row_vectors(tg, 4), rows = tg->accumulators / vectors;
	int64_t lanes = bytes > 0 && bytes < tg->vector_bytes ? tg->vector_bytes / bytes : 1;
	int64_t depth = -1, max, blocks, block, cols, nr = vectors * lanes;
	int j;
	if (!tg->deep_blocks || bytes <= 0 || rows < 1 || tg->l1_bytes <= 0 || tg->l2_bytes <= 0)
		return 0;
	for (j = 0; j < n; j++)
		if (isl_schedule_node_band_member_get_coincident(node, j) != isl_bool_true) {
			if (depth >= 0)
				return 0;
			depth = tc_poly_band_member_extent(p, node, j);
		}
	max = tg->l1_bytes / 2 / (rows * bytes) / 16 * 16;
	if (depth <= 0 || max < 16)
		return 0;
	blocks = 2 * depth < 3 * max ? 1 : (depth + max - 1) / max;
	block = (depth + blocks - 1) / blocks;
	*kc = blocks > 1 ? block : 0;
	cols = tg->l2_bytes / 2 / (block * bytes) / nr * nr;
	*nc = cols < nr ? nr : cols < tg->block_cols ? cols : tg->block_cols;
	return 1;
}

/* Cache tiles for a contraction band (BLIS-style blocking, sizes[n]): the
 * reduction member in blocks of KC, the innermost (vectorised) member in
 * blocks of NC and the parallel member the register tile's rows come from
 * in blocks of MC, so that a KC x NC block of the right operand stays in
 * L2 while MC / 6 row panels of the left one stream through L1 (the
 * target's block sizes: runtime/backend_cpu.c gives the host's and where
 * they were measured; the reduction's: depth_tile); members shorter than
 * 1.5 blocks are not tiled.  0 when node is no contraction or no member
 * is long enough to tile, or, unless rows_alone, when only the rows
 * would be (tile_band). */
static int auto_tiles(const tc_poly *p, isl_schedule_node *node, int64_t *sizes, int rows_alone)
{
	int has_init, j, rows = 0, tiled = 0, deep = 0, from_l2;
	int64_t cols = 0; /* the innermost member's block */
	int64_t kc, nc = p->target->block_cols;
	isl_size n = isl_schedule_node_band_n_member(node);
	const tc_poly_stmt *st = tc_poly_contraction_band(p, node, &has_init);
	if (!st || n > TC_POLY_MAX_TILE)
		return 0;
	if (conv_tiles(p, node, st, sizes))
		return 1;
	from_l2 = deep_blocks(p, node, st, &kc, &nc);
	for (j = n - 1; j >= 0; j--) {
		int coinc = isl_schedule_node_band_member_get_coincident(node, j) == isl_bool_true;
		int64_t ext = tc_poly_band_member_extent(p, node, j), size;
		if (!coinc)
			size = from_l2 ? kc : depth_tile(p, st, ext, cols);
		else if (j == n - 1)
			size = nc;
		else if (!rows++)
			size = rows_tile(p, node, j, ext);
		else
			size = 0;
		sizes[j] = size && ext > 0 && 2 * ext >= 3 * size ? size : HUGE_TILE;
		tiled += sizes[j] == size;
		deep += sizes[j] == size && (!coinc || j == n - 1);
		if (j == n - 1)
			cols = sizes[j] < HUGE_TILE ? sizes[j] : ext;
	}
	return tiled > 0 && (rows_alone || deep > 0);
}

/* Tile band node with the option's sizes or the automatic ones; *seen
 * counts the bands seen before.  Past the first nest's band, blocks of
 * rows alone are left out: where neither the reduction nor the columns
 * go in blocks, the operands stay in the L2 anyway, and a loop over
 * blocks of rows outside the band's other members only cut its parallel
 * loop short (attention's P V on two threads, 256 rows in blocks of 48
 * outside the 8 heads: 6 blocks of work 144 against 112 rows, 0.38 ms
 * against 0.364). */
static isl_schedule_node *tile_band(isl_schedule_node *node, const tc_poly *p, int *seen)
{
	isl_size n = isl_schedule_node_band_n_member(node), i;
	isl_multi_val *sizes;
	int64_t chosen[TC_POLY_MAX_TILE];
	int first = !*seen;
	++*seen;
	if (!p->opts.ntile && !auto_tiles(p, node, chosen, first))
		return node;
	sizes = isl_multi_val_zero(isl_schedule_node_band_get_space(node));
	for (i = 0; i < n; i++) { /* untiled members: one tile covers them */
		int64_t size = p->opts.ntile ? (i < p->opts.ntile ? p->opts.tile[i] : HUGE_TILE)
					     : chosen[i];
		if (size >= HUGE_TILE)
			size = tc_poly_band_member_one_tile(node, i);
		sizes = isl_multi_val_set_val(sizes, i, isl_val_int_from_si(p->ctx, size));
	}
	return isl_schedule_node_band_tile(node, sizes);
}

/* The option's sizes for the first band; the automatic ones for every
 * nest's (each contraction of a multi-statement def, a backward's
 * several matmuls, gets its blocks; docs/performance.md, "Cache blocks
 * for every nest"). */
static isl_schedule_node *tile_first_band(isl_schedule_node *node, const tc_poly *p, int *done)
{
	int seen = 0;
	if (!p->opts.ntile)
		return tc_poly_each_band(node, p, tile_band, &seen);
	return tc_poly_first_band(node, p, tile_band, done, &seen);
}

tc_stat tc_poly_pass_tile(__tc_keep tc_poly *p, __tc_keep tc_diags *d)
{
	int done;
	if (!p->opts.ntile && !p->opts.tile_auto)
		return TC_OK;
	return tc_poly_walk_schedule(p, d, tile_first_band, "tile a band", &done);
}
