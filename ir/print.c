/* The IR printer (tcomp emit --stage ir).  Domains are printed in isl's set
 * notation, which is what the polyhedral layer builds from them. */
#include "ir.h"

static const char *const op_names[] = {
	[TC_OP_ADD] = "+", [TC_OP_SUB] = "-", [TC_OP_MUL] = "*", [TC_OP_DIV] = "/",
	[TC_OP_MOD] = "%", [TC_OP_LT] = "<", [TC_OP_GT] = ">", [TC_OP_LE] = "<=",
	[TC_OP_GE] = ">=", [TC_OP_EQ] = "==", [TC_OP_NE] = "!=", [TC_OP_AND] = "&&",
	[TC_OP_OR] = "||",
};

static const char **param_names(const tc_ir_func *f, tc_arena *ar)
{
	const char **n = tc_arena_alloc(ar, (size_t)(f->nparams + 1) * sizeof(char *));
	int i;
	for (i = 0; n && i < f->nparams; i++)
		n[i] = f->params[i].name;
	return n;
}

static void print_expr(const tc_ir_func *f, const tc_ir_stmt *s, const tc_ir_expr *e,
	tc_buf *b)
{
	int i;
	switch (e->op) {
	case TC_OP_CONST:
		if (tc_dtype_is_float(e->type))
			tc_buf_printf(b, "%.9g:%s", e->c.f, tc_dtype_name(e->type));
		else if (tc_dtype_is_unsigned(e->type))
			tc_buf_printf(b, "%llu:%s", (unsigned long long)e->c.i, tc_dtype_name(e->type));
		else
			tc_buf_printf(b, "%lld:%s", (long long)e->c.i, tc_dtype_name(e->type));
		break;
	case TC_OP_INDEX:
		tc_buf_puts(b, s->vars[e->id].name);
		break;
	case TC_OP_SIZE:
		tc_buf_puts(b, f->params[e->id].name);
		break;
	case TC_OP_READ:
		tc_buf_puts(b, f->tensors[e->id].name);
		if (e->nargs) {
			tc_buf_putc(b, '[');
			for (i = 0; i < e->nargs; i++) {
				if (i)
					tc_buf_puts(b, ", ");
				print_expr(f, s, e->args[i], b);
			}
			tc_buf_putc(b, ']');
		}
		break;
	case TC_OP_CAST:
		tc_buf_printf(b, "%s(", tc_dtype_name(e->type));
		print_expr(f, s, e->args[0], b);
		tc_buf_putc(b, ')');
		break;
	case TC_OP_NEG:
	case TC_OP_NOT:
		tc_buf_puts(b, e->op == TC_OP_NEG ? "-" : "!");
		print_expr(f, s, e->args[0], b);
		break;
	case TC_OP_SELECT:
		tc_buf_putc(b, '(');
		print_expr(f, s, e->args[0], b);
		tc_buf_puts(b, " ? ");
		print_expr(f, s, e->args[1], b);
		tc_buf_puts(b, " : ");
		print_expr(f, s, e->args[2], b);
		tc_buf_putc(b, ')');
		break;
	case TC_OP_CALL:
		tc_buf_printf(b, "%s(", tc_builtins[e->id].name);
		for (i = 0; i < e->nargs; i++) {
			if (i)
				tc_buf_puts(b, ", ");
			print_expr(f, s, e->args[i], b);
		}
		tc_buf_putc(b, ')');
		break;
	default:
		tc_buf_putc(b, '(');
		print_expr(f, s, e->args[0], b);
		tc_buf_printf(b, " %s ", op_names[e->op]);
		print_expr(f, s, e->args[1], b);
		tc_buf_putc(b, ')');
		break;
	}
}

void tc_ir_print_expr(__tc_keep const tc_ir_func *f, __tc_keep const tc_ir_stmt *s,
	__tc_keep const tc_ir_expr *e, __tc_keep tc_buf *b)
{
	print_expr(f, s, e, b);
}

static void print_tensor(const tc_ir_func *f, const tc_ir_tensor *t, const char **pn,
	tc_buf *b)
{
	int i;
	static const char *const kinds[] = {"input", "output", "temp"};
	tc_buf_printf(b, "  %-6s %s: %s(", kinds[t->kind], t->name, tc_dtype_name(t->dtype));
	for (i = 0; i < t->ndim; i++) {
		if (i)
			tc_buf_puts(b, ", ");
		tc_sx_print(t->ext[i], pn, NULL, b);
	}
	tc_buf_putc(b, ')');
	if (t->panel)
		tc_buf_printf(b, " in panels of %d columns", t->panel);
	tc_buf_putc(b, '\n');
}

