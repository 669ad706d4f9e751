/* layer: the ops of one transformer layer for one micro-batch on one GPU,
 * forward or backward, as Megatron-LM (or MegaScale) issues them: GEMMs
 * with their TP-split shapes, attention (flash or GEMM-softmax-GEMM),
 * memory-bound kernels (fused or not), and the TP/SP collectives with the
 * way each meets compute. Every technique switch changes this list: that is
 * how it moves both the estimate and the simulation. */
#ifndef MODEL_LAYER_H
#define MODEL_LAYER_H

#include "model/job.h"
#include "model/op.h"

#define LAYER_MAX_OPS 48

typedef enum { PASS_FWD, PASS_BWD, PASS_RECOMPUTE } pass_t;

/* Fills ops[] and returns how many (at most LAYER_MAX_OPS). PASS_RECOMPUTE
 * is the extra forward work that the backward repeats (full: the layer;
 * selective: the attention core; none: nothing). */
int layer_ops(const job_t *job, pass_t pass, op_t *ops);
/* The same for a dense layer (moe 0) or an MoE layer (moe 1: its MLP is
 * the router, the experts and the shared expert, model/moe.h). */
int layer_ops_of(const job_t *job, pass_t pass, int moe, op_t *ops);

/* The unfused attention's ops alone (no dropout): bh sequences x heads of
 * s tokens and head size d, wb bytes per element; what calibration takes
 * off its unfused samples to fit the softmax rates (calib/profile.c). */
int layer_unfused_attention_ops(double bh, double s, double d, double wb, int bwd, op_t *ops);

/* Bytes of the activation passed between pipeline stages per micro-batch
 * on one GPU (split by TP with sequence parallelism, Megatron's scatter-
 * gather optimisation otherwise). */
double layer_p2p_bytes(const job_t *job);

#endif
