/* plot_data: a megasim result file (HDF5) to the .dat files and gnuplot
 * variables of its figures. See cmd/plot_data.h for which file yields
 * which figure and sim/SCHEMA.md for the simulation layout.
 *
 * Columns are read by name (HDF5 converts a file compound to a memory
 * compound member by member), so a writer may add columns or reorder them;
 * a missing column is bad input naming the dataset and the column. */
#include "cmd/plot_data.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include "sim/out.h"
#include <hdf5.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_SYS 4      /* systems in /table2 and /fig9 */
#define MAX_NAMES 32   /* streams, kinds */

typedef struct {
    const char *path, *outdir;
    char *err;
    int errlen;
    hid_t file;
    plot_set_t *set;
    cJSON *config;     /* root attribute config_json, or NULL */
    out_file_t dat;    /* the figure's data file being written (one at a time) */
} ctx_t;

/* "PATH: message" into err; returns rc. */
static int vfail(char *err, int errlen, const char *path, int rc, const char *fmt, va_list ap)
{
    int k = snprintf(err, errlen, "%s: ", path);
    if (k > 0 && k < errlen)
        vsnprintf(err + k, errlen - k, fmt, ap);
    return rc;
}

static int pfail(char *err, int errlen, const char *path, int rc, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int pfail(char *err, int errlen, const char *path, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(err, errlen, path, rc, fmt, ap);
    va_end(ap);
    return rc;
}

static int fail(ctx_t *c, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(ctx_t *c, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(c->err, c->errlen, c->path, rc, fmt, ap);
    va_end(ap);
    return rc;
}

/* ---- output helpers -------------------------------------------------- */

void plot_gp_quote(char *buf, size_t size, const char *s)
{
    size_t k = strlen(buf);
    if (k + 1 < size)
        buf[k++] = '\'';
    for (; *s && k + 3 < size; s++) {
        if (*s == '\'')
            buf[k++] = '\'';
        buf[k++] = *s;
    }
    if (k + 1 < size)
        buf[k++] = '\'';
    buf[k] = 0;
}

/* Appends "name=value; " (value formatted) to the figure's variables. */
static void var_num(plot_fig_t *f, const char *name, double v)
{
    size_t k = strlen(f->vars);
    snprintf(f->vars + k, sizeof f->vars - k, "%s=%.10g; ", name, v);
}

static void var_str(plot_fig_t *f, const char *name, const char *v)
{
    size_t k = strlen(f->vars);
    snprintf(f->vars + k, sizeof f->vars - k, "%s=", name);
    plot_gp_quote(f->vars, sizeof f->vars, v);
    k = strlen(f->vars);
    snprintf(f->vars + k, sizeof f->vars - k, "; ");
}

/* Opens OUTDIR/NAME.dat for a new figure; header is its first comment. */
static FILE *fig_open(ctx_t *c, const char *name, const char *header, plot_fig_t **out)
{
    if (c->set->nfigs == PLOT_MAX_FIGS) {
        fail(c, PLOT_IO_ERROR, "more than %d figures", PLOT_MAX_FIGS);
        return NULL;
    }
    plot_fig_t *f = &c->set->figs[c->set->nfigs];
    memset(f, 0, sizeof *f);
    f->name = name;
    snprintf(f->dat, sizeof f->dat, "%s/%s.dat", c->outdir, name);
    if (out_open(&c->dat, f->dat, "w", c->err, c->errlen))
        return NULL;
    fprintf(c->dat.f, "# %s, from %s (megasim plot)\n", header, c->path);
    *out = f;
    return c->dat.f;
}

/* Ends the figure's data file fp (fig_open's): renamed into place. */
static int fig_close(ctx_t *c, plot_fig_t *f, FILE *fp, long rows)
{
    if (fp != c->dat.f || out_close(&c->dat, 0))
        return PLOT_IO_ERROR;
    f->rows = rows;
    c->set->nfigs++;
    return PLOT_OK;
}

/* A value, or '?' (gnuplot: set datafile missing '?') when absent or not
 * finite (megasim reproduce --no-sim writes NaN for the simulator). */
static void put_val(FILE *fp, int have, double v)
{
    if (have && isfinite(v))
        fprintf(fp, " %.6g", v);
    else
        fprintf(fp, " ?");
}

/* ---- HDF5 reading ---------------------------------------------------- */

char *plot_attr_str(hid_t file, const char *obj, const char *name)
{
    return out_h5_attr_read(file, obj, name);
}

int plot_attr_f64(hid_t file, const char *obj, const char *name, double *v)
{
    if (H5Aexists_by_name(file, obj, name, H5P_DEFAULT) <= 0)
        return -1;
    hid_t a = H5Aopen_by_name(file, obj, name, H5P_DEFAULT, H5P_DEFAULT);
    int ok = a >= 0 && H5Aread(a, H5T_NATIVE_DOUBLE, v) >= 0;
    if (a >= 0)
        H5Aclose(a);
    return ok ? 0 : -1;
}

/* Splits "a,b,c" (sep) into at most max names (pointers into s). */
static int split(char *s, char sep, char **names, int max)
{
    int n = 0;
    for (char *p = s; s && n < max; p++) {
        names[n++] = p;
        p = strchr(p, sep);
        if (!p)
            break;
        *p = 0;
    }
    return n;
}

int plot_read_table(hid_t file, const char *path, const char *name, const plot_col_t *cols, int ncols,
                    size_t row_size, void **rows, long *n, char *err, int errlen)
{
    *rows = NULL, *n = -1;
    if (H5Lexists(file, name, H5P_DEFAULT) <= 0)
        return PLOT_OK;
    hid_t d = H5Dopen2(file, name, H5P_DEFAULT), ft = d >= 0 ? H5Dget_type(d) : -1;
    hid_t s = d >= 0 ? H5Dget_space(d) : -1, mt = H5Tcreate(H5T_COMPOUND, row_size);
    int rc = PLOT_OK;
    if (ft < 0 || s < 0 || H5Tget_class(ft) != H5T_COMPOUND || H5Sget_simple_extent_ndims(s) != 1)
        rc = pfail(err, errlen, path, PLOT_BAD_INPUT, "%s is not a one-dimensional table of compound rows", name);
    for (int i = 0; rc == PLOT_OK && i < ncols; i++) {
        if (H5Tget_member_index(ft, cols[i].name) < 0)
            rc = pfail(err, errlen, path, PLOT_BAD_INPUT, "%s has no column '%s'", name, cols[i].name);
        else
            H5Tinsert(mt, cols[i].name, cols[i].off, cols[i].is_int ? H5T_NATIVE_INT32 : H5T_NATIVE_DOUBLE);
    }
    hsize_t len = 0;
    if (rc == PLOT_OK)
        H5Sget_simple_extent_dims(s, &len, NULL);
    if (rc == PLOT_OK && !(*rows = calloc(len ? len : 1, row_size)))
        rc = pfail(err, errlen, path, PLOT_IO_ERROR, "out of memory for %llu rows of %s", (unsigned long long)len,
                   name);
    if (rc == PLOT_OK && len && H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, *rows) < 0)
        rc = pfail(err, errlen, path, PLOT_BAD_INPUT, "cannot read %s (a column of the wrong type?)", name);
    if (rc == PLOT_OK)
        *n = (long)len;
    else
        free(*rows), *rows = NULL;
    H5Tclose(mt);
    if (s >= 0)
        H5Sclose(s);
    if (ft >= 0)
        H5Tclose(ft);
    if (d >= 0)
        H5Dclose(d);
    return rc;
}

int plot_has_column(hid_t file, const char *name, const char *column)
{
    if (H5Lexists(file, name, H5P_DEFAULT) <= 0)
        return 0;
    hid_t d = H5Dopen2(file, name, H5P_DEFAULT), ft = d >= 0 ? H5Dget_type(d) : -1;
    int has = ft >= 0 && H5Tget_class(ft) == H5T_COMPOUND && H5Tget_member_index(ft, column) >= 0;
    if (ft >= 0)
        H5Tclose(ft);
    if (d >= 0)
        H5Dclose(d);
    return has;
}

static int read_table(ctx_t *c, const char *name, const plot_col_t *cols, int ncols, size_t row_size, void **rows,
                      long *n)
{
    return plot_read_table(c->file, c->path, name, cols, ncols, row_size, rows, n, c->err, c->errlen);
}

/* ---- reproduce: /table2, /fig9 (wide, one line per GPU count) ------- */

typedef struct {
    int32_t system, gpus, batch, row;
    double paper_mfu, closed_mfu, sim_mfu, paper_iter_s, closed_iter_s, sim_iter_s;
} rep_row_t;

#define RC(f, i) {#f, offsetof(rep_row_t, f), i}
static const plot_col_t table2_cols[] = {RC(system, 1),       RC(gpus, 1),          RC(batch, 1),
                                    RC(paper_mfu, 0),    RC(closed_mfu, 0),    RC(sim_mfu, 0),
                                    RC(paper_iter_s, 0), RC(closed_iter_s, 0), RC(sim_iter_s, 0)};
static const plot_col_t fig9_cols[] = {RC(system, 1), RC(gpus, 1), RC(paper_mfu, 0), RC(closed_mfu, 0), RC(sim_mfu, 0)};
static const plot_col_t table3_cols[] = {RC(row, 1), RC(paper_mfu, 0), RC(closed_mfu, 0), RC(sim_mfu, 0)};

typedef struct {
    int n;
    char *names[MAX_SYS];
    char *buf;
} systems_t;

/* Root attribute system_names ("megatron-lm,megascale"); without it the
 * systems are numbered. */
static void systems_read(ctx_t *c, systems_t *s)
{
    s->buf = plot_attr_str(c->file, "/", "system_names");
    s->n = s->buf ? split(s->buf, ',', s->names, MAX_SYS) : 0;
}

static void systems_label(const systems_t *s, int k, char *buf, size_t size)
{
    const char *n = k < s->n ? s->names[k] : NULL;
    if (!n)
        snprintf(buf, size, "system %d", k);
    else if (!strcmp(n, "megatron-lm"))
        snprintf(buf, size, "Megatron-LM");
    else if (!strcmp(n, "megascale"))
        snprintf(buf, size, "MegaScale");
    else
        snprintf(buf, size, "%s", n);
}

static int systems_find(const systems_t *s, const char *name, int fallback)
{
    for (int k = 0; k < s->n; k++)
        if (!strcmp(s->names[k], name))
            return k;
    return fallback;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Distinct GPU counts, ascending, into gpus (caller frees). */
static int distinct_gpus(const rep_row_t *r, long n, int **gpus)
{
    int *g = malloc(sizeof *g * (n ? n : 1)), m = 0;
    if (!g)
        return -1;
    for (long i = 0; i < n; i++)
        g[m++] = r[i].gpus;
    qsort(g, m, sizeof *g, cmp_int);
    int u = 0;
    for (int i = 0; i < m; i++)
        if (!u || g[u - 1] != g[i])
            g[u++] = g[i];
    *gpus = g;
    return u;
}

static const rep_row_t *find_row(const rep_row_t *r, long n, int system, int gpus)
{
    for (long i = 0; i < n; i++)
        if (r[i].system == system && r[i].gpus == gpus)
            return &r[i];
    return NULL;
}

/* Columns: gpus batch, then per system k (k = 0..nsys-1) paper closed sim
 * MFU in percent at 3+3k..5+3k, then (with_iter) per system paper closed
 * sim iteration seconds at 3+3*nsys+3k... */
static void write_wide_line(FILE *fp, const rep_row_t *r, long n, int nsys, int gpus, int with_iter)
{
    const rep_row_t *first = NULL;
    for (int k = 0; k < nsys && !first; k++)
        first = find_row(r, n, k, gpus);
    fprintf(fp, "%d", gpus);
    put_val(fp, with_iter && first, first ? first->batch : 0);
    for (int k = 0; k < nsys; k++) {
        const rep_row_t *x = find_row(r, n, k, gpus);
        put_val(fp, !!x, x ? 100 * x->paper_mfu : 0);
        put_val(fp, !!x, x ? 100 * x->closed_mfu : 0);
        put_val(fp, !!x, x ? 100 * x->sim_mfu : 0);
    }
    for (int k = 0; with_iter && k < nsys; k++) {
        const rep_row_t *x = find_row(r, n, k, gpus);
        put_val(fp, !!x, x ? x->paper_iter_s : 0);
        put_val(fp, !!x, x ? x->closed_iter_s : 0);
        put_val(fp, !!x, x ? x->sim_iter_s : 0);
    }
    fputc('\n', fp);
}

/* MegaScale over Megatron-LM at the largest GPU count that has both: the
 * paper's 1.34x at 12,288 GPUs and ours, for the annotation. */
static void gap_vars(plot_fig_t *f, const rep_row_t *r, long n, const systems_t *s, const int *gpus, int ng)
{
    int lo = systems_find(s, "megatron-lm", 0), hi = systems_find(s, "megascale", 1);
    for (int i = ng - 1; i >= 0; i--) {
        const rep_row_t *a = find_row(r, n, lo, gpus[i]), *b = find_row(r, n, hi, gpus[i]);
        if (!a || !b || !(a->paper_mfu > 0) || !isfinite(b->paper_mfu))
            continue;
        var_num(f, "gap_x", gpus[i]);
        var_num(f, "gap_lo", 100 * a->paper_mfu);
        var_num(f, "gap_hi", 100 * b->paper_mfu);
        var_num(f, "gap_paper", b->paper_mfu / a->paper_mfu);
        var_num(f, "gap_closed", a->closed_mfu > 0 && isfinite(b->closed_mfu) ? b->closed_mfu / a->closed_mfu : 0);
        var_num(f, "gap_sim", a->sim_mfu > 0 && isfinite(b->sim_mfu) ? b->sim_mfu / a->sim_mfu : 0);
        return;
    }
}

/* 1 if any row has a simulated MFU (reproduce --no-sim writes NaN). */
static int has_sim(const rep_row_t *r, long n)
{
    for (long i = 0; i < n; i++)
        if (isfinite(r[i].sim_mfu))
            return 1;
    return 0;
}

static int write_wide(ctx_t *c, const char *fig_name, const char *header, const rep_row_t *r, long n,
                      int with_iter)
{
    systems_t s;
    systems_read(c, &s);
    int nsys = s.n;
    for (long i = 0; i < n; i++) {
        if (r[i].system < 0 || r[i].system >= MAX_SYS) {
            free(s.buf);
            return fail(c, PLOT_BAD_INPUT, "%s row %ld: system %d is not 0 to %d", fig_name, i, r[i].system,
                        MAX_SYS - 1);
        }
        if (r[i].system >= nsys)
            nsys = r[i].system + 1;
    }
    int *gpus = NULL, ng = distinct_gpus(r, n, &gpus);
    plot_fig_t *f = NULL;
    FILE *fp = ng < 0 ? NULL : fig_open(c, fig_name, header, &f);
    int rc = fp ? PLOT_OK : ng < 0 ? fail(c, PLOT_IO_ERROR, "out of memory") : PLOT_IO_ERROR;
    if (fp) {
        fprintf(fp, "# MFU in percent; '?' = no row. columns: gpus batch, then per system (");
        for (int k = 0; k < nsys; k++)
            fprintf(fp, "%s%s", k ? ", " : "", k < s.n ? s.names[k] : "?");
        fprintf(fp, "): paper_mfu closed_mfu sim_mfu%s\n",
                with_iter ? ", then per system: paper_iter_s closed_iter_s sim_iter_s" : "");
        for (int i = 0; i < ng; i++)
            write_wide_line(fp, r, n, nsys, gpus[i], with_iter);
        var_num(f, "nsys", nsys);
        var_num(f, "hassim", has_sim(r, n));
        for (int k = 0; k < nsys; k++) {
            char name[32], label[64];
            snprintf(name, sizeof name, "sysname%d", k + 1);
            systems_label(&s, k, label, sizeof label);
            var_str(f, name, label);
        }
        if (with_iter)
            gap_vars(f, r, n, &s, gpus, ng);
        rc = fig_close(c, f, fp, ng);
    }
    free(gpus);
    free(s.buf);
    return rc;
}

static int fig_table2(ctx_t *c)
{
    void *rows;
    long n;
    int rc = read_table(c, "/table2", table2_cols, 9, sizeof(rep_row_t), &rows, &n);
    if (rc == PLOT_OK && n > 0)
        rc = write_wide(c, "table2-mfu", "Table 2: 175B strong scaling, MFU vs GPUs", rows, n, 1);
    free(rows);
    return rc;
}

static int fig_fig9(ctx_t *c)
{
    void *rows;
    long n;
    int rc = read_table(c, "/fig9", fig9_cols, 5, sizeof(rep_row_t), &rows, &n);
    if (rc == PLOT_OK && n > 0)
        rc = write_wide(c, "fig9-weak-scaling", "Figure 9: 530B weak scaling, MFU", rows, n, 0);
    free(rows);
    return rc;
}

/* ---- reproduce: /table3 ---------------------------------------------- */

/* Columns: row paper closed sim (MFU in percent) "label". */
static int fig_table3(ctx_t *c)
{
    void *v;
    long n;
    int rc = read_table(c, "/table3", table3_cols, 4, sizeof(rep_row_t), &v, &n);
    if (rc != PLOT_OK || n <= 0) {
        free(v);
        return rc;
    }
    const rep_row_t *r = v;
    char *adds = plot_attr_str(c->file, "/table3", "adds"), *labels[64];
    int nl = adds ? split(adds, '|', labels, 64) : 0;
    plot_fig_t *f;
    FILE *fp = fig_open(c, "table3-ablation", "Table 3: 175B ablation on 256 GPUs, cumulative", &f);
    if (fp) {
        fprintf(fp, "# MFU in percent. columns: row paper_mfu closed_mfu sim_mfu \"what the row adds\"\n");
        for (long i = 0; i < n; i++) {
            int k = r[i].row - 1; /* rows count from 1 in the paper; else take the order */
            const char *l = k >= 0 && k < nl ? labels[k] : i < nl ? labels[i] : "";
            fprintf(fp, "%d", r[i].row);
            put_val(fp, 1, 100 * r[i].paper_mfu);
            put_val(fp, 1, 100 * r[i].closed_mfu);
            put_val(fp, 1, 100 * r[i].sim_mfu);
            fprintf(fp, " \"");
            for (const char *p = l; *p; p++)
                fputc(*p == '"' ? '\'' : *p, fp);
            fprintf(fp, "%s\"\n", *l ? "" : "row");
        }
        var_num(f, "hassim", has_sim(r, n));
        rc = fig_close(c, f, fp, n);
    } else {
        rc = PLOT_IO_ERROR;
    }
    free(adds);
    free(v);
    return rc;
}

/* ---- simulation: the job in one line -------------------------------- */

/* root[sec][key] as a number, def if absent (root may be NULL). */
static double cfg_num(const cJSON *root, const char *sec, const char *key, double def)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, sec);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, key);
    return cJSON_IsNumber(v) ? v->valuedouble : def;
}

