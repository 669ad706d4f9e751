/* kernels/attention_int.cuh: what the attention kernels' files share
 * (attention.cu: the flash kernels; attention_unfused.cu: the unfused
 * baseline). Not for other users: kernels/attention.h is the interface. */
#ifndef KERN_ATTENTION_INT_CUH
#define KERN_ATTENTION_INT_CUH
#include "kernels/attention.h"
#include "kernels/kern_cuda.cuh"

/* blocks: the kernel takes a block of the sequence (Tk, q0, k0; the
 * flash kernels), else it refuses one (the unfused pair). */
static inline int attn_check(kern_attn_shape s, bool blocks = true) {
  if (!blocks && (kern_attn_tk(&s) != s.T || s.q0 || s.k0))
    return kern_report_cuda((int)cudaErrorInvalidValue, "unfused attention: no blocks (Tk != T, q0, k0)",
                            __FILE__, __LINE__);
  if (kern_attn_shape_check(s) == 0 && s.HS <= 128) return 0;
  return kern_report_cuda((int)cudaErrorInvalidValue, "attention shape (HS <= 128, NH % NKV)",
                          __FILE__, __LINE__);
}

#endif
