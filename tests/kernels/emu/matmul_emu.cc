/* tests/kernels/emu/matmul_emu.cc: kernels/matmul.cu compiled for the CPU (tests/kernels/cuda_emu.h; cuBLASLt: cublaslt_emu.cc). */
#include "kernels/matmul.cu"
