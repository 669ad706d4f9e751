/* kernels/gelu.cu: CUDA bias + GeLU, fused and unfused, and SwiGLU (one
 * thread per V outputs, reading the gate and up halves). The elementwise
 * passes share one kernel, specialised by mode, that moves 8 bf16 (16 bytes)
 * per thread when the shapes and pointers allow. The backward with a bias
 * gradient uses a (32 x 8)-thread block over a (32 V columns x 256 rows)
 * slab (V = 8 when C % 8 == 0, so each warp reads 512-byte row segments;
 * else 2 or 1): each thread sums its columns over rows, the block reduces in
 * shared memory, then one fp32 atomic per column per slab. */
#include "kernels/gelu.h"
#include "kernels/kern_cuda.cuh"

enum ew_mode { EW_BIAS_GELU, EW_BIAS_ADD, EW_GELU, EW_GELU_BWD };

/* out[i] = f(x[i], y[i], bias[i % C]); n % V == 0 and C % V == 0 when V > 1. */
template <int MODE, int V>
__global__ void ew_kernel(bf16 *out, const bf16 *x, const bf16 *y, const bf16 *bias, long n,
                          int C) {
  long i = ((long)blockIdx.x * blockDim.x + threadIdx.x) * V;
  if (i >= n) return;
  float a[V], b[V] = {0};
  vload<V>(a, x + i);
  if (MODE == EW_GELU_BWD) vload<V>(b, y + i);
  if ((MODE == EW_BIAS_GELU || MODE == EW_BIAS_ADD) && bias) vload<V>(b, bias + i % C);
#pragma unroll
  for (int k = 0; k < V; k++) {
    if (MODE == EW_BIAS_GELU) a[k] = kern_gelu(a[k] + b[k]);
    if (MODE == EW_BIAS_ADD) a[k] = a[k] + b[k];
    if (MODE == EW_GELU) a[k] = kern_gelu(a[k]);
    if (MODE == EW_GELU_BWD) a[k] = a[k] * kern_gelu_grad(b[k]);
  }
  vstore<V>(out + i, a);
}

template <int MODE>
static int ew_launch(bf16 *out, const bf16 *x, const bf16 *y, const bf16 *bias, long n, int C,
                     cudaStream_t stream) {
  const void *p[] = {out, x, y, bias};
  if (n % 8 == 0 && C % 8 == 0 && kern_aligned16(p, 4))
    KERN_LAUNCH(kern_cdiv(n / 8, 256), 256, 0, stream, ew_kernel<MODE, 8>)(out, x, y, bias, n, C);
  else
    KERN_LAUNCH(kern_cdiv(n, 256), 256, 0, stream, ew_kernel<MODE, 1>)(out, x, y, bias, n, C);
  KERN_LAUNCH_TRY();
  return 0;
}

#define BG_ROWS 256 /* rows per slab */

/* GELU = true: dinp = dout * gelu'(inp + bias), dbias += column sums of dinp.
 * GELU = false: dbias += column sums of dout (dinp, inp unused). */
template <bool GELU, int V>
__global__ void __launch_bounds__(256)
    bias_grad_kernel(bf16 *dinp, float *dbias, const bf16 *dout, const bf16 *inp,
                     const bf16 *bias, int N, int C) {
  __shared__ float part[8][32 * V];
  int c = (blockIdx.x * 32 + threadIdx.x) * V;
  long r0 = (long)blockIdx.y * BG_ROWS;
  float s[V] = {0}, b[V] = {0};
  if (c < C) {
    if (GELU && bias) vload<V>(b, bias + c);
    for (long r = r0 + threadIdx.y; r < r0 + BG_ROWS && r < N; r += 8) {
      float d[V], x[V];
      vload<V>(d, dout + r * C + c);
      if (GELU) {
        vload<V>(x, inp + r * C + c);
        for (int k = 0; k < V; k++) d[k] *= kern_gelu_grad(x[k] + b[k]);
        vstore<V>(dinp + r * C + c, d);
      }
      for (int k = 0; k < V; k++) s[k] += d[k];
    }
  }
  for (int k = 0; k < V; k++) part[threadIdx.y][threadIdx.x * V + k] = s[k];
  __syncthreads();
  if (threadIdx.y != 0 || c >= C || !dbias) return;
  for (int k = 0; k < V; k++) {
    float t = 0.0f;
    for (int j = 0; j < 8; j++) t += part[j][threadIdx.x * V + k];
    atomicAdd(dbias + c + k, t);
  }
}

template <bool GELU>
static int bias_grad_launch(bf16 *dinp, float *dbias, const bf16 *dout, const bf16 *inp,
                            const bf16 *bias, int N, int C, cudaStream_t stream) {
  dim3 block(32, 8);
  const void *p[] = {dinp, dout, inp, bias};
  if (C % 8 == 0 && kern_aligned16(p, 4)) { /* 16-byte rows of 8 bf16 per thread */
    dim3 grid(kern_cdiv(C, 256), kern_cdiv(N, BG_ROWS));
    KERN_LAUNCH(grid, block, 0, stream, bias_grad_kernel<GELU, 8>)(dinp, dbias, dout, inp, bias, N, C);
  } else if (C % 2 == 0 && kern_aligned16(p, 4)) {
    dim3 grid(kern_cdiv(C, 64), kern_cdiv(N, BG_ROWS));
    KERN_LAUNCH(grid, block, 0, stream, bias_grad_kernel<GELU, 2>)(dinp, dbias, dout, inp, bias, N, C);
  } else {
    dim3 grid(kern_cdiv(C, 32), kern_cdiv(N, BG_ROWS));
    KERN_LAUNCH(grid, block, 0, stream, bias_grad_kernel<GELU, 1>)(dinp, dbias, dout, inp, bias, N, C);
  }
  KERN_LAUNCH_TRY();
  return 0;
}

