/* real/rt_gpu_kern.cu: the device kernels the GPU runtime (rt_gpu.c) needs
 * that no kernels/ family provides. Only the bf16 elementwise add (the
 * residual and partial-sum adds of rt_ops_t.add) so far.
 *
 * C entry points, declared in rt_gpu.c (there is no header: nothing else
 * calls them). They return 0 or a non-zero code after printing file:line. */
#include "kernels/kern_cuda.cuh"

/* 8 elements per thread (one 16-byte load of each input) when the three
 * pointers are 16-byte aligned; scalar for the tail and unaligned views. */
#define ADD_VEC 8
#define ADD_THREADS 256
#define ADD_MAX_BLOCKS (1u << 16) /* grid-stride beyond this */

/* out[i] = a[i] + b[i] for i < n8 * 8, fp32 sum rounded to bf16. out may
 * alias a or b: each element is read before it is written, by one thread. */
__global__ void rt_add_vec_kernel(bf16 *out, const bf16 *a, const bf16 *b, long n8) {
  long stride = (long)gridDim.x * blockDim.x;
  for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n8; i += stride) {
    float x[ADD_VEC], y[ADD_VEC];
    vload<ADD_VEC>(x, a + i * ADD_VEC);
    vload<ADD_VEC>(y, b + i * ADD_VEC);
#pragma unroll
    for (int k = 0; k < ADD_VEC; k++) x[k] += y[k];
    vstore<ADD_VEC>(out + i * ADD_VEC, x);
  }
}

/* The same over [lo, n), one element per thread. */
__global__ void rt_add_kernel(bf16 *out, const bf16 *a, const bf16 *b, long lo, long n) {
  long stride = (long)gridDim.x * blockDim.x;
  for (long i = lo + (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    st(out + i, ld(a + i) + ld(b + i));
}

static unsigned add_blocks(long items) {
  unsigned nb = kern_cdiv(items, ADD_THREADS);
  return nb < ADD_MAX_BLOCKS ? nb : ADD_MAX_BLOCKS;
}

/* out (n) = a (n) + b (n), bf16; out may alias a (or b). */
extern "C" int rt_gpu_add_cuda(kern_bf16 *out, const kern_bf16 *a, const kern_bf16 *b, long n,
                               cudaStream_t stream) {
  if (n <= 0) return 0;
  const void *ptrs[3] = {out, a, b};
  long n8 = kern_aligned16(ptrs, 3) ? n / ADD_VEC : 0, lo = n8 * ADD_VEC;
  if (n8 > 0) {
    KERN_LAUNCH(add_blocks(n8), ADD_THREADS, 0, stream, rt_add_vec_kernel)((bf16 *)out, (const bf16 *)a,
                                                                           (const bf16 *)b, n8);
    KERN_LAUNCH_TRY();
  }
  if (lo < n) {
    KERN_LAUNCH(add_blocks(n - lo), ADD_THREADS, 0, stream, rt_add_kernel)((bf16 *)out, (const bf16 *)a,
                                                                           (const bf16 *)b, lo, n);
    KERN_LAUNCH_TRY();
  }
  return 0;
}
