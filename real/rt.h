/* real/rt.h: the device runtime that the real backend's executor drives:
 * memory, streams, cross-stream ordering, per-op timers and the kernels of
 * one GPT training step. Two implementations behind one table of function
 * pointers:
 *   rt_cpu.c  reference kernels (kernels/ *_ref.c) in fp32, run synchronously
 *             on the calling thread; a "stream" is the list of MPI requests
 *             issued on it and not yet complete (comm_mpi.c adds to it);
 *   rt_gpu.c  CUDA kernels (kernels/ *.cu) in bf16 with fp32 accumulation, on
 *             CUDA streams, ordered by CUDA events, timed by CUDA events.
 *
 * Element types: activations and the working copy of the weights ("act")
 * are fp32 on the CPU and bf16 on the GPU (rt->act_bytes says which);
 * parameter gradients, master weights, optimizer moments, LayerNorm
 * statistics, losses and norms are fp32 on both. Every pointer passed to a
 * kernel entry is device memory from rt_alloc. Entries return 0, or a
 * non-zero code after printing file:line and the reason. */
#ifndef REAL_RT_H
#define REAL_RT_H

#include "kernels/attention.h"
#include "kernels/optimizer.h"
#include "model/sched.h"
#include "real/arena.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Streams: the op program's four (model/sched.h), one more for the TP
 * transfers that GEMMs overlap with, the backward direction's own
 * pipeline send and receive streams (the program's STREAM_PP_SEND and
 * STREAM_PP_RECV are pools where both directions progress independently:
 * a forward receive must not queue behind a backward one, so each
 * direction gets a FIFO stream of its own), and a second compute stream
 * for the chunked GEMMs of --tp-comm-overlap (see compute_on), and a copy
 * stream for activation offloading's copies to and from host memory. */
enum {
    RT_STREAM_TP = STREAM_COUNT,
    RT_STREAM_PP_SEND_BWD,
    RT_STREAM_PP_RECV_BWD,
    RT_STREAM_COMPUTE_ALT,
    RT_STREAM_COPY,
    RT_NSTREAMS
};

/* 0 for a stream kernels may issue on (compute_on); else prints file:line
 * and the two allowed and returns -1. Inline: the GPU module uses it too. */
static inline int rt_check_compute_stream(int stream, const char *file, int line)
{
    if (stream == STREAM_COMPUTE || stream == RT_STREAM_COMPUTE_ALT)
        return 0;
    fprintf(stderr, "%s:%d: compute_on: stream %d is not a compute stream (%d or %d)\n", file, line, stream,
            STREAM_COMPUTE, RT_STREAM_COMPUTE_ALT);
    return -1;
}

typedef enum { RT_CPU, RT_GPU } rt_kind_t;
typedef enum { RT_POOL_MAIN, RT_POOL_XFER, RT_NPOOLS } rt_pool_t;

/* One timed op; times in ns from the iteration's start, filled by
 * rt->iter_end (the GPU resolves its events only then). wait_ns: the GPU
 * path's time the compute stream stood waiting on communication inside
 * the op (its collectives on the compute stream, its waits for other
 * streams), what the CPU path measures on the host as comm_wait_ns; 0 on
 * the CPU path. */
typedef struct {
    int64_t ready_ns, start_ns, end_ns, wait_ns;
} rt_times_t;

typedef struct rt rt_t;

/* Between NVML reads of a rank's GPU while its iterations run (rt->clock). */
#define RT_CLOCK_READ_MS 5

