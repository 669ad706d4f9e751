/* tests/real/test_nccl_emu.c: the NCCL emulation (tests/real/emu/nccl_emu.cc)
 * against worked-out values, one process per rank under mpirun. Each check
 * prints expected vs got, and its comment says where the expected value
 * comes from. Results are compared bit for bit: the emulation's sums run in
 * rank order, so they are exact and the same on every rank.
 *
 *   all           4 ranks, OMPI_MPI_THREAD_LEVEL=3: collectives over the
 *                 world and over 2-rank sub-communicators, grouped and
 *                 ungrouped point to point, issue order across streams,
 *                 a group over two streams, argument and async errors
 *   thread_level  2 ranks, without the variable: ncclCommInitRank refuses
 *                 (ncclInvalidUsage, one stderr line) instead of hanging
 *
 * usage: mpirun -np 4 -x OMPI_MPI_THREAD_LEVEL=3 test_nccl_emu all
 *        mpirun -np 2 test_nccl_emu thread_level */
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int world_rank, world_size, failures;

static void die(const char *file, int line, const char *call, const char *msg)
{
    fprintf(stderr, "%s:%d: rank %d: %s: %s\n", file, line, world_rank, call, msg);
    MPI_Abort(MPI_COMM_WORLD, 1);
}
#define NCCL_CK(call)                                                                \
    do {                                                                             \
        ncclResult_t r_ = (call);                                                    \
        if (r_ != ncclSuccess)                                                       \
            die(__FILE__, __LINE__, #call, ncclGetLastError(NULL));                  \
    } while (0)
#define CUDA_CK(call)                                                                \
    do {                                                                             \
        cudaError_t e_ = (call);                                                     \
        if (e_ != cudaSuccess)                                                       \
            die(__FILE__, __LINE__, #call, cudaGetErrorString(e_));                  \
    } while (0)

/* A deadlock fails fast and says so (ctest's TIMEOUT is 120 s). */
static void on_alarm(int sig)
{
    static const char msg[] = "test_nccl_emu: no progress in 90 s: a deadlock in the NCCL emulation?\n";
    (void)sig;
    if (write(2, msg, sizeof msg - 1) < 0)
        _exit(3);
    _exit(3);
}

/* ---- checks ------------------------------------------------------------------ */

typedef enum { F32, I32, BF16 } elem_t;

static double value_at(elem_t k, const void *p, size_t i)
{
    if (k == F32)
        return ((const float *)p)[i];
    if (k == I32)
        return ((const int32_t *)p)[i];
    uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16; /* bf16: the high half of an fp32 */
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* got == want bit for bit; prints the first mismatch (else the first value). */
static void expect(const char *what, elem_t k, const void *got, const void *want, size_t n, const char *source)
{
    size_t es = k == BF16 ? 2 : 4, bad = 0, at = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp((const char *)got + i * es, (const char *)want + i * es, es) && !bad++)
            at = i;
    failures += bad != 0;
    printf("%s rank %d %s: %zu values, %zu wrong; [%zu] expected %.9g (%s), got %.9g\n", bad ? "FAIL" : "ok  ",
           world_rank, what, n, bad, at, value_at(k, want, at), source, value_at(k, got, at));
}

/* A call expected to fail with want, its ncclGetLastError naming text. */
static void expect_rc(const char *what, ncclResult_t want, ncclResult_t got, const char *text)
{
    const char *msg = ncclGetLastError(NULL);
    int ok = got == want && strstr(msg, text) != NULL;
    failures += !ok;
    printf("%s rank %d %s: expected %s (%d) with a message containing '%s', got %s (%d): %s\n", ok ? "ok  " : "FAIL",
           world_rank, what, ncclGetErrorString(want), (int)want, text, ncclGetErrorString(got), (int)got, msg);
}

/* ---- device buffers ------------------------------------------------------------ */

static void *dev_with(const void *host, size_t bytes)
{
    void *d = NULL;
    CUDA_CK(cudaMalloc(&d, bytes));
    if (host)
        CUDA_CK(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice));
    return d;
}

/* Waits for s, copies the result back and frees it. */
static void fetch(void *host, void *d, size_t bytes, cudaStream_t s)
{
    CUDA_CK(cudaStreamSynchronize(s));
    CUDA_CK(cudaMemcpy(host, d, bytes, cudaMemcpyDeviceToHost));
    CUDA_CK(cudaFree(d));
}

/* ---- communicators -------------------------------------------------------------- */

/* Over the ranks of mc, with this rank as NCCL rank nccl_rank: the id is
 * made by NCCL rank 0 and broadcast over mc. */
static ncclComm_t make_comm(MPI_Comm mc, int nccl_rank)
{
    int n = 0, me = 0, root = 0, mine = 0;
    MPI_Comm_size(mc, &n);
    MPI_Comm_rank(mc, &me);
    mine = nccl_rank == 0 ? me : -1;
    MPI_Allreduce(&mine, &root, 1, MPI_INT, MPI_MAX, mc);
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (nccl_rank == 0)
        NCCL_CK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, root, mc);
    ncclComm_t c = NULL;
    NCCL_CK(ncclCommInitRank(&c, n, id, nccl_rank));
    return c;
}

