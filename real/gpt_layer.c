/* real/gpt_layer.c: forward and backward of one transformer layer of a
 * model chunk on one micro-batch (gpt_layer.h), as model/layer.c lists the ops: LayerNorm (fused
 * with the residual add or not), column-parallel GEMM fed by an all-gather
 * (SP), attention (flash, flash1 or unfused), row-parallel GEMM reduced by an
 * all-reduce or a reduce-scatter (SP); bias+GeLU fused or not. In the
 * backward, the SP re-gather of a GEMM's input runs beside its dgrad and
 * the reduce-scatter (all-reduce) of the input gradient beside its wgrad,
 * on the TP stream, as Megatron-LM overlaps them; --tp-comm-overlap turns
 * the forward's gathers and reductions and the backward's gradient gather
 * into rings of per-slice transfers pipelined against per-slice GEMMs
 * (MegaScale's TP/SP overlap, gpt_tp_ring.c).
 *
 * Shapes: N = B*T token rows of a micro-batch, Nl = N/t rows outside TP
 * regions with SP (N without); C hidden, Ft = F/t, nh = NH/t heads and
 * g = G/t key/value groups per TP rank. Buffer discipline for the TP
 * stream: it joins the compute stream before touching a buffer, and the
 * compute stream joins it back before that buffer is freed or read. */
#include "real/gpt_layer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Column block [col, col + width) of a (rows, ld) act matrix to or from a
 * contiguous (rows, width) one. */
static int cols_out(gpt_t *m, void *dst, const void *src, int rows, int ld, int col, int width)
{
    size_t ab = RT->act_bytes;
    return OP->copy2d(RT, dst, width * ab, A(m, src, col), ld * ab, width * ab, rows, STREAM_COMPUTE);
}

static int cols_in(gpt_t *m, void *dst, int ld, int col, const void *src, int rows, int width)
{
    size_t ab = RT->act_bytes;
    return OP->copy2d(RT, A(m, dst, col), ld * ab, src, width * ab, width * ab, rows, STREAM_COMPUTE);
}

int gpt_copy_act(gpt_t *m, void *dst, const void *src, long elems)
{
    size_t b = (size_t)elems * RT->act_bytes;
    return OP->copy2d(RT, dst, b, src, b, b, 1, STREAM_COMPUTE);
}

/* ---- LayerNorm with the residual add, fused or not ------------------------------- */

/* LayerNorm, or RMSNorm (m->rms: no bias tensor, tb < 0, and no mean). */
static int norm_fwd(gpt_t *m, void *residual, void *out, float *mean, float *rstd, const void *inp, const void *skip,
                    const kern_dropout *drop, uint8_t *mask, int tw, int tb)
{
    const void *w = gpt_param(m, tw);
    if (m->rms)
        return OP->rmsnorm_fwd(RT, residual, out, rstd, inp, skip, drop, mask, w, m->Nl, m->C);
    return OP->layernorm_fwd(RT, residual, out, mean, rstd, inp, skip, drop, mask, w, gpt_param(m, tb), m->Nl,
                             m->C);
}

/* residual = inp + skip (skip dropped by drop when given, its kept mask to
 * mask), the residual add of a branch: Megatron-LM's bias-dropout-add
 * (the bias came with the GEMM), one pass. */
static int residual_add(gpt_t *m, void *residual, const void *inp, const void *skip, const kern_dropout *drop,
                        uint8_t *mask)
{
    long n = (long)m->Nl * m->C;
    return drop ? OP->dropout_add(RT, residual, mask, inp, skip, n, *drop) : OP->add(RT, residual, inp, skip, n);
}

/* The norm of inp, or of residual = inp + skip (dropped by drop) when skip
 * is given: one kernel under --fused-elementwise, else the residual add and
 * then the norm, as Megatron-LM's unfused path. */
int gpt_ln_fwd(gpt_t *m, void *residual, void *out, float *mean, float *rstd, const void *inp, const void *skip,
               const kern_dropout *drop, uint8_t *mask, int tw, int tb)
{
    if (skip && !m->fused) {
        RT_TRY(residual_add(m, residual, inp, skip, drop, mask));
        return norm_fwd(m, NULL, out, mean, rstd, residual, NULL, NULL, NULL, tw, tb);
    }
    return norm_fwd(m, residual, out, mean, rstd, inp, skip, drop, mask, tw, tb);
}

