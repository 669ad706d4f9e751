/* calib/profile_attn: the attention fits (see profile.h): the flash
 * curves with their blocks' wave model, the flash kernels' dropout draws,
 * and the unfused attention's softmax rates and GEMM speed. */
#include "calib/profile_int.h"
#include "model/cost.h"
#include "model/layer.h"

#include <math.h>
#include <stdlib.h>

/* calib_mem_profile with the GEMMs as calib_make_profile will price them
 * (calib_gemm_fields, the measured peak; fit_gemm has run). Its own static
 * copy. */
static const hw_t *gemm_profile(const calib_result_t *r)
{
    static hw_t h;
    h = *calib_mem_profile(r);
    h.gpu.peak_bf16_tflops = h.gpu.peak_tf32_tflops = h.gpu.peak_fp8_tflops = r->peak_gflops * 1e-3;
    calib_gemm_fields(r, &h.gpu);
    h.cluster.compute_scale = 1;
    return &h;
}

/* softmax_*_gelems and unfused_*_rel of one pass: each unfused attention
 * sample's time y against its scores x1 (B x heads x T^2) and its GEMMs'
 * time x2 as the model prices them at gemm_eff (layer_unfused_attention_ops
 * on gemm_profile), y = x1 / rate + x2 / rel, least squares through the
 * origin on both (the 2 x 2 normal equations, weighted: below); the
 * model charges x1 / rate to its softmax op (at least its bytes) and x2 /
 * rel to its GEMMs. With one head size the two are nearly collinear (both
 * grow as T^2): then rel = 1 and the rate alone (y - x2 on x1). On the CPU
 * the reference kernel's exponentials and its GEMMs run a row at a time; on
 * a GPU the softmax kernel and the GEMMs' launch gaps. Two records of the same
 * samples and residuals: softmax_* (x1, y less the GEMMs' fitted part) and
 * unfused_*_gemm (x2, y less the softmax's). No positive rate: < 0. */
