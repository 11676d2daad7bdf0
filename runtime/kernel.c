/* Kernels: a def compiled for input shapes and options, run on DLPack
 * tensors (tc_compile, tc_kernel_*).
 *
 * tc_compile memoises per module: the same (entry, input dtypes and shapes,
 * options) returns a new handle on the same compiled object.  CPU kernels
 * go IR -> isl model -> schedule -> AST -> LLVM -> JIT (one JIT per
 * context); the workspace for temporaries comes from a per-kernel pool, so
 * repeated runs reuse memory whose pages are already mapped.
 *
 * Thread safety: tc_kernel_run may be called from several threads at once
 * on the same kernel (the generated code is reentrant; each run takes its
 * own workspace).  Compiling and freeing take the context's lock. */
#include "internal.h"

#include "../ir/interp.h"
#include "../polyhedral/passes.h"
#include "options.h"
#include "pool.h"
#include "tensor.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WS_ALIGN 64

void tc_rt_compiled_free(tc_rt_compiled *c)
{
	int i;
	if (!c)
		return;
	tc_cg_code_free(c->code);
	for (i = 0; i < c->ws_free.n; i++)
		tc_free(c->ws_free.v[i]);
	tc_vec_free(&c->ws_free);
	tc_free(c->ws_off);
	tc_free(c->shapes);
	tc_free(c->params);
	tc_free(c->key);
	tc_free(c->options);
	tc_arena_free(c->ar);
	tc_free(c);
}

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

/* "entry|float32[4x5],int32[7]|target=cpu": what a compiled object is for. */
static char *memo_key(const char *entry, const tc_tensor *in, int n, const char *opts)
{
	tc_buf b;
	int i;
	tc_buf_init(&b);
	tc_buf_printf(&b, "%s|", entry);
	for (i = 0; i < n; i++) {
		if (i)
			tc_buf_putc(&b, ',');
		tc_rt_describe(&in[i], &b);
	}
	tc_buf_printf(&b, "|%s", opts);
	return tc_buf_take(&b);
}

/* Compile f for the bound sizes in c (CPU target). */
/* ---- object code for the kernel cache ---- */

/* The def of compiled function f in m. */
static const tc_def *def_of(tc_module *m, const tc_ir_func *f)
{
	int i;
	for (i = 0; i < m->prog->ndefs; i++)
		if (!strcmp(m->prog->defs[i]->name, f->name))
			return m->prog->defs[i];
	return NULL;
}

/* Hash of the source text of def (an object's check sites point into it). */
static uint64_t def_text_hash(tc_module *m, const tc_def *def)
{
	return tc_hash_bytes(TC_HASH_INIT, m->src->text + def->loc.off, (size_t)def->loc.len);
}

/* Make the locations of sites relative to def's start (dir -1), or
 * absolute again (dir +1), so that an object stays usable when the same
 * def text sits elsewhere in another file. */
static void relocate_sites(tc_cg_site *s, int n, const tc_def *def, int dir)
{
	int i;
	for (i = 0; i < n; i++) {
		tc_loc *l = &s[i].loc;
		if (dir < 0) {
			if (l->line == def->loc.line)
				l->col -= def->loc.col;
			l->line -= def->loc.line;
			l->off -= def->loc.off;
		} else {
			if (l->line == 0)
				l->col += def->loc.col;
			l->line += def->loc.line;
			l->off += def->loc.off;
		}
	}
}

void tc_rt_object_clear(__tc_keep tc_rt_object *o)
{
	if (!o)
		return;
	tc_free(o->code);
	tc_free(o->symbol);
	tc_free(o->sites);
	memset(o, 0, sizeof(*o));
}

/* Load the stored object o for c, when it was made from the same def text;
 * NULL (the caller compiles) otherwise or when it does not load. */
