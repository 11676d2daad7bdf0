/* tc_kernel_stats: the work of one run (floating-point operations and the
 * least memory traffic) counted from the IR at the kernel's shapes, for the
 * rates tcomp bench reports.  The definitions are in include/tcomp.h. */
#include "internal.h"

#include <string.h>

/* Points enumerated at most when bounds depend on outer indices. */
#define ENUM_BUDGET 10000000.0

/* Operations per point of e: + - * / and builtin calls, 1 each; subscripts
 * (the arguments of reads) are index arithmetic and not counted; of a ?:
 * the condition and the costlier branch. */
static double expr_ops(const tc_ir_expr *e)
{
	double n = 0, b, c;
	int i;
	switch (e->op) {
	case TC_OP_READ:
	case TC_OP_CONST:
	case TC_OP_INDEX:
	case TC_OP_SIZE:
		return 0;
	case TC_OP_SELECT:
		b = expr_ops(e->args[1]);
		c = expr_ops(e->args[2]);
		return expr_ops(e->args[0]) + (b > c ? b : c);
	case TC_OP_ADD:
	case TC_OP_SUB:
	case TC_OP_MUL:
	case TC_OP_DIV:
	case TC_OP_CALL:
		n = 1;
		break;
	default:
		break;
	}
	for (i = 0; i < e->nargs; i++)
		n += expr_ops(e->args[i]);
	return n;
}

/* Whether a bound of a variable after k depends on variable k. */
static int inner_depends(const tc_ir_stmt *s, int k)
{
	int j;
	for (j = k + 1; j < s->nvars; j++)
		if (tc_sx_mentions(s->vars[j].lo, TC_SX_VAR, k) ||
			tc_sx_mentions(s->vars[j].hi, TC_SX_VAR, k))
			return 1;
	return 0;
}

/* Points of variables k.. of s with the outer ones at vars[0..k); -1 when
 * a bound overflows or the enumeration would exceed *budget. */
static double count_points(const tc_ir_stmt *s, int k, const int64_t *params, int64_t *vars,
	double *budget)
{
	int64_t lo, hi, v;
	double total = 0, inner;
	if (k == s->nvars)
		return 1;
	if (tc_sx_eval(s->vars[k].lo, params, vars, &lo) < 0 ||
		tc_sx_eval(s->vars[k].hi, params, vars, &hi) < 0)
		return -1;
	if (hi <= lo)
		return 0;
	if (!inner_depends(s, k)) {
		vars[k] = lo; /* the inner count is the same for every value */
		inner = count_points(s, k + 1, params, vars, budget);
		return inner < 0 ? -1 : (double)(hi - lo) * inner;
	}
	*budget -= (double)hi - (double)lo;
	if (*budget < 0)
		return -1;
	for (v = lo; v < hi; v++) {
		vars[k] = v;
		inner = count_points(s, k + 1, params, vars, budget);
		if (inner < 0)
			return -1;
		total += inner;
	}
	return total;
}

int tc_kernel_stats(const tc_kernel *k, double *flops, double *bytes)
{
	const tc_ir_func *f;
	int i, d;
	if (!k)
		return -1;
	f = k->c->f;
	if (flops) {
		double total = 0, budget = ENUM_BUDGET;
		for (i = 0; i < f->nstmts && total >= 0; i++) {
			const tc_ir_stmt *s = &f->stmts[i];
			int64_t *vars = tc_calloc((size_t)s->nvars + 1, sizeof(int64_t));
			double pts = vars ? count_points(s, 0, k->c->params, vars, &budget) : -1;
			tc_free(vars);
			if (pts < 0)
				total = -1;
			else
				total += pts * (expr_ops(s->rhs) + (s->red != TC_RED_ASSIGN));
		}
		*flops = total;
	}
	if (bytes) {
		double total = 0;
		for (i = 0; i < f->ninputs + f->noutputs; i++) {
			double n = tc_dtype_size(k->c->shapes[i].dtype);
			for (d = 0; d < k->c->shapes[i].ndim; d++)
				n *= (double)k->c->shapes[i].shape[d];
			total += n;
		}
		*bytes = total;
	}
	return 0;
}
