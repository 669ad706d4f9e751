/* hw: profile tables, file loading and checks (data lives in hw_builtin.c). */
#include "model/hw.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define G(f) offsetof(hw_gpu_t, f)
#define C(f) offsetof(hw_cluster_t, f)

/* No defaults: a profile file must give every field (or a "base").
 * Bounds are physical: from a CPU slowed by a sanitizer (10 MFLOP/s,
 * 1 million elements or draws a second) to well beyond any GPU; a rate
 * nearer zero would price one op in centuries (reliability finding F13). */
static const opt_def gpu_defs[] = {
    {"name", OPT_STR, G(name), 0, sizeof(((hw_gpu_t *)0)->name), 0, 0, "gpu", "profile name"},
    {"peak-bf16-tflops", OPT_REAL, G(peak_bf16_tflops), 1e-5, 1e6, 0, 0, "gpu", "dense bf16 peak, TFLOP/s"},
    {"peak-tf32-tflops", OPT_REAL, G(peak_tf32_tflops), 1e-5, 1e6, 0, 0, "gpu", "dense tf32 peak, TFLOP/s"},
    {"peak-fp8-tflops", OPT_REAL, G(peak_fp8_tflops), 1e-5, 1e6, "0", OPT_ZERO_OK, "gpu",
     "dense fp8 peak, TFLOP/s (0: no FP8 tensor cores; missing in files written before 2026-11-29)"},
    {"pcie-gbps", OPT_REAL, G(pcie_gbps), 1e-3, 1e6, "0", OPT_ZERO_OK, "gpu",
     "host link: a pinned copy's sustained rate per direction, GB/s (0: unknown, no activation offloading; missing "
     "in files written before 2026-11-29)"},
    {"hbm-gib", OPT_REAL, G(hbm_gib), 1e-3, 1e6, 0, 0, "gpu", "memory capacity, GiB"},
    {"hbm-gbps", OPT_REAL, G(hbm_gbps), 1e-3, 1e6, 0, 0, "gpu", "memory bandwidth, GB/s"},
    {"nvlink-gbps", OPT_REAL, G(nvlink_gbps), 1e-3, 1e6, 0, 0, "gpu", "NVLink per direction, GB/s"},
    {"sm-count", OPT_INT, G(sm_count), 1, 100000, 0, 0, "gpu", "streaming multiprocessors"},
    {"gemm-tile-m", OPT_INT, G(gemm_tile_m), 1, 4096, 0, 0, "gpu", "GEMM output tile rows"},
    {"gemm-tile-n", OPT_INT, G(gemm_tile_n), 1, 4096, 0, 0, "gpu", "GEMM output tile columns"},
    {"attn-block-q", OPT_INT, G(attn_block_q), 0, 4096, 0, 0, "gpu",
     "attention forward: query rows per thread block (0: no wave model, the curve includes it)"},
    {"attn-block-k", OPT_INT, G(attn_block_k), 0, 4096, 0, 0, "gpu",
     "attention backward: key rows per thread block (0: no wave model, the curve includes it)"},
    {"attn-slots-q", OPT_INT, G(attn_slots_q), 0, 64, "0", 0, "gpu",
     "attention forward: thread blocks resident per SM (0 or 1: one; missing in files written before 2026-11-26)"},
    {"attn-slots-k", OPT_INT, G(attn_slots_k), 0, 64, "0", 0, "gpu",
     "attention backward: thread blocks resident per SM (0 or 1: one; missing in files written before 2026-11-26)"},
    {"kernel-gap-us", OPT_REAL, G(kernel_gap_us), 0, 1e5, 0, 0, "gpu", "fixed cost per kernel, us"},
    {"graph-gap-us", OPT_REAL, G(graph_gap_us), 0, 1e5, "0", 0, "gpu",
     "fixed cost per kernel of a CUDA graph (--enable-cuda-graph's passes), us (0: not measured, kernel_gap_us; "
     "missing in files written before 2026-11-29's eighth session)"},
    {"comm-slowdown", OPT_REAL, G(comm_slowdown), 0, 1, 0, 0, "gpu", "compute slowdown beside a collective"},
    {"flash1-rel", OPT_REAL, G(flash1_rel), 1e-3, 1, 0, 0, "gpu",
     "FlashAttention-1 speed as a fraction of the flash curves (--attention flash1)"},
    {"gemm-eff", OPT_CURVE, G(gemm_eff), 1e-4, 1, 0, 0, "gpu", "GEMM fraction of peak vs FLOPs"},
    {"flash-fwd-eff", OPT_CURVE, G(flash_fwd_eff), 1e-4, 1, 0, 0, "gpu", "attention fwd fraction of peak vs FLOPs"},
    {"flash-bwd-eff", OPT_CURVE, G(flash_bwd_eff), 1e-4, 1, 0, 0, "gpu", "attention bwd fraction of peak vs FLOPs"},
    {"mem-eff", OPT_CURVE, G(mem_eff), 1e-4, 1, 0, 0, "gpu", "memory-bound fraction of HBM bandwidth vs bytes"},
    {"norm-gelems", OPT_REAL, G(norm_gelems), 1e-3, 1e7, 0, 0, "gpu",
     "residual + LayerNorm math rate, billions of elements per second"},
    {"gelu-gelems", OPT_REAL, G(gelu_gelems), 1e-3, 1e7, 0, 0, "gpu",
     "bias + GeLU math rate, billions of elements per second"},
    {"optim-gparams", OPT_REAL, G(optim_gparams), 1e-3, 1e7, 0, 0, "gpu",
     "optimizer step math rate, billions of parameters per second"},
    {"softmax-fwd-gelems", OPT_REAL, G(softmax_fwd_gelems), 1e-3, 1e7, "0", OPT_ZERO_OK, "gpu",
     "unfused attention's softmax forward beyond its GEMMs, billions of scores per second (0: not charged; "
     "missing in files written before 2026-11-29)"},
    {"softmax-bwd-gelems", OPT_REAL, G(softmax_bwd_gelems), 1e-3, 1e7, "0", OPT_ZERO_OK, "gpu",
     "unfused attention's softmax backward beyond its GEMMs, billions of scores per second (0: not charged; "
     "missing in files written before 2026-11-29)"},
    {"unfused-fwd-rel", OPT_REAL, G(unfused_fwd_rel), 1e-3, 10, "0", OPT_ZERO_OK, "gpu",
     "unfused attention's forward GEMMs' speed as a fraction of gemm_eff's (0: 1; missing in files written before "
     "2026-11-29)"},
    {"unfused-bwd-rel", OPT_REAL, G(unfused_bwd_rel), 1e-3, 10, "0", OPT_ZERO_OK, "gpu",
     "unfused attention's backward GEMMs' speed as a fraction of gemm_eff's (0: 1; missing in files written before "
     "2026-11-29)"},
    {"dropout-gdraws", OPT_REAL, G(dropout_gdraws), 1e-3, 1e7, 0, OPT_ZERO_OK, "gpu",
     "dropout mask draws of an elementwise kernel, billions per second, added to its time (0: not charged)"},
    {"flash-fwd-gdraws", OPT_REAL, G(flash_fwd_gdraws), 1e-3, 1e7, "0", OPT_ZERO_OK, "gpu",
     "dropout mask draws inside the flash forward, billions per second of a full grid (0: dropout_gdraws; "
     "missing in files written before 2026-11-26)"},
    {"flash-bwd-gdraws", OPT_REAL, G(flash_bwd_gdraws), 1e-3, 1e7, "0", OPT_ZERO_OK, "gpu",
     "dropout mask draws inside the flash backward, billions per second of a full grid (0: dropout_gdraws; "
     "missing in files written before 2026-11-26)"},
    {"gemm-acc-exposed", OPT_REAL, G(gemm_acc_exposed), 0, 1, "0", 0, "gpu",
     "share of a weight gradient's fp32 accumulation (8 bytes per output element) added to its GEMM (0: none; "
     "missing in files written before 2026-11-26, which priced none)"},
    {"gemm-pack-ns", OPT_REAL, G(gemm_pack_ns), 0, 1e6, "0", 0, "gpu",
     "ns per element a backward GEMM transposes first: the weight for the input gradient, both inputs for the "
     "weight gradient (the CPU's reference GEMM; 0: none, as cuBLAS; missing in files written before 2026-11-29)"},
};

