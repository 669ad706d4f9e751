/* kernels/attention.cu: CUDA attention.
 *
 * Flash forward and backward, the default (FA-2; kernels/attention_mma.cuh):
 * FlashAttention-2 on mma.sync with every accumulator in registers, the
 * next tile fetched by cp.async while the current one is computed. The
 * same code runs on the CPU in CI (tests/kernels/cuda_emu.h emulates the
 * fragment layouts), under ThreadSanitizer too.
 *
 * Flash on tensor cores through WMMA (kernels/attention_tc.cuh), for the
 * FlashAttention-1 variants below: 4 warps own 64 query rows, 16 each; per
 * 64-key tile S = Q K^T and O += P V go through WMMA (bf16 in, fp32
 * accumulate), the online softmax and the rescale of O run in shared
 * memory (a WMMA fragment's layout is opaque).
 *
 * Flash forward on CUDA cores (`_simt`, FlashAttention-2 style): a block
 * owns 64 query rows of one head, 4 threads per row, each thread holding
 * HS/4 interleaved dims of q and of the output accumulator (dims d = 4 e +
 * sub, so the 4 threads of a row read adjacent bf16 in shared memory). Keys
 * and values stream through shared memory in tiles of 32; per tile the
 * scores go to shared memory, the running max m and sum l are updated once
 * (online softmax, base-2 exponentials) and the accumulator is rescaled
 * once. Never more than a 64 x 32 score tile exists. Tiles wholly outside
 * the causal / window band are skipped. Kept to measure the tensor cores'
 * gain.
 *
 * Flash backward on CUDA cores (`_simt`): a block owns 64 keys of one kv
 * head, 4 threads per key, holding k, v and the dk, dv accumulators in
 * registers; it loops over the query heads of its group and the query
 * tiles (32 rows) that can see its keys, recomputing p = exp(s - lse) and
 * ds = p (dp - D) with D = rowsum(dout * out). dk, dv are written once,
 * with no atomics; dq tiles (ds @ k) are added to an fp32 accumulator
 * with atomics and converted to bf16 at the end, as in the FA-2 backward.
 *
 * FlashAttention-1 variants (Dao et al. 2022, Algorithms 1 and 4; `_v1`),
 * the same math on FA-1's work partition and loop order, to measure FA-1
 * against FA-2, both on WMMA (above): the forward has one block per
 * (batch, head), key tiles outer, query tiles inner, the running O, m and
 * l in fp32 HBM scratch; the backward has one block per (batch, kv head),
 * walking the key tiles in order, and as the only writer of its group's
 * dq rows it adds to dq by plain read-modify-write.
 *
 * The unfused baseline (cuBLASLt batched GEMMs and a masked softmax) is
 * kernels/attention_unfused.cu. */
#include <mma.h>
#include <stdio.h>
#include <type_traits>
#include "kernels/attention.h"
#include "kernels/kern_cuda.cuh"
#include "kernels/matmul.h"
#include "kernels/attention_tc.cuh"
#include "kernels/attention_mma.cuh"
#include "kernels/attention_int.cuh"

#define FA_BR 64 /* SIMT forward: query rows per block */
#define FA_BC 32 /* SIMT forward: keys per tile */
#define FB_BC 64 /* backward: keys per tile (FA-2: per block) */
#define FB_BR 32 /* backward: query rows per tile */

/* Rows t0 .. t0 + R - 1 of one head of a (B, rows, H, HS) tensor into
 * shared memory, zero past `rows` and for dims >= HS (so padded lanes
 * contribute exactly 0). */
template <int R, int HD>
__device__ __forceinline__ void load_tile(bf16 (*dst)[HD], const bf16 *src, kern_attn_shape s,
                                          int b, int t0, int rows, int H, int head) {
  for (int idx = threadIdx.x; idx < R * HD; idx += blockDim.x) {
    int r = idx / HD, d = idx % HD, t = t0 + r;
    dst[r][d] = (t < rows && d < s.HS) ? src[seq_off(s, rows, H, b, t, head) + d] : __float2bfloat16(0.0f);
  }
}

/* Sum over the 4 threads of a row (adjacent lanes). */
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

/* ---- flash forward on CUDA cores (_simt) ------------------------------------
 * Thread layout: row = threadIdx.x / 4 of the 64-row query tile, sub =
 * threadIdx.x % 4 holds dims d = 4 e + sub of q and of the accumulator.
 * Scores are base-2 exponents (q pre-scaled by log2(e) / sqrt(HS)). */

