/* real/rt_gpu.c: the GPU runtime (rt.h): the CUDA launchers of kernels/
 * in bf16 with fp32 accumulation, on RT_NSTREAMS non-blocking CUDA
 * streams, ordered by CUDA events and timed by CUDA events. Semantics
 * mirror the CPU reference runtime (rt_cpu.c); only the mechanisms differ:
 *   - every kernel runs on a compute stream (see compute_on),
 *     asynchronously; memset0 and copy2d are asynchronous on the stream
 *     given; h2d, d2h and the act conversions return when the data is in
 *     place;
 *   - record snapshots a stream with an event per (counter, value), kept
 *     and re-recorded from one iteration to the next; wait makes a stream
 *     wait on that event; join records one event per stream and waits;
 *   - every mark records a timing event; iter_end synchronizes the device
 *     and turns each into ns since the iteration's start event;
 *   - each pool is one cudaMalloc of the planned size; what the arena
 *     needs beyond it comes from cudaMalloc once and is then cached, as
 *     host_alloc's pinned blocks (cudaMallocHost) are: copy2d takes them
 *     on either side, asynchronously.
 * h2d runs on the compute stream (after the kernels that used a freed
 * arena block, before those that use the new data) and waits for it.
 * Kernels run on the compute stream, or on the second compute stream
 * while compute_on says so (the chunked GEMMs of TP overlap). Each of the
 * two has its own kern_ctx (cuBLASLt handle + workspace), so a workspace
 * is never shared by two GEMMs in flight. Attention scratch is
 * runtime-owned and grow-only, used on the compute stream only. Where NVML
 * answers, a host thread reads the SM clock and power while an iteration
 * runs (rt_gpu_clock.h, rt->clock). The kernel launchers and the op table
 * are in rt_gpu_ops.c, the shared state in rt_gpu_int.h. */
#include "real/rt_gpu_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Doubles a host array's capacity to hold at least `need` items. */
static int grow(void **arr, long *cap, long need, size_t elem)
{
    if (need <= *cap)
        return 0;
    long n = *cap ? *cap : 64;
    while (n < need)
        n *= 2;
    void *p = realloc(*arr, (size_t)n * elem);
    if (!p) {
        fprintf(stderr, "%s:%d: out of host memory (%ld x %zu bytes)\n", __FILE__, __LINE__, n, elem);
        return -1;
    }
    *arr = p, *cap = n;
    return 0;
}

/* Event i of the list, creating the events up to it on first use. */
static int evlist_get(evlist_t *l, long i, cudaEvent_t *out)
{
    if (grow((void **)&l->ev, &l->cap, i + 1, sizeof *l->ev))
        return -1;
    for (; l->created <= i; l->created++)
        KERN_CUDA_TRY(cudaEventCreateWithFlags(&l->ev[l->created], l->flags));
    *out = l->ev[i];
    return 0;
}

static void evlist_free(evlist_t *l)
{
    for (long i = 0; i < l->created; i++)
        cudaEventDestroy(l->ev[i]);
    free(l->ev);
    l->ev = NULL, l->created = 0, l->cap = 0;
}

/* Streams and counters come from the op program: checked, as an index
 * out of range would read past the arrays. */
static int bad_index(const char *what, int i, int n, int line)
{
    if (i >= 0 && i < n)
        return 0;
    fprintf(stderr, "%s:%d: %s %d out of range [0, %d)\n", __FILE__, line, what, i, n);
    return -1;
}
#define BAD_STREAM(s) bad_index("stream", (s), RT_NSTREAMS, __LINE__)
#define BAD_COUNTER(k) bad_index("counter", (k), CNT_COUNT, __LINE__)

/* ---- memory -------------------------------------------------------------- */

/* Gives the idle cached blocks back to CUDA (a device-wide wait). */
static void xcache_trim(xcache_t *c)
{
    long k = 0;
    for (long i = 0; i < c->n; i++) {
        if (c->b[i].live) {
            c->b[k++] = c->b[i];
            continue;
        }
        cudaError_t e = c->pinned ? cudaFreeHost(c->b[i].p) : cudaFree(c->b[i].p);
        if (e != cudaSuccess)
            kern_report_cuda((int)e, "cudaFree (cached block)", __FILE__, __LINE__);
    }
    c->n = k;
}