int gpt_ln_bwd(gpt_t *m, void *dres, const void *dout, const void *xln, const float *mean, const float *rstd,
               int tw, int tb)
{
    if (m->rms)
        return OP->rmsnorm_bwd(RT, dres, gpt_grad(m, tw), dout, xln, gpt_param(m, tw), rstd, m->Nl, m->C);
    return OP->layernorm_bwd(RT, dres, gpt_grad(m, tw), gpt_grad(m, tb), dout, xln, gpt_param(m, tw), mean, rstd,
                             m->Nl, m->C);
}

/* ---- column-parallel forward: out (N, OC) = gather(inp) (N, C) @ W^T + b ---------- */

int gpt_tp_gather(gpt_t *m, void *full, const void *inp_l, int C, int stream)
{
    long slice = (long)m->Nl * C;
    RT_TRY(gpt_copy_act(m, A(m, full, m->tp_i * slice), inp_l, slice));
    if (stream != STREAM_COMPUTE)
        RT_TRY(OP->join(RT, stream, STREAM_COMPUTE));
    return CM->op->allgather(CM, GRP_TP, full, slice, DT_ACT, stream);
}

static int col_fwd(gpt_t *m, void *out, const void *inp, int tw, int tb, int C, int OC)
{
    const void *b = gpt_param(m, tb);
    if (!m->sp)
        return gpt_gemm_fwd(m, m->N, out, inp, tw, b, C, OC);
    void *full;
    RT_TRY(alloc_act(m, &full, (long)m->N * C));
    if (m->overlap)
        RT_TRY(gpt_ring_gather_gemm(m, full, inp, 0, out, tw, b, C, OC));
    else {
        RT_TRY(gpt_tp_gather(m, full, inp, C, STREAM_COMPUTE));
        RT_TRY(gpt_gemm_fwd(m, m->N, out, full, tw, b, C, OC));
    }
    drop(m, full);
    return 0;
}

/* ---- row-parallel forward: y = reduce(inp (N, K) @ W^T) + b, y (Nl, C) ------------ */

static int row_fwd(gpt_t *m, void *y, const void *inp, int tw, int tb, int K)
{
    const void *b = m->tp_i == 0 ? gpt_param(m, tb) : NULL; /* the bias once */
    if (m->t == 1)
        return gpt_gemm_fwd(m, m->N, y, inp, tw, b, K, m->C);
    if (!m->sp) { /* --tp-comm-overlap needs SP (job.c) */
        RT_TRY(gpt_gemm_fwd(m, m->N, y, inp, tw, b, K, m->C));
        return CM->op->allreduce(CM, GRP_TP, y, (long)m->N * m->C, DT_ACT, STREAM_COMPUTE);
    }
    if (m->overlap)
        return gpt_ring_gemm_scatter(m, y, inp, tw, b, K);
    void *part;
    RT_TRY(alloc_act(m, &part, (long)m->N * m->C));
    RT_TRY(gpt_gemm_fwd(m, m->N, part, inp, tw, b, K, m->C));
    RT_TRY(CM->op->reduce_scatter(CM, GRP_TP, y, part, (long)m->Nl * m->C, DT_ACT, STREAM_COMPUTE));
    drop(m, part);
    return 0;
}

/* ---- backward of the two GEMM kinds -------------------------------------------------- */

/* Row-parallel y = inp (N, K) @ W (C, K)^T: dinp (N, K) and dW, db (unless tb < 0) from
 * dy (Nl, C) (gathered first with SP: chunked with the dgrad under
 * --tp-comm-overlap, exposed otherwise, as Megatron). */
static int row_bwd(gpt_t *m, void *dinp, const void *dy, const void *inp, int tw, int tb, int K)
{
    const void *dyf = dy;
    void *full = NULL;
    if (m->sp) {
        RT_TRY(alloc_act(m, &full, (long)m->N * m->C));
        if (m->overlap)
            RT_TRY(gpt_ring_gather_gemm(m, full, dy, 1, dinp, tw, NULL, m->C, K));
        else
            RT_TRY(gpt_tp_gather(m, full, dy, m->C, STREAM_COMPUTE));
        dyf = full;
    }
    if (!(m->sp && m->overlap))
        RT_TRY(gpt_gemm_dgrad(m, m->N, dinp, dyf, tw, K, m->C));
    RT_TRY(gpt_gemm_wgrad(m, m->N, tw, gpt_grad(m, tb), dyf, inp, K, m->C));
    drop(m, full);
    return 0;
}

