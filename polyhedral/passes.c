/* Schedule passes (tc_poly_pass): transformations of the schedule tree
 * after the isl scheduler.
 *
 * tc_poly_pass_order: in every permutable band, move to the innermost
 * position the member that indexes the last (stride-1) dimension of the
 * most accesses, preferring a coincident (parallel) member, so that the
 * innermost loop walks memory contiguously and can be vectorised.  Any order
 * of the members of a permutable band is legal.  Members keep their
 * relative order otherwise, so the reduction indices of a statement keep
 * theirs and every element accumulates in the same order as before.
 *
 * tc_poly_pass_interchange: the interchange option's explicit order of the
 * members of the band the tile pass tiles, after the order pass, so that it
 * sets the order of the cache-tile loops and of the loops within tiles. */
#include "poly.h"

#include "../lang/sexpr.h"

#include <isl/aff.h>
#include <isl/id.h>
#include <isl/ilp.h>
#include <isl/map.h>
#include <isl/schedule_node.h>
#include <isl/space.h>
#include <isl/val.h>

#include <string.h>

/* The bytes of one vector register of the hosts tcomp tunes for (AVX-512);
 * the register tile's innermost size is a multiple of its lanes. */
#define VECTOR_BYTES 64

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

/* The domain variable of set's statement that band member member walks
 * (a single variable plus a constant on every piece), or -1. */
static int set_member_var(isl_set *set, isl_union_pw_aff *member)
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
	int var = set_member_var(set, s->member);
	if (st && var >= 0)
		s->score += stmt_score(st, var);
	isl_set_free(set);
	return isl_stat_ok;
}

/* Reorder the members of permutable band node: member perm[j] becomes
 * member j; permutability and coincidence go with the members. */
static isl_schedule_node *permute_band(isl_schedule_node *node, const int *perm)
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

/* Move member j of permutable band node (n members) innermost; the others
 * keep their order. */
static isl_schedule_node *move_innermost(isl_schedule_node *node, isl_size n, int j)
{
	int *perm = tc_malloc((size_t)(n > 0 ? n : 1) * sizeof(int)), k;
	if (!perm)
		return isl_schedule_node_free(node);
	for (k = 0; k < n; k++)
		perm[k] = k < j ? k : k < n - 1 ? k + 1 : j;
	node = permute_band(node, perm);
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
	lanes_ = VECTOR_BYTES / size;
	if (tc_sx_eval(t->ext[ir->nlhs - 1], p->params, NULL, &ext) < 0 || ext >= lanes_ ||
		!reads_along_reduction(ir, ir->rhs, &n) || n < 2)
		return -1;
	while (first->op != TC_OP_READ && first->nargs) /* the first read's reduction index */
		first = first->args[0];
	return first->op == TC_OP_READ ? tc_ir_plain_var(first->args[first->nargs - 1]) : -1;
}

typedef struct dot_ctx {
	const tc_poly *p;
	isl_union_pw_aff *member;
	int found;
} dot_ctx;

static isl_stat dot_cb(isl_set *set, void *user)
{
	dot_ctx *dc = user;
	const tc_poly_stmt *st = tc_poly_find_stmt(dc->p, isl_set_get_tuple_name(set));
	int v = st ? dot_var(dc->p, st) : -1;
	if (v >= 0 && set_member_var(set, dc->member) == v)
		dc->found = 1;
	isl_set_free(set);
	return isl_stat_ok;
}

