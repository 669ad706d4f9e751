/* tests/kernels/test_attnmerge_cuda.c: the CUDA log-sum-exp merge vs the
 * reference, rows without keys (lse -inf) on either side included. */
#include <math.h>
#include <stdlib.h>
#include "kern_gpu.h"
#include "kernels/attnmerge.h"

static int run(int B, int T, int NH, int HS, kc_rng *r) {
  long rows = (long)B * T * NH, n = rows * HS;
  printf("shape B=%d T=%d NH=%d HS=%d\n", B, T, NH, HS);
  float *out = kc_rand(r, n, -1, 1), *ob = kc_rand(r, n, -1, 1), *lse = kc_rand(r, rows, -3, 3),
        *lb = kc_rand(r, rows, -3, 3), *got = kc_zeros(n), *gotl = kc_zeros(rows);
  kc_round_bf16(out, n), kc_round_bf16(ob, n);
  for (long i = 0; i < rows; i += 7) lb[i] = -INFINITY;       /* the block saw no key */
  for (long i = 3; i < rows; i += 11) lse[i] = -INFINITY;     /* the running output had none yet */
  kern_bf16 *d_out = kg_bf16(out, n), *d_ob = kg_bf16(ob, n);
  float *d_l = kg_f32(lse, rows), *d_lb = kg_f32(lb, rows);
  KG_CHECK(kern_attnmerge_cuda(d_out, d_l, d_ob, d_lb, B, T, NH, HS, 0));
  kern_attnmerge_ref(out, lse, ob, lb, B, T, NH, HS);
  kg_get_bf16(got, d_out, n), kg_get_f32(gotl, d_l, rows);
  int bad = kc_compare("merged out", got, out, n, KG_ATOL_OUT, KG_RTOL_OUT);
  bad += kc_compare("merged lse", gotl, lse, rows, 1e-5f, 1e-5f);
  KG_CUDA(cudaDeviceReset());
  free(out), free(ob), free(lse), free(lb), free(got), free(gotl);
  return bad;
}

int main(void) {
  kg_require_gpu("kern_attnmerge_cuda");
  kc_rng r = {32};
  int bad = run(2, 37, 3, 64, &r) + run(1, 128, 4, 128, &r);
  return kc_finish("kern_attnmerge_cuda", bad);
}
