/* cmd_goodput: `megasim goodput`: a whole training run under faults. The
 * healthy iteration comes from the closed form (predict's keys), the cost
 * of a slow host from the simulator, the fault model from the hardware
 * profile's "faults" section (model/fault.h), and the run from a seeded
 * Monte Carlo (sim/goodput.h) split over MPI ranks under mpirun, with the
 * same bytes out for any rank count. Prints ETTR, wall-clock days,
 * interruptions by cause, lost time by category, the best checkpoint
 * interval from a sweep beside Young/Daly's, the analytic expectation, and
 * what spares and straggler eviction change. */
#include "cmd/goodput.h"

#include "cmd/cli.h"
#include "cmd/plot_data.h"
#include "model/layout.h"
#include "model/report.h"
#include "real/rt.h"
#include "sim/engine.h"
#include "sim/out.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef MEGASIM_PLOTS_DIR
#define MEGASIM_PLOTS_DIR "plots"
#endif

#define GO(f) offsetof(goodput_opts_t, f)
static const opt_def goodput_defs[] = {
    {"tokens", OPT_REAL, GO(tokens), 1e3, 1e16, "0", OPT_ZERO_OK, "goodput",
     "tokens to train: the run ends when they are done (0: --train-days)"},
    {"train-days", OPT_REAL, GO(train_days), 1e-3, 3650, "0", OPT_ZERO_OK, "goodput",
     "wall-clock days booked: the run ends then (0 and no --tokens: 30, MegaScale's several weeks)"},
    {"trials", OPT_INT, GO(trials), 1, 10000000, "10000", 0, "goodput", "Monte Carlo trials of the whole run"},
    {"sweep-trials", OPT_INT, GO(sweep_trials), 1, 10000000, "1000", 0, "goodput",
     "trials per point of the checkpoint-interval sweep and of each what-if"},
    {"seed", OPT_INT, GO(seed), 0, 2147483647, "1", 0, "goodput", "seed of the trials' generators (GSL MT19937)"},
    {"checkpoint-interval-s", OPT_STR, GO(interval), 1, 64, "auto", 0, "goodput",
     "training seconds between checkpoints, 1 to 1e8, or auto: the best of the sweep"},
    {"spare-fraction", OPT_REAL, GO(spare_fraction), 0, 10, "0.02", 0, "goodput",
     "spare nodes as a share of the job's nodes, rounded up (an evicted node is repaired in the profile's "
     "repair_h; with none free the job waits). 2%: the slow hosts evicted early (0.5%) and two days' "
     "evictions at Llama 3's rates (0.6%), twice over"},
    {"unlimited-spares", OPT_BOOL, GO(unlimited_spares), 0, 1, "false", 0, "goodput",
     "a spare is always free (the analytic model's assumption)"},
    {"evict-stragglers", OPT_BOOL, GO(evict_stragglers), 0, 1, "true", 0, "goodput",
     "the straggler detector evicts slow hosts (--no-evict-stragglers: they stay and pace every iteration)"},
    {"fault-rate-scale", OPT_REAL, GO(rate_scale), 1e-3, 1e3, "1", 0, "goodput",
     "multiplies every failure rate of the profile"},
    {"init-design", OPT_ENUM, GO(init_design), 0, 0, "profile", "profile|tcpstore|redis|nobarrier", "goodput",
     "collective initialisation at each restart (profile: the fault model's init_design)"},
    {"ckpt-load", OPT_ENUM, GO(ckpt_load), 0, 0, "profile", "profile|one-per-dp-group|every-rank", "goodput",
     "checkpoint load at each restart (profile: the fault model's ckpt_load)"},
    {"replay", OPT_STR, GO(replay), 1, 1024, "", 0, "input",
     "start from the job, hardware profile (its fault model) and goodput options recorded in RESULT (.h5 from "
     "goodput, simulate or run --out, or a --json output); files and flags apply over them"},
    {"json", OPT_BOOL, GO(json), 0, 1, "false", 0, "output", "print one JSON object instead of the report"},
    {"out", OPT_STR, GO(out), 1, 1024, "", 0, "output",
     "write FILE.h5: the configuration, the --json object, the interval sweep as columns"},
    {"plot", OPT_STR, GO(plot), 1, 1024, "", 0, "output",
     "draw PREFIX.png and PREFIX.svg (ETTR vs checkpoint interval; lost time stacked by cause) from "
     "PREFIX-interval.dat and PREFIX-lost.dat"},
    {"plots-dir", OPT_STR, GO(plots_dir), 1, 1024, MEGASIM_PLOTS_DIR, 0, "output",
     "the folder of the gnuplot scripts (goodput.gp)"},
    {"help", OPT_BOOL, GO(help), 0, 1, "false", 0, "output", "show this help"},
};
const opt_table goodput_opts = {goodput_defs, sizeof goodput_defs / sizeof goodput_defs[0], "goodput option"};

