/* kernels/attention_tc.cuh: the FlashAttention-1 kernels on tensor cores
 * through WMMA (see attention.cu's top comment), and the index helpers all
 * attention kernels share. Device code only, no launches: attention.cu
 * includes it for the GPU, and tests/kernels/test_attention_tc_emu.cc
 * runs the very same code on the CPU through tests/kernels/cuda_emu.h (an
 * emulation of the CUDA subset it uses), so its tiling, masking and online
 * softmax are checked in CI without a GPU. Needs, before it: bf16 (a
 * typedef of __nv_bfloat16), nvcuda::wmma, kernels/attention.h. */
#ifndef KERN_ATTENTION_TC_CUH
#define KERN_ATTENTION_TC_CUH

#define LOG2E 1.4426950408889634f

/* Offset of (b, t, head) in a (B, rows, H, HS) tensor: the query side (q,
 * out, dq, dout) has rows = T, the key side (k, v, dk, dv) rows = Tk. */
__device__ __forceinline__ long seq_off(kern_attn_shape s, int rows, int H, int b, int t, int head) {
  return (((long)b * rows + t) * H + head) * s.HS;
}

/* Offset of (b, t, head) in a query-side (B, T, H, HS) tensor. */
__device__ __forceinline__ long row_off(kern_attn_shape s, int b, int t, int H, int head) {
  return seq_off(s, s.T, H, b, t, head);
}

/* Offset of (b, t, head) in a key-side (B, Tk, NKV, HS) tensor. */
__device__ __forceinline__ long kv_off(kern_attn_shape s, int b, int t, int head) {
  return seq_off(s, kern_attn_tk(&s), s.NKV, b, t, head);
}

/* Offset of (b, head, t) in a (B, NH, T) row-statistics array (lse, D, m, l). */
__device__ __forceinline__ long stat_off(kern_attn_shape s, int b, int head, int t) {
  return ((long)b * s.NH + head) * s.T + t;
}

/* The query rows that see key row j: first_query .. last_query (none when
 * first > last; the query-side twins of kern_attn_key_lo, _hi). The sum
 * in 64 bits keeps a huge window from overflowing int. */
__device__ __forceinline__ int first_query(kern_attn_shape s, int j) {
  return max(0, s.k0 + j - s.q0);
}
__device__ __forceinline__ int last_query(kern_attn_shape s, int j) {
  long long i = s.window > 0 ? (long long)s.k0 + j + s.window - 1 - s.q0 : (long long)s.T - 1;
  return (int)(i < s.T - 1 ? i : s.T - 1);
}

/* A row's output scale 1 / l and its lse (m and l in base 2: lse = (m +
 * log2 l) / log2 e); a row that saw no key (l = 0) gets out 0, lse -inf. */
__device__ __forceinline__ float row_inv(float l) { return l > 0.0f ? 1.0f / l : 0.0f; }
__device__ __forceinline__ float row_lse(float m, float l) {
  return l > 0.0f ? (m + log2f(l)) / LOG2E : -INFINITY;
}

/* FA-1's running state in HBM, fp32: o (B, T, NH, HS) the unnormalised
 * output, m and l (B, NH, T), set to 0, -INF, 0 before the kernel (the
 * invariant of tc_tile with nothing seen). One block per (b, h) owns its
 * rows; within it, lane k of warp w alone reads and writes its elements of
 * the warp's 16 rows (tc_state_load, tc_state_save). */
typedef struct fa1_state {
  float *o, *m, *l;
} fa1_state;

/* ---- flash forward on tensor cores (WMMA, bf16 in, fp32 accumulate) --------
 * A block of 4 warps owns 64 query rows, 16 per warp; keys and values stream
 * through shared memory in tiles of 64. Per tile, warp w alone touches its
 * 16 rows of the score, probability and output tiles and of m, l: S = Q K^T
 * (WMMA, fp32) to shared memory; online softmax there, 2 lanes per row, 32
 * columns each (scale, mask, row max, base-2 exponentials, P in bf16); the
 * warp's output rows rescaled by 2^(m_old - m_new); O += P V (WMMA, the
 * fp32 accumulator loaded from and stored back to shared memory, since a
 * WMMA fragment's element-to-row map is not exposed). Only the K/V loads
 * need block barriers. Shared memory: Q, K, V, P in bf16, S and O in fp32,
 * about 113 KB for head size 128 (opt-in above 48 KB; sm_80 and later).
 * Used by the FA-1 loop order (one block per (b, h), the state in HBM
 * between key tiles); FA-2 runs attention_mma.cuh's kernels. */
