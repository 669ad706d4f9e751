/* compare_report: `megasim compare`'s report: per step, per op class,
 * per stream and per rank measured vs predicted, and the largest
 * differences named, as text tables or one JSON object. */
#include "cmd/compare.h"

#include "cmd/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- small helpers --------------------------------------------------- */

/* Below this, a time is timer noise or an op that does nothing (a DP
 * collective over one rank): when both sides are, no error is given. */
#define NEGLIGIBLE_S 1e-6

double cmp_err_pct(double measured, double predicted)
{
    if (!(measured > 0) || !isfinite(predicted) || (measured < NEGLIGIBLE_S && fabs(predicted) < NEGLIGIBLE_S))
        return NAN;
    return 100 * (predicted - measured) / measured;
}

/* cJSON number, or null when not finite (no prediction, nothing measured). */
static void add_num(cJSON *o, const char *key, double v)
{
    if (isfinite(v))
        cJSON_AddNumberToObject(o, key, v);
    else
        cJSON_AddNullToObject(o, key);
}

/* "%*.*f" or "-" right-aligned in width w. */
static const char *fmt(char *buf, size_t size, int w, int prec, double v)
{
    if (isfinite(v))
        snprintf(buf, size, "%*.*f", w, prec, v);
    else
        snprintf(buf, size, "%*s", w, "-");
    return buf;
}

/* An error in percent, signed, right-aligned in width w; "-" if none. */
const char *cmp_fmt_pct(char *buf, size_t size, int w, double pct)
{
    if (!isfinite(pct))
        snprintf(buf, size, "%*s", w, "-");
    else if (fabs(pct) < 1e4)
        snprintf(buf, size, "%+*.1f", w, pct);
    else
        snprintf(buf, size, "%+*.2g", w, pct);
    return buf;
}

const char *cmp_kind_name(int k)
{
    return k >= 0 && k < sched_nkinds ? sched_kind_names[k] : "op";
}

/* What an op class is, in words, for the sentences. */
static const char *kind_words(int k)
{
    static const char *const w[] = {"forward passes", "backward passes", "pipeline transfers",
                                    "DP weight all-gathers", "DP gradient reductions", "embedding syncs",
                                    "optimizer steps", "host stalls: data loading", "joins"};
    return k >= 0 && k < (int)(sizeof w / sizeof w[0]) ? w[k] : "ops";
}

/* The device the run measured (recorded beside the run options). */
const char *cmp_device_name(const cmp_t *c)
{
    const char *d = cmp_cfg_str(c->config, "run", "device_name");
    if (!*d)
        d = cmp_cfg_str(c->config, "simulate", "device_name");
    return *d ? d : c->hw.gpu.name;
}


/* ---- largest differences ------------------------------------------------ */

enum { DIFF_KIND, DIFF_STREAM, DIFF_WAIT };

typedef struct {
    int what, index;          /* DIFF_*, kind or stream */
    double measured_s, simulated_s;
} diff_t;

static int diff_cmp(const void *pa, const void *pb)
{
    const diff_t *a = pa, *b = pb;
    double x = fabs(a->simulated_s - a->measured_s), y = fabs(b->simulated_s - b->measured_s);
    return (x < y) - (x > y);
}

/* Candidates, per rank per iteration: each op class's time on the compute
 * stream, the busy time of the other streams (the compute stream's is the
 * sum of its classes) and the compute stream's waiting. Largest first. */
static int differences(const cmp_t *c, diff_t *d)
{
    int n = 0;
    for (int k = 0; k < NKINDS; k++)
        if (cmp_kind_present(c, k))
            d[n++] = (diff_t){DIFF_KIND, k, cmp_per_rank_iter(&c->sm, c->sm.compute_s[k]),
                              cmp_per_rank_iter(&c->ss, c->ss.compute_s[k])};
    for (int s = STREAM_COMPUTE + 1; s < STREAM_COUNT; s++)
        d[n++] = (diff_t){DIFF_STREAM, s, cmp_per_rank_iter(&c->sm, c->sm.busy_s[s]),
                          cmp_per_rank_iter(&c->ss, c->ss.busy_s[s])};
    d[n++] = (diff_t){DIFF_WAIT, STREAM_COMPUTE, cmp_per_rank_iter(&c->sm, c->sm.wait_s[STREAM_COMPUTE]),
                      cmp_per_rank_iter(&c->ss, c->ss.wait_s[STREAM_COMPUTE])};
    int m = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(d[i].measured_s) && isfinite(d[i].simulated_s) && d[i].simulated_s != d[i].measured_s)
            d[m++] = d[i];
    qsort(d, m, sizeof *d, diff_cmp);
    return m < 3 ? m : 3;
}

