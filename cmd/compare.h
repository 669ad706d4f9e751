/* compare: the shared state of `megasim compare` (cmd/compare.c):
 * the two sides read or simulated (compare_load.c), the text and JSON
 * report (compare_report.c) and the figure (compare_plot.c). */
#ifndef CMD_COMPARE_H
#define CMD_COMPARE_H

#include "model/hw.h"
#include "model/job.h"
#include "model/sched.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* The largest iteration a measurement's /timeline may name (F07: INT32_MAX
 * overflowed the per-iteration tally). */
#define CMP_MAX_ITERATION 16777215

/* Which routing imbalance the in-process simulation prices (--moe-load-cv). */
typedef enum { CMP_CV_RUN, CMP_CV_JOB } cmp_cv_from_t;
/* Whether it prices ranks time-sharing a host's cores (--host-share). */
typedef enum { CMP_SHARE_RUN, CMP_SHARE_NONE } cmp_share_from_t;

typedef struct {
    int json, ranks_shown, help;
    int cv_from;          /* cmp_cv_from_t */
    int share_from;       /* cmp_share_from_t */
    char plot[1000], plots_dir[1024];
    char hardware[256]; /* simulate on this profile rather than the run's */
} compare_opts_t;

/* ---- what is compared -------------------------------------------------- */

typedef struct {
    int32_t rank, stream, kind;
    double t_ready_s, t_start_s, t_end_s;
    int32_t iteration;
    double a2a_s;         /* of a fwd or bwd: the experts' all-to-alls (0 where the file has no such column) */
} op_row_t;

typedef struct {
    int32_t rank, stands_for;
    double end_s;
} rank_row_t;

typedef struct {
    int32_t step;
    double step_time_s;
    double moe_load_cv;   /* the experts' token-load CV the step measured (0 where the file has no such column) */
} step_row_t;

/* One side of the comparison, as read from a file or simulated. */
typedef struct {
    op_row_t *ops;        /* /timeline */
    long nops;
    rank_row_t *ranks;    /* /ranks */
    long nranks;
    double iteration_s;   /* measured: the mean step; simulated: the iteration */
    double closed_form_s; /* simulated side: the closed form of the job */
} side_t;

#define NKINDS 16

/* Sums over the timeline rows a side's means cover. */
typedef struct {
    double n[NKINDS], sum_s[NKINDS], compute_s[NKINDS]; /* ops, their time, on the compute stream */
    double compute_wait_s[NKINDS]; /* on the compute stream, t_start - t_ready: the wait before each op (the
                                      partner's, the bubble's), so that busy + wait of every class add up to
                                      the compute stream's whole step on both sides */
    double busy_s[STREAM_COUNT], wait_s[STREAM_COUNT];
    double a2a_s, a2a_n; /* the experts' all-to-alls inside the forwards and backwards, and the ops that had any */
    int niters, nranks;  /* iterations and ranks covered */
    int first_iter, last_iter;
} stats_t;

typedef struct {
    compare_opts_t o;
    const char *run_path, *sim_path;
    cJSON *config;        /* RUN.h5's config_json */
    job_t job;
    hw_t hw;
    step_row_t *steps;    /* /iterations */
    long nsteps;
    side_t meas, sim;
    unsigned char *rank_on; /* [num_gpus]: ranks the per-op means cover */
    int sim_folded, sim_ntraced;
    double cv_measured;   /* the run's mean expert-load CV (the steps the means cover), or 0 */
    int cv_priced;        /* the in-process simulation priced cv_measured in place of the job's 0 */
    double host_share;    /* a CPU run's ranks per core on its most crowded host where above 1, else 0 */
    int share_priced;     /* the in-process simulation priced host_share (the cluster's, hw_host_share) */
    stats_t sm, ss;       /* measured, simulated */
    char prefix[1024];
    int drawn;            /* PNG and SVG written */
} cmp_t;

/* root[sec][key] of the result file's configuration as a string, "" if
 * absent; a number the run recorded beside its options, 0 if absent. */
const char *cmp_cfg_str(const cJSON *root, const char *sec, const char *key);
double cmp_run_num(const cmp_t *c, const char *key);

/* A sum over the covered rows as a time per rank per iteration. */
static inline double cmp_per_rank_iter(const stats_t *st, double sum)
{
    return st->niters && st->nranks ? sum / ((double)st->niters * st->nranks) : NAN;
}

static inline double cmp_per_iter(const stats_t *st, double n)
{
    return st->niters ? n / st->niters : NAN;
}

static inline double cmp_mean_of(double sum, double n)
{
    return n > 0 ? sum / n : NAN;
}

static inline int cmp_kind_present(const cmp_t *c, int k)
{
    return c->sm.n[k] > 0 || c->ss.n[k] > 0;
}

/* compare_load.c: reads RUN.h5 (and SIM.h5, or simulates the job) and
 * sums both sides; one message in err and -1 on bad input. */
int cmp_load(cmp_t *c, char *err);
void cmp_free(cmp_t *c);

/* compare_report.c */
double cmp_err_pct(double measured, double predicted); /* NAN when there is no error to give */
const char *cmp_fmt_pct(char *buf, size_t size, int w, double pct);
const char *cmp_kind_name(int k);
const char *cmp_device_name(const cmp_t *c);
void cmp_print_text(const cmp_t *c);
cJSON *cmp_json_report(const cmp_t *c);

/* compare_plot.c: PREFIX.dat, PREFIX.png and PREFIX.svg; -1 with err on a
 * bad --plot, else the number of images that failed to draw. */
int cmp_plot(cmp_t *c, char *err);

#endif
