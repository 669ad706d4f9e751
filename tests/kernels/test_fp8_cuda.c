/* tests/kernels/test_fp8_cuda.c: the CUDA FP8 quantisation of bf16 tensors
 * (kern_fp8_quant_cuda) against the reference (kern_fp8_quant_ref) on the
 * same bf16 inputs, its quotient then rounded to bf16 as the kernel's: the
 * same bits are expected (the rounding is exact, the division IEEE's), and
 * the same amax. Both formats; scale 1, a non-power-of-two scale from the
 * data (the delayed recipe's fp8_max / amax) and a large one that
 * saturates; values spanning E4M3's and E5M2's subnormals up past their
 * largest finite; a NaN, which the amax leaves out; 16-byte vectors
 * (n a multiple of 8) and single elements (the 5000s are, the odd n is
 * not), more elements than one grid covers (the grid-stride loop) and an
 * empty call (amax 0). The amax is a running max the caller zeroes: a
 * larger one already there stays, a smaller one is raised, and an empty
 * call leaves it. */
#include <math.h>
#include <stdlib.h>
#include "kern_gpu.h"
#include "kernels/fp8.h"

/* n values, log-uniform in magnitude over [2^-20, 2^17), random signs,
 * rounded to bf16; one NaN where nan_at >= 0. */
static float *draw(kc_rng *r, long n, long nan_at) {
  float *x = malloc(sizeof *x * (size_t)n);
  for (long i = 0; i < n; i++) {
    float m = ldexpf(1.0f, (int)floorf(kc_uniform(r, -20.0f, 17.0f))) * kc_uniform(r, 1.0f, 2.0f);
    x[i] = kc_uniform(r, -1.0f, 1.0f) < 0 ? -m : m;
  }
  if (nan_at >= 0) x[nan_at] = NAN;
  kc_round_bf16(x, n);
  return x;
}

static int one(kc_rng *r, long n, int fmt, float scale_or_0, long nan_at) {
  float *x = draw(r, n, nan_at), *want = malloc(sizeof *want * (size_t)(n ? n : 1));
  float *got = malloc(sizeof *got * (size_t)(n ? n : 1)), amax_ref = 0, amax = -1;
  float scale = scale_or_0;
  if (scale <= 0) { /* the delayed recipe's scale from the data's amax */
    kern_fp8_quant_ref(want, x, n, fmt, 1.0f, &amax_ref);
    scale = kern_fp8_max(fmt) / amax_ref;
  }
  kern_fp8_quant_ref(want, x, n, fmt, scale, &amax_ref);
  kc_round_bf16(want, n);
  kern_bf16 *dx = kg_bf16(x, n ? n : 1), *dout = kg_bf16(NULL, n ? n : 1);
  float *damax = kg_f32(NULL, 1);
  KG_CHECK(kern_fp8_quant_cuda(dout, dx, n, fmt, scale, damax, 0));
  kg_get_bf16(got, dout, n);
  kg_get_f32(&amax, damax, 1);
  long diff = 0, first = -1;
  for (long i = 0; i < n; i++) {
    int same = got[i] == want[i] || (got[i] != got[i] && want[i] != want[i]);
    if (!same && first < 0) first = i;
    diff += !same;
  }
  int bad = diff != 0 || amax != amax_ref;
  printf("%s %s n=%ld scale %.6g%s: expected every value as the reference's, rounded to bf16, and amax %.9g; "
         "got %ld different%s, amax %.9g\n", bad ? "FAIL" : "ok  ", fmt == KERN_FP8_E5M2 ? "e5m2" : "e4m3", n,
         scale, nan_at >= 0 ? " (one NaN)" : "", amax_ref, diff, first >= 0 ? " (the first shown below)" : "",
         amax);
  if (first >= 0)
    printf("     [%ld] x %.9g: expected %.9g, got %.9g\n", first, x[first], want[first], got[first]);
  free(x), free(want), free(got);
  return bad;
}

/* *amax_dev kept when larger, raised when smaller, left by an empty call. */
static int accumulates(kc_rng *r) {
  long n = 5000;
  float *x = draw(r, n, -1), *want = malloc(sizeof *want * (size_t)n), a = 0;
  kern_fp8_quant_ref(want, x, n, KERN_FP8_E4M3, 1.0f, &a);
  kern_bf16 *dx = kg_bf16(x, n), *dout = kg_bf16(NULL, n);
  int bad = 0;
  float starts[3] = {2 * a, a / 2, 3 * a}, wants[3] = {2 * a, a, 3 * a};
  for (int c = 0; c < 3; c++) {
    float got = -1, *damax = kg_f32(&starts[c], 1);
    KG_CHECK(kern_fp8_quant_cuda(dout, dx, c == 2 ? 0 : n, KERN_FP8_E4M3, 1.0f, damax, 0));
    kg_get_f32(&got, damax, 1);
    int b = got != wants[c];
    printf("%s running amax: %s %.9g there, max |x| %.9g over n=%ld: expected %.9g, got %.9g\n", b ? "FAIL" : "ok  ",
           c == 0 ? "a larger" : c == 1 ? "a smaller" : "an empty call's", starts[c], a, c == 2 ? 0 : n, wants[c],
           got);
    bad += b;
  }
  free(x), free(want);
  return bad;
}

int main(void) {
  kg_require_gpu("kern_fp8_cuda");
  kc_rng r = {7};
  int bad = 0;
  for (int fmt = KERN_FP8_E4M3; fmt <= KERN_FP8_E5M2; fmt++) {
    bad += one(&r, 5000, fmt, 1.0f, -1);
    bad += one(&r, 5000, fmt, 0.0f, 17);   /* fp8_max / amax: not a power of two */
    bad += one(&r, 5000, fmt, 1e6f, -1);   /* most values saturate */
  }
  /* 16-byte vectors: three and a bit grids of 1024 blocks of 8 elements a thread; then one element a
   * thread (n odd) over as many */
  bad += one(&r, 1024L * 256 * 8 * 3 + 80, KERN_FP8_E4M3, 0.0f, -1);
  bad += one(&r, 1024L * 256 * 3 + 77, KERN_FP8_E5M2, 0.0f, -1);
  bad += one(&r, 0, KERN_FP8_E4M3, 1.0f, -1);
  bad += accumulates(&r);
  return kc_finish("kern_fp8_cuda", bad);
}
