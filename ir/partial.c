/* Partial results per thread: a column sum in chunks of rows.
 *
 * Layer norm's backward sums its columns over the rows,
 *     d_G(d) +=! d_Y(n,d) * xh(n,d)
 * while its other statements walk the same rows of d_Y one at a time
 * (d_X(n,d) = ...).  With one thread the schedule runs them all in one loop
 * over the rows, reading d_Y once (polyhedral/fusion.c,
 * tc_poly_fuse_reuse).  With T threads that loop cannot be shared: it
 * carries the column sums.  So the sum is written as T partial sums over
 * contiguous chunks of C = ceil(N / T) rows and their sum:
 *     d_G_part(n_t,d) +=! d_Y(C*n_t + n_q, d) * xh(C*n_t + n_q, d)
 *         where n_t in 0:T', n_q in 0:C        (C*n_t + n_q < N)
 *     d_G(d) +=! d_G_part(n_t,d)
 * (T' = ceil(N / C) chunks, none empty).  Each chunk's sum is then private
 * to the thread that runs the chunk: the schedule shares the rows' loop
 * among the statements again and hands the chunks to the threads
 * (polyhedral/parallel.c).  The tc_ir_stmt of the partial sum records C
 * and the first row (part_rows, part_lo).
 *
 * The sum then rounds in another order (chunks of rows, then the chunks'
 * sums): what the vecreduce option allows (docs/language.md, 6.8); with
 * vecreduce=off nothing is rewritten.  Integer sums, min and max give the
 * same value in any order.  Products are left alone (vecreduce keeps their
 * order).
 *
 * A statement qualifies when it is a +=, max= or min= reduction (no
 * scatter, no guard) over exactly one reduction index n, whose bounds are
 * constants at the bound sizes, with at least 4 rows per chunk and work
 * enough to share; it reads only the def's inputs (when one such sum reads
 * what the def computes, or another reduction of the def is neither such a
 * sum nor along rows, none is rewritten: tc_ir_partials), not its own
 * tensor, is no contraction that
 * reuses an operand across its outputs (a weight gradient: its register
 * tiles and blocks are the way to share it), and it reads a tensor of more
 * than half the L2 at rows n (a plain subscript k), its left-hand indices
 * at later subscripts only (columns: a row sum is not rewritten), which
 * another statement reads at rows of one of its left-hand indices over
 * the same range: the rows' statements it can share the loop with; or
 * whose rows are too short to split among the threads by columns
 * (short_rows: a bias gradient alone). */
#include "ir.h"
#include "target.h"

#include "../lang/sexpr.h"

#include <string.h>

#define MAX_VARS 64

/* Whether e reads tensor t with subscript k a plain index v, and, when
 * cols (a bit set of indices) is not 0, every index in cols only at later
 * subscripts, while using all of them. */
static int reads_rows(const tc_ir_expr *e, int t, int k, int v, uint64_t cols)
{
	int i;
	if (e->op == TC_OP_READ && e->id == t && k < e->nargs &&
		tc_ir_plain_var(e->args[k]) == v) {
		uint64_t later = 0;
		int early = 0, c;
		for (i = 0; i < e->nargs; i++)
			for (c = 0; c < MAX_VARS; c++)
				if (cols >> c & 1 && tc_ir_uses_var(e->args[i], c)) {
					if (i <= k)
						early = 1;
					else
						later |= (uint64_t)1 << c;
				}
		if (!early && later == cols)
			return 1;
	}
	for (i = 0; i < e->nargs; i++)
		if (reads_rows(e->args[i], t, k, v, cols))
			return 1;
	return 0;
}

/* Whether a statement of f but s reads tensor t at subscript k with one of
 * its left-hand indices ranging over [lo, hi). */
static int rows_reader(const tc_ir_func *f, const tc_ir_stmt *s, int t, int k, int64_t lo,
	int64_t hi, const int64_t *params)
{
	int i, v;
	for (i = 0; i < f->nstmts; i++) {
		const tc_ir_stmt *r = &f->stmts[i];
		if (r == s || r->sub)
			continue;
		for (v = 0; v < r->nlhs && v < MAX_VARS; v++) {
			int64_t a, b;
			if (tc_ir_var_range(&r->vars[v], params, &a, &b) && a == lo && b == hi &&
				reads_rows(r->rhs, t, k, v, 0))
				return 1;
		}
	}
	return 0;
}

