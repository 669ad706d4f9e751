/* tests/kernels/emu/gelu_emu.cc: kernels/gelu.cu compiled for the CPU (tests/kernels/cuda_emu.h). */
#include "kernels/gelu.cu"
