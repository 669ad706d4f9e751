/* kernels/layernorm.cu: CUDA residual add + LayerNorm, and RMSNorm (the
 * same kernels with RMS: no centring, no bias; LLaMA's). One warp per row,
 * or one block per row for rows a warp cannot hold; rows are read with
 * 16-byte vectors when C % 8 == 0 (V = 8), else one element at a time (V =
 * 1). Statistics in fp32. The forward keeps the row in registers when C <=
 * 16384 (and V = 8): a warp's up to 4096, a block's (256 threads) beyond,
 * so each input is read once and every load of a row is in flight at
 * once; longer rows take three passes over it (the later two mostly from
 * L1/L2). ptxas (nvcc 13.0, sm_90): 124 registers for C <= 2048, 196 for C
 * <= 4096, no spills (95 and 167 before the skip branch's dropout, the
 * same blocks per SM: 2 and 1, 2026-11-25); a warp's 8192 would spill.
 * The backward, for C <= 2048 (and V = 8), also holds the row in registers
 * and sums dw, db in per-warp shared slices, lane by lane without atomics
 * (ln_bwd_cached_kernel, 248 registers, 128 KB of shared memory at C =
 * 2048); otherwise, or where the GPU allows less shared memory (sm_86 and
 * sm_89: 99 KB), one kernel writes each row's dres (a block a row holding
 * it in registers for 2048 < C <= 16384, ln_bwd_row_cached_kernel; else a
 * warp a row, ln_bwd_rows_kernel) and a second sums dw, db down the
 * columns (ln_bwd_params_kernel). The cached kernel adds dw, db to global
 * memory once per block, the column sums once per slab of rows. The
 * block-a-row kernels are unmeasured on a GPU (2026-11-29: checked on the
 * emulated GPU only). The forward can drop the
 * skip branch before the add (dropout.h's draws, one Philox call per four
 * elements of a chunk). */
#include "kernels/layernorm.h"
#include "kernels/kern_cuda.cuh"

#define LN_WARPS 8

/* The skip branch's V elements from index e of the call dropped by d (p
 * 0: untouched), their kept mask to mask when given. */
template <int V>
__device__ __forceinline__ void drop_skip(float *y, const kern_dropout &d, uint8_t *mask, long e,
                                          kern_dropout_block *blk) {
  if (d.p <= 0.0f) return;
  for (int i = 0; i < V; i++) {
    float m = kern_dropout_mult_block(&d, d.base + e + i, blk);
    y[i] *= m;
    if (mask) mask[e + i] = m != 0.0f;
  }
}

template <int V, bool RMS>
__global__ void __launch_bounds__(32 * LN_WARPS)
    ln_fwd_kernel(bf16 *residual, bf16 *out, float *mean, float *rstd, const bf16 *inp,
                  const bf16 *skip, kern_dropout d, uint8_t *mask, const bf16 *w, const bf16 *b,
                  int N, int C) {
  int lane = threadIdx.x % 32;
  long n = (long)blockIdx.x * LN_WARPS + threadIdx.x / 32;
  if (n >= N) return;
  const bf16 *x = skip ? residual + n * C : inp + n * C;
  float s = 0.0f, x8[V], y8[V];
  kern_dropout_block blk = {-1, {0}};
  for (int c = lane * V; c < C; c += 32 * V) {
    vload<V>(x8, inp + n * C + c);
    if (skip) {
      vload<V>(y8, skip + n * C + c);
      drop_skip<V>(y8, d, mask, n * C + c, &blk);
      for (int i = 0; i < V; i++) x8[i] += y8[i];
      vstore<V>(residual + n * C + c, x8);
      vload<V>(x8, residual + n * C + c); /* the rounded value is what LN sees */
    }
    for (int i = 0; i < V; i++) s += x8[i];
  }
  float m = RMS ? 0.0f : warp_sum(s) / C, v = 0.0f;
  for (int c = lane * V; c < C; c += 32 * V) {
    vload<V>(x8, x + c);
    for (int i = 0; i < V; i++) v += (x8[i] - m) * (x8[i] - m);
  }
  float r = rsqrtf(warp_sum(v) / C + KERN_LN_EPS);
  for (int c = lane * V; c < C; c += 32 * V) {
    float w8[V], b8[V] = {};
    vload<V>(x8, x + c);
    vload<V>(w8, w + c);
    if (!RMS) vload<V>(b8, b + c);
    for (int i = 0; i < V; i++) y8[i] = (x8[i] - m) * r * w8[i] + b8[i];
    vstore<V>(out + n * C + c, y8);
  }
  if (lane == 0) {
    if (!RMS) mean[n] = m;
    rstd[n] = r;
  }
}

