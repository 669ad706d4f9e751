/* test_fit: the calibration fits recover known parameters from synthetic
 * samples with noise (gsl_rng, fixed seed, so every run sees the same
 * noise). Usage: test_fit saturating | gemm_waves | attn_waves | linear |
 * params | rate | memory | collectives | gemm_passes | gemm_acc |
 * dropout_draws. */
#include "calib/calib.h"
#include "calib/fit.h"
#include "calib/profile.h"
#include "kernels/matmul.h"
#include "model/cost.h"
#include "model/workload.h"
#include "tests/check.h"

#include <gsl/gsl_fit.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SEED 20240424 /* fixed: MegaScale's NSDI 2024 week */

/* GEMM-like efficiency: e_max 0.82, F_half 3e9 FLOPs (the shape of the
 * a100 built-in's gemm_eff: 0.40 at 1e9, 0.68 at 1e10), 25 samples at
 * quarter decades 1e7..1e13, 2% relative Gaussian noise. */
static int saturating(void)
{
    const double e_max = 0.82, f_half = 3e9;
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, SEED);
    double x[25], y[25], res[25];
    for (int i = 0; i < 25; i++) {
        x[i] = pow(10, 7 + 0.25 * i);
        y[i] = e_max * x[i] / (x[i] + f_half) * (1 + gsl_ran_gaussian(rng, 0.02));
    }
    calib_satfit_t f = calib_fit_saturating(x, y, 25, res);
    gsl_rng_free(rng);
    const char *src = "synthetic eff = 0.82 F / (F + 3e9), 2% noise, seed 20240424";
    check_true("fit converged", f.ok, "gsl_multifit_nlinear trust region");
    check_rel("e_max", e_max, f.e_max, 0.03, src);
    check_rel("F_half (FLOPs)", f_half, f.x_half, 0.05, src);
    check_true("R^2 > 0.99", f.r2 > 0.99, "noise is 2% of a curve spanning 0.003..0.82");
    printf("     fit: e_max %.4f +- %.4f, F_half %.4g +- %.3g, R^2 %.5f, rms %.4f\n", f.e_max, f.se_e_max, f.x_half,
           f.se_x_half, f.r2, f.rms);
    check_true("e_max within 3 standard errors", fabs(f.e_max - e_max) < 3 * f.se_e_max + 1e-12,
               "the standard error is an honest uncertainty");
    double sum = 0;
    for (int i = 0; i < 25; i++)
        sum += res[i];
    check_true("residuals average ~0", fabs(sum / 25) < 0.01, "least squares with an unbiased model");
    return check_done("calib_fit_saturating");
}

/* The fit before waves were modelled: the saturating curve fitted to the
 * raw samples, then priced with each sample's wave efficiency as
 * model/cost.c does. Its relative rms error against the samples. */
static double curve_only_rel_rms(const double *fl, const double *y, const double *wave, int n)
{
    double ss = 0;
    calib_satfit_t p = calib_fit_saturating(fl, y, n, NULL);
    for (int i = 0; i < n; i++) {
        double model = fmin(1, calib_saturating_eval(&p, fl[i])) * wave[i];
        ss += (model / y[i] - 1) * (model / y[i] - 1);
    }
    return sqrt(ss / n);
}

/* GEMM efficiency with wave quantisation, on the GPU calibration's full
 * grid (calib/bench_gpu.c: a GPT block's forward and two backward GEMMs
 * for h 2048 at TP 1, 2, 4, 8 and h 12288 at TP 8 over 2048 tokens, then
 * squares 128..16384): samples made by the cost model itself on an
 * H100-like 132 SMs, with a 128 x 128 tile and eff = 0.80 F / (F + 4e9),
 * 2% noise. The fit must pick that tile among the four candidates, recover
 * the curve, and predict the samples to about the noise; the saturating
 * curve alone (the fit before the waves were modelled) cannot. */
/* The GPU calibration's full grid of linear-layer GEMMs (calib/bench_gpu.c):
 * a GPT block's four linear layers (C -> OC) for h 2048 at TP 1, 2, 4, 8 and
 * h 12288 at TP 8 over N tokens, each as {m, n, k, pass, tp, h}: the forward
 * (N, OC, C), dinp (N, C, OC) and dweight (OC, C, N). Returns the count, 60. */
#define LINEAR_GRID 60
static int linear_grid(double N, double g[LINEAR_GRID][6])
{
    static const int cfg[][2] = {{2048, 1}, {2048, 2}, {2048, 4}, {2048, 8}, {12288, 8}};
    int cnt = 0;
    for (int c = 0; c < 5; c++) {
        double h = cfg[c][0], tp = cfg[c][1];
        double lin[4][2] = {{h, 3 * h / tp}, {h / tp, h}, {h, 4 * h / tp}, {4 * h / tp, h}}; /* C, OC */
        for (int l = 0; l < 4; l++)
            for (int pass = 0; pass < 3; pass++) {
                double C = lin[l][0], OC = lin[l][1];
                double *r = g[cnt++];
                r[0] = pass == 2 ? OC : N, r[1] = pass == 0 ? OC : C, r[2] = pass == 0 ? C : pass == 1 ? OC : N;
                r[3] = pass, r[4] = tp, r[5] = h;
            }
    }
    return cnt;
}

