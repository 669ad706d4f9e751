/* tests/kernels/test_dropout_ref.c: the dropout generator and reference:
 * Philox4x32-10 against Random123's published known answers, the kept
 * fraction and the mean against their expectations, masks that depend on
 * seed, site and step, a slice of a call equal to the call on the slice's
 * indices (what lets tensor and sequence parallelism drop the elements a
 * single rank drops), p = 0 the identity, and the backward (the same call
 * on the gradient, or the kept mask applied) against finite differences;
 * and the fused dropout-add equal to dropout then add, bit for bit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kern_check.h"
#include "kernels/dropout.h"

static int philox_kat(void) {
  /* Random123's kat_vectors for philox4x32_10: counter, key, answer */
  static const uint32_t kat[3][10] = {
      {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
      {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d, 0x41c83b0e, 0xa20bc7c6,
       0x6d5451fd},
      {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09, 0x94fdcceb, 0x5001e420,
       0x24126ea1}};
  int bad = 0;
  for (int t = 0; t < 3; t++) {
    uint32_t c[4] = {kat[t][0], kat[t][1], kat[t][2], kat[t][3]};
    kern_philox4x32_10(c, kat[t][4], kat[t][5]);
    int ok = !memcmp(c, kat[t] + 6, sizeof c);
    printf("philox4x32-10 known answer %d (Random123 kat_vectors): expected %08x %08x %08x %08x, got %08x %08x "
           "%08x %08x: %s\n", t, kat[t][6], kat[t][7], kat[t][8], kat[t][9], c[0], c[1], c[2], c[3],
           ok ? "ok" : "MISMATCH");
    bad += !ok;
  }
  return bad;
}

/* Kept fraction and mean of dropout on ones: within 5 binomial sigmas. */
static int statistics(float p, long n) {
  float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
  for (long i = 0; i < n; i++) x[i] = 1.0f;
  kern_dropout d = kern_dropout_make(p, 1234, kern_dropout_site(7, KERN_DROP_AFTER_MLP), 3);
  d.base = 1LL << 33; /* the counter's high word in use */
  kern_dropout_ref(y, NULL, x, n, d);
  long kept = 0;
  double sum = 0.0;
  for (long i = 0; i < n; i++) kept += y[i] != 0.0f, sum += y[i];
  double frac = (double)kept / n, sd = sqrt(p * (1.0 - p) / n), mean = sum / n;
  int bad = fabs(frac - (1.0 - p)) > 5 * sd || fabs(mean - 1.0) > 5 * sd / (1.0 - p);
  printf("p %.2f over %ld elements: kept fraction expected %.4f (1 - p) +- %.4f (5 sigma), got %.4f; mean "
         "expected 1 (inverted dropout), got %.4f: %s\n", p, n, 1.0 - p, 5 * sd, frac, mean, bad ? "FAIL" : "ok");
  free(x), free(y);
  return bad;
}

/* Fraction of n elements where two descriptors agree (both keep or both drop). */
static double agreement(kern_dropout a, kern_dropout b, long n) {
  long same = 0;
  for (long i = 0; i < n; i++) same += (kern_dropout_mult(&a, a.base + i) != 0) == (kern_dropout_mult(&b, b.base + i) != 0);
  return (double)same / n;
}

static int independence(void) {
  long n = 100000;
  kern_dropout d = kern_dropout_make(0.1f, 99, kern_dropout_site(2, KERN_DROP_ATTN), 5);
  kern_dropout seed = d, site = d, step = d;
  seed.seed_hi ^= 1, site.site = kern_dropout_site(2, KERN_DROP_AFTER_ATTN), step.step = 6;
  /* independent masks agree on p^2 + (1 - p)^2 = 0.82 of the elements */
  double want = 0.82, got[4] = {agreement(d, d, n), agreement(d, seed, n), agreement(d, site, n),
                                agreement(d, step, n)};
  const char *what[4] = {"the same descriptor", "another seed", "another site", "another step"};
  int bad = 0;
  for (int k = 0; k < 4; k++) {
    double w = k == 0 ? 1.0 : want;
    int b = fabs(got[k] - w) > (k == 0 ? 0.0 : 0.01);
    printf("masks agree with %s: expected %.2f, got %.4f: %s\n", what[k], w, got[k], b ? "FAIL" : "ok");
    bad += b;
  }
  return bad;
}