/* Whether the rows of tensor t past subscript k (a column sum's rows, read
 * by rows at subscript k) are too short to split among tg's threads by
 * columns: each thread's part of a row less than two 4 KiB pages, where
 * the hardware prefetchers stop (they do not cross a page).  Such a sum
 * alone is then summed in chunks of rows too: column sums of 4096 x 1024
 * floats, two threads, 0.16 ms split by columns, 0.11 in chunks of rows;
 * 16384 x 256 0.24 and 0.068; 2048 x 2048 0.155 and 0.114; but 1024 x
 * 4096 0.13 and 0.15, 512 x 8192 0.17 and 0.21 (docs/performance.md,
 * "Column sums alone in chunks of rows"). */
static int short_rows(const tc_ir_func *f, int t, int k, const int64_t *params,
	const tc_target *tg)
{
	int64_t row = tc_ir_tail_bytes(f, t, k + 1, params);
	return row > 0 && row < 2 * 4096 * (int64_t)tg->threads;
}

/* Whether every read of e has its reduction indices (of s: from nlhs on)
 * only at subscripts after every one that uses a left-hand index: a
 * reduction along rows (R(n) +=! Y(n,d) * G(d)). */
static int along_rows(const tc_ir_stmt *s, const tc_ir_expr *e)
{
	int i, k, v;
	if (e->op == TC_OP_READ) {
		int last_lhs = -1, first_red = e->nargs;
		for (k = 0; k < e->nargs; k++)
			for (v = 0; v < s->nvars && v < MAX_VARS; v++)
				if (tc_ir_uses_var(e->args[k], v)) {
					if (v < s->nlhs)
						last_lhs = k;
					else if (k < first_red)
						first_red = k;
				}
		if (first_red <= last_lhs)
			return 0;
	}
	for (i = 0; i < e->nargs; i++)
		if (!along_rows(s, e->args[i]))
			return 0;
	return 1;
}

/* The rows per chunk for statement s of f at T threads (0: s does not
 * qualify, see the top of the file); *lo and *rows: the reduction index's
 * first row and count. */
static int64_t chunk_rows(const tc_ir_func *f, const tc_ir_stmt *s, const int64_t *params,
	const tc_target *tg, int64_t *lo, int64_t *rows, int *computed)
{
	const tc_ir_tensor *o = &f->tensors[s->tensor];
	uint64_t cols = 0;
	int64_t hi, c, work = 1, a, b;
	int n = s->nlhs, t, k, v, i;
	if (s->sub || s->guard || s->nvars != s->nlhs + 1 || s->nlhs < 1 || s->nvars > MAX_VARS ||
		(s->red != TC_RED_ADD && s->red != TC_RED_MAX && s->red != TC_RED_MIN) ||
		o->widened || tc_dtype_is_half(o->dtype) || o->dtype == TC_T_BOOL ||
		tc_ir_reads(s->rhs, s->tensor) || !tc_ir_var_range(&s->vars[n], params, lo, &hi))
		return 0;
	*rows = hi - *lo;
	c = (*rows + tg->threads - 1) / tg->threads;
	if (c < 4)
		return 0;
	for (v = 0; v < s->nlhs; v++) {
		if (!tc_ir_var_range(&s->vars[v], params, &a, &b) || b <= a)
			return 0;
		work *= b - a;
		cols |= (uint64_t)1 << v;
	}
	if ((double)work * (double)*rows < tg->parallel_min_instances ||
		(s->nlhs >= 2 && tc_ir_reused_read(s->rhs, cols)))
		return 0;
	/* whether it reads what another statement writes (see
	 * tc_ir_partials) */
	*computed = 0;
	for (i = 0; i < f->nstmts; i++)
		if (&f->stmts[i] != s && tc_ir_reads(s->rhs, f->stmts[i].tensor))
			*computed = 1;
	for (t = 0; t < f->ntensors; t++) {
		int64_t bytes = tc_ir_tail_bytes(f, t, 0, params);
		if (tg->l2_bytes <= 0 || bytes <= tg->l2_bytes / 2)
			continue;
		for (k = 0; k < f->tensors[t].ndim; k++)
			if (reads_rows(s->rhs, t, k, n, cols) &&
				(rows_reader(f, s, t, k, *lo, hi, params) ||
					short_rows(f, t, k, params, tg)))
				return c;
	}
	return 0;
}

/* A copy of e (in ar) with index v < n read as v + 1 and index n as
 * lo + c * t + q (t: index 0, q: index n + 1); NULL when out of memory. */
