/* tests/kernels/emu/cublas_emu.cc: cublas_v2.h's subset on the cuBLASLt
 * emulation (cublaslt_emu.cc): a handle is an Lt handle and a stream, and
 * cublasGemmEx is one cublasLtMatmul with the layouts cuBLAS's
 * column-major convention gives (op(A) m x k, op(B) k x n, C m x n). */
#include <cstdint>
#include <new>

#include "cublas_v2.h"

struct emu_cublas_context {
  cublasLtHandle_t lt;
  cudaStream_t stream;
};

extern "C" cublasStatus_t cublasCreate(cublasHandle_t *handle) {
  if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
  cublasHandle_t h = new (std::nothrow) emu_cublas_context{nullptr, nullptr};
  if (!h) return CUBLAS_STATUS_ALLOC_FAILED;
  cublasStatus_t s = cublasLtCreate(&h->lt);
  if (s != CUBLAS_STATUS_SUCCESS) {
    delete h;
    return s;
  }
  *handle = h;
  return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  cublasStatus_t s = cublasLtDestroy(handle->lt);
  delete handle;
  return s;
}

extern "C" cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                       int m, int n, int k, const void *alpha, const void *A, cudaDataType Atype,
                                       int lda, const void *B, cudaDataType Btype, int ldb, const void *beta,
                                       void *C, cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                                       cublasGemmAlgo_t algo) {
  (void)algo;
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (m < 0 || n < 0 || k < 0) return CUBLAS_STATUS_INVALID_VALUE;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulPreference_t pref = nullptr; /* defaults: no workspace, 256-byte aligned operands */
  int32_t ta = transa, tb = transb;
  cublasStatus_t s = cublasLtMatmulDescCreate(&desc, computeType, CUDA_R_32F);
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatrixLayoutCreate(&la, Atype, transa == CUBLAS_OP_N ? m : k, transa == CUBLAS_OP_N ? k : m, lda);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatrixLayoutCreate(&lb, Btype, transb == CUBLAS_OP_N ? k : n, transb == CUBLAS_OP_N ? n : k, ldb);
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&lc, Ctype, m, n, ldc);
  cublasLtMatmulHeuristicResult_t heur;
  int found = 0;
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulPreferenceCreate(&pref);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulAlgoGetHeuristic(handle->lt, desc, la, lb, lc, lc, pref, 1, &heur, &found);
  if (s == CUBLAS_STATUS_SUCCESS && !found) s = CUBLAS_STATUS_NOT_SUPPORTED;
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmul(handle->lt, desc, alpha, A, la, B, lb, beta, C, lc, C, lc, &heur.algo, nullptr, 0,
                       handle->stream);
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (lc) cublasLtMatrixLayoutDestroy(lc);
  if (lb) cublasLtMatrixLayoutDestroy(lb);
  if (la) cublasLtMatrixLayoutDestroy(la);
  if (desc) cublasLtMatmulDescDestroy(desc);
  return s;
}
