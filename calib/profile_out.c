/* calib/profile_out: what a calibration writes and prints from its fits
 * (profile.c): the profile's provenance (date, host, command, fits, which
 * fields were measured), the report on stdout, the profile JSON and the
 * raw HDF5 (see profile.h). */
#define _POSIX_C_SOURCE 200809L /* gethostname */
#include "calib/profile.h"

#include <cjson/cJSON.h>
#include "sim/out.h"

#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef MEGASIM_VERSION
#define MEGASIM_VERSION "unknown"
#endif

/* ---- provenance -------------------------------------------------------------- */

static void cpu_model(char *buf, size_t len)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    snprintf(buf, len, "unknown");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            snprintf(buf, len, "%s", strchr(line, ':') + 2);
            buf[strcspn(buf, "\n")] = 0;
            break;
        }
    if (f)
        fclose(f);
}

static double mem_total_gib(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    double kib = 0;
    if (f) {
        if (fscanf(f, "MemTotal: %lf kB", &kib) != 1)
            kib = 0;
        fclose(f);
    }
    return kib > 0 ? kib / (1 << 20) : 1;
}

void calib_describe_host(calib_result_t *r)
{
    snprintf(r->host, sizeof r->host, "host");
    gethostname(r->host, sizeof r->host - 1);
    cpu_model(r->cpu_model, sizeof r->cpu_model);
    r->host_mem_gib = mem_total_gib();
}

/* Candidate c of a wave fit and its relative error, appended as
 * "128x256 0.0123" (a GEMM tile) or "64 0.0123" (attention block rows). */
static void wave_candidate(char *out, size_t len, const calib_wavefit_t *w, int c)
{
    if (w->tile_n)
        snprintf(out, len, "%s%dx%d %.4g", c ? ", " : "", w->cand_tile[c][0], w->cand_tile[c][1], w->cand_rel_rms[c]);
    else
        snprintf(out, len, "%s%d %.4g", c ? ", " : "", w->cand_tile[c][0], w->cand_rel_rms[c]);
}

/* A linear fit's 1 / slope as a rate (us per unit -> 1e9 units per second,
 * or GB/s for bytes), with its standard error; 0 and 0 without a positive
 * slope. */
static double fit_rate(const calib_fitrec_t *f, double *se)
{
    double b = f->lin.b;
    *se = b > 0 ? 1e-3 * f->lin.se_b / (b * b) : 0;
    return b > 0 ? 1e-3 / b : 0;
}

static cJSON *fit_json(const calib_fitrec_t *f)
{
    cJSON *o = cJSON_CreateObject();
    if (f->constant) {
        cJSON_AddStringToObject(o, "model", f->how);
        cJSON_AddNumberToObject(o, "value", f->lin.a);
        cJSON_AddNumberToObject(o, "value_se", f->lin.se_a);
        cJSON_AddNumberToObject(o, "rms_residual", f->lin.rms);
        cJSON_AddNumberToObject(o, "samples", f->lin.n);
    } else if (f->slope) {
        cJSON_AddStringToObject(o, "model", f->how);
        cJSON_AddNumberToObject(o, "slope", f->lin.b);
        cJSON_AddNumberToObject(o, "slope_se", f->lin.se_b);
        cJSON_AddNumberToObject(o, "r2", f->lin.r2);
        cJSON_AddNumberToObject(o, "rms_residual", f->lin.rms);
        cJSON_AddNumberToObject(o, "samples", f->lin.n);
        int draws = !strcmp(f->xname, "draws");
        if (draws || !strcmp(f->xname, "scores")) { /* us per draw or score: the rate the profile takes */
            double se, rate = fit_rate(f, &se);
            cJSON_AddNumberToObject(o, draws ? "rate_gdraws" : "rate_gscores", rate);
            cJSON_AddNumberToObject(o, draws ? "rate_se_gdraws" : "rate_se_gscores", se);
        }
    } else if (f->linear) {
        cJSON_AddStringToObject(o, "model", f->how ? f->how : "y = a + b x (gsl_fit_linear)");
        cJSON_AddNumberToObject(o, "alpha_us", f->lin.a);
        cJSON_AddNumberToObject(o, "alpha_se_us", f->lin.se_a);
        double se, bw = fit_rate(f, &se);
        cJSON_AddNumberToObject(o, "bandwidth_gbps", bw);
        cJSON_AddNumberToObject(o, "bandwidth_se_gbps", se);
        cJSON_AddNumberToObject(o, "r2", f->lin.r2);
        cJSON_AddNumberToObject(o, "rms_residual", f->lin.rms);
        cJSON_AddNumberToObject(o, "samples", f->lin.n);
    } else {
        const char *wm = f->wfit.ncand && f->wfit.tile_n ? "eff = min(1, e_max x / (x + x_half)) x wave(tile, m, n) "
                                                           "(model/cost.c; gsl_multifit_nlinear per candidate tile)"
                         : f->wfit.ncand ? "eff = min(1, e_max x / (x + x_half)) x wave(block, heads, seq, window) "
                                           "(model/cost.c; gsl_multifit_nlinear per candidate block)"
                                         : "eff = e_max x / (x + x_half) (gsl_multifit_nlinear)";
        cJSON_AddStringToObject(o, "model", wm);
        cJSON_AddNumberToObject(o, "e_max", f->sat.e_max);
        cJSON_AddNumberToObject(o, "e_max_se", f->sat.se_e_max);
        cJSON_AddNumberToObject(o, "x_half", f->sat.x_half);
        cJSON_AddNumberToObject(o, "x_half_se", f->sat.se_x_half);
        cJSON_AddNumberToObject(o, "r2", f->sat.r2);
        cJSON_AddNumberToObject(o, "rms_residual", f->sat.rms);
        cJSON_AddNumberToObject(o, "samples", f->sat.n);
    }
    if (f->wfit.ncand) {
        char buf[256] = "";
        if (f->wfit.tile_n) {
            cJSON_AddNumberToObject(o, "tile_m", f->wfit.tile_m);
            cJSON_AddNumberToObject(o, "tile_n", f->wfit.tile_n);
        } else {
            cJSON_AddNumberToObject(o, "block_rows", f->wfit.tile_m);
        }
        cJSON_AddNumberToObject(o, "relative_rms", f->wfit.rel_rms);
        for (int c = 0; c < f->wfit.ncand; c++)
            wave_candidate(buf + strlen(buf), sizeof buf - strlen(buf), &f->wfit, c);
        cJSON_AddStringToObject(o, "candidates_relative_rms", buf);
    }
    cJSON_AddStringToObject(o, "x", f->xname);
    return o;
}

