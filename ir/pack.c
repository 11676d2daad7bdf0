/* Operand packing: copy an input that a contraction reads along the wrong
 * dimension into a temporary laid out for the contraction.
 *
 * The register tile (polyhedral/regtile.c) vectorises the output's stride-1
 * dimension: every operand must be either stride-1 in that dimension or
 * constant along it (a broadcast).  An operand whose stride-1 dimension is
 * the reduction instead, such as B in C(m,n) +=! A(m,r_k) * B(n,r_k) or the
 * weights W(o,r_i) of a fully connected layer, would need a gather per
 * lane.  Packing rewrites
 *     C(m,n) +=! A(m,r_k) * B(n,r_k)
 * into
 *     B_packed(r_k,n) = B(n,r_k)          (a packing statement, run first)
 *     C(m,n) +=! A(m,r_k) * B_packed(r_k,n)
 * which is the plain matmul the register tile handles.  The copy reads
 * every element of B once; the contraction then reads each element of the
 * packed copy M / rows times from cache.
 *
 * Only inputs are packed: nothing writes them, so the copies can run
 * before every other statement (the polyhedral model schedules them first,
 * on their own) and the arithmetic of the kernel is unchanged, bit for
 * bit. */
#include "ir.h"

#include "../lang/sexpr.h"

#include <string.h>

/* Whether read r of statement s should be packed, and how: perm[k] is the
 * dimension of the input that becomes dimension k of the packed copy (the
 * dimension indexed by the output's innermost index moves last, the others
 * keep their order).  Requires an output of rank 2 or more (a row
 * reduction gains nothing), every subscript a distinct index variable, the
 * last one a reduction index, and the output's innermost index among the
 * others. */
static int pack_plan(const tc_ir_func *f, const tc_ir_stmt *s, const tc_ir_expr *r, int *perm)
{
	int inner = s->nlhs - 1, at = -1, k, j, n = r->nargs;
	if (s->nlhs < 2 || /* the register tile needs two parallel dimensions */ f->tensors[r->id].kind != TC_TENSOR_INPUT || n < 2)
		return 0;
	for (k = 0; k < n; k++) {
		int v = tc_ir_plain_var(r->args[k]);
		if (v < 0)
			return 0;
		for (j = 0; j < k; j++)
			if (tc_ir_plain_var(r->args[j]) == v)
				return 0;
		if (v == inner)
			at = k;
	}
	if (at < 0 || at == n - 1 || !s->vars[tc_ir_plain_var(r->args[n - 1])].is_reduction)
		return 0;
	for (k = 0, j = 0; k < n; k++)
		if (k != at)
			perm[j++] = k;
	perm[n - 1] = at;
	return 1;
}

/* A packed copy planned for one input and permutation. */
typedef struct pack {
	int input, ndim;
	int perm[TC_MAX_RANK];
	int tensor;             /* the temporary's number in the new function */
	const tc_ir_stmt *user; /* the first statement reading it (names, location) */
	const tc_ir_expr *read; /* its read there */
} pack;

/* A read that reads a packed copy instead. */
typedef struct pack_use {
	const tc_ir_stmt *stmt;
	const tc_ir_expr *read;
	int pack;
} pack_use;

#define MAX_PACKS 32

typedef struct packer {
	tc_arena *ar;
	const tc_ir_func *f;
	const int64_t *params;
	int64_t min_bytes; /* least bytes of a row of the packed copy */
	pack packs[MAX_PACKS];
	int npacks;
	pack_use uses[MAX_PACKS];
	int nuses;
} packer;

/* Whether reads a and b use the same tensor and index variables. */
static int same_read(const tc_ir_expr *a, const tc_ir_expr *b)
{
	int k;
	if (a->id != b->id || a->nargs != b->nargs)
		return 0;
	for (k = 0; k < a->nargs; k++)
		if (tc_ir_plain_var(a->args[k]) != tc_ir_plain_var(b->args[k]))
			return 0;
	return 1;
}

/* The pack that read r of statement s reads, or -1. */
static int find_use(const packer *P, const tc_ir_stmt *s, const tc_ir_expr *r)
{
	int i;
	for (i = 0; i < P->nuses; i++)
		if (P->uses[i].stmt == s && same_read(P->uses[i].read, r))
			return P->uses[i].pack;
	return -1;
}

/* Plan the packing of read r of statement s, if it pays: a row of the
 * packed copy has at least min_bytes (a vector register's worth; shorter
 * rows gain nothing from the register tile). */
static void plan_read(packer *P, const tc_ir_stmt *s, const tc_ir_expr *r)
{
	int perm[TC_MAX_RANK], i;
	int64_t inner = 0;
	if (find_use(P, s, r) >= 0 || P->nuses == MAX_PACKS || !pack_plan(P->f, s, r, perm))
		return;
	if (tc_sx_eval(P->f->tensors[r->id].ext[perm[r->nargs - 1]], P->params, NULL, &inner) < 0 ||
		inner * tc_dtype_size(P->f->tensors[r->id].dtype) < P->min_bytes)
		return;
	for (i = 0; i < P->npacks; i++) /* another read's copy will do */
		if (P->packs[i].input == r->id &&
			!memcmp(P->packs[i].perm, perm, sizeof(perm[0]) * (size_t)r->nargs))
			break;
	if (i == P->npacks) {
		P->packs[i].input = r->id;
		P->packs[i].ndim = r->nargs;
		memcpy(P->packs[i].perm, perm, sizeof(perm));
		P->packs[i].user = s;
		P->packs[i].read = r;
		P->npacks++;
	}
	P->uses[P->nuses].stmt = s;
	P->uses[P->nuses].read = r;
	P->uses[P->nuses++].pack = i;
}

