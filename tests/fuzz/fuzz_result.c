/* tests/fuzz/fuzz_result.c: a result file, as `plot`, `compare` and
 * `--replay` take it: vetted in a child process (out_h5_vet: what would
 * crash or hang libhdf5 stops there), then read in this one: the recorded
 * configuration as strict JSON, and every figure's data (plot_prepare,
 * the reader plot and compare share), written to a scratch folder. */
#include "tests/fuzz/fuzz.h"

#include "cmd/plot_data.h"
#include "sim/out.h"

#include <cjson/cJSON.h>
#include <hdf5.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char outdir[600];
    const char *path = fuzz_file(data, size, ".h5");
    if (!path)
        return 0;
    snprintf(outdir, sizeof outdir, "%s.d", path);
    mkdir(outdir, 0777);
    char err[2048];
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    plot_set_t set;
    if (H5Fis_hdf5(path) > 0 && out_h5_vet(path, err, sizeof err) == 0) {
        hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
        cJSON *config = NULL;
        if (f >= 0 && out_h5_attr_json(f, path, "config_json", &config, err, sizeof err) == 0)
            cJSON_Delete(config);
        if (f >= 0)
            H5Fclose(f);
        plot_prepare(path, outdir, &set, err, sizeof err);
    }
    return 0;
}
