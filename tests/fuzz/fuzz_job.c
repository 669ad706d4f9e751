/* tests/fuzz/fuzz_job.c: a job file, as `megasim predict FILE` takes it:
 * parsed (strict JSON, the options table), its hardware resolved, its
 * defaults fitted, finalized, then estimated by the closed form. */
#include "tests/fuzz/fuzz.h"

#include "model/estimate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size, ".json");
    if (!path)
        return 0;
    char *argv[] = {(char *)path};
    char err[OPT_ERR_LEN], notes[1024];
    job_t job;
    hw_t hw;
    if (job_parse(&job, 1, argv, NULL, NULL, err) == 0 && job_hardware(&job, &hw, err) == 0) {
        job_fit_defaults(&job, notes, sizeof notes);
        if (job_finalize(&job, hw.cluster.gpus_per_node, err) == 0) {
            estimate_t e;
            estimate_job(&job, &hw, &e);
        }
    }
    return 0;
}
