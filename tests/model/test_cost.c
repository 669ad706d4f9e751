/* test_cost: op costs against hand-worked alpha-beta and roofline values
 * on the built-in profiles, and the group layouts of Megatron's rank order. */
#include "model/cost.h"
#include "model/estimate.h"
#include "model/layer.h"
#include "../check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Every tile of every head scheduled (no even spread of the leading
 * heads), by a linear scan for the SM that frees first: the reference for
 * cost_attn_wave_eff's shortcut. Causal keys K(n) = sum min(i, w). */
static double keys(double n, double w) { return n <= w ? n * (n + 1) / 2 : w * (w + 1) / 2 + (n - w) * w; }

static double brute_wave_eff(int block, int sms, int bh, double s, double w, int bwd)
{
    double *slot = calloc(sms, sizeof(double)), end = 0;
    int nb = (int)ceil(s / block);
    for (int h = 0; h < bh; h++)
        for (int i = 0; i < nb; i++) { /* heaviest tiles first: the forward's last rows */
            int t = bwd ? i : nb - 1 - i;
            double lo = fmin(s, (double)t * block), hi = fmin(s, (double)(t + 1) * block);
            double work = bwd ? keys(s - lo, w) - keys(s - hi, w) : keys(hi, w) - keys(lo, w);
            int m = 0;
            for (int k = 1; k < sms; k++)
                if (slot[k] < slot[m])
                    m = k;
            slot[m] += work, end = fmax(end, slot[m]);
        }
    free(slot);
    return bh * keys(s, w) / (sms * end);
}

static void setup(job_t *j, hw_t *hw)
{
    char err[OPT_ERR_LEN];
    job_default(j);
    job_hardware(j, hw, err);
    job_finalize(j, hw->cluster.gpus_per_node, err);
}

/* FP8 (--fp8-format): the linear layers' GEMMs at the FP8 peak with their
 * A inputs cast first, the weight gradients from the casts already made,
 * attention untouched; the weights cast once per iteration in the
 * optimizer step; MFU against the bf16 peak unless --mfu-peak fp8. */
/* The default job (MegaScale's 175B plan) on the built-in H100. */
static void h100_default(job_t *j, hw_t *hw)
{
    char err[OPT_ERR_LEN];
    job_default(j);
    snprintf(j->gpu, sizeof j->gpu, "h100-sxm-80gb");
    CHECK(!job_hardware(j, hw, err) && !job_finalize(j, 8, err), "%s", err);
}

static void fp8(void)
{
    job_t j, f;
    hw_t hw;
    char err[OPT_ERR_LEN];
    h100_default(&j, &hw);
    f = j, f.fp8_format = FP8_HYBRID;
    CHECK(!job_finalize(&f, 8, err), "%s", err);
    /* 8192^3: math bound in both, the same curve, the same waves: the time
     * past the launch gap halves with the peak (1,978.9 / 989.4). */
    double gap = hw.gpu.kernel_gap_us * 1e-6, m = 8192;
    double tb = cost_gemm_prec_s(&hw, &j, m, m, m, 1, 0) - gap, tf = cost_gemm_prec_s(&hw, &f, m, m, m, 1, 1) - gap;
    check_rel("FP8 GEMM 8192^3: bf16 time / fp8 time", 1978.9 / 989.4, tb / tf, 1e-12,
              "H100 data sheet: 1,979 dense FP8 TFLOP/s against 989.4 bf16, same curve");
    op_t ops[LAYER_MAX_OPS];
    int n = layer_ops(&f, PASS_BWD, ops), gemms = 0, casts = 0, bad = 0;
    for (int i = 0; i < n; i++)
        if (ops[i].kind == OP_GEMM) {
            int w = strstr(ops[i].name, "wgrad") != NULL;
            gemms++, casts += ops[i].cast_elems > 0;
            bad += !ops[i].fp8 || (w ? ops[i].cast_elems != 0 : ops[i].cast_elems != ops[i].m * ops[i].k);
        }
    check_eq("FP8 backward: GEMMs not as described", 0, bad,
             "every linear GEMM fp8; dgrad casts its m x k gradient, wgrad nothing");
    check_eq("FP8 backward (parallel block): casts", gemms / 2, casts, "one per dgrad, none per wgrad");
    /* The cast's price: bf16 read and fp8 written, 3 bytes an element. */
    op_t g = {.kind = OP_GEMM, .m = 4096, .n = 1024, .k = 1024, .batch = 1, .pair = -1, .fp8 = 1,
              .cast_elems = 4096.0 * 1024};
    double with = cost_op_s(&hw, &f, &g);
    g.cast_elems = 0;
    check_rel("FP8 cast of a 4096 x 1024 input", cost_elem_s(&hw, 4096.0 * 1024 * 3), with - cost_op_s(&hw, &f, &g),
              1e-12, "3 bytes per element at the memory curve");
    estimate_t eb, ef, e8;
    estimate_job(&j, &hw, &eb);
    estimate_job(&f, &hw, &ef);
    check_true("FP8 shortens the 175B iteration on the H100", ef.iteration_s < eb.iteration_s, "faster GEMMs");
    f.mfu_peak = MFU_PEAK_FP8;
    estimate_job(&f, &hw, &e8);
    check_rel("--mfu-peak fp8: MFU scaled by the peaks", ef.mfu * 989.4 / 1978.9, e8.mfu, 1e-12,
              "the same iteration against twice the peak");
    check_rel("... and the iteration unchanged", ef.iteration_s, e8.iteration_s, 0, "only the denominator moves");
}

