/* sim/engine.h: the discrete-event executor of the per-rank op programs
 * (model/sched.h). Every rank (or every class of provably identical ranks,
 * when folded) plays its program on its streams in integer nanoseconds:
 * FIFO compute and DP streams, asynchronous PP send/receive pools.
 * Chunk-steps run TP-synchronously (a TP group moves at its slowest
 * member's pace, as its per-layer collectives force), DP and embedding
 * collectives meet all their members, pipeline transfers meet their
 * partner. Op durations come from model/ (the same costs as the closed
 * form), stretched by injected stragglers and slow links.
 *
 * Determinism: integer time, events ordered by (time, sequence number),
 * ranks visited in index order: the same inputs give bit-identical output. */
#ifndef SIM_ENGINE_H
#define SIM_ENGINE_H

#include "model/estimate.h"
#include "model/sched.h"

#include <stdint.h>

#define SIM_MAX_SLOW 256

typedef struct {
    int id;        /* rank (slow ranks) or node (slow links) */
    double factor; /* > 1: time multiplier */
} sim_slow_t;

#define SIM_MAX_TRACE 64

/* One op of a traced rank's timeline. */
typedef struct {
    int rank, stream, kind;  /* stream_t, sop_kind_t */
    int mb, chunk;           /* FWD/BWD; chunk or piece for DP ops */
    int64_t t_ready_ns;      /* reached the head of its stream */
    int64_t t_start_ns;      /* work began (waits and meetings over) */
    int64_t t_end_ns;
    int iter;                /* iteration (measured runs record several; 0 here) */
} sim_rec_t;

/* One measured iteration of a real run (sim results have none). */
typedef struct {
    int step;
    double loss, step_time_s, tokens_per_s, mfu;
    double grad_norm, lr;    /* the global gradient norm (before clipping) and the learning rate of the step */
    double sm_mhz, power_w;  /* the GPUs' mean SM clock and board power over the step (NVML, every rank's
                                reads; 0 where none: the CPU, no NVML) */
    double power_capped;     /* the share of those reads with the power-cap reason bit */
} sim_iter_t;

typedef enum { SIM_NET_ALPHA_BETA, SIM_NET_FLOWS } sim_network_t;

typedef struct {
    int network;                 /* sim_network_t: alpha-beta on idle links, or
                                    flows sharing links max-min (sim/net.h;
                                    implies every rank is played, unfolded) */
    int ecmp_ideal;              /* flows: split evenly over equal-cost paths
                                    instead of hashing each flow to one */
    int fold;                    /* fold identical ranks (default on) */
    int slow_forward_only;       /* stragglers slow forward passes only (the
                                    paper's observation), not the whole step */
    int ntrace;                  /* ranks whose every op is recorded */
    int trace_ranks[SIM_MAX_TRACE];
    int nslow_ranks, nslow_links;
    sim_slow_t slow_ranks[SIM_MAX_SLOW];  /* compute of these ranks runs slower */
    sim_slow_t slow_links[SIM_MAX_SLOW];  /* these nodes' NICs run slower */
} sim_opts_t;

/* Where one entity's compute stream spent the iteration (ns); sums to its
 * end time. */
typedef struct {
    int64_t compute, bubble, tp, pp, dp, optimizer, other;
    int64_t end;
    int64_t dp_busy, pp_busy; /* busy time of its DP stream and PP pools */
} sim_account_t;

typedef struct {
    int64_t iteration_ns;
    long long events;
    int entities;               /* simulated: ranks unfolded, classes folded */
    int classes;                /* DP replica classes */
    int critical_entity;        /* the entity that finished last */
    int critical_rank;          /* a global rank it stands for */
    sim_account_t critical;     /* its breakdown */
    sim_account_t *per_entity;  /* [entities] */
    int *entity_rank;           /* [entities]: representative global rank */
    int *entity_count;          /* [entities]: ranks it stands for */
    sim_rec_t *timeline;        /* ops of the traced ranks, in completion order */
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
    sim_iter_t *iters;          /* /iterations rows */
    int niters;
    double peak_memory_bytes;   /* the fullest rank's measured peak (its pools), else 0: the model's */
} sim_result_t;

/* Parses "R:F,R:F" (rank or node : factor > 1) into list; -1 with a message. */
int sim_parse_slow(const char *text, const char *flag, int limit, sim_slow_t *list, int *n, char *err, int len);

/* Runs one iteration. 0, or -1 with a message (bad option, deadlock). */
int sim_run(const job_t *job, const hw_t *hw, const sim_opts_t *o, sim_result_t *r, char *err, int len);

void sim_result_free(sim_result_t *r);

#endif
