/* tests/kernels/test_attention_cuda.c: CUDA attention (flash FA-2 and FA-1
 * loop orders on tensor cores, FA-2 also on CUDA cores ("flash-simt"),
 * and unfused; the FA-2 backward also with 4 warps and with GQA's grouped
 * grid) vs the references on odd shapes: T not a
 * multiple of the 64 / 32 tiles, GQA (NH / NKV = 2, 4, 8), windows smaller
 * and larger than T, HS 48, 64, 128, B = 2; and blocks of the sequence
 * (context parallelism's q0, k0, Tk, Tseq): a causal diagonal block, a
 * fully visible one, a window block whose last rows see no key (out 0, lse
 * -inf, exactly), one that sees nothing, with dropout (Philox groups
 * aligned and not), the backward also given another lse and out than the
 * block's own (a merge's), and the unfused pair refusing blocks. Both flash algorithms are
 * checked against the same flash reference at the same tolerance. The
 * backward kernels get the reference's out (rounded to bf16) and lse, so
 * each kernel is checked on its own. Outputs and scratch are filled with
 * NaN (bytes 0xff) before each launch, so an element a kernel fails to
 * write, or scratch it fails to initialise, shows as a mismatch. */
#include <stdlib.h>
#include <string.h>
#include "kern_gpu.h"
#include "kernels/attention.h"
#include "kernels/kern_common.h"

/* One flash algorithm: the forward with its scratch, the backward with its. */
typedef struct flash_algo {
  const char *name;
  size_t (*fwd_scratch)(kern_attn_shape s);
  int (*fwd)(kern_bf16 *out, float *lse, float *scratch, const kern_bf16 *q, const kern_bf16 *k,
             const kern_bf16 *v, kern_attn_shape s, cudaStream_t stream);
  size_t (*bwd_scratch)(kern_attn_shape s);
  int (*bwd)(kern_bf16 *dq, kern_bf16 *dk, kern_bf16 *dv, float *scratch, const kern_bf16 *dout,
             const kern_bf16 *q, const kern_bf16 *k, const kern_bf16 *v, const kern_bf16 *out,
             const float *lse, kern_attn_shape s, cudaStream_t stream);
} flash_algo;

static size_t no_scratch(kern_attn_shape s) {
  (void)s;
  return 0;
}
static int fa2_fwd(kern_bf16 *out, float *lse, float *scratch, const kern_bf16 *q,
                   const kern_bf16 *k, const kern_bf16 *v, kern_attn_shape s, cudaStream_t st) {
  (void)scratch;
  return kern_attention_fwd_cuda(out, lse, q, k, v, s, st);
}

static int fa2_simt_fwd(kern_bf16 *out, float *lse, float *scratch, const kern_bf16 *q,
                        const kern_bf16 *k, const kern_bf16 *v, kern_attn_shape s, cudaStream_t st) {
  (void)scratch;
  return kern_attention_fwd_simt_cuda(out, lse, q, k, v, s, st);
}

/* The FA-2 choices kern_bench times besides the defaults (attention.h):
 * each forward tile of KERN_ATTN_FWD_TILES (fwd_tile says which), and the
 * backward with 4 warps per block. */
static int fwd_tile[2];
static int fa2_fwd_tile(kern_bf16 *out, float *lse, float *scratch, const kern_bf16 *q, const kern_bf16 *k,
                        const kern_bf16 *v, kern_attn_shape s, cudaStream_t st) {
  (void)scratch;
  return kern_attention_fwd_tile_cuda(fwd_tile[0], fwd_tile[1], out, lse, q, k, v, s, st);
}

static int fa2_bwd_w4(kern_bf16 *dq, kern_bf16 *dk, kern_bf16 *dv, float *scratch, const kern_bf16 *dout,
                      const kern_bf16 *q, const kern_bf16 *k, const kern_bf16 *v, const kern_bf16 *out,
                      const float *lse, kern_attn_shape s, cudaStream_t st) {
  return kern_attention_bwd_tile_cuda(4, 0, dq, dk, dv, scratch, dout, q, k, v, out, lse, s, st);
}

/* GQA's grouped grid: a block walks all query heads of its KV head (no partials); 4 warps fit every GPU. */
static int fa2_bwd_grouped(kern_bf16 *dq, kern_bf16 *dk, kern_bf16 *dv, float *scratch, const kern_bf16 *dout,
                           const kern_bf16 *q, const kern_bf16 *k, const kern_bf16 *v, const kern_bf16 *out,
                           const float *lse, kern_attn_shape s, cudaStream_t st) {
  return kern_attention_bwd_tile_cuda(4, 1, dq, dk, dv, scratch, dout, q, k, v, out, lse, s, st);
}

