/* tests/fuzz/fuzz_flags.c: a command line: the input's NUL- or
 * newline-separated words are the arguments of `megasim predict` (flags,
 * --name=value, --no-name, Megatron-LM's ignored flags), then the same
 * steps as fuzz_job. Job files named on it are read too. */
#include "tests/fuzz/fuzz.h"

#include "model/estimate.h"

#include <string.h>

#define MAX_ARGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    char buf[4097], *argv[MAX_ARGS];
    memcpy(buf, data, size);
    buf[size] = 0;
    int argc = 0;
    for (char *p = buf, *end = buf + size; p < end && argc < MAX_ARGS; p += strlen(p) + 1) {
        char *nl = strchr(p, '\n');
        if (nl)
            *nl = 0;
        if (*p)
            argv[argc++] = p;
    }
    char err[OPT_ERR_LEN], notes[1024];
    job_t job;
    hw_t hw;
    if (job_parse(&job, argc, argv, NULL, NULL, err) == 0 && job_hardware(&job, &hw, err) == 0) {
        job_fit_defaults(&job, notes, sizeof notes);
        if (job_finalize(&job, hw.cluster.gpus_per_node, err) == 0) {
            estimate_t e;
            estimate_job(&job, &hw, &e);
        }
    }
    return 0;
}