static int gemm_waves(void)
{
    static const int tiles[][2] = {{64, 64}, {128, 64}, {128, 128}, {256, 128}};
    const double e_max = 0.80, f_half = 4e9, N = 2048;
    const int sms = 132;
    double m[80], n[80], fl[80], y[80], wave[80], res[80], grid[LINEAR_GRID][6];
    int cnt = linear_grid(N, grid);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, SEED);
    for (int i = 0; i < cnt; i++)
        m[i] = grid[i][0], n[i] = grid[i][1], fl[i] = 2 * grid[i][0] * grid[i][1] * grid[i][2];
    for (double s = 128; s <= 16384; s *= 2)
        m[cnt] = n[cnt] = s, fl[cnt++] = 2 * s * s * s;
    double worst_wave = 1;
    for (int i = 0; i < cnt; i++) {
        double we = cost_gemm_wave_eff(128, 128, sms, m[i], n[i], 1);
        worst_wave = fmin(worst_wave, we);
        y[i] = fmin(1, e_max * fl[i] / (fl[i] + f_half)) * we * (1 + gsl_ran_gaussian(rng, 0.02));
    }
    gsl_rng_free(rng);
    calib_wavefit_t g = calib_fit_gemm_waves(m, n, fl, y, cnt, sms, tiles, 4, wave, res);
    const char *src = "synthetic eff = 0.80 F / (F + 4e9) x wave(128 x 128, 132 SMs), 2% noise, seed 20240424";
    printf("     %d samples; the worst wave efficiency among them %.3f\n", cnt, worst_wave);
    check_true("fit converged", g.ok, "gsl_multifit_nlinear per candidate tile");
    check_true("tile 128 x 128 chosen", g.tile_m == 128 && g.tile_n == 128, src);
    printf("     chosen %d x %d; relative rms per candidate:", g.tile_m, g.tile_n);
    for (int c = 0; c < g.ncand; c++)
        printf(" %dx%d %.4f", g.cand_tile[c][0], g.cand_tile[c][1], g.cand_rel_rms[c]);
    printf("\n");
    check_rel("e_max", e_max, g.sat.e_max, 0.03, src);
    check_rel("F_half (FLOPs)", f_half, g.sat.x_half, 0.10, src);
    check_true("relative rms of the model <= 2.5%", g.rel_rms <= 0.025, "the noise is 2%");
    double plain = curve_only_rel_rms(fl, y, wave, cnt);
    printf("     without waves in the fit (curve fitted to the raw samples, then priced with waves): relative rms "
           "%.4f, against %.4f\n", plain, g.rel_rms);
    check_true("the wave-aware fit is at least 3x closer", plain >= 3 * g.rel_rms,
               "a curve fitted to raw samples counts each GEMM's wave loss twice once the model applies it");
    return check_done("calib_fit_gemm_waves");
}

/* Flash attention efficiency with wave quantisation, on the GPU
 * calibration's grid (calib/bench_gpu.c, full level: batch 1, 16 heads of
 * 128 at sequences 256..16384; 4, 12 and 64 heads at 2048; 32 heads of 64;
 * GQA; a 1024-key window at 4096), forward and backward: samples made by
 * the cost model on 132 SMs with 64-row blocks (kern_attention_*_cuda's)
 * and eff = 0.55 F / (F + 2e9) forward, 0.45 F / (F + 4e9) backward, 2%
 * noise. The fit must pick 64 among 32, 64 and 128, recover the curve and
 * predict the samples to about the noise; the curve fitted to the raw
 * samples cannot. */
static int attn_waves(void)
{
    static const int pts[][4] = {/* heads, sequence, head size, window (0: causal) */
                                 {16, 256, 128, 0},  {16, 512, 128, 0},  {16, 1024, 128, 0}, {16, 2048, 128, 0},
                                 {16, 4096, 128, 0}, {16, 8192, 128, 0}, {16, 16384, 128, 0}, {12, 2048, 128, 0},
                                 {4, 2048, 128, 0},  {64, 2048, 128, 0}, {32, 2048, 64, 0},  {16, 4096, 128, 1024}};
    static const int blocks[] = {32, 64, 128};
    const int sms = 132, npts = 12;
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, SEED);
    for (int bwd = 0; bwd < 2; bwd++) {
        const double e_max = bwd ? 0.45 : 0.55, f_half = bwd ? 4e9 : 2e9;
        double bh[12], seq[12], win[12], fl[12], y[12], wave[12], res[12], worst = 1;
        for (int i = 0; i < npts; i++) {
            bh[i] = pts[i][0], seq[i] = pts[i][1], win[i] = pts[i][3];
            fl[i] = calib_attn_flops(1, pts[i][1], pts[i][0], pts[i][2], pts[i][3], bwd);
            double we = cost_attn_wave_eff(64, sms, bh[i], seq[i], win[i], bwd);
            worst = fmin(worst, we);
            y[i] = fmin(1, e_max * fl[i] / (fl[i] + f_half)) * we * (1 + gsl_ran_gaussian(rng, 0.02));
        }
        calib_wavefit_t g = calib_fit_attn_waves(bh, seq, win, bwd, fl, y, npts, sms, blocks, 3, wave, res);
        char src[160], what[80];
        snprintf(src, sizeof src, "synthetic eff = %.2f F / (F + %.0e) x wave(64 rows, 132 SMs), 2%% noise, seed 20240424",
                 e_max, f_half);
        const char *dir = bwd ? "backward" : "forward";
        printf("     %s: %d samples; the worst wave efficiency among them %.3f; relative rms per block:", dir, npts,
               worst);
        for (int c = 0; c < g.ncand; c++)
            printf(" %d %.4f", g.cand_tile[c][0], g.cand_rel_rms[c]);
        printf("\n");
        snprintf(what, sizeof what, "%s: fit converged, 64-row blocks chosen", dir);
        check_true(what, g.ok && g.tile_m == 64 && g.tile_n == 0, src);
        snprintf(what, sizeof what, "%s: e_max", dir);
        check_rel(what, e_max, g.sat.e_max, 0.03, src);
        snprintf(what, sizeof what, "%s: relative rms of the model <= 2.5%%", dir);
        check_true(what, g.rel_rms <= 0.025, "the noise is 2%");
        double plain = curve_only_rel_rms(fl, y, wave, npts);
        printf("     %s without waves in the fit: relative rms %.4f, against %.4f\n", dir, plain, g.rel_rms);
        snprintf(what, sizeof what, "%s: the wave-aware fit is at least 3x closer", dir);
        check_true(what, plain >= 3 * g.rel_rms, "a raw-sample curve counts each op's wave loss twice");
    }
    gsl_rng_free(rng);
    return check_done("calib_fit_attn_waves");
}

/* Collective alpha-beta: alpha 12 us, bus bandwidth 20 GB/s (beta = 5e-5
 * us per byte), sizes 8 B..1 GiB by x2, 2% relative noise plus 0.2 us.
 * The small regime (<= 64 KiB) recovers alpha, the large (>= 64 MiB) beta. */
