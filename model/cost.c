/* cost: per-op time model (see cost.h). */
#include "model/cost.h"

#include "model/layout.h"
#include "model/workload.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define US 1e-6

/* The tensor-core peak a GEMM runs against. */
static double gemm_peak_flops(const hw_t *hw, const job_t *job, int fp8)
{
    return (fp8 ? hw->gpu.peak_fp8_tflops : job->bf16 ? hw->gpu.peak_bf16_tflops : hw->gpu.peak_tf32_tflops) * 1e12;
}

double cost_peak_flops(const hw_t *hw, const job_t *job)
{
    return gemm_peak_flops(hw, job, job->mfu_peak == MFU_PEAK_FP8);
}

/* Useful fraction of the work when tiles of tm x tn cover the (m x n)
 * output over `sms` SMs: the covered area wasted past the matrix edge, and
 * the idle SMs of the last wave: (m n / covered area) x tiles / (waves x SMs). */
static double wave_eff(double m, double n, double batch, int tm, int tn, int sms)
{
    double tiles_m = ceil(m / tm), tiles_n = ceil(n / tn);
    double tiles = tiles_m * tiles_n * batch, waves = ceil(tiles / sms);
    return (m * n) / (tiles_m * tm * tiles_n * tn) * tiles / (waves * sms);
}

/* cuBLAS picks among kernels: the profile's tile in both orientations, or
 * a half-size tile (one dimension halved) that fills the last wave better
 * but reuses less data per load: HALF_TILE_EFF of the full tile's speed
 * (CUTLASS's 128x128 vs 256x128 sm80 kernels differ by about that). */
#define HALF_TILE_EFF 0.9

double cost_gemm_wave_eff(int tm, int tn, int s, double m, double n, double batch)
{
    double best = fmax(wave_eff(m, n, batch, tm, tn, s), wave_eff(m, n, batch, tn, tm, s));
    if (best >= HALF_TILE_EFF) /* a half tile gives HALF_TILE_EFF x at most 1: it cannot do better */
        return best;
    double half = fmax(fmax(wave_eff(m, n, batch, tm / 2, tn, s), wave_eff(m, n, batch, tm, tn / 2, s)),
                       fmax(wave_eff(m, n, batch, tn / 2, tm, s), wave_eff(m, n, batch, tn, tm / 2, s)));
    return fmax(best, HALF_TILE_EFF * half);
}

/* A GEMM whose output is narrower than half the profile's smaller tile
 * side (an MoE router's m x E logits, E = 8: 8 of a 256-wide tile's
 * columns; 4 tiles for 132 SMs) does not run on that tile: cuBLAS picks a
 * narrow one (tensor-core MMAs come 8 wide: wgmma's N, mma.sync's n8)
 * and, when its tiles do not fill the SMs, splits K among them (cuBLAS's
 * split-K; CUTLASS's GemmSplitKParallel), K chunks of at least
 * SPLITK_MIN_K. Such a kernel streams the wide operand: the memory
 * roofline (cost_gemm_prec_s) prices it, not a full tile's 8/256 of
 * tensor-core work. The useful fraction of that kernel's SM time, or 0
 * when the output is not narrow. */
#define SPLITK_MIN_K 256.0
#define NARROW_TILE_MIN 8.0

static double narrow_eff(const hw_gpu_t *g, double m, double n, double k, double batch)
{
    double tmin = fmin(g->gemm_tile_m, g->gemm_tile_n), tmax = fmax(g->gemm_tile_m, g->gemm_tile_n);
    double d = fmin(m, n), w = fmax(m, n);
    if (tmin <= 0 || d >= tmin / 2)
        return 0;
    double dt = fmax(NARROW_TILE_MIN, pow(2, ceil(log2(d)))), tiles = ceil(w / tmax) * batch;
    double split = fmax(1, fmin(floor(g->sm_count / tiles), floor(k / SPLITK_MIN_K)));
    double total = tiles * split, waves = ceil(total / g->sm_count);
    return d / dt * w / (ceil(w / tmax) * tmax) * total / (waves * g->sm_count);
}