static double job_num(const ctx_t *c, const char *sec, const char *key, double def)
{
    return cfg_num(c->config, sec, key, def);
}

static const char *job_str(const ctx_t *c, const char *sec, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c->config, sec), key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static int is_measurement(const ctx_t *c)
{
    return !strcmp(c->set->kind, "measurement");
}

/* "32 GPUs = TP 2 x PP 4 x DP 4, megascale preset, iteration 0.253 s";
 * a measurement says "measured, mean step 0.675 s". */
static void job_line(const ctx_t *c, char *buf, size_t size)
{
    int gpus = (int)job_num(c, "job", "num_gpus", 0), tp = (int)job_num(c, "job", "tensor_model_parallel_size", 1);
    int pp = (int)job_num(c, "job", "pipeline_model_parallel_size", 1);
    double it_s = 0;
    int k = snprintf(buf, size, "%d GPUs = TP %d x PP %d x DP %d, %s preset", gpus, tp, pp,
                     tp > 0 && pp > 0 ? gpus / (tp * pp) : 0, job_str(c, "job", "preset"));
    if (k > 0 && (size_t)k < size && plot_attr_f64(c->file, "/summary", "iteration_time_s", &it_s) == 0)
        snprintf(buf + k, size - k, is_measurement(c) ? ", measured, mean step %.4g s" : ", iteration %.4g s", it_s);
}

