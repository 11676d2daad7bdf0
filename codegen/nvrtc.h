/* NVRTC: CUDA C source to PTX or a cubin, through libnvrtc opened with
 * dlopen at run time (codegen/nvrtc.c).
 *
 * tcomp builds and runs its CPU path on machines without the CUDA toolkit:
 * nothing here links against NVRTC.  The library is looked for, once per
 * process, at the path CMake found (FindCUDAToolkit's CUDA::nvrtc,
 * compiled in as TCOMP_NVRTC_PATH), then by the sonames of CUDA 13 and 12
 * and plain libnvrtc.so through the dynamic linker's search; the
 * environment variable TCOMP_NVRTC, when set, names the file to open
 * instead (no other is tried).  Every function is safe to call from several
 * threads at once. */
#ifndef TCOMP_CODEGEN_NVRTC_H
#define TCOMP_CODEGEN_NVRTC_H

#include "../lang/diag.h"

#include <stddef.h>

/* Whether NVRTC could be opened: 1, or 0 with the reason in d (every
 * name tried, with dlerror's message for the last). */
int tc_cg_nvrtc_available(__tc_keep tc_diags *d);

/* NVRTC's version (major, minor), or -1 with the reason in d. */
int tc_cg_nvrtc_version(int *major, int *minor, __tc_keep tc_diags *d);

/* Whether NVRTC can compile for arch ("sm_90", "compute_90", ...): 1; 0
 * with an error in d naming the architectures it can (or why NVRTC is
 * unavailable). */
int tc_cg_nvrtc_supports(__tc_keep const char *arch, __tc_keep tc_diags *d);

/* Compile CUDA C source (a translation unit named name, e.g. the def's
 * name with ".cu") for arch with NVRTC: with cubin, the cubin of sm_XX
 * (arch must then be an sm_ one); else the PTX text (NUL-terminated,
 * *size counts the NUL).  *image (tc_free) and *size are set on success.
 * NVRTC's log, when it says anything, goes to *log (tc_free; may be NULL
 * to drop it) on success and failure alike; with a cubin and a log, ptxas
 * reports each kernel's registers, spills and shared memory there.  A failure is an error in d
 * naming what and NVRTC's message, with the log. */
tc_stat tc_cg_nvrtc_compile(__tc_keep const char *source, __tc_keep const char *name,
	__tc_keep const char *arch, int cubin, __tc_give char **image, size_t *size,
	__tc_give char **log, __tc_keep tc_diags *d);

#endif
