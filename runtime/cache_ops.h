/* The kernel cache above its storage: what the library, the autotuner and
 * tcomp cache do with the rows of runtime/cache.h.  Each file below calls
 * down only (into the storage, and into the compiler for keys and object
 * code); storage calls none of them.
 *
 *   runtime/cache_key.c     a key from a module, an entry and its inputs
 *   runtime/cache_api.c     tc_compile's lookup and the public cache API
 *                           (declared in internal.h and tcomp.h) */
#ifndef TC_RT_CACHE_OPS_H
#define TC_RT_CACHE_OPS_H

#include "cache.h"

/* ---- runtime/cache_key.c ---- */

/* Fill key for entry of m compiled for inputs (only dtype, shape and
 * strides are read) on the host CPU.  0 ok; -1 with an error in m's context
 * (unknown entry, wrong input count, out of memory).  The strings are the
 * key's (tc_cache_key_clear). */
int tc_cache_key_init(__tc_keep tc_cache_key *key, __tc_keep tc_module *m, const char *entry,
	const DLTensor *const *inputs, int n_inputs);

#endif
