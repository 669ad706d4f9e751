/* sim/engine.c: discrete-event executor of per-rank op programs (see
 * engine.h). Entities are (class, stage, tp) triples: unfolded, every DP
 * replica is its own class and every TP rank its own entity; folded, all
 * clean replicas share one class and a TP group is one entity. */
#include "sim/engine_int.h"

#include "model/cost.h"
#include "model/layer.h"
#include "model/moe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- events --------------------------------------------------------- */

static event_t *ev_new(sim_t *S)
{
    event_t *ev = S->free_ev;
    if (ev)
        S->free_ev = ev->next_free;
    else if (!(ev = malloc(sizeof *ev)))
        return NULL;
    sim_heap_node_init(&ev->node);
    return ev;
}

int eng_past_the_end(sim_t *S, int64_t t)
{
    if (t < SIM_MAX_NS)
        return 0;
    snprintf(S->err, S->errlen, "the simulated iteration runs past %.1f years (%lld ns) at t = %.6g s: an op "
             "lasts longer than any real device would take; check the rates and sizes given (a profile field "
             "or a flag such as --nic-gbit near zero)", SIM_MAX_NS * 1e-9 / (365.25 * 86400), (long long)SIM_MAX_NS,
             S->now * 1e-9);
    return -1;
}

int eng_ev_at(sim_t *S, int64_t t, int type, int ent, int stream, int slot, uint64_t key)
{
    if (eng_past_the_end(S, t))
        return -1;
    event_t *ev = ev_new(S);
    if (!ev || sim_heap_push(&S->heap, &ev->node, (uint64_t)t, S->seq++))
        return -1;
    ev->type = type, ev->ent = ent, ev->stream = stream, ev->slot = slot, ev->key = key;
    return 0;
}

/* The transfer-done event of a pipeline transfer, sides in the event. */
int eng_xfer_event(sim_t *S, int64_t t, const int ent[2], const int st[2], const int sl[2])
{
    if (eng_past_the_end(S, t))
        return -1;
    event_t *ev = ev_new(S);
    if (!ev || sim_heap_push(&S->heap, &ev->node, (uint64_t)t, S->seq++))
        return -1;
    ev->type = EV_XFER_DONE, ev->ent = ent[0], ev->stream = st[0], ev->slot = sl[0];
    ev->ent2 = ent[1], ev->stream2 = st[1], ev->slot2 = sl[1];
    return 0;
}

/* ---- queues --------------------------------------------------------- */

static int q_grow(queue_t *q)
{
    int cap = q->cap ? q->cap * 2 : 8;
    slot_t *s = calloc(cap, sizeof *s);
    if (!s)
        return -1;
    for (int i = 0; i < q->n; i++) /* unroll the ring */
        s[i] = q->s[(q->head + i) % q->cap];
    free(q->s);
    q->s = s, q->cap = cap, q->head = 0;
    return 0;
}

static int is_pool(int stream) { return stream == STREAM_PP_SEND || stream == STREAM_PP_RECV; }

static int q_push(queue_t *q, int stream, const sched_op_t *op)
{
    int i;
    if (is_pool(stream)) { /* any free slot; indices never move */
        if (q->nfree == 0) {
            int cap = q->cap ? q->cap * 2 : 8;
            slot_t *s = realloc(q->s, sizeof *s * cap);
            int *f = realloc(q->free_idx, sizeof(int) * cap);
            if (s)
                q->s = s;
            if (f)
                q->free_idx = f;
            if (!s || !f)
                return -1;
            memset(s + q->cap, 0, sizeof *s * (cap - q->cap));
            for (int k = cap - 1; k >= q->cap; k--) /* lowest index on top */
                q->free_idx[q->nfree++] = k;
            q->cap = cap;
        }
        i = q->free_idx[--q->nfree];
        if (q->queued == q->waiting_cap) {
            int cap = q->waiting_cap ? q->waiting_cap * 2 : 8, *w = realloc(q->waiting, sizeof(int) * cap);
            if (!w)
                return -1;
            q->waiting = w, q->waiting_cap = cap;
        }
        q->waiting[q->queued++] = i;
        q->n++;
    } else {
        if (q->n == q->cap && q_grow(q))
            return -1;
        i = (q->head + q->n++) % q->cap;
    }
    q->s[i] = (slot_t){.op = op, .state = SLOT_QUEUED, .t_head = -1};
    return 0;
}

