/* Semantic analysis: name resolution, types and the checks of
 * docs/language.md, then range inference (range.c) per statement.
 *
 * Each def is checked independently; errors accumulate (several per def)
 * and checking of a statement goes on after an error where that can give
 * further useful messages. */
#include "ast.h"
#include "range.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Per-let state while a statement is checked. */
enum { LET_UNCHECKED, LET_CHECKING, LET_DONE, LET_FAILED };

typedef struct sema {
	tc_diags *d;
	tc_arena *ar;
	const tc_source *src;
	tc_def *def;
	tc_vec tensors; /* tc_tensor_info * */
	tc_vec checks;  /* tc_check * */
	/* the statement being checked */
	tc_stmt *s;
	int s_idx;
	tc_vec vars; /* tc_stmt_var * */
	int *let_state;
} sema;

static tc_tensor_info *tensor_at(sema *S, int i)
{
	return S->tensors.v[i];
}

static int find_size(sema *S, const char *name)
{
	int i;
	for (i = 0; i < S->def->nsizes; i++)
		if (!strcmp(S->def->sizes[i], name))
			return i;
	return -1;
}

static int find_tensor(sema *S, const char *name)
{
	int i;
	for (i = 0; i < S->tensors.n; i++)
		if (!strcmp(tensor_at(S, i)->name, name))
			return i;
	return -1;
}

static int find_var(sema *S, const char *name)
{
	int i;
	for (i = 0; i < S->vars.n; i++)
		if (!strcmp(((tc_stmt_var *)S->vars.v[i])->name, name))
			return i;
	return -1;
}

static int find_let(sema *S, const char *name)
{
	int i;
	for (i = 0; S->s && i < S->s->nwhere; i++)
		if (S->s->where[i].kind == TC_WHERE_LET && !strcmp(S->s->where[i].name, name))
			return i;
	return -1;
}

static int is_builtin(const char *name)
{
	return tc_builtin_reserved(name, (int)strlen(name));
}

static int is_not_a_number_name(const char *name)
{
	return !strcmp(name, "inf") || !strcmp(name, "nan") || !strcmp(name, "INFINITY") ||
		!strcmp(name, "NAN") || !strcmp(name, "infinity") || !strcmp(name, "Inf") ||
		!strcmp(name, "NaN");
}

/* "float32(K,N)": a tensor's declared or inferred type for messages. */
static void describe_type(sema *S, const tc_tensor_info *t, tc_buf *b)
{
	int i;
	tc_buf_puts(b, tc_dtype_name(t->dtype));
	if (t->ndim > 0 || t->kind != TC_TENSOR_INPUT) {
		tc_buf_putc(b, '(');
		for (i = 0; i < t->ndim && t->ext; i++) {
			if (i)
				tc_buf_putc(b, ',');
			tc_sx_print(t->ext[i], S->def->sizes, NULL, b);
		}
		tc_buf_putc(b, ')');
	}
}

/* Record a size name or return its number. */
static int add_size(sema *S, const char *name, tc_loc loc)
{
	int i = find_size(S, name);
	const char **names;
	tc_loc *locs;
	if (i >= 0)
		return i;
	names = tc_arena_alloc(S->ar, (size_t)(S->def->nsizes + 1) * sizeof(char *));
	locs = tc_arena_alloc(S->ar, (size_t)(S->def->nsizes + 1) * sizeof(tc_loc));
	if (!names || !locs)
		return -1;
	if (S->def->nsizes) {
		memcpy(names, S->def->sizes, (size_t)S->def->nsizes * sizeof(char *));
		memcpy(locs, S->def->size_loc, (size_t)S->def->nsizes * sizeof(tc_loc));
	}
	names[S->def->nsizes] = name;
	locs[S->def->nsizes] = loc;
	S->def->sizes = names;
	S->def->size_loc = locs;
	return S->def->nsizes++;
}

static tc_tensor_info *add_tensor(sema *S, const char *name, tc_tensor_kind kind,
	tc_loc loc)
{
	tc_tensor_info *t = tc_arena_alloc(S->ar, sizeof(*t));
	if (!t || tc_vec_push(&S->tensors, t) < 0) {
		S->d->oom = 1;
		return NULL;
	}
	t->name = name;
	t->kind = kind;
	t->loc = loc;
	t->ndim = -1;
	t->first_write = -1;
	return t;
}

/* Resolve the names of an extent expression to sizes and builtins;
 * 0 or -1 (error reported). */
static int resolve_extent(sema *S, tc_expr *e, const tc_decl *decl)
{
	int i, ok = 1;
	if (e->kind == TC_AST_IDENT) {
		int k = find_size(S, e->name);
		if (k < 0) {
			tc_error(S->d, e->loc, "'%s' in the extent of '%s' is not a size (a size is "
				"named by a dimension of an input, e.g. float(N) A)", e->name, decl->name);
			return -1;
		}
		e->ref = TC_REF_SIZE;
		e->ref_id = k;
		e->type = TC_T_I32;
		return 0;
	}
	if (e->kind == TC_AST_CALL) {
		int b = tc_builtin_lookup(e->name, (int)strlen(e->name));
		if (b != TC_BI_MIN && b != TC_BI_MAX) {
			tc_error(S->d, e->name_loc, "an extent expression can call only min and max, "
				"not '%s'", e->name);
			return -1;
		}
		e->ref = TC_REF_BUILTIN;
		e->ref_id = b;
	}
	for (i = 0; i < e->nargs; i++)
		ok &= resolve_extent(S, e->args[i], decl) == 0;
	return ok ? 0 : -1;
}

/* The size expression of an extent expression, or NULL (error reported). */
static const tc_sexpr *extent_sexpr(sema *S, tc_expr *e, const tc_decl *decl)
{
	const tc_sexpr *x;
	if (resolve_extent(S, e, decl) < 0)
		return NULL;
	if (!(x = tc_range_sexpr(S->ar, e))) {
		tc_error(S->d, e->loc, "an extent must be an integer expression of sizes and "
			"constants (+, -, * by a constant, / and %% by a positive constant, min, max)");
		return NULL;
	}
	return x;
}

/* Extents of a declared shape; sizes must already exist unless add is set
 * (then extent expressions are left for extent_exprs, once every input's
 * sizes exist). */
static int decl_shape(sema *S, const tc_decl *decl, tc_tensor_info *t, int add)
{
	int i, ok = 1;
	if (decl->ndims > TC_MAX_RANK) {
		tc_error(S->d, decl->loc, "'%s' has rank %d; tcomp supports at most %d dimensions",
			decl->name, decl->ndims, TC_MAX_RANK);
		return -1;
	}
	t->ndim = decl->ndims;
	t->ext = tc_arena_alloc(S->ar, (size_t)(decl->ndims + 1) * sizeof(tc_sexpr *));
	if (!t->ext)
		return -1;
	for (i = 0; i < decl->ndims; i++) {
		const tc_dim *dm = &decl->dims[i];
		if (dm->expr) {
			if (!add && !(t->ext[i] = extent_sexpr(S, dm->expr, decl)))
				ok = 0;
		} else if (dm->name) {
			int k;
			if (is_builtin(dm->name)) {
				tc_error(S->d, dm->loc, "'%s' is a builtin function and cannot name a size",
					dm->name);
				ok = 0;
				continue;
			}
			k = add ? add_size(S, dm->name, dm->loc) : find_size(S, dm->name);
			if (k < 0) {
				tc_error(S->d, dm->loc,
					"size '%s' of output '%s' is not a size of any input",
					dm->name, decl->name);
				ok = 0;
				continue;
			}
			t->ext[i] = tc_sx_param(S->ar, k);
		} else {
			if (dm->value < 1 || dm->value > TC_SX_SIZE_MAX) {
				tc_error(S->d, dm->loc, "a constant extent must be %s but is %lld",
					dm->value < 1 ? "at least 1" : "at most 2147483647 (extents are int32 values)",
					(long long)dm->value);
				ok = 0;
				continue;
			}
			t->ext[i] = tc_sx_const(S->ar, dm->value);
		}
	}
	return ok ? 0 : -1;
}

