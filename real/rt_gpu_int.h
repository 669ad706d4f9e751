/* real/rt_gpu_int.h: the GPU runtime's state, shared by its halves:
 * rt_gpu.c (memory, ordering, timers, attention scratch, creation),
 * rt_gpu_ops.c (the kernels/ launchers and the runtime's op table) and
 * rt_gpu_graph.c (CUDA graphs), and with comm_nccl.c (g_stall) in the same
 * module. Not for other users: real/rt.h is the interface. */
#ifndef REAL_RT_GPU_INT_H
#define REAL_RT_GPU_INT_H

#include "kernels/matmul.h"
#include "real/rt.h"
#include "real/rt_gpu_clock.h"

#include <cuda_runtime_api.h>

/* real/rt_gpu_kern.cu */
int rt_gpu_add_cuda(kern_bf16 *out, const kern_bf16 *a, const kern_bf16 *b, long n, cudaStream_t stream);

#define RT_GPU_WORKSPACE_BYTES ((size_t)32 << 20) /* cuBLASLt workspace: 32 MiB */
#define RT_GPU_ALIGN 256                          /* scratch sub-buffer alignment */

/* Events created on first use and kept: index i is reused by the i-th
 * mark (or counter value) of every iteration. */
typedef struct {
    cudaEvent_t *ev;
    long created, cap;
    unsigned flags; /* cudaEventDefault (timing) or cudaEventDisableTiming */
} evlist_t;

/* STALL_BEGIN and STALL_END bracket a stall of a compute stream on
 * communication (g_stall): their difference adds to the op's wait_ns. */
typedef enum { MARK_READY, MARK_START, MARK_END, MARK_STALL_BEGIN, MARK_STALL_END } mark_kind_t;

typedef struct {
    rt_times_t *t;
    int kind; /* mark_kind_t: which fields the event fills */
} mark_t;

/* Blocks the arena asked for beyond the plan, kept once it frees them.
 * cudaFree would wait for the whole device (every stream, NCCL transfers
 * included) in the middle of an iteration, and cudaMalloc costs a
 * millisecond: an arena that outgrows its plan would then cost every
 * micro-batch both. A freed block is reused on the terms of the arena's
 * own blocks: in compute-stream order (RT_POOL_MAIN), after iter_begin's
 * synchronization (RT_POOL_XFER, freed only by arena_reset). One cache
 * per pool, so the two terms never mix. */
typedef struct {
    void *p;
    size_t bytes;
    int live;
} xblock_t;

typedef struct {
    xblock_t *b;
    long n, cap;
    int pinned; /* pinned host blocks (cudaMallocHost: host_alloc's), not device ones */
} xcache_t;

typedef struct {
    kern_ctx kc[2];                   /* per compute stream: STREAM_COMPUTE, RT_STREAM_COMPUTE_ALT */
    int have_kc;                      /* how many of kc are initialized */
    int cur;                          /* kernels issue on compute stream cur (index into kc) */
    cudaStream_t s[RT_NSTREAMS];
    cudaEvent_t join_ev[RT_NSTREAMS]; /* per `on` stream; waits capture it at once */
    evlist_t cnt_ev[CNT_COUNT];       /* [value - 1] */
    long ncnt[CNT_COUNT];             /* values recorded this iteration */
    evlist_t mark_ev;                 /* [mark index] */
    mark_t *marks;                    /* marks of this iteration, unresolved */
    long nmarks, capmarks;
    rt_times_t *cur_op;               /* the op being issued (mark_start to mark_end), or NULL */
    cudaEvent_t t0;                   /* iteration start, on the compute stream */
    void *base[RT_NPOOLS];            /* one cudaMalloc per pool */
    xcache_t extra[RT_NPOOLS];        /* fallback blocks of each pool */
    xcache_t pinned;                  /* host_alloc's blocks, kept for the next request of about their size */
    int poison;                       /* MEGASIM_POISON_ALLOC set: new blocks of RT_POOL_MAIN filled with NaNs */
    void *scratch;                    /* attention scratch, compute stream only */
    size_t scratch_bytes;
    int async_alloc;                  /* the device has stream-ordered allocation */
    void *host;                       /* staging for act <-> fp32 conversions */
    size_t host_bytes;
    rt_clock_reader *clock;           /* NULL where NVML does not answer */
    kern_algo_table algos;            /* cuBLASLt's choices, shared by kc[] once gemm_algos read them */
    unsigned long long *slow_t0;      /* slow_begin's stamp (device), made on first use */
    cudaGraphExec_t *graphs;          /* capture_end's, by slot (rt_gpu_graph.c) */
    long ngraphs;
    int capturing;                    /* between capture_begin and capture_end */
    struct cudnn_attn *cudnn;         /* cuDNN's attention once attn_backend opened it (rt_gpu_cudnn.c) */
} gpu_t;

