/* tests/kernels/test_gelu_cuda.c: CUDA bias + GeLU, fused and unfused, and
 * SwiGLU vs the reference; C a multiple of 8 (16-byte vectors) and odd C
 * (scalar). */
#include <stdlib.h>
#include "kern_gpu.h"
#include "kernels/gelu.h"

static int run(int N, int C, kc_rng *r) {
  long n = (long)N * C;
  printf("shape N=%d C=%d\n", N, C);
  float *inp = kc_rand(r, n, -3, 3), *bias = kc_rand(r, C, -1, 1), *dout = kc_rand(r, n, -1, 1);
  kc_round_bf16(inp, n), kc_round_bf16(bias, C), kc_round_bf16(dout, n);
  float *out = kc_zeros(n), *dinp = kc_zeros(n), *db = kc_zeros(C), *got = kc_zeros(n);
  kern_bias_gelu_fwd_ref(out, inp, bias, N, C);
  kern_bias_gelu_bwd_ref(dinp, db, dout, inp, bias, N, C);
  kern_bf16 *d_inp = kg_bf16(inp, n), *d_bias = kg_bf16(bias, C), *d_dout = kg_bf16(dout, n);
  kern_bf16 *d_out = kg_bf16(NULL, n), *d_tmp = kg_bf16(NULL, n);
  float *d_db = kg_f32(NULL, C);
  int bad = 0;
  KG_CHECK(kern_bias_gelu_fwd_cuda(d_out, d_inp, d_bias, N, C, 0));
  kg_get_bf16(got, d_out, n), bad += kc_compare("fused out", got, out, n, KG_ATOL_OUT, KG_RTOL_OUT);
  KG_CHECK(kern_bias_add_cuda(d_tmp, d_inp, d_bias, N, C, 0));
  KG_CHECK(kern_gelu_fwd_cuda(d_out, d_tmp, n, 0));
  kg_get_bf16(got, d_out, n), bad += kc_compare("unfused out", got, out, n, KG_ATOL_OUT, KG_RTOL_OUT);
  KG_CHECK(kern_bias_gelu_bwd_cuda(d_out, d_db, d_dout, d_inp, d_bias, N, C, 0));
  kg_get_bf16(got, d_out, n), bad += kc_compare("fused dinp", got, dinp, n, KG_ATOL_OUT, KG_RTOL_OUT);
  kg_get_f32(got, d_db, C), bad += kc_compare("fused dbias", got, db, C, 1e-3f, 1e-3f);
  KG_CUDA(cudaMemset(d_db, 0, sizeof(float) * C));
  KG_CHECK(kern_gelu_bwd_cuda(d_out, d_dout, d_tmp, n, 0)); /* d_tmp = inp + bias in bf16 */
  KG_CHECK(kern_bias_grad_cuda(d_db, d_out, N, C, 0));
  /* the unfused path rounds inp + bias to bf16 before gelu': a wider input error */
  kg_get_bf16(got, d_out, n), bad += kc_compare("unfused dinp", got, dinp, n, KG_ATOL_GRAD, KG_RTOL_GRAD);
  kg_get_f32(got, d_db, C), bad += kc_compare("unfused dbias", got, db, C, KG_ATOL_GRAD, KG_RTOL_GRAD);
  KG_CUDA(cudaDeviceReset());
  free(inp), free(bias), free(dout), free(out), free(dinp), free(db), free(got);
  return bad;
}

static int run_swiglu(int N, int F, kc_rng *r) {
  long n = (long)N * F;
  printf("SwiGLU: shape N=%d F=%d\n", N, F);
  float *inp = kc_rand(r, 2 * n, -3, 3), *dout = kc_rand(r, n, -1, 1);
  kc_round_bf16(inp, 2 * n), kc_round_bf16(dout, n);
  float *out = kc_zeros(n), *dinp = kc_zeros(2 * n), *got = kc_zeros(2 * n);
  kern_swiglu_fwd_ref(out, inp, N, F);
  kern_swiglu_bwd_ref(dinp, dout, inp, N, F);
  kern_bf16 *d_inp = kg_bf16(inp, 2 * n), *d_dout = kg_bf16(dout, n), *d_out = kg_bf16(NULL, n);
  kern_bf16 *d_dinp = kg_bf16(NULL, 2 * n);
  int bad = 0;
  KG_CHECK(kern_swiglu_fwd_cuda(d_out, d_inp, N, F, 0));
  kg_get_bf16(got, d_out, n), bad += kc_compare("swiglu out", got, out, n, KG_ATOL_OUT, KG_RTOL_OUT);
  KG_CHECK(kern_swiglu_bwd_cuda(d_dinp, d_dout, d_inp, N, F, 0));
  kg_get_bf16(got, d_dinp, 2 * n), bad += kc_compare("swiglu dinp", got, dinp, 2 * n, KG_ATOL_GRAD, KG_RTOL_GRAD);
  KG_CUDA(cudaDeviceReset());
  free(inp), free(dout), free(out), free(dinp), free(got);
  return bad;
}

int main(void) {
  kg_require_gpu("kern_gelu_cuda");
  kc_rng r = {13};
  int bad = run(7, 33, &r) + run(300, 3072, &r) + run(2, 9, &r) + run(40, 50, &r) + run_swiglu(7, 33, &r) +
            run_swiglu(64, 1024, &r);
  /* bias grad per thread: 8 bf16 (C = 3072), 2 (C = 50), 1 (C = 33, 9) */
  return kc_finish("kern_gelu_cuda", bad);
}
