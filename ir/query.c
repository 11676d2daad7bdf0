/* Questions about IR functions that the IR rewrites (pack.c, inline.c,
 * share.c) and the schedule passes ask. */
#include "ir.h"

#include "../lang/sexpr.h"

#include <string.h>

tc_ir_func *tc_ir_func_room(__tc_keep tc_arena *ar, __tc_keep const tc_ir_func *f,
	int more_tensors, int nstmts)
{
	tc_ir_func *g = tc_arena_alloc(ar, sizeof(*g));
	if (!g)
		return NULL;
	*g = *f;
	g->tensors = tc_arena_alloc(ar, (size_t)(f->ntensors + more_tensors + 1) * sizeof(*g->tensors));
	g->stmts = tc_arena_alloc(ar, (size_t)(nstmts + 1) * sizeof(*g->stmts));
	if (!g->tensors || !g->stmts)
		return NULL;
	memcpy(g->tensors, f->tensors, (size_t)f->ntensors * sizeof(*g->tensors));
	g->nstmts = 0;
	return g;
}

tc_ir_expr *tc_ir_new_expr(__tc_keep tc_arena *ar, tc_ir_op op, tc_dtype type, tc_loc loc, int nargs)
{
	tc_ir_expr *e = tc_arena_alloc(ar, sizeof(*e));
	if (!e)
		return NULL;
	memset(e, 0, sizeof(*e));
	e->op = op;
	e->type = type;
	e->loc = loc;
	e->nargs = nargs;
	if (nargs && !(e->args = tc_arena_alloc(ar, (size_t)nargs * sizeof(*e->args))))
		return NULL;
	return e;
}

tc_ir_expr *tc_ir_read_at(__tc_keep tc_arena *ar, __tc_keep const tc_ir_func *f, int t,
	__tc_keep const int *idx, int n, tc_loc loc)
{
	tc_ir_expr *e = tc_ir_new_expr(ar, TC_OP_READ, f->tensors[t].dtype, loc, n);
	int k;
	if (!e)
		return NULL;
	e->id = t;
	for (k = 0; k < n; k++) {
		if (!(e->args[k] = tc_ir_new_expr(ar, TC_OP_INDEX, TC_T_I32, loc, 0)))
			return NULL;
		e->args[k]->id = idx[k];
	}
	return e;
}

/* The index variables (a bit each, below 64) that e uses. */
static uint64_t vars_used(const tc_ir_expr *e)
{
	uint64_t m = 0;
	int i;
	if (e->op == TC_OP_INDEX && e->id >= 0 && e->id < 64)
		m |= (uint64_t)1 << e->id;
	for (i = 0; i < e->nargs; i++)
		m |= vars_used(e->args[i]);
	return m;
}

int tc_ir_reused_read(__tc_keep const tc_ir_expr *e, uint64_t lhs)
{
	int i;
	if (e->op == TC_OP_READ) {
		uint64_t m = 0;
		for (i = 0; i < e->nargs; i++)
			m |= vars_used(e->args[i]);
		if ((m & lhs) != lhs)
			return 1;
	}
	for (i = 0; i < e->nargs; i++)
		if (tc_ir_reused_read(e->args[i], lhs))
			return 1;
	return 0;
}

int tc_ir_plain_var(__tc_keep const tc_ir_expr *e)
{
	while (e->op == TC_OP_CAST)
		e = e->args[0];
	return e->op == TC_OP_INDEX ? e->id : -1;
}

int tc_ir_uses_var(__tc_keep const tc_ir_expr *e, int v)
{
	int k;
	if (e->op == TC_OP_INDEX)
		return e->id == v;
	for (k = 0; k < e->nargs; k++)
		if (tc_ir_uses_var(e->args[k], v))
			return 1;
	return 0;
}

int64_t tc_ir_var_step(__tc_keep const tc_ir_expr *e, int v)
{
	int64_t a, b;
	switch (e->op) {
	case TC_OP_INDEX:
		return e->id == v;
	case TC_OP_CAST:
		return tc_ir_var_step(e->args[0], v);
	case TC_OP_NEG:
		a = tc_ir_var_step(e->args[0], v);
		return a == TC_IR_NO_STEP ? a : -a;
	case TC_OP_ADD:
	case TC_OP_SUB:
		a = tc_ir_var_step(e->args[0], v);
		b = tc_ir_var_step(e->args[1], v);
		if (a == TC_IR_NO_STEP || b == TC_IR_NO_STEP)
			return TC_IR_NO_STEP;
		return e->op == TC_OP_ADD ? a + b : a - b;
	case TC_OP_MUL:
		if (!tc_ir_uses_var(e, v))
			return 0;
		for (a = 0; a < 2; a++) {
			const tc_ir_expr *c = e->args[a], *x = e->args[1 - a];
			if (c->op == TC_OP_CONST && tc_dtype_is_int(c->type)) {
				b = tc_ir_var_step(x, v);
				return b == TC_IR_NO_STEP ? b : b * c->c.i;
			}
		}
		return TC_IR_NO_STEP;
	default:
		return tc_ir_uses_var(e, v) ? TC_IR_NO_STEP : 0;
	}
}

