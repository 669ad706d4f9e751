/* tests/kernels/emu/cublaslt_emu.cc: the cuBLASLt subset of cublasLt.h on
 * the CPU, for the emulated build (tests/kernels/cuda_emu.h).
 *
 * Descriptors are plain structs; setters check the value's size as the
 * real library does. A problem is checked whole (layouts against the
 * operation, types, epilogue, alignments) by the heuristic and again by
 * cublasLtMatmul, which then queues the computation on the stream
 * (cuda_emu_stream.h) with everything it needs copied by value: alpha,
 * beta and the descriptors may die as soon as it returns, as with the real
 * library. Refusals the real library also makes are quiet (the caller
 * reports the status); refusals of what the real library would run but
 * this emulation does not print one line to stderr.
 *
 * The product: op(A) is packed per batch into fp32 panels of 8 rows
 * (p-major), op(B) into fp32 columns, and a 8x4 block of D is summed in
 * registers over K (GCC vector extension): O(m n k), about 1 ns per 8
 * multiply-adds on one core. Summation order differs from the GPU's.
 *
 * The heuristic offers EMU_ALGOS candidates, as the real one offers
 * several: split-K into 1, 2 and 4 slices of K, each summed on its own
 * and the partial sums then added in slice order (the real library's
 * split-K reduction). They differ in rounding only, so a caller that picks
 * a candidate (kern_ctx.algo_rank) runs a different algorithm here too. */
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <new>
#include <vector>

#include "cuda_emu_stream.h"
#include "cublasLt.h"
#include "kernels/gelu.h"

/* Distinguishes our algo from an uninitialised one ("EMULT\0" + version). */
static const uint64_t ALGO_MAGIC = 0x454d554c54000001ull;
static const uint32_t DEFAULT_ALIGN_BYTES = 256;
static const int EMU_ALGOS = 3;
static int algo_splits(int rank) { return 1 << rank; } /* candidate rank's K slices: 1, 2, 4 */

struct cublasLtContext {
  int unused;
};
struct emu_lt_matmul_desc {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  int32_t transa, transb;
  uint32_t epilogue;
  const void *bias;
  void *aux;
  int64_t aux_ld;
};
struct emu_lt_layout {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
  int32_t batch;
  int64_t stride; /* elements */
};
struct emu_lt_preference {
  uint64_t max_workspace_bytes;
  uint32_t align_bytes[4]; /* A, B, C, D */
};

/* ---- refusals ----------------------------------------------------------- */

/* Quiet: the real library refuses this too. */
static cublasStatus_t refuse(cublasStatus_t st) { return st; }

/* Loud: the real library would (or might) run it; the emulation does not. */
static cublasStatus_t refuse_emu(cublasStatus_t st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "cublaslt_emu: ");
  std::vfprintf(stderr, fmt, ap);
  std::fprintf(stderr, " (tests/kernels/emu/cublaslt_emu.cc)\n");
  va_end(ap);
  return st;
}

/* ---- handle, version, status strings ------------------------------------ */

