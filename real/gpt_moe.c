/* real/gpt_moe.c: the MLP of an MoE layer (gpt_layer.h), as Megatron-Core's
 * MoELayer runs it with either token dispatcher, each expert on its EP
 * rank, cut by ETP as a TP rank cuts a dense MLP:
 *   router   logits (Nl, E) = h W_r^T; each token's top-k experts, their
 *            softmax the combine weights (kernels/moe.h);
 *   drop     with --moe-expert-capacity-factor f, each expert keeps at most
 *            ceil(tokens x k / E x f) of a micro-batch's (token, expert)
 *            pairs, those of the highest weight (ties: the earlier token),
 *            the rest dropped (Megatron-Core's "probs" drop policy). Unlike
 *            Megatron-Core, which ranks each rank's shard of the sequence
 *            apart, the ranking spans the whole micro-batch (its TP x CP
 *            ranks' pairs, gathered), so every plan drops the same pairs as
 *            one rank does;
 *   permute  alltoall: the kept pairs' rows in expert order; an all-to-all
 *            over EP sends each to its expert's rank (counts first), where
 *            they are sorted by local expert. allgather: every rank
 *            gathers its EP group's tokens and their routing, and takes
 *            the pairs of its own experts. Padded to the capacity with
 *            --moe-pad-expert-input-to-capacity;
 *   gather   with ETP > 1, the rows an EP position's ETP ranks received
 *            gathered over ETP (Megatron-Core's gather over the experts'
 *            TP group after the all-to-all): each computes its slice of
 *            every expert's width on all of them;
 *   experts  per local expert FC1 (+ bias), GeLU or SwiGLU, FC2 (+ bias,
 *            on ETP rank 0: the others' partial sums come without it);
 *   combine  with ETP > 1 the partial outputs summed over ETP home to the
 *            rank that received each row (a reduce-scatter); back by the
 *            reverse all-to-all (or, allgather, into the group's tokens
 *            and reduce-scattered over EP), each token's rows summed with
 *            their weights.
 * With a shared expert (gpt_moe_shared.c) its output adds to theirs.
 * The auxiliary load-balancing loss (--moe-router-load-balancing-type
 * aux_loss, --moe-aux-loss-coeff a) is the switch transformer's over each
 * micro-batch, as Megatron-Core's over its TP x CP group:
 *   a E / (k T^2) sum_e (sum_n scores[n][e]) tokens[e]
 * (T tokens, tokens[e] the pairs routed to e before dropping); with
 * seq_aux_loss the same over each sequence, averaged; its
 * gradient joins the router's, scaled as the language-model loss is (a
 * mean over the global batch's micro-batches), and it is not in the
 * reported loss (Megatron-Core logs it apart). The routing lives on the
 * host: probabilities and choices are copied back, the permutation built
 * there and copied down, as Megatron-Core's dispatcher synchronises for
 * its counts. */
#include "real/gpt_moe_int.h"

#include "real/health.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gpt_moe_free(gpt_t *m, layer_saved_t *s)
{
    moe_saved_t *v = s->moe;
    if (!v)
        return;
    void *ps[] = {v->probs, v->scores, v->coef, v->idx, v->perm_tok, v->sort_rows, v->unsort_rows, v->inv, v->perm_w,
                  v->xe, v->pre, v->gl, v->ys};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        drop(m, ps[i]);
    free(v->perm_pair), free(v->scount), free(v->rcount), free(v->gcount), free(v->ecount);
    gpt_moe_shared_free(m, &v->shared);
    free(v);
    s->moe = NULL;
}

/* The dispatchers' collectives over EP and ETP, their host time counted
 * (compare's all-to-all class): rc, the collective's, since t0. */
static int timed(gpt_t *m, int64_t t0, int rc)
{
    m->moe_a2a_ns += rt_now_ns() - t0;
    return rc;
}

int moe_ep_alltoallv(gpt_t *m, void *out, const long *rrows, const void *in, const long *srows, long width, int dt)
{
    long sc[m->ep], rc[m->ep];
    for (int p = 0; p < m->ep; p++)
        sc[p] = srows[p] * width, rc[p] = rrows[p] * width;
    int64_t t0 = rt_now_ns();
    int rc_a2a = CM->op->alltoallv(CM, GRP_EP, out, rc, in, sc, dt, STREAM_COMPUTE);
    return m->ep > 1 ? timed(m, t0, rc_a2a) : rc_a2a; /* over 1 rank a copy: no all-to-all to price */
}

