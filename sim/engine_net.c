/* sim/engine_net.c: the engine's flows mode (--network flows). Pipeline
 * transfers become flows between their GPUs and DP collectives one flow
 * per ring edge, sharing the fabric's links max-min (sim/net.c); one
 * network event in the engine's heap follows the fabric's next change. */
#include "sim/engine_int.h"

#include "model/layout.h"

#include <math.h>

#include <stdlib.h>
#include <string.h>

static int fj_alloc(sim_t *S)
{
    if (S->fj_free < 0) {
        int cap = S->fj_cap ? S->fj_cap * 2 : 1024;
        flow_job_t *f = realloc(S->fj, sizeof *f * cap);
        if (!f)
            return -1;
        for (int i = S->fj_cap; i < cap; i++)
            f[i].next_free = i + 1 < cap ? i + 1 : -1;
        S->fj = f, S->fj_free = S->fj_cap, S->fj_cap = cap;
    }
    int i = S->fj_free;
    S->fj_free = S->fj[i].next_free;
    memset(&S->fj[i], 0, sizeof S->fj[i]);
    return i;
}

static int net_flow(sim_t *S, int src_gpu, int dst_gpu, double bytes, int job)
{
    S->net_dirty = 1;
    return sim_net_flow_start(S->net, src_gpu, dst_gpu, (uint64_t)(bytes > 1 ? bytes : 1), (uint64_t)job,
                              (uint64_t)S->now) < 0 ? -1 : 0;
}

/* Keeps the one network event at the fabric's next change. */
int eng_net_resched(sim_t *S)
{
    uint64_t t;
    S->net_dirty = 0;
    if (!sim_net_next_event(S->net, &t)) {
        if (sim_heap_queued(&S->net_ev.node))
            sim_heap_remove(&S->heap, &S->net_ev.node);
        return 0;
    }
    if (t >= (uint64_t)SIM_MAX_NS)
        return eng_past_the_end(S, SIM_MAX_NS);
    if (sim_heap_queued(&S->net_ev.node)) {
        sim_heap_update(&S->heap, &S->net_ev.node, t, S->seq++);
        return 0;
    }
    return sim_heap_push(&S->heap, &S->net_ev.node, t, S->seq++);
}

/* Flows that ended: a transfer completes (after the launch latency); a
 * collective when its last ring edge has. */
int eng_net_event(sim_t *S)
{
    sim_net_done d;
    sim_net_advance(S->net, (uint64_t)S->now);
    while (sim_net_pop_done(S->net, &d)) {
        flow_job_t *j = &S->fj[d.tag];
        int rc = 0;
        if (!j->is_coll)
            rc = eng_xfer_event(S, S->now + j->delay_ns, j->ent, j->stream, j->slot);
        else if (--j->left == 0)
            rc = eng_ev_at(S, S->now + j->delay_ns, EV_MEET_DONE, j->ent[0], j->stream[0], j->kind, j->key);
        if (!j->is_coll || j->left == 0)
            j->next_free = S->fj_free, S->fj_free = (int)d.tag;
        if (rc)
            return -1;
    }
    S->net_dirty = 1;
    return 0;
}

/* A pipeline transfer on the fabric: a flow between the two GPUs, done
 * (both sides' ops) after the collective launch latency. */
int eng_net_xfer(sim_t *S, const int ent[2], const int st[2], const int sl[2], int src_gpu, int dst_gpu,
                 double bytes)
{
    int job = fj_alloc(S);
    if (job < 0)
        return -1;
    flow_job_t *j = &S->fj[job];
    memcpy(j->ent, ent, sizeof j->ent), memcpy(j->stream, st, sizeof j->stream), memcpy(j->slot, sl, sizeof j->slot);
    j->delay_ns = ns(S->hw->cluster.coll_launch_us * 1e-6);
    return net_flow(S, src_gpu, dst_gpu, bytes, job);
}

/* A DP collective on the fabric: one flow per ring edge, each carrying the
 * ring's share of the bytes ((n-1)/n of them for all-gather and
 * reduce-scatter, twice that for all-reduce), then the launch and per-step
 * latencies. On idle links this is the alpha-beta ring; under load the
 * edges share links max-min with everything else. */