/* The member of band node that walks a dot product's reduction, or -1. */
static int dot_member(const tc_poly *p, isl_schedule_node *node, isl_multi_union_pw_aff *mupa,
	isl_union_set *dom, isl_size n)
{
	int j;
	for (j = 0; j < n; j++) {
		dot_ctx dc = {p, isl_multi_union_pw_aff_get_union_pw_aff(mupa, j), 0};
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
	int j, best = -1, best_score = 0, dot;

	if (isl_schedule_node_get_type(node) != isl_schedule_node_band ||
		isl_schedule_node_band_get_permutable(node) != isl_bool_true)
		return node;
	n = isl_schedule_node_band_n_member(node);
	if (n < 2)
		return node;
	mupa = isl_schedule_node_band_get_partial_schedule(node);
	dom = isl_schedule_node_get_domain(node);
	if ((dot = dot_member(p, node, mupa, dom, n)) >= 0) {
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
	isl_union_set_free(dom);
	isl_multi_union_pw_aff_free(mupa);
	if (best < 0 || best == n - 1)
		return node;
	return move_innermost(node, n, best);
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

#define HUGE_TILE (INT64_C(1) << 40) /* a tile size that leaves a member untiled */

static const tc_poly_stmt *contraction_band(const tc_poly *p, isl_schedule_node *node,
	int *has_init);
static int64_t member_extent(isl_schedule_node *node, int j);

/* Cache tiles for a contraction band (BLIS-style blocking, sizes[n]): the
 * reduction member in blocks of KC, the innermost (vectorised) member in
 * blocks of NC and the parallel member the register tile's rows come from
 * in blocks of MC, so that a KC x NC block of the right operand stays in
 * the 1 MiB L2 cache while MC / 6 row panels of the left one stream
 * through L1; members shorter than 1.5 blocks are not tiled.  Measured on
 * matmul 1024 (docs/performance.md).  0 when node is no contraction or no
 * member is long enough to tile. */
#define TILE_MC 48
#define TILE_MC_LONG 192 /* rows of 1536 or more: B's blocks reloaded 4x less */
#define TILE_KC 256
#define TILE_NC 512
/* The row blocks' size: TILE_MC, or TILE_MC_LONG for long rows members
 * (sgemm 2048: 107.6 ms with 48-row blocks, 91.5 with 96, 87.9 with 192;
 * 1024 is the same with 48 or 96), or, when the outermost band's row member
 * (the parallel loop) would split into a number of blocks the threads do
 * not share evenly, blocks of whole register tiles (6 rows) as even as
 * the threads allow (fully connected 784 -> 128 at 2 threads: 3 blocks of
 * 48 rows left one thread idle a third of the time; now 66 + 62). */
static int64_t rows_tile(const tc_poly *p, isl_schedule_node *node, int j, int64_t ext)
{
	int64_t mc = ext >= 1536 ? TILE_MC_LONG : TILE_MC, blocks, per, size, t = p->opts.threads;
	if (t < 2 || j != 0 || ext <= 0 || isl_schedule_node_get_tree_depth(node) > 3)
		return mc;
	blocks = (ext + mc - 1) / mc;
	if (blocks % t == 0)
		return mc;
	per = blocks / t > 0 ? blocks / t : 1;
	size = (ext + per * t - 1) / (per * t);
	size = (size + 5) / 6 * 6;
	return size >= 6 ? size : mc;
}

static int auto_tiles(const tc_poly *p, isl_schedule_node *node, int64_t *sizes)
{
	int has_init, j, rows = 0, tiled = 0;
	isl_size n = isl_schedule_node_band_n_member(node);
	if (!contraction_band(p, node, &has_init) || n > TC_POLY_MAX_TILE)
		return 0;
	for (j = n - 1; j >= 0; j--) {
		int coinc = isl_schedule_node_band_member_get_coincident(node, j) == isl_bool_true;
		int64_t ext = member_extent(node, j), size;
		if (!coinc)
			size = TILE_KC;
		else if (j == n - 1)
			size = TILE_NC;
		else if (!rows++)
			size = rows_tile(p, node, j, ext);
		else
			size = 0;
		sizes[j] = size && ext > 0 && 2 * ext >= 3 * size ? size : HUGE_TILE;
		tiled += sizes[j] == size;
	}
	return tiled > 0;
}

/* Whether node schedules packing copies only (left untiled). */
static int is_pack_band(const tc_poly *p, isl_schedule_node *node)
{
	isl_union_set *dom = isl_schedule_node_get_domain(node);
	int pack = tc_poly_is_pack(p, dom);
	isl_union_set_free(dom);
	return pack;
}

/* What a pass does to the first band (see first_band); sets *changed
 * when it changes the band. */
typedef isl_schedule_node *(*band_fn)(isl_schedule_node *node, const tc_poly *p, int *changed);

/* Find the outermost permutable band with at least one member (in tree
 * order, packing copies aside: the band the cache tiles and the
 * interchange apply to) and apply fn to it; *found is set once it is
 * found, *changed by fn. */
static isl_schedule_node *first_band(isl_schedule_node *node, const tc_poly *p, band_fn fn,
	int *found, int *changed)
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
		node = first_band(node, p, fn, found, changed);
		node = isl_schedule_node_parent(node);
	}
	return node;
}

/* Tile band node with the option's sizes or the automatic ones. */
static isl_schedule_node *tile_band(isl_schedule_node *node, const tc_poly *p, int *changed)
{
	isl_size n = isl_schedule_node_band_n_member(node), i;
	isl_multi_val *sizes;
	int64_t chosen[TC_POLY_MAX_TILE];
	if (!p->opts.ntile && !auto_tiles(p, node, chosen))
		return node;
	sizes = isl_multi_val_zero(isl_schedule_node_band_get_space(node));
	for (i = 0; i < n; i++) /* untiled members: one tile covers them */
		sizes = isl_multi_val_set_val(sizes, i, isl_val_int_from_si(p->ctx,
			p->opts.ntile ? (i < p->opts.ntile ? p->opts.tile[i] : HUGE_TILE)
				      : chosen[i]));
	*changed = 1;
	return isl_schedule_node_band_tile(node, sizes);
}

static isl_schedule_node *tile_first_band(isl_schedule_node *node, const tc_poly *p, int *done)
{
	int changed = 0;
	return first_band(node, p, tile_band, done, &changed);
}

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
	return permute_band(node, perm);
}

