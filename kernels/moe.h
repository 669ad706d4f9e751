/* kernels/moe.h: the mixture-of-experts layer's own kernels, as
 * Megatron-Core's router and token permutation compute them (the expert
 * MLPs are the linear and activation kernels of the other families).
 *   route:    a token's top-k of its E router logits (ties to the lower
 *             expert), probs = their softmax (Megatron-Core's default,
 *             without --moe-router-pre-softmax), and scores = the softmax
 *             over all E, what the auxiliary load-balancing loss reads;
 *   route backward: the logits' gradient from the probs' gradient dprobs
 *             and the auxiliary loss sum_n sum_e coef[n coef_ld + e]
 *             scores[n][e] (coef worked out by the caller from the token
 *             counts: coef_ld 0, one factor per expert for every token, the
 *             switch-transformer loss; coef_ld E, a row per token, the
 *             sequence-level loss, each token its sequence's factors);
 *   gather:   out[i] = w[i] x[rows[i]] (w NULL: 1), the permutation of
 *             tokens into expert order; rows[i] < 0 is a padding row (0);
 *   combine:  out[n] = sum over j < k of w[i] y[i], i = inv[n k + j] (w
 *             NULL: 1; i < 0: nothing), the combine and the permutation's
 *             backward, each token's rows summed in fp32 in its choices'
 *             order (inv: the permutation's inverse, a row per pair);
 *   rowdot:   out[i] = <a[rows[i]], b[i]>, the combine's gradient of w.
 * Layouts: logits, scores, dlogits (N, E); probs, idx, dprobs, inv (N, k);
 * x, a, out of combine (N, C); y, b, out of gather (M, C). The fp32
 * references run on the CPU path; the CUDA kernels (moe.cu) take the
 * activations (logits, dlogits, x, y, a, b, out) in bf16. */
#ifndef KERN_MOE_H
#define KERN_MOE_H
#include "kernels/kern_common.h"
#ifdef __cplusplus
extern "C" {
#endif

/* A token's top-k (ix[0 .. k)) of its E logits, VAL(e) reading logit e:
 * the j-th choice is the largest not taken yet, ties to the lower expert.
 * One definition for the reference and the kernel, whose logits differ in
 * type (fp32, bf16). */
#define KERN_MOE_TOPK(ix, k, E, VAL)                                                      \
  for (int j_ = 0; j_ < (k); j_++) {                                                     \
    int best_ = -1;                                                                       \
    for (int e_ = 0; e_ < (E); e_++) {                                                    \
      int taken_ = 0;                                                                     \
      for (int i_ = 0; i_ < j_; i_++) taken_ |= (ix)[i_] == e_;                           \
      if (!taken_ && (best_ < 0 || VAL(e_) > VAL(best_))) best_ = e_;                     \
    }                                                                                     \
    (ix)[j_] = best_;                                                                     \
  }

void kern_moe_route_ref(float *probs, int *idx, float *scores, const float *logits, int N, int E, int k);
void kern_moe_route_bwd_ref(float *dlogits, const float *dprobs, const float *probs, const int *idx,
                            const float *scores, const float *coef, int coef_ld, int N, int E, int k);
void kern_moe_gather_ref(float *out, const float *x, const int *rows, const float *w, long M, int C);
void kern_moe_combine_ref(float *out, const float *y, const int *inv, const float *w, long N, int k, int C);
void kern_moe_rowdot_ref(float *out, const float *a, const int *rows, const float *b, long M, int C);

#ifdef KERN_HAVE_CUDA
int kern_moe_route_cuda(float *probs, int *idx, float *scores, const kern_bf16 *logits, int N, int E, int k,
                        cudaStream_t stream);
int kern_moe_route_bwd_cuda(kern_bf16 *dlogits, const float *dprobs, const float *probs, const int *idx,
                            const float *scores, const float *coef, int coef_ld, int N, int E, int k,
                            cudaStream_t stream);
int kern_moe_gather_cuda(kern_bf16 *out, const kern_bf16 *x, const int *rows, const float *w, long M, int C,
                         cudaStream_t stream);
int kern_moe_combine_cuda(kern_bf16 *out, const kern_bf16 *y, const int *inv, const float *w, long N, int k, int C,
                          cudaStream_t stream);
int kern_moe_rowdot_cuda(float *out, const kern_bf16 *a, const int *rows, const kern_bf16 *b, long M, int C,
                         cudaStream_t stream);
#endif

#ifdef __cplusplus
}
#endif
#endif
