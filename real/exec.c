/* real/exec.c: plays a rank's op program on the runtime (exec.h). */
#include "real/exec.h"
#include "real/exec_int.h"

#include "model/layout.h"
#include "real/health.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OP (x->rt->op)

/* This rank's failure: printed, and left in its heartbeat for supervise
 * and diagnose. */
int exec_fail(const char *what, const char *file, int line)
{
    fprintf(stderr, "%s:%d: %s\n", file, line, what);
    health_error(what);
    return -1;
}

/* ---- the optimizer's shard ------------------------------------------------------ */

/* This rank's part of piece p: [lo, hi) of the flat space (1/size of it
 * over the piece's group, DP or the experts' EDP, under ZeRO). */
static void owned(const exec_t *x, int p, long *lo, long *hi)
{
    const gpt_piece_t *pc = &x->m->pieces[p];
    long n = x->zero ? pc->n / pc->size : pc->n;
    *lo = pc->off + (x->zero ? pc->idx * n : 0), *hi = *lo + n;
}

/* Segments: each tensor's owned part, in flat order. */
static int build_segments(exec_t *x)
{
    gpt_t *m = x->m;
    int cap = m->ntensors + 2 * m->npieces + 8;
    x->segs = calloc((size_t)cap, sizeof *x->segs);
    x->seg_tensor = calloc((size_t)cap, sizeof *x->seg_tensor);
    if (!x->segs || !x->seg_tensor || !x->shard_base)
        return -1;
    long base = 0;
    for (int p = 0; p < m->npieces; p++) {
        long lo, hi;
        owned(x, p, &lo, &hi);
        x->shard_base[p] = base;
        for (int i = 0; i < m->ntensors; i++) {
            const gpt_tensor_t *t = &m->tensors[i];
            long a = t->off > lo ? t->off : lo, b = t->off + t->n < hi ? t->off + t->n : hi;
            if (a >= b)
                continue;
            if (x->nsegs == cap)
                return -1;
            long sh = base + (a - lo);
            kern_bf16 *act = (kern_bf16 *)((char *)m->params + a * x->rt->act_bytes);
            x->segs[x->nsegs] = (kern_opt_tensor){x->master ? x->master + sh : (float *)act,
                                                   (x->zero ? x->gshard + sh : m->grads + a), x->mom1 + sh,
                                                   x->mom2 + sh, x->master ? act : NULL, b - a};
            x->seg_tensor[x->nsegs++] = i;
        }
        base += hi - lo;
    }
    x->nshard = base;
    return 0;
}

