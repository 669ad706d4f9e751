/* real/gpu_module: the GPU half of megasim (real/rt_gpu.c, rt_gpu_kern.cu,
 * comm_nccl.c and calib/bench_gpu.c with the CUDA kernels, cuBLASLt, the
 * CUDA runtime and NCCL) lives in a module, libmegasim_gpu.so, that the
 * program opens only when a command asks for a GPU. Linked in, those
 * libraries cost every command (`predict` included) about 0.1 s and 220 MB
 * of resident memory at start-up, before main runs.
 *
 * The program side (real/gpu_module.c, library megasim_gpu_loader) defines
 * the public GPU entry points of real/rt.h, real/comm.h and
 * calib/bench_gpu.h; each opens the module on first use and calls through
 * the table below. Without the module (a build without CUDA, a machine
 * without the CUDA libraries) they report no GPU, with the reason.
 *
 * The module resolves the helpers it shares with the program (arena,
 * collective groups, calibration tables) against the program, which
 * exports its symbols (ENABLE_EXPORTS); its own symbols are hidden, so its
 * rt_gpu_create is not the program's. */
#ifndef REAL_GPU_MODULE_H
#define REAL_GPU_MODULE_H

#include "calib/calib.h"
#include "real/comm.h"
#include "real/rt.h"

#define GPU_MODULE_ABI 6                     /* bump when the table or rt_t changes */
#define GPU_MODULE_FILE "libmegasim_gpu.so"  /* beside the megasim program */
#define GPU_MODULE_ENTRY "megasim_gpu_module" /* const gpu_module_api_t *(void) */

typedef struct {
    int abi; /* GPU_MODULE_ABI of the module's build */
    int (*rt_gpu_create)(rt_t **rt, int device, const size_t plan[RT_NPOOLS], char *err, int errlen);
    int (*rt_gpu_count)(char *why, size_t len);
    int (*comm_nccl_create)(comm_t **c, rt_t *rt, int tp, int dp, int pp, char *err, int errlen);
    int (*calib_gpu_init)(char *err, size_t len);
    void (*calib_gpu_describe)(calib_gpu_info_t *info);
    void (*calib_gpu_free)(void);
    const calib_device_t *calib_gpu_table;
} gpu_module_api_t;

/* The module's table, opened once (thread-safe); NULL with the reason in
 * why when there is none. The path is $MEGASIM_GPU_MODULE when set, else
 * GPU_MODULE_FILE in the program's own folder. */
const gpu_module_api_t *gpu_module_load(char *why, size_t len);

#endif
