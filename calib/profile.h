/* calib/profile: from benchmark tables to a hardware profile. Runs the
 * fits, fills every field of a hw_t (measured ones from the fits, the
 * others from the named base profiles, listed as such in the provenance:
 * profile.c), prints the report and writes the profile JSON and the raw
 * HDF5 (profile_out.c). The
 * same for both devices; where they differ (which fields a CPU stands in
 * for, the GPU's description) it says so. */
#ifndef CALIB_PROFILE_H
#define CALIB_PROFILE_H

#include "calib/calib.h"
#include "model/hw.h"

struct cJSON;

/* One fit with its samples and residuals (owned: calib_result_free). */
typedef struct {
    char name[48];
    const char *xname, *yname;
    int linear;
    int constant;         /* y = a, the samples' mean (lin.a, lin.se_a, lin.rms; lin.r2 = 0): comm_slowdown */
    int slope;            /* y = b x, a dimensionless slope (lin.b, lin.se_b, lin.r2, lin.rms): gemm_acc */
    const char *how;      /* linear fits: the method, as reported (NULL: y = a + b x, gsl_fit_linear) */
    calib_satfit_t sat;
    calib_linfit_t lin;
    calib_wavefit_t wfit;  /* gemm_eff, flash_*_eff: the tile and its wave model (wfit.ok) */
    double *x, *y, *resid;
    double *wave;         /* wave-fitted curves: each sample's wave efficiency, else NULL */
    int n;
} calib_fitrec_t;

#define CALIB_MAX_FITS 40

/* The memory-bound kinds after the copy (calib.h CALIB_MEM_KINDS: LayerNorm,
 * bias+GeLU, AdamW, dropout), each with a math-rate fit of this name;
 * the CPU fits the first three, both devices the dropout's draws (the time
 * LayerNorm with dropout takes beyond LayerNorm). */
#define CALIB_MATH_RATES 4
extern const char *const calib_math_fit_names[CALIB_MATH_RATES];

typedef struct {
    int device;            /* 0 cpu, 1 gpu (calib_device_t order) */
    calib_level_t level;   /* the grid measured */
    calib_gpu_info_t gpu;  /* device 1: rank 0's GPU */
    char host[64], cpu_model[256]; /* rank 0's host (calib_describe_host) */
    double host_mem_gib;   /* its MemTotal: a CPU profile's hbm_gib */
    calib_table_t gemm, attn, attn_unfused, mem, coll; /* attn_unfused: raw samples only (calib.h) */
    calib_table_t overlap; /* compute beside a collective (calib_overlap_table); comm_slowdown's fit */
    calib_table_t attn_drop; /* the flash passes with and without dropout (calib_attn_dropout_table); may be empty */
    calib_table_t sustained; /* a GEMM's clock and speed under sustained load (calib_sustained_table); may be empty */
    calib_job_shapes_t job; /* the job named on the command line, whose linear layers were timed too */
    int have_coll, nranks, ncores;
    double llc_bytes;      /* copies of >= 2x this are DRAM-resident (calib_dram_cache_bytes; a GPU's L2) */
    int hbm_fitted;        /* copy_gbps from the hbm_bw fit (else the largest copy's rate) */
    double comm_slowdown;  /* the overlap samples' fit (fit_overlap), or NAN: not measured */
    double peak_gflops, gap_us;
    double copy_gbps;      /* memory bandwidth: the hbm_bw fit's over the DRAM-resident copies (hbm_fitted),
                              else the copy rate at the largest size */
    double host_stall_s;   /* synchronous loading of one iteration's batch, or < 0 */
    double flash1_rel;     /* FlashAttention-1 speed / FlashAttention-2 style speed, or < 0 */
    double graph_gap_us;   /* a kernel's gap as a CUDA graph node, us, or <= 0: not measured */
    double flash_gdraws[2]; /* the flash forward's and backward's draws of a full grid (1e9 / s; fits
                               flash_fwd_draws, flash_bwd_draws), or < 0 */
    double gemm_acc_exposed; /* the weight-gradient GEMMs' exposed share of their fp32 accumulation ("gemm_acc"
                                fit, in [0, 1]), or < 0 */
    double gemm_pack_ns;     /* CPU: ns per element a backward GEMM transposes first ("gemm_pack" fit), or < 0 */
    double math_gelems[CALIB_MATH_RATES]; /* LayerNorm, bias+GeLU, AdamW, dropout math rates (1e9 / s), or < 0 */
    double softmax_gelems[2]; /* the unfused attention's forward and backward beyond its GEMMs, scores per
                                 second (1e9 / s; fits softmax_fwd, softmax_bwd), or < 0 */
    double unfused_rel[2];    /* its GEMMs' speed against gemm_eff's (fits unfused_*_gemm), with them */
    double ar_alpha_us, ar_bw_gbps, p2p_alpha_us; /* all-reduce and send/recv fits */
    calib_fitrec_t fits[CALIB_MAX_FITS];
    int nfits;
} calib_result_t;

/* The collective fields come from the all-reduce fits when they worked. */
static inline int calib_coll_applied(const calib_result_t *r) { return r->have_coll && r->ar_bw_gbps > 0; }

/* The measuring host's name, CPU model and memory into r (rank 0, at
 * measurement: a refit elsewhere keeps them). */
void calib_describe_host(calib_result_t *r);

/* Runs every fit over the tables (rank 0). */
void calib_fit_all(calib_result_t *r, const calib_plan_t *p);

/* The profile: base_gpu and base_cluster give the fields not measured. */
int calib_make_profile(const calib_result_t *r, const char *base_gpu, const char *base_cluster, hw_t *hw,
                       char *err);

/* provenance: date, host, cpu model, command, version, device (and the
 * GPU's name, compute capability, SMs, memory, driver, runtime, NCCL and
 * cuBLASLt versions), fit quality, which fields are measured and which
 * kept from the base. */
struct cJSON *calib_provenance(const calib_result_t *r, const char *base_gpu, const char *base_cluster,
                               int argc, char **argv);

void calib_print_report(const calib_result_t *r, const hw_t *hw);

/* Writes hw + provenance as JSON via PATH.tmp.<pid> then rename. */
int calib_write_profile(const char *path, const hw_t *hw, const struct cJSON *prov, char *err);

/* Raw samples, fits and residuals; root attributes hold the configuration
 * (config: the options as JSON), the provenance and what was measured
 * beside the tables (measured: calib_measured_json), so that
 * calib_read_h5 can fit them again. */
int calib_write_h5(const char *path, const calib_result_t *r, const struct cJSON *config,
                   const struct cJSON *prov, char *err);

/* Everything a calibration measured that is not a table row (calib/raw.c):
 * device, level, host, GPU, job shapes, ranks, cores, last-level cache,
 * host stall, FlashAttention-1 ratio. */
struct cJSON *calib_measured_json(const calib_result_t *r);

/* A raw file written by calib_write_h5 read back (calib/raw.c): r's tables
 * and measured state, ready for calib_fit_all (its fits are not read);
 * *config and *prov (the writer's attributes, parsed; the caller frees
 * them). -1 with err naming the file and what is missing or malformed. */
int calib_read_h5(const char *path, calib_result_t *r, struct cJSON **config, struct cJSON **prov, char *err);

void calib_result_free(calib_result_t *r);

#endif
