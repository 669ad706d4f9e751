/* tests/kernels/emu/cuda_bf16.h: bf16 for the emulated build (cuda_emu.h). */
#include "cuda_runtime.h"
