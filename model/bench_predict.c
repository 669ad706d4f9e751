/* bench_predict: how fast the closed form evaluates plans. Sweeps valid
 * plans of the 175B model (TP, PP, chunks, micro-batch, ZeRO, recompute,
 * GPU count, presets) until 10,000 are timed, and prints the median,
 * 99th percentile and mean time per plan (finalize + estimate). */
#include "model/estimate.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define TARGET 10000

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void)
{
    static double t_s[TARGET];
    int n = 0, tried = 0;
    job_t base;
    hw_t hw;
    char err[OPT_ERR_LEN];
    job_default(&base);
    if (job_hardware(&base, &hw, err)) {
        fprintf(stderr, "bench_predict: %s\n", err);
        return 1;
    }
    const int tps[] = {1, 2, 4, 8}, pps[] = {1, 2, 4, 8, 16, 32}, lpv[] = {0, 1, 2, 3, 4, 6};
    const int mbs[] = {1, 2, 4}, gpus[] = {1024, 2048, 4096, 6144, 8192, 12288};
    double sink = 0, t0 = now_s();
    for (int pr = 1; pr <= 2 && n < TARGET; pr++)
        for (int g = 0; g < 6 && n < TARGET; g++)
            for (int a = 0; a < 4 && n < TARGET; a++)
                for (int b = 0; b < 6 && n < TARGET; b++)
                    for (int c = 0; c < 6 && n < TARGET; c++)
                        for (int d = 0; d < 3 && n < TARGET; d++)
                            for (int z = 0; z < 3 && n < TARGET; z++)
                                for (int r = 0; r < 3 && n < TARGET; r++) {
                                    job_t j = base;
                                    job_apply_preset(&j, (preset_t)pr);
                                    j.num_gpus = gpus[g], j.tp = tps[a], j.pp = pps[b];
                                    j.layers_per_vstage = lpv[c], j.micro_batch_size = mbs[d];
                                    j.zero_stage = z, j.distributed_optimizer = z > 0, j.recompute = r;
                                    j.tp_comm_overlap &= j.tp > 1;
                                    tried++;
                                    double t = now_s();
                                    if (job_finalize(&j, hw.cluster.gpus_per_node, err))
                                        continue;
                                    estimate_t e;
                                    estimate_job(&j, &hw, &e);
                                    t_s[n++] = now_s() - t;
                                    sink += e.mfu;
                                }
    double wall = now_s() - t0;
    qsort(t_s, n, sizeof t_s[0], cmp_double);
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += t_s[i];
    printf("bench_predict: %d valid plans of %d tried (175B model, presets megatron-lm and megascale)\n", n, tried);
    printf("%12s %12s %12s %12s %14s\n", "median_us", "p99_us", "mean_us", "wall_s", "plans_per_s");
    printf("%12.2f %12.2f %12.2f %12.3f %14.0f\n", t_s[n / 2] * 1e6, t_s[(int)(n * 0.99)] * 1e6,
           sum / n * 1e6, wall, n / wall);
    printf("target: median under 1000 us per plan: %s   (checksum %.6f)\n",
           t_s[n / 2] < 1e-3 ? "met" : "NOT met", sink / n);
    return 0;
}
