/* kernels/attention.h: causal self-attention with an optional sliding
 * window and grouped-query attention (GQA), forward and backward.
 *
 * Layouts (row-major), Tk = shape.Tk (0: T):
 *   q, out, dq, dout  (B, T, NH, HS)   i.e. (B, T, C) with C = NH * HS
 *   k, v, dk, dv      (B, Tk, NKV, HS) NH % NKV == 0; query head h reads
 *                                      kv head h / (NH / NKV)
 *   lse               (B, NH, T) fp32: log-sum-exp of the scaled scores of
 *                                      each query row, saved for backward
 *   att               (B, NH, T, Tk):  probabilities (unfused path only)
 * Mask: query row i sits at position p = q0 + i of the sequence, key row j
 * at k0 + j (q0 = k0 = 0, Tk = T: the whole sequence); the query attends
 * the key iff lo(p) <= k0 + j <= p, lo(p) = max(0, p-window+1) for window
 * > 0 and 0 for window 0 (full causal). A window longer than the sequence
 * equals full causal.
 * Scores are scaled by 1/sqrt(HS).
 *
 * Blocks (context parallelism: a rank's queries against another block of
 * keys, Megatron-Core's all-gather and p2p ring attention): with q0, k0,
 * Tk the call is one block of the sequence's attention. A query row that
 * sees no key of the block gets out = 0 and lse = -INFINITY exactly, and
 * adds nothing in the backward, so blocks merge by lse: lse = log sum_b
 * e^lse_b, out = sum_b e^(lse_b - lse) out_b. The flash backwards take the
 * lse and out they are given: with the merged ones, each block's dq, dk,
 * dv are exactly its share of the whole sequence's (summed by the caller).
 * Dropout draws probability (b, h, i, j) at (b, h, q0 + i, k0 + j) of a
 * sequence of Tseq (0: T), so every split draws the whole sequence's masks.
 * Who takes blocks: the flash references; the unfused references (whose
 * backward is the block's own softmax's: its att is normalised within the
 * block, so it cannot give a share of merged blocks); every flash CUDA
 * kernel: FA-2 (each forward tile, both backward block sizes, GQA's
 * per-head and grouped grids), the _simt pair and FA-1. The cuBLASLt
 * unfused pair refuses Tk != T, q0 != 0 or k0 != 0 (an error, with a
 * message): its T x T probabilities are a baseline, not a CP path.
 *
 * Three algorithms: "flash" (FlashAttention-2 style: key tiles, online
 * softmax, O(T HS) memory, recomputation in the backward; blocks over
 * query tiles in the forward, key tiles in the backward), "flash1"
 * (FlashAttention-1, Dao et al. 2022 Algorithms 1 and 4: the same math on
 * one block per (batch, head) in the forward, key tiles outer, query tiles
 * inner, the running output and softmax statistics in fp32 HBM scratch;
 * one block per (batch, kv head) in the backward; CUDA only, its reference
 * is flash's) and "unfused" (GEMM, masked softmax, GEMM, materialising the
 * T x T probabilities).
 *
 * Dropout on the probabilities (shape.drop, p > 0; kernels/dropout.h):
 * out_i = sum_j p_ij m_ij v_j, m_ij 0 or 1 / (1 - p) drawn from Philox at
 * probability (b, h, i, j)'s index, as FlashAttention's dropout: lse stays
 * that of the undropped softmax, every kind regenerates the mask in its
 * backward (nothing stored), and the backward's D = rowsum(dout * out)
 * holds as before (sum_j p_ij dp_ij, with dp_ij = m_ij dout_i . v_j). */
