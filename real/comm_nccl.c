/* real/comm_nccl.c: the rank's groups (comm.h) as NCCL communicators on
 * the GPU runtime. The MPI sub-communicators come from comm_groups_init
 * (comm_mpi.c) and bootstrap the NCCL ones: the first member of each NCCL
 * communicator makes its ncclUniqueId and the others get it over the
 * group's MPI communicator.
 *
 * Two facts of NCCL shape the communicators: it runs the operations of one
 * communicator one after another in issue order, whatever stream they are
 * on (each launch waits for the previous one); and a group_begin/group_end
 * spanning several communicators becomes one launch per communicator, one
 * after another on the stream. So:
 *   collectives      one communicator per group (size > 1);
 *   grouped p2p      one per group and tag, for the transfers issued
 *                    between group_begin and group_end (Megatron's batched
 *                    pipeline exchanges, the TP ring steps): a ring step
 *                    (send to the next, receive from the previous) is then
 *                    one launch, and the FWD launch of a batch precedes its
 *                    BWD launch on both sides of every link;
 *   ungrouped p2p    one 2-rank communicator per directed link between
 *                    adjacent pipeline stages (s -> s+1, s -> s-1, ring
 *                    order) and tag, for transfers issued alone on their
 *                    stream (MegaScale's decoupled sends and receives):
 *                    with a group-wide one, a stage's send to s+1 would
 *                    queue behind a receive from s-1 posted earlier, which
 *                    may need that very send.
 * Both sides of a transfer must issue it the same way, grouped or not, as
 * exec.c does (its batched programs group every transfer, its decoupled
 * ones none). With that, a dependency model of exec.c's programs (1F1B,
 * GPipe, interleaved; batched and decoupled; up to 8 stages) finds no
 * cycle once each pipeline direction has its own stream; a group-wide
 * communicator per tag alone, or links alone, leave cycles.
 *
 * Every rank creates its communicators in one global order (group; then
 * collectives, per-tag, links by tag, sender, direction), and a creation
 * waits only for its members, so the smallest pending one always
 * completes. Destruction walks the same order. Calls are enqueued on the
 * runtime's CUDA streams and return at once; collectives over groups of
 * one are no-ops. */
#include "real/comm.h"
#include "real/rt_gpu_int.h"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The tags each group carries: grouped transfers on a communicator of the
 * whole group, ungrouped ones on links (comm.h: TAG_RING on TP; TAG_FWD,
 * TAG_BWD on the pipeline). */
static int grouped_tag(int grp, int tag)
{
    return ((grp == GRP_TP || grp == GRP_CP) && tag == TAG_RING) ||
           (grp == GRP_PP && (tag == TAG_FWD || tag == TAG_BWD));
}

static int link_tag(int grp, int tag) { return grp == GRP_PP && (tag == TAG_FWD || tag == TAG_BWD); }

enum { LINK_SEND, LINK_RECV };

typedef struct {
    ncclComm_t coll[GRP_COUNT];                 /* NULL where size <= 1 */
    ncclComm_t tagc[GRP_COUNT][COMM_NTAGS];     /* grouped transfers */
    ncclComm_t *link[GRP_COUNT][COMM_NTAGS][2]; /* [LINK_SEND][to stage], [LINK_RECV][from stage] */
    int depth;                                  /* open group_begin calls */
} nccl_impl_t;

static const char *const grp_name[GRP_COUNT] = {"TP", "DP", "PP", "EMB", "WORLD", "CP", "EP", "EDP", "ETP"};

static int nccl_error(ncclResult_t r, const char *what, const char *file, int line)
{
    fprintf(stderr, "%s:%d: %s: NCCL error %d: %s (%s)\n", file, line, what, (int)r, ncclGetErrorString(r),
            ncclGetLastError(NULL));
    return -1;
}

