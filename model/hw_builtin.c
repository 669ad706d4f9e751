/* hw_builtin: the built-in GPU and cluster profiles, each number with its
 * public source. Efficiency curves are approximate readings of public
 * measurements, stated as such; `megasim calibrate` replaces them with
 * measured ones. Why each was chosen: experiments/megascale/ASSUMPTIONS.md. */
#include "model/hw.h"

#include <string.h>

#define CURVE(...) {sizeof((double[][2]){__VA_ARGS__}) / sizeof(double[2]), {0}, {0}}

/* Curves are written as point lists and unpacked by set_curve. */
static void set_curve(curve_t *c, const double (*pts)[2], int n)
{
    c->n = n;
    for (int i = 0; i < n; i++)
        c->x[i] = pts[i][0], c->y[i] = pts[i][1];
}
#define SET_CURVE(dst, ...)                                                       \
    do {                                                                          \
        static const double pts_[][2] = {__VA_ARGS__};                            \
        set_curve(&(dst), pts_, (int)(sizeof pts_ / sizeof pts_[0]));              \
    } while (0)

/* Fitted on MegaScale Table 3 by `megasim reproduce` (see nccl_defaults
 * and the megascale cluster), rounded. */
#define MEGASCALE_COMPUTE_SCALE 0.94
#define HOST_SYNC_GAP_US 900.0
#define ITERATION_OVERHEAD_S 0.45
#define MEGASCALE_NVLINK_SCALE 0.7

const char *const hw_gpu_names[] = {"a100-sxm-80gb", "a800-sxm-80gb", "h100-sxm-80gb", "h800-sxm-80gb",
                                    "h200-sxm-141gb", "b200-sxm-180gb", "gb200-nvl72", NULL};
const char *const hw_cluster_names[] = {"megascale", "fattree", "gb200-nvl72", "llama3-roce", NULL};

/* Math rates of the memory-bound kernels from the FP32 (CUDA core) peak,
 * TFLOP/s (A100 19.5, H100 SXM 66.9: datasheets), and FLOPs per element
 * counted in the kernels: residual + LayerNorm ~10 (add, mean, variance,
 * normalise, scale, shift), bias + GeLU ~15 (tanh form, tanh.approx on the
 * SFU), AdamW/LAMB ~20 per parameter (moments, sqrt, division, decay). All
 * are 10x or more above what HBM feeds them: bandwidth decides on GPUs. */
static void math_rates(hw_gpu_t *g, double fp32_tflops)
{
    g->norm_gelems = fp32_tflops * 1e3 / 10;
    g->gelu_gelems = fp32_tflops * 1e3 / 15;
    g->optim_gparams = fp32_tflops * 1e3 / 20;
    /* Dropout's Philox draws are integer work whose rate depends on how a
     * kernel shares one counter's four words (torch's dropout and
     * FlashAttention's differ): not charged until a GPU measures it. */
    g->dropout_gdraws = 0;
}

/* A pinned host copy's sustained share of the PCIe link rate: 128b/130b
 * encoding and the packet headers of 256-byte payloads leave about 85%
 * (an assumption until a GPU measures its copies; MEMO's offloading and
 * `--activation-offload-fraction` run at it). */
#define PCIE_SUSTAINED 0.85

/* Ampere SXM4 80GB: NVIDIA A100 Tensor Core GPU datasheet (2021): 312
 * TFLOP/s dense BF16, 156 TF32, 2,039 GB/s HBM2e, 80 GB, NVLink 600 GB/s
 * (12 links, both directions: 300 GB/s each way), 108 SMs (A100 whitepaper).
 * A800: the same chip with NVLink cut to 400 GB/s (NVIDIA A800 datasheet). */
