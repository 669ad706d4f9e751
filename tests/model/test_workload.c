/* test_workload: parameters, FLOPs, activation and ZeRO memory against the
 * published formulas (megascale-targets.md; Korthikanti et al. 2022;
 * Rajbhandari et al. 2020), on worked examples. */
#include "model/layer.h"
#include "model/sched.h"
#include "model/workload.h"
#include "../check.h"

#include <string.h>

static job_t gpt(int layers, int hidden, int heads, int tp, int pp, int gpus)
{
    job_t j;
    char err[OPT_ERR_LEN];
    job_default(&j);
    j.num_layers = layers, j.hidden_size = hidden, j.num_attention_heads = heads;
    j.tp = tp, j.pp = pp, j.num_gpus = gpus, j.layers_per_vstage = 0;
    j.global_batch_size = gpus / (tp * pp) * 8;
    if (job_finalize(&j, 8, err))
        printf("setup error: %s\n", err);
    return j;
}

static void flops_and_params(void)
{
    workload_t w;
    job_t j = gpt(96, 12288, 128, 8, 8, 512);
    j.sliding_window = 0, j.window = j.seq_length;
    workload_compute(&j, &w);
    /* 72 l h^2 (1 + s/6h + V/12lh) per token with l=96, h=12288, s=2048,
     * V=64000 -> 1.0774e12 (megascale-targets.md, Megatron's formula). */
    double l = 96, h = 12288, s = 2048, V = 64000;
    double formula = 72 * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
    check_rel("175B model FLOPs per token (formula)", formula, w.model_flops_per_token, 1e-12,
              "72 l h^2 (1 + s/6h + V/12lh)");
    check_rel("175B model FLOPs per token (paper-derived)", 1.0774e12, w.model_flops_per_token, 1e-4,
              "megascale-targets.md: 1.0774e12");
    check_rel("175B parameters", 174.8e9, w.params_total, 5e-4, "P = 12 l h^2 (1 + 13/12h + (V+s)/12lh)");
    /* Full recomputation: hardware does 96 instead of 72 on the layers. */
    j.recompute = RECOMPUTE_FULL;
    workload_compute(&j, &w);
    double layers_fwd = l * (24 * h * h + 4 * s * h);
    check_rel("HFU FLOPs with full recompute = model + 1 fwd", w.model_flops_per_iter + layers_fwd * s * j.global_batch_size,
              w.hw_flops_per_iter, 1e-12, "Narayanan et al.: 96 vs 72 B s l h^2");
    job_t big = gpt(105, 20480, 160, 8, 35, 280 * 8);
    workload_compute(&big, &w);
    check_rel("530B parameters", 529.9e9, w.params_total, 5e-4, "megascale-targets.md Table 1, P formula");
    /* Sliding window w over s: causal keys w(w+1)/2 + (s-w)w vs s(s+1)/2. */
    check_rel("causal keys, s=2048 w=1024", 1024.0 * 1025 / 2 + 1024.0 * 1024, workload_causal_keys(2048, 1024),
              1e-15, "sum_i min(i, w)");
    check_rel("causal keys, window beyond sequence", 2048.0 * 2049 / 2, workload_causal_keys(2048, 4096), 1e-15,
              "w > s is full causal");
}