/* q row i of head h, scaled; 0 for i >= T and for dims >= HS. */
template <int DPT>
__device__ __forceinline__ void fa_load_q(float (&qr)[DPT], const bf16 *q, kern_attn_shape s,
                                          int b, int h, int i) {
  int sub = threadIdx.x % 4;
  bool valid = i < s.T;
  float scale = rsqrtf((float)s.HS) * LOG2E;
  const bf16 *qrow = q + row_off(s, b, valid ? i : 0, s.NH, h);
#pragma unroll
  for (int e = 0; e < DPT; e++) {
    int d = 4 * e + sub;
    qr[e] = (valid && d < s.HS) ? ld(qrow + d) * scale : 0.0f;
  }
}

/* Key and value tile j0 of kv head g into shared memory. Barriers on both
 * sides (the previous tile's readers are done; the tile is complete), so
 * call it from block-uniform control flow only. */
template <int HD>
__device__ __forceinline__ void fa_load_kv(bf16 (*ks)[HD], bf16 (*vs)[HD], const bf16 *k,
                                           const bf16 *v, kern_attn_shape s, int b, int g,
                                           int j0) {
  __syncthreads();
  load_tile<FA_BC, HD>(ks, k, s, b, j0, kern_attn_tk(&s), s.NKV, g);
  load_tile<FA_BC, HD>(vs, v, s, b, j0, kern_attn_tk(&s), s.NKV, g);
  __syncthreads();
}

/* Online-softmax step of query row i over keys j0 .. j0 + FA_BC - 1 (in ks,
 * vs). Invariant, before and after: acc and l are sums of 2^(x - m) terms
 * over the visible keys seen so far (x their scores, m their max); while
 * none was visible m = -INF and acc = l = 0. Masked keys (not seen, or j >=
 * Tk) and rows i >= T score -INF and add nothing. All 32 lanes of the
 * warp call it together (quad shuffles, __syncwarp); no block barrier.
 * ss[row] is the row's score scratch, touched by its 4 threads only. */
template <int DPT>
__device__ __forceinline__ void fa_tile(float (&acc)[DPT], float &m, float &l,
                                        const float (&qr)[DPT], const bf16 (*ks)[4 * DPT],
                                        const bf16 (*vs)[4 * DPT], float (*ss)[FA_BC + 1],
                                        kern_attn_shape s, int b, int h, int i, int j0) {
  int row = threadIdx.x / 4, sub = threadIdx.x % 4, tk = kern_attn_tk(&s);
  bool valid = i < s.T;
  __syncwarp(); /* the row's threads may still be reading ss[row] from the last call */
  float tmax = -INFINITY;
  for (int jj = 0; jj < FA_BC; jj++) {
    float x = 0.0f;
#pragma unroll
    for (int e = 0; e < DPT; e++) x += qr[e] * __bfloat162float(ks[jj][4 * e + sub]);
    x = quad_sum(x);
    int j = j0 + jj;
    if (!valid || j >= tk || !kern_attn_pos_sees(i + s.q0, j + s.k0, s.window)) x = -INFINITY;
    if (sub == 0) ss[row][jj] = x;
    tmax = fmaxf(tmax, x);
  }
  __syncwarp();
  float mnew = fmaxf(m, tmax); /* the same in the row's 4 threads: quad_sum is symmetric */
  if (mnew == -INFINITY) return; /* nothing visible yet for this row */
  float corr = exp2f(m - mnew);  /* 0 when m = -INF (acc, l are 0 then) */
  l *= corr;
#pragma unroll
  for (int e = 0; e < DPT; e++) acc[e] *= corr;
  kern_dropout_block blk = {-1, {0}};
  for (int jj = 0; jj < FA_BC; jj++) {
    float p = exp2f(ss[row][jj] - mnew);
    l += p;
    p *= kern_attn_drop_block(&s, b, h, i, j0 + jj, &blk); /* dropout scales the terms of acc only */
#pragma unroll
    for (int e = 0; e < DPT; e++) acc[e] += p * __bfloat162float(vs[jj][4 * e + sub]);
  }
  m = mnew;
}

