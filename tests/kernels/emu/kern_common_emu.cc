/* tests/kernels/emu/kern_common_emu.cc: kernels/kern_common.cu compiled for the CPU (tests/kernels/cuda_emu.h). */
#include "kernels/kern_common.cu"