#define TC_BR 64 /* query rows per block: 4 warps x 16 */
#define TC_BC 64 /* keys per tile */

template <int HD> struct tc_tiles {
  static constexpr int LQ = HD + 8;     /* bf16 row stride of Q, K, V (16-byte rows, fewer bank conflicts) */
  static constexpr int LP = TC_BC + 8;  /* bf16 row stride of P */
  static constexpr int LS = TC_BC + 4;  /* fp32 row stride of S */
  static constexpr int LO = HD + 4;     /* fp32 row stride of O */
  static constexpr size_t bytes = sizeof(bf16) * ((size_t)(TC_BR + 2 * TC_BC) * LQ + (size_t)TC_BR * LP) +
                                  sizeof(float) * ((size_t)TC_BR * (LS + LO) + 3 * TC_BR);
  bf16 *q, *k, *v, *p;
  float *s, *o, *m, *l, *corr;
  /* Carves the dynamic shared memory; every array starts on a 32-byte
   * boundary (WMMA's requirement), since each size above is a multiple of 32. */
  __device__ explicit tc_tiles(unsigned char *base) {
    q = (bf16 *)base;
    k = q + TC_BR * LQ;
    v = k + TC_BC * LQ;
    p = v + TC_BC * LQ;
    s = (float *)(p + TC_BR * LP);
    o = s + TC_BR * LS;
    m = o + TC_BR * LO;
    l = m + TC_BR;
    corr = l + TC_BR;
  }
};

/* Rows t0 .. t0 + n - 1 of one head of a (B, rows, H, HS) tensor into dst
 * (row stride ld), dims >= HS and rows >= `rows` zero, 8 bf16 per step
 * (16-byte copies when HS % 8 == 0), by threads tid = 0 .. nthreads - 1. */
template <int HD>
__device__ __forceinline__ void tc_load_rows(bf16 *dst, int ld, const bf16 *src, kern_attn_shape s, int b,
                                             int t0, int n, int rows, int H, int head, int tid, int nthreads) {
  constexpr int CH = HD / 8;
  bool vec = s.HS % 8 == 0;
  for (int idx = tid; idx < n * CH; idx += nthreads) {
    int r = idx / CH, c = idx % CH * 8, t = t0 + r;
    bf16 *d = dst + r * ld + c;
    const bf16 *from = src + seq_off(s, rows, H, b, t < rows ? t : 0, head) + c;
    if (vec && t < rows && c < s.HS) {
      KERN_ALIGNED(d, 16), KERN_ALIGNED(from, 16);
      *(uint4 *)d = *(const uint4 *)from;
    } else {
#pragma unroll
      for (int e = 0; e < 8; e++) d[e] = (t < rows && c + e < s.HS) ? from[e] : __float2bfloat16(0.0f);
    }
  }
}

/* acc += the sum over KSTEPS k-steps of A_k B_k (16 x 16 tiles, bf16): A_k
 * at a + a_step k (layout LA, row stride la), B_k at b + b_step k (layout
 * LB, row stride lb). */
template <int KSTEPS, class LA, class LB>
__device__ __forceinline__ void tc_mma(nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> &acc,
                                       const bf16 *a, int la, int a_step, const bf16 *b, int lb, int b_step) {
  namespace wm = nvcuda::wmma;
#pragma unroll
  for (int kk = 0; kk < KSTEPS; kk++) {
    wm::fragment<wm::matrix_a, 16, 16, 16, bf16, LA> fa;
    wm::fragment<wm::matrix_b, 16, 16, 16, bf16, LB> fb;
    wm::load_matrix_sync(fa, a + (long)a_step * kk, la);
    wm::load_matrix_sync(fb, b + (long)b_step * kk, lb);
    wm::mma_sync(acc, fa, fb, acc);
  }
}

/* One key tile (K, V in shared memory, keys j0 ..) for warp w's 16 query
 * rows i0 + 16 w ..: the invariant of fa_tile, kept in t.o, t.m, t.l. */
