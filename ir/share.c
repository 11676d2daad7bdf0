/* Sharing an expensive subexpression between a statement and an earlier
 * one: computed once, stored, read back by both.
 *
 * softmax computes every exponential twice:
 *     sm(n) +=! exp(I(n,r_d) - mx(n))
 *     O(n,d) = exp(I(n,d) - mx(n)) / sm(n)
 * The exponentials are the kernel's whole cost (about 0.55 cycles per
 * element each at 128 x 1000, the max and the division together a third of
 * one).  Sharing rewrites this into
 *     O(n,d) = exp(I(n,d) - mx(n))        (a new statement, before the sum)
 *     sm(n) +=! O(n,r_d)
 *     O(n,d) = O(n,d) / sm(n)
 * The value read back is the value computed, rounded to O's type which is
 * the expression's own, so results stay bit for bit; the scheduler fuses
 * the three per row (fusion max), so O's row is read back from cache.
 *
 * With row_bytes > 0 (option share=row) the value goes into a new
 * temporary O_shared(n,d) marked rowbuf instead, and the division becomes
 * O(n,d) = O_shared(n,d) / sm(n): once the rows are fused, the schedule
 * can keep O_shared as one row per thread (polyhedral/contract.c), and O,
 * written once, can be streamed.  Rows longer than row_bytes are stored
 * into O as above.  (Measured slower than storing into O for softmax 4096
 * x 4096; see ir/README.md.)
 *
 * A statement S qualifies as the one to share when it is a plain
 * assignment (no reduction index) over the whole extent of its tensor O,
 * the only statement writing O, not reading O, and nothing before it reads
 * O.  The shared expression e is a subexpression of S's right-hand side
 * that calls a builtin (cheaper ones are not worth a store and a load),
 * has O's type, and uses every index of S; an earlier statement R holds
 * the same expression up to a renaming of index variables (one to one),
 * whose renamed indices stay within O's extent.  Nothing from R up to S
 * writes a tensor that e reads. */
#include "ir.h"

#include "../lang/sexpr.h"

#include <string.h>

#define MAX_VARS 32

/* Whether e calls a builtin. */
static int calls(const tc_ir_expr *e)
{
	int k;
	if (e->op == TC_OP_CALL)
		return 1;
	for (k = 0; k < e->nargs; k++)
		if (calls(e->args[k]))
			return 1;
	return 0;
}

/* Mark the index variables e uses in used[]. */
static void uses(const tc_ir_expr *e, int *used)
{
	int k;
	if (e->op == TC_OP_INDEX && e->id >= 0 && e->id < MAX_VARS)
		used[e->id] = 1;
	for (k = 0; k < e->nargs; k++)
		uses(e->args[k], used);
}

/* Whether a (of S) and b (of R) are the same expression with S's index
 * variable v read as R's sigma[v] (extended as needed, one to one: inv is
 * the inverse). */
static int same(const tc_ir_expr *a, const tc_ir_expr *b, int *sigma, int *inv)
{
	int k;
	if (a->op != b->op || a->type != b->type || a->nargs != b->nargs)
		return 0;
	switch (a->op) {
	case TC_OP_CONST:
		if (tc_dtype_is_float(a->type) ? memcmp(&a->c.f, &b->c.f, sizeof(a->c.f))
					       : a->c.i != b->c.i)
			return 0;
		break;
	case TC_OP_INDEX:
		if (a->id < 0 || a->id >= MAX_VARS || b->id < 0 || b->id >= MAX_VARS)
			return 0;
		if (sigma[a->id] < 0 && inv[b->id] < 0) {
			sigma[a->id] = b->id;
			inv[b->id] = a->id;
		}
		return sigma[a->id] == b->id && inv[b->id] == a->id;
	case TC_OP_SIZE:
	case TC_OP_READ:
	case TC_OP_CALL:
		if (a->id != b->id)
			return 0;
		break;
	default:
		break;
	}
	for (k = 0; k < a->nargs; k++)
		if (!same(a->args[k], b->args[k], sigma, inv))
			return 0;
	return 1;
}

