/* real/comm_mpi.c: the rank's groups (comm.h) and their MPI collectives
 * for the CPU runtime. Calls on the compute stream complete before they
 * return; on other streams they are nonblocking and handed to the
 * runtime's stream lists (rt_cpu.h). */
#include "real/comm.h"

#include "model/layout.h"
#include "real/health.h"
#include "real/rt_cpu.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#define MPI_TRY(call)                                                                    \
    do {                                                                                 \
        int rc_ = (call);                                                                \
        if (rc_ != MPI_SUCCESS)                                                          \
            return mpi_error(rc_, #call, __FILE__, __LINE__);                            \
    } while (0)

static int mpi_error(int rc, const char *what, const char *file, int line)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    fprintf(stderr, "%s:%d: %s: %s\n", file, line, what, msg);
    return rc ? rc : -1;
}

int comm_groups_init(comm_t *c, const comm_plan_t *p, char *err, int errlen)
{
    int w, n, tp = p->tp, cp = p->cp, dp = p->dp, pp = p->pp;
    MPI_Comm_rank(MPI_COMM_WORLD, &w);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (n != tp * cp * dp * pp) {
        snprintf(err, errlen, "MPI world size %d is not TP %d x CP %d x DP %d x PP %d = %d", n, tp, cp, dp, pp,
                 tp * cp * dp * pp);
        return -1;
    }
    int dpc = dp * cp; /* DP x CP: CP sits between TP and DP in the rank order */
    layout_pos_t at = layout_pos((layout_t){tp, dpc, pp, p->tp_pp_dp, cp}, w);
    c->tp_i = at.tp_i, c->dp_i = at.dp_i, c->stage = at.stage, c->cp_i = at.dp_i % cp, c->data_i = at.dp_i / cp;
    int emb = pp > 1 && (c->stage == 0 || c->stage == pp - 1);
    /* the experts' folding: a stage's TP x CP x DP ranks as ETP x EP x EDP; every group below is
     * made from the coordinates, so it follows either rank order */
    int ep = p->ep, etp = p->etp > 0 ? p->etp : 1, local = c->tp_i + tp * c->dp_i, etp_i = local % etp;
    c->ep_i = ep > 0 ? local / etp % ep : 0, c->edp_i = ep > 0 ? local / (etp * ep) : 0, c->etp_i = ep > 0 ? etp_i : 0;
    int edp = ep > 0 ? tp * dpc / (etp * ep) : 1;
    int color[GRP_COUNT] = {c->dp_i + dpc * c->stage, c->tp_i + tp * c->stage, c->tp_i + tp * c->dp_i,
                            emb ? c->tp_i + tp * c->dp_i : MPI_UNDEFINED, 0,
                            c->tp_i + tp * (c->dp_i / cp + dp * c->stage),
                            ep > 0 ? etp_i + etp * (c->edp_i + edp * c->stage) : MPI_UNDEFINED,
                            ep > 0 ? etp_i + etp * (c->ep_i + ep * c->stage) : MPI_UNDEFINED,
                            ep > 0 ? c->ep_i + ep * (c->edp_i + edp * c->stage) : MPI_UNDEFINED};
    int key[GRP_COUNT] = {c->tp_i, c->dp_i, c->stage, c->stage, w, c->cp_i, c->ep_i, c->edp_i, etp_i};
    for (int g = 0; g < GRP_COUNT; g++) {
        c->mpi[g] = MPI_COMM_NULL, c->rank[g] = 0, c->size[g] = 0;
        if (MPI_Comm_split(MPI_COMM_WORLD, color[g], key[g], &c->mpi[g]) != MPI_SUCCESS) {
            snprintf(err, errlen, "MPI_Comm_split of group %d failed", g);
            return -1;
        }
        if (c->mpi[g] != MPI_COMM_NULL) {
            MPI_Comm_rank(c->mpi[g], &c->rank[g]);
            MPI_Comm_size(c->mpi[g], &c->size[g]);
        }
    }
    return 0;
}

void comm_groups_free(comm_t *c)
{
    for (int g = 0; g < GRP_COUNT; g++)
        if (c->mpi[g] != MPI_COMM_NULL)
            MPI_Comm_free(&c->mpi[g]);
}

static int host_reduce(comm_t *c, int grp, double *buf, int count, MPI_Op op)
{
    if (c->mpi[grp] == MPI_COMM_NULL || c->size[grp] == 1)
        return 0;
    health_comm_enter(HB_COLL, grp, -1, 0);
    int rc = MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_DOUBLE, op, c->mpi[grp]);
    health_comm_leave();
    MPI_TRY(rc);
    return 0;
}

int comm_host_sum_f64(comm_t *c, int grp, double *buf, int count) { return host_reduce(c, grp, buf, count, MPI_SUM); }

int comm_host_max_f64(comm_t *c, int grp, double *buf, int count) { return host_reduce(c, grp, buf, count, MPI_MAX); }

int comm_dt_bytes(const comm_t *c, int dt) { return dt == DT_ACT ? c->rt->act_bytes : 4; }

/* ---- MPI on host memory --------------------------------------------------- */

typedef struct {
    int grouping;            /* inside group_begin/group_end */
    MPI_Request *reqs;       /* compute-stream transfers of the open group */
    int nreqs, capreqs;
} mpi_impl_t;

static MPI_Datatype mpi_type(int dt) { return dt == DT_I32 ? MPI_INT : MPI_FLOAT; }

/* A nonblocking request: joins the stream, or the open group, or is
 * completed now (compute stream). */
