/* cmd/plot_int.h: what plot_data.c (the result file, its reproduce
 * tables, the .dat files and gnuplot variables) shares with plot_sim.c
 * (the figures of a simulation or a measurement: timeline and heat map).
 * Not for other users: cmd/plot_data.h is the interface. */
#ifndef CMD_PLOT_INT_H
#define CMD_PLOT_INT_H

#include "cmd/plot_data.h"
#include "sim/out.h"

#include <cjson/cJSON.h>
#include <stdio.h>

#define MAX_NAMES 32 /* streams, kinds */
#define PLOT_MAX_RANK (1 << 26) /* ranks, iterations and counts a file may name (the job allows fewer) */

typedef struct {
    const char *path, *outdir;
    char *err;
    int errlen;
    hid_t file;
    plot_set_t *set;
    cJSON *config;     /* root attribute config_json, or NULL */
    out_file_t dat;    /* the figure's data file being written (one at a time) */
} plot_ctx_t;

/* "PATH: message" into c->err; returns rc. */
int plot_fail(plot_ctx_t *c, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The figure's gnuplot variables: a number, a quoted string. */
void plot_var_num(plot_fig_t *f, const char *name, double v);
void plot_var_str(plot_fig_t *f, const char *name, const char *v);

/* Opens OUTDIR/NAME.dat for a new figure (header: its first comment); its
 * stream, NULL with the message. plot_fig_close ends it (renamed into
 * place) and counts the figure with its rows. */
FILE *plot_fig_open(plot_ctx_t *c, const char *name, const char *header, plot_fig_t **out);
int plot_fig_close(plot_ctx_t *c, plot_fig_t *f, FILE *fp, long rows);

/* Splits s in place at sep into at most max names; their count. */
int plot_split(char *s, char sep, char **names, int max);

/* plot_read_table on the context's file, failures in c->err. */
int plot_ctx_table(plot_ctx_t *c, const char *name, const plot_col_t *cols, int ncols, size_t row_size, void **rows,
                   long *n);

/* qsort order of ints, ascending. */
int plot_cmp_int(const void *a, const void *b);

/* plot_sim.c: the figures of a simulation or measurement. PLOT_OK or an error. */
int plot_fig_timeline(plot_ctx_t *c);
int plot_fig_heatmap(plot_ctx_t *c);

#endif
