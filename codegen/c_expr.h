/* The C-expression printer shared by the C-text backends: the statement of
 * one instance of the isl AST (tc_poly_inst), with its IR expressions,
 * printed as C with the reference interpreter's semantics (ir/interp.c).
 *
 * Owns: C precedence, integer wrap-around through unsigned types, casts,
 * float16 and bfloat16 held in doubles (or floats), floor division and modulo, saturating
 * float-to-integer conversion, min/max rules, builtin calls, reduction
 * identities and updates, row-major element offsets (from the subscripts
 * and the tensors' extents), and the isl printer settings for isl's
 * expressions (index values and, for the frame, loop bounds).
 *
 * Must not know: the frame around the statements (the function, its
 * signature, how the tensor pointers and sizes are set up, the includes,
 * the loop structure and marks), nor anything that differs between host C
 * and CUDA C: that comes from a dialect (tc_cg_cexpr_dialect).  Host C is
 * one dialect (codegen/c.c); the CUDA dialect lives with the CUDA frame
 * (codegen/cuda.c).
 *
 * Use: the frame chooses the names of the sizes and tensors, sets up a
 * tc_cg_cexpr with tc_cg_cexpr_init, prints isl's loops with a printer from
 * tc_cg_cexpr_isl_printer, calls tc_cg_cexpr_put_stmt for every user node,
 * then reads what the text uses (sizes, tensors, helpers, extern builtins)
 * to print the frame around it.
 *
 * Ownership: the frame owns the tc_cg_cexpr struct, the model and the
 * names, which the printer borrows; the printer owns only its use records,
 * freed by tc_cg_cexpr_clear.  Dialects and failure messages are static
 * text.  Text goes to the caller's tc_buf; isl printers follow isl's rules
 * as marked. */
#ifndef TC_CG_C_EXPR_H
#define TC_CG_C_EXPR_H

#include "../polyhedral/poly.h"

#include <isl/printer.h>

/* The helper functions the printed expressions call, by role.  Integer
 * helpers take and return int64_t or uint64_t.  float16 and bfloat16
 * values are held in the dialect's value type for them (half_in_float):
 * double in host C (every 16-bit value is a double, and the interpreter
 * computes on exact values, rounding once per operation), float in CUDA C;
 * the roles below that say "double" then mean that value type, and the
 * roles that take a value to round (D2H, H, D2B, B) take a double too. */
typedef enum tc_cg_cexpr_helper {
	TC_CG_CEXPR_FLOORD,      /* floor(n / d) for d > 0 (isl's floord) */
	TC_CG_CEXPR_FLOORMOD,    /* n - d floor(n / d) for d > 0 */
	TC_CG_CEXPR_MIN,         /* int64 minimum (also isl's min) */
	TC_CG_CEXPR_MAX,         /* int64 maximum (also isl's max) */
	TC_CG_CEXPR_UMIN,        /* uint64 minimum */
	TC_CG_CEXPR_UMAX,        /* uint64 maximum */
	TC_CG_CEXPR_DIVS,        /* int64 floor division, 0 for a zero divisor */
	TC_CG_CEXPR_MODS,        /* int64 floor modulo, 0 for a zero divisor */
	TC_CG_CEXPR_DIVU,        /* uint64 division, 0 for a zero divisor */
	TC_CG_CEXPR_MODU,        /* uint64 modulo, 0 for a zero divisor */
	TC_CG_CEXPR_FMODFLOOR,   /* float %: a - b floor(a / b) in double */
	TC_CG_CEXPR_F2S,         /* (double x, int bits) to signed: truncate, saturate, NaN 0 */
	TC_CG_CEXPR_F2U,         /* (double x, int bits) to unsigned: the same */
	TC_CG_CEXPR_D2H,         /* double to a stored float16 (nearest, ties to even) */
	TC_CG_CEXPR_H2D,         /* a stored float16 to double */
	TC_CG_CEXPR_H,           /* double rounded to float16, as a double */
	TC_CG_CEXPR_H_NEXTAFTER, /* nextafter in float16, on doubles */
	TC_CG_CEXPR_D2B,         /* double to a stored bfloat16 (nearest, ties to even) */
	TC_CG_CEXPR_B2D,         /* a stored bfloat16 to double */
	TC_CG_CEXPR_B,           /* double rounded to bfloat16, as a double */
	TC_CG_CEXPR_B_NEXTAFTER, /* nextafter in bfloat16, on doubles */
	TC_CG_CEXPR_U2D_ODD,     /* uint64 to double rounded to odd (for bfloat16) */
	TC_CG_CEXPR_L2D_ODD,     /* int64 to double rounded to odd (for bfloat16) */
	TC_CG_CEXPR_NHELPERS
} tc_cg_cexpr_helper;