static int linear(void)
{
    const double alpha_us = 12.0, bw_gbps = 20.0, beta = 1e-3 / bw_gbps;
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, SEED);
    double x[28], y[28];
    int n = 0;
    for (double s = 8; s <= 1073741824.0; s *= 2, n++) {
        x[n] = s;
        y[n] = (alpha_us + beta * s) * (1 + gsl_ran_gaussian(rng, 0.02)) + gsl_ran_gaussian(rng, 0.2);
    }
    gsl_rng_free(rng);
    const char *src = "synthetic t = 12 us + bytes / 20 GB/s, 2% + 0.2 us noise, seed 20240424";
    calib_linfit_t s = calib_fit_linear(x, y, n, 0, 65536, NULL);
    calib_linfit_t l = calib_fit_linear(x, y, n, 64 << 20, 1e30, NULL);
    check_rel("small-message alpha (us)", alpha_us, s.a, 0.03, src);
    check_rel("large-message bandwidth (GB/s)", bw_gbps, 1e-3 / l.b, 0.03, src);
    check_true("large-message R^2 > 0.999", l.r2 > 0.999, "bandwidth term dominates above 64 MiB");
    printf("     small: alpha %.4f +- %.4f us (R^2 %.4f, %d samples); large: bw %.4f GB/s, beta se %.3g (R^2 %.6f, %d)\n",
           s.a, s.se_a, s.r2, s.n, 1e-3 / l.b, l.se_b, l.r2, l.n);
    check_true("sample counts", s.n == 14 && l.n == 5, "8 B..64 KiB is 14 sizes, 64 MiB..1 GiB is 5");
    /* The large regime with its intercept held in [0, the small alpha]
     * (calib_fit_linear_bounded): the bound is the intercept whenever the
     * free one lies above it, and the bandwidth is still recovered. */
    calib_linfit_t b = calib_fit_linear_bounded(x, y, n, 64 << 20, 1e30, s.a, NULL);
    check_true("bounded large-message intercept within [0, small alpha]", b.a >= 0 && b.a <= s.a,
               "the clamp of the free intercept");
    check_rel("bounded: the free intercept clamped", fmin(fmax(l.a, 0), s.a), b.a, 1e-12, "convex in a");
    check_rel("bounded: large-message bandwidth (GB/s)", bw_gbps, 1e-3 / b.b, 0.03, src);
    calib_linfit_t z = calib_fit_linear_bounded(x, y, n, 64 << 20, 1e30, -5, NULL);
    check_rel("bounded with a negative bound: intercept 0", 0, z.a, 0, "[0, max(a_max, 0)]");
    return check_done("calib_fit_linear");
}

/* Parameters through a model like the closed form's MFU: row i does W_i of
 * work in fixed_i + xch_i g + o + compute_i / k seconds (compute at a
 * scale k, xch_i blocking exchanges costing g each, a per-iteration
 * overhead o), MFU_i = W_i / that. Nine rows (Table 3's count) with the
 * compute share 80-97% of the time; the rows differ in xch_i (only the
 * first four exchange, as Table 3's blocking rows) and in compute_i (the
 * last has three times the work of the others, as row 9's batch). */
typedef struct {
    double w[9], fixed[9], compute[9], xch[9];
    int np; /* parameters fitted: 1 (k), 3 (k, g, o) */
} fit_ctx_t;

static double mfu_model(const double *p, int i, void *ctx)
{
    const fit_ctx_t *c = ctx;
    double g = c->np > 1 ? p[1] : 0, o = c->np > 2 ? p[2] : 0;
    return c->w[i] / (c->fixed[i] + c->xch[i] * g + o + c->compute[i] / p[0]);
}

static void fit_rows(fit_ctx_t *c)
{
    for (int i = 0; i < 9; i++) {
        c->compute[i] = (10.0 + i) * (i == 8 ? 3 : 1), c->fixed[i] = 0.3 + 0.25 * i;
        c->xch[i] = i < 4 ? 400 : 0, c->w[i] = 60.0 * (c->compute[i] + c->fixed[i]);
    }
}

static int params(void)
{
    const double truth[3] = {0.9, 1.5e-3, 0.6}, p0[3] = {1.0, 1e-3, 0.3};
    const double lo[3] = {0.3, 0, 0}, hi[3] = {1.5, 0.01, 5};
    fit_ctx_t c = {.np = 3};
    double y[9], res[9];
    fit_rows(&c);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, SEED);
    for (int i = 0; i < 9; i++)
        y[i] = mfu_model(truth, i, &c) * (1 + gsl_ran_gaussian(rng, 0.002));
    gsl_rng_free(rng);
    const char *src = "synthetic MFU_i = W_i / (fixed_i + xch_i g + o + compute_i / k), k = 0.9, g = 1.5 ms, "
                      "o = 0.6 s, 0.2% noise, seed 20240424";
    calib_fit_t f = calib_fit_params(mfu_model, &c, y, 9, 3, p0, lo, hi, res);
    check_true("3-parameter fit converged", f.ok, "gsl_multifit_nlinear trust region, finite-difference Jacobian");
    check_rel("k", truth[0], f.p[0], 0.02, src);
    check_rel("g (s per exchange)", truth[1], f.p[1], 0.1, src);
    check_rel("o (s per iteration)", truth[2], f.p[2], 0.25, src);
    printf("     fit: k %.4f +- %.4f, g %.3g +- %.2g s, o %.3f +- %.3f s, rms %.4f\n", f.p[0], f.se[0], f.p[1],
           f.se[1], f.p[2], f.se[2], f.rms);
    for (int j = 0; j < 3; j++)
        check_true("parameter within 3 standard errors", fabs(f.p[j] - truth[j]) < 3 * f.se[j],
                   "the standard errors are honest");
    fit_ctx_t one = {.np = 1};
    double exact[9];
    fit_rows(&one);
    const double k07[1] = {0.7};
    for (int i = 0; i < 9; i++)
        exact[i] = mfu_model(k07, i, &one);
    calib_fit_t g = calib_fit_params(mfu_model, &one, exact, 9, 1, p0, lo, hi, NULL);
    check_rel("noise-free k = 0.7 recovered (1 parameter)", 0.7, g.p[0], 1e-6, "same model, no noise");
    calib_fit_t h = calib_fit_params(mfu_model, &c, exact, 3, 3, p0, lo, hi, NULL);
    check_true("3 samples for 3 parameters are refused (ok = 0)", !h.ok, "a fit needs more samples than parameters");
    return check_done("calib_fit_params");
}

/* A prediction's standard error from the fitted parameters
 * (calib_fit_pred_se, the delta method), on a straight line y = a + b x
 * fitted by calib_fit_params, against GSL's ordinary least squares
 * (gsl_fit_linear), whose covariance gives the textbook value
 * sqrt(cov00 + 2 x0 cov01 + x0^2 cov11) = s sqrt(1/n + (x0 - mean)^2 / Sxx):
 * inside the fitted range and beyond it (an extrapolation, wider). */
typedef struct {
    const double *x;
    double x0;
} line_ctx_t;

static double line_model(const double *p, int i, void *ctx)
{
    const line_ctx_t *c = ctx;
    return p[0] + p[1] * (i < 0 ? c->x0 : c->x[i]);
}

