/* The public C API (include/tcomp.h): contexts, modules, options, kernels.
 *
 * A module owns the source text, the arena of its AST and IR, and the IR of
 * each def (lowered on first use).  Kernels hold a reference to their module,
 * so a module freed while kernels live stays alive until the last kernel is
 * freed. */
#include "tcomp.h"

#include "../ir/interp.h"
#include "../lang/ast.h"
#include "../polyhedral/poly.h"
#include "options.h"
#include "tensor.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

struct tc_context {
	char *warnings;
};

/* Errors are kept per thread (so that concurrent tc_kernel_run calls do not
 * race on the message): the calling thread's last error and the context it
 * belongs to. */
typedef struct thread_error {
	const tc_context *ctx;
	char *msg;
} thread_error;

static pthread_key_t error_key;
static pthread_once_t error_once = PTHREAD_ONCE_INIT;
static int error_key_ok;

static void thread_error_free(void *p)
{
	thread_error *e = p;
	tc_free(e->msg);
	tc_free(e);
}

static void error_key_init(void)
{
	error_key_ok = pthread_key_create(&error_key, thread_error_free) == 0;
}

/* The calling thread's error slot (NULL when out of memory). */
static thread_error *thread_err(int create)
{
	thread_error *e;
	pthread_once(&error_once, error_key_init);
	if (!error_key_ok)
		return NULL;
	e = pthread_getspecific(error_key);
	if (!e && create) {
		e = tc_calloc(1, sizeof(*e));
		if (e && pthread_setspecific(error_key, e) != 0) {
			tc_free(e);
			e = NULL;
		}
	}
	return e;
}

struct tc_module {
	tc_context *ctx;
	int refs;
	tc_arena *ar;
	tc_source *src;
	tc_program *prog;
	tc_ir_func **funcs; /* per def, lowered on demand */
};

struct tc_kernel {
	tc_module *m;
	const tc_ir_func *f;
	int64_t *params;
	tc_tensor *shapes; /* inputs then outputs: dtype, ndim, shape (no data) */
	tc_options *options;
};

/* ---- errors ---- */

static void set_error_str(tc_context *ctx, char *msg)
{
	thread_error *e = thread_err(msg != NULL);
	if (!e) {
		tc_free(msg);
		return;
	}
	tc_free(e->msg);
	e->msg = msg;
	e->ctx = ctx;
}

static void clear_error(tc_context *ctx)
{
	set_error_str(ctx, NULL);
}

void tc_rt_set_error(tc_context *ctx, const char *fmt, ...)
{
	tc_buf b;
	va_list ap;
	if (!ctx)
		return;
	tc_buf_init(&b);
	tc_buf_puts(&b, "error: ");
	va_start(ap, fmt);
	tc_buf_vprintf(&b, fmt, ap);
	va_end(ap);
	tc_buf_putc(&b, '\n');
	set_error_str(ctx, tc_buf_take(&b));
}

/* Record rendered diagnostics as the context's error. */
static void set_error_diags(tc_context *ctx, const tc_diags *d)
{
	tc_buf b;
	tc_buf_init(&b);
	tc_diags_render(d, 1u << TC_SEV_ERROR | 1u << TC_SEV_WARNING, &b);
	if (!d->nerrors && !d->oom)
		tc_buf_puts(&b, "error: out of memory\n");
	set_error_str(ctx, tc_buf_take(&b));
}

tc_context *tc_context_new(void)
{
	return tc_calloc(1, sizeof(tc_context));
}

void tc_context_free(tc_context *ctx)
{
	thread_error *e;
	if (!ctx)
		return;
	e = thread_err(0);
	if (e && e->ctx == ctx) { /* the calling thread's message about ctx */
		tc_free(e->msg);
		e->msg = NULL;
		e->ctx = NULL;
	}
	tc_free(ctx->warnings);
	tc_free(ctx);
}

const char *tc_context_error(const tc_context *ctx)
{
	const thread_error *e;
	if (!ctx)
		return "error: no context (NULL)\n";
	e = thread_err(0);
	return e && e->ctx == ctx && e->msg ? e->msg : "";
}

const char *tc_context_warnings(const tc_context *ctx)
{
	return ctx && ctx->warnings ? ctx->warnings : "";
}