/* A helper of a dialect: the name the expressions call it by, and the
 * definition the frame prints when the text calls it (static text). */
typedef struct tc_cg_cexpr_helper_def {
	const char *name;
	const char *text;
} tc_cg_cexpr_helper_def;

/* How a dialect writes a builtin (lang/types.h, tc_builtins). */
typedef enum tc_cg_cexpr_bi_form {
	TC_CG_CEXPR_BI_C99,    /* NAME(...) on doubles, NAMEf(...) on float32 */
	TC_CG_CEXPR_BI_DOUBLE, /* NAME(...) on doubles only */
	TC_CG_CEXPR_BI_INLINE, /* a short expression in double: exp10 as pow;
				* rsqrt, rcbrt, rhypot and rnorm3d as 1 / the
				* call of sqrt, cbrt, hypot or norm3d (in the
				* form the dialect gives those; not INLINE) */
	TC_CG_CEXPR_BI_EXTERN, /* extern_prefix NAME(...) on doubles, defined elsewhere */
} tc_cg_cexpr_bi_form;

typedef struct tc_cg_cexpr tc_cg_cexpr;

/* What differs between the C dialects the printer writes (host C for
 * inspection, CUDA C for NVRTC).  Static data, borrowed by the printer.
 *
 * The host C dialect (codegen/c.c) stores float16 as uint16_t bits,
 * defines its helpers as static inline C functions, calls libm (float
 * versions of the C99 functions, X/Open Bessel functions, CUDA-only
 * functions inline or extern) and addresses NAME[offset] through the
 * typed pointers its function sets up.  The CUDA dialect (codegen/cuda.c)
 * sets:
 *   type          [TC_T_F16] = "__half", [TC_T_BF16] = "__nv_bfloat16"
 *                 (2-byte types of its prelude); the integer types as the
 *                 CUDA prelude defines them (NVRTC has no stdint.h);
 *   helper        __device__ definitions of the same roles, the 16-bit ones
 *                 on floats (half_in_float);
 *   builtin_form  TC_CG_CEXPR_BI_C99 for every builtin: CUDA's math library
 *                 has all of them in float and double (fast-math device
 *                 intrinsics such as __expf would be a new form here);
 *   extern_prefix unused (NULL);
 *   put_access    NAME[offset] on the kernel's pointer parameters
 *                 (TC_LDG for inputs);
 *   half_in_float 1.
 * Constants are written with the C macros NAN, INFINITY, FLT_MAX, DBL_MAX,
 * INT64_C, UINT64_C and INTn_MIN/INTn_MAX/UINTn_MAX: the frame provides
 * them (host C: its includes; CUDA: its prelude). */
