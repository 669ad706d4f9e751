/* cmd_calibrate: `megasim calibrate`: measures this machine and writes a
 * hardware profile that `megasim predict --hardware FILE` reads, plus the
 * raw samples and fits as HDF5. --device cpu times the reference C kernels
 * (fp32, one thread per rank) and, under mpirun with >= 2 ranks, MPI
 * collectives; --device gpu (built with CUDA) the CUDA kernels (bf16) on
 * one GPU per rank and, with >= 2 ranks, NCCL collectives. Rank 0
 * computes, every rank joins the collectives, rank 0 fits and writes.
 * Progress goes to stderr, the report (figures, fits, residuals,
 * nccl-tests tables) to stdout. */
#define _POSIX_C_SOURCE 200809L /* sysconf */
#include "calib/profile.h"
#include "cmd/cli.h"
#include "calib/bench_gpu.h"
#include "real/data.h"
#include "real/rt.h"
#include "sim/output.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <mpi.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    int device, quick, tiny, help;
    char out[1024], raw[1024], base_gpu[40], base_cluster[40], refit[1024];
} calib_opts_t;

#define CO(f) offsetof(calib_opts_t, f)
static const opt_def calib_defs[] = {
    {"device", OPT_ENUM, CO(device), 0, 0, "cpu", "cpu|gpu", "calibrate",
     "what to measure: cpu (the reference kernels; MPI collectives under mpirun -np >= 2); "
     "gpu (the CUDA kernels, bf16, one GPU per rank; NCCL collectives under mpirun -np >= 2)"},
    {"quick", OPT_BOOL, CO(quick), 0, 1, "false", 0, "calibrate",
     "smaller grids and fewer repetitions (under 2 minutes on 2 cores; collectives to 16 MiB, not 1 GiB)"},
    {"tiny", OPT_BOOL, CO(tiny), 0, 1, "false", 0, "calibrate",
     "the tests' grid: a few seconds, the same code path, rough numbers"},
    {"out", OPT_STR, CO(out), 1, 1024, "", 0, "calibrate", "the profile to write, FILE.json (required)"},
    {"raw", OPT_STR, CO(raw), 1, 1024, "", 0, "calibrate",
     "raw samples and fits, HDF5 (default: --out with .h5 for .json)"},
    {"base-gpu", OPT_STR, CO(base_gpu), 1, 40, "a100-sxm-80gb", 0, "calibrate",
     "built-in GPU profile giving the fields not measured (comm_slowdown with < 3 CPU or < 2 GPU ranks; "
     "on a GPU the GEMM tile and the tf32/bf16 peak ratio: use the GPU's own, e.g. h100-sxm-80gb)"},
    {"base-cluster", OPT_STR, CO(base_cluster), 1, 40, "megascale", 0, "calibrate",
     "built-in cluster profile giving the fields not measured (topology, network; collectives with 1 rank)"},
    {"refit", OPT_STR, CO(refit), 1, 1024, "", 0, "calibrate",
     "measure nothing: fit the samples of a raw file calibrate wrote (RAW.h5) again, on any machine, and write "
     "--out and --raw from them (the base profiles: the file's own unless given)"},
    {"help", OPT_BOOL, CO(help), 0, 1, "false", 0, "calibrate", "show this help"},
};
const opt_table calibrate_opts = {calib_defs, sizeof calib_defs / sizeof calib_defs[0], "calibrate option"};

static int mpi_rank, mpi_size = 1;
static double t_start_s;

static void progress(const char *what)
{
    if (mpi_rank == 0)
        fprintf(stderr, "megasim calibrate: %s (%.1f s)\n", what, calib_now_s() - t_start_s);
}

/* Bad input is reported by the launcher's rank 0 only (before MPI starts). */
static int env_rank(void)
{
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    return r ? atoi(r) : 0;
}

static int fail(const char *msg)
{
    return env_rank() == 0 ? cli_fail("calibrate", msg) : 2;
}

/* --device gpu needs the GPU module (a build with CUDA) and a device at run
 * time (asked of the runtime, not of /dev: a container may show one it
 * cannot use). */
