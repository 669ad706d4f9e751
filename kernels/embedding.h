/* kernels/embedding.h: token + position embedding, forward and backward.
 *   out (B, T, C) = wte[tokens[b, t] - v0] + wpe[t]
 * tokens (B, T) int; wte (V, C) holds rows [v0, v0 + V) of the whole
 * table (all of it: v0 = 0; a tensor-parallel rank's slice of the
 * vocabulary, Megatron-LM's VocabParallelEmbedding: a token outside the
 * slice embeds as 0, the TP sum adds the slices); wpe (maxT, C) with
 * T <= maxT. Backward accumulates (+=) into fp32 dwte (V, C), rows of the
 * slice only, and dwpe (maxT, C). wpe (and dwpe) NULL: no position table
 * (rotary or no positions, or added by another rank). */
#ifndef KERN_EMBEDDING_H
#define KERN_EMBEDDING_H
#include "kernels/kern_common.h"
#ifdef __cplusplus
extern "C" {
#endif

void kern_embedding_fwd_ref(float *out, const int *tokens, const float *wte,
                            const float *wpe, int v0, int V, int B, int T, int C);
void kern_embedding_bwd_ref(float *dwte, float *dwpe, const float *dout,
                            const int *tokens, int v0, int V, int B, int T, int C);

#ifdef KERN_HAVE_CUDA
int kern_embedding_fwd_cuda(kern_bf16 *out, const int *tokens, const kern_bf16 *wte,
                            const kern_bf16 *wpe, int v0, int V, int B, int T, int C,
                            cudaStream_t stream);
/* dwte rows are summed with fp32 atomics (order not deterministic);
 * dwpe is summed over B in a fixed order. */
int kern_embedding_bwd_cuda(float *dwte, float *dwpe, const kern_bf16 *dout,
                            const int *tokens, int v0, int V, int B, int T, int C,
                            cudaStream_t stream);
#endif

#ifdef __cplusplus
}
#endif
#endif
