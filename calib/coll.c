/* calib/coll: the collective benchmark harness, read the way nccl-tests
 * reads: one table of collectives, one sweep, columns size, count, type,
 * time, algbw, busbw, #wrong. A library (calib_coll_lib_t: MPI in
 * bench_mpi.c, NCCL in bench_gpu.c) supplies only how to run one call.
 *
 * size is nccl-tests' size: the bytes of the largest buffer of one rank
 * (all-reduce, broadcast, send/recv: the buffer; all-gather: the gathered
 * output; reduce-scatter: the input; all-to-all: the whole send buffer).
 * algbw = size / time; busbw = algbw x the bus factor, the bandwidth each
 * link of a ring must carry (nccl-tests doc/PERFORMANCE.md): all-reduce
 * 2(n-1)/n, all-gather, reduce-scatter, all-to-all (n-1)/n, broadcast and
 * send/recv 1. Data are fp32 ("float", sum) small integers that depend on
 * the rank and the index, as nccl-tests fills its buffers, so every result
 * is exact and checked element by element (#wrong, summed over ranks).
 * Time is the host's, around `iters` calls and the library's sync, as
 * nccl-tests times (the slowest rank's). */
#include "calib/calib.h"

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const calib_coll_info_t calib_colls[CALIB_NCOLL] = {
    {"all_reduce", "MPI_Allreduce", "ncclAllReduce"},
    {"all_gather", "MPI_Allgather", "ncclAllGather"},
    {"reduce_scatter", "MPI_Reduce_scatter_block", "ncclReduceScatter"},
    {"alltoall", "MPI_Alltoall", "ncclSend/ncclRecv x n (grouped)"},
    {"broadcast", "MPI_Bcast", "ncclBroadcast"},
    {"sendrecv", "MPI_Sendrecv", "ncclSend/ncclRecv (grouped, ring)"},
};

double calib_bus_factor(int coll, int n)
{
    if (coll == 0)
        return 2.0 * (n - 1) / n;
    return coll <= 3 ? (double)(n - 1) / n : 1.0;
}

/* Value rank r puts at index i: small integers, exact in fp32 sums. */
static float val(int r, long i) { return (float)(r + 1 + i % 7); }

/* Expected recv[i] on this rank. */
static float want_allreduce(const calib_coll_buf_t *b, long i)
{
    float s = 0;
    for (int r = 0; r < b->n; r++)
        s += val(r, i);
    return s;
}
static float want_allgather(const calib_coll_buf_t *b, long i)
{
    long per = b->count / b->n;
    return val((int)(i / per), i % per);
}
static float want_reducescatter(const calib_coll_buf_t *b, long i)
{
    return want_allreduce(b, b->rank * (b->count / b->n) + i);
}
static float want_alltoall(const calib_coll_buf_t *b, long i)
{
    long per = b->count / b->n; /* block j of recv came from rank j's block `rank` */
    return val((int)(i / per), b->rank * per + i % per);
}
static float want_bcast(const calib_coll_buf_t *b, long i) { return val(0, i); }
static float want_sendrecv(const calib_coll_buf_t *b, long i) { return val((b->rank + b->n - 1) % b->n, i); }

typedef struct {
    float (*want)(const calib_coll_buf_t *, long);
    int per_rank_out; /* recv holds count / n elements (reduce-scatter) */
    int per_rank_in;  /* send holds count / n elements (all-gather) */
    int blocked;      /* count must be a multiple of n */
} coll_check_t;

static const coll_check_t checks[CALIB_NCOLL] = {
    {want_allreduce, 0, 0, 0}, {want_allgather, 0, 1, 1}, {want_reducescatter, 1, 0, 1},
    {want_alltoall, 0, 0, 1},  {want_bcast, 0, 0, 0},     {want_sendrecv, 0, 0, 0},
};

/* Fills the send buffer as the collective's inputs expect (for all-gather
 * this rank's block, for the others the whole buffer) and recv with -1. */
static void fill(calib_coll_buf_t *b, int coll)
{
    long len = checks[coll].per_rank_in ? b->count / b->n : b->count;
    for (long i = 0; i < len; i++)
        b->send[i] = val(b->rank, i);
    for (long i = len; i < b->count; i++)
        b->send[i] = 0;
    for (long i = 0; i < b->count; i++)
        b->recv[i] = -1.0f;
}

