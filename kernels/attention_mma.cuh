/* kernels/attention_mma.cuh: FlashAttention-2's forward and backward with
 * every accumulator in registers, on mma.sync fragments whose layout is
 * known (kernels/kern_mma.cuh), where the WMMA kernels of attention_tc.cuh
 * pass scores and the output accumulator through shared memory because a
 * WMMA fragment's layout is opaque. As in FlashAttention-2:
 *   - the scores S = Q K^T stay in the mma accumulators; the online softmax
 *     runs on them (each row's 4 lanes meet by shuffles), and they become
 *     the A operand of P V with no trip through shared memory (an m16n8
 *     accumulator pair is exactly an m16k16 A fragment);
 *   - the next key tile (forward) or query tile (backward) is fetched by
 *     cp.async into a second buffer while the current one is computed;
 *   - the grid splits the sequence (query tiles forward, key tiles
 *     backward), the forward's heaviest causal tiles first.
 * Device code only; needs attention_tc.cuh before it (index helpers,
 * LOG2E). attention.cu launches these for the default (FA-2) flash path;
 * tests/kernels/test_attention_tc_emu.cc runs them on the CPU through
 * tests/kernels/cuda_emu.h, which emulates kern_mma.cuh's layouts. */
#ifndef KERN_ATTENTION_MMA_CUH
#define KERN_ATTENTION_MMA_CUH

#include "kernels/kern_mma.cuh"

/* Rows t0 .. t0 + n - 1 of one head of a (B, rows, H, HS) tensor into dst
 * (row stride HD + 8), rows >= `rows` and dims >= HS zero, by threads tid
 * = 0 .. nthreads - 1: cp.async of 16 bytes (zero-filled outside) when HS
 * % 8 == 0, complete at the caller's cp_async_wait; else element stores,
 * visible after its next barrier. */
template <int HD>
__device__ __forceinline__ void mma_load_rows(bf16 *dst, const bf16 *src, kern_attn_shape s, int b, int t0, int n,
                                              int rows, int H, int head, int tid, int nthreads) {
  constexpr int CH = HD / 8, LD = HD + 8;
  for (int idx = tid; idx < n * CH; idx += nthreads) {
    int r = idx / CH, c = idx % CH * 8, t = t0 + r;
    bool in = t < rows && c < s.HS;
    bf16 *d = dst + r * LD + c;
    const bf16 *from = src + seq_off(s, rows, H, b, in ? t : 0, head) + (in ? c : 0);
    if (s.HS % 8 == 0) {
      cp_async16(d, from, in);
    } else {
#pragma unroll
      for (int e = 0; e < 8; e++) d[e] = (t < rows && c + e < s.HS) ? from[e] : __float2bfloat16(0.0f);
    }
  }
}

/* The A fragment of rows r0 .. r0 + 15, columns k0 .. k0 + 15 of a row-major
 * bf16 array (row stride ld) in shared memory. */
__device__ __forceinline__ void mma_load_a(uint32_t (&a)[4], const bf16 *x, int ld, int r0, int k0) {
  int lane = threadIdx.x % 32;
  ldsm_x4(a, x + (r0 + lane % 8 + 8 * (lane / 8 % 2)) * ld + k0 + 8 * (lane / 16));
}

/* B fragments (k0 .. k0 + 15) x (n0 .. n0 + 7) in b[0], b[1] and x (n0 + 8 ..
 * n0 + 15) in b[2], b[3]: from an (n, k) row-major array (mma_load_b_nk)
 * or a (k, n) one (mma_load_b_kn), row stride ld, in shared memory. */
__device__ __forceinline__ void mma_load_b_nk(uint32_t (&b)[4], const bf16 *x, int ld, int k0, int n0) {
  int lane = threadIdx.x % 32;
  ldsm_x4(b, x + (n0 + lane % 8 + 8 * (lane / 16)) * ld + k0 + 8 * (lane / 8 % 2));
}

__device__ __forceinline__ void mma_load_b_kn(uint32_t (&b)[4], const bf16 *x, int ld, int k0, int n0) {
  int lane = threadIdx.x % 32;
  ldsm_x4_t(b, x + (k0 + lane % 8 + 8 * (lane / 8 % 2)) * ld + n0 + 8 * (lane / 16));
}

/* The A fragment of k-step kk (columns 16 kk ..) from fp32 accumulators of
 * 8-column tiles (c[2 kk], c[2 kk + 1]), rounded to bf16. */
