/* Object code in the kernel cache (runtime/cache_ops.h): a kernel compiled
 * for the host and stored next to its options, so that a later tc_compile
 * that hits those options loads it instead of running isl and LLVM.
 *
 * Owns: the object format above the storage's opaque object rows -- the
 * symbol naming a key and options, the encoding of the run-time check
 * sites (SITE_INTS little-endian int32s per site), the def hash as 16 hex
 * digits, and the LLVM version as the rows' object version -- and
 * compiling the object (tc_rt_compile_object).
 * Entry points: tc_cache_store_object (the autotuner), tc_cache_load_object
 * (tc_compile's lookup, runtime/cache_api.c).
 * Must not know: SQL; rows go through runtime/cache.h. */
#include "cache_ops.h"

#include "internal.h"
#include "options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SITE_INTS 8 /* kind, off, len, line, col, tensor, dim, op */

/* The sites as little-endian int32s (SITE_INTS per site). */
static unsigned char *encode_sites(const tc_cg_site *s, int n, size_t *size)
{
	unsigned char *b = tc_malloc((size_t)n * SITE_INTS * 4 + 1), *p = b;
	int i, k;
	*size = (size_t)n * SITE_INTS * 4;
	if (!b)
		return NULL;
	for (i = 0; i < n; i++) {
		int32_t v[SITE_INTS] = {(int32_t)s[i].kind, s[i].loc.off, s[i].loc.len, s[i].loc.line,
			s[i].loc.col, s[i].tensor, s[i].dim, s[i].op};
		for (k = 0; k < SITE_INTS; k++, p += 4) {
			uint32_t u = (uint32_t)v[k];
			p[0] = (unsigned char)u;
			p[1] = (unsigned char)(u >> 8);
			p[2] = (unsigned char)(u >> 16);
			p[3] = (unsigned char)(u >> 24);
		}
	}
	return b;
}

/* The sites encoded in size bytes at p into *out (owned by the caller) and
 * *n; -1 if malformed (not whole sites, too many, an unknown kind) or out
 * of memory. */
static int decode_sites(const unsigned char *p, size_t size, tc_cg_site **out, int *n)
{
	size_t i, count = size / (SITE_INTS * 4);
	int k;
	*out = NULL;
	*n = 0;
	if (size % (SITE_INTS * 4) || count > 1000000)
		return -1;
	if (count && !(*out = tc_calloc(count, sizeof(tc_cg_site))))
		return -1;
	for (i = 0; i < count; i++) {
		int32_t v[SITE_INTS];
		for (k = 0; k < SITE_INTS; k++, p += 4)
			v[k] = (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
					 (uint32_t)p[3] << 24);
		if (v[0] != TC_CG_CHECK_BOUNDS && v[0] != TC_CG_CHECK_DIV) {
			tc_free(*out);
			*out = NULL;
			return -1;
		}
		(*out)[i].kind = (tc_cg_check)v[0];
		(*out)[i].loc = (tc_loc){v[1], v[2], v[3], v[4]};
		(*out)[i].tensor = v[5];
		(*out)[i].dim = v[6];
		(*out)[i].op = (char)v[7];
	}
	*n = (int)count;
	return 0;
}

int tc_cache_store_object(__tc_keep tc_cache *c, __tc_keep const tc_cache_key *key,
	__tc_keep tc_module *m, const DLTensor *const *inputs, int n_inputs, const char *options)
{
	tc_rt_object o;
	tc_cache_object_row row;
	tc_options *opts = NULL;
	unsigned char *sites = NULL;
	char *text = NULL, *msg = NULL, llvm[32], dh[17], sym[40];
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
	if (strcmp(tc_options_get(opts, "target"), "cpu")) {
		r = 0; /* nothing to store for the interpreter */
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
	if (!(sites = encode_sites(o.sites, o.nsites, &nsites))) {
		tc_cache_set_error(c, "%s", "out of memory");
		goto done;
	}
	tc_cg_llvm_version(llvm, sizeof(llvm));
	snprintf(dh, sizeof(dh), "%016llx", (unsigned long long)o.def_hash);
	row.symbol = o.symbol;
	row.def_hash = dh;
	row.sites = sites;
	row.sites_size = nsites;
	row.code = o.code;
	row.code_size = o.size;
	r = tc_cache_object_put(c, key, text, llvm, &row);
done:
	tc_free(sites);
	tc_free(text);
	tc_free(msg);
	tc_options_free(opts);
	tc_rt_object_clear(&o);
	return r;
}

int tc_cache_load_object(__tc_keep tc_cache *c, int64_t kernel_id, const char *options,
	__tc_keep struct tc_rt_object *o)
{
	tc_cache_object_row row;
	char llvm[32];
	int r;
	memset(o, 0, sizeof(*o));
	if (!c || !options)
		return -1;
	tc_cg_llvm_version(llvm, sizeof(llvm));
	if ((r = tc_cache_object_get(c, kernel_id, options, llvm, &row)) != 1)
		return r;
	if (decode_sites(row.sites, row.sites_size, &o->sites, &o->nsites) < 0) {
		/* intact as stored, but not sites this tcomp reads */
		tc_cache_warn(c, "the object code of entry %lld fails its checksum; compiling from "
				 "the options", (long long)kernel_id);
		r = 0;
	} else {
		o->code = row.code;
		o->size = row.code_size;
		o->symbol = row.symbol;
		o->def_hash = strtoull(row.def_hash, NULL, 16);
		row.code = NULL;
		row.symbol = NULL;
	}
	tc_cache_object_row_clear(&row);
	return r;
}
