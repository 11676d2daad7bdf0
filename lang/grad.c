/* Reverse-mode automatic differentiation of a checked def into a backward
 * def, as a syntax tree (see grad.h).
 *
 * The forward statements are visited last to first.  A statement
 * T(lhs) op= rhs whose adjoint d_T is known contributes, for each tensor X
 * whose adjoint is wanted and each distinct subscript list X(s) read in
 * rhs, the statement
 *
 *   d_X(s) op' d_T(lhs) * (d rhs / d X(s))
 *
 * where op' is '=' when s names every index variable of the statement (a
 * pointwise copy), '+=!' otherwise (the adjoint broadcast back: summed
 * over the variables s lacks), and '+=' for the second and later
 * contributions to the same d_X.  So matmul's backward is two
 * contractions.  The partial derivative is built by the derivative table
 * below with simplifying constructors (no '* 1', '+ 0', '--x').  Forward
 * temporaries that the partials read are recomputed at the top of the
 * backward def by copies of their statements; adjoints of temporaries are
 * temporaries of the backward def.
 *
 * A tensor written again (an in-place update, '=' or '+=') gets a new
 * version (a "value") per write; the derivation works on the statements
 * with the values' names (make_values), and an adjoint that would be a
 * copy of the next version's is that adjoint itself (alias_adjoint).
 *
 * Supported: statements with '=', '+=!', '*=!', 'max=!' and 'min=!' (with
 * where ranges, exists clauses and lets, copied to the derived statements
 * that need them), in-place '=', '+=', 'max=' and 'min=' updates, pad, and
 * scatters with '+=!', '+=', 'max=!' or 'min=!'.  A read whose subscripts
 * are distinct index variables gives the statement above; over part of a
 * tensor, its adjoint is zero first and the statement adds to it.  A read
 * with other affine
 * subscripts (offsets, strides, constants, diagonals) gives a gather
 * (gather_stmt): each subscript solved for one variable, the solved ranges
 * as guards.  A gathered read (LUT(I(i), j)) or one whose subscripts no
 * variable can be solved for (A(2 * i), A(i % N)) gives a scatter
 * (scatter_stmt), guarded by the condition under which the forward reads
 * it (path_cond).  max=!/min=! send the gradient to the first term
 * attaining the result (arg_gate; an in-place max= counts the earlier value
 * first), *=! multiplies by the product of the other factors, exact at
 * zeros (product_factor).  Other constructs are located errors "... not
 * supported yet".
 *
 * This file holds the checks, the assembly of the backward def and
 * tc_grad_derive; the derived statements and the gathers and scatters are
 * grad_access.c's, the derivative table and the simplifying constructors
 * grad_expr.c's (grad_internal.h). */
#include "grad.h"
#include "grad_internal.h"
#include "range.h"

#include <stdio.h>
#include <string.h>

/* ---- values (versions of tensors) ---- */

/* The value of tensor t that statement si reads: the one the last
 * statement before si writing t wrote (t itself for an input). */
static int read_val(const grad_ctx *g, int si, int t)
{
	int j;
	for (j = si - 1; j >= 0; j--)
		if (g->def->stmts[j]->tensor == t)
			return g->stmt_val[j];
	return t;
}

/* ---- checks of what this slice supports ---- */

/* Check statement si of the def: its operator, where clauses, left side. */
static void check_stmt(grad_ctx *g, int si)
{
	const tc_def *def = g->def;
	const tc_stmt *s = def->stmts[si];
	const tc_tensor_info *ti = &def->tensors[s->tensor];
	int i;
	if (ti->first_write != si && s->red != TC_RED_ASSIGN && (s->red == TC_RED_MUL || s->init)) {
		tc_error(g->d, s->op_loc, "gradient: '%s' updates '%s' in place; only '=', '+=', "
			"'max=' and 'min=' updates are supported yet", tc_red_name(s->red, s->init),
			s->lhs);
		g->failed = 1;
		return;
	}
	/* a first '+=' adds to what the tensor holds, which no input gives: as
	 * '+=!' for the gradient; the first term of a first 'max=' is that
	 * content, whose value the derivation does not have */
	if (ti->first_write == si && s->red != TC_RED_ASSIGN && s->red != TC_RED_ADD && !s->init) {
		tc_error(g->d, s->op_loc, "gradient: a first '%s' statement is not supported yet "
			"(supported: '=', '+=', '+=!', '*=!', 'max=!' and 'min=!')",
			tc_red_name(s->red, s->init));
		g->failed = 1;
		return;
	}
	if (s->sub && s->red != TC_RED_ADD &&
		!((s->red == TC_RED_MAX || s->red == TC_RED_MIN) && s->init)) {
		int k = 0;
		while (!s->sub[k])
			k++;
		tc_error(g->d, s->sub[k]->loc, "gradient: a scatter with '%s' is not supported yet "
			"(supported: '+=!', '+=', 'max=!' and 'min=!')", tc_red_name(s->red, s->init));
		g->failed = 1;
		return;
	}
	if (s->red == TC_RED_ASSIGN && s->nvars > s->nidx) {
		tc_error(g->d, s->op_loc, "gradient: '=' with reduction indices is not supported");
		g->failed = 1;
		return;
	}
	for (i = 0; i < s->nidx && !s->sub; i++) /* a scatter writes what it names */
		if (!tc_grad_covers(s, i, ti->ext[i])) {
			tc_error(g->d, s->idx_loc[i],
				"gradient: '%s' ranges over only part of dimension %d of '%s'; partial "
				"writes are not supported yet", s->idx[i], i + 1, s->lhs);
			g->failed = 1;
			return;
		}
}

/* ---- assembling the backward def ---- */

/* Collect the tensor reads of e whose tensor's adjoint is wanted (first
 * occurrence of each distinct subscript list) into out. */
static void collect_reads(grad_ctx *g, const tc_expr *e, tc_vec *out)
{
	int i;
	if (e->kind == TC_AST_CALL && e->ref == TC_REF_TENSOR) {
		if (!g->need[tc_grad_val_of_read(g, e)])
			return;
		for (i = 0; i < out->n; i++)
			if (tc_grad_same_read(out->v[i], e->ref_id, e))
				return;
		if (tc_vec_push(out, (void *)e) < 0)
			g->failed = 1;
		return;
	}
	if (e->kind == TC_AST_IDENT && e->ref == TC_REF_TENSOR &&
		g->need[tc_grad_val_of_read(g, e)]) {
		for (i = 0; i < out->n; i++)
			if (((tc_expr *)out->v[i])->ref_id == e->ref_id)
				return;
		if (tc_vec_push(out, (void *)e) < 0)
			g->failed = 1;
		return;
	}
	for (i = 0; i < e->nargs; i++)
		collect_reads(g, e->args[i], out);
}

/* e with every subtree that is target itself (the same node, which the
 * derivative table reuses: exp's derivative is the call exp(x)) replaced by
 * repl; the nodes on the way are copied, those of the forward def are never
 * changed.  *hit tells whether a replacement was made. */
static tc_expr *substitute(grad_ctx *g, tc_expr *e, const tc_expr *target, tc_expr *repl,
	int *hit)
{
	tc_expr *c, *args[3];
	int i, changed = 0;
	if (e == target) {
		*hit = 1;
		return repl;
	}
	if (e->kind == TC_AST_CALL && e->ref != TC_REF_BUILTIN)
		return e; /* a read: its subscripts are index variables */
	if (e->nargs > 3)
		return e;
	for (i = 0; i < e->nargs; i++) {
		args[i] = substitute(g, e->args[i], target, repl, hit);
		changed |= args[i] != e->args[i];
	}
	if (!changed || !(c = tc_grad_mk_node(g, e->kind, e->nargs)))
		return e;
	c->op = e->op;
	c->name = e->name;
	c->ref = e->ref;
	c->ref_id = e->ref_id;
	c->cast_type = e->cast_type;
	c->ival = e->ival;
	c->fval = e->fval;
	for (i = 0; i < e->nargs; i++)
		c->args[i] = args[i];
	return c;
}