static int gpu_unusable(char *err)
{
    char why[256];
    if (rt_gpu_count(why, sizeof why) > 0)
        return 0;
    snprintf(err, OPT_ERR_LEN, "--device gpu: no usable GPU (%s); use --device cpu", why);
    return -1;
}

/* The base profiles, named by calibrate's own flags when unknown. */
static int base_profiles(const calib_opts_t *o, hw_t *hw, char *err)
{
    if (!hw_resolve(o->base_gpu, o->base_cluster, NULL, hw, err))
        return 0;
    int gpu = hw_builtin_gpu(o->base_gpu, &hw->gpu) != 0;
    return hw_unknown_name(gpu ? "--base-gpu" : "--base-cluster", gpu ? o->base_gpu : o->base_cluster, gpu, "", err);
}

static int check_opts(calib_opts_t *o, char *err)
{
    hw_t probe;
    if (o->device == 1 && !o->refit[0] && gpu_unusable(err))
        return -1;
    if (!o->out[0]) {
        snprintf(err, OPT_ERR_LEN, "--out FILE.json is required (the profile to write)");
        return -1;
    }
    if (!o->raw[0]) {
        size_t n = strlen(o->out);
        int json = n > 5 && !strcmp(o->out + n - 5, ".json");
        snprintf(o->raw, sizeof o->raw, "%.*s.h5", (int)(json ? n - 5 : n), o->out);
    }
    if (base_profiles(o, &probe, err))
        return -1;
    const char *flags[] = {"--out", "--raw"}, *paths[] = {o->out, o->raw};
    if (env_rank() == 0 && out_check_paths(2, flags, paths, err, OPT_ERR_LEN))
        return -1;
    return 0;
}

typedef struct {
    data_t d;
    int it;
} load_ctx_t;

static void load_call(void *p)
{
    load_ctx_t *c = p;
    const int *tok, *tgt;
    data_get(&c->d, c->it++, &tok, &tgt);
}

/* The host stall of a synchronous data pipeline, as the real backend has
 * it (SOP_HOST: real/data.c draws one iteration's samples from the corpus):
 * the default `megasim run` job's batch on one rank. -1 if the job or the
 * corpus cannot be read. */
static double host_stall(const calib_plan_t *p)
{
    char *argv[] = {MEGASIM_EXPERIMENTS_DIR "/real/tiny-gpt.json", "--num-gpus", "1"}, err[OPT_ERR_LEN];
    job_t j;
    hw_t hw;
    load_ctx_t c = {0};
    if (job_parse(&j, 3, argv, NULL, NULL, err) || job_hardware(&j, &hw, err) ||
        job_finalize(&j, hw.cluster.gpus_per_node, err) ||
        data_open(&c.d, MEGASIM_EXPERIMENTS_DIR "/data/corpus.txt", 1, j.micro_batch_size, j.seq_length,
                  j.num_microbatches, 0, 1, 0, 0, err, sizeof err))
        return -1;
    calib_stat_t st = calib_time(load_call, &c, p->warmup, p->reps, p->min_sample_s);
    data_close(&c.d);
    return st.med_s;
}

static void run_compute(const calib_device_t *d, const calib_plan_t *p, calib_result_t *r)
{
    progress(d->gemm_what);
    d->gemm(p, &r->gemm);
    if (d->sustained) {
        progress("a large GEMM back to back for a second: the clock under sustained load");
        d->sustained(p, &r->sustained);
    }
    progress(d->attn_what);
    d->attention(p, &r->attn, &r->attn_unfused);
    progress(d->mem_what);
    d->memory(p, &r->mem);
    progress("host stall of the synchronous data loader (real/data.c)");
    r->host_stall_s = host_stall(p);
    progress("FlashAttention-1 against the flash kernel");
    r->flash1_rel = d->flash1_rel(p);
    if (d->graph_gap_us) {
        progress("the launch gap of a kernel in a CUDA graph");
        r->graph_gap_us = d->graph_gap_us(p);
    }
    if (d->attn_dropout) {
        progress("the flash kernels with dropout against without");
        d->attn_dropout(p, &r->attn_drop);
    }
}

