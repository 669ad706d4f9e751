/* tests/kernels/kern_check.c: see kern_check.h. */
#include "kern_check.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/kern_common.h"

#define KC_SHOW 5 /* mismatches or samples printed per check */

float kc_uniform(kc_rng *r, float lo, float hi) {
  r->s = r->s * 6364136223846793005ULL + 1442695040888963407ULL; /* Knuth MMIX LCG */
  return lo + (hi - lo) * (float)((r->s >> 40) * (1.0 / 16777216.0));
}

float *kc_rand(kc_rng *r, long n, float lo, float hi) {
  float *x = malloc(sizeof(float) * (n > 0 ? n : 1));
  for (long i = 0; i < n; i++) x[i] = kc_uniform(r, lo, hi);
  return x;
}

float *kc_zeros(long n) { return calloc(n > 0 ? n : 1, sizeof(float)); }

float *kc_copy(const float *x, long n) {
  float *y = malloc(sizeof(float) * (n > 0 ? n : 1));
  memcpy(y, x, sizeof(float) * n);
  return y;
}

void kc_round_bf16(float *x, long n) {
  for (long i = 0; i < n; i++) x[i] = kern_bf16_to_float(kern_float_to_bf16(x[i]));
}

double kc_dot(const float *a, const float *b, long n) {
  double s = 0.0;
  for (long i = 0; i < n; i++) s += (double)a[i] * b[i];
  return s;
}

int kc_compare_bytes(const char *what, const unsigned char *got, const unsigned char *ref, long n) {
  long differ = 0;
  for (long i = 0; i < n; i++) differ += got[i] != ref[i];
  printf("  %s: bytes differing: expected 0, got %ld\n", what, differ);
  return differ != 0;
}

int kc_compare(const char *what, const float *got, const float *ref, long n, float atol,
               float rtol) {
  int bad = 0;
  double maxerr = 0.0;
  long maxi = 0;
  for (long i = 0; i < n; i++) {
    double err = got[i] == ref[i] ? 0.0 : fabs((double)got[i] - ref[i]); /* equal infinities match */
    if (!(err <= atol + rtol * fabs(ref[i]))) { /* NaN fails too */
      if (bad < KC_SHOW)
        printf("    mismatch %-10s [%ld] got %+.6f expected %+.6f\n", what, i, got[i], ref[i]);
      bad++;
    }
    if (err > maxerr || err != err) maxerr = err, maxi = i;
  }
  printf("  %-28s n=%-8ld max|got-ref|=%.3g at [%ld] (got %+.6f expected %+.6f) "
         "tol %.0e+%.0e|ref| -> %d mismatches\n",
         what, n, maxerr, maxi, n ? got[maxi] : 0.0f, n ? ref[maxi] : 0.0f, atol, rtol, bad);
  return bad;
}

static void fd_one(float *x, long i, kc_loss_fn loss, void *ctx, double *fd) {
  float x0 = x[i], xp = x0 + KC_FD_EPS, xm = x0 - KC_FD_EPS;
  x[i] = xp;
  double lp = loss(ctx);
  x[i] = xm;
  double lm = loss(ctx);
  x[i] = x0;
  *fd = (lp - lm) / ((double)xp - xm); /* the step actually taken in fp32 */
}

int kc_fd_check(const char *what, float *x, const float *grad, long n, kc_loss_fn loss,
                void *ctx, kc_rng *rng, int nsample) {
  int m = n <= nsample ? (int)n : nsample, bad = 0;
  double maxrel = 0.0;
  for (int s = 0; s < m; s++) {
    long i = n <= nsample ? s : (long)(kc_uniform(rng, 0.0f, 1.0f) * n) % n;
    double fd, an = grad[i];
    fd_one(x, i, loss, ctx, &fd);
    double err = fabs(fd - an), rel = err / fmax(fmax(fabs(fd), fabs(an)), 1e-6);
    int ok = err <= KC_FD_ATOL + KC_FD_RTOL * fabs(fd);
    if (s < KC_SHOW || !ok)
      printf("    %-10s [%ld] finite-diff %+.6f backward %+.6f rel %.2e%s\n", what, i, fd, an,
             rel, ok ? "" : "  <-- FAIL");
    if (fabs(fd) > 10 * KC_FD_ATOL) maxrel = fmax(maxrel, rel);
    bad += !ok;
  }
  printf("  %-28s %d of %ld entries: max rel err %.2e (where |fd| > %.0e), tol %.0e+%.0e|fd| "
         "-> %d failures\n", what, m, n, maxrel, 10 * KC_FD_ATOL, KC_FD_ATOL, KC_FD_RTOL, bad);
  return bad;
}


