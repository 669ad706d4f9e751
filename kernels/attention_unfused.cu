/* kernels/attention_unfused.cu: CUDA attention's unfused baseline:
 * cuBLASLt batched GEMMs (batch = the query heads of one kv head, the kv
 * operand with stride 0), a masked softmax kernel, GEMMs; the flash
 * kernels are kernels/attention.cu. */
#include <stdio.h>
#include "kernels/attention.h"
#include "kernels/attention_int.cuh"
#include "kernels/kern_cuda.cuh"
#include "kernels/matmul.h"

/* att row (b, h, i) = masked softmax of the scores row; one warp per row. */
__global__ void masked_softmax_kernel(bf16 *att, const float *scores, kern_attn_shape s) {
  long r = (long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= (long)s.B * s.NH * s.T) return;
  int i = (int)(r % s.T), lane = threadIdx.x % 32, lo = kern_attn_lo(i, s.window);
  const float *x = scores + r * s.T;
  float m = -INFINITY, sum = 0.0f;
  for (int j = lo + lane; j <= i; j += 32) m = fmaxf(m, x[j]);
  m = warp_max(m);
  for (int j = lo + lane; j <= i; j += 32) sum += __expf(x[j] - m);
  float inv = 1.0f / warp_sum(sum);
  for (int j = lane; j < s.T; j += 32)
    att[r * s.T + j] = __float2bfloat16_rn((j >= lo && j <= i) ? __expf(x[j] - m) * inv : 0.0f);
}

/* dst = att with dropout (kern_attn_drop) on each probability; one thread
 * per four consecutive keys of a row of (B, NH, T, T) (one Philox call
 * when the row starts on a multiple of 4, T % 4 == 0; at most two). */
__global__ void attn_dropout_kernel(bf16 *dst, const bf16 *att, kern_attn_shape s) {
  int quads = (s.T + 3) / 4;
  long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= (long)s.B * s.NH * s.T * quads) return;
  long r = t / quads;
  int j0 = 4 * (int)(t % quads), i = (int)(r % s.T), h = (int)(r / s.T % s.NH), b = (int)(r / s.T / s.NH);
  kern_dropout_block blk = {-1, {0}};
  for (int j = j0; j < j0 + 4 && j < s.T; j++)
    st(dst + r * s.T + j, ld(att + r * s.T + j) * kern_attn_drop_block(&s, b, h, i, j, &blk));
}

/* datt = att * (dp' - rowsum(att * dp')), dp' = dp through the dropout
 * mask (dp = dout v^T in scores). One warp per row. */
__global__ void softmax_bwd_kernel(bf16 *datt, const bf16 *att, const float *dp,
                                   kern_attn_shape s) {
  long r = (long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= (long)s.B * s.NH * s.T) return;
  int lane = threadIdx.x % 32, i = (int)(r % s.T), h = (int)(r / s.T % s.NH), b = (int)(r / s.T / s.NH);
  const bf16 *a = att + r * s.T;
  const float *x = dp + r * s.T;
  float sum = 0.0f;
  kern_dropout_block blk = {-1, {0}}; /* each lane walks four consecutive keys at a time: one Philox call each */
  for (int j0 = 4 * lane; j0 < s.T; j0 += 128)
    for (int j = j0; j < j0 + 4 && j < s.T; j++) sum += ld(a + j) * x[j] * kern_attn_drop_block(&s, b, h, i, j, &blk);
  sum = warp_sum(sum);
  blk.q = -1;
  for (int j0 = 4 * lane; j0 < s.T; j0 += 128)
    for (int j = j0; j < j0 + 4 && j < s.T; j++)
      st(datt + r * s.T + j, ld(a + j) * (x[j] * kern_attn_drop_block(&s, b, h, i, j, &blk) - sum));
}

/* One batched GEMM per (b, kv head) over the grp query heads of the group.
 * Row-major operands; x = query-side tensor (B, T, NH, HS) or a (B, NH, T, T)
 * matrix, y = kv-side (B, T, NKV, HS). */
typedef struct attn_gemm {
  int M, N, K, ta, tb, c_fp32;
  float alpha, beta;
} attn_gemm;

/* Element offsets and strides of the three operand kinds. */
typedef enum { OPD_Q, OPD_KV, OPD_TT } opd_kind;

static void opd(kern_attn_shape s, opd_kind kind, int b, int g, long *off, long *ld,
                long long *stride) {
  int grp = s.NH / s.NKV;
  if (kind == OPD_Q) { /* head g * grp, next head + HS */
    *off = ((long)b * s.T * s.NH + (long)g * grp) * s.HS, *ld = (long)s.NH * s.HS, *stride = s.HS;
  } else if (kind == OPD_KV) { /* shared by the group: stride 0 */
    *off = ((long)b * s.T * s.NKV + g) * s.HS, *ld = (long)s.NKV * s.HS, *stride = 0;
  } else {
    *off = ((long)b * s.NH + (long)g * grp) * s.T * s.T, *ld = s.T, *stride = (long long)s.T * s.T;
  }
}

static size_t esize(int fp32) { return fp32 ? 4 : 2; }

/* For each (b, g): C = alpha op(A) op(B) + beta C over the group's heads,
 * batched when `batched`, else head by head (for outputs shared by the
 * group: kv-side gradients, accumulated with beta = 1 after the first). */
