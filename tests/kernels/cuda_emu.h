/* tests/kernels/cuda_emu.h: just enough of CUDA to run device code on the
 * CPU, so CI (no GPU) can run kernels' tiling and indexing against the
 * references. C++20 (std::barrier). Emulated:
 *   - a launch (emu_launch): the blocks one after another, each block's
 *     threads as real threads, threadIdx / blockIdx thread-local;
 *   - __syncthreads (a block barrier), __syncwarp (a barrier of the 32
 *     lanes of the caller's warp), __shfl_xor_sync (float, full warp),
 *     atomicAdd (float);
 *   - dynamic shared memory: one 256 KiB buffer, `tc_smem`, filled with NaN
 *     bytes before every block, so a read of an element no thread wrote
 *     shows in the results;
 *   - bf16 (kern_common.h's conversions) and the math functions used;
 *   - nvcuda::wmma for 16x16x16 bf16 -> fp32: each lane holds the whole
 *     tile (the hardware's split is opaque to the code anyway), loads and
 *     the product are per lane, and a store writes element e from lane
 *     e % 32, so no lane's write waits for or races with another's: the
 *     ordering the kernel needs must come from its own __syncwarp calls.
 * Not emulated: anything else (other atomics, static __shared__, streams).
 * Every thread of a block must reach each barrier, as on the GPU. */
#ifndef CUDA_EMU_H
#define CUDA_EMU_H

#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <type_traits>
#include <vector>

#include "kernels/kern_common.h"

#define __device__
#define __global__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__
#define __align__(n) __attribute__((aligned(n)))

struct emu_dim3 {
  unsigned x = 0, y = 0, z = 0;
};
inline thread_local emu_dim3 threadIdx, blockIdx;
inline emu_dim3 blockDim, gridDim;

struct __nv_bfloat16 {
  kern_bf16 bits;
};
typedef __nv_bfloat16 bf16;
struct uint4 {
  unsigned x, y, z, w;
};
inline float __bfloat162float(bf16 h) { return kern_bf16_to_float(h.bits); }
inline bf16 __float2bfloat16_rn(float x) { return bf16{kern_float_to_bf16(x)}; }
inline bf16 __float2bfloat16(float x) { return __float2bfloat16_rn(x); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline int min(int a, int b) { return a < b ? a : b; }
inline float atomicAdd(float *p, float v) { return std::atomic_ref<float>(*p).fetch_add(v); }

alignas(128) inline unsigned char tc_smem[256 * 1024];

struct emu_block {
  std::unique_ptr<std::barrier<>> block;
  std::vector<std::unique_ptr<std::barrier<>>> warp;
  std::vector<float> xch; /* 32 per warp, for shuffles */
};
inline emu_block *emu_cur;

inline void __syncthreads() { emu_cur->block->arrive_and_wait(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  (void)mask;
  emu_cur->warp[threadIdx.x / 32]->arrive_and_wait();
}
inline float __shfl_xor_sync(unsigned mask, float v, int lane_mask) {
  unsigned w = threadIdx.x / 32, lane = threadIdx.x % 32;
  float *x = &emu_cur->xch[32 * w];
  __syncwarp(mask); /* the last shuffle's readers are done */
  x[lane] = v;
  __syncwarp(mask);
  return x[lane ^ (unsigned)lane_mask];
}

/* Runs body() as every thread of every block of grid (nthreads per block,
 * a multiple of 32). */
template <class F> void emu_launch(emu_dim3 grid, unsigned nthreads, F body) {
  blockDim = {nthreads, 1, 1};
  gridDim = grid;
  for (unsigned z = 0; z < grid.z; z++)
    for (unsigned y = 0; y < grid.y; y++)
      for (unsigned x = 0; x < grid.x; x++) {
        emu_block b;
        b.block = std::make_unique<std::barrier<>>(nthreads);
        for (unsigned w = 0; w < nthreads / 32; w++) b.warp.push_back(std::make_unique<std::barrier<>>(32));
        b.xch.assign(nthreads, 0.0f);
        emu_cur = &b;
        std::memset(tc_smem, 0xff, sizeof tc_smem);
        std::vector<std::thread> th;
        for (unsigned t = 0; t < nthreads; t++)
          th.emplace_back([=] {
            threadIdx = {t, 0, 0};
            blockIdx = {x, y, z};
            body();
          });
        for (auto &t : th) t.join();
        emu_cur = nullptr;
      }
}

namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

/* x[r * 16 + c]: element (r, c) of the 16 x 16 tile, whatever the use. */
template <class Use, int M, int N, int K, class T, class Layout = void> struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "cuda_emu: 16x16x16 only");
  float x[256];
};

template <class U, class T, class L> inline void fill_fragment(fragment<U, 16, 16, 16, T, L> &f, float v) {
  for (float &e : f.x) e = v;
}

/* A bf16 operand: row_major reads (r, c) at p[r ldm + c], col_major at p[c ldm + r]. */
template <class U, class L> inline void load_matrix_sync(fragment<U, 16, 16, 16, bf16, L> &f, const bf16 *p, unsigned ldm) {
  for (int r = 0; r < 16; r++)
    for (int c = 0; c < 16; c++)
      f.x[r * 16 + c] = __bfloat162float(std::is_same_v<L, col_major> ? p[c * ldm + r] : p[r * ldm + c]);
}

inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f, const float *p, unsigned ldm, layout_t l) {
  for (int r = 0; r < 16; r++)
    for (int c = 0; c < 16; c++) f.x[r * 16 + c] = l == mem_row_major ? p[r * ldm + c] : p[c * ldm + r];
}

template <class LA, class LB>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d, const fragment<matrix_a, 16, 16, 16, bf16, LA> &a,
                     const fragment<matrix_b, 16, 16, 16, bf16, LB> &b,
                     const fragment<accumulator, 16, 16, 16, float> &c) {
  float out[256];
  for (int r = 0; r < 16; r++)
    for (int n = 0; n < 16; n++) {
      float acc = c.x[r * 16 + n];
      for (int k = 0; k < 16; k++) acc += a.x[r * 16 + k] * b.x[k * 16 + n];
      out[r * 16 + n] = acc;
    }
  std::memcpy(d.x, out, sizeof out);
}

inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f, unsigned ldm, layout_t l) {
  for (int e = threadIdx.x % 32; e < 256; e += 32) {
    int r = e / 16, c = e % 16;
    (l == mem_row_major ? p[r * ldm + c] : p[c * ldm + r]) = f.x[e];
  }
}
} // namespace wmma
} // namespace nvcuda

#endif
