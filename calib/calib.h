/* calib: microbenchmarks of this machine's device and of its collectives,
 * whose samples the fits (calib/fit.h) turn into a hardware profile in the
 * format --hardware reads (model/hw.h). Two devices share every table,
 * fit and writer: cpu (the reference C kernels, fp32, one thread per rank;
 * MPI collectives) and gpu (calib/bench_gpu.c: the CUDA kernels, bf16;
 * NCCL collectives, one GPU per rank). Samples are kept as tables of named
 * double columns, one row per measured point, written raw to HDF5 beside
 * the profile. */
#ifndef CALIB_CALIB_H
#define CALIB_CALIB_H

#include "calib/fit.h"

#include <stddef.h>
#include <stdio.h>

#define CALIB_MAX_COLS 13

/* A growing row-major table of doubles with named columns. */
typedef struct {
    const char *name;                 /* HDF5 group name, e.g. "gemm" */
    const char *cols[CALIB_MAX_COLS]; /* column names, units in the names */
    int ncol, n, cap;
    double *rows;                     /* n x ncol */
} calib_table_t;

void calib_table_init(calib_table_t *t, const char *name, const char *const *cols, int ncol);
void calib_table_add(calib_table_t *t, const double *row);
double calib_table_get(const calib_table_t *t, int row, int col);
void calib_table_free(calib_table_t *t);

/* Timing of one kernel call: each sample runs the call `inner` times (so a
 * sample lasts at least min_sample_s); the figures are per call over
 * `reps` samples after `warmup` untimed calls. */
typedef struct {
    double med_s, min_s, max_s, q1_s, q3_s;
    int reps, inner;
    double sm_mhz; /* mean SM clock while the samples ran (a GPU whose driver answers NVML), else 0 */
} calib_stat_t;

/* On the host's monotonic clock (the CPU device). */
calib_stat_t calib_time(void (*fn)(void *), void *ctx, int warmup, int reps, double min_sample_s);
/* Quantiles of v[0..reps) (per-call seconds; sorted in place). */
calib_stat_t calib_stats(double *v, int reps, int inner);
double calib_now_s(void);
/* n floats in [-1, 1) from a fixed LCG (exits on out of memory). */
float *calib_rand_floats(size_t n, unsigned seed);

/* How much to measure: full (default), quick (--quick: < 2 min on 2
 * cores), tiny (--tiny: the tests' reduced grid, same code path). */
typedef enum { CALIB_FULL, CALIB_QUICK, CALIB_TINY } calib_level_t;
extern const char *const calib_level_names[3]; /* "full", "quick", "tiny" */

/* The linear layers of a job named on calibrate's command line (JOB.json
 * or job flags: the shapes the model issues for it), at its TP, over its
 * micro-batch x sequence tokens: QKV (h -> qkv / tp), the attention
 * projection (attn / tp -> h), FC1 (h -> fc1 / tp), FC2 (ffn / tp -> h);
 * with experts, a local expert's FC1 (h -> expert_fc1) and FC2
 * (expert_ffn -> h) over its rows at the even split (expert_rows; 0: no
 * experts), at ETP. on = 0: no job named. */
typedef struct {
    int on, h, attn, qkv, fc1, ffn, tokens, tp;
    int expert_rows, expert_fc1, expert_ffn, etp;
} calib_job_shapes_t;

/* The standard deviation of the GeLU inputs calibration times bias+GeLU
 * on: the named job's FC1 pre-activations at initialisation (LayerNorm's
 * unit-variance output through weights of JOB_INIT_METHOD_STD: 0.02
 * sqrt(h), 0.16 for the tiny GPT), else 1. On a CPU glibc's tanhf is
 * faster on small inputs: kern_gelu_fwd_ref at 0.082 G/s on N(0, 0.16^2),
 * 0.051 on N(0, 1) and on the uniform [-2, 2) used before (this VM,
 * 2026-11-29); the tiny GPT's GeLU ran at 0.081 in its run. */
double calib_gelu_input_std(const calib_job_shapes_t *job);

typedef struct {
    calib_level_t level;
    int warmup, reps;
    double min_sample_s;
    calib_job_shapes_t job;
} calib_plan_t;