int exec_init(exec_t *x, const job_t *job, rt_t *rt, comm_t *comm, gpt_t *m, data_t *data,
              const exec_hparams_t *hp, unsigned long long seed, char *err, int errlen)
{
    memset(x, 0, sizeof *x);
    x->job = job, x->rt = rt, x->comm = comm, x->m = m, x->data = data, x->hp = *hp;
    x->nan_rank = -1;
    if (job->attention_backend != ATTN_BACKEND_MEGASIM) { /* the runtime opens it (gpt_check_switches: the GPU's) */
        if (!OP->attn_backend)
            return snprintf(err, errlen, "--attention-backend cudnn: this runtime has only its own attention"), -1;
        if (OP->attn_backend(rt, job->attention_backend, err, errlen))
            return -1;
    }
    x->zero = job->zero_stage >= 1 && job->dp_cp > 1; /* ZeRO shards over DP x CP, the weights' replicas */
    x->shard_base = calloc((size_t)m->npieces + 1, sizeof *x->shard_base);
    long nshard = 0;
    for (int p = 0; p < m->npieces; p++) {
        long lo, hi;
        owned(x, p, &lo, &hi);
        nshard += hi - lo;
    }
    size_t f = sizeof(float), nb = (size_t)(nshard ? nshard : 1) * f;
    long toks = (long)job->num_microbatches * m->N;
    if ((rt->act_bytes != sizeof(float) && OP->alloc(rt, (void **)&x->master, nb, RT_POOL_MAIN)) ||
        OP->alloc(rt, (void **)&x->mom1, nb, RT_POOL_MAIN) ||
        OP->alloc(rt, (void **)&x->mom2, nb, RT_POOL_MAIN) ||
        (x->zero && OP->alloc(rt, (void **)&x->gshard, nb, RT_POOL_MAIN)) ||
        OP->alloc(rt, (void **)&x->tok_dev, (size_t)toks * sizeof(int), RT_POOL_MAIN) ||
        OP->alloc(rt, (void **)&x->tgt_dev, (size_t)toks * sizeof(int), RT_POOL_MAIN) ||
        OP->alloc(rt, (void **)&x->losses_dev, (size_t)toks * f, RT_POOL_MAIN)) {
        snprintf(err, errlen, "cannot allocate the optimizer state (%ld parameters) on the device", nshard);
        return -1;
    }
    if (build_segments(x) || !(x->norms_host = calloc((size_t)2 * x->nsegs + 2, f)) ||
        !(x->tensor_norms = calloc((size_t)4 * m->ntensors + 2, sizeof(double))) ||
        !(x->saved = calloc((size_t)job->vpp * job->num_microbatches, sizeof(void *))) ||
        OP->alloc(rt, (void **)&x->norms_dev, (size_t)(2 * x->nsegs + 2) * f, RT_POOL_MAIN)) {
        snprintf(err, errlen, "out of memory for the optimizer's segments");
        return -1;
    }
    /* the seed's weights: act copy everywhere, fp32 master of the shard (the act copy itself when fp32) */
    float *host = malloc((size_t)(m->nparams ? m->nparams : 1) * f), *shard = malloc(nb);
    if (!host || !shard) {
        free(host), free(shard);
        snprintf(err, errlen, "out of host memory for the initial weights");
        return -1;
    }
    gpt_init_values(m, seed, host, 0);
    m->drop_seed = seed;
    for (int p = 0; p < m->npieces; p++) {
        long lo, hi;
        owned(x, p, &lo, &hi);
        memcpy(shard + x->shard_base[p], host + lo, (size_t)(hi - lo) * f);
    }
    int rc = OP->act_from_f32(rt, m->params, host, m->nparams) ||
             (x->master && OP->h2d(rt, x->master, shard, (size_t)nshard * f)) ||
             OP->memset0(rt, x->mom1, nb, STREAM_COMPUTE) || OP->memset0(rt, x->mom2, nb, STREAM_COMPUTE) ||
             OP->sync(rt);
    free(host), free(shard);
    if (rc) {
        snprintf(err, errlen, "cannot copy the initial weights to the device");
        return -1;
    }
    x->run_t0_ns = rt_now_ns();
    return 0;
}

void exec_free(exec_t *x)
{
    if (!x->rt)
        return;
    void *ps[] = {x->master, x->mom1, x->mom2, x->gshard, x->tok_dev, x->tgt_dev, x->losses_dev, x->norms_dev};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        OP->free(x->rt, ps[i]);
    free(x->segs), free(x->seg_tensor), free(x->norms_host), free(x->tensor_norms), free(x->saved);
    free(x->recs), free(x->times), free(x->iter_t0_ns), free(x->shard_base);
    memset(x, 0, sizeof *x);
}

/* ---- records ------------------------------------------------------------------------- */

static long new_rec(exec_t *x, const sched_op_t *o)
{
    if (x->nrecs == x->caprecs) /* reserve() made room for the whole iteration */
        return -1;
    /* dp_i numbers the rank in DP x CP */
    int rank = layout_rank(layout_of(x->job), x->comm->tp_i, x->comm->dp_i, x->comm->stage);
    x->recs[x->nrecs] = (result_op_t){rank, o->stream, o->kind, o->mb, o->chunk, 0, 0, 0, x->iter, 0, 0, -1};
    memset(&x->times[x->nrecs], 0, sizeof x->times[0]);
    return x->nrecs++;
}

/* Times are resolved at the iteration's end (the GPU's events). */
#define T(i) (&x->times[i])

/* ---- counters ---------------------------------------------------------------------------- */

static int bump(exec_t *x, int stream, int counter, int times)
{
    for (int k = 0; k < times && counter != CNT_NONE; k++)
        RT_TRY(OP->record(x->rt, stream, counter, ++x->cnt[counter]));
    return 0;
}

/* The runtime stream an op runs on: the program's, with the pipeline
 * pools split by direction (rt.h). */
