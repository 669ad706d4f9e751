/* kernels/layernorm_ref.c: fp32 reference of residual add + LayerNorm
 * (two passes per row: mean, then variance about the mean, for accuracy)
 * and of residual add + RMSNorm, either with the skip branch dropped. */
#include <math.h>
#include "kernels/layernorm.h"

static void ln_row_stats(const float *x, int C, float *mean, float *rstd) {
  double s = 0.0, v = 0.0;
  for (int c = 0; c < C; c++) s += x[c];
  float m = (float)(s / C);
  for (int c = 0; c < C; c++) v += (double)(x[c] - m) * (x[c] - m);
  *mean = m;
  *rstd = 1.0f / sqrtf((float)(v / C) + KERN_LN_EPS);
}

/* Row n of the norm's input: inp, or residual = inp + skip (dropped by
 * drop when given) when skip is given. */
static const float *residual_row(float *residual, const float *inp, const float *skip, const kern_dropout *drop,
                                 uint8_t *mask, long n, int C) {
  if (!skip) return inp + n * C;
  if (drop) {
    kern_dropout d = *drop;
    d.base += n * C;
    kern_dropout_add_ref(residual + n * C, mask ? mask + n * C : NULL, inp + n * C, skip + n * C, C, d);
  } else {
    for (int c = 0; c < C; c++) residual[n * C + c] = inp[n * C + c] + skip[n * C + c];
  }
  return residual + n * C;
}

void kern_layernorm_fwd_ref(float *residual, float *out, float *mean, float *rstd,
                            const float *inp, const float *skip, const kern_dropout *drop, uint8_t *mask,
                            const float *w, const float *b, int N, int C) {
  for (long n = 0; n < N; n++) {
    const float *x = residual_row(residual, inp, skip, drop, mask, n, C);
    ln_row_stats(x, C, &mean[n], &rstd[n]);
    for (int c = 0; c < C; c++) out[n * C + c] = (x[c] - mean[n]) * rstd[n] * w[c] + b[c];
  }
}

void kern_layernorm_bwd_ref(float *dres, float *dw, float *db, const float *dout,
                            const float *xln, const float *w, const float *mean,
                            const float *rstd, int N, int C) {
  for (long n = 0; n < N; n++) {
    const float *x = xln + n * C, *d = dout + n * C;
    float m = mean[n], r = rstd[n], sum_dn = 0.0f, sum_dnx = 0.0f;
    for (int c = 0; c < C; c++) {
      float xhat = (x[c] - m) * r, dn = d[c] * w[c];
      sum_dn += dn;
      sum_dnx += dn * xhat;
      dw[c] += d[c] * xhat;
      db[c] += d[c];
    }
    sum_dn /= C;
    sum_dnx /= C;
    for (int c = 0; c < C; c++) {
      float xhat = (x[c] - m) * r;
      dres[n * C + c] += r * (d[c] * w[c] - sum_dn - xhat * sum_dnx);
    }
  }
}

void kern_rmsnorm_fwd_ref(float *residual, float *out, float *rstd, const float *inp, const float *skip,
                          const kern_dropout *drop, uint8_t *mask, const float *w, int N, int C) {
  for (long n = 0; n < N; n++) {
    const float *x = residual_row(residual, inp, skip, drop, mask, n, C);
    double ss = 0.0;
    for (int c = 0; c < C; c++) ss += (double)x[c] * x[c];
    rstd[n] = 1.0f / sqrtf((float)(ss / C) + KERN_LN_EPS);
    for (int c = 0; c < C; c++) out[n * C + c] = x[c] * rstd[n] * w[c];
  }
}

void kern_rmsnorm_bwd_ref(float *dres, float *dw, const float *dout, const float *xln, const float *w,
                          const float *rstd, int N, int C) {
  for (long n = 0; n < N; n++) {
    const float *x = xln + n * C, *d = dout + n * C;
    float r = rstd[n], sum_dnx = 0.0f;
    for (int c = 0; c < C; c++) {
      float xhat = x[c] * r;
      sum_dnx += d[c] * w[c] * xhat;
      dw[c] += d[c] * xhat;
    }
    sum_dnx /= C;
    for (int c = 0; c < C; c++) dres[n * C + c] += r * (d[c] * w[c] - x[c] * r * sum_dnx);
  }
}
