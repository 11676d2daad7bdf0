/* Inlining cheap temporaries: a temporary defined by one pointwise
 * statement of a few operations is computed again where it is read instead
 * of going through memory.
 *
 * Layer normalisation centres its input in a temporary,
 *     xc(n,d) = X(n,d) - mean(n)
 *     var(n) +=! xc(n,r_d) * xc(n,r_d)
 *     Y(n,d) = xc(n,d) * rsqrt(var(n) + eps) * G(d) + Bt(d)
 * an N x D array written once and read twice: at 4096 x 1024 that is 16 MiB
 * written and 32 MiB read, as much traffic as the input and the output
 * together, to save one subtraction per read.  Inlining gives
 *     var(n) +=! (X(n,r_d) - mean(n)) * (X(n,r_d) - mean(n))
 *     Y(n,d) = (X(n,d) - mean(n)) * rsqrt(var(n) + eps) * G(d) + Bt(d)
 * and the temporary disappears.  The value read is the value that was
 * stored: the same operations on the same operands, rounded to the
 * temporary's type by an explicit cast, so results stay bit for bit.
 *
 * A temporary T is inlined when
 * - one statement S writes it, a plain assignment (no reduction index, not
 *   a packing copy) over T's whole extent (so every element a reader may
 *   read is one S defined, and S's own reads are in bounds there), whose
 *   right-hand side has at most MAX_OPS operations, no builtin calls (exp
 *   and the like cost more than a load) and does not read T;
 * - every read of T subscripts it with distinct plain index variables, and
 *   every index variable of the reading statement is among them (each
 *   instance of the reader reads its own element, so nothing is computed
 *   more often than it was read: C(i,k) +=! T(i,r_j) * B(r_j,k) would
 *   recompute T K times over, and is left alone);
 * - no statement before S reads T, and no statement after S, up to the
 *   last reader, writes a tensor that S reads (the operands are unchanged
 *   when the value is recomputed). */
#include "ir.h"

#include <string.h>

#define MAX_OPS 4

/* Operations in e; -1 when it calls a builtin or reads tensor t. */
static int ops(const tc_ir_expr *e, int t)
{
	int k, n, sub;
	switch (e->op) {
	case TC_OP_CALL:
		return -1;
	case TC_OP_READ:
		if (e->id == t)
			return -1;
		n = 0;
		break;
	case TC_OP_CONST:
	case TC_OP_INDEX:
	case TC_OP_SIZE:
	case TC_OP_CAST:
		n = 0;
		break;
	default:
		n = 1;
		break;
	}
	for (k = 0; k < e->nargs; k++) {
		if ((sub = ops(e->args[k], t)) < 0)
			return -1;
		n += sub;
	}
	return n;
}

/* Whether every read of t in e (of statement s) has distinct plain index
 * subscripts that cover all of s's index variables. */
static int reads_ok(const tc_ir_stmt *s, const tc_ir_expr *e, int t)
{
	int k, j;
	if (e->op == TC_OP_READ && e->id == t) {
		int seen[64] = {0};
		if (s->nvars > 64 || e->nargs > s->nvars)
			return 0;
		for (k = 0; k < e->nargs; k++) {
			int v = tc_ir_plain_var(e->args[k]);
			if (v < 0 || v >= s->nvars || seen[v])
				return 0;
			seen[v] = 1;
		}
		for (j = 0; j < s->nvars; j++)
			if (!seen[j])
				return 0;
		return 1;
	}
	for (k = 0; k < e->nargs; k++)
		if (!reads_ok(s, e->args[k], t))
			return 0;
	return 1;
}

/* The statement defining temporary t if it can be inlined (see the top of
 * the file), or -1. */
static int inlinable(const tc_ir_func *f, int t, const int64_t *params)
{
	int i, j, def = -1, last = -1;
	for (i = 0; i < f->nstmts; i++) {
		const tc_ir_stmt *s = &f->stmts[i];
		if (s->tensor == t) {
			if (def >= 0)
				return -1;
			def = i;
		}
		if (tc_ir_reads(s->rhs, t)) {
			if (def < 0 || def == i || !reads_ok(s, s->rhs, t))
				return -1;
			last = i;
		}
	}
	if (def < 0 || last < 0)
		return -1;
	{
		const tc_ir_stmt *s = &f->stmts[def];
		int n = ops(s->rhs, t);
		if (s->red != TC_RED_ASSIGN || s->pack || n < 0 || n > MAX_OPS ||
			!tc_ir_covers_tensor(f, s, params))
			return -1;
		for (j = def + 1; j <= last; j++)
			if (tc_ir_reads(s->rhs, f->stmts[j].tensor))
				return -1;
	}
	return def;
}

