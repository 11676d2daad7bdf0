/* Compiled kernels' lifetime and workspaces (runtime/compiled.c). */
#ifndef TC_RT_COMPILED_H
#define TC_RT_COMPILED_H

#include "internal.h"

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
char *tc_rt_workspace_base(__tc_keep void *ws);
/* Return ws (NULL: nothing) to c's pool. */
void tc_rt_workspace_give(__tc_keep tc_context *ctx, __tc_keep tc_rt_compiled *c,
	__tc_take void *ws);

#endif