/* The device table; for the GPU every rank takes its GPU first (all or
 * none: rank 0 reports; another rank that fails says why itself when rank
 * 0 did not). NULL with err. */
static const calib_device_t *open_device(int gpu, calib_result_t *r, char *err)
{
    r->device = gpu;
    if (!gpu) {
        r->llc_bytes = calib_dram_cache_bytes(r->level);
        return &calib_cpu_device;
    }
    int bad = calib_gpu_init(err, OPT_ERR_LEN) != 0, any = bad, bad0 = bad;
    if (mpi_size > 1) {
        MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        MPI_Bcast(&bad0, 1, MPI_INT, 0, MPI_COMM_WORLD);
    }
    if (bad && !bad0)
        fprintf(stderr, "megasim calibrate: rank %d: error: %s\n", mpi_rank, err);
    if (any && !bad)
        snprintf(err, OPT_ERR_LEN, "--device gpu: another rank could not take its GPU (its message is above)");
    if (any)
        return NULL;
    if (mpi_rank == 0) {
        calib_gpu_describe(&r->gpu);
        r->llc_bytes = r->gpu.l2_mib * (1 << 20);
    }
    return calib_gpu_table();
}

static void close_device(int gpu)
{
    if (gpu)
        calib_gpu_free();
}

/* Fits, profile, report and files; a refit's provenance says which file's
 * samples it fitted and when and how they were measured (refit_of: that
 * file's provenance, else NULL). */
static int finish(const calib_opts_t *o, calib_result_t *r, const calib_plan_t *p, int argc, char **argv,
                  const cJSON *refit_of)
{
    char err[OPT_ERR_LEN];
    hw_t hw;
    calib_fit_all(r, p);
    if (calib_make_profile(r, o->base_gpu, o->base_cluster, &hw, err))
        return cli_fail("calibrate", err);
    cJSON *prov = calib_provenance(r, o->base_gpu, o->base_cluster, argc, argv);
    if (refit_of) {
        cJSON *rf = cJSON_AddObjectToObject(prov, "refit_of");
        cJSON_AddStringToObject(rf, "raw", o->refit);
        static const char *const keep[] = {"date", "command", "megasim_version", "level"};
        for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(refit_of, keep[i]);
            if (v)
                cJSON_AddItemToObject(rf, keep[i], cJSON_Duplicate(v, 1));
        }
    }
    cJSON *config = opts_to_json(&calibrate_opts, o);
    int rc = calib_write_profile(o->out, &hw, prov, err) || calib_write_h5(o->raw, r, config, prov, err);
    cJSON_Delete(prov), cJSON_Delete(config);
    if (rc)
        return cli_fail("calibrate", err);
    calib_print_report(r, &hw);
    fprintf(stderr, "wrote %s and %s\n", o->out, o->raw);
    return 0;
}

/* MPI_Barrier, but a waiting rank sleeps 1 ms between polls: Open MPI's
 * blocking barrier spins, and a rank spinning through rank 0's compute
 * benchmarks takes a core from it on a host running anything else. */
static void sleepy_barrier(void)
{
    MPI_Request req;
    int done = 0;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    for (MPI_Test(&req, &done, MPI_STATUS_IGNORE); !done; MPI_Test(&req, &done, MPI_STATUS_IGNORE))
        nanosleep(&(struct timespec){0, 1000000}, NULL);
}

/* Whether the command line names a job (a JOB.json, --config, --preset or
 * any job flag but the hardware ones: --gpu, --cluster, --hardware ... say
 * nothing of the model) beside calibrate's own options, whose linear
 * layers the GEMM benchmarks then time too. */
static int names_a_job(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        size_t n = strlen(a);
        if (strncmp(a, "--", 2)) {
            if (n > 5 && !strcmp(a + n - 5, ".json"))
                return 1;
            continue;
        }
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)strcspn(a + 2, "="), a + 2);
        const opt_def *d = opts_find(&calibrate_opts, name);
        if (d) {
            i += d->type != OPT_BOOL && !strchr(a, '='); /* its value */
            continue;
        }
        const opt_def *jd = opts_find(&job_opts, name);
        if ((jd && strcmp(jd->group, "hardware")) || !strcmp(name, "config") || !strcmp(name, "preset"))
            return 1;
    }
    return 0;
}

