/* kernels/kern_cuda.cuh: device-side helpers shared by the .cu files only
 * (bf16 load/store, warp reductions, the launch-grid rounding). Not part of
 * the C API. */
#ifndef KERN_CUDA_CUH
#define KERN_CUDA_CUH

#include <cuda_bf16.h>
#include <math.h>
#include "kernels/kern_common.h"

typedef __nv_bfloat16 bf16;

/* KERN_LAUNCH(grid, block, smem, stream, kernel)(args...) is kernel<<<grid,
 * block, smem, stream>>>(args...), and KERN_DYN_SMEM(type, name) declares
 * the dynamic shared memory: spelled as macros so that the emulated build
 * (tests/kernels/cuda_emu.h, KERN_EMU) can run the same code on the CPU. */
#ifndef KERN_EMU
#define KERN_LAUNCH(grid, block, smem, stream, ...) __VA_ARGS__<<<grid, block, smem, stream>>>
#define KERN_DYN_SMEM(type, name) extern __shared__ __align__(128) type name[]
#define KERN_ALIGNED(p, bytes) ((void)0) /* the emulation checks a vector access's alignment */
#endif

static inline unsigned kern_cdiv(long a, long b) { return (unsigned)((a + b - 1) / b); }

/* Lets `kernel` use `bytes` of dynamic shared memory (over 48 KB needs it). */
template <class K> static inline cudaError_t kern_allow_smem(K kernel, size_t bytes) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
}

/* kern_allow_smem for a kernel with a fallback: false when this GPU allows
 * less (sm_86 and sm_89 stop at 99 KB, sm_80 at 163, sm_90 at 227), with
 * the refusal cleared from the last error, so the caller's launch check
 * does not mistake it for its own. */
template <class K> static inline bool kern_smem_fits(K kernel, size_t bytes) {
  if (kern_allow_smem(kernel, bytes) == cudaSuccess) return true;
  cudaGetLastError();
  return false;
}

__device__ __forceinline__ float ld(const bf16 *p) { return __bfloat162float(*p); }
__device__ __forceinline__ void st(bf16 *p, float x) { *p = __float2bfloat16_rn(x); }

__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
__device__ __forceinline__ float warp_max(float x) {
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

/* Sum over a block of blockDim.x (a multiple of 32, <= 1024) threads; every
 * thread gets the result. Uses 33 floats of shared memory. */
__device__ __forceinline__ float block_sum(float x) {
  __shared__ float part[33];
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
  x = warp_sum(x);
  __syncthreads();
  if (lane == 0) part[warp] = x;
  __syncthreads();
  x = lane < nw ? part[lane] : 0.0f;
  x = warp_sum(x);
  if (threadIdx.x == 0) part[32] = x;
  __syncthreads();
  return part[32];
}

/* Max over the block, same contract as block_sum. */
__device__ __forceinline__ float block_max(float x) {
  __shared__ float part[33];
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
  x = warp_max(x);
  __syncthreads();
  if (lane == 0) part[warp] = x;
  __syncthreads();
  x = lane < nw ? part[lane] : -INFINITY;
  x = warp_max(x);
  if (threadIdx.x == 0) part[32] = x;
  __syncthreads();
  return part[32];
}

/* V consecutive bf16 as one aligned load/store (V = 8: 16 bytes). */
template <int V> struct alignas(2 * V) bvec { bf16 x[V]; };
template <int V> __device__ __forceinline__ void vload(float *f, const bf16 *p) {
  KERN_ALIGNED(p, sizeof(bvec<V>));
  bvec<V> v = *(const bvec<V> *)p;
#pragma unroll
  for (int i = 0; i < V; i++) f[i] = __bfloat162float(v.x[i]);
}
template <int V> __device__ __forceinline__ void vstore(bf16 *p, const float *f) {
  bvec<V> v;
#pragma unroll
  for (int i = 0; i < V; i++) v.x[i] = __float2bfloat16_rn(f[i]);
  KERN_ALIGNED(p, sizeof(bvec<V>));
  *(bvec<V> *)p = v;
}

/* True when every non-NULL pointer is 16-byte aligned. */
static inline bool kern_aligned16(const void *const *ptrs, int np) {
  for (int i = 0; i < np; i++)
    if (ptrs[i] && ((uintptr_t)ptrs[i] % 16)) return false;
  return true;
}

#endif