template <int HD>
__device__ __forceinline__ void tc_tile(const tc_tiles<HD> &t, kern_attn_shape s, int b, int h, int i0, int j0) {
  namespace wm = nvcuda::wmma;
  constexpr int LQ = tc_tiles<HD>::LQ, LP = tc_tiles<HD>::LP, LS = tc_tiles<HD>::LS, LO = tc_tiles<HD>::LO;
  int w = threadIdx.x / 32, lane = threadIdx.x % 32, r0 = 16 * w;
  /* S = Q K^T: K stored (key, dim) row-major is K^T column-major. */
#pragma unroll
  for (int n = 0; n < TC_BC / 16; n++) {
    wm::fragment<wm::accumulator, 16, 16, 16, float> c;
    wm::fill_fragment(c, 0.0f);
    tc_mma<HD / 16, wm::row_major, wm::col_major>(c, t.q + r0 * LQ, LQ, 16, t.k + 16 * n * LQ, LQ, 16);
    wm::store_matrix_sync(t.s + r0 * LS + 16 * n, c, LS, wm::mem_row_major);
  }
  __syncwarp();
  /* Online softmax: lanes 2 r' and 2 r' + 1 share row r = r0 + r'. */
  int r = r0 + lane / 2, c0 = lane % 2 * (TC_BC / 2), i = i0 + r, tk = kern_attn_tk(&s);
  float scale = rsqrtf((float)s.HS) * LOG2E, tmax = -INFINITY;
  float *srow = t.s + r * LS;
  for (int c = c0; c < c0 + TC_BC / 2; c++) {
    int j = j0 + c;
    float x = (i < s.T && j < tk && kern_attn_pos_sees(i + s.q0, j + s.k0, s.window)) ? srow[c] * scale : -INFINITY;
    srow[c] = x;
    tmax = fmaxf(tmax, x);
  }
  tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
  float mold = t.m[r], mnew = fmaxf(mold, tmax), corr = 1.0f, sum = 0.0f;
  bf16 *prow = t.p + r * LP;
  if (mnew == -INFINITY) { /* nothing visible yet: P = 0, state unchanged */
    for (int c = c0; c < c0 + TC_BC / 2; c++) prow[c] = __float2bfloat16(0.0f);
  } else {
    corr = exp2f(mold - mnew); /* 0 when mold = -INF (O, l are 0 then) */
    kern_dropout_block blk = {-1, {0}};
    for (int c = c0; c < c0 + TC_BC / 2; c++) {
      float p = exp2f(srow[c] - mnew);
      /* P V in bf16, l in fp32, as FlashAttention-2; dropout scales P V's terms only */
      prow[c] = __float2bfloat16_rn(p * kern_attn_drop_block(&s, b, h, i, j0 + c, &blk));
      sum += p;
    }
  }
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);
  __syncwarp(); /* both lanes of a row have read m[r] */
  if (lane % 2 == 0) t.m[r] = mnew, t.l[r] = t.l[r] * corr + sum, t.corr[r] = corr;
  __syncwarp();
  for (int idx = lane; idx < 16 * HD; idx += 32) {
    int rr = r0 + idx / HD;
    t.o[rr * LO + idx % HD] *= t.corr[rr];
  }
  __syncwarp();
  /* O += P V: V stored (key, dim) row-major. */
#pragma unroll
  for (int n = 0; n < HD / 16; n++) {
    wm::fragment<wm::accumulator, 16, 16, 16, float> c;
    wm::load_matrix_sync(c, t.o + r0 * LO + 16 * n, LO, wm::mem_row_major);
    tc_mma<TC_BC / 16, wm::row_major, wm::row_major>(c, t.p + r0 * LP, LP, 16, t.v + 16 * n, LQ, 16 * LQ);
    __syncwarp(); /* every lane has loaded this block of O: the fragment map is not ours to rely on */
    wm::store_matrix_sync(t.o + r0 * LO + 16 * n, c, LO, wm::mem_row_major);
  }
  __syncwarp();
}

/* Warp w's rows i0 + 16 w ..: out = O / l in bf16 and lse (rows < T; a
 * row that saw no key: 0 and -inf). */
