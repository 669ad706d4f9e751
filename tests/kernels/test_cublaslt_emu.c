/* tests/kernels/test_cublaslt_emu.c: the cuBLASLt stand-in
 * (emu/cublaslt_emu.cc) on its own, on 2x3 @ 3x2 products worked out by
 * hand: a strided batch with a shared operand (stride 0), transposed A
 * with the bias epilogue, and the refusals the real library makes (a
 * setter's size, ld < rows, batch counts differing, GeLU aux ld); and the
 * cuBLAS stand-in (emu/cublas_emu.cc, kern_bench's baseline) on one
 * product, as kern_bench calls it. The kernels' own GEMMs are checked by
 * kern_matmul_emu. */
#include <cublas_v2.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "kern_gpu.h"

static int expect_status(const char *what, cublasStatus_t got, cublasStatus_t want) {
  printf("  %-44s got %-28s expected %s\n", what, cublasLtGetStatusString(got),
         cublasLtGetStatusString(want));
  return got != want;
}

typedef struct lt_case {
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t a, b, d;
} lt_case;

/* A (2, 3) or, transposed, (3, 2); B (3, 2); D (2, 2); all column-major. */
static void case_init(lt_case *c, int ta, cudaDataType_t dt, int batch, long long sa,
                      long long sb, long long sd) {
  cublasOperation_t t = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasLtMatmulDescCreate(&c->op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t);
  cublasLtMatrixLayoutCreate(&c->a, CUDA_R_16BF, ta ? 3 : 2, ta ? 2 : 3, ta ? 3 : 2);
  cublasLtMatrixLayoutCreate(&c->b, CUDA_R_16BF, 3, 2, 3);
  cublasLtMatrixLayoutCreate(&c->d, dt, 2, 2, 2);
  cublasLtMatrixLayout_t l[3] = {c->a, c->b, c->d};
  long long s[3] = {sa, sb, sd};
  for (int i = 0; i < 3 && batch > 1; i++) {
    cublasLtMatrixLayoutSetAttribute(l[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                     sizeof batch);
    cublasLtMatrixLayoutSetAttribute(l[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &s[i],
                                     sizeof s[i]);
  }
}

static void case_free(lt_case *c) {
  cublasLtMatmulDescDestroy(c->op);
  cublasLtMatrixLayoutDestroy(c->a), cublasLtMatrixLayoutDestroy(c->b);
  cublasLtMatrixLayoutDestroy(c->d);
}

/* The heuristic, then the product D = alpha op(A) B (beta 0: D's NaNs unread). */
static cublasStatus_t case_run(cublasLtHandle_t h, const lt_case *c, const void *A, const void *B,
                               void *D) {
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulHeuristicResult_t res;
  int found = 0;
  float alpha = 2.0f, beta = 0.0f;
  cublasLtMatmulPreferenceCreate(&pref);
  cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(h, c->op, c->a, c->b, c->d, c->d, pref, 1,
                                                     &res, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st == CUBLAS_STATUS_SUCCESS && found != 1) st = CUBLAS_STATUS_NOT_SUPPORTED;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmul(h, c->op, &alpha, A, c->a, B, c->b, &beta, D, c->d, D, c->d, &res.algo,
                        NULL, 0, 0);
  KG_CUDA(cudaDeviceSynchronize());
  return st;
}

/* A = [1 2 3; 4 5 6] (batch 1: -A), B = [1 0; 0 1; 1 1] shared, alpha 2:
 * 2 A B = [8 10; 20 22], column-major {8, 20, 10, 22}. */
static int batched_shared_b(cublasLtHandle_t h) {
  float a[12] = {1, 4, 2, 5, 3, 6, -1, -4, -2, -5, -3, -6}, b[6] = {1, 0, 1, 0, 1, 1};
  float want[8] = {8, 20, 10, 22, -8, -20, -10, -22}, got[8];
  kern_bf16 *da = kg_bf16(a, 12), *db = kg_bf16(b, 6);
  float *dd = kg_f32(NULL, 8);
  KG_CUDA(cudaMemset(dd, 0xff, sizeof got)); /* NaN: beta = 0 must not read it */
  lt_case c;
  case_init(&c, 0, CUDA_R_32F, 2, 6, 0, 4);
  int bad = expect_status("batch 2, B stride 0, fp32 D", case_run(h, &c, da, db, dd),
                          CUBLAS_STATUS_SUCCESS);
  kg_get_f32(got, dd, 8);
  bad += kc_compare("  2 A[i] B", got, want, 8, 0.0f, 0.0f);
  case_free(&c);
  cudaFree(da), cudaFree(db), cudaFree(dd);
  return bad;
}

/* A^T stored (3, 2) = {1, 2, 3, 4, 5, 6}, bias {1, -1}: 2 A B + bias =
 * [9 11; 19 21], column-major {9, 19, 11, 21}, exact in bf16. */
static int transposed_bias(cublasLtHandle_t h) {
  float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 0, 1, 0, 1, 1}, bias[2] = {1, -1};
  float want[4] = {9, 19, 11, 21}, got[4];
  kern_bf16 *da = kg_bf16(a, 6), *db = kg_bf16(b, 6), *dbias = kg_bf16(bias, 2);
  kern_bf16 *dd = kg_bf16(NULL, 4);
  lt_case c;
  case_init(&c, 1, CUDA_R_16BF, 1, 0, 0, 0);
  cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_BIAS;
  cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
  cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &dbias, sizeof dbias);
  int bad = expect_status("op(A) = A^T, bias epilogue, bf16 D", case_run(h, &c, da, db, dd),
                          CUBLAS_STATUS_SUCCESS);
  kg_get_bf16(got, dd, 4);
  bad += kc_compare("  2 A B + bias", got, want, 4, 0.0f, 0.0f);
  case_free(&c);
  cudaFree(da), cudaFree(db), cudaFree(dbias), cudaFree(dd);
  return bad;
}

