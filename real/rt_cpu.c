/* real/rt_cpu.c: the CPU runtime (rt.h): reference kernels in fp32, run
 * synchronously on the rank's one thread. A stream is the list of the
 * nonblocking MPI requests issued on it (comm_mpi.c) that are not known to
 * be complete; record snapshots a stream's position, wait completes the
 * requests up to a snapshot, and every op's start polls the lists with
 * MPI_Test so completions are stamped close to when they happen (at the
 * latest when the next op starts). */
#include "real/rt_cpu.h"

#include "kernels/attnmerge.h"
#include "kernels/moe.h"
#include "kernels/crossentropy.h"
#include "kernels/embedding.h"
#include "kernels/fp8.h"
#include "kernels/gelu.h"
#include "kernels/layernorm.h"
#include "kernels/rope.h"
#include "kernels/dropout.h"
#include "kernels/matmul.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    MPI_Request req;
    long seq;
    rt_times_t *t; /* the op that issued it (its end is stamped at completion) */
} pending_t;

typedef struct {
    pending_t *p;
    int n, cap;
    long next_seq;
} cstream_t;

typedef struct {
    int stream;
    long seq; /* requests of `stream` with seq < this */
} snap_t;

typedef struct {
    cstream_t s[RT_NSTREAMS];
    rt_times_t *cur[RT_NSTREAMS]; /* op issuing on each stream */
    snap_t *snaps[CNT_COUNT];     /* [value - 1] */
    long nsnaps[CNT_COUNT], capsnaps[CNT_COUNT];
    int64_t t0;
    int64_t slow_cpu0, slow_wait0; /* at slow_begin: thread CPU time, comm_wait_cpu_ns */
    void *base[RT_NPOOLS];
} cpu_t;

int64_t rt_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t rt_thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t rt_busy_cpu_ns(const rt_t *rt, int64_t cpu0, int64_t wait0)
{
    return rt_thread_cpu_ns() - cpu0 - (rt->comm_wait_cpu_ns - wait0);
}

static cpu_t *C(rt_t *rt) { return rt->impl; }
static int64_t rel(rt_t *rt) { return rt_now_ns() - C(rt)->t0; }

static int mpi_fail(int rc, const char *what, int line)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, line, what, msg);
    return rc;
}

int rt_cpu_add_request(rt_t *rt, int stream, MPI_Request req)
{
    cstream_t *s = &C(rt)->s[stream];
    if (s->n == s->cap) {
        int cap = s->cap ? s->cap * 2 : 64;
        pending_t *p = realloc(s->p, (size_t)cap * sizeof *p);
        if (!p) {
            fprintf(stderr, "%s:%d: out of host memory for MPI requests\n", __FILE__, __LINE__);
            return -1;
        }
        s->p = p, s->cap = cap;
    }
    s->p[s->n++] = (pending_t){req, s->next_seq++, C(rt)->cur[stream]};
    return 0;
}

static void stamp(rt_t *rt, rt_times_t *t)
{
    if (t) {
        int64_t now = rel(rt);
        if (now > t->end_ns)
            t->end_ns = now;
    }
}

int rt_cpu_wait(rt_t *rt, int n, MPI_Request *reqs)
{
    int64_t t0 = rt_now_ns(), c0 = rt_thread_cpu_ns();
    int rc = MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
    rt->comm_wait_ns += rt_now_ns() - t0, rt->comm_wait_cpu_ns += rt_thread_cpu_ns() - c0;
    return rc;
}

/* Completes the requests of stream s with seq < upto (all: LONG_MAX). */
static int complete(rt_t *rt, int s, long upto)
{
    cstream_t *st = &C(rt)->s[s];
    int k = 0;
    for (int i = 0; i < st->n; i++) {
        if (st->p[i].seq >= upto) {
            st->p[k++] = st->p[i];
            continue;
        }
        int rc = rt_cpu_wait(rt, 1, &st->p[i].req);
        if (rc != MPI_SUCCESS)
            return mpi_fail(rc, "MPI_Waitall", __LINE__);
        stamp(rt, st->p[i].t);
    }
    st->n = k;
    return 0;
}

