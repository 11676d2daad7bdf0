/* The derived statements of a derivation (see grad.c) and the adjoints
 * of reads that are not plain: the values that reads name, statements with
 * the where clauses and lets they need (mk_stmt, attach_where), fresh
 * names; affine subscripts solved into a gather (gather_stmt), gathered or
 * unsolvable ones into a guarded scatter (scatter_stmt), the conditions
 * under which the forward reads them (path_cond). */
#include "grad_internal.h"

#include <stdio.h>
#include <string.h>

/* ---- values read, derived statements ---- */

/* The value a read of a statement in g->ss names (by its name). */
int tc_grad_val_of_read(const grad_ctx *g, const tc_expr *e)
{
	int t = e->ref_id, v;
	if (g->nver[t] == 1)
		return t;
	for (v = 0; v < g->nval; v++)
		if (g->val_t[v] == t && !strcmp(g->vname[v], e->name))
			return v;
	return t;
}

/* Whether value v is computed inside the backward def when it needs it (a
 * temporary, or an earlier version of a tensor) rather than given. */
static int temp_like(const grad_ctx *g, int v)
{
	return g->def->tensors[g->val_t[v]].kind == TC_TENSOR_TEMP || !g->final[v];
}

/* The backward def needs value v: recomputed (or saved) or, for the final
 * value of an output, an input. */
void tc_grad_use_value(grad_ctx *g, int v)
{
	if (g->def->tensors[g->val_t[v]].kind == TC_TENSOR_INPUT)
		return;
	if (temp_like(g, v))
		g->recompute[v] = 1;
	else
		g->save[v] = 1;
}

/* Whether variable v of s ranges over exactly 0:ext. */
int tc_grad_covers(const tc_stmt *s, int v, const tc_sexpr *ext)
{
	int64_t lo;
	return tc_sx_is_const(s->vars[v].lo, &lo) && lo == 0 && tc_sx_equal(s->vars[v].hi, ext);
}

/* Whether the index variable name is bounded by a read in e (a subscript
 * of a tensor read). */
int tc_grad_bounded_in(const tc_expr *e, const char *name)
{
	int i;
	/* a read of the forward def, or an adjoint read built here (no ref) */
	if (e->kind == TC_AST_CALL && e->ref != TC_REF_BUILTIN) {
		for (i = 0; i < e->nargs; i++)
			if (e->args[i]->kind == TC_AST_IDENT && !strcmp(e->args[i]->name, name))
				return 1;
		return 0;
	}
	for (i = 0; i < e->nargs; i++)
		if (tc_grad_bounded_in(e->args[i], name))
			return 1;
	return 0;
}

/* Mark the forward values read in e (a text with values' names): the
 * temporaries for recomputation, the outputs as inputs of the backward. */
void tc_grad_mark_temps(grad_ctx *g, const tc_expr *e)
{
	int i;
	if ((e->kind == TC_AST_CALL || e->kind == TC_AST_IDENT) && e->ref == TC_REF_TENSOR)
		tc_grad_use_value(g, tc_grad_val_of_read(g, e));
	for (i = 0; i < e->nargs; i++)
		tc_grad_mark_temps(g, e->args[i]);
}

/* Mark the lets of g->cur that e reads, directly or through other lets. */
void tc_grad_mark_lets(grad_ctx *g, const tc_expr *e)
{
	int i;
	if (e->kind == TC_AST_IDENT && e->ref == TC_REF_LET && !g->let_used[e->ref_id]) {
		g->let_used[e->ref_id] = 1;
		tc_grad_mark_lets(g, g->cur->where[e->ref_id].val);
	}
	for (i = 0; i < e->nargs; i++)
		tc_grad_mark_lets(g, e->args[i]);
}

tc_stmt *tc_grad_mk_stmt(grad_ctx *g, const char *lhs, int nidx, const char **idx, tc_red red,
	int init, tc_expr *rhs)
{
	tc_stmt *b = tc_arena_alloc(g->ar, sizeof(*b));
	if (!b)
		return NULL;
	b->lhs = lhs;
	b->nidx = nidx;
	b->idx = idx;
	b->red = red;
	b->init = init;
	b->rhs = rhs;
	return b;
}

/* Give b the where ranges and exists clauses of g->cur, the lets marked
 * in g->let_used, and ranges for the nextra variables extra[] of g->cur
 * (their ranges in g->cur); the forward temporaries they read are
 * recomputed. */
int tc_grad_attach_where(grad_ctx *g, tc_stmt *b, int nextra, const int *extra)
{
	const tc_stmt *s = g->cur;
	int v;
	for (v = 0; v < s->nwhere; v++)
		b->nwhere += s->where[v].kind != TC_WHERE_LET || g->let_used[v];
	b->nwhere += nextra;
	if (b->nwhere && !(b->where = tc_arena_alloc(g->ar, (size_t)b->nwhere * sizeof(tc_where))))
		return -1;
	b->nwhere = 0;
	for (v = 0; v < nextra; v++) {
		tc_where *w = &b->where[b->nwhere++];
		w->kind = TC_WHERE_RANGE;
		w->name = s->vars[extra[v]].name;
		w->lo = tc_grad_sx_expr(g, s, s->vars[extra[v]].lo);
		w->hi = tc_grad_sx_expr(g, s, s->vars[extra[v]].hi);
		if (!w->lo || !w->hi)
			return -1;
	}
	for (v = 0; v < s->nwhere; v++)
		if (s->where[v].kind != TC_WHERE_LET || g->let_used[v]) {
			b->where[b->nwhere++] = s->where[v];
			if (s->where[v].kind != TC_WHERE_RANGE)
				tc_grad_mark_temps(g, s->where[v].val);
		}
	return 0;
}

/* Whether the index name of g->cur has a where range, or is bounded by a
 * read in a let marked used. */
int tc_grad_bounded_where(grad_ctx *g, const char *name)
{
	int i;
	for (i = 0; i < g->cur->nwhere; i++) {
		const tc_where *w = &g->cur->where[i];
		if (w->kind == TC_WHERE_RANGE && !strcmp(w->name, name))
			return 1;
		if ((w->kind == TC_WHERE_EXISTS || (w->kind == TC_WHERE_LET && g->let_used[i])) &&
			tc_grad_bounded_in(w->val, name))
			return 1;
	}
	return 0;
}

/* Whether name is a tensor or size name of the def. */
int tc_grad_name_taken(const tc_def *def, const char *name)
{
	int i;
	for (i = 0; i < def->ntensors; i++)
		if (!strcmp(def->tensors[i].name, name))
			return 1;
	for (i = 0; i < def->nsizes; i++)
		if (!strcmp(def->sizes[i], name))
			return 1;
	return 0;
}

/* ---- reads that are not plain: gathers and scatters ---- */

/* The state of one gather: substitutions of solved variables. */
typedef struct gather {
	int nv;             /* the variables of g->cur, then one per dimension */
	const char **names; /* their names */
	aff **sub;          /* per variable of g->cur: its value, or NULL */
	/* per variable of g->cur: a summed variable that the gather pins to
	 * one value, floor(pin_num[v] / pin_s[v]) (pin_s[v] > 0), or none (0) */
	aff **pin_num;
	int64_t *pin_s;
	int *pin_src;       /* per variable: 1 + the variable its range pins, or 0 */
	/* per dimension of the read: s where its subscript is e / s (a floor
	 * division by a constant), whose adjoint sums the tap t (the variable
	 * nv - nd + d) over 0:s, e = s * y + t; else 0 */
	int64_t *tap;
} gather;

static tc_expr *aff_expr(grad_ctx *g, const aff *a, const char *const *names, int nv,
	const gather *ga);

/* Variable v of a gather pinned to one value: (num) / s, floor division. */
static tc_expr *pinned_expr(grad_ctx *g, const gather *ga, int v)
{
	tc_expr *num = aff_expr(g, ga->pin_num[v], ga->names, ga->nv, NULL);
	return num ? tc_grad_mk_bin(g, TC_AOP_DIV, num, tc_grad_mk_int(g, ga->pin_s[v])) : NULL;
}

/* The value of a variable u whose range pins variable v = u's pin_src - 1:
 * lo + (num % s), floor modulo, with v's num and s and u's lower bound. */
static tc_expr *pin_source_expr(grad_ctx *g, const gather *ga, int u)
{
	int v = ga->pin_src[u] - 1;
	const tc_sexpr *lo = g->cur->vars[u].lo;
	tc_expr *num = aff_expr(g, ga->pin_num[v], ga->names, ga->nv, NULL), *e;
	int64_t k;
	if (!num)
		return NULL;
	e = tc_grad_mk_bin(g, TC_AOP_MOD, num, tc_grad_mk_int(g, ga->pin_s[v]));
	return tc_sx_is_const(lo, &k) && k == 0 ? e
		: tc_grad_mk_bin(g, TC_AOP_ADD, tc_grad_sx_expr(g, g->cur, lo), e);
}