/* Part `part` may start: wait[0]'s threshold rises by one per part. */
static int waits_met(const entity_t *e, const sched_op_t *op, int part)
{
    for (int w = 0; w < 2; w++)
        if (op->wait[w] != CNT_NONE && e->cnt[op->wait[w]] < op->wait_for[w] + (w == 0 ? part : 0))
            return 0;
    return 1;
}

/* An iterating entity's next op, in a cell of its own; NULL at the
 * program's end (*oom set when no cell could be had). */
static const sched_op_t *iterate(entity_t *e, int *oom)
{
    if (!e->spare) {
        op_block_t *b = malloc(sizeof *b);
        if (!b)
            return *oom = 1, NULL;
        b->next = e->blocks, e->blocks = b;
        for (int i = 0; i < 8; i++)
            b->cell[i].next = e->spare, e->spare = &b->cell[i];
    }
    op_cell_t *c = e->spare, *next = c->next; /* the op overwrites the link */
    if (!sched_next(e->it, &c->op)) {
        c->next = next;
        return NULL;
    }
    e->spare = next;
    return &c->op;
}

/* Pulls program ops until the compute stream has one op waiting (besides
 * the one running), so the ops issued between two computes (transfers,
 * DP collectives) are on their streams while the first one runs. */
static int pull(sim_t *S, entity_t *e)
{
    int oom = 0;
    while (!e->pulled_all && e->q[STREAM_COMPUTE].n - e->q[STREAM_COMPUTE].busy == 0) {
        const sched_op_t *op = e->it ? iterate(e, &oom)
                                     : e->pc < S->prog_n[e->stage] ? &S->prog[e->stage][e->pc++] : NULL;
        if (oom)
            return -1;
        if (!op) {
            e->pulled_all = 1;
            break;
        }
        if (q_push(&e->q[op->stream], op->stream, op))
            return -1;
    }
    return 0;
}

/* ---- starting ops --------------------------------------------------- */

static int complete(sim_t *S, int ent, int stream, int slot);
static int part_done(sim_t *S, int ent, int stream, int slot);
static void bump(entity_t *e, const sched_op_t *op, int counter);

/* The entities of e0's group of this kind; returns how many. */
static int members(const sim_t *S, int kind, const entity_t *e0, int *out)
{
    int n = 0;
    if (kind == GK_TP)
        for (int t = 0; t < S->E_tp; t++)
            out[n++] = ent_id(S, e0->cls, e0->stage, t);
    else if (kind == GK_DP)
        for (int c = 0; c < S->classes; c++)
            out[n++] = ent_id(S, c, e0->stage, e0->tp_i);
    else if (kind == GK_WORLD)
        for (n = 0; n < S->ne; n++)
            out[n] = n;
    else
        for (int s = 0; s < S->p; s += S->p > 1 ? S->p - 1 : 1)
            out[n++] = ent_id(S, e0->cls, s, e0->tp_i);
    return n;
}

static uint64_t meet_key(int kind, long gid, long seq) { return ((uint64_t)(kind + 1) << 61) | ((uint64_t)gid << 36) | (uint64_t)seq; }

/* A member arrives at a collective (or TP-synchronous compute step). */
static int meet(sim_t *S, int ent, int stream, int kind, long gid, int need, int64_t dur)
{
    entity_t *e = &S->e[ent];
    /* The two DP streams meet in their own sequences: their ops start in
     * an order that timing decides, the same on every member per stream. */
    int seqk = kind == GK_DP && stream == STREAM_DP_GRAD ? 4 : kind;
    sim_meet_t *m = sim_meet_get(&S->meets, meet_key(seqk, gid, e->seq[seqk]++));
    if (!m)
        return -1;
    m->need = need, m->stream = stream;
    m->arrived++;
    m->t_last = S->now;
    if (dur > m->dur)
        m->dur = dur;
    if (m->arrived < need)
        return 0;
    /* All here: the work starts now for every member. */
    int n = members(S, kind, e, S->mem);
    for (int i = 0; i < n; i++) {
        queue_t *q = &S->e[S->mem[i]].q[stream];
        q->s[q->head].t_work = S->now;
        if (sched_stream_dp(stream))
            q->busy_until = S->now + m->dur;
    }
    if (S->net && kind == GK_DP && n > 1)
        return eng_net_ring(S, ent, stream, m->key, n);
    return eng_ev_at(S, S->now + m->dur, EV_MEET_DONE, ent, stream, kind, m->key);
}

