/* Range inference for one statement (docs/language.md, "Range inference").
 * Internal to lang/: called by sema once names and types are resolved.
 *
 * Ownership: everything made here (size expressions, checks, the AST
 * fields set) lives in the arena passed in; nothing is the caller's to
 * free. */
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
tc_stat tc_range_infer(__tc_keep tc_arena *ar, __tc_keep tc_diags *d,
	__tc_keep const tc_def *def, __tc_keep tc_tensor_info *const *tensors,
	__tc_keep tc_stmt *s, __tc_keep tc_vec *checks);

/* Convert an expression over sizes and integer constants (a where bound, a
 * resolved subscript without index variables) to a size expression in ar;
 * NULL if it is not one (no error reported). */
const tc_sexpr *tc_range_sexpr(__tc_keep tc_arena *ar, __tc_keep const tc_expr *e);

#endif
