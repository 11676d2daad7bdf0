/* Name lists and derived text of the def-to-def transformations (see
 * names.h). */
#include "names.h"

#include "error.h"

#include <stdio.h>
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

/* Whether text, the printed result of a transformation, checks as the
 * front end checks a user's file (it must: what tcomp derives, tcomp
 * compiles).  0; or -1 with an internal error in ctx carrying the front
 * end's errors, located in the derived text ("<derived from ENTRY>"), or
 * out of memory. */
static int self_check(tc_context *ctx, const char *doing, const char *entry, const char *text)
{
	char name[160];
	tc_source *src;
	tc_arena *ar = NULL;
	tc_program *prog;
	tc_diags d;
	tc_buf b;
	int ok;
	snprintf(name, sizeof(name), "<derived from %s>", entry);
	if (!(src = tc_source_new(name, text, strlen(text))) || !(ar = tc_arena_new())) {
		tc_source_free(src);
		tc_rt_set_error(ctx, "out of memory while %s '%s'", doing, entry);
		return -1;
	}
	tc_diags_init(&d, src);
	prog = tc_parse(ar, src, &d);
	if (prog && tc_sema_check(prog, &d) < 0 && !d.nerrors)
		d.oom = 1;
	ok = prog && !d.oom && !tc_arena_failed(ar) && !d.nerrors;
	if (!ok && (!prog || d.oom || tc_arena_failed(ar) || !d.nerrors)) {
		tc_rt_set_error(ctx, "out of memory while %s '%s'", doing, entry);
	} else if (!ok) {
		tc_buf_init(&b);
		tc_diags_render(&d, 1u << TC_SEV_ERROR, &b);
		if (b.s && b.len && b.s[b.len - 1] == '\n')
			b.s[--b.len] = '\0'; /* the message's own newline ends it */
		tc_rt_set_error(ctx, "internal error: the text derived while %s '%s' does not "
			"check, a bug of tcomp's (please report it with the .tc file):\n%s",
			doing, entry, b.s && !b.oom ? b.s : "");
		tc_buf_free(&b);
	}
	tc_diags_clear(&d);
	tc_arena_free(ar);
	tc_source_free(src);
	return ok ? 0 : -1;
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
	else if (self_check(ctx, doing, entry, text) < 0) {
		tc_free(text);
		text = NULL;
	}
	return text;
}
