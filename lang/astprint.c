/* Printing the AST: defs and expressions as .tc source text (the one printer
 * of .tc syntax: plain, or through a renamer such as the canonical form's),
 * defs as an indented tree with the results of semantic analysis, and
 * signatures with inferred shapes. */
#include "ast.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* name as the renamer spells it, or as written without one */
/* The shortest decimal text of v (%.Ng with the least N that reads back as
 * v, at least 9: a literal written with up to 15 significant digits prints
 * as written, and a float64 constant keeps every digit it needs). */
static void shortest(char *buf, size_t n, double v)
{
	int p;
	for (p = 9; p < 17; p++) {
		snprintf(buf, n, "%.*g", p, v);
		if (strtod(buf, NULL) == v)
			return;
	}
	snprintf(buf, n, "%.17g", v);
}

static const char *spell(tc_rename_fn rn, void *ud, tc_name_kind kind, const char *name)
{
	return rn ? rn(ud, kind, name) : name;
}

static void print_expr(const tc_expr *e, tc_rename_fn rn, void *ud, tc_buf *b)
{
	int i;
	switch (e->kind) {
	case TC_AST_INT:
		tc_buf_printf(b, "%lld", (long long)e->ival);
		break;
	case TC_AST_FLOAT: {
		char tmp[64];
		shortest(tmp, sizeof(tmp), e->fval);
		tc_buf_puts(b, tmp);
		/* keep it a float literal when it prints like an integer */
		if (!strpbrk(tmp, ".eEn"))
			tc_buf_puts(b, ".0");
		break;
	}
	case TC_AST_IDENT:
		tc_buf_puts(b, spell(rn, ud, TC_NAME_USE, e->name));
		break;
	case TC_AST_CALL:
		tc_buf_puts(b, spell(rn, ud, TC_NAME_USE, e->name));
		tc_buf_putc(b, '(');
		for (i = 0; i < e->nargs; i++) {
			if (i)
				tc_buf_puts(b, ", ");
			print_expr(e->args[i], rn, ud, b);
		}
		tc_buf_putc(b, ')');
		break;
	case TC_AST_CAST:
		tc_buf_printf(b, "%s(", tc_dtype_name(e->cast_type));
		print_expr(e->args[0], rn, ud, b);
		tc_buf_putc(b, ')');
		break;
	case TC_AST_UNARY:
		tc_buf_puts(b, tc_ast_op_name(e->op));
		if (e->args[0]->kind == TC_AST_BINARY || e->args[0]->kind == TC_AST_TERNARY ||
			e->args[0]->kind == TC_AST_UNARY) {
			tc_buf_putc(b, '(');
			print_expr(e->args[0], rn, ud, b);
			tc_buf_putc(b, ')');
		} else {
			print_expr(e->args[0], rn, ud, b);
		}
		break;
	case TC_AST_BINARY:
		for (i = 0; i < 2; i++) {
			const tc_expr *a = e->args[i];
			int paren = a->kind == TC_AST_BINARY || a->kind == TC_AST_TERNARY;
			if (i)
				tc_buf_printf(b, " %s ", tc_ast_op_name(e->op));
			if (paren)
				tc_buf_putc(b, '(');
			print_expr(a, rn, ud, b);
			if (paren)
				tc_buf_putc(b, ')');
		}
		break;
	case TC_AST_TERNARY:
		for (i = 0; i < 3; i++) {
			const tc_expr *a = e->args[i];
			int paren = a->kind == TC_AST_TERNARY;
			if (i)
				tc_buf_puts(b, i == 1 ? " ? " : " : ");
			if (paren)
				tc_buf_putc(b, '(');
			print_expr(a, rn, ud, b);
			if (paren)
				tc_buf_putc(b, ')');
		}
		break;
	}
}

void tc_ast_print_expr(__tc_keep const tc_expr *e, __tc_keep tc_buf *b)
{
	print_expr(e, NULL, NULL, b);
}

static const char *const ref_names[] = {
	[TC_REF_NONE] = "", [TC_REF_INDEX] = "index", [TC_REF_SIZE] = "size",
	[TC_REF_TENSOR] = "read", [TC_REF_BUILTIN] = "builtin", [TC_REF_LET] = "let",
	[TC_REF_PAD] = "pad",
};

static const char *const kind_names[] = {
	[TC_AST_INT] = "Int", [TC_AST_FLOAT] = "Float", [TC_AST_IDENT] = "Ident",
	[TC_AST_CALL] = "Call", [TC_AST_CAST] = "Cast", [TC_AST_UNARY] = "Unary",
	[TC_AST_BINARY] = "Binary", [TC_AST_TERNARY] = "Ternary",
};