static const opt_def cluster_defs[] = {
    {"name", OPT_STR, C(name), 0, sizeof(((hw_cluster_t *)0)->name), 0, 0, "cluster", "profile name"},
    {"fabric", OPT_ENUM, C(fabric), 0, 0, 0, "clos3|fattree", "cluster", "switch fabric"},
    {"gpus-per-node", OPT_INT, C(gpus_per_node), 1, 1024, 0, 0, "cluster", "GPUs per node"},
    {"nics-per-node", OPT_INT, C(nics_per_node), 1, 1024, 0, 0, "cluster", "NICs per node (rails)"},
    {"nic-gbit", OPT_REAL, C(nic_gbit), 1e-3, 1e6, 0, 0, "cluster", "NIC line rate, Gb/s"},
    {"nodes-per-tor", OPT_INT, C(nodes_per_tor), 1, 100000, 0, 0, "cluster", "nodes under one ToR set"},
    {"tors-per-pod", OPT_INT, C(tors_per_pod), 1, 100000, 0, 0, "cluster", "ToR sets per pod"},
    {"tor-uplink-ratio", OPT_REAL, C(tor_uplink_ratio), 1e-3, 1e3, 0, 0, "cluster", "uplink / downlink port speed"},
    {"oversubscription", OPT_REAL, C(oversubscription), 1, 1e3, 0, 0, "cluster", "ToR down / up bandwidth"},
    {"pod-oversubscription", OPT_REAL, C(pod_oversubscription), 1, 1e3, "1", 0, "cluster",
     "a pod's bandwidth over what leaves it (1: full bisection across pods; missing in files written before "
     "2026-11-29)"},
    {"alpha-nvlink-us", OPT_REAL, C(alpha_nvlink_us), 0, 1e6, 0, 0, "cluster", "ring step latency, NVLink, us"},
    {"alpha-net-us", OPT_REAL, C(alpha_net_us), 0, 1e6, 0, 0, "cluster", "ring step latency, network, us"},
    {"alpha-hop-us", OPT_REAL, C(alpha_hop_us), 0, 1e6, 0, 0, "cluster", "latency per switch tier, us"},
    {"coll-launch-us", OPT_REAL, C(coll_launch_us), 0, 1e6, 0, 0, "cluster", "launch cost of a collective, us"},
    {"tier-eff-tor", OPT_REAL, C(tier_eff[0]), 1e-3, 1, 0, 0, "cluster", "bandwidth kept under one ToR"},
    {"tier-eff-pod", OPT_REAL, C(tier_eff[1]), 1e-3, 1, 0, 0, "cluster", "bandwidth kept across aggregation"},
    {"tier-eff-spine", OPT_REAL, C(tier_eff[2]), 1e-3, 1, 0, 0, "cluster", "bandwidth kept across spine"},
    {"host-stall-s", OPT_REAL, C(host_stall_s), 0, 1e4, 0, 0, "cluster", "host stall per iteration, synchronous loader, s"},
    {"compute-scale", OPT_REAL, C(compute_scale), 1e-3, 2, 0, 0, "cluster",
     "fraction of the GPU's GEMM and attention efficiency this cluster sustains (1 = data sheet)"},
    {"host-sync-gap-us", OPT_REAL, C(host_sync_gap_us), 0, 1e6, 0, 0, "cluster",
     "GPU idle after each blocking pipeline exchange (host synchronises, then relaunches), us"},
    {"iteration-overhead-s", OPT_REAL, C(iteration_overhead_s), 0, 1e4, 0, 0, "cluster",
     "per-iteration host time not broken down into ops (fitted), s"},
    {"nvlink-scale", OPT_REAL, C(nvlink_scale), 1e-3, 2, 0, 0, "cluster",
     "fraction of the nvlink_eff curve collectives inside a node sustain in training (1 = the curve; the "
     "product is capped at 1)"},
    {"runtime-reserved-gib", OPT_REAL, C(runtime_reserved_gib), 0, 1e4, 0, 0, "cluster", "runtime memory per GPU, GiB"},
    {"host-share", OPT_REAL, C(host_share), 1, 1e4, "1", 0, "cluster",
     "ranks per core where ranks time-share a host's cores (a CPU run with more ranks than cores): every rank's "
     "compute that many times slower (1: a core or a GPU each; missing in files written before 2026-11-29)"},
    {"nvlink-eff", OPT_CURVE, C(nvlink_eff), 1e-4, 1, 0, 0, "cluster", "NVLink fraction reached vs bytes"},
    {"net-eff", OPT_CURVE, C(net_eff), 1e-4, 1, 0, 0, "cluster", "NIC fraction reached vs bytes"},
};