#define NCCL_TRY(call)                                                                   \
    do {                                                                                 \
        ncclResult_t r_ = (call);                                                        \
        if (r_ != ncclSuccess)                                                           \
            return nccl_error(r_, #call, __FILE__, __LINE__);                            \
    } while (0)

/* The compute stream's wait on what the NCCL calls (on `stream`) do
 * there: its peers' arrival and the transfer, bracketed as a stall
 * (g_stall) when stream is a compute stream, the op's wait_ns. Inside a
 * group (group_begin) nothing launches until group_end: no stall. */
#define NCCL_STALLED(c, stream, ...)                                                     \
    do {                                                                                 \
        int stall_ = N(c)->depth == 0;                                                   \
        if (stall_ && g_stall((c)->rt, stream, 0))                                       \
            return -1;                                                                   \
        __VA_ARGS__;                                                                     \
        if (stall_ && g_stall((c)->rt, stream, 1))                                       \
            return -1;                                                                   \
    } while (0)

static int mpi_failed(int rc, const char *what, int line)
{
    if (rc == MPI_SUCCESS)
        return 0;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, line, what, msg);
    return -1;
}
#define MPI_FAILED(call) mpi_failed((call), #call, __LINE__)

static nccl_impl_t *N(comm_t *c) { return c->impl; }

static ncclDataType_t nccl_type(const comm_t *c, int dt)
{
    if (dt == DT_I32)
        return ncclInt32;
    return dt == DT_ACT && comm_dt_bytes(c, dt) == 2 ? ncclBfloat16 : ncclFloat;
}

/* The runtime's CUDA stream; NULL (never one of the runtime's streams)
 * after a message when the index is out of range. */
static cudaStream_t cstream(comm_t *c, int stream)
{
    if (stream >= 0 && stream < RT_NSTREAMS)
        return (cudaStream_t)c->rt->op->native_stream(c->rt, stream);
    fprintf(stderr, "%s:%d: stream %d out of range [0, %d)\n", __FILE__, __LINE__, stream, RT_NSTREAMS);
    return NULL;
}

/* A fresh unique id; 0 after a message when NCCL cannot make one. */
static int new_id(ncclUniqueId *id)
{
    ncclResult_t r = ncclGetUniqueId(id);
    if (r != ncclSuccess)
        nccl_error(r, "ncclGetUniqueId", __FILE__, __LINE__);
    return r == ncclSuccess;
}

static void destroy_one(ncclComm_t *nc, int abort)
{
    if (!*nc)
        return;
    ncclResult_t r = abort ? ncclCommAbort(*nc) : ncclCommDestroy(*nc);
    if (r != ncclSuccess)
        nccl_error(r, abort ? "ncclCommAbort" : "ncclCommDestroy", __FILE__, __LINE__);
    *nc = NULL;
}

/* ---- links: 2-rank communicators between adjacent stages ---------------- */

/* Directions a sender x reaches: x + 1 and x - 1 (mod P); for P = 2 both
 * are the same stage and only the first exists. */
static int link_exists(int P, int dir) { return dir == 0 || P > 2; }
static int link_peer(int P, int x, int dir) { return (x + (dir == 0 ? 1 : P - 1)) % P; }

/* Where this rank keeps the link x -> y (it is x or y). */
static ncclComm_t *link_slot(comm_t *c, int g, int tag, int x, int y)
{
    return c->rank[g] == x ? &N(c)->link[g][tag][LINK_SEND][y] : &N(c)->link[g][tag][LINK_RECV][x];
}

typedef int (*link_fn)(comm_t *c, int g, int tag, int x, int dir, const void *arg);

/* Calls fn on every link of group g this rank is in, in the one order
 * every rank walks: tag, sender, direction. Stops at the first error. */
