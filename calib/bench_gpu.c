/* calib/bench_gpu: the GPU device of `megasim calibrate --device gpu`: the
 * CUDA kernels of kernels/ (bf16 activations; cuBLASLt GEMMs, flash
 * attention, fused LayerNorm and bias+GeLU, AdamW) timed with CUDA events,
 * and NCCL collectives through the harness of calib/coll.c, one GPU per
 * rank. Tables, FLOP and byte counts and fits are the CPU's (calib.h), so
 * the profile reads the same.
 *
 * Timing (gpu_time): warm-up calls, one timed call to size the samples,
 * then `reps` samples. Before each sample the L2 is flushed by a 256 MiB
 * cudaMemsetAsync of a scratch buffer (not timed; llm.c's and nvbench's
 * cold-cache practice: 5x an H100's 50 MiB L2); then two events bracket
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
 * ranks: MPI_Abort under mpirun). */
#include "calib/bench_gpu.h"

#include "kernels/attention.h"
#include "kernels/dropout.h"
#include "kernels/gelu.h"
#include "kernels/layernorm.h"
#include "kernels/matmul.h"
#include "kernels/optimizer.h"
#include "model/workload.h"
#include "real/rt.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <mpi.h>
#include <nccl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FLUSH_BYTES ((size_t)256 << 20)    /* L2 flush: > 5x the 50 MiB L2 of an H100 */
#define WORKSPACE_BYTES ((size_t)32 << 20) /* cuBLASLt workspace, as the real backend's */
#define ROW 2048                           /* LayerNorm / bias+GeLU row: the 1.3B model's hidden size */
#define PATTERN_BYTES (1 << 16)            /* random fill: one host pattern, repeated on the device */
#define HOLD_MAX_S 1.0     /* a held stream runs on after this: a slow host never hangs the run */
#define HOLD_MAX_CALLS 128 /* per sample: their launches (<= 4 a call) stay far inside CUDA's launch
                              queue (~1024 entries), which must not fill while the stream is held */

typedef struct {
    int ready, device, rank, nranks;
    kern_ctx kc;
    cudaStream_t s, s_comm;   /* compute; collectives (both non-blocking) */
    cudaEvent_t e0, e1;       /* sample start and end */
    void *flush;              /* FLUSH_BYTES of scratch */
    unsigned flushes;
    ncclComm_t comm;          /* from the first collective on; NULL with one rank */
    float *dsend, *drecv;     /* NCCL buffers, calib_coll_top_bytes each */
    kern_clock clk;           /* NVML's SM clock (clk.dev NULL: none) */
} gpu_t;

/* NVML reads taken while the GPU ran: sums of clock (MHz) and power (W),
 * how many, how many with the power-cap bit. */
typedef struct {
    double mhz, watts;
    long reads, capped;
} clock_reads_t;

static gpu_t G; /* this process's GPU */

/* ---- errors ---------------------------------------------------------------- */

static void die(const char *file, int line, const char *what, const char *msg)
{
    int mpi = 0, done = 0;
    fprintf(stderr, "%s:%d: %s: %s\n", file, line, what, msg);
    MPI_Initialized(&mpi);
    MPI_Finalized(&done);
    if (mpi && !done)
        MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

#define CUDA_CK(call)                                                                                              \
    do {                                                                                                           \
        cudaError_t e_ = (call);                                                                                   \
        if (e_ != cudaSuccess)                                                                                     \
            die(__FILE__, __LINE__, #call, cudaGetErrorString(e_));                                                \
    } while (0)
#define NCCL_CK(call)                                                                                              \
    do {                                                                                                           \
        ncclResult_t r_ = (call);                                                                                  \
        if (r_ != ncclSuccess)                                                                                     \
            die(__FILE__, __LINE__, #call, ncclGetErrorString(r_));                                                \
    } while (0)
/* The launchers print their own file:line and error before returning != 0. */
#define KERN_CK(call)                                                                                              \
    do {                                                                                                           \
        if ((call) != 0)                                                                                           \
            die(__FILE__, __LINE__, #call, "the launcher failed (its message is above)");                          \
    } while (0)

/* ---- device memory ------------------------------------------------------------ */

static void *dalloc(size_t bytes)
{
    void *p = NULL;
    CUDA_CK(cudaMalloc(&p, bytes ? bytes : 16));
    return p;
}

/* Fills `bytes` of device memory with values in [-1, 1) (|x| when nonneg),
 * bf16 or fp32: a 64 KiB host pattern copied once, then doubled on the
 * device; ordered before later work on the compute stream. Random, not
 * constant: a GEMM's power draw, and so its clock, depends on the data. */
static void dfill(void *d, size_t bytes, int bf16, int nonneg, unsigned seed)
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
        CUDA_CK(cudaMemcpyAsync((char *)d + done, d, m, cudaMemcpyDeviceToDevice, G.s));
        done += m;
    }
}

static kern_bf16 *dbf16(size_t n, unsigned seed)
{
    kern_bf16 *p = dalloc(2 * n);
    dfill(p, 2 * n, 1, 0, seed);
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
    MPI_Comm_rank(MPI_COMM_WORLD, &G.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &G.nranks);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, G.rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, local);
    MPI_Comm_size(node, nlocal);
    MPI_Comm_free(&node);
}

int calib_gpu_init(char *err, size_t len)
{
    char why[256];
    int local, nlocal;
    memset(&G, 0, sizeof G);
    G.nranks = 1;
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
    G.device = local % ndev;
    if (INIT_OK(cudaSetDevice(G.device)) || INIT_OK(cudaStreamCreateWithFlags(&G.s, cudaStreamNonBlocking)) ||
        INIT_OK(cudaStreamCreateWithFlags(&G.s_comm, cudaStreamNonBlocking)) || INIT_OK(cudaEventCreate(&G.e0)) ||
        INIT_OK(cudaEventCreate(&G.e1)) || INIT_OK(cudaMalloc(&G.flush, FLUSH_BYTES)))
        return -1;
    if (kern_ctx_init(&G.kc, WORKSPACE_BYTES)) {
        snprintf(err, len, "cuBLASLt context (32 MiB workspace) on GPU %d failed (see above)", G.device);
        return -1;
    }
    kern_clock_open(&G.clk, G.device); /* without NVML the samples' sm_mhz is 0 */
    G.ready = 1;
    return 0;
}

void calib_gpu_describe(calib_gpu_info_t *info)
{
    struct cudaDeviceProp prop;
    int khz = 0, mem_khz = 0;
    memset(info, 0, sizeof *info);
    CUDA_CK(cudaGetDeviceProperties(&prop, G.device));
    snprintf(info->name, sizeof info->name, "%s", prop.name);
    info->cc_major = prop.major, info->cc_minor = prop.minor;
    info->sm_count = prop.multiProcessorCount;
    info->mem_gib = prop.totalGlobalMem / (double)(1 << 30);
    info->l2_mib = prop.l2CacheSize / (double)(1 << 20);
    info->mem_bus_bits = prop.memoryBusWidth;
    CUDA_CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, G.device));
    CUDA_CK(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, G.device));
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
    if (G.comm)
        ncclCommDestroy(G.comm);
    if (G.dsend)
        cudaFree(G.dsend);
    if (G.drecv)
        cudaFree(G.drecv);
    if (G.flush)
        cudaFree(G.flush);
    if (G.e0)
        cudaEventDestroy(G.e0);
    if (G.e1)
        cudaEventDestroy(G.e1);
    if (G.s)
        cudaStreamDestroy(G.s);
    if (G.s_comm)
        cudaStreamDestroy(G.s_comm);
    if (G.kc.lt)
        kern_ctx_free(&G.kc);
    memset(&G, 0, sizeof G);
}