/* ---- statistics --------------------------------------------------------- */

/* -1: out of memory; -2: a trial reached its cap of interruptions. */
static int stats(const gp_trial_t *t, long n, gp_stats_t *s)
{
    memset(s, 0, sizeof *s);
    for (long i = 0; i < n; i++)
        if (t[i].capped)
            return -2;
    double *e = malloc(sizeof *e * n), sum = 0, sq = 0;
    if (!e)
        return -1;
    for (long i = 0; i < n; i++) {
        e[i] = t[i].wall_s > 0 ? t[i].useful_s / t[i].wall_s : 1;
        sum += e[i];
        s->wall_days += t[i].wall_s / 86400 / n;
        s->useful_days += t[i].useful_s / 86400 / n;
        for (int k = 0; k < LOST_N; k++)
            s->lost_h[k] += t[i].lost_s[k] / 3600 / n;
        for (int k = 0; k < FAULT_NCAUSES; k++) {
            s->interruptions[k] += (double)t[i].interruptions[k] / n;
            s->restarts += (double)t[i].interruptions[k] / n;
        }
    }
    s->n = n;
    s->ettr = sum / n;
    for (long i = 0; i < n; i++)
        sq += (e[i] - s->ettr) * (e[i] - s->ettr);
    double half = n > 1 ? 1.96 * sqrt(sq / (n - 1) / n) : 0;
    s->ettr_lo = s->ettr - half, s->ettr_hi = s->ettr + half;
    qsort(e, n, sizeof *e, cli_cmp_double);
    s->runs_lo = e[(long)floor(0.025 * (n - 1))], s->runs_hi = e[(long)ceil(0.975 * (n - 1))];
    free(e);
    return 0;
}

/* Trials 0 .. trials-1 of each model, split over the ranks; every rank
 * gets every result and the statistics (the same bytes on each). 0, -1
 * (out of memory) or -2 (a trial reached its cap). */
static int monte_carlo(const cli_mpi_t *w, const gp_model_t *models, int nm, long trials, gp_stats_t *out)
{
    long total = nm * trials, first, count;
    cli_mpi_block(w, total, &first, &count);
    gp_trial_t *mine = malloc(sizeof *mine * (count ? count : 1)), *all = malloc(sizeof *all * total);
    int rc = !mine || !all;
    /* my block, a model at a time */
    for (long i = first; !rc && i < first + count;) {
        long m = i / trials, k = i % trials, n = trials - k < first + count - i ? trials - k : first + count - i;
        rc = gp_run_trials(&models[m], k, n, mine + (i - first));
        i += n;
    }
    rc = rc || cli_mpi_allgather_blocks(w, mine, all, total, sizeof *all) ? -1 : 0;
    for (int m = 0; !rc && m < nm; m++)
        rc = stats(all + m * trials, trials, &out[m]);
    free(mine);
    free(all);
    return rc;
}

/* ---- the model ------------------------------------------------------------ */

/* The restart path's view of the job: its shape and checkpoint sizes.
 * A GPU's state is what the memory model holds for it at its peak stage
 * (weights, and Adam's fp32 master and moments, sharded over DP with the
 * distributed optimizer); the whole checkpoint is one copy of every
 * parameter's weight and optimizer bytes. */
