/* kernels/gelu_ref.c: fp32 reference of bias + GeLU, fused and unfused,
 * and of SwiGLU.
 * The fused versions are written as one pass so that they double as the
 * CPU backend's fast path; the tests check them against the unfused ones. */
#include "kernels/gelu.h"

void kern_bias_gelu_fwd_ref(float *out, const float *inp, const float *bias, int N, int C) {
  for (long n = 0; n < N; n++)
    for (int c = 0; c < C; c++)
      out[n * C + c] = kern_gelu(inp[n * C + c] + (bias ? bias[c] : 0.0f));
}

void kern_bias_gelu_bwd_ref(float *dinp, float *dbias, const float *dout, const float *inp,
                            const float *bias, int N, int C) {
  for (long n = 0; n < N; n++)
    for (int c = 0; c < C; c++) {
      float g = dout[n * C + c] * kern_gelu_grad(inp[n * C + c] + (bias ? bias[c] : 0.0f));
      dinp[n * C + c] = g;
      if (dbias) dbias[c] += g;
    }
}

void kern_bias_add_ref(float *out, const float *inp, const float *bias, int N, int C) {
  for (long n = 0; n < N; n++)
    for (int c = 0; c < C; c++) out[n * C + c] = inp[n * C + c] + bias[c];
}

void kern_gelu_fwd_ref(float *out, const float *inp, long n) {
  for (long i = 0; i < n; i++) out[i] = kern_gelu(inp[i]);
}

void kern_gelu_bwd_ref(float *dinp, const float *dout, const float *inp, long n) {
  for (long i = 0; i < n; i++) dinp[i] = dout[i] * kern_gelu_grad(inp[i]);
}

void kern_bias_grad_ref(float *dbias, const float *dout, int N, int C) {
  for (long n = 0; n < N; n++)
    for (int c = 0; c < C; c++) dbias[c] += dout[n * C + c];
}

void kern_swiglu_fwd_ref(float *out, const float *inp, int N, int F) {
  for (long n = 0; n < N; n++)
    for (int f = 0; f < F; f++) out[n * F + f] = kern_silu(inp[n * 2 * F + f]) * inp[n * 2 * F + F + f];
}

void kern_swiglu_bwd_ref(float *dinp, const float *dout, const float *inp, int N, int F) {
  for (long n = 0; n < N; n++)
    for (int f = 0; f < F; f++) {
      float g = inp[n * 2 * F + f], u = inp[n * 2 * F + F + f], d = dout[n * F + f];
      dinp[n * 2 * F + f] = d * u * kern_silu_grad(g);
      dinp[n * 2 * F + F + f] = d * kern_silu(g);
    }
}
