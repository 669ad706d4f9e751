/* tests/kernels/emu/cuda_emu_runtime.cc: the CUDA runtime calls of
 * cuda_runtime_api.h for the emulated build, one device, on host memory.
 *
 * What CUDA guarantees, and no more, so that code which is only correct by
 * luck on the emulation fails here as it may on a GPU:
 *   - a stream (cudaStreamCreate*) is a worker thread running its work in
 *     issue order, asynchronously to the host: launches, async copies and
 *     memsets, event records and waits, host functions, cuBLASLt and NCCL
 *     calls (cuda_emu_stream.h), after a random wait of up to
 *     $CUDA_EMU_STREAM_JITTER_US each. The NULL stream runs work at once on the
 *     caller (every stream made here is non-blocking, so the legacy
 *     stream's implicit ordering with them does not exist in CUDA either);
 *   - events carry a generation: a wait (cudaStreamWaitEvent) or a
 *     synchronize captures the last record issued before it, as CUDA does;
 *     timing events take std::chrono::steady_clock when their record runs;
 *   - device memory is a registry of host blocks (256-byte aligned), so
 *     copies know pageable host memory: an async copy from it snapshots
 *     the source on the call (it may be reused at once), to it completes
 *     before the call returns; cudaFree waits for the device first;
 *   - errors of calls are returned; launch errors go to cudaGetLastError.
 * Timing and concurrency between kernels are not modelled: one kernel runs
 * at a time (cuda_emu.h). The node has $CUDA_EMU_DEVICES devices (default
 * 8); each process emulates the one it sets. */
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "cuda_emu_stream.h"
#include "cuda_runtime_api.h"

static thread_local cudaError_t last_error = cudaSuccess;

void emu_set_last_error(cudaError_t e) { last_error = e; }

size_t emu_max_dyn_smem(void) {
  static const size_t max = [] {
    const char *kb = getenv("CUDA_EMU_MAX_SMEM_KB");
    long v = kb ? atol(kb) : 0;
    return (size_t)(v > 0 ? v : 227) * 1024;
  }();
  return max;
}

/* ---- streams ------------------------------------------------------------ */

/* A capture (cudaStreamBeginCapture on its origin stream): the work issued
 * on the origin, and on every stream that joined it by waiting for an
 * event recorded in it (CUDA's fork), as one list in issue order, which
 * respects every dependency the events gave (a graph launch runs it in
 * that order). bad once a call inside it was refused. Per stream: the work
 * it captured, and how much of it the origin has waited for (its join
 * back): CUDA ends a capture only when every forked stream has joined. */
struct capture_t {
  CUstream_st *origin = nullptr;
  std::vector<emu_node> nodes;
  bool bad = false, ended = false;
  std::map<CUstream_st *, unsigned long> captured, joined_back;
};

struct CUstream_st {
  std::mutex m;
  std::condition_variable cv;
  std::deque<std::function<void()>> q;
  unsigned long issued = 0, done = 0;
  bool stop = false;
  std::thread worker;
  /* the capture it takes part in (as its origin or joined): its work is
   * recorded there instead of run */
  std::shared_ptr<capture_t> capture;
};

/* Captures' lists and counts change under this lock (a stream's own lock
 * guards only its queue and its capture pointer). */
static std::mutex capture_m;

/* Every live stream, for cudaDeviceSynchronize. Never destroyed: worker
 * threads still waiting at exit must not meet a destructor. */
static std::mutex streams_m;
static std::vector<CUstream_st *> &streams() {
  static auto *v = new std::vector<CUstream_st *>;
  return *v;
}

/* $CUDA_EMU_STREAM_JITTER_US: each stream waits a random 0 to that many
 * microseconds before each piece of work, so streams interleave in ever
 * other orders; a program whose cross-stream ordering is complete (events)
 * gives the same bits whatever the jitter. 0 (default): none. */
static unsigned jitter_us() {
  static const unsigned us = [] {
    const char *e = std::getenv("CUDA_EMU_STREAM_JITTER_US");
    return e ? (unsigned)std::strtoul(e, nullptr, 10) : 0u;
  }();
  return us;
}

