/* real/rt_gpu_cudnn.c: the GPU runtime's cuDNN attention
 * (--attention-backend cudnn, issue 38): rt_ops_t.attn_backend opens cuDNN
 * on the rank's GPU, and the flash attention of a whole sequence then runs
 * as cuDNN's fused kernels (real/cudnn_attn.c), its workspace and dropout
 * seed in the runtime's attention scratch. A block of a sequence (CP's
 * ring and all-gather) stays on megasim's kernels, which merge blocks by
 * their log-sum-exp. A module built without cuDNN's headers (the emulated
 * one among them) refuses the backend with the reason. */
#include "real/rt_gpu_int.h"

#include <stdio.h>

#ifdef MEGASIM_HAVE_CUDNN
#include "real/cudnn_attn.h"

int g_attn_backend(rt_t *rt, int backend, char *err, int errlen)
{
    if (backend != ATTN_BACKEND_CUDNN || G(rt)->cudnn)
        return 0;
    char why[768];
    if (!(G(rt)->cudnn = cudnn_attn_open(NULL, why, sizeof why))) {
        snprintf(err, errlen, "--attention-backend cudnn: %s (allowed: --attention-backend megasim)", why);
        return -1;
    }
    return 0;
}

void g_cudnn_close(rt_t *rt)
{
    cudnn_attn_close(G(rt)->cudnn);
    G(rt)->cudnn = NULL;
}

static int report(int rc, const char *err)
{
    if (rc)
        fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, err);
    return rc ? -1 : 1;
}

/* Whether cuDNN takes a call: 0 when it does not (no cuDNN opened, or a
 * shape it does not run: megasim's kernels do), -1 on an error (printed),
 * 1 with the call's workspace in *ws and the dropout's seed and offset in
 * *rng (device int64[2] ahead of the workspace, written from the host on
 * the compute stream; NULL without dropout), both in the attention scratch. */
static int take_call(rt_t *rt, int bwd, const kern_attn_shape *s, char **ws, int64_t **rng)
{
    char err[768];
    if (!G(rt)->cudnn || cudnn_attn_supported(s, NULL, 0))
        return 0;
    long long n = cudnn_attn_plan(G(rt)->cudnn, bwd, s, NULL, 0, err, sizeof err);
    if (n < 0)
        return report(-1, err);
    char *p = g_scratch(rt, RT_GPU_ALIGN + (size_t)n);
    if (!p)
        return -1;
    *rng = NULL;
    if (s->drop.p > 0) {
        int64_t host[2];
        cudnn_attn_rng(s, host);
        cudaError_t e = cudaMemcpyAsync(p, host, sizeof host, cudaMemcpyHostToDevice, CS(rt));
        if (e != cudaSuccess) {
            kern_report_cuda((int)e, "the cuDNN dropout seed", __FILE__, __LINE__);
            return -1;
        }
        *rng = (int64_t *)p;
    }
    *ws = p + RT_GPU_ALIGN;
    return 1;
}

int g_cudnn_fwd(rt_t *rt, void *out, void *lse, const void *q, const void *k, const void *v, kern_attn_shape s)
{
    int64_t *rng;
    char err[768], *ws;
    int rc = take_call(rt, 0, &s, &ws, &rng);
    return rc <= 0 ? rc
                   : report(cudnn_attn_fwd(G(rt)->cudnn, CS(rt), out, lse, q, k, v, &s, rng, ws, err, sizeof err), err);
}

int g_cudnn_bwd(rt_t *rt, void *dq, void *dk, void *dv, const void *dout, const void *q, const void *k,
                const void *v, const void *out, const void *lse, kern_attn_shape s)
{
    int64_t *rng;
    char err[768], *ws;
    int rc = take_call(rt, 1, &s, &ws, &rng);
    return rc <= 0 ? rc
                   : report(cudnn_attn_bwd(G(rt)->cudnn, CS(rt), dq, dk, dv, dout, q, k, v, out, lse, &s, rng, ws,
                                           err, sizeof err),
                            err);
}

#else /* no cuDNN headers at build time */

int g_attn_backend(rt_t *rt, int backend, char *err, int errlen)
{
    if (backend != ATTN_BACKEND_CUDNN)
        return 0;
    snprintf(err, errlen, "--attention-backend cudnn: this GPU module was built without cuDNN 9's headers "
             "(cudnn_graph.h: beside the CUDA Toolkit or in $CUDNN_ROOT/include when configuring) (allowed: "
             "--attention-backend megasim)");
    return -1;
}

void g_cudnn_close(rt_t *rt) { (void)rt; }

int g_cudnn_fwd(rt_t *rt, void *out, void *lse, const void *q, const void *k, const void *v, kern_attn_shape s)
{
    return 0;
}

int g_cudnn_bwd(rt_t *rt, void *dq, void *dk, void *dv, const void *dout, const void *q, const void *k,
                const void *v, const void *out, const void *lse, kern_attn_shape s)
{
    return 0;
}
#endif
