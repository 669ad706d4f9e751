/* calib/bench_mpi: collective and point-to-point benchmarks over MPI, read
 * the way nccl-tests reads (one small entry per collective in a table of
 * function pointers; columns size, count, time, algbw, busbw, #wrong).
 *
 * size is nccl-tests' size: the bytes of the largest buffer of one rank
 * (all-reduce, broadcast, send/recv: the buffer; all-gather: the gathered
 * output; reduce-scatter: the input; all-to-all: the whole send buffer).
 * algbw = size / time; busbw = algbw x the bus factor, the bandwidth each
 * link of a ring must carry (nccl-tests doc/PERFORMANCE.md): all-reduce
 * 2(n-1)/n, all-gather, reduce-scatter, all-to-all (n-1)/n, broadcast and
 * send/recv 1. Data are fp32 (MPI_FLOAT, MPI_SUM) small integers, so every
 * result is exact and checked element by element. */
#include "calib/calib.h"

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    float *send, *recv;
    long count; /* elements of size (see above) */
    int rank, n;
} coll_buf_t;

/* Value rank r puts at index i: small integers, exact in fp32 sums. */
static float val(int r, long i) { return (float)(r + 1 + i % 7); }

static void run_allreduce(coll_buf_t *b)
{
    MPI_Allreduce(b->send, b->recv, (int)b->count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}
static void run_allgather(coll_buf_t *b)
{
    MPI_Allgather(b->send, (int)(b->count / b->n), MPI_FLOAT, b->recv, (int)(b->count / b->n), MPI_FLOAT,
                  MPI_COMM_WORLD);
}
static void run_reducescatter(coll_buf_t *b)
{
    MPI_Reduce_scatter_block(b->send, b->recv, (int)(b->count / b->n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}
static void run_alltoall(coll_buf_t *b)
{
    MPI_Alltoall(b->send, (int)(b->count / b->n), MPI_FLOAT, b->recv, (int)(b->count / b->n), MPI_FLOAT,
                 MPI_COMM_WORLD);
}
static void run_bcast(coll_buf_t *b)
{
    MPI_Bcast(b->rank ? b->recv : b->send, (int)b->count, MPI_FLOAT, 0, MPI_COMM_WORLD);
}
/* Ring exchange: each rank sends to rank+1 and receives from rank-1. */
static void run_sendrecv(coll_buf_t *b)
{
    MPI_Sendrecv(b->send, (int)b->count, MPI_FLOAT, (b->rank + 1) % b->n, 0, b->recv, (int)b->count, MPI_FLOAT,
                 (b->rank + b->n - 1) % b->n, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

/* Expected recv[i] on this rank; recv holds `len` elements. */
static float want_allreduce(const coll_buf_t *b, long i)
{
    float s = 0;
    for (int r = 0; r < b->n; r++)
        s += val(r, i);
    return s;
}
static float want_allgather(const coll_buf_t *b, long i)
{
    long per = b->count / b->n;
    return val((int)(i / per), i % per);
}
static float want_reducescatter(const coll_buf_t *b, long i)
{
    return want_allreduce(b, b->rank * (b->count / b->n) + i);
}
static float want_alltoall(const coll_buf_t *b, long i)
{
    long per = b->count / b->n; /* block j of recv came from rank j's block `rank` */
    return val((int)(i / per), b->rank * per + i % per);
}
static float want_bcast(const coll_buf_t *b, long i) { return val(0, i); }
static float want_sendrecv(const coll_buf_t *b, long i) { return val((b->rank + b->n - 1) % b->n, i); }

typedef struct {
    void (*run)(coll_buf_t *);
    float (*want)(const coll_buf_t *, long);
    int per_rank_out; /* recv holds count / n elements (reduce-scatter) */
} coll_ops_t;

const calib_coll_info_t calib_colls[CALIB_NCOLL] = {
    {"all_reduce", "MPI_Allreduce"},         {"all_gather", "MPI_Allgather"},
    {"reduce_scatter", "MPI_Reduce_scatter_block"}, {"alltoall", "MPI_Alltoall"},
    {"broadcast", "MPI_Bcast"},              {"sendrecv", "MPI_Sendrecv"},
};
static const coll_ops_t ops[CALIB_NCOLL] = {
    {run_allreduce, want_allreduce, 0},         {run_allgather, want_allgather, 0},
    {run_reducescatter, want_reducescatter, 1}, {run_alltoall, want_alltoall, 0},
    {run_bcast, want_bcast, 0},                 {run_sendrecv, want_sendrecv, 0},
};

double calib_bus_factor(int coll, int n)
{
    if (coll == 0)
        return 2.0 * (n - 1) / n;
    return coll <= 3 ? (double)(n - 1) / n : 1.0;
}

/* Fills the send buffer as the collective's inputs expect: for all-gather
 * this rank's block, for the others the whole buffer. */
static void fill(coll_buf_t *b, int coll)
{
    long len = coll == 1 ? b->count / b->n : b->count;
    for (long i = 0; i < len; i++)
        b->send[i] = val(b->rank, i);
    for (long i = 0; i < b->count; i++)
        b->recv[i] = -1.0f;
}

/* One checked call: the number of wrong elements over all ranks. */
static double check(coll_buf_t *b, int coll)
{
    fill(b, coll);
    ops[coll].run(b);
    const float *out = coll == 4 && b->rank == 0 ? b->send : b->recv;
    long len = ops[coll].per_rank_out ? b->count / b->n : b->count, wrong = 0;
    for (long i = 0; i < len; i++)
        wrong += out[i] != ops[coll].want(b, i);
    double w = (double)wrong, total = 0;
    MPI_Allreduce(&w, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return total;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Per-call time of one collective: `iters` calls per sample, the sample
 * the slowest rank's; median, min and max over samples. Every rank runs
 * the same loop counts, derived from the size alone. */
static void time_coll(const calib_plan_t *p, coll_buf_t *b, int coll, double *med, double *lo, double *hi)
{
    double bytes = b->count * 4.0, v[64];
    /* ~budget bytes per sample: a few ms at GB/s, enough to average the
     * scheduler's noise out; at most 1000 calls of the smallest sizes */
    double budget = p->level == CALIB_FULL ? 256e6 : p->level == CALIB_QUICK ? 64e6 : 4e6;
    int iters = (int)fmax(1, fmin(1000, budget / fmax(bytes, 1)));
    int reps = p->reps > 64 ? 64 : p->reps;
    for (int i = 0; i < p->warmup * iters; i++)
        ops[coll].run(b);
    for (int r = 0; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < iters; i++)
            ops[coll].run(b);
        double t = (MPI_Wtime() - t0) / iters;
        MPI_Allreduce(&t, &v[r], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    }
    qsort(v, reps, sizeof v[0], cmp_double);
    *med = reps % 2 ? v[reps / 2] : 0.5 * (v[reps / 2 - 1] + v[reps / 2]);
    *lo = v[0], *hi = v[reps - 1];
}

static void header(int rank)
{
    if (rank == 0)
        fprintf(stderr, "#%13s %12s %10s %10s %10s %7s\n", "size(B)", "count", "time(us)", "algbw(GB/s)",
                "busbw(GB/s)", "#wrong");
}

void calib_bench_collectives(const calib_plan_t *p, calib_table_t *t, int verbose)
{
    static const char *const cols[] = {"coll", "size_bytes", "count", "time_us", "time_min_us", "time_max_us",
                                       "algbw_gbps", "busbw_gbps", "wrong"};
    calib_table_init(t, "collectives", cols, 9);
    coll_buf_t b;
    MPI_Comm_rank(MPI_COMM_WORLD, &b.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &b.n);
    /* nccl-tests' default sweep is -b 8 -e 128M -f 2; ours to 1 GiB (full),
     * 16 MiB (--quick), 1 MiB (--tiny), x2 per step. */
    long top = p->level == CALIB_FULL ? 1L << 30 : p->level == CALIB_QUICK ? 1L << 24 : 1L << 20;
    b.send = malloc(top + 64), b.recv = malloc(top + 64);
    if (!b.send || !b.recv) {
        fprintf(stderr, "megasim calibrate: out of memory for 2 x %ld bytes (%s:%d)\n", top, __FILE__, __LINE__);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int c = 0; c < CALIB_NCOLL; c++) {
        if (verbose && b.rank == 0)
            fprintf(stderr, "# %s (%s), %d ranks, bus factor %.3f\n", calib_colls[c].name, calib_colls[c].mpi_call,
                    b.n, calib_bus_factor(c, b.n));
        if (verbose)
            header(b.rank);
        for (long size = 8; size <= top; size *= 2) {
            long unit = c >= 1 && c <= 3 ? 4L * b.n : 4; /* blocked collectives: whole blocks per rank */
            if (size < unit)
                continue;
            b.count = size / unit * unit / 4;
            double wrong = check(&b, c), med, lo, hi;
            time_coll(p, &b, c, &med, &lo, &hi);
            double bytes = b.count * 4.0, algbw = bytes / med * 1e-9, busbw = algbw * calib_bus_factor(c, b.n);
            calib_table_add(t, (double[]){c, bytes, b.count, med * 1e6, lo * 1e6, hi * 1e6, algbw, busbw, wrong});
            if (verbose && b.rank == 0)
                fprintf(stderr, " %13.0f %12ld %10.2f %10.3f %10.3f %7.0f\n", bytes, b.count, med * 1e6, algbw,
                        busbw, wrong);
        }
    }
    free(b.send), free(b.recv);
}

/* ---- compute beside a collective ------------------------------------------ */

#include "kernels/matmul.h"

#define SLOW_N 256        /* GEMM of 256^3 on rank 0 */
#define SLOW_BYTES (4 << 20) /* all-reduce of 4 MiB among the other ranks */

static double gemm_median_s(float *c, const float *a, int reps)
{
    double v[64];
    for (int r = 0; r < reps; r++) {
        double t0 = calib_now_s();
        kern_gemm_ref(c, a, a, SLOW_N, SLOW_N, SLOW_N, 0, 1, SLOW_N, SLOW_N, SLOW_N, 0.0f);
        v[r] = calib_now_s() - t0;
    }
    qsort(v, reps, sizeof v[0], cmp_double);
    return v[reps / 2];
}

/* Ranks 1..n-1 all-reduce until rank 0's GEMMs are done: their leader
 * learns it from a flag rank 0 sends, and shares it each iteration. */
static void busy_allreduce(MPI_Comm sub)
{
    int me, stop = 0, flag = 0;
    MPI_Comm_rank(sub, &me);
    float *s = calloc(SLOW_BYTES / 4, 4), *r = calloc(SLOW_BYTES / 4, 4);
    MPI_Request req = MPI_REQUEST_NULL;
    if (me == 0)
        MPI_Irecv(&stop, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, &req);
    while (!flag) {
        MPI_Allreduce(s, r, SLOW_BYTES / 4, MPI_FLOAT, MPI_SUM, sub);
        if (me == 0)
            MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        MPI_Bcast(&flag, 1, MPI_INT, 0, sub);
    }
    free(s), free(r);
}

double calib_bench_comm_slowdown(const calib_plan_t *p, int ncores)
{
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (n < 3 || n > ncores)
        return -1;
    MPI_Comm sub;
    MPI_Comm_split(MPI_COMM_WORLD, rank == 0, rank, &sub);
    double slow = 0;
    int reps = p->reps > 64 ? 64 : p->reps;
    if (rank == 0) {
        float *a = calloc(SLOW_N * SLOW_N, 4), *c = calloc(SLOW_N * SLOW_N, 4);
        double alone = gemm_median_s(c, a, reps);
        MPI_Barrier(MPI_COMM_WORLD); /* the others start all-reducing */
        double busy = gemm_median_s(c, a, reps);
        int stop = 1;
        MPI_Send(&stop, 1, MPI_INT, 1, 7, MPI_COMM_WORLD);
        slow = busy / alone - 1;
        free(a), free(c);
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
        busy_allreduce(sub);
    }
    MPI_Bcast(&slow, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Comm_free(&sub);
    return slow;
}
