/* kernels/attnmerge.h: merging two attention outputs of the same queries
 * over disjoint sets of keys by their log-sum-exp, as ring attention
 * (context parallelism's p2p form) merges each block of keys it meets:
 *   L = log(e^lse + e^lse_b)
 *   out = e^(lse - L) out + e^(lse_b - L) out_b,   lse = L
 * In place on (out, lse). Layouts as kernels/attention.h: out, out_b (B, T,
 * NH, HS); lse, lse_b (B, NH, T) fp32. A row whose block saw no key has
 * lse -inf and weighs nothing; both -inf leave the row as it is (0). */
#ifndef KERN_ATTNMERGE_H
#define KERN_ATTNMERGE_H
#include <math.h>
#include "kernels/kern_common.h"
#ifdef __cplusplus
extern "C" {
#endif

/* The two weights of a row, the one definition for the reference and the
 * kernel: *w and *wb (summing to 1) and the merged log-sum-exp; 0 where
 * neither side saw a key (nothing to do). */
static inline KERN_HD int kern_attnmerge_weights(float lse, float lse_b, float *w, float *wb, float *merged) {
  float M = lse > lse_b ? lse : lse_b;
  if (M == -INFINITY) return 0;
  float e = expf(lse - M), eb = expf(lse_b - M), s = e + eb;
  *w = e / s, *wb = eb / s, *merged = M + logf(s);
  return 1;
}

void kern_attnmerge_ref(float *out, float *lse, const float *out_b, const float *lse_b, int B, int T, int NH,
                        int HS);

#ifdef KERN_HAVE_CUDA
int kern_attnmerge_cuda(kern_bf16 *out, float *lse, const kern_bf16 *out_b, const float *lse_b, int B, int T,
                        int NH, int HS, cudaStream_t stream);
#endif

#ifdef __cplusplus
}
#endif
#endif
