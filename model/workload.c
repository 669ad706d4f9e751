/* workload: parameters, FLOPs and memory of a job (see workload.h). */
#include "model/workload.h"

#include "model/moe.h"
#include "model/split.h"

#include <math.h>

#define GIB 1073741824.0

int workload_dp_pieces(const job_t *j, double P)
{
    double bucket = j->ddp_bucket_size > 0 ? j->ddp_bucket_size : fmax(40e6, 1e6 * j->dp_cp);
    return j->vpp > 1 ? j->vpp : (int)fmax(1, ceil(P / bucket));
}

double workload_causal_keys(double s, double w)
{
    if (w >= s)
        w = s;
    /* Query i (1-based) sees min(i, w) keys: w(w+1)/2 over the first w
     * queries, then w each for the remaining s - w. */
    return w * (w + 1) / 2 + (s - w) * w;
}

/* Key/value width held by one TP rank: heads split by TP, or one whole
 * group replicated when there are fewer groups than ranks. */
static double kv_local_dim(const job_t *j)
{
    int g = j->num_query_groups;
    return (g >= j->tp ? (double)g / j->tp : 1.0) * j->head_dim;
}

/* One normalisation's parameters: weight and bias, or RMSNorm's weight. */
static double norm_params(const job_t *j) { return (j->normalization == NORM_RMSNORM ? 1.0 : 2.0) * j->hidden_size; }

/* Learned absolute position embeddings: s x h on the first stage. */
static double pos_params(const job_t *j)
{
    return j->position_embedding == POS_LEARNED ? (double)j->seq_length * j->hidden_size : 0;
}

double workload_fc1_width(const job_t *j) { return (j->swiglu ? 2.0 : 1.0) * j->ffn_hidden_size; }

static double gemm_weights_per_layer(const job_t *j)
{
    double h = j->hidden_size, f = j->ffn_hidden_size;
    double kvd = (double)j->num_query_groups * j->head_dim;
    return h * (h + 2 * kvd) + h * h + h * workload_fc1_width(j) + f * h;
}

/* The QKV layer's bias: with linear biases, or alone under --add-qkv-bias. */
static double qkv_bias(const job_t *j)
{
    return !j->disable_bias_linear || j->add_qkv_bias ? j->hidden_size + 2.0 * j->num_query_groups * j->head_dim : 0;
}

static double params_per_layer(const job_t *j)
{
    double h = j->hidden_size;
    double biases = qkv_bias(j) + (j->disable_bias_linear ? 0 : h + workload_fc1_width(j) + h);
    double norms = (j->parallel_block ? 1 : 2) * norm_params(j);
    return gemm_weights_per_layer(j) + biases + norms;
}

/* An MoE layer's parameters: a dense layer's with its MLP replaced by the
 * experts (all, or a token's: model/moe.h). */
static double moe_layer_params(const job_t *j, int active)
{
    return params_per_layer(j) - moe_mlp_of(j, j->ffn_hidden_size, 1) + moe_mlp_params(j, active, 1);
}

void workload_compute(const job_t *j, workload_t *w)
{
    double l = j->num_layers, h = j->hidden_size, s = j->seq_length, V = j->padded_vocab_size;
    double lm = moe_layers_in(j, 0, j->num_layers), ld = l - lm; /* MoE and dense layers */
    w->params_layer = params_per_layer(j);
    /* Word and position embeddings; the output layer is tied to the word
     * embedding (Megatron's default) unless untied, which adds V h; the
     * final norm adds its weight (and bias). */
    double ends = (j->untie_embeddings ? 2 : 1) * V * h + pos_params(j) + norm_params(j);
    w->params_total = ld * w->params_layer + lm * moe_layer_params(j, 0) + ends;
    w->params_active = ld * w->params_layer + lm * moe_layer_params(j, 1) + ends;
    w->attn_window_factor = workload_causal_keys(s, j->window) / workload_causal_keys(s, s);
    /* Megatron's convention: attention scored over all s keys (4 s h per
     * token per layer forward); a window scales it by the fraction of
     * causal keys it keeps. */
    double attn = 4 * s * h * w->attn_window_factor;
    double gemm = 2 * gemm_weights_per_layer(j);
    /* an MoE layer's: the experts a token uses, the router, the shared expert
     * (the MoE papers' active-parameter count) */
    double gemm_moe = gemm - 2 * moe_mlp_of(j, j->ffn_hidden_size, 0) + 2 * moe_mlp_params(j, 1, 0);
    double fwd = ld * (gemm + attn) + lm * (gemm_moe + attn) + 2 * V * h;
    w->model_flops_per_token = 3 * fwd;
    /* Selective recomputation reruns the unfused attention core only (a
     * flash kernel keeps no scores to drop: Megatron-LM checkpoints the
     * unfused core alone, model/layer.c). */
    int selective = j->recompute == RECOMPUTE_SELECTIVE && !attn_is_flash(j->attention);
    double recompute = j->recompute == RECOMPUTE_FULL ? j->recompute_fraction * ld * (gemm + attn) +
                                                            j->recompute_fraction * lm * (gemm_moe + attn)
                       : selective                    ? l * attn
                                                      : 0;
    double tokens = (double)j->global_batch_size * s;
    w->model_flops_per_iter = tokens * w->model_flops_per_token;
    w->hw_flops_per_iter = tokens * (w->model_flops_per_token + recompute);
}