static int phys(const sched_op_t *o)
{
    if (o->kind == SOP_XFER && o->stream != STREAM_COMPUTE && o->x[0].dir == DIR_BWD)
        return o->stream == STREAM_PP_SEND ? RT_STREAM_PP_SEND_BWD : RT_STREAM_PP_RECV_BWD;
    return o->stream;
}

static int waits(exec_t *x, const sched_op_t *o, int parts_ahead)
{
    if (o->wait[0] != CNT_NONE)
        RT_TRY(OP->wait(x->rt, phys(o), o->wait[0], o->wait_for[0] + parts_ahead));
    if (o->wait[1] != CNT_NONE)
        RT_TRY(OP->wait(x->rt, phys(o), o->wait[1], o->wait_for[1]));
    return 0;
}

/* ---- FIFOs of activations crossing stages ------------------------------------------------ */

static int push(exec_fifo_t *q, void *p)
{
    if (q->tail - q->head == (int)(sizeof q->buf / sizeof q->buf[0]))
        return exec_fail("more than 4096 transfers in flight", __FILE__, __LINE__);
    q->buf[q->tail++ % 4096] = p;
    return 0;
}

static void *pop(exec_fifo_t *q) { return q->head == q->tail ? NULL : q->buf[q->head++ % 4096]; }

static long act_elems(const exec_t *x) { return (long)x->m->Nl * x->m->C; }

static int xfer_buf(exec_t *x, void **p)
{
    return OP->alloc(x->rt, p, (size_t)act_elems(x) * x->rt->act_bytes, RT_POOL_XFER);
}

/* ---- compute ----------------------------------------------------------------------------- */

static int run_fwd(exec_t *x, const sched_op_t *o)
{
    gpt_t *m = x->m;
    int c = o->chunk, mb = o->mb;
    const void *in = NULL;
    void *out = NULL;
    if (!gpt_has_embedding(m, c) && !(in = pop(&x->recvq[DIR_FWD])))
        return exec_fail("a forward needs an activation that no receive delivered", __FILE__, __LINE__);
    if (!gpt_has_head(m, c)) {
        RT_TRY(xfer_buf(x, &out));
        RT_TRY(push(&x->sendq[DIR_FWD], out));
    }
    long tok = (long)mb * m->N;
    gpt_saved_t *sv;
    RT_TRY(gpt_chunk_fwd(m, c, mb, in, out, x->tok_dev + tok, x->tgt_dev + tok, x->losses_dev + tok,
                         &sv));
    x->saved[(long)c * x->job->num_microbatches + mb] = sv;
    return 0;
}

static int run_bwd(exec_t *x, const sched_op_t *o)
{
    gpt_t *m = x->m;
    int c = o->chunk, mb = o->mb;
    void *dres = NULL;
    if (!gpt_has_head(m, c) && !(dres = pop(&x->recvq[DIR_BWD])))
        return exec_fail("a backward needs a gradient that no receive delivered", __FILE__, __LINE__);
    /* The head's gradient: a transfer buffer when it is sent back, else
     * (one chunk holds the whole model) the layers' working memory. */
    int sent = !gpt_has_embedding(m, c), local = !dres && !sent;
    if (!dres)
        RT_TRY(local ? OP->alloc(x->rt, &dres, (size_t)act_elems(x) * x->rt->act_bytes, RT_POOL_MAIN)
                     : xfer_buf(x, &dres));
    void **sv = &x->saved[(long)c * x->job->num_microbatches + mb];
    float dloss = 1.0f / ((float)x->job->global_batch_size * x->job->seq_length);
    RT_TRY(gpt_chunk_bwd(m, *sv, dres, dloss));
    *sv = NULL;
    if (sent)
        RT_TRY(push(&x->sendq[DIR_BWD], dres));
    else if (local)
        OP->free(x->rt, dres);
    if (mb == x->job->num_microbatches - 1) /* chunk c's gradients are complete */
        RT_TRY(gpt_sync_sp_grads(m, c));
    return 0;
}

/* Pipeline transfers: a batch on the compute stream (blocking), or one
 * asynchronous transfer on its own stream. */
