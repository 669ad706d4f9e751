/* kernels/kern_mma.cuh: the warp-level tensor-core primitives of the
 * register-resident flash kernels (kernels/attention_mma.cuh), as PTX for
 * sm_80 and later: mma.sync m16n8k16 (bf16 in, fp32 accumulate), ldmatrix
 * x4 plain and transposed, cp.async of 16 bytes with zero fill, and the
 * packing of two floats into a bf16 pair.
 *
 * Fragment layouts, PTX ISA "Matrix Fragments for mma.m16n8k16 with
 * floating point type"; per lane, g = lane / 4 and t = lane % 4, (row, col)
 * of the tile, a pair's first element in the low 16 bits:
 *   A 16 x 16, row-major:  a[0] = (g, 2t..2t+1)    a[1] = (g+8, 2t..2t+1)
 *                          a[2] = (g, 2t+8..2t+9)  a[3] = (g+8, 2t+8..2t+9)
 *   B 16 x 8, "col":       b[0] = (2t..2t+1, g)    b[1] = (2t+8..2t+9, g)
 *   C, D 16 x 8, fp32:     c[0], c[1] = (g, 2t), (g, 2t+1)
 *                          c[2], c[3] = (g+8, 2t), (g+8, 2t+1)
 * ldmatrix x4: lanes 8 i .. 8 i + 7 give the addresses of rows 0..7 of the
 * 8 x 8 matrix i (16-byte aligned, shared memory), and r[i] of lane l is
 * its elements (l / 4, 2 (l % 4) .. + 1); transposed, (2 (l % 4), l / 4) and
 * (2 (l % 4) + 1, l / 4). So a row-major 16 x 16 block is an A fragment with
 * matrices (rows, cols) at (0, 0), (8, 0), (0, 8), (8, 8), and a B fragment
 * (k x n) is read from an (n, k) row-major array plainly and from a (k, n)
 * one transposed.
 *
 * In the emulated build (KERN_EMU) tests/kernels/cuda_emu.h provides the
 * same functions: mma.sync and ldmatrix as warp collectives that follow
 * these layouts, checks of alignment and memory space, and each
 * cp.async's copy delayed to the cp_async_wait that covers it. */
#ifndef KERN_MMA_CUH
#define KERN_MMA_CUH

#include <stdint.h>

#ifndef KERN_EMU
#include "kernels/kern_cuda.cuh"

/* d += a b for one 16 x 8 x 16 tile. */
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Four 8 x 8 bf16 matrices from shared memory, this lane's row address p. */
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const bf16 *p) {
  unsigned a = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a)
               : "memory");
}

__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], const bf16 *p) {
  unsigned a = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a)
               : "memory");
}

/* 16 bytes global -> shared, asynchronous; zeros instead when !full (src
 * must still be a valid address). Complete after the cp_async_wait that
 * covers its group (cp_async_commit closes a group). */
__device__ __forceinline__ void cp_async16(bf16 *dst, const bf16 *src, bool full) {
  unsigned a = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(a), "l"(src), "r"(full ? 16 : 0)
               : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

/* Waits until at most N of this thread's committed groups are pending. */
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* (lo, hi) rounded to bf16, lo in the low half. */
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *(uint32_t *)&v;
}
#endif

#endif