static int pred_se(void)
{
    double x[10], y[10];
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, SEED);
    for (int i = 0; i < 10; i++)
        x[i] = i, y[i] = 2.0 + 0.5 * x[i] + gsl_ran_gaussian(rng, 0.3);
    gsl_rng_free(rng);
    line_ctx_t c = {x, 0};
    const double p0[2] = {0, 0}, lo[2] = {-100, -100}, hi[2] = {100, 100};
    calib_fit_t f = calib_fit_params(line_model, &c, y, 10, 2, p0, lo, hi, NULL);
    double a, b, c00, c01, c11, chi2;
    gsl_fit_linear(x, 1, y, 1, 10, &a, &b, &c00, &c01, &c11, &chi2);
    const char *src = "gsl_fit_linear on the same 10 points (y = 2 + 0.5 x, noise 0.3, seed 20240424)";
    check_true("line fit converged", f.ok, "gsl_multifit_nlinear");
    check_rel("intercept", a, f.p[0], 1e-5, src);
    check_rel("slope", b, f.p[1], 1e-5, src);
    for (double x0 = 4.5; x0 < 40; x0 += 25.5) { /* the mean of x, and far beyond the samples */
        c.x0 = x0;
        char what[64];
        snprintf(what, sizeof what, "standard error of the prediction at x = %g", x0);
        check_rel(what, sqrt(c00 + 2 * x0 * c01 + x0 * x0 * c11), calib_fit_pred_se(&f, line_model, &c, -1, lo, hi),
                  1e-4, src);
    }
    calib_fit_t bad = f;
    bad.ok = 0;
    check_true("no fit, no standard error (NAN)", isnan(calib_fit_pred_se(&bad, line_model, &c, -1, lo, hi)),
               "calib_fit_pred_se's contract");
    return check_done("calib_fit_pred_se");
}

/* A math rate (calib_fit_rate): time_us = elems / rate, rate 0.24 G
 * elements/s (the CPU's AdamW reference, experiments/profiles), at
 * AdamW's sizes in the CPU calibration (146 to 1.5e5 parameters, x4), 3%
 * relative noise. The least squares on the relative error must recover
 * the rate and give an honest standard error; the smallest sizes, which
 * an absolute fit would all but ignore, weigh alike: at 0.8 of the rate
 * at the smallest three, the fit gives sum r^2 / sum r = 5.92 / 6.4 of it,
 * 7.5% low (an absolute fit, weighted by x^2, would barely move). */
static int rate(void)
{
    const double rate_gs = 0.24;
    double x[7], y[7], res[7];
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, SEED);
    for (int i = 0; i < 7; i++) {
        x[i] = 146 * pow(4, i);
        y[i] = x[i] / rate_gs * 1e-3 * (1 + gsl_ran_gaussian(rng, 0.03));
    }
    gsl_rng_free(rng);
    const char *src = "synthetic time_us = elems / 0.24 G/s, 3% noise, seed 20240424";
    calib_linfit_t f = calib_fit_rate(x, y, 7, res);
    double got = 1e-3 / f.b, se = 1e-3 * f.se_b / (f.b * f.b);
    check_true("fit ok (7 samples)", f.ok && f.n == 7, "at least 3 samples, all positive");
    check_rel("rate (G elements / s)", rate_gs, got, 0.03, src);
    printf("     fit: rate %.5f +- %.5f G/s, R^2 %.5f, rms %.3g us\n", got, se, f.r2, f.rms);
    check_true("rate within 3 standard errors", fabs(got - rate_gs) < 3 * se, "the standard error is honest");
    check_rel("residual of the largest sample = y - b x", y[6] - f.b * x[6], res[6], 1e-12, "definition");
    /* the smallest three run 20% slower (time x 1.25): relative weighting
     * lets them pull about 3/7 of the way */
    double slow[7];
    for (int i = 0; i < 7; i++)
        slow[i] = x[i] / rate_gs * 1e-3 * (i < 3 ? 1.25 : 1);
    calib_linfit_t g = calib_fit_rate(x, slow, 7, NULL);
    double pulled = 1 - 1e-3 / g.b / rate_gs; /* r_i 0.8 or 1 of the rate: 1 / b = sum r^2 / sum r */
    double want = 1 - (3 * 0.64 + 4) / (3 * 0.8 + 4);
    check_rel("slow small sizes pull the rate down by", want, pulled, 1e-9, "3 of 7 rates at 0.8: 1 - 5.92 / 6.4");
    double neg[3] = {1, -1, 2};
    check_true("a non-positive time is refused (ok = 0)", !calib_fit_rate(x, neg, 3, NULL).ok, "rates need y > 0");
    check_true("2 samples are refused (ok = 0)", !calib_fit_rate(x, y, 2, NULL).ok, "at least 3");
    return check_done("calib_fit_rate");
}

/* An empty calibration result with the tables calib_fit_all reads (one
 * static: each call frees and reuses it). */
static calib_result_t *empty_result(int nranks)
{
    static calib_result_t r;
    calib_result_free(&r);
    memset(&r, 0, sizeof r);
    calib_gemm_table(&r.gemm), calib_attn_table(&r.attn), calib_attn_unfused_table(&r.attn_unfused);
    calib_mem_table(&r.mem);
    r.nranks = nranks, r.ncores = 2, r.comm_slowdown = -1, r.host_stall_s = -1, r.flash1_rel = -1;
    r.llc_bytes = 32.0 * (1 << 20);
    return &r;
}

static void copy_row(calib_result_t *r, double bytes, double t_min_us, double t_med_us)
{
    calib_stat_t st = {t_med_us * 1e-6, t_min_us * 1e-6, t_med_us * 1e-6, t_min_us * 1e-6, t_med_us * 1e-6, 7, 1, 0};
    calib_mem_row(&r->mem, 0, bytes, bytes / 8, &st);
}

/* The memory fits through calib_fit_all on a CPU-like copy sweep (the
 * --quick grid: 4 KiB to 16 MiB by x4, then 64, 128, 256 MiB beyond a
 * 32 MiB last-level cache): in cache t = 0.5 us + bytes / 100 GB/s (the
 * kernel_gap fit takes the sizes up to 256 KiB, their medians), in DRAM
 * t = 0.5 us + bytes / 25 GB/s (the hbm_bw fit takes the sizes >= 64 MiB,
 * their fastest samples, its intercept held in [0, the fastest copy's
 * time]; medians 5% slower). 1% noise. Expected: gap 0.5 us, hbm_gbps 25;
 * the in-cache rates (4x DRAM's) must not leak into the bandwidth, nor the
 * medians into it. */
