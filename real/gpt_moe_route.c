/* real/gpt_moe_route.c: an MoE layer's routing (gpt_moe.c's top says what
 * it does): the router's logits and top-k on the device, then on the host
 * the capacity's drops (ranked over the micro-batch), the expert loads and
 * the auxiliary loss's factor, and the permutation: the rows each rank
 * sends and receives over EP, gathers over ETP, and their sort by local
 * expert. */
#include "real/gpt_moe_int.h"

#include "model/layout.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* The auxiliary loss: its value's share (v->aux) and its factors (v->coef,
 * device; NULL without the loss), over groups of tokens: the micro-batch
 * (aux_loss: one factor per expert, coef_ld 0) or each of its sequences
 * (seq_aux_loss, DeepSeek-V2's, Megatron-Core's
 * sequence_load_balancing_loss_func: a row of factors per token, its
 * sequence's, coef_ld E). A group of Tg tokens holding cnt[e] of the pairs
 * routed to e (before dropping) contributes a E cnt[e] / (k Tg^2) sum over
 * its tokens of scores[n][e]; the G groups' terms are averaged, and scaled
 * into the gradient by B / global batch. cnt: the micro-batch's loads. */
static int aux_coef(gpt_t *m, moe_saved_t *v, const int *idx, const double *cnt)
{
    if (m->moe_aux_coeff <= 0)
        return 0;
    int seq = m->job->moe_lb_type == MOE_LB_SEQ_AUX, G = seq ? m->B : 1, E = m->E;
    double Tg = seq ? (double)m->Tseq : (double)m->B * m->Tseq;
    double scale = (double)m->moe_aux_coeff * E / (m->topk * Tg * Tg) / G * m->B / m->job->global_batch_size;
    long rows = seq ? m->Nl : 1;
    float *coef = malloc(sizeof *coef * (size_t)(rows * E)), *sc = malloc(sizeof *sc * (size_t)m->Nl * E);
    int *grp = calloc((size_t)m->Nl + 1, sizeof *grp);
    double *gc = seq ? calloc((size_t)G * E, sizeof *gc) : NULL; /* each sequence's loads */
    const double *c = seq ? gc : cnt;
    int rc = coef && sc && grp && (gc || !seq) ? 0 : -1;
    for (long n = 0; !rc && seq && n < m->Nl; n++) {
        grp[n] = (int)(token_place(m, n) / m->Tseq);
        for (int j = 0; j < m->topk; j++)
            gc[(long)grp[n] * E + idx[n * m->topk + j]] += 1;
    }
    if (!rc && ((seq && mb_sum(m, gc, G * E)) || OP->d2h(RT, sc, v->scores, sizeof *sc * (size_t)m->Nl * E)))
        rc = -1;
    for (int e = 0; !rc && e < E; e++) {
        if (!seq) /* aux_loss: one row for every token */
            coef[e] = (float)(scale * c[e]);
        for (long n = 0; n < m->Nl; n++) { /* the loss's value: its gradient is coef's */
            double f = scale * c[(long)grp[n] * E + e];
            if (seq)
                coef[n * E + e] = (float)f;
            v->aux += f * sc[n * E + e];
        }
    }
    v->coef_ld = seq ? E : 0;
    if (!rc)
        rc = to_dev(m, (void **)&v->coef, coef, sizeof *coef * (size_t)(rows * E));
    free(coef), free(sc), free(grp), free(gc);
    return rc;
}

/* Rows each local expert computes: those received (gathered over ETP),
 * padded up to ETP x EP x Megatron-Core's per-rank capacity
 * ceil(Nl k / E f) with padding. */
static long expert_rows(const gpt_t *m, long got)
{
    if (!m->moe_pad || m->moe_cf <= 0)
        return got;
    long cap = (long)m->ep * m->etp * (long)ceil((double)m->Nl * m->topk / m->E * m->moe_cf);
    return got > cap ? got : cap;
}

/* rq (ETP x E): the rows each ETP rank of this EP position receives from
 * each EP rank for each local expert (rc_i, E, this rank's), summed over
 * ETP from each rank's own slot (exact). */
static int etp_counts(gpt_t *m, const int *rc_i, long *rq)
{
    long n = (long)m->etp * m->E;
    double *g = calloc((size_t)n, sizeof *g);
    if (!g)
        return -1;
    for (int b = 0; b < m->E; b++)
        g[(long)m->etp_i * m->E + b] = rc_i[b];
    int rc = m->etp > 1 ? comm_host_sum_f64(CM, GRP_ETP, g, (int)n) : 0;
    for (long b = 0; b < n; b++)
        rq[b] = (long)g[b];
    free(g);
    return rc;
}

/* The permutation of ntok tokens' pairs (this rank's, or with the
 * allgather dispatcher its EP group's): the kept pairs (of this rank's
 * experts only, allgather) in expert order, then token order; the counts
 * each way (alltoall: an all-to-all of the per-expert counts over EP); and
 * the sort of the received rows by local expert. */
static int plan_routes(gpt_t *m, moe_saved_t *v, long ntok, const float *probs, const int *idx, const int *keep)
{
    int E = m->E, El = m->El, ep = m->ep, etp = m->etp, k = m->topk, ag = m->moe_ag;
    long Nk = ntok * k, *cnt = calloc((size_t)E, sizeof *cnt), *at = calloc((size_t)E + 1, sizeof *at);
    int *tok = malloc(sizeof(int) * (size_t)(Nk + 1)), *cnt_i = calloc((size_t)E, sizeof(int));
    int *rc_i = calloc((size_t)E, sizeof(int));
    long *per = malloc(sizeof(long) * (size_t)ep), *blk = malloc(sizeof(long) * (size_t)etp * E);
    long *rq = malloc(sizeof(long) * (size_t)etp * E);
    float *w = malloc(sizeof(float) * (size_t)(Nk + 1));
    v->perm_pair = malloc(sizeof(int) * (size_t)(Nk + 1));
    v->scount = calloc((size_t)ep, sizeof(long)), v->rcount = calloc((size_t)ep, sizeof(long));
    v->ecount = calloc((size_t)El, sizeof(long)), v->gcount = calloc((size_t)etp, sizeof(long));
    int rc = -1;
    void *dcnt = NULL, *drc = NULL;
    if (!cnt || !at || !tok || !cnt_i || !rc_i || !per || !blk || !rq || !w || !v->perm_pair || !v->scount ||
        !v->rcount || !v->ecount || !v->gcount)
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
             moe_ep_alltoallv(m, drc, per, dcnt, per, 1, DT_I32) || OP->d2h(RT, rc_i, drc, sizeof(int) * (size_t)E))
        goto out;
    v->R = v->Rg = v->Rp = 0;
    for (int s = 0; s < ep; s++)
        for (int j = 0; j < El; j++)
            v->rcount[s] += rc_i[s * El + j], v->R += rc_i[s * El + j];
    if (etp_counts(m, rc_i, rq))
        goto out;
    /* blk: the first gathered row of block (q, s, j): ETP rank q's received rows, by source then expert */
    for (long b = 0; b < (long)etp * E; b++)
        blk[b] = v->Rg, v->gcount[b / E] += rq[b], v->Rg += rq[b];
    for (int j = 0; j < El; j++) {
        long got = 0;
        for (int b = j; b < etp * E; b += El)
            got += rq[b];
        v->ecount[j] = expert_rows(m, got), v->Rp += v->ecount[j];
    }
    /* expert order: by local expert, then ETP rank, then source */
    int *sort = malloc(sizeof(int) * (size_t)(v->Rp + 1)), *unsort = malloc(sizeof(int) * (size_t)(v->Rg + 1));
    if (!sort || !unsort) {
        free(sort), free(unsort);
        goto out;
    }
    for (long r = 0; r < v->Rp; r++)
        sort[r] = -1;
    long o = 0;
    for (int j = 0; j < El; j++) {
        long o0 = o;
        for (int b = j; b < etp * E; b += El)
            for (long i = blk[b]; i < blk[b] + rq[b]; i++)
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
         to_dev(m, (void **)&v->unsort_rows, unsort, sizeof(int) * (size_t)v->Rg) ? -1 : 0;
    free(sort), free(unsort), free(inv);
out:
    drop(m, dcnt), drop(m, drc);
    free(cnt), free(at), free(tok), free(cnt_i), free(rc_i), free(per), free(blk), free(w), free(rq);
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
        !moe_ep_gather(m, &gp, dp, Nk, DT_F32) && !moe_ep_gather(m, &gi, di, Nk, DT_I32) && !moe_ep_gather(m, &gk, dk, Nk, DT_I32) &&
        !OP->d2h(RT, hp, gp, sizeof(float) * (size_t)G) && !OP->d2h(RT, hi, gi, sizeof(int) * (size_t)G) &&
        !OP->d2h(RT, hk, gk, sizeof(int) * (size_t)G))
        rc = plan_routes(m, v, (long)m->Nl * m->ep, hp, hi, hk);
    drop(m, dp), drop(m, di), drop(m, dk), drop(m, gp), drop(m, gi), drop(m, gk);
    free(hp), free(hi), free(hk);
    return rc;
}

int gpt_moe_route(gpt_t *m, int c, int l, layer_saved_t *s, moe_saved_t *v)
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
                     aux_coef(m, v, idx, cnt) ||
                     (m->moe_ag ? plan_gathered(m, v, probs, idx, keep) : plan_routes(m, v, m->Nl, probs, idx, keep))
                 ? -1 : 0;
    }
    free(probs), free(idx), free(keep), free(cnt);
    return rc;
}
