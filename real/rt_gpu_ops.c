/* real/rt_gpu_ops.c: the GPU runtime's kernel launchers (rt.h): each op
 * of the op program's compute runs the kernels/ CUDA launcher on the
 * current compute stream with its cuBLASLt context (rt_gpu_int.h's CS, KC),
 * attention with the runtime's scratch; and the runtime's op table. */
#include "real/rt_gpu_int.h"

#include "kernels/attnmerge.h"
#include "kernels/moe.h"
#include "kernels/crossentropy.h"
#include "kernels/dropout.h"
#include "kernels/embedding.h"
#include "kernels/fp8.h"
#include "kernels/gelu.h"
#include "kernels/layernorm.h"
#include "kernels/matmul.h"
#include "kernels/rope.h"

#include <stdio.h>

/* ---- kernels: kernels/ launchers on the compute stream -------------------------------- */

static int g_embedding_fwd(rt_t *rt, void *out, const int *tokens, const void *wte, const void *wpe, int v0,
                           int V, int B, int T, int C)
{
    return kern_embedding_fwd_cuda(out, tokens, wte, wpe, v0, V, B, T, C, CS(rt));
}

static int g_embedding_bwd(rt_t *rt, float *dwte, float *dwpe, const void *dout, const int *tokens, int v0,
                           int V, int B, int T, int C)
{
    return kern_embedding_bwd_cuda(dwte, dwpe, dout, tokens, v0, V, B, T, C, CS(rt));
}

static int g_layernorm_fwd(rt_t *rt, void *residual, void *out, float *mean, float *rstd, const void *inp,
                           const void *skip, const kern_dropout *drop, uint8_t *mask, const void *w, const void *b,
                           int N, int C)
{
    return kern_layernorm_fwd_cuda(residual, out, mean, rstd, inp, skip, drop, mask, w, b, N, C, CS(rt));
}

static int g_layernorm_bwd(rt_t *rt, void *dres, float *dw, float *db, const void *dout, const void *xln,
                           const void *w, const float *mean, const float *rstd, int N, int C)
{
    return kern_layernorm_bwd_cuda(dres, dw, db, dout, xln, w, mean, rstd, N, C, CS(rt));
}

static int g_rmsnorm_fwd(rt_t *rt, void *residual, void *out, float *rstd, const void *inp, const void *skip,
                         const kern_dropout *drop, uint8_t *mask, const void *w, int N, int C)
{
    return kern_rmsnorm_fwd_cuda(residual, out, rstd, inp, skip, drop, mask, w, N, C, CS(rt));
}

static int g_rmsnorm_bwd(rt_t *rt, void *dres, float *dw, const void *dout, const void *xln, const void *w,
                         const float *rstd, int N, int C)
{
    return kern_rmsnorm_bwd_cuda(dres, dw, dout, xln, w, rstd, N, C, CS(rt));
}

static int g_linear_fwd(rt_t *rt, void *out, const void *inp, const void *weight, const void *bias, int N, int C,
                        int OC)
{
    return kern_matmul_fwd_cuda(KC(rt), out, NULL, inp, weight, bias, N, C, OC, CS(rt));
}

/* dinp (N, C) = dout (N, OC) @ weight (OC, C), bf16 out; as kern_gemm_ref
 * (dinp, dout, weight, N, C, OC, 0, 0, OC, C, C, 0) in rt_cpu.c. */
static int g_linear_dgrad(rt_t *rt, void *dinp, const void *dout, const void *weight, int N, int C, int OC)
{
    kern_gemm_desc g = {.M = N, .N = C, .K = OC, .ta = 0, .tb = 0, .batch = 1, .c_fp32 = 0,
                        .lda = OC, .ldb = C, .ldc = C, .alpha = 1.0f, .beta = 0.0f};
    return kern_gemm_cuda(KC(rt), dinp, dout, weight, &g, CS(rt));
}

/* dweight (OC, C) += dout^T (OC, N) @ inp (N, C), fp32; as kern_gemm_ref
 * (dweight, dout, inp, OC, C, N, 1, 0, OC, C, C, 1) in rt_cpu.c. */