static int memory(void)
{
    calib_result_t *r = empty_result(1);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, SEED);
    for (double b = 4096; b < 64.0 * (1 << 20); b *= 4) {
        double t = (0.5 + b / 100e3) * (1 + gsl_ran_gaussian(rng, 0.01));
        copy_row(r, b, 0.97 * t, t);
    }
    for (double b = 64.0 * (1 << 20); b <= 256.0 * (1 << 20); b *= 2) {
        double t = (0.5 + b / 25e3) * (1 + gsl_ran_gaussian(rng, 0.01));
        copy_row(r, b, t, 1.05 * t);
    }
    gsl_rng_free(rng);
    calib_plan_t p = calib_plan(CALIB_QUICK);
    calib_fit_all(r, &p);
    const char *src = "synthetic copies: 0.5 us + B / 100 GB/s in cache, 0.5 us + B / 25 GB/s beyond 2 x 32 MiB, "
                      "1% noise";
    check_rel("kernel_gap_us (intercept of copies <= 256 KiB)", 0.5, r->gap_us, 0.1, src);
    check_true("hbm_bw fitted (3 DRAM-resident copies)", r->hbm_fitted, "64, 128, 256 MiB >= 2 x 32 MiB");
    check_rel("hbm_gbps (fastest samples >= 64 MiB)", 25, r->copy_gbps, 0.02, src);
    double fastest_us = INFINITY;
    for (int i = 0; i < r->mem.n; i++)
        fastest_us = fmin(fastest_us, calib_table_get(&r->mem, i, 3) * 1e6);
    for (int i = 0; i < r->nfits; i++)
        if (!strcmp(r->fits[i].name, "hbm_bw")) {
            printf("     hbm_bw intercept %.4f us, fastest copy %.4f us\n", r->fits[i].lin.a, fastest_us);
            check_true("hbm_bw intercept within [0, the fastest copy's time]",
                       r->fits[i].lin.a >= 0 && r->fits[i].lin.a <= fastest_us, "calib_fit_linear_bounded");
        }
    hw_t hw;
    char err[OPT_ERR_LEN] = "";
    check_true("profile made", calib_make_profile(r, "a100-sxm-80gb", "megascale", &hw, err) == 0, err);
    check_rel("profile hbm_gbps = the fit's", r->copy_gbps, hw.gpu.hbm_gbps, 1e-12, "calib_make_profile");
    /* with one DRAM-resident size the fit cannot be made: the largest copy stands in */
    calib_result_t *one = empty_result(1);
    copy_row(one, 4096, 0.5, 0.5), copy_row(one, 1 << 20, 10, 10), copy_row(one, 128.0 * (1 << 20), 5000, 5400);
    calib_fit_all(one, &p);
    check_true("1 DRAM-resident size: not fitted", !one->hbm_fitted, "the fit needs 3 sizes");
    check_rel("  hbm_gbps = the largest copy's median rate", 128.0 * (1 << 20) / 5400e-6 * 1e-9, one->copy_gbps, 1e-9,
              "the stand-in");
    calib_result_free(one);
    return check_done("calib_fit_memory");
}

/* The weight gradients' fp32 accumulation through calib_fit_all and
 * calib_make_profile, on the GPU calibration's full grid (gemm_waves's:
 * each linear layer's forward, dinp and dweight GEMMs over 2048 tokens,
 * then squares), 132 SMs, a 128 x 128 tile, eff = 0.80 F / (F + 4e9), 2%
 * noise; each dweight GEMM (pass 2) also takes 0.7 of its 8 bytes per
 * output element at 3000 GB/s (copies of 4 KiB to 1 GiB at exactly that
 * rate give hbm_gbps and a flat mem_eff). Expected: gemm_acc_exposed 0.7
 * and, with it taken off, the curve predicting every pass to about the
 * noise; a fit that ignores it (all passes raw) misses the dweight GEMMs by
 * their accumulation, up to a third of their time at these shapes. */
static int gemm_acc(void)
{
    const double e_max = 0.80, f_half = 4e9, N = 2048, peak = 1000e12, bw = 3000e9, exposed = 0.7;
    calib_result_t *r = empty_result(1);
    r->device = 1, r->gpu.sm_count = 132, r->llc_bytes = 50e6;
    for (double b = 4096; b <= 1024.0 * (1 << 20); b *= 4)
        copy_row(r, b, b / bw * 1e6, b / bw * 1e6);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, SEED);
    double worst = 0, grid[LINEAR_GRID][6];
    for (int i = 0, cnt = linear_grid(N, grid); i < cnt; i++) {
        double m = grid[i][0], n = grid[i][1], k = grid[i][2], fl = 2 * m * n * k;
        double eff = fmin(1, e_max * fl / (fl + f_half)) * cost_gemm_wave_eff(128, 128, 132, m, n, 1);
        double t = fl / (eff * peak) * (1 + gsl_ran_gaussian(rng, 0.02));
        if (grid[i][3] == 2) {
            double a = exposed * 8 * m * n / bw;
            worst = fmax(worst, a / t), t += a;
        }
        calib_stat_t st = {t, t, t, t, t, 7, 1, 0};
        calib_gemm_row(&r->gemm, (int)m, (int)n, (int)k, &st, (int)grid[i][4], (int)grid[i][3], (int)grid[i][5]);
    }
    for (double s = 128; s <= 16384; s *= 2) {
        double fl = 2 * s * s * s, eff = fmin(1, e_max * fl / (fl + f_half)) * cost_gemm_wave_eff(128, 128, 132, s, s, 1);
        double t = fl / (eff * peak) * (1 + gsl_ran_gaussian(rng, 0.02));
        calib_stat_t st = {t, t, t, t, t, 7, 1, 0};
        calib_gemm_row(&r->gemm, (int)s, (int)s, (int)s, &st, 0, 0, 0);
    }
    gsl_rng_free(rng);
    calib_plan_t p = calib_plan(CALIB_FULL);
    calib_fit_all(r, &p);
    const char *src = "synthetic: dweight GEMMs + 0.7 x 8 m n / 3000 GB/s, eff 0.80 F / (F + 4e9) x wave(128 x 128), "
                      "2% noise, seed 20240424";
    printf("     the accumulation is up to %.0f%% of a dweight GEMM's time here\n", 100 * worst);
    check_rel("hbm_gbps (copies at exactly 3000 GB/s)", 3000, r->copy_gbps, 0.01, "the copy rows");
    check_rel("gemm_acc_exposed", exposed, r->gemm_acc_exposed, 0.05, src);
    const calib_fitrec_t *g = NULL;
    for (int i = 0; i < r->nfits; i++)
        if (!strcmp(r->fits[i].name, "gemm_eff"))
            g = &r->fits[i];
    check_true("gemm_eff fitted", g && g->wfit.ok, "calib_fit_gemm_waves over every pass");
    if (g) {
        printf("     gemm_eff: tile %d x %d, relative rms %.4f\n", g->wfit.tile_m, g->wfit.tile_n, g->wfit.rel_rms);
        check_true("relative rms of the model <= 2.5% once the accumulation is off", g->wfit.rel_rms <= 0.025,
                   "the noise is 2%");
    }
    /* the same samples fitted raw (every pass as measured) */
    double mm[80], nn[80], fl[80], y[80], wave[80], res[80];
    int cnt = 0;
    for (int i = 0; i < r->gemm.n && cnt < 80; i++, cnt++) {
        mm[cnt] = calib_table_get(&r->gemm, i, 0), nn[cnt] = calib_table_get(&r->gemm, i, 1);
        fl[cnt] = calib_table_get(&r->gemm, i, 3), y[cnt] = fmin(1, calib_table_get(&r->gemm, i, 7) / r->peak_gflops);
    }
    static const int tiles[][2] = {{64, 64}, {128, 64}, {128, 128}, {256, 128}};
    calib_wavefit_t raw = calib_fit_gemm_waves(mm, nn, fl, y, cnt, 132, tiles, 4, wave, res);
    printf("     fitted raw (the accumulation left in the dweight samples): relative rms %.4f\n", raw.rel_rms);
    check_true("the raw fit is at least 2x further off", g && raw.rel_rms >= 2 * g->wfit.rel_rms,
               "one curve cannot hold both the dweight GEMMs and the others");
    hw_t hw;
    char err[OPT_ERR_LEN] = "";
    check_true("profile made", calib_make_profile(r, "h100-sxm-80gb", "megascale", &hw, err) == 0, err);
    check_rel("profile gemm_acc_exposed = the fit's", r->gemm_acc_exposed, hw.gpu.gemm_acc_exposed, 1e-12,
              "calib_make_profile");
    return check_done("calib_fit_gemm_acc");
}