typedef struct tc_cg_cexpr_dialect {
	/* TC_T_COUNT entries: the C type an element of each dtype is stored
	 * in (TC_T_NONE: "void"). */
	const char *const *type;
	/* TC_CG_CEXPR_NHELPERS entries, by role, in the order the frame
	 * prints their definitions (a helper after those it calls). */
	const tc_cg_cexpr_helper_def *helper;
	/* How builtin id is written. */
	tc_cg_cexpr_bi_form (*builtin_form)(tc_builtin_id id);
	/* The name of a TC_CG_CEXPR_BI_EXTERN builtin: this prefix, then the
	 * builtin's name. */
	const char *extern_prefix;
	/* Append the element of tensor at the row-major element offset (a
	 * C expression of type int64_t) to b.  The extension point for
	 * row buffers (p->rowbuf) and promoted copies; such a dialect will
	 * also need the offset of the row's trailing dimensions. */
	void (*put_access)(__tc_keep const tc_cg_cexpr *pr, __tc_keep tc_buf *b, int tensor,
		__tc_keep const char *offset);
	/* 0: float16 and bfloat16 values are doubles (host C).  1: they are
	 * floats (CUDA C, where double arithmetic is slow): + - * / and
	 * sqrt on 16-bit values are float operations rounded once to the
	 * type, which gives the interpreter's bits (float32's 24 bits are
	 * more than 2 * 11 + 2); the other builtins call the float function
	 * (NAMEf) and round its result, except fma, computed in double as
	 * the interpreter does (a float fma rounded again could round
	 * twice); float % stays in double (FMODFLOOR).  The helpers D2H, H,
	 * D2B and B then take a float or a double (C++ overloads: a double
	 * rounds once, as the interpreter's conversions do), H2D, B2D, H,
	 * B and the nextafter helpers return floats, and 16-bit constants
	 * and identities are float literals. */
	int half_in_float;
	/* Append a statement that adds value (a C expression of the
	 * element's type) to the element of tensor at offset atomically, as
	 * a scatter that tc_poly_scatter_atomic marks needs (CUDA's
	 * atomicAdd); NULL where no such scatter is printed (host C). */
	void (*put_atomic_add)(__tc_keep const tc_cg_cexpr *pr, __tc_keep tc_buf *b, int tensor,
		__tc_keep const char *offset, __tc_keep const char *value);
} tc_cg_cexpr_dialect;

/* The state of one printing: the model, the names the frame chose, and
 * what the printed statements use, which the frame reads to print what
 * they need.  The frame owns the struct (on its stack, say); the first
 * failure (a static message) is recorded here, for the frame too. */
struct tc_cg_cexpr {
	const tc_cg_cexpr_dialect *dl; /* borrowed */
	const tc_poly *p;              /* borrowed: the model with its AST */
	char *const *size;   /* borrowed: the sizes' names in the text, by size */
	char *const *tensor; /* borrowed: the tensors' names in the text, by tensor */
	char *const *shared; /* borrowed: the names of the GPU kernels'
			      * shared-memory copies, by copy
			      * (p->gpu_copies), or NULL: none */
	unsigned char *size_used;   /* owned: per size, the text mentions it */
	unsigned char *tensor_used; /* owned: per tensor, the text accesses it */
	/* per builtin, the text calls it (rnorm3d written as 1 / norm3d
	 * calls both) */
	unsigned char builtin_used[TC_BI_COUNT];
	int contract; /* set by the frame: sums with a product printed as
		       * fma/fmaf calls (the contract option's rule,
		       * tc_ir_fma_of); 0 after tc_cg_cexpr_init */
	int failed;
	const char *why; /* the first failure, for the message */
};

/* Set pr up for printing statements of p (which must have its function)
 * in dialect dl with the names size and tensor (the frame keeps them
 * alive while pr is used); every use starts unset.  TC_ERR (and pr failed)
 * when out of memory.  pr is cleared with tc_cg_cexpr_clear either way. */
tc_stat tc_cg_cexpr_init(__tc_keep tc_cg_cexpr *pr, __tc_keep const tc_cg_cexpr_dialect *dl,
	__tc_keep const tc_poly *p, __tc_keep char *const *size, __tc_keep char *const *tensor);
/* Free what pr owns (pr zeroed, or set up by tc_cg_cexpr_init). */
void tc_cg_cexpr_clear(__tc_keep tc_cg_cexpr *pr);

/* Record a failure (why: static text); the first one is kept.  pr keeps
 * the pointer why, not a copy. */
