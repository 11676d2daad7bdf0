/* Batching a def over a leading "model" dimension (see vmap.h).
 *
 * Three steps.  First the checks: the def is checked, the names to batch
 * are inputs (each once), the size name is an identifier that nothing in
 * the def uses.  Then which tensors are batched: the inputs named, and,
 * until nothing changes, every tensor that some statement writes while
 * reading a batched tensor.  Tensors are batched whole, not per version,
 * so a tensor that one statement writes from shared values and a later one
 * from batched values (an in-place O(i) = O(i) + B(i)) is batched from its
 * first write on, and every statement reading it is batched too: the
 * model index then only repeats the shared computation, which is what
 * running the def once per model computes.  Last the assembly: each
 * statement writing a batched tensor T gets the model index e as its
 * first left-hand index,
 *
 *   T(e, i, ...) op rhs[X(s) := X(e, s) for every batched X]
 *
 * in its right side, lets, exists clauses and gathered left-hand
 * subscripts (a rank-0 read S becomes S(e)).  Range inference bounds e
 * by the first dimension of a batched read, whose extent is the new size,
 * or by the shape of T where it is known (a declared output, a tensor
 * written before).  The first write of T without a declared shape, which
 * defines that shape, gets "where e in 0:E" when no batched read is
 * always evaluated there (the statement only repeats a shared value, or
 * reads batched tensors only under ?: or pad), so that e never depends on
 * the weaker constraints of guarded reads.  Statements that write unbatched
 * tensors read no batched tensor (by the fixed point) and are shared
 * unchanged, as are all nodes without a batched read below them.
 *
 * Every construct of the language batches this way: reductions of every
 * kind (each model's reduction is the original's, over the same indices,
 * in the same order), in-place updates, scatters (T(e, I(e, i)) +=! ...),
 * gathers, lets, exists clauses, pad, ?: and casts.  The one limit is the
 * rank: a tensor of TC_MAX_RANK dimensions cannot get another. */
#include "vmap.h"

#include <stdio.h>
#include <string.h>

/* The state of one batching. */
typedef struct vmap_ctx {
	tc_arena *ar;
	const tc_def *def;
	tc_diags *d;
	const char *size;  /* the new size, E */
	const char *index; /* the model index, e */
	int *batched;      /* per tensor of def */
	int *let_seen;     /* per where clause of the statement walked */
} vmap_ctx;

/* ---- the checks ---- */

/* "A, B, C": the inputs of def, for messages (into b). */
static void list_inputs(const tc_def *def, tc_buf *b)
{
	int t;
	for (t = 0; t < def->ninputs; t++)
		tc_buf_printf(b, "%s%s", t ? ", " : "", def->tensors[t].name);
}

/* Whether name is an identifier that can name a size: the lexer's
 * identifier, and not a keyword, a type name or a builtin. */
static const char *bad_size_name(const char *name)
{
	static const char *const keywords[] = {"def", "where", "in", "exists", "min", "max"};
	size_t i, n = strlen(name);
	if (!n)
		return "it is empty";
	if (!(name[0] == '_' || (name[0] >= 'a' && name[0] <= 'z') ||
		(name[0] >= 'A' && name[0] <= 'Z')))
		return "an identifier starts with a letter or '_'";
	for (i = 1; i < n; i++)
		if (!(name[i] == '_' || (name[i] >= 'a' && name[i] <= 'z') ||
			(name[i] >= 'A' && name[i] <= 'Z') || (name[i] >= '0' && name[i] <= '9')))
			return "an identifier has only letters, digits and '_'";
	for (i = 0; i < sizeof(keywords) / sizeof(keywords[0]); i++)
		if (!strcmp(name, keywords[i]))
			return "it is a keyword";
	if (n < 64 && tc_dtype_from_name(name, (int)n) != TC_T_NONE)
		return "it is a type name";
	if (n < 64 && tc_builtin_reserved(name, (int)n))
		return "it is a builtin function";
	return NULL;
}

