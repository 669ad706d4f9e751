/* real/cudnn_attn.h: cuDNN's fused flash attention, forward and backward
 * (causal, sliding window, grouped-query, dropout), for the GPU path's
 * `--attention-backend cudnn` (issue 38). Each pass is a cuDNN backend
 * operation graph of matmuls, pointwise ops and reductions in the pattern
 * cuDNN's runtime fusion engines take as one flash-attention kernel (the
 * pattern the cuDNN frontend's SDPA nodes lower to; cuDNN 9), planned
 * once per shape and kept. libcudnn is opened at run time (dlopen), so
 * the program and its GPU module build and run where cuDNN is absent, and
 * nothing here calls the CUDA runtime: the caller owns every buffer.
 *
 * Plans are made for the GPU of a cuDNN handle, or, given a device
 * description (cuDNN's CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, cuDNN
 * 9.8 and later), for the GPU it describes on a machine without one: the
 * CPU tests plan every graph this way (tests/real/test_cudnn_attn.c).
 *
 * Layouts are kernels/attention.h's: q, out, dq, dout (B, T, NH, HS) and
 * k, v, dk, dv (B, T, NKV, HS) bf16, lse (B, NH, T) fp32 (cuDNN's softmax
 * statistics: max plus log of the sum, of the scaled scores). Scores are
 * scaled by 1/sqrt(HS). Only whole sequences (no context-parallel block:
 * Tk, q0, k0, Tseq at their whole-sequence values). Dropout draws from
 * cuDNN's own Philox stream (cudnn_attn_rng), not kernels/dropout.h's: the
 * masks differ from megasim's kernels and from plan to plan. */
#ifndef REAL_CUDNN_ATTN_H
#define REAL_CUDNN_ATTN_H
#include "kernels/attention.h"

#include <stdint.h>

typedef struct cudnn_attn cudnn_attn_t;

/* Opens libcudnn ($MEGASIM_CUDNN_LIB, else libcudnn.so.9 on the loader's
 * path). devprop_json NULL: a handle on the current GPU (plans for it,
 * runs on it); else the JSON of a device description: plans only. NULL
 * with a message. */
cudnn_attn_t *cudnn_attn_open(const char *devprop_json, char *err, int errlen);
void cudnn_attn_close(cudnn_attn_t *c);

/* The version of the library opened (cudnnGetVersion: 91900 for 9.19). */
long cudnn_attn_version(const cudnn_attn_t *c);

/* 0 when cuDNN takes this shape, else -1 with the reason. */
int cudnn_attn_supported(const kern_attn_shape *s, char *why, int n);

/* The plan of the forward (bwd 0) or backward (bwd 1) of shape s, made on
 * first use and kept: the device workspace in bytes that call needs, or
 * -1 with a message. desc (may be NULL) gets the engine chosen. */
long long cudnn_attn_plan(cudnn_attn_t *c, int bwd, const kern_attn_shape *s, char *desc, int desclen, char *err,
                          int errlen);

/* Dropout's seed and offset for cuDNN's generator (device int64[2] at the
 * calls' rng) from s->drop: the seed from (seed, site, step), the offset
 * from the call's first probability index, so every layer, micro-batch
 * and step draws its own masks and the backward regenerates them. */
void cudnn_attn_rng(const kern_attn_shape *s, int64_t seed_offset[2]);

/* The passes on stream (a cudaStream_t). rng: the device int64[2] of
 * cudnn_attn_rng, NULL without dropout. ws: cudnn_attn_plan's bytes of
 * device memory, 256-byte aligned. 0, or -1 with a message. */
int cudnn_attn_fwd(cudnn_attn_t *c, void *stream, void *out, float *lse, const void *q, const void *k, const void *v,
                   const kern_attn_shape *s, const int64_t *rng, void *ws, char *err, int errlen);
int cudnn_attn_bwd(cudnn_attn_t *c, void *stream, void *dq, void *dk, void *dv, const void *dout, const void *q,
                   const void *k, const void *v, const void *out, const float *lse, const kern_attn_shape *s,
                   const int64_t *rng, void *ws, char *err, int errlen);

#endif