/* "13.0" from 13000, "2.28.9" from NCCL's 22809. */
static void add_version(cJSON *p, const char *key, int v, int nccl)
{
    char buf[32];
    if (nccl)
        snprintf(buf, sizeof buf, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
    else
        snprintf(buf, sizeof buf, "%d.%d", v / 1000, v % 1000 / 10);
    cJSON_AddStringToObject(p, key, buf);
}

/* The GPU: what cudaGetDeviceProperties, the driver, the runtime, NCCL and
 * cuBLASLt say about rank 0's device. */
static void gpu_description(cJSON *p, const calib_gpu_info_t *g)
{
    char cc[16];
    cJSON_AddStringToObject(p, "gpu_name", g->name);
    snprintf(cc, sizeof cc, "%d.%d", g->cc_major, g->cc_minor);
    cJSON_AddStringToObject(p, "compute_capability", cc);
    cJSON_AddNumberToObject(p, "sm_count", g->sm_count);
    cJSON_AddNumberToObject(p, "gpu_memory_gib", g->mem_gib);
    cJSON_AddNumberToObject(p, "l2_mib", g->l2_mib);
    cJSON_AddNumberToObject(p, "sm_clock_mhz", g->clock_mhz);
    cJSON_AddNumberToObject(p, "mem_clock_mhz", g->mem_clock_mhz);
    cJSON_AddNumberToObject(p, "mem_bus_bits", g->mem_bus_bits);
    cJSON_AddNumberToObject(p, "gpus_visible", g->devices);
    add_version(p, "cuda_driver_version", g->driver_version, 0);
    add_version(p, "cuda_runtime_version", g->runtime_version, 0);
    add_version(p, "nccl_version", g->nccl_version, 1);
    cJSON_AddNumberToObject(p, "cublaslt_version", (double)g->cublaslt_version);
}

static const char host_stall_what[] = "host_stall_s (the real backend's synchronous loader preparing one iteration "
                                      "of `megasim run`'s default job, experiments/real/tiny-gpt.json); "
                                      "host_sync_gap_us = 0 and iteration_overhead_s = 0 by construction (megasim's "
                                      "executor does not synchronise the host at pipeline exchanges, and times an "
                                      "iteration as its op program); compute_scale = 1 and nvlink_scale = 1 (the "
                                      "efficiency curves are measured as they are)";

/* Which fields were measured and which kept from the base, per device. */
/* Where hbm_gbps came from (fit_hbm). */
static void hbm_what(char *buf, size_t len, const calib_result_t *r)
{
    const char *copy = r->device ? "cudaMemcpyAsync device to device" : "memcpy";
    if (r->hbm_fitted)
        snprintf(buf, len, "hbm_gbps (fits/hbm_bw: %s time against bytes, read + write, over the copies of >= 2x "
                 "the %.0f MiB last-level cache)", copy, r->llc_bytes / (1 << 20));
    else
        snprintf(buf, len, "hbm_gbps (%s at the largest size, read + write bytes: fewer than 3 copies of >= 2x the "
                 "%.0f MiB last-level cache for fits/hbm_bw)", copy, r->llc_bytes / (1 << 20));
}

static void field_sources(cJSON *p, const calib_result_t *r)
{
    char buf[4096], no_coll[300] = "", hbm[300], acc[160] = "";
    if (r->gemm_acc_exposed >= 0)
        snprintf(acc, sizeof acc, ", gemm_acc_exposed (fits/gemm_acc)");
    else if (r->gemm_pack_ns >= 0)
        snprintf(acc, sizeof acc, ", gemm_pack_ns (the backward GEMMs' transposes: fits/gemm_pack)");
    hbm_what(hbm, sizeof hbm, r);
    cJSON_AddStringToObject(p, "raw_only", "attention_unfused (the unfused kernels' samples, in the HDF5 file: the "
                            "model prices unfused attention from gemm_eff and the memory-bound rates, no field of "
                            "its own)");
    int coll = calib_coll_applied(r);
    if (!coll)
        snprintf(no_coll, sizeof no_coll, "; collective fields (nvlink_gbps, alpha_nvlink_us, coll_launch_us, "
                 "nvlink_eff): %s", !r->have_coll ? "the collective benchmarks need >= 2 MPI ranks, this run had 1"
                                                  : "the all-reduce's large-message fit gave no bandwidth (see fits)");
    if (!r->device) {
        snprintf(buf, sizeof buf, "gpu: peak_bf16_tflops, peak_tf32_tflops (best GEMM), %s, sm_count (cores), "
                 "hbm_gib (MemTotal), kernel_gap_us, gemm_eff (the linear layers' forward and both backward GEMMs, "
                 "square forward GEMMs; the backward ones less their transposes)%s, "
                 "flash_fwd_eff, flash_bwd_eff, mem_eff (copies over hbm_gbps, at most 1), "
                 "norm_gelems, gelu_gelems, optim_gparams (LayerNorm, bias+GeLU, AdamW: elements over time, least "
                 "squares on the relative error), dropout_gdraws (LayerNorm with dropout less LayerNorm, over its "
                 "draws: fits/dropout_rate)%s; "
                 "cluster: %s%s", hbm, acc,
                 coll ? ", nvlink_gbps (all-reduce busbw)" : "",
                 coll ? "alpha_nvlink_us, coll_launch_us, nvlink_eff (MPI within this node), " : "",
                 host_stall_what);
        cJSON_AddStringToObject(p, "measured", buf);
        snprintf(buf, sizeof buf, "%s%scluster topology and network fields (no second node to measure)%s",
                 !isnan(r->comm_slowdown) ? "" : "gpu comm_slowdown (needs >= 3 ranks on as many cores: rank 0 "
                                             "computes while the others all-reduce); ",
                 r->gemm_pack_ns >= 0 ? "gpu gemm_acc_exposed (the register tiles accumulate; the backward GEMMs' "
                                        "extra time is their transposes: gemm_pack_ns); "
                                      : "gpu gemm_acc_exposed; gemm_pack_ns 0 (fewer than 2 backward GEMM samples); ",
                 no_coll);
        cJSON_AddStringToObject(p, "kept_from_base", buf);
        cJSON_AddStringToObject(p, "by_construction", "gpu gemm_tile_m/n = 4 (kern_gemm_ref's register block), "
                                "attn_block_q/k = 1 (kern_attention_*_ref's row at a time), flash1_rel = 1 (the CPU "
                                "backend runs one flash reference for both flash kinds)");
        return;
    }
    snprintf(buf, sizeof buf, "gpu: peak_bf16_tflops (best bf16 GEMM: kern_matmul_fwd_cuda, kern_gemm_cuda), "
             "%s, sm_count, hbm_gib "
             "(cudaGetDeviceProperties), kernel_gap_us (back-to-back kern_bias_gelu_fwd_cuda launches up to 256 KiB, host ahead of the GPU), "
             "gemm_eff and gemm_tile_m/n (the curve and the tile among 64x64, 128x64, 128x128, 256x128 whose wave "
             "quantisation on sm_count SMs best explains the GEMM samples, the weight gradients less their exposed "
             "fp32 accumulation, fits/gemm_eff)%s, "
             "flash_fwd_eff, flash_bwd_eff and attn_block_q/k (kern_attention_*_cuda; the curves and the block "
             "among 32, 64 and 128 rows whose wave quantisation on sm_count x attn_slots_q/k slots best explains the samples, "
             "fits/flash_*_eff), attn_slots_q/k (the default flash kernels' blocks resident per SM at head size 128, "
             "cudaOccupancyMaxActiveBlocksPerMultiprocessor; 0: not recorded, one), mem_eff (LayerNorm, bias+GeLU, AdamW "
             "kernels), flash1_rel (kern_attention_*_v1_cuda over kern_attention_*_cuda, forward + backward)"
             "%s%s%s%s%s; "
             "cluster: %s%s", hbm, acc,
             r->graph_gap_us > 0 ? ", graph_gap_us (64 kern_bias_gelu_fwd_cuda calls launched as one CUDA graph, "
                                   "time per node up to 256 KiB)" : "",
             r->math_gelems[3] > 0 ? ", dropout_gdraws (kern_layernorm_fwd_cuda with dropout 0.1 less without, over "
                                     "its draws: fits/dropout_rate)" : "",
             r->flash_gdraws[0] > 0 && r->flash_gdraws[1] > 0
                 ? ", flash_fwd_gdraws and flash_bwd_gdraws (each kern_attention_*_cuda pass with dropout 0.1 less "
                   "without, times its wave efficiency, over its draws: fits/flash_*_draws)" : "",
             coll ? ", nvlink_gbps (ncclAllReduce busbw)" : "",
             !isnan(r->comm_slowdown) ? ", comm_slowdown (a GEMM beside an ncclAllReduce on another stream)" : "",
             coll ? "alpha_nvlink_us, coll_launch_us, nvlink_eff (NCCL within this node), " : "", host_stall_what);
    cJSON_AddStringToObject(p, "measured", buf);
    snprintf(buf, sizeof buf, "gpu peak_tf32_tflops = the "
             "measured bf16 peak x the base's tf32/bf16 ratio (kern_gemm_cuda is bf16 only); norm_gelems, "
             "gelu_gelems, optim_gparams (data-sheet math rates: those kernels are bandwidth-bound on a GPU, so "
             "their samples give mem_eff)%s%s%s%s%s%s; cluster topology "
             "and network fields (no second node to measure), runtime_reserved_gib%s",
             r->graph_gap_us > 0 ? "" : "; gpu graph_gap_us (the graph's samples gave no positive launch gap)",
             !isnan(r->comm_slowdown) ? "" : "; gpu comm_slowdown (needs >= 2 ranks, one GPU each)",
             r->flash1_rel > 0 ? "" : "; gpu flash1_rel (its measurement failed)",
             r->math_gelems[3] > 0 ? "" : "; gpu dropout_gdraws (dropout added no measurable time to LayerNorm)",
             r->flash_gdraws[0] > 0 && r->flash_gdraws[1] > 0 ? "" : "; gpu flash_fwd_gdraws and flash_bwd_gdraws "
                                                                      "(dropout added no measurable time to a flash pass)",
             r->gemm_acc_exposed >= 0 ? "" : "; gpu gemm_acc_exposed (fewer than 2 weight-gradient GEMM samples)",
             no_coll);
    cJSON_AddStringToObject(p, "kept_from_base", buf);
}

/* /proc/PID/cmdline with its NULs as spaces into buf; its length, or 0. */
static size_t read_cmdline(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, len - 1, f) : 0;
    if (f)
        fclose(f);
    while (n > 0 && buf[n - 1] == 0)
        n--;
    for (size_t i = 0; i < n; i++)
        buf[i] = buf[i] ? buf[i] : ' ';
    buf[n] = 0;
    return n;
}