static void fault_job(const job_t *j, const hw_t *hw, const estimate_t *e, fault_job_t *fj)
{
    const hw_cluster_t *c = &hw->cluster;
    fj->num_gpus = j->num_gpus, fj->gpus_per_node = c->gpus_per_node;
    fj->tp = j->tp, fj->pp = j->pp, fj->dp = j->dp;
    fj->nic_gbytes_per_gpu = c->nics_per_node * c->nic_gbit / 8 / c->gpus_per_node;
    fj->ckpt_gpu_bytes = e->mem.weights_bytes + e->mem.optimizer_bytes;
    fj->ckpt_unique_bytes = e->work.params_total * (job_weight_bytes(j) + job_optim_bytes(j));
}

/* The simulator's iteration with every GPU of node 0 slowed by factor
 * (one slow host paces a synchronous job), and without. */
static int slow_host_cost(const job_t *job, const hw_t *hw, double factor, double *slow_s, double *healthy_s,
                          char *err)
{
    static sim_opts_t o;
    result_t r;
    for (int pass = 0; pass < 2; pass++) {
        memset(&o, 0, sizeof o);
        o.fold = 1;
        for (int g = 0; pass && g < hw->cluster.gpus_per_node && g < job->num_gpus; g++)
            o.slow_ranks[o.nslow_ranks++] = (sim_slow_t){g, factor};
        if (sim_run(job, hw, &o, &r, err, OPT_ERR_LEN))
            return -1;
        *(pass ? slow_s : healthy_s) = r.iteration_ns * 1e-9;
        result_free(&r);
    }
    return 0;
}

static int setup(int argc, char **argv, gp_result_t *R, char *err)
{
    goodput_opts_t *o = &R->o;
    if (cli_job_setup("goodput", argc - 1, argv + 1, &goodput_opts, o, &R->job, &R->hw))
        return 2;
    hw_faults_t *f = &R->hw.faults;
    if (!f->present) {
        snprintf(err, OPT_ERR_LEN, "the hardware profile's cluster '%s' has no fault model: its file gives a cluster "
                 "section without a \"base\" and no \"faults\" section; add \"faults\": {\"base\": \"megascale\"} "
                 "(or fattree) or every field (megasim hardware --cluster megascale prints them)",
                 R->hw.cluster.name);
        return -1;
    }
    if (o->tokens > 0 && o->train_days > 0) {
        snprintf(err, OPT_ERR_LEN, "--tokens %g and --train-days %g both end the run; give one (--tokens: how long "
                 "they take; --train-days: what a booking trains)", o->tokens, o->train_days);
        return -1;
    }
    R->train_days = o->tokens > 0 ? 0 : o->train_days > 0 ? o->train_days : 30;
    char *end;
    o->interval_s = strcmp(o->interval, "auto") ? strtod(o->interval, &end) : 0;
    if (strcmp(o->interval, "auto") && (end == o->interval || *end || !(o->interval_s >= 1 && o->interval_s <= 1e8))) {
        snprintf(err, OPT_ERR_LEN, "--checkpoint-interval-s = '%s'; allowed: auto (the best of the sweep) or 1 to "
                 "1e8 seconds of training between checkpoints", o->interval);
        return -1;
    }
    if (o->init_design)
        f->init_design = o->init_design - 1;
    if (o->ckpt_load)
        f->ckpt_load = o->ckpt_load - 1;
    if (o->plot[0] && plot_check_scripts_dir(o->plots_dir, "goodput.gp", err, OPT_ERR_LEN))
        return -1;
    char dats[2][1100];
    snprintf(dats[0], sizeof dats[0], "%s-interval.dat", o->plot);
    snprintf(dats[1], sizeof dats[1], "%s-lost.dat", o->plot);
    const char *flags[] = {"--out", "--plot's data file", "--plot's data file"};
    const char *paths[] = {o->out, o->plot[0] ? dats[0] : "", o->plot[0] ? dats[1] : ""};
    return out_check_paths(3, flags, paths, err, OPT_ERR_LEN) ? -1 : 0;
}

