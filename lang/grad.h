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

/* Per-sample gradients (lang/grad_sample.c; docs/language.md section 14,
 * "Per-sample gradients"): bwd, the backward def tc_grad_derive derived
 * from def (with or without saves), rewritten so that the gradients keep
 * the batch index instead of summing over it.  batch names a size B of
 * def; an index whose range is 0:B is its statement's batch index.  Each
 * output d_X of a tensor X without a dimension of extent B gets B
 * prepended to its shape (d_W(b,h,i) = d_A(b,h) * X(b,i)); the backward
 * statements that write a tensor without such a dimension and reduce over
 * a batch index or read a tensor made per-sample keep the batch index on
 * their left side, first (a '+=!' left without reduction indices is '='),
 * and the reads of per-sample tensors get it as their first subscript; a
 * batched input's gradient keeps its shape.  The result is named as bwd,
 * is checked (sema ran on it) and lives in ar; its locations are of a text
 * that is gone (no diagnostic may be rendered at them).  Errors in d,
 * located in def's source: batch is not a size of def; def mixes samples
 * (a statement reduces over a batch index or has two, a tensor with a
 * dimension of extent B is read or written there at another subscript
 * than the batch index, a floating-point output has no such dimension);
 * an output gradient does not depend on the batch.  The result is then
 * NULL; NULL without an error in d means out of memory. */
__tc_give tc_def *tc_grad_per_sample(__tc_keep tc_arena *ar, __tc_keep const tc_def *def,
	__tc_keep const tc_def *bwd, __tc_keep const char *batch, __tc_keep tc_diags *d);

#endif
