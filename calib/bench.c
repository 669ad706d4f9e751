/* calib/bench: timing harness, sample tables and the compute benchmarks of
 * the CPU backend: GEMM, flash attention and memory-bound kernels of the
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
                          quantile(v, reps, 0.75), reps, inner};
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

calib_plan_t calib_plan(calib_level_t level)
{
    switch (level) {
    case CALIB_TINY:
        return (calib_plan_t){level, 1, 3, 2e-4};
    case CALIB_QUICK:
        return (calib_plan_t){level, 1, 7, 2e-3};
    default:
        return (calib_plan_t){level, 2, 9, 5e-3};
    }
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

/* ---- tables: one layout for both devices (calib.h) ------------------------ */

void calib_gemm_table(calib_table_t *t)
{
    static const char *const cols[] = {"m", "n", "k", "flops", "time_med_s", "time_min_s",
                                       "time_max_s", "gflops", "tp", "pass", "hidden"};
    calib_table_init(t, "gemm", cols, 11);
}

void calib_attn_table(calib_table_t *t)
{
    static const char *const cols[] = {"bwd", "T", "NH", "HS", "flops", "time_med_s", "time_min_s",
                                       "time_max_s", "gflops", "NKV", "window", "B"};
    calib_table_init(t, "attention", cols, 12);
}

void calib_mem_table(calib_table_t *t)
{
    static const char *const cols[] = {"kernel", "bytes", "time_med_s", "time_min_s", "time_max_s", "gbps", "elems"};
    calib_table_init(t, "memory", cols, 7);
}

void calib_gemm_row(calib_table_t *t, int m, int n, int k, const calib_stat_t *s, int tp, int pass, int hidden)
{
    double flops = 2.0 * m * n * k;
    calib_table_add(t, (double[]){m, n, k, flops, s->med_s, s->min_s, s->max_s, flops / s->med_s * 1e-9, tp, pass,
                                  hidden});
}

void calib_attn_row(calib_table_t *t, int bwd, int B, int T, int NH, int NKV, int HS, int window,
                    const calib_stat_t *s)
{
    double flops = calib_attn_flops(B, T, NH, HS, window, bwd);
    calib_table_add(t, (double[]){bwd, T, NH, HS, flops, s->med_s, s->min_s, s->max_s, flops / s->med_s * 1e-9,
                                  NKV, window, B});
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
    const double per_elem[CALIB_MEM_KINDS] = {2.0 * act_bytes, 4.0 * act_bytes, 2.0 * act_bytes, 28, 2.0 * act_bytes + 1};
    return per_elem[kind] * n + (kind == 1 ? 8.0 * (n / row) : 0);
}

/* ---- GEMM -------------------------------------------------------------- */

typedef struct {
    float *c, *a, *b;
    int m, n, k;
} gemm_ctx_t;

/* c (m, n) = a (m, k) @ b (n, k)^T: the linear layer's forward layout. */
static void gemm_call(void *p)
{
    gemm_ctx_t *g = p;
    kern_gemm_ref(g->c, g->a, g->b, g->m, g->n, g->k, 0, 1, g->k, g->k, g->n, 0.0f);
}

static void gemm_point(const calib_plan_t *p, calib_table_t *t, int m, int n, int k, int tp, int h)
{
    gemm_ctx_t g = {calib_rand_floats((size_t)m * n, 1), calib_rand_floats((size_t)m * k, 2),
                    calib_rand_floats((size_t)n * k, 3), m, n, k};
    calib_stat_t s = calib_time(gemm_call, &g, p->warmup, p->reps, p->min_sample_s);
    calib_gemm_row(t, m, n, k, &s, tp, 0, h);
    free(g.c), free(g.a), free(g.b);
}

/* The four GEMMs of a GPT block's forward with tensor parallelism tp
 * (Megatron-LM's column/row split): QKV (h -> 3h/tp), attention projection
 * (h/tp -> h), MLP up (h -> 4h/tp), MLP down (4h/tp -> h), over `tokens`
 * rows; then square sizes on a log grid (tp = 0 in the table). */
void calib_bench_gemm(const calib_plan_t *p, calib_table_t *t)
{
    calib_gemm_table(t);
    int h = p->level == CALIB_TINY ? 256 : 768; /* GPT-2 small: h 768 */
    int tokens = p->level == CALIB_FULL ? 1024 : p->level == CALIB_QUICK ? 256 : 64;
    int top = p->level == CALIB_FULL ? 1024 : p->level == CALIB_QUICK ? 512 : 128;
    for (int tp = 1; tp <= 2; tp++) {
        gemm_point(p, t, tokens, 3 * h / tp, h, tp, h);
        gemm_point(p, t, tokens, h, h / tp, tp, h);
        gemm_point(p, t, tokens, 4 * h / tp, h, tp, h);
        gemm_point(p, t, tokens, h, 4 * h / tp, tp, h);
    }
    for (int s = 8; s <= top; s *= 2)
        gemm_point(p, t, s, s, s, 0, 0);
}

