/* tests/kernels/test_attention_cuda.c: CUDA attention (flash and unfused)
 * vs the references on odd shapes: T not a multiple of the 64 / 32 tiles,
 * GQA (NH / NKV = 2, 4, 8), windows smaller and larger than T, HS 48, 64,
 * 128, B = 2. The backward kernels get the reference's out (rounded to
 * bf16) and lse, so each kernel is checked on its own. */
#include <stdlib.h>
#include "kern_gpu.h"
#include "kernels/attention.h"
#include "kernels/kern_common.h"

static int cmp_dev(const char *what, const kern_bf16 *dev, const float *ref, long n, float a,
                   float r) {
  float *got = kc_zeros(n);
  kg_get_bf16(got, dev, n);
  int bad = kc_compare(what, got, ref, n, a, r);
  free(got);
  return bad;
}

static int run(kern_attn_shape s, kc_rng *r) {
  long nq = (long)s.B * s.T * s.NH * s.HS, nkv = (long)s.B * s.T * s.NKV * s.HS;
  long nl = (long)s.B * s.NH * s.T, ntt = nl * s.T;
  printf("shape B=%d T=%d NH=%d NKV=%d HS=%d window=%d\n", s.B, s.T, s.NH, s.NKV, s.HS, s.window);
  float *q = kc_rand(r, nq, -2, 2), *k = kc_rand(r, nkv, -2, 2), *v = kc_rand(r, nkv, -1, 1);
  float *dout = kc_rand(r, nq, -1, 1), *out = kc_zeros(nq), *lse = kc_zeros(nl), *att = kc_zeros(ntt);
  float *dq = kc_zeros(nq), *dk = kc_zeros(nkv), *dv = kc_zeros(nkv), *got = kc_zeros(nl);
  kc_round_bf16(q, nq), kc_round_bf16(k, nkv), kc_round_bf16(v, nkv), kc_round_bf16(dout, nq);
  kern_attention_fwd_ref(out, lse, q, k, v, s);
  kern_bf16 *d_q = kg_bf16(q, nq), *d_k = kg_bf16(k, nkv), *d_v = kg_bf16(v, nkv);
  kern_bf16 *d_dout = kg_bf16(dout, nq), *d_out = kg_bf16(NULL, nq);
  kern_bf16 *d_dq = kg_bf16(NULL, nq), *d_dk = kg_bf16(NULL, nkv), *d_dv = kg_bf16(NULL, nkv);
  float *d_lse = kg_f32(NULL, nl), *d_scratch;
  KG_CUDA(cudaMalloc((void **)&d_scratch, kern_attention_bwd_scratch_bytes(s)));
  int bad = 0;
  KG_CHECK(kern_attention_fwd_cuda(d_out, d_lse, d_q, d_k, d_v, s, 0));
  bad += cmp_dev("flash out", d_out, out, nq, KG_ATOL_OUT, KG_RTOL_OUT);
  kg_get_f32(got, d_lse, nl), bad += kc_compare("flash lse", got, lse, nl, 1e-3f, 1e-3f);
  kc_round_bf16(out, nq); /* the backward sees the bf16 forward output */
  kern_bf16 *d_oref = kg_bf16(out, nq);
  float *d_lref = kg_f32(lse, nl);
  kern_attention_bwd_ref(dq, dk, dv, dout, q, k, v, out, lse, s);
  KG_CHECK(kern_attention_bwd_cuda(d_dq, d_dk, d_dv, d_scratch, d_dout, d_q, d_k, d_v, d_oref,
                                   d_lref, s, 0));
  bad += cmp_dev("flash dq", d_dq, dq, nq, KG_ATOL_GRAD, KG_RTOL_GRAD);
  bad += cmp_dev("flash dk", d_dk, dk, nkv, KG_ATOL_GRAD, KG_RTOL_GRAD);
  bad += cmp_dev("flash dv", d_dv, dv, nkv, KG_ATOL_GRAD, KG_RTOL_GRAD);

  kern_ctx ctx;
  KG_CHECK(kern_ctx_init(&ctx, 32 << 20));
  kern_bf16 *d_att = kg_bf16(NULL, ntt), *d_datt = kg_bf16(NULL, ntt);
  float *d_scores = kg_f32(NULL, ntt);
  kern_attention_unfused_fwd_ref(out, att, q, k, v, s);
  KG_CHECK(kern_attention_unfused_fwd_cuda(&ctx, d_out, d_att, d_scores, d_q, d_k, d_v, s, 0));
  bad += cmp_dev("unfused out", d_out, out, nq, KG_ATOL_OUT, KG_RTOL_OUT);
  bad += cmp_dev("unfused att", d_att, att, ntt, KG_ATOL_OUT, KG_RTOL_OUT);
  kc_round_bf16(att, ntt); /* the backward reads the bf16 probabilities */
  kern_attention_unfused_bwd_ref(dq, dk, dv, dout, q, k, v, att, s);
  KG_CHECK(kern_attention_unfused_bwd_cuda(&ctx, d_dq, d_dk, d_dv, d_datt, d_scores, d_dout, d_q,
                                           d_k, d_v, d_att, s, 0));
  bad += cmp_dev("unfused dq", d_dq, dq, nq, KG_ATOL_GRAD, KG_RTOL_GRAD);
  bad += cmp_dev("unfused dk", d_dk, dk, nkv, KG_ATOL_GRAD, KG_RTOL_GRAD);
  bad += cmp_dev("unfused dv", d_dv, dv, nkv, KG_ATOL_GRAD, KG_RTOL_GRAD);
  kern_ctx_free(&ctx);
  KG_CUDA(cudaDeviceReset());
  free(q), free(k), free(v), free(dout), free(out), free(lse), free(att);
  free(dq), free(dk), free(dv), free(got);
  return bad;
}

int main(void) {
  kg_require_gpu("kern_attention_cuda");
  kc_rng r = {16};
  kern_attn_shape shapes[] = {
      {1, 100, 4, 4, 64, 0},   /* T not a multiple of any tile */
      {2, 130, 8, 2, 128, 0},  /* GQA 4, B = 2 */
      {1, 200, 8, 1, 48, 37},  /* MQA, HS 48 (padded lanes), window 37 */
      {1, 90, 4, 2, 64, 500},  /* window larger than T */
      {1, 512, 16, 2, 128, 0}, /* GQA 8, several full tiles */
  };
  int bad = 0;
  for (unsigned i = 0; i < sizeof shapes / sizeof shapes[0]; i++) bad += run(shapes[i], &r);
  return kc_finish("kern_attention_cuda", bad);
}