static isl_schedule_node *interchange_first_band(isl_schedule_node *node, const tc_poly *p,
	int *changed)
{
	int found = 0;
	return first_band(node, p, interchange_band, &found, changed);
}

static tc_stat walk_failed(tc_poly *p, tc_diags *d, const char *what)
{
	tc_loc none;
	memset(&none, 0, sizeof(none));
	tc_error(d, none, "internal error: isl could not %s: %s", what,
		isl_ctx_last_error_msg(p->ctx) ? isl_ctx_last_error_msg(p->ctx) : "?");
	return TC_ERR;
}

/* Apply walk to the schedule tree from its root, with *flag (cleared
 * first) for the walk to set; what names the work in the error message. */
static tc_stat walk_schedule(tc_poly *p, tc_diags *d,
	isl_schedule_node *(*walk)(isl_schedule_node *node, const tc_poly *p, int *flag),
	const char *what, int *flag)
{
	isl_schedule_node *node;
	*flag = 0;
	node = walk(isl_schedule_get_root(p->schedule), p, flag);
	isl_schedule_free(p->schedule);
	p->schedule = node ? isl_schedule_node_get_schedule(node) : NULL;
	isl_schedule_node_free(node);
	return p->schedule ? TC_OK : walk_failed(p, d, what);
}

/* ---- merging band chains ---- */

/* The number of coincident members of band node. */
static int n_coincident(isl_schedule_node *node)
{
	isl_size n = isl_schedule_node_band_n_member(node), j;
	int c = 0;
	for (j = 0; j < n; j++)
		c += isl_schedule_node_band_member_get_coincident(node, j) == isl_bool_true;
	return c;
}

/* Merge band node with the chain of bands directly below it into one band
 * marked permutable, members and coincidence kept in order. */
static isl_schedule_node *merge_chain(isl_schedule_node *node, int *merged)
{
	isl_multi_union_pw_aff *mupa = isl_schedule_node_band_get_partial_schedule(node);
	int coinc[TC_POLY_MAX_TILE], n = 0, j;
	isl_size m;
	for (;;) {
		m = isl_schedule_node_band_n_member(node);
		for (j = 0; j < m && n < TC_POLY_MAX_TILE; j++)
			coinc[n++] = isl_schedule_node_band_member_get_coincident(node, j) == isl_bool_true;
		node = isl_schedule_node_delete(node);
		if (!node || isl_schedule_node_get_type(node) != isl_schedule_node_band)
			break;
		mupa = isl_multi_union_pw_aff_flat_range_product(mupa,
			isl_schedule_node_band_get_partial_schedule(node));
	}
	node = isl_schedule_node_insert_partial_schedule(node, mupa);
	node = isl_schedule_node_band_set_permutable(node, 1);
	for (j = 0; j < n; j++)
		node = isl_schedule_node_band_member_set_coincident(node, j, coinc[j]);
	*merged = 1;
	return node;
}

/* Merge the chains of nested bands that the isl scheduler splits around a
 * reduction's later members.  A reduction over several indices keeps its
 * order (the interpreter's, for bit-identical sums), so the scheduler puts
 * every reduction member after the first in a band of its own, below the
 * parallel members: conv2d's O(n,f,h,w) +=! I(n,r_c,h+r_kh,w+r_kw) *
 * W1(f,r_c,r_kh,r_kw) gets bands (f,h,r_c,w), (r_kh), (r_kw), with the
 * vectorisable w outside two reduction loops.  A parallel member carries no
 * dependence, so it may move below the reduction members as long as those
 * keep their order: the chain becomes one band marked permutable, the order
 * pass moves w innermost and the register tile applies.  Such a band is
 * not permutable in isl's sense (tiling two of its reduction members
 * would reorder the sum), so tc_poly_schedule checks the final schedule
 * against the dependences and schedules again without merging when it
 * fails.  Merges a chain only when its upper band has both parallel and
 * reduction members (a reduction continues below) and the chain ends in a
 * band without parallel members. */
static isl_schedule_node *merge_walk(isl_schedule_node *node, const tc_poly *p, int *merged)
{
	isl_size n, i;
	if (!node)
		return NULL;
	if (isl_schedule_node_get_type(node) == isl_schedule_node_band &&
		isl_schedule_node_band_get_permutable(node) == isl_bool_true &&
		n_coincident(node) > 0 && n_coincident(node) < isl_schedule_node_band_n_member(node)) {
		isl_schedule_node *last = isl_schedule_node_copy(node);
		int depth = 0, total = isl_schedule_node_band_n_member(node);
		while (last && isl_schedule_node_n_children(last) == 1) {
			last = isl_schedule_node_child(last, 0);
			if (isl_schedule_node_get_type(last) != isl_schedule_node_band) {
				last = isl_schedule_node_parent(last);
				break;
			}
			depth++;
			total += isl_schedule_node_band_n_member(last);
		}
		if (depth > 0 && total <= TC_POLY_MAX_TILE && !n_coincident(last))
			node = merge_chain(node, merged);
		isl_schedule_node_free(last);
	}
	n = node ? isl_schedule_node_n_children(node) : 0;
	for (i = 0; i < n && node; i++) {
		node = isl_schedule_node_child(node, i);
		node = merge_walk(node, p, merged);
		node = isl_schedule_node_parent(node);
	}
	return node;
}

