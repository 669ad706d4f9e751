/* tests/kernels/test_rope_cuda.c: the CUDA rotary embedding vs the
 * reference, forward and inverse, with short and long sequences (angles to
 * thousands of radians), odd T, and LLaMA-3's base. */
#include <stdlib.h>
#include <string.h>
#include "kern_gpu.h"
#include "kernels/rope.h"

static int run(int B, int T, int t0, int H, int HS, double base, int inverse, kc_rng *r) {
  long n = (long)B * T * H * HS;
  printf("shape B=%d T=%d t0=%d H=%d HS=%d base=%g inverse=%d\n", B, T, t0, H, HS, base, inverse);
  float *x = kc_rand(r, n, -2, 2), *got = kc_zeros(n);
  kc_round_bf16(x, n);
  kern_bf16 *d = kg_bf16(x, n);
  KG_CHECK(kern_rope_cuda(d, B * T, T, t0, H, HS, base, inverse, 0));
  kern_rope_ref(x, B * T, T, t0, H, HS, base, inverse);
  kg_get_bf16(got, d, n);
  int bad = kc_compare("rope", got, x, n, KG_ATOL_OUT, KG_RTOL_OUT);
  KG_CUDA(cudaDeviceReset());
  free(x), free(got);
  return bad;
}

int main(void) {
  kg_require_gpu("kern_rope_cuda");
  kc_rng r = {22};
  int bad = run(2, 37, 0, 3, 64, 10000.0, 0, &r) + run(2, 37, 0, 3, 64, 10000.0, 1, &r) +
            run(1, 2048, 0, 2, 128, 500000.0, 0, &r) + run(1, 2048, 0, 2, 128, 10000.0, 1, &r) +
            run(2, 16, 4080, 2, 128, 500000.0, 0, &r); /* a context-parallel block late in a sequence */
  return kc_finish("kern_rope_cuda", bad);
}
