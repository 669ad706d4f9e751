/* test_layout: the rank order (model/layout.h) in both of Megatron-Core's
 * orders, the default tp-cp-dp-pp and --use-tp-pp-dp-mapping's tp-pp-dp:
 * every rank's place and back, the groups' strides, and what the order
 * does to a pipeline transfer on Llama 3's cluster, each against values
 * worked out by hand from the formulas in layout.h; with CP, the
 * tp-cp-ep-pp-dp order's DP x CP group (CP's block, then the replicas
 * after PP) and where it lands. */
#include "model/cost.h"
#include "model/estimate.h"
#include "model/layout.h"
#include "../check.h"
#include "job_of.h"

#include <stdio.h>

/* Llama 3 405B's shape and 8K sequences (arXiv 2407.21783) on its cluster,
 * the built-in llama3-roce (16 GPUs a ToR, 3,072 a pod, 1:7 above): TP 8,
 * PP 8 over 8 layers (Meta's plan has PP 16 over 126; only the transfer's
 * size, s h / TP, and the groups' places matter here), DP 128. */
#define L405 "--preset megatron-lm --num-layers 8 --hidden-size 16384 --num-attention-heads 128 " \
             "--num-query-groups 8 --ffn-hidden-size 53248 --swiglu --seq-length 8192 --attention flash " \
             "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 8 " \
             "--num-layers-per-virtual-pipeline-stage 1 --num-gpus 8192 --global-batch-size 2048 " \
             "--gpu h100-sxm-80gb --cluster llama3-roce"

static void round_trip(int pp_inner, int cp)
{
    layout_t L = {2, 3 * cp, 4, pp_inner, cp};
    int bad = 0, n = L.tp * L.dp * L.pp;
    for (int r = 0; r < n; r++) {
        layout_pos_t at = layout_pos(L, r);
        bad += at.tp_i < 0 || at.tp_i >= L.tp || at.dp_i < 0 || at.dp_i >= L.dp || at.stage < 0 ||
               at.stage >= L.pp || layout_rank(L, at.tp_i, at.dp_i, at.stage) != r;
    }
    char what[96];
    snprintf(what, sizeof what, "%s, CP %d: %d ranks placed and back", pp_inner ? "tp-pp-dp" : "tp-dp-pp", cp, n);
    check_eq(what, 0, bad, "layout_rank(layout_pos(r)) = r, each coordinate in its range");
}