/* out row i = acc / l in bf16, lse = ln sum_j e^{score} = (m + log2 l) / log2(e).
 * l >= 1 where the row saw a key (m is finite and its argmax adds 2^0), else
 * l = 0: out 0, lse -inf (row_inv, row_lse). */
template <int DPT>
__device__ __forceinline__ void fa_store(bf16 *out, float *lse, const float (&acc)[DPT], float m,
                                         float l, kern_attn_shape s, int b, int h, int i) {
  int sub = threadIdx.x % 4;
  float inv = row_inv(l);
  bf16 *orow = out + row_off(s, b, i, s.NH, h);
#pragma unroll
  for (int e = 0; e < DPT; e++)
    if (4 * e + sub < s.HS) orow[4 * e + sub] = __float2bfloat16_rn(acc[e] * inv);
  if (sub == 0) lse[stat_off(s, b, h, i)] = row_lse(m, l);
}

/* FA-2 loop order: grid (T / 64, NH, B); the block's query tile stays in
 * registers while the key tiles of its band stream past. */
template <int DPT>
__global__ void __launch_bounds__(256)
    flash_fwd_kernel(bf16 *out, float *lse, const bf16 *q, const bf16 *k, const bf16 *v,
                     kern_attn_shape s) {
  constexpr int HD = 4 * DPT;
  __shared__ bf16 ks[FA_BC][HD], vs[FA_BC][HD];
  __shared__ float ss[FA_BR][FA_BC + 1];
  int b = blockIdx.z, h = blockIdx.y, g = h / (s.NH / s.NKV);
  int i0 = blockIdx.x * FA_BR, i = i0 + threadIdx.x / 4;
  float qr[DPT], acc[DPT] = {}, m = -INFINITY, l = 0.0f;
  fa_load_q<DPT>(qr, q, s, b, h, i);
  int jlast = kern_attn_key_hi(&s, min(i0 + FA_BR, s.T) - 1);
  for (int j0 = kern_attn_key_lo(&s, i0) / FA_BC * FA_BC; j0 <= jlast; j0 += FA_BC) {
    fa_load_kv<HD>(ks, vs, k, v, s, b, g, j0);
    fa_tile<DPT>(acc, m, l, qr, ks, vs, ss, s, b, h, i, j0);
  }
  if (i < s.T) fa_store<DPT>(out, lse, acc, m, l, s, b, h, i);
}


/* D (B, NH, T) = rowsum(dout * out), one warp per row. */
__global__ void attn_rowdot_kernel(float *D, const bf16 *dout, const bf16 *out,
                                   kern_attn_shape s) {
  long r = (long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= (long)s.B * s.NH * s.T) return;
  int i = (int)(r % s.T), h = (int)(r / s.T % s.NH), b = (int)(r / s.T / s.NH);
  long off = (((long)b * s.T + i) * s.NH + h) * s.HS;
  float acc = 0.0f;
  for (int d = threadIdx.x % 32; d < s.HS; d += 32) acc += ld(dout + off + d) * ld(out + off + d);
  acc = warp_sum(acc);
  if (threadIdx.x % 32 == 0) D[r] = acc;
}

__global__ void f32_to_bf16_kernel(bf16 *dst, const float *src, long n) {
  long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = __float2bfloat16_rn(src[i]);
}

__global__ void f32_fill_kernel(float *dst, float x, long n) {
  long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = x;
}

/* Backward step for the keys j0 .. j0 + FB_BC - 1 of kv head g (thread
 * key = threadIdx.x / 4 holds dims 4 e + sub of its k, v, dk, dv): loops
 * over the group's query heads and the 32-row query tiles that see some of
 * these keys; dk, dv are written once at the end. dq: atomicAdd, or a plain
 * read-modify-write when sole_dq (this block is the only one writing its
 * group's dq rows; its own updates of one element are ordered by the
 * barriers between query tiles and key tiles). Block-uniform calls only. */
