/* compare_load: the two sides of `megasim compare`: RUN.h5's timeline,
 * ranks and steps; SIM.h5's, or an in-process simulation of the job and
 * hardware RUN.h5 records (with the closed form); then the per-kind and
 * per-stream sums over the ranks and iterations both sides cover. */
#include "cmd/compare.h"

#include "cmd/cli.h"
#include "sim/out.h"
#include "model/estimate.h"
#include "sim/engine.h"
#include "cmd/plot_data.h"
#include "cmd/replay.h"

#include <hdf5.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OC(f, i) {#f, offsetof(op_row_t, f), i}
static const plot_col_t op_cols[] = {OC(rank, 1),      OC(stream, 1),  OC(kind, 1),     OC(t_ready_s, 0),
                                     OC(t_start_s, 0), OC(t_end_s, 0), OC(iteration, 1), OC(a2a_s, 0)};
#define KC(f, i) {#f, offsetof(rank_row_t, f), i}
static const plot_col_t rank_cols[] = {KC(rank, 1), KC(stands_for, 1), KC(end_s, 0)};
#define SC(f, i) {#f, offsetof(step_row_t, f), i}
static const plot_col_t step_cols[] = {SC(step, 1), SC(step_time_s, 0), SC(moe_load_cv, 0)};

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
    if (!rc)
        rc = out_h5_attr_json(*file, path, "config_json", config, err, OPT_ERR_LEN);
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

/* /timeline and /ranks; a simulation's timeline may lack `iteration`, a
 * file from before 2026-11-29 `a2a_s` (read as 0). */
static int read_side(hid_t f, const char *path, side_t *s, char *err)
{
    plot_col_t cols[sizeof op_cols / sizeof op_cols[0]];
    int ncols = 0;
    for (size_t i = 0; i < sizeof op_cols / sizeof op_cols[0]; i++)
        if (i < 6 || plot_has_column(f, "/timeline", op_cols[i].name))
            cols[ncols++] = op_cols[i];
    void *ops, *ranks;
    if (need_table(f, path, "/timeline", cols, ncols, sizeof(op_row_t), &ops, &s->nops, err))
        return -1;
    s->ops = ops;
    if (need_table(f, path, "/ranks", rank_cols, 3, sizeof(rank_row_t), &ranks, &s->nranks, err))
        return -1;
    s->ranks = ranks;
    return 0;
}

/* The mean of a step column (its time, or its load CV) over the steps
 * after the first, or the one step. */
static double mean_step(const cmp_t *c, int load_cv)
{
    long a = c->nsteps > 1 ? 1 : 0;
    double sum = 0;
    for (long i = a; i < c->nsteps; i++)
        sum += load_cv ? c->steps[i].moe_load_cv : c->steps[i].step_time_s;
    return sum / (double)(c->nsteps - a);
}