/* Time of a DP or embedding collective for this entity's group. */
static int64_t coll_ns(sim_t *S, const entity_t *e, const sched_op_t *op, group_t g)
{
    const job_t *j = S->job;
    group_layout_t lay = cost_group_layout(j, S->hw, g);
    coll_t c = op->kind == SOP_DP_GATHER ? COLL_ALLGATHER
               : op->kind == SOP_DP_REDUCE && j->zero_stage >= 1 ? COLL_REDUCESCATTER
                                                                   : COLL_ALLREDUCE;
    double f = g == GROUP_DP ? S->dp_link[e->stage * S->E_tp + e->tp_i] : e->link_factor, s = 0;
    if (g == GROUP_DP && op->bytes_edp > 0) { /* the experts' share, over EDP, after the rest */
        group_layout_t edp = cost_group_layout(j, S->hw, GROUP_EDP);
        s = cost_coll_s(S->hw, c, op->bytes_edp, &edp);
    }
    return ns((cost_coll_s(S->hw, c, op->bytes, &lay) + s) * f);
}

static int pend_push(pend_t *p, int slot, int stream)
{
    if (p->n == p->cap) {
        int cap = p->cap ? p->cap * 2 : 8;
        int *a = malloc(sizeof(int) * cap), *b = malloc(sizeof(int) * cap);
        if (!a || !b)
            return free(a), free(b), -1;
        for (int i = 0; i < p->n; i++)
            a[i] = p->slot[(p->head + i) % p->cap], b[i] = p->stream[(p->head + i) % p->cap];
        free(p->slot), free(p->stream);
        p->slot = a, p->stream = b, p->cap = cap, p->head = 0;
    }
    int i = (p->head + p->n++) % p->cap;
    p->slot[i] = slot, p->stream[i] = stream;
    return 0;
}

/* Posts one pipeline transfer: matches the partner's oldest unmatched
 * transfer of the same direction, or waits for it. O(1). */
static int post_xfer(sim_t *S, int ent, int stream, int slot, const sched_xfer_t *x)
{
    entity_t *e = &S->e[ent];
    int peer = ent_id(S, e->cls, x->peer, e->tp_i), role = x->send ? 0 : 1;
    pend_t *theirs = &S->e[peer].pend[x->dir][1 - role];
    if (theirs->n == 0)
        return pend_push(&e->pend[x->dir][role], slot, stream);
    int pslot = theirs->slot[theirs->head], pstream = theirs->stream[theirs->head];
    theirs->head = (theirs->head + 1) % theirs->cap, theirs->n--;
    int src = x->send ? ent : peer, dst = x->send ? peer : ent;
    double f = fmax(S->e[src].link_factor, S->e[dst].link_factor);
    slot_t *mine = &e->q[stream].s[slot], *other = &S->e[peer].q[pstream].s[pslot];
    if (mine->t_work < 0) /* an op's transfer work begins with its first transfer */
        mine->t_work = S->now;
    if (other->t_work < 0)
        other->t_work = S->now;
    int sides_e[2] = {ent, peer}, sides_st[2] = {stream, pstream}, sides_sl[2] = {slot, pslot};
    if (S->net) /* the bytes cross the fabric, sharing links */
        return eng_net_xfer(S, sides_e, sides_st, sides_sl, global_rank(S, &S->e[src]), global_rank(S, &S->e[dst]),
                            mine->op->bytes);
    return eng_xfer_event(S, S->now + (f == 1 ? S->p2p_ns : ns(S->p2p_ns * 1e-9 * f)), sides_e, sides_st, sides_sl);
}

/* A forward's or backward's extra time from the MoE routing imbalance,
 * all its parts together: the busiest expert rank's share of this
 * micro-batch's tokens over the even one (the draw, the same on every
 * rank) on the ops that scale with it; 0 without imbalance. */
static double moe_extra_s(const sim_t *S, const entity_t *e, const sched_op_t *op)
{
    if (!moe_imbalanced(S->job))
        return 0;
    const cost_chunk_t *c = &S->ct[e->stage * S->v + op->chunk];
    return (moe_chunk_load(S->job, S->opts->seed, e->stage, op->chunk, op->mb) - 1) *
           (op->kind == SOP_FWD ? c->fwd_moe_s : c->bwd_moe_s);
}

