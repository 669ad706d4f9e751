/* tests/kernels/emu/attention_unfused_emu.cc: kernels/attention_unfused.cu compiled for the CPU (tests/kernels/cuda_emu.h). */
#include "kernels/attention_unfused.cu"
