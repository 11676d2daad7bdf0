/* The CUDA emulator: a def's CUDA code (codegen/cuda.h) compiled for the
 * CPU and run with checks (codegen/cuda_emu.c, codegen/cuda_emu.hpp).
 *
 * tc_cg_emu_compile writes the CUDA text and a launcher per kernel into a
 * private temporary folder (mkdtemp in the store below, else under
 * $TMPDIR, else /tmp), compiles them with the system C++ compiler and the
 * emulation header (embedded in the library) into a shared object, opens
 * it (RTLD_LOCAL | RTLD_NOW) and keeps the folder as the store's entry of
 * the unit, or removes it.  The compiler is $TCOMP_CXX when set (a command:
 * words separated by spaces, e.g. "ccache g++"), else the one CMake found
 * when building tcomp (TCOMP_EMU_CXX), else "c++" on the PATH;
 * $TCOMP_EMU_CXXFLAGS adds flags after the emulator's (-O1 for long runs,
 * -fsanitize=address, -DTC_EMU_UCONTEXT).  The emulation header is
 * precompiled once per compiler and flags and kept in a store
 * ($TCOMP_EMU_STORE, or its older name $TCOMP_EMU_PCH, else
 * $XDG_CACHE_HOME/tcomp/emu or ~/.cache/tcomp/emu; "off": none;
 * codegen/cuda_emu.c has the rules), and so is each compiled unit: a unit
 * whose text, compiler and flags equal a stored one's loads that object
 * instead of compiling.  A unit compiled before in the process under the
 * same compiler command and extra flags reuses that compile's shared
 * object (the memo in codegen/cuda_emu.c).
 *
 * tc_cg_emu_run launches one kernel: the grid's blocks one after another,
 * the threads of a block as fibers, every access checked (out of bounds,
 * races, barrier and warp divergence: codegen/README.md, "CUDA
 * emulator").  A problem is an error naming the kernel, the array and
 * element, thread and block.
 *
 * Thread safety: launches are serialised by one mutex for the whole
 * process (a module's state is static in its shared object); compiles
 * may run at once.  A tc_cg_emu may be run from any thread. */
#ifndef TC_CG_CUDA_EMU_H
#define TC_CG_CUDA_EMU_H

#include "cuda.h"

#include <stdint.h>

/* A def's CUDA code compiled for the emulator (opaque). */
typedef struct tc_cg_emu tc_cg_emu;

/* Compile code's text and launchers for its kernels.  NULL with an error
 * in d when the code is malformed (a launch configuration out of range, a
 * parameter naming no tensor), the compiler cannot be run, or it fails
 * (its output, the first 40 lines, in the message). */
__tc_give tc_cg_emu *tc_cg_emu_compile(__tc_keep const tc_cg_cuda *code, __tc_keep tc_diags *d);

/* Run kernel number kernel of e's code on the tensors: buf[t] and nelem[t]
 * are the data and element count of tensor t (the params' tensor
 * numbers index them; elements are the params' ctype).  TC_ERR with the
 * first problem (and how many more there were) in d. */
tc_stat tc_cg_emu_run(__tc_keep tc_cg_emu *e, int kernel, void *const *buf, const int64_t *nelem,
	__tc_keep tc_diags *d);

/* The number of kernels of e's code. */
int tc_cg_emu_nkernels(__tc_keep const tc_cg_emu *e);

/* The compiler command the emulator would run now (static or from the
 * environment; not owned). */
const char *tc_cg_emu_cxx(void);

/* Free e: its stacks, its shared object (NULL: nothing; an object the
 * memo keeps stays open for a later compile of the same unit).  Not while
 * one of its kernels runs. */
void tc_cg_emu_free(__tc_take tc_cg_emu *e);

#endif
