/* Size expressions: quasi-affine integer expressions over the size
 * parameters of a def (and, for bounds that depend on outer loops, index
 * variables).  They describe tensor extents and index ranges, e.g.
 * "B - K + 1" or "floor((H - KH) / 2) + 1" or "min(M, N)".  Every size
 * expression is representable as an isl piecewise quasi-affine expression.
 *
 * Nodes live in an arena and are immutable; constructors simplify eagerly
 * (constant folding, affine normal form, min/max of comparable operands), so
 * structurally equal results mean equal expressions in the common cases.
 *
 * Ownership: every node lives in the arena passed to its constructor and is
 * freed with it; nothing here is freed by the caller.  A result may be one
 * of its operands or share their nodes, so operands must live at least as
 * long as the result (in practice: one arena per compilation). */
#ifndef TC_SEXPR_H
#define TC_SEXPR_H

#include "util.h"

/* Kinds of size expression nodes. */
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

/* A size expression node (immutable, in an arena): c and id as the kind
 * says, operands a and b. */
typedef struct tc_sexpr {
	tc_sx_kind kind;
	int64_t c;
	int id;
	const struct tc_sexpr *a, *b;
} tc_sexpr;

/* Constructors: the result in ar (or an operand itself, when it
 * simplifies to one); NULL when the arena runs out of memory or an operand
 * is NULL. */
const tc_sexpr *tc_sx_const(__tc_keep tc_arena *ar, int64_t c);
const tc_sexpr *tc_sx_param(__tc_keep tc_arena *ar, int id);
const tc_sexpr *tc_sx_var(__tc_keep tc_arena *ar, int id);
const tc_sexpr *tc_sx_add(__tc_keep tc_arena *ar, __tc_keep const tc_sexpr *a,
	__tc_keep const tc_sexpr *b);
const tc_sexpr *tc_sx_sub(__tc_keep tc_arena *ar, __tc_keep const tc_sexpr *a,
	__tc_keep const tc_sexpr *b);
const tc_sexpr *tc_sx_scale(__tc_keep tc_arena *ar, int64_t c, __tc_keep const tc_sexpr *a);
const tc_sexpr *tc_sx_floordiv(__tc_keep tc_arena *ar, __tc_keep const tc_sexpr *a, int64_t c);
const tc_sexpr *tc_sx_ceildiv(__tc_keep tc_arena *ar, __tc_keep const tc_sexpr *a, int64_t c);
const tc_sexpr *tc_sx_mod(__tc_keep tc_arena *ar, __tc_keep const tc_sexpr *a, int64_t c);
const tc_sexpr *tc_sx_min(__tc_keep tc_arena *ar, __tc_keep const tc_sexpr *a,
	__tc_keep const tc_sexpr *b);
const tc_sexpr *tc_sx_max(__tc_keep tc_arena *ar, __tc_keep const tc_sexpr *a,
	__tc_keep const tc_sexpr *b);

/* The largest size (sizes and extents are int32 values). */
#define TC_SX_SIZE_MAX INT64_C(2147483647)

/* Whether e is a constant; if so, it goes to *c (c may be NULL). */
int tc_sx_is_const(__tc_keep const tc_sexpr *e, int64_t *c);
/* If a - b simplifies to a constant, store it in *d and return 1. */
int tc_sx_const_diff(__tc_keep const tc_sexpr *a, __tc_keep const tc_sexpr *b, int64_t *d);
/* Whether a and b are structurally equal. */
int tc_sx_equal(__tc_keep const tc_sexpr *a, __tc_keep const tc_sexpr *b);
/* The sign of e over all parameter values from 1 to TC_SX_SIZE_MAX (sizes
 * always are), by interval bounds: 1 when e >= 0 always, -1 when e < 0
 * always, 0 when it depends on the sizes (or cannot be shown). */
int tc_sx_sign(__tc_keep const tc_sexpr *e);
/* Whether building e overflowed int64 somewhere: a constant, coefficient or
 * constant term that a constructor could not fold (4611686018427387904*4)
 * and kept as an unfolded node, whose value is then undefined. */
int tc_sx_overflows(__tc_keep const tc_sexpr *e);
/* Whether e mentions an index variable. */
int tc_sx_has_var(__tc_keep const tc_sexpr *e);
/* Whether e mentions parameter (kind TC_SX_PARAM) or variable (TC_SX_VAR)
 * number id. */
int tc_sx_mentions(__tc_keep const tc_sexpr *e, tc_sx_kind kind, int id);

/* Evaluate with the given parameter and variable values.  Returns -1 (and
 * leaves *out alone) on overflow. */
tc_stat tc_sx_eval(__tc_keep const tc_sexpr *e, __tc_keep const int64_t *params,
	__tc_keep const int64_t *vars, int64_t *out);

/* Print e with the given names (names of params and vars; vars may be NULL). */
void tc_sx_print(__tc_keep const tc_sexpr *e, __tc_keep const char *const *params,
	__tc_keep const char *const *vars, __tc_keep tc_buf *b);

#endif
