/* cmd_plot: `megasim plot FILE.h5`: redraws the figures of a result file
 * (cmd/plot_data.h says which file yields which) with gnuplot, as PNG
 * (pngcairo) and SVG. The data go to OUTDIR/NAME.dat first; then
 * `gnuplot -e "datafile='...'; outfile='...'; ..." PLOTS_DIR/NAME.gp` runs
 * once per figure and terminal. Without gnuplot on PATH the .dat files are
 * still written and the exit status is 0. */
#include "cmd/cli.h"
#include "cmd/plot_data.h"
#include "sim/out.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef MEGASIM_PLOTS_DIR
#define MEGASIM_PLOTS_DIR "plots"
#endif

typedef struct {
    char outdir[1024], plots_dir[1024];
    int help;
} plot_opts_t;

#define PO(f) offsetof(plot_opts_t, f)
static const opt_def plot_defs[] = {
    {"outdir", OPT_STR, PO(outdir), 1, 1024, "", 0, "plot",
     "where the .dat, .png and .svg files go (default: DIR/STEM-plots/ beside DIR/STEM.h5)"},
    {"plots-dir", OPT_STR, PO(plots_dir), 1, 1024, MEGASIM_PLOTS_DIR, 0, "plot",
     "the folder of the gnuplot scripts (NAME.gp)"},
    {"help", OPT_BOOL, PO(help), 0, 1, "false", 0, "plot", "show this help"},
};
const opt_table plot_opts = {plot_defs, sizeof plot_defs / sizeof plot_defs[0], "plot option"};

/* The flags and one positional FILE. */
static int parse(int argc, char **argv, plot_opts_t *o, const char **file, char *err)
{
    int n = 0;
    *file = NULL;
    if (cli_parse_flags(&plot_opts, o, argc, argv, file, 1, &n, "one result file expected, got another: '%s'", err))
        return -1;
    if (!*file) {
        snprintf(err, OPT_ERR_LEN, "no result file given (usage: megasim plot FILE.h5 [--outdir DIR])");
        return -1;
    }
    return 0;
}

/* results/megascale.h5 -> results/megascale-plots */
static void default_outdir(const char *file, char *out, size_t size)
{
    const char *slash = strrchr(file, '/'), *base = slash ? slash + 1 : file, *dot = strrchr(base, '.');
    int stem = dot && dot != base ? (int)(dot - base) : (int)strlen(base);
    snprintf(out, size, "%.*s%.*s-plots", (int)(base - file), file, stem, base);
}


/* gnuplot's full path from PATH (shared with megasim compare: plot_data.h). */
int plot_find_gnuplot(char *out, size_t size)
{
    const char *path = getenv("PATH");
    char buf[8192];
    snprintf(buf, sizeof buf, "%s", path ? path : "");
    for (char *save, *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(out, size, "%s/gnuplot", *d ? d : ".");
        if (access(out, X_OK) == 0)
            return 1;
    }
    return 0;
}

int plot_check_scripts_dir(const char *dir, const char *script, char *err, int errlen)
{
    struct stat st;
    char path[2048];
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "--plots-dir %s is not a folder; allowed: the folder of megasim's gnuplot scripts "
                 "(NAME.gp; default %s)", dir, MEGASIM_PLOTS_DIR);
        return -1;
    }
    snprintf(path, sizeof path, "%s/%s", dir, script ? script : "");
    if (script && access(path, R_OK) != 0) {
        snprintf(err, errlen, "--plots-dir %s holds no %s; allowed: the folder of megasim's gnuplot scripts "
                 "(default %s)", dir, script, MEGASIM_PLOTS_DIR);
        return -1;
    }
    return 0;
}