static void build_model(gp_result_t *R)
{
    const hw_faults_t *f = &R->hw.faults;
    gp_model_t *m = &R->model;
    fault_costs_t *c = &m->cost;
    memset(m, 0, sizeof *m);
    fault_costs(f, &R->fj, c);
    R->nodes = layout_nodes(R->job.num_gpus, R->hw.cluster.gpus_per_node);
    R->spares = (int)ceil(R->o.spare_fraction * R->nodes - 1e-9);
    m->nodes = R->nodes;
    m->spare_nodes = R->o.unlimited_spares ? -1 : R->spares;
    m->evict_stragglers = R->o.evict_stragglers;
    m->slow_host_fraction = f->slow_host_fraction;
    m->slow_ratio = R->slow_iteration_s / R->sim_iteration_s;
    m->repair_s = f->repair_h * 3600;
    m->seed = (uint64_t)R->o.seed;
    if (R->o.tokens > 0)
        m->work_s = R->o.tokens / R->e.tokens_per_s;
    else
        m->wall_limit_s = R->train_days * 86400;
    R->rate_per_s = R->down_s = 0;
    for (int i = 0; i < FAULT_NRATES; i++) {
        m->rate_per_s[i] = fault_rate_per_s(f, i, R->nodes) * R->o.rate_scale;
        m->recover[i] = f->recover[i];
        double down = c->detect_s[i] + c->diagnose_s[i] + c->relaunch_s + c->init_s + c->load_s +
                      (f->recover[i] == RECOVER_REPAIR ? c->repair_wait_s : 0);
        R->rate_per_s += m->rate_per_s[i];
        R->down_s += m->rate_per_s[i] * down;
    }
    R->down_s /= R->rate_per_s > 0 ? R->rate_per_s : 1;
    /* Young/Daly with stage one (stage two runs behind training). */
    R->young_daly_s = R->rate_per_s > 0 ? fault_young_daly_s(c->stage1_s, R->rate_per_s) : 86400;
    for (int d = 0; d < 3; d++)
        for (int s = 0; s < 2; s++) {
            fault_job_t at = R->fj;
            at.num_gpus = s ? 12288 : 2048;
            at.dp = at.num_gpus / (at.tp * at.pp) > 0 ? at.num_gpus / (at.tp * at.pp) : 1;
            R->init_s[d][s] = fault_init_s(f, &at, d);
        }
    for (int d = 0; d < 2; d++)
        R->load_s[d] = fault_load_s(f, &R->fj, d);
}

/* The renewal-reward expectation at an interval (spares never short;
 * stragglers as a constant slowdown when they are kept). */
static fault_renewal_t renewal_at(const gp_result_t *R, double interval_s)
{
    const gp_model_t *m = &R->model;
    double p_slow = 1 - pow(1 - m->slow_host_fraction, m->nodes);
    double slow = m->evict_stragglers ? 1 : 1 + p_slow * (m->slow_ratio - 1);
    gp_model_t at = *m;
    at.interval_s = interval_s;
    return (fault_renewal_t){R->rate_per_s, R->down_s, interval_s, gp_stall_s(&at, slow), slow};
}

/* The interval of the sweep's highest ETTR, refined by the vertex of a
 * parabola (least squares, in log interval) through the 7 points around
 * it: the curve is flat near its top, where single points are noisy. */
static double best_interval(const gp_sweep_t *sw)
{
    int b = 0;
    for (int k = 1; k < GP_SWEEP; k++)
        if (sw[k].st.ettr > sw[b].st.ettr)
            b = k;
    int lo = b - 3 < 0 ? 0 : b - 3, hi = lo + 6 < GP_SWEEP ? lo + 6 : GP_SWEEP - 1;
    lo = hi - 6;
    double S[5] = {0}, T[3] = {0};
    for (int k = lo; k <= hi; k++) {
        double x = log(sw[k].interval_s / sw[b].interval_s), y = sw[k].st.ettr, p = 1;
        for (int q = 0; q < 5; q++, p *= x)
            S[q] += p, T[q < 3 ? q : 2] += q < 3 ? p * y : 0;
    }
    /* normal equations [S0 S1 S2; S1 S2 S3; S2 S3 S4] c = T, by Cramer */
    double A[3][3] = {{S[0], S[1], S[2]}, {S[1], S[2], S[3]}, {S[2], S[3], S[4]}};
    double det = A[0][0] * (A[1][1] * A[2][2] - A[1][2] * A[2][1]) - A[0][1] * (A[1][0] * A[2][2] - A[1][2] * A[2][0]) +
                 A[0][2] * (A[1][0] * A[2][1] - A[1][1] * A[2][0]);
    double d1 = A[0][0] * (T[1] * A[2][2] - A[1][2] * T[2]) - T[0] * (A[1][0] * A[2][2] - A[1][2] * A[2][0]) +
                A[0][2] * (A[1][0] * T[2] - T[1] * A[2][0]);
    double d2 = A[0][0] * (A[1][1] * T[2] - T[1] * A[2][1]) - A[0][1] * (A[1][0] * T[2] - T[1] * A[2][0]) +
                T[0] * (A[1][0] * A[2][1] - A[1][1] * A[2][0]);
    if (!(fabs(det) > 0) || !(d2 / det < 0))
        return sw[b].interval_s;
    double x = -d1 / (2 * d2);
    double xlo = log(sw[lo].interval_s / sw[b].interval_s), xhi = log(sw[hi].interval_s / sw[b].interval_s);
    return sw[b].interval_s * exp(fmin(xhi, fmax(xlo, x)));
}