/* Activation offloading (--activation-offload-fraction F): the held
 * activations fall by F (to host memory) but for the layer being run (whole
 * on the GPU: measured by real_run_offload), and a layer's pass waits only for
 * the copy's time beyond its own. */
static void offload(void)
{
    job_t j, f;
    hw_t hw;
    h100_default(&j, &hw);
    f = j, f.offload_fraction = 0.25;
    memory_t m0, m1;
    workload_memory(&j, &hw, &m0);
    workload_memory(&f, &hw, &m1);
    check_rel("offload 1/4: activations on the GPU", 0.75 * m0.activations_bytes +
              0.25 * workload_layer_activation_bytes(&f), m1.activations_bytes, 1e-12,
              "no recomputation: every held byte is a layer's, a quarter to the host, but the layer being run "
              "is whole (its quarter too)");
    check_rel("... and on the host", 0.25 * m0.activations_bytes, m1.host_offload_bytes, 1e-12, "the same quarter");
    cost_pass_t p0 = cost_pass(&hw, &j, PASS_FWD), p1 = cost_pass(&hw, &f, PASS_FWD);
    check_rel("a fast host link hides the copy", p0.compute_s, p1.compute_s, 0, "copy < layer: nothing waits");
    hw.gpu.pcie_gbps = 0.01;
    p1 = cost_pass(&hw, &f, PASS_FWD);
    double copy_s = 0.25 * workload_layer_activation_bytes(&f) / 0.01e9;
    check_rel("a slow one: the layer waits for the copy", copy_s - p0.exposed_s, p1.compute_s, 1e-12,
              "copy time, less the layer's exposed TP (the layer's compute and it run beside the copy)");
    check_true("built-in H100: the host link", hw_builtin_gpu("h100-sxm-80gb", &hw.gpu) == 0 &&
               fabs(hw.gpu.pcie_gbps - 54.4) < 1e-9, "0.85 x PCIe Gen5 x16's 64 GB/s a direction");
}

/* The CPU's backward GEMMs transpose operands first (gemm_pack_ns,
 * kernels/matmul_ref.c): the layer's ops say which pass each GEMM is, and
 * an input gradient pays for its weight (k x n), a weight gradient for
 * both inputs (k x m and k x n); the forward and every GPU profile (0)
 * pay nothing. */
static void gemm_pack(void)
{
    job_t j;
    hw_t hw;
    setup(&j, &hw);
    op_t ops[LAYER_MAX_OPS];
    int n = layer_ops(&j, PASS_BWD, ops), dg = 0, wg = 0, bad = 0;
    for (int i = 0; i < n; i++)
        if (ops[i].kind == OP_GEMM && !ops[i].unfused_attn) {
            int want = strstr(ops[i].name, "_wgrad") ? 2 : strstr(ops[i].name, "_dgrad") ? 1 : 0;
            dg += want == 1, wg += want == 2, bad += ops[i].gemm_pass != want;
        }
    char got[96];
    snprintf(got, sizeof got, "got %d dgrad, %d wgrad, %d with another pass; expected 2, 2, 0", dg, wg, bad);
    check_true("backward ops (the default, parallel block): each dgrad GEMM pass 1, each wgrad pass 2",
               dg == 2 && wg == 2 && bad == 0, got);
    n = layer_ops(&j, PASS_FWD, ops);
    for (int i = bad = 0; i < n; i++)
        bad += ops[i].kind == OP_GEMM && ops[i].gemm_pass != 0;
    check_eq("forward ops: no GEMM transposes", 0, bad, "pass 0");
    op_t g = {.kind = OP_GEMM, .name = "fc1_wgrad", .m = 512, .n = 256, .k = 64, .batch = 3, .gemm_pass = 2};
    double plain = cost_op_s(&hw, &j, &g);
    hw.gpu.gemm_pack_ns = 1.5;
    check_rel("weight gradient: both inputs transposed", 1.5e-9 * 3 * 64 * (512 + 256), cost_op_s(&hw, &j, &g) - plain,
              1e-9, "ns x batch x k (m + n)");
    g.gemm_pass = 1;
    check_rel("input gradient: the weight transposed", 1.5e-9 * 3 * 64 * 256, cost_op_s(&hw, &j, &g) - plain, 1e-9,
              "ns x batch x k n");
    g.gemm_pass = 0;
    check_rel("forward: nothing", plain, cost_op_s(&hw, &j, &g), 0, "pass 0");
    check_rel("built-in profiles: none", 0, hw_builtin_gpu("h100-sxm-80gb", &hw.gpu) == 0 ? hw.gpu.gemm_pack_ns : -1, 0,
              "cuBLAS reads transposed operands in place");
}

/* --tp-comm-overlap's chunked GEMMs (model/cost_chunk.c chunked_pair)
 * cost what the GEMM op costs beyond its multiply, as the unchunked one
 * does: FP8's casts once, the CPU's transposes once per slice (each of the
 * t steps packs the weight again, real/gpt_layer.c ring_gather_gemm). With
 * no slowdown beside collectives and transfers faster than the slices'
 * GEMMs, a chunked GEMM's multiply costs the whole one's, so the passes
 * with and without the overlap differ only by those extras. */