/* ---- simulation: /timeline (Gantt) ---------------------------------- */

typedef struct {
    int32_t rank, stream, kind, mb, chunk;
    double t_ready_s, t_start_s, t_end_s;
    int32_t iteration; /* measurements record several; read only for them */
} op_row_t;

#define OC(f, i) {#f, offsetof(op_row_t, f), i}
static const plot_col_t op_cols[] = {OC(rank, 1),      OC(stream, 1),      OC(kind, 1),
                                     OC(mb, 1),        OC(chunk, 1),       OC(t_ready_s, 0),
                                     OC(t_start_s, 0), OC(t_end_s, 0),     OC(iteration, 1)};

typedef struct {
    char *stream_buf, *kind_buf, *streams[MAX_NAMES], *kinds[MAX_NAMES];
    int nstreams, nkinds;
} names_t;

static void names_read(ctx_t *c, names_t *nm)
{
    nm->stream_buf = plot_attr_str(c->file, "/timeline", "stream_names");
    nm->kind_buf = plot_attr_str(c->file, "/timeline", "kind_names");
    nm->nstreams = nm->stream_buf ? split(nm->stream_buf, ',', nm->streams, MAX_NAMES) : 0;
    nm->nkinds = nm->kind_buf ? split(nm->kind_buf, ',', nm->kinds, MAX_NAMES) : 0;
}

