/* kernels/bench/kern_bench.c: kernel benchmark in nccl-tests style.
 *
 * First it measures the device's own peaks: HBM bandwidth from a 1 GiB
 * device-to-device cudaMemcpy (counting read + write bytes), compute from a
 * plain cuBLAS bf16 GEMM of 8192^3. Then, per kernel and shape, it prints
 *   kernel  shape  time_us  TFLOP/s  GB/s  %peak
 * where %peak is TFLOP/s over the GEMM peak for compute-bound kernels and
 * GB/s over the copy bandwidth for memory-bound ones (the bound used is
 * marked with *). Each case: 3 warm-up calls, then the mean of >= 10 calls
 * and >= 50 ms, timed with CUDA events on one stream. Bytes are the
 * minimum traffic (each input read once, each output written once).
 * Without a GPU it says so and exits 77.
 *
 * Usage: kern_bench [--tiny] [--algos] [FILTER]: only the kernels whose name
 * holds FILTER. --algos times, instead, each of cuBLASLt's heuristic
 * candidates (up to KERN_MAX_ALGOS) for the linear layer's three GEMMs at
 * every GEMM shape, with the SM clock, power and power-cap share NVML
 * reports during each (kern_clock_open; "-" without it): is the
 * heuristic's first choice the fastest, and does the clock move with the
 * shape? --tiny runs every row on small shapes with 2 timed calls, which
 * says nothing about speed: CI runs it on the emulated GPU
 * (tests/kernels/cuda_emu.h) so that the bench's own code has run before a
 * GPU session depends on it. */
#include <cublas_v2.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/attention.h"
#include "kernels/crossentropy.h"
#include "kernels/gelu.h"
#include "kernels/layernorm.h"
#include "kernels/rope.h"
#include "kernels/dropout.h"
#include "kernels/matmul.h"
#include "kernels/optimizer.h"
#include "kernels/bench/kern_bench.h"

/* Device buffer of random data: a 64 KiB pattern of bf16 values drawn
 * uniformly from [1/256, 1) (a fixed LCG), repeated by doubling
 * device-to-device copies. Read two at a time as fp32 the words are just as
 * finite and positive (the high half is a bf16 of that range), so every
 * kernel sees real-looking bits, no NaN (the optimizer's second moment
 * stays positive) and no denormals. Not constant: a GEMM on constant data
 * runs faster than on random (GEMM peak 877 TFLOP/s with the byte 0x3c,
 * 2026-11-26, against calibrate's 843 on random data on the same H100).
 * Integer buffers (targets) are set by their bench. */
#define PATTERN_BYTES (64 << 10)
void *dbuf(size_t bytes) {
  static uint16_t pattern[PATTERN_BYTES / 2];
  if (!pattern[0]) {
    uint32_t x = 20240424u;
    for (size_t i = 0; i < PATTERN_BYTES / 2; i++) {
      x = x * 1664525u + 1013904223u;
      float f = 1.0f / 256 + (x >> 8) * (1.0f / 16777216.0f) * (1 - 1.0f / 256);
      uint32_t u;
      memcpy(&u, &f, sizeof u);
      pattern[i] = (uint16_t)(u >> 16); /* truncated to bf16: stays in range */
    }
  }
  char *p;
  CUDA(cudaMalloc((void **)&p, bytes));
  size_t done = bytes < PATTERN_BYTES ? bytes : PATTERN_BYTES;
  CUDA(cudaMemcpy(p, pattern, done, cudaMemcpyHostToDevice));
  while (done < bytes) {
    size_t n = done < bytes - done ? done : bytes - done;
    CUDA(cudaMemcpy(p + done, p, n, cudaMemcpyDeviceToDevice));
    done += n;
  }
  return p;
}

/* Mean time of one call in microseconds. */
double time_us(bench *b, run_fn fn, void *arg) {
  cudaEvent_t e0, e1;
  CUDA(cudaEventCreate(&e0));
  CUDA(cudaEventCreate(&e1));
  int warm = b->tiny ? 1 : 3, min_iters = b->tiny ? 2 : 10;
  float min_ms = b->tiny ? 0.0f : 50.0f;
  for (int i = 0; i < warm; i++) CHECK(fn(b, arg));
  int iters = 0;
  float ms = 0.0f;
  b->clk_sums = (kern_clock_sums){0};
  CUDA(cudaEventRecord(e0, b->stream));
  while (iters < min_iters || ms < min_ms) {
    CHECK(fn(b, arg));
    iters++;
    if (iters % min_iters == 0) {
      if (b->clk) kern_clock_add(b->clk, &b->clk_sums); /* the GPU still busy with this batch */
      CUDA(cudaEventRecord(e1, b->stream));
      CUDA(cudaEventSynchronize(e1));
      CUDA(cudaEventElapsedTime(&ms, e0, e1));
    }
  }
  CUDA(cudaEventDestroy(e0));
  CUDA(cudaEventDestroy(e1));
  return 1e3 * ms / iters;
}