template <int N> __device__ __forceinline__ void mma_acc_to_a(uint32_t (&a)[4], const float (&c)[N][4], int kk) {
  a[0] = pack_bf16(c[2 * kk][0], c[2 * kk][1]);
  a[1] = pack_bf16(c[2 * kk][2], c[2 * kk][3]);
  a[2] = pack_bf16(c[2 * kk + 1][0], c[2 * kk + 1][1]);
  a[3] = pack_bf16(c[2 * kk + 1][2], c[2 * kk + 1][3]);
}

/* c[0] += a b[0..1] and c[1] += a b[2..3]: two adjacent 8-column tiles
 * from one x4 B load (mma_load_b_nk, mma_load_b_kn). */
__device__ __forceinline__ void mma_pair(float (*c)[4], const uint32_t (&a)[4], const uint32_t (&b)[4]) {
  mma_16816(c[0], a, b[0], b[1]);
  mma_16816(c[1], a, b[2], b[3]);
}

/* Word k of w[4], k a runtime index, by selects (no local-memory array). */
__device__ __forceinline__ uint32_t word_of(const uint32_t (&w)[4], int k) {
  return k == 0 ? w[0] : k == 1 ? w[1] : k == 2 ? w[2] : w[3];
}

/* The dropout multipliers of a forward thread's four probabilities of an
 * 8-key tile, (row r_{e / 2}, key j + e % 2), e = 0..3, j = the thread's
 * first key (2 tq of the tile), at one Philox call per four: the two lanes
 * tq = 2 c, 2 c + 1 hold keys 4 c .. 4 c + 3 of both rows (one call each
 * when kern_attn_drop_aligned); lane t = tq & 1 draws row r_t's group and keeps words
 * 2 t, 2 t + 1, and sends its partner (lane ^ 1) the other two. p[e] is
 * multiplied by its multiplier. All 32 lanes must call it. */
__device__ __forceinline__ void drop_pair(const kern_attn_shape &s, int b, int h, int r0, int r1, int j, int t,
                                          float (&p)[4]) {
  uint32_t w[4];
  kern_dropout_words(&s.drop, kern_attn_drop_index(&s, b, h, t ? r1 : r0, j) >> 2, w);
  /* own words 2 t, 2 t + 1 (row r_t); the partner's 2 t, 2 t + 1 of row r_(1-t) */
  uint32_t own0 = t ? w[2] : w[0], own1 = t ? w[3] : w[1];
  uint32_t oth0 = __shfl_xor_sync(0xffffffffu, t ? w[0] : w[2], 1);
  uint32_t oth1 = __shfl_xor_sync(0xffffffffu, t ? w[1] : w[3], 1);
  uint32_t x[4] = {t ? oth0 : own0, t ? oth1 : own1, t ? own0 : oth0, t ? own1 : oth1};
#pragma unroll
  for (int e = 0; e < 4; e++) p[e] *= kern_dropout_word_mult(&s.drop, x[e]);
}

/* The dropout multipliers of a backward thread's four probabilities of an
 * 8-query tile, (query i0 + e % 2, key key[e / 2]), e = 0..3, at one Philox
 * call per four, where the quad of lanes with keys 4a .. 4a + 3 of the warp
 * (lane bits 2-3, m = gr & 3; the same tq) shares four Philox calls: lane m
 * draws the group of its element e = m (keys 4a .. 4a + 3 of one query:
 * one call, since a row starts on a multiple of 4 when kern_attn_drop_aligned), and a
 * 4 x 4 transpose by xor shuffles hands each lane word m of every group
 * (lane m ^ d sends word m of its group). All 32 lanes must call it. */
__device__ __forceinline__ void drop_quad(const kern_attn_shape &s, int b, int h, int i0, const int (&key)[2], int m,
                                          float (&mk)[4]) {
  uint32_t w[4], got[4];
  kern_dropout_words(&s.drop, kern_attn_drop_index(&s, b, h, i0 + (m & 1), key[m >> 1]) >> 2, w);
  got[0] = word_of(w, m);
#pragma unroll
  for (int d = 1; d < 4; d++) got[d] = __shfl_xor_sync(0xffffffffu, word_of(w, m ^ d), 4 * d);
#pragma unroll
  for (int e = 0; e < 4; e++) mk[e] = kern_dropout_word_mult(&s.drop, word_of(got, m ^ e));
}