static void diff_name(const diff_t *d, char *buf, size_t size)
{
    if (d->what == DIFF_KIND)
        snprintf(buf, size, "%s (%s) on the compute stream", cmp_kind_name(d->index), kind_words(d->index));
    else if (d->what == DIFF_STREAM)
        snprintf(buf, size, "the %s stream's busy time", sched_stream_names[d->index]);
    else
        snprintf(buf, size, "waiting on the compute stream (bubble, partners, stragglers)");
}

static void diff_sentence(const diff_t *d, char *buf, size_t size)
{
    char name[160], pct[32];
    diff_name(d, name, sizeof name);
    double delta = d->simulated_s - d->measured_s;
    cmp_fmt_pct(pct, sizeof pct, 0, cmp_err_pct(d->measured_s, d->simulated_s));
    snprintf(buf, size, "%s: measured %.3f ms per rank per iteration, simulated %.3f ms; the model %s it by %.3f ms "
             "(%s%%).", name, d->measured_s * 1e3, d->simulated_s * 1e3, delta > 0 ? "overestimates" : "underestimates",
             fabs(delta) * 1e3, pct);
}

/* ---- per-rank rows ------------------------------------------------------- */

typedef struct {
    int rank;
    double measured_s, simulated_s;
} rank_cmp_t;

static double sim_end(const cmp_t *c, int rank)
{
    for (long i = 0; i < c->sim.nranks; i++)
        if (c->sim.ranks[i].rank == rank)
            return c->sim.ranks[i].end_s;
    return NAN;
}

static int by_rank(const void *pa, const void *pb)
{
    const rank_cmp_t *a = pa, *b = pb;
    return (a->rank > b->rank) - (a->rank < b->rank);
}

/* Largest |difference| first; ranks without a simulated row last. */
static int by_difference(const void *pa, const void *pb)
{
    const rank_cmp_t *a = pa, *b = pb;
    double x = fabs(a->simulated_s - a->measured_s), y = fabs(b->simulated_s - b->measured_s);
    x = isfinite(x) ? x : -1, y = isfinite(y) ? y : -1;
    return x != y ? (x < y) - (x > y) : by_rank(pa, pb);
}

/* Measured ranks in rank order (caller frees); NULL when out of memory. */
static rank_cmp_t *rank_rows(const cmp_t *c, long *n)
{
    rank_cmp_t *r = calloc(c->meas.nranks ? (size_t)c->meas.nranks : 1, sizeof *r);
    *n = r ? c->meas.nranks : 0;
    for (long i = 0; i < *n; i++)
        r[i] = (rank_cmp_t){c->meas.ranks[i].rank, c->meas.ranks[i].end_s, sim_end(c, c->meas.ranks[i].rank)};
    if (r)
        qsort(r, *n, sizeof *r, by_rank);
    return r;
}


/* ---- text report ----------------------------------------------------------- */