/* a as text, with names[v] for variable v, or the value it is pinned to,
 * or that of a variable whose range pins another (ga may be NULL: nothing
 * pinned). */
static tc_expr *aff_expr(grad_ctx *g, const aff *a, const char *const *names, int nv,
	const gather *ga)
{
	tc_expr *r = NULL;
	int64_t k;
	int v, pass;
	/* positive terms first: h - kh rather than -kh + h */
	for (pass = 0; pass < 2; pass++)
	for (v = 0; v < nv; v++) {
		int64_t c = a->c[v];
		tc_expr *t;
		if (!c || (pass == 0) != (c > 0))
			continue;
		if (ga && v < g->cur->nvars && ga->pin_s[v])
			t = pinned_expr(g, ga, v);
		else if (ga && v < g->cur->nvars && ga->pin_src[v])
			t = pin_source_expr(g, ga, v);
		else
			t = tc_grad_mk_ident(g, names[v]);
		if (!t)
			return NULL;
		if (c != 1 && c != -1)
			t = tc_grad_mk_bin(g, TC_AOP_MUL, tc_grad_mk_int(g, c < 0 ? -c : c), t);
		if (!r)
			r = c < 0 ? tc_grad_mk_neg(g, t) : t;
		else
			r = tc_grad_mk_bin(g, c < 0 ? TC_AOP_SUB : TC_AOP_ADD, r, t);
	}
	if (tc_sx_is_const(a->k, &k)) {
		if (!r)
			return tc_grad_mk_int(g, k);
		if (k)
			r = tc_grad_mk_bin(g, k < 0 ? TC_AOP_SUB : TC_AOP_ADD, r,
				tc_grad_mk_int(g, k < 0 ? -k : k));
		return r;
	}
	return r ? tc_grad_mk_bin(g, TC_AOP_ADD, r,
		tc_grad_sx_expr(g, NULL, a->k)) : tc_grad_sx_expr(g, NULL, a->k);
}

/* Whether a is s * b + t, with t the tap of a dimension divided by s
 * (coefficient 1) and b affine: then floor(a / s) is b, set in *q, and a
 * mod s is t, the variable *tap.  1, 0, or -1 when out of memory. */
static int tap_quotient(grad_ctx *g, const gather *ga, const aff *a, int64_t s, aff *q,
	int *tap_var)
{
	int nd = (ga->nv - g->cur->nvars) / 2, u, taps = 0;
	int64_t k;
	for (u = 0; u < ga->nv; u++) {
		int tap = u >= ga->nv - nd && ga->tap[u - (ga->nv - nd)];
		if (tap && a->c[u] == 1 && ga->tap[u - (ga->nv - nd)] == s)
			taps++, *tap_var = u;
		else if (a->c[u] % s)
			return 0;
	}
	if (taps != 1 || !tc_sx_is_const(a->k, &k) || k % s)
		return 0;
	if (tc_grad_aff_init(g, q, ga->nv) < 0)
		return -1;
	for (u = 0; u < ga->nv; u++)
		q->c[u] = a->c[u] == 1 ? 0 : a->c[u] / s;
	q->k = tc_sx_const(g->ar, k / s);
	return q->k ? 1 : -1;
}

/* a with the solved variables of ga (not those whose range pins another)
 * replaced by their values. */
static void substitute_solved(grad_ctx *g, const gather *ga, aff *a)
{
	int v;
	for (v = 0; v < g->cur->nvars; v++)
		if (ga->sub[v] && a->c[v] && !ga->pin_src[v]) {
			int64_t m = a->c[v];
			a->c[v] = 0;
			tc_grad_aff_add(g, a, ga->sub[v], m, ga->nv);
		}
}

/* e (a part of a derivative of g->cur) with the solved variables
 * replaced by their values, lets inlined. */
static tc_expr *gather_expr(grad_ctx *g, gather *ga, tc_expr *e)
{
	tc_expr *c;
	int i, v;
	if (e->kind == TC_AST_IDENT && e->ref == TC_REF_LET)
		return gather_expr(g, ga, g->cur->where[e->ref_id].val);
	if (e->kind == TC_AST_IDENT && (v = tc_grad_var_of(g->cur, e->name)) >= 0 &&
		(e->ref == TC_REF_INDEX || e->ref == TC_REF_NONE))
		return ga->pin_src[v] ? pin_source_expr(g, ga, v)
			: ga->sub[v]   ? aff_expr(g, ga->sub[v], ga->names, ga->nv, ga)
			: ga->pin_s[v] ? pinned_expr(g, ga, v)
				       : e;
	if (!e->nargs)
		return e;
	/* (s * y + t) / s, t a tap of 0:s, is y, and (s * y + t) % s is t (the
	 * forward's read A(i / 2) at i = 2 * y + t, in the derivative of
	 * A(i / 2) * A(i / 2); a test i % 2 == 0) */
	if (e->kind == TC_AST_BINARY && (e->op == TC_AOP_DIV || e->op == TC_AOP_MOD) &&
		tc_dtype_is_int(e->type) && e->args[1]->kind == TC_AST_INT && e->args[1]->ival >= 2) {
		aff a, q;
		int t = -1;
		if (tc_grad_aff_of(g, e->args[0], &a, ga->nv) == 0) {
			substitute_solved(g, ga, &a);
			if (tap_quotient(g, ga, &a, e->args[1]->ival, &q, &t) > 0)
				return e->op == TC_AOP_DIV ? aff_expr(g, &q, ga->names, ga->nv, ga)
					: tc_grad_mk_ident(g, ga->names[t]);
		}
	}
	/* an affine integer expression of the indices (a subscript in a
	 * test of pad's, diff_pad) with the solutions substituted, simplified:
	 * i + 2, not (i + 1) + 1 */
	if ((e->kind == TC_AST_BINARY || e->kind == TC_AST_UNARY) && tc_dtype_is_int(e->type)) {
		aff a;
		if (tc_grad_aff_of(g, e, &a, ga->nv) == 0) {
			substitute_solved(g, ga, &a);
			return aff_expr(g, &a, ga->names, ga->nv, ga);
		}
	}
	if (!(c = tc_arena_alloc(g->ar, sizeof(*c))) ||
		!(c->args = tc_arena_alloc(g->ar, (size_t)e->nargs * sizeof(*c->args))))
		return e;
	{
		tc_expr **args = c->args;
		*c = *e;
		c->args = args;
	}
	for (i = 0; i < e->nargs; i++) {
		aff a;
		if (e->kind == TC_AST_CALL && e->ref != TC_REF_BUILTIN &&
			tc_grad_aff_of(g, e->args[i], &a, ga->nv) == 0) {
			substitute_solved(g, ga, &a);
			c->args[i] = aff_expr(g, &a, ga->names, ga->nv, ga);
		} else {
			c->args[i] = gather_expr(g, ga, e->args[i]);
		}
	}
	return c;
}

/* Whether a read of the tensor named name is a factor of the product e
 * (the only read of it in e). */
static int factor_read(const tc_expr *e, const char *name)
{
	if (e->kind == TC_AST_BINARY && e->op == TC_AOP_MUL)
		return (factor_read(e->args[0], name) && !tc_grad_reads_name(e->args[1], name)) ||
			(factor_read(e->args[1], name) && !tc_grad_reads_name(e->args[0], name));
	return (e->kind == TC_AST_CALL || e->kind == TC_AST_IDENT) && e->name &&
		e->ref != TC_REF_BUILTIN && !strcmp(e->name, name);
}

/* e with its reads of the tensor named name written pad(read, 0.0). */
static tc_expr *pad_reads(grad_ctx *g, tc_expr *e, const char *name)
{
	tc_expr *c;
	int i;
	if ((e->kind == TC_AST_CALL || e->kind == TC_AST_IDENT) && e->ref != TC_REF_BUILTIN &&
		e->ref != TC_REF_PAD && e->name && !strcmp(e->name, name))
		return (c = tc_grad_mk_pad(g, e)) ? c : e;
	if (!e->nargs || !(c = tc_arena_alloc(g->ar, sizeof(*c))))
		return e;
	*c = *e;
	if (!(c->args = tc_arena_alloc(g->ar, (size_t)e->nargs * sizeof(*c->args))))
		return e;
	for (i = 0; i < e->nargs; i++)
		c->args[i] = pad_reads(g, e->args[i], name);
	return c;
}

int tc_grad_mentions(const tc_expr *e, const char *name)
{
	int i;
	if (!e)
		return 0;
	if (e->kind == TC_AST_IDENT && e->name && !strcmp(e->name, name))
		return 1;
	for (i = 0; i < e->nargs; i++)
		if (tc_grad_mentions(e->args[i], name))
			return 1;
	return 0;
}