/* The job's linear layers (calib_job_shapes_t) from its options: the same
 * defaults job_finalize fills (FFN 4h, one query group per head). */
static calib_job_shapes_t job_shapes(const job_t *j)
{
    int h = j->hidden_size, nh = j->num_attention_heads, hs = h / nh;
    int g = j->num_query_groups ? j->num_query_groups : nh, f = j->ffn_hidden_size ? j->ffn_hidden_size : 4 * h;
    calib_job_shapes_t s = {1, h, nh * hs, (nh + 2 * g) * hs, (j->swiglu ? 2 : 1) * f, f,
                            j->micro_batch_size * j->seq_length, j->tp, 0, 0, 0, 1};
    if (j->num_experts > 0) { /* a local expert at the even split, as model/moe.c prices it (moe_rows_local) */
        int etp = j->etp ? j->etp : j->tp, fe = (j->moe_ffn_hidden_size ? j->moe_ffn_hidden_size : f) / etp;
        double rows = (double)s.tokens / j->tp * j->moe_topk * etp; /* SP's share, gathered over ETP */
        s.expert_rows = (int)ceil(rows * (j->ep > 0 ? j->ep : 1) / j->num_experts);
        s.expert_fc1 = (j->swiglu ? 2 : 1) * fe, s.expert_ffn = fe, s.etp = etp;
    }
    return s;
}

static int calibrate_main(calib_opts_t *o, const job_t *job, int argc, char **argv)
{
    calib_plan_t p = calib_plan(o->tiny ? CALIB_TINY : o->quick ? CALIB_QUICK : CALIB_FULL);
    if (names_a_job(argc, argv))
        p.job = job_shapes(job);
    static calib_result_t r;
    char err[OPT_ERR_LEN];
    memset(&r, 0, sizeof r);
    r.job = p.job;
    r.level = p.level;
    calib_describe_host(&r);
    r.host_stall_s = -1;
    r.flash1_rel = -1;
    calib_attn_dropout_table(&r.attn_drop);
    calib_sustained_table(&r.sustained);
    r.nranks = mpi_size, r.ncores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    double t0 = t_start_s = calib_now_s();
    const calib_device_t *d = open_device(o->device, &r, err);
    if (!d) {
        close_device(o->device);
        return mpi_rank == 0 ? cli_fail("calibrate", err) : 2;
    }
    if (mpi_rank == 0)
        run_compute(d, &p, &r);
    if (mpi_size > 1) { /* the other ranks wait here while rank 0 computes */
        sleepy_barrier();
        progress(d->coll_what);
        d->collectives(&p, &r.coll, 1);
        r.have_coll = 1;
        progress("compute beside a collective");
    } else {
        fprintf(stderr, "megasim calibrate: collectives need >= 2 MPI ranks (mpirun -np 2%s megasim calibrate ...); "
                        "skipped, the base profile's collective fields are kept\n",
                o->device ? ", one GPU each," : "");
    }
    calib_overlap_table(&r.overlap);
    if (mpi_size > 1)
        d->comm_slowdown(&p, r.ncores, &r.overlap); /* rows on rank 0; fitted by calib_fit_all */
    close_device(o->device); /* before MPI_Finalize: the NCCL communicator */
    int rc = mpi_rank == 0 ? finish(o, &r, &p, argc, argv, NULL) : 0;
    if (mpi_rank == 0)
        fprintf(stderr, "megasim calibrate: done in %.1f s\n", calib_now_s() - t0);
    calib_result_free(&r);
    return rc;
}

/* Whether option `name` (calibrate's) is on the command line. */
static int flag_given(int argc, char **argv, const char *name)
{
    size_t n = strlen(name);
    for (int i = 1; i < argc; i++)
        if (!strncmp(argv[i], "--", 2) && !strncmp(argv[i] + 2, name, n) && (!argv[i][n + 2] || argv[i][n + 2] == '='))
            return 1;
    return 0;
}

