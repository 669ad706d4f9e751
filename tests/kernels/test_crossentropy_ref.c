/* tests/kernels/test_crossentropy_ref.c: fused softmax + cross-entropy.
 * Forward against a worked value (uniform logits over V: loss = log V);
 * backward against finite differences of the mean loss, with one ignored
 * row (target -1) whose gradient must be exactly 0. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "kern_check.h"
#include "kernels/crossentropy.h"

typedef struct { int N, V; float *logits, *losses, *lse; int *tgt; } ctx_t;

static double loss(void *p) {
  ctx_t *c = p;
  kern_crossentropy_fwd_ref(c->losses, c->lse, c->logits, c->tgt, c->N, c->V);
  double s = 0.0;
  for (int n = 0; n < c->N; n++) s += c->losses[n];
  return s / c->N;
}

static int run(int N, int V, kc_rng *r) {
  ctx_t c = {N, V, kc_rand(r, (long)N * V, -4, 4), kc_zeros(N), kc_zeros(N), malloc(sizeof(int) * N)};
  printf("shape N=%d V=%d\n", N, V);
  for (int n = 0; n < N; n++) c.tgt[n] = (int)(kc_uniform(r, 0, 1) * V) % V;
  c.tgt[N / 2] = -1;
  loss(&c);
  float *dl = kc_zeros((long)N * V);
  kern_crossentropy_bwd_ref(dl, c.logits, c.lse, c.tgt, 1.0f / N, N, V);
  int bad = kc_fd_check("dlogits", c.logits, dl, (long)N * V, loss, &c, r, 40);
  float *zero = kc_zeros(V);
  bad += kc_compare("ignored row: dlogits == 0", dl + (long)(N / 2) * V, zero, V, 0, 0);
  free(zero), free(c.logits), free(c.losses), free(c.lse), free(c.tgt), free(dl);
  return bad;
}

int main(void) {
  kc_rng r = {4};
  /* Uniform logits: softmax = 1/V everywhere, so loss = log V exactly. */
  int V = 50, tgt = 7;
  float x[50] = {0}, l, lse, expect = logf(50.0f);
  kern_crossentropy_fwd_ref(&l, &lse, x, &tgt, 1, V);
  int bad = kc_compare("uniform logits loss=log(V)", &l, &expect, 1, 1e-6f, 1e-6f);
  bad += run(4, 11, &r) + run(6, 300, &r);
  return kc_finish("kern_crossentropy_ref", bad);
}