static int poll_all(rt_t *rt)
{
    for (int s = 0; s < RT_NSTREAMS; s++) {
        cstream_t *st = &C(rt)->s[s];
        int k = 0;
        for (int i = 0; i < st->n; i++) {
            int done = 0;
            int rc = MPI_Test(&st->p[i].req, &done, MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS)
                return mpi_fail(rc, "MPI_Test", __LINE__);
            if (done)
                stamp(rt, st->p[i].t);
            else
                st->p[k++] = st->p[i];
        }
        st->n = k;
    }
    return 0;
}

/* ---- memory -------------------------------------------------------------- */

static void *sys_alloc(void *ctx, size_t n) { return malloc(n); }
static void sys_free(void *ctx, void *p) { free(p); }

static int c_alloc(rt_t *rt, void **p, size_t bytes, int pool)
{
    *p = arena_alloc(&rt->pool[pool], bytes);
    if (!*p) {
        fprintf(stderr, "%s:%d: out of host memory allocating %zu bytes\n", __FILE__, __LINE__, bytes);
        return -1;
    }
    return 0;
}

static void c_free(rt_t *rt, void *p) { arena_free(&rt->pool[RT_POOL_MAIN], p); }

static int c_memset0(rt_t *rt, void *p, size_t bytes, int stream)
{
    memset(p, 0, bytes);
    return 0;
}

static int c_copy(rt_t *rt, void *dst, const void *src, size_t bytes)
{
    memcpy(dst, src, bytes);
    return 0;
}

