/* Per-sample gradients (tcomp grad --per-sample B): the backward def that
 * tc_grad_derive builds, rewritten so that the gradients of the inputs
 * without a batch dimension (the parameters) keep the batch index instead
 * of summing over it, as functorch's vmap(grad) computes them (see grad.h;
 * docs/language.md section 14, "Per-sample gradients").
 *
 * The batch is a size B of the def.  An index variable of a statement
 * whose range is 0:B (it subscripts a dimension of extent exactly B, or
 * its where range says so) is the statement's batch index; a tensor with
 * a dimension of extent B is batched.  First the forward def is checked
 * to treat its samples independently (check_forward): no statement
 * reduces over a batch index or has two of them, every batched tensor is
 * read and written at the plain batch index in its batch dimensions, and
 * every floating-point output is batched.  Then the backward def is
 * printed, parsed and checked again (so that its statements have index
 * ranges and its temporaries extents), and rewritten in place:
 *
 *   - a tensor without a batch dimension becomes per-sample when a
 *     statement writing it reduces over a batch index or reads a tensor
 *     that is per-sample, until nothing changes (mark_per_sample);
 *   - every statement writing a per-sample tensor gets a batch index
 *     prepended to its left-hand side: its batch reduction index, or a
 *     fresh name (with the range 0:B where no read bounds it); a '+=!'
 *     (or another reduction with '!') left without a reduction index
 *     becomes '=', a scatter keeping its operator (rewrite_lhs);
 *   - every read of a per-sample tensor gets the statement's batch index
 *     as its first subscript (prepend_reads);
 *   - every output that became per-sample gets B prepended to its
 *     declared shape; a batched input's gradient keeps its shape (its row
 *     b is sample b's gradient already), and an output gradient that no
 *     sample reaches is an error.
 *
 * The result is printed and checked once more (an internal error if it
 * does not check).  The texts parsed here are sources of this file's own,
 * freed before it returns: the result's locations are of a text that is
 * gone, and no diagnostic may be rendered at them. */
#include "grad.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* The state of one rewriting. */
typedef struct ps_ctx {
	tc_arena *ar;
	const tc_def *def; /* the forward def */
	tc_diags *d;
	const char *batch; /* the batch size's name */
	int failed;        /* an error was reported */
} ps_ctx;

/* The number of the size named name in def, or -1. */
static int size_id(const tc_def *def, const char *name)
{
	int i;
	for (i = 0; i < def->nsizes; i++)
		if (!strcmp(def->sizes[i], name))
			return i;
	return -1;
}

/* Whether x is the size bid alone. */
static int is_batch_extent(const tc_sexpr *x, int bid)
{
	return x && x->kind == TC_SX_PARAM && x->id == bid;
}

/* Whether variable v ranges over 0:B (B the size bid). */
static int is_batch_var(const tc_stmt_var *v, int bid)
{
	int64_t lo;
	return tc_sx_is_const(v->lo, &lo) && lo == 0 && is_batch_extent(v->hi, bid);
}

/* Whether tensor t has a dimension of extent B. */
static int is_batched(const tc_tensor_info *t, int bid)
{
	int k;
	for (k = 0; k < t->ndim; k++)
		if (is_batch_extent(t->ext[k], bid))
			return 1;
	return 0;
}

/* ---- the forward def: samples must be independent ---- */

/* Report that dimension k of tensor t (of extent B) is subscripted by e,
 * not by the statement's batch index (how: "read" or "written"). */
static void not_plain(ps_ctx *ps, const tc_expr *e, const char *t, int k, const char *how)
{
	tc_buf b;
	tc_buf_init(&b);
	tc_ast_print_expr(e, &b);
	tc_error(ps->d, e->loc, "gradient: per-sample gradients need samples that are "
		"independent, but dimension %d of '%s' (the batch, 0:%s) is %s at '%s', not at "
		"the plain batch index", k + 1, t, ps->batch, how, b.s ? b.s : "");
	tc_buf_free_diag(&b, ps->d);
	ps->failed = 1;
}