static void activations(void)
{
    /* Korthikanti et al. 2022, Table 2: per layer, bytes =
     *   s b h (34 + 5 a s / h) / t     with TP and SP, no recompute;
     *   s b h (10 + 24/t + 5 a s/(h t)) with TP only;
     *   s b h 34 / t                   with SP and selective recompute;
     *   2 s b h / t                    full recompute with SP (input only). */
    job_t j = gpt(96, 12288, 96, 8, 8, 512);
    j.attention = ATTN_UNFUSED, j.parallel_block = 0, j.recompute = RECOMPUTE_NONE, j.sequence_parallel = 1;
    j.micro_batch_size = 2;
    double s = 2048, b = 2, h = 12288, a = 96, t = 8;
    check_rel("activations, TP+SP", s * b * h * (34 + 5 * a * s / h) / t, workload_layer_activation_bytes(&j), 1e-12,
              "Korthikanti eq. (SP, no recompute)");
    j.sequence_parallel = 0;
    check_rel("activations, TP only", s * b * h * (10 + 24 / t + 5 * a * s / (h * t)),
              workload_layer_activation_bytes(&j), 1e-12, "Korthikanti eq. (TP)");
    j.sequence_parallel = 1, j.recompute = RECOMPUTE_SELECTIVE;
    check_rel("activations, SP + selective recompute", s * b * h * 34 / t, workload_layer_activation_bytes(&j),
              1e-12, "Korthikanti eq. (selective)");
    j.recompute = RECOMPUTE_FULL;
    check_rel("activations, SP + full recompute", 2 * s * b * h / t, workload_layer_activation_bytes(&j), 1e-12,
              "layer input only");
    /* In-flight micro-batches on the first stage: p for 1F1B, and
     * p (1 + (p - 1)/(p v)) for the interleaved schedule (Korthikanti). */
    job_t k = gpt(96, 12288, 96, 8, 8, 512);
    k.global_batch_size = 512 / 64 * 64;
    char err[OPT_ERR_LEN];
    k.layers_per_vstage = 2;
    job_finalize(&k, 8, err);
    double p = 8, v = 6;
    check_rel("in-flight chunks, interleaved first stage", p * v * (1 + (p - 1) / (p * v)),
              workload_inflight_chunks(&k, 0), 1e-12, "p v (1 + (p-1)/(p v))");
    k.layers_per_vstage = 0;
    job_finalize(&k, 8, err);
    check_rel("in-flight micro-batches, 1F1B first stage", p, workload_inflight_chunks(&k, 0), 0, "p");
    check_rel("in-flight micro-batches, 1F1B last stage", 1, workload_inflight_chunks(&k, 7), 0, "p - (p-1)");
}

static void zero_memory(void)
{
    /* ZeRO paper (Rajbhandari et al. 2020) worked example with bf16
     * weights and gradients and K = 12 bytes of optimizer state per
     * parameter: stage 0: (2 + 2 + 12) P; stage 1: 2P + 2P + 12P/N;
     * stage 2: 2P + 2P/N + 12P/N (+ one bucket of full gradients while it
     * is reduce-scattered); stage 3: 16P/N (+ a bucket of gradients and,
     * as FSDP runs it (model/sched.c), two buckets of gathered weights:
     * the one computing and the one prefetched). The paper's figure has no
     * gradient accumulation: one micro-batch. */
    job_t j = gpt(32, 4096, 32, 1, 1, 64);
    j.grads_fp32 = 0, j.vpp = 1;
    j.global_batch_size = 64, j.num_microbatches = 1;
    hw_t hw;
    char err[OPT_ERR_LEN];
    job_hardware(&j, &hw, err);
    double P = workload_stage_params_local(&j, 0), N = 64;
    memory_t m;
    const char *names[] = {"ZeRO-0 weights+grads+optimizer", "ZeRO-1 weights+grads+optimizer",
                           "ZeRO-2 weights+grads+optimizer", "ZeRO-3 weights+grads+optimizer"};
    double bucket = P / workload_dp_pieces(&j, P) * 2;
    double expect[] = {16 * P, 4 * P + 12 * P / N, 2 * P + 14 * P / N + bucket, 16 * P / N + 3 * bucket};
    for (int z = 0; z <= 3; z++) {
        j.zero_stage = z;
        workload_memory(&j, &hw, &m);
        check_rel(names[z], expect[z], m.weights_bytes + m.grads_bytes + m.optimizer_bytes, 1e-9,
                  "Rajbhandari et al. 2020, Figure 1");
    }
    /* With 8 micro-batches, ZeRO-2's one reduce-scatter per iteration
     * (model/sched.c, MegaScale's) comes after every gradient has
     * accumulated whole: ZeRO-1's gradient memory, 2P. */
    /* --ddp-bucket-size: Megatron-LM's max(40M, 1M x DP) buckets unless given */
    check_rel("DP buckets, Megatron-LM's default max(40M, 1M x 64)", ceil(P / 64e6), workload_dp_pieces(&j, P), 0,
              "Megatron-LM DistributedDataParallelConfig.bucket_size");
    j.ddp_bucket_size = P / 3.5;
    check_rel("DP buckets, --ddp-bucket-size P / 3.5", 4, workload_dp_pieces(&j, P), 0, "ceil(3.5)");
    j.zero_stage = 3;
    workload_memory(&j, &hw, &m);
    check_rel("ZeRO-3 weights with 4 buckets", 2 * P / N + 2 * 2 * P / 4, m.weights_bytes, 1e-9,
              "the shard and two gathered buckets of P / 4");
    j.ddp_bucket_size = 0;
    j.global_batch_size = 512, j.num_microbatches = 8, j.zero_stage = 2;
    workload_memory(&j, &hw, &m);
    check_rel("ZeRO-2 gradients, 8 micro-batches", 2 * P, m.grads_bytes, 1e-12,
              "full gradients while micro-batches accumulate (one reduce-scatter per iteration)");
}

