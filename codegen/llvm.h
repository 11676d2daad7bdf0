/* CPU code generation: the isl AST of a tc_poly to LLVM IR through the
 * LLVM-C API, optimised with the new pass manager for the host CPU and
 * JIT-compiled with ORC LLJIT.
 *
 * The generated function has the signature
 *     void kernel(void *const *tensors)
 * where tensors[t] is the data of tensor t of the IR function (inputs, then
 * outputs, then temporaries: the runtime provides the temporaries' workspace;
 * the kernel never allocates).  Tensors are dense row-major with the extents
 * of the concrete sizes the tc_poly was built with.
 *
 * The code computes exactly what the reference interpreter (ir/interp.c)
 * computes: values in their static types (integers wrap, float16 rounded
 * after every operation), floor division and modulo for integers, floor
 * modulo for floats, saturating float-to-integer conversion (NaN -> 0),
 * NaN-ignoring min/max (minnum/maxnum), reduction identities as the
 * interpreter's, short-circuit && and ||, and only the chosen branch of ?:
 * evaluated.  Builtins are LLVM intrinsics or libm calls (float32 builtins may
 * differ from the interpreter's double-then-round results by a few ulp).
 * Unlike the interpreter, compiled code does not bounds-check gathers. */
#ifndef TC_CG_LLVM_H
#define TC_CG_LLVM_H

#include "../polyhedral/poly.h"

/* A JIT: the host target machine and an ORC LLJIT instance.  One per
 * tc_context; compiling into it and looking up symbols is thread-safe. */
typedef struct tc_cg_jit tc_cg_jit;
/* NULL with a message in d if LLVM cannot target the host. */
__tc_give tc_cg_jit *tc_cg_jit_new(__tc_keep tc_diags *d);
void tc_cg_jit_free(__tc_take tc_cg_jit *jit);

typedef void (*tc_cg_fn)(void *const *tensors);

/* The compiled code of one kernel; freeing it removes the code from the JIT. */
typedef struct tc_cg_code tc_cg_code;
/* Compile p (built with concrete sizes, scheduled, with its AST). */
__tc_give tc_cg_code *tc_cg_llvm_compile(__tc_keep tc_cg_jit *jit, __tc_keep const tc_poly *p,
	__tc_keep tc_diags *d);
tc_cg_fn tc_cg_code_fn(__tc_keep const tc_cg_code *c);
void tc_cg_code_free(__tc_take tc_cg_code *c);

/* Text of the optimised LLVM IR (stage "llvm") or of the host assembly
 * (stage "asm") of p, for tcomp emit.  No JIT involved. */
typedef enum tc_cg_text { TC_CG_TEXT_LLVM, TC_CG_TEXT_ASM } tc_cg_text;
__tc_give char *tc_cg_llvm_text(__tc_keep const tc_poly *p, tc_cg_text what,
	__tc_keep tc_diags *d);

#endif