/* A row's sum over its TPR threads, in every one of them: a warp's
 * (TPR 32) or the whole block's (TPR = blockDim.x, one row a block). */
template <int TPR> __device__ __forceinline__ float row_sum(float x) {
  return TPR == 32 ? warp_sum(x) : block_sum(x);
}

/* The forward with the row in registers: NCH 16-byte chunks of bf16 per
 * thread, TPR threads a row (C <= 8 TPR NCH), the residual sum as LN sees
 * it (rounded to bf16). TPR 32 (a warp a row, C <= 4096): the same sums in
 * the same order as ln_fwd_kernel<8> (bit-identical on the emulated GPU,
 * 2026-11-23, C from 768 to 4096, with and without skip). TPR
 * LN_ROW_THREADS (a block a row, C up to 16384: 175B's 12288), where a
 * warp's registers cannot hold the row and ln_fwd_kernel read it three
 * times (49.8% of the copy bandwidth at N 2048 x C 12288 on an H100,
 * kern_bench, 2026-11-26): each input is read once, the statistics summed
 * over the block (the same values within fp32 rounding, not the same
 * bits as the warp kernels'). */
#define LN_ROW_THREADS 256

template <int NCH, bool RMS, int TPR>
__global__ void __launch_bounds__(TPR == 32 ? 32 * LN_WARPS : TPR)
    ln_fwd_cached_kernel(bf16 *residual, bf16 *out, float *mean, float *rstd, const bf16 *inp,
                         const bf16 *skip, kern_dropout d, uint8_t *mask, const bf16 *w, const bf16 *b,
                         int N, int C) {
  int lane = threadIdx.x % TPR;
  long n = (long)blockIdx.x * (blockDim.x / TPR) + threadIdx.x / TPR;
  if (n >= N) return; /* TPR = blockDim.x: never (one block a row), so block_sum sees every thread */
  bvec<8> xr[NCH];
  float s = 0.0f;
  kern_dropout_block blk = {-1, {0}};
#pragma unroll
  for (int k = 0; k < NCH; k++) {
    int c = (TPR * k + lane) * 8;
    if (c >= C) continue;
    float x8[8], y8[8];
    vload<8>(x8, inp + n * C + c);
    if (skip) {
      vload<8>(y8, skip + n * C + c);
      drop_skip<8>(y8, d, mask, n * C + c, &blk);
      for (int i = 0; i < 8; i++) x8[i] += y8[i];
      vstore<8>(residual + n * C + c, x8);
    }
    for (int i = 0; i < 8; i++) {
      xr[k].x[i] = __float2bfloat16_rn(x8[i]);
      s += __bfloat162float(xr[k].x[i]);
    }
  }
  float m = RMS ? 0.0f : row_sum<TPR>(s) / C, v = 0.0f;
#pragma unroll
  for (int k = 0; k < NCH; k++)
    if ((TPR * k + lane) * 8 < C)
      for (int i = 0; i < 8; i++) {
        float d = __bfloat162float(xr[k].x[i]) - m;
        v += d * d;
      }
  float r = rsqrtf(row_sum<TPR>(v) / C + KERN_LN_EPS);
#pragma unroll
  for (int k = 0; k < NCH; k++) {
    int c = (TPR * k + lane) * 8;
    if (c >= C) continue;
    float w8[8], b8[8] = {}, y8[8];
    vload<8>(w8, w + c);
    if (!RMS) vload<8>(b8, b + c);
    for (int i = 0; i < 8; i++) y8[i] = (__bfloat162float(xr[k].x[i]) - m) * r * w8[i] + b8[i];
    vstore<8>(out + n * C + c, y8);
  }
  if (lane == 0) {
    if (!RMS) mean[n] = m;
    rstd[n] = r;
  }
}

