/* The walk over the isl AST of the LLVM back end, and the module of a
 * kernel: AST nodes (for, if, block, mark, user), loop metadata (the
 * vector and unroll_inner options), parallel loops and their outlining,
 * streaming stores, the kernel body, and tc_cg_llvm_build_module, which
 * makes the module of a tc_poly.
 *
 * It owns the control flow: which function and block code goes to, the
 * iterators in scope and the flags the expressions read (ordered,
 * stream).  Values (isl AST expressions, tensor accesses, statement
 * bodies) it asks of llvm_expr.c; it knows nothing of the pass pipeline,
 * the JIT or object files (llvm_jit.c), but for the host record it is
 * given.
 *
 * One kernel is one LLVM function  void tc_NAME_K(ptr tensors)  built by a
 * walk over the isl AST of a tc_poly:
 *
 *   for    an i64 stack slot for the iterator (alloca in the entry block;
 *          O3's SROA/mem2reg turns it into a phi), a condition block, the
 *          body and the increment; a degenerate loop runs its body once.
 *          The back edge of an innermost loop carries the vector and
 *          unroll_inner options as llvm.loop metadata (loop_hints).
 *   if     a conditional branch; block: the children in order; mark: its
 *          child, with the flags the mark sets (tc_regtile: ordered;
 *          tc_unroll down to tc_unrolled: the loops there are unrolled,
 *          unrolled_for) or run in parallel (tc_parallel).
 *   user   the tc_poly_inst annotation: each domain dimension of the
 *          statement is evaluated from its isl expression, then the
 *          statement body is generated from the IR expression tree.
 *
 * A register tile's piece, and its init, may instead be emitted as the
 * vector micro-kernel itself ("register tiles as vector code" below); a
 * module of such code alone is marked TC_CG_VECTOR_CODE for llvm_jit.c's
 * lighter pass pipeline. */

#include "llvm_internal.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/DebugInfo.h> /* LLVMTemporaryMDNode: the loop IDs */

#include <isl/ast.h>
#include <isl/id.h>
#include <isl/val.h>

#include <stdio.h>
#include <string.h>

/* ---- AST nodes ---- */

static void node(cg *g, isl_ast_node *n);

static LLVMValueRef iter_slot(cg *g, const char *name)
{
	return LLVMBuildAlloca(g->A, g->i64, name ? name : "it");
}

/* Room for one more iterator binding in g->iters; 0 (failure recorded) if
 * out of memory. */
static int room_for_iter(cg *g)
{
	if (g->niters == g->cap) {
		int cap = g->cap ? 2 * g->cap : 16;
		cg_iter *ni = tc_realloc(g->iters, (size_t)cap * sizeof(*ni));
		if (!ni) {
			tc_cg_llvm_fail(g, "out of memory", NULL);
			return 0;
		}
		g->iters = ni;
		g->cap = cap;
	}
	return 1;
}

/* Bind iterator id to its slot in g->iters (room_for_iter made room): an
 * iterator base modulo step where step > 0 (cg_iter), 0 for unknown. */
static void bind_iter(cg *g, isl_id *id, LLVMValueRef slot, int64_t base, int64_t step)
{
	g->iters[g->niters].id = id;
	g->iters[g->niters].slot = slot;
	g->iters[g->niters].base = base;
	g->iters[g->niters].step = step;
	g->niters++;
}

/* The elements of statement st's tensor in one of the target's vectors
 * (0 for an element size the target's vectors do not hold). */
static int64_t stmt_lanes(cg *g, const tc_poly_stmt *st)
{
	int size = tc_dtype_size(g->p->f->tensors[st->ir->tensor].dtype);
	return size > 0 ? g->p->target->vector_bytes / size : 0;
}

/* ---- loop metadata: the vector and unroll_inner options ---- */

/* Whether n is a non-degenerate for node (*user set, and the walk skips
 * what lies below). */
static isl_bool loop_below_cb(isl_ast_node *n, void *user)
{
	int *found = user;
	if (*found)
		return isl_bool_false;
	const tc_poly_inst *inst = isl_ast_node_get_type(n) == isl_ast_node_user
		? tc_poly_node_inst(n) : NULL;
	if ((isl_ast_node_get_type(n) == isl_ast_node_for &&
		    isl_ast_node_for_is_degenerate(n) == isl_bool_false) ||
		(inst && inst->points)) { /* a register tile's point loops */
		*found = 1;
		return isl_bool_false;
	}
	return isl_bool_true;
}

/* Whether body (of a for node) holds no loop: a degenerate for runs once
 * and is none; neither is a loop isl unrolled. */
static int is_innermost(isl_ast_node *body)
{
	int found = 0;
	if (isl_ast_node_foreach_descendant_top_down(body, loop_below_cb, &found) < 0)
		return 0;
	return !found;
}

/* The integer value of AST expression e, or 0 (with *ok cleared) if it is
 * not an integer. */
static int64_t ast_const(isl_ast_expr *e, int *ok)
{
	isl_val *v = e && isl_ast_expr_get_type(e) == isl_ast_expr_int ? isl_ast_expr_get_val(e) : NULL;
	int64_t r = 0;
	if (v && isl_val_is_int(v) == isl_bool_true)
		r = isl_val_get_num_si(v);
	else
		*ok = 0;
	isl_val_free(v);
	return r;
}

/* The number of iterations of for node n when its bounds and step are
 * constants ("for (i = LO; i <= HI; i += S)", or "<"), else 0. */
static int64_t trip_count(isl_ast_node *n)
{
	isl_ast_expr *init = isl_ast_node_for_get_init(n), *cond = isl_ast_node_for_get_cond(n);
	isl_ast_expr *inc = isl_ast_node_for_get_inc(n), *hi = NULL;
	int ok = init && cond && inc && isl_ast_expr_get_type(cond) == isl_ast_expr_op;
	int64_t lo = 0, ub = 0, step = 0, n_it = 0;
	enum isl_ast_expr_op_type op = ok ? isl_ast_expr_op_get_type(cond) : isl_ast_expr_op_error;
	if (op == isl_ast_expr_op_le || op == isl_ast_expr_op_lt) {
		hi = isl_ast_expr_op_get_arg(cond, 1);
		lo = ast_const(init, &ok);
		ub = ast_const(hi, &ok) - (op == isl_ast_expr_op_lt);
		step = ast_const(inc, &ok);
		if (ok && step > 0 && ub >= lo)
			n_it = (ub - lo) / step + 1;
	}
	isl_ast_expr_free(hi);
	isl_ast_expr_free(inc);
	isl_ast_expr_free(cond);
	isl_ast_expr_free(init);
	return n_it;
}

typedef struct widest_ctx {
	const tc_poly *p;
	int size;
} widest_ctx;

static void widest_read(const tc_ir_expr *e, int *size)
{
	int i, s;
	if (e->op == TC_OP_READ && (s = tc_dtype_size(e->type)) > *size)
		*size = s;
	for (i = 0; i < e->nargs; i++)
		widest_read(e->args[i], size);
}

static isl_bool widest_cb(isl_ast_node *n, void *user)
{
	widest_ctx *w = user;
	const tc_poly_inst *inst;
	int s;
	if (isl_ast_node_get_type(n) != isl_ast_node_user || !(inst = tc_poly_node_inst(n)))
		return isl_bool_true;
	s = tc_dtype_size(w->p->f->tensors[inst->stmt->ir->tensor].dtype);
	w->size = s > w->size ? s : w->size;
	widest_read(inst->stmt->ir->rhs, &w->size);
	return isl_bool_true;
}

/* The lanes the loop vectoriser gives loop body when it chooses: a
 * register of the widest element the body reads or writes (its rule). */
static int64_t auto_lanes(cg *g, isl_ast_node *body)
{
	widest_ctx w = {g->p, 0};
	isl_ast_node_foreach_descendant_top_down(body, widest_cb, &w);
	int vb = g->p->target->vector_bytes; /* as the register tile's sizes count */
	return w.size > 0 && w.size < vb ? vb / w.size : 1;
}

/* Whether AST expression e mentions the iterator id. */
static int expr_uses(isl_ast_expr *e, isl_id *id)
{
	isl_size i, n;
	int found = 0;
	if (isl_ast_expr_get_type(e) == isl_ast_expr_id) {
		isl_id *x = isl_ast_expr_get_id(e);
		found = x == id;
		isl_id_free(x);
		return found;
	}
	if (isl_ast_expr_get_type(e) != isl_ast_expr_op)
		return 0;
	n = isl_ast_expr_op_get_n_arg(e);
	for (i = 0; i < n && !found; i++) {
		isl_ast_expr *a = isl_ast_expr_op_get_arg(e, i);
		found = a && expr_uses(a, id);
		isl_ast_expr_free(a);
	}
	return found;
}

typedef struct carried_ctx {
	cg *g;
	isl_id *id;
	int ordered; /* inside a register tile (as g->ordered) */
	int found;
	int any; /* reorderable reductions count too */
} carried_ctx;

/* Whether the reductions of statement st may run in another order than
 * the interpreter's: what reduce() and the float arithmetic allow (float32
 * and float64 only, but not the float32 accumulators of 16-bit floats;
 * fastmath, or vecreduce outside register tiles for sums and max/min with
 * init; products keep their order without fastmath). */
static int reorderable(cg *g, const tc_poly_stmt *st, int ordered)
{
	tc_dtype t = g->p->f->tensors[st->ir->tensor].dtype;
	tc_red red = st->ir->red;
	if ((t != TC_T_F32 && t != TC_T_F64) || g->p->f->tensors[st->ir->tensor].widened)
		return 0; /* a 16-bit float's accumulator keeps the interpreter's order */
	if (g->opts.fastmath)
		return 1;
	return g->opts.vecreduce && !ordered &&
		(red == TC_RED_ADD || ((red == TC_RED_MIN || red == TC_RED_MAX) && st->ir->init));
}

static isl_bool carried_cb(isl_ast_node *n, void *user)
{
	carried_ctx *c = user;
	const tc_poly_inst *inst;
	const tc_poly_stmt *st;
	int j, uses = 0;
	if (c->found)
		return isl_bool_false;
	if (isl_ast_node_get_type(n) == isl_ast_node_mark) {
		isl_id *mark = isl_ast_node_mark_get_id(n);
		c->ordered |= mark && !strcmp(isl_id_get_name(mark), TC_POLY_MARK_REGTILE);
		isl_id_free(mark);
		return isl_bool_true;
	}
	if (isl_ast_node_get_type(n) != isl_ast_node_user || !(inst = tc_poly_node_inst(n)))
		return isl_bool_true;
	st = inst->stmt;
	/* a scatter's element changes with its gathered indices: its order
	 * is kept by its memory dependences (indirect addresses the
	 * vectoriser cannot reorder), not by this rule */
	if (st->kind != TC_POLY_UPDATE || st->ir->sub ||
		!tc_dtype_is_float(c->g->p->f->tensors[st->ir->tensor].dtype) ||
		(!c->any && reorderable(c->g, st, c->ordered)))
		return isl_bool_true;
	for (j = 0; j < st->ir->nlhs && j < inst->n && !uses; j++)
		uses = expr_uses(inst->index[j], c->id);
	c->found = !uses;
	return isl_bool_true;
}

/* Whether the loop over iterator id with body body carries a float
 * reduction that must keep the interpreter's order: an update of one
 * element (its left-hand indices independent of id) on every iteration
 * that reorderable() does not release.  A vectorisation width in the
 * loop's metadata lets the vectoriser reorder it all the same (LLVM's
 * hints-allow-reordering): a row sum under vector=2 came out 1 ulp off. */
static int carries_float_reduction(cg *g, isl_ast_node *body, isl_id *id)
{
	carried_ctx c = {g, id, g->ordered, 0, 0};
	isl_ast_node_foreach_descendant_top_down(body, carried_cb, &c);
	return c.found;
}

/* Whether the loop over iterator id with body body carries a float
 * reduction, in any order. */
static int carries_reduction(cg *g, isl_ast_node *body, isl_id *id)
{
	carried_ctx c = {g, id, g->ordered, 0, 1};
	isl_ast_node_foreach_descendant_top_down(body, carried_cb, &c);
	return c.found;
}

/* One loop property {!"name", i32 v} (i1 when is_bool). */
static LLVMMetadataRef loop_prop(cg *g, const char *name, int64_t v, int is_bool)
{
	LLVMMetadataRef ops[2];
	ops[0] = LLVMMDStringInContext2(g->C, name, strlen(name));
	ops[1] = LLVMValueAsMetadata(LLVMConstInt(is_bool ? g->i1 : g->i32, (unsigned long long)v, 0));
	return LLVMMDNodeInContext2(g->C, ops, 2);
}

/* A loop property without a value, {!"name"}. */
static LLVMMetadataRef loop_flag(cg *g, const char *name)
{
	LLVMMetadataRef s = LLVMMDStringInContext2(g->C, name, strlen(name));
	return LLVMMDNodeInContext2(g->C, &s, 1);
}

/* A followup property {!"name", props[0..n)}: the properties of the loops
 * a transformation leaves (n <= 2). */
static LLVMMetadataRef loop_followup(cg *g, const char *name, LLVMMetadataRef *props, size_t n)
{
	LLVMMetadataRef ops[3];
	size_t i;
	ops[0] = LLVMMDStringInContext2(g->C, name, strlen(name));
	for (i = 0; i < n && i < 2; i++)
		ops[i + 1] = props[i];
	return LLVMMDNodeInContext2(g->C, ops, i + 1);
}

