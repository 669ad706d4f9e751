/* kernels/embedding.cu: CUDA token + position embedding, whole or one
 * slice [v0, v0 + V) of the vocabulary (embedding.h). Forward: one thread
 * per element. Backward: dwte by fp32 atomics (the slice's rows only),
 * dwpe by a per-(t, c) loop over the batch (deterministic). */
#include "kernels/embedding.h"
#include "kernels/kern_cuda.cuh"

__global__ void embedding_fwd_kernel(bf16 *out, const int *tokens, const bf16 *wte,
                                     const bf16 *wpe, int v0, int V, int B, int T, int C) {
  long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (long)B * T * C) return;
  long bt = idx / C;
  int c = (int)(idx % C), t = (int)(bt % T), r = tokens[bt] - v0;
  float te = r >= 0 && r < V ? ld(wte + (long)r * C + c) : 0.0f;
  st(out + idx, te + (wpe ? ld(wpe + (long)t * C + c) : 0.0f));
}

__global__ void embedding_bwd_wte_kernel(float *dwte, const bf16 *dout, const int *tokens,
                                         int v0, int V, int B, int T, int C) {
  long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (long)B * T * C) return;
  long bt = idx / C;
  int c = (int)(idx % C), r = tokens[bt] - v0;
  if (r >= 0 && r < V) atomicAdd(dwte + (long)r * C + c, ld(dout + idx));
}

__global__ void embedding_bwd_wpe_kernel(float *dwpe, const bf16 *dout, int B, int T, int C) {
  long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (long)T * C) return;
  float s = 0.0f;
  for (int b = 0; b < B; b++) s += ld(dout + (long)b * T * C + idx);
  dwpe[idx] += s;
}

extern "C" int kern_embedding_fwd_cuda(kern_bf16 *out, const int *tokens, const kern_bf16 *wte,
                                       const kern_bf16 *wpe, int v0, int V, int B, int T,
                                       int C, cudaStream_t stream) {
  long n = (long)B * T * C;
  KERN_LAUNCH(kern_cdiv(n, 256), 256, 0, stream, embedding_fwd_kernel)(
      (bf16 *)out, tokens, (const bf16 *)wte, (const bf16 *)wpe, v0, V, B, T, C);
  KERN_LAUNCH_TRY();
  return 0;
}

extern "C" int kern_embedding_bwd_cuda(float *dwte, float *dwpe, const kern_bf16 *dout,
                                       const int *tokens, int v0, int V, int B, int T,
                                       int C, cudaStream_t stream) {
  long n = (long)B * T * C;
  KERN_LAUNCH(kern_cdiv(n, 256), 256, 0, stream, embedding_bwd_wte_kernel)(
      dwte, (const bf16 *)dout, tokens, v0, V, B, T, C);
  KERN_LAUNCH_TRY();
  if (!dwpe) return 0; /* no position table */
  KERN_LAUNCH(kern_cdiv((long)T * C, 256), 256, 0, stream, embedding_bwd_wpe_kernel)(
      dwpe, (const bf16 *)dout, B, T, C);
  KERN_LAUNCH_TRY();
  return 0;
}