template <int DPT>
__device__ __forceinline__ void fb_key_tile(bf16 *dk, bf16 *dv, float *dq_acc, const bf16 *q,
                                            const bf16 *k, const bf16 *v, const bf16 *dout,
                                            const float *lse, const float *D, kern_attn_shape s,
                                            int b, int g, int j0, bool sole_dq) {
  constexpr int HD = 4 * DPT;
  __shared__ bf16 qs[FB_BR][HD], dos[FB_BR][HD], ks[FB_BC][HD];
  __shared__ float dss[FB_BR][FB_BC + 1], ls[FB_BR], Ds[FB_BR];
  int key = threadIdx.x / 4, sub = threadIdx.x % 4, grp = s.NH / s.NKV, tk = kern_attn_tk(&s);
  int j = j0 + key;
  bool valid = j < tk;
  float scale = rsqrtf((float)s.HS), kr[DPT], vr[DPT], dkr[DPT], dvr[DPT];
  long koff = kv_off(s, b, valid ? j : 0, g);
#pragma unroll
  for (int e = 0; e < DPT; e++) {
    int d = 4 * e + sub;
    kr[e] = (valid && d < s.HS) ? ld(k + koff + d) : 0.0f;
    vr[e] = (valid && d < s.HS) ? ld(v + koff + d) : 0.0f;
    dkr[e] = dvr[e] = 0.0f;
  }
  __syncthreads(); /* the previous key tile's dq step may still read ks */
  load_tile<FB_BC, HD>(ks, k, s, b, j0, tk, s.NKV, g);
  int ihi = last_query(s, min(j0 + FB_BC, tk) - 1);
  for (int r = 0; r < grp; r++) {
    int h = g * grp + r;
    for (int it = first_query(s, j0) / FB_BR * FB_BR; it <= ihi; it += FB_BR) {
      __syncthreads();
      load_tile<FB_BR, HD>(qs, q, s, b, it, s.T, s.NH, h);
      load_tile<FB_BR, HD>(dos, dout, s, b, it, s.T, s.NH, h);
      if (threadIdx.x < FB_BR) {
        int i = it + threadIdx.x;
        ls[threadIdx.x] = i < s.T ? lse[stat_off(s, b, h, i)] : INFINITY;
        Ds[threadIdx.x] = i < s.T ? D[stat_off(s, b, h, i)] : 0.0f;
      }
      __syncthreads();
      for (int ii = 0; ii < FB_BR; ii++) {
        int i = it + ii;
        float x = 0.0f, dp = 0.0f;
#pragma unroll
        for (int e = 0; e < DPT; e++) {
          x += __bfloat162float(qs[ii][4 * e + sub]) * kr[e];
          dp += __bfloat162float(dos[ii][4 * e + sub]) * vr[e];
        }
        x = quad_sum(x);
        dp = quad_sum(dp);
        bool ok = valid && i < s.T && kern_attn_pos_sees(i + s.q0, j + s.k0, s.window);
        float mk = ok ? kern_attn_drop(&s, b, h, i, j) : 1.0f;
        float p = ok ? __expf(x * scale - ls[ii]) : 0.0f, ds = p * (dp * mk - Ds[ii]) * scale;
        p *= mk; /* dV from the dropped probabilities */
#pragma unroll
        for (int e = 0; e < DPT; e++) {
          dvr[e] += p * __bfloat162float(dos[ii][4 * e + sub]);
          dkr[e] += ds * __bfloat162float(qs[ii][4 * e + sub]);
        }
        if (sub == 0) dss[ii][key] = ds;
      }
      __syncthreads();
      for (int idx = threadIdx.x; idx < FB_BR * s.HS; idx += blockDim.x) {
        int ii = idx / s.HS, d = idx % s.HS, i = it + ii;
        if (i >= s.T) continue;
        float acc = 0.0f;
        for (int kk = 0; kk < FB_BC; kk++) acc += dss[ii][kk] * __bfloat162float(ks[kk][d]);
        float *dst = dq_acc + row_off(s, b, i, s.NH, h) + d;
        if (sole_dq)
          *dst += acc;
        else
          atomicAdd(dst, acc);
      }
    }
  }
  if (!valid) return;
#pragma unroll
  for (int e = 0; e < DPT; e++)
    if (4 * e + sub < s.HS) {
      dk[koff + 4 * e + sub] = __float2bfloat16_rn(dkr[e]);
      dv[koff + 4 * e + sub] = __float2bfloat16_rn(dvr[e]);
    }
}

/* Grid (nx, NKV, B); block x takes key tiles x, x + nx, ... of kv head
 * blockIdx.y; with nx = 1 a block is the sole writer of its group's dq rows.
 * The _simt backward runs it on FA-2's grid, nx = T / 64. */
