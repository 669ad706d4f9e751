/* calib/bench_gpu_mem: the memory-bound benchmarks of the GPU calibration
 * device (calib/bench_gpu.c): a device copy, the fused LayerNorm (with and
 * without dropout), bias+GeLU and AdamW over sizes from 4 KiB to 1 GiB;
 * the profile's hbm_gbps, mem_eff and dropout_gdraws come from them. */
#include "calib/bench_gpu_int.h"
#include "calib/fit.h"

#include "kernels/dropout.h"
#include "kernels/gelu.h"
#include "kernels/layernorm.h"
#include "kernels/optimizer.h"

#define ROW 2048 /* LayerNorm / bias+GeLU row: the 1.3B model's hidden size */

/* Buffer i of a kernel's call over n elements: count of (0) n elements,
 * (1) rows, (2) one row's; bytes per element; fill (0 none, 1 bf16, 2
 * fp32, 3 |fp32|). Zero entries: no buffer. */
typedef struct {
    int of, elem_bytes, fill;
} mem_buf_t;

/* The kinds timed on a GPU: all but dropout_fwd (kind 4), whose Philox
 * work can hold it below the bandwidth that mem_eff takes from the
 * others; the dropout's draws are timed inside the fused LayerNorm instead
 * (kind 5, against kind 1: the profile's dropout_gdraws). mem_eff is
 * fitted over kinds 1 to 3 (the copy gives hbm_gbps). */
static const mem_buf_t mem_bufs[CALIB_MEM_KINDS][9] = {
    {{0, 2, 0}, {0, 2, 1}},                     /* copy: dst, src */
    {{0, 2, 0}, {0, 2, 0}, {1, 4, 0}, {1, 4, 0}, /* LayerNorm: residual, out, mean, rstd, */
     {0, 2, 1}, {0, 2, 1}, {2, 2, 1}, {2, 2, 1}}, /* inp, skip, w, b */
    {{0, 2, 0}, {0, 2, 1}, {2, 2, 1}},          /* bias+GeLU: out, inp, bias */
    {{0, 4, 2}, {0, 4, 2}, {0, 4, 2}, {0, 4, 3}}, /* AdamW: param, grad, m, v >= 0 */
    {{0}},                                        /* dropout_fwd: not timed */
    {{0, 2, 0}, {0, 2, 0}, {1, 4, 0}, {1, 4, 0}, /* LayerNorm with dropout: LayerNorm's, */
     {0, 2, 1}, {0, 2, 1}, {2, 2, 1}, {2, 2, 1}, {0, 1, 0}}, /* and the 1-byte mask */
};

typedef struct {
    int kind;
    long n; /* elements; rows x ROW for LayerNorm and bias+GeLU */
    void *x[9];
} mem_ctx_t;

static int mem_call(void *p)
{
    mem_ctx_t *m = p;
    void **x = m->x;
    int rows = (int)(m->n / ROW);
    switch (m->kind) {
    case 0: {
        cudaError_t e = cudaMemcpyAsync(x[0], x[1], 2 * (size_t)m->n, cudaMemcpyDeviceToDevice, bg.s);
        return e == cudaSuccess ? 0 : kern_report_cuda((int)e, "cudaMemcpyAsync", __FILE__, __LINE__);
    }
    case 1:
        return kern_layernorm_fwd_cuda(x[0], x[1], x[2], x[3], x[4], x[5], NULL, NULL, x[6], x[7], rows, ROW, bg.s);
    case 2:
        return kern_bias_gelu_fwd_cuda(x[0], x[1], x[2], rows, ROW, bg.s);
    case 5: { /* Megatron's bias-dropout-add on skip before the norm, as `run` fuses it */
        kern_dropout d = kern_dropout_make(0.1f, 1, kern_dropout_site(0, KERN_DROP_AFTER_ATTN), 0);
        return kern_layernorm_fwd_cuda(x[0], x[1], x[2], x[3], x[4], x[5], &d, x[8], x[6], x[7], rows, ROW, bg.s);
    }
    default: {
        kern_opt_tensor ts = {x[0], x[1], x[2], x[3], NULL, m->n};
        return kern_adamw_cuda(&ts, 1, (kern_opt_hparams){1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, 1.0f}, bg.s);
    }
    }
}

