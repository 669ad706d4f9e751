/* kernels/dropout.cu: CUDA elementwise dropout (see dropout.h). One thread
 * per element, its Philox draw computed in place; the same bits as
 * kern_dropout_ref, and the 1-byte mask when asked for. */
#include "kernels/dropout.h"
#include "kernels/kern_cuda.cuh"

__global__ void dropout_kernel(bf16 *out, uint8_t *mask, const bf16 *in, long n, kern_dropout d) {
  long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float m = kern_dropout_mult(&d, d.base + i);
  st(out + i, ld(in + i) * m);
  if (mask) mask[i] = m != 0.0f;
}

__global__ void dropout_masked_kernel(bf16 *out, const bf16 *in, const uint8_t *mask, long n, float scale) {
  long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) st(out + i, mask[i] ? ld(in + i) * scale : 0.0f);
}

extern "C" int kern_dropout_cuda(kern_bf16 *out, uint8_t *mask, const kern_bf16 *in, long n, kern_dropout d,
                                 cudaStream_t stream) {
  if (n <= 0) return 0;
  if (d.p <= 0.0f) {
    if (out != in) KERN_CUDA_TRY(cudaMemcpyAsync(out, in, sizeof(kern_bf16) * (size_t)n, cudaMemcpyDeviceToDevice, stream));
    if (mask) KERN_CUDA_TRY(cudaMemsetAsync(mask, 1, (size_t)n, stream));
    return 0;
  }
  KERN_LAUNCH(kern_cdiv(n, 256), 256, 0, stream, dropout_kernel)((bf16 *)out, mask, (const bf16 *)in, n, d);
  KERN_LAUNCH_TRY();
  return 0;
}

extern "C" int kern_dropout_masked_cuda(kern_bf16 *out, const kern_bf16 *in, const uint8_t *mask, long n,
                                        float scale, cudaStream_t stream) {
  if (n <= 0) return 0;
  KERN_LAUNCH(kern_cdiv(n, 256), 256, 0, stream, dropout_masked_kernel)((bf16 *)out, (const bf16 *)in, mask, n,
                                                                         scale);
  KERN_LAUNCH_TRY();
  return 0;
}
