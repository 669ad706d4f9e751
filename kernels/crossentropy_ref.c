/* kernels/crossentropy_ref.c: fp32 reference of fused softmax +
 * cross-entropy, whole or split by vocabulary. Two passes over each row
 * (max, then sum of exp). */
#include <math.h>
#include "kernels/crossentropy.h"

/* log sum exp of row x (V values). */
static float row_lse(const float *x, int V) {
  float m = -INFINITY, s = 0.0f;
  for (int j = 0; j < V; j++) m = fmaxf(m, x[j]);
  for (int j = 0; j < V; j++) s += expf(x[j] - m);
  return m + logf(s);
}

void kern_crossentropy_fwd_ref(float *losses, float *lse, const float *logits,
                               const int *targets, int N, int V) {
  for (long n = 0; n < N; n++) {
    const float *x = logits + n * V;
    lse[n] = row_lse(x, V);
    losses[n] = targets[n] < 0 ? 0.0f : lse[n] - x[targets[n]];
  }
}

void kern_crossentropy_part_ref(float *part, const float *logits, const int *targets, int v0,
                                int N, int V) {
  for (long n = 0; n < N; n++) {
    const float *x = logits + n * V;
    int t = targets[n] - v0;
    part[2 * n] = row_lse(x, V);
    part[2 * n + 1] = targets[n] >= 0 && t >= 0 && t < V ? x[t] : 0.0f;
  }
}

void kern_crossentropy_merge_ref(float *losses, float *lse, const float *parts,
                                 const int *targets, int P, int N) {
  for (long n = 0; n < N; n++) {
    float m = -INFINITY, s = 0.0f, tl = 0.0f;
    for (int p = 0; p < P; p++) m = fmaxf(m, parts[2 * ((long)p * N + n)]);
    for (int p = 0; p < P; p++) {
      const float *q = parts + 2 * ((long)p * N + n);
      s += expf(q[0] - m), tl += q[1];
    }
    lse[n] = m + logf(s);
    losses[n] = targets[n] < 0 ? 0.0f : lse[n] - tl;
  }
}

void kern_crossentropy_bwd_ref(float *dlogits, const float *logits, const float *lse,
                               const int *targets, int v0, float dloss, int N, int V) {
  for (long n = 0; n < N; n++)
    for (int j = 0; j < V; j++) {
      float p = expf(logits[n * V + j] - lse[n]);
      dlogits[n * V + j] = targets[n] < 0 ? 0.0f : (p - (j + v0 == targets[n])) * dloss;
    }
}
