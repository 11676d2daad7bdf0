/* Canonical form of a def: every identifier renamed in order of first
 * appearance, types spelled canonically (float -> float32), layout and
 * parentheses normalised.  Two defs that differ only in names (and
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

static const char *rename_name(void *ud, const char *name)
{
	renamer *r = ud;
	char tmp[24];
	char *to;
	int i;
	if (tc_builtin_lookup(name, (int)strlen(name)) >= 0)
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

/* Forget the names after the first n (a statement's indices and lets). */
static void forget(renamer *r, int n)
{
	r->from.n = r->to.n = n;
}

static void print_decl(renamer *r, const tc_decl *d, tc_buf *b)
{
	int i;
	if (d->dtype != TC_T_NONE)
		tc_buf_printf(b, "%s", tc_dtype_name(d->dtype));
	if (d->has_shape) {
		tc_buf_putc(b, '(');
		for (i = 0; i < d->ndims; i++) {
			if (i)
				tc_buf_putc(b, ',');
			if (d->dims[i].name)
				tc_buf_puts(b, rename_name(r, d->dims[i].name));
			else
				tc_buf_printf(b, "%lld", (long long)d->dims[i].value);
		}
		tc_buf_putc(b, ')');
	}
	if (d->dtype != TC_T_NONE)
		tc_buf_putc(b, ' ');
	tc_buf_puts(b, rename_name(r, d->name));
}

void tc_ir_canonical(const tc_def *def, tc_buf *b)
{
	renamer *r = tc_calloc(1, sizeof(*r));
	int i, j;

	if (!r || !(r->ar = tc_arena_new())) {
		tc_free(r);
		b->oom = 1;
		return;
	}
	tc_buf_puts(b, "def f(");
	for (i = 0; i < def->nparams; i++) {
		if (i)
			tc_buf_puts(b, ", ");
		print_decl(r, &def->params[i], b);
	}
	tc_buf_puts(b, ") -> (");
	for (i = 0; i < def->nrets; i++) {
		if (i)
			tc_buf_puts(b, ", ");
		print_decl(r, &def->rets[i], b);
	}
	tc_buf_puts(b, ") {\n");
	for (i = 0; i < def->nstmts; i++) {
		const tc_stmt *s = def->stmts[i];
		/* temporaries get global names; indices and lets are statement-local */
		rename_name(r, s->lhs);
		r->nglobal = r->from.n;
		tc_buf_printf(b, "  %s", rename_name(r, s->lhs));
		if (s->nidx) {
			tc_buf_putc(b, '(');
			for (j = 0; j < s->nidx; j++)
				tc_buf_printf(b, "%s%s", j ? "," : "", rename_name(r, s->idx[j]));
			tc_buf_putc(b, ')');
		}
		tc_buf_printf(b, " %s ", tc_red_name(s->red, s->init));
		/* lets first get names so uses print the same wherever they are */
		for (j = 0; j < s->nwhere; j++)
			if (s->where[j].kind == TC_WHERE_LET)
				rename_name(r, s->where[j].name);
		tc_ast_print_expr_renamed(s->rhs, rename_name, r, b);
		for (j = 0; j < s->nwhere; j++) {
			const tc_where *w = &s->where[j];
			tc_buf_puts(b, j ? ", " : " where ");
			switch (w->kind) {
			case TC_WHERE_RANGE:
				tc_buf_printf(b, "%s in ", rename_name(r, w->name));
				tc_ast_print_expr_renamed(w->lo, rename_name, r, b);
				tc_buf_putc(b, ':');
				tc_ast_print_expr_renamed(w->hi, rename_name, r, b);
				break;
			case TC_WHERE_LET:
				tc_buf_printf(b, "%s = ", rename_name(r, w->name));
				tc_ast_print_expr_renamed(w->val, rename_name, r, b);
				break;
			case TC_WHERE_EXISTS:
				tc_buf_puts(b, "exists ");
				tc_ast_print_expr_renamed(w->val, rename_name, r, b);
				break;
			}
		}
		tc_buf_putc(b, '\n');
		forget(r, r->nglobal); /* the statement's local names */
	}
	tc_buf_puts(b, "}\n");
	if (r->oom)
		b->oom = 1;
	tc_vec_free(&r->from);
	tc_vec_free(&r->to);
	tc_arena_free(r->ar);
	tc_free(r);
}

uint64_t tc_ir_hash(const tc_def *def)
{
	tc_buf b;
	uint64_t h = TC_HASH_INIT;
	tc_buf_init(&b);
	tc_ir_canonical(def, &b);
	if (b.s)
		h = tc_hash_bytes(h, b.s, b.len);
	tc_buf_free(&b);
	return h;
}
