/* real/gpt_moe.c: the MLP of an MoE layer (gpt_layer.h), as Megatron-Core's
 * MoELayer runs it with either token dispatcher, experts whole on their EP
 * rank (ETP 1):
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
 *   experts  per local expert FC1 (+ bias), GeLU or SwiGLU, FC2 (+ bias);
 *   combine  back by the reverse all-to-all (or, allgather, into the
 *            group's tokens and reduce-scattered over EP), each token's
 *            rows summed with their weights.
 * With a shared expert (gpt_moe_shared.c) its output adds to theirs.
 * The auxiliary load-balancing loss (--moe-router-load-balancing-type
 * aux_loss, --moe-aux-loss-coeff a) is the switch transformer's over each
 * micro-batch, as Megatron-Core's over its TP x CP group:
 *   a E / (k T^2) sum_e (sum_n scores[n][e]) tokens[e]
 * (T tokens, tokens[e] the pairs routed to e before dropping); its
 * gradient joins the router's, scaled as the language-model loss is (a
 * mean over the global batch's micro-batches), and it is not in the
 * reported loss (Megatron-Core logs it apart). The routing lives on the
 * host: probabilities and choices are copied back, the permutation built
 * there and copied down, as Megatron-Core's dispatcher synchronises for
 * its counts. */
#include "real/gpt_layer.h"

#include "model/layout.h"
#include "real/health.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct moe_saved {
    float *probs, *scores, *coef; /* device: (Nl, k), (Nl, E), (E) or NULL */
    int *idx;                     /* device (Nl, k) */
    int *perm_tok, *sort_rows, *unsort_rows; /* device: (M) token of each sent row, (Rp) received row of each
                                                expert-order row (-1: padding), (R) expert-order row of each
                                                received row */
    int *inv;                     /* device (Nt k): the sent row of each pair of the tokens numbered (-1: none) */
    float *perm_w;                /* device (M): each sent row's weight */
    int *perm_pair;               /* host (M): its (token, choice) pair, n k + j */
    long *scount, *rcount;        /* host [EP]: rows sent to, received from, each EP rank */
    long *ecount;                 /* host [El]: rows of each local expert (padding included) */
    long M, R, Rp;
    double dropped, aux;          /* this rank's dropped pairs, auxiliary loss (its share of the objective) */
    double load_cv;               /* the micro-batch's expert loads' coefficient of variation */
    void *shared;                 /* the shared expert's saved state (gpt_moe_shared.c), or NULL */
    uint64_t drop_sig;            /* their signature (gpt.h) */
    void *xe, *pre, *gl, *ys;     /* (Rp, C), (Rp, Fwe), (Rp, Fe): the experts' input, FC1 output, activation;
                                     (M, C): their outputs back home, in sent order */
};

static int dev_alloc(gpt_t *m, void **p, size_t bytes) { return OP->alloc(RT, p, bytes ? bytes : 4, RT_POOL_MAIN); }

/* A host array copied to a new device one. */
static int to_dev(gpt_t *m, void **dst, const void *src, size_t bytes)
{
    RT_TRY(dev_alloc(m, dst, bytes));
    return bytes ? OP->h2d(RT, *dst, src, bytes) : 0;
}

void gpt_moe_free(gpt_t *m, layer_saved_t *s)
{
    moe_saved_t *v = s->moe;
    if (!v)
        return;
    void *ps[] = {v->probs, v->scores, v->coef, v->idx, v->perm_tok, v->sort_rows, v->unsort_rows, v->inv, v->perm_w,
                  v->xe, v->pre, v->gl, v->ys};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        drop(m, ps[i]);
    free(v->perm_pair), free(v->scount), free(v->rcount), free(v->ecount);
    gpt_moe_shared_free(m, &v->shared);
    free(v);
    s->moe = NULL;
}

/* The dispatchers' collectives over EP, their host time counted (compare's
 * all-to-all class): rc, the collective's, since t0. */
static int timed(gpt_t *m, int64_t t0, int rc)
{
    m->moe_a2a_ns += rt_now_ns() - t0;
    return rc;
}

