/* tests/kernels/test_optimizer_cuda.c: CUDA AdamW and LAMB vs the
 * reference on a list of 50 tensors (more than one launch's 48), sizes
 * from 1 to 3 chunks and odd; fp32 state, so tolerances are fp32-tight
 * (1e-6 + 1e-5 |ref|; LAMB's norms are summed in a different order); the
 * gradients scaled by 0.5 (clipping's grad_scale); and the per-tensor sums
 * of g^2 of clipping's norm pass. Each tensor's param, m, v and bf16 copy
 * are compared. */
#include <stdlib.h>
#include "kern_gpu.h"
#include "kernels/optimizer.h"

#define NT 50

static int run(int lamb, kc_rng *r) {
  kern_opt_tensor h[NT], d[NT];
  kern_opt_hparams hp = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 3, 0.5f};
  for (int k = 0; k < NT; k++) {
    long n = 1 + (k * 2731L) % 9000;
    h[k] = (kern_opt_tensor){kc_rand(r, n, -1, 1), kc_rand(r, n, -1, 1), kc_rand(r, n, -0.1f, 0.1f),
                             kc_rand(r, n, 0, 0.01f), malloc(sizeof(kern_bf16) * n), n};
    d[k] = (kern_opt_tensor){kg_f32(h[k].param, n), kg_f32(h[k].grad, n), kg_f32(h[k].m, n),
                             kg_f32(h[k].v, n), kg_bf16(NULL, n), n};
  }
  float *norms = kg_f32(NULL, 2 * NT);
  int bad = 0;
  if (!lamb) { /* the gradient-norm pass of clipping */
    float want[NT], got[NT];
    kern_grad_sumsq_ref(h, NT, want);
    KG_CHECK(kern_grad_sumsq_cuda(d, NT, norms, 0));
    kg_get_f32(got, norms, NT);
    bad += kc_compare("sum of g^2 per tensor", got, want, NT, 1e-6f, 1e-5f);
  }
  lamb ? kern_lamb_ref(h, NT, hp) : kern_adamw_ref(h, NT, hp);
  KG_CHECK(lamb ? kern_lamb_cuda(d, NT, hp, norms, 0) : kern_adamw_cuda(d, NT, hp, 0));
  for (int k = 0; k < NT; k++) {
    float *got = kc_zeros(h[k].n), *ref16 = kc_zeros(h[k].n);
    char what[64];
    snprintf(what, sizeof what, "%s param[%d]", lamb ? "LAMB" : "AdamW", k);
    kg_get_f32(got, d[k].param, h[k].n);
    int b = kc_compare(what, got, h[k].param, h[k].n, 1e-6f, 1e-5f);
    kg_get_f32(got, d[k].m, h[k].n), b += kc_compare("  m", got, h[k].m, h[k].n, 1e-7f, 1e-5f);
    kg_get_f32(got, d[k].v, h[k].n), b += kc_compare("  v", got, h[k].v, h[k].n, 1e-9f, 1e-5f);
    kg_get_bf16(got, d[k].param_bf16, h[k].n);
    for (long i = 0; i < h[k].n; i++) ref16[i] = h[k].param[i];
    kc_round_bf16(ref16, h[k].n);
    b += kc_compare("  bf16 copy", got, ref16, h[k].n, 0, 1e-2f);
    bad += b;
    free(got), free(ref16);
    free(h[k].param), free((float *)h[k].grad), free(h[k].m), free(h[k].v), free(h[k].param_bf16);
  }
  KG_CUDA(cudaDeviceReset());
  return bad;
}

int main(void) {
  kg_require_gpu("kern_optimizer_cuda");
  kc_rng r = {15};
  int bad = run(0, &r) + run(1, &r);
  return kc_finish("kern_optimizer_cuda", bad);
}