const opt_table hw_gpu_opts = {gpu_defs, sizeof gpu_defs / sizeof gpu_defs[0], "gpu profile"};
const opt_table hw_cluster_opts = {cluster_defs, sizeof cluster_defs / sizeof cluster_defs[0], "cluster profile"};

static const char *const base_key[] = {"base", NULL};

/* Loads one section: from its "base" built-in if named, else every field
 * is required. */
static int load_section(const opt_table *t, const cJSON *sec, void *obj, const char *path,
                        int (*builtin)(const char *, void *), char *err)
{
    char where[300], seen[96] = {0};
    snprintf(where, sizeof where, "%s: %s", path, t == &hw_gpu_opts ? "gpu" : t == &hw_cluster_opts ? "cluster" : "faults");
    const cJSON *base = cJSON_GetObjectItemCaseSensitive(sec, "base");
    if (base && (!cJSON_IsString(base) || builtin(base->valuestring, obj))) {
        snprintf(err, OPT_ERR_LEN, "%s: base: '%s' is not a built-in profile (megasim hardware lists them)",
                 where, cJSON_IsString(base) ? base->valuestring : "?");
        return -1;
    }
    if (opts_apply_json(t, obj, sec, where, base_key, seen, err))
        return -1;
    return base ? 0 : hw_fill_missing(t, obj, seen, where, "; give it or name a \"base\" profile", err);
}