tc_stat tc_poly_pass_merge(tc_poly *p, tc_diags *d)
{
	isl_schedule_node *node;
	p->merged = 0;
	if (p->no_merge)
		return TC_OK;
	node = merge_walk(isl_schedule_get_root(p->schedule), p, &p->merged);
	if (!node)
		return walk_failed(p, d, "merge bands");
	if (p->merged) { /* else the tree as the scheduler printed it */
		isl_schedule_free(p->schedule);
		p->schedule = isl_schedule_node_get_schedule(node);
	}
	isl_schedule_node_free(node);
	return p->schedule ? TC_OK : walk_failed(p, d, "merge bands");
}

/* Any order of a permutable band's members is legal, but the merge pass
 * marks bands permutable that are not in isl's sense (a reduction over
 * several indices, whose members must keep their order), so the result is
 * checked against the dependences and dropped when it breaks one.  The
 * check costs compile time, so it runs only when a band changed. */
tc_stat tc_poly_pass_interchange(tc_poly *p, tc_diags *d)
{
	isl_schedule *before;
	int changed, legal;
	if (!p->opts.ninterchange)
		return TC_OK;
	before = isl_schedule_copy(p->schedule);
	if (walk_schedule(p, d, interchange_first_band, "interchange a band", &changed) < 0) {
		isl_schedule_free(before);
		return TC_ERR;
	}
	legal = changed ? tc_poly_schedule_legal(p, p->schedule) : 1;
	if (legal == 0) {
		isl_schedule_free(p->schedule);
		p->schedule = isl_schedule_copy(before);
	}
	isl_schedule_free(before);
	return legal < 0 ? walk_failed(p, d, "check an interchange") : TC_OK;
}

tc_stat tc_poly_pass_tile(tc_poly *p, tc_diags *d)
{
	int done;
	if (!p->opts.ntile && !p->opts.tile_auto)
		return TC_OK;
	return walk_schedule(p, d, tile_first_band, "tile a band", &done);
}

/* ---- register tiling ---- */

#define MAX_UNROLL 32 /* the most copies the unrolled point loops may make */

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
		; /* an epilogue: regtile_band moves it after the reduction */
	else if (!st || (b->ir_index >= 0 && b->ir_index != st->ir_index))
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

/* The number of values member j of a band takes over the band's domain, or
 * 0 when that is not a known constant (a parametric model). */
static int64_t member_extent(isl_schedule_node *node, int j)
{
	isl_multi_union_pw_aff *mupa = isl_schedule_node_band_get_partial_schedule(node);
	isl_union_pw_aff *upa = isl_multi_union_pw_aff_get_union_pw_aff(mupa, j);
	isl_union_set *img = isl_union_set_apply(isl_schedule_node_get_domain(node),
		isl_union_map_from_union_pw_aff(upa));
	isl_set *set = isl_set_from_union_set(img);
	isl_val *lo = isl_set_dim_min_val(isl_set_copy(set), 0);
	isl_val *hi = isl_set_dim_max_val(set, 0);
	int64_t n = 0;
	isl_multi_union_pw_aff_free(mupa);
	if (lo && hi && isl_val_is_int(lo) && isl_val_is_int(hi))
		n = isl_val_get_num_si(hi) - isl_val_get_num_si(lo) + 1;
	isl_val_free(lo);
	isl_val_free(hi);
	return n;
}

/* A band the register tiling (and the automatic cache tiles) apply to: a
 * permutable band of one reduction whose innermost member is parallel
 * (vectorisable) and which has a reduction (non-coincident) member and at
 * least two parallel ones.  Returns the update statement or NULL. */
static const tc_poly_stmt *contraction_band(const tc_poly *p, isl_schedule_node *node,
	int *has_init)
{
	isl_size n, j;
	int ncoinc = 0;
	if (isl_schedule_node_get_type(node) != isl_schedule_node_band ||
		isl_schedule_node_band_get_permutable(node) != isl_bool_true)
		return NULL;
	n = isl_schedule_node_band_n_member(node);
	if (n < 3 || isl_schedule_node_band_member_get_coincident(node, n - 1) != isl_bool_true)
		return NULL;
	for (j = 0; j < n; j++)
		ncoinc += isl_schedule_node_band_member_get_coincident(node, j) == isl_bool_true;
	if (ncoinc < 2 || ncoinc == n)
		return NULL;
	return band_reduction(p, node, has_init);
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
	int64_t reg = size > 0 && size < VECTOR_BYTES ? VECTOR_BYTES / size : 1;
	return p->opts.vector > 0 && p->opts.vector < reg ? p->opts.vector : reg;
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
		mc->var = set_member_var(set, mc->member);
	isl_set_free(set);
	return isl_stat_ok;
}