extern "C" cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle) {
  if (!handle) return refuse(CUBLAS_STATUS_INVALID_VALUE);
  *handle = new (std::nothrow) cublasLtContext{0};
  return *handle ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

extern "C" cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  if (!handle) return refuse(CUBLAS_STATUS_NOT_INITIALIZED);
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

/* 0: no cuBLASLt release (real ones are major * 10000 + minor * 100 + patch). */
extern "C" size_t cublasLtGetVersion(void) { return 0; }

extern "C" const char *cublasLtGetStatusString(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
  case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
  case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
  case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
  case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
  case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
  case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "<unknown>";
}

/* ---- descriptors -------------------------------------------------------- */

/* An attribute's value: NULL or a size other than the attribute's type's
 * is CUBLAS_STATUS_INVALID_VALUE, as in the real library. */
template <class T> static cublasStatus_t set_value(T *field, const void *buf, size_t size) {
  if (!buf || size != sizeof(T)) return refuse(CUBLAS_STATUS_INVALID_VALUE);
  std::memcpy(field, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

template <class T> static cublasStatus_t create(T **out, const T &init) {
  if (!out) return refuse(CUBLAS_STATUS_INVALID_VALUE);
  *out = new (std::nothrow) T(init);
  return *out ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

template <class T> static cublasStatus_t destroy(T *p) {
  delete p;
  return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc,
                                                   cublasComputeType_t compute,
                                                   cudaDataType_t scale) {
  return create(desc, emu_lt_matmul_desc{compute, scale, CUBLAS_OP_N, CUBLAS_OP_N,
                                         CUBLASLT_EPILOGUE_DEFAULT, nullptr, nullptr, 0});
}

extern "C" cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                                         cublasLtMatmulDescAttributes_t attr,
                                                         const void *buf, size_t size) {
  if (!desc) return refuse(CUBLAS_STATUS_INVALID_VALUE);
  switch (attr) {
  case CUBLASLT_MATMUL_DESC_TRANSA: return set_value(&desc->transa, buf, size);
  case CUBLASLT_MATMUL_DESC_TRANSB: return set_value(&desc->transb, buf, size);
  case CUBLASLT_MATMUL_DESC_EPILOGUE: return set_value(&desc->epilogue, buf, size);
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return set_value(&desc->bias, buf, size);
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return set_value(&desc->aux, buf, size);
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return set_value(&desc->aux_ld, buf, size);
  }
  return refuse_emu(CUBLAS_STATUS_INVALID_VALUE, "matmul descriptor attribute %d not emulated",
                    (int)attr);
}

extern "C" cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  return destroy(desc);
}

extern "C" cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout,
                                                     cudaDataType type, uint64_t rows,
                                                     uint64_t cols, int64_t ld) {
  return create(layout, emu_lt_layout{type, rows, cols, ld, 1, 0});
}

extern "C" cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                                           cublasLtMatrixLayoutAttribute_t attr,
                                                           const void *buf, size_t size) {
  if (!layout) return refuse(CUBLAS_STATUS_INVALID_VALUE);
  switch (attr) {
  case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return set_value(&layout->batch, buf, size);
  case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return set_value(&layout->stride, buf, size);
  }
  return refuse_emu(CUBLAS_STATUS_INVALID_VALUE, "matrix layout attribute %d not emulated",
                    (int)attr);
}

extern "C" cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  return destroy(layout);
}

extern "C" cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref) {
  uint32_t a = DEFAULT_ALIGN_BYTES;
  return create(pref, emu_lt_preference{0, {a, a, a, a}});
}

extern "C" cublasStatus_t cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
    size_t size) {
  if (!pref) return refuse(CUBLAS_STATUS_INVALID_VALUE);
  switch (attr) {
  case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
    return set_value(&pref->max_workspace_bytes, buf, size);
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
    return set_value(&pref->align_bytes[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES], buf,
                     size);
  }
  return refuse_emu(CUBLAS_STATUS_INVALID_VALUE, "preference attribute %d not emulated",
                    (int)attr);
}

extern "C" cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  return destroy(pref);
}

/* ---- checking a problem ------------------------------------------------- */

/* One GEMM as the computation sees it, captured by value. Column-major;
 * element (i, j) of a stored matrix X of batch b is X[b * sx + i + j * ldx]. */
struct emu_gemm {
  int64_t m, n, k;
  int batch;
  bool ta, tb; /* op(A) = A^T, op(B) = B^T */
  const kern_bf16 *A, *B;
  int64_t lda, ldb, sa, sb;
  const void *C;
  void *D;
  int64_t ldc, ldd, sc, sd;
  bool fp32; /* C, D, bias and aux element type: fp32, else bf16 */
  float alpha, beta;
  uint32_t epilogue;
  const void *bias; /* m elements; BGRADB: n, written */
  void *aux;        /* (m, n), ld aux_ld */
  int64_t aux_ld;
  int splits;       /* K in this many slices (the algorithm) */
};