/* Column-parallel y = inp (N, C) @ W (OC, C)^T: dx and dW (db unless
 * tb < 0) from dout (N, OC). inp is the saved input: (Nl, C), re-gathered
 * beside the dgrad, with SP. dx (Nl, C) with SP, else (N, C), reduced over
 * TP beside the wgrad. */
static int col_bwd(gpt_t *m, void *dx, const void *dout, const void *inp, int tw, int tb, int OC)
{
    int C = m->C;
    const void *inpf = inp;
    void *full = NULL, *dxf = dx;
    float *db = gpt_grad(m, tb);
    if (m->sp) { /* re-gather the input beside the dgrad */
        RT_TRY(alloc_act(m, &full, (long)m->N * C));
        RT_TRY(alloc_act(m, &dxf, (long)m->N * C));
        RT_TRY(gpt_tp_gather(m, full, inp, C, RT_STREAM_TP));
        inpf = full;
    }
    RT_TRY(gpt_gemm_dgrad(m, m->N, dxf, dout, tw, C, OC));
    if (m->t > 1) { /* reduce the input gradient beside the wgrad */
        RT_TRY(OP->join(RT, STREAM_COMPUTE, RT_STREAM_TP));
        RT_TRY(OP->join(RT, RT_STREAM_TP, STREAM_COMPUTE));
        if (m->sp)
            RT_TRY(CM->op->reduce_scatter(CM, GRP_TP, dx, dxf, (long)m->Nl * C, DT_ACT, RT_STREAM_TP));
        else
            RT_TRY(CM->op->allreduce(CM, GRP_TP, dx, (long)m->N * C, DT_ACT, RT_STREAM_TP));
    }
    RT_TRY(gpt_gemm_wgrad(m, m->N, tw, db, dout, inpf, C, OC));
    RT_TRY(m->t > 1 ? OP->join(RT, STREAM_COMPUTE, RT_STREAM_TP) : 0); /* TP 1: nothing there */
    if (m->sp)
        drop(m, full), drop(m, dxf);
    return 0;
}

/* ---- attention core ------------------------------------------------------------------- */

/* The attention of layer s: this rank's heads, and their dropout (indices
 * over the model's heads, from this rank's first). */
static kern_attn_shape attn_shape(const gpt_t *m, const layer_saved_t *s)
{
    kern_attn_shape sh = {.B = m->B, .T = m->T, .NH = m->nh, .NKV = m->g, .HS = m->HS, .window = m->window,
                          .drop = KERN_NO_DROPOUT};
    if (m->adrop > 0) {
        sh.drop = kern_dropout_make(m->adrop, m->drop_seed, kern_dropout_site(s->layer, KERN_DROP_ATTN),
                                    (uint32_t)m->drop_step);
        sh.drop.base = s->sample0, sh.drop.heads = m->NH, sh.drop.head0 = m->tp_i * m->nh;
    }
    return sh;
}

/* Hidden dropout `kind` of layer `layer` over `rows` rows of the
 * micro-batch from row0, the rows of x: *dp = d, filled with its
 * descriptor for the kernel that takes x to drop it, and a 1-byte mask for
 * its kept elements in *mask (allocated here), kept for the backward as
 * torch.nn.Dropout under Megatron-LM keeps it. Under CP x is dropped here
 * (gpt_cp_drop) and *dp = NULL. *dp = NULL (nothing allocated) without
 * --hidden-dropout. */
int gpt_hidden_drop(gpt_t *m, long long sample0, int layer, int kind, void *x, long rows, long row0,
                    kern_dropout *d, uint8_t **mask, const kern_dropout **dp)
{
    *dp = NULL;
    if (m->hdrop <= 0)
        return 0;
    RT_TRY(OP->alloc(RT, (void **)mask, (size_t)rows * m->C, RT_POOL_MAIN));
    *d = kern_dropout_make(m->hdrop, m->drop_seed, kern_dropout_site(layer, kind), (uint32_t)m->drop_step);
    if (m->cp > 1)
        return gpt_cp_drop(m, sample0, *d, x, *mask, rows, row0);
    d->base = (sample0 * m->T + row0) * m->C;
    *dp = d;
    return 0;
}

/* The scale of kept elements: the forward's, bit for bit. */
float gpt_hidden_scale(const gpt_t *m) { return kern_dropout_make(m->hdrop, 0, 0, 0).scale; }

/* The rows held outside TP regions: this rank's slice of the tokens with
 * SP, all of them (as every TP rank) without. */
long gpt_row0_local(const gpt_t *m) { return m->sp ? (long)m->tp_i * m->Nl : 0; }

