/* job: the options table of a training job, presets, parsing of files and
 * flags, and the cross-field rules (see job.h). */
#include "model/job.h"
#include "model/moe.h"
#include "model/split.h"
#include "model/workload.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define J(f) offsetof(job_t, f)
#define BIG 16777216.0 /* 2^24: bound for sizes (tokens, vocab, batch) */

/* Megatron-LM spelling where Megatron has one; our own names otherwise. */
static const opt_def defs[] = {
    /* name, type, offset, lo, hi, default, choices, group, help */
    {"num-layers", OPT_INT, J(num_layers), 1, 10000, "96", 0, "model", "transformer layers"},
    {"hidden-size", OPT_INT, J(hidden_size), 1, 1048576, "12288", 0, "model", "hidden size h"},
    {"ffn-hidden-size", OPT_INT, J(ffn_hidden_size), 0, 4194304, "0", 0, "model", "MLP hidden size (0 = 4 x hidden)"},
    {"num-attention-heads", OPT_INT, J(num_attention_heads), 1, 16384, "128", 0, "model", "attention heads"},
    {"num-query-groups", OPT_INT, J(num_query_groups), 0, 16384, "0", 0, "model", "key/value heads for GQA (0 = heads, i.e. MHA)"},
    {"seq-length", OPT_INT, J(seq_length), 1, BIG, "2048", 0, "model", "sequence length in tokens"},
    {"padded-vocab-size", OPT_INT, J(padded_vocab_size), 1, BIG, "64000", 0, "model", "vocabulary size (padded)"},
    {"global-batch-size", OPT_INT, J(global_batch_size), 1, BIG, "6144", 0, "model", "sequences per iteration"},
    {"micro-batch-size", OPT_INT, J(micro_batch_size), 1, 65536, "1", 0, "model", "sequences per micro-batch"},
    {"swiglu", OPT_BOOL, J(swiglu), 0, 1, "false", 0, "model",
     "gated MLP (SwiGLU, LLaMA style): FC1 gives 2 x ffn-hidden-size (gate and up), 3 h f weights instead of 2"},
    {"position-embedding-type", OPT_ENUM, J(position_embedding), 0, 0, "learned_absolute",
     "learned_absolute|rope|none", "model",
     "positions: learned s x h embedding (GPT-3), rotary (LLaMA: no weights, a pass over Q and K), or none"},
    {"rotary-base", OPT_REAL, J(rotary_base), 1, 1e12, "10000", 0, "model",
     "RoPE's base theta (Megatron-LM's default; LLaMA-3: 500000): numerics only, the real backend's rotation"},
    {"normalization", OPT_ENUM, J(normalization), 0, 0, "LayerNorm", "LayerNorm|RMSNorm", "model",
     "LayerNorm (weight and bias) or RMSNorm (weight only)"},
    {"disable-bias-linear", OPT_BOOL, J(disable_bias_linear), 0, 1, "false", 0, "model",
     "no biases in the linear layers (LLaMA style)"},
    {"add-qkv-bias", OPT_BOOL, J(add_qkv_bias), 0, 1, "false", 0, "model",
     "with --disable-bias-linear, the QKV layer keeps its bias (Qwen2 style)"},
    {"untie-embeddings-and-output-weights", OPT_BOOL, J(untie_embeddings), 0, 1, "false", 0, "model",
     "the output layer has its own V x h weights instead of the word embedding's (no embedding gradient sync "
     "between the first and last pipeline stage)"},
    {"attention-dropout", OPT_REAL, J(attention_dropout), 0, 1, "0.1", 0, "model",
     "dropout on the attention probabilities (Megatron-LM's default; 0: the unfused path has no dropout pass and "
     "keeps no mask)"},
    {"hidden-dropout", OPT_REAL, J(hidden_dropout), 0, 1, "0.1", 0, "model",
     "dropout before each residual add (Megatron-LM's default; 0: no 1-byte masks)"},

    {"num-gpus", OPT_INT, J(num_gpus), 1, 4194304, "12288", 0, "parallel plan", "GPUs in the job (DP = GPUs / (TP x PP))"},
    {"tensor-model-parallel-size", OPT_INT, J(tp), 1, 1024, "8", 0, "parallel plan", "tensor-parallel size TP"},
    {"pipeline-model-parallel-size", OPT_INT, J(pp), 1, 4096, "8", 0, "parallel plan", "pipeline stages PP"},
    {"context-parallel-size", OPT_INT, J(cp), 1, 4096, "1", 0, "parallel plan",
     "context-parallel size CP: each sequence split over CP ranks in 2 CP chunks, rank i holding chunks i and "
     "2CP-1-i (the causal load balance)"},
    {"cp-comm-type", OPT_ENUM, J(cp_comm_type), 0, 0, "p2p", "p2p|all_gather|a2a", "parallel plan",
     "how CP attention meets the other chunks: a ring passing K and V on beside each block's attention, an "
     "all-gather of K and V (Llama 3's), or all-to-alls scattering the heads (Ulysses)"},
    {"num-layers-per-virtual-pipeline-stage", OPT_INT, J(layers_per_vstage), 0, 10000, "2", 0, "parallel plan",
     "layers per model chunk for the interleaved schedule (0 = not interleaved)"},
    {"num-virtual-stages-per-pipeline-rank", OPT_INT, J(vstages_per_rank), 0, 10000, "0", 0, "parallel plan",
     "model chunks per stage for the interleaved schedule, instead of layers per chunk (0 = not set; needed "
     "with the decoder-first/last options)"},
    {"decoder-first-pipeline-num-layers", OPT_INT, J(first_stage_layers), 1, 10000, "0", OPT_ZERO_OK,
     "parallel plan", "transformer layers on the first pipeline stage; the middle stages share the rest evenly "
     "(0 = even split)"},
    {"decoder-last-pipeline-num-layers", OPT_INT, J(last_stage_layers), 1, 10000, "0", OPT_ZERO_OK,
     "parallel plan", "transformer layers on the last pipeline stage (0 = even split)"},
    {"account-for-embedding-in-pipeline-split", OPT_BOOL, J(account_embedding), 0, 1, "false", 0, "parallel plan",
     "count the embedding as a layer when splitting: the first chunk holds one transformer layer fewer"},
    {"account-for-loss-in-pipeline-split", OPT_BOOL, J(account_loss), 0, 1, "false", 0, "parallel plan",
     "count the output layer and loss as a layer: the last chunk holds one transformer layer fewer"},
    {"use-tp-pp-dp-mapping", OPT_BOOL, J(tp_pp_dp_mapping), 0, 1, "false", 0, "parallel plan",
     "Megatron-Core's tp-cp-ep-pp-dp rank order: pipeline stages before data-parallel replicas, DP outermost "
     "(Llama 3 405B's [TP, CP, PP, DP]); default tp-cp-ep-dp-pp"},
    {"pipeline-schedule", OPT_ENUM, J(pipeline_schedule), 0, 0, "1f1b", "1f1b|gpipe", "parallel plan",
     "pipeline schedule (1f1b is interleaved when chunks > 1)"},
    {"sequence-parallel", OPT_BOOL, J(sequence_parallel), 0, 1, "false", 0, "parallel plan", "sequence parallelism in TP regions"},
    {"recompute-granularity", OPT_ENUM, J(recompute), 0, 0, "none", "none|full|selective", "parallel plan",
     "activation recomputation"},
    {"recompute-method", OPT_ENUM, J(recompute_method), 0, 0, "uniform", "uniform|block", "parallel plan",
     "under full recomputation: uniform recomputes every layer, keeping one input per group of "
     "recompute-num-layers; block recomputes only the first recompute-num-layers layers of each chunk"},
    {"recompute-num-layers", OPT_INT, J(recompute_num_layers), 1, 10000, "1", 0, "parallel plan",
     "layers per checkpointed group (uniform) or recomputed per chunk (block)"},
    {"use-distributed-optimizer", OPT_BOOL, J(distributed_optimizer), 0, 1, "false", 0, "parallel plan",
     "shard optimizer states over DP (ZeRO-1; grads reduce-scattered)"},
    {"zero-stage", OPT_INT, J(zero_stage), 0, 3, "0", 0, "parallel plan",
     "ZeRO stage: 1 shards optimizer states; 2 also gradients, reduce-scattered once per iteration (whole "
     "while micro-batches accumulate); 3 also weights, as FSDP: gathered for every micro-batch's forward and "
     "backward, gradients reduce-scattered after each backward (unset: 1 under --use-distributed-optimizer, else 0)"},
    {"overlap-grad-reduce", OPT_BOOL, J(overlap_grad_reduce), 0, 1, "false", 0, "parallel plan",
     "overlap the DP gradient reduction with backward"},
    {"overlap-param-gather", OPT_BOOL, J(overlap_param_gather), 0, 1, "false", 0, "parallel plan",
     "overlap the DP parameter all-gather with forward (prefetch)"},
    {"ddp-bucket-size", OPT_REAL, J(ddp_bucket_size), 0, 1e12, "0", 0, "parallel plan",
     "parameters per DP bucket, each reduced (gathered) on its own when overlapped (0 = Megatron-LM's "
     "max(4e7, 1e6 x DP); interleaved: one bucket per model chunk)"},
    {"tp-comm-overlap", OPT_BOOL, J(tp_comm_overlap), 0, 1, "false", 0, "parallel plan",
     "overlap the SP all-gather and reduce-scatter with the GEMMs, one ring step per TP rank"},
    {"accumulate-allreduce-grads-in-fp32", OPT_BOOL, J(grads_fp32), 0, 1, "true", 0, "parallel plan",
     "keep and reduce gradients in fp32 (4 bytes) rather than bf16"},
    {"bf16", OPT_BOOL, J(bf16), 0, 1, "true", 0, "parallel plan",
     "bf16 mixed precision (false: fp32 storage on TF32 tensor cores)"},
    {"fp8-format", OPT_ENUM, J(fp8_format), 0, 0, "none", "none|e4m3|hybrid", "parallel plan",
     "FP8 linear-layer GEMMs as Transformer Engine runs them (hybrid: E5M2 gradients), weights kept in bf16, "
     "each GEMM input cast (and its amax taken) in a pass of its own; attention stays bf16"},
    {"fp8-recipe", OPT_ENUM, J(fp8_recipe), 0, 0, "delayed", "delayed", "parallel plan",
     "FP8 scaling recipe: delayed (scales from the amax history, Transformer Engine's default)"},
    {"activation-offload-fraction", OPT_REAL, J(offload_fraction), 0, 1, "0", 0, "parallel plan",
     "the share of each layer's saved activations, token-wise, copied to host memory after its forward and back "
     "before its backward, over PCIe beside the compute (MEMO); the rest kept or recomputed as the job says"},
    {"mfu-peak", OPT_ENUM, J(mfu_peak), 0, 0, "bf16", "bf16|fp8", "parallel plan",
     "the peak MFU is counted against (with fp8 GEMMs the bf16 peak stays the default, as the FP8 papers report)"},

    {"num-experts", OPT_INT, J(num_experts), 1, 65536, "0", OPT_ZERO_OK, "mixture of experts",
     "experts in each MoE layer (0: a dense model)"},
    {"moe-router-topk", OPT_INT, J(moe_topk), 1, 1024, "2", 0, "mixture of experts", "experts each token is routed to"},
    {"moe-ffn-hidden-size", OPT_INT, J(moe_ffn_hidden_size), 1, 4194304, "0", OPT_ZERO_OK, "mixture of experts",
     "an expert's MLP hidden size (0: ffn-hidden-size)"},
    {"moe-shared-expert-intermediate-size", OPT_INT, J(moe_shared_ffn), 1, 4194304, "0", OPT_ZERO_OK,
     "mixture of experts", "the shared expert's MLP hidden size, every token through it (0: none)"},
    {"moe-layer-freq", OPT_INT, J(moe_layer_freq), 1, 10000, "1", 0, "mixture of experts",
     "every N-th layer is an MoE layer, from layer 0 (Megatron-Core's integer form)"},
    {"moe-shared-expert-gate", OPT_BOOL, J(moe_shared_gate), 0, 1, "false", 0, "mixture of experts",
     "the shared expert's output scaled by a sigmoid gate of the token (h weights; Qwen2's)"},
    {"moe-dense-first-layers", OPT_INT, J(moe_dense_first), 0, 10000, "0", 0, "mixture of experts",
     "the first K layers stay dense (DeepSeek's first_k_dense_replace; Megatron-Core writes it --moe-layer-freq "
     "'([0]*K+[1]*N)')"},
    {"expert-model-parallel-size", OPT_INT, J(ep), 1, 65536, "1", 0, "mixture of experts",
     "EP: the experts split over EP ranks (folded: the expert groups come from the attention's ranks)"},
    {"expert-tensor-parallel-size", OPT_INT, J(etp), 1, 1024, "0", OPT_ZERO_OK, "mixture of experts",
     "ETP: each expert's MLP split over ETP ranks (0: TP's, Megatron-Core's default)"},
    {"moe-token-dispatcher-type", OPT_ENUM, J(moe_dispatcher), 0, 0, "allgather", "allgather|alltoall",
     "mixture of experts", "how tokens reach their experts: all-gathered over the expert group, or all-to-all"},
    {"moe-grouped-gemm", OPT_BOOL, J(moe_grouped_gemm), 0, 1, "false", 0, "mixture of experts",
     "one grouped GEMM for the rank's experts (else one GEMM per expert)"},
    {"moe-expert-capacity-factor", OPT_REAL, J(moe_capacity_factor), 0.01, 1000, "0", OPT_ZERO_OK,
     "mixture of experts", "each expert takes at most this times its even share of tokens (0: dropless)"},
    {"moe-pad-expert-input-to-capacity", OPT_BOOL, J(moe_pad_to_capacity), 0, 1, "false", 0, "mixture of experts",
     "every expert computes its full capacity (needs a capacity factor)"},
    {"moe-router-load-balancing-type", OPT_ENUM, J(moe_lb_type), 0, 0, "aux_loss", "aux_loss|seq_aux_loss|sinkhorn|none",
     "mixture of experts", "the router's balancing (numerics: its small kernels are not priced)"},
    {"moe-aux-loss-coeff", OPT_REAL, J(moe_aux_coeff), 0, 1000, "0", 0, "mixture of experts",
     "the auxiliary load-balancing loss's weight (aux_loss: the switch transformer's, over each micro-batch; run "
     "trains with it, predict and simulate do not price its small kernels)"},
    {"moe-expert-load-cv", OPT_REAL, J(moe_load_cv), 0, 10, "0", 0, "mixture of experts",
     "routing imbalance: the experts' token loads in a micro-batch vary with this coefficient of variation, and "
     "the busiest expert rank sets the pace of the dispatch, the experts and the combine (0: every expert its "
     "even share)"},
    {"moe-permute-fusion", OPT_BOOL, J(moe_permute_fusion), 0, 1, "false", 0, "mixture of experts",
     "the token permutation in one fused kernel each way (else an index pass and a gather)"},

    {"preset", OPT_ENUM, J(preset), 0, 0, "megascale", "none|megatron-lm|megascale", "MegaScale techniques",
     "technique bundle applied before files and flags"},
    {"parallel-block", OPT_BOOL, J(parallel_block), 0, 1, "false", 0, "MegaScale techniques",
     "parallel transformer block (attention and MLP side by side)"},
    {"sliding-window", OPT_INT, J(sliding_window), -1, BIG, "0", 0, "MegaScale techniques",
     "attention window in tokens (0 = full causal, -1 = half the sequence)"},
    {"optimizer", OPT_ENUM, J(optimizer), 0, 0, "adam", "adam|lamb", "MegaScale techniques", "optimizer"},
    {"pp-comm-overlap", OPT_BOOL, J(pp_comm_overlap), 0, 1, "false", 0, "MegaScale techniques",
     "decoupled asynchronous pipeline send/receive"},
    {"attention", OPT_ENUM, J(attention), 0, 0, "unfused", "flash|unfused|flash1", "MegaScale techniques",
     "attention kernel: FlashAttention-2 style, GEMM-softmax-GEMM, or FlashAttention-1 style"},
    {"attention-backend", OPT_ENUM, J(attention_backend), 0, 0, "megasim", "megasim|cudnn", "MegaScale techniques",
     "who runs the flash attention on run's GPU path: megasim's own FA-2 kernels or cuDNN's fused attention "
     "(cuDNN 9, opened at run time); predict and simulate price both on the profile's flash curves"},
    {"fused-elementwise", OPT_BOOL, J(fused_elementwise), 0, 1, "false", 0, "MegaScale techniques",
     "fuse dropout-residual-LayerNorm, and the bias with the GeLU (one pass, as unfused with the bias in the GEMM)"},
    {"async-data-loader", OPT_BOOL, J(async_data_loader), 0, 1, "false", 0, "MegaScale techniques",
     "asynchronous data pipeline, one loader per node (no host stall)"},
    {"enable-cuda-graph", OPT_BOOL, J(cuda_graph), 0, 1, "false", 0, "MegaScale techniques",
     "each forward and backward pass launched as a CUDA graph (Megatron-Core's flag): its kernels priced at the "
     "profile's graph_gap_us; run captures them (--device gpu)"},

    {"gpu", OPT_STR, J(gpu), 0, sizeof(((job_t *)0)->gpu), "a800-sxm-80gb", 0, "hardware",
     "built-in GPU profile (megasim hardware lists them)"},
    {"cluster", OPT_STR, J(cluster), 0, sizeof(((job_t *)0)->cluster), "megascale", 0, "hardware",
     "built-in cluster profile"},
    {"hardware", OPT_STR, J(hardware), 0, sizeof(((job_t *)0)->hardware), "", 0, "hardware",
     "hardware profile JSON file (overrides --gpu/--cluster sections it has)"},
    {"nics-per-node", OPT_INT, J(nics_per_node), 0, 1024, "0", 0, "hardware",
     "override the cluster's NICs per node (0 = profile's)"},
    {"nic-gbit", OPT_REAL, J(nic_gbit), 1e-3, 1e6, "0", OPT_ZERO_OK, "hardware", "override the NIC speed, Gb/s (0 = profile's)"},
    {"oversubscription", OPT_REAL, J(oversubscription), 1, 1e3, "0", OPT_ZERO_OK, "hardware",
     "override the ToR oversubscription (0 = profile's; else >= 1)"},
    {"pod-oversubscription", OPT_REAL, J(pod_oversubscription), 1, 1e3, "0", OPT_ZERO_OK, "hardware",
     "override the oversubscription above a pod (0 = profile's; else >= 1)"},
};

