/* cmd_compare: `megasim compare RUN.h5 [SIM.h5]`: a measured run (megasim
 * run --out, kind "measurement") against its predictions: the simulator
 * (SIM.h5, a simulation of the same job; without it, an unfolded
 * in-process simulation of the job and hardware recorded in RUN.h5, every
 * rank traced, alpha-beta network) and the closed form. Prints per step,
 * per op class, per stream and per rank measured vs predicted, and names
 * the largest differences; --json prints the same as one object. Draws
 * PREFIX.png and PREFIX.svg from PREFIX.dat with plots/compare.gp.
 *
 * error_pct = 100 x (predicted - measured) / measured: positive when the
 * model is slower than reality. Means over measured iterations leave the
 * first out (warm-up) when there are more. Bad input (a missing file, the
 * wrong kind, another job) is one message and exit 2, before any output;
 * a failed drawing is exit 1 after the report. */
#include "model/cli.h"
#include "model/estimate.h"
#include "sim/engine.h"
#include "sim/plot_data.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <hdf5.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef MEGASIM_PLOTS_DIR
#define MEGASIM_PLOTS_DIR "plots"
#endif

typedef struct {
    int json, ranks_shown, help;
    char plot[1000], plots_dir[1024];
} compare_opts_t;

#define CO(f) offsetof(compare_opts_t, f)
static const opt_def compare_defs[] = {
    {"json", OPT_BOOL, CO(json), 0, 1, "false", 0, "compare", "print one JSON object instead of the tables"},
    {"plot", OPT_STR, CO(plot), 0, 1000, "", 0, "compare",
     "write PREFIX.dat, PREFIX.png and PREFIX.svg (default: RUN.h5 with .h5 replaced by -compare)"},
    {"plots-dir", OPT_STR, CO(plots_dir), 0, 1024, MEGASIM_PLOTS_DIR, 0, "compare",
     "the folder of the gnuplot scripts (compare.gp)"},
    {"ranks-shown", OPT_INT, CO(ranks_shown), 1, 1000000, "16", 0, "compare",
     "per-rank rows printed; with more ranks, the largest differences first"},
    {"help", OPT_BOOL, CO(help), 0, 1, "false", 0, "compare", "show this help"},
};
const opt_table compare_opts = {compare_defs, sizeof compare_defs / sizeof compare_defs[0], "compare option"};

/* ---- what is compared -------------------------------------------------- */

typedef struct {
    int32_t rank, stream, kind;
    double t_ready_s, t_start_s, t_end_s;
    int32_t iteration;
} op_row_t;

typedef struct {
    int32_t rank, stands_for;
    double end_s;
} rank_row_t;

typedef struct {
    int32_t step;
    double step_time_s;
} step_row_t;

#define OC(f, i) {#f, offsetof(op_row_t, f), i}
static const plot_col_t op_cols[] = {OC(rank, 1),      OC(stream, 1),  OC(kind, 1),     OC(t_ready_s, 0),
                                     OC(t_start_s, 0), OC(t_end_s, 0), OC(iteration, 1)};
#define KC(f, i) {#f, offsetof(rank_row_t, f), i}
static const plot_col_t rank_cols[] = {KC(rank, 1), KC(stands_for, 1), KC(end_s, 0)};
#define SC(f, i) {#f, offsetof(step_row_t, f), i}
static const plot_col_t step_cols[] = {SC(step, 1), SC(step_time_s, 0)};

/* One side of the comparison, as read from a file or simulated. */
typedef struct {
    op_row_t *ops;        /* /timeline */
    long nops;
    rank_row_t *ranks;    /* /ranks */
    long nranks;
    double iteration_s;   /* measured: the mean step; simulated: the iteration */
    double closed_form_s; /* simulated side: the closed form of the job */
} side_t;

#define NKINDS 16

/* Sums over the timeline rows a side's means cover. */
typedef struct {
    double n[NKINDS], sum_s[NKINDS], compute_s[NKINDS]; /* ops, their time, on the compute stream */
    double busy_s[STREAM_COUNT], wait_s[STREAM_COUNT];
    int niters, nranks;  /* iterations and ranks covered */
    int first_iter, last_iter;
} stats_t;

typedef struct {
    compare_opts_t o;
    const char *run_path, *sim_path;
    cJSON *config;        /* RUN.h5's config_json */
    job_t job;
    hw_t hw;
    step_row_t *steps;    /* /iterations */
    long nsteps;
    side_t meas, sim;
    unsigned char *rank_on; /* [num_gpus]: ranks the per-op means cover */
    int sim_folded, sim_ntraced;
    stats_t sm, ss;       /* measured, simulated */
    char prefix[1024];
    int drawn;            /* PNG and SVG written */
} cmp_t;