static const flash_algo ALGOS[] = {
    {"flash", no_scratch, fa2_fwd, kern_attention_bwd_scratch_bytes, kern_attention_bwd_cuda},
    {"flash w4", no_scratch, NULL, kern_attention_bwd_scratch_bytes, fa2_bwd_w4}, /* backward only */
    {"flash grouped", no_scratch, NULL, kern_attention_bwd_scratch_bytes, fa2_bwd_grouped}, /* backward only */
    {"flash-simt", no_scratch, fa2_simt_fwd, kern_attention_bwd_scratch_bytes, kern_attention_bwd_simt_cuda},
    {"flash1", kern_attention_fwd_v1_scratch_bytes, kern_attention_fwd_v1_cuda,
     kern_attention_bwd_v1_scratch_bytes, kern_attention_bwd_v1_cuda},
};
#define NALGO (int)(sizeof ALGOS / sizeof ALGOS[0])

/* Device inputs of one shape and the outputs the kernels write. */
typedef struct attn_dev {
  kern_bf16 *q, *k, *v, *dout, *out, *dq, *dk, *dv;
  float *lse;
} attn_dev;

static int cmp_dev(const char *what, const kern_bf16 *dev, const float *ref, long n, float a,
                   float r) {
  float *got = kc_zeros(n);
  kg_get_bf16(got, dev, n);
  int bad = kc_compare(what, got, ref, n, a, r);
  free(got);
  return bad;
}

/* "algo part": the label kc_compare prints. */
static const char *label(const flash_algo *a, const char *part) {
  static char buf[64];
  snprintf(buf, sizeof buf, "%s %s", a->name, part);
  return buf;
}

/* Device scratch of `bytes` (at least 1), poisoned with NaN. */
static float *poisoned(size_t bytes) {
  float *p;
  KG_CUDA(cudaMalloc((void **)&p, bytes ? bytes : 1));
  KG_CUDA(cudaMemset(p, 0xff, bytes));
  return p;
}

/* KERN_ATTN_SKIP=name[,name...]: flash algorithms this GPU cannot run
 * (flash1's backward needs 108-154 KB of shared memory and the 2 x 64
 * forward tile 102 KB at head size 128; sm_86 and sm_89 allow 99), left
 * out with a line saying so. */
static int skipped(const flash_algo *a) {
  const char *list = getenv("KERN_ATTN_SKIP");
  size_t n = strlen(a->name);
  for (const char *p = list; p && *p; p += strcspn(p, ","), p += *p == ',')
    if (strncmp(p, a->name, n) == 0 && (p[n] == ',' || p[n] == 0)) return 1;
  return 0;
}

static int check_fwd(const flash_algo *a, kern_attn_shape s, const attn_dev *d, const float *out,
                     const float *lse) {
  if (!a->fwd) return 0; /* a backward-only variant */
  if (skipped(a)) {
    printf("  %s skipped (KERN_ATTN_SKIP)\n", a->name);
    return 0;
  }
  long nq = (long)s.B * s.T * s.NH * s.HS, nl = (long)s.B * s.NH * s.T;
  float *scratch = poisoned(a->fwd_scratch(s)), *got = kc_zeros(nl);
  KG_CUDA(cudaMemset(d->out, 0xff, sizeof(kern_bf16) * nq));
  KG_CUDA(cudaMemset(d->lse, 0xff, sizeof(float) * nl));
  KG_CHECK(a->fwd(d->out, d->lse, scratch, d->q, d->k, d->v, s, 0));
  int bad = cmp_dev(label(a, "out"), d->out, out, nq, KG_ATOL_OUT, KG_RTOL_OUT);
  kg_get_f32(got, d->lse, nl), bad += kc_compare(label(a, "lse"), got, lse, nl, 1e-3f, 1e-3f);
  KG_CUDA(cudaFree(scratch));
  free(got);
  return bad;
}

