/* kernels/matmul_ref.c: fp32 reference GEMMs. kern_gemm_ref packs the
 * operands so that both are read along K (c[i][j] = a[i] . b[j]), then runs
 * a 4 x 4 register-blocked kernel over (K 256) x (N 64) cache blocks. */
#include <stdlib.h>
#include <string.h>
#include "kernels/gelu.h"
#include "kernels/matmul.h"

#define KB 256
#define NB 64

/* dst (R, K) contiguous = src (K, R) with row stride ld, transposed. */
static float *pack_transposed(const float *src, int R, int K, long ld) {
  float *dst = malloc(sizeof(float) * (size_t)R * K);
  for (int k = 0; k < K; k++)
    for (int r = 0; r < R; r++) dst[(long)r * K + k] = src[(long)k * ld + r];
  return dst;
}

/* c[i][j] += a[i][k0:k1] . b[j][k0:k1] for a 4 x 4 tile. */
static void micro4x4(float *c, long ldc, const float *a, long lda, const float *b, long ldb,
                     int k0, int k1) {
  float acc[4][4] = {{0}};
  for (int k = k0; k < k1; k++) {
    float a0 = a[k], a1 = a[lda + k], a2 = a[2 * lda + k], a3 = a[3 * lda + k];
    for (int j = 0; j < 4; j++) {
      float bj = b[j * ldb + k];
      acc[0][j] += a0 * bj;
      acc[1][j] += a1 * bj;
      acc[2][j] += a2 * bj;
      acc[3][j] += a3 * bj;
    }
  }
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) c[i * ldc + j] += acc[i][j];
}

static void edge(float *c, long ldc, const float *a, long lda, const float *b, long ldb, int mi,
                 int nj, int k0, int k1) {
  for (int i = 0; i < mi; i++)
    for (int j = 0; j < nj; j++) {
      float s = 0.0f;
      for (int k = k0; k < k1; k++) s += a[i * lda + k] * b[j * ldb + k];
      c[i * ldc + j] += s;
    }
}

/* c (M, N) += a (M, K) . b (N, K)^T, rows of a and b contiguous along K. */
static void gemm_nt(float *c, const float *a, const float *b, int M, int N, int K, long lda,
                    long ldb, long ldc) {
  for (int k0 = 0; k0 < K; k0 += KB) {
    int k1 = k0 + KB < K ? k0 + KB : K;
    for (int j0 = 0; j0 < N; j0 += NB) {
      int j1 = j0 + NB < N ? j0 + NB : N;
      for (int i = 0; i < M; i += 4)
        for (int j = j0; j < j1; j += 4) {
          float *cij = c + (long)i * ldc + j;
          const float *ai = a + (long)i * lda, *bj = b + (long)j * ldb;
          if (i + 4 <= M && j + 4 <= j1)
            micro4x4(cij, ldc, ai, lda, bj, ldb, k0, k1);
          else
            edge(cij, ldc, ai, lda, bj, ldb, M - i < 4 ? M - i : 4, j1 - j < 4 ? j1 - j : 4,
                 k0, k1);
        }
    }
  }
}

void kern_gemm_ref(float *c, const float *a, const float *b, int M, int N, int K, int ta,
                   int tb, long lda, long ldb, long ldc, float beta) {
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) c[(long)i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[(long)i * ldc + j];
  float *ap = ta ? pack_transposed(a, M, K, lda) : NULL;
  float *bp = tb ? NULL : pack_transposed(b, N, K, ldb);
  gemm_nt(c, ap ? ap : a, bp ? bp : b, M, N, K, ap ? K : lda, bp ? K : ldb, ldc);
  free(ap);
  free(bp);
}

static void add_bias(float *out, const float *bias, int rows, int cols, long ld) {
  if (!bias) return;
  for (long n = 0; n < rows; n++)
    for (int c = 0; c < cols; c++) out[n * ld + c] += bias[c];
}

void kern_matmul_fwd_ref(float *out, float *pre, const float *inp, const float *weight,
                         const float *bias, int N, int C, int OC) {
  kern_gemm_ref(out, inp, weight, N, OC, C, 0, 1, C, C, OC, 0.0f);
  add_bias(out, bias, N, OC, OC);
  if (!pre) return;
  memcpy(pre, out, sizeof(float) * (size_t)N * OC);
  kern_gelu_fwd_ref(out, pre, (long)N * OC);
}

void kern_matmul_bwd_ref(float *dinp, float *dweight, float *dbias, const float *dout,
                         const float *inp, const float *weight, const float *pre_gelu, int N,
                         int C, int OC) {
  kern_gemm_ref(dinp, dout, weight, N, C, OC, 0, 0, OC, C, C, 0.0f);
  if (pre_gelu) kern_gelu_bwd_ref(dinp, dinp, pre_gelu, (long)N * C);
  kern_gemm_ref(dweight, dout, inp, OC, C, N, 1, 0, OC, C, C, 1.0f);
  if (dbias) kern_bias_grad_ref(dbias, dout, N, OC);
}

void kern_matmul_fwd_chunk_ref(float *out, const float *inp, const float *weight,
                               const float *bias, int N, int C, int OC, kern_split split,
                               int index, int count) {
  int lo, hi;
  if (split == KERN_SPLIT_ROWS) {
    kern_chunk_range(N, index, count, &lo, &hi);
    kern_gemm_ref(out + (long)lo * OC, inp + (long)lo * C, weight, hi - lo, OC, C, 0, 1, C, C,
                  OC, 0.0f);
    add_bias(out + (long)lo * OC, bias, hi - lo, OC, OC);
  } else {
    kern_chunk_range(OC, index, count, &lo, &hi);
    kern_gemm_ref(out + lo, inp, weight + (long)lo * C, N, hi - lo, C, 0, 1, C, C, OC, 0.0f);
    add_bias(out + lo, bias ? bias + lo : NULL, N, hi - lo, OC);
  }
}