/* ---- small helpers --------------------------------------------------- */

/* Below this, a time is timer noise or an op that does nothing (a DP
 * collective over one rank): when both sides are, no error is given. */
#define NEGLIGIBLE_S 1e-6

static double err_pct(double measured, double predicted)
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
static const char *fmt_pct(char *buf, size_t size, int w, double pct)
{
    if (!isfinite(pct))
        snprintf(buf, size, "%*s", w, "-");
    else if (fabs(pct) < 1e4)
        snprintf(buf, size, "%+*.1f", w, pct);
    else
        snprintf(buf, size, "%+*.2g", w, pct);
    return buf;
}

static const char *kind_name(int k)
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

/* root[sec][key] as a string, "" if absent. */
static const char *cfg_str(const cJSON *root, const char *sec, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, sec), key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* The device the run measured (recorded beside the run options). */
static const char *device_name(const cmp_t *c)
{
    const char *d = cfg_str(c->config, "run", "device_name");
    if (!*d)
        d = cfg_str(c->config, "simulate", "device_name");
    return *d ? d : c->hw.gpu.name;
}

/* ---- command line ------------------------------------------------------ */

/* The flags and one or two positional files. */
static int parse(int argc, char **argv, cmp_t *c, char *err)
{
    const char *files[2] = {NULL, NULL};
    int n = 0;
    if (cli_parse_flags(&compare_opts, &c->o, argc, argv, files, 2, &n,
                        "at most two result files (RUN.h5 [SIM.h5]), got a third: '%s'", err))
        return -1;
    c->run_path = files[0], c->sim_path = files[1];
    if (!c->run_path) {
        snprintf(err, OPT_ERR_LEN, "no measured result file given (usage: megasim compare RUN.h5 [SIM.h5])");
        return -1;
    }
    return 0;
}

/* RUN.h5 -> RUN-compare; a name without .h5 gets -compare appended. */
static void default_prefix(const char *run, char *out, size_t size)
{
    size_t n = strlen(run);
    if (n > 3 && !strcmp(run + n - 3, ".h5"))
        n -= 3;
    snprintf(out, size, "%.*s-compare", (int)n, run);
}

/* ---- reading result files -------------------------------------------- */

/* Opens path, checks its kind and parses config_json into *config. */
static int open_kind(const char *path, const char *want, hid_t *file, cJSON **config, char *err)
{
    char kind[64];
    if (plot_open_result(path, file, kind, sizeof kind, err, OPT_ERR_LEN) != PLOT_OK)
        return -1;
    int rc = 0;
    if (strcmp(kind, want)) {
        snprintf(err, OPT_ERR_LEN, "%s: kind '%s', expected a %s (%s)", path, kind, want,
                 !strcmp(want, "measurement") ? "megasim run --out RUN.h5" : "megasim simulate --out SIM.h5");
        rc = -1;
    }
    char *s = !rc ? plot_attr_str(*file, "/", "config_json") : NULL;
    if (!rc && !(*config = s ? cJSON_Parse(s) : NULL)) {
        snprintf(err, OPT_ERR_LEN, "%s: the root attribute config_json is %s", path, s ? "not JSON" : "missing");
        rc = -1;
    }
    free(s);
    if (rc) {
        H5Fclose(*file);
        *file = -1;
    }
    return rc;
}

/* A table that must be present. */
static int need_table(hid_t f, const char *path, const char *name, const plot_col_t *cols, int ncols,
                      size_t row_size, void **rows, long *n, char *err)
{
    if (plot_read_table(f, path, name, cols, ncols, row_size, rows, n, err, OPT_ERR_LEN) != PLOT_OK)
        return -1;
    if (*n < 0) {
        snprintf(err, OPT_ERR_LEN, "%s: no dataset %s; not a complete megasim result file", path, name);
        return -1;
    }
    return 0;
}

/* /timeline and /ranks; a simulation's timeline may lack `iteration`. */
static int read_side(hid_t f, const char *path, side_t *s, char *err)
{
    int ncols = plot_has_column(f, "/timeline", "iteration") ? 7 : 6;
    void *ops, *ranks;
    if (need_table(f, path, "/timeline", op_cols, ncols, sizeof(op_row_t), &ops, &s->nops, err))
        return -1;
    s->ops = ops;
    if (need_table(f, path, "/ranks", rank_cols, 3, sizeof(rank_row_t), &ranks, &s->nranks, err))
        return -1;
    s->ranks = ranks;
    return 0;
}

