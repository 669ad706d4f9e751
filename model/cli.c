/* cli: shared command-line plumbing (see cli.h). */
#include "model/cli.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_fail(const char *cmd, const char *msg)
{
    fprintf(stderr, "megasim %s: error: %s\n", cmd, msg);
    return 2;
}

void cli_print_help(FILE *f, const cli_cmd_t *c)
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

int cli_job_setup(const char *cmd, int argc, char **argv, const opt_table *extra,
                  void *extra_obj, job_t *job, hw_t *hw)
{
    char err[OPT_ERR_LEN];
    if (job_parse(job, argc, argv, extra, extra_obj, err) || job_hardware(job, hw, err) ||
        job_finalize(job, hw->cluster.gpus_per_node, err))
        return cli_fail(cmd, err);
    return 0;
}

void cli_print_json(cJSON *o)
{
    char *s = o ? cJSON_Print(o) : NULL;
    if (s)
        puts(s);
    free(s);
    cJSON_Delete(o);
}
