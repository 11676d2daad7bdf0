/* Kernels: a def compiled for input shapes and options, run on DLPack
 * tensors (tc_compile, tc_kernel_*).
 *
 * tc_compile memoises per module: the same (entry, input dtypes and shapes,
 * options) returns a new handle on the same compiled object.  Compiling
 * binds the sizes, decodes the options, picks the backend the target
 * option names (runtime/backend.h) and runs the pipeline
 * (runtime/pipeline.h); running checks the tensors and hands them to the
 * backend.  The workspace for temporaries comes from a per-kernel pool
 * (runtime/compiled.c).
 *
 * Thread safety: tc_kernel_run may be called from several threads at once
 * on the same kernel (the generated code is reentrant; each run takes its
 * own workspace).  Compiling and freeing take the context's lock. */
#include "kernel.h"

#include "cache_api.h"
#include "error.h"
#include "compiled.h"
#include "module.h"
#include "object.h"
#include "options.h"
#include "pipeline.h"
#include "tensor.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Convert the DLTensors of one side of a call, checking them. */
static int convert_tensors(tc_context *ctx, const tc_ir_func *f, const char *side, int first,
	const DLTensor *const *ts, int n, int need_data, tc_tensor *out, tc_rt_layout *layout)
{
	int i;
	char err[512];
	if (n && !ts) {
		tc_rt_set_error(ctx, "%s array is NULL", side);
		return -1;
	}
	for (i = 0; i < n; i++) {
		const char *name = f->tensors[first + i].name;
		if (tc_rt_tensor_from_dl(ts[i], need_data, &out[i], layout ? &layout[i] : NULL, err,
			    sizeof(err)) < 0) {
			tc_rt_set_error(ctx, "%s %d ('%s'): %s", side, i, name, err);
			return -1;
		}
	}
	return 0;
}

/* Whether every tensor of ts (n of them, converted) lives where backend b
 * runs: on its device type, and (with their layouts l) compact unless b
 * runs on the CPU (the copies at the boundary are host memory); 0 with an
 * error in ctx. */
