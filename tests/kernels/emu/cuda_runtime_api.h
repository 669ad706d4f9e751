/* tests/kernels/emu/cuda_runtime_api.h: the CUDA runtime API as the
 * emulated build sees it (tests/kernels/cuda_emu.h): the types and the few
 * host calls the kernels' launchers, the GPU tests and the GPU backend
 * (real/rt_gpu.c, calib/bench_gpu.c) make, implemented on host memory with
 * asynchronous streams in cuda_emu_runtime.cc. C and C++. Only this folder's
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
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorIllegalState = 401,
  cudaErrorNotReady = 600,
  cudaErrorNotSupported = 801,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorStreamCaptureUnmatched = 903,
  cudaErrorStreamCaptureUnjoined = 904,
  cudaErrorStreamCaptureIsolation = 905,
  cudaErrorGraphExecUpdateFailure = 910,
} cudaError_t;
typedef enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
} cudaMemcpyKind;
typedef enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 } cudaFuncAttribute;
typedef enum cudaDeviceAttr {
  cudaDevAttrClockRate = 13,
  cudaDevAttrMemoryClockRate = 36,
  cudaDevAttrL2CacheSize = 38,
  cudaDevAttrMemoryPoolsSupported = 115,
} cudaDeviceAttr;
typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
typedef void (*cudaHostFn_t)(void *data);
typedef struct CUgraph_st *cudaGraph_t;
typedef struct CUgraphExec_st *cudaGraphExec_t;
typedef enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2,
} cudaStreamCaptureMode;
typedef enum cudaStreamCaptureStatus {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
  cudaStreamCaptureStatusInvalidated = 2,
} cudaStreamCaptureStatus;
typedef enum cudaGraphExecUpdateResult {
  cudaGraphExecUpdateSuccess = 0,
  cudaGraphExecUpdateError = 1,
  cudaGraphExecUpdateErrorTopologyChanged = 2,
} cudaGraphExecUpdateResult;
typedef struct cudaGraphExecUpdateResultInfo_st {
  cudaGraphExecUpdateResult result;
  void *errorNode, *errorFromNode;
} cudaGraphExecUpdateResultInfo;
#define cudaStreamDefault 0x0
#define cudaStreamNonBlocking 0x1
#define cudaEventDefault 0x0
#define cudaEventBlockingSync 0x1
#define cudaEventDisableTiming 0x2
typedef struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  int major, minor, multiProcessorCount, l2CacheSize, memoryBusWidth;
} cudaDeviceProp;

/* memory: "device" memory is host memory, but the runtime knows which
 * blocks are device allocations (pageable host memory behaves as CUDA's) */
cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocHost(void **p, size_t bytes); /* pinned: copies to and from it run in stream order */
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t stream);
cudaError_t cudaFreeAsync(void *p, cudaStream_t stream);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream);
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t rows,
                              cudaMemcpyKind kind, cudaStream_t stream);
cudaError_t cudaMemset(void *p, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t stream);
/* streams and events */
cudaError_t cudaStreamCreate(cudaStream_t *s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags);
cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *data);
cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventQuery(cudaEvent_t e);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);
/* graphs: a stream's work between cudaStreamBeginCapture and
 * cudaStreamEndCapture is recorded, not run; cudaGraphLaunch runs it in
 * order on a stream as one piece of work. As in CUDA, another stream that
 * waits for an event recorded inside the capture joins it (a fork), its
 * work recorded in the same graph, and the capture ends only when the
 * origin stream has waited for all of that work (a join), else
 * cudaErrorStreamCaptureUnjoined. The graph keeps the issue order, which
 * every event dependency respects, and a launch runs it in that order
 * (forked branches do not run beside each other here). cudaGraphExecUpdate
 * takes a new capture's work (its arguments) into an instantiated graph of
 * as many nodes, else cudaErrorGraphExecUpdateFailure. Refused inside a
 * capture (cudaErrorStreamCaptureUnsupported, the capture invalidated): a
 * wait for an event recorded outside it, and synchronising a capturing
 * stream. */
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus *status);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags);
cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph, cudaGraphExecUpdateResultInfo *info);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
/* the device */
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaDeviceReset(void);
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int device);
cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device);
cudaError_t cudaDeviceGetPCIBusId(char *bus, int len, int device);
cudaError_t cudaRuntimeGetVersion(int *v);
cudaError_t cudaDriverGetVersion(int *v);
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t e);

#ifdef __cplusplus
}
/* Launches check the dynamic shared memory against this: an H100's 227
 * KiB, or CUDA_EMU_MAX_SMEM_KB (99: an sm_86 / sm_89 GPU's opt-in limit,
 * to run the kernels' fallbacks). A refused cudaFuncSetAttribute also sets
 * the last error, as CUDA's does. */
size_t emu_max_dyn_smem(void);
void emu_set_last_error(cudaError_t e);
template <class T> cudaError_t cudaFuncSetAttribute(T *, cudaFuncAttribute, int value) {
  if (value >= 0 && (size_t)value <= emu_max_dyn_smem()) return cudaSuccess;
  emu_set_last_error(cudaErrorInvalidValue);
  return cudaErrorInvalidValue;
}
/* The emulated device (one SM, cudaGetDeviceProperties) runs one block at
 * a time; a block whose dynamic shared memory exceeds the limit, none. */
template <class T>
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, T *, int threads, size_t smem) {
  *n = threads > 0 && threads <= 1024 && smem <= emu_max_dyn_smem() ? 1 : 0;
  return cudaSuccess;
}
#endif
#endif
