/* tests/kernels/test_optimizer_ref.c: AdamW and LAMB references against
 * closed forms. At step 1 the bias-corrected moments are m^ = g, v^ = g^2,
 * so u = g / (|g| + eps) + wd w exactly (computed here in double):
 *   AdamW: w1 = w0 - lr u
 *   LAMB:  w1 = w0 - lr (||w0|| / ||u||) u    per tensor.
 * Then step 2 on a list of three tensors in one call must equal one call
 * per tensor (the fused list changes nothing but the launch count). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "kern_check.h"
#include "kernels/optimizer.h"

static const kern_opt_hparams HP = {1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 1};

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

int main(void) {
  kc_rng r = {7};
  int bad = step1(0, 100, &r) + step1(1, 100, &r) + step1(1, 7, &r);
  bad += fused_list(0, &r) + fused_list(1, &r);
  return kc_finish("kern_optimizer_ref", bad);
}
