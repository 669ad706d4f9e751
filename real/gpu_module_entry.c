/* real/gpu_module_entry.c: the module side of real/gpu_module.h: the one
 * symbol libmegasim_gpu.so exports, the table of its GPU entry points. */
#include "real/gpu_module.h"

#include "calib/bench_gpu.h"

__attribute__((visibility("default"))) const gpu_module_api_t *megasim_gpu_module(void);

const gpu_module_api_t *megasim_gpu_module(void)
{
    static const gpu_module_api_t table = {
        .abi = GPU_MODULE_ABI,
        .rt_gpu_create = rt_gpu_create,
        .rt_gpu_count = rt_gpu_count,
        .comm_nccl_create = comm_nccl_create,
        .calib_gpu_init = calib_gpu_init,
        .calib_gpu_describe = calib_gpu_describe,
        .calib_gpu_free = calib_gpu_free,
        .calib_gpu_table = &calib_gpu_device,
    };
    return &table;
}