/* Whether e has a part typed dt: a node of the forward def other than a
 * literal (a literal's type was its context's there: 67 in pow(67, x) is
 * x's type, but alone in log(67) an integer). */
static int has_type(const tc_expr *e, tc_dtype dt)
{
	int i;
	if (e->type == dt && e->kind != TC_AST_INT && e->kind != TC_AST_FLOAT)
		return 1;
	for (i = 0; i < e->nargs; i++)
		if (has_type(e->args[i], dt))
			return 1;
	return 0;
}

/* Whether e has a floating-point part of another type than dt: a node of
 * the forward def of another type, or, where dt is narrower than float32,
 * a floating-point literal built here (untyped; float32 in the printed
 * text) or a builtin call built here on integers and literals alone
 * (float32 too: log(67) in the derivative of pow(67, x), fuzz_diff seed
 * 20261203 case 8170, where the text did not check); or a cast built here
 * to another floating-point type. */
static int other_float(const tc_expr *e, tc_dtype dt)
{
	int i;
	if (tc_grad_is_float(e->type) && e->type != dt)
		return 1;
	if (e->kind == TC_AST_FLOAT && e->type == TC_T_NONE && tc_dtype_bits(dt) < 32)
		return 1;
	if (e->kind == TC_AST_CALL && e->ref == TC_REF_BUILTIN && e->type == TC_T_NONE &&
		tc_dtype_bits(dt) < 32 && !has_type(e, dt))
		return 1;
	/* a cast built here (an integer operand of a float64 division made
	 * float64: d_O / float64(G(i)) stored into a float32 d_A, fuzz_diff
	 * seed 20261206 case 1175) */
	if (e->kind == TC_AST_CAST && e->type == TC_T_NONE && tc_grad_is_float(e->cast_type) &&
		e->cast_type != dt)
		return 1;
	for (i = 0; i < e->nargs; i++)
		if (other_float(e->args[i], dt))
			return 1;
	return 0;
}

/* Whether the derivative p of statement s, stored into an adjoint of type
 * dt, may compute in another floating-point type: d_T has T's type, the
 * nodes of p taken from the forward def carry their types (the nodes built
 * here have none, and are constants or reads of d_T).  Then it is cast to
 * dt, as the language asks of a narrowing store. */
static int needs_cast(const grad_ctx *g, const tc_stmt *s, const tc_expr *p, tc_dtype dt)
{
	return g->def->tensors[s->tensor].dtype != dt || other_float(p, dt);
}

/* A summed index that nothing of derived statement b mentions but its own
 * where range (the forward's sum over r0 of a term without r0, whose
 * derivative does not read r0 either) is no index of b, which the
 * language refuses: its range goes, and a sum's value is multiplied by
 * its count, hi - lo (max(0, hi - lo) where the sizes do not show it
 * positive; a maximum or minimum is the same without it).  0, or -1 when
 * out of memory. */
static int fold_unused_ranges(grad_ctx *g, tc_stmt *b)
{
	int w, k, used;
	for (w = 0; w < b->nwhere; w++) {
		tc_where *r = &b->where[w];
		tc_expr *n;
		if (r->kind != TC_WHERE_RANGE || !r->lo || !r->hi)
			continue;
		used = tc_grad_mentions(b->rhs, r->name);
		for (k = 0; k < b->nidx && !used; k++)
			used = (b->idx && b->idx[k] && !strcmp(b->idx[k], r->name)) ||
				(b->sub && tc_grad_mentions(b->sub[k], r->name));
		for (k = 0; k < b->nwhere && !used; k++)
			used = k != w && (tc_grad_mentions(b->where[k].val, r->name) ||
				tc_grad_mentions(b->where[k].lo, r->name) ||
				tc_grad_mentions(b->where[k].hi, r->name));
		if (used)
			continue;
		if (b->red == TC_RED_ADD) {
			const tc_sexpr *lo = tc_range_sexpr(g->ar, r->lo);
			const tc_sexpr *hi = tc_range_sexpr(g->ar, r->hi), *cnt, *m1;
			if (!lo || !hi)
				continue; /* bounds of other indices: left as they are */
			if (!(cnt = tc_sx_sub(g->ar, hi, lo)) ||
				!(m1 = tc_sx_sub(g->ar, cnt, tc_sx_const(g->ar, 1))))
				return -1;
			if (tc_sx_sign(m1) != 1 &&
				!(cnt = tc_sx_max(g->ar, tc_sx_const(g->ar, 0), cnt)))
				return -1;
			if (!(n = tc_grad_sx_expr(g, NULL, cnt)) ||
				!(b->rhs = tc_grad_mk_mul(g, b->rhs, n)))
				return -1;
		}
		for (k = w; k + 1 < b->nwhere; k++)
			b->where[k] = b->where[k + 1];
		b->nwhere--;
		w--;
	}
	return 0;
}

/* A new backward statement lhs(idx) red rhs (init: the '!'). */
/* A read of name at the left-hand subscripts of s: its index names, and
 * for a scatter its gathers (d_T(I(i), j)). */
static tc_expr *lhs_read(grad_ctx *g, const char *name, const tc_stmt *s)
{
	tc_expr *e;
	int i;
	if (!s->sub)
		return tc_grad_mk_read(g, name, s->nidx, s->idx);
	if (!(e = tc_grad_mk_node(g, TC_AST_CALL, s->nidx)))
		return NULL;
	e->name = name;
	for (i = 0; i < s->nidx; i++)
		if (!(e->args[i] = s->sub[i] ? s->sub[i] : tc_grad_mk_ident(g, s->idx[i])))
			return NULL;
	return e;
}

/* Append the backward temporary statement lhs(g->cur's left indices) red
 * rhs, with the where clauses rhs needs; 0 or -1. */
static int push_temp(grad_ctx *g, const char *lhs, tc_red red, tc_expr *rhs)
{
	const tc_stmt *s = g->cur;
	tc_stmt *b;
	int v;
	if (!lhs || !rhs || !(b = tc_grad_mk_stmt(g, lhs, s->nidx, s->idx, red, !s->sub, rhs)))
		return -1;
	b->sub = s->sub; /* a scatter's: after a statement giving the shape */
	for (v = 0; v < s->nwhere; v++)
		g->let_used[v] = 0;
	tc_grad_mark_lets(g, rhs);
	if (tc_grad_attach_where(g, b, 0, NULL) < 0)
		return -1;
	tc_grad_mark_temps(g, rhs);
	if (tc_vec_push(&g->stmts, b) < 0)
		return -1;
	return 0;
}

/* A name for a backward temporary, prefix_T, that the def does not use
 * (a number is appended where it does). */
static const char *fresh_name(grad_ctx *g, const char *prefix, const char *t)
{
	char buf[256];
	int k;
	snprintf(buf, sizeof(buf), "%s_%s", prefix, t);
	for (k = 2; tc_grad_name_taken(g->def, buf) && k < 1000; k++)
		snprintf(buf, sizeof(buf), "%s_%s_%d", prefix, t, k);
	return tc_arena_strdup(g->ar, buf);
}

/* The read of the forward statement's own tensor at its left indices,
 * which then is an input of the backward def (an output) or recomputed
 * (a temporary). */
static tc_expr *own_read(grad_ctx *g)
{
	tc_grad_use_value(g, g->stmt_val[g->cur_si]);
	return lhs_read(g, g->cur->lhs, g->cur);
}