/* Without dropout (--attention-dropout 0 --hidden-dropout 0, as modern
 * runs and megasim's own executor train) the masks and the dropout pass go:
 * per layer and token, the two 1-byte hidden masks (2h, replicated unless
 * SP splits them) and, unfused, the attention mask (1) and dropout output
 * (2) per score (3 a s / t); and the forward loses its dropout op. */
static int count_named(const op_t *ops, int n, const char *name)
{
    int c = 0;
    for (int i = 0; i < n; i++)
        c += !strcmp(ops[i].name, name);
    return c;
}

static void dropout(void)
{
    job_t j = gpt(96, 12288, 96, 8, 8, 512);
    j.attention = ATTN_UNFUSED, j.parallel_block = 0, j.recompute = RECOMPUTE_NONE, j.sequence_parallel = 1;
    double s = 2048, h = 12288, a = 96, t = 8, with = workload_layer_activation_bytes(&j);
    op_t ops[LAYER_MAX_OPS];
    int n = layer_ops(&j, PASS_FWD, ops), drops = count_named(ops, n, "attn_dropout");
    j.attention_dropout = j.hidden_dropout = 0;
    double without = workload_layer_activation_bytes(&j);
    check_rel("activations saved without dropout (SP, unfused)", s * (2 * h / t + 3 * a * s / t), with - without,
              1e-12, "two 1-byte hidden masks (2h / t) and the attention mask + dropout output (3 a s / t)");
    int m = layer_ops(&j, PASS_FWD, ops);
    check_true("the forward's attention dropout op goes with --attention-dropout 0",
               drops == 1 && count_named(ops, m, "attn_dropout") == 0 && m == n - 1,
               "model/layer.c: one elementwise pass over the s x s probabilities, only when the dropout is on");
}

/* Megatron-LM's --recompute-method under full recomputation, on 175B with
 * TP 8, PP 8 and 12 layers per stage (no interleaving): block with N
 * layers recomputes N / 12 of them and keeps the others' activations;
 * uniform with N keeps one input per group of N and rebuilds a group at a
 * time. */
static void recompute_methods(void)
{
    job_t j = gpt(96, 12288, 96, 8, 8, 512);
    j.recompute = RECOMPUTE_FULL, j.sequence_parallel = 1;
    char err[OPT_ERR_LEN];
    workload_t w;
    job_t none = j;
    none.recompute = RECOMPUTE_NONE;
    double in = workload_layer_activation_bytes(&j), all = workload_layer_activation_bytes(&none);
    double inflight = workload_inflight_chunks(&j, 0);
    workload_compute(&j, &w);
    double layers_fwd = w.hw_flops_per_iter - w.model_flops_per_iter; /* uniform: every layer's forward again */
    j.recompute_method = RECOMPUTE_BLOCK, j.recompute_num_layers = 3;
    job_finalize(&j, 8, err);
    workload_compute(&j, &w);
    check_rel("block, 3 of 12 layers: HFU FLOPs = model + 3/12 of uniform's extra", w.model_flops_per_iter + layers_fwd / 4,
              w.hw_flops_per_iter, 1e-12, "Megatron-LM --recompute-method block --recompute-num-layers 3");
    memory_t m;
    workload_memory(&j, (hw_t[]){0}, &m);
    double block_act = m.activations_bytes;
    job_t u = j;
    u.recompute_method = RECOMPUTE_UNIFORM, u.recompute_num_layers = 4;
    job_finalize(&u, 8, err);
    workload_memory(&u, (hw_t[]){0}, &m);
    double uni_act = m.activations_bytes;
    /* The first stage also holds no logits: activations are the layers' only. */
    /* The backward reaches the 3 rebuilt layers after freeing the 9 kept
     * ones of its micro-batch, so one rebuilt layer adds nothing to the
     * peak (real/gpt.c frees each kept layer after its backward) */
    check_rel("block, 3 of 12: activations = in flight x (3 inputs + 9 layers), nothing rebuilt on top",
              inflight * (3 * in + 9 * all), block_act, 1e-12, "model/workload.c, stage 0");
    check_rel("uniform, groups of 4: activations = in flight x 3 inputs + 4 layers rebuilt", inflight * 3 * in + 4 * all,
              uni_act, 1e-12, "model/workload.c, stage 0");
    j.recompute_num_layers = 13;
    check_true("recompute-num-layers above a chunk's 12 layers is refused", job_finalize(&j, 8, err) != 0, err);
}

