/* kernels/attention_ref.c: fp32 references of causal / sliding-window GQA
 * attention. The flash pair streams over keys with an online softmax and
 * recomputes probabilities in the backward (no T x T memory); the unfused
 * pair materialises the probabilities. Both cost O(B NH T W HS), W the
 * number of visible keys. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/attention.h"

int kern_attn_shape_check(kern_attn_shape s) {
  if (s.B < 1 || s.T < 1 || s.NH < 1 || s.NKV < 1 || s.HS < 1 || s.window < 0) return -1;
  if (!(s.drop.p >= 0.0f && s.drop.p < 1.0f)) return -1;
  return s.NH % s.NKV == 0 ? 0 : -1;
}

static float dotf(const float *a, const float *b, int n) {
  float s = 0.0f;
  for (int i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

static void axpyf(float *y, float a, const float *x, int n) {
  for (int i = 0; i < n; i++) y[i] += a * x[i];
}

/* kern_attn_drop over one query row's keys in increasing order, one Philox
 * call per four (blk: the row's cache, q = -1 at its start). */
static float drop_at(const kern_attn_shape *s, int b, int h, int i, int j, kern_dropout_block *blk) {
  if (s->drop.p <= 0.0f) return 1.0f;
  return kern_dropout_mult_block(&s->drop, kern_dropout_attn_index(&s->drop, b, h, i, j, s->T), blk);
}

/* Pointers to row t of head h in a (B, T, H, HS) tensor. */
#define ROW(base, s, b, t, H, h) ((base) + ((((long)(b) * (s).T + (t)) * (H) + (h)) * (s).HS))

void kern_attention_fwd_ref(float *out, float *lse, const float *q, const float *k,
                            const float *v, kern_attn_shape s) {
  float scale = 1.0f / sqrtf((float)s.HS);
  int grp = s.NH / s.NKV;
  for (int b = 0; b < s.B; b++)
    for (int h = 0; h < s.NH; h++)
      for (int i = 0; i < s.T; i++) {
        const float *qi = ROW(q, s, b, i, s.NH, h);
        float *o = ROW(out, s, b, i, s.NH, h), m = -INFINITY, l = 0.0f;
        memset(o, 0, sizeof(float) * s.HS);
        kern_dropout_block blk = {-1, {0}};
        for (int j = kern_attn_lo(i, s.window); j <= i; j++) {
          float x = scale * dotf(qi, ROW(k, s, b, j, s.NKV, h / grp), s.HS);
          if (x > m) { /* invariant: o and l are sums of exp(x_j - m) terms */
            float corr = expf(m - x);
            l *= corr;
            for (int d = 0; d < s.HS; d++) o[d] *= corr;
            m = x;
          }
          float p = expf(x - m);
          l += p; /* the undropped sum: dropout scales the terms of o only */
          axpyf(o, p * drop_at(&s, b, h, i, j, &blk), ROW(v, s, b, j, s.NKV, h / grp), s.HS);
        }
        for (int d = 0; d < s.HS; d++) o[d] /= l;
        lse[((long)b * s.NH + h) * s.T + i] = m + logf(l);
      }
}

void kern_attention_bwd_ref(float *dq, float *dk, float *dv, const float *dout, const float *q,
                            const float *k, const float *v, const float *out,
                            const float *lse, kern_attn_shape s) {
  float scale = 1.0f / sqrtf((float)s.HS);
  int grp = s.NH / s.NKV;
  memset(dq, 0, sizeof(float) * s.B * s.T * s.NH * s.HS);
  memset(dk, 0, sizeof(float) * s.B * s.T * s.NKV * s.HS);
  memset(dv, 0, sizeof(float) * s.B * s.T * s.NKV * s.HS);
  for (int b = 0; b < s.B; b++)
    for (int h = 0; h < s.NH; h++)
      for (int i = 0; i < s.T; i++) {
        const float *qi = ROW(q, s, b, i, s.NH, h), *doi = ROW(dout, s, b, i, s.NH, h);
        float *dqi = ROW(dq, s, b, i, s.NH, h);
        float L = lse[((long)b * s.NH + h) * s.T + i];
        float D = dotf(doi, ROW(out, s, b, i, s.NH, h), s.HS); /* = sum_j p_ij dp_ij */
        kern_dropout_block blk = {-1, {0}};
        for (int j = kern_attn_lo(i, s.window); j <= i; j++) {
          const float *kj = ROW(k, s, b, j, s.NKV, h / grp), *vj = ROW(v, s, b, j, s.NKV, h / grp);
          float p = expf(scale * dotf(qi, kj, s.HS) - L), mk = drop_at(&s, b, h, i, j, &blk);
          float ds = p * (mk * dotf(doi, vj, s.HS) - D);
          axpyf(ROW(dv, s, b, j, s.NKV, h / grp), p * mk, doi, s.HS);
          axpyf(dqi, scale * ds, kj, s.HS);
          axpyf(ROW(dk, s, b, j, s.NKV, h / grp), scale * ds, qi, s.HS);
        }
      }
}