/* ---- collectives ------------------------------------------------------------------- */

enum { AR_N = 1000 };

/* x[i] = mine * (i % 7 + 1) on every member; the sum is sum * (i % 7 + 1). */
static void allreduce_f32(ncclComm_t c, cudaStream_t s, const char *what, float mine, float sum, const char *source)
{
    static float x[AR_N], want[AR_N], got[AR_N];
    for (int i = 0; i < AR_N; i++)
        x[i] = mine * (float)(i % 7 + 1), want[i] = sum * (float)(i % 7 + 1);
    float *send = dev_with(x, sizeof x), *recv = dev_with(NULL, sizeof x);
    NCCL_CK(ncclAllReduce(send, recv, AR_N, ncclFloat, ncclSum, c, s));
    fetch(got, recv, sizeof got, s);
    CUDA_CK(cudaFree(send));
    expect(what, F32, got, want, AR_N, source);
}

/* bf16 in place: even elements `even` (bits), odd ones `odd`. */
static void allreduce_bf16(ncclComm_t c, cudaStream_t s, const char *what, uint16_t even, uint16_t odd,
                           uint16_t want_even, uint16_t want_odd, const char *source)
{
    enum { N = 64 };
    uint16_t x[N], want[N], got[N];
    for (int i = 0; i < N; i++)
        x[i] = i % 2 ? odd : even, want[i] = i % 2 ? want_odd : want_even;
    void *buf = dev_with(x, sizeof x);
    NCCL_CK(ncclAllReduce(buf, buf, N, ncclBfloat16, ncclSum, c, s));
    fetch(got, buf, sizeof got, s);
    expect(what, BF16, got, want, N, source);
}

static void test_allreduce_world(ncclComm_t c, cudaStream_t s)
{
    /* rank r gives (r + 1) / 4: 0.25 + 0.5 + 0.75 + 1 = 2.5, every partial sum exact in fp32 */
    allreduce_f32(c, s, "allreduce float, world", (float)(world_rank + 1) * 0.25f, 2.5f, "sum of (r+1)/4 = 2.5");
    /* rank order: 1e8 + 1 = 1e8 in fp32 (spacing 8 there), - 1e8 = 0, + 1 = 1; the exact sum is 2 */
    static const float order[4] = {1e8f, 1.0f, -1e8f, 1.0f};
    float x = order[world_rank % 4], want = 1.0f, got = 0;
    float *buf = dev_with(&x, sizeof x);
    NCCL_CK(ncclAllReduce(buf, buf, 1, ncclFloat, ncclSum, c, s));
    fetch(&got, buf, sizeof got, s);
    expect("allreduce float, world, rank order", F32, &got, &want, 1, "((1e8 + 1) - 1e8) + 1 in fp32");
    /* bf16, summed in fp32 and rounded once: 256 + 1 + 1 + 1 = 259, halfway between the bf16
     * neighbours 258 (0x4381) and 260 (0x4382): to even, 260. Rounding each partial sum to bf16
     * would give 256 (257 rounds to 256 every time). Odd elements: 0.5 + 1 + 1.5 + 2 = 5 (0x40a0). */
    static const uint16_t halves[4] = {0x3f00, 0x3f80, 0x3fc0, 0x4000};
    allreduce_bf16(c, s, "allreduce bf16 in place, world", world_rank == 0 ? 0x4380 : 0x3f80, halves[world_rank % 4],
                   0x4382, 0x40a0, "fp32 sum rounded once: 259 -> 260; 5");
}