static int c_copy2d(rt_t *rt, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                    size_t rows, int stream)
{
    for (size_t r = 0; r < rows; r++)
        memcpy((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
    return 0;
}

static int c_host_alloc(rt_t *rt, void **p, size_t bytes)
{
    *p = malloc(bytes ? bytes : 1);
    if (!*p)
        fprintf(stderr, "%s:%d: out of host memory allocating %zu bytes\n", __FILE__, __LINE__, bytes);
    return *p ? 0 : -1;
}

static void c_host_free(rt_t *rt, void *p) { free(p); }

static int c_act_from_f32(rt_t *rt, void *dst, const float *host, long n)
{
    memcpy(dst, host, (size_t)n * sizeof(float));
    return 0;
}

/* ---- ordering -------------------------------------------------------------- */

static int c_join(rt_t *rt, int waiter, int on) { return complete(rt, on, C(rt)->s[on].next_seq); }

/* Kernels run synchronously on the calling thread: which compute stream
 * they belong to changes nothing but is checked as on the GPU. */
static int c_compute_on(rt_t *rt, int stream)
{
    return rt_check_compute_stream(stream, __FILE__, __LINE__);
}

static int c_slow_begin(rt_t *rt)
{
    C(rt)->slow_cpu0 = rt_thread_cpu_ns(), C(rt)->slow_wait0 = rt->comm_wait_cpu_ns;
    return 0;
}

/* Busy, not asleep: a sleep would lend the core to the ranks sharing it.
 * The thread's CPU clock is a system call: read every 256 pauses, so the
 * spin's own kernel work does not slow the work beside it. */
static int c_slow_end(rt_t *rt, double extra)
{
    int64_t busy = rt_busy_cpu_ns(rt, C(rt)->slow_cpu0, C(rt)->slow_wait0);
    int64_t until = rt_thread_cpu_ns() + (int64_t)(extra * (double)(busy > 0 ? busy : 0));
    while (rt_thread_cpu_ns() < until)
        for (int i = 0; i < 256; i++) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#else
            __asm__ __volatile__("" ::: "memory");
#endif
        }
    return 0;
}

static int c_record(rt_t *rt, int stream, int counter, long value)
{
    cpu_t *c = C(rt);
    if (value != c->nsnaps[counter] + 1) {
        fprintf(stderr, "%s:%d: counter %d recorded at %ld after %ld\n", __FILE__, __LINE__, counter, value,
                c->nsnaps[counter]);
        return -1;
    }
    if (c->nsnaps[counter] == c->capsnaps[counter]) {
        long cap = c->capsnaps[counter] ? c->capsnaps[counter] * 2 : 64;
        snap_t *p = realloc(c->snaps[counter], (size_t)cap * sizeof *p);
        if (!p)
            return -1;
        c->snaps[counter] = p, c->capsnaps[counter] = cap;
    }
    c->snaps[counter][c->nsnaps[counter]++] = (snap_t){stream, c->s[stream].next_seq};
    return 0;
}

static int c_wait(rt_t *rt, int stream, int counter, long value)
{
    cpu_t *c = C(rt);
    if (value <= 0)
        return 0;
    if (value > c->nsnaps[counter]) {
        fprintf(stderr, "%s:%d: wait for counter %d >= %ld, but it was recorded only %ld times: the op "
                        "program waits on an op not yet issued\n",
                __FILE__, __LINE__, counter, value, c->nsnaps[counter]);
        return -1;
    }
    snap_t sn = c->snaps[counter][value - 1];
    return complete(rt, sn.stream, sn.seq);
}

static int c_sync(rt_t *rt)
{
    for (int s = 0; s < RT_NSTREAMS; s++)
        if (complete(rt, s, C(rt)->s[s].next_seq))
            return -1;
    return 0;
}

/* ---- timers ----------------------------------------------------------------- */

static int c_mark_ready(rt_t *rt, int stream, rt_times_t *t)
{
    int rc = poll_all(rt);
    t->ready_ns = rel(rt);
    t->start_ns = t->end_ns = t->ready_ns;
    C(rt)->cur[stream] = t;
    return rc;
}

static int c_mark_start(rt_t *rt, int stream, rt_times_t *t)
{
    t->start_ns = t->end_ns = rel(rt);
    return 0;
}

static int c_mark_end(rt_t *rt, int stream, rt_times_t *t)
{
    cstream_t *s = &C(rt)->s[stream];
    for (int i = 0; i < s->n; i++)
        if (s->p[i].t == t)
            return 0; /* stamped when its last request completes */
    t->end_ns = rel(rt);
    return 0;
}

static int c_iter_begin(rt_t *rt)
{
    cpu_t *c = C(rt);
    arena_reset(&rt->pool[RT_POOL_XFER]);
    for (int k = 0; k < CNT_COUNT; k++)
        c->nsnaps[k] = 0;
    for (int s = 0; s < RT_NSTREAMS; s++)
        c->cur[s] = NULL;
    c->t0 = rt_now_ns();
    return 0;
}

static int c_iter_end(rt_t *rt) { return c_sync(rt); }

/* ---- kernels: the references ----------------------------------------------------- */

static int c_embedding_fwd(rt_t *rt, void *out, const int *tokens, const void *wte, const void *wpe, int v0,
                           int V, int B, int T, int C)
{
    kern_embedding_fwd_ref(out, tokens, wte, wpe, v0, V, B, T, C);
    return 0;
}

static int c_embedding_bwd(rt_t *rt, float *dwte, float *dwpe, const void *dout, const int *tokens, int v0,
                           int V, int B, int T, int C)
{
    kern_embedding_bwd_ref(dwte, dwpe, dout, tokens, v0, V, B, T, C);
    return 0;
}

static int c_layernorm_fwd(rt_t *rt, void *residual, void *out, float *mean, float *rstd, const void *inp,
                           const void *skip, const kern_dropout *drop, uint8_t *mask, const void *w, const void *b,
                           int N, int C)
{
    kern_layernorm_fwd_ref(residual, out, mean, rstd, inp, skip, drop, mask, w, b, N, C);
    return 0;
}

static int c_layernorm_bwd(rt_t *rt, void *dres, float *dw, float *db, const void *dout, const void *xln,
                           const void *w, const float *mean, const float *rstd, int N, int C)
{
    kern_layernorm_bwd_ref(dres, dw, db, dout, xln, w, mean, rstd, N, C);
    return 0;
}

static int c_rmsnorm_fwd(rt_t *rt, void *residual, void *out, float *rstd, const void *inp, const void *skip,
                         const kern_dropout *drop, uint8_t *mask, const void *w, int N, int C)
{
    kern_rmsnorm_fwd_ref(residual, out, rstd, inp, skip, drop, mask, w, N, C);
    return 0;
}

static int c_rmsnorm_bwd(rt_t *rt, void *dres, float *dw, const void *dout, const void *xln, const void *w,
                         const float *rstd, int N, int C)
{
    kern_rmsnorm_bwd_ref(dres, dw, dout, xln, w, rstd, N, C);
    return 0;
}

static int c_linear_fwd(rt_t *rt, void *out, const void *inp, const void *weight, const void *bias, int N, int C,
                        int OC)
{
    kern_matmul_fwd_ref(out, NULL, inp, weight, bias, N, C, OC);
    return 0;
}

static int c_linear_dgrad(rt_t *rt, void *dinp, const void *dout, const void *weight, int N, int C, int OC)
{
    kern_gemm_ref(dinp, dout, weight, N, C, OC, 0, 0, OC, C, C, 0.0f);
    return 0;
}

static int c_linear_wgrad(rt_t *rt, float *dweight, float *dbias, const void *dout, const void *inp, int N, int C,
                          int OC)
{
    kern_gemm_ref(dweight, dout, inp, OC, C, N, 1, 0, OC, C, C, 1.0f);
    if (dbias)
        kern_bias_grad_ref(dbias, dout, N, OC);
    return 0;
}

static int c_bias_gelu_fwd(rt_t *rt, void *out, const void *inp, const void *bias, int N, int C)
{
    kern_bias_gelu_fwd_ref(out, inp, bias, N, C);
    return 0;
}

static int c_bias_gelu_bwd(rt_t *rt, void *dinp, float *dbias, const void *dout, const void *inp, const void *bias,
                           int N, int C)
{
    kern_bias_gelu_bwd_ref(dinp, dbias, dout, inp, bias, N, C);
    return 0;
}

static int c_bias_add(rt_t *rt, void *out, const void *inp, const void *bias, int N, int C)
{
    kern_bias_add_ref(out, inp, bias, N, C);
    return 0;
}

static int c_gelu_fwd(rt_t *rt, void *out, const void *inp, long n)
{
    kern_gelu_fwd_ref(out, inp, n);
    return 0;
}

static int c_gelu_bwd(rt_t *rt, void *dinp, const void *dout, const void *inp, long n)
{
    kern_gelu_bwd_ref(dinp, dout, inp, n);
    return 0;
}

static int c_bias_grad(rt_t *rt, float *dbias, const void *dout, int N, int C)
{
    kern_bias_grad_ref(dbias, dout, N, C);
    return 0;
}

static int c_dropout(rt_t *rt, void *out, uint8_t *mask, const void *inp, long n, kern_dropout d)
{
    kern_dropout_ref(out, mask, inp, n, d);
    return 0;
}

static int c_dropout_masked(rt_t *rt, void *out, const void *inp, const uint8_t *mask, long n, float scale)
{
    kern_dropout_masked_ref(out, inp, mask, n, scale);
    return 0;
}

static int c_dropout_add(rt_t *rt, void *out, uint8_t *mask, const void *x, const void *inp, long n, kern_dropout d)
{
    kern_dropout_add_ref(out, mask, x, inp, n, d);
    return 0;
}

static int c_rope(rt_t *rt, void *x, int N, int T, int t0, int H, int HS, double base, int inverse)
{
    kern_rope_ref(x, N, T, t0, H, HS, base, inverse);
    return 0;
}

static int c_swiglu_fwd(rt_t *rt, void *out, const void *inp, int N, int F)
{
    kern_swiglu_fwd_ref(out, inp, N, F);
    return 0;
}

static int c_swiglu_bwd(rt_t *rt, void *dinp, const void *dout, const void *inp, int N, int F)
{
    kern_swiglu_bwd_ref(dinp, dout, inp, N, F);
    return 0;
}

static int c_add(rt_t *rt, void *out, const void *a, const void *b, long n)
{
    float *o = out;
    const float *x = a, *y = b;
    for (long i = 0; i < n; i++)
        o[i] = x[i] + y[i];
    return 0;
}

static int c_attn_fwd(rt_t *rt, int attn, void *out, void *saved, const void *q, const void *k, const void *v,
                      kern_attn_shape s)
{
    if (attn_is_flash(attn))
        kern_attention_fwd_ref(out, saved, q, k, v, s);
    else
        kern_attention_unfused_fwd_ref(out, saved, q, k, v, s);
    return 0;
}

static int c_attn_bwd(rt_t *rt, int attn, void *dq, void *dk, void *dv, const void *dout, const void *q,
                      const void *k, const void *v, const void *out, const void *saved, kern_attn_shape s)
{
    if (attn_is_flash(attn))
        kern_attention_bwd_ref(dq, dk, dv, dout, q, k, v, out, saved, s);
    else
        kern_attention_unfused_bwd_ref(dq, dk, dv, dout, q, k, v, saved, s);
    return 0;
}

static int c_attn_merge(rt_t *rt, void *out, float *lse, const void *out_b, const float *lse_b, int B, int T,
                        int NH, int HS)
{
    kern_attnmerge_ref(out, lse, out_b, lse_b, B, T, NH, HS);
    return 0;
}

static int c_fp8_quant(rt_t *rt, void *out, const void *x, long n, int fmt, float scale, float *amax)
{
    float a = 0;
    kern_fp8_quant_ref(out, x, n, fmt, scale, &a);
    *amax = a > *amax ? a : *amax; /* a running max, as the GPU's (rt.h) */
    return 0;
}

static int c_xent_fwd(rt_t *rt, float *losses, float *lse, const void *logits, const int *targets, int N, int V)
{
    kern_crossentropy_fwd_ref(losses, lse, logits, targets, N, V);
    return 0;
}

static int c_xent_part(rt_t *rt, float *part, const void *logits, const int *targets, int v0, int N, int V)
{
    kern_crossentropy_part_ref(part, logits, targets, v0, N, V);
    return 0;
}

static int c_xent_merge(rt_t *rt, float *losses, float *lse, const float *parts, const int *targets, int P, int N)
{
    kern_crossentropy_merge_ref(losses, lse, parts, targets, P, N);
    return 0;
}

static int c_xent_bwd(rt_t *rt, void *dlogits, const void *logits, const float *lse, const int *targets, int v0,
                      float dloss, int N, int V)
{
    kern_crossentropy_bwd_ref(dlogits, logits, lse, targets, v0, dloss, N, V);
    return 0;
}

/* The act copy of the weights is fp32 here: the references update the
 * master and the copy is refreshed from it. */
static void refresh(const kern_opt_tensor *ts, int count)
{
    for (int k = 0; k < count; k++)
        if (ts[k].param_bf16)
            memcpy(ts[k].param_bf16, ts[k].param, (size_t)ts[k].n * sizeof(float));
}

static kern_opt_tensor *no_copy(const kern_opt_tensor *ts, int count)
{
    kern_opt_tensor *c = malloc((size_t)(count ? count : 1) * sizeof *c);
    if (c) {
        memcpy(c, ts, (size_t)count * sizeof *c);
        for (int k = 0; k < count; k++)
            c[k].param_bf16 = NULL;
    }
    return c;
}

static int c_adamw(rt_t *rt, const kern_opt_tensor *ts, int count, kern_opt_hparams hp)
{
    kern_opt_tensor *c = no_copy(ts, count);
    if (!c)
        return -1;
    kern_adamw_ref(c, count, hp);
    free(c);
    refresh(ts, count);
    return 0;
}

static int c_lamb_norms(rt_t *rt, const kern_opt_tensor *ts, int count, kern_opt_hparams hp, float *norms)
{
    kern_lamb_norms_ref(ts, count, hp, norms);
    return 0;
}

static int c_lamb_apply(rt_t *rt, const kern_opt_tensor *ts, int count, kern_opt_hparams hp, const float *norms)
{
    kern_opt_tensor *c = no_copy(ts, count);
    if (!c)
        return -1;
    kern_lamb_apply_ref(c, count, hp, norms);
    free(c);
    refresh(ts, count);
    return 0;
}

static int c_grad_sumsq(rt_t *rt, const kern_opt_tensor *ts, int count, float *sums)
{
    kern_grad_sumsq_ref(ts, count, sums);
    return 0;
}

static void *c_native(rt_t *rt, int stream) { return NULL; }

static void c_destroy(rt_t *rt)
{
    if (!rt)
        return;
    cpu_t *c = C(rt);
    c_sync(rt);
    for (int p = 0; p < RT_NPOOLS; p++)
        arena_destroy(&rt->pool[p]), free(c->base[p]);
    for (int s = 0; s < RT_NSTREAMS; s++)
        free(c->s[s].p);
    for (int k = 0; k < CNT_COUNT; k++)
        free(c->snaps[k]);
    free(c);
    free(rt);
}

static int c_moe_route(rt_t *rt, float *probs, int *idx, float *scores, const void *logits, int N, int E, int k)
{
    kern_moe_route_ref(probs, idx, scores, logits, N, E, k);
    return 0;
}

static int c_moe_route_bwd(rt_t *rt, void *dlogits, const float *dprobs, const float *probs, const int *idx,
                           const float *scores, const float *coef, int coef_ld, int N, int E, int k)
{
    kern_moe_route_bwd_ref(dlogits, dprobs, probs, idx, scores, coef, coef_ld, N, E, k);
    return 0;
}

static int c_moe_gather(rt_t *rt, void *out, const void *x, const int *rows, const float *w, long M, int C)
{
    kern_moe_gather_ref(out, x, rows, w, M, C);
    return 0;
}

static int c_moe_combine(rt_t *rt, void *out, const void *y, const int *inv, const float *w, long N, int k, int C)
{
    kern_moe_combine_ref(out, y, inv, w, N, k, C);
    return 0;
}

static int c_moe_rowdot(rt_t *rt, float *out, const void *a, const int *rows, const void *b, long M, int C)
{
    kern_moe_rowdot_ref(out, a, rows, b, M, C);
    return 0;
}

static const rt_ops_t cpu_ops = {
    c_alloc, c_free, c_memset0, c_copy, c_copy, c_copy2d, c_host_alloc, c_host_free, c_act_from_f32,
    c_join, c_record, c_wait, c_sync, c_compute_on, c_slow_begin, c_slow_end, NULL, NULL,
    c_mark_ready, c_mark_start, c_mark_end, c_iter_begin, c_iter_end,
    c_embedding_fwd, c_embedding_bwd, c_layernorm_fwd, c_layernorm_bwd, c_rmsnorm_fwd, c_rmsnorm_bwd,
    c_linear_fwd, c_linear_dgrad, c_linear_wgrad,
    c_bias_gelu_fwd, c_bias_gelu_bwd, c_bias_add, c_gelu_fwd, c_gelu_bwd, c_bias_grad, c_rope, c_swiglu_fwd, c_swiglu_bwd,
    c_add, c_dropout, c_dropout_masked, c_dropout_add,
    c_attn_fwd, c_attn_bwd, c_attn_merge, c_fp8_quant, c_xent_fwd, c_xent_part, c_xent_merge, c_xent_bwd,
    c_moe_route, c_moe_route_bwd, c_moe_gather, c_moe_combine, c_moe_rowdot,
    c_adamw, c_lamb_norms, c_lamb_apply, c_grad_sumsq,
    NULL, NULL, c_native, c_destroy, /* no gemm_algos, no attn_backend */
};

int rt_cpu_create(rt_t **out, const size_t plan[RT_NPOOLS], char *err, int errlen)
{
    rt_t *rt = calloc(1, sizeof *rt);
    cpu_t *c = calloc(1, sizeof *c);
    if (!rt || !c) {
        free(rt), free(c);
        snprintf(err, errlen, "out of host memory creating the CPU runtime");
        return -1;
    }
    rt->op = &cpu_ops, rt->kind = RT_CPU, rt->act_bytes = 4, rt->impl = c;
    snprintf(rt->device_name, sizeof rt->device_name, "cpu (reference kernels, fp32)");
    for (int p = 0; p < RT_NPOOLS; p++) {
        /* malloc reserves address space; pages are touched only when used */
        c->base[p] = plan[p] ? malloc(plan[p]) : NULL;
        arena_init(&rt->pool[p], c->base[p], c->base[p] ? plan[p] : 0, sys_alloc, sys_free, NULL);
    }
    c->t0 = rt_now_ns();
    *out = rt;
    return 0;
}

size_t rt_attn_saved_bytes(const rt_t *rt, int attn, kern_attn_shape s)
{
    if (attn_is_flash(attn))
        return (size_t)s.B * s.NH * s.T * sizeof(float);
    return (size_t)s.B * s.NH * s.T * s.T * rt->act_bytes;
}