double workload_stage_params_local(const job_t *j, int stage)
{
    double h = j->hidden_size, t = j->tp;
    /* Column- and row-parallel weights and column biases split by TP;
     * row-parallel biases and LayerNorms replicated. */
    double split = gemm_weights_per_layer(j) + qkv_bias(j) + (j->disable_bias_linear ? 0 : workload_fc1_width(j));
    double repl = params_per_layer(j) - split;
    int lm = moe_stage_layers(j, stage);
    double p = (split_stage_layers(j, stage) - lm) * (split / t + repl);
    if (lm) { /* an MoE layer: the dense MLP out; the router replicated, the shared expert split as a dense MLP,
                 the rank's experts (workload_stage_expert_params_local) */
        int b = !j->disable_bias_linear;
        double fs = j->moe_shared_ffn, fc1s = (j->swiglu ? 2.0 : 1.0) * fs; /* the shared expert's FC1 width */
        double split_m = split - moe_mlp_of(j, j->ffn_hidden_size, 0) - b * workload_fc1_width(j) +
                         (fs ? moe_mlp_of(j, fs, 0) + b * fc1s : 0);
        double repl_m = repl - b * h + (double)h * j->num_experts + (fs ? b * h : 0) + (fs && j->moe_shared_gate ? h : 0);
        p += lm * (split_m / t + repl_m + moe_expert_params_local(j));
    }
    double V = j->padded_vocab_size;
    if (stage == 0)
        p += V * h / t + pos_params(j);
    /* The output layer: the tied embedding's copy on the last stage (none
     * needed when one stage holds both), or its own weights when untied. */
    if (stage == j->pp - 1)
        p += (j->pp > 1 || j->untie_embeddings ? V * h / t : 0) + norm_params(j);
    return p;
}

double workload_stage_expert_params_local(const job_t *j, int stage)
{
    return moe_stage_layers(j, stage) * (j->num_experts > 0 ? moe_expert_params_local(j) : 0);
}

/* One layer's activations for one micro-batch on one GPU, a dense layer's
 * or (moe 1) an MoE layer's (see workload_layer_activation_bytes). */
static double layer_activation_bytes(const job_t *j, int moe)
{
    double T = job_tokens_local(j);
    double h = j->hidden_size, f = j->ffn_hidden_size, t = j->tp;
    double a = j->num_attention_heads, s = j->seq_length, kvl = kv_local_dim(j);
    double sp = j->sequence_parallel ? t : 1;
    double e = job_weight_bytes(j); /* bytes per stored activation element */
    if (j->recompute == RECOMPUTE_FULL)
        return T * e * h / sp; /* only the layer input is kept */
    /* Bytes per token (Korthikanti et al. 2022, section 4, in bf16: e = 2):
     * tensors outside the TP regions are replicated unless sequence
     * parallel splits them. */
    double mask = j->hidden_dropout > 0 ? 1 : 0; /* 1-byte dropout masks, per residual branch */
    double repl = j->parallel_block ? e * h + e * h + mask * h            /* LN in, shared LN out, mask */
                                    : 2 * e * h + e * h + e * h + 2 * mask * h; /* LN ins, QKV in, FC1 in, masks */
    double split = e * h / t + 2 * e * kvl + e * h / t /* Q, K and V, proj input */
                   + e * (workload_fc1_width(j) + f) / t; /* GeLU (SwiGLU) input, FC2 input */
    double core;
    if (attn_is_flash(j->attention))
        core = 4 * a / t; /* flash kernels: log-sum-exp per head, fp32 */
    else if (j->recompute == RECOMPUTE_SELECTIVE)
        core = 0;         /* the s x s scores are recomputed */
    else /* softmax out, dropout mask (1 byte) and out */
        core = (j->attention_dropout > 0 ? 2 * e + 1 : e) * a * s / t;
    if (moe) { /* the MLP's saved tensors: the expert rank's rows (permuted input, activation input, FC2
                  input), the router's fp32 probabilities of this rank's tokens, the shared expert's two */
        double R = moe_rows_local(j), fm = j->moe_ffn_hidden_size / (double)j->etp, fs = j->moe_shared_ffn;
        split += e * (fs ? (fs * (j->swiglu ? 2 : 1) + fs) / t : 0) - e * (workload_fc1_width(j) + f) / t;
        return T * (repl / sp + split + core) + R * e * (h + fm * (j->swiglu ? 2 : 1) + fm) +
               T / sp * 4 * j->num_experts;
    }
    return T * (repl / sp + split + core);
}

