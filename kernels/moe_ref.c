/* kernels/moe_ref.c: fp32 references of the mixture-of-experts kernels
 * (moe.h). */
#include "kernels/moe.h"

#include <math.h>
#include <string.h>

/* softmax of the n values v[at[0..n)] (at NULL: v[0..n)) into p. */
static void softmax(float *p, const float *v, const int *at, int n)
{
  float M = -INFINITY, Z = 0;
  for (int j = 0; j < n; j++) M = fmaxf(M, v[at ? at[j] : j]);
  for (int j = 0; j < n; j++) Z += p[j] = expf(v[at ? at[j] : j] - M);
  for (int j = 0; j < n; j++) p[j] /= Z;
}

void kern_moe_route_ref(float *probs, int *idx, float *scores, const float *logits, int N, int E, int k)
{
  for (int n = 0; n < N; n++) {
    const float *l = logits + (long)n * E;
    int *ix = idx + (long)n * k;
#define LOGIT(e) l[e]
    KERN_MOE_TOPK(ix, k, E, LOGIT)
#undef LOGIT
    softmax(probs + (long)n * k, l, ix, k);
    softmax(scores + (long)n * E, l, NULL, E);
  }
}

void kern_moe_route_bwd_ref(float *dlogits, const float *dprobs, const float *probs, const int *idx,
                            const float *scores, const float *coef0, int coef_ld, int N, int E, int k)
{
  for (int n = 0; n < N; n++) {
    float *dl = dlogits + (long)n * E;
    const float *p = probs + (long)n * k, *dp = dprobs + (long)n * k, *s = scores + (long)n * E;
    const float *coef = coef0 ? coef0 + (long)n * coef_ld : NULL;
    float dot = 0, sc = 0;
    for (int e = 0; e < E; e++) sc += s[e] * (coef ? coef[e] : 0);
    for (int e = 0; e < E; e++) dl[e] = coef ? s[e] * (coef[e] - sc) : 0;
    for (int j = 0; j < k; j++) dot += p[j] * dp[j];
    for (int j = 0; j < k; j++) dl[idx[(long)n * k + j]] += p[j] * (dp[j] - dot);
  }
}

void kern_moe_gather_ref(float *out, const float *x, const int *rows, const float *w, long M, int C)
{
  for (long i = 0; i < M; i++) {
    float *o = out + i * C;
    if (rows[i] < 0) {
      memset(o, 0, sizeof(float) * (size_t)C);
      continue;
    }
    const float *src = x + (long)rows[i] * C;
    float f = w ? w[i] : 1.0f;
    for (int c = 0; c < C; c++) o[c] = f * src[c];
  }
}

void kern_moe_combine_ref(float *out, const float *y, const int *inv, const float *w, long N, int k, int C)
{
  for (long n = 0; n < N; n++)
    for (int c = 0; c < C; c++) {
      float s = 0;
      for (int j = 0; j < k; j++) {
        int i = inv[n * k + j];
        if (i >= 0) s += (w ? w[i] : 1.0f) * y[(long)i * C + c];
      }
      out[n * C + c] = s;
    }
}

void kern_moe_rowdot_ref(float *out, const float *a, const int *rows, const float *b, long M, int C)
{
  for (long i = 0; i < M; i++) {
    double s = 0;
    if (rows[i] >= 0)
      for (int c = 0; c < C; c++) s += (double)a[(long)rows[i] * C + c] * b[i * C + c];
    out[i] = (float)s;
  }
}
