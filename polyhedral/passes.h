/* Schedule passes and the driver that runs them (polyhedral/).
 *
 * A schedule is computed by running a named pass list over a model
 * (tc_poly_schedule, schedule.c): every step, from the isl scheduler to
 * the row buffers, is one entry, so that a backend supplies its own list
 * (the CPU one is tc_poly_cpu_passes) and `tcomp emit` can show the
 * schedule after any entry.  A pass transforms p->schedule in place and
 * reads p->opts; it uses the model (poly.h) and the band helpers (band.h),
 * never another pass.
 *
 * Files: merge.c, order.c (order, interchange, dot products), tile.c,
 * regtile.c, parallel.c (the transformations), repair.c (repairs of the
 * scheduler's tree), contract.c (row buffers), schedule.c (the scheduler
 * step, the driver and the pass lists); polyhedral/README.md lists the
 * CPU passes in order.
 *
 * Ownership: passes change the caller's model in place: p->schedule is
 * p's, and a pass that replaces it frees the old one.  The repairs take a
 * schedule and give one back (NULL on an isl error), as isl functions do.
 * The pass lists are static tables. */
#ifndef TC_POLY_PASSES_H
#define TC_POLY_PASSES_H

#include "poly.h"

/* A schedule pass: transforms p->schedule in place (owning it); TC_ERR
 * with a message in d on error, TC_OK, or TC_POLY_RESCHEDULE. */
typedef tc_stat (*tc_poly_pass)(__tc_keep tc_poly *p, __tc_keep tc_diags *d);

/* What a pass returns when the schedule must be computed again under
 * settings it changed in p: the driver then runs its list again from the
 * first entry.  The CPU list's "check" entry does, after a merged band
 * chain broke a dependence (it sets p->no_merge, so the merge pass does
 * nothing the second time). */
#define TC_POLY_RESCHEDULE 1

/* An entry of a pass list: its name (for stop_after and `tcomp emit`), the
 * pass, and one line saying what it does (help text, docs); static
 * strings. */
typedef struct tc_poly_pass_def {
	const char *name;
	tc_poly_pass run;
	const char *doc;
} tc_poly_pass_def;

/* ---- transformations (one file each) ---- */

/* Merge a band with the chain of bands below it when a reduction over
 * several indices split them (conv2d), so that a parallel member can move
 * below the reduction members; sets p->merged (the driver's check then
 * tests the final schedule and schedules again without merging if it is
 * illegal).  Nothing when p->no_merge.  merge.c. */
tc_stat tc_poly_pass_merge(__tc_keep tc_poly *p, __tc_keep tc_diags *d);
/* In every permutable band, move the member that indexes the last (stride-1)
 * dimension of the most accesses innermost, preferring a parallel one; a
 * dot product's reduction goes innermost, alone in its band.  order.c. */
tc_stat tc_poly_pass_order(__tc_keep tc_poly *p, __tc_keep tc_diags *d);
/* Put the members of the band tc_poly_pass_tile tiles (the outermost
 * permutable band, packing copies aside) in the order p->opts.interchange
 * gives: member interchange[k] goes to position k, members beyond the list
 * keep their place.  Nothing when ninterchange is 0, when the list is
 * longer than the band, or when the result breaks a dependence (a merged
 * band's reduction members: tc_poly_pass_merge).  order.c. */
tc_stat tc_poly_pass_interchange(__tc_keep tc_poly *p, __tc_keep tc_diags *d);
/* Tile the outermost permutable band with p->opts.tile (members beyond
 * the sizes given are not tiled), or a contraction band with automatic
 * cache blocks when tile_auto; nothing otherwise.  tile.c. */
tc_stat tc_poly_pass_tile(__tc_keep tc_poly *p, __tc_keep tc_diags *d);
/* Register tiling of contractions: in every innermost permutable band of a
 * single reduction (its update, with its init) whose innermost member is
 * parallel, tile the parallel members by p->opts.regtile (innermost last),
 * move the reduction members between the tile loops and the point loops,
 * give the init its own point loops before the reduction, and unroll the
 * point loops but the innermost (vectorised) one: a micro-kernel whose
 * partial sums stay in registers for the whole reduction.  regtile.c. */
