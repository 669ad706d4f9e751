/* tests/kernels/test_moe_cuda.c: the CUDA mixture-of-experts kernels
 * against the references (moe_ref.c) on bf16-rounded inputs: the router's
 * choices exactly and its probabilities and scores, its backward with the
 * auxiliary term (factors per expert, and a row of them per token), gather (weighted, with padding rows), combine (a
 * token's rows summed in fp32 through the inverse permutation), rowdot. */
#include <math.h>
#include <stdlib.h>
#include "kern_gpu.h"
#include "kernels/moe.h"

static int run(int N, int E, int k, int C, kc_rng *r) {
  long NE = (long)N * E, Nk = (long)N * k, M = Nk, NC = (long)N * C, MC = M * C;
  int bad = 0;
  printf("shape N=%d E=%d k=%d C=%d\n", N, E, k, C);
  float *logits = kc_rand(r, NE, -3, 3), *dprobs = kc_rand(r, Nk, -1, 1), *coef = kc_rand(r, NE, 0, 1);
  kc_round_bf16(logits, NE);
  float *probs = kc_zeros(Nk), *scores = kc_zeros(NE), *dl = kc_zeros(NE), *got = kc_zeros(NE > MC ? NE : MC);
  int *idx = malloc(sizeof(int) * Nk), *gidx = malloc(sizeof(int) * Nk);
  kern_bf16 *d_l = kg_bf16(logits, NE), *d_dl = kg_bf16(NULL, NE);
  float *d_p = kg_f32(NULL, Nk), *d_s = kg_f32(NULL, NE), *d_dp = kg_f32(dprobs, Nk), *d_c = kg_f32(coef, NE);
  int *d_i = kg_i32(idx, Nk);
  KG_CHECK(kern_moe_route_cuda(d_p, d_i, d_s, d_l, N, E, k, 0));
  kern_moe_route_ref(probs, idx, scores, logits, N, E, k);
  KG_CUDA(cudaMemcpy(gidx, d_i, sizeof(int) * Nk, cudaMemcpyDeviceToHost));
  int same = 0;
  for (long i = 0; i < Nk; i++) same += gidx[i] == idx[i];
  printf("  router choices: expected the reference's %ld, got %d the same\n", Nk, same);
  bad += same != Nk;
  kg_get_f32(got, d_p, Nk), bad += kc_compare("probs", got, probs, Nk, 1e-5f, 1e-5f);
  kg_get_f32(got, d_s, NE), bad += kc_compare("scores", got, scores, NE, 1e-5f, 1e-5f);
  for (int ld = 0; ld <= E; ld += E) {
    KG_CHECK(kern_moe_route_bwd_cuda(d_dl, d_dp, d_p, d_i, d_s, d_c, ld, N, E, k, 0));
    kern_moe_route_bwd_ref(dl, dprobs, probs, idx, scores, coef, ld, N, E, k);
    kg_get_bf16(got, d_dl, NE);
    bad += kc_compare(ld ? "router backward, a row of factors per token" : "router backward, factors per expert", got,
                      dl, NE, KG_ATOL_GRAD, KG_RTOL_GRAD);
  }

  /* permutation: M rows of N tokens (every 9th a padding row), weighted */
  float *x = kc_rand(r, NC, -1, 1), *y = kc_rand(r, MC, -1, 1), *w = kc_rand(r, M, 0, 1);
  kc_round_bf16(x, NC), kc_round_bf16(y, MC);
  int *rows = malloc(sizeof(int) * M), *inv = malloc(sizeof(int) * Nk);
  for (long p = 0; p < Nk; p++) inv[p] = -1;
  for (long i = 0; i < M; i++) { /* row i is pair (i * 7) mod Nk: a permutation, as Nk is no multiple of 7 */
    long p = (i * 7) % Nk;
    rows[i] = i % 9 == 8 ? -1 : (int)(p / k);
    if (rows[i] >= 0) inv[p] = (int)i;
  }
  float *want = kc_zeros(MC > NC ? MC : NC), *acc = kc_rand(r, NC, -1, 1);
  kc_round_bf16(acc, NC);
  kern_bf16 *d_x = kg_bf16(x, NC), *d_y = kg_bf16(y, MC), *d_o = kg_bf16(NULL, MC), *d_a = kg_bf16(acc, NC);
  float *d_w = kg_f32(w, M), *d_d = kg_f32(NULL, M);
  int *d_r = kg_i32(rows, M), *d_inv = kg_i32(inv, Nk);
  KG_CHECK(kern_moe_gather_cuda(d_o, d_x, d_r, d_w, M, C, 0));
  kern_moe_gather_ref(want, x, rows, w, M, C);
  kg_get_bf16(got, d_o, MC), bad += kc_compare("gather (weighted, padding rows)", got, want, MC, KG_ATOL_OUT,
                                               KG_RTOL_OUT);
  KG_CHECK(kern_moe_combine_cuda(d_a, d_y, d_inv, d_w, N, k, C, 0));
  kern_moe_combine_ref(acc, y, inv, w, N, k, C);
  kg_get_bf16(got, d_a, NC), bad += kc_compare("combine (weighted, fp32 sums)", got, acc, NC, KG_ATOL_OUT,
                                               KG_RTOL_OUT);
  KG_CHECK(kern_moe_rowdot_cuda(d_d, d_x, d_r, d_y, M, C, 0));
  kern_moe_rowdot_ref(want, x, rows, y, M, C);
  kg_get_f32(got, d_d, M), bad += kc_compare("rowdot", got, want, M, 1e-4f, 1e-4f);
  KG_CUDA(cudaDeviceReset());
  free(logits), free(dprobs), free(coef), free(probs), free(scores), free(dl), free(got), free(idx), free(gidx);
  free(x), free(y), free(w), free(rows), free(inv), free(want), free(acc);
  return bad;
}

int main(void) {
  kg_require_gpu("kern_moe_cuda");
  kc_rng r = {38};
  int bad = run(37, 8, 2, 64, &r) + run(130, 64, 8, 96, &r);
  return kc_finish("kern_moe_cuda", bad);
}