static void ampere(hw_gpu_t *g, const char *name, double nvlink_gbps)
{
    strcpy(g->name, name);
    g->peak_bf16_tflops = 312.0;
    g->peak_tf32_tflops = 156.0;
    g->pcie_gbps = PCIE_SUSTAINED * 32.0; /* PCIe Gen4 x16: 64 GB/s both ways (data sheet) */
    g->hbm_gib = 80.0;
    g->hbm_gbps = 2039.0;
    g->nvlink_gbps = nvlink_gbps;
    g->sm_count = 108;
    /* cuBLAS's large bf16 kernels on sm_80 use 256x128 tiles (CUTLASS
     * default sm80 tensor-op GEMM threadblock shape). */
    g->gemm_tile_m = 256, g->gemm_tile_n = 128;
    /* No attention wave model (0): the flash curves below are functions of
     * an op's total FLOPs drawn through public sweeps, so a small grid's
     * poorly filled last wave is already in their low end; dividing by it
     * again would count it twice. Calibrated profiles fit the curves with
     * the waves taken out, and carry the kernels' block rows (calib/). */
    g->attn_block_q = g->attn_block_k = 0;
    /* Back-to-back launch gap with the host ahead of the GPU, ~2 us
     * (CUDA launch latency as reported in NVIDIA's CUDA Graphs blog). */
    g->kernel_gap_us = 2.0;
    /* NCCL's NVLink collectives run on 8-16 channels, one SM each, out of
     * 108 SMs, and share HBM bandwidth: ~10% slower compute beside them. */
    g->comm_slowdown = 0.10;
    /* Best achievable bf16 matmul ~86% of peak (the "maximum achievable
     * matmul FLOPS" survey in Bekman's ml-engineering book); smaller calls
     * lose to launch and tail effects (shape of public cuBLAS sweeps). */
    SET_CURVE(g->gemm_eff, {1e8, 0.15}, {1e9, 0.40}, {1e10, 0.68}, {1e11, 0.82}, {1e12, 0.86});
    /* FlashAttention-2 paper (Dao 2023), A100, head dim 128, causal: forward
     * ~60-70% of peak, backward ~45-55% at long sequences. */
    SET_CURVE(g->flash_fwd_eff, {1e8, 0.10}, {1e9, 0.28}, {1e10, 0.50}, {1e11, 0.62}, {1e12, 0.66});
    SET_CURVE(g->flash_bwd_eff, {1e8, 0.08}, {1e9, 0.22}, {1e10, 0.40}, {1e11, 0.50}, {1e12, 0.54});
    /* FlashAttention-1 reaches 25-40% of peak; FlashAttention-2 "around
     * 2x" that, 50-73% (Dao 2023, abstract; A100). */
    g->flash1_rel = 0.5;
    /* Memory-bound kernels reach ~90% of HBM bandwidth when large (STREAM
     * style copy on A100: ~1.8 TB/s of 2.04); small ones are tail bound. */
    SET_CURVE(g->mem_eff, {1e5, 0.05}, {1e6, 0.35}, {1e7, 0.75}, {1e8, 0.87}, {1e9, 0.90});
    math_rates(g, 19.5);
}

/* Hopper SXM5 80GB: NVIDIA H100 datasheet: 989 TFLOP/s dense BF16 (1,979
 * with sparsity), 1,979 dense FP8 (3,958 with sparsity), 495 TF32, 3.35 TB/s HBM3, NVLink 900 GB/s (450 each way),
 * 132 SMs. H800: NVLink 400 GB/s (NVIDIA H800 datasheet). H200 SXM: the
 * same GH100 with 141 GB of HBM3e at 4.8 TB/s (NVIDIA H200 datasheet:
 * 1,979 TFLOP/s BF16 and 989 TF32 with sparsity, 67 FP32, NVLink 900 GB/s,
 * the H100's figures), so the H100's curves: its GEMMs and attention run
 * on the same SMs at the same clocks; the memory-bound kernels a slightly
 * smaller fraction of a faster HBM (measured: hw_builtin_gpu).
 * Memory as the data sheets give it (80, 141 GB), as for every GPU here. */