/* Lanes top to bottom: for each traced rank (ascending), one per stream;
 * a blank lane between ranks. y = rank_index * (nstreams + 1) + stream. */
static void timeline_vars(plot_fig_t *f, const names_t *nm, int nstreams, const int *ranks, int nranks,
                          const int *kind_seen, const op_row_t *r, long n)
{
    char ytics[PLOT_VARS_LEN / 2] = "set ytics (", kinds[1024] = "", ids[256] = "";
    size_t k = strlen(ytics);
    for (int i = 0; i < nranks; i++)
        for (int s = 0; s < nstreams; s++)
            k += snprintf(ytics + k, k < sizeof ytics ? sizeof ytics - k : 0, "%s\"rank %d %s\" %d",
                          i || s ? ", " : "", ranks[i], s < nm->nstreams ? nm->streams[s] : "?",
                          i * (nstreams + 1) + s);
    if (k + 2 < sizeof ytics)
        strcat(ytics, ")");
    else
        snprintf(ytics, sizeof ytics, "set ytics autofreq");
    for (int i = 0; i < MAX_NAMES; i++) {
        if (!kind_seen[i])
            continue;
        char name[64];
        snprintf(name, sizeof name, "%s", i < nm->nkinds ? nm->kinds[i] : "op");
        for (char *p = name; *p; p++)
            if (*p == ' ')
                *p = '_';
        size_t a = strlen(kinds), b = strlen(ids);
        snprintf(kinds + a, sizeof kinds - a, "%s%s", a ? " " : "", name);
        snprintf(ids + b, sizeof ids - b, "%s%d", b ? " " : "", i);
    }
    int wait = 0;
    double t_end = 0;
    for (long i = 0; i < n; i++) {
        wait |= r[i].t_start_s > r[i].t_ready_s;
        if (r[i].t_end_s > t_end)
            t_end = r[i].t_end_s;
    }
    var_str(f, "ytics_cmd", ytics);
    var_str(f, "kinds", kinds);
    var_str(f, "kindids", ids);
    var_num(f, "nlanes", nranks * (nstreams + 1) - 1);
    var_num(f, "nranks", nranks);
    var_num(f, "haswait", wait);
    var_num(f, "t_end", t_end);
}

