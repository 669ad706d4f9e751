/* tests/kernels/test_layernorm_ref.c: the residual + LayerNorm reference
 * backward against finite differences of its forward, for inp, skip, w, b
 * (d inp and d skip are the same dres: the add passes gradients through);
 * and the residual + RMSNorm reference likewise for inp, skip, w. */
#include <stdio.h>
#include <stdlib.h>
#include "kern_check.h"
#include "kernels/layernorm.h"

typedef struct { int N, C, rms; float *inp, *skip, *w, *b, *res, *out, *mean, *rstd, *proj; } ctx_t;

static double loss(void *p) {
  ctx_t *c = p;
  if (c->rms) {
    kern_rmsnorm_fwd_ref(c->res, c->out, c->rstd, c->inp, c->skip, c->w, c->N, c->C);
    return kc_dot(c->out, c->proj, (long)c->N * c->C);
  }
  kern_layernorm_fwd_ref(c->res, c->out, c->mean, c->rstd, c->inp, c->skip, c->w, c->b, c->N,
                         c->C);
  return kc_dot(c->out, c->proj, (long)c->N * c->C);
}

static int run(int N, int C, int with_skip, int rms, kc_rng *r) {
  long n = (long)N * C;
  ctx_t c = {.N = N, .C = C, .rms = rms};
  printf("%s: shape N=%d C=%d skip=%d\n", rms ? "RMSNorm" : "LayerNorm", N, C, with_skip);
  c.inp = kc_rand(r, n, -2, 2);
  c.skip = with_skip ? kc_rand(r, n, -1, 1) : NULL;
  c.w = kc_rand(r, C, 0.5f, 1.5f);
  c.b = kc_rand(r, C, -0.5f, 0.5f);
  c.res = kc_zeros(n), c.out = kc_zeros(n), c.mean = kc_zeros(N), c.rstd = kc_zeros(N);
  c.proj = kc_rand(r, n, -1, 1);
  loss(&c);
  float *dres = kc_zeros(n), *dw = kc_zeros(C), *db = kc_zeros(C);
  if (rms)
    kern_rmsnorm_bwd_ref(dres, dw, c.proj, with_skip ? c.res : c.inp, c.w, c.rstd, N, C);
  else
    kern_layernorm_bwd_ref(dres, dw, db, c.proj, with_skip ? c.res : c.inp, c.w, c.mean, c.rstd,
                           N, C);
  int bad = kc_fd_check("dinp", c.inp, dres, n, loss, &c, r, 30) +
            (with_skip ? kc_fd_check("dskip", c.skip, dres, n, loss, &c, r, 30) : 0) +
            kc_fd_check("dw", c.w, dw, C, loss, &c, r, 30) +
            (rms ? 0 : kc_fd_check("db", c.b, db, C, loss, &c, r, 30));
  free(c.inp), free(c.skip), free(c.w), free(c.b), free(c.res), free(c.out), free(c.mean);
  free(c.rstd), free(c.proj), free(dres), free(dw), free(db);
  return bad;
}

int main(void) {
  kc_rng r = {2};
  int bad = run(3, 7, 1, 0, &r) + run(5, 64, 1, 0, &r) + run(4, 33, 0, 0, &r) +
            run(3, 7, 1, 1, &r) + run(5, 64, 1, 1, &r) + run(4, 33, 0, 1, &r);
  return kc_finish("kern_layernorm_ref", bad);
}
