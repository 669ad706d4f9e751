/* test_fit: the calibration fits recover known parameters from synthetic
 * samples with noise (gsl_rng, fixed seed, so every run sees the same
 * noise). Usage: test_fit saturating | gemm_waves | attn_waves | linear |
 * params | rate | pred_se. The fits as calibrate runs them, from raw
 * tables to a profile, are in test_fit_all.c. */
#include "calib/calib.h"
#include "calib/fit.h"
#include "calib/profile.h"
#include "kernels/matmul.h"
#include "model/cost.h"
#include "model/workload.h"
#include "tests/calib/fit_grid.h"
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
    static const struct { const char *name; int (*fn)(void); } more[] = {{"rate", rate}, {"pred_se", pred_se}};
    for (size_t i = 0; argc > 1 && i < sizeof more / sizeof more[0]; i++)
        if (!strcmp(argv[1], more[i].name))
            return more[i].fn();
    fprintf(stderr, "usage: test_fit saturating|gemm_waves|attn_waves|linear|params|rate|pred_se\n");
    return 2;
}