double cost_gemm_fill(const hw_gpu_t *g, double m, double n, double k, double batch)
{
    return fmax(cost_gemm_wave_eff(g->gemm_tile_m, g->gemm_tile_n, g->sm_count, m, n, batch),
                narrow_eff(g, m, n, k, batch));
}

double cost_gemm_s(const hw_t *hw, const job_t *job, double m, double n, double k, double batch)
{
    return cost_gemm_prec_s(hw, job, m, n, k, batch, 0);
}

double cost_gemm_prec_s(const hw_t *hw, const job_t *job, double m, double n, double k, double batch, int fp8)
{
    const hw_gpu_t *g = &hw->gpu;
    double flops = 2 * m * n * k * batch;
    double we = cost_gemm_fill(g, m, n, k, batch);
    double eff = fmin(1, curve_eval(&g->gemm_eff, flops) * hw->cluster.compute_scale);
    double t_math = flops / (gemm_peak_flops(hw, job, fp8) * eff * we);
    double bytes = batch * ((m * k + k * n) * (fp8 ? 1 : job_weight_bytes(job)) + m * n * job_weight_bytes(job));
    double t_mem = bytes / (g->hbm_gbps * 1e9 * curve_eval(&g->mem_eff, bytes));
    return fmax(t_math, t_mem) + g->kernel_gap_us * US;
}

/* Work of the i-th of a head's nb attention tiles in launch order (query
 * pairs scored), K(n) being the keys seen by the first n queries; both
 * passes launch their heaviest tiles first (kernels/attention_mma.cuh).
 * The forward's i-th tile holds query rows [jB, (j+1)B), j = nb - 1 - i:
 * K((j+1)B) - K(jB); the backward's holds key rows [iB, (i+1)B), and a key
 * c is seen by min(s - c, w) queries, so K(s - iB) - K(s - (i+1)B). */
static double attn_tile_work(int bwd, long i, long nb, int block, double s, double w)
{
    long t = bwd ? i : nb - 1 - i;
    double lo = fmin(s, (double)t * block), hi = fmin(s, (double)(t + 1) * block);
    return bwd ? workload_causal_keys(s - lo, w) - workload_causal_keys(s - hi, w)
               : workload_causal_keys(hi, w) - workload_causal_keys(lo, w);
}

static void heap_down(double *h, int n, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && h[l] < h[m])
            m = l;
        if (r < n && h[r] < h[m])
            m = r;
        if (m == i)
            return;
        double t = h[i];
        h[i] = h[m], h[m] = t, i = m;
    }
}

/* Heads before the exactly scheduled tail are spread evenly over the SMs;
 * the tail holds enough of them for ATTN_TAIL_WAVES waves of tiles, so the
 * shortcut moves the end by at most one tile in that many waves. */
#define ATTN_TAIL_WAVES 64

static double attn_wave_eff(int block, int sms, double bh, double s, double w, int bwd)
{
    long heads = lround(bh), nb = (long)ceil(s / block);
    long tail = (long)ceil((double)ATTN_TAIL_WAVES * sms / nb) + 1;
    tail = tail < heads ? tail : heads;
    double per_head = workload_causal_keys(s, w), t0 = (heads - tail) * per_head / sms, end = t0;
    double *slot = malloc(sizeof(double) * sms);
    if (!slot)
        return 1;
    for (int i = 0; i < sms; i++)
        slot[i] = t0;
    for (long h = 0; h < tail; h++)
        for (int i = 0; i < nb; i++) { /* the next tile in launch order goes to the SM that frees first */
            slot[0] += attn_tile_work(bwd, i, nb, block, s, w);
            end = fmax(end, slot[0]);
            heap_down(slot, sms, 0);
        }
    free(slot);
    return heads * per_head / (sms * end);
}

/* A plan search prices the same few attention shapes hundreds of
 * thousands of times: the last results are kept per thread, by shape. */
#define ATTN_MEMO 64

