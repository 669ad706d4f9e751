/* kernels/fp8.h: the OCP FP8 formats Transformer Engine casts GEMM inputs
 * to, emulated in fp32 so that their numerics can be run and tested
 * without FP8 hardware:
 *   E4M3  4 exponent bits (bias 7), 3 mantissa bits: largest finite 448,
 *         smallest normal 2^-6, subnormal step 2^-9 (the forward's inputs
 *         and weights);
 *   E5M2  5 exponent bits (bias 15), 2 mantissa bits: largest finite 57344,
 *         smallest normal 2^-14, subnormal step 2^-16 (hybrid's gradients).
 * A value is scaled, rounded to the nearest representable value (ties to
 * even), saturated to the largest finite one (TE's saturating cast) and
 * scaled back: kern_fp8_quant(x) = round(x * scale) / scale. NaN stays
 * NaN. */
#ifndef KERN_FP8_H
#define KERN_FP8_H
#include <math.h>
#include "kernels/kern_common.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef enum { KERN_FP8_E4M3, KERN_FP8_E5M2 } kern_fp8_fmt;

static inline KERN_HD float kern_fp8_max(int fmt) { return fmt == KERN_FP8_E5M2 ? 57344.0f : 448.0f; }

/* x rounded to the format (no scaling). */
static inline KERN_HD float kern_fp8_round(float x, int fmt) {
  int mant = fmt == KERN_FP8_E5M2 ? 2 : 3, emin = fmt == KERN_FP8_E5M2 ? -14 : -6;
  float a = fabsf(x), mx = kern_fp8_max(fmt);
  if (x != x) return x;
  if (a >= mx) return x < 0 ? -mx : mx;
  if (a == 0.0f) return x;
  int e;
  frexpf(a, &e); /* a = f 2^e, f in [0.5, 1): the leading bit is 2^(e - 1) */
  int lead = e - 1 < emin ? emin : e - 1;
  /* exact: a power-of-two step, multiplied rather than divided (the GPU
   * build's fast math would make a division approximate) */
  float step = ldexpf(1.0f, lead - mant), q = rintf(a * ldexpf(1.0f, mant - lead)) * step;
  q = q > mx ? mx : q;
  return x < 0 ? -q : q;
}

/* out (n) = x quantized at scale (out may alias x); *amax = max |x| over
 * the n inputs (before scaling), the delayed recipe's record. */
void kern_fp8_quant_ref(float *out, const float *x, long n, int fmt, float scale, float *amax);

#ifdef KERN_HAVE_CUDA
/* The same on bf16 (the GPU path's act type): out (n) = bf16(round(x
 * scale) / scale), the quotient rounded to nearest as the reference's, then
 * to bf16 (an FP8 value over a scale that is not a power of two is not a
 * bf16 one: this one rounding more than the fp32 CPU path's, at most half
 * a bf16 step, 2^-9 relative, beside FP8's 2^-4 or 2^-3); *amax_dev (one
 * device float, >= 0) = the larger of itself and max |x|, NaN left out as
 * by the reference: a block max and one atomic per block (at most 1,024
 * blocks, each thread striding over 16-byte vectors where n and the
 * pointers allow). The caller zeroes it: a running max, so that a tensor's
 * casts over an iteration keep its amax on the device (the delayed
 * recipe's record) and the host reads it once. */
int kern_fp8_quant_cuda(kern_bf16 *out, const kern_bf16 *x, long n, int fmt, float scale, float *amax_dev,
                        cudaStream_t stream);
#endif

#ifdef __cplusplus
}
#endif
#endif
