/* Size expressions: quasi-affine integer expressions over the size
 * parameters of a def (and, for bounds that depend on outer loops, index
 * variables).  They describe tensor extents and index ranges, e.g.
 * "B - K + 1" or "floor((H - KH) / 2) + 1" or "min(M, N)".  Every size
 * expression is representable as an isl piecewise quasi-affine expression.
 *
 * Nodes live in an arena and are immutable; constructors simplify eagerly
 * (constant folding, affine normal form, min/max of comparable operands), so
 * structurally equal results mean equal expressions in the common cases. */
#ifndef TC_SEXPR_H
#define TC_SEXPR_H

#include "util.h"

typedef enum tc_sx_kind {
	TC_SX_CONST,    /* c */
	TC_SX_PARAM,    /* size parameter number id */
	TC_SX_VAR,      /* index variable number id (of a statement) */
	TC_SX_ADD,      /* a + b */
	TC_SX_MUL,      /* c * a */
	TC_SX_FLOORDIV, /* floor(a / c), c > 0 */
	TC_SX_MOD,      /* a - c * floor(a / c), c > 0 */
	TC_SX_MIN,      /* min(a, b) */
	TC_SX_MAX,      /* max(a, b) */
} tc_sx_kind;

typedef struct tc_sexpr {
	tc_sx_kind kind;
	int64_t c;
	int id;
	const struct tc_sexpr *a, *b;
} tc_sexpr;

/* Constructors: NULL when the arena runs out of memory or an operand is NULL. */
const tc_sexpr *tc_sx_const(tc_arena *ar, int64_t c);
const tc_sexpr *tc_sx_param(tc_arena *ar, int id);
const tc_sexpr *tc_sx_var(tc_arena *ar, int id);
const tc_sexpr *tc_sx_add(tc_arena *ar, const tc_sexpr *a, const tc_sexpr *b);
const tc_sexpr *tc_sx_sub(tc_arena *ar, const tc_sexpr *a, const tc_sexpr *b);
const tc_sexpr *tc_sx_scale(tc_arena *ar, int64_t c, const tc_sexpr *a);
const tc_sexpr *tc_sx_floordiv(tc_arena *ar, const tc_sexpr *a, int64_t c);
const tc_sexpr *tc_sx_ceildiv(tc_arena *ar, const tc_sexpr *a, int64_t c);
const tc_sexpr *tc_sx_mod(tc_arena *ar, const tc_sexpr *a, int64_t c);
const tc_sexpr *tc_sx_min(tc_arena *ar, const tc_sexpr *a, const tc_sexpr *b);
const tc_sexpr *tc_sx_max(tc_arena *ar, const tc_sexpr *a, const tc_sexpr *b);

/* Whether e is the constant c. */
int tc_sx_is_const(const tc_sexpr *e, int64_t *c);
/* If a - b simplifies to a constant, store it in *d and return 1. */
int tc_sx_const_diff(const tc_sexpr *a, const tc_sexpr *b, int64_t *d);
int tc_sx_equal(const tc_sexpr *a, const tc_sexpr *b);
/* The sign of e over all parameter values of at least 1 (sizes always are),
 * by interval bounds: 1 when e >= 0 always, -1 when e < 0 always, 0 when
 * it depends on the sizes (or cannot be shown). */
int tc_sx_sign(const tc_sexpr *e);
/* Whether e mentions an index variable. */
int tc_sx_has_var(const tc_sexpr *e);
/* Whether e mentions parameter (kind TC_SX_PARAM) or variable (TC_SX_VAR)
 * number id. */
int tc_sx_mentions(const tc_sexpr *e, tc_sx_kind kind, int id);

/* Evaluate with the given parameter and variable values.  Returns -1 (and
 * leaves *out alone) on overflow. */
tc_stat tc_sx_eval(const tc_sexpr *e, const int64_t *params, const int64_t *vars,
	int64_t *out);

/* Print e with the given names (names of params and vars; vars may be NULL). */
void tc_sx_print(const tc_sexpr *e, const char *const *params,
	const char *const *vars, tc_buf *b);

#endif