/* Where def uses name (a size, a tensor, an index or a where-clause name
 * of a statement): 1 and its location in *loc, else 0. */
static int name_used(const tc_def *def, const char *name, tc_loc *loc)
{
	int i, j;
	for (i = 0; i < def->nsizes; i++)
		if (!strcmp(def->sizes[i], name)) {
			*loc = def->size_loc[i];
			return 1;
		}
	for (i = 0; i < def->ntensors; i++)
		if (!strcmp(def->tensors[i].name, name)) {
			*loc = def->tensors[i].loc;
			return 1;
		}
	for (i = 0; i < def->nstmts; i++) {
		const tc_stmt *s = def->stmts[i];
		for (j = 0; j < s->nvars; j++)
			if (!strcmp(s->vars[j].name, name)) {
				*loc = s->vars[j].loc;
				return 1;
			}
		for (j = 0; j < s->nwhere; j++)
			if (s->where[j].kind != TC_WHERE_EXISTS && !strcmp(s->where[j].name, name)) {
				*loc = s->where[j].name_loc;
				return 1;
			}
	}
	return 0;
}

/* Mark the inputs named in batched; 0, or -1 after reporting the names
 * that are not inputs or are named twice. */
static int mark_inputs(vmap_ctx *v, const char *const *batched, int nbatched)
{
	const tc_def *def = v->def;
	int i, t, ok = 1;
	if (!nbatched) {
		tc_buf b;
		tc_buf_init(&b);
		list_inputs(def, &b);
		tc_error(v->d, def->name_loc, "vmap: no input of '%s' to batch; name one or more "
			"(its inputs: %s)", def->name, b.s ? b.s : "");
		tc_buf_free_diag(&b, v->d);
		return -1;
	}
	for (i = 0; i < nbatched; i++) {
		for (t = 0; t < def->ninputs; t++)
			if (!strcmp(def->tensors[t].name, batched[i]))
				break;
		if (t == def->ninputs) {
			tc_buf b;
			tc_buf_init(&b);
			list_inputs(def, &b);
			tc_error(v->d, def->name_loc, "vmap: '%s' is not an input of '%s' (its "
				"inputs: %s)", batched[i], def->name, b.s ? b.s : "");
			tc_buf_free_diag(&b, v->d);
			ok = 0;
		} else if (v->batched[t]) {
			tc_error(v->d, def->tensors[t].loc, "vmap: input '%s' is named twice in the "
				"inputs to batch", batched[i]);
			ok = 0;
		}
		else
			v->batched[t] = 1;
	}
	return ok ? 0 : -1;
}

/* Check the size name; 0, or -1 after reporting why it cannot be one. */
static int check_size(vmap_ctx *v)
{
	const char *why = bad_size_name(v->size);
	tc_loc loc;
	if (why) {
		tc_error(v->d, v->def->name_loc, "vmap: the size name '%s' is not a valid size "
			"name: %s", v->size, why);
		return -1;
	}
	if (name_used(v->def, v->size, &loc)) {
		int k;
		for (k = 0; k < v->def->nsizes && strcmp(v->def->sizes[k], v->size); k++)
			;
		tc_error(v->d, loc, "vmap: the size name '%s' is already %s of '%s'; choose a "
			"name that '%s' does not use", v->size,
			k < v->def->nsizes ? "a size" : "a name", v->def->name, v->def->name);
		return -1;
	}
	return 0;
}

/* ---- which tensors are batched ---- */

/* Whether e reads a batched tensor outside every branch of ?: and every
 * argument of pad (guarded: e is inside one), following the lets of
 * statement s as range inference does (a let's reads are where it is
 * used); marks the lets it walks in v->let_seen. */
