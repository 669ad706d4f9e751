/* cmd/reproduce_out.c: what `megasim reproduce` leaves behind: the HDF5
 * result (kind "reproduce": /table2, /table3, /fig9, every row's
 * configuration and the fit), a CSV per set beside it, the fitted profile
 * (NAME-profile.json), and the figures: the tables', a small interleaved
 * pipeline's timeline and a straggler heat map, drawn by `megasim plot`. */
#include "cmd/reproduce.h"

#include "model/report.h"
#include "sim/out.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- outputs: HDF5 and CSV ------------------------------------------ */

#define C_I(f) {#f, offsetof(row_t, f), OUT_I32}
#define C_D(f) {#f, offsetof(row_t, f), OUT_F64}
static const out_col_t cols2[] = {C_I(system),        C_I(gpus),          C_I(batch),       C_D(paper_mfu),
                                  C_D(closed_mfu),    C_D(sim_mfu),       C_D(paper_iter_s), C_D(closed_iter_s),
                                  C_D(sim_iter_s),    C_D(datasheet_mfu), C_D(closed_mfu_se)};
static const out_col_t cols3[] = {C_I(row), C_D(paper_mfu), C_D(closed_mfu), C_D(sim_mfu), C_D(datasheet_mfu),
                                  C_D(closed_mfu_se)};
static const out_col_t cols9[] = {C_I(system),  C_I(gpus),          C_D(paper_mfu),    C_D(closed_mfu),
                                  C_D(sim_mfu), C_D(datasheet_mfu), C_D(closed_mfu_se)};
#define NCOLS(a) ((int)(sizeof a / sizeof a[0]))
static const out_table_t set_cols[NSETS] = {{cols2, NCOLS(cols2), sizeof(row_t)},
                                            {cols3, NCOLS(cols3), sizeof(row_t)},
                                            {cols9, NCOLS(cols9), sizeof(row_t)}};

/* The set's rows as one table; Table 3's also carries the rows' labels
 * (what each adds), for the ablation figure. */
static int write_table(out_h5_t *w, const row_t *rows, int n, int set)
{
    row_t *sel = calloc(n > 0 ? n : 1, sizeof *sel);
    int nr = 0;
    char adds[2048] = "";
    for (int i = 0; sel && i < n; i++)
        if (rows[i].set == set) {
            sel[nr++] = rows[i];
            snprintf(adds + strlen(adds), sizeof adds - strlen(adds), "%s%s", adds[0] ? "|" : "", rows[i].adds);
        }
    const char *const attrs[] = {"adds", adds, NULL};
    int rc = !sel ? out_h5_fail(w, "allocate the rows of", set_names[set])
             : nr ? out_h5_table(w, w->file, set_names[set], &set_cols[set], sel, (size_t)nr,
                                 set == SET_TABLE3 ? attrs : NULL)
                  : 0;
    free(sel);
    return rc;
}

/* Every row's configuration, and how the run was asked for. */
static char *config_json(const row_t *rows, int n, const reproduce_opts_t *ro, const fit_t *fit)
{
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "version", MEGASIM_VERSION);
    cJSON_AddItemToObject(c, "reproduce", opts_to_json(&reproduce_opts, ro));
    cJSON *f = cJSON_AddObjectToObject(c, "fit");
    cJSON_AddStringToObject(f, "method", fit->on ? "least squares on Table 3's MFU, closed form (GSL multifit_nlinear)"
                                                 : "none (built-in profile)");
    if (fit->on) {
        cJSON *ps = cJSON_AddObjectToObject(f, "parameters");
        for (int j = 0; j < NFP; j++) {
            cJSON *q = cJSON_AddObjectToObject(ps, fit_params[j].name);
            cJSON_AddStringToObject(q, "what", fit_params[j].what);
            cJSON_AddNumberToObject(q, "value", fit->f.p[j]);
            cJSON_AddNumberToObject(q, "standard_error", fit->f.se[j]);
        }
        cJSON_AddNumberToObject(f, "rows", fit->f.n);
        cJSON_AddNumberToObject(f, "rms_error_points", fit->f.rms);
        if (isfinite(fit->loo_mean)) {
            cJSON_AddNumberToObject(f, "leave_one_out_mean_abs_points", fit->loo_mean);
            cJSON_AddNumberToObject(f, "leave_one_out_max_abs_points", fit->loo_max);
        }
    }
    cJSON *arr = cJSON_AddArrayToObject(c, "rows");
    for (int i = 0; i < n; i++) {
        cJSON *r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "name", rows[i].name);
        cJSON_AddItemToObject(r, "config", cJSON_Parse(rows[i].config));
        cJSON_AddItemToArray(arr, r);
    }
    char *s = cJSON_PrintUnformatted(c);
    cJSON_Delete(c);
    return s;
}