double workload_layer_activation_bytes(const job_t *j) { return layer_activation_bytes(j, 0); }

/* The mean layer's activations on a stage (its dense and MoE layers). */
static double stage_activation_bytes(const job_t *j, int stage)
{
    int l = split_stage_layers(j, stage), lm = moe_stage_layers(j, stage);
    if (!lm || !l)
        return layer_activation_bytes(j, 0);
    return ((l - lm) * layer_activation_bytes(j, 0) + lm * layer_activation_bytes(j, 1)) / l;
}

/* Bytes one layer holds beside its saved activations while it runs, for
 * one micro-batch on one GPU: the larger of its forward's intermediates
 * and its backward's gradients of them (TP's gathered copies excluded:
 * they are communication buffers). */
static double workload_layer_working_bytes(const job_t *j)
{
    double N = job_tokens_local(j), t = j->tp, C = j->hidden_size;
    double e = job_weight_bytes(j);
    double Nl = j->sequence_parallel ? N / t : N; /* rows of a replicated (LayerNorm-side) tensor */
    double q = C / t, qkv = q + 2 * kv_local_dim(j), Ft = j->ffn_hidden_size / t, Fw = workload_fc1_width(j) / t;
    double dz = j->hidden_dropout > 0 ? Nl * C : 0; /* a residual branch's gradient through its mask */
    double Fin = j->swiglu ? Fw : Ft;                  /* FC1 output's gradient width, after SwiGLU's */
    /* Selective recomputation's rebuild writes an output beside dq, dk, dv. */
    double rebuild = j->recompute == RECOMPUTE_SELECTIVE && !attn_is_flash(j->attention) ? N * q : 0;
    double fwd, bwd;
    /* The order of real/gpt_layer.c, which is autograd's: each phase's live
     * gradients, largest first found by taking the max. */
    if (j->parallel_block) {
        double nc = q + Ft, ny = qkv + Fw;
        fwd = N * ny + N * nc;                          /* fused input GEMM's output; the output GEMM's input */
        bwd = fmax(fmax(N * nc + dz,                    /* d[proj | FC2] input */
                        N * nc + N * q + N * Ft),       /* split into dao and dg */
                   fmax(j->swiglu ? N * (q + Ft + Fw) : 0,
                        fmax(N * (q + Fin + ny + q + qkv) + rebuild, /* attention backward: dao, dg, dy, ao, dq dk dv */
                             N * ny + Nl * C)));        /* the fused input GEMM's dgrad */
    } else {
        fwd = N * qkv;                                  /* QKV GEMM's output before the split */
        bwd = fmax(fmax(N * Ft + dz,                    /* FC2 dgrad */
                        j->swiglu ? N * (Ft + Fw) : 0), /* SwiGLU backward */
                   fmax(fmax(N * Fin + Nl * C,          /* FC1 dgrad */
                             Nl * C + N * q + dz),      /* projection dgrad */
                        fmax(Nl * C + N * (q + 2 * qkv) + rebuild, /* attention backward: dh, dao, dy, dq dk dv */
                             Nl * C + N * qkv)));       /* QKV dgrad */
    }
    /* The backward carries the residual stream's gradient throughout; with
     * pipeline stages it arrives in a transfer buffer (comm_buffers_bytes). */
    if (j->pp == 1)
        bwd += Nl * C;
    return e * fmax(fwd, bwd);
}

double workload_inflight_chunks(const job_t *j, int stage)
{
    double mv = (double)j->num_microbatches * j->vpp;
    if (j->pipeline_schedule == PIPE_GPIPE)
        return mv;
    if (j->vpp == 1)
        return fmin(j->num_microbatches, j->pp - stage);
    /* Megatron's interleaved warm-up: (p - r - 1) * 2 + (v - 1) * p forward
     * chunks before the first backward, plus the one in steady state. */
    double warm = (double)(j->pp - stage - 1) * 2 + (double)(j->vpp - 1) * j->pp;
    return fmin(warm + 1, mv);
}