/* Interruptions a trial expects at an interval (renewal model): over a
 * booking, its wall time over a mean cycle of MTBF + recovery; over a
 * piece of work, exp(rate L) - 1 failures per interval of it. */
static double expected_interruptions(const gp_result_t *R, double interval_s)
{
    fault_renewal_t rn = renewal_at(R, interval_s);
    double r = R->rate_per_s, L = rn.slow * interval_s + rn.stall_s;
    if (R->model.wall_limit_s > 0)
        return R->model.wall_limit_s * r / (1 + r * R->down_s) + 1;
    return R->model.work_s / interval_s * expm1(r * L) + 1;
}

#define GP_MAX_EVENTS 1e9 /* about 100 s of this machine's trials */

/* Refuses a run whose trials would play more interruptions than
 * GP_MAX_EVENTS in all (or that never ends), and sets the per-trial cap
 * that guards against the rest: 20 times the worst expectation. */
static int budget(gp_result_t *R, const double *sweep_s, char *err)
{
    double main_n = expected_interruptions(R, R->o.interval_s > 0 ? R->o.interval_s : R->young_daly_s), worst = main_n;
    double total = main_n * (R->o.trials + (double)GP_WHATIF * R->o.sweep_trials);
    for (int k = 0; k < GP_SWEEP; k++) {
        double n = expected_interruptions(R, sweep_s[k]);
        worst = fmax(worst, n), total += n * R->o.sweep_trials;
    }
    if (!(total <= GP_MAX_EVENTS)) {
        snprintf(err, OPT_ERR_LEN, "this run would play about %.3g interruptions in all (%.3g per trial at the "
                 "checkpoint interval, up to %.3g in the sweep; MTBF %.4g s, mean recovery %.4g s), past the %.0e "
                 "allowed: lower --trials or --sweep-trials, shorten the run, or check the fault model's rates and "
                 "times (a recovery much longer than the MTBF never lets the run finish)", total, main_n, worst,
                 1 / R->rate_per_s, R->down_s, GP_MAX_EVENTS);
        return -1;
    }
    R->model.max_interruptions = (long)fmin(1e9, 20 * worst + 1000);
    return 0;
}

/* monte_carlo's failure as a message. */
static int mc_fail(int rc, const gp_result_t *R, char *err)
{
    if (rc == -2)
        snprintf(err, OPT_ERR_LEN, "a trial reached %ld interruptions, 20 times what the analytic model expects: "
                 "the fault model (MTBF %.4g s, mean recovery %.4g s) leaves the run almost no time to train; check "
                 "its rates and times", R->model.max_interruptions, 1 / R->rate_per_s, R->down_s);
    else
        snprintf(err, OPT_ERR_LEN, "out of memory for %d trials", R->o.trials > R->o.sweep_trials * GP_SWEEP
                                                                      ? R->o.trials : R->o.sweep_trials * GP_SWEEP);
    return -1;
}