/* The command as typed: on one node Open MPI's mpirun starts the ranks
 * itself, so the parent's command line is the whole of it (launcher
 * options, program path, arguments); else this process's own (the
 * program as invoked), behind "mpirun -np N" when there are ranks; argv
 * (the subcommand on) when /proc cannot be read. */
static void command_line(char *cmd, size_t len, int nranks, int argc, char **argv)
{
    char path[64], parent[4096], self[4096] = "megasim";
    snprintf(path, sizeof path, "/proc/%ld/cmdline", (long)getppid());
    if (nranks > 1 && read_cmdline(path, parent, sizeof parent)) {
        char *prog = strtok(strcpy(self, parent), " "), *slash = prog ? strrchr(prog, '/') : NULL;
        const char *base = slash ? slash + 1 : prog ? prog : "";
        if (!strcmp(base, "mpirun") || !strcmp(base, "mpiexec") || !strcmp(base, "orterun")) {
            snprintf(cmd, len, "%s", parent);
            return;
        }
    }
    if (!read_cmdline("/proc/self/cmdline", self, sizeof self)) {
        snprintf(self, sizeof self, "megasim");
        for (int i = 0; i < argc; i++) /* argv[0] is the subcommand */
            snprintf(self + strlen(self), sizeof self - strlen(self), " %s", argv[i]);
    }
    char np[32] = "";
    if (nranks > 1)
        snprintf(np, sizeof np, "mpirun -np %d ", nranks);
    snprintf(cmd, len, "%s%s", np, self);
}