typedef struct {
    /* memory (device), from the rank's arena (real/arena.h): RT_POOL_MAIN
     * for weights, gradients, optimizer state and compute temporaries
     * (freed in stream order on the compute stream); RT_POOL_XFER for
     * buffers that cross streams (pipeline transfers, TP ring chunks),
     * all released at once by iter_begin. */
    int (*alloc)(rt_t *rt, void **p, size_t bytes, int pool);
    void (*free)(rt_t *rt, void *p);
    int (*memset0)(rt_t *rt, void *p, size_t bytes, int stream);
    int (*h2d)(rt_t *rt, void *dst, const void *src, size_t bytes);  /* synchronous */
    int (*d2h)(rt_t *rt, void *dst, const void *src, size_t bytes);  /* synchronous */
    /* rows of width bytes, from src (pitch spitch) to dst (pitch dpitch); one row may also go between
     * device memory and host_alloc's, either way */
    int (*copy2d)(rt_t *rt, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                  size_t rows, int stream);
    /* host memory the device copies to and from without staging (pinned on the GPU, its blocks kept for
     * the next request of about their size; plain on the CPU) */
    int (*host_alloc)(rt_t *rt, void **p, size_t bytes);
    void (*host_free)(rt_t *rt, void *p);
    /* host fp32 -> device act (bf16 rounding on the GPU); synchronous */
    int (*act_from_f32)(rt_t *rt, void *dst, const float *host, long n);

    /* ordering between streams */
    int (*join)(rt_t *rt, int waiter, int on);            /* waiter waits for all issued on `on` */
    int (*record)(rt_t *rt, int stream, int counter, long value); /* counter reaches value when
                                                                      `stream`'s work so far is done */
    int (*wait)(rt_t *rt, int stream, int counter, long value);   /* stream waits for counter >= value */
    int (*sync)(rt_t *rt);                                /* host waits for everything */
    /* the kernels below issue on `stream` (STREAM_COMPUTE, the default, or
     * RT_STREAM_COMPUTE_ALT) until the next call. The chunks of an
     * overlapped GEMM alternate between the two, so one chunk's last wave
     * shares the SMs with the next chunk's first, as TransformerEngine's
     * split overlap does; each has its own GEMM workspace. The caller
     * orders the two with join and returns to STREAM_COMPUTE. */
    int (*compute_on)(rt_t *rt, int stream);  /* checks with rt_check_compute_stream */
    /* an injected slow device: slow_end keeps the compute stream busy
     * `extra` times its own busy time since slow_begin again, without the
     * host waiting (the CPU path's thread spins on its CPU time less its
     * MPI waits'; the GPU's stream on the device's clock, from a stamp) */
    int (*slow_begin)(rt_t *rt);
    int (*slow_end)(rt_t *rt, double extra);
    /* CUDA graphs (run --enable-cuda-graph): what is issued between
     * capture_begin and capture_end (a forward or backward pass, on the
     * compute stream alone: no host reads, no other stream) is captured,
     * not run, then launched as one graph. Graph `slot` is instantiated
     * once and updated with each later capture's arguments (pointers,
     * dropout seeds: cudaGraphExecUpdate), instantiated anew where the
     * work changed. NULL on the CPU, which has no graphs. */
    int (*capture_begin)(rt_t *rt);
    int (*capture_end)(rt_t *rt, long slot);

    /* timers: t is filled at iter_end; ready before the op's waits, start
     * after them, end after the op's work is issued (its completion). */
    int (*mark_ready)(rt_t *rt, int stream, rt_times_t *t);
    int (*mark_start)(rt_t *rt, int stream, rt_times_t *t);
    int (*mark_end)(rt_t *rt, int stream, rt_times_t *t);
    int (*iter_begin)(rt_t *rt);
    int (*iter_end)(rt_t *rt);                            /* syncs, resolves every mark */

    /* kernels, on the compute stream (see compute_on). N rows, C in, OC out. */
    /* wte holds vocabulary rows [v0, v0 + V) (kernels/embedding.h) */
    int (*embedding_fwd)(rt_t *rt, void *out, const int *tokens, const void *wte, const void *wpe, int v0,
                         int V, int B, int T, int C);
    int (*embedding_bwd)(rt_t *rt, float *dwte, float *dwpe, const void *dout, const int *tokens, int v0,
                         int V, int B, int T, int C);
    /* drop (may be NULL) drops skip before the add, its kept mask to mask
     * (kernels/layernorm.h) */
    int (*layernorm_fwd)(rt_t *rt, void *residual, void *out, float *mean, float *rstd, const void *inp,
                         const void *skip, const kern_dropout *drop, uint8_t *mask, const void *w, const void *b,
                         int N, int C);
    int (*layernorm_bwd)(rt_t *rt, void *dres, float *dw, float *db, const void *dout, const void *xln,
                         const void *w, const float *mean, const float *rstd, int N, int C);
    /* RMSNorm: the same without centring or bias (--normalization RMSNorm) */
    int (*rmsnorm_fwd)(rt_t *rt, void *residual, void *out, float *rstd, const void *inp, const void *skip,
                       const kern_dropout *drop, uint8_t *mask, const void *w, int N, int C);
    int (*rmsnorm_bwd)(rt_t *rt, void *dres, float *dw, const void *dout, const void *xln, const void *w,
                       const float *rstd, int N, int C);
    /* out (N, OC) = inp (N, C) @ weight (OC, C)^T + bias; bias may be NULL */
    int (*linear_fwd)(rt_t *rt, void *out, const void *inp, const void *weight, const void *bias, int N,
                      int C, int OC);
    /* dinp (N, C) = dout (N, OC) @ weight (OC, C) */
    int (*linear_dgrad)(rt_t *rt, void *dinp, const void *dout, const void *weight, int N, int C, int OC);
    /* dweight (OC, C) += dout^T @ inp; dbias (OC) += column sums (may be NULL) */
    int (*linear_wgrad)(rt_t *rt, float *dweight, float *dbias, const void *dout, const void *inp, int N,
                        int C, int OC);
    int (*bias_gelu_fwd)(rt_t *rt, void *out, const void *inp, const void *bias, int N, int C);
    int (*bias_gelu_bwd)(rt_t *rt, void *dinp, float *dbias, const void *dout, const void *inp,
                         const void *bias, int N, int C);
    int (*bias_add)(rt_t *rt, void *out, const void *inp, const void *bias, int N, int C);
    int (*gelu_fwd)(rt_t *rt, void *out, const void *inp, long n);
    int (*gelu_bwd)(rt_t *rt, void *dinp, const void *dout, const void *inp, long n);
    int (*bias_grad)(rt_t *rt, float *dbias, const void *dout, int N, int C);
    /* rotary position embedding in place on x (N, H, HS), row n at t = t0 +
     * n mod T; inverse 1 turns back (the backward) */
    int (*rope)(rt_t *rt, void *x, int N, int T, int t0, int H, int HS, double base, int inverse);
    /* SwiGLU over FC1's [gate | up] (N, 2F) -> (N, F); dinp (N, 2F) */
    int (*swiglu_fwd)(rt_t *rt, void *out, const void *inp, int N, int F);
    int (*swiglu_bwd)(rt_t *rt, void *dinp, const void *dout, const void *inp, int N, int F);
    int (*add)(rt_t *rt, void *out, const void *a, const void *b, long n); /* out may alias a */
    /* out (n) = inp with dropout d (kernels/dropout.h: element i at index
     * d.base + i), its 1-byte mask into mask unless NULL; out may alias
     * inp. dropout_masked: the backward from the kept mask (scale = d.scale) */
    int (*dropout)(rt_t *rt, void *out, uint8_t *mask, const void *inp, long n, kern_dropout d);
    int (*dropout_masked)(rt_t *rt, void *out, const void *inp, const uint8_t *mask, long n, float scale);
    /* out (n) = x + inp with dropout d, mask as dropout's: the residual add
     * of a dropped branch (bias-dropout-add); out may alias x or inp */
    int (*dropout_add)(rt_t *rt, void *out, uint8_t *mask, const void *x, const void *inp, long n, kern_dropout d);
    /* attention of kind `attn` (attn_t: ATTN_FLASH FlashAttention-2 style,
     * ATTN_FLASH1 FlashAttention-1 style, ATTN_UNFUSED): the flash kinds
     * save lse (B, NH, T) fp32 in `saved`; unfused saves the probabilities
     * (B, NH, T, T) act. rt_attn_saved_bytes sizes it. The CPU runs the one
     * flash reference for both flash kinds (same math; the kinds differ in
     * GPU work partition only). */
    int (*attn_fwd)(rt_t *rt, int attn, void *out, void *saved, const void *q, const void *k,
                    const void *v, kern_attn_shape s);
    int (*attn_bwd)(rt_t *rt, int attn, void *dq, void *dk, void *dv, const void *dout, const void *q,
                    const void *k, const void *v, const void *out, const void *saved, kern_attn_shape s);
    /* two flash outputs of the same queries over disjoint keys merged by
     * their log-sum-exp into (out, lse), in place (kernels/attnmerge.h):
     * out (B, T, NH, HS) act, lse (B, NH, T) fp32; CP's ring */
    int (*attn_merge)(rt_t *rt, void *out, float *lse, const void *out_b, const float *lse_b, int B, int T, int NH,
                      int HS);
    /* out (n) = x cast to FP8 format fmt (kern_fp8_fmt) at scale and back
     * (kernels/fp8.h); *amax (device, >= 0) = the larger of itself and
     * max |x|: a running max the caller zeroes, read back once an
     * iteration. Both emulate the cast (the GPU in bf16): FP8's numerics,
     * not its speed (that would be cuBLASLt's FP8 GEMMs) */
    int (*fp8_quant)(rt_t *rt, void *out, const void *x, long n, int fmt, float scale, float *amax);
    int (*xent_fwd)(rt_t *rt, float *losses, float *lse, const void *logits, const int *targets, int N,
                    int V);
    /* split by vocabulary, columns [v0, v0 + V) (kernels/crossentropy.h) */
    int (*xent_part)(rt_t *rt, float *part, const void *logits, const int *targets, int v0, int N, int V);
    int (*xent_merge)(rt_t *rt, float *losses, float *lse, const float *parts, const int *targets, int P,
                      int N);
    int (*xent_bwd)(rt_t *rt, void *dlogits, const void *logits, const float *lse, const int *targets,
                    int v0, float dloss, int N, int V);
    /* the mixture-of-experts kernels (kernels/moe.h): probs, idx, scores,
     * dprobs, coef and the weights w fp32, rows, idx and inv int, the rest act */
    int (*moe_route)(rt_t *rt, float *probs, int *idx, float *scores, const void *logits, int N, int E, int k);
    int (*moe_route_bwd)(rt_t *rt, void *dlogits, const float *dprobs, const float *probs, const int *idx,
                         const float *scores, const float *coef, int coef_ld, int N, int E, int k);
    int (*moe_gather)(rt_t *rt, void *out, const void *x, const int *rows, const float *w, long M, int C);
    int (*moe_combine)(rt_t *rt, void *out, const void *y, const int *inv, const float *w, long N, int k, int C);
    int (*moe_rowdot)(rt_t *rt, float *out, const void *a, const int *rows, const void *b, long M, int C);
    /* optimizer over segments of fp32 master weights; param_bf16 of each
     * segment points at the act copy to refresh (either type). LAMB in two
     * halves so the per-tensor norms can be summed across ranks between
     * them: norms (device, 2 x count: sums of w^2 and u^2) are overwritten
     * by lamb_norms and read by lamb_apply. */
    int (*adamw)(rt_t *rt, const kern_opt_tensor *ts, int count, kern_opt_hparams hp);
    int (*lamb_norms)(rt_t *rt, const kern_opt_tensor *ts, int count, kern_opt_hparams hp, float *norms);
    int (*lamb_apply)(rt_t *rt, const kern_opt_tensor *ts, int count, kern_opt_hparams hp,
                      const float *norms);
    /* sums (device, count): each segment's sum of grad^2, clipping's norm pass */
    int (*grad_sumsq)(rt_t *rt, const kern_opt_tensor *ts, int count, float *sums);

    /* cuBLASLt's candidate per GEMM problem (kern_ctx.algos), in DIR/rank-R.txt
     * (real/rt_gpu_algos.c): read (write 0: the directory made when missing,
     * each problem not in the file tuned when first met) or written back
     * (write 1). NULL on the CPU, which has no candidates. */
    int (*gemm_algos)(rt_t *rt, const char *dir, int rank, int write, char *err, int errlen);
    /* who runs the flash attention (attn_backend_t): ATTN_BACKEND_CUDNN
     * opens cuDNN's fused attention for the calls it takes (whole
     * sequences; real/rt_gpu_cudnn.c). NULL on the CPU, which has only the
     * reference. 0, or -1 with the reason. */
    int (*attn_backend)(rt_t *rt, int backend, char *err, int errlen);
    /* the native stream handle (cudaStream_t on the GPU, NULL on the CPU) */
    void *(*native_stream)(rt_t *rt, int stream);
    void (*destroy)(rt_t *rt);
} rt_ops_t;