/* pair p = world ranks {2p, 2p+1}, NCCL rank 0 the odd one (NCCL order, not world order) */
static void test_pair(ncclComm_t c, cudaStream_t s)
{
    int pair = world_rank / 2, nrank = 1 - world_rank % 2;
    /* world rank w gives w + 1: pair 0 sums 1 + 2 = 3, pair 1 sums 3 + 4 = 7 */
    allreduce_f32(c, s, "allreduce float, 2-rank pair", (float)(world_rank + 1), (float)(4 * pair + 3),
                  "(2p+1) + (2p+2)");
    /* NCCL rank 0 gives 256, rank 1 gives 3: 259 -> 260 (0x4382) as above; odd: 1 + 1 = 2 (0x4000) */
    allreduce_bf16(c, s, "allreduce bf16 in place, 2-rank pair", nrank == 0 ? 0x4380 : 0x4040, 0x3f80, 0x4382, 0x4000,
                   "fp32 sum rounded once: 259 -> 260; 2");
    /* in-place int32 allgather of world ranks: slot j holds NCCL rank j's, [2p+1, 2p] */
    int32_t want[2] = {2 * pair + 1, 2 * pair}, got[2] = {0, 0};
    got[nrank] = world_rank;
    int32_t *buf = dev_with(got, sizeof got);
    NCCL_CK(ncclAllGather(buf + nrank, buf, 1, ncclInt32, c, s));
    fetch(got, buf, sizeof got, s);
    expect("allgather int32 in place, 2-rank pair: world rank per NCCL rank", I32, got, want, 2,
           "NCCL rank 0 is the odd world rank");
}

static void test_allgather(ncclComm_t c, cudaStream_t s)
{
    enum { N = 256 };
    static float buf_h[4 * N], want[4 * N];
    for (int j = 0; j < world_size; j++)
        for (int i = 0; i < N; i++)
            want[j * N + i] = (float)(j * 1000 + i), buf_h[j * N + i] = j == world_rank ? want[j * N + i] : -1.0f;
    float *buf = dev_with(buf_h, sizeof buf_h);
    NCCL_CK(ncclAllGather(buf + world_rank * N, buf, N, ncclFloat, c, s));
    fetch(buf_h, buf, sizeof buf_h, s);
    expect("allgather float in place, world", F32, buf_h, want, (size_t)world_size * N, "slot j holds j*1000 + i");
}

