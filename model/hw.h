/* hw: hardware profiles. A GPU profile (peaks, memory, NVLink, efficiency
 * curves) and a cluster profile (nodes, NICs, rails, switch fabric,
 * collective latencies and bandwidth curves, host overheads). Built-in
 * profiles carry the public source of every number (hw_builtin.c); a JSON
 * file in the same format (megasim hardware NAME prints one) replaces
 * them, which is what calibration writes. */
#ifndef MODEL_HW_H
#define MODEL_HW_H

#include "model/curve.h"
#include "model/fault.h"
#include "model/opts.h"

typedef enum { FABRIC_CLOS3, FABRIC_FATTREE } fabric_t;

typedef struct {
    char name[40];
    double peak_bf16_tflops;  /* dense tensor-core peak, bf16/fp16 */
    double peak_tf32_tflops;  /* dense tensor-core peak, tf32 (fp32 storage) */
    double peak_fp8_tflops;   /* dense tensor-core peak, fp8 (E4M3/E5M2); 0: no FP8 tensor cores */
    double pcie_gbps;         /* host link, sustained pinned copy rate per direction, GB/s (0: unknown) */
    double hbm_gib;           /* memory capacity */
    double hbm_gbps;          /* memory bandwidth, GB/s (1e9 B/s) */
    double nvlink_gbps;       /* NVLink bandwidth per GPU per direction, GB/s */
    int sm_count;
    int gemm_tile_m, gemm_tile_n; /* output tile of one thread block (wave model) */
    int attn_block_q, attn_block_k; /* query rows of one forward attention
                                       thread block, key rows of one backward
                                       one (wave model; 0: none, the flash
                                       curves include the grid's fill) */
    int attn_slots_q, attn_slots_k; /* such blocks resident on one SM at once
                                       (occupancy; 0 or 1: one), the wave
                                       model's slots: sm_count x this */
    double kernel_gap_us;     /* fixed cost per kernel launch on the stream */
    double graph_gap_us;      /* the same for a kernel of a CUDA graph (--enable-cuda-graph's passes);
                                 0: not measured, kernel_gap_us */
    double comm_slowdown;     /* fractional compute slowdown while a collective
                                 kernel shares the GPU */
    double flash1_rel;        /* FlashAttention-1's speed as a fraction of the
                                 flash curves (FlashAttention-2 style kernels) */
    curve_t gemm_eff;         /* fraction of peak vs FLOPs of one GEMM call */
    curve_t flash_fwd_eff;    /* fraction of peak vs FLOPs of one attention call */
    curve_t flash_bwd_eff;
    curve_t mem_eff;          /* fraction of hbm_gbps vs bytes moved by a kernel */
    /* Math throughput of the memory-bound kernels, billions of elements
     * (parameters) per second: residual + LayerNorm, bias + GeLU, the
     * optimizer step. A kernel takes the longer of its bytes at mem_eff and
     * its elements at this rate: far above bandwidth on a GPU, the bound on
     * a CPU's scalar reference code (tanh, sqrt, division). */
    double norm_gelems, gelu_gelems, optim_gparams;
    /* The unfused attention's work over its scores beyond its GEMMs (scale,
     * mask, max, exp, sum; backward: the softmax's Jacobian), billions of
     * scores per second, forward and backward: calibration fits them from
     * its unfused samples (calib/profile_attn.c fit_softmax); this VM's CPU
     * reference, 0.44 G scores/s forward (2026-11-29): 75 us for the tiny
     * GPT's 32K scores, which a copy's bandwidth prices at 6. 0: not
     * charged (a GPU's fused scale-mask-softmax is bound by its bytes; the
     * built-in profiles). */
    double softmax_fwd_gelems, softmax_bwd_gelems;
    /* The unfused attention's GEMMs' speed as a fraction of gemm_eff's,
     * forward and backward, fitted with the softmax rates: the CPU's
     * reference runs them a row at a time at about half kern_gemm_ref's
     * speed. 0: 1 (the built-in profiles: cuBLAS's batched GEMMs). */
    double unfused_fwd_rel, unfused_bwd_rel;
    /* Dropout mask draws (Philox4x32-10), billions per second, charged on
     * the ops that draw: an elementwise kernel's (the hidden dropouts'
     * forward) at dropout_gdraws, added to the longer of its bytes and its
     * math (a GPU's fused LayerNorm with dropout takes about the sum of the
     * two: kern_bench, 2026-11-26); the flash kernels' (the attention
     * probabilities') at flash_fwd_gdraws and flash_bwd_gdraws, the rates
     * of a full grid, added to the kernel's work before its wave loss (a
     * tile's draws wait for its SM as its FLOPs do), 0 meaning
     * dropout_gdraws. 0: not charged; the built-in profiles hold 0 until a
     * GPU measures it (ASSUMPTIONS.md). */
    double dropout_gdraws, flash_fwd_gdraws, flash_bwd_gdraws;
    /* The share of a weight-gradient GEMM's fp32 accumulation (8 bytes per
     * output element read and written at hbm_gbps x mem_eff: cost_gemm_acc_s)
     * that adds to its time, in [0, 1]: calibration fits it (0.76 on an
     * H100, 2026-11-26). The built-in profiles hold 0 until a GPU of theirs
     * measures it: their gemm_eff curves come from public GEMM sweeps, which
     * do not accumulate (ASSUMPTIONS.md). */
    double gemm_acc_exposed;
    /* Nanoseconds per element a linear layer's backward GEMM transposes
     * before it multiplies: the CPU's reference GEMM packs its operands to
     * read both along K (kernels/matmul_ref.c), the weight for the input
     * gradient, both inputs for the weight gradient (op_t.gemm_pass).
     * Calibration fits it on a CPU; 0 on a GPU (cuBLAS reads transposed
     * operands in place) and in files written before 2026-11-29. */
    double gemm_pack_ns;
} hw_gpu_t;

