/* The kernel cache in the library: what tc_compile reads from it when it
 * is given no options, and the public cache functions of include/tcomp.h
 * (tc_context_set_cache, tc_kernel_options_source, tc_kernel_options).
 *
 * Owns: tc_rt_cache_options (the lookup, declared in internal.h), each
 * module's memo of its lookups, and turning the cache's problems into the
 * context's warnings.
 * Calls down only: the storage (runtime/cache.h), keys and object code
 * (runtime/cache_ops.h).
 * Must not know: SQL, the object format.
 *
 * tc_compile only reads: it never creates the cache file or its directory.
 * When there is no file at the cache's path, a lookup costs one stat().
 * Each module remembers its lookups per (entry, input shapes), so compiling
 * the same again neither opens the database nor changes its options while
 * the module lives (a tuner writing meanwhile does not switch a running
 * program's kernels under it). */
#include "cache_api.h"

#include "cache_ops.h"

#include "backend.h"
#include "error.h"
#include "internal.h"
#include "object.h"
#include "options.h"

#include <string.h>
#include <sys/stat.h>

int tc_context_set_cache(tc_context *ctx, const char *path)
{
	char *p = NULL;
	if (!ctx)
		return -1;
	tc_rt_clear_error(ctx);
	if (path && *path && !(p = tc_strdup(path))) {
		tc_rt_set_error(ctx, "out of memory");
		return -1;
	}
	pthread_mutex_lock(&ctx->lock);
	tc_free(ctx->cache_path);
	ctx->cache_path = p;
	ctx->cache_off = path && !*path;
	pthread_mutex_unlock(&ctx->lock);
	return 0;
}

int tc_context_set_cache_result_options(tc_context *ctx, int allow)
{
	if (!ctx)
		return -1;
	tc_rt_clear_error(ctx);
	pthread_mutex_lock(&ctx->lock);
	ctx->cache_result_options = allow != 0;
	pthread_mutex_unlock(&ctx->lock);
	return 0;
}

const char *tc_kernel_options_source(const tc_kernel *k)
{
	if (!k)
		return NULL;
	switch (k->source) {
	case TC_RT_SRC_USER: return "user";
	case TC_RT_SRC_CACHE: return "cache";
	case TC_RT_SRC_CACHE_NEAR: return "cache-near";
	case TC_RT_SRC_CACHE_OTHER_CPU: return "cache-other-cpu";
	default: return "default";
	}
}

/* The options that change a kernel's results, not only its speed: where
 * it runs, FMA contraction and fast math, the options the autotuner never
 * searches.  (vecreduce, which only lets float sums round in another
 * order, as the language allows, is searched: a speed option.)  An entry
 * of the kernel cache may hold other values for them (a tuning run given
 * them as base options, or an imported file): tc_compile does not take
 * them from the cache unless the context allows it
 * (tc_context_set_cache_result_options). */
static const char *const result_options[] = {"target", "contract", "fastmath"};

/* tc_cache_keep_results over result_options[from..]: from 1 keeps the
 * target. */
static int keep_results(__tc_keep tc_options *o, __tc_keep tc_buf *what, size_t from)
{
	size_t i;
	int n = 0;
	for (i = from; i < sizeof(result_options) / sizeof(result_options[0]); i++) {
		const char *name = result_options[i], *v = tc_options_get(o, name);
		const char *d = tc_options_get(NULL, name);
		if (!v || !d || !strcmp(v, d))
			continue;
		if (what)
			tc_buf_printf(what, "%s%s=%s", n ? ", " : "", name, v);
		if (tc_options_set(o, name, d, NULL) < 0)
			return -1;
		n++;
	}
	return n;
}

int tc_cache_keep_results(__tc_keep tc_options *o, __tc_keep tc_buf *what)
{
	return keep_results(o, what, 0);
}

int tc_cache_keep_results_but_target(__tc_keep tc_options *o, __tc_keep tc_buf *what)
{
	return keep_results(o, what, 1);
}

/* The backend whose key part keys b's entries (cache_key.c): b's own,
 * else its device's (the interpreter's entries are the CPU's). */
static const tc_rt_backend *key_backend(const tc_rt_backend *b)
{
	return !b || b->key_target ? b : tc_rt_backend_for_device(b->device);
}

