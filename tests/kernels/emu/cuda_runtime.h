/* tests/kernels/emu/cuda_runtime.h: see cuda_runtime_api.h; in C++ also the
 * device side (tests/kernels/cuda_emu.h). */
#include "cuda_runtime_api.h"
#ifdef __cplusplus
#include "cuda_emu.h"
#endif
