/* tc_module_grad (include/tcomp.h): the backward def of a module's def as
 * .tc text, derived by lang/grad.c and printed by the one .tc printer.
 *
 * The derivation allocates in an arena of its own, freed before returning:
 * the module's arena does not grow with each call, and the module's AST is
 * only read (borrowed), so no lock is taken beyond the error state's. */
#include "error.h"
#include "internal.h"
#include "module.h"

#include "../lang/grad.h"

#include <string.h>

char *tc_module_grad(tc_module *m, const char *entry, const char *wrt, int flags)
{
	tc_arena *ar = NULL;
	const char **names = NULL;
	char *copy = NULL, *text = NULL;
	int i, n = 0;
	tc_def *g, *fwd = NULL;
	tc_diags d;
	tc_buf b;

	if (!m)
		return NULL;
	tc_rt_clear_error(m->ctx);
	if ((i = tc_rt_find_def(m, entry)) < 0)
		return NULL;
	if (!(ar = tc_arena_new()))
		goto nomem;
	/* split "A,B" into names (in the arena) */
	if (wrt && *wrt) {
		char *p;
		size_t len = strlen(wrt);
		if (!(copy = tc_arena_strdup(ar, wrt)) ||
			!(names = tc_arena_alloc(ar, (len / 2 + 2) * sizeof(*names))))
			goto nomem;
		for (p = copy;;) {
			char *c = strchr(p, ',');
			if (c)
				*c = '\0';
			if (!*p) {
				tc_rt_set_error(m->ctx, "tc_module_grad: empty name in '%s'", wrt);
				goto error;
			}
			names[n++] = p;
			if (!c)
				break;
			p = c + 1;
		}
	}
	tc_diags_init(&d, m->src);
	g = tc_grad_derive(ar, m->prog->defs[i], names, n, !!(flags & TC_GRAD_SAVES), &fwd, &d);
	if (!g) {
		if (d.nerrors && !d.oom)
			tc_rt_set_error_diags(m->ctx, &d);
		else
			tc_rt_set_error(m->ctx, "out of memory while differentiating '%s'", entry);
		tc_diags_clear(&d);
		goto error;
	}
	tc_diags_clear(&d);
	tc_buf_init(&b);
	if (fwd)
		tc_ast_print_source(fwd, NULL, NULL, &b);
	tc_ast_print_source(g, NULL, NULL, &b);
	if (!(text = tc_buf_take(&b)))
		goto nomem;
	tc_arena_free(ar);
	return text;
nomem:
	tc_rt_set_error(m->ctx, "out of memory");
error:
	tc_arena_free(ar);
	return NULL;
}
