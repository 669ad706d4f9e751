/* real/gpt_offload.c: activation offloading on the CPU path
 * (--activation-offload-fraction F, as MEMO offloads): after a layer's
 * forward, the first F of the token rows of each tensor it keeps for its
 * backward go to host memory and the rest to a smaller buffer of the
 * rank's pool; before its backward they come back into one buffer. The
 * maths is untouched (the copies are exact); what changes is the pool's
 * peak: the saved activations of the micro-batches in flight take 1 - F of
 * their room, as the memory model counts them. On the CPU path the host
 * is plain memory and the copies are memcpy on the compute stream; the
 * GPU path (pinned memory, a copy stream beside compute) is refused by
 * gpt_check_switches. The tensors moved are those kept per token: the
 * norms' outputs and statistics, q, k, v and the attention output, the
 * MLP's, the residual, the dropout masks; an MoE layer's experts' rows and
 * its shared expert's (gpt_moe_kept); the attention's log-sum-exp (per
 * head, small), context parallelism's buffers and the routing's stay. */
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

/* The rows that go to the host: the first F of them. */
static long host_rows(const gpt_t *m, long rows) { return (long)(m->job->offload_fraction * (double)rows); }

int gpt_offload(gpt_t *m, layer_saved_t *s)
{
    if (m->job->offload_fraction <= 0)
        return 0;
    gpt_kept_t k[GPT_MAX_KEPT];
    int n = kept_list(m, s, k);
    for (int i = 0; i < n; i++) {
        long h = host_rows(m, k[i].rows);
        size_t hb = (size_t)h * k[i].row_bytes, db = (size_t)(k[i].rows - h) * k[i].row_bytes;
        void *host = malloc(hb ? hb : 1), *dev = NULL;
        if (!host) {
            fprintf(stderr, "%s:%d: out of host memory offloading %zu bytes\n", __FILE__, __LINE__, hb);
            return -1;
        }
        RT_TRY(OP->alloc(RT, &dev, db ? db : 1, RT_POOL_MAIN));
        RT_TRY(OP->d2h(RT, host, *k[i].p, hb));
        RT_TRY(OP->copy2d(RT, dev, db, (char *)*k[i].p + hb, db, db, 1, STREAM_COMPUTE));
        drop(m, *k[i].p);
        *k[i].p = dev, s->off_host[i] = host;
    }
    s->offloaded = n;
    return 0;
}

int gpt_fetch(gpt_t *m, layer_saved_t *s)
{
    if (!s->offloaded)
        return 0;
    gpt_kept_t k[GPT_MAX_KEPT];
    int n = kept_list(m, s, k); /* the same list: the same tensors are there, smaller */
    for (int i = 0; i < n; i++) {
        long h = host_rows(m, k[i].rows);
        size_t hb = (size_t)h * k[i].row_bytes, db = (size_t)(k[i].rows - h) * k[i].row_bytes;
        void *whole;
        RT_TRY(OP->alloc(RT, &whole, hb + db, RT_POOL_MAIN));
        RT_TRY(OP->h2d(RT, whole, s->off_host[i], hb));
        RT_TRY(OP->copy2d(RT, (char *)whole + hb, db, *k[i].p, db, db, 1, STREAM_COMPUTE));
        drop(m, *k[i].p);
        free(s->off_host[i]);
        *k[i].p = whole, s->off_host[i] = NULL;
    }
    s->offloaded = 0;
    return 0;
}
