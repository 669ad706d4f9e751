/* kernels/optimizer.h: AdamW and LAMB steps, each fused over a list of
 * tensors (one call / one launch updates them all).
 *
 * Per element, with t = step (1-based), g the gradient:
 *   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
 *   u = (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) + wd * w
 *   AdamW: w -= lr * u
 *   LAMB:  w -= lr * r * u,  r = ||w|| / ||u|| per tensor (the layer-wise
 *          trust ratio; r = 1 when either norm is 0), norms over the tensor
 *          before the update.
 * g is the gradient times grad_scale: gradient clipping by global norm
 * (Megatron-LM's --clip-grad: scale = min(1, clip / (||g|| + 1e-6)), the
 * norm from kern_grad_sumsq over every rank's part) folded into the step.
 * param, m, v, grad are fp32 (master weights and gradients); param_bf16,
 * when non-NULL, receives the updated weights rounded to bf16 (the copy the
 * forward pass reads). */
#ifndef KERN_OPTIMIZER_H
#define KERN_OPTIMIZER_H
#include <math.h>
#include "kernels/kern_common.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef struct kern_opt_tensor {
  float *param;
  const float *grad;
  float *m, *v;
  kern_bf16 *param_bf16; /* may be NULL */
  long n;
} kern_opt_tensor;

typedef struct kern_opt_hparams {
  float lr, beta1, beta2, eps, weight_decay;
  int step;         /* >= 1 */
  float grad_scale; /* 1: the gradient as it is */
} kern_opt_hparams;

/* sums[k] = sum of grad^2 over tensor k (the gradient-norm pass of
 * clipping; the caller adds the parts held by other ranks). */
void kern_grad_sumsq_ref(const kern_opt_tensor *ts, int count, float *sums);

void kern_adamw_ref(const kern_opt_tensor *ts, int count, kern_opt_hparams hp);
void kern_lamb_ref(const kern_opt_tensor *ts, int count, kern_opt_hparams hp);
/* LAMB in its two passes, for tensors split across ranks: the caller sums
 * each tensor's norms[2k] (sum of w^2) and norms[2k + 1] (sum of u^2) over
 * the ranks holding its pieces between the two calls. lamb_norms updates
 * m and v and overwrites norms; lamb_apply updates the weights with the
 * trust ratio from norms. kern_lamb_ref = norms then apply. */
void kern_lamb_norms_ref(const kern_opt_tensor *ts, int count, kern_opt_hparams hp, float *norms);
void kern_lamb_apply_ref(const kern_opt_tensor *ts, int count, kern_opt_hparams hp, const float *norms);

#ifdef KERN_HAVE_CUDA
/* ts is a host array whose pointers are device pointers. Up to
 * KERN_OPT_MAX_TENSORS tensors go into one launch (their descriptors travel
 * as kernel parameters); longer lists take ceil(count / max) launches. */
#define KERN_OPT_MAX_TENSORS 48
int kern_adamw_cuda(const kern_opt_tensor *ts, int count, kern_opt_hparams hp,
                    cudaStream_t stream);
/* norms: device scratch of 2 * count floats (sums of squares of w and u).
 * Two launches per batch: moments + norms, then the scaled update (u is
 * recomputed from the new m, v rather than stored). */
int kern_lamb_cuda(const kern_opt_tensor *ts, int count, kern_opt_hparams hp, float *norms,
                   cudaStream_t stream);
/* sums: device, count floats (fp32 atomics across a tensor's chunks). */
int kern_grad_sumsq_cuda(const kern_opt_tensor *ts, int count, float *sums, cudaStream_t stream);
/* The two launches of kern_lamb_cuda on their own (see kern_lamb_norms_ref). */
int kern_lamb_norms_cuda(const kern_opt_tensor *ts, int count, kern_opt_hparams hp, float *norms,
                         cudaStream_t stream);
int kern_lamb_apply_cuda(const kern_opt_tensor *ts, int count, kern_opt_hparams hp,
                         const float *norms, cudaStream_t stream);
#endif

/* The per-element moment update and direction u, shared by the references
 * and the kernels. bc1 = 1 - b1^t, bc2 = 1 - b2^t. */
static inline KERN_HD float kern_adam_dir(float w, float g, float *m, float *v,
                                          kern_opt_hparams hp, float bc1, float bc2) {
  g *= hp.grad_scale;
  *m = hp.beta1 * *m + (1.0f - hp.beta1) * g;
  *v = hp.beta2 * *v + (1.0f - hp.beta2) * g * g;
  return (*m / bc1) / (sqrtf(*v / bc2) + hp.eps) + hp.weight_decay * w;
}

/* The direction from moments already updated (LAMB's second pass). */
static inline KERN_HD float kern_adam_dir_nomove(float w, float m, float v,
                                                 kern_opt_hparams hp, float bc1, float bc2) {
  return (m / bc1) / (sqrtf(v / bc2) + hp.eps) + hp.weight_decay * w;
}

static inline KERN_HD float kern_lamb_ratio(float w2, float u2) {
  return (w2 > 0.0f && u2 > 0.0f) ? sqrtf(w2) / sqrtf(u2) : 1.0f;
}

#ifdef __cplusplus
}
#endif
#endif
