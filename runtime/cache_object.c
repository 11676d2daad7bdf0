/* Object code in the kernel cache, read back (runtime/cache_ops.h): the
 * object format above the storage's opaque object rows -- the check sites
 * in their serial form (runtime/object.h), the def hash as 16 hex digits,
 * the backend's object version (the LLVM version) as the rows' version.
 * Storing it is runtime/cache_store.c's, which compiles; this file only
 * reads, so tc_compile's lookup (runtime/cache_api.c) can use it.
 * Entry point: tc_cache_load_object.
 * Must not know: SQL; rows go through runtime/cache.h. */
#include "cache_ops.h"

#include "backend.h"
#include "internal.h"
#include "object.h"
#include "options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tc_cache_load_object(__tc_keep tc_cache *c, __tc_keep const tc_rt_backend *b,
	int64_t kernel_id, const char *options, __tc_keep struct tc_rt_object *o)
{
	tc_cache_object_row row;
	char version[32];
	int r;
	memset(o, 0, sizeof(*o));
	if (!c || !options || !b->object_version)
		return -1;
	b->object_version(version, sizeof(version));
	if ((r = tc_cache_object_get(c, kernel_id, options, version, &row)) != 1)
		return r;
	if (tc_rt_sites_decode(row.sites, row.sites_size, &o->sites, &o->nsites) < 0) {
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
