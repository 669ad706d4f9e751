/* job_fit: the defaults that fit (job_fit_defaults, job.h): a value the
 * user did not give never makes a command fail; and the headline options
 * that took their defaults (job_defaults_text). */
#include "model/job.h"
#include "model/split.h"

#include <stdio.h>
#include <string.h>

/* TP t splits this model's heads, query groups, MLP and vocabulary, and the GPUs. */
static int tp_fits(const job_t *j, int t)
{
    int ffn = j->ffn_hidden_size ? j->ffn_hidden_size : 4 * j->hidden_size;
    int groups = j->num_query_groups ? j->num_query_groups : j->num_attention_heads;
    return j->num_attention_heads % t == 0 && (groups % t == 0 || t % groups == 0) && ffn % t == 0 &&
           j->padded_vocab_size % t == 0 && j->num_gpus % t == 0;
}

/* The default's interleaving is usable: several stages of a 1F1B pipeline
 * whose stages it divides, and micro-batches in whole rounds of stages. */
static int lpv_fits(const job_t *j, long long dp)
{
    int per_stage = split_stage_layers_for(j, j->pp, 0);
    long long per_step = (long long)j->micro_batch_size * dp, m = per_step ? j->global_batch_size / per_step : 0;
    return j->pp > 1 && per_stage % j->layers_per_vstage == 0 && j->pipeline_schedule == PIPE_1F1B &&
           m % j->pp == 0 && j->zero_stage < 3 && !j->vstages_per_rank && !j->first_stage_layers &&
           !j->last_stage_layers;
}

/* Appends "NAME FROM -> TO (WHY)" to notes. */
static void note(char *notes, size_t len, const char *name, long long from, long long to, const char *why)
{
    size_t k = strlen(notes);
    snprintf(notes + k, len - k, "%s%s %lld -> %lld (%s)", k ? "; " : "", name, from, to, why);
}

int job_fit_defaults(job_t *j, char *notes, size_t len)
{
    int n = 0;
    notes[0] = 0;
    if (j->num_gpus <= 0 || j->num_layers <= 0 || j->num_attention_heads <= 0 || j->micro_batch_size <= 0)
        return 0; /* job_finalize names what is wrong */
    if (!job_given(j, "tensor-model-parallel-size") && !tp_fits(j, j->tp)) {
        int t = j->tp;
        while (t > 1 && !tp_fits(j, t))
            t--;
        note(notes, len, "tensor-model-parallel-size", j->tp, t, "the largest that splits this model and its GPUs");
        j->tp = t, n++;
    }
    if (!job_given(j, "pipeline-model-parallel-size") &&
        (!split_pp_fits(j, j->pp) || j->num_gpus % ((long long)j->tp * j->cp * j->pp))) {
        int p = j->pp;
        while (p > 1 && (!split_pp_fits(j, p) || j->num_gpus % ((long long)j->tp * j->cp * p)))
            p--;
        note(notes, len, "pipeline-model-parallel-size", j->pp, p, "the largest that splits the layers and GPUs");
        j->pp = p, n++;
    }
    long long mp = (long long)j->tp * j->cp * j->pp, dp = j->num_gpus % mp ? 0 : j->num_gpus / mp;
    long long per_step = dp * j->micro_batch_size;
    if (j->num_experts > 0 && j->parallel_block && !job_given(j, "parallel-block")) {
        note(notes, len, "parallel-block", 1, 0, "an MoE layer's MLP does not run beside its attention");
        j->parallel_block = 0, n++;
    }
    if (j->cp > 1 && j->sliding_window != 0 && !job_given(j, "sliding-window")) {
        note(notes, len, "sliding-window", j->sliding_window, 0, "context parallelism attends the whole sequence");
        j->sliding_window = 0, n++;
    }
    if (j->cp > 1 && j->attention != ATTN_FLASH && !job_given(j, "attention")) {
        note(notes, len, "attention", j->attention, ATTN_FLASH, "context parallelism runs the flash kernels (2: flash)");
        j->attention = ATTN_FLASH, n++;
    }
    if (dp && !job_given(j, "global-batch-size") && j->global_batch_size % per_step) {
        long long b = (j->global_batch_size / per_step + 1) * per_step;
        note(notes, len, "global-batch-size", j->global_batch_size, b, "the next multiple of micro-batch x DP");
        j->global_batch_size = (int)b, n++;
    }
    if (dp && j->layers_per_vstage > 0 && !job_given(j, "num-layers-per-virtual-pipeline-stage") &&
        !lpv_fits(j, dp)) {
        note(notes, len, "num-layers-per-virtual-pipeline-stage", j->layers_per_vstage, 0,
             j->vstages_per_rank ? "the chunks come from num-virtual-stages-per-pipeline-rank"
             : j->first_stage_layers || j->last_stage_layers
                 ? "uneven end stages take their chunks from num-virtual-stages-per-pipeline-rank"
                 : "this plan cannot interleave: one chunk per stage");
        j->layers_per_vstage = 0, n++;
    }
    return n;
}

/* The headline options of a plan, listed by job_defaults_text when no
 * file or flag gave them. */
static const char *const headline[] = {
    "num-layers", "hidden-size", "num-attention-heads", "seq-length", "num-gpus", "tensor-model-parallel-size",
    "pipeline-model-parallel-size", "num-layers-per-virtual-pipeline-stage", "global-batch-size",
    "micro-batch-size", "preset", "gpu", "cluster"};

void job_defaults_text(const job_t *j, char *buf, size_t len)
{
    size_t k = 0;
    buf[0] = 0;
    for (size_t i = 0; i < sizeof headline / sizeof headline[0] && k < len; i++) {
        const opt_def *d = opts_find(&job_opts, headline[i]);
        if (!d || job_given(j, headline[i]))
            continue;
        char v[64];
        opts_format(d, j, v, sizeof v);
        k += snprintf(buf + k, len - k, "%s%s %s", k ? ", " : "", headline[i], v);
    }
}

