/* real/gpu_module: the GPU half of megasim (real/rt_gpu.c, rt_gpu_kern.cu,
 * comm_nccl.c and calib/bench_gpu*.c with the CUDA kernels, cuBLASLt, the
 * CUDA runtime and NCCL) lives in a module, libmegasim_gpu.so, that the
 * program opens only when a command asks for a GPU. Linked in, those
 * libraries cost every command (`predict` included) about 0.1 s and 220 MB
 * of resident memory at start-up, before main runs.
 *
 * The program side (real/gpu_module.c, library megasim_gpu_loader) defines
 * the public GPU entry points of real/rt.h and real/comm.h; each opens the
 * module on first use and calls through the table below. calib/ does the
 * same for its own entry points (calib/bench_gpu_loader.c) through
 * gpu_module_symbol, so that real/ never includes calib/ (calib sits one
 * layer above real: it times the runtimes real defines). Without the
 * module (a build without CUDA, a machine without the CUDA libraries) they
 * report no GPU, with the reason.
 *
 * The module resolves the helpers it shares with the program (arena,
 * collective groups, calibration tables) against the program, which
 * exports its symbols (ENABLE_EXPORTS); its own symbols are hidden, so its
 * rt_gpu_create is not the program's. */
#ifndef REAL_GPU_MODULE_H
#define REAL_GPU_MODULE_H

#include "real/comm.h"
#include "real/rt.h"

#define GPU_MODULE_ABI 15                    /* bump when a table of the module or rt_t changes */
#define GPU_MODULE_FILE "libmegasim_gpu.so"  /* beside the megasim program */
#define GPU_MODULE_ENTRY "megasim_gpu_module" /* const gpu_module_api_t *(void) */

typedef struct {
    int abi; /* GPU_MODULE_ABI of the module's build */
    int (*rt_gpu_create)(rt_t **rt, int device, const size_t plan[RT_NPOOLS], char *err, int errlen);
    int (*rt_gpu_count)(char *why, size_t len);
    int (*comm_nccl_create)(comm_t **c, rt_t *rt, const comm_plan_t *p, char *err, int errlen);
} gpu_module_api_t;


/* Another entry point the module exports (a function returning the table
 * of a layer above real/), looked up once the module is open and its ABI
 * checked; NULL with the reason in why. */
void *gpu_module_symbol(const char *name, char *why, size_t len);

#endif