static tc_cg_code *load_object(tc_module *m, tc_rt_compiled *c, const tc_rt_object *o)
{
	const tc_def *def = def_of(m, c->f);
	tc_cg_site *sites = NULL;
	tc_cg_code *code;
	tc_diags d;
	if (!def || def_text_hash(m, def) != o->def_hash)
		return NULL;
	if (o->nsites && !(sites = tc_calloc((size_t)o->nsites, sizeof(*sites))))
		return NULL;
	if (o->nsites)
		memcpy(sites, o->sites, (size_t)o->nsites * sizeof(*sites));
	relocate_sites(sites, o->nsites, def, +1);
	tc_diags_init(&d, m->src);
	code = tc_cg_llvm_load(m->ctx->jit, o->code, o->size, o->symbol, sites, o->nsites, &d);
	tc_diags_clear(&d); /* a failure only means compiling it */
	return code;
}

/* Compile f for the bound sizes in c (CPU target): from the stored object
 * obj_in when there is one that loads, else through isl and LLVM into the
 * JIT, or (obj_out) to object code for the kernel cache. */
static int compile_cpu(tc_module *m, tc_rt_compiled *c, tc_diags *d, const tc_rt_object *obj_in,
	tc_rt_object *obj_out)
{
	isl_ctx *ictx = NULL;
	tc_poly *p = NULL;
	int st = -1;

	if (!obj_out && !m->ctx->jit && !(m->ctx->jit = tc_cg_jit_new(d)))
		return -1;
	if (obj_in && obj_in->code && (c->code = load_object(m, c, obj_in))) {
		c->from_object = 1;
		return 0;
	}
	if (!(ictx = tc_poly_ctx_new())) {
		tc_rt_set_error(m->ctx, "out of memory");
		return -1;
	}
	p = tc_poly_build(ictx, c->cf, c->params, d);
	if (p)
		p->opts = c->popts;
	if (!p || tc_poly_schedule_cpu(p, d) < 0 ||
		tc_poly_ast(p, d) < 0)
		goto done;
	if (obj_out) {
		const tc_def *def = def_of(m, c->f);
		obj_out->code = tc_cg_llvm_object(p, obj_out->symbol, &obj_out->size,
			&obj_out->sites, &obj_out->nsites, d);
		if (!obj_out->code || !def)
			goto done;
		relocate_sites(obj_out->sites, obj_out->nsites, def, -1);
		obj_out->def_hash = def_text_hash(m, def);
		st = 0;
		goto done;
	}
	c->code = tc_cg_llvm_compile(m->ctx->jit, p, d);
	st = c->code ? 0 : -1;
done:
	tc_poly_free(p);
	isl_ctx_free(ictx);
	return st;
}

/* The bytes of tensor t's elements, or SIZE_MAX if that overflows. */
static size_t tensor_bytes(const tc_tensor *t)
{
	size_t n = (size_t)tc_dtype_size(t->dtype);
	int k;
	for (k = 0; k < t->ndim; k++)
		if (__builtin_mul_overflow(n, (size_t)t->shape[k], &n))
			return SIZE_MAX;
	return n;
}

/* The workspace layout: each temporary at a 64-byte aligned offset, those
 * that may be row buffers (tc_ir_tensor.rowbuf) last.  When the schedule
 * keeps such a temporary in a row buffer on the stack (polyhedral/
 * contract.c) its region is never touched; when it does not, the kernel
 * uses the region.  Which of the two happens is known only to the code
 * (also code loaded from the kernel cache), so the region is there either
 * way, but new workspaces have only the pages before it touched
 * (ws_touch): an unused region costs address space, not memory or page
 * faults. */
static int layout_workspace(tc_rt_compiled *c)
{
	const tc_ir_func *f = c->cf;
	int t, pass;
	c->ws_off = tc_calloc((size_t)f->ntensors + 1, sizeof(size_t));
	if (!c->ws_off)
		return -1;
	for (pass = 0; pass < 2; pass++) {
		for (t = f->ninputs + f->noutputs; t < f->ntensors; t++) {
			size_t n = tensor_bytes(&c->shapes[t]);
			if (f->tensors[t].rowbuf != pass)
				continue;
			if (n == SIZE_MAX)
				return -1;
			c->ws_off[t] = c->ws_bytes;
			n = (n + WS_ALIGN - 1) / WS_ALIGN * WS_ALIGN;
			if (__builtin_add_overflow(c->ws_bytes, n, &c->ws_bytes))
				return -1;
		}
		if (!pass)
			c->ws_touch = c->ws_bytes;
	}
	return 0;
}

