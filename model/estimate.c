/* estimate: closed-form iteration time (see estimate.h). */
#include "model/estimate.h"

#include "model/cost.h"
#include "model/layer.h"
#include "model/moe.h"
#include "model/sched.h"
#include "model/split.h"

#include <math.h>

/* One micro-batch through stage s, all its chunks: compute (recomputation
 * and the embedding or output layer included) and exposed TP. */
typedef struct {
    double fw, bw, tf, tb;
} stage_mb_t;

static stage_mb_t stage_mb(const hw_t *hw, const job_t *j, const cost_layer_t c[2], int s)
{
    double ef, eb;
    cost_chunk_t x;
    cost_layers(c, split_stage_layers(j, s), split_stage_recomputed(j, s), moe_stage_layers(j, s), &x);
    cost_chunk_extra(hw, j, s, -1, &ef, &eb);
    /* routing imbalance: the busiest expert rank's expected share over the even one (model/moe.h) */
    double extra = j->moe_load_cv > 0 ? moe_load_factor(j) - 1 : 0;
    double share = hw_host_share(hw); /* ranks time-sharing cores: compute slower, as the simulator's stragglers */
    return (stage_mb_t){(x.fwd_s + extra * x.fwd_moe_s + ef) * share, (x.bwd_s + extra * x.bwd_moe_s + eb) * share,
                        x.fwd_tp_s, x.bwd_tp_s};
}

static void stage_times(const hw_t *hw, const job_t *j, stage_times_t *st)
{
    /* The stages are of three kinds, first, middle and last (model/split.h:
     * the middle ones hold the same layers); the slowest sets the pace of
     * the steady state, and every stage's micro-batch time, summed, is the
     * pipeline's fill and drain through all stages at their own pace. */
    int stage[3], count[3], kinds = split_kinds(j, stage, count);
    double best = -1;
    cost_layer_t c[2];
    cost_layer(hw, j, 0, &c[0]);
    if (j->num_experts > 0)
        cost_layer(hw, j, 1, &c[1]);
    st->all_stages_s = 0;
    st->nkinds = 0;
    for (int k = 0; k < kinds; k++) {
        stage_mb_t x = stage_mb(hw, j, c, stage[k]);
        st->kind[st->nkinds++] = (stage_kind_t){stage[k], count[k], x.fw + x.tf, x.bw + x.tb};
        if (k == 0)
            st->first_fwd_s = x.fw, st->first_bwd_s = x.bw, st->first_tp_fwd_s = x.tf, st->first_tp_bwd_s = x.tb;
        if (x.fw + x.bw + x.tf + x.tb > best) {
            best = x.fw + x.bw + x.tf + x.tb;
            st->fwd_s = x.fw, st->bwd_s = x.bw, st->slowest_stage = stage[k];
            st->tp_exposed_fwd_s = x.tf, st->tp_exposed_bwd_s = x.tb;
        }
        st->all_stages_s += count[k] * (x.fw + x.bw + x.tf + x.tb);
    }
    group_layout_t pp = cost_group_layout(j, hw, GROUP_PP);
    st->p2p_s = j->pp > 1 ? cost_p2p_s(hw, layer_p2p_bytes(j), &pp) : 0;
}

/* One phase in which `pieces` DP collectives of piece_s each run one after
 * another on the DP stream beside compute windows of window_s each (the
 * weights' all-gathers at the start, chunk by chunk or bucket by bucket;
 * the gradients' reductions at the end), and in which each step from one
 * window to the next may also wait stall_s (the decoupled interleaved
 * pipeline's wrap, see estimate_job). Uniform pieces and windows make the
 * two-stream flow shop exact window by window: a step takes the slower of
 * its collective and its window, the window slowed by comm_slowdown while
 * the collective shares the GPU and lengthened by the stall; one piece,
 * the first gather or the last reduction, is never hidden. The phase's time
 * beyond its unslowed windows is split into the stall (PP), the slowdown
 * (compute) and what remains (exposed DP). A comm-bound step hides the
 * stall and the slowdown behind the collective, so they are not counted
 * twice. */
typedef struct {
    double dp_s, slowdown_s, stall_s;
} phase_delay_t;

static void phase_delay(double piece_s, int pieces, double window_s, double stall_s, double slow,
                        phase_delay_t *d)
{
    double slowed = slow * fmin(window_s, piece_s);
    double extra = fmax(piece_s, window_s + slowed + stall_s) - window_s; /* per step, >= 0 */
    double to_stall = fmin(stall_s, extra), to_slow = fmin(slowed, extra - to_stall);
    d->stall_s = (pieces - 1) * to_stall;
    d->slowdown_s = (pieces - 1) * to_slow;
    d->dp_s = piece_s + (pieces - 1) * (extra - to_stall - to_slow);
}

