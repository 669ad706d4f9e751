/* tests/kernels/test_attnmerge_ref.c: the log-sum-exp merge against one
 * softmax over the union of the keys, worked directly from random scores
 * (expected: the whole row's softmax-weighted values and log-sum-exp), and
 * the rows whose block saw no key (lse -inf) by hand. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "kern_check.h"
#include "kernels/attnmerge.h"

/* out (HS) and lse of one query over keys [k0, k1) with scores s and values v (K, HS). */
static float part(float *out, const float *s, const float *v, int k0, int k1, int HS) {
  for (int i = 0; i < HS; i++) out[i] = 0;
  if (k0 >= k1) return -INFINITY;
  float M = s[k0], Z = 0;
  for (int j = k0; j < k1; j++) M = s[j] > M ? s[j] : M;
  for (int j = k0; j < k1; j++) Z += expf(s[j] - M);
  for (int j = k0; j < k1; j++)
    for (int i = 0; i < HS; i++) out[i] += expf(s[j] - M) / Z * v[(long)j * HS + i];
  return M + logf(Z);
}

int main(void) {
  kc_rng r = {31};
  int B = 2, T = 5, NH = 3, HS = 8, K = 11, bad = 0;
  long rows = (long)B * T * NH, n = rows * HS;
  float *out = kc_zeros(n), *ob = kc_zeros(n), *want = kc_zeros(n), *lse = kc_zeros(rows), *lb = kc_zeros(rows),
        *wl = kc_zeros(rows);
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++)
      for (int h = 0; h < NH; h++) {
        float *s = kc_rand(&r, K, -4, 4), *v = kc_rand(&r, (long)K * HS, -1, 1);
        long o = (((long)b * T + t) * NH + h) * HS, l = ((long)b * NH + h) * T + t;
        int split = (int)((b * 7 + t * 3 + h) % (K + 1)); /* 0 and K: one side without keys */
        lse[l] = part(out + o, s, v, 0, split, HS);
        lb[l] = part(ob + o, s, v, split, K, HS);
        wl[l] = part(want + o, s, v, 0, K, HS);
        free(s), free(v);
      }
  kern_attnmerge_ref(out, lse, ob, lb, B, T, NH, HS);
  printf("B=%d T=%d NH=%d HS=%d, %d keys split at every place 0..%d\n", B, T, NH, HS, K, K);
  bad += kc_compare("merged out vs one softmax over all keys", out, want, n, 1e-6f, 1e-5f);
  bad += kc_compare("merged lse vs log-sum-exp over all keys", lse, wl, rows, 1e-5f, 1e-6f);
  /* By hand: both sides without keys leave the row at 0 and -inf. */
  float o1[2] = {0, 0}, l1 = -INFINITY, o2[2] = {5, 5}, l2 = -INFINITY, z[2] = {0, 0};
  kern_attnmerge_ref(o1, &l1, o2, &l2, 1, 1, 1, 2);
  printf("no keys on either side: expected out 0 0, lse -inf; got %g %g, %g\n", o1[0], o1[1], l1);
  bad += kc_compare("no keys on either side", o1, z, 2, 0, 0) + !(isinf(l1) && l1 < 0);
  free(out), free(ob), free(want), free(lse), free(lb), free(wl);
  return kc_finish("kern_attnmerge_ref", bad);
}
