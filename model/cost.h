/* cost: time of one op on the hardware, in seconds. GEMMs by roofline with
 * wave quantisation and a size-efficiency curve; attention by its FLOPs and
 * the flash efficiency curves; memory-bound kernels by bytes over HBM
 * bandwidth; collectives by alpha-beta per algorithm (ring, tree) over
 * the group's real placement (NVLink inside a node, rail NICs and switch
 * tiers across nodes), in the style of NCCL's tuning model. */
#ifndef MODEL_COST_H
#define MODEL_COST_H

#include "model/hw.h"
#include "model/job.h"
#include "model/layer.h"
#include "model/op.h"

/* Where a communication group's ranks sit (Megatron order: TP fastest,
 * then DP, then PP, so DP traffic stays close). */
typedef struct {
    int size;          /* ranks in the group */
    int per_node;      /* of them on one node */
    int nodes;         /* nodes it spans */
    int tier;          /* highest switch tier crossed: -1 NVLink only,
                          0 one ToR, 1 aggregation, 2 spine */
} group_layout_t;

group_layout_t cost_group_layout(const job_t *job, const hw_t *hw, group_t g);

double cost_gemm_s(const hw_t *hw, const job_t *job, double m, double n, double k, double batch);
/* The same with FP8 inputs (fp8 1: the FP8 peak, one byte per input
 * element) or not (0: cost_gemm_s). The FP8 peak's efficiency is the gemm
 * curve's fraction (hw_builtin.c says why). */
double cost_gemm_prec_s(const hw_t *hw, const job_t *job, double m, double n, double k, double batch, int fp8);
/* What a GEMM that accumulates into an fp32 output (C += A B: a weight
 * gradient into its fp32 main gradient, as Megatron-LM's gradient
 * accumulation fusion and `run` do) adds to cost_gemm_s: its epilogue reads
 * and writes 8 bytes per output element at hbm_gbps x mem_eff, of which the
 * profile's gemm_acc_exposed share is not hidden behind the product (an
 * H100, 2026-11-26: the weight-gradient GEMMs of 2048 tokens ran at 510 to
 * 560 TFLOP/s against 700 to 840 for the other two of the same layer;
 * 0.76 of that memory time explains the difference). Calibration fits the
 * share and takes it off those samples before fitting gemm_eff
 * (calib/profile.c). */
double cost_gemm_acc_s(const hw_t *hw, double m, double n, double batch);
/* The transposes a linear layer's backward GEMM (m, n, k) x batch makes
 * first on a profile with gemm_pack_ns (the CPU's reference GEMM): the
 * weight (k x n) for the input gradient (pass 1), both inputs (k x m and
 * k x n) for the weight gradient (pass 2); 0 for the forward (pass 0). */
double cost_gemm_pack_s(const hw_t *hw, int pass, double m, double n, double k, double batch);
/* The useful fraction of a GEMM's tiles: `batch` products of m x n outputs
 * covered by tiles of tile_m x tile_n (either orientation, or a half tile
 * at 0.9 of its speed, whichever fills the last wave best) over `sms` SMs.
 * cost_gemm_s divides by it; calibration divides measured efficiencies by
 * it, so the efficiency curve it fits is the one cost_gemm_s expects. */
double cost_gemm_wave_eff(int tile_m, int tile_n, int sms, double m, double n, double batch);
/* What cost_gemm_s divides by: the wave model's fraction, or for an
 * output narrower than half the profile's smaller tile side (a router's
 * m x E) a narrow tile with K split over the idle SMs, whichever is
 * higher (model/cost.c narrow_eff). */
double cost_gemm_fill(const hw_gpu_t *g, double m, double n, double k, double batch);
/* The useful fraction of a flash attention kernel's SM time: bh heads
 * (the grid's: cost_attn_grid_heads) of s queries, each seeing at most w keys (w >= s:
 * causal), cut into blocks of `block` query rows (forward) or key rows
 * (backward), one thread block each, launched in grid order (block index
 * fastest, heaviest tiles first in both passes, as megasim's kernels
 * launch them (kernels/attention_mma.cuh): the forward's last query rows,
 * the backward's first keys), each to the SM that frees first, one at a
 * time per SM. Causal tiles differ in
 * work, so the last wave's tail depends on their order, not just their
 * count. The efficiency curves are fitted to samples divided by it
 * (calib/). 1 when the shape is unknown (s <= 0) or block is 0 (no wave
 * model: the profile's curves include the grid's fill). */
double cost_attn_wave_eff(int block, int sms, double bh, double s, double w, int bwd);
/* The slots cost_attn_wave_eff's `sms` stands for: sm_count x the pass's
 * resident blocks per SM (attn_slots_q/k; 0 or 1: one). Two resident
 * blocks are taken as two servers of half an SM each: a block alone on its
 * SM in the last wave runs no faster than beside another (a 4-warp block
 * leaves the tensor cores half fed, which is why the kernel runs two). */
int cost_attn_slots(const hw_gpu_t *g, int bwd);
/* The heads a flash kernel's grid runs over, for its waves: sequences x
 * query heads (bh), in both passes of FlashAttention-2 and of megasim's
 * kernels (kern_attention_*_cuda: with GQA the backward gives each query
 * head its blocks and sums the group's dK, dV after); only
 * FlashAttention-1's backward (v1) gives one block all query heads of a
 * KV group, so that with GQA (group > 1) its blocks are `group` times
 * fewer and larger. Only calibrated profiles (attn_block_q/k > 0) use the
 * wave model, and calibrate times megasim's kernels. */
