/* tests/kernels/cuda_emu.h: just enough of CUDA's device side to run the
 * kernels' own code on the CPU, so CI (no GPU) runs it against the
 * references. C++20 (std::barrier). With the headers in tests/kernels/emu/
 * (the runtime API on host memory; cuBLASLt's subset the GEMMs use, in
 * emu/cublaslt_emu.cc) the kernels' .cu files compile unchanged as C++
 * (KERN_EMU). Emulated:
 *   - a launch (KERN_LAUNCH): in its stream's order, the blocks one after
 *     another, each block's threads as fibers switched at barriers
 *     (emu/cuda_emu_fiber.cc; under ThreadSanitizer, CUDA_EMU_TSAN_FIBERS,
 *     each fiber a thread of its own to it), or with CUDA_EMU_THREADS as real threads
 *     (where the fiber switch's x86-64 assembly does not run); 1-3 D; a
 *     warp is 32 consecutive linear thread ids, as on the GPU;
 *   - __syncthreads (a block barrier), __syncwarp (a barrier of the 32
 *     lanes of the caller's warp), __shfl_xor_sync (full warp), atomicAdd
 *     (float), atomicMax (int);
 *   - shared memory: __shared__ variables are static (blocks run one at a
 *     time), and the dynamic buffer (KERN_DYN_SMEM) is one 256 KiB array
 *     filled with NaN bytes before every block, so a read of an element no
 *     thread wrote shows in the results;
 *   - bf16 (kern_common.h's conversions) and the math intrinsics used;
 *   - the alignment of vector accesses (KERN_ALIGNED: a GPU faults on a
 *     misaligned 16-byte load, a CPU does not);
 *   - nvcuda::wmma for 16x16x16 bf16 -> fp32: each lane loads the whole
 *     tile (the hardware's split is opaque to the code anyway), and owns
 *     elements e % 32 == lane of an accumulator: the product computes and
 *     a store writes those, so no lane's write waits for or races with
 *     another's: the ordering the kernel needs must come from its own
 *     __syncwarp calls;
 *   - kernels/kern_mma.cuh (mma.sync m16n8k16, ldmatrix x4, cp.async):
 *     warp collectives on PTX's fragment layouts, cp.async deferred to its
 *     wait (the section below says how).
 * Every thread of a block must reach each barrier, as on the GPU. Timing,
 * occupancy and the memory model's finer points are not emulated. */
#ifndef CUDA_EMU_H
#define CUDA_EMU_H

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#include <sys/mman.h>

#include "emu/cuda_emu_stream.h"
#include "emu/cuda_runtime_api.h"
#include "kernels/kern_common.h"

#define KERN_EMU 1
#define __device__
#define __global__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