static int run(const cli_mpi_t *w, gp_result_t *R, char *err)
{
    gp_model_t models[GP_SWEEP > GP_WHATIF ? GP_SWEEP : GP_WHATIF];
    gp_stats_t st[GP_SWEEP];
    double sweep_s[GP_SWEEP];
    for (int k = 0; k < GP_SWEEP; k++)
        sweep_s[k] = R->young_daly_s * pow(8, (k - (GP_SWEEP - 1) / 2) / ((GP_SWEEP - 1) / 2.0));
    if (budget(R, sweep_s, err))
        return -1;
    for (int k = 0; k < GP_SWEEP; k++) {
        models[k] = R->model;
        models[k].interval_s = R->sweep[k].interval_s = sweep_s[k];
        fault_renewal_t rn = renewal_at(R, sweep_s[k]);
        R->sweep[k].analytic = fault_ettr_renewal(&rn);
    }
    int rc = monte_carlo(w, models, GP_SWEEP, R->o.sweep_trials, st);
    if (rc)
        return mc_fail(rc, R, err);
    for (int k = 0; k < GP_SWEEP; k++)
        R->sweep[k].st = st[k];
    R->best_interval_s = best_interval(R->sweep);
    R->interval_s = R->o.interval_s > 0 ? R->o.interval_s : R->best_interval_s;
    R->model.interval_s = R->interval_s;
    fault_renewal_t rn = renewal_at(R, R->interval_s);
    R->analytic = fault_ettr_renewal(&rn);
    R->first_order = fault_ettr_first_order(&rn);
    double t0 = rt_now_ns() * 1e-9;
    if ((rc = monte_carlo(w, &R->model, 1, R->o.trials, &R->main)))
        return mc_fail(rc, R, err);
    R->main_s = rt_now_ns() * 1e-9 - t0;
    /* What-ifs at the same interval: no spares, a spare always free, slow
     * hosts kept (when there are any to keep). */
    static const char *const names[GP_WHATIF] = {"no_spares", "unlimited_spares", "stragglers_kept"};
    R->nwhatif = R->model.slow_host_fraction > 0 && R->model.evict_stragglers ? 3 : 2;
    for (int k = 0; k < R->nwhatif; k++) {
        models[k] = R->model;
        R->whatif[k].name = names[k];
    }
    models[0].spare_nodes = 0, models[1].spare_nodes = -1, models[2].evict_stragglers = 0;
    if ((rc = monte_carlo(w, models, R->nwhatif, R->o.sweep_trials, st)))
        return mc_fail(rc, R, err);
    for (int k = 0; k < R->nwhatif; k++)
        R->whatif[k].st = st[k];
    return 0;
}

static int goodput_main(const cli_mpi_t *w, int argc, char **argv)
{
    static gp_result_t R;
    char err[OPT_ERR_LEN];
    double t0 = rt_now_ns() * 1e-9;
    memset(&R, 0, sizeof R);
    int rc = setup(argc, argv, &R, err);
    if (rc)
        return rc == 2 ? 2 : (w->rank ? 2 : cli_fail("goodput", err));
    estimate_job(&R.job, &R.hw, &R.e);
    fault_job(&R.job, &R.hw, &R.e, &R.fj);
    if (slow_host_cost(&R.job, &R.hw, R.hw.faults.slow_host_factor, &R.slow_iteration_s, &R.sim_iteration_s, err) ||
        (build_model(&R), run(w, &R, err)))
        return w->rank ? 2 : cli_fail("goodput", err);
    if (w->rank)
        return 0;
    if ((R.o.out[0] && gp_write_h5(&R, R.o.out, err)) || (R.o.plot[0] && gp_write_plot(&R, R.o.plot, err)))
        return cli_fail("goodput", err);
    if (R.o.json)
        cli_print_json(gp_json(&R));
    else
        gp_text(&R);
    fprintf(stderr, "megasim goodput: %d trials in %.2f s; with the sweep (%d x %d) and the what-ifs (%d x %d), on %d "
            "rank(s), %.2f s\n", R.o.trials, R.main_s, GP_SWEEP, R.o.sweep_trials, R.nwhatif, R.o.sweep_trials,
            w->size, rt_now_ns() * 1e-9 - t0);
    return 0;
}

int cmd_goodput(int argc, char **argv)
{
    if (cli_wants_help(argc, argv))
        return 0;
    cli_mpi_t w;
    cli_mpi_begin(&w);
    return cli_mpi_end(&w, goodput_main(&w, argc, argv));
}
