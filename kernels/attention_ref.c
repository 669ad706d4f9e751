/* kernels/attention_ref.c: fp32 references of causal / sliding-window GQA
 * attention. The flash pair streams over keys with an online softmax and
 * recomputes probabilities in the backward (no T x T memory); the unfused
 * pair materialises the probabilities. Both cost O(B NH T W HS), W the
 * number of visible keys. Each takes a block of the sequence (Tk, q0, k0,
 * Tseq; attention.h): the key loops run over the keys a row sees. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/attention.h"

int kern_attn_shape_check(kern_attn_shape s) {
  if (s.B < 1 || s.T < 1 || s.NH < 1 || s.NKV < 1 || s.HS < 1 || s.window < 0) return -1;
  if (s.Tk < 0 || s.q0 < 0 || s.k0 < 0 || s.Tseq < 0) return -1;
  if (!(s.drop.p >= 0.0f && s.drop.p < 1.0f)) return -1;
  long long tseq = kern_attn_tseq(&s); /* dropout's indices must stay inside the sequence */
  if (s.drop.p > 0.0f && (tseq < (long long)s.q0 + s.T || tseq < (long long)s.k0 + kern_attn_tk(&s))) return -1;
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

/* Pointers to row t of head h in a (B, T, NH, HS) query-side tensor (ROW)
 * and in a (B, Tk, NKV, HS) key-side one (KROW). */
#define ROW(base, s, b, t, H, h) ((base) + ((((long)(b) * (s).T + (t)) * (H) + (h)) * (s).HS))
#define KROW(base, s, b, t, h) ((base) + ((((long)(b) * kern_attn_tk(&(s)) + (t)) * (s).NKV + (h)) * (s).HS))

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
        for (int j = kern_attn_key_lo(&s, i), jhi = kern_attn_key_hi(&s, i); j <= jhi; j++) {
          float x = scale * dotf(qi, KROW(k, s, b, j, h / grp), s.HS);
          if (x > m) { /* invariant: o and l are sums of exp(x_j - m) terms */
            float corr = expf(m - x);
            l *= corr;
            for (int d = 0; d < s.HS; d++) o[d] *= corr;
            m = x;
          }
          float p = expf(x - m);
          l += p; /* the undropped sum: dropout scales the terms of o only */
          axpyf(o, p * kern_attn_drop_block(&s, b, h, i, j, &blk), KROW(v, s, b, j, h / grp), s.HS);
        }
        if (l > 0.0f) /* else no key seen: o stays 0, lse = -inf + log 0 = -inf */
          for (int d = 0; d < s.HS; d++) o[d] /= l;
        lse[((long)b * s.NH + h) * s.T + i] = m + logf(l);
      }
}

/* Takes the lse and out it is given: with the merged ones of several
 * blocks, p and D are the whole row's, and the gradients this block's
 * share. A row that sees no key of the block adds nothing, whatever lse. */
void kern_attention_bwd_ref(float *dq, float *dk, float *dv, const float *dout, const float *q,
                            const float *k, const float *v, const float *out,
                            const float *lse, kern_attn_shape s) {
  float scale = 1.0f / sqrtf((float)s.HS);
  int grp = s.NH / s.NKV;
  long nkv = (long)s.B * kern_attn_tk(&s) * s.NKV * s.HS;
  memset(dq, 0, sizeof(float) * s.B * s.T * s.NH * s.HS);
  memset(dk, 0, sizeof(float) * nkv);
  memset(dv, 0, sizeof(float) * nkv);
  for (int b = 0; b < s.B; b++)
    for (int h = 0; h < s.NH; h++)
      for (int i = 0; i < s.T; i++) {
        const float *qi = ROW(q, s, b, i, s.NH, h), *doi = ROW(dout, s, b, i, s.NH, h);
        float *dqi = ROW(dq, s, b, i, s.NH, h);
        float L = lse[((long)b * s.NH + h) * s.T + i];
        float D = dotf(doi, ROW(out, s, b, i, s.NH, h), s.HS); /* = sum_j p_ij dp_ij */
        kern_dropout_block blk = {-1, {0}};
        for (int j = kern_attn_key_lo(&s, i), jhi = kern_attn_key_hi(&s, i); j <= jhi; j++) {
          const float *kj = KROW(k, s, b, j, h / grp), *vj = KROW(v, s, b, j, h / grp);
          float p = expf(scale * dotf(qi, kj, s.HS) - L), mk = kern_attn_drop_block(&s, b, h, i, j, &blk);
          float ds = p * (mk * dotf(doi, vj, s.HS) - D);
          axpyf(KROW(dv, s, b, j, h / grp), p * mk, doi, s.HS);
          axpyf(dqi, scale * ds, kj, s.HS);
          axpyf(KROW(dk, s, b, j, h / grp), scale * ds, qi, s.HS);
        }
      }
}

