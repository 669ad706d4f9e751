/* calib/fit: the least-squares fits that turn benchmark samples into
 * profile numbers, each with its goodness of fit.
 *   saturating: eff(x) = e_max * x / (x + x_half), nonlinear least squares
 *               (GSL multifit_nlinear, trust region), for GEMM, attention and
 *               memory-bound efficiency against FLOPs or bytes;
 *   GEMM waves: eff = min(1, saturating(FLOPs)) x wave(tile, m, n), the
 *               model's GEMM efficiency (model/cost.c), with the tile chosen
 *               among candidates by the smallest relative error;
 *   linear:     t = a + b * x (gsl_fit_linear), the alpha-beta model of a
 *               collective with x = bytes * bus factor: a is the latency,
 *               1 / b the bus bandwidth; of a DRAM-resident copy: 1 / b
 *               the memory bandwidth;
 *   rate:       t = b * x through the origin on the relative error, a
 *               memory-bound kernel's math rate 1 / b;
 *   few params: any model y_i(p) of a few bounded parameters, nonlinear
 *               least squares (GSL multifit_nlinear, finite-difference
 *               Jacobian): the compute-efficiency scale and the host terms
 *               that `megasim reproduce` fits on MegaScale's Table 3. */
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

#define CALIB_MAX_TILES 8

/* An efficiency curve fitted together with the tile whose wave
 * quantisation (model/cost.c) best explains the samples. */
typedef struct {
    int tile_m, tile_n;   /* the chosen candidate: a GEMM's output tile, or an
                             attention kernel's block rows (tile_n = 0) */
    calib_satfit_t sat;   /* its curve; r2 and rms are those of the whole
                             model (curve x wave) against the samples */
    double rel_rms;       /* sqrt(mean((model_i / y_i - 1)^2)): the relative
                             error of a predicted kernel time */
    int cand_tile[CALIB_MAX_TILES][2];    /* the candidates, */
    double cand_rel_rms[CALIB_MAX_TILES]; /* and each one's error (NAN if its fit failed) */
    int ncand, ok;
} calib_wavefit_t;

/* GEMM efficiency as the cost model sees it: sample i, an m_i x n_i output
 * of flops_i FLOPs measured at efficiency y_i (fraction of peak), is
 * modelled as min(1, e_max F / (F + F_half)) x cost_gemm_wave_eff(tile,
 * sms, m_i, n_i, 1). For each candidate tile the samples divided by their
 * wave efficiency are fitted by the saturating model (on the relative
 * error, calib_fit_saturating_rel); the candidate whose
 * model has the smallest relative rms error wins (the earlier one on a
 * tie). wave and resid (may be NULL, count long) receive the winner's wave
 * efficiency and y - model per sample. */
calib_wavefit_t calib_fit_gemm_waves(const double *m, const double *n, const double *flops, const double *y,
                                     int count, int sms, const int (*tiles)[2], int ntiles, double *wave,
                                     double *resid);

/* The same for flash attention (forward or backward): sample i runs bh_i
 * heads of seq_i queries seeing at most window_i keys (0: causal), and its
 * wave efficiency is cost_attn_wave_eff(block, sms, bh_i, seq_i, window_i,
 * bwd) for each candidate block of rows. */
calib_wavefit_t calib_fit_attn_waves(const double *bh, const double *seq, const double *window, int bwd,
                                     const double *flops, const double *y, int count, int sms, const int *blocks,
                                     int nblocks, double *wave, double *resid);

/* Fits y = a + b x to the samples whose x lies in [x_lo, x_hi]; resid (may
 * be NULL, n long) receives y - fit for those and 0 for the others. */
calib_linfit_t calib_fit_linear(const double *x, const double *y, int n, double x_lo, double x_hi,
                                double *resid);

/* The same with the intercept held in [0, max(a_max, 0)]: the least-squares
 * error is convex in a, so the free intercept clamped to the interval is
 * the bounded optimum; b is then fitted through the origin of y - a
 * (gsl_fit_mul). se_a is 0. */
calib_linfit_t calib_fit_linear_bounded(const double *x, const double *y, int n, double x_lo, double x_hi,
                                        double a_max, double *resid);

/* y = b x through the origin (a = 0), least squares on the relative error
 * (every sample weighs alike however small: a kernel's time at each size
 * the model meets): a math rate, time_us against elements. ok = at least 3
 * samples with x, y > 0; se_b from the spread of the samples' rates; r2 and
 * rms of y - b x. resid (n long) receives y - b x. */
calib_linfit_t calib_fit_rate(const double *x, const double *y, int n, double *resid);

#define CALIB_FIT_MAX_PARAMS 8

typedef struct {
    double p[CALIB_FIT_MAX_PARAMS];  /* fitted parameters */
    double se[CALIB_FIT_MAX_PARAMS]; /* their standard errors (NAN if singular) */
    double cov[CALIB_FIT_MAX_PARAMS][CALIB_FIT_MAX_PARAMS]; /* their covariance, s^2 (J^T J)^-1 (NAN if singular) */
    double rms, mean_abs;           /* of the residuals model - target at the fit */
    int n, np, ok;                  /* ok = converged, every parameter finite and
                                       strictly inside its bounds */
} calib_fit_t;

/* Model of sample i at parameters p. Returns NAN when p cannot be evaluated. */
typedef double (*calib_model_fn)(const double *p, int i, void *ctx);

/* Fits np parameters (1..CALIB_FIT_MAX_PARAMS) so that model(p, i) matches
 * target[i] over n > np samples in the least-squares sense, starting at p0
 * and keeping each p[j] within (lo[j], hi[j]); resid (may be NULL, n long)
 * receives model - target at the fit. Standard errors come from the
 * Jacobian at the fit: cov = s^2 (J^T J)^-1, s^2 = chi2 / (n - np). */
calib_fit_t calib_fit_params(calib_model_fn model, void *ctx, const double *target, int n, int np, const double *p0,
                             const double *lo, const double *hi, double *resid);

/* Standard error of another quantity computed from the fitted parameters,
 * model(p, i, ctx) (a prediction), by the delta method: sqrt(g^T cov g),
 * g its gradient at the fit by central differences of 1e-4 (hi - lo) per
 * parameter. It carries only the parameters' uncertainty (the fit's
 * residual scatter through the covariance), not the model's own error.
 * NAN when the fit has no covariance or the model cannot be evaluated. */
double calib_fit_pred_se(const calib_fit_t *f, calib_model_fn model, void *ctx, int i, const double *lo,
                         const double *hi);

#endif