/* Plan the packs of the reads in e (of statement s). */
static void plan(packer *P, const tc_ir_stmt *s, const tc_ir_expr *e)
{
	int k;
	if (e->op == TC_OP_READ)
		plan_read(P, s, e);
	for (k = 0; k < e->nargs; k++)
		plan(P, s, e->args[k]);
}

/* A copy of e (in the packer's arena) whose packed reads read their copies;
 * NULL when out of memory. */
static tc_ir_expr *rewrite(packer *P, const tc_ir_stmt *s, const tc_ir_expr *e)
{
	tc_ir_expr *c = tc_arena_alloc(P->ar, sizeof(*c));
	int k, i = e->op == TC_OP_READ ? find_use(P, s, e) : -1;
	if (!c)
		return NULL;
	*c = *e;
	if (e->nargs && !(c->args = tc_arena_alloc(P->ar, (size_t)e->nargs * sizeof(*c->args))))
		return NULL;
	for (k = 0; k < e->nargs; k++)
		if (i >= 0) /* subscripts are plain indices: share them */
			c->args[k] = e->args[P->packs[i].perm[k]];
		else if (!(c->args[k] = rewrite(P, s, e->args[k])))
			return NULL;
	if (i >= 0)
		c->id = P->packs[i].tensor;
	return c;
}

/* A copy of subscript e (an index under widening casts) naming index id. */
static tc_ir_expr *copy_index(packer *P, const tc_ir_expr *e, int id)
{
	tc_ir_expr *c = tc_arena_alloc(P->ar, sizeof(*c));
	if (!c)
		return NULL;
	*c = *e;
	if (e->op == TC_OP_INDEX)
		c->id = id;
	else if (!(c->args = tc_arena_alloc(P->ar, sizeof(*c->args))) ||
		!(c->args[0] = copy_index(P, e->args[0], id)))
		return NULL;
	return c;
}

/* The packing statement of pk: packed(i_0..) = input(...), over the
 * packed tensor's extents, its indices named after the reading statement's. */
static int make_copy(packer *P, const pack *pk, tc_ir_stmt *out)
{
	const tc_ir_tensor *in = &P->f->tensors[pk->input];
	tc_ir_expr *rd = tc_arena_alloc(P->ar, sizeof(*rd));
	int k;
	memset(out, 0, sizeof(*out));
	out->tensor = pk->tensor;
	out->nlhs = out->nvars = pk->ndim;
	out->red = TC_RED_ASSIGN;
	out->pack = 1;
	out->loc = pk->user->loc;
	out->vars = tc_arena_alloc(P->ar, (size_t)pk->ndim * sizeof(*out->vars));
	if (!rd || !out->vars)
		return -1;
	*rd = *pk->read;
	if (!(rd->args = tc_arena_alloc(P->ar, (size_t)pk->ndim * sizeof(*rd->args))))
		return -1;
	for (k = 0; k < pk->ndim; k++) {
		int d = pk->perm[k];
		if (!(rd->args[d] = copy_index(P, pk->read->args[d], k)) ||
			!(out->vars[k].lo = tc_sx_const(P->ar, 0)))
			return -1;
		out->vars[k].name = pk->user->vars[tc_ir_plain_var(pk->read->args[d])].name;
		out->vars[k].hi = in->ext[d];
	}
	out->rhs = rd;
	return 0;
}

const tc_ir_func *tc_ir_pack(__tc_keep tc_arena *ar, __tc_keep const tc_ir_func *f,
	__tc_keep const int64_t *params, int64_t min_bytes)
{
	packer P;
	tc_ir_func *g;
	int i, k;

	memset(&P, 0, sizeof(P));
	P.ar = ar;
	P.f = f;
	P.params = params;
	P.min_bytes = min_bytes;
	for (i = 0; i < f->nstmts; i++)
		if (f->stmts[i].red != TC_RED_ASSIGN && f->stmts[i].nvars > f->stmts[i].nlhs)
			plan(&P, &f->stmts[i], f->stmts[i].rhs);
	if (!P.npacks)
		return f;
	g = tc_arena_alloc(ar, sizeof(*g));
	if (!g)
		return NULL;
	*g = *f;
	g->ntensors = f->ntensors + P.npacks;
	g->nstmts = f->nstmts + P.npacks;
	g->tensors = tc_arena_alloc(ar, (size_t)g->ntensors * sizeof(*g->tensors));
	g->stmts = tc_arena_alloc(ar, (size_t)g->nstmts * sizeof(*g->stmts));
	if (!g->tensors || !g->stmts)
		return NULL;
	memcpy(g->tensors, f->tensors, (size_t)f->ntensors * sizeof(*g->tensors));
	for (i = 0; i < P.npacks; i++) {
		pack *pk = &P.packs[i];
		const tc_ir_tensor *in = &f->tensors[pk->input];
		tc_ir_tensor *t = &g->tensors[f->ntensors + i];
		pk->tensor = f->ntensors + i;
		*t = *in;
		t->kind = TC_TENSOR_TEMP;
		t->name = tc_ir_fresh_name(ar, f, in->name, "_packed");
		t->ext = tc_arena_alloc(ar, (size_t)pk->ndim * sizeof(*t->ext));
		if (!t->name || !t->ext)
			return NULL;
		for (k = 0; k < pk->ndim; k++)
			t->ext[k] = in->ext[pk->perm[k]];
		if (make_copy(&P, pk, &g->stmts[i]) < 0)
			return NULL;
	}
	for (i = 0; i < f->nstmts; i++) {
		tc_ir_stmt *s = &g->stmts[P.npacks + i];
		*s = f->stmts[i];
		if (!(s->rhs = rewrite(&P, &f->stmts[i], f->stmts[i].rhs)))
			return NULL;
	}
	return g;
}
