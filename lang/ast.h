/* The abstract syntax tree of a .tc program, decorated by semantic analysis.
 *
 * Every node carries its source location.  The parser fills the syntactic
 * fields; tc_sema_check fills the fields marked "sema" (resolved names,
 * types, tensors of the def, inferred ranges and shapes).  All nodes live in
 * the program's arena.
 *
 * Ownership: every node, name and array of the AST (and what sema adds)
 * lives in the arena passed to tc_parse and is freed with it; nothing here
 * is freed by the caller.  A program borrows its source (src), which must
 * outlive it. */
#ifndef TC_AST_H
#define TC_AST_H

#include "diag.h"
#include "sexpr.h"
#include "types.h"

#define TC_MAX_RANK 8

/* Kinds of expression nodes. */
typedef enum tc_ast_kind {
	TC_AST_INT,     /* integer literal (ival), int32 */
	TC_AST_FLOAT,   /* floating literal (fval), float32 */
	TC_AST_IDENT,   /* name */
	TC_AST_CALL,    /* name(args): tensor read or builtin call */
	TC_AST_CAST,    /* cast_type(args[0]) */
	TC_AST_UNARY,   /* op args[0]: TC_OP_NEG or TC_OP_NOT */
	TC_AST_BINARY,  /* args[0] op args[1] */
	TC_AST_TERNARY, /* args[0] ? args[1] : args[2] */
} tc_ast_kind;

/* Operators of unary and binary expressions. */
typedef enum tc_ast_op {
	TC_AOP_ADD, /* + */
	TC_AOP_SUB, /* - */
	TC_AOP_MUL, /* * */
	TC_AOP_DIV, /* / (floor division on integers) */
	TC_AOP_MOD, /* % (floor modulo on integers) */
	TC_AOP_LT,  /* < */
	TC_AOP_GT,  /* > */
	TC_AOP_LE,  /* <= */
	TC_AOP_GE,  /* >= */
	TC_AOP_EQ,  /* == */
	TC_AOP_NE,  /* != */
	TC_AOP_AND, /* && */
	TC_AOP_OR,  /* || */
	TC_AOP_NEG, /* unary - */
	TC_AOP_NOT, /* unary ! */
} tc_ast_op;

/* What an identifier or call names (sema). */
typedef enum tc_ref_kind {
	TC_REF_NONE,
	TC_REF_INDEX,   /* index variable of the statement: ref_id = var number */
	TC_REF_SIZE,    /* size parameter: ref_id = size number */
	TC_REF_TENSOR,  /* tensor read: ref_id = tensor number */
	TC_REF_BUILTIN, /* builtin call: ref_id = tc_builtin_id */
	TC_REF_LET,     /* let name: ref_id = where-clause number */
	TC_REF_PAD,     /* pad(e, v) (a call): e where its reads are in bounds, else v */
} tc_ref_kind;

/* An expression node: the fields its kind uses (see tc_ast_kind), its
 * operands (args), and what sema infers. */
typedef struct tc_expr {
	tc_ast_kind kind;
	tc_loc loc; /* the whole expression */
	int64_t ival;
	double fval;
	const char *name; /* IDENT, CALL */
	tc_loc name_loc;
	tc_ast_op op;
	tc_dtype cast_type;
	int nargs;
	struct tc_expr **args;
	int depth; /* height of the tree (a leaf is 1), bounded by the parser */
	/* sema */
	tc_dtype type;
	tc_dtype optype; /* the type the operands are converted to */
	int weak; /* an untyped literal (or an expression of literals only) */
	tc_ref_kind ref;
	int ref_id;
	int guarded; /* inside a branch of ?: or an argument of pad (may not be
		      * evaluated, or may read out of bounds) */
} tc_expr;

/* Reduction operators of statements. */
typedef enum tc_red {
	TC_RED_ASSIGN, /* = */
	TC_RED_ADD,    /* += */
	TC_RED_MUL,    /* *= */
	TC_RED_MIN,    /* min= */
	TC_RED_MAX,    /* max= */
} tc_red;

/* Kinds of where clauses. */
typedef enum tc_where_kind {
	TC_WHERE_RANGE,  /* name in lo:hi */
	TC_WHERE_LET,    /* name = val */
	TC_WHERE_EXISTS, /* exists val */
} tc_where_kind;

/* A where clause of a statement. */
typedef struct tc_where {
	tc_where_kind kind;
	tc_loc loc;
	const char *name;
	tc_loc name_loc;
	tc_expr *lo, *hi; /* RANGE */
	tc_expr *val;     /* LET value, EXISTS expression */
} tc_where;

