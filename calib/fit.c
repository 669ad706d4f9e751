/* calib/fit: saturating, alpha-beta and bounded few-parameter fits (see fit.h). */
#include "calib/fit.h"
#include "model/cost.h"

#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_fit.h>
#include <gsl/gsl_multifit_nlinear.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const double *x, *y;
    int n, relative; /* relative: residuals divided by y (each sample's relative error) */
} sat_data_t;

/* Parameters p = (e_max, log10 x_half): the log keeps both of order one,
 * which the trust-region solver needs (x_half spans 1e3..1e12). */
static int sat_f(const gsl_vector *p, void *data, gsl_vector *f)
{
    const sat_data_t *d = data;
    double e = gsl_vector_get(p, 0), h = pow(10, gsl_vector_get(p, 1));
    for (int i = 0; i < d->n; i++)
        gsl_vector_set(f, i, (e * d->x[i] / (d->x[i] + h) - d->y[i]) / (d->relative ? d->y[i] : 1));
    return GSL_SUCCESS;
}

static int sat_df(const gsl_vector *p, void *data, gsl_matrix *J)
{
    const sat_data_t *d = data;
    double e = gsl_vector_get(p, 0), h = pow(10, gsl_vector_get(p, 1));
    for (int i = 0; i < d->n; i++) {
        double s = d->x[i] + h, wt = d->relative ? 1 / d->y[i] : 1;
        gsl_matrix_set(J, i, 0, wt * d->x[i] / s);
        gsl_matrix_set(J, i, 1, -wt * e * d->x[i] / (s * s) * h * log(10)); /* d/dlog10(h) */
    }
    return GSL_SUCCESS;
}

double calib_saturating_eval(const calib_satfit_t *f, double x)
{
    return f->e_max * x / (x + f->x_half);
}

/* R^2 = 1 - SS_res / SS_tot over the given residuals. */
static double r_squared(const double *y, const double *resid, int n, double *rms)
{
    double mean = 0, ss_tot = 0, ss_res = 0;
    for (int i = 0; i < n; i++)
        mean += y[i] / n;
    for (int i = 0; i < n; i++)
        ss_tot += (y[i] - mean) * (y[i] - mean), ss_res += resid[i] * resid[i];
    *rms = n ? sqrt(ss_res / n) : 0;
    /* Constant samples (to rounding: a mean of n equal values is not exact)
     * leave nothing to explain: R^2 is 1 if the fit meets them, else 0. */
    double tiny = 1e-12 * mean * mean * n;
    if (ss_tot <= tiny)
        return ss_res <= tiny ? 1 : 0;
    return 1 - ss_res / ss_tot;
}

/* Starting point: e_max the largest sample, x_half the x where the
 * samples first reach half of it. */
static void sat_guess(const double *x, const double *y, int n, double *e0, double *lh0)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        best = y[i] > y[best] ? i : best;
    *e0 = y[best], *lh0 = log10(x[best]);
    double xmin = x[best];
    for (int i = 0; i < n; i++)
        if (y[i] >= 0.5 * y[best] && x[i] < xmin)
            xmin = x[i];
    *lh0 = log10(xmin);
}