/* The dropout draw rates through calib_fit_all and calib_make_profile, on
 * H100-like synthetic samples (132 SMs): the flash passes over the GPU
 * grid (16 heads of 128 from 256 to 4096 tokens; 4, 12 and 64 heads at
 * 2048) at 0.18 F / (F + 5e8) forward and 0.13 F / (F + 5e8) backward
 * times the wave efficiency of 128-row blocks; the attention_dropout rows
 * (16 and 64 heads at 2048) adding draws / (R x wave) with R 700 G/s
 * forward and 300 backward; LayerNorm rows at 3000 GB/s and LayerNorm
 * with dropout adding elements / 230 G/s. 2% noise on every time, 0.5% on
 * the attention_dropout pairs (a GPU median's spread; their difference,
 * a quarter of the time, would carry 8 times the noise).
 * Expected: flash_fwd_gdraws 700, flash_bwd_gdraws 300, dropout_gdraws
 * 230, each within 5%, and in the profile; the draws over the added time
 * alone (no wave correction) would be 14 to 40% low. */
static int dropout_draws(void)
{
    const double peak = 843e12, bw = 3000e9, rate[2] = {700e9, 300e9}, e_max[2] = {0.18, 0.13}, ln_rate = 230e9;
    calib_result_t *r = empty_result(1);
    r->device = 1, r->gpu.sm_count = 132, r->llc_bytes = 50e6, r->peak_gflops = peak * 1e-9;
    calib_attn_dropout_table(&r->attn_drop);
    calib_plan_t p = calib_plan(CALIB_FULL);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, SEED);
    for (double b = 4096; b <= 1024.0 * (1 << 20); b *= 4)
        copy_row(r, b, b / bw * 1e6, b / bw * 1e6);
    /* a GEMM at the peak, so that calib_fit_all's best GEMM is `peak` */
    calib_stat_t gs = {2 * 8192.0 * 8192 * 8192 / peak, 0, 0, 0, 0, 7, 1, 0};
    gs.min_s = gs.max_s = gs.q1_s = gs.q3_s = gs.med_s;
    calib_gemm_row(&r->gemm, 8192, 8192, 8192, &gs, 0, 0, 0);
    int shapes[][2] = {{256, 16}, {512, 16}, {1024, 16}, {2048, 16}, {4096, 16}, {2048, 4}, {2048, 12}, {2048, 64}};
    double naive[2] = {0, 0};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int bwd = 0; bwd <= 1; bwd++) {
            int T = shapes[i][0], NH = shapes[i][1];
            double fl = calib_attn_flops(1, T, NH, 128, 0, bwd);
            double we = cost_attn_wave_eff(128, 132, NH, T, T, bwd);
            double t = fl / (peak * e_max[bwd] * fl / (fl + 5e8) * we);
            calib_stat_t st = {t * (1 + gsl_ran_gaussian(rng, 0.02)), 0, 0, 0, 0, 7, 1, 0};
            st.min_s = st.max_s = st.q1_s = st.q3_s = st.med_s;
            calib_attn_row(&r->attn, bwd, 1, T, NH, NH, 128, 0, &st);
            if (T == 2048 && (NH == 16 || NH == 64)) {
                double draws = NH * workload_causal_keys(T, T), extra = draws / (rate[bwd] * we);
                calib_attn_dropout_row(&r->attn_drop, bwd, 1, T, NH, NH, 128, 0, t * (1 + gsl_ran_gaussian(rng, 0.005)),
                                       (t + extra) * (1 + gsl_ran_gaussian(rng, 0.005)));
                naive[bwd] += 0.5 * draws / extra;
            }
        }
    for (double n = 768 * 16; n <= 768 * 65536.0; n *= 4) {
        double t1 = calib_mem_bytes(1, (long)n, 2, 768) / bw, t5 = t1 + n / ln_rate;
        calib_stat_t s1 = {t1 * (1 + gsl_ran_gaussian(rng, 0.02)), t1, t1, t1, t1, 7, 1, 0};
        calib_stat_t s5 = {t5 * (1 + gsl_ran_gaussian(rng, 0.02)), t5, t5, t5, t5, 7, 1, 0};
        calib_mem_row(&r->mem, 1, calib_mem_bytes(1, (long)n, 2, 768), n, &s1);
        calib_mem_row(&r->mem, 5, calib_mem_bytes(5, (long)n, 2, 768), n, &s5);
    }
    gsl_rng_free(rng);
    calib_fit_all(r, &p);
    const char *src = "synthetic: draws / (R x wave(128-row blocks, 132 SMs)) added to each flash pass, R 700 / 300 "
                      "G/s; elements / 230 G/s added to LayerNorm; 2% noise (0.5% on the dropout pairs), seed 20240424";
    printf("     the draws over the added time alone: %.0f forward, %.0f backward G/s\n", naive[0] * 1e-9,
           naive[1] * 1e-9);
    for (int i = 0; i < r->nfits; i++)
        if (!strncmp(r->fits[i].name, "flash_", 6) && r->fits[i].wfit.ok)
            printf("     %s: blocks of %d rows\n", r->fits[i].name, r->fits[i].wfit.tile_m);
    check_rel("flash_fwd_gdraws", 700, r->flash_gdraws[0], 0.05, src);
    check_rel("flash_bwd_gdraws", 300, r->flash_gdraws[1], 0.05, src);
    check_rel("dropout_gdraws (LayerNorm with dropout less LayerNorm)", 230, r->math_gelems[3], 0.05, src);
    check_true("without the wave correction >= 10% low in both passes",
               naive[0] < 0.9 * rate[0] && naive[1] < 0.9 * rate[1], "the waves of 16 and 64 heads on 132 SMs");
    hw_t hw;
    char err[OPT_ERR_LEN] = "";
    check_true("profile made", calib_make_profile(r, "h100-sxm-80gb", "megascale", &hw, err) == 0, err);
    check_rel("profile flash_fwd_gdraws = the fit's", r->flash_gdraws[0], hw.gpu.flash_fwd_gdraws, 1e-12, "");
    check_rel("profile flash_bwd_gdraws = the fit's", r->flash_gdraws[1], hw.gpu.flash_bwd_gdraws, 1e-12, "");
    check_rel("profile dropout_gdraws = the fit's", r->math_gelems[3], hw.gpu.dropout_gdraws, 1e-12, "");
    return check_done("calib_fit_dropout_draws");
}