static void test_reduce_scatter(ncclComm_t c, cudaStream_t s)
{
    enum { N = 300, M = 50 };
    static float in[4 * N], want[N], got[N];
    /* in_r[k] = (r + 1) * k: the sum is 10k; rank r keeps block r, k = r*300 + i (<= 11990, exact) */
    for (int k = 0; k < 4 * N; k++)
        in[k] = (float)((world_rank + 1) * k);
    for (int i = 0; i < N; i++)
        want[i] = (float)(10 * (world_rank * N + i));
    float *send = dev_with(in, sizeof in), *recv = dev_with(NULL, sizeof got);
    NCCL_CK(ncclReduceScatter(send, recv, N, ncclFloat, ncclSum, c, s));
    fetch(got, recv, sizeof got, s);
    CUDA_CK(cudaFree(send));
    expect("reduce-scatter float, world", F32, got, want, N, "10 * (r*300 + i)");
    /* int32 in place: in_r[j*50 + i] = 100r + 10j + i; block j sums to 600 + 4(10j + i) */
    int32_t x[4 * M], wi[M];
    for (int j = 0; j < 4; j++)
        for (int i = 0; i < M; i++)
            x[j * M + i] = 100 * world_rank + 10 * j + i;
    for (int i = 0; i < M; i++)
        wi[i] = 600 + 4 * (10 * world_rank + i);
    int32_t *buf = dev_with(x, sizeof x);
    NCCL_CK(ncclReduceScatter(buf, buf + world_rank * M, M, ncclInt32, ncclSum, c, s));
    fetch(x, buf, sizeof x, s);
    expect("reduce-scatter int32 in place, world", I32, x + world_rank * M, wi, M, "600 + 4*(10r + i)");
}

static void test_broadcast(ncclComm_t c, cudaStream_t s)
{
    enum { N = 500, ROOT = 2 };
    static float x[N], want[N], got[N];
    for (int i = 0; i < N; i++)
        want[i] = (float)(3 * i + 1), x[i] = world_rank == ROOT ? want[i] : -1.0f;
    float *send = dev_with(x, sizeof x), *recv = dev_with(NULL, sizeof x);
    NCCL_CK(ncclBroadcast(world_rank == ROOT ? send : recv, recv, N, ncclFloat, ROOT, c, s));
    fetch(got, recv, sizeof got, s);
    CUDA_CK(cudaFree(send));
    expect("broadcast float from rank 2, world", F32, got, want, N, "root's 3i + 1");
}

/* ---- point to point -------------------------------------------------------------------- */

/* Send to the next rank and receive from the previous, 1 MiB, in one group.
 * A send completes only once its receive has matched (as NCCL's do on the
 * GPU), so issued alone, every rank's send would wait forever. */
static void test_ring(ncclComm_t c, cudaStream_t s)
{
    enum { N = 1 << 18 }; /* 1 MiB of float */
    int next = (world_rank + 1) % world_size, prev = (world_rank + world_size - 1) % world_size;
    float *x = malloc(N * sizeof *x), *want = malloc(N * sizeof *want);
    for (int i = 0; i < N; i++)
        x[i] = (float)(world_rank * 100000 + i % 100000), want[i] = (float)(prev * 100000 + i % 100000);
    float *send = dev_with(x, N * sizeof *x), *recv = dev_with(NULL, N * sizeof *x);
    NCCL_CK(ncclGroupStart());
    NCCL_CK(ncclSend(send, N, ncclFloat, next, c, s));
    NCCL_CK(ncclRecv(recv, N, ncclFloat, prev, c, s));
    NCCL_CK(ncclGroupEnd());
    fetch(x, recv, N * sizeof *x, s);
    CUDA_CK(cudaFree(send));
    expect("grouped ring step, 1 MiB, world", F32, x, want, N, "previous rank's 100000*prev + i%100000");
    free(x), free(want);
}

/* Even ranks send A then B to the next (odd) rank, ungrouped: the receives
 * match in issue order. */
static void test_send_recv(ncclComm_t c, cudaStream_t s)
{
    enum { NA = 100, NB = 50 };
    float a[NA], b[NB], wa[NA], wb[NB];
    for (int i = 0; i < NA; i++)
        wa[i] = (float)(i + 1);
    for (int i = 0; i < NB; i++)
        wb[i] = (float)-(i + 1);
    int odd = world_rank % 2;
    float *da = dev_with(odd ? NULL : wa, sizeof a), *db = dev_with(odd ? NULL : wb, sizeof b);
    if (!odd) {
        NCCL_CK(ncclSend(da, NA, ncclFloat, world_rank + 1, c, s));
        NCCL_CK(ncclSend(db, NB, ncclFloat, world_rank + 1, c, s));
    } else {
        NCCL_CK(ncclRecv(da, NA, ncclFloat, world_rank - 1, c, s));
        NCCL_CK(ncclRecv(db, NB, ncclFloat, world_rank - 1, c, s));
    }
    fetch(a, da, sizeof a, s);
    fetch(b, db, sizeof b, s);
    if (odd) {
        expect("ungrouped recv A (first sent), world", F32, a, wa, NA, "1..100");
        expect("ungrouped recv B (second sent), world", F32, b, wb, NB, "-1..-50");
    }
}

