/* kernels/optimizer.cu: CUDA AdamW and LAMB over a list of tensors in one
 * launch. The list (up to KERN_OPT_MAX_TENSORS descriptors) is a kernel
 * parameter; each tensor is cut into chunks of OPT_CHUNK elements, one block
 * per chunk, and block_start[] (a prefix sum) maps a block to its tensor.
 * LAMB: launch 1 updates m, v and adds each chunk's sums of w^2 and u^2 to
 * norms[] (fp32 atomics); launch 2 recomputes u from the new m, v and
 * applies the per-tensor trust ratio. The gradient-norm pass of clipping
 * adds each chunk's sum of g^2 to its tensor's slot the same way. */
#include <math.h>
#include "kernels/kern_cuda.cuh"
#include "kernels/optimizer.h"

#define OPT_CHUNK 4096
#define OPT_THREADS 256

typedef struct opt_batch {
  kern_opt_tensor t[KERN_OPT_MAX_TENSORS];
  long block_start[KERN_OPT_MAX_TENSORS + 1];
  int count;
  int first; /* index of t[0] in the caller's list: the norms[] slot */
} opt_batch;

enum opt_mode { OPT_ADAMW, OPT_LAMB_NORMS, OPT_LAMB_APPLY };

__device__ __forceinline__ int opt_find(const opt_batch &bt, long blk) {
  int k = 0;
  while (k + 1 < bt.count && bt.block_start[k + 1] <= blk) k++;
  return k;
}

__device__ __forceinline__ void opt_store(const kern_opt_tensor &t, long i, float w) {
  t.param[i] = w;
  if (t.param_bf16) ((bf16 *)t.param_bf16)[i] = __float2bfloat16_rn(w);
}

template <int MODE>
__global__ void __launch_bounds__(OPT_THREADS)
    opt_kernel(opt_batch bt, kern_opt_hparams hp, float bc1, float bc2, float *norms) {
  int k = opt_find(bt, blockIdx.x);
  const kern_opt_tensor &t = bt.t[k];
  long i0 = (blockIdx.x - bt.block_start[k]) * (long)OPT_CHUNK;
  long i1 = min(i0 + OPT_CHUNK, t.n);
  float w2 = 0.0f, u2 = 0.0f, ratio = 1.0f;
  if (MODE == OPT_LAMB_APPLY)
    ratio = kern_lamb_ratio(norms[2 * (bt.first + k)], norms[2 * (bt.first + k) + 1]);
  for (long i = i0 + threadIdx.x; i < i1; i += blockDim.x) {
    float w = t.param[i];
    if (MODE == OPT_LAMB_APPLY) {
      opt_store(t, i, w - hp.lr * ratio * kern_adam_dir_nomove(w, t.m[i], t.v[i], hp, bc1, bc2));
      continue;
    }
    float m = t.m[i], v = t.v[i], u = kern_adam_dir(w, t.grad[i], &m, &v, hp, bc1, bc2);
    t.m[i] = m;
    t.v[i] = v;
    if (MODE == OPT_ADAMW) opt_store(t, i, w - hp.lr * u);
    w2 += w * w;
    u2 += u * u;
  }
  if (MODE != OPT_LAMB_NORMS) return;
  w2 = block_sum(w2);
  u2 = block_sum(u2);
  if (threadIdx.x == 0) {
    atomicAdd(norms + 2 * (bt.first + k), w2);
    atomicAdd(norms + 2 * (bt.first + k) + 1, u2);
  }
}

/* sums[first + k] += the chunk's sum of g^2 (clipping's norm pass). */
__global__ void __launch_bounds__(OPT_THREADS) grad_sumsq_kernel(opt_batch bt, float *sums) {
  int k = opt_find(bt, blockIdx.x);
  const kern_opt_tensor &t = bt.t[k];
  long i0 = (blockIdx.x - bt.block_start[k]) * (long)OPT_CHUNK, i1 = min(i0 + OPT_CHUNK, t.n);
  float g2 = 0.0f;
  for (long i = i0 + threadIdx.x; i < i1; i += blockDim.x) g2 += t.grad[i] * t.grad[i];
  g2 = block_sum(g2);
  if (threadIdx.x == 0) atomicAdd(sums + bt.first + k, g2);
}