/* A match: S's subexpression es equals R's er under sigma. */
typedef struct match {
	const tc_ir_expr *es, *er;
	int sigma[MAX_VARS];
} match;

/* Look for a subexpression of R's e equal to es (under a fresh renaming). */
static int find_in_r(const tc_ir_expr *es, const tc_ir_expr *e, match *m)
{
	int inv[MAX_VARS], k;
	for (k = 0; k < MAX_VARS; k++)
		m->sigma[k] = inv[k] = -1;
	if (same(es, e, m->sigma, inv)) {
		m->es = es;
		m->er = e;
		return 1;
	}
	for (k = 0; k < e->nargs; k++)
		if (find_in_r(es, e->args[k], m))
			return 1;
	return 0;
}

/* Whether R's renamed indices stay within the extent of tensor t (which S
 * writes over its whole extent with index k as subscript k). */
static int within(const tc_ir_func *f, const tc_ir_stmt *r, int t, const int *sigma, int n,
	const int64_t *params)
{
	int k;
	for (k = 0; k < n; k++) {
		int64_t lo, hi, ext;
		if (!tc_ir_var_range(&r->vars[sigma[k]], params, &lo, &hi) ||
			tc_sx_eval(f->tensors[t].ext[k], params, NULL, &ext) < 0 || lo < 0 || hi > ext)
			return 0;
	}
	return 1;
}

/* Whether statement s writes its whole tensor: index k from 0 to extent k. */
static int whole(const tc_ir_func *f, const tc_ir_stmt *s, const int64_t *params)
{
	return s->red == TC_RED_ASSIGN && !s->pack && s->nlhs <= MAX_VARS &&
		tc_ir_covers_tensor(f, s, params);
}

/* Whether any statement in [from, to) writes a tensor that e reads. */
static int clobbered(const tc_ir_func *f, int from, int to, const tc_ir_expr *e)
{
	int i;
	for (i = from; i < to; i++)
		if (tc_ir_reads(e, f->stmts[i].tensor))
			return 1;
	return 0;
}

/* Search S's subexpressions (outermost first) for one an earlier statement
 * shares; *r: that statement. */
static int find(const tc_ir_func *f, int s, const tc_ir_expr *es, const int64_t *params,
	match *m, int *r)
{
	const tc_ir_stmt *S = &f->stmts[s];
	int used[MAX_VARS] = {0}, k, i;
	if (!calls(es))
		return 0;
	uses(es, used);
	for (k = 0; k < S->nvars && used[k]; k++)
		;
	if (k == S->nvars && es->type == f->tensors[S->tensor].dtype)
		for (i = 0; i < s; i++)
			if (find_in_r(es, f->stmts[i].rhs, m) &&
				within(f, &f->stmts[i], S->tensor, m->sigma, S->nvars, params) &&
				!clobbered(f, i, s, es)) {
				*r = i;
				return 1;
			}
	for (k = 0; k < es->nargs; k++)
		if (find(f, s, es->args[k], params, m, r))
			return 1;
	return 0;
}

/* A copy of e with the node at replaced by with (shared, not copied). */
static tc_ir_expr *replace(tc_arena *ar, const tc_ir_expr *e, const tc_ir_expr *at,
	tc_ir_expr *with)
{
	tc_ir_expr *c;
	int k;
	if (e == at)
		return with;
	if (!(c = tc_arena_alloc(ar, sizeof(*c))))
		return NULL;
	*c = *e;
	if (e->nargs && !(c->args = tc_arena_alloc(ar, (size_t)e->nargs * sizeof(*c->args))))
		return NULL;
	for (k = 0; k < e->nargs; k++)
		if (!(c->args[k] = replace(ar, e->args[k], at, with)))
			return NULL;
	return c;
}