const opt_table job_opts = {defs, sizeof defs / sizeof defs[0], "job"};
_Static_assert(sizeof defs / sizeof defs[0] <= JOB_MAX_OPTS, "job_t.given holds JOB_MAX_OPTS options");

int job_given(const job_t *job, const char *name)
{
    const opt_def *d = opts_find(&job_opts, name);
    return d && job->given[d - defs];
}

/* Records that the flag --NAME (or --no-NAME) set a job option. */
static void mark_flag(job_t *job, const char *name)
{
    const opt_def *d = opts_find(&job_opts, name);
    if (!d && !strncmp(name, "no-", 3))
        d = opts_find(&job_opts, name + 3);
    if (d)
        job->given[d - defs] = 1;
}

/* Flags of Megatron-LM that change numerics or bookkeeping, not speed:
 * predict, simulate and search accept and ignore them. `maths` marks those
 * that change what a real training computes (initialisation, precision and
 * loss scaling, the data, schedules counted in samples), which `megasim
 * run` must refuse rather than train without (it has its own --lr,
 * --min-lr, --lr-decay-style, --lr-decay-iters, --lr-warmup-iters,
 * --weight-decay, --clip-grad, --adam-*, --train-iters, --seed, --save,
 * --load, --save-interval and --data, which it reads before this list). */
