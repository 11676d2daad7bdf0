/* tc_module_grad and tc_module_grad_per_sample (include/tcomp.h): the
 * backward def of a module's def as .tc text, derived by lang/grad.c (and,
 * per sample, rewritten by lang/grad_sample.c) and printed by the one .tc
 * printer.
 *
 * The derivation allocates in an arena of its own, freed before returning:
 * the module's arena does not grow with each call, and the module's AST is
 * only read (borrowed), so no lock is taken beyond the error state's. */
#include "error.h"
#include "internal.h"
#include "module.h"
#include "names.h"

#include "../lang/grad.h"

#include <string.h>

/* The text of tc_module_grad (batch NULL) or of tc_module_grad_per_sample
 * (batch the batch size's name); fn names the API function in errors. */
static __tc_give char *grad_text(__tc_keep tc_module *m, const char *fn, const char *entry,
	const char *wrt, const char *batch, int flags)
{
	tc_arena *ar = NULL;
	const char **names = NULL;
	char *text = NULL;
	int i, n = 0;
	tc_def *g, *fwd = NULL;
	tc_diags d;

	if ((i = tc_rt_find_def(m, entry)) < 0)
		return NULL;
	if (!(ar = tc_arena_new()))
		goto nomem;
	if (tc_rt_split_names(m->ctx, ar, fn, wrt, &names, &n) < 0)
		goto error;
	tc_diags_init(&d, m->src);
	g = tc_grad_derive(ar, m->prog->defs[i], names, n, !!(flags & TC_GRAD_SAVES), &fwd, &d);
	if (g && batch)
		g = tc_grad_per_sample(ar, m->prog->defs[i], g, batch, &d);
	{
		tc_def *defs[2] = {fwd, g};
		text = tc_rt_derived_text(m->ctx, &d, "differentiating", entry, defs, 2);
	}
	tc_arena_free(ar);
	return text;
nomem:
	tc_rt_set_error(m->ctx, "out of memory");
error:
	tc_arena_free(ar);
	return NULL;
}

char *tc_module_grad(tc_module *m, const char *entry, const char *wrt, int flags)
{
	if (!m)
		return NULL;
	tc_rt_clear_error(m->ctx);
	return grad_text(m, "tc_module_grad", entry, wrt, NULL, flags);
}

char *tc_module_grad_per_sample(tc_module *m, const char *entry, const char *wrt,
	const char *batch, int flags)
{
	if (!m)
		return NULL;
	tc_rt_clear_error(m->ctx);
	if (!batch) {
		tc_rt_set_error(m->ctx, "tc_module_grad_per_sample: the batch size's name is NULL");
		return NULL;
	}
	return grad_text(m, "tc_module_grad_per_sample", entry, wrt, batch, flags);
}