/* ---- timing -------------------------------------------------------------------- */

/* One call on G.s; 0 or the launcher's non-zero code. */
typedef int (*gpu_call_fn)(void *ctx);

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

static void flush_l2(void) { CUDA_CK(cudaMemsetAsync(G.flush, (int)(++G.flushes & 0xff), FLUSH_BYTES, G.s)); }

#define CLOCK_READ_S 5e-4 /* between SM clock reads while a sample runs */

static clock_reads_t sample_clock; /* gpu_time's samples' reads */

/* Waits for event e on the compute stream, reading NVML every CLOCK_READ_S
 * meanwhile into *c, where NVML answers. */
static void wait_reading_clock(cudaEvent_t e, clock_reads_t *c)
{
    double last = 0;
    while (G.clk.dev && cudaEventQuery(e) == cudaErrorNotReady) {
        double now = calib_now_s(), w;
        unsigned mhz;
        unsigned long long bits;
        if (now - last >= CLOCK_READ_S && kern_clock_read(&G.clk, &mhz, &w, &bits) == 0)
            c->mhz += mhz, c->watts += w, c->reads++, c->capped += (bits & KERN_CLOCK_POWER_CAP) != 0, last = now;
    }
    CUDA_CK(cudaEventSynchronize(e));
}

/* Seconds from e0 to e1 on the compute stream, once e1 is reached. */
static double elapsed_s(void)
{
    float ms = 0;
    wait_reading_clock(G.e1, &sample_clock);
    CUDA_CK(cudaEventElapsedTime(&ms, G.e0, G.e1));
    return ms * 1e-3;
}

/* `inner` calls after an L2 flush, enqueued behind the gate and timed by
 * events: seconds per call. The previous sample's hold has returned (e1
 * came after it), so the gate can be closed again. */
static double sample_s(gpu_call_fn fn, void *ctx, int inner)
{
    flush_l2();
    atomic_store(&gate.open, 0);
    CUDA_CK(cudaLaunchHostFunc(G.s, hold, &gate));
    CUDA_CK(cudaEventRecord(G.e0, G.s));
    for (int i = 0; i < inner; i++)
        KERN_CK(fn(ctx));
    CUDA_CK(cudaEventRecord(G.e1, G.s));
    atomic_store(&gate.open, 1);
    return elapsed_s() / inner;
}

static calib_stat_t gpu_time(gpu_call_fn fn, void *ctx, const calib_plan_t *p)
{
    for (int i = 0; i < (p->warmup > 1 ? p->warmup : 1); i++) /* lazy module loading, cuBLASLt's first call */
        KERN_CK(fn(ctx));
    double one = sample_s(fn, ctx, 1);
    int inner = one >= p->min_sample_s ? 1 : (int)fmin(HOLD_MAX_CALLS, ceil(p->min_sample_s / fmax(one, 1e-7)));
    int reps = p->reps > 64 ? 64 : p->reps;
    double v[64];
    sample_clock = (clock_reads_t){0};
    for (int r = 0; r < reps; r++)
        v[r] = sample_s(fn, ctx, inner);
    if (atomic_exchange(&gate.timed_out, 0))
        fprintf(stderr, "megasim calibrate: warning: the host took over %.0f s to enqueue %d calls; those samples "
                        "ran with the GPU waiting on the host\n", HOLD_MAX_S, inner);
    calib_stat_t st = calib_stats(v, reps, inner);
    st.sm_mhz = sample_clock.reads ? sample_clock.mhz / sample_clock.reads : 0.0;
    return st;
}