/* ---- forward --------------------------------------------------------------
 * Grid (T / (64 MT), NH, B), 4 warps; warp w owns query rows i0 + 16 MT w
 * .., MT 16-row m-tiles, so each K and V fragment read from shared memory
 * feeds MT mma (with MT = 1, shared memory's 128 bytes per clock caps
 * mma.sync near half its rate). Lane (g, t) holds rows g and g + 8 of each
 * m-tile: their running max m and a partial sum l over its own columns (the
 * row's 4 lanes add theirs at the end; they rescale alike, as m is the
 * same in all 4), and columns 2t, 2t + 1 of each 8-dim tile of the output
 * accumulator o. Per tile of BC keys: S = Q K^T (fp32; Q's fragments
 * re-read from shared memory, as registers hold o and S), scaled to base
 * 2, masked (causal, window, T) only where the tile crosses the band's
 * edge; m, l, o updated (FlashAttention-2's online softmax); P in bf16
 * times V. Shared memory: Q, and K, V twice (the tile in use, the next in
 * flight), bf16 rows of HD + 8 (16-byte aligned; 8 consecutive rows fall
 * in distinct banks for ldmatrix).
 * The default tile (mf_tile): MT = 2; BC = 64, or 32 at head size 128,
 * where 64 needs more than 255 registers (ptxas, nvcc 13.0, sm_90: 252
 * registers with the dropout draws, no spills, 68 KB of shared memory;
 * head size 64's default also 252, 2026-11-25). With the blocks' offsets
 * (q0, k0, Tk; -O3 --use_fast_math, no -lineinfo, before -> after): sm_90
 * 250 -> 250 at head size 128, 255 -> 255 at 64, 252 -> 245 at 32, no
 * spills; sm_80 252 -> 255, 254 -> 255 with 4 bytes spilled at 64. The
 * bench-only tiles moved more (sm_90: 2 x 64 at 128 spills 528 bytes, was
 * 100; 1 x 64 at 128 uses 254, was 172). The bench times the
 * others (kern_attention_fwd_tile_cuda) so a GPU can tell which is best. */
template <int HD, int MT, int BC> struct mf_smem {
  static constexpr int BR = 64 * MT, LD = HD + 8;
  static constexpr size_t bytes = sizeof(bf16) * (size_t)(BR + 4 * BC) * LD;
};

template <int HD> struct mf_tile {
  static constexpr int MT = 2, BC = HD > 64 ? 32 : 64;
};

/* Calls launch(std::integral_constant<int, MT>{}, std::integral_constant<int,
 * BC>{}) for the tile (mt, bc) of KERN_ATTN_FWD_TILES (kernels/attention.h),
 * the one place that maps a runtime tile to a kernel instantiation; false
 * (nothing called) for a tile not in the list. */
inline constexpr int mf_tiles[][2] = KERN_ATTN_FWD_TILES;
inline constexpr int mf_ntiles = (int)(sizeof mf_tiles / sizeof mf_tiles[0]);

template <int I = 0, class F> bool mf_with_tile(int mt, int bc, F &&launch) {
  if constexpr (I < mf_ntiles) {
    if (mt == mf_tiles[I][0] && bc == mf_tiles[I][1]) {
      launch(std::integral_constant<int, mf_tiles[I][0]>{}, std::integral_constant<int, mf_tiles[I][1]>{});
      return true;
    }
    return mf_with_tile<I + 1>(mt, bc, launch);
  } else {
    return false;
  }
}