/* The job's four linear layers as point(p, t, N, C, OC, tp, h) calls (one
 * linear layer's three GEMMs into t), when p->job.on. */
void calib_job_layers(const calib_plan_t *p, calib_table_t *t,
                      void (*point)(const calib_plan_t *p, calib_table_t *t, int N, int C, int OC, int tp, int h));

calib_plan_t calib_plan(calib_level_t level);

/* The compute tables, one layout for both devices (the fits read columns
 * by these indices: calib/profile.c):
 *   gemm: m, n, k, flops, time_med_s, time_min_s, time_max_s, gflops, tp,
 *         pass (0 forward, 1 backward dinp, 2 backward dweight), hidden
 *         (tp = hidden = 0: the square log grid)
 *   attn: bwd, T, NH, HS, flops, time_med_s, time_min_s, time_max_s,
 *         gflops, NKV, window (0 full causal), B
 *   attention_unfused: the same columns for the unfused kernels (GEMM,
 *         masked softmax, GEMM over the T x T probabilities); flops as the
 *         model counts them (calib_attn_unfused_flops). Raw samples only:
 *         the model prices unfused attention from gemm_eff and the
 *         memory-bound rates (model/layer.c attention_core), and the
 *         profile has no field they would feed.
 *   mem:  kernel (0 copy, 1 layernorm, 2 bias_gelu, 3 adamw, 4
 *         dropout_fwd (CPU only, raw samples: the draws' rate comes from
 *         kinds 5 and 1), 5 layernorm_dropout: kind 1 with its dropout over
 *         the same elements), bytes, time_med_s, time_min_s, time_max_s,
 *         gbps, elems (elements, or parameters for adamw)
 *   attention_dropout: the flash kernels with and without dropout at the
 *         same shape: bwd, B, T, NH, NKV, HS, window, time_plain_s,
 *         time_dropout_s, draws (B NH visible scores: one draw each) */
void calib_gemm_table(calib_table_t *t);
void calib_attn_table(calib_table_t *t);
void calib_attn_unfused_table(calib_table_t *t);
void calib_mem_table(calib_table_t *t);
void calib_attn_dropout_table(calib_table_t *t);
/* A large GEMM run back to back for about a second (the GPU): per window
 * of calls, its end time, mean SM clock, power, share of clock reads at
 * the power cap, and TFLOP/s: what the clock settles to under a training
 * step's sustained load, against the clocks of the short samples. */
void calib_sustained_table(calib_table_t *t);
void calib_sustained_row(calib_table_t *t, double t_s, double sm_mhz, double power_w, double capped, double tflops);
void calib_attn_dropout_row(calib_table_t *t, int bwd, int B, int T, int NH, int NKV, int HS, int window,
                            double plain_s, double dropout_s);
void calib_gemm_row(calib_table_t *t, int m, int n, int k, const calib_stat_t *s, int tp, int pass, int hidden);
void calib_attn_row(calib_table_t *t, int bwd, int B, int T, int NH, int NKV, int HS, int window,
                    const calib_stat_t *s);
void calib_attn_unfused_row(calib_table_t *t, int bwd, int B, int T, int NH, int NKV, int HS, int window,
                            const calib_stat_t *s);

/* The GEMM of pass `pass` (0 forward, 1 backward dinp, 2 backward
 * dweight) of a linear layer out (N, OC) = inp (N, C) @ weight (OC, C)^T,
 * as an m x n output over k: forward N x OC over C; dinp = dout @ weight,
 * N x C over OC; dweight = dout^T @ inp, OC x C over N. */
void calib_linear_dims(int N, int C, int OC, int pass, int *m, int *n, int *k);

/* The CPU backend's GEMMs of one linear layer, pass by pass (pass 0:
 * y = kern_matmul_fwd_ref without bias; passes 1 and 2: the two
 * kern_gemm_ref calls of kern_matmul_bwd_ref, dx = dy @ w and dw += dy^T
 * @ x, with its arguments), so that each is timed on its own. x (N, C),
 * w (OC, C), y = dy (N, OC), dx (N, C), dw (OC, C). */
