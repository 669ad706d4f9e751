/* kernels/matmul_ref.c: fp32 reference GEMMs. kern_gemm_ref packs the
 * operands so that both are read along K (c[i][j] = a[i] . b[j]), then runs
 * a 4 x 8 register-blocked kernel over (K 256) x (N 64) cache blocks. Every
 * element is summed the same way wherever it falls (tile or edge): from 0
 * over its cache block's k in order, one rounded multiply and one rounded
 * add a term, the block's sum then added to c; so the results do not
 * depend on the tiling, and are the 4 x 4 scalar kernel's bit for bit. */
#include <stdlib.h>
#include <string.h>
#include "kernels/gelu.h"
#include "kernels/matmul.h"

#define KB 256
#define NB 64

/* dst (R, K) contiguous = src (K, R) with row stride ld, transposed, in
 * 32 x 32 blocks (a block's rows of src and of dst stay in cache). */
static float *pack_transposed(const float *src, int R, int K, long ld) {
  float *dst = malloc(sizeof(float) * (size_t)R * K);
  for (int k0 = 0; k0 < K; k0 += 32)
    for (int r0 = 0; r0 < R; r0 += 32)
      for (int k = k0; k < K && k < k0 + 32; k++)
        for (int r = r0; r < R && r < r0 + 32; r++) dst[(long)r * K + k] = src[(long)k * ld + r];
  return dst;
}

/* Four floats as one SSE register (GCC's vector extension; the x86-64
 * baseline, so no fused multiply-add: each lane rounds the product and
 * the sum as the scalar code does). */
typedef float v4f __attribute__((vector_size(16)));

/* bp[(k - k0) 8 + j] = b[j][k] for 8 rows of b (ld ldb) and k in [k0, k1):
 * a tile's 8 columns at each k side by side. */
static void pack_panel(float *bp, const float *b, long ldb, int k0, int k1) {
  for (int k = k0; k < k1; k++)
    for (int j = 0; j < 8; j++) bp[(long)(k - k0) * 8 + j] = b[j * ldb + k];
}

/* c[i][j] += a[i][k0:k1] . b[j][k0:k1] for a 4 x 8 tile, b as pack_panel
 * laid it out: two 4-wide vectors of columns per row of a. */
static void micro4x8(float *c, long ldc, const float *a, long lda, const float *bp, int k0, int k1) {
  v4f acc[4][2] = {{{0}}};
  for (int k = k0; k < k1; k++) {
    v4f b0, b1;
    memcpy(&b0, bp + (long)(k - k0) * 8, sizeof b0);
    memcpy(&b1, bp + (long)(k - k0) * 8 + 4, sizeof b1);
    for (int i = 0; i < 4; i++) {
      v4f ai = {a[i * lda + k], a[i * lda + k], a[i * lda + k], a[i * lda + k]};
      acc[i][0] += ai * b0;
      acc[i][1] += ai * b1;
    }
  }
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 8; j++) c[i * ldc + j] += acc[i][j / 4][j % 4];
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

/* c (M, N) += a (M, K) . b (N, K)^T, rows of a and b contiguous along K.
 * Per (K 256) x (N 64) block, b's full 8-column tiles are packed once
 * (bp: KB x NB floats) and reused by every 4 rows of a. */
static void gemm_nt(float *c, const float *a, const float *b, int M, int N, int K, long lda,
                    long ldb, long ldc) {
  float *bp = malloc(sizeof(float) * KB * NB);
  for (int k0 = 0; k0 < K; k0 += KB) {
    int k1 = k0 + KB < K ? k0 + KB : K;
    for (int j0 = 0; j0 < N; j0 += NB) {
      int j1 = j0 + NB < N ? j0 + NB : N, jt = j0 + (j1 - j0) / 8 * 8; /* full tiles end at jt */
      for (int j = j0; j < jt; j += 8) pack_panel(bp + (long)(j - j0) * KB, b + (long)j * ldb, ldb, k0, k1);
      for (int i = 0; i < M; i += 4) {
        int mi = M - i < 4 ? M - i : 4;
        float *ci = c + (long)i * ldc;
        const float *ai = a + (long)i * lda;
        for (int j = j0; j < jt; j += 8)
          if (mi == 4)
            micro4x8(ci + j, ldc, ai, lda, bp + (long)(j - j0) * KB, k0, k1);
          else
            edge(ci + j, ldc, ai, lda, b + (long)j * ldb, ldb, mi, 8, k0, k1);
        if (jt < j1)
          edge(ci + jt, ldc, ai, lda, b + (long)jt * ldb, ldb, mi, j1 - jt, k0, k1);
      }
    }
  }
  free(bp);
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