template <int DPT>
__global__ void __launch_bounds__(256)
    flash_bwd_kernel(bf16 *dk, bf16 *dv, float *dq_acc, const bf16 *q, const bf16 *k,
                     const bf16 *v, const bf16 *dout, const float *lse, const float *D,
                     kern_attn_shape s) {
  for (int j0 = blockIdx.x * FB_BC; j0 < kern_attn_tk(&s); j0 += gridDim.x * FB_BC)
    fb_key_tile<DPT>(dk, dv, dq_acc, q, k, v, dout, lse, D, s, blockIdx.z, blockIdx.y, j0,
                     gridDim.x == 1);
}

/* Calls launch(std::integral_constant<int, DPT>{}) with DPT, the dims each
 * of a row's 4 threads holds in the SIMT kernels: a quarter of with_hd's
 * padded head size (8, 16, 32). */
template <class F> static void with_dpt(int HS, F launch) {
  with_hd(HS, [&](auto hd) { launch(std::integral_constant<int, decltype(hd)::value / 4>{}); });
}

/* The FA-2 forward with MT m-tiles per warp and BC keys per tile. */
template <int HD, int MT, int BC>
static cudaError_t attn_fwd_mma(bf16 *out, float *lse, const bf16 *q, const bf16 *k, const bf16 *v,
                                kern_attn_shape s, cudaStream_t stream) {
  typedef mf_smem<HD, MT, BC> cfg;
  cudaError_t e = kern_allow_smem(flash_fwd_mma_kernel<HD, MT, BC>, cfg::bytes);
  if (e == cudaSuccess)
    KERN_LAUNCH(dim3(kern_cdiv(s.T, cfg::BR), s.NH, s.B), 128, cfg::bytes, stream,
                flash_fwd_mma_kernel<HD, MT, BC>)(out, lse, q, k, v, s);
  return e;
}

extern "C" int kern_attention_fwd_cuda(kern_bf16 *out, float *lse, const kern_bf16 *q,
                                       const kern_bf16 *k, const kern_bf16 *v, kern_attn_shape s,
                                       cudaStream_t stream) {
  KERN_TRY(attn_check(s));
  cudaError_t e = cudaSuccess;
  with_hd(s.HS, [&](auto hd) {
    constexpr int HD = decltype(hd)::value;
    e = attn_fwd_mma<HD, mf_tile<HD>::MT, mf_tile<HD>::BC>((bf16 *)out, lse, (const bf16 *)q, (const bf16 *)k,
                                                          (const bf16 *)v, s, stream);
  });
  KERN_CUDA_TRY(e);
  KERN_LAUNCH_TRY();
  return 0;
}

extern "C" int kern_attention_fwd_tile_cuda(int mt, int bc, kern_bf16 *out, float *lse, const kern_bf16 *q,
                                            const kern_bf16 *k, const kern_bf16 *v, kern_attn_shape s,
                                            cudaStream_t stream) {
  KERN_TRY(attn_check(s));
  cudaError_t e = cudaSuccess;
  bool known = false;
  bf16 *o = (bf16 *)out;
  const bf16 *Q = (const bf16 *)q, *K = (const bf16 *)k, *V = (const bf16 *)v;
  with_hd(s.HS, [&](auto hd) {
    constexpr int HD = decltype(hd)::value;
    known = mf_with_tile(mt, bc, [&](auto m, auto c) {
      e = attn_fwd_mma<HD, decltype(m)::value, decltype(c)::value>(o, lse, Q, K, V, s, stream);
    });
  });
  if (!known) {
    char what[160];
    int n = snprintf(what, sizeof what, "forward tile (m-tiles, keys) (%d, %d): allowed", mt, bc);
    for (int i = 0; i < mf_ntiles && n > 0 && n < (int)sizeof what; i++)
      n += snprintf(what + n, sizeof what - n, " (%d, %d)", mf_tiles[i][0], mf_tiles[i][1]);
    return kern_report_cuda((int)cudaErrorInvalidValue, what, __FILE__, __LINE__);
  }
  KERN_CUDA_TRY(e);
  KERN_LAUNCH_TRY();
  return 0;
}

