/* Canonical form of a def: the .tc printer (tc_ast_print_source) with a
 * renamer that names the def f and every size, tensor, index and let v0, v1,
 * ... in order of first appearance (indices and lets are local to their
 * statement).  With the printer's fixed spelling of types and numbers and its
 * fixed layout and parentheses, two defs that differ only in names (and
 * whitespace, comments, redundant parentheses) have the same canonical text
 * and hash, which is what the kernel cache keys on. */
#include "ir.h"

#include <stdio.h>
#include <string.h>

typedef struct renamer {
	tc_vec from, to; /* old and new names, in order of first appearance */
	tc_arena *ar;    /* holds the new names */
	int nglobal;     /* names of sizes and tensors: kept across statements */
	int oom;
} renamer;

static const char *rename_name(renamer *r, const char *name)
{
	char tmp[24];
	char *to;
	int i;
	if (tc_builtin_reserved(name, (int)strlen(name)))
		return name;
	for (i = r->from.n - 1; i >= 0; i--)
		if (!strcmp(r->from.v[i], name))
			return r->to.v[i];
	snprintf(tmp, sizeof(tmp), "v%d", r->from.n);
	to = tc_arena_strdup(r->ar, tmp);
	if (!to || tc_vec_push(&r->from, (void *)name) < 0) {
		r->oom = 1;
		return "?";
	}
	if (tc_vec_push(&r->to, to) < 0) {
		r->from.n--;
		r->oom = 1;
		return "?";
	}
	return to;
}

/* The tc_rename_fn of the canonical form.  A statement's first global name
 * (its left-hand tensor: a temporary gets a global name) ends the previous
 * statement, whose indices and lets are forgotten. */
static const char *canonical_name(void *ud, tc_name_kind kind, const char *name)
{
	renamer *r = ud;
	const char *to;
	if (kind == TC_NAME_DEF)
		return "f";
	if (kind == TC_NAME_GLOBAL)
		r->from.n = r->to.n = r->nglobal;
	to = rename_name(r, name);
	if (kind == TC_NAME_GLOBAL)
		r->nglobal = r->from.n;
	return to;
}

void tc_ir_canonical(__tc_keep const tc_def *def, __tc_keep tc_buf *b)
{
	renamer r;
	memset(&r, 0, sizeof(r));
	if (!(r.ar = tc_arena_new())) {
		b->oom = 1;
		return;
	}
	tc_ast_print_source(def, canonical_name, &r, b);
	if (r.oom)
		b->oom = 1;
	tc_vec_free(&r.from);
	tc_vec_free(&r.to);
	tc_arena_free(r.ar);
}

uint64_t tc_ir_hash(__tc_keep const tc_def *def)
{
	tc_buf b;
	uint64_t h = TC_HASH_INIT;
	tc_buf_init(&b);
	tc_ir_canonical(def, &b);
	if (b.s && !b.oom) /* out of memory: the empty text's hash, never a partial one's */
		h = tc_hash_bytes(h, b.s, b.len);
	tc_buf_free(&b);
	return h;
}
