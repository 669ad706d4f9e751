/* sim/goodput: one trial of a whole run under faults (see goodput.h). */
#include "sim/goodput.h"

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const gp_lost_names[LOST_N] = {"detection", "diagnosis", "relaunch_init", "checkpoint_load",
                                           "redone_work", "checkpoint_stall", "repair_wait", "straggler_slowdown"};

typedef struct {
    const gp_model_t *m;
    gsl_rng *rng;
    gp_trial_t *o;
    double t, limit;            /* wall clock, its end (infinite with --tokens) */
    double done;                /* useful seconds saved by checkpoints */
    double speed;               /* wall seconds per useful second */
    int slow_hosts;             /* slow hosts still in the job */
    double slow_up;             /* time trained with them, for the detector */
    long pool;                  /* free spares (m->spare_nodes < 0: unlimited) */
    long count;                 /* interruptions so far */
    double *back;               /* when each node in repair returns (ascending) */
    long head, nback, cap;
    int stop;
} trial_t;

double gp_stall_s(const gp_model_t *m, double speed)
{
    return m->cost.stage1_s + fmax(0, m->cost.stage2_s - speed * m->interval_s);
}

/* s seconds of category cat, cut at the end of the booking. */
static void spend(trial_t *T, int cat, double s)
{
    double d = fmax(0, fmin(s, T->limit - T->t));
    T->o->lost_s[cat] += d;
    T->t += d;
    if (T->t >= T->limit)
        T->stop = 1;
}

/* A spare for an evicted node, which enters repair: the pool's, after
 * the nodes back from repair rejoin it; with none free, the job waits for
 * the next node back (the evicted one itself when no other is away). */
static int take_spare(trial_t *T)
{
    const gp_model_t *m = T->m;
    if (m->spare_nodes < 0)
        return 0;
    if (T->nback == T->cap) {
        long cap = T->cap ? 2 * T->cap : 256;
        double *b = realloc(T->back, sizeof *b * cap);
        if (!b)
            return -1;
        T->back = b, T->cap = cap;
    }
    T->back[T->nback++] = T->t + m->repair_s;
    while (T->head < T->nback && T->back[T->head] <= T->t)
        T->head++, T->pool++;
    if (!T->pool) {
        spend(T, LOST_SPARE_WAIT, T->back[T->head] - T->t);
        T->head++, T->pool++;
    }
    T->pool--;
    return 0;
}

static int recover(trial_t *T, int cause)
{
    const gp_model_t *m = T->m;
    const fault_costs_t *c = &m->cost;
    T->o->interruptions[cause]++;
    if (m->max_interruptions && ++T->count >= m->max_interruptions)
        T->o->capped = 1, T->stop = 1;
    /* A slow host's detection window was spent training slowly (counted
     * as straggler slowdown); every other detection is time lost. */
    if (cause != FAULT_STRAGGLER)
        spend(T, LOST_DETECT, c->detect_s[cause]);
    spend(T, LOST_DIAGNOSE, c->diagnose_s[cause]);
    int rec = cause == FAULT_STRAGGLER ? RECOVER_EVICT : m->recover[cause];
    for (int k = 0, n = cause == FAULT_STRAGGLER ? T->slow_hosts : 1; rec == RECOVER_EVICT && k < n; k++)
        if (take_spare(T))
            return -1;
    if (cause == FAULT_STRAGGLER)
        T->slow_hosts = 0, T->speed = 1;
    if (rec == RECOVER_REPAIR)
        spend(T, LOST_SPARE_WAIT, c->repair_wait_s);
    spend(T, LOST_RELAUNCH_INIT, c->relaunch_s + c->init_s);
    spend(T, LOST_LOAD, c->load_s);
    return 0;
}

static int draw_cause(trial_t *T, double total)
{
    double u = gsl_rng_uniform(T->rng) * total, acc = 0;
    int last = 0;
    for (int i = 0; i < FAULT_NRATES; i++) {
        if (!(T->m->rate_per_s[i] > 0))
            continue;
        acc += T->m->rate_per_s[i], last = i;
        if (u < acc)
            return i;
    }
    return last;
}