/* gpt_hidden_drop for the (Nl, C) branch output z of layer s, applied by
 * the residual add that takes it (or to z here, under CP); *mask is the
 * kept mask (NULL without). */
static int branch_drop(gpt_t *m, layer_saved_t *s, int kind, void *z, kern_dropout *d, const kern_dropout **dp,
                       uint8_t **mask)
{
    uint8_t **kept = kind == KERN_DROP_AFTER_MLP ? &s->mask_m : &s->mask_a;
    RT_TRY(gpt_hidden_drop(m, s->sample0, s->layer, kind, z, m->Nl, gpt_row0_local(m), d, kept, dp));
    *mask = *kept;
    return 0;
}

/* The gradient of layer s's dropped branch output: dres through its kept
 * mask, into *dz (allocated; dres itself without hidden dropout). Free
 * with branch_grad_free. */
static int branch_grad(gpt_t *m, const layer_saved_t *s, const void *dres, void **dz, int kind)
{
    *dz = (void *)dres;
    if (m->hdrop <= 0)
        return 0;
    RT_TRY(alloc_act(m, dz, (long)m->Nl * m->C));
    const uint8_t *mask = kind == KERN_DROP_AFTER_MLP ? s->mask_m : s->mask_a;
    return OP->dropout_masked(RT, *dz, dres, mask, (long)m->Nl * m->C, gpt_hidden_scale(m));
}

static void branch_grad_free(gpt_t *m, void *dz, const void *dres)
{
    if (dz != dres)
        drop(m, dz);
}

/* q, k, v out of the fused projection (N, ld), columns from col0. */
static int split_qkv(gpt_t *m, layer_saved_t *s, const void *y, int ld)
{
    int q = m->nh * m->HS, kv = m->g * m->HS;
    RT_TRY(alloc_act(m, &s->q, (long)m->N * q));
    RT_TRY(alloc_act(m, &s->k, (long)m->N * kv));
    RT_TRY(alloc_act(m, &s->v, (long)m->N * kv));
    RT_TRY(cols_out(m, s->q, y, m->N, ld, 0, q));
    RT_TRY(cols_out(m, s->k, y, m->N, ld, q, kv));
    return cols_out(m, s->v, y, m->N, ld, q + kv, kv);
}

/* The attention core from q, k, v into out, saving what its backward
 * reads (s->att: log-sum-exp, or the unfused probabilities). */
static int core_fwd(gpt_t *m, layer_saved_t *s, void *out)
{
    kern_attn_shape sh = attn_shape(m, s);
    if (m->cp > 1)
        return gpt_cp_attn_fwd(m, s, out, sh);
    RT_TRY(OP->alloc(RT, &s->att, rt_attn_saved_bytes(RT, m->attn, sh), RT_POOL_MAIN));
    return OP->attn_fwd(RT, m->attn, out, s->att, s->q, s->k, s->v, sh);
}

static int attn_fwd(gpt_t *m, layer_saved_t *s)
{
    if (m->pos == POS_ROPE) { /* the queries and keys turn by their tokens' places, in place */
        RT_TRY(gpt_rope(m, s->q, m->nh, 0));
        RT_TRY(gpt_rope(m, s->k, m->g, 0));
    }
    RT_TRY(alloc_act(m, &s->ao, (long)m->N * m->nh * m->HS));
    RT_TRY(core_fwd(m, s, s->ao));
    if (m->recompute_core) /* rebuilt by attn_bwd */
        drop(m, s->att), s->att = NULL;
    return 0;
}

/* Selective recomputation: the core's forward again, from the kept
 * (already turned) q, k, v, for its probabilities; its output, the same
 * as the kept ao, is thrown away. The dropout masks are drawn again at the
 * same places, so they are the same. */
static int attn_rebuild(gpt_t *m, layer_saved_t *s)
{
    void *out;
    RT_TRY(alloc_act(m, &out, (long)m->N * m->nh * m->HS));
    RT_TRY(core_fwd(m, s, out));
    drop(m, out);
    return 0;
}