static calib_satfit_t fit_saturating(const double *x, const double *y, int n, int relative, double *resid)
{
    calib_satfit_t r = {0};
    r.n = n;
    if (n < 3)
        return r;
    for (int i = 0; relative && i < n; i++)
        if (!(y[i] > 0))
            return r;
    sat_data_t d = {x, y, n, relative};
    gsl_multifit_nlinear_fdf fdf = {sat_f, sat_df, NULL, (size_t)n, 2, &d, 0, 0, 0};
    gsl_multifit_nlinear_parameters par = gsl_multifit_nlinear_default_parameters();
    gsl_multifit_nlinear_workspace *w =
        gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &par, (size_t)n, 2);
    double e0, lh0;
    sat_guess(x, y, n, &e0, &lh0);
    gsl_vector *p0 = gsl_vector_alloc(2);
    gsl_vector_set(p0, 0, e0), gsl_vector_set(p0, 1, lh0);
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    int info, st = gsl_multifit_nlinear_init(p0, &fdf, w);
    if (st == GSL_SUCCESS)
        st = gsl_multifit_nlinear_driver(200, 1e-10, 1e-10, 1e-10, NULL, NULL, &info, w);
    gsl_vector *p = gsl_multifit_nlinear_position(w), *f = gsl_multifit_nlinear_residual(w);
    r.e_max = gsl_vector_get(p, 0), r.x_half = pow(10, gsl_vector_get(p, 1));
    r.ok = st == GSL_SUCCESS && isfinite(r.e_max) && r.e_max > 0;
    double *res = resid ? resid : malloc(sizeof(double) * n), chi2;
    for (int i = 0; i < n; i++)
        res[i] = y[i] - calib_saturating_eval(&r, x[i]);
    gsl_blas_ddot(f, f, &chi2);
    if (n > 2) { /* covariance of (e, log10 h) scaled by the residual variance */
        gsl_matrix *cov = gsl_matrix_alloc(2, 2);
        gsl_multifit_nlinear_covar(gsl_multifit_nlinear_jac(w), 0.0, cov);
        double s2 = chi2 / (n - 2);
        r.se_e_max = sqrt(s2 * gsl_matrix_get(cov, 0, 0));
        r.se_x_half = r.x_half * log(10) * sqrt(s2 * gsl_matrix_get(cov, 1, 1));
        gsl_matrix_free(cov);
    }
    r.r2 = r_squared(y, res, n, &r.rms);
    gsl_set_error_handler(old);
    if (!resid)
        free(res);
    gsl_vector_free(p0);
    gsl_multifit_nlinear_free(w);
    return r;
}

calib_satfit_t calib_fit_saturating(const double *x, const double *y, int n, double *resid)
{
    return fit_saturating(x, y, n, 0, resid);
}

/* The same, least squares on the relative error (y > 0): each sample
 * weighs alike however small, as a kernel's predicted time does. */
static calib_satfit_t calib_fit_saturating_rel(const double *x, const double *y, int n, double *resid)
{
    return fit_saturating(x, y, n, 1, resid);
}

/* The relative rms error of the model curve x wave against y; fills
 * model[] (count long). */
static double wave_model(const calib_satfit_t *f, const double *flops, const double *we, const double *y, int count,
                         double *model)
{
    double ss = 0;
    for (int i = 0; i < count; i++) {
        model[i] = fmin(1, calib_saturating_eval(f, flops[i])) * we[i];
        ss += (model[i] / y[i] - 1) * (model[i] / y[i] - 1);
    }
    return sqrt(ss / count);
}

/* The candidates' wave efficiencies, candidate c's for sample i at
 * we[c * count + i]: each candidate's curve is fitted to the samples
 * divided by them, and the one with the smallest relative error wins. */
static calib_wavefit_t fit_waves(const double *flops, const double *y, int count, const double *we,
                                 const int (*tiles)[2], int ncand, double *wave, double *resid)
{
    calib_wavefit_t g = {0};
    g.ncand = ncand < CALIB_MAX_TILES ? ncand : CALIB_MAX_TILES;
    g.rel_rms = INFINITY;
    double *yt = malloc(sizeof(double) * (count + 1)), *model = malloc(sizeof(double) * (count + 1));
    const double *best_we = NULL;
    for (int c = 0; c < g.ncand; c++) {
        const double *wc = we + (size_t)c * count;
        for (int i = 0; i < count; i++)
            yt[i] = y[i] / wc[i];
        calib_satfit_t f = calib_fit_saturating_rel(flops, yt, count, NULL);
        double e = f.ok ? wave_model(&f, flops, wc, y, count, model) : NAN;
        g.cand_rel_rms[c] = e, g.cand_tile[c][0] = tiles[c][0], g.cand_tile[c][1] = tiles[c][1];
        if (f.ok && e < g.rel_rms)
            g.rel_rms = e, g.sat = f, g.tile_m = tiles[c][0], g.tile_n = tiles[c][1], g.ok = 1, best_we = wc;
    }
    if (g.ok) {
        wave_model(&g.sat, flops, best_we, y, count, model);
        for (int i = 0; i < count; i++)
            model[i] = y[i] - model[i]; /* the residuals */
        g.sat.r2 = r_squared(y, model, count, &g.sat.rms);
        if (resid)
            memcpy(resid, model, sizeof(double) * count);
        if (wave)
            memcpy(wave, best_we, sizeof(double) * count);
    }
    free(yt), free(model);
    return g;
}

