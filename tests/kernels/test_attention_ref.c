/* tests/kernels/test_attention_ref.c: the attention references.
 * 1. flash forward == unfused forward (two algorithms, same function);
 * 2. flash backward == unfused backward;
 * 3. both backwards against finite differences of their forwards,
 * on odd shapes: T not a multiple of anything, GQA (NH / NKV = 2, 4), a
 * sliding window smaller than T and one larger than T (must equal full
 * causal, checked against window 0). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kern_check.h"
#include "kernels/attention.h"

typedef struct { kern_attn_shape s; int unfused; float *q, *k, *v, *out, *lse, *att, *proj; } ctx_t;

static long nq(kern_attn_shape s) { return (long)s.B * s.T * s.NH * s.HS; }
static long nkv(kern_attn_shape s) { return (long)s.B * s.T * s.NKV * s.HS; }

static double loss(void *p) {
  ctx_t *c = p;
  if (c->unfused)
    kern_attention_unfused_fwd_ref(c->out, c->att, c->q, c->k, c->v, c->s);
  else
    kern_attention_fwd_ref(c->out, c->lse, c->q, c->k, c->v, c->s);
  return kc_dot(c->out, c->proj, nq(c->s));
}

static int run(kern_attn_shape s, kc_rng *r) {
  printf("shape B=%d T=%d NH=%d NKV=%d HS=%d window=%d\n", s.B, s.T, s.NH, s.NKV, s.HS, s.window);
  ctx_t c = {s, 0, kc_rand(r, nq(s), -1, 1), kc_rand(r, nkv(s), -1, 1), kc_rand(r, nkv(s), -1, 1),
             kc_zeros(nq(s)), kc_zeros((long)s.B * s.NH * s.T),
             kc_zeros((long)s.B * s.NH * s.T * s.T), kc_rand(r, nq(s), -1, 1)};
  float *g[2][3], *out_u = kc_zeros(nq(s));
  for (int a = 0; a < 2; a++)
    for (int t = 0; t < 3; t++) g[a][t] = kc_zeros(t ? nkv(s) : nq(s));
  kern_attention_unfused_fwd_ref(out_u, c.att, c.q, c.k, c.v, s);
  kern_attention_fwd_ref(c.out, c.lse, c.q, c.k, c.v, s);
  int bad = kc_compare("flash vs unfused out", c.out, out_u, nq(s), 1e-5f, 1e-4f);
  kern_attention_bwd_ref(g[0][0], g[0][1], g[0][2], c.proj, c.q, c.k, c.v, c.out, c.lse, s);
  kern_attention_unfused_bwd_ref(g[1][0], g[1][1], g[1][2], c.proj, c.q, c.k, c.v, c.att, s);
  const char *names[3] = {"dq", "dk", "dv"};
  float *xs[3] = {c.q, c.k, c.v};
  for (int t = 0; t < 3; t++) {
    char what[64];
    snprintf(what, sizeof what, "flash vs unfused %s", names[t]);
    bad += kc_compare(what, g[0][t], g[1][t], t ? nkv(s) : nq(s), 1e-5f, 1e-4f);
  }
  for (int a = 0; a < 2; a++) {
    c.unfused = a;
    for (int t = 0; t < 3; t++) {
      char what[64];
      snprintf(what, sizeof what, "%s %s", a ? "unfused" : "flash", names[t]);
      bad += kc_fd_check(what, xs[t], g[a][t], t ? nkv(s) : nq(s), loss, &c, r, 12);
    }
  }
  if (s.window > s.T) { /* a window wider than the sequence is full causal */
    kern_attn_shape full = s;
    full.window = 0;
    kern_attention_fwd_ref(c.out, c.lse, c.q, c.k, c.v, s); /* FD left c.out perturbed */
    kern_attention_fwd_ref(out_u, c.lse, c.q, c.k, c.v, full);
    bad += kc_compare("window>T vs window 0", c.out, out_u, nq(s), 0, 0);
  }
  for (int a = 0; a < 2; a++)
    for (int t = 0; t < 3; t++) free(g[a][t]);
  free(c.q), free(c.k), free(c.v), free(c.out), free(c.lse), free(c.att), free(c.proj), free(out_u);
  return bad;
}

int main(void) {
  kc_rng r = {5};
  kern_attn_shape shapes[] = {
      {1, 5, 2, 2, 4, 0},   /* plain causal, MHA */
      {2, 7, 4, 2, 8, 3},   /* GQA 2, window 3 < T */
      {1, 6, 4, 1, 6, 10},  /* GQA 4 (MQA), window 10 > T */
      {1, 13, 2, 1, 16, 5}, /* odd T, window 5 */
  };
  int bad = 0;
  for (unsigned i = 0; i < sizeof shapes / sizeof shapes[0]; i++) bad += run(shapes[i], &r);
  return kc_finish("kern_attention_ref", bad);
}