static int attn_gemm_run(const kern_ctx *ctx, kern_attn_shape s, attn_gemm a, void *C,
                         opd_kind kc, const kern_bf16 *A, opd_kind ka, const kern_bf16 *B,
                         opd_kind kb, int batched, cudaStream_t stream) {
  int grp = s.NH / s.NKV, nb = batched ? grp : 1;
  for (int b = 0; b < s.B; b++)
    for (int g = 0; g < s.NKV; g++)
      for (int r = 0; r < grp; r += nb) {
        long oa, ob, oc, la, lb, lc;
        long long sa, sb, sc;
        opd(s, ka, b, g, &oa, &la, &sa);
        opd(s, kb, b, g, &ob, &lb, &sb);
        opd(s, kc, b, g, &oc, &lc, &sc);
        kern_gemm_desc d = {a.M, a.N, a.K, a.ta, a.tb, nb, a.c_fp32, la, lb, lc,
                            sa, sb, sc, a.alpha, (r > 0 && !batched) ? 1.0f : a.beta};
        const char *cp = (const char *)C + (oc + (long)r * sc) * esize(a.c_fp32);
        KERN_TRY(kern_gemm_cuda(ctx, (void *)cp, A + oa + r * sa, B + ob + r * sb, &d, stream));
      }
  return 0;
}

extern "C" int kern_attention_unfused_fwd_cuda(const kern_ctx *ctx, kern_bf16 *out,
                                               kern_bf16 *att, float *scores,
                                               const kern_bf16 *q, const kern_bf16 *k,
                                               const kern_bf16 *v, kern_attn_shape s,
                                               cudaStream_t stream) {
  KERN_TRY(attn_check(s, false));
  int T = s.T, HS = s.HS;
  long nrows = (long)s.B * s.NH * T;
  attn_gemm qk = {T, T, HS, 0, 1, 1, rsqrtf((float)HS), 0.0f}; /* scores = q k^T / sqrt(HS) */
  KERN_TRY(attn_gemm_run(ctx, s, qk, scores, OPD_TT, q, OPD_Q, k, OPD_KV, 1, stream));
  KERN_LAUNCH(kern_cdiv(nrows, 8), 256, 0, stream, masked_softmax_kernel)((bf16 *)att, scores, s);
  KERN_LAUNCH_TRY();
  const kern_bf16 *p = att;
  if (s.drop.p > 0.0f) { /* the dropped probabilities, in bf16 over the spent scores; att stays undropped */
    KERN_LAUNCH(kern_cdiv(nrows * ((T + 3) / 4), 256), 256, 0, stream, attn_dropout_kernel)((bf16 *)scores,
                                                                                           (const bf16 *)att, s);
    KERN_LAUNCH_TRY();
    p = (const kern_bf16 *)scores;
  }
  attn_gemm pv = {T, HS, T, 0, 0, 0, 1.0f, 0.0f}; /* out = p v */
  return attn_gemm_run(ctx, s, pv, out, OPD_Q, p, OPD_TT, v, OPD_KV, 1, stream);
}

extern "C" int kern_attention_unfused_bwd_cuda(const kern_ctx *ctx, kern_bf16 *dq,
                                               kern_bf16 *dk, kern_bf16 *dv, kern_bf16 *datt,
                                               float *scores, const kern_bf16 *dout,
                                               const kern_bf16 *q, const kern_bf16 *k,
                                               const kern_bf16 *v, const kern_bf16 *att,
                                               kern_attn_shape s, cudaStream_t stream) {
  KERN_TRY(attn_check(s, false));
  int T = s.T, HS = s.HS;
  long nrows = (long)s.B * s.NH * T;
  float scale = rsqrtf((float)HS);
  const kern_bf16 *p = att;
  if (s.drop.p > 0.0f) { /* the forward's dropped probabilities again, in datt until the softmax backward */
    KERN_LAUNCH(kern_cdiv(nrows * ((T + 3) / 4), 256), 256, 0, stream, attn_dropout_kernel)((bf16 *)datt,
                                                                                           (const bf16 *)att, s);
    KERN_LAUNCH_TRY();
    p = datt;
  }
  attn_gemm dvg = {T, HS, T, 1, 0, 0, 1.0f, 0.0f}; /* dv = sum_h p^T dout */
  KERN_TRY(attn_gemm_run(ctx, s, dvg, dv, OPD_KV, p, OPD_TT, dout, OPD_Q, 0, stream));
  attn_gemm dpg = {T, T, HS, 0, 1, 1, 1.0f, 0.0f}; /* dp = dout v^T */
  KERN_TRY(attn_gemm_run(ctx, s, dpg, scores, OPD_TT, dout, OPD_Q, v, OPD_KV, 1, stream));
  KERN_LAUNCH(kern_cdiv(nrows, 8), 256, 0, stream, softmax_bwd_kernel)((bf16 *)datt, (const bf16 *)att,
                                                              scores, s);
  KERN_LAUNCH_TRY();
  attn_gemm dqg = {T, HS, T, 0, 0, 0, scale, 0.0f}; /* dq = datt k / sqrt(HS) */
  KERN_TRY(attn_gemm_run(ctx, s, dqg, dq, OPD_Q, datt, OPD_TT, k, OPD_KV, 1, stream));
  attn_gemm dkg = {T, HS, T, 1, 0, 0, scale, 0.0f}; /* dk = sum_h datt^T q / sqrt(HS) */
  return attn_gemm_run(ctx, s, dkg, dk, OPD_KV, datt, OPD_TT, q, OPD_Q, 0, stream);
}
