/* cli: the parts of the command-line program shared by subcommands: a
 * subcommand's own options (a small table beside the job's), help text
 * generated from the tables, and the parse -> hardware -> finalize step
 * that every job-taking subcommand starts with. */
#ifndef CMD_CLI_H
#define CMD_CLI_H

#include "model/hw.h"
#include "model/job.h"

typedef struct {
    const char *name;
    const char *summary;
    const char *usage;     /* e.g. "[JOB.json ...] [flags]" */
    const char *example;
    int (*run)(int argc, char **argv); /* argv[0] is the subcommand */
    int takes_job;         /* --help also lists the job flags */
    const opt_table *extra;
} cli_cmd_t;

extern const cli_cmd_t cli_cmds[];
extern const int cli_ncmds;

/* Prints "megasim CMD: error: MSG" and returns 2 (the bad-input status). */
int cli_fail(const char *cmd, const char *msg);


/* With --help or -h anywhere in argv, prints the help of argv[0]'s
 * subcommand and returns 1 (so help works even beside bad flags). */
int cli_wants_help(int argc, char **argv);

/* Parses the flags of a subcommand that takes no job: --name VALUE,
 * --name=VALUE and --flag (booleans) against t into obj, and positional
 * arguments into pos[0 .. maxpos) (*npos of them). argv[0] is the
 * subcommand. A positional beyond maxpos is an error, worded by
 * too_many (a format with one %s: that argument). 0, or -1 with err. */
int cli_parse_flags(const opt_table *t, void *obj, int argc, char **argv, const char **pos, int maxpos, int *npos,
                    const char *too_many, char *err);

/* qsort's order of doubles, ascending. */
int cli_cmp_double(const void *a, const void *b);

/* Prints a JSON object on stdout (indented) and frees it. */
struct cJSON;
void cli_print_json(struct cJSON *o);

/* Fits the defaults the user did not give to the job (job_fit_defaults),
 * printing a note on stderr (when `say`) if it changed one, then
 * job_finalize. The
 * last call's adjustments stay readable (cli_fitted_defaults, "" when
 * none). 0, or -1 with err. */
int cli_finalize(const char *cmd, job_t *job, const hw_t *hw, int say, char *err);
const char *cli_fitted_defaults(void);

/* Parses argv (after the subcommand name) into job and extra_obj, resolves
 * the hardware and checks every rule. With --replay RESULT (where extra
 * has that option) it starts from the configuration RESULT records
 * (cmd/replay.h) instead of the defaults. Returns 0, or 2 after printing
 * one error message. */
int cli_job_setup(const char *cmd, int argc, char **argv, const opt_table *extra,
                  void *extra_obj, job_t *job, hw_t *hw);

/* MPI_Init (argc, argv may be NULL) and MPI_Finalize with LeakSanitizer
 * looking away in a sanitized build: what OpenMPI allocates there and
 * keeps until exit is its own, and telling it from megasim's through the
 * suppressions (tests/lsan.supp) took the full unwinder on every malloc.
 * Every subcommand that starts MPI goes through these two. */
int cli_mpi_init(int *argc, char ***argv);
void cli_mpi_finalize(void);

/* The MPI world of a subcommand that splits its work over ranks (search,
 * goodput): initialised only under mpirun, so a plain run is one process
 * with no MPI runtime at all. */
typedef struct {
    int on, rank, size;
} cli_mpi_t;
void cli_mpi_begin(cli_mpi_t *w);
/* Rank 0's status to every rank, MPI finalised; what the process returns
 * (0 on the other ranks: rank 0 reports). */
int cli_mpi_end(cli_mpi_t *w, int rc);
/* Items 0 .. n-1 of `size` bytes each, split in contiguous blocks: this
 * rank's block [*first, *first + *count). */
void cli_mpi_block(const cli_mpi_t *w, long n, long *first, long *count);
/* Every rank's block (mine) into all[0 .. n) on every rank, in item order. 0,
 * or -1 (out of memory). */
int cli_mpi_allgather_blocks(const cli_mpi_t *w, const void *mine, void *all, long n, size_t size);

#endif