int tc_ir_count_reads(__tc_keep const tc_ir_expr *e)
{
	int k, n = e->op == TC_OP_READ;
	for (k = 0; k < e->nargs; k++)
		n += tc_ir_count_reads(e->args[k]);
	return n;
}

static int fusable(tc_dtype t)
{
	return t == TC_T_F32 || t == TC_T_F64;
}

/* Whether e is a product of type t. */
static int product_of(const tc_ir_expr *e, tc_dtype t)
{
	return e->op == TC_OP_MUL && e->nargs == 2 && e->type == t &&
		e->args[0]->type == t && e->args[1]->type == t;
}

int tc_ir_fma_of(__tc_keep const tc_ir_expr *e, tc_ir_fma *m)
{
	const tc_ir_expr *p;
	int left;
	if ((e->op != TC_OP_ADD && e->op != TC_OP_SUB) || e->nargs != 2 || !fusable(e->type) ||
		e->args[0]->type != e->type || e->args[1]->type != e->type)
		return 0;
	left = product_of(e->args[0], e->type);
	if (!left && !product_of(e->args[1], e->type))
		return 0;
	p = e->args[!left];
	m->x = p->args[0];
	m->y = p->args[1];
	m->z = e->args[left];
	m->neg_xy = !left && e->op == TC_OP_SUB;
	m->neg_z = left && e->op == TC_OP_SUB;
	m->product_first = left;
	return 1;
}

int tc_ir_fma_reduction(__tc_keep const tc_ir_stmt *s, tc_dtype acc, int widened,
	const tc_ir_expr **x, const tc_ir_expr **y)
{
	if (s->red != TC_RED_ADD || widened || !fusable(acc) || !product_of(s->rhs, acc))
		return 0;
	*x = s->rhs->args[0];
	*y = s->rhs->args[1];
	return 1;
}

int tc_ir_reads(__tc_keep const tc_ir_expr *e, int t)
{
	int k;
	if (e->op == TC_OP_READ && e->id == t)
		return 1;
	for (k = 0; k < e->nargs; k++)
		if (tc_ir_reads(e->args[k], t))
			return 1;
	return 0;
}

int tc_ir_var_range(__tc_keep const tc_ir_var *v, __tc_keep const int64_t *params, int64_t *lo,
	int64_t *hi)
{
	return !tc_sx_has_var(v->lo) && !tc_sx_has_var(v->hi) &&
		tc_sx_eval(v->lo, params, NULL, lo) == TC_OK && tc_sx_eval(v->hi, params, NULL, hi) == TC_OK;
}

int tc_ir_covers_tensor(__tc_keep const tc_ir_func *f, __tc_keep const tc_ir_stmt *s,
	__tc_keep const int64_t *params)
{
	const tc_ir_tensor *t = &f->tensors[s->tensor];
	int k;
	if (s->nvars != s->nlhs || s->nlhs != t->ndim || (s->guard && !s->init))
		return 0;
	for (k = 0; k < s->nlhs; k++) {
		int64_t lo, hi, ext;
		if (!tc_ir_var_range(&s->vars[k], params, &lo, &hi) ||
			tc_sx_eval(t->ext[k], params, NULL, &ext) < 0 || lo != 0 || hi != ext)
			return 0;
	}
	return 1;
}

int tc_ir_has_scatter(__tc_keep const tc_ir_func *f)
{
	int i;
	for (i = 0; i < f->nstmts; i++)
		if (f->stmts[i].sub)
			return 1;
	return 0;
}

const char *tc_ir_fresh_name(__tc_keep tc_arena *ar, __tc_keep const tc_ir_func *f,
	const char *base, const char *suffix)
{
	const char *name = NULL;
	int n, i, clash = 1;
	for (n = 0; clash && n < 1000; n++) {
		tc_buf b;
		tc_buf_init(&b);
		tc_buf_printf(&b, n ? "%s%s%d" : "%s%s", base, suffix, n);
		name = b.oom ? NULL : tc_arena_strdup(ar, b.s);
		tc_buf_free(&b);
		if (!name)
			return NULL;
		for (clash = 0, i = 0; i < f->ntensors && !clash; i++)
			clash = !strcmp(f->tensors[i].name, name);
	}
	return clash ? NULL : name;
}

int64_t tc_ir_tail_bytes(__tc_keep const tc_ir_func *f, int t, int from,
	__tc_keep const int64_t *params)
{
	const tc_ir_tensor *tt = &f->tensors[t];
	int64_t bytes = tc_dtype_size(tt->dtype), ext;
	int k;
	for (k = from; k < tt->ndim; k++)
		if (tc_sx_eval(tt->ext[k], params, NULL, &ext) < 0 || ext < 0 ||
			__builtin_mul_overflow(bytes, ext, &bytes))
			return -1;
	return bytes;
}

int tc_ir_free_sizes(__tc_keep const tc_ir_func *f, unsigned char *free)
{
	int i, t, k, n = 0;
	for (i = 0; i < f->nparams; i++) {
		free[i] = 1;
		for (t = 0; t < f->ntensors && free[i]; t++)
			for (k = 1; k < f->tensors[t].ndim && free[i]; k++)
				free[i] = !tc_sx_mentions(f->tensors[t].ext[k], TC_SX_PARAM, i);
		n += free[i];
	}
	return n;
}