static double mean_step(const cmp_t *c)
{
    long a = c->nsteps > 1 ? 1 : 0;
    double sum = 0;
    for (long i = a; i < c->nsteps; i++)
        sum += c->steps[i].step_time_s;
    return sum / (double)(c->nsteps - a);
}

static int read_run(cmp_t *c, char *err)
{
    hid_t f;
    void *steps;
    if (open_kind(c->run_path, "measurement", &f, &c->config, err))
        return -1;
    int rc = read_side(f, c->run_path, &c->meas, err) ||
             need_table(f, c->run_path, "/iterations", step_cols, 2, sizeof(step_row_t), &steps, &c->nsteps, err);
    if (!rc)
        c->steps = steps;
    if (!rc && c->nsteps < 1) {
        snprintf(err, OPT_ERR_LEN, "%s: /iterations has no rows: the run measured no step", c->run_path);
        rc = -1;
    }
    if (!rc)
        c->meas.iteration_s = mean_step(c);
    H5Fclose(f);
    return rc ? -1 : 0;
}

/* The first job key whose value differs (or is absent on one side). */
static const char *job_differs(const cJSON *a, const cJSON *b)
{
    const cJSON *m;
    cJSON_ArrayForEach(m, a)
    {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(b, m->string);
        if (!o || !cJSON_Compare(m, o, 1))
            return m->string;
    }
    cJSON_ArrayForEach(m, b)
    {
        if (!cJSON_GetObjectItemCaseSensitive(a, m->string))
            return m->string;
    }
    return NULL;
}

/* A JSON value as text, "absent" for none. */
static void json_value(const cJSON *v, char *buf, size_t size)
{
    char *p = v ? cJSON_PrintUnformatted(v) : NULL;
    snprintf(buf, size, "%s", p ? p : "absent");
    free(p);
}

static int same_job(const cmp_t *c, const cJSON *sim_config, char *err)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(c->config, "job");
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(sim_config, "job");
    const char *key = job_differs(a, b);
    if (!key)
        return 0;
    char va[256], vb[256];
    json_value(cJSON_GetObjectItemCaseSensitive(a, key), va, sizeof va);
    json_value(cJSON_GetObjectItemCaseSensitive(b, key), vb, sizeof vb);
    snprintf(err, OPT_ERR_LEN, "%s simulates another job than %s: job key '%s' is %s there and %s in the run",
             c->sim_path, c->run_path, key, vb, va);
    return -1;
}

static int read_sim(cmp_t *c, char *err)
{
    hid_t f;
    cJSON *cfg = NULL;
    if (open_kind(c->sim_path, "simulation", &f, &cfg, err))
        return -1;
    int rc = same_job(c, cfg, err) || read_side(f, c->sim_path, &c->sim, err);
    if (!rc && plot_attr_f64(f, "/summary", "iteration_time_s", &c->sim.iteration_s)) {
        snprintf(err, OPT_ERR_LEN, "%s: no /summary attribute iteration_time_s", c->sim_path);
        rc = -1;
    }
    c->sim.closed_form_s = NAN;
    if (!rc)
        plot_attr_f64(f, "/summary", "closed_form_iteration_time_s", &c->sim.closed_form_s);
    for (long i = 0; !rc && i < c->sim.nranks; i++)
        c->sim_folded |= c->sim.ranks[i].stands_for > 1;
    cJSON_Delete(cfg);
    H5Fclose(f);
    return rc ? -1 : 0;
}

/* ---- the job and hardware recorded in RUN.h5 --------------------------- */

/* One profile section: every field must be there (hw_to_json wrote them). */
static int hw_section(const opt_table *t, const cJSON *hw, const char *sec, void *obj, const char *path, char *err)
{
    char where[1200], seen[64] = {0};
    snprintf(where, sizeof where, "%s: config_json hardware.%s", path, sec);
    if (opts_apply_json(t, obj, cJSON_GetObjectItemCaseSensitive(hw, sec), where, NULL, seen, err))
        return -1;
    for (int i = 0; i < t->n; i++)
        if (!seen[i]) {
            snprintf(err, OPT_ERR_LEN, "%s: field '%s' is missing", where, t->defs[i].name);
            return -1;
        }
    return 0;
}

/* The job over the defaults, the hardware as recorded (overrides applied),
 * then the rules and derived fields. */