int hw_fill_missing(const opt_table *t, void *obj, const char *seen, const char *where, const char *hint, char *err)
{
    for (int i = 0; i < t->n; i++) {
        if (seen[i])
            continue;
        if (t->defs[i].def) {
            if (opts_set_text(&t->defs[i], obj, t->defs[i].def, where, err))
                return -1;
            continue;
        }
        char key[64];
        snprintf(key, sizeof key, "%s", t->defs[i].name);
        for (char *p = key; *p; p++)
            *p = *p == '-' ? '_' : *p;
        snprintf(err, OPT_ERR_LEN, "%s: field '%s' is missing (%s)%s", where, key, t->defs[i].help, hint);
        return -1;
    }
    return 0;
}

static int gpu_builtin_v(const char *n, void *o) { return hw_builtin_gpu(n, o); }
static int cluster_builtin_v(const char *n, void *o) { return hw_builtin_cluster(n, o); }
static int faults_builtin_v(const char *n, void *o) { return fault_builtin(n, o); }

/* The "faults" section: from its "base" cluster's model, or every field. */
static int load_faults(const cJSON *sec, hw_faults_t *f, const char *path, char *err)
{
    if (!cJSON_IsObject(sec)) {
        snprintf(err, OPT_ERR_LEN, "%s: faults: a JSON object of fault-model fields (megasim hardware prints one), "
                 "not %s", path, cJSON_IsArray(sec) ? "an array" : "a single value");
        return -1;
    }
    memset(f, 0, sizeof *f);
    if (load_section(&hw_faults_opts, sec, f, path, faults_builtin_v, err))
        return -1;
    const cJSON *base = cJSON_GetObjectItemCaseSensitive(sec, "base");
    snprintf(f->base, sizeof f->base, "%s", cJSON_IsString(base) ? base->valuestring : "");
    f->present = 1;
    return 0;
}

int hw_use_builtin_cluster(hw_t *hw, const char *name)
{
    if (hw_builtin_cluster(name, &hw->cluster))
        return -1;
    fault_builtin(name, &hw->faults);
    return 0;
}