/* Smallest idle block of at least n bytes and at most 2n, or -1. O(blocks). */
static long xcache_find(const xcache_t *c, size_t n)
{
    long best = -1;
    for (long i = 0; i < c->n; i++)
        if (!c->b[i].live && c->b[i].bytes >= n && c->b[i].bytes / 2 <= n &&
            (best < 0 || c->b[i].bytes < c->b[best].bytes))
            best = i;
    return best;
}

/* A new block of the cache's kind: device memory, or pinned host memory. */
static cudaError_t xcache_new(const xcache_t *c, void **p, size_t n)
{
    return c->pinned ? cudaMallocHost(p, n) : cudaMalloc(p, n);
}

/* The arena's fallback for requests beyond the plan (real/arena.h), and
 * host_alloc's pinned blocks. When the device (the host) is full, the idle
 * cached blocks go back first. */
static void *sys_alloc(void *ctx, size_t n)
{
    xcache_t *c = ctx;
    long i = xcache_find(c, n);
    if (i >= 0) {
        c->b[i].live = 1;
        return c->b[i].p;
    }
    void *p = NULL;
    if (grow((void **)&c->b, &c->cap, c->n + 1, sizeof *c->b))
        return NULL;
    cudaError_t e = xcache_new(c, &p, n);
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        xcache_trim(c);
        e = xcache_new(c, &p, n);
    }
    if (e != cudaSuccess) {
        kern_report_cuda((int)e, c->pinned ? "cudaMallocHost (host_alloc)" : "cudaMalloc (beyond the planned arena)",
                         __FILE__, __LINE__);
        return NULL;
    }
    c->b[c->n++] = (xblock_t){p, n, 1};
    return p;
}

static void sys_free(void *ctx, void *p)
{
    xcache_t *c = ctx;
    for (long i = 0; i < c->n; i++)
        if (c->b[i].p == p) {
            c->b[i].live = 0;
            return;
        }
    fprintf(stderr, "%s:%d: the arena freed %p, which it never had from the fallback\n", __FILE__, __LINE__, p);
}

int g_alloc(rt_t *rt, void **p, size_t bytes, int pool)
{
    *p = arena_alloc(&rt->pool[pool], bytes);
    if (!*p) {
        fprintf(stderr, "%s:%d: out of device memory allocating %zu bytes (pool %d)\n", __FILE__, __LINE__,
                bytes, pool);
        return -1;
    }
    /* A check for tests: MEGASIM_POISON_ALLOC=1 fills each new block of the compute stream's pool with NaN
     * bytes in that stream's order, so a read before the owner's first write (another stream's copy not
     * waited for) shows. */
    if (pool == RT_POOL_MAIN && G(rt)->poison)
        KERN_CUDA_TRY(cudaMemsetAsync(*p, 0xff, bytes, MAIN(rt)));
    return 0;
}

void g_free(rt_t *rt, void *p) { arena_free(&rt->pool[RT_POOL_MAIN], p); }

int g_host_alloc(rt_t *rt, void **p, size_t bytes)
{
    *p = sys_alloc(&G(rt)->pinned, bytes ? bytes : 1);
    return *p ? 0 : -1;
}

void g_host_free(rt_t *rt, void *p)
{
    if (p)
        sys_free(&G(rt)->pinned, p);
}

int g_memset0(rt_t *rt, void *p, size_t bytes, int stream)
{
    if (BAD_STREAM(stream))
        return -1;
    if (bytes)
        KERN_CUDA_TRY(cudaMemsetAsync(p, 0, bytes, G(rt)->s[stream]));
    return 0;
}

/* Ordered after the compute stream's work (whose freed arena blocks may be
 * the destination), and complete on return; a pageable source is staged by
 * the driver, so it may be reused at once. */
int g_h2d(rt_t *rt, void *dst, const void *src, size_t bytes)
{
    if (!bytes)
        return 0;
    KERN_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, MAIN(rt)));
    KERN_CUDA_TRY(cudaStreamSynchronize(MAIN(rt)));
    return 0;
}