/* DP collectives of one stage, per piece: gradient reduction (all-reduce,
 * or reduce-scatter with ZeRO >= 1) and weight all-gather (ZeRO >= 1).
 * Overlapped, they go piece by piece (see workload_dp_pieces); otherwise
 * as one collective each. Each piece pays its own ring latency. */
static void dp_piece_times(const hw_t *hw, const job_t *j, int stage, int pieces, double *reduce_s,
                           double *gather_s)
{
    double wb = job_weight_bytes(j), gb = job_grad_bytes(j);
    double Pe = workload_stage_expert_params_local(j, stage), P = workload_stage_params_local(j, stage) - Pe;
    group_layout_t grp[2] = {cost_group_layout(j, hw, GROUP_DP), cost_group_layout(j, hw, GROUP_EDP)};
    double part[2] = {P, Pe}; /* the experts' share over EDP (model/moe.h), after the rest */
    *reduce_s = *gather_s = 0;
    for (int k = 0; k < 1 + (Pe > 0); k++) {
        double red = j->overlap_grad_reduce ? part[k] / pieces : part[k];
        double gat = j->overlap_param_gather ? part[k] / pieces : part[k];
        *reduce_s += cost_coll_s(hw, j->zero_stage == 0 ? COLL_ALLREDUCE : COLL_REDUCESCATTER, red * gb, &grp[k]);
        *gather_s += j->zero_stage == 0 ? 0 : cost_coll_s(hw, COLL_ALLGATHER, gat * wb, &grp[k]);
    }
}

/* The first stage's; every stage cuts its own parameters into as many
 * pieces (model/sched.c). */
static void dp_times(const hw_t *hw, const job_t *j, stage_times_t *st)
{
    st->dp_pieces = workload_dp_pieces(j, workload_stage_params_local(j, 0));
    dp_piece_times(hw, j, 0, st->dp_pieces, &st->dp_reduce_s, &st->dp_gather_s);
}

/* The DP phases (weights gathered at the start, gradients reduced at the
 * end) and, for decoupled interleaved pipelines, the wrap stalls of the
 * warm-up and cool-down; see phase_delay. */
static void dp_exposure(const hw_t *hw, const job_t *j, const stage_times_t *st, double *exposed_s,
                        double *slowdown_s, double *wrap_s)
{
    /* A chunk's weights are first needed by the warm-up's first group of
     * p micro-batches, p x (chunk forward) after the previous chunk's; its
     * gradients are final once the cool-down's last group has run its
     * backward, p x (chunk backward) before the next chunk's. Without
     * chunks, buckets follow each other through the first forward (last
     * backward). Each stage runs its phases in its own windows with its
     * own pieces; the first stage starts first and finishes last, and a
     * later stage's phases have a lead on it: its first forward comes the
     * forwards of the stages before it (one chunk each, and a transfer)
     * later, its last backward as much earlier. The phase that reaches
     * furthest past the lead is the one on the critical path: the first
     * stage's when the stages are equal (model/split.h). */
    int n = st->dp_pieces, v = j->vpp, steps = v > 1 ? v : n; /* window steps in each phase */
    /* Decoupled interleaved 1F1B has zero slack at each chunk step of the
     * warm-up and cool-down: the first micro-batch of a group needs the
     * previous chunk's output from the last stage, which took p chunk times
     * plus p transfers to come round, against p chunk times of work here. */
    double wrap = j->pp_comm_overlap && j->pp > 1 && v > 1 ? j->pp * st->p2p_s : 0;
    double s = hw->gpu.comm_slowdown, lead_f = 0, lead_b = 0, best_r = -INFINITY, best_g = -INFINITY;
    phase_delay_t red = {0}, gat = {0};
    for (int k = 0; k < st->nkinds; k++) {
        const stage_kind_t *x = &st->kind[k];
        if (k > 0) { /* the stages before this kind's first: the first stage, then middle ones */
            const stage_kind_t *mid = &st->kind[1];
            int before_mid = x->stage - 1;
            lead_f = (st->kind[0].fwd_s + before_mid * mid->fwd_s) / v + x->stage * st->p2p_s;
            lead_b = (st->kind[0].bwd_s + before_mid * mid->bwd_s) / v + x->stage * st->p2p_s;
        }
        double red_s, gat_s, win_f = v > 1 ? j->pp * x->fwd_s / v : x->fwd_s / n;
        double win_b = v > 1 ? j->pp * x->bwd_s / v : x->bwd_s / n;
        dp_piece_times(hw, j, x->stage, n, &red_s, &gat_s);
        phase_delay_t r, g;
        if (j->overlap_grad_reduce)
            phase_delay(red_s, n, win_b, wrap, s, &r);
        else /* one collective after the last backward; the wraps still happen */
            phase_delay(0, steps, win_b, wrap, s, &r), r.dp_s = red_s;
        if (j->overlap_param_gather)
            phase_delay(gat_s, n, win_f, wrap, s, &g);
        else
            phase_delay(0, steps, win_f, wrap, s, &g), g.dp_s = gat_s;
        if (r.dp_s - lead_b > best_r)
            best_r = r.dp_s - lead_b, red = r, red.dp_s = fmax(0, best_r);
        if (g.dp_s - lead_f > best_g)
            best_g = g.dp_s - lead_f, gat = g, gat.dp_s = fmax(0, best_g);
    }
    *exposed_s = red.dp_s + gat.dp_s;
    *slowdown_s = red.slowdown_s + gat.slowdown_s;
    *wrap_s = red.stall_s + gat.stall_s;
}

