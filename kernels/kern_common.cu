/* kernels/kern_common.cu: the kern_ctx lifecycle and the error reporters
 * behind KERN_CUDA_TRY / KERN_LT_TRY. */
#include <stdio.h>
#include "kernels/kern_common.h"

int kern_report_cuda(int err, const char *what, const char *file, int line) {
  fprintf(stderr, "%s:%d: %s: CUDA error %d: %s\n", file, line, what, err,
          cudaGetErrorString((cudaError_t)err));
  return err ? err : -1;
}

int kern_report_lt(int status, const char *what, const char *file, int line) {
  fprintf(stderr, "%s:%d: %s: cuBLASLt error %d: %s\n", file, line, what, status,
          cublasLtGetStatusString((cublasStatus_t)status));
  return 1000 + status;
}

int kern_ctx_init(kern_ctx *ctx, size_t workspace_bytes) {
  memset(ctx, 0, sizeof *ctx);
  KERN_LT_TRY(cublasLtCreate(&ctx->lt));
  KERN_CUDA_TRY(cudaMalloc(&ctx->workspace, workspace_bytes));
  ctx->workspace_bytes = workspace_bytes;
  return 0;
}

void kern_ctx_free(kern_ctx *ctx) {
  if (ctx->workspace) cudaFree(ctx->workspace);
  if (ctx->lt) cublasLtDestroy(ctx->lt);
  memset(ctx, 0, sizeof *ctx);
}
