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
 *    the whole model);
 * 5. blocks (Tk, q0, k0, Tseq: context parallelism's queries of some
 *    positions against keys of others): 1-3 on single blocks (a causal
 *    diagonal one, a window one whose last rows see no key, a fully
 *    visible one); the sequence cut into query blocks x key blocks, the
 *    forwards merged by lse and the backwards given the merged lse and out,
 *    against the whole sequence (causal, window, dropout, GQA, a ring's
 *    equal chunks); zero fields giving the same bits as the whole sequence
 *    written out; kern_attn_shape_check's refusals. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kern_check.h"
#include "kernels/attention.h"

typedef struct { kern_attn_shape s; int unfused; float *q, *k, *v, *out, *lse, *att, *proj; } ctx_t;

static long nq(kern_attn_shape s) { return (long)s.B * s.T * s.NH * s.HS; }
static long nkv(kern_attn_shape s) { return (long)s.B * kern_attn_tk(&s) * s.NKV * s.HS; }

static double loss(void *p) {
  ctx_t *c = p;
  if (c->unfused)
    kern_attention_unfused_fwd_ref(c->out, c->att, c->q, c->k, c->v, c->s);
  else
    kern_attention_fwd_ref(c->out, c->lse, c->q, c->k, c->v, c->s);
  return kc_dot(c->out, c->proj, nq(c->s));
}

