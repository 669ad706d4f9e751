/* workload: what a job asks of the hardware, independent of time:
 * parameters, FLOPs per iteration (model and hardware), and memory per GPU
 * at its peak with a breakdown. Formulas: Narayanan et al. SC21 (FLOPs),
 * Korthikanti et al. 2022 (activations), Rajbhandari et al. 2020 (ZeRO).
 * FLOPs reach ~1e20 per iteration at the paper's scales: all in double. */
#ifndef MODEL_WORKLOAD_H
#define MODEL_WORKLOAD_H

#include "model/hw.h"
#include "model/job.h"

typedef struct {
    double params_total;       /* whole model (tied embeddings counted once) */
    double params_active;      /* those one token uses: with MoE its top-k experts only (= total when dense) */
    double params_layer;       /* one transformer layer */
    double model_flops_per_token;    /* Megatron convention, no recompute */
    double model_flops_per_iter;
    double hw_flops_per_iter;  /* with recomputation (HFU) */
    double attn_window_factor; /* attended keys with window / without (causal) */
} workload_t;

typedef struct {
    double weights_bytes, grads_bytes, optimizer_bytes;
    double activations_bytes, workspace_bytes, comm_buffers_bytes, runtime_bytes;
    double total_bytes, capacity_bytes;
    double host_offload_bytes;  /* activations offloaded to host memory (not in total_bytes) */
    double inflight_microbatches; /* activations held on the peak stage */
    int peak_stage;
    int fits;
} memory_t;

void workload_compute(const job_t *job, workload_t *w);

/* Parameters held by one GPU of pipeline stage `stage` (TP-split). */
double workload_stage_params_local(const job_t *job, int stage);

/* Of those, the experts' (model/moe.h): reduced and sharded over EDP, the
 * rest over DP x CP. 0 for a dense model. */
double workload_stage_expert_params_local(const job_t *job, int stage);

/* Activation bytes of one layer for one micro-batch on one GPU. */
double workload_layer_activation_bytes(const job_t *job);


/* Chunk-micro-batches whose activations stage `stage` holds at its peak. */
double workload_inflight_chunks(const job_t *job, int stage);

void workload_memory(const job_t *job, const hw_t *hw, memory_t *m);

/* DP collectives are issued in pieces: one per model chunk when
 * interleaved (MegaScale's per-chunk ZeRO-2), else buckets of
 * --ddp-bucket-size parameters (Megatron-LM's default: max(40M, 1M x DP)). */
int workload_dp_pieces(const job_t *job, double params_local);

/* Sum over a causal window: keys attended by s queries (window w <= s). */
double workload_causal_keys(double s, double w);

/* FC1's output width (whole, before TP): ffn, or gate and up (2 ffn) with
 * SwiGLU. */
double workload_fc1_width(const job_t *j);

#endif
