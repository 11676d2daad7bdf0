/* The public C API (include/tcomp.h): contexts, modules, options, kernels.
 *
 * A module owns the source text, the arena of its AST and IR, and the IR of
 * each def (lowered on first use).  Kernels hold a reference to their module,
 * so a module freed while kernels live stays alive until the last kernel is
 * freed. */
#include "tcomp.h"

#include "../ir/interp.h"
#include "../lang/ast.h"
#include "internal.h"

#include "../codegen/c.h"
#include "../polyhedral/passes.h"
#include "options.h"
#include "tensor.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>


/* Errors are kept per thread and per context: each thread has a list of
 * (context, message) for the contexts whose last call on that thread failed.
 * A context is identified by its address and a serial number, so a new
 * context at the address of a freed one does not see the old messages. */
typedef struct error_entry {
	const tc_context *ctx;
	uint64_t serial;
	char *msg;
	struct error_entry *next;
} error_entry;

static pthread_key_t error_key;
static pthread_once_t error_once = PTHREAD_ONCE_INIT;
static int error_key_ok;
static uint64_t context_serial;
static pthread_mutex_t serial_lock = PTHREAD_MUTEX_INITIALIZER;

static void error_list_free(void *p)
{
	error_entry *e = p, *next;
	for (; e; e = next) {
		next = e->next;
		tc_free(e->msg);
		tc_free(e);
	}
}

static void error_key_init(void)
{
	error_key_ok = pthread_key_create(&error_key, error_list_free) == 0;
}

/* The calling thread's entry for ctx (NULL if it has none). */
static error_entry *thread_err(const tc_context *ctx)
{
	error_entry *e;
	pthread_once(&error_once, error_key_init);
	if (!error_key_ok)
		return NULL;
	for (e = pthread_getspecific(error_key); e; e = e->next)
		if (e->ctx == ctx && e->serial == ctx->serial)
			return e;
	return NULL;
}

/* Drop the calling thread's entry for ctx, if any. */
static void thread_err_drop(const tc_context *ctx)
{
	error_entry **pe, *e;
	pthread_once(&error_once, error_key_init);
	if (!error_key_ok)
		return;
	e = pthread_getspecific(error_key);
	for (pe = &e; *pe; pe = &(*pe)->next)
		if ((*pe)->ctx == ctx && (*pe)->serial == ctx->serial) {
			error_entry *dead = *pe;
			*pe = dead->next;
			tc_free(dead->msg);
			tc_free(dead);
			break;
		}
	pthread_setspecific(error_key, e);
}

/* ---- errors ---- */

/* Make msg (owned) the calling thread's error for ctx; NULL clears it. */
static void set_error_str(tc_context *ctx, char *msg)
{
	error_entry *e;
	if (!msg) {
		thread_err_drop(ctx);
		return;
	}
	e = thread_err(ctx);
	if (!e && error_key_ok && (e = tc_calloc(1, sizeof(*e)))) {
		e->ctx = ctx;
		e->serial = ctx->serial;
		e->next = pthread_getspecific(error_key);
		if (pthread_setspecific(error_key, e) != 0) {
			tc_free(e);
			e = NULL;
		}
	}
	if (!e) { /* out of memory: the message is lost */
		tc_free(msg);
		return;
	}
	tc_free(e->msg);
	e->msg = msg;
}

void tc_rt_clear_error(tc_context *ctx)
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
void tc_rt_set_error_diags(tc_context *ctx, const tc_diags *d)
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
	tc_context *ctx = tc_calloc(1, sizeof(tc_context));
	pthread_mutexattr_t attr;
	if (!ctx)
		return NULL;
	/* recursive: tc_compile holds it while lowering, which takes it too */
	if (pthread_mutexattr_init(&attr) != 0 ||
		pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE) != 0 ||
		pthread_mutex_init(&ctx->lock, &attr) != 0) {
		tc_free(ctx);
		return NULL;
	}
	pthread_mutexattr_destroy(&attr);
	pthread_mutex_lock(&serial_lock);
	ctx->serial = ++context_serial;
	pthread_mutex_unlock(&serial_lock);
	return ctx;
}

void tc_context_free(tc_context *ctx)
{
	if (!ctx)
		return;
	thread_err_drop(ctx); /* the calling thread's message about ctx */
	tc_cg_jit_free(ctx->jit);
	pthread_mutex_destroy(&ctx->lock);
	tc_free(ctx->cache_path);
	tc_free(ctx->warnings);
	tc_free(ctx);
}

const char *tc_context_error(const tc_context *ctx)
{
	const error_entry *e;
	if (!ctx)
		return "error: no context (NULL)\n";
	e = thread_err(ctx);
	return e && e->msg ? e->msg : "";
}

const char *tc_context_warnings(const tc_context *ctx)
{
	return ctx && ctx->warnings ? ctx->warnings : "";
}

