/* calib/profile: the fits and the profile fields they give (see profile.h);
 * the provenance, the report and the files are profile_out.c. */
#define _POSIX_C_SOURCE 200809L /* gethostname */
#include "calib/profile.h"

#include "calib/profile_int.h"
#include "model/cost.h"

#include <gsl/gsl_fit.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- fits ------------------------------------------------------------------ */

calib_fitrec_t *calib_new_fit(calib_result_t *r, const char *name, const char *xn, const char *yn, int n)
{
    if (r->nfits == CALIB_MAX_FITS) { /* a programming error: the table is sized for every fit calib makes */
        fprintf(stderr, "%s:%d: more than CALIB_MAX_FITS (%d) fits; raise it in calib/profile.h\n", __FILE__, __LINE__,
                CALIB_MAX_FITS);
        abort();
    }
    calib_fitrec_t *f = &r->fits[r->nfits++];
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    f->xname = xn, f->yname = yn, f->n = n;
    f->x = calloc(n + 1, sizeof(double)), f->y = calloc(n + 1, sizeof(double));
    f->resid = calloc(n + 1, sizeof(double));
    return f;
}

static double clamp(double v, double lo, double hi) { return v < lo ? lo : v > hi ? hi : v; }

const calib_fitrec_t *calib_find_fit(const calib_result_t *r, const char *name)
{
    for (int i = 0; i < r->nfits; i++)
        if (!strcmp(r->fits[i].name, name))
            return &r->fits[i];
    return NULL;
}

/* y = b x by least squares through the origin over f's samples, weighted
 * by w (gsl_fit_wmul) or not (w NULL, gsl_fit_mul): lin.b, its standard
 * error, R^2 against the mean, rms and the residuals (rms and R^2 from the
 * plain residuals either way); lin.ok with at least 2 samples. */
static void fit_through_origin_w(calib_fitrec_t *f, const double *w)
{
    int k = f->n;
    f->linear = f->slope = 1;
    if (k < 2)
        return;
    double c1, cov11, sumsq, ss = 0, mean = 0;
    if (w)
        gsl_fit_wmul(f->x, 1, w, 1, f->y, 1, k, &c1, &cov11, &sumsq);
    else
        gsl_fit_mul(f->x, 1, f->y, 1, k, &c1, &cov11, &sumsq);
    if (w) {
        sumsq = 0;
        for (int i = 0; i < k; i++)
            sumsq += (f->y[i] - c1 * f->x[i]) * (f->y[i] - c1 * f->x[i]);
    }
    for (int i = 0; i < k; i++)
        mean += f->y[i] / k;
    for (int i = 0; i < k; i++)
        f->resid[i] = f->y[i] - c1 * f->x[i], ss += (f->y[i] - mean) * (f->y[i] - mean);
    f->lin = (calib_linfit_t){.a = 0, .b = c1, .se_a = 0, .se_b = sqrt(cov11), .r2 = ss > 0 ? 1 - sumsq / ss : 0,
                              .rms = sqrt(sumsq / k), .n = k, .ok = 1};
}

void calib_fit_through_origin(calib_fitrec_t *f) { fit_through_origin_w(f, NULL); }

/* The fit sampled at half decades from lo to hi (at most CURVE_MAX points). */
static void sample_curve(curve_t *c, const calib_satfit_t *f, double lo, double hi)
{
    c->n = 0;
    for (double e = log10(lo); e <= log10(hi) + 1e-9 && c->n < CURVE_MAX; e += 0.5) {
        c->x[c->n] = pow(10, e);
        c->y[c->n] = clamp(calib_saturating_eval(f, c->x[c->n]), 1e-4, 1);
        c->n++;
    }
}

/* mem_eff: the saturating model over efficiency samples y = rate / hbm_gbps
 * (bytes over time), at most 1 (a CPU's in-cache copies beat the DRAM
 * bandwidth), against bytes, from the memory kinds lo to hi (the copy on
 * the CPU; LayerNorm, bias+GeLU and AdamW on a GPU). */
static void fit_mem_eff(calib_result_t *r, int lo, int hi)
{
    const calib_table_t *t = &r->mem;
    calib_fitrec_t *f = calib_new_fit(r, "mem_eff", "bytes", "fraction of peak", t->n);
    int m = 0;
    for (int i = 0; i < t->n; i++)
        if (calib_table_get(t, i, 0) >= lo && calib_table_get(t, i, 0) <= hi)
            f->x[m] = calib_table_get(t, i, 1), f->y[m++] = fmin(1, calib_table_get(t, i, 5) / r->copy_gbps);
    f->n = m;
    f->sat = calib_fit_saturating(f->x, f->y, m, f->resid);
}

