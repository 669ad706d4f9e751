/* calib/bench: timing harness, sample tables and the compute benchmarks of
 * the CPU backend: the linear layers' GEMMs (forward and both backward
 * passes), flash and unfused attention and memory-bound kernels of the
 * reference library (kernels/, fp32, one thread), plus a plain copy. The
 * table layouts, FLOP and byte counts here are the GPU's too (bench_gpu.c). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "calib/calib.h"

#include "kernels/attention.h"
#include "kernels/dropout.h"
#include "kernels/gelu.h"
#include "kernels/layernorm.h"
#include "kernels/matmul.h"
#include "kernels/optimizer.h"
#include "model/workload.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- tables ------------------------------------------------------------ */

void calib_table_init(calib_table_t *t, const char *name, const char *const *cols, int ncol)
{
    memset(t, 0, sizeof *t);
    t->name = name, t->ncol = ncol;
    for (int i = 0; i < ncol; i++)
        t->cols[i] = cols[i];
}

void calib_table_add(calib_table_t *t, const double *row)
{
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        t->rows = realloc(t->rows, sizeof(double) * t->cap * t->ncol);
        if (!t->rows) {
            fprintf(stderr, "megasim calibrate: out of memory (%s:%d)\n", __FILE__, __LINE__);
            exit(1);
        }
    }
    memcpy(t->rows + (size_t)t->n++ * t->ncol, row, sizeof(double) * t->ncol);
}

double calib_table_get(const calib_table_t *t, int row, int col) { return t->rows[(size_t)row * t->ncol + col]; }

void calib_table_free(calib_table_t *t)
{
    free(t->rows);
    t->rows = NULL, t->n = t->cap = 0;
}

/* ---- timing ------------------------------------------------------------ */

double calib_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Quantile q of sorted v[0..n) with linear interpolation. */
static double quantile(const double *v, int n, double q)
{
    double pos = q * (n - 1);
    int i = (int)pos;
    return i + 1 < n ? v[i] + (pos - i) * (v[i + 1] - v[i]) : v[n - 1];
}

calib_stat_t calib_stats(double *v, int reps, int inner)
{
    qsort(v, reps, sizeof v[0], cmp_double);
    return (calib_stat_t){quantile(v, reps, 0.5), v[0], v[reps - 1], quantile(v, reps, 0.25),
                          quantile(v, reps, 0.75), reps, inner, 0.0};
}

calib_stat_t calib_time(void (*fn)(void *), void *ctx, int warmup, int reps, double min_sample_s)
{
    double t0 = calib_now_s();
    fn(ctx); /* the first warm-up call also sizes the inner loop */
    double one = calib_now_s() - t0;
    for (int i = 1; i < warmup; i++)
        fn(ctx);
    int inner = one >= min_sample_s ? 1 : (int)fmin(1e6, ceil(min_sample_s / fmax(one, 1e-9)));
    double v[64];
    reps = reps > 64 ? 64 : reps;
    for (int r = 0; r < reps; r++) {
        double s = calib_now_s();
        for (int i = 0; i < inner; i++)
            fn(ctx);
        v[r] = (calib_now_s() - s) / inner;
    }
    return calib_stats(v, reps, inner);
}

const char *const calib_level_names[3] = {"full", "quick", "tiny"};

calib_plan_t calib_plan(calib_level_t level)
{
    switch (level) {
    case CALIB_TINY:
        return (calib_plan_t){level, 1, 3, 2e-4, {0}};
    case CALIB_QUICK:
        return (calib_plan_t){level, 1, 7, 2e-3, {0}};
    default:
        return (calib_plan_t){level, 2, 9, 5e-3, {0}};
    }
}

