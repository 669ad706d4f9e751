/* kernels/rope.cu: CUDA rotary position embedding (see rope.h). One thread
 * per (row, head, pair): the angle and its sine and cosine in double (the
 * build's fast math would lose the large angles), the pair in fp32. */
#include "kernels/rope.h"
#include "kernels/kern_cuda.cuh"

__global__ void rope_kernel(bf16 *x, long pairs, int T, int t0, int H, int HS, double base, int inverse) {
  long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= pairs) return;
  int half = HS / 2, i = (int)(idx % half);
  long nh = idx / half, n = nh / H;
  double a = kern_rope_angle(t0 + (int)(n % T), i, HS, base), sd, cd;
  sincos(a, &sd, &cd);
  float c = (float)cd, s = (float)(inverse ? -sd : sd);
  bf16 *v = x + nh * HS;
  float lo = ld(v + i), hi = ld(v + i + half);
  st(v + i, lo * c - hi * s);
  st(v + i + half, hi * c + lo * s);
}

extern "C" int kern_rope_cuda(kern_bf16 *x, int N, int T, int t0, int H, int HS, double base, int inverse,
                              cudaStream_t stream) {
  long pairs = (long)N * H * (HS / 2);
  KERN_LAUNCH(kern_cdiv(pairs, 256), 256, 0, stream, rope_kernel)((bf16 *)x, pairs, T, t0, H, HS, base, inverse);
  KERN_LAUNCH_TRY();
  return 0;
}