/* The GEMM tiles whose wave quantisation calibration tries on a GPU
 * (cuBLASLt does not say which it runs; the model takes either
 * orientation and the half tiles, model/cost.c): CUTLASS's sm80/sm90
 * shapes from 64 x 64 to 256 x 128. The CPU's reference GEMM has one, its
 * 4 x 4 register block. */
static const int gpu_tiles[][2] = {{64, 64}, {128, 64}, {128, 128}, {256, 128}};
static const int cpu_tiles[][2] = {{4, 4}};

/* The memory fields of the profile calib_make_profile will write (hbm_gbps,
 * mem_eff, kernel_gap_us; attn_block_k 1 on a CPU, 0 on a GPU), once
 * fit_hbm and fit_memory_bound have run: what the fits of compute kernels
 * need to take a memory-bound part of a sample off at the model's price
 * (cost_gemm_acc_s, cost_attn_dkv_sum_s). gemm_acc_exposed = 1: the whole
 * accumulation. One static copy, rewritten by each call (the fits run on
 * one thread). */
const hw_t *calib_mem_profile(const calib_result_t *r)
{
    static hw_t mem;
    memset(&mem, 0, sizeof mem);
    const calib_fitrec_t *mf = calib_find_fit(r, "mem_eff");
    mem.gpu.hbm_gbps = r->copy_gbps, mem.gpu.gemm_acc_exposed = 1, mem.gpu.kernel_gap_us = r->gap_us;
    mem.gpu.attn_block_k = r->device ? 0 : 1;
    if (mf && mf->sat.ok)
        sample_curve(&mem.gpu.mem_eff, &mf->sat, 1e3, 1e10);
    else
        mem.gpu.mem_eff.n = 1, mem.gpu.mem_eff.x[0] = 1, mem.gpu.mem_eff.y[0] = 1;
    return &mem;
}

/* gemm_eff with wave quantisation (calib_fit_gemm_waves): the curve the
 * model multiplies by the wave efficiency of each GEMM's shape, so that a
 * GEMM measured at a poorly filled last wave lowers neither the curve nor,
 * a second time, its own prediction. A weight-gradient sample (pass 2)
 * accumulates into fp32 and the model adds gemm_acc_exposed x
 * cost_gemm_acc_s to the product (model/cost.h), so three steps: the curve
 * over the other passes; the exposed fraction ("gemm_acc": least squares
 * through the origin, gsl_fit_mul, of each pass-2 sample's time beyond that
 * curve against its accumulation's memory time, on the profile's hbm_gbps
 * and mem_eff, which fit_hbm and fit_memory_bound make first), held in
 * [0, 1]; then the curve over every pass, pass 2 less that fraction of the
 * memory time. On an H100 (2026-11-26) the fraction came out 0.76 +- 0.03.
 * On a CPU the input and weight gradients also transpose operands before
 * they multiply (kern_gemm_ref packs them to read both along K): the
 * curve of step 1 takes the forward alone, and in place of the
 * accumulation (which the CPU's register tiles keep) each backward
 * sample's time beyond it is fitted against the elements it transposes
 * (cost_gemm_pack_s: "gemm_pack", through the origin on the relative
 * error, so the job's small layers weigh as much as GPT-2's large ones:
 * 1.0-1.6 ns an element for transposes that stay in cache, 2-8 ns for
 * multi-MB weights on this VM, 2026-11-29); step 3 takes that off. */
