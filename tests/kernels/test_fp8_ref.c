/* tests/kernels/test_fp8_ref.c: the FP8 rounding against values worked by
 * hand from the OCP FP8 specification (v1.0, 2023: E4M3's largest finite
 * 448 = 1.75 x 2^8, E5M2's 57344 = 1.75 x 2^15, subnormal steps 2^-9 and
 * 2^-16), ties to even, saturation, and the quantisation's amax and scale;
 * then every representable E4M3 value rounds to itself and every midpoint
 * to its even neighbour. */
#include <math.h>
#include <stdio.h>
#include "kern_check.h"
#include "kernels/fp8.h"

static int one(const char *what, float x, int fmt, float want) {
  float got = kern_fp8_round(x, fmt);
  int ok = got == want || (want != want && got != got);
  printf("%s %s: %s(%.9g) expected %.9g, got %.9g\n", ok ? "ok  " : "FAIL", what,
         fmt == KERN_FP8_E5M2 ? "e5m2" : "e4m3", x, want, got);
  return !ok;
}

int main(void) {
  int bad = 0;
  bad += one("exact", 1.0f, KERN_FP8_E4M3, 1.0f);
  bad += one("3 mantissa bits: 1 + 1/8 kept", 1.125f, KERN_FP8_E4M3, 1.125f);
  bad += one("below the half step rounds down", 1.0f + 1.0f / 17, KERN_FP8_E4M3, 1.0f);
  bad += one("a tie goes to even (1.0625 -> 1)", 1.0625f, KERN_FP8_E4M3, 1.0f);
  bad += one("a tie goes to even (1.1875 -> 1.25)", 1.1875f, KERN_FP8_E4M3, 1.25f);
  bad += one("largest finite", 448.0f, KERN_FP8_E4M3, 448.0f);
  bad += one("saturates", 1000.0f, KERN_FP8_E4M3, 448.0f);
  bad += one("saturates, negative", -1e30f, KERN_FP8_E4M3, -448.0f);
  bad += one("464 (a tie between 448 and 480, past the largest) saturates", 464.0f, KERN_FP8_E4M3, 448.0f);
  bad += one("smallest normal", 0.015625f, KERN_FP8_E4M3, 0.015625f);
  bad += one("subnormal step 2^-9", 3 * 0.001953125f, KERN_FP8_E4M3, 3 * 0.001953125f);
  bad += one("below half the smallest subnormal: 0", 0.0009f, KERN_FP8_E4M3, 0.0f);
  bad += one("2 mantissa bits: 1 + 1/8 is a tie -> 1", 1.125f, KERN_FP8_E5M2, 1.0f);
  bad += one("2 mantissa bits: 1.3 -> 1.25", 1.3f, KERN_FP8_E5M2, 1.25f);
  bad += one("largest finite", 57344.0f, KERN_FP8_E5M2, 57344.0f);
  bad += one("saturates", 1e6f, KERN_FP8_E5M2, 57344.0f);
  bad += one("subnormal step 2^-16", 5 * ldexpf(1, -16), KERN_FP8_E5M2, 5 * ldexpf(1, -16));
  bad += one("NaN stays NaN", NAN, KERN_FP8_E4M3, NAN);
  /* every E4M3 value is kept, every midpoint goes to the even code */
  int kept = 0, ties = 0;
  for (int e = -9; e <= 8; e++)
    for (int mcode = 0; mcode < 8; mcode++) {
      int sub = e < -6; /* subnormals: steps of 2^-9 */
      float v = sub ? ldexpf((float)mcode, -9) * (e == -9 ? 1 : 0) : ldexpf(1.0f + mcode / 8.0f, e);
      if (sub && e != -9) continue;
      if (v > 448.0f) continue;
      kept += kern_fp8_round(v, KERN_FP8_E4M3) != v;
      float step = sub ? ldexpf(1, -9) : ldexpf(1, e - 3), next = v + step;
      if (next <= 448.0f) { /* the midpoint to the next value: the one whose code is even */
        float even = (mcode % 2 == 0) ? v : next;
        if (!sub && mcode == 7) even = next; /* 1.875 2^e's next is 2^(e+1): code 0, even */
        ties += kern_fp8_round(v + step / 2, KERN_FP8_E4M3) != even;
      }
    }
  printf("%s every E4M3 value up to 448 rounds to itself: %d differ (expected 0)\n", kept ? "FAIL" : "ok  ", kept);
  printf("%s every midpoint rounds to its even neighbour: %d differ (expected 0)\n", ties ? "FAIL" : "ok  ", ties);
  bad += kept + ties;
  /* the quantisation: scale 2 turns 100 into 200, which E4M3 (steps of 16 from 128) holds only as 192 or
     208: a tie, to the even mantissa 1.100b, 192; back at scale 2, 96 */
  float x[3] = {100.0f, -3.0f, 0.5f}, q[3], amax;
  kern_fp8_quant_ref(q, x, 3, KERN_FP8_E4M3, 2.0f, &amax);
  float want[3] = {96.0f, -3.0f, 0.5f};
  bad += kc_compare("quantised at scale 2 (100 -> 192 / 2)", q, want, 3, 0, 0);
  printf("%s amax: expected 100 (the largest |x| before scaling), got %g\n", amax == 100.0f ? "ok  " : "FAIL", amax);
  bad += amax != 100.0f;
  return kc_finish("kern_fp8_ref", bad);
}
