/* real/comm.h: the communicators of one rank of a real run: its TP, CP,
 * DP and pipeline groups, the tied-embedding group (first and last
 * pipeline stage), the world, and with experts the expert-parallel (EP),
 * expert data-parallel (EDP) and expert tensor-parallel (ETP) groups, folded into the same ranks as
 * model/moe.h orders them (rank = etp_i + ETP (ep_i + EP (edp_i + EDP
 * stage))). Ranks are numbered as Megatron-Core and
 * the simulator number them (model/layout.h): TP fastest, then CP, DP,
 * PP. The DP group is DP x CP, the ranks holding the same weights (the
 * gradients' reduction, ZeRO's shards): dp_i numbers a rank in it, and a
 * rank's data replica is dp_i / CP, its place in the sequence cp_i.
 *
 * Two implementations behind one table:
 *   comm_mpi.c   MPI on host memory (the CPU runtime). On the compute
 *                stream a call completes before it returns; on any other
 *                stream it is nonblocking and its request joins that
 *                stream's list in the CPU runtime (rt_cpu.c), so the
 *                runtime's record/wait order it like a CUDA stream would.
 *   comm_nccl.c  NCCL on device memory, one communicator per group,
 *                bootstrapped over MPI (the unique id is broadcast over
 *                the group's MPI communicator); calls are enqueued on the
 *                runtime's CUDA streams.
 * Every group also keeps its MPI communicator for small host-side sums
 * (loss, LAMB norms) on both paths.
 *
 * Buffers hold `count` elements of `dt`; sums are in place. Entries return
 * 0, or non-zero after printing file:line and the reason. */
#ifndef REAL_COMM_H
#define REAL_COMM_H

#include "real/rt.h"

#include <mpi.h>

typedef enum { GRP_TP, GRP_DP, GRP_PP, GRP_EMB, GRP_WORLD, GRP_CP, GRP_EP, GRP_EDP, GRP_ETP, GRP_COUNT } grp_t;
typedef enum { DT_F32, DT_ACT, DT_I32 } dtype_t; /* DT_ACT: the runtime's act type */

typedef struct comm comm_t;

/* Point-to-point tags: activations forward, gradients backward, TP ring. */
enum { TAG_FWD, TAG_BWD, TAG_RING, COMM_NTAGS };

typedef struct {
    int (*allreduce)(comm_t *c, int grp, void *buf, long count, int dt, int stream);
    /* in place: buf holds size x count, this rank's part at rank x count */
    int (*allgather)(comm_t *c, int grp, void *buf, long count, int dt, int stream);
    /* out (count) = this rank's part of the sum of in (size x count) */
    int (*reduce_scatter)(comm_t *c, int grp, void *out, const void *in, long count, int dt, int stream);
    /* out (size x count): part r from member r's in (size x count), its
     * part for this rank (CP's Ulysses exchange of heads for tokens) */
    int (*alltoall)(comm_t *c, int grp, void *out, const void *in, long count, int dt, int stream);
    /* the same with a count per member: in holds scount[r] elements for
     * member r, one block after another, out receives rcount[r] from
     * member r likewise (the experts' token dispatch and combine); on the
     * compute stream only, complete when it returns */
    int (*alltoallv)(comm_t *c, int grp, void *out, const long *rcount, const void *in, const long *scount, int dt,
                     int stream);
    /* point to point inside a group (peer = rank in the group). Between
     * group_begin and group_end the transfers run concurrently and
     * complete together (Megatron's batched exchanges, NCCL groups).
     * Transfers between two ranks match in issue order per tag (tag <
     * COMM_NTAGS: one MPI tag, or one NCCL communicator, per tag), so the
     * pipeline's two directions never cross. */
    int (*send)(comm_t *c, int grp, int peer, int tag, const void *buf, long count, int dt, int stream);
    int (*recv)(comm_t *c, int grp, int peer, int tag, void *buf, long count, int dt, int stream);
    int (*group_begin)(comm_t *c);
    int (*group_end)(comm_t *c);
    void (*destroy)(comm_t *c);
} comm_ops_t;

struct comm {
    const comm_ops_t *op;
    rt_t *rt;
    int rank[GRP_COUNT], size[GRP_COUNT]; /* this rank in each group; size 0: not a member */
    MPI_Comm mpi[GRP_COUNT];              /* MPI_COMM_NULL where not a member */
    int tp_i, dp_i, stage;                /* coordinates of this rank (dp_i: in DP x CP) */
    int cp_i;                             /* its place in its CP group: dp_i mod CP */
    int data_i;                           /* its data replica (which samples it reads): dp_i / CP */
    int ep_i, edp_i, etp_i;               /* with experts: its place in its EP, EDP and ETP group */
    void *impl;
};

/* The plan the groups are made for: TP x CP x DP x PP ranks; ep 0 without
 * experts (no EP or EDP group), else EP and ETP with ETP x EP dividing
 * TP x CP x DP; tp_pp_dp 1 for Megatron-Core's tp-pp-dp rank order
 * (--use-tp-pp-dp-mapping: the stages inside the replicas; model/layout.h),
 * 0 for its default (tp-cp-dp-pp). */
typedef struct {
    int tp, cp, dp, pp, ep, etp, tp_pp_dp;
} comm_plan_t;

/* Splits MPI_COMM_WORLD into the groups of a plan (the world size must be
 * TP x CP x DP x PP). Fills c->rank, size, mpi and coordinates. */
int comm_groups_init(comm_t *c, const comm_plan_t *p, char *err, int errlen);
void comm_groups_free(comm_t *c);

/* The MPI communicators on the CPU runtime. */
int comm_mpi_create(comm_t **c, rt_t *rt, const comm_plan_t *p, char *err, int errlen);

/* NCCL communicators on the GPU runtime; -1 with a message without CUDA. */
int comm_nccl_create(comm_t **c, rt_t *rt, const comm_plan_t *p, char *err, int errlen);

/* Host-side sum (max) over a group's MPI communicator (any runtime). */
int comm_host_sum_f64(comm_t *c, int grp, double *buf, int count);
int comm_host_max_f64(comm_t *c, int grp, double *buf, int count);

/* Bytes of one element of dt on this runtime. */
int comm_dt_bytes(const comm_t *c, int dt);

#endif