static void worker(CUstream_st *s, unsigned seed) {
  std::minstd_rand rng(seed);
  std::unique_lock<std::mutex> lk(s->m);
  for (;;) {
    s->cv.wait(lk, [s] { return s->stop || !s->q.empty(); });
    if (s->q.empty()) return; /* stopped and drained */
    std::function<void()> fn = std::move(s->q.front());
    s->q.pop_front();
    lk.unlock();
    if (jitter_us()) std::this_thread::sleep_for(std::chrono::microseconds(rng() % (jitter_us() + 1)));
    fn();
    lk.lock();
    s->done++;
    s->cv.notify_all();
  }
}

/* Work issued on s: recorded as node when s captures, else queued (the
 * issue half of node made now). */
static void issue(cudaStream_t s, emu_node node) {
  if (!s) {
    (node.at_issue ? node.at_issue() : node.run)();
    return;
  }
  std::lock_guard<std::mutex> lk(s->m);
  if (s->capture) {
    std::lock_guard<std::mutex> ck(capture_m);
    s->capture->nodes.push_back(std::move(node));
    s->capture->captured[s]++;
    return;
  }
  s->q.push_back(node.at_issue ? node.at_issue() : std::move(node.run));
  s->issued++;
  s->cv.notify_all();
}

void emu_stream_enqueue(cudaStream_t s, std::function<void()> fn) { issue(s, emu_node{std::move(fn), nullptr}); }

void emu_stream_enqueue_at_issue(cudaStream_t s, std::function<std::function<void()>()> at_issue) {
  issue(s, emu_node{nullptr, std::move(at_issue)});
}

/* A call refused on a capturing stream (a synchronisation, a wait for an
 * event recorded outside the capture, a graph launch): the capture
 * invalidated (see cuda_runtime_api.h); cudaSuccess when s is not
 * capturing. */
static cudaError_t refused_in_capture(CUstream_st *s) {
  if (!s) return cudaSuccess;
  std::lock_guard<std::mutex> lk(s->m);
  if (!s->capture) return cudaSuccess;
  std::lock_guard<std::mutex> ck(capture_m);
  s->capture->bad = true;
  return cudaErrorStreamCaptureUnsupported;
}

static void stream_sync(CUstream_st *s) {
  std::unique_lock<std::mutex> lk(s->m);
  unsigned long upto = s->issued;
  s->cv.wait(lk, [&] { return s->done >= upto; });
}

/* ---- events ------------------------------------------------------------- */

/* Alive while its handle or a pending record or wait holds it (refs): CUDA
 * lets an event be destroyed with work pending on it. */
struct CUevent_st {
  std::mutex m;
  std::condition_variable cv;
  unsigned flags = 0;
  unsigned long recorded = 0, completed = 0; /* generations */
  std::chrono::steady_clock::time_point at;
  std::atomic<int> refs{1};
  /* recorded last inside a capture (no generation then: a dependency of
   * the graph): the capture, the stream and how much it had captured */
  std::shared_ptr<capture_t> cap;
  CUstream_st *cap_stream = nullptr;
  unsigned long cap_at = 0;
};

static CUevent_st *event_hold(CUevent_st *e) {
  e->refs++;
  return e;
}
static void event_release(CUevent_st *e) {
  if (--e->refs == 0) delete e;
}

static void event_complete(CUevent_st *e, unsigned long gen) {
  std::lock_guard<std::mutex> lk(e->m);
  if (gen > e->completed) e->completed = gen, e->at = std::chrono::steady_clock::now();
  e->cv.notify_all();
}

static void event_wait(CUevent_st *e, unsigned long gen) {
  std::unique_lock<std::mutex> lk(e->m);
  e->cv.wait(lk, [&] { return e->completed >= gen; });
}

/* ---- device and pinned host memory registries ---------------------------- */

static std::mutex mem_m;
static std::map<uintptr_t, size_t> &blocks() {
  static auto *m = new std::map<uintptr_t, size_t>;
  return *m;
}
static std::map<uintptr_t, size_t> &pinned_blocks() {
  static auto *m = new std::map<uintptr_t, size_t>;
  return *m;
}

static bool in_blocks(std::map<uintptr_t, size_t> &b, const void *p) {
  std::lock_guard<std::mutex> lk(mem_m);
  auto it = b.upper_bound((uintptr_t)p);
  if (it == b.begin()) return false;
  --it;
  return (uintptr_t)p < it->first + it->second;
}

