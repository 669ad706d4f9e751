/* real/gpt_fp8.c: the transformer layers' GEMMs (gpt_layer.h) with FP8
 * training emulated on the CPU path (--fp8-format e4m3 or hybrid,
 * --fp8-recipe delayed), as Transformer Engine runs the linear
 * layers of each transformer layer: their inputs and weights cast to E4M3,
 * their output gradients to E5M2 (hybrid) or E4M3, each tensor at its own
 * scale fp8_max / amax from the amax it reached in the previous iteration
 * (the delayed recipe at Megatron-LM's defaults: a history of 1, the most
 * recent, margin 0; the first iteration at scale 1). The casts are
 * kernels/fp8.h's rounding in fp32, so the GEMMs see exactly the values
 * FP8 GEMMs would; the routed and shared experts' GEMMs too (gpt_moe.c,
 * gpt_moe_shared.c), each expert's tensors their own sites. The GEMMs,
 * biases, embedding, output layer and norms stay in the wider type, as TE
 * keeps them, as do the router and the shared expert's gate (plain linear
 * layers in Megatron-Core). A tensor's amax is its
 * largest |x| over the iteration (every micro-batch) and over every rank
 * (one max over the world at the iteration's end): TE reduces over its
 * amax group after each forward pass, but once per iteration keeps every
 * parallel plan and schedule on the same scales, so their losses agree.
 * The casts keep the amaxes on the device (a running max per site), read
 * back once, at the iteration's end: no pass waits on the host for them
 * (so a pass can be captured as a CUDA graph). */
#include "real/gpt_layer.h"

#include "kernels/fp8.h"

#include <stdlib.h>

/* Per weight tensor (its model-wide id), three tensors: the input, the
 * weight and the output gradient (gpt_layer.h's roles). */
enum { NROLES = GPT_FP8_GRAD + 1 };

static int site(const gpt_t *m, int tw, int role) { return m->tensors[tw].id * NROLES + role; }

/* A role's format: hybrid's gradients E5M2, everything else E4M3. */
static int role_fmt(const gpt_t *m, int role)
{
    return role == GPT_FP8_GRAD && m->job->fp8_format == FP8_HYBRID ? KERN_FP8_E5M2 : KERN_FP8_E4M3;
}

int gpt_fp8_init(gpt_t *m, char *err, int errlen)
{
    if (!m->job->fp8_format)
        return 0;
    int ids = 0;
    for (int i = 0; i < m->ntensors; i++)
        ids = m->tensors[i].id + 1 > ids ? m->tensors[i].id + 1 : ids;
    double n = ids; /* the whole model's: the largest over the ranks */
    if (comm_host_max_f64(m->comm, GRP_WORLD, &n, 1))
        return -1;
    m->fp8_sites = (int)n * NROLES;
    size_t bytes = sizeof(float) * (size_t)m->fp8_sites;
    m->fp8_scale = malloc(bytes);
    if (!m->fp8_scale || OP->alloc(RT, (void **)&m->fp8_amax, bytes, RT_POOL_MAIN) ||
        OP->memset0(RT, m->fp8_amax, bytes, STREAM_COMPUTE)) {
        snprintf(err, errlen, "out of memory for the FP8 scales and amaxes (%d tensors)", m->fp8_sites);
        return -1;
    }
    for (int i = 0; i < m->fp8_sites; i++)
        m->fp8_scale[i] = 1.0f;
    return 0;
}

void gpt_fp8_free(gpt_t *m)
{
    if (m->fp8_amax && m->rt)
        OP->free(RT, m->fp8_amax);
    free(m->fp8_scale);
    m->fp8_amax = m->fp8_scale = NULL;
}

int gpt_fp8_cast_to(gpt_t *m, int tw, int role, void *dst, const void *x, long n)
{
    int s = site(m, tw, role);
    return OP->fp8_quant(RT, dst, x, n, role_fmt(m, role), m->fp8_scale[s], m->fp8_amax + s);
}

