/* Private to codegen/llvm*.c: what the files of the LLVM back end share.
 * Nothing outside codegen/llvm*.c may include it; the back end's API is
 * llvm.h.
 *
 * The back end is three files, each calling only the ones after it:
 *   llvm_jit.c   LLVM set-up, the host, the pass pipeline, the JIT, object
 *                files and the text stages;
 *   llvm_loop.c  the walk over the isl AST (loops, their metadata,
 *                parallel loops, streaming stores) and the module of a
 *                kernel;
 *   llvm_expr.c  values: types, conversions, isl AST expressions, tensor
 *                accesses, run-time checks, IR expressions, builtins,
 *                statements.
 * The code-generation state (struct cg) is the loop walk's and the
 * expressions'; llvm_jit.c sees only the host description and the module
 * builder. */
#ifndef TC_CG_LLVM_INTERNAL_H
#define TC_CG_LLVM_INTERNAL_H

#include "llvm.h"

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

/* The location of diagnostics about the back end itself (no source
 * location applies). */
static const tc_loc noloc = {0, 0, 0, 0};

/* The host: triple, CPU name and features (LLVM-allocated strings, owned
 * by the record: llvm_jit.c fills and disposes of it) and its target.
 * Code generation reads it for the attributes of the functions it makes
 * and to choose streaming stores (x86-64 only). */
typedef struct cg_host {
	char *triple, *cpu, *features;
	LLVMTargetRef target;
} cg_host;

/* ---- llvm_loop.c: the module of a kernel ---- */

/* Build the module of p in C with one function fname for the host h and
 * the data layout of tm, and the sites of its run-time checks (when sites
 * is not NULL; the caller frees them).  NULL with a message in d on
 * failure; the caller owns the module (it lives in C). */
__tc_give LLVMModuleRef tc_cg_llvm_build_module(__tc_keep LLVMContextRef C,
	__tc_keep const tc_poly *p, const char *fname, __tc_keep const cg_host *h,
	__tc_keep LLVMTargetMachineRef tm, __tc_keep tc_diags *d, __tc_give tc_cg_site **sites,
	int *nsites);

/* After the pass pipeline: the non-temporal flag on the aligned vector
 * stores of the outputs that tc_cg_llvm_build_module chose to stream (its
 * tc.stream metadata; nothing without it). */
void tc_cg_llvm_mark_streaming_stores(__tc_keep LLVMModuleRef M);

#endif