static tc_ir_expr *chunked(tc_arena *ar, const tc_ir_expr *e, int n, int64_t lo, int64_t c)
{
	tc_ir_expr *x;
	int k;
	if (e->op == TC_OP_INDEX && e->id == n) {
		tc_ir_expr *t = tc_ir_new_expr(ar, TC_OP_INDEX, TC_T_I32, e->loc, 0),
			   *q = tc_ir_new_expr(ar, TC_OP_INDEX, TC_T_I32, e->loc, 0),
			   *cc = tc_ir_new_expr(ar, TC_OP_CONST, TC_T_I32, e->loc, 0),
			   *mul = tc_ir_new_expr(ar, TC_OP_MUL, TC_T_I32, e->loc, 2),
			   *sum = tc_ir_new_expr(ar, TC_OP_ADD, TC_T_I32, e->loc, 2), *l;
		if (!t || !q || !cc || !mul || !sum)
			return NULL;
		t->id = 0;
		q->id = n + 1;
		cc->c.i = c;
		mul->args[0] = cc;
		mul->args[1] = t;
		sum->args[0] = mul;
		sum->args[1] = q;
		if (!lo)
			return sum;
		if (!(l = tc_ir_new_expr(ar, TC_OP_CONST, TC_T_I32, e->loc, 0)) ||
			!(x = tc_ir_new_expr(ar, TC_OP_ADD, TC_T_I32, e->loc, 2)))
			return NULL;
		l->c.i = lo;
		x->args[0] = l;
		x->args[1] = sum;
		return x;
	}
	if (!(x = tc_arena_alloc(ar, sizeof(*x))))
		return NULL;
	*x = *e;
	if (e->op == TC_OP_INDEX)
		x->id = e->id + 1;
	if (e->nargs && !(x->args = tc_arena_alloc(ar, (size_t)e->nargs * sizeof(*x->args))))
		return NULL;
	for (k = 0; k < e->nargs; k++)
		if (!(x->args[k] = chunked(ar, e->args[k], n, lo, c)))
			return NULL;
	return x;
}

/* A name for an index of s: base + suffix, unlike every index name of s. */
static const char *var_name(tc_arena *ar, const tc_ir_stmt *s, const char *base, const char *suffix)
{
	size_t lb = strlen(base), ls = strlen(suffix);
	char *name;
	int v, clash = 1, tries;
	for (tries = 0; clash && tries < 8; tries++) {
		if (!(name = tc_arena_alloc(ar, lb + ls + (size_t)tries + 1)))
			return NULL;
		memcpy(name, base, lb);
		memset(name + lb, '_', (size_t)tries);
		memcpy(name + lb + tries, suffix, ls + 1);
		for (clash = 0, v = 0; v < s->nvars && !clash; v++)
			clash = !strcmp(s->vars[v].name, name);
	}
	return clash ? NULL : name;
}

/* Write s (qualifying, c rows per chunk, rows from lo) into out[0], the
 * partial sums into tensor number part (filled here, of g), and out[1],
 * their sum into s's tensor.  0 when out of memory. */