void calib_linear_pass_ref(int pass, float *y, float *dx, float *dw, const float *x, const float *w, int N, int C,
                           int OC);
void calib_mem_row(calib_table_t *t, int kind, double bytes, double elems, const calib_stat_t *s);
#define CALIB_MEM_KINDS 6 /* copy, layernorm_fwd, bias_gelu_fwd, adamw, dropout_fwd, layernorm_dropout_fwd */

/* FLOPs of one flash attention call as the cost model counts them
 * (model/cost.c op_flops): 4 HS per visible key per query and head over
 * B NH heads, keys from workload_causal_keys (T (T + 1) / 2 when causal
 * without a window); x 2.5 for the backward (FlashAttention-2's five
 * matmuls). GQA does not change it: every query head does the same work. */
double calib_attn_flops(int B, int T, int NH, int HS, int window, int bwd);

/* Bytes one memory-bound call over n elements moves, activations of
 * act_bytes each (4 on the CPU, bf16 2 on the GPU), rows of `row`
 * elements: copy reads and writes n; LayerNorm reads inp and skip, writes
 * residual and out, plus fp32 mean and rstd per row; bias+GeLU reads and
 * writes n; AdamW (fp32 master weights) reads param, grad, m, v and writes
 * param, m, v: 28 bytes per parameter; dropout reads and writes n and
 * writes its 1-byte mask (each element one Philox draw); LayerNorm with
 * dropout moves LayerNorm's bytes and the mask. */
double calib_mem_bytes(int kind, long n, int act_bytes, int row);

/* Collectives, nccl-tests style (calib/coll.c): one harness over a table
 * of function pointers per library. Table coll: coll (index into
 * calib_colls), size_bytes, count, time_us (median, max over ranks),
 * time_min_us, time_max_us, algbw_gbps, busbw_gbps, wrong. Rows are
 * complete on rank 0 only. Data are fp32 ("float", sum). */
typedef struct {
    const char *name;      /* nccl-tests' name: all_reduce, ... */
    const char *mpi_call;  /* MPI_Allreduce, ... */
    const char *nccl_call; /* ncclAllReduce, ... */
} calib_coll_info_t;

#define CALIB_NCOLL 6
extern const calib_coll_info_t calib_colls[CALIB_NCOLL];
double calib_bus_factor(int coll, int nranks);

/* One rank's buffers as the harness sees them: host arrays it fills and
 * checks; count elements of nccl-tests' size (calib/coll.c). */
typedef struct {
    float *send, *recv;
    long count;
    int rank, n;
} calib_coll_buf_t;

/* A collective library. run enqueues (or runs) one call of collective
 * `coll` on the library's buffers; sync waits for what was enqueued; put
 * and get copy the host buffers (count elements each) to the library's and
 * back. NULL sync/put/get: nothing to do (MPI works on the host arrays). */
typedef struct {
    int nccl;           /* the calls are calib_colls[].nccl_call, else .mpi_call */
    int bcast_in_place; /* broadcast's root keeps its data in send, not recv */
    void (*run)(void *impl, int coll, const calib_coll_buf_t *b);
    void (*sync)(void *impl);
    void (*put)(void *impl, const calib_coll_buf_t *b);
    void (*get)(void *impl, calib_coll_buf_t *b);
} calib_coll_lib_t;

/* Every rank of MPI_COMM_WORLD calls: sizes 8 B to the level's top
 * (calib_coll_top_bytes: 1 GiB, 16 MiB with --quick, 1 MiB with --tiny;
 * a library sizes its own buffers from it), one checked call then timed
 * samples per size. verbose 1: one progress line on stderr per collective
 * and size group (8 B.., 1 KiB.., 1 MiB..); 2: every row as measured. */
long calib_coll_top_bytes(const calib_plan_t *p);
void calib_coll_table(calib_table_t *t);
void calib_coll_sweep(const calib_plan_t *p, const calib_coll_lib_t *lib, void *impl, calib_table_t *t,
                      int verbose);
/* The nccl-tests header of collective c, then its rows of t. */
void calib_coll_print_header(FILE *f, int coll, int nranks, const char *call);
void calib_coll_print_row(FILE *f, const calib_table_t *t, int row);

