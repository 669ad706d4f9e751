/* tests/real/gpu_emu/rt_gpu_kern_emu.cc: real/rt_gpu_kern.cu compiled for the CPU (tests/kernels/cuda_emu.h). */
#include "real/rt_gpu_kern.cu"
