/* tests/kernels/test_attention_tc_emu.cc: the tensor-core flash kernels,
 * FA-2's of kernels/attention_mma.cuh (mma.sync, cp.async) and FA-1's of
 * kernels/attention_tc.cuh (WMMA), forward and backward, the very code the
 * GPU runs, executed on the CPU through cuda_emu.h and
 * checked against the flash reference (kernels/attention_ref.c) on odd
 * shapes: T not a multiple of the 64-row / 64-key tiles, GQA, windows
 * smaller and larger than T (with several key tiles in flight), head sizes
 * 36 (not a multiple of 8: element-wise loads instead of cp.async), 48, 64
 * and 128 (each padded tile size), B = 2; and blocks of a sequence (context
 * parallelism's Tk, q0, k0): a causal diagonal block, a fully visible one
 * over several key tiles, a window block whose last rows see no key.
 * Tolerance as the GPU test's (kern_gpu.h): out |d| <= 1e-2 + 1e-2 |ref|
 * (bf16 output), lse 1e-3 + 1e-3 |ref|, gradients 3e-2 + 3e-2 |ref|.
 * Outputs start as NaN where the kernel must write them. What this cannot
 * see: timing, bank conflicts, and the real WMMA register split (the code
 * never relies on it; the mma.sync layouts it does rely on are emulated). */
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda_emu.h"

/* Under ThreadSanitizer (fibers, CUDA_EMU_TSAN_FIBERS, or a thread per
 * lane, CUDA_EMU_THREADS) the subset below: 80x slower there, and the
 * races it looks for are within a block, the same whatever the tile or
 * shape count. */
#if defined(CUDA_EMU_TSAN_FIBERS) || defined(CUDA_EMU_THREADS)
#define TC_TSAN 1
#endif

extern "C" {
#include "kern_check.h"
#include "kernels/attention.h"
}
#include "kernels/attention_tc.cuh"
#include "kernels/attention_mma.cuh"

static std::vector<bf16> to_bf16(const float *x, long n) {
  std::vector<bf16> out(n);
  for (long i = 0; i < n; i++) out[i] = __float2bfloat16_rn(x[i]);
  return out;
}

/* The FA-2 forward with tile (mt, bc), one of KERN_ATTN_FWD_TILES. */
template <int HD>
static void fwd_mma(int mt, int bc, bf16 *out, float *lse, const bf16 *q, const bf16 *k, const bf16 *v,
                    kern_attn_shape s) {
  bool known = mf_with_tile(mt, bc, [&](auto m, auto c) {
    constexpr int MT = decltype(m)::value, BC = decltype(c)::value;
    typedef mf_smem<HD, MT, BC> cfg;
    if (cfg::bytes > sizeof emu_smem) std::abort();
    emu_launch(dim3((s.T + cfg::BR - 1) / cfg::BR, s.NH, s.B), dim3(128),
               [&] { flash_fwd_mma_kernel<HD, MT, BC>(out, lse, q, k, v, s); });
  });
  if (!known) std::abort();
}

/* Runs one forward (v1: FA-1; else FA-2 with tile (mt, bc), 0 for the
 * default) and compares out and lse with the reference. */
static int check(kern_attn_shape s, int v1, int mt, int bc, const std::vector<bf16> &q, const std::vector<bf16> &k,
                 const std::vector<bf16> &v, const float *out_ref, const float *lse_ref) {
  long nq = (long)s.B * s.T * s.NH * s.HS, nl = (long)s.B * s.NH * s.T;
  std::vector<bf16> out(nq, __float2bfloat16_rn(NAN));
  std::vector<float> lse(nl, NAN), o(nq, 0.0f), m(nl, -INFINITY), l(nl, 0.0f);
  with_hd(s.HS, [&](auto hd) {
    constexpr int HD = decltype(hd)::value;
    if (tc_tiles<HD>::bytes > sizeof emu_smem) std::abort();
    if (v1) {
      fa1_state st = {o.data(), m.data(), l.data()};
      emu_launch(dim3(1, s.NH, s.B), dim3(128), [&] {
        flash1_fwd_tc_kernel<HD>(out.data(), lse.data(), st, q.data(), k.data(), v.data(), s);
      });
    } else {
      if (!mt) mt = mf_tile<HD>::MT, bc = mf_tile<HD>::BC;
      fwd_mma<HD>(mt, bc, out.data(), lse.data(), q.data(), k.data(), v.data(), s);
    }
  });
  std::vector<float> got(nq);
  for (long i = 0; i < nq; i++) got[i] = __bfloat162float(out[i]);
  char name[64];
  if (v1)
    snprintf(name, sizeof name, "flash1 (WMMA, emulated)");
  else
    snprintf(name, sizeof name, "flash (mma.sync %dx%d, emulated)", mt, bc);
  char what[96];
  snprintf(what, sizeof what, "%s out", name);
  int bad = kc_compare(what, got.data(), out_ref, nq, 1e-2f, 1e-2f);
  snprintf(what, sizeof what, "%s lse", name);
  return bad + kc_compare(what, lse.data(), lse_ref, nl, 1e-3f, 1e-3f);
}