/* Check the reads in e, an expression of statement s: every batched
 * tensor read at a batch index of s in its batch dimensions. */
static void check_reads(ps_ctx *ps, const tc_stmt *s, const tc_expr *e, int bid)
{
	int k;
	if (e->kind == TC_AST_CALL && e->ref == TC_REF_TENSOR) {
		const tc_tensor_info *ti = &ps->def->tensors[e->ref_id];
		for (k = 0; k < e->nargs && k < ti->ndim && !ps->failed; k++) {
			const tc_expr *a = e->args[k];
			if (!is_batch_extent(ti->ext[k], bid))
				continue;
			if (a->kind != TC_AST_IDENT || a->ref != TC_REF_INDEX ||
				!is_batch_var(&s->vars[a->ref_id], bid))
				not_plain(ps, a, ti->name, k, "read");
		}
	}
	for (k = 0; k < e->nargs && !ps->failed; k++)
		check_reads(ps, s, e->args[k], bid);
}

/* Check forward statement s: at most one batch index, not reduced over,
 * and batched tensors subscripted by it. */
static void check_stmt(ps_ctx *ps, const tc_stmt *s, int bid)
{
	const tc_tensor_info *ti = &ps->def->tensors[s->tensor];
	int v, k, first = -1;
	for (v = 0; v < s->nvars; v++) {
		if (!is_batch_var(&s->vars[v], bid))
			continue;
		if (s->vars[v].is_reduction) {
			tc_error(ps->d, s->vars[v].loc, "gradient: per-sample gradients need samples "
				"that are independent, but '%s' reduces over the batch index '%s' "
				"(0:%s), mixing samples", s->lhs, s->vars[v].name, ps->batch);
			ps->failed = 1;
			return;
		}
		if (first >= 0) {
			tc_error(ps->d, s->vars[v].loc, "gradient: per-sample gradients need samples "
				"that are independent, but '%s' and '%s' both range over the batch "
				"(0:%s) in this statement, mixing samples", s->vars[first].name,
				s->vars[v].name, ps->batch);
			ps->failed = 1;
			return;
		}
		first = v;
	}
	/* the left side: a batch dimension written at a batch index */
	for (k = 0; k < s->nidx && k < ti->ndim; k++) {
		int u;
		if (!is_batch_extent(ti->ext[k], bid))
			continue;
		if (s->sub && s->sub[k]) {
			not_plain(ps, s->sub[k], s->lhs, k, "written");
			return;
		}
		for (u = 0; u < s->nvars && strcmp(s->vars[u].name, s->idx[k]); u++)
			;
		if (u == s->nvars || !is_batch_var(&s->vars[u], bid)) {
			tc_error(ps->d, s->idx_loc[k], "gradient: per-sample gradients need samples "
				"that are independent, but dimension %d of '%s' (the batch, 0:%s) is "
				"written at '%s', which does not range over the whole batch", k + 1,
				s->lhs, ps->batch, s->idx[k]);
			ps->failed = 1;
			return;
		}
	}
	check_reads(ps, s, s->rhs, bid);
	for (k = 0; k < s->nidx && s->sub && !ps->failed; k++)
		if (s->sub[k])
			check_reads(ps, s, s->sub[k], bid);
	for (k = 0; k < s->nwhere && !ps->failed; k++)
		if (s->where[k].kind != TC_WHERE_RANGE)
			check_reads(ps, s, s->where[k].val, bid);
}

/* Check that the forward def treats its samples independently: each
 * statement (check_stmt), and every floating-point output batched. */
static void check_forward(ps_ctx *ps, int bid)
{
	const tc_def *def = ps->def;
	int i, t;
	for (i = 0; i < def->nstmts && !ps->failed; i++)
		check_stmt(ps, def->stmts[i], bid);
	for (t = def->ninputs; t < def->ninputs + def->noutputs && !ps->failed; t++) {
		const tc_tensor_info *ti = &def->tensors[t];
		if (tc_dtype_is_float(ti->dtype) && !is_batched(ti, bid)) {
			tc_error(ps->d, ti->loc, "gradient: per-sample gradients need samples that are "
				"independent, but output '%s' has no dimension of size '%s': it is not "
				"per sample", ti->name, ps->batch);
			ps->failed = 1;
		}
	}
}

