/* test_agreement: with no contention and no stragglers, the simulator and
 * the closed form (`predict`) agree on iteration time within 1% over a grid
 * of 72 plans (both presets, TP 4/8, PP 2/4/8, 1 to 24 chunks, 512 and
 * 2,048 GPUs, 4 x PP micro-batches; issue 3's target). The plans exercise
 * every pipeline mechanism the closed form prices: blocking exchanges,
 * decoupled transfers with the interleaved warm-up's and cool-down's wrap
 * stalls, per-chunk and per-bucket DP collectives hidden behind compute or
 * bounding it, and compute slowed beside them. */
#include "model/estimate.h"
#include "sim/engine.h"
#include "../check.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Parses args (space-separated), simulates folded and estimates; the
 * relative difference sim / closed - 1, or NAN (reported) when the plan
 * does not run. */
static double agreement(char *args, double *closed_s, double *sim_s, int *vpp)
{
    char err[OPT_ERR_LEN], *argv[48];
    int argc = 0;
    for (char *s = strtok(args, " "); s && argc < 48; s = strtok(NULL, " "))
        argv[argc++] = s;
    job_t j;
    hw_t hw;
    estimate_t e;
    result_t r;
    static sim_opts_t o = {.fold = 1};
    if (job_parse(&j, argc, argv, NULL, NULL, err) || job_hardware(&j, &hw, err) || job_finalize(&j, 8, err) ||
        sim_run(&j, &hw, &o, &r, err, sizeof err)) {
        check_true("plan runs", 0, err);
        return NAN;
    }
    estimate_job(&j, &hw, &e);
    *closed_s = e.iteration_s, *sim_s = r.iteration_ns * 1e-9, *vpp = j.vpp;
    result_free(&r);
    return *sim_s / *closed_s - 1;
}

/* ZeRO-3 (FSDP: PP 1, every pass gathers, every backward reduces; the
 * closed form replays the first micro-batches piece by piece): 48 plans,
 * three presets, TP 1 and 8 (with SP), each DP overlap on and off, 4 and
 * 16 micro-batches. Agreement within 1%. */
static void zero3(void)
{
    const char *presets[] = {"none", "megatron-lm", "megascale"};
    const char *ovl[] = {"", "--overlap-param-gather", "--overlap-grad-reduce",
                         "--overlap-param-gather --overlap-grad-reduce"};
    int tps[] = {1, 8}, gbs[] = {2048, 8192}, n = 0, within1 = 0;
    double worst = 0;
    for (int a = 0; a < 3; a++)
        for (int t = 0; t < 2; t++)
            for (int v = 0; v < 4; v++)
                for (int g = 0; g < 2; g++) {
                    char args[512];
                    double c, sm;
                    int vpp;
                    snprintf(args, sizeof args,
                             "--preset %s --num-layers 24 --hidden-size 4096 --num-attention-heads 32 "
                             "--tensor-model-parallel-size %d %s --pipeline-model-parallel-size 1 "
                             "--num-layers-per-virtual-pipeline-stage 0 --num-gpus 512 --global-batch-size %d "
                             "--micro-batch-size 1 --zero-stage 3 --no-overlap-grad-reduce --no-overlap-param-gather %s",
                             presets[a], tps[t], tps[t] > 1 ? "--sequence-parallel" : "", gbs[g], ovl[v]);
                    double d = agreement(args, &c, &sm, &vpp);
                    if (isnan(d))
                        continue;
                    printf("zero3 %-12s tp %d %-45s batch %5d %12.6f %12.6f %+7.2f%%\n", presets[a], tps[t],
                           ovl[v][0] ? ovl[v] : "(no DP overlap)", gbs[g], c, sm, 100 * d);
                    n++, within1 += fabs(d) <= 0.01;
                    worst = fmax(worst, fabs(d));
                }
    char what[128], got[96];
    snprintf(what, sizeof what, "ZeRO-3: %d plans simulated, %d within 1%%", n, within1);
    check_true(what, n == 48, "3 presets x 2 TP x 4 overlap pairs x 2 batches");
    snprintf(got, sizeof got, "worst %.2f%%", 100 * worst);
    check_true("every ZeRO-3 plan agrees within 1%", worst <= 0.01, got);
}

/* Uneven pipeline stages (model/split.h): the end stages' own layer
 * counts, with and without chunks, and the embedding and the loss counted
 * as layers (Llama 3's split, down to chunks of no transformer layer);
 * context parallelism, each comm type; and mixtures of experts.
 * The closed form paces the steady state by the slowest of the first, a
 * middle and the last stage and fills the pipeline through each at its
 * own pace; the simulator plays every chunk. Agreement within 1%. */
