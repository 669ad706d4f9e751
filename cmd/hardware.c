/* cmd_hardware: `megasim hardware`: lists the built-in profiles, or prints
 * the resolved profile as JSON, the format --hardware FILE reads and
 * calibration writes. */
#include "cmd/cli.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct {
    char gpu[40], cluster[40], hardware[256];
    int help;
} hw_opts_t;

static const opt_def hw_defs[] = {
    {"gpu", OPT_STR, offsetof(hw_opts_t, gpu), 1, 40, "", 0, "profile", "built-in GPU profile to print"},
    {"cluster", OPT_STR, offsetof(hw_opts_t, cluster), 1, 40, "", 0, "profile", "built-in cluster profile to print"},
    {"hardware", OPT_STR, offsetof(hw_opts_t, hardware), 1, 256, "", 0, "profile", "profile file to check and print"},
    {"help", OPT_BOOL, offsetof(hw_opts_t, help), 0, 1, "false", 0, "profile", "show this help"},
};
const opt_table hardware_opts = {hw_defs, 4, "hardware option"};

int cmd_hardware(int argc, char **argv)
{
    if (cli_wants_help(argc, argv))
        return 0;
    hw_opts_t o;
    job_t unused;
    char err[OPT_ERR_LEN];
    if (job_parse(&unused, argc - 1, argv + 1, &hardware_opts, &o, err))
        return cli_fail("hardware", err);
    if (!o.gpu[0] && !o.cluster[0] && !o.hardware[0]) {
        printf("GPU profiles:");
        for (const char *const *p = hw_gpu_names; *p; p++)
            printf(" %s", *p);
        printf("\ncluster profiles:");
        for (const char *const *p = hw_cluster_names; *p; p++)
            printf(" %s", *p);
        printf("\n(megasim hardware --gpu NAME --cluster NAME prints one as JSON)\n");
        return 0;
    }
    hw_t hw;
    if (hw_resolve(o.gpu[0] ? o.gpu : hw_gpu_names[0], o.cluster[0] ? o.cluster : hw_cluster_names[0],
                   o.hardware, &hw, err))
        return cli_fail("hardware", err);
    cli_print_json(hw_to_json(&hw));
    return 0;
}
