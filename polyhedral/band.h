/* Band helpers shared by the schedule passes (band.c): queries on the band
 * nodes of a schedule tree and on their members, and the walks the passes
 * are built from.  The machine's numbers (vector width, block sizes) come
 * from the model's target description (p->target, ir/target.h).
 *
 * Internal to polyhedral/: the pass files (merge.c, order.c, tile.c,
 * regtile.c, parallel.c) include it; backends and the runtime do not.
 * Nothing here transforms a schedule beyond one band (tc_poly_band_permute)
 * or knows the order the passes run in (passes.h, schedule.c).
 *
 * Ownership: isl objects follow isl's rules as marked: a schedule node
 * passed __tc_take is consumed and the node returned is the caller's
 * (NULL on an isl error); the model and everything else is borrowed, and
 * the walks replace p->schedule, which p owns. */
#ifndef TC_POLY_BAND_H
#define TC_POLY_BAND_H

#include "poly.h"

#include <isl/aff.h>
#include <isl/schedule_node.h>

#define HUGE_TILE (INT64_C(1) << 40) /* a tile size that leaves a member untiled (any sizes) */

/* The first read in e through a window: a subscript that uses both index
 * a and index b (I(n,r_c,h+r_kh,w+r_kw): a = w, b = r_kw), or NULL.  The
 * result is borrowed from e. */
const tc_ir_expr *tc_poly_window_read(__tc_keep const tc_ir_expr *e, int a, int b);

/* The domain variable of set's statement that band member member walks
 * (a single variable plus a constant on every piece), or -1. */
int tc_poly_set_member_var(__tc_keep isl_set *set, __tc_keep isl_union_pw_aff *member);

/* The index variable of statement st that member j of band node walks, or
 * -1 when it walks none alone. */
int tc_poly_band_member_var(__tc_keep isl_schedule_node *node, int j,
	__tc_keep const tc_poly_stmt *st);

/* The values member j of band node takes over the band's domain, at p's
 * sizes (tc_poly_at) when p is not NULL, as they are otherwise; NULL on an
 * isl error. */
__tc_give isl_set *tc_poly_band_member_values(__tc_keep const tc_poly *p,
	__tc_keep isl_schedule_node *node, int j);

/* The number of values member j of a band takes over the band's domain at
 * p's sizes (tc_poly_at), or 0 when that is not a known constant (a
 * parametric model). */
int64_t tc_poly_band_member_extent(__tc_keep const tc_poly *p, __tc_keep isl_schedule_node *node,
	int j);

/* The same over the instances dom of the band's domain (taken; NULL: the
 * whole domain): from the least value to the greatest, or 0. */
int64_t tc_poly_band_member_extent_on(__tc_keep const tc_poly *p,
	__tc_keep isl_schedule_node *node, int j, __tc_take isl_union_set *dom);

/* The values member j of band node takes at p's sizes: the least *lo, a
 * step *step between them (isl's stride: a tile loop's values are its
 * tiles' origins), and their number (0 when not known constants). */
int64_t tc_poly_band_member_steps(__tc_keep const tc_poly *p, __tc_keep isl_schedule_node *node,
	int j, int64_t *lo, int64_t *step);

/* The statement instances of dom at p's sizes (tc_poly_at), each
 * statement's counted over its bounding box; a statement whose box is
 * unbounded or not constant (a parametric model) counts as unknown
 * instances. */
double tc_poly_box_instances(__tc_keep const tc_poly *p, __tc_keep isl_union_set *dom,
	double unknown);

/* The tile size that leaves member j of band node untiled, one tile
 * covering all its values: one more than its greatest value when its
 * values are known constants from 0 up for every size (a free size's
 * member is never tiled by its extent at one size), else HUGE_TILE.  Tiling by
 * HUGE_TILE means the same, but its constants (2^40) are past isl's small
 * integers, and every set operation on the tiled schedule (the passes' own,
 * the legality checks, the AST build) then computes with big integers:
 * the register tiling pass of matmul 256 ran 122 million instructions
 * with it against 34 million (callgrind), the hoist pass 307 against 203. */
