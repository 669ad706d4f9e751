/* tests/kernels/test_layernorm_ref.c: the residual + LayerNorm reference
 * backward against finite differences of its forward, for inp, skip, w, b
 * (d inp and d skip are the same dres: the add passes gradients through);
 * and the residual + RMSNorm reference likewise for inp, skip, w. With the
 * skip branch dropped (the fused bias-dropout-add): the forward equal, bit
 * for bit, to kern_dropout_ref then the add and norm, the same kept mask,
 * and d skip (dres through the mask) against finite differences too. */
#include <stdio.h>
#include <stdlib.h>
#include "kern_check.h"
#include <string.h>
#include "kernels/layernorm.h"

typedef struct {
  int N, C, rms;
  float *inp, *skip, *w, *b, *res, *out, *mean, *rstd, *proj;
  const kern_dropout *drop;
  uint8_t *mask;
} ctx_t;

static double loss(void *p) {
  ctx_t *c = p;
  if (c->rms) {
    kern_rmsnorm_fwd_ref(c->res, c->out, c->rstd, c->inp, c->skip, c->drop, c->mask, c->w, c->N, c->C);
    return kc_dot(c->out, c->proj, (long)c->N * c->C);
  }
  kern_layernorm_fwd_ref(c->res, c->out, c->mean, c->rstd, c->inp, c->skip, c->drop, c->mask, c->w, c->b,
                         c->N, c->C);
  return kc_dot(c->out, c->proj, (long)c->N * c->C);
}

/* The fused forward with drop against kern_dropout_ref, the add and the
 * norm run apart: every output and the mask equal, bit for bit. */
static int check_fused(ctx_t *c) {
  long n = (long)c->N * c->C;
  float *z = kc_zeros(n), *res = kc_zeros(n), *out = kc_zeros(n), *mean = kc_zeros(c->N), *rstd = kc_zeros(c->N);
  uint8_t *mask = malloc((size_t)n);
  kern_dropout_ref(z, mask, c->skip, n, *c->drop);
  for (long i = 0; i < n; i++) res[i] = c->inp[i] + z[i];
  if (c->rms) kern_rmsnorm_fwd_ref(NULL, out, rstd, res, NULL, NULL, NULL, c->w, c->N, c->C);
  else kern_layernorm_fwd_ref(NULL, out, mean, rstd, res, NULL, NULL, NULL, c->w, c->b, c->N, c->C);
  long differ = 0;
  for (long i = 0; i < n; i++) differ += res[i] != c->res[i] || out[i] != c->out[i] || mask[i] != c->mask[i];
  for (long i = 0; i < c->N; i++) differ += rstd[i] != c->rstd[i] || (!c->rms && mean[i] != c->mean[i]);
  printf("  fused dropout vs dropout then add and norm: values differing expected 0, got %ld\n", differ);
  free(z), free(res), free(out), free(mean), free(rstd), free(mask);
  return differ != 0;
}

static int run(int N, int C, int with_skip, int rms, float p, kc_rng *r) {
  long n = (long)N * C;
  ctx_t c = {.N = N, .C = C, .rms = rms};
  printf("%s: shape N=%d C=%d skip=%d dropout %.2f\n", rms ? "RMSNorm" : "LayerNorm", N, C, with_skip, p);
  c.inp = kc_rand(r, n, -2, 2);
  c.skip = with_skip ? kc_rand(r, n, -1, 1) : NULL;
  c.w = kc_rand(r, C, 0.5f, 1.5f);
  c.b = kc_rand(r, C, -0.5f, 0.5f);
  c.res = kc_zeros(n), c.out = kc_zeros(n), c.mean = kc_zeros(N), c.rstd = kc_zeros(N);
  c.proj = kc_rand(r, n, -1, 1);
  kern_dropout d = kern_dropout_make(p, 99, kern_dropout_site(3, KERN_DROP_AFTER_ATTN), 4);
  d.base = 1001; /* not a multiple of 4: a row's first Philox call is shared with the previous row */
  if (p > 0) c.drop = &d, c.mask = malloc((size_t)n);
  loss(&c);
  int bad = p > 0 ? check_fused(&c) : 0;
  float *dres = kc_zeros(n), *dw = kc_zeros(C), *db = kc_zeros(C), *dskip = kc_zeros(n);
  if (rms)
    kern_rmsnorm_bwd_ref(dres, dw, c.proj, with_skip ? c.res : c.inp, c.w, c.rstd, N, C);
  else
    kern_layernorm_bwd_ref(dres, dw, db, c.proj, with_skip ? c.res : c.inp, c.w, c.mean, c.rstd,
                           N, C);
  if (p > 0) kern_dropout_masked_ref(dskip, dres, c.mask, n, d.scale);
  else memcpy(dskip, dres, sizeof(float) * (size_t)n);
  bad += kc_fd_check("dinp", c.inp, dres, n, loss, &c, r, 30) +
         (with_skip ? kc_fd_check("dskip", c.skip, dskip, n, loss, &c, r, 30) : 0) +
         kc_fd_check("dw", c.w, dw, C, loss, &c, r, 30) +
         (rms ? 0 : kc_fd_check("db", c.b, db, C, loss, &c, r, 30));
  free(c.inp), free(c.skip), free(c.w), free(c.b), free(c.res), free(c.out), free(c.mean);
  free(c.rstd), free(c.proj), free(dres), free(dw), free(db), free(dskip), free(c.mask);
  return bad;
}

int main(void) {
  kc_rng r = {2};
  int bad = run(3, 7, 1, 0, 0, &r) + run(5, 64, 1, 0, 0, &r) + run(4, 33, 0, 0, 0, &r) +
            run(3, 7, 1, 1, 0, &r) + run(5, 64, 1, 1, 0, &r) + run(4, 33, 0, 1, 0, &r) +
            run(5, 64, 1, 0, 0.3f, &r) + run(3, 7, 1, 1, 0.3f, &r);
  return kc_finish("kern_layernorm_ref", bad);
}