/* The index variable of statement st that member j of band node walks, or
 * -1 when it walks none alone. */
static int member_var(isl_schedule_node *node, int j, const tc_poly_stmt *st)
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

/* The vector loads one step of the reduction shares between the rows of a
 * register tile whose rows walk var: reads of e that use the vectorised
 * index inner but not var. */
static int shared_vectors(const tc_ir_expr *e, int var, int inner)
{
	int i, n = e->op == TC_OP_READ && uses(e, inner) && !uses(e, var);
	if (e->op != TC_OP_READ)
		for (i = 0; i < e->nargs; i++)
			n += shared_vectors(e->args[i], var, inner);
	return n;
}

/* The member of contraction band node whose values the register tile's
 * rows take: the parallel member (the innermost aside) whose rows share
 * the most vector loads (conv2d's output channels f: every row reads the
 * same input vector, where rows of h each read their own), the one nearest
 * the innermost among equals; -1 if there is none. */
static int rows_member(isl_schedule_node *node, const tc_poly_stmt *st)
{
	isl_size n = isl_schedule_node_band_n_member(node);
	int j, best = -1, best_shared = -1, inner = member_var(node, n - 1, st);
	for (j = n - 2; j >= 0; j--) {
		int var, shared;
		if (isl_schedule_node_band_member_get_coincident(node, j) != isl_bool_true)
			continue;
		var = member_var(node, j, st);
		shared = var >= 0 && inner >= 0 ? shared_vectors(st->ir->rhs, var, inner) : 0;
		if (shared > best_shared) {
			best_shared = shared;
			best = j;
		}
	}
	return best;
}

/* The register tile sizes of every member of contraction band node
 * (sizes[n]): the reduction members untiled, the parallel ones from the
 * option (innermost last; members it does not reach get 1) or, when
 * automatic, up to 4 whole vectors of the innermost member (the rest of
 * shorter rows in partial tiles) by rows of rows_member, 24 accumulators
 * in all of AVX-512's 32 registers (6 x 4, 8 x 3, 12 x 2 or 1), the rest
 * for the shared vector loads and broadcasts; clipped to the extents.  A
 * row shorter than a vector gets one vector and 6 rows (fcrelu 128x128x10:
 * 0.022 ms, against 0.029 with 12 rows of 10).  unroll_inner=U makes that
 * U vectors per row (24 / U rows, at most 12), so that the innermost point
 * loop is one trip of U interleaved vectors; vector=N makes the vectors N
 * lanes (lanes()). */
static void regtile_sizes(const tc_poly *p, isl_schedule_node *node, const tc_poly_stmt *st,
	int64_t *sizes)
{
	isl_size n = isl_schedule_node_band_n_member(node);
	int64_t vl = lanes(p, st), rows = 6, nvec = p->opts.unroll_inner ? p->opts.unroll_inner : 4;
	int j, k = p->opts.nregtile, row = p->opts.nregtile ? -1 : rows_member(node, st);
	for (j = n - 1; j >= 0; j--) {
		int64_t ext = member_extent(node, j), size;
		if (isl_schedule_node_band_member_get_coincident(node, j) != isl_bool_true) {
			sizes[j] = HUGE_TILE;
			continue;
		}
		if (p->opts.nregtile) {
			size = k > 0 ? p->opts.regtile[--k] : 1;
		} else if (j == n - 1) {
			size = nvec * vl;
			if (ext > 0 && ext < vl) { /* one partial vector, 6 rows */
				size = vl;
				rows = 6;
			} else {
				if (ext > 0 && ext < size) /* whole vectors; the rest a partial tile */
					size = ext / vl * vl;
				rows = 24 / (size / vl) > 12 ? 12 : 24 / (size / vl);
			}
		} else {
			size = j == row ? rows : 1;
			if (ext > 0 && size > ext)
				size = ext;
		}
		sizes[j] = size;
	}
}

/* Tell the AST generator to generate the full tiles of tile band node
 * (its child the point band, sizes[] the tile sizes) apart from the partial
 * ones (isl's "isolate" option), so that the unrolled point loops of full
 * tiles have constant bounds and no guards.  A tile counts as full when,
 * for every tiled member, some instance of it sits at the tile's last
 * position: exact for box domains (every TC domain without a where); for
 * others the isolated part is merely generated separately, still
 * correctly. */