/* Put the vector and unroll_inner options on the back edge br of an
 * innermost loop (body its body, it its iterator, trips its constant trip
 * count or 0) as its loop ID: a node whose first operand is itself, built
 * around a temporary node that is then replaced.  With both options
 * auto: the interleave count of auto_interleave and, for a short row
 * only, the width of auto_width; LLVM decides the rest.
 *
 * vector=1: llvm.loop.vectorize.width 1, and unroll_inner=U becomes
 * llvm.loop.unroll.count U (the unroller's factor).  build_module marks the
 * functions noimplicitfloat, which keeps the loop and SLP vectorisers out
 * altogether: the SLP vectoriser would pack the scalar copies of unrolled
 * loops (a register tile's rows) into vectors, and the pass builder's
 * option to turn it off is overridden by default<O3>.
 *
 * Otherwise the loop vectoriser does the work:
 *   vector=N       llvm.loop.vectorize.enable true and .width N: N lanes,
 *                  whatever the cost model prefers, where the loop can be
 *                  vectorised; and llvm.loop.unroll.disable, with followups
 *                  that give the loops the vectoriser leaves only
 *                  llvm.loop.isvectorized (and the scalar remainder no
 *                  runtime unrolling, the vectoriser's default).  LLVM
 *                  fully unrolls short loops before it vectorises, and
 *                  the SLP vectoriser then chooses the width (a register
 *                  tile's row of 4 vectors of 4 lanes became one zmm);
 *                  after the vectoriser the unroller is free again, which
 *                  a register tile needs: its vector loop must be fully
 *                  unrolled to keep the sums in registers.  A loop that
 *                  cannot be vectorised is then not unrolled at all.  A
 *                  loop that carries a float reduction which must keep
 *                  its order gets no width (carries_float_reduction).
 *   unroll_inner=U llvm.loop.interleave.count U: U vector iterations per
 *                  trip, each with its own partial sums where a reduction
 *                  may be reordered.  Without vector=N a short loop may
 *                  still be fully unrolled first, as by default.
 * A reduction loop over a row that another loop over the row follows in
 * the same nest (follows: softmax's backward, `dot(n) +=! d_P(n,c) *
 * P(n,c)` then `d_X(n,c) = P(n,c) * (d_P(n,c) - dot(n))`), with at least 4
 * trips of its interleaved vector loop, keeps that loop rolled
 * (llvm.loop.unroll.disable after the vectoriser): LLVM unrolls a row of
 * 1000 in full, and the nest then took 1.34-1.40 ms against 0.96-1.00
 * rolled (4096 x 1000, one thread; rows of 1024: 1.06-1.12 against
 * 0.91-1.02; derived softmax backward 1.11-1.13 against 0.96-0.99).  A
 * reduction or a pointwise loop alone is faster unrolled (layer norm's
 * row sums 0.52-0.55 ms against 0.86-0.87 rolled), so only this nest;
 * docs/performance.md, "Long loops left rolled".
 * A loop of a known trip count gets no more lanes than it has iterations
 * (the largest power of two below) and no more vector iterations per trip
 * than it has vectors (lanes as above, or a register's worth of its widest
 * element when LLVM chooses): beyond that the vector loop would never run
 * and every iteration would take the scalar remainder (conv2d 1x16x30x30
 * with 32 3x3 filters, whose rows of 28 leave partial register tiles of 4
 * columns: vector=8 unroll_inner=4 0.76 ms unclamped, 0.081 clamped;
 * vector=16 0.54 and 0.41 ms; defaults 0.21 ms; one thread).  No tail
 * folding (llvm.loop.vectorize.predicate.enable): a register tile's row of
 * 12 as one masked 16-lane vector leaves masked loads and stores of the
 * sums, which LICM does not keep in registers (grouped conv 16 x 16 at
 * 14 x 14: 17x the time of 8 + 4 lanes; docs/performance.md, Masked rows). */
/* The interleave count of an innermost loop with unroll_inner=auto: 2
 * outside register tiles (whose point loops are unrolled by the tile),
 * LLVM's choice (0) inside.  LLVM picks 4 for most loops here, and 2 is
 * faster for the row reductions and streams around contractions: one
 * thread, 4096 x 4096, row max 2.15 -> 1.65 ms, copy 2.92 -> 2.67,
 * softmax 5.94 -> 5.25-5.57 (the inline exp's 18 constants and the
 * temporaries of 4 copies do not fit in 32 vector registers: 16 register
 * copies per 4 vectors); docs/performance.md. */
static int64_t auto_interleave(cg *g)
{
	return g->ordered ? 0 : 2;
}

static int ast_unit_in(isl_ast_expr *e, isl_id *id);

typedef struct row_ctx {
	isl_id *id;
	int ok, n;
} row_ctx;

static isl_bool row_cb(isl_ast_node *n, void *user)
{
	row_ctx *r = user;
	const tc_poly_inst *inst;
	int j, last;
	if (!r->ok)
		return isl_bool_false;
	if (isl_ast_node_get_type(n) != isl_ast_node_user)
		return isl_bool_true;
	inst = tc_poly_node_inst(n);
	last = inst ? inst->stmt->ir->nlhs - 1 : -1;
	r->ok = inst && !inst->points && last >= 0 && last < inst->n &&
		ast_unit_in(inst->index[last], r->id);
	for (j = 0; j < last && r->ok; j++)
		r->ok = !expr_uses(inst->index[j], r->id);
	r->n++;
	return isl_bool_true;
}

/* Whether every statement of loop body body (one at least, none a
 * register tile's) writes a row along iterator id: its last left-hand
 * index id plus terms without it, the others without id. */
static int writes_rows(isl_ast_node *body, isl_id *id)
{
	row_ctx r = {id, 1, 0};
	isl_ast_node_foreach_descendant_top_down(body, row_cb, &r);
	return r.ok && r.n > 0;
}

/* The vector width of an innermost loop with vector=auto: 0 (LLVM
 * chooses), but for a short row outside register tiles, a loop of a
 * known trip count from half a register's lanes up to one lane short
 * of a register (auto_lanes; 8 to 15 floats with 64-byte vectors) that
 * writes rows along its iterator (writes_rows): the register's lanes,
 * which loop_hints halves to fit, so that a row of 10 is one vector of 8
 * and 2 scalars.  Left to LLVM such a loop is unrolled in full before
 * the loop vectoriser runs, which then vectorises the enclosing loop
 * across rows, t elements apart: gathers and scatters (the SGD update's
 * W2 128 x 10: 40 gathers and 20 scatters of 16 lanes, 1.10x the time of
 * the row vectors; docs/performance.md, Defaults against tuned). */
static int64_t auto_width(cg *g, isl_ast_node *body, isl_id *it, int64_t trips)
{
	int64_t lanes;
	if (g->opts.vector || g->ordered || trips <= 0)
		return 0;
	lanes = auto_lanes(g, body);
	if (lanes < 4 || trips < lanes / 2 || trips >= lanes || !writes_rows(body, it))
		return 0;
	return lanes;
}

static void loop_hints(cg *g, LLVMValueRef br, isl_ast_node *body, isl_id *it, int64_t trips,
	int follows)
{
	const tc_cg_opts *o = &g->opts;
	LLVMMetadataRef props[8], after[2], self, id;
	int64_t width = o->vector ? o->vector : auto_width(g, body, it, trips), ic = o->unroll_inner;
	size_t n = 0;
	if (width > 1 && carries_float_reduction(g, body, it))
		width = 0; /* LLVM chooses: it keeps the order */
	if (!ic && o->vector != 1)
		ic = auto_interleave(g);
	if (!br || (!width && !ic))
		return;
	self = LLVMTemporaryMDNode(g->C, NULL, 0);
	props[n++] = self;
	if (o->vector == 1) {
		props[n++] = loop_prop(g, "llvm.loop.vectorize.width", 1, 0);
		if (ic)
			props[n++] = loop_prop(g, "llvm.loop.unroll.count", ic, 0);
	} else {
		if (width) {
			while (trips > 1 && width > trips)
				width /= 2;
			props[n++] = loop_prop(g, "llvm.loop.vectorize.enable", 1, 1);
			props[n++] = loop_prop(g, "llvm.loop.vectorize.width", width, 0);
		}
		if (ic) {
			int64_t vf = width ? width : auto_lanes(g, body);
			if (trips > 0 && ic > trips / vf)
				ic = trips / vf > 1 ? trips / vf : 1;
			props[n++] = loop_prop(g, "llvm.loop.interleave.count", ic, 0);
			if (!width && follows && trips / vf / ic >= 4 &&
				carries_reduction(g, body, it)) { /* the comment above */
				after[0] = loop_prop(g, "llvm.loop.isvectorized", 1, 0);
				after[1] = loop_flag(g, "llvm.loop.unroll.disable");
				props[n++] = loop_followup(g, "llvm.loop.vectorize.followup_vectorized", after, 2);
			}
		}
		if (width) {
			after[0] = loop_prop(g, "llvm.loop.isvectorized", 1, 0);
			after[1] = loop_flag(g, "llvm.loop.unroll.runtime.disable");
			props[n++] = loop_flag(g, "llvm.loop.unroll.disable");
			props[n++] = loop_followup(g, "llvm.loop.vectorize.followup_vectorized", after, 1);
			props[n++] = loop_followup(g, "llvm.loop.vectorize.followup_epilogue", after, 2);
		}
	}
	id = LLVMMDNodeInContext2(g->C, props, n);
	LLVMMetadataReplaceAllUsesWith(self, id);
	LLVMSetMetadata(br, g->md_loop, LLVMMetadataAsValue(g->C, id));
}

/* The constant that bounds AST expression e on the side of op (min for
 * an upper bound, max for a lower one): e itself when an integer, the
 * tightest integer argument of a min (max); 0 with *ok cleared if none. */
static int64_t bound_const(isl_ast_expr *e, enum isl_ast_expr_op_type op, int *ok)
{
	isl_size i, n;
	int64_t r = 0;
	int found = 0;
	if (e && isl_ast_expr_get_type(e) == isl_ast_expr_int)
		return ast_const(e, ok);
	if (!e || isl_ast_expr_get_type(e) != isl_ast_expr_op || isl_ast_expr_op_get_type(e) != op) {
		*ok = 0;
		return 0;
	}
	n = isl_ast_expr_op_get_n_arg(e);
	for (i = 0; i < n; i++) {
		isl_ast_expr *a = isl_ast_expr_op_get_arg(e, i);
		int aok = a && isl_ast_expr_get_type(a) == isl_ast_expr_int;
		int64_t v = aok ? ast_const(a, &aok) : 0;
		isl_ast_expr_free(a);
		if (aok && (!found || (op == isl_ast_expr_op_min ? v < r : v > r))) {
			r = v;
			found = 1;
		}
	}
	*ok &= found;
	return r;
}

/* Keep the loop of back edge br rolled (llvm.loop.unroll.disable): an
 * outer loop below TC_POLY_MARK_ROLLED, the rows of a tile piece short of
 * them and the reduction loop inside each row, which LLVM would otherwise
 * unroll into as much code as the unrolled rows made; and the loops around
 * such a piece (the tile loops), which LLVM unrolled once the piece was
 * small (matmul 256: the four column tiles of the last row of tiles). */
static void keep_rolled(cg *g, LLVMValueRef br)
{
	LLVMMetadataRef props[2], id;
	props[0] = LLVMTemporaryMDNode(g->C, NULL, 0);
	props[1] = loop_flag(g, "llvm.loop.unroll.disable");
	id = LLVMMDNodeInContext2(g->C, props, 2);
	LLVMMetadataReplaceAllUsesWith(props[0], id);
	LLVMSetMetadata(br, g->md_loop, LLVMMetadataAsValue(g->C, id));
}

/* The most copies one unrolled loop may make (regtile.c's MAX_UNROLL
 * bounds the product of a register tile's rows; this bounds a loop whose
 * constant bounds are far apart, which the mark does not expect). */
#define MAX_COPIES 64

/* Unroll for node n (iterator slot slot, bound to its iterator by the
 * caller) if its iterations lie between constants: its body once per
 * value, the iterator a constant there (SROA makes it one), each copy
 * under the loop's own bounds as a guard unless they are constants.  The
 * copies are the AST's own loop, so isl need not generate them one by one
 * (the loops between TC_POLY_MARK_UNROLL and _UNROLLED: a register tile's
 * rows).  Returns 0, emitting nothing, if the bounds are not such (the
 * caller then emits a loop). */
static int unrolled_for(cg *g, isl_ast_node *n, isl_ast_node *body, isl_ast_expr *init,
	LLVMValueRef slot)
{
	isl_ast_expr *cond = isl_ast_node_for_get_cond(n), *inc = isl_ast_node_for_get_inc(n);
	isl_ast_expr *hi = NULL;
	enum isl_ast_expr_op_type op = cond && isl_ast_expr_get_type(cond) == isl_ast_expr_op
		? isl_ast_expr_op_get_type(cond) : isl_ast_expr_op_error;
	int ok = inc && (op == isl_ast_expr_op_le || op == isl_ast_expr_op_lt), lo_exact = 1,
		hi_exact = 1, done = 0;
	int64_t lo = 0, ub = 0, step = 0, v;
	if (ok) {
		hi = isl_ast_expr_op_get_arg(cond, 1);
		step = ast_const(inc, &ok);
		lo = ast_const(init, &lo_exact);
		if (!lo_exact && step == 1) /* a lower bound max(C, e): the copies from C */
			lo = bound_const(init, isl_ast_expr_op_max, &ok);
		ub = ast_const(hi, &hi_exact);
		if (!hi_exact)
			ub = bound_const(hi, isl_ast_expr_op_min, &ok);
		ub -= op == isl_ast_expr_op_lt;
		ok = ok && (lo_exact || step == 1) && step > 0 && ub >= lo &&
			(ub - lo) / step < MAX_COPIES;
	}
	for (v = lo; ok && v <= ub && !g->failed; v += step) {
		LLVMBasicBlockRef bthen = NULL, bend = NULL;
		LLVMBuildStore(g->B, LLVMConstInt(g->i64, (unsigned long long)v, 1), slot);
		if (!lo_exact || !hi_exact) {
			LLVMValueRef c = tc_cg_llvm_as_i1(g, tc_cg_llvm_ast_expr(g, cond));
			if (c && !lo_exact)
				c = LLVMBuildAnd(g->B, c, LLVMBuildICmp(g->B, LLVMIntSLE,
					tc_cg_llvm_as_i64(g, tc_cg_llvm_ast_expr(g, init)),
					LLVMConstInt(g->i64, (unsigned long long)v, 1), ""), "");
			if (!c)
				break;
			bthen = tc_cg_llvm_new_block(g, "unroll.then");
			bend = tc_cg_llvm_new_block(g, "unroll.end");
			LLVMBuildCondBr(g->B, c, bthen, bend);
			LLVMPositionBuilderAtEnd(g->B, bthen);
		}
		node(g, body);
		if (bend && !g->failed) {
			LLVMBuildBr(g->B, bend);
			LLVMPositionBuilderAtEnd(g->B, bend);
		}
		done = 1;
	}
	isl_ast_expr_free(hi);
	isl_ast_expr_free(inc);
	isl_ast_expr_free(cond);
	return done || g->failed;
}

/* ---- register tiles as vector code ----
 *
 * A register tile's piece (polyhedral/ast.c) is
 *     for (k ...)                  the reduction loop
 *       // tc_unroll
 *       for (r = R0; r < ...; ...) the tile's rows, constant bounds (or two
 *                                  such loops: rows of two members, f and h)
 *         // tc_unrolled
 *         for (j = J0; ...; j++)   the row's columns, constant bounds
 *           S(...);                one statement
 * and its init piece one loop over the rows around a loop over the columns
 * of an init; where isl built no loop for k (a reduction member of one
 * value there: a padded convolution's border taps, polyhedral/regtile.c)
 * the piece is the rows alone, and they may be one row without a loop.
 * Where the statement computes its elements a vector at a
 * time along the columns (tc_cg_llvm_vector_ok: the columns are its last
 * left-hand dimension, plus terms without them), the code generator emits
 * the micro-kernel itself: one accumulator per row and vector of the
 * target's width (<16 x float> on AVX-512; a row's rest of columns in
 * narrower vectors, vector_columns), loaded before the reduction
 * loop and stored after it, and in the loop, per row and vector, the
 * broadcasts, row loads and llvm.fmuladd of the statement, the rows and
 * vectors unrolled by us; an init is its vector stores.  LLVM's loop
 * vectoriser, SLP vectoriser, unroller and LICM then have nothing left to
 * do there, and a module whose statements in loops are all such code
 * (g->nvector, g->nscalar) gets the lighter pass pipeline of llvm_jit.c.
 * The sums keep the interpreter's order: each lane is one element, and
 * its steps are the scalar statement's, in the order of k.  Anything else
 * (rows or columns whose bounds are not constants, other statements,
 * other options of vector) keeps the scalar statements and LLVM's
 * passes. */