/* One node per line: kind, detail, location, and type when sema ran. */
static void print_tree(const tc_expr *e, int depth, tc_buf *b)
{
	int i;
	tc_buf_printf(b, "%*s%s", 2 * depth, "", kind_names[e->kind]);
	switch (e->kind) {
	case TC_AST_INT: tc_buf_printf(b, " %lld", (long long)e->ival); break;
	case TC_AST_FLOAT: {
		char tmp[64];
		shortest(tmp, sizeof(tmp), e->fval);
		tc_buf_printf(b, " %s", tmp);
		break;
	}
	case TC_AST_IDENT:
	case TC_AST_CALL:
		tc_buf_printf(b, " %s", e->name);
		if (e->ref)
			tc_buf_printf(b, " [%s]", ref_names[e->ref]);
		break;
	case TC_AST_CAST: tc_buf_printf(b, " %s", tc_dtype_name(e->cast_type)); break;
	case TC_AST_UNARY:
	case TC_AST_BINARY: tc_buf_printf(b, " '%s'", tc_ast_op_name(e->op)); break;
	case TC_AST_TERNARY: break;
	}
	tc_buf_printf(b, " @%d:%d", e->loc.line, e->loc.col);
	if (e->type != TC_T_NONE)
		tc_buf_printf(b, " : %s%s", tc_dtype_name(e->type), e->guarded ? " (guarded)" : "");
	tc_buf_putc(b, '\n');
	for (i = 0; i < e->nargs; i++)
		print_tree(e->args[i], depth + 1, b);
}

/* A parameter or return value as written, e.g. "float32(M,K) A" or "C". */
static void print_decl(const tc_decl *d, tc_rename_fn rn, void *ud, tc_buf *b)
{
	int i;
	if (d->dtype != TC_T_NONE)
		tc_buf_printf(b, "%s", tc_dtype_name(d->dtype));
	if (d->has_shape) {
		tc_buf_putc(b, '(');
		for (i = 0; i < d->ndims; i++) {
			if (i)
				tc_buf_putc(b, ',');
			if (d->dims[i].expr)
				print_expr(d->dims[i].expr, rn, ud, b);
			else if (d->dims[i].name)
				tc_buf_puts(b, spell(rn, ud, TC_NAME_GLOBAL, d->dims[i].name));
			else
				tc_buf_printf(b, "%lld", (long long)d->dims[i].value);
		}
		tc_buf_putc(b, ')');
	}
	if (d->dtype != TC_T_NONE)
		tc_buf_putc(b, ' ');
	tc_buf_puts(b, spell(rn, ud, TC_NAME_GLOBAL, d->name));
}

/* One statement on a line of its own: "  O(i,j) +=! rhs where clause, ...". */
static void print_stmt(const tc_stmt *s, tc_rename_fn rn, void *ud, tc_buf *b)
{
	int j;
	tc_buf_printf(b, "  %s", spell(rn, ud, TC_NAME_GLOBAL, s->lhs));
	if (s->nidx) {
		tc_buf_putc(b, '(');
		for (j = 0; j < s->nidx; j++) {
			tc_buf_puts(b, j ? "," : "");
			if (s->sub && s->sub[j]) /* a gather: its names are uses */
				print_expr(s->sub[j], rn, ud, b);
			else
				tc_buf_puts(b, spell(rn, ud, TC_NAME_LOCAL, s->idx[j]));
		}
		tc_buf_putc(b, ')');
	}
	tc_buf_printf(b, " %s ", tc_red_name(s->red, s->init));
	/* lets are announced before the right side, whose uses of them come
	 * first in the text (see tc_ast_print_source) */
	if (rn)
		for (j = 0; j < s->nwhere; j++)
			if (s->where[j].kind == TC_WHERE_LET)
				rn(ud, TC_NAME_LOCAL, s->where[j].name);
	print_expr(s->rhs, rn, ud, b);
	for (j = 0; j < s->nwhere; j++) {
		const tc_where *w = &s->where[j];
		tc_buf_puts(b, j ? ", " : " where ");
		switch (w->kind) {
		case TC_WHERE_RANGE:
			tc_buf_printf(b, "%s in ", spell(rn, ud, TC_NAME_LOCAL, w->name));
			print_expr(w->lo, rn, ud, b);
			tc_buf_putc(b, ':');
			print_expr(w->hi, rn, ud, b);
			break;
		case TC_WHERE_LET:
			tc_buf_printf(b, "%s = ", spell(rn, ud, TC_NAME_LOCAL, w->name));
			print_expr(w->val, rn, ud, b);
			break;
		case TC_WHERE_EXISTS:
			tc_buf_puts(b, "exists ");
			print_expr(w->val, rn, ud, b);
			break;
		}
	}
	tc_buf_putc(b, '\n');
}