int tc_context_set_threads(tc_context *ctx, int threads)
{
	if (!ctx)
		return -1;
	if (threads < 0 || threads > 256) {
		tc_rt_set_error(ctx, "thread count %d is out of range (0 for one per online CPU, or 1 to 256)",
			threads);
		return -1;
	}
	tc_rt_clear_error(ctx);
	__atomic_store_n(&ctx->threads, threads, __ATOMIC_RELAXED);
	return 0;
}

int tc_context_threads(const tc_context *ctx)
{
	return ctx ? __atomic_load_n(&ctx->threads, __ATOMIC_RELAXED) : -1;
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
	tc_rt_cache_lookups_free(m);
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

/* The number of the def called entry, or -1 with an error listing the defs. */
int tc_rt_find_def(tc_module *m, const char *entry)
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

/* The IR of def i, lowered on first use (NULL with an error). */
const tc_ir_func *tc_rt_module_func(tc_module *m, int i)
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

int tc_module_def_arity(tc_module *m, const char *entry, int *n_inputs, int *n_outputs)
{
	int i;
	if (!m)
		return -1;
	tc_rt_clear_error(m->ctx);
	if ((i = tc_rt_find_def(m, entry)) < 0)
		return -1;
	if (n_inputs)
		*n_inputs = m->prog->defs[i]->ninputs;
	if (n_outputs)
		*n_outputs = m->prog->defs[i]->noutputs;
	return 0;
}

int tc_module_input_type(tc_module *m, const char *entry, int t, DLDataType *dtype, int *ndim)
{
	int i;
	const tc_def *def;
	if (!m)
		return -1;
	tc_rt_clear_error(m->ctx);
	if ((i = tc_rt_find_def(m, entry)) < 0)
		return -1;
	def = m->prog->defs[i];
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
	int i;
	const tc_def *def;
	if (!m)
		return NULL;
	tc_rt_clear_error(m->ctx);
	if ((i = tc_rt_find_def(m, entry)) < 0)
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
	tc_rt_clear_error(m->ctx);
	if ((i = tc_rt_find_def(m, entry)) < 0)
		return NULL;
	tc_buf_init(&b);
	tc_def_signature(m->prog->defs[i], &b);
	return tc_buf_take(&b);
}

/* A stage of the polyhedral pipeline of def i ("schedule", "ast", "c",
 * "llvm", "asm"), parametric (params NULL) or for concrete sizes; NULL with
 * an error. */
char *tc_rt_emit_poly(tc_module *m, const tc_ir_func *f, const int64_t *params,
	const tc_poly_opts *popts, const char *stage)
{
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
	if (p && popts)
		p->opts = *popts;
	if (p && tc_poly_schedule_cpu(p, &d) == 0) {
		if (!strcmp(stage, "schedule"))
			text = tc_poly_schedule_str(p);
		else if (tc_poly_ast(p, &d) == 0)
			text = !strcmp(stage, "ast") ? tc_poly_ast_str(p)
				: !strcmp(stage, "c") ? tc_cg_c_text(p, &d)
				: tc_cg_llvm_text(p, !strcmp(stage, "llvm") ? TC_CG_TEXT_LLVM
									   : TC_CG_TEXT_ASM, &d);
	}
	if (!text && !d.nerrors)
		tc_rt_set_error(m->ctx, "out of memory");
	else if (!text)
		tc_rt_set_error_diags(m->ctx, &d);
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
	tc_rt_clear_error(m->ctx);
	if ((i = tc_rt_find_def(m, entry)) < 0)
		return NULL;
	tc_buf_init(&b);
	if (stage && !strcmp(stage, "syntax")) {
		tc_ast_print_def(m->prog->defs[i], &b);
	} else if (stage && !strcmp(stage, "ir")) {
		const tc_ir_func *f = tc_rt_module_func(m, i);
		if (!f)
			return NULL;
		tc_ir_print(f, &b);
	} else if (stage && !strcmp(stage, "canonical")) {
		tc_ir_canonical(m->prog->defs[i], &b);
	} else if (stage && (!strcmp(stage, "schedule") || !strcmp(stage, "ast") ||
				   !strcmp(stage, "c"))) {
		return tc_rt_emit_poly(m, tc_rt_module_func(m, i), NULL, NULL, stage);
	} else if (stage && (!strcmp(stage, "llvm") || !strcmp(stage, "asm"))) {
		tc_rt_set_error(m->ctx, "stage '%s' needs input shapes (tcomp emit --shape A=64x32 ...; tc_kernel_emit)",
			stage);
		return NULL;
	} else {
		tc_rt_set_error(m->ctx, "unknown stage '%s' (stages: syntax, ir, canonical, schedule, ast, c, and with shapes llvm, asm)",
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
	tc_rt_clear_error(m->ctx);
	if ((i = tc_rt_find_def(m, entry)) < 0)
		return -1;
	snprintf(out, 17, "%016llx", (unsigned long long)tc_ir_hash(m->prog->defs[i]));
	return 0;
}

