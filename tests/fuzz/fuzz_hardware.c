/* tests/fuzz/fuzz_hardware.c: a hardware profile, as `--hardware FILE`
 * takes it: loaded over the built-in profiles, checked, then the default
 * job estimated on it (every field reaches a cost function). */
#include "tests/fuzz/fuzz.h"

#include "model/estimate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size, ".json");
    if (!path)
        return 0;
    char err[OPT_ERR_LEN];
    job_t job;
    hw_t hw;
    job_default(&job);
    if (hw_resolve(job.gpu, job.cluster, path, &hw, err) == 0 && job_finalize(&job, hw.cluster.gpus_per_node, err) == 0) {
        estimate_t e;
        estimate_job(&job, &hw, &e);
    }
    return 0;
}