int hw_unknown_name(const char *flag, const char *name, int gpu, const char *hint, char *err)
{
    const char *const *names = gpu ? hw_gpu_names : hw_cluster_names;
    char list[256] = "";
    for (const char *const *p = names; *p; p++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", p == names ? "" : ", ", *p);
    snprintf(err, OPT_ERR_LEN, "%s = '%s' is not a built-in profile; choose one of %s%s", flag, name, list, hint);
    return -1;
}

int hw_resolve(const char *gpu, const char *cluster, const char *file, hw_t *hw, char *err)
{
    memset(hw, 0, sizeof *hw);
    if (hw_builtin_gpu(gpu, &hw->gpu))
        return hw_unknown_name("--gpu", gpu, 1, ", or give --hardware FILE", err);
    if (hw_use_builtin_cluster(hw, cluster))
        return hw_unknown_name("--cluster", cluster, 0, ", or give --hardware FILE", err);
    if (file && *file && hw_apply_file(file, hw, err))
        return -1;
    return hw_check(hw, err);
}

int hw_apply_file(const char *file, hw_t *hw, char *err)
{
    cJSON *root;
    if (opts_read_json_file(file, &root, err))
        return -1;
    if (!cJSON_IsObject(root)) {
        snprintf(err, OPT_ERR_LEN, "%s: a hardware profile is a JSON object ({\"gpu\": {...}, \"cluster\": {...}}), "
                 "not %s", file, cJSON_IsArray(root) ? "an array" : "a single value");
        cJSON_Delete(root);
        return -1;
    }
    int rc = 0;
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(root, "gpu");
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(root, "cluster");
    const cJSON *fs = cJSON_GetObjectItemCaseSensitive(root, "faults");
    const cJSON *m;
    cJSON_ArrayForEach(m, root)
    {
        if (strcmp(m->string, "gpu") && strcmp(m->string, "cluster") && strcmp(m->string, "faults") &&
            strcmp(m->string, "provenance")) {
            snprintf(err, OPT_ERR_LEN, "%s: unknown section '%s'; allowed gpu, cluster, faults, provenance",
                     file, m->string);
            rc = -1;
        }
    }
    if (!rc && !g && !c && !fs) {
        snprintf(err, OPT_ERR_LEN, "%s: no \"gpu\", \"cluster\" or \"faults\" section", file);
        rc = -1;
    }
    if (!rc && g)
        rc = load_section(&hw_gpu_opts, g, &hw->gpu, file, gpu_builtin_v, err);
    if (!rc && c) {
        rc = load_section(&hw_cluster_opts, c, &hw->cluster, file, cluster_builtin_v, err);
        /* A new cluster brings its base's fault model, or none. */
        const cJSON *base = cJSON_GetObjectItemCaseSensitive(c, "base");
        if (!rc && (!cJSON_IsString(base) || fault_builtin(base->valuestring, &hw->faults)))
            memset(&hw->faults, 0, sizeof hw->faults);
    }
    if (!rc && fs)
        rc = load_faults(fs, &hw->faults, file, err);
    cJSON_Delete(root);
    return rc;
}

int hw_check(const hw_t *hw, char *err)
{
    const hw_cluster_t *c = &hw->cluster;
    if (c->nics_per_node > c->gpus_per_node || c->gpus_per_node % c->nics_per_node) {
        snprintf(err, OPT_ERR_LEN, "cluster %s: nics_per_node = %d with gpus_per_node = %d; allowed: a divisor of "
                 "gpus_per_node (rails: each NIC serves the same number of GPUs, one NIC per GPU at most)", c->name,
                 c->nics_per_node, c->gpus_per_node);
        return -1;
    }
    const struct { const curve_t *c; const char *name; } curves[] = {
        {&hw->gpu.gemm_eff, "gpu gemm_eff"}, {&hw->gpu.flash_fwd_eff, "gpu flash_fwd_eff"},
        {&hw->gpu.flash_bwd_eff, "gpu flash_bwd_eff"}, {&hw->gpu.mem_eff, "gpu mem_eff"},
        {&c->nvlink_eff, "cluster nvlink_eff"}, {&c->net_eff, "cluster net_eff"},
    };
    for (size_t i = 0; i < sizeof curves / sizeof curves[0]; i++)
        if (curve_check(curves[i].c, 1e-4, 1, curves[i].name, err, OPT_ERR_LEN))
            return -1;
    return hw->faults.present ? fault_check(&hw->faults, err) : 0;
}

int hw_check_loadable(const hw_t *hw, const char *what, char *err)
{
    cJSON *o = hw_to_json(hw);
    hw_t back;
    memset(&back, 0, sizeof back);
    int rc = load_section(&hw_gpu_opts, cJSON_GetObjectItemCaseSensitive(o, "gpu"), &back.gpu, what, gpu_builtin_v,
                          err) ||
             load_section(&hw_cluster_opts, cJSON_GetObjectItemCaseSensitive(o, "cluster"), &back.cluster, what,
                          cluster_builtin_v, err) ||
             (hw->faults.present && load_faults(cJSON_GetObjectItemCaseSensitive(o, "faults"), &back.faults, what, err)) ||
             hw_check(&back, err);
    cJSON_Delete(o);
    return rc ? -1 : 0;
}

cJSON *hw_to_json(const hw_t *hw)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "gpu", opts_to_json(&hw_gpu_opts, &hw->gpu));
    cJSON_AddItemToObject(o, "cluster", opts_to_json(&hw_cluster_opts, &hw->cluster));
    if (hw->faults.present)
        cJSON_AddItemToObject(o, "faults", opts_to_json(&hw_faults_opts, &hw->faults));
    return o;
}
