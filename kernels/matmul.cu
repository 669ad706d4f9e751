/* kernels/matmul.cu: GEMMs through cuBLASLt. One function, lt_matmul,
 * maps a row-major (optionally batched, strided) GEMM with an epilogue onto
 * cuBLASLt's column-major API: row-major C = op(A) op(B) is column-major
 * C^T = op(B)^T op(A)^T, so A and B swap and M and N swap. Everything else
 * (linear layer, chunks, the unfused attention) is a call to it. */
#include "kernels/gelu.h"
#include "kernels/kern_cuda.cuh"
#include "kernels/matmul.h"

/* Largest power of two (<= 256) dividing the address: what cuBLASLt may
 * assume about the pointer when choosing an algorithm. */
static uint32_t align_of(const void *p) {
  uint32_t a = 256;
  while (a > 2 && (uintptr_t)p % a) a >>= 1;
  return a;
}

typedef struct lt_epi {
  cublasLtEpilogue_t kind;
  const void *bias; /* bf16, length N (row-major columns); BGRADB: where the fp32 column sums of
                       op(a) over K (row-major rows of a) are written */
  void *aux;        /* GeLU input (row-major, ld aux_ld) */
  long aux_ld;
  int optional;     /* cuBLASLt may offer no algorithm with this epilogue for the problem:
                       KERN_NO_SUCH_ALGO, quietly, when it does not */
} lt_epi;

static int lt_layout(cublasLtMatrixLayout_t *l, cudaDataType_t t, long rows, long cols, long ld,
                     int batch, long long stride) {
  KERN_LT_TRY(cublasLtMatrixLayoutCreate(l, t, rows, cols, ld));
  if (batch > 1) {
    KERN_LT_TRY(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                                 sizeof batch));
    KERN_LT_TRY(cublasLtMatrixLayoutSetAttribute(
        *l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
  }
  return 0;
}

static int lt_set_epilogue(cublasLtMatmulDesc_t op, const lt_epi *e) {
  KERN_LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e->kind,
                                             sizeof e->kind));
  if (e->bias)
    KERN_LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &e->bias,
                                               sizeof e->bias));
  if (e->aux && align_of(e->aux) < 16) /* no alignment hint exists for it either */
    return kern_report_lt(CUBLAS_STATUS_INVALID_VALUE, "GeLU aux buffer not 16-byte aligned", __FILE__,
                          __LINE__);
  if (e->aux) {
    int64_t ld = e->aux_ld;
    KERN_LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                               &e->aux, sizeof e->aux));
    KERN_LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld,
                                               sizeof ld));
  }
  return 0;
}

/* cuBLASLt's candidate number `rank` (0: its first choice) for the
 * problem into *res, and how many it offers up to KERN_MAX_ALGOS in *found
 * (NULL: not wanted); KERN_NO_SUCH_ALGO, quietly, when it offers fewer. */