cJSON *calib_provenance(const calib_result_t *r, const char *base_gpu, const char *base_cluster, int argc,
                        char **argv)
{
    cJSON *p = cJSON_CreateObject();
    char buf[64] = "";
    time_t now = time(NULL);
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    cJSON_AddStringToObject(p, "date", buf);
    cJSON_AddStringToObject(p, "host", r->host);
    cJSON_AddStringToObject(p, "cpu_model", r->cpu_model);
    cJSON_AddStringToObject(p, "device", r->device ? "gpu" : "cpu");
    if (r->device)
        gpu_description(p, &r->gpu);
    cJSON_AddStringToObject(p, "precision",
                            r->device ? "bf16 CUDA kernels (kernels/*.cu; GEMMs through cuBLASLt, fp32 accumulation), "
                                        "one GPU per rank: peak_bf16_tflops holds the best bf16 GEMM rate measured"
                                      : "fp32 reference kernels (kernels/*_ref.c), one thread per rank: "
                                        "peak_bf16_tflops, peak_tf32_tflops and peak_fp8_tflops all hold the fp32 "
                                        "GEMM rate (FP8 is emulated: kernels/fp8.h), and pcie_gbps the copy rate "
                                        "(offloading copies within host memory)");
    char cmd[4200];
    command_line(cmd, sizeof cmd, r->nranks, argc, argv);
    cJSON_AddStringToObject(p, "command", cmd);
    if (r->job.on) {
        char js[440], ex[140] = "";
        if (r->job.expert_rows > 0)
            snprintf(ex, sizeof ex, "; a local expert's FC1 %d -> %d and FC2 %d -> %d over %d rows at ETP %d",
                     r->job.h, r->job.expert_fc1, r->job.expert_ffn, r->job.h, r->job.expert_rows, r->job.etp);
        snprintf(js, sizeof js, "the job on the command line: its linear layers at TP %d over %d tokens, forward and "
                 "both backward GEMMs (QKV %d -> %d, projection %d -> %d, FC1 %d -> %d, FC2 %d -> %d%s), in "
                 "gemm_eff's samples", r->job.tp, r->job.tokens, r->job.h, r->job.qkv / r->job.tp,
                 r->job.attn / r->job.tp, r->job.h, r->job.h, r->job.fc1 / r->job.tp, r->job.ffn / r->job.tp,
                 r->job.h, ex);
        cJSON_AddStringToObject(p, "job_layers", js);
    }
    if (!r->device) /* glibc's tanhf: faster on small inputs (calib_gelu_input_std) */
        cJSON_AddNumberToObject(p, "gelu_input_std", calib_gelu_input_std(&r->job));
    cJSON_AddStringToObject(p, "megasim_version", MEGASIM_VERSION);
    cJSON_AddStringToObject(p, "level", calib_level_names[r->level]);
    cJSON_AddNumberToObject(p, "mpi_ranks", r->nranks);
    cJSON_AddNumberToObject(p, "cores", r->ncores);
    cJSON_AddStringToObject(p, "base_gpu", base_gpu);
    cJSON_AddStringToObject(p, "base_cluster", base_cluster);
    field_sources(p, r);
    cJSON *fits = cJSON_AddObjectToObject(p, "fits");
    for (int i = 0; i < r->nfits; i++)
        cJSON_AddItemToObject(fits, r->fits[i].name, fit_json(&r->fits[i]));
    return p;
}

