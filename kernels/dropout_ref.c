/* kernels/dropout_ref.c: the descriptor and the fp32 reference of
 * elementwise dropout (see dropout.h). */
#include "kernels/dropout.h"

kern_dropout kern_dropout_make(float p, unsigned long long seed, uint32_t site, uint32_t step) {
  kern_dropout d;
  memset(&d, 0, sizeof d);
  d.p = p;
  d.scale = p > 0.0f ? 1.0f / (1.0f - p) : 1.0f;
  double t = (double)p * 4294967296.0;
  d.thresh = t >= 4294967295.0 ? 0xFFFFFFFFu : (uint32_t)t;
  d.site = site, d.step = step;
  d.seed_lo = (uint32_t)seed, d.seed_hi = (uint32_t)(seed >> 32);
  return d;
}

/* out[i] = (x ? x[i] : 0) + in[i] * mult(base + i), and the kept mask. */
static void dropout_into(float *out, uint8_t *mask, const float *x, const float *in, long n, kern_dropout d) {
  kern_dropout_block blk = {-1, {0}};
  for (long i = 0; i < n; i++) {
    float m = d.p > 0.0f ? kern_dropout_mult_block(&d, d.base + i, &blk) : 1.0f;
    out[i] = (x ? x[i] : 0.0f) + in[i] * m;
    if (mask) mask[i] = m != 0.0f;
  }
}

void kern_dropout_ref(float *out, uint8_t *mask, const float *in, long n, kern_dropout d) {
  if (d.p <= 0.0f) {
    if (out != in) memmove(out, in, sizeof(float) * (size_t)n);
    if (mask) memset(mask, 1, (size_t)n);
    return;
  }
  dropout_into(out, mask, NULL, in, n, d);
}

void kern_dropout_add_ref(float *out, uint8_t *mask, const float *x, const float *in, long n, kern_dropout d) {
  dropout_into(out, mask, x, in, n, d);
}

void kern_dropout_masked_ref(float *out, const float *in, const uint8_t *mask, long n, float scale) {
  for (long i = 0; i < n; i++) out[i] = mask[i] ? in[i] * scale : 0.0f;
}