/* The backward (nw = 0: FA-1's, on WMMA; else FA-2's with nw warps per
 * block and hpb query heads per block: the group's (bf16 dK, dV straight
 * from the kernel) or 1 (fp32 partials per query head, then
 * attn_dkv_sum_kernel)) given the reference's out (bf16) and lse: dq (the
 * fp32 accumulator), dk, dv against the reference's. D = rowsum(dout *
 * out) is computed here, as attn_rowdot_kernel does before the launch. */
static int check_bwd(kern_attn_shape s, int nw, int hpb, const std::vector<bf16> &q, const std::vector<bf16> &k,
                     const std::vector<bf16> &v, const std::vector<bf16> &dout, const float *out,
                     const float *lse, const float *dq_ref, const float *dk_ref, const float *dv_ref) {
  int tk = kern_attn_tk(&s);
  long nq = (long)s.B * s.T * s.NH * s.HS, nkv = (long)s.B * tk * s.NKV * s.HS, nl = (long)s.B * s.NH * s.T;
  std::vector<float> D(nl), dq(nq, 0.0f);
  for (int b = 0; b < s.B; b++)
    for (int h = 0; h < s.NH; h++)
      for (int i = 0; i < s.T; i++) {
        long o = (((long)b * s.T + i) * s.NH + h) * s.HS;
        float acc = 0.0f;
        for (int d = 0; d < s.HS; d++) acc += __bfloat162float(dout[o + d]) * out[o + d];
        D[((long)b * s.NH + h) * s.T + i] = acc;
      }
  std::vector<bf16> dk(nkv, __float2bfloat16_rn(NAN)), dv(nkv, __float2bfloat16_rn(NAN));
  int grp = s.NH / s.NKV, nparts = nw ? grp / hpb : 1;
  std::vector<float> part(nparts > 1 ? 2 * nparts * nkv : 0, NAN);
  with_hd(s.HS, [&](auto hd) {
    constexpr int HD = decltype(hd)::value;
    auto go = [&](auto kernel, size_t bytes, unsigned nx, unsigned nthreads) {
      if (bytes > sizeof emu_smem) std::abort();
      emu_launch(dim3(nx, s.NH / hpb, s.B), dim3(nthreads), [&] {
        kernel(dk.data(), dv.data(), dq.data(), q.data(), k.data(), v.data(), dout.data(), lse, D.data(), s, hpb,
               part.data());
      });
    };
    typedef mb_smem<HD, 4> c4;
    typedef mb_smem<HD, 8> c8;
    if (nw == 0) {
      if (tb_tiles<HD>::bytes > sizeof emu_smem) std::abort();
      emu_launch(dim3(1, s.NKV, s.B), dim3(128), [&] {
        flash_bwd_tc_kernel<HD>(dk.data(), dv.data(), dq.data(), q.data(), k.data(), v.data(), dout.data(), lse,
                                D.data(), s);
      });
    } else if (nw == 4) {
      go(flash_bwd_mma_kernel<HD, 4>, c4::bytes, (tk + c4::BK - 1) / c4::BK, 128);
    } else {
      go(flash_bwd_mma_kernel<HD, 8>, c8::bytes, (tk + c8::BK - 1) / c8::BK, 256);
    }
  });
  if (nparts > 1)
    emu_launch(dim3((unsigned)((nkv + 255) / 256)), dim3(256),
               [&] { attn_dkv_sum_kernel(dk.data(), dv.data(), part.data(), nparts, nkv); });
  std::vector<float> dkf(nkv), dvf(nkv);
  for (long i = 0; i < nkv; i++) dkf[i] = __bfloat162float(dk[i]), dvf[i] = __bfloat162float(dv[i]);
  char name[96], what[128];
  if (nw)
    snprintf(name, sizeof name, "flash backward (mma.sync, %d warps, %d of %d query heads a block, emulated)", nw,
             hpb, grp);
  else
    snprintf(name, sizeof name, "flash1 backward (WMMA, emulated)");
  int bad = 0;
  snprintf(what, sizeof what, "%s dq", name);
  bad += kc_compare(what, dq.data(), dq_ref, nq, 3e-2f, 3e-2f);
  snprintf(what, sizeof what, "%s dk", name);
  bad += kc_compare(what, dkf.data(), dk_ref, nkv, 3e-2f, 3e-2f);
  snprintf(what, sizeof what, "%s dv", name);
  return bad + kc_compare(what, dvf.data(), dv_ref, nkv, 3e-2f, 3e-2f);
}