static int lt_pick(const kern_ctx *ctx, int rank, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t la,
                   cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t lc, const void *pa,
                   const void *pb, const void *pc, int optional, cublasLtMatmulHeuristicResult_t *res,
                   int *offered) {
  if (rank < 0 || rank >= KERN_MAX_ALGOS)
    return kern_report_lt(CUBLAS_STATUS_INVALID_VALUE, "kern_ctx.algo_rank outside [0, KERN_MAX_ALGOS)",
                          __FILE__, __LINE__);
  cublasLtMatmulPreference_t pref;
  KERN_LT_TRY(cublasLtMatmulPreferenceCreate(&pref));
  size_t ws = ctx->workspace_bytes;
  uint32_t al[3] = {align_of(pa), align_of(pb), align_of(pc)};
  cublasLtMatmulPreferenceAttributes_t which[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  cublasLtMatmulHeuristicResult_t all[KERN_MAX_ALGOS];
  int rc = 0, found = 0;
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  for (int i = 0; i < 4 && st == CUBLAS_STATUS_SUCCESS; i++)
    st = cublasLtMatmulPreferenceSetAttribute(pref, which[i], &al[i < 3 ? i : 2], sizeof al[0]);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulAlgoGetHeuristic(ctx->lt, op, la, lb, lc, lc, pref, offered ? KERN_MAX_ALGOS : rank + 1,
                                        all, &found);
  if (optional && (st == CUBLAS_STATUS_NOT_SUPPORTED || (st == CUBLAS_STATUS_SUCCESS && found == 0)))
    rc = KERN_NO_SUCH_ALGO;
  else if (st != CUBLAS_STATUS_SUCCESS)
    rc = kern_report_lt(st, "cublasLt preference / heuristic", __FILE__, __LINE__);
  else if (found == 0)
    rc = kern_report_lt(CUBLAS_STATUS_NOT_SUPPORTED, "no cuBLASLt algorithm", __FILE__, __LINE__);
  else if (found <= rank)
    rc = KERN_NO_SUCH_ALGO;
  else
    *res = all[rank];
  if (offered) *offered = found;
  cublasLtMatmulPreferenceDestroy(pref);
  return rc;
}

/* Non-returning check for the cleanup-safe sequence in lt_matmul. */
static int lt_check(cublasStatus_t st, const char *what, int line) {
  return st == CUBLAS_STATUS_SUCCESS ? 0 : kern_report_lt(st, what, __FILE__, line);
}
#define LT_CALL(x) lt_check((x), #x, __LINE__)

extern "C" const kern_algo_choice *kern_algo_find(const kern_algo_table *t, const kern_gemm_key *k) {
  for (int i = 0; t && i < t->n; i++)
    if (!memcmp(&t->c[i].key, k, sizeof *k)) return &t->c[i];
  return NULL;
}

extern "C" int kern_algo_add(kern_algo_table *t, const kern_algo_choice *c) {
  if (t->n == t->cap) {
    int cap = t->cap ? 2 * t->cap : 16;
    kern_algo_choice *n = (kern_algo_choice *)realloc(t->c, sizeof *n * cap);
    if (!n) return -1;
    t->c = n, t->cap = cap;
  }
  t->c[t->n++] = *c;
  return 0;
}

extern "C" void kern_algo_free(kern_algo_table *t) {
  free(t->c);
  memset(t, 0, sizeof *t);
}

/* A problem's key: everything lt_matmul hands cuBLASLt but the pointers
 * (zeroed first: memcmp compares the padding too). */
static kern_gemm_key lt_key(const kern_gemm_desc *g, cublasLtEpilogue_t kind) {
  kern_gemm_key k;
  memset(&k, 0, sizeof k);
  k.M = g->M, k.N = g->N, k.K = g->K, k.ta = g->ta, k.tb = g->tb, k.batch = g->batch, k.c_fp32 = g->c_fp32;
  k.epilogue = (int)kind, k.lda = g->lda, k.ldb = g->ldb, k.ldc = g->ldc;
  return k;
}

#define LT_TUNE_RUNS 3 /* timed runs per candidate after one warm-up; the fastest counts */

/* Times candidate `rank` of the problem on scratch outputs (d, and the
 * epilogue's aux or bias gradient, which op already points at): the
 * fastest of LT_TUNE_RUNS, us; < 0 when it does not run. */
static float lt_time(const kern_ctx *ctx, int rank, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t la,
                     cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t lc, const kern_gemm_desc *g,
                     const void *a, const void *b, void *d, cudaStream_t stream) {
  cublasLtMatmulHeuristicResult_t res;
  if (lt_pick(ctx, rank, op, la, lb, lc, b, a, d, 1, &res, NULL)) return -1;
  cudaEvent_t e0, e1;
  float best = -1;
  if (cudaEventCreate(&e0) != cudaSuccess) return -1;
  if (cudaEventCreate(&e1) != cudaSuccess) return cudaEventDestroy(e0), -1;
  for (int run = 0; run <= LT_TUNE_RUNS; run++) {
    float ms = 0;
    if (cudaEventRecord(e0, stream) != cudaSuccess ||
        cublasLtMatmul(ctx->lt, op, &g->alpha, b, la, a, lb, &g->beta, d, lc, d, lc, &res.algo, ctx->workspace,
                       ctx->workspace_bytes, stream) != CUBLAS_STATUS_SUCCESS ||
        cudaEventRecord(e1, stream) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
        cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess) {
      best = -1;
      break;
    }
    if (run > 0 && (best < 0 || ms * 1e3f < best)) best = ms * 1e3f; /* run 0 warms up */
  }
  cudaEventDestroy(e0), cudaEventDestroy(e1);
  return best;
}

/* The candidate for the problem from ctx->algos; a problem not there is
 * tuned now: every candidate the heuristic offers timed on scratch
 * outputs (D, and the epilogue's GeLU input or bias gradient where it
 * writes one; C's contents do not change the time), the fastest added. */
static int lt_choose(const kern_ctx *ctx, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t la,
                     cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t lc, const kern_gemm_desc *g,
                     const lt_epi *e, const void *a, const void *b, const void *c, cudaStream_t stream,
                     int *rank) {
  kern_gemm_key k = lt_key(g, e->kind);
  const kern_algo_choice *known = kern_algo_find(ctx->algos, &k);
  if (known) return *rank = known->rank, 0;
  cublasLtMatmulHeuristicResult_t res;
  int offered = 0;
  KERN_TRY(lt_pick(ctx, 0, op, la, lb, lc, b, a, c, e->optional, &res, &offered));
  size_t elem = g->c_fp32 ? 4 : 2;
  size_t d_bytes = elem * ((size_t)(g->batch - 1) * (size_t)g->stride_c + (size_t)g->ldc * g->M);
  size_t x_bytes = e->aux ? 2 * (size_t)e->aux_ld * g->M : e->kind == CUBLASLT_EPILOGUE_BGRADB ? 4 * (size_t)g->M : 0;
  void *d = NULL, *x = NULL;
  cublasLtMatmulDescAttributes_t at = e->aux ? CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER
                                             : CUBLASLT_MATMUL_DESC_BIAS_POINTER;
  cudaError_t ce = cudaMalloc(&d, d_bytes);
  if (ce == cudaSuccess && x_bytes) ce = cudaMalloc(&x, x_bytes);
  int rc = ce == cudaSuccess ? 0 : kern_report_cuda((int)ce, "cudaMalloc (tuning's scratch)", __FILE__, __LINE__);
  if (!rc && x_bytes) rc = LT_CALL(cublasLtMatmulDescSetAttribute(op, at, &x, sizeof x));
  kern_algo_choice best = {k, 0, -1};
  for (int i = 0; !rc && i < offered; i++) {
    float us = lt_time(ctx, i, op, la, lb, lc, g, a, b, d, stream);
    if (us >= 0 && (best.us < 0 || us < best.us)) best.rank = i, best.us = us;
  }
  if (x_bytes && !rc) { /* the epilogue's own pointer back */
    const void *own = e->aux ? (const void *)e->aux : e->bias;
    rc = LT_CALL(cublasLtMatmulDescSetAttribute(op, at, &own, sizeof own));
  }
  if (d) cudaFree(d);
  if (x) cudaFree(x);
  if (rc) return rc;
  if (best.us < 0)
    return kern_report_lt(CUBLAS_STATUS_NOT_SUPPORTED, "no candidate ran (tuning)", __FILE__, __LINE__);
  if (kern_algo_add(ctx->algos, &best))
    return kern_report_lt(CUBLAS_STATUS_ALLOC_FAILED, "out of host memory (tuning)", __FILE__, __LINE__);
  ctx->algos->tuned++;
  *rank = best.rank;
  return 0;
}


/* The workspace's first `bytes`, in whole 256-byte lines, for an
 * epilogue's vector, and *sub the context whose workspace is the rest, for
 * cuBLASLt; -1 (*sub the whole context) when no room would be left. */
static int lt_workspace_head(const kern_ctx *ctx, size_t bytes, kern_ctx *sub) {
  size_t used = (bytes + 255) & ~(size_t)255;
  *sub = *ctx;
  if (used >= ctx->workspace_bytes) return -1;
  sub->workspace = (char *)ctx->workspace + used, sub->workspace_bytes = ctx->workspace_bytes - used;
  return 0;
}

/* cuBLASLt takes no alignment hint for the epilogue's bias, and its
 * kernels may read it 16 bytes at a time (Marian and PyTorch both met
 * "misaligned address" on A100 with a sliced bias). A bias that is not
 * 16-byte aligned (a column chunk's slice, say) is copied to the start of
 * the workspace, and cuBLASLt gets the rest of it. */
static int lt_align_bias(const kern_ctx *ctx, long n, lt_epi *e, kern_ctx *sub, cudaStream_t stream) {
  *sub = *ctx;
  if (!e->bias || align_of(e->bias) >= 16) return 0;
  if (e->kind == CUBLASLT_EPILOGUE_BGRADB) /* an output: a copy would not come back */
    return kern_report_lt(CUBLAS_STATUS_INVALID_VALUE, "bias gradient not 16-byte aligned", __FILE__, __LINE__);
  size_t bytes = (size_t)n * sizeof(kern_bf16);
  if (lt_workspace_head(ctx, bytes, sub))
    return kern_report_lt(CUBLAS_STATUS_NOT_SUPPORTED, "misaligned bias longer than the workspace",
                          __FILE__, __LINE__);
  KERN_CUDA_TRY(cudaMemcpyAsync(ctx->workspace, e->bias, bytes, cudaMemcpyDeviceToDevice, stream));
  e->bias = ctx->workspace;
  return 0;
}

/* The descriptors are created and destroyed per call: they are host-side
 * structs, cheap next to a GEMM of the sizes this code runs. */
static int lt_matmul(const kern_ctx *ctx_in, void *c, const kern_bf16 *a, const kern_bf16 *b,
                     const kern_gemm_desc *g, const lt_epi *e_in, cudaStream_t stream) {
  kern_ctx sub;
  lt_epi epi = *e_in, *e = &epi;
  KERN_TRY(lt_align_bias(ctx_in, g->N, e, &sub, stream));
  const kern_ctx *ctx = &sub;
  cublasLtMatmulDesc_t op = NULL;
  cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
  cublasOperation_t tA = g->tb ? CUBLAS_OP_T : CUBLAS_OP_N, tB = g->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  cudaDataType_t ct = g->c_fp32 ? CUDA_R_32F : CUDA_R_16BF;
  cublasLtMatmulHeuristicResult_t res;
  int rc = 0;
#define LT_STEP(x) if (rc == 0) rc = (x)
  LT_STEP(LT_CALL(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F)));
  LT_STEP(LT_CALL(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &tA, sizeof tA)));
  LT_STEP(LT_CALL(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tB, sizeof tB)));
  LT_STEP(lt_set_epilogue(op, e));
  /* column-major A = row-major b: stored (K, N) when tb else (N, K) */
  LT_STEP(lt_layout(&la, CUDA_R_16BF, g->tb ? g->K : g->N, g->tb ? g->N : g->K, g->ldb, g->batch,
                    g->stride_b));
  LT_STEP(lt_layout(&lb, CUDA_R_16BF, g->ta ? g->M : g->K, g->ta ? g->K : g->M, g->lda, g->batch,
                    g->stride_a));
  LT_STEP(lt_layout(&lc, ct, g->N, g->M, g->ldc, g->batch, g->stride_c));
  int rank = ctx->algo_rank;
  if (ctx->algos) LT_STEP(lt_choose(ctx, op, la, lb, lc, g, e, a, b, c, stream, &rank));
  LT_STEP(lt_pick(ctx, rank, op, la, lb, lc, b, a, c, e->optional, &res, NULL));
  LT_STEP(LT_CALL(cublasLtMatmul(ctx->lt, op, &g->alpha, b, la, a, lb, &g->beta, c, lc, c, lc,
                                 &res.algo, ctx->workspace, ctx->workspace_bytes, stream)));