void calib_job_layers(const calib_plan_t *p, calib_table_t *t,
                      void (*point)(const calib_plan_t *p, calib_table_t *t, int N, int C, int OC, int tp, int h))
{
    const calib_job_shapes_t *j = &p->job;
    if (!j->on)
        return;
    point(p, t, j->tokens, j->h, j->qkv / j->tp, j->tp, j->h);
    point(p, t, j->tokens, j->attn / j->tp, j->h, j->tp, j->h);
    point(p, t, j->tokens, j->h, j->fc1 / j->tp, j->tp, j->h);
    point(p, t, j->tokens, j->ffn / j->tp, j->h, j->tp, j->h);
    if (j->expert_rows > 0) { /* an expert's GEMMs: few rows, where small GEMMs lose most */
        point(p, t, j->expert_rows, j->h, j->expert_fc1, j->etp, j->h);
        point(p, t, j->expert_rows, j->expert_ffn, j->h, j->etp, j->h);
    }
}

/* n floats from N(0, sigma^2): Box-Muller on calib_rand_floats' pairs. */
static float *calib_normal_floats(size_t n, unsigned seed, double sigma)
{
    float *p = calib_rand_floats(n + 1, seed); /* uniform in [-1, 1), pairs of them */
    for (size_t i = 0; i < n; i += 2) {
        const double two_pi = 6.283185307179586;
        double u1 = 1 - 0.5 * (p[i] + 1.0), u2 = 0.5 * (p[i + 1] + 1.0), r = sigma * sqrt(-2 * log(u1));
        p[i] = (float)(r * cos(two_pi * u2));
        p[i + 1] = (float)(r * sin(two_pi * u2));
    }
    return p;
}

double calib_gelu_input_std(const calib_job_shapes_t *job)
{
    return job->on ? JOB_INIT_METHOD_STD * sqrt((double)job->h) : 1.0;
}

float *calib_rand_floats(size_t n, unsigned seed)
{
    float *p = malloc(sizeof(float) * (n ? n : 1));
    if (!p) {
        fprintf(stderr, "megasim calibrate: out of memory for %zu floats (%s:%d)\n", n, __FILE__, __LINE__);
        exit(1);
    }
    for (size_t i = 0; i < n; i++) /* small LCG: values in [-1, 1) */
        p[i] = (float)((seed = seed * 1664525u + 1013904223u) >> 8) * 0x1.0p-23f - 1.0f;
    return p;
}

/* FLOPs of one unfused attention call as the model counts them
 * (model/layer.c attention_core): the GEMMs over all T x T pairs (the mask
 * saves no work), 2 of 2 T^2 HS per head forward (QK^T, PV), 4 backward. */
static double calib_attn_unfused_flops(int B, int T, int NH, int HS, int bwd)
{
    return 4.0 * B * NH * (double)T * T * HS * (bwd ? 2 : 1);
}

/* ---- tables: one layout for both devices (calib.h) ------------------------ */

void calib_gemm_table(calib_table_t *t)
{
    static const char *const cols[] = {"m", "n", "k", "flops", "time_med_s", "time_min_s",
                                       "time_max_s", "gflops", "tp", "pass", "hidden", "sm_mhz"};
    calib_table_init(t, "gemm", cols, 12);
}

void calib_attn_table(calib_table_t *t)
{
    static const char *const cols[] = {"bwd", "T", "NH", "HS", "flops", "time_med_s", "time_min_s",
                                       "time_max_s", "gflops", "NKV", "window", "B", "sm_mhz"};
    calib_table_init(t, "attention", cols, 13);
}

void calib_attn_unfused_table(calib_table_t *t)
{
    calib_attn_table(t);
    t->name = "attention_unfused";
}

void calib_mem_table(calib_table_t *t)
{
    static const char *const cols[] = {"kernel", "bytes", "time_med_s", "time_min_s", "time_max_s", "gbps", "elems"};
    calib_table_init(t, "memory", cols, 7);
}

void calib_attn_dropout_table(calib_table_t *t)
{
    static const char *const cols[] = {"bwd", "B", "T", "NH", "NKV", "HS", "window", "time_plain_s",
                                       "time_dropout_s", "draws"};
    calib_table_init(t, "attention_dropout", cols, 10);
}

