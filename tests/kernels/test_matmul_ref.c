/* tests/kernels/test_matmul_ref.c: the reference GEMMs.
 * 1. kern_gemm_ref, all four transpose cases, odd sizes (edges of the 4x4
 *    and 64 / 256 blocks), beta = 0 and 1, against a naive triple loop in
 *    double; a 2x2 worked example;
 * 2. the linear layer backward (dinp, dweight, dbias; dinp through the
 *    GeLU of the previous layer, and without it) against finite
 *    differences; the GeLU epilogue's pre against the plain forward's out
 *    and against a naive inp @ w^T + b;
 * 3. every chunk of the chunked forward, rows and columns, against the
 *    full forward: the chunks must tile the output exactly. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kern_check.h"
#include "kernels/gelu.h"
#include "kernels/matmul.h"

static void naive(float *c, const float *a, const float *b, int M, int N, int K, int ta, int tb,
                  float beta) {
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double s = 0.0;
      for (int k = 0; k < K; k++)
        s += (double)(ta ? a[(long)k * M + i] : a[(long)i * K + k]) *
             (tb ? b[(long)j * K + k] : b[(long)k * N + j]);
      c[(long)i * N + j] = (float)(s + beta * c[(long)i * N + j]);
    }
}

static int check_gemm(int M, int N, int K, kc_rng *r) {
  int bad = 0;
  float *a = kc_rand(r, (long)M * K, -1, 1), *b = kc_rand(r, (long)K * N, -1, 1);
  float *c0 = kc_rand(r, (long)M * N, -1, 1);
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++)
      for (int beta = 0; beta < 2; beta++) {
        float *c = kc_copy(c0, (long)M * N), *e = kc_copy(c0, (long)M * N);
        kern_gemm_ref(c, a, b, M, N, K, ta, tb, ta ? M : K, tb ? K : N, N, (float)beta);
        naive(e, a, b, M, N, K, ta, tb, (float)beta);
        char what[64];
        snprintf(what, sizeof what, "gemm %dx%dx%d t%d%d b%d", M, N, K, ta, tb, beta);
        /* fp32 sums of K products of |x| <= 1: error <~ K * 2^-24 * sqrt(K) */
        bad += kc_compare(what, c, e, (long)M * N, 1e-5f * K, 1e-5f);
        free(c), free(e);
      }
  free(a), free(b), free(c0);
  return bad;
}

typedef struct { int N, C, OC, gelu; float *x, *inp, *w, *b, *out, *proj; } ctx_t;

/* out = act(x) @ w^T + b, act = GeLU (gelu) or the identity: d loss / d x
 * is dinp through the GeLU, or dinp itself. */
static double loss(void *p) {
  ctx_t *c = p;
  if (c->gelu)
    kern_gelu_fwd_ref(c->inp, c->x, (long)c->N * c->C);
  else
    memcpy(c->inp, c->x, sizeof(float) * c->N * c->C);
  kern_matmul_fwd_ref(c->out, NULL, c->inp, c->w, c->b, c->N, c->C, c->OC);
  return kc_dot(c->out, c->proj, (long)c->N * c->OC);
}

static int check_bwd(int N, int C, int OC, int gelu, kc_rng *r) {
  printf("linear layer N=%d C=%d OC=%d, %s\n", N, C, OC, gelu ? "input through GeLU" : "plain input");
  ctx_t c = {N, C, OC, gelu, kc_rand(r, (long)N * C, -2, 2), kc_zeros((long)N * C),
             kc_rand(r, (long)OC * C, -1, 1), kc_rand(r, OC, -1, 1), kc_zeros((long)N * OC),
             kc_rand(r, (long)N * OC, -1, 1)};
  float *dinp = kc_zeros((long)N * C), *dw = kc_zeros((long)OC * C), *db = kc_zeros(OC);
  loss(&c);
  kern_matmul_bwd_ref(dinp, dw, db, c.proj, c.inp, c.w, gelu ? c.x : NULL, N, C, OC);
  int bad = kc_fd_check(gelu ? "dinp (via gelu)" : "dinp", c.x, dinp, (long)N * C, loss, &c, r, 20) +
            kc_fd_check("dweight", c.w, dw, (long)OC * C, loss, &c, r, 20) +
            kc_fd_check("dbias", c.b, db, OC, loss, &c, r, 20);
  /* GeLU epilogue: pre = inp @ w^T + b, the plain forward's out (c.out,
   * from loss() again: the finite differences left it at a shifted
   * point) bit for bit, and a naive double sum to fp32 rounding;
   * out = gelu(pre) */
  loss(&c);
  float *pre = kc_zeros((long)N * OC), *out2 = kc_zeros((long)N * OC), *e = kc_zeros((long)N * OC);
  kern_matmul_fwd_ref(out2, pre, c.inp, c.w, c.b, N, C, OC);
  bad += kc_compare("gelu epilogue: pre vs the plain forward", pre, c.out, (long)N * OC, 0, 0);
  naive(e, c.inp, c.w, N, OC, C, 0, 1, 0.0f);
  for (long i = 0; i < (long)N * OC; i++) e[i] += c.b[i % OC];
  bad += kc_compare("gelu epilogue: pre vs naive inp @ w^T + b", pre, e, (long)N * OC, 1e-5f * C, 1e-5f);
  kern_gelu_fwd_ref(pre, pre, (long)N * OC);
  bad += kc_compare("gelu epilogue: out vs gelu(pre)", out2, pre, (long)N * OC, 0, 0);
  free(c.x), free(c.inp), free(c.w), free(c.b), free(c.out), free(c.proj);
  free(dinp), free(dw), free(db), free(pre), free(out2), free(e);
  return bad;
}

static int check_chunks(int N, int C, int OC, int count, kc_rng *r) {
  float *inp = kc_rand(r, (long)N * C, -1, 1), *w = kc_rand(r, (long)OC * C, -1, 1);
  float *b = kc_rand(r, OC, -1, 1), *full = kc_zeros((long)N * OC);
  kern_matmul_fwd_ref(full, NULL, inp, w, b, N, C, OC);
  int bad = 0;
  for (int split = 0; split < 2; split++) {
    float *out = kc_zeros((long)N * OC);
    for (int i = 0; i < count; i++)
      kern_matmul_fwd_chunk_ref(out, inp, w, b, N, C, OC, (kern_split)split, i, count);
    char what[64];
    snprintf(what, sizeof what, "%d %s chunks vs full", count, split ? "column" : "row");
    bad += kc_compare(what, out, full, (long)N * OC, 0, 0);
    free(out);
  }
  free(inp), free(w), free(b), free(full);
  return bad;
}

int main(void) {
  kc_rng r = {6};
  /* Worked example: [1 2; 3 4] @ [5 6; 7 8] = [19 22; 43 50]. */
  float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, c[4], e[4] = {19, 22, 43, 50};
  kern_gemm_ref(c, a, b, 2, 2, 2, 0, 0, 2, 2, 2, 0.0f);
  int bad = kc_compare("2x2 worked example", c, e, 4, 0, 0);
  bad += check_gemm(5, 7, 3, &r) + check_gemm(9, 70, 300, &r) + check_gemm(66, 13, 257, &r);
  bad += check_bwd(5, 6, 7, 1, &r) + check_bwd(8, 12, 16, 1, &r) + check_bwd(7, 9, 5, 0, &r);
  bad += check_chunks(10, 9, 11, 3, &r) + check_chunks(64, 32, 48, 4, &r);
  return kc_finish("kern_matmul_ref", bad);
}
