/* Name lists and derived text of the def-to-def transformations (see
 * names.h). */
#include "names.h"

#include "error.h"

#include <string.h>

tc_stat tc_rt_split_names(__tc_keep tc_context *ctx, __tc_keep tc_arena *ar, const char *what,
	__tc_keep const char *list, const char ***names, int *n)
{
	char *copy, *p;
	size_t len;
	*names = NULL;
	*n = 0;
	if (!list || !*list)
		return TC_OK;
	len = strlen(list);
	/* at most len / 2 + 1 names: each but the last is followed by a comma */
	if (!(copy = tc_arena_strdup(ar, list)) ||
		!(*names = tc_arena_alloc(ar, (len / 2 + 2) * sizeof(**names)))) {
		tc_rt_set_error(ctx, "out of memory");
		return TC_ERR;
	}
	for (p = copy;;) {
		char *c = strchr(p, ',');
		if (c)
			*c = '\0';
		if (!*p) {
			tc_rt_set_error(ctx, "%s: empty name in '%s'", what, list);
			return TC_ERR;
		}
		(*names)[(*n)++] = p;
		if (!c)
			break;
		p = c + 1;
	}
	return TC_OK;
}

__tc_give char *tc_rt_derived_text(__tc_keep tc_context *ctx, __tc_keep tc_diags *d,
	const char *doing, const char *entry, __tc_keep tc_def *const *defs, int n)
{
	char *text;
	tc_buf b;
	if (!defs[n - 1]) {
		if (d->nerrors && !d->oom)
			tc_rt_set_error_diags(ctx, d);
		else
			tc_rt_set_error(ctx, "out of memory while %s '%s'", doing, entry);
		tc_diags_clear(d);
		return NULL;
	}
	tc_diags_clear(d);
	tc_buf_init(&b);
	for (int i = 0; i < n; i++)
		if (defs[i])
			tc_ast_print_source(defs[i], NULL, NULL, &b);
	if (!(text = tc_buf_take(&b)))
		tc_rt_set_error(ctx, "out of memory");
	return text;
}
