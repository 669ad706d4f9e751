/* job: a training job = model shape + parallel plan + MegaScale technique
 * switches + hardware choice. Read from JSON experiment files and from
 * command-line flags (Megatron-LM spelling where Megatron has one), flags
 * overriding files, then validated and completed with derived quantities
 * (DP, micro-batches, virtual stages). */
#ifndef MODEL_JOB_H
#define MODEL_JOB_H

#include "model/hw.h"
#include "model/opts.h"

typedef enum { RECOMPUTE_NONE, RECOMPUTE_FULL, RECOMPUTE_SELECTIVE } recompute_t;
/* Megatron-LM's --recompute-method under full recomputation: UNIFORM
 * checkpoints the input of every group of recompute-num-layers layers of a
 * chunk and recomputes them all; BLOCK recomputes only the first
 * recompute-num-layers layers of each chunk and keeps the others'
 * activations. */
typedef enum { RECOMPUTE_UNIFORM, RECOMPUTE_BLOCK } recompute_method_t;
typedef enum { OPTIM_ADAM, OPTIM_LAMB } optim_t;
/* FLASH: FlashAttention-2 style; FLASH1: FlashAttention-1's work partition
 * (one thread block per head, keys and values in the outer loop), the
 * kernel of Megatron-LM's --use-flash-attn in 2023; UNFUSED: GEMM, masked
 * softmax, GEMM. */
typedef enum { ATTN_FLASH, ATTN_UNFUSED, ATTN_FLASH1 } attn_t;
/* Who runs the flash attention on run's GPU path (--attention-backend). */
typedef enum { ATTN_BACKEND_MEGASIM, ATTN_BACKEND_CUDNN } attn_backend_t;
/* The flash kinds: tiled with online softmax, no T x T scores kept or
 * recomputed, the log-sum-exp saved for the backward. */
static inline int attn_is_flash(int attn) { return attn != ATTN_UNFUSED; }
typedef enum { PRESET_NONE, PRESET_MEGATRON, PRESET_MEGASCALE } preset_t;
/* Megatron-LM's --position-embedding-type and --normalization. */
typedef enum { POS_LEARNED, POS_ROPE, POS_NONE } pos_emb_t;
typedef enum { NORM_LAYERNORM, NORM_RMSNORM } norm_t;
typedef enum { PIPE_1F1B, PIPE_GPIPE } pipe_sched_t;
/* Transformer Engine's --fp8-format: none; E4M3 everywhere; hybrid (E4M3
 * forward, E5M2 gradients). MFU against the bf16 peak unless --mfu-peak fp8. */
typedef enum { FP8_NONE, FP8_E4M3, FP8_HYBRID } fp8_t;
typedef enum { MFU_PEAK_BF16, MFU_PEAK_FP8 } mfu_peak_t;
/* Megatron-Core's --cp-comm-type: a ring passing each KV block on while
 * the block before computes; all-gather of K and V, then local attention
 * (Llama 3's); all-to-all (Ulysses: heads scattered, the sequence gathered). */
typedef enum { CP_P2P, CP_ALLGATHER, CP_A2A } cp_comm_t;
/* Megatron-Core's --moe-token-dispatcher-type. */
typedef enum { MOE_ALLGATHER, MOE_ALLTOALL } moe_dispatch_t;
/* --moe-router-load-balancing-type, in its choices' order. */
typedef enum { MOE_LB_AUX, MOE_LB_SEQ_AUX, MOE_LB_SINKHORN, MOE_LB_NONE } moe_lb_t;

#define JOB_MAX_OPTS 96 /* options in job_opts, at most */