/* The most accumulators (rows times vectors) of one tile. */
#define VT_MAX_ACC 32

/* Whether isl AST expression e is the iterator id plus terms without it
 * (sums only): its value at id + 1 is one more. */
static int ast_unit_in(isl_ast_expr *e, isl_id *id)
{
	isl_ast_expr *a, *b;
	int r;
	if (isl_ast_expr_get_type(e) == isl_ast_expr_id)
		return expr_uses(e, id);
	if (isl_ast_expr_get_type(e) != isl_ast_expr_op ||
		isl_ast_expr_op_get_type(e) != isl_ast_expr_op_add ||
		isl_ast_expr_op_get_n_arg(e) != 2)
		return 0;
	a = isl_ast_expr_op_get_arg(e, 0);
	b = isl_ast_expr_op_get_arg(e, 1);
	r = a && b && ((ast_unit_in(a, id) && !expr_uses(b, id)) ||
		(!expr_uses(a, id) && ast_unit_in(b, id)));
	isl_ast_expr_free(a);
	isl_ast_expr_free(b);
	return r;
}

/* A loop of integer bounds and step: for node n (not degenerate) as
 * "for (it = lo; it <= hi; it += step)" (or "<"), its iterator (a
 * reference) and trip count; 0 if it is not such a loop. */
typedef struct const_loop {
	isl_id *id;
	int64_t lo, trips, step;
} const_loop;

static int const_loop_of(isl_ast_node *n, const_loop *l)
{
	isl_ast_expr *it, *init;
	int ok = 1;
	l->id = NULL;
	if (!n || isl_ast_node_get_type(n) != isl_ast_node_for ||
		isl_ast_node_for_is_degenerate(n) != isl_bool_false || !(l->trips = trip_count(n)))
		return 0;
	init = isl_ast_node_for_get_init(n);
	l->lo = ast_const(init, &ok);
	isl_ast_expr_free(init);
	init = isl_ast_node_for_get_inc(n);
	l->step = ast_const(init, &ok);
	isl_ast_expr_free(init);
	it = isl_ast_node_for_get_iterator(n);
	l->id = it && ok ? isl_ast_expr_get_id(it) : NULL;
	isl_ast_expr_free(it);
	return l->id != NULL;
}

/* The child of mark node n when its mark is name, else NULL (a
 * reference, or NULL). */
static isl_ast_node *mark_child(isl_ast_node *n, const char *name)
{
	isl_id *mark;
	int is;
	if (!n || isl_ast_node_get_type(n) != isl_ast_node_mark)
		return NULL;
	mark = isl_ast_node_mark_get_id(n);
	is = mark && !strcmp(isl_id_get_name(mark), name);
	isl_id_free(mark);
	return is ? isl_ast_node_mark_get_node(n) : NULL;
}

/* The most vectors of one row of a tile. */
#define VT_MAX_VEC 16

/* A tile found for vector code: the rows (or none, for an init's column
 * loop alone), the columns, the statement, its column dimension, and the
 * row's vectors: nvec of them, vector v from column off[v] (counted from
 * the loop's first), width[v] lanes. */
typedef struct vtile {
	const_loop row, row2, col; /* row2: an inner loop of rows (id NULL, one trip: none) */
	const tc_poly_inst *inst;
	int vc, nvec;
	int width[VT_MAX_VEC];
	int active[VT_MAX_VEC]; /* lanes in use: width, or the masked rest's */
	int64_t off[VT_MAX_VEC];
	LLVMValueRef rslot, r2slot, cslot;  /* the rows' and columns' iterators' slots */
	LLVMValueRef acc[VT_MAX_ACC], addr[VT_MAX_ACC]; /* per row and vector */
} vtile;

static void vtile_clear(vtile *t)
{
	isl_id_free(t->row.id);
	isl_id_free(t->row2.id);
	isl_id_free(t->col.id);
	t->row.id = t->row2.id = t->col.id = NULL;
}

/* The rows of tile t: both row loops' trips. */
static int64_t vtile_rows(const vtile *t)
{
	return t->row.trips * t->row2.trips;
}

/* e's value modulo m (m > 0) in [0, m) where the AST says it (the column
 * iterator col taking the value colv; a register tile's origin id the
 * value of its index expression, g->points; a loop iterator whose loop
 * steps by a multiple of m from a constant, cg_iter), else -1: sums,
 * differences, negations and products of integers and such ids (a product
 * is 0 modulo m when a factor is). */
static int64_t ast_residue(cg *g, isl_ast_expr *e, isl_id *col, int64_t colv, int64_t m)
{
	int64_t r = -1, a, b;
	isl_id *id;
	isl_val *v;
	int k;
	switch (isl_ast_expr_get_type(e)) {
	case isl_ast_expr_int:
		v = isl_ast_expr_get_val(e);
		if (v && isl_val_is_int(v) == isl_bool_true) {
			v = isl_val_mod(v, isl_val_int_from_si(isl_ast_expr_get_ctx(e), (long)m));
			r = v ? isl_val_get_num_si(v) : -1;
		}
		isl_val_free(v);
		return r;
	case isl_ast_expr_id:
		id = isl_ast_expr_get_id(e);
		if (id == col)
			r = ((colv % m) + m) % m;
		for (k = 0; r < 0 && g->points && k < g->points->points->n; k++)
			if (id == g->points->points->origin[k])
				r = ast_residue(g, g->points->index[k], col, colv, m);
		for (k = g->niters - 1; r < 0 && k >= 0; k--) /* the innermost binding */
			if (id == g->iters[k].id) {
				if (g->iters[k].step > 0 && g->iters[k].step % m == 0)
					r = ((g->iters[k].base % m) + m) % m;
				break;
			}
		isl_id_free(id);
		return r;
	case isl_ast_expr_op:
		break;
	default:
		return -1;
	}
	switch (isl_ast_expr_op_get_type(e)) {
	case isl_ast_expr_op_minus: {
		isl_ast_expr *x = isl_ast_expr_op_get_arg(e, 0);
		a = ast_residue(g, x, col, colv, m);
		isl_ast_expr_free(x);
		return a < 0 ? -1 : (m - a) % m;
	}
	case isl_ast_expr_op_add:
	case isl_ast_expr_op_sub:
	case isl_ast_expr_op_mul: {
		isl_ast_expr *x = isl_ast_expr_op_get_arg(e, 0), *y = isl_ast_expr_op_get_arg(e, 1);
		enum isl_ast_expr_op_type op = isl_ast_expr_op_get_type(e);
		a = ast_residue(g, x, col, colv, m);
		b = ast_residue(g, y, col, colv, m);
		isl_ast_expr_free(x);
		isl_ast_expr_free(y);
		if (op == isl_ast_expr_op_mul && (a == 0 || b == 0))
			return 0;
		if (a < 0 || b < 0)
			return -1;
		return op == isl_ast_expr_op_add ? (a + b) % m
			: op == isl_ast_expr_op_sub ? (a - b + m) % m : a * b % m;
	}
	default:
		return -1;
	}
}

/* Whether the vectors of tile t (its statement computing along t->vc)
 * read the elements of each tensor in panels (tc_ir_tensor.panel) that e
 * reads along vc within one panel: lane 0's column, the statement's index
 * expression at each vector's first column, is proven to sit in its panel
 * with room for the lanes (ast_residue modulo the panels' columns).  A
 * vector across two panels would load elements of another row.  (vec_ok
 * lets such reads have vc itself as their last subscript only.) */
static int panels_aligned(cg *g, const vtile *t, const tc_ir_expr *e)
{
	int k, v, P = e->op == TC_OP_READ ? g->p->f->tensors[e->id].panel : 0;
	for (v = 0; P > 0 && tc_ir_uses_var(e, t->vc) && v < t->nvec; v++) {
		int64_t r = ast_residue(g, t->inst->index[t->vc], t->col.id, t->col.lo + t->off[v], P);
		if (r < 0 || r + t->width[v] > P)
			return 0;
	}
	for (k = 0; k < e->nargs; k++)
		if (!panels_aligned(g, t, e->args[k]))
			return 0;
	return 1;
}

/* The one domain dimension of instance inst that moves with loop
 * iterator id, by one per step (ast_unit_in), or -1 if none or several
 * move with it or one moves otherwise. */
static int moving_dim(const tc_poly_inst *inst, isl_id *id)
{
	int k, d = -1;
	for (k = 0; k < inst->n; k++)
		if (expr_uses(inst->index[k], id)) {
			if (d >= 0 || !ast_unit_in(inst->index[k], id))
				return -1;
			d = k;
		}
	return d;
}

/* Whether the column loop col (t->col) holding body (a user node) is one
 * statement that vector code computes (t->inst, t->vc and the vectors
 * set): exactly one domain value moving with the column iterator, by one
 * per step.  The columns are vectors of the target's width, then, for
 * the rest, one vector each of the powers of two below it that the rest
 * holds (54 columns: 3 of 16 lanes, one of 4 and one of 2, as LLVM's
 * vectoriser and SLP made them; 7: 4, 2 and 1), or, where the target
 * takes a masked rest (tc_target.masked_rest) and the rest is no power of
 * two, one vector of the target's width whose first lanes are in use (54:
 * 3 of 16 lanes and one of 16 with 6 in use; 10: one of 16 with 10 in
 * use; a rest of 2, 4 or 8 keeps its one narrower vector: fcrelu
 * 128x128x10's rest of 2 columns took 1.15x the time masked). */
static int vector_columns(cg *g, isl_ast_node *body, vtile *t)
{
	const tc_poly_inst *inst = isl_ast_node_get_type(body) == isl_ast_node_user
		? tc_poly_node_inst(body) : NULL;
	int64_t lanes, off;
	if (!inst || inst->points || !inst->stmt || !inst->stmt->ir || inst->n != inst->stmt->ndims ||
		t->col.step != 1)
		return 0;
	t->inst = inst;
	t->vc = moving_dim(inst, t->col.id);
	lanes = stmt_lanes(g, inst->stmt);
	if (t->vc < 0 || lanes < 2)
		return 0;
	for (t->nvec = 0, off = 0; off < t->col.trips; off += lanes) {
		int64_t rest = t->col.trips - off;
		while (lanes > rest && (!g->p->target->masked_rest || !(rest & (rest - 1))))
			lanes /= 2;
		if (t->nvec == VT_MAX_VEC)
			return 0;
		t->width[t->nvec] = (int)lanes;
		t->active[t->nvec] = (int)(rest < lanes ? rest : lanes);
		t->off[t->nvec++] = off;
	}
	return tc_cg_llvm_vector_ok(g, inst->stmt, t->vc) &&
		panels_aligned(g, t, inst->stmt->ir->rhs);
}

/* Whether the rows of a register tile's piece, mark node rows_mark (the
 * tc_unroll mark), and what they hold are a piece of whole rows that
 * vector code computes (see above); t is filled (vtile_clear it after).
 * The rows are a loop of constant bounds, or two nested ones (t->row
 * and t->row2: a convolution's rows of f and of h), or, where the piece
 * has one row and one_row is set, none (isl builds no loop for one
 * value): t->row.id NULL, one trip.  The rows must write different
 * elements (one left-hand dimension is the row iterator plus terms
 * without it; with two, one such dimension for each, without the other's
 * iterator), and the elements
 * must not move with the reduction loop's iterator kid (NULL: no loop,
 * the piece runs once, see vector_once).  k's bounds need not be
 * constants (the last block of a blocked reduction: min(127, e - 1)): if
 * its loop runs no iteration, the accumulators' loads and stores put the
 * tile's own elements back as they were (the rows and columns are whole
 * and constant, so the elements exist, and only this tile's thread
 * touches them). */
static int vector_rows(cg *g, isl_ast_node *rows_mark, isl_id *kid, int one_row, vtile *t)
{
	isl_ast_node *rows = NULL, *cols = NULL, *user = NULL, *un = NULL, *inner;
	int ok = 0, k, d1 = -1, d2 = -1;
	memset(t, 0, sizeof(*t));
	t->row2.trips = t->row2.step = 1;
	if (!g->ordered || g->unroll || g->opts.vector ||
		!(rows = mark_child(rows_mark, TC_POLY_MARK_UNROLL)))
		goto done;
	if (one_row && isl_ast_node_get_type(rows) == isl_ast_node_mark) { /* one row */
		t->row.trips = t->row.step = 1;
		un = isl_ast_node_copy(rows);
	} else if (const_loop_of(rows, &t->row)) {
		un = isl_ast_node_for_get_body(rows);
		if (const_loop_of(un, &t->row2)) { /* rows of two members */
			inner = isl_ast_node_for_get_body(un);
			isl_ast_node_free(un);
			un = inner;
		} else {
			t->row2.lo = 0;
			t->row2.trips = t->row2.step = 1;
		}
	} else {
		goto done;
	}
	if (!(cols = mark_child(un, TC_POLY_MARK_UNROLLED)) || !const_loop_of(cols, &t->col))
		goto done;
	user = isl_ast_node_for_get_body(cols);
	if (!user || !vector_columns(g, user, t) ||
		vtile_rows(t) * t->nvec > VT_MAX_ACC || t->inst->stmt->kind != TC_POLY_UPDATE)
		goto done;
	for (k = 0; k < t->inst->stmt->ir->nlhs; k++) {
		isl_ast_expr *e = t->inst->index[k];
		if (kid && expr_uses(e, kid))
			goto done;
		if (k != t->vc && t->row.id && ast_unit_in(e, t->row.id) &&
			!(t->row2.id && expr_uses(e, t->row2.id)))
			d1 = k;
		if (k != t->vc && t->row2.id && ast_unit_in(e, t->row2.id) && !expr_uses(e, t->row.id))
			d2 = k;
	}
	ok = (d1 >= 0 || !t->row.id) && (d2 >= 0 || !t->row2.id);
done:
	isl_ast_node_free(user);
	isl_ast_node_free(cols);
	isl_ast_node_free(un);
	isl_ast_node_free(rows);
	if (!ok)
		vtile_clear(t);
	return ok;
}

/* Whether a reduction loop (iterator kid, body body) is a register
 * tile's piece of whole rows that vector code computes (vector_rows).
 * A piece of one row inside such a loop (polyhedral/ast.c's point loops
 * of a box domain's last row) keeps the scalar statement and LLVM's
 * vectoriser, as it had. */
static int vector_tile(cg *g, isl_ast_node *body, isl_id *kid, vtile *t)
{
	memset(t, 0, sizeof(*t));
	return isl_ast_node_get_type(body) == isl_ast_node_mark && vector_rows(g, body, kid, 0, t);
}

/* The most reduction loops around a register tile's rows that vector
 * code keeps its sums across. */
#define VT_MAX_NEST 8

/* Whether a reduction loop (iterator kid, body body) holds a perfect nest
 * of further loops (a convolution's r_c, r_kh, r_kw) around a piece of
 * whole rows that vector code computes (vector_tile of the innermost
 * loop), with none of the loops' iterators in the elements written: then
 * the sums stay in registers across the whole nest, loaded before the
 * outermost loop and stored after it, instead of around each run of the
 * innermost one (3 taps of a 3 x 3 window).  *rows: the rows' mark node
 * (a reference; NULL if not). */