extern "C" int kern_bias_gelu_fwd_cuda(kern_bf16 *out, const kern_bf16 *inp,
                                       const kern_bf16 *bias, int N, int C,
                                       cudaStream_t stream) {
  return ew_launch<EW_BIAS_GELU>((bf16 *)out, (const bf16 *)inp, NULL, (const bf16 *)bias,
                                 (long)N * C, C, stream);
}

extern "C" int kern_bias_gelu_bwd_cuda(kern_bf16 *dinp, float *dbias, const kern_bf16 *dout,
                                       const kern_bf16 *inp, const kern_bf16 *bias, int N,
                                       int C, cudaStream_t stream) {
  return bias_grad_launch<true>((bf16 *)dinp, dbias, (const bf16 *)dout, (const bf16 *)inp,
                                (const bf16 *)bias, N, C, stream);
}

extern "C" int kern_bias_add_cuda(kern_bf16 *out, const kern_bf16 *inp, const kern_bf16 *bias,
                                  int N, int C, cudaStream_t stream) {
  return ew_launch<EW_BIAS_ADD>((bf16 *)out, (const bf16 *)inp, NULL, (const bf16 *)bias,
                                (long)N * C, C, stream);
}

extern "C" int kern_gelu_fwd_cuda(kern_bf16 *out, const kern_bf16 *inp, long n,
                                  cudaStream_t stream) {
  return ew_launch<EW_GELU>((bf16 *)out, (const bf16 *)inp, NULL, NULL, n, 8, stream);
}

extern "C" int kern_gelu_bwd_cuda(kern_bf16 *dinp, const kern_bf16 *dout, const kern_bf16 *inp,
                                  long n, cudaStream_t stream) {
  return ew_launch<EW_GELU_BWD>((bf16 *)dinp, (const bf16 *)dout, (const bf16 *)inp, NULL, n,
                                8, stream);
}

extern "C" int kern_bias_grad_cuda(float *dbias, const kern_bf16 *dout, int N, int C,
                                   cudaStream_t stream) {
  return bias_grad_launch<false>(NULL, dbias, (const bf16 *)dout, NULL, NULL, N, C, stream);
}

/* SwiGLU: thread i handles outputs [i V, i V + V) of the (N, F) result;
 * F % V == 0 when V > 1, so a thread's outputs sit in one row. */
template <bool BWD, int V>
__global__ void swiglu_kernel(bf16 *o, const bf16 *dout, const bf16 *inp, long n, int F) {
  long i = ((long)blockIdx.x * blockDim.x + threadIdx.x) * V;
  if (i >= n) return;
  long row = i / F, col = i % F;
  const bf16 *g = inp + row * 2 * F + col, *u = g + F;
  float a[V], b[V], d[V];
  vload<V>(a, g);
  vload<V>(b, u);
  if (BWD) {
    vload<V>(d, dout + i);
    float dg[V], du[V];
#pragma unroll
    for (int k = 0; k < V; k++) dg[k] = d[k] * b[k] * kern_silu_grad(a[k]), du[k] = d[k] * kern_silu(a[k]);
    vstore<V>(o + row * 2 * F + col, dg);
    vstore<V>(o + row * 2 * F + F + col, du);
  } else {
#pragma unroll
    for (int k = 0; k < V; k++) a[k] = kern_silu(a[k]) * b[k];
    vstore<V>(o + i, a);
  }
}

template <bool BWD>
static int swiglu_launch(bf16 *o, const bf16 *dout, const bf16 *inp, int N, int F, cudaStream_t stream) {
  long n = (long)N * F;
  const void *p[] = {o, dout, inp};
  if (F % 8 == 0 && kern_aligned16(p, 3))
    KERN_LAUNCH(kern_cdiv(n / 8, 256), 256, 0, stream, swiglu_kernel<BWD, 8>)(o, dout, inp, n, F);
  else
    KERN_LAUNCH(kern_cdiv(n, 256), 256, 0, stream, swiglu_kernel<BWD, 1>)(o, dout, inp, n, F);
  KERN_LAUNCH_TRY();
  return 0;
}

extern "C" int kern_swiglu_fwd_cuda(kern_bf16 *out, const kern_bf16 *inp, int N, int F, cudaStream_t stream) {
  return swiglu_launch<false>((bf16 *)out, NULL, (const bf16 *)inp, N, F, stream);
}

extern "C" int kern_swiglu_bwd_cuda(kern_bf16 *dinp, const kern_bf16 *dout, const kern_bf16 *inp, int N, int F,
                                    cudaStream_t stream) {
  return swiglu_launch<true>((bf16 *)dinp, (const bf16 *)dout, (const bf16 *)inp, N, F, stream);
}