/* Whether the read e (of a tensor of the forward def) may leave its
 * tensor where the index name ranges over 0:ext: a subscript that
 * mentions name is not name alone, or is name at a dimension that the
 * sizes do not show to be at least ext long. */
static int may_leave(grad_ctx *g, const tc_expr *e, const char *name, const tc_sexpr *ext)
{
	int k;
	if (e->ref_id < 0 || e->ref_id >= g->def->ntensors ||
		strcmp(g->def->tensors[e->ref_id].name, e->name))
		return 1;
	for (k = 0; k < e->nargs; k++) {
		const tc_sexpr *d;
		if (!tc_grad_mentions(e->args[k], name))
			continue;
		if (e->args[k]->kind != TC_AST_IDENT)
			return 1;
		d = tc_sx_sub(g->ar, g->def->tensors[e->ref_id].ext[k], ext);
		if (!d || tc_sx_sign(d) != 1)
			return 1;
	}
	return 0;
}

/* e with its floating-point reads, but those of the tensor named skip,
 * whose subscripts mention the index name (ranging over 0:ext) and may
 * leave their tensors there written pad(read, 0.0) (not inside a pad
 * already, nor in subscripts). */
static tc_expr *pad_reads_at(grad_ctx *g, tc_expr *e, const char *skip, const char *name,
	const tc_sexpr *ext)
{
	tc_expr *c;
	int i;
	if (e->kind == TC_AST_CALL && e->ref == TC_REF_PAD)
		return e;
	if (e->kind == TC_AST_CALL && e->ref != TC_REF_BUILTIN) {
		if (e->name && strcmp(e->name, skip) && tc_dtype_is_float(e->type) &&
			tc_grad_mentions(e, name) && may_leave(g, e, name, ext))
			return (c = tc_grad_mk_pad(g, e)) ? c : e;
		return e;
	}
	if (!e->nargs || !(c = tc_arena_alloc(g->ar, sizeof(*c))))
		return e;
	*c = *e;
	if (!(c->args = tc_arena_alloc(g->ar, (size_t)e->nargs * sizeof(*c->args))))
		return e;
	for (i = 0; i < e->nargs; i++)
		c->args[i] = pad_reads_at(g, e->args[i], skip, name, ext);
	return c;
}

/* Whether the read r's subscripts are distinct index variables. */
int tc_grad_plain_read(const grad_ctx *g, const tc_expr *r)
{
	int i, j;
	for (i = 0; i < r->nargs; i++) {
		if (r->args[i]->kind != TC_AST_IDENT ||
			tc_grad_var_of(g->cur, r->args[i]->name) < 0)
			return 0;
		for (j = 0; j < i; j++)
			if (!strcmp(r->args[j]->name, r->args[i]->name))
				return 0;
	}
	return 1;
}

/* Whether e reads a tensor (or an adjoint). */
int tc_grad_reads_any(const tc_expr *e)
{
	int i;
	if (e->kind == TC_AST_CALL && e->ref != TC_REF_BUILTIN)
		return 1;
	if (e->kind == TC_AST_IDENT && e->ref == TC_REF_TENSOR)
		return 1;
	for (i = 0; i < e->nargs; i++)
		if (tc_grad_reads_any(e->args[i]))
			return 1;
	return 0;
}

/* Whether the plain read r of tensor x stays within x: each variable's
 * range is provably inside its dimension. */
int tc_grad_read_within(grad_ctx *g, const tc_expr *r, int x)
{
	const tc_stmt *s = g->cur;
	int i;
	for (i = 0; i < r->nargs; i++) {
		const tc_stmt_var *v = &s->vars[tc_grad_var_of(s, r->args[i]->name)];
		if (tc_sx_sign(v->lo) != 1 ||
			tc_sx_sign(tc_sx_sub(g->ar, g->def->tensors[x].ext[i], v->hi)) != 1)
			return 0;
	}
	return 1;
}

/* A name for a new index variable of the derived statement: base, or base
 * with a number, not used by g->cur's variables, the def or names[0..n). */
static const char *fresh_index(grad_ctx *g, const char *base, const char *const *names, int n)
{
	char buf[64];
	int k, i, taken;
	for (k = 0; k < 1000; k++) {
		if (k)
			snprintf(buf, sizeof(buf), "%s%d", base, k);
		else
			snprintf(buf, sizeof(buf), "%s", base);
		taken = tc_grad_var_of(g->cur, buf) >= 0 || tc_grad_name_taken(g->def, buf);
		for (i = 0; i < n && !taken; i++)
			taken = names[i] && !strcmp(names[i], buf);
		if (!taken)
			return tc_arena_strdup(g->ar, buf);
	}
	return NULL;
}

/* Whether the solution sol of variable v of s is the new index y alone and
 * v ranges over 0:ext, the whole dimension y ranges over. */
static int is_plain_dim(grad_ctx *g, const aff *sol, int y, const tc_stmt *s, int v,
	const tc_sexpr *ext)
{
	int64_t k;
	int u;
	(void)g;
	for (u = 0; u < y + 1; u++)
		if (sol->c[u] != (u == y))
			return 0;
	return tc_sx_is_const(sol->k, &k) && k == 0 && tc_grad_covers(s, v, ext);
}

/* Whether the read r has a gathered subscript (one that reads a tensor). */
int tc_grad_gathered_read(grad_ctx *g, const tc_expr *r)
{
	int d;
	(void)g;
	for (d = 0; d < r->nargs; d++)
		if (tc_grad_reads_any(r->args[d]))
			return 1;
	return 0;
}

/* Whether e uses an index variable of g->cur (through lets). */
static int uses_var(grad_ctx *g, const tc_expr *e)
{
	int i;
	if (e->kind == TC_AST_IDENT && e->ref == TC_REF_LET)
		return uses_var(g, g->cur->where[e->ref_id].val);
	if (e->kind == TC_AST_IDENT && e->ref != TC_REF_SIZE &&
		tc_grad_var_of(g->cur, e->name) >= 0)
		return 1;
	for (i = 0; i < e->nargs; i++)
		if (uses_var(g, e->args[i]))
			return 1;
	return 0;
}

/* Whether the subscript e is an index variable shifted by sizes and
 * constants (i + 1, i - N, 1 + i), which a scatter's left side may not
 * be (sema's rule, docs/language.md 5.5). */
static int shift_form(grad_ctx *g, const tc_expr *e)
{
	const tc_expr *a, *b;
	if (e->kind != TC_AST_BINARY || (e->op != TC_AOP_ADD && e->op != TC_AOP_SUB))
		return 0;
	a = e->args[0];
	b = e->args[1];
	if (a->kind == TC_AST_IDENT && tc_grad_var_of(g->cur, a->name) >= 0 && !uses_var(g, b))
		return 1;
	return e->op == TC_AOP_ADD && b->kind == TC_AST_IDENT &&
		tc_grad_var_of(g->cur, b->name) >= 0 &&
		!uses_var(g, a);
}

/* !c, a comparison flipped (a < b for !(a >= b)). */
static tc_expr *mk_not(grad_ctx *g, tc_expr *c)
{
	static const struct {
		tc_ast_op op, neg;
	} flip[] = {{TC_AOP_LT, TC_AOP_GE}, {TC_AOP_GE, TC_AOP_LT}, {TC_AOP_GT, TC_AOP_LE},
		{TC_AOP_LE, TC_AOP_GT}, {TC_AOP_EQ, TC_AOP_NE}, {TC_AOP_NE, TC_AOP_EQ}};
	tc_expr *e;
	size_t i;
	if (c->kind == TC_AST_BINARY)
		for (i = 0; i < sizeof(flip) / sizeof(flip[0]); i++)
			if (c->op == flip[i].op)
				return tc_grad_mk_bin(g, flip[i].neg, c->args[0], c->args[1]);
	if (!(e = tc_grad_mk_node(g, TC_AST_UNARY, 1)))
		return NULL;
	e->op = TC_AOP_NOT;
	e->args[0] = c;
	return e;
}

/* a || b where either may be NULL (true: the result is true). */
static tc_expr *mk_or(grad_ctx *g, tc_expr *a, tc_expr *b)
{
	return a && b ? tc_grad_mk_bin(g, TC_AOP_OR, a, b) : NULL;
}

/* The condition under which the forward expression e (of g->cur)
 * evaluates the read r: *found is set where e reads r at all, and the
 * result is NULL where it reads it whatever the values (else the
 * condition: the branch of a ?:, the right of && or ||, pad's first
 * argument where the reads are in bounds; several paths are or-ed). */
