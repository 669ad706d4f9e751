/* tests/kernels/emu/mma.h: nvcuda::wmma for the emulated build (cuda_emu.h). */
#include "cuda_runtime.h"
