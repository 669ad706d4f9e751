/* cmd_predict: `megasim predict`: the closed-form estimate of one job,
 * as a readable report or one JSON object. */
#include "cmd/cli.h"
#include "model/estimate.h"
#include "model/report.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int json, ops, help;
    char replay[1024];
} predict_opts_t;

static const opt_def predict_defs[] = {
    {"replay", OPT_STR, offsetof(predict_opts_t, replay), 1, 1024, "", 0, "input",
     "start from the job and hardware profile recorded in RESULT (.h5 from simulate or run --out, or a --json "
     "output or --trace file); files and flags apply over them"},
    {"json", OPT_BOOL, offsetof(predict_opts_t, json), 0, 1, "false", 0, "output",
     "print one JSON object instead of the report"},
    {"ops", OPT_BOOL, offsetof(predict_opts_t, ops), 0, 1, "false", 0, "output",
     "also print every op of one layer with its shape and modelled time"},
    {"help", OPT_BOOL, offsetof(predict_opts_t, help), 0, 1, "false", 0, "output", "show this help"},
};
const opt_table predict_opts = {predict_defs, sizeof predict_defs / sizeof predict_defs[0], "predict option"};

/* Which headline options took their defaults, and which of those were
 * fitted to the job (cli_finalize), so a reader knows what was assumed. */
static void print_defaults(const job_t *job)
{
    char buf[2048];
    job_defaults_text(job, buf, sizeof buf);
    if (buf[0])
        printf("\ndefaults (no file or flag gave them): %s\n", buf);
    if (cli_fitted_defaults()[0])
        printf("defaults fitted to this job: %s\n", cli_fitted_defaults());
}

int cmd_predict(int argc, char **argv)
{
    predict_opts_t po;
    job_t job;
    hw_t hw;
    if (cli_wants_help(argc, argv))
        return 0;
    int rc = cli_job_setup("predict", argc - 1, argv + 1, &predict_opts, &po, &job, &hw);
    if (rc)
        return rc;
    estimate_t e;
    estimate_job(&job, &hw, &e);
    if (po.json) {
        cli_print_json(report_json(&job, &hw, &e));
    } else {
        report_text(stdout, &job, &hw, &e);
        print_defaults(&job);
        if (po.ops)
            report_ops(stdout, &job, &hw);
    }
    return 0;
}