extern "C" int kern_attention_fwd_simt_cuda(kern_bf16 *out, float *lse, const kern_bf16 *q,
                                            const kern_bf16 *k, const kern_bf16 *v, kern_attn_shape s,
                                            cudaStream_t stream) {
  KERN_TRY(attn_check(s));
  dim3 grid(kern_cdiv(s.T, FA_BR), s.NH, s.B);
  bf16 *o = (bf16 *)out;
  const bf16 *Q = (const bf16 *)q, *K = (const bf16 *)k, *V = (const bf16 *)v;
  with_dpt(s.HS, [&](auto dpt) {
    KERN_LAUNCH(grid, 256, 0, stream, flash_fwd_kernel<decltype(dpt)::value>)(o, lse, Q, K, V, s);
  });
  KERN_LAUNCH_TRY();
  return 0;
}

extern "C" size_t kern_attention_fwd_v1_scratch_bytes(kern_attn_shape s) {
  return sizeof(float) * ((size_t)s.B * s.T * s.NH * s.HS + 2 * (size_t)s.B * s.NH * s.T);
}

extern "C" int kern_attention_fwd_v1_cuda(kern_bf16 *out, float *lse, float *scratch,
                                          const kern_bf16 *q, const kern_bf16 *k,
                                          const kern_bf16 *v, kern_attn_shape s,
                                          cudaStream_t stream) {
  KERN_TRY(attn_check(s));
  long nq = (long)s.B * s.T * s.NH * s.HS, nl = (long)s.B * s.NH * s.T;
  fa1_state st = {scratch, scratch + nq + nl, scratch + nq}; /* o | l | m */
  KERN_CUDA_TRY(cudaMemsetAsync(scratch, 0, sizeof(float) * (nq + nl), stream)); /* o, l */
  KERN_LAUNCH(kern_cdiv(nl, 256), 256, 0, stream, f32_fill_kernel)(st.m, -INFINITY, nl);
  KERN_LAUNCH_TRY();
  dim3 grid(1, s.NH, s.B);
  bf16 *o = (bf16 *)out;
  const bf16 *Q = (const bf16 *)q, *K = (const bf16 *)k, *V = (const bf16 *)v;
  cudaError_t e = cudaSuccess;
  with_hd(s.HS, [&](auto hd) {
    constexpr int HD = decltype(hd)::value;
    e = kern_allow_smem(flash1_fwd_tc_kernel<HD>, tc_tiles<HD>::bytes);
    if (e == cudaSuccess)
      KERN_LAUNCH(grid, 128, tc_tiles<HD>::bytes, stream, flash1_fwd_tc_kernel<HD>)(o, lse, st, Q, K, V, s);
  });
  KERN_CUDA_TRY(e);
  KERN_LAUNCH_TRY();
  return 0;
}

/* D and the dq accumulator, then with GQA (NH > NKV) the fp32 dK, dV
 * partials of each query head: 2 NH / NKV x (B, Tk, NKV, HS). */
extern "C" size_t kern_attention_bwd_scratch_bytes(kern_attn_shape s) {
  size_t nq = (size_t)s.B * s.T * s.NH * s.HS, nk = (size_t)s.B * kern_attn_tk(&s) * s.NH * s.HS;
  return sizeof(float) * ((size_t)s.B * s.NH * s.T + nq + (s.NKV > 0 && s.NH > s.NKV ? 2 * nk : 0));
}

extern "C" size_t kern_attention_bwd_v1_scratch_bytes(kern_attn_shape s) {
  return sizeof(float) * ((size_t)s.B * s.NH * s.T + (size_t)s.B * s.T * s.NH * s.HS);
}

/* The backward kernels attn_bwd_run launches. */
typedef enum { BWD_MMA, BWD_WMMA_V1, BWD_SIMT } attn_bwd_kind;

/* The FA-2 backward with NW warps (16 NW keys) per block and hpb query
 * heads (a divisor of the group) per block; below the group, each block's
 * fp32 dK, dV partials go to part and attn_dkv_sum_kernel adds them. */