/* The backward for rows the cached kernel below does not take (C > 2048,
 * C % 8 != 0, unaligned, or too little shared memory): two kernels.
 * ln_bwd_rows_kernel, one warp per row, writes dres alone (two passes over
 * the row, the second mostly from L1/L2); ln_bwd_params_kernel sums dw, db
 * down the columns, each thread holding V adjacent columns of a slab of
 * rows in registers, then adds them to global memory once per slab. One
 * kernel that summed dw, db with shared-memory atomics, 64 rows a block,
 * ran here before: at C = 12288 its 2048 rows made 32 blocks, 68 GB/s on
 * an H100 (kern_bench, 2026-11-26). */
#define LN_PARAM_THREADS 256
#define LN_PARAM_BLOCKS 264  /* about two blocks per H100 SM */
#define LN_PARAM_MIN_ROWS 16 /* rows per slab at least: global adds stay under 1/16 of the loads */

template <int V, bool RMS>
__global__ void __launch_bounds__(32 * LN_WARPS)
    ln_bwd_rows_kernel(bf16 *dres, const bf16 *dout, const bf16 *xln, const bf16 *w, const float *mean,
                       const float *rstd, int N, int C) {
  int lane = threadIdx.x % 32;
  long n = (long)blockIdx.x * LN_WARPS + threadIdx.x / 32;
  if (n >= N) return;
  float m = RMS ? 0.0f : mean[n], r = rstd[n], sdn = 0.0f, sdnx = 0.0f;
  float x8[V], d8[V], w8[V], g8[V];
  for (int c = lane * V; c < C; c += 32 * V) {
    vload<V>(x8, xln + n * C + c);
    vload<V>(d8, dout + n * C + c);
    vload<V>(w8, w + c);
    for (int i = 0; i < V; i++) {
      sdn += d8[i] * w8[i];
      sdnx += d8[i] * w8[i] * (x8[i] - m) * r;
    }
  }
  sdn = RMS ? 0.0f : warp_sum(sdn) / C; /* RMSNorm does not centre: no mean term */
  sdnx = warp_sum(sdnx) / C;
  for (int c = lane * V; c < C; c += 32 * V) {
    vload<V>(x8, xln + n * C + c);
    vload<V>(d8, dout + n * C + c);
    vload<V>(w8, w + c);
    vload<V>(g8, dres + n * C + c);
    for (int i = 0; i < V; i++) g8[i] += r * (d8[i] * w8[i] - sdn - (x8[i] - m) * r * sdnx);
    vstore<V>(dres + n * C + c, g8);
  }
}

/* ln_bwd_rows_kernel's dres for rows a block holds in registers (C <= 8
 * LN_ROW_THREADS NCH, 16-byte vectors): a block a row, each thread NCH
 * chunks of xln and dout, so each is read once where a warp a row read
 * both twice (41% of the copy bandwidth by kern_bench's count at N 2048 x
 * C 12288 on an H100, 2026-11-26, with the column sums below). ptxas
 * (nvcc 13.0, sm_90, 2026-11-29): 91, 124 and 162 registers at NCH 4, 6
 * and 8, no spills; two blocks an SM up to NCH 6 (C 12288), where NCH 8
 * held to 128 registers spilled 36 bytes, so it runs one. */