template <int HD, int MT, int BC>
__global__ void __launch_bounds__(128)
    flash_fwd_mma_kernel(bf16 *out, float *lse, const bf16 *q, const bf16 *k, const bf16 *v, kern_attn_shape s) {
  constexpr int BR = mf_smem<HD, MT, BC>::BR, LD = HD + 8, NK = HD / 16, NS = BC / 8, NO = HD / 8,
                WR = 16 * MT;
  KERN_DYN_SMEM(unsigned char, mf_raw);
  bf16 *qs = (bf16 *)mf_raw, *ks = qs + BR * LD, *vs = ks + 2 * BC * LD; /* ks, vs: 2 buffers each */
  int b = blockIdx.z, h = blockIdx.y, g = h / (s.NH / s.NKV);
  int i0 = (gridDim.x - 1 - blockIdx.x) * BR; /* the longest causal rows first */
  int w = threadIdx.x / 32, lane = threadIdx.x % 32, gr = lane / 4, tq = lane % 4;
  /* The block's key tiles: from the one holding the first row's first key
   * to the last row's last (kern_attn_key_lo, _hi: nondecreasing in the row). */
  int tk = kern_attn_tk(&s), ilast = min(i0 + BR, s.T) - 1, jlast = kern_attn_key_hi(&s, ilast);
  int jfirst = kern_attn_key_lo(&s, i0) / BC * BC;
  mma_load_rows<HD>(qs, q, s, b, i0, BR, s.T, s.NH, h, threadIdx.x, blockDim.x);
  mma_load_rows<HD>(ks, k, s, b, jfirst, BC, tk, s.NKV, g, threadIdx.x, blockDim.x);
  mma_load_rows<HD>(vs, v, s, b, jfirst, BC, tk, s.NKV, g, threadIdx.x, blockDim.x);
  cp_async_commit();
  const float scale = rsqrtf((float)s.HS) * LOG2E;
  /* The warp's rows rw .. rlast; this lane's row of accumulator row r (=
   * 2 mt + half). Which keys the warp's rows see is tested below in
   * positions (q0 + row, k0 + key), from the shape's fields where used:
   * kern_attn_key_lo, _hi kept in registers pushed the head-size-64
   * kernel into spills (ptxas 13.0). */
  int rw = i0 + WR * w, rlast = min(rw + WR - 1, s.T - 1);
  auto row = [&](int r) { return rw + 16 * (r / 2) + gr + 8 * (r % 2); };
  float o[MT][NO][4] = {}, m[2 * MT], l[2 * MT];
#pragma unroll
  for (int r = 0; r < 2 * MT; r++) m[r] = -INFINITY, l[r] = 0.0f;
  int buf = 0;
  for (int j0 = jfirst; j0 <= jlast; j0 += BC, buf ^= 1) {
    cp_async_wait<0>();
    __syncthreads(); /* this tile (and Q) landed; every warp is done with the other buffers */
    if (j0 + BC <= jlast) {
      mma_load_rows<HD>(ks + (buf ^ 1) * BC * LD, k, s, b, j0 + BC, BC, tk, s.NKV, g, threadIdx.x, blockDim.x);
      mma_load_rows<HD>(vs + (buf ^ 1) * BC * LD, v, s, b, j0 + BC, BC, tk, s.NKV, g, threadIdx.x, blockDim.x);
    }
    cp_async_commit();
    /* Nothing of this tile visible to the warp's rows: its first key is
     * past the last row, or its last key before the first row's window. */
    if (rw >= s.T || j0 + s.k0 > rlast + s.q0 || j0 + BC - 1 + s.k0 < kern_attn_lo(rw + s.q0, s.window))
      continue;
    const bf16 *kb = ks + buf * BC * LD, *vb = vs + buf * BC * LD;
    float sc[MT][NS][4] = {};
#pragma unroll
    for (int kk = 0; kk < NK; kk++) {
      uint32_t qa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; mt++) mma_load_a(qa[mt], qs, LD, WR * w + 16 * mt, 16 * kk);
#pragma unroll
      for (int n = 0; n < NS; n += 2) {
        uint32_t bk[4];
        mma_load_b_nk(bk, kb, LD, 16 * kk, 8 * n);
#pragma unroll
        for (int mt = 0; mt < MT; mt++) mma_pair(&sc[mt][n], qa[mt], bk);
      }
    }
    /* Every key of the tile visible to every row of the warp: no mask (its
     * keys inside Tk, its last one not after the first row, its first one
     * inside the last row's window; lo() is nondecreasing). */
    bool full = rw + WR - 1 < s.T && j0 + BC <= tk && j0 + BC - 1 + s.k0 <= rw + s.q0 &&
                j0 + s.k0 >= kern_attn_lo(rlast + s.q0, s.window);
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
      float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int n = 0; n < NS; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          int i = row(2 * mt + e / 2), j = j0 + 8 * n + 2 * tq + e % 2;
          float x = sc[mt][n][e] * scale;
          /* rows i >= T are never stored: left unmasked (fewer registers) */
          if (!full && (j >= tk || !kern_attn_pos_sees(i + s.q0, j + s.k0, s.window))) x = -INFINITY;
          sc[mt][n][e] = x;
          mx[e / 2] = fmaxf(mx[e / 2], x);
        }