template <int HD, int NW>
static cudaError_t attn_bwd_mma(bf16 *dk, bf16 *dv, float *dq_acc, float *part, const bf16 *q, const bf16 *k,
                                const bf16 *v, const bf16 *dout, const float *lse, const float *D, kern_attn_shape s,
                                int hpb, cudaStream_t stream) {
  typedef mb_smem<HD, NW> cfg;
  cudaError_t e = kern_allow_smem(flash_bwd_mma_kernel<HD, NW>, cfg::bytes);
  if (e != cudaSuccess) return e;
  KERN_LAUNCH(dim3(kern_cdiv(kern_attn_tk(&s), cfg::BK), s.NH / hpb, s.B), 32 * NW, cfg::bytes, stream,
              flash_bwd_mma_kernel<HD, NW>)(dk, dv, dq_acc, q, k, v, dout, lse, D, s, hpb, part);
  int nparts = s.NH / s.NKV / hpb;
  long nkv = (long)s.B * kern_attn_tk(&s) * s.NKV * s.HS;
  if (nparts > 1)
    KERN_LAUNCH(kern_cdiv(nkv, 256), 256, 0, stream, attn_dkv_sum_kernel)(dk, dv, part, nparts, nkv);
  return cudaGetLastError();
}

/* D, a zeroed dq accumulator, the backward kernel: FA-2 on mma.sync (grid
 * over key tiles and query heads, hpb of a group's per block, nw warps per
 * block), FA-1 on WMMA (one block per (b, kv head): see
 * flash_bwd_tc_kernel) or the SIMT one (grid over key tiles and KV heads);
 * dq to bf16. */
static int attn_bwd_run(kern_bf16 *dq, kern_bf16 *dk, kern_bf16 *dv, float *scratch,
                        const kern_bf16 *dout, const kern_bf16 *q, const kern_bf16 *k,
                        const kern_bf16 *v, const kern_bf16 *out, const float *lse,
                        kern_attn_shape s, attn_bwd_kind kind, int nw, int hpb, cudaStream_t stream) {
  KERN_TRY(attn_check(s));
  long nrows = (long)s.B * s.NH * s.T, nq = (long)s.B * s.T * s.NH * s.HS;
  float *D = scratch, *dq_acc = scratch + nrows, *part = dq_acc + nq;
  KERN_LAUNCH(kern_cdiv(nrows, 8), 256, 0, stream, attn_rowdot_kernel)(D, (const bf16 *)dout,
                                                              (const bf16 *)out, s);
  KERN_LAUNCH_TRY();
  KERN_CUDA_TRY(cudaMemsetAsync(dq_acc, 0, sizeof(float) * nq, stream));
  bf16 *DK = (bf16 *)dk, *DV = (bf16 *)dv;
  const bf16 *Q = (const bf16 *)q, *K = (const bf16 *)k, *V = (const bf16 *)v,
             *DO = (const bf16 *)dout;
  cudaError_t e = cudaSuccess;
  if (kind == BWD_SIMT) {
    dim3 grid(kern_cdiv(kern_attn_tk(&s), FB_BC), s.NKV, s.B);
    with_dpt(s.HS, [&](auto dpt) {
      KERN_LAUNCH(grid, 256, 0, stream, flash_bwd_kernel<decltype(dpt)::value>)(DK, DV, dq_acc, Q, K, V, DO, lse, D, s);
    });
  } else if (kind == BWD_WMMA_V1) {
    dim3 grid(1, s.NKV, s.B);
    with_hd(s.HS, [&](auto hd) {
      constexpr int HD = decltype(hd)::value;
      e = kern_allow_smem(flash_bwd_tc_kernel<HD>, tb_tiles<HD>::bytes);
      if (e == cudaSuccess)
        KERN_LAUNCH(grid, 128, tb_tiles<HD>::bytes, stream, flash_bwd_tc_kernel<HD>)(DK, DV, dq_acc, Q, K, V, DO, lse, D, s);
    });
  } else {
    with_hd(s.HS, [&](auto hd) {
      constexpr int HD = decltype(hd)::value;
      e = nw == 4 ? attn_bwd_mma<HD, 4>(DK, DV, dq_acc, part, Q, K, V, DO, lse, D, s, hpb, stream)
                  : attn_bwd_mma<HD, 8>(DK, DV, dq_acc, part, Q, K, V, DO, lse, D, s, hpb, stream);
    });
  }
  KERN_CUDA_TRY(e);
  KERN_LAUNCH_TRY();
  KERN_LAUNCH(kern_cdiv(nq, 256), 256, 0, stream, f32_to_bf16_kernel)((bf16 *)dq, dq_acc, nq);
  KERN_LAUNCH_TRY();
  return 0;
}

/* The default backward's warps per block at head size hs: mb_warps = 8
 * needs 113 KB at head size 128; where the GPU allows less (sm_86, sm_89:
 * 99 KB), the 4-warp block (74 KB). */