static int run_xfer(exec_t *x, const sched_op_t *o)
{
    comm_t *cm = x->comm;
    if (o->nx > 1 || o->stream == STREAM_COMPUTE)
        RT_TRY(cm->op->group_begin(cm));
    for (int i = 0; i < o->nx; i++) {
        const sched_xfer_t *t = &o->x[i];
        void *buf;
        if (t->send) {
            if (!(buf = pop(&x->sendq[t->dir])))
                return exec_fail("a send has nothing to send", __FILE__, __LINE__);
            RT_TRY(cm->op->send(cm, GRP_PP, t->peer, t->dir, buf, act_elems(x), DT_ACT, phys(o)));
        } else {
            RT_TRY(xfer_buf(x, &buf));
            RT_TRY(cm->op->recv(cm, GRP_PP, t->peer, t->dir, buf, act_elems(x), DT_ACT, phys(o)));
            RT_TRY(push(&x->recvq[t->dir], buf));
        }
    }
    if (o->nx > 1 || o->stream == STREAM_COMPUTE)
        RT_TRY(cm->op->group_end(cm));
    return 0;
}

/* ---- DP ---------------------------------------------------------------------------------- */

/* The pieces a DP op covers: one chunk's (interleaved), one bucket, or all. */
static void dp_range(const exec_t *x, const sched_op_t *o, int part, int *p0, int *p1)
{
    const gpt_t *m = x->m;
    int all = m->chunk_piece0[m->vpp];
    if (o->parts == 1 && o->chunk < 0) {
        *p0 = 0, *p1 = all;
        return;
    }
    int idx = o->chunk >= 0 ? o->chunk : part;
    if (m->vpp > 1)
        *p0 = m->chunk_piece0[idx], *p1 = m->chunk_piece0[idx + 1];
    else /* buckets; the last takes the experts' piece after them too */
        *p0 = idx, *p1 = part == o->parts - 1 ? all : idx + 1;
}

static int reduce_piece(exec_t *x, int p, int stream)
{
    gpt_t *m = x->m;
    const gpt_piece_t *pc = &m->pieces[p];
    comm_t *cm = x->comm;
    float *g = m->grads + pc->off, *own = x->gshard + x->shard_base[p];
    size_t bytes = 4 * (size_t)pc->n;
    if (pc->size == 1) /* ZeRO over DP, the experts' EDP of 1: the shard is the whole piece */
        return x->zero ? OP->copy2d(x->rt, own, bytes, g, bytes, bytes, 1, stream) : 0;
    if (!x->zero)
        return cm->op->allreduce(cm, pc->grp, g, pc->n, DT_F32, stream);
    return cm->op->reduce_scatter(cm, pc->grp, own, g, pc->n / pc->size, DT_F32, stream);
}

static int gather_piece(exec_t *x, int p, int stream)
{
    gpt_t *m = x->m;
    const gpt_piece_t *pc = &m->pieces[p];
    if (!x->zero)
        return 0;
    return x->comm->op->allgather(x->comm, pc->grp, (char *)m->params + pc->off * x->rt->act_bytes,
                                  pc->n / pc->size, DT_ACT, stream);
}

static int run_dp(exec_t *x, const sched_op_t *o, long rec)
{
    int gatherop = o->kind == SOP_DP_GATHER;
    if (o->stream != STREAM_COMPUTE)
        RT_TRY(OP->join(x->rt, o->stream, STREAM_COMPUTE)); /* stream order: after what compute issued */
    for (int part = 0; part < o->parts; part++) {
        RT_TRY(waits(x, o, part));
        if (part == 0)
            RT_TRY(OP->mark_start(x->rt, o->stream, T(rec)));
        if (gatherop && part == 0 && x->m->emb_piece >= 0) /* the tied embedding's shard too */
            RT_TRY(gather_piece(x, x->m->emb_piece, o->stream));
        int p0, p1;
        dp_range(x, o, part, &p0, &p1);
        for (int p = p0; p < p1; p++)
            RT_TRY(gatherop ? gather_piece(x, p, o->stream) : reduce_piece(x, p, o->stream));
        RT_TRY(bump(x, o->stream, o->bump_part, 1));
    }
    return 0;
}

/* Tied embedding: the first and last stage sum their gradients, then the
 * sum is reduced over DP like any other piece. */