static void print_header(const cmp_t *c)
{
    const job_t *j = &c->job;
    printf("megasim compare: %s (measured) vs %s and the closed form\n", c->run_path,
           c->sim_path ? c->sim_path : "an in-process simulation (unfolded, alpha-beta, every rank traced)");
    printf("job: %d GPUs = TP %d x PP %d x DP %d, %d chunk(s) per stage, %d micro-batches of %d x %d tokens, "
           "preset %s\n", j->num_gpus, j->tp, j->pp, j->dp, j->vpp, j->num_microbatches, j->micro_batch_size,
           j->seq_length, cmp_cfg_str(c->config, "job", "preset"));
    printf("measured on %s; predicted with hardware profile %s / %s\n", cmp_device_name(c), c->hw.gpu.name,
           c->hw.cluster.name);
    if (cmp_run_num(c, "clock_reads") > 0) /* runs from before 2026-11-26, CPU runs, no NVML: 0 */
        printf("the run's GPUs: SM clock %.0f MHz, %.0f W per GPU, at the power cap in %.0f%% of %.0f NVML reads "
               "(steps after the first)\n", cmp_run_num(c, "sm_clock_mhz"), cmp_run_num(c, "power_w"),
               100 * cmp_run_num(c, "power_capped_fraction"), cmp_run_num(c, "clock_reads"));
    if (c->share_priced)
        printf("ranks sharing cores: the run put %.0f ranks on a host of %.0f cores; simulated with every rank's compute "
               "%.2fx slower, as they time-share them (--host-share none: a core each)\n", cmp_run_num(c, "host_ranks"),
               cmp_run_num(c, "host_cores"), c->host_share);
    else if (c->host_share > 1)
        printf("note: the run put %.0f ranks on a host of %.0f cores: they time-share the cores, which this simulation "
               "does not price (%s)\n", cmp_run_num(c, "host_ranks"), cmp_run_num(c, "host_cores"),
               c->sim_path ? "a simulation file given" : "--host-share none");
    if (c->cv_priced)
        printf("experts' routing imbalance: simulated at the run's measured token-load CV %.3f (the mean of the "
               "steps after the first; the job gave none: --moe-load-cv job prices the job's 0)\n", j->moe_load_cv);
    else if (j->num_experts > 0)
        printf("experts' routing imbalance: simulated at the job's CV %.3f; the run measured %.3f\n", j->moe_load_cv,
               c->cv_measured);
    if (c->sim_path && (c->sim_folded || c->sim_ntraced < j->num_gpus))
        printf("note: %s is %s and traces %d of %d ranks; per-op and per-stream means cover those ranks only\n",
               c->sim_path, c->sim_folded ? "folded" : "unfolded", c->sim_ntraced, j->num_gpus);
    printf("error = (predicted - measured) / measured; means leave out the first step (warm-up) when there are "
           "more\n\n");
}

static void print_headline(const cmp_t *c)
{
    char a[32], b[32];
    double m = c->meas.iteration_s;
    printf("iteration time: measured %.4f s, simulated %.4f s, error %s%% (closed form %.4f s, %s%%)\n\n", m,
           c->sim.iteration_s, cmp_fmt_pct(a, sizeof a, 0, cmp_err_pct(m, c->sim.iteration_s)), c->sim.closed_form_s,
           cmp_fmt_pct(b, sizeof b, 0, cmp_err_pct(m, c->sim.closed_form_s)));
}

static void print_step_line(const char *label, double m, double s, double cf, const char *note)
{
    char a[32], b[32], d[32], e[32];
    printf("  %6s %11.6f %12s %8s %14s %8s%s%s\n", label, m, fmt(a, sizeof a, 12, 6, s),
           cmp_fmt_pct(b, sizeof b, 8, cmp_err_pct(m, s)), fmt(d, sizeof d, 14, 6, cf), cmp_fmt_pct(e, sizeof e, 8, cmp_err_pct(m, cf)),
           *note ? "  " : "", note);
}

static void print_steps(const cmp_t *c)
{
    printf("per step\n  %6s %11s %12s %8s %14s %8s\n", "step", "measured_s", "simulated_s", "error_%", "closed_form_s",
           "error_%");
    for (long i = 0; i < c->nsteps; i++) {
        char label[16];
        snprintf(label, sizeof label, "%d", c->steps[i].step);
        print_step_line(label, c->steps[i].step_time_s, c->sim.iteration_s, c->sim.closed_form_s,
                        i == 0 && c->nsteps > 1 ? "warm-up" : "");
    }
    char note[64];
    if (c->nsteps > 1)
        snprintf(note, sizeof note, "steps %d-%d", c->steps[1].step, c->steps[c->nsteps - 1].step);
    else
        snprintf(note, sizeof note, "one step");
    print_step_line("mean", c->meas.iteration_s, c->sim.iteration_s, c->sim.closed_form_s, note);
    printf("\n");
}