/* d->out holds the reference out (in bf16), lref the reference lse (device). */
static int check_bwd(const flash_algo *a, kern_attn_shape s, const attn_dev *d,
                     const float *lref, const float *dq, const float *dk, const float *dv) {
  if (!a->bwd || skipped(a)) return 0; /* a forward-only variant, or one left out */
  long nq = (long)s.B * s.T * s.NH * s.HS, nkv = (long)s.B * kern_attn_tk(&s) * s.NKV * s.HS;
  float *scratch = poisoned(a->bwd_scratch(s));
  KG_CUDA(cudaMemset(d->dq, 0xff, sizeof(kern_bf16) * nq));
  KG_CUDA(cudaMemset(d->dk, 0xff, sizeof(kern_bf16) * nkv));
  KG_CUDA(cudaMemset(d->dv, 0xff, sizeof(kern_bf16) * nkv));
  KG_CHECK(a->bwd(d->dq, d->dk, d->dv, scratch, d->dout, d->q, d->k, d->v, d->out, lref, s, 0));
  int bad = cmp_dev(label(a, "dq"), d->dq, dq, nq, KG_ATOL_GRAD, KG_RTOL_GRAD);
  bad += cmp_dev(label(a, "dk"), d->dk, dk, nkv, KG_ATOL_GRAD, KG_RTOL_GRAD);
  bad += cmp_dev(label(a, "dv"), d->dv, dv, nkv, KG_ATOL_GRAD, KG_RTOL_GRAD);
  KG_CUDA(cudaFree(scratch));
  return bad;
}

/* A block's backward given another lse and out than its own, as after a
 * merge of blocks (kern_attention_bwd_ref's meaning): lse + ln 2 where the
 * block saw keys (another block as heavy), 0.7 where it saw none, out
 * halved plus 0.25. Expected: the reference backward on the same inputs. */
static int check_merged_bwd(kern_attn_shape s, attn_dev *d, const float *q, const float *k, const float *v,
                            const float *dout, const float *out, const float *lse) {
  long nq = (long)s.B * s.T * s.NH * s.HS, nkv = (long)s.B * kern_attn_tk(&s) * s.NKV * s.HS;
  long nl = (long)s.B * s.NH * s.T;
  float *lm = kc_zeros(nl), *om = kc_zeros(nq), *dq = kc_zeros(nq), *dk = kc_zeros(nkv), *dv = kc_zeros(nkv);
  for (long i = 0; i < nl; i++) lm[i] = lse[i] == -INFINITY ? 0.7f : lse[i] + 0.6931472f;
  for (long i = 0; i < nq; i++) om[i] = 0.5f * out[i] + 0.25f;
  kc_round_bf16(om, nq);
  kern_attention_bwd_ref(dq, dk, dv, dout, q, k, v, om, lm, s);
  printf("  the backward given a merge's lse and out (expected: the reference's on the same)\n");
  KG_CUDA(cudaFree(d->out));
  d->out = kg_bf16(om, nq);
  float *d_lm = kg_f32(lm, nl);
  int bad = 0;
  for (int a = 0; a < NALGO; a++) bad += check_bwd(&ALGOS[a], s, d, d_lm, dq, dk, dv);
  KG_CUDA(cudaFree(d_lm));
  free(lm), free(om), free(dq), free(dk), free(dv);
  return bad;
}