static int bounds_index(vmap_ctx *v, const tc_stmt *s, const tc_expr *e, int guarded)
{
	int i;
	guarded = guarded || e->guarded;
	if ((e->kind == TC_AST_CALL || e->kind == TC_AST_IDENT) && e->ref == TC_REF_TENSOR &&
		v->batched[e->ref_id] && !guarded)
		return 1;
	if (e->kind == TC_AST_IDENT && e->ref == TC_REF_LET && !v->let_seen[e->ref_id]) {
		v->let_seen[e->ref_id] = 1;
		if (bounds_index(v, s, s->where[e->ref_id].val, guarded))
			return 1;
	}
	for (i = 0; i < e->nargs; i++)
		if (bounds_index(v, s, e->args[i], guarded))
			return 1;
	return 0;
}

/* Whether a read of a batched tensor that is always evaluated bounds the
 * model index of statement s (else it gets a where range). */
static int index_bounded(vmap_ctx *v, const tc_stmt *s)
{
	int i;
	for (i = 0; i < s->nwhere; i++)
		v->let_seen[i] = 0;
	for (i = 0; s->sub && i < s->nidx; i++)
		if (s->sub[i] && bounds_index(v, s, s->sub[i], 0))
			return 1;
	if (bounds_index(v, s, s->rhs, 0))
		return 1;
	for (i = 0; i < s->nwhere; i++)
		if (s->where[i].kind == TC_WHERE_EXISTS && bounds_index(v, s, s->where[i].val, 0))
			return 1;
	for (i = 0; i < s->nwhere; i++) /* unused lets constrain too */
		if (s->where[i].kind == TC_WHERE_LET && !v->let_seen[i] &&
			bounds_index(v, s, s->where[i].val, 0))
			return 1;
	return 0;
}

/* ---- the batched def ---- */

/* A new identifier node naming name. */
static tc_expr *mk_ident(vmap_ctx *v, const char *name)
{
	tc_expr *e = tc_arena_alloc(v->ar, sizeof(*e));
	if (!e)
		return NULL;
	e->kind = TC_AST_IDENT;
	e->name = name;
	e->depth = 1;
	e->type = TC_T_NONE;
	return e;
}

/* e with every read X(s) of a batched tensor X written X(e, s) (nodes
 * copied on the way to such a read, shared elsewhere); NULL when out of
 * memory. */
static tc_expr *batch_expr(vmap_ctx *v, tc_expr *e)
{
	tc_expr *c, **args = NULL;
	int i, read;
	if (!e)
		return NULL;
	read = (e->kind == TC_AST_CALL || e->kind == TC_AST_IDENT) && e->ref == TC_REF_TENSOR &&
		v->batched[e->ref_id];
	if (!read && !tc_expr_reads_marked(e, v->batched))
		return e;
	if (!(c = tc_arena_alloc(v->ar, sizeof(*c))))
		return NULL;
	*c = *e;
	if (read) {
		c->kind = TC_AST_CALL;
		c->nargs = e->nargs + 1;
		if (!(args = tc_arena_alloc(v->ar, (size_t)c->nargs * sizeof(*args))) ||
			!(args[0] = mk_ident(v, v->index)))
			return NULL;
		for (i = 0; i < e->nargs; i++)
			if (!(args[i + 1] = batch_expr(v, e->args[i])))
				return NULL;
		c->args = args;
		if (c->depth < 2)
			c->depth = 2;
		return c;
	}
	/* a batched read below: the node is copied */
	if (!(args = tc_arena_alloc(v->ar, (size_t)e->nargs * sizeof(*args))))
		return NULL;
	for (i = 0; i < e->nargs; i++)
		if (!(args[i] = batch_expr(v, e->args[i])))
			return NULL;
	c->args = args;
	return c;
}

/* Statement si, which writes a batched tensor, with the model index:
 * first on the left, first in every read of a batched tensor, and in a
 * where range when neither such a read nor the shape of the tensor bounds
 * it (the shape does where it is known: a declared output, or a tensor
 * written before).  NULL when out of memory. */