void tc_ir_print(__tc_keep const tc_ir_func *f, __tc_keep tc_buf *b)
{
	tc_arena *ar = tc_arena_new();
	const char **pn;
	int i, j;

	if (!ar || !(pn = param_names(f, ar))) {
		b->oom = 1;
		tc_arena_free(ar);
		return;
	}
	tc_buf_printf(b, "func %s\n", f->name);
	tc_buf_puts(b, "  sizes:");
	for (i = 0; i < f->nparams; i++)
		tc_buf_printf(b, " %s=%s.%d", f->params[i].name,
			f->tensors[f->params[i].tensor].name, f->params[i].dim);
	tc_buf_putc(b, '\n');
	for (i = 0; i < f->ntensors; i++)
		print_tensor(f, &f->tensors[i], pn, b);
	for (i = 0; i < f->nstmts; i++) {
		const tc_ir_stmt *s = &f->stmts[i];
		const char **vn = tc_arena_alloc(ar, (size_t)(s->nvars + 1) * sizeof(char *));
		if (!vn) {
			b->oom = 1;
			break;
		}
		for (j = 0; j < s->nvars; j++)
			vn[j] = s->vars[j].name;
		tc_buf_printf(b, "  S%d: %s", i, f->tensors[s->tensor].name);
		if (s->sub) { /* a scatter: the subscripts of the element */
			tc_buf_putc(b, '[');
			for (j = 0; j < f->tensors[s->tensor].ndim; j++) {
				tc_buf_puts(b, j ? ", " : "");
				print_expr(f, s, s->sub[j], b);
			}
			tc_buf_putc(b, ']');
		} else if (s->nlhs) {
			tc_buf_putc(b, '[');
			for (j = 0; j < s->nlhs; j++)
				tc_buf_printf(b, "%s%s", j ? ", " : "", vn[j]);
			tc_buf_putc(b, ']');
		}
		tc_buf_printf(b, " %s ", tc_red_name(s->red, s->init));
		print_expr(f, s, s->rhs, b);
		tc_buf_puts(b, "\n      domain: [");
		for (j = 0; j < f->nparams; j++)
			tc_buf_printf(b, "%s%s", j ? ", " : "", pn[j]);
		tc_buf_printf(b, "] -> { S%d[", i);
		for (j = 0; j < s->nvars; j++)
			tc_buf_printf(b, "%s%s", j ? ", " : "", vn[j]);
		tc_buf_puts(b, "]");
		for (j = 0; j < s->nvars; j++) {
			tc_buf_puts(b, j ? " and " : " : ");
			tc_sx_print(s->vars[j].lo, pn, vn, b);
			tc_buf_printf(b, " <= %s < ", vn[j]);
			tc_sx_print(s->vars[j].hi, pn, vn, b);
		}
		tc_buf_puts(b, " }\n");
		if (s->guard) { /* pad's bounds tests restrict the update (ir/lower.c) */
			tc_buf_puts(b, "      guard: ");
			print_expr(f, s, s->guard, b);
			tc_buf_putc(b, '\n');
		}
		if (s->sub) { /* a scatter: the indices that are not left-hand names */
			int n = 0;
			for (j = 0; j < s->nvars; j++)
				if (s->vars[j].is_reduction)
					tc_buf_printf(b, "%s%s", n++ ? ", " : "      scatter over: ",
						vn[j]);
			if (n)
				tc_buf_putc(b, '\n');
			continue;
		}
		for (j = s->nlhs; j < s->nvars; j++)
			if (j == s->nlhs)
				tc_buf_printf(b, "      reduction over: %s", vn[j]);
			else
				tc_buf_printf(b, ", %s", vn[j]);
		if (s->nvars > s->nlhs)
			tc_buf_putc(b, '\n');
	}
	for (i = 0; i < f->nchecks; i++)
		tc_buf_printf(b, "  check %d:%d: %s\n", f->checks[i].loc.line,
			f->checks[i].loc.col, f->checks[i].msg);
	tc_arena_free(ar);
}
