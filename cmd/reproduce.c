/* cmd/reproduce.c: `megasim reproduce [SET]`: runs the closed form and the
 * simulator on every row of MegaScale's Table 2, Table 3 and Figure 9
 * (experiments/megascale/ *.json, each with the paper's value beside it),
 * prints paper vs predicted with the error in MFU points per executor and
 * per set, and writes results/megascale.h5 (kind "reproduce": /table2,
 * /table3, /fig9 and every row's configuration) with CSV beside it.
 *
 * Calibration protocol (experiments/megascale/ASSUMPTIONS.md): by default
 * four numbers of the cluster profile (fit_params: the compute scale, the
 * two Megatron-LM host terms and the NVLink scale) are fitted by least squares to Table 3's
 * nine rows with the closed form; every row of every set is then predicted
 * with them, and the fitted profile is written beside the results. Table
 * 3's errors are fit errors; Table 2's and Figure 9's are prediction
 * errors. --fit none runs the built-in profile as it is. The outputs are
 * written by reproduce_out.c. */
#include "cmd/reproduce.h"

#include "calib/fit.h"
#include "cmd/cli.h"
#include "model/report.h"
#include "sim/engine.h"
#include "sim/out.h"
#include "sim/output.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef MEGASIM_EXPERIMENTS_DIR
#define MEGASIM_EXPERIMENTS_DIR "experiments"
#endif

const char *const set_names[NSETS] = {"table2", "table3", "fig9"};
enum { FIT_TABLE3, FIT_NONE };

/* The parameters fitted on Table 3, with their bounds and starting
 * points: the compute-efficiency scale k (a device between 3x slower and
 * 1.5x faster than its curves say), the two host terms of the
 * Megatron-LM software stack (hw_builtin.c): the GPU idle after each
 * blocking pipeline exchange, and the per-iteration overhead; and the
 * fraction of the NVLink curve the collectives inside a node sustained
 * (bounded as k is; the cost model caps curve x scale at 1). */
const fit_param_t fit_params[NFP] = {
    {"compute_scale", "", "fraction of the GEMM and attention efficiency curves sustained", 0.3, 1.5, 1.0},
    {"host_sync_gap_us", "us", "GPU idle after each blocking pipeline exchange", 0, 2e4, 500},
    {"iteration_overhead_s", "s", "per-iteration host time not broken down into ops", 0, 20, 0.5},
    {"nvlink_scale", "", "fraction of the NVLink efficiency curve sustained by collectives in a node", 0.1, 1.5, 0.9},
};

#define RO(f) offsetof(reproduce_opts_t, f)
static const opt_def reproduce_defs[] = {
    {"set", OPT_STR, RO(set), 1, 16, "all", 0, "reproduce",
     "rows to run: all, table2, table3, fig9, or quick (three rows; also the first argument)"},
    {"experiments", OPT_STR, RO(experiments), 1, 512, MEGASIM_EXPERIMENTS_DIR "/megascale", 0, "reproduce",
     "folder of the row files"},
    {"fit", OPT_ENUM, RO(fit), 0, 0, "table3", "table3|none", "reproduce",
     "table3: fit the compute-efficiency scale, the two Megatron-LM host terms and the NVLink scale to Table 3 "
     "(closed form, least squares), predict every row with them; none: the built-in profile as is"},
    {"out", OPT_STR, RO(out), 1, 512, "results/megascale.h5", 0, "reproduce", "HDF5 result file (CSV beside it)"},
    {"sim", OPT_BOOL, RO(sim), 0, 1, "true", 0, "reproduce", "run the simulator too (--no-sim: closed form only)"},
    {"plot", OPT_BOOL, RO(plot), 0, 1, "true", 0, "reproduce",
     "also simulate a small interleaved pipeline (timeline) and stragglers (heat map), and draw every figure"},
    {"help", OPT_BOOL, RO(help), 0, 1, "false", 0, "reproduce", "show this help"},
};
const opt_table reproduce_opts = {reproduce_defs, sizeof reproduce_defs / sizeof reproduce_defs[0], "reproduce option"};



