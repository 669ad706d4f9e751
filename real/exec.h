/* real/exec.h: the executor of a rank's op program (model/sched.h) on the
 * real runtime. It walks the same lazy iterator the simulator plays, op by
 * op in issue order: a forward or backward calls the model chunk
 * (real/gpt.h), a pipeline transfer becomes sends and receives (batched
 * and blocking on the compute stream, Megatron-LM's exchanges, or one
 * asynchronous transfer on the send or receive stream, MegaScale's),
 * DP ops become reduce-scatters, all-gathers or all-reduces of the DP
 * pieces on their stream, the embedding sync an all-reduce over the first
 * and last stage, the optimizer step AdamW or LAMB on this rank's shard.
 * Counters become recorded positions of streams (rt.h). Every op is
 * timed (ready, start, end) into the same record the simulator writes.
 *
 * Activations cross stages in FIFO order: the i-th forward that needs an
 * input takes the i-th forward receive, as Megatron's input_tensors list. */
#ifndef REAL_EXEC_H
#define REAL_EXEC_H

#include "real/data.h"
#include "real/gpt.h"
#include "model/result.h"
#include "model/sched.h"

enum { LR_CONSTANT, LR_LINEAR, LR_COSINE }; /* --lr-decay-style */

typedef struct {
    float lr, beta1, beta2, eps, weight_decay;
    int warmup_iters;
    float clip_grad;          /* global gradient norm to clip to (Megatron-LM's --clip-grad); 0: none */
    int decay_style, decay_iters; /* Megatron-LM's --lr-decay-style, --lr-decay-iters (the step it ends at) */
    float min_lr;
    int on_nan;               /* EXEC_NAN_ABORT or EXEC_NAN_SKIP: a NaN or Inf in the gradients */
} exec_hparams_t;

enum { EXEC_NAN_ABORT, EXEC_NAN_SKIP };


typedef struct {
    void *buf[4096];
    int head, tail;
} exec_fifo_t;

typedef struct {
    const job_t *job;
    rt_t *rt;
    comm_t *comm;
    gpt_t *m;
    data_t *data;
    exec_hparams_t hp;
    int zero;                 /* ZeRO sharding in effect (stage >= 1 and DP > 1) */
    int graphs;               /* --enable-cuda-graph: each pass from this process's second iteration on
                                 captured and launched as a CUDA graph (rt_ops_t capture_begin;
                                 exec_graph_rules) */

    /* optimizer state: this rank's shard (ZeRO) or all of its parameters */
    long nshard;
    long *shard_base;         /* [piece]: where its owned part starts in the shard */
    float *master, *mom1, *mom2, *gshard; /* fp32 (nshard); gshard: ZeRO's reduced gradients; master NULL
                                             where the weights the kernels read are fp32 (the CPU path): they
                                             are then the master weights, updated in place (no copy, as the
                                             memory model counts fp32 training) */
    kern_opt_tensor *segs;    /* owned parts of tensors */
    int *seg_tensor, nsegs;
    float *norms_dev, *norms_host;
    double *tensor_norms;     /* [ntensors][2] */
    int step;                 /* optimizer steps taken */
    double grad_norm;         /* the last step's global gradient norm (every rank's part, each element once) */
    double lr;                /* the last step's learning rate */
    float grad_scale;         /* the last step's clipping factor (1: not clipped) */
    int nan_rank;             /* the last step: the first rank whose gradients held a NaN or Inf, or -1 */
    double moe_dropped, moe_aux, moe_load_cv; /* the last step, every rank's (gpt.h): pairs the experts' capacity
                                                 dropped, the auxiliary loss, the expert loads' CV (0 without) */
    uint64_t moe_drop_sig;    /* the dropped pairs' signature */

    /* this iteration */
    int *tok_dev, *tgt_dev;   /* (m, B, T) */
    float *losses_dev;        /* (m, loss rows) on the last stage */
    long cnt[CNT_COUNT];
    exec_fifo_t sendq[2], recvq[2];
    void **saved;             /* [vpp * m]: gpt_saved_t of forwards awaiting backward */
    int iter;                 /* iteration number (global step) */
    int iter0;                /* the first this process ran (a resumed run's step) */

    /* records of every op, all iterations */
    result_op_t *recs;
    rt_times_t *times;
    long nrecs, caprecs;
    int64_t *iter_t0_ns;      /* [iteration]: its start, from the first one's */
    int64_t run_t0_ns;
} exec_t;

int exec_init(exec_t *x, const job_t *job, rt_t *rt, comm_t *comm, gpt_t *m, data_t *data,
              const exec_hparams_t *hp, unsigned long long seed, char *err, int errlen);
void exec_free(exec_t *x);

/* 0 when the job's passes can be captured as CUDA graphs (--enable-cuda-
 * graph): on the GPU, each pass on the compute stream alone, with no host
 * read inside it (FP8's amaxes stay on the device). Else non-zero and err
 * says which rule. */
int exec_graph_rules(const job_t *job, int gpu, char *err, int errlen);

/* Runs training iteration x->iter (then increments it). *loss: the mean
 * loss over the global batch (every rank gets it); *time_s: this rank's
 * wall time of the iteration. */
int exec_iteration(exec_t *x, double *loss, double *time_s);


/* Checkpoint state: the shard's master weights and moments (3 x nshard
 * floats, host), then the model's FP8 scales (m->fp8_sites floats; none
 * without FP8), and the step. Restoring refreshes the act weights. */
int exec_state_get(exec_t *x, float *host3);
int exec_state_set(exec_t *x, const float *host3, int step);

#endif