static int vector_nest(cg *g, isl_ast_node *body, isl_id *kid, vtile *t, isl_ast_node **rows)
{
	isl_id *kids[VT_MAX_NEST];
	isl_ast_node *b = isl_ast_node_copy(body), *next;
	int nk = 0, ok = 0, i, k;
	*rows = NULL;
	kids[nk++] = isl_id_copy(kid);
	while (b && isl_ast_node_get_type(b) == isl_ast_node_for && nk < VT_MAX_NEST &&
		isl_ast_node_for_is_degenerate(b) == isl_bool_false) {
		isl_ast_expr *it = isl_ast_node_for_get_iterator(b);
		kids[nk] = it ? isl_ast_expr_get_id(it) : NULL;
		isl_ast_expr_free(it);
		if (!kids[nk++])
			break;
		next = isl_ast_node_for_get_body(b);
		isl_ast_node_free(b);
		b = next;
	}
	if (nk >= 2 && kids[nk - 1] && b && vector_tile(g, b, kids[nk - 1], t)) {
		ok = 1;
		for (i = 0; ok && i < nk - 1; i++)
			for (k = 0; ok && k < t->inst->stmt->ir->nlhs; k++)
				ok = !expr_uses(t->inst->index[k], kids[i]);
		if (!ok)
			vtile_clear(t);
	}
	for (i = 0; i < nk; i++)
		isl_id_free(kids[i]);
	if (ok)
		*rows = b;
	else
		isl_ast_node_free(b);
	return ok;
}

/* g->dom[0 .. n) from the statement's index expressions. */
static int eval_dom(cg *g, const tc_poly_inst *inst, int n)
{
	int k;
	for (k = 0; k < n; k++)
		if (!(g->dom[k] = tc_cg_llvm_as_i64(g, tc_cg_llvm_ast_expr(g, inst->index[k]))))
			return 0;
	g->ndom = n;
	g->dom_ir = inst->stmt->ir;
	return 1;
}

/* The code of copy (r, v) of tile t: the row and column iterators' slots
 * hold row r's value and vector v's first column. */
static void vtile_at(cg *g, const vtile *t, LLVMValueRef rslot, LLVMValueRef cslot, int64_t r,
	int v)
{
	if (rslot)
		LLVMBuildStore(g->B,
			tc_cg_llvm_i64c(g, t->row.lo + r / t->row2.trips * t->row.step), rslot);
	if (t->r2slot)
		LLVMBuildStore(g->B,
			tc_cg_llvm_i64c(g, t->row2.lo + r % t->row2.trips * t->row2.step), t->r2slot);
	LLVMBuildStore(g->B, tc_cg_llvm_i64c(g, t->col.lo + t->off[v]), cslot);
}

/* Bind the row and column iterators of tile t to their slots (made on
 * the first call); 0 on failure. */
static int vtile_bind(cg *g, vtile *t)
{
	int k;
	for (k = 0; k < 3; k++) {
		isl_id *id = k == 2 ? t->col.id : k ? t->row2.id : t->row.id;
		LLVMValueRef *slot = k == 2 ? &t->cslot : k ? &t->r2slot : &t->rslot;
		if (!id) /* one row, no loop */
			continue;
		if (!room_for_iter(g))
			return 0;
		if (!*slot)
			*slot = iter_slot(g, isl_id_get_name(id));
		bind_iter(g, id, *slot, 0, 0);
	}
	return 1;
}

/* Before the reduction loop of tile t (vector_tile): each accumulator (a
 * vector slot in the entry block, which SROA keeps in a register) loaded
 * from its elements, whose addresses t keeps for the stores. */
static void vtile_load(cg *g, vtile *t)
{
	const tc_poly_stmt *s = t->inst->stmt;
	int64_t r;
	int v;
	int i, base = g->niters;
	if (!vtile_bind(g, t))
		goto done;
	for (r = i = 0; r < vtile_rows(t) && !g->failed; r++)
		for (v = 0; v < t->nvec && !g->failed; v++, i++) {
			LLVMValueRef x;
			vtile_at(g, t, t->rslot, t->cslot, r, v);
			if (!eval_dom(g, t->inst, s->ir->nlhs))
				goto done;
			t->addr[i] = tc_cg_llvm_lhs_address(g, s);
			g->vactive = t->active[v];
			x = g->acc_init && g->acc_init->ir == s->ir /* init_in_registers */
				? tc_cg_llvm_vector_value(g, g->acc_init, t->vc, t->width[v], NULL)
				: tc_cg_llvm_vector_load(g, s->ir->tensor, t->addr[i], t->width[v]);
			g->vactive = 0;
			if (!x)
				goto done;
			t->acc[i] = LLVMBuildAlloca(g->A, LLVMTypeOf(x), "acc");
			LLVMBuildStore(g->B, x, t->acc[i]);
		}
done:
	g->ndom = 0;
	g->niters = base;
}

/* One iteration of the reduction loop of tile t: per row and vector, the
 * statement's step on its accumulator.  With rows of two members (f
 * outer, h inner) a step's operands that one member's copies share stay
 * live while the other's stream: f's copies innermost where they are
 * fewer than h's rows times the vectors (2 x 6 rows keep 2 broadcasts,
 * not 6 input vectors; 2 x 12 rows took 1.6x the time the other way). */
static void vtile_step(cg *g, vtile *t)
{
	int64_t r, q, n = vtile_rows(t) * t->nvec, rf = t->row.trips, rh = t->row2.trips;
	int v, i, base = g->niters;
	/* rows of two members: the outer member's copies innermost where
	 * they are fewer than the inner member's rows times the vectors */
	int outer_inner = rh > 1 && rf < rh * t->nvec;
	if (!vtile_bind(g, t))
		goto done;
	for (q = 0; q < n && !g->failed; q++) {
		LLVMValueRef x;
		if (outer_inner) {
			v = (int)(q / rf % t->nvec);
			r = q % rf * rh + q / rf / t->nvec;
		} else {
			v = (int)(q % t->nvec);
			r = q / t->nvec;
		}
		i = (int)(r * t->nvec + v);
		vtile_at(g, t, t->rslot, t->cslot, r, v);
		if (!eval_dom(g, t->inst, t->inst->n))
			goto done;
		x = LLVMBuildLoad2(g->B, LLVMGetAllocatedType(t->acc[i]), t->acc[i], "");
		g->vactive = t->active[v];
		x = tc_cg_llvm_vector_value(g, t->inst->stmt, t->vc, t->width[v], x);
		g->vactive = 0;
		if (!x)
			goto done;
		LLVMBuildStore(g->B, x, t->acc[i]);
	}
done:
	g->ndom = 0;
	g->niters = base;
}

/* The most trips of a vector tile's reduction loop that vtile_taps
 * unrolls, and the most vector steps (accumulators times trips) of the
 * unrolled copies. */
#define VT_TAPS 4
#define VT_TAP_STEPS 48

/* Whether the reduction loop n (iterator slot slot) whose body is the
 * rows of vector tile t was emitted unrolled: a loop of at most VT_TAPS
 * constant trips (a 3 x 3 window's taps along a row) whose copies make at
 * most VT_TAP_STEPS vector steps, t's step once per value.  Left rolled,
 * the exit of a small tile's loop, taken every third step, ran a grouped
 * convolution of 4 channels per group (4 x 4 accumulators) 1.1x slower;
 * unrolled, conv2d's tile of 24 accumulators ran 1.15x slower
 * (docs/performance.md, "Masked rows on Zen 5"). */
static int vtile_taps(cg *g, isl_ast_node *n, LLVMValueRef slot, vtile *t)
{
	const_loop l;
	int64_t i;
	if (!const_loop_of(n, &l))
		return 0;
	isl_id_free(l.id);
	if (l.trips > VT_TAPS || l.trips * vtile_rows(t) * t->nvec > VT_TAP_STEPS)
		return 0;
	for (i = 0; i < l.trips && !g->failed; i++) {
		LLVMBuildStore(g->B, tc_cg_llvm_i64c(g, l.lo + i * l.step), slot);
		vtile_step(g, t);
	}
	return 1;
}

/* After the reduction loop of tile t: the accumulators stored. */
static void vtile_store(cg *g, vtile *t)
{
	int i, nacc = (int)vtile_rows(t) * t->nvec;
	for (i = 0; i < nacc && !g->failed; i++) {
		g->vactive = t->active[i % t->nvec];
		tc_cg_llvm_vector_store(g, t->inst->stmt->ir->tensor, t->addr[i],
			LLVMBuildLoad2(g->B, LLVMGetAllocatedType(t->acc[i]), t->acc[i], ""));
	}
	g->vactive = 0;
	g->nvector++;
}

/* Whether the column loop n (iterator slot slot, bound by the caller) of
 * an init inside a register tile, holding body, was emitted as vector
 * stores (its columns in vectors as vector_columns splits them). */
static int vector_init(cg *g, isl_ast_node *n, isl_ast_node *body, LLVMValueRef slot)
{
	vtile t;
	int v, ok;
	memset(&t, 0, sizeof(t));
	t.row2.trips = 1;
	if (!g->ordered || g->unroll || g->opts.vector ||
		isl_ast_node_get_type(body) != isl_ast_node_user || !const_loop_of(n, &t.col))
		return 0;
	ok = vector_columns(g, body, &t) && t.inst->stmt->kind == TC_POLY_INIT;
	for (v = 0; ok && v < t.nvec && !g->failed; v++) {
		const tc_poly_stmt *s = t.inst->stmt;
		vtile_at(g, &t, NULL, slot, 0, v);
		g->vactive = t.active[v];
		if (eval_dom(g, t.inst, t.inst->n))
			tc_cg_llvm_vector_store(g, s->ir->tensor, tc_cg_llvm_lhs_address(g, s),
				tc_cg_llvm_vector_value(g, s, t.vc, t.width[v], NULL));
		g->vactive = 0;
		g->ndom = 0;
	}
	g->nvector += ok;
	vtile_clear(&t);
	return ok;
}

/* Whether the vectors of `lanes` elements that a copy (inst, its
 * left-hand side's last dimension vb moving with loop iterator id) stores
 * from id's value v, and from every value a multiple of lanes further,
 * each lie in one panel of its left-hand side when that is in panels
 * (tc_ir_tensor.panel, a multiple of lanes: tc_cg_llvm_copy_ok): the
 * element index at v is 0 modulo lanes (ast_residue: pack_schedule's
 * squares start at multiples of the transpose tile, a multiple of the
 * lanes).  A vector across two panels would store into another row. */
static int panel_rows(cg *g, const tc_poly_inst *inst, int vb, isl_id *id, int64_t v,
	int64_t lanes)
{
	return g->p->f->tensors[inst->stmt->ir->tensor].panel <= 0 ||
		ast_residue(g, inst->index[vb], id, v, lanes) == 0;
}

/* ---- copies as vector code ----
 *
 * The packing copies (ir/pack.c; polyhedral/schedule.c's pack_schedule
 * tiles their last two dimensions in squares of the target's
 * transpose_tile, full squares apart) of a kernel whose other statements
 * are register tiles are what kept such a kernel from the lighter pass
 * pipeline of vector code (llvm_jit.c): a matmul whose B is copied into
 * panels (Intel AVX-512 hosts at 1024 columns or more) compiled in 88 ms
 * against 45 without the copy.  The code generator moves them itself:
 * a square's rows copied a vector at a time (vector_copy, below), a
 * transpose in registers (vector_transpose), the values unchanged, so the
 * results are the scalar copy's bits. */

/* Whether the loop n (iterator slot slot, bound by the caller) holding
 * body was emitted as a packing copy's rows of vectors: a constant loop
 * of step 1 and a whole number of vectors of trips, along which one
 * domain dimension moves, the last of the copy's left-hand side and of
 * its read (tc_cg_llvm_copy_ok with va == vb). */
static int vector_copy(cg *g, isl_ast_node *n, isl_ast_node *body, LLVMValueRef slot)
{
	const_loop l;
	const tc_poly_inst *inst;
	int vb, ok = 0;
	int64_t lanes, i;
	memset(&l, 0, sizeof(l));
	if (g->unroll || g->opts.vector || isl_ast_node_get_type(body) != isl_ast_node_user ||
		!(inst = tc_poly_node_inst(body)) || inst->points || !inst->stmt || !inst->stmt->ir ||
		!inst->stmt->ir->pack || inst->n != inst->stmt->ndims || !const_loop_of(n, &l) ||
		l.step != 1)
		goto done;
	lanes = stmt_lanes(g, inst->stmt);
	if (lanes < 4 || l.trips % lanes || (vb = moving_dim(inst, l.id)) < 0 ||
		!tc_cg_llvm_copy_ok(g, inst->stmt, vb, vb) || !panel_rows(g, inst, vb, l.id, l.lo, lanes))
		goto done;
	ok = 1;
	for (i = 0; i < l.trips / lanes && !g->failed; i++) {
		LLVMValueRef v;
		LLVMBuildStore(g->B, tc_cg_llvm_i64c(g, l.lo + i * lanes), slot);
		if (!eval_dom(g, inst, inst->n) ||
			!(v = tc_cg_llvm_vector_rhs(g, inst->stmt, vb, (int)lanes)))
			break;
		tc_cg_llvm_vector_store(g, inst->stmt->ir->tensor,
			tc_cg_llvm_lhs_address(g, inst->stmt), v);
		g->ndom = 0;
	}
	g->nvector++;
done:
	g->ndom = 0;
	isl_id_free(l.id);
	return ok;
}

/* ---- transposing copies ----
 *
 * A copy that transposes (ir/pack.c's B_packed[r_k, n] = B[n, r_k] of
 * A * B^T; polyhedral/schedule.c tiles its last two dimensions in squares
 * of the target's transpose_tile) reads one tensor along the tile's outer
 * loop and writes along its inner one.  Where both loops are constant,
 * of as many trips, a whole number of a vector's lanes (16 floats on
 * AVX-512, 8 on AVX2: 2 x 2 squares of 8 in a 16 x 16 tile), for
 * statements tc_cg_llvm_copy_ok takes, the code generator, square
 * by square, loads the square's rows as vectors along the outer loop, one per value
 * of the inner one, transposes them in registers (log2(lanes) stages of
 * two-vector shuffles: stage h pairs rows i and i + h, each lane block
 * of h going to the row whose bit h it names) and stores each as a row of
 * the output: no gathers or element-wise moves.  The values move
 * unchanged, so the results are the scalar copy's bits. */

/* The most lanes of a transposing copy's square. */
#define VT_MAX_SQUARE 16

/* Whether the loop n (iterator slot slot, bound by the caller) holding
 * body was emitted as a square of a transposing copy (see above). */