/* A new compiled object for entry at these input shapes, or NULL. */
static tc_rt_compiled *compile(tc_module *m, const tc_ir_func *f, const tc_tensor *in,
	int n_inputs, const tc_options *options, char *key, const tc_rt_object *obj_in,
	tc_rt_object *obj_out)
{
	tc_rt_compiled *c = tc_calloc(1, sizeof(*c));
	tc_diags d;
	int i;

	tc_diags_init(&d, m->src);
	if (!c)
		goto oom;
	c->key = key;
	key = NULL;
	c->f = f;
	if (!(c->options = tc_options_print(options)))
		goto oom;
	c->target = !strcmp(tc_options_get(options, "target"), "interp") ? TC_RT_INTERP : TC_RT_CPU;
	tc_rt_poly_opts(options, &c->popts);
	c->threads = atoi(tc_options_get(options, "threads")); /* "auto" gives 0 */
	/* for the tile sizes: the count the kernel will most likely run with */
	c->popts.threads = c->threads ? c->threads : __atomic_load_n(&m->ctx->threads, __ATOMIC_RELAXED);
	c->params = tc_calloc((size_t)f->nparams + 1, sizeof(int64_t));
	c->shapes = tc_calloc((size_t)f->ntensors + 1, sizeof(tc_tensor));
	if (!c->params || !c->shapes)
		goto oom;
	if (tc_ir_bind(f, in, n_inputs, c->params, &d) < 0)
		goto error;
	c->cf = f;
	/* the CPU's rewrites of the IR, in c->ar; made also for the interpreter
	 * target, whose kernels emit the CPU's stages */
	if (!(c->ar = tc_arena_new()) ||
		(strcmp(tc_options_get(options, "share"), "off") &&
			!(c->cf = f = tc_ir_share(c->ar, f, c->params,
				  /* row buffers need the rows' loops fused */
				  !strcmp(tc_options_get(options, "share"), "row") &&
						  c->popts.fusion == TC_POLY_FUSE_MAX
					  ? TC_POLY_ROWBUF_MAX
					  : 0))) ||
		(!strcmp(tc_options_get(options, "inline"), "on") &&
			!(c->cf = f = tc_ir_inline(c->ar, f, c->params))) ||
		(!strcmp(tc_options_get(options, "pack"), "on") && /* rows of an AVX-512 register */
			!(c->cf = f = tc_ir_pack(c->ar, f, c->params, 64))))
		goto oom;
	if (c->cf != c->f) {
		tc_free(c->shapes);
		if (!(c->shapes = tc_calloc((size_t)f->ntensors + 1, sizeof(tc_tensor))))
			goto oom;
	}
	for (i = 0; i < f->ntensors; i++) {
		tc_tensor *t = &c->shapes[i];
		t->dtype = f->tensors[i].dtype;
		t->ndim = f->tensors[i].ndim;
		if (i < f->ninputs)
			memcpy(t->shape, in[i].shape, sizeof(t->shape));
		else if (tc_ir_shape(f, i, c->params, t->shape, &d) < 0)
			goto error;
	}
	if (layout_workspace(c) < 0) {
		tc_rt_set_error(m->ctx, "the temporaries of '%s' are too large for memory", f->name);
		goto fail;
	}
	if (c->target == TC_RT_CPU && compile_cpu(m, c, &d, obj_in, obj_out) < 0)
		goto error;
	tc_diags_clear(&d);
	return c;
oom:
	tc_free(key);
	tc_rt_set_error(m->ctx, "out of memory");
	goto fail;
error:
	tc_rt_set_error_diags(m->ctx, &d);
fail:
	tc_diags_clear(&d);
	tc_rt_compiled_free(c);
	return NULL;
}