template <int NCH, bool RMS>
__global__ void __launch_bounds__(LN_ROW_THREADS, NCH <= 6 ? 2 : 1)
    ln_bwd_row_cached_kernel(bf16 *dres, const bf16 *dout, const bf16 *xln, const bf16 *w, const float *mean,
                             const float *rstd, int C) {
  long n = blockIdx.x;
  float m = RMS ? 0.0f : mean[n], r = rstd[n], sdn = 0.0f, sdnx = 0.0f;
  bvec<8> xv[NCH], dv[NCH];
#pragma unroll
  for (int k = 0; k < NCH; k++) {
    int c = (LN_ROW_THREADS * k + threadIdx.x) * 8;
    if (c >= C) continue;
    KERN_ALIGNED(xln + n * C + c, 16), KERN_ALIGNED(dout + n * C + c, 16);
    xv[k] = *(const bvec<8> *)(xln + n * C + c);
    dv[k] = *(const bvec<8> *)(dout + n * C + c);
    float w8[8];
    vload<8>(w8, w + c);
    for (int i = 0; i < 8; i++) {
      float dw8 = __bfloat162float(dv[k].x[i]) * w8[i];
      sdn += dw8;
      sdnx += dw8 * (__bfloat162float(xv[k].x[i]) - m) * r;
    }
  }
  sdn = RMS ? 0.0f : block_sum(sdn) / C; /* RMSNorm does not centre: no mean term */
  sdnx = block_sum(sdnx) / C;
#pragma unroll
  for (int k = 0; k < NCH; k++) {
    int c = (LN_ROW_THREADS * k + threadIdx.x) * 8;
    if (c >= C) continue;
    float w8[8], g8[8];
    vload<8>(w8, w + c); /* from L1/L2: every row reads the same C weights */
    vload<8>(g8, dres + n * C + c);
    for (int i = 0; i < 8; i++)
      g8[i] += r * (__bfloat162float(dv[k].x[i]) * w8[i] - sdn - (__bfloat162float(xv[k].x[i]) - m) * r * sdnx);
    vstore<8>(dres + n * C + c, g8);
  }
}

/* dw += sum_n dout xhat, db += sum_n dout over rows [blockIdx.y rows, +rows). */
template <int V, bool RMS>
__global__ void __launch_bounds__(LN_PARAM_THREADS)
    ln_bwd_params_kernel(float *dw, float *db, const bf16 *dout, const bf16 *xln, const float *mean,
                         const float *rstd, int N, int C, int rows) {
  long c = ((long)blockIdx.x * LN_PARAM_THREADS + threadIdx.x) * V;
  if (c >= C) return; /* V = 8 only where C % 8 == 0: the whole vector is in the row */
  long n0 = (long)blockIdx.y * rows, n1 = n0 + rows < N ? n0 + rows : N;
  float sw[V] = {}, sb[V] = {};
#pragma unroll 2
  for (long n = n0; n < n1; n++) {
    float x8[V], d8[V], m = RMS ? 0.0f : mean[n], r = rstd[n];
    vload<V>(x8, xln + n * C + c);
    vload<V>(d8, dout + n * C + c);
    for (int i = 0; i < V; i++) {
      sw[i] += d8[i] * (x8[i] - m) * r;
      sb[i] += d8[i];
    }
  }
  for (int i = 0; i < V; i++) {
    atomicAdd(dw + c + i, sw[i]);
    if (!RMS) atomicAdd(db + c + i, sb[i]);
  }
}

/* The backward for C <= 256 NCH with 16-byte vectors: each warp holds a
 * row's xln, dout (and w) in registers, so each input is read once, and
 * sums its dw, db terms in its own shared-memory slice, where lane l owns
 * the columns of its chunks: plain adds, no atomics (the general kernel
 * above makes two shared atomic adds per element, from all 8 warps). Slot
 * (k 8 + i) 32 + l holds column (32 k + l) 8 + i, so a warp's 32 lanes
 * touch 32 consecutive floats; the slots of dw and of db each span C
 * rounded up to 256. At the end the block sums the 8 slices and adds 2 C
 * atomics to global memory, over LN_BWD_CACHED_ROWS rows. Shared memory:
 * 8 warps x 2 x 256 ceil(C / 256) floats, 128 KB at C = 2048. */
#define LN_BWD_CACHED_ROWS 64 /* as the general kernel: 128 blocks for 8192 rows, about one per H100 SM */