static int g_linear_wgrad(rt_t *rt, float *dweight, float *dbias, const void *dout, const void *inp, int N, int C,
                          int OC)
{
    return kern_linear_wgrad_cuda(KC(rt), dweight, dbias, (const kern_bf16 *)dout, (const kern_bf16 *)inp, N, C,
                                  OC, CS(rt));
}

static int g_bias_gelu_fwd(rt_t *rt, void *out, const void *inp, const void *bias, int N, int C)
{
    return kern_bias_gelu_fwd_cuda(out, inp, bias, N, C, CS(rt));
}

static int g_bias_gelu_bwd(rt_t *rt, void *dinp, float *dbias, const void *dout, const void *inp, const void *bias,
                           int N, int C)
{
    return kern_bias_gelu_bwd_cuda(dinp, dbias, dout, inp, bias, N, C, CS(rt));
}

static int g_bias_add(rt_t *rt, void *out, const void *inp, const void *bias, int N, int C)
{
    return kern_bias_add_cuda(out, inp, bias, N, C, CS(rt));
}

static int g_gelu_fwd(rt_t *rt, void *out, const void *inp, long n)
{
    return kern_gelu_fwd_cuda(out, inp, n, CS(rt));
}

static int g_gelu_bwd(rt_t *rt, void *dinp, const void *dout, const void *inp, long n)
{
    return kern_gelu_bwd_cuda(dinp, dout, inp, n, CS(rt));
}

static int g_bias_grad(rt_t *rt, float *dbias, const void *dout, int N, int C)
{
    return kern_bias_grad_cuda(dbias, dout, N, C, CS(rt));
}

static int g_dropout(rt_t *rt, void *out, uint8_t *mask, const void *inp, long n, kern_dropout d)
{
    return kern_dropout_cuda(out, mask, inp, n, d, CS(rt));
}

static int g_dropout_masked(rt_t *rt, void *out, const void *inp, const uint8_t *mask, long n, float scale)
{
    return kern_dropout_masked_cuda(out, inp, mask, n, scale, CS(rt));
}

static int g_dropout_add(rt_t *rt, void *out, uint8_t *mask, const void *x, const void *inp, long n, kern_dropout d)
{
    return kern_dropout_add_cuda(out, mask, x, inp, n, d, CS(rt));
}

static int g_rope(rt_t *rt, void *x, int N, int T, int t0, int H, int HS, double base, int inverse)
{
    return kern_rope_cuda(x, N, T, t0, H, HS, base, inverse, CS(rt));
}

static int g_swiglu_fwd(rt_t *rt, void *out, const void *inp, int N, int F)
{
    return kern_swiglu_fwd_cuda(out, inp, N, F, CS(rt));
}

static int g_swiglu_bwd(rt_t *rt, void *dinp, const void *dout, const void *inp, int N, int F)
{
    return kern_swiglu_bwd_cuda(dinp, dout, inp, N, F, CS(rt));
}

static int g_add(rt_t *rt, void *out, const void *a, const void *b, long n)
{
    return rt_gpu_add_cuda(out, a, b, n, CS(rt));
}

/* Unfused scratch: fp32 scores (B, NH, T, T), then (backward) bf16 datt. */
static size_t scores_bytes(kern_attn_shape s) { return align_up((size_t)s.B * s.NH * s.T * s.T * sizeof(float)); }
static size_t datt_bytes(kern_attn_shape s) { return (size_t)s.B * s.NH * s.T * s.T * sizeof(kern_bf16); }

