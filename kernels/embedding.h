/* kernels/embedding.h: token + position embedding, forward and backward.
 *   out (B, T, C) = wte[tokens[b, t]] + wpe[t]
 * tokens (B, T) int in [0, V); wte (V, C); wpe (maxT, C) with T <= maxT.
 * Backward accumulates (+=) into fp32 dwte (V, C) and dwpe (maxT, C).
 * wpe (and dwpe) NULL: no position table (rotary or no positions). */
#ifndef KERN_EMBEDDING_H
#define KERN_EMBEDDING_H
#include "kernels/kern_common.h"
#ifdef __cplusplus
extern "C" {
#endif

void kern_embedding_fwd_ref(float *out, const int *tokens, const float *wte,
                            const float *wpe, int B, int T, int C);
void kern_embedding_bwd_ref(float *dwte, float *dwpe, const float *dout,
                            const int *tokens, int B, int T, int C);

#ifdef KERN_HAVE_CUDA
int kern_embedding_fwd_cuda(kern_bf16 *out, const int *tokens, const kern_bf16 *wte,
                            const kern_bf16 *wpe, int B, int T, int C, cudaStream_t stream);
/* dwte rows are summed with fp32 atomics (order not deterministic);
 * dwpe is summed over B in a fixed order. */
int kern_embedding_bwd_cuda(float *dwte, float *dwpe, const kern_bf16 *dout,
                            const int *tokens, int B, int T, int C, cudaStream_t stream);
#endif

#ifdef __cplusplus
}
#endif
#endif