static const struct {
    const char *name;
    int takes_value, maths;
} ignored[] = {
    {"lr", 1, 0}, {"min-lr", 1, 0}, {"lr-decay-style", 1, 0}, {"lr-decay-iters", 1, 0}, {"lr-decay-samples", 1, 1},
    {"lr-warmup-fraction", 1, 1}, {"lr-warmup-iters", 1, 0}, {"lr-warmup-samples", 1, 1}, {"weight-decay", 1, 0},
    {"clip-grad", 1, 0}, {"adam-beta1", 1, 0}, {"adam-beta2", 1, 0}, {"adam-eps", 1, 0}, {"init-method-std", 1, 1},
    {"train-samples", 1, 1}, {"log-interval", 1, 0}, {"eval-interval", 1, 0}, {"eval-iters", 1, 0},
    {"save", 1, 0}, {"load", 1, 0}, {"save-interval", 1, 0}, {"data-path", 1, 1}, {"vocab-file", 1, 1},
    {"merge-file", 1, 1}, {"tokenizer-type", 1, 1}, {"split", 1, 1},
    {"max-position-embeddings", 1, 0}, {"distributed-backend", 1, 0},
    {"tensorboard-dir", 1, 0}, {"exit-interval", 1, 0}, {"loss-scale", 1, 1}, {"initial-loss-scale", 1, 1},
    {"group-query-attention", 0, 0}, {"use-mcore-models", 0, 0}, {"no-masked-softmax-fusion", 0, 0},
    {"fp16", 0, 1},
    /* numerics, data, logging and checkpointing of a modern launch line */
    {"train-iters", 1, 0}, {"seed", 1, 0}, {"num-workers", 1, 0}, {"data-impl", 1, 0},
    {"make-vocab-size-divisible-by", 1, 0}, {"transformer-impl", 1, 0}, {"rotary-percent", 1, 1},
    {"tokenizer-model", 1, 1}, {"norm-epsilon", 1, 1}, {"exit-duration-in-mins", 1, 0}, {"start-weight-decay", 1, 1},
    {"end-weight-decay", 1, 1}, {"weight-decay-incr-style", 1, 1}, {"lr-warmup-init", 1, 1}, {"hysteresis", 1, 1},
    {"loss-scale-window", 1, 1}, {"min-loss-scale", 1, 1}, {"data-cache-path", 1, 0}, {"train-data-path", 1, 1},
    {"valid-data-path", 1, 0}, {"test-data-path", 1, 0}, {"tensorboard-log-interval", 1, 0},
    {"timing-log-level", 1, 0}, {"wandb-project", 1, 0}, {"wandb-exp-name", 1, 0}, {"ckpt-format", 1, 0},
    {"attention-softmax-in-fp32", 0, 0}, {"apply-layernorm-1p", 0, 1}, {"no-load-optim", 0, 1},
    {"no-load-rng", 0, 0}, {"no-save-optim", 0, 0}, {"no-save-rng", 0, 0}, {"finetune", 0, 1}, {"mock-data", 0, 1},
    {"log-throughput", 0, 0}, {"log-params-norm", 0, 0}, {"log-num-zeros-in-grad", 0, 0},
    {"use-checkpoint-args", 0, 1}, {"no-rope-fusion", 0, 0}, {"no-gradient-accumulation-fusion", 0, 0},
    {"no-async-tensor-model-parallel-allreduce", 0, 0},
};

