/* tests/kernels/test_crossentropy_ref.c: fused softmax + cross-entropy.
 * Forward against a worked value (uniform logits over V: loss = log V);
 * backward against finite differences of the mean loss, with one ignored
 * row (target -1) whose gradient must be exactly 0. Split by vocabulary
 * (tensor parallelism): the slices' parts merged give the whole row's lse
 * and loss (to fp32 rounding: the sums run in another order), and each
 * slice's backward from the same lse equals the whole's columns bit for
 * bit. */
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

/* P slices of the vocabulary (the last takes the remainder), each rank's
 * columns copied out as a TP rank holds them, against the whole rows:
 * c->losses and c->lse hold the whole forward, dl its backward (1/N). */
static int split(ctx_t *c, const float *dl, int P) {
  int N = c->N, V = c->V;
  float *parts = kc_zeros(2L * P * N), *losses = kc_zeros(N), *lse = kc_zeros(N);
  float *slice = kc_zeros((long)N * V), *dslice = kc_zeros((long)N * V), *dwant = kc_zeros((long)N * V);
  int bad = 0;
  printf("split over %d slices of the vocabulary\n", P);
  for (int p = 0, v0 = 0; p < P; p++) {
    int len = p == P - 1 ? V - v0 : V / P;
    for (int n = 0; n < N; n++)
      for (int j = 0; j < len; j++) slice[(long)n * len + j] = c->logits[(long)n * V + v0 + j];
    kern_crossentropy_part_ref(parts + 2L * p * N, slice, c->tgt, v0, N, len);
    kern_crossentropy_bwd_ref(dslice, slice, c->lse, c->tgt, v0, 1.0f / N, N, len);
    for (int n = 0; n < N; n++)
      for (int j = 0; j < len; j++) dwant[(long)n * len + j] = dl[(long)n * V + v0 + j];
    bad += kc_compare("slice's dlogits == the whole's columns", dslice, dwant, (long)N * len, 0, 0);
    v0 += len;
  }
  kern_crossentropy_merge_ref(losses, lse, parts, c->tgt, P, N);
  bad += kc_compare("merged lse", lse, c->lse, N, 1e-6f, 1e-6f) +
         kc_compare("merged losses", losses, c->losses, N, 1e-6f, 1e-6f);
  free(parts), free(losses), free(lse), free(slice), free(dslice), free(dwant);
  return bad;
}

static int run(int N, int V, kc_rng *r) {
  ctx_t c = {N, V, kc_rand(r, (long)N * V, -4, 4), kc_zeros(N), kc_zeros(N), malloc(sizeof(int) * N)};
  printf("shape N=%d V=%d\n", N, V);
  for (int n = 0; n < N; n++) c.tgt[n] = (int)(kc_uniform(r, 0, 1) * V) % V;
  c.tgt[N / 2] = -1;
  loss(&c);
  float *dl = kc_zeros((long)N * V);
  kern_crossentropy_bwd_ref(dl, c.logits, c.lse, c.tgt, 0, 1.0f / N, N, V);
  int bad = kc_fd_check("dlogits", c.logits, dl, (long)N * V, loss, &c, r, 40);
  float *zero = kc_zeros(V);
  bad += kc_compare("ignored row: dlogits == 0", dl + (long)(N / 2) * V, zero, V, 0, 0);
  loss(&c); /* the whole forward again: the differences above left it perturbed */
  bad += split(&c, dl, 3);
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
