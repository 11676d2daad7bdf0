/* The parts of the GPU mapping (the gpu pass: polyhedral/gpu.c maps nests
 * to kernels, gpu_shared.c promotes what a block reuses to shared
 * memory, and holds the helpers both use: gpu.c calls gpu_shared.c,
 * never the reverse).  Internal to the pass. */
#ifndef TC_POLY_GPU_H
#define TC_POLY_GPU_H

#include "poly.h"

/* The least and greatest value of member j of band node over its domain
 * (and the instances on, NULL: all), in *lo and *hi: 1, or 0 when they
 * are not known constants (a parametric model). */
int tc_poly_gpu_member_range(__tc_keep isl_schedule_node *node, int j, __tc_keep isl_union_set *on,
	int64_t *lo, int64_t *hi);

/* The context of kernel k's indices: 0 <= tc_b<d> < grid[d] and 0 <=
 * tc_t<d> < block[d] for its n mapped dimensions. */
__tc_give isl_set *tc_poly_gpu_kernel_context(__tc_keep isl_ctx *ctx, int n,
	__tc_keep const tc_poly_gpu_kernel *k);

/* The mapping of the nest at band node as kernel k (its block and grid
 * chosen) when it has reduced members below the n mapped ones and the
 * block would read some tensor's elements several times: the band tiled
 * (mapped members by the block, reduced ones by the shared_tile option),
 * the tile loops run by the blocks, the points by the threads, and the
 * boxes of the tensors the block reads in one step of the tile loops
 * copied to shared memory first (gpu_shared.c says how).  member[d]: the
 * member mapped to dimension d, lo[d] its least value, wraps[d] whether
 * the blocks of d take several tiles each.  *done: 1 when mapped that
 * way (node: the kernel's subtree, filters included; records added to
 * p->gpu_copies and p->gpu_locals), 0 when not (node unchanged). */
__tc_give isl_schedule_node *tc_poly_gpu_promote(__tc_take isl_schedule_node *node,
	__tc_keep tc_poly *p, __tc_keep tc_poly_gpu_kernel *k, int lead, const int *member,
	const int64_t *lo, const int *wraps, int *done);

#endif
