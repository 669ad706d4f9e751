/* calib/bench_mpi: MPI as a collective library of the harness in
 * calib/coll.c (one function per collective, on the host buffers the
 * harness fills and checks), and the CPU device's compute slowdown beside
 * an all-reduce. */
#include "calib/calib.h"

#include "kernels/matmul.h"

#include <mpi.h>
#include <stdlib.h>

static void run_allreduce(const calib_coll_buf_t *b)
{
    MPI_Allreduce(b->send, b->recv, (int)b->count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}
static void run_allgather(const calib_coll_buf_t *b)
{
    MPI_Allgather(b->send, (int)(b->count / b->n), MPI_FLOAT, b->recv, (int)(b->count / b->n), MPI_FLOAT,
                  MPI_COMM_WORLD);
}
static void run_reducescatter(const calib_coll_buf_t *b)
{
    MPI_Reduce_scatter_block(b->send, b->recv, (int)(b->count / b->n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}
static void run_alltoall(const calib_coll_buf_t *b)
{
    MPI_Alltoall(b->send, (int)(b->count / b->n), MPI_FLOAT, b->recv, (int)(b->count / b->n), MPI_FLOAT,
                 MPI_COMM_WORLD);
}
/* In place: the root's data stay in send (bcast_in_place). */
static void run_bcast(const calib_coll_buf_t *b)
{
    MPI_Bcast(b->rank ? b->recv : b->send, (int)b->count, MPI_FLOAT, 0, MPI_COMM_WORLD);
}
/* Ring exchange: each rank sends to rank+1 and receives from rank-1. */
static void run_sendrecv(const calib_coll_buf_t *b)
{
    MPI_Sendrecv(b->send, (int)b->count, MPI_FLOAT, (b->rank + 1) % b->n, 0, b->recv, (int)b->count, MPI_FLOAT,
                 (b->rank + b->n - 1) % b->n, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

/* Indexed as calib_colls. */
static void mpi_run(void *impl, int coll, const calib_coll_buf_t *b)
{
    static void (*const run[CALIB_NCOLL])(const calib_coll_buf_t *) = {
        run_allreduce, run_allgather, run_reducescatter, run_alltoall, run_bcast, run_sendrecv};
    run[coll](b);
}

static const calib_coll_lib_t mpi_lib = {.nccl = 0, .bcast_in_place = 1, .run = mpi_run};

void calib_bench_collectives(const calib_plan_t *p, calib_table_t *t, int verbose)
{
    calib_coll_sweep(p, &mpi_lib, NULL, t, verbose);
}

/* ---- compute beside a collective ------------------------------------------ */

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
    return calib_stats(v, reps, 1).med_s;
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

void calib_bench_comm_slowdown(const calib_plan_t *p, int ncores, calib_table_t *overlap)
{
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (n < 3 || n > ncores)
        return;
    MPI_Comm sub;
    MPI_Comm_split(MPI_COMM_WORLD, rank == 0, rank, &sub);
    int reps = p->reps > 64 ? 64 : p->reps;
    if (rank == 0) {
        float *a = calloc(SLOW_N * SLOW_N, 4), *c = calloc(SLOW_N * SLOW_N, 4);
        double alone = gemm_median_s(c, a, reps);
        MPI_Barrier(MPI_COMM_WORLD); /* the others start all-reducing */
        double busy = gemm_median_s(c, a, reps);
        int stop = 1;
        MPI_Send(&stop, 1, MPI_INT, 1, 7, MPI_COMM_WORLD);
        calib_overlap_row(overlap, SLOW_N, SLOW_BYTES, alone, busy);
        free(a), free(c);
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
        busy_allreduce(sub);
    }
    MPI_Comm_free(&sub);
}