double cost_attn_grid_heads(double bh, double group, int bwd, int v1);
/* A flash attention op: its FLOPs at the forward or backward curve
 * (FlashAttention-1, attn_v1, at flash1_rel of it) plus its dropout draws
 * at flash_fwd/bwd_gdraws, over its wave efficiency; GQA's backward on a
 * GPU adds the memory pass that sums a group's dK, dV partials (the
 * kernel's gap again, and 8 + 4 / group bytes per query head's element). */
double cost_attn_s(const hw_t *hw, const op_t *op);
/* That memory pass: GQA's flash backward on a GPU (FlashAttention-2's and
 * megasim's, a block per query head) writes each query head's dK, dV in
 * fp32 and a second kernel adds a group's, reading 2 x 4 bytes per query
 * head's element and writing 2 x 2 per KV head's, at cost_elem_s. 0 for
 * MHA, the forward, FlashAttention-1's grouped backward, and on a CPU
 * (attn_block_k 1: the reference kernels add into dK, dV in place). */
double cost_attn_dkv_sum_s(const hw_t *hw, const op_t *op);
double cost_elem_s(const hw_t *hw, double bytes);
/* A memory-bound kernel that also computes: the longer of its bytes at
 * mem_eff and its elements at the math rate (billions per second). */
double cost_elem_math_s(const hw_t *hw, double bytes, double elems, double gelems_per_s);
double cost_coll_s(const hw_t *hw, coll_t c, double bytes, const group_layout_t *g);
double cost_p2p_s(const hw_t *hw, double bytes, const group_layout_t *g);
/* Optimizer step over `params` local parameters (memory bound; the ZeRO
 * shard when sharded), with FP8 the cast of every local weight (the
 * shard's DP share). */
double cost_optimizer_s(const hw_t *hw, const job_t *job, double params);
/* Gradient clipping's sum of squares over every rank before the optimizer
 * (Megatron-LM's clip_grad_norm all-reduce; megasim run's world sum): one
 * 8-byte all-reduce over all GPUs. Every rank waits there for the last. */
double cost_grad_norm_sync_s(const hw_t *hw, const job_t *job);

/* Any op; collectives and transfers use the job's layout of their group.
 * Under --enable-cuda-graph (job cuda_graph) each of its kernels is a node
 * of its pass's graph, at graph_gap_us instead of kernel_gap_us (cost.c
 * graph_saving_s; the embedding's and output layer's few kernels keep
 * their launch gap). */
double cost_op_s(const hw_t *hw, const job_t *job, const op_t *op);

/* Peak FLOP/s MFU counts against: the job's precision (bf16 or tf32), or
 * FP8's under --mfu-peak fp8. */
double cost_peak_flops(const hw_t *hw, const job_t *job);

/* ---- chunk-steps (model/cost_chunk.c) --------------------------------- */

/* One layer's pass (model/layer.h's pass_t) on one micro-batch: kernels on
 * the compute stream (the GPU's slowdown beside overlapped collectives
 * included) and the TP communication left on the critical path. */
typedef struct {
    double compute_s, exposed_s;
    double moe_load_s; /* of their sum, the ops that grow with the busiest expert rank's tokens */
    double a2a_s;      /* of their sum, the experts' token dispatch and combine (the collectives over EP
                          and ETP, or ETP x EP for the allgather dispatcher): compare's all-to-all class */
} cost_pass_t;
cost_pass_t cost_pass(const hw_t *hw, const job_t *job, pass_t pass);

/* The work of one chunk-step outside the transformer layers (chunk -1: the
 * whole stage): the embedding on the first stage's first chunk, the output
 * layer and loss on the last stage's last chunk, with their TP collectives. */
void cost_chunk_extra(const hw_t *hw, const job_t *job, int stage, int chunk, double *fwd_s, double *bwd_s);

/* One model chunk's forward and backward on one micro-batch on a stage,
 * split into compute (recomputation, embedding and output layer included)
 * and exposed TP communication. The simulator prices its FWD/BWD ops with
 * this and the closed form sums the same parts, so both share one cost. */
typedef struct {
    double fwd_s, fwd_tp_s, bwd_s, bwd_tp_s;
    double fwd_moe_s, bwd_moe_s; /* of those, what the busiest expert rank's extra tokens scale (model/moe.h) */
    double fwd_a2a_s, bwd_a2a_s; /* of those, the experts' dispatch and combine (cost_pass_t's a2a_s) */
} cost_chunk_t;
void cost_chunk_times(const job_t *job, const hw_t *hw, int stage, int chunk, cost_chunk_t *ct);
/* One layer's three passes (forward, backward, recomputation), a dense
 * layer's (moe 0) or an MoE layer's (moe 1, model/moe.h): the same on
 * every stage, so priced once. */
typedef struct {
    cost_pass_t fwd, bwd, rc;
} cost_layer_t;
void cost_layer(const hw_t *hw, const job_t *job, int moe, cost_layer_t *c);
/* `layers` layers, moe_layers of them MoE layers (c[1]; c[0] the dense
 * ones), `recomputed` of them rerun in the backward, on one micro-batch:
 * a chunk's (or a stage's) times without the embedding and output layer. */
void cost_layers(const cost_layer_t c[2], double layers, double recomputed, double moe_layers, cost_chunk_t *ct);

#endif
