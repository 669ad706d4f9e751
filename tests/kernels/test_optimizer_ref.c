/* tests/kernels/test_optimizer_ref.c: AdamW and LAMB references against
 * closed forms. At step 1 the bias-corrected moments are m^ = g, v^ = g^2,
 * so u = g / (|g| + eps) + wd w exactly (computed here in double):
 *   AdamW: w1 = w0 - lr u
 *   LAMB:  w1 = w0 - lr (||w0|| / ||u||) u    per tensor.
 * Then step 2 on a list of three tensors in one call must equal one call
 * per tensor (the fused list changes nothing but the launch count).
 * Clipping: kern_grad_sumsq_ref on a worked case (3, 4 -> 25), and a step
 * with grad_scale s equal, bit for bit, to the step on gradients times s
 * (s a power of two: the product is exact). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "kern_check.h"
#include "kernels/optimizer.h"

static const kern_opt_hparams HP = {1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, 1.0f};

static kern_opt_tensor make(long n, kc_rng *r) {
  kern_opt_tensor t = {kc_rand(r, n, -1, 1), kc_rand(r, n, -1, 1), kc_zeros(n), kc_zeros(n),
                       malloc(sizeof(kern_bf16) * n), n};
  return t;
}

static void drop(kern_opt_tensor *t) {
  free(t->param), free((float *)t->grad), free(t->m), free(t->v), free(t->param_bf16);
}

static int step1(int lamb, long n, kc_rng *r) {
  kern_opt_tensor t = make(n, r);
  float *expect = kc_zeros(n), *bf = kc_zeros(n);
  double w2 = 0, u2 = 0;
  for (long i = 0; i < n; i++) {
    double g = t.grad[i], u = g / (fabs(g) + HP.eps) + HP.weight_decay * t.param[i];
    w2 += (double)t.param[i] * t.param[i], u2 += u * u;
  }
  double ratio = lamb ? sqrt(w2) / sqrt(u2) : 1.0;
  for (long i = 0; i < n; i++) {
    double g = t.grad[i], u = g / (fabs(g) + HP.eps) + HP.weight_decay * t.param[i];
    expect[i] = (float)(t.param[i] - HP.lr * ratio * u);
  }
  printf("%s step 1, n=%ld, trust ratio %.6f (closed form)\n", lamb ? "LAMB" : "AdamW", n, ratio);
  lamb ? kern_lamb_ref(&t, 1, HP) : kern_adamw_ref(&t, 1, HP);
  for (long i = 0; i < n; i++) bf[i] = kern_bf16_to_float(t.param_bf16[i]);
  int bad = kc_compare("w1 vs closed form", t.param, expect, n, 1e-6f, 1e-5f);
  kc_round_bf16(expect, n);
  bad += kc_compare("bf16 copy", bf, expect, n, 0, 1e-2f); /* one bf16 rounding apart at most */
  drop(&t), free(expect), free(bf);
  return bad;
}

static int fused_list(int lamb, kc_rng *r) {
  long ns[3] = {5, 130, 1000};
  kern_opt_tensor a[3], b[3];
  int bad = 0;
  for (int k = 0; k < 3; k++) {
    a[k] = make(ns[k], r);
    b[k] = make(ns[k], r);
    for (long i = 0; i < ns[k]; i++)
      b[k].param[i] = a[k].param[i], ((float *)b[k].grad)[i] = a[k].grad[i],
      b[k].m[i] = a[k].m[i] = 0.01f * a[k].grad[i], b[k].v[i] = a[k].v[i] = 0.02f;
  }
  kern_opt_hparams hp = HP;
  hp.step = 2;
  lamb ? kern_lamb_ref(a, 3, hp) : kern_adamw_ref(a, 3, hp);
  for (int k = 0; k < 3; k++) lamb ? kern_lamb_ref(&b[k], 1, hp) : kern_adamw_ref(&b[k], 1, hp);
  for (int k = 0; k < 3; k++) {
    char what[64];
    snprintf(what, sizeof what, "%s list vs single [%d]", lamb ? "LAMB" : "AdamW", k);
    bad += kc_compare(what, a[k].param, b[k].param, ns[k], 0, 0);
    drop(&a[k]), drop(&b[k]);
  }
  return bad;
}

static int clipping(kc_rng *r) {
  float g[2] = {3.0f, 4.0f}, sums[2];
  kern_opt_tensor w = {g, g, g, g, NULL, 2}, one = {g, g, g, g, NULL, 1};
  kern_opt_tensor two[2] = {w, one};
  kern_grad_sumsq_ref(two, 2, sums);
  int bad = fabsf(sums[0] - 25.0f) > 0 || fabsf(sums[1] - 9.0f) > 0;
  printf("sum of g^2: (3, 4) expected 25, got %g; (3) expected 9, got %g: %s\n", sums[0], sums[1],
         bad ? "FAIL" : "ok");
  for (int lamb = 0; lamb < 2; lamb++) {
    /* step 3 with the moments under way (Adam's step 1 ignores the
     * gradient's scale): a with grad_scale 0.25, b on gradients x 0.25, c
     * unscaled */
    long n = 300;
    kern_opt_tensor t[3] = {make(n, r), make(n, r), make(n, r)};
    for (long i = 0; i < n; i++)
      for (int k = 1; k < 3; k++) {
        t[k].param[i] = t[0].param[i], ((float *)t[k].grad)[i] = (k == 1 ? 0.25f : 1.0f) * t[0].grad[i];
        t[0].m[i] = t[k].m[i] = 0.01f * t[0].grad[(i + 7) % n], t[0].v[i] = t[k].v[i] = 1e-4f * (1 + i % 5);
      }
    kern_opt_hparams hp[3] = {HP, HP, HP};
    hp[0].grad_scale = 0.25f;
    for (int k = 0; k < 3; k++) {
      hp[k].step = 3;
      lamb ? kern_lamb_ref(&t[k], 1, hp[k]) : kern_adamw_ref(&t[k], 1, hp[k]);
    }
    bad += kc_compare(lamb ? "LAMB, grad_scale 0.25 = gradients x 0.25" : "AdamW, grad_scale 0.25 = gradients x 0.25",
                      t[0].param, t[1].param, n, 0, 0);
    double moved = 0;
    for (long i = 0; i < n; i++) moved = fmax(moved, fabs((double)t[0].param[i] - t[2].param[i]));
    printf("  unscaled step differs from the scaled one: expected > 1e-6, got %.3g\n", moved);
    bad += !(moved > 1e-6);
    for (int k = 0; k < 3; k++)
      free(t[k].param), free((float *)t[k].grad), free(t[k].m), free(t[k].v), free(t[k].param_bf16);
  }
  return bad;
}

int main(void) {
  kc_rng r = {7};
  int bad0 = clipping(&r);
  int bad = step1(0, 100, &r) + step1(1, 100, &r) + step1(1, 7, &r);
  bad += fused_list(0, &r) + fused_list(1, &r) + bad0;
  return kc_finish("kern_optimizer_ref", bad);
}
