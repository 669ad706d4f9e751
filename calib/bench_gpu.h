/* calib/bench_gpu: the GPU device of `megasim calibrate --device gpu`
 * (calib/bench_gpu.c), one GPU per process, held between calib_gpu_init
 * and calib_gpu_free. bench_gpu*.c are built into the GPU module
 * (real/gpu_module.h) when CUDA is there, with calib/bench_gpu_entry.c,
 * which exports their table; the program calls these through
 * calib/bench_gpu_loader.c, which reports no GPU, with the reason, when
 * the module cannot be opened. */
#ifndef CALIB_BENCH_GPU_H
#define CALIB_BENCH_GPU_H

#include "calib/calib.h"

#include <stddef.h>

/* Takes this rank's GPU: its local rank among the ranks on its node
 * (MPI_COMM_TYPE_SHARED, when MPI is initialized) modulo the devices;
 * more ranks on a node than GPUs is refused (NCCL needs one GPU per rank).
 * Creates the cuBLASLt context, the compute and collective streams, the
 * timing events and the L2 flush buffer. 0, or -1 with a message in err. */
int calib_gpu_init(char *err, size_t len);

/* Name, compute capability, SMs, memory, clocks, driver / runtime / NCCL /
 * cuBLASLt versions of this rank's GPU (after calib_gpu_init). */
void calib_gpu_describe(calib_gpu_info_t *info);

/* Frees everything calib_gpu_init and the benchmarks made (the NCCL
 * communicator included); safe to call twice or after a failed init.
 * Before MPI_Finalize. */
void calib_gpu_free(void);

/* gemm, attention, memory (rank 0), collectives and comm_slowdown (every
 * rank, >= 2 ranks): calib.h's device table. calib_gpu_device is the
 * module's own; the program asks for it with calib_gpu_table (NULL without
 * the module). */
extern const calib_device_t calib_gpu_device;
const calib_device_t *calib_gpu_table(void);

/* The module's table of these entry points (calib/bench_gpu_entry.c),
 * exported as CALIB_GPU_ENTRY. */
#define CALIB_GPU_ENTRY "megasim_gpu_calib" /* const calib_gpu_api_t *(void) */
typedef struct {
    int (*init)(char *err, size_t len);
    void (*describe)(calib_gpu_info_t *info);
    void (*free)(void);
    const calib_device_t *table;
} calib_gpu_api_t;

#endif