void tc_cg_cexpr_fail(__tc_keep tc_cg_cexpr *pr, __tc_keep const char *why);

/* prn set to print isl expressions in C, with isl's floord, min and max
 * called by the dialect's helper names. */
__tc_give isl_printer *tc_cg_cexpr_isl_printer(__tc_keep const tc_cg_cexpr_dialect *dl,
	__tc_take isl_printer *prn);

/* Append the isl expression e (an int64_t value) to b, in parentheses
 * unless it is a product or tighter (an operand of * as it stands). */
void tc_cg_cexpr_put_isl(__tc_keep tc_cg_cexpr *pr, __tc_keep tc_buf *b,
	__tc_keep isl_ast_expr *e);

/* Mark the sizes an isl expression mentions as used (the frame calls this
 * for the loop bounds and guards isl prints; statements note their own). */
void tc_cg_cexpr_note_ids(__tc_keep tc_cg_cexpr *pr, __tc_keep isl_ast_expr *e);

/* Mark the sizes the loops and guards of the AST below node mention as
 * used (isl prints them; statements note their own as they print). */
void tc_cg_cexpr_note_loops(__tc_keep tc_cg_cexpr *pr, __tc_keep isl_ast_node *node);

/* The C text of the AST node (loops and guards from isl, iterators as
 * int64_t; every user node through print_user, isl's callback, and every
 * for node through print_for when it is not NULL, with user), indented by
 * indent, or NULL with the failure recorded in pr.  isl's iterator-type
 * option is set for the printing and restored. */
typedef __isl_give isl_printer *(*tc_cg_cexpr_print_fn)(__isl_take isl_printer *,
	__isl_take isl_ast_print_options *, __isl_keep isl_ast_node *, void *);
__tc_give char *tc_cg_cexpr_ast_text(__tc_keep tc_cg_cexpr *pr, __tc_keep isl_ast_node *node,
	int indent, tc_cg_cexpr_print_fn print_user, tc_cg_cexpr_print_fn print_for, void *user);

/* Names of a frame.  tc_cg_cexpr_fresh_name: name with '_' appended
 * until it is neither reserved (by the dialect's test reserved), an isl
 * iterator (c0, c1, c0_1, ...) nor one of taken[0..n) (NULL entries
 * skipped); NULL when out of memory.  tc_cg_cexpr_size_name: the isl name
 * of size i of p (tc_poly_param_name), a copy, or NULL with *why set. */
__tc_give char *tc_cg_cexpr_fresh_name(__tc_keep const char *name, __tc_keep char *const *taken,
	int n, int (*reserved)(const char *));
__tc_give char *tc_cg_cexpr_size_name(__tc_keep const tc_poly *p, int i, const char **why);

/* Append the C statement of instance inst to b: an assignment, a
 * reduction's init or update, ending in ';'.  A failure is recorded in pr;
 * an allocation failure in b. */
void tc_cg_cexpr_put_stmt(__tc_keep tc_cg_cexpr *pr, __tc_keep tc_buf *b,
	__tc_keep const tc_poly_inst *inst);

/* Append the left-hand element of inst's statement to b, as the
 * statement prints it (the CUDA printer's reductions on a block replace
 * it with their accumulator). */
void tc_cg_cexpr_put_lhs(__tc_keep tc_cg_cexpr *pr, __tc_keep tc_buf *b,
	__tc_keep const tc_poly_inst *inst);
/* Append the identity of reduction red in type t, as stored, to b. */
void tc_cg_cexpr_put_identity(__tc_keep tc_cg_cexpr *pr, __tc_keep tc_buf *b, tc_red red,
	tc_dtype t);

/* Which of dl's helpers text calls, directly or through other helpers
 * (a name followed by '(' in text or in the definitions), into used[] (the
 * caller's array: 1 called, 0 not, by role). */
void tc_cg_cexpr_helpers_called(__tc_keep const tc_cg_cexpr_dialect *dl,
	__tc_keep const char *text, __tc_keep int used[TC_CG_CEXPR_NHELPERS]);

#endif
