/* Modules (include/tcomp.h): the parsed and checked source of a .tc file.
 *
 * A module owns the source text, the arena of its AST and IR, and the IR of
 * each def (lowered on first use).  Kernels hold a reference to their module,
 * so a module freed while kernels live stays alive until the last kernel is
 * freed. */
#include "module.h"

#include "compiled.h"
#include "error.h"
#include "internal.h"
#include "tensor.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

tc_module *tc_module_parse(tc_context *ctx, const char *source, const char *filename)
{
	tc_module *m;
	tc_diags d;
	tc_buf b;

	if (!ctx)
		return NULL;
	tc_rt_clear_error(ctx);
	tc_free(ctx->warnings);
	ctx->warnings = NULL;
	if (!source) {
		tc_rt_set_error(ctx, "tc_module_parse: source is NULL");
		return NULL;
	}
	m = tc_calloc(1, sizeof(*m));
	if (m) {
		m->ctx = ctx;
		m->refs = 1;
	}
	if (!m || !(m->ar = tc_arena_new()) ||
		!(m->src = tc_source_new(filename ? filename : "<string>", source, strlen(source)))) {
		tc_rt_set_error(ctx, "out of memory");
		goto error;
	}
	tc_diags_init(&d, m->src);
	m->prog = tc_parse(m->ar, m->src, &d);
	/* check the defs that parsed, even if others did not */
	if (m->prog && tc_sema_check(m->prog, &d) < 0 && !d.nerrors)
		d.oom = 1; /* failed without saying why: an allocation failed */
	if (!m->prog || d.oom || tc_arena_failed(m->ar)) {
		tc_rt_set_error(ctx, "out of memory while checking %s", m->src->name);
		tc_diags_clear(&d);
		goto error;
	}
	if (d.nerrors) {
		tc_rt_set_error_diags(ctx, &d);
		tc_diags_clear(&d);
		goto error;
	}
	if (m->prog->ndefs == 0) {
		tc_rt_set_error(ctx, "%s: no def in the source", m->src->name);
		tc_diags_clear(&d);
		goto error;
	}
	tc_buf_init(&b);
	tc_diags_render(&d, 1u << TC_SEV_WARNING, &b);
	ctx->warnings = tc_buf_take(&b);
	tc_diags_clear(&d);
	m->funcs = tc_calloc((size_t)m->prog->ndefs, sizeof(tc_ir_func *));
	if (!m->funcs) {
		tc_rt_set_error(ctx, "out of memory");
		goto error;
	}
	return m;
error:
	if (m) {
		m->refs = 1;
		tc_module_free(m);
	}
	return NULL;
}

/* Read a whole file; NULL with a message in ctx. */
static char *read_file(tc_context *ctx, const char *path)
{
	FILE *fp = fopen(path, "rb");
	tc_buf b;
	char chunk[65536];
	size_t n;

	if (!fp) {
		tc_rt_set_error(ctx, "cannot open '%s': %s", path, strerror(errno));
		return NULL;
	}
	tc_buf_init(&b);
	while ((n = fread(chunk, 1, sizeof(chunk), fp)) > 0)
		tc_buf_putn(&b, chunk, n);
	if (ferror(fp)) {
		tc_rt_set_error(ctx, "cannot read '%s': %s", path, strerror(errno));
		fclose(fp);
		tc_buf_free(&b);
		return NULL;
	}
	fclose(fp);
	if (b.oom) {
		tc_rt_set_error(ctx, "out of memory reading '%s'", path);
		tc_buf_free(&b);
		return NULL;
	}
	if (memchr(b.s ? b.s : "", 0, b.len)) {
		tc_rt_set_error(ctx, "'%s' contains a NUL byte; .tc files are text", path);
		tc_buf_free(&b);
		return NULL;
	}
	return tc_buf_take(&b);
}

tc_module *tc_module_load(tc_context *ctx, const char *path)
{
	char *text;
	tc_module *m;
	if (!ctx)
		return NULL;
	tc_rt_clear_error(ctx);
	if (!path) {
		tc_rt_set_error(ctx, "tc_module_load: path is NULL");
		return NULL;
	}
	text = read_file(ctx, path);
	if (!text)
		return NULL;
	m = tc_module_parse(ctx, text, path);
	tc_free(text);
	return m;
}