static void fit_gemm(calib_result_t *r)
{
    const calib_table_t *t = &r->gemm;
    int sms = r->device ? r->gpu.sm_count : r->ncores;
    const int(*tiles)[2] = r->device ? gpu_tiles : cpu_tiles;
    int ntiles = r->device ? (int)(sizeof gpu_tiles / sizeof gpu_tiles[0]) : (int)(sizeof cpu_tiles / sizeof cpu_tiles[0]);
    const hw_t *mem = calib_mem_profile(r);
    double *m = calloc(t->n + 1, sizeof(double)), *n = calloc(t->n + 1, sizeof(double));
    double *fl = calloc(t->n + 1, sizeof(double)), *y = calloc(t->n + 1, sizeof(double));
    double *acc = calloc(t->n + 1, sizeof(double)), *time_s = calloc(t->n + 1, sizeof(double));
    double *pack = calloc(t->n + 1, sizeof(double));
    hw_t one_ns = {.gpu.gemm_pack_ns = 1}; /* cost_gemm_pack_s at 1 ns an element */
    int k = 0, n2 = 0;
    for (int i = 0; i < t->n; i++) { /* step 1: the passes without an accumulation (a CPU: or a transpose) */
        int pass = (int)calib_table_get(t, i, 9), pass2 = pass == 2;
        double mi = calib_table_get(t, i, 0), ni = calib_table_get(t, i, 1);
        time_s[i] = calib_table_get(t, i, 4);
        acc[i] = pass2 && r->device && r->copy_gbps > 0 ? cost_gemm_acc_s(mem, mi, ni, 1) : 0;
        pack[i] = r->device ? 0 : cost_gemm_pack_s(&one_ns, pass, mi, ni, calib_table_get(t, i, 2), 1);
        n2 += r->device ? pass2 : pack[i] > 0;
        if (!pass2 && pack[i] == 0)
            m[k] = mi, n[k] = ni, fl[k] = calib_table_get(t, i, 3), y[k++] = fmin(1, calib_table_get(t, i, 7) / r->peak_gflops);
    }
    calib_fitrec_t *a = r->device ? calib_new_fit(r, "gemm_acc", "fp32_accumulation_us", "time_beyond_curve_us", n2)
                                  : calib_new_fit(r, "gemm_pack", "elements_transposed", "time_beyond_curve_us", n2);
    a->linear = a->slope = 1;
    a->how = r->device ? "through the origin (gsl_fit_mul): each weight-gradient GEMM's time beyond the other "
                         "passes' curve against its fp32 accumulation's memory time (8 bytes per output element at "
                         "hbm_gbps x mem_eff)"
                       : "through the origin on the relative error (gsl_fit_wmul, weights 1 / time^2): each input- "
                         "and weight-gradient GEMM's time beyond the forward's curve against the elements it "
                         "transposes (the weight; both inputs); the slope in us an element";
    r->gemm_acc_exposed = r->gemm_pack_ns = -1;
    calib_wavefit_t w = k > 2 ? calib_fit_gemm_waves(m, n, fl, y, k, sms, tiles, ntiles, NULL, NULL)
                              : (calib_wavefit_t){0};
    int k2 = 0;
    double *wt = calloc(t->n + 1, sizeof(double));
    for (int i = 0; w.ok && wt && i < t->n; i++)
        if (acc[i] > 0 || pack[i] > 0) {
            double f = calib_table_get(t, i, 3);
            double eff = fmin(1, calib_saturating_eval(&w.sat, f)) *
                         cost_gemm_wave_eff(w.tile_m, w.tile_n, sms, calib_table_get(t, i, 0), calib_table_get(t, i, 1), 1);
            a->x[k2] = r->device ? acc[i] * 1e6 : pack[i] * 1e9, wt[k2] = 1 / (time_s[i] * time_s[i] * 1e12);
            a->y[k2++] = (time_s[i] - f / (eff * r->peak_gflops * 1e9)) * 1e6;
        }
    a->n = k2;
    fit_through_origin_w(a, r->device ? NULL : wt); /* the CPU's on the relative error */
    free(wt);
    if (a->lin.ok && r->device)
        r->gemm_acc_exposed = clamp(a->lin.b, 0, 1);
    else if (a->lin.ok)
        r->gemm_pack_ns = fmax(0, a->lin.b * 1e3);
    calib_fitrec_t *g = calib_new_fit(r, "gemm_eff", "flops", "fraction of peak", t->n);
    g->wave = calloc(t->n + 1, sizeof(double));
    for (int i = 0; i < t->n; i++) { /* step 3: every pass, pass 2 less its exposed accumulation */
        m[i] = calib_table_get(t, i, 0), n[i] = calib_table_get(t, i, 1), g->x[i] = calib_table_get(t, i, 3);
        double ts = time_s[i] - fmax(0, r->gemm_acc_exposed) * acc[i] - fmax(0, r->gemm_pack_ns) * pack[i];
        g->y[i] = ts > 0 ? fmin(1, g->x[i] / ts * 1e-9 / r->peak_gflops) : 1;
    }
    g->wfit = calib_fit_gemm_waves(m, n, g->x, g->y, t->n, sms, tiles, ntiles, g->wave, g->resid);
    g->sat = g->wfit.sat;
    g->sat.ok = g->wfit.ok;
    free(m), free(n), free(fl), free(y), free(acc), free(time_s), free(pack);
}

/* The largest GEMM the curves are sampled to: the GPU's grid reaches
 * 16384^3 GEMMs (8.8e12 FLOPs). */