void calib_sustained_table(calib_table_t *t)
{
    static const char *const cols[] = {"t_s", "sm_mhz", "power_w", "capped", "tflops"};
    calib_table_init(t, "sustained", cols, 5);
}

void calib_sustained_row(calib_table_t *t, double t_s, double sm_mhz, double power_w, double capped, double tflops)
{
    calib_table_add(t, (double[]){t_s, sm_mhz, power_w, capped, tflops});
}

void calib_attn_dropout_row(calib_table_t *t, int bwd, int B, int T, int NH, int NKV, int HS, int window,
                            double plain_s, double dropout_s)
{
    double draws = (double)B * NH * workload_causal_keys(T, window > 0 ? window : T);
    calib_table_add(t, (double[]){bwd, B, T, NH, NKV, HS, window, plain_s, dropout_s, draws});
}

void calib_overlap_table(calib_table_t *t)
{
    static const char *const cols[] = {"gemm_n", "bytes", "alone_s", "busy_s", "slowdown"};
    calib_table_init(t, "overlap", cols, 5);
}

void calib_overlap_row(calib_table_t *t, int n, double bytes, double alone_s, double busy_s)
{
    calib_table_add(t, (double[]){n, bytes, alone_s, busy_s, busy_s / alone_s - 1});
}

void calib_gemm_row(calib_table_t *t, int m, int n, int k, const calib_stat_t *s, int tp, int pass, int hidden)
{
    double flops = 2.0 * m * n * k;
    calib_table_add(t, (double[]){m, n, k, flops, s->med_s, s->min_s, s->max_s, flops / s->med_s * 1e-9, tp, pass,
                                  hidden, s->sm_mhz});
}

static void attn_row(calib_table_t *t, double flops, int bwd, int B, int T, int NH, int NKV, int HS, int window,
                     const calib_stat_t *s)
{
    calib_table_add(t, (double[]){bwd, T, NH, HS, flops, s->med_s, s->min_s, s->max_s, flops / s->med_s * 1e-9,
                                  NKV, window, B, s->sm_mhz});
}

void calib_attn_row(calib_table_t *t, int bwd, int B, int T, int NH, int NKV, int HS, int window,
                    const calib_stat_t *s)
{
    attn_row(t, calib_attn_flops(B, T, NH, HS, window, bwd), bwd, B, T, NH, NKV, HS, window, s);
}

void calib_attn_unfused_row(calib_table_t *t, int bwd, int B, int T, int NH, int NKV, int HS, int window,
                            const calib_stat_t *s)
{
    attn_row(t, calib_attn_unfused_flops(B, T, NH, HS, bwd), bwd, B, T, NH, NKV, HS, window, s);
}

void calib_mem_row(calib_table_t *t, int kind, double bytes, double elems, const calib_stat_t *s)
{
    calib_table_add(t, (double[]){kind, bytes, s->med_s, s->min_s, s->max_s, bytes / s->med_s * 1e-9, elems});
}

double calib_attn_flops(int B, int T, int NH, int HS, int window, int bwd)
{
    double keys = workload_causal_keys(T, window > 0 ? window : T);
    return 4.0 * B * NH * HS * keys * (bwd ? 2.5 : 1);
}

double calib_mem_bytes(int kind, long n, int act_bytes, int row)
{
    const double per_elem[CALIB_MEM_KINDS] = {2.0 * act_bytes, 4.0 * act_bytes, 2.0 * act_bytes, 28,
                                              2.0 * act_bytes + 1, 4.0 * act_bytes + 1};
    return per_elem[kind] * n + (kind == 1 || kind == 5 ? 8.0 * (n / row) : 0);
}

/* ---- GEMM -------------------------------------------------------------- */

void calib_linear_dims(int N, int C, int OC, int pass, int *m, int *n, int *k)
{
    *m = pass == 2 ? OC : N, *n = pass == 0 ? OC : C, *k = pass == 0 ? C : pass == 1 ? OC : N;
}

