/* calib/bench_gpu_loader.c: the program side of calib/bench_gpu.h: each
 * entry point finds calib's table in the GPU module (real/gpu_module.h's
 * gpu_module_symbol) on first use and calls through it; without the module
 * it reports no GPU, with the reason. */
#include "calib/bench_gpu.h"

#include "real/gpu_module.h"

#include <stdio.h>

static const calib_gpu_api_t *api; /* set once found */

static const calib_gpu_api_t *calib_api(char *why, size_t len)
{
    if (!api) {
        const calib_gpu_api_t *(*entry)(void);
        *(void **)&entry = gpu_module_symbol(CALIB_GPU_ENTRY, why, len);
        api = entry ? entry() : NULL;
    }
    return api;
}

int calib_gpu_init(char *err, size_t len)
{
    const calib_gpu_api_t *a = calib_api(err, len);
    return a ? a->init(err, len) : -1;
}

void calib_gpu_describe(calib_gpu_info_t *info)
{
    const calib_gpu_api_t *a = calib_api(NULL, 0);
    if (a)
        a->describe(info);
}

void calib_gpu_free(void)
{
    /* nothing to free when the module was never opened */
    if (api)
        api->free();
}

const calib_device_t *calib_gpu_table(void)
{
    const calib_gpu_api_t *a = calib_api(NULL, 0);
    return a ? a->table : NULL;
}
