/* plot_data: reads a megasim result file and writes the plain data that
 * the gnuplot scripts in plots/ draw. Which figures a file yields depends
 * on what it holds:
 *   kind "simulation" (sim/SCHEMA.md): timeline (if /timeline has rows),
 *     heatmap (if /ranks has more than one row);
 *   kind "reproduce" (`megasim reproduce`): table2-mfu (/table2),
 *     table3-ablation (/table3), fig9-weak-scaling (/fig9), each if present.
 * Each figure NAME gets OUTDIR/NAME.dat (whitespace-separated columns, '#'
 * comments, '?' for a missing value) and is drawn by plots/NAME.gp with
 * `datafile`, `outfile` and the figure's extra variables (`vars`). */
#ifndef SIM_PLOT_DATA_H
#define SIM_PLOT_DATA_H

#include <stddef.h>

#define PLOT_MAX_FIGS 8
#define PLOT_VARS_LEN 16384

typedef struct {
    const char *name;          /* script plots/NAME.gp, data NAME.dat */
    char dat[4096];            /* path of the .dat written */
    long rows;                 /* data rows in it */
    char vars[PLOT_VARS_LEN];  /* more gnuplot definitions: "a=1; b='x'; " */
} plot_fig_t;

typedef struct {
    char kind[32];             /* root attribute kind */
    int nfigs;
    plot_fig_t figs[PLOT_MAX_FIGS];
} plot_set_t;

/* Bad input (missing file, not HDF5, not a megasim result, a dataset
 * without the expected columns): PLOT_BAD_INPUT; a failure to write the
 * output: PLOT_IO_ERROR. Either way err holds one message. */
enum { PLOT_OK = 0, PLOT_BAD_INPUT = -2, PLOT_IO_ERROR = -1 };

/* Reads `path` and writes the .dat of every figure it yields into outdir
 * (which must exist). */
int plot_prepare(const char *path, const char *outdir, plot_set_t *set, char *err, int errlen);

/* Appends s to buf as a gnuplot single-quoted string ('' for a quote). */
void plot_gp_quote(char *buf, size_t size, const char *s);

#endif