/* ---- parsing a derived def back ---- */

/* def printed, parsed and checked into a def of ps->ar, or NULL: out of
 * memory (nothing reported) or an internal error (reported in ps->d: the
 * derivation printed a def that does not check). */
static tc_def *reparse(ps_ctx *ps, const tc_def *def)
{
	tc_buf b;
	tc_source *src = NULL;
	tc_program *p;
	tc_diags d;
	tc_def *out = NULL;
	int i;
	tc_buf_init(&b);
	tc_ast_print_source(def, NULL, NULL, &b);
	if (b.oom || !(src = tc_source_new("<per-sample>", b.s, b.len))) {
		tc_buf_free(&b);
		return NULL;
	}
	tc_buf_free(&b);
	tc_diags_init(&d, src);
	if (!(p = tc_parse(ps->ar, src, &d)))
		d.oom = 1; /* tc_parse fails only when out of memory */
	else if (!d.nerrors && !d.oom && tc_sema_check(p, &d) < 0 && !d.nerrors)
		d.oom = 1; /* failed without saying why: an allocation failed */
	if (p && !d.nerrors && !d.oom && !tc_arena_failed(ps->ar) && p->ndefs == 1)
		out = p->defs[0];
	else if (!d.oom && !tc_arena_failed(ps->ar)) {
		for (i = 0; i < d.n && d.v[i].sev != TC_SEV_ERROR; i++)
			;
		TC_ASSERT(!"the per-sample backward def checks");
		tc_error(ps->d, ps->def->name_loc, "gradient: internal error: the per-sample "
			"backward def of '%s' does not check (%s)", ps->def->name,
			i < d.n ? d.v[i].msg : "no def");
		ps->failed = 1;
	}
	tc_diags_clear(&d);
	tc_source_free(src);
	return out;
}

/* ---- the rewriting ---- */

/* The rewriting of one (checked) backward def b. */
typedef struct ps_def {
	tc_def *b;
	int bid;      /* B's number among b's sizes */
	int *batched; /* per tensor of b: it has a dimension of extent B */
	int *ps;      /* per tensor of b: it becomes per-sample */
} ps_def;

/* The first reduction index of s that ranges over the batch, or -1. */
static int batch_reduction(const ps_def *pd, const tc_stmt *s)
{
	int v;
	for (v = 0; v < s->nvars; v++)
		if (s->vars[v].is_reduction && is_batch_var(&s->vars[v], pd->bid))
			return v;
	return -1;
}

/* Mark the tensors without a batch dimension that become per-sample: those
 * written by a statement that reduces over a batch index or reads a
 * per-sample tensor, until nothing changes (a temporary summed over the
 * batch makes what reads it per-sample, whatever the order). */
static void mark_per_sample(ps_def *pd)
{
	const tc_def *b = pd->b;
	int i, changed;
	do {
		changed = 0;
		for (i = 0; i < b->nstmts; i++) {
			const tc_stmt *s = b->stmts[i];
			if (pd->batched[s->tensor] || pd->ps[s->tensor])
				continue;
			if (batch_reduction(pd, s) >= 0 || tc_stmt_reads_marked(s, pd->ps)) {
				pd->ps[s->tensor] = 1;
				changed = 1;
			}
		}
	} while (changed);
}

/* A new identifier node name, an index variable. */
static tc_expr *mk_ident(tc_arena *ar, const char *name)
{
	tc_expr *e = tc_arena_alloc(ar, sizeof(*e));
	if (!e)
		return NULL;
	e->kind = TC_AST_IDENT;
	e->name = name;
	e->ref = TC_REF_INDEX;
	e->depth = 1;
	return e;
}

