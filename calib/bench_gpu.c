/* calib/bench_gpu: the GPU device of `megasim calibrate --device gpu`: the
 * CUDA kernels of kernels/ (bf16 activations; cuBLASLt GEMMs, flash
 * attention, fused LayerNorm and bias+GeLU, AdamW) timed with CUDA events,
 * and NCCL collectives through the harness of calib/coll.c, one GPU per
 * rank. Tables, FLOP and byte counts and fits are the CPU's (calib.h), so
 * the profile reads the same.
 *
 * Timing (bg_time): warm-up calls, one timed call to size the samples,
 * then `reps` samples. Before each sample the L2 is flushed by a
 * cudaMemsetAsync of a scratch buffer 5x the device's L2 (not timed;
 * llm.c's and nvbench's cold-cache practice: 250 MiB on an H100's 50 MiB); then two events bracket
 * `inner` back-to-back calls on one stream, inner sized so that a sample
 * lasts >= min_sample_s (one call when a call is that long, so large
 * kernels always start cold; at most HOLD_MAX_CALLS). The stream is held
 * by a host function until the whole sample is enqueued (nvbench's
 * blocking-kernel practice), so the calls run with the host ahead of the
 * GPU, as in a training step: the host's cost per call (cuBLASLt's
 * heuristic query, the launch) is not in the time, and a call shorter than
 * its launch shows the GPU's back-to-back launch gap, which is what
 * kernel_gap_us is (calib/profile.c fits it).
 *
 * Every CUDA, NCCL and launcher error stops the run with file:line (all
 * ranks: MPI_Abort under mpirun).
 *
 * This file holds the process's GPU, device memory, the timer and the
 * device table; each benchmark family has its own file (bench_gpu_gemm.c,
 * bench_gpu_attn.c, bench_gpu_mem.c, bench_gpu_nccl.c), sharing
 * bench_gpu_int.h. */
#include "calib/bench_gpu.h"
#include "calib/bench_gpu_int.h"

#include "kernels/attention.h"
#include "real/rt.h"

#include <math.h>
#include <mpi.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FLUSH_L2S 5                         /* L2 flush: 5x the device's L2 */
#define WORKSPACE_BYTES ((size_t)32 << 20) /* cuBLASLt workspace, as the real backend's */
#define PATTERN_BYTES (1 << 16)            /* random fill: one host pattern, repeated on the device */
#define HOLD_MAX_S 1.0     /* a held stream runs on after this: a slow host never hangs the run */
#define HOLD_MAX_CALLS 128 /* per sample: their launches (<= 4 a call) stay far inside CUDA's launch
                              queue (~1024 entries), which must not fill while the stream is held */

bg_gpu_t bg;

/* ---- errors ---------------------------------------------------------------- */

void bg_die(const char *file, int line, const char *what, const char *msg)
{
    int mpi = 0, done = 0;
    fprintf(stderr, "%s:%d: %s: %s\n", file, line, what, msg);
    MPI_Initialized(&mpi);
    MPI_Finalized(&done);
    if (mpi && !done)
        MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

/* ---- device memory ------------------------------------------------------------ */

void *bg_dalloc(size_t bytes)
{
    void *p = NULL;
    CUDA_CK(cudaMalloc(&p, bytes ? bytes : 16));
    return p;
}

/* Fills `bytes` of device memory with values in [-1, 1) (|x| when nonneg),
 * bf16 or fp32: a 64 KiB host pattern copied once, then doubled on the
 * device; ordered before later work on the compute stream. Random, not
 * constant: a GEMM's power draw, and so its clock, depends on the data. */
void bg_dfill(void *d, size_t bytes, int bf16, int nonneg, unsigned seed)
{
    static unsigned char pat[PATTERN_BYTES];
    size_t n = bf16 ? PATTERN_BYTES / 2 : PATTERN_BYTES / 4;
    float *f = calib_rand_floats(n, seed);
    for (size_t i = 0; i < n; i++) {
        float v = nonneg ? fabsf(f[i]) : f[i];
        kern_bf16 h = kern_float_to_bf16(v);
        if (bf16)
            memcpy(pat + 2 * i, &h, 2);
        else
            memcpy(pat + 4 * i, &v, 4);
    }
    free(f);
    size_t done = bytes < PATTERN_BYTES ? bytes : PATTERN_BYTES;
    CUDA_CK(cudaMemcpy(d, pat, done, cudaMemcpyHostToDevice));
    CUDA_CK(cudaDeviceSynchronize()); /* the legacy stream's copy, before the compute stream reads it */
    while (done < bytes) {
        size_t m = done < bytes - done ? done : bytes - done;
        CUDA_CK(cudaMemcpyAsync((char *)d + done, d, m, cudaMemcpyDeviceToDevice, bg.s));
        done += m;
    }
}

kern_bf16 *bg_dbf16(size_t n, unsigned seed)
{
    kern_bf16 *p = bg_dalloc(2 * n);
    bg_dfill(p, 2 * n, 1, 0, seed);
    return p;
}

/* ---- setup --------------------------------------------------------------------- */

/* 0, or -1 with "file:line: what: error" in err. */
static int init_ok(cudaError_t e, const char *what, int line, char *err, size_t len)
{
    if (e == cudaSuccess)
        return 0;
    snprintf(err, len, "%s:%d: %s: %s", __FILE__, line, what, cudaGetErrorString(e));
    return -1;
}
#define INIT_OK(call) init_ok((call), #call, __LINE__, err, len)

/* This rank's local rank and the ranks on its node (0 and 1 without MPI). */
static void node_rank(int *local, int *nlocal)
{
    int mpi = 0;
    *local = 0, *nlocal = 1;
    MPI_Initialized(&mpi);
    if (!mpi)
        return;
    MPI_Comm node;
    MPI_Comm_rank(MPI_COMM_WORLD, &bg.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &bg.nranks);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, bg.rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, local);
    MPI_Comm_size(node, nlocal);
    MPI_Comm_free(&node);
}

