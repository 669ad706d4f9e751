/* kernels/matmul.h: the linear layer's GEMMs, as in llm.c:
 *   out (N, OC) = inp (N, C) @ weight^T + bias      weight (OC, C), bias (OC)
 * with an optional GeLU epilogue (out = gelu(pre), pre (N, OC) saved) and
 * the backward
 *   dinp (N, C)      = dout (N, OC) @ weight        [* gelu'(pre_gelu)]
 *   dweight (OC, C) += dout^T @ inp                 fp32
 *   dbias (OC)      += column sums of dout          fp32
 * N = B * T. The "chunked" forward computes one block of rows (a slice of
 * the sequence: pipelined against an all-gather in sequence parallelism) or
 * of columns (a slice of OC: pipelined against a reduce-scatter) so that
 * communication of one chunk overlaps the GEMM of the next.
 *
 * Also the general row-major GEMM the references are built from. */
#ifndef KERN_MATMUL_H
#define KERN_MATMUL_H
#include "kernels/kern_common.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef enum { KERN_SPLIT_ROWS = 0, KERN_SPLIT_COLS = 1 } kern_split;

/* c (M, N) = beta * c + op(a) @ op(b), all row-major; op(a) is (M, K): a is
 * stored (M, K) when !ta, (K, M) when ta; likewise b is (K, N) or, when tb,
 * (N, K). lda, ldb, ldc are row strides. Cache-blocked; O(M N K). */
void kern_gemm_ref(float *c, const float *a, const float *b, int M, int N, int K, int ta,
                   int tb, long lda, long ldb, long ldc, float beta);

/* pre may be NULL; when non-NULL the epilogue is GeLU and pre receives the
 * input of the GeLU. bias may be NULL. */
void kern_matmul_fwd_ref(float *out, float *pre, const float *inp, const float *weight,
                         const float *bias, int N, int C, int OC);
/* pre_gelu may be NULL (no GeLU in the forward); dbias may be NULL. */
void kern_matmul_bwd_ref(float *dinp, float *dweight, float *dbias, const float *dout,
                         const float *inp, const float *weight, const float *pre_gelu, int N,
                         int C, int OC);
/* Chunk `index` of `count` along rows (of N) or columns (of OC); chunk
 * boundaries are kern_chunk_range(). No GeLU epilogue. */
void kern_matmul_fwd_chunk_ref(float *out, const float *inp, const float *weight,
                               const float *bias, int N, int C, int OC, kern_split split,
                               int index, int count);

/* [*lo, *hi) of chunk index of count over n items; sizes differ by <= 1. */
static inline void kern_chunk_range(int n, int index, int count, int *lo, int *hi) {
  *lo = (int)((long)n * index / count);
  *hi = (int)((long)n * (index + 1) / count);
}

#ifdef KERN_HAVE_CUDA
/* GEMMs through cuBLASLt. Bias and GeLU are cuBLASLt epilogues
 * (CUBLASLT_EPILOGUE_BIAS, _GELU_AUX_BIAS, _DGELU), and so is the bias
 * gradient where cuBLASLt offers it (_BGRADB on the weight gradient, into
 * the workspace's first OC floats, then added to dbias; else a separate
 * kernel). The GeLU epilogues need OC % 8 == 0 (aux leading dimension). */
int kern_matmul_fwd_cuda(const kern_ctx *ctx, kern_bf16 *out, kern_bf16 *pre,
                         const kern_bf16 *inp, const kern_bf16 *weight, const kern_bf16 *bias,
                         int N, int C, int OC, cudaStream_t stream);
int kern_matmul_bwd_cuda(const kern_ctx *ctx, kern_bf16 *dinp, float *dweight, float *dbias,
                         const kern_bf16 *dout, const kern_bf16 *inp, const kern_bf16 *weight,
                         const kern_bf16 *pre_gelu, int N, int C, int OC, cudaStream_t stream);
/* dweight (OC, C) += dout^T (OC, N) @ inp (N, C) in fp32 and, when dbias
 * is given, dbias (OC) += dout's column sums (BGRADB where cuBLASLt offers
 * it, as above): kern_matmul_bwd_cuda's weight half, the real backend's
 * linear_wgrad. */
int kern_linear_wgrad_cuda(const kern_ctx *ctx, float *dweight, float *dbias, const kern_bf16 *dout,
                           const kern_bf16 *inp, int N, int C, int OC, cudaStream_t stream);

/* kern_ctx.algos (kern_common.h): a problem's choice (NULL: none), one
 * added (0, or -1 out of memory), the table freed. Keys compare by memcmp:
 * zero one before filling it. */
const kern_algo_choice *kern_algo_find(const kern_algo_table *t, const kern_gemm_key *k);
int kern_algo_add(kern_algo_table *t, const kern_algo_choice *c);
void kern_algo_free(kern_algo_table *t);

/* Bias gradients kern_matmul_bwd_cuda folded into the weight-gradient GEMM
 * (BGRADB) and ran as a separate kernel, since the process started. */
void kern_matmul_bgrad_counts(long *fused, long *separate);
int kern_matmul_fwd_chunk_cuda(const kern_ctx *ctx, kern_bf16 *out, const kern_bf16 *inp,
                               const kern_bf16 *weight, const kern_bf16 *bias, int N, int C,
                               int OC, kern_split split, int index, int count,
                               cudaStream_t stream);

/* The general row-major GEMM on the device, batched with strides:
 * c[i] (M, N) = alpha op(a[i]) op(b[i]) + beta c[i], i < batch, a and b bf16,
 * c bf16 (c_fp32 = 0) or fp32 (c_fp32 = 1); fp32 accumulation. */
typedef struct kern_gemm_desc {
  int M, N, K, ta, tb, batch, c_fp32;
  long lda, ldb, ldc;
  long long stride_a, stride_b, stride_c;
  float alpha, beta;
} kern_gemm_desc;
int kern_gemm_cuda(const kern_ctx *ctx, void *c, const kern_bf16 *a, const kern_bf16 *b,
                   const kern_gemm_desc *g, cudaStream_t stream);

/* The two GEMMs kern_matmul_bwd_cuda issues for a linear layer out (N, OC)
 * = inp (N, C) @ weight (OC, C)^T, for whoever times them apart (calibrate,
 * kern_bench): KERN_BWD_DINP, dinp (N, C) = dout (N, OC) @ weight (OC, C)
 * in bf16 (kern_gemm_cuda's a = dout, b = weight); KERN_BWD_DWEIGHT,
 * dweight (OC, C) += dout^T (OC, N) @ inp (N, C) in fp32 (a = dout, b = inp). */
enum { KERN_BWD_DINP, KERN_BWD_DWEIGHT };
static inline kern_gemm_desc kern_linear_bwd_desc(int N, int C, int OC, int which) {
  kern_gemm_desc g = {N, C, OC, 0, 0, 1, 0, OC, C, C, 0, 0, 0, 1.0f, 0.0f};
  kern_gemm_desc w = {OC, C, N, 1, 0, 1, 1, OC, C, C, 0, 0, 0, 1.0f, 1.0f};
  return which == KERN_BWD_DWEIGHT ? w : g;
}
#endif

#ifdef __cplusplus
}
#endif
#endif