/* The collective fits through calib_fit_all and calib_make_profile, on
 * times from the model's own cost functions (model/cost.c cost_coll_s,
 * cost_p2p_s) for 4 ranks on one node: coll_launch_us 6, alpha_nvlink_us
 * (a ring step) 0.8, nvlink_gbps (bus bandwidth) 20 at every size
 * (nvlink_eff flat 1); nccl-tests' sweep 8 B..16 MiB by x2, 1% noise.
 * fit_coll splits the sizes into a small regime (<= 64 KiB: alpha =
 * launch + steps x step, steps 6 for the all-reduce, 3 for the others, 1
 * for send/recv) and a large one (>= 1 MiB: bandwidth, x = size x the bus
 * factor, so every collective shows 20 GB/s); split_latency gets launch
 * and step from the all-reduce's and send/recv's alphas; coll_curve the
 * efficiency from the all-reduce's times after its latency. */
static int collectives(void)
{
    static const coll_t model_coll[CALIB_NCOLL - 1] = {COLL_ALLREDUCE, COLL_ALLGATHER, COLL_REDUCESCATTER,
                                                       COLL_ALLTOALL, COLL_BROADCAST};
    const double launch_us = 6, step_us = 0.8, bw_gbps = 20;
    const int n = 4;
    hw_t truth;
    char err[OPT_ERR_LEN] = "";
    hw_resolve("a100-sxm-80gb", "megascale", NULL, &truth, err);
    truth.cluster.coll_launch_us = launch_us, truth.cluster.alpha_nvlink_us = step_us;
    truth.gpu.nvlink_gbps = bw_gbps, truth.cluster.nvlink_scale = 1;
    truth.cluster.nvlink_eff = (curve_t){1, {1}, {1}};
    group_layout_t g = {n, n, 1, -1};
    calib_result_t *r = empty_result(n);
    static const char *const cols[] = {"coll", "size_bytes", "count", "time_us", "time_min_us", "time_max_us",
                                       "algbw_gbps", "busbw_gbps", "wrong"};
    calib_table_init(&r->coll, "collectives", cols, 9);
    r->have_coll = 1;
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, SEED);
    for (int c = 0; c < CALIB_NCOLL; c++)
        for (double size = 8; size <= 16 << 20; size *= 2) {
            if (c >= 1 && c <= 3 && size < 4 * n) /* blocked collectives: a float per rank at least */
                continue;
            double t_s = c < CALIB_NCOLL - 1 ? cost_coll_s(&truth, model_coll[c], size, &g)
                                             : cost_p2p_s(&truth, size, &g);
            double t_us = t_s * 1e6 * (1 + gsl_ran_gaussian(rng, 0.01)), algbw = size / t_us * 1e-3;
            calib_table_add(&r->coll, (double[]){c, size, size / 4, t_us, t_us, t_us, algbw,
                                                 algbw * calib_bus_factor(c, n), 0});
        }
    gsl_rng_free(rng);
    calib_plan_t p = calib_plan(CALIB_QUICK);
    calib_fit_all(r, &p);
    const char *src = "synthetic: model/cost.c at launch 6 us, step 0.8 us, 20 GB/s bus, 4 ranks, 1% noise";
    static const double steps[CALIB_NCOLL] = {6, 3, 3, 3, 3, 1};
    for (int c = 0; c < CALIB_NCOLL; c++) {
        char name[64], what[96];
        const calib_fitrec_t *s = NULL, *l = NULL;
        for (int i = 0; i < r->nfits; i++) {
            snprintf(name, sizeof name, "%s_small", calib_colls[c].name);
            s = !strcmp(r->fits[i].name, name) ? &r->fits[i] : s;
            snprintf(name, sizeof name, "%s_large", calib_colls[c].name);
            l = !strcmp(r->fits[i].name, name) ? &r->fits[i] : l;
        }
        if (!check_true(calib_colls[c].name, s && l, "small and large fits present"))
            continue;
        snprintf(what, sizeof what, "%s small alpha (us), %d samples", calib_colls[c].name, s->lin.n);
        check_rel(what, launch_us + steps[c] * step_us, s->lin.a, 0.03, "launch + steps x step");
        snprintf(what, sizeof what, "%s large bus bandwidth (GB/s), %d samples", calib_colls[c].name, l->lin.n);
        check_rel(what, bw_gbps, 1e-3 / l->lin.b, 0.02, "x = size x bus factor");
    }
    /* top 16 MiB: small <= min(64 KiB, top / 64), large >= top / 16 */
    for (int i = 0; i < r->nfits; i++)
        if (!strcmp(r->fits[i].name, "all_reduce_small") || !strcmp(r->fits[i].name, "all_reduce_large"))
            check_rel(r->fits[i].name, strstr(r->fits[i].name, "small") ? 14 : 5, r->fits[i].lin.n, 0,
                      "sizes in the regime: 8 B..64 KiB is 14, 1..16 MiB is 5");
    hw_t hw;
    check_true("profile made", calib_make_profile(r, "a100-sxm-80gb", "megascale", &hw, err) == 0, err);
    check_rel("coll_launch_us (split_latency)", launch_us, hw.cluster.coll_launch_us, 0.05, src);
    check_rel("alpha_nvlink_us, one ring step (split_latency)", step_us, hw.cluster.alpha_nvlink_us, 0.1, src);
    check_rel("nvlink_gbps (all-reduce large regime)", bw_gbps, hw.gpu.nvlink_gbps, 0.02, src);
    const curve_t *e = &hw.cluster.nvlink_eff;
    int big = 0;
    for (int i = 0; i < e->n; i++)
        if (e->x[i] >= 1 << 20) {
            char what[80];
            snprintf(what, sizeof what, "nvlink_eff at %.0f B (coll_curve)", e->x[i]);
            check_rel(what, 1, e->y[i], 0.05, "flat 1 in the model; 1% noise on a time 8x the latency");
            big++;
        }
    check_true("nvlink_eff has points at 1, 4 and 16 MiB", big == 3, "powers of 4 from 4 KiB");
    return check_done("calib_fit_collectives");
}