static int g_attn_fwd(rt_t *rt, int attn, void *out, void *saved, const void *q, const void *k, const void *v,
                      kern_attn_shape s)
{
    int by_cudnn = attn == ATTN_FLASH ? g_cudnn_fwd(rt, out, saved, q, k, v, s) : 0;
    if (by_cudnn)
        return by_cudnn < 0 ? -1 : 0;
    if (attn == ATTN_FLASH)
        return kern_attention_fwd_cuda(out, saved, q, k, v, s, CS(rt));
    if (attn == ATTN_FLASH1) {
        float *st = g_scratch(rt, kern_attention_fwd_v1_scratch_bytes(s));
        return st ? kern_attention_fwd_v1_cuda(out, saved, st, q, k, v, s, CS(rt)) : -1;
    }
    float *scores = g_scratch(rt, scores_bytes(s));
    if (!scores)
        return -1;
    return kern_attention_unfused_fwd_cuda(KC(rt), out, saved, scores, q, k, v, s, CS(rt));
}

static int g_attn_bwd(rt_t *rt, int attn, void *dq, void *dk, void *dv, const void *dout, const void *q,
                      const void *k, const void *v, const void *out, const void *saved, kern_attn_shape s)
{
    if (attn == ATTN_FLASH1) {
        float *sc = g_scratch(rt, kern_attention_bwd_v1_scratch_bytes(s));
        return sc ? kern_attention_bwd_v1_cuda(dq, dk, dv, sc, dout, q, k, v, out, saved, s, CS(rt)) : -1;
    }
    if (attn == ATTN_FLASH) {
        int by_cudnn = g_cudnn_bwd(rt, dq, dk, dv, dout, q, k, v, out, saved, s);
        if (by_cudnn)
            return by_cudnn < 0 ? -1 : 0;
        float *sc = g_scratch(rt, kern_attention_bwd_scratch_bytes(s));
        return sc ? kern_attention_bwd_cuda(dq, dk, dv, sc, dout, q, k, v, out, saved, s, CS(rt)) : -1;
    }
    char *sc = g_scratch(rt, scores_bytes(s) + datt_bytes(s));
    if (!sc)
        return -1;
    kern_bf16 *datt = (kern_bf16 *)(sc + scores_bytes(s));
    return kern_attention_unfused_bwd_cuda(KC(rt), dq, dk, dv, datt, (float *)sc, dout, q, k, v, saved, s,
                                           CS(rt));
}

static int g_attn_merge(rt_t *rt, void *out, float *lse, const void *out_b, const float *lse_b, int B, int T,
                        int NH, int HS)
{
    return kern_attnmerge_cuda(out, lse, out_b, lse_b, B, T, NH, HS, CS(rt));
}

static int g_moe_route(rt_t *rt, float *probs, int *idx, float *scores, const void *logits, int N, int E, int k)
{
    return kern_moe_route_cuda(probs, idx, scores, logits, N, E, k, CS(rt));
}

static int g_moe_route_bwd(rt_t *rt, void *dlogits, const float *dprobs, const float *probs, const int *idx,
                           const float *scores, const float *coef, int coef_ld, int N, int E, int k)
{
    return kern_moe_route_bwd_cuda(dlogits, dprobs, probs, idx, scores, coef, coef_ld, N, E, k, CS(rt));
}

static int g_moe_gather(rt_t *rt, void *out, const void *x, const int *rows, const float *w, long M, int C)
{
    return kern_moe_gather_cuda(out, x, rows, w, M, C, CS(rt));
}

static int g_moe_combine(rt_t *rt, void *out, const void *y, const int *inv, const float *w, long N, int k, int C)
{
    return kern_moe_combine_cuda(out, y, inv, w, N, k, C, CS(rt));
}

static int g_moe_rowdot(rt_t *rt, float *out, const void *a, const int *rows, const void *b, long M, int C)
{
    return kern_moe_rowdot_cuda(out, a, rows, b, M, C, CS(rt));
}

/* The stamp in device memory made on first use (freed by g_destroy). */
static int g_slow_begin(rt_t *rt)
{
    gpu_t *g = G(rt);
    if (!g->slow_t0)
        KERN_CUDA_TRY(cudaMalloc((void **)&g->slow_t0, sizeof *g->slow_t0));
    return kern_stamp_cuda(g->slow_t0, MAIN(rt));
}