static double top_flops(const calib_result_t *r) { return r->device ? 1e13 : 1e12; }

void calib_gemm_fields(const calib_result_t *r, hw_gpu_t *g)
{
    const calib_fitrec_t *gf = calib_find_fit(r, "gemm_eff");
    g->sm_count = r->device ? r->gpu.sm_count : r->ncores;
    if (!r->device) /* kern_gemm_ref's 4 x 4 register block */
        g->gemm_tile_m = cpu_tiles[0][0], g->gemm_tile_n = cpu_tiles[0][1];
    else if (gf->wfit.ok) /* the tile whose waves explain the samples best */
        g->gemm_tile_m = gf->wfit.tile_m, g->gemm_tile_n = gf->wfit.tile_n;
    sample_curve(&g->gemm_eff, &gf->sat, 1e4, top_flops(r));
}

static double col_max(const calib_table_t *t, int col, int sel, double want)
{
    double best = 0;
    for (int i = 0; i < t->n; i++)
        if (sel < 0 || calib_table_get(t, i, sel) == want)
            best = fmax(best, calib_table_get(t, i, col));
    return best;
}

/* The copy rate at the largest size measured: the stand-in for the memory
 * bandwidth when the hbm_bw fit has too few DRAM-resident sizes. */
static double largest_copy_gbps(const calib_table_t *t)
{
    double bytes = -1, gbps = 0;
    for (int i = 0; i < t->n; i++)
        if (calib_table_get(t, i, 0) == 0 && calib_table_get(t, i, 1) > bytes)
            bytes = calib_table_get(t, i, 1), gbps = calib_table_get(t, i, 5);
    return gbps;
}

/* Alpha-beta of collective c over sizes [lo, hi]: time_us = a + b x with
 * x = size x bus factor, so a is the latency (us) and 1e-3 / b the bus
 * bandwidth (GB/s). */
/* One collective's alpha-beta fit over the sizes in [lo, hi]. With alpha_us
 * NAN both terms are fitted (the small regime: latency and a bandwidth).
 * Otherwise (the large regime) the latency is held in [0, alpha_us], the
 * small regime's (calib_fit_linear_bounded): in the large regime the
 * latency is a tiny part of each time, and a free intercept there, pulled
 * by cache and protocol changes across the sizes, comes out negative
 * (Hockney's method: alpha from small messages, beta from large). */
static calib_fitrec_t *fit_coll(calib_result_t *r, int c, const char *regime, double lo, double hi, double alpha_us)
{
    char name[48];
    snprintf(name, sizeof name, "%s_%s", calib_colls[c].name, regime);
    calib_fitrec_t *f = calib_new_fit(r, name, "size_bytes x bus factor", "time_us", r->coll.n);
    f->linear = 1;
    int m = 0;
    for (int i = 0; i < r->coll.n; i++)
        if (calib_table_get(&r->coll, i, 0) == c)
            f->x[m] = calib_table_get(&r->coll, i, 1) * calib_bus_factor(c, r->nranks),
            f->y[m++] = calib_table_get(&r->coll, i, 3);
    f->n = m;
    double fac = calib_bus_factor(c, r->nranks);
    if (isnan(alpha_us)) {
        f->lin = calib_fit_linear(f->x, f->y, m, lo * fac, hi * fac, f->resid);
        return f;
    }
    f->how = "y = a + b x, a held in [0, the small regime's], b by least squares through the origin of y - a "
             "(gsl_fit_mul)";
    f->lin = calib_fit_linear_bounded(f->x, f->y, m, lo * fac, hi * fac, alpha_us, f->resid);
    return f;
}

/* The memory-bound kernels: the model prices LayerNorm, bias+GeLU and the
 * optimizer at the longer of their bytes at mem_eff and their elements at
 * a math rate (model/cost.c). On a GPU they are bandwidth-bound, so their
 * samples give mem_eff (their rates over the copy's) and the math rates
 * stay the base's data-sheet ones. On the CPU the scalar reference code is
 * compute-bound (tanh, sqrt, division), so the copies give mem_eff (their
 * rate over hbm_gbps, at most 1: the model does not credit the caches, so
 * on a CPU, whose in-cache copies beat DRAM, the curve sits at 1 to the
 * noise) and each kernel's samples its math rate (calib_fit_rate). On
 * both, the dropout's draws are priced on top of a kernel's time (model/
 * cost.c), so their rate is what they add: LayerNorm with dropout less
 * LayerNorm over the same elements (kinds 5 and 1), against the draws,
 * through the origin (fit_dropout_rate). */
