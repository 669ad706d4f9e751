/* test_agreement: with no contention and no stragglers, the simulator and
 * the closed form (`predict`) agree on iteration time over a grid of 72
 * plans (both presets, TP 4/8, PP 2/4/8, 1 to 12 chunks, 512 and 2,048
 * GPUs, 4 x PP micro-batches). Within 1% wherever the closed form models
 * the mechanism. For MegaScale's decoupled interleaved pipelines with
 * per-chunk DP collectives it is approximate both ways: it misses the stall
 * at each wrap from the last stage back to the first (zero slack in the
 * interleaved order: up to p transfer latencies per chunk transition; the
 * simulator is slower) and it prices the DP pieces' exposure with windows
 * that the played schedule often beats (the simulator is faster). There
 * the bound is 2.5%, printed as a known gap. */
#include "sim/engine.h"
#include "../check.h"

#include <stdio.h>
#include <string.h>

int main(void)
{
    const char *presets[] = {"megatron-lm", "megascale"};
    int tps[] = {4, 8}, pps[] = {2, 4, 8}, lpvs[] = {0, 1, 2}, gpus[] = {512, 2048};
    int n = 0, within1 = 0;
    double worst[2] = {0, 0};
    printf("%-12s %3s %3s %4s %5s %6s %12s %12s %8s\n", "preset", "tp", "pp", "lpv", "gpus", "batch", "closed_s",
           "sim_s", "diff");
    for (int a = 0; a < 2; a++)
        for (int t = 0; t < 2; t++)
            for (int p = 0; p < 3; p++)
                for (int l = 0; l < 3; l++)
                    for (int g = 0; g < 2; g++) {
                        int dp = gpus[g] / (tps[t] * pps[p]), batch = 4 * pps[p] * dp;
                        char args[512], err[OPT_ERR_LEN], *argv[40];
                        snprintf(args, sizeof args,
                                 "--preset %s --num-layers 48 --hidden-size 6144 --num-attention-heads 48 "
                                 "--tensor-model-parallel-size %d --pipeline-model-parallel-size %d "
                                 "--num-layers-per-virtual-pipeline-stage %d --num-gpus %d --global-batch-size %d",
                                 presets[a], tps[t], pps[p], lpvs[l], gpus[g], batch);
                        int argc = 0;
                        for (char *s = strtok(args, " "); s; s = strtok(NULL, " "))
                            argv[argc++] = s;
                        job_t j;
                        hw_t hw;
                        estimate_t e;
                        sim_result_t r;
                        static sim_opts_t o = {.fold = 1};
                        if (job_parse(&j, argc, argv, NULL, NULL, err) || job_hardware(&j, &hw, err) ||
                            job_finalize(&j, 8, err) || sim_run(&j, &hw, &o, &r, err, sizeof err)) {
                            check_true("plan runs", 0, err);
                            continue;
                        }
                        estimate_job(&j, &hw, &e);
                        double d = r.iteration_ns * 1e-9 / e.iteration_s - 1;
                        int known_gap = j.pp_comm_overlap && j.vpp > 1;
                        printf("%-12s %3d %3d %4d %5d %6d %12.6f %12.6f %+7.2f%%%s\n", presets[a], tps[t], pps[p],
                               j.vpp, gpus[g], batch, e.iteration_s, r.iteration_ns * 1e-9, 100 * d,
                               known_gap ? "  (wrap stall)" : "");
                        n++, within1 += fabs(d) <= 0.01;
                        if (fabs(d) > worst[known_gap])
                            worst[known_gap] = fabs(d);
                        sim_result_free(&r);
                    }
    char what[128];
    snprintf(what, sizeof what, "%d plans simulated, %d within 1%%", n, within1);
    check_true(what, n >= 50, "the issue asks for a grid of at least 50");
    char got[96];
    snprintf(got, sizeof got, "worst %.2f%%", 100 * worst[0]);
    check_true("agree within 1% where the closed form models the mechanism", worst[0] <= 0.01, got);
    snprintf(got, sizeof got, "worst %.2f%% (known gap, see the header)", 100 * worst[1]);
    check_true("decoupled interleaved pipelines within 2.5%", worst[1] <= 0.025, got);
    return check_done("test_agreement");
}