/* Parameters and return values: sizes, tensors, duplicate names. */
static int check_signature(sema *S)
{
	tc_def *def = S->def;
	int i, j, ok = 1;

	for (i = 0; i < def->nparams; i++) {
		tc_decl *p = &def->params[i];
		tc_tensor_info *t;
		if (is_builtin(p->name)) {
			tc_error(S->d, p->name_loc, "'%s' is a builtin function and cannot name a tensor",
				p->name);
			ok = 0;
		}
		if (find_tensor(S, p->name) >= 0) {
			tc_error(S->d, p->name_loc, "duplicate parameter name '%s'", p->name);
			ok = 0;
			continue;
		}
		t = add_tensor(S, p->name, TC_TENSOR_INPUT, p->name_loc);
		if (!t)
			return -1;
		t->dtype = p->dtype;
		t->first_write = -2; /* inputs are "written" before the def */
		if (decl_shape(S, p, t, 1) < 0)
			ok = 0;
	}
	/* the inputs' extent expressions, now that every size exists */
	for (i = 0; i < def->nparams; i++) {
		tc_decl *p = &def->params[i];
		int k = find_tensor(S, p->name);
		tc_tensor_info *t = k >= 0 ? tensor_at(S, k) : NULL;
		for (j = 0; t && t->kind == TC_TENSOR_INPUT && j < p->ndims && t->ext; j++)
			if (p->dims[j].expr && !(t->ext[j] = extent_sexpr(S, p->dims[j].expr, p))) {
				t->ext[j] = tc_sx_const(S->ar, 1);
				ok = 0;
			}
	}
	for (i = 0; i < def->nrets; i++) {
		tc_decl *r = &def->rets[i];
		tc_tensor_info *t;
		j = find_tensor(S, r->name);
		if (j >= 0) {
			if (tensor_at(S, j)->kind == TC_TENSOR_INPUT)
				tc_error(S->d, r->name_loc, "'%s' is both an input and an output; inputs are read-only",
					r->name);
			else
				tc_error(S->d, r->name_loc, "output '%s' is listed twice", r->name);
			ok = 0;
			continue;
		}
		if (is_builtin(r->name)) {
			tc_error(S->d, r->name_loc, "'%s' is a builtin function and cannot name a tensor",
				r->name);
			ok = 0;
		}
		t = add_tensor(S, r->name, TC_TENSOR_OUTPUT, r->name_loc);
		if (!t)
			return -1;
		t->dtype = r->dtype;
		if (r->has_shape) {
			t->declared_shape = 1;
			if (decl_shape(S, r, t, 0) < 0)
				ok = 0;
		}
	}
	for (i = 0; i < def->nsizes; i++) {
		j = find_tensor(S, def->sizes[i]);
		if (j >= 0) {
			tc_error(S->d, def->size_loc[i], "'%s' is both a size and a tensor",
				def->sizes[i]);
			ok = 0;
		}
	}
	S->def->ninputs = def->nparams;
	return ok ? 0 : -1;
}

static int check_expr(sema *S, tc_expr *e, int guarded);

/* Check that an integer literal fits the type it takes. */
static int literal_fits(sema *S, const tc_expr *e, tc_dtype t, int negated, tc_loc loc)
{
	const char *text = S->src->text + loc.off; /* the literal as written */
	double v = e->kind == TC_AST_INT ? (double)e->ival : e->fval;
	int bits = tc_dtype_bits(t);
	if (negated)
		v = -v;
	if (tc_dtype_is_int(t) && e->kind == TC_AST_INT) {
		double lo = tc_dtype_is_signed(t) ? -ldexp(1, bits - 1) : 0;
		double hi = tc_dtype_is_signed(t) ? ldexp(1, bits - 1) - 1 : ldexp(1, bits) - 1;
		if (v < lo || v > hi) {
			tc_error(S->d, loc, "literal %.*s does not fit in %s, the type it takes here",
				loc.len, text, tc_dtype_name(t));
			return 0;
		}
	}
	if (t == TC_T_F16 && fabs(v) > 65504) {
		tc_error(S->d, loc, "literal %.*s does not fit in float16 (at most 65504)", loc.len,
			text);
		return 0;
	}
	if (t == TC_T_BF16 && fabs(v) > 0x1.fep127) {
		tc_error(S->d, loc, "literal %.*s does not fit in bfloat16 (at most 3.3895314e38)",
			loc.len, text);
		return 0;
	}
	if (t == TC_T_F32 && fabs(v) > FLT_MAX) {
		tc_error(S->d, loc, "literal %.*s does not fit in float32 (at most 3.4028235e38)",
			loc.len, text);
		return 0;
	}
	return 1;
}

/* Give a weak (literal-only) expression and its operands the type t. */
static int settle_rec(sema *S, tc_expr *e, tc_dtype t, int negated)
{
	int i, ok = 1;
	if (!e->weak || t == TC_T_NONE || t == TC_T_BOOL)
		return 1;
	if (tc_dtype_is_float(e->type) && !tc_dtype_is_float(t))
		return 1; /* a float literal in an integer context: the parent converts */
	e->type = t;
	e->optype = t;
	switch (e->kind) {
	case TC_AST_INT:
	case TC_AST_FLOAT:
		return literal_fits(S, e, t, negated, e->loc);
	case TC_AST_UNARY:
		if (e->args[0]->kind == TC_AST_INT || e->args[0]->kind == TC_AST_FLOAT) {
			/* -128 fits int8: check the negated value, located at the '-' */
			e->args[0]->type = e->args[0]->optype = t;
			return literal_fits(S, e->args[0], t, !negated, e->loc);
		}
		return settle_rec(S, e->args[0], t, !negated);
	case TC_AST_BINARY:
		for (i = 0; i < 2; i++)
			ok &= settle_rec(S, e->args[i], t, 0);
		return ok;
	case TC_AST_TERNARY:
		return settle_rec(S, e->args[1], t, 0) & settle_rec(S, e->args[2], t, 0);
	case TC_AST_CALL: /* min/max of literals */
		for (i = 0; i < e->nargs; i++)
			ok &= settle_rec(S, e->args[i], t, 0);
		return ok;
	default:
		return 1;
	}
}

/* The value of a constant integer expression of literals (0 if it is not
 * one or overflows int64). */
static int const_int(const tc_expr *e, int64_t *v)
{
	int64_t a, b;
	switch (e->kind) {
	case TC_AST_INT:
		*v = e->ival;
		return 1;
	case TC_AST_UNARY:
		return e->op == TC_AOP_NEG && const_int(e->args[0], &a) &&
			!__builtin_sub_overflow((int64_t)0, a, v);
	case TC_AST_BINARY:
		if (!const_int(e->args[0], &a) || !const_int(e->args[1], &b))
			return 0;
		switch (e->op) {
		case TC_AOP_ADD: return !__builtin_add_overflow(a, b, v);
		case TC_AOP_SUB: return !__builtin_sub_overflow(a, b, v);
		case TC_AOP_MUL: return !__builtin_mul_overflow(a, b, v);
		case TC_AOP_DIV:
		case TC_AOP_MOD:
			if (b == 0 || (a == INT64_MIN && b == -1))
				return 0;
			*v = e->op == TC_AOP_DIV ? a / b - (a % b != 0 && (a % b < 0) != (b < 0))
						 : a % b + ((a % b != 0 && (a % b < 0) != (b < 0)) ? b : 0);
			return 1;
		default: return 0;
		}
	default:
		return 0;
	}
}

/* Whether e contains a constant integer expression of literals (unary -,
 * + - * / %) whose evaluation in int64 overflows: -(-9223372036854775807-1),
 * 4611686018427387904*2, (-9223372036854775807-1)/-1.  A division by zero
 * is not an overflow (it has its own error). */
