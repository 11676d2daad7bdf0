/* Float32 accumulators for 16-bit float reductions.
 *
 * A sum or product over reduction indices into a float16 or bfloat16
 * tensor accumulates in float32 and is rounded once to the tensor's type
 * when the reduction finishes (docs/language.md, 6.8): rounding every
 * partial sum to 11 (or 8) significant bits loses most of a long sum.
 * Lowering makes that accumulator explicit, as it makes every conversion an
 * explicit cast, so the interpreter, the LLVM back end and the C printer
 * all run the same float32 reduction:
 *     O(i) +=! A(i,r_j)              O(i) += A(i,r_j)
 * become
 *     O_acc(i) +=! float32(A(i,r_j))  O_acc(i) = float32(O(i))
 *     O(i) = float16(O_acc(i))        O_acc(i) += float32(A(i,r_j))
 *                                     O(i) = float16(O_acc(i))
 * with O_acc a float32 temporary of O's shape.  The right-hand side keeps
 * its type (its operations round to float16 as everywhere); its value is
 * widened exactly.
 *
 * Not rewritten, because the element type gives the same bits anyway:
 * min= and max= (exact in any type), and statements without reduction
 * indices (one float32 operation on two 16-bit values, rounded once, is
 * the correctly rounded 16-bit operation: float32's 24 bits are more than
 * 2 * 11 + 2).  Not rewritten either: a statement whose right-hand side
 * reads the tensor it reduces into (sema warns that its result depends on
 * the order of the reduction); it accumulates in the element type, reading
 * the partial results, as before. */
#include "ir.h"

#include <string.h>

/* Whether statement s of f reduces into a 16-bit float in float32. */
static int widened(const tc_ir_func *f, const tc_ir_stmt *s)
{
	return tc_dtype_is_half(f->tensors[s->tensor].dtype) && !s->sub &&
		(s->red == TC_RED_ADD || s->red == TC_RED_MUL) && s->nvars > s->nlhs &&
		!tc_ir_reads(s->rhs, s->tensor);
}

/* A read of tensor t (element type type) at the left-hand indices of s. */
static tc_ir_expr *read_lhs(tc_arena *ar, const tc_ir_stmt *s, int t, tc_dtype type)
{
	tc_ir_expr *r = tc_ir_new_expr(ar, TC_OP_READ, type, s->loc, s->nlhs);
	int k;
	if (!r)
		return NULL;
	r->id = t;
	for (k = 0; k < s->nlhs; k++) {
		if (!(r->args[k] = tc_ir_new_expr(ar, TC_OP_INDEX, TC_T_I32, s->loc, 0)))
			return NULL;
		r->args[k]->id = k;
	}
	return r;
}

/* e converted to type t. */
static tc_ir_expr *cast(tc_arena *ar, tc_ir_expr *e, tc_dtype t)
{
	tc_ir_expr *c;
	if (!e || !(c = tc_ir_new_expr(ar, TC_OP_CAST, t, e->loc, 1)))
		return NULL;
	c->args[0] = e;
	return c;
}

/* A pointwise statement over the left-hand indices of s:
 * tensor(lhs) = rhs. */
static void pointwise(const tc_ir_stmt *s, int tensor, tc_ir_expr *rhs, tc_ir_stmt *out)
{
	memset(out, 0, sizeof(*out));
	out->tensor = tensor;
	out->nlhs = out->nvars = s->nlhs;
	out->vars = s->vars; /* the left-hand ones come first */
	out->red = TC_RED_ASSIGN;
	out->rhs = rhs;
	out->loc = s->loc;
}

/* Rewrite every widened statement of f into its float32 reduction and the
 * statements around it (see the top of the file), in place: new tensor and
 * statement arrays in ar, one float32 temporary per widened statement.
 * Returns f (unchanged when nothing is widened), NULL when out of memory. */
tc_ir_func *tc_ir_widen(__tc_keep tc_arena *ar, __tc_keep tc_ir_func *f)
{
	tc_ir_tensor *tensors;
	tc_ir_stmt *stmts;
	int i, n = 0, nt, ns;

	if (!f)
		return NULL;
	for (i = 0; i < f->nstmts; i++)
		n += widened(f, &f->stmts[i]);
	if (!n)
		return f;
	tensors = tc_arena_alloc(ar, (size_t)(f->ntensors + n + 1) * sizeof(*tensors));
	stmts = tc_arena_alloc(ar, (size_t)(f->nstmts + 2 * n + 1) * sizeof(*stmts));
	if (!tensors || !stmts)
		return NULL;
	memcpy(tensors, f->tensors, (size_t)f->ntensors * sizeof(*tensors));
	nt = f->ntensors;
	ns = 0;
	for (i = 0; i < f->nstmts; i++) {
		const tc_ir_stmt *s = &f->stmts[i];
		const tc_ir_tensor *o = &f->tensors[s->tensor];
		tc_ir_func view = *f;
		tc_ir_expr *rd;
		if (!widened(f, s)) {
			stmts[ns++] = *s;
			continue;
		}
		view.tensors = tensors;
		view.ntensors = nt;
		tensors[nt] = *o;
		tensors[nt].kind = TC_TENSOR_TEMP;
		tensors[nt].dtype = TC_T_F32;
		tensors[nt].rowbuf = 0;
		tensors[nt].widened = 1;
		if (!(tensors[nt].name = tc_ir_fresh_name(ar, &view, o->name, "_acc")))
			return NULL;
		if (!s->init) { /* start from the element's value (exact in float32) */
			if (!(rd = cast(ar, read_lhs(ar, s, s->tensor, o->dtype), TC_T_F32)))
				return NULL;
			pointwise(s, nt, rd, &stmts[ns++]);
		}
		stmts[ns] = *s;
		stmts[ns].tensor = nt;
		if (!(stmts[ns++].rhs = cast(ar, s->rhs, TC_T_F32)))
			return NULL;
		if (!(rd = cast(ar, read_lhs(ar, s, nt, TC_T_F32), o->dtype)))
			return NULL;
		pointwise(s, s->tensor, rd, &stmts[ns++]);
		nt++;
	}
	f->tensors = tensors;
	f->ntensors = nt;
	f->stmts = stmts;
	f->nstmts = ns;
	return f;
}