tc_expr *tc_grad_path_cond(grad_ctx *g, const tc_expr *e, const tc_expr *r, int *found)
{
	tc_expr *c[3] = {NULL, NULL, NULL}, *acc = NULL;
	int f[3] = {0, 0, 0}, i, any = 0, always = 0;
	*found = 0;
	if (tc_grad_same_read(e, r->ref_id, r)) {
		*found = 1;
		return NULL;
	}
	if (e->kind == TC_AST_IDENT && e->ref == TC_REF_LET)
		return tc_grad_path_cond(g, g->cur->where[e->ref_id].val, r, found);
	if (e->kind == TC_AST_TERNARY || (e->kind == TC_AST_BINARY &&
		(e->op == TC_AOP_AND || e->op == TC_AOP_OR)) ||
		(e->kind == TC_AST_CALL && e->ref == TC_REF_PAD)) {
		tc_expr *test = e->kind == TC_AST_TERNARY ? e->args[0]
			: e->kind == TC_AST_BINARY ? e->args[0] : tc_grad_pad_tests(g, e->args[0],
				-1, NULL, NULL);
		for (i = 0; i < e->nargs; i++)
			c[i] = tc_grad_path_cond(g, e->args[i], r, &f[i]);
		if (e->kind == TC_AST_TERNARY) {
			if (f[0]) { /* the condition is always evaluated */
				*found = 1;
				return c[0];
			}
			if (f[1])
				c[1] = tc_grad_mk_and(g, test, c[1]);
			if (f[2])
				c[2] = tc_grad_mk_and(g, mk_not(g, test), c[2]);
			*found = f[1] || f[2];
			return f[1] && f[2] ? mk_or(g, c[1], c[2]) : f[1] ? c[1] : c[2];
		}
		if (e->kind == TC_AST_BINARY) { /* the left always, the right sometimes */
			if (f[0]) {
				*found = 1;
				return c[0];
			}
			*found = f[1];
			return f[1] ? tc_grad_mk_and(g,
				e->op == TC_AOP_AND ? test : mk_not(g, test), c[1]) : NULL;
		}
		/* pad(x, v): x where its reads are in bounds (test NULL: always) */
		if (f[0])
			c[0] = tc_grad_mk_and(g, test, c[0]);
		if (f[1])
			c[1] = test ? tc_grad_mk_and(g, mk_not(g, test), c[1]) : NULL;
		*found = f[0] || (f[1] && test);
		return f[0] && f[1] && test ? mk_or(g, c[0], c[1]) : f[0] ? c[0] : c[1];
	}
	for (i = 0; i < e->nargs; i++) {
		int fi;
		tc_expr *ci = tc_grad_path_cond(g, e->args[i], r, &fi);
		if (!fi)
			continue;
		always |= !ci;
		acc = any ? mk_or(g, acc, ci) : ci;
		any = 1;
	}
	*found = any;
	return always ? NULL : acc;
}

/* Whether c is one of the conjuncts (&&) of test. */
static int has_conjunct(const tc_expr *test, const tc_expr *c)
{
	if (test->kind == TC_AST_BINARY && test->op == TC_AOP_AND)
		return has_conjunct(test->args[0], c) || has_conjunct(test->args[1], c);
	return tc_grad_expr_equal(test, c);
}

/* e where test holds: a ?: whose condition is a conjunct of test takes
 * its first branch, one whose condition's negation is takes its second
 * (the derivative of c ? 0.0 : (d ? 0.0 : A(i)) with respect to A(i),
 * read where !c && !d, is its adjoint alone).  e itself where nothing is
 * decided. */
static tc_expr *assume(grad_ctx *g, const tc_expr *test, tc_expr *e)
{
	tc_expr *c, *n;
	int i, changed = 0;
	if (e->kind == TC_AST_TERNARY) {
		if (has_conjunct(test, e->args[0]))
			return assume(g, test, e->args[1]);
		if ((n = mk_not(g, e->args[0])) && has_conjunct(test, n))
			return assume(g, test, e->args[2]);
	}
	if (!e->nargs || (e->kind != TC_AST_TERNARY && e->kind != TC_AST_BINARY &&
		e->kind != TC_AST_UNARY && !(e->kind == TC_AST_CALL && e->ref == TC_REF_BUILTIN)))
		return e; /* a read's subscripts stay as they are */
	if (!(c = tc_arena_alloc(g->ar, sizeof(*c))))
		return e;
	*c = *e;
	if (!(c->args = tc_arena_alloc(g->ar, (size_t)e->nargs * sizeof(*c->args))))
		return e;
	for (i = 0; i < e->nargs; i++)
		changed |= (c->args[i] = assume(g, test, e->args[i])) != e->args[i];
	return changed ? c : e;
}

/* test ? p : 0, as one ?: where p is c ? x : 0 with c reading nothing
 * (a conjunction of comparisons restricts a sum's domain: docs/language.md
 * 6.8), and p's conditions that test decides taken (assume); p where test
 * is NULL. */
tc_expr *tc_grad_guarded(grad_ctx *g, tc_expr *test, tc_expr *p)
{
	if (!test)
		return p;
	p = assume(g, test, p);
	while (p->kind == TC_AST_TERNARY && p->args[2]->kind == TC_AST_FLOAT &&
		p->args[2]->fval == 0.0 && !tc_grad_reads_any(p->args[0])) {
		if (!has_conjunct(test, p->args[0]))
			test = tc_grad_mk_and(g, test, p->args[0]);
		p = p->args[1];
	}
	return tc_grad_mk_ternary(g, test, p, NULL);
}

/* The contribution of p to the adjoint of a gathered read (LUT(I(i), j)):
 * the scatter d_LUT(I(i), j) +=! p, whose cost is linear in the reads.
 * The other subscripts must be index variables (distinct); every variable
 * of the statement is summed over its range (a where clause where no read
 * of p or of a gathered subscript bounds it). */
tc_stmt *tc_grad_scatter_stmt(grad_ctx *g, const tc_expr *r, int xv, tc_expr *p,
	tc_expr *when)
{
	const tc_stmt *s = g->cur;
	const tc_def *def = g->def;
	int nd = r->nargs, d, v, nw = 0;
	const char **idx = tc_arena_alloc(g->ar, (size_t)(nd + 1) * sizeof(*idx));
	tc_expr **sub = tc_arena_alloc(g->ar, (size_t)(nd + 1) * sizeof(*sub));
	int *extra = tc_arena_alloc(g->ar, (size_t)(s->nvars + 1) * sizeof(*extra));
	tc_stmt *b;
	if (!idx || !sub || !extra)
		return NULL;
	for (d = 0; d < nd; d++) {
		const tc_expr *a = r->args[d];
		if (tc_grad_reads_any(a)) {
			sub[d] = (tc_expr *)a;
			continue;
		}
		if (a->kind != TC_AST_IDENT || tc_grad_var_of(s, a->name) < 0) {
			/* 2 * i, i % N: a scatter's subscript; a shifted index is
			 * not one (docs/language.md 5.5) */
			if (shift_form(g, a)) {
				tc_error(g->d, a->loc, "gradient: subscript %d of '%s' is a shifted "
					"index beside a subscript that cannot be solved for an index; "
					"not supported yet", d + 1, def->tensors[r->ref_id].name);
				g->failed = 1;
				return NULL;
			}
			sub[d] = (tc_expr *)a;
			continue;
		}
		for (v = 0; v < d; v++)
			if (idx[v] && !strcmp(idx[v], a->name)) {
				tc_error(g->d, a->loc, "gradient: '%s' is read with the index variable "
					"'%s' twice in a gathered read; not supported yet",
					def->tensors[r->ref_id].name, a->name);
				g->failed = 1;
				return NULL;
			}
		idx[d] = a->name;
	}
	/* read only where when, a condition that reads a tensor (and so
	 * cannot restrict the scatter's domain, 6.8), holds: elsewhere the
	 * subscripts need not be in bounds, so each that is no index
	 * variable is when ? s : 0, and the value when ? p : 0.0 adds
	 * nothing there.  Element 0 exists where the extent is at least 1,
	 * which a guard without reads tests when the sizes do not imply it
	 * (it restricts the domain) */
	if (when) {
		tc_expr *pos = NULL;
		for (d = 0; d < nd; d++) {
			const tc_sexpr *ext = def->tensors[r->ref_id].ext[d], *m1;
			if (!sub[d])
				continue;
			if (!(sub[d] = tc_grad_mk_ternary_int(g, when, sub[d])) ||
				!(m1 = tc_sx_sub(g->ar, ext, tc_sx_const(g->ar, 1))))
				return NULL;
			if (tc_sx_sign(m1) != 1)
				pos = tc_grad_mk_and(g, pos, tc_grad_mk_bin(g, TC_AOP_GT,
					tc_grad_sx_expr(g, NULL, ext), tc_grad_mk_int(g, 0)));
		}
		if (pos)
			p = tc_grad_mk_ternary(g, pos, p, NULL);
	}
	if (!(b = tc_grad_mk_stmt(g, g->adj[xv], nd, idx, TC_RED_ADD, !g->ncontrib[xv], p)))
		return NULL;
	b->sub = sub;
	for (v = 0; v < s->nwhere; v++)
		g->let_used[v] = 0;
	tc_grad_mark_lets(g, p);
	for (v = 0; v < s->nvars; v++) {
		int bounded = tc_grad_bounded_in(p, s->vars[v].name) ||
			tc_grad_bounded_where(g, s->vars[v].name);
		for (d = 0; d < nd && !bounded; d++)
			bounded = sub[d] && tc_grad_bounded_in(sub[d], s->vars[v].name);
		if (!bounded)
			extra[nw++] = v;
	}
	if (tc_grad_attach_where(g, b, nw, extra) < 0)
		return NULL;
	for (d = 0; d < nd; d++)
		if (sub[d])
			tc_grad_mark_temps(g, sub[d]);
	return b;
}

