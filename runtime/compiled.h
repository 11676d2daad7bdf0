/* Compiled kernels' lifetime and workspaces (runtime/compiled.c).
 *
 * Ownership: a tc_rt_compiled is owned by its module's memo (freed with
 * the module, or by whoever made it when it never got there) and owns its
 * code, arena, arrays and pooled workspaces.  A workspace taken is the
 * caller's until given back. */
#ifndef TC_RT_COMPILED_H
#define TC_RT_COMPILED_H

#include "internal.h"

/* The sizes c's schedule passes made their choices (tile sizes, ...) at:
 * c->at for parametric code compiled under sizes=auto, else c->params. */
const int64_t *tc_rt_compiled_at(__tc_keep const tc_rt_compiled *c);

/* Free c: its code (through its backend), workspaces, shapes and arena. */
void tc_rt_compiled_free(__tc_take tc_rt_compiled *c);

/* Lay out c's workspace: each temporary of c->cf at a 64-byte aligned
 * offset (c->ws_off), those that may be row buffers last (see compiled.c).
 * -1 when the sizes overflow or out of memory. */
tc_stat tc_rt_workspace_layout(__tc_keep tc_rt_compiled *c);
/* A workspace for one run of c, from c's pool or new with its pages
 * touched; NULL when c needs none (c->ws_bytes 0) or out of memory.  The
 * temporaries lie at tc_rt_workspace_base(ws) + c->ws_off[t]. */
__tc_give void *tc_rt_workspace_take(__tc_keep tc_context *ctx, __tc_keep tc_rt_compiled *c);
/* Room for compact copies of c's strided inputs and outputs for one run
 * (c->copy_bytes, the inputs' and outputs' bytes each rounded up to 64,
 * from tc_rt_workspace_base of it), from c's pool, else new (pages not
 * touched); NULL when out of memory.  Kept like workspaces: the pages of a
 * copy are faulted in once, not on every run. */
__tc_give void *tc_rt_copies_take(__tc_keep tc_context *ctx, __tc_keep tc_rt_compiled *c);
/* Return p (NULL: nothing) to c's pool of copy rooms, which then owns it. */
void tc_rt_copies_give(__tc_keep tc_context *ctx, __tc_keep tc_rt_compiled *c,
	__tc_take void *p);
/* The 64-byte aligned start of ws: a pointer into ws, not an object of its
 * own (NULL for a NULL ws). */
char *tc_rt_workspace_base(__tc_keep void *ws);
/* Return ws (NULL: nothing) to c's pool, which then owns it (freed at once
 * when the pool cannot grow). */
void tc_rt_workspace_give(__tc_keep tc_context *ctx, __tc_keep tc_rt_compiled *c,
	__tc_take void *ws);

#endif
