/* The polyhedral model of an IR function and its AST (see poly.h).
 *
 * Owns: building the model (statements, context, domains, accesses, the
 * original schedule, dependences), its queries (statements by name, their
 * instances, the packing copies'), the legality check of a schedule
 * against the dependences.  The AST and its user-node annotations are
 * ast.c's.  Entry points: poly.h.
 *
 * The model is written as isl text and parsed: domains, access relations
 * and the original schedule are plain quasi-affine descriptions, and the
 * text form is easy to read back in `tcomp emit --stage schedule` and in
 * errors.  Everything after parsing uses isl objects.
 *
 * Must not know the schedule passes or the driver (passes.h): they use the
 * model, never the other way round. */
#include "poly.h"

#include <isl/aff.h>
#include <isl/ast_build.h>
#include <isl/flow.h>
#include <isl/id.h>
#include <isl/map.h>
#include <isl/options.h>
#include <isl/printer.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

__tc_give isl_ctx *tc_poly_ctx_new(void)
{
	isl_ctx *ctx = isl_ctx_alloc();
	if (ctx)
		isl_options_set_on_error(ctx, ISL_ON_ERROR_CONTINUE);
	return ctx;
}

/* Words isl's parser reserves; a tcomp name equal to one gets a '_'. */
int tc_poly_isl_keyword(const char *s)
{
	static const char *const kw[] = {"and", "or", "not", "implies", "exists", "floor",
		"ceil", "mod", "min", "max", "infty", "NaN", "true", "false", "rat", "Z"};
	size_t i;
	for (i = 0; i < sizeof(kw) / sizeof(kw[0]); i++)
		if (!strcmp(s, kw[i]))
			return 1;
	return 0;
}

static void put_name(tc_buf *b, const char *s)
{
	tc_buf_puts(b, s);
	if (tc_poly_isl_keyword(s))
		tc_buf_putc(b, '_');
}

/* Names of the sizes and of the current statement's variables. */
typedef struct names {
	const tc_ir_func *f;
	const tc_ir_stmt *s;  /* NULL outside a statement */
	const int64_t *value; /* the sizes written as these constants (a
			       * model at fixed sizes), or NULL: parameters */
} names;

/* The sizes a model of p writes as constants (tc_poly_build's fixed
 * sizes: a model without isl parameters), or NULL where they are isl
 * parameters (the generic model, some sizes free, none given).  isl
 * carried three parameters fixed by equalities through every operation:
 * without them matmul's compile ran about a quarter fewer instructions
 * (docs/performance.md, "A model without parameters"). */
static const int64_t *fixed_sizes(const tc_poly *p, int generic)
{
	return generic || p->free ? NULL : p->params;
}

static void put_param(tc_buf *b, const names *n, int p)
{
	if (n->value)
		tc_buf_printf(b, "(%lld)", (long long)n->value[p]);
	else
		put_name(b, n->f->params[p].name);
}

static void put_var(tc_buf *b, const names *n, int v)
{
	put_name(b, n->s->vars[v].name);
}

/* A size expression in isl syntax. */
static void sx_isl(tc_buf *b, const tc_sexpr *e, const names *n)
{
	switch (e->kind) {
	case TC_SX_CONST: tc_buf_printf(b, "(%lld)", (long long)e->c); break;
	case TC_SX_PARAM: put_param(b, n, e->id); break;
	case TC_SX_VAR: put_var(b, n, e->id); break;
	case TC_SX_ADD:
		tc_buf_putc(b, '(');
		sx_isl(b, e->a, n);
		tc_buf_puts(b, " + ");
		sx_isl(b, e->b, n);
		tc_buf_putc(b, ')');
		break;
	case TC_SX_MUL:
		tc_buf_printf(b, "(%lld*", (long long)e->c);
		sx_isl(b, e->a, n);
		tc_buf_putc(b, ')');
		break;
	case TC_SX_FLOORDIV:
		tc_buf_puts(b, "floor((");
		sx_isl(b, e->a, n);
		tc_buf_printf(b, ")/%lld)", (long long)e->c);
		break;
	case TC_SX_MOD:
		tc_buf_puts(b, "((");
		sx_isl(b, e->a, n);
		tc_buf_printf(b, ") mod %lld)", (long long)e->c);
		break;
	case TC_SX_MIN:
	case TC_SX_MAX:
		tc_buf_puts(b, e->kind == TC_SX_MIN ? "min(" : "max(");
		sx_isl(b, e->a, n);
		tc_buf_puts(b, ", ");
		sx_isl(b, e->b, n);
		tc_buf_putc(b, ')');
		break;
	}
}

/* A subscript for which tc_ir_affine holds, in isl syntax. */
static void ix_isl(tc_buf *b, const tc_ir_expr *e, const names *n)
{
	const tc_ir_expr *k;
	switch (e->op) {
	case TC_OP_CONST:
		tc_buf_printf(b, "(%lld)", (long long)e->c.i);
		break;
	case TC_OP_INDEX:
		put_var(b, n, e->id);
		break;
	case TC_OP_SIZE:
		put_param(b, n, e->id);
		break;
	case TC_OP_CAST: /* widening: the same value */
		ix_isl(b, e->args[0], n);
		break;
	case TC_OP_NEG:
		tc_buf_puts(b, "(-");
		ix_isl(b, e->args[0], n);
		tc_buf_putc(b, ')');
		break;
	case TC_OP_ADD:
	case TC_OP_SUB:
		tc_buf_putc(b, '(');
		ix_isl(b, e->args[0], n);
		tc_buf_puts(b, e->op == TC_OP_ADD ? " + " : " - ");
		ix_isl(b, e->args[1], n);
		tc_buf_putc(b, ')');
		break;
	case TC_OP_MUL: /* one operand is a constant */
		k = e->args[0]->op == TC_OP_CONST ? e->args[0] : e->args[1];
		tc_buf_printf(b, "(%lld*", (long long)k->c.i);
		ix_isl(b, k == e->args[0] ? e->args[1] : e->args[0], n);
		tc_buf_putc(b, ')');
		break;
	case TC_OP_DIV:
	case TC_OP_MOD:
		tc_buf_puts(b, e->op == TC_OP_DIV ? "floor((" : "((");
		ix_isl(b, e->args[0], n);
		tc_buf_printf(b, e->op == TC_OP_DIV ? ")/%lld)" : ") mod %lld)",
			(long long)e->args[1]->c.i);
		break;
	case TC_OP_CALL: /* min, max */
		tc_buf_puts(b, e->id == TC_BI_MIN ? "min(" : "max(");
		ix_isl(b, e->args[0], n);
		tc_buf_puts(b, ", ");
		ix_isl(b, e->args[1], n);
		tc_buf_putc(b, ')');
		break;
	default:
		b->oom = 1; /* not reached for affine subscripts */
		break;
	}
}

static void put_params(tc_buf *b, const names *n)
{
	int i;
	if (n->value)
		return;
	tc_buf_putc(b, '[');
	for (i = 0; i < n->f->nparams; i++) {
		if (i)
			tc_buf_puts(b, ", ");
		put_param(b, n, i);
	}
	tc_buf_puts(b, "] -> ");
}

