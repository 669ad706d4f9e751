/* tests/kernels/test_moe_ref.c: the mixture-of-experts kernels (moe.h).
 * The router's top-k and softmaxes on a hand-worked row (ties go to the
 * lower expert); its backward against finite differences of
 * sum dprobs . probs + sum coef . scores, with one factor per expert (the
 * switch loss) and with a row of factors per token (the sequence-level
 * loss); the permutation kernels on a
 * hand-worked case and as each other's adjoints (<gather x, y> equals
 * <x, combine y> for a permutation and its inverse, the same weights),
 * padding rows 0. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "kern_check.h"
#include "kernels/moe.h"

typedef struct {
  float *logits, *dprobs, *coef, *probs, *scores;
  int *idx, N, E, k, coef_ld;
} route_ctx;

static double route_loss(void *p) {
  route_ctx *c = p;
  kern_moe_route_ref(c->probs, c->idx, c->scores, c->logits, c->N, c->E, c->k);
  double L = 0;
  for (long i = 0; i < (long)c->N * c->k; i++) L += (double)c->dprobs[i] * c->probs[i];
  for (long i = 0; i < (long)c->N * c->E; i++)
    L += (double)c->coef[i / c->E * c->coef_ld + i % c->E] * c->scores[i];
  return L;
}

int main(void) {
  kc_rng r = {37};
  int bad = 0;
  /* by hand: logits 1 3 2 3, top-2: experts 1 and 3 (equal: the lower first), probs 1/2 1/2 */
  float l[4] = {1, 3, 2, 3}, p[2], s[4];
  int ix[2];
  kern_moe_route_ref(p, ix, s, l, 1, 4, 2);
  float Z = expf(1) + 2 * expf(3) + expf(2), want_s[4] = {expf(1) / Z, expf(3) / Z, expf(2) / Z, expf(3) / Z};
  float want_p[2] = {0.5f, 0.5f};
  printf("top-2 of 1 3 2 3: expected experts 1 3, got %d %d\n", ix[0], ix[1]);
  bad += ix[0] != 1 || ix[1] != 3;
  bad += kc_compare("probs of the hand-worked row", p, want_p, 2, 1e-7f, 1e-6f);
  bad += kc_compare("scores of the hand-worked row", s, want_s, 4, 1e-7f, 1e-6f);

  /* backward vs finite differences */
  route_ctx c = {.N = 6, .E = 8, .k = 3};
  long NE = (long)c.N * c.E, Nk = (long)c.N * c.k;
  c.logits = kc_rand(&r, NE, -2, 2), c.dprobs = kc_rand(&r, Nk, -1, 1), c.coef = kc_rand(&r, NE, 0, 2);
  c.probs = kc_zeros(Nk), c.scores = kc_zeros(NE), c.idx = calloc((size_t)Nk, sizeof(int));
  float *dl = kc_zeros(NE);
  for (c.coef_ld = 0; c.coef_ld <= c.E; c.coef_ld += c.E) { /* per expert; per token */
    route_loss(&c);
    kern_moe_route_bwd_ref(dl, c.dprobs, c.probs, c.idx, c.scores, c.coef, c.coef_ld, c.N, c.E, c.k);
    bad += kc_fd_check(c.coef_ld ? "router logits' gradient (top-3 of 8, a row of aux coefficients per token)"
                                  : "router logits' gradient (top-3 of 8, aux coefficients per expert)",
                       c.logits, dl, NE, route_loss, &c, &r, 48);
  }

  /* permutation by hand: x rows 0 1 2 (C 2); gather rows 2 0 -1 with weights 2 1 5 */
  float x[6] = {1, 2, 3, 4, 5, 6}, g[6], w[3] = {2, 1, 5}, want_g[6] = {10, 12, 1, 2, 0, 0};
  int rows[3] = {2, 0, -1};
  kern_moe_gather_ref(g, x, rows, w, 3, 2);
  bad += kc_compare("gather of rows 2 0 pad, weights 2 1 5", g, want_g, 6, 0, 0);
  /* combine, the inverse (k 2): token 0's first pair is row 1, token 2's first row 0, token 1 has none */
  int inv[6] = {1, -1, -1, -1, 0, -1};
  float acc[6] = {9, 9, 9, 9, 9, 9}, want_acc[6] = {1, 2, 0, 0, 20, 24}; /* 1 x (1 2), 0, 2 x (10 12) */
  kern_moe_combine_ref(acc, g, inv, w, 3, 2, 2);
  bad += kc_compare("combine of the same rows, overwriting", acc, want_acc, 6, 0, 0);
  float d[3], want_d[3] = {10 * 5 + 12 * 6, 1 * 1 + 2 * 2, 0};
  kern_moe_rowdot_ref(d, x, rows, g, 3, 2);
  bad += kc_compare("rowdot of x's rows with the gathered rows", d, want_d, 3, 0, 0);

  /* adjoints on random data: 9 tokens of 3 choices, about 60% of the pairs a row, every 5th row padding */
  int N = 9, k = 3, C = 5, M = 0, inv2[27], R[40];
  for (int p = 0; p < N * k; p++) {
    if (M % 5 == 4) R[M++] = -1;
    inv2[p] = kc_uniform(&r, 0, 1) < 0.6f ? M : -1;
    if (inv2[p] >= 0) R[M++] = p / k;
  }
  float *X = kc_rand(&r, (long)N * C, -1, 1), *Y = kc_rand(&r, (long)M * C, -1, 1), *W = kc_rand(&r, M, -1, 1);
  float *GX = kc_zeros((long)M * C), *SY = kc_zeros((long)N * C);
  kern_moe_gather_ref(GX, X, R, W, M, C);
  kern_moe_combine_ref(SY, Y, inv2, W, N, k, C);
  double a = kc_dot(GX, Y, (long)M * C), b = kc_dot(X, SY, (long)N * C);
  printf("%d rows of %d tokens: <gather x, y> = %.9g, <x, combine y> = %.9g (expected equal)\n", M, N, a, b);
  bad += fabs(a - b) > 1e-5 * (fabs(a) + 1);
  free(c.logits), free(c.dprobs), free(c.coef), free(c.probs), free(c.scores), free(c.idx), free(dl);
  free(X), free(Y), free(W), free(GX), free(SY);
  return kc_finish("kern_moe_ref", bad);
}