#pragma unroll
      for (int hf = 0; hf < 2; hf++) {
        int r = 2 * mt + hf;
        mx[hf] = fmaxf(mx[hf], __shfl_xor_sync(0xffffffffu, mx[hf], 1));
        mx[hf] = fmaxf(mx[hf], __shfl_xor_sync(0xffffffffu, mx[hf], 2));
        float mnew = fmaxf(m[r], mx[hf]), mu = mnew == -INFINITY ? 0.0f : mnew; /* all masked yet: p = 0 */
        float corr = exp2f(m[r] - mu), sum = 0.0f; /* 0 when m = -INF (o, l are 0 then) */
#pragma unroll
        for (int n = 0; n < NS; n++) {
          sc[mt][n][2 * hf] = exp2f(sc[mt][n][2 * hf] - mu);
          sc[mt][n][2 * hf + 1] = exp2f(sc[mt][n][2 * hf + 1] - mu);
          sum += sc[mt][n][2 * hf] + sc[mt][n][2 * hf + 1];
        }
        l[r] = l[r] * corr + sum;
        m[r] = mnew;
#pragma unroll
        for (int n = 0; n < NO; n++) o[mt][n][2 * hf] *= corr, o[mt][n][2 * hf + 1] *= corr;
      }
    }
    /* Dropout scales P's terms of O, after l took them undropped: one
     * Philox call per four probabilities shared by a pair of lanes where
     * rows start on a multiple of 4 (kern_attn_drop_aligned); else one call per
     * probability (a cache of the last call's words, as the SIMT kernel
     * keeps, pushed the head-size-64 kernel past 255 registers into
     * spills, ptxas 13.0). */
    if (s.drop.p > 0.0f && kern_attn_drop_aligned(&s)) {
#pragma unroll
      for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int n = 0; n < NS; n++) {
          drop_pair(s, b, h, row(2 * mt), row(2 * mt + 1), j0 + 8 * n + 2 * tq, tq & 1, sc[mt][n]);
        }
    } else if (s.drop.p > 0.0f) {
#pragma unroll
      for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int n = 0; n < NS; n++) {
#pragma unroll
          for (int e = 0; e < 4; e++)
            sc[mt][n][e] *= kern_attn_drop(&s, b, h, row(2 * mt + e / 2), j0 + 8 * n + 2 * tq + e % 2);
        }
    }
    /* O += P V: P in bf16 (l stays fp32, as FlashAttention-2). */
#pragma unroll
    for (int kk = 0; kk < BC / 16; kk++) {
      uint32_t pa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; mt++) mma_acc_to_a(pa[mt], sc[mt], kk);
#pragma unroll
      for (int n = 0; n < NO; n += 2) {
        uint32_t bv[4];
        mma_load_b_kn(bv, vb, LD, 16 * kk, 8 * n);
#pragma unroll
        for (int mt = 0; mt < MT; mt++) mma_pair(&o[mt][n], pa[mt], bv);
      }
    }
  }
  cp_async_wait<0>();
  /* out = o / l, lse = (m + log2 l) / log2 e; l >= 1 where the row saw a
   * key (its max adds 2^0), else l = 0: out 0, lse -inf. */
#pragma unroll
  for (int r = 0; r < 2 * MT; r++) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    int i = row(r), mt = r / 2, hf = r % 2;
    if (i >= s.T) continue;
    float inv = row_inv(l[r]);
    bf16 *orow = out + row_off(s, b, i, s.NH, h);
#pragma unroll
    for (int n = 0; n < NO; n++) {
      int d = 8 * n + 2 * tq;
      float x0 = o[mt][n][2 * hf] * inv, x1 = o[mt][n][2 * hf + 1] * inv;
      if (s.HS % 2 == 0 && d < s.HS) {
        KERN_ALIGNED(orow + d, 4);
        *(uint32_t *)(orow + d) = pack_bf16(x0, x1);
      } else {
        if (d < s.HS) orow[d] = __float2bfloat16_rn(x0);
        if (d + 1 < s.HS) orow[d + 1] = __float2bfloat16_rn(x1);
      }
    }
    if (tq == 0) lse[stat_off(s, b, h, i)] = row_lse(m[r], l[r]);
  }
}

