/* goodput_fig: the figure of `megasim goodput` (plots/goodput.gp), its data
 * written from a run (goodput --plot) or read back from the run's file
 * (megasim plot FILE.h5 of kind goodput: the summary it keeps), so both
 * draw the same thing. A file is untrusted: every field its figure uses is
 * checked before use. */
#include "cmd/goodput.h"

#include "cmd/cli.h"
#include "cmd/plot_data.h"
#include "sim/out.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* PREFIX-interval.dat: the sweep (minutes, ETTR %, its interval, the
 * analytic %); PREFIX-lost.dat: lost hours per run (rows: the main run,
 * each what-if) by category (columns, named in its first line). */
static int write_dats(const gp_result_t *r, const char *dat_i, const char *dat_l, char *err)
{
    out_file_t o;
    if (out_open(&o, dat_i, "w", err, OPT_ERR_LEN))
        return -1;
    fprintf(o.f, "# megasim goodput: ETTR against the checkpoint interval\n"
                 "# columns: interval_min ettr_pct ettr_lo_pct ettr_hi_pct analytic_pct\n");
    for (int k = 0; k < GP_SWEEP; k++)
        fprintf(o.f, "%.6g %.6g %.6g %.6g %.6g\n", r->sweep[k].interval_s / 60, 100 * r->sweep[k].st.ettr,
                100 * r->sweep[k].st.ettr_lo, 100 * r->sweep[k].st.ettr_hi, 100 * r->sweep[k].analytic);
    if (out_close(&o, 0) || out_open(&o, dat_l, "w", err, OPT_ERR_LEN))
        return -1;
    fprintf(o.f, "run");
    for (int c = 0; c < LOST_N; c++)
        fprintf(o.f, " %s", gp_lost_names[c]);
    for (int k = -1; k < r->nwhatif; k++) {
        const gp_stats_t *st = k < 0 ? &r->main : &r->whatif[k].st;
        fprintf(o.f, "\n%s", k < 0 ? "main" : r->whatif[k].name);
        for (int c = 0; c < LOST_N; c++)
            fprintf(o.f, " %.6g", st->lost_h[c]);
    }
    fprintf(o.f, "\n");
    return out_close(&o, 0);
}

int gp_plot_fig(const gp_result_t *r, const char *prefix, plot_fig_t *fig, char *err)
{
    char dat_l[1100], title[512];
    memset(fig, 0, sizeof *fig);
    fig->name = "goodput";
    snprintf(fig->dat, sizeof fig->dat, "%s-interval.dat", prefix);
    snprintf(dat_l, sizeof dat_l, "%s-lost.dat", prefix);
    if (write_dats(r, fig->dat, dat_l, err))
        return -1;
    fig->rows = GP_SWEEP;
    snprintf(title, sizeof title, "%d GPUs, TP %d x PP %d x DP %d, %s: ETTR %.2f%%, best interval %.3g min, "
             "Young/Daly %.3g min", r->job.num_gpus, r->job.tp, r->job.pp, r->job.dp, r->hw.cluster.name,
             100 * r->main.ettr, r->best_interval_s / 60, r->young_daly_s / 60);
    snprintf(fig->vars, sizeof fig->vars, "lostfile=");
    plot_gp_quote(fig->vars, sizeof fig->vars, dat_l);
    strncat(fig->vars, "; title_job=", sizeof fig->vars - strlen(fig->vars) - 1);
    plot_gp_quote(fig->vars, sizeof fig->vars, title);
    snprintf(fig->vars + strlen(fig->vars), sizeof fig->vars - strlen(fig->vars), "; chosen_min=%.6g; ncats=%d; ",
             r->interval_s / 60, LOST_N);
    return 0;
}

/* ---- reading a goodput file back (megasim plot) ---------------------------- */

/* o[key] as a number in [lo, hi] into *v; 0, or -1 with err naming it. */
static int field(const cJSON *o, const char *where, const char *key, double lo, double hi, double *v, char *err)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(x) || !(x->valuedouble >= lo && x->valuedouble <= hi)) {
        snprintf(err, OPT_ERR_LEN, "summary_json: %s%s: not a number from %g to %g: a damaged or edited file", where,
                 key, lo, hi);
        return -1;
    }
    *v = x->valuedouble;
    return 0;
}

