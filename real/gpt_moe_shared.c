/* real/gpt_moe_shared.c: an MoE layer's shared expert (Megatron-Core's
 * SharedExpertMLP, --moe-shared-expert-intermediate-size): a dense MLP every
 * token passes through beside the routed experts, cut by TP as the layer's
 * own MLP would be (its input gathered over TP under sequence parallelism,
 * which MoE under TP requires; its partial outputs reduce-scattered), its
 * output added to the routed experts'. With --moe-shared-expert-gate
 * (Qwen2's) the output is scaled per token by sigmoid(h . w_g), the gate's
 * weight every rank's, its gradient summed over TP like a norm's. */
#include "real/gpt_layer.h"

#include <math.h>
#include <stdlib.h>

typedef struct {
    void *hf;           /* the gathered input (N, C), or NULL without SP (h2 itself) */
    void *pre, *gl, *y; /* FC1's output (N, Fws), the activation (N, Fst), the output before the gate (Nl, C) */
    float *g;           /* the gate per token (Nl), or NULL */
    int *rows;          /* 0 .. Nl - 1: the row kernels' identity permutation */
} shared_t;

void gpt_moe_shared_free(gpt_t *m, void **sv)
{
    shared_t *h = *sv;
    if (!h)
        return;
    void *ps[] = {h->hf, h->pre, h->gl, h->y, h->g, h->rows};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        drop(m, ps[i]);
    free(h);
    *sv = NULL;
}

int gpt_moe_shared_kept(gpt_t *m, void *sv, gpt_kept_t *k, int n)
{
    shared_t *h = sv;
    if (!h)
        return n;
    size_t ab = RT->act_bytes;
    gpt_kept_t mine[] = {{&h->hf, m->N, m->C * ab}, {&h->pre, m->N, m->Fws * ab}, {&h->gl, m->N, m->Fst * ab},
                         {&h->y, m->Nl, m->C * ab}, {(void **)&h->g, m->Nl, sizeof(float)}};
    return gpt_kept_add(k, n, mine, (int)(sizeof mine / sizeof mine[0]));
}

static const void *param_of(const gpt_t *m, int c, int l, int k) { return gpt_param(m, P(m, c, l, k)); }

static float *grad_of(const gpt_t *m, int c, int l, int k) { return gpt_grad(m, P(m, c, l, k)); }

/* y (Nl, C) = this rank's rows of the sum over TP of part (N, C). */
static int tp_home(gpt_t *m, void *y, void *part)
{
    if (m->t == 1)
        return gpt_copy_act(m, y, part, (long)m->Nl * m->C);
    return CM->op->reduce_scatter(CM, GRP_TP, y, part, (long)m->Nl * m->C, DT_ACT, STREAM_COMPUTE);
}

/* The gate: g = sigmoid(h2 . w_g) per token (host: Nl values). The dot
 * products are the row kernel's (fp32 out on either runtime): row 0 of
 * w_g against each token's row. */
static int gate_fwd(gpt_t *m, int c, int l, layer_saved_t *s, shared_t *h)
{
    int Nl = m->Nl, rc = -1, *zeros = NULL;
    float *logit, *hg = malloc(sizeof(float) * (size_t)Nl);
    int *rows = malloc(sizeof(int) * (size_t)Nl), *hz = calloc((size_t)Nl, sizeof(int));
    if (hg && rows && hz && !alloc_f32(m, &logit, Nl)) {
        for (int i = 0; i < Nl; i++)
            rows[i] = i;
        rc = OP->alloc(RT, (void **)&zeros, sizeof(int) * (size_t)Nl, RT_POOL_MAIN) ||
             OP->h2d(RT, zeros, hz, sizeof(int) * (size_t)Nl) ||
             OP->moe_rowdot(RT, logit, param_of(m, c, l, T_SH_GATE_W), zeros, s->h2, Nl, m->C) ||
             OP->d2h(RT, hg, logit, sizeof(float) * (size_t)Nl);
        for (int i = 0; !rc && i < Nl; i++)
            hg[i] = 1.0f / (1.0f + expf(-hg[i]));
        rc = rc || alloc_f32(m, &h->g, Nl) || OP->h2d(RT, h->g, hg, sizeof(float) * (size_t)Nl) ||
             OP->alloc(RT, (void **)&h->rows, sizeof(int) * (size_t)Nl, RT_POOL_MAIN) ||
             OP->h2d(RT, h->rows, rows, sizeof(int) * (size_t)Nl);
        drop(m, logit), drop(m, zeros);
    }
    free(hg), free(rows), free(hz);
    return rc;
}

