/* kernels/dropout.cu: CUDA elementwise dropout (see dropout.h). One thread
 * per element, its Philox draw computed in place (no mask in memory); the
 * same bits as kern_dropout_ref. */
#include "kernels/dropout.h"
#include "kernels/kern_cuda.cuh"

__global__ void dropout_kernel(bf16 *out, const bf16 *in, long n, kern_dropout d) {
  long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) st(out + i, ld(in + i) * kern_dropout_mult(&d, d.base + i));
}

extern "C" int kern_dropout_cuda(kern_bf16 *out, const kern_bf16 *in, long n, kern_dropout d,
                                 cudaStream_t stream) {
  if (n <= 0) return 0;
  if (d.p <= 0.0f) {
    if (out != in) KERN_CUDA_TRY(cudaMemcpyAsync(out, in, sizeof(kern_bf16) * (size_t)n, cudaMemcpyDeviceToDevice, stream));
    return 0;
  }
  KERN_LAUNCH(kern_cdiv(n, 256), 256, 0, stream, dropout_kernel)((bf16 *)out, (const bf16 *)in, n, d);
  KERN_LAUNCH_TRY();
  return 0;
}