/* The all-to-all over EP of rows of `width` elements: rrows[p] from, and
 * srows[p] to, EP rank p. */
static int ep_alltoallv(gpt_t *m, void *out, const long *rrows, const void *in, const long *srows, long width,
                        int dt)
{
    long sc[m->ep], rc[m->ep];
    for (int p = 0; p < m->ep; p++)
        sc[p] = srows[p] * width, rc[p] = rrows[p] * width;
    int64_t t0 = rt_now_ns();
    return timed(m, t0, CM->op->alltoallv(CM, GRP_EP, out, rc, in, sc, dt, STREAM_COMPUTE));
}

/* The allgather dispatcher's gather: *full (EP x count, allocated) holds
 * every EP rank's local (count), in EP order. */
static int ep_gather(gpt_t *m, void **full, const void *local, long count, int dt)
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

/* ---- routing on the host ------------------------------------------------------------ */

/* The micro-batch's place (b Tseq + t) of this rank's row n. */
static long token_place(const gpt_t *m, long n)
{
    long row = gpt_row0_local(m) + n; /* in this CP rank's (B, T) rows */
    return row / m->T * m->Tseq + layout_cp_pos(row % m->T, m->Tseq, m->cp, m->cp_i);
}

/* Sums a host array over the micro-batch's ranks (TP, then CP). */
static int mb_sum(gpt_t *m, double *buf, int count)
{
    RT_TRY(comm_host_sum_f64(CM, GRP_TP, buf, count));
    return comm_host_sum_f64(CM, GRP_CP, buf, count);
}

/* One dropped pair's term of the signature: the layer, the sample in the
 * global batch, the place in its sequence, the expert, mixed. */