double cost_attn_wave_eff(int block, int sms, double bh, double s, double w, int bwd)
{
    if (s <= 0 || block < 1 || sms < 1 || bh < 1)
        return 1;
    w = w > 0 && w < s ? w : s;
    static _Thread_local struct {
        double key[6], eff;
    } memo[ATTN_MEMO];
    double key[6] = {block, sms, lround(bh), s, w, bwd};
    unsigned long hsh = 1469598103UL;
    for (int i = 0; i < 6; i++)
        hsh = (hsh ^ (unsigned long)key[i]) * 1099511UL;
    int slot = (int)(hsh % ATTN_MEMO);
    if (memo[slot].eff > 0 && !memcmp(memo[slot].key, key, sizeof key))
        return memo[slot].eff;
    double eff = attn_wave_eff(block, sms, bh, s, w, bwd);
    memcpy(memo[slot].key, key, sizeof key), memo[slot].eff = eff;
    return eff;
}

int cost_attn_slots(const hw_gpu_t *g, int bwd)
{
    int per_sm = bwd ? g->attn_slots_k : g->attn_slots_q;
    return g->sm_count * (per_sm > 1 ? per_sm : 1);
}

double cost_attn_grid_heads(double bh, double group, int bwd, int v1)
{
    return bwd && v1 && group > 1 ? bh / group : bh;
}

/* 2 x 4 bytes read per query head's element, 2 x 2 written per KV head's (cost.h). */
double cost_attn_dkv_sum_s(const hw_t *hw, const op_t *op)
{
    if (!op->attn_bwd || op->attn_v1 || op->attn_group <= 1 || hw->gpu.attn_block_k == 1)
        return 0;
    double elems = op->batch * op->attn_seq * op->attn_d; /* sequences x query heads x rows x head size */
    return cost_elem_s(hw, elems * (8 + 4 / op->attn_group));
}

double cost_attn_s(const hw_t *hw, const op_t *op)
{
    const hw_gpu_t *g = &hw->gpu;
    double flops = op_flops(op);
    int bwd = op->attn_bwd;
    double we = cost_attn_wave_eff(bwd ? g->attn_block_k : g->attn_block_q, cost_attn_slots(g, bwd),
                                   cost_attn_grid_heads(op->batch, op->attn_group, bwd, op->attn_v1), op->attn_seq,
                                   op->attn_window, bwd);
    double eff = fmin(1, curve_eval(bwd ? &g->flash_bwd_eff : &g->flash_fwd_eff, flops) * hw->cluster.compute_scale) *
                 (op->attn_v1 ? g->flash1_rel : 1);
    double rate = bwd ? g->flash_bwd_gdraws : g->flash_fwd_gdraws;
    rate = rate > 0 ? rate : g->dropout_gdraws;
    double draws_s = op->draws > 0 && rate > 0 ? op->draws / (rate * 1e9) : 0;
    return (flops / (g->peak_bf16_tflops * 1e12 * eff) + draws_s) / we + g->kernel_gap_us * US +
           cost_attn_dkv_sum_s(hw, op);
}

/* Time of `draws` dropout mask draws of an elementwise kernel at the
 * profile's dropout_gdraws (0 when it is 0: not charged). */
static double cost_draws_s(const hw_t *hw, double draws)
{
    return draws > 0 && hw->gpu.dropout_gdraws > 0 ? draws / (hw->gpu.dropout_gdraws * 1e9) : 0;
}

double cost_elem_s(const hw_t *hw, double bytes)
{
    const hw_gpu_t *g = &hw->gpu;
    return bytes / (g->hbm_gbps * 1e9 * curve_eval(&g->mem_eff, bytes)) + g->kernel_gap_us * US;
}

/* A memory-bound kernel whose math (and dropout draws) takes math_s: the
 * longer of its bytes and that, each with the launch gap. */
static double elem_time_s(const hw_t *hw, double bytes, double math_s)
{
    return fmax(cost_elem_s(hw, bytes), math_s + hw->gpu.kernel_gap_us * US);
}