static void hopper(hw_gpu_t *g, const char *name, double nvlink_gbps, double hbm_gib, double hbm_gbps)
{
    strcpy(g->name, name);
    g->peak_bf16_tflops = 989.4;
    g->peak_tf32_tflops = 494.7;
    /* FP8 GEMMs are taken at the bf16 curve's fraction of their own peak
     * (an assumption until a GPU calibrates FP8 GEMMs: public H100 sweeps
     * put both near 70-80% of their peaks at large sizes). Ampere has no
     * FP8 tensor cores (0). */
    g->peak_fp8_tflops = 1978.9;
    g->pcie_gbps = PCIE_SUSTAINED * 64.0; /* PCIe Gen5 x16: 128 GB/s both ways (data sheets) */
    g->hbm_gib = hbm_gib;
    g->hbm_gbps = hbm_gbps;
    g->nvlink_gbps = nvlink_gbps;
    g->sm_count = 132;
    g->gemm_tile_m = 128, g->gemm_tile_n = 256; /* CUTLASS sm90 default */
    g->attn_block_q = g->attn_block_k = 0; /* no attention wave model, as for Ampere */
    g->kernel_gap_us = 2.0;
    g->comm_slowdown = 0.10;  /* 8-16 channels of 132 SMs, as for Ampere */
    /* Best bf16 matmul ~80% of peak (same MAMF survey). */
    SET_CURVE(g->gemm_eff, {1e8, 0.08}, {1e9, 0.25}, {1e10, 0.55}, {1e11, 0.74}, {1e12, 0.80});
    /* FlashAttention-2 on H100 reaches ~35-40% of peak forward (FA-3 paper,
     * Shah et al. 2024, FA-2 baseline curves), backward ~30%. Against
     * kernels timed on an H200 (the same SMs and clocks; kernels/bench
     * sdpa_baseline.py, PyTorch 2.11, cuDNN 9.19, 2026-11-29) at five causal
     * shapes of head size 128 (docs/hardware.md), these curves (at the
     * clusters' compute_scale, 0.94) price forward + backward 27-50% under
     * PyTorch SDPA's FA-2 backend and -38% to +37% of cuDNN's fused
     * attention: a cuDNN-class stack, its small grids (175B/TP8's 12 heads)
     * priced fast, as there is no wave model here. */
    SET_CURVE(g->flash_fwd_eff, {1e8, 0.05}, {1e9, 0.14}, {1e10, 0.28}, {1e11, 0.36}, {1e12, 0.38});
    SET_CURVE(g->flash_bwd_eff, {1e8, 0.04}, {1e9, 0.12}, {1e10, 0.24}, {1e11, 0.30}, {1e12, 0.33});
    g->flash1_rel = 0.5; /* FA-2 vs FA-1, as for Ampere (FA-2 paper, H100 runs) */
    SET_CURVE(g->mem_eff, {1e5, 0.04}, {1e6, 0.30}, {1e7, 0.72}, {1e8, 0.86}, {1e9, 0.90});
    /* A weight gradient summed into its fp32 main gradient (cuBLAS with
     * beta 1 and an fp32 C, as Megatron-LM's gradient-accumulation fusion
     * and Transformer Engine issue it) runs slower than the bf16 product:
     * measured on an H100, 0.716 +- 0.017 of the accumulation's 8 bytes per
     * output element at HBM speed not hidden (calibrate, 24 weight
     * gradients, R^2 0.98, 2026-11-26: experiments/profiles/
     * h100-sxm-80gb-measured.json, fits/gemm_acc). */
    g->gemm_acc_exposed = 0.72;
    math_rates(g, 66.9);
}

/* Blackwell, dense rates from NVIDIA's data sheets (their sparsity figures
 * halved): DGX B200 (8 GPUs: 72 PFLOPS FP8 training with sparsity, 1,440
 * GB HBM3e at 64 TB/s, NVLink 5 at 1.8 TB/s a GPU both ways; host PCIe
 * Gen5) gives the B200 4,500 TFLOP/s FP8, 2,250 BF16 and 1,100 TF32, 180 GB
 * at 8 TB/s; GB200 NVL72 (72 GPUs: 720 PFLOPS FP8, 360 BF16 and 180 TF32
 * with sparsity, 13.4 TB HBM3e at 576 TB/s, 130 TB/s of NVLink; each GPU's
 * host link NVLink-C2C at 900 GB/s both ways) gives each GPU 5,000, 2,500
 * and 1,250 TFLOP/s, 186 GB at 8 TB/s. Not in the data sheets, and
 * assumptions until a Blackwell is calibrated: 148 SMs (what a B200's
 * device query reports), 79.6 TFLOP/s FP32 (148 SMs x 128 lanes x 2 x ~2.1
 * GHz), and the H100's efficiency curves, tiles and fp32 accumulation share (the same kind of
 * tensor-core kernels; Blackwell's own, tcgen05, may do better). */
static void blackwell(hw_gpu_t *g, const char *name, double bf16, double tf32, double hbm_gib, double host_gbps)
{
    hopper(g, name, 900.0, hbm_gib, 8000.0);
    g->peak_bf16_tflops = bf16, g->peak_tf32_tflops = tf32, g->peak_fp8_tflops = 2 * bf16;
    g->sm_count = 148;
    g->pcie_gbps = PCIE_SUSTAINED * host_gbps;
    math_rates(g, 79.6);
}