void calib_linear_pass_ref(int pass, float *y, float *dx, float *dw, const float *x, const float *w, int N, int C,
                           int OC)
{
    if (pass == 0)
        kern_matmul_fwd_ref(y, NULL, x, w, NULL, N, C, OC);
    else if (pass == 1) /* kern_matmul_bwd_ref's dinp GEMM: dy (N, OC) @ w (OC, C) */
        kern_gemm_ref(dx, y, w, N, C, OC, 0, 0, OC, C, C, 0.0f);
    else /* its dweight GEMM: dw (OC, C) += dy^T @ x (N, C) */
        kern_gemm_ref(dw, y, x, OC, C, N, 1, 0, OC, C, C, 1.0f);
}

typedef struct {
    float *x, *w, *y, *dx, *dw; /* inp (N, C), weight (OC, C), out = dout (N, OC), dinp (N, C), dweight (OC, C) */
    int N, C, OC, pass;
} gemm_ctx_t;

static void gemm_call(void *p)
{
    gemm_ctx_t *g = p;
    calib_linear_pass_ref(g->pass, g->y, g->dx, g->dw, g->x, g->w, g->N, g->C, g->OC);
}

/* Passes 0..last of a linear layer over N tokens, C -> OC (rows:
 * pass 0, 1, 2 as the GPU's; the square grid runs the forward only). */
static void gemm_point(const calib_plan_t *p, calib_table_t *t, int N, int C, int OC, int last, int tp, int h)
{
    gemm_ctx_t g = {calib_rand_floats((size_t)N * C, 1), calib_rand_floats((size_t)OC * C, 2),
                    calib_rand_floats((size_t)N * OC, 3), NULL, NULL, N, C, OC, 0};
    if (last > 0)
        g.dx = calib_rand_floats((size_t)N * C, 4), g.dw = calib_rand_floats((size_t)OC * C, 5);
    for (g.pass = 0; g.pass <= last; g.pass++) {
        calib_stat_t s = calib_time(gemm_call, &g, p->warmup, p->reps, p->min_sample_s);
        int m, n, k;
        calib_linear_dims(N, C, OC, g.pass, &m, &n, &k);
        calib_gemm_row(t, m, n, k, &s, tp, g.pass, h);
    }
    free(g.x), free(g.w), free(g.y), free(g.dx), free(g.dw);
}

/* One linear layer's three GEMMs (calib_job_layers' point). */
static void linear_point(const calib_plan_t *p, calib_table_t *t, int N, int C, int OC, int tp, int h)
{
    gemm_point(p, t, N, C, OC, 2, tp, h);
}

/* The four linear layers of a GPT block with tensor parallelism tp
 * (Megatron-LM's column/row split): QKV (h -> 3h/tp), attention projection
 * (h/tp -> h), MLP up (h -> 4h/tp), MLP down (4h/tp -> h), over `tokens`
 * rows, each forward and both backward GEMMs as the CPU backend runs them
 * (kern_matmul_fwd_ref, kern_matmul_bwd_ref); the same for the job named
 * on the command line, if any (calib_job_layers); then square forward
 * GEMMs on a log grid (tp = 0 in the table). */
static void calib_bench_gemm(const calib_plan_t *p, calib_table_t *t)
{
    calib_gemm_table(t);
    int h = p->level == CALIB_TINY ? 256 : 768; /* GPT-2 small: h 768 */
    int tokens = p->level == CALIB_FULL ? 1024 : p->level == CALIB_QUICK ? 256 : 64;
    int top = p->level == CALIB_FULL ? 1024 : p->level == CALIB_QUICK ? 512 : 128;
    for (int tp = 1; tp <= 2; tp++) {
        gemm_point(p, t, tokens, h, 3 * h / tp, 2, tp, h);
        gemm_point(p, t, tokens, h / tp, h, 2, tp, h);
        gemm_point(p, t, tokens, h, 4 * h / tp, 2, tp, h);
        gemm_point(p, t, tokens, 4 * h / tp, h, 2, tp, h);
    }
    calib_job_layers(p, t, linear_point);
    for (int s = 8; s <= top; s *= 2)
        gemm_point(p, t, s, s, s, 0, 0, 0);
}