static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The row files of the chosen set, sorted by name. */
static int list_rows(const char *dir, const char *set, char ***names, int *n, char *err)
{
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, OPT_ERR_LEN, "--experiments %s: cannot open: %s", dir, strerror(errno));
        return -1;
    }
    static const char *quick[] = {"table2-megatron-lm-12288.json", "table2-megascale-12288.json", "table3-row1.json"};
    struct dirent *e;
    *n = 0, *names = NULL;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        int want = len > 5 && !strcmp(e->d_name + len - 5, ".json");
        if (!strcmp(set, "quick")) {
            want = 0;
            for (int i = 0; i < 3; i++)
                want |= !strcmp(e->d_name, quick[i]);
        } else if (strcmp(set, "all")) {
            want &= !strncmp(e->d_name, set, strlen(set)) && e->d_name[strlen(set)] == '-';
        } else {
            want &= !strncmp(e->d_name, "table", 5) || !strncmp(e->d_name, "fig9", 4);
        }
        if (!want)
            continue;
        char **nn = realloc(*names, sizeof(char *) * (*n + 1));
        if (!nn)
            break;
        *names = nn;
        (*names)[(*n)++] = strdup(e->d_name);
    }
    closedir(d);
    if (*n)
        qsort(*names, *n, sizeof(char *), cmp_str);
    return 0;
}

static void free_names(char **names, int n)
{
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* Reads the "paper" object of a row file. */
static int read_paper(const char *path, row_t *row, char *err)
{
    cJSON *root;
    if (opts_read_json_file(path, &root, err))
        return -1;
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "paper");
    const cJSON *set = cJSON_GetObjectItemCaseSensitive(p, "set"), *mfu = cJSON_GetObjectItemCaseSensitive(p, "mfu");
    int rc = 0;
    row->set = -1;
    for (int s = 0; cJSON_IsString(set) && s < NSETS; s++)
        if (!strcmp(set->valuestring, set_names[s]))
            row->set = s;
    if (row->set < 0 || !cJSON_IsNumber(mfu)) {
        snprintf(err, OPT_ERR_LEN, "%s: needs \"paper\": {\"set\": table2|table3|fig9, \"mfu\": number, ...}", path);
        rc = -1;
    } else {
        row->paper_mfu = mfu->valuedouble;
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(p, "iteration_time_s");
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(p, "row"), *adds = cJSON_GetObjectItemCaseSensitive(p, "adds");
        row->paper_iter_s = cJSON_IsNumber(it) ? it->valuedouble : NAN;
        row->row = cJSON_IsNumber(r) ? r->valueint : 0;
        snprintf(row->adds, sizeof row->adds, "%s", cJSON_IsString(adds) ? adds->valuestring : "");
    }
    cJSON_Delete(root);
    return rc;
}

/* Reads a row file: the paper's values, the job and its profile. */
static int load_row(const char *dir, const char *file, row_t *row, char *err)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    snprintf(row->name, sizeof row->name, "%.*s", (int)(strlen(file) - 5), file);
    if (read_paper(path, row, err))
        return -1;
    char *argv[] = {path};
    if (job_parse(&row->job, 1, argv, NULL, NULL, err) || job_hardware(&row->job, &row->hw, err) ||
        job_finalize(&row->job, row->hw.cluster.gpus_per_node, err))
        return -1;
    row->system = row->job.preset == PRESET_MEGASCALE, row->gpus = row->job.num_gpus;
    row->batch = row->job.global_batch_size;
    return 0;
}

/* The row's profile with the fitted parameters applied (p NULL: as is). */
hw_t fitted_hw(const row_t *row, const double *p)
{
    hw_t hw = row->hw;
    if (p) {
        hw.cluster.compute_scale = p[FP_K];
        hw.cluster.host_sync_gap_us = p[FP_GAP];
        hw.cluster.iteration_overhead_s = p[FP_OVERHEAD];
        hw.cluster.nvlink_scale = p[FP_NVL];
    }
    return hw;
}

