/* kernels/crossentropy.cu: CUDA fused softmax + cross-entropy, whole or
 * split by vocabulary (crossentropy.h). One block per row: each thread
 * keeps a running (max, sum of exp) over its strided slice of the
 * vocabulary (online softmax), then the block merges them; the split
 * forward writes the slice's (lse, target logit) instead of the loss, and
 * the merge runs a thread per row over the P parts. The backward
 * recomputes each probability from lse: one read of the logits and one
 * write of dlogits, in place allowed. Rows are read and written 8 bf16 (16
 * bytes) at a time when V % 8 == 0 and the pointers allow (VEC = 8), else
 * one element at a time (VEC = 1). */
#include "kernels/crossentropy.h"
#include "kernels/kern_cuda.cuh"

#define CE_THREADS 256

/* PART = false: losses (N), lse (N) of whole rows. PART = true: out (N, 2)
 * = the slice's lse and the target's logit (0 outside the slice). */
template <int VEC, bool PART>
__global__ void __launch_bounds__(CE_THREADS)
    ce_fwd_kernel(float *out, float *lse, const bf16 *logits, const int *targets, int v0, int V) {
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
  int t = targets[n], tl = t - v0;
  if (PART) {
    out[2 * n] = L;
    out[2 * n + 1] = t >= 0 && tl >= 0 && tl < V ? ld(x + tl) : 0.0f;
  } else {
    lse[n] = L;
    out[n] = t < 0 ? 0.0f : L - ld(x + t);
  }
}

__global__ void ce_merge_kernel(float *losses, float *lse, const float *parts, const int *targets,
                                int P, int N) {
  long n = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  float m = -INFINITY, s = 0.0f, tl = 0.0f;
  for (int p = 0; p < P; p++) m = fmaxf(m, parts[2 * ((long)p * N + n)]);
  for (int p = 0; p < P; p++) {
    const float *q = parts + 2 * ((long)p * N + n);
    s += expf(q[0] - m), tl += q[1];
  }
  float L = m + logf(s);
  lse[n] = L;
  losses[n] = targets[n] < 0 ? 0.0f : L - tl;
}

template <int VEC>
__global__ void __launch_bounds__(CE_THREADS)
    ce_bwd_kernel(bf16 *dlogits, const bf16 *logits, const float *lse, const int *targets, int v0,
                  float dloss, int V) {
  long n = blockIdx.x;
  int t = targets[n], tl = t - v0;
  float L = lse[n];
  for (int j = threadIdx.x * VEC; j < V; j += blockDim.x * VEC) {
    float g[VEC];
    vload<VEC>(g, logits + n * V + j);
#pragma unroll
    for (int e = 0; e < VEC; e++)
      g[e] = t < 0 ? 0.0f : (__expf(g[e] - L) - (j + e == tl ? 1.0f : 0.0f)) * dloss;
    vstore<VEC>(dlogits + n * V + j, g);
  }
}

template <bool PART>
static int fwd(float *out, float *lse, const kern_bf16 *logits, const int *targets, int v0, int N,
               int V, cudaStream_t stream) {
  const void *p[] = {logits};
  const bf16 *X = (const bf16 *)logits;
  if (V % 8 == 0 && kern_aligned16(p, 1))
    KERN_LAUNCH(N, CE_THREADS, 0, stream, ce_fwd_kernel<8, PART>)(out, lse, X, targets, v0, V);
  else
    KERN_LAUNCH(N, CE_THREADS, 0, stream, ce_fwd_kernel<1, PART>)(out, lse, X, targets, v0, V);
  KERN_LAUNCH_TRY();
  return 0;
}

extern "C" int kern_crossentropy_fwd_cuda(float *losses, float *lse, const kern_bf16 *logits,
                                          const int *targets, int N, int V,
                                          cudaStream_t stream) {
  return fwd<false>(losses, lse, logits, targets, 0, N, V, stream);
}

extern "C" int kern_crossentropy_part_cuda(float *part, const kern_bf16 *logits, const int *targets,
                                           int v0, int N, int V, cudaStream_t stream) {
  return fwd<true>(part, NULL, logits, targets, v0, N, V, stream);
}

extern "C" int kern_crossentropy_merge_cuda(float *losses, float *lse, const float *parts,
                                            const int *targets, int P, int N,
                                            cudaStream_t stream) {
  KERN_LAUNCH(kern_cdiv(N, 256), 256, 0, stream, ce_merge_kernel)(losses, lse, parts, targets, P, N);
  KERN_LAUNCH_TRY();
  return 0;
}

extern "C" int kern_crossentropy_bwd_cuda(kern_bf16 *dlogits, const kern_bf16 *logits,
                                          const float *lse, const int *targets, int v0,
                                          float dloss, int N, int V, cudaStream_t stream) {
  const void *p[] = {dlogits, logits};
  bf16 *D = (bf16 *)dlogits;
  const bf16 *X = (const bf16 *)logits;
  if (V % 8 == 0 && kern_aligned16(p, 2))
    KERN_LAUNCH(N, CE_THREADS, 0, stream, ce_bwd_kernel<8>)(D, X, lse, targets, v0, dloss, V);
  else
    KERN_LAUNCH(N, CE_THREADS, 0, stream, ce_bwd_kernel<1>)(D, X, lse, targets, v0, dloss, V);
  KERN_LAUNCH_TRY();
  return 0;
}