tc_stat tc_poly_pass_regtile(__tc_keep tc_poly *p, __tc_keep tc_diags *d);
/* Innermost bands whose last two members walk whole short rows of every
 * access that uses them as one member (h * W + w): one long contiguous
 * innermost loop.  collapse.c. */
tc_stat tc_poly_pass_collapse(__tc_keep tc_poly *p, __tc_keep tc_diags *d);

/* Mark the outermost parallel loop of every top-level loop nest
 * (TC_POLY_MARK_PARALLEL), when p->opts.parallel.  parallel.c. */
tc_stat tc_poly_pass_parallel(__tc_keep tc_poly *p, __tc_keep tc_diags *d);
/* Map each top-level nest to a GPU kernel (TC_POLY_MARK_GPU_KERNEL, poly.h):
 * the outer coincident members of its outermost band to blocks and
 * threads, through a filter on the block and thread parameters.  gpu.c. */
tc_stat tc_poly_pass_gpu(__tc_keep tc_poly *p, __tc_keep tc_diags *d);
/* Whether the nest at node is better split into one nest per dependence
 * component on a GPU (the driver's gpu-fusion step): with the reduce
 * option auto, sizes known and no block option, a nest of more than one
 * reduction (with its init) holding a sum, max or min of 32 values or
 * more whose outer coincident members' counts (rows) are known: fused,
 * each row runs serially on one thread (softmax's max, exponentials and
 * sum), its reads strided across a warp's rows; split, each reduction
 * stands alone and maps to a block's threads (fewer than 4096 rows) or a
 * warp's lanes (more, where a long reduced index walks a row's own
 * operand contiguously: reduce_map), the pointwise statements to a thread
 * per element.  gpu.c. */
int tc_poly_gpu_split_nest(__tc_keep const tc_poly *p, __tc_keep isl_schedule_node *node);

/* ---- repairs of the isl scheduler's tree (repair.c) ----
 *
 * Each is kept only when the result orders every dependence of deps:
 * tc_poly_fuse_nests (on the scheduler's own tree, before the passes) puts
 * nests whose outermost loops are parallel and carry no dependence between
 * them under one such loop (the root's sequence of nests becomes one nest:
 * softmax, layer norm), and under the next loops too while they are
 * parallel, over the same values in every nest and carry none; tc_poly_hoist_constant (after the passes) moves
 * the statements a band runs once per iteration of its outer loops (the
 * init of a sum placed in the sum's loop at its first iteration) before or
 * after the band's loops.  The driver decides when they run. */
__tc_give isl_schedule *tc_poly_fuse_nests(__tc_take isl_schedule *s,
	__tc_keep isl_union_map *deps);
__tc_give isl_schedule *tc_poly_hoist_constant(__tc_take isl_schedule *s,
	__tc_keep isl_union_map *deps);

/* ---- fusion per nest (fusion.c) ----
 *
 * What a nest of a schedule tree costs, for the scheduler's choice of
 * fusion per nest (fusion auto), from the statement instances at and
 * below node (each statement over its bounding box): those in a top-level
 * loop nest whose outermost loop is not parallel (serial: no thread can
 * share them), those of contractions (matmul, convolution) that no band
 * can hold in a register tile (untiled: a band with two of its parallel
 * left-hand indices and a reduction index), those of contractions with
 * an operand reused across the outputs (a read missing a left-hand index)
 * that share a top-level loop nest with another such (chained: little
 * reuse to gain, each contraction's sweep of its operands cut short),
 * those that the last member of a band walks in steps of 2 or more
 * (strided: fused with a statement over a finer domain, they run behind a
 * test on every other iteration and the loop does not vectorise; the
 * arg-max pass of a max-pool's gradient fused into the input gradient's
 * loops ran 2.9x slower than apart), the bands with a skewed member (one
 * walking a combination of two of a statement's dimensions) and the
 * statements.  tc_poly_nest_cost_less: a costs less than b (fewer serial,
 * untiled, chained and strided instances; then fewer skewed bands).  tc_poly_graft
 * replaces the subtree at node (taken) by a copy of the tree of s, a
 * schedule of the same instances (its bands, sequences, sets and
 * filters), returning the node at the same position, or NULL. */