void kern_attention_unfused_fwd_ref(float *out, float *att, const float *q, const float *k,
                                    const float *v, kern_attn_shape s) {
  float scale = 1.0f / sqrtf((float)s.HS);
  int grp = s.NH / s.NKV, Tk = kern_attn_tk(&s);
  for (int b = 0; b < s.B; b++)
    for (int h = 0; h < s.NH; h++)
      for (int i = 0; i < s.T; i++) {
        float *a = att + (((long)b * s.NH + h) * s.T + i) * Tk, m = -INFINITY, l = 0.0f;
        int lo = kern_attn_key_lo(&s, i), hi = kern_attn_key_hi(&s, i);
        float *o = ROW(out, s, b, i, s.NH, h);
        memset(o, 0, sizeof(float) * s.HS);
        if (lo > hi) { /* no key seen: out and att rows 0 */
          memset(a, 0, sizeof(float) * Tk);
          continue;
        }
        for (int j = 0; j < Tk; j++) {
          a[j] = (j < lo || j > hi) ? -INFINITY
                                    : scale * dotf(ROW(q, s, b, i, s.NH, h), KROW(k, s, b, j, h / grp), s.HS);
          m = fmaxf(m, a[j]);
        }
        for (int j = 0; j < Tk; j++) l += (a[j] = expf(a[j] - m));
        kern_dropout_block blk = {-1, {0}};
        for (int j = lo; j <= hi; j++) /* att keeps the undropped probabilities */
          axpyf(o, (a[j] /= l) * kern_attn_drop_block(&s, b, h, i, j, &blk), KROW(v, s, b, j, h / grp), s.HS);
        for (int j = 0; j < lo; j++) a[j] = 0.0f;
      }
}

void kern_attention_unfused_bwd_ref(float *dq, float *dk, float *dv, const float *dout,
                                    const float *q, const float *k, const float *v,
                                    const float *att, kern_attn_shape s) {
  int grp = s.NH / s.NKV, Tk = kern_attn_tk(&s);
  float scale = 1.0f / sqrtf((float)s.HS), *datt = malloc(sizeof(float) * Tk);
  long nkv = (long)s.B * Tk * s.NKV * s.HS;
  memset(dq, 0, sizeof(float) * s.B * s.T * s.NH * s.HS);
  memset(dk, 0, sizeof(float) * nkv);
  memset(dv, 0, sizeof(float) * nkv);
  for (int b = 0; b < s.B; b++)
    for (int h = 0; h < s.NH; h++)
      for (int i = 0; i < s.T; i++) {
        const float *a = att + (((long)b * s.NH + h) * s.T + i) * Tk;
        const float *doi = ROW(dout, s, b, i, s.NH, h), *qi = ROW(q, s, b, i, s.NH, h);
        float sum = 0.0f;
        int hi = kern_attn_key_hi(&s, i); /* keys past it have a = 0 */
        kern_dropout_block blk = {-1, {0}};
        for (int j = 0; j <= hi; j++) {
          float mk = kern_attn_drop_block(&s, b, h, i, j, &blk);
          datt[j] = mk * dotf(doi, KROW(v, s, b, j, h / grp), s.HS);
          sum += a[j] * datt[j];
          axpyf(KROW(dv, s, b, j, h / grp), a[j] * mk, doi, s.HS);
        }
        for (int j = 0; j <= hi; j++) {
          float ds = scale * a[j] * (datt[j] - sum);
          axpyf(ROW(dq, s, b, i, s.NH, h), ds, KROW(k, s, b, j, h / grp), s.HS);
          axpyf(KROW(dk, s, b, j, h / grp), ds, qi, s.HS);
        }
      }
  free(datt);
}