/* real/rt_gpu_algos.c: rt_ops_t.gemm_algos */
int rt_gpu_gemm_algos(rt_t *rt, const char *dir, int rank, int write, char *err, int errlen);

static inline gpu_t *G(rt_t *rt) { return rt->impl; }
static inline cudaStream_t MAIN(rt_t *rt) { return G(rt)->s[STREAM_COMPUTE]; } /* h2d, timing, scratch */
static const int compute_stream[2] = {STREAM_COMPUTE, RT_STREAM_COMPUTE_ALT};
static inline cudaStream_t CS(rt_t *rt) { return G(rt)->s[compute_stream[G(rt)->cur]]; }
static inline kern_ctx *KC(rt_t *rt) { return &G(rt)->kc[G(rt)->cur]; }

static inline size_t align_up(size_t n) { return (n + RT_GPU_ALIGN - 1) / RT_GPU_ALIGN * RT_GPU_ALIGN; }

/* rt_gpu.c: attention scratch of at least `bytes`, compute stream only
 * (grow-only; NULL with a message when it cannot grow). */
void *g_scratch(rt_t *rt, size_t bytes);

/* rt_gpu.c: the runtime's own entries of the op table (rt.h's rt_ops_t). */
int g_alloc(rt_t *rt, void **p, size_t bytes, int pool);
void g_free(rt_t *rt, void *p);
int g_host_alloc(rt_t *rt, void **p, size_t bytes);
void g_host_free(rt_t *rt, void *p);
int g_memset0(rt_t *rt, void *p, size_t bytes, int stream);
int g_h2d(rt_t *rt, void *dst, const void *src, size_t bytes);
int g_d2h(rt_t *rt, void *dst, const void *src, size_t bytes);
int g_copy2d(rt_t *rt, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t rows, int stream);
int g_act_from_f32(rt_t *rt, void *dst, const float *host, long n);
int g_join(rt_t *rt, int waiter, int on);
/* g_join's ordering alone, no stall marks: s[waiter] waits for everything
 * issued on s[on] so far (join_ev[on] recorded there); the captures' fork
 * and join of the TP stream (rt_gpu_graph.c). */
int g_order(rt_t *rt, int waiter, int on);
int g_record(rt_t *rt, int stream, int counter, long value);
int g_wait(rt_t *rt, int stream, int counter, long value);
int g_sync(rt_t *rt);
int g_compute_on(rt_t *rt, int stream);
int g_mark_ready(rt_t *rt, int stream, rt_times_t *t);
int g_mark_start(rt_t *rt, int stream, rt_times_t *t);
int g_mark_end(rt_t *rt, int stream, rt_times_t *t);
int g_iter_begin(rt_t *rt);
int g_iter_end(rt_t *rt);
/* Brackets a stretch where compute stream `stream` may stand waiting on
 * communication (end = 0 before it, 1 after): an NCCL call on that
 * stream, or its wait for another stream. The time between the two marks
 * on the device adds to the current op's wait_ns (rt_times_t), as the
 * CPU path's host waits do. Nothing for other streams, outside an op or
 * inside a capture. */
int g_stall(rt_t *rt, int stream, int end);
/* rt_gpu_graph.c: the runtime's CUDA graphs (rt.h capture_begin, capture_end) */
int g_capture_begin(rt_t *rt);
int g_capture_end(rt_t *rt, long slot);
void g_graphs_free(rt_t *rt);
void *g_native(rt_t *rt, int stream);
void g_destroy(rt_t *rt);

/* rt_gpu_cudnn.c: rt_ops_t.attn_backend; the flash attention of a whole
 * sequence on cuDNN once it is open: 1 when it ran, 0 when the call is
 * megasim's kernels' (cuDNN not chosen, or a block of a sequence), -1 on
 * an error (printed). */
int g_attn_backend(rt_t *rt, int backend, char *err, int errlen);
void g_cudnn_close(rt_t *rt);
int g_cudnn_fwd(rt_t *rt, void *out, void *lse, const void *q, const void *k, const void *v, kern_attn_shape s);
int g_cudnn_bwd(rt_t *rt, void *dq, void *dk, void *dv, const void *dout, const void *q, const void *k,
                const void *v, const void *out, const void *lse, kern_attn_shape s);

/* rt_gpu_ops.c: the whole table. */
extern const rt_ops_t rt_gpu_ops;

#endif