static int ignored_index(const char *name)
{
    for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++)
        if (!strcmp(ignored[i].name, name))
            return (int)i;
    return -1;
}

/* Megatron-LM flags that do not change performance (learning rate, paths,
 * logging...). They are accepted and ignored so a user can paste a launch
 * line; each entry says whether the flag takes a value. */
static int job_is_ignored_megatron_flag(const char *name, int *takes_value)
{
    int i = ignored_index(name);
    if (i >= 0)
        *takes_value = ignored[i].takes_value;
    return i >= 0;
}

void job_apply_preset(job_t *j, preset_t p)
{
    if (p == PRESET_NONE)
        return;
    /* Both systems: Megatron-LM's standard 2022+ setup for GPT-3 scale,
     * sequence parallelism and the distributed optimizer (ZeRO-1). */
    j->sequence_parallel = 1;
    j->distributed_optimizer = 1;
    j->grads_fp32 = 1;
    if (p == PRESET_MEGATRON) {
        /* Baseline of MegaScale's Tables 2 and 3: no overlap switches,
         * Megatron's own jit fusions only, and FlashAttention-1, which
         * Megatron-LM ran with --use-flash-attn in 2023: MegaScale credits
         * FlashAttention-2 with better "work partitioning between thread
         * blocks and warps", FlashAttention-2's gain over version 1, and
         * its sliding window (Table 3 row 3) gains speed, which needs a
         * kernel that skips masked blocks (ASSUMPTIONS.md). Selective
         * recomputation is kept; with a flash kernel there is no attention
         * core to recompute (Megatron checkpoints only the unfused one). */
        j->recompute = RECOMPUTE_SELECTIVE;
        j->zero_stage = 0; /* ZeRO-1 from the distributed optimizer (job_finalize), also over a replayed job */
        j->attention = ATTN_FLASH1;
        j->parallel_block = 0, j->sliding_window = 0, j->optimizer = OPTIM_ADAM;
        j->tp_comm_overlap = j->pp_comm_overlap = 0;
        j->overlap_grad_reduce = j->overlap_param_gather = 0;
        j->fused_elementwise = j->async_data_loader = 0;
        return;
    }
    /* MegaScale (section 3): every co-design technique on; ZeRO-2 style DP
     * with per-chunk reduce-scatter/all-gather; FlashAttention-2 makes
     * recomputation unnecessary; window = half the sequence (assumption,
     * experiments/megascale/ASSUMPTIONS.md). */
    j->recompute = RECOMPUTE_NONE;
    j->zero_stage = 2;
    j->attention = ATTN_FLASH;
    j->parallel_block = 1, j->sliding_window = -1, j->optimizer = OPTIM_LAMB;
    j->tp_comm_overlap = j->pp_comm_overlap = 1;
    j->overlap_grad_reduce = j->overlap_param_gather = 1;
    j->fused_elementwise = j->async_data_loader = 1;
}

