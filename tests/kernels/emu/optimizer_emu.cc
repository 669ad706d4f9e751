/* tests/kernels/emu/optimizer_emu.cc: kernels/optimizer.cu compiled for the CPU (tests/kernels/cuda_emu.h). */
#include "kernels/optimizer.cu"
