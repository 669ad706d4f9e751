/* goodput_out: what `megasim goodput` prints and writes: the report, one
 * JSON object (predict's keys and the run's), the HDF5 file (the
 * configuration, that JSON object, the sweep as columns), and the gnuplot
 * figure drawn from goodput_fig.c's data. */
#include "cmd/goodput.h"

#include "cmd/cli.h"
#include "cmd/plot_data.h"
#include "model/report.h"
#include "sim/out.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const design_names[3] = {"tcpstore", "redis", "nobarrier"};
static const char *const load_names[2] = {"one-per-dp-group", "every-rank"};
/* MegaScale section 4 (../shared/megascale-targets.md): collective
 * initialisation, design x {2,048, > 10,000 GPUs}; 0: not reported; the
 * no-barrier figures are upper bounds ("under"). */
static const double paper_init_s[3][2] = {{1047, 0}, {361, 0}, {5, 30}};

static cJSON *pair(double a, double b)
{
    cJSON *p = cJSON_CreateArray();
    cJSON_AddItemToArray(p, cJSON_CreateNumber(a));
    cJSON_AddItemToArray(p, cJSON_CreateNumber(b));
    return p;
}

static cJSON *stats_json(const gp_stats_t *s)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "trials", (double)s->n);
    cJSON_AddNumberToObject(o, "ettr", s->ettr);
    cJSON_AddItemToObject(o, "ettr_ci95", pair(s->ettr_lo, s->ettr_hi));
    cJSON_AddItemToObject(o, "ettr_runs_95", pair(s->runs_lo, s->runs_hi));
    cJSON_AddNumberToObject(o, "wall_days", s->wall_days);
    cJSON_AddNumberToObject(o, "trained_days", s->useful_days);
    cJSON_AddNumberToObject(o, "restarts", s->restarts);
    cJSON *in = cJSON_AddObjectToObject(o, "interruptions"), *lh = cJSON_AddObjectToObject(o, "lost_hours");
    for (int k = 0; k < FAULT_NCAUSES; k++)
        cJSON_AddNumberToObject(in, fault_cause_names[k], s->interruptions[k]);
    for (int k = 0; k < LOST_N; k++)
        cJSON_AddNumberToObject(lh, gp_lost_names[k], s->lost_h[k]);
    return o;
}

/* The configuration: the job, the hardware (its fault model) and the
 * goodput options as given, so --replay gives the same run. */
static cJSON *config_json(const gp_result_t *r)
{
    cJSON *c = report_config_json(&r->job, &r->hw);
    cJSON_AddItemToObject(c, "goodput", opts_to_json(&goodput_opts, &r->o));
    return c;
}

