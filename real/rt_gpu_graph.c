/* real/rt_gpu_graph.c: the GPU runtime's CUDA graphs (rt.h capture_begin,
 * capture_end; `run --enable-cuda-graph`). A pass issued between the two
 * is captured on the compute stream and launched as one graph, so the
 * device runs its kernels back to back without a launch gap between each.
 *
 * Every iteration captures its passes afresh: the host keeps doing what
 * it does for each pass (its memory, its queues), and each capture carries
 * that iteration's arguments (activation pointers, dropout seeds). The
 * graph of a slot is instantiated once and then updated with each new
 * capture (cudaGraphExecUpdate: new arguments, the same kernels), which
 * costs the host far less than instantiating; where the update is refused
 * (the pass issued other work, say a cuBLASLt choice changed) the slot is
 * instantiated anew. Relaxed capture mode: the arena's fallback blocks may
 * call cudaMalloc inside a pass.
 *
 * The TP stream (the backward's input-gradient reduction beside the weight
 * gradient's GEMM) takes part in every capture as CUDA's fork and join
 * allow: the compute stream waits for its earlier work before the capture
 * (a capture may not wait on work outside it), it joins the capture at the
 * start (waiting for an event recorded there), and the compute stream
 * waits for all of it before the end. The streams a pass forks itself (the
 * rings of --tp-comm-overlap and of CP's p2p on the TP stream, the chunked
 * GEMMs' second compute stream) join the capture by the pass's own event
 * record and wait, and are joined back before the pass ends (gpt_layer.c
 * chunks_end, gpt_cp.c), as an uncaptured pass needs too. */
#include "real/rt_gpu_int.h"

#include <stdio.h>
#include <stdlib.h>

int g_capture_begin(rt_t *rt)
{
    gpu_t *g = G(rt);
    if (g->capturing || g->cur != 0) {
        fprintf(stderr, "%s:%d: capture_begin inside a capture, or off the main compute stream\n", __FILE__,
                __LINE__);
        return -1;
    }
    RT_TRY(g_order(rt, STREAM_COMPUTE, RT_STREAM_TP));
    KERN_CUDA_TRY(cudaStreamBeginCapture(MAIN(rt), cudaStreamCaptureModeRelaxed));
    g->capturing = 1;
    return g_order(rt, RT_STREAM_TP, STREAM_COMPUTE); /* the fork */
}

/* Slot `slot`'s graph updated with the capture (or made from it), then
 * launched on the compute stream. */
int g_capture_end(rt_t *rt, long slot)
{
    gpu_t *g = G(rt);
    cudaGraph_t graph = NULL;
    if (!g->capturing || slot < 0) {
        fprintf(stderr, "%s:%d: capture_end without capture_begin, or slot %ld\n", __FILE__, __LINE__, slot);
        return -1;
    }
    g->capturing = 0;
    RT_TRY(g_order(rt, STREAM_COMPUTE, RT_STREAM_TP)); /* the join */
    cudaError_t e = cudaStreamEndCapture(MAIN(rt), &graph);
    if (e != cudaSuccess) {
        kern_report_cuda((int)e, "cudaStreamEndCapture", __FILE__, __LINE__);
        fprintf(stderr, "%s:%d: the pass could not be captured: it waited on another stream, read back from "
                        "the device or synchronised (see run --enable-cuda-graph's rules)\n", __FILE__, __LINE__);
        return -1;
    }
    if (slot >= g->ngraphs) {
        long n = slot + 1 > 2 * g->ngraphs ? slot + 1 : 2 * g->ngraphs;
        cudaGraphExec_t *p = realloc(g->graphs, (size_t)n * sizeof *p);
        if (!p) {
            cudaGraphDestroy(graph);
            fprintf(stderr, "%s:%d: out of host memory for %ld graphs\n", __FILE__, __LINE__, n);
            return -1;
        }
        for (long i = g->ngraphs; i < n; i++)
            p[i] = NULL;
        g->graphs = p, g->ngraphs = n;
    }
    cudaGraphExec_t *x = &g->graphs[slot];
    cudaGraphExecUpdateResultInfo info;
    if (*x && cudaGraphExecUpdate(*x, graph, &info) != cudaSuccess) {
        (void)cudaGetLastError(); /* the refused update's error is not the run's */
        cudaGraphExecDestroy(*x);
        *x = NULL;
    }
    if (!*x) {
        e = cudaGraphInstantiate(x, graph, 0);
        rt->graph_builds++;
    }
    cudaGraphDestroy(graph);
    KERN_CUDA_TRY(e);
    KERN_CUDA_TRY(cudaGraphLaunch(*x, MAIN(rt)));
    rt->graph_launches++;
    return 0;
}

void g_graphs_free(rt_t *rt)
{
    gpu_t *g = G(rt);
    cudaGraph_t graph = NULL;
    if (g->capturing && cudaStreamEndCapture(MAIN(rt), &graph) == cudaSuccess) /* a pass that failed mid-capture */
        cudaGraphDestroy(graph);
    g->capturing = 0;
    for (long i = 0; i < g->ngraphs; i++)
        if (g->graphs[i])
            cudaGraphExecDestroy(g->graphs[i]);
    free(g->graphs);
    g->graphs = NULL, g->ngraphs = 0;
}
