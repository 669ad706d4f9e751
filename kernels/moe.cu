/* kernels/moe.cu: CUDA mixture-of-experts kernels (see moe.h), on bf16
 * activations with fp32 math. The router's two kernels take a token per
 * thread (E is small); gather and combine an element per thread (combine
 * sums a token's rows in fp32 in its choices' order: deterministic, no
 * atomics); rowdot a row per thread. */
#include "kernels/moe.h"
#include "kernels/kern_cuda.cuh"

__global__ void moe_route_kernel(float *probs, int *idx, float *scores, const bf16 *logits, int N, int E, int k) {
  int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  const bf16 *l = logits + (long)n * E;
  int *ix = idx + (long)n * k;
#define LOGIT(e) ld(l + (e))
  KERN_MOE_TOPK(ix, k, E, LOGIT)
#undef LOGIT
  float M = -INFINITY, Z = 0, *p = probs + (long)n * k, *s = scores + (long)n * E;
  for (int j = 0; j < k; j++) M = fmaxf(M, ld(l + ix[j]));
  for (int j = 0; j < k; j++) Z += p[j] = expf(ld(l + ix[j]) - M);
  for (int j = 0; j < k; j++) p[j] /= Z;
  M = -INFINITY, Z = 0;
  for (int e = 0; e < E; e++) M = fmaxf(M, ld(l + e));
  for (int e = 0; e < E; e++) Z += s[e] = expf(ld(l + e) - M);
  for (int e = 0; e < E; e++) s[e] /= Z;
}

__global__ void moe_route_bwd_kernel(bf16 *dlogits, const float *dprobs, const float *probs, const int *idx,
                                     const float *scores, const float *coef0, int coef_ld, int N, int E, int k) {
  int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  bf16 *dl = dlogits + (long)n * E;
  const float *p = probs + (long)n * k, *dp = dprobs + (long)n * k, *s = scores + (long)n * E;
  const float *coef = coef0 ? coef0 + (long)n * coef_ld : NULL;
  float dot = 0, sc = 0;
  for (int e = 0; e < E; e++) sc += s[e] * (coef ? coef[e] : 0.0f);
  for (int j = 0; j < k; j++) dot += p[j] * dp[j];
  for (int e = 0; e < E; e++) {
    float g = coef ? s[e] * (coef[e] - sc) : 0.0f;
    for (int j = 0; j < k; j++)
      if (idx[(long)n * k + j] == e) g += p[j] * (dp[j] - dot);
    st(dl + e, g);
  }
}

__global__ void moe_gather_kernel(bf16 *out, const bf16 *x, const int *rows, const float *w, long M, int C) {
  long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= M * C) return;
  long r = i / C;
  int c = (int)(i % C), src = rows[r];
  st(out + i, src < 0 ? 0.0f : (w ? w[r] : 1.0f) * ld(x + (long)src * C + c));
}

__global__ void moe_combine_kernel(bf16 *out, const bf16 *y, const int *inv, const float *w, long N, int k, int C) {
  long e = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= N * C) return;
  long n = e / C;
  int c = (int)(e % C);
  float s = 0;
  for (int j = 0; j < k; j++) {
    int i = inv[n * k + j];
    if (i >= 0) s += (w ? w[i] : 1.0f) * ld(y + (long)i * C + c);
  }
  st(out + e, s);
}

__global__ void moe_rowdot_kernel(float *out, const bf16 *a, const int *rows, const bf16 *b, long M, int C) {
  long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= M) return;
  float s = 0;
  if (rows[i] >= 0)
    for (int c = 0; c < C; c++) s += ld(a + (long)rows[i] * C + c) * ld(b + i * C + c);
  out[i] = s;
}

extern "C" int kern_moe_route_cuda(float *probs, int *idx, float *scores, const kern_bf16 *logits, int N, int E,
                                   int k, cudaStream_t stream) {
  if (N <= 0) return 0;
  KERN_LAUNCH(kern_cdiv(N, 128), 128, 0, stream, moe_route_kernel)(probs, idx, scores, (const bf16 *)logits, N, E, k);
  KERN_LAUNCH_TRY();
  return 0;
}

extern "C" int kern_moe_route_bwd_cuda(kern_bf16 *dlogits, const float *dprobs, const float *probs, const int *idx,
                                       const float *scores, const float *coef, int coef_ld, int N, int E, int k,
                                       cudaStream_t stream) {
  if (N <= 0) return 0;
  KERN_LAUNCH(kern_cdiv(N, 128), 128, 0, stream, moe_route_bwd_kernel)((bf16 *)dlogits, dprobs, probs, idx, scores,
                                                                       coef, coef_ld, N, E, k);
  KERN_LAUNCH_TRY();
  return 0;
}

extern "C" int kern_moe_gather_cuda(kern_bf16 *out, const kern_bf16 *x, const int *rows, const float *w, long M, int C,
                                    cudaStream_t stream) {
  if (M <= 0) return 0;
  KERN_LAUNCH(kern_cdiv(M * C, 256), 256, 0, stream, moe_gather_kernel)((bf16 *)out, (const bf16 *)x, rows, w, M, C);
  KERN_LAUNCH_TRY();
  return 0;
}

extern "C" int kern_moe_combine_cuda(kern_bf16 *out, const kern_bf16 *y, const int *inv, const float *w, long N, int k,
                                     int C, cudaStream_t stream) {
  if (N <= 0) return 0;
  KERN_LAUNCH(kern_cdiv(N * C, 256), 256, 0, stream, moe_combine_kernel)((bf16 *)out, (const bf16 *)y, inv, w, N, k, C);
  KERN_LAUNCH_TRY();
  return 0;
}

extern "C" int kern_moe_rowdot_cuda(float *out, const kern_bf16 *a, const int *rows, const kern_bf16 *b, long M, int C,
                                    cudaStream_t stream) {
  if (M <= 0) return 0;
  KERN_LAUNCH(kern_cdiv(M, 128), 128, 0, stream, moe_rowdot_kernel)(out, (const bf16 *)a, rows, (const bf16 *)b, M, C);
  KERN_LAUNCH_TRY();
  return 0;
}