/* Slots per warp for dw (and again for db): C rounded up to 256. */
__host__ __device__ static inline int ln_bwd_slots(int C) { return (C + 255) / 256 * 256; }

template <int NCH, bool RMS>
__global__ void __launch_bounds__(32 * LN_WARPS)
    ln_bwd_cached_kernel(bf16 *dres, float *dw, float *db, const bf16 *dout, const bf16 *xln,
                         const bf16 *w, const float *mean, const float *rstd, int N, int C) {
  KERN_DYN_SMEM(float, acc); /* per warp: dw slots (Cp), then db slots (Cp) */
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32, Cp = ln_bwd_slots(C);
  float *mine = acc + (size_t)warp * 2 * Cp;
  for (int c = lane; c < 2 * Cp; c += 32) mine[c] = 0.0f;
  __syncwarp(); /* from here each lane touches only its own slots */
  bvec<8> wv[NCH];
#pragma unroll
  for (int k = 0; k < NCH; k++)
    if ((32 * k + lane) * 8 < C) {
      KERN_ALIGNED(w + (32 * k + lane) * 8, 16);
      wv[k] = *(const bvec<8> *)(w + (32 * k + lane) * 8);
    }
  long n0 = (long)blockIdx.x * LN_BWD_CACHED_ROWS;
  for (long n = n0 + warp; n < n0 + LN_BWD_CACHED_ROWS && n < N; n += LN_WARPS) {
    float m = RMS ? 0.0f : mean[n], r = rstd[n], sdn = 0.0f, sdnx = 0.0f;
    bvec<8> xv[NCH], dv[NCH];
#pragma unroll
    for (int k = 0; k < NCH; k++) {
      int c = (32 * k + lane) * 8;
      if (c >= C) continue;
      KERN_ALIGNED(xln + n * C + c, 16), KERN_ALIGNED(dout + n * C + c, 16);
      xv[k] = *(const bvec<8> *)(xln + n * C + c);
      dv[k] = *(const bvec<8> *)(dout + n * C + c);
      for (int i = 0; i < 8; i++) {
        float dw8 = __bfloat162float(dv[k].x[i]) * __bfloat162float(wv[k].x[i]);
        sdn += dw8;
        sdnx += dw8 * (__bfloat162float(xv[k].x[i]) - m) * r;
      }
    }
    sdn = RMS ? 0.0f : warp_sum(sdn) / C;
    sdnx = warp_sum(sdnx) / C;
#pragma unroll
    for (int k = 0; k < NCH; k++) {
      int c = (32 * k + lane) * 8;
      if (c >= C) continue;
      float g8[8];
      vload<8>(g8, dres + n * C + c);
      for (int i = 0; i < 8; i++) {
        float d = __bfloat162float(dv[k].x[i]), xhat = (__bfloat162float(xv[k].x[i]) - m) * r;
        g8[i] += r * (d * __bfloat162float(wv[k].x[i]) - sdn - xhat * sdnx);
        mine[(k * 8 + i) * 32 + lane] += d * xhat;
        mine[Cp + (k * 8 + i) * 32 + lane] += d;
      }
      vstore<8>(dres + n * C + c, g8);
    }
  }
  __syncthreads();
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    int slot = (c / 256 * 8 + c % 8) * 32 + c % 256 / 8;
    float sw = 0.0f, sb = 0.0f;
    for (int v = 0; v < LN_WARPS; v++) sw += acc[(size_t)v * 2 * Cp + slot], sb += acc[(size_t)v * 2 * Cp + Cp + slot];
    atomicAdd(dw + c, sw);
    if (!RMS) atomicAdd(db + c, sb);
  }
}

static bool ln_vec8_ok(int C, const void *const *ptrs, int np) {
  return C % 8 == 0 && kern_aligned16(ptrs, np);
}

