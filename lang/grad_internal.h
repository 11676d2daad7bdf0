/* Private to lang/grad*.c: what the three files of the derivation share.
 * No other file may include it; the derivation's API is grad.h.
 *
 *   grad.c         values (versions of tensors), the checks, the assembly
 *                  of the backward def (temporaries, contributions
 *                  merged, the forward with saves), tc_grad_derive; it calls
 *   grad_access.c  the derived statements (mk_stmt, where clauses, lets,
 *                  values read) and the adjoints of reads that are not
 *                  plain: gathers, scatters, the forward's path
 *                  conditions; which calls
 *   grad_expr.c    simplifying constructors, the derivative table, affine
 *                  forms of subscripts.
 * Nothing calls back up (tests/test_layers.py checks it).
 *
 * Every node is allocated in the derivation's arena (g->ar); nothing here
 * is freed by a caller.  Each function is documented where it is defined. */
#ifndef TC_LANG_GRAD_INTERNAL_H
#define TC_LANG_GRAD_INTERNAL_H

#include "range.h"

#include <stdint.h>

/* The state of one derivation. */
typedef struct grad_ctx {
	tc_arena *ar;
	const tc_def *def;
	tc_diags *d;
	int failed; /* an error was reported */
	/* Values: every write of a tensor that is not its first (an in-place
	 * update) makes a new version.  Value t is version 0 of tensor t, the
	 * later versions are numbered from ntensors on.  The last version of a
	 * tensor keeps its name; earlier versions of a tensor written several
	 * times are named T_v1, T_v2, ... in the backward text. */
	int nval;
	int *val_t;         /* the tensor of each value */
	int *final;         /* the value is its tensor's last version */
	const char **vname; /* each value's name */
	int *nver;          /* per tensor: its number of versions */
	int *stmt_val;      /* per forward statement: the value it writes */
	const tc_stmt **ss; /* per forward statement: it with values' names */
	const char **given; /* per tensor: the name of the given adjoint (outputs) */
	/* per value */
	const char **adj; /* adjoint name ("d_X") */
	int *need;        /* the adjoint is wanted */
	int *have;        /* the adjoint has a contribution (or is given) */
	int *ncontrib;    /* contributions emitted to the adjoint so far */
	int *recompute;   /* a temporary value recomputed (or saved, with saves) */
	int *save;        /* a returned value (an output) is an input of the backward */
	tc_vec stmts;     /* backward statements, in order */
	tc_vec whole;     /* those that write their whole tensor pointwise */
	const tc_stmt *cur; /* the forward statement differentiated (its lets) */
	int cur_si;         /* its number */
	int *let_used;    /* per where clause of cur: a derived statement needs it */
} grad_ctx;

/* An affine expression of the index variables of g->cur (numbers 0 to
 * nvars - 1) and of the new left-hand indices of a derived statement
 * (nvars on), with a constant term over the sizes. */
typedef struct aff {
	int64_t *c;
	const tc_sexpr *k;
} aff;

/* ---- grad_expr.c ---- */

int tc_grad_is_float(tc_dtype t);
tc_expr *tc_grad_mk_node(grad_ctx *g, tc_ast_kind kind, int nargs);
tc_expr *tc_grad_mk_float(grad_ctx *g, double v);
tc_expr *tc_grad_mk_bin(grad_ctx *g, tc_ast_op op, tc_expr *a, tc_expr *b);
tc_expr *tc_grad_mk_neg(grad_ctx *g, tc_expr *a);
tc_expr *tc_grad_mk_add(grad_ctx *g, tc_expr *a, tc_expr *b);
tc_expr *tc_grad_mk_mul(grad_ctx *g, tc_expr *a, tc_expr *b);
tc_expr *tc_grad_mk_ident(grad_ctx *g, const char *name);
tc_expr *tc_grad_mk_read(grad_ctx *g, const char *name, int n, const char *const *idx);
tc_expr *tc_grad_mk_ternary(grad_ctx *g, tc_expr *c, tc_expr *a, tc_expr *b);
/* c ? a : 0, an integer (a scatter's subscript where c fails). */
tc_expr *tc_grad_mk_ternary_int(grad_ctx *g, tc_expr *c, tc_expr *a);
tc_expr *tc_grad_mk_int(grad_ctx *g, int64_t v);
tc_expr *tc_grad_mk_cast(grad_ctx *g, tc_dtype dt, tc_expr *a);
tc_expr *tc_grad_sx_expr(grad_ctx *g, const tc_stmt *s, const tc_sexpr *x);
tc_expr *tc_grad_mk_and(grad_ctx *g, tc_expr *a, tc_expr *b);
int tc_grad_same_read(const tc_expr *e, int t, const tc_expr *r);
tc_expr *tc_grad_diff(grad_ctx *g, const tc_expr *e, int t, const tc_expr *r);
int tc_grad_var_of(const tc_stmt *s, const char *name);
int tc_grad_expr_equal(const tc_expr *a, const tc_expr *b);
int tc_grad_aff_init(grad_ctx *g, aff *a, int nv);
void tc_grad_aff_add(grad_ctx *g, aff *a, const aff *b, int64_t m, int nv);
int tc_grad_aff_of(grad_ctx *g, const tc_expr *e, aff *a, int nv);
tc_expr *tc_grad_pad_tests(grad_ctx *g, const tc_expr *e, int t, const tc_expr *r, tc_expr *acc);
tc_expr *tc_grad_mk_pad(grad_ctx *g, tc_expr *e);

/* ---- grad_access.c ---- */

int tc_grad_val_of_read(const grad_ctx *g, const tc_expr *e);
void tc_grad_use_value(grad_ctx *g, int v);
int tc_grad_covers(const tc_stmt *s, int v, const tc_sexpr *ext);
int tc_grad_bounded_in(const tc_expr *e, const char *name);
void tc_grad_mark_temps(grad_ctx *g, const tc_expr *e);
void tc_grad_mark_lets(grad_ctx *g, const tc_expr *e);
tc_stmt *tc_grad_mk_stmt(grad_ctx *g, const char *lhs, int nidx, const char **idx, tc_red red,
	int init, tc_expr *rhs);
int tc_grad_attach_where(grad_ctx *g, tc_stmt *b, int nextra, const int *extra);
int tc_grad_name_taken(const tc_def *def, const char *name);
int tc_grad_plain_read(const grad_ctx *g, const tc_expr *r);
int tc_grad_reads_any(const tc_expr *e);
int tc_grad_read_within(grad_ctx *g, const tc_expr *r, int x);
int tc_grad_gathered_read(grad_ctx *g, const tc_expr *r);
tc_expr *tc_grad_path_cond(grad_ctx *g, const tc_expr *e, const tc_expr *r, int *found);
tc_expr *tc_grad_guarded(grad_ctx *g, tc_expr *test, tc_expr *p);
int tc_grad_bounded_where(grad_ctx *g, const char *name);
/* Whether e (NULL: no) mentions the identifier name. */
int tc_grad_mentions(const tc_expr *e, const char *name);
tc_stmt *tc_grad_scatter_stmt(grad_ctx *g, const tc_expr *r, int xv, tc_expr *p,
	tc_expr *when);
tc_stmt *tc_grad_gather_stmt(grad_ctx *g, const tc_expr *r, int x, int xv, tc_expr *p,
	int *unsolvable);
int tc_grad_reads_name(const tc_expr *e, const char *name);

#endif