#undef LT_STEP
  if (la) cublasLtMatrixLayoutDestroy(la);
  if (lb) cublasLtMatrixLayoutDestroy(lb);
  if (lc) cublasLtMatrixLayoutDestroy(lc);
  if (op) cublasLtMatmulDescDestroy(op);
  return rc;
}

extern "C" int kern_gemm_cuda(const kern_ctx *ctx, void *c, const kern_bf16 *a,
                              const kern_bf16 *b, const kern_gemm_desc *g, cudaStream_t stream) {
  lt_epi e = {CUBLASLT_EPILOGUE_DEFAULT, NULL, NULL, 0, 0};
  return lt_matmul(ctx, c, a, b, g, &e, stream);
}

/* out (rows, cols) with row stride ld_out = inp (rows, C) @ weight (cols, C)^T. */
static kern_gemm_desc linear_desc(int rows, int cols, int C, long ld_out) {
  kern_gemm_desc g = {rows, cols, C, 0, 1, 1, 0, C, C, ld_out, 0, 0, 0, 1.0f, 0.0f};
  return g;
}

extern "C" int kern_matmul_fwd_cuda(const kern_ctx *ctx, kern_bf16 *out, kern_bf16 *pre,
                                    const kern_bf16 *inp, const kern_bf16 *weight,
                                    const kern_bf16 *bias, int N, int C, int OC,
                                    cudaStream_t stream) {
  kern_gemm_desc g = linear_desc(N, OC, C, OC);
  lt_epi e = {CUBLASLT_EPILOGUE_DEFAULT, bias, NULL, 0, 0};
  if (bias) e.kind = CUBLASLT_EPILOGUE_BIAS;
  if (pre) {
    e.kind = bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    e.aux = pre;
    e.aux_ld = OC;
  }
  return lt_matmul(ctx, out, inp, weight, &g, &e, stream);
}

