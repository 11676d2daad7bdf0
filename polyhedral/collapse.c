/* Short rows as one loop: the collapse pass (tc_poly_pass_collapse).
 *
 * The innermost band of a nest whose last two members walk the last two
 * subscripts of every access that uses them, the last one over whole rows
 * (d_B(f) +=! d_O(n,f,h,w): h and w over rows of 54), becomes a band with
 * one member for both, h * 54 + w, so that the innermost loop walks 2916
 * contiguous elements instead of 54.  Left to LLVM, a loop of 54 was
 * unrolled in full and the loop around it vectorised across rows, 54
 * elements apart (gathers), and a row of 54 leaves 6 elements of a 16-lane
 * vector to scalar code; the collapsed loop is one vector stream.  The
 * order of the instances is the same (the second member's values are
 * 0 .. count - 1 within each value of the first), so every dependence
 * holds and a permutable band stays permutable.
 *
 * Only where it cannot cost anything: sizes known, the band the last one
 * of its nest (a leaf below it) and under no register tile (after the
 * hoist pass has taken a reduction's init out of its band), its two last
 * members plain index variables of every statement in it, no AST options
 * on the band, every access of those statements that uses the two
 * variables using them as its last two subscripts (plain, the last over
 * the whole dimension; no row buffer, no panels), no scatter, no guard on
 * them, and rows shorter
 * than COLLAPSE_ROW elements (longer ones vectorise well as they are).
 *
 * Uses the model's queries (poly.h) and the band helpers (band.h); must not
 * know the other passes or the order they run in (schedule.c). */
#include "band.h"
#include "passes.h"

#include "../lang/sexpr.h"

#include <string.h>

#include <isl/aff.h>
#include <isl/id.h>
#include <isl/schedule_node.h>
#include <isl/union_set.h>
#include <isl/val.h>

/* Rows at least this long are left alone: 16 vectors of 16 floats. */
#define COLLAPSE_ROW 256

typedef struct rows_ctx {
	const tc_poly *p;
	isl_union_pw_aff *outer, *inner; /* the two members */
	int64_t count;                   /* the inner member's values */
	int ok;
} rows_ctx;

/* Whether the subscripts sub[0..n) (plain variables when vars, the
 * left-hand side) of an access to tensor t leave u and v alone, or use
 * them as the last two plain subscripts with v over the whole last
 * dimension ([0, extent), extent the member's count). */
static int row_access(const rows_ctx *c, const tc_ir_stmt *st, int t, tc_ir_expr *const *sub,
	int n, int u, int v)
{
	int k, uses = 0;
	int64_t ext, lo, hi;
	for (k = 0; k < n; k++)
		uses |= sub ? (tc_ir_uses_var(sub[k], u) || tc_ir_uses_var(sub[k], v))
			    : (k == u || k == v);
	if (!uses)
		return 1;
	if (n < 2 || c->p->f->tensors[t].rowbuf || c->p->f->tensors[t].panel)
		return 0;
	for (k = 0; k < n - 2; k++)
		if (sub ? (tc_ir_uses_var(sub[k], u) || tc_ir_uses_var(sub[k], v)) : (k == u || k == v))
			return 0;
	if (sub ? (tc_ir_plain_var(sub[n - 2]) != u || tc_ir_plain_var(sub[n - 1]) != v)
		: (n - 2 != u || n - 1 != v))
		return 0;
	return tc_sx_eval(c->p->f->tensors[t].ext[n - 1], c->p->params, NULL, &ext) == TC_OK &&
		tc_ir_var_range(&st->vars[v], c->p->params, &lo, &hi) && lo == 0 && hi == ext &&
		ext == c->count;
}

/* row_access for every read of e. */
static int row_reads(const rows_ctx *c, const tc_ir_stmt *st, const tc_ir_expr *e, int u, int v)
{
	int i;
	if (e->op == TC_OP_READ && !row_access(c, st, e->id, e->args, e->nargs, u, v))
		return 0;
	for (i = 0; i < e->nargs; i++)
		if (!row_reads(c, st, e->args[i], u, v))
			return 0;
	return 1;
}

static isl_stat rows_cb(isl_set *set, void *user)
{
	rows_ctx *c = user;
	const tc_poly_stmt *ps = tc_poly_find_stmt(c->p, isl_set_get_tuple_name(set));
	const tc_ir_stmt *st = ps ? ps->ir : NULL;
	int u = tc_poly_set_member_var(set, c->outer), v = tc_poly_set_member_var(set, c->inner);
	isl_set_free(set);
	c->ok = c->ok && st && u >= 0 && v >= 0 && u != v && !st->sub && !st->part_rows &&
		(!st->guard || (!tc_ir_uses_var(st->guard, u) && !tc_ir_uses_var(st->guard, v))) &&
		row_access(c, st, st->tensor, NULL, st->nlhs, u, v) &&
		(ps->kind == TC_POLY_INIT || row_reads(c, st, st->rhs, u, v));
	return c->ok ? isl_stat_ok : isl_stat_error;
}