/* Checkpointed intervals of work and their stalls over `wall` seconds of
 * training from the last checkpoint; the remainder is returned. */
static double train(trial_t *T, double wall, double seg_wall, double stall)
{
    double k = floor(wall / seg_wall);
    T->done += k * T->m->interval_s;
    T->o->lost_s[LOST_CKPT_STALL] += k * stall;
    T->o->lost_s[LOST_SLOW] += k * T->m->interval_s * (T->speed - 1);
    return fmax(0, wall - k * seg_wall);
}

/* One stretch of training from the last checkpoint to the next failure,
 * the detector's eviction of the slow hosts, the end of the work or the
 * end of the booking. */
static int up(trial_t *T, double total_rate)
{
    const gp_model_t *m = T->m;
    double stall = gp_stall_s(m, T->speed), seg_wall = T->speed * m->interval_s + stall;
    double fail = total_rate > 0 ? gsl_ran_exponential(T->rng, 1 / total_rate) : INFINITY;
    double strag = T->slow_hosts && m->evict_stragglers ? fmax(0, m->cost.detect_s[FAULT_STRAGGLER] - T->slow_up)
                                                        : INFINITY;
    double finish = INFINITY, rest = 0;
    if (m->work_s > 0) {
        rest = m->work_s - T->done;
        double full = floor(rest / m->interval_s);
        finish = full * seg_wall + T->speed * (rest - full * m->interval_s);
    }
    double end = T->limit - T->t;
    double ev = fmin(fmin(fail, strag), fmin(finish, end));
    if (T->slow_hosts)
        T->slow_up += ev;
    if (ev == finish) {
        /* the last piece needs no checkpoint */
        double part = train(T, ev, seg_wall, stall);
        T->done = m->work_s;
        T->o->lost_s[LOST_SLOW] += part / T->speed * (T->speed - 1);
        T->t += ev;
        T->stop = 1;
        return 0;
    }
    double part = train(T, ev, seg_wall, stall);
    T->t += ev;
    if (ev == end) {
        /* the booking ends mid-interval: that training counts (the job goes on) */
        double work = fmin(part, T->speed * m->interval_s) / T->speed;
        T->done += work;
        T->o->lost_s[LOST_SLOW] += work * (T->speed - 1);
        T->o->lost_s[LOST_CKPT_STALL] += part - work * T->speed;
        T->stop = 1;
        return 0;
    }
    T->o->lost_s[LOST_REDO] += part;
    return recover(T, ev == fail ? draw_cause(T, total_rate) : FAULT_STRAGGLER);
}

/* splitmix64 of the run's seed and the trial index: the trial's seed. */
static unsigned long trial_seed(uint64_t seed, long trial)
{
    uint64_t z = seed * 0x9e3779b97f4a7c15ULL + (uint64_t)trial + 1;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return (unsigned long)(z ^ (z >> 31));
}

int gp_run_trials(const gp_model_t *m, long first, long n, gp_trial_t *out)
{
    double total = 0;
    for (int i = 0; i < FAULT_NRATES; i++)
        total += m->rate_per_s[i];
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!rng)
        return -1;
    trial_t T = {.m = m, .rng = rng};
    int rc = 0;
    for (long i = 0; i < n && !rc; i++) {
        gsl_rng_set(rng, trial_seed(m->seed, first + i));
        memset(&out[i], 0, sizeof out[i]);
        T.o = &out[i];
        T.t = 0, T.limit = m->wall_limit_s > 0 ? m->wall_limit_s : INFINITY;
        T.done = 0, T.stop = 0, T.head = T.nback = 0, T.slow_up = 0, T.count = 0;
        T.pool = m->spare_nodes;
        T.slow_hosts = m->slow_host_fraction > 0 ? (int)gsl_ran_binomial(rng, m->slow_host_fraction, m->nodes) : 0;
        T.speed = T.slow_hosts ? m->slow_ratio : 1;
        while (!T.stop && !rc)
            rc = up(&T, total);
        out[i].wall_s = T.t;
        out[i].useful_s = T.done;
    }
    free(T.back);
    gsl_rng_free(rng);
    return rc;
}
