/* plot_data: reads a megasim result file and writes the plain data that
 * the gnuplot scripts in plots/ draw. Which figures a file yields depends
 * on what it holds:
 *   kind "simulation" or "measurement" (docs/schema.md): timeline (if
 *     /timeline has rows; of a measurement, its last iteration only),
 *     heatmap (if /ranks has more than one row);
 *   kind "reproduce" (`megasim reproduce`): table2-mfu (/table2),
 *     table3-ablation (/table3), fig9-weak-scaling (/fig9), each if present;
 *   kind "goodput" (`megasim goodput --out`): goodput, from the summary it
 *     keeps (cmd/goodput_fig.c; the data goodput --plot writes).
 * Each figure NAME gets OUTDIR/NAME.dat (whitespace-separated columns, '#'
 * comments, '?' for a missing value) and is drawn by plots/NAME.gp with
 * `datafile`, `outfile` and the figure's extra variables (`vars`). */
#ifndef CMD_PLOT_DATA_H
#define CMD_PLOT_DATA_H

#include <hdf5.h>
#include <stddef.h>

#define PLOT_MAX_FIGS 8
#define PLOT_VARS_LEN 16384

typedef struct plot_fig {
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

/* ---- drawing (cmd/plot.c; also used by megasim compare) ---------- */

/* gnuplot's full path from PATH into out; 0 if it is not there. */
int plot_find_gnuplot(char *out, size_t size);

/* --plots-dir checked before any file is written: a folder holding
 * SCRIPT (e.g. "compare.gp"; NULL: any). 0, or -1 with one message. */
int plot_check_scripts_dir(const char *dir, const char *script, char *err, int errlen);

/* Draws OUTFILE with `gnuplot -e "datafile='F->dat'; outfile=...; F->vars"
 * SCRIPT` (the script picks SVG or PNG by the extension) into OUTFILE's
 * temporary name, renamed onto it once gnuplot succeeded (sim/out.h).
 * Prints "wrote OUTFILE", or "megasim CMD: error: ..." with gnuplot's exit
 * status; returns 0, or 1 on failure. */
int plot_draw(const char *cmd, const char *gnuplot, const char *script, const plot_fig_t *f, const char *outfile);

/* ---- reading result files (also used by megasim compare) ------------ */

/* One column of a compound table, read by name into a C struct field. */
typedef struct {
    const char *name;
    size_t off;
    int is_int;  /* int32, else float64 */
} plot_col_t;

/* Opens path read-only after checking it is a regular HDF5 file with a
 * root attribute `kind` (copied into kind). PLOT_OK, or PLOT_BAD_INPUT with
 * one message ("PATH: ...") in err and *file = -1. The caller closes
 * *file (H5Fclose) and may silence HDF5's own error stack around it. */
int plot_open_result(const char *path, hid_t *file, char *kind, size_t kind_size, char *err, int errlen);

/* Dataset `name` (a 1-D compound table) read into a malloc'ed array of
 * rows of row_size bytes through the listed columns (other columns are
 * ignored). Absent dataset: *rows NULL, *n -1, PLOT_OK. A missing column
 * is PLOT_BAD_INPUT naming it. */
int plot_read_table(hid_t file, const char *path, const char *name, const plot_col_t *cols, int ncols,
                    size_t row_size, void **rows, long *n, char *err, int errlen);

/* 1 if dataset `name` exists and has the column. */
int plot_has_column(hid_t file, const char *name, const char *column);

/* String attribute `name` of object `obj` (fixed or variable length), as a
 * malloc'ed string; NULL if absent or not a string. */
char *plot_attr_str(hid_t file, const char *obj, const char *name);

/* Float attribute into *v: 0, or -1 if absent or unreadable. */
int plot_attr_f64(hid_t file, const char *obj, const char *name, double *v);

#endif
