/* tests/kernels/emu/dropout_emu.cc: kernels/dropout.cu compiled for the CPU (tests/kernels/cuda_emu.h). */
#include "kernels/dropout.cu"
