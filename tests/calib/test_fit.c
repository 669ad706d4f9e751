/* test_fit: the calibration fits recover known parameters from synthetic
 * samples with noise (gsl_rng, fixed seed, so every run sees the same
 * noise). Usage: test_fit saturating | linear | one. */
#include "calib/fit.h"
#include "tests/check.h"

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
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
    return check_done("calib_fit_linear");
}

/* One parameter through a model like the closed form's MFU: row i does
 * W_i of work in fixed_i + compute_i / k seconds, MFU_i = W_i / that. Nine
 * rows (Table 3's count) with the compute share 80-97% of the time, true
 * k = 0.9, 1% relative noise on each MFU. */
typedef struct {
    double w[9], fixed[9], compute[9];
} one_ctx_t;

static double one_model(double k, int i, void *ctx)
{
    const one_ctx_t *c = ctx;
    return c->w[i] / (c->fixed[i] + c->compute[i] / k);
}

static int one(void)
{
    const double k_true = 0.9;
    one_ctx_t c;
    double y[9], res[9];
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, SEED);
    for (int i = 0; i < 9; i++) {
        c.compute[i] = 10.0 + i, c.fixed[i] = 0.3 + 0.25 * i, c.w[i] = 60.0 * (c.compute[i] + c.fixed[i]);
        y[i] = one_model(k_true, i, &c) * (1 + gsl_ran_gaussian(rng, 0.01));
    }
    gsl_rng_free(rng);
    const char *src = "synthetic MFU_i = W_i / (fixed_i + compute_i / k), k = 0.9, 1% noise, seed 20240424";
    calib_fit1_t f = calib_fit_one(one_model, &c, y, 9, 1.0, 0.3, 1.5, res);
    check_true("fit converged", f.ok, "gsl_multifit_nlinear trust region, finite-difference Jacobian");
    check_rel("k", k_true, f.k, 0.02, src);
    printf("     fit: k %.4f +- %.4f, rms %.4f, mean |residual| %.4f\n", f.k, f.se_k, f.rms, f.mean_abs);
    check_true("k within 3 standard errors", fabs(f.k - k_true) < 3 * f.se_k, "the standard error is honest");
    check_true("rms residual ~ the 1% noise (0.2..1.2 points of ~55)", f.rms > 0.1 && f.rms < 1.2,
               "1% of MFU values near 50-60");
    double exact[9];
    for (int i = 0; i < 9; i++)
        exact[i] = one_model(0.7, i, &c);
    calib_fit1_t g = calib_fit_one(one_model, &c, exact, 9, 1.0, 0.3, 1.5, NULL);
    check_rel("noise-free k = 0.7 recovered", 0.7, g.k, 1e-6, "same model, no noise");
    calib_fit1_t h = calib_fit_one(one_model, &c, exact, 1, 1.0, 0.3, 1.5, NULL);
    check_true("one sample is refused (ok = 0)", !h.ok, "a fit needs at least 2 samples");
    return check_done("calib_fit_one");
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "saturating"))
        return saturating();
    if (argc > 1 && !strcmp(argv[1], "linear"))
        return linear();
    if (argc > 1 && !strcmp(argv[1], "one"))
        return one();
    fprintf(stderr, "usage: test_fit saturating|linear|one\n");
    return 2;
}