int main(void)
{
    for (int cp = 1; cp <= 2; cp++)
        round_trip(0, cp), round_trip(1, cp);
    /* TP 8, DP 64, PP 16: rank 8 is replica 1 of stage 0 in the default
     * order, stage 1 of replica 0 in tp-pp-dp; rank 8191 is the last of
     * both. */
    layout_t def = {8, 64, 16, 0, 1}, ppd = {8, 64, 16, 1, 1};
    check_eq("default: rank 8's replica", 1, layout_pos(def, 8).dp_i, "8 / TP 8 = 1, mod DP 64");
    check_eq("tp-pp-dp: rank 8's stage", 1, layout_pos(ppd, 8).stage, "8 / TP 8 = 1, mod PP 16");
    check_eq("tp-pp-dp: stage 15 of replica 63", 8191, layout_rank(ppd, 7, 63, 15), "7 + 8 (15 + 16 x 63)");
    check_eq("default: stage 1 of replica 0, TP rank 0", 512, layout_rank(def, 0, 0, 1), "8 x 64");

    job_t a, b;
    char err[OPT_ERR_LEN];
    CHECK(!job_of(L405, &a, err), "%s", err);
    CHECK(!job_of(L405 " --use-tp-pp-dp-mapping", &b, err), "%s", err);
    check_eq("default: PP group of 8 stages", 8, layout_group_span(&a, GROUP_PP).size, "PP");
    check_eq("default: PP stride", 1024, layout_group_span(&a, GROUP_PP).stride, "TP 8 x DP 128");
    check_eq("tp-pp-dp: PP stride", 8, layout_group_span(&b, GROUP_PP).stride, "TP 8");
    check_eq("tp-pp-dp: DP group", 128, layout_group_span(&b, GROUP_DP).size, "8192 / (8 x 8)");
    check_eq("tp-pp-dp: DP stride", 64, layout_group_span(&b, GROUP_DP).stride, "TP 8 x PP 8");
    check_eq("tp-pp-dp: first to last stage", 56, layout_group_span(&b, GROUP_EMB).stride, "TP 8 x (PP 8 - 1)");

    /* Llama 3's 128K plan in its [TP, CP, PP, DP] order: TP 8, CP 16, PP 16,
     * DP 8 on 16,384 GPUs. Rank 8 is CP rank 1 of stage 0 (CP next to TP);
     * rank 128 stage 1 (TP x CP = 128 a stage); rank 2048 replica 1, whose
     * DP x CP index is 16 (cp_i 0 + CP 16 x 1). The DP x CP group is CP's
     * 16 ranks 8 apart (a node each), then 8 such blocks 2,048 ranks
     * apart: 128 nodes, spanning 1,808 (past a pod's 384: tier 2). */
    job_t c;
    CHECK(!job_of(L405 " --use-tp-pp-dp-mapping --context-parallel-size 16 --pipeline-model-parallel-size 16 "
                       "--num-layers 16 --num-gpus 16384 --seq-length 131072 --global-batch-size 128", &c, err),
          "%s", err);
    layout_t lc = layout_of(&c);
    check_eq("tp-cp-pp-dp: rank 8's DP x CP index", 1, layout_pos(lc, 8).dp_i, "CP rank 1, replica 0");
    check_eq("tp-cp-pp-dp: rank 128's stage", 1, layout_pos(lc, 128).stage, "128 / (TP 8 x CP 16)");
    check_eq("tp-cp-pp-dp: rank 2048's DP x CP index", 16, layout_pos(lc, 2048).dp_i, "replica 1 x CP 16");
    check_eq("tp-cp-pp-dp: CP 15, stage 15, replica 7", 16383, layout_rank(lc, 7, 15 + 16 * 7, 15),
             "7 + 8 (15 + 16 (15 + 16 x 7))");
    layout_span_t dpc = layout_group_span(&c, GROUP_DP);
    check_eq("tp-cp-pp-dp: DP x CP block", 16, dpc.size, "CP 16");
    check_eq("tp-cp-pp-dp: its stride", 8, dpc.stride, "TP 8");
    check_eq("tp-cp-pp-dp: blocks", 8, dpc.blocks, "DP 8");
    check_eq("tp-cp-pp-dp: their stride", 2048, dpc.block_stride, "TP 8 x CP 16 x PP 16");
    hw_t hwc;
    CHECK(!job_hardware(&c, &hwc, err), "%s", err);
    group_layout_t gl = cost_group_layout(&c, &hwc, GROUP_DP);
    check_eq("tp-cp-pp-dp: DP x CP members a node", 1, gl.per_node, "stride 8 = a node of 8 GPUs");
    check_eq("tp-cp-pp-dp: DP x CP nodes", 128, gl.nodes, "128 members, one a node");
    check_eq("tp-cp-pp-dp: DP x CP tier", 2, gl.tier, "(15 x 8 + 7 x 2048) / 8 + 1 = 1808 nodes > a pod's 384");

    /* A stage's output, s h / TP bf16 = 8192 x 16384 x 2 / 8 = 33.6 MB, to
     * the next stage: in tp-pp-dp the next node, under the same ToR, over
     * one 400 Gb/s NIC (50 GB/s) at NCCL's 88-93% of line rate at 16-128
     * MiB (nccl_defaults' net_eff): 0.72-0.77 ms, plus launch and
     * latency. In the default order the stages lie 1,024 ranks apart, the
     * PP group spanning three of the 3,072-GPU pods, so that the transfers
     * share the 1:7 links above them: 7x slower. */
    hw_t hw;
    CHECK(!job_hardware(&b, &hw, err), "%s", err);
    estimate_t ea, eb;
    estimate_job(&a, &hw, &ea);
    estimate_job(&b, &hw, &eb);
    check_near("tp-pp-dp: one p2p transfer (ms)", 0.76, eb.st.p2p_s * 1e3, 0.04, 0,
               "33.6 MB at 50 GB/s x 0.88-0.93, + 22 us launch and latency");
    check_near("default order: p2p over tp-pp-dp's", 7, ea.st.p2p_s / eb.st.p2p_s, 0.35, 0,
               "the pods' 1:7 oversubscription");
    return check_done("test_layout");
}
