/* tests/kernels/emu/attnmerge_emu.cc: kernels/attnmerge.cu compiled for the CPU (tests/kernels/cuda_emu.h). */
#include "kernels/attnmerge.cu"