static int rank_index(const int *ranks, int n, int rank)
{
    for (int i = 0; i < n; i++)
        if (ranks[i] == rank)
            return i;
    return -1;
}

/* Columns: y rank stream kind mb chunk t_ready_s t_start_s t_end_s.
 * step > 0: a measurement's step (its last), named in the subtitle. */
static int write_timeline(ctx_t *c, const op_row_t *r, long n, int step)
{
    names_t nm;
    names_read(c, &nm);
    int nstreams = nm.nstreams, kind_seen[MAX_NAMES] = {0}, *ranks = malloc(sizeof(int) * n), nranks = 0;
    if (!ranks)
        return fail(c, PLOT_IO_ERROR, "out of memory");
    for (long i = 0; i < n; i++) {
        if (r[i].stream >= nstreams)
            nstreams = r[i].stream + 1;
        if (r[i].kind >= 0 && r[i].kind < MAX_NAMES)
            kind_seen[r[i].kind] = 1;
        ranks[nranks++] = r[i].rank;
    }
    qsort(ranks, nranks, sizeof *ranks, cmp_int);
    int u = 0;
    for (int i = 0; i < nranks; i++)
        if (!u || ranks[u - 1] != ranks[i])
            ranks[u++] = ranks[i];
    nranks = u;
    plot_fig_t *f;
    FILE *fp = fig_open(c, "timeline", "pipeline timeline of the traced ranks (/timeline)", &f);
    int rc = PLOT_IO_ERROR;
    if (fp) {
        fprintf(fp, "# seconds from the iteration start. columns: y rank stream kind mb chunk t_ready_s t_start_s "
                    "t_end_s (y: lane, rank_index * (streams + 1) + stream)\n");
        for (long i = 0; i < n; i++)
            fprintf(fp, "%d %d %d %d %d %d %.9f %.9f %.9f\n",
                    rank_index(ranks, nranks, r[i].rank) * (nstreams + 1) + r[i].stream, r[i].rank, r[i].stream,
                    r[i].kind, r[i].mb, r[i].chunk, r[i].t_ready_s, r[i].t_start_s, r[i].t_end_s);
        char line[512];
        job_line(c, line, sizeof line);
        if (step > 0) {
            size_t k = strlen(line);
            snprintf(line + k, sizeof line - k, "; timeline of step %d", step);
        }
        var_str(f, "subtitle", line);
        timeline_vars(f, &nm, nstreams, ranks, nranks, kind_seen, r, n);
        rc = fig_close(c, f, fp, n);
    }
    free(ranks);
    free(nm.stream_buf);
    free(nm.kind_buf);
    return rc;
}