static int walk_links(comm_t *c, int g, link_fn fn, const void *arg)
{
    int P = c->size[g], me = c->rank[g];
    for (int tag = 0; tag < COMM_NTAGS; tag++) {
        if (!link_tag(g, tag) || !N(c)->link[g][tag][LINK_SEND] || !N(c)->link[g][tag][LINK_RECV])
            continue;
        for (int x = 0; x < P; x++)
            for (int dir = 0; dir < 2; dir++)
                if (link_exists(P, dir) && (me == x || me == link_peer(P, x, dir)) && fn(c, g, tag, x, dir, arg))
                    return -1;
    }
    return 0;
}

/* arg: the senders' ids, [sender][tag][dir]. In the link's communicator
 * the sender is rank 0, the receiver rank 1. */
static int link_init(comm_t *c, int g, int tag, int x, int dir, const void *arg)
{
    int y = link_peer(c->size[g], x, dir);
    const ncclUniqueId *id = (const ncclUniqueId *)arg + ((size_t)x * COMM_NTAGS + tag) * 2 + dir;
    NCCL_TRY(ncclCommInitRank(link_slot(c, g, tag, x, y), 2, *id, c->rank[g] == x ? 0 : 1));
    return 0;
}

/* arg: int, abort rather than destroy. */
static int link_free(comm_t *c, int g, int tag, int x, int dir, const void *arg)
{
    destroy_one(link_slot(c, g, tag, x, link_peer(c->size[g], x, dir)), *(const int *)arg);
    return 0;
}

/* NCCL connects a pair on its first send/receive, and in blocking mode
 * the host waits there until the peer issues its side. A decoupled
 * program posts its receives before the matching sends exist (stage s
 * waits for s + 1's first backward while s + 1 waits for s's first
 * forward), so every link is connected here, one float each way, in the
 * walk order all members share: the first unconnected link always has
 * both its members at it. arg: a device buffer of one float. */
static int link_connect(comm_t *c, int g, int tag, int x, int dir, const void *arg)
{
    ncclComm_t nc = *link_slot(c, g, tag, x, link_peer(c->size[g], x, dir));
    void *buf = *(void *const *)arg;
    cudaStream_t st = cstream(c, STREAM_COMPUTE);
    if (!st)
        return -1;
    if (c->rank[g] == x)
        NCCL_TRY(ncclSend(buf, 1, ncclFloat, 1, nc, st));
    else
        NCCL_TRY(ncclRecv(buf, 1, ncclFloat, 0, nc, st));
    return 0;
}

static int connect_links(comm_t *c, int g)
{
    void *buf = NULL;
    cudaError_t e = cudaMalloc(&buf, sizeof(float));
    if (e != cudaSuccess) {
        fprintf(stderr, "%s:%d: cudaMalloc (link warm-up): %s\n", __FILE__, __LINE__, cudaGetErrorString(e));
        return -1;
    }
    int rc = walk_links(c, g, link_connect, &buf);
    if (!rc && (e = cudaStreamSynchronize(cstream(c, STREAM_COMPUTE))) != cudaSuccess) {
        fprintf(stderr, "%s:%d: link warm-up: %s\n", __FILE__, __LINE__, cudaGetErrorString(e));
        rc = -1;
    }
    cudaFree(buf);
    return rc;
}

/* The ids of the links each rank sends on, gathered with a flag, so that
 * a sender without ids fails every member at once (rather than leaving
 * its receivers waiting in ncclCommInitRank). all: [rank][tag][dir]. */
static int link_ids(comm_t *c, int g, ncclUniqueId *all)
{
    int P = c->size[g], ok = 1, all_ok = 0;
    ncclUniqueId *mine = all + (size_t)c->rank[g] * COMM_NTAGS * 2;
    for (int tag = 0; tag < COMM_NTAGS; tag++)
        for (int dir = 0; dir < 2; dir++)
            if (ok && link_tag(g, tag) && link_exists(P, dir))
                ok = new_id(&mine[tag * 2 + dir]);
    int n = (int)(COMM_NTAGS * 2 * sizeof *all);
    if (MPI_FAILED(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, c->mpi[g])) ||
        MPI_FAILED(MPI_Allgather(MPI_IN_PLACE, n, MPI_BYTE, all, n, MPI_BYTE, c->mpi[g])))
        return -1;
    return all_ok ? 0 : -1;
}