int hw_builtin_gpu(const char *name, hw_gpu_t *g)
{
    memset(g, 0, sizeof *g);
    if (!strcmp(name, "a100-sxm-80gb"))
        ampere(g, name, 300.0);
    else if (!strcmp(name, "a800-sxm-80gb"))
        ampere(g, name, 200.0);
    else if (!strcmp(name, "h100-sxm-80gb"))
        hopper(g, name, 450.0, 80.0, 3350.0);
    else if (!strcmp(name, "h800-sxm-80gb"))
        hopper(g, name, 200.0, 80.0, 3350.0);
    else if (!strcmp(name, "h200-sxm-141gb")) {
        hopper(g, name, 450.0, 141.0, 4800.0);
        /* Its memory-bound kernels: the H100's curve tops at 0.90 of the
         * data sheet, which an H100's copy reached (3007 of 3350 GB/s,
         * calibrate, 2026-11-26); an H200's device-to-device copy reached
         * 4225 of 4800 GB/s, 0.88 (kern_bench, 2026-11-29), so the curve
         * scaled by 0.88 / 0.90. */
        for (int i = 0; i < g->mem_eff.n; i++)
            g->mem_eff.y[i] *= 0.88 / 0.90;
        /* Its weight gradients' fp32 accumulation: 0.607 +- 0.042 exposed
         * (calibrate --quick, 16 samples, R^2 0.90, 2026-11-29:
         * h200-sxm-141gb-measured.json, fits/gemm_acc). */
        g->gemm_acc_exposed = 0.61;
    }
    else if (!strcmp(name, "b200-sxm-180gb"))
        blackwell(g, name, 2250.0, 1100.0, 180.0, 64.0); /* PCIe Gen5 x16 */
    else if (!strcmp(name, "gb200-nvl72"))
        blackwell(g, name, 2500.0, 1250.0, 186.0, 450.0); /* NVLink-C2C */
    else
        return -1;
    return 0;
}

/* Shared by both clusters: NCCL's own latency tables (src/graph/tuning.cc,
 * NCCL 2.18: Simple protocol, ring: base 8.4 us, 3.4 us per NVLink step,
 * 14 us per network step) and nccl-tests bandwidths on DGX A100 class
 * nodes (NVLink all-reduce busbw ~230 of 300 GB/s; 8x200G all-reduce
 * busbw ~185 of 200 GB/s per node). */
static void nccl_defaults(hw_cluster_t *c)
{
    c->alpha_nvlink_us = 3.4;
    c->alpha_net_us = 14.0;
    c->alpha_hop_us = 0.5;     /* switch port-to-port latency, 64x400G class */
    c->coll_launch_us = 8.4;
    SET_CURVE(c->nvlink_eff, {4096, 0.02}, {65536, 0.20}, {1048576, 0.55}, {16777216, 0.72}, {134217728, 0.78});
    SET_CURVE(c->net_eff, {4096, 0.05}, {65536, 0.35}, {1048576, 0.70}, {16777216, 0.88}, {134217728, 0.93});
    /* Runtime memory: CUDA context ~0.5 GiB, NCCL buffers for 4-5
     * communicators, cuBLAS workspace, allocator fragmentation. */
    c->runtime_reserved_gib = 2.5;
    /* Megatron-LM's code, on any cluster, fitted on MegaScale's Table 3 with
     * the compute scale by `megasim reproduce` (least squares, closed form;
     * experiments/megascale/ASSUMPTIONS.md), rounded: after each blocking
     * pipeline exchange Megatron calls torch.cuda.synchronize()
     * (p2p_communication.py, "to protect against race condition when using
     * batch_isend_irecv"), so the GPU idles until the host has launched the
     * next chunk's first kernels; Table 3 row 5 (decoupled send/receive) is
     * what sees it. */
    c->host_sync_gap_us = HOST_SYNC_GAP_US;
}

/* A rail-optimised fat-tree: a NIC a GPU at nic_gbit, nodes_per_tor
 * nodes under a ToR set, tors_per_pod of them a pod at full bisection, pod_os
 * above (1: none). The Table 3 fit's sustained fraction of the data sheets'
 * rates: with it NVIDIA's published Megatron-LM MFU on A100 (22B to 1T,
 * Selene) comes out within 2 points, with 1.0 up to 3.3 high
 * (scripts/crosscheck-megatron.py). No per-iteration host terms. NVLink at
 * its curve as measured (nvlink_scale 1): the curve comes from DGX A100
 * class nodes. */
static void rail_fattree(hw_cluster_t *c, const char *name, int gpus_per_node, double nic_gbit, int nodes_per_tor,
                         int tors_per_pod, double pod_os)
{
    strcpy(c->name, name);
    c->fabric = FABRIC_FATTREE;
    c->gpus_per_node = c->nics_per_node = gpus_per_node, c->nic_gbit = nic_gbit;
    c->nodes_per_tor = nodes_per_tor, c->tors_per_pod = tors_per_pod;
    c->tor_uplink_ratio = 1.0, c->oversubscription = 1.0, c->pod_oversubscription = pod_os;
    c->tier_eff[0] = c->tier_eff[1] = c->tier_eff[2] = 1.0;
    c->compute_scale = MEGASCALE_COMPUTE_SCALE;
    c->nvlink_scale = 1.0;
}