/* "S0[i, j, k]" with the first ndims variables of the statement. */
static void put_tuple(tc_buf *b, const tc_poly_stmt *st, const names *n)
{
	int v;
	tc_buf_printf(b, "%s[", st->name);
	for (v = 0; v < st->ndims; v++) {
		if (v)
			tc_buf_puts(b, ", ");
		put_var(b, n, v);
	}
	tc_buf_putc(b, ']');
}

void tc_poly_isl_failed(__tc_keep isl_ctx *ctx, __tc_keep tc_diags *d, const char *what)
{
	tc_loc none;
	const char *msg = isl_ctx_last_error_msg(ctx);
	memset(&none, 0, sizeof(none));
	if (tc_poly_over_budget(ctx)) { /* kept for the schedule driver to see */
		tc_error(d, none, "the def is too large to compile: isl ran past its budget of "
			"operations or seconds trying to %s (docs/language.md, Limits)", what);
		return;
	}
	/* isl reports nothing when one of our callbacks gave up, which they do
	 * only when an allocation (tc_malloc) failed */
	if (isl_ctx_last_error(ctx) == isl_error_none)
		tc_error(d, none, "out of memory (%s)", what);
	else
		tc_error(d, none, "internal error: isl could not %s%s%s", what, msg ? ": " : "",
			msg ? msg : "");
	isl_ctx_reset_error(ctx);
}

/* The watchdog of a model's budget: a thread that aborts isl's work in
 * ctx when the deadline of an armed step passes. */
struct tc_poly_watch {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct timespec deadline; /* CLOCK_MONOTONIC */
	int armed, stop;
	isl_ctx *ctx;
};

