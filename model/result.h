/* model/result: the records every executor writes and every reader
 * shares: one iteration's result (its time, where each rank's compute
 * stream spent it, the ranks it stands for), the timed ops of traced ranks,
 * and a measured run's per-step rows. The simulator (sim/engine.c) and the
 * real backend (real/exec.c, real/run_output.c) fill it; sim/output.c
 * writes it as the HDF5 result schema (docs/schema.md). Below both
 * executors, so neither includes the other for it. */
#ifndef MODEL_RESULT_H
#define MODEL_RESULT_H

#include <stdint.h>

/* One op of a traced rank's timeline. */
typedef struct {
    int rank, stream, kind;  /* stream_t, sop_kind_t */
    int mb, chunk;           /* FWD/BWD; chunk or piece for DP ops */
    int64_t t_ready_ns;      /* reached the head of its stream */
    int64_t t_start_ns;      /* work began (waits and meetings over) */
    int64_t t_end_ns;
    int iter;                /* iteration (measured runs record several; 0 here) */
    int64_t t_comm_wait_ns;  /* measured: the part of the op spent waiting on communication (TP
                                collectives inside a chunk): the CPU path's host blocked in MPI, the
                                GPU path's compute stream at NCCL calls (rt_times_t wait_ns); 0 simulated */
    int64_t t_a2a_ns;        /* a forward or backward's time in the experts' token dispatch and combine
                                (measured: the all-to-alls' calls; simulated: their cost); 0 without experts */
    int64_t t_cpu_ns;        /* measured, CPU path, a forward or backward: its own CPU time (the rank's
                                thread, less its communication waits'); -1 otherwise */
} result_op_t;

/* One measured iteration of a real run (sim results have none). */
typedef struct {
    int step;
    double loss, step_time_s, tokens_per_s, mfu;
    double grad_norm, lr;    /* the global gradient norm (before clipping) and the learning rate of the step */
    double sm_mhz, power_w;  /* the GPUs' mean SM clock and board power over the step (NVML, every rank's
                                reads; 0 where none: the CPU, no NVML) */
    double power_capped;     /* the share of those reads with the power-cap reason bit */
    double moe_dropped, moe_aux_loss; /* with experts: the (token, expert) pairs the capacity dropped, and the
                                         auxiliary load-balancing loss (summed over the MoE layers, a mean over
                                         the micro-batches); 0 without */
    double moe_load_cv;      /* the experts' token loads' coefficient of variation in a micro-batch (before
                                dropping; root mean square over MoE layers and micro-batches): the
                                routing imbalance --moe-expert-load-cv prices */
    uint64_t moe_drop_sig;   /* the dropped pairs' signature (real/gpt.h; not in /iterations) */
    long graph_passes;       /* --enable-cuda-graph: the passes rank 0 has launched as CUDA graphs up to and
                                including this step (not in /iterations); -1 without the flag */
} result_iter_t;

/* Where one entity's compute stream spent the iteration (ns); sums to its
 * end time. */
typedef struct {
    int64_t compute, bubble, tp, pp, dp, optimizer, other;
    int64_t end;
    int64_t dp_busy, pp_busy; /* busy time of its DP stream and PP pools */
} result_account_t;

typedef struct {
    int64_t iteration_ns;
    long long events;
    int entities;               /* simulated: ranks unfolded, classes folded */
    int classes;                /* DP replica classes */
    int critical_entity;        /* the entity that finished last */
    int critical_rank;          /* a global rank it stands for */
    result_account_t critical;     /* its breakdown */
    result_account_t *per_entity;  /* [entities] */
    int *entity_rank;           /* [entities]: representative global rank */
    int *entity_count;          /* [entities]: ranks it stands for */
    result_op_t *timeline;        /* ops of the traced ranks, in completion order */
    long ntimeline;
    int ncontended;             /* flows: the links most at full capacity */
    struct {
        char name[64];
        double full_s;          /* time at full capacity: contention */
        double busy_s, bytes;
        int max_flows;
    } contended[5];
    double wall_s;
    /* Measured runs (real/) fill these; the simulator leaves them 0. */
    const char *kind;           /* root attribute `kind`; NULL: "simulation" */
    result_iter_t *iters;          /* /iterations rows */
    int niters;
    double peak_memory_bytes;   /* the fullest rank's measured peak (its pools), else 0: the model's */
} result_t;

/* Frees what the executor allocated (per_entity, entity_rank,
 * entity_count, timeline; not iters, which the caller owns) and zeroes r. */
void result_free(result_t *r);

#endif