template <int HD>
__device__ __forceinline__ void tc_store(const tc_tiles<HD> &t, bf16 *out, float *lse, kern_attn_shape s,
                                         int b, int h, int i0) {
  int r0 = 16 * (threadIdx.x / 32), lane = threadIdx.x % 32;
  __syncwarp();
  for (int idx = lane; idx < 16 * HD; idx += 32) {
    int rr = r0 + idx / HD, d = idx % HD, i = i0 + rr;
    if (i < s.T && d < s.HS)
      out[row_off(s, b, i, s.NH, h) + d] =
          __float2bfloat16_rn(t.l[rr] > 0.0f ? t.o[rr * tc_tiles<HD>::LO + d] / t.l[rr] : 0.0f);
  }
  int i = i0 + r0 + lane;
  if (lane < 16 && i < s.T) lse[stat_off(s, b, h, i)] = row_lse(t.m[r0 + lane], t.l[r0 + lane]);
}

/* Warp w's rows i0 + 16 w .. of the HBM state into shared memory (rows >= T:
 * the empty state); tc_state_save writes them back. Lane k handles the same
 * elements in both, so a lane reads back only what it wrote itself. */
template <int HD>
__device__ __forceinline__ void tc_state_load(const tc_tiles<HD> &t, fa1_state st, kern_attn_shape s, int b,
                                              int h, int i0) {
  int r0 = 16 * (threadIdx.x / 32), lane = threadIdx.x % 32;
  __syncwarp(); /* tc_store's lanes read every row's m and l: all done before they change */
  for (int idx = lane; idx < 16 * HD; idx += 32) {
    int rr = r0 + idx / HD, d = idx % HD, i = i0 + rr;
    t.o[rr * tc_tiles<HD>::LO + d] = (i < s.T && d < s.HS) ? st.o[row_off(s, b, i, s.NH, h) + d] : 0.0f;
  }
  int i = i0 + r0 + lane;
  if (lane < 16) {
    t.m[r0 + lane] = i < s.T ? st.m[stat_off(s, b, h, i)] : -INFINITY;
    t.l[r0 + lane] = i < s.T ? st.l[stat_off(s, b, h, i)] : 0.0f;
  }
  __syncwarp();
}

template <int HD>
__device__ __forceinline__ void tc_state_save(const tc_tiles<HD> &t, fa1_state st, kern_attn_shape s, int b,
                                              int h, int i0) {
  int r0 = 16 * (threadIdx.x / 32), lane = threadIdx.x % 32;
  for (int idx = lane; idx < 16 * HD; idx += 32) {
    int rr = r0 + idx / HD, d = idx % HD, i = i0 + rr;
    if (i < s.T && d < s.HS) st.o[row_off(s, b, i, s.NH, h) + d] = t.o[rr * tc_tiles<HD>::LO + d];
  }
  int i = i0 + r0 + lane;
  if (lane < 16 && i < s.T) st.m[stat_off(s, b, h, i)] = t.m[r0 + lane], st.l[stat_off(s, b, h, i)] = t.l[r0 + lane];
}

/* FA-1 loop order (Algorithm 1) on tensor cores: grid (1, NH, B), one block
 * of 128 threads per (b, h). Outer loop: key tiles j0 (K_j, V_j into shared
 * memory once). Inner loop: the query tiles i0 with a row that sees a key
 * of the tile, i.e. from the tile holding first_query(j0) (earlier rows
 * are all above the diagonal) to the one holding last_query(jlast); this
 * covers every (j0, i0) pair the FA-2 kernel visits, so every row meets
 * every key it sees. Per pair: Q_i and (O_i, m_i, l_i) from HBM, one
 * tc_tile step, the state back to HBM. Then out = O / l and lse (a row
 * that met no key keeps the state it started with: 0 and -inf). */