int calib_gpu_init(char *err, size_t len)
{
    char why[256];
    int local, nlocal, l2 = 0;
    memset(&bg, 0, sizeof bg);
    bg.nranks = 1;
    int ndev = rt_gpu_count(why, sizeof why);
    if (!ndev) {
        snprintf(err, len, "--device gpu: no usable GPU (%s)", why);
        return -1;
    }
    node_rank(&local, &nlocal);
    if (nlocal > ndev) {
        snprintf(err, len, "--device gpu: %d ranks on this node share %d GPU(s); NCCL needs one GPU per rank: "
                 "mpirun -np %d (at most) per node", nlocal, ndev, ndev);
        return -1;
    }
    bg.device = local % ndev;
    if (INIT_OK(cudaSetDevice(bg.device)) || INIT_OK(cudaStreamCreateWithFlags(&bg.s, cudaStreamNonBlocking)) ||
        INIT_OK(cudaStreamCreateWithFlags(&bg.s_comm, cudaStreamNonBlocking)) || INIT_OK(cudaEventCreate(&bg.e0)) ||
        INIT_OK(cudaEventCreate(&bg.e1)) || INIT_OK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, bg.device)))
        return -1;
    bg.flush_bytes = FLUSH_L2S * (size_t)(l2 > 0 ? l2 : 50 << 20);
    if (INIT_OK(cudaMalloc(&bg.flush, bg.flush_bytes)))
        return -1;
    if (kern_ctx_init(&bg.kc, WORKSPACE_BYTES)) {
        snprintf(err, len, "cuBLASLt context (32 MiB workspace) on GPU %d failed (see above)", bg.device);
        return -1;
    }
    kern_clock_open(&bg.clk, bg.device); /* without NVML the samples' sm_mhz is 0 */
    bg.ready = 1;
    return 0;
}

void calib_gpu_describe(calib_gpu_info_t *info)
{
    struct cudaDeviceProp prop;
    int khz = 0, mem_khz = 0;
    memset(info, 0, sizeof *info);
    CUDA_CK(cudaGetDeviceProperties(&prop, bg.device));
    snprintf(info->name, sizeof info->name, "%s", prop.name);
    info->cc_major = prop.major, info->cc_minor = prop.minor;
    info->sm_count = prop.multiProcessorCount;
    info->mem_gib = prop.totalGlobalMem / (double)(1 << 30);
    info->l2_mib = prop.l2CacheSize / (double)(1 << 20);
    info->mem_bus_bits = prop.memoryBusWidth;
    CUDA_CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, bg.device));
    CUDA_CK(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, bg.device));
    info->clock_mhz = khz * 1e-3, info->mem_clock_mhz = mem_khz * 1e-3;
    CUDA_CK(cudaGetDeviceCount(&info->devices));
    CUDA_CK(cudaDriverGetVersion(&info->driver_version));
    CUDA_CK(cudaRuntimeGetVersion(&info->runtime_version));
    NCCL_CK(ncclGetVersion(&info->nccl_version));
    info->cublaslt_version = (long)cublasLtGetVersion();
    for (int bwd = 0; bwd < 2; bwd++) /* the profile's attn_slots_q/k; 0 if the query fails */
        if (kern_attention_resident_blocks_cuda(bwd, 128, bwd ? &info->attn_slots_k : &info->attn_slots_q))
            *(bwd ? &info->attn_slots_k : &info->attn_slots_q) = 0;
}

void calib_gpu_free(void)
{
    if (bg.comm)
        ncclCommDestroy(bg.comm);
    if (bg.dsend)
        cudaFree(bg.dsend);
    if (bg.drecv)
        cudaFree(bg.drecv);
    if (bg.flush)
        cudaFree(bg.flush);
    if (bg.e0)
        cudaEventDestroy(bg.e0);
    if (bg.e1)
        cudaEventDestroy(bg.e1);
    if (bg.s)
        cudaStreamDestroy(bg.s);
    if (bg.s_comm)
        cudaStreamDestroy(bg.s_comm);
    if (bg.kc.lt)
        kern_ctx_free(&bg.kc);
    memset(&bg, 0, sizeof bg);
}