/* A kind's call of about target_bytes, its buffers made and filled. */
static mem_ctx_t mem_make(int kind, double target_bytes)
{
    /* LayerNorm with dropout over LayerNorm's elements at the same size, so that the two pair up */
    long n = (long)(target_bytes / calib_mem_bytes(kind == 5 ? 1 : kind, 1, 2, ROW));
    if (kind == 1 || kind == 2 || kind == 5)
        n = (n / ROW > 0 ? n / ROW : 1) * ROW;
    mem_ctx_t m = {kind, n, {0}};
    for (int i = 0; i < 9; i++) {
        const mem_buf_t *b = &mem_bufs[kind][i];
        size_t count = b->of == 0 ? (size_t)n : b->of == 1 ? (size_t)(n / ROW) : ROW, bytes = count * b->elem_bytes;
        if (!b->elem_bytes)
            continue;
        m.x[i] = bg_dalloc(bytes);
        if (b->fill)
            bg_dfill(m.x[i], bytes, b->fill == 1, b->fill == 3, 11 + i);
    }
    return m;
}

static void mem_free(mem_ctx_t *m)
{
    for (int i = 0; i < 9; i++)
        if (m->x[i])
            CUDA_CK(cudaFree(m->x[i]));
}

static void mem_point(const calib_plan_t *p, calib_table_t *t, int kind, double target_bytes)
{
    mem_ctx_t m = mem_make(kind, target_bytes);
    calib_stat_t s = bg_time(mem_call, &m, p);
    calib_mem_row(t, kind, calib_mem_bytes(kind, m.n, 2, ROW), (double)m.n, &s);
    mem_free(&m);
}

/* ---- CUDA graphs' launch gap -------------------------------------------------- */

#define GRAPH_NODES 64 /* bias+GeLU calls a graph holds */

static int graph_call(void *p)
{
    cudaError_t e = cudaGraphLaunch(*(cudaGraphExec_t *)p, bg.s);
    return e == cudaSuccess ? 0 : kern_report_cuda((int)e, "cudaGraphLaunch", __FILE__, __LINE__);
}

/* kernel_gap_us for a kernel that is a node of a CUDA graph (the profile's
 * graph_gap_us, what run --enable-cuda-graph's passes pay): GRAPH_NODES
 * bias+GeLU calls captured into one graph, launched as bg_time's call, at
 * 4 KiB to 256 KiB (the kernel gap's sizes, calib/profile.c); the
 * intercept of time per node against bytes. < 0 where the fit finds none. */
double bg_graph_gap_us(const calib_plan_t *p)
{
    double x[8], y[8], resid[8];
    int n = 0;
    for (double b = 1 << 12; b <= 256 << 10 && n < 8; b *= 4) {
        mem_ctx_t m = mem_make(2, b);
        cudaGraph_t g;
        cudaGraphExec_t ex;
        CUDA_CK(cudaStreamBeginCapture(bg.s, cudaStreamCaptureModeRelaxed));
        for (int i = 0; i < GRAPH_NODES; i++)
            KERN_CK(mem_call(&m));
        CUDA_CK(cudaStreamEndCapture(bg.s, &g));
        CUDA_CK(cudaGraphInstantiate(&ex, g, 0));
        calib_stat_t s = bg_time(graph_call, &ex, p);
        x[n] = calib_mem_bytes(2, m.n, 2, ROW), y[n++] = s.med_s / GRAPH_NODES * 1e6;
        CUDA_CK(cudaGraphExecDestroy(ex));
        CUDA_CK(cudaGraphDestroy(g));
        mem_free(&m);
    }
    calib_linfit_t f = calib_fit_linear(x, y, n, 0, 256 << 10, resid);
    return f.ok && f.a > 0 ? f.a : -1;
}

/* Bytes moved from 4 KiB by x2 to 1 GiB (256 MiB --quick, 2 MiB --tiny:
 * the tests' grid, whose emulated kernels took 7 s to 8 MiB), bf16
 * activations, fp32 optimizer state; rows of ROW. */
void bg_memory(const calib_plan_t *p, calib_table_t *t)
{
    double top = p->level == CALIB_FULL ? 1 << 30 : p->level == CALIB_QUICK ? 1 << 28 : 1 << 21;
    calib_mem_table(t);
    for (int kind = 0; kind < CALIB_MEM_KINDS; kind++)
        for (double b = 1 << 12; kind != 4 && b <= top; b *= 2)
            if (b >= calib_mem_bytes(kind == 5 ? 1 : kind, kind == 1 || kind == 2 || kind == 5 ? ROW : 1, 2, ROW))
                mem_point(p, t, kind, b);
}