static int const_overflows(const tc_expr *e)
{
	int64_t a, b, v;
	switch (e->kind) {
	case TC_AST_UNARY:
		if (e->op != TC_AOP_NEG)
			return 0;
		if (const_overflows(e->args[0]))
			return 1;
		return const_int(e->args[0], &a) && a == INT64_MIN;
	case TC_AST_BINARY:
		if (e->op != TC_AOP_ADD && e->op != TC_AOP_SUB && e->op != TC_AOP_MUL &&
			e->op != TC_AOP_DIV && e->op != TC_AOP_MOD)
			return 0;
		if (const_overflows(e->args[0]) || const_overflows(e->args[1]))
			return 1;
		if (!const_int(e->args[0], &a) || !const_int(e->args[1], &b))
			return 0;
		switch (e->op) {
		case TC_AOP_ADD: return __builtin_add_overflow(a, b, &v);
		case TC_AOP_SUB: return __builtin_sub_overflow(a, b, &v);
		case TC_AOP_MUL: return __builtin_mul_overflow(a, b, &v);
		case TC_AOP_DIV: return a == INT64_MIN && b == -1;
		default: return 0; /* INT64_MIN % -1 is 0 */
		}
	default:
		return 0;
	}
}

/* Whether b, the divisor of an integer division or modulo (op), is a
 * constant zero; then an error in S. */
static int zero_divisor(sema *S, tc_ast_op op, const tc_expr *b)
{
	int64_t v;
	if (!const_int(b, &v) || v != 0)
		return 0;
	tc_error(S->d, b->loc, "integer %s by zero", op == TC_AOP_DIV ? "division" : "modulo");
	return 1;
}

/* Whether the weak expression e, settled, divides by a constant zero in an
 * integer division or modulo (then an error in S). */
static int weak_zero_divisor(sema *S, const tc_expr *e)
{
	int i;
	if (!e->weak || (e->kind != TC_AST_UNARY && e->kind != TC_AST_BINARY &&
				e->kind != TC_AST_TERNARY && e->kind != TC_AST_CALL))
		return 0;
	for (i = 0; i < e->nargs; i++)
		if (weak_zero_divisor(S, e->args[i]))
			return 1;
	return e->kind == TC_AST_BINARY && (e->op == TC_AOP_DIV || e->op == TC_AOP_MOD) &&
	       tc_dtype_is_int(e->type) && zero_divisor(S, e->op, e->args[1]);
}

/* Give a weak expression the type t of its context (the top of a subtree of
 * literals): each literal must fit, and so must a constant integer
 * expression as a whole (int8: 100 + 100 does not); a division of
 * integers by a constant zero is an error. */
static int settle(sema *S, tc_expr *e, tc_dtype t, int negated)
{
	int64_t v;
	if (!e->weak || !settle_rec(S, e, t, negated))
		return !e->weak;
	if (weak_zero_divisor(S, e))
		return 0;
	if (tc_dtype_is_int(e->type) && const_overflows(e)) {
		tc_error(S->d, e->loc, "the constant expression overflows int64");
		return 0;
	}
	/* a literal, negated or not, was checked by settle_rec */
	if (tc_dtype_is_int(e->type) && e->kind != TC_AST_INT &&
		!(e->kind == TC_AST_UNARY && e->args[0]->kind == TC_AST_INT) && const_int(e, &v)) {
		int bits = tc_dtype_bits(e->type);
		int fits = tc_dtype_is_signed(e->type)
			? bits == 64 || (v >= -(INT64_C(1) << (bits - 1)) && v < (INT64_C(1) << (bits - 1)))
			: v >= 0 && (bits == 64 || v < (INT64_C(1) << bits));
		if (!fits) {
			tc_error(S->d, e->loc, "the constant %lld does not fit in %s, the type it takes here",
				(long long)v, tc_dtype_name(e->type));
			return 0;
		}
	}
	return 1;
}

static int is_numeric(tc_dtype t)
{
	return t != TC_T_NONE;
}

/* A read of a tensor that no earlier statement has written. */
static int check_readable(sema *S, const tc_expr *e, const tc_tensor_info *t)
{
	if (t->poisoned)
		return 0; /* its first statement had an error: say nothing more */
	if (t->first_write == -1 || t->dtype == TC_T_NONE) {
		tc_error(S->d, e->name_loc, "'%s' is read before any statement writes it",
			t->name);
		return 0;
	}
	return 1;
}

/* A name that a later statement writes: it is read too early.  Reports it
 * and returns 1, else 0. */
static int later_write_error(sema *S, const tc_expr *e)
{
	int i;
	for (i = S->s_idx + 1; i < S->def->nstmts; i++)
		if (!strcmp(S->def->stmts[i]->lhs, e->name)) {
			tc_error(S->d, e->name_loc,
				"'%s' is read before any statement writes it (it is first written on line %d)",
				e->name, S->def->stmts[i]->lhs_loc.line);
			return 1;
		}
	return 0;
}

static tc_stmt_var *add_var(sema *S, const char *name, tc_loc loc, int is_red)
{
	tc_stmt_var *v = tc_arena_alloc(S->ar, sizeof(*v));
	if (!v || tc_vec_push(&S->vars, v) < 0) {
		S->d->oom = 1;
		return NULL;
	}
	v->name = name;
	v->loc = loc;
	v->is_reduction = is_red;
	return v;
}

/* Check a let's value w->val.  A value of literals only keeps its own
 * type (an integer one int32: the IR converts it where it is read), so
 * an integer division of it by a constant zero is an error here. */
static int check_let_value(sema *S, tc_where *w)
{
	if (check_expr(S, w->val, 0) < 0)
		return -1;
	return weak_zero_divisor(S, w->val) ? -1 : 0;
}

static int check_ident(sema *S, tc_expr *e)
{
	int i;
	e->type = TC_T_I32;
	if ((i = find_var(S, e->name)) >= 0 && i < tc_stmt_nlhs(S->s)) {
		e->ref = TC_REF_INDEX;
		e->ref_id = i;
		return 0;
	}
	if ((i = find_let(S, e->name)) >= 0) {
		tc_where *w = &S->s->where[i];
		e->ref = TC_REF_LET;
		e->ref_id = i;
		if (S->let_state[i] == LET_CHECKING) {
			tc_error(S->d, e->name_loc, "let '%s' is defined in terms of itself", e->name);
			S->let_state[i] = LET_FAILED;
			return -1;
		}
		if (S->let_state[i] == LET_UNCHECKED) {
			S->let_state[i] = LET_CHECKING;
			if (check_let_value(S, w) < 0) {
				S->let_state[i] = LET_FAILED;
				return -1;
			}
			S->let_state[i] = LET_DONE;
		}
		if (S->let_state[i] == LET_FAILED)
			return -1;
		e->type = w->val->type;
		e->weak = w->val->weak;
		return 0;
	}
	if ((i = find_size(S, e->name)) >= 0) {
		e->ref = TC_REF_SIZE;
		e->ref_id = i;
		return 0;
	}
	if ((i = find_tensor(S, e->name)) >= 0) {
		tc_tensor_info *t = tensor_at(S, i);
		if (t->ndim > 0) {
			tc_error(S->d, e->name_loc,
				"'%s' is a tensor of rank %d; read an element as %s(...) with %d ind%s",
				e->name, t->ndim, e->name, t->ndim, t->ndim == 1 ? "ex" : "ices");
			return -1;
		}
		if (!check_readable(S, e, t))
			return -1;
		e->ref = TC_REF_TENSOR;
		e->ref_id = i;
		e->type = t->dtype;
		return 0;
	}
	if (is_builtin(e->name)) {
		tc_error(S->d, e->name_loc,
			"'%s' is a builtin function, not a variable; call it as %s(...)",
			e->name, e->name);
		return -1;
	}
	if (is_not_a_number_name(e->name)) {
		tc_error(S->d, e->name_loc,
			"'%s' is not a number in tc: there are no infinity or NaN literals; use a large finite constant such as 3.4e38, or min=!/max=! whose identity is the largest value of the type",
			e->name);
		return -1;
	}
	/* any other name is a reduction index (unless a later statement writes it) */
	i = find_var(S, e->name);
	if (i < 0 && later_write_error(S, e))
		return -1;
	if (i < 0) {
		if (!add_var(S, e->name, e->name_loc, 1))
			return -1;
		i = S->vars.n - 1;
	}
	e->ref = TC_REF_INDEX;
	e->ref_id = i;
	return 0;
}

static const char *ordinal(int i)
{
	static const char *const names[] = {"first", "second", "third", "fourth"};
	return i >= 0 && i < 4 ? names[i] : "next";
}