/* ---- attention --------------------------------------------------------- */

typedef struct {
    float *out, *lse, *q, *k, *v, *dq, *dk, *dv, *dout, *att; /* att (B, NH, T, T): unfused only */
    kern_attn_shape s;
} attn_ctx_t;

static void attn_fwd_call(void *p)
{
    attn_ctx_t *a = p;
    kern_attention_fwd_ref(a->out, a->lse, a->q, a->k, a->v, a->s);
}

static void attn_bwd_call(void *p)
{
    attn_ctx_t *a = p;
    kern_attention_bwd_ref(a->dq, a->dk, a->dv, a->dout, a->q, a->k, a->v, a->out, a->lse, a->s);
}

static void unfused_fwd_call(void *p)
{
    attn_ctx_t *a = p;
    kern_attention_unfused_fwd_ref(a->out, a->att, a->q, a->k, a->v, a->s);
}

static void unfused_bwd_call(void *p)
{
    attn_ctx_t *a = p;
    kern_attention_unfused_bwd_ref(a->dq, a->dk, a->dv, a->dout, a->q, a->k, a->v, a->att, a->s);
}

/* Forward then backward (which reads the forward's out and lse, or att)
 * of one shape, batch 1: flash rows into t, or unfused rows into t. */
static void attn_point(const calib_plan_t *p, calib_table_t *t, int unfused, int T, int NH, int NKV, int HS,
                       int window)
{
    kern_attn_shape s = {.B = 1, .T = T, .NH = NH, .NKV = NKV, .HS = HS, .window = window, .drop = KERN_NO_DROPOUT};
    size_t nq = (size_t)T * NH * HS, nkv = (size_t)T * NKV * HS;
    attn_ctx_t a = {calib_rand_floats(nq, 1), calib_rand_floats((size_t)NH * T, 2), calib_rand_floats(nq, 3),
                    calib_rand_floats(nkv, 4), calib_rand_floats(nkv, 5), calib_rand_floats(nq, 6),
                    calib_rand_floats(nkv, 7), calib_rand_floats(nkv, 8), calib_rand_floats(nq, 9),
                    unfused ? calib_rand_floats((size_t)NH * T * T, 10) : NULL, s};
    for (int bwd = 0; bwd <= 1; bwd++) {
        void (*fn)(void *) = unfused ? (bwd ? unfused_bwd_call : unfused_fwd_call)
                                     : bwd   ? attn_bwd_call
                                             : attn_fwd_call;
        calib_stat_t st = calib_time(fn, &a, p->warmup, p->reps, p->min_sample_s);
        (unfused ? calib_attn_unfused_row : calib_attn_row)(t, bwd, s.B, T, NH, NKV, HS, window, &st);
    }
    free(a.out), free(a.lse), free(a.q), free(a.k), free(a.v);
    free(a.dq), free(a.dk), free(a.dv), free(a.dout), free(a.att);
}

/* Flash: sequences 16 to the level's top at nh heads of 64; then at half
 * the top: other head counts (not --tiny), twice the heads at half the
 * size (the same width), GQA (a quarter of the KV heads), and at the top
 * a sliding window of a quarter of it. Unfused: the same sequences at nh
 * heads of 64, then heads of 16, 32 and 128 at half the top: its GEMMs'
 * time grows with the head size and its softmax's does not, which
 * fit_softmax tells apart (calib/profile_attn.c). */