/* Starts the op's current part (its first, or the next after a part). */
static int start(sim_t *S, int ent, int stream, int slot)
{
    entity_t *e = &S->e[ent];
    slot_t *s = &e->q[stream].s[slot];
    const sched_op_t *op = s->op;
    const job_t *j = S->job;
    s->state = SLOT_RUNNING;
    s->blocked = 0;
    s->t_work = S->now;
    e->q[stream].busy = !is_pool(stream) ? 1 : e->q[stream].busy;
    switch (op->kind) {
    case SOP_FWD:
    case SOP_BWD: {
        const cost_chunk_t *c = &S->ct[e->stage * S->v + op->chunk];
        double slow = op->kind == SOP_FWD || !S->opts->slow_forward_only ? e->factor : 1;
        double comp = (op->kind == SOP_FWD ? c->fwd_s : c->bwd_s) * slow / op->parts;
        comp += moe_extra_s(S, e, op) * slow / op->parts;
        double tp = (op->kind == SOP_FWD ? c->fwd_tp_s : c->bwd_tp_s) / op->parts;
        /* Compute shares the GPU with DP collectives still running. */
        int64_t until = 0;
        for (int st = 0; st < STREAM_COUNT; st++)
            if (sched_stream_dp(st) && e->q[st].busy && e->q[st].busy_until > until)
                until = e->q[st].busy_until;
        if (until > S->now)
            comp += S->hw->gpu.comm_slowdown * fmin(comp, (until - S->now) * 1e-9);
        int64_t dur = ns(comp + tp);
        if (S->E_tp > 1)
            return meet(S, ent, stream, GK_TP, (long)e->cls * S->p + e->stage, S->E_tp, dur);
        return eng_ev_at(S, S->now + dur, EV_OP_DONE, ent, stream, slot, 0);
    }
    case SOP_XFER:
        s->pending = op->nx;
        s->t_work = -1; /* set when its first transfer begins */
        for (int i = 0; i < op->nx; i++)
            if (post_xfer(S, ent, stream, slot, &op->x[i]))
                return -1;
        return op->nx ? 0 : complete(S, ent, stream, slot);
    case SOP_DP_GATHER:
    case SOP_DP_REDUCE: {
        int64_t dur = coll_ns(S, e, op, GROUP_DP);
        if (sched_stream_dp(stream))
            e->q[stream].busy_until = -1; /* known once all members meet */
        return meet(S, ent, stream, GK_DP, (long)e->stage * S->E_tp + e->tp_i, S->classes, dur);
    }
    case SOP_EMB_SYNC:
        return meet(S, ent, stream, GK_EMB, (long)e->cls * S->E_tp + e->tp_i, j->pp > 1 ? 2 : 1,
                    coll_ns(S, e, op, GROUP_EMB));
    case SOP_OPTIM: /* gradient clipping's world sum first: every rank waits for the last (optim_step) */
        return meet(S, ent, stream, GK_WORLD, 0, S->ne, ns(cost_grad_norm_sync_s(S->hw, j)));
    case SOP_HOST:
        return eng_ev_at(S, S->now + ns(S->hw->cluster.host_stall_s), EV_OP_DONE, ent, stream, slot, 0);
    case SOP_JOIN:
        return complete(S, ent, stream, slot);
    }
    return 0;
}

/* Starts whatever can start on the entity's streams. */
static int try_start(sim_t *S, int ent)
{
    entity_t *e = &S->e[ent];
    if (pull(S, e))
        return -1;
    for (int st = 0; st < STREAM_COUNT; st++) {
        queue_t *q = &e->q[st];
        if (!is_pool(st)) {
            if (q->n == 0)
                continue;
            slot_t *s = &q->s[q->head];
            if (q->busy) { /* resume a multi-part op whose next part may go */
                if (s->blocked && waits_met(e, s->op, s->part) && start(S, ent, st, q->head))
                    return -1;
                continue;
            }
            if (s->t_head < 0)
                s->t_head = S->now;
            if (!waits_met(e, s->op, 0)) {
                s->waited_dp |= s->op->wait[0] == CNT_GATHER_DONE || s->op->wait[0] == CNT_REDUCE_DONE;
                continue;
            }
            if (start(S, ent, st, q->head))
                return -1;
        } else {
            /* Waiting ops in issue order (deterministic): take the first
             * whose waits are met, then look again from the top, since
             * starting it may re-enter try_start and change the list. The
             * list holds the few ops issued ahead (receives, sends). */
            for (;;) {
                int w = 0;
                while (w < q->queued && !waits_met(e, q->s[q->waiting[w]].op, 0))
                    w++;
                if (w == q->queued)
                    break;
                int k = q->waiting[w];
                memmove(&q->waiting[w], &q->waiting[w + 1], sizeof(int) * (q->queued - w - 1));
                q->queued--;
                if (start(S, ent, st, k))
                    return -1;
            }
        }
    }
    return 0;
}