/* --refit: the stored samples fitted again. The base profiles are the
 * file's own unless given; the measuring options (device, level, a job)
 * belong to the measurement and are refused. */
static int refit_main(calib_opts_t *o, int argc, char **argv)
{
    static const char *const measuring[] = {"device", "quick", "tiny"};
    for (size_t i = 0; i < sizeof measuring / sizeof measuring[0]; i++)
        if (flag_given(argc, argv, measuring[i])) {
            char msg[300];
            snprintf(msg, sizeof msg, "--%s with --refit: the file's samples were measured as they were (allowed "
                     "with --refit: --out, --raw, --base-gpu, --base-cluster)", measuring[i]);
            return fail(msg);
        }
    if (names_a_job(argc, argv))
        return fail("a job with --refit: the file's samples hold the job it was calibrated with (allowed with "
                    "--refit: --out, --raw, --base-gpu, --base-cluster)");
    static calib_result_t r;
    cJSON *config, *prov;
    char err[OPT_ERR_LEN];
    if (calib_read_h5(o->refit, &r, &config, &prov, err))
        return fail(err);
    static const char *const bases[][2] = {{"base-gpu", "base_gpu"}, {"base-cluster", "base_cluster"}};
    char *fields[] = {o->base_gpu, o->base_cluster};
    for (int i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(config, bases[i][1]);
        if (!flag_given(argc, argv, bases[i][0]) && cJSON_IsString(v))
            snprintf(fields[i], 40, "%s", v->valuestring);
    }
    o->device = r.device, o->quick = r.level == CALIB_QUICK, o->tiny = r.level == CALIB_TINY;
    calib_plan_t p = calib_plan(r.level);
    p.job = r.job;
    hw_t probe;
    int rc = base_profiles(o, &probe, err) ? fail(err)
                                                                         : finish(o, &r, &p, argc, argv, prov);
    cJSON_Delete(config), cJSON_Delete(prov);
    calib_result_free(&r);
    return rc;
}

int cmd_calibrate(int argc, char **argv)
{
    if (cli_wants_help(argc, argv))
        return 0;
    calib_opts_t o;
    job_t job;
    char err[OPT_ERR_LEN];
    opts_set_defaults(&calibrate_opts, &o);
    if (job_parse(&job, argc - 1, argv + 1, &calibrate_opts, &o, err) || check_opts(&o, err))
        return fail(err);
    if (o.refit[0])
        return refit_main(&o, argc, argv);
    if (names_a_job(argc, argv)) {
        calib_job_shapes_t s = job_shapes(&job);
        if (job.hidden_size % job.num_attention_heads || s.qkv % s.tp || s.attn % s.tp || s.fc1 % s.tp ||
            s.ffn % s.tp) {
            snprintf(err, sizeof err, "the job's linear layers do not split by its tensor-model-parallel-size %d "
                     "(hidden %d over %d heads, QKV %d, FFN %d; allowed: heads dividing hidden, each width a "
                     "multiple of TP)", s.tp, job.hidden_size, job.num_attention_heads, s.qkv, s.fc1);
            return fail(err);
        }
        double flops = 2.0 * s.tokens * s.h * (s.qkv > s.fc1 ? s.qkv : s.fc1) / s.tp;
        if (o.device == 0 && flops > 5e10) { /* the reference GEMM runs ~10 GFLOP/s on one core */
            snprintf(err, sizeof err, "the job's largest linear layer is %.3g GFLOP per GEMM (%d tokens, hidden %d, "
                     "TP %d): too large for the CPU's reference kernels (allowed: up to 50 GFLOP, a few seconds a "
                     "call; name a smaller job, or none)", flops * 1e-9, s.tokens, s.h, s.tp);
            return fail(err);
        }
    }
    int mpi_on = getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE");
    if (mpi_on) {
        cli_mpi_init(NULL, NULL);
        MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
        MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
    }
    int rc = calibrate_main(&o, &job, argc, argv);
    if (mpi_on) {
        MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
        cli_mpi_finalize();
    }
    return mpi_rank ? 0 : rc;
}
