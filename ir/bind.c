/* Binding a function to concrete input shapes: size parameters are read
 * from the inputs and checked for consistency, then the def's conditions on
 * sizes (from range inference) are evaluated. */
#include "ir.h"

#include <stdint.h>
#include <string.h>

static tc_loc noloc(void)
{
	tc_loc l;
	memset(&l, 0, sizeof(l));
	return l;
}

static void describe_decl(const tc_ir_func *f, const tc_ir_tensor *t, tc_buf *b)
{
	const char **pn = tc_malloc((size_t)(f->nparams + 1) * sizeof(char *));
	int i;
	if (!pn)
		return;
	for (i = 0; i < f->nparams; i++)
		pn[i] = f->params[i].name;
	tc_buf_puts(b, tc_dtype_name(t->dtype));
	tc_buf_putc(b, '(');
	for (i = 0; i < t->ndim; i++) {
		if (i)
			tc_buf_putc(b, ',');
		tc_sx_print(t->ext[i], pn, NULL, b);
	}
	tc_buf_putc(b, ')');
	tc_free(pn);
}

tc_stat tc_ir_bind(__tc_keep const tc_ir_func *f, __tc_keep const tc_tensor *inputs, int ninputs,
	__tc_keep int64_t *params, __tc_keep tc_diags *d)
{
	int i, k, ok = 1;
	int *from = tc_malloc((size_t)(f->nparams + 1) * 2 * sizeof(int));

	if (!from)
		return TC_ERR;
	for (i = 0; i < f->nparams; i++)
		from[2 * i] = -1;
	if (ninputs != f->ninputs) {
		tc_error(d, noloc(), "'%s' takes %d input%s but %d %s given", f->name,
			f->ninputs, f->ninputs == 1 ? "" : "s", ninputs, ninputs == 1 ? "was" : "were");
		tc_free(from);
		return TC_ERR;
	}
	for (i = 0; i < ninputs; i++) {
		const tc_ir_tensor *t = &f->tensors[i];
		const tc_tensor *x = &inputs[i];
		tc_buf b;
		tc_buf_init(&b);
		describe_decl(f, t, &b);
		if (x->dtype != t->dtype) {
			tc_error(d, noloc(), "input %d '%s' must have dtype %s (declared %s %s) but has %s",
				i, t->name, tc_dtype_name(t->dtype), b.s ? b.s : "?", t->name,
				tc_dtype_name(x->dtype));
			ok = 0;
		} else if (x->ndim != t->ndim) {
			tc_error(d, noloc(), "input %d '%s' must have rank %d (declared %s %s) but has rank %d",
				i, t->name, t->ndim, b.s ? b.s : "?", t->name, x->ndim);
			ok = 0;
		}
		tc_buf_free(&b);
		if (!ok)
			continue;
		for (k = 0; k < t->ndim; k++) {
			const tc_sexpr *e = t->ext[k];
			int64_t v = x->shape[k];
			if (v < 1) {
				tc_error(d, noloc(),
					"dimension %d of input '%s' is %lld; sizes must be at least 1",
					k, t->name, (long long)v);
				ok = 0;
			} else if (v > INT32_MAX) {
				tc_error(d, noloc(),
					"dimension %d of input '%s' is %lld; sizes must fit in int32",
					k, t->name, (long long)v);
				ok = 0;
			} else if (e->kind == TC_SX_PARAM) {
				int p = e->id;
				if (from[2 * p] < 0) {
					params[p] = v;
					from[2 * p] = i;
					from[2 * p + 1] = k;
				} else if (params[p] != v) {
					tc_error(d, noloc(),
						"size %s is %lld from %s (dimension %d) but %lld from %s (dimension %d)",
						f->params[p].name, (long long)params[p],
						f->tensors[from[2 * p]].name, from[2 * p + 1], (long long)v,
						t->name, k);
					ok = 0;
				}
			} else if (e->kind == TC_SX_CONST && e->c != v) {
				tc_error(d, noloc(), "dimension %d of input '%s' must be %lld but is %lld",
					k, t->name, (long long)e->c, (long long)v);
				ok = 0;
			}
		}
	}
	tc_free(from);
	if (!ok)
		return TC_ERR;
	for (i = 0; i < f->nchecks; i++) {
		int64_t v;
		if (tc_sx_eval(f->checks[i].e, params, NULL, &v) < 0 || v < 0 ||
			(f->checks[i].eq && v != 0)) {
			tc_buf b;
			int p, n = 0;
			tc_buf_init(&b);
			for (p = 0; p < f->nparams; p++) /* the sizes the condition names */
				if (tc_sx_mentions(f->checks[i].e, TC_SX_PARAM, p))
					tc_buf_printf(&b, "%s%s = %lld", n++ ? ", " : " (here ",
						f->params[p].name, (long long)params[p]);
			if (n)
				tc_buf_putc(&b, ')');
			tc_error(d, f->checks[i].loc, "for these input sizes, %s%s", f->checks[i].msg,
				b.s ? b.s : "");
			tc_buf_free_diag(&b, d);
			ok = 0;
		}
	}
	/* every extent of every tensor must be a valid size */
	for (i = f->ninputs; ok && i < f->ntensors; i++) {
		int64_t shape[TC_MAX_RANK];
		if (tc_ir_shape(f, i, params, shape, d) < 0)
			ok = 0;
	}
	return ok ? TC_OK : TC_ERR;
}

tc_stat tc_ir_shape(__tc_keep const tc_ir_func *f, int t, __tc_keep const int64_t *params,
	__tc_keep int64_t *shape, __tc_keep tc_diags *d)
{
	const tc_ir_tensor *x = &f->tensors[t];
	int k;
	for (k = 0; k < x->ndim; k++) {
		shape[k] = 0;
		if (tc_sx_eval(x->ext[k], params, NULL, &shape[k]) < 0 || shape[k] < 1 ||
			shape[k] > INT32_MAX) {
			tc_error(d, x->loc, "for these input sizes, dimension %d of '%s' would have extent %lld",
				k, x->name, (long long)shape[k]);
			return TC_ERR;
		}
	}
	return TC_OK;
}

size_t tc_ir_tensor_bytes(__tc_keep const tc_tensor *t)
{
	size_t n = (size_t)tc_dtype_size(t->dtype);
	int k;
	for (k = 0; k < t->ndim; k++)
		if (__builtin_mul_overflow(n, (size_t)t->shape[k], &n))
			return SIZE_MAX;
	return n;
}
