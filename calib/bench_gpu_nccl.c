/* calib/bench_gpu_nccl: the communication benchmarks of the GPU
 * calibration device (calib/bench_gpu.c): NCCL collectives through the
 * harness of calib/coll.c (nccl-tests' way, every element checked), one GPU
 * per rank; and comm_slowdown, a GEMM timed alone and then beside
 * back-to-back all-reduces on the same GPU (>= 2 ranks). */
#include "calib/bench_gpu_int.h"

#include <math.h>
#include <mpi.h>
#include <stdio.h>

/* One call of collective `coll` on bg.dsend / bg.drecv (fp32, sum) on the
 * collective stream, as nccl-tests issues it; all-to-all and send/recv
 * are grouped ncclSend/ncclRecv (to every rank, self included; to the next
 * rank in a ring). */
static void nccl_run(void *impl, int coll, const calib_coll_buf_t *b)
{
    size_t count = (size_t)b->count, per = count / b->n;
    float *s = bg.dsend, *r = bg.drecv;
    switch (coll) {
    case 0:
        NCCL_CK(ncclAllReduce(s, r, count, ncclFloat, ncclSum, bg.comm, bg.s_comm));
        break;
    case 1:
        NCCL_CK(ncclAllGather(s, r, per, ncclFloat, bg.comm, bg.s_comm));
        break;
    case 2:
        NCCL_CK(ncclReduceScatter(s, r, per, ncclFloat, ncclSum, bg.comm, bg.s_comm));
        break;
    case 3:
        NCCL_CK(ncclGroupStart());
        for (int j = 0; j < b->n; j++) {
            NCCL_CK(ncclSend(s + j * per, per, ncclFloat, j, bg.comm, bg.s_comm));
            NCCL_CK(ncclRecv(r + j * per, per, ncclFloat, j, bg.comm, bg.s_comm));
        }
        NCCL_CK(ncclGroupEnd());
        break;
    case 4:
        NCCL_CK(ncclBroadcast(s, r, count, ncclFloat, 0, bg.comm, bg.s_comm));
        break;
    default:
        NCCL_CK(ncclGroupStart());
        NCCL_CK(ncclSend(s, count, ncclFloat, (b->rank + 1) % b->n, bg.comm, bg.s_comm));
        NCCL_CK(ncclRecv(r, count, ncclFloat, (b->rank + b->n - 1) % b->n, bg.comm, bg.s_comm));
        NCCL_CK(ncclGroupEnd());
    }
}

static void nccl_sync(void *impl) { CUDA_CK(cudaStreamSynchronize(bg.s_comm)); }

static void nccl_put(void *impl, const calib_coll_buf_t *b)
{
    CUDA_CK(cudaMemcpy(bg.dsend, b->send, sizeof(float) * b->count, cudaMemcpyHostToDevice));
    CUDA_CK(cudaMemcpy(bg.drecv, b->recv, sizeof(float) * b->count, cudaMemcpyHostToDevice));
    CUDA_CK(cudaDeviceSynchronize()); /* before the collective stream reads them */
}

static void nccl_get(void *impl, calib_coll_buf_t *b)
{
    CUDA_CK(cudaMemcpy(b->send, bg.dsend, sizeof(float) * b->count, cudaMemcpyDeviceToHost));
    CUDA_CK(cudaMemcpy(b->recv, bg.drecv, sizeof(float) * b->count, cudaMemcpyDeviceToHost));
}

static const calib_coll_lib_t nccl_lib = {.nccl = 1, .bcast_in_place = 0, .run = nccl_run, .sync = nccl_sync,
                                          .put = nccl_put, .get = nccl_get};

/* The communicator over MPI_COMM_WORLD (rank 0's unique id, broadcast over
 * MPI) and the two buffers, made once. */
static void nccl_open(const calib_plan_t *p)
{
    if (bg.comm)
        return;
    ncclUniqueId id;
    if (bg.rank == 0)
        NCCL_CK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    NCCL_CK(ncclCommInitRank(&bg.comm, bg.nranks, id, bg.rank));
    bg.dsend = bg_dalloc(calib_coll_top_bytes(p));
    bg.drecv = bg_dalloc(calib_coll_top_bytes(p));
}

void bg_collectives(const calib_plan_t *p, calib_table_t *t, int verbose)
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
    calib_coll_buf_t b = {NULL, NULL, count, bg.rank, bg.nranks};
    bg_gemm_t c = {0};
    double alone = 0, busy = 0, window = 0;
    if (bg.rank == 0) {
        bg_gemm_alloc(&c, s, s, s, 0);
        double t0 = calib_now_s();
        alone = bg_time(bg_gemm_call, &c, p).med_s;
        window = calib_now_s() - t0;
    }
    double ar = allreduce_s(&b);
    if (bg.rank == 0)
        nar = (int)fmin(1e5, ceil(2 * window / fmax(ar, 1e-6))) + 2;
    MPI_Bcast(&nar, 1, MPI_INT, 0, MPI_COMM_WORLD);
    cudaEvent_t done;
    CUDA_CK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < nar; i++)
        nccl_run(NULL, 0, &b);
    CUDA_CK(cudaEventRecord(done, bg.s_comm));
    if (bg.rank == 0) {
        busy = bg_time(bg_gemm_call, &c, p).med_s;
        cudaError_t q = cudaEventQuery(done); /* still all-reducing: the GEMMs ran beside it throughout */
        if (q != cudaSuccess && q != cudaErrorNotReady)
            bg_die(__FILE__, __LINE__, "cudaEventQuery", cudaGetErrorString(q));
        covered = q == cudaErrorNotReady;
        cudaGetLastError(); /* cudaErrorNotReady is a state, not an error */
    }
    CUDA_CK(cudaStreamSynchronize(bg.s_comm));
    CUDA_CK(cudaEventDestroy(done));
    if (bg.rank == 0) {
        bg_gemm_release(&c);
        calib_overlap_row(t, s, 4.0 * count, alone, busy);
        if (!covered)
            fprintf(stderr, "megasim calibrate: warning: the %d all-reduces of %ld floats ended before the %d^3 GEMM "
                            "samples did; that comm_slowdown sample may be understated\n", nar, count, s);
    }
}

/* The overlap samples over two GEMM sizes (2048^3 and 4096^3; 512^3 and
 * 1024^3 --tiny) and two all-reduce sizes (the sweep's largest and 1/16 of
 * it). Needs >= 2 ranks (NCCL only runs a collective with its peers). */
void bg_comm_slowdown(const calib_plan_t *p, int ncores, calib_table_t *t)
{
    if (bg.nranks < 2)
        return;
    nccl_open(p);
    int big = p->level == CALIB_TINY ? 1024 : 4096;
    long top = calib_coll_top_bytes(p) / 4;
    for (int s = big / 2; s <= big; s *= 2)
        for (long count = top / 16; count <= top; count *= 16)
            overlap_point(p, s, count, t);
}