static int run(kern_attn_shape s, kc_rng *r) {
  long nq = (long)s.B * s.T * s.NH * s.HS, nkv = (long)s.B * kern_attn_tk(&s) * s.NKV * s.HS;
  long nl = (long)s.B * s.NH * s.T;
  printf("shape B=%d T=%d NH=%d NKV=%d HS=%d window=%d Tk=%d q0=%d k0=%d\n", s.B, s.T, s.NH, s.NKV, s.HS, s.window,
         s.Tk, s.q0, s.k0);
  float *q = kc_rand(r, nq, -2, 2), *k = kc_rand(r, nkv, -2, 2), *v = kc_rand(r, nkv, -1, 1);
  float *out = kc_zeros(nq), *lse = kc_zeros(nl);
  kc_round_bf16(q, nq), kc_round_bf16(k, nkv), kc_round_bf16(v, nkv);
  kern_attention_fwd_ref(out, lse, q, k, v, s);
  std::vector<bf16> qb = to_bf16(q, nq), kb = to_bf16(k, nkv), vb = to_bf16(v, nkv);
  int bad = check(s, 1, 0, 0, qb, kb, vb, out, lse);
#ifdef TC_TSAN
  bad += check(s, 0, 0, 0, qb, kb, vb, out, lse); /* the default tile */
#else
  const int tiles[][2] = KERN_ATTN_FWD_TILES; /* every tile the bench times */
  for (const auto &t : tiles) bad += check(s, 0, t[0], t[1], qb, kb, vb, out, lse);
#endif
  float *dout = kc_rand(r, nq, -1, 1), *dq = kc_zeros(nq), *dk = kc_zeros(nkv), *dv = kc_zeros(nkv);
  kc_round_bf16(dout, nq);
  kc_round_bf16(out, nq); /* the backward sees the bf16 forward output */
  kern_attention_bwd_ref(dq, dk, dv, dout, q, k, v, out, lse, s);
  std::vector<bf16> dob = to_bf16(dout, nq);
#ifdef TC_TSAN
  const int nws[] = {0, mb_warps}; /* FA-1, and FA-2's default */
#else
  const int nws[] = {0, 4, 8}; /* FA-1, and FA-2 with each block size the bench times */
#endif
  int grp = s.NH / s.NKV;
  for (int nw : nws) {
    bad += check_bwd(s, nw, nw ? 1 : grp, qb, kb, vb, dob, out, lse, dq, dk, dv); /* the default */
#ifndef TC_TSAN /* ThreadSanitizer: the default's partials are what blocks could race on */
    if (nw && grp > 1) /* the grouped grid (one block walks the whole group), kern_bench's _grouped rows */
      bad += check_bwd(s, nw, grp, qb, kb, vb, dob, out, lse, dq, dk, dv);
#endif
  }
  free(q), free(k), free(v), free(out), free(lse), free(dout), free(dq), free(dk), free(dv);
  return bad;
}

int main(void) {
  kc_rng r = {7};
  /* tsan: also under ThreadSanitizer (a real thread per CUDA thread, up to
   * 256 per block, is slow): one shape per padded head size; fibers run all. */
  const struct {
    kern_attn_shape s;
    bool tsan;
  } shapes[] = {
      {{2, 100, 4, 2, 64, 0, KERN_NO_DROPOUT, KERN_ATTN_WHOLE}, true},    /* T between tiles, GQA 2, B 2 */
      {{1, 150, 2, 2, 36, 40, KERN_NO_DROPOUT, KERN_ATTN_WHOLE}, true},   /* window < T, HS not a multiple of 8 */
      {{1, 70, 8, 1, 128, 200, KERN_NO_DROPOUT, KERN_ATTN_WHOLE}, true},  /* window > T (full causal), GQA 8, HS 128 */
      {{1, 129, 2, 1, 48, 0, KERN_NO_DROPOUT, KERN_ATTN_WHOLE}, false},   /* one row past two tiles */
      /* window < T over 5 key tiles, cp.async double buffering */
      {{1, 300, 4, 2, 64, 100, KERN_NO_DROPOUT, KERN_ATTN_WHOLE}, false},
      /* blocks (Tk, q0, k0, Tseq): keys 250..399 for queries 300..399, 50
       * before them, then the causal diagonal; every key (3 tiles) before
       * every query; a window whose rows 59.. see no key of the block */
      {{1, 100, 4, 2, 64, 0, KERN_NO_DROPOUT, 150, 300, 250, 0}, false},
      {{2, 70, 4, 1, 128, 0, KERN_NO_DROPOUT, 190, 400, 100, 0}, false},
      {{1, 90, 2, 2, 36, 100, KERN_NO_DROPOUT, 120, 200, 40, 0}, false},
  };
  int bad = 0;
  for (const auto &c : shapes) {
#ifdef TC_TSAN
    if (!c.tsan) continue;
#endif
    bad += run(c.s, &r);
  }
  /* Rows of HD + 8 bf16 (and BQ + 8 for dS^T) put any 8 consecutive rows
   * in distinct 16-byte quarters of the banks (attention_mma.cuh). */
  unsigned long conflicts = emu_ldsm_conflicts;
  printf("ldmatrix bank conflicts (extra wavefronts): expected 0 (padded rows), got %lu\n", conflicts);
  bad += conflicts > 0;
  return kc_finish("attention tensor-core kernels (emulated)", bad);
}
