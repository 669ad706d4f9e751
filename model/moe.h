/* moe: mixture of experts, Megatron-Core's (--num-experts and the --moe-*
 * and --expert-* flags): which layers are MoE layers, the experts'
 * parameters (total and active), the folded expert groups and the rules.
 * An MoE layer keeps the attention of a dense one and replaces its MLP by
 * a router (h x E, replicated), E experts (each an MLP of
 * moe-ffn-hidden-size, SwiGLU or not as the model), the top-k of them per
 * token, and an optional shared expert every token passes through.
 * Folding (MoE Parallel Folding): the experts' groups come from the same
 * ranks as the attention's, TP x CP x DP = ETP x EP x EDP on each pipeline
 * stage, in the order rank = etp_i + ETP (ep_i + EP (edp_i + EDP stage)). */
#ifndef MODEL_MOE_H
#define MODEL_MOE_H

#include "model/job.h"

#include <stdint.h>

/* The rules (EP divides the experts, top-k at most the experts, ETP x EP
 * divides TP x CP x DP, SP under TP, capacity and padding) and the derived
 * fields (etp, edp, the expert MLP's size). Called by job_finalize. */
int moe_finalize(job_t *job, char *err);

/* How many of the model's layers first .. first + n - 1 (model order,
 * 0-based) are MoE layers: every moe-layer-freq-th from layer 0, less the
 * first moe-dense-first-layers. */
int moe_layers_in(const job_t *job, int first, int n);
/* The MoE layers of a stage's chunk, and of the whole stage. */
int moe_chunk_layers(const job_t *job, int stage, int chunk);
int moe_stage_layers(const job_t *job, int stage);

/* Parameters of one MoE layer's MLP part: all experts, the router and the
 * shared expert (total), or those one token uses (active: top-k experts,
 * the router, the shared expert); with the model's linear biases, or the
 * GEMMs' weights alone (biases 0: what the FLOPs count). */
double moe_mlp_params(const job_t *job, int active, int biases);

/* One MLP of hidden size f (FC1, gate and up under SwiGLU, and FC2), with
 * the model's linear biases or not: a dense layer's, an expert's, the
 * shared expert's. */
double moe_mlp_of(const job_t *job, double f, int biases);

/* The parameters one rank holds of one MoE layer's experts (E / EP of
 * them, each split by ETP). */
double moe_expert_params_local(const job_t *job);

/* Token-expert assignments an expert rank computes per micro-batch and
 * MoE layer: its SP-local tokens' top-k share, gathered over ETP, at the
 * even split (dropless: the balanced router's expectation), or every
 * expert's capacity when padded. */
double moe_rows_local(const job_t *job);

/* Routing imbalance (--moe-expert-load-cv c): each expert's tokens in a
 * micro-batch vary independently around the even share with coefficient of
 * variation c, so an EP rank's (E / EP experts) with c / sqrt(E / EP), and
 * the busiest of the EP ranks sets the pace of the dispatch, the experts
 * and the combine. The closed form takes its expected load over the even
 * one, 1 + c / sqrt(E / EP) E[max of EP standard normals] (by quadrature);
 * the simulator draws it per stage, chunk, micro-batch and MoE layer of
 * the chunk (each layer has its own router, and its all-to-alls wait for
 * its own busiest rank; the backward meets the forward's routing), seeded:
 * the same on every rank. 1 when even. Under a capacity factor the
 * busiest rank takes at most its capacity (the rest dropped; the closed
 * form caps the expectation, a bound from above) and padded experts always
 * compute it (1 here: moe_rows_local holds the capacity). */
double moe_load_factor(const job_t *job);
/* Whether a job has an imbalance to price: experts, a load CV, and more
 * than one EP rank (one holds every token: its load is the even one). */
int moe_imbalanced(const job_t *job);
double moe_load_draw(const job_t *job, uint64_t seed, int stage, int chunk, long mb, int layer);
/* A chunk's forward or backward over its MoE layers: the mean of their
 * draws (the time that scales with the busiest rank's load is the same in
 * each MoE layer); 1 without MoE layers or imbalance. */
double moe_chunk_load(const job_t *job, uint64_t seed, int stage, int chunk, long mb);

#endif
