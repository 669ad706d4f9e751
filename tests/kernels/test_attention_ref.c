/* tests/kernels/test_attention_ref.c: the attention references.
 * 1. flash forward == unfused forward (two algorithms, same function);
 * 2. flash backward == unfused backward;
 * 3. both backwards against finite differences of their forwards,
 * on odd shapes: T not a multiple of anything, GQA (NH / NKV = 2, 4), a
 * sliding window smaller than T and one larger than T (must equal full
 * causal, checked against window 0);
 * 4. all of it again with dropout on the probabilities, and the dropped
 *    output of a tensor-parallel slice of the heads equal to those heads of
 *    the whole call (both draw each probability's mask at its index in
 *    the whole model). */
#include <math.h>
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
  printf("shape B=%d T=%d NH=%d NKV=%d HS=%d window=%d dropout=%.2f\n", s.B, s.T, s.NH, s.NKV, s.HS, s.window,
         s.drop.p);
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

/* Columns [c0, c0 + w) of the (rows, ld) array x into (rows, w). */
static float *cols(const float *x, long rows, int ld, int c0, int w) {
  float *y = kc_zeros(rows * w);
  for (long r = 0; r < rows; r++) memcpy(y + r * w, x + r * ld + c0, sizeof(float) * w);
  return y;
}

/* Heads 2, 3 of 4 (kv head 1 of 2) on their own, as tensor-parallel rank 1
 * of 2 holds them, against the whole call: the same dropped output. */
static int tp_slice(kc_rng *r) {
  kern_attn_shape s = {2, 9, 4, 2, 8, 0, kern_dropout_make(0.3f, 41, kern_dropout_site(6, KERN_DROP_ATTN), 4)};
  s.drop.heads = 4;
  long n = (long)s.B * s.T;
  float *q = kc_rand(r, n * 32, -1, 1), *k = kc_rand(r, n * 16, -1, 1), *v = kc_rand(r, n * 16, -1, 1);
  float *out = kc_zeros(n * 32), *lse = kc_zeros(n * 4), *out1 = kc_zeros(n * 16), *lse1 = kc_zeros(n * 2);
  kern_attention_fwd_ref(out, lse, q, k, v, s);
  kern_attn_shape s1 = s;
  s1.NH = 2, s1.NKV = 1, s1.drop.head0 = 2;
  float *q1 = cols(q, n, 32, 16, 16), *k1 = cols(k, n, 16, 8, 8), *v1 = cols(v, n, 16, 8, 8);
  kern_attention_fwd_ref(out1, lse1, q1, k1, v1, s1);
  float *want = cols(out, n, 32, 16, 16);
  int bad = kc_compare("dropout: heads 2, 3 alone (head0 2 of 4) = those heads of the whole call", out1, want,
                       n * 16, 0, 0);
  s.drop.p = 0;
  kern_attention_fwd_ref(out, lse, q, k, v, s);
  float *plain = cols(out, n, 32, 16, 16);
  double diff = 0;
  for (long i = 0; i < n * 16; i++) diff += fabs(plain[i] - want[i]);
  printf("dropout 0.3 changes the output: mean |difference| %.3g (expected > 0)\n", diff / (n * 16));
  bad += !(diff > 0);
  free(q), free(k), free(v), free(out), free(lse), free(out1), free(lse1), free(q1), free(k1), free(v1);
  free(want), free(plain);
  return bad;
}

int main(void) {
  kc_rng r = {5};
  kern_attn_shape shapes[] = {
      {1, 5, 2, 2, 4, 0, KERN_NO_DROPOUT},   /* plain causal, MHA */
      {2, 7, 4, 2, 8, 3, KERN_NO_DROPOUT},   /* GQA 2, window 3 < T */
      {1, 6, 4, 1, 6, 10, KERN_NO_DROPOUT},  /* GQA 4 (MQA), window 10 > T */
      {1, 13, 2, 1, 16, 5, KERN_NO_DROPOUT}, /* odd T, window 5 */
      {2, 7, 4, 2, 8, 3, KERN_NO_DROPOUT},   /* GQA 2, window 3, and MHA odd T, with dropout */
      {1, 13, 2, 2, 16, 0, KERN_NO_DROPOUT},
  };
  int bad = 0;
  for (unsigned i = 4; i < sizeof shapes / sizeof shapes[0]; i++) { /* heads 4 .. of 8, samples 1 .. */
    shapes[i].drop = kern_dropout_make(0.25f, 9, kern_dropout_site(1, KERN_DROP_ATTN), 3);
    shapes[i].drop.base = 1, shapes[i].drop.heads = 8, shapes[i].drop.head0 = 4;
  }
  for (unsigned i = 0; i < sizeof shapes / sizeof shapes[0]; i++) bad += run(shapes[i], &r);
  bad += tp_slice(&r);
  return kc_finish("kern_attention_ref", bad);
}