static int lost_hours(const cJSON *stats, const char *where, double *lost_h, char *err)
{
    const cJSON *lh = cJSON_GetObjectItemCaseSensitive(stats, "lost_hours");
    char w[128];
    snprintf(w, sizeof w, "%slost_hours.", where);
    for (int c = 0; c < LOST_N; c++)
        if (field(lh, w, gp_lost_names[c], 0, 1e9, &lost_h[c], err))
            return -1;
    return 0;
}

int gp_from_json(const cJSON *sum, gp_result_t *r, char *err)
{
    memset(r, 0, sizeof *r);
    const cJSON *sw = cJSON_GetObjectItemCaseSensitive(sum, "sweep"), *wi = cJSON_GetObjectItemCaseSensitive(sum,
                                                                                                          "what_if");
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(sum, "config");
    const cJSON *job = cJSON_GetObjectItemCaseSensitive(cfg, "job");
    const cJSON *cl = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cfg, "hardware"), "cluster");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(cl, "name");
    if (cJSON_GetArraySize(sw) != GP_SWEEP || !cJSON_IsArray(sw) || !cJSON_IsObject(wi) ||
        cJSON_GetArraySize(wi) > GP_WHATIF || !cJSON_IsString(name) ||
        strlen(name->valuestring) >= sizeof r->hw.cluster.name) {
        snprintf(err, OPT_ERR_LEN, "summary_json: not a goodput summary (a %d-point sweep, at most %d what-ifs, the "
                 "cluster's name): a damaged or edited file", GP_SWEEP, GP_WHATIF);
        return -1;
    }
    snprintf(r->hw.cluster.name, sizeof r->hw.cluster.name, "%s", name->valuestring);
    double g, tp, pp, ci[2];
    int k = 0;
    for (const cJSON *p = sw->child; p; p = p->next, k++) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(p, "ettr_ci95");
        for (int i = 0; i < 2; i++)
            ci[i] = cJSON_IsNumber(cJSON_GetArrayItem(c, i)) ? cJSON_GetArrayItem(c, i)->valuedouble : NAN;
        if (field(p, "sweep[].", "interval_s", 1e-3, 1e9, &r->sweep[k].interval_s, err) ||
            field(p, "sweep[].", "ettr", 0, 1, &r->sweep[k].st.ettr, err) ||
            field(p, "sweep[].", "analytic_ettr", 0, 1, &r->sweep[k].analytic, err))
            return -1;
        if (cJSON_GetArraySize(c) != 2 || !(ci[0] >= 0 && ci[0] <= 1 && ci[1] >= 0 && ci[1] <= 1)) {
            snprintf(err, OPT_ERR_LEN, "summary_json: sweep[%d].ettr_ci95: not two numbers from 0 to 1: a damaged or "
                     "edited file", k);
            return -1;
        }
        r->sweep[k].st.ettr_lo = ci[0], r->sweep[k].st.ettr_hi = ci[1];
    }
    for (const cJSON *w = wi->child; w; w = w->next, r->nwhatif++) {
        r->whatif[r->nwhatif].name = w->string;
        if (strlen(w->string) > 64 || strspn(w->string, "abcdefghijklmnopqrstuvwxyz_") != strlen(w->string)) {
            snprintf(err, OPT_ERR_LEN, "summary_json: what_if: a name of letters and _ expected: a damaged or edited "
                     "file");
            return -1;
        }
        if (lost_hours(w, "what_if.", r->whatif[r->nwhatif].st.lost_h, err))
            return -1;
    }
    if (lost_hours(sum, "", r->main.lost_h, err) || field(sum, "", "ettr", 0, 1, &r->main.ettr, err) ||
        field(sum, "", "checkpoint_interval_s", 1e-3, 1e9, &r->interval_s, err) ||
        field(sum, "", "best_checkpoint_interval_s", 1e-3, 1e9, &r->best_interval_s, err) ||
        field(sum, "", "young_daly_interval_s", 1e-3, 1e9, &r->young_daly_s, err) ||
        field(job, "config.job.", "num_gpus", 1, 1e8, &g, err) ||
        field(job, "config.job.", "tensor_model_parallel_size", 1, 1e8, &tp, err) ||
        field(job, "config.job.", "pipeline_model_parallel_size", 1, 1e8, &pp, err))
        return -1;
    r->job.num_gpus = (int)g, r->job.tp = (int)tp, r->job.pp = (int)pp;
    r->job.dp = g / (tp * pp) >= 1 ? (int)(g / (tp * pp)) : 1;
    return 0;
}
