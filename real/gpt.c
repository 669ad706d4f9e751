/* real/gpt.c: forward and backward of one model chunk on one micro-batch
 * (gpt.h): the embedding on the first chunk, the chunk's layers in order
 * (gpt_layer.c) with recomputation's checkpoint groups rerun in the
 * backward, the head and loss on the last (both split by vocabulary over
 * TP); and the sums of the gradients that sequence parallelism leaves
 * partial on each TP rank. */
#include "real/gpt_layer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gpt_saved {
    int chunk;
    long long sample0;           /* the micro-batch's first sample in the global batch */
    const void *x_in;
    void *x_out;
    const int *tokens, *targets;
    float *losses;
    void *emb;                   /* embedding output (N, C) when the chunk embeds */
    uint8_t *emb_mask;           /* its dropout's kept mask, this rank's rows (Nl, C) */
    layer_saved_t *ls;           /* [the chunk's layers]; under recomputation the first recompute_layers
                                    hold only their output (the next layer's input) until the backward */
    void *xf, *logits;           /* head: final LayerNorm output (Nl, C), logits (N, Vl): this TP rank's
                                    columns of every token's */
    float *meanf, *rstdf, *lse;
};

/* ---- the chunk --------------------------------------------------------------------------- */

/* Frees what layer s saved for its backward except its output x3, which
 * is the next layer's input: a recomputed layer's checkpoint. */
static void strip_layer(gpt_t *m, layer_saved_t *s)
{
    void *x3 = s->x3;
    const void *x_in = s->x_in;
    int owned = s->x3_owned;
    s->x3_owned = 0;
    gpt_layer_free(m, s);
    s->x3 = x3, s->x_in = x_in, s->x3_owned = owned;
}

static int layer_fwd(gpt_t *m, gpt_saved_t *sv, int l, layer_saved_t *s, void *out)
{
    s->layer = gpt_layer_index(m, sv->chunk, l);
    s->sample0 = sv->sample0;
    return gpt_layer_fwd(m, sv->chunk, l, s, out);
}

/* Layer l closes its checkpoint group: under uniform recomputation in
 * groups of N (Megatron-LM's --recompute-num-layers) the group's last
 * layer, or the chunk's; else every layer. */
static int group_end(const gpt_t *m, int c, int l)
{
    return (l + 1) % m->recompute_group == 0 || l == gpt_chunk_layers(m, c) - 1;
}

/* The chunk's layers from x; the last layer's output into out. Under
 * recomputation (uniform: every layer, in groups of N; block: the first N,
 * one by one) each group keeps only its last layer's output, the next
 * group's input, from the end of its forward, and reruns whole in the
 * backward: a layer inside a group frees its output once the next layer
 * has read it. Under --fused-elementwise each layer's output add runs in one
 * kernel with the next layer's first norm, or with the final norm, as the
 * model prices it (model/layer.c, residual_norm); a rerun layer does not
 * (the next layer's norm is done). */
static int layers_fwd(gpt_t *m, gpt_saved_t *sv, const void *x, void *out)
{
    int L = gpt_chunk_layers(m, sv->chunk);
    if (L == 0) /* the embedding or the loss alone (model/split.h): the input goes on as it is */
        return out ? gpt_copy_act(m, out, x, (long)m->Nl * m->C) : 0;
    for (int l = 0; l < L; l++) {
        layer_saved_t *s = &sv->ls[l];
        norm_dst_t next;
        s->x_in = x;
        s->fuse_next = NULL;
        if (m->fused && l + 1 < L) {
            layer_saved_t *n = &sv->ls[l + 1];
            next = (norm_dst_t){&n->h1, &n->mean1, &n->rstd1, P(m, sv->chunk, l + 1, T_LN1_W),
                                P(m, sv->chunk, l + 1, T_LN1_B)};
            s->fuse_next = &next;
        } else if (m->fused && gpt_has_head(m, sv->chunk)) {
            next = (norm_dst_t){&sv->xf, &sv->meanf, &sv->rstdf, m->t_lnf_w, m->t_lnf_b};
            s->fuse_next = &next;
        }
        RT_TRY(layer_fwd(m, sv, l, s, l == L - 1 ? out : NULL));
        s->fuse_next = NULL;
        if (l < m->recompute_layers)
            strip_layer(m, s);
        else
            RT_TRY(gpt_offload(m, s));
        if (l > 0 && l - 1 < m->recompute_layers && !group_end(m, sv->chunk, l - 1)) { /* read by layer l: rebuilt later */
            layer_saved_t *p = &sv->ls[l - 1];
            if (p->x3_owned)
                drop(m, p->x3);
            p->x3 = NULL, p->x3_owned = 0;
        }
        x = s->x3;
    }
    return 0;
}

