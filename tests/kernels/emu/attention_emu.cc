/* tests/kernels/emu/attention_emu.cc: kernels/attention.cu compiled for the CPU (tests/kernels/cuda_emu.h). */
#include "kernels/attention.cu"