/* ---- GEMM ------------------------------------------------------------------------ */

/* One linear layer out (N, OC) = inp (N, C) @ weight (OC, C)^T and its
 * backward, as the real backend issues them (kernels/matmul.h). */
typedef struct {
    kern_bf16 *x, *w, *y, *dx; /* inp (N, C), weight (OC, C), out = dout (N, OC), dinp (N, C) */
    float *dw;                 /* dweight (OC, C), fp32 */
    int N, C, OC, pass;        /* pass: 0 forward, 1 dinp, 2 dweight */
    kern_gemm_desc g;          /* passes 1 and 2 */
} gemm_ctx_t;

/* Pass 0 is kern_matmul_fwd_cuda without bias; passes 1 and 2 the two
 * GEMMs of kern_matmul_bwd_cuda, timed apart with its descriptors:
 * dinp = dout (N, OC) @ weight (OC, C); dweight += dout^T @ inp (fp32). */
static int gemm_call(void *p)
{
    gemm_ctx_t *c = p;
    if (c->pass == 0)
        return kern_matmul_fwd_cuda(&G.kc, c->y, NULL, c->x, c->w, NULL, c->N, c->C, c->OC, G.s);
    if (c->pass == 1)
        return kern_gemm_cuda(&G.kc, c->dx, c->y, c->w, &c->g, G.s);
    return kern_gemm_cuda(&G.kc, c->dw, c->y, c->x, &c->g, G.s);
}

static void gemm_alloc(gemm_ctx_t *c, int N, int C, int OC, int backward)
{
    memset(c, 0, sizeof *c);
    c->N = N, c->C = C, c->OC = OC;
    c->x = dbf16((size_t)N * C, 1), c->w = dbf16((size_t)OC * C, 2), c->y = dbf16((size_t)N * OC, 3);
    if (backward) {
        c->dx = dalloc((size_t)N * C * 2);
        c->dw = dalloc((size_t)OC * C * 4);
        CUDA_CK(cudaMemsetAsync(c->dw, 0, (size_t)OC * C * 4, G.s));
    }
}

static void gemm_release(gemm_ctx_t *c)
{
    void *bufs[] = {c->x, c->w, c->y, c->dx, c->dw};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i])
            CUDA_CK(cudaFree(bufs[i]));
}

/* The three GEMMs of one linear layer (rows: pass 0, 1, 2). */
static void linear_point(const calib_plan_t *p, calib_table_t *t, int N, int C, int OC, int tp, int h)
{
    gemm_ctx_t c;
    gemm_alloc(&c, N, C, OC, 1);
    for (c.pass = 0; c.pass < 3; c.pass++) {
        if (c.pass > 0)
            c.g = kern_linear_bwd_desc(N, C, OC, c.pass == 1 ? KERN_BWD_DINP : KERN_BWD_DWEIGHT);
        calib_stat_t s = gpu_time(gemm_call, &c, p);
        int m, n, k;
        calib_linear_dims(N, C, OC, c.pass, &m, &n, &k);
        calib_gemm_row(t, m, n, k, &s, tp, c.pass, h);
    }
    gemm_release(&c);
}

/* s^3, c = a @ b^T (the forward's layout, the CPU grid's too). */
static void square_point(const calib_plan_t *p, calib_table_t *t, int s)
{
    gemm_ctx_t c;
    gemm_alloc(&c, s, s, s, 0);
    calib_stat_t st = gpu_time(gemm_call, &c, p);
    calib_gemm_row(t, s, s, s, &st, 0, 0, 0);
    gemm_release(&c);
}

/* A GPT block's GEMMs under tensor parallelism tp (Megatron-LM's column /
 * row split): QKV (h -> 3h/tp), attention projection (h/tp -> h), MLP up
 * (h -> 4h/tp), MLP down (4h/tp -> h), each forward and both backward
 * GEMMs, over tokens = sequence 2048 x micro-batch 1. Models: 1.3B (h 2048)
 * at TP 1, 2, 4, 8 and 175B (h 12288) at TP 8; --quick: 1.3B at TP 1, 2 and
 * 175B at TP 8; --tiny: h 512 at TP 1, 2 over 256 tokens. Then the job
 * named on the command line, if any (calib_job_layers), and squares on a
 * log grid, 128 to 16384 (8192 --quick, 1024 --tiny). */
static void gpu_gemm(const calib_plan_t *p, calib_table_t *t)
{
    static const int full[][2] = {{2048, 1}, {2048, 2}, {2048, 4}, {2048, 8}, {12288, 8}};
    static const int quick[][2] = {{2048, 1}, {2048, 2}, {12288, 8}};
    static const int tiny[][2] = {{512, 1}, {512, 2}};
    const int(*cfg)[2] = p->level == CALIB_FULL ? full : p->level == CALIB_QUICK ? quick : tiny;
    int ncfg = p->level == CALIB_FULL ? 5 : p->level == CALIB_QUICK ? 3 : 2;
    int tokens = p->level == CALIB_TINY ? 256 : 2048;
    int top = p->level == CALIB_FULL ? 16384 : p->level == CALIB_QUICK ? 8192 : 1024;
    calib_gemm_table(t);
    for (int i = 0; i < ncfg; i++) {
        int h = cfg[i][0], tp = cfg[i][1];
        linear_point(p, t, tokens, h, 3 * h / tp, tp, h);
        linear_point(p, t, tokens, h / tp, h, tp, h);
        linear_point(p, t, tokens, h, 4 * h / tp, tp, h);
        linear_point(p, t, tokens, 4 * h / tp, h, tp, h);
    }
    calib_job_layers(p, t, linear_point);
    for (int s = 128; s <= top; s *= 2)
        square_point(p, t, s);
}