/* The backward reached layer `last`, the end of a checkpoint group: rerun
 * the group's forward from its kept input, each layer keeping all it saves
 * (its output add on its own: the next layer's first norm reruns too).
 * The group's last output is kept (the next group read it); *kept and
 * *kept_owned return it, for the caller to free after that layer's
 * backward. */
static int group_rerun(gpt_t *m, gpt_saved_t *sv, int last, void **kept, int *kept_owned)
{
    int first = last - last % m->recompute_group;
    const void *x = sv->ls[first].x_in;
    for (int l = first; l <= last; l++) {
        layer_saved_t *s = &sv->ls[l];
        if (l == last)
            *kept = s->x3, *kept_owned = s->x3_owned;
        memset(s, 0, sizeof *s);
        s->x_in = x;
        RT_TRY(layer_fwd(m, sv, l, s, NULL));
        x = s->x3;
    }
    return 0;
}

/* The chunk's input: the received activation, or this rank's rows of the
 * embedded tokens. */
static const void *chunk_input(gpt_t *m, gpt_saved_t *sv)
{
    return sv->emb ? A(m, sv->emb, gpt_row0_local(m) * m->C) : sv->x_in;
}

/* The head's input: the chunk's last layer's output, or the chunk's own
 * input when it holds no layer. */
static const void *last_output(gpt_t *m, gpt_saved_t *sv)
{
    int L = gpt_chunk_layers(m, sv->chunk);
    return L ? sv->ls[L - 1].x3 : chunk_input(m, sv);
}

/* The output layer's weight: the word embedding, or its own when untied. */
static int out_weight(const gpt_t *m) { return m->tied ? m->t_wte : m->t_wout; }

/* The final hidden states of every token, for the output layer: xf
 * itself, or (SP) gathered from the TP ranks into *full. */
static int head_input(gpt_t *m, gpt_saved_t *sv, void **full, const void **x)
{
    *full = NULL, *x = sv->xf;
    if (!m->sp)
        return 0;
    RT_TRY(alloc_act(m, full, (long)m->N * m->C));
    *x = *full;
    return gpt_tp_gather(m, *full, sv->xf, m->C, STREAM_COMPUTE);
}

/* The output layer and the loss, split by vocabulary (Megatron-LM's
 * vocab-parallel cross-entropy): each TP rank's logits are its Vl columns
 * for all N tokens; the rows' (lse, target logit) of every rank, gathered
 * over TP, merge into each row's loss on every rank. */
static int head_fwd(gpt_t *m, gpt_saved_t *sv, const void *x)
{
    int N = m->N, C = m->C, Vl = m->Vl;
    if (!sv->xf) { /* else the last layer's output add ran it (fuse_next) */
        RT_TRY(gpt_alloc_ln(m, &sv->meanf, &sv->rstdf, &sv->xf));
        RT_TRY(gpt_ln_fwd(m, NULL, sv->xf, sv->meanf, sv->rstdf, x, NULL, NULL, NULL, m->t_lnf_w, m->t_lnf_b));
    }
    void *full;
    const void *in;
    RT_TRY(head_input(m, sv, &full, &in));
    RT_TRY(alloc_act(m, &sv->logits, (long)N * Vl));
    RT_TRY(alloc_f32(m, &sv->lse, N));
    RT_TRY(OP->linear_fwd(RT, sv->logits, in, gpt_param(m, out_weight(m)), NULL, N, C, Vl));
    drop(m, full);
    if (m->t == 1)
        return OP->xent_fwd(RT, sv->losses, sv->lse, sv->logits, sv->targets, N, Vl);
    float *parts;
    RT_TRY(alloc_f32(m, &parts, 2L * m->t * N));
    RT_TRY(OP->xent_part(RT, parts + 2L * m->tp_i * N, sv->logits, sv->targets, m->v0, N, Vl));
    RT_TRY(CM->op->allgather(CM, GRP_TP, parts, 2L * N, DT_F32, STREAM_COMPUTE));
    RT_TRY(OP->xent_merge(RT, sv->losses, sv->lse, parts, sv->targets, m->t, N));
    drop(m, parts);
    return 0;
}