void tc_module_free(tc_module *m)
{
	int i, last;
	if (!m)
		return;
	pthread_mutex_lock(&m->ctx->lock);
	last = --m->refs == 0;
	pthread_mutex_unlock(&m->ctx->lock);
	if (!last)
		return;
	for (i = 0; i < m->compiled.n; i++)
		tc_rt_compiled_free(m->compiled.v[i]);
	tc_vec_free(&m->compiled);
	for (i = 0; i < m->lookups.n; i++) {
		tc_rt_lookup *l = m->lookups.v[i];
		tc_free(l->memo);
		tc_options_free(l->options);
		tc_free(l);
	}
	tc_vec_free(&m->lookups);
	tc_free(m->funcs);
	tc_arena_free(m->ar);
	tc_source_free(m->src);
	tc_free(m);
}

int tc_module_num_defs(const tc_module *m)
{
	return m ? m->prog->ndefs : 0;
}

const char *tc_module_def_name(const tc_module *m, int i)
{
	return m && i >= 0 && i < m->prog->ndefs ? m->prog->defs[i]->name : NULL;
}

int tc_rt_find_def(__tc_keep tc_module *m, const char *entry)
{
	tc_buf b;
	int i;
	if (!entry) {
		tc_rt_set_error(m->ctx, "entry name is NULL");
		return -1;
	}
	for (i = 0; i < m->prog->ndefs; i++)
		if (!strcmp(m->prog->defs[i]->name, entry))
			return i;
	tc_buf_init(&b);
	for (i = 0; i < m->prog->ndefs; i++)
		tc_buf_printf(&b, "%s%s", i ? ", " : "", m->prog->defs[i]->name);
	tc_rt_set_error(m->ctx, "no def named '%s' in %s (it has: %s)", entry, m->src->name,
		b.s ? b.s : "");
	tc_buf_free(&b);
	return -1;
}

static const tc_ir_func *module_func_locked(tc_module *m, int i);

const tc_ir_func *tc_rt_module_func(__tc_keep tc_module *m, int i)
{
	const tc_ir_func *f;
	pthread_mutex_lock(&m->ctx->lock); /* lowering allocates in the module */
	f = module_func_locked(m, i);
	pthread_mutex_unlock(&m->ctx->lock);
	return f;
}

static const tc_ir_func *module_func_locked(tc_module *m, int i)
{
	if (!m->funcs[i]) {
		m->funcs[i] = tc_ir_lower(m->ar, m->prog->defs[i], m->src);
		if (!m->funcs[i] && tc_arena_failed(m->ar))
			tc_rt_set_error(m->ctx, "out of memory while lowering '%s'",
				m->prog->defs[i]->name);
		else if (!m->funcs[i])
			tc_rt_set_error(m->ctx, "internal error: lowering '%s' failed",
				m->prog->defs[i]->name);
	}
	return m->funcs[i];
}

const tc_def *tc_rt_module_def_of(__tc_keep const tc_module *m, __tc_keep const tc_ir_func *f)
{
	int i;
	for (i = 0; i < m->prog->ndefs; i++)
		if (!strcmp(m->prog->defs[i]->name, f->name))
			return m->prog->defs[i];
	return NULL;
}

/* The checked def named entry of m, the calling thread's error cleared
 * first: NULL for a NULL m (no message) or a NULL or unknown entry (a
 * message naming m's defs). */
static const tc_def *entry_def(tc_module *m, const char *entry)
{
	int i;
	if (!m)
		return NULL;
	tc_rt_clear_error(m->ctx);
	return (i = tc_rt_find_def(m, entry)) < 0 ? NULL : m->prog->defs[i];
}

int tc_module_def_arity(tc_module *m, const char *entry, int *n_inputs, int *n_outputs)
{
	const tc_def *def = entry_def(m, entry);
	if (!def)
		return -1;
	if (n_inputs)
		*n_inputs = def->ninputs;
	if (n_outputs)
		*n_outputs = def->noutputs;
	return 0;
}

int tc_module_input_type(tc_module *m, const char *entry, int t, DLDataType *dtype, int *ndim)
{
	const tc_def *def = entry_def(m, entry);
	if (!def)
		return -1;
	if (t < 0 || t >= def->ninputs) {
		tc_rt_set_error(m->ctx, "'%s' has no input number %d", entry, t);
		return -1;
	}
	if (dtype)
		*dtype = tc_rt_dl_dtype(def->tensors[t].dtype);
	if (ndim)
		*ndim = def->tensors[t].ndim;
	return 0;
}