/* ---- report -------------------------------------------------------------------- */

static void print_fit(const calib_fitrec_t *f)
{
    int per_elem = !strcmp(f->xname, "elems"); /* a math rate: G elements / s, not GB/s */
    double se, rate = fit_rate(f, &se);
    if (f->constant)
        printf("  %-22s %9.4f +- %.4f (mean)   rms %.4f  (%d samples)\n", f->name, f->lin.a, f->lin.se_a, f->lin.rms,
               f->lin.n);
    else if (f->slope && (!strcmp(f->xname, "draws") || !strcmp(f->xname, "scores")))
        printf("  %-22s rate %9.3f +- %.3f G %s/s (1 / slope)   R^2 %.4f  rms %.3g us  (%d samples)\n", f->name,
               rate, se, f->xname, f->lin.r2, f->lin.rms, f->lin.n);
    else if (f->slope && !strcmp(f->xname, "gemms_priced_us"))
        printf("  %-22s slope %9.4f +- %.4f (the GEMMs' speed against gemm_eff: 1 / slope)   R^2 %.4f  rms %.3g us  "
               "(%d samples)\n", f->name, f->lin.b, f->lin.se_b, f->lin.r2, f->lin.rms, f->lin.n);
    else if (f->slope)
        printf("  %-22s slope %9.4f +- %.4f (the profile holds it in [0, 1])   R^2 %.4f  rms %.3g us  (%d samples)\n",
               f->name, f->lin.b, f->lin.se_b, f->lin.r2, f->lin.rms, f->lin.n);
    else if (f->linear)
        printf("  %-22s alpha %9.3f +- %.3f us   %s %9.3f +- %.3f %s   R^2 %.4f  rms %.3g us  (%d samples)\n",
               f->name, f->lin.a, f->lin.se_a, per_elem ? "rate" : "bw", rate, se, per_elem ? "G/s " : "GB/s",
               f->lin.r2, f->lin.rms, f->lin.n);
    else
        printf("  %-22s e_max %.4f +- %.4f   x_half %.4g +- %.3g %s   R^2 %.4f  rms %.4f  (%d samples)\n", f->name,
               f->sat.e_max, f->sat.se_e_max, f->sat.x_half, f->sat.se_x_half, f->xname, f->sat.r2, f->sat.rms,
               f->sat.n);
    if (f->wfit.ok) {
        char buf[256] = "";
        for (int c = 0; c < f->wfit.ncand; c++)
            wave_candidate(buf + strlen(buf), sizeof buf - strlen(buf), &f->wfit, c);
        if (f->wfit.tile_n)
            printf("    tile %d x %d", f->wfit.tile_m, f->wfit.tile_n);
        else
            printf("    block of %d rows", f->wfit.tile_m);
        printf(" (relative rms %.4f); candidates: %s\n", f->wfit.rel_rms, buf);
    }
    printf("    residuals (%s at %s):", f->yname, f->xname);
    for (int i = 0; i < f->n; i++)
        if (!f->linear || f->constant || f->resid[i] != 0)
            printf(" %.3g@%.3g", f->resid[i], f->x[i]);
    printf("\n");
}