static int run(kern_attn_shape s, kc_rng *r) {
  int blocks = kern_attn_tk(&s) != s.T || s.q0 || s.k0;
  long nq = (long)s.B * s.T * s.NH * s.HS, nkv = (long)s.B * kern_attn_tk(&s) * s.NKV * s.HS;
  long nl = (long)s.B * s.NH * s.T, ntt = nl * s.T;
  printf("shape B=%d T=%d NH=%d NKV=%d HS=%d window=%d dropout=%.2f Tk=%d q0=%d k0=%d Tseq=%d\n", s.B, s.T, s.NH,
         s.NKV, s.HS, s.window, s.drop.p, s.Tk, s.q0, s.k0, s.Tseq);
  float *q = kc_rand(r, nq, -2, 2), *k = kc_rand(r, nkv, -2, 2), *v = kc_rand(r, nkv, -1, 1);
  float *dout = kc_rand(r, nq, -1, 1), *out = kc_zeros(nq), *lse = kc_zeros(nl), *att = kc_zeros(ntt);
  float *dq = kc_zeros(nq), *dk = kc_zeros(nkv), *dv = kc_zeros(nkv);
  kc_round_bf16(q, nq), kc_round_bf16(k, nkv), kc_round_bf16(v, nkv), kc_round_bf16(dout, nq);
  kern_attention_fwd_ref(out, lse, q, k, v, s);
  attn_dev d = {kg_bf16(q, nq),       kg_bf16(k, nkv),      kg_bf16(v, nkv),
                kg_bf16(dout, nq),    kg_bf16(NULL, nq),    kg_bf16(NULL, nq),
                kg_bf16(NULL, nkv),   kg_bf16(NULL, nkv),   kg_f32(NULL, nl)};
  int bad = 0;
  for (int a = 0; a < NALGO; a++) bad += check_fwd(&ALGOS[a], s, &d, out, lse);
  static const int tiles[][2] = KERN_ATTN_FWD_TILES;
  for (unsigned t = 0; t < sizeof tiles / sizeof tiles[0]; t++) {
    char name[32];
    snprintf(name, sizeof name, "flash t%dx%d", tiles[t][0], tiles[t][1]);
    flash_algo tile = {name, no_scratch, fa2_fwd_tile, no_scratch, NULL};
    fwd_tile[0] = tiles[t][0], fwd_tile[1] = tiles[t][1];
    bad += check_fwd(&tile, s, &d, out, lse);
  }
  kc_round_bf16(out, nq); /* the backward sees the bf16 forward output */
  KG_CUDA(cudaFree(d.out));
  d.out = kg_bf16(out, nq);
  float *d_lref = kg_f32(lse, nl);
  kern_attention_bwd_ref(dq, dk, dv, dout, q, k, v, out, lse, s);
  for (int a = 0; a < NALGO; a++) bad += check_bwd(&ALGOS[a], s, &d, d_lref, dq, dk, dv);
  KG_CUDA(cudaFree(d_lref));
  if (blocks) {
    bad += check_merged_bwd(s, &d, q, k, v, dout, out, lse);
    int rc = kern_attention_unfused_fwd_cuda(NULL, d.out, NULL, NULL, d.q, d.k, d.v, s, 0);
    printf("%s unfused forward on a block: expected refused (no blocks), got rc %d\n", rc ? "ok  " : "FAIL", rc);
    bad += rc == 0;
    KG_CUDA(cudaDeviceReset());
    free(q), free(k), free(v), free(dout), free(out), free(lse), free(att), free(dq), free(dk), free(dv);
    return bad;
  }

  kern_ctx ctx;
  KG_CHECK(kern_ctx_init(&ctx, 32 << 20));
  kern_bf16 *d_att = kg_bf16(NULL, ntt), *d_datt = kg_bf16(NULL, ntt);
  float *d_scores = kg_f32(NULL, ntt);
  kern_attention_unfused_fwd_ref(out, att, q, k, v, s);
  KG_CHECK(kern_attention_unfused_fwd_cuda(&ctx, d.out, d_att, d_scores, d.q, d.k, d.v, s, 0));
  bad += cmp_dev("unfused out", d.out, out, nq, KG_ATOL_OUT, KG_RTOL_OUT);
  bad += cmp_dev("unfused att", d_att, att, ntt, KG_ATOL_OUT, KG_RTOL_OUT);
  kc_round_bf16(att, ntt); /* the backward reads the bf16 probabilities */
  kern_attention_unfused_bwd_ref(dq, dk, dv, dout, q, k, v, att, s);
  KG_CHECK(kern_attention_unfused_bwd_cuda(&ctx, d.dq, d.dk, d.dv, d_datt, d_scores, d.dout, d.q,
                                           d.k, d.v, d_att, s, 0));
  bad += cmp_dev("unfused dq", d.dq, dq, nq, KG_ATOL_GRAD, KG_RTOL_GRAD);
  bad += cmp_dev("unfused dk", d.dk, dk, nkv, KG_ATOL_GRAD, KG_RTOL_GRAD);
  bad += cmp_dev("unfused dv", d.dv, dv, nkv, KG_ATOL_GRAD, KG_RTOL_GRAD);
  kern_ctx_free(&ctx);
  KG_CUDA(cudaDeviceReset());
  free(q), free(k), free(v), free(dout), free(out), free(lse), free(att);
  free(dq), free(dk), free(dv);
  return bad;
}

/* The long shape's T: 512 on a GPU; on the emulated one (KERN_EMU) 256,
 * still several full tiles on every path (the forward's 64- and 128-row
 * query tiles and 64-key tiles, the backward's 64- and 128-key blocks
 * each walking 32-row query tiles) through the same code: 512 only made
 * the loops longer, and took 16 of the test's 22 s there (twice per CI
 * run, with kern_attention_emu_99k). */
#ifdef KERN_EMU
#define ATTN_LONG_T 256
#else
#define ATTN_LONG_T 512
#endif

