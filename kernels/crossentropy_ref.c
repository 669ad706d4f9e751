/* kernels/crossentropy_ref.c: fp32 reference of fused softmax +
 * cross-entropy. Two passes over each row (max, then sum of exp). */
#include <math.h>
#include "kernels/crossentropy.h"

void kern_crossentropy_fwd_ref(float *losses, float *lse, const float *logits,
                               const int *targets, int N, int V) {
  for (long n = 0; n < N; n++) {
    const float *x = logits + n * V;
    float m = -INFINITY, s = 0.0f;
    for (int j = 0; j < V; j++) m = fmaxf(m, x[j]);
    for (int j = 0; j < V; j++) s += expf(x[j] - m);
    lse[n] = m + logf(s);
    losses[n] = targets[n] < 0 ? 0.0f : lse[n] - x[targets[n]];
  }
}

void kern_crossentropy_bwd_ref(float *dlogits, const float *logits, const float *lse,
                               const int *targets, float dloss, int N, int V) {
  for (long n = 0; n < N; n++)
    for (int j = 0; j < V; j++) {
      float p = expf(logits[n * V + j] - lse[n]);
      dlogits[n * V + j] = targets[n] < 0 ? 0.0f : (p - (j == targets[n])) * dloss;
    }
}