static void print_colls(const calib_result_t *r)
{
    for (int c = 0; c < CALIB_NCOLL; c++) {
        calib_coll_print_header(stdout, c, r->nranks, r->device ? calib_colls[c].nccl_call : calib_colls[c].mpi_call);
        for (int i = 0; i < r->coll.n; i++)
            if (calib_table_get(&r->coll, i, 0) == c)
                calib_coll_print_row(stdout, &r->coll, i);
    }
}

void calib_print_report(const calib_result_t *r, const hw_t *hw)
{
    if (r->device)
        printf("megasim calibrate: device gpu (%s, compute capability %d.%d, %d SMs; bf16 CUDA kernels), "
               "%d MPI rank(s), one GPU each\n", r->gpu.name, r->gpu.cc_major, r->gpu.cc_minor, r->gpu.sm_count,
               r->nranks);
    else
        printf("megasim calibrate: device cpu (fp32 reference kernels, one thread), %d cores, %d MPI rank(s)\n",
               r->ncores, r->nranks);
    printf("  best GEMM          %8.2f GFLOP/s  -> peak_bf16_tflops %.4g\n", r->peak_gflops,
           hw->gpu.peak_bf16_tflops);
    if (r->hbm_fitted)
        printf("  memory bandwidth   %8.2f GB/s     -> hbm_gbps %.4g (fits/hbm_bw: copies of >= 2 x %.0f MiB)\n",
               r->copy_gbps, hw->gpu.hbm_gbps, r->llc_bytes / (1 << 20));
    else
        printf("  largest copy       %8.2f GB/s     -> hbm_gbps %.4g (too few copies of >= 2 x %.0f MiB to fit)\n",
               r->copy_gbps, hw->gpu.hbm_gbps, r->llc_bytes / (1 << 20));
    printf("  kernel gap         %8.3f us\n", r->gap_us);
    if (r->graph_gap_us > 0)
        printf("  graph gap          %8.3f us   (a kernel as a node of a CUDA graph: --enable-cuda-graph)\n",
               r->graph_gap_us);
    if (r->host_stall_s >= 0)
        printf("  host stall         %8.3f us  (synchronous loading of one iteration of run's default job)\n",
               r->host_stall_s * 1e6);
    static const char *const math_what[CALIB_MATH_RATES] = {
        "LayerNorm: elements over time", "bias+GeLU: elements over time", "AdamW: elements over time",
        "dropout's draws: LayerNorm with dropout less without, over them -> dropout_gdraws"};
    for (int k = 0; k < CALIB_MATH_RATES; k++)
        if (r->math_gelems[k] > 0)
            printf("  %-18s %8.4f G/s (%s)\n", calib_math_fit_names[k], r->math_gelems[k], math_what[k]);
    if (r->flash1_rel > 0)
        printf("  flash1_rel         %8.3f    (FlashAttention-1 speed / flash kernel speed, forward + backward%s)\n",
               r->flash1_rel, r->device ? "" : ": one reference serves both on the CPU");
    for (int bwd = 0; bwd <= 1; bwd++)
        if (r->flash_gdraws[bwd] > 0)
            printf("  %-18s %8.4f G/s (the pass with dropout 0.1 less without, times its wave efficiency, over its "
                   "draws) -> flash_%s_gdraws\n", bwd ? "flash_bwd_draws" : "flash_fwd_draws", r->flash_gdraws[bwd],
                   bwd ? "bwd" : "fwd");
    if (r->gemm_pack_ns >= 0)
        printf("  GEMM transposes    %8.3f ns an element (the input- and weight-gradient GEMMs' time beyond the "
               "forward's curve over the elements they transpose, on the relative error; fits/gemm_pack) -> "
               "gemm_pack_ns\n", r->gemm_pack_ns);
    if (r->gemm_acc_exposed >= 0)
        printf("  fp32 accumulation  %8.3f    exposed (weight-gradient GEMMs: their time beyond the other passes' "
               "curve over 8 bytes per output element at hbm_gbps x mem_eff; fits/gemm_acc) -> gemm_acc_exposed\n",
               r->gemm_acc_exposed);
    if (r->sustained.n >= 2) { /* columns: t_s, sm_mhz, power_w, capped, tflops */
        const calib_table_t *t = &r->sustained;
        int last = t->n - 1;
        printf("  sustained GEMM     %8.1f -> %.1f TFLOP/s, SM clock %.0f -> %.0f MHz, %.0f W, power cap in %.0f%% of "
               "reads (the first and last of %d windows over %.2f s; HDF5 /sustained)\n",
               calib_table_get(t, 0, 4), calib_table_get(t, last, 4), calib_table_get(t, 0, 1),
               calib_table_get(t, last, 1), calib_table_get(t, last, 2), 100 * calib_table_get(t, last, 3), t->n,
               calib_table_get(t, last, 0));
    }
    if (r->have_coll)
        printf("  all-reduce         %8.3f us alpha, %.3f GB/s busbw -> nvlink_gbps; alpha_nvlink_us %.3f, "
               "coll_launch_us %.3f\n", r->ar_alpha_us, r->ar_bw_gbps, hw->cluster.alpha_nvlink_us,
               hw->cluster.coll_launch_us);
    else
        printf("  collectives: need >= 2 MPI ranks (mpirun -np 2%s); skipped, the base profile's collective fields "
               "kept\n", r->device ? ", one GPU each" : "");
    if (!isnan(r->comm_slowdown))
        printf("  comm slowdown      %8.3f (%s; fits/comm_slowdown: the mean of %d samples, HDF5 /overlap)\n",
               r->comm_slowdown,
               r->device ? "GEMMs on rank 0 beside all-reduces on another stream of its GPU"
                         : "GEMM on rank 0 while the others all-reduce", r->overlap.n);
    else
        printf("  comm slowdown: not measured (needs %s); base value %.3f kept\n",
               r->device ? ">= 2 ranks, one GPU each" : ">= 3 ranks on as many cores", hw->gpu.comm_slowdown);
    if (r->attn_unfused.n)
        printf("  unfused attention  %d samples, raw only (HDF5 /attention_unfused: the model prices it from gemm_eff "
               "and the memory-bound rates)\n", r->attn_unfused.n);
    printf("\nfits:\n");
    for (int i = 0; i < r->nfits; i++)
        print_fit(&r->fits[i]);
    if (r->have_coll)
        print_colls(r);
}