double cost_elem_math_s(const hw_t *hw, double bytes, double elems, double gelems_per_s)
{
    return elem_time_s(hw, bytes, elems / (gelems_per_s * 1e9));
}

group_layout_t cost_group_layout(const job_t *job, const hw_t *hw, group_t grp)
{
    const hw_cluster_t *c = &hw->cluster;
    int gpn = c->gpus_per_node;
    layout_span_t s = layout_group_span(job, grp);
    long long size = s.size * s.blocks;
    group_layout_t g = {(int)size, 1, 1, -1};
    /* a block's members on one node; with the whole block there, the next blocks' */
    int per = s.stride < gpn ? (int)fmin((double)s.size, (double)gpn / s.stride) : 1;
    if (per == s.size && s.blocks > 1 && s.block_stride < gpn)
        per *= (int)fmin((double)s.blocks, (double)gpn / s.block_stride);
    g.per_node = per, g.nodes = (int)((size + per - 1) / per);
    if (g.nodes > 1) {
        /* The group spans a block of consecutive nodes. */
        double span_nodes = ceil((double)((s.size - 1) * s.stride + (s.blocks - 1) * s.block_stride) / gpn) + 1;
        g.tier = span_nodes <= c->nodes_per_tor                      ? 0
                 : span_nodes <= (double)c->nodes_per_tor * c->tors_per_pod ? 1
                                                                       : 2;
    }
    return g;
}

/* A group's two kinds of links, bytes/s, for messages of `bytes`: one
 * rank's NVLink (*nvl), and across nodes the rail NICs that the group's
 * ranks on a node share (one each, at most nics_per_node), derated by the
 * switch tier and, above the ToR, by oversubscription (*net; 0 when the
 * group is on one node). */
static void link_Bps(const hw_t *hw, const group_layout_t *g, double bytes, double *nvl, double *net)
{
    const hw_cluster_t *c = &hw->cluster;
    *nvl = hw->gpu.nvlink_gbps * 1e9 * fmin(1, curve_eval(&c->nvlink_eff, bytes) * c->nvlink_scale);
    *net = 0;
    if (g->nodes == 1)
        return;
    double nics = fmin(g->per_node, c->nics_per_node);
    *net = nics * c->nic_gbit / 8 * 1e9 * curve_eval(&c->net_eff, bytes) * c->tier_eff[g->tier];
    if (g->tier > 0)
        *net /= c->oversubscription;
    if (g->tier > 1) /* above the pod */
        *net /= c->pod_oversubscription;
}

/* Bus bandwidth of one rank in a ring over the group: NVLink inside a
 * node; across nodes the slower of NVLink and the node's NICs. */
static double bus_Bps(const hw_t *hw, const group_layout_t *g, double bytes)
{
    double nvl, net;
    link_Bps(hw, g, bytes, &nvl, &net);
    if (g->nodes == 1)
        return nvl;
    return g->per_node > 1 ? fmin(nvl, net) : net;
}

/* An all-to-all's transfer time: each rank sends 1/n of its bytes to each
 * other member. Inside a node every rank's (n-1)/n goes over its own
 * NVLink. Across nodes a ring's busbw does not apply: every rank's
 * (n - q)/n leaves the node (q: the group's ranks on a node), q ranks'
 * worth through the NICs they share, while the (q - 1)/n to its node's
 * members goes over NVLink beside it. */
static double alltoall_xfer_s(const hw_t *hw, const group_layout_t *g, double bytes)
{
    double nvl, net, n = g->size, q = g->per_node;
    link_Bps(hw, g, bytes, &nvl, &net);
    if (g->nodes == 1)
        return (n - 1) / n * bytes / nvl;
    return fmax((q - 1) / n * bytes / nvl, q * (n - q) / n * bytes / net);
}

/* Latency of one ring step: NVLink hops inside nodes, network hops
 * between them, plus the switch tiers crossed up and down. */
