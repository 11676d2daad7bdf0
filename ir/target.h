/* The target description: what the IR rewrites, the schedule passes and the
 * code generators may know of the machine a kernel is compiled for, so that
 * none of them names a machine constant.  Plain data: a backend fills it
 * (runtime/backend*.c: the host CPU for the LLVM backend) and the pipeline
 * (runtime/pipeline.c) hands it down; passes read it and never change it.
 * It lives in ir/, the lowest layer every compilation stage shares.
 *
 * The block sizes are part of the description, as in BLIS's per-
 * architecture contexts.  MC and a convolution's KC are measured; KC and
 * NC of other contractions are derived from the L1d's and L2's sizes the
 * host reports (tc_target_cache_blocks, ir/target.c), read for those two
 * levels only: a virtual machine's reports can be off (getconf says 320
 * MiB of L3 where lscpu says 32; the Zen 5 machines of earlier sessions
 * reported 32 KiB of L1d where Zen 5 has 48, which gives KC 128 there,
 * not the 256 measured on them: unmeasured since, as no session has had
 * one).  A GPU backend adds its own fields (warp size, multiprocessors,
 * shared memory per block, threads per block) when it exists.
 *
 * Owner: the caller that fills it; every consumer borrows it (__tc_keep)
 * for the duration of one compilation. */
#ifndef TC_IR_TARGET_H
#define TC_IR_TARGET_H

#include "../lang/util.h"

#include <stdint.h>

/* The description of one machine (see above). */
typedef struct tc_target {
	const char *name; /* the backend's name ("cpu"); static */

	/* vectors and registers */
	int vector_bytes; /* bytes of one vector register (64 with AVX-512) */
	int accumulators; /* vector registers a register tile's partial sums may
			   * hold (24 of AVX-512's 32: the rest for the shared
			   * loads and the broadcasts) */
	int masked_rest;  /* a row's rest of columns shorter than a vector
			   * is one vector of the full width under a lane
			   * mask (AVX-512 masked loads and stores), not
			   * vectors of fewer lanes: where full-width
			   * vectors run at full rate (Zen 5: grouped
			   * convolution rows of 14 and 26, docs/
			   * performance.md, "Masked rows"; on Zen 4 two
			   * halves, and the narrower vectors were faster) */
	int vector_regs;  /* vector registers in all (32 with AVX-512, 16 with
			   * AVX2; 0: unknown, taken as 4/3 of accumulators):
			   * a register tile's sums, its row's vectors and a
			   * broadcast must fit (polyhedral/regtile.c) */

	/* cache blocking of contractions (BLIS's MC, KC, NC), in elements */
	int64_t block_rows;      /* MC: rows of the left operand per block */
	int rows_per_thread;     /* the first nest's parallel row member in one
				  * block per thread instead (polyhedral/tile.c) */
	int64_t block_rows_long; /* MC for row members of long_rows or more */
	int64_t long_rows;
	int64_t block_depth;     /* KC: the reduction's block */
	int deep_blocks;         /* KC and NC from the register tile's streams
				  * instead (polyhedral/tile.c, deep_blocks):
				  * the reduction whole up to the depth whose
				  * left-operand rows of a register tile fill
				  * half the L1, NC the columns whose KC x NC
				  * block fills half the L2 (at most
				  * block_cols); image and convolution tiles
				  * keep block_depth and conv_depth */
	int64_t conv_depth;      /* a convolution's KC: its weights' block,
				  * input channels times the window's points
				  * (polyhedral/tile.c; measured, not derived
				  * from the caches) */
	int64_t block_cols;      /* NC: the innermost (vector) member's block */
	int64_t transpose_tile;  /* packing copies that transpose: square tiles
				  * of this side, one 64-byte cache line of
				  * 4-byte elements per row of a tile (16 on
				  * the CPU): a row stride of a power of two
				  * puts the tile's rows in one L1 set, and
				  * each row then costs one line (32: two;
				  * sgemm_nt 1024 took 0.93-0.96x the time
				  * with 16 on the Zen 4 host, 8 1.05-1.09x,
				  * docs/performance.md) */
	int64_t panel_bytes;     /* packing copies in panels of this many
				  * bytes per row (ir/pack.c, "Panels"; 0:
				  * row-major copies, and no copy of an
				  * operand read along its rows already) */
	int64_t panel_min_row;   /* ... for copies whose rows have this many
				  * bytes or more (shorter ones share the L1's
				  * sets and pages between a few rows) */
	int64_t l3_bytes;        /* the last-level cache (0: unknown): outputs
				  * are streamed (codegen's stream option, auto)
				  * only by kernels whose tensors take a quarter
				  * of it or more */
	int64_t l2_bytes;        /* the level-2 cache (0: unknown): whether a
				  * contraction's right operand stays in it
				  * unblocked (polyhedral/tile.c) */
	int64_t l1_bytes;        /* the level-1 data cache (0: unknown): what a
				  * convolution's register tile may sweep again
				  * per output channel (polyhedral/regtile.c) */

	/* threads and memory */
	int threads;            /* threads the kernel is expected to run on (the
				 * threads option or the context's count; 0:
				 * unknown): cache tiles are split evenly */
	double parallel_min_instances; /* loop nests with fewer statement
				 * instances run on the calling thread:
				 * handing work out costs more than it saves */
	int64_t rowbuf_bytes;   /* the largest row of a temporary kept as a row
				 * buffer on the stack (ir/share.c,
				 * polyhedral/contract.c) */

	/* GPUs (0 on a CPU) */
	int warp_size;          /* threads of a warp (32) */
	int max_block_threads;  /* threads of a block at most (1024) */
	int64_t max_block[3];   /* a block's extent in x, y, z at most (1024, 1024, 64) */
	int64_t max_grid[3];    /* a grid's extent in x, y, z at most (2^31 - 1, 65535, 65535) */
	int block_threads;      /* threads per block the mapping aims at (256) */
	int64_t shared_bytes;   /* shared memory per block (48 KiB static) */
	int multiprocessors;    /* streaming multiprocessors (0: unknown, offline) */
} tc_target;

/* Set t's l1_bytes, l2_bytes and its contraction blocks KC (block_depth)
 * and NC (block_cols) from the sizes in bytes of the L1 data cache l1d and the L2
 * cache l2 (ir/target.c says the rules), for t's vector_bytes; a size of 0
 * (unknown) leaves the fields it sets as they are (the caller's fallback).
 * NC follows the final KC. */
void tc_target_cache_blocks(__tc_keep tc_target *t, int64_t l1d, int64_t l2);

#endif