/* e with every read of a per-sample tensor given the index bv as its first
 * subscript (the nodes are b's own, changed in place); 0 or -1. */
static int prepend_reads(ps_ctx *ps, const ps_def *pd, tc_expr *e, const char *bv)
{
	int i;
	for (i = 0; i < e->nargs; i++)
		if (prepend_reads(ps, pd, e->args[i], bv) < 0)
			return -1;
	if ((e->kind == TC_AST_CALL || e->kind == TC_AST_IDENT) && e->ref == TC_REF_TENSOR &&
		pd->ps[e->ref_id]) {
		tc_expr **args = tc_arena_alloc(ps->ar, (size_t)(e->nargs + 1) * sizeof(*args));
		if (!args || !(args[0] = mk_ident(ps->ar, bv)))
			return -1;
		for (i = 0; i < e->nargs; i++)
			args[i + 1] = e->args[i];
		e->kind = TC_AST_CALL; /* a scalar's read T becomes T(b) */
		e->args = args;
		e->nargs++;
	}
	return 0;
}

/* Whether name is a name of b (a size or tensor) or of statement s (an
 * index, let or where-range name). */
static int name_taken(const tc_def *b, const tc_stmt *s, const char *name)
{
	int i;
	for (i = 0; i < b->ntensors; i++)
		if (!strcmp(b->tensors[i].name, name))
			return 1;
	for (i = 0; i < b->nsizes; i++)
		if (!strcmp(b->sizes[i], name))
			return 1;
	for (i = 0; i < s->nvars; i++)
		if (!strcmp(s->vars[i].name, name))
			return 1;
	for (i = 0; i < s->nwhere; i++)
		if (s->where[i].name && !strcmp(s->where[i].name, name))
			return 1;
	return 0;
}

/* A batch index name for statement s that has none: B's name in lower
 * case ("b" for B), or with _2, _3, ... appended where s or b uses it. */
static const char *fresh_index(ps_ctx *ps, const tc_def *b, const tc_stmt *s)
{
	char base[64], buf[96];
	size_t i;
	int k;
	snprintf(base, sizeof(base), "%s", ps->batch);
	for (i = 0; base[i]; i++)
		base[i] = (char)tolower((unsigned char)base[i]);
	snprintf(buf, sizeof(buf), "%s", base);
	for (k = 2; name_taken(b, s, buf) && k < 1000; k++)
		snprintf(buf, sizeof(buf), "%s_%d", base, k);
	return tc_arena_strdup(ps->ar, buf);
}

/* Make statement s, which writes a per-sample tensor, write it at the
 * batch index prepended: its batch reduction index, or a fresh name
 * (bounded by a where range 0:B when no per-sample read bounds it); an
 * operator with '!' left without reduction indices becomes '='.  *bv gets
 * the index name.  0 or -1 (out of memory). */