static int settle(comm_t *c, int stream, MPI_Request req)
{
    mpi_impl_t *m = c->impl;
    if (stream != STREAM_COMPUTE)
        return rt_cpu_add_request(c->rt, stream, req);
    if (!m->grouping) {
        MPI_TRY(rt_cpu_wait(c->rt, 1, &req));
        return 0;
    }
    if (m->nreqs == m->capreqs) {
        int cap = m->capreqs ? 2 * m->capreqs : 16;
        MPI_Request *p = realloc(m->reqs, (size_t)cap * sizeof *p);
        if (!p)
            return -1;
        m->reqs = p, m->capreqs = cap;
    }
    m->reqs[m->nreqs++] = req;
    return 0;
}

static int m_allreduce(comm_t *c, int grp, void *buf, long count, int dt, int stream)
{
    if (c->size[grp] <= 1)
        return 0;
    MPI_Request r;
    MPI_TRY(MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, mpi_type(dt), MPI_SUM, c->mpi[grp], &r));
    return settle(c, stream, r);
}

static int m_allgather(comm_t *c, int grp, void *buf, long count, int dt, int stream)
{
    if (c->size[grp] <= 1)
        return 0;
    MPI_Request r;
    MPI_TRY(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, (int)count, mpi_type(dt), c->mpi[grp], &r));
    return settle(c, stream, r);
}

static int m_reduce_scatter(comm_t *c, int grp, void *out, const void *in, long count, int dt, int stream)
{
    MPI_Request r;
    MPI_TRY(MPI_Ireduce_scatter_block(in, out, (int)count, mpi_type(dt), MPI_SUM, c->mpi[grp], &r));
    return settle(c, stream, r);
}

static int m_alltoall(comm_t *c, int grp, void *out, const void *in, long count, int dt, int stream)
{
    MPI_Request r;
    MPI_TRY(MPI_Ialltoall(in, (int)count, mpi_type(dt), out, (int)count, mpi_type(dt), c->mpi[grp], &r));
    return settle(c, stream, r);
}

static int m_alltoallv(comm_t *c, int grp, void *out, const long *rcount, const void *in, const long *scount,
                       int dt, int stream)
{
    mpi_impl_t *m = c->impl;
    int P = c->size[grp], rc = -1;
    if (stream != STREAM_COMPUTE || m->grouping) {
        fprintf(stderr, "%s:%d: alltoallv runs on the compute stream outside a group only\n", __FILE__, __LINE__);
        return -1;
    }
    int *v = malloc(sizeof(int) * 4 * (size_t)(P ? P : 1)), *sc = v, *sd = v + P, *rcn = v + 2 * P, *rd = v + 3 * P;
    if (!v)
        return -1;
    long so = 0, ro = 0;
    for (int r = 0; r < P; r++) {
        sc[r] = (int)scount[r], sd[r] = (int)so, rcn[r] = (int)rcount[r], rd[r] = (int)ro;
        so += scount[r], ro += rcount[r];
    }
    MPI_Request req;
    if (so > INT_MAX || ro > INT_MAX)
        fprintf(stderr, "%s:%d: alltoallv of %ld and %ld elements: above MPI's int counts\n", __FILE__, __LINE__, so,
                ro);
    else if (MPI_Ialltoallv(in, sc, sd, mpi_type(dt), out, rcn, rd, mpi_type(dt), c->mpi[grp], &req) == MPI_SUCCESS)
        rc = rt_cpu_wait(c->rt, 1, &req) == MPI_SUCCESS ? 0 : -1;
    else
        fprintf(stderr, "%s:%d: MPI_Ialltoallv failed\n", __FILE__, __LINE__);
    free(v);
    return rc;
}

static int m_send(comm_t *c, int grp, int peer, int tag, const void *buf, long count, int dt, int stream)
{
    MPI_Request r;
    MPI_TRY(MPI_Isend(buf, (int)count, mpi_type(dt), peer, tag, c->mpi[grp], &r));
    return settle(c, stream, r);
}

static int m_recv(comm_t *c, int grp, int peer, int tag, void *buf, long count, int dt, int stream)
{
    MPI_Request r;
    MPI_TRY(MPI_Irecv(buf, (int)count, mpi_type(dt), peer, tag, c->mpi[grp], &r));
    return settle(c, stream, r);
}

static int m_group_begin(comm_t *c)
{
    ((mpi_impl_t *)c->impl)->grouping = 1;
    return 0;
}

static int m_group_end(comm_t *c)
{
    mpi_impl_t *m = c->impl;
    m->grouping = 0;
    int n = m->nreqs;
    m->nreqs = 0;
    MPI_TRY(rt_cpu_wait(c->rt, n, m->reqs));
    return 0;
}

static void m_destroy(comm_t *c)
{
    if (!c)
        return;
    mpi_impl_t *m = c->impl;
    comm_groups_free(c);
    free(m->reqs);
    free(m);
    free(c);
}

static const comm_ops_t mpi_ops = {m_allreduce, m_allgather, m_reduce_scatter, m_alltoall, m_alltoallv, m_send, m_recv,
                                   m_group_begin, m_group_end, m_destroy};

int comm_mpi_create(comm_t **out, rt_t *rt, const comm_plan_t *p, char *err, int errlen)
{
    comm_t *c = calloc(1, sizeof *c);
    mpi_impl_t *m = calloc(1, sizeof *m);
    if (!c || !m) {
        free(c), free(m);
        snprintf(err, errlen, "out of host memory creating the communicators");
        return -1;
    }
    c->op = &mpi_ops, c->rt = rt, c->impl = m;
    if (comm_groups_init(c, p, err, errlen)) {
        free(m), free(c);
        return -1;
    }
    *out = c;
    return 0;
}
