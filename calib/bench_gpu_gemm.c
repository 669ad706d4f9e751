/* calib/bench_gpu_gemm: the GEMM benchmarks of the GPU calibration device
 * (calib/bench_gpu.c): a GPT block's linear layers, forward and both
 * backward GEMMs, as the real backend issues them through cuBLASLt
 * (kernels/matmul.h), at the models' shapes under tensor parallelism; the
 * job's own layers; squares on a log grid; and the sustained run (one large
 * GEMM back to back for a second, with the SM clock and power beside it). */
#include "calib/bench_gpu_int.h"

#include <string.h>

/* Pass 0 is kern_matmul_fwd_cuda without bias; passes 1 and 2 the two
 * GEMMs of kern_matmul_bwd_cuda, timed apart with its descriptors:
 * dinp = dout (N, OC) @ weight (OC, C); dweight += dout^T @ inp (fp32). */
int bg_gemm_call(void *p)
{
    bg_gemm_t *c = p;
    if (c->pass == 0)
        return kern_matmul_fwd_cuda(&bg.kc, c->y, NULL, c->x, c->w, NULL, c->N, c->C, c->OC, bg.s);
    if (c->pass == 1)
        return kern_gemm_cuda(&bg.kc, c->dx, c->y, c->w, &c->g, bg.s);
    return kern_gemm_cuda(&bg.kc, c->dw, c->y, c->x, &c->g, bg.s);
}

void bg_gemm_alloc(bg_gemm_t *c, int N, int C, int OC, int backward)
{
    memset(c, 0, sizeof *c);
    c->N = N, c->C = C, c->OC = OC;
    c->x = bg_dbf16((size_t)N * C, 1), c->w = bg_dbf16((size_t)OC * C, 2), c->y = bg_dbf16((size_t)N * OC, 3);
    if (backward) {
        c->dx = bg_dalloc((size_t)N * C * 2);
        c->dw = bg_dalloc((size_t)OC * C * 4);
        CUDA_CK(cudaMemsetAsync(c->dw, 0, (size_t)OC * C * 4, bg.s));
    }
}

void bg_gemm_release(bg_gemm_t *c)
{
    void *bufs[] = {c->x, c->w, c->y, c->dx, c->dw};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i])
            CUDA_CK(cudaFree(bufs[i]));
}

/* The three GEMMs of one linear layer (rows: pass 0, 1, 2). */
static void linear_point(const calib_plan_t *p, calib_table_t *t, int N, int C, int OC, int tp, int h)
{
    bg_gemm_t c;
    bg_gemm_alloc(&c, N, C, OC, 1);
    for (c.pass = 0; c.pass < 3; c.pass++) {
        if (c.pass > 0)
            c.g = kern_linear_bwd_desc(N, C, OC, c.pass == 1 ? KERN_BWD_DINP : KERN_BWD_DWEIGHT);
        calib_stat_t s = bg_time(bg_gemm_call, &c, p);
        int m, n, k;
        calib_linear_dims(N, C, OC, c.pass, &m, &n, &k);
        calib_gemm_row(t, m, n, k, &s, tp, c.pass, h);
    }
    bg_gemm_release(&c);
}

/* s^3, c = a @ b^T (the forward's layout, the CPU grid's too). */
static void square_point(const calib_plan_t *p, calib_table_t *t, int s)
{
    bg_gemm_t c;
    bg_gemm_alloc(&c, s, s, s, 0);
    calib_stat_t st = bg_time(bg_gemm_call, &c, p);
    calib_gemm_row(t, s, s, s, &st, 0, 0, 0);
    bg_gemm_release(&c);
}

/* A GPT block's GEMMs under tensor parallelism tp (Megatron-LM's column /
 * row split): QKV (h -> 3h/tp), attention projection (h/tp -> h), MLP up
 * (h -> 4h/tp), MLP down (4h/tp -> h), each forward and both backward
 * GEMMs, over tokens = sequence 2048 x micro-batch 1. Models: 1.3B (h 2048)
 * at TP 1, 2, 4, 8 and 175B (h 12288) at TP 8; --quick: 1.3B at TP 1, 2 and
 * 175B at TP 8; --tiny: h 512 at TP 1, 2 over 256 tokens. Then the job
 * named on the command line, if any (calib_job_layers), and squares on a
 * log grid, 128 to 16384 (8192 --quick, 1024 --tiny). */