static isl_schedule_node *isolate_full_tiles(isl_schedule_node *node, const int64_t *sizes)
{
	isl_union_map *pt, *q;
	isl_union_set *full = NULL;
	isl_size n = isl_schedule_node_band_n_member(node), depth;
	isl_ctx *ctx = isl_schedule_node_get_ctx(node);
	isl_schedule_node *child;
	isl_set *set;
	isl_map *rel;
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
		if (sizes[j] <= 1 || sizes[j] >= HUGE_TILE)
			continue;
		last = isl_set_universe(isl_schedule_node_band_get_space(child));
		last = isl_set_fix_si(last, isl_dim_set, (unsigned)j, (int)(sizes[j] - 1));
		at = isl_union_map_domain(isl_union_map_intersect_range(isl_union_map_copy(q),
			isl_union_set_from_set(last)));
		at = isl_union_set_apply(at, isl_union_map_copy(pt));
		full = full ? isl_union_set_intersect(full, at) : at;
	}
	isl_schedule_node_free(child);
	isl_union_map_free(q);
	isl_union_map_free(pt);
	/* no full tile (a member shorter than its tile) leaves the union empty,
	 * with no space to convert */
	if (!full || isl_union_set_n_set(full) != 1) {
		isl_union_set_free(full);
		return node;
	}
	set = isl_set_from_union_set(full);
	if (!set || isl_set_is_empty(set) == isl_bool_true) {
		isl_set_free(set);
		return node;
	}
	set = isl_set_reset_tuple_id(set);
	rel = isl_map_from_domain(set);
	rel = isl_map_move_dims(rel, isl_dim_out, 0, isl_dim_in, (unsigned)depth, (unsigned)n);
	set = isl_map_wrap(rel);
	set = isl_set_set_tuple_id(set, isl_id_alloc(ctx, "isolate", NULL));
	return isl_schedule_node_band_set_ast_build_options(node, isl_union_set_from_set(set));
}

