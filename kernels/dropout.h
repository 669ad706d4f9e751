/* kernels/dropout.h: dropout drawn from a counter-based generator
 * (Philox4x32-10, Salmon et al., SC'11, as FlashAttention and cuRAND use),
 * so a mask is a pure function of (seed, site, step, element index): the
 * backward and a recomputed forward regenerate it instead of storing it,
 * the CPU reference and the CUDA kernel draw the same bits, and, with
 * element indices taken in the whole model (global sample, token, column
 * or head), every parallel plan drops the same elements.
 *
 * Element e of a call keeps with probability 1 - p and is then scaled by
 * 1 / (1 - p) (inverted dropout, as torch.nn.Dropout): keep iff word e mod
 * 4 of Philox at counter (e / 4 lo, e / 4 hi, site, step) under key (seed
 * lo, seed hi) is >= p 2^32. Four elements share one Philox call, as
 * torch's dropout uses all four words; kern_dropout_block lets a loop over
 * consecutive elements pay one call per four.
 *
 * Indices: an elementwise call (hidden dropout) numbers element i of its
 * array base + i. Attention (kernels/attention.h) numbers probability
 * (b, h, i, j) of a call (((base + b) heads + head0 + h) T + i) T + j:
 * base the call's first sample, heads the model's query heads, head0 the
 * call's first (tensor parallelism holds a slice of them). */
#ifndef KERN_DROPOUT_H
#define KERN_DROPOUT_H
#include "kernels/kern_common.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef struct kern_dropout {
  float p;                 /* drop probability, [0, 1); 0: the identity, nothing drawn */
  float scale;             /* 1 / (1 - p) */
  uint32_t thresh;         /* p 2^32: keep iff the draw >= thresh */
  uint32_t site, step;     /* which dropout of the model (kern_dropout_site), and the iteration */
  uint32_t seed_lo, seed_hi;
  long long base;          /* see the index rules above */
  int heads, head0;        /* attention only */
} kern_dropout;

/* No dropout: a kern_dropout field's initialiser where p is 0. */
#define KERN_NO_DROPOUT {0.0f, 1.0f, 0u, 0u, 0u, 0u, 0u, 0LL, 0, 0}

/* Sites: one per dropout of layer `layer` (in the whole model). */
enum { KERN_DROP_ATTN, KERN_DROP_AFTER_ATTN, KERN_DROP_AFTER_MLP, KERN_DROP_EMBED, KERN_DROP_KINDS };
static inline uint32_t kern_dropout_site(int layer, int kind) {
  return (uint32_t)layer * KERN_DROP_KINDS + (uint32_t)kind;
}

/* A descriptor with p, seed, site and step; base, heads, head0 0. */
kern_dropout kern_dropout_make(float p, unsigned long long seed, uint32_t site, uint32_t step);

/* Philox4x32-10 of counter c under key k, into c (all four words). */
static inline KERN_HD void kern_philox4x32_10(uint32_t c[4], uint32_t k0, uint32_t k1) {
  for (int r = 0; r < 10; r++) {
    uint64_t p0 = (uint64_t)0xD2511F53u * c[0], p1 = (uint64_t)0xCD9E8D57u * c[2];
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c[1] ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c[3] ^ k1;
    c[1] = (uint32_t)p1, c[3] = (uint32_t)p0, c[0] = n0, c[2] = n2;
    k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
  }
}

/* The four words of elements 4 q .. 4 q + 3. */
static inline KERN_HD void kern_dropout_words(const kern_dropout *d, long long q, uint32_t c[4]) {
  c[0] = (uint32_t)q, c[1] = (uint32_t)((unsigned long long)q >> 32), c[2] = d->site, c[3] = d->step;
  kern_philox4x32_10(c, d->seed_lo, d->seed_hi);
}

/* The multiplier an element's Philox word gives it: 0 (dropped) or scale. */
static inline KERN_HD float kern_dropout_word_mult(const kern_dropout *d, uint32_t word) {
  return word >= d->thresh ? d->scale : 0.0f;
}

/* The multiplier of element e. */
static inline KERN_HD float kern_dropout_mult(const kern_dropout *d, long long e) {
  uint32_t c[4];
  kern_dropout_words(d, e >> 2, c);
  return kern_dropout_word_mult(d, c[e & 3]);
}

/* kern_dropout_mult with the last call's four words kept (q < 0: none yet):
 * the same multipliers, one Philox call per four consecutive elements. */
typedef struct kern_dropout_block {
  long long q;
  uint32_t w[4];
} kern_dropout_block;

static inline KERN_HD float kern_dropout_mult_block(const kern_dropout *d, long long e, kern_dropout_block *b) {
  if (b->q != e >> 2) b->q = e >> 2, kern_dropout_words(d, b->q, b->w);
  return kern_dropout_word_mult(d, b->w[e & 3]);
}

/* The index of attention probability (b, h, i, j) (index rule above). */
static inline KERN_HD long long kern_dropout_attn_index(const kern_dropout *d, int b, int h, int i, int j, int T) {
  long long bh = (d->base + b) * d->heads + d->head0 + h;
  return (bh * T + i) * T + j;
}

/* The multiplier of attention probability (b, h, i, j). */
static inline KERN_HD float kern_dropout_attn_mult(const kern_dropout *d, int b, int h, int i, int j, int T) {
  return kern_dropout_mult(d, kern_dropout_attn_index(d, b, h, i, j, T));
}

/* out[i] = in[i] * mult(base + i), i < n; out may alias in. The forward
 * and the backward are the same call (the backward on the gradient). With
 * mask (may be NULL), mask[i] = 1 where element i is kept, else 0: the
 * 1-byte mask torch.nn.Dropout keeps for its backward (Megatron-LM's hidden
 * dropout), which kern_dropout_masked applies instead of drawing again. */
void kern_dropout_ref(float *out, uint8_t *mask, const float *in, long n, kern_dropout d);

/* out[i] = x[i] + in[i] * mult(base + i): Megatron-LM's bias-dropout-add
 * (the bias already added by the GEMM's epilogue), the residual add of a
 * dropped branch in one pass instead of dropout then add; mask as
 * kern_dropout_ref's. out may alias x or in. */
void kern_dropout_add_ref(float *out, uint8_t *mask, const float *x, const float *in, long n, kern_dropout d);

/* out[i] = in[i] * (mask[i] ? scale : 0): dropout's backward from its kept
 * mask (scale = 1 / (1 - p)); out may alias in. */
void kern_dropout_masked_ref(float *out, const float *in, const uint8_t *mask, long n, float scale);

#ifdef KERN_HAVE_CUDA
int kern_dropout_cuda(kern_bf16 *out, uint8_t *mask, const kern_bf16 *in, long n, kern_dropout d,
                      cudaStream_t stream);
int kern_dropout_add_cuda(kern_bf16 *out, uint8_t *mask, const kern_bf16 *x, const kern_bf16 *in, long n,
                          kern_dropout d, cudaStream_t stream);
int kern_dropout_masked_cuda(kern_bf16 *out, const kern_bf16 *in, const uint8_t *mask, long n, float scale,
                             cudaStream_t stream);
#endif

#ifdef __cplusplus
}
#endif
#endif