/* Whether node lies under a mark other than the root's and a parallel
 * loop's (a register tile's, an unrolled loop's). */
static int under_mark(isl_schedule_node *node)
{
	isl_schedule_node *a = isl_schedule_node_copy(node);
	int found = 0;
	while (a && !found && isl_schedule_node_has_parent(a) == isl_bool_true) {
		a = isl_schedule_node_parent(a);
		found = a && isl_schedule_node_get_type(a) == isl_schedule_node_mark;
		if (found) { /* the root's and a parallel loop's marks are no tile's */
			isl_id *id = isl_schedule_node_mark_get_id(a);
			found = !id || (strcmp(isl_id_get_name(id), TC_POLY_MARK_KERNEL) &&
				strcmp(isl_id_get_name(id), TC_POLY_MARK_PARALLEL));
			isl_id_free(id);
		}
	}
	isl_schedule_node_free(a);
	return found;
}

/* The band at node with its last two members as one (see above), or node
 * itself; NULL on an isl error. */
static isl_schedule_node *collapse_band(isl_schedule_node *node, const tc_poly *p, int *changed)
{
	isl_size n = isl_schedule_node_band_n_member(node);
	isl_multi_union_pw_aff *mupa;
	isl_union_set *dom;
	isl_union_pw_aff *sum;
	isl_schedule_node *child;
	rows_ctx c = {p, NULL, NULL, 0, 1};
	int64_t lo[2], step[2], count[2];
	int coinc[64], j, leaf, failed;
	isl_bool permutable;
	if (n < 2 || n > 64 || !p->params)
		return node;
	child = isl_schedule_node_get_child(node, 0);
	leaf = child && isl_schedule_node_get_type(child) == isl_schedule_node_leaf;
	isl_schedule_node_free(child);
	if (!leaf || under_mark(node))
		return node;
	for (j = n - 2; j < n; j++)
		if (isl_schedule_node_band_member_get_ast_loop_type(node, j) != isl_ast_loop_default)
			return node;
	lo[0] = lo[1] = 0;
	count[0] = tc_poly_band_member_steps(p, node, n - 2, &lo[0], &step[0]);
	count[1] = c.count = tc_poly_band_member_steps(p, node, n - 1, &lo[1], &step[1]);
	if (tc_poly_band_has_options(node) || count[0] < 2 || c.count < 2 ||
		c.count >= COLLAPSE_ROW || step[0] != 1 || step[1] != 1 || lo[1] != 0)
		return node;
	mupa = isl_schedule_node_band_get_partial_schedule(node);
	c.outer = isl_multi_union_pw_aff_get_union_pw_aff(mupa, n - 2);
	c.inner = isl_multi_union_pw_aff_get_union_pw_aff(mupa, n - 1);
	dom = isl_schedule_node_get_domain(node);
	failed = isl_union_set_foreach_set(dom, rows_cb, &c) < 0 && c.ok; /* isl failed */
	isl_union_set_free(dom);
	isl_union_pw_aff_free(c.outer);
	isl_union_pw_aff_free(c.inner);
	if (failed || !c.ok) {
		isl_multi_union_pw_aff_free(mupa);
		return failed ? isl_schedule_node_free(node) : node;
	}
	/* (outer - lo) * count + inner, in the outer member's place */
	sum = tc_poly_band_linearize(node, n - 2, 2, lo, step, count);
	mupa = isl_multi_union_pw_aff_set_union_pw_aff(mupa, n - 2, sum);
	mupa = isl_multi_union_pw_aff_drop_dims(mupa, isl_dim_set, n - 1, 1);
	for (j = 0; j < n; j++)
		coinc[j] = isl_schedule_node_band_member_get_coincident(node, j) == isl_bool_true;
	permutable = isl_schedule_node_band_get_permutable(node);
	node = isl_schedule_node_delete(node);
	node = isl_schedule_node_insert_partial_schedule(node, mupa);
	for (j = 0; j < n - 2; j++)
		node = isl_schedule_node_band_member_set_coincident(node, j, coinc[j]);
	node = isl_schedule_node_band_member_set_coincident(node, n - 2, coinc[n - 2] && coinc[n - 1]);
	node = isl_schedule_node_band_set_permutable(node, permutable == isl_bool_true);
	*changed = 1;
	return node;
}

/* Every band of the tree below node, children first. */
static isl_schedule_node *collapse_walk(isl_schedule_node *node, const tc_poly *p, int *changed)
{
	return tc_poly_bands_bottom_up(node, p, collapse_band, changed);
}

tc_stat tc_poly_pass_collapse(__tc_keep tc_poly *p, __tc_keep tc_diags *d)
{
	int changed;
	return tc_poly_walk_schedule(p, d, collapse_walk, "collapse short rows", &changed);
}
