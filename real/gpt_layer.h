/* real/gpt_layer.h: inside the GPT of gpt.h, between the chunk driver
 * (gpt.c: embedding, the layers in order with recomputation's checkpoint
 * groups, head and loss) and the layers (gpt_layer.c: one transformer
 * layer's forward and backward with its TP/SP collectives). Only those two
 * files include it: its short helper names (RT, OP, CM, A, P, drop) are
 * theirs. */
#ifndef REAL_GPT_LAYER_H
#define REAL_GPT_LAYER_H

#include "real/gpt.h"

/* A norm that a layer's last residual add can run fused with (under
 * --fused-elementwise): the next layer's first, or the final one. */
typedef struct {
    void **h;                    /* its output (Nl, C), allocated by whoever runs it */
    float **mean, **rstd;
    int tw, tb;                  /* its weight and bias tensors */
} norm_dst_t;

typedef struct moe_saved moe_saved_t; /* gpt_moe.c's */

/* A tensor a layer keeps for its backward, as activation offloading moves
 * it (gpt_offload.c): where its pointer lives, its rows, bytes per row. */
typedef struct {
    void **p;
    long rows;
    size_t row_bytes;
} gpt_kept_t;

typedef struct {
    const void *x_in;            /* layer input (Nl, C), not owned */
    float *mean1, *rstd1, *mean2, *rstd2;
    void *h1, *h2;               /* LayerNorm outputs (Nl, C) */
    void *q, *k, *v, *ao, *att;  /* (N, nh*HS), (N, g*HS) x 2, (N, nh*HS), saved attention */
    void *x2;                    /* residual after attention (Nl, C) (standard block) */
    void *pre, *gl;              /* activation input (bias added) (N, Fw) and output (N, Ft) */
    void *cat;                   /* parallel block: [ao | gl] (N, nh*HS + Ft) */
    void *x3;                    /* layer output (Nl, C) */
    int x3_owned;
    uint8_t *mask_a, *mask_m;    /* hidden dropout's kept masks (Nl, C) after attention and after the MLP */
    int layer;                   /* in the whole model: the dropout sites */
    long long sample0;           /* the micro-batch's first sample in the global batch: dropout indices */
    const norm_dst_t *fuse_next; /* forward only: the norm its output add runs fused with (NULL: none); when
                                    set, the next layer finds h1, mean1, rstd1 (or the head its xf) filled */
    void *cpb[4];                /* what context parallelism's attention keeps (gpt_cp.c) */
    int offloaded;               /* tensors whose first rows are in host memory (gpt_offload.c) */
    int prefetched;              /* their copies back issued (whole again, once the copy stream has run) */
    void *off_host[GPT_MAX_KEPT]; /* their host rows */
    void *off_dev[GPT_MAX_KEPT]; /* their other rows on the device, while prefetched */
    moe_saved_t *moe;            /* an MoE layer's routing and experts' activations */
} layer_saved_t;

#define RT (m->rt)
#define OP (m->rt->op)
#define CM (m->comm)

static inline void *A(const gpt_t *m, const void *p, long elems) { return (char *)p + elems * m->rt->act_bytes; }

static inline int alloc_act(gpt_t *m, void **p, long elems)
{
    return OP->alloc(RT, p, (size_t)elems * RT->act_bytes, RT_POOL_MAIN);
}
static inline int alloc_f32(gpt_t *m, float **p, long n)
{
    return OP->alloc(RT, (void **)p, (size_t)n * 4, RT_POOL_MAIN);
}
static inline void drop(gpt_t *m, void *p) { OP->free(RT, p); }

/* Tensor k of layer l of model chunk c. */
static inline int P(const gpt_t *m, int chunk, int l, int k)
{
    return m->layer_tensor[((long)m->chunk_layer0[chunk] + l) * T_PER_LAYER + k];
}

