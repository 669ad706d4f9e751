/* sim/engine.h: the discrete-event executor of the per-rank op programs
 * (model/sched.h). Every rank (or every class of provably identical ranks,
 * when folded) plays its program on its streams in integer nanoseconds:
 * FIFO compute and DP streams, asynchronous PP send/receive pools.
 * Chunk-steps run TP-synchronously (a TP group moves at its slowest
 * member's pace, as its per-layer collectives force), DP and embedding
 * collectives meet all their members, pipeline transfers meet their
 * partner. Op durations come from model/cost.h (the same costs as the closed
 * form), stretched by injected stragglers and slow links.
 *
 * Determinism: integer time, events ordered by (time, sequence number),
 * ranks visited in index order: the same inputs give bit-identical output. */
#ifndef SIM_ENGINE_H
#define SIM_ENGINE_H

#include "model/cost.h"
#include "model/result.h"
#include "model/sched.h"

#include <stdint.h>

#define SIM_MAX_SLOW 256

typedef struct {
    int id;        /* rank (slow ranks) or node (slow links) */
    double factor; /* > 1: time multiplier */
} sim_slow_t;

#define SIM_MAX_TRACE 64

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
    uint64_t seed;               /* the draws: MoE routing imbalance (model/moe.h) */
    int own_iterators;           /* every entity iterates its program itself, where
                                    the stages' programs would be written out once
                                    and shared (no flag: tests hold the two equal) */
} sim_opts_t;

/* Parses "R:F,R:F" (rank or node : factor > 1) into list; -1 with a message. */
int sim_parse_slow(const char *text, const char *flag, int limit, sim_slow_t *list, int *n, char *err, int len);

/* Runs one iteration. 0, or -1 with a message (bad option, deadlock). */
int sim_run(const job_t *job, const hw_t *hw, const sim_opts_t *o, result_t *r, char *err, int len);


#endif