int gpt_moe_shared_fwd(gpt_t *m, int c, int l, layer_saved_t *s, void **sv, void *z)
{
    if (!m->Fs)
        return 0;
    shared_t *h = calloc(1, sizeof *h);
    if (!h)
        return -1;
    *sv = h;
    int N = m->N, C = m->C;
    const void *x = s->h2;
    if (m->sp) {
        RT_TRY(alloc_act(m, &h->hf, (long)N * C));
        RT_TRY(gpt_tp_gather(m, h->hf, s->h2, C, STREAM_COMPUTE));
        x = h->hf;
    }
    void *part, *out;
    RT_TRY(alloc_act(m, &h->pre, (long)N * m->Fws));
    RT_TRY(alloc_act(m, &h->gl, (long)N * m->Fst));
    RT_TRY(gpt_gemm_fwd(m, N, h->pre, x, P(m, c, l, T_SH_FC1_W), param_of(m, c, l, T_SH_FC1_B), C, m->Fws));
    RT_TRY(m->swiglu ? OP->swiglu_fwd(RT, h->gl, h->pre, N, m->Fst) : OP->gelu_fwd(RT, h->gl, h->pre, (long)N * m->Fst));
    RT_TRY(alloc_act(m, &part, (long)N * C));
    RT_TRY(gpt_gemm_fwd(m, N, part, h->gl, P(m, c, l, T_SH_FC2_W), m->tp_i == 0 ? param_of(m, c, l, T_SH_FC2_B) : NULL,
                        m->Fst, C));
    RT_TRY(alloc_act(m, &h->y, (long)m->Nl * C));
    RT_TRY(tp_home(m, h->y, part));
    drop(m, part);
    out = h->y;
    if (P(m, c, l, T_SH_GATE_W) >= 0) { /* y scaled by the gate */
        RT_TRY(gate_fwd(m, c, l, s, h));
        RT_TRY(alloc_act(m, &out, (long)m->Nl * C));
        RT_TRY(OP->moe_gather(RT, out, h->y, h->rows, h->g, m->Nl, C));
    }
    RT_TRY(OP->add(RT, z, z, out, (long)m->Nl * C));
    if (out != h->y)
        drop(m, out);
    return 0;
}

/* The gate's backward: dy = g dz (into *dy, allocated), and the gate
 * logits' gradient dz . y g (1 - g) (host, then the act type the GEMMs
 * take) into w_g's gradient and dh. */
static int gate_bwd(gpt_t *m, int c, int l, layer_saved_t *s, shared_t *h, const void *dz, void **dy, void *dh)
{
    int Nl = m->Nl, C = m->C, rc = -1;
    float *dg, *hd = malloc(sizeof(float) * (size_t)Nl), *hg = malloc(sizeof(float) * (size_t)Nl);
    void *dx, *dga = NULL;
    RT_TRY(alloc_act(m, dy, (long)Nl * C));
    RT_TRY(OP->moe_gather(RT, *dy, dz, h->rows, h->g, Nl, C));
    if (hd && hg && !alloc_f32(m, &dg, Nl)) {
        rc = OP->moe_rowdot(RT, dg, dz, h->rows, h->y, Nl, C) || OP->d2h(RT, hd, dg, sizeof(float) * (size_t)Nl) ||
             OP->d2h(RT, hg, h->g, sizeof(float) * (size_t)Nl);
        for (int i = 0; !rc && i < Nl; i++)
            hd[i] *= hg[i] * (1.0f - hg[i]);
        rc = rc || alloc_act(m, &dga, Nl) || OP->act_from_f32(RT, dga, hd, Nl) ||
             OP->linear_wgrad(RT, grad_of(m, c, l, T_SH_GATE_W), NULL, dga, s->h2, Nl, C, 1) ||
             alloc_act(m, &dx, (long)Nl * C) || OP->linear_dgrad(RT, dx, dga, param_of(m, c, l, T_SH_GATE_W), Nl, C, 1) ||
             OP->add(RT, dh, dh, dx, (long)Nl * C);
        if (!rc)
            drop(m, dx);
        drop(m, dg), drop(m, dga);
    }
    free(hd), free(hg);
    return rc;
}

int gpt_moe_shared_bwd(gpt_t *m, int c, int l, layer_saved_t *s, void **sv, const void *dz, void *dh)
{
    shared_t *h = *sv;
    if (!h)
        return 0;
    int N = m->N, C = m->C;
    void *dy = (void *)dz, *dyf, *dgl, *dpre, *dxf, *dx;
    if (h->g)
        RT_TRY(gate_bwd(m, c, l, s, h, dz, &dy, dh));
    dyf = dy;
    if (m->sp) { /* the row-parallel FC2's output gradient, gathered */
        RT_TRY(alloc_act(m, &dyf, (long)N * C));
        RT_TRY(gpt_tp_gather(m, dyf, dy, C, STREAM_COMPUTE));
    }
    RT_TRY(alloc_act(m, &dgl, (long)N * m->Fst));
    RT_TRY(gpt_gemm_dgrad(m, N, dgl, dyf, P(m, c, l, T_SH_FC2_W), m->Fst, C));
    RT_TRY(gpt_gemm_wgrad(m, N, P(m, c, l, T_SH_FC2_W), grad_of(m, c, l, T_SH_FC2_B), dyf, h->gl, m->Fst, C));
    RT_TRY(alloc_act(m, &dpre, (long)N * m->Fws));
    RT_TRY(m->swiglu ? OP->swiglu_bwd(RT, dpre, dgl, h->pre, N, m->Fst)
                     : OP->gelu_bwd(RT, dpre, dgl, h->pre, (long)N * m->Fst));
    drop(m, dgl);
    RT_TRY(alloc_act(m, &dxf, (long)N * C));
    RT_TRY(gpt_gemm_dgrad(m, N, dxf, dpre, P(m, c, l, T_SH_FC1_W), C, m->Fws));
    RT_TRY(gpt_gemm_wgrad(m, N, P(m, c, l, T_SH_FC1_W), grad_of(m, c, l, T_SH_FC1_B), dpre, h->hf ? h->hf : s->h2, C,
                          m->Fws));
    drop(m, dpre);
    RT_TRY(alloc_act(m, &dx, (long)m->Nl * C));
    RT_TRY(tp_home(m, dx, dxf));
    RT_TRY(OP->add(RT, dh, dh, dx, (long)m->Nl * C));
    drop(m, dxf), drop(m, dx);
    if (dyf != dy)
        drop(m, dyf);
    if (dy != dz)
        drop(m, dy);
    gpt_moe_shared_free(m, sv);
    return 0;
}
