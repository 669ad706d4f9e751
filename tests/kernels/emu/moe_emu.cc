/* tests/kernels/emu/moe_emu.cc: kernels/moe.cu compiled for the CPU (tests/kernels/cuda_emu.h). */
#include "kernels/moe.cu"