static const char *const doc_keys[] = {"preset", "paper", "description", "name", "comment", NULL};

/* Sets the preset named in a file or flag and applies its bundle. */
static int set_preset(job_t *job, const cJSON *p, const char *text, const char *origin, char *err)
{
    const opt_def *d = opts_find(&job_opts, "preset");
    if (p && !cJSON_IsString(p)) {
        snprintf(err, OPT_ERR_LEN, "%s: expected one of %s", origin, d->choices);
        return -1;
    }
    if (opts_set_text(d, job, p ? p->valuestring : text, origin, err))
        return -1;
    job_apply_preset(job, (preset_t)job->preset);
    return 0;
}


/* Splits "--name=value" or "--name value"; returns the value or NULL. */
static const char *flag_value(int argc, char **argv, int *i, const char *eq)
{
    if (eq)
        return eq + 1;
    if (*i + 1 < argc) {
        (*i)++;
        return argv[*i];
    }
    return NULL;
}

static int is_json_path(const char *a)
{
    size_t n = strlen(a);
    return a[0] != '-' && n > 5 && !strcmp(a + n - 5, ".json");
}

/* Sets one flag (name without "--") from argv; handles bools and
 * --no-NAME. *i advances past a consumed value. */
static int apply_flag(const opt_table *t, void *obj, const char *name, const char *eq,
                      int argc, char **argv, int *i, char *err)
{
    char origin[160];
    snprintf(origin, sizeof origin, "--%s", name);
    const opt_def *d = opts_find(t, name);
    if (!d && !strncmp(name, "no-", 3) && (d = opts_find(t, name + 3)) && d->type == OPT_BOOL && !eq)
        return opts_set_text(d, obj, "false", origin, err);
    if (!d || d->type == OPT_CURVE)
        return 1; /* not in this table */
    if (d->type == OPT_BOOL && !eq)
        return opts_set_text(d, obj, "true", origin, err);
    const char *v = flag_value(argc, argv, i, eq);
    if (!v) {
        snprintf(err, OPT_ERR_LEN, "--%s needs a value (%s)", name, d->help);
        return -1;
    }
    return opts_set_text(d, obj, v, origin, err);
}