/* Pin the summed variables of a gather that can take one value only: a
 * solved variable u = E - s v, with v summed and s >= 2, that ranges over
 * [lo, hi) with hi - lo <= s (a window no wider than its stride: a 2x2
 * max-pool of stride 2, a patch embedding) holds for v = floor((E - lo) /
 * s) alone, so the adjoint reads that one term instead of summing v over a
 * guarded range.  u's range is then a guard only where the window is
 * narrower than the stride (u >= lo always holds), plain[u] = 1 where it
 * is as wide; v's range becomes a guard (tc_grad_gather_stmt), and u
 * reads as lo + (E - lo) % s.  0, or -1 when out of memory. */
static int pin_summed(grad_ctx *g, gather *ga, int *plain)
{
	const tc_stmt *s = g->cur;
	int u, v;
	for (u = 0; u < s->nvars; u++) {
		const aff *sol = ga->sub[u];
		const tc_sexpr *width;
		aff *num;
		int64_t w, sc;
		int fv = -1, ok = 1;
		if (!sol || plain[u])
			continue;
		for (v = 0; v < s->nvars; v++)
			if (sol->c[v]) {
				ok &= fv < 0 && !ga->sub[v] && !ga->pin_s[v];
				fv = v;
			}
		if (!ok || fv < 0 || (sc = -sol->c[fv]) < 2)
			continue;
		width = tc_sx_sub(g->ar, s->vars[u].hi, s->vars[u].lo);
		if (!width)
			return -1;
		if (!tc_sx_is_const(width, &w) || w < 1 || w > sc)
			continue;
		/* num = E - lo: sol without its v term, less lo */
		if (!(num = tc_arena_alloc(g->ar, sizeof(*num))) ||
			tc_grad_aff_init(g, num, ga->nv) < 0)
			return -1;
		tc_grad_aff_add(g, num, sol, 1, ga->nv);
		num->c[fv] = 0;
		if (!(num->k = tc_sx_sub(g->ar, num->k, s->vars[u].lo)))
			return -1;
		ga->pin_num[fv] = num;
		ga->pin_s[fv] = sc;
		ga->pin_src[u] = fv + 1;
		if (w == sc)
			plain[u] = 1;
	}
	return 0;
}

/* One phase of a strided read's adjoint (strided_phases): the temporary it
 * writes, and per dimension of the read its stride (0 for none), the
 * phase (0 to stride - 1), the phase's extent and the range of its tap (the gather's variable nvars +
 * nd + d) from 0. */
typedef struct phase {
	const char *lhs;
	int64_t stride[TC_MAX_RANK], phase[TC_MAX_RANK];
	const tc_sexpr *ext[TC_MAX_RANK], *taps[TC_MAX_RANK];
} phase;

/* The new index y (variable nvars + d) that a, a solution of gather ga
 * with the constant part left out, is alone: y, which ranges over 0:ext of
 * dimension d, or s * y + t with t y's tap (a subscript e / s), over 0:s *
 * ext; -1 when a is anything else. */
static int tapped_index(const gather *ga, const aff *a, int nvars, int nd)
{
	int u, y = -1;
	for (u = nvars; u < nvars + nd; u++)
		if (a->c[u]) {
			if (y >= 0 || a->c[u] != (ga->tap[u - nvars] ? ga->tap[u - nvars] : 1))
				return -1;
			y = u;
		}
	for (u = 0; u < ga->nv; u++)
		if (a->c[u] && (u < nvars || (u >= nvars + nd &&
			(u != y + nd || a->c[u] != 1 || !ga->tap[y - nvars]))))
			return -1;
	if (y >= 0 && ga->tap[y - nvars] && a->c[y + nd] != 1)
		return -1; /* s * y without its tap */
	return y;
}

/* The statement of the gather ga (tc_grad_gather_stmt) of p into the
 * adjoint of the read r of tensor x (value xv), its new indices named
 * idx, the variables plain[v] needing no guard, with the guard so far;
 * with ph, one phase of it into a temporary (strided_phases).  NULL when
 * out of memory. */