void tc_string_free(char *s)
{
	tc_free(s);
}

/* ---- modules ---- */

tc_module *tc_module_parse(tc_context *ctx, const char *source, const char *filename)
{
	tc_module *m;
	tc_diags d;
	tc_buf b;

	if (!ctx)
		return NULL;
	clear_error(ctx);
	tc_free(ctx->warnings);
	ctx->warnings = NULL;
	if (!source) {
		tc_rt_set_error(ctx, "tc_module_parse: source is NULL");
		return NULL;
	}
	m = tc_calloc(1, sizeof(*m));
	if (!m || !(m->ar = tc_arena_new()) ||
		!(m->src = tc_source_new(filename ? filename : "<string>", source, strlen(source)))) {
		tc_rt_set_error(ctx, "out of memory");
		goto error;
	}
	m->ctx = ctx;
	m->refs = 1;
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
		set_error_diags(ctx, &d);
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
	clear_error(ctx);
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
	if (!m || --m->refs > 0)
		return;
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

/* The def called entry, or NULL with an error listing the defs. */
static int find_def(tc_module *m, const char *entry)
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

static const tc_ir_func *get_func(tc_module *m, int i)
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

int tc_module_def_arity(tc_module *m, const char *entry, int *n_inputs, int *n_outputs)
{
	int i;
	if (!m)
		return -1;
	clear_error(m->ctx);
	if ((i = find_def(m, entry)) < 0)
		return -1;
	if (n_inputs)
		*n_inputs = m->prog->defs[i]->ninputs;
	if (n_outputs)
		*n_outputs = m->prog->defs[i]->noutputs;
	return 0;
}

const char *tc_module_tensor_name(tc_module *m, const char *entry, int t)
{
	int i;
	const tc_def *def;
	if (!m)
		return NULL;
	clear_error(m->ctx);
	if ((i = find_def(m, entry)) < 0)
		return NULL;
	def = m->prog->defs[i];
	if (t < 0 || t >= def->ninputs + def->noutputs) {
		tc_rt_set_error(m->ctx, "'%s' has no tensor number %d", entry, t);
		return NULL;
	}
	return def->tensors[t].name;
}

char *tc_module_signature(tc_module *m, const char *entry)
{
	tc_buf b;
	int i;
	if (!m)
		return NULL;
	clear_error(m->ctx);
	if ((i = find_def(m, entry)) < 0)
		return NULL;
	tc_buf_init(&b);
	tc_def_signature(m->prog->defs[i], &b);
	return tc_buf_take(&b);
}

/* The schedule tree or the isl AST of def i, parametric (params NULL) or
 * for concrete sizes. */
static char *emit_poly(tc_module *m, int i, const int64_t *params, const char *stage)
{
	const tc_ir_func *f = get_func(m, i);
	isl_ctx *ctx;
	tc_poly *p = NULL;
	tc_diags d;
	char *text = NULL;
	if (!f)
		return NULL;
	ctx = tc_poly_ctx_new();
	if (!ctx) {
		tc_rt_set_error(m->ctx, "out of memory");
		return NULL;
	}
	tc_diags_init(&d, m->src);
	p = tc_poly_build(ctx, f, params, &d);
	if (p && tc_poly_schedule(p, NULL, 0, &d) == 0) {
		if (!strcmp(stage, "schedule"))
			text = tc_poly_schedule_str(p);
		else if (tc_poly_ast(p, &d) == 0)
			text = tc_poly_ast_str(p);
	}
	if (!text)
		set_error_diags(m->ctx, &d);
	tc_diags_clear(&d);
	tc_poly_free(p);
	isl_ctx_free(ctx);
	return text;
}

char *tc_module_emit(tc_module *m, const char *entry, const char *stage)
{
	tc_buf b;
	int i;
	if (!m)
		return NULL;
	clear_error(m->ctx);
	if ((i = find_def(m, entry)) < 0)
		return NULL;
	tc_buf_init(&b);
	if (stage && !strcmp(stage, "ast")) {
		tc_ast_print_def(m->prog->defs[i], &b);
	} else if (stage && !strcmp(stage, "ir")) {
		const tc_ir_func *f = get_func(m, i);
		if (!f)
			return NULL;
		tc_ir_print(f, &b);
	} else if (stage && !strcmp(stage, "canonical")) {
		tc_ir_canonical(m->prog->defs[i], &b);
	} else if (stage && (!strcmp(stage, "schedule") || !strcmp(stage, "poly-ast"))) {
		char *text = emit_poly(m, i, NULL, stage);
		if (!text)
			return NULL;
		tc_buf_puts(&b, text);
		tc_free(text);
	} else {
		tc_rt_set_error(m->ctx, "unknown stage '%s' (stages without shapes: ast, ir, canonical, schedule, poly-ast)",
			stage ? stage : "(null)");
		return NULL;
	}
	if (b.oom) {
		tc_rt_set_error(m->ctx, "out of memory");
		tc_buf_free(&b);
		return NULL;
	}
	return tc_buf_take(&b);
}

int tc_module_hash(tc_module *m, const char *entry, char out[17])
{
	int i;
	if (!m || !out)
		return -1;
	clear_error(m->ctx);
	if ((i = find_def(m, entry)) < 0)
		return -1;
	snprintf(out, 17, "%016llx", (unsigned long long)tc_ir_hash(m->prog->defs[i]));
	return 0;
}

/* ---- kernels ---- */

/* Convert the DLTensors of one side of a call, checking them. */
static int convert_tensors(tc_context *ctx, const tc_ir_func *f, const char *side, int first,
	const DLTensor *const *ts, int n, int need_data, tc_tensor *out)
{
	int i;
	char err[512];
	if (n && !ts) {
		tc_rt_set_error(ctx, "%s array is NULL", side);
		return -1;
	}
	for (i = 0; i < n; i++) {
		const char *name = f->tensors[first + i].name;
		if (tc_rt_tensor_from_dl(ts[i], need_data, &out[i], err, sizeof(err)) < 0) {
			tc_rt_set_error(ctx, "%s %d ('%s'): %s", side, i, name, err);
			return -1;
		}
	}
	return 0;
}

static int count_ok(tc_context *ctx, const tc_ir_func *f, const char *what, int got, int want,
	int first)
{
	tc_buf b;
	int i;
	if (got == want)
		return 1;
	tc_buf_init(&b);
	for (i = 0; i < want; i++)
		tc_buf_printf(&b, "%s%s", i ? ", " : "", f->tensors[first + i].name);
	tc_rt_set_error(ctx, "'%s' takes %d %s%s (%s) but %d %s given", f->name, want, what,
		want == 1 ? "" : "s", b.s ? b.s : "", got, got == 1 ? "was" : "were");
	tc_buf_free(&b);
	return 0;
}

tc_kernel *tc_compile(tc_module *m, const char *entry, const DLTensor *const *inputs,
	int n_inputs, const tc_options *options)
{
	tc_kernel *k = NULL;
	const tc_ir_func *f;
	tc_tensor *in = NULL;
	tc_diags d;
	int i;

	if (!m)
		return NULL;
	clear_error(m->ctx);
	if ((i = find_def(m, entry)) < 0 || !(f = get_func(m, i)))
		return NULL;
	if (!count_ok(m->ctx, f, "input", n_inputs, f->ninputs, 0))
		return NULL;
	k = tc_calloc(1, sizeof(*k));
	in = tc_calloc((size_t)f->ninputs + 1, sizeof(tc_tensor));
	if (!k || !in)
		goto oom;
	k->shapes = tc_calloc((size_t)(f->ninputs + f->noutputs) + 1, sizeof(tc_tensor));
	k->params = tc_calloc((size_t)f->nparams + 1, sizeof(int64_t));
	k->options = options ? tc_options_copy(options) : tc_options_new();
	if (!k->shapes || !k->params || !k->options)
		goto oom;
	if (convert_tensors(m->ctx, f, "input", 0, inputs, n_inputs, 0, in) < 0)
		goto error;
	tc_diags_init(&d, m->src);
	if (tc_ir_bind(f, in, n_inputs, k->params, &d) < 0) {
		set_error_diags(m->ctx, &d);
		tc_diags_clear(&d);
		goto error;
	}
	for (i = 0; i < f->ninputs + f->noutputs; i++) {
		tc_tensor *t = &k->shapes[i];
		t->dtype = f->tensors[i].dtype;
		t->ndim = f->tensors[i].ndim;
		if (i < f->ninputs)
			memcpy(t->shape, in[i].shape, sizeof(t->shape));
		else if (tc_ir_shape(f, i, k->params, t->shape, &d) < 0) {
			set_error_diags(m->ctx, &d);
			tc_diags_clear(&d);
			goto error;
		}
	}
	tc_diags_clear(&d);
	k->m = m;
	k->f = f;
	m->refs++;
	tc_free(in);
	return k;
oom:
	tc_rt_set_error(m->ctx, "out of memory");
error:
	tc_free(in);
	if (k) {
		tc_free(k->shapes);
		tc_free(k->params);
		tc_options_free(k->options);
		tc_free(k);
	}
	return NULL;
}

int tc_kernel_num_outputs(const tc_kernel *k)
{
	return k ? k->f->noutputs : -1;
}

int tc_kernel_output_shape(const tc_kernel *k, int i, DLDataType *dtype, int *ndim,
	int64_t *shape)
{
	const tc_tensor *t;
	if (!k || i < 0 || i >= k->f->noutputs)
		return -1;
	t = &k->shapes[k->f->ninputs + i];
	if (dtype)
		*dtype = tc_rt_dl_dtype(t->dtype);
	if (ndim)
		*ndim = t->ndim;
	if (shape)
		memcpy(shape, t->shape, (size_t)t->ndim * sizeof(int64_t));
	return 0;
}

/* A tensor passed to run must have the compiled dtype and shape. */
static int same_shape(tc_context *ctx, const char *side, const char *name, const tc_tensor *want,
	const tc_tensor *got)
{
	tc_buf b;
	int i, same = want->dtype == got->dtype && want->ndim == got->ndim;
	for (i = 0; same && i < want->ndim; i++)
		same = want->shape[i] == got->shape[i];
	if (same)
		return 1;
	tc_buf_init(&b);
	tc_rt_describe(got, &b);
	tc_buf_puts(&b, " but the kernel was compiled for ");
	tc_rt_describe(want, &b);
	tc_rt_set_error(ctx, "%s '%s' is %s; compile the kernel again for other shapes", side, name,
		b.s ? b.s : "?");
	tc_buf_free(&b);
	return 0;
}

int tc_kernel_run(tc_kernel *k, const DLTensor *const *inputs, int n_inputs,
	DLTensor *const *outputs, int n_outputs)
{
	const tc_ir_func *f;
	tc_context *ctx;
	tc_tensor *t = NULL;
	tc_diags d;
	int i, st = -1;

	if (!k)
		return -1;
	f = k->f;
	ctx = k->m->ctx;
	clear_error(ctx);
	if (!count_ok(ctx, f, "input", n_inputs, f->ninputs, 0) ||
		!count_ok(ctx, f, "output", n_outputs, f->noutputs, f->ninputs))
		return -1;
	t = tc_calloc((size_t)(f->ninputs + f->noutputs) + 1, sizeof(tc_tensor));
	if (!t) {
		tc_rt_set_error(ctx, "out of memory");
		return -1;
	}
	if (convert_tensors(ctx, f, "input", 0, inputs, n_inputs, 1, t) < 0 ||
		convert_tensors(ctx, f, "output", f->ninputs, (const DLTensor *const *)outputs,
			n_outputs, 1, t + f->ninputs) < 0)
		goto done;
	for (i = 0; i < f->ninputs + f->noutputs; i++)
		if (!same_shape(ctx, i < f->ninputs ? "input" : "output", f->tensors[i].name,
			    &k->shapes[i], &t[i]))
			goto done;
	tc_diags_init(&d, k->m->src);
	if (tc_interp_run(f, k->params, t, t + f->ninputs, &d) < 0)
		set_error_diags(ctx, &d);
	else
		st = 0;
	tc_diags_clear(&d);
done:
	tc_free(t);
	return st;
}

void tc_kernel_free(tc_kernel *k)
{
	if (!k)
		return;
	tc_free(k->shapes);
	tc_free(k->params);
	tc_options_free(k->options);
	tc_module_free(k->m);
	tc_free(k);
}
