/* CPU code generation: the isl AST of a tc_poly to LLVM IR through the
 * LLVM-C API, optimised with the new pass manager for the host CPU and
 * JIT-compiled with ORC LLJIT.
 *
 * The generated function has the signature
 *     void kernel(void *const *tensors)
 * where tensors[t] is the data of tensor t of the IR function (inputs, then
 * outputs, then temporaries: the runtime provides the temporaries' workspace;
 * the kernel never allocates), tensors[ntensors] points to an error record
 * int64_t err[2], zero on entry, and tensors[ntensors + 1] is the runtime's
 *     void parallel_for(void (*body)(void *const *tensors, int64_t begin,
 *         int64_t end, int64_t lo, int64_t step), void *const *tensors,
 *         int64_t count, int64_t lo, int64_t step)
 * which loops under a TC_POLY_MARK_PARALLEL mark call with their outlined
 * body (iterations begin..end-1, iterator lo + k * step).  Tensors are dense
 * row-major with the extents of the concrete sizes the tc_poly was built
 * with; when it left some sizes free (p->free, tc_poly_build_free), their
 * values come from tensors[ntensors + 2], an int64_t array of every size
 * in the def's order (the others are constants of the code).
 *
 * The code computes exactly what the reference interpreter (ir/interp.c)
 * computes: values in their static types (integers wrap, float16 rounded
 * after every operation), floor division and modulo for integers, floor
 * modulo for floats, saturating float-to-integer conversion (NaN -> 0),
 * min/max that ignore a NaN operand and otherwise keep the first operand on
 * ties (a <= b ? a : b), reduction identities as the interpreter's,
 * short-circuit && and ||, and only the chosen branch of ?: evaluated.
 * Builtins are LLVM intrinsics or libm calls (float32 builtins may differ
 * from the interpreter's double-then-round results by a few ulp).
 *
 * Checks: reads that range inference did not prove in bounds (a subscript
 * that is not affine, such as a gather, or a read that runs only under a
 * branch of ?: or the right side of && and ||) and integer division or
 * modulo by a divisor that is not a constant are checked at run time.  The
 * first failing check stores its site number + 1 in err[0] and the offending
 * index in err[1]; the kernel goes on with a safe value (index 0, a divisor
 * giving 0) and the runtime reports the error (tc_cg_code_site).
 *
 * Ownership: a JIT and the compiled code made in it are the caller's; code
 * must be freed before its JIT.  Models, options and object bytes passed in
 * are borrowed for the call; texts, object bytes and site arrays returned
 * are the caller's (tc_free).  LLVM's own objects never leave codegen/. */
#ifndef TC_CG_LLVM_H
#define TC_CG_LLVM_H

#include "../polyhedral/poly.h"
#include "check.h"
#include "opts.h"

/* A JIT: the host target machine and an ORC LLJIT instance.  One per
 * tc_context; compiling into it and looking up symbols is thread-safe. */
typedef struct tc_cg_jit tc_cg_jit;
/* A new JIT for the host; NULL with a message in d if LLVM cannot target
 * the host. */
__tc_give tc_cg_jit *tc_cg_jit_new(__tc_keep tc_diags *d);
/* Free jit and the code still in it (NULL: nothing); free every
 * tc_cg_code of it first: their functions become invalid here. */
void tc_cg_jit_free(__tc_take tc_cg_jit *jit);

/* A kernel function (the signature above). */
typedef void (*tc_cg_fn)(void *const *tensors);

/* The compiled code of one kernel; freeing it removes the code from the JIT. */
typedef struct tc_cg_code tc_cg_code;
/* Compile p (built with concrete sizes, scheduled, with its AST) with the
 * options o (NULL: the conservative ones, codegen/opts.h) into jit.  NULL
 * with a message in d on failure.  The code is the caller's, to be freed
 * before jit. */
__tc_give tc_cg_code *tc_cg_llvm_compile(__tc_keep tc_cg_jit *jit, __tc_keep const tc_poly *p,
	__tc_keep const tc_cg_opts *o, __tc_keep tc_diags *d);