static uint64_t drop_hash(const layer_saved_t *s, long place, int e, int Tseq)
{
    uint64_t sample = (uint64_t)(s->sample0 + place / Tseq);
    uint64_t z = (((uint64_t)s->layer * 0x100000001b3ULL + sample) * 0x9e3779b97f4a7c15ULL) ^
                 ((uint64_t)(place % Tseq) << 20) ^ (uint64_t)e;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

typedef struct {
    double w;
    long place;
    int e;
} pair_t;

static int pair_order(const void *a, const void *b)
{
    const pair_t *x = a, *y = b;
    if (x->e != y->e)
        return x->e < y->e ? -1 : 1;
    if (x->w != y->w)
        return x->w > y->w ? -1 : 1;
    return (x->place > y->place) - (x->place < y->place);
}

/* keep[n k + j]: whether this rank's pair (n, j) survives the capacity.
 * Every rank of the micro-batch puts its pairs at their places in arrays
 * of the whole micro-batch, summed (each element one rank's, the others'
 * 0: exact); each then ranks every expert's pairs the same way. */
static int capacity_keep(gpt_t *m, const layer_saved_t *s, moe_saved_t *v, const float *probs, const int *idx,
                         int *keep)
{
    long Tm = (long)m->B * m->Tseq, P = Tm * m->topk;
    long cap = (long)ceil((double)P / m->E * m->moe_cf);
    double *g = calloc((size_t)(2 * P), sizeof *g);
    pair_t *all = malloc(sizeof *all * (size_t)P);
    char *kept = calloc((size_t)P, 1);
    int rc = -1;
    if (!g || !all || !kept)
        goto out;
    for (long n = 0; n < m->Nl; n++)
        for (int j = 0; j < m->topk; j++) {
            long at = token_place(m, n) * m->topk + j;
            g[at] = probs[n * m->topk + j], g[P + at] = idx[n * m->topk + j] + 1; /* 0: nobody's */
        }
    if (mb_sum(m, g, (int)(2 * P)))
        goto out;
    for (long i = 0; i < P; i++)
        all[i] = (pair_t){g[i], i, (int)g[P + i] - 1};
    qsort(all, (size_t)P, sizeof *all, pair_order);
    for (long i = 0, rank = 0; i < P; i++) {
        rank = i > 0 && all[i].e == all[i - 1].e ? rank + 1 : 0;
        kept[all[i].place] = rank < cap;
    }
    for (long n = 0; n < m->Nl; n++)
        for (int j = 0; j < m->topk; j++) {
            long at = token_place(m, n) * m->topk + j;
            if (!(keep[n * m->topk + j] = kept[at]))
                v->dropped++, v->drop_sig += drop_hash(s, at / m->topk, idx[n * m->topk + j], m->Tseq);
        }
    rc = 0;
out:
    free(g), free(all), free(kept);
    return rc;
}

/* The micro-batch's pairs routed to each expert before dropping (cnt, E),
 * and the load's coefficient of variation over the experts, the routing
 * imbalance --moe-expert-load-cv prices (v->load_cv). */
static int expert_loads(gpt_t *m, moe_saved_t *v, const int *idx, double *cnt)
{
    for (long i = 0; i < (long)m->Nl * m->topk; i++)
        cnt[idx[i]] += 1;
    RT_TRY(mb_sum(m, cnt, m->E));
    double mean = (double)m->B * m->Tseq * m->topk / m->E, ss = 0;
    for (int e = 0; e < m->E; e++)
        ss += (cnt[e] - mean) * (cnt[e] - mean);
    v->load_cv = sqrt(ss / m->E) / mean;
    return 0;
}

/* The auxiliary loss: its value's share (v->aux) and its per-expert factor
 * (v->coef, device, E; NULL without the loss), a E cnt[e] / (k T^2) scaled
 * into the gradient by B / global batch, from the loads cnt. */
static int aux_coef(gpt_t *m, moe_saved_t *v, const double *cnt)
{
    if (m->moe_aux_coeff <= 0)
        return 0;
    double Tm = (double)m->B * m->Tseq;
    float *coef = malloc(sizeof *coef * (size_t)m->E);
    int rc = coef ? 0 : -1;
    double scale = (double)m->moe_aux_coeff * m->E / (m->topk * Tm * Tm) * m->B / m->job->global_batch_size;
    float *sc = rc ? NULL : malloc(sizeof *sc * (size_t)m->Nl * m->E);
    if (!rc && (!sc || OP->d2h(RT, sc, v->scores, sizeof *sc * (size_t)m->Nl * m->E)))
        rc = -1;
    for (int e = 0; !rc && e < m->E; e++) {
        coef[e] = (float)(scale * cnt[e]);
        for (long n = 0; n < m->Nl; n++) /* the loss's value: its gradient is coef's */
            v->aux += scale * cnt[e] * sc[n * m->E + e];
    }
    free(sc);
    if (!rc)
        rc = to_dev(m, (void **)&v->coef, coef, sizeof *coef * (size_t)m->E);
    free(coef);
    return rc;
}

/* Rows each local expert computes: those received, padded up to EP x
 * Megatron-Core's per-rank capacity ceil(Nl k / E f) with padding. */
static long expert_rows(const gpt_t *m, long got)
{
    if (!m->moe_pad || m->moe_cf <= 0)
        return got;
    long cap = m->ep * (long)ceil((double)m->Nl * m->topk / m->E * m->moe_cf);
    return got > cap ? got : cap;
}

/* The permutation of ntok tokens' pairs (this rank's, or with the
 * allgather dispatcher its EP group's): the kept pairs (of this rank's
 * experts only, allgather) in expert order, then token order; the counts
 * each way (alltoall: an all-to-all of the per-expert counts over EP); and
 * the sort of the received rows by local expert. */
static int plan_routes(gpt_t *m, moe_saved_t *v, long ntok, const float *probs, const int *idx, const int *keep)
{
    int E = m->E, El = m->El, ep = m->ep, k = m->topk, ag = m->moe_ag;
    long Nk = ntok * k, *cnt = calloc((size_t)E, sizeof *cnt), *at = calloc((size_t)E + 1, sizeof *at);
    int *tok = malloc(sizeof(int) * (size_t)(Nk + 1)), *cnt_i = calloc((size_t)E, sizeof(int));
    int *rc_i = calloc((size_t)E, sizeof(int));
    long *per = malloc(sizeof(long) * (size_t)ep), *blk = malloc(sizeof(long) * (size_t)E);
    float *w = malloc(sizeof(float) * (size_t)(Nk + 1));
    v->perm_pair = malloc(sizeof(int) * (size_t)(Nk + 1));
    v->scount = calloc((size_t)ep, sizeof(long)), v->rcount = calloc((size_t)ep, sizeof(long));
    v->ecount = calloc((size_t)El, sizeof(long));
    int rc = -1;
    void *dcnt = NULL, *drc = NULL;
    if (!cnt || !at || !tok || !cnt_i || !rc_i || !per || !blk || !w || !v->perm_pair || !v->scount || !v->rcount ||
        !v->ecount)
        goto out;
    for (long i = 0; i < Nk; i++)
        if (keep[i] && (!ag || idx[i] / El == m->ep_i))
            cnt[idx[i]]++;
    for (int e = 0; e < E; e++)
        at[e + 1] = at[e] + cnt[e], cnt_i[e] = (int)cnt[e], v->scount[e / El] += cnt[e];
    v->M = at[E];
    for (long n = 0; n < ntok; n++) /* token order within each expert */
        for (int j = 0; j < k; j++)
            if (keep[n * k + j] && (!ag || idx[n * k + j] / El == m->ep_i)) {
                long r = at[idx[n * k + j]]++;
                tok[r] = (int)n, w[r] = probs[n * k + j], v->perm_pair[r] = (int)(n * k + j);
            }
    /* rc_i[s El + j]: rows EP rank s sends this rank's local expert j (allgather: all this rank's own, as
     * from rank 0) */
    for (int p = 0; p < ep; p++) /* El counts to and from each EP rank */
        per[p] = El;
    if (ag)
        memcpy(rc_i, cnt_i + m->ep_i * El, sizeof(int) * (size_t)El);
    else if (to_dev(m, &dcnt, cnt_i, sizeof(int) * (size_t)E) || dev_alloc(m, &drc, sizeof(int) * (size_t)E) ||
             ep_alltoallv(m, drc, per, dcnt, per, 1, DT_I32) || OP->d2h(RT, rc_i, drc, sizeof(int) * (size_t)E))
        goto out;
    v->R = v->Rp = 0;
    for (int s = 0; s < ep; s++) /* blk: the first received row of block (s, j), the rows by source then expert */
        for (int j = 0; j < El; j++)
            blk[s * El + j] = v->R, v->rcount[s] += rc_i[s * El + j], v->R += rc_i[s * El + j];
    for (int j = 0; j < El; j++) {
        long got = 0;
        for (int s = 0; s < ep; s++)
            got += rc_i[s * El + j];
        v->ecount[j] = expert_rows(m, got), v->Rp += v->ecount[j];
    }
    /* received rows: by source, then local expert; expert order: by local expert, then source */
    int *sort = malloc(sizeof(int) * (size_t)(v->Rp + 1)), *unsort = malloc(sizeof(int) * (size_t)(v->R + 1));
    if (!sort || !unsort) {
        free(sort), free(unsort);
        goto out;
    }
    for (long r = 0; r < v->Rp; r++)
        sort[r] = -1;
    long o = 0;
    for (int j = 0; j < El; j++) {
        long o0 = o;
        for (int s = 0; s < ep; s++)
            for (long i = blk[s * El + j]; i < blk[s * El + j] + rc_i[s * El + j]; i++)
                sort[o] = (int)i, unsort[i] = (int)o, o++;
        o = o0 + v->ecount[j];
    }
    int *inv = malloc(sizeof(int) * (size_t)(Nk + 1)); /* the combine's: pair -> sent row */
    for (long i = 0; inv && i < Nk; i++)
        inv[i] = -1;
    for (long r = 0; inv && r < v->M; r++)
        inv[v->perm_pair[r]] = (int)r;
    rc = !inv || to_dev(m, (void **)&v->inv, inv, sizeof(int) * (size_t)Nk) ||
         to_dev(m, (void **)&v->perm_tok, tok, sizeof(int) * (size_t)v->M) ||
         to_dev(m, (void **)&v->perm_w, w, sizeof(float) * (size_t)v->M) ||
         to_dev(m, (void **)&v->sort_rows, sort, sizeof(int) * (size_t)v->Rp) ||
         to_dev(m, (void **)&v->unsort_rows, unsort, sizeof(int) * (size_t)v->R) ? -1 : 0;
    free(sort), free(unsort), free(inv);
out:
    drop(m, dcnt), drop(m, drc);
    free(cnt), free(at), free(tok), free(cnt_i), free(rc_i), free(per), free(blk), free(w);
    return rc;
}

/* The allgather dispatcher's plan: the EP group's routing gathered (the
 * weights, choices and drops of every rank's pairs), then the pairs of
 * this rank's experts among them. */
static int plan_gathered(gpt_t *m, moe_saved_t *v, const float *probs, const int *idx, const int *keep)
{
    long Nk = (long)m->Nl * m->topk, G = Nk * m->ep;
    void *dp = NULL, *di = NULL, *dk = NULL, *gp = NULL, *gi = NULL, *gk = NULL;
    float *hp = malloc(sizeof(float) * (size_t)G);
    int *hi = malloc(sizeof(int) * (size_t)G), *hk = malloc(sizeof(int) * (size_t)G), rc = -1;
    if (hp && hi && hk && !to_dev(m, &dp, probs, sizeof(float) * (size_t)Nk) &&
        !to_dev(m, &di, idx, sizeof(int) * (size_t)Nk) && !to_dev(m, &dk, keep, sizeof(int) * (size_t)Nk) &&
        !ep_gather(m, &gp, dp, Nk, DT_F32) && !ep_gather(m, &gi, di, Nk, DT_I32) && !ep_gather(m, &gk, dk, Nk, DT_I32) &&
        !OP->d2h(RT, hp, gp, sizeof(float) * (size_t)G) && !OP->d2h(RT, hi, gi, sizeof(int) * (size_t)G) &&
        !OP->d2h(RT, hk, gk, sizeof(int) * (size_t)G))
        rc = plan_routes(m, v, (long)m->Nl * m->ep, hp, hi, hk);
    drop(m, dp), drop(m, di), drop(m, dk), drop(m, gp), drop(m, gi), drop(m, gk);
    free(hp), free(hi), free(hk);
    return rc;
}

/* The router: logits, top-k, then (host) drops, the auxiliary factor and
 * the permutation. */
static int route(gpt_t *m, int c, int l, layer_saved_t *s, moe_saved_t *v)
{
    long Nk = (long)m->Nl * m->topk;
    void *logits;
    RT_TRY(alloc_act(m, &logits, (long)m->Nl * m->E));
    RT_TRY(OP->linear_fwd(RT, logits, s->h2, gpt_param(m, P(m, c, l, T_ROUTER_W)), NULL, m->Nl, m->C, m->E));
    RT_TRY(dev_alloc(m, (void **)&v->probs, sizeof(float) * (size_t)Nk));
    RT_TRY(dev_alloc(m, (void **)&v->idx, sizeof(int) * (size_t)Nk));
    RT_TRY(dev_alloc(m, (void **)&v->scores, sizeof(float) * (size_t)m->Nl * m->E));
    RT_TRY(OP->moe_route(RT, v->probs, v->idx, v->scores, logits, m->Nl, m->E, m->topk));
    drop(m, logits);
    float *probs = malloc(sizeof(float) * (size_t)(Nk + 1));
    int *idx = malloc(sizeof(int) * (size_t)(Nk + 1)), *keep = malloc(sizeof(int) * (size_t)(Nk + 1)), rc = -1;
    double *cnt = calloc((size_t)m->E, sizeof *cnt);
    if (probs && idx && keep && cnt && !OP->d2h(RT, probs, v->probs, sizeof(float) * (size_t)Nk) &&
        !OP->d2h(RT, idx, v->idx, sizeof(int) * (size_t)Nk)) {
        for (long i = 0; i < Nk; i++)
            keep[i] = 1;
        rc = (m->moe_cf > 0 && capacity_keep(m, s, v, probs, idx, keep)) || expert_loads(m, v, idx, cnt) ||
                     aux_coef(m, v, cnt) ||
                     (m->moe_ag ? plan_gathered(m, v, probs, idx, keep) : plan_routes(m, v, m->Nl, probs, idx, keep))
                 ? -1 : 0;
    }
    free(probs), free(idx), free(keep), free(cnt);
    return rc;
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
        RT_TRY(OP->linear_fwd(RT, pre, x, gpt_param(m, expert_tensor(m, c, l, j, T_FC1_W)),
                              gpt_param(m, expert_tensor(m, c, l, j, T_FC1_B)), n, m->C, m->Fwe));
        RT_TRY(m->swiglu ? OP->swiglu_fwd(RT, gl, pre, n, m->Fe) : OP->gelu_fwd(RT, gl, pre, (long)n * m->Fe));
        RT_TRY(OP->linear_fwd(RT, A(m, ye, o * m->C), gl, gpt_param(m, expert_tensor(m, c, l, j, T_FC2_W)),
                              gpt_param(m, expert_tensor(m, c, l, j, T_FC2_B)), n, m->Fe, m->C));
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
        RT_TRY(OP->linear_dgrad(RT, g, dy, gpt_param(m, t2), n, m->Fe, m->C));
        RT_TRY(OP->linear_wgrad(RT, gpt_grad(m, t2), gpt_grad(m, b2), dy,
                                A(m, v->gl, o * m->Fe), n, m->Fe, m->C));
        RT_TRY(m->swiglu ? OP->swiglu_bwd(RT, dp, g, pre, n, m->Fe) : OP->gelu_bwd(RT, dp, g, pre, (long)n * m->Fe));
        RT_TRY(OP->linear_dgrad(RT, A(m, dxe, o * m->C), dp, gpt_param(m, t1), n, m->C, m->Fwe));
        RT_TRY(OP->linear_wgrad(RT, gpt_grad(m, t1), gpt_grad(m, b1), dp, x, n, m->C, m->Fwe));
    }
    drop(m, dgl), drop(m, dpre);
    return 0;
}