/* The embedded tokens into sv->emb (N, C): this rank's rows of the
 * vocabulary, the learned positions once (TP rank 0), summed over TP as
 * Megatron-LM's VocabParallelEmbedding sums them: all-reduced, or, under
 * SP without learned positions, reduce-scattered straight to this rank's
 * rows (the only ones then filled). */
static int embedding_fwd(gpt_t *m, gpt_saved_t *sv, const int *tokens)
{
    int scatter = m->sp && m->t_wpe < 0;
    void *out = sv->emb;
    if (scatter)
        RT_TRY(alloc_act(m, &out, (long)m->N * m->C));
    RT_TRY(gpt_embed(m, out, tokens, gpt_param(m, m->t_wte),
                     m->t_wpe >= 0 && m->tp_i == 0 ? gpt_param(m, m->t_wpe) : NULL));
    if (m->t == 1)
        return 0;
    if (!scatter)
        return CM->op->allreduce(CM, GRP_TP, out, (long)m->N * m->C, DT_ACT, STREAM_COMPUTE);
    RT_TRY(CM->op->reduce_scatter(CM, GRP_TP, A(m, sv->emb, gpt_row0_local(m) * m->C), out, (long)m->Nl * m->C,
                                  DT_ACT, STREAM_COMPUTE));
    drop(m, out);
    return 0;
}

int gpt_chunk_fwd(gpt_t *m, int chunk, int mb, const void *x_in, void *x_out, const int *tokens,
                  const int *targets, float *losses, gpt_saved_t **saved)
{
    gpt_saved_t *sv = calloc(1, sizeof *sv);
    if (!sv || !(sv->ls = calloc((size_t)gpt_chunk_layers(m, chunk) + 1, sizeof *sv->ls))) {
        free(sv);
        fprintf(stderr, "%s:%d: out of host memory\n", __FILE__, __LINE__);
        return -1;
    }
    *saved = sv;
    sv->chunk = chunk, sv->x_in = x_in, sv->x_out = x_out, sv->tokens = tokens, sv->targets = targets;
    sv->losses = losses;
    sv->sample0 = ((long long)m->comm->data_i * m->job->num_microbatches + mb) * m->B; /* as real/data.c */
    if (gpt_has_embedding(m, chunk)) {
        RT_TRY(alloc_act(m, &sv->emb, (long)m->N * m->C));
        RT_TRY(embedding_fwd(m, sv, tokens));
        /* the embedding dropout on this rank's rows (all of them without SP), as Megatron-LM drops after
           scattering to the sequence-parallel region */
        kern_dropout d;
        const kern_dropout *dp;
        long row0 = gpt_row0_local(m);
        void *rows = A(m, sv->emb, row0 * m->C);
        RT_TRY(gpt_hidden_drop(m, sv->sample0, 0, KERN_DROP_EMBED, rows, m->Nl, row0, &d, &sv->emb_mask, &dp));
        if (dp)
            RT_TRY(OP->dropout(RT, rows, sv->emb_mask, rows, (long)m->Nl * m->C, *dp));
    }
    RT_TRY(layers_fwd(m, sv, chunk_input(m, sv), x_out));
    if (gpt_has_head(m, chunk))
        RT_TRY(head_fwd(m, sv, last_output(m, sv)));
    return 0;
}

/* dlogits in place of the logits; the output layer's weight gradient from
 * every token's final hidden states (re-gathered under SP, as Megatron-LM's
 * sequence-parallel linear layers do); their gradient summed over TP
 * (reduce-scattered to this rank's rows under SP), then the final norm's. */