static int rebuild_job(cmp_t *c, char *err)
{
    char where[1100];
    const cJSON *hw = cJSON_GetObjectItemCaseSensitive(c->config, "hardware");
    snprintf(where, sizeof where, "%s: config_json job", c->run_path);
    memset(&c->job, 0, sizeof c->job);
    memset(&c->hw, 0, sizeof c->hw);
    opts_set_defaults(&job_opts, &c->job);
    if (opts_apply_json(&job_opts, &c->job, cJSON_GetObjectItemCaseSensitive(c->config, "job"), where, NULL, NULL,
                        err) ||
        hw_section(&hw_gpu_opts, hw, "gpu", &c->hw.gpu, c->run_path, err) ||
        hw_section(&hw_cluster_opts, hw, "cluster", &c->hw.cluster, c->run_path, err) || hw_check(&c->hw, err) ||
        job_finalize(&c->job, c->hw.cluster.gpus_per_node, err))
        return -1;
    return 0;
}

/* ---- the in-process simulation ----------------------------------------- */

static int side_from_result(const sim_result_t *r, side_t *s, char *err)
{
    s->nops = r->ntimeline, s->nranks = r->entities;
    s->ops = calloc(s->nops ? (size_t)s->nops : 1, sizeof *s->ops);
    s->ranks = calloc(s->nranks ? (size_t)s->nranks : 1, sizeof *s->ranks);
    if (!s->ops || !s->ranks) {
        snprintf(err, OPT_ERR_LEN, "out of memory for %ld simulated ops", r->ntimeline);
        return -1;
    }
    for (long i = 0; i < r->ntimeline; i++) {
        const sim_rec_t *o = &r->timeline[i];
        s->ops[i] = (op_row_t){o->rank, o->stream, o->kind, o->t_ready_ns * 1e-9, o->t_start_ns * 1e-9,
                               o->t_end_ns * 1e-9, 0};
    }
    for (int i = 0; i < r->entities; i++)
        s->ranks[i] = (rank_row_t){r->entity_rank[i], r->entity_count[i], r->per_entity[i].end * 1e-9};
    s->iteration_s = r->iteration_ns * 1e-9;
    return 0;
}

/* Unfolded, every rank traced, alpha-beta network; and the closed form. */
static int simulate(cmp_t *c, char *err)
{
    if (c->job.num_gpus > SIM_MAX_TRACE) {
        snprintf(err, OPT_ERR_LEN, "%s: %d ranks; the in-process simulation traces at most %d (SIM_MAX_TRACE). "
                 "Simulate the job with megasim simulate --no-fold --trace-ranks R,... --out SIM.h5 and give SIM.h5",
                 c->run_path, c->job.num_gpus, SIM_MAX_TRACE);
        return -1;
    }
    sim_opts_t o;
    memset(&o, 0, sizeof o);
    o.network = SIM_NET_ALPHA_BETA, o.fold = 0, o.ntrace = c->job.num_gpus;
    for (int i = 0; i < o.ntrace; i++)
        o.trace_ranks[i] = i;
    if (sched_verify(&c->job, err, OPT_ERR_LEN))
        return -1;
    estimate_t e;
    estimate_job(&c->job, &c->hw, &e);
    sim_result_t r;
    if (sim_run(&c->job, &c->hw, &o, &r, err, OPT_ERR_LEN))
        return -1;
    int rc = side_from_result(&r, &c->sim, err);
    c->sim.closed_form_s = e.iteration_s;
    sim_result_free(&r);
    return rc;
}

/* ---- statistics ---------------------------------------------------------- */

/* Every row names a rank of the job, a stream and an op kind. */
static int check_rows(const cmp_t *c, const side_t *s, const char *path, char *err)
{
    for (long i = 0; i < s->nops; i++) {
        const op_row_t *o = &s->ops[i];
        if (o->rank < 0 || o->rank >= c->job.num_gpus || o->stream < 0 || o->stream >= STREAM_COUNT ||
            o->kind < 0 || o->kind >= NKINDS || o->iteration < 0) {
            snprintf(err, OPT_ERR_LEN, "%s: /timeline row %ld: rank %d, stream %d, kind %d, iteration %d is not "
                     "an op of this %d-rank job", path, i, o->rank, o->stream, o->kind, o->iteration,
                     c->job.num_gpus);
            return -1;
        }
    }
    for (long i = 0; i < s->nranks; i++)
        if (s->ranks[i].rank < 0 || s->ranks[i].rank >= c->job.num_gpus) {
            snprintf(err, OPT_ERR_LEN, "%s: /ranks row %ld: rank %d is not a rank of this %d-rank job", path, i,
                     s->ranks[i].rank, c->job.num_gpus);
            return -1;
        }
    return 0;
}

