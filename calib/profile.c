/* calib/profile: fits, profile fields, report and files (see profile.h). */
#define _POSIX_C_SOURCE 200809L /* gethostname */
#include "calib/profile.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include "sim/h5attr.h"

#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef MEGASIM_VERSION
#define MEGASIM_VERSION "unknown"
#endif

/* ---- fits ------------------------------------------------------------------ */

static calib_fitrec_t *new_fit(calib_result_t *r, const char *name, const char *xn, const char *yn, int n)
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

/* Efficiency samples y = rate / best, at most 1 (an efficiency; a CPU's
 * in-cache copies beat the DRAM bandwidth, `best`), from the rows of t where
 * col sel == want (sel < 0: all rows; want < 0: rows where col sel !=
 * -want - 1), fitted by the saturating model. */
static int row_selected(const calib_table_t *t, int i, int sel, double want)
{
    double v = sel < 0 ? 0 : calib_table_get(t, i, sel);
    return sel < 0 || (want >= 0 ? v == want : v != -want - 1);
}

static calib_fitrec_t *fit_eff(calib_result_t *r, const char *name, const calib_table_t *t, int sel, double want,
                               int xcol, int ratecol, double best, const char *xn)
{
    calib_fitrec_t *f = new_fit(r, name, xn, "fraction of peak", t->n);
    int m = 0;
    for (int i = 0; i < t->n; i++)
        if (row_selected(t, i, sel, want))
            f->x[m] = calib_table_get(t, i, xcol), f->y[m++] = fmin(1, calib_table_get(t, i, ratecol) / best);
    f->n = m;
    f->sat = calib_fit_saturating(f->x, f->y, m, f->resid);
    return f;
}

/* The GEMM tiles whose wave quantisation calibration tries on a GPU
 * (cuBLASLt does not say which it runs; the model takes either
 * orientation and the half tiles, model/cost.c): CUTLASS's sm80/sm90
 * shapes from 64 x 64 to 256 x 128. The CPU's reference GEMM has one, its
 * 4 x 4 register block. */
static const int gpu_tiles[][2] = {{64, 64}, {128, 64}, {128, 128}, {256, 128}};
static const int cpu_tiles[][2] = {{4, 4}};

/* gemm_eff with wave quantisation (calib_fit_gemm_waves): the curve the
 * model multiplies by the wave efficiency of each GEMM's shape, so that a
 * GEMM measured at a poorly filled last wave lowers neither the curve nor,
 * a second time, its own prediction. */
static void fit_gemm(calib_result_t *r)
{
    const calib_table_t *t = &r->gemm;
    calib_fitrec_t *f = new_fit(r, "gemm_eff", "flops", "fraction of peak", t->n);
    double *m = calloc(t->n + 1, sizeof(double)), *n = calloc(t->n + 1, sizeof(double));
    f->wave = calloc(t->n + 1, sizeof(double));
    for (int i = 0; i < t->n; i++) {
        m[i] = calib_table_get(t, i, 0), n[i] = calib_table_get(t, i, 1);
        f->x[i] = calib_table_get(t, i, 3), f->y[i] = fmin(1, calib_table_get(t, i, 7) / r->peak_gflops);
    }
    int sms = r->device ? r->gpu.sm_count : r->ncores;
    const int(*tiles)[2] = r->device ? gpu_tiles : cpu_tiles;
    int ntiles = r->device ? (int)(sizeof gpu_tiles / sizeof gpu_tiles[0]) : (int)(sizeof cpu_tiles / sizeof cpu_tiles[0]);
    f->wfit = calib_fit_gemm_waves(m, n, f->x, f->y, t->n, sms, tiles, ntiles, f->wave, f->resid);
    f->sat = f->wfit.sat;
    f->sat.ok = f->wfit.ok;
    free(m), free(n);
}

/* The attention blocks tried on a GPU: kern_attention_*_cuda runs 64 rows
 * per thread block, FlashAttention-2 128 at head size 128. The CPU's
 * reference kernels go one query row (forward) or key row (backward) at a
 * time. */
static const int gpu_attn_blocks[] = {32, 64, 128};
static const int cpu_attn_blocks[] = {1};

/* flash_fwd_eff or flash_bwd_eff with wave quantisation
 * (calib_fit_attn_waves): the samples run few heads (batch 1), so a GPU's
 * last wave is often poorly filled; the curve must not absorb that. */
static void fit_attn(calib_result_t *r, int bwd)
{
    const calib_table_t *t = &r->attn;
    calib_fitrec_t *f = new_fit(r, bwd ? "flash_bwd_eff" : "flash_fwd_eff", "flops", "fraction of peak", t->n);
    double *bh = calloc(t->n + 1, sizeof(double)), *seq = calloc(t->n + 1, sizeof(double));
    double *win = calloc(t->n + 1, sizeof(double));
    f->wave = calloc(t->n + 1, sizeof(double));
    int m = 0;
    for (int i = 0; i < t->n; i++)
        if (calib_table_get(t, i, 0) == bwd) {
            bh[m] = calib_table_get(t, i, 11) * calib_table_get(t, i, 2), seq[m] = calib_table_get(t, i, 1);
            win[m] = calib_table_get(t, i, 10);
            f->x[m] = calib_table_get(t, i, 4), f->y[m++] = fmin(1, calib_table_get(t, i, 8) / r->peak_gflops);
        }
    f->n = m;
    int sms = r->device ? r->gpu.sm_count : r->ncores;
    const int *blocks = r->device ? gpu_attn_blocks : cpu_attn_blocks;
    int nblocks = r->device ? (int)(sizeof gpu_attn_blocks / sizeof gpu_attn_blocks[0])
                            : (int)(sizeof cpu_attn_blocks / sizeof cpu_attn_blocks[0]);
    f->wfit = calib_fit_attn_waves(bh, seq, win, bwd, f->x, f->y, m, sms, blocks, nblocks, f->wave, f->resid);
    f->sat = f->wfit.sat;
    f->sat.ok = f->wfit.ok;
    free(bh), free(seq), free(win);
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
    calib_fitrec_t *f = new_fit(r, name, "size_bytes x bus factor", "time_us", r->coll.n);
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
 * noise) and each kernel's samples its math rate (calib_fit_rate). */