int tc_cache_same_key_target(__tc_keep const tc_options *a, __tc_keep const tc_options *b)
{
	return key_backend(tc_rt_backend_of(a)) == key_backend(tc_rt_backend_of(b));
}

int tc_cache_keys_as_device(__tc_keep const tc_options *o, DLDeviceType dev)
{
	const tc_rt_backend *b = tc_rt_backend_for_device(dev);
	return b && key_backend(tc_rt_backend_of(o)) == b;
}

/* The CPU name of a cache target "triple;cpu;features" (into out). */
static void target_cpu(const char *target, char *out, size_t size)
{
	const char *a = strchr(target, ';'), *b = a ? strchr(a + 1, ';') : NULL;
	if (!a || !b)
		snprintf(out, size, "%s", target);
	else
		snprintf(out, size, "%.*s", (int)(b - a - 1), a + 1);
}

char *tc_kernel_options(const tc_kernel *k)
{
	return k && k->c->options ? tc_strdup(k->c->options) : NULL;
}

/* Add text (lines) to the context's warnings unless they are already
 * there (a damaged cache warns once, not on every compile). */
static void add_warning(tc_context *ctx, const char *text)
{
	tc_buf b;
	if (!text || !*text || (ctx->warnings && strstr(ctx->warnings, text)))
		return;
	tc_buf_init(&b);
	if (ctx->warnings)
		tc_buf_puts(&b, ctx->warnings);
	tc_buf_puts(&b, text);
	if (text[strlen(text) - 1] != '\n')
		tc_buf_putc(&b, '\n');
	if (b.oom) {
		tc_buf_free(&b);
		return;
	}
	tc_free(ctx->warnings);
	ctx->warnings = tc_buf_take(&b);
}

static void remember(tc_module *m, const char *memo, const tc_options *o, tc_rt_source source)
{
	tc_rt_lookup *l = tc_calloc(1, sizeof(*l));
	if (!l || !(l->memo = tc_strdup(memo)) || (o && !(l->options = tc_options_copy(o))) ||
		tc_vec_push(&m->lookups, l) < 0) {
		if (l) {
			tc_free(l->memo);
			tc_options_free(l->options);
		}
		tc_free(l);
		return; /* out of memory: the next compile looks again */
	}
	l->source = source;
}