static double step_s(const hw_t *hw, const group_layout_t *g)
{
    const hw_cluster_t *c = &hw->cluster;
    if (g->nodes == 1)
        return c->alpha_nvlink_us * US;
    double net_share = 1.0 / g->per_node; /* fraction of ring hops between nodes */
    return (c->alpha_nvlink_us * (1 - net_share) + c->alpha_net_us * net_share +
            2 * (g->tier + 1) * c->alpha_hop_us) * US;
}

double cost_coll_s(const hw_t *hw, coll_t coll, double bytes, const group_layout_t *g)
{
    int n = g->size;
    if (n <= 1 || bytes <= 0)
        return 0;
    double launch = hw->cluster.coll_launch_us * US, a = step_s(hw, g), bw = bus_Bps(hw, g, bytes);
    double frac = (double)(n - 1) / n;
    switch (coll) {
    case COLL_ALLREDUCE: {
        double ring = launch + 2 * (n - 1) * a + 2 * frac * bytes / bw;
        /* NCCL's double binary tree: log-depth latency, with ~10% less
         * bandwidth than the ring across nodes (NCCL tuning's tree factor). */
        double tree = g->nodes > 1 ? launch + 2 * ceil(log2(n)) * a + 2 * frac * bytes / (0.9 * bw) : ring;
        return fmin(ring, tree);
    }
    case COLL_ALLGATHER:
    case COLL_REDUCESCATTER:
        return launch + (n - 1) * a + frac * bytes / bw;
    case COLL_ALLTOALL:
        return launch + (n - 1) * a + alltoall_xfer_s(hw, g, bytes);
    case COLL_BROADCAST: /* pipelined ring */
        return launch + (n - 1) * a + bytes / bw;
    case COLL_SENDRECV: /* to the next member, from the one before, at once */
        return cost_p2p_s(hw, bytes, g);
    }
    return 0;
}

double cost_p2p_s(const hw_t *hw, double bytes, const group_layout_t *g)
{
    group_layout_t pair = *g;
    pair.size = 2;
    pair.per_node = g->nodes > 1 ? 1 : 2;
    pair.nodes = g->nodes > 1 ? 2 : 1;
    return hw->cluster.coll_launch_us * US + step_s(hw, &pair) + bytes / bus_Bps(hw, &pair, bytes);
}

double cost_optimizer_s(const hw_t *hw, const job_t *job, double params)
{
    /* Bytes per parameter, fused multi-tensor kernels: fp32 master, m and v
     * read and written (24), fp32 gradient read (4), bf16 weight written
     * (2), gradient-norm pass reading the gradient (4). LAMB adds the
     * per-layer norms of weight and update (8). */
    double per = 34 + (job->optimizer == OPTIM_LAMB ? 8 : 0);
    double t = cost_elem_math_s(hw, params * per, params, hw->gpu.optim_gparams);
    /* FP8: the new bf16 weights cast once per iteration (Transformer
     * Engine's first-micro-batch cache), bf16 read, fp8 and its transpose
     * written: every local weight, the shard's DP share gathered first. */
    if (job->fp8_format)
        t += cost_elem_s(hw, params * (job->zero_stage >= 1 ? job->dp_cp : 1) * (job_weight_bytes(job) + 2));
    return t;
}

double cost_gemm_acc_s(const hw_t *hw, double m, double n, double batch)
{
    double bytes = 8 * m * n * batch;
    if (hw->gpu.gemm_acc_exposed <= 0)
        return 0;
    return hw->gpu.gemm_acc_exposed * bytes / (hw->gpu.hbm_gbps * 1e9 * curve_eval(&hw->gpu.mem_eff, bytes));
}

double cost_gemm_pack_s(const hw_t *hw, int pass, double m, double n, double k, double batch)
{
    double elems = pass == 1 ? k * n : pass == 2 ? k * (m + n) : 0;
    return elems * batch * hw->gpu.gemm_pack_ns * 1e-9;
}

double cost_grad_norm_sync_s(const hw_t *hw, const job_t *job)
{
    group_layout_t g = cost_group_layout(job, hw, GROUP_WORLD);
    return cost_coll_s(hw, COLL_ALLREDUCE, 8, &g);
}

