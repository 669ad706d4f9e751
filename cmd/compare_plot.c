/* compare_plot: `megasim compare --plot PREFIX`: PREFIX.dat (measured vs
 * simulated per iteration, op class and stream) drawn by
 * plots/compare.gp into PREFIX.png and PREFIX.svg with gnuplot. */
#include "cmd/compare.h"

#include "cmd/cli.h"
#include "cmd/plot_data.h"
#include "sim/out.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the figure ----------------------------------------------------------- */

static void dat_row(FILE *f, const char *group, double m, double s)
{
    double e = cmp_err_pct(m, s);
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
        if (cmp_kind_present(c, k) && (c->sm.compute_s[k] > 0 || c->ss.compute_s[k] > 0))
            dat_row(f, cmp_kind_name(k), cmp_per_rank_iter(&c->sm, c->sm.compute_s[k]),
                    cmp_per_rank_iter(&c->ss, c->ss.compute_s[k]));
    dat_row(f, "wait", cmp_per_rank_iter(&c->sm, c->sm.wait_s[STREAM_COMPUTE]),
            cmp_per_rank_iter(&c->ss, c->ss.wait_s[STREAM_COMPUTE]));
}

/* PREFIX.dat through a temporary name. */
static int write_dat(const cmp_t *c, const char *path, char *err)
{
    out_file_t o;
    if (out_open(&o, path, "w", err, OPT_ERR_LEN))
        return -1;
    dat_rows(c, o.f);
    return out_close(&o, 0);
}

/* gnuplot variables: the job and the headline. */
static void fig_vars(const cmp_t *c, plot_fig_t *fig)
{
    char title[512], sub[256], pct[32];
    snprintf(title, sizeof title, "TP %d x PP %d x DP %d, %d GPUs, %s", c->job.tp, c->job.pp, c->job.dp,
             c->job.num_gpus, cmp_device_name(c));
    double m = c->meas.iteration_s, s = c->sim.iteration_s;
    snprintf(sub, sizeof sub, "iteration: measured %.4g s, simulated %.4g s (%s%%); bars per rank on the compute "
             "stream", m, s, cmp_fmt_pct(pct, sizeof pct, 0, cmp_err_pct(m, s)));
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
    char script[1100], out[1100];
    snprintf(script, sizeof script, "%s/compare.gp", c->o.plots_dir);
    if (access(script, R_OK) != 0) {
        fprintf(stderr, "megasim compare: error: %s: no such script (set --plots-dir)\n", script);
        return 1;
    }
    int failures = 0;
    for (int e = 0; e < 2; e++) {
        snprintf(out, sizeof out, "%s.%s", c->prefix, exts[e]);
        failures += plot_draw("compare", gnuplot, script, fig, out);
    }
    c->drawn = failures == 0;
    return failures;
}

/* The data always; the drawing when gnuplot is on PATH. -1: the data
 * could not be written (err); else the number of failed drawings. */
int cmp_plot(cmp_t *c, char *err)
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

