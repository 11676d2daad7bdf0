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

/* Whether tensor t of f has no elements at the bound sizes (a zero extent);
 * inputs' shapes come from inputs. */
static int no_elements(const tc_ir_func *f, int t, const tc_tensor *inputs, int ninputs,
	const int64_t *params, int *dim)
{
	int k;
	for (k = 0; k < f->tensors[t].ndim; k++) {
		int64_t v = -1;
		if (t < ninputs)
			v = inputs[t].shape[k];
		else if (tc_sx_eval(f->tensors[t].ext[k], params, NULL, &v) < 0)
			continue;
		if (v == 0) {
			*dim = k;
			return 1;
		}
	}
	return 0;
}

/* The first read in e of a tensor with no elements, or NULL. */
static const tc_ir_expr *empty_read(const tc_ir_func *f, const tc_ir_expr *e,
	const tc_tensor *inputs, int ninputs, const int64_t *params, int *dim)
{
	int i;
	if (e->op == TC_OP_READ && no_elements(f, e->id, inputs, ninputs, params, dim))
		return e;
	for (i = 0; i < e->nargs; i++) {
		const tc_ir_expr *r = empty_read(f, e->args[i], inputs, ninputs, params, dim);
		if (r)
			return r;
	}
	return NULL;
}

/* With a size of 0, ranges bounded by it are empty and so are the tensors
 * whose extents it gives.  Range inference proved reads in bounds assuming
 * sizes of at least 1, so a statement that still runs (every index range
 * non-empty, or not evaluable here) must read no tensor without elements:
 * O(i) = A(i) + B(0) with B empty and A not.  Such a read is an error at
 * its location. */
static tc_stat empty_reads(const tc_ir_func *f, const tc_tensor *inputs, int ninputs,
	const int64_t *params, tc_diags *d)
{
	int s, v, st = TC_OK;
	for (s = 0; s < f->nstmts; s++) {
		const tc_ir_stmt *x = &f->stmts[s];
		const tc_ir_expr *r;
		int runs = 1, dim = 0;
		for (v = 0; v < x->nvars && runs; v++) {
			int64_t lo, hi;
			if (tc_ir_var_range(&x->vars[v], params, &lo, &hi) && hi <= lo)
				runs = 0;
		}
		r = runs ? empty_read(f, x->rhs, inputs, ninputs, params, &dim) : NULL;
		for (v = 0; runs && !r && x->sub && v < f->tensors[x->tensor].ndim; v++)
			r = empty_read(f, x->sub[v], inputs, ninputs, params, &dim); /* a scatter's gathers */
		if (!r)
			continue;
		tc_error(d, r->loc,
			"for these input sizes, '%s' has no elements (dimension %d is 0) but this statement reads it for a non-empty range of its indices",
			f->tensors[r->id].name, dim);
		st = TC_ERR;
	}
	return st;
}

tc_stat tc_ir_bind(__tc_keep const tc_ir_func *f, __tc_keep const tc_tensor *inputs, int ninputs,
	__tc_keep int64_t *params, __tc_keep tc_diags *d)
{
	int i, k, ok = 1, zero = 0;
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
			if (v < 0) {
				tc_error(d, noloc(),
					"dimension %d of input '%s' is %lld; sizes must not be negative",
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
	/* extent expressions (float(N - K + 1) d_O), once every size is bound */
	for (i = 0; ok && i < ninputs; i++) {
		const tc_ir_tensor *t = &f->tensors[i];
		for (k = 0; k < t->ndim; k++) {
			const tc_sexpr *e = t->ext[k];
			int64_t want;
			if (e->kind == TC_SX_PARAM || e->kind == TC_SX_CONST)
				continue;
			if (tc_sx_eval(e, params, NULL, &want) < 0 || want != inputs[i].shape[k]) {
				tc_buf b;
				tc_buf_init(&b);
				describe_decl(f, t, &b);
				tc_error(d, noloc(), "dimension %d of input '%s' (declared %s %s) must be "
					"%lld but is %lld", k, t->name, b.s ? b.s : "?", t->name,
					(long long)want, (long long)inputs[i].shape[k]);
				tc_buf_free_diag(&b, d);
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
	/* every extent of every tensor must be a valid size, and every tensor's
	 * bytes must be countable in int64 (generated code and the interpreter
	 * compute element offsets in int64) */
	for (i = 0; ok && i < f->ntensors; i++) {
		tc_tensor t;
		t.dtype = f->tensors[i].dtype;
		t.ndim = f->tensors[i].ndim;
		if (i < ninputs)
			memcpy(t.shape, inputs[i].shape, sizeof(t.shape));
		else if (tc_ir_shape(f, i, params, t.shape, d) < 0) {
			ok = 0;
			break;
		}
		if (tc_ir_tensor_bytes(&t) > (size_t)INT64_MAX) {
			tc_buf b;
			tc_buf_init(&b);
			for (k = 0; k < t.ndim; k++)
				tc_buf_printf(&b, "%s%lld", k ? " x " : "", (long long)t.shape[k]);
			tc_error(d, i < ninputs ? noloc() : f->tensors[i].loc,
				"for these input sizes, '%s' would have %s elements of %d bytes, more than 2^63 - 1 bytes in all",
				f->tensors[i].name, b.s ? b.s : "?", tc_dtype_size(t.dtype));
			tc_buf_free_diag(&b, d);
			ok = 0;
		}
		zero |= tc_ir_tensor_bytes(&t) == 0;
	}
	if (ok && zero && empty_reads(f, inputs, ninputs, params, d) < 0)
		ok = 0;
	return ok ? TC_OK : TC_ERR;
}

tc_stat tc_ir_shape(__tc_keep const tc_ir_func *f, int t, __tc_keep const int64_t *params,
	__tc_keep int64_t *shape, __tc_keep tc_diags *d)
{
	const tc_ir_tensor *x = &f->tensors[t];
	int k;
	for (k = 0; k < x->ndim; k++) {
		shape[k] = 0;
		if (tc_sx_eval(x->ext[k], params, NULL, &shape[k]) < 0 || shape[k] < 0 ||
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
