/* The kernel cache as tc_compile reads it (runtime/cache_api.c).
 *
 * Ownership: the module and inputs are borrowed; the options returned are
 * the caller's, and object code found goes into the caller's tc_rt_object,
 * which then owns it.  The lookups a module remembers are the module's. */
#ifndef TC_RT_CACHE_API_H
#define TC_RT_CACHE_API_H

#include "internal.h"

/* The options tc_compile uses for entry at these inputs when it is given
 * none (runtime/cache_api.c): the kernel cache's best for exactly these
 * shapes, else for the nearest shapes, else NULL (the defaults), with
 * *source saying which; on an exact hit, also the entry's stored object
 * code for those options into *obj when there is one that is intact and
 * made by this tcomp and its backend's object version (else obj is left
 * empty; when filled, its pointers are the caller's: tc_rt_object_clear).
 * memo is copied into the module's memo of lookups.  Problems with the
 * cache file become warnings of the context, never errors.  Called with
 * ctx->lock held; the result is the caller's (tc_options_free). */
__tc_give tc_options *tc_rt_cache_options(__tc_keep tc_module *m, const char *entry,
	__tc_keep const DLTensor *const *inputs, int n_inputs, const char *memo,
	tc_rt_source *source, __tc_keep struct tc_rt_object *obj);

#endif