int64_t tc_poly_band_member_one_tile(__tc_keep isl_schedule_node *node, int j);

/* The number of coincident members of band node. */
int tc_poly_band_n_coincident(__tc_keep isl_schedule_node *node);

/* Reorder the members of permutable band node: member perm[j] becomes
 * member j; permutability and coincidence go with the members. */
__tc_give isl_schedule_node *tc_poly_band_permute(__tc_take isl_schedule_node *node,
	__tc_keep const int *perm);

/* A band the register tiling (and the automatic cache tiles) apply to: a
 * permutable band of one reduction whose innermost member is parallel
 * (vectorisable) and which has a reduction (non-coincident) member and at
 * least two parallel ones.  Returns the update statement (p's) or NULL; *has_init
 * tells whether the band schedules the reduction's init too.  The band may
 * also schedule plain statements (an epilogue such as a bias and an
 * activation). */
const tc_poly_stmt *tc_poly_contraction_band(__tc_keep const tc_poly *p,
	__tc_keep isl_schedule_node *node, int *has_init);

/* A band of one reduction whose only parallel member is its innermost
 * (column sums dB(h) +=! dH(r_b,h), a vector times a matrix): the
 * register tiling keeps a strip of the innermost member's vectors in
 * registers while the reduction members run.  Returns the update
 * statement or NULL; *has_init as for tc_poly_contraction_band. */
const tc_poly_stmt *tc_poly_column_band(__tc_keep const tc_poly *p,
	__tc_keep isl_schedule_node *node, int *has_init);

/* Whether every dependence of p between two instances under band node
 * (the outermost band of a top-level nest: nothing above it carries one)
 * joins two instances that chunks (a one-member partial schedule over the
 * band's domain) maps to the same value: 1, 0, or -1 on an isl error. */
int tc_poly_within_chunks(__tc_keep const tc_poly *p, __tc_keep isl_schedule_node *node,
	__tc_keep isl_multi_union_pw_aff *chunks);

/* The chunks of rows over which band node's partial sums (ir/partial.c)
 * run: floor((m - lo) / C) of the band's first member m, where every
 * partial sum under node has C rows per chunk from row lo, when that
 * takes two values or more over the band's domain and every dependence
 * under node stays within a chunk (the rows' loop a fused nest shares
 * with the partial sums, polyhedral/fusion.c): one chunk per thread, each
 * with its own partial sums.  NULL when there is none (no partial sum
 * under node, or the chunks do not hold) or on an isl error (check the
 * ctx). */
__tc_give isl_multi_union_pw_aff *tc_poly_partial_chunks(__tc_keep const tc_poly *p,
	__tc_keep isl_schedule_node *node);

/* What a pass does to the first band (see tc_poly_first_band); sets
 * *changed when it changes the band. */
typedef isl_schedule_node *(*tc_poly_band_fn)(__tc_take isl_schedule_node *node,
	__tc_keep const tc_poly *p, int *changed);

/* Whether band node has AST build options (isolated tiles, separation):
 * passes that rebuild its members would drop them.  1 on an isl error. */
int tc_poly_band_has_options(__tc_keep isl_schedule_node *node);

/* Members from .. from + k - 1 of band node as one, in their lexicographic
 * order: the sum over j of ((m_j - lo[j]) / step[j]) times the product of
 * count[i] for i after j (lo, step and count as tc_poly_band_member_steps
 * gives them); NULL on an isl error. */
__tc_give isl_union_pw_aff *tc_poly_band_linearize(__tc_keep isl_schedule_node *node, int from,
	int k, const int64_t *lo, const int64_t *step, const int64_t *count);

/* Apply fn to every band of the tree below node (taken), children before
 * their parents, each at its position; returns the node at node's
 * position (NULL on an isl error). */
