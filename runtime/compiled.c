/* Compiled kernels (tc_rt_compiled, internal.h): freeing them, and the
 * workspace pool each keeps for its temporaries (and another for compact
 * copies of strided tensors, runtime/kernel.c), so that repeated runs
 * reuse memory whose pages are already mapped (page faults are expensive
 * on the machines tcomp is measured on). */
#include "compiled.h"

#include "backend.h"

#include <stdint.h>
#include <string.h>

#define WS_ALIGN 64

/* A pool (of workspaces or of copy rooms) is a vector of free blocks,
 * guarded by the context's lock. */

/* A free block of pool, or NULL when it has none. */
static void *pool_pop(tc_context *ctx, tc_vec *pool)
{
	void *p = NULL;
	pthread_mutex_lock(&ctx->lock);
	if (pool->n)
		p = pool->v[--pool->n];
	pthread_mutex_unlock(&ctx->lock);
	return p;
}

/* Give p (NULL: nothing) back to pool, which then owns it (freed when the
 * pool cannot grow). */
static void pool_push(tc_context *ctx, tc_vec *pool, void *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&ctx->lock);
	if (tc_vec_push(pool, p) < 0)
		tc_free(p);
	pthread_mutex_unlock(&ctx->lock);
}

/* Free pool's blocks and the pool. */
static void pool_free(tc_vec *pool)
{
	int i;
	for (i = 0; i < pool->n; i++)
		tc_free(pool->v[i]);
	tc_vec_free(pool);
}

const int64_t *tc_rt_compiled_at(__tc_keep const tc_rt_compiled *c)
{
	return c->at ? c->at : c->params;
}

void tc_rt_compiled_free(__tc_take tc_rt_compiled *c)
{
	if (!c)
		return;
	if (c->code && !c->code_of)
		c->backend->code_free(c->code);
	pool_free(&c->ws_free);
	pool_free(&c->copy_free);
	tc_free(c->ws_off);
	tc_free(c->shapes);
	tc_free(c->params);
	tc_free(c->at);
	tc_free(c->key);
	tc_free(c->options);
	tc_arena_free(c->ar);
	tc_free(c);
}

/* The workspace layout: each temporary at a 64-byte aligned offset, those
 * that may be row buffers (tc_ir_tensor.rowbuf) last.  When the schedule
 * keeps such a temporary in a row buffer on the stack (polyhedral/
 * contract.c) its region is never touched; when it does not, the kernel
 * uses the region.  Which of the two happens is known only to the code
 * (also code loaded from the kernel cache), so the region is there either
 * way, but new workspaces have only the pages before it touched
 * (ws_touch): an unused region costs address space, not memory or page
 * faults. */
tc_stat tc_rt_workspace_layout(__tc_keep tc_rt_compiled *c)
{
	const tc_ir_func *f = c->cf;
	int t, pass;
	c->ws_off = tc_calloc((size_t)f->ntensors + 1, sizeof(size_t));
	if (!c->ws_off)
		return TC_ERR;
	for (pass = 0; pass < 2; pass++) {
		for (t = f->ninputs + f->noutputs; t < f->ntensors; t++) {
			size_t n = tc_ir_tensor_bytes(&c->shapes[t]);
			if (f->tensors[t].rowbuf != pass)
				continue;
			if (n == SIZE_MAX)
				return TC_ERR;
			c->ws_off[t] = c->ws_bytes;
			n = (n + WS_ALIGN - 1) / WS_ALIGN * WS_ALIGN;
			if (__builtin_add_overflow(c->ws_bytes, n, &c->ws_bytes))
				return TC_ERR;
		}
		if (!pass)
			c->ws_touch = c->ws_bytes;
	}
	/* room for compact copies of the inputs and outputs */
	for (t = 0; t < f->ninputs + f->noutputs; t++) {
		size_t n = tc_ir_tensor_bytes(&c->shapes[t]);
		if (n == SIZE_MAX)
			return TC_ERR;
		n = (n + WS_ALIGN - 1) / WS_ALIGN * WS_ALIGN;
		if (__builtin_add_overflow(c->copy_bytes, n, &c->copy_bytes))
			return TC_ERR;
	}
	/* tc_rt_workspace_take and tc_rt_copies_take allocate WS_ALIGN more */
	return c->ws_bytes > SIZE_MAX - WS_ALIGN || c->copy_bytes > SIZE_MAX - WS_ALIGN ? TC_ERR
											: TC_OK;
}

__tc_give void *tc_rt_workspace_take(__tc_keep tc_context *ctx, __tc_keep tc_rt_compiled *c)
{
	void *ws;
	if (!c->ws_bytes)
		return NULL;
	ws = pool_pop(ctx, &c->ws_free);
	if (!ws && (ws = tc_malloc(c->ws_bytes + WS_ALIGN)))
		memset(ws, 0, c->ws_touch + WS_ALIGN); /* see tc_rt_workspace_layout */
	return ws;
}

__tc_give void *tc_rt_copies_take(__tc_keep tc_context *ctx, __tc_keep tc_rt_compiled *c)
{
	void *p = pool_pop(ctx, &c->copy_free);
	return p ? p : tc_malloc(c->copy_bytes + WS_ALIGN);
}

void tc_rt_copies_give(__tc_keep tc_context *ctx, __tc_keep tc_rt_compiled *c, __tc_take void *p)
{
	pool_push(ctx, &c->copy_free, p);
}

char *tc_rt_workspace_base(__tc_keep void *ws)
{
	return ws ? (char *)(((uintptr_t)ws + WS_ALIGN - 1) / WS_ALIGN * WS_ALIGN) : NULL;
}

void tc_rt_workspace_give(__tc_keep tc_context *ctx, __tc_keep tc_rt_compiled *c,
	__tc_take void *ws)
{
	pool_push(ctx, &c->ws_free, ws);
}
