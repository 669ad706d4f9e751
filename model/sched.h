/* sched: the per-rank op program of one training iteration, as Megatron-LM
 * (or MegaScale) issues it: model-chunk forwards and backwards in the
 * pipeline schedule's order (GPipe, 1F1B, interleaved 1F1B), pipeline
 * transfers (Megatron's combined blocking exchanges, or MegaScale's
 * decoupled sends and receives on their own streams), DP collectives
 * (all-reduce, or per-chunk reduce-scatter and all-gather, overlapped or
 * not), the embedding sync, the optimizer step and host stalls.
 *
 * Programs are produced lazily by an iterator with O(1) state, so 12,288
 * ranks never need their programs in memory. One op is a model chunk's
 * forward or backward on one micro-batch; `megasim schedule --layers`
 * expands it into the layer ops of model/layer.c.
 *
 * Cross-stream dependencies are counters: an op may wait until one of the
 * rank's counters reaches a value, and may bump a counter when it ends.
 * Transfers pair by (sender, receiver, direction, index): the i-th send
 * from a to b in one direction meets the i-th receive at b from a. */
#ifndef MODEL_SCHED_H
#define MODEL_SCHED_H

#include "model/job.h"

#include <stdint.h>

/* STREAM_DP_GRAD carries ZeRO-3's per-micro-batch gradient
 * reduce-scatters beside its weight gathers on STREAM_DP (FSDP's two
 * communication streams); no other program uses it. The DP streams and
 * the compute stream run their ops one after another (FIFO); the pipeline
 * streams are pools. */
typedef enum { STREAM_COMPUTE, STREAM_DP, STREAM_PP_SEND, STREAM_PP_RECV, STREAM_DP_GRAD, STREAM_COUNT } stream_t;

static inline int sched_stream_dp(int stream) { return stream == STREAM_DP || stream == STREAM_DP_GRAD; }

typedef enum {
    SOP_FWD,       /* forward of model chunk `chunk` on micro-batch `mb` */
    SOP_BWD,       /* its backward (recomputation included) */
    SOP_XFER,      /* 1 to 4 pipeline transfers, done when all are done */
    SOP_DP_GATHER, /* all-gather of weights over DP (one chunk, or all) */
    SOP_DP_REDUCE, /* reduce-scatter (ZeRO >= 1) or all-reduce of gradients */
    SOP_EMB_SYNC,  /* tied embedding gradients, first and last stage */
    SOP_OPTIM,     /* optimizer step on the local shard */
    SOP_HOST,      /* host stall: synchronous data loading */
    SOP_JOIN       /* waits for a counter; takes no time */
} sop_kind_t;

typedef enum { DIR_FWD, DIR_BWD } xfer_dir_t;

/* Counters a rank keeps; waits name one of them. */
typedef enum {
    CNT_NONE = -1,
    CNT_RECV_FWD, CNT_RECV_BWD, CNT_FWD_DONE, CNT_BWD_DONE, CNT_GATHER_DONE, CNT_PART_DONE, CNT_REDUCE_DONE, CNT_COUNT
} counter_t;

/* Ops are kept compact (about 72 bytes): the simulator holds thousands
 * per rank in flight at 12,288 ranks, and its speed is bound by memory. */
typedef struct {
    uint8_t send;     /* 1 send, 0 receive */
    uint8_t dir;      /* xfer_dir_t: activations forward, gradients backward */
    int16_t peer;     /* pipeline stage of the other side */
    int32_t index;    /* i-th transfer of this kind between the two stages */
} sched_xfer_t;

typedef struct {
    int8_t kind;      /* sop_kind_t */
    int8_t stream;    /* stream_t */
    int8_t nx;        /* XFER: transfers */
    int8_t wait[2];   /* counter_t to wait on, or CNT_NONE */
    int8_t bump;      /* counter_t bumped at the end, or CNT_NONE */
    int8_t bump_part; /* counter_t bumped at the end of every part, or CNT_NONE */
    int32_t mb, chunk; /* FWD/BWD; chunk (or bucket) of DP ops (-1 = all) */
    int32_t parts;    /* done in parts, one after another: a pass split at DP
                         bucket boundaries, or a collective over several chunks
                         or buckets. wait[0]'s threshold rises by one per part */
    int32_t wait_for[2]; /* wait until counter >= wait_for */
    sched_xfer_t x[4];
    double bytes;     /* XFER: per transfer; DP/EMB: the collective's bytes */
    double bytes_edp; /* DP: the experts' bytes beside them, over EDP instead (model/moe.h); 0 when dense */
} sched_op_t;

/* Iterator over one rank's program. The state is a handful of integers. */
typedef struct {
    const job_t *job;
    int stage;            /* pipeline stage of the rank */
    int phase;            /* position in the schedule */
    long sent[2], recvd[2];   /* transfers issued per direction */
    long fwd_recvs, bwd_recvs; /* receives the compute stream has consumed */
    long k;               /* step within the phase */
    sched_op_t buf[16];   /* ops of the current step, not yet handed out */
    int nbuf, ibuf;
} sched_iter_t;

void sched_iter_init(sched_iter_t *it, const job_t *job, int stage);

/* Next op of the program into *op; 0 at the end. */
int sched_next(sched_iter_t *it, sched_op_t *op);

/* Megatron-LM's order of model chunks and micro-batches: forward/backward
 * number k of a stage runs chunk sched_chunk(k) on micro-batch sched_mb(k). */
int sched_chunk(const job_t *job, long k, int forward);
int sched_mb(const job_t *job, long k);

/* Megatron's warm-up forwards on a stage. */
long sched_warmup(const job_t *job, int stage);

/* Blocking exchanges on a stage's compute stream (Megatron's combined
 * send/receive calls), each costing one transfer time when its partner
 * is on time. O(stages x chunks), whatever the batch; the _walked twin
 * counts them op by op (O(ops): tests hold the two equal). */
long sched_blocking_exchanges(const job_t *job, int stage);
long sched_blocking_exchanges_walked(const job_t *job, int stage);

/* Ops in one iteration of a stage's program. O(ops). */
long sched_program_ops(const job_t *job, int stage);

/* One op as text: "stream op key=value ..." (the rank is printed by the
 * caller). Returns the number of characters written. */
int sched_format(const sched_op_t *op, char *buf, int len);

/* Checks that every send has its receive (same bytes), every collective's
 * members issue the same sequence, and the counters waited on are reached.
 * Walks every stage's program: O(total ops). 0, or -1 with a message. */
int sched_verify(const job_t *job, char *err, int errlen);

/* The same check over programs from another source (tests inject broken
 * ones): next(ctx, it, op) plays the role of sched_next. */
typedef int (*sched_next_fn)(void *ctx, sched_iter_t *it, sched_op_t *op);
int sched_verify_with(const job_t *job, sched_next_fn next, void *ctx, char *err, int errlen);

extern const char *const sched_stream_names[STREAM_COUNT];
extern const char *const sched_kind_names[]; /* sop_kind_t order */
extern const int sched_nkinds;

#endif