template <int HD>
__global__ void __launch_bounds__(128)
    flash1_fwd_tc_kernel(bf16 *out, float *lse, fa1_state st, const bf16 *q, const bf16 *k,
                         const bf16 *v, kern_attn_shape s) {
  KERN_DYN_SMEM(unsigned char, tc_smem);
  tc_tiles<HD> t(tc_smem);
  int b = blockIdx.z, h = blockIdx.y, g = h / (s.NH / s.NKV), w = threadIdx.x / 32, lane = threadIdx.x % 32;
  int tk = kern_attn_tk(&s);
  for (int j0 = 0; j0 < tk; j0 += TC_BC) {
    __syncthreads();
    tc_load_rows<HD>(t.k, tc_tiles<HD>::LQ, k, s, b, j0, TC_BC, tk, s.NKV, g, threadIdx.x, blockDim.x);
    tc_load_rows<HD>(t.v, tc_tiles<HD>::LQ, v, s, b, j0, TC_BC, tk, s.NKV, g, threadIdx.x, blockDim.x);
    __syncthreads();
    int ihi = last_query(s, min(j0 + TC_BC, tk) - 1);
    for (int i0 = first_query(s, j0) / TC_BR * TC_BR; i0 <= ihi; i0 += TC_BR) {
      tc_load_rows<HD>(t.q + 16 * w * tc_tiles<HD>::LQ, tc_tiles<HD>::LQ, q, s, b, i0 + 16 * w, 16, s.T, s.NH, h,
                       lane, 32);
      tc_state_load<HD>(t, st, s, b, h, i0);
      tc_tile<HD>(t, s, b, h, i0, j0);
      tc_state_save<HD>(t, st, s, b, h, i0);
    }
  }
  for (int i0 = 0; i0 < s.T; i0 += TC_BR) { /* each lane reads back its own writes */
    tc_state_load<HD>(t, st, s, b, h, i0);
    tc_store<HD>(t, out, lse, s, b, h, i0);
  }
}

/* ---- flash backward on tensor cores ------------------------------------------
 * A block of 4 warps owns 64 keys of one kv head, 16 per warp, and walks the
 * query heads of its group and the 64-row query tiles that see its keys.
 * Per query tile, warp w: S^T = K_w Q^T and dP^T = V_w dO^T (WMMA, fp32, to
 * shared memory); P^T = e^(S^T / sqrt(HS) - lse) and dS^T = P^T (dP^T - D)
 * / sqrt(HS) (masked, in bf16); dV_w += P^T dO and dK_w += dS^T Q with the
 * accumulators in WMMA fragments (registers) for the whole key tile. Then,
 * after a block barrier, warp w takes query rows 16 w .. of dQ = dS K (dS
 * read transposed from every warp's dS^T) and adds them to the fp32 dq
 * accumulator: atomics, or a plain read-modify-write when the block is the
 * only writer of its group's dq rows (FA-1: one block per (b, kv head)).
 * Shared memory: K, V, Q, dO, P^T, dS^T in bf16, S^T, dP^T and a dQ tile
 * in fp32, about 154 KB for head size 128 (fits sm_80's 163 KB). */
#define TB_BK 64 /* keys per block: 4 warps x 16 */
#define TB_BQ 64 /* query rows per tile */

template <int HD> struct tb_tiles {
  static constexpr int LQ = HD + 8, LP = TB_BQ + 8, LS = TB_BQ + 4, LO = HD + 4;
  static constexpr size_t bytes = sizeof(bf16) * ((size_t)(2 * TB_BK + 2 * TB_BQ) * LQ + 2 * (size_t)TB_BK * LP) +
                                  sizeof(float) * (2 * (size_t)TB_BK * LS + (size_t)TB_BQ * LO + 2 * TB_BQ);
  bf16 *k, *v, *q, *dout, *pt, *dst;
  float *st, *dpt, *dq, *lse, *D;
  __device__ explicit tb_tiles(unsigned char *base) { /* each size a multiple of 32 bytes */
    k = (bf16 *)base;
    v = k + TB_BK * LQ;
    q = v + TB_BK * LQ;
    dout = q + TB_BQ * LQ;
    pt = dout + TB_BQ * LQ;
    dst = pt + TB_BK * LP;
    st = (float *)(dst + TB_BK * LP);
    dpt = st + TB_BK * LS;
    dq = dpt + TB_BK * LS;
    lse = dq + TB_BQ * LO;
    D = lse + TB_BQ;
  }
};