/* For max=! and min=!: the condition under which the adjoint of the right
 * side flows, after a backward temporary that finds the first position
 * (in the interpreter's order: the reduction indices in order,
 * lexicographically) whose value is the result:
 *
 *   argmax_T(i) min=! e == T(i) ? int64(k0) * K1 + int64(k1) : <int64 max>
 *
 * and then the gradient flows where int64(k0) * K1 + int64(k1) ==
 * argmax_T(i).  Where the window's extents are constants and the
 * positions fewer than 2^31 - 1, they are int32, the sentinel its maximum
 * (4 bytes per output, not 8).  Not int8: x86 has no 8-bit conditional
 * move, so LLVM chose an int8 position with a branch, which the data
 * decides (which element of a pooling window is its maximum) and which
 * mispredicts about once a window: max-pool's derived backward on real
 * outputs took 1.64-1.70 ms with int8 positions, 0.85-0.87 with int32
 * (the hand-written one 0.80-0.86; 16x64x56x56, two threads).  A scatter's (T(I(i)) max=! e) numbers its indices that
 * no left-hand name is (i), in the same order, and its temporary is a
 * scatter too, after a statement that gives it T's shape:
 *
 *   argmax_T(i0) = <int64 max> where i0 in 0:V
 *   argmax_T(I(i)) min= e == T(I(i)) ? int64(i) : <int64 max>
 *
 * NULL with nothing emitted when there are no reduction indices (T is
 * e). */
static tc_stmt *fill_stmt(grad_ctx *g, const char *name, int t, const char *from);

static tc_expr *arg_gate(grad_ctx *g)
{
	const tc_stmt *s = g->cur;
	const tc_tensor_info *ti = &g->def->tensors[s->tensor];
	tc_expr *lin = NULL, *e = s->rhs, *rhs, *arg, **ext;
	const char *name;
	int64_t wc = 1, top = INT64_MAX;
	tc_dtype at = TC_T_I64;
	int v, j, next = 0, nl = tc_stmt_nlhs(s);
	if (s->nvars == nl)
		return NULL;
	if (!(ext = tc_arena_alloc(g->ar, (size_t)s->nvars * sizeof(*ext))))
		return NULL;
	/* the type of the positions: int32 where its maximum exceeds
	 * every position, where the extents are constants */
	for (v = s->nvars - 1; v >= nl; v--) {
		const tc_sexpr *x = tc_sx_sub(g->ar, s->vars[v].hi, s->vars[v].lo);
		int64_t c;
		if (!x)
			return NULL;
		if (!tc_sx_is_const(x, &c) || c < 0 || __builtin_mul_overflow(wc, c, &wc)) {
			wc = INT64_MAX;
			break;
		}
	}
	if (wc <= INT32_MAX) /* not narrower: see above */
		at = TC_T_I32, top = INT32_MAX;
	wc = 1;
	/* lin = sum of k_j * (product of the extents after j), from the last;
	 * the products are int64 from their first factor int64(k_j) on */
	for (v = s->nvars - 1; v >= nl; v--) {
		const tc_sexpr *x = tc_sx_sub(g->ar, s->vars[v].hi, s->vars[v].lo);
		tc_expr *term = tc_grad_mk_cast(g, at, tc_grad_mk_ident(g, s->vars[v].name));
		int64_t c;
		if (!x)
			return NULL;
		if (wc != 1)
			term = tc_grad_mk_bin(g, TC_AOP_MUL, term, tc_grad_mk_int(g, wc));
		for (j = 0; j < next; j++)
			term = tc_grad_mk_bin(g, TC_AOP_MUL, term, ext[j]);
		lin = lin ? tc_grad_mk_bin(g, TC_AOP_ADD, term, lin) : term;
		if (!tc_sx_is_const(x, &c))
			ext[next++] = tc_grad_sx_expr(g, s, x);
		else if (__builtin_mul_overflow(wc, c, &wc)) {
			tc_error(g->d, s->op_loc, "gradient: the reduction of '%s' has more than "
				"2^63 terms; its arg-%s cannot be numbered", s->lhs,
				s->red == TC_RED_MAX ? "max" : "min");
			g->failed = 1;
			return NULL;
		}
	}
	if (e->type != ti->dtype)
		e = tc_grad_mk_cast(g, ti->dtype, e);
	rhs = tc_grad_mk_ternary(g, tc_grad_mk_bin(g, TC_AOP_EQ, e, own_read(g)), lin,
		tc_grad_mk_int(g, top));
	name = fresh_name(g, s->red == TC_RED_MAX ? "argmax" : "argmin", s->lhs);
	if (s->sub) { /* the shape first: a scatter does not define it */
		tc_stmt *f = fill_stmt(g, name, s->tensor, NULL);
		if (!f || !(f->rhs = tc_grad_mk_cast(g, at, tc_grad_mk_int(g, top))) ||
			tc_vec_push(&g->stmts, f) < 0)
			return NULL;
	}
	if (push_temp(g, name, TC_RED_MIN, rhs) < 0)
		return NULL;
	arg = lhs_read(g, name, s);
	return tc_grad_mk_bin(g, TC_AOP_EQ, lin, arg);
}

/* For *=!: the product of the other factors, exact where factors are
 * zero, after two backward temporaries (the number of zero factors and
 * the product of the others):
 *
 *   zeros_T(i) +=! e == 0.0 ? 1 : 0
 *   prodnz_T(i) *=! e == 0.0 ? 1.0 : e
 *
 * giving zeros_T(i) == 0 ? prodnz_T(i) / e : (zeros_T(i) == 1 && e == 0.0 ?
 * prodnz_T(i) : 0.0).  NULL (the factor 1) without reduction indices. */
static tc_expr *product_factor(grad_ctx *g)
{
	const tc_stmt *s = g->cur;
	tc_expr *e = s->rhs, *iz, *z, *pnz;
	const char *zn, *pn;
	if (s->nvars == s->nidx)
		return NULL;
	iz = tc_grad_mk_bin(g, TC_AOP_EQ, e, tc_grad_mk_float(g, 0.0));
	zn = fresh_name(g, "zeros", s->lhs);
	pn = fresh_name(g, "prodnz", s->lhs);
	if (push_temp(g, zn, TC_RED_ADD,
		tc_grad_mk_ternary(g, iz, tc_grad_mk_int(g, 1), tc_grad_mk_int(g, 0))) < 0 ||
		push_temp(g, pn, TC_RED_MUL,
			tc_grad_mk_ternary(g, iz, tc_grad_mk_float(g, 1.0), e)) < 0)
		return NULL;
	z = tc_grad_mk_read(g, zn, s->nidx, s->idx);
	pnz = tc_grad_mk_read(g, pn, s->nidx, s->idx);
	return tc_grad_mk_ternary(g, tc_grad_mk_bin(g, TC_AOP_EQ, z, tc_grad_mk_int(g, 0)),
		tc_grad_mk_bin(g, TC_AOP_DIV, pnz, e),
		tc_grad_mk_ternary(g,
			tc_grad_mk_bin(g, TC_AOP_AND,
				tc_grad_mk_bin(g, TC_AOP_EQ, z, tc_grad_mk_int(g, 1)), iz), pnz,
			NULL));
}

/* Whether e reads tensor t. */
static int reads_tensor(const tc_expr *e, int t)
{
	int i;
	if ((e->kind == TC_AST_CALL || e->kind == TC_AST_IDENT) && e->ref == TC_REF_TENSOR &&
		e->ref_id == t)
		return 1;
	for (i = 0; i < e->nargs; i++)
		if (reads_tensor(e->args[i], t))
			return 1;
	return 0;
}

/* The number of statements that read value v (in their right side or
 * where clauses, or as the earlier value of an in-place +=, max= or min=). */
static int value_readers(const grad_ctx *g, int v)
{
	int si, w, t = g->val_t[v], n = 0;
	for (si = 0; si < g->def->nstmts; si++) {
		const tc_stmt *s = g->def->stmts[si];
		int hit;
		if (read_val(g, si, t) != v)
			continue;
		hit = reads_tensor(s->rhs, t) || (s->tensor == t && s->red != TC_RED_ASSIGN && !s->init);
		for (w = 0; w < s->nwhere && !hit; w++)
			hit = s->where[w].kind != TC_WHERE_RANGE && reads_tensor(s->where[w].val, t);
		n += hit;
	}
	return n;
}

