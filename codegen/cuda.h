/* The isl AST of a tc_poly mapped for a GPU (polyhedral/gpu.c) printed as
 * CUDA C (codegen/cuda.c): one or more __global__ kernels launched in
 * order on one stream, with their launch configurations.  The same text
 * goes to NVRTC (codegen/nvrtc.h) for a GPU and to the system C++ compiler
 * with the emulation header for the CPU (codegen/cuda_emu.h).
 *
 * The text's contract (what NVRTC and the emulator both provide):
 *   - it starts with tc_cg_cuda_prelude(), which under NVRTC (TC_CUDA_EMU
 *     not defined) defines the fixed-width integer types, INT64_C and
 *     UINT64_C, the limits INTn_MIN/INTn_MAX/UINTn_MAX, NAN, INFINITY,
 *     FLT_MAX and DBL_MAX, and the macros below; the emulation header
 *     defines TC_CUDA_EMU and provides the same names for the CPU;
 *   - a kernel is  extern "C" __global__ void __launch_bounds__(N)
 *     NAME(TC_GLOBAL(T) a, ...)  with one parameter per tensor it touches
 *     (TC_GLOBAL(const T) for tensors it only reads), in the order of
 *     tc_cg_cuda_kernel.params; every size is a constant of the text;
 *   - an element of a tensor parameter is P[i] (i an int64_t offset);
 *     a read through the read-only cache is TC_LDG(P, i);
 *   - block-shared storage is declared inside a kernel as
 *     TC_SHARED(T, NAME, N) (a constant N), and used as NAME[i];
 *   - the kernels use CUDA's built-ins: threadIdx, blockIdx, blockDim,
 *     gridDim, warpSize, __syncthreads(), __syncwarp(), __shfl_sync,
 *     __shfl_down_sync, __shfl_xor_sync, and CUDA's math functions in
 *     float and double (expf, rsqrtf, sinpi, erfinv, normcdf, ...);
 *   - helpers are  static __device__ __forceinline__  functions;
 *   - a text that stores float16 or bfloat16 (as __half and
 *     __nv_bfloat16) has tc_cg_cuda_prelude16() after the prelude, and its
 *     helpers also call CUDA's __double2float_rz, __float_as_uint and
 *     __uint_as_float.
 *
 * Ownership: a tc_cg_cuda is the caller's (tc_cg_cuda_free) and owns its
 * text, kernels and names; the model is borrowed. */
#ifndef TC_CG_CUDA_H
#define TC_CG_CUDA_H

#include "../polyhedral/poly.h"

#include <stddef.h>

/* A parameter of a kernel: a tensor of the def (inputs, outputs and
 * temporaries alike; the caller places temporaries in device memory). */
typedef struct tc_cg_cuda_param {
	int tensor;        /* the IR tensor: its index in f->tensors */
	const char *name;  /* its name in the text (owned by the tc_cg_cuda) */
	const char *ctype; /* the element type as the text spells it:
			    * "float", "__half", ... (static) */
	int is_const;      /* only read: TC_GLOBAL(const ctype) */
} tc_cg_cuda_param;

/* A kernel of the text and how it is launched. */
typedef struct tc_cg_cuda_kernel {
	char name[64];        /* its name in the text (extern "C") */
	unsigned grid[3];     /* blocks in x, y, z (each >= 1) */
	unsigned block[3];    /* threads per block in x, y, z (each >= 1,
			       * their product at most 1024) */
	size_t shared_bytes;  /* dynamic shared memory: 0 (the text
			       * declares its shared storage statically) */
	int nparams;
	tc_cg_cuda_param *params; /* owned */
} tc_cg_cuda_kernel;

/* The CUDA code of one def: the text and its kernels, launched in order
 * on one stream (each sees every write of the ones before it). */
typedef struct tc_cg_cuda {
	char *source;     /* the translation unit, NUL-terminated (owned) */
	int nkernels;
	tc_cg_cuda_kernel *kernels; /* owned */
	char **names;     /* the tensors' names in the text, by tensor
			   * (owned; the params' names point here) */
	int ntensors;
} tc_cg_cuda;

/* The prelude every CUDA text of tcomp starts with (static text): under
 * NVRTC the types, limits and macros of the contract above; nothing when
 * TC_CUDA_EMU is defined (the emulation header has them). */
const char *tc_cg_cuda_prelude(void);
/* What follows the prelude in a text that stores float16 or bfloat16
 * (static text): under NVRTC the types __half and __nv_bfloat16 (2 bytes,
 * the layout of cuda_fp16.h's and cuda_bf16.h's) and the conversions
 * __half2float, __float2half_rn, __bfloat162float, __float2bfloat16_rn,
 * and __ldg of both types; nothing when TC_CUDA_EMU is defined (the
 * emulation header has them, with the same rounding). */
const char *tc_cg_cuda_prelude16(void);

/* The CUDA code of p (scheduled by the GPU passes, tc_poly_gpu_passes,
 * with its AST and concrete sizes), or NULL with a message in d.
 * contract: the contract option (sums with a product written as fma/fmaf
 * calls, as the CPU code rounds them). */
__tc_give tc_cg_cuda *tc_cg_cuda_build(__tc_keep const tc_poly *p, int contract,
	__tc_keep tc_diags *d);
/* Free c and everything it owns (NULL: nothing). */
void tc_cg_cuda_free(__tc_take tc_cg_cuda *c);

#endif