/* The sustained run: the 175B/TP8 MLP-up forward GEMM (2048 x 6144 over
 * 12288, 0.31 TFLOP) back to back with no flush and no gap for
 * SUSTAINED_S (--quick a third, --tiny 256^3 for a tenth), in windows of
 * SUSTAINED_WINDOW calls kept two deep in the queue, so the GPU never
 * waits; per window one row: end time, mean SM clock, power, share of
 * reads at the power cap, TFLOP/s. Without NVML the clock columns are 0. */
#define SUSTAINED_S 1.0
#define SUSTAINED_WINDOW 32

static void gpu_sustained(const calib_plan_t *p, calib_table_t *t)
{
    int tiny = p->level == CALIB_TINY;
    int N = tiny ? 256 : 2048, C = tiny ? 256 : 12288, OC = tiny ? 256 : 6144;
    double span = p->level == CALIB_FULL ? SUSTAINED_S : p->level == CALIB_QUICK ? SUSTAINED_S / 3 : SUSTAINED_S / 10;
    gemm_ctx_t c;
    gemm_alloc(&c, N, C, OC, 0);
    cudaEvent_t start, ring[3]; /* window k ends at ring[k % 3]; read one window behind the queue's end */
    CUDA_CK(cudaEventCreate(&start));
    for (int i = 0; i < 3; i++)
        CUDA_CK(cudaEventCreate(&ring[i]));
    KERN_CK(gemm_call(&c)); /* cuBLASLt's first call */
    CUDA_CK(cudaStreamSynchronize(G.s));
    double flops = 2.0 * N * C * OC * SUSTAINED_WINDOW, t0 = calib_now_s();
    CUDA_CK(cudaEventRecord(start, G.s));
    for (int w = 0; calib_now_s() - t0 < span || w < 2; w++) {
        for (int i = 0; i < SUSTAINED_WINDOW; i++)
            KERN_CK(gemm_call(&c));
        CUDA_CK(cudaEventRecord(ring[w % 3], G.s));
        if (w == 0)
            continue;
        cudaEvent_t from = w == 1 ? start : ring[(w - 2) % 3], to = ring[(w - 1) % 3];
        clock_reads_t c = {0};
        float ms = 0;
        wait_reading_clock(to, &c);
        CUDA_CK(cudaEventElapsedTime(&ms, from, to));
        double r = c.reads ? (double)c.reads : 1.0;
        calib_sustained_row(t, calib_now_s() - t0, c.mhz / r, c.watts / r, c.capped / r, flops / (ms * 1e-3) * 1e-12);
    }
    CUDA_CK(cudaStreamSynchronize(G.s));
    CUDA_CK(cudaEventDestroy(start));
    for (int i = 0; i < 3; i++)
        CUDA_CK(cudaEventDestroy(ring[i]));
    gemm_release(&c);
}

/* ---- attention ------------------------------------------------------------------- */

typedef struct {
    kern_bf16 *q, *k, *v, *out, *dout, *dq, *dk, *dv; /* (B, T, NH|NKV, HS) */
    float *lse, *scratch;                             /* (B, NH, T); the backward's */
    kern_attn_shape s;
    kern_bf16 *att, *datt; /* unfused: probabilities and their gradient (B, NH, T, T) */
    float *scores;         /* unfused: fp32 scores, the backward's scratch too (B, NH, T, T) */
} attn_ctx_t;

static int attn_fwd_call(void *p)
{
    attn_ctx_t *a = p;
    return kern_attention_fwd_cuda(a->out, a->lse, a->q, a->k, a->v, a->s, G.s);
}

static int attn_bwd_call(void *p)
{
    attn_ctx_t *a = p;
    return kern_attention_bwd_cuda(a->dq, a->dk, a->dv, a->scratch, a->dout, a->q, a->k, a->v, a->out, a->lse, a->s,
                                   G.s);
}

/* FlashAttention-1's forward then backward, same buffers (scratch sized for
 * both kinds). */
static int attn_v1_call(void *p)
{
    attn_ctx_t *a = p;
    int rc = kern_attention_fwd_v1_cuda(a->out, a->lse, a->scratch, a->q, a->k, a->v, a->s, G.s);
    return rc ? rc
              : kern_attention_bwd_v1_cuda(a->dq, a->dk, a->dv, a->scratch, a->dout, a->q, a->k, a->v, a->out,
                                           a->lse, a->s, G.s);
}

static int attn_v2_call(void *p)
{
    int rc = attn_fwd_call(p);
    return rc ? rc : attn_bwd_call(p);
}

static int unfused_fwd_call(void *p)
{
    attn_ctx_t *a = p;
    return kern_attention_unfused_fwd_cuda(&G.kc, a->out, a->att, a->scores, a->q, a->k, a->v, a->s, G.s);
}

static int unfused_bwd_call(void *p)
{
    attn_ctx_t *a = p;
    return kern_attention_unfused_bwd_cuda(&G.kc, a->dq, a->dk, a->dv, a->datt, a->scores, a->dout, a->q, a->k, a->v,
                                           a->att, a->s, G.s);
}

/* The unfused kernels (cuBLASLt GEMMs, masked softmax) forward then
 * backward at one shape, batch 1: rows of the attention_unfused table,
 * raw samples only (calib.h: the model prices unfused attention from
 * gemm_eff and the memory-bound rates; no profile field to feed). */
