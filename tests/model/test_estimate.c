/* test_estimate: the closed form's pipeline bubble equals (p-1)/m for 1F1B
 * and (p-1)/(v m) interleaved (Narayanan et al. 2021); the breakdown sums
 * to the iteration time; each overlap switch hides what it claims to. */
#include "model/cost.h"
#include "model/estimate.h"
#include "model/sched.h"
#include "../check.h"

#include <stdio.h>

static int make(job_t *j, hw_t *hw, int pp, int lpv, int batch)
{
    char err[OPT_ERR_LEN];
    job_default(j);
    j->tp = 1, j->pp = pp, j->num_gpus = pp, j->layers_per_vstage = lpv;
    j->num_layers = 48, j->hidden_size = 2048, j->num_attention_heads = 16;
    j->global_batch_size = batch, j->tp_comm_overlap = 0, j->padded_vocab_size = 8;
    if (job_hardware(j, hw, err) || job_finalize(j, 8, err)) {
        check_true("job setup (a case that cannot be set up fails)", 0, err);
        return -1;
    }
    return 0;
}

static void bubbles(void)
{
    /* DP = 1 and TP = 1: no DP or TP communication, so the bubble over the
     * pipelined work is exactly the schedule's fraction. */
    const struct { int p, lpv, m; } cases[] = {{4, 0, 16}, {8, 0, 64}, {4, 2, 16}, {8, 3, 32}, {8, 1, 8}};
    for (int i = 0; i < 5; i++) {
        job_t j;
        hw_t hw;
        estimate_t e;
        if (make(&j, &hw, cases[i].p, cases[i].lpv, cases[i].m))
            continue;
        estimate_job(&j, &hw, &e);
        /* The fill and drain run through every stage at its own pace: with
         * equal stages (p-1)/(v m) of the work; the first and last stage
         * carry the embedding and the (tiny) output layer. */
        double sum = 0, slowest = 0;
        for (int st = 0; st < j.pp; st++) {
            double mb = 0;
            for (int c = 0; c < j.vpp; c++) {
                cost_chunk_t ct;
                cost_chunk_times(&j, &hw, st, c, &ct);
                mb += ct.fwd_s + ct.bwd_s + ct.fwd_tp_s + ct.bwd_tp_s;
            }
            sum += mb, slowest = mb > slowest ? mb : slowest;
        }
        double work = e.br.compute_s + e.br.exposed_tp_comm_s, pure = (double)(j.pp - 1) / (j.vpp * j.num_microbatches);
        char what[96];
        snprintf(what, sizeof what, "bubble fraction p=%d v=%d m=%d (pure %.4f)", j.pp, j.vpp, j.num_microbatches, pure);
        check_rel(what, (sum - slowest) / (j.vpp * j.num_microbatches * slowest), e.br.bubble_s / work, 1e-9,
                  "(p-1)/(v m) over the stages' own times, Narayanan et al. 2021");
        check_rel("  ... and close to the pure formula", pure, e.br.bubble_s / work, 0.02, "stages within 2%");
    }
}

static double get(const job_t *j, const hw_t *hw, double (*field)(const estimate_t *))
{
    estimate_t e;
    estimate_job(j, hw, &e);
    return field(&e);
}
static double tp_exp(const estimate_t *e) { return e->br.exposed_tp_comm_s; }
static double pp_exp(const estimate_t *e) { return e->br.exposed_pp_comm_s; }
static double dp_exp(const estimate_t *e) { return e->br.exposed_dp_comm_s; }
static double iter(const estimate_t *e) { return e->iteration_s; }