static int init_links(comm_t *c, int g)
{
    int P = c->size[g], any = 0;
    for (int tag = 0; tag < COMM_NTAGS; tag++) {
        if (!link_tag(g, tag))
            continue;
        for (int s = 0; s < 2; s++)
            if (!(N(c)->link[g][tag][s] = calloc((size_t)P, sizeof(ncclComm_t))))
                return -1;
        any = 1;
    }
    if (!any)
        return 0;
    ncclUniqueId *all = calloc((size_t)P * COMM_NTAGS * 2, sizeof *all);
    int rc = !all || link_ids(c, g, all) || walk_links(c, g, link_init, all) || connect_links(c, g);
    free(all);
    return rc ? -1 : 0;
}

/* ---- creation and destruction ---------------------------------------------- */

/* One communicator over all of group g: rank 0's id, broadcast with a
 * flag so that a failure there fails every member at once. */
static int init_whole(comm_t *c, int g, ncclComm_t *out)
{
    struct {
        int ok;
        ncclUniqueId id;
    } b;
    memset(&b, 0, sizeof b);
    if (c->rank[g] == 0)
        b.ok = new_id(&b.id);
    if (MPI_FAILED(MPI_Bcast(&b, (int)sizeof b, MPI_BYTE, 0, c->mpi[g])) || !b.ok)
        return -1;
    NCCL_TRY(ncclCommInitRank(out, c->size[g], b.id, c->rank[g]));
    return 0;
}

static int init_group(comm_t *c, int g)
{
    if (init_whole(c, g, &N(c)->coll[g]))
        return -1;
    for (int tag = 0; tag < COMM_NTAGS; tag++)
        if (grouped_tag(g, tag) && init_whole(c, g, &N(c)->tagc[g][tag]))
            return -1;
    return init_links(c, g);
}

/* In creation order (destroying waits for the other members). After a
 * failed creation the survivors are aborted instead, as some members may
 * never have joined them. */
static void free_comms(comm_t *c, int abort)
{
    for (int g = 0; g < GRP_COUNT; g++) {
        destroy_one(&N(c)->coll[g], abort);
        for (int tag = 0; tag < COMM_NTAGS; tag++)
            destroy_one(&N(c)->tagc[g][tag], abort);
        if (c->size[g] > 1)
            walk_links(c, g, link_free, &abort);
        for (int tag = 0; tag < COMM_NTAGS; tag++)
            for (int s = 0; s < 2; s++)
                free(N(c)->link[g][tag][s]), N(c)->link[g][tag][s] = NULL;
    }
}

/* ---- collectives ------------------------------------------------------------- */

static int n_allreduce(comm_t *c, int grp, void *buf, long count, int dt, int stream)
{
    cudaStream_t st = cstream(c, stream);
    if (!st)
        return -1;
    if (c->size[grp] <= 1)
        return 0;
    NCCL_STALLED(c, stream,
                 NCCL_TRY(ncclAllReduce(buf, buf, (size_t)count, nccl_type(c, dt), ncclSum, N(c)->coll[grp], st)));
    return 0;
}

/* In place: this rank's part sits at rank x count in buf. */
static int n_allgather(comm_t *c, int grp, void *buf, long count, int dt, int stream)
{
    cudaStream_t st = cstream(c, stream);
    if (!st)
        return -1;
    if (c->size[grp] <= 1)
        return 0;
    char *mine = (char *)buf + (size_t)c->rank[grp] * (size_t)count * (size_t)comm_dt_bytes(c, dt);
    NCCL_STALLED(c, stream, NCCL_TRY(ncclAllGather(mine, buf, (size_t)count, nccl_type(c, dt), N(c)->coll[grp], st)));
    return 0;
}