static double closed_mfu_at(const row_t *row, const double *p)
{
    hw_t hw = fitted_hw(row, p);
    estimate_t e;
    estimate_job(&row->job, &hw, &e);
    return e.mfu;
}

/* calib_fit_params's model: Table 3 row i's MFU in points. */
static double fit_model(const double *p, int i, void *ctx) { return 100 * closed_mfu_at(&((const row_t *)ctx)[i], p); }

static void fit_bounds(double *lo, double *hi)
{
    for (int j = 0; j < NFP; j++)
        lo[j] = fit_params[j].lo, hi[j] = fit_params[j].hi;
}

/* calib_fit_params's model over Table 3's rows but one (skip). */
typedef struct {
    const row_t *rows;
    int skip;
} loo_ctx_t;

static double loo_model(const double *p, int i, void *ctx)
{
    const loo_ctx_t *c = ctx;
    return fit_model(p, i < c->skip ? i : i + 1, (void *)c->rows);
}

/* Leave-one-out over the n fitted rows: each row predicted by the same
 * least squares on the other n - 1, its |error| in points; an estimate of
 * how the fit does on rows it has not seen, at Table 3's scale. */
static void fit_loo(const row_t *rows, const double *target, int n, fit_t *fit)
{
    double p0[NFP], lo[NFP], hi[NFP], sub[64];
    fit_bounds(lo, hi);
    for (int j = 0; j < NFP; j++)
        p0[j] = fit_params[j].start;
    fit->loo_mean = fit->loo_max = NAN;
    for (int r = 0; r < 32; r++)
        fit->loo_mfu[r] = NAN;
    if (n - 1 <= NFP || n > 64)
        return;
    double sum = 0, worst = 0;
    for (int k = 0; k < n; k++) {
        loo_ctx_t c = {rows, k};
        for (int i = 0; i < n - 1; i++)
            sub[i] = target[i < k ? i : i + 1];
        calib_fit_t f = calib_fit_params(loo_model, &c, sub, n - 1, NFP, p0, lo, hi, NULL);
        if (!f.ok)
            return;
        double y = fit_model(f.p, k, (void *)rows), e = fabs(y - target[k]);
        sum += e, worst = fmax(worst, e);
        if (rows[k].row >= 0 && rows[k].row < 32)
            fit->loo_mfu[rows[k].row] = y / 100;
    }
    fit->loo_mean = sum / n, fit->loo_max = worst;
}

/* Fits the parameters to every Table 3 row in dir (whatever set is run). */
static int fit_table3(const char *dir, fit_t *fit, char *err)
{
    char **files;
    int n;
    if (list_rows(dir, "table3", &files, &n, err))
        return -1;
    row_t *rows = calloc(n ? n : 1, sizeof *rows);
    double *target = calloc(n ? n : 1, sizeof *target);
    int rc = rows && target ? 0 : -1;
    for (int i = 0; i < n && !rc; i++) {
        rc = load_row(dir, files[i], &rows[i], err);
        target[i] = 100 * rows[i].paper_mfu;
    }
    if (!rc && n <= NFP) {
        snprintf(err, OPT_ERR_LEN,
                 "--fit table3 needs Table 3's rows (table3-*.json, at least %d for %d parameters) in %s: found %d; "
                 "--fit none runs without them", NFP + 1, NFP, dir, n);
        rc = -1;
    } else if (!rc) {
        double p0[NFP], lo[NFP], hi[NFP];
        fit_bounds(lo, hi);
        for (int j = 0; j < NFP; j++)
            p0[j] = fit_params[j].start;
        fit->f = calib_fit_params(fit_model, rows, target, n, NFP, p0, lo, hi, NULL);
        if (!fit->f.ok) {
            snprintf(err, OPT_ERR_LEN,
                     "--fit table3: the least-squares fit on the %d Table 3 rows in %s did not converge inside the "
                     "bounds (%s %g..%g, %s %g..%g, %s %g..%g, %s %g..%g); --fit none runs without it", n, dir,
                     fit_params[FP_K].name, lo[FP_K], hi[FP_K], fit_params[FP_GAP].name, lo[FP_GAP], hi[FP_GAP],
                     fit_params[FP_OVERHEAD].name, lo[FP_OVERHEAD], hi[FP_OVERHEAD], fit_params[FP_NVL].name,
                     lo[FP_NVL], hi[FP_NVL]);
            rc = -1;
        }
        if (!rc)
            fit_loo(rows, target, n, fit);
    }
    free_names(files, n), free(rows), free(target);
    return rc;
}