/* Fills bt with tensors [first, first + count) and returns the block count. */
static long opt_fill(opt_batch *bt, const kern_opt_tensor *ts, int first, int count) {
  bt->count = count;
  bt->first = first;
  bt->block_start[0] = 0;
  for (int k = 0; k < count; k++) {
    bt->t[k] = ts[first + k];
    bt->block_start[k + 1] = bt->block_start[k] + (ts[first + k].n + OPT_CHUNK - 1) / OPT_CHUNK;
  }
  return bt->block_start[count];
}

template <int MODE>
static int opt_run(const kern_opt_tensor *ts, int count, kern_opt_hparams hp, float *norms,
                   cudaStream_t stream) {
  float bc1 = 1.0f - powf(hp.beta1, (float)hp.step), bc2 = 1.0f - powf(hp.beta2, (float)hp.step);
  for (int first = 0; first < count; first += KERN_OPT_MAX_TENSORS) {
    opt_batch bt;
    int c = count - first < KERN_OPT_MAX_TENSORS ? count - first : KERN_OPT_MAX_TENSORS;
    long blocks = opt_fill(&bt, ts, first, c);
    if (blocks == 0) continue;
    KERN_LAUNCH((unsigned)blocks, OPT_THREADS, 0, stream, opt_kernel<MODE>)(bt, hp, bc1, bc2, norms);
    KERN_LAUNCH_TRY();
  }
  return 0;
}

extern "C" int kern_adamw_cuda(const kern_opt_tensor *ts, int count, kern_opt_hparams hp,
                               cudaStream_t stream) {
  return opt_run<OPT_ADAMW>(ts, count, hp, NULL, stream);
}

extern "C" int kern_grad_sumsq_cuda(const kern_opt_tensor *ts, int count, float *sums, cudaStream_t stream) {
  KERN_CUDA_TRY(cudaMemsetAsync(sums, 0, sizeof(float) * count, stream));
  for (int first = 0; first < count; first += KERN_OPT_MAX_TENSORS) {
    opt_batch bt;
    int c = count - first < KERN_OPT_MAX_TENSORS ? count - first : KERN_OPT_MAX_TENSORS;
    long blocks = opt_fill(&bt, ts, first, c);
    if (blocks == 0) continue;
    KERN_LAUNCH((unsigned)blocks, OPT_THREADS, 0, stream, grad_sumsq_kernel)(bt, sums);
    KERN_LAUNCH_TRY();
  }
  return 0;
}

extern "C" int kern_lamb_norms_cuda(const kern_opt_tensor *ts, int count, kern_opt_hparams hp,
                                    float *norms, cudaStream_t stream) {
  KERN_CUDA_TRY(cudaMemsetAsync(norms, 0, sizeof(float) * 2 * count, stream));
  return opt_run<OPT_LAMB_NORMS>(ts, count, hp, norms, stream);
}

extern "C" int kern_lamb_apply_cuda(const kern_opt_tensor *ts, int count, kern_opt_hparams hp,
                                    const float *norms, cudaStream_t stream) {
  return opt_run<OPT_LAMB_APPLY>(ts, count, hp, (float *)norms, stream);
}

extern "C" int kern_lamb_cuda(const kern_opt_tensor *ts, int count, kern_opt_hparams hp,
                              float *norms, cudaStream_t stream) {
  KERN_TRY(kern_lamb_norms_cuda(ts, count, hp, norms, stream));
  return kern_lamb_apply_cuda(ts, count, hp, norms, stream);
}
