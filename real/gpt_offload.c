/* real/gpt_offload.c: activation offloading (--activation-offload-fraction
 * F, as MEMO offloads): after a layer's forward, the first F of the token
 * rows of each tensor it keeps for its backward go to host memory and the
 * rest to a smaller buffer of the rank's pool; before its backward they
 * come back into one buffer. The maths is untouched (the copies are
 * exact); what changes is the pool's peak: the saved activations of the
 * micro-batches in flight take 1 - F of their room, as the memory model
 * counts them. The copies run on the copy stream (rt.h RT_STREAM_COPY)
 * into the runtime's host memory (host_alloc: pinned on the GPU). On the
 * CPU that stream is the calling thread: a copy is done when issued and a
 * layer's whole buffers go at once. On the GPU the copies run beside the
 * layers: a layer's copies out are issued after its forward and its whole
 * buffers freed at the next offload or fetch, once the compute stream has
 * waited for the copy stream (one layer later: MEMO's double buffering);
 * the copies back of the layer the backward reaches next are issued as the
 * previous layer's backward starts (a prefetch), and its backward waits for
 * them. The tensors moved are those kept per token: the norms' outputs and
 * statistics, q, k, v and the attention output, the MLP's, the residual,
 * the dropout masks; an MoE layer's experts' rows and its shared expert's
 * (gpt_moe_kept); the attention's log-sum-exp (per head, small), context
 * parallelism's buffers and the routing's stay. */
#include "real/gpt_layer.h"

#include <stdlib.h>

int gpt_kept_add(gpt_kept_t *k, int n, const gpt_kept_t *list, int count)
{
    for (int i = 0; i < count; i++)
        if (*list[i].p)
            k[n++] = list[i];
    return n;
}

static int kept_list(gpt_t *m, layer_saved_t *s, gpt_kept_t *k)
{
    size_t ab = RT->act_bytes, f = sizeof(float);
    long N = m->N, Nl = m->Nl;
    gpt_kept_t all[] = {{&s->h1, Nl, m->C * ab}, {&s->h2, Nl, m->C * ab}, {&s->x2, Nl, m->C * ab},
                        {(void **)&s->mean1, Nl, f}, {(void **)&s->rstd1, Nl, f}, {(void **)&s->mean2, Nl, f},
                        {(void **)&s->rstd2, Nl, f}, {&s->q, N, (size_t)m->nh * m->HS * ab},
                        {&s->k, N, (size_t)m->g * m->HS * ab}, {&s->v, N, (size_t)m->g * m->HS * ab},
                        {&s->ao, N, (size_t)m->nh * m->HS * ab}, {&s->pre, N, (size_t)m->Fw * ab},
                        {&s->gl, N, (size_t)m->Ft * ab}, {&s->cat, N, ((size_t)m->nh * m->HS + m->Ft) * ab},
                        {(void **)&s->mask_a, Nl, (size_t)m->C}, {(void **)&s->mask_m, Nl, (size_t)m->C}};
    return gpt_moe_kept(m, s, k, gpt_kept_add(k, 0, all, (int)(sizeof all / sizeof all[0])));
}

/* The bytes of a kept tensor that go to the host: its first F rows'. */
static size_t host_bytes(const gpt_t *m, const gpt_kept_t *k)
{
    return (size_t)(m->job->offload_fraction * (double)k->rows) * k->row_bytes;
}

/* bytes from src to dst (either side device or host_alloc's) on the copy stream */
static int copy(gpt_t *m, void *dst, const void *src, size_t bytes)
{
    return OP->copy2d(RT, dst, bytes, src, bytes, bytes, 1, RT_STREAM_COPY);
}

/* The copy stream after all the compute stream has issued: what a layer
 * wrote, and what was done to a block as it was handed out (a copy into a
 * new block joins after its allocation). */
static int join_copy(gpt_t *m) { return OP->join(RT, RT_STREAM_COPY, STREAM_COMPUTE); }

/* The last offloaded layer's whole tensors, once the compute stream has
 * waited for the copies that read them. */
static int free_pending(gpt_t *m)
{
    if (!m->noff_pending)
        return 0;
    RT_TRY(OP->join(RT, STREAM_COMPUTE, RT_STREAM_COPY));
    for (int i = 0; i < m->noff_pending; i++)
        drop(m, m->off_pending[i]);
    m->noff_pending = 0;
    return 0;
}

int gpt_offload(gpt_t *m, layer_saved_t *s)
{
    if (m->job->offload_fraction <= 0)
        return 0;
    RT_TRY(free_pending(m));
    gpt_kept_t k[GPT_MAX_KEPT];
    int n = kept_list(m, s, k);
    for (int i = 0; i < n; i++) {
        size_t hb = host_bytes(m, &k[i]), db = k[i].rows * k[i].row_bytes - hb;
        void *dev;
        RT_TRY(OP->host_alloc(RT, &s->off_host[i], hb));
        RT_TRY(OP->alloc(RT, &dev, db ? db : 1, RT_POOL_MAIN));
        RT_TRY(join_copy(m));
        RT_TRY(copy(m, s->off_host[i], *k[i].p, hb));
        RT_TRY(copy(m, dev, (char *)*k[i].p + hb, db));
        m->off_pending[m->noff_pending++] = *k[i].p;
        *k[i].p = dev;
        if (RT->kind == RT_CPU) /* its copies are done: the whole tensor goes now */
            RT_TRY(free_pending(m));
    }
    s->offloaded = n;
    return 0;
}

/* Layer s's copies back into whole buffers, on the copy stream. */
static int bring_back(gpt_t *m, layer_saved_t *s)
{
    gpt_kept_t k[GPT_MAX_KEPT];
    int n = kept_list(m, s, k); /* the same list: the same tensors are there, smaller */
    for (int i = 0; i < n; i++) {
        size_t hb = host_bytes(m, &k[i]), db = k[i].rows * k[i].row_bytes - hb;
        void *whole;
        RT_TRY(OP->alloc(RT, &whole, hb + db, RT_POOL_MAIN));
        RT_TRY(join_copy(m));
        RT_TRY(copy(m, whole, s->off_host[i], hb));
        RT_TRY(copy(m, (char *)whole + hb, *k[i].p, db));
        s->off_dev[i] = *k[i].p, *k[i].p = whole;
    }
    s->prefetched = 1;
    return 0;
}

int gpt_fetch(gpt_t *m, layer_saved_t *s, layer_saved_t *next)
{
    RT_TRY(free_pending(m));
    if (s->offloaded) {
        if (!s->prefetched)
            RT_TRY(bring_back(m, s));
        RT_TRY(OP->join(RT, STREAM_COMPUTE, RT_STREAM_COPY)); /* the layer's backward reads them */
        for (int i = 0; i < s->offloaded; i++) {
            drop(m, s->off_dev[i]);
            OP->host_free(RT, s->off_host[i]);
            s->off_dev[i] = s->off_host[i] = NULL;
        }
        s->offloaded = s->prefetched = 0;
    }
    /* the next layer's copies back beside this one's backward (the CPU's are done at once: no gain) */
    return next && next->offloaded && !next->prefetched && RT->kind == RT_GPU ? bring_back(m, next) : 0;
}