bool emu_is_device(const void *p) { return in_blocks(blocks(), p); }

/* Pinned host memory (cudaMallocHost): a copy to or from it on a stream
 * runs in the stream's order and the host does not wait, as on a GPU, so
 * a buffer reused before its copy ran shows it. */
static bool is_pinned(const void *p) { return in_blocks(pinned_blocks(), p); }

static cudaError_t block_alloc(std::map<uintptr_t, size_t> &b, void **p, size_t bytes) {
  if (!p) return cudaErrorInvalidValue;
  size_t n = (bytes + 255) / 256 * 256 + 256;
  *p = std::aligned_alloc(256, n);
  if (!*p) return cudaErrorMemoryAllocation;
  std::lock_guard<std::mutex> lk(mem_m);
  b[(uintptr_t)*p] = n;
  return cudaSuccess;
}

static cudaError_t block_free(std::map<uintptr_t, size_t> &b, void *p) {
  if (!p) return cudaSuccess;
  {
    std::lock_guard<std::mutex> lk(mem_m);
    if (!b.erase((uintptr_t)p)) return cudaErrorInvalidValue;
  }
  std::free(p);
  return cudaSuccess;
}

static cudaError_t dev_alloc(void **p, size_t bytes) { return block_alloc(blocks(), p, bytes); }
static cudaError_t dev_free(void *p) { return block_free(blocks(), p); }