/* Runs one loaded row: closed form unfitted and with the fitted parameters
 * (fit off: none), with the fit's standard error of the closed form's MFU
 * (the delta method through the parameters' covariance), simulator with
 * them. */
static int run_row(row_t *row, const fit_t *fit, int sim, char *err)
{
    const double *p = fit->on ? fit->f.p : NULL;
    double lo[NFP], hi[NFP];
    fit_bounds(lo, hi);
    row->datasheet_mfu = closed_mfu_at(row, NULL);
    row->closed_mfu_se = fit->on ? calib_fit_pred_se(&fit->f, fit_model, row, 0, lo, hi) / 100 : NAN;
    hw_t hw = fitted_hw(row, p);
    estimate_t e;
    estimate_job(&row->job, &hw, &e);
    row->closed_mfu = e.mfu, row->closed_iter_s = e.iteration_s;
    row->sim_mfu = row->sim_iter_s = NAN;
    if (sim) {
        static sim_opts_t o = {.fold = 1};
        result_t r;
        if (sim_run(&row->job, &hw, &o, &r, err, OPT_ERR_LEN))
            return -1;
        row->sim_iter_s = r.iteration_ns * 1e-9;
        row->sim_mfu = e.work.model_flops_per_iter / (row->sim_iter_s * row->job.num_gpus * e.peak_flops);
        result_free(&r);
    }
    cJSON *c = report_config_json(&row->job, &hw);
    row->config = cJSON_PrintUnformatted(c);
    cJSON_Delete(c);
    return 0;
}

/* ---- report --------------------------------------------------------- */

