/* The reference interpreter (see interp.h for the contract).
 *
 * Values are held in a union: signed integers and bool sign-extended in i,
 * unsigned integers in u, floats in f (a double holding a value exactly
 * representable in the static type).  Every operation computes exactly (in
 * 64-bit integers or double, where float32/float16/bfloat16 +-*÷ of representable
 * operands are exact before one final rounding) and then rounds or wraps to
 * its static type, which gives IEEE results for floats and two's-complement
 * wrap-around for integers.
 *
 * Conversions from float to integer truncate toward zero and saturate at the
 * type's range, with NaN giving 0 (C leaves these undefined; tcomp defines
 * them, and every backend must match). */
#include "interp.h"
#include "half.h"

#include <float.h>
#include <math.h>
#include <string.h>

typedef union val {
	int64_t i;
	uint64_t u;
	double f;
} val;

typedef struct interp {
	const tc_ir_func *f;
	const int64_t *params;
	tc_tensor *t; /* all tensors of f */
	tc_diags *d;
	const tc_ir_stmt *s;
	const tc_ir_expr *fx, *fy; /* s's update as fma(fx, fy, acc) (contract), or NULL */
	int64_t *vars;
	int contract; /* fused multiply-adds (tc_ir_fma_of) */
	int failed;
} interp;

/* Round or wrap v (computed exactly) to type t. */
static val normalize(val v, tc_dtype t)
{
	switch (t) {
	case TC_T_BOOL: v.i = v.i != 0; break;
	case TC_T_I8: v.i = (int8_t)v.u; break;
	case TC_T_I16: v.i = (int16_t)v.u; break;
	case TC_T_I32: v.i = (int32_t)v.u; break;
	case TC_T_I64: break;
	case TC_T_U8: v.u = (uint8_t)v.u; break;
	case TC_T_U16: v.u = (uint16_t)v.u; break;
	case TC_T_U32: v.u = (uint32_t)v.u; break;
	case TC_T_U64: break;
	case TC_T_F16: v.f = tc_half_to_double(tc_half_from_double(v.f)); break;
	case TC_T_BF16: v.f = tc_bf16_to_double(tc_bf16_from_double(v.f)); break;
	case TC_T_F32: v.f = (double)(float)v.f; break;
	case TC_T_F64: break;
	default: break;
	}
	return v;
}

static double to_double(val v, tc_dtype t)
{
	if (tc_dtype_is_float(t))
		return v.f;
	if (tc_dtype_is_unsigned(t))
		return (double)v.u;
	return (double)v.i;
}

/* Saturating truncation of a double to an integer type. */
static val float_to_int(double x, tc_dtype t)
{
	val r;
	int bits = tc_dtype_bits(t);
	if (isnan(x)) {
		r.i = 0;
		return r;
	}
	x = trunc(x);
	if (tc_dtype_is_unsigned(t)) {
		double hi = ldexp(1, bits) - 1;
		r.u = x <= 0 ? 0 : x >= hi ? (bits == 64 ? UINT64_MAX : (uint64_t)hi) : (uint64_t)x;
	} else {
		double lo = -ldexp(1, bits - 1), hi = ldexp(1, bits - 1) - 1;
		r.i = x <= lo ? (int64_t)lo : x >= hi ? (bits == 64 ? INT64_MAX : (int64_t)hi)
						    : (int64_t)x;
	}
	return r;
}

static val convert(val v, tc_dtype from, tc_dtype to)
{
	val r;
	if (to == TC_T_BOOL) {
		r.i = tc_dtype_is_float(from) ? v.f != 0 : v.u != 0;
		return r;
	}
	if (to == TC_T_F32 && !tc_dtype_is_float(from)) { /* one rounding, as sitofp */
		r.f = tc_dtype_is_unsigned(from) ? (double)(float)v.u : (double)(float)v.i;
		return r;
	}
	if (to == TC_T_BF16 && !tc_dtype_is_float(from)) { /* one rounding */
		r.f = tc_bf16_to_double(tc_dtype_is_unsigned(from) ? tc_bf16_from_u64(v.u)
								   : tc_bf16_from_i64(v.i));
		return r;
	}
	if (tc_dtype_is_float(to)) {
		r.f = to_double(v, from);
		return normalize(r, to);
	}
	if (tc_dtype_is_float(from))
		return float_to_int(v.f, to);
	return normalize(v, to); /* integer to integer: wrap */
}