/* ---- the layer ------------------------------------------------------------------------ */

/* rows (M, C) in sent order to the experts' ranks (allgather: there
 * already), sorted there into expert order (Rp, C): *out allocated. */
static int dispatch(gpt_t *m, moe_saved_t *v, const void *sent, void **out)
{
    void *recv = (void *)sent;
    long C = m->C;
    if (!m->moe_ag) {
        RT_TRY(alloc_act(m, &recv, v->R * C));
        RT_TRY(ep_alltoallv(m, recv, v->rcount, sent, v->scount, C, DT_ACT));
    }
    RT_TRY(alloc_act(m, out, v->Rp * C));
    RT_TRY(OP->moe_gather(RT, *out, recv, v->sort_rows, NULL, v->Rp, m->C));
    if (recv != sent)
        drop(m, recv);
    return 0;
}

/* The reverse: expert-order rows (Rp, C) back to their tokens' ranks, in
 * sent order (M, C): *out allocated. */
static int undispatch(gpt_t *m, moe_saved_t *v, const void *rows, void **out)
{
    void *back;
    long C = m->C;
    RT_TRY(alloc_act(m, &back, v->R * C));
    RT_TRY(OP->moe_gather(RT, back, rows, v->unsort_rows, NULL, v->R, m->C));
    if (m->moe_ag) { /* the rows stay: the combine takes them home */
        *out = back;
        return 0;
    }
    RT_TRY(alloc_act(m, out, v->M * C));
    RT_TRY(ep_alltoallv(m, *out, v->scount, back, v->rcount, C, DT_ACT));
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
    return ep_gather(m, full, h, (long)m->Nl * m->C, DT_ACT);
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
    RT_TRY(route(m, c, l, s, v));
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
    RT_TRY(OP->moe_route_bwd(RT, dlog, dprobs, v->probs, v->idx, v->scores, v->coef, m->Nl, m->E, m->topk));
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