typedef struct tc_poly_nest_cost {
	double serial, untiled, chained, strided;
	int skewed, statements;
} tc_poly_nest_cost;
void tc_poly_nest_measure(__tc_keep const tc_poly *p, __tc_keep isl_schedule_node *node,
	__tc_keep tc_poly_nest_cost *c);
int tc_poly_nest_cost_less(__tc_keep const tc_poly_nest_cost *a,
	__tc_keep const tc_poly_nest_cost *b);
__tc_give isl_schedule_node *tc_poly_graft(__tc_take isl_schedule_node *node,
	__tc_keep isl_schedule *s);

/* Nests of the top-level sequence or set that read a common tensor put
 * under shared loops (fusion.c, "nests that read the same data"): nests
 * whose first bands walk the same values with no dependence between them
 * share the whole band; with one thread (p->target->threads 1) nests whose
 * first members walk the same values share that loop.  Never nests with a
 * contraction; never a schedule that breaks deps.  Returns s or its
 * replacement. */
__tc_give isl_schedule *tc_poly_fuse_reuse(__tc_keep const tc_poly *p, __tc_take isl_schedule *s,
	__tc_keep isl_union_map *deps);

/* ---- row buffers (contract.c) ----
 *
 * For every temporary whose accesses, in the final schedule,
 * touch one row (its first j subscripts) per iteration of the loops
 * enclosing them all and each row in one iteration, with no parallel loop
 * at or below those loops and rows of at most the target's rowbuf_bytes,
 * p->rowbuf[t] = j: backends keep one row per thread (on the stack)
 * instead of the whole tensor.  Concrete sizes only.  The CPU list runs it
 * last. */
tc_stat tc_poly_contract(__tc_keep tc_poly *p, __tc_keep tc_diags *d);

/* ---- the driver (schedule.c) ---- */

/* The CPU pass list, in order (polyhedral/README.md lists it): the isl
 * scheduler and its repairs, the packing copies, the transformations, the
 * check that schedules again without merging, hoisting, the kernel mark
 * and the row buffers. */
extern const tc_poly_pass_def tc_poly_cpu_passes[];
extern const int tc_poly_ncpu_passes;
/* The CPU list without its transformations (merge, order, interchange,
 * tile, regtile, parallel) and the check that only merging needs: the
 * scheduler's tree with its repairs, marked, with its row buffers.  For
 * tests of code generation that want the plain schedule. */
extern const tc_poly_pass_def tc_poly_plain_passes[];
extern const int tc_poly_nplain_passes;
/* The GPU pass list: the isl scheduler and its repairs, the order pass,
 * the GPU mapping (one kernel per top-level nest) and the kernel mark. */
extern const tc_poly_pass_def tc_poly_gpu_passes[];
extern const int tc_poly_ngpu_passes;

/* Compute p->schedule by running passes[0..npasses-1] in order (the first
 * entry computes a schedule, as the CPU lists' "scheduler" does; the
 * others transform it): stop after the entry named stop_after (NULL: run
 * them all), leaving p->schedule as it stands then.  An entry returning
 * TC_POLY_RESCHEDULE starts the list again from its first entry.  TC_ERR
 * with a message in d when a pass fails or stop_after names no entry of
 * the list (the message lists the names; nothing runs then). */
tc_stat tc_poly_schedule(__tc_keep tc_poly *p, __tc_keep const tc_poly_pass_def *passes,
	int npasses, const char *stop_after, __tc_keep tc_diags *d);
/* tc_poly_schedule with the whole CPU list. */
tc_stat tc_poly_schedule_cpu(__tc_keep tc_poly *p, __tc_keep tc_diags *d);
/* Append the names of passes[0..npasses-1] to b, separated by ", ". */
void tc_poly_pass_names(__tc_keep tc_buf *b, __tc_keep const tc_poly_pass_def *passes,
	int npasses);

#endif