/* An index variable of a statement (sema): its inferred half-open range. */
typedef struct tc_stmt_var {
	const char *name;
	tc_loc loc; /* first occurrence */
	int is_reduction;
	const tc_sexpr *lo, *hi;
} tc_stmt_var;

/* A statement: lhs(idx...) red rhs where ..., and what sema infers. */
typedef struct tc_stmt {
	tc_loc loc; /* the whole statement */
	const char *lhs;
	tc_loc lhs_loc;
	int nidx;
	const char **idx; /* NULL for a gathered subscript (sub[k]) */
	tc_loc *idx_loc;
	/* Gathered left-hand subscripts (a scatter, T(I(i), j) +=! ...): NULL
	 * when every subscript is an index name; else nidx entries, sub[k] the
	 * expression of dimension k where it is not a name (idx[k] NULL). */
	tc_expr **sub;
	tc_red red;
	int init; /* the '!' of +=! etc. */
	tc_loc op_loc;
	tc_expr *rhs;
	tc_expr *equiv; /* the call after <=>, kept for printing only */
	int nwhere;
	tc_where *where;
	/* sema */
	int tensor;
	int nvars; /* left-hand indices first (in order), then reduction indices */
	tc_stmt_var *vars;
} tc_stmt;

/* The number of left-hand index names of s (every subscript but the
 * gathered ones): its left-hand variables, vars 0 .. tc_stmt_nlhs(s)-1. */
static inline int tc_stmt_nlhs(const tc_stmt *s)
{
	int k, n = 0;
	if (!s->sub)
		return s->nidx;
	for (k = 0; k < s->nidx; k++)
		n += !s->sub[k];
	return n;
}

/* A dimension in a type: a size parameter name or a constant. */
typedef struct tc_dim {
	const char *name; /* NULL for a constant or an expression */
	int64_t value;
	tc_expr *expr; /* an extent expression of sizes (N - K + 1), or NULL */
	tc_loc loc;
} tc_dim;

/* A parameter or return value of a def as written. */
typedef struct tc_decl {
	const char *name;
	tc_loc loc, name_loc;
	tc_dtype dtype; /* TC_T_NONE: untyped return value */
	tc_loc type_loc;
	int has_shape; /* a parenthesised dimension list was given */
	int ndims;
	tc_dim *dims;
} tc_decl;

/* The role of a tensor in a def. */
typedef enum tc_tensor_kind {
	TC_TENSOR_INPUT,
	TC_TENSOR_OUTPUT,
	TC_TENSOR_TEMP, /* written, not returned */
} tc_tensor_kind;

/* A tensor of a def (sema): inputs in order, then outputs, then temporaries. */
typedef struct tc_tensor_info {
	const char *name;
	tc_tensor_kind kind;
	tc_dtype dtype;
	int ndim;
	const tc_sexpr **ext; /* extents over the size parameters */
	tc_loc loc;
	int declared_shape; /* an output whose shape was written in the -> list */
	int first_write; /* number of the first statement writing it, or -1 */
	int poisoned; /* its first statement had an error (sema only) */
} tc_tensor_info;

/* A condition on the sizes that could not be proven statically (sema):
 * e >= 0 (or e == 0) must hold for the actual sizes. */
typedef struct tc_check {
	const tc_sexpr *e;
	int eq; /* e == 0 rather than e >= 0 */
	const char *msg;
	tc_loc loc;
} tc_check;

/* A def: its signature and statements as parsed, and what sema infers
 * (sizes, tensors, conditions on the sizes). */
typedef struct tc_def {
	const char *name;
	tc_loc loc, name_loc;
	int nparams, nrets, nstmts;
	tc_decl *params, *rets;
	tc_stmt **stmts;
	/* sema */
	int ok; /* checked without errors */
	int nsizes;
	const char **sizes;
	tc_loc *size_loc;
	int ntensors, ninputs, noutputs;
	tc_tensor_info *tensors;
	int nchecks;
	tc_check *checks;
} tc_def;

/* A parsed file: its defs, in the arena they live in (source borrowed). */
typedef struct tc_program {
	const tc_source *src;
	tc_arena *arena;
	int ndefs;
	tc_def **defs;
} tc_program;

/* The spelling of a reduction operator ("+=!", "=", ...) and of an
 * operator ("+", "&&", ...); static strings. */
const char *tc_red_name(tc_red red, int init);
const char *tc_ast_op_name(tc_ast_op op);

/* Parse src into a program allocated in ar (the arena's, not the
 * caller's); the program keeps src, borrowed, which must outlive it.
 * Syntax errors go to d; the parser recovers at the next 'def'.  Returns
 * NULL only when out of memory. */
tc_program *tc_parse(__tc_keep tc_arena *ar, __tc_keep const tc_source *src,
	__tc_keep tc_diags *d);