/* Finds the last --preset on the command line, if any. */
static const char *flag_preset(int argc, char **argv)
{
    const char *v = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strncmp(argv[i], "--preset=", 9))
            v = argv[i] + 9;
        else if (!strcmp(argv[i], "--preset") && i + 1 < argc)
            v = argv[i + 1];
    }
    return v;
}

/* Whether "--name" (no "=") consumes the next argument: a non-boolean
 * option of the job or extra table, or an ignored Megatron flag with a
 * value. Used so that a flag's value ending in .json is not a job file. */
static int takes_value(const char *arg, const opt_table *extra)
{
    if (strncmp(arg, "--", 2) || strchr(arg, '='))
        return 0;
    const char *name = arg + 2;
    const opt_def *d = extra ? opts_find(extra, name) : NULL;
    if (!d)
        d = opts_find(&job_opts, name);
    int tv;
    if (d)
        return d->type != OPT_BOOL;
    return !strcmp(name, "config") || (job_is_ignored_megatron_flag(name, &tv) && tv);
}

static int load_files(int argc, char **argv, const opt_table *extra, cJSON **roots,
                      const char **paths, int *nfiles, char *err)
{
    *nfiles = 0;
    for (int i = 0; i < argc; i++) {
        const char *path = NULL;
        if (!strcmp(argv[i], "--config") && i + 1 < argc)
            path = argv[++i];
        else if (!strncmp(argv[i], "--config=", 9))
            path = argv[i] + 9;
        else if (takes_value(argv[i], extra))
            i++;
        else if (is_json_path(argv[i]))
            path = argv[i];
        if (!path)
            continue;
        if (*nfiles == 16) {
            snprintf(err, OPT_ERR_LEN, "more than 16 job files given; allowed at most 16");
            return -1;
        }
        if (opts_read_json_file(path, &roots[*nfiles], err))
            return -1;
        paths[(*nfiles)++] = path;
    }
    return 0;
}

static int apply_flags(job_t *job, int argc, char **argv, const opt_table *extra,
                       void *extra_obj, char *err)
{
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (is_json_path(a))
            continue;
        if ((!strcmp(a, "--config") || !strcmp(a, "--preset")) && i + 1 >= argc) {
            snprintf(err, OPT_ERR_LEN, "%s needs a value (%s)", a,
                     a[2] == 'c' ? "a job file" : opts_find(&job_opts, "preset")->choices);
            return -1;
        }
        if (!strcmp(a, "--config")) {
            i++;
            continue;
        }
        if (!strncmp(a, "--config=", 9) || !strcmp(a, "--preset") || !strncmp(a, "--preset=", 9)) {
            i += !strcmp(a, "--preset");
            continue;
        }
        if (strncmp(a, "--", 2) || !a[2]) {
            snprintf(err, OPT_ERR_LEN, "unexpected argument '%s'; flags start with --, job files end in .json", a);
            return -1;
        }
        char name[128];
        const char *eq = strchr(a, '=');
        snprintf(name, sizeof name, "%.*s", (int)(eq ? eq - a - 2 : (long)strlen(a) - 2), a + 2);
        int rc = extra ? apply_flag(extra, extra_obj, name, eq, argc, argv, &i, err) : 1;
        if (rc == 1)
            rc = apply_flag(&job_opts, job, name, eq, argc, argv, &i, err);
        if (rc == 0)
            mark_flag(job, name);
        if (rc == 1 && !strcmp(name, "use-flash-attn") && !eq) {
            job->attention = ATTN_FLASH;
            mark_flag(job, "attention");
            rc = 0;
        }
        /* Megatron-LM's older spellings of --position-embedding-type. */
        if (rc == 1 && !strcmp(name, "use-rotary-position-embeddings") && !eq) {
            job->position_embedding = POS_ROPE;
            rc = 0;
        }
        if (rc == 1 && !strcmp(name, "no-position-embedding") && !eq) {
            if (job->position_embedding == POS_LEARNED)
                job->position_embedding = POS_NONE;
            rc = 0;
        }
        int takes;
        if (rc == 1 && job_is_ignored_megatron_flag(name, &takes)) {
            if (takes && !eq && (i + 1 >= argc || !strncmp(argv[i + 1], "--", 2))) {
                snprintf(err, OPT_ERR_LEN, "--%s needs a value (a Megatron-LM flag megasim accepts and ignores)", name);
                return -1;
            }
            i += takes && !eq;
            if (ignored[ignored_index(name)].maths && !job->numerics_flag[0])
                snprintf(job->numerics_flag, sizeof job->numerics_flag, "--%.*s", (int)sizeof job->numerics_flag - 3, name);
            rc = 0;
        }
        if (rc == 1) {
            snprintf(err, OPT_ERR_LEN, "unknown flag '--%s' (megasim SUBCOMMAND --help lists the flags)", name);
            return -1;
        }
        if (rc)
            return -1;
    }
    return 0;
}

int job_parse(job_t *job, int argc, char **argv, const opt_table *extra,
              void *extra_obj, char *err)
{
    return job_parse_over(job, NULL, argc, argv, extra, extra_obj, err);
}

