/* kernels/moe.h: the mixture-of-experts layer's own kernels, as
 * Megatron-Core's router and token permutation compute them (the expert
 * MLPs are the linear and activation kernels of the other families).
 *   route:    a token's top-k of its E router logits (ties to the lower
 *             expert), probs = their softmax (Megatron-Core's default,
 *             without --moe-router-pre-softmax), and scores = the softmax
 *             over all E, what the auxiliary load-balancing loss reads;
 *   route backward: the logits' gradient from the probs' gradient dprobs
 *             and the auxiliary loss sum_n sum_e coef[e] scores[n][e]
 *             (coef: the per-expert factor of the switch-transformer loss,
 *             worked out by the caller from the token counts);
 *   gather:   out[i] = w[i] x[rows[i]] (w NULL: 1), the permutation of
 *             tokens into expert order; rows[i] < 0 is a padding row (0);
 *   scatter_add: out[rows[i]] += w[i] y[i] (w NULL: 1), the combine and the
 *             permutation's backward; rows[i] < 0 is skipped;
 *   rowdot:   out[i] = <a[rows[i]], b[i]>, the combine's gradient of w.
 * Layouts: logits, scores, dlogits (N, E); probs, idx, dprobs (N, k); x,
 * a, out of scatter_add (N, C); y, b, out of gather (M, C). fp32
 * reference: the CPU path runs it. */
#ifndef KERN_MOE_H
#define KERN_MOE_H
#ifdef __cplusplus
extern "C" {
#endif

void kern_moe_route_ref(float *probs, int *idx, float *scores, const float *logits, int N, int E, int k);
void kern_moe_route_bwd_ref(float *dlogits, const float *dprobs, const float *probs, const int *idx,
                            const float *scores, const float *coef, int N, int E, int k);
void kern_moe_gather_ref(float *out, const float *x, const int *rows, const float *w, long M, int C);
void kern_moe_scatter_add_ref(float *out, const float *y, const int *rows, const float *w, long M, int C);
void kern_moe_rowdot_ref(float *out, const float *a, const int *rows, const float *b, long M, int C);

#ifdef __cplusplus
}
#endif
#endif