static tc_stmt *batch_stmt(vmap_ctx *v, int si)
{
	const tc_stmt *s = v->def->stmts[si];
	const tc_tensor_info *ti = &v->def->tensors[s->tensor];
	tc_stmt *c = tc_arena_alloc(v->ar, sizeof(*c));
	int i, range = ti->first_write == si && !ti->declared_shape && !index_bounded(v, s);
	if (!c)
		return NULL;
	*c = *s;
	c->nidx = s->nidx + 1;
	c->idx = tc_arena_alloc(v->ar, (size_t)c->nidx * sizeof(*c->idx));
	c->idx_loc = tc_arena_alloc(v->ar, (size_t)c->nidx * sizeof(*c->idx_loc));
	if (!c->idx || !c->idx_loc)
		return NULL;
	c->idx[0] = v->index;
	c->idx_loc[0] = s->lhs_loc;
	for (i = 0; i < s->nidx; i++) {
		c->idx[i + 1] = s->idx[i];
		c->idx_loc[i + 1] = s->idx_loc[i];
	}
	if (s->sub) { /* the gathered subscripts stay gathers, after e */
		if (!(c->sub = tc_arena_alloc(v->ar, (size_t)c->nidx * sizeof(*c->sub))))
			return NULL;
		for (i = 0; i < s->nidx; i++)
			if (s->sub[i] && !(c->sub[i + 1] = batch_expr(v, s->sub[i])))
				return NULL;
	}
	if (!(c->rhs = batch_expr(v, s->rhs)))
		return NULL;
	c->equiv = NULL;
	/* where clauses keep their numbers (lets are referred to by them); the
	 * range of e, where needed, comes last */
	c->nwhere = s->nwhere + range;
	if (c->nwhere && !(c->where = tc_arena_alloc(v->ar, (size_t)c->nwhere * sizeof(*c->where))))
		return NULL;
	for (i = 0; i < s->nwhere; i++) {
		c->where[i] = s->where[i];
		if (s->where[i].kind != TC_WHERE_RANGE &&
			!(c->where[i].val = batch_expr(v, s->where[i].val)))
			return NULL;
	}
	if (range) {
		tc_where *w = &c->where[s->nwhere];
		tc_expr *lo = tc_arena_alloc(v->ar, sizeof(*lo));
		if (!lo || !(w->hi = mk_ident(v, v->size)))
			return NULL;
		lo->kind = TC_AST_INT;
		lo->depth = 1;
		lo->type = TC_T_NONE;
		w->kind = TC_WHERE_RANGE;
		w->loc = s->loc;
		w->name = v->index;
		w->name_loc = s->lhs_loc;
		w->lo = lo;
	}
	/* sema's results describe the old statement */
	c->nvars = 0;
	c->vars = NULL;
	return c;
}

/* The declaration dc of a batched tensor: size as its first dimension.
 * 0, or -1 when out of memory. */
static int batch_decl(vmap_ctx *v, tc_decl *out, const tc_decl *dc)
{
	*out = *dc;
	out->has_shape = 1;
	out->ndims = dc->ndims + 1;
	if (!(out->dims = tc_arena_alloc(v->ar, (size_t)out->ndims * sizeof(*out->dims))))
		return -1;
	out->dims[0].name = v->size;
	out->dims[0].loc = dc->name_loc;
	if (dc->ndims)
		memcpy(out->dims + 1, dc->dims, (size_t)dc->ndims * sizeof(*dc->dims));
	return 0;
}

/* The model index: the first of e, e1, e2, ... that def does not use
 * (nor the size); NULL when out of memory. */
static const char *fresh_index(vmap_ctx *v)
{
	char buf[32];
	tc_loc loc;
	int k;
	for (k = 0;; k++) {
		if (k)
			snprintf(buf, sizeof(buf), "e%d", k);
		else
			snprintf(buf, sizeof(buf), "e");
		if (!name_used(v->def, buf, &loc) && strcmp(buf, v->size))
			return tc_arena_strdup(v->ar, buf);
	}
}