static void fit_softmax(calib_result_t *r, int bwd)
{
    const calib_table_t *t = &r->attn_unfused;
    r->softmax_gelems[bwd] = r->unfused_rel[bwd] = -1;
    calib_fitrec_t *f = calib_new_fit(r, bwd ? "softmax_bwd" : "softmax_fwd", "scores", "time_beyond_gemms_us", t->n);
    calib_fitrec_t *g = calib_new_fit(r, bwd ? "unfused_bwd_gemm" : "unfused_fwd_gemm", "gemms_priced_us",
                                      "time_beyond_softmax_us", t->n);
    f->n = g->n = 0;
    if (t->n == 0 || !calib_find_fit(r, "gemm_eff")->sat.ok)
        return;
    const hw_t *hw = gemm_profile(r);
    job_t job = {.bf16 = r->device};
    op_t ops[LAYER_MAX_OPS];
    double *y = calloc(2 * (t->n + 1), sizeof(double)), *w = y + t->n + 1, hs0 = 0;
    int m = 0, several = 0; /* head sizes */
    for (int i = 0; i < t->n; i++) {
        if (calib_table_get(t, i, 0) != bwd)
            continue;
        double T = calib_table_get(t, i, 1), bh = calib_table_get(t, i, 11) * calib_table_get(t, i, 2);
        double hs = calib_table_get(t, i, 3), gemm_us = 0;
        int n = layer_unfused_attention_ops(bh, T, hs, job_weight_bytes(&job), bwd, ops);
        for (int o = 0; o < n; o++)
            gemm_us += ops[o].kind == OP_GEMM ? cost_op_s(hw, &job, &ops[o]) * 1e6 : 0;
        several |= m > 0 && hs != hs0;
        hs0 = m ? hs0 : hs;
        f->x[m] = bh * T * T, g->x[m] = gemm_us, y[m++] = calib_table_get(t, i, 5) * 1e6;
    }
    /* the weights: with several head sizes 1 / y^2, each sample's residual
     * relative to its time. The samples span two orders of magnitude and
     * the head sizes' spread, which tells the two terms apart, sits at half
     * the top T; unweighted, the largest samples settled the rate alone (on
     * the CPU a t-value of about 1: a CI run found none, 2026-11-29; weighted
     * about 8, loaded or not). With one head size (the GPU's sweep) the rate
     * alone, unweighted: its largest samples, the long sequences the model
     * extrapolates to, set it. */
    double s11 = 0, s12 = 0, s22 = 0, s1y = 0, s2y = 0;
    for (int k = 0; k < m; k++) {
        w[k] = !several ? 1 : y[k] > 0 ? 1 / (y[k] * y[k]) : 0;
        s11 += w[k] * f->x[k] * f->x[k], s12 += w[k] * f->x[k] * g->x[k], s22 += w[k] * g->x[k] * g->x[k];
        s1y += w[k] * f->x[k] * y[k], s2y += w[k] * g->x[k] * y[k];
    }
    /* which fit: both terms; the GEMMs' speed alone (no positive rate per
     * score beside it); the rate alone (one head size, or no positive speed) */
    enum { BOTH, GEMMS, RATE } how = RATE;
    double det = s11 * s22 - s12 * s12, b1 = 0, b2 = 1, sxy = 0;
    if (several && det > 1e-9 * s11 * s22) {
        b1 = (s1y * s22 - s2y * s12) / det, b2 = (s2y * s11 - s1y * s12) / det;
        how = b1 > 0 && b2 > 0 ? BOTH : b1 <= 0 && s2y > 0 ? GEMMS : RATE;
    }
    if (how == GEMMS)
        b1 = 0, b2 = s2y / s22;
    if (how == RATE) {
        for (int k = 0; k < m; k++)
            sxy += w[k] * f->x[k] * (y[k] - g->x[k]);
        b1 = s11 > 0 ? sxy / s11 : 0, b2 = 1;
    }
    double ss = 0, mean = 0, sumsq = 0, wsumsq = 0;
    for (int k = 0; k < m; k++)
        mean += y[k] / m;
    for (int k = 0; k < m; k++) {
        f->resid[k] = g->resid[k] = y[k] - b1 * f->x[k] - b2 * g->x[k];
        f->y[k] = y[k] - b2 * g->x[k], g->y[k] = y[k] - b1 * f->x[k];
        ss += (y[k] - mean) * (y[k] - mean), sumsq += f->resid[k] * f->resid[k];
        wsumsq += w[k] * f->resid[k] * f->resid[k];
    }
    /* standard errors: sigma^2 of the weighted residuals times the inverse
     * weighted normal matrix's diagonal (one term: 1 / its sum of squares) */
    double s2 = m > 2 ? wsumsq / (m - 2) : 0;
    calib_linfit_t lin = {.r2 = ss > 0 ? 1 - sumsq / ss : 0, .rms = m ? sqrt(sumsq / m) : 0, .n = m, .ok = m >= 2};
    f->lin = g->lin = lin;
    f->lin.b = b1, g->lin.b = b2;
    f->lin.se_b = how == BOTH ? sqrt(s2 * s22 / det) : how == RATE && s11 > 0 ? sqrt(s2 / s11) : 0;
    g->lin.se_b = how == BOTH ? sqrt(s2 * s11 / det) : how == GEMMS && s22 > 0 ? sqrt(s2 / s22) : 0;
    f->n = g->n = m;
    f->linear = f->slope = g->linear = g->slope = 1;
    static const char *const what[3][2] = {
        {"y = b1 x1 + b2 x2 through the origin (normal equations, weights 1 / y^2): y each unfused attention "
         "sample's time, x1 its scores (B x heads x T^2), x2 its GEMMs at gemm_eff (model/layer.c's unfused ops); "
         "this record: x1 against y - b2 x2; rate 1e-3 / b1 G/s",
         "the same joint fit: x2 against y - b1 x1; unfused_*_rel = 1 / b2"},
        {"y = b2 x2 through the origin: the joint fit found no positive rate per score, so none is charged (b1 = 0) "
         "and the GEMMs' speed alone is fitted",
         "y = b2 x2 through the origin, weights 1 / y^2: y each sample's time, x2 its GEMMs at gemm_eff; "
         "unfused_*_rel = 1 / b2"},
        {"y - x2 = b1 x1 through the origin (weights 1 / y^2 beside several head sizes): one head size (or no "
         "positive GEMM speed), so the GEMMs as priced (x2 at gemm_eff) and the scores x1 alone; rate 1e-3 / b1 G/s",
         "not fitted: b2 = 1, the GEMMs as priced"}};
    f->how = what[how][0], g->how = what[how][1];
    if (f->lin.ok && b1 > 0)
        r->softmax_gelems[bwd] = 1e-3 / b1;
    if (f->lin.ok && b2 > 0)
        r->unfused_rel[bwd] = 1 / b2;
    free(y);
}

/* The attention blocks tried on a GPU: kern_attention_*_cuda runs 64 rows
 * per thread block, FlashAttention-2 128 at head size 128. The CPU's
 * reference kernels go one query row (forward) or key row (backward) at a
 * time. */
static const int gpu_attn_blocks[] = {32, 64, 128};
static const int cpu_attn_blocks[] = {1};

/* The wave model's slots for a pass's samples: on a GPU cost_attn_slots
 * of the profile's fields, as the model prices them; on a CPU its cores. */
static int attn_slots(const calib_result_t *r, int bwd)
{
    hw_gpu_t g = {.sm_count = r->gpu.sm_count, .attn_slots_q = r->gpu.attn_slots_q,
                  .attn_slots_k = r->gpu.attn_slots_k};
    return r->device ? cost_attn_slots(&g, bwd) : r->ncores;
}

