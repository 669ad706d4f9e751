/* calib/bench_gpu_entry.c: the module side of calib/bench_gpu.h: the
 * table of calibrate's GPU entry points, exported by libmegasim_gpu.so as
 * CALIB_GPU_ENTRY beside real/'s table (real/gpu_module.h). */
#include "calib/bench_gpu.h"

__attribute__((visibility("default"))) const calib_gpu_api_t *megasim_gpu_calib(void);

const calib_gpu_api_t *megasim_gpu_calib(void)
{
    static const calib_gpu_api_t table = {
        .init = calib_gpu_init,
        .describe = calib_gpu_describe,
        .free = calib_gpu_free,
        .table = &calib_gpu_device,
    };
    return &table;
}