static void unfused_point(const calib_plan_t *p, calib_table_t *t, int T, int NH, int HS)
{
    kern_attn_shape s = {1, T, NH, NH, HS, 0, KERN_NO_DROPOUT};
    size_t nq = (size_t)T * NH * HS, nsq = (size_t)NH * T * T;
    attn_ctx_t a = {.q = dbf16(nq, 1), .k = dbf16(nq, 2), .v = dbf16(nq, 3), .out = dalloc(2 * nq),
                    .dout = dbf16(nq, 4), .dq = dalloc(2 * nq), .dk = dalloc(2 * nq), .dv = dalloc(2 * nq),
                    .s = s, .att = dalloc(2 * nsq), .datt = dalloc(2 * nsq), .scores = dalloc(4 * nsq)};
    for (int bwd = 0; bwd <= 1; bwd++) {
        calib_stat_t st = gpu_time(bwd ? unfused_bwd_call : unfused_fwd_call, &a, p);
        calib_attn_unfused_row(t, bwd, s.B, T, NH, NH, HS, 0, &st);
    }
    void *bufs[] = {a.q, a.k, a.v, a.out, a.dout, a.dq, a.dk, a.dv, a.att, a.datt, a.scores};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        CUDA_CK(cudaFree(bufs[i]));
}

/* Forward then backward (which reads the forward's out and lse). */
static void attn_point(const calib_plan_t *p, calib_table_t *t, int T, int NH, int NKV, int HS, int window)
{
    kern_attn_shape s = {1, T, NH, NKV, HS, window, KERN_NO_DROPOUT};
    size_t nq = (size_t)T * NH * HS, nkv = (size_t)T * NKV * HS;
    attn_ctx_t a = {.q = dbf16(nq, 1), .k = dbf16(nkv, 2), .v = dbf16(nkv, 3), .out = dalloc(2 * nq),
                    .dout = dbf16(nq, 4), .dq = dalloc(2 * nq), .dk = dalloc(2 * nkv), .dv = dalloc(2 * nkv),
                    .lse = dalloc(sizeof(float) * NH * T), .scratch = dalloc(kern_attention_bwd_scratch_bytes(s)),
                    .s = s};
    for (int bwd = 0; bwd <= 1; bwd++) {
        calib_stat_t st = gpu_time(bwd ? attn_bwd_call : attn_fwd_call, &a, p);
        calib_attn_row(t, bwd, s.B, T, NH, NKV, HS, window, &st);
    }
    void *bufs[] = {a.q, a.k, a.v, a.out, a.dout, a.dq, a.dk, a.dv, a.lse, a.scratch};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        CUDA_CK(cudaFree(bufs[i]));
}

/* Flash attention, micro-batch 1: sequence lengths 256 to 16384 (4096
 * --quick) at the 1.3B model's 16 heads of 128; then at its sequence (2048):
 * 4, 12 (the 175B model's per rank at TP 8) and 64 heads, which fill the
 * grid differently at the same sequence and so tell the attention blocks'
 * wave loss (calib_fit_attn_waves) from the curve, heads of 64 (32 of them, the
 * same width), GQA (4 query heads per KV head); and a sliding window of a
 * quarter of a 4096 sequence. --tiny: 4 heads of 64, sequences 128 to 512,
 * the same special cases at 256. The unfused kernels over the same
 * sequences up to 4096 (their fp32 scores and bf16 probabilities and
 * gradient take 8 x heads x T^2 bytes: 2 GiB at 16 heads of 4096). */
static void gpu_attention(const calib_plan_t *p, calib_table_t *t, calib_table_t *unfused)
{
    int tiny = p->level == CALIB_TINY;
    int nh = tiny ? 4 : 16, hs = tiny ? 64 : 128, seq = tiny ? 256 : 2048;
    int top = p->level == CALIB_FULL ? 16384 : p->level == CALIB_QUICK ? 4096 : 512;
    calib_attn_table(t);
    for (int T = tiny ? 128 : 256; T <= top; T *= 2)
        attn_point(p, t, T, nh, nh, hs, 0);
    static const int heads[] = {4, 12, 64};
    for (int i = 0; !tiny && i < 3; i++)
        attn_point(p, t, seq, heads[i], heads[i], 128, 0);
    attn_point(p, t, seq, 2 * nh, 2 * nh, hs / 2, 0);
    attn_point(p, t, seq, nh, nh / 4, hs, 0);
    attn_point(p, t, 2 * seq, nh, nh, hs, seq / 2);
    calib_attn_unfused_table(unfused);
    for (int T = tiny ? 128 : 256; T <= (top < 4096 ? top : 4096); T *= 2)
        unfused_point(p, unfused, T, nh, hs);
}

/* ---- memory-bound kernels ------------------------------------------------------- */

/* Buffer i of a kernel's call over n elements: count of (0) n elements,
 * (1) rows, (2) one row's; bytes per element; fill (0 none, 1 bf16, 2
 * fp32, 3 |fp32|). Zero entries: no buffer. */
typedef struct {
    int of, elem_bytes, fill;
} mem_buf_t;

/* The kinds timed on a GPU: all but dropout_fwd (kind 4), whose Philox
 * work can hold it below the bandwidth that mem_eff takes from the
 * others; the dropout's draws are timed inside the fused LayerNorm instead
 * (kind 5, against kind 1: the profile's dropout_gdraws). mem_eff is
 * fitted over kinds 1 to 3 (the copy gives hbm_gbps). */