const char *const calib_math_fit_names[CALIB_MATH_RATES] = {"norm_rate", "gelu_rate", "optim_rate", "dropout_rate"};

static void fit_dropout_rate(calib_result_t *r)
{
    const calib_table_t *t = &r->mem;
    calib_fitrec_t *f = calib_new_fit(r, calib_math_fit_names[3], "draws", "time_beyond_layernorm_us", t->n);
    f->how = "y = b x through the origin (gsl_fit_mul): LayerNorm with dropout's time less LayerNorm's over the same "
             "elements (memory kinds 5 and 1), against its draws (one per element)";
    int m = 0;
    for (int i = 0; i < t->n; i++) {
        if (calib_table_get(t, i, 0) != 5)
            continue;
        for (int j = 0; j < t->n; j++) /* its LayerNorm twin: kind 1 over the same elements */
            if (calib_table_get(t, j, 0) == 1 && calib_table_get(t, j, 6) == calib_table_get(t, i, 6)) {
                f->x[m] = calib_table_get(t, i, 6);
                f->y[m++] = (calib_table_get(t, i, 2) - calib_table_get(t, j, 2)) * 1e6;
                break;
            }
    }
    f->n = m;
    calib_fit_through_origin(f);
    if (f->lin.ok && f->lin.b > 0)
        r->math_gelems[3] = 1e-3 / f->lin.b; /* draws per us -> 1e9 per s */
}

/* Memory bandwidth: time_us = a + b bytes over the copies of at least
 * twice the last-level cache (DRAM-resident: calib_bench_memory measures
 * three or more such sizes on a CPU), hbm_gbps = 1e-3 / b, with its
 * residuals and R^2. Each copy's fastest sample, as STREAM reports: the
 * device's bandwidth, not what a neighbour on a shared host left of it.
 * The fixed cost a is held in [0, the smallest copy's time] (it cannot be
 * more): over sizes of 10 ms, a free intercept is noise, and on a shared
 * VM came out at -0.8 ms (as the collectives' large regime, fit_coll).
 * In-cache copies run faster (a CPU's by several times) and stay out of
 * it: the model's mem_eff (<= 1) credits no cache.
 * With fewer than 3 such sizes or no positive slope (ok = 0) the copy rate
 * at the largest size stands in, and the provenance says so. */
static void fit_hbm(calib_result_t *r)
{
    calib_fitrec_t *f = calib_new_fit(r, "hbm_bw", "bytes", "time_min_us", r->mem.n);
    f->linear = 1;
    f->how = "y = a + b x, y each copy's fastest sample, over the copies of >= 2x the last-level cache; a held in "
             "[0, the smallest copy's time], b by least squares through the origin of y - a (gsl_fit_mul); "
             "bandwidth = hbm_gbps";
    int m = 0;
    double fastest_us = INFINITY;
    for (int i = 0; i < r->mem.n; i++)
        if (calib_table_get(&r->mem, i, 0) == 0) {
            f->x[m] = calib_table_get(&r->mem, i, 1), f->y[m] = calib_table_get(&r->mem, i, 3) * 1e6;
            fastest_us = fmin(fastest_us, f->y[m++]);
        }
    f->n = m;
    f->lin = calib_fit_linear_bounded(f->x, f->y, m, 2 * r->llc_bytes, INFINITY, m ? fastest_us : 0, f->resid);
    r->hbm_fitted = f->lin.ok;
    r->copy_gbps = f->lin.ok ? 1e-3 / f->lin.b : largest_copy_gbps(&r->mem);
}

static void fit_memory_bound(calib_result_t *r)
{
    for (int k = 0; k < CALIB_MATH_RATES; k++)
        r->math_gelems[k] = -1;
    if (r->device) { /* kinds 0 to 3: LayerNorm with dropout is bound by its draws too */
        fit_mem_eff(r, 1, 3);
        fit_dropout_rate(r);
        return;
    }
    fit_mem_eff(r, 0, 0);
    fit_dropout_rate(r);
    for (int k = 0; k < 3; k++) {
        calib_fitrec_t *f = calib_new_fit(r, calib_math_fit_names[k], "elems", "time_us", r->mem.n);
        f->linear = 1;
        int m = 0;
        for (int i = 0; i < r->mem.n; i++)
            if (calib_table_get(&r->mem, i, 0) == k + 1)
                f->x[m] = calib_table_get(&r->mem, i, 6), f->y[m++] = calib_table_get(&r->mem, i, 2) * 1e6;
        f->n = m;
        f->lin = calib_fit_rate(f->x, f->y, m, f->resid);
        f->how = "y = b x, least squares on the relative error";
        if (f->lin.ok)
            r->math_gelems[k] = 1e-3 / f->lin.b; /* elements per us -> 1e9 per s */
    }
}

