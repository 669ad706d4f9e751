/* tests/kernels/emu/cuda_runtime_api.h: the CUDA runtime API as the
 * emulated build sees it (tests/kernels/cuda_emu.h): the types and the few
 * host calls the kernels' launchers and the GPU tests make, implemented on
 * host memory in cuda_emu_runtime.cc. C and C++. Only this folder's
 * headers are on the emulated build's include path ahead of the system's,
 * so the kernels and tests compile unchanged. */
#ifndef EMU_CUDA_RUNTIME_API_H
#define EMU_CUDA_RUNTIME_API_H
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
} cudaError_t;
typedef enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
} cudaMemcpyKind;
typedef enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 } cudaFuncAttribute;
typedef struct CUstream_st *cudaStream_t;
typedef struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  int major, minor, multiProcessorCount;
} cudaDeviceProp;

cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemset(void *p, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t stream);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaDeviceReset(void);
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int device);
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t e);

#ifdef __cplusplus
}
/* Launches check the dynamic shared memory against this (H100: 227 KiB). */
constexpr size_t emu_max_dyn_smem = 227 * 1024;
void emu_set_last_error(cudaError_t e);
template <class T> cudaError_t cudaFuncSetAttribute(T *, cudaFuncAttribute, int value) {
  return value >= 0 && (size_t)value <= emu_max_dyn_smem ? cudaSuccess : cudaErrorInvalidValue;
}
#endif
#endif