static void print_kinds(const cmp_t *c)
{
    printf("per op class (%d rank(s), %d measured iteration(s); ms)\n", c->sm.nranks, c->sm.niters);
    printf("  %-10s %6s %6s %10s %10s %8s %13s %13s %8s %10s %10s\n", "kind", "n_meas", "n_sim", "meas_mean",
           "sim_mean", "error_%", "meas_compute", "sim_compute", "error_%", "meas_wait", "sim_wait");
    printf("  %-10s %6s %6s %10s %10s %8s %13s %13s %8s %10s %10s\n", "", "/iter", "/iter", "ms/op", "ms/op", "",
           "ms/rank/iter", "ms/rank/iter", "", "(before)", "(before)");
    for (int k = 0; k < NKINDS; k++) {
        if (!cmp_kind_present(c, k))
            continue;
        double mm = cmp_mean_of(c->sm.sum_s[k], c->sm.n[k]), sm = cmp_mean_of(c->ss.sum_s[k], c->ss.n[k]);
        double mc = cmp_per_rank_iter(&c->sm, c->sm.compute_s[k]), sc = cmp_per_rank_iter(&c->ss, c->ss.compute_s[k]);
        double mw = cmp_per_rank_iter(&c->sm, c->sm.compute_wait_s[k]);
        double sw = cmp_per_rank_iter(&c->ss, c->ss.compute_wait_s[k]);
        char b[10][32];
        printf("  %-10s %6s %6s %10s %10s %8s %13s %13s %8s %10s %10s\n", cmp_kind_name(k),
               fmt(b[0], 32, 6, 0, cmp_per_iter(&c->sm, c->sm.n[k])), fmt(b[1], 32, 6, 0, cmp_per_iter(&c->ss, c->ss.n[k])),
               fmt(b[2], 32, 10, 3, mm * 1e3), fmt(b[3], 32, 10, 3, sm * 1e3), cmp_fmt_pct(b[4], 32, 8, cmp_err_pct(mm, sm)),
               fmt(b[5], 32, 13, 3, mc * 1e3), fmt(b[6], 32, 13, 3, sc * 1e3), cmp_fmt_pct(b[7], 32, 8, cmp_err_pct(mc, sc)),
               fmt(b[8], 32, 10, 3, mw * 1e3), fmt(b[9], 32, 10, 3, sw * 1e3));
    }
    if (c->sm.a2a_n > 0 || c->ss.a2a_n > 0) { /* a part of fwd and bwd above, not a class beside them */
        double mm = cmp_mean_of(c->sm.a2a_s, c->sm.a2a_n), sm = cmp_mean_of(c->ss.a2a_s, c->ss.a2a_n);
        double mc = cmp_per_rank_iter(&c->sm, c->sm.a2a_s), sc = cmp_per_rank_iter(&c->ss, c->ss.a2a_s);
        char b[8][32];
        printf("  %-10s %6s %6s %10s %10s %8s %13s %13s %8s\n", "a2a",
               fmt(b[0], 32, 6, 0, cmp_per_iter(&c->sm, c->sm.a2a_n)), fmt(b[1], 32, 6, 0, cmp_per_iter(&c->ss, c->ss.a2a_n)),
               fmt(b[2], 32, 10, 3, mm * 1e3), fmt(b[3], 32, 10, 3, sm * 1e3), cmp_fmt_pct(b[4], 32, 8, cmp_err_pct(mm, sm)),
               fmt(b[5], 32, 13, 3, mc * 1e3), fmt(b[6], 32, 13, 3, sc * 1e3), cmp_fmt_pct(b[7], 32, 8, cmp_err_pct(mc, sc)));
        printf("  (a2a: the experts' token dispatch and combine, all-to-alls inside the fwd and bwd ops above,\n"
               "   already counted in them; its n is the fwd and bwd ops that ran any)\n");
    }
    printf("  (compute stream: an op's time runs from its start; its wait before, for the other streams, a partner\n"
           "   or the pipeline's bubble, is meas_wait and sim_wait; a blocking exchange measured on the real backend\n"
           "   starts before its partner arrives, so its own time holds that wait: read time + wait per class)\n\n");
}

