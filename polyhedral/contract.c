/* Row buffers: array contraction of temporaries: those tc_ir_share and
 * ir/pack.c make to be live one row at a time (tc_ir_tensor.rowbuf), and
 * every other temporary of the def, the user's or a derived backward's
 * (layer norm's d_xc(n,d), written and read back in the row's loop once
 * its column sums share that loop: polyhedral/fusion.c,
 * tc_poly_fuse_reuse).
 *
 * softmax's shared exponentials O_shared(n,d) are written and read back
 * within one iteration of the row loop once the scheduler has fused the
 * row's statements: a buffer of one row per thread holds them, instead of
 * a region of the workspace as large as the output.  The row stays in L1,
 * the workspace shrinks by that much, and the output is written once (by
 * the division), so it can be streamed.
 *
 * The test, on the final schedule tree, for a temporary T of rank r:
 * - the band nodes B that enclose every statement instance accessing T
 *   (descending from the root through the one child of each sequence or
 *   set that holds them all);
 * - for such a B, from the deepest out, with P the prefix schedule down to
 *   one of B's members (every band member from the root down to it, B's
 *   last first) and A every access to T (reads and writes), the relation
 *       { P(i) -> T's first j subscripts of A(i) }
 *   is a bijection for the largest j < r that makes it one: every
 *   iteration of those loops touches one row (its first j subscripts) and
 *   every row is touched in one iteration only.  Then the row's data are
 *   dead once the iteration ends, and one buffer indexed by the last r - j
 *   subscripts serves every iteration in turn;
 * - no loop marked parallel lies at or below B: the code generator outlines
 *   a parallel loop into its own function, and puts the buffer on the
 *   stack of the function the accesses are in, so all of one row's
 *   accesses must be in one function's activation (a parallel loop above
 *   B is fine: each thread's chunk of iterations has its own buffer);
 * - the buffer has at most the target's rowbuf_bytes (it lives on the
 *   stack of the kernel or of a pool thread).
 * Reads with non-affine subscripts are over-approximated by the whole
 * extent, so they never pass the test.  A temporary that fails it keeps
 * its workspace region (runtime/compiled.c gives rowbuf-marked temporaries regions
 * whose pages are only touched when used).
 *
 * Entry point: tc_poly_contract (passes.h), which the driver runs last on
 * the final schedule.  Uses the model (poly.h) only; must not know the
 * passes that made the schedule or the driver. */
#include "passes.h"

#include <isl/id.h>
#include <isl/map.h>
#include <isl/schedule_node.h>
#include <isl/union_map.h>
#include <isl/union_set.h>

#include <string.h>

static isl_bool no_parallel_mark(isl_schedule_node *node, void *user)
{
	int *found = user;
	if (isl_schedule_node_get_type(node) == isl_schedule_node_mark) {
		isl_id *id = isl_schedule_node_mark_get_id(node);
		*found |= id && !strcmp(isl_id_get_name(id), TC_POLY_MARK_PARALLEL);
		isl_id_free(id);
	}
	return isl_bool_ok(!*found); /* false: not into the children */
}

/* The largest j in 1..r-1 such that { prefix -> the first j subscripts of
 * acc } is a bijection, the prefix being the schedule of every band above
 * band and of band's first members (as many as keep it one, from all
 * down to one), or 0. */
static int row_dims(isl_schedule_node *band, isl_union_map *acc, isl_union_set *inst, int r)
{
	isl_schedule_node *child = isl_schedule_node_child(isl_schedule_node_copy(band), 0);
	isl_union_map *prefix = isl_schedule_node_get_prefix_schedule_union_map(child);
	isl_size members = isl_schedule_node_band_n_member(band), depth;
	isl_union_map *rel;
	isl_map *m;
	int j, cut, found = 0;
	isl_schedule_node_free(child);
	prefix = isl_union_map_intersect_domain(prefix, isl_union_set_copy(inst));
	rel = isl_union_map_apply_range(isl_union_map_reverse(prefix), isl_union_map_copy(acc));
	if (isl_union_map_n_map(rel) != 1 || members < 1) { /* prefixes of different spaces */
		isl_union_map_free(rel);
		return 0;
	}
	m = isl_map_from_union_map(rel);
	depth = isl_map_dim(m, isl_dim_in);
	for (cut = depth; cut > depth - members && cut >= 1 && !found; cut--)
		for (j = r - 1; j >= 1 && !found; j--) {
			isl_map *row = isl_map_project_out(isl_map_copy(m), isl_dim_in, (unsigned)cut,
				(unsigned)(depth - cut));
			row = isl_map_project_out(row, isl_dim_out, (unsigned)j, (unsigned)(r - j));
			found = isl_map_is_single_valued(row) == isl_bool_true &&
				isl_map_is_injective(row) == isl_bool_true ? j : 0;
			isl_map_free(row);
		}
	isl_map_free(m);
	return found;
}