/* ---- timing -------------------------------------------------------------------- */

typedef struct {
    atomic_int open, timed_out;
} gate_t;

static gate_t gate;

/* Host function on the stream: holds it until the gate opens (the sample
 * is enqueued) or HOLD_MAX_S passes. Runs on a CUDA runtime thread: no
 * CUDA calls here. */
static void hold(void *p)
{
    gate_t *g = p;
    double t0 = calib_now_s();
    while (!atomic_load(&g->open))
        if (calib_now_s() - t0 > HOLD_MAX_S) {
            atomic_store(&g->timed_out, 1);
            return;
        }
}

static void flush_l2(void) { CUDA_CK(cudaMemsetAsync(bg.flush, (int)(++bg.flushes & 0xff), bg.flush_bytes, bg.s)); }

#define CLOCK_READ_S 5e-4 /* between SM clock reads while a sample runs */

static kern_clock_sums sample_clock; /* bg_time's samples' reads */

/* Waits for event e on the compute stream, reading NVML every CLOCK_READ_S
 * meanwhile into *c, where NVML answers. Between polls the host sleeps
 * CLOCK_POLL_NS rather than spin: a spinning host takes a core from the
 * ranks' other work (NCCL's proxy threads; on the emulated GPU, the GPU
 * itself). The times are the events', so the sleep never enters them. */
#define CLOCK_POLL_NS 50000L
void bg_wait_reading_clock(cudaEvent_t e, kern_clock_sums *c)
{
    double last = 0;
    const struct timespec poll = {0, CLOCK_POLL_NS};
    while (bg.clk.dev && cudaEventQuery(e) == cudaErrorNotReady) {
        double now = calib_now_s();
        if (now - last >= CLOCK_READ_S && kern_clock_add(&bg.clk, c) == 0)
            last = now;
        nanosleep(&poll, NULL);
    }
    CUDA_CK(cudaEventSynchronize(e));
}

/* Seconds from e0 to e1 on the compute stream, once e1 is reached. */
static double elapsed_s(void)
{
    float ms = 0;
    bg_wait_reading_clock(bg.e1, &sample_clock);
    CUDA_CK(cudaEventElapsedTime(&ms, bg.e0, bg.e1));
    return ms * 1e-3;
}

/* `inner` calls after an L2 flush, enqueued behind the gate and timed by
 * events: seconds per call. The previous sample's hold has returned (e1
 * came after it), so the gate can be closed again. */
static double sample_s(bg_call_fn fn, void *ctx, int inner)
{
    flush_l2();
    atomic_store(&gate.open, 0);
    CUDA_CK(cudaLaunchHostFunc(bg.s, hold, &gate));
    CUDA_CK(cudaEventRecord(bg.e0, bg.s));
    for (int i = 0; i < inner; i++)
        KERN_CK(fn(ctx));
    CUDA_CK(cudaEventRecord(bg.e1, bg.s));
    atomic_store(&gate.open, 1);
    return elapsed_s() / inner;
}

calib_stat_t bg_time(bg_call_fn fn, void *ctx, const calib_plan_t *p)
{
    for (int i = 0; i < (p->warmup > 1 ? p->warmup : 1); i++) /* lazy module loading, cuBLASLt's first call */
        KERN_CK(fn(ctx));
    double one = sample_s(fn, ctx, 1);
    int inner = one >= p->min_sample_s ? 1 : (int)fmin(HOLD_MAX_CALLS, ceil(p->min_sample_s / fmax(one, 1e-7)));
    int reps = p->reps > 64 ? 64 : p->reps;
    double v[64];
    sample_clock = (kern_clock_sums){0};
    for (int r = 0; r < reps; r++)
        v[r] = sample_s(fn, ctx, inner);
    if (atomic_exchange(&gate.timed_out, 0))
        fprintf(stderr, "megasim calibrate: warning: the host took over %.0f s to enqueue %d calls; those samples "
                        "ran with the GPU waiting on the host\n", HOLD_MAX_S, inner);
    calib_stat_t st = calib_stats(v, reps, inner);
    double watts, capped;
    kern_clock_means(&sample_clock, &st.sm_mhz, &watts, &capped);
    return st;
}

/* ---- the device ------------------------------------------------------------------ */

const calib_device_t calib_gpu_device = {
    .name = "gpu",
    .gemm_what = "GEMM (kern_matmul_fwd_cuda, kern_gemm_cuda: cuBLASLt, bf16)",
    .attn_what = "attention forward and backward (kern_attention_*_cuda: flash, then unfused)",
    .mem_what = "memory-bound kernels (cudaMemcpyAsync, LayerNorm, bias+GeLU, AdamW, LayerNorm with dropout)",
    .coll_what = "collectives over NCCL",
    .gemm = bg_gemm,
    .attention = bg_attention,
    .memory = bg_memory,
    .collectives = bg_collectives,
    .comm_slowdown = bg_comm_slowdown,
    .flash1_rel = bg_flash1_rel,
    .graph_gap_us = bg_graph_gap_us,
    .attn_dropout = bg_attn_dropout,
    .sustained = bg_sustained,
};