calib_wavefit_t calib_fit_gemm_waves(const double *m, const double *n, const double *flops, const double *y,
                                     int count, int sms, const int (*tiles)[2], int ntiles, double *wave,
                                     double *resid)
{
    int nc = ntiles < CALIB_MAX_TILES ? ntiles : CALIB_MAX_TILES;
    double *we = malloc(sizeof(double) * ((size_t)nc * count + 1));
    for (int c = 0; c < nc; c++)
        for (int i = 0; i < count; i++)
            we[(size_t)c * count + i] = cost_gemm_wave_eff(tiles[c][0], tiles[c][1], sms, m[i], n[i], 1);
    calib_wavefit_t g = fit_waves(flops, y, count, we, tiles, nc, wave, resid);
    free(we);
    return g;
}

calib_wavefit_t calib_fit_attn_waves(const double *bh, const double *seq, const double *window, int bwd,
                                     const double *flops, const double *y, int count, int sms, const int *blocks,
                                     int nblocks, double *wave, double *resid)
{
    int nc = nblocks < CALIB_MAX_TILES ? nblocks : CALIB_MAX_TILES, tiles[CALIB_MAX_TILES][2];
    double *we = malloc(sizeof(double) * ((size_t)nc * count + 1));
    for (int c = 0; c < nc; c++) {
        tiles[c][0] = blocks[c], tiles[c][1] = 0;
        for (int i = 0; i < count; i++)
            we[(size_t)c * count + i] = cost_attn_wave_eff(blocks[c], sms, bh[i], seq[i], window[i], bwd);
    }
    calib_wavefit_t g = fit_waves(flops, y, count, we, (const int (*)[2])tiles, nc, wave, resid);
    free(we);
    return g;
}

calib_linfit_t calib_fit_linear(const double *x, const double *y, int n, double x_lo, double x_hi,
                                double *resid)
{
    calib_linfit_t r = {0};
    double *xs = malloc(sizeof(double) * (n + 1)), *ys = malloc(sizeof(double) * (n + 1));
    double *rs = malloc(sizeof(double) * (n + 1));
    int m = 0;
    for (int i = 0; i < n; i++)
        if (x[i] >= x_lo && x[i] <= x_hi)
            xs[m] = x[i], ys[m++] = y[i];
    r.n = m;
    if (m >= 3) {
        double c00, c01, c11, ss;
        gsl_fit_linear(xs, 1, ys, 1, (size_t)m, &r.a, &r.b, &c00, &c01, &c11, &ss);
        r.se_a = sqrt(c00), r.se_b = sqrt(c11);
        for (int i = 0; i < m; i++)
            rs[i] = ys[i] - (r.a + r.b * xs[i]);
        r.r2 = r_squared(ys, rs, m, &r.rms);
        r.ok = r.b > 0 && isfinite(r.a);
    }
    for (int i = 0; resid && i < n; i++)
        resid[i] = x[i] >= x_lo && x[i] <= x_hi ? y[i] - (r.a + r.b * x[i]) : 0;
    free(xs), free(ys), free(rs);
    return r;
}

