/* kernels/layernorm.h: LayerNorm fused with the residual add that precedes
 * it in a pre-LN transformer block.
 *   residual (N, C) = inp + skip            (skip may be NULL: no add)
 *   out      (N, C) = (residual - mean) * rstd * w + b
 *   mean, rstd (N)  saved for the backward; N = B * T.
 * Backward: the add passes its gradient unchanged to both inputs, so the
 * fused backward accumulates the LayerNorm input gradient into the residual
 * stream gradient: dres (N, C) += dLN/dx. dw, db (C) are fp32, +=.
 * xln is the LayerNorm input: the residual when skip was given, else inp.
 * drop (may be NULL: none) drops skip before the add, as the residual add
 * of a dropped branch (Megatron-LM's bias-dropout-add fused with the norm
 * that follows it): residual = inp + skip * mult, element (n, c) at index
 * drop->base + n C + c (kernels/dropout.h), its 1-byte kept mask to mask
 * (may be NULL). Only with skip.
 * RMSNorm (--normalization RMSNorm) is the same without centring or bias:
 *   out = residual * rstd * w,  rstd = 1 / sqrt(mean(residual^2) + eps),
 *   dres += rstd * (dout w - xhat mean(dout w xhat)),  xhat = residual * rstd;
 * dw (C) +=. */
#ifndef KERN_LAYERNORM_H
#define KERN_LAYERNORM_H
#include "kernels/kern_common.h"
#include "kernels/dropout.h"
#ifdef __cplusplus
extern "C" {
#endif

#define KERN_LN_EPS 1e-5f

void kern_layernorm_fwd_ref(float *residual, float *out, float *mean, float *rstd,
                            const float *inp, const float *skip, const kern_dropout *drop, uint8_t *mask,
                            const float *w, const float *b, int N, int C);
void kern_layernorm_bwd_ref(float *dres, float *dw, float *db, const float *dout,
                            const float *xln, const float *w, const float *mean,
                            const float *rstd, int N, int C);
void kern_rmsnorm_fwd_ref(float *residual, float *out, float *rstd, const float *inp, const float *skip,
                          const kern_dropout *drop, uint8_t *mask, const float *w, int N, int C);
void kern_rmsnorm_bwd_ref(float *dres, float *dw, const float *dout, const float *xln, const float *w,
                          const float *rstd, int N, int C);

#ifdef KERN_HAVE_CUDA
int kern_layernorm_fwd_cuda(kern_bf16 *residual, kern_bf16 *out, float *mean, float *rstd,
                            const kern_bf16 *inp, const kern_bf16 *skip, const kern_dropout *drop,
                            uint8_t *mask, const kern_bf16 *w, const kern_bf16 *b, int N, int C,
                            cudaStream_t stream);
int kern_layernorm_bwd_cuda(kern_bf16 *dres, float *dw, float *db, const kern_bf16 *dout,
                            const kern_bf16 *xln, const kern_bf16 *w, const float *mean,
                            const float *rstd, int N, int C, cudaStream_t stream);
int kern_rmsnorm_fwd_cuda(kern_bf16 *residual, kern_bf16 *out, float *rstd, const kern_bf16 *inp,
                          const kern_bf16 *skip, const kern_dropout *drop, uint8_t *mask, const kern_bf16 *w,
                          int N, int C, cudaStream_t stream);
int kern_rmsnorm_bwd_cuda(kern_bf16 *dres, float *dw, const kern_bf16 *dout, const kern_bf16 *xln,
                          const kern_bf16 *w, const float *rstd, int N, int C, cudaStream_t stream);
#endif

#ifdef __cplusplus
}
#endif
#endif