static void stage_memory(const job_t *j, const hw_t *hw, int stage, memory_t *m)
{
    double P = workload_stage_params_local(j, stage), Pe = workload_stage_expert_params_local(j, stage);
    double wb = job_weight_bytes(j), gb = job_grad_bytes(j);
    double shard = (P - Pe) / j->dp_cp + Pe / j->edp; /* ZeRO's: over DP x CP, the experts' over EDP */
    double T = job_tokens_local(j);
    double h = j->hidden_size, t = j->tp;
    double piece = P / workload_dp_pieces(j, P);
    /* ZeRO-3 (FSDP, model/sched.c): the shard, the piece computing and the
     * one gathered beside it; otherwise every weight, all the time. */
    m->weights_bytes = j->zero_stage >= 3 ? shard * wb + 2 * piece * wb : P * wb;
    /* Gradients are sharded (the shard plus the piece whose reduce-scatter
     * is in flight) only where each is reduce-scattered once complete and
     * never added to again: ZeRO-3 (each micro-batch's) and ZeRO-2 without
     * gradient accumulation (one micro-batch). ZeRO-2's one reduce-scatter
     * per iteration after several micro-batches (MegaScale's, and the op
     * program's) needs every full gradient while they accumulate, as ZeRO-1
     * does. */
    int sharded = j->zero_stage >= 3 || (j->zero_stage == 2 && j->num_microbatches == 1);
    m->grads_bytes = sharded ? shard * gb + piece * gb : P * gb;
    m->optimizer_bytes = (j->zero_stage >= 1 ? shard : P) * job_optim_bytes(j);
    /* The stage's chunks in flight, each at the stage's mean layers per
     * chunk (only a first or last chunk under account-for-* differs). */
    double layers_per_chunk = (double)split_stage_layers(j, stage) / j->vpp;
    m->inflight_microbatches = workload_inflight_chunks(j, stage) / j->vpp;
    double kept = layers_per_chunk * stage_activation_bytes(j, stage), rebuilt = 0; /* per chunk in flight */
    if (j->recompute == RECOMPUTE_FULL) {
        job_t keep_all = *j;
        keep_all.recompute = RECOMPUTE_NONE;
        double in = workload_layer_activation_bytes(j), all = stage_activation_bytes(&keep_all, stage);
        double n = fmin(j->recompute_num_layers, layers_per_chunk);
        /* Block: the first n layers checkpointed one by one, the rest kept.
         * The backward reaches the first n last, when the kept layers of
         * its micro-batch are freed: a rebuilt layer takes their place, and
         * adds to the peak only when every layer is rebuilt. */
        if (j->recompute_method == RECOMPUTE_BLOCK)
            kept = n * in + (layers_per_chunk - n) * all, rebuilt = n < layers_per_chunk ? 0 : all;
        else /* one input per group of n layers; a whole group rebuilt at a time */
            kept = ceil(layers_per_chunk / n) * in, rebuilt = n * all;
    } else if (j->recompute == RECOMPUTE_SELECTIVE && !attn_is_flash(j->attention)) {
        /* the backward rebuilds one layer's attention core at a time */
        job_t keep_all = *j;
        keep_all.recompute = RECOMPUTE_NONE;
        rebuilt = stage_activation_bytes(&keep_all, stage) - stage_activation_bytes(j, stage);
    }
    /* Offloading keeps the token-wise rest of every held layer on the GPU;
     * the layer being rebuilt or run works whole: its offloaded share is
     * on the GPU too until its forward ends (and again from its backward's
     * start). */
    double held = workload_inflight_chunks(j, stage) * kept;
    m->host_offload_bytes = j->offload_fraction * held;
    m->activations_bytes = held - m->host_offload_bytes + rebuilt;
    if (j->offload_fraction > 0 && j->recompute != RECOMPUTE_FULL)
        m->activations_bytes += j->offload_fraction * stage_activation_bytes(j, stage);
    if (stage == j->pp - 1) /* logits (bf16, or fp32) and the fp32 loss copy */
        m->activations_bytes += T * j->padded_vocab_size / t * (wb + 4);
    m->workspace_bytes = workload_layer_working_bytes(j);
    m->comm_buffers_bytes = (t > 1 ? 2 * T * h * wb : 0) + (j->pp > 1 ? 4 * T * h / t * wb : 0);
    m->runtime_bytes = hw->cluster.runtime_reserved_gib * GIB;
    m->total_bytes = m->weights_bytes + m->grads_bytes + m->optimizer_bytes +
                     m->activations_bytes + m->workspace_bytes + m->comm_buffers_bytes + m->runtime_bytes;
    m->peak_stage = stage;
}

void workload_memory(const job_t *j, const hw_t *hw, memory_t *m)
{
    /* The first stage holds the most micro-batches' activations, the last
     * the logits and the output layer; under an uneven split (model/split.h)
     * the second, the first of the middle ones, may hold more layers than
     * either: the peak is on one of the three. */
    int stage[3], count[3], kinds = split_kinds(j, stage, count);
    stage_memory(j, hw, stage[0], m);
    for (int k = 1; k < kinds; k++) {
        memory_t x;
        stage_memory(j, hw, stage[k], &x);
        if (x.total_bytes > m->total_bytes)
            *m = x;
    }
    m->capacity_bytes = hw->gpu.hbm_gib * GIB;
    m->fits = m->total_bytes <= m->capacity_bytes;
}