extern "C" {
cudaError_t cudaDeviceSynchronize(void) {
  std::vector<CUstream_st *> all;
  {
    std::lock_guard<std::mutex> lk(streams_m);
    all = streams();
  }
  for (CUstream_st *s : all)
    if (cudaError_t e = refused_in_capture(s)) return e; /* CUDA: no device-wide sync while a stream captures */
  for (CUstream_st *s : all) stream_sync(s);
  return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t bytes) { return dev_alloc(p, bytes); }
cudaError_t cudaMallocHost(void **p, size_t bytes) { return block_alloc(pinned_blocks(), p, bytes); }
cudaError_t cudaFreeHost(void *p) {
  cudaDeviceSynchronize(); /* as CUDA's */
  return block_free(pinned_blocks(), p);
}
cudaError_t cudaFree(void *p) {
  cudaDeviceSynchronize(); /* as CUDA's cudaFree */
  return dev_free(p);
}
cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t) { return dev_alloc(p, bytes); }
cudaError_t cudaFreeAsync(void *p, cudaStream_t s) {
  if (p && !emu_is_device(p)) return cudaErrorInvalidValue;
  emu_stream_enqueue(s, [p] { dev_free(p); });
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind) {
  if (bytes && (!dst || !src)) return cudaErrorInvalidValue;
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

/* Pageable source: snapshot now; pageable destination: done on return.
 * Device or pinned memory: read and written when the stream runs it; a
 * copy to or from pinned memory (over the host link) takes a millisecond
 * first, so that work which does not wait for it runs before it. */
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind, cudaStream_t s) {
  if (!bytes) return cudaSuccess;
  if (!dst || !src) return cudaErrorInvalidValue;
  if (!emu_is_device(src) && !is_pinned(src)) {
    auto copy = std::make_shared<std::vector<unsigned char>>((const unsigned char *)src,
                                                             (const unsigned char *)src + bytes);
    emu_stream_enqueue(s, [dst, copy] { std::memcpy(dst, copy->data(), copy->size()); });
  } else if (is_pinned(src) || is_pinned(dst)) {
    emu_stream_enqueue(s, [dst, src, bytes] {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::memmove(dst, src, bytes);
    });
  } else {
    emu_stream_enqueue(s, [dst, src, bytes] { std::memmove(dst, src, bytes); });
  }
  if (s && !emu_is_device(dst) && !is_pinned(dst)) stream_sync(s);
  return cudaSuccess;
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t rows,
                              cudaMemcpyKind, cudaStream_t s) {
  if (width > dpitch || width > spitch || (rows && width && (!dst || !src))) return cudaErrorInvalidValue;
  if (!emu_is_device(dst) || !emu_is_device(src)) return cudaErrorInvalidValue; /* only device to device is used */
  emu_stream_enqueue(s, [=] {
    for (size_t r = 0; r < rows; r++) std::memmove((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
  });
  return cudaSuccess;
}

cudaError_t cudaMemset(void *p, int value, size_t bytes) {
  if (bytes && !p) return cudaErrorInvalidValue;
  std::memset(p, value, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t s) {
  if (bytes && !p) return cudaErrorInvalidValue;
  emu_stream_enqueue(s, [=] { std::memset(p, value, bytes); });
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *out, unsigned) {
  if (!out) return cudaErrorInvalidValue;
  static std::atomic<unsigned> made{0};
  CUstream_st *s = new CUstream_st;
  s->worker = std::thread(worker, s, 1 + made++);
  std::lock_guard<std::mutex> lk(streams_m);
  streams().push_back(s);
  *out = s;
  return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t *out) { return cudaStreamCreateWithFlags(out, cudaStreamDefault); }

/* CUDA lets work already issued finish; so does this, then the worker ends. */
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  if (!s) return cudaErrorInvalidResourceHandle;
  {
    std::lock_guard<std::mutex> lk(streams_m);
    auto &v = streams();
    auto it = std::find(v.begin(), v.end(), s);
    if (it == v.end()) return cudaErrorInvalidResourceHandle;
    v.erase(it);
  }
  {
    std::lock_guard<std::mutex> lk(s->m);
    s->stop = true;
    s->cv.notify_all();
  }
  s->worker.join();
  delete s;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  if (cudaError_t e = refused_in_capture(s)) return e;
  if (s) stream_sync(s);
  return cudaSuccess;
}

/* A wait for an event recorded inside a capture still open (CUDA's fork
 * and join): s joins the capture, or, capturing it already, gains a
 * dependency its list order holds (the origin's counts as a join back).
 * false where e is not such an event (*err untouched). */
static bool capture_wait(cudaStream_t s, cudaEvent_t e, cudaError_t *err) {
  std::shared_ptr<capture_t> cap;
  CUstream_st *from;
  unsigned long at;
  {
    std::lock_guard<std::mutex> lk(e->m);
    cap = e->cap, from = e->cap_stream, at = e->cap_at;
  }
  if (!s || !cap) return false;
  std::lock_guard<std::mutex> lk(s->m);
  std::lock_guard<std::mutex> ck(capture_m);
  if (cap->ended) return false;
  *err = cudaSuccess;
  if (s->capture && s->capture != cap) { /* CUDA: two captures may not depend on each other */
    s->capture->bad = cap->bad = true;
    *err = cudaErrorStreamCaptureIsolation;
    return true;
  }
  s->capture = cap;
  cap->captured[s]; /* a member from now on, with or without work */
  if (s == cap->origin && from != s) cap->joined_back[from] = std::max(cap->joined_back[from], at);
  return true;
}

/* Waits for the record issued last before this call; none: no wait. */
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned) {
  if (!e) return cudaErrorInvalidResourceHandle;
  cudaError_t fork;
  if (capture_wait(s, e, &fork)) return fork;
  if (cudaError_t err = refused_in_capture(s)) return err;
  unsigned long gen;
  {
    std::lock_guard<std::mutex> lk(e->m);
    gen = e->recorded;
  }
  if (gen) {
    event_hold(e);
    emu_stream_enqueue(s, [e, gen] {
      event_wait(e, gen);
      event_release(e);
    });
  }
  return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *data) {
  if (!fn) return cudaErrorInvalidValue;
  emu_stream_enqueue(s, [fn, data] { fn(data); });
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *out, unsigned flags) {
  if (!out || flags > (cudaEventBlockingSync | cudaEventDisableTiming)) return cudaErrorInvalidValue;
  *out = new CUevent_st;
  (*out)->flags = flags;
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *out) { return cudaEventCreateWithFlags(out, cudaEventDefault); }

/* As in CUDA, destroying an event with work pending is allowed: the event
 * lives until its pending records and waits have run. */
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  if (!e) return cudaErrorInvalidResourceHandle;
  event_release(e);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  if (!e) return cudaErrorInvalidResourceHandle;
  if (s) { /* inside a capture: a point other streams may fork from or join back with */
    std::scoped_lock lk(s->m, e->m);
    if (s->capture) {
      std::lock_guard<std::mutex> ck(capture_m);
      e->cap = s->capture, e->cap_stream = s, e->cap_at = s->capture->captured[s];
      return cudaSuccess;
    }
  }
  unsigned long gen;
  {
    std::lock_guard<std::mutex> lk(e->m);
    gen = ++e->recorded;
    e->cap = nullptr;
  }
  event_hold(e);
  emu_stream_enqueue(s, [e, gen] {
    event_complete(e, gen);
    event_release(e);
  });
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e) {
  if (!e) return cudaErrorInvalidResourceHandle;
  std::lock_guard<std::mutex> lk(e->m);
  return e->completed >= e->recorded ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  if (!e) return cudaErrorInvalidResourceHandle;
  unsigned long gen;
  {
    std::lock_guard<std::mutex> lk(e->m);
    gen = e->recorded;
  }
  event_wait(e, gen);
  return cudaSuccess;
}

