/* runtime/data.c's one internal entry point beside the public API
 * (tc_idx_read, tc_batches_*): the random stream that tc_batches shuffles
 * with and the training runtime initialises parameters from (runtime/
 * train.c), so both follow the one definition include/tcomp.h states. */
#ifndef TC_RT_DATA_H
#define TC_RT_DATA_H

#include <stdint.h>

/* xorshift64* (Vigna): the state steps by xorshift (12, 25, 27), the result
 * is the new state times 0x2545F4914F6CDD1D (mod 2^64).  The state must not
 * be 0.  The same stream on every machine. */
uint64_t tc_rt_xorshift64s(uint64_t *state);

#endif
