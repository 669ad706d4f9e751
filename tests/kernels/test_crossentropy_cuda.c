/* tests/kernels/test_crossentropy_cuda.c: CUDA fused softmax +
 * cross-entropy vs the reference, including an ignored row, a vocabulary
 * that is not a multiple of the block (50257, GPT-2's; element-wise) and
 * one read 8 at a time (50304, GPT-2's padded). Split by vocabulary: one
 * rank's slice (the second of 4) through the part, merge and backward
 * kernels against their references. */
#include <stdlib.h>
#include "kern_gpu.h"
#include "kernels/crossentropy.h"

static int run(int N, int V, kc_rng *r) {
  long n = (long)N * V;
  printf("shape N=%d V=%d\n", N, V);
  float *logits = kc_rand(r, n, -6, 6), *losses = kc_zeros(N), *lse = kc_zeros(N);
  float *dl = kc_zeros(n), *got = kc_zeros(n);
  int *tgt = malloc(sizeof(int) * N);
  kc_round_bf16(logits, n);
  for (int i = 0; i < N; i++) tgt[i] = (int)(kc_uniform(r, 0, 1) * V) % V;
  tgt[N - 1] = -1;
  kern_crossentropy_fwd_ref(losses, lse, logits, tgt, N, V);
  kern_crossentropy_bwd_ref(dl, logits, lse, tgt, 0, 1.0f / N, N, V);
  kern_bf16 *d_logits = kg_bf16(logits, n);
  float *d_losses = kg_f32(NULL, N), *d_lse = kg_f32(NULL, N);
  int *d_tgt = kg_i32(tgt, N), bad = 0;
  KG_CHECK(kern_crossentropy_fwd_cuda(d_losses, d_lse, d_logits, d_tgt, N, V, 0));
  kg_get_f32(got, d_losses, N), bad += kc_compare("losses", got, losses, N, 1e-4f, 1e-4f);
  kg_get_f32(got, d_lse, N), bad += kc_compare("lse", got, lse, N, 1e-4f, 1e-4f);
  KG_CHECK(kern_crossentropy_bwd_cuda(d_logits, d_logits, d_lse, d_tgt, 0, 1.0f / N, N, V, 0));
  /* gradients are (p - onehot) / N: absolute scale 1/N, bf16-rounded */
  kg_get_bf16(got, d_logits, n);
  bad += kc_compare("dlogits (in place)", got, dl, n, 1e-2f / N, KG_RTOL_OUT);
  KG_CUDA(cudaDeviceReset());
  free(logits), free(losses), free(lse), free(dl), free(got), free(tgt);
  return bad;
}

/* Slice p of P of a V-wide vocabulary: the part kernel on it, the merge of
 * P reference parts (this slice's from the GPU), the backward at v0. */
static int run_split(int N, int V, int P, kc_rng *r) {
  int Vl = V / P, p = 1, v0 = p * Vl;
  long n = (long)N * Vl;
  printf("shape N=%d V=%d, slice [%d, %d) of %d\n", N, V, v0, v0 + Vl, P);
  float *logits = kc_rand(r, (long)P * n, -6, 6), *parts = kc_zeros(2L * P * N), *got = kc_zeros(2L * P * N + n);
  float *losses = kc_zeros(N), *lse = kc_zeros(N), *dl = kc_zeros(n);
  int *tgt = malloc(sizeof(int) * N);
  kc_round_bf16(logits, (long)P * n);
  for (int i = 0; i < N; i++) tgt[i] = (int)(kc_uniform(r, 0, 1) * V) % V;
  tgt[0] = v0, tgt[1] = v0 + Vl - 1, tgt[N - 1] = -1; /* the slice's edges, an ignored row */
  for (int q = 0; q < P; q++) /* logits is P slices of (N, Vl), each as a rank holds it */
    kern_crossentropy_part_ref(parts + 2L * q * N, logits + q * n, tgt, q * Vl, N, Vl);
  kern_crossentropy_merge_ref(losses, lse, parts, tgt, P, N);
  kern_crossentropy_bwd_ref(dl, logits + p * n, lse, tgt, v0, 1.0f / N, N, Vl);
  kern_bf16 *d_logits = kg_bf16(logits + p * n, n);
  float *d_parts = kg_f32(parts, 2L * P * N), *d_losses = kg_f32(NULL, N), *d_lse = kg_f32(NULL, N);
  int *d_tgt = kg_i32(tgt, N), bad = 0;
  KG_CHECK(kern_crossentropy_part_cuda(d_parts + 2L * p * N, d_logits, d_tgt, v0, N, Vl, 0));
  kg_get_f32(got, d_parts, 2L * P * N);
  bad += kc_compare("parts", got, parts, 2L * P * N, 1e-4f, 1e-4f);
  KG_CHECK(kern_crossentropy_merge_cuda(d_losses, d_lse, d_parts, d_tgt, P, N, 0));
  kg_get_f32(got, d_losses, N), bad += kc_compare("merged losses", got, losses, N, 1e-4f, 1e-4f);
  kg_get_f32(got, d_lse, N), bad += kc_compare("merged lse", got, lse, N, 1e-4f, 1e-4f);
  KG_CHECK(kern_crossentropy_bwd_cuda(d_logits, d_logits, d_lse, d_tgt, v0, 1.0f / N, N, Vl, 0));
  kg_get_bf16(got, d_logits, n);
  bad += kc_compare("slice's dlogits (in place)", got, dl, n, 1e-2f / N, KG_RTOL_OUT);
  KG_CUDA(cudaDeviceReset());
  free(logits), free(parts), free(got), free(losses), free(lse), free(dl), free(tgt);
  return bad;
}

int main(void) {
  kg_require_gpu("kern_crossentropy_cuda");
  kc_rng r = {14};
  int bad = run(3, 17, &r) + run(64, 50257, &r) + run(16, 50304, &r);
  bad += run_split(5, 68, 4, &r) + run_split(32, 50304, 4, &r);
  return kc_finish("kern_crossentropy_cuda", bad);
}