/* Whether the adjoint of value v, whose first contribution is a copy of
 * the adjoint of value w at the same indices, can be that adjoint itself
 * (no copy): v is computed in the forward (not an input, whose adjoint is
 * returned), of w's type, and w's adjoint can take v's later
 * contributions (it is not the given input d_O, or nothing else reads v). */
static int alias_adjoint(grad_ctx *g, int v, int w)
{
	const tc_def *def = g->def;
	int tw = g->val_t[w];
	if (g->ncontrib[v] || def->tensors[g->val_t[v]].kind == TC_TENSOR_INPUT ||
		def->tensors[g->val_t[v]].dtype != def->tensors[tw].dtype)
		return 0;
	if (g->adj[w] == g->given[tw] && value_readers(g, v) > 1)
		return 0;
	g->adj[v] = g->adj[w];
	g->ncontrib[v] = 1;
	g->have[v] = 1;
	return 1;
}

/* The statement name(i0, ...) = 0.0 (or = from(i0, ...)) where i0 in 0:N0,
 * ... over the extents of tensor t: the adjoint of an input whose gradient
 * is zero, of a tensor read over part of its extent or scattered into (the
 * reads' statements then add to it), or the copy of a given adjoint that
 * statements add to. */
static tc_stmt *fill_stmt(grad_ctx *g, const char *name, int t, const char *from)
{
	const tc_tensor_info *ti = &g->def->tensors[t];
	tc_stmt *b = tc_arena_alloc(g->ar, sizeof(*b));
	int i;
	if (!b)
		return NULL;
	b->lhs = name;
	b->nidx = b->nwhere = ti->ndim;
	b->idx = tc_arena_alloc(g->ar, (size_t)(ti->ndim + 1) * sizeof(*b->idx));
	b->where = tc_arena_alloc(g->ar, (size_t)(ti->ndim + 1) * sizeof(*b->where));
	if (!b->idx || !b->where)
		return NULL;
	for (i = 0; i < ti->ndim; i++) {
		char nm[32];
		snprintf(nm, sizeof(nm), "i%d", i);
		b->idx[i] = tc_arena_strdup(g->ar, nm);
		b->where[i].kind = TC_WHERE_RANGE;
		b->where[i].name = b->idx[i];
		b->where[i].lo = tc_grad_mk_int(g, 0);
		b->where[i].hi = tc_grad_sx_expr(g, NULL, ti->ext[i]);
		if (!b->idx[i] || !b->where[i].lo || !b->where[i].hi)
			return NULL;
	}
	b->rhs = from ? tc_grad_mk_read(g, from, ti->ndim, b->idx) : tc_grad_mk_float(g, 0.0);
	/* the adjoint of a temporary takes its type from this first write,
	 * a float32 literal's where nothing else is said (an input's is an
	 * output of declared type) */
	if (!from && b->rhs && ti->kind != TC_TENSOR_INPUT && ti->dtype != TC_T_F32)
		b->rhs = tc_grad_mk_cast(g, ti->dtype, b->rhs);
	return b->rhs ? b : NULL;
}

/* Where value xv (of tensor x) has no contribution yet, its adjoint set to
 * zero over x's extents first, so that the statements that follow add to
 * it.  0, or -1 when out of memory. */
static int zero_first(grad_ctx *g, int x, int xv)
{
	tc_stmt *z;
	if (g->ncontrib[xv])
		return 0;
	if (!(z = fill_stmt(g, g->adj[xv], x, NULL)) || tc_vec_push(&g->stmts, z) < 0)
		return -1;
	g->ncontrib[xv]++;
	return 0;
}

/* The adjoint of value v gets the contribution dt, an expression at the
 * left indices of g->cur (which cover v's whole tensor) that is not a copy
 * of g->cur's adjoint (so never an alias of it). */
static void chain_gated(grad_ctx *g, int v, tc_expr *dt)
{
	const tc_stmt *s = g->cur;
	tc_stmt *b = tc_grad_mk_stmt(g, g->adj[v], s->nidx, s->idx,
		g->ncontrib[v] ? TC_RED_ADD : TC_RED_ASSIGN, 0, dt);
	if (!b || !dt || tc_vec_push(&g->stmts, b) < 0 || tc_vec_push(&g->whole, b) < 0) {
		g->failed = 1;
		return;
	}
	g->ncontrib[v]++;
	g->have[v] = 1;
}

/* The adjoint of value v gets the contribution dt (a read at the left
 * indices of g->cur, which cover v's whole tensor), when it is wanted. */
static void chain_adjoint(grad_ctx *g, int v, tc_expr *dt)
{
	const tc_stmt *s = g->cur;
	tc_stmt *b;
	if (!g->need[v] || alias_adjoint(g, v, g->stmt_val[g->cur_si]))
		return;
	/* a scatter's earlier version: every element, not the ones it names */
	if (s->sub && (b = fill_stmt(g, g->adj[v], s->tensor, g->adj[g->stmt_val[g->cur_si]])))
		b->red = g->ncontrib[v] ? TC_RED_ADD : TC_RED_ASSIGN;
	else if (!s->sub)
		b = tc_grad_mk_stmt(g, g->adj[v], s->nidx, s->idx,
			g->ncontrib[v] ? TC_RED_ADD : TC_RED_ASSIGN, 0, dt);
	if (!b || tc_vec_push(&g->stmts, b) < 0 || tc_vec_push(&g->whole, b) < 0) {
		g->failed = 1;
		return;
	}
	g->ncontrib[v]++;
	g->have[v] = 1;
}

/* Whether the read r has the left-hand indices of s as subscripts, in
 * order. */
static int same_subscripts(const tc_expr *r, const tc_stmt *s)
{
	int i;
	if (r->nargs != s->nidx || s->sub)
		return 0;
	for (i = 0; i < s->nidx; i++)
		if (strcmp(r->args[i]->name, s->idx[i]))
			return 0;
	return 1;
}