void kern_attention_unfused_fwd_ref(float *out, float *att, const float *q, const float *k,
                                    const float *v, kern_attn_shape s) {
  float scale = 1.0f / sqrtf((float)s.HS);
  int grp = s.NH / s.NKV;
  for (int b = 0; b < s.B; b++)
    for (int h = 0; h < s.NH; h++)
      for (int i = 0; i < s.T; i++) {
        float *a = att + (((long)b * s.NH + h) * s.T + i) * s.T, m = -INFINITY, l = 0.0f;
        int lo = kern_attn_lo(i, s.window);
        for (int j = 0; j < s.T; j++) {
          a[j] = (j < lo || j > i) ? -INFINITY
                                   : scale * dotf(ROW(q, s, b, i, s.NH, h),
                                                  ROW(k, s, b, j, s.NKV, h / grp), s.HS);
          m = fmaxf(m, a[j]);
        }
        for (int j = 0; j < s.T; j++) l += (a[j] = expf(a[j] - m));
        float *o = ROW(out, s, b, i, s.NH, h);
        memset(o, 0, sizeof(float) * s.HS);
        kern_dropout_block blk = {-1, {0}};
        for (int j = lo; j <= i; j++) /* att keeps the undropped probabilities */
          axpyf(o, (a[j] /= l) * drop_at(&s, b, h, i, j, &blk), ROW(v, s, b, j, s.NKV, h / grp), s.HS);
        for (int j = 0; j < lo; j++) a[j] = 0.0f;
      }
}

void kern_attention_unfused_bwd_ref(float *dq, float *dk, float *dv, const float *dout,
                                    const float *q, const float *k, const float *v,
                                    const float *att, kern_attn_shape s) {
  float scale = 1.0f / sqrtf((float)s.HS), *datt = malloc(sizeof(float) * s.T);
  int grp = s.NH / s.NKV;
  memset(dq, 0, sizeof(float) * s.B * s.T * s.NH * s.HS);
  memset(dk, 0, sizeof(float) * s.B * s.T * s.NKV * s.HS);
  memset(dv, 0, sizeof(float) * s.B * s.T * s.NKV * s.HS);
  for (int b = 0; b < s.B; b++)
    for (int h = 0; h < s.NH; h++)
      for (int i = 0; i < s.T; i++) {
        const float *a = att + (((long)b * s.NH + h) * s.T + i) * s.T;
        const float *doi = ROW(dout, s, b, i, s.NH, h), *qi = ROW(q, s, b, i, s.NH, h);
        float sum = 0.0f;
        kern_dropout_block blk = {-1, {0}};
        for (int j = 0; j <= i; j++) {
          float mk = drop_at(&s, b, h, i, j, &blk);
          datt[j] = mk * dotf(doi, ROW(v, s, b, j, s.NKV, h / grp), s.HS);
          sum += a[j] * datt[j];
          axpyf(ROW(dv, s, b, j, s.NKV, h / grp), a[j] * mk, doi, s.HS);
        }
        for (int j = 0; j <= i; j++) {
          float ds = scale * a[j] * (datt[j] - sum);
          axpyf(ROW(dq, s, b, i, s.NH, h), ds, ROW(k, s, b, j, s.NKV, h / grp), s.HS);
          axpyf(ROW(dk, s, b, j, s.NKV, h / grp), ds, qi, s.HS);
        }
      }
  free(datt);
}