typedef struct {
    /* model */
    int num_layers, hidden_size, ffn_hidden_size, num_attention_heads;
    int num_query_groups, seq_length, padded_vocab_size;
    int global_batch_size, micro_batch_size;
    double attention_dropout, hidden_dropout; /* probabilities; 0 = no dropout pass, no masks */
    int swiglu;          /* gated MLP: FC1 gives gate and up (2 ffn), SiLU(gate) x up feeds FC2 */
    int untie_embeddings;/* the output layer has its own weights (no tied-gradient sync) */
    int position_embedding, normalization, disable_bias_linear; /* pos_emb_t, norm_t; no linear biases */
    int add_qkv_bias;    /* with disable_bias_linear: the QKV layer keeps its bias (Qwen2's) */
    double rotary_base;  /* RoPE's theta base (numerics only: real/) */
    /* parallel plan */
    int tp, pp, layers_per_vstage, num_gpus;
    int cp, cp_comm_type;      /* --context-parallel-size, --cp-comm-type (cp_comm_t) */
    int vstages_per_rank;      /* --num-virtual-stages-per-pipeline-rank (0: from layers_per_vstage) */
    int first_stage_layers, last_stage_layers; /* --decoder-first/last-pipeline-num-layers (0: even) */
    int account_embedding, account_loss; /* --account-for-embedding/loss-in-pipeline-split (model/split.h) */
    int sequence_parallel, recompute, distributed_optimizer, zero_stage;
    int recompute_method, recompute_num_layers;
    int overlap_grad_reduce, overlap_param_gather, tp_comm_overlap;
    double ddp_bucket_size;    /* parameters per DP bucket; 0 = Megatron-LM's max(4e7, 1e6 DP) */
    int grads_fp32, bf16, pipeline_schedule;
    int fp8_format, fp8_recipe, mfu_peak; /* fp8_t; the recipe (delayed only); mfu_peak_t */
    double offload_fraction;   /* --activation-offload-fraction: saved activations sent to host, token-wise */
    /* mixture of experts (model/moe.h; num_experts 0: dense) */
    int num_experts, moe_topk, moe_ffn_hidden_size, moe_shared_ffn, moe_layer_freq, moe_dense_first;
    int moe_shared_gate;       /* the shared expert's output scaled by a sigmoid gate (h -> 1) */
    int ep, etp;               /* expert model- and tensor-parallel sizes (etp 0: TP's) */
    int moe_dispatcher, moe_grouped_gemm, moe_pad_to_capacity, moe_lb_type, moe_permute_fusion;
    double moe_capacity_factor; /* 0: dropless */
    double moe_aux_coeff;      /* --moe-aux-loss-coeff: the auxiliary load-balancing loss's weight (0: none) */
    double moe_load_cv;        /* the experts' token loads' coefficient of variation in a micro-batch (0: even) */
    /* MegaScale techniques */
    int parallel_block, sliding_window, optimizer, pp_comm_overlap;
    int tp_pp_dp_mapping; /* --use-tp-pp-dp-mapping: stages before DP replicas in the rank order (layout.h) */
    int cuda_graph;            /* --enable-cuda-graph: each forward and backward pass launched as a CUDA graph */
    int attention, fused_elementwise, async_data_loader, preset;
    int attention_backend; /* attn_backend_t */
    /* hardware */
    char gpu[40], cluster[40], hardware[256];
    int nics_per_node;         /* 0 = the cluster profile's */
    double nic_gbit, oversubscription, pod_oversubscription; /* 0 = the cluster profile's */

    /* derived by job_finalize (not options) */
    int dp;              /* data-parallel size = num_gpus / (tp * cp * pp): the batch's split */
    int dp_cp;           /* dp x cp: the ranks holding the same weights (gradient reduction, ZeRO shards) */
    int edp;             /* expert data-parallel size: TP x CP x DP / (ETP x EP), the experts' DP x CP */
    int vpp;             /* model chunks per pipeline stage (1 = not interleaved) */
    int num_microbatches;/* per pipeline per iteration = B / (b * dp) */
    int head_dim;        /* hidden / heads */
    int window;          /* effective attention window in tokens (= seq when off) */
    double recompute_fraction; /* of the layers whose recompute pass runs: 1, or
                                  recompute-num-layers / layers per chunk (block) */
    char given[JOB_MAX_OPTS]; /* job_parse: given[i] when a file or flag set job_opts' option i (a preset
                                 does not); read with job_given() */
    char numerics_flag[48]; /* job_parse: the first accepted Megatron-LM flag that changes the training's maths
                               (initialisation, loss scaling, data, schedules by samples), which the cost
                               model rightly ignores and `megasim run` must refuse; "" when none */
} job_t;

extern const opt_table job_opts;

/* Bytes per element of the job's datatypes, the one place they are
 * decided: weights and activations (bf16 2, fp32 4) and gradients as
 * reduced and stored (fp32 with --accumulate-allreduce-grads-in-fp32, else
 * the weights' type: never narrower than the weights). */
/* The weights' initial standard deviation, Megatron-LM's --init-method-std
 * default, which megasim run keeps (the residual branches' output layers
 * divide it by sqrt(2 L)): real/gpt_params.c, calibrate's GeLU inputs. */