/* Check every def of p: names, types, range inference; what it infers is
 * allocated in p's arena.  Errors and warnings go to d; each def's ok field
 * says whether it passed.  Returns -1 if any def has an error. */
tc_stat tc_sema_check(__tc_keep tc_program *p, __tc_keep tc_diags *d);

/* Whether expression e of a checked def reads a tensor t with marked[t]
 * set (marked: one entry per tensor of the def). */
int tc_expr_reads_marked(__tc_keep const tc_expr *e, const int *marked);
/* The same for statement s: its right side, its lets and exists clauses
 * and its gathered left-hand subscripts. */
int tc_stmt_reads_marked(__tc_keep const tc_stmt *s, const int *marked);

/* Find a def by name (p's), NULL if absent. */
tc_def *tc_program_find(__tc_keep const tc_program *p, const char *name);

/* Print the AST of a def in a readable, fully parenthesised form, with the
 * results of sema (types, ranges) when available (tcomp emit --stage
 * syntax: a tree dump, not .tc text). */
void tc_ast_print_def(__tc_keep const tc_def *def, __tc_keep tc_buf *b);
/* Print an expression as source text, parenthesised as by tc_ast_print_source,
 * names as written. */
void tc_ast_print_expr(__tc_keep const tc_expr *e, __tc_keep tc_buf *b);

/* What a name passed to a tc_rename_fn stands for. */
typedef enum tc_name_kind {
	TC_NAME_DEF,    /* the def's name (passed first, once) */
	TC_NAME_GLOBAL, /* a size or tensor in the signature, or the tensor a
	                 * statement writes: that statement starts here */
	TC_NAME_LOCAL,  /* a statement's left-hand index, let name or where-range name */
	TC_NAME_USE,    /* an identifier or the name of a call in an expression:
	                 * any of the above, or a builtin function */
} tc_name_kind;

/* A renamer: the spelling of name (of the given kind) in the printed text.
 * ud is the caller's state.  The result is borrowed: the printer copies it
 * at once, so it need only live until the renamer is called again.  Within
 * a statement, a renamer should spell one name the same way every time. */
typedef const char *(*tc_rename_fn)(void *ud, tc_name_kind kind, const char *name);

/* Print def as .tc text that tc_parse reads back (the one printer of .tc
 * syntax; the canonical form, tc_ir_canonical, is this printer with a
 * renaming renamer):
 *
 *   def NAME(float32(M,K) A, float32(K,N) B) -> (C) {
 *     C(m,n) +=! A(m, r_k) * B(r_k, n) where r_k in 0:K, x = ..., exists ...
 *   }
 *
 * The signature and statements as written (every statement with its
 * reduction operator, where ranges, lets and exists clauses, in their
 * order), one statement a line indented by two spaces, the text ending with
 * a newline.  Not kept: comments, layout, the spelling of types (printed
 * float32, float64, ...: tc_dtype_name), of numbers (integers in decimal,
 * floats with the fewest significant digits, at least 9, that read back
 * as the same double, and a '.' or an exponent) and
 * parentheses: every binary or conditional operand of a binary operator,
 * every conditional operand of a conditional, and every operand of a unary
 * operator that is not a leaf, call or cast is parenthesised, and no other
 * expression is.  The '<=>' annotation is dropped (it has no meaning).
 * Limit: a chain a + b + ... prints with one level of parentheses per
 * operator, and the parser rejects 200 levels, so the text of a chain of
 * 200 or more operators does not parse back.  Sema need not have run;
 * nothing of its results is printed.
 *
 * rn NULL prints every name as written.  Otherwise every identifier goes
 * through rn(ud, kind, name), builtin names included (a renamer should
 * return those unchanged), in the order of the text, with one addition:
 * before a statement's right-hand side, each of its let names is passed
 * (TC_NAME_LOCAL), so that a renamer numbering names by first appearance
 * numbers lets before the right side's other names.  A statement's first
 * name is its left-hand tensor, its only TC_NAME_GLOBAL: a renamer can
 * scope local names to their statement by forgetting them there.  ud is
 * the renamer's, borrowed.  Out of memory is recorded in b (b->oom); a
 * renamer that fails records that itself. */
void tc_ast_print_source(__tc_keep const tc_def *def, tc_rename_fn rn, __tc_keep void *ud,
	__tc_keep tc_buf *b);

/* The def's signature with inferred output types and shapes, e.g.
 * "def mm(float32(M,K) A, float32(K,N) B) -> (float32(M,N) C)". */
void tc_def_signature(__tc_keep const tc_def *def, __tc_keep tc_buf *b);

#endif