int moe_ep_gather(gpt_t *m, void **full, const void *local, long count, int dt)
{
    size_t b = (size_t)count * (size_t)comm_dt_bytes(CM, dt);
    RT_TRY(dev_alloc(m, full, b * (size_t)m->ep));
    RT_TRY(OP->copy2d(RT, (char *)*full + b * (size_t)m->ep_i, b, local, b, b, 1, STREAM_COMPUTE));
    int64_t t0 = rt_now_ns();
    return timed(m, t0, CM->op->allgather(CM, GRP_EP, *full, count, dt, STREAM_COMPUTE));
}

/* And its way home: out (count) = this rank's part of the sum over EP of
 * full (EP x count). */
static int ep_home(gpt_t *m, void *out, const void *full, long count, int dt)
{
    int64_t t0 = rt_now_ns();
    return timed(m, t0, CM->op->reduce_scatter(CM, GRP_EP, out, full, count, dt, STREAM_COMPUTE));
}

/* With ETP > 1 the rows of an EP position's ETP ranks, gathered: *out
 * (Rg, C, allocated) holds ETP rank q's gcount[q] rows after rank q - 1's.
 * An all-to-all over ETP of this rank's R rows, one copy for each. */
static int etp_gather(gpt_t *m, moe_saved_t *v, const void *rows, void **out)
{
    long C = m->C, sc[m->etp], rc[m->etp];
    size_t b = (size_t)(v->R * C) * (size_t)comm_dt_bytes(CM, DT_ACT);
    void *copies;
    RT_TRY(alloc_act(m, &copies, v->R * C * m->etp));
    RT_TRY(alloc_act(m, out, v->Rg * C));
    for (int q = 0; q < m->etp; q++) {
        sc[q] = v->R * C, rc[q] = v->gcount[q] * C;
        if (b)
            RT_TRY(OP->copy2d(RT, (char *)copies + b * (size_t)q, b, rows, b, b, 1, STREAM_COMPUTE));
    }
    int64_t t0 = rt_now_ns();
    RT_TRY(timed(m, t0, CM->op->alltoallv(CM, GRP_ETP, *out, rc, copies, sc, DT_ACT, STREAM_COMPUTE)));
    drop(m, copies);
    return 0;
}

/* Its way home: out (R, C) = the sum over the ETP ranks, in their order,
 * of each one's partial rows (Rg, C, laid out as etp_gather's) for this
 * rank's R. */
static int etp_sum_home(gpt_t *m, moe_saved_t *v, const void *rows, void *out)
{
    long C = m->C, n = v->R * C, sc[m->etp], rc[m->etp];
    void *parts;
    RT_TRY(alloc_act(m, &parts, n * m->etp));
    for (int q = 0; q < m->etp; q++)
        sc[q] = v->gcount[q] * C, rc[q] = n;
    int64_t t0 = rt_now_ns();
    RT_TRY(timed(m, t0, CM->op->alltoallv(CM, GRP_ETP, parts, rc, rows, sc, DT_ACT, STREAM_COMPUTE)));
    RT_TRY(OP->add(RT, out, parts, A(m, parts, n), n));
    for (int q = 2; q < m->etp; q++)
        RT_TRY(OP->add(RT, out, out, A(m, parts, n * q), n));
    drop(m, parts);
    return 0;
}

/* The experts' rows a layer keeps for its backward: their input, FC1's
 * output and the activation (Rp rows, expert order), their outputs back
 * home (M rows, sent order); then its shared expert's. */
int gpt_moe_kept(gpt_t *m, layer_saved_t *s, gpt_kept_t *k, int n)
{
    moe_saved_t *v = s->moe;
    if (!v)
        return n;
    size_t ab = RT->act_bytes;
    gpt_kept_t mine[] = {{&v->xe, v->Rp, m->C * ab}, {&v->pre, v->Rp, m->Fwe * ab}, {&v->gl, v->Rp, m->Fe * ab},
                         {&v->ys, v->M, m->C * ab}};
    return gpt_moe_shared_kept(m, v->shared, k, gpt_kept_add(k, n, mine, (int)(sizeof mine / sizeof mine[0])));
}

/* ---- the experts ---------------------------------------------------------------------- */

/* Local expert j's tensor k (T_FC1_W ..) of layer l, -1 where absent. */
static int expert_tensor(const gpt_t *m, int c, int l, int j, int k)
{
    int t0 = P(m, c, l, k);
    return t0 < 0 ? -1 : t0 + j * gpt_moe_expert_tensors(m);
}