static int write_h5(const char *path, const row_t *rows, int n, const reproduce_opts_t *ro, const fit_t *fit, char *err)
{
    out_h5_t w;
    if (out_h5_create(&w, path, err, OPT_ERR_LEN))
        return -1;
    char *cfg = config_json(rows, n, ro, fit);
    int rc = !cfg ? out_h5_fail(&w, "format", "the configuration as JSON")
                  : out_h5_attr_str(&w, w.file, "megasim_version", MEGASIM_VERSION) ||
                        out_h5_attr_str(&w, w.file, "kind", "reproduce") ||
                        out_h5_attr_str(&w, w.file, "system_names", "megatron-lm,megascale") ||
                        out_h5_attr_str(&w, w.file, "config_json", cfg);
    free(cfg);
    for (int s = 0; s < NSETS && !rc; s++)
        rc = write_table(&w, rows, n, s);
    return out_h5_close(&w, rc ? -1 : 0);
}

/* The path of a file beside the HDF5 result: its name without the
 * extension, then suffix (results/megascale.h5 -> results/megascale-SUFFIX). */
static void beside(const char *h5, const char *suffix, char *path, size_t size)
{
    char base[1024];
    snprintf(base, sizeof base, "%s", h5);
    char *dot = strrchr(base, '.');
    if (dot && !strchr(dot, '/'))
        *dot = 0;
    snprintf(path, size, "%s-%s", base, suffix);
}

/* CSV beside the HDF5 file: NAME-SET.csv, the same columns plus the row name. */
static void csv_rows(FILE *f, const row_t *rows, int n, int s)
{
    const out_table_t *t = &set_cols[s];
    fprintf(f, "name");
    for (int c = 0; c < t->ncols; c++)
        fprintf(f, ",%s", t->cols[c].name);
    fputc('\n', f);
    for (int i = 0; i < n; i++) {
        if (rows[i].set != s)
            continue;
        fprintf(f, "%s", rows[i].name);
        for (int c = 0; c < t->ncols; c++) {
            const char *src = (const char *)&rows[i] + t->cols[c].off;
            if (t->cols[c].type == OUT_I32)
                fprintf(f, ",%d", *(const int *)src);
            else
                fprintf(f, ",%.9g", *(const double *)src);
        }
        fputc('\n', f);
    }
}

static int write_csv(const char *h5, const row_t *rows, int n, char *err)
{
    for (int s = 0; s < NSETS; s++) {
        char path[1100], name[32];
        snprintf(name, sizeof name, "%s.csv", set_names[s]);
        beside(h5, name, path, sizeof path);
        int any = 0;
        for (int i = 0; i < n; i++)
            any |= rows[i].set == s;
        if (!any)
            continue;
        out_file_t o;
        if (out_open(&o, path, "w", err, OPT_ERR_LEN))
            return -1;
        csv_rows(o.f, rows, n, s);
        if (out_close(&o, 0))
            return -1;
        fprintf(stderr, "wrote %s\n", path);
    }
    return 0;
}

int cmd_plot(int argc, char **argv);

/* cmd/simulate.c: `megasim simulate` on FLAGS (split at spaces) and
 * EXTRA (whole arguments), writing only its files; 0 or its exit status. */
int simulate_to_file(const char *flags, int nextra, const char *const *extra);

/* Simulates one job given as flags through `megasim simulate`'s own path
 * and writes its result file (configuration recorded as simulate records
 * it), tracing the given ranks: the timeline and heat-map figures' data. */
static int simulate_to(const char *path, const char *flags, const char *trace, const char *slow, int fold, char *err)
{
    const char *extra[] = {"--out", path, "--trace-ranks", trace, fold ? "--fold" : "--no-fold", "--slow-rank", slow};
    if (simulate_to_file(flags, slow[0] ? 7 : 5, extra)) {
        snprintf(err, OPT_ERR_LEN, "simulating %s failed (see above)", path);
        return -1;
    }
    return 0;
}

/* Two slow hosts (MegaScale's ~10% slower machines) and one slower GPU. */
#define SLOW_FOR_HEATMAP "24:1.1,25:1.1,26:1.1,27:1.1,28:1.1,29:1.1,30:1.1,31:1.1," \
                         "136:1.1,137:1.1,138:1.1,139:1.1,140:1.1,141:1.1,142:1.1,143:1.1,77:1.3"