void bg_gemm(const calib_plan_t *p, calib_table_t *t)
{
    static const int full[][2] = {{2048, 1}, {2048, 2}, {2048, 4}, {2048, 8}, {12288, 8}};
    static const int quick[][2] = {{2048, 1}, {2048, 2}, {12288, 8}};
    static const int tiny[][2] = {{512, 1}, {512, 2}};
    const int(*cfg)[2] = p->level == CALIB_FULL ? full : p->level == CALIB_QUICK ? quick : tiny;
    int ncfg = p->level == CALIB_FULL ? 5 : p->level == CALIB_QUICK ? 3 : 2;
    int tokens = p->level == CALIB_TINY ? 256 : 2048;
    int top = p->level == CALIB_FULL ? 16384 : p->level == CALIB_QUICK ? 8192 : 1024;
    calib_gemm_table(t);
    for (int i = 0; i < ncfg; i++) {
        int h = cfg[i][0], tp = cfg[i][1];
        linear_point(p, t, tokens, h, 3 * h / tp, tp, h);
        linear_point(p, t, tokens, h / tp, h, tp, h);
        linear_point(p, t, tokens, h, 4 * h / tp, tp, h);
        linear_point(p, t, tokens, 4 * h / tp, h, tp, h);
    }
    calib_job_layers(p, t, linear_point);
    for (int s = 128; s <= top; s *= 2)
        square_point(p, t, s);
}

/* The sustained run: the 175B/TP8 MLP-up forward GEMM (2048 x 6144 over
 * 12288, 0.31 TFLOP) back to back with no flush and no gap for
 * SUSTAINED_S (--quick a third, --tiny 256^3 for a tenth), in windows of
 * SUSTAINED_WINDOW calls kept two deep in the queue, so the GPU never
 * waits; at least two windows, however slow the device. Per window one
 * row: end time, mean SM clock, power, share of reads at the power cap,
 * TFLOP/s. Without NVML the clock columns are 0. */
#define SUSTAINED_S 1.0
#define SUSTAINED_WINDOW 32

void bg_sustained(const calib_plan_t *p, calib_table_t *t)
{
    int tiny = p->level == CALIB_TINY;
    int N = tiny ? 256 : 2048, C = tiny ? 256 : 12288, OC = tiny ? 256 : 6144;
    double span = p->level == CALIB_FULL ? SUSTAINED_S : p->level == CALIB_QUICK ? SUSTAINED_S / 3 : SUSTAINED_S / 10;
    bg_gemm_t c;
    bg_gemm_alloc(&c, N, C, OC, 0);
    cudaEvent_t start, ring[3]; /* window k ends at ring[k % 3]; read one window behind the queue's end */
    CUDA_CK(cudaEventCreate(&start));
    for (int i = 0; i < 3; i++)
        CUDA_CK(cudaEventCreate(&ring[i]));
    KERN_CK(bg_gemm_call(&c)); /* cuBLASLt's first call */
    CUDA_CK(cudaStreamSynchronize(bg.s));
    double flops = 2.0 * N * C * OC * SUSTAINED_WINDOW, t0 = calib_now_s();
    CUDA_CK(cudaEventRecord(start, bg.s));
    for (int w = 0; calib_now_s() - t0 < span || w < 3; w++) { /* >= 2 windows reported, however slow */
        for (int i = 0; i < SUSTAINED_WINDOW; i++)
            KERN_CK(bg_gemm_call(&c));
        CUDA_CK(cudaEventRecord(ring[w % 3], bg.s));
        if (w == 0)
            continue;
        cudaEvent_t from = w == 1 ? start : ring[(w - 2) % 3], to = ring[(w - 1) % 3];
        kern_clock_sums reads = {0};
        float ms = 0;
        bg_wait_reading_clock(to, &reads);
        CUDA_CK(cudaEventElapsedTime(&ms, from, to));
        double mhz, watts, capped;
        kern_clock_means(&reads, &mhz, &watts, &capped);
        calib_sustained_row(t, calib_now_s() - t0, mhz, watts, capped, flops / (ms * 1e-3) * 1e-12);
    }
    CUDA_CK(cudaStreamSynchronize(bg.s));
    CUDA_CK(cudaEventDestroy(start));
    for (int i = 0; i < 3; i++)
        CUDA_CK(cudaEventDestroy(ring[i]));
    bg_gemm_release(&c);
}
