/* The tensor IR: the checked program lowered to functions over tensors and
 * statements with explicit types.
 *
 * Every expression node has a type, and the operands of an operation have
 * the type the operation computes in: lowering makes every promotion an
 * explicit TC_OP_CAST, so backends never re-derive type rules.  Statement
 * domains are given as index variables with half-open bounds that are size
 * expressions (over size parameters and, in general, outer index variables),
 * which map directly onto isl sets.
 *
 * Ownership: IR functions, their expressions and names live in the arena
 * passed in and are freed with it; nothing here is freed by the caller.  A
 * function shares the AST's names, size expressions and checks and borrows
 * its source, so the program's arena and source must outlive it.  The
 * rewrites (pack, inline, share) return their argument itself or a new
 * function in ar sharing its unchanged parts.  A tc_tensor is the caller's
 * struct and borrows its data. */
#ifndef TC_IR_H
#define TC_IR_H

#include "../lang/ast.h"

/* Operations of IR expressions. */
typedef enum tc_ir_op {
	TC_OP_CONST,  /* literal: c.i for integers and bool, c.f for floats */
	TC_OP_INDEX,  /* index variable id of the statement (int32) */
	TC_OP_SIZE,   /* size parameter id (int32) */
	TC_OP_READ,   /* tensor id at args[0..nargs) (integer subscripts) */
	TC_OP_CAST,   /* convert args[0] to type */
	TC_OP_NEG,    /* -a */
	TC_OP_NOT,    /* !a (bool) */
	TC_OP_ADD,    /* a + b */
	TC_OP_SUB,    /* a - b */
	TC_OP_MUL,    /* a * b */
	TC_OP_DIV,    /* a / b: floor division on integers */
	TC_OP_MOD,    /* a % b: floor modulo (result has the sign of b) */
	TC_OP_LT,     /* a < b (bool result; a, b of a common type) */
	TC_OP_GT,     /* a > b */
	TC_OP_LE,     /* a <= b */
	TC_OP_GE,     /* a >= b */
	TC_OP_EQ,     /* a == b */
	TC_OP_NE,     /* a != b */
	TC_OP_AND,    /* a && b (bool, short-circuit) */
	TC_OP_OR,     /* a || b (bool, short-circuit) */
	TC_OP_SELECT, /* a ? b : c (only the chosen branch is evaluated) */
	TC_OP_CALL,   /* builtin id (tc_builtin_id) on args */
} tc_ir_op;

/* An IR expression node: op on args (nargs of them) computing a value of
 * type; c holds a constant, id the variable, size, tensor or builtin. */
typedef struct tc_ir_expr {
	tc_ir_op op;
	tc_dtype type;
	tc_loc loc;
	union {
		int64_t i; /* integers (unsigned stored as their bits) and bool */
		double f;  /* floats */
	} c;
	int id;
	int nargs;
	struct tc_ir_expr **args;
} tc_ir_expr;

/* An index variable of a statement and its half-open range [lo, hi). */
typedef struct tc_ir_var {
	const char *name;
	int is_reduction;
	const tc_sexpr *lo, *hi;
} tc_ir_var;

/* A statement: for every point of the domain (vars) where guard holds, in
 * textual order of statements, tensor[lhs] op= rhs.  With init, the left-hand element is
 * first set to the identity of the operator (before the reduction indices
 * are iterated).  Left-hand variables come first in vars. */