/* comm_slowdown: the mean of the overlap samples' slowdowns (the least
 * squares of a constant: the model applies one slowdown to any compute
 * beside any collective, model/estimate.c and sim/engine.c), with its
 * standard error; each sample's residual (its slowdown less the mean) is
 * what a dependence on the GEMM or the message size would add. No
 * samples: NAN, the base profile's is kept (a negative mean, timing noise
 * on an idle link, is a measurement: clamped to 0 in the profile). */
static void fit_overlap(calib_result_t *r)
{
    int n = r->overlap.n;
    r->comm_slowdown = NAN;
    if (n == 0)
        return;
    calib_fitrec_t *f = calib_new_fit(r, "comm_slowdown", "bytes", "slowdown", n);
    f->constant = 1;
    f->how = "y = a, the mean over the GEMM and all-reduce sizes of the overlap table (busy / alone - 1); "
             "residuals: each sample less the mean";
    double mean = 0, ss = 0;
    for (int i = 0; i < n; i++)
        f->x[i] = calib_table_get(&r->overlap, i, 1), f->y[i] = calib_table_get(&r->overlap, i, 4), mean += f->y[i] / n;
    for (int i = 0; i < n; i++)
        f->resid[i] = f->y[i] - mean, ss += f->resid[i] * f->resid[i];
    f->n = n;
    f->lin = (calib_linfit_t){mean, 0, n > 1 ? sqrt(ss / (n - 1) / n) : 0, 0, 0, sqrt(ss / n), n, 1};
    r->comm_slowdown = mean;
}

/* Fixed cost of the smallest kernels: the intercept of time against
 * bytes up to 256 KiB (time in us) of back-to-back calls of one small
 * kernel: memcpy on the CPU; on the GPU bias+GeLU, one launch per call
 * (a cudaMemcpy is a driver operation, not a kernel of ours). */
static void fit_kernel_gap(calib_result_t *r)
{
    int gap_kernel = r->device ? 2 : 0;
    calib_fitrec_t *g = calib_new_fit(r, "kernel_gap", "bytes", "time_us", r->mem.n);
    g->linear = 1;
    int m = 0;
    for (int i = 0; i < r->mem.n; i++)
        if (calib_table_get(&r->mem, i, 0) == gap_kernel)
            g->x[m] = calib_table_get(&r->mem, i, 1), g->y[m++] = calib_table_get(&r->mem, i, 2) * 1e6;
    g->n = m;
    g->lin = calib_fit_linear(g->x, g->y, m, 0, 256 << 10, g->resid);
    r->gap_us = fmax(0, g->lin.a);
}

void calib_fit_all(calib_result_t *r, const calib_plan_t *p)
{
    r->peak_gflops = col_max(&r->gemm, 7, -1, 0);
    fit_hbm(r);
    fit_memory_bound(r); /* before fit_gemm and fit_attn, which take memory-bound parts off at its rates */
    fit_kernel_gap(r);
    fit_gemm(r);
    calib_fit_attention(r);
    fit_overlap(r);
    if (!r->have_coll)
        return;
    /* Regimes: small up to min(64 KiB, top / 64), large from top / 16. */
    double top = 0;
    for (int i = 0; i < r->coll.n; i++)
        top = fmax(top, calib_table_get(&r->coll, i, 1));
    for (int c = 0; c < CALIB_NCOLL; c++) {
        calib_fitrec_t *s = fit_coll(r, c, "small", 0, fmin(65536, top / 64), NAN);
        calib_fitrec_t *l = fit_coll(r, c, "large", top / 16, top, s->lin.a);
        if (c == 0)
            r->ar_alpha_us = s->lin.a, r->ar_bw_gbps = l->lin.ok ? 1e-3 / l->lin.b : 0;
        if (c == CALIB_NCOLL - 1)
            r->p2p_alpha_us = s->lin.a;
    }
    (void)p;
}

/* ---- profile --------------------------------------------------------------- */

/* "NVIDIA H100 80GB HBM3" -> "nvidia-h100-80gb-hbm3": lower case, runs of
 * other characters as one '-', at most max characters. */