/* The type a floating builtin computes in, from its argument types. */
static tc_dtype float_type(tc_dtype t)
{
	return tc_dtype_is_float(t) ? t : TC_T_F32;
}

static int check_builtin(sema *S, tc_expr *e, int id, int guarded)
{
	const tc_builtin *b = &tc_builtins[id];
	int i, ok = 1;
	tc_dtype t = TC_T_NONE;
	int weak = 1;

	e->ref = TC_REF_BUILTIN;
	e->ref_id = id;
	if (e->nargs != b->arity) {
		tc_error(S->d, e->loc, "'%s' takes %d argument%s but was given %d", b->name,
			b->arity, b->arity == 1 ? "" : "s", e->nargs);
		return -1;
	}
	for (i = 0; i < e->nargs; i++)
		if (check_expr(S, e->args[i], guarded) < 0)
			ok = 0;
	if (!ok)
		return -1;
	for (i = 0; i < e->nargs; i++) {
		tc_expr *a = e->args[i];
		int int_arg = (b->kind == TC_BK_INT_FIRST && i == 0) ||
			(b->kind == TC_BK_INT_SECOND && i == 1);
		if (int_arg) {
			if (!tc_dtype_is_int(a->type)) {
				tc_error(S->d, a->loc, "the %s argument of '%s' must be an integer but has type %s",
					ordinal(i), b->name, tc_dtype_name(a->type));
				ok = 0;
			}
			continue;
		}
		if (b->kind != TC_BK_ANY && a->type == TC_T_BOOL) {
			tc_error(S->d, a->loc, "the %s argument of '%s' must be a number but has type bool",
				ordinal(i), b->name);
			ok = 0;
			continue;
		}
		t = t == TC_T_NONE ? a->type : tc_dtype_promote(t, weak, a->type, a->weak);
		weak = weak && a->weak;
	}
	if (!ok)
		return -1;
	if (b->kind != TC_BK_ANY) {
		t = float_type(t);
		weak = 0;
	}
	e->optype = t;
	e->weak = weak;
	e->type = b->kind == TC_BK_INT_RESULT ? TC_T_I32 : t;
	for (i = 0; i < e->nargs && !weak; i++) {
		int int_arg = (b->kind == TC_BK_INT_FIRST && i == 0) ||
			(b->kind == TC_BK_INT_SECOND && i == 1);
		if (!settle(S, e->args[i], int_arg ? TC_T_I32 : t, 0))
			ok = 0;
	}
	return ok ? 0 : -1;
}

/* Whether e (through its lets) reads a tensor with subscripts outside any
 * pad it contains: the reads that a pad around e tests. */
static int reads_tested(const sema *S, const tc_expr *e)
{
	int i;
	if (e->kind == TC_AST_CALL && e->ref == TC_REF_PAD)
		return 0;
	if (e->kind == TC_AST_CALL && e->ref == TC_REF_TENSOR)
		return 1;
	if (e->kind == TC_AST_IDENT && e->ref == TC_REF_LET)
		return reads_tested(S, S->s->where[e->ref_id].val);
	for (i = 0; i < e->nargs; i++)
		if (reads_tested(S, e->args[i]))
			return 1;
	return 0;
}

/* pad(e, v): e where every read of e is in bounds, else v (docs/language.md,
 * 6.8).  Both arguments are checked as the branches of ?: are (guarded:
 * their reads bound only indices nothing else bounds, range.c) and their
 * types combine as the branches' do. */
static int check_pad(sema *S, tc_expr *e)
{
	int i, ok = 1;

	e->ref = TC_REF_PAD;
	e->ref_id = 0;
	if (e->nargs != 2) {
		tc_error(S->d, e->loc,
			"'pad' takes 2 arguments but was given %d: write pad(e, v), the value of e where every tensor read in e is in bounds and v elsewhere",
			e->nargs);
		return -1;
	}
	for (i = 0; i < 2; i++)
		if (check_expr(S, e->args[i], 1) < 0)
			ok = 0;
	if (!ok)
		return -1;
	if (!reads_tested(S, e->args[0])) {
		tc_error(S->d, e->args[0]->loc,
			"the first argument of 'pad' reads no tensor element, so it is never out of bounds and pad would always give it; pad an expression that reads a tensor, such as pad(A(i - 1), 0.0), or drop pad");
		return -1;
	}
	e->type = e->optype = tc_dtype_promote(e->args[0]->type, e->args[0]->weak,
		e->args[1]->type, e->args[1]->weak);
	e->weak = e->args[0]->weak && e->args[1]->weak;
	if (!e->weak && !(settle(S, e->args[0], e->type, 0) & settle(S, e->args[1], e->type, 0)))
		return -1;
	return 0;
}

static int check_call(sema *S, tc_expr *e, int guarded)
{
	int i, ok = 1;
	int id = tc_builtin_lookup(e->name, (int)strlen(e->name));

	if ((i = find_tensor(S, e->name)) >= 0 && find_var(S, e->name) < 0) {
		tc_tensor_info *t = tensor_at(S, i);
		if (!check_readable(S, e, t))
			return -1;
		if (t->ndim != e->nargs) {
			tc_buf b;
			tc_buf_init(&b);
			describe_type(S, t, &b);
			tc_error(S->d, e->loc, "expected %d ind%s for '%s' (%s %s) but found %d",
				t->ndim, t->ndim == 1 ? "ex" : "ices", t->name,
				t->kind == TC_TENSOR_INPUT ? "declared" : "inferred",
				b.s ? b.s : "?", e->nargs);
			tc_buf_free_diag(&b, S->d);
			return -1;
		}
		e->ref = TC_REF_TENSOR;
		e->ref_id = i;
		e->type = t->dtype;
		for (i = 0; i < e->nargs; i++) {
			tc_expr *a = e->args[i];
			if (check_expr(S, a, guarded) < 0) {
				ok = 0;
				continue;
			}
			if (!tc_dtype_is_int(a->type)) {
				tc_error(S->d, a->loc,
					"the subscript for dimension %d of '%s' must be an integer but has type %s",
					i, t->name, tc_dtype_name(a->type));
				ok = 0;
			} else if (!settle(S, a, TC_T_I32, 0)) {
				ok = 0;
			}
		}
		return ok ? 0 : -1;
	}
	if (id >= 0)
		return check_builtin(S, e, id, guarded);
	if (tc_builtin_is_pad(e->name, (int)strlen(e->name)))
		return check_pad(S, e);
	if (find_var(S, e->name) >= 0 || find_size(S, e->name) >= 0 ||
		find_let(S, e->name) >= 0) {
		tc_error(S->d, e->name_loc, "'%s' is %s, not a tensor or a function", e->name,
			find_size(S, e->name) >= 0 ? "a size" :
			find_let(S, e->name) >= 0 ? "a let name" : "an index");
		return -1;
	}
	if (later_write_error(S, e))
		return -1;
	tc_error(S->d, e->name_loc, "unknown tensor or function '%s'", e->name);
	return -1;
}

static int check_binary(sema *S, tc_expr *e)
{
	tc_expr *a = e->args[0], *b = e->args[1];
	tc_dtype t;

	if (e->op == TC_AOP_AND || e->op == TC_AOP_OR) {
		int ok = 1, i;
		for (i = 0; i < 2; i++)
			if (e->args[i]->type != TC_T_BOOL) {
				tc_error(S->d, e->args[i]->loc,
					"operand of '%s' must be bool but has type %s (compare it, e.g. x != 0)",
					tc_ast_op_name(e->op), tc_dtype_name(e->args[i]->type));
				ok = 0;
			}
		e->type = e->optype = TC_T_BOOL;
		return ok ? 0 : -1;
	}
	t = tc_dtype_promote(a->type, a->weak, b->type, b->weak);
	/* of literals only, the division takes its type from the context
	 * (settle: 2 / 0 in a float context is a float division) */
	if ((e->op == TC_AOP_DIV || e->op == TC_AOP_MOD) && tc_dtype_is_int(t) &&
		!(a->weak && b->weak) && zero_divisor(S, e->op, b))
		return -1;
	if (e->op >= TC_AOP_LT && e->op <= TC_AOP_NE &&
		(a->type == TC_T_BOOL) != (b->type == TC_T_BOOL) && !a->weak && !b->weak) {
		tc_error(S->d, e->loc,
			"cannot compare %s with %s; comparisons do not chain (write a < b && b < c), and a bool is compared only with a bool",
			tc_dtype_name(a->type), tc_dtype_name(b->type));
		return -1;
	}
	if (e->op >= TC_AOP_LT && e->op <= TC_AOP_NE) {
		e->type = TC_T_BOOL;
		e->optype = t;
		e->weak = 0;
	} else {
		if (t == TC_T_BOOL)
			t = TC_T_I32; /* arithmetic on bools counts */
		e->type = e->optype = t;
		e->weak = a->weak && b->weak;
	}
	if (!e->weak)
		return settle(S, a, e->optype, 0) & settle(S, b, e->optype, 0) ? 0 : -1;
	return 0;
}

