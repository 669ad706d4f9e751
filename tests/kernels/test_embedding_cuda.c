/* tests/kernels/test_embedding_cuda.c: CUDA embedding vs the reference.
 * Forward: one bf16 rounding of a sum of two bf16 values (KG_TOL_OUT).
 * Backward: fp32 sums of bf16 values; only the order differs (1e-4).
 * With and without the position table (wpe NULL: rotary or no positions),
 * and on one slice of the vocabulary (a tensor-parallel rank's rows,
 * tokens outside it embedding as 0). */
#include <stdlib.h>
#include "kern_gpu.h"
#include "kernels/embedding.h"

static int run(int B, int T, int C, int Vall, int nslices, int pos, kc_rng *r) {
  long n = (long)B * T * C;
  int V = Vall / nslices, v0 = nslices > 1 ? V : 0; /* the second slice when split */
  printf("shape B=%d T=%d C=%d V=%d, rows [%d, %d), %s\n", B, T, C, Vall, v0, v0 + V,
         pos ? "position table" : "no position table");
  int *tok = malloc(sizeof(int) * B * T);
  for (int i = 0; i < B * T; i++) tok[i] = (int)(kc_uniform(r, 0, 1) * Vall) % Vall;
  float *wte = kc_rand(r, (long)V * C, -1, 1), *wpe = kc_rand(r, (long)T * C, -1, 1);
  float *dout = kc_rand(r, n, -1, 1), *out = kc_zeros(n), *got = kc_zeros(n);
  kc_round_bf16(wte, (long)V * C), kc_round_bf16(wpe, (long)T * C), kc_round_bf16(dout, n);
  float *dwte = kc_zeros((long)V * C), *dwpe = kc_zeros((long)T * C);
  float *gdwte = kc_zeros((long)V * C), *gdwpe = kc_zeros((long)T * C);
  kern_embedding_fwd_ref(out, tok, wte, pos ? wpe : NULL, v0, V, B, T, C);
  kern_embedding_bwd_ref(dwte, pos ? dwpe : NULL, dout, tok, v0, V, B, T, C);
  int *d_tok = kg_i32(tok, B * T);
  kern_bf16 *d_out = kg_bf16(NULL, n), *d_dout = kg_bf16(dout, n);
  float *d_dwte = kg_f32(NULL, (long)V * C), *d_dwpe = kg_f32(NULL, (long)T * C);
  KG_CHECK(kern_embedding_fwd_cuda(d_out, d_tok, kg_bf16(wte, (long)V * C), pos ? kg_bf16(wpe, (long)T * C) : NULL,
                                   v0, V, B, T, C, 0));
  KG_CHECK(kern_embedding_bwd_cuda(d_dwte, pos ? d_dwpe : NULL, d_dout, d_tok, v0, V, B, T, C, 0));
  kg_get_bf16(got, d_out, n);
  kg_get_f32(gdwte, d_dwte, (long)V * C);
  kg_get_f32(gdwpe, d_dwpe, (long)T * C);
  int bad = kc_compare("out", got, out, n, KG_ATOL_OUT, KG_RTOL_OUT) +
            kc_compare("dwte", gdwte, dwte, (long)V * C, 1e-4f, 1e-4f) +
            kc_compare("dwpe", gdwpe, dwpe, (long)T * C, 1e-4f, 1e-4f);
  KG_CUDA(cudaDeviceReset());
  free(tok), free(wte), free(wpe), free(dout), free(out), free(got);
  free(dwte), free(dwpe), free(gdwte), free(gdwpe);
  return bad;
}

int main(void) {
  kg_require_gpu("kern_embedding_cuda");
  kc_rng r = {11};
  int bad = run(2, 7, 33, 50, 1, 1, &r) + run(4, 64, 768, 1000, 1, 1, &r) + run(3, 9, 40, 70, 1, 0, &r) +
            run(4, 64, 128, 1000, 4, 1, &r);
  return kc_finish("kern_embedding_cuda", bad);
}