/* One checked call: the number of wrong elements over all ranks. */
static double check(const calib_coll_lib_t *lib, void *impl, calib_coll_buf_t *b, int coll)
{
    fill(b, coll);
    if (lib->put)
        lib->put(impl, b);
    lib->run(impl, coll, b);
    if (lib->sync)
        lib->sync(impl);
    if (lib->get)
        lib->get(impl, b);
    const float *out = coll == 4 && b->rank == 0 && lib->bcast_in_place ? b->send : b->recv;
    long len = checks[coll].per_rank_out ? b->count / b->n : b->count, wrong = 0;
    for (long i = 0; i < len; i++)
        wrong += out[i] != checks[coll].want(b, i);
    double w = (double)wrong, total = 0;
    MPI_Allreduce(&w, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return total;
}

/* Per-call time of one collective: `iters` calls per sample, the sample
 * the slowest rank's; median, min and max over samples. Every rank runs
 * the same loop counts, derived from the size alone. */
static calib_stat_t time_coll(const calib_plan_t *p, const calib_coll_lib_t *lib, void *impl,
                              const calib_coll_buf_t *b, int coll)
{
    double bytes = b->count * 4.0, v[64];
    /* ~budget bytes per sample: a few ms at GB/s, enough to average the
     * scheduler's noise out; at most 1000 calls of the smallest sizes (50
     * with --tiny, the tests' grid: on the emulated NCCL 1000 calls of the
     * 7 sizes below 1 KiB took 4-5 s per collective, 13 of the test's 37 s) */
    double budget = p->level == CALIB_FULL ? 256e6 : p->level == CALIB_QUICK ? 64e6 : 4e6;
    int iters = (int)fmax(1, fmin(p->level == CALIB_TINY ? 50 : 1000, budget / fmax(bytes, 1)));
    int reps = p->reps > 64 ? 64 : p->reps;
    for (int i = 0; i < p->warmup * iters; i++)
        lib->run(impl, coll, b);
    if (lib->sync)
        lib->sync(impl);
    for (int r = 0; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < iters; i++)
            lib->run(impl, coll, b);
        if (lib->sync)
            lib->sync(impl);
        double t = (MPI_Wtime() - t0) / iters;
        MPI_Allreduce(&t, &v[r], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    }
    return calib_stats(v, reps, iters);
}

void calib_coll_print_header(FILE *f, int coll, int nranks, const char *call)
{
    fprintf(f, "\n# %s (%s), %d ranks, busbw = algbw x %.3f\n#%13s %12s %8s %10s %12s %12s %7s\n",
            calib_colls[coll].name, call, nranks, calib_bus_factor(coll, nranks), "size(B)", "count", "type",
            "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
}

void calib_coll_print_row(FILE *f, const calib_table_t *t, int i)
{
    fprintf(f, " %13.0f %12.0f %8s %10.2f %12.3f %12.3f %7.0f\n", calib_table_get(t, i, 1), calib_table_get(t, i, 2),
            "float", calib_table_get(t, i, 3), calib_table_get(t, i, 6), calib_table_get(t, i, 7),
            calib_table_get(t, i, 8));
}

long calib_coll_top_bytes(const calib_plan_t *p)
{
    /* nccl-tests' default sweep is -b 8 -e 128M -f 2; ours to 1 GiB (full),
     * 16 MiB (--quick), 1 MiB (--tiny), x2 per step. */
    return p->level == CALIB_FULL ? 1L << 30 : p->level == CALIB_QUICK ? 1L << 24 : 1L << 20;
}

static float *host_floats(long bytes)
{
    float *p = malloc(bytes + 64);
    if (!p) {
        fprintf(stderr, "megasim calibrate: out of memory for %ld bytes (%s:%d)\n", bytes, __FILE__, __LINE__);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return p;
}

/* "8 B", "64 KiB", "16 MiB": sizes as a progress line shows them. */
static void size_str(char *buf, size_t len, double bytes)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB"};
    int u = 0;
    while (bytes >= 1024 && u < 3)
        bytes /= 1024, u++;
    snprintf(buf, len, "%.0f %s", bytes, unit[u]);
}

/* verbose 1: "all_reduce (MPI_Allreduce): 1 KiB .. 512 KiB, 10 sizes, 0.4 s"
 * (the group's time) on stderr when a size group (below 1 KiB, below
 * 1 MiB, the rest) ends. */
static void group_done(const calib_coll_lib_t *lib, int c, double lo, double hi, int sizes, double t0_s)
{
    char a[32], b[32];
    size_str(a, sizeof a, lo), size_str(b, sizeof b, hi);
    fprintf(stderr, "megasim calibrate:   %s (%s): %s .. %s, %d size%s, %.1f s\n", calib_colls[c].name,
            lib->nccl ? calib_colls[c].nccl_call : calib_colls[c].mpi_call, a, b, sizes, sizes == 1 ? "" : "s",
            MPI_Wtime() - t0_s);
}

void calib_coll_table(calib_table_t *t)
{
    static const char *const cols[] = {"coll", "size_bytes", "count", "time_us", "time_min_us", "time_max_us",
                                       "algbw_gbps", "busbw_gbps", "wrong"};
    calib_table_init(t, "collectives", cols, 9);
}

void calib_coll_sweep(const calib_plan_t *p, const calib_coll_lib_t *lib, void *impl, calib_table_t *t,
                      int verbose)
{
    calib_coll_table(t);
    calib_coll_buf_t b;
    MPI_Comm_rank(MPI_COMM_WORLD, &b.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &b.n);
    long top = calib_coll_top_bytes(p);
    b.send = host_floats(top), b.recv = host_floats(top);
    for (int c = 0; c < CALIB_NCOLL; c++) {
        if (verbose > 1 && b.rank == 0)
            calib_coll_print_header(stderr, c, b.n, lib->nccl ? calib_colls[c].nccl_call : calib_colls[c].mpi_call);
        double t0 = MPI_Wtime(), lo = 0;
        int sizes = 0;
        for (long size = 8; size <= top; size *= 2) {
            long unit = checks[c].blocked ? 4L * b.n : 4; /* blocked collectives: whole blocks per rank */
            if (size < unit)
                continue;
            b.count = size / unit * unit / 4;
            double wrong = check(lib, impl, &b, c);
            calib_stat_t s = time_coll(p, lib, impl, &b, c);
            double bytes = b.count * 4.0, algbw = bytes / s.med_s * 1e-9;
            calib_table_add(t, (double[]){c, bytes, b.count, s.med_s * 1e6, s.min_s * 1e6, s.max_s * 1e6, algbw,
                                          algbw * calib_bus_factor(c, b.n), wrong});
            if (verbose > 1 && b.rank == 0)
                calib_coll_print_row(stderr, t, t->n - 1);
            lo = sizes++ ? lo : bytes;
            int group_end = size * 2 > top || size * 2 == 1024 || size * 2 == 1L << 20;
            if (verbose == 1 && b.rank == 0 && group_end)
                group_done(lib, c, lo, bytes, sizes, t0);
            if (group_end)
                sizes = 0, t0 = MPI_Wtime();
        }
    }
    free(b.send), free(b.recv);
}
