/* cmd/goodput.h: what `megasim goodput` computes (goodput.c) and writes
 * (goodput_out.c: the JSON object, the HDF5 file, the gnuplot figure;
 * goodput_fig.c: the figure's data, from a run or read back from its file). */
#ifndef CMD_GOODPUT_H
#define CMD_GOODPUT_H

#include "model/estimate.h"
#include "sim/goodput.h"

#define GP_SWEEP 25   /* checkpoint intervals swept, Young/Daly / 8 to x 8 */
#define GP_WHATIF 3   /* no spares, unlimited spares, stragglers kept */

typedef struct {
    double tokens, train_days, spare_fraction, rate_scale;
    double interval_s;          /* from interval: 0 for auto */
    char interval[64];
    int trials, sweep_trials, seed, unlimited_spares, evict_stragglers, init_design, ckpt_load, json, help;
    char out[1024], plot[1024], plots_dir[1024], replay[1024];
} goodput_opts_t;

/* The statistics of a set of trials. */
typedef struct {
    long n;
    double ettr, ettr_lo, ettr_hi;     /* mean, and its 95% confidence interval */
    double runs_lo, runs_hi;           /* 2.5th and 97.5th percentiles of the runs */
    double wall_days, useful_days;
    double lost_h[LOST_N];
    double interruptions[FAULT_NCAUSES], restarts;
} gp_stats_t;

typedef struct {
    double interval_s, analytic;
    gp_stats_t st;
} gp_sweep_t;

typedef struct {
    const char *name;
    gp_stats_t st;
} gp_whatif_t;

typedef struct {
    goodput_opts_t o;
    job_t job;
    hw_t hw;
    estimate_t e;
    fault_job_t fj;
    gp_model_t model;            /* the main run's, at interval_s */
    double slow_iteration_s;     /* the simulator's iteration with one slow host */
    double sim_iteration_s;      /* and without */
    double rate_per_s, down_s;   /* all causes; the mean recovery */
    double train_days;           /* the booking: --train-days, or 30 without --tokens */
    double interval_s, best_interval_s, young_daly_s;
    double analytic, first_order;
    double init_s[3][2];         /* design x {2,048, 12,288 GPUs} */
    double load_s[2];            /* fault_load_t */
    int nodes, spares;
    gp_stats_t main;
    gp_sweep_t sweep[GP_SWEEP];
    gp_whatif_t whatif[GP_WHATIF];
    int nwhatif;
    double main_s;               /* the main run's trials, wall seconds (stderr only) */
} gp_result_t;

extern const opt_table goodput_opts;

struct cJSON *gp_json(const gp_result_t *r);
void gp_text(const gp_result_t *r);
/* --out and --plot; 0, or -1 with err. */
int gp_write_h5(const gp_result_t *r, const char *path, char *err);
int gp_write_plot(const gp_result_t *r, const char *prefix, char *err);
/* The figure's data, PREFIX-interval.dat and PREFIX-lost.dat, and its
 * gnuplot variables (plots/goodput.gp) into fig; 0, or -1 with err. */
struct plot_fig;
int gp_plot_fig(const gp_result_t *r, const char *prefix, struct plot_fig *fig, char *err);
/* A goodput file's summary_json (gp_json) back into what its figure
 * draws (the sweep, the lost hours of the run and its what-ifs, the title's
 * job); what-if names point into sum. 0, or -1 with err naming the field
 * missing or out of range. */
int gp_from_json(const struct cJSON *sum, gp_result_t *r, char *err);

#endif