static int split(tc_arena *ar, tc_ir_func *g, const tc_ir_stmt *s, int part, int64_t c,
	int64_t lo, int64_t rows)
{
	const tc_ir_tensor *o = &g->tensors[s->tensor];
	tc_ir_tensor *p = &g->tensors[part];
	tc_ir_stmt *ps = &g->stmts[g->nstmts], *cs = ps + 1;
	int64_t chunks = (rows + c - 1) / c;
	int n = s->nlhs, k;
	tc_ir_expr *rd;
	tc_ir_var *pv = tc_arena_alloc(ar, (size_t)(n + 2) * sizeof(*pv)),
		  *cv = tc_arena_alloc(ar, (size_t)(n + 1) * sizeof(*cv));
	const tc_sexpr **ext = tc_arena_alloc(ar, (size_t)(o->ndim + 1) * sizeof(*ext));
	if (!pv || !cv || !ext || !(ext[0] = tc_sx_const(ar, chunks)))
		return 0;
	/* the partial sums: o's shape after a dimension of chunks */
	*p = *o;
	p->kind = TC_TENSOR_TEMP;
	p->rowbuf = 0;
	p->panel = 0;
	p->ndim = o->ndim + 1;
	memcpy(ext + 1, o->ext, (size_t)o->ndim * sizeof(*ext));
	p->ext = ext;
	if (!(p->name = tc_ir_fresh_name(ar, g, o->name, "_part")))
		return 0;
	/* indices of the partial sums: n_t, s's left-hand ones, n_q */
	memset(&pv[0], 0, sizeof(pv[0]));
	pv[0].name = var_name(ar, s, s->vars[n].name, "_t");
	pv[0].lo = tc_sx_const(ar, 0);
	pv[0].hi = ext[0];
	memcpy(pv + 1, s->vars, (size_t)n * sizeof(*pv));
	pv[n + 1] = s->vars[n];
	pv[n + 1].name = var_name(ar, s, s->vars[n].name, "_q");
	pv[n + 1].lo = tc_sx_const(ar, 0);
	pv[n + 1].hi = tc_sx_const(ar, c);
	if (!pv[0].name || !pv[0].lo || !pv[n + 1].name || !pv[n + 1].lo || !pv[n + 1].hi)
		return 0;
	*ps = *s;
	ps->tensor = part;
	ps->nlhs = n + 1;
	ps->nvars = n + 2;
	ps->vars = pv;
	ps->init = 1;
	ps->part_rows = c;
	ps->part_lo = lo;
	if (!(ps->rhs = chunked(ar, s->rhs, n, lo, c)))
		return 0;
	if (chunks * c != rows) { /* the last chunk is short: c * n_t + n_q < rows */
		tc_ir_expr *t = tc_ir_new_expr(ar, TC_OP_INDEX, TC_T_I32, s->loc, 0),
			   *q = tc_ir_new_expr(ar, TC_OP_INDEX, TC_T_I32, s->loc, 0),
			   *cc = tc_ir_new_expr(ar, TC_OP_CONST, TC_T_I32, s->loc, 0),
			   *nr = tc_ir_new_expr(ar, TC_OP_CONST, TC_T_I32, s->loc, 0),
			   *mul = tc_ir_new_expr(ar, TC_OP_MUL, TC_T_I32, s->loc, 2),
			   *sum = tc_ir_new_expr(ar, TC_OP_ADD, TC_T_I32, s->loc, 2),
			   *lt = tc_ir_new_expr(ar, TC_OP_LT, TC_T_BOOL, s->loc, 2);
		if (!t || !q || !cc || !nr || !mul || !sum || !lt)
			return 0;
		t->id = 0;
		q->id = n + 1;
		cc->c.i = c;
		nr->c.i = rows;
		mul->args[0] = cc;
		mul->args[1] = t;
		sum->args[0] = mul;
		sum->args[1] = q;
		lt->args[0] = sum;
		lt->args[1] = nr;
		ps->guard = lt;
	}
	/* their sum: s's left-hand indices, then n_t */
	memcpy(cv, s->vars, (size_t)n * sizeof(*cv));
	cv[n] = pv[n + 1];
	cv[n].name = pv[0].name;
	cv[n].hi = ext[0];
	*cs = *s;
	cs->vars = cv;
	cs->nvars = n + 1;
	if (!(rd = tc_ir_new_expr(ar, TC_OP_READ, o->dtype, s->loc, n + 1)))
		return 0;
	rd->id = part;
	for (k = 0; k <= n; k++) {
		if (!(rd->args[k] = tc_ir_new_expr(ar, TC_OP_INDEX, TC_T_I32, s->loc, 0)))
			return 0;
		rd->args[k]->id = k < 1 ? n : k - 1;
	}
	cs->rhs = rd;
	g->nstmts += 2;
	g->ntensors++;
	return 1;
}

const tc_ir_func *tc_ir_partials(__tc_keep tc_arena *ar, __tc_keep const tc_ir_func *f,
	__tc_keep const int64_t *params, __tc_keep const tc_target *tg)
{
	tc_ir_func *g;
	struct { int64_t c, lo, rows; } *part;
	int i, n = 0;
	if (!f || !params || tg->threads < 2 || tc_ir_has_scatter(f))
		return f;
	if (!(part = tc_arena_alloc(ar, (size_t)(f->nstmts ? f->nstmts : 1) * sizeof(*part))))
		return NULL;
	/* every column sum or none: when one reads what the def computes
	 * (bench/kernels.tc's layernorm_bwd: its dG reads the rows' mean and
	 * rstd), none is rewritten, nor when another reduction is neither
	 * such a sum nor along rows (a column sum of other data, a
	 * contraction).  With dependences from the rows' statements into the
	 * partial sums' rows C * n_t + n_q, or a partial sum beside a whole
	 * column sum over the same rows, the isl scheduler took 4 to 30 s
	 * (0.1 to 0.8 s without the rewrite), and a part of the sums in
	 * chunks beside a whole one gains nothing */
	for (i = 0; i < f->nstmts; i++) {
		const tc_ir_stmt *s = &f->stmts[i];
		int computed;
		part[i].c = chunk_rows(f, s, params, tg, &part[i].lo, &part[i].rows, &computed);
		n += part[i].c > 0;
		if ((part[i].c && computed) ||
			(!part[i].c && s->nvars > s->nlhs && !along_rows(s, s->rhs)))
			return f;
	}
	if (!n)
		return f;
	/* each rewritten statement becomes two, with one new tensor */
	if (!(g = tc_ir_func_room(ar, f, n, f->nstmts + n)))
		return NULL;
	for (i = 0; i < f->nstmts; i++)
		if (!part[i].c)
			g->stmts[g->nstmts++] = f->stmts[i];
		else if (!split(ar, g, &f->stmts[i], g->ntensors, part[i].c, part[i].lo, part[i].rows))
			return NULL;
	return g;
}