/* A measurement's timeline holds every iteration (times from each one's
 * start): keep the last one's rows, in place; its number in *iter. */
static long last_iteration(op_row_t *r, long n, int *iter)
{
    *iter = 0;
    for (long i = 0; i < n; i++)
        if (r[i].iteration > *iter)
            *iter = r[i].iteration;
    long m = 0;
    for (long i = 0; i < n; i++)
        if (r[i].iteration == *iter)
            r[m++] = r[i];
    return m;
}

static int fig_timeline(ctx_t *c)
{
    void *rows;
    long n;
    int per_iter = is_measurement(c) && plot_has_column(c->file, "/timeline", "iteration"), iter = 0;
    int rc = read_table(c, "/timeline", op_cols, per_iter ? 9 : 8, sizeof(op_row_t), &rows, &n);
    if (rc == PLOT_OK && per_iter)
        n = last_iteration(rows, n, &iter);
    for (long i = 0; rc == PLOT_OK && i < n; i++) {
        const op_row_t *o = (const op_row_t *)rows + i;
        if (o->stream < 0 || o->stream >= MAX_NAMES || o->rank < 0)
            rc = fail(c, PLOT_BAD_INPUT, "/timeline row %ld: rank %d stream %d out of range", i, o->rank,
                      o->stream);
    }
    if (rc == PLOT_OK && n > 0)
        rc = write_timeline(c, rows, n, per_iter ? iter + 1 : 0);
    free(rows);
    return rc;
}

