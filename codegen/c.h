/* The isl AST of a tc_poly printed as readable C (tcomp emit --stage c):
 * loops and guards from isl, statement bodies from the IR expressions with
 * the interpreter's semantics spelled out (casts, floor division helpers:
 * the shared C-expression printer, c_expr.h, in its host C dialect),
 * a function  void NAME(void *const *tensors)  like the LLVM backend's.
 * For inspection: the text compiles with a C compiler, but the LLVM
 * backend is what runs.
 *
 * Ownership: the model is borrowed; the text returned is the caller's. */
#ifndef TC_CG_C_H
#define TC_CG_C_H

#include "../polyhedral/poly.h"

/* The C text of p (scheduled, with its AST), which the caller frees with
 * tc_free; NULL with a message in d when it cannot be printed.  contract:
 * the contract option (sums with a product written as fma/fmaf calls, as
 * the compiled code rounds them). */
__tc_give char *tc_cg_c_text(__tc_keep const tc_poly *p, int contract, __tc_keep tc_diags *d);

/* Whether s is a name the host C text may not give a tensor or function:
 * a C keyword, a C library name the text may use, a helper's name. */
int tc_cg_c_name_reserved(__tc_keep const char *s);

struct tc_cg_cexpr_dialect;
/* The host C dialect of the expression printer (static): the base of the
 * CUDA dialect (codegen/cuda.c), which shares its types and helpers. */
const struct tc_cg_cexpr_dialect *tc_cg_c_dialect(void);

#endif
