/* tests/kernels/emu/layernorm_emu.cc: kernels/layernorm.cu compiled for the CPU (tests/kernels/cuda_emu.h). */
#include "kernels/layernorm.cu"
