/* calib: microbenchmarks of this machine's "device" (the CPU backend: the
 * reference C kernels, fp32) and of MPI collectives, whose samples the fits
 * (calib/fit.h) turn into a hardware profile in the format --hardware
 * reads (model/hw.h). Samples are kept as tables of named double columns,
 * one row per measured point, written raw to HDF5 beside the profile. */
#ifndef CALIB_CALIB_H
#define CALIB_CALIB_H

#include "calib/fit.h"

#define CALIB_MAX_COLS 12

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
 * sample lasts at least min_sample_s) on the monotonic clock; the figures
 * are per call over `reps` samples after `warmup` untimed calls. */
typedef struct {
    double med_s, min_s, max_s, q1_s, q3_s;
    int reps, inner;
} calib_stat_t;

calib_stat_t calib_time(void (*fn)(void *), void *ctx, int warmup, int reps, double min_sample_s);
double calib_now_s(void);

/* How much to measure: full (default), quick (--quick: < 2 min on 2
 * cores), tiny (--tiny: the tests' reduced grid, same code path). */
typedef enum { CALIB_FULL, CALIB_QUICK, CALIB_TINY } calib_level_t;

typedef struct {
    calib_level_t level;
    int warmup, reps;
    double min_sample_s;
} calib_plan_t;

calib_plan_t calib_plan(calib_level_t level);

/* Compute benchmarks (one process). Tables:
 *   gemm: m, n, k, flops, time_med_s, time_min_s, time_max_s, gflops, tp
 *   attn: bwd, T, NH, HS, flops, time_med_s, time_min_s, time_max_s, gflops
 *   mem:  kernel (0 copy, 1 layernorm, 2 bias_gelu, 3 adamw), bytes,
 *         time_med_s, time_min_s, time_max_s, gbps */
void calib_bench_gemm(const calib_plan_t *p, calib_table_t *t);
void calib_bench_attention(const calib_plan_t *p, calib_table_t *t);
void calib_bench_memory(const calib_plan_t *p, calib_table_t *t);
extern const char *const calib_mem_kernels[4];

/* Collectives over MPI_COMM_WORLD (every rank calls; needs >= 2 ranks),
 * nccl-tests style. Table coll: coll (index into calib_colls), size_bytes,
 * count, time_us (median, max over ranks), time_min_us, time_max_us,
 * algbw_gbps, busbw_gbps, wrong. Rows are complete on rank 0 only. */
typedef struct {
    const char *name;     /* nccl-tests' name: all_reduce, ... */
    const char *mpi_call; /* MPI_Allreduce, ... */
} calib_coll_info_t;

#define CALIB_NCOLL 6
extern const calib_coll_info_t calib_colls[CALIB_NCOLL];
double calib_bus_factor(int coll, int nranks);
void calib_bench_collectives(const calib_plan_t *p, calib_table_t *t, int verbose);

/* Slowdown of a GEMM on rank 0 while the other ranks all-reduce among
 * themselves; < 0 when it cannot be measured (fewer than 3 ranks, or more
 * ranks than cores: the ranks would share cores, not memory). */
double calib_bench_comm_slowdown(const calib_plan_t *p, int ncores);

#endif
