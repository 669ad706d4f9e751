/* tests/kernels/test_gelu_ref.c: fused bias + GeLU against the unfused
 * sequence (bias add, GeLU; GeLU backward, bias gradient), which must agree
 * to fp32 rounding; the fused backward, and each unfused backward piece
 * (GeLU backward, bias gradient) on its own, against finite differences;
 * the SwiGLU backward against finite differences of its forward. */
#include <stdio.h>
#include <stdlib.h>
#include "kern_check.h"
#include "kernels/gelu.h"

typedef struct { int N, C; float *inp, *bias, *out, *proj; } ctx_t;

static double loss(void *p) {
  ctx_t *c = p;
  kern_bias_gelu_fwd_ref(c->out, c->inp, c->bias, c->N, c->C);
  return kc_dot(c->out, c->proj, (long)c->N * c->C);
}

/* The unfused pieces alone: L = sum(gelu(x) .* proj) for the GeLU
 * backward, L = sum((x + b) .* proj) for the bias gradient. */
static double gelu_loss(void *p) {
  ctx_t *c = p;
  kern_gelu_fwd_ref(c->out, c->inp, (long)c->N * c->C);
  return kc_dot(c->out, c->proj, (long)c->N * c->C);
}
static double bias_loss(void *p) {
  ctx_t *c = p;
  kern_bias_add_ref(c->out, c->inp, c->bias, c->N, c->C);
  return kc_dot(c->out, c->proj, (long)c->N * c->C);
}

static int run_unfused(int N, int C, kc_rng *r) {
  long n = (long)N * C;
  ctx_t c = {N, C, kc_rand(r, n, -3, 3), kc_rand(r, C, -1, 1), kc_zeros(n), kc_rand(r, n, -1, 1)};
  printf("unfused pieces: shape N=%d C=%d\n", N, C);
  float *dinp = kc_zeros(n), *db = kc_zeros(C);
  kern_gelu_bwd_ref(dinp, c.proj, c.inp, n);
  kern_bias_grad_ref(db, c.proj, N, C);
  int bad = kc_fd_check("gelu_bwd dinp", c.inp, dinp, n, gelu_loss, &c, r, 30) +
            kc_fd_check("bias_grad dbias", c.bias, db, C, bias_loss, &c, r, 30);
  free(c.inp), free(c.bias), free(c.out), free(c.proj), free(dinp), free(db);
  return bad;
}

static int run(int N, int C, kc_rng *r) {
  long n = (long)N * C;
  ctx_t c = {N, C, kc_rand(r, n, -3, 3), kc_rand(r, C, -1, 1), kc_zeros(n), kc_rand(r, n, -1, 1)};
  printf("shape N=%d C=%d\n", N, C);
  float *u = kc_zeros(n), *dinp = kc_zeros(n), *du = kc_zeros(n);
  float *db = kc_zeros(C), *dbu = kc_zeros(C);
  loss(&c);
  kern_bias_add_ref(u, c.inp, c.bias, N, C);
  kern_gelu_fwd_ref(u, u, n);
  int bad = kc_compare("fused vs unfused fwd", c.out, u, n, 1e-6f, 1e-6f);
  kern_bias_gelu_bwd_ref(dinp, db, c.proj, c.inp, c.bias, N, C);
  kern_bias_add_ref(u, c.inp, c.bias, N, C);
  kern_gelu_bwd_ref(du, c.proj, u, n);
  kern_bias_grad_ref(dbu, du, N, C);
  bad += kc_compare("fused vs unfused dinp", dinp, du, n, 1e-6f, 1e-6f);
  bad += kc_compare("fused vs unfused dbias", db, dbu, C, 1e-5f, 1e-5f);
  bad += kc_fd_check("dinp", c.inp, dinp, n, loss, &c, r, 30);
  bad += kc_fd_check("dbias", c.bias, db, C, loss, &c, r, 30);
  free(c.inp), free(c.bias), free(c.out), free(c.proj), free(u), free(dinp), free(du);
  free(db), free(dbu);
  return bad;
}

typedef struct { int N, F; float *inp, *out, *proj; } sw_ctx_t;

static double sw_loss(void *p) {
  sw_ctx_t *c = p;
  kern_swiglu_fwd_ref(c->out, c->inp, c->N, c->F);
  return kc_dot(c->out, c->proj, (long)c->N * c->F);
}

static int run_swiglu(int N, int F, kc_rng *r) {
  long n = (long)N * F;
  sw_ctx_t c = {N, F, kc_rand(r, 2 * n, -3, 3), kc_zeros(n), kc_rand(r, n, -1, 1)};
  printf("SwiGLU: shape N=%d F=%d\n", N, F);
  float *dinp = kc_zeros(2 * n);
  sw_loss(&c);
  kern_swiglu_bwd_ref(dinp, c.proj, c.inp, N, F);
  int bad = kc_fd_check("dinp [gate | up]", c.inp, dinp, 2 * n, sw_loss, &c, r, 40);
  free(c.inp), free(c.out), free(c.proj), free(dinp);
  return bad;
}

int main(void) {
  kc_rng r = {3};
  int bad = run(3, 5, &r) + run(16, 40, &r) + run_unfused(7, 9, &r) + run_swiglu(3, 5, &r) + run_swiglu(8, 24, &r);
  return kc_finish("kern_gelu_ref", bad);
}
