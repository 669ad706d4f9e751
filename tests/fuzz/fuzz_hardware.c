/* tests/fuzz/fuzz_hardware.c: a hardware profile, as `--hardware FILE`
 * takes it: loaded over the built-in profiles, checked, then the default
 * job estimated on it (every field reaches a cost function) and, with a
 * fault model, its restart path priced and its ETTR expected (a non-finite
 * number there aborts: it would reach goodput's output). */
#include "tests/fuzz/fuzz.h"

#include "model/estimate.h"

#include <math.h>

static void faults(const job_t *j, const hw_t *hw)
{
    if (!hw->faults.present)
        return;
    fault_job_t fj = {j->num_gpus, hw->cluster.gpus_per_node, j->tp, j->pp, j->dp,
                      hw->cluster.nics_per_node * hw->cluster.nic_gbit / 8 / hw->cluster.gpus_per_node, 5.6e9, 2.45e12};
    fault_costs_t c;
    fault_costs(&hw->faults, &fj, &c);
    double rate = 0;
    int nodes = j->num_gpus / hw->cluster.gpus_per_node;
    for (int i = 0; i < FAULT_NRATES; i++)
        rate += fault_rate_per_s(&hw->faults, i, nodes);
    fault_renewal_t m = {rate, c.relaunch_s + c.init_s + c.load_s, 600, c.stage1_s, 1};
    double e = fault_ettr_renewal(&m);
    if (!isfinite(c.init_s) || !isfinite(c.load_s) || !isfinite(c.stage1_s) || !isfinite(c.stage2_s) || !isfinite(e))
        abort();
}

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
        faults(&job, &hw);
    }
    return 0;
}
