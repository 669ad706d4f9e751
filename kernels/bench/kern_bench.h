/* kernels/bench/kern_bench.h: what kern_bench's files share: the bench's
 * state, its error macros, and its harness (kern_bench.c: buffers, timing,
 * rows, the filter, the plain cuBLAS GEMM); kern_bench_gemm.c's entries. */
#ifndef KERN_BENCH_H
#define KERN_BENCH_H
#include <cublas_v2.h>
#include <stdio.h>
#include <stdlib.h>
#include "kernels/kern_common.h"

#define CHECK(x) do { if ((x) != 0) { fprintf(stderr, "%s:%d: %s failed\n", __FILE__, __LINE__, #x); exit(1); } } while (0)
#define CUDA(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)
#define CUBLAS(x) do { cublasStatus_t s_ = (x); if (s_ != CUBLAS_STATUS_SUCCESS) { fprintf(stderr, "%s:%d: %s: cuBLAS status %d\n", __FILE__, __LINE__, #x, (int)s_); exit(1); } } while (0)

typedef struct bench {
  kern_ctx ctx;
  cublasHandle_t blas;
  cudaStream_t stream;
  double copy_gbps, gemm_tflops;
  const char *filter;
  int tiny; /* --tiny: small shapes, 1 warm-up and 2 timed calls */
  int algos; /* --algos: the GEMM candidates' sweep instead of the rows */
  const kern_clock *clk; /* when set, time_us reads it at each of its syncs: */
  kern_clock_sums clk_sums; /* the last timed loop's reads */
} bench;

typedef int (*run_fn)(bench *b, void *arg);

/* Device buffer of random bf16 data (kern_bench.c). */
void *dbuf(size_t bytes);
/* Mean time of one call in microseconds. */
double time_us(bench *b, run_fn fn, void *arg);
/* Prints one row; flops or bytes may be 0 (not meaningful). */
void row(bench *b, const char *kernel, const char *shape, double us, double flops, double bytes,
         int compute_bound);
/* Whether kernel passes the command line's filter. */
int want(bench *b, const char *kernel);

typedef struct { int m, n, k; void *a, *b, *c; } blas_arg;
/* Plain cuBLAS, row-major out (m, n) = a (m, k) @ b (n, k)^T, bf16, fp32 accumulate. */
int run_blas(bench *b, void *p);

/* kern_bench_gemm.c: a linear layer's GEMM rows; --algos's sweep. */
void bench_matmul(bench *b, const char *label, int N, int C, int OC);
void sweep_all(bench *b);
#endif
