/* kernels/kern_common.h: what every kernel family shares: the bf16 storage
 * type as seen from C, bf16 <-> fp32 conversion on the host, and (with
 * KERN_HAVE_CUDA) the context struct that carries the cuBLASLt handle and
 * workspace, plus the error-checking macros used inside the launchers.
 *
 * Conventions: activations and their gradients are bf16 on the device,
 * fp32 in the references; parameter gradients and optimizer state are fp32
 * everywhere. Launchers return 0 on success and a non-zero code on failure,
 * after printing file:line and the CUDA / cuBLASLt error string. */
#ifndef KERN_COMMON_H
#define KERN_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef KERN_HAVE_CUDA
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Marks small inline functions shared by references and kernels, so each
 * formula is written once. */
#ifdef __CUDACC__
#define KERN_HD __host__ __device__
#else
#define KERN_HD
#endif

/* bf16 as raw bits: the high 16 bits of an IEEE fp32. In .cu files the same
 * memory is read as __nv_bfloat16. */
typedef uint16_t kern_bf16;

static inline float kern_bf16_to_float(kern_bf16 h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Round to nearest even, as __float2bfloat16_rn does; NaN stays NaN. */
static inline kern_bf16 kern_float_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (kern_bf16)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (kern_bf16)(u >> 16);
}

/* Sums of NVML reads: SM clock (MHz), board power (W), how many reads, how
 * many with the power-cap bit. Zero-initialised: no reads. */
typedef struct kern_clock_sums {
  double mhz_sum, watts_sum;
  long reads, capped;
} kern_clock_sums;

/* The means of *s: SM clock (MHz), power (W), share of reads at the power
 * cap; all 0 without reads. */
static inline void kern_clock_means(const kern_clock_sums *s, double *mhz, double *watts, double *capped) {
  double n = s->reads ? (double)s->reads : 1.0;
  *mhz = s->mhz_sum / n, *watts = s->watts_sum / n, *capped = s->capped / n;
}

#ifdef KERN_HAVE_CUDA
/* One GEMM problem as kernels/matmul.cu hands it to cuBLASLt (its row-major
 * kern_gemm_desc and the epilogue), and which of the heuristic's
 * candidates runs it: the choice of kern_ctx.algos. */
typedef struct kern_gemm_key {
  int M, N, K, ta, tb, batch, c_fp32, epilogue;
  long lda, ldb, ldc;
} kern_gemm_key;
typedef struct kern_algo_choice {
  kern_gemm_key key;
  int rank;   /* the heuristic's candidate number */
  float us;   /* its time when it was tuned */
} kern_algo_choice;
typedef struct kern_algo_table {
  kern_algo_choice *c;
  int n, cap;
  long tuned; /* problems tuned by this process */
} kern_algo_table;

/* Everything a launcher needs besides its tensors and stream. Owned by the
 * caller; one per device (or per stream when GEMMs run concurrently, since
 * the workspace must not be shared by two GEMMs in flight). */
typedef struct kern_ctx {
  cublasLtHandle_t lt;
  void *workspace;        /* device memory for cuBLASLt */
  size_t workspace_bytes;
  int algo_rank;          /* which of cuBLASLt's heuristic candidates a GEMM runs:
                             0, its first choice, except where kern_bench sweeps
                             them (rank < KERN_MAX_ALGOS) */
  kern_algo_table *algos; /* NULL: algo_rank for every GEMM. Else each problem's
                             choice here, and a problem not here is tuned when
                             first met (its candidates timed, the fastest added;
                             kernels/matmul.cu) */
} kern_ctx;

/* Candidates a GEMM may ask cuBLASLt's heuristic for, and the code a GEMM
 * returns, without printing, when algo_rank is past the ones it offered. */
#define KERN_MAX_ALGOS 16
#define KERN_NO_SUCH_ALGO 3000

int kern_ctx_init(kern_ctx *ctx, size_t workspace_bytes);
void kern_ctx_free(kern_ctx *ctx);

/* The GPU's SM clock, board power and clock-event reasons as its driver
 * reports them: NVML, opened at run time from the driver's
 * libnvidia-ml.so.1 (nothing to link; absent on the emulated GPU and
 * without a driver, where kern_clock_open returns 0 and reads fail). An
 * H100 under sustained bf16 GEMMs sits at its 700 W cap and lowers its
 * clock (reason bit 0x4, software power cap), so a kernel's speed depends
 * on what ran before it. */
typedef struct kern_clock {
  void *dev; /* nvmlDevice_t; NULL: not available */
  int (*clock)(void *dev, int type, unsigned *mhz);
  int (*power)(void *dev, unsigned *mw);
  int (*reasons)(void *dev, unsigned long long *bits);
} kern_clock;
#define KERN_CLOCK_POWER_CAP 0x4ull /* nvmlClocksEventReasonSwPowerCap */

/* 1 when NVML answers for CUDA device `device`, else 0 (k->dev NULL). */
int kern_clock_open(kern_clock *k, int device);
/* One read added to *s: 0, or non-zero (nothing added) when not available. */
int kern_clock_add(const kern_clock *k, kern_clock_sums *s);

/* A slow device, as `run --inject-fault slow` plants one on the GPU path,
 * without the host waiting: kern_stamp_cuda writes the device's clock
 * (ns) to *t (device memory) when the stream reaches it; kern_stretch_cuda,
 * later on the same stream, keeps it busy `extra` times the time since
 * (one thread spinning on the clock; nothing when extra <= 0). */
int kern_stamp_cuda(unsigned long long *t, cudaStream_t stream);
int kern_stretch_cuda(const unsigned long long *t0, double extra, cudaStream_t stream);

/* Print "file:line: what: error string" to stderr; return a non-zero code. */
int kern_report_cuda(int err, const char *what, const char *file, int line);
int kern_report_lt(int status, const char *what, const char *file, int line);

#define KERN_CUDA_TRY(call)                                                  \
  do {                                                                       \
    cudaError_t kern_e_ = (call);                                            \
    if (kern_e_ != cudaSuccess)                                              \
      return kern_report_cuda((int)kern_e_, #call, __FILE__, __LINE__);      \
  } while (0)
#define KERN_LT_TRY(call)                                                    \
  do {                                                                       \
    cublasStatus_t kern_s_ = (call);                                         \
    if (kern_s_ != CUBLAS_STATUS_SUCCESS)                                    \
      return kern_report_lt((int)kern_s_, #call, __FILE__, __LINE__);        \
  } while (0)
/* After a <<<>>> launch: catches bad configurations at launch time. */
#define KERN_LAUNCH_TRY() KERN_CUDA_TRY(cudaGetLastError())
#define KERN_TRY(call)                                                       \
  do {                                                                       \
    int kern_r_ = (call);                                                    \
    if (kern_r_ != 0) return kern_r_;                                        \
  } while (0)
#endif

#ifdef __cplusplus
}
#endif
#endif
