/* cmd/reproduce.h: what `megasim reproduce` (cmd/reproduce.c) shares
 * with its Table 2 diagnostics (reproduce_bounds.c): the sets and one
 * experiment row, as loaded and run. */
#ifndef CMD_REPRODUCE_H
#define CMD_REPRODUCE_H

#include "model/hw.h"
#include "model/job.h"

enum { SET_TABLE2, SET_TABLE3, SET_FIG9, NSETS };

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

/* Table 2 against itself, and across its two global batches: shapes of
 * the iteration time fitted by least squares to the paper's own rows,
 * printed as bounds and diagnostics, never as predictions. */
void reproduce_print_bounds(const row_t *rows, int n);

#endif
