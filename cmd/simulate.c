/* cmd_simulate: `megasim simulate`: plays every rank's op program in the
 * discrete-event engine and reports what `predict` reports (same --json
 * keys), with the closed form beside it and where they differ. --out and
 * --trace write the result file and a Chrome trace (sim/output.h). */
#include "cmd/cli.h"
#include "model/layout.h"
#include "model/report.h"
#include "sim/engine.h"
#include "sim/output.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int json, fold, help, network, ecmp, slow_forward_only;
    char slow_rank[1024], slow_link[1024];
    char out[1024], trace[1024], trace_ranks[1024], replay[1024];
    double slow_hosts, slow_factor;
    int seed;
} simulate_opts_t;

#define SO(f) offsetof(simulate_opts_t, f)
static const opt_def simulate_defs[] = {
    {"json", OPT_BOOL, SO(json), 0, 1, "false", 0, "simulate", "print one JSON object instead of the report"},
    {"network", OPT_ENUM, SO(network), 0, 0, "alpha-beta", "alpha-beta|flows", "simulate",
     "transfers and DP collectives: alpha-beta on idle links, or flows sharing the fabric's links "
     "max-min (every rank is played)"},
    {"ecmp", OPT_ENUM, SO(ecmp), 0, 0, "hash", "hash|ideal", "simulate",
     "with --network flows: hash each flow to one uplink (collisions as in ECMP) or split evenly"},
    {"fold", OPT_BOOL, SO(fold), 0, 1, "true", 0, "simulate",
     "simulate identical ranks once (--no-fold: every rank)"},
    {"slow-rank", OPT_STR, SO(slow_rank), 0, 1024, "", 0, "simulate",
     "stragglers: RANK:FACTOR[,RANK:FACTOR...], compute FACTOR times slower"},
    {"slow-link", OPT_STR, SO(slow_link), 0, 1024, "", 0, "simulate",
     "slow NICs: NODE:FACTOR[,...], that node's transfers FACTOR times slower"},
    {"slow-hosts", OPT_REAL, SO(slow_hosts), 0, 1, "0", 0, "simulate",
     "fraction of nodes drawn (by --seed) as slow hosts (MegaScale saw ~0.005)"},
    {"slow-forward-only", OPT_BOOL, SO(slow_forward_only), 0, 1, "false", 0, "simulate",
     "stragglers slow forward passes only (MegaScale: ~10% longer forward passes)"},
    {"slow-factor", OPT_REAL, SO(slow_factor), 1, 1000, "1.1", 0, "simulate",
     "compute slowdown of a drawn slow host (MegaScale: ~10% longer forward)"},
    {"seed", OPT_INT, SO(seed), 0, 2147483647, "1", 0, "simulate",
     "seed for the slow-host draw and the experts' loads (--moe-expert-load-cv)"},
    {"out", OPT_STR, SO(out), 1, 1024, "", 0, "simulate",
     "write the result file FILE.h5 (HDF5, docs/schema.md): summary, per-rank accounts, traced timelines, config"},
    {"trace", OPT_STR, SO(trace), 1, 1024, "", 0, "simulate",
     "write a Chrome trace FILE.json of the traced ranks (Perfetto, chrome://tracing)"},
    {"trace-ranks", OPT_STR, SO(trace_ranks), 0, 1024, "0", 0, "simulate",
     "global ranks whose every op --out and --trace record: R[,R...], at most 64"},
    {"replay", OPT_STR, SO(replay), 1, 1024, "", 0, "simulate",
     "start from the job, hardware profile and simulate options recorded in RESULT (.h5 from --out, or a --json "
     "output or --trace file); files and flags apply over them, outputs are the command line's"},
    {"help", OPT_BOOL, SO(help), 0, 1, "false", 0, "simulate", "show this help"},
};
const opt_table simulate_opts = {simulate_defs, sizeof simulate_defs / sizeof simulate_defs[0], "simulate option"};

/* splitmix64: a small, well-known generator; enough to draw hosts. */
static uint64_t next_u64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Options that only act with another one: given alone they would change
 * nothing, silently. */