/* Resolve names and compute types bottom-up (docs/language.md, "Types"). */
static int check_expr(sema *S, tc_expr *e, int guarded)
{
	int i, ok = 1;

	e->guarded = guarded;
	switch (e->kind) {
	case TC_AST_INT: /* int32, or int64 when it does not fit (as in C) */
		e->type = e->optype = e->ival > INT32_MAX ? TC_T_I64 : TC_T_I32;
		e->weak = 1;
		return 0;
	case TC_AST_FLOAT: /* float32, or float64 when it does not fit */
		e->type = e->optype = fabs(e->fval) > FLT_MAX ? TC_T_F64 : TC_T_F32;
		e->weak = 1;
		return 0;
	case TC_AST_IDENT:
		return check_ident(S, e);
	case TC_AST_CALL:
		return check_call(S, e, guarded);
	case TC_AST_CAST:
		if (check_expr(S, e->args[0], guarded) < 0)
			return -1;
		e->type = e->optype = e->cast_type;
		/* a cast converts: uint8(-1) is 255, float16(70000.0) is inf.  Float
		 * literals cast to a float type that holds them are read in that
		 * type directly (float64(0.1)). */
		if (tc_dtype_is_float(e->cast_type) && e->args[0]->kind == TC_AST_FLOAT &&
			(e->cast_type != TC_T_F16 || fabs(e->args[0]->fval) <= 65504) &&
			(e->cast_type != TC_T_BF16 || fabs(e->args[0]->fval) <= 0x1.fep127) &&
			(e->cast_type != TC_T_F32 || fabs(e->args[0]->fval) <= FLT_MAX))
			return settle(S, e->args[0], e->cast_type, 0) ? 0 : -1;
		return 0;
	case TC_AST_UNARY:
		if (check_expr(S, e->args[0], guarded) < 0)
			return -1;
		if (e->op == TC_AOP_NOT) {
			if (e->args[0]->type != TC_T_BOOL) {
				tc_error(S->d, e->args[0]->loc,
					"operand of '!' must be bool but has type %s",
					tc_dtype_name(e->args[0]->type));
				return -1;
			}
			e->type = e->optype = TC_T_BOOL;
			return 0;
		}
		if (e->args[0]->type == TC_T_BOOL) {
			tc_error(S->d, e->args[0]->loc, "cannot negate a bool; use '!'");
			return -1;
		}
		e->type = e->optype = e->args[0]->type;
		e->weak = e->args[0]->weak;
		return 0;
	case TC_AST_BINARY:
		for (i = 0; i < 2; i++)
			if (check_expr(S, e->args[i], guarded) < 0)
				ok = 0;
		if (!ok)
			return -1;
		return check_binary(S, e);
	case TC_AST_TERNARY:
		ok = check_expr(S, e->args[0], guarded) == 0;
		for (i = 1; i < 3; i++)
			if (check_expr(S, e->args[i], 1) < 0)
				ok = 0;
		if (!ok)
			return -1;
		if (e->args[0]->type != TC_T_BOOL) {
			tc_error(S->d, e->args[0]->loc,
				"condition of '?:' must be bool but has type %s (compare it, e.g. x != 0)",
				tc_dtype_name(e->args[0]->type));
			return -1;
		}
		e->type = e->optype = tc_dtype_promote(e->args[1]->type, e->args[1]->weak,
			e->args[2]->type, e->args[2]->weak);
		e->weak = e->args[1]->weak && e->args[2]->weak;
		if (!e->weak && !(settle(S, e->args[1], e->type, 0) &
					settle(S, e->args[2], e->type, 0)))
			return -1;
		return 0;
	}
	return is_numeric(e->type) ? 0 : -1;
}

/* Names on the left: the tensor written and its index variables. */
static int check_lhs(sema *S, tc_stmt *s)
{
	int i, j, t, ok = 1;

	t = find_tensor(S, s->lhs);
	if (t >= 0 && tensor_at(S, t)->kind == TC_TENSOR_INPUT) {
		tc_error(S->d, s->lhs_loc, "cannot write to input '%s'; inputs are read-only",
			s->lhs);
		return -1;
	}
	if (find_size(S, s->lhs) >= 0) {
		tc_error(S->d, s->lhs_loc, "cannot write to '%s': it is a size", s->lhs);
		return -1;
	}
	if (is_builtin(s->lhs)) {
		tc_error(S->d, s->lhs_loc, "'%s' is a builtin function and cannot name a tensor",
			s->lhs);
		return -1;
	}
	if (t < 0) {
		if (!add_tensor(S, s->lhs, TC_TENSOR_TEMP, s->lhs_loc))
			return -1;
		t = S->tensors.n - 1;
	}
	s->tensor = t;
	if (s->nidx > TC_MAX_RANK) {
		tc_error(S->d, s->lhs_loc, "'%s' has %d indices; tcomp supports at most %d dimensions",
			s->lhs, s->nidx, TC_MAX_RANK);
		return -1;
	}
	if (tensor_at(S, t)->ndim >= 0 && tensor_at(S, t)->ndim != s->nidx) {
		tc_error(S->d, s->lhs_loc, "expected %d ind%s for '%s' but found %d",
			tensor_at(S, t)->ndim, tensor_at(S, t)->ndim == 1 ? "ex" : "ices",
			s->lhs, s->nidx);
		return -1;
	}
	for (i = 0; i < s->nidx; i++) {
		const char *n = s->idx[i];
		if (!n) /* a gathered subscript: check_scatter */
			continue;
		for (j = 0; j < i; j++)
			if (s->idx[j] && !strcmp(s->idx[j], n)) {
				tc_error(S->d, s->idx_loc[i], "index '%s' appears twice on the left-hand side",
					n);
				ok = 0;
			}
		if (find_size(S, n) >= 0 || find_tensor(S, n) >= 0 || is_builtin(n)) {
			tc_error(S->d, s->idx_loc[i], "index '%s' has the name of a %s",
				n, find_size(S, n) >= 0 ? "size" : find_tensor(S, n) >= 0 ? "tensor"
											 : "builtin function");
			ok = 0;
		}
		if (!add_var(S, n, s->idx_loc[i], 0))
			return -1;
	}
	return ok ? 0 : -1;
}

/* Whether e reads a tensor (through the lets of the statement too). */
static int reads_tensor(sema *S, const tc_expr *e)
{
	int i;
	if (e->kind == TC_AST_CALL && e->ref == TC_REF_TENSOR)
		return 1;
	if (e->kind == TC_AST_IDENT && e->ref == TC_REF_TENSOR)
		return 1;
	if (e->kind == TC_AST_IDENT && e->ref == TC_REF_LET)
		return reads_tensor(S, S->s->where[e->ref_id].val);
	for (i = 0; i < e->nargs; i++)
		if (reads_tensor(S, e->args[i]))
			return 1;
	return 0;
}

/* Whether e uses an index variable (through lets). */
static int uses_index(sema *S, const tc_expr *e)
{
	int i;
	if (e->kind == TC_AST_IDENT && e->ref == TC_REF_INDEX)
		return 1;
	if (e->kind == TC_AST_IDENT && e->ref == TC_REF_LET)
		return uses_index(S, S->s->where[e->ref_id].val);
	for (i = 0; i < e->nargs; i++)
		if (uses_index(S, e->args[i]))
			return 1;
	return 0;
}