static void calib_bench_attention(const calib_plan_t *p, calib_table_t *t, calib_table_t *unfused)
{
    calib_attn_table(t);
    calib_attn_unfused_table(unfused);
    int top = p->level == CALIB_FULL ? 2048 : p->level == CALIB_QUICK ? 512 : 128;
    int nh = p->level == CALIB_FULL ? 12 : 4;
    for (int T = 16; T <= top; T *= 2)
        attn_point(p, t, 0, T, nh, nh, 64, 0);
    if (p->level != CALIB_TINY) /* heads: the same T, fewer and more of them */
        for (int h = 1; h <= 2 * nh; h *= 2)
            if (h != nh)
                attn_point(p, t, 0, top / 2, h, h, 64, 0);
    attn_point(p, t, 0, top / 2, 2 * nh, 2 * nh, 32, 0);
    attn_point(p, t, 0, top / 2, nh, nh / 4, 64, 0);
    attn_point(p, t, 0, top, nh, nh, 64, top / 4);
    for (int T = 16; T <= top; T *= 2)
        attn_point(p, unfused, 1, T, nh, nh, 64, 0);
    for (int hs = 16; hs <= 128; hs *= 2)
        if (hs != 64)
            attn_point(p, unfused, 1, top / 2, nh, nh, hs, 0);
}

/* ---- memory-bound kernels ------------------------------------------------ */

#define LN_C 768 /* row width of the LayerNorm and bias+GeLU samples (GPT-2 small) */

typedef struct {
    int kind;
    long n;      /* elements (copy, adamw) or rows x LN_C */
    float *x[9];
} mem_ctx_t;

static void mem_call(void *p)
{
    mem_ctx_t *m = p;
    float **x = m->x;
    int rows = (int)(m->n / LN_C);
    switch (m->kind) {
    case 0:
        memcpy(x[0], x[1], sizeof(float) * m->n);
        break;
    case 1: /* residual, out, mean, rstd <- inp, skip, w, b */
        kern_layernorm_fwd_ref(x[0], x[1], x[2], x[3], x[4], x[5], NULL, NULL, x[6], x[7], rows, LN_C);
        break;
    case 2:
        kern_bias_gelu_fwd_ref(x[0], x[1], x[2], rows, LN_C);
        break;
    case 4: /* the hidden dropout's forward: out, its mask (in x[2]) <- inp */
        kern_dropout_ref(x[0], (uint8_t *)x[2], x[1], m->n, kern_dropout_make(0.1f, 1, 0, 0));
        break;
    case 5: { /* kind 1 with Megatron's bias-dropout-add on inp before the norm, mask in x[8] */
        kern_dropout d = kern_dropout_make(0.1f, 1, kern_dropout_site(0, KERN_DROP_AFTER_ATTN), 0);
        kern_layernorm_fwd_ref(x[0], x[1], x[2], x[3], x[4], x[5], &d, (uint8_t *)x[8], x[6], x[7], rows, LN_C);
        break;
    }
    default: {
        kern_opt_tensor ts = {x[0], x[1], x[2], x[3], NULL, m->n};
        kern_adamw_ref(&ts, 1, (kern_opt_hparams){1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, 1.0f});
    }
    }
}

/* Buffers of n floats each kind reads or writes (mem_call's x[0..]); the
 * others (LayerNorm's w and b, bias+GeLU's bias) hold one row. */
static const int mem_nbufs[CALIB_MEM_KINDS] = {2, 6, 2, 4, 3, 6};

static void mem_point(const calib_plan_t *p, calib_table_t *t, int kind, double target_bytes)
{
    /* LayerNorm with dropout over LayerNorm's elements at the same size, so that the two pair up */
    long n = (long)(target_bytes / calib_mem_bytes(kind == 5 ? 1 : kind, 1, 4, LN_C));
    if (kind == 1 || kind == 2 || kind == 5)
        n = (n / LN_C > 0 ? n / LN_C : 1) * LN_C;
    mem_ctx_t m = {kind, n, {0}};
    for (int i = 0; i < 8; i++) /* bias+GeLU's input like the job's pre-activations (calib_gelu_input_std) */
        m.x[i] = kind == 2 && i == 1 ? calib_normal_floats((size_t)n, 11 + i, calib_gelu_input_std(&p->job))
                                     : calib_rand_floats(i < mem_nbufs[kind] ? n : LN_C, 11 + i);
    m.x[8] = kind == 5 ? malloc((size_t)n) : NULL; /* the 1-byte mask */
    if (kind == 2) /* its bias 0, as initialised */
        memset(m.x[2], 0, sizeof(float) * LN_C);
    if (kind == 3) /* v must be >= 0 */
        for (long i = 0; i < n; i++)
            m.x[3][i] = fabsf(m.x[3][i]);
    calib_stat_t s = calib_time(mem_call, &m, p->warmup, p->reps, p->min_sample_s);
    calib_mem_row(t, kind, calib_mem_bytes(kind, n, 4, LN_C), (double)n, &s);
    for (int i = 0; i < 9; i++)
        free(m.x[i]);
}