/* After everything issued on every stream. */
int g_d2h(rt_t *rt, void *dst, const void *src, size_t bytes)
{
    KERN_CUDA_TRY(cudaDeviceSynchronize());
    if (bytes)
        KERN_CUDA_TRY(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
    return 0;
}

/* A contiguous block (one row, or rows without gaps) is one plain copy:
 * no pitch limit (cudaMemcpy2D refuses pitches beyond the device's). */
int g_copy2d(rt_t *rt, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                    size_t rows, int stream)
{
    if (BAD_STREAM(stream))
        return -1;
    cudaStream_t st = G(rt)->s[stream];
    if (!width || !rows)
        return 0;
    if (rows == 1 || (dpitch == width && spitch == width)) /* Default: host_alloc's memory either side */
        KERN_CUDA_TRY(cudaMemcpyAsync(dst, src, width * rows, cudaMemcpyDefault, st));
    else
        KERN_CUDA_TRY(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, cudaMemcpyDeviceToDevice, st));
    return 0;
}

/* Host staging of at least `bytes`, grow-only. */
static void *host_staging(rt_t *rt, size_t bytes)
{
    gpu_t *g = G(rt);
    if (bytes > g->host_bytes) {
        void *p = realloc(g->host, bytes);
        if (!p) {
            fprintf(stderr, "%s:%d: out of host memory (%zu bytes of staging)\n", __FILE__, __LINE__, bytes);
            return NULL;
        }
        g->host = p, g->host_bytes = bytes;
    }
    return g->host;
}

int g_act_from_f32(rt_t *rt, void *dst, const float *host, long n)
{
    kern_bf16 *h = host_staging(rt, (size_t)n * sizeof *h);
    if (n > 0 && !h)
        return -1;
    for (long i = 0; i < n; i++)
        h[i] = kern_float_to_bf16(host[i]);
    return g_h2d(rt, dst, h, (size_t)n * sizeof *h);
}

/* ---- ordering -------------------------------------------------------------- */

int g_order(rt_t *rt, int waiter, int on)
{
    gpu_t *g = G(rt);
    KERN_CUDA_TRY(cudaEventRecord(g->join_ev[on], g->s[on]));
    KERN_CUDA_TRY(cudaStreamWaitEvent(g->s[waiter], g->join_ev[on], 0));
    return 0;
}

int g_join(rt_t *rt, int waiter, int on)
{
    if (BAD_STREAM(waiter) || BAD_STREAM(on))
        return -1;
    if (waiter == on)
        return 0;
    int comm = on != compute_stream[0] && on != compute_stream[1]; /* not the other compute stream */
    if (comm && g_stall(rt, waiter, 0))
        return -1;
    RT_TRY(g_order(rt, waiter, on));
    return comm ? g_stall(rt, waiter, 1) : 0;
}

int g_compute_on(rt_t *rt, int stream)
{
    if (rt_check_compute_stream(stream, __FILE__, __LINE__))
        return -1;
    G(rt)->cur = stream == RT_STREAM_COMPUTE_ALT;
    return 0;
}

int g_record(rt_t *rt, int stream, int counter, long value)
{
    gpu_t *g = G(rt);
    if (BAD_STREAM(stream) || BAD_COUNTER(counter))
        return -1;
    if (value != g->ncnt[counter] + 1) {
        fprintf(stderr, "%s:%d: counter %d recorded at %ld after %ld\n", __FILE__, __LINE__, counter, value,
                g->ncnt[counter]);
        return -1;
    }
    cudaEvent_t ev = NULL;
    if (evlist_get(&g->cnt_ev[counter], value - 1, &ev))
        return -1;
    KERN_CUDA_TRY(cudaEventRecord(ev, g->s[stream]));
    g->ncnt[counter] = value;
    return 0;
}

int g_wait(rt_t *rt, int stream, int counter, long value)
{
    gpu_t *g = G(rt);
    if (value <= 0)
        return 0;
    if (BAD_STREAM(stream) || BAD_COUNTER(counter))
        return -1;
    if (value > g->ncnt[counter]) {
        fprintf(stderr, "%s:%d: wait for counter %d >= %ld, but it was recorded only %ld times: the op "
                        "program waits on an op not yet issued\n",
                __FILE__, __LINE__, counter, value, g->ncnt[counter]);
        return -1;
    }
    if (g_stall(rt, stream, 0))
        return -1;
    KERN_CUDA_TRY(cudaStreamWaitEvent(g->s[stream], g->cnt_ev[counter].ev[value - 1], 0));
    return g_stall(rt, stream, 1);
}

int g_sync(rt_t *rt)
{
    KERN_CUDA_TRY(cudaDeviceSynchronize());
    return 0;
}

/* ---- timers ----------------------------------------------------------------- */