__global__ void add_f32_kernel(float *y, const float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += x[i];
}

static long bgrad_fused, bgrad_separate; /* kern_matmul_bgrad_counts */

extern "C" void kern_matmul_bgrad_counts(long *fused, long *separate) {
  *fused = bgrad_fused, *separate = bgrad_separate;
}

/* The weight gradient (a fp32 GEMM accumulating onto dweight) with the
 * bias gradient folded in: cuBLASLt's BGRADB epilogue sums dout's columns
 * while the GEMM reads it, into the workspace's first bytes, which one
 * small kernel adds to dbias (an epilogue writes, the gradient
 * accumulates over micro-batches), where a separate kernel would read dout
 * (N x OC) again. Where cuBLASLt offers no BGRADB algorithm for the
 * problem, or the workspace has no room, the GEMM and that kernel. */
static int wgrad_bgrad(const kern_ctx *ctx, float *dweight, float *dbias, const kern_bf16 *dout,
                       const kern_bf16 *inp, const kern_gemm_desc *gw, int N, int OC,
                       cudaStream_t stream) {
  kern_ctx sub;
  if (!lt_workspace_head(ctx, (size_t)OC * sizeof(float), &sub)) {
    lt_epi e = {CUBLASLT_EPILOGUE_BGRADB, ctx->workspace, NULL, 0, 1};
    int rc = lt_matmul(&sub, dweight, dout, inp, gw, &e, stream);
    if (rc == 0) {
      bgrad_fused++;
      KERN_LAUNCH(kern_cdiv(OC, 256), 256, 0, stream, add_f32_kernel)(dbias, (const float *)ctx->workspace, OC);
      KERN_LAUNCH_TRY();
      return 0;
    }
    if (rc != KERN_NO_SUCH_ALGO) return rc;
  }
  bgrad_separate++;
  KERN_TRY(kern_gemm_cuda(ctx, dweight, dout, inp, gw, stream));
  return kern_bias_grad_cuda(dbias, dout, N, OC, stream);
}