typedef struct tc_ir_stmt {
	int tensor;
	int nlhs;   /* left-hand indices are vars 0 .. nlhs-1, in order */
	tc_red red;
	int init;
	tc_ir_expr *rhs;
	int nvars;
	tc_ir_var *vars;
	tc_loc loc;
	int pack; /* a copy of an input made by tc_ir_pack: runs before the others */
	tc_ir_expr *guard; /* NULL, or a bool conjunction of comparisons of
			    * affine integer expressions: the update runs only
			    * at the points of vars where it holds (the init of
			    * '!' still covers every left-hand point).  Lowering
			    * sets it on a sum reduction over a pad(e, 0) factor,
			    * from the pad's bounds tests (ir/lower.c) */
	/* A scatter (a gathered left-hand subscript, T(I(i), j) += ...): NULL
	 * for every other statement.  Else the subscripts of the element
	 * written, one per dimension of the tensor (a plain index as an
	 * TC_OP_INDEX, a gather as its expression, checked in bounds at run
	 * time), nlhs is 0 and init is 0: lowering puts the '!' in a statement
	 * of its own before it, which sets the whole tensor to the identity.
	 * Its red is + (sums), min or max: the element may differ between
	 * instances, so a scatter is never a reduction into one element, and
	 * the passes that rely on that (register tiles, vecreduce, the GPU's
	 * block reductions, fusion, packing, widening) leave it alone. */
	tc_ir_expr **sub;
	/* A partial sum of tc_ir_partials (ir/partial.c): index 0 numbers
	 * chunks of part_rows rows of the original reduction, which started
	 * at row part_lo; index nlhs walks a chunk's rows.  0 otherwise. */
	int64_t part_rows, part_lo;
} tc_ir_stmt;

/* A tensor of an IR function: name, role, element type and extents. */
typedef struct tc_ir_tensor {
	const char *name;
	tc_tensor_kind kind;
	tc_dtype dtype;
	int ndim;
	const tc_sexpr **ext;
	tc_loc loc;
	int rowbuf; /* a temporary tc_ir_share made (or a convolution's
		     * channels-last output, ir/pack.c) that is live one row
		     * at a time when the rows' loops are fused: the other
		     * rewrites leave it alone, and the workspace puts it last
		     * (runtime/compiled.c).  The schedule decides, for it and
		     * every other temporary (polyhedral/contract.c), whether
		     * it is kept in a per-thread row buffer instead of its
		     * workspace region */
	int widened; /* a float32 accumulator tc_ir_widen made for a 16-bit
		      * float tensor: its reductions run in the interpreter's
		      * order (no vecreduce, no fastmath), so that the 16-bit
		      * result rounded from it is the interpreter's, bit for bit */
	int panel;   /* 0: row-major.  Else a packing copy (tc_ir_pack) laid
		      * out in panels of this many columns of its last
		      * dimension, which it divides: element (r..., c) at
		      * ((c / panel) * R + row(r...)) * panel + c % panel, R
		      * the product of the other extents and row() their
		      * row-major offset, so that a register tile's columns
		      * over the whole reduction are one contiguous stream */
} tc_ir_tensor;

/* Where a size parameter's value comes from: dimension dim of input tensor. */
typedef struct tc_ir_param {
	const char *name;
	int tensor, dim;
} tc_ir_param;

/* An IR function: sizes, tensors, statements in order, and the conditions
 * on the sizes. */
typedef struct tc_ir_func {
	const char *name;
	const tc_source *src;
	int nparams;
	tc_ir_param *params;
	int ntensors, ninputs, noutputs; /* inputs, then outputs, then temps */
	tc_ir_tensor *tensors;
	int nstmts;
	tc_ir_stmt *stmts;
	int nchecks;
	tc_check *checks; /* conditions on sizes checked when binding */
} tc_ir_func;

/* Lower a checked def (def->ok) into an IR function allocated in ar (the
 * arena's, not the caller's); it shares def's names, extents and checks and
 * keeps src (borrowed).  NULL when out of memory. */
tc_ir_func *tc_ir_lower(__tc_keep tc_arena *ar, __tc_keep const tc_def *def,
	__tc_keep const tc_source *src);

/* Float32 accumulators (ir/widen.c), run by tc_ir_lower: every sum or
 * product over reduction indices into a float16 or bfloat16 tensor
 * becomes a reduction into a new float32 temporary of the tensor's shape
 * (named <tensor>_acc; started from the element's value without '!'),
 * followed by a pointwise statement that rounds it once into the tensor.
 * f is changed in place (its arrays replaced by new ones in ar) and
 * returned; NULL when out of memory or f is NULL. */
tc_ir_func *tc_ir_widen(__tc_keep tc_arena *ar, __tc_keep tc_ir_func *f);

/* Whether an integer expression is quasi-affine in the index variables and
 * sizes: constants, indices, sizes, widening integer casts, + -, products
 * with a constant, floor division and modulo of signed values by a positive
 * constant, min and max.  The polyhedral model represents such subscripts
 * exactly (and range inference proves unguarded ones in bounds); others,
 * such as gathers, are over-approximated and checked at run time. */