static void chunked_extras(void)
{
    job_t j, off;
    hw_t hw;
    char err[OPT_ERR_LEN];
    h100_default(&j, &hw); /* MegaScale's preset: SP and --tp-comm-overlap on, TP 8 */
    hw.gpu.comm_slowdown = 0, hw.gpu.nvlink_gbps = 1e6;
    j.fp8_format = FP8_HYBRID;
    CHECK(!job_finalize(&j, 8, err), "%s", err);
    off = j, off.tp_comm_overlap = 0;
    double on_f = cost_pass(&hw, &j, PASS_FWD).compute_s, off_f = cost_pass(&hw, &off, PASS_FWD).compute_s;
    check_rel("FP8 forward: chunked GEMMs keep their casts", off_f, on_f, 1e-12,
              "the pass's compute with the overlap off (its unchunked GEMMs pay cast_elems)");
    hw.gpu.gemm_pack_ns = 1.5;
    op_t ops[LAYER_MAX_OPS];
    int n = layer_ops(&j, PASS_BWD, ops), chunked = 0;
    double want = 0;
    for (int i = 0; i < n; i++)
        if (ops[i].kind == OP_COLL && ops[i].overlap == OVL_CHUNKED) {
            const op_t *g = &ops[ops[i].pair];
            want += (j.tp - 1) * cost_gemm_pack_s(&hw, g->gemm_pass, g->m, g->n, g->k, g->batch);
            chunked += g->gemm_pass == 1;
        }
    double got = cost_pass(&hw, &j, PASS_BWD).compute_s - cost_pass(&hw, &off, PASS_BWD).compute_s;
    check_eq("chunked input gradients in the backward", 1, chunked, "the row-parallel dgrad's gathered gradient");
    check_rel("CPU transposes of a chunked input gradient: t x the weight's", want, got, 1e-9,
              "(t - 1) more packs of its k x n weight at gemm_pack_ns, beyond the unchunked one");
}

/* --enable-cuda-graph: a layer op's kernels are graph nodes, each paying
 * graph_gap_us where a launch pays kernel_gap_us; nothing without a
 * measured graph gap (0: not measured), nor for collectives. */
static void cuda_graphs(void)
{
    job_t j, g;
    hw_t hw;
    h100_default(&j, &hw);
    g = j, g.cuda_graph = 1;
    op_t elem = {.kind = OP_ELEM, .elem_kind = ELEM_STREAM, .bytes = 1 << 20, .repeat = 3, .pair = -1};
    op_t fp8 = {.kind = OP_GEMM, .m = 4096, .n = 1024, .k = 1024, .batch = 1, .fp8 = 1, .cast_elems = 4096 * 1024,
                .pair = -1};
    check_rel("built-in H100 (no graph gap measured): graphs change nothing", cost_op_s(&hw, &j, &elem),
              cost_op_s(&hw, &g, &elem), 0, "graph_gap_us 0: kernel_gap_us");
    hw.gpu.kernel_gap_us = 2.0, hw.gpu.graph_gap_us = 0.5;
    check_rel("an elementwise op run 3 times: 3 launches of 1.5 us less", 3 * 1.5e-6,
              cost_op_s(&hw, &j, &elem) - cost_op_s(&hw, &g, &elem), 1e-9, "runs x (kernel_gap - graph_gap)");
    check_rel("an FP8 GEMM: its cast and its GEMM, 2 launches", 2 * 1.5e-6,
              cost_op_s(&hw, &j, &fp8) - cost_op_s(&hw, &g, &fp8), 1e-9, "the cast is a kernel of its own");
    op_t ar = {.kind = OP_COLL, .coll = COLL_ALLREDUCE, .group = GROUP_TP, .bytes = 1 << 20, .pair = -1};
    check_rel("a collective: unchanged", cost_op_s(&hw, &j, &ar), cost_op_s(&hw, &g, &ar), 0,
              "its launch is priced by coll_launch_us");
    hw.gpu.graph_gap_us = 3.0;
    check_rel("a graph gap above the launch gap saves nothing", cost_op_s(&hw, &j, &elem), cost_op_s(&hw, &g, &elem),
              0, "max(0, kernel_gap - graph_gap)");
}

