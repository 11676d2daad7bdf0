/* The kernel cache as tc_compile reads it (runtime/cache_api.c). */
#ifndef TC_RT_CACHE_API_H
#define TC_RT_CACHE_API_H

#include "internal.h"

/* The options tc_compile uses for entry at these inputs when it is given
 * none (runtime/cache_api.c): the kernel cache's best for exactly these
 * shapes, else for the nearest shapes, else NULL (the defaults), with
 * *source saying which; on an exact hit, also the entry's stored object
 * code for those options into *obj when there is one that is intact and
 * made by this tcomp and its backend's object version (else obj is left
 * empty).  Problems with the cache file become warnings of the context, never errors.  Called with ctx->lock held; the result is the
 * caller's. */
__tc_give tc_options *tc_rt_cache_options(__tc_keep tc_module *m, const char *entry,
	const DLTensor *const *inputs, int n_inputs, const char *memo, tc_rt_source *source,
	__tc_keep struct tc_rt_object *obj);

#endif