/* ZeRO-3 (FSDP; model/sched.c's fsdp_compute, PP 1): the gathers before
 * every pass, the reductions after every backward and the passes
 * themselves, replayed piece by piece with the op program's dependencies
 * (gather piece i of a pass once part i - 2 is done, counting back into the
 * pass before; part i once piece i is in; reduction piece i once backward
 * part i is done, on its own stream) and the simulator's slowdown (a part
 * slowed by comm_slowdown for the time a DP collective still runs beside
 * it). The first micro-batches are replayed; each later one repeats the
 * last one's pattern, so the ends are extended linearly. Returns the time
 * beyond the passes' own (exposed DP) and the slowdown. */
typedef struct {
    double c, d, r;      /* compute, gather stream and reduction stream free at (r: the last reduction's end) */
    double r_start, r_before; /* the last reduction's start, and the end of the one before it */
    double slow;         /* slowdown so far */
    double end1, end2;   /* the last part's end, and the one before's (0 before any) */
} fsdp_replay_t;

/* A part from `ready`. The slowdown counts the collectives running when it
 * starts, as the simulator sees them: a gather or a reduction released by
 * the same event starts after the part (the compute stream goes first), so
 * each part meets only an earlier reduction still running. */
static void fsdp_part(fsdp_replay_t *x, double ready, double comp_s, double tp_s, double s)
{
    double t = fmax(x->c, ready), busy = (x->r_start < t ? x->r : x->r_before) - t;
    double extra = busy > 0 ? s * fmin(comp_s, busy) : 0;
    x->slow += extra;
    x->c = t + comp_s + extra + tp_s;
    x->end2 = x->end1, x->end1 = x->c;
}

static void fsdp_exposure(const hw_t *hw, const job_t *j, const stage_times_t *st, double *exposed_s,
                          double *slowdown_s)
{
    int n = st->dp_pieces, og = j->overlap_param_gather, orr = j->overlap_grad_reduce;
    long m = j->num_microbatches, mm = m < 3 ? m : 3;
    double g = st->dp_gather_s, rd = st->dp_reduce_s, s = hw->gpu.comm_slowdown;
    double cf = st->first_fwd_s, tf = st->first_tp_fwd_s, cb = st->first_bwd_s, tb = st->first_tp_bwd_s;
    fsdp_replay_t x = {0};
    double end_c[3] = {0}, end_r[3] = {0}, slow[3] = {0};
    for (long k = 0; k < mm; k++) {
        for (int bwd = 0; bwd <= 1; bwd++) {
            double comp = bwd ? cb : cf, tp = bwd ? tb : tf;
            int parts = og || (bwd && orr) ? n : 1;
            if (!og) /* the whole round, blocking */
                x.c += g;
            for (int i = 0; i < parts; i++) {
                double ready = 0;
                if (og) { /* piece i: after part i - 2, counting back into the pass before */
                    x.d = fmax(x.d, x.end2) + g;
                    ready = x.d;
                }
                fsdp_part(&x, ready, comp / parts, tp / parts, s);
                if (bwd && orr) { /* reduction piece i after part i */
                    x.r_before = x.r, x.r_start = fmax(x.r, x.c);
                    x.r = x.r_start + rd;
                }
            }
            if (bwd && !orr) { /* the whole reduction, blocking; the simulator issues what follows it,
                                  the next round's gathers included, once it is done */
                x.c += rd, x.end2 = x.end1, x.end1 = x.c;
                x.d = fmax(x.d, x.c);
            }
        }
        end_c[k] = x.c, end_r[k] = x.r, slow[k] = x.slow;
    }
    /* micro-batches beyond the replayed ones repeat the last one */
    long last = mm - 1, more = m - mm;
    double dc = mm > 1 ? end_c[last] - end_c[last - 1] : 0, dr = mm > 1 ? end_r[last] - end_r[last - 1] : 0;
    double ds = mm > 1 ? slow[last] - slow[last - 1] : 0;
    double total = fmax(end_c[last] + more * dc, end_r[last] + more * dr);
    *slowdown_s = slow[last] + more * ds;
    *exposed_s = fmax(0, total - m * (cf + tf + cb + tb) - *slowdown_s);
}