static int g_slow_end(rt_t *rt, double extra)
{
    return kern_stretch_cuda(G(rt)->slow_t0, extra, MAIN(rt));
}

/* FP8's numerics on the bf16 GEMMs (kernels/fp8.h), for testing them, not
 * FP8's speed (cuBLASLt's FP8 GEMMs); the amax stays on the device. */
static int g_fp8_quant(rt_t *rt, void *out, const void *x, long n, int fmt, float scale, float *amax)
{
    return kern_fp8_quant_cuda(out, x, n, fmt, scale, amax, CS(rt));
}

static int g_xent_fwd(rt_t *rt, float *losses, float *lse, const void *logits, const int *targets, int N, int V)
{
    return kern_crossentropy_fwd_cuda(losses, lse, logits, targets, N, V, CS(rt));
}

static int g_xent_part(rt_t *rt, float *part, const void *logits, const int *targets, int v0, int N, int V)
{
    return kern_crossentropy_part_cuda(part, logits, targets, v0, N, V, CS(rt));
}

static int g_xent_merge(rt_t *rt, float *losses, float *lse, const float *parts, const int *targets, int P, int N)
{
    return kern_crossentropy_merge_cuda(losses, lse, parts, targets, P, N, CS(rt));
}

static int g_xent_bwd(rt_t *rt, void *dlogits, const void *logits, const float *lse, const int *targets, int v0,
                      float dloss, int N, int V)
{
    return kern_crossentropy_bwd_cuda(dlogits, logits, lse, targets, v0, dloss, N, V, CS(rt));
}

/* param_bf16 of each segment is the bf16 act copy: the kernels refresh it. */
static int g_adamw(rt_t *rt, const kern_opt_tensor *ts, int count, kern_opt_hparams hp)
{
    return kern_adamw_cuda(ts, count, hp, CS(rt));
}

static int g_lamb_norms(rt_t *rt, const kern_opt_tensor *ts, int count, kern_opt_hparams hp, float *norms)
{
    return kern_lamb_norms_cuda(ts, count, hp, norms, CS(rt));
}

static int g_lamb_apply(rt_t *rt, const kern_opt_tensor *ts, int count, kern_opt_hparams hp, const float *norms)
{
    return kern_lamb_apply_cuda(ts, count, hp, norms, CS(rt));
}

static int g_grad_sumsq(rt_t *rt, const kern_opt_tensor *ts, int count, float *sums)
{
    return kern_grad_sumsq_cuda(ts, count, sums, CS(rt));
}

/* NULL (never one of ours) for a stream out of range. */
const rt_ops_t rt_gpu_ops = {
    g_alloc, g_free, g_memset0, g_h2d, g_d2h, g_copy2d, g_host_alloc, g_host_free, g_act_from_f32,
    g_join, g_record, g_wait, g_sync, g_compute_on, g_slow_begin, g_slow_end, g_capture_begin, g_capture_end,
    g_mark_ready, g_mark_start, g_mark_end, g_iter_begin, g_iter_end,
    g_embedding_fwd, g_embedding_bwd, g_layernorm_fwd, g_layernorm_bwd, g_rmsnorm_fwd, g_rmsnorm_bwd,
    g_linear_fwd, g_linear_dgrad, g_linear_wgrad,
    g_bias_gelu_fwd, g_bias_gelu_bwd, g_bias_add, g_gelu_fwd, g_gelu_bwd, g_bias_grad, g_rope, g_swiglu_fwd, g_swiglu_bwd,
    g_add, g_dropout, g_dropout_masked, g_dropout_add,
    g_attn_fwd, g_attn_bwd, g_attn_merge, g_fp8_quant, g_xent_fwd, g_xent_part, g_xent_merge, g_xent_bwd,
    g_moe_route, g_moe_route_bwd, g_moe_gather, g_moe_combine, g_moe_rowdot,
    g_adamw, g_lamb_norms, g_lamb_apply, g_grad_sumsq,
    rt_gpu_gemm_algos, g_attn_backend, g_native, g_destroy,
};