extern "C" int kern_linear_wgrad_cuda(const kern_ctx *ctx, float *dweight, float *dbias, const kern_bf16 *dout,
                                      const kern_bf16 *inp, int N, int C, int OC, cudaStream_t stream) {
  kern_gemm_desc gw = kern_linear_bwd_desc(N, C, OC, KERN_BWD_DWEIGHT);
  if (dbias) return wgrad_bgrad(ctx, dweight, dbias, dout, inp, &gw, N, OC, stream);
  return kern_gemm_cuda(ctx, dweight, dout, inp, &gw, stream);
}

extern "C" int kern_matmul_bwd_cuda(const kern_ctx *ctx, kern_bf16 *dinp, float *dweight,
                                    float *dbias, const kern_bf16 *dout, const kern_bf16 *inp,
                                    const kern_bf16 *weight, const kern_bf16 *pre_gelu, int N,
                                    int C, int OC, cudaStream_t stream) {
  /* dinp (N, C) = dout (N, OC) @ weight (OC, C), times gelu'(pre_gelu) */
  kern_gemm_desc gi = kern_linear_bwd_desc(N, C, OC, KERN_BWD_DINP);
  lt_epi ei = {pre_gelu ? CUBLASLT_EPILOGUE_DGELU : CUBLASLT_EPILOGUE_DEFAULT, NULL,
               (void *)pre_gelu, C, 0};
  KERN_TRY(lt_matmul(ctx, dinp, dout, weight, &gi, &ei, stream));
  return kern_linear_wgrad_cuda(ctx, dweight, dbias, dout, inp, N, C, OC, stream);
}

extern "C" int kern_matmul_fwd_chunk_cuda(const kern_ctx *ctx, kern_bf16 *out,
                                          const kern_bf16 *inp, const kern_bf16 *weight,
                                          const kern_bf16 *bias, int N, int C, int OC,
                                          kern_split split, int index, int count,
                                          cudaStream_t stream) {
  int lo, hi;
  lt_epi e = {bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT, bias, NULL, 0, 0};
  if (split == KERN_SPLIT_ROWS) {
    kern_chunk_range(N, index, count, &lo, &hi);
    if (hi == lo) return 0;
    kern_gemm_desc g = linear_desc(hi - lo, OC, C, OC);
    return lt_matmul(ctx, out + (long)lo * OC, inp + (long)lo * C, weight, &g, &e, stream);
  }
  kern_chunk_range(OC, index, count, &lo, &hi);
  if (hi == lo) return 0;
  if (bias) e.bias = bias + lo;
  kern_gemm_desc g = linear_desc(N, hi - lo, C, OC);
  return lt_matmul(ctx, out + lo, inp, weight + (long)lo * C, &g, &e, stream);
}