/* Whether the left-hand subscript e is an index name shifted by an
 * expression of sizes and constants (i + 1, N - 1 - i is not: -i), the
 * form whose scatter is better written as a gather by shifting the reads;
 * every other subscript that is not a name (I(i), 2 * i, i % N, i + j, 0)
 * makes a scatter. */
static int is_shift(sema *S, const tc_expr *e)
{
	const tc_expr *a, *b;
	if (e->kind != TC_AST_BINARY || (e->op != TC_AOP_ADD && e->op != TC_AOP_SUB))
		return 0;
	a = e->args[0];
	b = e->args[1];
	if (a->kind == TC_AST_IDENT && a->ref == TC_REF_INDEX && !uses_index(S, b))
		return 1;
	return e->op == TC_AOP_ADD && b->kind == TC_AST_IDENT && b->ref == TC_REF_INDEX &&
		!uses_index(S, a);
}

/* A scatter's left side (s->sub set, after check_lhs): the operator is a
 * reduction that does not depend on the order of duplicate elements, the
 * tensor's shape is known (the gathered subscripts do not define it), and
 * every gathered subscript is an integer expression that reads a tensor;
 * its names are checked as in a right-hand side (new ones are indices
 * that only the gathers bound, like reduction indices). */
static int check_scatter(sema *S, tc_stmt *s)
{
	tc_tensor_info *t = tensor_at(S, s->tensor);
	int k, ok = 1;

	for (k = 0; k < s->nidx; k++) {
		tc_expr *a = s->sub[k];
		if (!a)
			continue;
		if (check_expr(S, a, 0) < 0) {
			ok = 0;
			continue;
		}
		if (!tc_dtype_is_int(a->type)) {
			tc_error(S->d, a->loc,
				"the subscript for dimension %d of '%s' must be an integer but has type %s",
				k, s->lhs, tc_dtype_name(a->type));
			ok = 0;
		} else if (!reads_tensor(S, a) && is_shift(S, a)) {
			tc_error(S->d, a->loc,
				"a left-hand subscript must be an index name, a gather (an integer expression that reads a tensor, such as I(i)) or another scatter's subscript (2 * i, i %% N), but this one is a shifted index; to write at shifted positions, shift the reads instead (O(i) = A(i - 1) where i in 1:N)");
			ok = 0;
		} else if (!settle(S, a, TC_T_I32, 0)) {
			ok = 0;
		}
	}
	if (!ok)
		return -1;
	if (s->red == TC_RED_ASSIGN || s->red == TC_RED_MUL) {
		tc_error(S->d, s->op_loc,
			"a gathered left-hand subscript needs a reduction that does not depend on the order of repeated indices ('+=!', '+=', 'max=!', 'min=!', 'max=', 'min='), but found '%s'%s",
			tc_red_name(s->red, s->init), s->red == TC_RED_ASSIGN
			? ": with '=', an index that repeats would keep whichever value came last; write '+=!' to add the values, or 'max=!' to keep the largest"
			: ": products overflow and underflow in an order-dependent way");
		ok = 0;
	}
	if (t->first_write == -1 && !t->declared_shape) {
		tc_error(S->d, s->lhs_loc,
			"the shape of '%s' must be known before a statement with a gathered left-hand subscript writes it (a gather does not define a shape): %s",
			s->lhs, t->kind == TC_TENSOR_OUTPUT
			? "declare the output's shape in the -> list, e.g. float32(V, D)"
			: "write it first with a statement that defines its shape, or make it an output with a declared shape");
		ok = 0;
	}
	return ok ? 0 : -1;
}

static int check_where_names(sema *S, tc_stmt *s)
{
	int i, j, ok = 1;
	for (i = 0; i < s->nwhere; i++) {
		tc_where *w = &s->where[i];
		if (w->kind != TC_WHERE_LET)
			continue;
		for (j = 0; j < i; j++)
			if (s->where[j].kind == TC_WHERE_LET && !strcmp(s->where[j].name, w->name)) {
				tc_error(S->d, w->name_loc, "let '%s' is defined twice", w->name);
				ok = 0;
			}
		if (find_var(S, w->name) >= 0 || find_size(S, w->name) >= 0 ||
			find_tensor(S, w->name) >= 0 || is_builtin(w->name)) {
			tc_error(S->d, w->name_loc, "let name '%s' is already the name of %s", w->name,
				find_var(S, w->name) >= 0 ? "an index" :
				find_size(S, w->name) >= 0 ? "a size" :
				find_tensor(S, w->name) >= 0 ? "a tensor" : "a builtin function");
			ok = 0;
		}
	}
	return ok ? 0 : -1;
}

/* where i in lo:hi: bounds over sizes and constants. */
static int check_where_ranges(sema *S, tc_stmt *s)
{
	const tc_sexpr *e;
	int i, j, ok = 1;
	for (i = 0; i < s->nwhere; i++) {
		tc_where *w = &s->where[i];
		tc_expr *bnd[2];
		if (w->kind != TC_WHERE_RANGE)
			continue;
		if (find_var(S, w->name) < 0) {
			tc_error(S->d, w->name_loc,
				"where clause gives a range to '%s', which is not an index of this statement",
				w->name);
			ok = 0;
			continue;
		}
		for (j = 0; j < i; j++)
			if (s->where[j].kind == TC_WHERE_RANGE && !strcmp(s->where[j].name, w->name)) {
				tc_error(S->d, w->name_loc, "'%s' is given a range twice", w->name);
				ok = 0;
			}
		bnd[0] = w->lo;
		bnd[1] = w->hi;
		for (j = 0; j < 2; j++) {
			if (check_expr(S, bnd[j], 0) < 0) {
				ok = 0;
				continue;
			}
			if (!tc_dtype_is_int(bnd[j]->type) || !(e = tc_range_sexpr(S->ar, bnd[j]))) {
				tc_error(S->d, bnd[j]->loc,
					"a range bound must be an integer expression of sizes and constants (+, -, * by a constant, / and %% by a positive constant, min, max)");
				ok = 0;
			} else if (tc_sx_overflows(e)) {
				tc_error(S->d, bnd[j]->loc,
					"this range bound overflows int64 (size expressions are computed in int64, and a bound must fit in int32)");
				ok = 0;
			}
		}
	}
	return ok ? 0 : -1;
}

/* The type of the left-hand tensor, from its declaration or the right side. */
static int check_assign_type(sema *S, tc_stmt *s)
{
	tc_tensor_info *t = tensor_at(S, s->tensor);
	tc_expr *rhs = s->rhs;

	if (t->dtype == TC_T_NONE) {
		t->dtype = rhs->type;
		if (t->dtype == TC_T_BOOL && (s->red == TC_RED_ADD || s->red == TC_RED_MUL))
			t->dtype = TC_T_I32; /* counting bools */
		return settle(S, rhs, t->dtype, 0) ? 0 : -1;
	}
	if (!tc_dtype_implicit_ok(rhs->type, rhs->weak, t->dtype)) {
		tc_error(S->d, rhs->loc,
			"cannot store a value of type %s into '%s' of type %s without a cast; write %s(...) to convert",
			tc_dtype_name(rhs->type), t->name, tc_dtype_name(t->dtype),
			tc_dtype_name(t->dtype));
		return -1;
	}
	return settle(S, rhs, t->dtype, 0) ? 0 : -1;
}

static void mark_let_reads_unchecked(sema *S, tc_stmt *s)
{
	int i;
	for (i = 0; i < s->nwhere; i++)
		if (s->where[i].kind == TC_WHERE_LET && S->let_state[i] == LET_UNCHECKED) {
			tc_warning(S->d, s->where[i].name_loc, "let '%s' is never used",
				s->where[i].name);
			S->let_state[i] = LET_CHECKING;
			if (check_let_value(S, &s->where[i]) < 0)
				S->let_state[i] = LET_FAILED;
			else
				S->let_state[i] = LET_DONE;
		}
}

/* Height and node count of e with its lets inlined (as the IR has it),
 * saturating at the limits; memo holds 2 entries per let. */
