/* kernels/dropout.cu: CUDA elementwise dropout, and dropout fused with the
 * residual add (see dropout.h). One thread per Philox call: the four
 * elements whose indices share its counter, so each call's four words are
 * all used, as in the reference (kern_dropout_block). The same bits as
 * kern_dropout_ref, and the 1-byte mask when asked for. */
#include "kernels/dropout.h"
#include "kernels/kern_cuda.cuh"

/* Thread t owns elements i with (base + i) / 4 = base / 4 + t; out = (x ?
 * x : 0) + in * mult. p = 0 keeps every element without drawing. */
__global__ void dropout_kernel(bf16 *out, uint8_t *mask, const bf16 *x, const bf16 *in, long n, kern_dropout d) {
  long long q = (d.base >> 2) + (long long)blockIdx.x * blockDim.x + threadIdx.x;
  long i0 = (long)(4 * q - d.base);
  if (i0 >= n) return;
  uint32_t w[4] = {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu};
  if (d.p > 0.0f) kern_dropout_words(&d, q, w);
  for (int k = 0; k < 4; k++) {
    long i = i0 + k;
    if (i < 0 || i >= n) continue;
    float m = kern_dropout_word_mult(&d, w[k]);
    st(out + i, (x ? ld(x + i) : 0.0f) + ld(in + i) * m);
    if (mask) mask[i] = m != 0.0f;
  }
}

__global__ void dropout_masked_kernel(bf16 *out, const bf16 *in, const uint8_t *mask, long n, float scale) {
  long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) st(out + i, mask[i] ? ld(in + i) * scale : 0.0f);
}

static int dropout_launch(bf16 *out, uint8_t *mask, const bf16 *x, const bf16 *in, long n, kern_dropout d,
                          cudaStream_t stream) {
  long long calls = ((d.base + n - 1) >> 2) - (d.base >> 2) + 1;
  KERN_LAUNCH(kern_cdiv(calls, 256), 256, 0, stream, dropout_kernel)(out, mask, x, in, n, d);
  KERN_LAUNCH_TRY();
  return 0;
}

extern "C" int kern_dropout_cuda(kern_bf16 *out, uint8_t *mask, const kern_bf16 *in, long n, kern_dropout d,
                                 cudaStream_t stream) {
  if (n <= 0) return 0;
  if (d.p <= 0.0f) {
    if (out != in) KERN_CUDA_TRY(cudaMemcpyAsync(out, in, sizeof(kern_bf16) * (size_t)n, cudaMemcpyDeviceToDevice, stream));
    if (mask) KERN_CUDA_TRY(cudaMemsetAsync(mask, 1, (size_t)n, stream));
    return 0;
  }
  return dropout_launch((bf16 *)out, mask, NULL, (const bf16 *)in, n, d, stream);
}

extern "C" int kern_dropout_add_cuda(kern_bf16 *out, uint8_t *mask, const kern_bf16 *x, const kern_bf16 *in, long n,
                                     kern_dropout d, cudaStream_t stream) {
  if (n <= 0) return 0;
  return dropout_launch((bf16 *)out, mask, (const bf16 *)x, (const bf16 *)in, n, d, stream);
}

extern "C" int kern_dropout_masked_cuda(kern_bf16 *out, const kern_bf16 *in, const uint8_t *mask, long n,
                                        float scale, cudaStream_t stream) {
  if (n <= 0) return 0;
  KERN_LAUNCH(kern_cdiv(n, 256), 256, 0, stream, dropout_masked_kernel)((bf16 *)out, (const bf16 *)in, mask, n,
                                                                         scale);
  KERN_LAUNCH_TRY();
  return 0;
}