/* ---- completing ops ------------------------------------------------- */

static void bump(entity_t *e, const sched_op_t *op, int counter)
{
    if (counter == CNT_RECV_FWD || counter == CNT_RECV_BWD) {
        /* Receives may finish out of order; count them in order. */
        int d = counter == CNT_RECV_FWD ? 0 : 1;
        long off = op->x[0].index - e->recv_base[d];
        e->recv_bits[d] |= 1ULL << off;
        while (e->recv_bits[d] & 1)
            e->recv_bits[d] >>= 1, e->recv_base[d]++, e->cnt[counter]++;
    } else if (counter != CNT_NONE) {
        e->cnt[counter]++;
    }
}

/* A part of the op at the slot ends: bump its per-part counter, then run
 * the next part (now, or once its counter allows) or complete the op. */
static int part_done(sim_t *S, int ent, int stream, int slot)
{
    entity_t *e = &S->e[ent];
    slot_t *s = &e->q[stream].s[slot];
    if (s->op->kind == SOP_XFER) /* a blocking exchange after its sync gap (xfer_done) */
        return complete(S, ent, stream, slot);
    s->work_ns += S->now - s->t_work;
    bump(e, s->op, s->op->bump_part);
    if (++s->part < s->op->parts) {
        s->blocked = 1;
        s->t_work = S->now;
        return try_start(S, ent); /* starts the next part when its wait is met */
    }
    return complete(S, ent, stream, slot);
}

/* Charges a finished compute-stream op to the breakdown: the wait before
 * its work to the bubble (or DP when it waited for DP data), its work by
 * kind. */
static void account(sim_t *S, entity_t *e, const slot_t *s)
{
    result_account_t *a = &e->acc;
    int64_t work = s->work_ns, wait = (S->now - s->t_head) - work;
    if (s->waited_dp)
        a->dp += wait;
    else
        a->bubble += wait;
    switch (s->op->kind) {
    case SOP_FWD:
    case SOP_BWD: {
        const cost_chunk_t *c = &S->ct[e->stage * S->v + s->op->chunk];
        double tp = s->op->kind == SOP_FWD ? c->fwd_tp_s : c->bwd_tp_s, all = tp + (s->op->kind == SOP_FWD ? c->fwd_s : c->bwd_s);
        int64_t tp_ns = all > 0 ? (int64_t)(work * (tp / all)) : 0;
        a->tp += tp_ns, a->compute += work - tp_ns;
        break;
    }
    case SOP_XFER:
        a->pp += work;
        break;
    case SOP_DP_GATHER:
    case SOP_DP_REDUCE:
    case SOP_JOIN:
        a->dp += work;
        break;
    case SOP_OPTIM:
        a->optimizer += work - S->overhead_ns;
        a->other += S->overhead_ns;
        break;
    default:
        a->other += work;
    }
}

/* A forward's or backward's time in the experts' dispatch and combine as
 * an EP rank of even load sees it, what a measured run's all-to-alls take:
 * their cost, and the wait for the busiest expert rank, whose extra load
 * (the draw's, as in op_start) this op's time charges every rank with. */
static int64_t a2a_ns(const sim_t *S, const entity_t *e, const sched_op_t *op)
{
    if (op->kind != SOP_FWD && op->kind != SOP_BWD)
        return 0;
    const cost_chunk_t *c = &S->ct[e->stage * S->v + op->chunk];
    double a = (op->kind == SOP_FWD ? c->fwd_a2a_s : c->bwd_a2a_s) / op->parts;
    if (a > 0) /* a draw below the even load waits for nobody */
        a += fmax(0, moe_extra_s(S, e, op)) / op->parts;
    return ns(a);
}