/* ---- issue order across streams ---------------------------------------------------------- */

static void sleep_200ms(void *unused)
{
    (void)unused;
    struct timespec t = {0, 200 * 1000 * 1000};
    nanosleep(&t, NULL);
}

/* An allreduce on s1, held back 200 ms, then an allgather of its result on
 * s2 (free): NCCL runs a communicator's operations in issue order, so the
 * allgather sees the sums (10), not the inputs (1, 2, 3, 4). */
static void test_two_streams(ncclComm_t c, cudaStream_t s1, cudaStream_t s2)
{
    enum { N = 64 };
    float x[N], got[4 * N], want[4 * N];
    for (int i = 0; i < N; i++)
        x[i] = (float)(world_rank + 1);
    for (int i = 0; i < 4 * N; i++)
        want[i] = 10.0f;
    float *a = dev_with(x, sizeof x), *b = dev_with(NULL, sizeof got);
    CUDA_CK(cudaLaunchHostFunc(s1, sleep_200ms, NULL));
    NCCL_CK(ncclAllReduce(a, a, N, ncclFloat, ncclSum, c, s1));
    NCCL_CK(ncclAllGather(a, b, N, ncclFloat, c, s2));
    CUDA_CK(cudaStreamSynchronize(s1));
    fetch(got, b, sizeof got, s2);
    CUDA_CK(cudaFree(a));
    expect("allreduce on s1 (delayed) then allgather on s2, world", F32, got, want, 4 * N,
           "1+2+3+4, the allreduce first");
}

struct fill {
    float *buf;
    int n;
    float base;
};

static void fill_late(void *arg)
{
    struct fill *f = arg;
    sleep_200ms(NULL);
    for (int i = 0; i < f->n; i++)
        f->buf[i] = f->base + (float)i;
}

/* A ring step whose receive is on s2 and send on s1, where the send buffer
 * is written 200 ms late: the group's launch waits for both streams, and
 * both wait for it (copies of the result on s1 and on s2). */
static void test_group_two_streams(ncclComm_t c, cudaStream_t s1, cudaStream_t s2)
{
    enum { N = 1000 };
    int next = (world_rank + 1) % world_size, prev = (world_rank + world_size - 1) % world_size;
    float got1[N], got2[N], want[N];
    for (int i = 0; i < N; i++)
        want[i] = (float)(prev * 10000 + i);
    float *send = dev_with(NULL, sizeof want), *recv = dev_with(NULL, sizeof want);
    float *out1 = dev_with(NULL, sizeof want), *out2 = dev_with(NULL, sizeof want);
    static struct fill f;
    f = (struct fill){send, N, (float)(world_rank * 10000)};
    CUDA_CK(cudaMemsetAsync(send, 0, sizeof want, s1));
    CUDA_CK(cudaLaunchHostFunc(s1, fill_late, &f));
    NCCL_CK(ncclGroupStart());
    NCCL_CK(ncclRecv(recv, N, ncclFloat, prev, c, s2));
    NCCL_CK(ncclSend(send, N, ncclFloat, next, c, s1));
    NCCL_CK(ncclGroupEnd());
    CUDA_CK(cudaMemcpyAsync(out1, recv, sizeof want, cudaMemcpyDeviceToDevice, s1));
    CUDA_CK(cudaMemcpyAsync(out2, recv, sizeof want, cudaMemcpyDeviceToDevice, s2));
    fetch(got1, out1, sizeof got1, s1);
    fetch(got2, out2, sizeof got2, s2);
    CUDA_CK(cudaFree(send));
    CUDA_CK(cudaFree(recv));
    expect("group over s2 (recv) and s1 (send, filled late), read on s1", F32, got1, want, N, "prev*10000 + i");
    expect("group over s2 (recv) and s1 (send, filled late), read on s2", F32, got2, want, N, "prev*10000 + i");
}