static val load(const tc_tensor *t, int64_t off)
{
	val v;
	const char *p = (const char *)t->data;
	switch (t->dtype) {
	case TC_T_BOOL: v.i = ((const uint8_t *)p)[off] != 0; break;
	case TC_T_I8: v.i = ((const int8_t *)p)[off]; break;
	case TC_T_I16: v.i = ((const int16_t *)p)[off]; break;
	case TC_T_I32: v.i = ((const int32_t *)p)[off]; break;
	case TC_T_I64: v.i = ((const int64_t *)p)[off]; break;
	case TC_T_U8: v.u = ((const uint8_t *)p)[off]; break;
	case TC_T_U16: v.u = ((const uint16_t *)p)[off]; break;
	case TC_T_U32: v.u = ((const uint32_t *)p)[off]; break;
	case TC_T_U64: v.u = ((const uint64_t *)p)[off]; break;
	case TC_T_F16: v.f = tc_half_to_double(((const uint16_t *)p)[off]); break;
	case TC_T_BF16: v.f = tc_bf16_to_double(((const uint16_t *)p)[off]); break;
	case TC_T_F32: v.f = ((const float *)p)[off]; break;
	case TC_T_F64: v.f = ((const double *)p)[off]; break;
	default: v.i = 0; break;
	}
	return v;
}

static void store(const tc_tensor *t, int64_t off, val v)
{
	char *p = (char *)t->data;
	switch (t->dtype) {
	case TC_T_BOOL: ((uint8_t *)p)[off] = v.i != 0; break;
	case TC_T_I8: ((int8_t *)p)[off] = (int8_t)v.i; break;
	case TC_T_I16: ((int16_t *)p)[off] = (int16_t)v.i; break;
	case TC_T_I32: ((int32_t *)p)[off] = (int32_t)v.i; break;
	case TC_T_I64: ((int64_t *)p)[off] = v.i; break;
	case TC_T_U8: ((uint8_t *)p)[off] = (uint8_t)v.u; break;
	case TC_T_U16: ((uint16_t *)p)[off] = (uint16_t)v.u; break;
	case TC_T_U32: ((uint32_t *)p)[off] = (uint32_t)v.u; break;
	case TC_T_U64: ((uint64_t *)p)[off] = v.u; break;
	case TC_T_F16: ((uint16_t *)p)[off] = tc_half_from_double(v.f); break;
	case TC_T_BF16: ((uint16_t *)p)[off] = tc_bf16_from_double(v.f); break;
	case TC_T_F32: ((float *)p)[off] = (float)v.f; break;
	case TC_T_F64: ((double *)p)[off] = v.f; break;
	default: break;
	}
}

/* The identity of a reduction operator in type t. */
static val identity(tc_red red, tc_dtype t)
{
	val v;
	int bits = tc_dtype_bits(t);
	v.u = 0;
	switch (red) {
	case TC_RED_ADD:
		if (tc_dtype_is_float(t))
			v.f = 0;
		break;
	case TC_RED_MUL:
		if (tc_dtype_is_float(t))
			v.f = 1;
		else
			v.i = 1;
		break;
	case TC_RED_MIN: /* the largest value */
		if (t == TC_T_F16)
			v.f = 65504;
		else if (t == TC_T_BF16)
			v.f = TC_BF16_MAX;
		else if (t == TC_T_F32)
			v.f = FLT_MAX;
		else if (t == TC_T_F64)
			v.f = DBL_MAX;
		else if (t == TC_T_BOOL)
			v.i = 1;
		else if (tc_dtype_is_unsigned(t))
			v.u = bits == 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
		else
			v.i = bits == 64 ? INT64_MAX : (INT64_C(1) << (bits - 1)) - 1;
		break;
	case TC_RED_MAX: /* the lowest value */
		if (t == TC_T_F16)
			v.f = -65504;
		else if (t == TC_T_BF16)
			v.f = -TC_BF16_MAX;
		else if (t == TC_T_F32)
			v.f = -FLT_MAX;
		else if (t == TC_T_F64)
			v.f = -DBL_MAX;
		else if (tc_dtype_is_signed(t))
			v.i = bits == 64 ? INT64_MIN : -(INT64_C(1) << (bits - 1));
		break;
	default:
		break;
	}
	return v;
}

static int64_t floordiv64(int64_t a, int64_t b)
{
	int64_t q, r;
	if (b == -1)
		return (int64_t)(0 - (uint64_t)a); /* wraps for INT64_MIN */
	q = a / b;
	r = a % b;
	return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
}