struct dim3 {
  unsigned x, y, z;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
/* CUDA_EMU_THREADS: each CUDA thread an OS thread; else fibers on the
 * launching thread (emu/cuda_emu_fiber.cc), and these are plain globals,
 * set at each switch. ThreadSanitizer sees races between lanes either way
 * (with fibers, CUDA_EMU_TSAN_FIBERS tells it each fiber's context). */
#if !defined(CUDA_EMU_THREADS) && !defined(__x86_64__)
#define CUDA_EMU_THREADS 1 /* the fiber switch is x86-64 assembly */
#endif
#ifdef CUDA_EMU_THREADS
#define EMU_TLS thread_local
#else
#define EMU_TLS
#endif
inline EMU_TLS uint3 threadIdx, blockIdx;
inline EMU_TLS unsigned emu_tid; /* linear thread id in the block */
inline dim3 blockDim, gridDim;

struct __nv_bfloat16 {
  kern_bf16 bits;
};
struct __nv_bfloat162 {
  __nv_bfloat16 x, y;
};
typedef __nv_bfloat16 bf16;
struct uint4 {
  unsigned x, y, z, w;
};
inline float __bfloat162float(bf16 h) { return kern_bf16_to_float(h.bits); }
inline bf16 __float2bfloat16_rn(float x) { return bf16{kern_float_to_bf16(x)}; }
inline bf16 __float2bfloat16(float x) { return __float2bfloat16_rn(x); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline long min(long a, long b) { return a < b ? a : b; }
inline long max(long a, long b) { return a > b ? a : b; }
inline float atomicAdd(float *p, float v) { return std::atomic_ref<float>(*p).fetch_add(v); }
inline int atomicMax(int *p, int v) {
  std::atomic_ref<int> a(*p);
  int old = a.load();
  while (old < v && !a.compare_exchange_weak(old, v)) {
  }
  return old;
}
inline int __float_as_int(float x) {
  int i;
  std::memcpy(&i, &x, sizeof i);
  return i;
}
inline float __fdiv_rn(float a, float b) { return a / b; }

/* KERN_ALIGNED(p, bytes) before a vector access: a GPU faults ("misaligned
 * address") where the CPU would not; here the access aborts, named. */
inline void emu_aligned(const void *p, size_t bytes, const char *file, int line) {
  if ((uintptr_t)p % bytes) {
    std::fprintf(stderr, "%s:%d: cuda_emu: %zu-byte access at %p, not %zu-byte aligned (a GPU would fault)\n", file,
                 line, bytes, p, bytes);
    std::abort();
  }
}
#define KERN_ALIGNED(p, bytes) emu_aligned((p), (bytes), __FILE__, __LINE__)

alignas(4096) inline unsigned char emu_smem[256 * 1024];
#define KERN_DYN_SMEM(type, name) type *name = (type *)emu_smem

/* A launch's dynamic shared memory is the first smem_bytes of emu_smem,
 * rounded up to a page: the pages past it are made inaccessible until a
 * launch asks for them, so a kernel reading or writing beyond what its
 * launch declared faults, as on a GPU ("out of range shared address"),
 * and only what it may use is refilled with NaN before each block (all
 * 256 KiB were: twice the time of an elementwise kernel's block). Returns
 * the bytes to refill. One launch at a time (emu_kernel_m). */
inline size_t emu_smem_limit(size_t smem_bytes) {
  static size_t open_bytes = sizeof emu_smem; /* accessible now */
  size_t want = std::min((smem_bytes + 4095) & ~(size_t)4095, sizeof emu_smem);
  if (want != open_bytes) {
    size_t lo = std::min(want, open_bytes), hi = std::max(want, open_bytes);
    if (mprotect(emu_smem + lo, hi - lo, want > open_bytes ? PROT_READ | PROT_WRITE : PROT_NONE)) {
      std::perror("cuda_emu: mprotect of shared memory");
      std::abort();
    }
    open_bytes = want;
  }
  return want;
}

/* One cp.async in flight (kern_mma.cuh): copied at the wait covering group,
 * which must come in the block that issued it. */
struct emu_cp {
  void *dst;
  const void *src;
  unsigned bytes, group;
  unsigned long block; /* emu_block_id() at issue */
};

struct emu_block {
  std::unique_ptr<std::barrier<>> block;                 /* CUDA_EMU_THREADS */
  std::vector<std::unique_ptr<std::barrier<>>> warp;     /* CUDA_EMU_THREADS */
  std::vector<uint32_t> wx;            /* per warp, 2 x 32 lanes x EMU_XWORDS: warp collectives' exchange */
  std::vector<unsigned char> wpar;     /* per thread: which of its warp's 2 buffers its next collective uses */
  std::vector<std::vector<emu_cp>> cpq; /* per thread: its cp.async copies not yet done */
  std::vector<unsigned> ncommit;        /* per thread: cp.async groups committed */
};
inline emu_block *emu_cur;

#ifndef CUDA_EMU_THREADS
/* emu/cuda_emu_fiber.cc: barrier b (0: the block, 1 + w: warp w) for the
 * running fiber; every block of grid, body as each of its threads. */
void emu_fiber_barrier(unsigned b);
void emu_fiber_grid(dim3 grid, dim3 block, size_t smem_fill, const std::function<void()> &body);
inline void __syncthreads() { emu_fiber_barrier(0); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  (void)mask;
  emu_fiber_barrier(1 + emu_tid / 32);
}
#else
inline void __syncthreads() { emu_cur->block->arrive_and_wait(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  (void)mask;
  emu_cur->warp[emu_tid / 32]->arrive_and_wait();
}
#endif
/* A warp collective (shuffle, mma.sync, ldmatrix) publishes each lane's
 * operand in its slot of EMU_XWORDS words, meets the warp at one barrier,
 * then reads the others' slots. The warp's two buffers alternate call by
 * call, so one barrier suffices: a lane can write the buffer a slower lane
 * still reads only two collectives later, and the barrier between waits
 * for that reader. Every lane of a warp calls the same collectives in the
 * same order, as on the GPU. Returns the buffer of this call. */
#define EMU_XWORDS 16
inline uint32_t *emu_xbuf() {
  unsigned char &par = emu_cur->wpar[emu_tid];
  uint32_t *b = &emu_cur->wx[(emu_tid / 32 * 2 + par) * (size_t)(32 * EMU_XWORDS)];
  par ^= 1;
  return b;
}

template <class T> inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask) {
  static_assert(sizeof(T) <= 4 * EMU_XWORDS, "cuda_emu: shuffle operand too large");
  unsigned lane = emu_tid % 32;
  uint32_t *x = emu_xbuf();
  std::memcpy(&x[EMU_XWORDS * lane], &v, sizeof v);
  __syncwarp(mask);
  T r;
  std::memcpy(&r, &x[EMU_XWORDS * (lane ^ (unsigned)lane_mask)], sizeof r);
  return r;
}

/* ---- kernels/kern_mma.cuh, emulated -----------------------------------------
 * The same functions, mma.sync and ldmatrix as warp collectives (emu_xbuf)
 * that follow the PTX fragment layouts written in kern_mma.cuh; a kernel
 * that assumed another layout computes wrong results here as on the GPU.
 * ldmatrix and cp.async check what the hardware requires (16-byte aligned
 * addresses, the destination or the rows in shared memory) and abort,
 * named, where a GPU would fault. A cp.async copies nothing until a
 * cp_async_wait covers its group: reading the tile before the wait reads
 * the NaN that fills shared memory (or the previous tile), as on the GPU
 * it reads whatever is there. */
inline bool emu_in_smem(const void *p, size_t bytes) {
  return (const unsigned char *)p >= emu_smem && (const unsigned char *)p + bytes <= emu_smem + sizeof emu_smem;
}

inline void emu_mma_fail(const char *what, const void *p) {
  std::fprintf(stderr, "cuda_emu: %s at %p (a GPU would fault)\n", what, p);
  std::abort();
}

inline uint32_t emu_bf16_bits(uint32_t pair, unsigned half) { return pair >> (16 * half) & 0xffffu; }
inline float emu_bf16_of(uint32_t bits) { return kern_bf16_to_float((kern_bf16)bits); }

inline uint32_t pack_bf16(float lo, float hi) {
  return (uint32_t)__float2bfloat16_rn(lo).bits | (uint32_t)__float2bfloat16_rn(hi).bits << 16;
}

/* Each lane publishes its fragments as floats: A's a0..a7 (register i
 * holds a[2i], a[2i + 1], low half first), then B's b0..b3; element (row,
 * k) of A is then a[2 (row / 8 + 2 (k / 8)) + k % 2] of lane (row % 8) 4 +
 * (k % 8) / 2, and (k, col) of B is b[2 (k / 8) + k % 2] of lane col 4 +
 * (k % 8) / 2 (kern_mma.cuh's table). Sums run over k in order. */
inline void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  unsigned lane = emu_tid % 32, g = lane / 4, t = lane % 4;
  float *x = (float *)emu_xbuf(); /* uint32_t storage, read as float: -fno-strict-aliasing */
  for (unsigned i = 0; i < 8; i++) x[EMU_XWORDS * lane + i] = emu_bf16_of(emu_bf16_bits(a[i / 2], i % 2));
  for (unsigned i = 0; i < 4; i++)
    x[EMU_XWORDS * lane + 8 + i] = emu_bf16_of(emu_bf16_bits(i < 2 ? b0 : b1, i % 2));
  __syncwarp();
  for (unsigned e = 0; e < 4; e++) {
    unsigned row = g + 8 * (e / 2), col = 2 * t + e % 2;
    const float *xa = x + EMU_XWORDS * (g * 4) + 2 * (row / 8), *xb = x + EMU_XWORDS * (col * 4) + 8;
    float acc = d[e];
    for (unsigned k = 0; k < 16; k++)
      acc += xa[EMU_XWORDS * (k % 8 / 2) + 4 * (k / 8) + k % 2] * xb[EMU_XWORDS * (k % 8 / 2) + 2 * (k / 8) + k % 2];
    d[e] = acc;
  }
}

/* Shared-memory bank conflicts of ldmatrix, counted: each matrix's 8 rows
 * (16 bytes each) are one wavefront when they fall in 8 distinct 16-byte
 * quarters of the 32 four-byte banks, else one more per repeat. A kernel's
 * test can require 0: a timing property checked without a GPU. */
inline std::atomic<unsigned long> emu_ldsm_conflicts{0};

inline void emu_ldsm(uint32_t (&r)[4], const bf16 *p, bool trans) {
  if ((uintptr_t)p % 16 || !emu_in_smem(p, 16)) emu_mma_fail("ldmatrix row not 16-byte aligned shared memory", p);
  unsigned lane = emu_tid % 32, g = lane / 4, t = lane % 4;
  uint32_t *x = emu_xbuf();
  std::memcpy(&x[EMU_XWORDS * lane], &p, sizeof p);
  __syncwarp();
  auto row = [&](unsigned l) {
    const bf16 *q;
    std::memcpy(&q, &x[EMU_XWORDS * l], sizeof q);
    return q;
  };
  if (lane < 4) { /* lane i counts matrix i */
    unsigned seen[8] = {}, worst = 0;
    for (unsigned j = 0; j < 8; j++) {
      unsigned q = (unsigned)((uintptr_t)row(8 * lane + j) % 128 / 16);
      worst = std::max(worst, ++seen[q]);
    }
    if (worst > 1) emu_ldsm_conflicts += worst - 1;
  }
  for (unsigned i = 0; i < 4; i++) {
    const bf16 *lo = trans ? row(8 * i + 2 * t) + g : row(8 * i + g) + 2 * t;
    const bf16 *hi = trans ? row(8 * i + 2 * t + 1) + g : lo + 1;
    r[i] = (uint32_t)lo->bits | (uint32_t)hi->bits << 16;
  }
}
inline void ldsm_x4(uint32_t (&r)[4], const bf16 *p) { emu_ldsm(r, p, false); }
inline void ldsm_x4_t(uint32_t (&r)[4], const bf16 *p) { emu_ldsm(r, p, true); }

inline unsigned long emu_block_id() { return blockIdx.x + (unsigned long)gridDim.x * (blockIdx.y + (unsigned long)gridDim.y * blockIdx.z); }

/* A block must wait for its own copies: one left pending at its end would
 * land in shared memory that then belongs to another block. */
inline void emu_cp_check_block() {
  const std::vector<emu_cp> &q = emu_cur->cpq[emu_tid];
  if (!q.empty() && q.front().block != emu_block_id()) {
    std::fprintf(stderr, "cuda_emu: thread %u of block %lu left a cp.async pending at its end (no cp_async_wait)\n",
                 emu_tid, q.front().block);
    std::abort();
  }
}

inline void cp_async16(bf16 *dst, const bf16 *src, bool full) {
  if ((uintptr_t)dst % 16 || !emu_in_smem(dst, 16)) emu_mma_fail("cp.async destination not 16-byte aligned shared memory", dst);
  if ((uintptr_t)src % 16) emu_mma_fail("cp.async source not 16-byte aligned", src);
  emu_cp_check_block();
  emu_cur->cpq[emu_tid].push_back({dst, full ? src : nullptr, 16, emu_cur->ncommit[emu_tid], emu_block_id()});
}

inline void cp_async_commit() { emu_cur->ncommit[emu_tid]++; }

template <int N> inline void cp_async_wait() {
  emu_cp_check_block();
  std::vector<emu_cp> &q = emu_cur->cpq[emu_tid];
  unsigned done = emu_cur->ncommit[emu_tid] >= (unsigned)N ? emu_cur->ncommit[emu_tid] - N : 0;
  size_t keep = 0;
  for (size_t i = 0; i < q.size(); i++) {
    if (q[i].group < done) {
      if (q[i].src)
        std::memcpy(q[i].dst, q[i].src, q[i].bytes);
      else
        std::memset(q[i].dst, 0, q[i].bytes);
    } else {
      q[keep++] = q[i];
    }
  }
  q.resize(keep);
}

/* Runs body() as every thread of every block of grid; a warp's threads
 * must all exist (block sizes a multiple of 32). Blocks one after another;
 * before each, the dynamic shared memory (smem_bytes: all of it unless
 * said) is refilled with NaN. Fibers (emu/cuda_emu_fiber.cc), or with
 * CUDA_EMU_THREADS one real thread per block thread, reused for block
 * after block, meeting at the block barrier between blocks. */
template <class F> void emu_launch(dim3 grid, dim3 block, F body, size_t smem_bytes = sizeof emu_smem) {
  unsigned nthreads = block.x * block.y * block.z;
  size_t smem_fill = emu_smem_limit(smem_bytes);
  blockDim = block;
  gridDim = grid;
  emu_block b;
  b.wx.assign(2 * (size_t)nthreads * EMU_XWORDS, 0);
  b.wpar.assign(nthreads, 0);
  b.cpq.resize(nthreads);
  b.ncommit.assign(nthreads, 0);
  emu_cur = &b;
#ifndef CUDA_EMU_THREADS
  emu_fiber_grid(grid, block, smem_fill, std::function<void()>(body));
#else
  unsigned long nblocks = (unsigned long)grid.x * grid.y * grid.z;
  b.block = std::make_unique<std::barrier<>>(nthreads);
  for (unsigned w = 0; w < nthreads / 32; w++) b.warp.push_back(std::make_unique<std::barrier<>>(32));
  std::vector<std::thread> th;
  for (unsigned t = 0; t < nthreads; t++)
    th.emplace_back([&, t] {
      emu_tid = t;
      threadIdx.x = t % block.x, threadIdx.y = t / block.x % block.y, threadIdx.z = t / (block.x * block.y);
      for (unsigned long i = 0; i < nblocks; i++) {
        blockIdx.x = (unsigned)(i % grid.x), blockIdx.y = (unsigned)(i / grid.x % grid.y);
        blockIdx.z = (unsigned)(i / grid.x / grid.y);
        if (t == 0) std::memset(emu_smem, 0xff, smem_fill);
        b.block->arrive_and_wait(); /* the last block is done; shared memory is fresh */
        body();
        b.block->arrive_and_wait();
      }
    });
  for (auto &t : th) t.join();
#endif
  emu_cur = nullptr;
}

/* KERN_LAUNCH(grid, block, smem, stream, kernel)(args...): the arguments are
 * copied, as a launch does, and the kernel runs in the stream's order
 * (cuda_emu_stream.h: at once on the NULL stream); one kernel at a time in
 * the process (emu_kernel_m), as the block emulation above is global.
 * Pointer arguments must be device memory (emu_check_arg). A
 * block of more than 1024 threads or not a multiple of 32, or more dynamic
 * shared memory than the device allows, is refused with
 * cudaErrorInvalidConfiguration (cudaGetLastError). */
inline std::mutex emu_kernel_m;

/* A pointer argument must point into device memory (or be NULL): a GPU
 * faults on a host pointer (cudaErrorIllegalAddress) where the emulation
 * would read it; so the launch reports it and aborts. */
template <class A> void emu_check_arg(unsigned i, const A &a) {
  if constexpr (std::is_pointer_v<A>) {
    if (a && !emu_is_device((const void *)a)) {
      std::fprintf(stderr, "cuda_emu: kernel argument %u = %p is not device memory (a GPU would fault)\n", i,
                   (const void *)a);
      std::abort();
    }
  }
}
template <class K> struct emu_launch_t {
  dim3 grid, block;
  size_t smem;
  cudaStream_t stream;
  K kernel;
  template <class... A> void operator()(A... a) const {
    unsigned n = block.x * block.y * block.z;
    if (n == 0 || n > 1024 || n % 32 || smem > emu_max_dyn_smem() || !grid.x || !grid.y || !grid.z) {
      emu_set_last_error(cudaErrorInvalidConfiguration);
      return;
    }
    unsigned i = 0;
    (emu_check_arg(i++, a), ...);
    emu_stream_enqueue(stream, [g = grid, b = block, sm = smem, k = kernel, a...] {
      std::lock_guard<std::mutex> lk(emu_kernel_m);
      emu_launch(g, b, [&] { k(a...); }, sm);
    });
  }
};
template <class K> emu_launch_t<K> emu_launcher(dim3 grid, dim3 block, size_t smem, cudaStream_t stream, K kernel) {
  return {grid, block, smem, stream, kernel};
}
#define KERN_LAUNCH(grid, block, smem, stream, ...)                                                          \
  emu_launcher(dim3(grid), dim3(block), (size_t)(smem), (stream),                                           \
               [=](auto &&...emu_a) { __VA_ARGS__(emu_a...); })

namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

/* WMMA's contract (CUDA C++ Programming Guide, "Warp Matrix Functions"):
 * a 256-bit aligned pointer, ldm a multiple of 16 bytes. A breach aborts,
 * as it would fault or misread on the GPU. */
inline void emu_wmma_check(const void *p, unsigned ldm, size_t elem) {
  if ((uintptr_t)p % 32 || ldm * elem % 16) {
    std::fprintf(stderr, "cuda_emu: wmma pointer %p (needs 32-byte alignment) or ldm %u x %zu bytes (needs a multiple of 16)\n",
                 p, ldm, elem);
    std::abort();
  }
}

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
  emu_wmma_check(p, ldm, sizeof *p);
  for (int r = 0; r < 16; r++)
    for (int c = 0; c < 16; c++)
      f.x[r * 16 + c] = __bfloat162float(std::is_same_v<L, col_major> ? p[c * ldm + r] : p[r * ldm + c]);
}

inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f, const float *p, unsigned ldm, layout_t l) {
  emu_wmma_check(p, ldm, sizeof *p);
  for (int r = 0; r < 16; r++)
    for (int c = 0; c < 16; c++) f.x[r * 16 + c] = l == mem_row_major ? p[r * ldm + c] : p[c * ldm + r];
}

template <class LA, class LB>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d, const fragment<matrix_a, 16, 16, 16, bf16, LA> &a,
                     const fragment<matrix_b, 16, 16, 16, bf16, LB> &b,
                     const fragment<accumulator, 16, 16, 16, float> &c) {
  /* Each lane computes the elements it stores (e % 32 == lane): an
   * accumulator's other elements are never read but by load, fill and the
   * next product of the same element. */
  for (int e = emu_tid % 32; e < 256; e += 32) {
    int r = e / 16, n = e % 16;
    float acc = c.x[e];
    for (int k = 0; k < 16; k++) acc += a.x[r * 16 + k] * b.x[k * 16 + n];
    d.x[e] = acc;
  }
}

inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f, unsigned ldm, layout_t l) {
  emu_wmma_check(p, ldm, sizeof *p);
  for (int e = emu_tid % 32; e < 256; e += 32) {
    int r = e / 16, c = e % 16;
    (l == mem_row_major ? p[r * ldm + c] : p[c * ldm + r]) = f.x[e];
  }
}
} // namespace wmma
} // namespace nvcuda

#endif
