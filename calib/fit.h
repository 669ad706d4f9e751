/* calib/fit: the least-squares fits that turn benchmark samples into
 * profile numbers, each with its goodness of fit.
 *   saturating: eff(x) = e_max * x / (x + x_half), nonlinear least squares
 *               (GSL multifit_nlinear, trust region), for GEMM, attention and
 *               memory-bound efficiency against FLOPs or bytes;
 *   linear:     t = a + b * x (gsl_fit_linear), the alpha-beta model of a
 *               collective with x = bytes * bus factor: a is the latency,
 *               1 / b the bus bandwidth;
 *   one scale:  any model y_i(k) of one parameter, nonlinear least squares
 *               (GSL multifit_nlinear, finite-difference Jacobian): the
 *               compute-efficiency scale that `megasim reproduce` fits on
 *               MegaScale's Table 3. */
#ifndef CALIB_FIT_H
#define CALIB_FIT_H

typedef struct {
    double e_max, x_half;       /* fitted parameters */
    double se_e_max, se_x_half; /* standard errors (covariance x residual variance) */
    double r2, rms;             /* R^2 and root-mean-square residual */
    int n, ok;                  /* samples used; ok = converged */
} calib_satfit_t;

typedef struct {
    double a, b;                /* t = a + b x */
    double se_a, se_b;
    double r2, rms;
    int n, ok;                  /* ok = at least 3 samples and b > 0 */
} calib_linfit_t;

/* Fits y = e_max x / (x + x_half) to n samples (x > 0). resid (may be
 * NULL) receives y - fit for each sample. */
calib_satfit_t calib_fit_saturating(const double *x, const double *y, int n, double *resid);
double calib_saturating_eval(const calib_satfit_t *f, double x);

/* Fits y = a + b x to the samples whose x lies in [x_lo, x_hi]; resid (may
 * be NULL, n long) receives y - fit for those and 0 for the others. */
calib_linfit_t calib_fit_linear(const double *x, const double *y, int n, double x_lo, double x_hi,
                                double *resid);

typedef struct {
    double k, se_k;             /* fitted parameter and its standard error */
    double rms, mean_abs;       /* of the residuals y_i(k) - target_i at the fit */
    int n, ok;                  /* ok = converged to a finite k inside the bounds */
} calib_fit1_t;

/* Model of sample i at parameter k. Returns NAN when k cannot be evaluated. */
typedef double (*calib_model1_fn)(double k, int i, void *ctx);

/* Fits k so that model(k, i) matches target[i] over the n samples in the
 * least-squares sense, starting at k0 and kept within [k_lo, k_hi]; resid
 * (may be NULL, n long) receives model - target at the fit. */
calib_fit1_t calib_fit_one(calib_model1_fn model, void *ctx, const double *target, int n, double k0, double k_lo,
                           double k_hi, double *resid);

#endif
