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
 * temporary's type by an explicit cast (also a product's, of its own type:
 * see expand), so results stay bit for bit.
 *
 * A temporary T is inlined when
 * - one statement S writes it, a plain assignment (no reduction index, not
 *   a packing copy) over T's whole extent (so every element a reader may
 *   read is one S defined, and S's own reads are in bounds there), whose
 *   right-hand side has at most MAX_OPS operations and MAX_NODES nodes, no
 *   builtin calls (exp and the like cost more than a load) and does not
 *   read T;
 * - every read of T subscripts it with distinct plain index variables, and
 *   every index variable of the reading statement is among them (each
 *   instance of the reader reads its own element, so nothing is computed
 *   more often than it was read: C(i,k) +=! T(i,r_j) * B(r_j,k) would
 *   recompute T K times over, and is left alone);
 * - no statement before S reads T, and no statement after S, up to the
 *   last reader, writes a tensor that S reads (the operands are unchanged
 *   when the value is recomputed).
 *
 * The temporaries are looked at once each, in order, against the function
 * as rewritten so far; the pass keeps each tensor's writers and readers so
 * that it looks at and rewrites the readers of one temporary only, and
 * renumbers the tensors once at the end: its cost follows the statements
 * it rewrites (copying the whole function at every inlining took 24 GB on
 * 10,000 chained temporaries). */
#include "ir.h"

#include <string.h>

#define MAX_OPS 4
/* ... and at most this many nodes (casts and subscripts count): each read
 * gets a copy, so a chain of copies or casts stays small */
#define MAX_NODES 64

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

typedef struct inliner {
	tc_arena *ar;
	const tc_ir_stmt *def; /* the definition being inlined */
	int t;                 /* its tensor */
	const int *map;        /* old tensor number -> new */
} inliner;

static tc_ir_expr *copy(inliner *I, const tc_ir_expr *e, const tc_ir_expr *at);

/* A copy of the definition's right-hand side for the read at (its index
 * variables become the read's subscripts), cast to the temporary's type.
 * A float product is cast even to its own type: the value stored was
 * rounded, and under contract=on a product that is an operand of a sum
 * fuses with it (tc_ir_fma_of), a cast does not, so the value read stays
 * the value that was stored. */