cJSON *gp_json(const gp_result_t *r)
{
    cJSON *o = report_json(&r->job, &r->hw, &r->e);
    cJSON_DeleteItemFromObject(o, "config");
    cJSON *m = stats_json(&r->main);
    /* the main run's statistics at the top level */
    for (cJSON *it = m->child; it; it = it->next)
        cJSON_AddItemToObject(o, it->string, cJSON_Duplicate(it, 1));
    cJSON_Delete(m);
    cJSON_AddNumberToObject(o, "trained_tokens", r->main.useful_days * 86400 * r->e.tokens_per_s);
    cJSON_AddNumberToObject(o, "checkpoint_interval_s", r->interval_s);
    cJSON_AddNumberToObject(o, "best_checkpoint_interval_s", r->best_interval_s);
    cJSON_AddNumberToObject(o, "young_daly_interval_s", r->young_daly_s);
    cJSON_AddNumberToObject(o, "analytic_ettr", r->analytic);
    cJSON_AddNumberToObject(o, "analytic_first_order_ettr", r->first_order);
    cJSON_AddNumberToObject(o, "mtbf_hours", r->rate_per_s > 0 ? 1 / r->rate_per_s / 3600 : INFINITY);
    cJSON_AddNumberToObject(o, "mean_recovery_s", r->down_s);
    cJSON_AddNumberToObject(o, "init_time_s", r->model.cost.init_s);
    cJSON_AddNumberToObject(o, "checkpoint_load_s", r->model.cost.load_s);
    cJSON_AddNumberToObject(o, "checkpoint_stage1_s", r->model.cost.stage1_s);
    cJSON_AddNumberToObject(o, "checkpoint_stage2_s", r->model.cost.stage2_s);
    cJSON_AddNumberToObject(o, "checkpoint_bytes", r->fj.ckpt_unique_bytes);
    cJSON_AddNumberToObject(o, "slow_host_iteration_s", r->slow_iteration_s);
    cJSON_AddNumberToObject(o, "nodes", r->nodes);
    cJSON_AddNumberToObject(o, "spare_nodes", r->o.unlimited_spares ? -1 : r->spares);
    cJSON *sw = cJSON_AddArrayToObject(o, "sweep");
    for (int k = 0; k < GP_SWEEP; k++) {
        cJSON *p = cJSON_CreateObject();
        cJSON_AddNumberToObject(p, "interval_s", r->sweep[k].interval_s);
        cJSON_AddNumberToObject(p, "ettr", r->sweep[k].st.ettr);
        cJSON_AddItemToObject(p, "ettr_ci95", pair(r->sweep[k].st.ettr_lo, r->sweep[k].st.ettr_hi));
        cJSON_AddNumberToObject(p, "analytic_ettr", r->sweep[k].analytic);
        cJSON_AddItemToArray(sw, p);
    }
    cJSON *wi = cJSON_AddObjectToObject(o, "what_if");
    for (int k = 0; k < r->nwhatif; k++)
        cJSON_AddItemToObject(wi, r->whatif[k].name, stats_json(&r->whatif[k].st));
    cJSON *in = cJSON_AddObjectToObject(o, "init_designs");
    for (int d = 0; d < 3; d++) {
        cJSON *x = cJSON_AddObjectToObject(in, design_names[d]);
        cJSON_AddNumberToObject(x, "gpus_2048_s", r->init_s[d][0]);
        cJSON_AddNumberToObject(x, "gpus_12288_s", r->init_s[d][1]);
    }
    cJSON *ld = cJSON_AddObjectToObject(o, "load_designs");
    for (int d = 0; d < 2; d++)
        cJSON_AddNumberToObject(ld, load_names[d], r->load_s[d]);
    cJSON_AddItemToObject(o, "config", config_json(r));
    return o;
}

static void fmt_time(char *b, size_t n, double s)
{
    if (s < 120)
        snprintf(b, n, "%.3g s", s);
    else if (s < 7200)
        snprintf(b, n, "%.3g min", s / 60);
    else
        snprintf(b, n, "%.3g h", s / 3600);
}

