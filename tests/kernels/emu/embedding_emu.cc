/* tests/kernels/emu/embedding_emu.cc: kernels/embedding.cu compiled for the CPU (tests/kernels/cuda_emu.h). */
#include "kernels/embedding.cu"