/* One layer's forward of model chunk c, layer l (within the chunk), from
 * s->x_in: saves in s what its backward needs, its output in s->x3 (out
 * when given, else allocated and owned). s->layer and s->sample0 name its
 * dropout sites. */
int gpt_layer_fwd(gpt_t *m, int c, int l, layer_saved_t *s, void *out);

/* Its backward: dres, the gradient of its output (Nl, C), becomes that of
 * its input, in place; the weights' gradients accumulate. */
int gpt_layer_bwd(gpt_t *m, int c, int l, layer_saved_t *s, void *dres);

/* Frees everything s holds (its output too when owned) and clears it. */
void gpt_layer_free(gpt_t *m, layer_saved_t *s);

/* Context parallelism (gpt_cp.c): the rotary turn of x (N, H, HS) and the
 * embedding at this rank's places in the sequence (whole sequences
 * without CP), and the attention core of layer s over the whole sequence
 * (CP above 1), its backward into dq, dk, dv (this rank's rows); sh is the
 * layer's shape for whole sequences of this rank's rows. */
int gpt_rope(gpt_t *m, void *x, int H, int inverse);
/* The hidden dropout d of x's rows (rows, C) from row row0 of this rank's
 * (B, T) rows under CP, in place, each element's mask by its place in the
 * sequence (gpt_hidden_drop's). */
int gpt_cp_drop(gpt_t *m, long long sample0, kern_dropout d, void *x, uint8_t *mask, long rows, long row0);
int gpt_embed(gpt_t *m, void *out, const int *tokens, const void *wte, const void *wpe);
int gpt_embed_bwd(gpt_t *m, float *dwte, float *dwpe, const void *dout, const int *tokens);
int gpt_cp_attn_fwd(gpt_t *m, layer_saved_t *s, void *out, kern_attn_shape sh);
int gpt_cp_attn_bwd(gpt_t *m, layer_saved_t *s, const void *dao, void *dq, void *dk, void *dv, kern_attn_shape sh);

/* The MLP of an MoE layer (gpt_moe.c): z (Nl, C) from s->h2, the second
 * norm's output; its backward from dz (Nl, C) into dh (Nl, C), the
 * gradient of that output, the router's and experts' gradients
 * accumulating; gpt_moe_free frees what the forward kept. */
int gpt_moe_fwd(gpt_t *m, int c, int l, layer_saved_t *s, void *z);
int gpt_moe_bwd(gpt_t *m, int c, int l, layer_saved_t *s, const void *dz, void *dh);
void gpt_moe_free(gpt_t *m, layer_saved_t *s);
/* What an MoE layer keeps per row (its experts' rows, its shared expert's:
 * gpt_moe_shared_kept), appended to k from k[n]; the new count.
 * gpt_kept_add appends a list's tensors that exist (their pointer set). */
int gpt_kept_add(gpt_kept_t *k, int n, const gpt_kept_t *list, int count);
int gpt_moe_kept(gpt_t *m, layer_saved_t *s, gpt_kept_t *k, int n);
int gpt_moe_shared_kept(gpt_t *m, void *sv, gpt_kept_t *k, int n);
/* Its shared expert (gpt_moe_shared.c; nothing without one): z += its
 * output of s->h2, its state in *sv; dh += its input's gradient from dz,
 * its weights' gradients accumulating, *sv freed. */
int gpt_moe_shared_fwd(gpt_t *m, int c, int l, layer_saved_t *s, void **sv, void *z);
int gpt_moe_shared_bwd(gpt_t *m, int c, int l, layer_saved_t *s, void **sv, const void *dz, void *dh);
void gpt_moe_shared_free(gpt_t *m, void **sv);

/* Activation offloading (gpt_offload.c): after a layer's forward, the
 * first --activation-offload-fraction of the rows it keeps to host memory;
 * before its backward, back, and the copies back of `next` (the layer the
 * backward reaches after s, or NULL) issued beside s's backward on the
 * GPU. Nothing without the flag. */