/* The contributions of forward statement si to the wanted adjoints. */
static void backward_stmt(grad_ctx *g, int si)
{
	const tc_def *def = g->def;
	const tc_stmt *s = g->ss[si];
	tc_vec reads = {0};
	tc_expr *dt, *first_p = NULL, *first_read = NULL, *gate = NULL, *factor = NULL;
	tc_expr *prev_gate = NULL;
	int i, v, w = g->stmt_val[si], nextra, *extra, whole;
	if (!g->have[w])
		return;
	if (!(extra = tc_arena_alloc(g->ar, (size_t)(s->nvars + 1) * sizeof(*extra))))
		return;
	collect_reads(g, s->rhs, &reads);
	for (i = 0; i < s->nwhere; i++)
		if (s->where[i].kind == TC_WHERE_LET)
			collect_reads(g, s->where[i].val, &reads);
	g->cur = s;
	g->cur_si = si;
	if (s->nwhere && !(g->let_used = tc_arena_alloc(g->ar, (size_t)s->nwhere * sizeof(int))))
		return;
	dt = lhs_read(g, g->adj[w], s);
	/* an in-place T(i) += e: the earlier version's adjoint is T's */
	if (s->red == TC_RED_ADD && !s->init && def->tensors[s->tensor].first_write != si)
		chain_adjoint(g, read_val(g, si, s->tensor), dt);
	/* an in-place T(i) max= e: the earlier version is the first term, so
	 * it gets the gradient where it attains the result (ties included),
	 * and e's terms only where it does not */
	if ((s->red == TC_RED_MAX || s->red == TC_RED_MIN) && !s->init &&
		def->tensors[s->tensor].first_write != si) {
		int u = read_val(g, si, s->tensor);
		tc_expr *prev = tc_grad_mk_read(g, g->vname[u], s->nidx, s->idx);
		if (g->need[u]) {
			tc_grad_use_value(g, u);
			chain_gated(g, u,
				tc_grad_mk_ternary(g,
					tc_grad_mk_bin(g, TC_AOP_EQ, prev, own_read(g)), dt,
				NULL));
		}
		if (reads.n) {
			tc_grad_use_value(g, u);
			prev_gate = tc_grad_mk_bin(g, TC_AOP_NE, prev, own_read(g));
		}
	}
	if (reads.n && (s->red == TC_RED_MAX || s->red == TC_RED_MIN))
		gate = tc_grad_mk_and(g, arg_gate(g), prev_gate);
	else if (reads.n && s->red == TC_RED_MUL)
		factor = product_factor(g);
	for (i = 0; i < reads.n && !g->failed; i++) {
		const tc_expr *r = reads.v[i];
		int x = r->ref_id, xv = tc_grad_val_of_read(g, r), full;
		const char **idx;
		tc_expr *p = tc_grad_diff(g, s->rhs, x, r);
		tc_stmt *b;
		if (!p)
			continue;
		/* the derivative of T(idx) = f(...) may contain f(...) itself (exp,
		 * tanh, sqrt, pow): read T(idx) instead, a recomputed temporary or a
		 * forward output passed to the backward def */
		if (s->red == TC_RED_ASSIGN) {
			int hit = 0;
			tc_expr *tr = tc_grad_mk_read(g, s->lhs, s->nidx, s->idx);
			if (tr)
				p = substitute(g, p, s->rhs, tr, &hit);
			if (hit)
				tc_grad_use_value(g, w);
		}
		/* the same for a let's value: read the let */
		for (v = 0; v < s->nwhere; v++)
			if (s->where[v].kind == TC_WHERE_LET) {
				int hit = 0;
				tc_expr *id = tc_grad_mk_ident(g, s->where[v].name);
				if (id) {
					id->ref = TC_REF_LET;
					id->ref_id = v;
					p = substitute(g, p, s->where[v].val, id, &hit);
				}
			}
		if (factor)
			p = tc_grad_mk_mul(g, factor, p);
		p = tc_grad_mk_mul(g, dt, p);
		if (gate)
			p = tc_grad_mk_ternary(g, gate, p, NULL);
		/* a read with other subscripts than distinct index variables, or
		 * whose variables may range outside the tensor (under ?:) */
		if (!tc_grad_plain_read(g, r) || !tc_grad_read_within(g, r, x)) {
			int unsolvable = 0, gathered = tc_grad_gathered_read(g, r);
			tc_stmt *b = gathered ? NULL : tc_grad_gather_stmt(g, r, x, xv, p,
				&unsolvable);
			/* a gathered subscript (LUT(I(i), j)), or one that no index
			 * can be solved for (2 * i, i % N): the scatter d_X(...) +=! p,
			 * only where the forward reads X(...) (its subscripts are
			 * evaluated at every point of a scatter's domain) */
			if ((gathered || unsolvable) && !g->failed) {
				int found;
				tc_expr *when = tc_grad_path_cond(g, s->rhs, r, &found);
				/* a scatter does not define a shape: the adjoint of a
				 * temporary (or of a version) is given its own first,
				 * zero, and the scatter adds to it; an input's adjoint
				 * is an output of declared shape */
				if (def->tensors[x].kind != TC_TENSOR_INPUT && zero_first(g, x, xv) < 0) {
					g->failed = 1;
					break;
				}
				b = tc_grad_scatter_stmt(g, r, xv, tc_grad_guarded(g, when, p),
					when && tc_grad_reads_any(when) ? when : NULL);
			}
			if (!b)
				break;
			if (needs_cast(g, s, b->rhs, def->tensors[x].dtype))
				b->rhs = tc_grad_mk_cast(g, def->tensors[x].dtype, b->rhs);
			tc_grad_mark_temps(g, b->rhs);
			g->ncontrib[xv]++;
			g->have[xv] = 1;
			if (tc_vec_push(&g->stmts, b) < 0)
				g->failed = 1;
			continue;
		}
		/* a derivative equal to that of an earlier read of this statement
		 * whose adjoint it wrote whole ('='): read that adjoint (the
		 * gradient of b in fmax(T + b, 0) is d_T's, summed) */
		if (first_p && !tc_grad_expr_equal(p, dt) && tc_grad_expr_equal(p, first_p))
			p = first_read;
		/* the lets the derivative reads (through other lets too) */
		for (v = 0; v < s->nwhere; v++)
			g->let_used[v] = 0;
		tc_grad_mark_lets(g, p);
		/* every variable of s must be bounded by a read of the new
		 * statement in which it is a whole subscript, or a where clause
		 * copied to it; else it gets its range in s (the adjoint's extents
		 * would bound it only where no read does: I(2*w + kw) alone gives
		 * kw a larger range than W1(f,c,kh,kw) and I together did) */
		for (nextra = 0, v = 0; v < s->nvars; v++) {
			const char *name = s->vars[v].name;
			if (tc_grad_bounded_in(p, name) || tc_grad_bounded_where(g, name))
				continue;
			if (tc_sx_has_var(s->vars[v].lo) || tc_sx_has_var(s->vars[v].hi)) {
				tc_error(g->d, s->vars[v].loc,
					"gradient: the index '%s' is not bounded by any read of the "
					"derivative with respect to '%s'; not supported yet", name,
					def->tensors[x].name);
				g->failed = 1;
				break;
			}
			extra[nextra++] = v;
		}
		if (g->failed || !p)
			break;
		/* a pure copy (T(i) = T(i) + B(i) for the earlier value of T) */
		if (tc_grad_expr_equal(p, dt) && same_subscripts(r, s) && alias_adjoint(g, xv, w))
			continue;
		full = r->nargs == s->nvars;
		/* a read over part of X: d_X is zero, then the parts are added */
		for (v = 0; v < r->nargs; v++)
			if (!tc_grad_covers(s, tc_grad_var_of(s, r->args[v]->name),
				def->tensors[x].ext[v]))
				break;
		whole = full && v == r->nargs;
		if (v < r->nargs && zero_first(g, x, xv) < 0)
			break;
		idx = tc_arena_alloc(g->ar, (size_t)(r->nargs + 1) * sizeof(*idx));
		b = tc_arena_alloc(g->ar, sizeof(*b));
		if (!idx || !b)
			break;
		for (v = 0; v < r->nargs; v++)
			idx[v] = r->args[v]->name;
		b->lhs = g->adj[xv];
		b->nidx = r->nargs;
		b->idx = idx;
		if (g->ncontrib[xv]) {
			b->red = TC_RED_ADD;
		} else if (full) {
			b->red = TC_RED_ASSIGN;
			if (!first_p) {
				first_p = p;
				first_read = tc_grad_mk_read(g, g->adj[xv], r->nargs, idx);
			}
		} else {
			b->red = TC_RED_ADD;
			b->init = 1;
		}
		if (needs_cast(g, s, p, def->tensors[x].dtype)) {
			tc_expr *c = tc_grad_mk_node(g, TC_AST_CAST, 1);
			if (!c)
				break;
			c->cast_type = def->tensors[x].dtype;
			c->args[0] = p;
			p = c;
		}
		b->rhs = p;
		tc_grad_mark_temps(g, p);
		/* the statement's where ranges, and the lets it reads */
		if (tc_grad_attach_where(g, b, nextra, extra) < 0)
			break;
		g->ncontrib[xv]++;
		g->have[xv] = 1;
		for (v = 0; v < b->nwhere; v++)
			whole &= b->where[v].kind == TC_WHERE_RANGE;
		if (tc_vec_push(&g->stmts, b) < 0 || (whole && tc_vec_push(&g->whole, b) < 0))
			g->failed = 1;
	}
	tc_vec_free(&reads);
}

/* Whether b is one of the statements that write their whole tensor
 * pointwise. */