struct rt {
    const rt_ops_t *op;
    int kind;            /* rt_kind_t */
    int act_bytes;       /* 4 (fp32) on the CPU, 2 (bf16) on the GPU */
    char device_name[128];
    arena_t pool[RT_NPOOLS];  /* the rank's memory: planned size, peak used */
    size_t outside_peak;      /* most bytes held outside the pools at once: the GPU's attention scratch
                                 (working memory the memory model does not plan); 0 on the CPU */
    int64_t comm_wait_ns;     /* host time blocked waiting for communication so far (the CPU path's MPI
                                 waits: there the host is the compute stream, so a rank's compute is its
                                 ops' time less this); 0 on the GPU, whose NCCL waits are on its streams
                                 (each op's rt_times_t wait_ns holds them there) */
    int64_t comm_wait_cpu_ns; /* of that, the calling thread's CPU time (MPI polls while it waits) */
    long graph_launches;      /* CUDA graphs launched (capture_end), of them instantiated anew */
    long graph_builds;
    kern_clock_sums clock;    /* NVML reads of the GPU taken while iterations ran (between iter_begin and
                                 iter_end, every RT_CLOCK_READ_MS by a host thread: real/rt_gpu_clock.h),
                                 cumulative since the runtime was made, as of the last iter_end; no reads
                                 on the CPU or where NVML does not answer */
    void *impl;
};

