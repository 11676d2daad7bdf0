/* Comma-separated lists of names in the API's arguments: tc_module_grad's
 * wrt ("A,B") and tc_module_vmap's batched inputs.
 *
 * Ownership: the names and the array live in the arena passed in; the
 * context and the list are borrowed. */
#ifndef TC_RT_NAMES_H
#define TC_RT_NAMES_H

#include "tcomp.h"

#include "../lang/util.h"

/* Split list ("A,B") at its commas into *names, an array of *n strings
 * allocated in ar (NULL and 0 for a NULL or empty list).  0, or -1 with
 * an error in ctx: an empty name ("A,,B", "A,"; the message starts with
 * what, the caller's name) or out of memory. */
tc_stat tc_rt_split_names(__tc_keep tc_context *ctx, __tc_keep tc_arena *ar, const char *what,
	__tc_keep const char *list, const char ***names, int *n);

#endif