/* One key tile j0 of kv head g: dk, dv (bf16) written once at the end. */
template <int HD>
__device__ __forceinline__ void tb_key_tile(const tb_tiles<HD> &t, bf16 *dk, bf16 *dv, float *dq_acc, const bf16 *q,
                                            const bf16 *k, const bf16 *v, const bf16 *dout, const float *lse,
                                            const float *D, kern_attn_shape s, int b, int g, int j0, bool sole_dq) {
  namespace wm = nvcuda::wmma;
  constexpr int LQ = tb_tiles<HD>::LQ, LP = tb_tiles<HD>::LP, LS = tb_tiles<HD>::LS, LO = tb_tiles<HD>::LO;
  int w = threadIdx.x / 32, lane = threadIdx.x % 32, r0 = 16 * w, grp = s.NH / s.NKV;
  float scale = rsqrtf((float)s.HS);
  wm::fragment<wm::accumulator, 16, 16, 16, float> dkf[HD / 16], dvf[HD / 16];
#pragma unroll
  for (int n = 0; n < HD / 16; n++) wm::fill_fragment(dkf[n], 0.0f), wm::fill_fragment(dvf[n], 0.0f);
  int tk = kern_attn_tk(&s);
  __syncthreads(); /* the last key tile's readers of K are done */
  tc_load_rows<HD>(t.k, LQ, k, s, b, j0, TB_BK, tk, s.NKV, g, threadIdx.x, blockDim.x);
  tc_load_rows<HD>(t.v, LQ, v, s, b, j0, TB_BK, tk, s.NKV, g, threadIdx.x, blockDim.x);
  int ihi = last_query(s, min(j0 + TB_BK, tk) - 1);
  for (int r = 0; r < grp; r++) {
    int h = g * grp + r;
    for (int it = first_query(s, j0) / TB_BQ * TB_BQ; it <= ihi; it += TB_BQ) {
      __syncthreads(); /* every warp is done with the last Q, dO, dS^T */
      tc_load_rows<HD>(t.q, LQ, q, s, b, it, TB_BQ, s.T, s.NH, h, threadIdx.x, blockDim.x);
      tc_load_rows<HD>(t.dout, LQ, dout, s, b, it, TB_BQ, s.T, s.NH, h, threadIdx.x, blockDim.x);
      if (threadIdx.x < TB_BQ) {
        int i = it + threadIdx.x;
        t.lse[threadIdx.x] = i < s.T ? lse[stat_off(s, b, h, i)] : INFINITY;
        t.D[threadIdx.x] = i < s.T ? D[stat_off(s, b, h, i)] : 0.0f;
      }
      __syncthreads();
      /* S^T and dP^T for the warp's 16 keys: Q and dO stored (query, dim)
       * row-major are Q^T and dO^T column-major. */
#pragma unroll
      for (int n = 0; n < TB_BQ / 16; n++) {
        wm::fragment<wm::accumulator, 16, 16, 16, float> c;
        wm::fill_fragment(c, 0.0f);
        tc_mma<HD / 16, wm::row_major, wm::col_major>(c, t.k + r0 * LQ, LQ, 16, t.q + 16 * n * LQ, LQ, 16);
        wm::store_matrix_sync(t.st + r0 * LS + 16 * n, c, LS, wm::mem_row_major);
        wm::fill_fragment(c, 0.0f);
        tc_mma<HD / 16, wm::row_major, wm::col_major>(c, t.v + r0 * LQ, LQ, 16, t.dout + 16 * n * LQ, LQ, 16);
        wm::store_matrix_sync(t.dpt + r0 * LS + 16 * n, c, LS, wm::mem_row_major);
      }
      __syncwarp();
      /* Each lane takes four consecutive keys of one query at a time: one
       * Philox call draws their dropout (kern_attn_drop_block). */
      for (int gi = lane; gi < 4 * TB_BQ; gi += 32) {
        int c = gi % TB_BQ, i = it + c;
        kern_dropout_block blk = {-1, {0}};
        for (int kq = 0; kq < 4; kq++) {
          int rr = r0 + 4 * (gi / TB_BQ) + kq, j = j0 + rr;
          bool ok = j < tk && i < s.T && kern_attn_pos_sees(s.q0 - s.k0, j - i, s.window);
          float p = ok ? expf(t.st[rr * LS + c] * scale - t.lse[c]) : 0.0f;
          float mk = ok ? kern_attn_drop_block(&s, b, h, i, j, &blk) : 1.0f;
          float ds = p * (t.dpt[rr * LS + c] * mk - t.D[c]) * scale;
          t.pt[rr * LP + c] = __float2bfloat16_rn(p * mk); /* dV from the dropped probabilities */
          t.dst[rr * LP + c] = __float2bfloat16_rn(ds);
        }
      }
      __syncwarp();
      /* dV += P^T dO, dK += dS^T Q: dO and Q row-major are the B operands. */
#pragma unroll
      for (int n = 0; n < HD / 16; n++) {
        tc_mma<TB_BQ / 16, wm::row_major, wm::row_major>(dvf[n], t.pt + r0 * LP, LP, 16, t.dout + 16 * n, LQ, 16 * LQ);
        tc_mma<TB_BQ / 16, wm::row_major, wm::row_major>(dkf[n], t.dst + r0 * LP, LP, 16, t.q + 16 * n, LQ, 16 * LQ);
      }
      __syncthreads(); /* every warp's dS^T rows are written */
      /* dQ rows 16 w .. = dS K: dS = (dS^T)^T, read column-major. */
#pragma unroll
      for (int n = 0; n < HD / 16; n++) {
        wm::fragment<wm::accumulator, 16, 16, 16, float> c;
        wm::fill_fragment(c, 0.0f);
        tc_mma<TB_BK / 16, wm::col_major, wm::row_major>(c, t.dst + r0, LP, 16 * LP, t.k + 16 * n, LQ, 16 * LQ);
        wm::store_matrix_sync(t.dq + r0 * LO + 16 * n, c, LO, wm::mem_row_major);
      }
      __syncwarp();
      for (int e = lane; e < 16 * HD; e += 32) {
        int rr = r0 + e / HD, d = e % HD, i = it + rr;
        if (i >= s.T || d >= s.HS) continue;
        float *to = dq_acc + row_off(s, b, i, s.NH, h) + d, x = t.dq[rr * LO + d];
        if (sole_dq)
          *to += x;
        else
          atomicAdd(to, x);
      }
    }
  }
  /* dK, dV of the warp's keys, through its rows of the dQ tile. */
  for (int which = 0; which < 2; which++) {
    bf16 *to = which ? dv : dk;
    __syncwarp(); /* the warp's last reads of these rows are done */
#pragma unroll
    for (int n = 0; n < HD / 16; n++)
      wm::store_matrix_sync(t.dq + r0 * LO + 16 * n, which ? dvf[n] : dkf[n], LO, wm::mem_row_major);
    __syncwarp();
    for (int e = lane; e < 16 * HD; e += 32) {
      int rr = r0 + e / HD, d = e % HD, j = j0 + rr;
      if (j < tk && d < s.HS) to[kv_off(s, b, j, g) + d] = __float2bfloat16_rn(t.dq[rr * LO + d]);
    }
  }
}

