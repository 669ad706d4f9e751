/* test_cp: context parallelism (--context-parallel-size, --cp-comm-type)
 * in the layer's ops, the groups, the memory model and the rules, each
 * against a value worked out by hand from the split it describes: each
 * rank holds s b / CP tokens (two chunks, balanced for causal attention),
 * weights are whole on every CP rank (reduced over DP x CP), and the three
 * comm types move K and V as Megatron-Core's (docs/job.md). */
#include "model/cost.h"
#include "model/job.h"
#include "model/layer.h"
#include "model/workload.h"
#include "../check.h"
#include "job_of.h"

#include <stdio.h>
#include <string.h>

/* Sums over a pass's ops: attention FLOPs, and the bytes of each CP op by name. */
static double attn_flops(const job_t *j, pass_t pass)
{
    op_t ops[LAYER_MAX_OPS];
    int n = layer_ops(j, pass, ops);
    double f = 0;
    for (int i = 0; i < n; i++)
        if (ops[i].kind == OP_ATTN)
            f += op_flops(&ops[i]) * op_runs(&ops[i]);
    return f;
}

static const op_t *find(const job_t *j, pass_t pass, const char *name, op_t *ops)
{
    int n = layer_ops(j, pass, ops);
    for (int i = 0; i < n; i++)
        if (!strcmp(ops[i].name, name))
            return &ops[i];
    return NULL;
}

#define BASE "--preset megatron-lm --attention flash --num-layers 8 --hidden-size 4096 --num-attention-heads 32 " \
             "--num-query-groups 8 --seq-length 32768 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 1 " \
             "--num-layers-per-virtual-pipeline-stage 0 --num-gpus 64 --global-batch-size 32 --gpu h100-sxm-80gb"