/* A group of one: out = in (the whole sum is this rank's part). */
static int n_reduce_scatter(comm_t *c, int grp, void *out, const void *in, long count, int dt, int stream)
{
    cudaStream_t st = cstream(c, stream);
    if (!st)
        return -1;
    if (c->size[grp] == 0) {
        fprintf(stderr, "%s:%d: reduce-scatter over group %s, which this rank is not in\n", __FILE__, __LINE__,
                grp_name[grp]);
        return -1;
    }
    if (c->size[grp] == 1 && out != in && count > 0) {
        cudaError_t e = cudaMemcpyAsync(out, in, (size_t)count * comm_dt_bytes(c, dt), cudaMemcpyDeviceToDevice, st);
        if (e != cudaSuccess)
            fprintf(stderr, "%s:%d: cudaMemcpyAsync: CUDA error %d: %s\n", __FILE__, __LINE__, (int)e,
                    cudaGetErrorString(e));
        return e == cudaSuccess ? 0 : -1;
    }
    if (c->size[grp] == 1)
        return 0;
    NCCL_STALLED(c, stream,
                 NCCL_TRY(ncclReduceScatter(in, out, (size_t)count, nccl_type(c, dt), ncclSum, N(c)->coll[grp], st)));
    return 0;
}

/* Every pair's part at once, as NCCL's own all-to-all example: a group of
 * sends and receives on the group's communicator. */
static int n_alltoallv(comm_t *c, int grp, void *out, const long *rcount, const void *in, const long *scount,
                       int dt, int stream)
{
    cudaStream_t st = cstream(c, stream);
    if (!st)
        return -1;
    size_t eb = (size_t)comm_dt_bytes(c, dt), so = 0, ro = 0;
    int P = c->size[grp];
    if (P <= 1) {
        cudaError_t e = P == 1 && out != in && scount[0] > 0
                            ? cudaMemcpyAsync(out, in, (size_t)scount[0] * eb, cudaMemcpyDeviceToDevice, st)
                            : cudaSuccess;
        if (e != cudaSuccess)
            fprintf(stderr, "%s:%d: cudaMemcpyAsync: CUDA error %d: %s\n", __FILE__, __LINE__, (int)e,
                    cudaGetErrorString(e));
        return e == cudaSuccess ? 0 : -1;
    }
    NCCL_STALLED(c, stream, {
        NCCL_TRY(ncclGroupStart());
        for (int r = 0; r < P; r++) {
            if (scount[r] > 0)
                NCCL_TRY(ncclSend((const char *)in + so, (size_t)scount[r], nccl_type(c, dt), r, N(c)->coll[grp], st));
            if (rcount[r] > 0)
                NCCL_TRY(ncclRecv((char *)out + ro, (size_t)rcount[r], nccl_type(c, dt), r, N(c)->coll[grp], st));
            so += (size_t)scount[r] * eb, ro += (size_t)rcount[r] * eb;
        }
        NCCL_TRY(ncclGroupEnd());
    });
    return 0;
}

/* The all-to-all of equal parts: n_alltoallv with one count for all. */
static int n_alltoall(comm_t *c, int grp, void *out, const void *in, long count, int dt, int stream)
{
    long counts[c->size[grp] > 0 ? c->size[grp] : 1];
    for (int r = 0; r < (int)(sizeof counts / sizeof counts[0]); r++)
        counts[r] = count;
    return n_alltoallv(c, grp, out, counts, in, counts, dt, stream);
}

/* ---- point to point ------------------------------------------------------------ */

/* The communicator of a transfer and the peer's rank in it (a link's
 * sender is 0, its receiver 1), or NULL after saying why. */