static tc_stmt *gather_finish(grad_ctx *g, gather *ga, const tc_expr *r, int x, int xv,
	tc_expr *p, const int *plain, const char **idx, tc_expr *guard, const phase *ph)
{
	const tc_stmt *s = g->cur;
	const tc_tensor_info *ti = &g->def->tensors[x];
	int nvars = s->nvars, nd = r->nargs, v, d, nfree = 0, nw = 0, *ranged;
	tc_expr *dguard = NULL;
	tc_stmt *b;
	if (!(ranged = tc_arena_alloc(g->ar, (size_t)(nd + 1) * sizeof(*ranged))))
		return NULL;
	for (d = 0; d < nd; d++) /* the taps are summed */
		nfree += (ph && ph->stride[d] != 0) || ga->tap[d];
	/* the solved variables' ranges are guards; the others are summed.  A
	 * left-hand variable of s ranging over its whole dimension of T is a
	 * subscript of the adjoint read d_T(...), which is then read as
	 * pad(d_T(...), 0.0): its bounds tests are that guard, and a factor
	 * pad(e, 0.0) of a sum restricts the statement's domain (loop bounds,
	 * not a test per term: docs/language.md 6.8) */
	for (v = 0; v < nvars; v++) {
		tc_expr *e;
		if (!ga->sub[v]) {
			nfree += !ga->pin_s[v];
			continue;
		}
		if (plain[v])
			continue;
		if (ga->pin_src[v]) { /* lo + num % s >= lo holds: the upper bound */
			if (!(e = pin_source_expr(g, ga, v)))
				return NULL;
			guard = tc_grad_mk_and(g, guard, tc_grad_mk_bin(g, TC_AOP_LT, e,
				tc_grad_sx_expr(g, s, s->vars[v].hi)));
			continue;
		}
		/* lo <= vars + k < hi as lo - k <= vars < hi - k; where vars is
		 * one new index y alone, which ranges over 0:ext, a bound that
		 * 0:ext implies for every size is no test (shift_right's
		 * d_A(i) = d_O(i + 1) needs none) */
		{
			aff a = *ga->sub[v];
			const tc_sexpr *k = a.k, *lo, *hi, *ext = NULL;
			tc_expr *c = NULL;
			int y;
			a.k = tc_sx_const(g->ar, 0);
			if ((y = tapped_index(ga, &a, nvars, nd)) >= 0)
				ext = ga->tap[y - nvars] ? tc_sx_scale(g->ar, ga->tap[y - nvars],
					ti->ext[y - nvars]) : ti->ext[y - nvars];
			lo = tc_sx_sub(g->ar, s->vars[v].lo, k);
			hi = tc_sx_sub(g->ar, s->vars[v].hi, k);
			e = aff_expr(g, &a, ga->names, ga->nv, ga);
			if (!ext || tc_sx_sign(tc_sx_sub(g->ar, tc_sx_const(g->ar, 0), lo)) != 1)
				c = tc_grad_mk_bin(g, TC_AOP_GE, e, tc_grad_sx_expr(g, s, lo));
			else /* y's range comes from d_X's extent then, not from reads */
				ranged[y - nvars] = 1;
			if (!ext || tc_sx_sign(tc_sx_sub(g->ar, hi, ext)) != 1)
				c = tc_grad_mk_and(g, c,
					tc_grad_mk_bin(g, TC_AOP_LT, e, tc_grad_sx_expr(g, s, hi)));
			else
				ranged[y - nvars] = 1;
			if (!c)
				continue;
			if (v < s->nidx && tc_grad_covers(s, v, g->def->tensors[s->tensor].ext[v]))
				dguard = tc_grad_mk_and(g, dguard, c);
			else
				guard = tc_grad_mk_and(g, guard, c);
		}
	}
	/* a pinned variable's range is a guard (v >= 0 needs none where its
	 * value's numerator cannot be negative) */
	for (v = 0; v < nvars; v++) {
		tc_expr *e;
		int64_t k;
		int u, nonneg;
		if (!ga->pin_s[v])
			continue;
		nonneg = tc_sx_is_const(ga->pin_num[v]->k, &k) && k >= 0;
		for (u = 0; u < ga->nv; u++)
			nonneg &= ga->pin_num[v]->c[u] >= 0;
		if (!nonneg || !tc_sx_is_const(s->vars[v].lo, &k) || k != 0) {
			if (!(e = pinned_expr(g, ga, v)))
				return NULL;
			guard = tc_grad_mk_and(g, guard,
				tc_grad_mk_bin(g, TC_AOP_GE, e, tc_grad_sx_expr(g, s, s->vars[v].lo)));
		}
		if (!(e = pinned_expr(g, ga, v)))
			return NULL;
		guard = tc_grad_mk_and(g, guard,
			tc_grad_mk_bin(g, TC_AOP_LT, e, tc_grad_sx_expr(g, s, s->vars[v].hi)));
	}
	p = gather_expr(g, ga, p);
	/* the tests of the adjoint read's subscripts (dguard) are pad's, in a
	 * sum whose product has that read as a factor; else a guard */
	if (dguard) {
		const char *dname = g->adj[g->stmt_val[g->cur_si]];
		if ((nfree || (!ph && g->ncontrib[xv])) && factor_read(p, dname)) {
			p = pad_reads(g, p, dname);
			/* the other reads at the same shifted indices (A(j - 1) of
			 * the derivative of A(j) * A(j + 1)) leave their tensors
			 * exactly where d_T's read does: padded too, so that the
			 * text states what the pad factor gives (6.8) */
			for (d = 0; d < nd; d++)
				if (tc_grad_mentions(dguard, idx[d]))
					p = pad_reads_at(g, p, dname, idx[d], ti->ext[d]);
		} else {
			guard = tc_grad_mk_and(g, dguard, guard);
		}
	}
	/* g ? (c ? x : 0) : 0 is g && c ? x : 0, where c reads no tensor (a
	 * read in a condition bounds indices: range inference, 9.1) */
	while (p->kind == TC_AST_TERNARY && p->args[2]->kind == TC_AST_FLOAT &&
		p->args[2]->fval == 0.0 && !tc_grad_reads_any(p->args[0])) {
		guard = tc_grad_mk_and(g, guard, p->args[0]);
		p = p->args[1];
	}
	if (!(b = tc_grad_mk_stmt(g, ph ? ph->lhs : g->adj[xv], nd, idx, TC_RED_ASSIGN, 0,
		      guard ? tc_grad_mk_ternary(g, guard, p, NULL) : p)))
		return NULL;
	if (!ph && g->ncontrib[xv])
		b->red = TC_RED_ADD;
	else if (nfree) {
		b->red = TC_RED_ADD;
		b->init = 1;
	}
	/* ranges: the summed variables', and the new indices' where the
	 * adjoint's extents are not known yet (a temporary's first write) */
	if (ph || (xv >= g->def->ninputs && !g->ncontrib[xv]))
		for (d = 0; d < nd; d++)
			ranged[d] = 1;
	for (b->nwhere = nfree, d = 0; d < nd; d++)
		b->nwhere += ranged[d];
	if (b->nwhere && !(b->where = tc_arena_alloc(g->ar, (size_t)b->nwhere * sizeof(tc_where))))
		return NULL;
	for (v = 0; v < nvars; v++)
		if (!ga->sub[v] && !ga->pin_s[v]) {
			tc_where *w = &b->where[nw++];
			w->kind = TC_WHERE_RANGE;
			w->name = s->vars[v].name;
			w->lo = tc_grad_sx_expr(g, s, s->vars[v].lo);
			w->hi = tc_grad_sx_expr(g, s, s->vars[v].hi);
		}
	for (d = 0; d < nd; d++)
		if ((ph && ph->stride[d]) || ga->tap[d]) {
			tc_where *w = &b->where[nw++];
			w->kind = TC_WHERE_RANGE;
			w->name = ga->names[nvars + nd + d];
			w->lo = tc_grad_mk_int(g, 0);
			w->hi = ga->tap[d] ? tc_grad_mk_int(g, ga->tap[d])
				: tc_grad_sx_expr(g, s, ph->taps[d]);
		}
	for (d = 0; d < nd; d++) {
		tc_where *w;
		if (!ranged[d])
			continue;
		w = &b->where[nw++];
		w->kind = TC_WHERE_RANGE;
		w->name = idx[d];
		w->lo = tc_grad_mk_int(g, 0);
		w->hi = tc_grad_sx_expr(g, NULL, ph && ph->stride[d] ? ph->ext[d] : ti->ext[d]);
	}
	return b;
}

/* The name of a temporary for phase k of the adjoint named adj: adj_s
 * and the phase's number per split dimension (d_I_s01), not a name of
 * the def (then with more underscores).  NULL when out of memory. */
static const char *phase_name(grad_ctx *g, const char *adj, const phase *ph, int nd)
{
	char buf[128];
	int d, n = snprintf(buf, sizeof(buf), "%s_s", adj);
	for (d = 0; d < nd && n < 100; d++)
		if (ph->stride[d])
			n += snprintf(buf + n, sizeof(buf) - (size_t)n, "%d", (int)ph->phase[d]);
	while (tc_grad_name_taken(g->def, buf) && n < 120) {
		buf[n++] = '_';
		buf[n] = 0;
	}
	return tc_arena_strdup(g->ar, buf);
}

/* e (a right side of a phase) with each read among the factors of its
 * product (under a guard's ?:) that has one of the n subscripts sub[]
 * written cond ? read : 0.0, cond the conjunction of the conds[] of those
 * subscripts; used[k] set for each one found.  NULL when out of memory. */
static tc_expr *guard_taps(grad_ctx *g, tc_expr *e, int n, tc_expr *const *sub,
	tc_expr *const *conds, int *used)
{
	tc_expr *c = NULL, *r;
	int i, k;
	if (e->kind == TC_AST_TERNARY && e->args[2]->kind == TC_AST_FLOAT &&
		e->args[2]->fval == 0.0) {
		if (!(r = guard_taps(g, e->args[1], n, sub, conds, used)))
			return NULL;
		return tc_grad_mk_ternary(g, e->args[0], r, NULL);
	}
	if (e->kind == TC_AST_BINARY && e->op == TC_AOP_MUL) {
		tc_expr *a = guard_taps(g, e->args[0], n, sub, conds, used);
		tc_expr *b = a ? guard_taps(g, e->args[1], n, sub, conds, used) : NULL;
		return b ? tc_grad_mk_bin(g, TC_AOP_MUL, a, b) : NULL;
	}
	if (e->kind != TC_AST_CALL || e->ref == TC_REF_BUILTIN || e->ref == TC_REF_PAD)
		return e;
	for (k = 0; k < n; k++)
		for (i = 0; i < e->nargs; i++)
			if (tc_grad_expr_equal(e->args[i], sub[k])) {
				c = tc_grad_mk_and(g, c, conds[k]);
				used[k] = 1;
				break;
			}
	return c ? tc_grad_mk_ternary(g, c, e, NULL) : e;
}

/* e, or max(e, 1) where e >= 1 does not hold at every size (*clamped
 * then set); NULL when out of memory. */
static const tc_sexpr *at_least_one(grad_ctx *g, const tc_sexpr *e, int *clamped)
{
	const tc_sexpr *less = e ? tc_sx_sub(g->ar, e, tc_sx_const(g->ar, 1)) : NULL;
	if (!less || tc_sx_sign(less) == 1)
		return less ? e : NULL;
	*clamped = 1;
	return tc_sx_max(g->ar, e, tc_sx_const(g->ar, 1));
}