/* A = [1 2 3; 4 5 6], B = [1 4; 2 5; 3 6], fp32 D, BGRADB: D = 2 A B =
 * [28 64; 64 154] (column-major {28, 64, 64, 154}) and the bias gradient
 * the column sums of B over k, {6, 15}, in D's type; batch 2 refused (not
 * emulated). */
static int bias_gradient_b(cublasLtHandle_t h) {
  float a[6] = {1, 4, 2, 5, 3, 6}, b[6] = {1, 2, 3, 4, 5, 6};
  float want[4] = {28, 64, 64, 154}, want_bias[2] = {6, 15}, got[4];
  kern_bf16 *da = kg_bf16(a, 6), *db = kg_bf16(b, 6);
  float *dd = kg_f32(NULL, 4), *dbias = kg_f32(NULL, 2);
  lt_case c;
  case_init(&c, 0, CUDA_R_32F, 1, 0, 0, 0);
  cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_BGRADB;
  cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
  cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &dbias, sizeof dbias);
  int bad = expect_status("BGRADB, fp32 D", case_run(h, &c, da, db, dd), CUBLAS_STATUS_SUCCESS);
  kg_get_f32(got, dd, 4);
  bad += kc_compare("  2 A B", got, want, 4, 0.0f, 0.0f);
  kg_get_f32(got, dbias, 2);
  bad += kc_compare("  column sums of B", got, want_bias, 2, 0.0f, 0.0f);
  case_free(&c);
  case_init(&c, 0, CUDA_R_32F, 2, 6, 6, 4);
  cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
  cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &dbias, sizeof dbias);
  bad += expect_status("BGRADB over 2 batches (not emulated)", case_run(h, &c, da, db, dd),
                       CUBLAS_STATUS_NOT_SUPPORTED);
  case_free(&c);
  cudaFree(da), cudaFree(db), cudaFree(dd), cudaFree(dbias);
  return bad;
}