int tc_ir_affine(__tc_keep const tc_ir_expr *e);

/* ir/query.c.  A copy of f in ar for a rewrite that adds tensors and
 * statements: f's tensors copied into an array with room for more_tensors
 * more (ntensors still f's: it grows as the rewrite adds them), and an
 * empty statement array (nstmts 0) with room for nstmts; the rest shared
 * with f.  NULL when out of memory. */
tc_ir_func *tc_ir_func_room(__tc_keep tc_arena *ar, __tc_keep const tc_ir_func *f,
	int more_tensors, int nstmts);
/* A new expression node in ar (op, type, loc and nargs
 * argument slots, the rest zero); NULL when out of memory. */
tc_ir_expr *tc_ir_new_expr(__tc_keep tc_arena *ar, tc_ir_op op, tc_dtype type, tc_loc loc, int nargs);
/* A read of tensor t of f at the index variables idx[0..n) (int32 index
 * nodes, as lowering makes them), in ar; NULL when out of memory. */
tc_ir_expr *tc_ir_read_at(__tc_keep tc_arena *ar, __tc_keep const tc_ir_func *f, int t,
	__tc_keep const int *idx, int n, tc_loc loc);
/* Whether e reads an element that instances differing in one of the
 * index variables in the bit set lhs (below 64) share: a read whose
 * subscripts miss one of them (W0(d0,r_n0) in XW0(m,n1,n2,d0) +=!
 * X(m,r_n0,n1,n2) * W0(d0,r_n0)), the operand a contraction reuses. */
int tc_ir_reused_read(__tc_keep const tc_ir_expr *e, uint64_t lhs);
/* The index variable subscript e is (an index under casts), or -1. */
int tc_ir_plain_var(__tc_keep const tc_ir_expr *e);
/* Whether e reads tensor t (anywhere, subscripts included). */
int tc_ir_reads(__tc_keep const tc_ir_expr *e, int t);
/* Whether e uses index variable (domain dimension) v anywhere. */
int tc_ir_uses_var(__tc_keep const tc_ir_expr *e, int v);
/* The step of integer expression e per step of index v: its coefficient
 * when e is a sum, difference or negation of terms, each v, free of v, or
 * v's multiple by an integer constant (2 * w + r_kw - 1: 2), 0 when e does
 * not use v, TC_IR_NO_STEP otherwise (w / 2, w * w, a gather on w). */
#define TC_IR_NO_STEP INT64_MIN
int64_t tc_ir_var_step(__tc_keep const tc_ir_expr *e, int v);
/* The reads in e (subscripts included). */
int tc_ir_count_reads(__tc_keep const tc_ir_expr *e);
/* Fused multiply-adds (the contract option): the one rule that the
 * interpreter and every code generator follow, so that contract=on gives
 * the same bits whatever the schedule, as contract=off does.  A float32 or
 * float64 sum or difference one of whose operands is a product of its own
 * type rounds once: x * y + z, z + x * y, x * y - z and z - x * y are
 * fma(x, y, z), fma(x, y, z), fma(x, y, -z) and fma(-x, y, z); the left
 * operand is taken when both are products.  Nothing else fuses: not a
 * product read back from a temporary (it was rounded when stored), not
 * 16-bit floats (their exact steps), not across statements.  A sum
 * reduction of a product of the accumulator's type (acc += x * y, the
 * contractions) is acc = fma(x, y, acc).  The operands are evaluated in
 * the order they are written (product_first), so that the first failing
 * run-time check is the same. */
typedef struct tc_ir_fma {
	const tc_ir_expr *x, *y, *z; /* fma(x, y, z), negated as below */
	int product_first;           /* written x, y, z (else z, x, y) */
	int neg_xy, neg_z;           /* -x * y, -z */
} tc_ir_fma;
/* ir/query.c.  Whether e is such a sum or difference (1, with its parts
 * in *m) or not (0). */
int tc_ir_fma_of(__tc_keep const tc_ir_expr *e, tc_ir_fma *m);
/* Whether statement s (a reduction into a tensor of type acc, not the
 * widened accumulator of a 16-bit float) is acc = fma(x, y, acc) with x
 * and y the operands of its product (in *x, *y), or not (0). */