/* dy (N, ld) receives [dq | dk | dv] from column 0. */
static int attn_bwd(gpt_t *m, layer_saved_t *s, const void *dao, void *dy, int ld)
{
    int q = m->nh * m->HS, kv = m->g * m->HS;
    void *dq, *dk, *dv;
    RT_TRY(alloc_act(m, &dq, (long)m->N * q));
    RT_TRY(alloc_act(m, &dk, (long)m->N * kv));
    RT_TRY(alloc_act(m, &dv, (long)m->N * kv));
    if (m->cp > 1) {
        RT_TRY(gpt_cp_attn_bwd(m, s, dao, dq, dk, dv, attn_shape(m, s)));
    } else {
        if (!s->att)
            RT_TRY(attn_rebuild(m, s));
        RT_TRY(OP->attn_bwd(RT, m->attn, dq, dk, dv, dao, s->q, s->k, s->v, s->ao, s->att, attn_shape(m, s)));
    }
    if (m->pos == POS_ROPE) { /* back through the turn: the inverse turn */
        RT_TRY(gpt_rope(m, dq, m->nh, 1));
        RT_TRY(gpt_rope(m, dk, m->g, 1));
    }
    RT_TRY(cols_in(m, dy, ld, 0, dq, m->N, q));
    RT_TRY(cols_in(m, dy, ld, q, dk, m->N, kv));
    RT_TRY(cols_in(m, dy, ld, q + kv, dv, m->N, kv));
    drop(m, dq), drop(m, dk), drop(m, dv);
    return 0;
}

/* ---- layers ---------------------------------------------------------------------------- */

int gpt_alloc_ln(gpt_t *m, float **mean, float **rstd, void **h)
{
    RT_TRY(alloc_f32(m, mean, m->Nl));
    RT_TRY(alloc_f32(m, rstd, m->Nl));
    return alloc_act(m, h, (long)m->Nl * m->C);
}

/* Layer s's first norm, of its input; done already when the previous
 * layer's output add ran it (fuse_next). */
static int layer_ln1(gpt_t *m, int c, int l, layer_saved_t *s)
{
    if (s->h1)
        return 0;
    RT_TRY(gpt_alloc_ln(m, &s->mean1, &s->rstd1, &s->h1));
    return gpt_ln_fwd(m, NULL, s->h1, s->mean1, s->rstd1, s->x_in, NULL, NULL, NULL, P(m, c, l, T_LN1_W),
                      P(m, c, l, T_LN1_B));
}

/* x3 = x2 + z, z dropped as branch `kind`, into out when given (the
 * chunk's output); with s->fuse_next, the same kernel runs that norm. */
static int layer_out(gpt_t *m, layer_saved_t *s, const void *x2, void *z, void *out, int kind)
{
    s->x3_owned = out == NULL;
    s->x3 = out;
    if (!out)
        RT_TRY(alloc_act(m, &s->x3, (long)m->Nl * m->C));
    kern_dropout d;
    const kern_dropout *dp;
    uint8_t *mask;
    RT_TRY(branch_drop(m, s, kind, z, &d, &dp, &mask));
    const norm_dst_t *nx = s->fuse_next;
    if (!nx)
        return residual_add(m, s->x3, x2, z, dp, mask);
    RT_TRY(gpt_alloc_ln(m, nx->mean, nx->rstd, nx->h));
    return norm_fwd(m, s->x3, *nx->h, *nx->mean, *nx->rstd, x2, z, dp, mask, nx->tw, nx->tb);
}

/* The standard block's FC2 and the second residual add. */
static int fc2_fwd(gpt_t *m, int c, int l, layer_saved_t *s, void *out)
{
    void *z;
    RT_TRY(alloc_act(m, &z, (long)m->Nl * m->C));
    RT_TRY(row_fwd(m, z, s->gl, P(m, c, l, T_FC2_W), P(m, c, l, T_FC2_B), m->Ft));
    RT_TRY(layer_out(m, s, s->x2, z, out, KERN_DROP_AFTER_MLP));
    drop(m, z);
    return 0;
}