static void print_set(const row_t *rows, int n, int set, int sim, const fit_t *fit)
{
    static const char *titles[NSETS] = {"Table 2: 175B strong scaling", "Table 3: ablation, 175B on 256 GPUs",
                                        "Figure 9: 530B weak scaling"};
    double sum[2] = {0, 0}, worst[2] = {0, 0}, ds_sum = 0, ds_worst = 0, se_max = 0;
    int k = 0, signs = 0, signs_ok = 0, n_se = 0, beyond = 0;
    const row_t *prev = NULL;
    for (int i = 0; i < n; i++)
        k += rows[i].set == set;
    if (!k)
        return;
    k = 0;
    printf("\n%s (MFU %%; error = predicted - paper, in points%s)\n", titles[set],
           !fit->on ? "; built-in profile" : set == SET_TABLE3 ? "; FIT: the parameters were fitted to these rows" : "; prediction");
    int loo = set == SET_TABLE3 && fit->on && isfinite(fit->loo_mean);
    printf("  %-26s %6s %6s  %8s %6s  %8s %6s  %6s%s\n", "row", "gpus", "paper", "closed", "error", "sim", "error",
           "fit se", loo ? "     loo  error" : "");
    for (int i = 0; i < n; i++) {
        const row_t *r = &rows[i];
        if (r->set != set)
            continue;
        double ec = 100 * (r->closed_mfu - r->paper_mfu), es = 100 * (r->sim_mfu - r->paper_mfu);
        printf("  %-26s %6d %6.1f  %8.1f %+6.1f", r->name, r->gpus, 100 * r->paper_mfu, 100 * r->closed_mfu, ec);
        if (sim)
            printf("  %8.1f %+6.1f", 100 * r->sim_mfu, es);
        else /* --no-sim: not simulated */
            printf("  %8s %6s", "-", "-");
        if (isfinite(r->closed_mfu_se))
            printf("  %6.2f", 100 * r->closed_mfu_se);
        else
            printf("  %6s", "-");
        double l = loo && r->row >= 0 && r->row < 32 ? fit->loo_mfu[r->row] : NAN;
        if (isfinite(l))
            printf("  %6.1f %+6.1f", 100 * l, 100 * (l - r->paper_mfu));
        putchar('\n');
        sum[0] += fabs(ec), sum[1] += fabs(es), k++;
        n_se += isfinite(r->closed_mfu_se), beyond += fabs(ec) > 3 * 100 * r->closed_mfu_se;
        se_max = fmax(se_max, 100 * r->closed_mfu_se);
        ds_sum += fabs(100 * (r->datasheet_mfu - r->paper_mfu));
        ds_worst = fmax(ds_worst, fabs(100 * (r->datasheet_mfu - r->paper_mfu)));
        worst[0] = fmax(worst[0], fabs(ec)), worst[1] = fmax(worst[1], fabs(es));
        if (set == SET_TABLE3 && prev) { /* each technique's increment, with the paper's sign? */
            double dp = r->paper_mfu - prev->paper_mfu, dm = (sim ? r->sim_mfu - prev->sim_mfu : r->closed_mfu - prev->closed_mfu);
            signs++, signs_ok += (dp > 0) == (dm > 0);
        }
        prev = r;
    }
    if (sim)
        printf("  mean |error| %.2f points (closed form), %.2f (simulator); max %.2f and %.2f\n", sum[0] / k,
               sum[1] / k, worst[0], worst[1]);
    else
        printf("  mean |error| %.2f points (closed form; --no-sim: not simulated); max %.2f\n", sum[0] / k, worst[0]);
    if (fit->on)
        printf("  with the built-in profile (nothing fitted by this run), closed form: mean |error| %.2f, max %.2f\n",
               ds_sum / k, ds_worst);
    if (set == SET_TABLE3 && signs)
        printf("  increments with the paper's sign: %d of %d (%s)\n", signs_ok, signs, sim ? "simulator" : "closed form");
    if (n_se == k && set != SET_TABLE3)
        printf("  fit se: the closed form's standard error from the fitted parameters alone (at most %.2f points); "
               "%d of %d errors exceed 3 of them\n", se_max, beyond, k);
}

static void print_fit(const fit_t *fit)
{
    printf("\nCalibration (ASSUMPTIONS.md): %d parameters fitted by least squares to Table 3's %d rows (closed form; "
           "rms error %.2f points):\n", fit->f.np, fit->f.n, fit->f.rms);
    for (int j = 0; j < NFP; j++)
        printf("  %-22s %10.4g +- %-9.2g %-3s %s\n", fit_params[j].name, fit->f.p[j], fit->f.se[j], fit_params[j].unit,
               fit_params[j].what);
    if (isfinite(fit->loo_mean))
        printf("Leave-one-out on Table 3 (each row predicted by the same fit to the other %d): mean |error| %.2f, "
               "max %.2f points (closed form)\n", fit->f.n - 1, fit->loo_mean, fit->loo_max);
    printf("Table 3 below is a fit; Table 2 and Figure 9 are predictions.\n");
}

/* Issue 4's target over Table 2's 16 and Figure 9's 6 values, simulator
 * (closed form with --no-sim): mean |error| <= 1.0, max <= 2.5 points. */
static void print_target(const row_t *rows, int n, int sim)
{
    double sum = 0, worst = 0;
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (rows[i].set == SET_TABLE3)
            continue;
        double e = fabs(100 * ((sim ? rows[i].sim_mfu : rows[i].closed_mfu) - rows[i].paper_mfu));
        sum += e, worst = fmax(worst, e), k++;
    }
    if (k)
        printf("\nTable 2 + Figure 9 (%d values, %s): mean |error| %.2f points (target <= 1.0), max %.2f (target <= 2.5): "
               "%s\n", k, sim ? "simulator" : "closed form", sum / k, worst,
               sum / k <= 1.0 && worst <= 2.5 ? "met" : "NOT met");
}

