/* tests/kernels/test_layernorm_cuda.c: CUDA residual + LayerNorm vs the
 * reference, forward and backward, with and without the residual add, C a
 * multiple of 8 (vector path) and not (scalar path); and RMSNorm (the same
 * kernels without centring or bias) on every path too. The reference runs
 * on the bf16-rounded residual, as the kernel's LayerNorm does. With the
 * skip branch dropped (p 0.2) on every forward path: the same kept mask,
 * byte for byte, and the residual and output within the usual tolerance. */
#include <stdlib.h>
#include "kern_gpu.h"
#include "kernels/layernorm.h"

/* The forward and backward of LayerNorm (rms 0) or RMSNorm (rms 1), on the
 * GPU and in the reference. */
static void norm_fwd_gpu(int rms, kern_bf16 *res, kern_bf16 *out, float *mean, float *rstd, const kern_bf16 *inp,
                         const kern_bf16 *sk, const kern_dropout *d, uint8_t *mask, const kern_bf16 *w,
                         const kern_bf16 *b, int N, int C) {
  if (rms) KG_CHECK(kern_rmsnorm_fwd_cuda(res, out, rstd, inp, sk, d, mask, w, N, C, 0));
  else KG_CHECK(kern_layernorm_fwd_cuda(res, out, mean, rstd, inp, sk, d, mask, w, b, N, C, 0));
}

static void norm_fwd_ref(int rms, float *res, float *out, float *mean, float *rstd, const float *inp,
                         const float *sk, const kern_dropout *d, uint8_t *mask, const float *w, const float *b,
                         int N, int C) {
  if (rms) kern_rmsnorm_fwd_ref(res, out, rstd, inp, sk, d, mask, w, N, C);
  else kern_layernorm_fwd_ref(res, out, mean, rstd, inp, sk, d, mask, w, b, N, C);
}

static int run_norm(int N, int C, int skip, int rms, float p, kc_rng *r) {
  long n = (long)N * C;
  printf("%s: shape N=%d C=%d skip=%d dropout %.1f\n", rms ? "RMSNorm" : "LayerNorm", N, C, skip, p);
  kern_dropout d = kern_dropout_make(p, 0xfeedULL << 32, kern_dropout_site(2, KERN_DROP_AFTER_ATTN), 6);
  d.base = 3; /* rows start mid-way through a Philox call's four words */
  const kern_dropout *dp = p > 0 ? &d : NULL;
  uint8_t *mask = p > 0 ? malloc((size_t)n) : NULL, *gmask = p > 0 ? malloc((size_t)n) : NULL, *dmask = NULL;
  if (p > 0) KG_CUDA(cudaMalloc((void **)&dmask, (size_t)n));
  float *inp = kc_rand(r, n, -2, 2), *sk = kc_rand(r, n, -1, 1), *w = kc_rand(r, C, 0.5f, 1.5f);
  float *b = kc_rand(r, C, -0.5f, 0.5f), *dout = kc_rand(r, n, -1, 1), *dres = kc_rand(r, n, -1, 1);
  kc_round_bf16(inp, n), kc_round_bf16(sk, n), kc_round_bf16(w, C), kc_round_bf16(b, C);
  kc_round_bf16(dout, n), kc_round_bf16(dres, n);
  float *res = kc_zeros(n), *out = kc_zeros(n), *mean = kc_zeros(N), *rstd = kc_zeros(N);
  float *dw = kc_zeros(C), *db = kc_zeros(C), *got = kc_zeros(n), *gotN = kc_zeros(N);
  kern_bf16 *d_res = kg_bf16(NULL, n), *d_out = kg_bf16(NULL, n), *d_dres = kg_bf16(dres, n);
  kern_bf16 *d_inp = kg_bf16(inp, n), *d_w = kg_bf16(w, C);
  float *d_mean = kg_f32(NULL, N), *d_rstd = kg_f32(NULL, N), *d_dw = kg_f32(NULL, C), *d_db = kg_f32(NULL, C);
  norm_fwd_gpu(rms, d_res, d_out, d_mean, d_rstd, d_inp, skip ? kg_bf16(sk, n) : NULL, dp, dmask, d_w,
               kg_bf16(b, C), N, C);
  norm_fwd_ref(rms, res, out, mean, rstd, inp, skip ? sk : NULL, dp, mask, w, b, N, C);
  if (skip) {
    kc_round_bf16(res, n); /* the kernel normalises the stored bf16 residual */
    norm_fwd_ref(rms, res, out, mean, rstd, res, NULL, NULL, NULL, w, b, N, C);
  }
  int bad = 0;
  if (dmask) {
    KG_CUDA(cudaMemcpy(gmask, dmask, (size_t)n, cudaMemcpyDeviceToHost));
    bad += kc_compare_bytes("kept mask", gmask, mask, n);
  }
  if (skip) kg_get_bf16(got, d_res, n), bad += kc_compare("residual", got, res, n, KG_ATOL_OUT, KG_RTOL_OUT);
  kg_get_bf16(got, d_out, n), bad += kc_compare("out", got, out, n, KG_ATOL_OUT, KG_RTOL_OUT);
  if (!rms) kg_get_f32(gotN, d_mean, N), bad += kc_compare("mean", gotN, mean, N, 1e-4f, 1e-4f);
  kg_get_f32(gotN, d_rstd, N), bad += kc_compare("rstd", gotN, rstd, N, 1e-4f, 1e-3f);
  const float *xln = skip ? res : inp;
  if (rms) {
    KG_CHECK(kern_rmsnorm_bwd_cuda(d_dres, d_dw, kg_bf16(dout, n), skip ? d_res : d_inp, d_w, d_rstd, N, C, 0));
    kern_rmsnorm_bwd_ref(dres, dw, dout, xln, w, rstd, N, C);
  } else {
    KG_CHECK(kern_layernorm_bwd_cuda(d_dres, d_dw, d_db, kg_bf16(dout, n), skip ? d_res : d_inp, d_w,
                                     d_mean, d_rstd, N, C, 0));
    kern_layernorm_bwd_ref(dres, dw, db, dout, xln, w, mean, rstd, N, C);
  }
  kg_get_bf16(got, d_dres, n), bad += kc_compare("dres", got, dres, n, KG_ATOL_GRAD, KG_RTOL_GRAD);
  kg_get_f32(got, d_dw, C), bad += kc_compare("dw", got, dw, C, 1e-3f, 1e-3f);
  if (!rms) kg_get_f32(got, d_db, C), bad += kc_compare("db", got, db, C, 1e-3f, 1e-3f);
  KG_CUDA(cudaDeviceReset());
  free(inp), free(sk), free(w), free(b), free(dout), free(dres), free(res), free(out);
  free(mean), free(rstd), free(dw), free(db), free(got), free(gotN), free(mask), free(gmask);
  return bad;
}