static int standard_fwd(gpt_t *m, int c, int l, layer_saved_t *s, void *out)
{
    int C = m->C, Ft = m->Ft, q = m->nh * m->HS;
    long rows = (long)m->Nl * C;
    void *y, *z;
    RT_TRY(layer_ln1(m, c, l, s));
    RT_TRY(alloc_act(m, &y, (long)m->N * m->qkvn));
    RT_TRY(col_fwd(m, y, s->h1, P(m, c, l, T_QKV_W), P(m, c, l, T_QKV_B), C, m->qkvn));
    RT_TRY(split_qkv(m, s, y, m->qkvn));
    drop(m, y);
    RT_TRY(attn_fwd(m, s));
    RT_TRY(alloc_act(m, &z, rows));
    RT_TRY(row_fwd(m, z, s->ao, P(m, c, l, T_PROJ_W), P(m, c, l, T_PROJ_B), q));
    kern_dropout d;
    const kern_dropout *dp;
    uint8_t *mask;
    RT_TRY(branch_drop(m, s, KERN_DROP_AFTER_ATTN, z, &d, &dp, &mask));
    RT_TRY(alloc_act(m, &s->x2, rows));
    RT_TRY(gpt_alloc_ln(m, &s->mean2, &s->rstd2, &s->h2));
    RT_TRY(gpt_ln_fwd(m, s->x2, s->h2, s->mean2, s->rstd2, s->x_in, z, dp, mask, P(m, c, l, T_LN2_W),
                      P(m, c, l, T_LN2_B)));
    if (P(m, c, l, T_ROUTER_W) >= 0) { /* an MoE layer: its experts for the MLP */
        RT_TRY(gpt_moe_fwd(m, c, l, s, z));
        RT_TRY(layer_out(m, s, s->x2, z, out, KERN_DROP_AFTER_MLP));
        drop(m, z);
        return 0;
    }
    drop(m, z);
    RT_TRY(alloc_act(m, &s->pre, (long)m->N * m->Fw));
    RT_TRY(alloc_act(m, &s->gl, (long)m->N * Ft));
    int tb1 = P(m, c, l, T_FC1_B);
    if (m->swiglu) { /* the GEMM adds FC1's bias; SwiGLU over [gate | up] */
        RT_TRY(col_fwd(m, s->pre, s->h2, P(m, c, l, T_FC1_W), tb1, C, m->Fw));
        RT_TRY(OP->swiglu_fwd(RT, s->gl, s->pre, m->N, Ft));
        return fc2_fwd(m, c, l, s, out);
    }
    RT_TRY(col_fwd(m, s->pre, s->h2, P(m, c, l, T_FC1_W), -1, C, Ft));
    const void *b1 = gpt_param(m, tb1);
    if (!b1) { /* --disable-bias-linear: GeLU alone */
        RT_TRY(OP->gelu_fwd(RT, s->gl, s->pre, (long)m->N * Ft));
    } else if (m->fused) {
        RT_TRY(OP->bias_gelu_fwd(RT, s->gl, s->pre, b1, m->N, Ft));
    } else { /* the bias add, then GeLU: pre keeps the biased input */
        RT_TRY(OP->bias_add(RT, s->pre, s->pre, b1, m->N, Ft));
        RT_TRY(OP->gelu_fwd(RT, s->gl, s->pre, (long)m->N * Ft));
    }
    return fc2_fwd(m, c, l, s, out);
}

static int attn_half_bwd(gpt_t *m, int c, int l, layer_saved_t *s, void *dres, void *dh);

/* SwiGLU's backward: *dg, the gradient of its output (N, Ft), is replaced
 * by that of its input [dgate | dup] (N, Fw). */
static int swiglu_grad(gpt_t *m, const layer_saved_t *s, void **dg)
{
    void *dpre;
    RT_TRY(alloc_act(m, &dpre, (long)m->N * m->Fw));
    RT_TRY(OP->swiglu_bwd(RT, dpre, *dg, s->pre, m->N, m->Ft));
    drop(m, *dg);
    *dg = dpre;
    return 0;
}

static int standard_bwd(gpt_t *m, int c, int l, layer_saved_t *s, void *dres)
{
    int C = m->C, Ft = m->Ft;
    void *dg, *dh, *dz;
    if (P(m, c, l, T_ROUTER_W) >= 0) { /* an MoE layer */
        RT_TRY(branch_grad(m, s, dres, &dz, KERN_DROP_AFTER_MLP));
        RT_TRY(alloc_act(m, &dh, (long)m->Nl * C));
        RT_TRY(gpt_moe_bwd(m, c, l, s, dz, dh));
        branch_grad_free(m, dz, dres);
        return attn_half_bwd(m, c, l, s, dres, dh);
    }
    RT_TRY(alloc_act(m, &dg, (long)m->N * Ft));
    RT_TRY(branch_grad(m, s, dres, &dz, KERN_DROP_AFTER_MLP));
    RT_TRY(row_bwd(m, dg, dz, s->gl, P(m, c, l, T_FC2_W), P(m, c, l, T_FC2_B), Ft));
    branch_grad_free(m, dz, dres);
    int tb1 = P(m, c, l, T_FC1_B);
    if (m->swiglu) { /* [dgate | dup], then FC1's backward with its bias gradient */
        RT_TRY(swiglu_grad(m, s, &dg));
        RT_TRY(alloc_act(m, &dh, (long)m->Nl * C));
        RT_TRY(col_bwd(m, dh, dg, s->h2, P(m, c, l, T_FC1_W), tb1, m->Fw));
        drop(m, dg);
        return attn_half_bwd(m, c, l, s, dres, dh);
    }
    if (tb1 < 0) { /* --disable-bias-linear */
        RT_TRY(OP->gelu_bwd(RT, dg, dg, s->pre, (long)m->N * Ft));
    } else if (m->fused) {
        RT_TRY(OP->bias_gelu_bwd(RT, dg, gpt_grad(m, tb1), dg, s->pre, gpt_param(m, tb1), m->N, Ft));
    } else {
        float *db1 = gpt_grad(m, tb1);
        RT_TRY(OP->gelu_bwd(RT, dg, dg, s->pre, (long)m->N * Ft));
        RT_TRY(OP->bias_grad(RT, db1, dg, m->N, Ft));
    }
    RT_TRY(alloc_act(m, &dh, (long)m->Nl * C));
    RT_TRY(col_bwd(m, dh, dg, s->h2, P(m, c, l, T_FC1_W), -1, Ft));
    drop(m, dg);
    return attn_half_bwd(m, c, l, s, dres, dh);
}

