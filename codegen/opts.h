/* The options code generators read: the backend half of the option table
 * (runtime/options.c decodes the user's options into it; the schedule
 * passes read theirs from tc_poly_opts).  How arithmetic may be rewritten
 * and how loops are vectorised.
 *
 * All zeroes (also what a NULL pointer to it means) are the conservative
 * settings: no FMA contraction, no fast-math, float reductions in the
 * interpreter's order, no streaming stores, the backend's own vector widths
 * and unroll counts.
 *
 * Ownership: none.  Plain values, no pointers: code generators borrow the
 * caller's struct for the call. */
#ifndef TC_CG_OPTS_H
#define TC_CG_OPTS_H

/* The code generators' options (see above). */
typedef struct tc_cg_opts {
	int contract;     /* float32/float64 multiplies and adds may fuse (FMA) */
	int fastmath;     /* ... and reassociate; min/max assume no NaN; arcp */
	int vecreduce;    /* float sums and max=!/min=! outside register tiles
			   * may run as vector partial results (any order);
			   * products keep their order */
	int stream;       /* non-temporal stores for large outputs written once:
			   * 1 (auto) where the kernel's tensors take a
			   * quarter of the target's l3_bytes or more, 2 (on)
			   * whatever the cache, 0 (off) never */
	int vector;       /* lanes of the innermost loops' vectors; 0: the
			   * backend chooses, 1: no vector instructions */
	int unroll_inner; /* vector iterations per trip of the innermost loops;
			   * 0: the backend chooses */
	int gpu_arch;     /* GPU: the compute capability compiled for, as
			   * major * 10 + minor (90: sm_90); 0: the device's */
	int mask;         /* CPU: a register tile's rest of a row shorter than a
			   * vector as one masked vector (tc_target.masked_rest):
			   * 0 where the host runs full-width vectors at full
			   * rate, 1 always, -1 never */
	int cpu;          /* CPU: 0 compiles for the host; 1 to 4 for the
			   * x86-64 psABI level x86-64, -v2, -v3 or -v4
			   * (codegen/llvm.h, tc_cg_llvm_level_*) */
} tc_cg_opts;

#endif
