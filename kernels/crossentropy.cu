/* kernels/crossentropy.cu: CUDA fused softmax + cross-entropy. One block
 * per row: each thread keeps a running (max, sum of exp) over its strided
 * slice of the vocabulary (online softmax), then the block merges them.
 * The backward recomputes each probability from lse: one read of the
 * logits and one write of dlogits, in place allowed. Rows are read and
 * written 8 bf16 (16 bytes) at a time when V % 8 == 0 and the pointers
 * allow (VEC = 8), else one element at a time (VEC = 1). */
#include "kernels/crossentropy.h"
#include "kernels/kern_cuda.cuh"

#define CE_THREADS 256

template <int VEC>
__global__ void __launch_bounds__(CE_THREADS)
    ce_fwd_kernel(float *losses, float *lse, const bf16 *logits, const int *targets, int V) {
  long n = blockIdx.x;
  const bf16 *x = logits + n * V;
  float m = -INFINITY, s = 0.0f;
  for (int j = threadIdx.x * VEC; j < V; j += blockDim.x * VEC) {
    float xv[VEC], mx = -INFINITY;
    vload<VEC>(xv, x + j);
#pragma unroll
    for (int e = 0; e < VEC; e++) mx = fmaxf(mx, xv[e]);
    if (mx == -INFINITY) continue; /* masked logits add 0; (-inf) - (-inf) would be NaN */
    if (mx > m) { /* invariant: s = sum of exp(x - m) over this thread's slice */
      s *= __expf(m - mx);
      m = mx;
    }
#pragma unroll
    for (int e = 0; e < VEC; e++) s += __expf(xv[e] - m);
  }
  float M = block_max(m);
  float S = block_sum(m == -INFINITY ? 0.0f : s * __expf(m - M));
  if (threadIdx.x != 0) return;
  float L = M + logf(S);
  int t = targets[n];
  lse[n] = L;
  losses[n] = t < 0 ? 0.0f : L - ld(x + t);
}

template <int VEC>
__global__ void __launch_bounds__(CE_THREADS)
    ce_bwd_kernel(bf16 *dlogits, const bf16 *logits, const float *lse, const int *targets,
                  float dloss, int V) {
  long n = blockIdx.x;
  int t = targets[n];
  float L = lse[n];
  for (int j = threadIdx.x * VEC; j < V; j += blockDim.x * VEC) {
    float g[VEC];
    vload<VEC>(g, logits + n * V + j);
#pragma unroll
    for (int e = 0; e < VEC; e++)
      g[e] = t < 0 ? 0.0f : (__expf(g[e] - L) - (j + e == t ? 1.0f : 0.0f)) * dloss;
    vstore<VEC>(dlogits + n * V + j, g);
  }
}

extern "C" int kern_crossentropy_fwd_cuda(float *losses, float *lse, const kern_bf16 *logits,
                                          const int *targets, int N, int V,
                                          cudaStream_t stream) {
  const void *p[] = {logits};
  const bf16 *X = (const bf16 *)logits;
  if (V % 8 == 0 && kern_aligned16(p, 1))
    KERN_LAUNCH(N, CE_THREADS, 0, stream, ce_fwd_kernel<8>)(losses, lse, X, targets, V);
  else
    KERN_LAUNCH(N, CE_THREADS, 0, stream, ce_fwd_kernel<1>)(losses, lse, X, targets, V);
  KERN_LAUNCH_TRY();
  return 0;
}

extern "C" int kern_crossentropy_bwd_cuda(kern_bf16 *dlogits, const kern_bf16 *logits,
                                          const float *lse, const int *targets, float dloss,
                                          int N, int V, cudaStream_t stream) {
  const void *p[] = {dlogits, logits};
  bf16 *D = (bf16 *)dlogits;
  const bf16 *X = (const bf16 *)logits;
  if (V % 8 == 0 && kern_aligned16(p, 2))
    KERN_LAUNCH(N, CE_THREADS, 0, stream, ce_bwd_kernel<8>)(D, X, lse, targets, dloss, V);
  else
    KERN_LAUNCH(N, CE_THREADS, 0, stream, ce_bwd_kernel<1>)(D, X, lse, targets, dloss, V);
  KERN_LAUNCH_TRY();
  return 0;
}
