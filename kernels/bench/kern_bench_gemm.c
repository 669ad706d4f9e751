/* kernels/bench/kern_bench_gemm.c: kern_bench's GEMM rows (the linear
 * layers' forward and backward against plain cuBLAS) and --algos, the
 * sweep of cuBLASLt's candidates (kern_bench.c's top comment). */
#include <cublas_v2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/bench/kern_bench.h"
#include "kernels/gelu.h"
#include "kernels/matmul.h"

/* ---- GEMMs -------------------------------------------------------------------- */

typedef struct { int N, C, OC; kern_bf16 *inp, *w, *bias, *out, *pre, *dinp; float *dw, *db; } mm_arg;
static int mm_fwd(bench *b, void *p) {
  mm_arg *a = p;
  return kern_matmul_fwd_cuda(&b->ctx, a->out, a->pre, a->inp, a->w, a->bias, a->N, a->C, a->OC, b->stream);
}
static int mm_bwd(bench *b, void *p) { /* out stands for dout; pre (when set) is the forward's GeLU input */
  mm_arg *a = p;
  return kern_matmul_bwd_cuda(&b->ctx, a->dinp, a->dw, a->db, a->out, a->inp, a->w, a->pre, a->N, a->C, a->OC,
                              b->stream);
}
static int mm_chunks(bench *b, void *p) {
  mm_arg *a = p;
  for (int i = 0; i < 4; i++)
    if (kern_matmul_fwd_chunk_cuda(&b->ctx, a->out, a->inp, a->w, a->bias, a->N, a->C, a->OC,
                                   KERN_SPLIT_ROWS, i, 4, b->stream))
      return 1;
  return 0;
}

/* The backward's two GEMMs as plain cuBLAS calls (row-major, as run_blas):
 * dinp (N, C) = dout (N, OC) @ w (OC, C) in bf16, then dw (OC, C) +=
 * dout^T @ inp in fp32, which is what kern_matmul_bwd_cuda computes before
 * its epilogues (dGeLU) and the bias gradient. */
