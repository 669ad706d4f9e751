/* tests/kernels/emu/cuda_emu_runtime.cc: the CUDA runtime calls of
 * cuda_runtime_api.h on host memory, for the emulated build: "device"
 * memory is host memory (256-byte aligned), copies are memcpy, streams are
 * ignored (every launch runs to completion when called), one device. */
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cuda_runtime_api.h"

static thread_local cudaError_t last_error = cudaSuccess;

void emu_set_last_error(cudaError_t e) { last_error = e; }

extern "C" {
cudaError_t cudaMalloc(void **p, size_t bytes) {
  *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFree(void *p) {
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind) {
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemset(void *p, int value, size_t bytes) {
  std::memset(p, value, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t) { return cudaMemset(p, value, bytes); }
cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
cudaError_t cudaDeviceReset(void) { return cudaSuccess; }
cudaError_t cudaGetDeviceCount(int *n) {
  *n = 1;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int) {
  std::memset(p, 0, sizeof *p);
  std::snprintf(p->name, sizeof p->name, "CUDA emulated on the CPU (tests/kernels/cuda_emu.h)");
  p->major = 9, p->minor = 0, p->multiProcessorCount = 1, p->totalGlobalMem = (size_t)1 << 32;
  return cudaSuccess;
}
cudaError_t cudaGetLastError(void) {
  cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}
const char *cudaGetErrorString(cudaError_t e) {
  switch (e) {
  case cudaSuccess: return "no error";
  case cudaErrorInvalidValue: return "invalid argument";
  case cudaErrorMemoryAllocation: return "out of memory";
  case cudaErrorInvalidConfiguration: return "invalid configuration argument";
  }
  return "unknown error";
}
}

#include "cuda_emu_stream.h"
void emu_stream_enqueue(cudaStream_t, std::function<void()> fn) { fn(); } /* placeholder: streams come next */
