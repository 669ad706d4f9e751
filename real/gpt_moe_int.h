/* real/gpt_moe_int.h: what the MoE layer's two halves share (gpt_moe.c:
 * the dispatch, the experts, the combine; gpt_moe_route.c: the routing
 * on the host): the layer's saved state and the experts' collectives over
 * EP. Not a public API. */
#ifndef REAL_GPT_MOE_INT_H
#define REAL_GPT_MOE_INT_H

#include "real/gpt_layer.h"

#include <stdint.h>

struct moe_saved {
    float *probs, *scores, *coef; /* device: (Nl, k), (Nl, E), the auxiliary loss's factors or NULL */
    int coef_ld;                  /* their row stride (kernels/moe.h): 0 (E factors) or E (Nl rows) */
    int *idx;                     /* device (Nl, k) */
    int *perm_tok, *sort_rows, *unsort_rows; /* device: (M) token of each sent row, (Rp) gathered row of each
                                                expert-order row (-1: padding), (Rg) expert-order row of each
                                                gathered row */
    int *inv;                     /* device (Nt k): the sent row of each pair of the tokens numbered (-1: none) */
    float *perm_w;                /* device (M): each sent row's weight */
    int *perm_pair;               /* host (M): its (token, choice) pair, n k + j */
    long *scount, *rcount;        /* host [EP]: rows sent to, received from, each EP rank */
    long *gcount;                 /* host [ETP]: rows each ETP rank of this EP position received (R each) */
    long *ecount;                 /* host [El]: rows of each local expert (padding included) */
    long M, R, Rg, Rp;            /* rows sent, received, gathered over ETP (R when ETP is 1), in expert order */
    double dropped, aux;          /* this rank's dropped pairs, auxiliary loss (its share of the objective) */
    double load_cv;               /* the micro-batch's expert loads' coefficient of variation */
    void *shared;                 /* the shared expert's saved state (gpt_moe_shared.c), or NULL */
    uint64_t drop_sig;            /* their signature (gpt.h) */
    void *xe, *pre, *gl, *ys;     /* (Rp, C), (Rp, Fwe), (Rp, Fe): the experts' input, FC1 output, activation
                                     (this ETP rank's slice);
                                     (M, C): their outputs back home, in sent order */
};

static inline int dev_alloc(gpt_t *m, void **p, size_t bytes) { return OP->alloc(RT, p, bytes ? bytes : 4, RT_POOL_MAIN); }

/* A host array copied to a new device one. */
static inline int to_dev(gpt_t *m, void **dst, const void *src, size_t bytes)
{
    RT_TRY(dev_alloc(m, dst, bytes));
    return bytes ? OP->h2d(RT, *dst, src, bytes) : 0;
}

/* The all-to-all over EP of rows of `width` elements: rrows[p] from, and
 * srows[p] to, EP rank p (its time counted in compare's all-to-all class
 * when EP > 1). */
int moe_ep_alltoallv(gpt_t *m, void *out, const long *rrows, const void *in, const long *srows, long width, int dt);

/* The allgather dispatcher's gather: *full (EP x count, allocated) holds
 * every EP rank's local (count), in EP order. */
int moe_ep_gather(gpt_t *m, void **full, const void *local, long count, int dt);

/* The router of MoE layer l of chunk c on s->h2: logits, top-k, then on
 * the host the capacity's drops, the loads and the auxiliary factor, and
 * the permutation, with their counts over EP and ETP, into v. */
int gpt_moe_route(gpt_t *m, int c, int l, layer_saved_t *s, moe_saved_t *v);

#endif
