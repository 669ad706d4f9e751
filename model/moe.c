/* moe: the mixture-of-experts layer's shape, parameters and rules (see
 * moe.h). */
#include "model/moe.h"

#include "model/split.h"
#include "model/workload.h"

#include <stdio.h>

#define RULE JOB_RULE

/* One MLP's parameters: FC1 (gate and up under SwiGLU) and FC2, with
 * their biases when the model has linear biases. */
double moe_mlp_of(const job_t *j, double f, int biases)
{
    double h = j->hidden_size, fc1 = (j->swiglu ? 2.0 : 1.0) * f;
    return h * fc1 + f * h + (biases && !j->disable_bias_linear ? fc1 + h : 0);
}

static double moe_expert_params(const job_t *j) { return moe_mlp_of(j, j->moe_ffn_hidden_size, 1); }

double moe_expert_params_local(const job_t *j)
{
    return (double)j->num_experts / j->ep * moe_expert_params(j) / j->etp;
}

double moe_mlp_params(const job_t *j, int active, int biases)
{
    double router = (double)j->hidden_size * j->num_experts;
    double shared = j->moe_shared_ffn ? moe_mlp_of(j, j->moe_shared_ffn, biases) : 0;
    return (active ? j->moe_topk : j->num_experts) * moe_mlp_of(j, j->moe_ffn_hidden_size, biases) + router + shared;
}

int moe_chunk_layers(const job_t *j, int stage, int chunk)
{
    return moe_layers_in(j, split_layer_offset(j, stage, chunk), split_chunk_layers(j, stage, chunk));
}

int moe_stage_layers(const job_t *j, int stage)
{
    int n = 0;
    for (int c = 0; c < j->vpp && j->num_experts > 0; c++)
        n += moe_chunk_layers(j, stage, c);
    return n;
}

int moe_layers_in(const job_t *j, int first, int n)
{
    if (j->num_experts <= 0 || n <= 0)
        return 0;
    int f = j->moe_layer_freq; /* multiples of f in [first, first + n) */
    return (first + n - 1) / f - (first + f - 1) / f + 1;
}

double moe_rows_local(const job_t *j)
{
    double tokens = job_tokens_local(j) / j->tp; /* SP's share (MoE under TP needs SP) */
    double rows = tokens * j->moe_topk * j->etp;
    if (j->moe_capacity_factor > 0 && j->moe_pad_to_capacity)
        rows *= j->moe_capacity_factor; /* every expert at its capacity */
    return rows;
}

int moe_finalize(job_t *j, char *err)
{
    j->edp = j->dp_cp;
    if (j->num_experts <= 0)
        return 0;
    if (j->moe_ffn_hidden_size == 0)
        j->moe_ffn_hidden_size = j->ffn_hidden_size;
    if (j->etp == 0)
        j->etp = j->tp;
    RULE(j->num_experts % j->ep == 0,
         "expert-model-parallel-size = %d does not divide num-experts = %d (each EP rank holds whole experts)",
         j->ep, j->num_experts);
    RULE(j->moe_topk <= j->num_experts, "moe-router-topk = %d is above num-experts = %d (allowed: 1 to %d)",
         j->moe_topk, j->num_experts, j->num_experts);
    long long attn = (long long)j->tp * j->cp * j->dp, expert = (long long)j->etp * j->ep;
    RULE(attn % expert == 0,
         "expert-tensor-parallel-size x expert-model-parallel-size = %d x %d = %lld does not divide TP x CP x DP = "
         "%lld: the expert groups fold into the attention's ranks, ETP x EP x EDP x PP = the world size", j->etp,
         j->ep, expert, attn);
    j->edp = (int)(attn / expert);
    RULE(j->tp == 1 || j->sequence_parallel,
         "num-experts with tensor-model-parallel-size = %d needs --sequence-parallel (Megatron-Core's rule for MoE "
         "under TP)", j->tp);
    RULE(j->moe_ffn_hidden_size % j->etp == 0,
         "moe-ffn-hidden-size = %d is not divisible by expert-tensor-parallel-size = %d", j->moe_ffn_hidden_size,
         j->etp);
    RULE(!j->moe_pad_to_capacity || j->moe_capacity_factor > 0,
         "moe-pad-expert-input-to-capacity needs moe-expert-capacity-factor (a capacity to pad to)");
    RULE(!j->parallel_block, "num-experts with --parallel-block: an MoE layer's MLP does not run beside its "
                             "attention (allowed: --no-parallel-block)");
    RULE(j->moe_shared_ffn % j->tp == 0,
         "moe-shared-expert-intermediate-size = %d is not divisible by tensor-model-parallel-size = %d",
         j->moe_shared_ffn, j->tp);
    return 0;
}
