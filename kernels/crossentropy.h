/* kernels/crossentropy.h: softmax + cross-entropy fused over the
 * vocabulary; the probabilities are never stored.
 *   logits (N, V), targets (N) with targets[n] in [0, V) or < 0 (ignored:
 *   loss 0, gradient 0); losses (N) = lse[n] - logits[n, targets[n]];
 *   lse (N) = log sum_v exp(logits[n, v]), saved for the backward.
 * Split by vocabulary (tensor parallelism, Megatron-LM's vocab-parallel
 * cross-entropy): each of P ranks holds columns [v0, v0 + V) of the
 * logits. `part` writes, per row, the slice's log sum exp and the target's
 * logit where the target falls in the slice (0 elsewhere): part (N, 2).
 * The P parts, gathered as parts (P, N, 2), `merge` into the whole row's
 * lse and loss (lse = log sum_p exp(lse_p), loss = lse - sum_p logit_p);
 * one gather of 2 N floats stands in for Megatron-LM's three all-reduces
 * (max, sum of exp, target logit), same maths.
 * Backward: dlogits (N, V) = (softmax(logits[n]) - onehot(targets[n] - v0))
 * * dloss, with dloss the scalar weight of each row's loss in the total (1/N
 * for a mean) and v0 the slice's first column (0 unsplit). dlogits may
 * alias logits (computed in place). */
#ifndef KERN_CROSSENTROPY_H
#define KERN_CROSSENTROPY_H
#include "kernels/kern_common.h"
#ifdef __cplusplus
extern "C" {
#endif

void kern_crossentropy_fwd_ref(float *losses, float *lse, const float *logits,
                               const int *targets, int N, int V);
void kern_crossentropy_part_ref(float *part, const float *logits, const int *targets, int v0,
                                int N, int V);
void kern_crossentropy_merge_ref(float *losses, float *lse, const float *parts,
                                 const int *targets, int P, int N);
void kern_crossentropy_bwd_ref(float *dlogits, const float *logits, const float *lse,
                               const int *targets, int v0, float dloss, int N, int V);

#ifdef KERN_HAVE_CUDA
int kern_crossentropy_fwd_cuda(float *losses, float *lse, const kern_bf16 *logits,
                               const int *targets, int N, int V, cudaStream_t stream);
int kern_crossentropy_part_cuda(float *part, const kern_bf16 *logits, const int *targets, int v0,
                                int N, int V, cudaStream_t stream);
int kern_crossentropy_merge_cuda(float *losses, float *lse, const float *parts,
                                 const int *targets, int P, int N, cudaStream_t stream);
int kern_crossentropy_bwd_cuda(kern_bf16 *dlogits, const kern_bf16 *logits, const float *lse,
                               const int *targets, int v0, float dloss, int N, int V,
                               cudaStream_t stream);
#endif

#ifdef __cplusplus
}
#endif
#endif