static ncclComm_t p2p_comm(comm_t *c, int grp, int peer, int tag, int side, int *npeer)
{
    int ok = tag >= 0 && tag < COMM_NTAGS && peer >= 0 && peer < c->size[grp] && peer != c->rank[grp];
    ncclComm_t nc = NULL;
    if (ok && N(c)->depth > 0 && grouped_tag(grp, tag))
        nc = N(c)->tagc[grp][tag], *npeer = peer;
    else if (ok && N(c)->depth == 0 && link_tag(grp, tag))
        nc = N(c)->link[grp][tag][side][peer], *npeer = side == LINK_SEND ? 1 : 0;
    if (!nc)
        fprintf(stderr, "%s:%d: %s %s group_begin on group %s with peer %d (this rank %d of %d), tag %d: no "
                        "communicator carries it (TP: TAG_RING, grouped; PP: TAG_FWD and TAG_BWD, grouped or "
                        "between adjacent stages; see grouped_tag, link_tag)\n",
                __FILE__, __LINE__, side == LINK_SEND ? "send" : "recv", N(c)->depth ? "inside" : "outside",
                grp_name[grp], peer, c->rank[grp], c->size[grp], tag);
    return nc;
}

static int n_send(comm_t *c, int grp, int peer, int tag, const void *buf, long count, int dt, int stream)
{
    int np = 0;
    cudaStream_t st = cstream(c, stream);
    ncclComm_t nc = p2p_comm(c, grp, peer, tag, LINK_SEND, &np);
    if (!st || !nc)
        return -1;
    NCCL_STALLED(c, stream, NCCL_TRY(ncclSend(buf, (size_t)count, nccl_type(c, dt), np, nc, st)));
    return 0;
}

static int n_recv(comm_t *c, int grp, int peer, int tag, void *buf, long count, int dt, int stream)
{
    int np = 0;
    cudaStream_t st = cstream(c, stream);
    ncclComm_t nc = p2p_comm(c, grp, peer, tag, LINK_RECV, &np);
    if (!st || !nc)
        return -1;
    NCCL_STALLED(c, stream, NCCL_TRY(ncclRecv(buf, (size_t)count, nccl_type(c, dt), np, nc, st)));
    return 0;
}

static int n_group_begin(comm_t *c)
{
    NCCL_TRY(ncclGroupStart());
    N(c)->depth++;
    return 0;
}

static int n_group_end(comm_t *c)
{
    N(c)->depth--;
    NCCL_TRY(ncclGroupEnd());
    return 0;
}

/* NCCL communicators first, then the MPI groups they were bootstrapped
 * over. The caller has synchronized the runtime (nothing in flight). */
static void n_destroy(comm_t *c)
{
    if (!c)
        return;
    free_comms(c, 0);
    comm_groups_free(c);
    free(c->impl);
    free(c);
}

static const comm_ops_t nccl_ops = {n_allreduce, n_allgather, n_reduce_scatter, n_alltoall, n_alltoallv, n_send, n_recv,
                                    n_group_begin, n_group_end, n_destroy};

int comm_nccl_create(comm_t **out, rt_t *rt, const comm_plan_t *p, char *err, int errlen)
{
    *out = NULL;
    if (rt->kind != RT_GPU) {
        snprintf(err, errlen, "NCCL communicators need the GPU runtime (device memory, CUDA streams)");
        return -1;
    }
    comm_t *c = calloc(1, sizeof *c);
    nccl_impl_t *n = calloc(1, sizeof *n);
    if (!c || !n) {
        free(c), free(n);
        snprintf(err, errlen, "out of host memory creating the communicators");
        return -1;
    }
    c->op = &nccl_ops, c->rt = rt, c->impl = n;
    if (comm_groups_init(c, p, err, errlen)) {
        free(n), free(c);
        return -1;
    }
    for (int g = 0; g < GRP_COUNT; g++)
        if (c->size[g] > 1 && init_group(c, g)) {
            snprintf(err, errlen, "NCCL communicators of group %s (rank %d of %d) failed to initialise (see above)",
                     grp_name[g], c->rank[g], c->size[g]);
            free_comms(c, 1);
            comm_groups_free(c);
            free(n), free(c);
            return -1;
        }
    *out = c;
    return 0;
}