/* The CPU GEMM benchmark times each pass of a linear layer with the calls
 * the CPU backend makes (calib_linear_pass_ref): passes 1 and 2 must give
 * exactly kern_matmul_bwd_ref's dinp and dweight (the same kern_gemm_ref
 * calls, so bit for bit), pass 0 kern_matmul_fwd_ref's out; and
 * calib_linear_dims gives each pass the m x n x k whose 2 m n k is the
 * layer's 2 N C OC. */
static int gemm_passes(void)
{
    const int N = 37, C = 24, OC = 40; /* not multiples of the 4 x 4 block: the edges too */
    float *x = calib_rand_floats((size_t)N * C, 1), *w = calib_rand_floats((size_t)OC * C, 2);
    float *dy = calib_rand_floats((size_t)N * OC, 3), *dw0 = calib_rand_floats((size_t)OC * C, 4);
    float *dx_a = calloc((size_t)N * C, 4), *dx_b = calloc((size_t)N * C, 4), *y_a = calloc((size_t)N * OC, 4);
    float *y_b = calloc((size_t)N * OC, 4), *dw_a = malloc((size_t)OC * C * 4), *dw_b = malloc((size_t)OC * C * 4);
    memcpy(dw_a, dw0, (size_t)OC * C * 4), memcpy(dw_b, dw0, (size_t)OC * C * 4);
    kern_matmul_bwd_ref(dx_a, dw_a, NULL, dy, x, w, NULL, N, C, OC);
    calib_linear_pass_ref(1, dy, dx_b, NULL, x, w, N, C, OC);
    calib_linear_pass_ref(2, dy, NULL, dw_b, x, w, N, C, OC);
    kern_matmul_fwd_ref(y_a, NULL, x, w, NULL, N, C, OC);
    calib_linear_pass_ref(0, y_b, NULL, NULL, x, w, N, C, OC);
    check_true("pass 1 = kern_matmul_bwd_ref's dinp, bit for bit", !memcmp(dx_a, dx_b, (size_t)N * C * 4),
               "the same kern_gemm_ref call");
    check_true("pass 2 = kern_matmul_bwd_ref's dweight (+=), bit for bit", !memcmp(dw_a, dw_b, (size_t)OC * C * 4),
               "the same kern_gemm_ref call, beta 1");
    check_true("pass 0 = kern_matmul_fwd_ref's out, bit for bit", !memcmp(y_a, y_b, (size_t)N * OC * 4),
               "kern_matmul_fwd_ref itself");
    double changed = 0;
    for (int i = 0; i < OC * C; i++)
        changed += dw_b[i] != dw0[i];
    check_true("pass 2 changed dweight", changed > 0, "a timed pass does work");
    static const int want[3][3] = {{N, OC, C}, {N, C, OC}, {OC, C, N}};
    for (int pass = 0; pass < 3; pass++) {
        int m, n, k;
        char what[64];
        calib_linear_dims(N, C, OC, pass, &m, &n, &k);
        snprintf(what, sizeof what, "pass %d: m x n x k = %d x %d x %d", pass, want[pass][0], want[pass][1],
                 want[pass][2]);
        check_true(what, m == want[pass][0] && n == want[pass][1] && k == want[pass][2], "kernels/matmul.h shapes");
        check_rel("  its FLOPs 2 m n k = 2 N C OC", 2.0 * N * C * OC, 2.0 * m * n * k, 0, "one layer's GEMM");
    }
    free(x), free(w), free(dy), free(dw0), free(dx_a), free(dx_b), free(y_a), free(y_b), free(dw_a), free(dw_b);
    return check_done("calib_gemm_passes");
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "saturating"))
        return saturating();
    if (argc > 1 && !strcmp(argv[1], "gemm_waves"))
        return gemm_waves();
    if (argc > 1 && !strcmp(argv[1], "attn_waves"))
        return attn_waves();
    if (argc > 1 && !strcmp(argv[1], "linear"))
        return linear();
    if (argc > 1 && !strcmp(argv[1], "params"))
        return params();
    static const struct { const char *name; int (*fn)(void); } more[] = {
        {"rate", rate}, {"pred_se", pred_se}, {"memory", memory}, {"collectives", collectives},
        {"gemm_passes", gemm_passes}, {"gemm_acc", gemm_acc}, {"dropout_draws", dropout_draws}};
    for (size_t i = 0; argc > 1 && i < sizeof more / sizeof more[0]; i++)
        if (!strcmp(argv[1], more[i].name))
            return more[i].fn();
    fprintf(stderr, "usage: test_fit saturating|gemm_waves|attn_waves|linear|params|rate|pred_se|memory|collectives|"
                    "gemm_passes|gemm_acc|dropout_draws\n");
    return 2;
}