int tc_ir_fma_reduction(__tc_keep const tc_ir_stmt *s, tc_dtype acc, int widened,
	const tc_ir_expr **x, const tc_ir_expr **y);
/* The free sizes of f: free[i] (f->nparams entries) is set to 1 for each
 * size that no extent of a tensor's dimension other than its first
 * mentions, else 0; returns how many are free.  Row-major strides are
 * made of the other dimensions' extents, so code that keeps the other
 * sizes constant and reads the free ones at run time addresses every
 * tensor with constant strides (sizes=parametric). */
int tc_ir_free_sizes(__tc_keep const tc_ir_func *f, unsigned char *free);
/* The range [*lo, *hi) of index variable v at the bound sizes params;
 * 0 when its bounds depend on other indices or do not evaluate. */
int tc_ir_var_range(__tc_keep const tc_ir_var *v, __tc_keep const int64_t *params, int64_t *lo,
	int64_t *hi);
/* Whether statement s (no reduction index) writes the whole extent of its
 * tensor: index k from 0 to extent k, at the bound sizes params. */
int tc_ir_covers_tensor(__tc_keep const tc_ir_func *f, __tc_keep const tc_ir_stmt *s,
	__tc_keep const int64_t *params);
/* The bytes of dimensions from .. ndim-1 of tensor t at the bound sizes
 * params (one row of its first `from` subscripts), or -1 when a size does
 * not evaluate or is negative, or the product overflows. */
int64_t tc_ir_tail_bytes(__tc_keep const tc_ir_func *f, int t, int from,
	__tc_keep const int64_t *params);
/* Whether a statement of f is a scatter (tc_ir_stmt.sub).  The rewrites
 * that renumber tensors or follow a tensor's readers through right-hand
 * sides only (inline, share) leave such functions alone. */
int tc_ir_has_scatter(__tc_keep const tc_ir_func *f);
/* A name base + suffix (then a number if needed) that no tensor of f has,
 * in ar; NULL when out of memory or after 1000 clashes. */
const char *tc_ir_fresh_name(__tc_keep tc_arena *ar, __tc_keep const tc_ir_func *f,
	const char *base, const char *suffix);

/* Operand packing (ir/pack.c): f with every input that a reduction reads
 * with a reduction index as its last (stride-1) subscript and the output's
 * innermost index among the others (B in A(m,r_k) * B(n,r_k)) replaced by a
 * temporary copy whose last dimension is the one the output's innermost
 * index walks, when a row of the copy has at least min_bytes at the bound
 * sizes params.  The copies are statements marked pack, placed
 * first.  Before that, convolutions whose output channels fill min_bytes
 * are written channels last, and contractions whose output rows are
 * shorter than min_bytes with another left-hand index last (into a
 * temporary, copied back: pack.c says when).  With panel_bytes (0: none),
 * copies whose last dimension is a whole number of panel_bytes and has
 * panel_min_row bytes or more are laid out
 * in panels of that many bytes (tc_ir_tensor.panel), and an input that a
 * reduction reads along the output's innermost index already (B in
 * A(m,r_k) * B(r_k,n)) is copied into panels too when its rows are long
 * (pack.c, "Panels").  Results are bit for bit the same.  Returns f itself
 * when nothing is packed, NULL when out of memory; the new function lives
 * in ar and shares f's unchanged parts. */
const tc_ir_func *tc_ir_pack(__tc_keep tc_arena *ar, __tc_keep const tc_ir_func *f,
	__tc_keep const int64_t *params, int64_t min_bytes, int64_t panel_bytes,
	int64_t panel_min_row);

/* Inlining (ir/inline.c): f with every temporary that one pointwise
 * statement of a few operations defines over its whole extent, and that
 * every reader reads one element per instance, computed again at each
 * read instead of stored (layer norm's centred input).  Results are bit
 * for bit the same.  Returns f itself when nothing is inlined, NULL when
 * out of memory; the new function lives in ar. */
const tc_ir_func *tc_ir_inline(__tc_keep tc_arena *ar, __tc_keep const tc_ir_func *f,
	__tc_keep const int64_t *params);

