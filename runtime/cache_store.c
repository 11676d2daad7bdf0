/* Storing object code in the kernel cache (runtime/cache_ops.h): a kernel
 * compiled the way tc_compile compiles it (tc_rt_compile_object) into a
 * relocatable object for the host, stored next to its options, so that a
 * later tc_compile that hits those options loads it (runtime/
 * cache_object.c) instead of running isl and LLVM.
 *
 * Owns: the symbol naming a key and options, and tc_cache_store_object
 * (the autotuner calls it for the best options it found).
 * Must not know: SQL; rows go through runtime/cache.h. */
#include "cache_ops.h"

#include "backend.h"
#include "internal.h"
#include "kernel.h"
#include "object.h"
#include "options.h"

#include <stdio.h>
#include <string.h>

int tc_cache_store_object(__tc_keep tc_cache *c, __tc_keep const tc_cache_key *key,
	__tc_keep tc_module *m, __tc_keep const DLTensor *const *inputs, int n_inputs,
	const char *options)
{
	tc_rt_object o;
	tc_cache_object_row row;
	tc_options *opts = NULL;
	unsigned char *sites = NULL;
	const tc_rt_backend *b;
	char *text = NULL, *msg = NULL, version[32], dh[17], sym[40];
	const char *why = "out of memory";
	size_t nsites = 0;
	uint64_t h;
	int r = -1;

	memset(&o, 0, sizeof(o));
	if (!c || !key || !m)
		return -1;
	if (tc_cache_writable(c) < 0)
		return -1;
	if ((opts = tc_options_new()) &&
		tc_rt_options_parse(opts, options ? options : "", &msg) == 0)
		text = tc_options_print(opts);
	else if (msg)
		why = msg;
	if (!text) {
		tc_cache_set_error(c, "cannot store object code for options that do not parse: %s",
			why);
		goto done;
	}
	if (!(b = tc_rt_backend_of(opts)) || !b->object) {
		r = 0; /* the backend makes no object code (the interpreter) */
		goto done;
	}
	/* a symbol naming the key and options, the same in every process */
	h = tc_hash_bytes(TC_HASH_INIT, key->hash, 16);
	h = tc_hash_bytes(h, key->entry, strlen(key->entry) + 1);
	h = tc_hash_bytes(h, key->types, strlen(key->types) + 1);
	h = tc_hash_bytes(h, key->shapes, strlen(key->shapes) + 1);
	h = tc_hash_bytes(h, key->target, strlen(key->target) + 1);
	h = tc_hash_bytes(h, text, strlen(text) + 1);
	snprintf(sym, sizeof(sym), "tc_obj_%016llx", (unsigned long long)h);
	if (!(o.symbol = tc_strdup(sym))) {
		tc_cache_set_error(c, "%s", "out of memory");
		goto done;
	}
	if (tc_rt_compile_object(m, key->entry, inputs, n_inputs, opts, &o) < 0) {
		tc_cache_set_error_msg(c, "cannot compile object code: ", tc_context_error(m->ctx));
		goto done;
	}
	if (!(sites = tc_rt_sites_encode(o.sites, o.nsites, &nsites))) {
		tc_cache_set_error(c, "%s", "out of memory");
		goto done;
	}
	b->object_version(version, sizeof(version));
	snprintf(dh, sizeof(dh), "%016llx", (unsigned long long)o.def_hash);
	row.symbol = o.symbol;
	row.def_hash = dh;
	row.sites = sites;
	row.sites_size = nsites;
	row.code = o.code;
	row.code_size = o.size;
	r = tc_cache_object_put(c, key, text, version, &row);
done:
	tc_free(sites);
	tc_free(text);
	tc_free(msg);
	tc_options_free(opts);
	tc_rt_object_clear(&o);
	return r;
}
