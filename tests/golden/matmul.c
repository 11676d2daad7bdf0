/* tcomp: def matmul parametric in M, K, N
 * tensors[t] is the data of tensor t, dense and row-major: inputs, outputs,
 * then temporaries (workspace the caller provides).  Float operations round
 * as written: compile without contraction (-ffp-contract=off). */
#include <math.h>
#include <stdint.h>

void matmul(void *const *tensors, int64_t M, int64_t K, int64_t N)
{
  const float *A = (const float *)tensors[0];
  const float *B = (const float *)tensors[1];
  float *C = (float *)tensors[2];
  // tc_kernel
  for (int64_t c0 = 0; c0 < M; c0 += 1)
    for (int64_t c1 = 0; c1 < N; c1 += 1) {
      C[c0 * N + c1] = 0.0f;
      for (int64_t c2 = 0; c2 < K; c2 += 1)
        C[c0 * N + c1] += A[c0 * K + c2] * B[c2 * N + c1];
    }
}