static int run(kern_attn_shape s, kc_rng *r) {
  printf("shape B=%d T=%d NH=%d NKV=%d HS=%d window=%d dropout=%.2f Tk=%d q0=%d k0=%d Tseq=%d\n", s.B, s.T, s.NH,
         s.NKV, s.HS, s.window, s.drop.p, s.Tk, s.q0, s.k0, s.Tseq);
  ctx_t c = {s, 0, kc_rand(r, nq(s), -1, 1), kc_rand(r, nkv(s), -1, 1), kc_rand(r, nkv(s), -1, 1),
             kc_zeros(nq(s)), kc_zeros((long)s.B * s.NH * s.T),
             kc_zeros((long)s.B * s.NH * s.T * kern_attn_tk(&s)), kc_rand(r, nq(s), -1, 1)};
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

/* y (n) += a x. */
static void axpy_row(float *y, float a, const float *x, int n) {
  for (int i = 0; i < n; i++) y[i] += a * x[i];
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
  kern_attn_shape s = {2, 9, 4, 2, 8, 0, kern_dropout_make(0.3f, 41, kern_dropout_site(6, KERN_DROP_ATTN), 4),
                       KERN_ATTN_WHOLE};
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

/* ---- blocks of the sequence (context parallelism) --------------------------
 * Megatron-Core's CP ranks hold query rows at some positions and attend the
 * keys of other positions, block by block, then merge the blocks by lse. */

/* Rows [t0, t0 + n) of each of the `outer` (T, w) slices of x, as (outer, n, w). */
static float *rows_of(const float *x, int outer, int T, int w, int t0, int n) {
  float *y = kc_zeros((long)outer * n * w);
  for (int o = 0; o < outer; o++)
    memcpy(y + (long)o * n * w, x + ((long)o * T + t0) * w, sizeof(float) * n * w);
  return y;
}

/* The inverse: y's rows [t0, t0 + n) += x (outer, n, w). */
static void add_rows(float *y, const float *x, int outer, int T, int w, int t0, int n) {
  for (int o = 0; o < outer; o++)
    for (long e = 0; e < (long)n * w; e++) y[((long)o * T + t0) * w + e] += x[(long)o * n * w + e];
}

/* Entries of x that are NaN. */
static long nan_count(const float *x, long n) {
  long c = 0;
  for (long i = 0; i < n; i++) c += x[i] != x[i];
  return c;
}

/* One block's shape: query rows [qa, qb), key rows [ka, kb) of whole. */
static kern_attn_shape block_of(kern_attn_shape whole, int qa, int qb, int ka, int kb) {
  kern_attn_shape s = whole;
  s.T = qb - qa, s.Tk = kb - ka, s.q0 = qa, s.k0 = ka, s.Tseq = whole.T;
  return s;
}

/* The whole sequence's forward and backward against its query blocks
 * qcut[a] .. qcut[a + 1] times key blocks kcut[c] .. kcut[c + 1] (cuts from
 * 0 to T): each block's forward (out_c, lse_c) merged as lse = log sum_c
 * e^lse_c, out = sum_c e^(lse_c - lse) out_c, and each block's backward
 * given the merged lse and out, its dq summed over key blocks and its dk,
 * dv over query blocks. Expected: the whole-sequence call of the same
 * reference (kern_attention_{fwd,bwd}_ref with Tk, q0, k0, Tseq 0), within
 * 1e-5 + 1e-5 |ref| (fp32 summation order and the merge's exp / log). A
 * block that sees nothing must give out 0 and lse -inf exactly, and no
 * block may give a NaN. */
static int split(const char *name, kern_attn_shape s, const int *qcut, int nqb, const int *kcut, int nkb,
                 kc_rng *r) {
  int T = s.T, w = s.NH * s.HS, wk = s.NKV * s.HS, BH = s.B * s.NH;
  long nq_ = nq(s), nk_ = nkv(s), nl = (long)BH * T;
  if (nkb > 16) return 1;
  printf("split (%s): B=%d T=%d NH=%d NKV=%d HS=%d window=%d dropout=%.2f into %d query x %d key blocks\n", name,
         s.B, T, s.NH, s.NKV, s.HS, s.window, s.drop.p, nqb, nkb);
  float *q = kc_rand(r, nq_, -1, 1), *k = kc_rand(r, nk_, -1, 1), *v = kc_rand(r, nk_, -1, 1);
  float *dout = kc_rand(r, nq_, -1, 1), *out = kc_zeros(nq_), *lse = kc_zeros(nl);
  float *dq = kc_zeros(nq_), *dk = kc_zeros(nk_), *dv = kc_zeros(nk_);
  kern_attention_fwd_ref(out, lse, q, k, v, s);
  kern_attention_bwd_ref(dq, dk, dv, dout, q, k, v, out, lse, s);
  float *out_m = kc_zeros(nq_), *lse_m = kc_zeros(nl), *dq_s = kc_zeros(nq_), *dk_s = kc_zeros(nk_),
        *dv_s = kc_zeros(nk_);
  long nans = 0, unclean = 0;
  int empty = 0, partial = 0;
  for (int a = 0; a < nqb; a++) {
    int qa = qcut[a], n = qcut[a + 1] - qa;
    float *qb = rows_of(q, s.B, T, w, qa, n), *ob[16], *lb[16];
    for (int c = 0; c < nkb; c++) { /* the forward of every key block, then the merge */
      kern_attn_shape sb = block_of(s, qa, qcut[a + 1], kcut[c], kcut[c + 1]);
      float *kb = rows_of(k, s.B, T, wk, kcut[c], sb.Tk), *vb = rows_of(v, s.B, T, wk, kcut[c], sb.Tk);
      ob[c] = kc_zeros((long)s.B * n * w), lb[c] = kc_zeros((long)BH * n);
      kern_attention_fwd_ref(ob[c], lb[c], qb, kb, vb, sb);
      nans += nan_count(ob[c], (long)s.B * n * w) + nan_count(lb[c], (long)BH * n);
      int seen = 0;
      for (int bb = 0; bb < s.B; bb++)
        for (int h = 0; h < s.NH; h++)
          for (int i = 0; i < n; i++) {
            if (lb[c][((long)bb * s.NH + h) * n + i] != -INFINITY) {
              seen++;
              continue;
            }
            const float *o = ob[c] + (((long)bb * n + i) * s.NH + h) * s.HS;
            for (int d = 0; d < s.HS; d++) unclean += o[d] != 0.0f;
          }
      empty += seen == 0, partial += seen > 0 && seen < BH * n;
      free(kb), free(vb);
    }
    float *om = kc_zeros((long)s.B * n * w), *lm = kc_zeros((long)BH * n);
    for (int bb = 0; bb < s.B; bb++)
      for (int h = 0; h < s.NH; h++)
        for (int i = 0; i < n; i++) {
          long li = ((long)bb * s.NH + h) * n + i, oi = (((long)bb * n + i) * s.NH + h) * s.HS;
          float m = -INFINITY, sum = 0.0f;
          for (int c = 0; c < nkb; c++) m = fmaxf(m, lb[c][li]);
          for (int c = 0; c < nkb; c++) sum += expf(lb[c][li] - m);
          lm[li] = m + logf(sum); /* every row sees its own key: m is finite */
          for (int c = 0; c < nkb; c++) axpy_row(om + oi, expf(lb[c][li] - lm[li]), ob[c] + oi, s.HS);
        }
    add_rows(out_m, om, s.B, T, w, qa, n), add_rows(lse_m, lm, BH, T, 1, qa, n);
    for (int c = 0; c < nkb; c++) { /* each block's backward with the merged lse and out */
      kern_attn_shape sb = block_of(s, qa, qcut[a + 1], kcut[c], kcut[c + 1]);
      long nkb_ = nkv(sb);
      float *kb = rows_of(k, s.B, T, wk, kcut[c], sb.Tk), *vb = rows_of(v, s.B, T, wk, kcut[c], sb.Tk);
      float *dob = rows_of(dout, s.B, T, w, qa, n), *dqb = kc_zeros((long)s.B * n * w), *dkb = kc_zeros(nkb_),
            *dvb = kc_zeros(nkb_);
      kern_attention_bwd_ref(dqb, dkb, dvb, dob, qb, kb, vb, om, lm, sb);
      nans += nan_count(dqb, (long)s.B * n * w) + nan_count(dkb, nkb_) + nan_count(dvb, nkb_);
      add_rows(dq_s, dqb, s.B, T, w, qa, n);
      add_rows(dk_s, dkb, s.B, T, wk, kcut[c], sb.Tk), add_rows(dv_s, dvb, s.B, T, wk, kcut[c], sb.Tk);
      free(kb), free(vb), free(dob), free(dqb), free(dkb), free(dvb);
    }
    for (int c = 0; c < nkb; c++) free(ob[c]), free(lb[c]);
    free(qb), free(om), free(lm);
  }
  printf("  blocks seeing no key: %d, seeing keys from some rows only: %d (of %d)\n", empty, partial, nqb * nkb);
  printf("  NaN in any block's out, lse, dq, dk, dv: expected 0, got %ld\n", nans);
  printf("  out entries not exactly 0 in rows with lse -inf: expected 0, got %ld\n", unclean);
  int bad = (nans != 0) + (unclean != 0);
  bad += kc_compare("merged blocks out vs whole", out_m, out, nq_, 1e-5f, 1e-5f);
  bad += kc_compare("merged blocks lse vs whole", lse_m, lse, nl, 1e-5f, 1e-5f);
  bad += kc_compare("sum of blocks dq vs whole", dq_s, dq, nq_, 1e-5f, 1e-5f);
  bad += kc_compare("sum of blocks dk vs whole", dk_s, dk, nk_, 1e-5f, 1e-5f);
  bad += kc_compare("sum of blocks dv vs whole", dv_s, dv, nk_, 1e-5f, 1e-5f);
  free(q), free(k), free(v), free(dout), free(out), free(lse), free(dq), free(dk), free(dv);
  free(out_m), free(lse_m), free(dq_s), free(dk_s), free(dv_s);
  return bad;
}

/* The new fields' zero value is the whole sequence: a shape with Tk = T,
 * Tseq = T, q0 = k0 = 0 written out gives the same bits as one that leaves
 * them 0, in all four references, with dropout on. */
static int zero_fields(kc_rng *r) {
  kern_attn_shape z = {2, 11, 4, 2, 8, 5, kern_dropout_make(0.3f, 3, kern_dropout_site(2, KERN_DROP_ATTN), 7),
                       KERN_ATTN_WHOLE};
  z.drop.heads = 4;
  kern_attn_shape x = z;
  x.Tk = x.Tseq = z.T;
  long n = nq(z), m = nkv(z), nl = (long)z.B * z.NH * z.T;
  float *q = kc_rand(r, n, -1, 1), *k = kc_rand(r, m, -1, 1), *v = kc_rand(r, m, -1, 1), *dout = kc_rand(r, n, -1, 1);
  float *o[2], *l[2], *a[2], *g[2][3];
  const kern_attn_shape sh[2] = {z, x};
  for (int t = 0; t < 2; t++) {
    o[t] = kc_zeros(n), l[t] = kc_zeros(nl), a[t] = kc_zeros(nl * z.T);
    for (int e = 0; e < 3; e++) g[t][e] = kc_zeros(e ? m : n);
    kern_attention_fwd_ref(o[t], l[t], q, k, v, sh[t]);
    kern_attention_bwd_ref(g[t][0], g[t][1], g[t][2], dout, q, k, v, o[t], l[t], sh[t]);
  }
  printf("zero fields: Tk, q0, k0, Tseq all 0 vs Tk = Tseq = T written out (expected: the same bits)\n");
  int bad = kc_compare("flash out", o[1], o[0], n, 0, 0) + kc_compare("flash lse", l[1], l[0], nl, 0, 0);
  for (int e = 0; e < 3; e++) bad += kc_compare(e == 0 ? "flash dq" : e == 1 ? "flash dk" : "flash dv", g[1][e],
                                                g[0][e], e ? m : n, 0, 0);
  for (int t = 0; t < 2; t++) {
    kern_attention_unfused_fwd_ref(o[t], a[t], q, k, v, sh[t]);
    kern_attention_unfused_bwd_ref(g[t][0], g[t][1], g[t][2], dout, q, k, v, a[t], sh[t]);
  }
  bad += kc_compare("unfused out", o[1], o[0], n, 0, 0) + kc_compare("unfused att", a[1], a[0], nl * z.T, 0, 0);
  for (int e = 0; e < 3; e++) bad += kc_compare(e == 0 ? "unfused dq" : e == 1 ? "unfused dk" : "unfused dv",
                                                g[1][e], g[0][e], e ? m : n, 0, 0);
  for (int t = 0; t < 2; t++) {
    free(o[t]), free(l[t]), free(a[t]);
    for (int e = 0; e < 3; e++) free(g[t][e]);
  }
  free(q), free(k), free(v), free(dout);
  return bad;
}

/* kern_attn_shape_check on the new fields: negative ones refused, and with
 * dropout a Tseq shorter than the block's last query or key position. */
static int shape_checks(void) {
  kern_attn_shape ok = {1, 8, 2, 2, 8, 0, KERN_NO_DROPOUT, KERN_ATTN_WHOLE}, drop = ok;
  drop.drop = kern_dropout_make(0.1f, 1, 0, 0);
  struct {
    const char *what;
    kern_attn_shape s;
    int want;
  } cases[] = {
      {"whole sequence", ok, 0},
      {"Tk -1", ok, -1},
      {"q0 -1", ok, -1},
      {"k0 -1", ok, -1},
      {"Tseq -1", ok, -1},
      {"no dropout: q0 16, Tseq 0 (unused)", ok, 0},
      {"dropout: q0 8, Tseq 16 = q0 + T", drop, 0},
      {"dropout: q0 9, Tseq 16 < q0 + T", drop, -1},
      {"dropout: k0 4, Tk 12, Tseq 16 = k0 + Tk", drop, 0},
      {"dropout: k0 5, Tk 12, Tseq 16 < k0 + Tk", drop, -1},
      {"dropout: q0 8, Tseq 0 (= T) < q0 + T", drop, -1},
  };
  cases[1].s.Tk = -1, cases[2].s.q0 = -1, cases[3].s.k0 = -1, cases[4].s.Tseq = -1, cases[5].s.q0 = 16;
  cases[6].s.q0 = 8, cases[6].s.Tseq = 16, cases[7].s.q0 = 9, cases[7].s.Tseq = 16;
  cases[8].s.k0 = 4, cases[8].s.Tk = 12, cases[8].s.Tseq = 16, cases[9].s.k0 = 5, cases[9].s.Tk = 12;
  cases[9].s.Tseq = 16, cases[10].s.q0 = 8;
  int bad = 0;
  for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int got = kern_attn_shape_check(cases[i].s);
    printf("  %s kern_attn_shape_check(%s): expected %d, got %d\n", got == cases[i].want ? "ok  " : "FAIL",
           cases[i].what, cases[i].want, got);
    bad += got != cases[i].want;
  }
  return bad;
}

int main(void) {
  kc_rng r = {5};
  kern_attn_shape shapes[] = {
      {1, 5, 2, 2, 4, 0, KERN_NO_DROPOUT, KERN_ATTN_WHOLE},   /* plain causal, MHA */
      {2, 7, 4, 2, 8, 3, KERN_NO_DROPOUT, KERN_ATTN_WHOLE},   /* GQA 2, window 3 < T */
      {1, 6, 4, 1, 6, 10, KERN_NO_DROPOUT, KERN_ATTN_WHOLE},  /* GQA 4 (MQA), window 10 > T */
      {1, 13, 2, 1, 16, 5, KERN_NO_DROPOUT, KERN_ATTN_WHOLE}, /* odd T, window 5 */
      {2, 7, 4, 2, 8, 3, KERN_NO_DROPOUT, KERN_ATTN_WHOLE},   /* GQA 2, window 3, and MHA odd T, with dropout */
      {1, 13, 2, 2, 16, 0, KERN_NO_DROPOUT, KERN_ATTN_WHOLE},
      /* blocks: Tk, q0, k0, Tseq */
      {2, 6, 4, 2, 8, 0, KERN_NO_DROPOUT, 5, 4, 3, 0},  /* causal diagonal: queries 4..9, keys 3..7 */
      {1, 6, 2, 1, 8, 4, KERN_NO_DROPOUT, 7, 8, 0, 17}, /* window: queries 8..13 (2.. see none), keys 0..6 */
      {1, 5, 4, 1, 8, 0, KERN_NO_DROPOUT, 4, 9, 2, 0},  /* fully visible, GQA 4: queries 9..13, keys 2..5 */
  };
  int bad = 0;
  for (unsigned i = 4; i < 6; i++) { /* heads 4 .. of 8, samples 1 .. */
    shapes[i].drop = kern_dropout_make(0.25f, 9, kern_dropout_site(1, KERN_DROP_ATTN), 3);
    shapes[i].drop.base = 1, shapes[i].drop.heads = 8, shapes[i].drop.head0 = 4;
  }
  shapes[7].drop = kern_dropout_make(0.25f, 9, kern_dropout_site(1, KERN_DROP_ATTN), 3); /* the window block's */
  shapes[7].drop.heads = 2;
  for (unsigned i = 0; i < sizeof shapes / sizeof shapes[0]; i++) bad += run(shapes[i], &r);
  bad += tp_slice(&r);
  bad += zero_fields(&r);
  printf("kern_attn_shape_check on the block fields\n");
  bad += shape_checks();
  /* Blocks merged by lse against the whole sequence: uneven cuts (the
   * query and key cuts differ, odd T: Philox groups straddle block edges),
   * and a 4-way ring's equal chunks. */
  const int q3[] = {0, 5, 9, 13}, k3[] = {0, 3, 9, 13}, ring[] = {0, 4, 8, 12, 16}, q16[] = {0, 6, 11, 16};
  kern_attn_shape causal = {2, 13, 2, 2, 8, 0, KERN_NO_DROPOUT, KERN_ATTN_WHOLE}, win = causal;
  kern_attn_shape gqa = {2, 16, 4, 2, 8, 5, KERN_NO_DROPOUT, KERN_ATTN_WHOLE};
  win.window = 4;
  kern_dropout d = kern_dropout_make(0.3f, 21, kern_dropout_site(4, KERN_DROP_ATTN), 5);
  d.base = 2, d.heads = 6, d.head0 = 2; /* samples 2 .., heads 2 .. of 6 */
  bad += split("causal", causal, q3, 3, k3, 3, &r);
  bad += split("window 4", win, q3, 3, k3, 3, &r);
  causal.drop = win.drop = gqa.drop = d;
  bad += split("causal, dropout", causal, q3, 3, k3, 3, &r);
  bad += split("window 4, dropout", win, q3, 3, k3, 3, &r);
  bad += split("GQA 2, window 5, dropout, 4-way ring", gqa, ring, 4, ring, 4, &r);
  gqa.NKV = 1, gqa.window = 0;
  bad += split("GQA 4, causal, dropout, uneven", gqa, q16, 3, ring, 4, &r);
  return kc_finish("kern_attention_ref", bad);
}