static int vector_transpose(cg *g, isl_ast_node *n, isl_ast_node *body, LLVMValueRef slot)
{
	const_loop outer, inner;
	isl_ast_node *user = NULL;
	const tc_poly_inst *inst = NULL;
	LLVMValueRef rows[VT_MAX_SQUARE], islot = NULL, st;
	int va, vb, ok = 0, base = g->niters, streamed;
	int64_t lanes, i, h, sq;
	memset(&outer, 0, sizeof(outer));
	memset(&inner, 0, sizeof(inner));
	if (g->unroll || g->opts.vector || !const_loop_of(n, &outer) || outer.step != 1 ||
		!const_loop_of(body, &inner) || inner.step != 1 || outer.trips != inner.trips ||
		!(user = isl_ast_node_for_get_body(body)) ||
		isl_ast_node_get_type(user) != isl_ast_node_user || !(inst = tc_poly_node_inst(user)) ||
		inst->points || !inst->stmt || !inst->stmt->ir || inst->n != inst->stmt->ndims)
		goto done;
	/* one dimension moving with each loop, not the same one */
	if ((va = moving_dim(inst, outer.id)) < 0 || (vb = moving_dim(inst, inner.id)) < 0 ||
		va == vb)
		goto done;
	lanes = stmt_lanes(g, inst->stmt);
	streamed = g->stream && g->streamed[inst->stmt->ir->tensor];
	if (lanes < 4 || lanes > VT_MAX_SQUARE || outer.trips % lanes ||
		!tc_cg_llvm_copy_ok(g, inst->stmt, va, vb) ||
		!panel_rows(g, inst, vb, inner.id, inner.lo, lanes) ||
		(streamed && ast_residue(g, inst->index[vb], inner.id, inner.lo, lanes) != 0) ||
		!room_for_iter(g))
		goto done;
	ok = 1;
	islot = iter_slot(g, isl_id_get_name(inner.id));
	bind_iter(g, inner.id, islot, 0, 0);
	for (sq = 0; sq < outer.trips / lanes * (outer.trips / lanes) && !g->failed; sq++) {
		int64_t o0 = outer.lo + sq / (outer.trips / lanes) * lanes;
		int64_t i0 = inner.lo + sq % (outer.trips / lanes) * lanes;
		for (i = 0; i < lanes && !g->failed; i++) { /* row i: inner i0 + i, along outer */
			LLVMBuildStore(g->B, tc_cg_llvm_i64c(g, o0), slot);
			LLVMBuildStore(g->B, tc_cg_llvm_i64c(g, i0 + i), islot);
			if (!eval_dom(g, inst, inst->n) ||
				!(rows[i] = tc_cg_llvm_vector_rhs(g, inst->stmt, va, (int)lanes)))
				goto done;
			g->ndom = 0;
		}
		for (h = 1; h < lanes && !g->failed; h *= 2) /* the stages */
			for (i = 0; i < lanes; i++) {
				LLVMValueRef lo[VT_MAX_SQUARE], hi[VT_MAX_SQUARE], a = rows[i], b;
				int64_t l;
				if (i & h)
					continue;
				b = rows[i + h];
				for (l = 0; l < lanes; l++) {
					lo[l] = LLVMConstInt(g->i32,
						(unsigned long long)(l & h ? lanes + l - h : l), 0);
					hi[l] = LLVMConstInt(g->i32,
						(unsigned long long)(l & h ? lanes + l : l + h), 0);
				}
				rows[i] = LLVMBuildShuffleVector(g->B, a, b,
					LLVMConstVector(lo, (unsigned)lanes), "");
				rows[i + h] = LLVMBuildShuffleVector(g->B, a, b,
					LLVMConstVector(hi, (unsigned)lanes), "");
			}
		for (i = 0; i < lanes && !g->failed; i++) { /* output row o0 + i, along inner */
			LLVMBuildStore(g->B, tc_cg_llvm_i64c(g, o0 + i), slot);
			LLVMBuildStore(g->B, tc_cg_llvm_i64c(g, i0), islot);
			if (!eval_dom(g, inst, inst->stmt->ir->nlhs))
				goto done;
			st = tc_cg_llvm_vector_store(g, inst->stmt->ir->tensor,
				tc_cg_llvm_lhs_address(g, inst->stmt), rows[i]);
			if (st && streamed) /* a row's vectors from a multiple of lanes */
				LLVMSetAlignment(st, (unsigned)(lanes *
					tc_dtype_size(g->p->f->tensors[inst->stmt->ir->tensor].dtype)));
			g->ndom = 0;
		}
	}
	g->nvector++;
done:
	g->ndom = 0;
	g->niters = base;
	isl_ast_node_free(user);
	isl_id_free(outer.id);
	isl_id_free(inner.id);
	return ok;
}

/* Whether the rows of a register tile's piece, mark node n, that are no
 * loop's whole body (for_node's vector_tile takes a reduction loop's) were
 * emitted as vector code: the accumulators loaded, the statement's one
 * step, the accumulators stored.  isl builds no loop for a member of one
 * value: a padded convolution's border tile runs its first tap (kw = 0)
 * on the rows it reaches apart from the others, which reach every row
 * (polyhedral/regtile.c, isolate_full_tiles), and the partial tile at the
 * other border its last tap on its first row alone. */
static int vector_once(cg *g, isl_ast_node *n)
{
	vtile vt;
	if (!vector_rows(g, n, NULL, 1, &vt))
		return 0;
	vtile_load(g, &vt);
	vtile_step(g, &vt);
	vtile_store(g, &vt);
	vtile_clear(&vt);
	return 1;
}

/* The upper bound of a for node whose condition cond is "it <= E" or
 * "it < E" (*strict) with E not using the iterator id, evaluated where the
 * builder is (before the loop), or NULL for another condition.  For a
 * register tile's reduction loop (vector code): isl's bound there
 * (min(191, e - 1) where the reduction ends in a partial block) is then
 * computed once per loop, not at every step of the micro-kernel, which
 * the lighter pass pipeline of vector code (llvm_jit.c: no LICM) left as
 * a compare, a cmov, a compare and a branch per step besides the loop's
 * own.  Other loops keep their condition as isl wrote it (hoisted from
 * every loop, sgemm 256 ran 1.025x the time on two threads: the outer
 * loops' registers allocated otherwise). */
static LLVMValueRef loop_bound(cg *g, isl_ast_expr *cond, isl_id *id, int *strict)
{
	enum isl_ast_expr_op_type op;
	isl_ast_expr *a = NULL, *b = NULL;
	LLVMValueRef ub = NULL;
	isl_id *x = NULL;
	if (isl_ast_expr_get_type(cond) != isl_ast_expr_op || isl_ast_expr_op_get_n_arg(cond) != 2)
		return NULL;
	op = isl_ast_expr_op_get_type(cond);
	if (op != isl_ast_expr_op_le && op != isl_ast_expr_op_lt)
		return NULL;
	a = isl_ast_expr_op_get_arg(cond, 0);
	b = isl_ast_expr_op_get_arg(cond, 1);
	if (a && b && isl_ast_expr_get_type(a) == isl_ast_expr_id &&
		(x = isl_ast_expr_get_id(a)) == id && !expr_uses(b, id)) {
		*strict = op == isl_ast_expr_op_lt;
		ub = tc_cg_llvm_as_i64(g, tc_cg_llvm_ast_expr(g, b));
	}
	isl_id_free(x);
	isl_ast_expr_free(a);
	isl_ast_expr_free(b);
	return ub;
}

static void for_node(cg *g, isl_ast_node *n)
{
	isl_ast_expr *it = isl_ast_node_for_get_iterator(n);
	isl_id *id = it ? isl_ast_expr_get_id(it) : NULL;
	isl_ast_expr *init = isl_ast_node_for_get_init(n);
	isl_ast_node *body = isl_ast_node_for_get_body(n);
	isl_ast_expr *cond = NULL, *inc = NULL;
	LLVMValueRef slot, v, c, ub;
	LLVMBasicBlockRef bcond, bbody, bexit;
	isl_bool degenerate = isl_ast_node_for_is_degenerate(n);
	int strict = 0;
	isl_ast_node *nest_rows = NULL;
	vtile vt, *vstep = NULL;
	int vec = 0, nest = 0, follows = g->loop_follows;

	g->loop_follows = 0;
	if (!id || !init || !body || degenerate < 0) {
		tc_cg_llvm_fail(g, "malformed for node", NULL);
		goto done;
	}
	if (!room_for_iter(g))
		goto done;
	slot = iter_slot(g, isl_id_get_name(id));
	if (!(v = tc_cg_llvm_as_i64(g, tc_cg_llvm_ast_expr(g, init))))
		goto done;
	LLVMBuildStore(g->B, v, slot);
	{ /* a constant start and step: the iterator's residue (ast_residue) */
		int ok = 1;
		int64_t base = ast_const(init, &ok), step;
		inc = isl_ast_node_for_get_inc(n); /* kept for the latch below */
		step = ast_const(inc, &ok);
		bind_iter(g, id, slot, base, ok && step > 0 ? step : 0);
	}
	if (degenerate) {
		node(g, body);
		g->niters--;
		goto done;
	}
	if (g->unroll && unrolled_for(g, n, body, init, slot)) {
		g->niters--;
		goto done;
	}
	if (vector_init(g, n, body, slot) || vector_transpose(g, n, body, slot) ||
		vector_copy(g, n, body, slot)) {
		g->niters--;
		goto done;
	}
	if (g->vnest && body == g->vnest_rows) /* a nest's innermost loop */
		vstep = g->vnest;
	else if (!g->vnest && (nest = vector_nest(g, body, id, &vt, &nest_rows)))
		vec = 1;
	else
		vec = vector_tile(g, body, id, &vt);
	if (vec)
		vtile_load(g, &vt);
	if (nest) {
		g->vnest = &vt;
		g->vnest_rows = nest_rows;
	} else if (vec) {
		vstep = &vt;
	}
	if (vstep && vtile_taps(g, n, slot, vstep)) {
		if (vec)
			vtile_store(g, &vt);
		g->niters--;
		goto done;
	}
	cond = isl_ast_node_for_get_cond(n);
	bcond = tc_cg_llvm_new_block(g, "for.cond");
	bbody = tc_cg_llvm_new_block(g, "for.body");
	bexit = tc_cg_llvm_new_block(g, "for.end");
	ub = cond && vstep ? loop_bound(g, cond, id, &strict) : NULL;
	LLVMBuildBr(g->B, bcond);
	LLVMPositionBuilderAtEnd(g->B, bcond);
	if (ub)
		c = LLVMBuildICmp(g->B, strict ? LLVMIntSLT : LLVMIntSLE,
			LLVMBuildLoad2(g->B, g->i64, slot, ""), ub, "");
	else
		c = cond ? tc_cg_llvm_as_i1(g, tc_cg_llvm_ast_expr(g, cond))
			 : tc_cg_llvm_fail(g, "malformed for node", NULL);
	if (c) {
		int rolled_seen = g->rolled_seen;
		g->rolled_seen = 0;
		LLVMBuildCondBr(g->B, c, bbody, bexit);
		LLVMPositionBuilderAtEnd(g->B, bbody);
		if (vstep) {
			vtile_step(g, vstep);
		} else {
			g->loop_body = 1;
			node(g, body);
		}
		v = inc ? tc_cg_llvm_as_i64(g, tc_cg_llvm_ast_expr(g, inc))
			: tc_cg_llvm_fail(g, "malformed for node", NULL);
		if (v) {
			LLVMValueRef latch;
			v = LLVMBuildNSWAdd(g->B, LLVMBuildLoad2(g->B, g->i64, slot, ""), v, "");
			LLVMBuildStore(g->B, v, slot);
			latch = LLVMBuildBr(g->B, bcond);
			if (is_innermost(body))
				loop_hints(g, latch, body, id, trip_count(n), follows);
			else if (vec || vstep || g->rolled || g->rolled_seen) /* a vector
				* tile's reduction loops are the micro-kernel as it is */
				keep_rolled(g, latch);
		}
		g->rolled_seen |= rolled_seen;
		LLVMPositionBuilderAtEnd(g->B, bexit);
		if (vec)
			vtile_store(g, &vt);
	}
	g->niters--;
done:
	if (nest) {
		g->vnest = NULL;
		g->vnest_rows = NULL;
	}
	isl_ast_node_free(nest_rows);
	if (vec)
		vtile_clear(&vt);
	isl_ast_expr_free(cond);
	isl_ast_expr_free(inc);
	isl_ast_node_free(body);
	isl_ast_expr_free(init);
	isl_id_free(id);
	isl_ast_expr_free(it);
}

static void if_node(cg *g, isl_ast_node *n)
{
	isl_ast_expr *cond = isl_ast_node_if_get_cond(n);
	isl_ast_node *then = isl_ast_node_if_get_then_node(n);
	isl_ast_node *els = isl_ast_node_if_has_else_node(n) == isl_bool_true
				    ? isl_ast_node_if_get_else_node(n) : NULL;
	LLVMValueRef c = cond && then ? tc_cg_llvm_as_i1(g, tc_cg_llvm_ast_expr(g, cond))
				      : tc_cg_llvm_fail(g, "malformed if node", NULL);
	LLVMBasicBlockRef bthen, belse, bend;

	if (c) {
		bthen = tc_cg_llvm_new_block(g, "if.then");
		belse = els ? tc_cg_llvm_new_block(g, "if.else") : NULL;
		bend = tc_cg_llvm_new_block(g, "if.end");
		LLVMBuildCondBr(g->B, c, bthen, belse ? belse : bend);
		LLVMPositionBuilderAtEnd(g->B, bthen);
		node(g, then);
		if (!g->failed)
			LLVMBuildBr(g->B, bend);
		if (els) {
			LLVMPositionBuilderAtEnd(g->B, belse);
			node(g, els);
			if (!g->failed)
				LLVMBuildBr(g->B, bend);
		}
		LLVMPositionBuilderAtEnd(g->B, bend);
	}
	isl_ast_node_free(els);
	isl_ast_node_free(then);
	isl_ast_expr_free(cond);
}

static void add_string_attr(cg *g, LLVMValueRef f, const char *k, const char *v)
{
	LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex,
		LLVMCreateStringAttribute(g->C, k, (unsigned)strlen(k), v, (unsigned)strlen(v)));
}

/* Pointer k of the tensor array arr (tensors, then the error record and
 * the pool's parallel_for), loaded with builder b. */
static LLVMValueRef array_slot(cg *g, LLVMBuilderRef b, LLVMValueRef arr, int k, const char *name)
{
	LLVMValueRef ix = tc_cg_llvm_i64c(g, k);
	return LLVMBuildLoad2(b, g->ptr, LLVMBuildInBoundsGEP2(b, g->ptr, arr, &ix, 1, ""), name);
}