static int mark(rt_t *rt, int stream, rt_times_t *t, int kind)
{
    gpu_t *g = G(rt);
    cudaEvent_t ev = NULL;
    if (BAD_STREAM(stream))
        return -1;
    if (grow((void **)&g->marks, &g->capmarks, g->nmarks + 1, sizeof *g->marks) ||
        evlist_get(&g->mark_ev, g->nmarks, &ev))
        return -1;
    KERN_CUDA_TRY(cudaEventRecord(ev, g->s[stream]));
    g->marks[g->nmarks++] = (mark_t){t, kind};
    return 0;
}

int g_mark_ready(rt_t *rt, int stream, rt_times_t *t) { return mark(rt, stream, t, MARK_READY); }

int g_mark_start(rt_t *rt, int stream, rt_times_t *t)
{
    G(rt)->cur_op = t;
    return mark(rt, stream, t, MARK_START);
}

int g_mark_end(rt_t *rt, int stream, rt_times_t *t)
{
    G(rt)->cur_op = NULL;
    return mark(rt, stream, t, MARK_END);
}

int g_stall(rt_t *rt, int stream, int end)
{
    gpu_t *g = G(rt);
    if (!g->cur_op || g->capturing || (stream != compute_stream[0] && stream != compute_stream[1]))
        return 0; /* a captured pass records no events (its graph runs them as one) */
    return mark(rt, stream, g->cur_op, end ? MARK_STALL_END : MARK_STALL_BEGIN);
}

/* Fills the fields of every pending mark, in issue order, as the CPU
 * runtime does at each mark: ready sets all three, start sets start and
 * end, end sets end; a stall's end adds the time since its begin (the
 * mark before it of that kind: stalls do not nest) to wait_ns. The device
 * must be synchronized. O(marks). */
static int resolve_marks(rt_t *rt)
{
    gpu_t *g = G(rt);
    int64_t stall0 = 0;
    for (long i = 0; i < g->nmarks; i++) {
        float ms = 0.0f;
        KERN_CUDA_TRY(cudaEventElapsedTime(&ms, g->t0, g->mark_ev.ev[i]));
        int64_t ns = (int64_t)((double)ms * 1e6);
        rt_times_t *t = g->marks[i].t;
        int kind = g->marks[i].kind;
        if (kind == MARK_STALL_BEGIN || kind == MARK_STALL_END) {
            t->wait_ns += kind == MARK_STALL_END && ns > stall0 ? ns - stall0 : 0;
            stall0 = ns;
            continue;
        }
        if (kind == MARK_READY)
            t->ready_ns = ns;
        if (kind != MARK_END)
            t->start_ns = ns;
        t->end_ns = ns;
    }
    g->nmarks = 0;
    return 0;
}

/* The device is idle on return (marks issued since the last iter_end are
 * resolved against the previous start), so the transfer pool is free. */
int g_iter_begin(rt_t *rt)
{
    gpu_t *g = G(rt);
    KERN_CUDA_TRY(cudaDeviceSynchronize());
    if (resolve_marks(rt))
        return -1;
    arena_reset(&rt->pool[RT_POOL_XFER]);
    for (int k = 0; k < CNT_COUNT; k++)
        g->ncnt[k] = 0;
    KERN_CUDA_TRY(cudaEventRecord(g->t0, MAIN(rt)));
    rt_clock_reader_reading(g->clock, 1);
    return 0;
}

int g_iter_end(rt_t *rt)
{
    gpu_t *g = G(rt);
    KERN_CUDA_TRY(cudaDeviceSynchronize());
    rt_clock_reader_reading(g->clock, 0);
    rt->clock = rt_clock_reader_sums(g->clock);
    return resolve_marks(rt);
}

/* ---- scratch ------------------------------------------------------------------ */

/* Attention scratch of at least `bytes`, for the compute stream only.
 * Grows in stream order (cudaMallocAsync) where the device allows, so no
 * other stream is waited for; else after the compute stream drains. */
