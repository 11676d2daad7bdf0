/* The target description's cache blocking (target.h): the contraction
 * blocks derived from the sizes of the host's caches.
 *
 * The register tile of a contraction (polyhedral/regtile.c) is at most 4
 * vectors wide (NR: 64 floats with AVX-512) and the tile pass
 * (polyhedral/tile.c) sweeps, within a KC x NC block of the right operand,
 * every NR-wide panel of that block for each MR-row panel of the left one.
 * Rules, as in BLIS's analytical model (Low et al., "Analytical modeling is
 * enough for high-performance BLIS", 2016), for 4-byte elements:
 * - KC: a KC x NR panel of the right operand fills the L1d, so that the
 *   panel a register tile sweeps (KC rows of NR lanes) comes from L1 and
 *   from no further than L2 when evicted by the left operand's panel (32
 *   KiB: KC = 128; sgemm 2048 on the Zen 4 host, 1 thread, contract=on:
 *   KC = 128 took 0.93x the time of KC = 256, whose 256 rows of 8 KiB
 *   stride also map to 16 sets of the 8-way L2 only, two rows per way);
 *   a multiple of 16, 64 to 256;
 * - NC: a KC x NC block of the right operand fills a quarter of the L2 (1
 *   MiB and KC = 128: NC = 512; half the L2, NC = 1024, was no faster at
 *   1024 and 2048), so that it stays there with the left operand's MC x KC
 *   block and the outputs; a multiple of NR, NR to 4096;
 * - MC stays the measured 48 rows (192 for rows of 1536 or more): an MC x
 *   KC block of the left operand (24 or 96 KiB at KC = 128) fits L2
 *   beside the right operand's block.
 * A cache size of 0 (unknown) keeps the field's value, the fallback the
 * backend set before (the blocks measured on the Zen 5 of
 * docs/performance.md: KC 256, NC 512, a 48 KiB L1d). */
#include "target.h"

void tc_target_cache_blocks(__tc_keep tc_target *t, int64_t l1d, int64_t l2)
{
	int64_t nr = 4 * (int64_t)(t->vector_bytes > 0 ? t->vector_bytes : 16), kc, nc;
	if (l1d > 0) {
		t->l1_bytes = l1d;
		kc = l1d / nr / 16 * 16;
		t->block_depth = kc < 64 ? 64 : kc > 256 ? 256 : kc;
	}
	if (l2 > 0) {
		t->l2_bytes = l2;
		nc = l2 / 4 / (t->block_depth * 4) / (nr / 4) * (nr / 4);
		t->block_cols = nc < nr / 4 ? nr / 4 : nc > 4096 ? 4096 : nc;
	}
}