#define TC_MAX_INLINED_HEIGHT 1000
#define TC_MAX_INLINED_NODES 1000000
static void inlined_size(sema *S, const tc_expr *e, int64_t *height, int64_t *nodes,
	int64_t *memo)
{
	int i;
	*height = 1;
	*nodes = 1;
	if (e->kind == TC_AST_IDENT && e->ref == TC_REF_LET) {
		int64_t *m = &memo[2 * e->ref_id];
		if (!m[0])
			inlined_size(S, S->s->where[e->ref_id].val, &m[0], &m[1], memo);
		*height = m[0];
		*nodes = m[1];
		return;
	}
	for (i = 0; i < e->nargs; i++) {
		int64_t h, n;
		inlined_size(S, e->args[i], &h, &n, memo);
		if (h + 1 > *height)
			*height = h + 1;
		*nodes += n;
		if (*nodes > TC_MAX_INLINED_NODES)
			*nodes = TC_MAX_INLINED_NODES + 1;
	}
}

static int check_inlined_size(sema *S, tc_stmt *s)
{
	int64_t *memo = tc_arena_alloc(S->ar, (size_t)(2 * s->nwhere + 2) * sizeof(int64_t));
	int64_t h, n;
	int i;
	if (!memo)
		return -1;
	for (i = -1; i < s->nwhere; i++) {
		const tc_expr *e = i < 0 ? s->rhs : s->where[i].kind == TC_WHERE_EXISTS
			? s->where[i].val : NULL;
		if (!e)
			continue;
		inlined_size(S, e, &h, &n, memo);
		if (h <= TC_MAX_INLINED_HEIGHT && n <= TC_MAX_INLINED_NODES)
			continue;
		tc_error(S->d, e->loc,
			"this expression is too large once its let clauses are inlined (height %lld, more than %d, or more than %d operations); split it over several statements through a temporary",
			(long long)h, TC_MAX_INLINED_HEIGHT, TC_MAX_INLINED_NODES);
		return -1;
	}
	return 0;
}

/* Reads of the tensor a statement writes whose value depends on the order
 * in which the statement's loops run: inside a reduction, or at other
 * indices than the ones written. */
static void warn_order(sema *S, tc_stmt *s, const tc_expr *e)
{
	int i, same = 1;
	if (e->kind == TC_AST_IDENT && e->ref == TC_REF_LET)
		return;
	for (i = 0; i < e->nargs; i++)
		warn_order(S, s, e->args[i]);
	if (e->ref != TC_REF_TENSOR || e->ref_id != s->tensor)
		return;
	if (S->vars.n > tc_stmt_nlhs(s) || s->sub) {
		tc_warning(S->d, e->loc,
			"'%s' is read while it is being reduced into: the value read depends on the order of the reduction",
			s->lhs);
		return;
	}
	for (i = 0; i < e->nargs; i++)
		same = same && e->args[i]->kind == TC_AST_IDENT && e->args[i]->ref == TC_REF_INDEX &&
			e->args[i]->ref_id == i;
	if (!same)
		tc_warning(S->d, e->loc,
			"'%s' is read at other indices than the statement writes: statements run as loops over their indices in order, so the result depends on that order",
			s->lhs);
}

/* Whether two index names look like one typo apart: one starts the other
 * (k, kk), or they are one insertion, deletion or substitution apart and
 * have at least two other characters in common (r_k, r_j; not k, j or
 * kh, kw, where one character is all that differs). */
static int similar_names(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), i = 0;
	if (la > lb) {
		const char *t = a;
		a = b;
		b = t;
		la = lb;
		lb = strlen(b);
	}
	if (!strncmp(a, b, la))
		return 1;
	while (i < la && a[i] == b[i])
		i++;
	if (la == lb) /* one substitution at i */
		return la >= 3 && !strcmp(a + i + 1, b + i + 1);
	return la >= 2 && lb == la + 1 && !strcmp(a + i, b + i + 1); /* one insertion at i */
}

#define SPLIT_MAX_FACTORS 64

/* The factors of a product, through lets: A * (B * C) is A, B, C.  Stops
 * counting past SPLIT_MAX_FACTORS (then *n is SPLIT_MAX_FACTORS + 1). */
static void product_factors(sema *S, const tc_expr *e, const tc_expr **f, int *n)
{
	if (*n > SPLIT_MAX_FACTORS)
		return;
	if (e->kind == TC_AST_IDENT && e->ref == TC_REF_LET) {
		product_factors(S, S->s->where[e->ref_id].val, f, n);
		return;
	}
	if (e->kind == TC_AST_BINARY && e->op == TC_AOP_MUL) {
		product_factors(S, e->args[0], f, n);
		product_factors(S, e->args[1], f, n);
		return;
	}
	if (*n < SPLIT_MAX_FACTORS)
		f[*n] = e;
	(*n)++;
}

/* Record in occ[v] the first occurrence of each index v in e, through lets
 * (check_inlined_size bounds the walk). */
static void index_occurrences(sema *S, const tc_expr *e, const tc_expr **occ)
{
	int i;
	if (e->kind == TC_AST_IDENT && e->ref == TC_REF_INDEX && !occ[e->ref_id])
		occ[e->ref_id] = e;
	if (e->kind == TC_AST_IDENT && e->ref == TC_REF_LET)
		index_occurrences(S, S->s->where[e->ref_id].val, occ);
	for (i = 0; i < e->nargs; i++)
		index_occurrences(S, e->args[i], occ);
}

/* The one factor in which index v occurs (*at: its first occurrence), or
 * -1 when it occurs in none or several; occ[f * nv + v] as filled by
 * index_occurrences. */
static int only_factor(const tc_expr **occ, int n, int nv, int v, const tc_expr **at)
{
	int i, which = -1;
	for (i = 0; i < n; i++) {
		if (!occ[i * nv + v])
			continue;
		if (which >= 0)
			return -1;
		which = i;
		*at = occ[i * nv + v];
	}
	return which;
}

/* A likely typo that silently changes the maths: in C(m,n) +=! A(m,k) *
 * B(kk,n), the reduction indices k and kk are each read in one factor of
 * the product only, so the statement multiplies a reduction of A over k by
 * a reduction of B over kk.  Warn when two reduction indices with similar
 * names (similar_names) each occur in a different single factor of the
 * right-hand side's top-level product; renaming one index to a name that is
 * not similar says that separate reductions are meant
 * (docs/language.md, section 10). */
static void warn_split_product(sema *S, tc_stmt *s)
{
	const tc_expr *f[SPLIT_MAX_FACTORS], **occ;
	int n = 0, nv = S->vars.n, a, b;

	if (nv - tc_stmt_nlhs(s) < 2)
		return;
	product_factors(S, s->rhs, f, &n);
	if (n < 2 || n > SPLIT_MAX_FACTORS)
		return;
	occ = tc_arena_alloc(S->ar, (size_t)(n * nv) * sizeof(*occ));
	if (!occ) {
		S->d->oom = 1;
		return;
	}
	memset(occ, 0, (size_t)(n * nv) * sizeof(*occ));
	for (a = 0; a < n; a++)
		index_occurrences(S, f[a], occ + a * nv);
	for (a = tc_stmt_nlhs(s); a < S->vars.n; a++)
		for (b = a + 1; b < S->vars.n; b++) {
			const tc_stmt_var *va = S->vars.v[a], *vb = S->vars.v[b];
			const tc_expr *at_a = NULL, *at_b = NULL, *first, *second;
			int fa, fb;
			tc_buf fs;
			if (!similar_names(va->name, vb->name))
				continue;
			fa = only_factor(occ, n, nv, a, &at_a);
			fb = only_factor(occ, n, nv, b, &at_b);
			if (fa < 0 || fb < 0 || fa == fb)
				continue;
			/* the later occurrence is the suspect, the earlier the suggestion */
			first = at_a->loc.off <= at_b->loc.off ? at_a : at_b;
			second = first == at_a ? at_b : at_a;
			tc_buf_init(&fs);
			tc_ast_print_expr(f[first == at_a ? fa : fb], &fs);
			tc_buf_puts(&fs, " and ");
			tc_ast_print_expr(f[first == at_a ? fb : fa], &fs);
			tc_warning(S->d, second->loc,
				"reduction indices '%s' and '%s' are each read in only one factor of this product (%s), so each factor is reduced on its own and the results are multiplied; if '%s' is a typo for '%s', write '%s'; if separate reductions are meant, rename one index so that neither name starts the other and they differ in more than one character",
				first->name, second->name, fs.s ? fs.s : "?", second->name,
				first->name, first->name);
			tc_buf_free_diag(&fs, S->d);
		}
}

