/* The thread pool that runs parallel loops of compiled kernels.
 *
 * Ownership: the pool and its workers are process-wide and never freed;
 * the tensors array is borrowed for the duration of one loop. */
#ifndef TC_RT_POOL_H
#define TC_RT_POOL_H

#include "../lang/util.h"

#include <stdint.h>

/* The outlined body of a parallel loop (codegen/llvm.h): iterations
 * begin..end-1, the iterator being lo + k * step. */
typedef void (*tc_rt_loop_body)(void *const *tensors, int64_t begin, int64_t end, int64_t lo,
	int64_t step);

/* Run iterations 0..count-1 of body on the pool (the caller takes part).
 * Thread-safe; reentrant calls while the pool is busy run on the caller. */
void tc_rt_parallel_for(tc_rt_loop_body body, __tc_keep void *const *tensors, int64_t count,
	int64_t lo, int64_t step);
/* The CPUs this process may run on: its affinity mask (taskset, a cpuset
 * cgroup, mpirun --bind-to), else the online CPUs; at least 1.  threads=auto
 * and the autotuner's compiles in parallel count these. */
int tc_rt_cpus(void);
/* How many threads the calling thread's next parallel loops use (0: one per
 * CPU this process may run on, tc_rt_cpus). */
void tc_rt_pool_set_threads(int n);
/* Workers started from now on run with their stack pointer this many bytes
 * (at most 64 KiB) lower than they would: the autotuner times each
 * candidate, in a forked child whose workers start afresh, at a stack
 * offset of its own, since some kernels' speed depends on where the stack
 * lies in its page (autotune/eval.c, time_shifted). */
void tc_rt_pool_set_stack_shift(int bytes);

#endif
