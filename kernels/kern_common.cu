/* kernels/kern_common.cu: the kern_ctx lifecycle, the error reporters
 * behind KERN_CUDA_TRY / KERN_LT_TRY, the NVML clock reader, and a stream
 * kept busy for longer (kern_stamp_cuda, kern_stretch_cuda). */
#include <dlfcn.h>
#include <stdio.h>
#ifdef KERN_EMU
#include <chrono>
#endif
#include "kernels/kern_common.h"
#include "kernels/kern_cuda.cuh"

/* The device's nanosecond clock (%globaltimer; the host's steady clock on
 * the emulated GPU). */
__device__ __forceinline__ unsigned long long now_ns() {
#ifdef KERN_EMU
  return (unsigned long long)std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
#else
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#endif
}

/* Lane 0 works (the emulated GPU runs a block's lanes one after another
 * between barriers: 32 spinning lanes would take 32 times as long). */
__global__ void stamp_kernel(unsigned long long *t) {
  if (threadIdx.x == 0) *t = now_ns();
}

__global__ void stretch_kernel(const unsigned long long *t0, double extra) {
  if (threadIdx.x != 0) return;
  unsigned long long now = now_ns(), until = now + (unsigned long long)((double)(now - *t0) * extra);
  while (now_ns() < until) {
  }
}

/* One warp a launch: the emulated GPU's smallest block. */
int kern_stamp_cuda(unsigned long long *t, cudaStream_t stream) {
  KERN_LAUNCH(1, 32, 0, stream, stamp_kernel)(t);
  KERN_LAUNCH_TRY();
  return 0;
}

int kern_stretch_cuda(const unsigned long long *t0, double extra, cudaStream_t stream) {
  if (!(extra > 0)) return 0;
  KERN_LAUNCH(1, 32, 0, stream, stretch_kernel)(t0, extra);
  KERN_LAUNCH_TRY();
  return 0;
}

int kern_report_cuda(int err, const char *what, const char *file, int line) {
  fprintf(stderr, "%s:%d: %s: CUDA error %d: %s\n", file, line, what, err,
          cudaGetErrorString((cudaError_t)err));
  return err ? err : -1;
}

int kern_report_lt(int status, const char *what, const char *file, int line) {
  fprintf(stderr, "%s:%d: %s: cuBLASLt error %d: %s\n", file, line, what, status,
          cublasLtGetStatusString((cublasStatus_t)status));
  return 1000 + status;
}

int kern_ctx_init(kern_ctx *ctx, size_t workspace_bytes) {
  memset(ctx, 0, sizeof *ctx);
  KERN_LT_TRY(cublasLtCreate(&ctx->lt));
  KERN_CUDA_TRY(cudaMalloc(&ctx->workspace, workspace_bytes));
  ctx->workspace_bytes = workspace_bytes;
  return 0;
}

void kern_ctx_free(kern_ctx *ctx) {
  if (ctx->workspace) cudaFree(ctx->workspace);
  if (ctx->lt) cublasLtDestroy(ctx->lt);
  memset(ctx, 0, sizeof *ctx);
}

/* NVML's own names, looked up in the driver's library: its ABI, not its
 * header, which a CUDA toolkit without the driver may lack. The device is
 * found by PCI bus id, so CUDA_VISIBLE_DEVICES cannot pair the wrong one. */
int kern_clock_open(kern_clock *k, int device) {
  memset(k, 0, sizeof *k);
  void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return 0;
  int (*init)(void) = (int (*)(void))dlsym(h, "nvmlInit_v2");
  int (*by_bus)(const char *, void **) = (int (*)(const char *, void **))dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2");
  k->clock = (int (*)(void *, int, unsigned *))dlsym(h, "nvmlDeviceGetClockInfo");
  k->power = (int (*)(void *, unsigned *))dlsym(h, "nvmlDeviceGetPowerUsage");
  k->reasons = (int (*)(void *, unsigned long long *))dlsym(h, "nvmlDeviceGetCurrentClocksEventReasons");
  if (!k->reasons) /* drivers before 535 */
    k->reasons = (int (*)(void *, unsigned long long *))dlsym(h, "nvmlDeviceGetCurrentClocksThrottleReasons");
  char bus[32];
  void *dev = NULL;
  if (!init || !by_bus || !k->clock || !k->power || init() != 0 ||
      cudaDeviceGetPCIBusId(bus, (int)sizeof bus, device) != cudaSuccess || by_bus(bus, &dev) != 0 || !dev) {
    memset(k, 0, sizeof *k);
    return 0;
  }
  k->dev = dev;
  return 1;
}

/* 0 and the SM clock (MHz), power (W) and reason bits (0 where the driver
 * has no such query); non-zero when not available. */
static int kern_clock_read(const kern_clock *k, unsigned *sm_mhz, double *power_w, unsigned long long *reasons) {
  unsigned mhz = 0, mw = 0;
  unsigned long long bits = 0;
  if (!k->dev || k->clock(k->dev, 1 /* NVML_CLOCK_SM */, &mhz) != 0 || k->power(k->dev, &mw) != 0) return -1;
  if (!k->reasons || k->reasons(k->dev, &bits) != 0) bits = 0;
  if (sm_mhz) *sm_mhz = mhz;
  if (power_w) *power_w = mw * 1e-3;
  if (reasons) *reasons = bits;
  return 0;
}

int kern_clock_add(const kern_clock *k, kern_clock_sums *s) {
  unsigned mhz;
  double w;
  unsigned long long bits;
  if (kern_clock_read(k, &mhz, &w, &bits) != 0) return -1;
  s->mhz_sum += mhz, s->watts_sum += w, s->reads++, s->capped += (bits & KERN_CLOCK_POWER_CAP) != 0;
  return 0;
}