static void print_streams(const cmp_t *c)
{
    printf("per stream (ms per rank per iteration)\n  %-9s %10s %10s %8s %10s %10s\n", "stream", "meas_busy",
           "sim_busy", "error_%", "meas_wait", "sim_wait");
    for (int s = 0; s < STREAM_COUNT; s++) {
        double mb = cmp_per_rank_iter(&c->sm, c->sm.busy_s[s]), sb = cmp_per_rank_iter(&c->ss, c->ss.busy_s[s]);
        char b[5][32];
        printf("  %-9s %10s %10s %8s %10s %10s\n", sched_stream_names[s], fmt(b[0], 32, 10, 3, mb * 1e3),
               fmt(b[1], 32, 10, 3, sb * 1e3), cmp_fmt_pct(b[2], 32, 8, cmp_err_pct(mb, sb)),
               fmt(b[3], 32, 10, 3, cmp_per_rank_iter(&c->sm, c->sm.wait_s[s]) * 1e3),
               fmt(b[4], 32, 10, 3, cmp_per_rank_iter(&c->ss, c->ss.wait_s[s]) * 1e3));
    }
    printf("\n");
}

static void print_ranks(const cmp_t *c)
{
    long n;
    rank_cmp_t *r = rank_rows(c, &n);
    if (!r)
        return;
    int shown = n > c->o.ranks_shown ? c->o.ranks_shown : (int)n;
    if (shown < n)
        qsort(r, n, sizeof *r, by_difference);
    printf("per rank: end of the compute stream (measured: the last step)%s\n  %6s %11s %11s %8s\n",
           shown < n ? ", largest differences first" : "", "rank", "meas_end_s", "sim_end_s", "error_%");
    for (int i = 0; i < shown; i++) {
        char a[32], b[32];
        printf("  %6d %11.6f %11s %8s\n", r[i].rank, r[i].measured_s, fmt(a, sizeof a, 11, 6, r[i].simulated_s),
               cmp_fmt_pct(b, sizeof b, 8, cmp_err_pct(r[i].measured_s, r[i].simulated_s)));
    }
    if (shown < n)
        printf("  ... %ld more rank(s) (--ranks-shown N, or --json for all)\n", n - shown);
    printf("\n");
    free(r);
}

static void print_differences(const cmp_t *c)
{
    diff_t d[NKINDS + STREAM_COUNT + 1];
    int n = differences(c, d);
    printf("largest differences (simulated - measured, per rank per iteration)\n");
    for (int i = 0; i < n; i++) {
        char s[512];
        diff_sentence(&d[i], s, sizeof s);
        printf("  %d. %s\n", i + 1, s);
    }
    if (!n)
        printf("  none: every compared time agrees\n");
}

void cmp_print_text(const cmp_t *c)
{
    print_header(c);
    print_headline(c);
    print_steps(c);
    print_kinds(c);
    print_streams(c);
    print_ranks(c);
    print_differences(c);
}


/* ---- JSON ----------------------------------------------------------------- */

static cJSON *json_step(int step, double m, double s, double cf, int warmup)
{
    cJSON *o = cJSON_CreateObject();
    if (step >= 0)
        cJSON_AddNumberToObject(o, "step", step);
    add_num(o, "measured_s", m);
    add_num(o, "simulated_s", s);
    add_num(o, "closed_form_s", cf);
    add_num(o, "error_pct", cmp_err_pct(m, s));
    add_num(o, "closed_form_error_pct", cmp_err_pct(m, cf));
    if (step >= 0)
        cJSON_AddBoolToObject(o, "warmup", warmup);
    return o;
}