/* The figures: the tables from the reproduce file, then a timeline of a
 * small interleaved MegaScale pipeline (TP 2 x PP 4 x DP 2, 2 chunks per
 * stage: DP 2 so that the DP stream's gathers and reductions show, hidden
 * 8192 so that the cluster's per-iteration overhead does not dwarf the
 * pipeline; one traced rank per stage) and a per-rank
 * heat map of the 175B job on 256 GPUs (Megatron-LM, unfolded) with two
 * slow hosts and one slow GPU injected. */
static int figures(const char *out, char *err)
{
    char dir[1024], tl[1100], hm[1100];
    const char *slash = strrchr(out, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - out) : 1, slash ? out : ".");
    snprintf(tl, sizeof tl, "%s/timeline.h5", dir);
    snprintf(hm, sizeof hm, "%s/heatmap.h5", dir);
    if (simulate_to(tl, "--preset megascale --num-layers 16 --hidden-size 8192 --num-attention-heads 64 "
                        "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 --num-gpus 16 "
                        "--num-layers-per-virtual-pipeline-stage 2 --global-batch-size 32",
                    "0,4,8,12", "", 1, err) ||
        simulate_to(hm, "--preset megatron-lm --num-gpus 256 --global-batch-size 768 "
                        "--num-layers-per-virtual-pipeline-stage 2",
                    "0", SLOW_FOR_HEATMAP, 0, err))
        return -1;
    const char *files[3] = {out, tl, hm};
    for (int i = 0; i < 3; i++) {
        char *argv[] = {"plot", (char *)files[i]};
        if (cmd_plot(2, argv) == 2) {
            snprintf(err, OPT_ERR_LEN, "drawing %s failed (see above)", files[i]);
            return -1;
        }
    }
    return 0;
}

/* Makes the output file's folder (one level, e.g. results/). */
void reproduce_make_parent(const char *path)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = 0;
        mkdir(dir, 0755);
    }
}

/* The fitted profile beside the results (NAME-profile.json), in the format
 * --hardware reads: the given row's profile with the fit applied (the
 * MegaScale rows all name the same GPU and cluster). */
static int write_profile(const char *h5, const row_t *row, const fit_t *fit, char *err)
{
    char path[1100];
    beside(h5, "profile.json", path, sizeof path);
    hw_t hw = fitted_hw(row, fit->f.p);
    snprintf(hw.cluster.name + strnlen(hw.cluster.name, sizeof hw.cluster.name - 5), 5, "-fit");
    cJSON *j = hw_to_json(&hw), *pv = cJSON_AddObjectToObject(j, "provenance");
    char what[512];
    snprintf(what, sizeof what, "cluster %s with compute_scale = %.4f, host_sync_gap_us = %.0f, "
             "iteration_overhead_s = %.3f and nvlink_scale = %.4f (standard errors %.4f, %.0f, %.3f, %.4f); gpu %s "
             "as built in", row->hw.cluster.name, fit->f.p[FP_K], fit->f.p[FP_GAP], fit->f.p[FP_OVERHEAD],
             fit->f.p[FP_NVL], fit->f.se[FP_K], fit->f.se[FP_GAP], fit->f.se[FP_OVERHEAD], fit->f.se[FP_NVL],
             row->hw.gpu.name);
    cJSON_AddStringToObject(pv, "what", what);
    cJSON_AddStringToObject(pv, "fitted_on", "MegaScale (arXiv 2402.15627) Table 3, closed form, least squares on MFU");
    cJSON_AddStringToObject(pv, "command", "megasim reproduce");
    cJSON_AddStringToObject(pv, "version", MEGASIM_VERSION);
    int rc = out_write_json(path, j, err, OPT_ERR_LEN);
    cJSON_Delete(j);
    if (rc)
        return -1;
    fprintf(stderr, "wrote %s\n", path);
    return 0;
}

int reproduce_write(const reproduce_opts_t *ro, const row_t *rows, int n, const fit_t *fit, char *err)
{
    int rc = write_h5(ro->out, rows, n, ro, fit, err) || write_csv(ro->out, rows, n, err) ||
             (fit->on && write_profile(ro->out, &rows[0], fit, err));
    if (!rc)
        fprintf(stderr, "wrote %s\n", ro->out);
    if (!rc && ro->plot)
        rc = figures(ro->out, err);
    return rc ? -1 : 0;
}