static const mem_buf_t mem_bufs[CALIB_MEM_KINDS][9] = {
    {{0, 2, 0}, {0, 2, 1}},                     /* copy: dst, src */
    {{0, 2, 0}, {0, 2, 0}, {1, 4, 0}, {1, 4, 0}, /* LayerNorm: residual, out, mean, rstd, */
     {0, 2, 1}, {0, 2, 1}, {2, 2, 1}, {2, 2, 1}}, /* inp, skip, w, b */
    {{0, 2, 0}, {0, 2, 1}, {2, 2, 1}},          /* bias+GeLU: out, inp, bias */
    {{0, 4, 2}, {0, 4, 2}, {0, 4, 2}, {0, 4, 3}}, /* AdamW: param, grad, m, v >= 0 */
    {{0}},                                        /* dropout_fwd: not timed */
    {{0, 2, 0}, {0, 2, 0}, {1, 4, 0}, {1, 4, 0}, /* LayerNorm with dropout: LayerNorm's, */
     {0, 2, 1}, {0, 2, 1}, {2, 2, 1}, {2, 2, 1}, {0, 1, 0}}, /* and the 1-byte mask */
};

typedef struct {
    int kind;
    long n; /* elements; rows x ROW for LayerNorm and bias+GeLU */
    void *x[9];
} mem_ctx_t;

static int mem_call(void *p)
{
    mem_ctx_t *m = p;
    void **x = m->x;
    int rows = (int)(m->n / ROW);
    switch (m->kind) {
    case 0: {
        cudaError_t e = cudaMemcpyAsync(x[0], x[1], 2 * (size_t)m->n, cudaMemcpyDeviceToDevice, G.s);
        return e == cudaSuccess ? 0 : kern_report_cuda((int)e, "cudaMemcpyAsync", __FILE__, __LINE__);
    }
    case 1:
        return kern_layernorm_fwd_cuda(x[0], x[1], x[2], x[3], x[4], x[5], NULL, NULL, x[6], x[7], rows, ROW, G.s);
    case 2:
        return kern_bias_gelu_fwd_cuda(x[0], x[1], x[2], rows, ROW, G.s);
    case 5: { /* Megatron's bias-dropout-add on skip before the norm, as `run` fuses it */
        kern_dropout d = kern_dropout_make(0.1f, 1, kern_dropout_site(0, KERN_DROP_AFTER_ATTN), 0);
        return kern_layernorm_fwd_cuda(x[0], x[1], x[2], x[3], x[4], x[5], &d, x[8], x[6], x[7], rows, ROW, G.s);
    }
    default: {
        kern_opt_tensor ts = {x[0], x[1], x[2], x[3], NULL, m->n};
        return kern_adamw_cuda(&ts, 1, (kern_opt_hparams){1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, 1.0f}, G.s);
    }
    }
}

static void mem_point(const calib_plan_t *p, calib_table_t *t, int kind, double target_bytes)
{
    /* LayerNorm with dropout over LayerNorm's elements at the same size, so that the two pair up */
    long n = (long)(target_bytes / calib_mem_bytes(kind == 5 ? 1 : kind, 1, 2, ROW));
    if (kind == 1 || kind == 2 || kind == 5)
        n = (n / ROW > 0 ? n / ROW : 1) * ROW;
    mem_ctx_t m = {kind, n, {0}};
    for (int i = 0; i < 9; i++) {
        const mem_buf_t *b = &mem_bufs[kind][i];
        size_t count = b->of == 0 ? (size_t)n : b->of == 1 ? (size_t)(n / ROW) : ROW, bytes = count * b->elem_bytes;
        if (!b->elem_bytes)
            continue;
        m.x[i] = dalloc(bytes);
        if (b->fill)
            dfill(m.x[i], bytes, b->fill == 1, b->fill == 3, 11 + i);
    }
    calib_stat_t s = gpu_time(mem_call, &m, p);
    calib_mem_row(t, kind, calib_mem_bytes(kind, n, 2, ROW), (double)n, &s);
    for (int i = 0; i < 9; i++)
        if (m.x[i])
            CUDA_CK(cudaFree(m.x[i]));
}

/* Bytes moved from 4 KiB by x2 to 1 GiB (256 MiB --quick, 8 MiB --tiny),
 * bf16 activations, fp32 optimizer state; rows of ROW. */
static void gpu_memory(const calib_plan_t *p, calib_table_t *t)
{
    double top = p->level == CALIB_FULL ? 1 << 30 : p->level == CALIB_QUICK ? 1 << 28 : 1 << 23;
    calib_mem_table(t);
    for (int kind = 0; kind < CALIB_MEM_KINDS; kind++)
        for (double b = 1 << 12; kind != 4 && b <= top; b *= 2)
            if (b >= calib_mem_bytes(kind == 5 ? 1 : kind, kind == 1 || kind == 2 || kind == 5 ? ROW : 1, 2, ROW))
                mem_point(p, t, kind, b);
}

/* ---- collectives over NCCL ------------------------------------------------------ */

/* One call of collective `coll` on G.dsend / G.drecv (fp32, sum) on the
 * collective stream, as nccl-tests issues it; all-to-all and send/recv
 * are grouped ncclSend/ncclRecv (to every rank, self included; to the next
 * rank in a ring). */