/* ---- files ---------------------------------------------------------------------- */

int calib_write_profile(const char *path, const hw_t *hw, const cJSON *prov, char *err)
{
    char what[OPT_ERR_LEN], why[OPT_ERR_LEN];
    snprintf(what, sizeof what, "the profile measured for %s", path);
    if (hw_check_loadable(hw, what, why)) { /* reliability finding F06 */
        snprintf(err, OPT_ERR_LEN, "%.1200s; not written (a measurement outside what a profile allows: a machine that "
                 "slow, or a failed benchmark)", why);
        return -1;
    }
    cJSON *o = hw_to_json(hw);
    cJSON_AddItemToObject(o, "provenance", cJSON_Duplicate(prov, 1));
    int rc = out_write_json(path, o, err, OPT_ERR_LEN);
    cJSON_Delete(o);
    return rc;
}

/* HDF5: one group per table, one float64 dataset per column. */
static int h5_table(out_h5_t *w, const calib_table_t *t)
{
    char path[64];
    snprintf(path, sizeof path, "/%s", t->name);
    hid_t g = out_h5_group(w, w->file, path);
    int rc = g < 0;
    double *col = malloc(sizeof(double) * (t->n + 1));
    for (int c = 0; !rc && c < t->ncol; c++) {
        for (int i = 0; i < t->n; i++)
            col[i] = calib_table_get(t, i, c);
        rc = out_h5_column(w, g, t->cols[c], col, (size_t)t->n);
    }
    free(col);
    if (g >= 0)
        H5Gclose(g);
    return rc ? -1 : 0;
}