/* The function of entry with the input tensors checked and converted into
 * *in (a new array, owned by the caller, also on failure), for tc_compile
 * and tc_rt_compile_object; NULL with an error in the context.  Called
 * with the context's lock held. */
static const tc_ir_func *bind_inputs(tc_module *m, const char *entry,
	const DLTensor *const *inputs, int n_inputs, tc_tensor **in)
{
	const tc_ir_func *f;
	int def;
	*in = NULL;
	if ((def = tc_rt_find_def(m, entry)) < 0 || !(f = tc_rt_module_func(m, def)) ||
		!count_ok(m->ctx, f, "input", n_inputs, f->ninputs, 0))
		return NULL;
	if (!(*in = tc_calloc((size_t)f->ninputs + 1, sizeof(tc_tensor)))) {
		tc_rt_set_error(m->ctx, "out of memory");
		return NULL;
	}
	return convert_tensors(m->ctx, f, "input", 0, inputs, n_inputs, 0, *in) < 0 ? NULL : f;
}

tc_kernel *tc_compile(tc_module *m, const char *entry, const DLTensor *const *inputs,
	int n_inputs, const tc_options *options)
{
	const tc_ir_func *f;
	tc_rt_compiled *c = NULL;
	tc_kernel *k = NULL;
	tc_tensor *in = NULL;
	tc_options *cached = NULL;
	tc_rt_object obj;
	char *opts = NULL, *key = NULL;
	int i;

	memset(&obj, 0, sizeof(obj));

	if (!m)
		return NULL;
	tc_rt_clear_error(m->ctx);
	pthread_mutex_lock(&m->ctx->lock);
	if (!(f = bind_inputs(m, entry, inputs, n_inputs, &in)))
		goto done;
	if (!(k = tc_calloc(1, sizeof(*k)))) {
		tc_rt_set_error(m->ctx, "out of memory");
		goto done;
	}
	k->source = TC_RT_SRC_USER;
	if (!options) { /* the kernel cache's, or the defaults */
		char *shapes = memo_key(entry, in, n_inputs, "");
		if (!shapes) {
			tc_rt_set_error(m->ctx, "out of memory");
			goto done;
		}
		options = cached = tc_rt_cache_options(m, entry, inputs, n_inputs, shapes,
			&k->source, &obj);
		tc_free(shapes);
	}
	opts = tc_rt_options_key(options);
	key = opts ? memo_key(entry, in, n_inputs, opts) : NULL;
	if (!key) {
		tc_rt_set_error(m->ctx, "out of memory");
		goto done;
	}
	for (i = 0; i < m->compiled.n && !c; i++)
		if (!strcmp(((tc_rt_compiled *)m->compiled.v[i])->key, key))
			c = m->compiled.v[i];
	if (!c) {
		c = compile(m, f, in, n_inputs, options, key, obj.code ? &obj : NULL, NULL);
		key = NULL; /* compile took it */
		if (c && tc_vec_push(&m->compiled, c) < 0) {
			tc_rt_compiled_free(c);
			c = NULL;
			tc_rt_set_error(m->ctx, "out of memory");
		}
	}
	if (c) {
		k->m = m;
		k->c = c;
		m->refs++;
	}
done:
	pthread_mutex_unlock(&m->ctx->lock);
	tc_free(key);
	tc_free(opts);
	tc_free(in);
	tc_options_free(cached);
	tc_rt_object_clear(&obj);
	if (k && !k->c) {
		tc_free(k);
		k = NULL;
	}
	return k;
}

int tc_kernel_num_outputs(const tc_kernel *k)
{
	return k ? k->c->f->noutputs : -1;
}

