/* kernels/gelu.h: bias + GeLU (tanh approximation, as GPT-2), fused, and
 * the unfused sequence it replaces (bias add, then GeLU; backward: GeLU
 * backward, then bias gradient); and SwiGLU, the gated activation of
 * LLaMA-style MLPs (--swiglu), over FC1's two halves [gate | up]:
 *   swiglu fwd: out (N, F) = silu(inp[:, :F]) * inp[:, F:]     inp (N, 2F)
 *   swiglu bwd: dinp (N, 2F) = [dout * up * silu'(gate) | dout * silu(gate)]
 *   fused fwd:  out (N, C) = gelu(inp + bias)           bias (C) may be NULL
 *   fused bwd:  dinp (N, C) = dout * gelu'(inp + bias);  dbias (C) += sum_n dinp
 * dinp may alias dout. dbias is fp32 (a parameter gradient); on the GPU it
 * is summed with fp32 atomics across row chunks (order not deterministic). */
#ifndef KERN_GELU_H
#define KERN_GELU_H
#include <math.h>
#include "kernels/kern_common.h"
#ifdef __cplusplus
extern "C" {
#endif

/* The one definition of the GeLU formula and its derivative, shared by the
 * references and the CUDA kernels. */
#define KERN_GELU_K 0.7978845608028654f /* sqrt(2 / pi) */
static inline KERN_HD float kern_gelu(float x) {
  float u = KERN_GELU_K * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + tanhf(u));
}
static inline KERN_HD float kern_gelu_grad(float x) {
  float u = KERN_GELU_K * (x + 0.044715f * x * x * x), t = tanhf(u);
  float du = KERN_GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

void kern_bias_gelu_fwd_ref(float *out, const float *inp, const float *bias, int N, int C);
void kern_bias_gelu_bwd_ref(float *dinp, float *dbias, const float *dout, const float *inp,
                            const float *bias, int N, int C);
/* Unfused pieces. out may alias inp. */
void kern_bias_add_ref(float *out, const float *inp, const float *bias, int N, int C);
void kern_gelu_fwd_ref(float *out, const float *inp, long n);
void kern_gelu_bwd_ref(float *dinp, const float *dout, const float *inp, long n);
void kern_bias_grad_ref(float *dbias, const float *dout, int N, int C); /* += */

/* silu(x) = x sigmoid(x) and its derivative, for the references and kernels. */
static inline KERN_HD float kern_silu(float x) { return x / (1.0f + expf(-x)); }
static inline KERN_HD float kern_silu_grad(float x) {
  float s = 1.0f / (1.0f + expf(-x));
  return s * (1.0f + x * (1.0f - s));
}
void kern_swiglu_fwd_ref(float *out, const float *inp, int N, int F);
void kern_swiglu_bwd_ref(float *dinp, const float *dout, const float *inp, int N, int F);

#ifdef KERN_HAVE_CUDA
int kern_bias_gelu_fwd_cuda(kern_bf16 *out, const kern_bf16 *inp, const kern_bf16 *bias,
                            int N, int C, cudaStream_t stream);
/* dbias may be NULL (no bias). */
int kern_bias_gelu_bwd_cuda(kern_bf16 *dinp, float *dbias, const kern_bf16 *dout,
                            const kern_bf16 *inp, const kern_bf16 *bias, int N, int C,
                            cudaStream_t stream);
int kern_bias_add_cuda(kern_bf16 *out, const kern_bf16 *inp, const kern_bf16 *bias, int N,
                       int C, cudaStream_t stream);
int kern_gelu_fwd_cuda(kern_bf16 *out, const kern_bf16 *inp, long n, cudaStream_t stream);
int kern_gelu_bwd_cuda(kern_bf16 *dinp, const kern_bf16 *dout, const kern_bf16 *inp, long n,
                       cudaStream_t stream);
/* dbias (C) += sum over N rows of dout (N, C). */
int kern_bias_grad_cuda(float *dbias, const kern_bf16 *dout, int N, int C, cudaStream_t stream);
int kern_swiglu_fwd_cuda(kern_bf16 *out, const kern_bf16 *inp, int N, int F, cudaStream_t stream);
/* dinp (N, 2F) must not alias dout (N, F). */
int kern_swiglu_bwd_cuda(kern_bf16 *dinp, const kern_bf16 *dout, const kern_bf16 *inp, int N, int F,
                         cudaStream_t stream);
#endif

#ifdef __cplusplus
}
#endif
#endif