static int h5_fit(out_h5_t *w, hid_t parent, const calib_fitrec_t *f)
{
    hid_t g = out_h5_group(w, parent, f->name);
    if (g < 0)
        return -1;
    cJSON *j = fit_json(f);
    int rc = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, j)
    {
        rc = rc || (cJSON_IsNumber(m) ? out_h5_attr_f64(w, g, m->string, m->valuedouble)
                                      : out_h5_attr_str(w, g, m->string, m->valuestring));
    }
    cJSON_Delete(j);
    rc = rc || out_h5_column(w, g, "x", f->x, (size_t)f->n) || out_h5_column(w, g, "y", f->y, (size_t)f->n) ||
         out_h5_column(w, g, "residual", f->resid, (size_t)f->n) ||
         (f->wave && out_h5_column(w, g, "wave_eff", f->wave, (size_t)f->n));
    H5Gclose(g);
    return rc ? -1 : 0;
}

/* What the integer codes in the tables mean, for the reader. */
static int h5_legend(out_h5_t *w, const calib_result_t *r)
{
    hid_t f = w->file;
    return out_h5_attr_str(w, f, "device", r->device ? "gpu" : "cpu") ||
           out_h5_attr_str(w, f, "collectives_coll",
                           r->device ? "0 all_reduce, 1 all_gather, 2 reduce_scatter, 3 alltoall, "
                                       "4 broadcast, 5 sendrecv (ncclAllReduce ... ncclSend/ncclRecv)"
                                     : "0 all_reduce, 1 all_gather, 2 reduce_scatter, 3 alltoall, "
                                       "4 broadcast, 5 sendrecv (MPI_Allreduce ... MPI_Sendrecv)") ||
           out_h5_attr_str(w, f, "memory_kernel",
                           r->device ? "0 copy (cudaMemcpyAsync), 1 kern_layernorm_fwd_cuda, "
                                       "2 kern_bias_gelu_fwd_cuda, 3 kern_adamw_cuda (4 dropout_fwd "
                                       "is not timed on a GPU: calib/bench_gpu.c), 5 "
                                       "kern_layernorm_fwd_cuda with dropout 0.1 (kind 1's elements)"
                                     : "0 copy (memcpy), 1 kern_layernorm_fwd_ref, "
                                       "2 kern_bias_gelu_fwd_ref, 3 kern_adamw_ref, "
                                       "4 kern_dropout_ref, 5 kern_layernorm_fwd_ref with dropout "
                                       "0.1 (kind 1's elements)") ||
           out_h5_attr_str(w, f, "attention_unfused_use",
                           "the unfused kernels (GEMM, masked softmax, GEMM), raw samples only: the model prices "
                           "unfused attention from gemm_eff and the memory-bound rates (model/layer.c), no profile "
                           "field; flops as the model counts them, over all T x T pairs") ||
           out_h5_attr_str(w, f, "gemm_pass", "0 forward, 1 backward dinp, 2 backward dweight (fp32, beta 1)");
}

/* Every table with rows: the ones each device always measures, then the
 * optional ones. */
static int h5_tables(out_h5_t *w, const calib_result_t *r)
{
    const calib_table_t *t[] = {&r->gemm,    &r->attn,    &r->attn_unfused, &r->mem,
                                &r->coll,    &r->overlap, &r->attn_drop,    &r->sustained};
    int want[] = {1, 1, 1, 1, r->have_coll, r->overlap.n > 0, r->attn_drop.n > 0, r->sustained.n > 0};
    for (int i = 0; i < 8; i++)
        if (want[i] && h5_table(w, t[i]))
            return -1;
    return 0;
}

int calib_write_h5(const char *path, const calib_result_t *r, const cJSON *config, const cJSON *prov, char *err)
{
    out_h5_t w;
    if (out_h5_create(&w, path, err, OPT_ERR_LEN))
        return -1;
    cJSON *measured = calib_measured_json(r);
    char *cs = cJSON_PrintUnformatted(config), *ps = cJSON_PrintUnformatted(prov);
    char *ms = cJSON_PrintUnformatted(measured);
    cJSON_Delete(measured);
    hid_t fg = -1;
    int rc = !cs || !ps || !ms ? out_h5_fail(&w, "format", "the configuration as JSON")
             : out_h5_attr_str(&w, w.file, "config", cs) || out_h5_attr_str(&w, w.file, "provenance", ps) ||
                 out_h5_attr_str(&w, w.file, "measured", ms) ||
                 out_h5_attr_f64(&w, w.file, "mpi_ranks", r->nranks) || h5_legend(&w, r) || h5_tables(&w, r) ||
                 (fg = out_h5_group(&w, w.file, "/fits")) < 0;
    for (int i = 0; !rc && i < r->nfits; i++)
        rc = h5_fit(&w, fg, &r->fits[i]);
    free(cs), free(ps), free(ms);
    if (fg >= 0)
        H5Gclose(fg);
    return out_h5_close(&w, rc ? -1 : 0);
}