static void name_slug(const char *in, char *out, int max)
{
    int n = 0;
    for (const char *p = in; *p && n < max; p++) {
        char c = *p;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
            out[n++] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
        else if (n > 0 && out[n - 1] != '-')
            out[n++] = '-';
    }
    while (n > 0 && out[n - 1] == '-')
        n--;
    out[n] = 0;
    if (!n)
        snprintf(out, max + 1, "gpu");
}

/* Ring steps: send/recv is launch + 1 step, all-reduce launch + 2(n-1)
 * steps (model/cost.c), so the two small-message latencies give both. */
static void split_latency(const calib_result_t *r, double *launch_us, double *step_us)
{
    double steps = 2.0 * (r->nranks - 1);
    double s = steps > 1 ? (r->ar_alpha_us - r->p2p_alpha_us) / (steps - 1) : r->p2p_alpha_us / 2;
    s = clamp(s, 0, fmax(r->p2p_alpha_us, 0));
    *step_us = s, *launch_us = fmax(0, r->p2p_alpha_us - s);
}

/* nvlink_eff at powers of 4 from 4 KiB: the all-reduce's bus bandwidth
 * after its latency, over the large-message bandwidth. */
static void coll_curve(const calib_result_t *r, curve_t *c, double bw_gbps)
{
    c->n = 0;
    for (int i = 0; i < r->coll.n && c->n < CURVE_MAX; i++) {
        double size = calib_table_get(&r->coll, i, 1);
        int e = (int)round(log2(size));
        if (calib_table_get(&r->coll, i, 0) != 0 || size < 4096 || e % 2 || fabs(size - ldexp(1, e)) > 0.5)
            continue;
        double t_us = calib_table_get(&r->coll, i, 3) - r->ar_alpha_us;
        double bus = size * calib_bus_factor(0, r->nranks) / fmax(t_us, 1e-9) * 1e-3;
        c->x[c->n] = size, c->y[c->n++] = clamp(bus / bw_gbps, 1e-4, 1);
    }
}

/* The device's own fields. CPU: one core running the fp32 reference
 * kernels stands in for a GPU (its "bf16" peak is the fp32 rate, its SMs
 * the cores, its memory MemTotal). GPU: the bf16 peak is the best GEMM
 * measured; tf32 and fp8 are not measured (kern_gemm_cuda is bf16 only),
 * so they keep the base profile's ratios to bf16 (tf32 1/2 on A100 and
 * H100, fp8 2 on the H100). The CPU's fp8 rate is its fp32 one too: the
 * CPU path emulates FP8's casts (kernels/fp8.h) around fp32 GEMMs. */
static void device_fields(const calib_result_t *r, hw_gpu_t *g, const char *host)
{
    if (!r->device) {
        snprintf(g->name, sizeof g->name, "cpu-%.30s", host);
        g->peak_bf16_tflops = g->peak_tf32_tflops = g->peak_fp8_tflops = r->peak_gflops * 1e-3;
        g->hbm_gib = r->host_mem_gib > 0 ? r->host_mem_gib : 1;
        g->attn_block_q = g->attn_block_k = 1; /* kern_attention_*_ref: one row at a time */
        return;
    }
    char slug[40];
    name_slug(r->gpu.name, slug, 30);
    snprintf(g->name, sizeof g->name, "%.30s-measured", slug);
    double tf32_per_bf16 = g->peak_tf32_tflops / g->peak_bf16_tflops;
    double fp8_per_bf16 = g->peak_fp8_tflops / g->peak_bf16_tflops;
    g->peak_bf16_tflops = r->peak_gflops * 1e-3;
    g->peak_tf32_tflops = g->peak_bf16_tflops * tf32_per_bf16;
    g->peak_fp8_tflops = g->peak_bf16_tflops * fp8_per_bf16;
    g->hbm_gib = r->gpu.mem_gib;
    g->attn_slots_q = r->gpu.attn_slots_q, g->attn_slots_k = r->gpu.attn_slots_k;
}