/* The standard block's backward from the second norm down, dh holding
 * the gradient of that norm's output (freed here). */
static int attn_half_bwd(gpt_t *m, int c, int l, layer_saved_t *s, void *dres, void *dh)
{
    int q = m->nh * m->HS;
    void *dao, *dy, *dz;
    RT_TRY(gpt_ln_bwd(m, dres, dh, s->x2, s->mean2, s->rstd2, P(m, c, l, T_LN2_W), P(m, c, l, T_LN2_B)));
    RT_TRY(alloc_act(m, &dao, (long)m->N * q));
    RT_TRY(branch_grad(m, s, dres, &dz, KERN_DROP_AFTER_ATTN));
    RT_TRY(row_bwd(m, dao, dz, s->ao, P(m, c, l, T_PROJ_W), P(m, c, l, T_PROJ_B), q));
    branch_grad_free(m, dz, dres);
    RT_TRY(alloc_act(m, &dy, (long)m->N * m->qkvn));
    RT_TRY(attn_bwd(m, s, dao, dy, m->qkvn));
    drop(m, dao);
    RT_TRY(col_bwd(m, dh, dy, s->h1, P(m, c, l, T_QKV_W), P(m, c, l, T_QKV_B), m->qkvn));
    drop(m, dy);
    RT_TRY(gpt_ln_bwd(m, dres, dh, s->x_in, s->mean1, s->rstd1, P(m, c, l, T_LN1_W), P(m, c, l, T_LN1_B)));
    drop(m, dh);
    return 0;
}

/* PaLM's parallel block: x + attn(ln(x)) + mlp(ln(x)), one fused input
 * GEMM [QKV | FC1] and one fused output GEMM [proj | FC2]. */
static int parallel_fwd(gpt_t *m, int c, int l, layer_saved_t *s, void *out)
{
    int C = m->C, Ft = m->Ft, q = m->nh * m->HS, ny = m->qkvn + m->Fw, nc = q + Ft;
    void *y, *z;
    RT_TRY(layer_ln1(m, c, l, s));
    RT_TRY(alloc_act(m, &y, (long)m->N * ny));
    RT_TRY(col_fwd(m, y, s->h1, P(m, c, l, T_QKV_W), P(m, c, l, T_QKV_B), C, ny));
    RT_TRY(split_qkv(m, s, y, ny));
    RT_TRY(alloc_act(m, &s->pre, (long)m->N * m->Fw)); /* FC1 output, bias added by the GEMM */
    RT_TRY(cols_out(m, s->pre, y, m->N, ny, m->qkvn, m->Fw));
    drop(m, y);
    RT_TRY(attn_fwd(m, s));
    RT_TRY(alloc_act(m, &s->gl, (long)m->N * Ft));
    if (m->swiglu)
        RT_TRY(OP->swiglu_fwd(RT, s->gl, s->pre, m->N, Ft));
    else
        RT_TRY(OP->gelu_fwd(RT, s->gl, s->pre, (long)m->N * Ft));
    RT_TRY(alloc_act(m, &s->cat, (long)m->N * nc));
    RT_TRY(cols_in(m, s->cat, nc, 0, s->ao, m->N, q));
    RT_TRY(cols_in(m, s->cat, nc, q, s->gl, m->N, Ft));
    /* The output GEMM's input is all the backward needs of the two: the
     * attention backward takes its output back out of it (parallel_bwd). */
    drop(m, s->ao), drop(m, s->gl);
    s->ao = s->gl = NULL;
    RT_TRY(alloc_act(m, &z, (long)m->Nl * C));
    RT_TRY(row_fwd(m, z, s->cat, P(m, c, l, T_PROJ_W), P(m, c, l, T_PROJ_B), nc));
    RT_TRY(layer_out(m, s, s->x_in, z, out, KERN_DROP_AFTER_ATTN));
    drop(m, z);
    return 0;
}

