/* Automatic differentiation of defs (reverse mode), on the checked syntax
 * tree: a forward def in, its backward def out as a syntax tree that the
 * one .tc printer (tc_ast_print_source) prints.  docs/language.md
 * "Gradients" states the rules; lang/README.md says how this works.
 *
 * Ownership: the derived def and every node of it live in the arena passed
 * in (nodes of the forward def are shared, never changed); the forward def
 * and its program are borrowed and must outlive the result. */
#ifndef TC_GRAD_H
#define TC_GRAD_H

#include "ast.h"

/* Derive the backward def of def (checked by tc_sema_check without
 * errors), named "<name>_grad": inputs are def's inputs, then the outputs
 * whose values it reads, then (saves set) the temporaries it reads, then
 * d_<O> for each output O; outputs are d_<X> for each input X named in
 * wrt[0..nwrt) (nwrt 0: every floating-point input), in the order of def's
 * inputs.  Without saves, the temporaries it reads are recomputed inside
 * it and *fwd is NULL; with saves, *fwd is the "forward with saves" def
 * "<name>_fwd" (def's statements, returning def's outputs and then those
 * temporaries), or NULL when the backward reads no temporary.
 * What cannot be differentiated yet (an unsupported construct, an integer
 * output, a name in wrt that is not a floating-point input) is an error in
 * d located in def's source; the result is then NULL.  NULL without an
 * error in d means out of memory (ar failed). */
__tc_give tc_def *tc_grad_derive(__tc_keep tc_arena *ar, __tc_keep const tc_def *def,
	__tc_keep const char *const *wrt, int nwrt, int saves, __tc_give tc_def **fwd,
	__tc_keep tc_diags *d);

#endif
