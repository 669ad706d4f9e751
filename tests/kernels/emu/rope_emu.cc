/* tests/kernels/emu/rope_emu.cc: kernels/rope.cu compiled for the CPU (tests/kernels/cuda_emu.h). */
#include "kernels/rope.cu"
