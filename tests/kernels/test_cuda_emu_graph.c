/* tests/kernels/test_cuda_emu_graph.c: the emulated CUDA runtime's graphs
 * (emu/cuda_emu_runtime.cc, what `run --enable-cuda-graph` rests on in
 * CI), on one stream and four bytes of device memory: work issued while a
 * stream captures is recorded, not run; a launch runs it in issue order;
 * an update of as many nodes takes the new capture's work, one of another
 * count is refused and leaves the graph as it was; a second stream joins
 * the capture by waiting for an event recorded in it (CUDA's fork), its
 * work recorded in the same graph in issue order, and the capture ends
 * only once the origin has waited for all of it (the join), else
 * cudaErrorStreamCaptureUnjoined; a wait for an event recorded outside
 * the capture, or a synchronisation, on a capturing stream is refused and
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

/* A fork and join on s and s2: byte 0 on s, byte 1 on s2 after it, byte 2
 * on s after s2's, each set to v + its index; join 0 leaves s2's work
 * unjoined. The end's result. */
static int fork_join(cudaStream_t s, cudaStream_t s2, cudaEvent_t e, cudaEvent_t e2, unsigned char *dev, int v,
                     int join, cudaGraph_t *g) {
  cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
  cudaMemsetAsync(dev, v, 1, s);
  expect("  an event record on the capturing stream (a fork point)", cudaEventRecord(e, s), cudaSuccess);
  expect("  a second stream waits for it: it joins the capture", cudaStreamWaitEvent(s2, e, 0), cudaSuccess);
  cudaStreamCaptureStatus st;
  cudaStreamIsCapturing(s2, &st);
  expect("  the second stream says it captures", st, cudaStreamCaptureStatusActive);
  cudaMemsetAsync(dev + 1, v + 1, 1, s2);
  cudaEventRecord(e2, s2);
  if (join)
    expect("  the origin waits for the second stream's work (the join)", cudaStreamWaitEvent(s, e2, 0), cudaSuccess);
  cudaMemsetAsync(dev + 2, v + 2, 1, s);
  return cudaStreamEndCapture(s, g);
}

int main(void) {
  cudaStream_t s, s2;
  unsigned char *dev;
  cudaEvent_t e, e2;
  cudaStreamCaptureStatus st;
  cudaGraphExecUpdateResultInfo info;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
  cudaEventCreate(&e);
  cudaEventCreate(&e2);
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

  printf("a fork and a join (s, then s2, then s):\n");
  g = NULL;
  expect("  the capture ends", fork_join(s, s2, e, e2, dev, 0x40, 1, &g), cudaSuccess);
  cudaGraphExec_t y = NULL;
  cudaGraphInstantiate(&y, g, 0);
  cudaGraphDestroy(g);
  cudaMemset(dev, 0, 4);
  expect("  a capture runs nothing", bytes_of(dev), 0);
  cudaGraphLaunch(y, s);
  expect("  a launch runs both streams' work", bytes_of(dev), 0x424140);
  cudaGraphExecDestroy(y);
  cudaStreamIsCapturing(s2, &st);
  expect("  the second stream no longer captures", st, cudaStreamCaptureStatusNone);
  printf("the same without the join:\n");
  g = (cudaGraph_t)1;
  expect("  the end", fork_join(s, s2, e, e2, dev, 0x50, 0, &g), cudaErrorStreamCaptureUnjoined);
  expect("  with no graph", g == NULL, 1);
  cudaStreamIsCapturing(s2, &st);
  expect("  neither stream captures then", st, cudaStreamCaptureStatusNone);

  cudaEventRecord(e2, s2); /* outside any capture */
  cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
  cudaStreamIsCapturing(s, &st);
  expect("a capturing stream says so", st, cudaStreamCaptureStatusActive);
  expect("begin again on a capturing stream", cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed),
         cudaErrorIllegalState);
  expect("a capturing stream waits for an event recorded outside it", cudaStreamWaitEvent(s, e2, 0),
         cudaErrorStreamCaptureUnsupported);
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
  cudaEventDestroy(e2);
  cudaStreamDestroy(s);
  cudaStreamDestroy(s2);
  return kc_finish("test_cuda_emu_graph", failures);
}
