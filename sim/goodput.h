/* sim/goodput.h: the Monte Carlo of a whole training run under faults.
 * One trial plays the run's wall clock from start to end: failures of each
 * cause arrive as Poisson processes while the job trains or checkpoints;
 * each is detected, diagnosed, recovered (in place, by evicting its node
 * for a spare from a finite pool whose nodes come back after repair, or
 * by waiting for a repair), relaunched, initialised and reloaded, and the
 * work since the last checkpoint is redone. Slow hosts drawn at the start
 * stretch every iteration until the straggler detector has them evicted.
 * Every second of the wall clock lands in useful training or in one lost
 * category, so they sum to the wall time.
 *
 * Determinism: trial i draws only from its own generator (GSL's MT19937,
 * seeded from the run's seed and i), so a trial's result does not depend
 * on which process ran it or in what order. */
#ifndef SIM_GOODPUT_H
#define SIM_GOODPUT_H

#include "model/fault.h"

#include <stdint.h>

typedef enum {
    LOST_DETECT, LOST_DIAGNOSE, LOST_RELAUNCH_INIT, LOST_LOAD, LOST_REDO, LOST_CKPT_STALL, LOST_SPARE_WAIT,
    LOST_SLOW, LOST_N
} gp_lost_t;

extern const char *const gp_lost_names[LOST_N]; /* "detection", ... (JSON keys) */

typedef struct {
    double work_s;              /* healthy training seconds to do (--tokens), or 0 */
    double wall_limit_s;        /* wall seconds of the booking (--train-days), or 0 */
    double interval_s;          /* checkpoint every this many seconds of training */
    double slow_ratio;          /* iteration time with a slow host / without (>= 1) */
    int nodes;                  /* the job's nodes */
    int spare_nodes;            /* the spare pool; -1: never runs out */
    int evict_stragglers;       /* the straggler detector evicts slow hosts */
    double slow_host_fraction;
    double rate_per_s[FAULT_NCAUSES]; /* the job's failures per second, each cause */
    int recover[FAULT_NCAUSES];
    double repair_s;            /* an evicted node back in the pool */
    fault_costs_t cost;
    uint64_t seed;
    long max_interruptions;     /* a trial stops there, marked capped (0: no cap) */
} gp_model_t;

typedef struct {
    double wall_s, useful_s;    /* useful: healthy-iteration seconds trained */
    double lost_s[LOST_N];
    int interruptions[FAULT_NCAUSES];
    int capped;                 /* stopped at max_interruptions: its figures are partial */
} gp_trial_t;

/* The checkpoint stall of one interval: stage one, plus stage two's
 * overrun when it cannot finish within the interval's wall time. */
double gp_stall_s(const gp_model_t *m, double speed);

/* Trials first .. first+n-1 into out[0 .. n). 0, or -1 (out of memory). */
int gp_run_trials(const gp_model_t *m, long first, long n, gp_trial_t *out);

#endif