void *g_scratch(rt_t *rt, size_t bytes)
{
    gpu_t *g = G(rt);
    if (bytes <= g->scratch_bytes)
        return g->scratch;
    cudaError_t e = cudaSuccess;
    void *p = NULL;
    if (g->async_alloc) {
        if (g->scratch)
            e = cudaFreeAsync(g->scratch, MAIN(rt));
        if (e == cudaSuccess)
            e = cudaMallocAsync(&p, bytes, MAIN(rt));
    } else {
        e = cudaStreamSynchronize(MAIN(rt));
        if (e == cudaSuccess && g->scratch)
            e = cudaFree(g->scratch);
        if (e == cudaSuccess)
            e = cudaMalloc(&p, bytes);
    }
    g->scratch = NULL, g->scratch_bytes = 0;
    if (e != cudaSuccess) {
        kern_report_cuda((int)e, "growing the attention scratch", __FILE__, __LINE__);
        fprintf(stderr, "%s:%d: attention scratch of %zu bytes not available\n", __FILE__, __LINE__, bytes);
        return NULL;
    }
    g->scratch = p, g->scratch_bytes = bytes;
    if (bytes > rt->outside_peak)
        rt->outside_peak = bytes;
    return p;
}

static void scratch_free(rt_t *rt)
{
    gpu_t *g = G(rt);
    if (g->scratch && g->async_alloc)
        cudaFreeAsync(g->scratch, MAIN(rt));
    else if (g->scratch)
        cudaFree(g->scratch);
    g->scratch = NULL, g->scratch_bytes = 0;
}

void *g_native(rt_t *rt, int stream)
{
    return BAD_STREAM(stream) ? NULL : (void *)G(rt)->s[stream];
}

/* Safe on a partly built runtime (rt_gpu_create's failure path): every
 * handle is NULL until created. */
void g_destroy(rt_t *rt)
{
    if (!rt)
        return;
    gpu_t *g = G(rt);
    rt_clock_reader_stop(g->clock);
    g_graphs_free(rt); /* a capture left open would refuse the synchronisation */
    g_cudnn_close(rt);
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess)
        kern_report_cuda((int)e, "cudaDeviceSynchronize (destroy)", __FILE__, __LINE__);
    scratch_free(rt);
    if (g->slow_t0)
        cudaFree(g->slow_t0);
    for (int p = 0; p < RT_NPOOLS; p++) {
        arena_destroy(&rt->pool[p]); /* its fallback blocks become idle */
        xcache_trim(&g->extra[p]);
        free(g->extra[p].b);
        if (g->base[p])
            cudaFree(g->base[p]);
    }
    xcache_trim(&g->pinned); /* every block idle: their owners freed them */
    free(g->pinned.b);
    evlist_free(&g->mark_ev);
    for (int k = 0; k < CNT_COUNT; k++)
        evlist_free(&g->cnt_ev[k]);
    for (int s = 0; s < RT_NSTREAMS; s++) {
        if (g->join_ev[s])
            cudaEventDestroy(g->join_ev[s]);
        if (g->s[s])
            cudaStreamDestroy(g->s[s]);
    }
    if (g->t0)
        cudaEventDestroy(g->t0);
    for (int i = 0; i < g->have_kc; i++)
        kern_ctx_free(&g->kc[i]);
    kern_algo_free(&g->algos);
    free(g->marks);
    free(g->host);
    free(g);
    free(rt);
}


/* ---- creation ------------------------------------------------------------------- */

/* 0 on success; else the message "file:line: what: CUDA error" in err. */
static int cuda_ok(cudaError_t e, const char *what, int line, char *err, int errlen)
{
    if (e == cudaSuccess)
        return 0;
    snprintf(err, errlen, "%s:%d: %s: CUDA error %d: %s", __FILE__, line, what, (int)e, cudaGetErrorString(e));
    return -1;
}
#define CUDA_OK(call) cuda_ok((call), #call, __LINE__, err, errlen)

static int pick_device(int device, char *err, int errlen)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        snprintf(err, errlen, "no usable CUDA device (%s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found none");
        cudaGetLastError(); /* clear it: later calls must not report it again */
        return -1;
    }
    if (device < 0 || device >= n) {
        snprintf(err, errlen, "CUDA device %d requested, but this machine has %d (0 to %d)", device, n, n - 1);
        return -1;
    }
    return CUDA_OK(cudaSetDevice(device));
}

static int make_streams(gpu_t *g, char *err, int errlen)
{
    for (int s = 0; s < RT_NSTREAMS; s++) {
        if (CUDA_OK(cudaStreamCreateWithFlags(&g->s[s], cudaStreamNonBlocking)) ||
            CUDA_OK(cudaEventCreateWithFlags(&g->join_ev[s], cudaEventDisableTiming)))
            return -1;
    }
    g->mark_ev.flags = cudaEventDefault;
    for (int k = 0; k < CNT_COUNT; k++)
        g->cnt_ev[k].flags = cudaEventDisableTiming;
    /* marks issued before the first iter_begin are timed from creation */
    if (CUDA_OK(cudaEventCreateWithFlags(&g->t0, cudaEventDefault)) ||
        CUDA_OK(cudaEventRecord(g->t0, g->s[STREAM_COMPUTE])))
        return -1;
    return 0;
}