int tc_kernel_output_shape(const tc_kernel *k, int i, DLDataType *dtype, int *ndim,
	int64_t *shape)
{
	const tc_tensor *t;
	if (!k || i < 0 || i >= k->c->f->noutputs)
		return -1;
	t = &k->c->shapes[k->c->f->ninputs + i];
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

/* A workspace for one run: from the pool, or new with its pages touched. */
static void *take_workspace(tc_context *ctx, tc_rt_compiled *c)
{
	void *ws = NULL;
	if (!c->ws_bytes)
		return NULL;
	pthread_mutex_lock(&ctx->lock);
	if (c->ws_free.n)
		ws = c->ws_free.v[--c->ws_free.n];
	pthread_mutex_unlock(&ctx->lock);
	if (!ws && (ws = tc_malloc(c->ws_bytes + WS_ALIGN)))
		memset(ws, 0, c->ws_touch + WS_ALIGN); /* see layout_workspace */
	return ws;
}

static void give_workspace(tc_context *ctx, tc_rt_compiled *c, void *ws)
{
	if (!ws)
		return;
	pthread_mutex_lock(&ctx->lock);
	if (tc_vec_push(&c->ws_free, ws) < 0)
		tc_free(ws);
	pthread_mutex_unlock(&ctx->lock);
}

/* Report the failed run-time check err (see codegen/llvm.h) with the
 * interpreter's message and the culprit's location. */
static void report_check(tc_module *m, tc_rt_compiled *c, const int64_t *err)
{
	const tc_cg_site *site = tc_cg_code_site(c->code, err[0] - 1);
	tc_diags d;
	tc_diags_init(&d, m->src);
	if (!site)
		tc_error(&d, (tc_loc){0, 0, 0, 0}, "internal error: unknown run-time check %lld",
			(long long)err[0]);
	else if (site->kind == TC_CG_CHECK_DIV)
		tc_error(&d, site->loc, "division by zero in '%c'", site->op);
	else
		tc_error(&d, site->loc,
			"index %lld is out of bounds for dimension %d of '%s' (extent %lld)",
			(long long)err[1], site->dim, c->cf->tensors[site->tensor].name,
			(long long)c->shapes[site->tensor].shape[site->dim]);
	tc_rt_set_error_diags(m->ctx, &d);
	tc_diags_clear(&d);
}

/* The bytes tensor t covers: [*lo, *hi), empty when it has no elements. */
static void extent_of(const tc_tensor *t, uintptr_t *lo, uintptr_t *hi)
{
	size_t n = tensor_bytes(t);
	*lo = (uintptr_t)t->data;
	*hi = n > UINTPTR_MAX - *lo ? UINTPTR_MAX : *lo + n;
}

/* Generated code assumes that no output shares memory with another tensor
 * (it keeps partial results in registers and reorders accesses), so an
 * output overlapping an input or another output is refused.  Each pair is
 * looked at once: output i against every tensor before it. */
static int separate(tc_context *ctx, const tc_ir_func *f, const tc_tensor *t)
{
	int i, j, n = f->ninputs + f->noutputs;
	for (i = f->ninputs; i < n; i++)
		for (j = 0; j < i; j++) {
			uintptr_t a0, a1, b0, b1;
			extent_of(&t[i], &a0, &a1);
			extent_of(&t[j], &b0, &b1);
			if (a0 < a1 && b0 < b1 && a0 < b1 && b0 < a1) {
				tc_rt_set_error(ctx,
					"output '%s' shares memory with %s '%s'; every output needs "
					"its own buffer",
					f->tensors[i].name, j < f->ninputs ? "input" : "output",
					f->tensors[j].name);
				return 0;
			}
		}
	return 1;
}

static int run_cpu(tc_module *m, tc_rt_compiled *c, const tc_tensor *t)
{
	tc_context *ctx = m->ctx;
	const tc_ir_func *f = c->cf;
	void **ptrs = tc_calloc((size_t)f->ntensors + 3, sizeof(void *));
	void (*pf)(tc_rt_loop_body, void *const *, int64_t, int64_t, int64_t) = tc_rt_parallel_for;
	int64_t err[2] = {0, 0};
	void *ws = NULL;
	char *base;
	int i;
	if (!ptrs || (c->ws_bytes && !(ws = take_workspace(ctx, c)))) {
		tc_free(ptrs);
		tc_rt_set_error(ctx, "out of memory for the workspace of '%s' (%zu bytes)", f->name,
			c->ws_bytes);
		return -1;
	}
	base = ws ? (char *)(((uintptr_t)ws + WS_ALIGN - 1) / WS_ALIGN * WS_ALIGN) : NULL;
	for (i = 0; i < f->ninputs + f->noutputs; i++)
		ptrs[i] = t[i].data;
	for (; i < f->ntensors; i++)
		ptrs[i] = base + c->ws_off[i];
	ptrs[f->ntensors] = err;
	memcpy(&ptrs[f->ntensors + 1], &pf, sizeof(pf)); /* the pool, for parallel loops */
	tc_rt_pool_set_threads(c->threads ? c->threads : __atomic_load_n(&ctx->threads, __ATOMIC_RELAXED));
	tc_cg_code_fn(c->code)(ptrs);
	give_workspace(ctx, c, ws);
	tc_free(ptrs);
	if (err[0]) {
		report_check(m, c, err);
		return -1;
	}
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
	f = k->c->f;
	ctx = k->m->ctx;
	tc_rt_clear_error(ctx);
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
			    &k->c->shapes[i], &t[i]))
			goto done;
	if (!separate(ctx, f, t))
		goto done;
	if (k->c->target == TC_RT_CPU) {
		st = run_cpu(k->m, k->c, t);
		goto done;
	}
	tc_diags_init(&d, k->m->src);
	if (tc_interp_run(f, k->c->params, t, t + f->ninputs, &d) < 0)
		tc_rt_set_error_diags(ctx, &d);
	else
		st = 0;
	tc_diags_clear(&d);