int main(void)
{
    job_t j;
    hw_t hw;
    setup(&j, &hw);
    const hw_cluster_t *c = &hw.cluster;

    /* Default plan TP8 PP8 DP192 on 8-GPU nodes: TP is one node; DP has one
     * rank per node over 192 consecutive nodes (3 ToR sets of 64: tier 1);
     * PP strides 192 nodes (1,536 nodes: more than a pod of 32 x 64? no:
     * 1,536 <= 2,048, so tier 1). */
    group_layout_t tp = cost_group_layout(&j, &hw, GROUP_TP), dp = cost_group_layout(&j, &hw, GROUP_DP);
    group_layout_t pp = cost_group_layout(&j, &hw, GROUP_PP);
    check_true("TP group inside one node", tp.nodes == 1 && tp.per_node == 8 && tp.tier == -1, "8 ranks, NVLink");
    check_true("DP group: one rank per node, 192 nodes", dp.nodes == 192 && dp.per_node == 1, "rail ring");
    check_rel("DP group tier (192 nodes over 64-node ToR sets)", 1, dp.tier, 0, "aggregation");
    check_rel("PP group nodes", 8, pp.nodes, 0, "stride TP x DP = 1536 ranks");

    /* Ring all-reduce on an idle network, one rank per node, message of
     * 1 GiB over n = 192 ranks: launch + 2(n-1) alpha + 2(n-1)/n S / bw,
     * alpha = alpha_net + 2 (tier+1) hop latencies, bw = NIC x efficiency. */
    double S = 1073741824.0, n = 192;
    double alpha = (c->alpha_net_us + 2 * 2 * c->alpha_hop_us) * 1e-6;
    double bw = c->nic_gbit / 8 * 1e9 * curve_eval(&c->net_eff, S);
    double ring = c->coll_launch_us * 1e-6 + 2 * (n - 1) * alpha + 2 * (n - 1) / n * S / bw;
    double tree = c->coll_launch_us * 1e-6 + 2 * 8 * alpha + 2 * (n - 1) / n * S / (0.9 * bw);
    check_rel("all-reduce 1 GiB over DP=192 (alpha-beta)", fmin(ring, tree),
              cost_coll_s(&hw, COLL_ALLREDUCE, S, &dp), 1e-12, "min(ring, double binary tree)");
    /* All-gather of 50 MB inside a node: launch + 7 NVLink steps + 7/8 S/bw,
     * bw the NVLink curve at the cluster's sustained fraction of it. */
    double S2 = 50331648.0;
    double ag = c->coll_launch_us * 1e-6 + 7 * c->alpha_nvlink_us * 1e-6 +
                7.0 / 8 * S2 / (hw.gpu.nvlink_gbps * 1e9 * fmin(1, curve_eval(&c->nvlink_eff, S2) * c->nvlink_scale));
    check_rel("all-gather 48 MiB over TP=8 (NVLink ring)", ag, cost_coll_s(&hw, COLL_ALLGATHER, S2, &tp), 1e-12,
              "launch + (n-1) alpha + (n-1)/n S / bw");
    check_rel("collective over one rank costs nothing", 0, cost_coll_s(&hw, COLL_ALLREDUCE, S, &(group_layout_t){1, 1, 1, -1}),
              0, "n = 1");
    /* All-to-all inside a node: each rank's 7/8 over its own NVLink, as a
     * ring's. Across 2 nodes, 4 ranks each (MoE Parallel Folding's
     * Mixtral-8x22B-G8T8, ETP 2 x EP 8): each rank's 4/8 leaves the node,
     * 4 ranks' worth over the 4 NICs they share (16/8 S over 4 NICs) while
     * its 3/8 to its node's ranks crosses NVLink beside it. A ring's busbw
     * would take 7/8 S over the same 4 NICs: 2.3x too little time. */
    check_rel("all-to-all 48 MiB over 8 ranks on one node", ag, cost_coll_s(&hw, COLL_ALLTOALL, S2, &tp), 1e-12,
              "(n-1)/n S / NVLink, as the all-gather");
    group_layout_t ep2 = {8, 4, 2, 0};
    double nics4 = 4 * c->nic_gbit / 8 * 1e9 * curve_eval(&c->net_eff, S2) * c->tier_eff[0];
    double nvl = hw.gpu.nvlink_gbps * 1e9 * fmin(1, curve_eval(&c->nvlink_eff, S2) * c->nvlink_scale);
    double a_ep2 = (c->alpha_nvlink_us * 0.75 + c->alpha_net_us * 0.25 + 2 * c->alpha_hop_us) * 1e-6;
    double a2a = c->coll_launch_us * 1e-6 + 7 * a_ep2 + fmax(3.0 / 8 * S2 / nvl, 4 * 4.0 / 8 * S2 / nics4);
    check_rel("all-to-all 48 MiB over 8 ranks on 2 nodes (4 a node)", a2a, cost_coll_s(&hw, COLL_ALLTOALL, S2, &ep2),
              1e-12, "max((q-1)/n S / NVLink, q (n-q)/n S / the q NICs), q = 4");
    check_true("the same all-to-all is NIC-bound, 2x a ring's time or more",
               cost_coll_s(&hw, COLL_ALLTOALL, S2, &ep2) > 2 * cost_coll_s(&hw, COLL_ALLGATHER, S2, &ep2) - 1e-3,
               "16/7 of the ring's transfer");

    /* GEMM roofline: 8192^3 bf16 on A800: 12,288 tiles of 256x128 over
     * 108 SMs -> 114 waves, 99.8% full; efficiency from the curve at 1.1e12,
     * times the cluster's sustained fraction (compute_scale). */
    double m = 8192, flops = 2 * m * m * m;
    double tiles = (m / 256) * (m / 128), we = tiles / (ceil(tiles / 108) * 108);
    double eff = curve_eval(&hw.gpu.gemm_eff, flops) * hw.cluster.compute_scale;
    double t = flops / (312e12 * eff * we) + hw.gpu.kernel_gap_us * 1e-6;
    check_rel("GEMM 8192^3 time (roofline, wave model)", t, cost_gemm_s(&hw, &j, m, m, m, 1), 1e-12,
              "flops / (peak x eff x compute_scale x wave)");
    /* A skinny GEMM is memory bound: 1 x 8192 x 8192 reads the 128 MiB weight. */
    double bytes = (8192.0 + 8192.0 * 8192 + 8192.0) * 2;
    check_true("GEMV is memory bound", cost_gemm_s(&hw, &j, 1, 8192, 8192, 1) >= bytes / (hw.gpu.hbm_gbps * 1e9),
               "time >= bytes / HBM bandwidth");
    /* A narrow output: an MoE router's 512 x 8 logits over k = 8192 on the
     * A800 (256x128 tiles, 108 SMs). A full tile would use 8 of its 128
     * columns, 2 tiles on 108 SMs; cuBLAS runs an 8-wide tile with K split
     * 32 ways (256 each): 64 of 108 SMs busy, no columns wasted. Math at
     * the curve's 67 MFLOP point over 64/108, against reading the 8 MiB
     * input: the longer, plus the launch gap. */
    {
        double rm = 512, rn = 8, rk = 8192, rfl = 2 * rm * rn * rk;
        double rmath = rfl / (312e12 * curve_eval(&hw.gpu.gemm_eff, rfl) * hw.cluster.compute_scale * (64.0 / 108));
        double rbytes = (rm * rk + rk * rn + rm * rn) * 2;
        double rmem = rbytes / (hw.gpu.hbm_gbps * 1e9 * curve_eval(&hw.gpu.mem_eff, rbytes));
        check_rel("router GEMM 512 x 8 x 8192: a narrow tile, K split 32 ways", fmax(rmath, rmem) + hw.gpu.kernel_gap_us * 1e-6,
                  cost_gemm_s(&hw, &j, rm, rn, rk, 1), 1e-12, "max(flops / (peak x eff x 64/108), bytes / HBM) + gap");
        double full = cost_gemm_wave_eff(hw.gpu.gemm_tile_m, hw.gpu.gemm_tile_n, hw.gpu.sm_count, rm, rn, 1);
        check_true("on a full tile it would take 50x longer or more",
                   rfl / (312e12 * curve_eval(&hw.gpu.gemm_eff, rfl) * hw.cluster.compute_scale * full) >
                       50 * cost_gemm_s(&hw, &j, rm, rn, rk, 1),
                   "8/128 columns x 2/108 SMs");
    }
    /* Wave quantisation, compute bound: m = 256, n = 128 x 109, k = 8192 on
     * 108 SMs. 256x128 tiles: 109 tiles, 2 waves, 109/216 busy (0.505);
     * half tiles 128x128 or 256x64: 218 tiles, 3 waves, 218/324 busy, at
     * 0.9 speed = 0.6056, the best. With n = 128 x 108: one full wave. The
     * time ratio is (109/108) / 0.6056 (launch gap and curve aside). */
    double k = 8192, n109 = 128 * 109, n108 = 128 * 108;
    double t109 = cost_gemm_s(&hw, &j, 256, n109, k, 1) - hw.gpu.kernel_gap_us * 1e-6;
    double t108 = cost_gemm_s(&hw, &j, 256, n108, k, 1) - hw.gpu.kernel_gap_us * 1e-6;
    double e109 = curve_eval(&hw.gpu.gemm_eff, 2 * 256 * n109 * k);
    double e108 = curve_eval(&hw.gpu.gemm_eff, 2 * 256 * n108 * k);
    check_rel("wave quantisation: 109 vs 108 tiles", (109.0 / 108) / (0.9 * 218 / 324) * e108 / e109,
              t109 / t108, 1e-9, "worked tile count, half-tile rule");
    /* Memory-bound kernels with math: the longer of bytes at mem_eff and
     * elements at the kernel's rate. bias+GeLU over the 175B layer's
     * T = 2048 x f/t = 6144 elements, bf16 read + write (4 B per element):
     * on the A800, 12.6 M elements at 1,300 G/s take 9.7 us, the 50 MB at
     * ~0.87 x 2,039 GB/s ~28 us: the bytes decide. At a CPU-like 0.063 G/s
     * the elements decide. */
    double el = 2048.0 * 6144, gb = el * 4;
    double mem_t = cost_elem_s(&hw, gb);
    check_rel("GPU bias+GeLU: bandwidth decides", mem_t, cost_elem_math_s(&hw, gb, el, hw.gpu.gelu_gelems), 0,
              "elements / 1,300 G/s < bytes / (HBM x mem_eff)");
    double cpu_rate = 0.063;
    check_rel("CPU-like bias+GeLU: the math rate decides", el / (cpu_rate * 1e9) + hw.gpu.kernel_gap_us * 1e-6,
              cost_elem_math_s(&hw, gb, el, cpu_rate), 1e-12, "elements / rate + launch gap");
    /* Dropout mask draws (dropout_gdraws): not charged at the built-in
     * profiles' 0; at a CPU-like 0.113 G/s, the hidden dropout's draws over
     * the same elements add to the LayerNorm's math (0.5 G/s), and the
     * attention's add to its kernel. */
    op_t ln = {.kind = OP_ELEM, .elem_kind = ELEM_NORM, .bytes = gb, .elems = el, .draws = el};
    op_t ln0 = ln;
    ln0.draws = 0;
    check_rel("draws not charged at dropout_gdraws 0 (built-in)", cost_op_s(&hw, &j, &ln0), cost_op_s(&hw, &j, &ln), 0,
              "hw_builtin.c: 0 until measured");
    hw_t cpu = hw;
    cpu.gpu.norm_gelems = 0.5, cpu.gpu.dropout_gdraws = 0.113;
    check_rel("CPU-like LayerNorm with its dropout: elements / rate + draws / rate",
              el / 0.5e9 + el / 0.113e9 + hw.gpu.kernel_gap_us * 1e-6, cost_op_s(&cpu, &j, &ln), 1e-12,
              "math and draws in one kernel, longer than its bytes");
    /* The unfused attention on a CPU-like profile (calib/profile_attn.c
     * fit_softmax, 2026-11-29: 0.44 G scores/s, GEMMs at 0.55 of gemm_eff):
     * its softmax over the 8 x 64 x 64 scores of the tiny GPT at the rate,
     * above its bytes; its GEMMs at gemm_eff's time / 0.55; the backward's
     * at its own rel; neither changed at the built-in profiles' 0. */
    op_t ops[LAYER_MAX_OPS];
    int nu = layer_unfused_attention_ops(8, 64, 16, 4, 0, ops);
    const op_t *sm = &ops[1], *qk = &ops[0];
    hw_t cpu2 = cpu;
    cpu2.gpu.softmax_fwd_gelems = 0.44, cpu2.gpu.unfused_fwd_rel = 0.55;
    check_rel("unfused attention forward: qk, softmax, pv", 3, nu, 0, "model/layer.c unfused_attention");
    check_rel("softmax at 0 (built-in): its bytes", cost_elem_s(&cpu, sm->bytes), cost_op_s(&cpu, &j, sm), 1e-12,
              "ELEM_SOFTMAX_FWD, softmax_fwd_gelems 0");
    check_rel("softmax at 0.44 G scores/s: scores / rate + gap", 8 * 64 * 64 / 0.44e9 + hw.gpu.kernel_gap_us * 1e-6,
              cost_op_s(&cpu2, &j, sm), 1e-12, "32,768 scores, longer than their 256 KiB");
    check_rel("unfused forward GEMM at unfused_fwd_rel 0.55: gemm_eff's time / 0.55",
              cost_op_s(&cpu, &j, qk) / 0.55, cost_op_s(&cpu2, &j, qk), 1e-12, "model/cost.c unfused_rel");
    layer_unfused_attention_ops(8, 64, 16, 4, 1, ops);
    check_rel("unfused backward GEMM: the forward's rel does not apply", cost_op_s(&cpu, &j, &ops[0]),
              cost_op_s(&cpu2, &j, &ops[0]), 1e-12, "unfused_bwd_rel 0: 1");
    op_t atd = {.kind = OP_ATTN, .batch = 16, .attn_d = 128, .attn_keys = 2048.0 * 2049 / 2};
    op_t atd1 = atd;
    atd1.draws = 16 * atd.attn_keys;
    check_rel("attention with dropout: + draws / rate", atd1.draws / 0.113e9,
              cost_op_s(&cpu, &j, &atd1) - cost_op_s(&cpu, &j, &atd), 1e-9, "every visible score's draw");
    /* A calibrated GPU profile: each pass's own draw rate, the draws
     * waiting for SMs with the FLOPs (both over the wave efficiency), and a
     * fused LayerNorm's draws after its bytes. H100-like: 132 SMs,
     * 128-row blocks; 700 and 300 G draws/s in the flash passes, 230 in the
     * LayerNorm (kern_bench's orders, 2026-11-26). */
    hw_t h1 = hw;
    h1.gpu.sm_count = 132, h1.gpu.attn_block_q = h1.gpu.attn_block_k = 128;
    h1.gpu.dropout_gdraws = 230, h1.gpu.flash_fwd_gdraws = 700, h1.gpu.flash_bwd_gdraws = 300;
    op_t af = {.kind = OP_ATTN, .batch = 64, .attn_d = 128, .attn_seq = 2048, .attn_window = 2048,
               .attn_keys = 2048.0 * 2049 / 2};
    op_t af1 = af, ab = af, ab1;
    af1.draws = 64 * af.attn_keys, ab.attn_bwd = 1, ab1 = ab, ab1.draws = af1.draws;
    double wf64 = cost_attn_wave_eff(128, 132, 64, 2048, 2048, 0), wb64 = cost_attn_wave_eff(128, 132, 64, 2048, 2048, 1);
    check_rel("flash forward's draws: draws / (flash_fwd_gdraws x waves)", af1.draws / (700e9 * wf64),
              cost_op_s(&h1, &j, &af1) - cost_op_s(&h1, &j, &af), 1e-9, "model/hw.h");
    check_rel("flash backward's draws: draws / (flash_bwd_gdraws x waves)", ab1.draws / (300e9 * wb64),
              cost_op_s(&h1, &j, &ab1) - cost_op_s(&h1, &j, &ab), 1e-9, "model/hw.h");
    h1.gpu.flash_bwd_gdraws = 0;
    check_rel("flash_bwd_gdraws 0: dropout_gdraws's rate", ab1.draws / (230e9 * wb64),
              cost_op_s(&h1, &j, &ab1) - cost_op_s(&h1, &j, &ab), 1e-9, "model/hw.h: 0 means dropout_gdraws");
    op_t lng = ln, lng0 = ln0; /* bandwidth-bound on the GPU: bytes, then the draws */
    check_rel("GPU LayerNorm with dropout: its bytes + draws / dropout_gdraws", cost_op_s(&h1, &j, &lng0) + el / 230e9,
              cost_op_s(&h1, &j, &lng), 1e-12, "kern_bench: LN 126 us + dropout's 147 us = LN with dropout's 274 us");
    /* GQA (kern_attention_*_cuda, FlashAttention-2): both passes' grids run
     * over query heads; FlashAttention-1's backward gives a block a whole
     * KV group, so 4 query heads per KV head run 4x fewer, larger blocks. */
    check_rel("GQA backward waves: the grid over query heads", wb64,
              cost_attn_wave_eff(128, 132, cost_attn_grid_heads(64, 4, 1, 0), 2048, 2048, 1), 0, "cost_attn_grid_heads");
    check_rel("GQA forward waves: the grid over query heads", wf64,
              cost_attn_wave_eff(128, 132, cost_attn_grid_heads(64, 4, 0, 0), 2048, 2048, 0), 0, "cost_attn_grid_heads");
    check_rel("GQA FlashAttention-1 backward waves: the grid over KV heads", cost_attn_wave_eff(128, 132, 16, 2048, 2048, 1),
              cost_attn_wave_eff(128, 132, cost_attn_grid_heads(64, 4, 1, 1), 2048, 2048, 1), 0, "cost_attn_grid_heads");
    /* ... and GQA's backward adds the pass that sums each group's fp32 dK,
     * dV partials: 64 query heads' (4 per KV head) 2048 x 128 elements,
     * 8 bytes read each and 2 x 2 written per KV head's: 9 x 64 x 2048 x 128
     * bytes at the memory curve, with the launch gap. */
    op_t abg = ab;
    abg.attn_group = 4;
    double sum_bytes = 9.0 * 64 * 2048 * 128;
    check_rel("GQA backward: + the dK, dV sum's bytes", cost_elem_s(&h1, sum_bytes),
              cost_op_s(&h1, &j, &abg) - cost_op_s(&h1, &j, &ab), 1e-12, "model/cost.h: cost_attn_dkv_sum_s");
    op_t afg = af;
    afg.attn_group = 4;
    check_rel("GQA forward: no sum", cost_op_s(&h1, &j, &af), cost_op_s(&h1, &j, &afg), 0, "model/cost.h");
    hw_t hc = h1;
    hc.gpu.attn_block_k = 1;
    check_rel("GQA backward on the CPU (attn_block_k 1): no sum", 0, cost_attn_dkv_sum_s(&hc, &abg), 0,
              "the reference kernels add into dK, dV in place");
    /* FlashAttention-1 (--attention flash1) at flash1_rel of the flash
     * kernel's rate (0.5, the FA-2 paper's "around 2x"): the 175B layer's
     * forward attention at TP 8, 16 heads x 2048 causal keys, takes twice
     * as long, launch gap aside. */
    op_t at = {.kind = OP_ATTN, .batch = 16, .attn_d = 128, .attn_keys = 2048.0 * 2049 / 2};
    double gap = hw.gpu.kernel_gap_us * 1e-6;
    op_t at1 = at;
    at1.attn_v1 = 1;
    check_rel("FlashAttention-1 forward / flash forward", 1 / hw.gpu.flash1_rel,
              (cost_attn_s(&hw, &at1) - gap) / (cost_attn_s(&hw, &at) - gap), 1e-12, "1 / flash1_rel = 2");

    /* Resident blocks per SM (attn_slots_q/k): the waves run over sm_count
     * x that many slots; 0 and 1 both mean one. */
    hw_t hs = h1;
    hs.gpu.attn_slots_q = 2, hs.gpu.attn_slots_k = 0;
    check_rel("attention slots: forward over 2 x 132", 264, cost_attn_slots(&hs.gpu, 0), 0, "model/cost.h");
    check_rel("attention slots: backward, 0 means one per SM", 132, cost_attn_slots(&hs.gpu, 1), 0, "model/hw.h");
    double w264 = cost_attn_wave_eff(128, 264, 64, 2048, 2048, 0);
    check_rel("flash forward on 2 slots per SM: its FLOP time over the 264-slot waves",
              (cost_op_s(&h1, &j, &af) - h1.gpu.kernel_gap_us * 1e-6) * wf64 / w264,
              cost_op_s(&hs, &j, &af) - hs.gpu.kernel_gap_us * 1e-6, 1e-9, "model/cost.c cost_attn_s");
    /* Attention waves. Four causal queries, one per tile, on 2 SMs: both
     * passes launch their heaviest tiles first, (4, 3, 2, 1) pairs: SM A
     * 4 + 1, SM B 3 + 2, both end at 5: full. A sequence of 5 in blocks of
     * 2 rows: the forward's tiles (rows 4; 2-3; 0-1) hold 5, 7 and 3
     * pairs: SM A 5 + 3, SM B 7: 15 / (2 x 8). */
    check_rel("attention wave, forward, 4 queries on 2 SMs", 1, cost_attn_wave_eff(1, 2, 1, 4, 4, 0), 1e-12,
              "greedy by hand: SMs end at 5 and 5");
    check_rel("attention wave, forward, 5 queries in blocks of 2 on 2 SMs", 15.0 / 16,
              cost_attn_wave_eff(2, 2, 1, 5, 5, 0), 1e-12, "greedy by hand: SMs end at 8 and 7");
    check_rel("attention wave, backward, 4 keys on 2 SMs", 1, cost_attn_wave_eff(1, 2, 1, 4, 4, 1), 1e-12,
              "greedy by hand: SMs end at 5 and 5");
    check_rel("attention wave, one SM", 1, cost_attn_wave_eff(128, 1, 3, 1000, 1000, 0), 1e-12, "no SM ever idles");
    /* The shortcut (leading heads spread evenly, the last ones scheduled
     * tile by tile) against the full schedule: the 175B layer at TP 8
     * (12 heads of 2048, 128-row blocks, A100's 108 SMs), with micro-batch
     * 8 (96 heads; 512: 76 waves, past the exact 64), and a 512-key window. */
    int cases[][4] = {{12, 2048, 2048, 0}, {12, 2048, 2048, 1}, {96, 2048, 2048, 0},
                      {96, 2048, 2048, 1}, {96, 2048, 512, 0}, {40, 2000, 2000, 1}, {512, 2048, 2048, 0}};
    for (int c = 0; c < 7; c++) {
        char what[96];
        int *k = cases[c];
        snprintf(what, sizeof what, "attention wave, %s, %d heads of %d, window %d: shortcut vs full schedule",
                 k[3] ? "backward" : "forward", k[0], k[1], k[2]);
        check_rel(what, brute_wave_eff(128, 108, k[0], k[1], k[2], k[3]),
                  cost_attn_wave_eff(128, 108, k[0], k[1], k[2], k[3]), 0.01, "every tile scheduled, linear scan");
    }
    /* 12 heads x 16 blocks = 192 thread blocks on 108 SMs: both passes
     * launch the same tile works in the same order (the forward's last rows
     * see as many keys as the backward's first keys are seen by), so they
     * lose the same to the last wave, and something. */
    double wf = cost_attn_wave_eff(128, 108, 12, 2048, 2048, 0), wb = cost_attn_wave_eff(128, 108, 12, 2048, 2048, 1);
    check_true("attention wave, 175B TP 8: 0.5 < forward = backward < 1", 0.5 < wf && wf == wb && wb < 1,
               "heaviest tiles first in both passes");
    printf("     175B TP 8 micro-batch 1 attention wave efficiency: forward %.3f, backward %.3f\n", wf, wb);
    /* The built-in profiles' flash curves already hold the grid's fill
     * (block rows 0: no wave model); a calibrated profile's do not, and
     * carry its kernels' blocks. */
    op_t big = at, wide = at;
    big.attn_seq = 2048, big.attn_window = 2048, big.batch = 12;
    wide = big, wide.batch = 120;
    double t0 = cost_attn_s(&hw, &big) - gap;
    check_rel("built-in profile (attention blocks 0): no wave factor",
              op_flops(&big) / (hw.gpu.peak_bf16_tflops * 1e12 *
                                fmin(1, curve_eval(&hw.gpu.flash_fwd_eff, op_flops(&big)) * hw.cluster.compute_scale)),
              t0, 1e-12, "FLOPs / (peak x curve x compute_scale)");
    hw.gpu.attn_block_q = hw.gpu.attn_block_k = 128;
    double t1 = cost_attn_s(&hw, &big) - gap, t10 = cost_attn_s(&hw, &wide) - gap;
    check_rel("128-row blocks: the attention op's time carries the wave efficiency",
              op_flops(&big) / (hw.gpu.peak_bf16_tflops * 1e12 * fmin(1, curve_eval(&hw.gpu.flash_fwd_eff, op_flops(&big)) *
                                                                                  hw.cluster.compute_scale) * wf),
              t1, 1e-12, "FLOPs / (peak x curve x compute_scale x wave)");
    check_true("ten times the heads take less than ten times as long", t10 < 10 * t1, "larger grids fill the SMs better");
    fp8();
    offload();
    gemm_pack();
    chunked_extras();
    cuda_graphs();
    /* Llama 3's cluster: a group across pods has 1/7 of the bandwidth (the
     * aggregation layer at 1:7, arXiv 2407.21783 section 3.3.1). Above the
     * net curve's last point the bandwidth term is linear in the bytes, so
     * t(2S) - t(S) is it alone: 7 times as long over the pods. */
    hw_t l3;
    CHECK(!hw_resolve("h100-sxm-80gb", "llama3-roce", "", &l3, (char[OPT_ERR_LEN]){0}), "llama3-roce");
    group_layout_t pods = {2048, 1, 2048, 2}, pod = {2048, 1, 2048, 1};
    double G = 1073741824.0;
    double across = cost_coll_s(&l3, COLL_ALLGATHER, 2 * G, &pods) - cost_coll_s(&l3, COLL_ALLGATHER, G, &pods);
    double within = cost_coll_s(&l3, COLL_ALLGATHER, 2 * G, &pod) - cost_coll_s(&l3, COLL_ALLGATHER, G, &pod);
    check_rel("llama3-roce: bandwidth time across pods / within one", 7, across / within, 1e-9,
              "1:7 above the 3,072-GPU pods (Llama 3, section 3.3.1)");
    return check_done("test_cost");
}