int gpt_offload(gpt_t *m, layer_saved_t *s);
int gpt_fetch(gpt_t *m, layer_saved_t *s, layer_saved_t *next);

/* The layers' GEMMs of weight tensor tw (rows R: a layer's N, an expert's
 * tokens; K in, OC out), their inputs as FP8 reads them: out (R, OC) = x @
 * W^T + b; dx (R, K) = dy @ W; dW (OC, K) += dy^T x with db (OC, unless
 * NULL) from dy unquantised, as TE's bias gradient. */
int gpt_gemm_fwd(gpt_t *m, int rows, void *out, const void *x, int tw, const void *b, int K, int OC);
int gpt_gemm_dgrad(gpt_t *m, int rows, void *dx, const void *dy, int tw, int K, int OC);
int gpt_gemm_wgrad(gpt_t *m, int rows, int tw, float *db, const void *dy, const void *x, int K, int OC);

/* The cast those GEMMs apply, for the chunked ones of --tp-comm-overlap
 * (gpt_tp_ring.c): x (n act elements) as the GEMM of weight tensor tw reads
 * it in role `role` (its input, weight or output gradient), on the current
 * compute stream: x itself without --fp8-format, else a quantised copy in
 * *q (its amax recorded), which gpt_fp8_drop frees once every stream that
 * reads it has been joined back; gpt_fp8_cast_to casts into dst (with
 * --fp8-format only). */
enum { GPT_FP8_IN, GPT_FP8_W, GPT_FP8_GRAD };
int gpt_fp8_cast(gpt_t *m, int tw, int role, const void *x, long n, const void **q);
int gpt_fp8_cast_to(gpt_t *m, int tw, int role, void *dst, const void *x, long n);
void gpt_fp8_drop(gpt_t *m, const void *q, const void *x);

/* --tp-comm-overlap's chunked GEMMs of weight tw (gpt_tp_ring.c), with SP:
 * the ring all-gather of inp_l (Nl, C) into full (N, C) against out (N,
 * OC) = full @ W^T + bias, or with rows_fn_dgrad the row-parallel dgrad
 * out (N, OC) = full (N, C) @ W (C, OC); and the ring reduce-scatter of
 * inp (N, K) @ W^T + b into this rank's y (Nl, C). */
int gpt_ring_gather_gemm(gpt_t *m, void *full, const void *inp_l, int rows_fn_dgrad, void *out, int tw,
                         const void *bias, int C, int OC);
int gpt_ring_gemm_scatter(gpt_t *m, void *y, const void *inp, int tw, const void *b, int K);

/* The pieces the driver shares with the layers: a norm's buffers (mean and
 * rstd (Nl), output (Nl, C)), the norm with its residual add and its
 * backward, the hidden dropout, and a copy of act elements. */
int gpt_alloc_ln(gpt_t *m, float **mean, float **rstd, void **h);
int gpt_ln_fwd(gpt_t *m, void *residual, void *out, float *mean, float *rstd, const void *inp, const void *skip,
               const kern_dropout *drop, uint8_t *mask, int tw, int tb);
int gpt_ln_bwd(gpt_t *m, void *dres, const void *dout, const void *xln, const float *mean, const float *rstd, int tw,
               int tb);
/* Gathers inp_l (Nl, C) of every TP rank into full (N, C) on `stream`
 * (sequence parallelism's all-gather). */
int gpt_tp_gather(gpt_t *m, void *full, const void *inp_l, int C, int stream);
int gpt_hidden_drop(gpt_t *m, long long sample0, int layer, int kind, void *x, long rows, long row0,
                    kern_dropout *d, uint8_t **mask, const kern_dropout **dp);
float gpt_hidden_scale(const gpt_t *m);
long gpt_row0_local(const gpt_t *m);
/* dst = src, elems act elements, on the compute stream. */
int gpt_copy_act(gpt_t *m, void *dst, const void *src, long elems);

#endif