#define JOB_INIT_METHOD_STD 0.02f

static inline double job_weight_bytes(const job_t *j) { return j->bf16 ? 2 : 4; }
static inline double job_grad_bytes(const job_t *j) { return j->grads_fp32 ? 4 : job_weight_bytes(j); }
/* Optimizer state per parameter: Adam's and LAMB's fp32 m and v, plus an
 * fp32 master copy under mixed precision. */
static inline double job_optim_bytes(const job_t *j) { return 8 + (j->bf16 ? 4 : 0); }
/* Tokens of one micro-batch on one rank: context parallelism splits the
 * sequence over CP ranks. */
static inline double job_tokens_local(const job_t *j)
{
    return (double)j->seq_length * j->micro_batch_size / (j->cp > 0 ? j->cp : 1);
}

/* A cross-field rule of job_finalize (and model/split.c): when cond fails,
 * one message into err and return -1. */
#define JOB_RULE(cond, ...)                               \
    do {                                                  \
        if (!(cond)) {                                    \
            snprintf(err, OPT_ERR_LEN, __VA_ARGS__);      \
            return -1;                                    \
        }                                                 \
    } while (0)

/* Whether a job file or flag set the option NAME (flag spelling), as
 * opposed to its default or the preset's bundle. */
int job_given(const job_t *job, const char *name);

/* At most this many DP buckets per stage (--ddp-bucket-size). */
#define JOB_MAX_DP_BUCKETS 4096


/* Fills *job from defaults, the preset, the files given as positional
 * arguments or --config, then the flags. Positional .json arguments are
 * files. Non-job options listed in `extra` (e.g. --json) are set in
 * extra_obj. Returns 0, or -1 with one message in err. */
int job_parse(job_t *job, int argc, char **argv, const opt_table *extra,
              void *extra_obj, char *err);

/* What job_parse_over starts from instead of the defaults: a job object
 * as recorded in a result file's configuration (every option's value, no
 * preset bundle applied) and, optionally, the subcommand's own recorded
 * options less those in extra_skip (a NULL-terminated list of JSON keys).
 * The origins name where each came from in error messages. */
typedef struct {
    const struct cJSON *job, *extra;
    const char *const *extra_skip;
    const char *job_origin, *extra_origin;
} job_base_t;

/* job_parse over `base` (NULL: the defaults, as job_parse): then files,
 * then flags, as usual. A preset named by a file or flag applies its
 * bundle over the base; none re-applies the recorded preset's. */
int job_parse_over(job_t *job, const job_base_t *base, int argc, char **argv, const opt_table *extra,
                   void *extra_obj, char *err);


/* Fits the parallel plan's defaults to what the user gave, so that a value
 * the user did not give (no file or flag set it) never makes the command
 * fail: a default TP that does not split the heads, groups, MLP, vocabulary
 * or GPUs falls to the largest that does; a default PP that does not
 * split the layers or GPUs, likewise; a default global batch that is not a
 * whole number of micro-batch x DP rises to the next one; the default
 * interleaving is dropped (0: one chunk per stage) where the plan cannot
 * interleave. A given value is never touched: its rule then fails in
 * job_finalize, naming it. Before job_finalize; returns the number of
 * adjustments, each described in notes ("NAME FROM -> TO (WHY)", "; "). */
int job_fit_defaults(job_t *job, char *notes, size_t len);

/* The plan's headline options that took their defaults (not given), as
 * "name value, ..." ("" when every one was given). */
void job_defaults_text(const job_t *job, char *buf, size_t len);

/* Checks every cross-field rule and fills the derived fields. Needs the
 * cluster's GPUs per node for the node-count rule. */
int job_finalize(job_t *job, int gpus_per_node, char *err);

/* Sets the technique bundle of a preset. */
void job_apply_preset(job_t *job, preset_t p);

/* Resolves --gpu/--cluster/--hardware and applies the cluster overrides
 * (--nics-per-node, --nic-gbit, --oversubscription) into *hw. */
int job_hardware(const job_t *job, hw_t *hw, char *err);

/* The job's cluster overrides (--nics-per-node, --nic-gbit,
 * --oversubscription) applied into a resolved *hw, then hw_check. */
int job_hw_overrides(const job_t *job, hw_t *hw, char *err);

/* A full default job: MegaScale 175B on 12,288 GPUs, TP8 PP8 VPP6, batch
 * 6144, --preset megascale (finalize still needed). */
void job_default(job_t *job);

#endif