static void uneven(void)
{
    const char *splits[] = {
        "--num-layers 48 --pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 8 "
        "--decoder-last-pipeline-num-layers 16",
        "--num-layers 48 --pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 6",
        "--num-layers 48 --pipeline-model-parallel-size 4 --decoder-last-pipeline-num-layers 6 "
        "--num-virtual-stages-per-pipeline-rank 2",
        "--num-layers 46 --pipeline-model-parallel-size 4 --account-for-embedding-in-pipeline-split "
        "--account-for-loss-in-pipeline-split",
        "--num-layers 46 --pipeline-model-parallel-size 8 --account-for-embedding-in-pipeline-split "
        "--account-for-loss-in-pipeline-split --num-layers-per-virtual-pipeline-stage 2",
        "--num-layers 46 --pipeline-model-parallel-size 8 --account-for-embedding-in-pipeline-split "
        "--account-for-loss-in-pipeline-split --num-layers-per-virtual-pipeline-stage 1",
        "--num-layers 47 --pipeline-model-parallel-size 8 --account-for-embedding-in-pipeline-split "
        "--num-layers-per-virtual-pipeline-stage 3",
        /* context parallelism: its collectives inside the layer, the DP
         * collectives over DP x CP */
        "--num-layers 48 --pipeline-model-parallel-size 4 --context-parallel-size 4 --cp-comm-type p2p "
        "--sliding-window 0 --attention flash",
        "--num-layers 48 --pipeline-model-parallel-size 4 --context-parallel-size 4 --cp-comm-type all_gather "
        "--sliding-window 0 --attention flash --num-layers-per-virtual-pipeline-stage 2",
        "--num-layers 48 --pipeline-model-parallel-size 2 --context-parallel-size 2 --cp-comm-type a2a "
        "--sliding-window 0 --attention flash",
        /* mixture of experts: the MoE layers' ops in the chunks, the experts'
         * gradients over EDP beside the rest over DP */
        "--num-layers 48 --pipeline-model-parallel-size 4 --num-experts 16 --expert-model-parallel-size 8 "
        "--sequence-parallel --no-parallel-block --moe-token-dispatcher-type alltoall --moe-grouped-gemm",
        "--num-layers 48 --pipeline-model-parallel-size 4 --num-experts 16 --expert-model-parallel-size 4 "
        "--expert-tensor-parallel-size 2 --moe-layer-freq 2 --moe-shared-expert-intermediate-size 8192 "
        "--sequence-parallel --no-parallel-block --num-layers-per-virtual-pipeline-stage 2"};
    const char *presets[] = {"megatron-lm", "megascale"};
    int n = 0;
    double worst = 0;
    for (size_t k = 0; k < sizeof splits / sizeof splits[0]; k++)
        for (int a = 0; a < 2; a++) {
            char args[640];
            snprintf(args, sizeof args,
                     "--preset %s --hidden-size 6144 --num-attention-heads 48 --tensor-model-parallel-size 8 "
                     "--num-gpus 2048 --global-batch-size 256 --seq-length 8192 %s %s", presets[a], splits[k],
                     strstr(splits[k], "per-virtual") ? "" : "--num-layers-per-virtual-pipeline-stage 0");
            char shown[640];
            snprintf(shown, sizeof shown, "%s", args);
            double c, sm;
            int vpp;
            double d = agreement(args, &c, &sm, &vpp);
            if (isnan(d))
                continue;
            printf("uneven %-11s %3d chunk(s) %10.6f %10.6f %+7.2f%%  %s\n", presets[a], vpp, c, sm, 100 * d,
                   strstr(shown, "--num-layers "));
            n++;
            worst = fmax(worst, fabs(d));
        }
    check_eq("uneven, CP and MoE plans simulated", 24, n, "12 plans x 2 presets");
    char got[96];
    snprintf(got, sizeof got, "worst %.2f%%", 100 * worst);
    check_true("every uneven, CP or MoE plan agrees within 1%", worst <= 0.01, got);
}

/* Ranks time-sharing a host's cores (cluster host_share, which compare
 * sets for a CPU run with more ranks than cores): every rank's compute
 * runs that many times slower in both executors (the closed form's
 * compute and optimizer step 4x, nothing else), and the two still agree
 * within 1%. The plan: PP 2 x TP 2 x DP 2, no technique on (nothing
 * overlaps the compute, whose slowdown beside a collective would not
 * scale). */
