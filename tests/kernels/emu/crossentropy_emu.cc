/* tests/kernels/emu/crossentropy_emu.cc: kernels/crossentropy.cu compiled for the CPU (tests/kernels/cuda_emu.h). */
#include "kernels/crossentropy.cu"
