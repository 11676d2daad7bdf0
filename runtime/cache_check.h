/* Checks of the rows tcomp cache import reads (runtime/cache_check.c),
 * before the storage adds them (tc_cache_import_row, runtime/cache.h).
 * Nothing here owns anything: the strings and buffers are the caller's.
 * It includes no other header of runtime/ (the storage includes it). */
#ifndef TC_RT_CACHE_CHECK_H
#define TC_RT_CACHE_CHECK_H

#include <stddef.h>

/* Are these key fields of a row one tc_cache_key_init could have made?  entry a def
 * name; types "dtype/rank,..." with tcomp's dtype names (their canonical
 * spelling) and ranks 0..8; as many shapes and strides as types; each shape
 * rank extents joined by x, every one at least 1 (an empty tensor has
 * nothing to tune), written without sign or leading zeros, their product
 * at most 2^62; strides the compact row-major strides of the shapes;
 * target "TRIPLE;CPU;FEATURES" with a triple; version N.N.N.  0 yes; -1
 * with why in msg (size bytes, at least 1).  The fields must not be
 * NULL. */
int tc_cache_check_key(const char *entry, const char *types, const char *shapes,
	const char *strides, const char *target, const char *version, char *msg, size_t size);

#endif