int gpt_fp8_cast(gpt_t *m, int tw, int role, const void *x, long n, const void **q)
{
    *q = x;
    if (!m->fp8_sites)
        return 0;
    void *out;
    RT_TRY(alloc_act(m, &out, n));
    RT_TRY(gpt_fp8_cast_to(m, tw, role, out, x, n));
    *q = out;
    return 0;
}

void gpt_fp8_drop(gpt_t *m, const void *q, const void *x)
{
    if (q != x)
        drop(m, (void *)q);
}

/* ---- the layers' GEMMs as FP8 reads them -------------------------------------------- */

int gpt_gemm_fwd(gpt_t *m, int rows, void *out, const void *x, int tw, const void *b, int K, int OC)
{
    const void *xq, *Wq, *W = gpt_param(m, tw);
    RT_TRY(gpt_fp8_cast(m, tw, GPT_FP8_IN, x, (long)rows * K, &xq));
    RT_TRY(gpt_fp8_cast(m, tw, GPT_FP8_W, W, (long)OC * K, &Wq));
    RT_TRY(OP->linear_fwd(RT, out, xq, Wq, b, rows, K, OC));
    gpt_fp8_drop(m, xq, x), gpt_fp8_drop(m, Wq, W);
    return 0;
}

int gpt_gemm_dgrad(gpt_t *m, int rows, void *dx, const void *dy, int tw, int K, int OC)
{
    const void *dyq, *Wq, *W = gpt_param(m, tw);
    RT_TRY(gpt_fp8_cast(m, tw, GPT_FP8_GRAD, dy, (long)rows * OC, &dyq));
    RT_TRY(gpt_fp8_cast(m, tw, GPT_FP8_W, W, (long)OC * K, &Wq));
    RT_TRY(OP->linear_dgrad(RT, dx, dyq, Wq, rows, K, OC));
    gpt_fp8_drop(m, dyq, dy), gpt_fp8_drop(m, Wq, W);
    return 0;
}

int gpt_gemm_wgrad(gpt_t *m, int rows, int tw, float *db, const void *dy, const void *x, int K, int OC)
{
    const void *dyq, *xq;
    if (db && m->fp8_sites) { /* the bias gradient from the unquantised gradient */
        RT_TRY(OP->bias_grad(RT, db, dy, rows, OC));
        db = NULL;
    }
    RT_TRY(gpt_fp8_cast(m, tw, GPT_FP8_GRAD, dy, (long)rows * OC, &dyq));
    RT_TRY(gpt_fp8_cast(m, tw, GPT_FP8_IN, x, (long)rows * K, &xq));
    RT_TRY(OP->linear_wgrad(RT, gpt_grad(m, tw), db, dyq, xq, rows, K, OC));
    gpt_fp8_drop(m, dyq, dy), gpt_fp8_drop(m, xq, x);
    return 0;
}

int gpt_fp8_step(gpt_t *m)
{
    if (!m->fp8_sites)
        return 0;
    size_t bytes = sizeof(float) * (size_t)m->fp8_sites;
    double *a = malloc(sizeof *a * (size_t)m->fp8_sites);
    float *h = malloc(bytes);
    int rc = !a || !h ? -1 : OP->d2h(RT, h, m->fp8_amax, bytes); /* the device is idle: iter_end */
    if (!a || !h)
        fprintf(stderr, "%s:%d: out of host memory for the FP8 amaxes\n", __FILE__, __LINE__);
    for (int i = 0; !rc && i < m->fp8_sites; i++)
        a[i] = h[i];
    rc = rc || comm_host_max_f64(m->comm, GRP_WORLD, a, m->fp8_sites);
    for (int i = 0; !rc && i < m->fp8_sites; i++) {
        int fmt = role_fmt(m, i % NROLES);
        if (a[i] > 0 && isfinite(a[i])) /* a tensor that was all zeros (or not met) keeps its scale */
            m->fp8_scale[i] = (float)(kern_fp8_max(fmt) / a[i]);
    }
    free(a), free(h);
    return rc || OP->memset0(RT, m->fp8_amax, bytes, STREAM_COMPUTE); /* the next iteration's running max */
}