/* The kernel function of c (valid until c is freed). */
tc_cg_fn tc_cg_code_fn(__tc_keep const tc_cg_code *c);

/* Site number i of c's checks (NULL if there is none), borrowed from c. */
const tc_cg_site *tc_cg_code_site(__tc_keep const tc_cg_code *c, int64_t i);
/* Remove c's code from its JIT and free c (NULL: nothing). */
void tc_cg_code_free(__tc_take tc_cg_code *c);

/* Text of the optimised LLVM IR (stage "llvm") or of the host assembly
 * (stage "asm") of p, for tcomp emit, or of the LLVM IR as generated,
 * before the pass pipeline (tests read the loop metadata there).  No JIT
 * involved.  The text is the caller's (tc_free); NULL with a message in d. */
typedef enum tc_cg_text { TC_CG_TEXT_LLVM, TC_CG_TEXT_ASM, TC_CG_TEXT_LLVM_RAW } tc_cg_text;
__tc_give char *tc_cg_llvm_text(__tc_keep const tc_poly *p, __tc_keep const tc_cg_opts *o,
	tc_cg_text what, __tc_keep tc_diags *d);

/* The host target as "triple;cpu;features": what the JIT compiles for (the
 * kernel cache keys entries by it).  NULL if LLVM cannot describe the host
 * or out of memory; the caller owns the string. */
__tc_give char *tc_cg_llvm_host_target(void);
/* Whether the comma-separated LLVM feature list features (the last part
 * of tc_cg_llvm_host_target's text) enables feature ("+avx512f"). */
int tc_cg_llvm_has_feature(__tc_keep const char *features, __tc_keep const char *feature);
/* The x86-64 psABI levels a kernel may be compiled for instead of the
 * host (tc_cg_opts.cpu): 1 x86-64 (SSE2), 2 x86-64-v2 (SSE4.2, POPCNT),
 * 3 x86-64-v3 (AVX2, FMA, BMI2), 4 x86-64-v4 (AVX-512 F, BW, CD, DQ, VL).
 * The name of level (LLVM's CPU name), NULL outside 1..4. */
#define TC_CG_LLVM_LEVELS 4
const char *tc_cg_llvm_level_name(int level);
/* The highest level whose instructions the LLVM feature list features
 * (tc_cg_llvm_host_target's last part) all enables, 0 if not even the
 * first (as on a machine that is not x86-64). */
int tc_cg_llvm_level_of(__tc_keep const char *features);
/* The version of the LLVM library in use ("19.1.7") into buf[n]. */
void tc_cg_llvm_version(__tc_keep char *buf, size_t n);

/* Object code: p with o (as for tc_cg_llvm_compile) compiled to a relocatable
 * object file for the host with its kernel function named fname (its
 * outlined parallel bodies are local).  Returns the bytes (*size of them;
 * the caller frees them with tc_free) and the run-time check sites (*sites,
 * *nsites; the caller's), or NULL with a message in d.  No JIT involved. */
__tc_give void *tc_cg_llvm_object(__tc_keep const tc_poly *p, __tc_keep const tc_cg_opts *o,
	const char *fname, size_t *size, __tc_give tc_cg_site **sites, int *nsites,
	__tc_keep tc_diags *d);
/* Load object code made by tc_cg_llvm_object (in this or another process,
 * with the same LLVM and host) into jit, and find fname in it; obj[0..size)
 * is copied; sites are its checks (taken, even on failure).  NULL with a
 * message in d when the object does not load or link, or when fname is
 * already in the JIT (the same object loaded for another kernel: compile
 * instead). */
__tc_give tc_cg_code *tc_cg_llvm_load(__tc_keep tc_cg_jit *jit, __tc_keep const void *obj,
	size_t size, const char *fname, __tc_take tc_cg_site *sites, int nsites,
	__tc_keep tc_diags *d);

#endif
