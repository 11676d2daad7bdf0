/* Batching a def over a leading "model" dimension (vectorising map, as
 * jax.vmap and torch.func.vmap do with in_dims=0 for some arguments and
 * None for the others), on the checked syntax tree: a def in, the batched
 * def out as a syntax tree that the one .tc printer (tc_ast_print_source)
 * prints.  docs/language.md "Batching over models" states the rules;
 * lang/README.md says how this works.
 *
 * Ownership: the batched def and every node of it live in the arena passed
 * in (nodes of the def that do not change are shared, never changed); the
 * def and its program are borrowed and must outlive the result. */
#ifndef TC_VMAP_H
#define TC_VMAP_H

#include "ast.h"

/* The def (checked by tc_sema_check without errors) with a leading
 * dimension of extent size added to each input named in
 * batched[0..nbatched) and to every tensor computed from them: a tensor
 * is batched when a statement writing it reads a batched tensor (in its
 * right side, lets, exists clauses or gathered left-hand subscripts),
 * until nothing changes, so a tensor written both from batched and from
 * unbatched values is batched throughout.  Each statement writing a
 * batched tensor gets a new first left-hand index (the first of e, e1,
 * e2, ... that the def does not use), which every read of a batched
 * tensor in it takes as its first subscript; the first statement writing
 * a tensor without a declared shape gets the where range "e in 0:size"
 * too when no read of a batched tensor outside a branch of ?: or pad
 * bounds e.  The other statements are shared unchanged.  Batched
 * inputs, and batched outputs declared with a shape, get size as their
 * first dimension (a scalar becomes rank 1).  The def keeps its name.
 *
 * The result is syntax only: sema's fields of its new nodes are not
 * filled in and it shares nodes with def, so print it (and parse the text
 * to check or compile it); never pass it to tc_sema_check.
 *
 * Errors, in d and located in def's source (the result is then NULL): def
 * has errors; no name in batched; a name that is not an input of def, or
 * is named twice; size not an identifier, a keyword, a type or builtin
 * name, or already a size or another name of def; a tensor that would get
 * more than TC_MAX_RANK dimensions.  NULL without an error in d means out
 * of memory (ar failed). */
__tc_give tc_def *tc_vmap_def(__tc_keep tc_arena *ar, __tc_keep const tc_def *def,
	__tc_keep const char *const *batched, int nbatched, const char *size,
	__tc_keep tc_diags *d);

#endif