static int head_bwd(gpt_t *m, gpt_saved_t *sv, void *dres, float dloss)
{
    int N = m->N, Nl = m->Nl, C = m->C, Vl = m->Vl;
    const void *x = last_output(m, sv), *in;
    void *full, *dx, *dxf;
    RT_TRY(OP->xent_bwd(RT, sv->logits, sv->logits, sv->lse, sv->targets, m->v0, dloss, N, Vl));
    RT_TRY(alloc_act(m, &dx, (long)N * C));
    RT_TRY(OP->linear_dgrad(RT, dx, sv->logits, gpt_param(m, out_weight(m)), N, C, Vl));
    RT_TRY(head_input(m, sv, &full, &in));
    RT_TRY(OP->linear_wgrad(RT, gpt_grad(m, out_weight(m)), NULL, sv->logits, in, N, C, Vl));
    drop(m, full);
    dxf = dx;
    if (m->sp) {
        RT_TRY(alloc_act(m, &dxf, (long)Nl * C));
        RT_TRY(CM->op->reduce_scatter(CM, GRP_TP, dxf, dx, (long)Nl * C, DT_ACT, STREAM_COMPUTE));
        drop(m, dx);
    } else if (m->t > 1) {
        RT_TRY(CM->op->allreduce(CM, GRP_TP, dx, (long)N * C, DT_ACT, STREAM_COMPUTE));
    }
    RT_TRY(OP->memset0(RT, dres, (size_t)Nl * C * RT->act_bytes, STREAM_COMPUTE));
    RT_TRY(gpt_ln_bwd(m, dres, dxf, x, sv->meanf, sv->rstdf, m->t_lnf_w, m->t_lnf_b));
    drop(m, dxf);
    return 0;
}

/* dres: the embedding output's gradient (this rank's rows), through the
 * embedding dropout's kept mask in place; under SP gathered over TP, as
 * each rank's rows of the vocabulary take gradients from every token. */
static int embedding_bwd(gpt_t *m, gpt_saved_t *sv, void *dres)
{
    float *dwte = gpt_grad(m, m->t_wte), *dwpe = gpt_grad(m, m->t_wpe);
    const void *d = dres;
    if (sv->emb_mask)
        RT_TRY(OP->dropout_masked(RT, dres, dres, sv->emb_mask, (long)m->Nl * m->C, gpt_hidden_scale(m)));
    if (m->sp) {
        RT_TRY(gpt_tp_gather(m, sv->emb, dres, m->C, STREAM_COMPUTE));
        d = sv->emb;
    }
    return gpt_embed_bwd(m, dwte, dwpe, d, sv->tokens);
}

int gpt_chunk_bwd(gpt_t *m, gpt_saved_t *sv, void *dres, float dloss)
{
    int head = gpt_has_head(m, sv->chunk), L = gpt_chunk_layers(m, sv->chunk);
    if (head) /* reads the last layer's output, which every method keeps */
        RT_TRY(head_bwd(m, sv, dres, dloss));
    for (int l = L - 1; l >= 0; l--) {
        layer_saved_t *s = &sv->ls[l];
        void *out = NULL;
        int owned = 0;
        if (l < m->recompute_layers && group_end(m, sv->chunk, l)) /* the kept output's readers are done */
            RT_TRY(group_rerun(m, sv, l, &out, &owned));
        RT_TRY(gpt_fetch(m, s, l > 0 ? &sv->ls[l - 1] : NULL)); /* the next layer's prefetched beside */
        RT_TRY(gpt_layer_bwd(m, sv->chunk, l, s, dres));
        gpt_layer_free(m, s); /* a rerun layer's output too: the layer after it is done */
        if (owned)
            drop(m, out);
    }
    if (sv->emb)
        RT_TRY(embedding_bwd(m, sv, dres));
    if (head) {
        drop(m, sv->xf), drop(m, sv->logits);
        drop(m, sv->meanf), drop(m, sv->rstdf), drop(m, sv->lse);
    }
    drop(m, sv->emb), drop(m, sv->emb_mask);
    free(sv->ls);
    free(sv);
    return 0;
}

/* Tensors whose gradients chunk c produces: its pieces, and the word
 * embedding when c embeds or (tied) ends the model. */
static int in_chunk(const gpt_t *m, int i, int c)
{
    const gpt_tensor_t *t = &m->tensors[i];
    if (i == m->t_wte && (gpt_has_embedding(m, c) || (m->tied && gpt_has_head(m, c))))
        return 1;
    const gpt_piece_t *a = &m->pieces[m->chunk_piece0[c]], *b = &m->pieces[m->chunk_piece0[c + 1] - 1];
    return t->off >= a->off && t->off < b->off + b->n;
}

int gpt_sync_sp_grads(gpt_t *m, int c)
{
    if (!m->sp)
        return 0;
    for (int i = 0; i < m->ntensors; i++)
        if (m->tensors[i].sp_partial && in_chunk(m, i, c))
            RT_TRY(CM->op->allreduce(CM, GRP_TP, gpt_grad(m, i), m->tensors[i].n, DT_F32, STREAM_COMPUTE));
    return 0;
}
