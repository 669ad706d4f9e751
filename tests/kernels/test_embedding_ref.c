/* tests/kernels/test_embedding_ref.c: the embedding reference backward
 * against finite differences of its forward. The forward is linear in wte
 * and wpe, so the differences are exact up to fp32 rounding of the loss.
 * Split by vocabulary (tensor parallelism): the slices' outputs summed
 * (the position table on the first slice only) equal the whole table's,
 * and the slices' gradients laid end to end equal the whole's, bit for
 * bit (each output element is one value plus zeros). */
#include <stdlib.h>
#include <stdio.h>
#include "kern_check.h"
#include "kernels/embedding.h"

typedef struct { int B, T, C, V; int *tok; float *wte, *wpe, *out, *proj; } ctx_t;

static double loss(void *p) {
  ctx_t *c = p;
  kern_embedding_fwd_ref(c->out, c->tok, c->wte, c->wpe, 0, c->V, c->B, c->T, c->C);
  return kc_dot(c->out, c->proj, (long)c->B * c->T * c->C);
}

/* P slices of the vocabulary (the last takes the remainder) against the
 * whole table: c->out holds the whole forward, dwte and dwpe its gradients
 * of sum(out .* proj). */
static int split(ctx_t *c, const float *dwte, const float *dwpe, int P) {
  long n = (long)c->B * c->T * c->C, nw = (long)c->V * c->C;
  float *whole = kc_zeros(n), *sum = kc_zeros(n), *part = kc_zeros(n);
  float *gte = kc_zeros(nw), *gpe = kc_zeros((long)c->T * c->C);
  kern_embedding_fwd_ref(whole, c->tok, c->wte, c->wpe, 0, c->V, c->B, c->T, c->C);
  printf("split over %d slices of the vocabulary\n", P);
  for (int p = 0, v0 = 0; p < P; p++) {
    int len = p == P - 1 ? c->V - v0 : c->V / P;
    kern_embedding_fwd_ref(part, c->tok, c->wte + (long)v0 * c->C, p == 0 ? c->wpe : NULL, v0, len, c->B,
                           c->T, c->C);
    for (long i = 0; i < n; i++) sum[i] += part[i];
    kern_embedding_bwd_ref(gte + (long)v0 * c->C, p == 0 ? gpe : NULL, c->proj, c->tok, v0, len, c->B, c->T,
                           c->C);
    v0 += len;
  }
  int bad = kc_compare("slices summed == whole forward", sum, whole, n, 0, 0) +
            kc_compare("slices' dwte == whole dwte", gte, dwte, nw, 0, 0) +
            kc_compare("first slice's dwpe == whole dwpe", gpe, dwpe, (long)c->T * c->C, 0, 0);
  free(whole), free(sum), free(part), free(gte), free(gpe);
  return bad;
}

static int run(int B, int T, int C, int V, kc_rng *r) {
  ctx_t c = {.B = B, .T = T, .C = C, .V = V};
  long n = (long)B * T * C;
  printf("shape B=%d T=%d C=%d V=%d\n", B, T, C, V);
  c.tok = malloc(sizeof(int) * B * T);
  for (int i = 0; i < B * T; i++) c.tok[i] = (int)(kc_uniform(r, 0, 1) * V) % V;
  c.tok[0] = c.tok[B * T - 1]; /* a repeated token: its gradient rows must add */
  c.wte = kc_rand(r, (long)V * C, -1, 1);
  c.wpe = kc_rand(r, (long)T * C, -1, 1);
  c.out = kc_zeros(n);
  c.proj = kc_rand(r, n, -1, 1);
  float *dwte = kc_zeros((long)V * C), *dwpe = kc_zeros((long)T * C);
  kern_embedding_bwd_ref(dwte, dwpe, c.proj, c.tok, 0, V, B, T, C);
  int bad = kc_fd_check("dwte", c.wte, dwte, (long)V * C, loss, &c, r, 40) +
            kc_fd_check("dwpe", c.wpe, dwpe, (long)T * C, loss, &c, r, 40);
  bad += split(&c, dwte, dwpe, 3);
  free(c.tok), free(c.wte), free(c.wpe), free(c.out), free(c.proj), free(dwte), free(dwpe);
  return bad;
}

int main(void) {
  kc_rng r = {1};
  int bad = run(2, 3, 5, 7, &r) + run(3, 17, 24, 50, &r);
  return kc_finish("kern_embedding_ref", bad);
}
