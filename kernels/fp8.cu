/* kernels/fp8.cu: CUDA FP8 quantisation of bf16 tensors (see fp8.h): the
 * GPU path's emulation of Transformer Engine's casts, the reference's
 * rounding (kern_fp8_round, shared) applied per element. */
#include "kernels/fp8.h"
#include "kernels/kern_cuda.cuh"

#define FP8_THREADS 256
/* Blocks at most (about 8 an H100 SM), each thread looping over the rest:
 * one block max and one atomic per block, whatever n. */
#define FP8_MAX_BLOCKS 1024u

/* V consecutive elements a thread a step: 16-byte vectors (V = 8) where n
 * and both pointers allow, else one at a time. */
template <int V>
__global__ void __launch_bounds__(FP8_THREADS)
    fp8_quant_kernel(bf16 *out, const bf16 *x, long n, int fmt, float scale, float *amax) {
  float m = 0.0f;
  for (long i = ((long)blockIdx.x * FP8_THREADS + threadIdx.x) * V; i < n; i += (long)gridDim.x * FP8_THREADS * V) {
    float v[V];
    vload<V>(v, x + i);
    for (int k = 0; k < V; k++) {
      m = fmaxf(m, fabsf(v[k])); /* fmaxf drops a NaN, as the reference's comparison does */
      v[k] = __fdiv_rn(kern_fp8_round(v[k] * scale, fmt), scale);
    }
    vstore<V>(out + i, v);
  }
  m = block_max(m);
  /* |x| >= 0: its bits order as the floats do */
  if (threadIdx.x == 0) atomicMax((int *)amax, __float_as_int(m));
}

extern "C" int kern_fp8_quant_cuda(kern_bf16 *out, const kern_bf16 *x, long n, int fmt, float scale,
                                   float *amax_dev, cudaStream_t stream) {
  if (n <= 0) return 0;
  const void *p[] = {out, x};
  int vec = n % 8 == 0 && kern_aligned16(p, 2);
  long blocks = kern_cdiv(vec ? n / 8 : n, FP8_THREADS);
  unsigned grid = blocks < FP8_MAX_BLOCKS ? (unsigned)blocks : FP8_MAX_BLOCKS; /* a grid-stride loop beyond */
  if (vec)
    KERN_LAUNCH(grid, FP8_THREADS, 0, stream, fp8_quant_kernel<8>)((bf16 *)out, (const bf16 *)x, n, fmt, scale,
                                                                   amax_dev);
  else
    KERN_LAUNCH(grid, FP8_THREADS, 0, stream, fp8_quant_kernel<1>)((bf16 *)out, (const bf16 *)x, n, fmt, scale,
                                                                   amax_dev);
  KERN_LAUNCH_TRY();
  return 0;
}