/* Both recorded and complete, both timing events: else CUDA's errors. */
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
  if (!ms || !a || !b) return cudaErrorInvalidResourceHandle;
  std::scoped_lock lk(a->m, b->m);
  if ((a->flags | b->flags) & cudaEventDisableTiming || !a->recorded || !b->recorded)
    return cudaErrorInvalidResourceHandle;
  if (a->completed < a->recorded || b->completed < b->recorded) return cudaErrorNotReady;
  *ms = std::chrono::duration<float, std::milli>(b->at - a->at).count();
  return cudaSuccess;
}

cudaError_t cudaDeviceReset(void) { return cudaDeviceSynchronize(); }

/* ---- graphs --------------------------------------------------------------- */

struct CUgraph_st {
  std::vector<emu_node> nodes;
};
/* shared: a launch in flight keeps the nodes it runs when an update
 * replaces them */
struct CUgraphExec_st {
  std::shared_ptr<const std::vector<emu_node>> nodes;
};

cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode) {
  if (!s) return cudaErrorStreamCaptureUnsupported; /* the legacy stream cannot be captured */
  std::lock_guard<std::mutex> lk(s->m);
  if (s->capture) return cudaErrorIllegalState;
  s->capture = std::make_shared<capture_t>();
  s->capture->origin = s;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph) {
  if (!s || !graph) return cudaErrorInvalidValue;
  std::shared_ptr<capture_t> cap;
  {
    std::lock_guard<std::mutex> lk(s->m);
    cap = s->capture;
  }
  *graph = nullptr;
  if (!cap) return cudaErrorIllegalState;
  if (cap->origin != s) return cudaErrorStreamCaptureUnmatched; /* a forked stream cannot end it */
  std::vector<CUstream_st *> members;
  bool unjoined = false;
  {
    std::lock_guard<std::mutex> ck(capture_m);
    cap->ended = true;
    for (auto &[m, n] : cap->captured) {
      members.push_back(m);
      unjoined |= m != s && n > cap->joined_back[m]; /* work the origin never waited for */
    }
  }
  members.push_back(s);
  for (CUstream_st *m : members) {
    std::lock_guard<std::mutex> lk(m->m);
    m->capture = nullptr;
  }
  if (unjoined) return cudaErrorStreamCaptureUnjoined;
  if (cap->bad) return cudaErrorStreamCaptureInvalidated;
  *graph = new CUgraph_st{std::move(cap->nodes)};
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus *status) {
  if (!status) return cudaErrorInvalidValue;
  *status = cudaStreamCaptureStatusNone;
  if (!s) return cudaSuccess;
  std::lock_guard<std::mutex> lk(s->m);
  std::lock_guard<std::mutex> ck(capture_m);
  if (s->capture)
    *status = s->capture->bad ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long) {
  if (!exec || !graph) return cudaErrorInvalidValue;
  *exec = new CUgraphExec_st{std::make_shared<const std::vector<emu_node>>(graph->nodes)};
  return cudaSuccess;
}

cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph, cudaGraphExecUpdateResultInfo *info) {
  if (!exec || !graph) return cudaErrorInvalidValue;
  bool same = exec->nodes->size() == graph->nodes.size();
  if (info) *info = {same ? cudaGraphExecUpdateSuccess : cudaGraphExecUpdateErrorTopologyChanged, nullptr, nullptr};
  if (!same) return cudaErrorGraphExecUpdateFailure;
  exec->nodes = std::make_shared<const std::vector<emu_node>>(graph->nodes);
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
  if (!exec) return cudaErrorInvalidValue;
  if (cudaError_t e = refused_in_capture(s)) return e;
  /* the nodes' issue halves now, on the host, in capture order (an NCCL
   * call takes its turn on its communicator here, as a direct call does) */
  std::vector<std::function<void()>> run;
  for (const emu_node &n : *exec->nodes) run.push_back(n.at_issue ? n.at_issue() : n.run);
  emu_stream_enqueue(s, [run = std::move(run)] {
    for (const auto &f : run) f();
  });
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  if (!graph) return cudaErrorInvalidValue;
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  if (!exec) return cudaErrorInvalidValue;
  delete exec;
  return cudaSuccess;
}
/* The node's devices: $CUDA_EMU_DEVICES, default 8 (an HGX node), so that
 * mpirun can put a rank on each; each process emulates the one it picks. */
static int device_count() {
  const char *env = std::getenv("CUDA_EMU_DEVICES");
  int n = env ? std::atoi(env) : 8;
  return n > 0 ? n : 0;
}
static int current_device = 0;
static bool bad_device(int d) { return d < 0 || d >= device_count(); }

cudaError_t cudaGetDeviceCount(int *n) {
  *n = device_count();
  return *n ? cudaSuccess : cudaErrorNoDevice;
}
cudaError_t cudaSetDevice(int device) {
  if (bad_device(device)) return cudaErrorInvalidDevice;
  current_device = device;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int *device) {
  *device = current_device;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int device) {
  if (bad_device(device)) return cudaErrorInvalidDevice;
  std::memset(p, 0, sizeof *p);
  std::snprintf(p->name, sizeof p->name, "CUDA emulated on the CPU (tests/kernels/cuda_emu.h)");
  p->major = 9, p->minor = 0, p->multiProcessorCount = 1, p->totalGlobalMem = (size_t)1 << 32;
  /* L2: 2 MiB, a CPU core's order (an H100 has 50): what a cache flush
   * sized from it has to evict here */
  p->l2CacheSize = 2 << 20, p->memoryBusWidth = 5120;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device) {
  if (bad_device(device)) return cudaErrorInvalidDevice;
  switch (attr) {
  case cudaDevAttrClockRate: *value = 1980000; return cudaSuccess;       /* kHz, an H100 SXM's boost */
  case cudaDevAttrMemoryClockRate: *value = 2619000; return cudaSuccess; /* kHz */
  case cudaDevAttrMemoryPoolsSupported: *value = 1; return cudaSuccess;
  case cudaDevAttrL2CacheSize: *value = 2 << 20; return cudaSuccess;    /* as cudaGetDeviceProperties says */
  }
  return cudaErrorInvalidValue;
}
/* Emulated device d sits at bus 0x18 + d (CUDA's format): the emulated NVML
 * (tests/real/emu/nvml_emu.c) answers for these ids. */
cudaError_t cudaDeviceGetPCIBusId(char *bus, int len, int device) {
  if (bad_device(device)) return cudaErrorInvalidDevice;
  if (!bus || len < 13) return cudaErrorInvalidValue;
  snprintf(bus, (size_t)len, "0000:%02X:00.0", 0x18 + device);
  return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int *v) {
  *v = 13000;
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int *v) {
  *v = 13000;
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
  case cudaErrorNoDevice: return "no CUDA-capable device is detected";
  case cudaErrorInvalidDevice: return "invalid device ordinal";
  case cudaErrorInvalidResourceHandle: return "invalid resource handle";
  case cudaErrorNotReady: return "device not ready";
  case cudaErrorNotSupported: return "operation not supported";
  case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
  case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
  case cudaErrorStreamCaptureUnmatched: return "capture was not initiated in this stream";
  case cudaErrorStreamCaptureUnjoined: return "capturing stream has unjoined work";
  case cudaErrorStreamCaptureIsolation: return "dependency created on uncaptured work in another stream";
  }
  return "unknown error";
}
}