static int check_pairs(const simulate_opts_t *so, char *err)
{
    if (so->ecmp == 1 && so->network != SIM_NET_FLOWS) {
        snprintf(err, OPT_ERR_LEN, "--ecmp ideal acts only with --network flows (alpha-beta has no routes); give both");
        return -1;
    }
    if (so->slow_factor != atof(opts_find(&simulate_opts, "slow-factor")->def) && !(so->slow_hosts > 0)) {
        snprintf(err, OPT_ERR_LEN, "--slow-factor %g acts only on drawn slow hosts; give --slow-hosts P too "
                 "(--slow-rank R:F sets a rank's own factor)", so->slow_factor);
        return -1;
    }
    return 0;
}

static int draw_slow_hosts(const simulate_opts_t *so, const job_t *job, const hw_t *hw, sim_opts_t *o, char *err)
{
    int gpn = hw->cluster.gpus_per_node, nodes = layout_nodes(job->num_gpus, gpn);
    uint64_t state = (uint64_t)so->seed;
    for (int n = 0; n < nodes && so->slow_hosts > 0; n++) {
        if ((next_u64(&state) >> 11) * 0x1.0p-53 >= so->slow_hosts)
            continue;
        for (int g = 0; g < gpn && n * gpn + g < job->num_gpus; g++) {
            if (o->nslow_ranks == SIM_MAX_SLOW) {
                snprintf(err, OPT_ERR_LEN, "--slow-hosts %g draws more than %d slow GPUs; lower it",
                         so->slow_hosts, SIM_MAX_SLOW);
                return -1;
            }
            o->slow_ranks[o->nslow_ranks++] = (sim_slow_t){n * gpn + g, so->slow_factor};
        }
    }
    return 0;
}

static void line(const char *what, int64_t sim_ns, double cf_s, int64_t total)
{
    printf("  %-28s %10.4f s  %5.1f%%   closed form %10.4f s\n", what, sim_ns * 1e-9, 100.0 * sim_ns / total, cf_s);
}

static void result_text(const job_t *job, const estimate_t *e, const result_t *r, int so_network_flows)
{
    const result_account_t *a = &r->critical;
    const breakdown_t *b = &e->br;
    sim_summary_t s;
    sim_summary(job, e, r, &s);
    printf("megasim simulate: %d GPUs = TP %d x PP %d x DP %d, %d chunks, %d micro-batches, %s p2p\n",
           job->num_gpus, job->tp, job->pp, job->dp, job->vpp, job->num_microbatches,
           job->pp_comm_overlap ? "decoupled" : "blocking");
    printf("simulated %d entities (%d DP classes): %lld events\n\n", r->entities, r->classes, r->events);
    printf("iteration time %.4f s (closed form %.4f s, %+.2f%%)   MFU %.1f%% (closed form %.1f%%)\n",
           s.iteration_time_s, e->iteration_s, 100 * (s.iteration_time_s / e->iteration_s - 1), 100 * s.mfu,
           100 * e->mfu);
    printf("\ncritical path: rank %d's compute stream\n", r->critical_rank);
    line("compute", a->compute, b->compute_s, r->iteration_ns);
    line("bubble (waiting)", a->bubble, b->bubble_s, r->iteration_ns);
    line("exposed TP/SP communication", a->tp, b->exposed_tp_comm_s, r->iteration_ns);
    line("exposed PP communication", a->pp, b->exposed_pp_comm_s, r->iteration_ns);
    line("exposed DP communication", a->dp, b->exposed_dp_comm_s, r->iteration_ns);
    line("optimizer step", a->optimizer, b->optimizer_s, r->iteration_ns);
    line("other (host, emb. sync, overhead)", a->other, b->other_s, r->iteration_ns);
    if (r->ncontended) {
        printf("\nbusiest links (time at full capacity, and the most flows that shared each):\n");
        for (int i = 0; i < r->ncontended; i++)
            printf("  %-36s full %.4f s of %.4f s busy, %.3g GB carried, up to %d flows at once\n",
                   r->contended[i].name, r->contended[i].full_s, r->contended[i].busy_s, r->contended[i].bytes / 1e9,
                   r->contended[i].max_flows);
    } else if (r->entities && so_network_flows) {
        printf("\nno link was ever shared at full capacity: no contention\n");
    }
}

/* The ranks to record, checked always (bad input fails even without
 * --out), recorded only when a file will be written: tracing costs memory.
 * The output paths are probed here, before a possibly long simulation. */
