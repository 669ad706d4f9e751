/* plot_data: a megasim result file (HDF5) to the .dat files and gnuplot
 * variables of its figures. See cmd/plot_data.h for which file yields
 * which figure and docs/schema.md for the simulation layout.
 *
 * Columns are read by name (HDF5 converts a file compound to a memory
 * compound member by member), so a writer may add columns or reorder them;
 * a missing column is bad input naming the dataset and the column. */
#include "cmd/plot_int.h"
#include "cmd/cli.h"
#include "cmd/goodput.h"

#include <cjson/cJSON.h>
#include <errno.h>
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

int plot_fail(plot_ctx_t *c, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int plot_fail(plot_ctx_t *c, int rc, const char *fmt, ...)
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
void plot_var_num(plot_fig_t *f, const char *name, double v)
{
    size_t k = strlen(f->vars);
    snprintf(f->vars + k, sizeof f->vars - k, "%s=%.10g; ", name, v);
}

void plot_var_str(plot_fig_t *f, const char *name, const char *v)
{
    size_t k = strlen(f->vars);
    snprintf(f->vars + k, sizeof f->vars - k, "%s=", name);
    plot_gp_quote(f->vars, sizeof f->vars, v);
    k = strlen(f->vars);
    snprintf(f->vars + k, sizeof f->vars - k, "; ");
}

/* Opens OUTDIR/NAME.dat for a new figure; header is its first comment. */
FILE *plot_fig_open(plot_ctx_t *c, const char *name, const char *header, plot_fig_t **out)
{
    if (c->set->nfigs == PLOT_MAX_FIGS) {
        plot_fail(c, PLOT_IO_ERROR, "more than %d figures", PLOT_MAX_FIGS);
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
int plot_fig_close(plot_ctx_t *c, plot_fig_t *f, FILE *fp, long rows)
{
    if (fp != c->dat.f || out_close(&c->dat, 0))
        return PLOT_IO_ERROR;
    f->rows = rows;
    c->set->nfigs++;
    return PLOT_OK;
}

/* A value, or '?' (gnuplot: set datafile missing '?') when absent or not
 * finite (megasim reproduce --no-sim writes NaN for the simulator). */
static void plot_put_val(FILE *fp, int have, double v)
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
int plot_split(char *s, char sep, char **names, int max)
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

int plot_ctx_table(plot_ctx_t *c, const char *name, const plot_col_t *cols, int ncols, size_t row_size, void **rows,
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
static void systems_read(plot_ctx_t *c, systems_t *s)
{
    s->buf = plot_attr_str(c->file, "/", "system_names");
    s->n = s->buf ? plot_split(s->buf, ',', s->names, MAX_SYS) : 0;
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

int plot_cmp_int(const void *a, const void *b)
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
    qsort(g, m, sizeof *g, plot_cmp_int);
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
    plot_put_val(fp, with_iter && first, first ? first->batch : 0);
    for (int k = 0; k < nsys; k++) {
        const rep_row_t *x = find_row(r, n, k, gpus);
        plot_put_val(fp, !!x, x ? 100 * x->paper_mfu : 0);
        plot_put_val(fp, !!x, x ? 100 * x->closed_mfu : 0);
        plot_put_val(fp, !!x, x ? 100 * x->sim_mfu : 0);
    }
    for (int k = 0; with_iter && k < nsys; k++) {
        const rep_row_t *x = find_row(r, n, k, gpus);
        plot_put_val(fp, !!x, x ? x->paper_iter_s : 0);
        plot_put_val(fp, !!x, x ? x->closed_iter_s : 0);
        plot_put_val(fp, !!x, x ? x->sim_iter_s : 0);
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
        plot_var_num(f, "gap_x", gpus[i]);
        plot_var_num(f, "gap_lo", 100 * a->paper_mfu);
        plot_var_num(f, "gap_hi", 100 * b->paper_mfu);
        plot_var_num(f, "gap_paper", b->paper_mfu / a->paper_mfu);
        plot_var_num(f, "gap_closed", a->closed_mfu > 0 && isfinite(b->closed_mfu) ? b->closed_mfu / a->closed_mfu : 0);
        plot_var_num(f, "gap_sim", a->sim_mfu > 0 && isfinite(b->sim_mfu) ? b->sim_mfu / a->sim_mfu : 0);
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

static int write_wide(plot_ctx_t *c, const char *fig_name, const char *header, const rep_row_t *r, long n,
                      int with_iter)
{
    systems_t s;
    systems_read(c, &s);
    int nsys = s.n;
    for (long i = 0; i < n; i++) {
        if (r[i].system < 0 || r[i].system >= MAX_SYS) {
            free(s.buf);
            return plot_fail(c, PLOT_BAD_INPUT, "%s row %ld: system %d is not 0 to %d", fig_name, i, r[i].system,
                        MAX_SYS - 1);
        }
        if (r[i].gpus < 1 || r[i].gpus >= PLOT_MAX_RANK) {
            free(s.buf);
            return plot_fail(c, PLOT_BAD_INPUT, "%s row %ld: gpus = %d is not 1 to %d", fig_name, i, r[i].gpus,
                             PLOT_MAX_RANK - 1);
        }
        if (r[i].system >= nsys)
            nsys = r[i].system + 1;
    }
    int *gpus = NULL, ng = distinct_gpus(r, n, &gpus);
    plot_fig_t *f = NULL;
    FILE *fp = ng < 0 ? NULL : plot_fig_open(c, fig_name, header, &f);
    int rc = fp ? PLOT_OK : ng < 0 ? plot_fail(c, PLOT_IO_ERROR, "out of memory") : PLOT_IO_ERROR;
    if (fp) {
        fprintf(fp, "# MFU in percent; '?' = no row. columns: gpus batch, then per system (");
        for (int k = 0; k < nsys; k++)
            fprintf(fp, "%s%s", k ? ", " : "", k < s.n ? s.names[k] : "?");
        fprintf(fp, "): paper_mfu closed_mfu sim_mfu%s\n",
                with_iter ? ", then per system: paper_iter_s closed_iter_s sim_iter_s" : "");
        for (int i = 0; i < ng; i++)
            write_wide_line(fp, r, n, nsys, gpus[i], with_iter);
        plot_var_num(f, "nsys", nsys);
        plot_var_num(f, "hassim", has_sim(r, n));
        for (int k = 0; k < nsys; k++) {
            char name[32], label[64];
            snprintf(name, sizeof name, "sysname%d", k + 1);
            systems_label(&s, k, label, sizeof label);
            plot_var_str(f, name, label);
        }
        if (with_iter)
            gap_vars(f, r, n, &s, gpus, ng);
        rc = plot_fig_close(c, f, fp, ng);
    }
    free(gpus);
    free(s.buf);
    return rc;
}

static int fig_table2(plot_ctx_t *c)
{
    void *rows;
    long n;
    int rc = plot_ctx_table(c, "/table2", table2_cols, 9, sizeof(rep_row_t), &rows, &n);
    if (rc == PLOT_OK && n > 0)
        rc = write_wide(c, "table2-mfu", "Table 2: 175B strong scaling, MFU vs GPUs", rows, n, 1);
    free(rows);
    return rc;
}

static int fig_fig9(plot_ctx_t *c)
{
    void *rows;
    long n;
    int rc = plot_ctx_table(c, "/fig9", fig9_cols, 5, sizeof(rep_row_t), &rows, &n);
    if (rc == PLOT_OK && n > 0)
        rc = write_wide(c, "fig9-weak-scaling", "Figure 9: 530B weak scaling, MFU", rows, n, 0);
    free(rows);
    return rc;
}

/* ---- reproduce: /table3 ---------------------------------------------- */

/* Columns: row paper closed sim (MFU in percent) "label". */
static int fig_table3(plot_ctx_t *c)
{
    void *v;
    long n;
    int rc = plot_ctx_table(c, "/table3", table3_cols, 4, sizeof(rep_row_t), &v, &n);
    if (rc != PLOT_OK || n <= 0) {
        free(v);
        return rc;
    }
    const rep_row_t *r = v;
    char *adds = plot_attr_str(c->file, "/table3", "adds"), *labels[64];
    int nl = adds ? plot_split(adds, '|', labels, 64) : 0;
    plot_fig_t *f;
    FILE *fp = plot_fig_open(c, "table3-ablation", "Table 3: 175B ablation on 256 GPUs, cumulative", &f);
    if (fp) {
        fprintf(fp, "# MFU in percent. columns: row paper_mfu closed_mfu sim_mfu \"what the row adds\"\n");
        for (long i = 0; i < n; i++) {
            long k = (long)r[i].row - 1; /* rows count from 1 in the paper; else take the order (F08: INT_MIN) */
            const char *l = k >= 0 && k < nl ? labels[k] : i < nl ? labels[i] : "";
            fprintf(fp, "%d", r[i].row);
            plot_put_val(fp, 1, 100 * r[i].paper_mfu);
            plot_put_val(fp, 1, 100 * r[i].closed_mfu);
            plot_put_val(fp, 1, 100 * r[i].sim_mfu);
            fprintf(fp, " \"");
            for (const char *p = l; *p; p++)
                fputc(*p == '"' ? '\'' : *p, fp);
            fprintf(fp, "%s\"\n", *l ? "" : "row");
        }
        plot_var_num(f, "hassim", has_sim(r, n));
        rc = plot_fig_close(c, f, fp, n);
    } else {
        rc = PLOT_IO_ERROR;
    }
    free(adds);
    free(v);
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
    char why[1024];
    if (out_h5_vet(path, why, sizeof why)) /* a damaged file costs a child process, not this one */
        return pfail(err, errlen, path, PLOT_BAD_INPUT, "%s", why);
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

/* A goodput file (megasim goodput --out): its figure from the summary it
 * keeps (the sweep, the lost hours), drawn as goodput --plot draws it. */
static int fig_goodput(plot_ctx_t *c)
{
    static gp_result_t r;
    cJSON *sum = NULL;
    char prefix[2048], e[OPT_ERR_LEN];
    if (out_h5_attr_json(c->file, c->path, "summary_json", &sum, c->err, c->errlen))
        return PLOT_BAD_INPUT;
    snprintf(prefix, sizeof prefix, "%s/goodput", c->outdir);
    int rc = PLOT_OK;
    if (gp_from_json(sum, &r, e))
        rc = plot_fail(c, PLOT_BAD_INPUT, "%s", e);
    else if (gp_plot_fig(&r, prefix, &c->set->figs[c->set->nfigs], e))
        rc = plot_fail(c, PLOT_IO_ERROR, "%s", e);
    c->set->nfigs += rc == PLOT_OK;
    cJSON_Delete(sum);
    return rc;
}

static int open_result(plot_ctx_t *c)
{
    int rc = plot_open_result(c->path, &c->file, c->set->kind, sizeof c->set->kind, c->err, c->errlen);
    if (rc != PLOT_OK)
        return rc;
    char ignored[512]; /* without a configuration the figures go untitled */
    if (out_h5_attr_json(c->file, c->path, "config_json", &c->config, ignored, sizeof ignored))
        c->config = NULL;
    return PLOT_OK;
}

int plot_prepare(const char *path, const char *outdir, plot_set_t *set, char *err, int errlen)
{
    memset(set, 0, sizeof *set);
    plot_ctx_t c = {.path = path, .outdir = outdir, .err = err, .errlen = errlen, .file = -1, .set = set};
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
        rc = plot_fig_timeline(&c);
        rc = rc ? rc : plot_fig_heatmap(&c);
    } else if (rc == PLOT_OK && !strcmp(set->kind, "goodput")) {
        rc = fig_goodput(&c);
    } else if (rc == PLOT_OK) {
        rc = plot_fail(&c, PLOT_BAD_INPUT, "kind '%s' is not one megasim plot draws (simulation, measurement, "
                       "reproduce, goodput)", set->kind);
    }
    if (c.file >= 0)
        H5Fclose(c.file);
    cJSON_Delete(c.config);
    H5Eset_auto2(H5E_DEFAULT, old_fn, old_data);
    return rc;
}
