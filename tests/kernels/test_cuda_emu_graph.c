/* tests/kernels/test_cuda_emu_graph.c: the emulated CUDA runtime's graphs
 * (emu/cuda_emu_runtime.cc, what `run --enable-cuda-graph` rests on in
 * CI), on one stream and four bytes of device memory: work issued while a
 * stream captures is recorded, not run; a launch runs it in issue order;
 * an update of as many nodes takes the new capture's work, one of another
 * count is refused and leaves the graph as it was; an event record, a
 * wait or a synchronisation on a capturing stream is refused and
 * invalidates the capture; the legacy stream cannot capture, nor can a
 * capturing stream begin again. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>
#include "kern_check.h"

static int failures;

static void expect(const char *what, long got, long want) {
  printf("%s %-66s got %ld, expected %ld\n", got == want ? "ok  " : "FAIL", what, got, want);
  failures += got != want;
}

/* The device's four bytes, read back once everything issued is done. */
static long bytes_of(const unsigned char *dev) {
  unsigned char h[4];
  cudaDeviceSynchronize();
  cudaMemcpy(h, dev, 4, cudaMemcpyDeviceToHost);
  return h[0] | h[1] << 8 | h[2] << 16 | (long)h[3] << 24;
}

/* Captures on s: byte 0 set to v, then byte 1 set to v + 1 (nodes: 2),
 * and a third set (byte 2 to v + 2) when three. */
static cudaGraph_t capture(cudaStream_t s, unsigned char *dev, int v, int three) {
  cudaGraph_t g = NULL;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
  cudaMemsetAsync(dev, v, 1, s);
  cudaMemsetAsync(dev + 1, v + 1, 1, s);
  if (three)
    cudaMemsetAsync(dev + 2, v + 2, 1, s);
  expect("capture: ended", cudaStreamEndCapture(s, &g), cudaSuccess);
  return g;
}

int main(void) {
  cudaStream_t s;
  unsigned char *dev;
  cudaEvent_t e;
  cudaStreamCaptureStatus st;
  cudaGraphExecUpdateResultInfo info;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaEventCreate(&e);
  cudaMalloc((void **)&dev, 4);
  cudaMemset(dev, 0, 4);

  cudaGraph_t g = capture(s, dev, 0x10, 0);
  expect("a capture runs nothing: the bytes before a launch", bytes_of(dev), 0);
  cudaGraphExec_t x = NULL;
  expect("instantiate", cudaGraphInstantiate(&x, g, 0), cudaSuccess);
  cudaGraphDestroy(g);
  expect("launch", cudaGraphLaunch(x, s), cudaSuccess);
  expect("the launch ran both nodes in order", bytes_of(dev), 0x1110);

  g = capture(s, dev, 0x20, 0);
  expect("update with a capture of as many nodes", cudaGraphExecUpdate(x, g, &info), cudaSuccess);
  cudaGraphDestroy(g);
  cudaGraphLaunch(x, s);
  expect("the updated graph runs the new capture's work", bytes_of(dev), 0x2120);

  g = capture(s, dev, 0x30, 1);
  expect("update with a capture of another node count", cudaGraphExecUpdate(x, g, &info),
         cudaErrorGraphExecUpdateFailure);
  expect("  its result", info.result, cudaGraphExecUpdateErrorTopologyChanged);
  cudaGraphDestroy(g);
  cudaMemset(dev, 0, 4);
  cudaGraphLaunch(x, s);
  expect("a refused update leaves the graph as it was", bytes_of(dev), 0x2120);

  cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
  cudaStreamIsCapturing(s, &st);
  expect("a capturing stream says so", st, cudaStreamCaptureStatusActive);
  expect("begin again on a capturing stream", cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed),
         cudaErrorIllegalState);
  expect("an event record on a capturing stream", cudaEventRecord(e, s), cudaErrorStreamCaptureUnsupported);
  expect("a wait on a capturing stream", cudaStreamWaitEvent(s, e, 0), cudaErrorStreamCaptureUnsupported);
  expect("synchronising a capturing stream", cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported);
  cudaStreamIsCapturing(s, &st);
  expect("  the capture is then invalidated", st, cudaStreamCaptureStatusInvalidated);
  g = (cudaGraph_t)1;
  expect("  and its end says so", cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
  expect("  with no graph", g == NULL, 1);
  cudaStreamIsCapturing(s, &st);
  expect("  the stream no longer captures", st, cudaStreamCaptureStatusNone);
  expect("the legacy stream cannot capture", cudaStreamBeginCapture(NULL, cudaStreamCaptureModeRelaxed),
         cudaErrorStreamCaptureUnsupported);

  cudaGraphExecDestroy(x);
  cudaFree(dev);
  cudaEventDestroy(e);
  cudaStreamDestroy(s);
  return kc_finish("test_cuda_emu_graph", failures);
}