static int run_emb_sync(exec_t *x)
{
    gpt_t *m = x->m;
    if (m->t_wte < 0 || m->emb_piece < 0)
        return 0;
    RT_TRY(x->comm->op->allreduce(x->comm, GRP_EMB, gpt_grad(m, m->t_wte), m->tensors[m->t_wte].n, DT_F32,
                               STREAM_COMPUTE));
    return reduce_piece(x, m->emb_piece, STREAM_COMPUTE);
}

/* ---- the iteration ----------------------------------------------------------------------- */

static int load_batch(exec_t *x)
{
    const int *tok, *tgt;
    RT_TRY(data_get(x->data, x->iter, &tok, &tgt));
    size_t bytes = (size_t)x->job->num_microbatches * x->m->N * sizeof(int);
    RT_TRY(OP->h2d(x->rt, x->tok_dev, tok, bytes));
    return OP->h2d(x->rt, x->tgt_dev, tgt, bytes);
}

int exec_graph_rules(const job_t *j, int gpu, char *err, int errlen)
{
    /* The other streams a pass uses (the TP stream: the backward's input-gradient reduction, the rings of
     * --tp-comm-overlap and of CP's p2p; the second compute stream of the chunked GEMMs) join its capture by
     * CUDA's event fork and join (rt_gpu_graph.c). */
    const char *why = !gpu ? "needs --device gpu (the CPU path has no graphs)"
                      : j->num_experts > 0 ? "with experts: the routing's counts are read back inside each pass"
                      : j->offload_fraction > 0
                          ? "with --activation-offload-fraction: a layer's copies to the host are waited for one "
                            "layer later, past its pass's end"
                          : NULL;
    if (why)
        snprintf(err, errlen, "--enable-cuda-graph %s; allowed: without experts or offloading (TP with or without "
                 "--tp-comm-overlap, CP of each comm type, DP, PP and FP8 take part)", why);
    return why != NULL;
}

/* A pass's graph slot: its kind, chunk and micro-batch. */
static long graph_slot(const exec_t *x, const sched_op_t *o)
{
    long per = (long)x->job->vpp * x->job->num_microbatches;
    return (o->kind == SOP_BWD) * per + (long)o->chunk * x->job->num_microbatches + o->mb;
}

static int run_op(exec_t *x, const sched_op_t *o)
{
    long rec = new_rec(x, o);
    int s = phys(o);
    if (rec < 0)
        return exec_fail("out of host memory for op records", __FILE__, __LINE__);
    RT_TRY(OP->mark_ready(x->rt, s, T(rec)));
    int dp = o->kind == SOP_DP_GATHER || o->kind == SOP_DP_REDUCE;
    if (dp) {
        RT_TRY(run_dp(x, o, rec));
    } else {
        RT_TRY(waits(x, o, o->parts - 1));
        RT_TRY(OP->mark_start(x->rt, s, T(rec)));
        /* the compute of a chunk on the CPU path: its thread's CPU time less
         * its MPI waits', the core's own work whatever share of it the
         * scheduler gave; a slowed rank's device busy for longer around it */
        int cpu = x->rt->kind == RT_CPU, compute = o->kind == SOP_FWD || o->kind == SOP_BWD;
        double slow = compute ? inject_slow_extra() : 0;
        RT_TRY(slow > 0 ? OP->slow_begin(x->rt) : 0);
        int64_t w0 = x->rt->comm_wait_ns, a0 = x->m->moe_a2a_ns;
        int64_t p0 = cpu ? rt_thread_cpu_ns() : 0, pw0 = x->rt->comm_wait_cpu_ns;
        int graph = compute && x->graphs && x->iter > x->iter0; /* the first iteration warms up, uncaptured */
        RT_TRY(graph ? OP->capture_begin(x->rt) : 0);
        switch (o->kind) {
        case SOP_FWD: RT_TRY(run_fwd(x, o)); break;
        case SOP_BWD: RT_TRY(run_bwd(x, o)); break;
        case SOP_XFER: RT_TRY(run_xfer(x, o)); break;
        case SOP_EMB_SYNC: RT_TRY(run_emb_sync(x)); break;
        case SOP_OPTIM: RT_TRY(exec_run_optim(x)); break;
        case SOP_HOST: RT_TRY(load_batch(x)); break;
        default: break; /* SOP_JOIN: its waits were all */
        }
        RT_TRY(graph ? OP->capture_end(x->rt, graph_slot(x, o)) : 0);
        RT_TRY(slow > 0 ? OP->slow_end(x->rt, slow) : 0);
        if (compute) /* the injected slowdown's work included */
            x->recs[rec].t_cpu_ns = cpu ? rt_busy_cpu_ns(x->rt, p0, pw0) : -1;
        x->recs[rec].t_comm_wait_ns = x->rt->comm_wait_ns - w0, x->recs[rec].t_a2a_ns = x->m->moe_a2a_ns - a0;
        RT_TRY(bump(x, s, o->bump_part, o->parts));
    }
    RT_TRY(bump(x, s, o->bump, 1));
    return OP->mark_end(x->rt, s, T(rec));
}