int job_parse_over(job_t *job, const job_base_t *base, int argc, char **argv, const opt_table *extra,
                   void *extra_obj, char *err)
{
    cJSON *roots[16];
    const char *paths[16];
    int nfiles = 0, rc = -1;
    memset(job, 0, sizeof *job);
    opts_set_defaults(&job_opts, job);
    if (extra)
        opts_set_defaults(extra, extra_obj);
    /* The recorded values stand where the defaults stood: they mark
     * nothing as given, and only a file or flag applies a preset's bundle. */
    if (base && (opts_apply_json(&job_opts, job, base->job, base->job_origin, NULL, NULL, err) ||
                 (extra && base->extra &&
                  opts_apply_json(extra, extra_obj, base->extra, base->extra_origin, base->extra_skip, NULL, err))))
        goto out;
    if (load_files(argc, argv, extra, roots, paths, &nfiles, err))
        goto out;
    /* Preset first (a flag beats the last file naming one, which beats the
     * default), so that files and then flags override its bundle. */
    const char *fp = flag_preset(argc, argv);
    const cJSON *filep = NULL;
    const char *filepath = NULL;
    for (int f = 0; f < nfiles; f++) {
        const cJSON *p = cJSON_IsObject(roots[f]) ? cJSON_GetObjectItemCaseSensitive(roots[f], "preset") : NULL;
        if (p)
            filep = p, filepath = paths[f];
    }
    char origin[300];
    snprintf(origin, sizeof origin, "%s: preset", filepath ? filepath : "");
    if (fp ? set_preset(job, NULL, fp, "--preset", err)
           : filep ? set_preset(job, filep, NULL, origin, err)
                   : (base ? 0 : (job_apply_preset(job, (preset_t)job->preset), 0)))
        goto out;
    for (int f = 0; f < nfiles; f++) {
        if (opts_apply_json(&job_opts, job, roots[f], paths[f], doc_keys, job->given, err))
            goto out;
    }
    rc = apply_flags(job, argc, argv, extra, extra_obj, err);
out:
    for (int f = 0; f < nfiles; f++)
        cJSON_Delete(roots[f]);
    return rc;
}

void job_default(job_t *job)
{
    char err[OPT_ERR_LEN];
    char *argv[] = {NULL};
    if (job_parse(job, 0, argv, NULL, NULL, err)) {
        fprintf(stderr, "%s:%d: default job does not parse: %s\n", __FILE__, __LINE__, err);
        abort();
    }
}

#define RULE JOB_RULE