static int parallel_bwd(gpt_t *m, int c, int l, layer_saved_t *s, void *dres)
{
    int Ft = m->Ft, q = m->nh * m->HS, ny = m->qkvn + m->Fw, nc = q + Ft;
    void *dcat, *dao, *dg, *dy, *dh, *dz;
    /* dao and dg before dcat: dcat, split into them and freed, then leaves
     * its space beside the free end, where dy (N x ny, larger than dcat)
     * fits; taken after it, they held dcat's hole between live blocks. */
    RT_TRY(alloc_act(m, &dao, (long)m->N * q));
    RT_TRY(alloc_act(m, &dg, (long)m->N * Ft));
    RT_TRY(alloc_act(m, &dcat, (long)m->N * nc));
    RT_TRY(branch_grad(m, s, dres, &dz, KERN_DROP_AFTER_ATTN));
    RT_TRY(row_bwd(m, dcat, dz, s->cat, P(m, c, l, T_PROJ_W), P(m, c, l, T_PROJ_B), nc));
    branch_grad_free(m, dz, dres);
    RT_TRY(cols_out(m, dao, dcat, m->N, nc, 0, q));
    RT_TRY(cols_out(m, dg, dcat, m->N, nc, q, Ft));
    drop(m, dcat);
    if (m->swiglu)
        RT_TRY(swiglu_grad(m, s, &dg));
    else
        RT_TRY(OP->gelu_bwd(RT, dg, dg, s->pre, (long)m->N * Ft));
    RT_TRY(alloc_act(m, &dy, (long)m->N * ny));
    RT_TRY(alloc_act(m, &s->ao, (long)m->N * q)); /* the attention output, from the output GEMM's input */
    RT_TRY(cols_out(m, s->ao, s->cat, m->N, nc, 0, q));
    RT_TRY(attn_bwd(m, s, dao, dy, ny));
    drop(m, s->ao), s->ao = NULL;
    RT_TRY(cols_in(m, dy, ny, m->qkvn, dg, m->N, m->Fw));
    drop(m, dao), drop(m, dg);
    RT_TRY(alloc_act(m, &dh, (long)m->Nl * m->C));
    RT_TRY(col_bwd(m, dh, dy, s->h1, P(m, c, l, T_QKV_W), P(m, c, l, T_QKV_B), ny));
    drop(m, dy);
    RT_TRY(gpt_ln_bwd(m, dres, dh, s->x_in, s->mean1, s->rstd1, P(m, c, l, T_LN1_W), P(m, c, l, T_LN1_B)));
    drop(m, dh);
    return 0;
}

void gpt_layer_free(gpt_t *m, layer_saved_t *s)
{
    void *ps[] = {s->mean1, s->rstd1, s->mean2, s->rstd2, s->h1, s->h2, s->q, s->k, s->v, s->ao, s->att,
                  s->x2, s->pre, s->gl, s->cat, s->mask_a, s->mask_m, s->cpb[0], s->cpb[1], s->cpb[2], s->cpb[3]};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        drop(m, ps[i]);
    for (int i = 0; i < s->offloaded; i++) { /* a layer freed before its backward (an error) */
        OP->host_free(RT, s->off_host[i]);
        if (s->prefetched)
            drop(m, s->off_dev[i]);
    }
    gpt_moe_free(m, s);
    if (s->x3_owned)
        drop(m, s->x3);
    memset(s, 0, sizeof *s);
}

int gpt_layer_fwd(gpt_t *m, int c, int l, layer_saved_t *s, void *out)
{
    return m->parallel ? parallel_fwd(m, c, l, s, out) : standard_fwd(m, c, l, s, out);
}

int gpt_layer_bwd(gpt_t *m, int c, int l, layer_saved_t *s, void *dres)
{
    return m->parallel ? parallel_bwd(m, c, l, s, dres) : standard_bwd(m, c, l, s, dres);
}