static void nccl_run(void *impl, int coll, const calib_coll_buf_t *b)
{
    size_t count = (size_t)b->count, per = count / b->n;
    float *s = G.dsend, *r = G.drecv;
    switch (coll) {
    case 0:
        NCCL_CK(ncclAllReduce(s, r, count, ncclFloat, ncclSum, G.comm, G.s_comm));
        break;
    case 1:
        NCCL_CK(ncclAllGather(s, r, per, ncclFloat, G.comm, G.s_comm));
        break;
    case 2:
        NCCL_CK(ncclReduceScatter(s, r, per, ncclFloat, ncclSum, G.comm, G.s_comm));
        break;
    case 3:
        NCCL_CK(ncclGroupStart());
        for (int j = 0; j < b->n; j++) {
            NCCL_CK(ncclSend(s + j * per, per, ncclFloat, j, G.comm, G.s_comm));
            NCCL_CK(ncclRecv(r + j * per, per, ncclFloat, j, G.comm, G.s_comm));
        }
        NCCL_CK(ncclGroupEnd());
        break;
    case 4:
        NCCL_CK(ncclBroadcast(s, r, count, ncclFloat, 0, G.comm, G.s_comm));
        break;
    default:
        NCCL_CK(ncclGroupStart());
        NCCL_CK(ncclSend(s, count, ncclFloat, (b->rank + 1) % b->n, G.comm, G.s_comm));
        NCCL_CK(ncclRecv(r, count, ncclFloat, (b->rank + b->n - 1) % b->n, G.comm, G.s_comm));
        NCCL_CK(ncclGroupEnd());
    }
}

static void nccl_sync(void *impl) { CUDA_CK(cudaStreamSynchronize(G.s_comm)); }

static void nccl_put(void *impl, const calib_coll_buf_t *b)
{
    CUDA_CK(cudaMemcpy(G.dsend, b->send, sizeof(float) * b->count, cudaMemcpyHostToDevice));
    CUDA_CK(cudaMemcpy(G.drecv, b->recv, sizeof(float) * b->count, cudaMemcpyHostToDevice));
    CUDA_CK(cudaDeviceSynchronize()); /* before the collective stream reads them */
}

static void nccl_get(void *impl, calib_coll_buf_t *b)
{
    CUDA_CK(cudaMemcpy(b->send, G.dsend, sizeof(float) * b->count, cudaMemcpyDeviceToHost));
    CUDA_CK(cudaMemcpy(b->recv, G.drecv, sizeof(float) * b->count, cudaMemcpyDeviceToHost));
}

static const calib_coll_lib_t nccl_lib = {.nccl = 1, .bcast_in_place = 0, .run = nccl_run, .sync = nccl_sync,
                                          .put = nccl_put, .get = nccl_get};

/* The communicator over MPI_COMM_WORLD (rank 0's unique id, broadcast over
 * MPI) and the two buffers, made once. */
static void nccl_open(const calib_plan_t *p)
{
    if (G.comm)
        return;
    ncclUniqueId id;
    if (G.rank == 0)
        NCCL_CK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    NCCL_CK(ncclCommInitRank(&G.comm, G.nranks, id, G.rank));
    G.dsend = dalloc(calib_coll_top_bytes(p));
    G.drecv = dalloc(calib_coll_top_bytes(p));
}

static void gpu_collectives(const calib_plan_t *p, calib_table_t *t, int verbose)
{
    nccl_open(p);
    calib_coll_sweep(p, &nccl_lib, NULL, t, verbose);
}

/* ---- compute beside a collective ------------------------------------------------- */

/* Seconds of one all-reduce of count floats, the slowest rank's. */
static double allreduce_s(const calib_coll_buf_t *b)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    nccl_run(NULL, 0, b);
    nccl_sync(NULL);
    double t = MPI_Wtime() - t0, worst = t;
    MPI_Allreduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return worst;
}

/* One overlap sample: rank 0 times an s^3 GEMM alone, then while every
 * rank runs back-to-back all-reduces of `count` floats on the collective
 * stream of the same GPU, enough of them to outlast twice the wall time of
 * the GEMM's timing (slowdown = busy / alone - 1, calib_overlap_row). */
static void overlap_point(const calib_plan_t *p, int s, long count, calib_table_t *t)
{
    int nar = 0, covered = 1;
    calib_coll_buf_t b = {NULL, NULL, count, G.rank, G.nranks};
    gemm_ctx_t c = {0};
    double alone = 0, busy = 0, window = 0;
    if (G.rank == 0) {
        gemm_alloc(&c, s, s, s, 0);
        double t0 = calib_now_s();
        alone = gpu_time(gemm_call, &c, p).med_s;
        window = calib_now_s() - t0;
    }
    double ar = allreduce_s(&b);
    if (G.rank == 0)
        nar = (int)fmin(1e5, ceil(2 * window / fmax(ar, 1e-6))) + 2;
    MPI_Bcast(&nar, 1, MPI_INT, 0, MPI_COMM_WORLD);
    cudaEvent_t done;
    CUDA_CK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < nar; i++)
        nccl_run(NULL, 0, &b);
    CUDA_CK(cudaEventRecord(done, G.s_comm));
    if (G.rank == 0) {
        busy = gpu_time(gemm_call, &c, p).med_s;
        cudaError_t q = cudaEventQuery(done); /* still all-reducing: the GEMMs ran beside it throughout */
        if (q != cudaSuccess && q != cudaErrorNotReady)
            die(__FILE__, __LINE__, "cudaEventQuery", cudaGetErrorString(q));
        covered = q == cudaErrorNotReady;
        cudaGetLastError(); /* cudaErrorNotReady is a state, not an error */
    }
    CUDA_CK(cudaStreamSynchronize(G.s_comm));
    CUDA_CK(cudaEventDestroy(done));
    if (G.rank == 0) {
        gemm_release(&c);
        calib_overlap_row(t, s, 4.0 * count, alone, busy);
        if (!covered)
            fprintf(stderr, "megasim calibrate: warning: the %d all-reduces of %ld floats ended before the %d^3 GEMM "
                            "samples did; that comm_slowdown sample may be understated\n", nar, count, s);
    }
}

