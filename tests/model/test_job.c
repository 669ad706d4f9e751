/* test_job: how a job is put together: preset, then files, then flags;
 * --no-FLAG; ignored Megatron flags; and hardware profile files (complete,
 * with a "base", or refused with a message naming the missing field). */
#include "model/job.h"
#include "../check.h"

#include <stdio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *tmp_file(const char *name, const char *text)
{
    static char path[4][256];
    static int k;
    char *p = path[k++ % 4];
    snprintf(p, 256, "%s/%s", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", name);
    FILE *f = fopen(p, "w");
    fputs(text, f);
    fclose(f);
    return p;
}

static int parse(job_t *j, char *err, int n, ...)
{
    char *argv[16];
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++)
        argv[i] = va_arg(ap, char *);
    va_end(ap);
    return job_parse(j, n, argv, NULL, NULL, err);
}

int main(void)
{
    job_t j;
    char err[OPT_ERR_LEN] = "";
    parse(&j, err, 0);
    check_true("default preset is megascale", j.preset == PRESET_MEGASCALE && j.parallel_block && j.tp_comm_overlap,
               "issue: built-in default");
    const char *f = tmp_file("megasim_test_job.json",
                             "{\"preset\": \"megatron-lm\", \"num_gpus\": 1024, \"global_batch_size\": 768,"
                             " \"paper\": {\"mfu\": 0.447}}");
    check_true("file parses", parse(&j, err, 1, f) == 0, err);
    check_true("file's preset applied before its fields", j.preset == PRESET_MEGATRON && !j.parallel_block &&
               j.num_gpus == 1024, "megatron-lm bundle, num_gpus 1024");
    check_true("flag beats file", parse(&j, err, 3, f, "--num-gpus", "512") == 0 && j.num_gpus == 512, err);
    check_true("flag preset beats file preset, file fields still apply",
               parse(&j, err, 3, f, "--preset", "megascale") == 0 && j.parallel_block && j.num_gpus == 1024, err);
    check_true("--no-FLAG turns a preset switch off", parse(&j, err, 1, "--no-parallel-block") == 0 && !j.parallel_block,
               err);
    check_true("--flag=value form", parse(&j, err, 1, "--hidden-size=4096") == 0 && j.hidden_size == 4096, err);
    check_true("Megatron's --lr is accepted and ignored", parse(&j, err, 3, "--lr", "1e-4", "--use-flash-attn") == 0 &&
               j.attention == ATTN_FLASH, err);
    check_true("unknown key in a file is refused", parse(&j, err, 1, tmp_file("megasim_bad_key.json", "{\"num_layer\": 2}")) &&
               strstr(err, "num_layer"), err);

    hw_t hw;
    const char *full = tmp_file("megasim_hw_missing.json", "{\"gpu\": {\"name\": \"x\", \"peak_bf16_tflops\": 100}}");
    check_true("profile missing a field is refused, naming it", hw_resolve("a100-sxm-80gb", "megascale", full, &hw, err) &&
               strstr(err, "peak_tf32_tflops"), err);
    const char *based = tmp_file("megasim_hw_base.json",
                                 "{\"gpu\": {\"base\": \"h100-sxm-80gb\", \"hbm_gib\": 94,"
                                 " \"gemm_eff\": [[1e9, 0.5], [1e12, 0.9]]}}");
    check_true("profile with a base and a curve", hw_resolve("a100-sxm-80gb", "megascale", based, &hw, err) == 0 &&
               hw.gpu.hbm_gib == 94 && hw.gpu.sm_count == 132 && hw.gpu.gemm_eff.n == 2, err);
    const char *neg = tmp_file("megasim_hw_neg.json", "{\"gpu\": {\"base\": \"h100-sxm-80gb\", \"hbm_gbps\": -1}}");
    check_true("negative field refused", hw_resolve("a100-sxm-80gb", "megascale", neg, &hw, err) && strstr(err, "hbm_gbps"),
               err);
    const char *bad = tmp_file("megasim_hw_curve.json", "{\"gpu\": {\"base\": \"h100-sxm-80gb\", \"mem_eff\": [[2, 0.5], [1, 0.6]]}}");
    check_true("curve with decreasing x refused", hw_resolve("a100-sxm-80gb", "megascale", bad, &hw, err) != 0, err);
    return check_done("test_job");
}