/* The GPU, described for the provenance (rank 0's; zeros on the CPU). */
typedef struct {
    char name[256];            /* cudaDeviceProp.name */
    int cc_major, cc_minor;    /* compute capability */
    int sm_count, devices;     /* SMs; CUDA devices visible to rank 0 */
    int driver_version, runtime_version, nccl_version; /* 13000, 22809 style */
    long cublaslt_version;
    double mem_gib, l2_mib, clock_mhz, mem_clock_mhz;
    int mem_bus_bits;
    int attn_slots_q, attn_slots_k; /* the default flash forward's, backward's
                                       blocks resident per SM at head size
                                       128 (0: not recorded: raw files before
                                       2026-11-26 12:30 UTC) */
} calib_gpu_info_t;

/* Compute beside a collective: a square GEMM of n^3 timed alone and while
 * all-reduces of `bytes` run beside it; slowdown = busy / alone - 1. */
void calib_overlap_table(calib_table_t *t); /* gemm_n, bytes, alone_s, busy_s, slowdown */
void calib_overlap_row(calib_table_t *t, int n, double bytes, double alone_s, double busy_s);

/* One device: what calibrate runs, in this order (cmd/calibrate.c). The
 * compute entries run on rank 0; collectives and comm_slowdown on every
 * rank, and only with >= 2 ranks. comm_slowdown: rows of the overlap table
 * (rank 0), over GEMM and message sizes; none when it cannot be measured.
 * flash1_rel: FlashAttention-1's speed over the flash kernel's (forward +
 * backward at one shape), < 0 when it cannot be measured. attn_dropout
 * (NULL: not measured; the profile's flash_*_gdraws stay 0, meaning
 * dropout_gdraws): rows of the attention_dropout table. */
typedef struct {
    const char *name;                     /* "cpu", "gpu" */
    const char *gemm_what, *attn_what, *mem_what, *coll_what;
    void (*gemm)(const calib_plan_t *p, calib_table_t *t);
    /* flash into t, unfused into unfused (calib_attn_unfused_table) */
    void (*attention)(const calib_plan_t *p, calib_table_t *t, calib_table_t *unfused);
    void (*memory)(const calib_plan_t *p, calib_table_t *t);
    void (*collectives)(const calib_plan_t *p, calib_table_t *t, int verbose);
    void (*comm_slowdown)(const calib_plan_t *p, int ncores, calib_table_t *overlap);
    double (*flash1_rel)(const calib_plan_t *p);
    /* a kernel's launch gap as a node of a CUDA graph, us; < 0 when it
     * cannot be measured; NULL on the CPU, which has no graphs */
    double (*graph_gap_us)(const calib_plan_t *p);
    void (*attn_dropout)(const calib_plan_t *p, calib_table_t *t);
    void (*sustained)(const calib_plan_t *p, calib_table_t *t); /* may be NULL (the CPU) */
} calib_device_t;

extern const calib_device_t calib_cpu_device; /* bench.c, bench_mpi.c */

/* The cache the CPU's copy sweep and its bandwidth fit start from (twice
 * it): the largest data or unified cache of cpu0 (sysfs; 32 MiB when the
 * system does not say), whose twice is DRAM-resident (a streaming copy
 * under LRU misses every line once its working set exceeds the cache),
 * but at most CALIB_TINY_CACHE_BYTES with --tiny
 * (the tests' grid, rough numbers: this VM reports a 480 MiB cache, and
 * its copies of 0.9 to 3.8 GiB took 12 of --tiny's 13 s), whose copies
 * may then be cache-resident. */
#define CALIB_TINY_CACHE_BYTES (16.0 * (1 << 20))
double calib_dram_cache_bytes(calib_level_t level);
void calib_bench_collectives(const calib_plan_t *p, calib_table_t *t, int verbose);

/* Slowdown of a GEMM on rank 0 while the other ranks all-reduce among
 * themselves, one overlap row; none when it cannot be measured (fewer
 * than 3 ranks, or more ranks than cores: the ranks would share cores,
 * not memory). */
void calib_bench_comm_slowdown(const calib_plan_t *p, int ncores, calib_table_t *overlap);

#endif