int main(void) {
  kg_require_gpu("kern_attention_cuda");
  kc_rng r = {16};
  kern_attn_shape shapes[] = {
      {1, 100, 4, 4, 64, 0, KERN_NO_DROPOUT, KERN_ATTN_WHOLE},   /* T not a multiple of any tile */
      {2, 130, 8, 2, 128, 0, KERN_NO_DROPOUT, KERN_ATTN_WHOLE},  /* GQA 4, B = 2 */
      {1, 200, 8, 1, 48, 37, KERN_NO_DROPOUT, KERN_ATTN_WHOLE},  /* MQA, HS 48 (padded lanes), window 37 */
      {1, 90, 4, 2, 64, 500, KERN_NO_DROPOUT, KERN_ATTN_WHOLE},  /* window larger than T */
      {1, ATTN_LONG_T, 16, 2, 128, 0, KERN_NO_DROPOUT, KERN_ATTN_WHOLE}, /* GQA 8, several full tiles */
      /* the first three again with dropout on the probabilities */
      {1, 100, 4, 4, 64, 0, KERN_NO_DROPOUT, KERN_ATTN_WHOLE},
      {2, 130, 8, 2, 128, 0, KERN_NO_DROPOUT, KERN_ATTN_WHOLE},
      {1, 200, 8, 1, 48, 37, KERN_NO_DROPOUT, KERN_ATTN_WHOLE},
      /* odd T: a row's keys start mid-way through a Philox call */
      {1, 77, 4, 2, 64, 0, KERN_NO_DROPOUT, KERN_ATTN_WHOLE},
      /* blocks of a sequence (context parallelism): Tk, q0, k0, Tseq */
      {2, 100, 4, 2, 64, 0, KERN_NO_DROPOUT, 130, 300, 250, 0},  /* keys 250..379 for queries 300..399: 50 fully
                                                                     visible, then the causal diagonal; GQA 2 */
      {1, 77, 4, 1, 128, 0, KERN_NO_DROPOUT, 200, 256, 0, 0},    /* every key before every query: fully visible */
      {1, 90, 4, 1, 48, 100, KERN_NO_DROPOUT, 120, 200, 40, 0},  /* window 100: rows 59.. see no key of 40..159 */
      {1, 40, 2, 2, 64, 0, KERN_NO_DROPOUT, 50, 0, 100, 0},      /* keys after every query: sees nothing */
      {1, 100, 4, 2, 64, 0, KERN_NO_DROPOUT, 130, 300, 250, 512}, /* the first three with dropout: k0 % 4 = 2, */
      {1, 77, 4, 1, 128, 0, KERN_NO_DROPOUT, 200, 256, 0, 400},   /* Philox groups straddle rows; aligned; */
      {1, 90, 4, 1, 48, 100, KERN_NO_DROPOUT, 120, 200, 40, 290}, /* odd Tseq */
  };
  int bad = 0;
  unsigned n = sizeof shapes / sizeof shapes[0];
  for (unsigned i = 5; i < n; i++) { /* a tensor-parallel slice: heads 8 .. of 32, samples 3 .. */
    if (i >= 9 && i < 13) continue; /* the blocks without dropout */
    shapes[i].drop = kern_dropout_make(0.2f, 77, kern_dropout_site(3, KERN_DROP_ATTN), 2);
    shapes[i].drop.base = 3, shapes[i].drop.heads = 32, shapes[i].drop.head0 = 8;
  }
  /* KERN_ATTN_WHOLE_ONLY: whole sequences only (the 99 KB run checks what
   * fits in shared memory, which blocks of keys do not change) */
  if (getenv("KERN_ATTN_WHOLE_ONLY")) n = 9, printf("blocks of keys left out (KERN_ATTN_WHOLE_ONLY)\n");
  for (unsigned i = 0; i < n; i++) bad += run(shapes[i], &r);
  /* Occupancy (calibrate's attn_slots_q/k): at least one block of each
   * default kernel fits an SM at every padded head size; an unusable head
   * size is refused. */
  static const int hs[] = {32, 64, 128};
  for (int bwd = 0; bwd < 2; bwd++)
    for (int i = 0; i < 3; i++) {
      int blocks = -1, rc = kern_attention_resident_blocks_cuda(bwd, hs[i], &blocks);
      printf("%s resident blocks per SM, %s, head size %d: expected >= 1, got %d (rc %d)\n",
             rc == 0 && blocks >= 1 ? "ok  " : "FAIL", bwd ? "backward" : "forward", hs[i], blocks, rc);
      bad += rc != 0 || blocks < 1;
    }
  int blocks = -1, rc = kern_attention_resident_blocks_cuda(0, 256, &blocks);
  printf("%s resident blocks at head size 256: expected refused (HS <= 128), got rc %d\n", rc ? "ok  " : "FAIL", rc);
  bad += rc == 0;
  return kc_finish("kern_attention_cuda", bad);
}