static int rewrite_lhs(ps_ctx *ps, const ps_def *pd, tc_stmt *s, const char **bv)
{
	int r = batch_reduction(pd, s), v, nred = 0, k;
	const char **idx;
	tc_loc *loc;
	if (r >= 0) {
		*bv = s->vars[r].name;
	} else if (!(*bv = fresh_index(ps, pd->b, s))) {
		return -1;
	} else if (!tc_stmt_reads_marked(s, pd->ps)) {
		tc_where *w = tc_arena_alloc(ps->ar, (size_t)(s->nwhere + 1) * sizeof(*w));
		tc_expr *lo = tc_arena_alloc(ps->ar, sizeof(*lo));
		tc_expr *hi = mk_ident(ps->ar, pd->b->sizes[pd->bid]);
		if (!w || !lo || !hi)
			return -1;
		lo->kind = TC_AST_INT;
		lo->depth = 1;
		hi->ref = TC_REF_SIZE;
		w[0].kind = TC_WHERE_RANGE;
		w[0].name = *bv;
		w[0].lo = lo;
		w[0].hi = hi;
		if (s->nwhere)
			memcpy(w + 1, s->where, (size_t)s->nwhere * sizeof(*w));
		s->where = w;
		s->nwhere++;
	}
	idx = tc_arena_alloc(ps->ar, (size_t)(s->nidx + 1) * sizeof(*idx));
	loc = tc_arena_alloc(ps->ar, (size_t)(s->nidx + 1) * sizeof(*loc));
	if (!idx || !loc)
		return -1;
	idx[0] = *bv;
	for (k = 0; k < s->nidx; k++) {
		idx[k + 1] = s->idx[k];
		loc[k + 1] = s->idx_loc ? s->idx_loc[k] : loc[0];
	}
	if (s->sub) {
		tc_expr **sub = tc_arena_alloc(ps->ar, (size_t)(s->nidx + 1) * sizeof(*sub));
		if (!sub)
			return -1;
		for (k = 0; k < s->nidx; k++)
			sub[k + 1] = s->sub[k];
		s->sub = sub;
	}
	s->idx = idx;
	s->idx_loc = loc;
	s->nidx++;
	for (v = 0; v < s->nvars; v++)
		nred += s->vars[v].is_reduction && v != r;
	/* a scatter keeps its operator: several terms may meet at an element */
	if (!nred && s->init && !s->sub) {
		s->red = TC_RED_ASSIGN;
		s->init = 0;
	}
	return 0;
}

/* The batch index of statement s, which writes a tensor that is not
 * per-sample and reads one that is: its one variable ranging over the
 * batch; NULL (an internal error reported) when it has none or several. */
static const char *own_batch_index(ps_ctx *ps, const ps_def *pd, const tc_stmt *s)
{
	const char *bv = NULL;
	int v;
	for (v = 0; v < s->nvars; v++) {
		if (!is_batch_var(&s->vars[v], pd->bid))
			continue;
		if (bv) {
			bv = NULL;
			break;
		}
		bv = s->vars[v].name;
	}
	if (!TC_ASSERT(bv)) {
		tc_error(ps->d, ps->def->name_loc, "gradient: internal error: the backward "
			"statement writing '%s' reads a per-sample tensor without one batch index",
			s->lhs);
		ps->failed = 1;
	}
	return bv;
}

/* Rewrite statement s of the backward def; 0 or -1 (out of memory or an
 * error reported). */
static int rewrite_stmt(ps_ctx *ps, const ps_def *pd, tc_stmt *s)
{
	const char *bv = NULL;
	int k, reads = tc_stmt_reads_marked(s, pd->ps);
	if (pd->ps[s->tensor]) {
		if (rewrite_lhs(ps, pd, s, &bv) < 0)
			return -1;
	} else if (reads && !(bv = own_batch_index(ps, pd, s))) {
		return -1;
	}
	if (!reads)
		return 0;
	if (prepend_reads(ps, pd, s->rhs, bv) < 0)
		return -1;
	for (k = 0; s->sub && k < s->nidx; k++)
		if (s->sub[k] && prepend_reads(ps, pd, s->sub[k], bv) < 0)
			return -1;
	for (k = 0; k < s->nwhere; k++)
		if (s->where[k].kind != TC_WHERE_RANGE && prepend_reads(ps, pd, s->where[k].val, bv) < 0)
			return -1;
	return 0;
}

/* The input of the forward def whose gradient is output o of the backward
 * def (named d_X, or d_X_2, ...), looked for from input *from on (the
 * outputs follow the inputs' order); its number or -1. */
static int input_of(const ps_ctx *ps, const char *o, int *from)
{
	int t;
	for (t = *from; t < ps->def->ninputs; t++) {
		const char *x = ps->def->tensors[t].name;
		size_t n = strlen(x);
		const char *p = o + 2 + n;
		if (strncmp(o, "d_", 2) || strncmp(o + 2, x, n))
			continue;
		if (*p == '_')
			for (p++; *p >= '0' && *p <= '9'; p++)
				;
		if (!*p) {
			*from = t + 1;
			return t;
		}
	}
	return -1;
}

