/* kernels/crossentropy.h: softmax + cross-entropy fused over the
 * vocabulary; the probabilities are never stored.
 *   logits (N, V), targets (N) with targets[n] in [0, V) or < 0 (ignored:
 *   loss 0, gradient 0); losses (N) = lse[n] - logits[n, targets[n]];
 *   lse (N) = log sum_v exp(logits[n, v]), saved for the backward.
 * Backward: dlogits (N, V) = (softmax(logits[n]) - onehot(targets[n])) * dloss,
 * with dloss the scalar weight of each row's loss in the total (1/N for a
 * mean). dlogits may alias logits (computed in place). */
#ifndef KERN_CROSSENTROPY_H
#define KERN_CROSSENTROPY_H
#include "kernels/kern_common.h"
#ifdef __cplusplus
extern "C" {
#endif

void kern_crossentropy_fwd_ref(float *losses, float *lse, const float *logits,
                               const int *targets, int N, int V);
void kern_crossentropy_bwd_ref(float *dlogits, const float *logits, const float *lse,
                               const int *targets, float dloss, int N, int V);

#ifdef KERN_HAVE_CUDA
int kern_crossentropy_fwd_cuda(float *losses, float *lse, const kern_bf16 *logits,
                               const int *targets, int N, int V, cudaStream_t stream);
int kern_crossentropy_bwd_cuda(kern_bf16 *dlogits, const kern_bf16 *logits, const float *lse,
                               const int *targets, float dloss, int N, int V,
                               cudaStream_t stream);
#endif

#ifdef __cplusplus
}
#endif
#endif