/* The ranks the per-op means cover: those the simulation traced (all of
 * them in-process), or every rank when it traced none. */
static int pick_ranks(cmp_t *c, char *err)
{
    c->rank_on = calloc((size_t)c->job.num_gpus, 1);
    if (!c->rank_on) {
        snprintf(err, OPT_ERR_LEN, "out of memory");
        return -1;
    }
    for (long i = 0; i < c->sim.nops; i++)
        c->rank_on[c->sim.ops[i].rank] = 1;
    for (int r = 0; r < c->job.num_gpus; r++)
        c->sim_ntraced += c->rank_on[r];
    if (!c->sim_ntraced)
        memset(c->rank_on, 1, (size_t)c->job.num_gpus);
    return 0;
}

/* Sums over the rows of the covered ranks, the first iteration left out
 * when there are more (warm-up). */
static void stats_of(const cmp_t *c, const side_t *s, stats_t *st)
{
    memset(st, 0, sizeof *st);
    st->first_iter = INT32_MAX, st->last_iter = -1;
    for (long i = 0; i < s->nops; i++) {
        st->first_iter = s->ops[i].iteration < st->first_iter ? s->ops[i].iteration : st->first_iter;
        st->last_iter = s->ops[i].iteration > st->last_iter ? s->ops[i].iteration : st->last_iter;
    }
    int skip = st->last_iter > st->first_iter ? st->first_iter : -1;
    unsigned char *seen_iter = calloc((size_t)(st->last_iter >= 0 ? st->last_iter + 1 : 1), 1);
    unsigned char *seen_rank = calloc((size_t)c->job.num_gpus, 1);
    for (long i = 0; seen_iter && seen_rank && i < s->nops; i++) {
        const op_row_t *o = &s->ops[i];
        if (o->iteration == skip || !c->rank_on[o->rank])
            continue;
        double dur = o->t_end_s - o->t_start_s, wait = o->t_start_s - o->t_ready_s;
        st->n[o->kind]++, st->sum_s[o->kind] += dur;
        if (o->stream == STREAM_COMPUTE)
            st->compute_s[o->kind] += dur;
        st->busy_s[o->stream] += dur, st->wait_s[o->stream] += wait;
        st->niters += !seen_iter[o->iteration], seen_iter[o->iteration] = 1;
        st->nranks += !seen_rank[o->rank], seen_rank[o->rank] = 1;
    }
    free(seen_iter);
    free(seen_rank);
}

/* A sum over the covered rows as a time per rank per iteration. */
static double per_rank_iter(const stats_t *st, double sum)
{
    return st->niters && st->nranks ? sum / ((double)st->niters * st->nranks) : NAN;
}

static double per_iter(const stats_t *st, double n)
{
    return st->niters ? n / st->niters : NAN;
}

static double mean_of(double sum, double n)
{
    return n > 0 ? sum / n : NAN;
}

static int kind_present(const cmp_t *c, int k)
{
    return c->sm.n[k] > 0 || c->ss.n[k] > 0;
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
        if (kind_present(c, k))
            d[n++] = (diff_t){DIFF_KIND, k, per_rank_iter(&c->sm, c->sm.compute_s[k]),
                              per_rank_iter(&c->ss, c->ss.compute_s[k])};
    for (int s = STREAM_COMPUTE + 1; s < STREAM_COUNT; s++)
        d[n++] = (diff_t){DIFF_STREAM, s, per_rank_iter(&c->sm, c->sm.busy_s[s]),
                          per_rank_iter(&c->ss, c->ss.busy_s[s])};
    d[n++] = (diff_t){DIFF_WAIT, STREAM_COMPUTE, per_rank_iter(&c->sm, c->sm.wait_s[STREAM_COMPUTE]),
                      per_rank_iter(&c->ss, c->ss.wait_s[STREAM_COMPUTE])};
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
        snprintf(buf, size, "%s (%s) on the compute stream", kind_name(d->index), kind_words(d->index));
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
    fmt_pct(pct, sizeof pct, 0, err_pct(d->measured_s, d->simulated_s));
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
           j->seq_length, cfg_str(c->config, "job", "preset"));
    printf("measured on %s; predicted with hardware profile %s / %s\n", device_name(c), c->hw.gpu.name,
           c->hw.cluster.name);
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
           c->sim.iteration_s, fmt_pct(a, sizeof a, 0, err_pct(m, c->sim.iteration_s)), c->sim.closed_form_s,
           fmt_pct(b, sizeof b, 0, err_pct(m, c->sim.closed_form_s)));
}