calib_linfit_t calib_fit_linear_bounded(const double *x, const double *y, int n, double x_lo, double x_hi,
                                        double a_max, double *resid)
{
    calib_linfit_t r = {0}, free_fit = calib_fit_linear(x, y, n, x_lo, x_hi, NULL);
    double a = fmin(fmax(free_fit.a, 0), fmax(a_max, 0));
    double *xs = malloc(sizeof(double) * (n + 1)), *ys = malloc(sizeof(double) * (n + 1));
    double *rs = malloc(sizeof(double) * (n + 1));
    int m = 0;
    for (int i = 0; i < n; i++)
        if (x[i] >= x_lo && x[i] <= x_hi)
            xs[m] = x[i], ys[m++] = y[i] - a;
    r.a = a, r.n = m;
    double cov, ss;
    if (m >= 3 && gsl_fit_mul(xs, 1, ys, 1, (size_t)m, &r.b, &cov, &ss) == GSL_SUCCESS) {
        r.se_b = sqrt(cov), r.ok = r.b > 0;
        for (int i = 0; i < m; i++)
            rs[i] = ys[i] - r.b * xs[i];
        r.r2 = r_squared(ys, rs, m, &r.rms);
    }
    for (int i = 0; resid && i < n; i++)
        resid[i] = x[i] >= x_lo && x[i] <= x_hi && r.ok ? y[i] - a - r.b * x[i] : 0;
    free(xs), free(ys), free(rs);
    return r;
}

/* With r_i = x_i / y_i the sample's rate, minimising sum (b x_i / y_i - 1)^2
 * gives b = sum r_i / sum r_i^2. */
calib_linfit_t calib_fit_rate(const double *x, const double *y, int n, double *resid)
{
    calib_linfit_t f = {0};
    double s1 = 0, s2 = 0, var = 0;
    for (int i = 0; i < n; i++) {
        if (!(x[i] > 0 && y[i] > 0))
            return f;
        s1 += x[i] / y[i], s2 += x[i] * x[i] / (y[i] * y[i]);
    }
    if (n < 3)
        return f;
    f.b = s1 / s2, f.n = n, f.ok = 1;
    double *res = resid ? resid : malloc(sizeof(double) * n);
    for (int i = 0; i < n; i++) {
        double dr = x[i] / y[i] - 1 / f.b;
        res[i] = y[i] - x[i] * f.b, var += dr * dr;
    }
    f.se_b = f.b * f.b * sqrt(var / (n - 1) / n); /* the rates' standard error, d(1/r) = dr / r^2 */
    f.r2 = r_squared(y, res, n, &f.rms);
    if (!resid)
        free(res);
    return f;
}

/* ---- a few bounded parameters, any model ------------------------------- */

typedef struct {
    calib_model_fn model;
    void *ctx;
    const double *target, *lo, *hi;
    int n, np;
} many_data_t;

/* Parameter j is lo + (hi - lo) (1 + tanh u_j) / 2, so the solver's free
 * u never leaves [lo, hi] (models are often undefined outside). */
static void many_params(const many_data_t *d, const gsl_vector *u, double *p)
{
    for (int j = 0; j < d->np; j++)
        p[j] = d->lo[j] + (d->hi[j] - d->lo[j]) * 0.5 * (1 + tanh(gsl_vector_get(u, j)));
}

static int many_f(const gsl_vector *u, void *data, gsl_vector *f)
{
    const many_data_t *d = data;
    double p[CALIB_FIT_MAX_PARAMS];
    many_params(d, u, p);
    for (int i = 0; i < d->n; i++) {
        double y = d->model(p, i, d->ctx);
        if (!isfinite(y))
            return GSL_EDOM;
        gsl_vector_set(f, i, y - d->target[i]);
    }
    return GSL_SUCCESS;
}

/* Standard errors from the Jacobian in the parameters themselves (central
 * differences, not in u): cov = s^2 (J^T J)^-1, s^2 = chi2 / (n - np). */
static void many_se(const many_data_t *d, calib_fit_t *r, double chi2)
{
    gsl_matrix *J = gsl_matrix_alloc((size_t)d->n, (size_t)d->np);
    gsl_matrix *cov = gsl_matrix_alloc((size_t)d->np, (size_t)d->np);
    for (int j = 0; j < d->np; j++) {
        double q[CALIB_FIT_MAX_PARAMS], h = 1e-4 * (d->hi[j] - d->lo[j]);
        memcpy(q, r->p, sizeof q);
        for (int i = 0; i < d->n; i++) {
            q[j] = r->p[j] + h;
            double up = d->model(q, i, d->ctx);
            q[j] = r->p[j] - h;
            gsl_matrix_set(J, (size_t)i, (size_t)j, (up - d->model(q, i, d->ctx)) / (2 * h));
        }
    }
    int dof = d->n - d->np;
    int st = gsl_multifit_nlinear_covar(J, 0.0, cov);
    for (int j = 0; j < d->np; j++) {
        double v = gsl_matrix_get(cov, (size_t)j, (size_t)j);
        r->se[j] = st == GSL_SUCCESS && dof > 0 && v > 0 ? sqrt(chi2 / dof * v) : NAN;
        for (int k = 0; k < d->np; k++)
            r->cov[j][k] = st == GSL_SUCCESS && dof > 0 ? chi2 / dof * gsl_matrix_get(cov, (size_t)j, (size_t)k) : NAN;
    }
    gsl_matrix_free(J);
    gsl_matrix_free(cov);
}