const char *tc_module_tensor_name(tc_module *m, const char *entry, int t)
{
	const tc_def *def = entry_def(m, entry);
	if (!def)
		return NULL;
	if (t < 0 || t >= def->ninputs + def->noutputs) {
		tc_rt_set_error(m->ctx, "'%s' has no tensor number %d", entry, t);
		return NULL;
	}
	return def->tensors[t].name;
}

/* Whether e, a part of statement s, reads tensor t (through s's lets too);
 * 1 past a nesting depth of 256 (a safe answer for the caller). */
static int expr_reads(const tc_stmt *s, const tc_expr *e, int t, int depth)
{
	int k;
	if (!e)
		return 0;
	if (depth > 256)
		return 1;
	if ((e->kind == TC_AST_CALL || e->kind == TC_AST_IDENT) && e->ref == TC_REF_TENSOR &&
		e->ref_id == t)
		return 1;
	if (e->kind == TC_AST_IDENT && e->ref == TC_REF_LET && e->ref_id >= 0 &&
		e->ref_id < s->nwhere)
		return expr_reads(s, s->where[e->ref_id].val, t, depth + 1);
	for (k = 0; k < e->nargs; k++)
		if (expr_reads(s, e->args[k], t, depth + 1))
			return 1;
	return 0;
}

/* Whether statement s reads tensor t anywhere: its right-hand side, its
 * where clauses, its gathered left-hand subscripts. */
static int stmt_reads(const tc_stmt *s, int t)
{
	int k;
	if (expr_reads(s, s->rhs, t, 0))
		return 1;
	for (k = 0; k < s->nwhere; k++) {
		const tc_where *w = &s->where[k];
		if (expr_reads(s, w->lo, t, 0) || expr_reads(s, w->hi, t, 0) ||
			expr_reads(s, w->val, t, 0))
			return 1;
	}
	for (k = 0; s->sub && k < s->nidx; k++)
		if (expr_reads(s, s->sub[k], t, 0))
			return 1;
	return 0;
}

/* Output t's first write covers it whole before anything reads it: no
 * statement before reads it, and the first writing statement reads none
 * of it, is '=' or starts from the identity ('!'), has no 'exists' and no
 * gathered subscript, and each left-hand index is a distinct name over the
 * whole extent (0:ext). */
static int overwritten(const tc_def *def, int t)
{
	const tc_tensor_info *ti = &def->tensors[t];
	const tc_stmt *s;
	int64_t lo;
	int k, j;
	if (ti->first_write < 0 || ti->first_write >= def->nstmts)
		return 0;
	for (k = 0; k < ti->first_write; k++)
		if (stmt_reads(def->stmts[k], t))
			return 0;
	s = def->stmts[ti->first_write];
	if (s->sub || stmt_reads(s, t) || (s->red != TC_RED_ASSIGN && !s->init) ||
		s->nidx != ti->ndim || s->nvars < s->nidx)
		return 0;
	for (k = 0; k < s->nwhere; k++)
		if (s->where[k].kind == TC_WHERE_EXISTS)
			return 0;
	for (k = 0; k < s->nidx; k++) {
		if (!s->idx[k] || strcmp(s->idx[k], s->vars[k].name))
			return 0;
		for (j = 0; j < k; j++)
			if (!strcmp(s->idx[j], s->idx[k]))
				return 0;
		if (!tc_sx_is_const(s->vars[k].lo, &lo) || lo != 0 ||
			!tc_sx_equal(s->vars[k].hi, ti->ext[k]))
			return 0;
	}
	return 1;
}

int tc_module_output_overwritten(tc_module *m, const char *entry, int i)
{
	const tc_def *def = entry_def(m, entry);
	if (!def)
		return -1;
	if (i < 0 || i >= def->noutputs) {
		tc_rt_set_error(m->ctx, "'%s' has no output number %d", entry, i);
		return -1;
	}
	return overwritten(def, def->ninputs + i);
}

char *tc_module_signature(tc_module *m, const char *entry)
{
	const tc_def *def = entry_def(m, entry);
	tc_buf b;
	if (!def)
		return NULL;
	tc_buf_init(&b);
	tc_def_signature(def, &b);
	return tc_buf_take(&b);
}

int tc_module_hash(tc_module *m, const char *entry, char out[17])
{
	const tc_def *def;
	if (!out || !(def = entry_def(m, entry)))
		return -1;
	snprintf(out, 17, "%016llx", (unsigned long long)tc_ir_hash(def));
	return 0;
}

