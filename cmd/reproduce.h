/* cmd/reproduce.h: what `megasim reproduce` (cmd/reproduce.c) shares
 * with its outputs (reproduce_out.c) and its Table 2 diagnostics
 * (reproduce_bounds.c): the options, the sets, the fitted parameters and
 * one experiment row, as loaded and run. */
#ifndef CMD_REPRODUCE_H
#define CMD_REPRODUCE_H

#include "calib/fit.h"
#include "cmd/cli.h"
#include "model/hw.h"
#include "model/job.h"

enum { SET_TABLE2, SET_TABLE3, SET_FIG9, NSETS };
extern const char *const set_names[NSETS]; /* table2, table3, fig9: datasets and CSV names */

/* megasim reproduce's options (reproduce_opts, reproduce.c). */
typedef struct {
    char set[16], experiments[512], out[512];
    int fit, sim, plot, help;
} reproduce_opts_t;
extern const opt_table reproduce_opts;

/* One row: what the paper says and what both executors predict; datasheet
 * is the closed form with the built-in profile, nothing fitted by this run
 * (k = 1, the built-in host terms). */
typedef struct {
    char name[64], adds[96];
    int set, system, gpus, batch, row;
    double paper_mfu, paper_iter_s, closed_mfu, closed_iter_s, sim_mfu, sim_iter_s, datasheet_mfu;
    double closed_mfu_se; /* the closed form's standard error from the fitted parameters (NAN: no fit) */
    job_t job;
    hw_t hw;      /* the row's profile as its file gives it (unfitted) */
    char *config; /* the row's effective configuration, JSON */
} row_t;

/* The cluster parameters fitted on Table 3 (reproduce.c documents each),
 * with their bounds and starting points. */
enum { FP_K, FP_GAP, FP_OVERHEAD, FP_NVL, NFP };
typedef struct {
    const char *name, *unit, *what;
    double lo, hi, start;
} fit_param_t;
extern const fit_param_t fit_params[NFP];

/* The fit's outcome, reported and recorded; loo: Table 3 leave-one-out,
 * each row's closed-form MFU from a fit to the other rows (NAN: no fit). */
typedef struct {
    int on;
    calib_fit_t f;
    double loo_mean, loo_max; /* |error| in points */
    double loo_mfu[32];       /* by Table 3 row number: its leave-one-out MFU (fraction; NAN: none) */
} fit_t;

/* The row's profile with the fitted parameters p applied. */
hw_t fitted_hw(const row_t *row, const double *p);

/* reproduce_out.c: the HDF5 result, the CSV per set, the fitted profile
 * (with a fit) and, with --plot, the figures. 0, or -1 with err. */
int reproduce_write(const reproduce_opts_t *ro, const row_t *rows, int n, const fit_t *fit, char *err);
/* Makes the output file's folder (one level, e.g. results/). */
void reproduce_make_parent(const char *path);

/* Table 2 against itself, and across its two global batches: shapes of
 * the iteration time fitted by least squares to the paper's own rows,
 * printed as bounds and diagnostics, never as predictions. */
void reproduce_print_bounds(const row_t *rows, int n);

#endif
