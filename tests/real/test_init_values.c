/* tests/real/test_init_values.c: the seed's initial weights
 * (gpt_init_values, real/gpt_params.c) are the same bits in any number of
 * threads, a tensor's TP piece holds the whole tensor's values at its
 * mapped rows and columns, padding and std-0 tensors stay 0, and a normal
 * tensor's sample variance is its std squared. Expected vs got per check. */
#include "real/gpt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int failures;

static void check(int ok, const char *what, const char *expected, const char *got)
{
    failures += !ok;
    printf("%s %s: expected %s, got %s\n", ok ? "ok  " : "FAIL", what, expected, got);
}

/* A tensor of shape rows x cols at off, seeded as tensor id. */
static gpt_tensor_t tensor(int id, long off, int rows, int cols, int grows, int gcols, float std)
{
    gpt_tensor_t t = {.id = id, .off = off, .n = (long)rows * cols, .rows = rows, .cols = cols, .grows = grows,
                      .gcols = gcols, .nrseg = 1, .ncseg = 1, .init_std = std};
    t.rseg[0] = (gpt_seg_t){0, 0, rows}, t.cseg[0] = (gpt_seg_t){0, 0, cols};
    return t;
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

int main(void)
{
    enum { R = 96, C = 160, NT = 5 };
    static gpt_tensor_t ts[NT];
    gpt_t m = {0};
    ts[0] = tensor(3, 0, R, C, R, C, 0.02f);                    /* the whole tensor */
    ts[1] = tensor(3, R * C + 64, R / 2, C / 2, R, C, 0.02f);   /* a TP piece of it: two row and two column runs */
    ts[1].nrseg = ts[1].ncseg = 2;
    ts[1].rseg[0] = (gpt_seg_t){0, 8, R / 4}, ts[1].rseg[1] = (gpt_seg_t){R / 4, R / 2 + 8, R / 4};
    ts[1].cseg[0] = (gpt_seg_t){0, 0, C / 4}, ts[1].cseg[1] = (gpt_seg_t){C / 4, C / 2, C / 4};
    long o = ts[1].off + ts[1].n + 64;
    ts[2] = tensor(4, o, 1, C, 1, C, 0.0f); /* a bias: 0 */
    ts[3] = tensor(5, o + C, 0, C, 0, C, 0.02f); /* no rows here */
    ts[4] = tensor(6, o + C, 1, C, 1, C, 0.0f); /* a norm's weight: 1 */
    ts[4].init_one = 1;
    m.tensors = ts, m.ntensors = NT, m.nparams = o + 2 * C + 64;

    float *one = malloc(sizeof(float) * m.nparams), *many = malloc(sizeof(float) * m.nparams);
    char e[96], g[96];
    gpt_init_values(&m, 1234, one, 1);
    for (int n = 2; n <= 7; n += 5) {
        memset(many, 0x7f, sizeof(float) * m.nparams); /* every element must be written */
        gpt_init_values(&m, 1234, many, n);
        long diff = 0;
        for (long i = 0; i < m.nparams; i++)
            diff += memcmp(&one[i], &many[i], sizeof(float)) != 0;
        snprintf(g, sizeof g, "%ld of %ld differ", diff, m.nparams);
        snprintf(e, sizeof e, "%d threads", n);
        check(diff == 0, e, "the 1-thread values bit for bit", g);
    }
    long bad = 0;
    for (int s = 0; s < 2; s++)
        for (int r = 0; r < R / 4; r++)
            for (int c = 0; c < C / 2; c++) {
                int gr = ts[1].rseg[s].global + r, gc = c < C / 4 ? c : C / 2 + c - C / 4;
                bad += one[ts[1].off + (long)(s * R / 4 + r) * (C / 2) + c] != one[(long)gr * C + gc];
            }
    snprintf(g, sizeof g, "%ld of %d elements differ", bad, R * C / 4);
    check(bad == 0, "a TP piece (2 row runs, 2 column runs)", "the whole tensor's values at its mapped places", g);
    double sum = 0, sq = 0;
    long zero_bad = 0;
    for (long i = 0; i < (long)R * C; i++)
        sum += one[i], sq += (double)one[i] * one[i];
    for (long i = R * C; i < ts[1].off; i++)
        zero_bad += one[i] != 0;
    for (long i = ts[2].off; i < ts[2].off + C; i++)
        zero_bad += one[i] != 0 || one[i + C] != 1.0f;
    for (long i = ts[4].off + C; i < m.nparams; i++)
        zero_bad += one[i] != 0;
    snprintf(g, sizeof g, "%ld elements otherwise", zero_bad);
    check(zero_bad == 0, "padding and the std-0 bias 0, the norm weight 1", "all", g);
    double var = sq / (R * C) - (sum / (R * C)) * (sum / (R * C));
    /* 15360 draws: the sample variance's relative spread is sqrt(2 / n) = 1.1%; 5% is 4.4 of those */
    snprintf(g, sizeof g, "%.3e (%+.1f%%)", var, 100 * (var / 4e-4 - 1));
    check(fabs(var / 4e-4 - 1) < 0.05, "sample variance of a std-0.02 tensor", "4.000e-04 within 5%", g);

    /* how long 16M elements take (a report, not a check) */
    static gpt_tensor_t big[1];
    big[0] = tensor(7, 0, 4096, 4096, 4096, 4096, 0.02f);
    gpt_t mb = {.tensors = big, .ntensors = 1, .nparams = 4096L * 4096};
    float *h = malloc(sizeof(float) * mb.nparams);
    double t0 = seconds();
    gpt_init_values(&mb, 1, h, 1);
    double t1 = seconds();
    gpt_init_values(&mb, 1, h, 0);
    printf("note 16.8M elements: %.2f s in 1 thread, %.2f s in one per CPU\n", t1 - t0, seconds() - t1);
    free(one), free(many), free(h);
    return failures != 0;
}