static double op_once_s(const hw_t *hw, const job_t *job, const op_t *op);

/* The math rate an ELEM op of this kind is bound by, billions of elements
 * per second; 0: bytes only (a stream, or a softmax rate not measured). */
static double elem_gelems(const hw_gpu_t *g, elem_kind_t kind)
{
    switch (kind) {
    case ELEM_NORM:
        return g->norm_gelems;
    case ELEM_GELU:
        return g->gelu_gelems;
    case ELEM_SOFTMAX_FWD:
        return g->softmax_fwd_gelems;
    case ELEM_SOFTMAX_BWD:
        return g->softmax_bwd_gelems;
    default:
        return 0;
    }
}

/* An unfused attention GEMM's speed against gemm_eff's (1 for the rest). */
static double unfused_rel(const hw_gpu_t *g, const op_t *op)
{
    double rel = op->unfused_attn == 1 ? g->unfused_fwd_rel : op->unfused_attn == 2 ? g->unfused_bwd_rel : 0;
    return rel > 0 ? rel : 1;
}

/* The kernel launches whose gap an op's price holds (op_once_s): a GEMM
 * and its FP8 cast, an attention kernel and its GQA dK/dV sum, an
 * elementwise kernel; none for collectives (their launch is their own). */
static int op_kernels(const hw_t *hw, const op_t *op)
{
    switch (op->kind) {
    case OP_GEMM: return 1 + (op->cast_elems > 0);
    case OP_ATTN: return 1 + (cost_attn_dkv_sum_s(hw, op) > 0);
    case OP_ELEM: return 1;
    default: return 0;
    }
}

/* What the op's kernels save as graph nodes: each launch's kernel_gap_us
 * less graph_gap_us (0 when the profile has none: not measured), times
 * its kernels and runs; 0 without --enable-cuda-graph. */
static double graph_saving_s(const hw_t *hw, const job_t *job, const op_t *op)
{
    const hw_gpu_t *g = &hw->gpu;
    double graph_us = g->graph_gap_us > 0 ? g->graph_gap_us : g->kernel_gap_us;
    return job->cuda_graph ? op_runs(op) * op_kernels(hw, op) * fmax(0, g->kernel_gap_us - graph_us) * US : 0;
}

double cost_op_s(const hw_t *hw, const job_t *job, const op_t *op)
{
    return op_runs(op) * op_once_s(hw, job, op) - graph_saving_s(hw, job, op);
}

static double op_once_s(const hw_t *hw, const job_t *job, const op_t *op)
{
    switch (op->kind) {
    case OP_GEMM:
        return cost_gemm_prec_s(hw, job, op->m, op->n, op->k, op->batch, op->fp8) / unfused_rel(&hw->gpu, op) +
               (op->acc_fp32 ? cost_gemm_acc_s(hw, op->m, op->n, op->batch) : 0) +
               cost_gemm_pack_s(hw, op->gemm_pass, op->m, op->n, op->k, op->batch) +
               (op->cast_elems > 0 ? cost_elem_s(hw, op->cast_elems * (job_weight_bytes(job) + 1)) : 0);
    case OP_ATTN:
        return cost_attn_s(hw, op);
    case OP_ELEM: { /* the draws add to the kernel's time */
        double rate = elem_gelems(&hw->gpu, op->elem_kind);
        return elem_time_s(hw, op->bytes, rate > 0 ? op->elems / (rate * 1e9) : 0) + cost_draws_s(hw, op->draws);
    }
    case OP_COLL: {
        group_layout_t g = cost_group_layout(job, hw, op->group);
        return cost_coll_s(hw, op->coll, op->bytes, &g);
    }
    case OP_P2P: {
        group_layout_t g = cost_group_layout(job, hw, op->group);
        return cost_p2p_s(hw, op->bytes, &g);
    }
    case OP_OPTIM:
        return cost_optimizer_s(hw, job, op->bytes);
    }
    return 0;
}