/* The adjoint of a strided read in phases.  The gather of I(n,c,2*h+kh,
 * 2*w+kw) (a convolution of stride 2) solves kh = x - 2*h and sums h
 * under the guard 0 <= x - 2*h < KH: each element of d_I takes the one or
 * two rows of d_O whose windows cover it, a set that changes with the
 * parity of x, so no loop over x has a constant body (no register tile,
 * no vector: 30 ms against torch's 7 for the backward of a 64-channel
 * 57 x 57 layer, docs/performance.md).  Split by the phase of each
 * strided index, x = 2*a + p, the taps of phase p are kh = 2*j + p over j
 * in 0:(KH - p + 1)/2 and the rows h = a - j: phase p is a convolution of
 * stride 1 of d_O with the weights W1(f,c,2*j+p,...), padded (pad), into a
 * temporary d_I_s<p>(n,c,a,...), and d_I reads each element from its
 * phase: d_I(n,c,x,..) = x % 2 == 0 ? d_I_s0(n,c,x/2,..) : d_I_s1(..).
 *
 * A dimension d of the read is split where its solved variable u (kh)
 * is x_d - s*v + k for a constant k, a summed variable v (h) that no other
 * solution uses and a stride s >= 2, and u ranges from 0 (a range of a
 * constant width no wider than s has been pinned to one term instead:
 * pin_summed); at most 16 phases in all, and only where another variable
 * is summed (see below).  With x_d = s*a + p and p + k = s*t + q (0 <= q
 * < s): u = s*j + q and v = a + t - j, j in 0:(hi_u - q + s - 1)/s (the
 * gather's tap variable nvars + nd + d), a in 0:(ext_d - p + s - 1)/s.  A range that
 * may be empty at some sizes (the taps of phase 1 where KH may be 1, the
 * rows of phase 1 where H may be 1: an error of the language, 9.7) is
 * max(range, 1): the extra row of a phase is never read, and an extra tap
 * reads its weights as (s*j + q < hi_u ? W1(f,c,s*j+q,...) : 0.0), a factor
 * of the product that restricts the statement's domain like pad (no phases
 * where that read is no such factor).  The phases go into g->stmts; *out
 * is the statement that assembles the adjoint.
 * Returns 1 so, 0 where no dimension splits, -1 when out of memory. */
static int strided_phases(grad_ctx *g, gather *ga, const tc_expr *r, int x, int xv,
	tc_expr *p, const int *plain, const char **idx, tc_expr *guard, tc_stmt **out)
{
	const tc_stmt *s = g->cur;
	const tc_tensor_info *ti = &g->def->tensors[x];
	int nvars = s->nvars, nd = r->nargs, d, e, u, v, w, nph = 1, k, nw = 0;
	int du[TC_MAX_RANK], dv[TC_MAX_RANK];
	int64_t ds[TC_MAX_RANK], dk[TC_MAX_RANK], lo;
	phase phs[16]; /* per phase: its temporary and its phase per dimension */
	tc_stmt *phases[16];
	tc_expr *rhs = NULL;
	tc_stmt *b;
	if (nd > TC_MAX_RANK)
		return 0;
	for (d = 0; d < nd; d++) {
		const aff *sol;
		ds[d] = 0;
		dv[d] = -1;
		for (u = 0; u < nvars && !(ga->sub[u] && ga->sub[u]->c[nvars + d]); u++)
			;
		if (u == nvars || plain[u] || ga->pin_src[u] || (sol = ga->sub[u])->c[nvars + d] != 1 ||
			!tc_sx_is_const(sol->k, &dk[d]) || !tc_sx_is_const(s->vars[u].lo, &lo) ||
			lo != 0 || tc_sx_has_var(s->vars[u].hi))
			continue;
		for (v = -1, w = 0; w < ga->nv; w++)
			if (w != nvars + d && sol->c[w])
				v = v < 0 && w < nvars && sol->c[w] <= -2 ? w : ga->nv;
		if (v < 0 || v == ga->nv || ga->sub[v] || ga->pin_s[v] || ga->pin_src[v])
			continue;
		for (w = 0; w < nvars && !(w != u && ga->sub[w] && ga->sub[w]->c[v]); w++)
			;
		for (e = 0; e < d && dv[e] != v; e++)
			;
		if (w < nvars || e < d)
			continue;
		du[d] = u;
		dv[d] = v;
		ds[d] = -sol->c[v];
		if ((nph *= (int)ds[d]) > 16)
			return 0;
	}
	/* a phase pays where it is a contraction, a sum over another variable
	 * (the input channels f of the convolution): a window's sum alone (a
	 * pooling's) is a few terms per element, and phases would add a pass */
	for (v = 0; v < nvars; v++) {
		for (e = 0; e < nd && dv[e] != v; e++)
			;
		if (e == nd && !ga->sub[v] && !ga->pin_s[v])
			break;
	}
	if (nph == 1 || v == nvars)
		return 0;
	for (d = 0; d < nd; d++)
		if (ds[d] && !(ga->names[nvars + nd + d] =
			fresh_index(g, d == nd - 1 ? "i" : "j", ga->names + nvars, nd + d)))
			return -1;
	/* each phase: a copy of the gather with u and v substituted */
	for (k = 0; k < nph; k++) {
		gather q = *ga;
		phase *ph = &phs[k];
		int *pl = tc_arena_alloc(g->ar, (size_t)(nvars + 1) * sizeof(*pl)), rem = k;
		int nclamp = 0, used[TC_MAX_RANK];
		tc_expr *tsub[TC_MAX_RANK], *tcond[TC_MAX_RANK];
		memset(ph, 0, sizeof(*ph));
		q.sub = tc_arena_alloc(g->ar, (size_t)(nvars + 1) * sizeof(*q.sub));
		if (!pl || !q.sub)
			return -1;
		memcpy(pl, plain, (size_t)nvars * sizeof(*pl));
		memcpy(q.sub, ga->sub, (size_t)nvars * sizeof(*q.sub));
		for (d = nd - 1; d >= 0; d--) {
			int64_t ph_d, t, qq;
			aff *su, *sv;
			const tc_sexpr *hi;
			int tap_clamped = 0, row_clamped = 0;
			if (!ds[d])
				continue;
			ph_d = rem % ds[d];
			rem /= (int)ds[d];
			t = (ph_d + dk[d]) >= 0 ? (ph_d + dk[d]) / ds[d]
						: -((-(ph_d + dk[d]) + ds[d] - 1) / ds[d]);
			qq = ph_d + dk[d] - ds[d] * t;
			if (!(su = tc_arena_alloc(g->ar, sizeof(*su))) ||
				!(sv = tc_arena_alloc(g->ar, sizeof(*sv))) ||
				tc_grad_aff_init(g, su, ga->nv) < 0 || tc_grad_aff_init(g, sv, ga->nv) < 0)
				return -1;
			su->c[nvars + nd + d] = ds[d];
			su->k = tc_sx_const(g->ar, qq);
			sv->c[nvars + d] = 1;
			sv->c[nvars + nd + d] = -1;
			sv->k = tc_sx_const(g->ar, t);
			q.sub[du[d]] = su;
			q.sub[dv[d]] = sv;
			pl[du[d]] = 1; /* j's range keeps u in its range */
			ph->stride[d] = ds[d];
			ph->phase[d] = ph_d;
			hi = tc_sx_add(g->ar, s->vars[du[d]].hi, tc_sx_const(g->ar, ds[d] - 1 - qq));
			ph->taps[d] = at_least_one(g, tc_sx_floordiv(g->ar, hi, ds[d]), &tap_clamped);
			if (tap_clamped) { /* s*j + q < hi_u */
				tsub[nclamp] = aff_expr(g, su, q.names, q.nv, NULL);
				tcond[nclamp] = tsub[nclamp] ? tc_grad_mk_bin(g, TC_AOP_LT, tsub[nclamp],
					tc_grad_sx_expr(g, s, s->vars[du[d]].hi)) : NULL;
				used[nclamp] = 0;
				if (!tcond[nclamp])
					return -1;
				nclamp++;
			}
			hi = tc_sx_add(g->ar, ti->ext[d], tc_sx_const(g->ar, ds[d] - 1 - ph_d));
			ph->ext[d] = at_least_one(g, tc_sx_floordiv(g->ar, hi, ds[d]), &row_clamped);
			if (!ph->taps[d] || !ph->ext[d])
				return -1;
		}
		if (!(ph->lhs = phase_name(g, g->adj[xv], ph, nd)) ||
			!(b = gather_finish(g, &q, r, x, xv, p, pl, idx, guard, ph)))
			return -1;
		if (nclamp && !(b->rhs = guard_taps(g, b->rhs, nclamp, tsub, tcond, used)))
			return -1;
		for (d = 0; d < nclamp; d++)
			if (!used[d])
				return 0; /* the taps' read is no factor: the gather instead */
		phases[k] = b;
	}
	for (k = 0; k < nph; k++) {
		tc_grad_mark_temps(g, phases[k]->rhs);
		if (tc_vec_push(&g->stmts, phases[k]) < 0)
			return -1;
	}
	/* the adjoint: x_d % s == p ? phase p's element at x_d / s : ..., the
	 * last phase of each dimension untested */
	for (k = nph - 1; k >= 0; k--) {
		tc_expr *rd = tc_grad_mk_read(g, phs[k].lhs, nd, idx), *c = NULL;
		if (!rd)
			return -1;
		for (d = nd - 1; d >= 0; d--) {
			int64_t ph_d = phs[k].phase[d];
			if (!ds[d])
				continue;
			rd->args[d] = tc_grad_mk_bin(g, TC_AOP_DIV, tc_grad_mk_ident(g, idx[d]),
				tc_grad_mk_int(g, ds[d]));
			if (ph_d != ds[d] - 1)
				c = tc_grad_mk_and(g, tc_grad_mk_bin(g, TC_AOP_EQ,
					tc_grad_mk_bin(g, TC_AOP_MOD, tc_grad_mk_ident(g, idx[d]),
						tc_grad_mk_int(g, ds[d])),
					tc_grad_mk_int(g, ph_d)), c);
		}
		rhs = !rhs ? rd : tc_grad_mk_ternary(g, c, rd, rhs);
	}
	if (!rhs || !(b = tc_grad_mk_stmt(g, g->adj[xv], nd, idx,
		      g->ncontrib[xv] ? TC_RED_ADD : TC_RED_ASSIGN, 0, rhs)))
		return -1;
	/* the split indices range over the adjoint's extents; the others too
	 * where they are not known yet (a temporary's first write) */
	for (d = 0; d < nd; d++)
		b->nwhere += ds[d] || (xv >= g->def->ninputs && !g->ncontrib[xv]);
	if (!(b->where = tc_arena_alloc(g->ar, (size_t)(b->nwhere + 1) * sizeof(tc_where))))
		return -1;
	for (d = 0; d < nd; d++)
		if (ds[d] || (xv >= g->def->ninputs && !g->ncontrib[xv])) {
			tc_where *wh = &b->where[nw++];
			wh->kind = TC_WHERE_RANGE;
			wh->name = idx[d];
			wh->lo = tc_grad_mk_int(g, 0);
			wh->hi = tc_grad_sx_expr(g, NULL, ti->ext[d]);
		}
	*out = b;
	return 1;
}