static int begin_iteration(exec_t *x)
{
    gpt_t *m = x->m;
    x->nan_rank = -1; /* this step's, once its gradients are checked */
    memset(x->cnt, 0, sizeof x->cnt);
    memset(x->sendq, 0, sizeof x->sendq), memset(x->recvq, 0, sizeof x->recvq);
    int64_t *t0 = realloc(x->iter_t0_ns, sizeof(int64_t) * (size_t)(x->iter + 1));
    if (!t0)
        return exec_fail("out of host memory", __FILE__, __LINE__);
    if (!x->iter_t0_ns) /* a resumed run starts at a later step */
        memset(t0, 0, sizeof(int64_t) * (size_t)(x->iter + 1));
    x->iter_t0_ns = t0;
    health_comm_enter(HB_COLL, GRP_WORLD, -1, 0);
    MPI_Barrier(MPI_COMM_WORLD); /* every rank's clock starts the iteration together */
    health_comm_leave();
    t0[x->iter] = rt_now_ns() - x->run_t0_ns;
    RT_TRY(OP->iter_begin(x->rt));
    m->moe_dropped = m->moe_aux = m->moe_cv_sum = m->moe_cv_n = 0, m->moe_drop_sig = 0;
    RT_TRY(OP->memset0(x->rt, m->grads, (size_t)m->nparams * sizeof(float), STREAM_COMPUTE));
    if (x->gshard)
        RT_TRY(OP->memset0(x->rt, x->gshard, (size_t)x->nshard * sizeof(float), STREAM_COMPUTE));
    if (x->job->async_data_loader) /* prepared in the background during the last iteration */
        RT_TRY(load_batch(x));
    return 0;
}

/* Mean loss of the global batch: the last stage's rows (every TP rank
 * holds them all: TP rank 0's count), summed over the world. */
static int iteration_loss(exec_t *x, double *loss)
{
    gpt_t *m = x->m;
    double sum = 0;
    long n = (long)x->job->num_microbatches * m->N;
    if (m->stage == m->pp - 1 && m->tp_i == 0) {
        float *h = malloc(sizeof(float) * (size_t)n);
        if (!h || OP->d2h(x->rt, h, x->losses_dev, sizeof(float) * (size_t)n)) {
            free(h);
            return exec_fail("cannot read the losses back", __FILE__, __LINE__);
        }
        for (long i = 0; i < n; i++)
            sum += h[i];
        free(h);
    }
    RT_TRY(comm_host_sum_f64(x->comm, GRP_WORLD, &sum, 1));
    *loss = sum / ((double)x->job->global_batch_size * x->job->seq_length);
    return gpt_moe_totals(m, &x->moe_dropped, &x->moe_aux, &x->moe_load_cv, &x->moe_drop_sig);
}

/* Room for every record of the coming iteration: the runtimes keep
 * pointers to the times until the iteration ends, so they must not move. */
static int reserve(exec_t *x)
{
    long n = sched_program_ops(x->job, x->m->stage);
    if (x->nrecs + n <= x->caprecs)
        return 0;
    long cap = (x->nrecs + n) * 2;
    result_op_t *r = realloc(x->recs, (size_t)cap * sizeof *r);
    if (r)
        x->recs = r;
    rt_times_t *t = r ? realloc(x->times, (size_t)cap * sizeof *t) : NULL;
    if (!t)
        return exec_fail("out of host memory for op records", __FILE__, __LINE__);
    x->times = t, x->caprecs = cap;
    return 0;
}

