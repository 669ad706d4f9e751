/* kernels/attnmerge.cu: CUDA log-sum-exp merge of two attention outputs
 * (see attnmerge.h). One thread per element; each reads its row's two
 * log-sum-exps, and the row's first element's thread writes the merged one
 * after every thread of the row has read the old (a second pass). */
#include "kernels/attnmerge.h"
#include "kernels/kern_cuda.cuh"

__global__ void attnmerge_out_kernel(bf16 *out, const float *lse, const bf16 *out_b, const float *lse_b, long n,
                                     int T, int NH, int HS) {
  long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= n) return;
  long row = idx / HS; /* (b, t, h) */
  int h = (int)(row % NH);
  long bt = row / NH, b = bt / T, t = bt % T, r = (b * NH + h) * T + t;
  float w, wb, L;
  if (!kern_attnmerge_weights(lse[r], lse_b[r], &w, &wb, &L)) return;
  st(out + idx, w * ld(out + idx) + wb * ld(out_b + idx));
}

__global__ void attnmerge_lse_kernel(float *lse, const float *lse_b, long rows) {
  long r = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float w, wb, L;
  if (kern_attnmerge_weights(lse[r], lse_b[r], &w, &wb, &L)) lse[r] = L;
}

extern "C" int kern_attnmerge_cuda(kern_bf16 *out, float *lse, const kern_bf16 *out_b, const float *lse_b, int B,
                                   int T, int NH, int HS, cudaStream_t stream) {
  long n = (long)B * T * NH * HS, rows = (long)B * NH * T;
  KERN_LAUNCH(kern_cdiv(n, 256), 256, 0, stream, attnmerge_out_kernel)((bf16 *)out, lse, (const bf16 *)out_b,
                                                                       lse_b, n, T, NH, HS);
  KERN_LAUNCH_TRY();
  KERN_LAUNCH(kern_cdiv(rows, 256), 256, 0, stream, attnmerge_lse_kernel)(lse, lse_b, rows);
  KERN_LAUNCH_TRY();
  return 0;
}