/* The bands enclosing every instance in inst, outermost first, into
 * bands[] (at most max); how many. */
static int enclosing_bands(isl_schedule *s, isl_union_set *inst, isl_schedule_node **bands,
	int max)
{
	isl_schedule_node *node = isl_schedule_get_root(s);
	int n = 0;
	while (node) {
		enum isl_schedule_node_type type = isl_schedule_node_get_type(node);
		isl_size nc = isl_schedule_node_n_children(node);
		int next = -1, i;
		if (type == isl_schedule_node_band && n < max)
			bands[n++] = isl_schedule_node_copy(node);
		if (type == isl_schedule_node_sequence || type == isl_schedule_node_set) {
			for (i = 0; i < nc; i++) {
				isl_schedule_node *c = isl_schedule_node_get_child(node, i);
				isl_union_set *flt = isl_schedule_node_filter_get_filter(c);
				isl_bool apart = isl_union_set_is_disjoint(flt, inst);
				isl_union_set_free(flt);
				isl_schedule_node_free(c);
				if (apart == isl_bool_false) {
					next = next < 0 ? i : -2; /* -2: in more than one child */
					if (next == -2)
						break;
				}
			}
		} else if ((type == isl_schedule_node_band || type == isl_schedule_node_domain ||
				   type == isl_schedule_node_mark || type == isl_schedule_node_filter ||
				   type == isl_schedule_node_context) && nc == 1)
			next = 0;
		if (next < 0)
			break;
		node = isl_schedule_node_child(node, next);
	}
	isl_schedule_node_free(node);
	return n;
}

/* The buffer for tensor t, or 0 (see above). */
static int contract_one(tc_poly *p, int t)
{
	const tc_ir_tensor *tt = &p->f->tensors[t];
	isl_union_map *acc = isl_union_map_union(tc_poly_tensor_accesses(p, p->writes, t, NULL),
		tc_poly_tensor_accesses(p, p->reads, t, NULL));
	isl_union_set *inst;
	isl_schedule_node *bands[TC_MAX_RANK * 4];
	int nb, i, j = 0;
	if (!acc || isl_union_map_is_empty(acc) != isl_bool_false) {
		isl_union_map_free(acc);
		return 0;
	}
	inst = isl_union_map_domain(isl_union_map_copy(acc));
	nb = enclosing_bands(p->schedule, inst, bands, (int)(sizeof(bands) / sizeof(bands[0])));
	for (i = nb - 1; i >= 0 && !j; i--) {
		int par = 0;
		if (isl_schedule_node_foreach_descendant_top_down(bands[i], no_parallel_mark, &par) < 0)
			break; /* an isl error */
		if (!par)
			j = row_dims(bands[i], acc, inst, tt->ndim);
	}
	for (i = 0; i < nb; i++)
		isl_schedule_node_free(bands[i]);
	isl_union_set_free(inst);
	isl_union_map_free(acc);
	if (j) { /* the buffer's size */
		int64_t bytes = tc_ir_tail_bytes(p->f, t, j, p->params);
		if (bytes < 1 || bytes > p->target->rowbuf_bytes)
			return 0;
	}
	isl_ctx_reset_error(p->ctx);
	return j;
}

tc_stat tc_poly_contract(__tc_keep tc_poly *p, __tc_keep tc_diags *d)
{
	int t;
	if (!p->params) /* sizes unknown: the buffers' sizes too */
		return TC_OK;
	for (t = 0; t < p->f->ntensors; t++)
		if (p->f->tensors[t].kind == TC_TENSOR_TEMP) {
			if (!p->rowbuf && !(p->rowbuf = tc_calloc((size_t)p->f->ntensors, sizeof(int)))) {
				tc_loc none;
				memset(&none, 0, sizeof(none));
				tc_error(d, none, "out of memory");
				return TC_ERR;
			}
			p->rowbuf[t] = contract_one(p, t);
		}
	return TC_OK;
}