#define CALIB_LLC_DEFAULT_BYTES (32.0 * (1 << 20)) /* when sysfs does not say */

static double calib_llc_bytes(void)
{
    double best = 0;
    for (int i = 0; i < 8; i++) {
        char path[96], type[32] = "";
        unsigned long kib = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        FILE *f = fopen(path, "r");
        if (!f)
            break;
        int ok = fscanf(f, "%31s", type) == 1;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (!ok || !strcmp(type, "Instruction") || !(f = fopen(path, "r")))
            continue;
        if (fscanf(f, "%luK", &kib) == 1)
            best = fmax(best, kib * 1024.0);
        fclose(f);
    }
    return best > 0 ? best : CALIB_LLC_DEFAULT_BYTES;
}

double calib_dram_cache_bytes(calib_level_t level)
{
    double llc = calib_llc_bytes();
    return level == CALIB_TINY && llc > CALIB_TINY_CACHE_BYTES ? CALIB_TINY_CACHE_BYTES : llc;
}

/* Every kind from 4 KiB (LayerNorm: a few rows) by x4 up to the level's
 * top (1 GiB, 128 MiB --quick, 8 MiB --tiny). The copy stops short of
 * twice the last-level cache there and goes on from it by x2 up to
 * max(top, 8 x LLC): at least three DRAM-resident sizes, which the
 * memory-bandwidth fit (calib/profile.c) takes (calib_dram_cache_bytes:
 * --tiny's may be cached). */
static void calib_bench_memory(const calib_plan_t *p, calib_table_t *t)
{
    calib_mem_table(t);
    double top = p->level == CALIB_FULL ? 1 << 30 : p->level == CALIB_QUICK ? 1 << 27 : 1 << 23;
    double dram = 2 * calib_dram_cache_bytes(p->level);
    for (int kind = 0; kind < CALIB_MEM_KINDS; kind++)
        for (double b = 1 << 12; b <= top && (kind || b < dram); b *= 4)
            if (b >= calib_mem_bytes(kind == 5 ? 1 : kind, kind == 1 || kind == 2 || kind == 5 ? LN_C : 1, 4, LN_C))
                mem_point(p, t, kind, b);
    for (double b = dram; b <= fmax(top, 4 * dram); b *= 2)
        mem_point(p, t, 0, b);
}

/* The CPU backend runs its one flash reference for both flash kinds (they
 * differ in GPU work partition only), so FlashAttention-1 is as fast. */
static double cpu_flash1_rel(const calib_plan_t *p)
{
    (void)p;
    return 1.0;
}

const calib_device_t calib_cpu_device = {
    .name = "cpu",
    .gemm_what = "GEMM (kern_matmul_fwd_ref, kern_matmul_bwd_ref's two GEMMs, kern_gemm_ref)",
    .attn_what = "attention forward and backward, flash and unfused (kern_attention_*_ref)",
    .mem_what = "memory-bound kernels (copy, LayerNorm, bias+GeLU, AdamW, dropout, LayerNorm with dropout)",
    .coll_what = "collectives over MPI",
    .gemm = calib_bench_gemm,
    .attention = calib_bench_attention,
    .memory = calib_bench_memory,
    .collectives = calib_bench_collectives,
    .comm_slowdown = calib_bench_comm_slowdown,
    .flash1_rel = cpu_flash1_rel,
};
