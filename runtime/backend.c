/* The backend table (backend.h) and the backends' per-context states. */
#include "backend.h"

#include "options.h"

#include <string.h>

/* Every backend, in the order their states sit in tc_context. */
static const tc_rt_backend *const table[] = {
	&tc_rt_backend_cpu,
	&tc_rt_backend_interp,
	&tc_rt_backend_cuda,
	&tc_rt_backend_cuda_emu,
};
#define NBACKENDS ((int)(sizeof(table) / sizeof(table[0])))
_Static_assert(NBACKENDS <= TC_RT_MAX_BACKENDS, "tc_context has a state slot per backend");

int tc_rt_backend_count(void)
{
	return NBACKENDS;
}

const tc_rt_backend *tc_rt_backend_at(int i)
{
	return i >= 0 && i < NBACKENDS ? table[i] : NULL;
}

const tc_rt_backend *tc_rt_backend_find(const char *name)
{
	int i;
	for (i = 0; name && i < NBACKENDS; i++)
		if (!strcmp(table[i]->name, name))
			return table[i];
	return NULL;
}

const tc_rt_backend *tc_rt_backend_of(__tc_keep const tc_options *o)
{
	tc_rt_opts d;
	tc_rt_opts_decode(o, &d);
	return tc_rt_backend_find(d.backend);
}

const tc_rt_backend *tc_rt_backend_for_device(DLDeviceType dev)
{
	int i;
	for (i = 0; i < NBACKENDS; i++)
		if (table[i]->device == dev && table[i]->key_target)
			return table[i];
	return NULL;
}

int tc_rt_backend_index(__tc_keep const tc_rt_backend *b)
{
	int i;
	for (i = 0; i < NBACKENDS; i++)
		if (table[i] == b)
			return i;
	return -1;
}

int tc_rt_backend_serves(DLDeviceType dev)
{
	int i;
	for (i = 0; i < NBACKENDS; i++)
		if (table[i]->device == dev)
			return 1;
	return 0;
}

void *tc_rt_backend_state(__tc_keep tc_context *ctx, __tc_keep const tc_rt_backend *b,
	__tc_keep tc_diags *d)
{
	int i = tc_rt_backend_index(b);
	if (i < 0 || !b->state_new)
		return NULL;
	if (!ctx->backend_state[i])
		ctx->backend_state[i] = b->state_new(d);
	return ctx->backend_state[i];
}

void tc_rt_backend_states_free(__tc_keep tc_context *ctx)
{
	int i;
	for (i = 0; i < NBACKENDS; i++)
		if (ctx->backend_state[i]) {
			table[i]->state_free(ctx->backend_state[i]);
			ctx->backend_state[i] = NULL;
		}
}

int tc_rt_backend_has_stage(__tc_keep const tc_rt_backend *b, const char *stage)
{
	int i;
	for (i = 0; b->stages && b->stages[i]; i++)
		if (!strcmp(b->stages[i], stage))
			return 1;
	return 0;
}

DLDeviceType tc_options_device(const tc_options *o)
{
	const tc_rt_backend *b = tc_rt_backend_of(o);
	return b ? b->device : kDLCPU;
}