void gp_text(const gp_result_t *r)
{
    const job_t *j = &r->job;
    const hw_faults_t *f = &r->hw.faults;
    const fault_costs_t *c = &r->model.cost;
    const gp_stats_t *s = &r->main;
    char a[32], b[32], d[32];
    printf("megasim goodput: %.3gB parameters on %d GPUs (TP %d x PP %d x DP %d), cluster %s, ", r->e.work.params_total / 1e9,
           j->num_gpus, j->tp, j->pp, j->dp, r->hw.cluster.name);
    if (r->o.tokens > 0)
        printf("%.4g tokens to train\n", r->o.tokens);
    else
        printf("%.4g days booked\n", r->train_days);
    printf("%ld trials (seed %d); sweep and what-ifs %d trials each\n\n", s->n, r->o.seed, r->o.sweep_trials);
    printf("healthy iteration %.4g s (closed form), %.4g tokens/s, MFU %.1f%%; one slow host (x%.3g): %.4g s "
           "(simulator, %+.2f%%)\n", r->e.iteration_s, r->e.tokens_per_s, 100 * r->e.mfu, f->slow_host_factor,
           r->slow_iteration_s, 100 * (r->model.slow_ratio - 1));
    double total = 0;
    for (int k = 0; k < FAULT_NRATES; k++)
        total += f->rate[k];
    printf("faults: %.3g per 1000 node-days (x%g) on %d nodes: %.3g a day, MTBF %.3g h; mean recovery %s; "
           "%s spares\n\n", total, r->o.rate_scale, r->nodes, r->rate_per_s * 86400,
           r->rate_per_s > 0 ? 1 / r->rate_per_s / 3600 : INFINITY, (fmt_time(a, sizeof a, r->down_s), a),
           r->o.unlimited_spares ? "unlimited" : (snprintf(b, sizeof b, "%d", r->spares), b));
    printf("ETTR %.2f%%  (95%% CI of the mean %.2f-%.2f%%; 95%% of runs %.2f-%.2f%%)\n", 100 * s->ettr,
           100 * s->ettr_lo, 100 * s->ettr_hi, 100 * s->runs_lo, 100 * s->runs_hi);
    printf("wall clock %.3f days, of which %.3f days of healthy training = %.4g tokens\n", s->wall_days,
           s->useful_days, s->useful_days * 86400 * r->e.tokens_per_s);
    printf("analytic (renewal-reward; spares never short%s): %.2f%%; first order: %.2f%%\n\n",
           r->model.evict_stragglers ? ", slow hosts not counted" : "", 100 * r->analytic, 100 * r->first_order);
    printf("%-12s %14s    %-20s %12s\n", "interruption", "per run", "lost", "hours per run");
    for (int k = 0; k < (int)FAULT_NCAUSES || k < (int)LOST_N; k++) {
        if (k < FAULT_NCAUSES)
            printf("%-12s %14.2f    ", fault_cause_names[k], s->interruptions[k]);
        else
            printf("%-12s %14s    ", "", "");
        if (k < LOST_N)
            printf("%-20s %12.2f", gp_lost_names[k], s->lost_h[k]);
        printf("\n");
    }
    printf("%-12s %14.2f\n\n", "all", s->restarts);
    fmt_time(a, sizeof a, r->interval_s), fmt_time(b, sizeof b, r->best_interval_s);
    fmt_time(d, sizeof d, r->young_daly_s);
    printf("checkpoint every %s of training%s: stage one %.3g s (stalls), stage two %.3g s (behind training), "
           "%.3g TB\n", a, r->o.interval_s > 0 ? "" : " (the sweep's best)", c->stage1_s, c->stage2_s,
           r->fj.ckpt_unique_bytes / 1e12);
    printf("best interval %s (sweep of %d intervals); Young/Daly sqrt(2 x stall x MTBF) %s\n", b, GP_SWEEP, d);
    char t[3][32];
    fmt_time(t[0], sizeof t[0], f->error_report_s), fmt_time(t[1], sizeof t[1], f->heartbeat_interval_s * f->heartbeat_missed);
    fmt_time(t[2], sizeof t[2], f->straggler_detect_s);
    printf("restart path: detection %s (error) / %s (heartbeat) / %s (straggler); self-check %.3g s; "
           "evict %.3g s; relaunch %.3g s; init %.3g s (%s); load %.3g s (%s)\n\n", t[0], t[1], t[2], f->selfcheck_s,
           f->evict_s, f->relaunch_s, c->init_s, design_names[f->init_design], c->load_s, load_names[f->ckpt_load]);
    printf("what if (%d trials each)       ETTR      wall days  restarts\n", r->o.sweep_trials);
    for (int k = 0; k < r->nwhatif; k++)
        printf("  %-26s %6.2f%%   %9.3f  %8.1f\n", r->whatif[k].name, 100 * r->whatif[k].st.ettr,
               r->whatif[k].st.wall_days, r->whatif[k].st.restarts);
    printf("\ncollective initialisation, TP %d x PP %d     2,048 GPUs    12,288 GPUs   MegaScale (section 4)\n",
           j->tp, j->pp);
    for (int d2 = 0; d2 < 3; d2++) {
        printf("  %-38s %9.4g s  %11.4g s   ", design_names[d2], r->init_s[d2][0], r->init_s[d2][1]);
        if (d2 < 2)
            printf("%g s at 2,048\n", paper_init_s[d2][0]);
        else
            printf("under %g s at 2,048, under %g s above 10,000\n", paper_init_s[d2][0], paper_init_s[d2][1]);
    }
    printf("checkpoint load at %d GPUs: one reader per DP group %.3g s, every rank %.3g s\n", j->num_gpus,
           r->load_s[0], r->load_s[1]);
}