/* ---- simulation: /ranks (heat map) ---------------------------------- */

typedef struct {
    int32_t rank, stands_for;
    double compute_s, end_s;
} rank_row_t;

#define KC(f, i) {#f, offsetof(rank_row_t, f), i}
static const plot_col_t rank_cols[] = {KC(rank, 1), KC(stands_for, 1), KC(compute_s, 0), KC(end_s, 0)};

/* The injected --slow-rank factor of `rank` (recorded in config_json's
 * "simulate" section), 1 if none. */
static double slow_factor(const ctx_t *c, int rank)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", job_str(c, "simulate", "slow_rank"));
    char *items[256];
    int n = buf[0] ? split(buf, ',', items, 256) : 0;
    for (int i = 0; i < n; i++) {
        char *colon = strchr(items[i], ':');
        if (colon && atoi(items[i]) == rank)
            return atof(colon + 1);
    }
    return 1;
}

/* " --FLAG LIST" for the title, or, when LIST (ID:FACTOR,...) is too long
 * for one title line, " --FLAG: N WHAT x LO to x HI". */
static int injected_list(char *buf, size_t size, const char *flag, const char *list, const char *what)
{
    if (strlen(list) <= 48)
        return snprintf(buf, size, " --%s %s", flag, list);
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", list);
    char *items[256];
    int n = split(copy, ',', items, 256);
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < n; i++) {
        const char *colon = strchr(items[i], ':');
        double f = colon ? atof(colon + 1) : 1;
        lo = fmin(lo, f), hi = fmax(hi, f);
    }
    return snprintf(buf, size, " --%s: %d %s, x%g to x%g", flag, n, what, lo, hi);
}

/* What was injected, for the title. */
static void straggler_line(const ctx_t *c, char *buf, size_t size)
{
    const char *sr = job_str(c, "simulate", "slow_rank"), *sl = job_str(c, "simulate", "slow_link");
    double sh = job_num(c, "simulate", "slow_hosts", 0);
    int k = snprintf(buf, size, "injected:");
    if (sr[0])
        k += injected_list(buf + k, size - k, "slow-rank", sr, "ranks (labelled)");
    if (sl[0] && (size_t)k < size)
        k += injected_list(buf + k, size - k, "slow-link", sl, "links");
    if (sh > 0 && (size_t)k < size)
        k += snprintf(buf + k, size - k, " --slow-hosts %g (x%g, seed %g; not marked)", sh,
                      job_num(c, "simulate", "slow_factor", 1.1), job_num(c, "simulate", "seed", 1));
    if (!sr[0] && !sl[0] && sh <= 0)
        snprintf(buf, size, "no stragglers injected");
}

/* Columns: node gpu compute_s rank slow_factor stands_for end_s; the grid
 * is nodes (x) by GPUs per node (y): rank = node * gpus_per_node + gpu. */
