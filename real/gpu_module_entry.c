/* real/gpu_module_entry.c: the module side of real/gpu_module.h: the
 * table of real/'s GPU entry points, the module's first exported symbol
 * (calib/bench_gpu_entry.c exports calib's). */
#include "real/gpu_module.h"

__attribute__((visibility("default"))) const gpu_module_api_t *megasim_gpu_module(void);

const gpu_module_api_t *megasim_gpu_module(void)
{
    static const gpu_module_api_t table = {
        .abi = GPU_MODULE_ABI,
        .rt_gpu_create = rt_gpu_create,
        .rt_gpu_count = rt_gpu_count,
        .comm_nccl_create = comm_nccl_create,
    };
    return &table;
}
