/* kernels/fp8_ref.c: FP8 quantisation of an array, emulated in fp32 (see
 * fp8.h). */
#include "kernels/fp8.h"

void kern_fp8_quant_ref(float *out, const float *x, long n, int fmt, float scale, float *amax) {
  float m = 0;
  for (long i = 0; i < n; i++) {
    float a = fabsf(x[i]);
    m = a > m ? a : m;
    out[i] = kern_fp8_round(x[i] * scale, fmt) / scale;
  }
  *amax = m;
}