#define MATH_RATES 4 /* the memory-bound kinds after the copy (calib_mem_kernels) */
static const char *const math_fit_names[MATH_RATES] = {"norm_rate", "gelu_rate", "optim_rate", "dropout_rate"};

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
    calib_fitrec_t *f = new_fit(r, "hbm_bw", "bytes", "time_min_us", r->mem.n);
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
    for (int k = 0; k < MATH_RATES; k++)
        r->math_gelems[k] = -1;
    if (r->device) {
        fit_eff(r, "mem_eff", &r->mem, 0, -1, 1, 5, r->copy_gbps, "bytes");
        return;
    }
    fit_eff(r, "mem_eff", &r->mem, 0, 0, 1, 5, r->copy_gbps, "bytes");
    for (int k = 0; k < MATH_RATES; k++) {
        calib_fitrec_t *f = new_fit(r, math_fit_names[k], "elems", "time_us", r->mem.n);
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
 * samples: < 0, the base profile's is kept. */
static void fit_overlap(calib_result_t *r)
{
    int n = r->overlap.n;
    r->comm_slowdown = -1;
    if (n == 0)
        return;
    calib_fitrec_t *f = new_fit(r, "comm_slowdown", "bytes", "slowdown", n);
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

void calib_fit_all(calib_result_t *r, const calib_plan_t *p)
{
    r->peak_gflops = col_max(&r->gemm, 7, -1, 0);
    fit_gemm(r);
    fit_attn(r, 0);
    fit_attn(r, 1);
    fit_hbm(r);
    fit_memory_bound(r);
    fit_overlap(r);
    /* Fixed cost of the smallest kernels: the intercept of time against
     * bytes up to 256 KiB (time in us) of back-to-back calls of one small
     * kernel: memcpy on the CPU; on the GPU bias+GeLU, one launch per call
     * (a cudaMemcpy is a driver operation, not a kernel of ours). */
    int gap_kernel = r->device ? 2 : 0;
    calib_fitrec_t *g = new_fit(r, "kernel_gap", "bytes", "time_us", r->mem.n);
    g->linear = 1;
    int m = 0;
    for (int i = 0; i < r->mem.n; i++)
        if (calib_table_get(&r->mem, i, 0) == gap_kernel)
            g->x[m] = calib_table_get(&r->mem, i, 1), g->y[m++] = calib_table_get(&r->mem, i, 2) * 1e6;
    g->n = m;
    g->lin = calib_fit_linear(g->x, g->y, m, 0, 256 << 10, g->resid);
    r->gap_us = fmax(0, g->lin.a);
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

static double clamp(double v, double lo, double hi) { return v < lo ? lo : v > hi ? hi : v; }

static const calib_fitrec_t *find_fit(const calib_result_t *r, const char *name)
{
    for (int i = 0; i < r->nfits; i++)
        if (!strcmp(r->fits[i].name, name))
            return &r->fits[i];
    return NULL;
}

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

static double mem_total_gib(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    double kib = 0;
    if (f) {
        if (fscanf(f, "MemTotal: %lf kB", &kib) != 1)
            kib = 0;
        fclose(f);
    }
    return kib > 0 ? kib / (1 << 20) : 1;
}

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

/* The collective fields come from the all-reduce fits when they worked. */
static int coll_applied(const calib_result_t *r) { return r->have_coll && r->ar_bw_gbps > 0; }

/* The device's own fields. CPU: one core running the fp32 reference
 * kernels stands in for a GPU (its "bf16" peak is the fp32 rate, its SMs
 * the cores, its memory MemTotal). GPU: the bf16 peak is the best GEMM
 * measured; tf32 is not measured (kern_gemm_cuda is bf16 only), so it
 * keeps the base profile's tf32/bf16 ratio (1/2 on A100 and H100). */
static void device_fields(const calib_result_t *r, hw_gpu_t *g, const char *host)
{
    if (!r->device) {
        snprintf(g->name, sizeof g->name, "cpu-%.30s", host);
        g->peak_bf16_tflops = g->peak_tf32_tflops = r->peak_gflops * 1e-3;
        g->hbm_gib = mem_total_gib();
        g->sm_count = r->ncores;
        g->gemm_tile_m = g->gemm_tile_n = 4; /* kern_gemm_ref's 4 x 4 register block */
        g->attn_block_q = g->attn_block_k = 1; /* kern_attention_*_ref: one row at a time */
        return;
    }
    char slug[40];
    name_slug(r->gpu.name, slug, 30);
    snprintf(g->name, sizeof g->name, "%.30s-measured", slug);
    double tf32_per_bf16 = g->peak_tf32_tflops / g->peak_bf16_tflops;
    g->peak_bf16_tflops = r->peak_gflops * 1e-3;
    g->peak_tf32_tflops = g->peak_bf16_tflops * tf32_per_bf16;
    g->hbm_gib = r->gpu.mem_gib;
    g->sm_count = r->gpu.sm_count;
}

int calib_make_profile(const calib_result_t *r, const char *base_gpu, const char *base_cluster, hw_t *hw,
                       char *err)
{
    if (hw_resolve(base_gpu, base_cluster, NULL, hw, err))
        return -1;
    hw_gpu_t *g = &hw->gpu;
    char host[64] = "host";
    gethostname(host, sizeof host - 1);
    device_fields(r, g, host);
    g->hbm_gbps = r->copy_gbps;
    g->kernel_gap_us = r->gap_us;
    if (r->comm_slowdown >= 0)
        g->comm_slowdown = clamp(r->comm_slowdown, 0, 1);
    double top_flops = r->device ? 1e13 : 1e12; /* the GPU's grid reaches 16384^3 GEMMs: 8.8e12 FLOPs */
    const calib_fitrec_t *gf = find_fit(r, "gemm_eff");
    if (r->device && gf->wfit.ok) /* the tile whose waves explain the samples best */
        g->gemm_tile_m = gf->wfit.tile_m, g->gemm_tile_n = gf->wfit.tile_n;
    const calib_fitrec_t *af = find_fit(r, "flash_fwd_eff"), *bf = find_fit(r, "flash_bwd_eff");
    if (r->device && af->wfit.ok) /* the blocks whose waves explain the attention samples best */
        g->attn_block_q = af->wfit.tile_m;
    if (r->device && bf->wfit.ok)
        g->attn_block_k = bf->wfit.tile_m;
    sample_curve(&g->gemm_eff, &gf->sat, 1e4, top_flops);
    sample_curve(&g->flash_fwd_eff, &find_fit(r, "flash_fwd_eff")->sat, 1e4, top_flops);
    sample_curve(&g->flash_bwd_eff, &find_fit(r, "flash_bwd_eff")->sat, 1e4, top_flops);
    sample_curve(&g->mem_eff, &find_fit(r, "mem_eff")->sat, 1e3, 1e10);
    if (r->host_stall_s >= 0)
        hw->cluster.host_stall_s = r->host_stall_s;
    if (r->flash1_rel > 0)
        g->flash1_rel = clamp(r->flash1_rel, 1e-3, 1);
    double *rates[MATH_RATES] = {&g->norm_gelems, &g->gelu_gelems, &g->optim_gparams, &g->dropout_gdraws};
    for (int k = 0; k < MATH_RATES; k++)
        if (r->math_gelems[k] > 0)
            *rates[k] = clamp(r->math_gelems[k], 1e-6, 1e7);
    if (r->dropout_gdraws > 0)
        g->dropout_gdraws = clamp(r->dropout_gdraws, 1e-6, 1e7);
    /* megasim's own executor (real/exec.c): its blocking exchanges are
     * ordered on the stream, with no host synchronisation, and an
     * iteration's time is its op program's; the base's values describe
     * Megatron-LM's host (hw_builtin.c). */
    hw->cluster.host_sync_gap_us = 0;
    hw->cluster.iteration_overhead_s = 0;
    hw->cluster.compute_scale = 1; /* the curves above are measured as they are */
    hw->cluster.nvlink_scale = 1;  /* the collectives' curve too (or the base's, which is at 1) */
    if (coll_applied(r)) {
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

/* ---- provenance -------------------------------------------------------------- */

static void cpu_model(char *buf, size_t len)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    snprintf(buf, len, "unknown");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            snprintf(buf, len, "%s", strchr(line, ':') + 2);
            buf[strcspn(buf, "\n")] = 0;
            break;
        }
    if (f)
        fclose(f);
}

/* Candidate c of a wave fit and its relative error, appended as
 * "128x256 0.0123" (a GEMM tile) or "64 0.0123" (attention block rows). */
static void wave_candidate(char *out, size_t len, const calib_wavefit_t *w, int c)
{
    if (w->tile_n)
        snprintf(out, len, "%s%dx%d %.4g", c ? ", " : "", w->cand_tile[c][0], w->cand_tile[c][1], w->cand_rel_rms[c]);
    else
        snprintf(out, len, "%s%d %.4g", c ? ", " : "", w->cand_tile[c][0], w->cand_rel_rms[c]);
}

static cJSON *fit_json(const calib_fitrec_t *f)
{
    cJSON *o = cJSON_CreateObject();
    if (f->constant) {
        cJSON_AddStringToObject(o, "model", f->how);
        cJSON_AddNumberToObject(o, "value", f->lin.a);
        cJSON_AddNumberToObject(o, "value_se", f->lin.se_a);
        cJSON_AddNumberToObject(o, "rms_residual", f->lin.rms);
        cJSON_AddNumberToObject(o, "samples", f->lin.n);
    } else if (f->linear) {
        cJSON_AddStringToObject(o, "model", f->how ? f->how : "y = a + b x (gsl_fit_linear)");
        cJSON_AddNumberToObject(o, "alpha_us", f->lin.a);
        cJSON_AddNumberToObject(o, "alpha_se_us", f->lin.se_a);
        cJSON_AddNumberToObject(o, "bandwidth_gbps", f->lin.b > 0 ? 1e-3 / f->lin.b : 0);
        cJSON_AddNumberToObject(o, "bandwidth_se_gbps", f->lin.b > 0 ? 1e-3 * f->lin.se_b / (f->lin.b * f->lin.b) : 0);
        cJSON_AddNumberToObject(o, "r2", f->lin.r2);
        cJSON_AddNumberToObject(o, "rms_residual", f->lin.rms);
        cJSON_AddNumberToObject(o, "samples", f->lin.n);
    } else {
        const char *wm = f->wfit.ncand && f->wfit.tile_n ? "eff = min(1, e_max x / (x + x_half)) x wave(tile, m, n) "
                                                           "(model/cost.c; gsl_multifit_nlinear per candidate tile)"
                         : f->wfit.ncand ? "eff = min(1, e_max x / (x + x_half)) x wave(block, heads, seq, window) "
                                           "(model/cost.c; gsl_multifit_nlinear per candidate block)"
                                         : "eff = e_max x / (x + x_half) (gsl_multifit_nlinear)";
        cJSON_AddStringToObject(o, "model", wm);
        cJSON_AddNumberToObject(o, "e_max", f->sat.e_max);
        cJSON_AddNumberToObject(o, "e_max_se", f->sat.se_e_max);
        cJSON_AddNumberToObject(o, "x_half", f->sat.x_half);
        cJSON_AddNumberToObject(o, "x_half_se", f->sat.se_x_half);
        cJSON_AddNumberToObject(o, "r2", f->sat.r2);
        cJSON_AddNumberToObject(o, "rms_residual", f->sat.rms);
        cJSON_AddNumberToObject(o, "samples", f->sat.n);
    }
    if (f->wfit.ncand) {
        char buf[256] = "";
        if (f->wfit.tile_n) {
            cJSON_AddNumberToObject(o, "tile_m", f->wfit.tile_m);
            cJSON_AddNumberToObject(o, "tile_n", f->wfit.tile_n);
        } else {
            cJSON_AddNumberToObject(o, "block_rows", f->wfit.tile_m);
        }
        cJSON_AddNumberToObject(o, "relative_rms", f->wfit.rel_rms);
        for (int c = 0; c < f->wfit.ncand; c++)
            wave_candidate(buf + strlen(buf), sizeof buf - strlen(buf), &f->wfit, c);
        cJSON_AddStringToObject(o, "candidates_relative_rms", buf);
    }
    cJSON_AddStringToObject(o, "x", f->xname);
    return o;
}

/* "13.0" from 13000, "2.28.9" from NCCL's 22809. */
static void add_version(cJSON *p, const char *key, int v, int nccl)
{
    char buf[32];
    if (nccl)
        snprintf(buf, sizeof buf, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
    else
        snprintf(buf, sizeof buf, "%d.%d", v / 1000, v % 1000 / 10);
    cJSON_AddStringToObject(p, key, buf);
}

/* The GPU: what cudaGetDeviceProperties, the driver, the runtime, NCCL and
 * cuBLASLt say about rank 0's device. */
static void gpu_description(cJSON *p, const calib_gpu_info_t *g)
{
    char cc[16];
    cJSON_AddStringToObject(p, "gpu_name", g->name);
    snprintf(cc, sizeof cc, "%d.%d", g->cc_major, g->cc_minor);
    cJSON_AddStringToObject(p, "compute_capability", cc);
    cJSON_AddNumberToObject(p, "sm_count", g->sm_count);
    cJSON_AddNumberToObject(p, "gpu_memory_gib", g->mem_gib);
    cJSON_AddNumberToObject(p, "l2_mib", g->l2_mib);
    cJSON_AddNumberToObject(p, "sm_clock_mhz", g->clock_mhz);
    cJSON_AddNumberToObject(p, "mem_clock_mhz", g->mem_clock_mhz);
    cJSON_AddNumberToObject(p, "mem_bus_bits", g->mem_bus_bits);
    cJSON_AddNumberToObject(p, "gpus_visible", g->devices);
    add_version(p, "cuda_driver_version", g->driver_version, 0);
    add_version(p, "cuda_runtime_version", g->runtime_version, 0);
    add_version(p, "nccl_version", g->nccl_version, 1);
    cJSON_AddNumberToObject(p, "cublaslt_version", (double)g->cublaslt_version);
}

static const char host_stall_what[] = "host_stall_s (the real backend's synchronous loader preparing one iteration "
                                      "of `megasim run`'s default job, experiments/real/tiny-gpt.json); "
                                      "host_sync_gap_us = 0 and iteration_overhead_s = 0 by construction (megasim's "
                                      "executor does not synchronise the host at pipeline exchanges, and times an "
                                      "iteration as its op program); compute_scale = 1 and nvlink_scale = 1 (the "
                                      "efficiency curves are measured as they are)";

/* Which fields were measured and which kept from the base, per device. */
/* Where hbm_gbps came from (fit_hbm). */
static void hbm_what(char *buf, size_t len, const calib_result_t *r)
{
    const char *copy = r->device ? "cudaMemcpyAsync device to device" : "memcpy";
    if (r->hbm_fitted)
        snprintf(buf, len, "hbm_gbps (fits/hbm_bw: %s time against bytes, read + write, over the copies of >= 2x "
                 "the %.0f MiB last-level cache)", copy, r->llc_bytes / (1 << 20));
    else
        snprintf(buf, len, "hbm_gbps (%s at the largest size, read + write bytes: fewer than 3 copies of >= 2x the "
                 "%.0f MiB last-level cache for fits/hbm_bw)", copy, r->llc_bytes / (1 << 20));
}

static void field_sources(cJSON *p, const calib_result_t *r)
{
    char buf[2048], no_coll[300] = "", hbm[300];
    hbm_what(hbm, sizeof hbm, r);
    cJSON_AddStringToObject(p, "raw_only", "attention_unfused (the unfused kernels' samples, in the HDF5 file: the "
                            "model prices unfused attention from gemm_eff and the memory-bound rates, no field of "
                            "its own)");
    int coll = coll_applied(r);
    if (!coll)
        snprintf(no_coll, sizeof no_coll, "; collective fields (nvlink_gbps, alpha_nvlink_us, coll_launch_us, "
                 "nvlink_eff): %s", !r->have_coll ? "the collective benchmarks need >= 2 MPI ranks, this run had 1"
                                                  : "the all-reduce's large-message fit gave no bandwidth (see fits)");
    if (!r->device) {
        snprintf(buf, sizeof buf, "gpu: peak_bf16_tflops, peak_tf32_tflops (best GEMM), %s, sm_count (cores), "
                 "hbm_gib (MemTotal), kernel_gap_us, gemm_eff (the linear layers' forward and both backward GEMMs, "
                 "square forward GEMMs), flash_fwd_eff, flash_bwd_eff, mem_eff (copies over hbm_gbps, at most 1), "
                 "norm_gelems, gelu_gelems, optim_gparams, dropout_gdraws (LayerNorm, bias+GeLU, AdamW, dropout: "
                 "elements over time, least squares on the relative error)%s; "
                 "cluster: %s%s", hbm,
                 coll ? ", nvlink_gbps (all-reduce busbw)" : "",
                 coll ? "alpha_nvlink_us, coll_launch_us, nvlink_eff (MPI within this node), " : "",
                 host_stall_what);
        cJSON_AddStringToObject(p, "measured", buf);
        snprintf(buf, sizeof buf, "%scluster topology and network fields (no second node to measure)%s",
                 r->comm_slowdown >= 0 ? "" : "gpu comm_slowdown (needs >= 3 ranks on as many cores: rank 0 "
                                             "computes while the others all-reduce); ", no_coll);
        cJSON_AddStringToObject(p, "kept_from_base", buf);
        cJSON_AddStringToObject(p, "by_construction", "gpu gemm_tile_m/n = 4 (kern_gemm_ref's register block), "
                                "attn_block_q/k = 1 (kern_attention_*_ref's row at a time), flash1_rel = 1 (the CPU "
                                "backend runs one flash reference for both flash kinds)");
        return;
    }
    snprintf(buf, sizeof buf, "gpu: peak_bf16_tflops (best bf16 GEMM: kern_matmul_fwd_cuda, kern_gemm_cuda), "
             "%s, sm_count, hbm_gib "
             "(cudaGetDeviceProperties), kernel_gap_us (back-to-back kern_bias_gelu_fwd_cuda launches up to 256 KiB, host ahead of the GPU), "
             "gemm_eff and gemm_tile_m/n (the curve and the tile among 64x64, 128x64, 128x128, 256x128 whose wave "
             "quantisation on sm_count SMs best explains the GEMM samples, fits/gemm_eff), "
             "flash_fwd_eff, flash_bwd_eff and attn_block_q/k (kern_attention_*_cuda; the curves and the block "
             "among 32, 64 and 128 rows whose wave quantisation best explains the samples, fits/flash_*_eff), mem_eff (LayerNorm, bias+GeLU, AdamW "
             "kernels), flash1_rel (kern_attention_*_v1_cuda over kern_attention_*_cuda, forward + backward)%s%s%s; "
             "cluster: %s%s", hbm,
             r->dropout_gdraws > 0 ? ", dropout_gdraws (kern_attention_*_cuda forward + backward with dropout 0.1 "
                                     "against without: its draws over the time they add)" : "",
             coll ? ", nvlink_gbps (ncclAllReduce busbw)" : "",
             r->comm_slowdown >= 0 ? ", comm_slowdown (a GEMM beside an ncclAllReduce on another stream)" : "",
             coll ? "alpha_nvlink_us, coll_launch_us, nvlink_eff (NCCL within this node), " : "", host_stall_what);
    cJSON_AddStringToObject(p, "measured", buf);
    snprintf(buf, sizeof buf, "gpu peak_tf32_tflops = the "
             "measured bf16 peak x the base's tf32/bf16 ratio (kern_gemm_cuda is bf16 only); norm_gelems, "
             "gelu_gelems, optim_gparams (data-sheet math rates: those kernels are bandwidth-bound on a GPU, so "
             "their samples give mem_eff)%s%s%s; cluster topology "
             "and network fields (no second node to measure), runtime_reserved_gib%s",
             r->comm_slowdown >= 0 ? "" : "; gpu comm_slowdown (needs >= 2 ranks, one GPU each)",
             r->flash1_rel > 0 ? "" : "; gpu flash1_rel (its measurement failed)",
             r->dropout_gdraws > 0 ? "" : "; gpu dropout_gdraws (dropout added no measurable time to the flash kernel)",
             no_coll);
    cJSON_AddStringToObject(p, "kept_from_base", buf);
}

/* /proc/PID/cmdline with its NULs as spaces into buf; its length, or 0. */
static size_t read_cmdline(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, len - 1, f) : 0;
    if (f)
        fclose(f);
    while (n > 0 && buf[n - 1] == 0)
        n--;
    for (size_t i = 0; i < n; i++)
        buf[i] = buf[i] ? buf[i] : ' ';
    buf[n] = 0;
    return n;
}

/* The command as typed: on one node Open MPI's mpirun starts the ranks
 * itself, so the parent's command line is the whole of it (launcher
 * options, program path, arguments); else this process's own (the
 * program as invoked), behind "mpirun -np N" when there are ranks; argv
 * (the subcommand on) when /proc cannot be read. */
static void command_line(char *cmd, size_t len, int nranks, int argc, char **argv)
{
    char path[64], parent[4096], self[4096] = "megasim";
    snprintf(path, sizeof path, "/proc/%ld/cmdline", (long)getppid());
    if (nranks > 1 && read_cmdline(path, parent, sizeof parent)) {
        char *prog = strtok(strcpy(self, parent), " "), *slash = prog ? strrchr(prog, '/') : NULL;
        const char *base = slash ? slash + 1 : prog ? prog : "";
        if (!strcmp(base, "mpirun") || !strcmp(base, "mpiexec") || !strcmp(base, "orterun")) {
            snprintf(cmd, len, "%s", parent);
            return;
        }
    }
    if (!read_cmdline("/proc/self/cmdline", self, sizeof self)) {
        snprintf(self, sizeof self, "megasim");
        for (int i = 0; i < argc; i++) /* argv[0] is the subcommand */
            snprintf(self + strlen(self), sizeof self - strlen(self), " %s", argv[i]);
    }
    char np[32] = "";
    if (nranks > 1)
        snprintf(np, sizeof np, "mpirun -np %d ", nranks);
    snprintf(cmd, len, "%s%s", np, self);
}

cJSON *calib_provenance(const calib_result_t *r, const char *base_gpu, const char *base_cluster, int argc,
                        char **argv, const char *level)
{
    cJSON *p = cJSON_CreateObject();
    char buf[4096] = "", host[256] = "?";
    time_t now = time(NULL);
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    cJSON_AddStringToObject(p, "date", buf);
    gethostname(host, sizeof host - 1);
    cJSON_AddStringToObject(p, "host", host);
    cpu_model(buf, sizeof buf);
    cJSON_AddStringToObject(p, "cpu_model", buf);
    cJSON_AddStringToObject(p, "device", r->device ? "gpu" : "cpu");
    if (r->device)
        gpu_description(p, &r->gpu);
    cJSON_AddStringToObject(p, "precision",
                            r->device ? "bf16 CUDA kernels (kernels/*.cu; GEMMs through cuBLASLt, fp32 accumulation), "
                                        "one GPU per rank: peak_bf16_tflops holds the best bf16 GEMM rate measured"
                                      : "fp32 reference kernels (kernels/*_ref.c), one thread per rank: "
                                        "peak_bf16_tflops and peak_tf32_tflops both hold the fp32 GEMM rate");
    char cmd[4200];
    command_line(cmd, sizeof cmd, r->nranks, argc, argv);
    cJSON_AddStringToObject(p, "command", cmd);
    if (r->job.on) {
        char js[300];
        snprintf(js, sizeof js, "the job on the command line: its linear layers at TP %d over %d tokens, forward and "
                 "both backward GEMMs (QKV %d -> %d, projection %d -> %d, FC1 %d -> %d, FC2 %d -> %d), in gemm_eff's "
                 "samples", r->job.tp, r->job.tokens, r->job.h, r->job.qkv / r->job.tp, r->job.attn / r->job.tp,
                 r->job.h, r->job.h, r->job.fc1 / r->job.tp, r->job.ffn / r->job.tp, r->job.h);
        cJSON_AddStringToObject(p, "job_layers", js);
    }
    cJSON_AddStringToObject(p, "megasim_version", MEGASIM_VERSION);
    cJSON_AddStringToObject(p, "level", level);
    cJSON_AddNumberToObject(p, "mpi_ranks", r->nranks);
    cJSON_AddNumberToObject(p, "cores", r->ncores);
    cJSON_AddStringToObject(p, "base_gpu", base_gpu);
    cJSON_AddStringToObject(p, "base_cluster", base_cluster);
    field_sources(p, r);
    cJSON *fits = cJSON_AddObjectToObject(p, "fits");
    for (int i = 0; i < r->nfits; i++)
        cJSON_AddItemToObject(fits, r->fits[i].name, fit_json(&r->fits[i]));
    return p;
}

/* ---- report -------------------------------------------------------------------- */

static void print_fit(const calib_fitrec_t *f)
{
    int per_elem = !strcmp(f->xname, "elems"); /* a math rate: G elements / s, not GB/s */
    if (f->constant)
        printf("  %-22s %9.4f +- %.4f (mean)   rms %.4f  (%d samples)\n", f->name, f->lin.a, f->lin.se_a, f->lin.rms,
               f->lin.n);
    else if (f->linear)
        printf("  %-22s alpha %9.3f +- %.3f us   %s %9.3f +- %.3f %s   R^2 %.4f  rms %.3g us  (%d samples)\n",
               f->name, f->lin.a, f->lin.se_a, per_elem ? "rate" : "bw", f->lin.b > 0 ? 1e-3 / f->lin.b : 0,
               f->lin.b > 0 ? 1e-3 * f->lin.se_b / (f->lin.b * f->lin.b) : 0, per_elem ? "G/s " : "GB/s", f->lin.r2,
               f->lin.rms, f->lin.n);
    else
        printf("  %-22s e_max %.4f +- %.4f   x_half %.4g +- %.3g %s   R^2 %.4f  rms %.4f  (%d samples)\n", f->name,
               f->sat.e_max, f->sat.se_e_max, f->sat.x_half, f->sat.se_x_half, f->xname, f->sat.r2, f->sat.rms,
               f->sat.n);
    if (f->wfit.ok) {
        char buf[256] = "";
        for (int c = 0; c < f->wfit.ncand; c++)
            wave_candidate(buf + strlen(buf), sizeof buf - strlen(buf), &f->wfit, c);
        if (f->wfit.tile_n)
            printf("    tile %d x %d", f->wfit.tile_m, f->wfit.tile_n);
        else
            printf("    block of %d rows", f->wfit.tile_m);
        printf(" (relative rms %.4f); candidates: %s\n", f->wfit.rel_rms, buf);
    }
    printf("    residuals (%s at %s):", f->yname, f->xname);
    for (int i = 0; i < f->n; i++)
        if (!f->linear || f->constant || f->resid[i] != 0)
            printf(" %.3g@%.3g", f->resid[i], f->x[i]);
    printf("\n");
}

static void print_colls(const calib_result_t *r)
{
    for (int c = 0; c < CALIB_NCOLL; c++) {
        calib_coll_print_header(stdout, c, r->nranks, r->device ? calib_colls[c].nccl_call : calib_colls[c].mpi_call);
        for (int i = 0; i < r->coll.n; i++)
            if (calib_table_get(&r->coll, i, 0) == c)
                calib_coll_print_row(stdout, &r->coll, i);
    }
}

void calib_print_report(const calib_result_t *r, const hw_t *hw)
{
    if (r->device)
        printf("megasim calibrate: device gpu (%s, compute capability %d.%d, %d SMs; bf16 CUDA kernels), "
               "%d MPI rank(s), one GPU each\n", r->gpu.name, r->gpu.cc_major, r->gpu.cc_minor, r->gpu.sm_count,
               r->nranks);
    else
        printf("megasim calibrate: device cpu (fp32 reference kernels, one thread), %d cores, %d MPI rank(s)\n",
               r->ncores, r->nranks);
    printf("  best GEMM          %8.2f GFLOP/s  -> peak_bf16_tflops %.4g\n", r->peak_gflops,
           hw->gpu.peak_bf16_tflops);
    if (r->hbm_fitted)
        printf("  memory bandwidth   %8.2f GB/s     -> hbm_gbps %.4g (fits/hbm_bw: copies of >= 2 x %.0f MiB)\n",
               r->copy_gbps, hw->gpu.hbm_gbps, r->llc_bytes / (1 << 20));
    else
        printf("  largest copy       %8.2f GB/s     -> hbm_gbps %.4g (too few copies of >= 2 x %.0f MiB to fit)\n",
               r->copy_gbps, hw->gpu.hbm_gbps, r->llc_bytes / (1 << 20));
    printf("  kernel gap         %8.3f us\n", r->gap_us);
    if (r->host_stall_s >= 0)
        printf("  host stall         %8.3f us  (synchronous loading of one iteration of run's default job)\n",
               r->host_stall_s * 1e6);
    static const char *const math_what[MATH_RATES] = {"LayerNorm", "bias+GeLU", "AdamW", "dropout, its mask draws"};
    for (int k = 0; k < MATH_RATES; k++)
        if (r->math_gelems[k] > 0)
            printf("  %-18s %8.4f G/s (%s: elements over time)\n", math_fit_names[k], r->math_gelems[k],
                   math_what[k]);
    if (r->flash1_rel > 0)
        printf("  flash1_rel         %8.3f    (FlashAttention-1 speed / flash kernel speed, forward + backward%s)\n",
               r->flash1_rel, r->device ? "" : ": one reference serves both on the CPU");
    if (r->dropout_gdraws > 0)
        printf("  dropout draws      %8.4f G/s (the flash kernel with dropout 0.1 against without: draws over the "
               "time they add)\n", r->dropout_gdraws);
    if (r->have_coll)
        printf("  all-reduce         %8.3f us alpha, %.3f GB/s busbw -> nvlink_gbps; alpha_nvlink_us %.3f, "
               "coll_launch_us %.3f\n", r->ar_alpha_us, r->ar_bw_gbps, hw->cluster.alpha_nvlink_us,
               hw->cluster.coll_launch_us);
    else
        printf("  collectives: need >= 2 MPI ranks (mpirun -np 2%s); skipped, the base profile's collective fields "
               "kept\n", r->device ? ", one GPU each" : "");
    if (r->comm_slowdown >= 0)
        printf("  comm slowdown      %8.3f (%s; fits/comm_slowdown: the mean of %d samples, HDF5 /overlap)\n",
               r->comm_slowdown,
               r->device ? "GEMMs on rank 0 beside all-reduces on another stream of its GPU"
                         : "GEMM on rank 0 while the others all-reduce", r->overlap.n);
    else
        printf("  comm slowdown: not measured (needs %s); base value %.3f kept\n",
               r->device ? ">= 2 ranks, one GPU each" : ">= 3 ranks on as many cores", hw->gpu.comm_slowdown);
    if (r->attn_unfused.n)
        printf("  unfused attention  %d samples, raw only (HDF5 /attention_unfused: the model prices it from gemm_eff "
               "and the memory-bound rates)\n", r->attn_unfused.n);
    printf("\nfits:\n");
    for (int i = 0; i < r->nfits; i++)
        print_fit(&r->fits[i]);
    if (r->have_coll)
        print_colls(r);
}

/* ---- files ---------------------------------------------------------------------- */

static int tmp_path(const char *path, char *tmp, size_t len, char *err)
{
    if (snprintf(tmp, len, "%s.tmp.%ld", path, (long)getpid()) >= (int)len) {
        snprintf(err, OPT_ERR_LEN, "%s: the path is too long", path);
        return -1;
    }
    return 0;
}

static int commit(const char *tmp, const char *path, int rc, char *err)
{
    if (!rc && rename(tmp, path)) {
        snprintf(err, OPT_ERR_LEN, "%.500s: cannot rename %.600s onto it (%s)", path, tmp, strerror(errno));
        rc = -1;
    }
    if (rc)
        remove(tmp);
    return rc;
}

int calib_write_profile(const char *path, const hw_t *hw, const cJSON *prov, char *err)
{
    char tmp[4200];
    if (tmp_path(path, tmp, sizeof tmp, err))
        return -1;
    cJSON *o = hw_to_json(hw);
    cJSON_AddItemToObject(o, "provenance", cJSON_Duplicate(prov, 1));
    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    FILE *f = fopen(tmp, "w");
    int rc = !f || !s || fputs(s, f) < 0 || fputc('\n', f) < 0;
    if (f && fclose(f))
        rc = 1;
    if (rc)
        snprintf(err, OPT_ERR_LEN, "%.500s: cannot write %.600s (%s)", path, tmp, strerror(errno));
    free(s);
    return commit(tmp, path, rc ? -1 : 0, err);
}

/* HDF5: one group per table, one float64 dataset per column. */
static int h5_f64_attr(hid_t loc, const char *name, double v)
{
    hid_t s = H5Screate(H5S_SCALAR), a = -1;
    int ok = s >= 0 && (a = H5Acreate2(loc, name, H5T_IEEE_F64LE, s, H5P_DEFAULT, H5P_DEFAULT)) >= 0 &&
             H5Awrite(a, H5T_NATIVE_DOUBLE, &v) >= 0;
    if (a >= 0)
        H5Aclose(a);
    if (s >= 0)
        H5Sclose(s);
    return ok ? 0 : -1;
}

static int h5_column(hid_t g, hid_t dcpl, const char *name, const double *v, hsize_t n)
{
    hid_t s = H5Screate_simple(1, &n, NULL), d = -1;
    int ok = s >= 0 && (d = H5Dcreate2(g, name, H5T_IEEE_F64LE, s, H5P_DEFAULT, dcpl, H5P_DEFAULT)) >= 0 &&
             (n == 0 || H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
    if (d >= 0)
        H5Dclose(d);
    if (s >= 0)
        H5Sclose(s);
    return ok ? 0 : -1;
}

static int h5_table(hid_t file, hid_t gcpl, hid_t dcpl, const calib_table_t *t)
{
    char path[64];
    snprintf(path, sizeof path, "/%s", t->name);
    hid_t g = H5Gcreate2(file, path, H5P_DEFAULT, gcpl, H5P_DEFAULT);
    int rc = g < 0;
    double *col = malloc(sizeof(double) * (t->n + 1));
    for (int c = 0; !rc && c < t->ncol; c++) {
        for (int i = 0; i < t->n; i++)
            col[i] = calib_table_get(t, i, c);
        rc = h5_column(g, dcpl, t->cols[c], col, (hsize_t)t->n);
    }
    free(col);
    if (g >= 0)
        H5Gclose(g);
    return rc ? -1 : 0;
}

static int h5_fit(hid_t parent, hid_t gcpl, hid_t dcpl, const calib_fitrec_t *f)
{
    hid_t g = H5Gcreate2(parent, f->name, H5P_DEFAULT, gcpl, H5P_DEFAULT);
    if (g < 0)
        return -1;
    cJSON *j = fit_json(f);
    int rc = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, j)
    {
        rc |= cJSON_IsNumber(m) ? h5_f64_attr(g, m->string, m->valuedouble) : h5_attr_str(g, m->string, m->valuestring);
    }
    cJSON_Delete(j);
    rc |= h5_column(g, dcpl, "x", f->x, (hsize_t)f->n) | h5_column(g, dcpl, "y", f->y, (hsize_t)f->n) |
          h5_column(g, dcpl, "residual", f->resid, (hsize_t)f->n) |
          (f->wave ? h5_column(g, dcpl, "wave_eff", f->wave, (hsize_t)f->n) : 0);
    H5Gclose(g);
    return rc ? -1 : 0;
}

int calib_write_h5(const char *path, const calib_result_t *r, const cJSON *config, const cJSON *prov, char *err)
{
    char tmp[4200];
    if (tmp_path(path, tmp, sizeof tmp, err))
        return -1;
    H5E_auto2_t old_fn = NULL;
    void *old_data = NULL;
    H5Eget_auto2(H5E_DEFAULT, &old_fn, &old_data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* our message replaces HDF5's error stack */
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE), gcpl = H5Pcreate(H5P_GROUP_CREATE), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_obj_track_times(fcpl, 0), H5Pset_obj_track_times(gcpl, 0), H5Pset_obj_track_times(dcpl, 0);
    hid_t file = H5Fcreate(tmp, H5F_ACC_TRUNC, fcpl, H5P_DEFAULT), fg = -1;
    int rc = file < 0;
    char *cs = cJSON_PrintUnformatted(config), *ps = cJSON_PrintUnformatted(prov);
    rc = rc || h5_attr_str(file, "config", cs) || h5_attr_str(file, "provenance", ps) ||
         h5_f64_attr(file, "mpi_ranks", r->nranks) ||
         h5_attr_str(file, "device", r->device ? "gpu" : "cpu") ||
         h5_attr_str(file, "collectives_coll", r->device ? "0 all_reduce, 1 all_gather, 2 reduce_scatter, 3 alltoall, "
                                                           "4 broadcast, 5 sendrecv (ncclAllReduce ... ncclSend/ncclRecv)"
                                                         : "0 all_reduce, 1 all_gather, 2 reduce_scatter, 3 alltoall, "
                                                           "4 broadcast, 5 sendrecv (MPI_Allreduce ... MPI_Sendrecv)") ||
         h5_attr_str(file, "memory_kernel", r->device ? "0 copy (cudaMemcpyAsync), 1 kern_layernorm_fwd_cuda, "
                                                        "2 kern_bias_gelu_fwd_cuda, 3 kern_adamw_cuda (4 dropout_fwd "
                                                        "is not timed on a GPU: calib/bench_gpu.c)"
                                                      : "0 copy (memcpy), 1 kern_layernorm_fwd_ref, "
                                                        "2 kern_bias_gelu_fwd_ref, 3 kern_adamw_ref, "
                                                        "4 kern_dropout_ref") ||
         h5_attr_str(file, "attention_unfused_use",
                     "the unfused kernels (GEMM, masked softmax, GEMM), raw samples only: the model prices unfused "
                     "attention from gemm_eff and the memory-bound rates (model/layer.c), no profile field; flops "
                     "as the model counts them, over all T x T pairs") ||
         h5_attr_str(file, "gemm_pass", "0 forward, 1 backward dinp, 2 backward dweight (fp32, beta 1)") ||
         h5_table(file, gcpl, dcpl, &r->gemm) ||
         h5_table(file, gcpl, dcpl, &r->attn) || h5_table(file, gcpl, dcpl, &r->attn_unfused) ||
         h5_table(file, gcpl, dcpl, &r->mem) ||
         (r->have_coll && h5_table(file, gcpl, dcpl, &r->coll)) ||
         (r->overlap.n > 0 && h5_table(file, gcpl, dcpl, &r->overlap)) ||
         (fg = H5Gcreate2(file, "/fits", H5P_DEFAULT, gcpl, H5P_DEFAULT)) < 0;
    for (int i = 0; !rc && i < r->nfits; i++)
        rc = h5_fit(fg, gcpl, dcpl, &r->fits[i]);
    free(cs), free(ps);
    if (fg >= 0)
        H5Gclose(fg);
    if (file >= 0 && H5Fclose(file) < 0)
        rc = 1;
    H5Pclose(fcpl), H5Pclose(gcpl), H5Pclose(dcpl);
    H5Eset_auto2(H5E_DEFAULT, old_fn, old_data);
    if (rc)
        snprintf(err, OPT_ERR_LEN, "%.500s: HDF5 could not write %.600s", path, tmp);
    return commit(tmp, path, rc ? -1 : 0, err);
}

void calib_result_free(calib_result_t *r)
{
    calib_table_free(&r->gemm), calib_table_free(&r->attn), calib_table_free(&r->attn_unfused);
    calib_table_free(&r->mem), calib_table_free(&r->coll), calib_table_free(&r->overlap);
    for (int i = 0; i < r->nfits; i++)
        free(r->fits[i].x), free(r->fits[i].y), free(r->fits[i].resid), free(r->fits[i].wave);
    r->nfits = 0;
}
