/* kernels/rope.h: rotary position embedding (RoPE, Su et al. 2021), as
 * Megatron-LM applies it to the queries and keys (rotary_percent 1, the
 * rotate-half layout): in each head of HS, element i < HS/2 pairs with
 * i + HS/2 and the pair turns by the angle t theta_i, t the token's place
 * in its sequence and theta_i = base^(-2 i / HS):
 *   x'[i]        = x[i] cos - x[i + HS/2] sin
 *   x'[i + HS/2] = x[i + HS/2] cos + x[i] sin
 * In place on x (N, H, HS), N = B T rows in sequence order (row n sits at
 * t = t0 + n mod T: t0 0 for whole sequences, the block's first place for
 * a block of each sequence, as a context-parallel rank holds). The turn is orthogonal, so the backward is the turn by
 * minus the angle: inverse = 1. Angles in double (sequences of thousands
 * of tokens reach thousands of radians). */
#ifndef KERN_ROPE_H
#define KERN_ROPE_H
#include <math.h>
#include "kernels/kern_common.h"
#ifdef __cplusplus
extern "C" {
#endif

/* The one definition of the angle, for the reference and the kernel. */
static inline KERN_HD double kern_rope_angle(int t, int i, int HS, double base) {
  return (double)t * pow(base, -2.0 * i / HS);
}

void kern_rope_ref(float *x, int N, int T, int t0, int H, int HS, double base, int inverse);

#ifdef KERN_HAVE_CUDA
int kern_rope_cuda(kern_bf16 *x, int N, int T, int t0, int H, int HS, double base, int inverse,
                   cudaStream_t stream);
#endif

#ifdef __cplusplus
}
#endif
#endif