/* Sharing (ir/share.c): f where a statement writing its whole tensor O and
 * an earlier statement hold the same expression with a builtin call (up to
 * index renaming), the later statement's indices all used: the expression
 * is computed once by a new statement before the earlier one, and both
 * read it back (softmax's exponentials).  It is stored into O itself,
 * or, when row_bytes > 0 (share=row), O has two or more dimensions and a
 * row of O (every dimension but the first) has at most row_bytes, into a
 * new temporary marked rowbuf.  Bit for bit the same results.
 * Returns f itself when nothing is shared, NULL when out of memory; the
 * new function lives in ar. */
const tc_ir_func *tc_ir_share(__tc_keep tc_arena *ar, __tc_keep const tc_ir_func *f,
	__tc_keep const int64_t *params, int64_t row_bytes);

/* Partial results per thread (ir/partial.c): f with every column sum
 * (a +=, max= or min= reduction over one row index, outside the rows'
 * other statements: layer norm's d_G(d) +=! d_Y(n,d) * xh(n,d)) that
 * reads a tensor of more than half the L2 at rows another statement also
 * walks, written as a sum into partial results over contiguous chunks of
 * rows, one per thread tg expects (tg->threads, at least 2), and the sum
 * of those.  Float sums then round in another order (vecreduce's licence;
 * the caller runs it only under vecreduce).  Returns f itself when nothing
 * is rewritten, NULL when out of memory; the new function lives in ar. */
struct tc_target;
const tc_ir_func *tc_ir_partials(__tc_keep tc_arena *ar, __tc_keep const tc_ir_func *f,
	__tc_keep const int64_t *params, __tc_keep const struct tc_target *tg);

/* Print the IR of a function (tcomp emit --stage ir) to b. */
void tc_ir_print(__tc_keep const tc_ir_func *f, __tc_keep tc_buf *b);
/* Print expression e of statement s of f (names from f and s) to b. */
void tc_ir_print_expr(__tc_keep const tc_ir_func *f, __tc_keep const tc_ir_stmt *s,
	__tc_keep const tc_ir_expr *e, __tc_keep tc_buf *b);

/* The canonical text of a def (ir/canon.c): the .tc printer,
 * tc_ast_print_source, with every identifier renamed in order of first
 * appearance (the def f; sizes, tensors, indices and lets v0, v1, ...),
 * builtins kept.  Kernels that differ only in names share it; it is the
 * kernel cache's key, so its bytes must not change.  Appended to b (b->oom
 * when out of memory). */
void tc_ir_canonical(__tc_keep const tc_def *def, __tc_keep tc_buf *b);
/* Stable 64-bit hash (FNV-1a) of the canonical text. */
uint64_t tc_ir_hash(__tc_keep const tc_def *def);

/* ---- binding to concrete shapes ---- */

/* A dense row-major tensor in memory (the interpreter's view).  data is
 * borrowed: the struct never owns it. */
typedef struct tc_tensor {
	tc_dtype dtype;
	int ndim;
	int64_t shape[TC_MAX_RANK];
	void *data;
} tc_tensor;

/* Derive the size parameters from the input shapes (params has f->nparams
 * entries), checking that every input has the declared rank and dtype, that
 * a size has one value across inputs ("size K is 45 from A but 46 from B"),
 * constant dimensions match, and the def's size conditions hold; every
 * extent is 0 to INT32_MAX and every tensor's bytes fit in int64; with a
 * tensor without elements, no statement that runs reads one (range
 * inference assumed sizes of at least 1).  Errors about the inputs go to d
 * without a source location (they are about the call), the others at the
 * condition, tensor or read. */
tc_stat tc_ir_bind(__tc_keep const tc_ir_func *f, __tc_keep const tc_tensor *inputs,
	int ninputs, __tc_keep int64_t *params, __tc_keep tc_diags *d);
/* Shape of tensor t for bound parameters (shape has t's rank entries). */
tc_stat tc_ir_shape(__tc_keep const tc_ir_func *f, int t, __tc_keep const int64_t *params,
	__tc_keep int64_t *shape, __tc_keep tc_diags *d);
/* The bytes of t's elements, or SIZE_MAX if that overflows. */
size_t tc_ir_tensor_bytes(__tc_keep const tc_tensor *t);

#endif