static int is_whole(const grad_ctx *g, const tc_stmt *b)
{
	int i;
	for (i = 0; i < g->whole.n; i++)
		if (g->whole.v[i] == b)
			return 1;
	return 0;
}

/* e with index names from[k] written to[k] (a simultaneous renaming). */
static tc_expr *rename_indices(grad_ctx *g, tc_expr *e, int n, const char *const *from,
	const char *const *to)
{
	tc_expr *c;
	int i, k;
	if (e->kind == TC_AST_IDENT && (e->ref == TC_REF_INDEX || e->ref == TC_REF_NONE))
		for (k = 0; k < n; k++)
			if (!strcmp(e->name, from[k])) {
				if (!strcmp(from[k], to[k]) || !(c = tc_grad_mk_ident(g, to[k])))
					return e;
				c->ref = e->ref;
				return c;
			}
	if (!e->nargs || !(c = tc_arena_alloc(g->ar, sizeof(*c))))
		return e;
	*c = *e;
	if (!(c->args = tc_arena_alloc(g->ar, (size_t)e->nargs * sizeof(*c->args))))
		return e;
	for (i = 0; i < e->nargs; i++)
		c->args[i] = rename_indices(g, e->args[i], n, from, to);
	return c;
}

/* Whether e reads a tensor that statement c writes. */
static int reads_written(const tc_expr *e, const tc_stmt *c)
{
	return tc_grad_reads_name(e, c->lhs);
}

/* Contributions to one adjoint that are whole pointwise statements, the
 * first written by = and a later one by +=, become one statement at the
 * later one's place, when nothing in between reads the adjoint or writes
 * what the first reads: d_e(n,c) = d_P(n,c) / s(n) and, after d_s,
 * d_e(n,c) += d_s(n) give d_e(n,c) = (d_P(n,c) / s(n)) + d_s(n) after d_s:
 * one pass instead of two. */
static void merge_contributions(grad_ctx *g)
{
	int j, i, k;
	for (j = 0; j < g->stmts.n; j++) {
		tc_stmt *b = g->stmts.v[j], *a = NULL;
		if (b->red != TC_RED_ADD || b->init || !is_whole(g, b))
			continue;
		for (i = j - 1; i >= 0; i--) {
			tc_stmt *c = g->stmts.v[i];
			if (!strcmp(c->lhs, b->lhs)) {
				a = c;
				break;
			}
		}
		if (!a || a->red != TC_RED_ASSIGN || !is_whole(g, a) || a->nidx != b->nidx)
			continue;
		for (k = i + 1; k < j; k++) {
			const tc_stmt *c = g->stmts.v[k];
			int w, hit = tc_grad_reads_name(c->rhs, b->lhs) || reads_written(a->rhs, c);
			for (w = 0; w < c->nwhere && !hit; w++)
				hit = c->where[w].kind != TC_WHERE_RANGE &&
					tc_grad_reads_name(c->where[w].val, b->lhs);
			if (hit)
				break;
		}
		if (k < j)
			continue;
		b->red = TC_RED_ASSIGN;
		b->rhs = tc_grad_mk_add(g, rename_indices(g, a->rhs, a->nidx, a->idx, b->idx),
			b->rhs);
		/* the ranges either gives its indices (renamed), once each */
		if (a->nwhere) {
			tc_where *w = tc_arena_alloc(g->ar, (size_t)(a->nwhere + b->nwhere) * sizeof(*w));
			int n = b->nwhere, u, q;
			if (!w) {
				g->failed = 1;
				return;
			}
			if (b->nwhere)
				memcpy(w, b->where, (size_t)b->nwhere * sizeof(*w));
			for (u = 0; u < a->nwhere; u++) {
				const char *name = a->where[u].name;
				for (q = 0; q < a->nidx; q++)
					if (!strcmp(name, a->idx[q]))
						name = b->idx[q];
				for (q = 0; q < n && strcmp(w[q].name, name); q++)
					;
				if (q == n) {
					w[n] = a->where[u];
					w[n++].name = name;
				}
			}
			b->where = w;
			b->nwhere = n;
		}
		for (k = i; k + 1 < g->stmts.n; k++)
			g->stmts.v[k] = g->stmts.v[k + 1];
		g->stmts.n--;
		j--;
	}
}

/* Whether e reads a tensor t with need[t] set. */
static int reads_needed(const grad_ctx *g, const tc_expr *e)
{
	int i;
	if ((e->kind == TC_AST_CALL || e->kind == TC_AST_IDENT) && e->ref == TC_REF_TENSOR)
		return g->need[tc_grad_val_of_read(g, e)];
	for (i = 0; i < e->nargs; i++)
		if (reads_needed(g, e->args[i]))
			return 1;
	return 0;
}

/* Whether s reads (in its right side or lets) a tensor whose adjoint is
 * needed. */
static int stmt_reads_needed(const grad_ctx *g, const tc_stmt *s)
{
	int i;
	if (reads_needed(g, s->rhs))
		return 1;
	for (i = 0; i < s->nwhere; i++)
		if (s->where[i].kind == TC_WHERE_LET && reads_needed(g, s->where[i].val))
			return 1;
	return 0;
}

/* A declaration named name of type dt with the extents of tensor t. */
static int mk_decl(grad_ctx *g, tc_decl *dc, const char *name, tc_dtype dt, int t)
{
	const tc_tensor_info *ti = &g->def->tensors[t];
	int i;
	dc->name = name;
	dc->dtype = dt;
	dc->has_shape = ti->ndim > 0;
	dc->ndims = ti->ndim;
	if (ti->ndim && !(dc->dims = tc_arena_alloc(g->ar, (size_t)ti->ndim * sizeof(tc_dim))))
		return -1;
	for (i = 0; i < ti->ndim; i++) {
		const tc_sexpr *x = ti->ext[i];
		if (x->kind == TC_SX_PARAM)
			dc->dims[i].name = g->def->sizes[x->id];
		else if (x->kind == TC_SX_CONST)
			dc->dims[i].value = x->c;
		else if (!(dc->dims[i].expr = tc_grad_sx_expr(g, NULL, x)))
			return -1;
	}
	return 0;
}

/* e with the reads of tensors written several times named by the value
 * statement si reads (nodes copied where a name changes). */
static tc_expr *rename_reads(grad_ctx *g, tc_expr *e, int si)
{
	tc_expr *c;
	const char *name = e->name;
	int i, changed = 0;
	tc_expr **args = NULL;
	if ((e->kind == TC_AST_CALL || e->kind == TC_AST_IDENT) && e->ref == TC_REF_TENSOR &&
		g->nver[e->ref_id] > 1)
		name = g->vname[read_val(g, si, e->ref_id)];
	if (e->nargs && !(args = tc_arena_alloc(g->ar, (size_t)e->nargs * sizeof(*args))))
		return e;
	for (i = 0; i < e->nargs; i++) {
		args[i] = rename_reads(g, e->args[i], si);
		changed |= args[i] != e->args[i];
	}
	if (!changed && name == e->name)
		return e;
	if (!(c = tc_arena_alloc(g->ar, sizeof(*c))))
		return e;
	*c = *e;
	c->name = name;
	if (e->nargs)
		c->args = args;
	return c;
}

/* Number the values (versions) of the def's tensors, name them, and make
 * g->ss: each statement with values' names.  0 or -1 (out of memory). */