/* ---- streaming stores ----
 *
 * An output written once per element by a single assignment and larger
 * than STREAM_MIN_BYTES (layer norm's and softmax's results), which no
 * statement reads back (rmsnorm_res's Hs, read again in the same row
 * iteration, came back from memory), is stored
 * with non-temporal stores (vmovntps): they write whole cache lines to
 * memory without first reading them, a third less memory traffic for a
 * kernel that reads one array and writes another, and they leave the
 * caches to the inputs.  x86 has such stores only for aligned vectors,
 * and LLVM's vectoriser cannot make them from scalar stores, so:
 * - the kernel tests at run time that every streamed output is 64-byte
 *   aligned, and runs one of two copies of its loop nest: the plain one,
 *   or one (g->stream) whose loads of those outputs' pointers carry !align
 *   64, so that after vectorisation InstCombine knows the vector stores
 *   to be aligned;
 * - after the pass pipeline (llvm_jit.c's optimize),
 *   tc_cg_llvm_mark_streaming_stores() gives every vector store of 16
 *   to 64 bytes aligned to its size, or of whole lines aligned to 64
 *   (max-pool's data gradient, rows of 64 floats written as interleaved
 *   pairs in 128-byte stores: 0.72 -> 0.45 ms, 16x64x56x64, one thread,
 *   Zen 5), that writes a streamed output (its
 *   alias scope, listed in the module's tc.stream metadata) the
 *   !nontemporal flag: with AVX2's 32-byte vectors both halves of a line
 *   (a line's first half alone, aligned to 64, was the rule once: the
 *   other half's plain store to the line the first had just streamed made
 *   a 4096 x 1024 pointwise kernel 75 times slower on a Zen 3);
 * - the streaming copy ends with an sfence (non-temporal stores are weakly
 *   ordered), as does each of its outlined parallel loops. */
#define STREAM_MIN_BYTES (4 << 20)

static void align_64(cg *g, LLVMValueRef load)
{
	LLVMMetadataRef a = LLVMValueAsMetadata(LLVMConstInt(g->i64, 64, 0));
	LLVMSetMetadata(load, LLVMGetMDKindIDInContext(g->C, "align", 5),
		LLVMMetadataAsValue(g->C, LLVMMDNodeInContext2(g->C, &a, 1)));
}

static void sfence(cg *g)
{
	tc_cg_llvm_call_intrinsic(g, "llvm.x86.sse.sfence", NULL, 0, NULL, 0);
}

/* The bytes of every tensor the kernel touches (inputs, outputs and
 * temporaries) at its sizes. */
static double tensor_bytes(const cg *g)
{
	const tc_ir_func *f = g->p->f;
	double all = 0;
	int t, k;
	for (t = 0; t < f->ntensors; t++) {
		double bytes = tc_dtype_size(f->tensors[t].dtype);
		for (k = 0; k < f->tensors[t].ndim; k++)
			bytes *= (double)g->ext[(size_t)t * TC_MAX_RANK + k];
		all += bytes;
	}
	return all;
}

/* Which tensors get streaming stores (g->streamed); returns how many.
 * With stream auto, none where the kernel's tensors take less than a
 * quarter of the target's last-level cache: plain stores then leave the
 * output there for the next run or the next kernel, where streaming
 * stores send it to memory (the Intel host of docs/performance.md, 480
 * MiB of L3: layer norm 4096 x 1024, 32 MiB, 1.15 ms against 1.35
 * streamed on one thread, 0.57 against 0.68 on two; at 8192 rows 2.35
 * against 2.71; at 16384, 128 MiB, streaming won, 5.3 against 6.7). */
static int choose_streamed(cg *g)
{
	const tc_ir_func *f = g->p->f;
	int t, i, n = 0;
	if (!g->opts.stream || !g->p->params || strncmp(g->h->triple, "x86_64", 6))
		return 0;
	if (g->opts.stream == 1 && g->p->target->l3_bytes > 0 &&
		4 * tensor_bytes(g) < (double)g->p->target->l3_bytes)
		return 0;
	for (t = f->ninputs; t < f->ninputs + f->noutputs; t++) {
		int64_t bytes = tc_dtype_size(f->tensors[t].dtype), k, writers = 0, ok = 1;
		for (k = 0; k < f->tensors[t].ndim; k++)
			bytes *= g->ext[(size_t)t * TC_MAX_RANK + k];
		for (i = 0; i < f->nstmts; i++) {
			if (f->stmts[i].tensor == t) {
				writers++;
				ok &= f->stmts[i].red == TC_RED_ASSIGN &&
					f->stmts[i].nvars == f->stmts[i].nlhs;
			}
			/* read back by the kernel: left in the caches for its readers */
			ok &= !tc_ir_reads(f->stmts[i].rhs, t);
		}
		/* rows of whole cache lines: every vector store of a row then
		 * covers whole lines or is aligned to its size, so no line is
		 * part streamed, part stored plainly (softmax's rows of 1000
		 * floats with 16-lane vectors: the 8-lane rest of each row
		 * streamed half a line the next row's plain store filled, 1.45x
		 * the time of not streaming on a Zen 5) */
		ok &= f->tensors[t].ndim > 0 && (tc_dtype_size(f->tensors[t].dtype) *
			g->ext[(size_t)t * TC_MAX_RANK + f->tensors[t].ndim - 1]) % 64 == 0;
		if (bytes >= STREAM_MIN_BYTES && writers == 1 && ok &&
			f->tensors[t].dtype != TC_T_BOOL && !tc_dtype_is_half(f->tensors[t].dtype)) {
			g->streamed[t] = 1;
			n++;
		}
	}
	return n;
}

/* The loop nest twice, behind a test that the streamed outputs are 64-byte
 * aligned (see above), or once when nothing streams. */
static void kernel_body(cg *g, isl_ast_node *ast)
{
	const tc_ir_func *f = g->p->f;
	LLVMValueRef aligned = NULL, *plain;
	LLVMBasicBlockRef bs, bp;
	LLVMMetadataRef *ops;
	int t, n = choose_streamed(g);
	if (!n) {
		node(g, ast);
		return;
	}
	plain = tc_calloc((size_t)f->ntensors, sizeof(*plain));
	ops = tc_calloc((size_t)n, sizeof(*ops));
	if (!plain || !ops) {
		tc_free(plain);
		tc_free(ops);
		tc_cg_llvm_fail(g, "out of memory", NULL);
		return;
	}
	for (t = n = 0; t < f->ntensors; t++)
		if (g->streamed[t]) {
			LLVMValueRef low = LLVMBuildAnd(g->B, LLVMBuildPtrToInt(g->B, g->base[t], g->i64, ""),
				tc_cg_llvm_i64c(g, 63), "");
			LLVMValueRef ok = LLVMBuildICmp(g->B, LLVMIntEQ, low, tc_cg_llvm_i64c(g, 0), "");
			aligned = aligned ? LLVMBuildAnd(g->B, aligned, ok, "") : ok;
			ops[n++] = LLVMValueAsMetadata(g->scope[t]);
		}
	LLVMAddNamedMetadataOperand(g->M, "tc.stream",
		LLVMMetadataAsValue(g->C, LLVMMDNodeInContext2(g->C, ops, (size_t)n)));
	tc_free(ops);
	bs = tc_cg_llvm_new_block(g, "stream");
	bp = tc_cg_llvm_new_block(g, "plain");
	LLVMBuildCondBr(g->B, aligned, bs, bp);
	LLVMPositionBuilderAtEnd(g->B, bs);
	memcpy(plain, g->base, (size_t)f->ntensors * sizeof(*plain));
	for (t = 0; t < f->ntensors; t++)
		if (g->streamed[t]) {
			/* the pointer again, known aligned here: a volatile
			 * load, which GVN does not merge with the plain copy's
			 * load of the same slot (it did, and dropped !align:
			 * layer norm's backward with its column sums fused
			 * into the row loop lost every streaming store) */
			g->base[t] = array_slot(g, g->B, g->tensors, t, f->tensors[t].name);
			LLVMSetVolatile(g->base[t], 1);
			align_64(g, g->base[t]);
		}
	g->stream = 1;
	node(g, ast);
	g->stream = 0;
	if (!g->failed) {
		sfence(g);
		LLVMBuildRetVoid(g->B);
	}
	memcpy(g->base, plain, (size_t)f->ntensors * sizeof(*plain));
	tc_free(plain);
	LLVMPositionBuilderAtEnd(g->B, bp);
	node(g, ast);
}

/* The bytes of vector type ty (0 for an element type of no fixed size). */
static unsigned vector_bytes(LLVMTypeRef ty)
{
	LLVMTypeRef e = LLVMGetElementType(ty);
	unsigned bits;
	switch (LLVMGetTypeKind(e)) {
	case LLVMHalfTypeKind:
	case LLVMBFloatTypeKind:
		bits = 16;
		break;
	case LLVMFloatTypeKind:
		bits = 32;
		break;
	case LLVMDoubleTypeKind:
		bits = 64;
		break;
	case LLVMIntegerTypeKind:
		bits = LLVMGetIntTypeWidth(e);
		break;
	default:
		return 0;
	}
	return LLVMGetVectorSize(ty) * bits / 8;
}

/* Whether a vector store of bytes bytes at an address aligned to align
 * writes whole cache lines or an aligned part of one: 16 to 64 bytes
 * aligned to their size, or whole 64-byte lines aligned to 64 (the
 * interleaved <32 x float> stores of a row of pairs, as max-pool's data
 * gradient writes them). */
static int whole_lines(unsigned bytes, unsigned align)
{
	return bytes >= 16 && (bytes <= 64 ? align >= bytes : bytes % 64 == 0 && align >= 64);
}

/* After optimisation: the non-temporal flag on the aligned vector stores
 * of streamed outputs (see above). */
void tc_cg_llvm_mark_streaming_stores(__tc_keep LLVMModuleRef M)
{
	LLVMContextRef C = LLVMGetModuleContext(M);
	unsigned n = LLVMGetNamedMetadataNumOperands(M, "tc.stream"), k, i;
	unsigned scope_kind = LLVMGetMDKindIDInContext(C, "alias.scope", 11);
	unsigned nt_kind = LLVMGetMDKindIDInContext(C, "nontemporal", 11);
	LLVMValueRef lists[1], one, fn, in, nt;
	LLVMBasicBlockRef bb;
	LLVMMetadataRef onem;
	if (n != 1)
		return;
	LLVMGetNamedMetadataOperands(M, "tc.stream", lists);
	one = LLVMConstInt(LLVMInt32TypeInContext(C), 1, 0);
	onem = LLVMValueAsMetadata(one);
	nt = LLVMMetadataAsValue(C, LLVMMDNodeInContext2(C, &onem, 1));
	for (fn = LLVMGetFirstFunction(M); fn; fn = LLVMGetNextFunction(fn))
		for (bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb))
			for (in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) {
				LLVMValueRef scope;
				LLVMTypeRef ty;
				if (LLVMGetInstructionOpcode(in) != LLVMStore)
					continue;
				ty = LLVMTypeOf(LLVMGetOperand(in, 0));
				if (LLVMGetTypeKind(ty) != LLVMVectorTypeKind ||
					!whole_lines(vector_bytes(ty), LLVMGetAlignment(in)) ||
					!(scope = LLVMGetMetadata(in, scope_kind)))
					continue;
				k = LLVMGetMDNodeNumOperands(lists[0]);
				{
					LLVMValueRef ops[64];
					if (k > 64)
						continue;
					LLVMGetMDNodeOperands(lists[0], ops);
					for (i = 0; i < k; i++)
						if (ops[i] == scope)
							LLVMSetMetadata(in, nt_kind, nt);
				}
			}
}

/* In the entry block (g->A): the data pointer of every tensor, the error
 * record and the free sizes' values, from the tensor array argument arg. */
static void load_pointers(cg *g, LLVMValueRef arg)
{
	const tc_ir_func *f = g->p->f;
	int t;
	for (t = 0; t < f->ntensors; t++) {
		g->base[t] = tc_cg_llvm_row_dims(g, t)
			? tc_cg_llvm_row_buffer(g, t, tc_cg_llvm_row_dims(g, t))
			: array_slot(g, g->A, arg, t, f->tensors[t].name);
		if (g->stream && g->streamed[t])
			align_64(g, g->base[t]);
	}
	g->err = array_slot(g, g->A, arg, f->ntensors, "err"); /* after the tensors */
	g->tensors = arg;
	if (g->p->free) { /* the free sizes: int64_t sizes[nparams], after parallel_for */
		LLVMValueRef sizes = array_slot(g, g->A, arg, f->ntensors + 2, "sizes");
		for (t = 0; t < f->nparams; t++) {
			LLVMValueRef ix = tc_cg_llvm_i64c(g, t);
			g->size[t] = !g->p->free[t] ? NULL
				: LLVMBuildLoad2(g->A, g->i64,
					  LLVMBuildInBoundsGEP2(g->A, g->i64, sizes, &ix, 1, ""),
					  f->params[t].name);
		}
	}
}

/* A loop under a TC_POLY_MARK_PARALLEL mark: its body becomes a function
 *     void body(void *const *tensors, int64_t begin, int64_t end, int64_t lo, int64_t step)
 * running iterations begin..end-1 (iterator lo + k * step), and the loop
 * becomes a call of the runtime's parallel_for (a pointer in the tensor array
 * after the error record):
 *     parallel_for(body, tensors, count, lo, step)
 * which runs the iterations on its threads.  Only loops with no enclosing
 * loop are outlined (nothing else to capture); others run sequentially. */
