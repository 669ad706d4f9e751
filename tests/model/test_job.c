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

/* job_fit_defaults: a default never makes a command fail; a given value
 * is never changed (issue 39). Expected values worked out by hand. */
static void fit_defaults(void)
{
    job_t j;
    char err[OPT_ERR_LEN] = "", notes[1024];
    parse(&j, err, 0);
    check_eq("the default job needs no fitting", 0, job_fit_defaults(&j, notes, sizeof notes), notes);
    /* 4 layers, 1 stage given: the default 2 layers per virtual stage
     * cannot interleave one stage, so it drops to 0. */
    parse(&j, err, 8, "--num-layers", "4", "--hidden-size", "1024", "--num-attention-heads", "16",
          "--pipeline-model-parallel-size", "1");
    job_fit_defaults(&j, notes, sizeof notes);
    check_eq("PP 1 given: default interleaving dropped", 0, j.layers_per_vstage, notes);
    check_true("... and the job then finalizes", job_finalize(&j, 8, err) == 0, err);
    /* 4 layers on 8 GPUs: the default PP 8 splits neither; TP 8 uses the 8
     * GPUs, so PP falls to 1 (4 % p and 8 % 8p), interleaving to 0. */
    parse(&j, err, 8, "--num-layers", "4", "--hidden-size", "1024", "--num-attention-heads", "16", "--num-gpus", "8");
    check_eq("4 layers on 8 GPUs: adjustments", 2, job_fit_defaults(&j, notes, sizeof notes), notes);
    check_eq("... default PP falls to", 1, j.pp, "the largest p with 4 % p == 0 and 8 % (8 p) == 0");
    /* 12 heads: the default TP 8 does not split them; 6 is the largest
     * below 8 that splits 12 heads, 6 x 4 ffn, 64000 vocabulary and 12,288 GPUs. */
    parse(&j, err, 4, "--num-attention-heads", "12", "--hidden-size", "1536");
    job_fit_defaults(&j, notes, sizeof notes);
    check_eq("12 heads: default TP falls to", 4, j.tp, "8 no (12 % 8), 7 no, 6 no (64000 % 6), 5 no, 4 yes");
    /* A global batch that does not divide: 6144 over DP 5 (40 GPUs at TP 8,
     * PP 1) rises to the next multiple, 6145. */
    parse(&j, err, 6, "--num-gpus", "40", "--pipeline-model-parallel-size", "1", "--micro-batch-size", "1");
    job_fit_defaults(&j, notes, sizeof notes);
    check_eq("default batch over DP 5 rises to", 6145, j.global_batch_size, "ceil(6144 / 5) x 5");
    /* Given values stay, and their rule names them. */
    parse(&j, err, 10, "--num-layers", "4", "--hidden-size", "1024", "--num-attention-heads", "16", "--num-gpus",
          "8", "--pipeline-model-parallel-size", "8");
    job_fit_defaults(&j, notes, sizeof notes);
    check_eq("given PP 8 is kept", 8, j.pp, notes[0] ? notes : "(no adjustment)");
    check_true("... and refused, naming it", job_finalize(&j, 8, err) != 0 && strstr(err, "pipeline-model-parallel-size = 8"),
               err);
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
    /* calibrate checks what it writes with the loader's own rules (F06). */
    check_true("a built-in profile is loadable", hw_resolve("h100-sxm-80gb", "fattree", NULL, &hw, err) == 0 &&
               hw_check_loadable(&hw, "h100", err) == 0, err);
    hw.gpu.peak_bf16_tflops = 7.4e-6; /* below the sanitized CPU's 1e-5 floor */
    check_true("a profile its loader would refuse is found before writing",
               hw_check_loadable(&hw, "measured", err) != 0 && strstr(err, "peak_bf16_tflops"), err);
    fit_defaults();
    return check_done("test_job");
}