/* One cudaMalloc per pool of the planned size; the arena serves the rest
 * from sys_alloc and reports it as excess. */
static int make_pools(rt_t *rt, const size_t plan[RT_NPOOLS], char *err, int errlen)
{
    gpu_t *g = G(rt);
    for (int p = 0; p < RT_NPOOLS; p++) {
        if (plan[p]) {
            cudaError_t e = cudaMalloc(&g->base[p], plan[p]);
            if (e != cudaSuccess) {
                g->base[p] = NULL;
                snprintf(err, errlen, "%s:%d: cudaMalloc of the planned pool %d (%.2f GiB): %s", __FILE__,
                         __LINE__, p, plan[p] / (double)(1 << 30), cudaGetErrorString(e));
                return -1;
            }
        }
        arena_init(&rt->pool[p], g->base[p], g->base[p] ? plan[p] : 0, sys_alloc, sys_free, &g->extra[p]);
    }
    return 0;
}

static int describe(rt_t *rt, int device, char *err, int errlen)
{
    struct cudaDeviceProp prop;
    int pools = 0;
    if (CUDA_OK(cudaGetDeviceProperties(&prop, device)) ||
        CUDA_OK(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device)))
        return -1;
    G(rt)->async_alloc = pools != 0;
    snprintf(rt->device_name, sizeof rt->device_name, "%.100s (CUDA, bf16)", prop.name);
    return 0;
}

int rt_gpu_create(rt_t **out, int device, const size_t plan[RT_NPOOLS], char *err, int errlen)
{
    *out = NULL;
    if (pick_device(device, err, errlen))
        return -1;
    rt_t *rt = calloc(1, sizeof *rt);
    gpu_t *g = calloc(1, sizeof *g);
    if (!rt || !g) {
        free(rt), free(g);
        snprintf(err, errlen, "out of host memory creating the GPU runtime");
        return -1;
    }
    rt->op = &rt_gpu_ops, rt->kind = RT_GPU, rt->act_bytes = 2, rt->impl = g;
    g->pinned.pinned = 1;
    const char *poison = getenv("MEGASIM_POISON_ALLOC");
    g->poison = poison && *poison && strcmp(poison, "0");
    for (int p = 0; p < RT_NPOOLS; p++) /* empty arenas: destroy is safe from here on */
        arena_init(&rt->pool[p], NULL, 0, sys_alloc, sys_free, &g->extra[p]);
    int rc = describe(rt, device, err, errlen);
    for (int i = 0; !rc && i < 2; i++) {
        if (kern_ctx_init(&g->kc[i], RT_GPU_WORKSPACE_BYTES)) {
            snprintf(err, errlen, "cuBLASLt context %d (32 MiB workspace) on %s failed (see above)", i,
                     rt->device_name);
            kern_ctx_free(&g->kc[i]);
            rc = -1;
        } else {
            g->have_kc = i + 1;
        }
    }
    if (!rc)
        rc = make_streams(g, err, errlen);
    if (!rc)
        rc = make_pools(rt, plan, err, errlen);
    if (rc) {
        g_destroy(rt);
        return -1;
    }
    g->clock = rt_clock_reader_start(device);
    *out = rt;
    return 0;
}

int rt_gpu_count(char *why, size_t len)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0) {
        snprintf(why, len, "%s", e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found none");
        cudaGetLastError(); /* clear it: later calls must not report it again */
        return 0;
    }
#ifdef MEGASIM_CUDA_CHECK_ONLY
    /* Built where no GPU was (scripts/test.sh): device code at -O0, sm_80
     * PTX only, compiled to be checked; run, it would be JIT-compiled into
     * slow kernels and every time measured on it would mislead. */
    snprintf(why, len, "this build compiled its CUDA code only to check it (-DMEGASIM_CUDA_CHECK_ONLY=ON, as "
                       "scripts/test.sh does without a GPU); rebuild with -DMEGASIM_CUDA_CHECK_ONLY=OFF");
    return 0;
#endif
    return n;
}