static int write_heatmap(ctx_t *c, const rank_row_t *r, long n)
{
    int gpn = (int)cfg_num(cJSON_GetObjectItemCaseSensitive(c->config, "hardware"), "cluster", "gpus_per_node", 8);
    if (gpn < 1)
        gpn = 8;
    int max_rank = 0, folded = 0;
    for (long i = 0; i < n; i++) {
        if (r[i].rank > max_rank)
            max_rank = r[i].rank;
        folded |= r[i].stands_for > 1;
    }
    int gpus = (int)job_num(c, "job", "num_gpus", max_rank + 1);
    plot_fig_t *f;
    FILE *fp = fig_open(c, "heatmap", "compute time per rank (/ranks)", &f);
    if (!fp)
        return PLOT_IO_ERROR;
    fprintf(fp, "# columns: node gpu compute_s rank slow_factor stands_for end_s (rank = node * %d + gpu)\n", gpn);
    for (long i = 0; i < n; i++)
        fprintf(fp, "%d %d %.9f %d %g %d %.9f\n", r[i].rank / gpn, r[i].rank % gpn, r[i].compute_s, r[i].rank,
                slow_factor(c, r[i].rank), r[i].stands_for, r[i].end_s);
    char line[512], inj[512];
    job_line(c, line, sizeof line);
    straggler_line(c, inj, sizeof inj);
    var_str(f, "subtitle", line);
    var_str(f, "injected", inj);
    var_num(f, "gpn", gpn);
    var_num(f, "nnodes", (gpus > max_rank ? gpus + gpn - 1 : max_rank + gpn) / gpn);
    var_num(f, "folded", folded);
    return fig_close(c, f, fp, n);
}

static int fig_heatmap(ctx_t *c)
{
    void *rows;
    long n;
    int rc = read_table(c, "/ranks", rank_cols, 4, sizeof(rank_row_t), &rows, &n);
    for (long i = 0; rc == PLOT_OK && i < n; i++)
        if (((rank_row_t *)rows)[i].rank < 0)
            rc = fail(c, PLOT_BAD_INPUT, "/ranks row %ld: rank %d is negative", i, ((rank_row_t *)rows)[i].rank);
    if (rc == PLOT_OK && n > 1)
        rc = write_heatmap(c, rows, n);
    free(rows);
    return rc;
}

/* ---- the file -------------------------------------------------------- */

int plot_open_result(const char *path, hid_t *file, char *kind, size_t kind_size, char *err, int errlen)
{
    struct stat st;
    *file = -1;
    if (stat(path, &st) != 0)
        return pfail(err, errlen, path, PLOT_BAD_INPUT, "cannot open the result file (%s)", strerror(errno));
    if (!S_ISREG(st.st_mode))
        return pfail(err, errlen, path, PLOT_BAD_INPUT, "not a regular file");
    if (H5Fis_hdf5(path) <= 0)
        return pfail(err, errlen, path, PLOT_BAD_INPUT, "not an HDF5 file, so not a megasim result file");
    *file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (*file < 0)
        return pfail(err, errlen, path, PLOT_BAD_INPUT, "HDF5 cannot open it");
    char *k = plot_attr_str(*file, "/", "kind");
    if (!k) {
        H5Fclose(*file);
        *file = -1;
        return pfail(err, errlen, path, PLOT_BAD_INPUT, "not a megasim result file (no root attribute 'kind')");
    }
    snprintf(kind, kind_size, "%s", k);
    free(k);
    return PLOT_OK;
}

static int open_result(ctx_t *c)
{
    int rc = plot_open_result(c->path, &c->file, c->set->kind, sizeof c->set->kind, c->err, c->errlen);
    if (rc != PLOT_OK)
        return rc;
    char *cfg = plot_attr_str(c->file, "/", "config_json");
    c->config = cfg ? cJSON_Parse(cfg) : NULL;
    free(cfg);
    return PLOT_OK;
}

int plot_prepare(const char *path, const char *outdir, plot_set_t *set, char *err, int errlen)
{
    memset(set, 0, sizeof *set);
    ctx_t c = {.path = path, .outdir = outdir, .err = err, .errlen = errlen, .file = -1, .set = set};
    H5E_auto2_t old_fn = NULL;
    void *old_data = NULL;
    H5Eget_auto2(H5E_DEFAULT, &old_fn, &old_data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* our message replaces HDF5's error stack */
    int rc = open_result(&c);
    if (rc == PLOT_OK && !strcmp(set->kind, "reproduce")) {
        rc = fig_table2(&c);
        rc = rc ? rc : fig_table3(&c);
        rc = rc ? rc : fig_fig9(&c);
    } else if (rc == PLOT_OK && (!strcmp(set->kind, "simulation") || !strcmp(set->kind, "measurement"))) {
        rc = fig_timeline(&c);
        rc = rc ? rc : fig_heatmap(&c);
    } else if (rc == PLOT_OK) {
        rc = fail(&c, PLOT_BAD_INPUT, "kind '%s' is not one megasim plot draws (simulation, measurement, reproduce)",
                  set->kind);
    }
    if (c.file >= 0)
        H5Fclose(c.file);
    cJSON_Delete(c.config);
    H5Eset_auto2(H5E_DEFAULT, old_fn, old_data);
    return rc;
}