__tc_give tc_def *tc_vmap_def(__tc_keep tc_arena *ar, __tc_keep const tc_def *def,
	__tc_keep const char *const *batched, int nbatched, const char *size,
	__tc_keep tc_diags *d)
{
	vmap_ctx v = {0};
	tc_def *out;
	int i, t, changed, ok = 1, maxw = 1;

	v.ar = ar;
	v.def = def;
	v.d = d;
	v.size = size ? size : "";
	if (!def->ok) {
		tc_error(d, def->name_loc, "vmap: '%s' has errors", def->name);
		return NULL;
	}
	for (i = 0; i < def->nstmts; i++)
		if (def->stmts[i]->nwhere >= maxw)
			maxw = def->stmts[i]->nwhere + 1;
	v.batched = tc_arena_alloc(ar, (size_t)(def->ntensors + 1) * sizeof(*v.batched));
	v.let_seen = tc_arena_alloc(ar, (size_t)maxw * sizeof(*v.let_seen));
	if (!v.batched || !v.let_seen)
		return NULL;
	ok &= mark_inputs(&v, batched, nbatched) == 0;
	ok &= check_size(&v) == 0;
	if (!ok)
		return NULL;
	/* a tensor written from a batched one is batched, whole */
	do {
		changed = 0;
		for (i = 0; i < def->nstmts; i++) {
			const tc_stmt *s = def->stmts[i];
			if (!v.batched[s->tensor] && tc_stmt_reads_marked(s, v.batched)) {
				v.batched[s->tensor] = 1;
				changed = 1;
			}
		}
	} while (changed);
	for (t = 0; t < def->ntensors; t++)
		if (v.batched[t] && def->tensors[t].ndim + 1 > TC_MAX_RANK) {
			tc_error(d, def->tensors[t].loc, "vmap: '%s' has rank %d; batched, it would "
				"have %d dimensions, but tcomp supports at most %d", def->tensors[t].name,
				def->tensors[t].ndim, def->tensors[t].ndim + 1, TC_MAX_RANK);
			ok = 0;
		}
	if (!ok || !(v.index = fresh_index(&v)))
		return NULL;

	if (!(out = tc_arena_alloc(ar, sizeof(*out))))
		return NULL;
	out->name = def->name;
	out->loc = def->loc;
	out->name_loc = def->name_loc;
	out->nparams = def->nparams;
	out->nrets = def->nrets;
	out->nstmts = def->nstmts;
	out->params = tc_arena_alloc(ar, (size_t)(def->nparams + 1) * sizeof(*out->params));
	out->rets = tc_arena_alloc(ar, (size_t)(def->nrets + 1) * sizeof(*out->rets));
	out->stmts = tc_arena_alloc(ar, (size_t)(def->nstmts + 1) * sizeof(*out->stmts));
	if (!out->params || !out->rets || !out->stmts)
		return NULL;
	/* params are the inputs in order, rets the outputs */
	for (i = 0; i < def->nparams; i++)
		if (!v.batched[i])
			out->params[i] = def->params[i];
		else if (batch_decl(&v, &out->params[i], &def->params[i]) < 0)
			return NULL;
	for (i = 0; i < def->nrets; i++)
		if (!v.batched[def->ninputs + i] || !def->rets[i].has_shape)
			out->rets[i] = def->rets[i];
		else if (batch_decl(&v, &out->rets[i], &def->rets[i]) < 0)
			return NULL;
	for (i = 0; i < def->nstmts; i++) {
		const tc_stmt *s = def->stmts[i];
		if (!v.batched[s->tensor])
			out->stmts[i] = (tc_stmt *)s;
		else if (!(out->stmts[i] = batch_stmt(&v, i)))
			return NULL;
	}
	return tc_arena_failed(ar) ? NULL : out;
}