/* ---- errors ------------------------------------------------------------------------------------- */

/* Refused before any communication, so each rank checks alone. */
static void test_bad_arguments(ncclComm_t world, cudaStream_t s)
{
    ncclUniqueId id, zero;
    ncclComm_t c = NULL;
    float *buf = dev_with(NULL, 64);
    memset(&zero, 0, sizeof zero);
    NCCL_CK(ncclGetUniqueId(&id));
    expect_rc("ncclCommInitRank rank 4 of 4", ncclInvalidArgument, ncclCommInitRank(&c, 4, id, 4), "rank 4 out of range");
    expect_rc("ncclCommInitRank rank -1 of 4", ncclInvalidArgument, ncclCommInitRank(&c, 4, id, -1), "out of range");
    expect_rc("ncclCommInitRank nranks 0", ncclInvalidArgument, ncclCommInitRank(&c, 0, id, 0), "nranks 0");
    expect_rc("ncclCommInitRank, an id of zeros", ncclInvalidArgument, ncclCommInitRank(&c, 4, zero, 0),
              "not made by ncclGetUniqueId");
    expect_rc("ncclAllReduce int8", ncclInvalidArgument, ncclAllReduce(buf, buf, 4, ncclInt8, ncclSum, world, s),
              "datatype 0");
    expect_rc("ncclAllReduce ncclMax", ncclInvalidArgument, ncclAllReduce(buf, buf, 4, ncclFloat, ncclMax, world, s),
              "op 2");
    expect_rc("ncclSend to peer 9 of 4", ncclInvalidArgument, ncclSend(buf, 4, ncclFloat, 9, world, s), "peer 9");
    expect_rc("ncclGroupEnd alone", ncclInvalidUsage, ncclGroupEnd(), "without ncclGroupStart");
    /* an error inside a group drops the group and comes back from ncclGroupEnd */
    NCCL_CK(ncclGroupStart());
    ncclRecv(buf, 4, ncclFloat, -2, world, s);
    expect_rc("ncclGroupEnd of a group with a bad ncclRecv", ncclInvalidArgument, ncclGroupEnd(), "peer -2");
    CUDA_CK(cudaFree(buf));
}

/* On the pair: NCCL rank 0 sends 10 floats, rank 1 receives 20. The
 * receiver's launch fails (stderr) and its next call returns the error;
 * then both abort the communicator, which must not hang. */
static void test_async_error(ncclComm_t pair, cudaStream_t s)
{
    int nrank = 1 - world_rank % 2;
    float *buf = dev_with(NULL, 20 * sizeof(float));
    if (nrank == 0)
        NCCL_CK(ncclSend(buf, 10, ncclFloat, 1, pair, s));
    else
        NCCL_CK(ncclRecv(buf, 20, ncclFloat, 0, pair, s));
    CUDA_CK(cudaStreamSynchronize(s));
    if (nrank == 1)
        expect_rc("call after a failed ncclRecv (20 posted, 10 sent)", ncclInvalidUsage,
                  ncclRecv(buf, 20, ncclFloat, 0, pair, s), "failed before");
    NCCL_CK(ncclCommAbort(pair));
    CUDA_CK(cudaFree(buf));
}

/* ---- modes ----------------------------------------------------------------------------------------- */