/* Records the op for every traced rank that this entity stands for. */
static int record_as(sim_t *S, int ent, int stream, const slot_t *s, int kind, int64_t head, int64_t start,
                     int64_t end)
{
    for (int k = 0; k < S->opts->ntrace; k++) {
        if (S->trace_ent[k] != ent)
            continue;
        if (S->ntl == S->tl_cap) {
            long cap = S->tl_cap ? S->tl_cap * 2 : 1024;
            result_op_t *t = realloc(S->tl, sizeof *t * cap);
            if (!t)
                return -1;
            S->tl = t, S->tl_cap = cap;
        }
        S->tl[S->ntl++] = (result_op_t){S->opts->trace_ranks[k], stream, kind, s->op->mb, s->op->chunk, head, start, end,
                                        0, 0, a2a_ns(S, &S->e[ent], s->op), -1};
    }
    return 0;
}

/* The optimizer op carries the per-iteration host overhead (account): the
 * timeline shows the two apart, the overhead as a "host" op after it. */
static int record(sim_t *S, int ent, int stream, const slot_t *s)
{
    int64_t start = S->now - s->work_ns; /* multi-part ops: their parts' work, back to back */
    int64_t head = s->t_head < 0 ? start : s->t_head;
    if (s->op->kind == SOP_OPTIM && S->overhead_ns > 0) {
        int64_t split = S->now - S->overhead_ns;
        return record_as(S, ent, stream, s, SOP_OPTIM, head, start, split) ||
               record_as(S, ent, stream, s, SOP_HOST, split, split, S->now);
    }
    return record_as(S, ent, stream, s, s->op->kind, head, start, S->now);
}

static int complete(sim_t *S, int ent, int stream, int slot)
{
    entity_t *e = &S->e[ent];
    queue_t *q = &e->q[stream];
    slot_t *s = &q->s[slot];
    if (s->op->kind == SOP_XFER || s->op->kind == SOP_JOIN) /* the rest went through part_done */
        s->work_ns += S->now - (s->t_work < 0 ? S->now : s->t_work);
    if (stream == STREAM_COMPUTE)
        account(S, e, s);
    else if (sched_stream_dp(stream))
        e->acc.dp_busy += s->work_ns;
    else
        e->acc.pp_busy += s->work_ns;
    bump(e, s->op, s->op->bump);
    if (e->traced && record(S, ent, stream, s))
        return -1;
    s->state = SLOT_FREE;
    if (e->it) { /* its cell goes back for the next op */
        op_cell_t *c = (op_cell_t *)s->op;
        c->next = e->spare, e->spare = c;
    }
    if (!is_pool(stream)) {
        q->head = (q->head + 1) % q->cap, q->n--, q->busy = 0;
    } else {
        q->n--, q->free_idx[q->nfree++] = slot;
    }
    if (S->now > e->acc.end)
        e->acc.end = S->now;
    return try_start(S, ent);
}

/* The optimizer step after the world sum of gradient clipping, on each
 * entity at its own pace (a straggler's, unless only its forward passes
 * are slow); the per-iteration host overhead goes with it (account). */
static int optim_step(sim_t *S, int ent, int stream)
{
    entity_t *e = &S->e[ent];
    int slot = e->q[stream].head;
    double slow = S->opts->slow_forward_only ? 1 : e->factor;
    int64_t dur = ns(cost_optimizer_s(S->hw, S->job, e->q[stream].s[slot].op->bytes) * slow) + S->overhead_ns;
    return eng_ev_at(S, S->now + dur, EV_OP_DONE, ent, stream, slot, 0);
}

/* Every member of a finished meeting completes its op at the head of the
 * meeting's stream (after the world sum, the optimizer goes on). */
static int meeting_done(sim_t *S, const event_t *ev)
{
    sim_meet_t m = sim_meet_take(&S->meets, ev->key);
    /* completing members starts new meetings that reuse S->mem: copy it */
    int local[64], need = ev->slot == GK_WORLD ? S->ne : S->classes + S->E_tp + 2;
    int *mem = need <= 64 ? local : malloc(sizeof(int) * need);
    if (!mem)
        return -1;
    int n = members(S, ev->slot, &S->e[ev->ent], mem), rc = 0;
    for (int i = 0; i < n && !rc; i++)
        rc = ev->slot == GK_WORLD ? optim_step(S, mem[i], m.stream)
                                  : part_done(S, mem[i], m.stream, S->e[mem[i]].q[m.stream].head);
    if (mem != local)
        free(mem);
    return rc;
}

