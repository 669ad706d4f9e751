/* kernels/crossentropy.cu: CUDA fused softmax + cross-entropy. One block
 * per row: each thread keeps a running (max, sum of exp) over its strided
 * slice of the vocabulary (online softmax), then the block merges them.
 * The backward recomputes each probability from lse: one read of the
 * logits and one write of dlogits, in place allowed. */
#include "kernels/crossentropy.h"
#include "kernels/kern_cuda.cuh"

#define CE_THREADS 256

__global__ void __launch_bounds__(CE_THREADS)
    ce_fwd_kernel(float *losses, float *lse, const bf16 *logits, const int *targets, int V) {
  long n = blockIdx.x;
  const bf16 *x = logits + n * V;
  float m = -INFINITY, s = 0.0f;
  for (int j = threadIdx.x; j < V; j += blockDim.x) {
    float xj = ld(x + j);
    if (xj == -INFINITY) continue; /* a masked logit adds 0; (-inf) - (-inf) would be NaN */
    if (xj > m) { /* invariant: s = sum of exp(x - m) over this thread's slice */
      s *= __expf(m - xj);
      m = xj;
    }
    s += __expf(xj - m);
  }
  float M = block_max(m);
  float S = block_sum(m == -INFINITY ? 0.0f : s * __expf(m - M));
  if (threadIdx.x != 0) return;
  float L = M + logf(S);
  int t = targets[n];
  lse[n] = L;
  losses[n] = t < 0 ? 0.0f : L - ld(x + t);
}

__global__ void __launch_bounds__(CE_THREADS)
    ce_bwd_kernel(bf16 *dlogits, const bf16 *logits, const float *lse, const int *targets,
                  float dloss, int V) {
  long n = blockIdx.x;
  int t = targets[n];
  float L = lse[n];
  for (int j = threadIdx.x; j < V; j += blockDim.x) {
    float p = __expf(ld(logits + n * V + j) - L);
    st(dlogits + n * V + j, t < 0 ? 0.0f : (p - (j == t ? 1.0f : 0.0f)) * dloss);
  }
}

extern "C" int kern_crossentropy_fwd_cuda(float *losses, float *lse, const kern_bf16 *logits,
                                          const int *targets, int N, int V,
                                          cudaStream_t stream) {
  KERN_LAUNCH(N, CE_THREADS, 0, stream, ce_fwd_kernel)(losses, lse, (const bf16 *)logits, targets, V);
  KERN_LAUNCH_TRY();
  return 0;
}

extern "C" int kern_crossentropy_bwd_cuda(kern_bf16 *dlogits, const kern_bf16 *logits,
                                          const float *lse, const int *targets, float dloss,
                                          int N, int V, cudaStream_t stream) {
  KERN_LAUNCH(N, CE_THREADS, 0, stream, ce_bwd_kernel)((bf16 *)dlogits, (const bf16 *)logits, lse,
                                              targets, dloss, V);
  KERN_LAUNCH_TRY();
  return 0;
}