int cmd_reproduce(int argc, char **argv)
{
    if (cli_wants_help(argc, argv))
        return 0;
    reproduce_opts_t ro;
    job_t unused;
    char err[OPT_ERR_LEN];
    int shift = argc > 1 && argv[1][0] != '-'; /* megasim reproduce table3 */
    static const char *const sets[] = {"all", "table2", "table3", "fig9", "quick"};
    const int nsets = (int)(sizeof sets / sizeof sets[0]);
    if (job_parse(&unused, argc - 1 - shift, argv + 1 + shift, &reproduce_opts, &ro, err)) {
        for (int i = 0; i < nsets; i++) {
            char what[64];
            snprintf(what, sizeof what, "unexpected argument '%s'", sets[i]);
            if (strstr(err, what)) /* megasim reproduce --no-sim table3 */
                snprintf(err, sizeof err, "the set goes first: megasim reproduce %s [flags] (or --set %s)", sets[i],
                         sets[i]);
        }
        return cli_fail("reproduce", err);
    }
    for (int i = 1 + shift; shift && i < argc; i++)
        if (!strcmp(argv[i], "--set") || !strncmp(argv[i], "--set=", 6)) {
            snprintf(err, sizeof err, "the set is given twice ('%s' and --set); give it once", argv[1]);
            return cli_fail("reproduce", err);
        }
    if (shift)
        snprintf(ro.set, sizeof ro.set, "%s", argv[1]);
    int known = 0;
    for (int i = 0; i < nsets; i++)
        known |= !strcmp(ro.set, sets[i]);
    if (!known) {
        snprintf(err, sizeof err, "set '%s' is not known; choose all, table2, table3, fig9 or quick", ro.set);
        return cli_fail("reproduce", err);
    }
    char **files;
    int n;
    if (list_rows(ro.experiments, ro.set, &files, &n, err))
        return cli_fail("reproduce", err);
    if (!n) {
        snprintf(err, sizeof err, "no row files for set '%s' in %s", ro.set, ro.experiments);
        free_names(files, n);
        return cli_fail("reproduce", err);
    }
    /* A bad --out fails now, before any work or progress output. */
    reproduce_make_parent(ro.out);
    if (!ro.out[0] || out_probe(ro.out, err, sizeof err)) {
        if (!ro.out[0])
            snprintf(err, sizeof err, "--out is empty; give the result file (default results/megascale.h5)");
        free_names(files, n);
        return cli_fail("reproduce", err);
    }
    fit_t fit = {.on = ro.fit == FIT_TABLE3};
    int rc = 0;
    if (fit.on) /* closed form only: a fraction of a second, no progress lines */
        rc = fit_table3(ro.experiments, &fit, err);
    row_t *rows = calloc(n, sizeof *rows);
    rc |= rows ? 0 : -1;
    for (int i = 0; i < n && !rc; i++) {
        fprintf(stderr, "[%d/%d] %s\n", i + 1, n, files[i]);
        rc = load_row(ro.experiments, files[i], &rows[i], err) || run_row(&rows[i], &fit, ro.sim, err);
    }
    if (!rc) {
        if (fit.on)
            print_fit(&fit);
        for (int s = 0; s < NSETS; s++)
            print_set(rows, n, s, ro.sim, &fit);
        print_target(rows, n, ro.sim);
        reproduce_print_bounds(rows, n);
        fflush(stdout); /* the table ahead of the "wrote" lines on stderr, when both go to one pipe */
        rc = reproduce_write(&ro, rows, n, &fit, err);
    }
    for (int i = 0; i < n; i++)
        free(rows ? rows[i].config : NULL);
    free_names(files, n), free(rows);
    return rc ? cli_fail("reproduce", err) : 0;
}
