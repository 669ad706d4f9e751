/* cli: shared command-line plumbing (see cli.h). Built into the megasim
 * program with sim/, not into the model library: --replay reads result
 * files (cmd/replay.h). */
#include "cmd/cli.h"
#include "cmd/replay.h"

#include <cjson/cJSON.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_fail(const char *cmd, const char *msg)
{
    fprintf(stderr, "megasim %s: error: %s\n", cmd, msg);
    return 2;
}

static void cli_print_help(FILE *f, const cli_cmd_t *c)
{
    fprintf(f, "usage: megasim %s %s\n\n%s\n", c->name, c->usage, c->summary);
    if (c->extra) {
        fprintf(f, "\n%s options:", c->name);
        opts_print_help(f, c->extra);
    }
    if (c->takes_job) {
        fprintf(f, "\nJob files (*.json or --config FILE) hold the same fields as the flags, with\n"
                   "'_' for '-'; the preset applies first, then files in order, then flags.\n"
                   "Megatron-LM flags that do not change speed (--lr, --data-path, ...) are accepted and ignored.\n");
        opts_print_help(f, &job_opts);
    }
    fprintf(f, "\nexample:\n  %s\n", c->example);
}

int cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            for (int k = 0; k < cli_ncmds; k++)
                if (!strcmp(cli_cmds[k].name, argv[0])) {
                    cli_print_help(stdout, &cli_cmds[k]);
                    return 1;
                }
    return 0;
}

int cli_parse_flags(const opt_table *t, void *obj, int argc, char **argv, const char **pos, int maxpos, int *npos,
                    const char *too_many, char *err)
{
    opts_set_defaults(t, obj);
    *npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0) {
            if (*npos == maxpos) {
                snprintf(err, OPT_ERR_LEN, too_many, a);
                return -1;
            }
            pos[(*npos)++] = a;
            continue;
        }
        char name[64];
        const char *eq = strchr(a, '=');
        snprintf(name, sizeof name, "%.*s", (int)((eq ? (size_t)(eq - a) : strlen(a)) - 2), a + 2);
        const opt_def *d = opts_find(t, name);
        if (!d) {
            snprintf(err, OPT_ERR_LEN, "unknown flag --%s (megasim %s --help lists the flags)", name, argv[0]);
            return -1;
        }
        const char *val = eq ? eq + 1 : d->type == OPT_BOOL ? "true" : i + 1 < argc ? argv[++i] : NULL;
        if (!val) {
            snprintf(err, OPT_ERR_LEN, "--%s needs a value (%s)", name, d->help);
            return -1;
        }
        if (opts_set_text(d, obj, val, a, err))
            return -1;
    }
    return 0;
}

int cli_job_setup(const char *cmd, int argc, char **argv, const opt_table *extra,
                  void *extra_obj, job_t *job, hw_t *hw)
{
    char err[OPT_ERR_LEN];
    const char *replay = replay_path(argc, argv, extra);
    if (replay)
        return replay_job_setup(cmd, replay, argc, argv, extra, extra_obj, job, hw);
    if (job_parse(job, argc, argv, extra, extra_obj, err) || job_hardware(job, hw, err) ||
        cli_finalize(cmd, job, hw, 1, err))
        return cli_fail(cmd, err);
    return 0;
}

static char fitted_note[1024]; /* the last cli_finalize's adjustments, "" when none */

int cli_finalize(const char *cmd, job_t *job, const hw_t *hw, int say, char *err)
{
    /* The note only for a job that then stands: a refused one gets its one
     * message. */
    int fitted = job_fit_defaults(job, fitted_note, sizeof fitted_note);
    if (job_finalize(job, hw->cluster.gpus_per_node, err))
        return -1;
    if (fitted && say)
        fprintf(stderr, "megasim %s: note: defaults fitted to the job: %s\n", cmd, fitted_note);
    return 0;
}

const char *cli_fitted_defaults(void) { return fitted_note; }

int cli_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void cli_print_json(cJSON *o)
{
    char *s = o ? cJSON_Print(o) : NULL;
    if (s)
        puts(s);
    free(s);
    cJSON_Delete(o);
}

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define LSAN_OFF() __lsan_disable()
#define LSAN_ON() __lsan_enable()
#else
#define LSAN_OFF() ((void)0)
#define LSAN_ON() ((void)0)
#endif

int cli_mpi_init(int *argc, char ***argv)
{
    LSAN_OFF();
    int rc = MPI_Init(argc, argv);
    LSAN_ON();
    return rc;
}

void cli_mpi_finalize(void)
{
    LSAN_OFF();
    MPI_Finalize();
    LSAN_ON();
}

void cli_mpi_begin(cli_mpi_t *w)
{
    w->on = w->rank = 0, w->size = 1;
    if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE")) {
        cli_mpi_init(NULL, NULL);
        MPI_Comm_rank(MPI_COMM_WORLD, &w->rank);
        MPI_Comm_size(MPI_COMM_WORLD, &w->size);
        w->on = 1;
    }
}

int cli_mpi_end(cli_mpi_t *w, int rc)
{
    if (w->on) {
        MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
        cli_mpi_finalize();
    }
    return w->rank ? 0 : rc;
}

void cli_mpi_block(const cli_mpi_t *w, long n, long *first, long *count)
{
    *first = n * w->rank / w->size;
    *count = n * (w->rank + 1) / w->size - *first;
}

int cli_mpi_allgather_blocks(const cli_mpi_t *w, const void *mine, void *all, long n, size_t size)
{
    long first, count;
    cli_mpi_block(w, n, &first, &count);
    if (!w->on) {
        memcpy(all, mine, size * count);
        return 0;
    }
    int *counts = calloc(w->size, sizeof *counts), *displs = calloc(w->size, sizeof *displs);
    if (!counts || !displs) {
        free(counts), free(displs);
        return -1;
    }
    for (int r = 0; r < w->size; r++) {
        cli_mpi_t o = {1, r, w->size};
        long f, c;
        cli_mpi_block(&o, n, &f, &c);
        counts[r] = (int)(c * size), displs[r] = (int)(f * size);
    }
    MPI_Allgatherv(mine, (int)(count * size), MPI_BYTE, all, counts, displs, MPI_BYTE, MPI_COMM_WORLD);
    free(counts), free(displs);
    return 0;
}