/* Rewrite the checked backward def b (in place) as the rule says (this
 * file's head comment); 0, or -1 (out of memory, or an error reported). */
static int rewrite_def(ps_ctx *ps, tc_def *b)
{
	ps_def pd = {0};
	int t, i, from = 0;
	pd.b = b;
	pd.bid = size_id(b, ps->batch);
	if (!TC_ASSERT(pd.bid >= 0)) {
		tc_error(ps->d, ps->def->name_loc, "gradient: internal error: the backward def "
			"of '%s' has no size '%s'", ps->def->name, ps->batch);
		ps->failed = 1;
		return -1;
	}
	pd.batched = tc_arena_alloc(ps->ar, (size_t)(b->ntensors + 1) * sizeof(int));
	pd.ps = tc_arena_alloc(ps->ar, (size_t)(b->ntensors + 1) * sizeof(int));
	if (!pd.batched || !pd.ps)
		return -1;
	for (t = 0; t < b->ntensors; t++)
		pd.batched[t] = is_batched(&b->tensors[t], pd.bid);
	mark_per_sample(&pd);
	/* the gradients asked for: batched, or made per-sample */
	for (i = 0; i < b->nrets; i++) {
		t = b->ninputs + i;
		if (pd.batched[t] || pd.ps[t])
			continue;
		{
			int x = input_of(ps, b->tensors[t].name, &from);
			tc_error(ps->d, x >= 0 ? ps->def->tensors[x].loc : ps->def->name_loc,
				"gradient: per-sample: the gradient of '%s' does not depend on the batch "
				"'%s' (no sample's output reads it), so it has no per-sample value",
				x >= 0 ? ps->def->tensors[x].name : b->tensors[t].name, ps->batch);
			ps->failed = 1;
		}
	}
	if (ps->failed)
		return -1;
	for (i = 0; i < b->nstmts; i++)
		if (rewrite_stmt(ps, &pd, b->stmts[i]) < 0)
			return -1;
	/* the per-sample outputs' shapes: B first */
	for (i = 0; i < b->nrets; i++) {
		tc_decl *r = &b->rets[i];
		tc_dim *dims;
		if (!pd.ps[b->ninputs + i])
			continue;
		if (!(dims = tc_arena_alloc(ps->ar, (size_t)(r->ndims + 1) * sizeof(*dims))))
			return -1;
		dims[0].name = b->sizes[pd.bid];
		if (r->ndims)
			memcpy(dims + 1, r->dims, (size_t)r->ndims * sizeof(*dims));
		r->dims = dims;
		r->ndims++;
		r->has_shape = 1;
	}
	return 0;
}

__tc_give tc_def *tc_grad_per_sample(__tc_keep tc_arena *ar, __tc_keep const tc_def *def,
	__tc_keep const tc_def *bwd, __tc_keep const char *batch, __tc_keep tc_diags *d)
{
	ps_ctx ps = {0};
	tc_def *b, *out;
	int bid;
	ps.ar = ar;
	ps.def = def;
	ps.d = d;
	ps.batch = batch;
	if ((bid = size_id(def, batch)) < 0) {
		tc_buf sb;
		int i;
		tc_buf_init(&sb);
		for (i = 0; i < def->nsizes; i++)
			tc_buf_printf(&sb, "%s%s", i ? ", " : "", def->sizes[i]);
		tc_error(d, def->name_loc, "gradient: per-sample: '%s' is not a size of '%s' (its "
			"sizes: %s)", batch, def->name, sb.s ? sb.s : "none");
		tc_buf_free_diag(&sb, d);
		return NULL;
	}
	check_forward(&ps, bid);
	if (ps.failed || !(b = reparse(&ps, bwd)) || rewrite_def(&ps, b) < 0)
		return NULL;
	/* the rewritten def must check, as every derived def does */
	if (!(out = reparse(&ps, b)))
		return NULL;
	return out;
}