/* flash_fwd_eff or flash_bwd_eff with wave quantisation
 * (calib_fit_attn_waves): the samples run few heads (batch 1), so a GPU's
 * last wave is often poorly filled; the curve must not absorb that. */
static void fit_attn(calib_result_t *r, int bwd)
{
    const calib_table_t *t = &r->attn;
    calib_fitrec_t *f = calib_new_fit(r, bwd ? "flash_bwd_eff" : "flash_fwd_eff", "flops", "fraction of peak", t->n);
    double *bh = calloc(t->n + 1, sizeof(double)), *seq = calloc(t->n + 1, sizeof(double));
    double *win = calloc(t->n + 1, sizeof(double));
    f->wave = calloc(t->n + 1, sizeof(double));
    const hw_t *mem = calib_mem_profile(r);
    int m = 0;
    for (int i = 0; i < t->n; i++)
        if (calib_table_get(t, i, 0) == bwd) {
            double nh = calib_table_get(t, i, 2), group = nh / calib_table_get(t, i, 9), fl = calib_table_get(t, i, 4);
            op_t op = {.kind = OP_ATTN, .batch = calib_table_get(t, i, 11) * nh, .attn_seq = calib_table_get(t, i, 1),
                       .attn_d = calib_table_get(t, i, 3), .attn_bwd = bwd, .attn_group = group};
            bh[m] = cost_attn_grid_heads(op.batch, group, bwd, 0), seq[m] = op.attn_seq;
            win[m] = calib_table_get(t, i, 10);
            /* GQA's backward on a GPU: less the memory pass that sums dK, dV (the model adds it back) */
            double ts = fl / (calib_table_get(t, i, 8) * 1e9) - cost_attn_dkv_sum_s(mem, &op);
            f->x[m] = fl, f->y[m++] = ts > 0 ? fmin(1, fl / ts * 1e-9 / r->peak_gflops) : 1;
        }
    f->n = m;
    int sms = attn_slots(r, bwd);
    const int *blocks = r->device ? gpu_attn_blocks : cpu_attn_blocks;
    int nblocks = r->device ? (int)(sizeof gpu_attn_blocks / sizeof gpu_attn_blocks[0])
                            : (int)(sizeof cpu_attn_blocks / sizeof cpu_attn_blocks[0]);
    f->wfit = calib_fit_attn_waves(bh, seq, win, bwd, f->x, f->y, m, sms, blocks, nblocks, f->wave, f->resid);
    f->sat = f->wfit.sat;
    f->sat.ok = f->wfit.ok;
    free(bh), free(seq), free(win);
}

/* flash_fwd_gdraws or flash_bwd_gdraws: the model adds a flash pass's
 * draws to its work before the wave loss (model/cost.c), so each
 * attention_dropout row's added time times the wave efficiency of its
 * shape (the block flash_*_eff chose) against its draws, through the
 * origin: the seconds per draw of a full grid. No rows: < 0. */
static void fit_attn_draws(calib_result_t *r, int bwd)
{
    const calib_table_t *t = &r->attn_drop;
    r->flash_gdraws[bwd] = -1;
    if (t->n == 0)
        return;
    const calib_fitrec_t *ef = calib_find_fit(r, bwd ? "flash_bwd_eff" : "flash_fwd_eff");
    int sms = attn_slots(r, bwd), block = ef && ef->wfit.ok ? ef->wfit.tile_m : 0;
    calib_fitrec_t *f = calib_new_fit(r, bwd ? "flash_bwd_draws" : "flash_fwd_draws", "draws", "added_us_x_wave_eff", t->n);
    f->how = "y = b x through the origin (gsl_fit_mul): the pass's time with dropout less without, times its wave "
             "efficiency at the fitted block, against its draws (one per visible score); rate 1e-3 / b G/s";
    int m = 0;
    for (int i = 0; i < t->n; i++)
        if (calib_table_get(t, i, 0) == bwd) {
            double nh = calib_table_get(t, i, 3), group = nh / calib_table_get(t, i, 4);
            double we = cost_attn_wave_eff(block, sms, cost_attn_grid_heads(calib_table_get(t, i, 1) * nh, group, bwd, 0),
                                           calib_table_get(t, i, 2), calib_table_get(t, i, 6), bwd);
            f->x[m] = calib_table_get(t, i, 9);
            f->y[m++] = (calib_table_get(t, i, 8) - calib_table_get(t, i, 7)) * 1e6 * we;
        }
    f->n = m;
    calib_fit_through_origin(f);
    if (f->lin.ok && f->lin.b > 0)
        r->flash_gdraws[bwd] = 1e-3 / f->lin.b;
}

void calib_fit_attention(calib_result_t *r)
{
    fit_attn(r, 0);
    fit_attn(r, 1);
    fit_attn_draws(r, 0);
    fit_attn_draws(r, 1);
    fit_softmax(r, 0);
    fit_softmax(r, 1);
}