static int make_values(grad_ctx *g)
{
	const tc_def *def = g->def;
	int nt = def->ntensors, si, v, t, k;
	g->nval = nt;
	for (si = 0; si < def->nstmts; si++)
		g->nval += def->tensors[def->stmts[si]->tensor].first_write != si;
#define ALLOC(f, n) (g->f = tc_arena_alloc(g->ar, (size_t)((n) + 1) * sizeof(*g->f)))
	if (!ALLOC(val_t, g->nval) || !ALLOC(final, g->nval) || !ALLOC(vname, g->nval) ||
		!ALLOC(nver, nt) || !ALLOC(stmt_val, def->nstmts) || !ALLOC(ss, def->nstmts) ||
		!ALLOC(given, nt) || !ALLOC(adj, g->nval) || !ALLOC(need, g->nval) ||
		!ALLOC(have, g->nval) || !ALLOC(ncontrib, g->nval) || !ALLOC(recompute, g->nval) ||
		!ALLOC(save, g->nval))
		return -1;
#undef ALLOC
	for (t = 0; t < nt; t++) {
		g->val_t[t] = t;
		g->nver[t] = 1;
		g->final[t] = 1;
	}
	for (k = nt, si = 0; si < def->nstmts; si++) {
		t = def->stmts[si]->tensor;
		if (def->tensors[t].first_write == si) {
			g->stmt_val[si] = t;
			continue;
		}
		g->final[read_val(g, si, t)] = 0;
		g->stmt_val[si] = k;
		g->val_t[k] = t;
		g->final[k] = 1;
		g->nver[t]++;
		k++;
	}
	for (v = 0; v < g->nval; v++) {
		const char *name = def->tensors[g->val_t[v]].name;
		char buf[256];
		size_t n;
		char *a;
		if (!g->final[v]) {
			/* version number: 1 + the earlier values of the tensor */
			int ver = 1, u;
			for (u = 0; u < v; u++)
				ver += g->val_t[u] == g->val_t[v];
			snprintf(buf, sizeof(buf), "v%d", ver);
			name = fresh_name(g, name, buf);
		}
		g->vname[v] = name;
		n = strlen(name) + 16;
		if (!name || !(a = tc_arena_alloc(g->ar, n)))
			return -1;
		/* d_X, or d_X_2, ... where the def (a backward def's own d_X
		 * output) or an earlier adjoint has the name */
		for (k = 1; k < 1000; k++) {
			int u, taken;
			if (k == 1)
				snprintf(a, n, "d_%s", name);
			else
				snprintf(a, n, "d_%s_%d", name, k);
			taken = tc_grad_name_taken(def, a);
			for (u = 0; u < v && !taken; u++)
				taken = !strcmp(g->adj[u], a);
			if (!taken)
				break;
		}
		g->adj[v] = a;
	}
	for (t = 0; t < nt; t++)
		g->given[t] = g->adj[t];
	for (si = 0; si < def->nstmts; si++) {
		const tc_stmt *s = def->stmts[si];
		tc_stmt *c;
		int w;
		if (!(c = tc_arena_alloc(g->ar, sizeof(*c))))
			return -1;
		*c = *s;
		/* a bool tensor's += and *= are any and all (6.7), as are max=
		 * and min=; written so, a version recomputed as a temporary of
		 * the backward def is bool too (O_v1 +=! B(i) > 0 would be an
		 * int32 count there, and O_v1 ? ... : ... no condition:
		 * fuzz_diff seed 20261205 case 802) */
		if (def->tensors[s->tensor].dtype == TC_T_BOOL &&
			(s->red == TC_RED_ADD || s->red == TC_RED_MUL))
			c->red = s->red == TC_RED_ADD ? TC_RED_MAX : TC_RED_MIN;
		c->lhs = g->vname[g->stmt_val[si]];
		c->rhs = rename_reads(g, s->rhs, si);
		if (s->sub) {
			int k;
			if (!(c->sub = tc_arena_alloc(g->ar, (size_t)s->nidx * sizeof(*c->sub))))
				return -1;
			for (k = 0; k < s->nidx; k++)
				c->sub[k] = s->sub[k] ? rename_reads(g, s->sub[k], si) : NULL;
		}
		if (s->nwhere && !(c->where = tc_arena_alloc(g->ar, (size_t)s->nwhere * sizeof(tc_where))))
			return -1;
		for (w = 0; w < s->nwhere; w++) {
			c->where[w] = s->where[w];
			if (s->where[w].kind != TC_WHERE_RANGE)
				c->where[w].val = rename_reads(g, s->where[w].val, si);
		}
		g->ss[si] = c;
	}
	return tc_arena_failed(g->ar) ? -1 : 0;
}

/* The value that the last statement writing tensor t writes. */
static int final_val(const grad_ctx *g, int t)
{
	return read_val(g, g->def->nstmts, t);
}

/* Append the forward statement si (with values' names) to out: an
 * in-place T(i) += e, whose value is new, is its copy of the earlier
 * value and then the sum. */
static int push_forward(grad_ctx *g, int si, tc_stmt **out, int *n)
{
	const tc_stmt *s = g->ss[si];
	if (s->red != TC_RED_ASSIGN && !s->init && g->def->tensors[s->tensor].first_write != si) {
		const char *prev = g->vname[read_val(g, si, s->tensor)];
		tc_stmt *c = s->sub ? fill_stmt(g, s->lhs, s->tensor, prev)
				    : tc_grad_mk_stmt(g, s->lhs, s->nidx, s->idx, TC_RED_ASSIGN, 0,
					    tc_grad_mk_read(g, prev, s->nidx, s->idx));
		if (!c || !c->rhs)
			return -1;
		out[(*n)++] = c;
	}
	out[(*n)++] = (tc_stmt *)s;
	return 0;
}