static int experts_fwd(gpt_t *m, int c, int l, moe_saved_t *v, void *ye)
{
    RT_TRY(alloc_act(m, &v->pre, v->Rp * m->Fwe));
    RT_TRY(alloc_act(m, &v->gl, v->Rp * m->Fe));
    long o = 0;
    for (int j = 0; j < m->El; o += v->ecount[j++]) {
        int n = (int)v->ecount[j];
        if (!n)
            continue;
        void *x = A(m, v->xe, o * m->C), *pre = A(m, v->pre, o * m->Fwe), *gl = A(m, v->gl, o * m->Fe);
        RT_TRY(gpt_gemm_fwd(m, n, pre, x, expert_tensor(m, c, l, j, T_FC1_W),
                            gpt_param(m, expert_tensor(m, c, l, j, T_FC1_B)), m->C, m->Fwe));
        RT_TRY(m->swiglu ? OP->swiglu_fwd(RT, gl, pre, n, m->Fe) : OP->gelu_fwd(RT, gl, pre, (long)n * m->Fe));
        int b2 = m->etp_i == 0 ? expert_tensor(m, c, l, j, T_FC2_B) : -1; /* once: the rest are partial sums */
        RT_TRY(gpt_gemm_fwd(m, n, A(m, ye, o * m->C), gl, expert_tensor(m, c, l, j, T_FC2_W), gpt_param(m, b2),
                            m->Fe, m->C));
    }
    return 0;
}

/* dye (Rp, C) in, dxe (Rp, C) out; the experts' gradients accumulate. */
static int experts_bwd(gpt_t *m, int c, int l, moe_saved_t *v, const void *dye, void *dxe)
{
    void *dgl, *dpre;
    RT_TRY(alloc_act(m, &dgl, v->Rp * m->Fe));
    RT_TRY(alloc_act(m, &dpre, v->Rp * m->Fwe));
    long o = 0;
    for (int j = 0; j < m->El; o += v->ecount[j++]) {
        int n = (int)v->ecount[j], t1 = expert_tensor(m, c, l, j, T_FC1_W), t2 = expert_tensor(m, c, l, j, T_FC2_W);
        int b1 = expert_tensor(m, c, l, j, T_FC1_B), b2 = expert_tensor(m, c, l, j, T_FC2_B);
        if (!n)
            continue;
        const void *dy = A(m, dye, o * m->C), *x = A(m, v->xe, o * m->C), *pre = A(m, v->pre, o * m->Fwe);
        void *g = A(m, dgl, o * m->Fe), *dp = A(m, dpre, o * m->Fwe);
        RT_TRY(gpt_gemm_dgrad(m, n, g, dy, t2, m->Fe, m->C));
        RT_TRY(gpt_gemm_wgrad(m, n, t2, gpt_grad(m, b2), dy, A(m, v->gl, o * m->Fe), m->Fe, m->C));
        RT_TRY(m->swiglu ? OP->swiglu_bwd(RT, dp, g, pre, n, m->Fe) : OP->gelu_bwd(RT, dp, g, pre, (long)n * m->Fe));
        RT_TRY(gpt_gemm_dgrad(m, n, A(m, dxe, o * m->C), dp, t1, m->C, m->Fwe));
        RT_TRY(gpt_gemm_wgrad(m, n, t1, gpt_grad(m, b1), dp, x, m->C, m->Fwe));
    }
    drop(m, dgl), drop(m, dpre);
    return 0;
}

/* ---- the layer ------------------------------------------------------------------------ */

/* rows (M, C) in sent order to the experts' ranks (allgather: there
 * already), gathered over ETP, sorted there into expert order (Rp, C):
 * *out allocated. */
static int dispatch(gpt_t *m, moe_saved_t *v, const void *sent, void **out)
{
    void *recv = (void *)sent, *all;
    long C = m->C;
    if (!m->moe_ag) {
        RT_TRY(alloc_act(m, &recv, v->R * C));
        RT_TRY(moe_ep_alltoallv(m, recv, v->rcount, sent, v->scount, C, DT_ACT));
    }
    all = recv;
    if (m->etp > 1)
        RT_TRY(etp_gather(m, v, recv, &all));
    RT_TRY(alloc_act(m, out, v->Rp * C));
    RT_TRY(OP->moe_gather(RT, *out, all, v->sort_rows, NULL, v->Rp, m->C));
    if (all != recv)
        drop(m, all);
    if (recv != sent)
        drop(m, recv);
    return 0;
}

