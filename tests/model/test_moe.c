/* test_moe: mixtures of experts (model/moe.h) against values worked out by
 * hand: which layers are MoE layers, the folded expert groups, the
 * parameters a rank holds, the FLOPs counted on the active parameters,
 * and the bytes and shapes of the MoE layer's ops. */
#include "model/cost.h"
#include "model/layer.h"
#include "model/moe.h"
#include "model/workload.h"
#include "../check.h"
#include "job_of.h"

#include <math.h>
#include <string.h>

#define BASE "--preset megatron-lm --attention flash --num-layers 8 --hidden-size 4096 --num-attention-heads 32 " \
             "--num-query-groups 8 --ffn-hidden-size 14336 --swiglu --disable-bias-linear --seq-length 4096 " \
             "--tensor-model-parallel-size 2 --sequence-parallel --pipeline-model-parallel-size 2 " \
             "--num-layers-per-virtual-pipeline-stage 0 --num-gpus 64 --global-batch-size 64 --gpu h100-sxm-80gb"

static const op_t *find(const op_t *ops, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(ops[i].name, name))
            return &ops[i];
    return NULL;
}

int main(void)
{
    job_t d, j;
    char err[OPT_ERR_LEN];
    CHECK(!job_of(BASE, &d, err), "%s", err);
    CHECK(!job_of(BASE " --num-experts 8 --moe-router-topk 2 --expert-model-parallel-size 4 --moe-layer-freq 2 "
                        "--moe-token-dispatcher-type alltoall --moe-grouped-gemm", &j, err), "%s", err);
    /* 64 GPUs = TP 2 x PP 2 x DP 16; experts: ETP 2 (TP's), EP 4, EDP 2 x 16 / (2 x 4) = 4. */
    check_eq("ETP (TP's by default)", 2, j.etp, "Megatron-Core's default");
    check_eq("EDP", 4, j.edp, "TP 2 x DP 16 / (ETP 2 x EP 4)");
    check_eq("MoE layers of 8, every 2nd", 4, moe_layers_in(&j, 0, 8), "layers 0, 2, 4, 6");
    check_eq("MoE layers among 1 .. 4", 2, moe_layers_in(&j, 1, 4), "layers 2 and 4");
    check_eq("stage 1's MoE layers", 2, moe_stage_layers(&j, 1), "layers 4 to 7: 4 and 6");
    job_t k;
    CHECK(!job_of(BASE " --num-experts 8 --moe-dense-first-layers 3", &k, err), "%s", err);
    check_eq("3 dense layers first: MoE layers of 8", 5, moe_layers_in(&k, 0, 8), "layers 3 to 7");
    check_eq("... among 0 .. 3", 1, moe_layers_in(&k, 0, 4), "layer 3");
    hw_t hw;
    CHECK(!job_hardware(&j, &hw, err), "%s", err);
    group_layout_t ep = cost_group_layout(&j, &hw, GROUP_EP), edp = cost_group_layout(&j, &hw, GROUP_EDP);
    check_eq("EP group: members on a node", 4, ep.per_node, "stride ETP 2: 4 of them on 8 GPUs");
    check_eq("EDP group: size", 4, edp.size, "stride ETP x EP = 8: one a node");
    /* A rank's experts: 2 of 8 in each of its 2 MoE layers, each split by ETP 2: 3 h f / 2 each. */
    double expert = 3.0 * 4096 * 14336;
    check_rel("stage 1's expert parameters on a rank", 2 * 2 * expert / 2, workload_stage_expert_params_local(&j, 1),
              0, "2 layers x 2 experts x 3 h f / ETP");
    /* FLOPs per token: each MoE layer swaps the dense MLP (3 h f) for its top-2 experts (6 h f) and the
     * router (h x 8): 6 FLOPs a weight (forward and backward) x 4 layers. */
    workload_t wd, wm;
    workload_compute(&d, &wd);
    workload_compute(&j, &wm);
    check_rel("model FLOPs a token, MoE less dense", 6.0 * 4 * (expert + 4096.0 * 8),
              wm.model_flops_per_token - wd.model_flops_per_token, 1e-12, "6 x 4 layers x (one more expert + router)");
    check_rel("active parameters, MoE less dense", 4 * (expert + 4096.0 * 8), wm.params_active - wd.params_total, 1e-12,
              "the same swap in parameters");
    check_rel("all parameters, MoE less dense", 4 * (7 * expert + 4096.0 * 8), wm.params_total - wd.params_total, 1e-12,
              "7 more experts and the router in each of 4 layers");
    /* The ops: each rank's SP share of 4096 tokens (2048), top-2, sent over EP; after the gather over
     * ETP the rank computes 2048 x 2 x 2 = 8192 rows for its 2 experts, 4096 each, in one grouped GEMM. */
    op_t ops[LAYER_MAX_OPS];
    int n = layer_ops_of(&j, PASS_FWD, 1, ops);
    const op_t *a2a = find(ops, n, "ep_dispatch"), *fc1 = find(ops, n, "expert_fc1");
    CHECK(a2a && fc1, "no ep_dispatch or expert_fc1 op");
    check_rel("dispatch all-to-all bytes", 2048.0 * 2 * 4096 * 2, a2a->bytes, 0, "T / TP x top-k x h x 2 bytes");
    check_eq("dispatch over EP", GROUP_EP, a2a->group, "the experts' group");
    check_rel("expert FC1: rows an expert", 4096, fc1->m, 0, "8192 rows over 2 experts");
    check_rel("expert FC1: width on a rank", 2 * 14336.0 / 2, fc1->n, 0, "gate and up, split by ETP 2");
    check_rel("expert FC1: grouped over the rank's experts", 2, fc1->batch, 0, "--moe-grouped-gemm");
    n = layer_ops_of(&j, PASS_FWD, 0, ops);
    check_true("a dense layer of the same job has no expert op", !find(ops, n, "expert_fc1") && find(ops, n, "fc1"),
               "layer_ops_of(..., 0, ...)");
    /* The allgather dispatcher gathers every token over ETP x EP (Megatron-Core's tp_ep group): with EP 1
     * and ETP 2 that is the TP pair, priced as an all-gather of the same bytes over TP (it was EP's group of
     * one, free). */
    job_t g;
    CHECK(!job_of(BASE " --num-experts 8 --moe-token-dispatcher-type allgather", &g, err), "%s", err);
    n = layer_ops_of(&g, PASS_FWD, 1, ops);
    const op_t *ag = find(ops, n, "ep_ag_tokens");
    CHECK(ag, "no ep_ag_tokens op");
    check_eq("allgather dispatcher's group", GROUP_ETP_EP, ag->group, "ETP x EP");
    group_layout_t tp_ep = cost_group_layout(&g, &hw, GROUP_ETP_EP), tp = cost_group_layout(&g, &hw, GROUP_TP);
    check_eq("ETP x EP group: size", 2, tp_ep.size, "ETP 2 x EP 1");
    check_rel("its gather's time", cost_coll_s(&hw, COLL_ALLGATHER, ag->bytes, &tp),
              cost_coll_s(&hw, COLL_ALLGATHER, ag->bytes, &tp_ep), 0, "an all-gather over TP's 2 ranks");
    check_true("... and not free", cost_op_s(&hw, &g, ag) > 0, "2 ranks exchange");
    /* A collective over a group of one is no op (Megatron-Core skips the call): the alltoall dispatcher
     * with EP 1 has no all-to-all, only the gather over ETP 2. */
    CHECK(!job_of(BASE " --num-experts 8 --moe-token-dispatcher-type alltoall", &g, err), "%s", err);
    n = layer_ops_of(&g, PASS_FWD, 1, ops);
    check_true("EP 1: no dispatch all-to-all", !find(ops, n, "ep_dispatch"), "a group of one rank");
    check_true("... the gather over ETP 2 stays", find(ops, n, "etp_ag_tokens") != NULL, "2 ranks");
    /* Routing imbalance: 8 experts over EP 2 with a coefficient of variation of 0.3 each; an EP rank's 4
     * vary with 0.3 / 2, and the busier of 2 ranks is E[max of 2 standard normals] = 1 / sqrt(pi) above. */
    CHECK(!job_of(BASE " --num-experts 8 --expert-model-parallel-size 2 --moe-expert-load-cv 0.3", &j, err), "%s", err);
    check_rel("the busier of 2 EP ranks' expected load", 1 + 0.15 / sqrt(M_PI), moe_load_factor(&j), 1e-9,
              "E[max of 2 N(0,1)] = 1/sqrt(pi), by hand");
    double sum = 0;
    for (long mb = 0; mb < 20000; mb++)
        sum += moe_load_draw(&j, 1, 0, 0, mb, 0);
    check_rel("the simulator's draws, mean of 20,000 micro-batches", moe_load_factor(&j), sum / 20000, 0.002,
              "the same expectation (sampling error ~0.0006)");
    check_rel("the same draw on every rank that asks", moe_load_draw(&j, 1, 3, 1, 7, 2), moe_load_draw(&j, 1, 3, 1, 7, 2), 0,
              "counter-based: seed, stage, chunk, micro-batch, layer");
    /* A chunk's forward: each MoE layer's all-to-alls wait for that layer's busiest rank, its own draw. */
    int nl = moe_chunk_layers(&j, 0, 0);
    double per = 0;
    for (int l = 0; l < nl; l++)
        per += moe_load_draw(&j, 1, 0, 0, 5, l) / nl;
    check_rel("a chunk's load: the mean of its MoE layers' draws", per, moe_chunk_load(&j, 1, 0, 0, 5), 1e-12,
              "model/moe.c moe_chunk_load");
    check_true("... each layer its own draw",
               nl >= 2 && moe_load_draw(&j, 1, 0, 0, 5, 0) != moe_load_draw(&j, 1, 0, 0, 5, 1), "the layer in the counter");
    /* EP 1: the one rank holds all the experts and every token, however they are routed. */
    job_t one = j;
    one.ep = 1;
    check_rel("EP 1: no imbalance, closed form", 1, moe_load_factor(&one), 0, "E[max of 1 normal] taken as 0");
    check_rel("EP 1: no imbalance, the simulator's draw", 1, moe_load_draw(&one, 1, 0, 0, 5, 0), 0,
              "every draw 1 (a random one had priced time a single rank cannot lose or gain)");
    /* EP 10 (20 experts, 2 a rank): one draw an op is the largest of 10 normals (Phi^-1(U^(1/10))); its
     * mean against the closed form's quadrature, and that against E[max of 10 N(0,1)] = 1.53875 (tables of
     * normal order statistics). */
    job_t w;
    CHECK(!job_of(BASE " --num-gpus 160 --global-batch-size 80 --num-experts 20 --expert-model-parallel-size 10 "
                        "--expert-tensor-parallel-size 1 --moe-expert-load-cv 0.3", &w, err), "%s", err);
    check_rel("EP 10: the closed form's expected busiest load", 1 + 0.3 / sqrt(2) * 1.53875, moe_load_factor(&w), 1e-5,
              "1 + 0.3 / sqrt(2) x 1.53875 (order-statistics tables)");
    sum = 0;
    for (long mb = 0; mb < 20000; mb++)
        sum += moe_load_draw(&w, 7, 1, 0, mb, 0);
    check_rel("EP 10: the simulator's draws, mean of 20,000", moe_load_factor(&w), sum / 20000, 0.002,
              "the same expectation (sampling error ~0.0008)");
    /* Capacity 1.05: the busiest rank drops what is past its capacity; padded, every expert computes it. */
    j.moe_capacity_factor = 1.05;
    double most = 0;
    for (long mb = 0; mb < 1000; mb++)
        most = fmax(most, moe_load_draw(&j, 1, 0, 0, mb, 0));
    check_rel("capacity 1.05: the busiest rank's load at most", 1.05, most, 0, "the tokens past it dropped");
    check_rel("... and the closed form's", 1.05, moe_load_factor(&j), 0, "min(1.0846, 1.05)");
    j.moe_pad_to_capacity = 1;
    check_rel("padded to capacity: no imbalance left", 1, moe_load_factor(&j), 0, "every expert computes 1.05 x");
    return check_done("test_moe");
}