static void host_share(void)
{
    const char *args[] = {"--preset", "none", "--num-layers", "8", "--hidden-size", "1024", "--num-attention-heads",
                          "16", "--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
                          "--num-gpus", "8", "--global-batch-size", "16", "--seq-length", "1024"};
    char err[OPT_ERR_LEN];
    job_t j;
    hw_t hw;
    estimate_t e[2];
    result_t r;
    double sim_s[2];
    static sim_opts_t o = {.fold = 1};
    if (job_parse(&j, (int)(sizeof args / sizeof args[0]), (char **)args, NULL, NULL, err) ||
        job_hardware(&j, &hw, err) || job_finalize(&j, 8, err)) {
        check_true("host_share plan runs", 0, err);
        return;
    }
    for (int k = 0; k < 2; k++) {
        hw.cluster.host_share = k ? 4 : 1;
        estimate_job(&j, &hw, &e[k]);
        if (sim_run(&j, &hw, &o, &r, err, sizeof err)) {
            check_true("host_share simulates", 0, err);
            return;
        }
        sim_s[k] = r.iteration_ns * 1e-9;
        result_free(&r);
    }
    check_rel("host_share 4: the closed form's compute", 4 * e[0].br.compute_s, e[1].br.compute_s, 1e-12,
              "every rank's compute 4x (processor sharing)");
    check_rel("... its exposed TP communication", e[0].br.exposed_tp_comm_s, e[1].br.exposed_tp_comm_s, 1e-12,
              "collectives as before");
    check_rel("the simulator agrees with it", e[1].iteration_s, sim_s[1], 0.01, "issue 3's 1%");
    char got[128];
    snprintf(got, sizeof got, "%.4f s against %.4f s unshared, the critical path's compute %.4f s", sim_s[1],
             sim_s[0], e[0].br.compute_s);
    check_true("the simulated iteration grows by 3x its critical path's compute or more",
               sim_s[1] - sim_s[0] >= 0.99 * 3 * e[0].br.compute_s, got);
}

/* Megatron-Core's tp-pp-dp rank order (--use-tp-pp-dp-mapping, Llama 3's
 * [TP, CP, PP, DP] at CP 1) on Llama 3's cluster, where it moves the
 * pipeline transfers under one ToR and the DP collectives across pods:
 * the simulator places its entities by the same order (layout.h) and
 * agrees with the closed form within 1%, blocking and overlapped, at 4 x
 * PP micro-batches as the grid above. */
static void tp_pp_dp(void)
{
    const char *extra[] = {"", " --overlap-grad-reduce --overlap-param-gather --pp-comm-overlap"};
    for (int k = 0; k < 2; k++) {
        char args[768], what[160];
        snprintf(args, sizeof args,
                 "--preset megatron-lm --num-layers 16 --hidden-size 16384 --num-attention-heads 128 "
                 "--num-query-groups 8 --ffn-hidden-size 53248 --swiglu --seq-length 8192 "
                 "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 8 "
                 "--num-layers-per-virtual-pipeline-stage 1 --num-gpus 8192 --global-batch-size 4096 "
                 "--gpu h100-sxm-80gb --cluster llama3-roce --use-tp-pp-dp-mapping%s", extra[k]);
        double c, sm;
        int vpp;
        double d = agreement(args, &c, &sm, &vpp);
        snprintf(what, sizeof what, "tp-pp-dp order%s: closed %.4f s, simulated %.4f s", k ? ", overlapped" : "",
                 c, sm);
        check_true(what, fabs(d) <= 0.01, "issue 3's 1%");
    }
}

int main(void)
{
    const char *presets[] = {"megatron-lm", "megascale"};
    int tps[] = {4, 8}, pps[] = {2, 4, 8}, lpvs[] = {0, 1, 2}, gpus[] = {512, 2048};
    int n = 0, within1 = 0;
    double worst = 0;
    printf("%-12s %3s %3s %4s %5s %6s %12s %12s %8s\n", "preset", "tp", "pp", "lpv", "gpus", "batch", "closed_s",
           "sim_s", "diff");
    for (int a = 0; a < 2; a++)
        for (int t = 0; t < 2; t++)
            for (int p = 0; p < 3; p++)
                for (int l = 0; l < 3; l++)
                    for (int g = 0; g < 2; g++) {
                        int dp = gpus[g] / (tps[t] * pps[p]), batch = 4 * pps[p] * dp;
                        char args[512];
                        snprintf(args, sizeof args,
                                 "--preset %s --num-layers 48 --hidden-size 6144 --num-attention-heads 48 "
                                 "--tensor-model-parallel-size %d --pipeline-model-parallel-size %d "
                                 "--num-layers-per-virtual-pipeline-stage %d --num-gpus %d --global-batch-size %d",
                                 presets[a], tps[t], pps[p], lpvs[l], gpus[g], batch);
                        double c, sm;
                        int vpp;
                        double d = agreement(args, &c, &sm, &vpp);
                        if (isnan(d))
                            continue;
                        printf("%-12s %3d %3d %4d %5d %6d %12.6f %12.6f %+7.2f%%\n", presets[a], tps[t], pps[p], vpp,
                               gpus[g], batch, c, sm, 100 * d);
                        n++, within1 += fabs(d) <= 0.01;
                        worst = fmax(worst, fabs(d));
                    }
    char what[128];
    snprintf(what, sizeof what, "%d plans simulated, %d within 1%%", n, within1);
    check_true(what, n >= 50, "the issue asks for a grid of at least 50");
    char got[96];
    snprintf(got, sizeof got, "worst %.2f%% (issue 3: within 1%%)", 100 * worst);
    check_true("every plan agrees within 1%", worst <= 0.01, got);
    zero3();
    uneven();
    host_share();
    tp_pp_dp();
    return check_done("test_agreement");
}