/* The reverse: expert-order rows (Rp, C) back to their tokens' ranks (with
 * ETP > 1 summed over ETP on the way), in sent order (M, C): *out
 * allocated. */
static int undispatch(gpt_t *m, moe_saved_t *v, const void *rows, void **out)
{
    void *back;
    long C = m->C;
    RT_TRY(alloc_act(m, &back, v->R * C));
    if (m->etp > 1) { /* this ETP rank's partial rows of every ETP rank's, summed home */
        void *parts;
        RT_TRY(alloc_act(m, &parts, v->Rg * C));
        RT_TRY(OP->moe_gather(RT, parts, rows, v->unsort_rows, NULL, v->Rg, m->C));
        RT_TRY(etp_sum_home(m, v, parts, back));
        drop(m, parts);
    } else {
        RT_TRY(OP->moe_gather(RT, back, rows, v->unsort_rows, NULL, v->R, m->C));
    }
    if (m->moe_ag) { /* the rows stay: the combine takes them home */
        *out = back;
        return 0;
    }
    RT_TRY(alloc_act(m, out, v->M * C));
    RT_TRY(moe_ep_alltoallv(m, *out, v->scount, back, v->rcount, C, DT_ACT));
    drop(m, back);
    return 0;
}

/* The tokens the permutation numbers (Nt of them): this rank's (h, Nl
 * rows), or with the allgather dispatcher its EP group's, gathered into
 * *full (allocated). */
static int group_tokens(gpt_t *m, const void *h, void **full, long *Nt)
{
    *Nt = m->moe_ag ? (long)m->Nl * m->ep : m->Nl;
    if (!m->moe_ag) {
        *full = (void *)h;
        return 0;
    }
    return moe_ep_gather(m, full, h, (long)m->Nl * m->C, DT_ACT);
}

/* out (Nl, C) = the weighted (w, or 1) sum of rows (M, C) into their
 * tokens: here, or into the EP group's tokens and reduce-scattered home
 * (allgather). */
static int combine(gpt_t *m, moe_saved_t *v, void *out, const void *rows, const float *w)
{
    long n = (long)m->Nl * m->C, Nt = m->moe_ag ? (long)m->Nl * m->ep : m->Nl;
    void *acc = out;
    if (m->moe_ag)
        RT_TRY(alloc_act(m, &acc, n * m->ep));
    RT_TRY(OP->moe_combine(RT, acc, rows, v->inv, w, Nt, m->topk, m->C));
    if (acc != out) {
        RT_TRY(ep_home(m, out, acc, n, DT_ACT));
        drop(m, acc);
    }
    return 0;
}

int gpt_moe_fwd(gpt_t *m, int c, int l, layer_saved_t *s, void *z)
{
    moe_saved_t *v = calloc(1, sizeof *v);
    if (!v)
        return -1;
    s->moe = v;
    RT_TRY(gpt_moe_route(m, c, l, s, v));
    void *sent, *ye, *toks;
    long Nt;
    RT_TRY(group_tokens(m, s->h2, &toks, &Nt));
    RT_TRY(alloc_act(m, &sent, v->M * m->C));
    RT_TRY(OP->moe_gather(RT, sent, toks, v->perm_tok, NULL, v->M, m->C));
    if (toks != s->h2)
        drop(m, toks);
    RT_TRY(dispatch(m, v, sent, &v->xe));
    drop(m, sent);
    RT_TRY(alloc_act(m, &ye, v->Rp * m->C));
    RT_TRY(experts_fwd(m, c, l, v, ye));
    RT_TRY(undispatch(m, v, ye, &v->ys));
    drop(m, ye);
    RT_TRY(combine(m, v, z, v->ys, v->perm_w));
    return gpt_moe_shared_fwd(m, c, l, s, &v->shared, z);
}

/* The combine weights' gradient: dprobs (Nl, k) from <dz of the token,
 * its expert output> of each kept pair; 0 for the dropped. dzt: the
 * gradient of the Nt tokens the permutation numbers (group_tokens); with
 * the allgather dispatcher the EP group's pairs' gradients are summed
 * home over EP (each pair's is its expert rank's). */