/* ---- backward -------------------------------------------------------------
 * Grid (T / BK, NH / HPB, B), NW warps; the block owns BK = 16 NW keys of kv
 * head g, warp w keys j0 + 16 w .. + 15, and walks the (query head, query
 * tile of BQ rows) pairs that see its keys, over HPB of the group's GRP
 * query heads (blockIdx.y HPB .. + HPB - 1), the next pair's Q, dO, lse and
 * D in flight while the current one is computed. Per pair, warp w: S^T =
 * K_w Q^T and dP^T = V_w dO^T (fp32 accumulators); P^T = 2^(S^T log2(e) /
 * sqrt(HS) - lse log2(e)), masked; dS^T = P^T (dP^T - D) / sqrt(HS); then,
 * with both as bf16 A fragments straight from the accumulators, dV_w +=
 * P^T dO and dK_w += dS^T Q into register accumulators held for the whole
 * walk. dS^T goes to shared memory once; after a block barrier the NW warps
 * split dQ = dS K (BQ x HD: m-tile w % (BQ / 16), a share of the dims) and
 * add it to the fp32 dq accumulator with atomics (other blocks add to the
 * same rows: BK keys per block is T / BK atomics per dq element). dK, dV
 * are written once: in bf16 when the block walks the whole group (HPB =
 * GRP: MHA, or GQA's grouped grid), else as fp32 partials, part[2 p] (dK)
 * and part[2 p + 1] (dV) of B T NKV HS floats each for the block's share p
 * of the group, which attn_dkv_sum_kernel adds in a fixed order (GQA's
 * default, HPB = 1: a block per query head as FlashAttention-2, whose
 * grouped grid leaves most SMs idle at few KV heads). BQ = 32 for head size 128 (fewer live
 * registers), 64 below. The default (mb_warps): NW = 8, 128 keys per block
 * as FlashAttention-2's backward at head size 128 (half the atomics and
 * half the Q, dO loads of NW = 4); ptxas (nvcc 13.0, sm_90): 246 registers
 * at head size 128 (247 with NW = 4), no spills, a 32-byte stack frame
 * (2026-11-25, with the dropout draws; with the blocks' offsets 245, and
 * 244 at head size 64, was 237); shared memory: K, V, twice Q and dO, dS^T
 * in bf16 and twice lse, D, 113 KB (NW = 8) or 74 KB (NW = 4) at head size
 * 128. kern_bench times NW = 4 too. */
template <int HD, int NW> struct mb_smem {
  static constexpr int BK = 16 * NW, BQ = HD > 64 ? 32 : 64, LD = HD + 8, LP = BQ + 8;
  static constexpr size_t bytes =
      sizeof(bf16) * ((size_t)(2 * BK + 4 * BQ) * LD + (size_t)BK * LP) + sizeof(float) * 4 * BQ;
};

constexpr int mb_warps = 8;