static int parallel_loop(cg *g, isl_ast_node *n)
{
	isl_ast_expr *cond = NULL, *inc = NULL, *init = NULL, *it = NULL, *bound = NULL;
	isl_ast_node *body = NULL;
	isl_id *id = NULL;
	isl_val *stepv = NULL;
	LLVMValueRef lo, ub, count, pf, args[5], fn, saved_fn, saved_tensors, saved_err;
	LLVMValueRef *saved_base = NULL, slot, k, v, latch;
	LLVMBuilderRef saved_A, saved_B;
	LLVMBasicBlockRef entry, code, bcond, bbody, bexit;
	LLVMTypeRef params[5], bty, pty;
	enum isl_ast_expr_op_type op;
	int64_t step;
	char name[64];
	int ok = 0;

	if (g->niters || isl_ast_node_get_type(n) != isl_ast_node_for ||
		isl_ast_node_for_is_degenerate(n) != isl_bool_false)
		return 0;
	cond = isl_ast_node_for_get_cond(n);
	inc = isl_ast_node_for_get_inc(n);
	init = isl_ast_node_for_get_init(n);
	it = isl_ast_node_for_get_iterator(n);
	body = isl_ast_node_for_get_body(n);
	id = it ? isl_ast_expr_get_id(it) : NULL;
	if (!cond || !inc || !init || !id || !body ||
		isl_ast_expr_get_type(cond) != isl_ast_expr_op ||
		isl_ast_expr_get_type(inc) != isl_ast_expr_int)
		goto done;
	op = isl_ast_expr_op_get_type(cond);
	if (op != isl_ast_expr_op_le && op != isl_ast_expr_op_lt)
		goto done;
	{ /* the condition must be "iterator < bound" or "iterator <= bound" */
		isl_ast_expr *lhs = isl_ast_expr_op_get_arg(cond, 0);
		isl_id *lid = lhs && isl_ast_expr_get_type(lhs) == isl_ast_expr_id
			? isl_ast_expr_get_id(lhs) : NULL;
		int same = lid == id;
		isl_id_free(lid);
		isl_ast_expr_free(lhs);
		if (!same)
			goto done;
	}
	stepv = isl_ast_expr_get_val(inc);
	if (!stepv || !isl_val_is_int(stepv) || isl_val_cmp_si(stepv, 1) < 0)
		goto done;
	step = isl_val_get_num_si(stepv);
	bound = isl_ast_expr_op_get_arg(cond, 1);
	/* in the caller: lo, the last value ub, and the number of iterations */
	lo = tc_cg_llvm_as_i64(g, tc_cg_llvm_ast_expr(g, init));
	ub = tc_cg_llvm_as_i64(g, tc_cg_llvm_ast_expr(g, bound));
	if (!lo || !ub)
		goto done;
	if (op == isl_ast_expr_op_lt)
		ub = LLVMBuildSub(g->B, ub, tc_cg_llvm_i64c(g, 1), "");
	count = LLVMBuildAdd(g->B, LLVMBuildSDiv(g->B, LLVMBuildSub(g->B, ub, lo, ""),
		tc_cg_llvm_i64c(g, step), ""), tc_cg_llvm_i64c(g, 1), "");
	count = LLVMBuildSelect(g->B, LLVMBuildICmp(g->B, LLVMIntSLT, ub, lo, ""),
		tc_cg_llvm_i64c(g, 0), count, "");

	/* the body function */
	params[0] = g->ptr;
	params[1] = params[2] = params[3] = params[4] = g->i64;
	bty = LLVMFunctionType(g->vd, params, 5, 0);
	snprintf(name, sizeof(name), "%s.par%d", LLVMGetValueName(g->fn), g->nparallel++);
	fn = LLVMAddFunction(g->M, name, bty);
	LLVMSetLinkage(fn, LLVMInternalLinkage);
	add_string_attr(g, fn, "target-cpu", g->h->cpu);
	add_string_attr(g, fn, "target-features", g->h->features);
	tc_cg_llvm_add_fn_attr(g, fn, "nounwind", 0);
	if (g->opts.vector == 1)
		tc_cg_llvm_add_fn_attr(g, fn, "noimplicitfloat", 0);
	/* the caller's tensor pointers, then its free sizes' values */
	saved_base = tc_malloc((size_t)(g->p->f->ntensors + g->p->f->nparams + 1) *
		sizeof(LLVMValueRef));
	if (!saved_base) {
		tc_cg_llvm_fail(g, "out of memory", NULL);
		goto done;
	}
	memcpy(saved_base, g->base, (size_t)g->p->f->ntensors * sizeof(LLVMValueRef));
	memcpy(saved_base + g->p->f->ntensors, g->size,
		(size_t)g->p->f->nparams * sizeof(LLVMValueRef));
	saved_fn = g->fn;
	saved_A = g->A;
	saved_B = g->B;
	saved_err = g->err;
	saved_tensors = g->tensors;
	g->fn = fn;
	g->A = LLVMCreateBuilderInContext(g->C);
	g->B = LLVMCreateBuilderInContext(g->C);
	entry = LLVMAppendBasicBlockInContext(g->C, fn, "entry");
	code = LLVMAppendBasicBlockInContext(g->C, fn, "code");
	LLVMPositionBuilderAtEnd(g->A, entry);
	load_pointers(g, LLVMGetParam(fn, 0));
	LLVMPositionBuilderAtEnd(g->B, code);
	/* for (k = begin; k < end; k++) { iterator = lo + k * step; body } */
	slot = LLVMBuildAlloca(g->A, g->i64, "k");
	LLVMBuildStore(g->B, LLVMGetParam(fn, 1), slot);
	room_for_iter(g);
	bcond = tc_cg_llvm_new_block(g, "par.cond");
	bbody = tc_cg_llvm_new_block(g, "par.body");
	bexit = tc_cg_llvm_new_block(g, "par.end");
	LLVMBuildBr(g->B, bcond);
	LLVMPositionBuilderAtEnd(g->B, bcond);
	k = LLVMBuildLoad2(g->B, g->i64, slot, "");
	LLVMBuildCondBr(g->B, LLVMBuildICmp(g->B, LLVMIntSLT, k, LLVMGetParam(fn, 2), ""), bbody,
		bexit);
	LLVMPositionBuilderAtEnd(g->B, bbody);
	if (!g->failed) {
		LLVMValueRef itslot = iter_slot(g, isl_id_get_name(id));
		v = LLVMBuildNSWAdd(g->B, LLVMGetParam(fn, 3),
			LLVMBuildNSWMul(g->B, k, LLVMGetParam(fn, 4), ""), "");
		LLVMBuildStore(g->B, v, itslot);
		bind_iter(g, id, itslot, 0, 0);
		g->loop_follows = 0; /* the outlined body starts a nest of its own */
		node(g, body);
		g->niters--;
		LLVMBuildStore(g->B, LLVMBuildNSWAdd(g->B, k, tc_cg_llvm_i64c(g, 1), ""), slot);
		latch = LLVMBuildBr(g->B, bcond); /* a chunk: no trip count known */
		if (is_innermost(body))
			loop_hints(g, latch, body, id, 0, 0);
	}
	LLVMPositionBuilderAtEnd(g->B, bexit);
	if (g->stream)
		sfence(g);
	LLVMBuildRetVoid(g->B);
	LLVMBuildBr(g->A, code);
	LLVMDisposeBuilder(g->A);
	LLVMDisposeBuilder(g->B);
	g->fn = saved_fn;
	g->A = saved_A;
	g->B = saved_B;
	g->err = saved_err;
	g->tensors = saved_tensors;
	memcpy(g->base, saved_base, (size_t)g->p->f->ntensors * sizeof(LLVMValueRef));
	memcpy(g->size, saved_base + g->p->f->ntensors,
		(size_t)g->p->f->nparams * sizeof(LLVMValueRef));

	/* the call: parallel_for(body, tensors, count, lo, step) */
	{
		LLVMTypeRef pp[5] = {g->ptr, g->ptr, g->i64, g->i64, g->i64};
		pf = array_slot(g, g->B, g->tensors, g->p->f->ntensors + 1, "parallel_for");
		pty = LLVMFunctionType(g->vd, pp, 5, 0);
		args[0] = fn;
		args[1] = g->tensors;
		args[2] = count;
		args[3] = lo;
		args[4] = tc_cg_llvm_i64c(g, step);
		LLVMBuildCall2(g->B, pty, pf, args, 5, "");
	}
	ok = !g->failed;
done:
	tc_free(saved_base);
	isl_val_free(stepv);
	isl_ast_expr_free(bound);
	isl_id_free(id);
	isl_ast_expr_free(it);
	isl_ast_expr_free(init);
	isl_ast_expr_free(inc);
	isl_ast_expr_free(cond);
	isl_ast_node_free(body);
	return ok;
}

/* Whether for node n walks the first schedule dimension (isl's default
 * iterator name c0): under a parallel mark with no enclosing loop, the
 * marked (coincident) band member. */
static int walks_first_dimension(isl_ast_node *n)
{
	isl_ast_expr *it = isl_ast_node_get_type(n) == isl_ast_node_for
		? isl_ast_node_for_get_iterator(n) : NULL;
	isl_id *id = it ? isl_ast_expr_get_id(it) : NULL;
	int first = id && !strcmp(isl_id_get_name(id), "c0");
	isl_id_free(id);
	isl_ast_expr_free(it);
	return first;
}

/* The children of block node n, in order.  Under a TC_POLY_MARK_PARALLEL
 * mark (par), the block is the marked member's loop split into pieces (the
 * register tile's full tiles isolated from the rest: 784 rows as 130 tiles
 * of 6 and a tile of 4): each piece that is a loop over the marked member
 * runs on the pool (parallel_loop), the rest (the partial tile, at one
 * value of the member) here.  Before, the whole block ran on the calling
 * thread: the weight gradient of a small network's backward pass (784 x
 * 128 over a batch of 128) took as long on two threads as on one. */
/* Bind id to value v (a slot of its own) in g->iters; 0 on failure. */
static int bind_value(cg *g, isl_id *id, LLVMValueRef v)
{
	LLVMValueRef slot;
	if (!v || !room_for_iter(g))
		return 0;
	slot = iter_slot(g, isl_id_get_name(id));
	LLVMBuildStore(g->B, v, slot);
	bind_iter(g, id, slot, 0, 0);
	return 1;
}

/* A user node that stands for a register tile's point loops (inst->points,
 * polyhedral/ast.c): the tile's origin (the node's index expressions)
 * bound to the ids the point loops read, then the piece of the tile's
 * kind: which dimensions are short of the tile (end - origin < size) picks
 * it, piece[0] (every dimension whole: constant bounds, the vectorised and
 * unrolled micro-kernel) or a partial one. */
static void points_pieces(cg *g, const tc_poly_inst *inst);

static void points_node(cg *g, const tc_poly_inst *inst)
{
	const tc_poly_inst *was = g->points;
	g->points = inst;
	points_pieces(g, inst);
	g->points = was;
}

static void points_pieces(cg *g, const tc_poly_inst *inst)
{
	const tc_poly_points *pt = inst->points;
	LLVMValueRef mask = NULL, shortv[CG_MAX_DIMS] = {NULL};
	int v, k, bound = 0, pieces = 0;
	for (k = 0; k < 1 << TC_POLY_MAX_PART; k++)
		pieces += pt->piece[k] != NULL;
	pieces += pt->partial != NULL;
	for (v = 0; v < pt->n && v < CG_MAX_DIMS && !g->failed; v++) {
		LLVMValueRef o = tc_cg_llvm_as_i64(g, tc_cg_llvm_ast_expr(g, inst->index[v])), end, e;
		if (!bind_value(g, pt->origin[v], o))
			break;
		bound++;
		if (!pt->extent[v] && (pt->may_partial[v] != 1 || pieces < 2))
			continue;
		end = tc_cg_llvm_as_i64(g, tc_cg_llvm_ast_expr(g, pt->end[v]));
		if (!(e = end ? LLVMBuildNSWSub(g->B, end, o, "") : NULL))
			break;
		if (pt->extent[v] && !bind_value(g, pt->extent[v], e))
			break;
		bound += pt->extent[v] != NULL;
		if (pt->may_partial[v] == 1 && pieces > 1)
			shortv[v] = LLVMBuildICmp(g->B, LLVMIntSLT, e,
				tc_cg_llvm_i64c(g, pt->size[v]), "");
	}
	if (pt->n > CG_MAX_DIMS)
		tc_cg_llvm_fail(g, "a register tile of too many dimensions", NULL);
	for (k = 0; k < pt->npart && !g->failed; k++) { /* the pieces' number */
		LLVMValueRef b = shortv[pt->part[k]] ? LLVMBuildZExt(g->B, shortv[pt->part[k]],
			g->i64, "") : tc_cg_llvm_i64c(g, 0);
		b = LLVMBuildShl(g->B, b, tc_cg_llvm_i64c(g, k), "");
		mask = mask ? LLVMBuildOr(g->B, mask, b, "") : b;
	}
	for (v = 0; !pt->npart && v < pt->n && !g->failed; v++) /* whole, or partial */
		if (shortv[v])
			mask = mask ? LLVMBuildOr(g->B, mask, shortv[v], "") : shortv[v];
	if (g->failed) {
	} else if (pieces == 1 || !mask) {
		for (k = 0; k < 1 << TC_POLY_MAX_PART && !pt->piece[k]; k++)
			;
		node(g, k < 1 << TC_POLY_MAX_PART ? pt->piece[k] : pt->partial);
	} else {
		LLVMBasicBlockRef bend = tc_cg_llvm_new_block(g, "tile.end");
		LLVMValueRef sw;
		if (!pt->npart)
			mask = LLVMBuildZExt(g->B, mask, g->i64, "");
		sw = LLVMBuildSwitch(g->B, mask, bend, (unsigned)pieces);
		for (k = 0; k <= 1 << TC_POLY_MAX_PART && !g->failed; k++) {
			isl_ast_node *a = k < 1 << TC_POLY_MAX_PART ? pt->piece[k] : pt->partial;
			LLVMBasicBlockRef bk;
			if (!a)
				continue;
			bk = tc_cg_llvm_new_block(g, "tile.piece");
			LLVMAddCase(sw, tc_cg_llvm_i64c(g, k < 1 << TC_POLY_MAX_PART ? k : 1), bk);
			LLVMPositionBuilderAtEnd(g->B, bk);
			node(g, a);
			if (!g->failed)
				LLVMBuildBr(g->B, bend);
		}
		LLVMPositionBuilderAtEnd(g->B, bend);
	}
	g->niters -= bound;
}

static const tc_poly_stmt *init_in_registers(cg *g, isl_ast_node *n, isl_ast_node_list *list,
	int at);

/* Whether the child at of list is a loop (under marks). */
static int next_is_loop(isl_ast_node_list *list, int at)
{
	isl_ast_node *c = isl_ast_node_list_get_at(list, at);
	int is_for;
	while (c && isl_ast_node_get_type(c) == isl_ast_node_mark) {
		isl_ast_node *d = isl_ast_node_mark_get_node(c);
		isl_ast_node_free(c);
		c = d;
	}
	is_for = c && isl_ast_node_get_type(c) == isl_ast_node_for;
	isl_ast_node_free(c);
	return is_for;
}

static void block_node(cg *g, isl_ast_node *n, int par)
{
	isl_ast_node_list *list = isl_ast_node_block_get_children(n);
	isl_size k = isl_ast_node_list_n_ast_node(list), i;
	const tc_poly_stmt *init = NULL;
	if (k < 0)
		tc_cg_llvm_fail(g, "malformed block node", NULL);
	for (i = 0; i < k && !g->failed; i++) {
		isl_ast_node *child = isl_ast_node_list_get_at(list, i);
		g->acc_init = init;
		init = NULL;
		if (!child)
			tc_cg_llvm_fail(g, "malformed block node", NULL);
		else if (i + 1 < k && (init = init_in_registers(g, child, list, i + 1)))
			; /* the next child, a vector tile, starts from the identity */
		else {
			g->loop_follows = i + 1 < k && next_is_loop(list, i + 1);
			if (!(par && walks_first_dimension(child) && parallel_loop(g, child)) &&
				!g->failed)
				node(g, child);
		}
		g->loop_follows = 0;
		g->acc_init = NULL;
		isl_ast_node_free(child);
	}
	isl_ast_node_list_free(list);
}

/* The register tile's point loops that AST node n stands for (n a user
 * node of such, or a tc_regtile mark above one), or NULL. */
static const tc_poly_inst *tile_points(isl_ast_node *n)
{
	const tc_poly_inst *inst = NULL;
	isl_ast_node *c = mark_child(n, TC_POLY_MARK_REGTILE);
	isl_ast_node *u = c ? c : n;
	if (u && isl_ast_node_get_type(u) == isl_ast_node_user)
		inst = tc_poly_node_inst(u);
	isl_ast_node_free(c);
	return inst && inst->points && inst->stmt ? inst : NULL;
}

/* The statement instance of the first user node below n through loops
 * and marks (not blocks), or NULL. */
static const tc_poly_inst *first_inst(isl_ast_node *n)
{
	const tc_poly_inst *inst = NULL;
	isl_ast_node *c = isl_ast_node_copy(n);
	while (c && !inst) {
		isl_ast_node *d = NULL;
		switch (isl_ast_node_get_type(c)) {
		case isl_ast_node_user:
			inst = tc_poly_node_inst(c);
			break;
		case isl_ast_node_for:
			d = isl_ast_node_for_get_body(c);
			break;
		case isl_ast_node_mark:
			d = isl_ast_node_mark_get_node(c);
			break;
		default:
			break;
		}
		isl_ast_node_free(c);
		c = d;
	}
	isl_ast_node_free(c);
	return inst;
}