static tc_ir_expr *expand(inliner *I, const tc_ir_expr *at)
{
	tc_ir_expr *v = copy(I, I->def->rhs, at), *c;
	if (!v || (v->type == at->type && !(v->op == TC_OP_MUL && tc_dtype_is_float(v->type))))
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

/* Nodes of e. */
static int nodes(const tc_ir_expr *e)
{
	int k, n = 1;
	for (k = 0; k < e->nargs; k++)
		n += nodes(e->args[k]);
	return n;
}

/* A list of statement indices (readers or writers of a tensor). */
typedef struct ilist {
	int n, cap;
	int *v;
} ilist;

static int ilist_add(ilist *l, int x)
{
	if (l->n == l->cap) {
		int cap = l->cap ? 2 * l->cap : 4;
		int *v = tc_realloc(l->v, (size_t)cap * sizeof(int));
		if (!v)
			return -1;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = x;
	return 0;
}

/* The state of tc_ir_inline: the statements as they are rewritten (their
 * tensors keep f's numbers until the end), which are still there, and per
 * tensor its writers and the statements that may read it (a superset:
 * checked with tc_ir_reads). */
typedef struct state {
	const tc_ir_func *f;
	tc_ir_stmt *stmts;
	char *alive;
	ilist *writers, *readers;
	int *seen; /* per tensor: the last statement that listed it (dedup) */
} state;

/* Add statement i to the readers of every tensor its right-hand side e
 * reads; -1 when out of memory. */
static int note_reads(state *S, const tc_ir_expr *e, int i)
{
	int k;
	if (e->op == TC_OP_READ && S->seen[e->id] != i) {
		S->seen[e->id] = i;
		if (ilist_add(&S->readers[e->id], i) < 0)
			return -1;
	}
	for (k = 0; k < e->nargs; k++)
		if (note_reads(S, e->args[k], i) < 0)
			return -1;
	return 0;
}

/* Whether a statement in (from, to] still there writes a tensor that e
 * reads. */
static int written_between(const state *S, const tc_ir_expr *e, int from, int to)
{
	int k;
	if (e->op == TC_OP_READ) {
		const ilist *w = &S->writers[e->id];
		for (k = 0; k < w->n; k++)
			if (w->v[k] > from && w->v[k] <= to && S->alive[w->v[k]])
				return 1;
	}
	for (k = 0; k < e->nargs; k++)
		if (written_between(S, e->args[k], from, to))
			return 1;
	return 0;
}

/* The statement defining temporary t if it can be inlined (see the top of
 * the file), or -1; *last the last statement reading it.  The same
 * conditions as over the whole function, asked of t's writers and readers
 * only, so that the pass costs what the statements it rewrites cost. */
static int inlinable(const state *S, int t, const int64_t *params, int *last)
{
	const ilist *w = &S->writers[t], *r = &S->readers[t];
	const tc_ir_stmt *s;
	int k, def = -1, n;
	*last = -1;
	for (k = 0; k < w->n; k++)
		if (S->alive[w->v[k]]) {
			if (def >= 0)
				return -1;
			def = w->v[k];
		}
	if (def < 0)
		return -1;
	for (k = 0; k < r->n; k++) {
		const tc_ir_stmt *rs = &S->stmts[r->v[k]];
		if (!S->alive[r->v[k]] || !tc_ir_reads(rs->rhs, t))
			continue;
		if (r->v[k] <= def || !reads_ok(rs, rs->rhs, t))
			return -1;
		if (r->v[k] > *last)
			*last = r->v[k];
	}
	if (*last < 0)
		return -1;
	s = &S->stmts[def];
	n = ops(s->rhs, t);
	if (s->red != TC_RED_ASSIGN || s->pack || n < 0 || n > MAX_OPS ||
		nodes(s->rhs) > MAX_NODES || !tc_ir_covers_tensor(S->f, s, params) ||
		written_between(S, s->rhs, def, *last))
		return -1;
	return def;
}

/* Inline temporary t, defined by statement def, into its readers; its
 * readers become readers of what def reads.  -1 when out of memory. */
static int inline_one(tc_arena *ar, state *S, int t, int def, const int *identity)
{
	inliner I;
	ilist *r = &S->readers[t];
	int k, n = r->n;
	I.ar = ar;
	I.def = &S->stmts[def];
	I.t = t;
	I.map = identity;
	for (k = 0; k < n; k++) {
		tc_ir_stmt *rs = &S->stmts[r->v[k]];
		if (!S->alive[r->v[k]] || !tc_ir_reads(rs->rhs, t))
			continue;
		if (!(rs->rhs = copy(&I, rs->rhs, NULL)) || note_reads(S, rs->rhs, r->v[k]) < 0)
			return -1;
	}
	S->alive[def] = 0;
	return 0;
}

/* The function of the statements still in S, the temporaries no statement
 * writes any more dropped and the tensors renumbered, in ar. */
static const tc_ir_func *finish(tc_arena *ar, const state *S, const char *gone)
{
	const tc_ir_func *f = S->f;
	tc_ir_func *g = tc_arena_alloc(ar, sizeof(*g));
	int *map = tc_arena_alloc(ar, (size_t)f->ntensors * sizeof(*map));
	inliner I;
	int i, j;
	if (!g || !map)
		return NULL;
	*g = *f;
	for (i = j = 0; i < f->ntensors; i++)
		map[i] = gone[i] ? -1 : j++;
	g->ntensors = j;
	for (i = j = 0; i < f->nstmts; i++)
		j += S->alive[i];
	g->nstmts = j;
	g->tensors = tc_arena_alloc(ar, (size_t)g->ntensors * sizeof(*g->tensors));
	g->stmts = tc_arena_alloc(ar, (size_t)g->nstmts * sizeof(*g->stmts));
	if (!g->tensors || !g->stmts)
		return NULL;
	for (i = 0; i < f->ntensors; i++)
		if (!gone[i])
			g->tensors[map[i]] = f->tensors[i];
	I.ar = ar;
	I.def = NULL;
	I.t = -1; /* no read is expanded: the tensors are renumbered */
	I.map = map;
	for (i = j = 0; i < f->nstmts; i++) {
		tc_ir_stmt *s;
		if (!S->alive[i])
			continue;
		s = &g->stmts[j++];
		*s = S->stmts[i];
		s->tensor = map[s->tensor];
		if (!(s->rhs = copy(&I, S->stmts[i].rhs, NULL)))
			return NULL;
	}
	return g;
}

const tc_ir_func *tc_ir_inline(__tc_keep tc_arena *ar, __tc_keep const tc_ir_func *f,
	__tc_keep const int64_t *params)
{
	state S;
	const tc_ir_func *g = NULL;
	char *gone = NULL;
	int *identity = NULL;
	int i, t, def, last, any = 0;

	if (tc_ir_has_scatter(f)) /* its gathers read tensors outside rhs */
		return f;
	memset(&S, 0, sizeof(S));
	S.f = f;
	S.stmts = tc_arena_alloc(ar, (size_t)(f->nstmts + 1) * sizeof(*S.stmts));
	S.alive = tc_malloc((size_t)f->nstmts + 1);
	S.writers = tc_calloc((size_t)f->ntensors + 1, sizeof(ilist));
	S.readers = tc_calloc((size_t)f->ntensors + 1, sizeof(ilist));
	S.seen = tc_malloc(((size_t)f->ntensors + 1) * sizeof(int));
	gone = tc_calloc((size_t)f->ntensors + 1, 1);
	identity = tc_malloc(((size_t)f->ntensors + 1) * sizeof(int));
	if (!S.stmts || !S.alive || !S.writers || !S.readers || !S.seen || !gone || !identity)
		goto done;
	for (t = 0; t < f->ntensors; t++) {
		S.seen[t] = -1;
		identity[t] = t;
	}
	for (i = 0; i < f->nstmts; i++) {
		S.stmts[i] = f->stmts[i];
		S.alive[i] = 1;
		if (ilist_add(&S.writers[f->stmts[i].tensor], i) < 0 ||
			note_reads(&S, f->stmts[i].rhs, i) < 0)
			goto done;
	}
	/* temporaries follow inputs and outputs, each looked at once, in order */
	for (t = f->ninputs + f->noutputs; t < f->ntensors; t++) {
		if (f->tensors[t].kind != TC_TENSOR_TEMP || (def = inlinable(&S, t, params, &last)) < 0)
			continue;
		if (inline_one(ar, &S, t, def, identity) < 0)
			goto done;
		gone[t] = 1;
		any = 1;
	}
	g = any ? finish(ar, &S, gone) : f;
done:
	for (t = 0; S.writers && S.readers && t < f->ntensors; t++) {
		tc_free(S.writers[t].v);
		tc_free(S.readers[t].v);
	}
	tc_free(S.alive);
	tc_free(S.writers);
	tc_free(S.readers);
	tc_free(S.seen);
	tc_free(gone);
	tc_free(identity);
	return g;
}
