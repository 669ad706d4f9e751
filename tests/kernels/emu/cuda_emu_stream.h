/* tests/kernels/emu/cuda_emu_stream.h: stream order for the emulated build's
 * libraries (cuda_emu_runtime.cc; cuBLASLt and NCCL stand-ins). C++ only. */
#ifndef EMU_CUDA_EMU_STREAM_H
#define EMU_CUDA_EMU_STREAM_H
#include <functional>

#include "cuda_runtime_api.h"

/* Runs fn in the order of stream s: on the caller, at once, for the NULL
 * (legacy default) stream; else on the stream's own worker thread, after
 * everything enqueued on s before it and after the events s was made to
 * wait for. fn must own (capture by value) what it reads from the host. */
void emu_stream_enqueue(cudaStream_t s, std::function<void()> fn);

/* The same for work with a host-side part at issue: at_issue() runs on the
 * host when the work is issued and returns what the stream runs. On a
 * capturing stream it is kept in the graph and called again at each
 * cudaGraphLaunch, so every launch of the graph issues its own (an NCCL
 * call takes its place in its communicator's order there). */
void emu_stream_enqueue_at_issue(cudaStream_t s, std::function<std::function<void()>()> at_issue);

/* A piece of captured work: run as recorded, or (at_issue set) issued anew
 * at each graph launch. */
struct emu_node {
  std::function<void()> run;
  std::function<std::function<void()>()> at_issue;
};

/* Whether p lies in a block of device memory (cudaMalloc, cudaMallocAsync):
 * where a GPU would fault on a host pointer, the stand-ins refuse it. */
bool emu_is_device(const void *p);
#endif