typedef struct {
    char name[40];
    int fabric;               /* fabric_t: clos3 | fattree */
    int gpus_per_node;
    int nics_per_node;        /* one per rail */
    double nic_gbit;          /* NIC line rate, Gb/s */
    int nodes_per_tor;        /* servers under one ToR set (one ToR per rail) */
    int tors_per_pod;         /* ToR sets under one aggregation block */
    double tor_uplink_ratio;  /* uplink port speed / downlink port speed */
    double oversubscription;  /* ToR downlink bandwidth / uplink bandwidth */
    double pod_oversubscription; /* bandwidth within a pod / above it (1: full bisection across pods) */
    double alpha_nvlink_us;   /* per-step latency of a ring step over NVLink */
    double alpha_net_us;      /* per-step latency of a ring step over the network */
    double alpha_hop_us;      /* extra latency per switch tier crossed */
    double coll_launch_us;    /* fixed cost to launch one collective */
    double tier_eff[3];       /* bandwidth kept when traffic stays under one
                                 ToR, crosses aggregation, crosses spine */
    double host_stall_s;      /* per-iteration host stall with the synchronous
                                 data pipeline (data loading, host-side
                                 bookkeeping); 0 with --async-data-loader */
    double compute_scale;     /* fraction of the GPU's GEMM and attention
                                 efficiency curves this cluster sustains
                                 (clocks under its power and cooling; fitted
                                 for the paper's cluster, 1 = data sheet) */
    double host_sync_gap_us;  /* GPU idle after each blocking pipeline exchange:
                                 the host synchronises the device, then
                                 relaunches (Megatron-LM's batch_isend_irecv
                                 is followed by torch.cuda.synchronize) */
    double iteration_overhead_s; /* per-iteration host time the op model does
                                 not break down (fitted, not attributed) */
    double nvlink_scale;      /* fraction of the nvlink_eff curve that the
                                 collectives inside a node sustain during
                                 training (fitted for the paper's cluster;
                                 1 = the curve, as nccl-tests measure it) */
    double runtime_reserved_gib; /* CUDA context, NCCL and cuBLAS buffers */
    double host_share;        /* ranks per core where a host's ranks time-share its cores
                                 (a CPU run with more ranks than cores: processor sharing,
                                 each rank's compute this many times slower; compare sets it
                                 from the run); 1: a core, or a GPU, each (hw_host_share) */
    curve_t nvlink_eff;       /* fraction of nvlink_gbps reached vs message bytes */
    curve_t net_eff;          /* fraction of nic_gbit reached vs message bytes */
} hw_cluster_t;

typedef struct {
    hw_gpu_t gpu;
    hw_cluster_t cluster;
    hw_faults_t faults;       /* the cluster's fault model (model/fault.h): its
                                 built-in's, or a file's "faults" section */
} hw_t;

extern const opt_table hw_gpu_opts, hw_cluster_opts;
/* After a section was read (seen[i]: field i was there): a field with a
 * default that was not there gets it (a field added later: its default is
 * what files written before it meant); one without is an error naming it
 * at `where`, followed by `hint`. 0 or -1. */
int hw_fill_missing(const opt_table *t, void *obj, const char *seen, const char *where, const char *hint, char *err);

/* The factor every rank's compute runs slower by on hosts whose ranks
 * time-share the cores (cluster.host_share; at least 1). */
static inline double hw_host_share(const hw_t *hw) { return hw->cluster.host_share > 1 ? hw->cluster.host_share : 1; }

int hw_builtin_gpu(const char *name, hw_gpu_t *out);
int hw_builtin_cluster(const char *name, hw_cluster_t *out);
/* The built-in cluster `name` and its fault model into *hw (a cluster
 * always brings its own). 0, or -1 for a name that is not built in. */
int hw_use_builtin_cluster(hw_t *hw, const char *name);
/* Names of the built-ins, NULL terminated. */
extern const char *const hw_gpu_names[], *const hw_cluster_names[];

/* Resolves the job's --gpu/--cluster/--hardware choices into *hw. A file
 * section ("gpu" or "cluster") must give every field unless it names a
 * built-in "base" to start from. Returns 0 or -1 with a message. */
int hw_resolve(const char *gpu, const char *cluster, const char *file, hw_t *hw, char *err);

/* The message for a profile name that is not built in: FLAG = 'NAME' and
 * the GPU (gpu 1) or cluster names allowed, then hint. Returns -1. */
int hw_unknown_name(const char *flag, const char *name, int gpu, const char *hint, char *err);

/* A profile file's "gpu", "cluster" and "faults" sections, each replacing
 * its section of *hw (from its "base" built-in, or every field given); a
 * section the file lacks is kept, except the faults: a cluster section
 * brings its base's fault model, or none (faults.present 0) without a
 * base. Not checked: hw_check. 0 or -1. */
int hw_apply_file(const char *file, hw_t *hw, char *err);

/* Range checks of every field (missing fields are caught by hw_resolve). */
int hw_check(const hw_t *hw, char *err);

/* Whether a profile file holding hw would load: hw_to_json read back by
 * the loader's own rules (every field's bounds, then hw_check), so a writer
 * (calibrate) never writes what --hardware refuses. `what` names it in
 * the message. 0, or -1 with err. */
int hw_check_loadable(const hw_t *hw, const char *what, char *err);

/* The profile as JSON, in the format hw_resolve reads. */
struct cJSON *hw_to_json(const hw_t *hw);

#endif