void estimate_job(const job_t *j, const hw_t *hw, estimate_t *e)
{
    workload_compute(j, &e->work);
    workload_memory(j, hw, &e->mem);
    stage_times_t *st = &e->st;
    stage_times(hw, j, st);
    dp_times(hw, j, st);
    double m = j->num_microbatches, p = j->pp, v = j->vpp;
    breakdown_t *br = &e->br;
    double per_mb_compute = st->fwd_s + st->bwd_s;
    double per_mb_tp = st->tp_exposed_fwd_s + st->tp_exposed_bwd_s;
    /* Pipeline: m micro-batches at the slowest stage's pace, plus the fill
     * and drain through the other stages, 1/v of a micro-batch each when
     * interleaved: (p - 1)/v micro-batch times for equal stages (1F1B,
     * interleaved and GPipe alike; Narayanan et al. 2021), less when the
     * slowest stage is slower than the rest. */
    double dp_exp, dp_slow, wrap_s = 0;
    if (j->zero_stage >= 3)
        fsdp_exposure(hw, j, st, &dp_exp, &dp_slow);
    else
        dp_exposure(hw, j, st, &dp_exp, &dp_slow, &wrap_s);
    br->compute_s = m * per_mb_compute + dp_slow;
    br->exposed_tp_comm_s = m * per_mb_tp;
    br->bubble_s = fmax(0, st->all_stages_s - (per_mb_compute + per_mb_tp)) / v; /* PP 1: rounding, not -1e-17 s */
    /* Megatron's blocking exchanges sit on the compute stream, one transfer
     * time each (the sends and receives inside one run concurrently), and
     * then the host synchronises the device and relaunches: as many as the
     * first or last stage's program issues. Decoupled asynchronous
     * transfers expose the fill and drain path, and the wrap stalls of an
     * interleaved warm-up and cool-down (dp_exposure). */
    double xch_s = j->pp_comm_overlap
                       ? 2 * (p - 1) * st->p2p_s
                       : fmax(sched_blocking_exchanges(j, 0), sched_blocking_exchanges(j, j->pp - 1)) *
                             (st->p2p_s + hw->cluster.host_sync_gap_us * 1e-6);
    br->exposed_pp_comm_s = p > 1 ? xch_s + wrap_s : 0;
    br->exposed_dp_comm_s = dp_exp;
    double P0 = workload_stage_params_local(j, 0), Pe0 = workload_stage_expert_params_local(j, 0);
    double shard = j->zero_stage >= 1 ? (P0 - Pe0) / j->dp_cp + Pe0 / j->edp : P0; /* the experts' over EDP */
    br->optimizer_s = cost_optimizer_s(hw, j, shard) * hw_host_share(hw) + cost_grad_norm_sync_s(hw, j);
    /* Tied embedding gradients summed between first and last stage. */
    group_layout_t emb = cost_group_layout(j, hw, GROUP_EMB);
    double emb_s = p > 1 && !j->untie_embeddings ? cost_coll_s(hw, COLL_ALLREDUCE, (double)j->padded_vocab_size * j->hidden_size /
                                                                j->tp * job_grad_bytes(j), &emb)
                         : 0;
    br->other_s = emb_s + (j->async_data_loader ? 0 : hw->cluster.host_stall_s) + hw->cluster.iteration_overhead_s;
    e->iteration_s = br->compute_s + br->bubble_s + br->exposed_tp_comm_s + br->exposed_pp_comm_s +
                     br->exposed_dp_comm_s + br->optimizer_s + br->other_s;
    double tokens = (double)j->global_batch_size * j->seq_length;
    e->tokens_per_s = tokens / e->iteration_s;
    e->peak_flops = cost_peak_flops(hw, j);
    double denom = e->iteration_s * j->num_gpus * e->peak_flops;
    e->mfu = e->work.model_flops_per_iter / denom;
    e->hfu = e->work.hw_flops_per_iter / denom;
    e->days_for_300b_tokens = 300e9 / e->tokens_per_s / 86400;
}