static int combine_grad(gpt_t *m, moe_saved_t *v, const void *dzt, long Nt, float **dprobs)
{
    long Nk = (long)m->Nl * m->topk, Gk = Nt * m->topk;
    float *dw, *dg = NULL, *h = calloc((size_t)(Gk + v->M + 1), sizeof *h);
    if (!h)
        return -1;
    int rc = dev_alloc(m, (void **)&dw, sizeof(float) * (size_t)v->M) ||
             OP->moe_rowdot(RT, dw, dzt, v->perm_tok, v->ys, v->M, m->C) ||
             OP->d2h(RT, h + Gk, dw, sizeof(float) * (size_t)v->M);
    for (long i = 0; !rc && i < v->M; i++)
        h[v->perm_pair[i]] = h[Gk + i];
    if (!rc && Gk == Nk)
        rc = to_dev(m, (void **)dprobs, h, sizeof(float) * (size_t)Nk);
    else if (!rc)
        rc = to_dev(m, (void **)&dg, h, sizeof(float) * (size_t)Gk) ||
             dev_alloc(m, (void **)dprobs, sizeof(float) * (size_t)Nk) || ep_home(m, *dprobs, dg, Nk, DT_F32);
    drop(m, dw), drop(m, dg);
    free(h);
    return rc;
}

int gpt_moe_bwd(gpt_t *m, int c, int l, layer_saved_t *s, const void *dz, void *dh)
{
    moe_saved_t *v = s->moe;
    int tr = P(m, c, l, T_ROUTER_W);
    void *dys, *dye, *dxe, *dxs, *dlog, *dhr, *dzt;
    float *dprobs;
    long Nt;
    RT_TRY(group_tokens(m, dz, &dzt, &Nt));
    RT_TRY(combine_grad(m, v, dzt, Nt, &dprobs));
    RT_TRY(alloc_act(m, &dys, v->M * m->C));
    RT_TRY(OP->moe_gather(RT, dys, dzt, v->perm_tok, v->perm_w, v->M, m->C));
    if (dzt != dz)
        drop(m, dzt);
    RT_TRY(dispatch(m, v, dys, &dye));
    drop(m, dys);
    RT_TRY(alloc_act(m, &dxe, v->Rp * m->C));
    RT_TRY(experts_bwd(m, c, l, v, dye, dxe));
    drop(m, dye);
    RT_TRY(undispatch(m, v, dxe, &dxs));
    drop(m, dxe);
    RT_TRY(combine(m, v, dh, dxs, NULL));
    drop(m, dxs);
    RT_TRY(gpt_moe_shared_bwd(m, c, l, s, &v->shared, dz, dh));
    /* the router: its logits' gradient, into dh and the router's weight */
    RT_TRY(alloc_act(m, &dlog, (long)m->Nl * m->E));
    RT_TRY(OP->moe_route_bwd(RT, dlog, dprobs, v->probs, v->idx, v->scores, v->coef, v->coef_ld, m->Nl, m->E,
                             m->topk));
    drop(m, dprobs);
    RT_TRY(alloc_act(m, &dhr, (long)m->Nl * m->C));
    RT_TRY(OP->linear_dgrad(RT, dhr, dlog, gpt_param(m, tr), m->Nl, m->C, m->E));
    RT_TRY(OP->add(RT, dh, dh, dhr, (long)m->Nl * m->C));
    RT_TRY(OP->linear_wgrad(RT, gpt_grad(m, tr), NULL, dlog, s->h2, m->Nl, m->C, m->E));
    drop(m, dlog), drop(m, dhr);
    m->moe_dropped += v->dropped, m->moe_aux += v->aux, m->moe_drop_sig += v->drop_sig; /* once per pass */
    m->moe_cv_sum += v->load_cv * v->load_cv, m->moe_cv_n++;
    gpt_moe_free(m, s);
    return 0;
}

int gpt_moe_totals(gpt_t *m, double *dropped, double *aux, double *load_cv, uint64_t *sig)
{
    double v[4] = {m->moe_dropped, m->moe_aux, m->moe_cv_sum, m->moe_cv_n};
    *sig = m->moe_drop_sig;
    if (m->E <= 0) {
        *dropped = *aux = *load_cv = 0;
        return 0;
    }
    RT_TRY(comm_host_sum_f64(CM, GRP_WORLD, v, 4));
    *load_cv = v[3] > 0 ? sqrt(v[2] / v[3]) : 0;
    health_comm_enter(HB_COLL, GRP_WORLD, -1, 0);
    int rc = MPI_Allreduce(MPI_IN_PLACE, sig, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    health_comm_leave();
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "%s:%d: MPI_Allreduce of the dropped pairs' signature failed\n", __FILE__, __LINE__);
        return -1;
    }
    *dropped = v[0], *aux = v[1];
    return 0;
}
