/* calib/bench_gpu_int: what the files of the GPU calibration device share,
 * private to them (calib/bench_gpu.c: the process's GPU, errors, device
 * memory, the sample timer and the device table; bench_gpu_gemm.c,
 * bench_gpu_attn.c, bench_gpu_mem.c, bench_gpu_nccl.c: one benchmark
 * family each). Prefix bg_. The module is built with hidden visibility,
 * so none of this leaves it. */
#ifndef CALIB_BENCH_GPU_INT_H
#define CALIB_BENCH_GPU_INT_H

#include "calib/calib.h"
#include "kernels/matmul.h"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stddef.h>

typedef struct {
    int ready, device, rank, nranks;
    kern_ctx kc;
    cudaStream_t s, s_comm;   /* compute; collectives (both non-blocking) */
    cudaEvent_t e0, e1;       /* sample start and end */
    void *flush;              /* the L2 flush's scratch, flush_bytes (5x the L2) */
    size_t flush_bytes;
    unsigned flushes;
    ncclComm_t comm;          /* from the first collective on; NULL with one rank */
    float *dsend, *drecv;     /* NCCL buffers, calib_coll_top_bytes each */
    kern_clock clk;           /* NVML's SM clock (clk.dev NULL: none) */
} bg_gpu_t;

extern bg_gpu_t bg; /* this process's GPU (calib_gpu_init) */

/* ---- errors: file:line and what failed, then exit (MPI_Abort under mpirun) -- */

void bg_die(const char *file, int line, const char *what, const char *msg);

#define CUDA_CK(call)                                                                                              \
    do {                                                                                                           \
        cudaError_t e_ = (call);                                                                                   \
        if (e_ != cudaSuccess)                                                                                     \
            bg_die(__FILE__, __LINE__, #call, cudaGetErrorString(e_));                                             \
    } while (0)
#define NCCL_CK(call)                                                                                              \
    do {                                                                                                           \
        ncclResult_t r_ = (call);                                                                                  \
        if (r_ != ncclSuccess)                                                                                     \
            bg_die(__FILE__, __LINE__, #call, ncclGetErrorString(r_));                                             \
    } while (0)
/* The launchers print their own file:line and error before returning != 0. */
#define KERN_CK(call)                                                                                              \
    do {                                                                                                           \
        if ((call) != 0)                                                                                           \
            bg_die(__FILE__, __LINE__, #call, "the launcher failed (its message is above)");                       \
    } while (0)

/* ---- device memory ------------------------------------------------------------ */

void *bg_dalloc(size_t bytes);
/* `bytes` of values in [-1, 1) (|x| when nonneg), bf16 or fp32, seeded;
 * ordered before later work on the compute stream. */
void bg_dfill(void *d, size_t bytes, int bf16, int nonneg, unsigned seed);
kern_bf16 *bg_dbf16(size_t n, unsigned seed); /* n random bf16 */

/* ---- timing ---------------------------------------------------------------------- */

/* One call on bg.s; 0 or the launcher's non-zero code. */
typedef int (*bg_call_fn)(void *ctx);

/* The samples of fn (warm-up, L2 flush before each, CUDA events; the plan's
 * reps and min_sample_s): calib.h's statistics, with the samples' mean SM
 * clock (0 without NVML). */
calib_stat_t bg_time(bg_call_fn fn, void *ctx, const calib_plan_t *p);

/* Waits for event e on the compute stream, adding NVML reads meanwhile to *c. */
void bg_wait_reading_clock(cudaEvent_t e, kern_clock_sums *c);

/* ---- one linear layer's GEMMs (bench_gpu_gemm.c) ---------------------------------- */

/* out (N, OC) = inp (N, C) @ weight (OC, C)^T and its backward, as the real
 * backend issues them (kernels/matmul.h). */
typedef struct {
    kern_bf16 *x, *w, *y, *dx; /* inp (N, C), weight (OC, C), out = dout (N, OC), dinp (N, C) */
    float *dw;                 /* dweight (OC, C), fp32 */
    int N, C, OC, pass;        /* pass: 0 forward, 1 dinp, 2 dweight */
    kern_gemm_desc g;          /* passes 1 and 2 */
} bg_gemm_t;

int bg_gemm_call(void *p); /* a bg_call_fn on a bg_gemm_t: its pass */
void bg_gemm_alloc(bg_gemm_t *c, int N, int C, int OC, int backward);
void bg_gemm_release(bg_gemm_t *c);

/* ---- the benchmark families: calib.h's device table (calib_gpu_device) ---------- */

void bg_gemm(const calib_plan_t *p, calib_table_t *t);
void bg_sustained(const calib_plan_t *p, calib_table_t *t);
void bg_attention(const calib_plan_t *p, calib_table_t *t, calib_table_t *unfused);
double bg_flash1_rel(const calib_plan_t *p);
double bg_graph_gap_us(const calib_plan_t *p);
void bg_attn_dropout(const calib_plan_t *p, calib_table_t *t);
void bg_memory(const calib_plan_t *p, calib_table_t *t);
void bg_collectives(const calib_plan_t *p, calib_table_t *t, int verbose);
void bg_comm_slowdown(const calib_plan_t *p, int ncores, calib_table_t *t);

#endif