int exec_iteration(exec_t *x, double *loss, double *time_s)
{
    long first = x->nrecs;
    x->m->drop_step = x->iter; /* this iteration's dropout masks */
    RT_TRY(reserve(x));
    RT_TRY(begin_iteration(x));
    int64_t t0 = rt_now_ns();
    sched_iter_t it;
    sched_op_t o;
    sched_iter_init(&it, x->job, x->m->stage);
    for (int k = 0; sched_next(&it, &o); k++) {
        /* the heartbeat's position, and the faults planted there */
        health_op(x->iter + 1, k, 1, o.kind, o.mb, o.chunk);
        RT_TRY(inject_at_op(x->iter + 1, k));
        RT_TRY(run_op(x, &o));
        health_op(x->iter + 1, k, 0, o.kind, o.mb, o.chunk);
    }
    RT_TRY(OP->iter_end(x->rt));
    RT_TRY(gpt_fp8_step(x->m)); /* the amaxes of this iteration: the next one's FP8 scales */
    *time_s = (rt_now_ns() - t0) * 1e-9;
    for (long i = first; i < x->nrecs; i++) {
        x->recs[i].t_ready_ns = x->times[i].ready_ns, x->recs[i].t_start_ns = x->times[i].start_ns;
        x->recs[i].t_end_ns = x->times[i].end_ns;
        x->recs[i].t_comm_wait_ns += x->times[i].wait_ns; /* the GPU's stalls on communication (rt_times_t) */
    }
    for (long i = 0; i < (long)x->job->vpp * x->job->num_microbatches; i++)
        if (x->saved[i])
            return exec_fail("a forward's activations were never consumed by its backward", __FILE__, __LINE__);
    RT_TRY(iteration_loss(x, loss));
    x->iter++;
    return 0;
}

/* ---- checkpoint state ------------------------------------------------------------------------ */

int exec_state_get(exec_t *x, float *host3)
{
    size_t b = (size_t)x->nshard * sizeof(float);
    RT_TRY(OP->sync(x->rt));
    if (x->master) {
        RT_TRY(OP->d2h(x->rt, host3, x->master, b));
    } else { /* the owned parts of the weights, piece by piece, in shard order */
        for (int p = 0; p < x->m->npieces; p++) {
            long lo, hi;
            owned(x, p, &lo, &hi);
            RT_TRY(OP->d2h(x->rt, host3 + x->shard_base[p], (float *)x->m->params + lo,
                           (size_t)(hi - lo) * sizeof(float)));
        }
    }
    if (x->m->fp8_sites) /* the next iteration's FP8 scales */
        memcpy(host3 + 3 * x->nshard, x->m->fp8_scale, sizeof(float) * (size_t)x->m->fp8_sites);
    return OP->d2h(x->rt, host3 + x->nshard, x->mom1, b) || OP->d2h(x->rt, host3 + 2 * x->nshard, x->mom2, b);
}

int exec_state_set(exec_t *x, const float *host3, int step)
{
    size_t b = (size_t)x->nshard * sizeof(float);
    if (x->master) /* else the act copy below is the master */
        RT_TRY(OP->h2d(x->rt, x->master, host3, b));
    RT_TRY(OP->h2d(x->rt, x->mom1, host3 + x->nshard, b));
    RT_TRY(OP->h2d(x->rt, x->mom2, host3 + 2 * x->nshard, b));
    if (x->m->fp8_sites)
        memcpy(x->m->fp8_scale, host3 + 3 * x->nshard, sizeof(float) * (size_t)x->m->fp8_sites);
    /* the act copy of the owned parts; the others arrive with the DP gather */
    for (int p = 0; p < x->m->npieces; p++) {
        long lo, hi;
        owned(x, p, &lo, &hi);
        RT_TRY(OP->act_from_f32(x->rt, (char *)x->m->params + lo * x->rt->act_bytes, host3 + x->shard_base[p], hi - lo));
    }
    x->step = step, x->iter = x->iter0 = step;
    return 0;
}