/* Grid (nx, NKV, B), 128 threads; block x takes key tiles x, x + nx, ... of
 * kv head blockIdx.y. FA-1 (Algorithm 4) runs nx = 1: one block per (b, kv
 * head) walking its key tiles in order, the sole writer of its group's dq
 * rows. (FA-2 runs attention_mma.cuh's backward.) */
template <int HD>
__global__ void __launch_bounds__(128)
    flash_bwd_tc_kernel(bf16 *dk, bf16 *dv, float *dq_acc, const bf16 *q, const bf16 *k, const bf16 *v,
                        const bf16 *dout, const float *lse, const float *D, kern_attn_shape s) {
  KERN_DYN_SMEM(unsigned char, tc_smem);
  tb_tiles<HD> t(tc_smem);
  for (int j0 = blockIdx.x * TB_BK; j0 < kern_attn_tk(&s); j0 += gridDim.x * TB_BK)
    tb_key_tile<HD>(t, dk, dv, dq_acc, q, k, v, dout, lse, D, s, blockIdx.z, blockIdx.y, j0, gridDim.x == 1);
}

/* Calls launch(std::integral_constant<int, HD>{}) with HD, the head size
 * padded to the tensor-core tiles, = 32, 64, 128 for HS <= 32, 64, 128: the
 * one place that maps a head size to a kernel instantiation. */
template <class F> static inline void with_hd(int HS, F launch) {
  if (HS <= 32)
    launch(std::integral_constant<int, 32>{});
  else if (HS <= 64)
    launch(std::integral_constant<int, 64>{});
  else
    launch(std::integral_constant<int, 128>{});
}

#endif