/* A call on elements [base + 1000, base + 1000 + 500) equals elements
 * 1000 .. 1499 of a call from base. */
static int slices(kc_rng *r) {
  long n = 4000;
  float *x = kc_rand(r, n, -1, 1), *whole = kc_zeros(n), *part = kc_zeros(500);
  kern_dropout d = kern_dropout_make(0.3f, 7, kern_dropout_site(0, KERN_DROP_EMBED), 1);
  d.base = 123456789;
  kern_dropout_ref(whole, NULL, x, n, d);
  d.base += 1000;
  kern_dropout_ref(part, NULL, x + 1000, 500, d);
  int bad = kc_compare("slice of a call = the call on the slice's indices", part, whole + 1000, 500, 0, 0);
  float *same = kc_copy(x, n);
  kern_dropout_ref(same, NULL, same, n, kern_dropout_make(0.0f, 7, 0, 1));
  bad += kc_compare("p = 0 is the identity", same, x, n, 0, 0);
  free(x), free(whole), free(part), free(same);
  return bad;
}

/* kern_dropout_add_ref = kern_dropout_ref then the add, mask included, at
 * p 0.2 and 0 (where nothing is drawn and every element is kept), in place. */
static int fused_add(kc_rng *r) {
  long n = 1001;
  int bad = 0;
  for (int k = 0; k < 2; k++) {
    float *x = kc_rand(r, n, -1, 1), *z = kc_rand(r, n, -1, 1), *want = kc_zeros(n), *got = kc_copy(x, n);
    uint8_t *mw = malloc((size_t)n), *mg = malloc((size_t)n);
    kern_dropout d = kern_dropout_make(k ? 0.0f : 0.2f, 3, kern_dropout_site(4, KERN_DROP_AFTER_MLP), 2);
    d.base = 77;
    kern_dropout_ref(want, mw, z, n, d);
    for (long i = 0; i < n; i++) want[i] += x[i];
    kern_dropout_add_ref(got, mg, got, z, n, d); /* out aliasing x */
    printf("dropout-add, p %.1f:\n", d.p);
    bad += kc_compare("  x + dropout(z) = dropout then add", got, want, n, 0, 0);
    bad += kc_compare_bytes("kept mask", mg, mw, n);
    free(x), free(z), free(want), free(got), free(mw), free(mg);
  }
  return bad;
}

typedef struct { long n; kern_dropout d; float *x, *y, *proj; } ctx_t;

static double loss(void *p) {
  ctx_t *c = p;
  kern_dropout_ref(c->y, NULL, c->x, c->n, c->d);
  return kc_dot(c->y, c->proj, c->n);
}

static int backward(kc_rng *r) {
  long n = 300;
  ctx_t c = {n, kern_dropout_make(0.25f, 5, kern_dropout_site(1, KERN_DROP_AFTER_ATTN), 9), kc_rand(r, n, -2, 2),
             kc_zeros(n), kc_rand(r, n, -1, 1)};
  float *dx = kc_zeros(n);
  kern_dropout_ref(dx, NULL, c.proj, n, c.d);
  int bad = kc_fd_check("dx", c.x, dx, n, loss, &c, r, 60);
  /* the backward from the forward's kept mask equals the one drawn again */
  unsigned char *mask = malloc((size_t)n);
  float *dxm = kc_zeros(n);
  kern_dropout_ref(c.y, mask, c.x, n, c.d);
  kern_dropout_masked_ref(dxm, c.proj, mask, n, c.d.scale);
  bad += kc_compare("backward from the kept mask = drawn again", dxm, dx, n, 0, 0);
  free(mask), free(dxm);
  free(c.x), free(c.y), free(c.proj), free(dx);
  return bad;
}

int main(void) {
  kc_rng r = {31};
  int bad = philox_kat() + statistics(0.1f, 1000000) + statistics(0.5f, 200000) + independence() + slices(&r) +
            backward(&r) + fused_add(&r);
  return kc_finish("kern_dropout_ref", bad);
}
