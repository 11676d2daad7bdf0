/* What the API's def-to-def transformations (tc_module_grad,
 * tc_module_vmap) share: comma-separated lists of names in their arguments
 * (grad's wrt "A,B", vmap's batched inputs), and their result as text.
 *
 * Ownership: the names and the array live in the arena passed in; the
 * context and the list are borrowed. */
#ifndef TC_RT_NAMES_H
#define TC_RT_NAMES_H

#include "tcomp.h"

#include "../lang/ast.h"
#include "../lang/diag.h"
#include "../lang/util.h"

/* Split list ("A,B") at its commas into *names, an array of *n strings
 * allocated in ar (NULL and 0 for a NULL or empty list).  0, or -1 with
 * an error in ctx: an empty name ("A,,B", "A,"; the message starts with
 * what, the caller's name) or out of memory. */
tc_stat tc_rt_split_names(__tc_keep tc_context *ctx, __tc_keep tc_arena *ar, const char *what,
	__tc_keep const char *list, const char ***names, int *n);

/* The text of defs[0..n) (NULL entries skipped), printed in order by the
 * one .tc printer, when defs[n - 1], the transformation's result, is not
 * NULL; else NULL with d's errors as ctx's error (none in d, or an
 * allocation failed: "out of memory while <doing> '<entry>'").  d is
 * cleared either way.  NULL and "out of memory" when the text cannot be
 * allocated.  The text is parsed and checked again as a user's file is:
 * where it does not check (a bug of the transformation), NULL with an
 * internal error carrying the front end's errors, located in the text
 * (named "<derived from ENTRY>"). */
__tc_give char *tc_rt_derived_text(__tc_keep tc_context *ctx, __tc_keep tc_diags *d,
	const char *doing, const char *entry, __tc_keep tc_def *const *defs, int n);

#endif
