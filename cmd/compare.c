/* cmd_compare: `megasim compare RUN.h5 [SIM.h5]`: a measured run (megasim
 * run --out, kind "measurement") against its predictions: the simulator
 * (SIM.h5, a simulation of the same job; without it, an unfolded
 * in-process simulation of the job and hardware recorded in RUN.h5, every
 * rank traced, alpha-beta network; --hardware FILE puts another profile
 * under it, a calibrated one say) and the closed form. Prints per step,
 * per op class, per stream and per rank measured vs predicted, and names
 * the largest differences; --json prints the same as one object. Draws
 * PREFIX.png and PREFIX.svg from PREFIX.dat with plots/compare.gp.
 *
 * error_pct = 100 x (predicted - measured) / measured: positive when the
 * model is slower than reality. Means over measured iterations leave the
 * first out (warm-up) when there are more. Bad input (a missing file, the
 * wrong kind, another job) is one message and exit 2, before any output;
 * a failed drawing is exit 1 after the report.
 *
 * This file holds the options and the command; the work is in
 * compare_load.c, compare_report.c and compare_plot.c (compare.h). */
#include "cmd/compare.h"

#include "cmd/cli.h"
#include "cmd/plot_data.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#ifndef MEGASIM_PLOTS_DIR
#define MEGASIM_PLOTS_DIR "plots"
#endif

#define CO(f) offsetof(compare_opts_t, f)
static const opt_def compare_defs[] = {
    {"json", OPT_BOOL, CO(json), 0, 1, "false", 0, "compare", "print one JSON object instead of the tables"},
    {"plot", OPT_STR, CO(plot), 1, 1000, "", 0, "compare",
     "write PREFIX.dat, PREFIX.png and PREFIX.svg (default: RUN.h5 with .h5 replaced by -compare)"},
    {"plots-dir", OPT_STR, CO(plots_dir), 1, 1024, MEGASIM_PLOTS_DIR, 0, "compare",
     "the folder of the gnuplot scripts (compare.gp)"},
    {"hardware", OPT_STR, CO(hardware), 1, 255, "", 0, "compare",
     "simulate the run's job on this hardware profile (calibrate's, say) instead of the one the run recorded; "
     "its sections replace the run's --gpu/--cluster profiles, the run's overrides still apply"},
    {"moe-load-cv", OPT_ENUM, CO(cv_from), 0, 0, "run", "run|job", "compare",
     "an MoE run's routing imbalance in the in-process simulation: run, the experts' token-load CV the run "
     "measured (the mean of its steps after the first) where the job gave no --moe-expert-load-cv; job, the job's"},
    {"host-share", OPT_ENUM, CO(share_from), 0, 0, "run", "run|none", "compare",
     "a CPU run with more ranks on a host than cores in the in-process simulation: run, every rank's compute ranks / "
     "cores times slower (they time-share the cores); none, a core each"},
    {"ranks-shown", OPT_INT, CO(ranks_shown), 1, 1000000, "16", 0, "compare",
     "per-rank rows printed; with more ranks, the largest differences first"},
    {"help", OPT_BOOL, CO(help), 0, 1, "false", 0, "compare", "show this help"},
};
const opt_table compare_opts = {compare_defs, sizeof compare_defs / sizeof compare_defs[0], "compare option"};

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
    if (c->sim_path && c->o.hardware[0]) {
        snprintf(err, OPT_ERR_LEN, "--hardware applies to the in-process simulation; with SIM.h5 given, simulate "
                                   "the job on that profile there (megasim simulate --hardware)");
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


/* ---- the command ----------------------------------------------------------- */

int cmd_compare(int argc, char **argv)
{
    if (cli_wants_help(argc, argv))
        return 0;
    static cmp_t c;
    memset(&c, 0, sizeof c);
    char err[OPT_ERR_LEN];
    if (parse(argc, argv, &c, err) || plot_check_scripts_dir(c.o.plots_dir, "compare.gp", err, OPT_ERR_LEN) ||
        cmp_load(&c, err)) {
        cmp_free(&c);
        return cli_fail("compare", err);
    }
    if (c.o.plot[0])
        snprintf(c.prefix, sizeof c.prefix, "%s", c.o.plot);
    else
        default_prefix(c.run_path, c.prefix, sizeof c.prefix);
    int failures = cmp_plot(&c, err); /* before the report: a bad --plot leaves stdout empty */
    if (failures < 0) {
        cmp_free(&c);
        return cli_fail("compare", err);
    }
    if (c.o.json)
        cli_print_json(cmp_json_report(&c));
    else
        cmp_print_text(&c);
    cmp_free(&c);
    return failures ? 1 : 0;
}