static int refusals(cublasLtHandle_t h) {
  kern_bf16 *buf = kg_bf16(NULL, 64);
  lt_case c;
  case_init(&c, 0, CUDA_R_16BF, 1, 0, 0, 0);
  int64_t wide = CUBLAS_OP_T;
  int bad = expect_status("TRANSA given 8 bytes (int32_t attribute)",
                          cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_TRANSA, &wide,
                                                         sizeof wide),
                          CUBLAS_STATUS_INVALID_VALUE);
  cublasLtMatrixLayout_t narrow; /* B (3, 2) with ld 2 < 3 rows */
  cublasLtMatrixLayoutCreate(&narrow, CUDA_R_16BF, 3, 2, 2);
  lt_case n = c;
  n.b = narrow;
  bad += expect_status("ld 2 < 3 rows", case_run(h, &n, buf, buf, buf),
                       CUBLAS_STATUS_INVALID_VALUE);
  int two = 2;
  long long stride = 8;
  cublasLtMatrixLayoutSetAttribute(c.a, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &two, sizeof two);
  cublasLtMatrixLayoutSetAttribute(c.a, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                   sizeof stride);
  bad += expect_status("batch count 2 for A, 1 for B and D", case_run(h, &c, buf, buf, buf),
                       CUBLAS_STATUS_INVALID_VALUE);
  case_free(&c);
  case_init(&c, 0, CUDA_R_16BF, 1, 0, 0, 0);
  cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_DGELU;
  int64_t aux_ld = 4; /* >= 2 rows but not a multiple of 8 */
  cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
  cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &buf,
                                 sizeof buf);
  cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld,
                                 sizeof aux_ld);
  bad += expect_status("DGELU aux ld 4 (not a multiple of 8)", case_run(h, &c, buf, buf, buf),
                       CUBLAS_STATUS_INVALID_VALUE);
  case_free(&c);
  cublasLtMatrixLayoutDestroy(narrow);
  cudaFree(buf);
  return bad;
}

/* cublasGemmEx as kern_bench's run_blas calls it: row-major out (m, n) =
 * a (m, k) @ b (n, k)^T, i.e. column-major C (n, m) = op_T(B) op_N(A) with
 * B stored (k, n) column-major. a = [1 2 3; 4 5 6], b = [1 0 1; 0 1 1]:
 * out = [4 5; 10 11], row-major {4, 5, 10, 11}, exact in bf16. */
static int gemm_ex(void) {
  float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 0, 1, 0, 1, 1}, want[4] = {4, 5, 10, 11}, got[4];
  float one = 1.0f, zero = 0.0f;
  kern_bf16 *da = kg_bf16(a, 6), *db = kg_bf16(b, 6), *dc = kg_bf16(NULL, 4);
  cublasHandle_t h;
  int bad = expect_status("cublasCreate", cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  bad += expect_status("cublasGemmEx, T x N, bf16 out",
                       cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, 2, 2, 3, &one, db, CUDA_R_16BF, 3, da, CUDA_R_16BF,
                                    3, &zero, dc, CUDA_R_16BF, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                       CUBLAS_STATUS_SUCCESS);
  KG_CUDA(cudaDeviceSynchronize());
  kg_get_bf16(got, dc, 4);
  bad += kc_compare("  a b^T", got, want, 4, 0.0f, 0.0f);
  bad += expect_status("cublasDestroy", cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
  cudaFree(da), cudaFree(db), cudaFree(dc);
  return bad;
}

int main(void) {
  cublasLtHandle_t h;
  KG_CHECK(cublasLtCreate(&h) != CUBLAS_STATUS_SUCCESS);
  int bad = batched_shared_b(h) + transposed_bias(h) + bias_gradient_b(h) + refusals(h) + gemm_ex();
  cublasLtDestroy(h);
  return kc_finish("kern_cublaslt_emu", bad);
}