int hw_builtin_cluster(const char *name, hw_cluster_t *c)
{
    memset(c, 0, sizeof *c);
    if (!strcmp(name, "megascale")) {
        /* MegaScale section 3.6: 8 GPUs and 8x200G NICs per node, one NIC
         * per rail; 3-tier Clos of Tomahawk 4 (64x400G), 32 down / 32 up per
         * tier (1:1); ToR 400G ports split to 2x200G down, so uplinks have
         * twice the downlink speed; up to 64 servers per ToR set. */
        strcpy(c->name, name);
        c->fabric = FABRIC_CLOS3;
        c->gpus_per_node = 8, c->nics_per_node = 8, c->nic_gbit = 200.0;
        c->nodes_per_tor = 64;
        c->tors_per_pod = 32;  /* 32 downlinks of an aggregation switch */
        c->tor_uplink_ratio = 2.0, c->oversubscription = 1.0;
        /* Non-blocking with 2x uplinks: the paper reports ECMP conflicts
         * largely removed; the closed form keeps full bandwidth at every
         * tier and the simulator models hashing explicitly. */
        c->tier_eff[0] = c->tier_eff[1] = c->tier_eff[2] = 1.0;
        /* The fraction of the data-sheet GEMM and attention rates the
         * paper's cluster sustained (production clocks under its power and
         * cooling), fitted on Table 3 with the host terms below. */
        c->compute_scale = MEGASCALE_COMPUTE_SCALE;
        /* The fraction of the NVLink curve (nccl-tests on DGX A100 class
         * nodes, nccl_defaults) that the paper's A800 nodes sustained in
         * training: fitted on Table 3, where the parallel block (row 2)
         * and the TP overlap (row 4) are what see it. */
        c->nvlink_scale = MEGASCALE_NVLINK_SCALE;
        /* The paper's environment, fitted on its Table 3, and not carried to
         * other clusters (NVIDIA's own Megatron-LM runs show neither:
         * scripts/crosscheck-megatron.py, whose 22B row, 1.1 s per
         * iteration, would lose 15 points to them):
         * - the host stall per iteration with a synchronous loader on every
         *   rank (row 8, "misc": 61.2% to 62.3% MFU at batch 256 on 256 GPUs
         *   is 0.2 s of an 11.4 s iteration; by hand);
         * - a per-iteration overhead for both systems that no modelled op
         *   explains (row 9 against row 8: the same plan at 3x the batch
         *   gains more than the modelled bubble and DP exposure allow). */
        c->host_stall_s = 0.2;
        c->iteration_overhead_s = ITERATION_OVERHEAD_S;
    } else if (!strcmp(name, "fattree")) {
        /* Generic rail-optimised fat-tree (NVIDIA DGX SuperPOD style):
         * 8 GPUs, 8x200G NICs per node, 32 nodes per leaf group, 1:1.
         * --nics-per-node, --nic-gbit and --oversubscription change it. */
        rail_fattree(c, name, 8, 200.0, 32, 32, 1.0);
    } else if (!strcmp(name, "llama3-roce")) {
        /* Meta's 24K-GPU RoCE cluster that trained Llama 3 405B (arXiv
         * 2407.21783, section 3.3.1): 8 H100s and 8 x 400 Gb/s NICs a
         * server, 2 servers (16 GPUs) under a ToR, 192 racks a pod of 3,072
         * GPUs at full bisection, 8 pods joined by aggregation switches at
         * 1:7. */
        rail_fattree(c, name, 8, 400.0, 2, 192, 7.0);
    } else if (!strcmp(name, "gb200-nvl72")) {
        /* GB200 NVL72 racks (NVIDIA's data sheet): 72 GPUs in one NVLink
         * domain (NVLink 5 switches, 1.8 TB/s a GPU both ways: the GPU
         * profile's nvlink_gbps), so a "node" here is a rack, and TP, CP
         * and EP groups up to 72 GPUs stay on NVLink; one 400G ConnectX-7
         * NIC a GPU on the scale-out fabric (DGX GB200). Assumptions: a
         * rail-optimised 1:1 fat-tree of 8 racks a leaf group and 16 leaf
         * groups a pod (9,216 GPUs). */
        rail_fattree(c, name, 72, 400.0, 8, 16, 1.0);
    } else {
        return -1;
    }
    if (c->pod_oversubscription < 1) /* full bisection across pods unless said */
        c->pod_oversubscription = 1;
    c->host_share = 1; /* a GPU each */
    nccl_defaults(c);
    return 0;
}