int main(void)
{
    job_t one, j;
    char err[OPT_ERR_LEN];
    op_t ops[LAYER_MAX_OPS];
    CHECK(!job_of(BASE, &one, err), "%s", err);
    /* CP 4: DP = 64 / (2 x 4) = 8; the weights' group DP x CP = 32. */
    CHECK(!job_of(BASE " --context-parallel-size 4 --cp-comm-type all_gather", &j, err), "%s", err);
    check_eq("CP 4: DP", 8, j.dp, "64 GPUs / (TP 2 x CP 4 x PP 1)");
    check_eq("CP 4: the weights' group (DP x CP)", 32, j.dp_cp, "8 x 4");
    hw_t hw;
    CHECK(!job_hardware(&j, &hw, err), "%s", err);
    group_layout_t cpg = cost_group_layout(&j, &hw, GROUP_CP), dpg = cost_group_layout(&j, &hw, GROUP_DP);
    check_eq("CP group: members on one node", 4, cpg.per_node, "stride TP 2, 4 members, 8 GPUs a node");
    check_eq("DP x CP group: size", 32, dpg.size, "the gradient reduction spans CP");
    const op_t *g = find(&j, PASS_FWD, "qkv", ops);
    CHECK(g, "no qkv op");
    check_rel("CP 4: the QKV GEMM's rows", 32768.0 / 4, g->m, 0, "s b / CP tokens a rank");
    /* Attention: 1/CP of the causal work, whichever the comm type. */
    const char *types[] = {"p2p", "all_gather", "a2a"};
    for (int c = 0; c < 3; c++) {
        char args[1024], what[96];
        snprintf(args, sizeof args, BASE " --context-parallel-size 4 --cp-comm-type %s", types[c]);
        CHECK(!job_of(args, &j, err), "%s", err);
        snprintf(what, sizeof what, "%s: attention FLOPs x CP / one rank's without", types[c]);
        /* p2p's 4 blocks of causal s/4 count 4 (s/4)(s/4 + 1)/2 pairs a head, against s (s + 1) / 2 / 4:
         * (s/4 + 1) / (s + 1) x 4 = 1.0000916 at s = 32768 */
        check_rel(what, c == CP_P2P ? (32768.0 / 4 + 1) / (32768.0 + 1) * 4 : 1,
                  attn_flops(&j, PASS_FWD) * 4 / attn_flops(&one, PASS_FWD), 1e-12,
                  "the causal load balance: every rank 1/CP of the pairs");
    }
    /* The bytes each comm type moves, per layer forward, on one rank: K and
     * V are 8 groups / TP 2 = 4 heads of 128 = 512 wide, 2 bytes. */
    double T = 32768.0 / 4, kv = 512, wb = 2;
    CHECK(!job_of(BASE " --context-parallel-size 4 --cp-comm-type p2p", &j, err), "%s", err);
    const op_t *r = find(&j, PASS_FWD, "cp_ring_kv", ops);
    CHECK(r, "no cp_ring_kv op");
    check_rel("p2p: a ring step's K and V", 2 * T * kv * wb, r->bytes, 0, "2 T kv bytes");
    check_eq("p2p: ring steps", 3, r->repeat, "CP - 1: the last block needs none");
    check_eq("p2p: each step beside a block of attention", OVL_ASYNC, r->overlap, "Transformer Engine's ring");
    /* The ring's sums over chunks of T / 2 = 4096 tokens: a rank's two
     * chunks of queries meet 2 CP + 1 = 9 blocks of keys (rank 0 holds
     * chunks 0 and 7 of 0..7: 1 + 8 chunks at or before them). Forward, 9 - 2 merges
     * of 16 heads of 128 (bf16) and 16 fp32 log-sum-exps a token, each read
     * twice and written once; backward, 9 sums of dQ (2048 wide) and dK, dV
     * (512 each). */
    r = find(&j, PASS_FWD, "cp_merge", ops);
    CHECK(r, "no cp_merge op");
    check_rel("p2p: a merge's bytes", 3 * 4096.0 * (2048 * wb + 16 * 4), r->bytes, 0, "3 (T / 2) (q wb + nh 4)");
    check_eq("p2p: merges", 7, r->repeat, "2 CP + 1 blocks less each chunk's first");
    r = find(&j, PASS_BWD, "cp_grad_add", ops);
    CHECK(r, "no cp_grad_add op");
    check_rel("p2p: a block's gradient sums' bytes", 3 * 4096.0 * (2048 + 2 * kv) * wb, r->bytes, 0,
              "3 (T / 2) (q + 2 kv) wb");
    check_eq("p2p: gradient sums", 9, r->repeat, "2 CP + 1 blocks");
    CHECK(!job_of(BASE " --context-parallel-size 4 --cp-comm-type all_gather", &j, err), "%s", err);
    r = find(&j, PASS_FWD, "cp_ag_kv", ops);
    CHECK(r, "no cp_ag_kv op");
    check_rel("all_gather: K and V of the whole sequence", 2 * 32768.0 * kv * wb, r->bytes, 0, "2 s kv bytes gathered");
    CHECK(!job_of(BASE " --context-parallel-size 4 --cp-comm-type a2a", &j, err), "%s", err);
    r = find(&j, PASS_FWD, "cp_a2a_qkv", ops);
    CHECK(r, "no cp_a2a_qkv op");
    check_rel("a2a: Q, K and V in", T * (16 * 128 + 2 * kv) * wb, r->bytes, 0, "T (q + 2 kv) bytes, 16 heads a TP rank");
    /* Memory: a layer's activations per rank fall by CP (flash: per token). */
    check_rel("activations of a layer, CP 4 against CP 1", 0.25,
              workload_layer_activation_bytes(&j) / workload_layer_activation_bytes(&one), 1e-12, "s b / CP tokens");
    /* The rules. */
    static const struct {
        const char *args, *needle;
    } bad[] = {
        {" --context-parallel-size 4 --seq-length 32764", "does not split into 2 x context-parallel-size = 8 chunks"},
        {" --context-parallel-size 8 --cp-comm-type a2a", "do not divide by context-parallel-size = 8"},
        {" --context-parallel-size 2 --attention unfused", "needs --attention flash"},
        {" --context-parallel-size 2 --sliding-window 4096", "context parallelism attends the whole sequence"},
        {" --context-parallel-size 3", "num-gpus = 64 is not TP x CP x PP x DP"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char args[1024];
        snprintf(args, sizeof args, BASE "%s", bad[i].args);
        int refused = job_of(args, &j, err) != 0;
        check_true(bad[i].needle, refused && strstr(err, bad[i].needle), refused ? err : "accepted");
    }
    return check_done("test_cp");
}