int job_finalize(job_t *j, int gpus_per_node, char *err)
{
    if (j->ffn_hidden_size == 0)
        j->ffn_hidden_size = 4 * j->hidden_size;
    if (j->num_query_groups == 0)
        j->num_query_groups = j->num_attention_heads;
    RULE(j->hidden_size % j->num_attention_heads == 0,
         "hidden-size = %d is not divisible by num-attention-heads = %d; the head size must be whole",
         j->hidden_size, j->num_attention_heads);
    RULE(j->num_attention_heads % j->num_query_groups == 0,
         "num-attention-heads = %d is not divisible by num-query-groups = %d",
         j->num_attention_heads, j->num_query_groups);
    RULE(j->num_attention_heads % j->tp == 0,
         "num-attention-heads = %d is not divisible by tensor-model-parallel-size = %d; TP splits heads",
         j->num_attention_heads, j->tp);
    RULE(j->num_query_groups % j->tp == 0 || j->tp % j->num_query_groups == 0,
         "num-query-groups = %d and tensor-model-parallel-size = %d: one must divide the other",
         j->num_query_groups, j->tp);
    RULE(j->ffn_hidden_size % j->tp == 0,
         "ffn-hidden-size = %d is not divisible by tensor-model-parallel-size = %d",
         j->ffn_hidden_size, j->tp);
    RULE(j->padded_vocab_size % j->tp == 0,
         "padded-vocab-size = %d is not divisible by tensor-model-parallel-size = %d",
         j->padded_vocab_size, j->tp);
    if (split_finalize(j, err))
        return -1;
    RULE(!j->fp8_format || j->bf16,
         "--fp8-format %s needs --bf16 (Transformer Engine's FP8 GEMMs run inside bf16 mixed precision)",
         j->fp8_format == FP8_E4M3 ? "e4m3" : "hybrid");
    RULE(j->mfu_peak != MFU_PEAK_FP8 || j->fp8_format,
         "--mfu-peak fp8 needs --fp8-format e4m3 or hybrid (no FP8 GEMM runs without it)");
    RULE(j->vpp == 1 || j->pipeline_schedule == PIPE_1F1B,
         "the interleaved schedule (chunks per stage > 1) needs pipeline-schedule 1f1b");
    long long mp = (long long)j->tp * j->cp * j->pp;
    RULE(j->num_gpus % mp == 0, "num-gpus = %d is not TP x %sPP x DP: TP x %sPP = %lld does not divide it",
         j->num_gpus, j->cp > 1 ? "CP x " : "", j->cp > 1 ? "CP x " : "", mp);
    j->dp = (int)(j->num_gpus / mp);
    j->dp_cp = j->dp * j->cp;
    if (moe_finalize(j, err))
        return -1;
    /* Megatron-Core's tp-cp-ep-pp-dp: its expert ranks (ETP, EP, then PP, then EDP) must form the attention's
     * pipeline groups, so a stage's ETP x EP block is its TP x CP one */
    RULE(!j->tp_pp_dp_mapping || j->num_experts == 0 || (long long)j->etp * j->ep == (long long)j->tp * j->cp,
         "--use-tp-pp-dp-mapping with experts: ETP x EP = %d x %d is not TP x CP = %d x %d; in Megatron-Core's "
         "tp-cp-ep-pp-dp order the experts' pipeline groups must be the attention's (allowed: ETP x EP = TP x CP, "
         "or the default order)", j->etp, j->ep, j->tp, j->cp);
    RULE(j->cp == 1 || j->seq_length % (2 * j->cp) == 0,
         "seq-length = %d does not split into 2 x context-parallel-size = %d chunks (the causal load balance; "
         "allowed: a multiple of %d)", j->seq_length, 2 * j->cp, 2 * j->cp);
    RULE(j->cp == 1 || j->attention == ATTN_FLASH,
         "context-parallel-size = %d needs --attention flash (context parallelism runs fused flash attention)", j->cp);
    RULE(j->cp == 1 || j->sliding_window == 0 || j->sliding_window >= j->seq_length,
         "context-parallel-size = %d with sliding-window = %d: context parallelism attends the whole sequence "
         "(allowed: sliding-window 0)", j->cp, j->sliding_window);
    int kv_local = j->num_query_groups >= j->tp ? j->num_query_groups / j->tp : 1;
    RULE(j->cp == 1 || j->cp_comm_type != CP_A2A || ((j->num_attention_heads / j->tp) % j->cp == 0 && kv_local % j->cp == 0),
         "cp-comm-type a2a scatters the heads over CP: %d query and %d key/value head(s) per TP rank do not divide by "
         "context-parallel-size = %d (allowed: p2p or all_gather, or a CP dividing both)",
         j->num_attention_heads / j->tp, kv_local, j->cp);
    RULE(j->num_gpus < gpus_per_node || j->num_gpus % gpus_per_node == 0,
         "num-gpus = %d is not a multiple of the cluster's %d GPUs per node",
         j->num_gpus, gpus_per_node);
    long long per_step = (long long)j->micro_batch_size * j->dp;
    RULE(j->global_batch_size % per_step == 0,
         "global-batch-size = %d is not divisible by micro-batch-size x DP = %d x %d = %lld",
         j->global_batch_size, j->micro_batch_size, j->dp, per_step);
    j->num_microbatches = (int)(j->global_batch_size / per_step);
    RULE(j->vpp == 1 || j->num_microbatches % j->pp == 0,
         "the interleaved schedule needs micro-batches per pipeline (%d) divisible by "
         "pipeline-model-parallel-size = %d (Megatron-LM's rule)", j->num_microbatches, j->pp);
    RULE(!j->tp_comm_overlap || j->sequence_parallel || j->tp == 1,
         "--tp-comm-overlap needs --sequence-parallel (it overlaps SP all-gather/reduce-scatter)");
    /* Megatron-LM's distributed optimizer is ZeRO-1; an explicit stage 0
     * beside it (the megatron-lm preset turns it on) is a contradiction. */
    RULE(!(j->distributed_optimizer && j->zero_stage == 0 && job_given(j, "zero-stage")),
         "zero-stage = 0 contradicts use-distributed-optimizer (Megatron-LM's ZeRO-1; --preset megatron-lm turns it "
         "on): give --no-use-distributed-optimizer for no sharding, or zero-stage 1 or 2");
    if (j->distributed_optimizer && j->zero_stage == 0)
        j->zero_stage = 1;
    RULE(j->zero_stage < 3 || (j->pp == 1 && j->vpp == 1),
         "zero-stage = 3 needs pipeline-model-parallel-size = 1 and no virtual stages (FSDP: the weights are "
         "gathered again for every micro-batch's forward and backward)");
    j->head_dim = j->hidden_size / j->num_attention_heads;
    if (j->sliding_window < 0)
        j->sliding_window = j->seq_length / 2;
    j->window = (j->sliding_window == 0 || j->sliding_window > j->seq_length) ? j->seq_length
                                                                              : j->sliding_window;
    if (j->vpp == 1 && j->ddp_bucket_size > 0) { /* interleaved plans cut one bucket per chunk */
        double P = workload_stage_params_local(j, 0);
        RULE(ceil(P / j->ddp_bucket_size) <= JOB_MAX_DP_BUCKETS,
             "ddp-bucket-size = %g cuts the first stage's %.4g parameters into %.0f buckets; allowed at most %d "
             "(a bucket of at least %.0f parameters)", j->ddp_bucket_size, P, ceil(P / j->ddp_bucket_size),
             JOB_MAX_DP_BUCKETS, ceil(P / JOB_MAX_DP_BUCKETS));
    }
    return 0;
}

int job_hardware(const job_t *job, hw_t *hw, char *err)
{
    if (hw_resolve(job->gpu, job->cluster, job->hardware, hw, err))
        return -1;
    return job_hw_overrides(job, hw, err);
}

int job_hw_overrides(const job_t *job, hw_t *hw, char *err)
{
    if (job->offload_fraction > 0 && hw->gpu.pcie_gbps <= 0) {
        snprintf(err, OPT_ERR_LEN, "--activation-offload-fraction %g needs the GPU's host link rate; the %s profile "
                 "has none (pcie_gbps 0; allowed: a built-in GPU, or a profile that gives pcie_gbps)",
                 job->offload_fraction, hw->gpu.name);
        return -1;
    }
    if (job->fp8_format && hw->gpu.peak_fp8_tflops <= 0) {
        snprintf(err, OPT_ERR_LEN, "--fp8-format %s needs FP8 tensor cores; the %s profile has none "
                 "(peak_fp8_tflops 0; allowed: a Hopper or later GPU, or a profile that gives peak_fp8_tflops)",
                 job->fp8_format == FP8_E4M3 ? "e4m3" : "hybrid", hw->gpu.name);
        return -1;
    }
    if (job->nics_per_node)
        hw->cluster.nics_per_node = job->nics_per_node;
    if (job->nic_gbit > 0)
        hw->cluster.nic_gbit = job->nic_gbit;
    if (job->oversubscription >= 1)
        hw->cluster.oversubscription = job->oversubscription;
    if (job->pod_oversubscription >= 1)
        hw->cluster.pod_oversubscription = job->pod_oversubscription;
    return hw_check(hw, err);
}
