/* split: which transformer layers each pipeline stage and model chunk
 * holds, the one place every executor and model asks. Megatron-Core's
 * rules (megatron/core/transformer/transformer_block.py and
 * training/arguments.py, 2025):
 *  - even: num-layers / (PP x chunks) in every chunk;
 *  - --decoder-first-pipeline-num-layers F / --decoder-last-pipeline-num-
 *    layers L: the first (last) stage holds F (L) layers, the stages
 *    between share the rest evenly; with chunks, each stage's layers are
 *    split evenly over its chunks (chunks then come from
 *    --num-virtual-stages-per-pipeline-rank, Megatron's rule);
 *  - --account-for-embedding-in-pipeline-split / --account-for-loss-in-
 *    pipeline-split: the embedding (the loss and output layer) counts as a
 *    layer in the even split, so the first stage's first chunk (the last
 *    stage's last chunk) holds one transformer layer fewer, possibly none
 *    (Llama 3 405B: 126 layers + 2 on PP 16, one per chunk).
 * Layers are numbered in model order: chunk 0 of every stage in stage
 * order, then chunk 1, and so on (Megatron's interleaving). */
#ifndef MODEL_SPLIT_H
#define MODEL_SPLIT_H

#include "model/job.h"

/* Checks the split options against num-layers, PP and the chunks, and sets
 * job->vpp. Called by job_finalize. Returns 0, or -1 with one message in
 * err naming the rule. */
int split_finalize(job_t *job, char *err);

/* Whether PP p can split this job's layers under its split options (for
 * the default PP that fits). */
int split_pp_fits(const job_t *job, int p);

/* Layers per stage before chunking, given PP p (0 when p does not split
 * them): what the interleaving's layers-per-chunk must divide. */
int split_stage_layers_for(const job_t *job, int p, int stage);

/* Transformer layers in stage `stage` (all its chunks), in its chunk
 * `chunk`, and the model-order index of that chunk's first layer. */
int split_stage_layers(const job_t *job, int stage);
int split_chunk_layers(const job_t *job, int stage, int chunk);
int split_layer_offset(const job_t *job, int stage, int chunk);

/* The chunk's layers whose recomputation pass runs in the backward: all
 * of them, or under --recompute-method block the first
 * recompute-num-layers. Summed over a stage's chunks by the second. */
int split_chunk_recomputed(const job_t *job, int stage, int chunk);
int split_stage_recomputed(const job_t *job, int stage);

/* The stages' kinds, in stage order: the first, a middle one (stage 1: the
 * middle ones hold the same layers), the last, each with the stages it
 * stands for in count. Returns how many kinds (1 at PP 1, 2 at PP 2, else
 * 3): what the memory model, the closed form and the rules visit instead of
 * every stage. */
int split_kinds(const job_t *job, int stage[3], int count[3]);

/* Whether the layers are split unevenly (any of the four options on). */
int split_uneven(const job_t *job);

#endif