static void overlaps(void)
{
    job_t j;
    hw_t hw;
    char err[OPT_ERR_LEN];
    job_default(&j);
    job_hardware(&j, &hw, err);
    job_apply_preset(&j, PRESET_MEGATRON);
    job_finalize(&j, 8, err);
    estimate_t e;
    estimate_job(&j, &hw, &e);
    const breakdown_t *b = &e.br;
    double sum = b->compute_s + b->bubble_s + b->exposed_tp_comm_s + b->exposed_pp_comm_s + b->exposed_dp_comm_s +
                 b->optimizer_s + b->other_s;
    check_rel("breakdown sums to the iteration time", e.iteration_s, sum, 1e-12, "definition");
    check_rel("MFU = model FLOPs / (time x GPUs x peak)",
              e.work.model_flops_per_iter / (e.iteration_s * j.num_gpus * 312e12), e.mfu, 1e-12, "definition");
    job_t k = j;
    k.tp_comm_overlap = 1;
    check_true("--tp-comm-overlap hides TP communication", get(&k, &hw, tp_exp) < 0.5 * get(&j, &hw, tp_exp),
               "exposed TP at most half");
    /* The ring's steps fill each other's waves on two compute streams, so
     * the overlap costs only the slowdown beside the transfers: a net gain
     * on Table 3 row 3's layer (parallel block), the sign of row 4. */
    job_t pb = j;
    pb.parallel_block = 1;
    k = pb, k.tp_comm_overlap = 1;
    check_true("--tp-comm-overlap shortens the iteration (parallel block)", get(&k, &hw, iter) < get(&pb, &hw, iter),
               "MegaScale Table 3 row 4: the overlap gains 2.2 MFU points");
    k = j, k.pp_comm_overlap = 1;
    check_true("--pp-comm-overlap hides PP communication", get(&k, &hw, pp_exp) < 0.5 * get(&j, &hw, pp_exp),
               "exposed PP at most half of blocking");
    /* Decoupled interleaved 1F1B: the fill and drain transfers, 2 (p - 1),
     * and p transfers at each of the v - 1 chunk steps of the warm-up and
     * of the cool-down (no DP overlap here, so nothing hides them). */
    estimate_t ek;
    estimate_job(&k, &hw, &ek);
    double p = k.pp, v = k.vpp;
    check_rel("decoupled PP exposure = (2(p-1) + 2(v-1)p) transfers", (2 * (p - 1) + 2 * (v - 1) * p) * ek.st.p2p_s,
              ek.br.exposed_pp_comm_s, 1e-12, "fill/drain and wrap stalls, model/estimate.c");
    k = j, k.overlap_grad_reduce = k.overlap_param_gather = 1;
    check_true("DP overlap hides DP communication", get(&k, &hw, dp_exp) < 0.5 * get(&j, &hw, dp_exp),
               "only the last/first chunk stay exposed");
    k = j, k.parallel_block = 1;
    check_true("parallel block halves exposed TP communication",
               fabs(get(&k, &hw, tp_exp) / get(&j, &hw, tp_exp) - 0.5) < 0.1, "2 of 4 forward collectives");
    /* Megatron's blocking exchanges: one transfer plus the host's sync gap
     * each (torch.cuda.synchronize after batch_isend_irecv), as many as the
     * first or last stage issues. */
    double xch = fmax(sched_blocking_exchanges(&j, 0), sched_blocking_exchanges(&j, j.pp - 1));
    check_rel("blocking PP exposure = exchanges x (transfer + host sync gap)",
              xch * (e.st.p2p_s + hw.cluster.host_sync_gap_us * 1e-6), e.br.exposed_pp_comm_s, 1e-12,
              "model/estimate.c, host_sync_gap_us of the megascale cluster");
    /* The sliding window speeds up the baseline's FlashAttention-1, which
     * skips the masked blocks: Table 3 row 3's sign (+1.0 MFU point). */
    k = pb, k.sliding_window = k.seq_length / 2;
    job_finalize(&k, 8, err);
    check_true("the window shortens FlashAttention-1's iteration (parallel block)",
               get(&k, &hw, iter) < get(&pb, &hw, iter), "MegaScale Table 3 row 3");
    job_t ms;
    job_default(&ms);
    job_finalize(&ms, 8, err);
    check_true("MegaScale preset faster than Megatron-LM", get(&ms, &hw, iter) < get(&j, &hw, iter),
               "same model and plan, 12,288 GPUs");
    /* Issue 2's targets, built-in profile (its cluster numbers fitted on
     * Table 3 only): within 3 MFU points of the paper at 12,288 GPUs. */
    estimate_t ems;
    estimate_job(&ms, &hw, &ems);
    check_rel("default predict MFU within 3 points (MegaScale Table 2: 55.2%)", 0.552, ems.mfu, 0.03 / 0.552,
              "arXiv 2402.15627 Table 2, 12,288 GPUs");
    check_rel("Megatron-LM preset MFU within 3 points (Table 2: 41.2%)", 0.412, e.mfu, 0.03 / 0.412,
              "arXiv 2402.15627 Table 2, 12,288 GPUs");
}

/* --recompute-method block with N of a chunk's L layers adds N / L of full
 * recomputation's backward work, chunk by chunk (layer-uniform chunks: 48
 * layers, PP 4, 2 chunks of 6 layers per stage). */
static void recompute_block(void)
{
    job_t j;
    hw_t hw;
    char err[OPT_ERR_LEN];
    if (make(&j, &hw, 4, 6, 16))
        return;
    cost_chunk_t none, full, block;
    cost_chunk_times(&j, &hw, 1, 0, &none);
    j.recompute = RECOMPUTE_FULL;
    job_finalize(&j, 8, err);
    cost_chunk_times(&j, &hw, 1, 0, &full);
    j.recompute_method = RECOMPUTE_BLOCK, j.recompute_num_layers = 2;
    job_finalize(&j, 8, err);
    cost_chunk_times(&j, &hw, 1, 0, &block);
    check_rel("block, 2 of 6 layers: chunk backward = none + 2/6 of full's extra",
              none.bwd_s + (full.bwd_s - none.bwd_s) / 3, block.bwd_s, 1e-12,
              "Megatron-LM --recompute-method block --recompute-num-layers 2");
    check_rel("block leaves the forward alone", none.fwd_s, block.fwd_s, 1e-15, "recomputation runs in the backward");
}

/* The closed form's cost does not grow with the batch (reliability
 * finding F11: at 16,777,216 sequences, counting the blocking exchanges op
 * by op took 2.9 s). The target is 1 ms; the bound allows 20 on a loaded
 * machine, far below what walking 16 million micro-batches takes. */
static void batch_independent_cost(void)
{
    job_t j;
    hw_t hw;
    if (make(&j, &hw, 8, 2, 16777216))
        return;
    estimate_t e;
    double t0 = check_now_s();
    for (int i = 0; i < 10; i++)
        estimate_job(&j, &hw, &e);
    double per_ms = (check_now_s() - t0) / 10 * 1e3;
    char got[96];
    snprintf(got, sizeof got, "%.3f ms per estimate (target 1 ms), %d micro-batches", per_ms, j.num_microbatches);
    check_true("closed form at batch 16,777,216 under 20 ms", per_ms < 20, got);
}

int main(void)
{
    batch_independent_cost();
    recompute_block();
    bubbles();
    overlaps();
    return check_done("test_estimate");
}