static int run(int N, int C, int skip, kc_rng *r) {
  return run_norm(N, C, skip, 0, 0, r) + run_norm(N, C, skip, 1, 0, r);
}

int main(void) {
  kg_require_gpu("kern_layernorm_cuda");
  kc_rng r = {12};
  /* forward: C = 37 element-wise; 64 to 2048 (up to 8 chunks per lane)
   * and 4096 (16) with the row in a warp's registers; 6144 (3 chunks of
   * a block's 4 per thread, the last one part full), 8192 (4), 12288 (6
   * of 8) and 16384 (8) in a block's; 16392 (past them) in three passes.
   * Backward: 64 (a quarter of a lane's chunk row) to 2048 with rows in
   * registers and per-warp dw, db slices (300 rows: five blocks of 64);
   * the rest a block a row for dres (4104 to 16384, in registers) or a
   * warp a row (37, 16392), then column sums for dw, db over slabs of at
   * least 16 rows: 70 x 37 (one element per thread, five slabs), 40 x 4104
   * (16-byte vectors, three column tiles, the last one part full, and
   * three slabs, the last one part full). */
  int bad = run(5, 37, 1, &r) + run(64, 768, 1, &r) + run(33, 1024, 0, &r) + run(300, 2048, 1, &r) + run(40, 64, 1, &r) +
            run(6, 4096, 0, &r) + run(3, 6144, 1, &r) + run(2, 8192, 0, &r) + run(8, 12288, 1, &r) +
            run(2, 16384, 1, &r) + run(2, 16392, 1, &r) + run(70, 37, 0, &r) + run(40, 4104, 1, &r);
  /* the skip branch dropped: scalar, warp-cached (8 and 16 chunks), block-cached (4 and 8) and three-pass
   * forwards */
  bad += run_norm(5, 37, 1, 0, 0.2f, &r) + run_norm(64, 768, 1, 1, 0.2f, &r) + run_norm(6, 4096, 1, 0, 0.2f, &r) +
         run_norm(3, 6144, 1, 1, 0.2f, &r) + run_norm(2, 12288, 1, 0, 0.2f, &r) + run_norm(2, 16392, 1, 1, 0.2f, &r);
  return kc_finish("kern_layernorm_cuda", bad);
}
