/* tests/kernels/test_rope_ref.c: the rotary embedding reference against a
 * hand-worked turn, its backward (the inverse turn) against finite
 * differences of the forward, and the inverse undoing the forward. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kern_check.h"
#include "kernels/rope.h"

typedef struct { int N, T, H, HS; double base; float *x, *y, *proj; } ctx_t;

static double loss(void *p) {
  ctx_t *c = p;
  long n = (long)c->N * c->H * c->HS;
  memcpy(c->y, c->x, sizeof(float) * n);
  kern_rope_ref(c->y, c->N, c->T, 0, c->H, c->HS, c->base, 0);
  return kc_dot(c->y, c->proj, n);
}

static int run(int B, int T, int H, int HS, double base, kc_rng *r) {
  long n = (long)B * T * H * HS;
  ctx_t c = {B * T, T, H, HS, base, kc_rand(r, n, -2, 2), kc_zeros(n), kc_rand(r, n, -1, 1)};
  printf("shape B=%d T=%d H=%d HS=%d base=%g\n", B, T, H, HS, base);
  float *dx = kc_zeros(n), *back = kc_zeros(n);
  memcpy(dx, c.proj, sizeof(float) * n);
  kern_rope_ref(dx, c.N, T, 0, H, HS, base, 1); /* the backward: the inverse turn of the output gradient */
  int bad = kc_fd_check("dx", c.x, dx, n, loss, &c, r, 40);
  loss(&c);
  memcpy(back, c.y, sizeof(float) * n);
  kern_rope_ref(back, c.N, T, 0, H, HS, base, 1);
  bad += kc_compare("inverse(forward(x)) = x", back, c.x, n, 1e-5f, 1e-5f);
  free(c.x), free(c.y), free(c.proj), free(dx), free(back);
  return bad;
}

int main(void) {
  kc_rng r = {21};
  /* By hand: HS 4, base 10000, one sequence of 2. Token 1's pairs turn by
   * 1 rad (i = 0) and 10000^(-1/2) = 0.01 rad (i = 1); token 0 stays. */
  float x[16] = {1, 0, 0, 0, 0, 1, 0, 0, /* token 0, heads 0 and 1 */ 1, 0, 0, 0, 0, 1, 0, 0};
  float want[16] = {1, 0, 0, 0, 0, 1, 0, 0, (float)cos(1.0), 0, (float)sin(1.0), 0, 0, (float)cos(0.01), 0,
                    (float)sin(0.01)};
  kern_rope_ref(x, 2, 2, 0, 2, 4, 10000.0, 0);
  int bad = kc_compare("hand-worked turn (HS 4, t 0 and 1)", x, want, 16, 1e-6f, 1e-6f);
  bad += run(2, 5, 3, 8, 10000.0, &r) + run(1, 33, 2, 16, 500000.0, &r);
  /* A block of each sequence from place t0 (a context-parallel rank's
   * rows) turns as those rows of the whole sequences do. */
  {
    int B = 2, T = 12, H = 2, HS = 8, t0 = 4, Tb = 3;
    long row = (long)H * HS, n = (long)B * T * row;
    float *whole = kc_rand(&r, n, -2, 2), *block = kc_zeros((long)B * Tb * row), *want = kc_zeros((long)B * Tb * row);
    for (int b = 0; b < B; b++)
      memcpy(block + (long)b * Tb * row, whole + ((long)b * T + t0) * row, sizeof(float) * Tb * row);
    kern_rope_ref(whole, B * T, T, 0, H, HS, 10000.0, 0);
    for (int b = 0; b < B; b++)
      memcpy(want + (long)b * Tb * row, whole + ((long)b * T + t0) * row, sizeof(float) * Tb * row);
    kern_rope_ref(block, B * Tb, Tb, t0, H, HS, 10000.0, 0);
    printf("a block of 3 rows from t0 4 of two sequences of 12 (expected: the whole sequences' turn of those rows)\n");
    bad += kc_compare("block at t0", block, want, (long)B * Tb * row, 0, 0);
    free(whole), free(block), free(want);
  }
  return kc_finish("kern_rope_ref", bad);
}