typedef struct inliner {
	tc_arena *ar;
	const tc_ir_stmt *def; /* the definition being inlined */
	int t;                 /* its tensor */
	const int *map;        /* old tensor number -> new */
} inliner;

static tc_ir_expr *copy(inliner *I, const tc_ir_expr *e, const tc_ir_expr *at);

/* A copy of the definition's right-hand side for the read at (its index
 * variables become the read's subscripts), cast to the temporary's type. */
static tc_ir_expr *expand(inliner *I, const tc_ir_expr *at)
{
	tc_ir_expr *v = copy(I, I->def->rhs, at), *c;
	if (!v || v->type == at->type)
		return v;
	if (!(c = tc_arena_alloc(I->ar, sizeof(*c))))
		return NULL;
	memset(c, 0, sizeof(*c));
	c->op = TC_OP_CAST;
	c->type = at->type;
	c->loc = at->loc;
	c->nargs = 1;
	if (!(c->args = tc_arena_alloc(I->ar, sizeof(*c->args))))
		return NULL;
	c->args[0] = v;
	return c;
}

/* A copy of e with reads of the temporary expanded and tensor numbers
 * mapped; inside the definition's right-hand side (at: the read being
 * expanded) index k becomes at's subscript k. */
static tc_ir_expr *copy(inliner *I, const tc_ir_expr *e, const tc_ir_expr *at)
{
	tc_ir_expr *c;
	int k;
	if (!at && e->op == TC_OP_READ && e->id == I->t)
		return expand(I, e);
	if (!(c = tc_arena_alloc(I->ar, sizeof(*c))))
		return NULL;
	*c = *e;
	if (at && e->op == TC_OP_INDEX) { /* keep the node's type: rename only */
		c->id = tc_ir_plain_var(at->args[e->id]);
		return c;
	}
	if (e->op == TC_OP_READ)
		c->id = I->map[e->id];
	if (e->nargs && !(c->args = tc_arena_alloc(I->ar, (size_t)e->nargs * sizeof(*c->args))))
		return NULL;
	for (k = 0; k < e->nargs; k++)
		if (!(c->args[k] = copy(I, e->args[k], at)))
			return NULL;
	return c;
}

/* f with temporary t (defined by statement def) inlined and removed. */
static const tc_ir_func *inline_one(tc_arena *ar, const tc_ir_func *f, int t, int def)
{
	tc_ir_func *g = tc_arena_alloc(ar, sizeof(*g));
	int *map = tc_arena_alloc(ar, (size_t)f->ntensors * sizeof(*map));
	inliner I;
	int i, j;
	if (!g || !map)
		return NULL;
	for (i = j = 0; i < f->ntensors; i++)
		map[i] = i == t ? -1 : j++;
	I.ar = ar;
	I.def = &f->stmts[def];
	I.t = t;
	I.map = map;
	*g = *f;
	g->ntensors = f->ntensors - 1;
	g->nstmts = f->nstmts - 1;
	g->tensors = tc_arena_alloc(ar, (size_t)g->ntensors * sizeof(*g->tensors));
	g->stmts = tc_arena_alloc(ar, (size_t)g->nstmts * sizeof(*g->stmts));
	if (!g->tensors || !g->stmts)
		return NULL;
	for (i = 0; i < f->ntensors; i++)
		if (i != t)
			g->tensors[map[i]] = f->tensors[i];
	for (i = j = 0; i < f->nstmts; i++) {
		tc_ir_stmt *s;
		if (i == def)
			continue;
		s = &g->stmts[j++];
		*s = f->stmts[i];
		s->tensor = map[s->tensor];
		if (!(s->rhs = copy(&I, f->stmts[i].rhs, NULL)))
			return NULL;
	}
	return g;
}

const tc_ir_func *tc_ir_inline(__tc_keep tc_arena *ar, __tc_keep const tc_ir_func *f,
	__tc_keep const int64_t *params)
{
	int t, def;
	/* temporaries follow inputs and outputs; each inlining renumbers the
	 * later ones, so look again from the first after every one */
	for (t = f->ninputs + f->noutputs; f && t < f->ntensors;) {
		if (f->tensors[t].kind == TC_TENSOR_TEMP && (def = inlinable(f, t, params)) >= 0)
			f = inline_one(ar, f, t, def);
		else
			t++;
	}
	return f;
}
