/* Range inference for one statement (docs/language.md, "Range inference").
 * Internal to lang/: called by sema once names and types are resolved. */
#ifndef TC_RANGE_H
#define TC_RANGE_H

#include "ast.h"

/* Infer the ranges of s's index variables (s->vars[..].lo/hi) from the reads
 * of the statement and its where clauses, given the tensors known so far
 * (tensors[t]->ext for inputs and tensors written by earlier statements).
 * For the first write of a tensor without a declared shape, sets its
 * extents; otherwise checks the writes stay inside it.  Conditions on sizes
 * that cannot be proven are appended to checks (tc_check *, in ar).
 * Errors go to d. */
tc_stat tc_range_infer(tc_arena *ar, tc_diags *d, const tc_def *def,
	tc_tensor_info *const *tensors, tc_stmt *s, tc_vec *checks);

/* Convert an expression over sizes and integer constants (a where bound, a
 * resolved subscript without index variables) to a size expression; NULL if
 * it is not one (no error reported). */
const tc_sexpr *tc_range_sexpr(tc_arena *ar, const tc_expr *e);

#endif