static size_t elem_bytes(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : 2; }
static bool has_bias(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
static bool gelu_fwd(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
static bool has_aux(uint32_t e) { return gelu_fwd(e) || e == CUBLASLT_EPILOGUE_DGELU; }
static bool bgrad_b(uint32_t e) { return e == CUBLASLT_EPILOGUE_BGRADB; }

static cublasStatus_t check_types(const emu_lt_matmul_desc &op, const emu_lt_layout &a,
                                  const emu_lt_layout &b, const emu_lt_layout &c,
                                  const emu_lt_layout &d) {
  if (op.compute != CUBLAS_COMPUTE_32F || op.scale != CUDA_R_32F)
    return refuse_emu(CUBLAS_STATUS_NOT_SUPPORTED, "compute type %d / scale type %d not emulated "
                      "(only CUBLAS_COMPUTE_32F / CUDA_R_32F)", (int)op.compute, (int)op.scale);
  if (a.type != b.type || c.type != d.type) return refuse(CUBLAS_STATUS_NOT_SUPPORTED);
  if (a.type != CUDA_R_16BF)
    return refuse_emu(CUBLAS_STATUS_NOT_SUPPORTED, "A / B type %d not emulated (only CUDA_R_16BF)",
                      (int)a.type);
  /* bf16 inputs with fp32 compute: D is bf16 or fp32 in the real library too */
  if (d.type != CUDA_R_16BF && d.type != CUDA_R_32F) return refuse(CUBLAS_STATUS_NOT_SUPPORTED);
  return CUBLAS_STATUS_SUCCESS;
}

/* Shapes: op(A) (m, k), op(B) (k, n), C and D (m, n); ld >= rows; one batch count. */
static cublasStatus_t check_shapes(const emu_lt_matmul_desc &op, const emu_lt_layout *l[4]) {
  for (int i = 0; i < 4; i++)
    if (l[i]->ld < 1 || (uint64_t)l[i]->ld < l[i]->rows || l[i]->stride < 0 || l[i]->batch < 1)
      return refuse(CUBLAS_STATUS_INVALID_VALUE);
  if ((op.transa != CUBLAS_OP_N && op.transa != CUBLAS_OP_T) ||
      (op.transb != CUBLAS_OP_N && op.transb != CUBLAS_OP_T))
    return refuse_emu(CUBLAS_STATUS_NOT_SUPPORTED, "transa %d / transb %d not emulated (only N, T)",
                      (int)op.transa, (int)op.transb);
  const emu_lt_layout &a = *l[0], &b = *l[1], &c = *l[2], &d = *l[3];
  uint64_t m = op.transa ? a.cols : a.rows, ka = op.transa ? a.rows : a.cols;
  uint64_t kb = op.transb ? b.cols : b.rows, n = op.transb ? b.rows : b.cols;
  if (ka != kb || d.rows != m || d.cols != n || c.rows != m || c.cols != n)
    return refuse(CUBLAS_STATUS_INVALID_VALUE);
  if (a.batch != d.batch || b.batch != d.batch || c.batch != d.batch)
    return refuse(CUBLAS_STATUS_INVALID_VALUE);
  if (m == 0 || n == 0 || ka == 0)
    return refuse_emu(CUBLAS_STATUS_NOT_SUPPORTED, "a zero dimension (m %" PRIu64 ", n %" PRIu64
                      ", k %" PRIu64 ") not emulated", m, n, ka);
  /* stride < m: batch 1's (0, 0) is batch 0's (stride, 0) (interleaved
   * batches, stride >= m, are fine) */
  if (d.batch > 1 && (uint64_t)d.stride < m)
    return refuse_emu(CUBLAS_STATUS_INVALID_VALUE, "the %d batches of D overlap (stride %" PRId64
                      " < %" PRIu64 " rows): on a GPU they would race", (int)d.batch, d.stride, m);
  return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t check_epilogue(const emu_lt_matmul_desc &op, const emu_lt_layout &d) {
  uint32_t e = op.epilogue;
  if (e != CUBLASLT_EPILOGUE_DEFAULT && !has_bias(e) && !has_aux(e) && !bgrad_b(e))
    return refuse_emu(CUBLAS_STATUS_NOT_SUPPORTED, "epilogue %u not emulated", e);
  if ((has_bias(e) || bgrad_b(e)) && !op.bias) return refuse(CUBLAS_STATUS_INVALID_VALUE);
  if (bgrad_b(e) && d.batch > 1)
    return refuse_emu(CUBLAS_STATUS_NOT_SUPPORTED, "BGRADB with batch count %d not emulated", (int)d.batch);
  if (!has_aux(e)) return CUBLAS_STATUS_SUCCESS;
  /* the documented GeLU aux contract: ld a multiple of 8, >= rows of D */
  if (!op.aux || op.aux_ld % 8 != 0 || (uint64_t)op.aux_ld < d.rows)
    return refuse(CUBLAS_STATUS_INVALID_VALUE);
  if ((uintptr_t)op.aux % 16 != 0) return refuse(CUBLAS_STATUS_NOT_SUPPORTED);
  if (d.batch > 1)
    return refuse_emu(CUBLAS_STATUS_NOT_SUPPORTED, "GeLU aux epilogue with batch count %d not "
                      "emulated (no EPILOGUE_AUX_BATCH_STRIDE)", (int)d.batch);
  return CUBLAS_STATUS_SUCCESS;
}

/* Everything but the pointers: what both the heuristic and cublasLtMatmul check. */
static cublasStatus_t check_problem(cublasLtHandle_t h, cublasLtMatmulDesc_t op,
                                    const emu_lt_layout *l[4]) {
  if (!h) return refuse(CUBLAS_STATUS_NOT_INITIALIZED);
  if (!op || !l[0] || !l[1] || !l[2] || !l[3]) return refuse(CUBLAS_STATUS_INVALID_VALUE);
  cublasStatus_t st = check_types(*op, *l[0], *l[1], *l[2], *l[3]);
  if (st == CUBLAS_STATUS_SUCCESS) st = check_shapes(*op, l);
  if (st == CUBLAS_STATUS_SUCCESS) st = check_epilogue(*op, *l[3]);
  return st;
}

extern "C" cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
    cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
    cublasLtMatmulPreference_t pref, int requested, cublasLtMatmulHeuristicResult_t results[],
    int *returned) {
  if (!pref || requested <= 0 || !results || !returned) return refuse(CUBLAS_STATUS_INVALID_VALUE);
  *returned = 0;
  const emu_lt_layout *l[4] = {a, b, c, d};
  cublasStatus_t st = check_problem(h, op, l);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  /* an alignment below the element size: no algorithm exists for it */
  for (int i = 0; i < 4; i++)
    if (pref->align_bytes[i] < elem_bytes(l[i]->type)) return CUBLAS_STATUS_SUCCESS;
  for (int rank = 0; rank < EMU_ALGOS && rank < requested; rank++) {
    cublasLtMatmulHeuristicResult_t r;
    std::memset(&r, 0, sizeof r);
    r.algo.data[0] = ALGO_MAGIC;
    for (int i = 0; i < 4; i++) r.algo.data[1 + i] = pref->align_bytes[i];
    r.algo.data[5] = (uint64_t)algo_splits(rank);
    r.state = CUBLAS_STATUS_SUCCESS;
    r.wavesCount = 1.0f;
    results[rank] = r;
    *returned = rank + 1;
  }
  return CUBLAS_STATUS_SUCCESS;
}

/* The pointers: device memory (cuda_emu_stream.h), and as aligned as the
 * algorithm was chosen for (the
 * heuristic's default is 256 bytes); the bias, which has no hint, against
 * 16 bytes: a GPU kernel loading 16 bytes at a time faults ("misaligned
 * address") where this would silently work. */
static cublasStatus_t check_pointers(const cublasLtMatmulAlgo_t *algo, const emu_lt_layout *l[4],
                                     const void *p[4], const void *bias) {
  static const char *name[4] = {"A", "B", "C", "D"};
  for (int i = 0; i < 4; i++) {
    uint64_t want = algo ? algo->data[1 + i] : elem_bytes(l[i]->type);
    if ((uintptr_t)p[i] % want != 0)
      return refuse_emu(CUBLAS_STATUS_INVALID_VALUE, "%s = %p is less aligned than the %" PRIu64
                        " bytes the algorithm was chosen for", name[i], p[i], want);
  }
  for (int i = 0; i < 4; i++)
    if (!emu_is_device(p[i]))
      return refuse_emu(CUBLAS_STATUS_INVALID_VALUE, "%s = %p is not device memory: a GPU would fault",
                        name[i], p[i]);
  if (bias && !emu_is_device(bias))
    return refuse_emu(CUBLAS_STATUS_INVALID_VALUE, "bias = %p is not device memory: a GPU would fault", bias);
  if (bias && (uintptr_t)bias % 16 != 0)
    return refuse_emu(CUBLAS_STATUS_INVALID_VALUE, "bias = %p not 16-byte aligned: cuBLASLt "
                      "kernels have faulted on such (misaligned address)", bias);
  return CUBLAS_STATUS_SUCCESS;
}

/* ---- the computation ---------------------------------------------------- */

typedef float v8f __attribute__((vector_size(32)));
static const int64_t MR = 8, NR = 4; /* the register block of D: MR rows, NR columns */

static float load(const void *p, bool fp32, int64_t i) {
  return fp32 ? ((const float *)p)[i] : kern_bf16_to_float(((const kern_bf16 *)p)[i]);
}
static void store(void *p, bool fp32, int64_t i, float x) {
  if (fp32) ((float *)p)[i] = x;
  else ((kern_bf16 *)p)[i] = kern_float_to_bf16(x);
}

/* op(A) (m, k) of one batch into panels of MR rows: ap[(i / MR) k MR + p MR + i % MR],
 * rows past m zero. */
static void pack_a(float *ap, const emu_gemm &g, const kern_bf16 *a) {
  int64_t panels = (g.m + MR - 1) / MR;
  std::memset(ap, 0, sizeof(float) * panels * g.k * MR);
  for (int64_t i = 0; i < g.m; i++)
    for (int64_t p = 0; p < g.k; p++) {
      kern_bf16 x = g.ta ? a[p + i * g.lda] : a[i + p * g.lda];
      ap[(i / MR) * g.k * MR + p * MR + i % MR] = kern_bf16_to_float(x);
    }
}

/* op(B) (k, n) of one batch into columns: bp[j k + p], columns past n zero. */
static void pack_b(float *bp, const emu_gemm &g, const kern_bf16 *b) {
  int64_t cols = (g.n + NR - 1) / NR * NR;
  std::memset(bp, 0, sizeof(float) * cols * g.k);
  for (int64_t j = 0; j < g.n; j++)
    for (int64_t p = 0; p < g.k; p++)
      bp[j * g.k + p] = kern_bf16_to_float(g.tb ? b[j + p * g.ldb] : b[p + j * g.ldb]);
}

/* acc[c][r] = sum_p ap[p MR + r] * bp[c k + p], r < MR, c < NR, over p
 * in [p0, p1). Compiled for AVX-512 and AVX2 with FMA besides the baseline
 * (SSE2, which splits each 8-wide vector in two and has no fused
 * multiply-add), the best one the CPU runs chosen at load: the GEMMs of
 * calibrate --tiny on the emulated GPU took 1.2 s instead of 5.7 (perf).
 * A fused multiply-add rounds once where SSE2 rounds twice: another
 * rounding of the same sums in the same order, as the GPU's differs too. */
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
static void block_product(float acc[NR][MR], const float *ap, const float *bp, int64_t k, int64_t p0,
                          int64_t p1) {
  v8f s[NR] = {};
  for (int64_t p = p0; p < p1; p++) {
    v8f x;
    std::memcpy(&x, ap + p * MR, sizeof x);
    for (int c = 0; c < NR; c++) s[c] += x * bp[c * k + p];
  }
  std::memcpy(acc, s, sizeof s);
}

/* The block over all of K in g.splits slices, their sums added in order. */
static void split_product(float acc[NR][MR], const float *ap, const float *bp, const emu_gemm &g) {
  int64_t slice = (g.k + g.splits - 1) / g.splits;
  block_product(acc, ap, bp, g.k, 0, slice < g.k ? slice : g.k);
  for (int64_t p0 = slice; p0 < g.k; p0 += slice) {
    float part[NR][MR];
    block_product(part, ap, bp, g.k, p0, p0 + slice < g.k ? p0 + slice : g.k);
    for (int c = 0; c < NR; c++)
      for (int r = 0; r < MR; r++) acc[c][r] += part[c][r];
  }
}

/* D(i, j) of batch `bt` from the product t: scale, C, bias, GeLU. */
static void epilogue(const emu_gemm &g, int bt, int64_t i, int64_t j, float t) {
  t *= g.alpha;
  if (g.beta != 0.0f) t += g.beta * load(g.C, g.fp32, bt * g.sc + i + j * g.ldc); /* else unread */
  if (has_bias(g.epilogue)) t += load(g.bias, g.fp32, i);
  if (gelu_fwd(g.epilogue)) {
    store(g.aux, g.fp32, i + j * g.aux_ld, t);
    t = kern_gelu(t);
  } else if (g.epilogue == CUBLASLT_EPILOGUE_DGELU) {
    t *= kern_gelu_grad(load(g.aux, g.fp32, i + j * g.aux_ld));
  }
  store(g.D, g.fp32, bt * g.sd + i + j * g.ldd, t);
}

/* BGRADB: bias[j] = sum over p of op(B)(p, j), j < n, in D's type (one batch). */
static void bias_grad_b(const emu_gemm &g) {
  for (int64_t j = 0; j < g.n; j++) {
    float s = 0.0f;
    for (int64_t p = 0; p < g.k; p++)
      s += kern_bf16_to_float(g.tb ? g.B[j + p * g.ldb] : g.B[p + j * g.ldb]);
    store((void *)g.bias, g.fp32, j, s);
  }
}

static void run_gemm(const emu_gemm &g) {
  int64_t panels = (g.m + MR - 1) / MR, cols = (g.n + NR - 1) / NR * NR;
  std::vector<float> ap((size_t)(panels * g.k * MR)), bp((size_t)(cols * g.k));
  for (int bt = 0; bt < g.batch; bt++) {
    if (bt == 0 || g.sa != 0) pack_a(ap.data(), g, g.A + bt * g.sa); /* stride 0: shared */
    if (bt == 0 || g.sb != 0) pack_b(bp.data(), g, g.B + bt * g.sb);
    for (int64_t i0 = 0; i0 < g.m; i0 += MR)
      for (int64_t j0 = 0; j0 < g.n; j0 += NR) {
        float acc[NR][MR];
        split_product(acc, ap.data() + (i0 / MR) * g.k * MR, bp.data() + j0 * g.k, g);
        for (int64_t c = 0; c < NR && j0 + c < g.n; c++)
          for (int64_t r = 0; r < MR && i0 + r < g.m; r++)
            epilogue(g, bt, i0 + r, j0 + c, acc[c][r]);
      }
  }
  if (bgrad_b(g.epilogue)) bias_grad_b(g);
}

static emu_gemm plan(const emu_lt_matmul_desc &op, const emu_lt_layout *l[4], float alpha,
                     float beta, const void *A, const void *B, const void *C, void *D) {
  const emu_lt_layout &a = *l[0], &b = *l[1], &c = *l[2], &d = *l[3];
  emu_gemm g;
  g.m = (int64_t)d.rows, g.n = (int64_t)d.cols, g.k = (int64_t)(op.transa ? a.rows : a.cols);
  g.batch = d.batch, g.ta = op.transa == CUBLAS_OP_T, g.tb = op.transb == CUBLAS_OP_T;
  g.A = (const kern_bf16 *)A, g.B = (const kern_bf16 *)B, g.lda = a.ld, g.ldb = b.ld;
  g.sa = a.stride, g.sb = b.stride;
  g.C = C, g.D = D, g.ldc = c.ld, g.ldd = d.ld, g.sc = c.stride, g.sd = d.stride;
  g.fp32 = d.type == CUDA_R_32F, g.alpha = alpha, g.beta = beta;
  g.epilogue = op.epilogue, g.bias = op.bias, g.aux = op.aux, g.aux_ld = op.aux_ld;
  g.splits = 1;
  return g;
}

extern "C" cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t op,
                                         const void *alpha, const void *A,
                                         cublasLtMatrixLayout_t a, const void *B,
                                         cublasLtMatrixLayout_t b, const void *beta,
                                         const void *C, cublasLtMatrixLayout_t c, void *D,
                                         cublasLtMatrixLayout_t d, const cublasLtMatmulAlgo_t *algo,
                                         void *workspace, size_t workspace_bytes,
                                         cudaStream_t stream) {
  (void)workspace, (void)workspace_bytes; /* the emulated algorithm needs none */
  const emu_lt_layout *l[4] = {a, b, c, d};
  cublasStatus_t st = check_problem(h, op, l);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  if (!alpha || !beta || !A || !B || !D) return refuse(CUBLAS_STATUS_INVALID_VALUE);
  float alpha_v = *(const float *)alpha, beta_v = *(const float *)beta;
  if (!C && beta_v != 0.0f) return refuse(CUBLAS_STATUS_INVALID_VALUE);
  if (algo && (algo->data[0] != ALGO_MAGIC || (algo->data[5] != 1 && algo->data[5] != 2 && algo->data[5] != 4)))
    return refuse(CUBLAS_STATUS_INVALID_VALUE);
  const void *ptr[4] = {A, B, C ? C : D, D}; /* C unread when beta = 0 */
  st = check_pointers(algo, l, ptr, has_bias(op->epilogue) || bgrad_b(op->epilogue) ? op->bias : nullptr);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  if (op->aux && !emu_is_device(op->aux))
    return refuse_emu(CUBLAS_STATUS_INVALID_VALUE, "aux = %p is not device memory: a GPU would fault", op->aux);
  emu_gemm g = plan(*op, l, alpha_v, beta_v, A, B, C, D);
  if (algo) g.splits = (int)algo->data[5];
  emu_stream_enqueue(stream, [g] { run_gemm(g); });
  return CUBLAS_STATUS_SUCCESS;
}