static int64_t floormod64(int64_t a, int64_t b)
{
	int64_t r;
	if (b == -1)
		return 0;
	r = a % b;
	return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

/* Compare a and b of type t: -1, 0, 1, or 2 when unordered (NaN). */
static int compare(val a, val b, tc_dtype t)
{
	if (tc_dtype_is_float(t)) {
		if (isnan(a.f) || isnan(b.f))
			return 2;
		return a.f < b.f ? -1 : a.f > b.f;
	}
	if (tc_dtype_is_unsigned(t))
		return a.u < b.u ? -1 : a.u > b.u;
	return a.i < b.i ? -1 : a.i > b.i;
}

/* min/max (and fmin/fmax): a NaN operand is ignored, as CUDA's fminf; on a
 * tie (including -0 against +0) the first operand, so that every backend
 * gives the same bits (C's fmin leaves the sign of a zero result open). */
static val minmax(val a, val b, tc_dtype t, int is_max)
{
	int c;
	if (tc_dtype_is_float(t)) {
		if (isnan(b.f))
			return a;
		if (isnan(a.f))
			return b;
		return (is_max ? a.f >= b.f : a.f <= b.f) ? a : b;
	}
	c = compare(a, b, t);
	return (is_max ? c >= 0 : c <= 0) ? a : b;
}

static void runtime_error(interp *I, tc_loc loc, const char *fmt, const char *detail)
{
	if (!I->failed)
		tc_error(I->d, loc, fmt, detail);
	I->failed = 1;
}

static val eval(interp *I, const tc_ir_expr *e);

/* fma(x, y, z) in type t (float32 or float64), rounded once. */
static val fused(tc_dtype t, double x, double y, double z)
{
	val r;
	r.u = 0;
	if (t == TC_T_F32)
		r.f = fmaf((float)x, (float)y, (float)z);
	else
		r.f = fma(x, y, z);
	return r;
}

/* A sum or difference with a product under the contract option. */
static val eval_fma(interp *I, const tc_ir_expr *e, const tc_ir_fma *m)
{
	double x, y, z = 0;
	if (!m->product_first) /* in the order written */
		z = eval(I, m->z).f;
	x = eval(I, m->x).f;
	y = eval(I, m->y).f;
	if (m->product_first)
		z = eval(I, m->z).f;
	return fused(e->type, m->neg_xy ? -x : x, y, m->neg_z ? -z : z);
}

static val arith(interp *I, const tc_ir_expr *e, val a, val b)
{
	val r;
	tc_dtype t = e->type;
	r.u = 0;
	if (tc_dtype_is_float(t)) {
		switch (e->op) {
		case TC_OP_ADD: r.f = a.f + b.f; break;
		case TC_OP_SUB: r.f = a.f - b.f; break;
		case TC_OP_MUL: r.f = a.f * b.f; break;
		case TC_OP_DIV: r.f = a.f / b.f; break;
		default: r.f = a.f - b.f * floor(a.f / b.f); break; /* floor modulo */
		}
		return normalize(r, t);
	}
	switch (e->op) {
	case TC_OP_ADD: r.u = a.u + b.u; break;
	case TC_OP_SUB: r.u = a.u - b.u; break;
	case TC_OP_MUL: r.u = a.u * b.u; break;
	default:
		if (b.u == 0) {
			runtime_error(I, e->loc, "division by zero in %s",
				e->op == TC_OP_DIV ? "'/'" : "'%'");
			return r;
		}
		if (tc_dtype_is_unsigned(t))
			r.u = e->op == TC_OP_DIV ? a.u / b.u : a.u % b.u;
		else
			r.i = e->op == TC_OP_DIV ? floordiv64(a.i, b.i) : floormod64(a.i, b.i);
		break;
	}
	return normalize(r, t);
}

/* The float16 value after a in the direction of b (a is a float16 value). */
static double half_nextafter(double a, double b)
{
	uint16_t h = tc_half_from_double(a);
	if (isnan(a) || isnan(b))
		return a + b;
	if (a == b)
		return b;
	if (a == 0) /* the smallest subnormal, with the sign of the direction */
		return b > 0 ? ldexp(1, -24) : -ldexp(1, -24);
	/* away from zero: the bit pattern grows; toward zero: it shrinks */
	h = (uint16_t)((b > a) == (a > 0) ? h + 1 : h - 1);
	return tc_half_to_double(h);
}

/* The bfloat16 value after a in the direction of b (a is a bfloat16
 * value), as half_nextafter. */
static double bf16_nextafter(double a, double b)
{
	uint16_t h = tc_bf16_from_double(a);
	if (isnan(a) || isnan(b))
		return a + b;
	if (a == b)
		return b;
	if (a == 0) /* the smallest subnormal, with the sign of the direction */
		return b > 0 ? ldexp(1, -133) : -ldexp(1, -133);
	h = (uint16_t)((b > a) == (a > 0) ? h + 1 : h - 1);
	return tc_bf16_to_double(h);
}

static __attribute__((noinline)) val call(interp *I, const tc_ir_expr *e)
{
	double args[4];
	val a[4], r;
	int i;
	for (i = 0; i < e->nargs && i < 4; i++) {
		a[i] = eval(I, e->args[i]);
		args[i] = to_double(a[i], e->args[i]->type);
	}
	if (e->id == TC_BI_MIN || e->id == TC_BI_MAX || e->id == TC_BI_FMIN || e->id == TC_BI_FMAX)
		return minmax(a[0], a[1], e->type, e->id == TC_BI_MAX || e->id == TC_BI_FMAX);
	/* Builtins whose result is not the double result rounded once to the
	 * type: the next representable value, and fused multiply-add (a double
	 * fma rounded again to float32 could round twice). */
	if (e->id == TC_BI_NEXTAFTER && e->type == TC_T_F32) {
		r.f = nextafterf((float)args[0], (float)args[1]);
		return r;
	}
	if (e->id == TC_BI_NEXTAFTER && e->type == TC_T_F16) {
		r.f = half_nextafter(args[0], args[1]);
		return r;
	}
	if (e->id == TC_BI_NEXTAFTER && e->type == TC_T_BF16) {
		r.f = bf16_nextafter(args[0], args[1]);
		return r;
	}
	if (e->id == TC_BI_FMA && e->type == TC_T_F32) {
		r.f = fmaf((float)args[0], (float)args[1], (float)args[2]);
		return r;
	}
	r.f = tc_interp_builtin((tc_builtin_id)e->id, args);
	if (e->type == TC_T_I32) { /* ilogb */
		r.i = (int32_t)r.f;
		return r;
	}
	return normalize(r, e->type);
}

/* The flat offset of a read or write, bounds-checked. */
static int64_t offset(interp *I, int tensor, const int64_t *idx, int n, tc_loc loc)
{
	const tc_tensor *t = &I->t[tensor];
	int64_t off = 0;
	int k;
	for (k = 0; k < n; k++) {
		if (idx[k] < 0 || idx[k] >= t->shape[k]) {
			tc_buf b;
			tc_buf_init(&b);
			tc_buf_printf(&b, "index %lld is out of bounds for dimension %d of '%s' (extent %lld)",
				(long long)idx[k], k, I->f->tensors[tensor].name,
				(long long)t->shape[k]);
			runtime_error(I, loc, "%s", b.s ? b.s : "index out of bounds");
			tc_buf_free(&b);
			return -1;
		}
		off = off * t->shape[k] + idx[k];
	}
	return off;
}

/* A read (TC_OP_READ): its subscripts evaluated in order, bounds-checked.
 * Apart from eval so that only reads hold the subscripts' array (under
 * AddressSanitizer every call of a function with a local array poisons
 * and unpoisons its redzones). */
static __attribute__((noinline)) val eval_read(interp *I, const tc_ir_expr *e)
{
	int64_t idx[TC_MAX_RANK], off;
	val a, r;
	int i;
	r.u = 0;
	for (i = 0; i < e->nargs; i++) {
		a = eval(I, e->args[i]);
		idx[i] = tc_dtype_is_unsigned(e->args[i]->type) && a.u > INT64_MAX ? -1 : a.i;
	}
	if (I->failed)
		return r;
	off = offset(I, e->id, idx, e->nargs, e->loc);
	return off < 0 ? r : load(&I->t[e->id], off);
}

/* +, -, *, /, % under the contract option: a fused multiply-add where
 * tc_ir_fma_of finds one (apart from eval for its local, as eval_read). */
static __attribute__((noinline)) val eval_contracted(interp *I, const tc_ir_expr *e)
{
	tc_ir_fma m;
	val a, b;
	if (tc_ir_fma_of(e, &m))
		return eval_fma(I, e, &m);
	a = eval(I, e->args[0]);
	b = eval(I, e->args[1]);
	return arith(I, e, a, b);
}

static val eval(interp *I, const tc_ir_expr *e)
{
	val a, b, r;
	int c;

	r.u = 0;
	if (I->failed)
		return r;
	switch (e->op) {
	case TC_OP_CONST:
		if (tc_dtype_is_float(e->type))
			r.f = e->c.f;
		else
			r.i = e->c.i;
		return normalize(r, e->type);
	case TC_OP_INDEX:
		r.i = I->vars[e->id];
		return r;
	case TC_OP_SIZE:
		r.i = I->params[e->id];
		return r;
	case TC_OP_READ:
		return eval_read(I, e);
	case TC_OP_CAST:
		return convert(eval(I, e->args[0]), e->args[0]->type, e->type);
	case TC_OP_NEG:
		a = eval(I, e->args[0]);
		if (tc_dtype_is_float(e->type))
			r.f = -a.f;
		else
			r.u = 0 - a.u;
		return normalize(r, e->type);
	case TC_OP_NOT:
		r.i = !eval(I, e->args[0]).i;
		return r;
	case TC_OP_ADD:
	case TC_OP_SUB:
	case TC_OP_MUL:
	case TC_OP_DIV:
	case TC_OP_MOD:
		if (I->contract)
			return eval_contracted(I, e);
		a = eval(I, e->args[0]);
		b = eval(I, e->args[1]);
		return arith(I, e, a, b);
	case TC_OP_LT:
	case TC_OP_GT:
	case TC_OP_LE:
	case TC_OP_GE:
	case TC_OP_EQ:
	case TC_OP_NE:
		a = eval(I, e->args[0]);
		b = eval(I, e->args[1]);
		c = compare(a, b, e->args[0]->type);
		switch (e->op) {
		case TC_OP_LT: r.i = c == -1; break;
		case TC_OP_GT: r.i = c == 1; break;
		case TC_OP_LE: r.i = c == -1 || c == 0; break;
		case TC_OP_GE: r.i = c == 1 || c == 0; break;
		case TC_OP_EQ: r.i = c == 0; break;
		default: r.i = c != 0; break;
		}
		return r;
	case TC_OP_AND:
		r.i = eval(I, e->args[0]).i && eval(I, e->args[1]).i;
		return r;
	case TC_OP_OR:
		r.i = eval(I, e->args[0]).i || eval(I, e->args[1]).i;
		return r;
	case TC_OP_SELECT:
		return eval(I, e->args[0]).i ? eval(I, e->args[1]) : eval(I, e->args[2]);
	case TC_OP_CALL:
		return call(I, e);
	}
	return r;
}

/* acc op v in type t */
static val reduce(tc_red red, tc_dtype t, val acc, val v)
{
	val r;
	switch (red) {
	case TC_RED_ADD:
		if (tc_dtype_is_float(t))
			r.f = acc.f + v.f;
		else
			r.u = acc.u + v.u;
		return normalize(r, t);
	case TC_RED_MUL:
		if (tc_dtype_is_float(t))
			r.f = acc.f * v.f;
		else
			r.u = acc.u * v.u;
		return normalize(r, t);
	case TC_RED_MIN: return minmax(acc, v, t, 0);
	case TC_RED_MAX: return minmax(acc, v, t, 1);
	default: return v;
	}
}

/* The element a scatter writes at the current point: its subscripts
 * evaluated in order (a gather's reads checked as any read), each checked
 * against its dimension as a right-hand read's are, the error at the
 * subscript; -1 after an error. */
static int64_t scatter_offset(interp *I, const tc_ir_stmt *s)
{
	const tc_ir_tensor *t = &I->f->tensors[s->tensor];
	int64_t idx[TC_MAX_RANK], off = 0;
	int k;
	for (k = 0; k < t->ndim; k++) {
		val a = eval(I, s->sub[k]);
		if (I->failed)
			return -1;
		idx[k] = tc_dtype_is_unsigned(s->sub[k]->type) && a.u > INT64_MAX ? -1 : a.i;
	}
	for (k = 0; k < t->ndim; k++) { /* the first dimension out of bounds */
		int64_t o = offset(I, s->tensor, idx, k + 1, s->sub[k]->loc);
		if (o < 0)
			return -1;
		off = o;
	}
	return off;
}

/* Iterate variables k..nvars-1 of the statement; at k == nlhs (all left-hand
 * indices fixed) initialise the element, then iterate the reduction. */
static void run_loops(interp *I, int k, int64_t off)
{
	const tc_ir_stmt *s = I->s;
	const tc_tensor *t = &I->t[s->tensor];
	int64_t lo, hi, v;

	if (I->failed)
		return;
	if (k == s->nlhs && !s->sub) {
		off = offset(I, s->tensor, I->vars, s->nlhs, s->loc);
		if (off < 0)
			return;
		if (s->init)
			store(t, off, identity(s->red, t->dtype));
	}
	if (k == s->nvars) {
		val x;
		if (s->guard) { /* a term pad(e, 0) skips (ir/lower.c) */
			x = eval(I, s->guard);
			if (I->failed || !x.i)
				return;
		}
		if (s->sub && (off = scatter_offset(I, s)) < 0)
			return;
		if (I->fx) {
			double a = eval(I, I->fx).f, b = eval(I, I->fy).f;
			if (!I->failed)
				store(t, off, fused(t->dtype, a, b, load(t, off).f));
			return;
		}
		x = eval(I, s->rhs);
		if (I->failed)
			return;
		store(t, off, s->red == TC_RED_ASSIGN ? x : reduce(s->red, t->dtype, load(t, off), x));
		return;
	}
	if (tc_sx_eval(s->vars[k].lo, I->params, I->vars, &lo) < 0 ||
		tc_sx_eval(s->vars[k].hi, I->params, I->vars, &hi) < 0) {
		runtime_error(I, s->loc, "%s", "the range of an index overflows");
		return;
	}
	for (v = lo; v < hi && !I->failed; v++) {
		I->vars[k] = v;
		run_loops(I, k + 1, off);
	}
}

static int64_t nelems(const tc_tensor *t)
{
	int64_t n = 1;
	int k;
	for (k = 0; k < t->ndim; k++)
		if (__builtin_mul_overflow(n, t->shape[k], &n))
			return -1;
	return n;
}

tc_stat tc_interp_run(__tc_keep const tc_ir_func *f, __tc_keep const int64_t *params,
	__tc_keep const tc_tensor *inputs, __tc_keep const tc_tensor *outputs,
	int contract, __tc_keep tc_diags *d)
{
	interp I;
	int i, j;
	tc_stat st = TC_OK;

	memset(&I, 0, sizeof(I));
	I.f = f;
	I.params = params;
	I.contract = contract;
	I.d = d;
	I.t = tc_calloc((size_t)f->ntensors + 1, sizeof(tc_tensor));
	I.vars = tc_calloc(64, sizeof(int64_t));
	if (!I.t || !I.vars) {
		tc_error(d, f->tensors[0].loc, "%s", "out of memory");
		st = TC_ERR;
		goto done;
	}
	for (i = 0; i < f->ninputs; i++)
		I.t[i] = inputs[i];
	for (i = 0; i < f->noutputs; i++)
		I.t[f->ninputs + i] = outputs[i];
	for (i = f->ninputs + f->noutputs; i < f->ntensors; i++) {
		tc_tensor *t = &I.t[i];
		int64_t n;
		t->dtype = f->tensors[i].dtype;
		t->ndim = f->tensors[i].ndim;
		if (tc_ir_shape(f, i, params, t->shape, d) < 0 || (n = nelems(t)) < 0 ||
			!(t->data = tc_calloc((size_t)n, (size_t)tc_dtype_size(t->dtype)))) {
			if (!d->nerrors)
				tc_error(d, f->tensors[i].loc, "cannot allocate temporary '%s'",
					f->tensors[i].name);
			st = TC_ERR;
			goto done;
		}
	}
	for (i = 0; i < f->nstmts && !I.failed; i++) {
		I.s = &f->stmts[i];
		if (I.s->nvars > 64) {
			tc_error(d, I.s->loc, "%s", "too many indices in one statement (at most 64)");
			st = TC_ERR;
			goto done;
		}
		for (j = 0; j < I.s->nvars; j++)
			I.vars[j] = 0;
		I.fx = I.fy = NULL;
		if (contract && !tc_ir_fma_reduction(I.s, I.t[I.s->tensor].dtype,
			f->tensors[I.s->tensor].widened, &I.fx, &I.fy))
			I.fx = I.fy = NULL;
		run_loops(&I, 0, 0);
	}
	if (I.failed)
		st = TC_ERR;
done:
	if (I.t)
		for (i = f->ninputs + f->noutputs; i < f->ntensors; i++)
			tc_free(I.t[i].data);
	tc_free(I.t);
	tc_free(I.vars);
	return st;
}