__tc_give tc_options *tc_rt_cache_options(__tc_keep tc_module *m, const char *entry,
	__tc_keep const DLTensor *const *inputs, int n_inputs, const char *memo,
	tc_rt_source *source, __tc_keep tc_rt_object *obj)
{
	tc_context *ctx = m->ctx;
	tc_cache_key key;
	tc_cache_hit hit;
	tc_cache *c = NULL;
	tc_options *o = NULL;
	char *path = NULL, *msg = NULL;
	const tc_rt_backend *b;
	struct stat sb;
	int i, r;

	*source = TC_RT_SRC_DEFAULT;
	if (ctx->cache_off)
		return NULL;
	for (i = 0; i < m->lookups.n; i++) {
		tc_rt_lookup *l = m->lookups.v[i];
		if (!strcmp(l->memo, memo)) {
			*source = l->source;
			return l->options ? tc_options_copy(l->options) : NULL;
		}
	}
	path = ctx->cache_path ? tc_strdup(ctx->cache_path) : tc_cache_default_path();
	if (!path || stat(path, &sb) < 0) { /* no cache: the defaults, quickly */
		tc_free(path);
		remember(m, memo, NULL, TC_RT_SRC_DEFAULT);
		return NULL;
	}
	memset(&hit, 0, sizeof(hit));
	if (tc_cache_key_init(&key, m, entry, inputs, n_inputs) < 0) {
		tc_rt_clear_error(ctx); /* tc_compile reports bad inputs itself */
		tc_free(path);
		return NULL;
	}
	c = tc_cache_open(path, TC_CACHE_READ, &msg);
	if (msg) {
		tc_buf b;
		tc_buf_init(&b);
		tc_buf_printf(&b, "warning: %s; using the default options\n", msg);
		if (!b.oom)
			add_warning(ctx, b.s);
		tc_buf_free(&b);
	}
	if (c) {
		tc_rt_source found = TC_RT_SRC_CACHE;
		int kept = 0;
		r = tc_cache_lookup(c, &key, &hit);
		if (r == 0) {
			r = tc_cache_lookup_near(c, &key, &hit);
			found = TC_RT_SRC_CACHE_NEAR;
		}
		if (r == 0) {
			r = tc_cache_lookup_other_cpu(c, &key, &hit);
			found = TC_RT_SRC_CACHE_OTHER_CPU;
		}
		/* the key's machine part names the target (cache_key.c), but
		 * entries recorded before it told cuda-emu from the CPU sit
		 * under the CPU's: a run for another target is not this
		 * compile's */
		b = tc_rt_backend_for_device(n_inputs ? inputs[0]->device.device_type : kDLCPU);
		if (r == 1 && (!b || key_backend(tc_rt_backend_of(hit.options)) != b)) {
			tc_buf note;
			tc_buf_init(&note);
			tc_buf_printf(&note, "note: kernel cache '%s': the entry for '%s' (%s) was "
					     "tuned for target=%s: not used for target=%s\n",
				path, entry, hit.shapes, tc_options_get(hit.options, "target"),
				b ? b->name : "?");
			if (!note.oom)
				add_warning(ctx, note.s);
			tc_buf_free(&note);
			r = 0;
		}
		if (r == 1 && !ctx->cache_result_options) {
			tc_buf what, note;
			tc_buf_init(&what);
			tc_buf_init(&note);
			/* the key's target is this compile's (a target keyed
			 * alike, the interpreter for the CPU, is not) */
			kept = keep_results(hit.options, &what,
				!strcmp(tc_options_get(hit.options, "target"), b->name));
			if (kept > 0)
				tc_buf_printf(&note, "note: kernel cache '%s': the entry for '%s' (%s) "
						     "sets %s, which change%s results: not applied "
						     "(tc_context_set_cache_result_options, "
						     "tcomp --cache-result-options)\n",
					path, entry, hit.shapes, what.s, kept == 1 ? "s" : "");
			if (!note.oom && note.s)
				add_warning(ctx, note.s);
			tc_buf_free(&what);
			tc_buf_free(&note);
		}
		if (r == 1 && found == TC_RT_SRC_CACHE_OTHER_CPU) {
			char cpu[128], here[128];
			tc_buf note;
			tc_buf_init(&note);
			target_cpu(hit.target, cpu, sizeof(cpu));
			target_cpu(key.target, here, sizeof(here));
			tc_buf_printf(&note, "note: kernel cache '%s': the options for '%s' (%s) "
					     "were tuned on another CPU of this architecture (%s%s); "
					     "they are used, its object code is not\n",
				path, entry, hit.shapes, cpu,
				strcmp(cpu, here) ? "" : " with other features");
			if (!note.oom)
				add_warning(ctx, note.s);
			tc_buf_free(&note);
		}
		/* object code only for exactly these shapes and options, as
		 * stored (obj stays empty when there is none usable) */
		if (r == 1 && found == TC_RT_SRC_CACHE && !kept &&
			(b = tc_rt_backend_of(hit.options)) && b->load)
			tc_cache_load_object(c, b, hit.kernel_id, hit.text, obj);
		if (r == 1 && kept < 0) {
			tc_cache_set_error(c, "%s", "out of memory");
			r = -1;
		}
		if (r < 0) {
			tc_buf b;
			tc_buf_init(&b);
			tc_buf_printf(&b, "warning: %s; using the default options\n",
				tc_cache_error(c));
			if (!b.oom)
				add_warning(ctx, b.s);
			tc_buf_free(&b);
		} else if (r == 1) {
			o = hit.options;
			hit.options = NULL;
			*source = found != TC_RT_SRC_CACHE_OTHER_CPU &&
					(hit.distance > 0 || strcmp(hit.shapes, key.shapes))
				? TC_RT_SRC_CACHE_NEAR : found;
		}
		add_warning(ctx, tc_cache_warnings(c));
	}
	remember(m, memo, o, *source);
	tc_cache_hit_clear(&hit);
	tc_cache_close(c);
	tc_cache_key_clear(&key);
	tc_free(msg);
	tc_free(path);
	return o;
}