template <bool RMS>
static int ln_fwd(kern_bf16 *residual, kern_bf16 *out, float *mean, float *rstd, const kern_bf16 *inp,
                  const kern_bf16 *skip, const kern_dropout *drop, uint8_t *mask, const kern_bf16 *w,
                  const kern_bf16 *b, int N, int C, cudaStream_t stream) {
  const void *p[] = {residual, out, inp, skip, w, b};
  kern_dropout D = KERN_NO_DROPOUT;
  if (skip && drop) D = *drop;
  unsigned grid = kern_cdiv(N, LN_WARPS);
  bool vec = ln_vec8_ok(C, p, 6);
  bf16 *R = (bf16 *)residual, *O = (bf16 *)out;
  const bf16 *X = (const bf16 *)inp, *S = (const bf16 *)skip, *W = (const bf16 *)w, *B = (const bf16 *)b;
  if (vec && C <= 256 * 8)
    KERN_LAUNCH(grid, 32 * LN_WARPS, 0, stream, ln_fwd_cached_kernel<8, RMS, 32>)(R, O, mean, rstd, X, S, D, mask, W, B, N, C);
  else if (vec && C <= 256 * 16)
    KERN_LAUNCH(grid, 32 * LN_WARPS, 0, stream, ln_fwd_cached_kernel<16, RMS, 32>)(R, O, mean, rstd, X, S, D, mask, W, B, N, C);
  else if (vec && C <= LN_ROW_THREADS * 8 * 4)
    KERN_LAUNCH(N, LN_ROW_THREADS, 0, stream, ln_fwd_cached_kernel<4, RMS, LN_ROW_THREADS>)(R, O, mean, rstd, X, S, D,
                                                                                          mask, W, B, N, C);
  else if (vec && C <= LN_ROW_THREADS * 8 * 8)
    KERN_LAUNCH(N, LN_ROW_THREADS, 0, stream, ln_fwd_cached_kernel<8, RMS, LN_ROW_THREADS>)(R, O, mean, rstd, X, S, D,
                                                                                          mask, W, B, N, C);
  else if (vec)
    KERN_LAUNCH(grid, 32 * LN_WARPS, 0, stream, ln_fwd_kernel<8, RMS>)(R, O, mean, rstd, X, S, D, mask, W, B, N, C);
  else
    KERN_LAUNCH(grid, 32 * LN_WARPS, 0, stream, ln_fwd_kernel<1, RMS>)(R, O, mean, rstd, X, S, D, mask, W, B, N, C);
  KERN_LAUNCH_TRY();
  return 0;
}

extern "C" int kern_layernorm_fwd_cuda(kern_bf16 *residual, kern_bf16 *out, float *mean,
                                       float *rstd, const kern_bf16 *inp, const kern_bf16 *skip,
                                       const kern_dropout *drop, uint8_t *mask, const kern_bf16 *w,
                                       const kern_bf16 *b, int N, int C, cudaStream_t stream) {
  return ln_fwd<false>(residual, out, mean, rstd, inp, skip, drop, mask, w, b, N, C, stream);
}

extern "C" int kern_rmsnorm_fwd_cuda(kern_bf16 *residual, kern_bf16 *out, float *rstd, const kern_bf16 *inp,
                                     const kern_bf16 *skip, const kern_dropout *drop, uint8_t *mask,
                                     const kern_bf16 *w, int N, int C, cudaStream_t stream) {
  return ln_fwd<true>(residual, out, NULL, rstd, inp, skip, drop, mask, w, NULL, N, C, stream);
}

/* The two-kernel backward: dres by a block a row with the row in
 * registers (16-byte vectors, 2048 < C <= 16384: narrower rows would leave
 * most of a block's threads idle), else a warp a row; then dw, db down
 * the columns. */