/* Whether a row of tensor t (every dimension but the first) has at most
 * row_bytes at the bound sizes, t having two or more dimensions. */
static int short_rows(const tc_ir_func *f, int t, const int64_t *params, int64_t row_bytes)
{
	int64_t bytes = f->tensors[t].ndim < 2 ? -1 : tc_ir_tail_bytes(f, t, 1, params);
	return bytes >= 0 && bytes <= row_bytes;
}

/* f with S (statement s) storing the shared expression of m first, before
 * statement r, as a new statement; r and s read it back.  It goes into a
 * new rowbuf temporary shaped like S's tensor when rowbuf, else into S's
 * tensor. */
static const tc_ir_func *share_one(tc_arena *ar, const tc_ir_func *f, int s, int r,
	const match *m, int rowbuf)
{
	const tc_ir_stmt *S = &f->stmts[s];
	tc_ir_func *g = tc_arena_alloc(ar, sizeof(*g));
	tc_ir_stmt *st;
	tc_ir_expr *rs, *rr;
	int own[MAX_VARS], k, t = S->tensor;
	if (!g)
		return NULL;
	*g = *f;
	if (rowbuf) {
		tc_ir_tensor *tt;
		t = f->ntensors;
		g->ntensors = f->ntensors + 1;
		if (!(g->tensors = tc_arena_alloc(ar, (size_t)g->ntensors * sizeof(*tt))))
			return NULL;
		memcpy(g->tensors, f->tensors, (size_t)f->ntensors * sizeof(*tt));
		tt = &g->tensors[t];
		*tt = f->tensors[S->tensor];
		tt->kind = TC_TENSOR_TEMP;
		tt->rowbuf = 1;
		if (!(tt->name = tc_ir_fresh_name(ar, f, tt->name, "_shared")))
			return NULL;
	}
	for (k = 0; k < S->nvars; k++)
		own[k] = k;
	rs = tc_ir_read_at(ar, g, t, own, S->nvars, m->es->loc);
	rr = tc_ir_read_at(ar, g, t, m->sigma, S->nvars, m->er->loc);
	g->nstmts = f->nstmts + 1;
	st = tc_arena_alloc(ar, (size_t)g->nstmts * sizeof(*st));
	if (!rs || !rr || !st)
		return NULL;
	memcpy(st, f->stmts, (size_t)r * sizeof(*st));
	st[r] = *S; /* t(i...) = e, over S's domain */
	st[r].tensor = t;
	st[r].rhs = (tc_ir_expr *)m->es;
	memcpy(st + r + 1, f->stmts + r, (size_t)(f->nstmts - r) * sizeof(*st));
	if (!(st[r + 1].rhs = replace(ar, f->stmts[r].rhs, m->er, rr)) ||
		!(st[s + 1].rhs = replace(ar, S->rhs, m->es, rs)))
		return NULL;
	g->stmts = st;
	return g;
}

const tc_ir_func *tc_ir_share(__tc_keep tc_arena *ar, __tc_keep const tc_ir_func *f,
	__tc_keep const int64_t *params, int64_t row_bytes)
{
	int s, i, r;
	match m;
	if (f && tc_ir_has_scatter(f)) /* its gathers read tensors outside rhs */
		return f;
	for (s = 0; f && s < f->nstmts; s++) {
		const tc_ir_stmt *S = &f->stmts[s];
		int writers = 0, early = 0;
		if (!whole(f, S, params) || tc_ir_reads(S->rhs, S->tensor))
			continue;
		for (i = 0; i < f->nstmts; i++) {
			writers += f->stmts[i].tensor == S->tensor;
			early |= i < s && tc_ir_reads(f->stmts[i].rhs, S->tensor);
		}
		if (writers != 1 || early || !find(f, s, S->rhs, params, &m, &r))
			continue;
		f = share_one(ar, f, s, r, &m,
			row_bytes > 0 && short_rows(f, S->tensor, params, row_bytes));
		s++; /* S moved one on */
	}
	return f;
}
