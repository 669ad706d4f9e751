/* kernels/rope_ref.c: fp32 reference of the rotary position embedding
 * (see rope.h). */
#include "kernels/rope.h"

void kern_rope_ref(float *x, int N, int T, int t0, int H, int HS, double base, int inverse) {
  int half = HS / 2;
  for (long n = 0; n < N; n++)
    for (int h = 0; h < H; h++) {
      float *v = x + (n * H + h) * HS;
      for (int i = 0; i < half; i++) {
        double a = kern_rope_angle(t0 + (int)(n % T), i, HS, base);
        float c = (float)cos(a), s = (float)(inverse ? -sin(a) : sin(a));
        float lo = v[i], hi = v[i + half];
        v[i] = lo * c - hi * s;
        v[i + half] = hi * c + lo * s;
      }
    }
}