/* Prints one row; flops or bytes may be 0 (not meaningful). */
void row(bench *b, const char *kernel, const char *shape, double us, double flops, double bytes,
         int compute_bound) {
  double tf = flops / us * 1e-6, gb = bytes / us * 1e-3;
  double pct = compute_bound ? 100.0 * tf / b->gemm_tflops : 100.0 * gb / b->copy_gbps;
  printf("%-28s %-34s %10.1f %9.1f%s %9.1f%s %7.1f\n", kernel, shape, us, tf,
         compute_bound ? "*" : " ", gb, compute_bound ? " " : "*", pct);
}

int want(bench *b, const char *kernel) { return !b->filter || strstr(kernel, b->filter); }

/* ---- peaks ----------------------------------------------------------------- */

typedef struct { void *dst, *src; size_t bytes; } copy_arg;
static int run_copy(bench *b, void *a) {
  copy_arg *c = a;
  return cudaMemcpyAsync(c->dst, c->src, c->bytes, cudaMemcpyDeviceToDevice, b->stream) != cudaSuccess;
}

/* Plain cuBLAS, row-major out (m, n) = a (m, k) @ b (n, k)^T, bf16, fp32 accumulate. */
int run_blas(bench *b, void *p) {
  blas_arg *g = p;
  float one = 1.0f, zero = 0.0f;
  return cublasGemmEx(b->blas, CUBLAS_OP_T, CUBLAS_OP_N, g->n, g->m, g->k, &one, g->b, CUDA_R_16BF,
                      g->k, g->a, CUDA_R_16BF, g->k, &zero, g->c, CUDA_R_16BF, g->n,
                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS;
}

static void measure_peaks(bench *b) {
  size_t bytes = (size_t)1 << (b->tiny ? 20 : 30);
  copy_arg c = {dbuf(bytes), dbuf(bytes), bytes};
  b->copy_gbps = 2.0 * bytes / time_us(b, run_copy, &c) * 1e-3;
  CUDA(cudaFree(c.dst));
  CUDA(cudaFree(c.src));
  int n = b->tiny ? 256 : 8192;
  blas_arg g = {n, n, n, dbuf(2L * n * n), dbuf(2L * n * n), dbuf(2L * n * n)};
  b->gemm_tflops = 2.0 * n * n * n / time_us(b, run_blas, &g) * 1e-6;
  CUDA(cudaFree(g.a)); CUDA(cudaFree(g.b)); CUDA(cudaFree(g.c));
  printf("# measured peaks: device-to-device copy %.1f GB/s (read + write), "
         "cuBLAS bf16 GEMM %d^3 %.1f TFLOP/s\n", b->copy_gbps, n, b->gemm_tflops);
}

/* ---- attention --------------------------------------------------------------- */

typedef struct {
  kern_attn_shape s;
  int v1; /* flash rows: 0 FA-2 (kern_attention_*_cuda), 1 FA-1 (*_v1_cuda), 2 FA-2 on CUDA cores (*_simt_cuda) */
  int mt, bc; /* attn_fwd_tile: the FA-2 forward's tile */
  int nw;     /* attn_bwd_tile: the FA-2 backward's warps per block */
  int grouped; /* attn_bwd_tile: GQA's grouped grid (a block per KV head) instead of one per query head */
  kern_bf16 *q, *k, *v, *out, *dout, *dq, *dk, *dv, *att, *datt;
  float *lse, *scratch, *scores, *fwd_scratch;
} attn_arg;

static int attn_fwd(bench *b, void *p) {
  attn_arg *a = p;
  if (a->v1 == 1)
    return kern_attention_fwd_v1_cuda(a->out, a->lse, a->fwd_scratch, a->q, a->k, a->v, a->s,
                                      b->stream);
  return (a->v1 == 2 ? kern_attention_fwd_simt_cuda : kern_attention_fwd_cuda)(a->out, a->lse, a->q, a->k, a->v,
                                                                              a->s, b->stream);
}
static int attn_bwd(bench *b, void *p) {
  attn_arg *a = p;
  return (a->v1 == 1 ? kern_attention_bwd_v1_cuda : a->v1 == 2 ? kern_attention_bwd_simt_cuda : kern_attention_bwd_cuda)(
      a->dq, a->dk, a->dv, a->scratch, a->dout, a->q, a->k, a->v, a->out, a->lse, a->s, b->stream);
}
static int attn_fwdbwd(bench *b, void *p) { return attn_fwd(b, p) || attn_bwd(b, p); }
static int attn_fwd_tile(bench *b, void *p) {
  attn_arg *a = p;
  return kern_attention_fwd_tile_cuda(a->mt, a->bc, a->out, a->lse, a->q, a->k, a->v, a->s, b->stream);
}
static int attn_bwd_tile(bench *b, void *p) {
  attn_arg *a = p;
  return kern_attention_bwd_tile_cuda(a->nw, a->grouped, a->dq, a->dk, a->dv, a->scratch, a->dout, a->q, a->k, a->v, a->out,
                                      a->lse, a->s, b->stream);
}
static int attn_unfused(bench *b, void *p) {
  attn_arg *a = p;
  return kern_attention_unfused_fwd_cuda(&b->ctx, a->out, a->att, a->scores, a->q, a->k, a->v,
                                         a->s, b->stream) ||
         kern_attention_unfused_bwd_cuda(&b->ctx, a->dq, a->dk, a->dv, a->datt, a->scores,
                                         a->dout, a->q, a->k, a->v, a->att, a->s, b->stream);
}

/* Visible (query, key) pairs per head: the causal band, clipped by the window. */
static double attn_pairs(kern_attn_shape s) {
  double n = 0;
  for (int i = 0; i < s.T; i++) n += i - kern_attn_lo(i, s.window) + 1;
  return n;
}

/* Rows `algo`_fwd, _bwd, _fwdbwd of one flash algorithm (a->v1). Backward
 * FLOPs: 5 GEMMs (QK^T again, dP, dV, dQ, dK) = 2.5x the forward's 2. */
static void bench_flash(bench *b, attn_arg *a, const char *algo, const char *shape, double fwd) {
  static const struct { const char *pass; run_fn fn; double flops_per_fwd; } passes[] = {
      {"fwd", attn_fwd, 1.0}, {"bwd", attn_bwd, 2.5}, {"fwdbwd", attn_fwdbwd, 3.5}};
  CHECK(attn_fwd(b, a)); /* the backward reads a real out and lse */
  for (unsigned i = 0; i < sizeof passes / sizeof passes[0]; i++) {
    char name[40];
    snprintf(name, sizeof name, "%s_%s", algo, passes[i].pass);
    if (want(b, name))
      row(b, name, shape, time_us(b, passes[i].fn, a), passes[i].flops_per_fwd * fwd, 0, 1);
  }
}

static void bench_attention(bench *b, const char *label, kern_attn_shape s) {
  long nq = (long)s.B * s.T * s.NH * s.HS, nkv = (long)s.B * s.T * s.NKV * s.HS;
  long ntt = (long)s.B * s.NH * s.T * s.T;
  attn_arg a = {s, 0, 0, 0, 0, 0, dbuf(2 * nq), dbuf(2 * nkv), dbuf(2 * nkv), dbuf(2 * nq), dbuf(2 * nq),
                dbuf(2 * nq), dbuf(2 * nkv), dbuf(2 * nkv), NULL, NULL,
                dbuf(4L * s.B * s.NH * s.T), dbuf(kern_attention_bwd_scratch_bytes(s)), NULL,
                dbuf(kern_attention_fwd_v1_scratch_bytes(s))};
  double fwd = 4.0 * s.B * s.NH * s.HS * attn_pairs(s); /* QK^T and PV: 2 GEMMs */
  char shape[64];
  snprintf(shape, sizeof shape, "B%d T%d H%d/%d D%d w%d %s", s.B, s.T, s.NH, s.NKV, s.HS,
           s.window, label);
  /* FA-2, FA-1, then FA-2 on CUDA cores (the tensor cores' gain) at the
   * same shape; the backward scratch serves all */
  static const char *const algo[] = {"attention_flash", "attention_flash1", "attention_flash_simt"};
  for (a.v1 = 0; a.v1 < 3; a.v1++) bench_flash(b, &a, algo[a.v1], shape, fwd);
  /* FA-2 with --attention-dropout 0.1 (Philox in the kernels), each pass
   * apart: what the draws add to the forward and to the backward, which the
   * cost model prices per pass (dropout_gdraws) */
  attn_arg d = a;
  d.v1 = 0, d.s.drop = kern_dropout_make(0.1f, 1, kern_dropout_site(0, KERN_DROP_ATTN), 0), d.s.drop.heads = s.NH;
  bench_flash(b, &d, "attention_flash_dropout", shape, fwd);
  /* The FA-2 forward's tiles (m-tiles per warp x keys per tile) and the
   * backward's warps per block, to pick kernels/attention_mma.cuh's
   * mf_tile and mb_warps by measurement. */
  static const int tiles[][2] = KERN_ATTN_FWD_TILES;
  for (unsigned i = 0; i < sizeof tiles / sizeof tiles[0]; i++) {
    char name[40];
    a.mt = tiles[i][0], a.bc = tiles[i][1];
    snprintf(name, sizeof name, "attention_flash_fwd_t%dx%d", a.mt, a.bc);
    if (want(b, name)) row(b, name, shape, time_us(b, attn_fwd_tile, &a), fwd, 0, 1);
  }
  a.v1 = 0;
  CHECK(attn_fwd(b, &a)); /* out and lse of the default forward, for the backward */
  for (a.nw = 4; a.nw <= 8; a.nw += 4) {
    char name[40];
    snprintf(name, sizeof name, "attention_flash_bwd_w%d", a.nw);
    if (want(b, name)) row(b, name, shape, time_us(b, attn_bwd_tile, &a), 2.5 * fwd, 0, 1);
  }
  /* GQA: the grouped grid the default replaced (a block per KV head
   * walking the group's query heads), beside it on the same GPU */
  a.nw = 8, a.grouped = 1;
  if (s.NH > s.NKV && want(b, "attention_flash_bwd_grouped"))
    row(b, "attention_flash_bwd_grouped", shape, time_us(b, attn_bwd_tile, &a), 2.5 * fwd, 0, 1);
  a.grouped = 0;
  if (want(b, "attention_unfused_fwdbwd") && ntt * 6 < (8L << 30)) {
    a.att = dbuf(2 * ntt), a.datt = dbuf(2 * ntt), a.scores = dbuf(4 * ntt);
    row(b, "attention_unfused_fwdbwd", shape, time_us(b, attn_unfused, &a), 3.5 * fwd, 0, 1);
    CUDA(cudaFree(a.att)); CUDA(cudaFree(a.datt)); CUDA(cudaFree(a.scores));
  }
  void *bufs[] = {a.q, a.k, a.v, a.out, a.dout, a.dq, a.dk, a.dv, a.lse, a.scratch, a.fwd_scratch};
  for (unsigned i = 0; i < sizeof bufs / sizeof bufs[0]; i++) CUDA(cudaFree(bufs[i]));
}

/* ---- memory-bound kernels ----------------------------------------------------- */

typedef struct { int N, C; kern_bf16 *x, *y, *res, *out, *w, *bias, *wide; float *mean, *rstd, *dw, *db; } ew_arg;

static int ln_fwd(bench *b, void *p) {
  ew_arg *a = p;
  return kern_layernorm_fwd_cuda(a->res, a->out, a->mean, a->rstd, a->x, a->y, NULL, NULL, a->w,
                                 a->bias, a->N, a->C, b->stream);
}
static int ln_bwd(bench *b, void *p) {
  ew_arg *a = p;
  return kern_layernorm_bwd_cuda(a->res, a->dw, a->db, a->x, a->y, a->w, a->mean, a->rstd, a->N,
                                 a->C, b->stream);
}
static int rms_fwd(bench *b, void *p) {
  ew_arg *a = p;
  return kern_rmsnorm_fwd_cuda(a->res, a->out, a->rstd, a->x, a->y, NULL, NULL, a->w, a->N, a->C, b->stream);
}
static int rms_bwd(bench *b, void *p) {
  ew_arg *a = p;
  return kern_rmsnorm_bwd_cuda(a->res, a->dw, a->x, a->y, a->w, a->rstd, a->N, a->C, b->stream);
}
/* RoPE over the rows as heads of 128 (the q of a layer whose hidden size is C) */
static int rope_fwd(bench *b, void *p) {
  ew_arg *a = p;
  return kern_rope_cuda(a->out, a->N, 2048, 0, a->C / 128, 128, 10000.0, 0, b->stream);
}
/* Hidden dropout 0.1 over the rows, keeping its 1-byte mask (in res) as Megatron-LM's does */
static int dropout_fwd(bench *b, void *p) {
  ew_arg *a = p;
  kern_dropout d = kern_dropout_make(0.1f, 1, kern_dropout_site(0, KERN_DROP_AFTER_ATTN), 0);
  return kern_dropout_cuda(a->out, (uint8_t *)a->res, a->x, (long)a->N * a->C, d, b->stream);
}
/* The same dropout inside the residual add (bias-dropout-add: x + drop(y)), mask in wide */
static int dropout_add_fwd(bench *b, void *p) {
  ew_arg *a = p;
  kern_dropout d = kern_dropout_make(0.1f, 1, kern_dropout_site(0, KERN_DROP_AFTER_ATTN), 0);
  return kern_dropout_add_cuda(a->res, (uint8_t *)a->wide, a->x, a->y, (long)a->N * a->C, d, b->stream);
}
/* ... and inside the residual add + LayerNorm (--fused-elementwise) */
static int ln_dropout_fwd(bench *b, void *p) {
  ew_arg *a = p;
  kern_dropout d = kern_dropout_make(0.1f, 1, kern_dropout_site(0, KERN_DROP_AFTER_ATTN), 0);
  return kern_layernorm_fwd_cuda(a->res, a->out, a->mean, a->rstd, a->x, a->y, &d, (uint8_t *)a->wide, a->w,
                                 a->bias, a->N, a->C, b->stream);
}
static int swiglu_fwd(bench *b, void *p) {
  ew_arg *a = p;
  return kern_swiglu_fwd_cuda(a->out, a->wide, a->N, a->C, b->stream);
}
static int swiglu_bwd(bench *b, void *p) {
  ew_arg *a = p;
  return kern_swiglu_bwd_cuda(a->wide, a->y, a->wide, a->N, a->C, b->stream);
}
static int gelu_fused(bench *b, void *p) {
  ew_arg *a = p;
  return kern_bias_gelu_fwd_cuda(a->out, a->x, a->bias, a->N, a->C, b->stream);
}
static int gelu_unfused(bench *b, void *p) {
  ew_arg *a = p;
  return kern_bias_add_cuda(a->res, a->x, a->bias, a->N, a->C, b->stream) ||
         kern_gelu_fwd_cuda(a->out, a->res, (long)a->N * a->C, b->stream);
}
static int gelu_bwd_fused(bench *b, void *p) {
  ew_arg *a = p;
  return kern_bias_gelu_bwd_cuda(a->out, a->db, a->y, a->x, a->bias, a->N, a->C, b->stream);
}
static int gelu_bwd_unfused(bench *b, void *p) {
  ew_arg *a = p;
  return kern_gelu_bwd_cuda(a->out, a->y, a->res, (long)a->N * a->C, b->stream) ||
         kern_bias_grad_cuda(a->db, a->out, a->N, a->C, b->stream);
}

/* The LayerNorm rows (ln = 1) or the bias + GeLU rows (ln = 0) over N rows
 * of C: LayerNorm runs over the whole hidden size, GeLU over the FFN's 4h /
 * TP, so each family takes its own shapes. */
static void bench_elementwise(bench *b, int ln, const char *label, int N, int C) {
  long n = (long)N * C;
  ew_arg a = {N, C, dbuf(2 * n), dbuf(2 * n), dbuf(2 * n), dbuf(2 * n), dbuf(2L * C), dbuf(2L * C), dbuf(4 * n),
              dbuf(4L * N), dbuf(4L * N), dbuf(4L * C), dbuf(4L * C)};
  char shape[64];
  snprintf(shape, sizeof shape, "N%d C%d %s", N, C, label);
  if (ln && want(b, "layernorm_residual_fwd")) /* read x, skip; write residual, out */
    row(b, "layernorm_residual_fwd", shape, time_us(b, ln_fwd, &a), 0, 8.0 * n, 0);
  if (ln && want(b, "layernorm_residual_bwd")) /* read dout, xln, dres; write dres */
    row(b, "layernorm_residual_bwd", shape, time_us(b, ln_bwd, &a), 0, 8.0 * n, 0);
  if (ln && want(b, "rmsnorm_residual_fwd")) row(b, "rmsnorm_residual_fwd", shape, time_us(b, rms_fwd, &a), 0, 8.0 * n, 0);
  if (ln && want(b, "rmsnorm_residual_bwd")) row(b, "rmsnorm_residual_bwd", shape, time_us(b, rms_bwd, &a), 0, 8.0 * n, 0);
  if (ln && C % 128 == 0 && want(b, "rope_fwd")) /* read, write */
    row(b, "rope_fwd", shape, time_us(b, rope_fwd, &a), 0, 4.0 * n, 0);
  if (ln && want(b, "dropout_fwd")) /* read, write, and the mask */
    row(b, "dropout_fwd", shape, time_us(b, dropout_fwd, &a), 0, 5.0 * n, 0);
  if (ln && want(b, "dropout_add_fwd")) /* read x, y; write the sum and the mask */
    row(b, "dropout_add_fwd", shape, time_us(b, dropout_add_fwd, &a), 0, 7.0 * n, 0);
  if (ln && want(b, "layernorm_residual_dropout_fwd")) /* layernorm_residual_fwd's bytes and the mask */
    row(b, "layernorm_residual_dropout_fwd", shape, time_us(b, ln_dropout_fwd, &a), 0, 9.0 * n, 0);
  /* SwiGLU over [gate | up] (N, 2C): forward reads 2n, writes n; backward
   * reads dout n and 2n, writes 2n (in place of its input) */
  if (!ln && want(b, "swiglu_fwd")) row(b, "swiglu_fwd", shape, time_us(b, swiglu_fwd, &a), 0, 6.0 * n, 0);
  if (!ln && want(b, "swiglu_bwd")) row(b, "swiglu_bwd", shape, time_us(b, swiglu_bwd, &a), 0, 10.0 * n, 0);
  /* GeLU rows count the fused kernel's bytes for both, so GB/s compare time */
  if (!ln && want(b, "bias_gelu_fwd_fused")) row(b, "bias_gelu_fwd_fused", shape, time_us(b, gelu_fused, &a), 0, 4.0 * n, 0);
  if (!ln && want(b, "bias_gelu_fwd_unfused")) row(b, "bias_gelu_fwd_unfused", shape, time_us(b, gelu_unfused, &a), 0, 4.0 * n, 0);
  if (!ln && want(b, "bias_gelu_bwd_fused")) row(b, "bias_gelu_bwd_fused", shape, time_us(b, gelu_bwd_fused, &a), 0, 6.0 * n, 0);
  if (!ln && want(b, "bias_gelu_bwd_unfused")) row(b, "bias_gelu_bwd_unfused", shape, time_us(b, gelu_bwd_unfused, &a), 0, 6.0 * n, 0);
  void *bufs[] = {a.x, a.y, a.res, a.out, a.w, a.bias, a.wide, a.mean, a.rstd, a.dw, a.db};
  for (unsigned i = 0; i < sizeof bufs / sizeof bufs[0]; i++) CUDA(cudaFree(bufs[i]));
}

typedef struct { int N, V; kern_bf16 *logits; float *losses, *lse; int *tgt; float *parts; } ce_arg;
static int ce_fwdbwd(bench *b, void *p) {
  ce_arg *a = p;
  return kern_crossentropy_fwd_cuda(a->losses, a->lse, a->logits, a->tgt, a->N, a->V, b->stream) ||
         kern_crossentropy_bwd_cuda(a->logits, a->logits, a->lse, a->tgt, 0, 1.0f / a->N, a->N, a->V,
                                    b->stream);
}

/* One TP rank's slice of the vocabulary (V is the slice, P ranks): the
 * slice's part, the merge of P parts (gathered beforehand in a real run),
 * the backward at the slice's first column. */
#define CE_SPLIT_P 8
static int ce_split_fwdbwd(bench *b, void *p) {
  ce_arg *a = p;
  return kern_crossentropy_part_cuda(a->parts, a->logits, a->tgt, a->V, a->N, a->V, b->stream) ||
         kern_crossentropy_merge_cuda(a->losses, a->lse, a->parts, a->tgt, CE_SPLIT_P, a->N, b->stream) ||
         kern_crossentropy_bwd_cuda(a->logits, a->logits, a->lse, a->tgt, a->V, 1.0f / a->N, a->N, a->V,
                                    b->stream);
}

static void bench_crossentropy(bench *b, int N, int V) {
  ce_arg a = {N, V, dbuf(2L * N * V), dbuf(4L * N), dbuf(4L * N), dbuf(4L * N), dbuf(8L * CE_SPLIT_P * N)};
  CUDA(cudaMemset(a.tgt, 0, 4L * N));
  CUDA(cudaMemset(a.parts, 0, 8L * CE_SPLIT_P * N));
  char shape[64];
  snprintf(shape, sizeof shape, "N%d V%d", N, V);
  if (want(b, "crossentropy_fwdbwd")) /* read logits twice, write dlogits */
    row(b, "crossentropy_fwdbwd", shape, time_us(b, ce_fwdbwd, &a), 0, 6.0 * N * V, 0);
  a.V = V / CE_SPLIT_P; /* the same tokens, one rank's columns */
  snprintf(shape, sizeof shape, "N%d V%d/%d", N, V, CE_SPLIT_P);
  if (want(b, "crossentropy_split_fwdbwd"))
    row(b, "crossentropy_split_fwdbwd", shape, time_us(b, ce_split_fwdbwd, &a), 0, 6.0 * N * a.V, 0);
  CUDA(cudaFree(a.logits)); CUDA(cudaFree(a.losses)); CUDA(cudaFree(a.lse)); CUDA(cudaFree(a.tgt));
  CUDA(cudaFree(a.parts));
}

/* ---- optimizer ---------------------------------------------------------------- */

#define OPT_TENSORS 64
typedef struct { kern_opt_tensor t[OPT_TENSORS]; float *norms; } opt_arg;
static int opt_adamw(bench *b, void *p) {
  opt_arg *a = p;
  kern_opt_hparams hp = {1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 10, 1.0f};
  return kern_adamw_cuda(a->t, OPT_TENSORS, hp, b->stream);
}
static int opt_lamb(bench *b, void *p) {
  opt_arg *a = p;
  kern_opt_hparams hp = {1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 10, 1.0f};
  return kern_lamb_cuda(a->t, OPT_TENSORS, hp, a->norms, b->stream);
}

/* gradient clipping's norm pass (the sums of g^2 per tensor; a.norms holds 2 x 64) */
static int opt_grad_norm(bench *b, void *p) {
  opt_arg *a = p;
  return kern_grad_sumsq_cuda(a->t, OPT_TENSORS, a->norms, b->stream);
}

static void bench_optimizer(bench *b, long per_tensor) {
  opt_arg a;
  for (int k = 0; k < OPT_TENSORS; k++)
    a.t[k] = (kern_opt_tensor){dbuf(4 * per_tensor), dbuf(4 * per_tensor), dbuf(4 * per_tensor),
                               dbuf(4 * per_tensor), dbuf(2 * per_tensor), per_tensor};
  a.norms = dbuf(8 * OPT_TENSORS);
  double n = (double)per_tensor * OPT_TENSORS;
  char shape[64];
  snprintf(shape, sizeof shape, "%d tensors x %ld", OPT_TENSORS, per_tensor);
  /* read w, g, m, v; write w, m, v, bf16 w: 30 bytes per parameter */
  if (want(b, "adamw_multi_tensor")) row(b, "adamw_multi_tensor", shape, time_us(b, opt_adamw, &a), 0, 30 * n, 0);
  /* LAMB reads w, g, m, v then w, m, v again */
  if (want(b, "lamb_multi_tensor")) row(b, "lamb_multi_tensor", shape, time_us(b, opt_lamb, &a), 0, 42 * n, 0);
  /* read g: the 4 bytes per parameter the model's optimizer price gives clipping (model/cost.c) */
  if (want(b, "grad_norm_multi_tensor"))
    row(b, "grad_norm_multi_tensor", shape, time_us(b, opt_grad_norm, &a), 0, 4 * n, 0);
  for (int k = 0; k < OPT_TENSORS; k++) {
    CUDA(cudaFree(a.t[k].param)); CUDA(cudaFree((void *)a.t[k].grad)); CUDA(cudaFree(a.t[k].m));
    CUDA(cudaFree(a.t[k].v)); CUDA(cudaFree(a.t[k].param_bf16));
  }
  CUDA(cudaFree(a.norms));
}

int main(int argc, char **argv) {
  bench b = {0};
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("usage: kern_bench [--tiny] [--algos] [FILTER]\n"
             "  times each kernel of kernels/ (time, TFLOP/s or GB/s, %% of the device's measured peak)\n"
             "  FILTER   only the kernels whose name contains it (e.g. attention_flash_fwd_t);\n"
             "           with --algos, only the GEMM shapes whose label contains it (e.g. 1.3B)\n"
             "  --algos  each of cuBLASLt's candidates for the linear layer's GEMMs, with SM clock and power\n"
             "  --tiny   small shapes, 2 timed calls: checks the bench runs, says nothing about speed\n");
      return 0;
    }
    if (!strcmp(argv[i], "--tiny")) {
      b.tiny = 1;
    } else if (!strcmp(argv[i], "--algos")) {
      b.algos = 1;
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "kern_bench: unknown option '%s'; usage: kern_bench [--tiny] [--algos] [FILTER]\n", argv[i]);
      return 2;
    } else if (b.filter) {
      fprintf(stderr, "kern_bench: one FILTER only (got '%s' and '%s'); usage: kern_bench [--tiny] [--algos] [FILTER]\n",
              b.filter, argv[i]);
      return 2;
    } else {
      b.filter = argv[i];
    }
  }
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("kern_bench: no GPU on this machine; nothing to measure\n");
    return 77;
  }
  struct cudaDeviceProp prop;
  CUDA(cudaGetDeviceProperties(&prop, 0));
  CHECK(kern_ctx_init(&b.ctx, 64 << 20));
  CUBLAS(cublasCreate(&b.blas));
  CUDA(cudaStreamCreate(&b.stream));
  CUBLAS(cublasSetStream(b.blas, b.stream));
  printf("# kern_bench on %s (sm_%d%d, %d SMs)%s\n", prop.name, prop.major, prop.minor,
         prop.multiProcessorCount, b.tiny ? ", --tiny: small shapes, times mean nothing" : "");
  measure_peaks(&b);
  if (b.algos) {
    sweep_all(&b);
    CUDA(cudaStreamDestroy(b.stream));
    cublasDestroy(b.blas);
    kern_ctx_free(&b.ctx);
    return 0;
  }
  printf("# * marks the bound %%peak refers to (TFLOP/s: GEMM peak; GB/s: copy bandwidth)\n");
  printf("%-28s %-34s %10s %10s %10s %7s\n", "# kernel", "shape", "time_us", "TFLOP/s", "GB/s", "%peak");
  /* Attention at the two shapes, each its own row: 175B on TP 8
   * (96 heads / 8 = 12 per rank, head size 128: hidden 12288 / 8 = 1536)
   * and a 1.3B model (hidden 2048, 16 heads of 128), sequence 2048; then
   * 175B/TP8 with a sliding window, and GQA (16 query heads on 4 key/value
   * heads, and 8 on 1) at 4096. --tiny shrinks every shape (each row prints its own;
   * heads / 4, sequences of 64 and, for GQA, 128: two query tiles), keeping head
   * size 128, GQA's 4 query heads per kv head, a window shorter than the
   * sequence and the labels. (Twice these sequences took 32 of the 35 s
   * the emulated GPU's run took.) */
  int t = b.tiny;
  kern_attn_shape s175 = {1, t ? 64 : 2048, t ? 3 : 12, t ? 3 : 12, 128, 0, KERN_NO_DROPOUT, KERN_ATTN_WHOLE};
  bench_attention(&b, "175B/TP8", s175);
  kern_attn_shape s13 = {1, t ? 64 : 2048, t ? 4 : 16, t ? 4 : 16, 128, 0, KERN_NO_DROPOUT, KERN_ATTN_WHOLE};
  bench_attention(&b, "1.3B", s13);
  s175.window = t ? 32 : 512;
  bench_attention(&b, "sliding window", s175);
  kern_attn_shape gqa = {1, t ? 128 : 4096, t ? 4 : 16, t ? 1 : 4, 128, 0, KERN_NO_DROPOUT, KERN_ATTN_WHOLE};
  bench_attention(&b, "GQA 4", gqa);
  /* GQA at a LLaMA-3-70B layer's shape on TP 8: 64 query heads on 8 KV
   * heads over 8 ranks, one KV head per rank, where the grouped grid's 32
   * blocks leave most SMs idle */
  kern_attn_shape gqa8 = {1, t ? 128 : 4096, 8, 1, 128, 0, KERN_NO_DROPOUT, KERN_ATTN_WHOLE};
  bench_attention(&b, "70B/TP8 GQA 8", gqa8);
  /* 1.3B at scripts/gpu-real.sh's micro-batch of 4 sequences: a grid four
   * times the batch-1 rows', whose last wave the calibration's wave model
   * must account for (its samples run batch 1) */
  s13.B = 4;
  bench_attention(&b, "1.3B B4", s13);
  /* LayerNorm over the hidden size: 1.3B (h 2048) on 8 sequences of 2048,
   * 175B (h 12288) on one sequence (without SP; SP gives each TP rank 1/8
   * of the rows). bias + GeLU over the FFN's 4h / TP: 1.3B at TP 1, 175B at
   * TP 8. --tiny: fewer rows and, for GeLU, 1/16 of the columns (C % 8 == 0
   * kept, so the same vector paths run); LayerNorm's 175B row keeps C above
   * 4096 (6144), so its forward and backward take the wide-row kernels that
   * 12288 takes. */
  bench_elementwise(&b, 1, "1.3B", t ? 256 : 16384, 2048);
  bench_elementwise(&b, 1, "175B", t ? 32 : 2048, t ? 6144 : 12288);
  bench_elementwise(&b, 0, "1.3B", t ? 256 : 16384, 4 * 2048 / (t ? 16 : 1));
  bench_elementwise(&b, 0, "175B/TP8", t ? 32 : 2048, 4 * 12288 / 8 / (t ? 16 : 1));
  bench_crossentropy(&b, t ? 32 : 8192, t ? 1000 : 50304);
  int d = t ? 16 : 1; /* 12288 / 16 = 768 */
  bench_matmul(&b, "175B/TP8 qkv", 2048 / d, 12288 / d, 3 * 12288 / 8 / d);
  bench_matmul(&b, "175B/TP8 proj", 2048 / d, 12288 / 8 / d, 12288 / d);
  bench_matmul(&b, "175B/TP8 fc1", 2048 / d, 12288 / d, 4 * 12288 / 8 / d);
  bench_matmul(&b, "175B/TP8 fc2", 2048 / d, 4 * 12288 / 8 / d, 12288 / d);
  /* 1.3B (hidden 2048, FFN 8192, TP 1) on 4 sequences of 2048 */
  int n13 = 8192 / (t ? 64 : 1);
  bench_matmul(&b, "1.3B qkv", n13, 2048 / d, 3 * 2048 / d);
  bench_matmul(&b, "1.3B proj", n13, 2048 / d, 2048 / d);
  bench_matmul(&b, "1.3B fc1", n13, 2048 / d, 8192 / d);
  bench_matmul(&b, "1.3B fc2", n13, 8192 / d, 2048 / d);
  bench_optimizer(&b, t ? 1024 : 4L << 20);
  CUDA(cudaStreamDestroy(b.stream));
  cublasDestroy(b.blas);
  kern_ctx_free(&b.ctx);
  return 0;
}