done:
	tc_free(t);
	return st;
}

char *tc_kernel_emit(tc_kernel *k, const char *stage)
{
	if (!k)
		return NULL;
	tc_rt_clear_error(k->m->ctx);
	if (stage && (!strcmp(stage, "schedule") || !strcmp(stage, "ast") || !strcmp(stage, "c") ||
			     !strcmp(stage, "llvm") || !strcmp(stage, "asm")))
		return tc_rt_emit_poly(k->m, k->c->cf, k->c->params, &k->c->popts, stage);
	if (stage && !strcmp(stage, "ir") && k->c->cf != k->c->f) { /* inlined or packed */
		tc_buf b;
		tc_buf_init(&b);
		tc_ir_print(k->c->cf, &b);
		if (b.oom)
			tc_rt_set_error(k->m->ctx, "out of memory");
		return tc_buf_take(&b);
	}
	return tc_module_emit(k->m, k->c->f->name, stage);
}

void tc_kernel_free(tc_kernel *k)
{
	if (!k)
		return;
	tc_module_free(k->m);
	tc_free(k);
}

/* Compile entry for inputs with options to object code (see internal.h). */
int tc_rt_compile_object(__tc_keep tc_module *m, const char *entry, const DLTensor *const *inputs,
	int n_inputs, __tc_keep const tc_options *options, __tc_keep tc_rt_object *o)
{
	const tc_ir_func *f;
	tc_rt_compiled *c = NULL;
	tc_tensor *in = NULL;
	char *key = NULL;
	int st = -1;

	if (!m || !o || !o->symbol)
		return -1;
	tc_rt_clear_error(m->ctx);
	pthread_mutex_lock(&m->ctx->lock);
	if (!(f = bind_inputs(m, entry, inputs, n_inputs, &in)))
		goto done;
	if (!(key = tc_strdup("object"))) {
		tc_rt_set_error(m->ctx, "out of memory");
		goto done;
	}
	c = compile(m, f, in, n_inputs, options, key, NULL, o);
	key = NULL; /* compile took it */
	if (c && !o->code)
		tc_rt_set_error(m->ctx, "options target=%s make no object code",
			tc_options_get(options, "target"));
	st = c && o->code ? 0 : -1;
done:
	pthread_mutex_unlock(&m->ctx->lock);
	tc_rt_compiled_free(c);
	tc_free(key);
	tc_free(in);
	return st;
}