template <int V, bool RMS>
static int ln_bwd_launch(bf16 *dres, float *dw, float *db, const bf16 *dout, const bf16 *xln,
                         const bf16 *w, const float *mean, const float *rstd, int N, int C,
                         cudaStream_t stream) {
  int cached = V == 8 && C > 32 * 8 * 8 && C <= LN_ROW_THREADS * 8 * 8; /* 2048 < C <= 16384 */
  if (cached && C <= LN_ROW_THREADS * 8 * 4)
    KERN_LAUNCH(N, LN_ROW_THREADS, 0, stream, ln_bwd_row_cached_kernel<4, RMS>)(dres, dout, xln, w, mean, rstd, C);
  else if (cached && C <= LN_ROW_THREADS * 8 * 6)
    KERN_LAUNCH(N, LN_ROW_THREADS, 0, stream, ln_bwd_row_cached_kernel<6, RMS>)(dres, dout, xln, w, mean, rstd, C);
  else if (cached)
    KERN_LAUNCH(N, LN_ROW_THREADS, 0, stream, ln_bwd_row_cached_kernel<8, RMS>)(dres, dout, xln, w, mean, rstd, C);
  else
    KERN_LAUNCH(kern_cdiv(N, LN_WARPS), 32 * LN_WARPS, 0, stream, ln_bwd_rows_kernel<V, RMS>)(
        dres, dout, xln, w, mean, rstd, N, C);
  KERN_LAUNCH_TRY();
  /* Column tiles of 256 V, and enough row slabs for LN_PARAM_BLOCKS blocks. */
  unsigned tiles = kern_cdiv(C, LN_PARAM_THREADS * V);
  int rows = kern_cdiv((long)N * tiles, LN_PARAM_BLOCKS);
  if (rows < LN_PARAM_MIN_ROWS) rows = LN_PARAM_MIN_ROWS;
  KERN_LAUNCH(dim3(tiles, kern_cdiv(N, rows)), LN_PARAM_THREADS, 0, stream, ln_bwd_params_kernel<V, RMS>)(
      dw, db, dout, xln, mean, rstd, N, C, rows);
  KERN_LAUNCH_TRY();
  return 0;
}

template <bool RMS>
static int ln_bwd(kern_bf16 *dres, float *dw, float *db, const kern_bf16 *dout, const kern_bf16 *xln,
                  const kern_bf16 *w, const float *mean, const float *rstd, int N, int C, cudaStream_t stream) {
  const void *p[] = {dres, dout, xln, w};
  size_t smem = sizeof(float) * 2 * (size_t)ln_bwd_slots(C) * LN_WARPS;
  if (ln_vec8_ok(C, p, 4) && C <= 256 * 8 && kern_smem_fits(ln_bwd_cached_kernel<8, RMS>, smem)) {
    KERN_LAUNCH(kern_cdiv(N, LN_BWD_CACHED_ROWS), 32 * LN_WARPS, smem, stream, ln_bwd_cached_kernel<8, RMS>)(
        (bf16 *)dres, dw, db, (const bf16 *)dout, (const bf16 *)xln, (const bf16 *)w, mean, rstd, N, C);
    KERN_LAUNCH_TRY();
    return 0;
  }
  if (ln_vec8_ok(C, p, 4))
    return ln_bwd_launch<8, RMS>((bf16 *)dres, dw, db, (const bf16 *)dout, (const bf16 *)xln,
                                 (const bf16 *)w, mean, rstd, N, C, stream);
  return ln_bwd_launch<1, RMS>((bf16 *)dres, dw, db, (const bf16 *)dout, (const bf16 *)xln,
                               (const bf16 *)w, mean, rstd, N, C, stream);
}

extern "C" int kern_layernorm_bwd_cuda(kern_bf16 *dres, float *dw, float *db,
                                       const kern_bf16 *dout, const kern_bf16 *xln,
                                       const kern_bf16 *w, const float *mean, const float *rstd,
                                       int N, int C, cudaStream_t stream) {
  return ln_bwd<false>(dres, dw, db, dout, xln, w, mean, rstd, N, C, stream);
}

extern "C" int kern_rmsnorm_bwd_cuda(kern_bf16 *dres, float *dw, const kern_bf16 *dout, const kern_bf16 *xln,
                                     const kern_bf16 *w, const float *rstd, int N, int C, cudaStream_t stream) {
  return ln_bwd<true>(dres, dw, NULL, dout, xln, w, NULL, rstd, N, C, stream);
}