static int bwd_warps(int hs) {
  int nw = mb_warps;
  with_hd(hs, [&](auto hd) {
    constexpr int HD = decltype(hd)::value;
    if (!kern_smem_fits(flash_bwd_mma_kernel<HD, mb_warps>, mb_smem<HD, mb_warps>::bytes)) nw = 4;
  });
  return nw;
}

extern "C" int kern_attention_bwd_cuda(kern_bf16 *dq, kern_bf16 *dk, kern_bf16 *dv,
                                       float *scratch, const kern_bf16 *dout,
                                       const kern_bf16 *q, const kern_bf16 *k,
                                       const kern_bf16 *v, const kern_bf16 *out,
                                       const float *lse, kern_attn_shape s,
                                       cudaStream_t stream) {
  return attn_bwd_run(dq, dk, dv, scratch, dout, q, k, v, out, lse, s, BWD_MMA, bwd_warps(s.HS), 1, stream);
}

/* Resident blocks per SM of a kernel with its dynamic shared memory
 * allowed, as the launches above run it. */
template <class K> static int resident_blocks(K kernel, int threads, size_t smem, int *blocks) {
  KERN_CUDA_TRY(kern_allow_smem(kernel, smem));
  KERN_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, kernel, threads, smem));
  return 0;
}

extern "C" int kern_attention_resident_blocks_cuda(int bwd, int hs, int *blocks) {
  kern_attn_shape s = {1, 1, 1, 1, hs, 0, KERN_NO_DROPOUT};
  KERN_TRY(attn_check(s));
  int rc = 0;
  with_hd(hs, [&](auto hd) {
    constexpr int HD = decltype(hd)::value;
    typedef mf_smem<HD, mf_tile<HD>::MT, mf_tile<HD>::BC> fc;
    if (!bwd)
      rc = resident_blocks(flash_fwd_mma_kernel<HD, mf_tile<HD>::MT, mf_tile<HD>::BC>, 128, fc::bytes, blocks);
    else if (bwd_warps(hs) == mb_warps)
      rc = resident_blocks(flash_bwd_mma_kernel<HD, mb_warps>, 32 * mb_warps, mb_smem<HD, mb_warps>::bytes, blocks);
    else
      rc = resident_blocks(flash_bwd_mma_kernel<HD, 4>, 128, mb_smem<HD, 4>::bytes, blocks);
  });
  return rc;
}

extern "C" int kern_attention_bwd_tile_cuda(int nw, int grouped, kern_bf16 *dq, kern_bf16 *dk, kern_bf16 *dv,
                                            float *scratch, const kern_bf16 *dout, const kern_bf16 *q,
                                            const kern_bf16 *k, const kern_bf16 *v, const kern_bf16 *out,
                                            const float *lse, kern_attn_shape s, cudaStream_t stream) {
  if (nw != 4 && nw != 8)
    return kern_report_cuda((int)cudaErrorInvalidValue, "backward warps per block: 4 or 8", __FILE__, __LINE__);
  int hpb = grouped && s.NKV > 0 ? s.NH / s.NKV : 1;
  return attn_bwd_run(dq, dk, dv, scratch, dout, q, k, v, out, lse, s, BWD_MMA, nw, hpb, stream);
}

extern "C" int kern_attention_bwd_simt_cuda(kern_bf16 *dq, kern_bf16 *dk, kern_bf16 *dv,
                                            float *scratch, const kern_bf16 *dout,
                                            const kern_bf16 *q, const kern_bf16 *k,
                                            const kern_bf16 *v, const kern_bf16 *out,
                                            const float *lse, kern_attn_shape s,
                                            cudaStream_t stream) {
  return attn_bwd_run(dq, dk, dv, scratch, dout, q, k, v, out, lse, s, BWD_SIMT, 0, 0, stream);
}

extern "C" int kern_attention_bwd_v1_cuda(kern_bf16 *dq, kern_bf16 *dk, kern_bf16 *dv,
                                          float *scratch, const kern_bf16 *dout,
                                          const kern_bf16 *q, const kern_bf16 *k,
                                          const kern_bf16 *v, const kern_bf16 *out,
                                          const float *lse, kern_attn_shape s,
                                          cudaStream_t stream) {
  return attn_bwd_run(dq, dk, dv, scratch, dout, q, k, v, out, lse, s, BWD_WMMA_V1, 0, 0, stream);
}