static void *watch_main(void *arg)
{
	struct tc_poly_watch *w = arg;
	pthread_mutex_lock(&w->mu);
	while (!w->stop) {
		if (!w->armed)
			pthread_cond_wait(&w->cv, &w->mu);
		else if (pthread_cond_timedwait(&w->cv, &w->mu, &w->deadline) == ETIMEDOUT &&
			w->armed) {
			isl_ctx_abort(w->ctx);
			w->armed = 0;
		}
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

/* A started watchdog for ctx, or NULL (the budget then has no seconds). */
static struct tc_poly_watch *watch_new(isl_ctx *ctx)
{
	struct tc_poly_watch *w = tc_calloc(1, sizeof(*w));
	pthread_condattr_t ca;
	if (!w)
		return NULL;
	w->ctx = ctx;
	pthread_mutex_init(&w->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&w->thread, NULL, watch_main, w)) {
		pthread_cond_destroy(&w->cv);
		pthread_mutex_destroy(&w->mu);
		tc_free(w);
		return NULL;
	}
	return w;
}

static void watch_free(struct tc_poly_watch *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = 1;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	tc_free(w);
}

void tc_poly_budget(__tc_keep tc_poly *p)
{
	double secs = p->opts.max_seconds > 0 ? p->opts.max_seconds : TC_POLY_MAX_SECONDS;
	unsigned long ops;
	ops = p->opts.max_ops ? p->opts.max_ops : TC_POLY_MAX_OPS;
	if (p->ctx_max_ops && p->ctx_max_ops < ops)
		ops = p->ctx_max_ops;
	isl_ctx_set_max_operations(p->ctx, ops);
	isl_ctx_reset_operations(p->ctx);
	if (!p->watch && !(p->watch = watch_new(p->ctx))) {
		isl_ctx_resume(p->ctx); /* no watchdog: operations alone */
		isl_ctx_reset_error(p->ctx);
		return;
	}
	/* resumed under the watchdog's lock: the last step's deadline,
	 * passing now, cannot abort the new step */
	pthread_mutex_lock(&p->watch->mu);
	isl_ctx_resume(p->ctx);
	isl_ctx_reset_error(p->ctx);
	clock_gettime(CLOCK_MONOTONIC, &p->watch->deadline);
	p->watch->deadline.tv_sec += (time_t)secs;
	p->watch->deadline.tv_nsec += (long)((secs - (double)(time_t)secs) * 1e9);
	if (p->watch->deadline.tv_nsec >= 1000000000L) {
		p->watch->deadline.tv_sec++;
		p->watch->deadline.tv_nsec -= 1000000000L;
	}
	p->watch->armed = 1;
	pthread_cond_signal(&p->watch->cv);
	pthread_mutex_unlock(&p->watch->mu);
}

void tc_poly_budget_done(__tc_keep tc_poly *p)
{
	if (!p->watch)
		return;
	pthread_mutex_lock(&p->watch->mu);
	p->watch->armed = 0;
	pthread_cond_signal(&p->watch->cv);
	pthread_mutex_unlock(&p->watch->mu);
}

int tc_poly_over_budget(__tc_keep isl_ctx *ctx)
{
	enum isl_error e = isl_ctx_last_error(ctx);
	/* an abort in isl's parser is followed by a "syntax error" of its
	 * own, which takes the last error's place: the flag tells */
	return e == isl_error_quota || e == isl_error_abort || isl_ctx_aborted(ctx);
}

/* text read by isl as a union set (is_set) or map, outside the budget of
 * operations: an operation past it inside isl's parser leaks a token (24
 * bytes, test_fault's quota sweep under LeakSanitizer) and reads as a
 * "syntax error".  The text is linear in the def; the operations counted
 * while reading it still count against the steps after it.  Written with
 * the sizes' values (fixed_sizes), a model's text costs the parser
 * operations that it did not cost with parameters. */
static void *read_text(isl_ctx *ctx, const char *text, int is_set)
{
	unsigned long max = isl_ctx_get_max_operations(ctx);
	void *x;
	isl_ctx_set_max_operations(ctx, 0); /* none */
	x = is_set ? (void *)isl_union_set_read_from_str(ctx, text)
		   : (void *)isl_union_map_read_from_str(ctx, text);
	isl_ctx_set_max_operations(ctx, max);
	return x;
}

/* Parse text into acc (a union map or set, by is_set), consuming acc. */
static void *add_text(tc_poly *p, void *acc, tc_buf *b, int is_set, tc_diags *d)
{
	void *x;
	if (!acc || b->oom || !b->s)
		goto fail;
	if (is_set) {
		x = read_text(p->ctx, b->s, 1);
		if (!x)
			isl_union_set_free(acc); /* consumed, even on failure */
		x = x ? isl_union_set_union(acc, x) : NULL;
		if (!x)
			goto fail_isl;
	} else {
		x = read_text(p->ctx, b->s, 0);
		if (!x)
			isl_union_map_free(acc);
		x = x ? isl_union_map_union(acc, x) : NULL;
		if (!x)
			goto fail_isl;
	}
	tc_buf_free(b);
	return x;
fail_isl:
	tc_poly_isl_failed(p->ctx, d, "read the model");
	tc_buf_free(b);
	return NULL;
fail: /* the text ran out of memory, or isl failed making acc */
	tc_poly_isl_failed(p->ctx, d, "build the model");
	if (is_set)
		isl_union_set_free(acc);
	else
		isl_union_map_free(acc);
	tc_buf_free(b);
	return NULL;
}

/* The statement instances of the IR statements. */
static int make_stmts(tc_poly *p)
{
	const tc_ir_func *f = p->f;
	int i, n = 0;
	p->stmts = tc_calloc((size_t)(2 * f->nstmts + 1), sizeof(tc_poly_stmt));
	if (!p->stmts)
		return -1;
	for (i = 0; i < f->nstmts; i++) {
		const tc_ir_stmt *s = &f->stmts[i];
		if (s->init && s->red != TC_RED_ASSIGN) {
			tc_poly_stmt *st = &p->stmts[n++];
			st->ir = s;
			st->ir_index = i;
			st->kind = TC_POLY_INIT;
			st->ndims = s->nlhs;
			snprintf(st->name, sizeof(st->name), "S%d_init", i);
		}
		p->stmts[n].ir = s;
		p->stmts[n].ir_index = i;
		p->stmts[n].kind = s->red == TC_RED_ASSIGN ? TC_POLY_ASSIGN : TC_POLY_UPDATE;
		p->stmts[n].ndims = s->nvars;
		snprintf(p->stmts[n].name, sizeof(p->stmts[n].name), "S%d", i);
		n++;
	}
	p->nstmts = n;
	return 0;
}

/* The context of p's sizes, as isl reads it: every size equal to its
 * value (concrete, and p has sizes) but those with free[i] set (free
 * NULL: none), else every size >= 1; and, unless every size is equal to
 * its value, the def's size conditions hold.  In a model without
 * parameters (fixed_sizes; not generic) that is the universe of no
 * parameters.  NULL with a message in d on error. */
static isl_set *context_of(tc_poly *p, int concrete, const unsigned char *free, int generic,
	tc_diags *d)
{
	const tc_ir_func *f = p->f;
	names n = {f, NULL, fixed_sizes(p, generic || !concrete || free)};
	isl_set *set;
	tc_buf b;
	int i;
	if (n.value) { /* no text to read: an abort inside isl's parser leaks */
		if (!(set = isl_set_universe(isl_space_params_alloc(p->ctx, 0))))
			tc_poly_isl_failed(p->ctx, d, "make the context");
		return set;
	}
	tc_buf_init(&b);
	put_params(&b, &n);
	tc_buf_puts(&b, "{ : ");
	for (i = 0; i < f->nparams; i++) {
		tc_buf_puts(&b, i ? " and " : "");
		put_param(&b, &n, i);
		if (concrete && !(free && free[i]))
			tc_buf_printf(&b, " = %lld", (long long)p->params[i]);
		else /* a model of sizes holding a zero-size dimension: the
		      * generic context still holds them */
			tc_buf_puts(&b, p->params && p->params[i] < 1 ? " >= 0" : " >= 1");
	}
	for (i = 0; (!concrete || free) && i < f->nchecks; i++) {
		tc_buf_puts(&b, f->nparams || i ? " and " : "");
		sx_isl(&b, f->checks[i].e, &n);
		tc_buf_puts(&b, f->checks[i].eq ? " = 0" : " >= 0");
	}
	tc_buf_puts(&b, " }");
	set = b.oom || !b.s ? NULL : isl_set_read_from_str(p->ctx, b.s);
	tc_buf_free(&b);
	if (!set) /* the text out of memory, or isl failed */
		tc_poly_isl_failed(p->ctx, d, "read the context");
	return set;
}

static int build_context(tc_poly *p, tc_diags *d)
{
	p->context = context_of(p, p->params != NULL, p->free, 0, d);
	if (p->context && p->free) /* where the passes measure: every size fixed */
		p->at = context_of(p, 1, NULL, 0, d);
	return p->context && (!p->free || p->at) ? 0 : -1;
}

__tc_give isl_union_set *tc_poly_at(__tc_keep const tc_poly *p, __tc_take isl_union_set *set)
{
	return p->at ? isl_union_set_intersect_params(set, isl_set_copy(p->at)) : set;
}

/* A statement's guard (a conjunction of comparisons of affine integer
 * expressions, ir.h) as isl constraints. */
static void guard_isl(tc_buf *b, const tc_ir_expr *e, const names *n)
{
	static const char *const ops[] = {
		[TC_OP_LT] = " < ", [TC_OP_GT] = " > ", [TC_OP_LE] = " <= ",
		[TC_OP_GE] = " >= ", [TC_OP_EQ] = " = ",
	};
	if (e->op == TC_OP_AND) {
		guard_isl(b, e->args[0], n);
		tc_buf_puts(b, " and ");
		guard_isl(b, e->args[1], n);
		return;
	}
	if (!TC_ASSERT(e->op >= TC_OP_LT && e->op <= TC_OP_NE)) {
		b->oom = 1; /* not a guard: the text is dropped */
		return;
	}
	if (e->op == TC_OP_NE) { /* a != b: a disjunction of isl constraints */
		tc_buf_puts(b, "(");
		ix_isl(b, e->args[0], n);
		tc_buf_puts(b, " < ");
		ix_isl(b, e->args[1], n);
		tc_buf_puts(b, " or ");
		ix_isl(b, e->args[0], n);
		tc_buf_puts(b, " > ");
		ix_isl(b, e->args[1], n);
		tc_buf_puts(b, ")");
		return;
	}
	ix_isl(b, e->args[0], n);
	tc_buf_puts(b, ops[e->op]);
	ix_isl(b, e->args[1], n);
}

/* Domains, accesses and the original schedule, one statement at a time.
 * A statement's guard restricts its update (not the init of '!'). */
static void add_domain(tc_buf *b, const tc_poly *p, const tc_poly_stmt *st, const names *n)
{
	int v;
	put_params(b, n);
	tc_buf_puts(b, "{ ");
	put_tuple(b, st, n);
	for (v = 0; v < st->ndims; v++) {
		tc_buf_puts(b, v ? " and " : " : ");
		sx_isl(b, st->ir->vars[v].lo, n);
		tc_buf_puts(b, " <= ");
		put_var(b, n, v);
		tc_buf_puts(b, " < ");
		sx_isl(b, st->ir->vars[v].hi, n);
	}
	if (st->ir->guard && st->kind != TC_POLY_INIT) {
		tc_buf_puts(b, st->ndims ? " and " : " : ");
		guard_isl(b, st->ir->guard, n);
	}
	tc_buf_puts(b, " }");
}

/* "S[...] -> T[lhs]": the element a statement writes (or accumulates). */
static void add_lhs_access(tc_buf *b, const tc_poly *p, const tc_poly_stmt *st, const names *n)
{
	int v;
	put_params(b, n);
	tc_buf_puts(b, "{ ");
	put_tuple(b, st, n);
	tc_buf_puts(b, " -> ");
	put_name(b, p->f->tensors[st->ir->tensor].name);
	tc_buf_putc(b, '[');
	for (v = 0; v < st->ir->nlhs; v++) {
		if (v)
			tc_buf_puts(b, ", ");
		put_var(b, n, v);
	}
	tc_buf_puts(b, "] }");
}

/* "S[...] -> T[sub] : ...": the elements a scatter may write (or
 * accumulate into): a gathered dimension's whole extent, as for a
 * gathered read (add_read).  Writes are given to isl as must-writes and
 * kills (deps_of); over the whole extent that is conservative here: every
 * instance of the scatter then depends on the one before it in the
 * original order, at the same values of the dimensions it writes exactly,
 * so the loops over the gathered indices stay sequential and in order,
 * and a later reader depends on the last instance and, through the chain,
 * on every earlier one; the other dimensions (j of d_LUT(I(i), j)) carry
 * no dependence and stay parallel. */
static void add_scatter_access(tc_buf *b, const tc_poly *p, const tc_poly_stmt *st,
	const names *n)
{
	const tc_ir_tensor *t = &p->f->tensors[st->ir->tensor];
	int k, any = 0;
	put_params(b, n);
	tc_buf_puts(b, "{ ");
	put_tuple(b, st, n);
	tc_buf_puts(b, " -> ");
	put_name(b, t->name);
	tc_buf_putc(b, '[');
	for (k = 0; k < t->ndim; k++) {
		if (k)
			tc_buf_puts(b, ", ");
		if (tc_ir_affine(st->ir->sub[k]))
			ix_isl(b, st->ir->sub[k], n);
		else
			tc_buf_printf(b, "o%d", k);
	}
	tc_buf_puts(b, "]");
	for (k = 0; k < t->ndim; k++)
		if (!tc_ir_affine(st->ir->sub[k])) {
			tc_buf_printf(b, "%s0 <= o%d < ", any++ ? " and " : " : ", k);
			sx_isl(b, t->ext[k], n);
		}
	tc_buf_puts(b, " }");
}

/* One read: affine subscripts exactly, others over the whole extent. */
static void add_read(tc_buf *b, const tc_poly *p, const tc_poly_stmt *st, const names *n,
	const tc_ir_expr *e)
{
	const tc_ir_tensor *t = &p->f->tensors[e->id];
	int k, any = 0;
	put_params(b, n);
	tc_buf_puts(b, "{ ");
	put_tuple(b, st, n);
	tc_buf_puts(b, " -> ");
	put_name(b, t->name);
	tc_buf_putc(b, '[');
	for (k = 0; k < e->nargs; k++) {
		if (k)
			tc_buf_puts(b, ", ");
		if (tc_ir_affine(e->args[k]))
			ix_isl(b, e->args[k], n);
		else
			tc_buf_printf(b, "o%d", k); /* not affine: any element */
	}
	tc_buf_puts(b, "]");
	for (k = 0; k < e->nargs; k++)
		if (!tc_ir_affine(e->args[k])) {
			tc_buf_printf(b, "%s0 <= o%d < ", any++ ? " and " : " : ", k);
			sx_isl(b, t->ext[k], n);
		}
	tc_buf_puts(b, " }");
}

static int add_reads(tc_poly *p, isl_union_map **acc, const tc_poly_stmt *st, const names *n,
	const tc_ir_expr *e, tc_diags *d)
{
	int i;
	for (i = 0; i < e->nargs; i++)
		if (add_reads(p, acc, st, n, e->args[i], d) < 0)
			return -1;
	if (e->op == TC_OP_READ) {
		tc_buf b;
		tc_buf_init(&b);
		add_read(&b, p, st, n, e);
		if (!(*acc = add_text(p, *acc, &b, 0, d)))
			return -1;
	}
	return 0;
}

/* Textual order: S<k>_init[l] -> [k, l, 0, 0...], S<k>[l, r] -> [k, l, 1, r, 0...]
 * padded to a common dimension. */
static void add_original(tc_buf *b, const tc_poly *p, const tc_poly_stmt *st, const names *n,
	int width)
{
	int v, k = 1;
	put_params(b, n);
	tc_buf_puts(b, "{ ");
	put_tuple(b, st, n);
	tc_buf_printf(b, " -> [%d", st->ir_index);
	for (v = 0; v < st->ir->nlhs; v++, k++) {
		tc_buf_puts(b, ", ");
		put_var(b, n, v);
	}
	tc_buf_printf(b, ", %d", st->kind == TC_POLY_INIT ? 0 : 1);
	k++;
	for (v = st->ir->nlhs; v < st->ndims; v++, k++) {
		tc_buf_puts(b, ", ");
		put_var(b, n, v);
	}
	for (; k < width; k++)
		tc_buf_puts(b, ", 0");
	tc_buf_puts(b, "] }");
}

/* The accesses and the original schedule of some statements: the whole
 * model's, or one IR statement's (its init and update). */
typedef struct parts {
	isl_union_set *domain;
	isl_union_map *writes, *reads, *original;
} parts;

static void parts_init(parts *q, const tc_poly *p)
{
	q->domain = isl_union_set_empty(isl_set_get_space(p->context));
	q->writes = isl_union_map_empty(isl_set_get_space(p->context));
	q->reads = isl_union_map_empty(isl_set_get_space(p->context));
	q->original = isl_union_map_empty(isl_set_get_space(p->context));
}

static void parts_clear(parts *q)
{
	isl_union_set_free(q->domain);
	isl_union_map_free(q->writes);
	isl_union_map_free(q->reads);
	isl_union_map_free(q->original);
	memset(q, 0, sizeof(*q));
}

/* Restrict q's accesses and schedule to its domain within context;
 * -1 on an isl error. */
static int parts_restrict(parts *q, isl_set *context)
{
	q->domain = isl_union_set_intersect_params(q->domain, isl_set_copy(context));
	q->reads = isl_union_map_intersect_domain(q->reads, isl_union_set_copy(q->domain));
	q->writes = isl_union_map_intersect_domain(q->writes, isl_union_set_copy(q->domain));
	q->original = isl_union_map_intersect_domain(q->original, isl_union_set_copy(q->domain));
	return q->domain && q->reads && q->writes && q->original ? 0 : -1;
}

/* The space of statement st's instances: params (taken, a parameter
 * space: the context's, the domain's) with st's dimensions and name. */
static isl_space *stmt_space(isl_space *params, const tc_poly_stmt *st)
{
	params = isl_space_add_dims(params, isl_dim_set, (unsigned)st->ndims);
	return isl_space_set_tuple_name(params, isl_dim_set, st->name);
}

/* The instances of statement st in dom (kept). */
static isl_set *instances_in(isl_union_set *dom, const tc_poly_stmt *st)
{
	return isl_union_set_extract_set(dom, stmt_space(isl_union_set_get_space(dom), st));
}

/* The band { S[x] -> [x_a, ..., x_{b-1}] } of statement st over its
 * dimensions a .. b-1, as a partial schedule to add to (taken). */
static isl_union_pw_multi_aff *add_band_part(const tc_poly *p, isl_union_pw_multi_aff *u,
	const tc_poly_stmt *st, int a, int b)
{
	isl_multi_aff *ma = isl_multi_aff_identity(isl_space_map_from_set(
		stmt_space(isl_set_get_space(p->context), st)));
	ma = isl_multi_aff_drop_dims(ma, isl_dim_out, (unsigned)b, (unsigned)(st->ndims - b));
	ma = isl_multi_aff_drop_dims(ma, isl_dim_out, 0, (unsigned)a);
	ma = isl_multi_aff_reset_tuple_id(ma, isl_dim_out);
	return isl_union_pw_multi_aff_add_pw_multi_aff(u, isl_pw_multi_aff_from_multi_aff(ma));
}

/* s (taken) under a band whose members are the partial schedule u (taken;
 * s alone when u is empty or has no members). */
static isl_schedule *under_band(isl_schedule *s, isl_union_pw_multi_aff *u, int members)
{
	if (members < 1) {
		isl_union_pw_multi_aff_free(u);
		return s;
	}
	return isl_schedule_insert_partial_schedule(s,
		isl_multi_union_pw_aff_from_union_pw_multi_aff(u));
}

/* The original schedule (add_original) of the instances dom (kept) as a
 * schedule tree: the IR statements in sequence, each under a band of its
 * left-hand indices, a reduction's init before its update, and the update's
 * reduction indices in a band below.  The same order as the flat map
 * q->original, but isl's dataflow analysis works along a tree's sequences
 * instead of ordering every pair of statements in one flat space
 * (docs/performance.md, "Dependences along the original order": the
 * model of softmax 3.4 ms faster, 11% fewer instructions for its whole
 * compile; the dependences the same).  Statements not in dom are left
 * out.  NULL on an isl error. */
static isl_schedule *original_tree(const tc_poly *p, isl_union_set *dom)
{
	isl_schedule *all = NULL;
	int i = 0;
	while (i < p->nstmts) {
		const tc_ir_stmt *ir = p->stmts[i].ir;
		int first = i, nlhs = ir->sub ? 0 : ir->nlhs, k;
		isl_schedule *group = NULL;
		isl_union_pw_multi_aff *lhs;
		while (i < p->nstmts && p->stmts[i].ir_index == p->stmts[first].ir_index)
			i++;
		lhs = isl_union_pw_multi_aff_empty(isl_set_get_space(p->context));
		for (k = first; k < i; k++) { /* the init first: make_stmts' order */
			const tc_poly_stmt *st = &p->stmts[k];
			isl_set *set = instances_in(dom, st);
			isl_schedule *one;
			if (isl_set_plain_is_empty(set) == isl_bool_true) { /* not in dom */
				isl_set_free(set);
				continue;
			}
			one = isl_schedule_from_domain(isl_union_set_from_set(set));
			one = under_band(one, add_band_part(p, isl_union_pw_multi_aff_empty(
				isl_set_get_space(p->context)), st, nlhs, st->ndims), st->ndims - nlhs);
			lhs = add_band_part(p, lhs, st, 0, nlhs);
			group = group ? isl_schedule_sequence(group, one) : one;
		}
		if (!group) {
			isl_union_pw_multi_aff_free(lhs);
			continue;
		}
		group = under_band(group, lhs, nlhs);
		all = all ? isl_schedule_sequence(all, group) : group;
	}
	return all ? all : isl_schedule_from_domain(isl_union_set_copy(dom));
}

/* flow | anti | output dependences among q's accesses in its original
 * schedule, coalesced (NULL on an isl error).
 *
 * With kill set, writes kill: every write is a must-write of one element,
 * so a read depends on the last write before it only (flow), a write on
 * the reads since the last write before it (anti) and on that write alone
 * (output).  Earlier pairs follow by transitivity (a read, a later write,
 * then this one), which is all that validity, coincidence and the legality
 * check need: a schedule orders a chain when it orders each link, and a
 * loop carries a dependence of the chain only if it carries a link.
 * Without the kills the anti and output dependences of n statements that
 * update one tensor are n^2 / 2 pairs, and the isl scheduler's time grew
 * with them (80 in-place updates of O(i): more than 2 minutes).  Without
 * kill, anti and output dependences reach every earlier access (flow
 * dependences always stop at the last write).
 *
 * scat (borrowed; NULL when there is none) holds the instances of the
 * scatters, whose writes cover a gathered dimension's whole extent: they
 * are may-writes, sources that kill nothing, so a later read depends on
 * every earlier instance of a scatter and on the must-write before them
 * all.  Without scat every write is a must-write, as above. */
static isl_union_map *deps_of(const tc_poly *p, const parts *q, int kill, isl_union_set *scat)
{
	isl_union_access_info *ai;
	isl_union_flow *flow;
	isl_union_map *dep[2], *must = isl_union_map_copy(q->writes), *may = NULL;
	isl_schedule *tree = original_tree(p, q->domain);
	int i;

	if (scat) {
		may = isl_union_map_intersect_domain(isl_union_map_copy(must),
			isl_union_set_copy(scat));
		must = isl_union_map_subtract_domain(must, isl_union_set_copy(scat));
	}

	/* two computations rather than three: the dependences of a sink
	 * access depend only on the elements it touches and the sources,
	 * so sinks with the same sources and kills are one computation.
	 * With kills: 0 flow and output (reads and writes after the last
	 * write), 1 anti (writes after reads).  Without: 0 flow (reads
	 * after the last write), 1 anti and output (writes after every
	 * earlier read or write). */
	for (i = 0; i < 2; i++) {
		isl_union_map *sink = i == 0 ? isl_union_map_copy(q->reads)
					     : isl_union_map_copy(q->writes);
		if (i == 0 && kill)
			sink = isl_union_map_union(sink, isl_union_map_copy(q->writes));
		ai = isl_union_access_info_from_sink(sink);
		if (i == 0)
			ai = isl_union_access_info_set_must_source(ai, isl_union_map_copy(must));
		if (i == 0 && may)
			ai = isl_union_access_info_set_may_source(ai, isl_union_map_copy(may));
		else if (i == 1)
			ai = isl_union_access_info_set_may_source(ai, kill
				? isl_union_map_copy(q->reads)
				: isl_union_map_union(isl_union_map_copy(q->reads),
					isl_union_map_copy(q->writes)));
		if (kill)
			ai = isl_union_access_info_set_kill(ai, isl_union_map_copy(must));
		ai = isl_union_access_info_set_schedule(ai, isl_schedule_copy(tree));
		flow = isl_union_access_info_compute_flow(ai);
		dep[i] = isl_union_flow_get_may_dependence(flow);
		isl_union_flow_free(flow);
	}
	isl_union_map_free(must);
	isl_union_map_free(may);
	isl_schedule_free(tree);
	return isl_union_map_coalesce(isl_union_map_union(dep[0], dep[1]));
}

int tc_poly_scatter_atomic(__tc_keep const tc_poly *p, __tc_keep const tc_ir_stmt *s)
{
	tc_dtype t;
	int k;
	if (!s->sub || s->red != TC_RED_ADD || !p->target || p->target->warp_size <= 0 ||
		tc_ir_reads(s->rhs, s->tensor))
		return 0;
	for (k = 0; k < p->f->tensors[s->tensor].ndim; k++)
		if (tc_ir_reads(s->sub[k], s->tensor)) /* its own elements: order matters */
			return 0;
	t = p->f->tensors[s->tensor].dtype;
	return t == TC_T_F32 || t == TC_T_F64 || t == TC_T_I32 || t == TC_T_U32 ||
		t == TC_T_I64 || t == TC_T_U64;
}

/* The instances of p's scatters (one == NULL), or of the one scatter
 * statement one, in the space of p's context; NULL when there are none or
 * on an isl error. */
static isl_union_set *scatter_instances(const tc_poly *p, const tc_poly_stmt *one)
{
	isl_union_set *u = NULL;
	int i;
	for (i = 0; i < p->nstmts; i++) {
		const tc_poly_stmt *st = &p->stmts[i];
		isl_set *set;
		if (!st->ir->sub || (one && st != one))
			continue;
		set = isl_set_universe(stmt_space(isl_set_get_space(p->context), st));
		u = u ? isl_union_set_add_set(u, set) : isl_union_set_from_set(set);
	}
	return u;
}

/* deps without the dependences between instances of each scatter that
 * combines with atomics on the GPU (tc_poly_scatter_atomic): they may run
 * in any order, at once.  Their order with every other statement stays
 * (the scatter's writes are may-writes: nothing of them is lost). */
static isl_union_map *relax_atomic_scatters(const tc_poly *p, isl_union_map *deps)
{
	int i;
	for (i = 0; deps && i < p->nstmts; i++) {
		isl_union_set *inst;
		if (!tc_poly_scatter_atomic(p, p->stmts[i].ir))
			continue;
		inst = scatter_instances(p, &p->stmts[i]);
		deps = isl_union_map_subtract(deps, isl_union_map_from_domain_and_range(
			isl_union_set_copy(inst), inst));
	}
	return deps;
}

/* Add the model of statement st (its domain, accesses and original
 * schedule, width dimensions) to q, in the generic model's terms (every
 * size a parameter) or p's (fixed_sizes); -1 with a message in d on
 * error. */
static int add_stmt(tc_poly *p, parts *q, const tc_poly_stmt *st, int width, int generic,
	tc_diags *d)
{
	names n = {p->f, st->ir, fixed_sizes(p, generic)};
	tc_buf b;
	tc_buf_init(&b);
	add_domain(&b, p, st, &n);
	if (!(q->domain = add_text(p, q->domain, &b, 1, d)))
		return -1;
	if (st->ir->sub)
		add_scatter_access(&b, p, st, &n);
	else
		add_lhs_access(&b, p, st, &n);
	if (!(q->writes = add_text(p, q->writes, &b, 0, d)))
		return -1;
	if (st->kind == TC_POLY_UPDATE) { /* the accumulator is read too */
		if (st->ir->sub)
			add_scatter_access(&b, p, st, &n);
		else
			add_lhs_access(&b, p, st, &n);
		if (!(q->reads = add_text(p, q->reads, &b, 0, d)))
			return -1;
	}
	if (st->ir->sub) { /* the reads of the gathered subscripts */
		int k;
		for (k = 0; k < p->f->tensors[st->ir->tensor].ndim; k++)
			if (add_reads(p, &q->reads, st, &n, st->ir->sub[k], d) < 0)
				return -1;
	}
	if (st->kind != TC_POLY_INIT && add_reads(p, &q->reads, st, &n, st->ir->rhs, d) < 0)
		return -1;
	add_original(&b, p, st, &n, width);
	if (!(q->original = add_text(p, q->original, &b, 0, d)))
		return -1;
	return 0;
}

/* one, one statement's parts, added to all's and to g's (unless g is
 * NULL); one is cleared.  -1 on an isl error. */
static int add_parts(parts *all, parts *g, parts *one)
{
	all->domain = isl_union_set_union(all->domain, isl_union_set_copy(one->domain));
	all->writes = isl_union_map_union(all->writes, isl_union_map_copy(one->writes));
	all->reads = isl_union_map_union(all->reads, isl_union_map_copy(one->reads));
	all->original = isl_union_map_union(all->original, isl_union_map_copy(one->original));
	if (!g) {
		parts_clear(one);
		return all->domain && all->writes && all->reads && all->original ? 0 : -1;
	}
	g->domain = isl_union_set_union(g->domain, one->domain);
	g->writes = isl_union_map_union(g->writes, one->writes);
	g->reads = isl_union_map_union(g->reads, one->reads);
	g->original = isl_union_map_union(g->original, one->original);
	memset(one, 0, sizeof(*one));
	return all->domain && all->writes && all->reads && all->original && g->domain &&
		g->writes && g->reads && g->original ? 0 : -1;
}

/* The pairs of instances of update st in dom (kept) that write one
 * element, the earlier (lexicographically) first. */
static isl_map *same_element_pairs(isl_union_set *dom, const tc_poly_stmt *st)
{
	isl_set *d = instances_in(dom, st);
	isl_map *m = isl_map_lex_lt(isl_set_get_space(d));
	int k;
	for (k = 0; k < st->ir->nlhs; k++)
		m = isl_map_equate(m, isl_dim_in, k, isl_dim_out, k);
	return isl_map_intersect_range(isl_map_intersect_domain(m, isl_set_copy(d)), d);
}

/* The dependences without kills of the reduction whose update is
 * p->stmts[u] (its init the statement before it, if any) on the instances
 * dom (kept) when the update reads its tensor at the element it writes
 * only (no scatter, its right-hand side does not read the tensor): each
 * instance then depends on the init of its element and on every earlier
 * update of it, in the original order (lexicographic in the reduction's
 * dimensions), which is what deps_of(g, 0) finds with two dataflow
 * computations (a quarter of matmul 256's compile); NULL otherwise. */
static isl_union_map *reduction_pairs(const tc_poly *p, isl_union_set *dom, int u)
{
	const tc_poly_stmt *up = &p->stmts[u];
	const tc_poly_stmt *in = u && p->stmts[u - 1].kind == TC_POLY_INIT &&
		p->stmts[u - 1].ir_index == up->ir_index ? &p->stmts[u - 1] : NULL;
	isl_union_map *pairs;
	isl_map *m;
	int k;
	if (up->ir->sub || tc_ir_reads(up->ir->rhs, up->ir->tensor) ||
		(in && in->ndims != up->ir->nlhs))
		return NULL;
	pairs = isl_union_map_from_map(same_element_pairs(dom, up));
	if (in) {
		m = isl_map_from_domain_and_range(instances_in(dom, in), instances_in(dom, up));
		for (k = 0; k < up->ir->nlhs; k++)
			m = isl_map_equate(m, isl_dim_in, k, isl_dim_out, k);
		pairs = isl_union_map_add_map(pairs, m);
	}
	return pairs;
}

/* g, the parts of a reduction (its init and update p->stmts[u]),
 * restricted to context: its dependences without kills go to *near, and g
 * is cleared; -1 on an isl error.  scat: as in deps_of. */
static int add_near(const tc_poly *p, isl_union_map **near, parts *g, isl_set *context,
	isl_union_set *scat, int u)
{
	isl_union_map *pairs;
	if (parts_restrict(g, context) < 0)
		return -1;
	pairs = reduction_pairs(p, g->domain, u);
	*near = isl_union_map_union(*near, pairs ? pairs : deps_of(p, g, 0, scat));
	parts_clear(g);
	return *near ? 0 : -1;
}

/* The model of p's statements within context (p->gcontext: the generic
 * model, its sizes parameters; else p's, fixed_sizes): their domains,
 * accesses and original schedule into *all, their dependences into *deps
 * and what the scheduler is given into *near (see tc_poly); -1 with a
 * message in d (nothing to free) on error. */
static int build_parts(tc_poly *p, isl_set *context, parts *all, isl_union_map **deps,
	isl_union_map **near, tc_diags *d)
{
	parts one = {NULL, NULL, NULL, NULL}, g = {NULL, NULL, NULL, NULL};
	isl_union_set *scat = scatter_instances(p, NULL);
	int i, width = 0;
	parts_init(all, p);
	*deps = NULL;
	*near = isl_union_map_empty(isl_set_get_space(p->context));
	for (i = 0; i < p->nstmts; i++)
		if (p->stmts[i].ir->nvars + 2 > width)
			width = p->stmts[i].ir->nvars + 2;
	/* a statement at a time, the parts of a reduction's (its init and
	 * update) also in g */
	for (i = 0; i < p->nstmts; i++) {
		const tc_poly_stmt *st = &p->stmts[i];
		parts_init(&one, p);
		if (st->kind == TC_POLY_INIT ||
			(st->kind == TC_POLY_UPDATE && (!i || p->stmts[i - 1].kind != TC_POLY_INIT)))
			parts_init(&g, p);
		if (add_stmt(p, &one, st, width, context == p->gcontext, d) < 0)
			goto error;
		if (add_parts(all, st->kind == TC_POLY_ASSIGN ? NULL : &g, &one) < 0 ||
			(st->kind == TC_POLY_UPDATE && add_near(p, near, &g, context, scat, i) < 0)) {
			tc_poly_isl_failed(p->ctx, d, "build the model");
			goto error;
		}
	}
	parts_clear(&g);
	if (parts_restrict(all, context) < 0) {
		tc_poly_isl_failed(p->ctx, d, "build the model");
		goto error;
	}
	*deps = deps_of(p, all, 1, scat);
	*near = isl_union_map_coalesce(isl_union_map_union(*near, isl_union_map_copy(*deps)));
	*near = tc_poly_lex_updates(p, *near, all->domain);
	if (scat) {
		*deps = relax_atomic_scatters(p, *deps);
		*near = relax_atomic_scatters(p, *near);
	}
	if (!*deps || !*near) {
		tc_poly_isl_failed(p->ctx, d, "compute dependences");
		goto error;
	}
	isl_union_set_free(scat);
	return 0;
error:
	isl_union_set_free(scat);
	parts_clear(&one);
	parts_clear(&g);
	parts_clear(all);
	isl_union_map_free(*deps);
	isl_union_map_free(*near);
	*deps = *near = NULL;
	return -1;
}

__tc_give tc_poly *tc_poly_build(__tc_keep isl_ctx *ctx, __tc_keep const tc_ir_func *f,
	__tc_keep const int64_t *params, __tc_keep const tc_target *target, __tc_keep tc_diags *d)
{
	return tc_poly_build_free(ctx, f, params, NULL, target, d);
}

__tc_give tc_poly *tc_poly_build_free(__tc_keep isl_ctx *ctx, __tc_keep const tc_ir_func *f,
	__tc_keep const int64_t *params, __tc_keep const unsigned char *free,
	__tc_keep const tc_target *target, __tc_keep tc_diags *d)
{
	tc_poly *p = tc_calloc(1, sizeof(*p));
	parts all;
	int i;

	if (!p)
		goto oom;
	p->ctx = ctx;
	p->ctx_max_ops = isl_ctx_get_max_operations(ctx);
	p->f = f;
	p->target = target;
	p->opts.order = 1;
	p->opts.parallel = 1;
	if (params) {
		p->params = tc_malloc((size_t)(f->nparams + 1) * sizeof(int64_t));
		if (!p->params)
			goto oom;
		memcpy(p->params, params, (size_t)f->nparams * sizeof(int64_t));
		for (i = 0; free && i < f->nparams && !p->free; i++)
			if (free[i] && !(p->free = tc_malloc((size_t)f->nparams)))
				goto oom;
		if (p->free)
			memcpy(p->free, free, (size_t)f->nparams);
	}
	if (make_stmts(p) < 0)
		goto oom;
	tc_poly_budget(p);
	if (build_context(p, d) < 0)
		goto error;
	if (build_parts(p, p->context, &all, &p->deps, &p->near, d) < 0)
		goto error;
	p->domain = all.domain;
	p->writes = all.writes;
	p->reads = all.reads;
	p->original = all.original;
	tc_poly_budget_done(p);
	return p;
oom:
	{
		tc_loc none;
		memset(&none, 0, sizeof(none));
		tc_error(d, none, "out of memory building the polyhedral model");
	}
error:
	tc_poly_free(p);
	return NULL;
}

tc_stat tc_poly_build_generic(__tc_keep tc_poly *p, __tc_keep tc_diags *d)
{
	parts gen;
	isl_union_map *gdeps = NULL;
	if (!p->params || p->gdomain)
		return TC_OK;
	if (!p->gcontext && !(p->gcontext = context_of(p, 0, NULL, 1, d)))
		return TC_ERR;
	if (fixed_sizes(p, 0) && !p->gat && !(p->gat = context_of(p, 1, NULL, 1, d)))
		return TC_ERR;
	if (build_parts(p, p->gcontext, &gen, &gdeps, &p->gnear, d) < 0)
		return TC_ERR;
	p->gdomain = gen.domain;
	gen.domain = NULL;
	parts_clear(&gen);
	isl_union_map_free(gdeps);
	return TC_OK;
}

__tc_give isl_union_set *tc_poly_generic_at(__tc_keep const tc_poly *p,
	__tc_take isl_union_set *dom)
{
	return p->gat ? isl_union_set_intersect_params(dom, isl_set_copy(p->gat)) : dom;
}

__tc_give isl_set *tc_poly_ast_context(__tc_keep const tc_poly *p)
{
	isl_set *c = isl_set_copy(p->context);
	return p->gat ? isl_set_intersect_params(c, isl_set_copy(p->gat)) : c;
}

__tc_give isl_union_set *tc_poly_stmt_instances(__tc_keep const tc_poly *p,
	__tc_keep const tc_poly_stmt *st)
{
	isl_space *sp = stmt_space(isl_union_set_get_space(p->domain), st);
	return isl_union_set_intersect(isl_union_set_from_set(isl_set_universe(sp)),
		isl_union_set_copy(p->domain));
}

__tc_give isl_union_map *tc_poly_lex_updates(__tc_keep const tc_poly *p,
	__tc_take isl_union_map *near, __tc_keep isl_union_set *dom)
{
	int i;
	for (i = 0; near && i < p->nstmts; i++) {
		const tc_poly_stmt *st = &p->stmts[i];
		isl_map *m;
		if (st->kind != TC_POLY_UPDATE || st->ir->sub || st->ndims <= st->ir->nlhs ||
			tc_ir_reads(st->ir->rhs, st->ir->tensor))
			continue;
		m = same_element_pairs(dom, st);
		near = isl_union_map_subtract(near, isl_union_map_from_map(
			isl_map_universe(isl_map_get_space(m))));
		near = isl_union_map_union(near, isl_union_map_from_map(m));
	}
	return near;
}

__tc_give isl_union_set *tc_poly_pack_instances(__tc_keep const tc_poly *p)
{
	isl_union_set *packs = isl_union_set_empty(isl_union_set_get_space(p->domain));
	int i;
	for (i = 0; i < p->nstmts; i++)
		if (p->stmts[i].ir->pack)
			packs = isl_union_set_union(packs, tc_poly_stmt_instances(p, &p->stmts[i]));
	return packs;
}

int tc_poly_is_pack(__tc_keep const tc_poly *p, __tc_keep isl_union_set *instances)
{
	isl_union_set *packs = tc_poly_pack_instances(p);
	isl_bool sub = isl_union_set_is_subset(instances, packs);
	isl_union_set_free(packs);
	return sub == isl_bool_true;
}

/* ---- legality ---- */

typedef struct pad_ctx {
	int dims;
	isl_union_map *out;
} pad_ctx;

static isl_stat max_dims_cb(isl_map *map, void *user)
{
	pad_ctx *pc = user;
	isl_size n = isl_map_dim(map, isl_dim_out);
	if (n > pc->dims)
		pc->dims = n;
	isl_map_free(map);
	return isl_stat_ok;
}

/* map with its range padded by zeros to pc->dims dimensions, in one
 * anonymous space, so that schedules of different depths compare. */
static isl_stat pad_cb(isl_map *map, void *user)
{
	pad_ctx *pc = user;
	isl_size n = isl_map_dim(map, isl_dim_out);
	int i;
	map = isl_map_add_dims(map, isl_dim_out, (unsigned)(pc->dims - n));
	for (i = n; i < pc->dims; i++)
		map = isl_map_fix_si(map, isl_dim_out, (unsigned)i, 0);
	map = isl_map_reset_tuple_id(map, isl_dim_out);
	pc->out = isl_union_map_add_map(pc->out, map);
	return isl_stat_ok;
}

int tc_poly_schedule_legal(__tc_keep tc_poly *p, __tc_keep isl_schedule *s)
{
	return tc_poly_schedule_legal_for(s, p->deps);
}

int tc_poly_schedule_legal_for(__tc_keep isl_schedule *s, __tc_keep isl_union_map *deps)
{
	isl_union_map *map = isl_schedule_get_map(s), *times;
	pad_ctx pc = {0, NULL};
	isl_space *sp;
	isl_bool ok;
	if (!map)
		return -1;
	isl_union_map_foreach_map(map, max_dims_cb, &pc);
	pc.out = isl_union_map_empty(isl_union_map_get_space(map));
	isl_union_map_foreach_map(map, pad_cb, &pc);
	isl_union_map_free(map);
	/* the times of the source and the target of every dependence, none
	 * of them at or after its target's: per dependence, rather than the
	 * order of every pair of statements (isl_union_map_lex_lt_union_map,
	 * quadratic in the statements and costly with tiles' divisions:
	 * conv2d's final check went from 340 to about 100 ms) */
	times = isl_union_map_apply_range(
		isl_union_map_apply_domain(isl_union_map_copy(deps), isl_union_map_copy(pc.out)),
		isl_union_map_copy(pc.out));
	sp = isl_space_set_from_params(isl_union_map_get_space(pc.out));
	isl_union_map_free(pc.out);
	sp = isl_space_add_dims(sp, isl_dim_set, (unsigned)pc.dims);
	times = isl_union_map_intersect(times, isl_union_map_from_map(isl_map_lex_ge(sp)));
	ok = isl_union_map_is_empty(times);
	isl_union_map_free(times);
	return ok < 0 ? -1 : ok == isl_bool_true;
}

const tc_poly_stmt *tc_poly_find_stmt(__tc_keep const tc_poly *p, const char *name)
{
	int i;
	for (i = 0; name && i < p->nstmts; i++)
		if (!strcmp(p->stmts[i].name, name))
			return &p->stmts[i];
	return NULL;
}

/* The maps of a union map to the isl array named name. */
typedef struct array_acc {
	const char *name;
	isl_union_map *acc;
} array_acc;

static isl_stat keep_array(isl_map *map, void *user)
{
	array_acc *a = user;
	const char *n = isl_map_get_tuple_name(map, isl_dim_out);
	if (n && !strcmp(n, a->name))
		a->acc = isl_union_map_add_map(a->acc, map);
	else
		isl_map_free(map);
	return a->acc ? isl_stat_ok : isl_stat_error;
}

isl_union_map *tc_poly_tensor_accesses(__tc_keep const tc_poly *p, __tc_keep isl_union_map *umap,
	int t, __tc_keep isl_union_set *dom)
{
	tc_buf name;
	array_acc a;
	isl_union_map *m = isl_union_map_copy(umap);
	if (dom)
		m = isl_union_map_intersect_domain(m, isl_union_set_copy(dom));
	tc_buf_init(&name);
	put_name(&name, p->f->tensors[t].name); /* as the model writes it */
	a.name = name.s;
	a.acc = m && a.name ? isl_union_map_empty(isl_union_map_get_space(m)) : NULL;
	if (a.acc && isl_union_map_foreach_map(m, keep_array, &a) < 0)
		a.acc = isl_union_map_free(a.acc);
	isl_union_map_free(m);
	tc_buf_free(&name);
	return a.acc;
}

const char *const TC_POLY_GPU_BLOCK[3] = {"tc_bx", "tc_by", "tc_bz"};
const char *const TC_POLY_GPU_THREAD[3] = {"tc_tx", "tc_ty", "tc_tz"};

void tc_poly_gpu_copies_free(__tc_keep tc_poly *p)
{
	int i;
	for (i = 0; i < p->ngpu_copies; i++)
		isl_pw_multi_aff_free(p->gpu_copies[i].offset);
	for (i = 0; i < p->ngpu_locals; i++)
		isl_pw_multi_aff_free(p->gpu_locals[i].index);
	tc_free(p->gpu_copies);
	tc_free(p->gpu_locals);
	p->gpu_copies = NULL;
	p->gpu_locals = NULL;
	p->ngpu_copies = p->ngpu_locals = 0;
}

void tc_poly_free(__tc_take tc_poly *p)
{
	if (!p)
		return;
	watch_free(p->watch);
	isl_ctx_set_max_operations(p->ctx, p->ctx_max_ops); /* the caller's quota back */
	isl_ast_node_free(p->ast);
	isl_schedule_free(p->schedule);
	isl_union_map_free(p->deps);
	isl_union_map_free(p->near);
	isl_union_map_free(p->original);
	isl_union_map_free(p->reads);
	isl_union_map_free(p->writes);
	isl_union_set_free(p->domain);
	isl_set_free(p->context);
	isl_set_free(p->at);
	tc_free(p->free);
	isl_union_map_free(p->gnear);
	isl_union_set_free(p->gdomain);
	isl_set_free(p->gcontext);
	isl_set_free(p->gat);
	tc_free(p->stmts);
	tc_free(p->params);
	tc_free(p->rowbuf);
	tc_poly_gpu_copies_free(p);
	tc_free(p);
}

int tc_poly_param_index(__tc_keep const tc_poly *p, const char *isl_name)
{
	int i;
	for (i = 0; isl_name && i < p->f->nparams; i++) {
		const char *n = p->f->params[i].name;
		size_t len = strlen(n);
		if (!strncmp(isl_name, n, len) &&
			(!isl_name[len] || (tc_poly_isl_keyword(n) && !strcmp(isl_name + len, "_"))))
			return i;
	}
	return -1;
}

__tc_give char *tc_poly_param_name(__tc_keep const tc_poly *p, int i)
{
	tc_buf b;
	tc_buf_init(&b);
	put_name(&b, p->f->params[i].name);
	return tc_buf_take(&b);
}

__tc_give char *tc_poly_schedule_str(__tc_keep const tc_poly *p)
{
	char *s = isl_schedule_to_str(p->schedule);
	char *r = s ? tc_strdup(s) : NULL;
	free(s);
	return r;
}
