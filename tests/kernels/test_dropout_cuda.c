/* tests/kernels/test_dropout_cuda.c: the CUDA dropout vs the reference:
 * the same elements dropped (bit-identical draws) and the kept ones scaled
 * alike, at a large counter base (the high word in use), an odd length and
 * in place; the same 1-byte mask, and the backward from it; and the fused
 * dropout-add against the reference's (p > 0 and p = 0). */
#include <stdlib.h>
#include <string.h>
#include "kern_gpu.h"
#include "kernels/dropout.h"

static int run(long n, float p, long long base, int in_place, kc_rng *r) {
  printf("n %ld p %.2f base %lld%s\n", n, p, base, in_place ? " in place" : "");
  float *x = kc_rand(r, n, 0.5f, 2.0f), *want = kc_zeros(n), *got = kc_zeros(n);
  kc_round_bf16(x, n);
  kern_dropout d = kern_dropout_make(p, 0x123456789abcULL, kern_dropout_site(5, KERN_DROP_AFTER_ATTN), 11);
  d.base = base;
  kern_bf16 *in = kg_bf16(x, n), *out = in, *back = kg_bf16(NULL, n);
  unsigned char *dmask, *mask = malloc((size_t)n), *want_mask = malloc((size_t)n);
  KG_CUDA(cudaMalloc((void **)&dmask, (size_t)n));
  if (!in_place) KG_CUDA(cudaMalloc((void **)&out, sizeof(kern_bf16) * n));
  KG_CHECK(kern_dropout_cuda(out, dmask, in, n, d, 0));
  kern_dropout_ref(want, want_mask, x, n, d);
  kg_get_bf16(got, out, n);
  KG_CUDA(cudaMemcpy(mask, dmask, (size_t)n, cudaMemcpyDeviceToHost));
  long differ = 0;
  for (long i = 0; i < n; i++) differ += (got[i] == 0.0f) != (want[i] == 0.0f);
  printf("  elements dropped by one and not the other: expected 0, got %ld\n", differ);
  int bad = (differ != 0) + kc_compare_bytes("kept mask", mask, want_mask, n) +
            kc_compare("dropout", got, want, n, KG_ATOL_OUT, KG_RTOL_OUT);
  /* the backward from the kept mask, on the output as the gradient */
  kc_round_bf16(want, n);
  float *dref = kc_zeros(n);
  kern_dropout_masked_ref(dref, want, want_mask, n, d.scale);
  KG_CHECK(kern_dropout_masked_cuda(back, out, dmask, n, d.scale, 0));
  kg_get_bf16(got, back, n);
  bad += kc_compare("dropout backward from the mask", got, dref, n, KG_ATOL_OUT, KG_RTOL_OUT);
  free(dref), free(mask), free(want_mask);
  KG_CUDA(cudaDeviceReset());
  free(x), free(want), free(got);
  return bad;
}

static int run_add(long n, float p, long long base, kc_rng *r) {
  printf("dropout-add: n %ld p %.2f base %lld, out aliasing x\n", n, p, base);
  float *x = kc_rand(r, n, -1.0f, 1.0f), *z = kc_rand(r, n, 0.5f, 2.0f), *want = kc_zeros(n), *got = kc_zeros(n);
  kc_round_bf16(x, n), kc_round_bf16(z, n);
  kern_dropout d = kern_dropout_make(p, 42, kern_dropout_site(1, KERN_DROP_AFTER_MLP), 3);
  d.base = base;
  kern_bf16 *dx = kg_bf16(x, n), *dz = kg_bf16(z, n);
  unsigned char *dmask, *mask = malloc((size_t)n), *want_mask = malloc((size_t)n);
  KG_CUDA(cudaMalloc((void **)&dmask, (size_t)n));
  KG_CHECK(kern_dropout_add_cuda(dx, dmask, dx, dz, n, d, 0));
  kern_dropout_add_ref(want, want_mask, x, z, n, d);
  kg_get_bf16(got, dx, n);
  KG_CUDA(cudaMemcpy(mask, dmask, (size_t)n, cudaMemcpyDeviceToHost));
  int bad = kc_compare_bytes("kept mask", mask, want_mask, n) +
            kc_compare("dropout-add", got, want, n, KG_ATOL_OUT, KG_RTOL_OUT);
  KG_CUDA(cudaDeviceReset());
  free(x), free(z), free(want), free(got), free(mask), free(want_mask);
  return bad;
}

int main(void) {
  kg_require_gpu("kern_dropout_cuda");
  kc_rng r = {32};
  int bad = run(1, 0.1f, 0, 0, &r) + run(100003, 0.1f, 5LL << 32, 0, &r) + run(65536, 0.5f, 77, 1, &r) +
            run_add(5003, 0.1f, 3, &r) + run_add(4096, 0.0f, 0, &r);
  return kc_finish("kern_dropout_cuda", bad);
}