/* gnuplot drawing f into outfile; its exit status, -1 if it could not run. */
static int run_gnuplot(const char *gnuplot, const char *script, const plot_fig_t *f, const char *outfile)
{
    static char expr[PLOT_VARS_LEN + 9000];
    snprintf(expr, sizeof expr, "datafile=");
    plot_gp_quote(expr, sizeof expr, f->dat);
    strncat(expr, "; outfile=", sizeof expr - strlen(expr) - 1);
    plot_gp_quote(expr, sizeof expr, outfile);
    strncat(expr, "; ", sizeof expr - strlen(expr) - 1);
    strncat(expr, f->vars, sizeof expr - strlen(expr) - 1);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        execl(gnuplot, "gnuplot", "-e", expr, script, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int plot_draw(const char *cmd, const char *gnuplot, const char *script, const plot_fig_t *f, const char *outfile)
{
    out_file_t o;
    char err[OPT_ERR_LEN];
    if (out_begin(&o, outfile, err, sizeof err)) {
        fprintf(stderr, "megasim %s: error: %s\n", cmd, err);
        return 1;
    }
    int rc = run_gnuplot(gnuplot, script, f, o.tmp);
    if (rc != 0) {
        fprintf(stderr, "megasim %s: error: gnuplot %s failed (exit %d) drawing %s\n", cmd, script, rc, outfile);
        out_close(&o, -1);
        return 1;
    }
    if (out_close(&o, 0)) {
        fprintf(stderr, "megasim %s: error: %s\n", cmd, err);
        return 1;
    }
    fprintf(stderr, "wrote %s\n", outfile);
    return 0;
}

/* Each figure as NAME.png and NAME.svg; returns the number of failures. */
static int draw(const char *gnuplot, const plot_opts_t *o, const char *outdir, const plot_set_t *set)
{
    static const char *const exts[] = {"png", "svg"};
    int failures = 0;
    for (int i = 0; i < set->nfigs; i++) {
        const plot_fig_t *f = &set->figs[i];
        char script[2048], out[2048];
        snprintf(script, sizeof script, "%s/%s.gp", o->plots_dir, f->name);
        if (access(script, R_OK) != 0) {
            fprintf(stderr, "megasim plot: error: %s: no such script (set --plots-dir)\n", script);
            failures++;
            continue;
        }
        for (int e = 0; e < 2; e++) {
            snprintf(out, sizeof out, "%s/%s.%s", outdir, f->name, exts[e]);
            failures += plot_draw("plot", gnuplot, script, f, out);
        }
    }
    return failures;
}

int cmd_plot(int argc, char **argv)
{
    if (cli_wants_help(argc, argv))
        return 0;
    plot_opts_t o;
    const char *file;
    char err[OPT_ERR_LEN], outdir[1024], gnuplot[4096];
    if (parse(argc, argv, &o, &file, err) || plot_check_scripts_dir(o.plots_dir, NULL, err, OPT_ERR_LEN))
        return cli_fail("plot", err);
    if (o.outdir[0])
        snprintf(outdir, sizeof outdir, "%s", o.outdir);
    else
        default_outdir(file, outdir, sizeof outdir);
    static plot_set_t set;
    char perr[OPT_ERR_LEN];
    /* A folder made for bad input is removed again (rmdir: only if empty). */
    struct stat st;
    int existed = stat(outdir, &st) == 0;
    if (access(file, R_OK) == 0 && out_make_dir(outdir, err, OPT_ERR_LEN))
        return cli_fail("plot", err);
    int rc = plot_prepare(file, outdir, &set, perr, sizeof perr);
    if (rc != PLOT_OK && !existed)
        rmdir(outdir);
    if (rc != PLOT_OK)
        return cli_fail("plot", perr);
    if (set.nfigs == 0) {
        fprintf(stderr, "megasim plot: %s (kind %s) holds nothing to draw\n", file, set.kind);
        return 0;
    }
    for (int i = 0; i < set.nfigs; i++)
        fprintf(stderr, "wrote %s (%ld rows)\n", set.figs[i].dat, set.figs[i].rows);
    if (!plot_find_gnuplot(gnuplot, sizeof gnuplot)) {
        fprintf(stderr, "megasim plot: gnuplot not found: data written to %s; install gnuplot-nox to draw\n", outdir);
        return 0;
    }
    return draw(gnuplot, &o, outdir, &set) ? 1 : 0;
}