/* ---- attention --------------------------------------------------------- */

typedef struct {
    float *out, *lse, *q, *k, *v, *dq, *dk, *dv, *dout;
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

static void attn_point(const calib_plan_t *p, calib_table_t *t, int T, int NH, int HS)
{
    kern_attn_shape s = {1, T, NH, NH, HS, 0, KERN_NO_DROPOUT};
    size_t n = (size_t)T * NH * HS;
    attn_ctx_t a = {calib_rand_floats(n, 1), calib_rand_floats((size_t)NH * T, 2), calib_rand_floats(n, 3),
                    calib_rand_floats(n, 4), calib_rand_floats(n, 5), calib_rand_floats(n, 6),
                    calib_rand_floats(n, 7), calib_rand_floats(n, 8), calib_rand_floats(n, 9), s};
    for (int bwd = 0; bwd <= 1; bwd++) {
        calib_stat_t st = calib_time(bwd ? attn_bwd_call : attn_fwd_call, &a, p->warmup, p->reps, p->min_sample_s);
        calib_attn_row(t, bwd, s.B, T, NH, s.NKV, HS, s.window, &st);
    }
    free(a.out), free(a.lse), free(a.q), free(a.k), free(a.v);
    free(a.dq), free(a.dk), free(a.dv), free(a.dout);
}

void calib_bench_attention(const calib_plan_t *p, calib_table_t *t)
{
    calib_attn_table(t);
    int top = p->level == CALIB_FULL ? 2048 : p->level == CALIB_QUICK ? 512 : 128;
    int nh = p->level == CALIB_FULL ? 12 : 4;
    for (int T = 16; T <= top; T *= 2)
        attn_point(p, t, T, nh, 64);
    if (p->level != CALIB_TINY) /* heads: the same T, fewer and more of them */
        for (int h = 1; h <= 2 * nh; h *= 2)
            if (h != nh)
                attn_point(p, t, top / 2, h, 64);
}

/* ---- memory-bound kernels ------------------------------------------------ */

const char *const calib_mem_kernels[CALIB_MEM_KINDS] = {"copy", "layernorm_fwd", "bias_gelu_fwd", "adamw",
                                                        "dropout_fwd"};

#define LN_C 768 /* row width of the LayerNorm and bias+GeLU samples (GPT-2 small) */

typedef struct {
    int kind;
    long n;      /* elements (copy, adamw) or rows x LN_C */
    float *x[8];
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
    default: {
        kern_opt_tensor ts = {x[0], x[1], x[2], x[3], NULL, m->n};
        kern_adamw_ref(&ts, 1, (kern_opt_hparams){1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, 1.0f});
    }
    }
}

static void mem_point(const calib_plan_t *p, calib_table_t *t, int kind, double target_bytes)
{
    long n = (long)(target_bytes / calib_mem_bytes(kind, 1, 4, LN_C));
    if (kind == 1 || kind == 2)
        n = (n / LN_C > 0 ? n / LN_C : 1) * LN_C;
    mem_ctx_t m = {kind, n, {0}};
    for (int i = 0; i < 8; i++)
        m.x[i] = calib_rand_floats(i < 6 ? n : LN_C, 11 + i);
    if (kind == 3) /* v must be >= 0 */
        for (long i = 0; i < n; i++)
            m.x[3][i] = fabsf(m.x[3][i]);
    calib_stat_t s = calib_time(mem_call, &m, p->warmup, p->reps, p->min_sample_s);
    calib_mem_row(t, kind, calib_mem_bytes(kind, n, 4, LN_C), (double)n, &s);
    for (int i = 0; i < 8; i++)
        free(m.x[i]);
}

/* Sizes from 16 KiB (LayerNorm: a few rows) by x4 up to the level's top. */
void calib_bench_memory(const calib_plan_t *p, calib_table_t *t)
{
    calib_mem_table(t);
    double top = p->level == CALIB_FULL ? 1 << 30 : p->level == CALIB_QUICK ? 1 << 27 : 1 << 23;
    for (int kind = 0; kind < CALIB_MEM_KINDS; kind++)
        for (double b = 1 << 12; b <= top; b *= 4)
            if (b >= calib_mem_bytes(kind, kind == 1 || kind == 2 ? LN_C : 1, 4, LN_C))
                mem_point(p, t, kind, b);
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
    .gemm_what = "GEMM (kern_gemm_ref)",
    .attn_what = "attention forward and backward (kern_attention_*_ref)",
    .mem_what = "memory-bound kernels (copy, LayerNorm, bias+GeLU, AdamW, dropout)",
    .coll_what = "collectives over MPI",
    .gemm = calib_bench_gemm,
    .attention = calib_bench_attention,
    .memory = calib_bench_memory,
    .collectives = calib_bench_collectives,
    .comm_slowdown = calib_bench_comm_slowdown,
    .flash1_rel = cpu_flash1_rel,
};