#ifndef KERN_ATTENTION_H
#define KERN_ATTENTION_H
#include "kernels/dropout.h"
#include "kernels/kern_common.h"
#ifdef __cplusplus
extern "C" {
#endif

/* The fields after drop are a block's (above); their zero value is the
 * whole sequence, so an initialiser that stops at drop keeps its meaning. */
typedef struct kern_attn_shape {
  int B, T, NH, NKV, HS;
  int window; /* 0: full causal */
  kern_dropout drop; /* on the probabilities; p 0 (the zero value): none */
  int Tk;   /* key (and value) rows per sequence; 0: T */
  int q0;   /* position in the sequence of query row 0 */
  int k0;   /* position in the sequence of key row 0 */
  int Tseq; /* the whole sequence's length, for the dropout indices; 0: T */
} kern_attn_shape;

/* The block fields of the whole sequence (Tk, q0, k0, Tseq all 0), for a
 * positional initialiser that lists every field, as -Wextra asks of C:
 * {B, T, NH, NKV, HS, window, KERN_NO_DROPOUT, KERN_ATTN_WHOLE}. */
#define KERN_ATTN_WHOLE 0, 0, 0, 0

/* Key rows per sequence, and the sequence length dropout numbers by. */
static inline KERN_HD int kern_attn_tk(const kern_attn_shape *s) { return s->Tk > 0 ? s->Tk : s->T; }
static inline KERN_HD int kern_attn_tseq(const kern_attn_shape *s) { return s->Tseq > 0 ? s->Tseq : s->T; }

/* First position visible from position p. */
static inline KERN_HD int kern_attn_lo(int p, int window) {
  return (window > 0 && p - window + 1 > 0) ? p - window + 1 : 0;
}

/* Does the query at position p see the key at position pk (both >= 0)?
 * pk >= lo(p) iff p - pk < window, as pk >= 0: only p - pk matters, so a
 * kernel may pass any pair with that difference (q0 - k0 and j - i, or q0
 * + i and k0 + j: whichever its registers like best). */
static inline KERN_HD int kern_attn_pos_sees(int p, int pk, int window) {
  return pk <= p && (window <= 0 || p - pk < window);
}

/* Does query row i see key row j (0 <= i < T, 0 <= j < Tk)? */
static inline KERN_HD int kern_attn_sees(const kern_attn_shape *s, int i, int j) {
  return kern_attn_pos_sees(s->q0 + i, s->k0 + j, s->window);
}

/* The key rows query row i sees: kern_attn_key_lo .. kern_attn_key_hi,
 * none when lo > hi (both are nondecreasing in i). */
static inline KERN_HD int kern_attn_key_lo(const kern_attn_shape *s, int i) {
  int j = kern_attn_lo(s->q0 + i, s->window) - s->k0;
  return j > 0 ? j : 0;
}
static inline KERN_HD int kern_attn_key_hi(const kern_attn_shape *s, int i) {
  int j = s->q0 + i - s->k0, last = kern_attn_tk(s) - 1;
  return j < last ? j : last;
}

/* Dropout's index of probability (b, h, i, j): at positions (q0 + i, k0 +
 * j), written as row0 + i Tseq + j, row0 the block's (b, h, 0, 0), which a
 * kernel keeps once (in 64-bit integers: the same value either way). */
static inline KERN_HD long long kern_attn_drop_index(const kern_attn_shape *s, int b, int h, int i, int j) {
  long long T = kern_attn_tseq(s), row0 = kern_dropout_attn_index(&s->drop, b, h, s->q0, s->k0, (int)T);
  return row0 + (i * T + j);
}

/* The dropout multiplier of probability (b, h, i, j): 1 without dropout. */
static inline KERN_HD float kern_attn_drop(const kern_attn_shape *s, int b, int h, int i, int j) {
  return s->drop.p > 0.0f ? kern_dropout_mult(&s->drop, kern_attn_drop_index(s, b, h, i, j)) : 1.0f;
}

/* kern_attn_drop with the last Philox call's words kept in blk (q < 0:
 * none yet): a thread walking consecutive keys of a row pays one call per
 * four of them (kernels/dropout.h, kern_dropout_block). */
static inline KERN_HD float kern_attn_drop_block(const kern_attn_shape *s, int b, int h, int i, int j,
                                                 kern_dropout_block *blk) {
  return s->drop.p > 0.0f ? kern_dropout_mult_block(&s->drop, kern_attn_drop_index(s, b, h, i, j), blk) : 1.0f;
}

/* Do four consecutive keys 4 c .. 4 c + 3 of every row share one Philox
 * call? (Rows start on a multiple of 4 of the index.) */
static inline KERN_HD int kern_attn_drop_aligned(const kern_attn_shape *s) {
  return kern_attn_tseq(s) % 4 == 0 && s->k0 % 4 == 0;
}

/* 0 when the shape is usable (dropout p in [0, 1); Tk, q0, k0, Tseq not
 * negative; with dropout, Tseq >= q0 + T and k0 + Tk), else -1 (prints
 * nothing). */
int kern_attn_shape_check(kern_attn_shape s);

/* Flash reference: O(T HS) extra memory per call in the forward, none in
 * the backward (dq, dk, dv are overwritten). */
void kern_attention_fwd_ref(float *out, float *lse, const float *q, const float *k,
                            const float *v, kern_attn_shape s);
void kern_attention_bwd_ref(float *dq, float *dk, float *dv, const float *dout, const float *q,
                            const float *k, const float *v, const float *out,
                            const float *lse, kern_attn_shape s);

/* Unfused reference: att (B, NH, T, Tk) written by the forward and read by
 * the backward; the backward uses one Tk-float row of scratch. */
void kern_attention_unfused_fwd_ref(float *out, float *att, const float *q, const float *k,
                                    const float *v, kern_attn_shape s);
void kern_attention_unfused_bwd_ref(float *dq, float *dk, float *dv, const float *dout,
                                    const float *q, const float *k, const float *v,
                                    const float *att, kern_attn_shape s);

/* The FA-2 forward's tiles, {m-tiles per warp, keys per tile}, that
 * kern_attention_fwd_tile_cuda takes: the one list the launcher, the
 * bench and the tests all read. */
#define KERN_ATTN_FWD_TILES {{1, 64}, {2, 32}, {2, 64}}

#ifdef KERN_HAVE_CUDA
/* Flash kernels. HS <= 128 and HS % 4 == 0. They run on tensor cores
 * (mma.sync, bf16 x bf16 -> fp32, accumulators in registers; sm_80 and
 * later); the _simt ones are the same algorithm on CUDA cores (fp32 FMA),
 * kept to measure what the tensor cores gain. */
int kern_attention_fwd_cuda(kern_bf16 *out, float *lse, const kern_bf16 *q, const kern_bf16 *k,
                            const kern_bf16 *v, kern_attn_shape s, cudaStream_t stream);
/* The flash forward with another tile than kern_attention_fwd_cuda's: mt
 * 16-row m-tiles per warp and bc keys per tile, one of
 * KERN_ATTN_FWD_TILES (above); for the benchmark, which times each. */
int kern_attention_fwd_tile_cuda(int mt, int bc, kern_bf16 *out, float *lse, const kern_bf16 *q,
                                 const kern_bf16 *k, const kern_bf16 *v, kern_attn_shape s,
                                 cudaStream_t stream);
int kern_attention_fwd_simt_cuda(kern_bf16 *out, float *lse, const kern_bf16 *q, const kern_bf16 *k,
                                 const kern_bf16 *v, kern_attn_shape s, cudaStream_t stream);
/* fp32 device scratch the backward needs: rowsum(dout * out) (B, NH, T),
 * the dq accumulator (B, T, NH, HS) and, with GQA (NH > NKV), each query
 * head's dK and dV partials, twice (B, Tk, NH, HS): the backward's grid
 * runs over query heads (a block per key tile and query head, as
 * FlashAttention-2's), and a second kernel adds a group's partials in a
 * fixed order. */
size_t kern_attention_bwd_scratch_bytes(kern_attn_shape s);
int kern_attention_bwd_cuda(kern_bf16 *dq, kern_bf16 *dk, kern_bf16 *dv, float *scratch,
                            const kern_bf16 *dout, const kern_bf16 *q, const kern_bf16 *k,
                            const kern_bf16 *v, const kern_bf16 *out, const float *lse,
                            kern_attn_shape s, cudaStream_t stream);
/* The flash backward with nw warps (16 nw keys) per block, 4 or 8 (the
 * default is kern_attention_bwd_cuda's), and with grouped != 0 GQA's
 * grouped grid: a block per key tile and KV head walks all of the group's
 * query heads and writes dK, dV itself (no partials; fewer, longer
 * blocks); for the benchmark and the tests. */
int kern_attention_bwd_tile_cuda(int nw, int grouped, kern_bf16 *dq, kern_bf16 *dk, kern_bf16 *dv,
                                 float *scratch, const kern_bf16 *dout, const kern_bf16 *q, const kern_bf16 *k,
                                 const kern_bf16 *v, const kern_bf16 *out, const float *lse, kern_attn_shape s,
                                 cudaStream_t stream);
/* Thread blocks of kern_attention_fwd_cuda (bwd 0) or kern_attention_bwd_cuda
 * (bwd 1) resident on one SM at head size hs
 * (cudaOccupancyMaxActiveBlocksPerMultiprocessor: registers, shared
 * memory, threads), for the cost model's attention waves (calibrate
 * records it, hw.h attn_slots_q/k). */
int kern_attention_resident_blocks_cuda(int bwd, int hs, int *blocks);
int kern_attention_bwd_simt_cuda(kern_bf16 *dq, kern_bf16 *dk, kern_bf16 *dv, float *scratch,
                                 const kern_bf16 *dout, const kern_bf16 *q, const kern_bf16 *k,
                                 const kern_bf16 *v, const kern_bf16 *out, const float *lse,
                                 kern_attn_shape s, cudaStream_t stream);

/* FlashAttention-1 kernels: same inputs, outputs, mask, GQA and saved lse
 * as the flash kernels above (so either backward accepts either forward's
 * out and lse); HS <= 128 and HS % 4 == 0. The forward's fp32 device
 * scratch holds the running output (B, T, NH, HS) and the row max and row
 * sum (B, NH, T) each; the forward initialises it itself. The backward's
 * scratch is the flash backward's (D and the dq accumulator). */
size_t kern_attention_fwd_v1_scratch_bytes(kern_attn_shape s);
int kern_attention_fwd_v1_cuda(kern_bf16 *out, float *lse, float *scratch, const kern_bf16 *q,
                               const kern_bf16 *k, const kern_bf16 *v, kern_attn_shape s,
                               cudaStream_t stream);
size_t kern_attention_bwd_v1_scratch_bytes(kern_attn_shape s);
int kern_attention_bwd_v1_cuda(kern_bf16 *dq, kern_bf16 *dk, kern_bf16 *dv, float *scratch,
                               const kern_bf16 *dout, const kern_bf16 *q, const kern_bf16 *k,
                               const kern_bf16 *v, const kern_bf16 *out, const float *lse,
                               kern_attn_shape s, cudaStream_t stream);

/* Unfused baseline through cuBLASLt. scores: fp32 scratch (B, NH, T, T);
 * att: bf16 probabilities (B, NH, T, T), kept for the backward. The
 * backward reuses scores as scratch and needs datt, bf16 (B, NH, T, T). */
int kern_attention_unfused_fwd_cuda(const kern_ctx *ctx, kern_bf16 *out, kern_bf16 *att,
                                    float *scores, const kern_bf16 *q, const kern_bf16 *k,
                                    const kern_bf16 *v, kern_attn_shape s, cudaStream_t stream);
int kern_attention_unfused_bwd_cuda(const kern_ctx *ctx, kern_bf16 *dq, kern_bf16 *dk,
                                    kern_bf16 *dv, kern_bf16 *datt, float *scores,
                                    const kern_bf16 *dout, const kern_bf16 *q,
                                    const kern_bf16 *k, const kern_bf16 *v,
                                    const kern_bf16 *att, kern_attn_shape s,
                                    cudaStream_t stream);
#endif

#ifdef __cplusplus
}
#endif
#endif