void tc_ast_print_source(__tc_keep const tc_def *def, tc_rename_fn rn, __tc_keep void *ud,
	__tc_keep tc_buf *b)
{
	int i;
	tc_buf_printf(b, "def %s(", spell(rn, ud, TC_NAME_DEF, def->name));
	for (i = 0; i < def->nparams; i++) {
		if (i)
			tc_buf_puts(b, ", ");
		print_decl(&def->params[i], rn, ud, b);
	}
	tc_buf_puts(b, ") -> (");
	for (i = 0; i < def->nrets; i++) {
		if (i)
			tc_buf_puts(b, ", ");
		print_decl(&def->rets[i], rn, ud, b);
	}
	tc_buf_puts(b, ") {\n");
	for (i = 0; i < def->nstmts; i++)
		print_stmt(def->stmts[i], rn, ud, b);
	tc_buf_puts(b, "}\n");
}

void tc_ast_print_def(__tc_keep const tc_def *def, __tc_keep tc_buf *b)
{
	int i, j;
	tc_buf_printf(b, "Def %s @%d:%d\n", def->name, def->loc.line, def->loc.col);
	for (i = 0; i < def->nparams; i++) {
		tc_buf_puts(b, "  Param ");
		print_decl(&def->params[i], NULL, NULL, b);
		tc_buf_putc(b, '\n');
	}
	for (i = 0; i < def->nrets; i++) {
		tc_buf_puts(b, "  Return ");
		print_decl(&def->rets[i], NULL, NULL, b);
		tc_buf_putc(b, '\n');
	}
	for (i = 0; i < def->nstmts; i++) {
		const tc_stmt *s = def->stmts[i];
		tc_buf_printf(b, "  Stmt %s(", s->lhs);
		for (j = 0; j < s->nidx; j++) {
			tc_buf_puts(b, j ? "," : "");
			if (s->sub && s->sub[j])
				print_expr(s->sub[j], NULL, NULL, b);
			else
				tc_buf_puts(b, s->idx[j]);
		}
		tc_buf_printf(b, ") %s @%d:%d\n", tc_red_name(s->red, s->init), s->loc.line,
			s->loc.col);
		for (j = 0; s->sub && j < s->nidx; j++)
			if (s->sub[j]) { /* a gathered subscript's tree */
				tc_buf_printf(b, "    Sub %d\n", j);
				print_tree(s->sub[j], 3, b);
			}
		print_tree(s->rhs, 2, b);
		for (j = 0; j < s->nwhere; j++) {
			const tc_where *w = &s->where[j];
			switch (w->kind) {
			case TC_WHERE_RANGE:
				tc_buf_printf(b, "    Where %s in\n", w->name);
				print_tree(w->lo, 3, b);
				print_tree(w->hi, 3, b);
				break;
			case TC_WHERE_LET:
				tc_buf_printf(b, "    Let %s =\n", w->name);
				print_tree(w->val, 3, b);
				break;
			case TC_WHERE_EXISTS:
				tc_buf_puts(b, "    Exists\n");
				print_tree(w->val, 3, b);
				break;
			}
		}
		if (s->equiv) {
			tc_buf_puts(b, "    Equiv\n");
			print_tree(s->equiv, 3, b);
		}
		if (def->ok)
			for (j = 0; j < s->nvars; j++) {
				tc_buf_printf(b, "    %s %s in [", s->vars[j].is_reduction ? "Reduce" : "Index",
					s->vars[j].name);
				tc_sx_print(s->vars[j].lo, def->sizes, NULL, b);
				tc_buf_puts(b, ", ");
				tc_sx_print(s->vars[j].hi, def->sizes, NULL, b);
				tc_buf_puts(b, ")\n");
			}
	}
}

static void print_tensor_type(const tc_def *def, const tc_tensor_info *t, tc_buf *b)
{
	int i;
	tc_buf_puts(b, tc_dtype_name(t->dtype));
	if (t->ndim > 0) {
		tc_buf_putc(b, '(');
		for (i = 0; i < t->ndim; i++) {
			if (i)
				tc_buf_putc(b, ',');
			tc_sx_print(t->ext[i], def->sizes, NULL, b);
		}
		tc_buf_putc(b, ')');
	}
	tc_buf_printf(b, " %s", t->name);
}

void tc_def_signature(__tc_keep const tc_def *def, __tc_keep tc_buf *b)
{
	int i;
	tc_buf_printf(b, "def %s(", def->name);
	for (i = 0; i < def->ninputs; i++) {
		if (i)
			tc_buf_puts(b, ", ");
		print_tensor_type(def, &def->tensors[i], b);
	}
	tc_buf_puts(b, ") -> (");
	for (i = 0; i < def->noutputs; i++) {
		if (i)
			tc_buf_puts(b, ", ");
		print_tensor_type(def, &def->tensors[def->ninputs + i], b);
	}
	tc_buf_puts(b, ")");
	for (i = def->ninputs + def->noutputs; i < def->ntensors; i++) {
		tc_buf_puts(b, i == def->ninputs + def->noutputs ? "  # temporaries: " : ", ");
		print_tensor_type(def, &def->tensors[i], b);
	}
}