static int xfer_done(sim_t *S, const event_t *ev)
{
    int ent[2] = {ev->ent, ev->ent2}, st[2] = {ev->stream, ev->stream2}, sl[2] = {ev->slot, ev->slot2};
    for (int side = 0; side < 2; side++) {
        slot_t *s = &S->e[ent[side]].q[st[side]].s[sl[side]];
        if (--s->pending)
            continue;
        /* A blocking exchange ends when the host has synchronised the
         * device and launched again (Megatron's torch.cuda.synchronize). */
        int rc = st[side] == STREAM_COMPUTE && S->sync_gap_ns > 0
                     ? eng_ev_at(S, S->now + S->sync_gap_ns, EV_OP_DONE, ent[side], st[side], sl[side], 0)
                     : complete(S, ent[side], st[side], sl[side]);
        if (rc)
            return -1;
    }
    return 0;
}

/* ---- run ---------------------------------------------------------------- */

/* After the queue drains: every entity must have run its whole program;
 * otherwise name the first stuck rank and the op it waits on. */
static int check_finished(sim_t *S)
{
    for (int i = 0; i < S->ne; i++) {
        entity_t *e = &S->e[i];
        int busy = !e->pulled_all;
        for (int st = 0; st < STREAM_COUNT; st++)
            busy |= e->q[st].n > 0;
        if (!busy)
            continue;
        char line[400] = "(nothing queued)";
        for (int st = 0; st < STREAM_COUNT; st++)
            if (e->q[st].n) {
                const queue_t *q = &e->q[st];
                const slot_t *sl = &q->s[q->head];
                for (int k = 0; is_pool(st) && k < q->cap && (sl = &q->s[k])->state == SLOT_FREE; k++)
                    ;
                sched_format(sl->op, line, sizeof line);
                break;
            }
        snprintf(S->err, S->errlen, "deadlock at t = %lld ns: rank %d (stage %d) waits on: %s",
                 (long long)S->now, global_rank(S, e), e->stage, line);
        return -1;
    }
    return 0;
}

static int run_loop(sim_t *S)
{
    for (int i = 0; i < S->ne; i++)
        if (try_start(S, i))
            return -1;
    if (S->net && eng_net_resched(S))
        return -1;
    sim_heap_node *n;
    while ((n = sim_heap_pop(&S->heap))) {
        event_t *ev = SIM_HEAP_ENTRY(n, event_t, node);
        S->now = (int64_t)n->t_ns;
        S->events++;
        int rc = ev->type == EV_OP_DONE     ? part_done(S, ev->ent, ev->stream, ev->slot)
                 : ev->type == EV_MEET_DONE ? meeting_done(S, ev)
                 : ev->type == EV_NET       ? eng_net_event(S)
                                            : xfer_done(S, ev);
        if (ev != &S->net_ev)
            ev->next_free = S->free_ev, S->free_ev = ev;
        if (rc || (S->net && S->net_dirty && eng_net_resched(S)))
            return -1;
    }
    return check_finished(S);
}

int sim_run(const job_t *job, const hw_t *hw, const sim_opts_t *o, result_t *r, char *err, int len)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    sim_opts_t unfolded = *o; /* flows: every rank plays, folded copies would not contend */
    if (o->network == SIM_NET_FLOWS)
        unfolded.fold = 0;
    sim_t S = {.job = job, .hw = hw, .opts = &unfolded, .err = err, .errlen = len};
    memset(r, 0, sizeof *r);
    err[0] = 0;
    if (!unfolded.fold && eng_unfolded_too_big(job, err, len))
        return -1;
    int rc = eng_setup(&S); /* -2: the network model refused the fabric, its reason in err */
    if (rc == -1)
        snprintf(err, len, "out of memory setting up %d ranks", job->num_gpus);
    else if (rc == 0 && (rc = run_loop(&S)) != 0 && !err[0])
        snprintf(err, len, "out of memory simulating %d ranks", job->num_gpus);
    if (!rc)
        rc = eng_collect(&S, r, err, len);
    S.tl_failed_handover = rc != 0;
    eng_teardown(&S);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    r->wall_s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    return rc;
}