static int run_all(void)
{
    cudaStream_t s, s1, s2;
    CUDA_CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CUDA_CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    int version = 0;
    NCCL_CK(ncclGetVersion(&version));
    if (world_rank == 0)
        printf("NCCL emulation, version code %d, %d ranks\n", version, world_size);
    ncclComm_t world = make_comm(MPI_COMM_WORLD, world_rank);
    MPI_Comm pair_mpi;
    MPI_Comm_split(MPI_COMM_WORLD, world_rank / 2, world_rank, &pair_mpi);
    ncclComm_t pair = make_comm(pair_mpi, 1 - world_rank % 2);
    test_allreduce_world(world, s);
    test_pair(pair, s);
    test_allgather(world, s);
    test_reduce_scatter(world, s);
    test_broadcast(world, s);
    test_ring(world, s);
    test_send_recv(world, s);
    test_two_streams(world, s1, s2);
    test_group_two_streams(world, s1, s2);
    test_bad_arguments(world, s);
    test_async_error(pair, s);
    NCCL_CK(ncclCommDestroy(world));
    MPI_Comm_free(&pair_mpi);
    CUDA_CK(cudaStreamDestroy(s));
    CUDA_CK(cudaStreamDestroy(s1));
    CUDA_CK(cudaStreamDestroy(s2));
    return 0;
}

/* Reads what fd 2 received while fn ran: the emulation's stderr lines. */
static ncclResult_t capture_stderr(char *out, size_t len, ncclComm_t *c, ncclUniqueId id)
{
    fflush(stderr);
    int saved = dup(2);
    FILE *tmp = tmpfile();
    if (saved < 0 || !tmp || dup2(fileno(tmp), 2) < 0)
        die(__FILE__, __LINE__, "capture_stderr", "cannot redirect stderr");
    ncclResult_t r = ncclCommInitRank(c, world_size, id, world_rank);
    fflush(stderr);
    dup2(saved, 2), close(saved);
    rewind(tmp);
    size_t n = fread(out, 1, len - 1, tmp);
    out[n] = 0;
    fclose(tmp);
    return r;
}

static int run_thread_level(void)
{
    int level = 0, lines = 0;
    char err[2048];
    MPI_Query_thread(&level);
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (world_rank == 0)
        NCCL_CK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t c = (ncclComm_t)&level; /* must come back NULL */
    ncclResult_t r = capture_stderr(err, sizeof err, &c, id);
    for (char *p = err; *p; p++)
        lines += *p == '\n';
    int ok = level < MPI_THREAD_MULTIPLE && r == ncclInvalidUsage && c == NULL && lines == 1 &&
             strstr(err, "OMPI_MPI_THREAD_LEVEL=3") != NULL;
    failures += !ok;
    printf("%s rank %d MPI thread level %d (MPI_THREAD_MULTIPLE is %d; this mode runs without "
           "OMPI_MPI_THREAD_LEVEL): ncclCommInitRank expected ncclInvalidUsage (5), comm NULL and one stderr line "
           "naming OMPI_MPI_THREAD_LEVEL=3; got %s (%d), comm %s, %d line(s): %s\n",
           ok ? "ok  " : "FAIL", world_rank, level, MPI_THREAD_MULTIPLE, ncclGetErrorString(r), (int)r,
           c ? "set" : "NULL", lines, err);
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    signal(SIGALRM, on_alarm);
    alarm(90);
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "all") && world_size == 4)
        run_all();
    else if (!strcmp(mode, "thread_level"))
        run_thread_level();
    else {
        if (world_rank == 0)
            fprintf(stderr, "usage: mpirun -np 4 -x OMPI_MPI_THREAD_LEVEL=3 test_nccl_emu all | "
                            "mpirun -np 2 test_nccl_emu thread_level (got mode '%s' on %d ranks)\n",
                    mode, world_size);
        MPI_Finalize();
        return 2;
    }
    int total = 0;
    fflush(stdout);
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (world_rank == 0)
        printf("%s: %d failed check(s) over %d ranks\n", total ? "FAIL" : "ok", total, world_size);
    MPI_Finalize();
    return total ? 1 : 0;
}