__tc_give isl_schedule_node *tc_poly_bands_bottom_up(__tc_take isl_schedule_node *node,
	__tc_keep const tc_poly *p, tc_poly_band_fn fn, int *changed);

/* Find the outermost permutable band with at least one member (in tree
 * order, packing copies aside: the band the cache tiles and the
 * interchange apply to) and apply fn to it; *found is set once it is
 * found, *changed by fn. */
__tc_give isl_schedule_node *tc_poly_first_band(__tc_take isl_schedule_node *node,
	__tc_keep const tc_poly *p, tc_poly_band_fn fn, int *found, int *changed);

/* The reduction index of statement st when its operand panel fits in
 * registers (polyhedral/order.c, "operand panels held in registers": each
 * factor of a Kronecker product, 16 terms into rows of 16), or -1: a float
 * sum over one reduction index of at most a vector's lanes terms whose
 * output rows are a whole number of vectors, lanes x vectors per row at
 * most the target's accumulators; never at a free size (sizes=parametric:
 * the code serves every value of it).  The order pass puts that index
 * innermost, alone in its band, and no register tile applies. */
int tc_poly_panel_var(__tc_keep const tc_poly *p, __tc_keep const tc_poly_stmt *st);

/* The vectors of a register tile's row: want, halved while want
 * accumulators a row (at most the target's accumulators in all), the row's
 * vector loads and a broadcast would not fit the target's vector registers
 * (AVX2's 16: 6 rows of 2 vectors, not 3 of 4).  The register tiling and
 * the weight gradient's cache tiles (tile.c) count rows alike with it. */
int64_t tc_poly_row_vectors(__tc_keep const tc_target *t, int64_t want);

/* Apply fn to the outermost permutable band with at least one member of
 * every path from node (each nest's, packing copies aside), not to the
 * bands below one; *changed set by fn. */
__tc_give isl_schedule_node *tc_poly_each_band(__tc_take isl_schedule_node *node,
	__tc_keep const tc_poly *p, tc_poly_band_fn fn, int *changed);

/* Record that isl could not do what (from the ctx's last error message)
 * in d, or "out of memory" when isl recorded no error (a callback of ours
 * failed to allocate); returns TC_ERR. */
tc_stat tc_poly_walk_failed(__tc_keep tc_poly *p, __tc_keep tc_diags *d, const char *what);

/* A walk of the schedule tree from node (taken), returning the node it
 * ends on (the same position); sets *flag as its pass says. */
typedef isl_schedule_node *(*tc_poly_walk_fn)(__tc_take isl_schedule_node *node,
	__tc_keep const tc_poly *p, int *flag);

/* Apply walk to p->schedule from its root, with *flag (cleared first) for
 * the walk to set, and make the result p->schedule; what names the work in
 * the error message when isl fails. */
tc_stat tc_poly_walk_schedule(__tc_keep tc_poly *p, __tc_keep tc_diags *d, tc_poly_walk_fn walk,
	const char *what, int *flag);

/* tc_poly_walk_schedule, kept only when the result still orders every
 * dependence: the walk sets its flag when it changed something that may
 * break one (the check costs compile time, so only then), and a schedule
 * that breaks one goes back to what it was.  check names the check in the
 * error message when isl fails. */
tc_stat tc_poly_walk_schedule_legal(__tc_keep tc_poly *p, __tc_keep tc_diags *d,
	tc_poly_walk_fn walk, const char *what, const char *check);

/* s (taken; values [T, R] of the prefix schedule of depth dims and of a
 * band's members) as the band's isolate option (isl_schedule_node_band_
 * set_ast_build_options): the AST build generates those apart from the
 * rest.  NULL if s is not one set or empty. */
__tc_give isl_union_set *tc_poly_isolate_option(isl_ctx *ctx, __tc_take isl_union_set *s,
	isl_size depth);

#endif