__tc_give tc_def *tc_grad_derive(__tc_keep tc_arena *ar, __tc_keep const tc_def *def,
	__tc_keep const char *const *wrt, int nwrt, int saves, __tc_give tc_def **fwd,
	__tc_keep tc_diags *d)
{
	grad_ctx g = {0};
	tc_def *out = NULL;
	int nin = def->ninputs, nio = def->ninputs + def->noutputs;
	int i, t, v, changed, nret, nfwd, nsaved = 0;

	*fwd = NULL;
	g.ar = ar;
	g.def = def;
	g.d = d;
	if (!def->ok) {
		tc_error(d, def->name_loc, "gradient: '%s' has errors", def->name);
		return NULL;
	}
	for (i = 0; i < def->nstmts && !g.failed; i++)
		check_stmt(&g, i);
	if (g.failed)
		return NULL;
	if (make_values(&g) < 0)
		goto error;
	/* outputs: the floating-point ones' adjoints are given (their final
	 * values'); an integer or bool output has none (its gradient is zero),
	 * and a def with no floating-point output has nothing to differentiate */
	for (t = nin; t < nio && !tc_grad_is_float(def->tensors[t].dtype); t++)
		;
	if (t == nio) {
		tc_error(d, def->tensors[nin].loc,
			"gradient: output '%s' is %s; only floating-point outputs can be "
			"differentiated, and '%s' has none", def->tensors[nin].name,
			tc_dtype_name(def->tensors[nin].dtype), def->name);
		g.failed = 1;
	}
	for (t = nin; t < nio; t++) {
		if (!tc_grad_is_float(def->tensors[t].dtype))
			continue;
		v = final_val(&g, t);
		g.given[t] = g.adj[v];
		g.have[v] = 1;
	}
	/* the inputs asked for */
	for (i = 0; i < nwrt; i++) {
		for (t = 0; t < nin; t++)
			if (!strcmp(def->tensors[t].name, wrt[i]))
				break;
		if (t == nin) {
			tc_buf b;
			tc_buf_init(&b);
			for (t = 0; t < nin; t++)
				tc_buf_printf(&b, "%s%s", t ? ", " : "", def->tensors[t].name);
			tc_error(d, def->name_loc, "gradient: '%s' is not an input of '%s' (its inputs: %s)",
				wrt[i], def->name, b.s ? b.s : "");
			tc_buf_free_diag(&b, d);
			g.failed = 1;
		} else if (!tc_grad_is_float(def->tensors[t].dtype)) {
			tc_error(d, def->tensors[t].loc,
				"gradient: input '%s' is %s; only floating-point inputs have a gradient",
				wrt[i], tc_dtype_name(def->tensors[t].dtype));
			g.failed = 1;
		} else {
			g.need[t] = 1;
		}
	}
	if (!nwrt)
		for (t = 0; t < nin; t++)
			g.need[t] = tc_grad_is_float(def->tensors[t].dtype);
	if (g.failed)
		goto error;
	/* values whose adjoint is needed: those computed from a needed one (an
	 * in-place += includes the earlier value) */
	do {
		changed = 0;
		for (i = 0; i < def->nstmts; i++) {
			const tc_stmt *s = g.ss[i];
			int w = g.stmt_val[i];
			if (g.need[w] || !tc_grad_is_float(def->tensors[s->tensor].dtype))
				continue;
			if (stmt_reads_needed(&g, s) || (s->red != TC_RED_ASSIGN && !s->init &&
				def->tensors[s->tensor].first_write != i && g.need[read_val(&g, i, s->tensor)])) {
				g.need[w] = 1;
				changed = 1;
			}
		}
	} while (changed);
	/* an output that statements read: its adjoint is the given one plus
	 * what those statements add, in a copy */
	for (t = nin; t < nio; t++) {
		tc_stmt *c;
		v = final_val(&g, t);
		if (!tc_grad_is_float(def->tensors[t].dtype) || !value_readers(&g, v))
			continue;
		g.adj[v] = fresh_name(&g, g.given[t], "total");
		if (!g.adj[v] || !(c = fill_stmt(&g, g.adj[v], t, g.given[t])) ||
			tc_vec_push(&g.stmts, c) < 0)
			goto error;
		g.ncontrib[v] = 1;
	}
	for (i = def->nstmts - 1; i >= 0 && !g.failed; i--)
		backward_stmt(&g, i);
	if (g.failed)
		goto error;
	merge_contributions(&g);
	/* values read by recomputed values (saved ones are given) */
	do {
		if (saves)
			break;
		changed = 0;
		for (i = def->nstmts - 1; i >= 0; i--) {
			const tc_stmt *s = g.ss[i];
			if (g.recompute[g.stmt_val[i]]) {
				int before = 0, after = 0, w;
				for (v = 0; v < g.nval; v++)
					before += g.recompute[v] + g.save[v];
				tc_grad_mark_temps(&g, s->rhs);
				for (w = 0; w < s->nidx && s->sub; w++)
					if (s->sub[w])
						tc_grad_mark_temps(&g, s->sub[w]);
				for (w = 0; w < s->nwhere; w++)
					if (s->where[w].kind != TC_WHERE_RANGE)
						tc_grad_mark_temps(&g, s->where[w].val);
				if (s->red != TC_RED_ASSIGN && !s->init &&
					def->tensors[s->tensor].first_write != i)
					tc_grad_use_value(&g, read_val(&g, i, s->tensor));
				for (v = 0; v < g.nval; v++)
					after += g.recompute[v] + g.save[v];
				changed |= after != before;
			}
		}
	} while (changed);

	if (!(out = tc_arena_alloc(ar, sizeof(*out))))
		goto error;
	{
		size_t n = strlen(def->name) + 6;
		char *s = tc_arena_alloc(ar, n);
		if (!s)
			goto error;
		snprintf(s, n, "%s_grad", def->name);
		out->name = s;
	}
	/* inputs, the outputs (and with saves, the temporary values) the
	 * backward reads, the outputs' adjoints */
	out->nparams = def->nparams;
	for (t = nin; t < nio; t++)
		out->nparams += tc_grad_is_float(def->tensors[t].dtype);
	for (t = nin; t < nio; t++)
		out->nparams += g.save[final_val(&g, t)];
	for (nsaved = 0, v = 0; saves && v < g.nval; v++)
		nsaved += g.recompute[v];
	out->nparams += nsaved;
	out->params = tc_arena_alloc(ar, (size_t)(out->nparams + 1) * sizeof(tc_decl));
	if (!out->params)
		goto error;
	for (i = 0; i < def->nparams; i++)
		out->params[i] = def->params[i];
	for (t = nin; t < nio; t++)
		if (g.save[final_val(&g, t)] && mk_decl(&g, &out->params[i++], def->tensors[t].name,
			def->tensors[t].dtype, t) < 0)
			goto error;
	for (v = 0; saves && v < g.nval; v++)
		if (g.recompute[v] && mk_decl(&g, &out->params[i++], g.vname[v],
			def->tensors[g.val_t[v]].dtype, g.val_t[v]) < 0)
			goto error;
	for (t = nin; t < nio; t++)
		if (tc_grad_is_float(def->tensors[t].dtype) &&
			mk_decl(&g, &out->params[i++], g.given[t], def->tensors[t].dtype, t) < 0)
			goto error;
	for (nret = 0, t = 0; t < nin; t++)
		nret += g.need[t];
	out->nrets = nret;
	out->rets = tc_arena_alloc(ar, (size_t)(nret + 1) * sizeof(tc_decl));
	if (!out->rets)
		goto error;
	for (nret = 0, t = 0; t < nin; t++)
		if (g.need[t] && mk_decl(&g, &out->rets[nret++], g.adj[t], def->tensors[t].dtype, t) < 0)
			goto error;
	/* recomputed values, then the adjoint statements, then zeros */
	for (nfwd = 0, i = 0; i < def->nstmts && !saves; i++)
		nfwd += 2 * g.recompute[g.stmt_val[i]];
	out->nstmts = nfwd + g.stmts.n + nret;
	out->stmts = tc_arena_alloc(ar, (size_t)(out->nstmts + 1) * sizeof(tc_stmt *));
	if (!out->stmts)
		goto error;
	out->nstmts = 0;
	for (i = 0; i < def->nstmts && !saves; i++)
		if (g.recompute[g.stmt_val[i]] && push_forward(&g, i, out->stmts, &out->nstmts) < 0)
			goto error;
	for (i = 0; i < g.stmts.n; i++) {
		if (fold_unused_ranges(&g, g.stmts.v[i]) < 0)
			goto error;
		out->stmts[out->nstmts++] = g.stmts.v[i];
	}
	for (nret = 0, t = 0; t < nin; t++) {
		if (!g.need[t])
			continue;
		if (!g.have[t]) {
			tc_stmt *z = fill_stmt(&g, g.adj[t], t, NULL);
			if (!z)
				goto error;
			out->stmts[out->nstmts++] = z;
		}
		nret++;
	}
	/* the forward with saves: the forward def (with values' names)
	 * returning the temporary values */
	if (nsaved) {
		tc_def *f = tc_arena_alloc(ar, sizeof(*f));
		size_t n = strlen(def->name) + 5;
		char *s = tc_arena_alloc(ar, n);
		if (!f || !s)
			goto error;
		snprintf(s, n, "%s_fwd", def->name);
		f->name = s;
		f->nparams = def->nparams;
		f->params = def->params;
		if (!(f->stmts = tc_arena_alloc(ar, (size_t)(2 * def->nstmts + 1) * sizeof(tc_stmt *))))
			goto error;
		for (i = 0; i < def->nstmts; i++)
			if (push_forward(&g, i, f->stmts, &f->nstmts) < 0)
				goto error;
		f->nrets = def->nrets + nsaved;
		if (!(f->rets = tc_arena_alloc(ar, (size_t)f->nrets * sizeof(tc_decl))))
			goto error;
		for (i = 0; i < def->nrets; i++)
			f->rets[i] = def->rets[i];
		for (v = 0; v < g.nval; v++)
			if (g.recompute[v] && mk_decl(&g, &f->rets[i++], g.vname[v],
				def->tensors[g.val_t[v]].dtype, g.val_t[v]) < 0)
				goto error;
		*fwd = f;
	}
	tc_vec_free(&g.stmts);
	tc_vec_free(&g.whole);
	if (tc_arena_failed(ar))
		return NULL;
	return out;
error:
	tc_vec_free(&g.stmts);
	tc_vec_free(&g.whole);
	return NULL;
}