/* The contribution of p (the derivative of g->cur times its adjoint) to
 * the adjoint of the read r (of tensor x, value xv) whose subscripts are
 * affine but not distinct index variables: the scatter d_X(f(i)) += p(i)
 * written as a gather.  Each dimension's subscript solves for one index
 * variable with coefficient 1 or -1 (which then names that dimension of
 * d_X: I(h + kh) gives d_I(h, ...) with the old h being h - kh); the range
 * of a solved variable becomes a guard, and a subscript without an
 * unsolved variable (a constant, a diagonal) an equality guard.  The other
 * variables are summed over their ranges. */
tc_stmt *tc_grad_gather_stmt(grad_ctx *g, const tc_expr *r, int x, int xv, tc_expr *p,
	int *unsolvable)
{
	const tc_stmt *s = g->cur;
	const tc_tensor_info *ti = &g->def->tensors[x];
	int nvars = s->nvars, nd = r->nargs, v, d, *plain;
	gather ga;
	tc_expr *guard = NULL;
	const char **idx;
	tc_stmt *b;
	/* the variables of s, a new index per dimension, a tap per dimension
	 * (strided_phases) */
	ga.nv = nvars + 2 * nd;
	if (!(plain = tc_arena_alloc(g->ar, (size_t)(nvars + 1) * sizeof(*plain))))
		return NULL;
	ga.names = tc_arena_alloc(g->ar, (size_t)(ga.nv + 1) * sizeof(*ga.names));
	ga.sub = tc_arena_alloc(g->ar, (size_t)(nvars + 1) * sizeof(*ga.sub));
	ga.pin_num = tc_arena_alloc(g->ar, (size_t)(nvars + 1) * sizeof(*ga.pin_num));
	ga.pin_s = tc_arena_alloc(g->ar, (size_t)(nvars + 1) * sizeof(*ga.pin_s));
	ga.pin_src = tc_arena_alloc(g->ar, (size_t)(nvars + 1) * sizeof(*ga.pin_src));
	ga.tap = tc_arena_alloc(g->ar, (size_t)(nd + 1) * sizeof(*ga.tap));
	idx = tc_arena_alloc(g->ar, (size_t)(nd + 1) * sizeof(*idx));
	if (!ga.names || !ga.sub || !ga.pin_num || !ga.pin_s || !ga.pin_src || !ga.tap || !idx)
		return NULL;
	for (v = 0; v < nvars; v++)
		ga.names[v] = s->vars[v].name;
	for (d = 0; d < nd; d++) {
		aff a;
		int piv = -1;
		const tc_expr *sub = r->args[d];
		/* e / s, s a constant of 2 or more: e = s * y + t with the tap t
		 * summed over 0:s (a nearest-neighbour upsampling's adjoint sums
		 * each 2 x 2 block of d_O) */
		if (tc_grad_aff_of(g, sub, &a, ga.nv) < 0) {
			if (sub->kind == TC_AST_BINARY && sub->op == TC_AOP_DIV &&
				sub->args[1]->kind == TC_AST_INT && sub->args[1]->ival >= 2 &&
				tc_dtype_is_int(sub->type) &&
				tc_grad_aff_of(g, sub->args[0], &a, ga.nv) == 0) {
				ga.tap[d] = sub->args[1]->ival;
			} else {
				*unsolvable = 1; /* i % N, (i / 2) / 2: the caller scatters */
				return NULL;
			}
		}
		for (v = 0; v < nvars; v++)
			if (ga.sub[v] && a.c[v]) {
				int64_t m = a.c[v];
				a.c[v] = 0;
				tc_grad_aff_add(g, &a, ga.sub[v], m, ga.nv);
			}
		/* solve for a variable with coefficient +-1: a left-hand one first */
		for (v = 0; v < nvars; v++)
			if ((a.c[v] == 1 || a.c[v] == -1) && (piv < 0 || (piv >= s->nidx && v < s->nidx)))
				piv = v;
		if (piv >= 0) {
			aff *sol = tc_arena_alloc(g->ar, sizeof(*sol));
			int64_t c = a.c[piv];
			if (!sol || tc_grad_aff_init(g, sol, ga.nv) < 0)
				return NULL;
			/* y = c piv + rest, so piv = c (y - rest) */
			a.c[piv] = 0;
			tc_grad_aff_add(g, sol, &a, -c, ga.nv);
			sol->c[nvars + d] = ga.tap[d] ? c * ga.tap[d] : c;
			if (ga.tap[d]) { /* y = s * y' + t */
				sol->c[nvars + nd + d] = c;
				if (!(ga.names[nvars + nd + d] = fresh_index(g, "t", ga.names + nvars,
					nd + d)))
					return NULL;
			}
			ga.sub[piv] = sol;
			/* y is named after a left-hand index it replaces (I(h + kh)
			 * gives d_I(h) with the old h being h - kh); after the dimension
			 * where a reduction index is solved for */
			ga.names[nvars + d] = piv < s->nidx || r->args[d]->kind == TC_AST_IDENT ?
				s->vars[piv].name : fresh_index(g, "x", ga.names + nvars, d);
			if (!ga.names[nvars + d])
				return NULL;
			/* a plain index over the whole dimension needs no guard */
			if (!ga.tap[d] && is_plain_dim(g, sol, nvars + d, s, piv, ti->ext[d]))
				plain[piv] = 1;
		} else {
			for (v = 0; v < nvars; v++)
				if (a.c[v] || ga.tap[d]) {
					*unsolvable = 1; /* 2 * i: the caller scatters */
					return NULL;
				}
			if (!(ga.names[nvars + d] = fresh_index(g, "x", ga.names + nvars, d)))
				return NULL;
			/* the equality y = a */
			guard = tc_grad_mk_and(g, guard,
				tc_grad_mk_bin(g, TC_AOP_EQ,
					tc_grad_mk_ident(g, ga.names[nvars + d]),
				aff_expr(g, &a, ga.names, ga.nv, &ga)));
		}
		idx[d] = ga.names[nvars + d];
	}
	if (pin_summed(g, &ga, plain) < 0)
		return NULL;
	switch (strided_phases(g, &ga, r, x, xv, p, plain, idx, guard, &b)) {
	case 1:
		return b;
	case -1:
		return NULL;
	}
	return gather_finish(g, &ga, r, x, xv, p, plain, idx, guard, NULL);
}

/* Whether e reads the tensor named name (a backward adjoint or
 * temporary, by name). */
int tc_grad_reads_name(const tc_expr *e, const char *name)
{
	int i;
	if ((e->kind == TC_AST_CALL || e->kind == TC_AST_IDENT) && e->ref != TC_REF_BUILTIN &&
		e->ref != TC_REF_INDEX && e->name && !strcmp(e->name, name))
		return 1;
	for (i = 0; i < e->nargs; i++)
		if (tc_grad_reads_name(e->args[i], name))
			return 1;
	return 0;
}