static int read_run(cmp_t *c, char *err)
{
    hid_t f;
    void *steps;
    if (open_kind(c->run_path, "measurement", &f, &c->config, err))
        return -1;
    int cv = plot_has_column(f, "/iterations", "moe_load_cv") > 0; /* files from before 2026-11-29: none */
    int rc = read_side(f, c->run_path, &c->meas, err) ||
             need_table(f, c->run_path, "/iterations", step_cols, 2 + cv, sizeof(step_row_t), &steps, &c->nsteps,
                        err);
    if (!rc)
        c->steps = steps;
    if (!rc && c->nsteps < 1) {
        snprintf(err, OPT_ERR_LEN, "%s: /iterations has no rows: the run measured no step", c->run_path);
        rc = -1;
    }
    for (long i = 0; !rc && i < c->nsteps; i++)
        if (!(isfinite(c->steps[i].step_time_s) && c->steps[i].step_time_s > 0)) {
            snprintf(err, OPT_ERR_LEN, "%s: /iterations row %ld: step_time_s = %g is not a positive time",
                     c->run_path, i, c->steps[i].step_time_s);
            rc = -1;
        }
    for (long i = 0; !rc && i < c->nsteps; i++)
        if (!(isfinite(c->steps[i].moe_load_cv) && c->steps[i].moe_load_cv >= 0)) {
            snprintf(err, OPT_ERR_LEN, "%s: /iterations row %ld: moe_load_cv = %g is not a coefficient of variation "
                     "(finite, at least 0)", c->run_path, i, c->steps[i].moe_load_cv);
            rc = -1;
        }
    if (!rc)
        c->meas.iteration_s = mean_step(c, 0), c->cv_measured = mean_step(c, 1);
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

/* --hardware FILE: the job's --gpu/--cluster built-ins under FILE's
 * sections, with the job's own overrides (NICs, oversubscription), as a
 * run with --hardware FILE would have recorded. A node of another size
 * than the run's would place its ranks differently: refused. */
static int other_hardware(cmp_t *c, char *err)
{
    int node = c->hw.cluster.gpus_per_node;
    snprintf(c->job.hardware, sizeof c->job.hardware, "%s", c->o.hardware);
    if (job_hardware(&c->job, &c->hw, err))
        return -1;
    if (c->hw.cluster.gpus_per_node != node) {
        snprintf(err, OPT_ERR_LEN, "--hardware %s: gpus_per_node = %d, but the run's nodes had %d", c->o.hardware,
                 c->hw.cluster.gpus_per_node, node);
        return -1;
    }
    return 0;
}

/* The job over the defaults, the hardware as recorded (overrides applied),
 * then the rules and derived fields; or on --hardware FILE. */
static int rebuild_job(cmp_t *c, char *err)
{
    char origin[1100], where[1200];
    snprintf(origin, sizeof origin, "%s: config_json", c->run_path);
    snprintf(where, sizeof where, "%s job", origin);
    job_base_t base = {cJSON_GetObjectItemCaseSensitive(c->config, "job"), NULL, NULL, where, NULL};
    char *no_args[] = {NULL};
    if (job_parse_over(&c->job, &base, 0, no_args, NULL, NULL, err) ||
        replay_hardware(c->config, origin, &c->hw, err) || job_finalize(&c->job, c->hw.cluster.gpus_per_node, err))
        return -1;
    return c->o.hardware[0] ? other_hardware(c, err) : 0;
}

/* ---- the in-process simulation ----------------------------------------- */

static int side_from_result(const result_t *r, side_t *s, char *err)
{
    s->nops = r->ntimeline, s->nranks = r->entities;
    s->ops = calloc(s->nops ? (size_t)s->nops : 1, sizeof *s->ops);
    s->ranks = calloc(s->nranks ? (size_t)s->nranks : 1, sizeof *s->ranks);
    if (!s->ops || !s->ranks) {
        snprintf(err, OPT_ERR_LEN, "out of memory for %ld simulated ops", r->ntimeline);
        return -1;
    }
    for (long i = 0; i < r->ntimeline; i++) {
        const result_op_t *o = &r->timeline[i];
        s->ops[i] = (op_row_t){o->rank, o->stream, o->kind, o->t_ready_ns * 1e-9, o->t_start_ns * 1e-9,
                               o->t_end_ns * 1e-9, 0, o->t_a2a_ns * 1e-9};
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
    result_t r;
    if (sim_run(&c->job, &c->hw, &o, &r, err, OPT_ERR_LEN))
        return -1;
    int rc = side_from_result(&r, &c->sim, err);
    c->sim.closed_form_s = e.iteration_s;
    result_free(&r);
    return rc;
}

/* ---- statistics ---------------------------------------------------------- */

/* Every row names a rank of the job, a stream and an op kind; a
 * measurement (every_rank) has one /ranks row for each rank of its job. */
static int check_rows(const cmp_t *c, const side_t *s, const char *path, int every_rank, char *err)
{
    if (every_rank && s->nranks != c->job.num_gpus) {
        snprintf(err, OPT_ERR_LEN, "%s: /ranks has %ld rows, but its configuration is a %d-rank job (a measurement "
                 "has one row per rank); the file is inconsistent", path, s->nranks, c->job.num_gpus);
        return -1;
    }
    if (every_rank && s->nops == 0) { /* F09: its statistics would all be 0/0 */
        snprintf(err, OPT_ERR_LEN, "%s: /timeline has no rows; a measurement records every op of its traced "
                 "iterations, so the file is inconsistent", path);
        return -1;
    }
    for (long i = 0; i < s->nops; i++) {
        const op_row_t *o = &s->ops[i];
        if (o->rank < 0 || o->rank >= c->job.num_gpus || o->stream < 0 || o->stream >= STREAM_COUNT ||
            o->kind < 0 || o->kind >= NKINDS || o->iteration < 0 || o->iteration > CMP_MAX_ITERATION) {
            snprintf(err, OPT_ERR_LEN, "%s: /timeline row %ld: rank %d, stream %d, kind %d, iteration %d is not "
                     "an op of this %d-rank job (iterations 0 to %d)", path, i, o->rank, o->stream, o->kind,
                     o->iteration, c->job.num_gpus, CMP_MAX_ITERATION);
            return -1;
        }
        if (!isfinite(o->t_ready_s) || !isfinite(o->t_start_s) || !isfinite(o->t_end_s)) { /* F09 */
            snprintf(err, OPT_ERR_LEN, "%s: /timeline row %ld: times %g, %g, %g s are not all finite", path, i,
                     o->t_ready_s, o->t_start_s, o->t_end_s);
            return -1;
        }
    }
    for (long i = 0; i < s->nranks; i++) {
        if (!isfinite(s->ranks[i].end_s)) {
            snprintf(err, OPT_ERR_LEN, "%s: /ranks row %ld: end_s = %g is not a finite time", path, i,
                     s->ranks[i].end_s);
            return -1;
        }
        if (s->ranks[i].rank < 0 || s->ranks[i].rank >= c->job.num_gpus) {
            snprintf(err, OPT_ERR_LEN, "%s: /ranks row %ld: rank %d is not a rank of this %d-rank job", path, i,
                     s->ranks[i].rank, c->job.num_gpus);
            return -1;
        }
        for (long k = 0; every_rank && k < i; k++)
            if (s->ranks[k].rank == s->ranks[i].rank) {
                snprintf(err, OPT_ERR_LEN, "%s: /ranks rows %ld and %ld are both rank %d; the file is inconsistent",
                         path, k, i, s->ranks[i].rank);
                return -1;
            }
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
            st->compute_s[o->kind] += dur, st->compute_wait_s[o->kind] += wait;
        st->busy_s[o->stream] += dur, st->wait_s[o->stream] += wait;
        if (isfinite(o->a2a_s) && o->a2a_s > 0)
            st->a2a_s += o->a2a_s, st->a2a_n++;
        st->niters += !seen_iter[o->iteration], seen_iter[o->iteration] = 1;
        st->nranks += !seen_rank[o->rank], seen_rank[o->rank] = 1;
    }
    free(seen_iter);
    free(seen_rank);
}

const char *cmp_cfg_str(const cJSON *root, const char *sec, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, sec), key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

double cmp_run_num(const cmp_t *c, const char *key)
{
    /* measurements before 2026-11-26 put the run's options under "simulate" */
    const cJSON *run = cJSON_GetObjectItemCaseSensitive(c->config, "run");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(run ? run : cJSON_GetObjectItemCaseSensitive(c->config, "simulate"), key);
    return cJSON_IsNumber(v) ? v->valuedouble : 0.0;
}

/* A CPU run with more ranks on a host than it has cores (runs before
 * 2026-11-29 recorded neither: 0) time-shares them: each rank's compute
 * runs at cores / ranks of a core (processor sharing; its waiting ranks
 * poll MPI, so all stay runnable). --host-share run prices that in the
 * in-process simulation: every rank's compute ranks / cores times slower
 * (hw_host_share); none prices a core each. */
static void price_host_share(cmp_t *c)
{
    double ranks = cmp_run_num(c, "host_ranks"), cores = cmp_run_num(c, "host_cores");
    c->host_share = !strcmp(cmp_cfg_str(c->config, "run", "device"), "cpu") && cores > 0 && ranks > cores
                        ? ranks / cores : 0;
    if (c->host_share > 1 && !c->sim_path && c->o.share_from == CMP_SHARE_RUN)
        c->hw.cluster.host_share = c->host_share, c->share_priced = 1;
}

/* --moe-load-cv run: an MoE job that gave no imbalance simulated at the
 * one its run measured (the model's CV and the run's are the same
 * statistic: the experts' token loads in a micro-batch, model/moe.h). */
static void price_measured_cv(cmp_t *c)
{
    if (c->sim_path || c->o.cv_from != CMP_CV_RUN || c->job.num_experts <= 0 || c->job.moe_load_cv > 0 ||
        c->cv_measured <= 0)
        return;
    c->job.moe_load_cv = fmin(c->cv_measured, 10); /* the flag's range */
    c->cv_priced = 1;
}

static int load(cmp_t *c, char *err)
{
    if (read_run(c, err) || rebuild_job(c, err) || check_rows(c, &c->meas, c->run_path, 1, err))
        return -1;
    price_measured_cv(c);
    price_host_share(c);
    if (c->sim_path ? read_sim(c, err) || check_rows(c, &c->sim, c->sim_path, 0, err) : simulate(c, err))
        return -1;
    if (pick_ranks(c, err))
        return -1;
    stats_of(c, &c->meas, &c->sm);
    stats_of(c, &c->sim, &c->ss);
    return 0;
}

void cmp_free(cmp_t *c)
{
    free(c->meas.ops), free(c->meas.ranks), free(c->sim.ops), free(c->sim.ranks);
    free(c->steps), free(c->rank_on);
    cJSON_Delete(c->config);
}

/* Reads with HDF5's own error printing off: our message replaces it. */
int cmp_load(cmp_t *c, char *err)
{
    H5E_auto2_t old_fn = NULL;
    void *old_data = NULL;
    H5Eget_auto2(H5E_DEFAULT, &old_fn, &old_data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    int rc = load(c, err);
    H5Eset_auto2(H5E_DEFAULT, old_fn, old_data);
    return rc;
}