/* The register tiling of one contraction band (see poly.h). */
static isl_schedule_node *regtile_band(isl_schedule_node *node, const tc_poly *p, int *moved)
{
	isl_size n = isl_schedule_node_band_n_member(node);
	int64_t sizes[TC_POLY_MAX_TILE * 2];
	int perm[TC_POLY_MAX_TILE * 2] = {0};
	int has_init, j, k, nred = 0, unrolled = 1;
	const tc_poly_stmt *st = contraction_band(p, node, &has_init);
	isl_size depth = isl_schedule_node_get_tree_depth(node);
	isl_union_set *epilogue;
	isl_multi_val *mv;
	if (!st || n > TC_POLY_MAX_TILE * 2 || depth < 0)
		return node;
	regtile_sizes(p, node, st, sizes);
	mv = isl_multi_val_zero(isl_schedule_node_band_get_space(node));
	for (j = 0; j < n; j++)
		mv = isl_multi_val_set_val(mv, j, isl_val_int_from_si(p->ctx, sizes[j]));
	node = isl_schedule_node_band_tile(node, mv);
	node = isolate_full_tiles(node, sizes);
	node = isl_schedule_node_child(node, 0); /* the point band */
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
	if (has_init)
		node = isl_schedule_node_order_before(node, instances_of(p, node, TC_POLY_INIT));
	epilogue = instances_of(p, node, TC_POLY_ASSIGN);
	if (epilogue && isl_union_set_is_empty(epilogue) == isl_bool_false) {
		node = isl_schedule_node_order_after(node, epilogue);
		*moved = 1;
	} else
		isl_union_set_free(epilogue);
	/* reduction members first, then the parallel ones */
	for (j = k = 0; j < n; j++)
		if (isl_schedule_node_band_member_get_coincident(node, j) != isl_bool_true)
			perm[k++] = j;
	nred = k;
	for (j = 0; j < n; j++)
		if (isl_schedule_node_band_member_get_coincident(node, j) == isl_bool_true)
			perm[k++] = j;
	node = permute_band(node, perm);
	node = isl_schedule_node_band_split(node, nred);
	node = isl_schedule_node_child(node, 0); /* the parallel point loops */
	for (j = 0; j < n - nred - 1; j++)
		unrolled *= (int)sizes[perm[nred + j]];
	for (j = 0; p->opts.unroll && unrolled <= MAX_UNROLL && j < n - nred - 1; j++)
		if (sizes[perm[nred + j]] > 1)
			node = isl_schedule_node_band_member_set_ast_loop_type(node, j,
				isl_ast_loop_unroll);
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

/* Apply regtile_band to every innermost band (one without a band below);
 * *moved is set when an epilogue moved. */
static isl_schedule_node *regtile_walk(isl_schedule_node *node, const tc_poly *p, int *moved)
{
	isl_size n, i;
	if (!node)
		return NULL;
	n = isl_schedule_node_n_children(node);
	for (i = 0; node && i < n; i++) {
		node = isl_schedule_node_child(node, i);
		node = regtile_walk(node, p, moved);
		node = isl_schedule_node_parent(node);
	}
	if (node && isl_schedule_node_get_type(node) == isl_schedule_node_band &&
		!has_band_below(node))
		node = regtile_band(node, p, moved);
	return node;
}

tc_stat tc_poly_pass_regtile(tc_poly *p, tc_diags *d)
{
	isl_schedule *before;
	int legal, moved;
	if (!p->opts.nregtile && !p->opts.regtile_auto)
		return TC_OK;
	before = isl_schedule_copy(p->schedule);
	if (walk_schedule(p, d, regtile_walk, "tile for registers", &moved) < 0) {
		isl_schedule_free(before);
		return TC_ERR;
	}
	/* Running each element's init before its reduction is what TC's
	 * semantics say; an epilogue (statements after the reduction in the
	 * same band) moved after the tile's reduction is checked against the
	 * dependences (the check costs compile time, so only then), and a
	 * kernel it would break keeps the schedule it had. */
	legal = moved ? tc_poly_schedule_legal(p, p->schedule) : 1;
	if (legal == 0) {
		isl_schedule_free(p->schedule);
		p->schedule = isl_schedule_copy(before);
	}
	isl_schedule_free(before);
	return legal < 0 ? walk_failed(p, d, "check a register tiling") : TC_OK;
}

/* Loop nests with fewer statement instances than this run on the calling
 * thread: handing the work out costs more than it saves.  (262144 while the
 * pool's workers slept between jobs: a wake-up cost as much as fcrelu
 * 128x128x10's whole run; with polling workers, fcrelu 784's weight copy,
 * 100k instances, gains from two threads.) */
#define PARALLEL_MIN_INSTANCES 32768.0

static isl_stat count_box_cb(isl_set *set, void *user)
{
	double *count = user, pts = 1;
	isl_size n = isl_set_dim(set, isl_dim_set), j;
	for (j = 0; j < n && pts > 0; j++) {
		isl_val *lo = isl_set_dim_min_val(isl_set_copy(set), (int)j);
		isl_val *hi = isl_set_dim_max_val(isl_set_copy(set), (int)j);
		if (lo && hi && isl_val_is_int(lo) == isl_bool_true && isl_val_is_int(hi) == isl_bool_true)
			pts *= (double)(isl_val_get_num_si(hi) - isl_val_get_num_si(lo) + 1);
		else
			pts = PARALLEL_MIN_INSTANCES; /* unbounded or unknown: parallel */
		isl_val_free(lo);
		isl_val_free(hi);
	}
	*count += pts;
	isl_set_free(set);
	return isl_stat_ok;
}

/* Whether the loop nest at node has too little work to share: fewer
 * statement instances (counted over each statement's bounding box) than
 * PARALLEL_MIN_INSTANCES, when the parallel option is auto.  Parametric
 * models (no sizes) always share. */
static int too_small_to_share(const tc_poly *p, isl_schedule_node *node)
{
	isl_union_set *dom;
	double count = 0;
	if (!p->params || p->opts.parallel != 2)
		return 0;
	dom = isl_schedule_node_get_domain(node);
	isl_union_set_foreach_set(dom, count_box_cb, &count);
	isl_union_set_free(dom);
	return count < PARALLEL_MIN_INSTANCES;
}

/* Mark the outermost band of every top-level loop nest whose first member
 * is coincident (carries no dependence) and that has work enough to share
 * (too_small_to_share): split it after that member and put a
 * TC_POLY_MARK_PARALLEL mark above.  Bands below a band are left alone, so
 * parallel loops never nest. */
static isl_schedule_node *mark_parallel(isl_schedule_node *node, const tc_poly *p, int *done)
{
	isl_size n, i;
	(void)done; /* every top-level nest is visited */
	if (!node)
		return NULL;
	if (isl_schedule_node_get_type(node) == isl_schedule_node_band) {
		if (isl_schedule_node_band_n_member(node) < 1 ||
			isl_schedule_node_band_member_get_coincident(node, 0) != isl_bool_true ||
			too_small_to_share(p, node))
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
	int unused;
	if (!p->opts.parallel)
		return TC_OK;
	return walk_schedule(p, d, mark_parallel, "mark parallel loops", &unused);
}

const tc_poly_pass tc_poly_default_passes[] = {tc_poly_pass_merge, tc_poly_pass_order,
	tc_poly_pass_interchange, tc_poly_pass_tile, tc_poly_pass_regtile, tc_poly_pass_parallel};
const int tc_poly_ndefault_passes = 6;

/* ---- fusing the scheduler's nests, hoisting per-row statements ----
 *
 * isl's scheduler sometimes leaves statements that share an outer parallel
 * loop in separate nests (softmax's division, layer norm's last two
 * statements: after the first nest's inner band it found no way to place
 * them in the same band), and sometimes places a statement that runs once
 * per row inside the row's loop at the loop's first iteration (the init
 * of a sum: "if (c1 == 999) sm = 0" in the loop, which keeps LLVM from
 * vectorising it).  Two repairs on the scheduler's tree, before the passes
 * and before the packing copies join it, each kept only when the schedule
 * still respects the dependences. */

/* The first member of band node's partial schedule. */
static isl_union_pw_aff *first_member(isl_schedule_node *node)
{
	isl_multi_union_pw_aff *mupa = isl_schedule_node_band_get_partial_schedule(node);
	isl_union_pw_aff *upa = isl_multi_union_pw_aff_get_union_pw_aff(mupa, 0);
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

isl_schedule *tc_poly_fuse_nests(isl_schedule *s, isl_union_map *deps)
{
	isl_schedule_node *seq, *node;
	isl_union_pw_aff *fused = NULL;
	isl_union_set *dom;
	isl_schedule *t;
	isl_size n, i;
	int ok = 1;
	if (!s)
		return NULL;
	seq = isl_schedule_node_child(isl_schedule_get_root(s), 0);
	if (!seq || isl_schedule_node_get_type(seq) != isl_schedule_node_sequence) {
		isl_schedule_node_free(seq);
		return s;
	}
	n = isl_schedule_node_n_children(seq);
	/* every nest a band whose outermost member is parallel */
	for (i = 0; ok && i < n; i++) {
		node = isl_schedule_node_child(isl_schedule_node_get_child(seq, i), 0);
		ok = node && isl_schedule_node_get_type(node) == isl_schedule_node_band &&
			isl_schedule_node_band_member_get_coincident(node, 0) == isl_bool_true;
		if (ok) {
			isl_union_pw_aff *upa = first_member(node);
			fused = fused ? isl_union_pw_aff_union_add(fused, upa) : upa;
		}
		isl_schedule_node_free(node);
	}
	dom = isl_schedule_get_domain(s);
	ok = ok && n >= 2 && fused && carries_none(fused, dom, deps);
	isl_union_set_free(dom);
	if (!ok) {
		isl_union_pw_aff_free(fused);
		isl_schedule_node_free(seq);
		return s;
	}
	/* the fused loop above the sequence; each nest loses its outermost
	 * member (the whole band when it had one) */
	seq = isl_schedule_node_insert_partial_schedule(seq,
		isl_multi_union_pw_aff_from_union_pw_aff(fused));
	seq = isl_schedule_node_band_set_permutable(seq, 1);
	seq = isl_schedule_node_band_member_set_coincident(seq, 0, 1);
	seq = isl_schedule_node_child(seq, 0);
	for (i = 0; seq && i < n; i++) {
		seq = isl_schedule_node_child(isl_schedule_node_child(seq, i), 0);
		if (isl_schedule_node_band_n_member(seq) > 1)
			seq = isl_schedule_node_band_split(seq, 1);
		seq = isl_schedule_node_delete(seq);
		seq = isl_schedule_node_parent(isl_schedule_node_parent(seq));
	}
	t = seq ? isl_schedule_node_get_schedule(seq) : NULL;
	isl_schedule_node_free(seq);
	if (!t || !respects(t, deps)) {
		isl_schedule_free(t);
		return s;
	}
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

typedef struct hoist_ctx {
	isl_schedule *s;       /* the schedule being repaired */
	isl_union_map *deps;
	int changed;
	int tried, skip;       /* bands seen in this walk; bands to pass over */
} hoist_ctx;

/* Find the skip-th band (top-down) with constant statements and move them
 * before (or, if that breaks a dependence, after) the band's loops. */
static isl_bool hoist_cb(isl_schedule_node *node, void *user)
{
	hoist_ctx *hc = user;
	isl_union_set *consts;
	isl_schedule_node *band;
	int side;
	if (hc->changed || isl_schedule_node_get_type(node) != isl_schedule_node_band)
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
	for (side = 0; side < 2 && !hc->changed; side++) {
		isl_schedule_node *n = isl_schedule_node_copy(band);
		isl_schedule *t;
		n = side ? isl_schedule_node_order_after(n, isl_union_set_copy(consts))
			 : isl_schedule_node_order_before(n, isl_union_set_copy(consts));
		t = n ? isl_schedule_node_get_schedule(n) : NULL;
		isl_schedule_node_free(n);
		if (t && respects(t, hc->deps)) {
			isl_schedule_free(hc->s);
			hc->s = t;
			hc->changed = 1;
		} else
			isl_schedule_free(t);
	}
	isl_union_set_free(consts);
	isl_schedule_node_free(band);
	if (!hc->changed)
		hc->skip++;
	return isl_bool_false;
}

isl_schedule *tc_poly_hoist_constant(isl_schedule *s, isl_union_map *deps)
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