static int trace_setup(const simulate_opts_t *so, const job_t *job, sim_opts_t *o, char *err)
{
    int list[SIM_MAX_TRACE], n;
    if (sim_parse_ranks(so->trace_ranks, "trace-ranks", job->num_gpus, SIM_MAX_TRACE, list, &n, err, OPT_ERR_LEN))
        return -1;
    if (!so->out[0] && !so->trace[0])
        return 0;
    const char *flags[] = {"--out", "--trace"}, *paths[] = {so->out, so->trace};
    if (out_check_paths(2, flags, paths, err, OPT_ERR_LEN))
        return -1;
    o->ntrace = n;
    memcpy(o->trace_ranks, list, sizeof list[0] * n);
    return 0;
}

/* --out and --trace, before the report: a failure leaves stdout empty. */
static int write_outputs(const simulate_opts_t *so, const cJSON *sim_config, const job_t *job, const hw_t *hw,
                         const estimate_t *e, const result_t *r, char *err)
{
    if (so->out[0] && sim_write_h5(so->out, job, hw, sim_config, e, r, err, OPT_ERR_LEN))
        return -1;
    if (so->out[0])
        fprintf(stderr, "wrote %s\n", so->out);
    if (so->trace[0] && sim_write_trace(so->trace, job, hw, sim_config, r, err, OPT_ERR_LEN))
        return -1;
    if (so->trace[0])
        fprintf(stderr, "wrote %s\n", so->trace);
    return 0;
}

/* simulate's whole path on argv (argv[0] the command's name); report 0
 * writes the files and prints nothing on stdout (reproduce's figures). */
static int simulate(int argc, char **argv, int report)
{
    simulate_opts_t so;
    job_t job;
    hw_t hw;
    int rc = cli_job_setup("simulate", argc - 1, argv + 1, &simulate_opts, &so, &job, &hw);
    if (rc)
        return rc;
    char err[OPT_ERR_LEN];
    static sim_opts_t o;
    memset(&o, 0, sizeof o);
    o.fold = so.fold;
    o.network = so.network, o.ecmp_ideal = so.ecmp, o.slow_forward_only = so.slow_forward_only;
    o.seed = (uint64_t)so.seed;
    int nodes = layout_nodes(job.num_gpus, hw.cluster.gpus_per_node);
    if (check_pairs(&so, err) ||
        sim_parse_slow(so.slow_rank, "slow-rank", job.num_gpus, o.slow_ranks, &o.nslow_ranks, err, sizeof err) ||
        sim_parse_slow(so.slow_link, "slow-link", nodes, o.slow_links, &o.nslow_links, err, sizeof err) ||
        draw_slow_hosts(&so, &job, &hw, &o, err) || trace_setup(&so, &job, &o, err) ||
        sched_verify(&job, err, sizeof err))
        return cli_fail("simulate", err);
    estimate_t e;
    estimate_job(&job, &hw, &e);
    result_t r;
    if (sim_run(&job, &hw, &o, &r, err, sizeof err))
        return cli_fail("simulate", err);
    /* Wall time on stderr: stdout is bit-identical run to run. */
    if (report)
        fprintf(stderr, "megasim simulate: %lld events in %.3f s (%.3g events/s)\n", r.events, r.wall_s,
                r.events / (r.wall_s > 0 ? r.wall_s : 1e-9));
    /* The simulator's own options belong to the recorded configuration. */
    cJSON *sim_config = opts_to_json(&simulate_opts, &so);
    rc = write_outputs(&so, sim_config, &job, &hw, &e, &r, err);
    if (!rc && report && so.json)
        cli_print_json(sim_summary_json(&job, &hw, &e, &r, sim_config));
    else if (!rc && report)
        result_text(&job, &e, &r, so.network == SIM_NET_FLOWS);
    cJSON_Delete(sim_config);
    result_free(&r);
    return rc ? cli_fail("simulate", err) : 0;
}

int cmd_simulate(int argc, char **argv)
{
    if (cli_wants_help(argc, argv))
        return 0;
    return simulate(argc, argv, 1);
}

int simulate_to_file(const char *flags, int nextra, const char *const *extra)
{
    char buf[4096], *argv[128] = {"simulate"};
    int argc = 1;
    snprintf(buf, sizeof buf, "%s", flags);
    for (char *t = strtok(buf, " "); t && argc < 96; t = strtok(NULL, " "))
        argv[argc++] = t;
    for (int i = 0; i < nextra && argc < 128; i++)
        argv[argc++] = (char *)extra[i];
    return simulate(argc, argv, 0);
}