static int on_device(tc_context *ctx, const tc_ir_func *f, const char *side, int first,
	const DLTensor *const *ts, int n, const tc_rt_layout *l, const tc_rt_backend *b)
{
	int i;
	for (i = 0; i < n; i++) {
		const char *name = f->tensors[first + i].name;
		if (ts[i]->device.device_type != b->device) {
			tc_rt_set_error(ctx, "%s %d ('%s') is on device type %d; target=%s runs on %s "
				"tensors (device type %d)", side, i, name, (int)ts[i]->device.device_type,
				b->name, b->device == kDLCUDA ? "kDLCUDA" : "kDLCPU", (int)b->device);
			return 0;
		}
		if (l && b->device != kDLCPU && !l[i].compact) {
			tc_rt_set_error(ctx, "%s %d ('%s') is strided; target=%s takes compact "
				"row-major tensors only (copy it first)", side, i, name, b->name);
			return 0;
		}
	}
	return 1;
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

/* The shapes of every tensor of c->cf at c->params (the inputs' from in)
 * and the workspace layout: 0; -1 with a message in d; 1 with an error
 * already in m's context. */
static int size_up(tc_module *m, tc_rt_compiled *c, const tc_tensor *in, tc_diags *d)
{
	const tc_ir_func *f = c->cf;
	int i;
	tc_free(c->shapes);
	if (!(c->shapes = tc_calloc((size_t)f->ntensors + 1, sizeof(tc_tensor)))) {
		tc_rt_set_error(m->ctx, "out of memory");
		return 1;
	}
	for (i = 0; i < f->ntensors; i++) {
		tc_tensor *t = &c->shapes[i];
		t->dtype = f->tensors[i].dtype;
		t->ndim = f->tensors[i].ndim;
		if (i < f->ninputs)
			memcpy(t->shape, in[i].shape, sizeof(t->shape));
		else if (tc_ir_shape(f, i, c->params, t->shape, d) < 0)
			return -1;
	}
	if (tc_rt_workspace_layout(c) < 0) {
		tc_rt_set_error(m->ctx, "the temporaries of '%s' are too large for memory", f->name);
		return 1;
	}
	return 0;
}

/* A new compiled object for entry at these input shapes, or NULL. */
static tc_rt_compiled *compile(tc_module *m, const tc_ir_func *f, const tc_tensor *in,
	int n_inputs, const tc_options *options, char *key, const tc_rt_object *obj_in,
	tc_rt_object *obj_out, __tc_take int64_t *at)
{
	tc_rt_compiled *c = tc_calloc(1, sizeof(*c));
	tc_diags d;
	int i;

	tc_diags_init(&d, m->src);
	if (!c)
		goto oom;
	c->key = key;
	key = NULL;
	c->at = at; /* parametric code made at these sizes */
	at = NULL;
	c->f = f;
	if (!(c->options = tc_options_print(options)))
		goto oom;
	tc_rt_opts_decode(options, &c->opts);
	c->opts.parametric |= c->at != NULL;
	if (!(c->backend = tc_rt_backend_find(c->opts.backend))) {
		tc_rt_set_error(m->ctx, "internal error: no backend '%s'", c->opts.backend);
		goto fail;
	}
	c->backend->pipeline->describe(&c->target, &c->opts);
	/* for the tile sizes: the count the kernel will most likely run with */
	c->target.threads = c->opts.threads ? c->opts.threads
					    : __atomic_load_n(&m->ctx->threads, __ATOMIC_RELAXED);
	c->params = tc_calloc((size_t)f->nparams + 1, sizeof(int64_t));
	c->shapes = tc_calloc((size_t)f->ntensors + 1, sizeof(tc_tensor));
	if (!c->params || !c->shapes)
		goto oom;
	if (tc_ir_bind(f, in, n_inputs, c->params, &d) < 0)
		goto error;
	/* the rewrites of the backend's pipeline, in c->ar; made also for
	 * backends that run the IR as it is (the interpreter), whose kernels
	 * show the stages of the pipeline they name */
	if (!(c->ar = tc_arena_new()) ||
		!(c->cf = f = tc_rt_pipeline_rewrite(c->ar, f, c->params, &c->opts, &c->target)))
		goto oom;
	if ((i = size_up(m, c, in, &d)) != 0)
		goto fail_or_error;
	if (c->backend->compile && tc_rt_pipeline_compile(m, c, obj_in, obj_out, &d) < 0)
		goto error;
	tc_diags_clear(&d);
	return c;
oom:
	tc_free(key);
	tc_free(at);
	tc_rt_set_error(m->ctx, "out of memory");
	goto fail;
fail_or_error:
	if (i > 0)
		goto fail;
error:
	tc_rt_set_error_diags(m->ctx, &d);
fail:
	tc_diags_clear(&d);
	tc_rt_compiled_free(c);
	return NULL;
}

/* The memo key's options part: what follows its second '|'. */
static const char *key_options(const char *key)
{
	const char *p = strchr(key, '|');
	p = p ? strchr(p + 1, '|') : NULL;
	return p ? p + 1 : "";
}

/* Whether a and b are the same IR, their printed form and the flags the
 * printer leaves out. */
static int same_ir(const tc_ir_func *a, const tc_ir_func *b)
{
	tc_buf x, y;
	int i, same = a->ntensors == b->ntensors && a->nstmts == b->nstmts;
	for (i = 0; same && i < a->ntensors; i++)
		same = a->tensors[i].rowbuf == b->tensors[i].rowbuf &&
			a->tensors[i].widened == b->tensors[i].widened &&
			a->tensors[i].panel == b->tensors[i].panel;
	for (i = 0; same && i < a->nstmts; i++)
		same = a->stmts[i].pack == b->stmts[i].pack;
	if (!same || a == b)
		return same;
	tc_buf_init(&x);
	tc_buf_init(&y);
	tc_ir_print(a, &x);
	tc_ir_print(b, &y);
	same = !x.oom && !y.oom && x.s && y.s && !strcmp(x.s, y.s);
	tc_buf_free(&x);
	tc_buf_free(&y);
	return same;
}

/* Whether compiled object o of f, under the options of memo key key, was
 * compiled for the inputs in (their sizes params, bound) but for its free
 * sizes: the same input types and ranks, the same value of every size but
 * the free ones (tc_ir_free_sizes of o->cf), each free one >= 1.  -1 when
 * out of memory. */
static int same_but_free(const tc_rt_compiled *o, const tc_ir_func *f, const char *key,
	const tc_tensor *in, int n_inputs, const int64_t *params)
{
	unsigned char *free;
	int j, ok = !o->code_of && o->f == f && !strcmp(key_options(o->key), key_options(key));
	for (j = 0; j < n_inputs && ok; j++)
		ok = in[j].dtype == o->shapes[j].dtype && in[j].ndim == o->shapes[j].ndim;
	if (!ok)
		return 0;
	if (!(free = tc_malloc((size_t)f->nparams + 1)))
		return -1;
	tc_ir_free_sizes(o->cf, free);
	for (j = 0; j < f->nparams && ok; j++)
		ok = free[j] ? params[j] >= 1 : params[j] == o->params[j];
	tc_free(free);
	return ok;
}

/* Whether compiled object o, parametric code, serves the inputs in (see
 * same_but_free; under sizes=auto, no free size larger than those its
 * choices were made at) and the IR rewrites at params give o's function
 * (their choices, such as whether a statement covers its whole output,
 * are made at the sizes; the same result means the code's function holds
 * at the new sizes too).  -1 when out of memory. */
static int serves(const tc_rt_compiled *o, const tc_ir_func *f, const char *key,
	const tc_tensor *in, int n_inputs, const int64_t *params)
{
	const tc_ir_func *rf;
	tc_arena *ar;
	int j, ok = o->code && o->opts.parametric ?
		same_but_free(o, f, key, in, n_inputs, params) : 0;
	for (j = 0; ok > 0 && o->opts.sizes_auto && j < f->nparams; j++)
		ok = params[j] <= tc_rt_compiled_at(o)[j];
	if (ok <= 0)
		return ok;
	if (!(ar = tc_arena_new()) ||
		!(rf = tc_rt_pipeline_rewrite(ar, f, params, &o->opts, &o->target))) {
		tc_arena_free(ar);
		return -1;
	}
	ok = same_ir(rf, o->cf);
	tc_arena_free(ar);
	return ok;
}

/* The sum of the sizes of o's choices (tc_rt_compiled_at), to prefer the code made
 * at the sizes nearest the inputs'. */
static int64_t at_sum(const tc_rt_compiled *o)
{
	int64_t sum = 0;
	int j;
	for (j = 0; j < o->f->nparams; j++)
		sum += tc_rt_compiled_at(o)[j];
	return sum;
}

/* Code compiled before for other values of the free sizes of the inputs
 * in (memo key *key, taken when a compiled object is made): under
 * sizes=parametric, and sizes=auto from a def's second shape on.  *out is
 * a new compiled object that runs the code of one that serves the inputs
 * (see serves; the one made at the smallest sizes), else NULL, and then
 * *at the sizes the inputs' own code should make its choices at when it
 * should be parametric (else NULL): under sizes=auto, when code compiled
 * before for other values of the free sizes is there (same_but_free), each
 * free size the largest of the inputs' and that code's, so that the new
 * code serves the shapes seen so far.  0, or -1 with an error in the
 * context. */
static int share_code(tc_module *m, const tc_ir_func *f, const tc_tensor *in, int n_inputs,
	char **key, tc_rt_compiled **out, int64_t **at)
{
	const tc_rt_compiled *o = NULL;
	tc_rt_compiled *c;
	int64_t *params = NULL;
	tc_diags d;
	int i, j, r = 0, any = 0;

	*out = NULL;
	*at = NULL;
	for (i = 0; i < m->compiled.n && !any; i++) {
		const tc_rt_compiled *e = m->compiled.v[i];
		any = e->opts.parametric || e->opts.sizes_auto;
	}
	if (!any)
		return 0;
	tc_diags_init(&d, m->src);
	if (!(params = tc_calloc((size_t)f->nparams + 1, sizeof(int64_t))))
		goto oom;
	if (tc_ir_bind(f, in, n_inputs, params, &d) < 0) /* compiling says why */
		goto done;
	for (i = 0; i < m->compiled.n; i++) {
		const tc_rt_compiled *e = m->compiled.v[i];
		if ((r = serves(e, f, *key, in, n_inputs, params)) < 0)
			goto oom;
		if (r && (!o || at_sum(e) < at_sum(o)))
			o = e;
	}
	for (i = 0; i < m->compiled.n && !o; i++) {
		const tc_rt_compiled *e = m->compiled.v[i];
		if (!e->code || !e->opts.sizes_auto)
			continue;
		if ((r = same_but_free(e, f, *key, in, n_inputs, params)) < 0)
			goto oom;
		if (r && !*at) {
			if (!(*at = tc_malloc(((size_t)f->nparams + 1) * sizeof(int64_t))))
				goto oom;
			memcpy(*at, params, ((size_t)f->nparams + 1) * sizeof(int64_t));
		}
		for (j = 0; r && j < f->nparams; j++)
			if (tc_rt_compiled_at(e)[j] > (*at)[j])
				(*at)[j] = tc_rt_compiled_at(e)[j];
	}
	r = 0;
	if (!o)
		goto done;
	if (!(c = tc_calloc(1, sizeof(*c))))
		goto oom;
	c->key = *key;
	*key = NULL;
	c->f = f;
	c->cf = o->cf;
	c->params = params;
	params = NULL;
	c->backend = o->backend;
	c->opts = o->opts;
	c->target = o->target;
	c->code = o->code;
	c->code_of = o;
	c->from_object = o->from_object;
	if (!(c->options = tc_strdup(o->options))) {
		tc_rt_compiled_free(c);
		goto oom;
	}
	if ((r = size_up(m, c, in, &d)) != 0) {
		if (r < 0)
			tc_rt_set_error_diags(m->ctx, &d);
		tc_rt_compiled_free(c);
		r = -1;
		goto done;
	}
	*out = c;
	goto done;
oom:
	tc_free(*at);
	*at = NULL;
	tc_rt_set_error(m->ctx, "out of memory");
	r = -1;
done:
	tc_free(params);
	tc_diags_clear(&d);
	return r < 0 ? -1 : 0;
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
	return convert_tensors(m->ctx, f, "input", 0, inputs, n_inputs, 0, *in, NULL) < 0 ? NULL : f;
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
	int64_t *at = NULL;
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
	if (!on_device(m->ctx, f, "input", 0, inputs, n_inputs, NULL, tc_rt_backend_of(options)))
		goto done;
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
		/* sizes=parametric: code compiled for other free sizes, else compile */
		if (share_code(m, f, in, n_inputs, &key, &c, &at) < 0)
			goto done;
		if (!c && obj.code) { /* object code from the kernel cache is the code it is */
			tc_free(at);
			at = NULL;
		}
		if (!c)
			c = compile(m, f, in, n_inputs, options, key, obj.code ? &obj : NULL, NULL, at);
		at = NULL; /* taken */
		key = NULL; /* taken */
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

/* The bytes tensor t covers in memory through its strides: [*lo, *hi),
 * empty when it has no elements.  0 when that overflows (the address
 * space cannot hold such a tensor). */
static int extent_of(const tc_tensor *t, const tc_rt_layout *l, uintptr_t *lo, uintptr_t *hi)
{
	int64_t a, b;
	uintptr_t p = (uintptr_t)t->data;
	if (tc_rt_tensor_span(t, l, &a, &b) < 0 || (a < 0 && (uintptr_t)-a > p) ||
		(uintptr_t)b > UINTPTR_MAX - p)
		return 0;
	*lo = p - (uintptr_t)-a;
	*hi = a == b ? *lo : p + (uintptr_t)b;
	return 1;
}

/* Generated code assumes that no output shares memory with another tensor
 * (it keeps partial results in registers and reorders accesses), so an
 * output overlapping an input or another output is refused, as is an
 * output two of whose elements may share memory (a stride of 0, say).  The
 * test is on the bytes each tensor spans, first to last element: views
 * whose elements interleave without sharing any (two column blocks of one
 * matrix) are refused too.  Each pair is looked at once: output i against
 * every tensor before it. */
static int separate(tc_context *ctx, const tc_ir_func *f, const tc_tensor *t,
	const tc_rt_layout *l)
{
	int i, j, d, n = f->ninputs + f->noutputs;
	for (i = 0; i < n; i++) {
		uintptr_t a0, a1;
		if (!extent_of(&t[i], &l[i], &a0, &a1)) {
			tc_rt_set_error(ctx, "%s '%s': its strides reach beyond the address space",
				i < f->ninputs ? "input" : "output", f->tensors[i].name);
			return 0;
		}
	}
	for (i = f->ninputs; i < n; i++) {
		if (tc_rt_tensor_self_overlap(&t[i], &l[i], &d)) {
			tc_rt_set_error(ctx,
				"output '%s' overlaps itself: dimension %d has stride %lld (extent %lld), so "
				"two of its elements may share memory; pass an output whose elements "
				"each have their own memory",
				f->tensors[i].name, d, (long long)l[i].strides[d],
				(long long)t[i].shape[d]);
			return 0;
		}
		for (j = 0; j < i; j++) {
			uintptr_t a0, a1, b0, b1;
			extent_of(&t[i], &l[i], &a0, &a1);
			extent_of(&t[j], &l[j], &b0, &b1);
			if (a0 < a1 && b0 < b1 && a0 < b1 && b0 < a1) {
				tc_rt_set_error(ctx,
					"output '%s' shares memory with %s '%s'; every output needs "
					"its own buffer",
					f->tensors[i].name, j < f->ninputs ? "input" : "output",
					f->tensors[j].name);
				return 0;
			}
		}
	}
	return 1;
}

/* Strided tensors are copied at the boundary: the compiled code (and the
 * interpreter) sees compact row-major tensors only, so a kernel compiled
 * once serves every layout.  An input that is not compact is gathered into
 * a compact copy before the run; an output that is not compact is computed
 * into one and scattered back through its strides after a successful run.
 * The copies lie in one room of the kernel's pool (runtime/compiled.c),
 * taken into *room when some tensor needs one (else left NULL); t[i].data
 * is pointed at tensor i's copy.  -1 when out of memory. */
static int pack(tc_context *ctx, tc_rt_compiled *c, const tc_ir_func *f, tc_tensor *t,
	const tc_rt_layout *l, void **room)
{
	size_t off = 0;
	char *base;
	int i;
	for (i = 0; i < f->ninputs + f->noutputs && l[i].compact; i++)
		;
	if (i == f->ninputs + f->noutputs)
		return 0;
	if (!(*room = tc_rt_copies_take(ctx, c)))
		return -1;
	base = tc_rt_workspace_base(*room);
	for (i = 0; i < f->ninputs + f->noutputs; i++) {
		size_t n = tc_ir_tensor_bytes(&t[i]); /* fits: the shape is the compiled one */
		if (l[i].compact)
			continue;
		if (i < f->ninputs)
			tc_rt_tensor_gather(&t[i], &l[i], base + off);
		t[i].data = base + off;
		off += (n + 63) / 64 * 64;
	}
	return 0;
}

#define FEW_TENSORS 16 /* tensors of a call whose views tc_kernel_run keeps on the stack */

/* tc_kernel_run and tc_kernel_run_timed: run k as launch says. */
static int kernel_run(tc_kernel *k, const DLTensor *const *inputs, int n_inputs,
	DLTensor *const *outputs, int n_outputs, tc_rt_launch *launch)
{
	const tc_ir_func *f;
	tc_context *ctx;
	/* a call with few tensors keeps its views on the stack: three
	 * allocations per call were a tenth of a microsecond kernel's time */
	tc_tensor t_few[FEW_TENSORS], user_few[FEW_TENSORS], *t = NULL, *user = NULL;
	tc_rt_layout l_few[FEW_TENSORS], *l = NULL;
	void *room = NULL;
	int i, n, st = -1;

	if (!k)
		return -1;
	f = k->c->f;
	ctx = k->m->ctx;
	n = f->ninputs + f->noutputs;
	tc_rt_clear_error(ctx);
	if (!count_ok(ctx, f, "input", n_inputs, f->ninputs, 0) ||
		!count_ok(ctx, f, "output", n_outputs, f->noutputs, f->ninputs))
		return -1;
	if (n <= FEW_TENSORS) {
		memset(t_few, 0, (size_t)n * sizeof(tc_tensor));
		memset(l_few, 0, (size_t)n * sizeof(tc_rt_layout));
		t = t_few;
		user = user_few;
		l = l_few;
	} else {
		t = tc_calloc((size_t)n + 1, sizeof(tc_tensor));
		user = tc_calloc((size_t)n + 1, sizeof(tc_tensor));
		l = tc_calloc((size_t)n + 1, sizeof(tc_rt_layout));
	}
	if (!t || !user || !l) {
		tc_rt_set_error(ctx, "out of memory");
		goto done;
	}
	if (convert_tensors(ctx, f, "input", 0, inputs, n_inputs, 1, t, l) < 0 ||
		convert_tensors(ctx, f, "output", f->ninputs, (const DLTensor *const *)outputs,
			n_outputs, 1, t + f->ninputs, l + f->ninputs) < 0 ||
		!on_device(ctx, f, "input", 0, inputs, n_inputs, l, k->c->backend) ||
		!on_device(ctx, f, "output", f->ninputs, (const DLTensor *const *)outputs, n_outputs,
			l + f->ninputs, k->c->backend))
		goto done;
	for (i = 0; i < n; i++)
		if (!same_shape(ctx, i < f->ninputs ? "input" : "output", f->tensors[i].name,
			    &k->c->shapes[i], &t[i]))
			goto done;
	if (!separate(ctx, f, t, l))
		goto done;
	memcpy(user, t, (size_t)n * sizeof(tc_tensor));
	if (pack(ctx, k->c, f, t, l, &room) < 0) {
		tc_rt_set_error(ctx, "out of memory for the compact copies of strided tensors");
		goto done;
	}
	st = k->c->backend->run(k->m, k->c, t, launch);
	for (i = f->ninputs; st == TC_OK && i < n; i++)
		if (!l[i].compact)
			tc_rt_tensor_scatter(t[i].data, &user[i], &l[i]);
done:
	tc_rt_copies_give(ctx, k->c, room);
	if (t != t_few) {
		tc_free(l);
		tc_free(user);
		tc_free(t);
	}
	return st;
}

int tc_kernel_run(tc_kernel *k, const DLTensor *const *inputs, int n_inputs,
	DLTensor *const *outputs, int n_outputs)
{
	tc_rt_launch launch = {0};
	if (!k)
		return -1;
	launch.stream = k->stream;
	return kernel_run(k, inputs, n_inputs, outputs, n_outputs, &launch);
}

int tc_kernel_run_timed(tc_kernel *k, const DLTensor *const *inputs, int n_inputs,
	DLTensor *const *outputs, int n_outputs, double *ms)
{
	tc_rt_launch launch = {0};
	struct timespec a, b;
	int st;
	if (!k)
		return -1;
	launch.stream = k->stream;
	launch.timed = 1;
	clock_gettime(CLOCK_MONOTONIC, &a);
	st = kernel_run(k, inputs, n_inputs, outputs, n_outputs, &launch);
	clock_gettime(CLOCK_MONOTONIC, &b);
	if (ms)
		*ms = st < 0 ? 0
		      : launch.measured ? launch.ms
					: (double)(b.tv_sec - a.tv_sec) * 1e3 +
						(double)(b.tv_nsec - a.tv_nsec) * 1e-6;
	return st;
}

int tc_kernel_set_stream(tc_kernel *k, void *stream)
{
	if (!k)
		return -1;
	tc_rt_clear_error(k->m->ctx);
	if (stream && k->c->backend->device != kDLCUDA) {
		tc_rt_set_error(k->m->ctx, "a stream for '%s', whose target=%s runs on the CPU",
			k->c->f->name, k->c->backend->name);
		return -1;
	}
	k->stream = stream;
	return 0;
}

int tc_kernel_reuses_code(const tc_kernel *k)
{
	return k ? k->c->code_of != NULL : -1;
}

void tc_kernel_free(tc_kernel *k)
{
	if (!k)
		return;
	tc_module_free(k->m);
	tc_free(k);
}

int tc_rt_compile_object(__tc_keep tc_module *m, const char *entry,
	__tc_keep const DLTensor *const *inputs, int n_inputs, __tc_keep const tc_options *options,
	__tc_keep tc_rt_object *o)
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
	c = compile(m, f, in, n_inputs, options, key, NULL, o, NULL);
	key = NULL; /* compile took it */
	if (c && !c->backend->object)
		tc_rt_set_error(m->ctx, "options target=%s make no object code", c->opts.backend);
	st = c && o->code ? 0 : -1;
done:
	pthread_mutex_unlock(&m->ctx->lock);
	tc_rt_compiled_free(c);
	tc_free(key);
	tc_free(in);
	return st;
}