static int check_stmt(sema *S, tc_stmt *s, int idx)
{
	int i, ok = 1;
	tc_tensor_info *t;

	S->s = s;
	S->s_idx = idx;
	tc_vec_free(&S->vars);
	S->let_state = tc_arena_alloc(S->ar, (size_t)(s->nwhere + 1) * sizeof(int));
	if (!S->let_state)
		return -1;
	if (check_lhs(S, s) < 0)
		return -1;
	if (tensor_at(S, s->tensor)->poisoned)
		return -1;
	if (check_where_names(S, s) < 0)
		ok = 0;
	if (s->sub && check_scatter(S, s) < 0)
		ok = 0;
	if (check_expr(S, s->rhs, 0) < 0)
		ok = 0;
	for (i = 0; i < s->nwhere; i++)
		if (s->where[i].kind == TC_WHERE_EXISTS && check_expr(S, s->where[i].val, 0) < 0)
			ok = 0;
	if (ok)
		mark_let_reads_unchecked(S, s);
	if (ok && check_inlined_size(S, s) < 0)
		ok = 0;
	if (ok && check_where_ranges(S, s) < 0)
		ok = 0;
	/* a reduction index under '=' (with a gathered left side, '=' itself
	 * is the error: check_scatter) */
	if (s->red == TC_RED_ASSIGN && !s->sub) {
		for (i = tc_stmt_nlhs(s); i < S->vars.n; i++) {
			tc_stmt_var *v = S->vars.v[i];
			tc_error(S->d, v->loc,
				"'%s' is not an index of the left-hand side, but '=' is pointwise; use a reduction such as +=! to reduce over '%s', or make it an index of '%s'",
				v->name, v->name, s->lhs);
			ok = 0;
			break;
		}
	}
	if (!ok)
		return -1;
	t = tensor_at(S, s->tensor);
	if (s->red != TC_RED_ASSIGN && !s->init && t->first_write == -1) {
		if (t->kind == TC_TENSOR_TEMP) {
			tc_error(S->d, s->op_loc,
				"temporary '%s' is reduced with '%s' before any statement writes it; use '%s!' to start from the identity",
				s->lhs, tc_red_name(s->red, 0), tc_red_name(s->red, 0));
			return -1;
		}
		tc_warning(S->d, s->op_loc,
			"'%s' is reduced with '%s' without '!' before any statement writes it: it accumulates into the output's existing contents (use '%s!' to start from the identity)",
			s->lhs, tc_red_name(s->red, 0), tc_red_name(s->red, 0));
	}
	if (check_assign_type(S, s) < 0)
		return -1;
	warn_order(S, s, s->rhs);
	for (i = 0; s->sub && i < s->nidx; i++)
		if (s->sub[i])
			warn_order(S, s, s->sub[i]);
	for (i = 0; i < s->nwhere; i++)
		if (s->where[i].kind == TC_WHERE_LET)
			warn_order(S, s, s->where[i].val);
	warn_split_product(S, s);
	s->nvars = S->vars.n;
	s->vars = tc_arena_alloc(S->ar, (size_t)(s->nvars + 1) * sizeof(tc_stmt_var));
	if (!s->vars)
		return -1;
	for (i = 0; i < s->nvars; i++)
		s->vars[i] = *(tc_stmt_var *)S->vars.v[i];
	if (t->ndim < 0)
		t->ndim = s->nidx;
	if (tc_range_infer(S->ar, S->d, S->def, (tc_tensor_info **)S->tensors.v, s,
		    &S->checks) < 0)
		return -1;
	if (t->first_write == -1)
		t->first_write = idx;
	return 0;
}

static int check_def(sema *S, tc_def *def)
{
	int i, ok = 1, sig_bad = 0, nerr = S->d->nerrors;

	S->def = def;
	tc_vec_free(&S->tensors);
	tc_vec_free(&S->checks);
	if (is_builtin(def->name)) {
		tc_error(S->d, def->name_loc, "'%s' is a builtin function and cannot name a def",
			def->name);
		ok = 0;
	}
	/* statements are checked only against a sound signature; after a bad
	 * statement checking goes on, and a tensor whose first write failed is
	 * "poisoned" so that its later uses add no follow-on errors */
	if (check_signature(S) < 0) {
		ok = 0;
		sig_bad = 1;
	}
	if (def->nrets == 0)
		tc_warning(S->d, def->name_loc, "def '%s' has no outputs", def->name);
	for (i = 0; !sig_bad && i < def->nstmts; i++)
		if (check_stmt(S, def->stmts[i], i) < 0) {
			tc_stmt *s = def->stmts[i];
			ok = 0;
			if (s->tensor >= 0 && tensor_at(S, s->tensor)->first_write == -1)
				tensor_at(S, s->tensor)->poisoned = 1;
		}
	for (i = def->ninputs; !sig_bad && i < S->tensors.n; i++) {
			tc_tensor_info *t = tensor_at(S, i);
			if (t->kind == TC_TENSOR_OUTPUT && t->first_write < 0 && !t->poisoned) {
				tc_error(S->d, t->loc, "output '%s' is never written", t->name);
				ok = 0;
			}
		}
	def->ntensors = S->tensors.n;
	def->noutputs = def->nrets;
	def->tensors = tc_arena_alloc(S->ar, (size_t)(S->tensors.n + 1) * sizeof(tc_tensor_info));
	def->nchecks = S->checks.n;
	def->checks = tc_arena_alloc(S->ar, (size_t)(S->checks.n + 1) * sizeof(tc_check));
	if (!def->tensors || !def->checks)
		return -1;
	for (i = 0; i < S->tensors.n; i++)
		def->tensors[i] = *tensor_at(S, i);
	for (i = 0; i < S->checks.n; i++)
		def->checks[i] = *(tc_check *)S->checks.v[i];
	def->ok = ok && S->d->nerrors == nerr;
	return def->ok ? 0 : -1;
}

tc_stat tc_sema_check(__tc_keep tc_program *p, __tc_keep tc_diags *d)
{
	sema S;
	int i, j, ok = 1;

	memset(&S, 0, sizeof(S));
	S.d = d;
	S.ar = p->arena;
	S.src = p->src;
	for (i = 0; i < p->ndefs; i++) {
		for (j = 0; j < i; j++)
			if (!strcmp(p->defs[j]->name, p->defs[i]->name)) {
				tc_error(d, p->defs[i]->name_loc, "def '%s' is defined twice",
					p->defs[i]->name);
				ok = 0;
			}
		if (check_def(&S, p->defs[i]) < 0)
			ok = 0;
	}
	tc_vec_free(&S.tensors);
	tc_vec_free(&S.checks);
	tc_vec_free(&S.vars);
	if (tc_arena_failed(p->arena))
		d->oom = 1;
	if (d->oom)
		return TC_ERR;
	return ok ? TC_OK : TC_ERR;
}

int tc_expr_reads_marked(__tc_keep const tc_expr *e, const int *marked)
{
	int i;
	if ((e->kind == TC_AST_CALL || e->kind == TC_AST_IDENT) && e->ref == TC_REF_TENSOR &&
		marked[e->ref_id])
		return 1;
	for (i = 0; i < e->nargs; i++)
		if (tc_expr_reads_marked(e->args[i], marked))
			return 1;
	return 0;
}

int tc_stmt_reads_marked(__tc_keep const tc_stmt *s, const int *marked)
{
	int i;
	if (tc_expr_reads_marked(s->rhs, marked))
		return 1;
	for (i = 0; i < s->nwhere; i++)
		if (s->where[i].kind != TC_WHERE_RANGE && tc_expr_reads_marked(s->where[i].val, marked))
			return 1;
	for (i = 0; s->sub && i < s->nidx; i++)
		if (s->sub[i] && tc_expr_reads_marked(s->sub[i], marked))
			return 1;
	return 0;
}