/* ---- files ---------------------------------------------------------------- */

int gp_write_h5(const gp_result_t *r, const char *path, char *err)
{
    cJSON *sum = gp_json(r); /* its "config" is the file's configuration */
    char *config = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(sum, "config"));
    char *summary = cJSON_PrintUnformatted(sum);
    double cols[5][GP_SWEEP];
    for (int k = 0; k < GP_SWEEP; k++) {
        cols[0][k] = r->sweep[k].interval_s, cols[1][k] = r->sweep[k].st.ettr;
        cols[2][k] = r->sweep[k].st.ettr_lo, cols[3][k] = r->sweep[k].st.ettr_hi;
        cols[4][k] = r->sweep[k].analytic;
    }
    static const char *const names[5] = {"interval_s", "ettr", "ettr_lo", "ettr_hi", "analytic_ettr"};
    out_h5_t w;
    int rc = !config || !summary ? -1 : out_h5_create(&w, path, err, OPT_ERR_LEN);
    if (!rc) {
        rc = out_h5_attr_str(&w, w.file, "megasim_version", MEGASIM_VERSION) ||
             out_h5_attr_str(&w, w.file, "kind", "goodput") || out_h5_attr_str(&w, w.file, "config_json", config) ||
             out_h5_attr_str(&w, w.file, "summary_json", summary);
        hid_t g = rc ? -1 : out_h5_group(&w, w.file, "sweep");
        rc = rc || g < 0;
        for (int k = 0; !rc && k < 5; k++)
            rc = out_h5_column(&w, g, names[k], cols[k], GP_SWEEP);
        if (g >= 0)
            H5Gclose(g);
        rc = out_h5_close(&w, rc ? -1 : 0);
    } else if (!config || !summary) {
        snprintf(err, OPT_ERR_LEN, "%s: out of memory for the configuration", path);
    }
    cJSON_free(config);
    cJSON_free(summary);
    cJSON_Delete(sum);
    if (!rc)
        fprintf(stderr, "wrote %s\n", path);
    return rc ? -1 : 0;
}

int gp_write_plot(const gp_result_t *r, const char *prefix, char *err)
{
    static plot_fig_t fig;
    char script[1100], out[1100];
    if (gp_plot_fig(r, prefix, &fig, err))
        return -1;
    fprintf(stderr, "wrote %s and %s-lost.dat\n", fig.dat, prefix);
    char gnuplot[4096];
    if (!plot_find_gnuplot(gnuplot, sizeof gnuplot)) {
        fprintf(stderr, "megasim goodput: gnuplot not found: data written; install gnuplot-nox to draw\n");
        return 0;
    }
    snprintf(script, sizeof script, "%s/goodput.gp", r->o.plots_dir);
    int failures = 0;
    static const char *const exts[] = {"png", "svg"};
    for (int e = 0; e < 2; e++) {
        snprintf(out, sizeof out, "%s.%s", prefix, exts[e]);
        failures += plot_draw("goodput", gnuplot, script, &fig, out);
    }
    if (failures)
        snprintf(err, OPT_ERR_LEN, "gnuplot failed to draw %.400s (the data are in %.400s and %.400s-lost.dat)", prefix,
                 fig.dat, prefix);
    return failures ? -1 : 0;
}
