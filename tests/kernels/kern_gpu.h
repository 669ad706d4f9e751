/* tests/kernels/kern_gpu.h: helpers for the GPU tests: skip (exit 77)
 * without a GPU, fail fast on errors, move fp32 host arrays to bf16 / fp32
 * device arrays and back.
 *
 * How the GPU tests compare: inputs are drawn in fp32 and rounded to bf16
 * on the host (kc_round_bf16), so the reference and the kernel see the
 * same numbers; differences then come only from (a) rounding outputs and
 * bf16 intermediates to bf16, 2^-9 relative each, (b) fp32 summation order,
 * (c) fast-math exp (a few ulp) and tanh (tanh.approx.f32 under
 * --use_fast_math: 2^-11 relative, under bf16's rounding; in the GeLU
 * backward it enters as 1 - t^2 times x du, up to ~5e-3 absolute at
 * |x| = 4: the fused dinp, checked at KG_TOL_OUT, keeps a 2x margin).
 * Tolerances (|got - ref| <=
 * atol + rtol |ref|):
 *   KG_TOL_OUT   1e-2 + 1e-2 |ref|: one bf16 rounding of an output (2^-9 =
 *                2e-3) plus bf16-rounded inputs of a short chain, ~5x margin;
 *   KG_TOL_GRAD  3e-2 + 3e-2 |ref|: gradients through softmax / LayerNorm,
 *                where p (dp - D) cancels and bf16 intermediates (the
 *                unfused path stores probabilities in bf16) add up over T;
 *   fp32 outputs (lse, losses, norms, parameters) use 1e-4 .. 1e-3. */
#ifndef KERN_GPU_H
#define KERN_GPU_H
#include <stdio.h>
#include <stdlib.h>
#include "kern_check.h"
#include "kernels/kern_common.h"

#define KG_ATOL_OUT 1e-2f
#define KG_RTOL_OUT 1e-2f
#define KG_ATOL_GRAD 3e-2f
#define KG_RTOL_GRAD 3e-2f

/* Exits 77 (ctest: skipped) when no CUDA device can be used. */
void kg_require_gpu(const char *test);

void kg_fail(const char *what, const char *file, int line);
#define KG_CHECK(call) do { if ((call) != 0) kg_fail(#call, __FILE__, __LINE__); } while (0)
#define KG_CUDA(call)                                                                  \
  do {                                                                                 \
    cudaError_t e_ = (call);                                                           \
    if (e_ != cudaSuccess) {                                                           \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

kern_bf16 *kg_bf16(const float *host, long n); /* device copy, rounded to bf16 */
float *kg_f32(const float *host, long n);      /* device copy; host NULL: zeros */
int *kg_i32(const int *host, long n);
void kg_get_bf16(float *host, const kern_bf16 *dev, long n); /* synchronises */
void kg_get_f32(float *host, const float *dev, long n);

#endif