/* The overlap samples over two GEMM sizes (2048^3 and 4096^3; 512^3 and
 * 1024^3 --tiny) and two all-reduce sizes (the sweep's largest and 1/16 of
 * it). Needs >= 2 ranks (NCCL only runs a collective with its peers). */
static void gpu_comm_slowdown(const calib_plan_t *p, int ncores, calib_table_t *t)
{
    if (G.nranks < 2)
        return;
    nccl_open(p);
    int big = p->level == CALIB_TINY ? 1024 : 4096;
    long top = calib_coll_top_bytes(p) / 4;
    for (int s = big / 2; s <= big; s *= 2)
        for (long count = top / 16; count <= top; count *= 16)
            overlap_point(p, s, count, t);
}

/* The flash attention buffers at the 1.3B model's shape (16 heads of 128,
 * micro-batch 1, 2048 tokens; 4 heads of 64 over 256 with --tiny) times
 * heads_x in heads, for both the FA-2 style and the FA-1 kernels. */
static attn_ctx_t attn_shape_ctx(const calib_plan_t *p, int heads_x)
{
    int tiny = p->level == CALIB_TINY, T = tiny ? 256 : 2048, NH = (tiny ? 4 : 16) * heads_x, HS = tiny ? 64 : 128;
    kern_attn_shape s = {1, T, NH, NH, HS, 0, KERN_NO_DROPOUT};
    size_t nq = (size_t)T * NH * HS, sc = kern_attention_fwd_v1_scratch_bytes(s);
    if (kern_attention_bwd_v1_scratch_bytes(s) > sc)
        sc = kern_attention_bwd_v1_scratch_bytes(s);
    if (kern_attention_bwd_scratch_bytes(s) > sc)
        sc = kern_attention_bwd_scratch_bytes(s);
    return (attn_ctx_t){.q = dbf16(nq, 1), .k = dbf16(nq, 2), .v = dbf16(nq, 3), .out = dalloc(2 * nq),
                        .dout = dbf16(nq, 4), .dq = dalloc(2 * nq), .dk = dalloc(2 * nq), .dv = dalloc(2 * nq),
                        .lse = dalloc(sizeof(float) * NH * T), .scratch = dalloc(sc), .s = s};
}

static void attn_ctx_free(attn_ctx_t *a)
{
    void *bufs[] = {a->q, a->k, a->v, a->out, a->dout, a->dq, a->dk, a->dv, a->lse, a->scratch};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        CUDA_CK(cudaFree(bufs[i]));
}

/* FA-2 style over FA-1 time, forward + backward: the profile's flash1_rel. */
static double gpu_flash1_rel(const calib_plan_t *p)
{
    attn_ctx_t a = attn_shape_ctx(p, 1);
    calib_stat_t v2 = gpu_time(attn_v2_call, &a, p), v1 = gpu_time(attn_v1_call, &a, p);
    attn_ctx_free(&a);
    return v1.med_s > 0 ? v2.med_s / v1.med_s : -1;
}

/* Each flash pass with dropout 0.1 against without, at the 1.3B model's
 * shape and at 4 times its heads (the 1.2B run's micro-batch of 4 fills
 * the grid as 64 heads do): rows of the attention_dropout table, whose
 * fits give the profile's flash_fwd_gdraws and flash_bwd_gdraws (the
 * draws of a full grid over the time they add: calib/profile.c). */
static void gpu_attn_dropout(const calib_plan_t *p, calib_table_t *t)
{
    calib_attn_dropout_table(t);
    for (int heads_x = 1; heads_x <= 4; heads_x *= 4) {
        attn_ctx_t a = attn_shape_ctx(p, heads_x);
        kern_attn_shape *s = &a.s;
        double plain[2], drop[2];
        for (int d = 0; d <= 1; d++) {
            if (d) {
                s->drop = kern_dropout_make(0.1f, 1, kern_dropout_site(0, KERN_DROP_ATTN), 0);
                s->drop.heads = s->NH;
            }
            for (int bwd = 0; bwd <= 1; bwd++) /* the backward reads this forward's out and lse */
                (d ? drop : plain)[bwd] = gpu_time(bwd ? attn_bwd_call : attn_fwd_call, &a, p).med_s;
        }
        for (int bwd = 0; bwd <= 1; bwd++)
            calib_attn_dropout_row(t, bwd, s->B, s->T, s->NH, s->NKV, s->HS, 0, plain[bwd], drop[bwd]);
        attn_ctx_free(&a);
    }
}

const calib_device_t calib_gpu_device = {
    .name = "gpu",
    .gemm_what = "GEMM (kern_matmul_fwd_cuda, kern_gemm_cuda: cuBLASLt, bf16)",
    .attn_what = "attention forward and backward (kern_attention_*_cuda: flash, then unfused)",
    .mem_what = "memory-bound kernels (cudaMemcpyAsync, LayerNorm, bias+GeLU, AdamW, LayerNorm with dropout)",
    .coll_what = "collectives over NCCL",
    .gemm = gpu_gemm,
    .attention = gpu_attention,
    .memory = gpu_memory,
    .collectives = gpu_collectives,
    .comm_slowdown = gpu_comm_slowdown,
    .flash1_rel = gpu_flash1_rel,
    .attn_dropout = gpu_attn_dropout,
    .sustained = gpu_sustained,
};