static int run_blas_bwd(bench *b, void *p) {
  mm_arg *a = p;
  float one = 1.0f, zero = 0.0f;
  return cublasGemmEx(b->blas, CUBLAS_OP_N, CUBLAS_OP_N, a->C, a->N, a->OC, &one, a->w, CUDA_R_16BF, a->C,
                      a->out, CUDA_R_16BF, a->OC, &zero, a->dinp, CUDA_R_16BF, a->C, CUBLAS_COMPUTE_32F,
                      CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS ||
         cublasGemmEx(b->blas, CUBLAS_OP_N, CUBLAS_OP_T, a->C, a->OC, a->N, &one, a->inp, CUDA_R_16BF, a->C,
                      a->out, CUDA_R_16BF, a->OC, &one, a->dw, CUDA_R_32F, a->C, CUBLAS_COMPUTE_32F,
                      CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS;
}

/* One linear layer's GEMMs at one shape, each beside its plain cuBLAS
 * baseline: the forward (bias; bias + GeLU, as fc1 runs it; 4 row chunks,
 * as the TP overlap runs it) against gemm_cublas_plain, the backward (with
 * the bias gradient; with dGeLU too, as fc1's backward runs it) against
 * gemm_cublas_plain_bwd. */
void bench_matmul(bench *b, const char *label, int N, int C, int OC) {
  mm_arg a = {N, C, OC, dbuf(2L * N * C), dbuf(2L * OC * C), dbuf(2L * OC), dbuf(2L * N * OC), NULL,
              dbuf(2L * N * C), dbuf(4L * OC * C), dbuf(4L * OC)};
  blas_arg g = {N, OC, C, a.inp, a.w, a.out};
  double fl = 2.0 * N * C * OC;
  int gelu = OC % 8 == 0; /* cuBLASLt's GeLU epilogues need it */
  char shape[64];
  snprintf(shape, sizeof shape, "N%d C%d OC%d %s", N, C, OC, label);
  if (want(b, "gemm_cublas_plain")) row(b, "gemm_cublas_plain", shape, time_us(b, run_blas, &g), fl, 0, 1);
  if (want(b, "matmul_fwd_bias")) row(b, "matmul_fwd_bias", shape, time_us(b, mm_fwd, &a), fl, 0, 1);
  if (want(b, "matmul_fwd_4_row_chunks")) row(b, "matmul_fwd_4_row_chunks", shape, time_us(b, mm_chunks, &a), fl, 0, 1);
  if (want(b, "gemm_cublas_plain_bwd")) row(b, "gemm_cublas_plain_bwd", shape, time_us(b, run_blas_bwd, &a), 2 * fl, 0, 1);
  if (want(b, "matmul_bwd_bias")) row(b, "matmul_bwd_bias", shape, time_us(b, mm_bwd, &a), 2 * fl, 0, 1);
  if (gelu && (want(b, "matmul_fwd_bias_gelu") || want(b, "matmul_bwd_dgelu_bias"))) {
    /* The forward saves its output's GeLU input, (N, OC); the backward's
     * dGeLU reads its input's, (N, C), as fc2's backward reads fc1's (a
     * buffer of the forward's size overran it where C > OC: 2026-11-26, H100). */
    a.pre = dbuf(2L * N * (C > OC ? C : OC));
    if (want(b, "matmul_fwd_bias_gelu")) row(b, "matmul_fwd_bias_gelu", shape, time_us(b, mm_fwd, &a), fl, 0, 1);
    if (want(b, "matmul_bwd_dgelu_bias")) row(b, "matmul_bwd_dgelu_bias", shape, time_us(b, mm_bwd, &a), 2 * fl, 0, 1);
    CUDA(cudaFree(a.pre));
  }
  void *bufs[] = {a.inp, a.w, a.bias, a.out, a.dinp, a.dw, a.db};
  for (unsigned i = 0; i < sizeof bufs / sizeof bufs[0]; i++) CUDA(cudaFree(bufs[i]));
}

/* ---- cuBLASLt's candidates (--algos) ------------------------------------------ */

/* "MHz W capped" over the last timed loop's reads (mean clock, mean power,
 * share of reads with the power-cap bit), or "- - -" without NVML. */
static void clock_state(const bench *b, char *buf, size_t len) {
  double mhz, w, capped;
  kern_clock_means(&b->clk_sums, &mhz, &w, &capped);
  if (b->clk_sums.reads == 0)
    snprintf(buf, len, "%7s %7s %7s", "-", "-", "-");
  else
    snprintf(buf, len, "%7.0f %7.0f %7.2f", mhz, w, capped);
}

typedef struct { mm_arg *a; int kind; kern_gemm_desc g; } sweep_arg;
enum { SWEEP_FWD_BIAS, SWEEP_DINP, SWEEP_DWEIGHT_ACC };
static const char *sweep_name[] = {"fwd_bias", "dinp", "dweight_acc"};

static int sweep_call(bench *b, void *p) {
  sweep_arg *s = p;
  mm_arg *a = s->a;
  if (s->kind == SWEEP_FWD_BIAS)
    return kern_matmul_fwd_cuda(&b->ctx, a->out, NULL, a->inp, a->w, a->bias, a->N, a->C, a->OC, b->stream);
  if (s->kind == SWEEP_DINP) return kern_gemm_cuda(&b->ctx, a->dinp, a->out, a->w, &s->g, b->stream);
  return kern_gemm_cuda(&b->ctx, a->dw, a->out, a->inp, &s->g, b->stream);
}

/* Each GEMM of one linear layer (as kern_matmul_fwd_cuda and
 * kern_matmul_bwd_cuda issue them: the forward with its bias, the input
 * gradient in bf16, the weight gradient accumulated in fp32) with each of
 * the candidates cuBLASLt's heuristic offers, in its order; then the best
 * against the first, which is what the kernels run. */
static void sweep_gemms(bench *b, const char *label, int N, int C, int OC) {
  mm_arg a = {N, C, OC, dbuf(2L * N * C), dbuf(2L * OC * C), dbuf(2L * OC), dbuf(2L * N * OC), NULL,
              dbuf(2L * N * C), dbuf(4L * OC * C), NULL};
  double fl = 2.0 * N * C * OC;
  char shape[64], clk[48];
  snprintf(shape, sizeof shape, "N%d C%d OC%d %s", N, C, OC, label);
  for (int kind = 0; kind < 3; kind++) {
    sweep_arg s = {&a, kind, {0}};
    if (kind != SWEEP_FWD_BIAS)
      s.g = kern_linear_bwd_desc(N, C, OC, kind == SWEEP_DINP ? KERN_BWD_DINP : KERN_BWD_DWEIGHT);
    double first = 0, best = 0;
    int best_rank = 0, r;
    for (r = 0; r < KERN_MAX_ALGOS; r++) {
      b->ctx.algo_rank = r;
      int rc = sweep_call(b, &s);
      if (rc == KERN_NO_SUCH_ALGO) break;
      if (rc != 0) { /* a candidate that refuses the problem at run time */
        printf("%-12s %-34s %4d %10s\n", sweep_name[kind], shape, r, "failed");
        continue;
      }
      double us = time_us(b, sweep_call, &s);
      clock_state(b, clk, sizeof clk);
      if (r == 0) first = us;
      if (best == 0 || us < best) best = us, best_rank = r;
      printf("%-12s %-34s %4d %10.1f %9.1f %8.3f %s\n", sweep_name[kind], shape, r, us, fl / us * 1e-6,
             first > 0 ? us / first : 0.0, clk);
    }
    b->ctx.algo_rank = 0;
    printf("# %s %s: %d candidates; the first %.1f us, the best (rank %d) %.1f us = %.3f of the first\n",
           sweep_name[kind], shape, r, first, best_rank, best, first > 0 ? best / first : 0.0);
  }
  void *bufs[] = {a.inp, a.w, a.bias, a.out, a.dinp, a.dw};
  for (unsigned i = 0; i < sizeof bufs / sizeof bufs[0]; i++) CUDA(cudaFree(bufs[i]));
}

/* The GEMM shapes of the rows (175B/TP8 and the 1.3B at 4 sequences), and
 * the 1.3B's at one sequence: the same layers at 2048 tokens. */
void sweep_all(bench *b) {
  static kern_clock nv;
  int have = kern_clock_open(&nv, 0), d = b->tiny ? 16 : 1, t = b->tiny ? 64 : 1;
  printf("# cuBLASLt candidates per GEMM, in the heuristic's order; vs_first: time over rank 0's (what the kernels run)\n"
         "# sm_MHz, power_W, capped: NVML's SM clock, board power and share of reads at the power cap, read at the"
         " timed loop's syncs%s\n", have ? "" : " (NVML not available here: -)");
  b->clk = have ? &nv : NULL;
  printf("%-12s %-34s %4s %10s %9s %8s %7s %7s %8s\n", "# gemm", "shape", "rank", "time_us", "TFLOP/s", "vs_first",
         "sm_MHz", "power_W", "capped");
  struct { const char *label; int N, C, OC; } shapes[] = {
      {"175B/TP8 qkv", 2048, 12288, 3 * 12288 / 8}, {"175B/TP8 proj", 2048, 12288 / 8, 12288},
      {"175B/TP8 fc1", 2048, 12288, 4 * 12288 / 8}, {"175B/TP8 fc2", 2048, 4 * 12288 / 8, 12288},
      {"1.3B qkv", 8192, 2048, 3 * 2048},          {"1.3B proj", 8192, 2048, 2048},
      {"1.3B fc1", 8192, 2048, 8192},              {"1.3B fc2", 8192, 8192, 2048},
      {"1.3B B1 qkv", 2048, 2048, 3 * 2048},       {"1.3B B1 proj", 2048, 2048, 2048},
      {"1.3B B1 fc1", 2048, 2048, 8192},           {"1.3B B1 fc2", 2048, 8192, 2048}};
  for (unsigned i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    if (want(b, shapes[i].label))
      sweep_gemms(b, shapes[i].label, shapes[i].N / t, shapes[i].C / d, shapes[i].OC / d);
  b->clk = NULL;
}
