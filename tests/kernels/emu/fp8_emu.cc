/* tests/kernels/emu/fp8_emu.cc: kernels/fp8.cu compiled for the CPU (tests/kernels/cuda_emu.h). */
#include "kernels/fp8.cu"