/* A LLaMA-3-8B-like model: SwiGLU MLP (3 h f weights), GQA with 8 groups,
 * and the output layer untied from the word embedding (V h more, and no
 * embedding gradient sync between the end stages). */
static int emb_syncs(const job_t *j, int stage)
{
    sched_iter_t it;
    sched_op_t o;
    int n = 0;
    sched_iter_init(&it, j, stage);
    while (sched_next(&it, &o))
        n += o.kind == SOP_EMB_SYNC;
    return n;
}

static void llama_like(void)
{
    job_t j;
    char err[OPT_ERR_LEN];
    job_default(&j);
    j.num_layers = 32, j.hidden_size = 4096, j.num_attention_heads = 32, j.num_query_groups = 8;
    j.ffn_hidden_size = 14336, j.seq_length = 8192, j.padded_vocab_size = 128256, j.swiglu = 1, j.parallel_block = 0;
    j.tp = 8, j.pp = 2, j.num_gpus = 16, j.layers_per_vstage = 0, j.global_batch_size = 16;
    if (job_finalize(&j, 8, err))
        printf("setup error: %s\n", err);
    workload_t w;
    workload_compute(&j, &w);
    double l = 32, h = 4096, f = 14336, kvd = 8 * 128, V = 128256, s = 8192;
    double layer = h * (h + 2 * kvd) + h * h + 3 * h * f + (h + 2 * kvd) + h + 2 * f + h + 4 * h;
    check_rel("SwiGLU + GQA parameters (tied)", l * layer + V * h + s * h + 2 * h, w.params_total, 1e-12,
              "per layer: QKV h (h + 2 kvd), proj h^2, FC1 h 2f (gate, up), FC2 f h, biases, two LayerNorms");
    int tied = emb_syncs(&j, 1);
    j.untie_embeddings = 1;
    workload_compute(&j, &w);
    check_rel("untied: V h more parameters", l * layer + 2 * V * h + s * h + 2 * h, w.params_total, 1e-12,
              "--untie-embeddings-and-output-weights: the output layer's own weights");
    check_true("untied: no embedding gradient sync on the last stage", tied == 1 && emb_syncs(&j, 1) == 0,
               "model/sched.c: the tied copy's all-reduce between the end stages is gone");
    /* LLaMA proper: rotary positions (no s x h table), RMSNorm (weight
     * only), no linear biases. */
    op_t ops[LAYER_MAX_OPS];
    int learned_ops = layer_ops(&j, PASS_FWD, ops);
    j.position_embedding = POS_ROPE, j.normalization = NORM_RMSNORM, j.disable_bias_linear = 1;
    workload_compute(&j, &w);
    double weights = h * (h + 2 * kvd) + h * h + 3 * h * f;
    check_rel("LLaMA: RoPE, RMSNorm, no biases", l * (weights + 2 * h) + 2 * V * h + h, w.params_total, 1e-12,
              "per layer: the GEMM weights and two RMSNorm weights; embeddings untied; the final RMSNorm");
    int n = layer_ops(&j, PASS_FWD, ops);
    check_true("RoPE adds one elementwise pass to the forward", n == learned_ops + 1 && count_named(ops, n, "rope") == 1,
               "model/layer.c rope(): reads and writes Q and K after the QKV GEMM");
}

int main(void)
{
    flops_and_params();
    llama_like();
    activations();
    dropout();
    recompute_methods();
    zero_memory();
    return check_done("test_workload");
}