static void print_step_line(const char *label, double m, double s, double cf, const char *note)
{
    char a[32], b[32], d[32], e[32];
    printf("  %6s %11.6f %12s %8s %14s %8s%s%s\n", label, m, fmt(a, sizeof a, 12, 6, s),
           fmt_pct(b, sizeof b, 8, err_pct(m, s)), fmt(d, sizeof d, 14, 6, cf), fmt_pct(e, sizeof e, 8, err_pct(m, cf)),
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
    printf("  %-10s %6s %6s %10s %10s %8s %13s %13s %8s\n", "kind", "n_meas", "n_sim", "meas_mean", "sim_mean",
           "error_%", "meas_compute", "sim_compute", "error_%");
    printf("  %-10s %6s %6s %10s %10s %8s %13s %13s\n", "", "/iter", "/iter", "ms/op", "ms/op", "", "ms/rank/iter",
           "ms/rank/iter");
    for (int k = 0; k < NKINDS; k++) {
        if (!kind_present(c, k))
            continue;
        double mm = mean_of(c->sm.sum_s[k], c->sm.n[k]), sm = mean_of(c->ss.sum_s[k], c->ss.n[k]);
        double mc = per_rank_iter(&c->sm, c->sm.compute_s[k]), sc = per_rank_iter(&c->ss, c->ss.compute_s[k]);
        char b[8][32];
        printf("  %-10s %6s %6s %10s %10s %8s %13s %13s %8s\n", kind_name(k),
               fmt(b[0], 32, 6, 0, per_iter(&c->sm, c->sm.n[k])), fmt(b[1], 32, 6, 0, per_iter(&c->ss, c->ss.n[k])),
               fmt(b[2], 32, 10, 3, mm * 1e3), fmt(b[3], 32, 10, 3, sm * 1e3), fmt_pct(b[4], 32, 8, err_pct(mm, sm)),
               fmt(b[5], 32, 13, 3, mc * 1e3), fmt(b[6], 32, 13, 3, sc * 1e3), fmt_pct(b[7], 32, 8, err_pct(mc, sc)));
    }
    printf("\n");
}

static void print_streams(const cmp_t *c)
{
    printf("per stream (ms per rank per iteration)\n  %-8s %10s %10s %8s %10s %10s\n", "stream", "meas_busy",
           "sim_busy", "error_%", "meas_wait", "sim_wait");
    for (int s = 0; s < STREAM_COUNT; s++) {
        double mb = per_rank_iter(&c->sm, c->sm.busy_s[s]), sb = per_rank_iter(&c->ss, c->ss.busy_s[s]);
        char b[5][32];
        printf("  %-8s %10s %10s %8s %10s %10s\n", sched_stream_names[s], fmt(b[0], 32, 10, 3, mb * 1e3),
               fmt(b[1], 32, 10, 3, sb * 1e3), fmt_pct(b[2], 32, 8, err_pct(mb, sb)),
               fmt(b[3], 32, 10, 3, per_rank_iter(&c->sm, c->sm.wait_s[s]) * 1e3),
               fmt(b[4], 32, 10, 3, per_rank_iter(&c->ss, c->ss.wait_s[s]) * 1e3));
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
               fmt_pct(b, sizeof b, 8, err_pct(r[i].measured_s, r[i].simulated_s)));
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

static void print_text(const cmp_t *c)
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
    add_num(o, "error_pct", err_pct(m, s));
    add_num(o, "closed_form_error_pct", err_pct(m, cf));
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
        if (!kind_present(c, k))
            continue;
        cJSON *o = cJSON_CreateObject();
        double mm = mean_of(c->sm.sum_s[k], c->sm.n[k]), sm = mean_of(c->ss.sum_s[k], c->ss.n[k]);
        double mc = per_rank_iter(&c->sm, c->sm.compute_s[k]), sc = per_rank_iter(&c->ss, c->ss.compute_s[k]);
        cJSON_AddStringToObject(o, "kind", kind_name(k));
        add_num(o, "count_per_iteration_measured", per_iter(&c->sm, c->sm.n[k]));
        add_num(o, "count_per_iteration_simulated", per_iter(&c->ss, c->ss.n[k]));
        add_num(o, "mean_measured_s", mm);
        add_num(o, "mean_simulated_s", sm);
        add_num(o, "error_pct", err_pct(mm, sm));
        add_num(o, "compute_stream_measured_s", mc);
        add_num(o, "compute_stream_simulated_s", sc);
        add_num(o, "compute_stream_error_pct", err_pct(mc, sc));
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

static cJSON *json_streams(const cmp_t *c)
{
    cJSON *a = cJSON_CreateArray();
    for (int s = 0; s < STREAM_COUNT; s++) {
        cJSON *o = cJSON_CreateObject();
        double mb = per_rank_iter(&c->sm, c->sm.busy_s[s]), sb = per_rank_iter(&c->ss, c->ss.busy_s[s]);
        cJSON_AddStringToObject(o, "stream", sched_stream_names[s]);
        add_num(o, "busy_measured_s", mb);
        add_num(o, "busy_simulated_s", sb);
        add_num(o, "error_pct", err_pct(mb, sb));
        add_num(o, "wait_measured_s", per_rank_iter(&c->sm, c->sm.wait_s[s]));
        add_num(o, "wait_simulated_s", per_rank_iter(&c->ss, c->ss.wait_s[s]));
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
        add_num(o, "error_pct", err_pct(r[i].measured_s, r[i].simulated_s));
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
        cJSON_AddStringToObject(o, "name", d[i].what == DIFF_KIND ? kind_name(d[i].index)
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

static cJSON *json_report(const cmp_t *c)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "run", c->run_path);
    cJSON_AddStringToObject(o, "simulation",
                            c->sim_path ? c->sim_path : "in-process: unfolded, alpha-beta, every rank traced");
    cJSON_AddItemToObject(o, "iteration", json_iteration(c));
    cJSON_AddItemToObject(o, "op_classes", json_kinds(c));
    cJSON_AddItemToObject(o, "streams", json_streams(c));
    cJSON_AddItemToObject(o, "ranks", json_ranks(c));
    cJSON_AddItemToObject(o, "largest_differences", json_differences(c));
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

/* ---- the figure ----------------------------------------------------------- */

static void dat_row(FILE *f, const char *group, double m, double s)
{
    double e = err_pct(m, s);
    fprintf(f, "\"%s\" %.9g %.9g ", group, m, s);
    if (isfinite(e))
        fprintf(f, "%.6g\n", e);
    else
        fprintf(f, "?\n");
}

/* Groups: the iteration, each op class's time on the compute stream, the
 * compute stream's waiting (per rank per iteration). */
static void dat_rows(const cmp_t *c, FILE *f)
{
    fprintf(f, "# megasim compare %s: measured vs simulated seconds per iteration; op classes and wait: the compute "
               "stream, per rank\n# columns: group measured_s simulated_s error_pct ('?': none)\n", c->run_path);
    dat_row(f, "iteration", c->meas.iteration_s, c->sim.iteration_s);
    for (int k = 0; k < NKINDS; k++)
        if (kind_present(c, k) && (c->sm.compute_s[k] > 0 || c->ss.compute_s[k] > 0))
            dat_row(f, kind_name(k), per_rank_iter(&c->sm, c->sm.compute_s[k]),
                    per_rank_iter(&c->ss, c->ss.compute_s[k]));
    dat_row(f, "wait", per_rank_iter(&c->sm, c->sm.wait_s[STREAM_COMPUTE]),
            per_rank_iter(&c->ss, c->ss.wait_s[STREAM_COMPUTE]));
}

/* PREFIX.dat through a temporary name. */
static int write_dat(const cmp_t *c, const char *path, char *err)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        snprintf(err, OPT_ERR_LEN, "--plot %.400s: cannot create %.500s (%.200s)", c->prefix, tmp, strerror(errno));
        return -1;
    }
    dat_rows(c, f);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
        snprintf(err, OPT_ERR_LEN, "--plot %.400s: writing %.500s failed (%.200s)", c->prefix, path,
                 strerror(errno));
        remove(tmp);
        return -1;
    }
    return 0;
}

/* gnuplot variables: the job and the headline. */
static void fig_vars(const cmp_t *c, plot_fig_t *fig)
{
    char title[512], sub[256], pct[32];
    snprintf(title, sizeof title, "TP %d x PP %d x DP %d, %d GPUs, %s", c->job.tp, c->job.pp, c->job.dp,
             c->job.num_gpus, device_name(c));
    double m = c->meas.iteration_s, s = c->sim.iteration_s;
    snprintf(sub, sizeof sub, "iteration: measured %.4g s, simulated %.4g s (%s%%); bars per rank on the compute "
             "stream", m, s, fmt_pct(pct, sizeof pct, 0, err_pct(m, s)));
    snprintf(fig->vars, sizeof fig->vars, "title_job=");
    plot_gp_quote(fig->vars, sizeof fig->vars, title);
    strncat(fig->vars, "; subtitle=", sizeof fig->vars - strlen(fig->vars) - 1);
    plot_gp_quote(fig->vars, sizeof fig->vars, sub);
    strncat(fig->vars, "; ", sizeof fig->vars - strlen(fig->vars) - 1);
}

/* PREFIX.png and PREFIX.svg, each through a temporary name; the number of
 * failures. */
static int draw(cmp_t *c, const char *gnuplot, const plot_fig_t *fig)
{
    static const char *const exts[] = {"png", "svg"};
    char script[1100], tmp[1200], out[1100];
    snprintf(script, sizeof script, "%s/compare.gp", c->o.plots_dir);
    if (access(script, R_OK) != 0) {
        fprintf(stderr, "megasim compare: error: %s: no such script (set --plots-dir)\n", script);
        return 1;
    }
    int failures = 0;
    for (int e = 0; e < 2; e++) {
        snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%s", c->prefix, (long)getpid(), exts[e]);
        snprintf(out, sizeof out, "%s.%s", c->prefix, exts[e]);
        int rc = plot_run_gnuplot(gnuplot, script, fig, tmp);
        if (rc == 0 && rename(tmp, out) == 0) {
            fprintf(stderr, "wrote %s\n", out);
            continue;
        }
        fprintf(stderr, "megasim compare: error: gnuplot %s failed (exit %d) drawing %s\n", script, rc, out);
        remove(tmp);
        failures++;
    }
    c->drawn = failures == 0;
    return failures;
}

/* The data always; the drawing when gnuplot is on PATH. -1: the data
 * could not be written (err); else the number of failed drawings. */
static int plot(cmp_t *c, char *err)
{
    static plot_fig_t fig;
    memset(&fig, 0, sizeof fig);
    fig.name = "compare";
    snprintf(fig.dat, sizeof fig.dat, "%s.dat", c->prefix);
    if (write_dat(c, fig.dat, err))
        return -1;
    fprintf(stderr, "wrote %s\n", fig.dat);
    char gnuplot[4096];
    if (!plot_find_gnuplot(gnuplot, sizeof gnuplot)) {
        fprintf(stderr, "megasim compare: gnuplot not found: data written to %s; install gnuplot-nox to draw\n",
                fig.dat);
        return 0;
    }
    fig_vars(c, &fig);
    return draw(c, gnuplot, &fig);
}

/* ---- the command ----------------------------------------------------------- */

static int load(cmp_t *c, char *err)
{
    if (read_run(c, err) || rebuild_job(c, err) || check_rows(c, &c->meas, c->run_path, err))
        return -1;
    if (c->sim_path ? read_sim(c, err) || check_rows(c, &c->sim, c->sim_path, err) : simulate(c, err))
        return -1;
    if (pick_ranks(c, err))
        return -1;
    stats_of(c, &c->meas, &c->sm);
    stats_of(c, &c->sim, &c->ss);
    return 0;
}

static void cmp_free(cmp_t *c)
{
    free(c->meas.ops), free(c->meas.ranks), free(c->sim.ops), free(c->sim.ranks);
    free(c->steps), free(c->rank_on);
    cJSON_Delete(c->config);
}

/* Reads with HDF5's own error printing off: our message replaces it. */
static int load_quiet(cmp_t *c, char *err)
{
    H5E_auto2_t old_fn = NULL;
    void *old_data = NULL;
    H5Eget_auto2(H5E_DEFAULT, &old_fn, &old_data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    int rc = load(c, err);
    H5Eset_auto2(H5E_DEFAULT, old_fn, old_data);
    return rc;
}

int cmd_compare(int argc, char **argv)
{
    if (cli_wants_help(argc, argv))
        return 0;
    static cmp_t c;
    memset(&c, 0, sizeof c);
    char err[OPT_ERR_LEN];
    if (parse(argc, argv, &c, err) || load_quiet(&c, err)) {
        cmp_free(&c);
        return cli_fail("compare", err);
    }
    if (c.o.plot[0])
        snprintf(c.prefix, sizeof c.prefix, "%s", c.o.plot);
    else
        default_prefix(c.run_path, c.prefix, sizeof c.prefix);
    int failures = plot(&c, err); /* before the report: a bad --plot leaves stdout empty */
    if (failures < 0) {
        cmp_free(&c);
        return cli_fail("compare", err);
    }
    if (c.o.json)
        cli_print_json(json_report(&c));
    else
        print_text(&c);
    cmp_free(&c);
    return failures ? 1 : 0;
}