calib_fit_t calib_fit_params(calib_model_fn model, void *ctx, const double *target, int n, int np, const double *p0,
                             const double *lo, const double *hi, double *resid)
{
    calib_fit_t r = {0};
    r.n = n, r.np = np;
    for (int j = 0; j < CALIB_FIT_MAX_PARAMS; j++)
        for (int k = 0; k < CALIB_FIT_MAX_PARAMS; k++)
            r.cov[j][k] = NAN;
    if (np < 1 || np > CALIB_FIT_MAX_PARAMS || n <= np)
        return r;
    for (int j = 0; j < np; j++)
        if (!(lo[j] < p0[j] && p0[j] < hi[j]))
            return r;
    many_data_t d = {model, ctx, target, lo, hi, n, np};
    gsl_multifit_nlinear_fdf fdf = {many_f, NULL, NULL, (size_t)n, (size_t)np, &d, 0, 0, 0};
    gsl_multifit_nlinear_parameters par = gsl_multifit_nlinear_default_parameters();
    gsl_multifit_nlinear_workspace *w = gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &par, (size_t)n,
                                                                   (size_t)np);
    gsl_vector *u0 = gsl_vector_alloc((size_t)np);
    for (int j = 0; j < np; j++)
        gsl_vector_set(u0, (size_t)j, atanh(2 * (p0[j] - lo[j]) / (hi[j] - lo[j]) - 1));
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    int info, st = gsl_multifit_nlinear_init(u0, &fdf, w);
    if (st == GSL_SUCCESS)
        st = gsl_multifit_nlinear_driver(200, 1e-8, 1e-8, 1e-8, NULL, NULL, &info, w);
    many_params(&d, gsl_multifit_nlinear_position(w), r.p);
    gsl_vector *f = gsl_multifit_nlinear_residual(w);
    double chi2 = 0;
    for (int i = 0; i < n; i++) {
        double e = gsl_vector_get(f, (size_t)i);
        chi2 += e * e, r.mean_abs += fabs(e) / n;
        if (resid)
            resid[i] = e;
    }
    r.rms = sqrt(chi2 / n);
    r.ok = st == GSL_SUCCESS;
    for (int j = 0; j < np; j++)
        r.ok = r.ok && isfinite(r.p[j]) && r.p[j] > lo[j] && r.p[j] < hi[j];
    if (r.ok)
        many_se(&d, &r, chi2);
    gsl_set_error_handler(old);
    gsl_vector_free(u0);
    gsl_multifit_nlinear_free(w);
    return r;
}

double calib_fit_pred_se(const calib_fit_t *f, calib_model_fn model, void *ctx, int i, const double *lo,
                         const double *hi)
{
    if (!f->ok)
        return NAN;
    double g[CALIB_FIT_MAX_PARAMS], q[CALIB_FIT_MAX_PARAMS], var = 0;
    memcpy(q, f->p, sizeof q);
    for (int j = 0; j < f->np; j++) {
        double h = 1e-4 * (hi[j] - lo[j]);
        q[j] = f->p[j] + h;
        double up = model(q, i, ctx);
        q[j] = f->p[j] - h;
        g[j] = (up - model(q, i, ctx)) / (2 * h);
        q[j] = f->p[j];
    }
    for (int j = 0; j < f->np; j++)
        for (int k = 0; k < f->np; k++)
            var += g[j] * f->cov[j][k] * g[k];
    return isfinite(var) && var >= 0 ? sqrt(var) : NAN;
}