static cJSON *json_iteration(const cmp_t *c)
{
    cJSON *o = json_step(-1, c->meas.iteration_s, c->sim.iteration_s, c->sim.closed_form_s, 0);
    cJSON_AddNumberToObject(o, "steps_averaged", c->nsteps > 1 ? (double)c->nsteps - 1 : 1);
    cJSON *a = cJSON_AddArrayToObject(o, "per_step");
    for (long i = 0; i < c->nsteps; i++)
        cJSON_AddItemToArray(a, json_step(c->steps[i].step, c->steps[i].step_time_s, c->sim.iteration_s,
                                          c->sim.closed_form_s, i == 0 && c->nsteps > 1));
    return o;
}

static cJSON *json_kinds(const cmp_t *c)
{
    cJSON *a = cJSON_CreateArray();
    for (int k = 0; k < NKINDS; k++) {
        if (!cmp_kind_present(c, k))
            continue;
        cJSON *o = cJSON_CreateObject();
        double mm = cmp_mean_of(c->sm.sum_s[k], c->sm.n[k]), sm = cmp_mean_of(c->ss.sum_s[k], c->ss.n[k]);
        double mc = cmp_per_rank_iter(&c->sm, c->sm.compute_s[k]), sc = cmp_per_rank_iter(&c->ss, c->ss.compute_s[k]);
        cJSON_AddStringToObject(o, "kind", cmp_kind_name(k));
        add_num(o, "count_per_iteration_measured", cmp_per_iter(&c->sm, c->sm.n[k]));
        add_num(o, "count_per_iteration_simulated", cmp_per_iter(&c->ss, c->ss.n[k]));
        add_num(o, "mean_measured_s", mm);
        add_num(o, "mean_simulated_s", sm);
        add_num(o, "error_pct", cmp_err_pct(mm, sm));
        add_num(o, "compute_stream_measured_s", mc);
        add_num(o, "compute_stream_simulated_s", sc);
        add_num(o, "compute_stream_error_pct", cmp_err_pct(mc, sc));
        /* the wait before each op of the class: busy + wait of all classes is the step */
        add_num(o, "compute_stream_wait_measured_s", cmp_per_rank_iter(&c->sm, c->sm.compute_wait_s[k]));
        add_num(o, "compute_stream_wait_simulated_s", cmp_per_rank_iter(&c->ss, c->ss.compute_wait_s[k]));
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

static cJSON *json_streams(const cmp_t *c)
{
    cJSON *a = cJSON_CreateArray();
    for (int s = 0; s < STREAM_COUNT; s++) {
        cJSON *o = cJSON_CreateObject();
        double mb = cmp_per_rank_iter(&c->sm, c->sm.busy_s[s]), sb = cmp_per_rank_iter(&c->ss, c->ss.busy_s[s]);
        cJSON_AddStringToObject(o, "stream", sched_stream_names[s]);
        add_num(o, "busy_measured_s", mb);
        add_num(o, "busy_simulated_s", sb);
        add_num(o, "error_pct", cmp_err_pct(mb, sb));
        add_num(o, "wait_measured_s", cmp_per_rank_iter(&c->sm, c->sm.wait_s[s]));
        add_num(o, "wait_simulated_s", cmp_per_rank_iter(&c->ss, c->ss.wait_s[s]));
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

static cJSON *json_ranks(const cmp_t *c)
{
    cJSON *a = cJSON_CreateArray();
    long n;
    rank_cmp_t *r = rank_rows(c, &n);
    for (long i = 0; r && i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "rank", r[i].rank);
        add_num(o, "end_measured_s", r[i].measured_s);
        add_num(o, "end_simulated_s", r[i].simulated_s);
        add_num(o, "error_pct", cmp_err_pct(r[i].measured_s, r[i].simulated_s));
        cJSON_AddItemToArray(a, o);
    }
    free(r);
    return a;
}

static cJSON *json_differences(const cmp_t *c)
{
    static const char *const what[] = {"op class", "stream", "wait"};
    diff_t d[NKINDS + STREAM_COUNT + 1];
    int n = differences(c, d);
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        char s[512];
        cJSON_AddStringToObject(o, "what", what[d[i].what]);
        cJSON_AddStringToObject(o, "name", d[i].what == DIFF_KIND ? cmp_kind_name(d[i].index)
                                                                  : sched_stream_names[d[i].index]);
        add_num(o, "measured_s", d[i].measured_s);
        add_num(o, "simulated_s", d[i].simulated_s);
        add_num(o, "difference_s", d[i].simulated_s - d[i].measured_s);
        diff_sentence(&d[i], s, sizeof s);
        cJSON_AddStringToObject(o, "sentence", s);
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

cJSON *cmp_json_report(const cmp_t *c)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "run", c->run_path);
    cJSON_AddStringToObject(o, "simulation",
                            c->sim_path ? c->sim_path : "in-process: unfolded, alpha-beta, every rank traced");
    cJSON_AddItemToObject(o, "iteration", json_iteration(c));
    if (cmp_run_num(c, "host_cores") > 0) { /* the most crowded host (runs from 2026-11-29 on) */
        cJSON *h = cJSON_AddObjectToObject(o, "host_share");
        cJSON_AddNumberToObject(h, "ranks", cmp_run_num(c, "host_ranks"));
        cJSON_AddNumberToObject(h, "cores", cmp_run_num(c, "host_cores"));
        cJSON_AddBoolToObject(h, "oversubscribed", c->host_share > 1);
        cJSON_AddNumberToObject(h, "simulated_factor", c->share_priced ? c->host_share : 1);
    }
    if (c->job.num_experts > 0) { /* the imbalance the simulation priced, and the run's */
        cJSON *m = cJSON_AddObjectToObject(o, "moe_load_cv");
        add_num(m, "simulated", c->job.moe_load_cv);
        add_num(m, "measured", c->cv_measured);
        cJSON_AddStringToObject(m, "simulated_from", c->cv_priced ? "run" : "job");
    }
    cJSON_AddItemToObject(o, "op_classes", json_kinds(c));
    if (c->sm.a2a_n > 0 || c->ss.a2a_n > 0) { /* inside fwd and bwd: not one of the classes that sum to the step */
        cJSON *a = cJSON_AddObjectToObject(o, "all_to_all");
        double mc = cmp_per_rank_iter(&c->sm, c->sm.a2a_s), sc = cmp_per_rank_iter(&c->ss, c->ss.a2a_s);
        add_num(a, "measured_s", mc);
        add_num(a, "simulated_s", sc);
        add_num(a, "error_pct", cmp_err_pct(mc, sc));
    }
    cJSON_AddItemToObject(o, "streams", json_streams(c));
    cJSON_AddItemToObject(o, "ranks", json_ranks(c));
    cJSON_AddItemToObject(o, "largest_differences", json_differences(c));
    if (cmp_run_num(c, "clock_reads") > 0) {
        cJSON *g = cJSON_AddObjectToObject(o, "gpu_clock"); /* the run's, steps after the first */
        cJSON_AddNumberToObject(g, "sm_mhz", cmp_run_num(c, "sm_clock_mhz"));
        cJSON_AddNumberToObject(g, "power_w", cmp_run_num(c, "power_w"));
        cJSON_AddNumberToObject(g, "power_capped_fraction", cmp_run_num(c, "power_capped_fraction"));
        cJSON_AddNumberToObject(g, "reads", cmp_run_num(c, "clock_reads"));
    }
    cJSON *p = cJSON_AddObjectToObject(o, "plot");
    char path[1100];
    snprintf(path, sizeof path, "%s.dat", c->prefix);
    cJSON_AddStringToObject(p, "dat", path);
    cJSON_AddBoolToObject(p, "drawn", c->drawn);
    cJSON *cfg = cJSON_CreateObject();
    const char *keys[] = {"version", "job", "hardware"};
    for (int i = 0; i < 3; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->config, keys[i]);
        if (v)
            cJSON_AddItemToObject(cfg, keys[i], cJSON_Duplicate(v, 1));
    }
    cJSON_AddItemToObject(o, "config", cfg);
    return o;
}