int calib_make_profile(const calib_result_t *r, const char *base_gpu, const char *base_cluster, hw_t *hw,
                       char *err)
{
    if (hw_resolve(base_gpu, base_cluster, NULL, hw, err))
        return -1;
    hw_gpu_t *g = &hw->gpu;
    const char *host = r->host[0] ? r->host : "host";
    device_fields(r, g, host);
    g->hbm_gbps = r->copy_gbps;
    if (!r->device) /* the CPU path's "host" is its own memory: offloading is a copy at the copy rate */
        g->pcie_gbps = r->copy_gbps;
    g->kernel_gap_us = r->gap_us;
    if (!isnan(r->comm_slowdown))
        g->comm_slowdown = clamp(r->comm_slowdown, 0, 1);
    calib_gemm_fields(r, g);
    const calib_fitrec_t *af = calib_find_fit(r, "flash_fwd_eff"), *bf = calib_find_fit(r, "flash_bwd_eff");
    if (r->device && af->wfit.ok) /* the blocks whose waves explain the attention samples best */
        g->attn_block_q = af->wfit.tile_m;
    if (r->device && bf->wfit.ok)
        g->attn_block_k = bf->wfit.tile_m;
    sample_curve(&g->flash_fwd_eff, &af->sat, 1e4, top_flops(r));
    sample_curve(&g->flash_bwd_eff, &bf->sat, 1e4, top_flops(r));
    sample_curve(&g->mem_eff, &calib_find_fit(r, "mem_eff")->sat, 1e3, 1e10);
    if (r->host_stall_s >= 0)
        hw->cluster.host_stall_s = r->host_stall_s;
    if (r->flash1_rel > 0)
        g->flash1_rel = clamp(r->flash1_rel, 1e-3, 1);
    if (r->graph_gap_us > 0) /* else the base's (the built-ins': 0, kernel_gap_us) */
        g->graph_gap_us = clamp(r->graph_gap_us, 0, 1e5);
    double *rates[CALIB_MATH_RATES] = {&g->norm_gelems, &g->gelu_gelems, &g->optim_gparams, &g->dropout_gdraws};
    for (int k = 0; k < CALIB_MATH_RATES; k++)
        if (r->math_gelems[k] > 0)
            *rates[k] = clamp(r->math_gelems[k], 1e-6, 1e7);
    double *softmax[2] = {&g->softmax_fwd_gelems, &g->softmax_bwd_gelems};
    double *unfused[2] = {&g->unfused_fwd_rel, &g->unfused_bwd_rel};
    for (int b = 0; b < 2; b++) {
        if (r->softmax_gelems[b] > 0)
            *softmax[b] = clamp(r->softmax_gelems[b], 1e-6, 1e7);
        if (r->unfused_rel[b] > 0)
            *unfused[b] = clamp(r->unfused_rel[b], 1e-3, 10);
    }
    if (r->flash_gdraws[0] > 0)
        g->flash_fwd_gdraws = clamp(r->flash_gdraws[0], 1e-6, 1e7);
    if (r->flash_gdraws[1] > 0)
        g->flash_bwd_gdraws = clamp(r->flash_gdraws[1], 1e-6, 1e7);
    if (r->gemm_acc_exposed >= 0)
        g->gemm_acc_exposed = r->gemm_acc_exposed;
    g->gemm_pack_ns = r->device ? 0 : fmax(0, r->gemm_pack_ns); /* a GPU's cuBLAS transposes in place */
    /* megasim's own executor (real/exec.c): its blocking exchanges are
     * ordered on the stream, with no host synchronisation, and an
     * iteration's time is its op program's; the base's values describe
     * Megatron-LM's host (hw_builtin.c). */
    hw->cluster.host_sync_gap_us = 0;
    hw->cluster.iteration_overhead_s = 0;
    hw->cluster.compute_scale = 1; /* the curves above are measured as they are */
    hw->cluster.nvlink_scale = 1;  /* the collectives' curve too (or the base's, which is at 1) */
    if (calib_coll_applied(r)) {
        hw_cluster_t *c = &hw->cluster;
        snprintf(c->name, sizeof c->name, "%s-%.28s", r->device ? "nccl" : "cpu-mpi", host);
        g->nvlink_gbps = r->ar_bw_gbps;
        split_latency(r, &c->coll_launch_us, &c->alpha_nvlink_us);
        coll_curve(r, &c->nvlink_eff, r->ar_bw_gbps);
        if (c->nvlink_eff.n == 0)
            c->nvlink_eff = (curve_t){1, {1}, {1}};
    }
    return hw_check(hw, err);
}

void calib_result_free(calib_result_t *r)
{
    calib_table_free(&r->gemm), calib_table_free(&r->attn), calib_table_free(&r->attn_unfused);
    calib_table_free(&r->mem), calib_table_free(&r->coll), calib_table_free(&r->overlap);
    calib_table_free(&r->attn_drop), calib_table_free(&r->sustained);
    for (int i = 0; i < r->nfits; i++)
        free(r->fits[i].x), free(r->fits[i].y), free(r->fits[i].resid), free(r->fits[i].wave);
    r->nfits = 0;
}