template <int HD, int NW>
__global__ void __launch_bounds__(32 * NW)
    flash_bwd_mma_kernel(bf16 *dk, bf16 *dv, float *dq_acc, const bf16 *q, const bf16 *k, const bf16 *v,
                         const bf16 *dout, const float *lse, const float *D, kern_attn_shape s, int hpb,
                         float *part) {
  typedef mb_smem<HD, NW> cfg;
  constexpr int BK = cfg::BK, BQ = cfg::BQ, LD = cfg::LD, LP = cfg::LP, NK = HD / 16, NQ = BQ / 8, NO = HD / 8,
                MT = BQ / 16, NG = NW / MT, NOQ = NO / NG;
  static_assert(NW % MT == 0 && NOQ % 2 == 0, "dQ: the warps split into m-tiles x pairs of 8-dim tiles");
  KERN_DYN_SMEM(unsigned char, mb_raw);
  bf16 *ks = (bf16 *)mb_raw, *vs = ks + BK * LD, *qs = vs + BK * LD, *dos = qs + 2 * BQ * LD;
  bf16 *dst = dos + 2 * BQ * LD;
  float *ls = (float *)(dst + BK * LP), *Ds = ls + 2 * BQ; /* ls, Ds, qs, dos: 2 buffers each */
  int b = blockIdx.z, h0 = blockIdx.y * hpb, grp = s.NH / s.NKV, g = h0 / grp, j0 = blockIdx.x * BK;
  int w = threadIdx.x / 32, lane = threadIdx.x % 32, gr = lane / 4, tq = lane % 4, tk = kern_attn_tk(&s);
  const float scale = rsqrtf((float)s.HS), scale2 = scale * LOG2E;
  /* The query tiles that see the block's keys: first_query(j0) ..
   * last_query(its last key); none when a block sees no query. */
  int ifirst = first_query(s, j0), ihi = last_query(s, min(j0 + BK, tk) - 1), it0 = ifirst / BQ * BQ;
  int ntiles = ihi >= ifirst ? ihi / BQ - it0 / BQ + 1 : 0, npairs = hpb * ntiles;
  /* Pair p: query head h0 + p / ntiles, query rows it0 + BQ (p % ntiles) .. */
  auto fetch = [&](int p, int bufi) {
    int h = h0 + p / ntiles, it = it0 + BQ * (p % ntiles);
    mma_load_rows<HD>(qs + bufi * BQ * LD, q, s, b, it, BQ, s.T, s.NH, h, threadIdx.x, blockDim.x);
    mma_load_rows<HD>(dos + bufi * BQ * LD, dout, s, b, it, BQ, s.T, s.NH, h, threadIdx.x, blockDim.x);
    if (threadIdx.x < BQ) {
      int i = it + threadIdx.x;
      ls[bufi * BQ + threadIdx.x] = i < s.T ? lse[stat_off(s, b, h, i)] * LOG2E : INFINITY;
      Ds[bufi * BQ + threadIdx.x] = i < s.T ? D[stat_off(s, b, h, i)] : 0.0f;
    }
  };
  mma_load_rows<HD>(ks, k, s, b, j0, BK, tk, s.NKV, g, threadIdx.x, blockDim.x);
  mma_load_rows<HD>(vs, v, s, b, j0, BK, tk, s.NKV, g, threadIdx.x, blockDim.x);
  if (npairs > 0) fetch(0, 0); /* (p / ntiles: none when the block sees no query) */
  cp_async_commit();
  float dka[NO][4] = {}, dva[NO][4] = {};
  int key[2] = {j0 + 16 * w + gr, j0 + 16 * w + gr + 8};
  for (int p = 0; p < npairs; p++) {
    int cur = p & 1, h = h0 + p / ntiles, it = it0 + BQ * (p % ntiles);
    const bf16 *qb = qs + cur * BQ * LD, *dob = dos + cur * BQ * LD;
    const float *lb = ls + cur * BQ, *Db = Ds + cur * BQ;
    cp_async_wait<0>();
    __syncthreads(); /* pair p landed; every warp is done with pair p - 1's buffers and dS^T */
    if (p + 1 < npairs) fetch(p + 1, cur ^ 1);
    cp_async_commit();
    float st[NQ][4] = {}, dpt[NQ][4] = {};
    /* Does any query of the tile see a key of the warp? Else P^T = dS^T = 0. */
    int jw = j0 + 16 * w, ilast = min(it + BQ, s.T) - 1;
    bool seen = jw < tk && jw <= kern_attn_key_hi(&s, ilast) && jw + 15 >= kern_attn_key_lo(&s, it);
#pragma unroll
    for (int kk = 0; kk < NK && seen; kk++) {
      uint32_t ka[4], va[4];
      mma_load_a(ka, ks, LD, 16 * w, 16 * kk);
      mma_load_a(va, vs, LD, 16 * w, 16 * kk);
#pragma unroll
      for (int n = 0; n < NQ; n += 2) {
        uint32_t bq[4], bo[4];
        mma_load_b_nk(bq, qb, LD, 16 * kk, 8 * n);
        mma_pair(&st[n], ka, bq);
        mma_load_b_nk(bo, dob, LD, 16 * kk, 8 * n);
        mma_pair(&dpt[n], va, bo);
      }
    }
    /* P^T and dS^T in place of S^T and dP^T. Dropout: the quad-shared
     * draws where rows start on a multiple of 4 (kern_attn_drop_aligned),
     * else one call per probability. A row that sees no key of the block
     * gets p = 0 whatever its lse (-inf where the block's own). */
    bool quad = s.drop.p > 0.0f && kern_attn_drop_aligned(&s);
#pragma unroll
    for (int n = 0; n < NQ; n++) {
      float mq[4] = {1.0f, 1.0f, 1.0f, 1.0f};
      if (quad) drop_quad(s, b, h, it + 8 * n + 2 * tq, key, gr & 3, mq);
#pragma unroll
      for (int e = 0; e < 4; e++) {
        int c = 8 * n + 2 * tq + e % 2, i = it + c, j = key[e / 2];
        bool ok = j < tk && i < s.T && kern_attn_pos_sees(i + s.q0, j + s.k0, s.window);
        float pv = ok ? exp2f(st[n][e] * scale2 - lb[c]) : 0.0f;
        float mk = !ok ? 1.0f : quad ? mq[e] : kern_attn_drop(&s, b, h, i, j);
        st[n][e] = pv * mk; /* dropout: dV from the dropped P, dP through the mask */
        dpt[n][e] = pv * (dpt[n][e] * mk - Db[c]) * scale;
      }
    }
    /* dV += P^T dO, dK += dS^T Q: dO and Q are (k = query, n = dim). */
#pragma unroll
    for (int kq = 0; kq < BQ / 16 && seen; kq++) {
      uint32_t pa[4], da[4];
      mma_acc_to_a(pa, st, kq);
      mma_acc_to_a(da, dpt, kq);
#pragma unroll
      for (int n = 0; n < NO; n += 2) {
        uint32_t bo[4], bq[4];
        mma_load_b_kn(bo, dob, LD, 16 * kq, 8 * n);
        mma_pair(&dva[n], pa, bo);
        mma_load_b_kn(bq, qb, LD, 16 * kq, 8 * n);
        mma_pair(&dka[n], da, bq);
      }
    }
    /* dS^T rows of this warp to shared memory, bf16 pairs. */
#pragma unroll
    for (int n = 0; n < NQ; n++) {
      bf16 *d0 = dst + (16 * w + gr) * LP + 8 * n + 2 * tq;
      *(uint32_t *)d0 = pack_bf16(dpt[n][0], dpt[n][1]);
      *(uint32_t *)(d0 + 8 * LP) = pack_bf16(dpt[n][2], dpt[n][3]);
    }
    __syncthreads(); /* every warp's dS^T rows are in */
    /* dQ rows it + 16 mt .., dims 8 NOQ ng ..: A = dS (query, key), read
     * transposed from dS^T (key, query); B = K (k = key, n = dim). */
    int mt = w % MT, ng = w / MT;
    float dqa[NOQ][4] = {};
#pragma unroll
    for (int kk = 0; kk < BK / 16; kk++) {
      uint32_t da[4];
      ldsm_x4_t(da, dst + (16 * kk + lane % 8 + 8 * (lane / 16)) * LP + 16 * mt + 8 * (lane / 8 % 2));
#pragma unroll
      for (int n = 0; n < NOQ; n += 2) {
        uint32_t bk[4];
        mma_load_b_kn(bk, ks, LD, 16 * kk, 8 * (NOQ * ng + n));
        mma_pair(&dqa[n], da, bk);
      }
    }
#pragma unroll
    for (int n = 0; n < NOQ; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        int i = it + 16 * mt + gr + 8 * (e / 2), d = 8 * (NOQ * ng + n) + 2 * tq + e % 2;
        if (i < s.T && d < s.HS) atomicAdd(dq_acc + row_off(s, b, i, s.NH, h) + d, dqa[n][e]);
      }
  }
  cp_async_wait<0>();
  long nkv = (long)s.B * tk * s.NKV * s.HS;
  float *pk = hpb < grp ? part + 2 * (h0 % grp / hpb) * nkv : NULL, *pv = pk ? pk + nkv : NULL;
#pragma unroll
  for (int r = 0; r < 2; r++) {
    int j = key[r];
    if (j >= tk) continue;
    long off = kv_off(s, b, j, g);
#pragma unroll
    for (int n = 0; n < NO; n++)
#pragma unroll
      for (int e = 0; e < 2; e++) {
        int d = 8 * n + 2 * tq + e;
        if (d >= s.HS) continue;
        if (pk) {
          pk[off + d] = dka[n][2 * r + e];
          pv[off + d] = dva[n][2 * r + e];
        } else {
          dk[off + d] = __float2bfloat16_rn(dka[n][2 * r + e]);
          dv[off + d] = __float2bfloat16_rn(dva[n][2 * r + e]);
        }
      }
  }
}

/* dK, dV (n elements each, bf16) = the sum of nparts fp32 partial pairs
 * part[2 p], part[2 p + 1] (flash_bwd_mma_kernel's), p = 0, 1, ... in order:
 * the same bits on every run. */
__global__ void attn_dkv_sum_kernel(bf16 *dk, bf16 *dv, const float *part, int nparts, long n) {
  long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float sk = 0.0f, sv = 0.0f;
  for (int p = 0; p < nparts; p++) {
    sk += part[2 * p * n + i];
    sv += part[(2 * p + 1) * n + i];
  }
  dk[i] = __float2bfloat16_rn(sk);
  dv[i] = __float2bfloat16_rn(sv);
}

#endif
