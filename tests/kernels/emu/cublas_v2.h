/* tests/kernels/emu/cublas_v2.h: the subset of cuBLAS that kernels/bench
 * uses for its plain-GEMM baseline (cublasCreate, cublasSetStream,
 * cublasGemmEx, cublasDestroy), for the emulated build; cublas_emu.cc runs
 * it on cublasLt.h's emulation. Names, enum values and signatures are the
 * real header's (CUDA 13), so kern_bench.c compiles against either. */
#ifndef EMU_CUBLAS_V2_H
#define EMU_CUBLAS_V2_H
#include "cublasLt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct emu_cublas_context *cublasHandle_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;

cublasStatus_t cublasCreate(cublasHandle_t *handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
/* C = alpha op(A) op(B) + beta C, column-major; what cublasLt.h emulates
 * (bf16 A, B; bf16 or fp32 C; fp32 compute), else NOT_SUPPORTED. */
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void *alpha, const void *A, cudaDataType Atype, int lda, const void *B,
                            cudaDataType Btype, int ldb, const void *beta, void *C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo);

#ifdef __cplusplus
}
#endif
#endif