/* The CPU runtime: always available. plan[pool] is the arena size the
 * memory model plans; allocations beyond it are still served (and the
 * excess reported), so a plan that is too small shows, not crashes. */
int rt_cpu_create(rt_t **rt, const size_t plan[RT_NPOOLS], char *err, int errlen);

/* The GPU runtime on device `device`: -1 with a message when this build
 * has no CUDA or the machine has no usable GPU. */
int rt_gpu_create(rt_t **rt, int device, const size_t plan[RT_NPOOLS], char *err, int errlen);

/* Number of GPUs this process can use, asked of the CUDA runtime (not of
 * /dev: a container may show one it cannot use); 0 with the reason in why
 * (no GPU module, no driver, no device, or a module built with
 * MEGASIM_CUDA_CHECK_ONLY, whose kernels are not for running). Creates no
 * context. */
int rt_gpu_count(char *why, size_t len);

/* Bytes the attention forward saves for its backward (see attn_fwd). */
size_t rt_attn_saved_bytes(const rt_t *rt, int attn, kern_attn_shape s);

/* Returns a non-zero code from the enclosing function (the callee has
 * already printed file:line and the reason). */
#define RT_TRY(x)                                                                                      \
    do {                                                                                               \
        int rt_rc_ = (x);                                                                              \
        if (rt_rc_)                                                                                    \
            return rt_rc_;                                                                             \
    } while (0)

/* Wall clock (CLOCK_MONOTONIC) in ns. */
int64_t rt_now_ns(void);
/* CPU time of the calling thread, ns: on the CPU path the device's own
 * busy time, whatever share of a core the scheduler gave it. */
int64_t rt_thread_cpu_ns(void);
/* The calling thread's CPU time since cpu0 (rt_thread_cpu_ns) less what it
 * spent in MPI waits since wait0 (rt->comm_wait_cpu_ns): a CPU rank's own
 * work. */
int64_t rt_busy_cpu_ns(const rt_t *rt, int64_t cpu0, int64_t wait0);

#endif
