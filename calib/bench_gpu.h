/* calib/bench_gpu: the GPU device of `megasim calibrate --device gpu`
 * (calib/bench_gpu.c). Compiled only with CUDA (CALIB_HAVE_CUDA, set by
 * calib/CMakeLists.txt when MEGASIM_HAVE_CUDA); one GPU per process, held
 * between calib_gpu_init and calib_gpu_free. */
#ifndef CALIB_BENCH_GPU_H
#define CALIB_BENCH_GPU_H

#include "calib/calib.h"

#include <stddef.h>

/* CUDA devices visible to this process; 0 with the reason in why (no
 * device, no driver) when there is none. Creates no context. */
int calib_gpu_count(char *why, size_t len);

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
 * rank, >= 2 ranks): calib.h's device table. */
extern const calib_device_t calib_gpu_device;

#endif