int eng_net_ring(sim_t *S, int ent, int stream, uint64_t key, int n)
{
    const entity_t *e = &S->e[ent];
    const sched_op_t *op = e->q[stream].s[e->q[stream].head].op;
    int ar = op->kind == SOP_DP_REDUCE && S->job->zero_stage == 0;
    double frac = (ar ? 2.0 : 1.0) * (n - 1) / n;
    int steps = (ar ? 2 : 1) * (n - 1);
    int job = fj_alloc(S);
    if (job < 0)
        return -1;
    flow_job_t *j = &S->fj[job];
    j->is_coll = 1, j->key = key, j->kind = GK_DP, j->left = n;
    j->ent[0] = ent, j->stream[0] = stream;
    j->delay_ns = ns(S->hw->cluster.coll_launch_us * 1e-6 + steps * S->hw->cluster.alpha_net_us * 1e-6);
    int *mem = malloc(sizeof(int) * n);
    if (!mem)
        return -1;
    memcpy(mem, S->mem, sizeof(int) * n);
    int rc = 0;
    for (int i = 0; i < n && !rc; i++)
        rc = net_flow(S, global_rank(S, &S->e[mem[i]]), global_rank(S, &S->e[mem[(i + 1) % n]]), op->bytes * frac, job);
    free(mem);
    return rc;
}

/* The fabric of the cluster profile, links at the bandwidth NCCL reaches
 * on large messages (the profile's efficiency curves at 128 MiB). */
int eng_net_setup(sim_t *S)
{
    const hw_cluster_t *c = &S->hw->cluster;
    int nodes = layout_nodes(S->job->num_gpus, c->gpus_per_node);
    double net_eff = curve_eval(&c->net_eff, 134217728.0);
    double nvl_eff = fmin(1, curve_eval(&c->nvlink_eff, 134217728.0) * c->nvlink_scale);
    sim_net_cfg cfg;
    sim_net_cfg_megascale(&cfg, nodes);
    cfg.gpus_per_node = c->gpus_per_node, cfg.nics_per_node = c->nics_per_node;
    cfg.nvlink_GBps = S->hw->gpu.nvlink_gbps * nvl_eff;
    cfg.nic_gbps = c->nic_gbit * net_eff;
    cfg.switch_port_gbps = c->nic_gbit * c->tor_uplink_ratio * net_eff;
    if (c->fabric == FABRIC_FATTREE)
        cfg.fabric = SIM_NET_FATTREE, cfg.tiers = 3, cfg.tor_oversub = c->oversubscription;
    cfg.ecmp = S->opts->ecmp_ideal ? SIM_NET_ECMP_IDEAL : SIM_NET_ECMP_HASH;
    cfg.lat_nvlink_ns = (uint64_t)(c->alpha_nvlink_us * 1000), cfg.lat_nic_ns = (uint64_t)(c->alpha_net_us * 1000);
    cfg.lat_switch_ns = (uint64_t)(c->alpha_hop_us * 1000);
    if (!(S->net = sim_net_new(&cfg, S->err, S->errlen)))
        return -1;
    sim_heap_node_init(&S->net_ev.node);
    S->net_ev.type = EV_NET;
    S->fj_free = -1;
    return 0;
}

/* The links longest at full capacity, most first (at most 5). */
void eng_net_contention(const sim_t *S, result_t *r)
{
    for (int l = 0; l < sim_net_link_count(S->net); l++) { /* the most contended links */
        sim_net_link_stats st;
        if (sim_net_link_stats_get(S->net, l, &st) || st.full_ns == 0)
            continue;
        int k = r->ncontended < 5 ? r->ncontended++ : 4;
        if (k == 4 && r->contended[4].full_s * 1e9 >= st.full_ns)
            continue;
        r->contended[k].full_s = st.full_ns * 1e-9, r->contended[k].busy_s = st.busy_ns * 1e-9;
        r->contended[k].bytes = st.bytes, r->contended[k].max_flows = st.max_flows;
        sim_net_link_name(S->net, l, r->contended[k].name, sizeof r->contended[k].name);
        for (; k > 0 && r->contended[k].full_s > r->contended[k - 1].full_s; k--) { /* keep sorted */
            __typeof__(r->contended[0]) t = r->contended[k];
            r->contended[k] = r->contended[k - 1], r->contended[k - 1] = t;
        }
    }
    r->critical_rank = r->entity_rank[r->critical_entity];
}
