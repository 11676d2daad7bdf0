/* tc_module_vmap (include/tcomp.h): a module's def batched over a leading
 * model dimension, as .tc text, built by lang/vmap.c and printed by the
 * one .tc printer.
 *
 * As tc_module_grad does, it allocates in an arena of its own, freed
 * before returning, and only reads the module's AST (borrowed), so no
 * lock is taken beyond the error state's. */
#include "error.h"
#include "internal.h"
#include "module.h"
#include "names.h"

#include "../lang/vmap.h"

char *tc_module_vmap(tc_module *m, const char *entry, const char *batched, const char *size)
{
	tc_arena *ar = NULL;
	const char **names = NULL;
	char *text = NULL;
	int i, n = 0;
	tc_def *v;
	tc_diags d;

	if (!m)
		return NULL;
	tc_rt_clear_error(m->ctx);
	if ((i = tc_rt_find_def(m, entry)) < 0)
		return NULL;
	if (!batched || !size) {
		tc_rt_set_error(m->ctx, "tc_module_vmap: the %s is NULL",
			!batched ? "list of inputs to batch" : "size name");
		return NULL;
	}
	if (!(ar = tc_arena_new()))
		goto nomem;
	if (tc_rt_split_names(m->ctx, ar, "tc_module_vmap", batched, &names, &n) < 0)
		goto error;
	tc_diags_init(&d, m->src);
	v = tc_vmap_def(ar, m->prog->defs[i], names, n, size, &d);
	text = tc_rt_derived_text(m->ctx, &d, "batching", entry, &v, 1);
	tc_arena_free(ar);
	return text;
nomem:
	tc_rt_set_error(m->ctx, "out of memory");
error:
	tc_arena_free(ar);
	return NULL;
}