/* Whether piece (of the reduction's point loops b) is one loop whose
 * vector code loads the sums once (vector_nest or vector_tile of that
 * loop itself), or a piece short of its rows run a few rows at a time
 * (a tc_rolled mark, polyhedral/ast.c) whose loop walks left-hand
 * dimensions only (each iteration its own rows: sums from the identity
 * at each) around such a loop. */
static int piece_loads_once(cg *g, const tc_poly_inst *b, isl_ast_node *piece)
{
	isl_ast_node *rolled = mark_child(piece, TC_POLY_MARK_ROLLED), *body = NULL, *rows = NULL;
	isl_ast_expr *it = NULL;
	isl_id *id = NULL;
	const tc_poly_inst *was = g->points, *in;
	int ok = 0, k;
	vtile t;
	if (rolled)
		piece = rolled;
	if (!piece || isl_ast_node_get_type(piece) != isl_ast_node_for ||
		isl_ast_node_for_is_degenerate(piece) != isl_bool_false)
		goto done;
	it = isl_ast_node_for_get_iterator(piece);
	id = it ? isl_ast_expr_get_id(it) : NULL;
	body = isl_ast_node_for_get_body(piece);
	if (!id || !body)
		goto done;
	g->points = b; /* as node() and points_node have it when the piece is emitted */
	g->ordered++;
	ok = !g->vnest && (vector_nest(g, body, id, &t, &rows) || vector_tile(g, body, id, &t));
	g->ordered--;
	g->points = was;
	if (ok)
		vtile_clear(&t);
	else if (rolled && (in = first_inst(body)) && in->stmt == b->stmt &&
		in->n == b->stmt->ndims) {
		int lhs = 0, red = 0;
		for (k = 0; k < in->n; k++)
			if (expr_uses(in->index[k], id)) {
				lhs += k < b->stmt->ir->nlhs;
				red += k >= b->stmt->ir->nlhs;
			}
		ok = lhs && !red && piece_loads_once(g, b, body);
	}
done:
	isl_ast_node_free(rolled);
	isl_ast_node_free(rows);
	isl_ast_node_free(body);
	isl_id_free(id);
	isl_ast_expr_free(it);
	return ok;
}

/* The init statement whose register tile, block child n, need not be
 * emitted because the next child (list's at-th) is the tile of its
 * reduction over the same elements and starts its sums from the
 * identity in registers (vtile_load, g->acc_init), or NULL.  So both
 * tiles must have the same origin, sizes and ends in the left-hand
 * dimensions and the same pieces (points_pieces picks a piece of each
 * from the same tests: the same elements), and each of the reduction's
 * pieces must be one loop whose vector code loads the sums once
 * (piece_loads_once).  Otherwise a masked accumulator's load waited for
 * the init's masked store, which LLVM does not forward (about a tenth of
 * a grouped convolution's time, docs/performance.md, "Masked rows on Zen
 * 5"); plain ones the O3 pipeline forwards, leaving the stores, and the
 * lighter pipeline of vector code (llvm_jit.c) does not: a weight
 * gradient 256 x 1024 x 1024, its tiles in a piece of 6 rows and one of
 * 4, stored its zeros and loaded them back (1.02x the time). */
static const tc_poly_stmt *init_in_registers(cg *g, isl_ast_node *n, isl_ast_node_list *list,
	int at)
{
	const tc_poly_inst *a = tile_points(n), *b;
	isl_ast_node *next;
	int k, ok, nlhs;
	if (!a || a->stmt->kind != TC_POLY_INIT)
		return NULL;
	next = isl_ast_node_list_get_at(list, at);
	b = next ? tile_points(next) : NULL;
	isl_ast_node_free(next);
	if (!b || b->stmt->kind != TC_POLY_UPDATE || b->stmt->ir != a->stmt->ir)
		return NULL;
	nlhs = a->stmt->ir->nlhs;
	ok = a->n == nlhs && b->n >= nlhs && a->points->n == nlhs && b->points->n >= nlhs &&
		a->points->npart == b->points->npart && !a->points->partial == !b->points->partial;
	for (k = 0; ok && k < a->points->npart; k++)
		ok = a->points->part[k] == b->points->part[k];
	for (k = 0; ok && k < nlhs; k++)
		ok = a->points->size[k] == b->points->size[k] &&
			a->points->may_partial[k] == b->points->may_partial[k] &&
			isl_ast_expr_is_equal(a->index[k], b->index[k]) == isl_bool_true &&
			!a->points->end[k] == !b->points->end[k] &&
			(!a->points->end[k] ||
				isl_ast_expr_is_equal(a->points->end[k], b->points->end[k]) == isl_bool_true);
	for (k = 0; ok && k < 1 << TC_POLY_MAX_PART; k++)
		ok = !a->points->piece[k] == !b->points->piece[k] &&
			(!b->points->piece[k] || piece_loads_once(g, b, b->points->piece[k]));
	if (ok && b->points->partial)
		ok = piece_loads_once(g, b, b->points->partial);
	return ok ? a->stmt : NULL;
}

static void node(cg *g, isl_ast_node *n)
{
	isl_ast_node *child;
	const tc_poly_inst *inst;
	int loop_body = g->loop_body;

	g->loop_body = 0;
	if (g->failed)
		return;
	switch (isl_ast_node_get_type(n)) {
	case isl_ast_node_for:
		for_node(g, n);
		break;
	case isl_ast_node_if:
		if_node(g, n);
		break;
	case isl_ast_node_block:
		block_node(g, n, 0);
		break;
	case isl_ast_node_mark: {
		isl_id *mark = isl_ast_node_mark_get_id(n);
		int par = mark && !strcmp(isl_id_get_name(mark), TC_POLY_MARK_PARALLEL);
		int tile = mark && !strcmp(isl_id_get_name(mark), TC_POLY_MARK_REGTILE);
		int was_unroll = g->unroll, rolled;
		/* the loops between the two marks are unrolled (a register
		 * tile's rows), those below the second are the copies' own */
		if (mark && !strcmp(isl_id_get_name(mark), TC_POLY_MARK_UNROLL) && !loop_body &&
			vector_once(g, n)) {
			isl_id_free(mark);
			break;
		}
		if (mark && !strcmp(isl_id_get_name(mark), TC_POLY_MARK_UNROLL))
			g->unroll = 1;
		else if (mark && !strcmp(isl_id_get_name(mark), TC_POLY_MARK_UNROLLED))
			g->unroll = 0;
		rolled = mark && !strcmp(isl_id_get_name(mark), TC_POLY_MARK_ROLLED);
		isl_id_free(mark);
		child = isl_ast_node_mark_get_node(n);
		g->ordered += tile;
		g->rolled += rolled;
		g->rolled_seen |= rolled;
		if (!child)
			tc_cg_llvm_fail(g, "malformed mark node", NULL);
		else if (par && isl_ast_node_get_type(child) == isl_ast_node_block)
			block_node(g, child, 1);
		else if (!(par && parallel_loop(g, child)) && !g->failed)
			node(g, child); /* g->loop_follows passes through the mark */
		g->ordered -= tile;
		g->rolled -= rolled;
		g->unroll = was_unroll;
		isl_ast_node_free(child);
		break;
	}
	case isl_ast_node_user:
		inst = tc_poly_node_inst(n);
		if (inst && inst->points)
			points_node(g, inst);
		else if (inst) {
			g->nscalar += g->niters > 0;
			tc_cg_llvm_statement(g, inst);
		}
		else
			tc_cg_llvm_fail(g, "a statement without its annotation", NULL);
		break;
	default:
		tc_cg_llvm_fail(g, "malformed AST node", NULL);
		break;
	}
}

/* ---- modules ---- */

static void cg_clear(cg *g)
{
	if (g->B)
		LLVMDisposeBuilder(g->B);
	if (g->A)
		LLVMDisposeBuilder(g->A);
	tc_free(g->base);
	tc_free(g->scope);
	tc_free(g->noalias);
	tc_free(g->ext);
	tc_free(g->size);
	tc_free(g->streamed);
	tc_free(g->iters);
	tc_free(g->sites);
}

/* LLVM's diagnostics about a module: remarks, notes and warnings are
 * dropped (a loop whose llvm.loop hints the vectoriser cannot follow makes
 * it remark and warn, which LLVM would print on stderr for every kernel
 * compiled); an error is printed as LLVM prints it, but without LLVM's
 * exit, which a library must not call. */
static void diag_handler(LLVMDiagnosticInfoRef di, void *unused)
{
	char *msg;
	(void)unused;
	if (LLVMGetDiagInfoSeverity(di) != LLVMDSError)
		return;
	msg = LLVMGetDiagInfoDescription(di);
	fprintf(stderr, "tcomp: LLVM error: %s\n", msg ? msg : "?");
	LLVMDisposeMessage(msg);
}

/* Build the module of p in C with one function fname for the host h and
 * the data layout of tm, and the sites of its run-time checks (when sites
 * is not NULL; the caller frees them).  NULL with a message in d on
 * failure; the caller owns the module (it lives in C). */
__tc_give LLVMModuleRef tc_cg_llvm_build_module(__tc_keep LLVMContextRef C,
	__tc_keep const tc_poly *p, __tc_keep const tc_cg_opts *o, const char *fname,
	__tc_keep const cg_host *h,
	__tc_keep LLVMTargetMachineRef tm, __tc_keep tc_diags *d, __tc_give tc_cg_site **sites,
	int *nsites)
{
	cg g;
	LLVMTypeRef fty;
	LLVMTargetDataRef td;
	LLVMBasicBlockRef entry, code;
	LLVMValueRef arg;
	char *layout, *msg = NULL;
	const tc_ir_func *f = p->f;
	int t;
	unsigned kind;

	memset(&g, 0, sizeof(g));
	g.p = p;
	if (o)
		g.opts = *o;
	g.d = d;
	g.C = C;
	if (!p->ast || !p->params) {
		tc_error(d, noloc, "%s",
			"LLVM code generation needs a model built with concrete sizes and its AST");
		return NULL;
	}
	LLVMContextSetDiagnosticHandler(C, diag_handler, NULL);
	g.M = LLVMModuleCreateWithNameInContext(fname, C);
	LLVMSetTarget(g.M, h->triple);
	td = LLVMCreateTargetDataLayout(tm);
	layout = LLVMCopyStringRepOfTargetData(td);
	LLVMSetDataLayout(g.M, layout);
	LLVMDisposeMessage(layout);
	LLVMDisposeTargetData(td);

	g.i1 = LLVMInt1TypeInContext(C);
	g.i8 = LLVMInt8TypeInContext(C);
	g.i16 = LLVMInt16TypeInContext(C);
	g.i32 = LLVMInt32TypeInContext(C);
	g.i64 = LLVMInt64TypeInContext(C);
	g.f16 = LLVMHalfTypeInContext(C);
	g.f32 = LLVMFloatTypeInContext(C);
	g.f64 = LLVMDoubleTypeInContext(C);
	g.ptr = LLVMPointerTypeInContext(C, 0);
	g.vd = LLVMVoidTypeInContext(C);

	fty = LLVMFunctionType(g.vd, &g.ptr, 1, 0);
	g.fn = LLVMAddFunction(g.M, fname, fty);
	add_string_attr(&g, g.fn, "target-cpu", h->cpu);
	add_string_attr(&g, g.fn, "target-features", h->features);
	tc_cg_llvm_add_fn_attr(&g, g.fn, "nounwind", 0);
	if (g.opts.vector == 1)
		tc_cg_llvm_add_fn_attr(&g, g.fn, "noimplicitfloat", 0);
	arg = LLVMGetParam(g.fn, 0);
	LLVMSetValueName2(arg, "tensors", 7);
	/* the pointer array is only read, and nothing else reaches it */
	kind = LLVMGetEnumAttributeKindForName("readonly", 8);
	LLVMAddAttributeAtIndex(g.fn, 1, LLVMCreateEnumAttribute(C, kind, 0));
	kind = LLVMGetEnumAttributeKindForName("noalias", 7);
	LLVMAddAttributeAtIndex(g.fn, 1, LLVMCreateEnumAttribute(C, kind, 0));
	kind = LLVMGetEnumAttributeKindForName("nocapture", 9);
	LLVMAddAttributeAtIndex(g.fn, 1, LLVMCreateEnumAttribute(C, kind, 0));

	g.base = tc_calloc((size_t)f->ntensors + 1, sizeof(LLVMValueRef));
	g.scope = tc_calloc((size_t)f->ntensors + 1, sizeof(LLVMValueRef));
	g.noalias = tc_calloc((size_t)f->ntensors + 1, sizeof(LLVMValueRef));
	g.ext = tc_calloc((size_t)f->ntensors * TC_MAX_RANK + 1, sizeof(int64_t));
	g.streamed = tc_calloc((size_t)f->ntensors + 1, 1);
	g.size = tc_calloc((size_t)f->nparams + 1, sizeof(LLVMValueRef));
	if (!g.base || !g.ext || !g.scope || !g.noalias || !g.streamed || !g.size) {
		tc_cg_llvm_fail(&g, "out of memory", NULL);
		goto error;
	}
	g.A = LLVMCreateBuilderInContext(C);
	g.B = LLVMCreateBuilderInContext(C);
	entry = LLVMAppendBasicBlockInContext(C, g.fn, "entry");
	code = LLVMAppendBasicBlockInContext(C, g.fn, "code");
	LLVMPositionBuilderAtEnd(g.A, entry);
	for (t = 0; t < f->ntensors; t++)
		if (f->tensors[t].ndim > TC_MAX_RANK ||
			tc_ir_shape(f, t, p->params, g.ext + (size_t)t * TC_MAX_RANK, d) < 0) {
			tc_cg_llvm_fail(&g, "cannot compute the shape of ", f->tensors[t].name);
			goto error;
		}
	g.h = h;
	g.md_loop = LLVMGetMDKindIDInContext(C, "llvm.loop", 9);
	tc_cg_llvm_alias_scopes(&g);
	load_pointers(&g, arg);
	LLVMPositionBuilderAtEnd(g.B, code);
	kernel_body(&g, p->ast);
	if (g.failed)
		goto error;
	if (g.nvector && !g.nscalar) /* every statement in a loop is vector code */
		LLVMAddNamedMetadataOperand(g.M, TC_CG_VECTOR_CODE,
			LLVMMetadataAsValue(C, LLVMMDNodeInContext2(C, NULL, 0)));
	LLVMBuildRetVoid(g.B);
	LLVMBuildBr(g.A, code);
	if (LLVMVerifyModule(g.M, LLVMReturnStatusAction, &msg)) {
		tc_error(d, noloc, "LLVM code generation: internal error, invalid module: %s",
			msg ? msg : "?");
		LLVMDisposeMessage(msg);
		goto error;
	}
	LLVMDisposeMessage(msg);
	if (sites) {
		*sites = g.sites;
		*nsites = g.nsites;
		g.sites = NULL;
	}
	cg_clear(&g);
	return g.M;
error:
	cg_clear(&g);
	LLVMDisposeModule(g.M);
	return NULL;
}
