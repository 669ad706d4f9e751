/* cmd_run: `megasim run`, started under mpirun: trains a GPT with real
 * maths on every rank (CPU: reference kernels + MPI; GPU: CUDA kernels +
 * NCCL), playing the very op program the simulator plays, and times every
 * op. The MPI world size is the number of GPUs. Rank 0 reports each step
 * (loss, ms, tokens/s, MFU); --out and --trace write the result file and
 * a Chrome trace in the simulator's schema; --save checkpoints in two
 * stages and --resume continues from the latest complete checkpoint.
 *
 * Bad input is found before any work, identically on every rank: rank 0
 * prints the one message and every rank exits with status 2. */
#include "cmd/cli.h"
#include "model/cost.h"
#include "model/estimate.h"
#include "model/layer.h"
#include "model/layout.h"
#include "model/report.h"
#include "model/workload.h"
#include "real/ckpt.h"
#include "real/comm.h"
#include "real/data.h"
#include "real/exec.h"
#include "real/health.h"
#include "real/gpt.h"
#include "real/run_output.h"
#include "sim/output.h"
#include "cmd/ranks.h"
#include "cmd/replay.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <mpi.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    int train_iters, seed, device, json, save_interval, resume, self_check, help;
    double lr, beta1, beta2, eps, weight_decay, clip_grad, min_lr;
    int warmup, decay_style, decay_iters, on_nan, until_step;
    double heartbeat_interval_s;
    char data[1024], out[1024], trace[1024], save[1024], load[1024], replay[1024], heartbeat[1024];
    char inject[1024], gemm_algos[1024];
} run_opts_t;

enum { DEV_CPU, DEV_GPU };

#define RO(f) offsetof(run_opts_t, f)
static const opt_def run_defs[] = {
    {"train-iters", OPT_INT, RO(train_iters), 1, 1000000, "10", 0, "run", "training iterations to run"},
    {"seed", OPT_INT, RO(seed), 0, 2147483647, "1234", 0, "run",
     "seed of the initial weights and of the batches (the same for every parallel plan)"},
    {"device", OPT_ENUM, RO(device), 0, 0, "cpu", "cpu|gpu", "run",
     "cpu: reference kernels (fp32) and MPI; gpu: CUDA kernels (bf16) and NCCL, one GPU per rank"},
    {"json", OPT_BOOL, RO(json), 0, 1, "false", 0, "run",
     "rank 0 prints one JSON object per step (step, loss, step_time_s, tokens_per_s, mfu, grad_norm, lr, and on "
     "a GPU sm_mhz, power_w, power_capped) instead of text"},
    {"data", OPT_STR, RO(data), 1, 1024, MEGASIM_EXPERIMENTS_DIR "/data/corpus.txt", 0, "run",
     "training text, one token per byte (vocabulary 256)"},
    {"lr", OPT_REAL, RO(lr), 0, 10, "0.002", 0, "run", "learning rate (Megatron's --lr)"},
    {"lr-warmup-iters", OPT_INT, RO(warmup), 0, 1000000, "0", 0, "run", "linear warm-up of the learning rate"},
    {"lr-decay-style", OPT_ENUM, RO(decay_style), 0, 0, "constant", "constant|linear|cosine", "run",
     "learning-rate decay after the warm-up, to --min-lr at --lr-decay-iters (Megatron-LM's; its default is "
     "linear over the whole run, megasim run's constant, since --train-iters counts only this invocation)"},
    {"lr-decay-iters", OPT_INT, RO(decay_iters), 0, 100000000, "0", 0, "run",
     "the optimizer step the decay ends at (needed by linear and cosine; beyond --lr-warmup-iters)"},
    {"min-lr", OPT_REAL, RO(min_lr), 0, 10, "0", 0, "run", "learning rate at and after --lr-decay-iters"},
    {"adam-beta1", OPT_REAL, RO(beta1), 0, 0.999999, "0.9", 0, "run", "Adam/LAMB beta1"},
    {"adam-beta2", OPT_REAL, RO(beta2), 0, 0.999999, "0.95", 0, "run", "Adam/LAMB beta2"},
    {"adam-eps", OPT_REAL, RO(eps), 1e-30, 1, "1e-8", 0, "run", "Adam/LAMB epsilon"},
    {"weight-decay", OPT_REAL, RO(weight_decay), 0, 10, "0.01", 0, "run", "decoupled weight decay"},
    {"clip-grad", OPT_REAL, RO(clip_grad), 0, 1e6, "1.0", 0, "run",
     "clip the gradients to this global L2 norm, as Megatron-LM's --clip-grad (default 1.0); 0: no clipping"},
    {"out", OPT_STR, RO(out), 1, 1024, "", 0, "run",
     "write the measured result file FILE.h5 (docs/schema.md, kind measurement): per-rank accounts, every op "
     "of every iteration, /iterations"},
    {"trace", OPT_STR, RO(trace), 1, 1024, "", 0, "run", "write a Chrome trace FILE.json of every rank's ops"},
    {"save", OPT_STR, RO(save), 1, 1024, "", 0, "run", "checkpoint directory (two-stage: host copy, then a "
     "background write)"},
    {"save-interval", OPT_INT, RO(save_interval), 0, 1000000, "0", 0, "run",
     "checkpoint every N iterations (0: at the end only, when --save is given)"},
    {"load", OPT_STR, RO(load), 1, 1024, "", 0, "run", "checkpoint directory --resume reads (default: --save)"},
    {"until-step", OPT_INT, RO(until_step), 1, 1000000000, "0", OPT_ZERO_OK, "run",
     "train until this step, counted from the start of the run (what megasim supervise restarts toward with "
     "--resume); 0: --train-iters more steps"},
    {"resume", OPT_BOOL, RO(resume), 0, 1, "false", 0, "run",
     "continue from the latest complete checkpoint; its losses equal the uninterrupted run's"},
    {"heartbeat", OPT_STR, RO(heartbeat), 1, 1024, "", 0, "health",
     "heartbeat directory: each rank's position (step, op, communication call) and liveness, read by megasim "
     "supervise and diagnose (default with --save DIR: DIR/heartbeat)"},
    {"heartbeat-interval-s", OPT_REAL, RO(heartbeat_interval_s), 0.01, 3600, "1", 0, "health",
     "liveness beat period, s (positions are written at every op boundary)"},
    {"inject-fault", OPT_STR, RO(inject), 1, 1024, "", 0, "health",
     "plant faults, comma-separated: crash:RANK:STEP, hang:RANK:STEP[:OP], slow:RANK:FACTOR, nan:RANK:STEP, "
     "ckpt:RANK:STEP (killed while writing STEP's checkpoint), badhost:RANK:STEP (crashes at STEP, then its host "
     "fails the self-check), error:RANK:STEP[:OP] (the op fails on that rank alone, as a failed kernel would); each "
     "fires once per --save directory, so a restarted job goes on"},
    {"on-nan", OPT_ENUM, RO(on_nan), 0, 0, "abort", "abort|skip", "health",
     "a NaN or Inf in the gradients (named by rank and step before the optimizer step): stop the run (a "
     "supervisor restarts it from its checkpoint) or skip that step's update"},
    {"self-check", OPT_BOOL, RO(self_check), 0, 1, "false", 0, "health",
     "only check the ranks: their communicators and collectives, and one training step of the job with its "
     "kernels (no checkpoint, heartbeat, fault or output); what megasim supervise runs between restarts"},
    {"gemm-algos", OPT_STR, RO(gemm_algos), 1, 1024, "", 0, "run",
     "directory of cuBLASLt's choice per GEMM problem, a file per rank (DIR/rank-R.txt): read, each problem not "
     "in it tuned when first met (its candidates timed, the fastest kept), written back at the end (--device gpu)"},
    {"replay", OPT_STR, RO(replay), 1, 1024, "", 0, "run",
     "train the job RESULT.h5 records (run --out; or simulate --out) again: its hardware profile and, of a run, "
     "its seed, data, steps and learning-rate schedule, on as many ranks; files and flags apply over them"},
    {"help", OPT_BOOL, RO(help), 0, 1, "false", 0, "run", "show this help"},
};
const opt_table run_opts = {run_defs, sizeof run_defs / sizeof run_defs[0], "run option"};

typedef struct {
    int rank, world;
    job_t job;
    hw_t hw;
    run_opts_t o;
    rt_t *rt;
    comm_t *comm;
    gpt_t m;
    data_t data;
    exec_t x;
    ckpt_t ck;
    char *config;           /* the job's options as JSON: checkpoints must match it */
    inject_t inject[INJ_MAX]; /* --inject-fault */
    double overhead_ns;     /* timing cost per op */
    double comm_init_s;     /* creating the TP, DP, PP and embedding communicators, slowest rank */
    long ops_per_iter;
    double peak_flops, model_flops;
    result_iter_t *iters;
    int niters;
    double ckpt_stage1_s;
    /* memory per rank (bytes): planned, the fullest rank's peak, beyond plan, outside the pools (run_memory) */
    double mem_planned, mem_peak, mem_beyond, mem_outside;
    int host_ranks, host_cores; /* the most crowded host: its ranks, and its cores online */
    double step_s;          /* mean step after the first (mean_step), once training is done */
    kern_clock_sums clock;  /* every rank's NVML reads over the steps after the first (or the only one) */
    double timing_fraction; /* the cost of timing over a step: overhead_ns x ops_per_iter / step_s */
    int failed_alone;       /* this rank's training failed on its own (its peers not told) */
} run_t;

/* One message, on rank 0 only; every rank returns 2. */
static int bad(run_t *R, const char *msg)
{
    if (R->rank == 0)
        fprintf(stderr, "megasim run: error: %s\n", msg);
    return 2;
}

static int parse(run_t *R, int argc, char **argv)
{
    /* The tiny default job comes first: files and flags the user gives
     * override it. The world size is the number of GPUs unless a file or
     * flag gives one, which must then match it. */
    char **av = calloc((size_t)argc + 2, sizeof *av), err[OPT_ERR_LEN];
    if (!av)
        return bad(R, "out of host memory");
    /* --replay RESULT: the recorded job, profile and options instead of
     * the tiny default; its world size stands as if a file had given it. */
    const char *replay = replay_path(argc - 1, argv + 1, &run_opts);
    int n = 0;
    if (!replay)
        av[n++] = MEGASIM_EXPERIMENTS_DIR "/real/tiny-gpt.json";
    for (int i = 1; i < argc; i++)
        av[n++] = argv[i];
    int rc = replay ? replay_parse("run", replay, n, av, &run_opts, &R->o, &R->job, &R->hw, err)
                    : job_parse(&R->job, n, av, &run_opts, &R->o, err);
    free(av);
    if (rc)
        return bad(R, err);
    if (R->job.numerics_flag[0]) {
        snprintf(err, sizeof err, "%s is a Megatron-LM flag that changes the training's maths, which megasim run "
                 "does not implement (predict and simulate accept and ignore it; run's own: --lr, --min-lr, "
                 "--lr-decay-style, --lr-decay-iters, --lr-warmup-iters, --weight-decay, --clip-grad, --adam-beta1, "
                 "--adam-beta2, --adam-eps, --train-iters, --seed, --data)", R->job.numerics_flag);
        return bad(R, err);
    }
    if (gpt_check_switches(&R->job, R->o.device == DEV_GPU, err, sizeof err))
        return bad(R, err);
    if (!replay && !job_given(&R->job, "num-gpus"))
        R->job.num_gpus = R->world;
    if (R->job.num_gpus != R->world) {
        const char *whose = replay && !job_given(&R->job, "num-gpus") ? "the replayed run's" : "a job file or flag";
        const char *or_else = replay ? "give --num-gpus and a plan that divides it"
                                     : "leave num-gpus out: the world size is the number of GPUs";
        snprintf(err, sizeof err, "num-gpus = %d (%s) does not match the MPI world size %d (start with mpirun -np %d, "
                 "or %s)", R->job.num_gpus, whose, R->world, R->job.num_gpus, or_else);
        return bad(R, err);
    }
    if (R->job.padded_vocab_size < 256) {
        snprintf(err, sizeof err, "padded-vocab-size = %d: megasim run's tokens are bytes (0 to 255); allowed: 256 "
                 "or more", R->job.padded_vocab_size);
        return bad(R, err);
    }
    /* A CPU run's MFU is against the checked-in CPU profile, unless given
     * (a replay's is the recorded one). */
    if (!replay && R->o.device == DEV_CPU && !R->job.hardware[0])
        snprintf(R->job.hardware, sizeof R->job.hardware, "%s", MEGASIM_EXPERIMENTS_DIR "/profiles/cpu-ci-2core.json");
    if ((!replay && job_hardware(&R->job, &R->hw, err)) || cli_finalize("run", &R->job, &R->hw, R->rank == 0, err))
        return bad(R, err);
    /* The GPU path emulates FP8 around its bf16 GEMMs (kernels/fp8.cu): its
     * own simulation prices them at the bf16 rate, as what ran. */
    if (R->o.device == DEV_GPU && R->job.fp8_format)
        R->hw.gpu.peak_fp8_tflops = R->hw.gpu.peak_bf16_tflops;
    if (R->job.cuda_graph && exec_graph_rules(&R->job, R->o.device == DEV_GPU, err, sizeof err))
        return bad(R, err);
    if (R->o.resume && !R->o.load[0] && !R->o.save[0])
        return bad(R, "--resume needs --save DIR (or --load DIR): the checkpoint directory to continue from");
    if (R->o.save_interval && !R->o.save[0])
        return bad(R, "--save-interval needs --save DIR");
    if (!R->o.heartbeat[0] && R->o.save[0])
        snprintf(R->o.heartbeat, sizeof R->o.heartbeat, "%.1000s/heartbeat", R->o.save);
    char once_dir[sizeof R->o.save]; /* the run directory: injected faults' markers */
    snprintf(once_dir, sizeof once_dir, "%s", R->o.save);
    if (R->o.self_check) { /* the job's ranks and kernels (heartbeats: who failed it), nothing else */
        R->o.save[0] = R->o.load[0] = R->o.out[0] = R->o.trace[0] = 0;
        R->o.resume = R->o.save_interval = R->o.until_step = 0, R->o.train_iters = 1;
    }
    int ninj = 0;
    if (R->o.inject[0] && inject_parse(R->o.inject, R->world, R->inject, &ninj, err, sizeof err))
        return bad(R, err);
    inject_arm(R->inject, ninj, R->rank, once_dir[0] ? once_dir : NULL, R->o.self_check);
    if (R->o.decay_style != LR_CONSTANT && R->o.decay_iters <= R->o.warmup) {
        char msg[200];
        snprintf(msg, sizeof msg, "--lr-decay-style linear or cosine needs --lr-decay-iters beyond --lr-warmup-iters "
                 "(got %d and %d): the step the decay ends at", R->o.decay_iters, R->o.warmup);
        return bad(R, msg);
    }
    return 0;
}

/* The device memory the model plans for one GPU: everything but the
 * runtime's own reservation (CUDA context, NCCL, cuBLAS), which lives
 * outside the arena. Pipeline transfers get their own pool. */
static void plan(const run_t *R, size_t p[RT_NPOOLS])
{
    memory_t mem;
    job_t j = R->job;
    j.bf16 = R->o.device == DEV_GPU; /* the CPU path stores everything in fp32 */
    workload_memory(&j, &R->hw, &mem);
    p[RT_POOL_MAIN] = (size_t)(mem.total_bytes - mem.runtime_bytes);
    p[RT_POOL_XFER] = 0;
    if (R->job.pp > 1) { /* every transfer of an iteration, freed at its end */
        sched_iter_t it;
        sched_op_t o;
        long n = 0;
        sched_iter_init(&it, &R->job, layout_pos(layout_of(&R->job), R->rank).stage); /* comm_groups_init's */
        while (sched_next(&it, &o))
            n += o.kind == SOP_XFER ? o.nx : 0;
        p[RT_POOL_XFER] = (size_t)(n * layer_p2p_bytes(&R->job) * (R->o.device == DEV_CPU ? 2 : 1) + 65536);
    }
}

static int setup(run_t *R)
{
    char err[OPT_ERR_LEN] = "";
    size_t p[RT_NPOOLS];
    int rc, local, nlocal;
    ranks_on_node(&local, &nlocal);
    if (R->o.device == DEV_GPU) {
        char why[256] = "";
        int n = rt_gpu_count(why, sizeof why);
        if (ranks_any_failed(n > 0 ? 0 : -1)) {
            snprintf(err, sizeof err, "--device gpu: no usable GPU on every rank (%s; allowed: --device cpu)",
                     n > 0 ? "another rank has none" : why);
            return bad(R, err);
        }
        /* NCCL refuses two ranks of one communicator on one GPU, and only at init. */
        if (ranks_any_failed(nlocal > n ? -1 : 0)) {
            snprintf(err, sizeof err, "--device gpu: a node has more ranks than GPUs (rank 0's node: %d ranks, %d "
                     "GPU(s); allowed: one rank per GPU, at most %d ranks per node)", nlocal, n, n);
            return bad(R, err);
        }
        R->comm = NULL;
        plan(R, p);
        rc = rt_gpu_create(&R->rt, local, p, err, sizeof err);
    } else {
        plan(R, p);
        /* A job this machine cannot hold is bad input, not an allocation failure mid-way. */
        double need = (double)p[RT_POOL_MAIN] + p[RT_POOL_XFER], have = (double)sysconf(_SC_PHYS_PAGES) *
                                                                         sysconf(_SC_PAGESIZE);
        if (need * nlocal > have) {
            snprintf(err, sizeof err, "the job needs at least %.1f GiB per rank by the memory model, %d rank(s) on "
                     "this machine have %.1f GiB in all (allowed: a job whose ranks fit in host memory; shrink the "
                     "model or batch, or add ranks on other machines)", need / 1073741824.0, nlocal, have / 1073741824.0);
            return bad(R, err);
        }
        rc = rt_cpu_create(&R->rt, p, err, sizeof err);
    }
    if (ranks_first_failure(rc, err))
        return bad(R, err[0] ? err : "a rank could not create its runtime");
    /* MegaScale's collective-group initialisation (section 3.5 of the paper:
     * 1,047 s on 2,048 GPUs before its fixes, under 5 s after), measured:
     * every group at once, from a common start, to the slowest rank. */
    MPI_Barrier(MPI_COMM_WORLD);
    long long t0 = rt_now_ns();
    comm_plan_t plan = {R->job.tp, R->job.cp, R->job.dp, R->job.pp, R->job.num_experts > 0 ? R->job.ep : 0,
                        R->job.etp, R->job.tp_pp_dp_mapping};
    rc = R->o.device == DEV_GPU ? comm_nccl_create(&R->comm, R->rt, &plan, err, sizeof err)
                                : comm_mpi_create(&R->comm, R->rt, &plan, err, sizeof err);
    R->comm_init_s = (double)(rt_now_ns() - t0) * 1e-9;
    MPI_Allreduce(MPI_IN_PLACE, &R->comm_init_s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (ranks_first_failure(rc, err))
        return bad(R, err[0] ? err : "a rank could not create its communicators");
    /* Heartbeats: the position of every op and communication call. */
    if (R->o.heartbeat[0]) {
        rc = health_open(R->o.heartbeat, R->rank, R->world, &plan, R->comm, R->o.heartbeat_interval_s, err,
                         sizeof err);
        comm_t *w = rc ? NULL : health_wrap_comm(R->comm);
        if (!rc && !w)
            rc = -1, snprintf(err, sizeof err, "out of host memory for the heartbeat");
        if (w)
            R->comm = w;
        if (ranks_first_failure(rc, err))
            return bad(R, err);
    }
    rc = gpt_init(&R->m, &R->job, R->rt, R->comm, err, sizeof err);
    if (ranks_first_failure(rc, err))
        return bad(R, err[0] ? err : "a rank could not lay out its model");
    rc = data_open(&R->data, R->o.data, (unsigned long long)R->o.seed, R->job.micro_batch_size, R->job.seq_length,
                   R->job.num_microbatches, R->comm->data_i, R->job.cp, R->comm->cp_i,
                   R->job.async_data_loader, err, sizeof err);
    if (ranks_first_failure(rc, err))
        return bad(R, err[0] ? err : "a rank could not open the data");
    exec_hparams_t hp = {(float)R->o.lr, (float)R->o.beta1, (float)R->o.beta2, (float)R->o.eps,
                         (float)R->o.weight_decay, R->o.warmup, (float)R->o.clip_grad, R->o.decay_style,
                         R->o.decay_iters, (float)R->o.min_lr, R->o.on_nan};
    rc = exec_init(&R->x, &R->job, R->rt, R->comm, &R->m, &R->data, &hp, (unsigned long long)R->o.seed, err, sizeof err);
    if (ranks_first_failure(rc, err))
        return bad(R, err[0] ? err : "a rank could not set up its executor");
    R->x.graphs = R->job.cuda_graph;
    /* What a checkpoint must match to resume as if uninterrupted: the job,
     * and the seed and data that draw its batches and dropout masks. */
    cJSON *cj = cJSON_CreateObject();
    cJSON_AddItemToObject(cj, "job", opts_to_json(&job_opts, &R->job));
    cJSON_AddNumberToObject(cj, "seed", R->o.seed);
    cJSON_AddStringToObject(cj, "data", R->o.data);
    R->config = cJSON_PrintUnformatted(cj);
    cJSON_Delete(cj);
    return 0;
}

static int resume(run_t *R)
{
    char err[OPT_ERR_LEN] = "";
    float *state = NULL;
    int step = 0;
    const char *dir = R->o.load[0] ? R->o.load : R->o.save;
    int rc = ckpt_load(dir, R->rank, R->world, R->config, R->x.nshard, R->m.fp8_sites, &state, &step, err,
                       sizeof err);
    if (!rc)
        rc = exec_state_set(&R->x, state, step);
    free(state);
    if (ranks_first_failure(rc, err))
        return bad(R, err[0] ? err : "a rank could not restore its checkpoint");
    if (R->rank == 0 && !R->o.json)
        printf("resumed from %s at step %d\n", dir, step);
    return 0;
}

/* The cost of timing: the marks of one op, repeated, on the compute stream. */
static void measure_overhead(run_t *R)
{
    enum { REPS = 2000 };
    rt_times_t *t = calloc(REPS, sizeof *t);
    if (!t)
        return;
    R->rt->op->iter_begin(R->rt);
    int64_t t0 = rt_now_ns();
    for (int i = 0; i < REPS; i++) {
        R->rt->op->mark_ready(R->rt, STREAM_COMPUTE, &t[i]);
        R->rt->op->mark_start(R->rt, STREAM_COMPUTE, &t[i]);
        R->rt->op->mark_end(R->rt, STREAM_COMPUTE, &t[i]);
    }
    R->rt->op->iter_end(R->rt);
    R->overhead_ns = (double)(rt_now_ns() - t0) / REPS;
    free(t);
    R->ops_per_iter = sched_program_ops(&R->job, R->comm->stage);
}

static void report_step(run_t *R, const result_iter_t *s)
{
    if (R->rank == 0)
        run_print_step(s, R->o.json, R->rt->kind == RT_GPU, R->job.num_experts > 0);
}

static int checkpoint(run_t *R, int step)
{
    char err[OPT_ERR_LEN] = "";
    int rc = ckpt_finish(&R->ck, err, sizeof err); /* the previous one is complete */
    if (ranks_first_failure(rc, err))
        return bad(R, err[0] ? err : "a checkpoint write failed");
    int64_t t0 = rt_now_ns();
    float *buf = ckpt_buffer(&R->ck, R->x.nshard, R->m.fp8_sites);
    rc = !buf || exec_state_get(&R->x, buf);
    R->ckpt_stage1_s = (rt_now_ns() - t0) * 1e-9;
    if (!rc)
        rc = ckpt_start(&R->ck, step, err, sizeof err);
    if (ranks_first_failure(rc, err))
        return bad(R, err[0] ? err : "a rank could not start its checkpoint");
    return 0;
}

/* The NVML reads of every rank's GPU since *before (rt.h, rt->clock),
 * summed over the ranks; *before moves on to *now. */
static kern_clock_sums step_clock(kern_clock_sums *before, const kern_clock_sums *now)
{
    double mine[4] = {now->mhz_sum - before->mhz_sum, now->watts_sum - before->watts_sum,
                      (double)(now->reads - before->reads), (double)(now->capped - before->capped)}, all[4];
    MPI_Allreduce(mine, all, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    *before = *now;
    return (kern_clock_sums){all[0], all[1], (long)all[2], (long)all[3]};
}

static int train(run_t *R)
{
    int first = R->x.iter, last = first + R->o.train_iters;
    R->iters = calloc((size_t)R->o.train_iters, sizeof *R->iters);
    if (!R->iters)
        return bad(R, "out of host memory");
    double tokens = (double)R->job.global_batch_size * R->job.seq_length;
    kern_clock_sums before = R->rt->clock;
    for (int it = first; it < last; it++) {
        double loss = 0, t = 0, tmax = 0;
        health_outside(0);
        int rc = exec_iteration(&R->x, &loss, &t);
        health_outside(1);
        /* A rank's own failure, its reason printed: its peers may wait for
         * it inside the iteration, where an agreement would wait too. So it
         * stops alone (cmd_run exits at once; mpirun then stops the rest),
         * unless every rank stopped at the same check (a NaN, named by all). */
        if (rc)
            return R->failed_alone = R->x.nan_rank < 0, 2;
        MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        kern_clock_sums step = step_clock(&before, &R->rt->clock);
        if (it > first || R->o.train_iters == 1) /* as mean_step: the first step is warm-up when there are more */
            R->clock.mhz_sum += step.mhz_sum, R->clock.watts_sum += step.watts_sum, R->clock.reads += step.reads,
                R->clock.capped += step.capped;
        double mhz, watts, capped;
        kern_clock_means(&step, &mhz, &watts, &capped);
        health_step_done(it + 1, tmax);
        if (R->x.nan_rank >= 0 && R->rank == 0)
            fprintf(stderr, "megasim run: step %d: a NaN or Inf in rank %d's gradients (the gradient-norm check); "
                    "the step's update was skipped (--on-nan skip)\n", it + 1, R->x.nan_rank);
        result_iter_t *s = &R->iters[R->niters++];
        *s = (result_iter_t){it + 1, loss, tmax, tokens / tmax, R->model_flops / (tmax * R->job.num_gpus * R->peak_flops),
                          R->x.grad_norm, R->x.lr, mhz, watts, capped, R->x.moe_dropped, R->x.moe_aux,
                          R->x.moe_load_cv, R->x.moe_drop_sig, R->job.cuda_graph ? R->rt->graph_launches : -1};
        report_step(R, s);
        if (!isfinite(loss))
            return bad(R, "the loss is not finite; lower --lr");
        if (R->o.save[0] && R->o.save_interval && (it + 1) % R->o.save_interval == 0 && checkpoint(R, it + 1))
            return 2;
    }
    if (R->o.save[0] && (!R->o.save_interval || last % R->o.save_interval) && checkpoint(R, last))
        return 2;
    char err[OPT_ERR_LEN] = "";
    if (ranks_first_failure(ckpt_finish(&R->ck, err, sizeof err), err))
        return bad(R, err[0] ? err : "a checkpoint write failed");
    return 0;
}

/* The memory every rank used, against its plan: the fullest rank's. */
static void run_memory(run_t *R)
{
    const rt_t *rt = R->rt;
    double mine[3] = {(double)(rt->pool[RT_POOL_MAIN].peak + rt->pool[RT_POOL_XFER].peak),
                      (double)(rt->pool[RT_POOL_MAIN].extra_peak + rt->pool[RT_POOL_XFER].extra_peak),
                      (double)rt->outside_peak}, most[3];
    MPI_Allreduce(mine, most, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    R->mem_planned = (double)(rt->pool[RT_POOL_MAIN].size + rt->pool[RT_POOL_XFER].size);
    R->mem_peak = most[0], R->mem_beyond = most[1], R->mem_outside = most[2];
}

/* Ranks on the most crowded host and its cores (compare: ranks beyond the
 * cores time-share them, which the model does not price). Collective. */
static void host_share(run_t *R)
{
    int me, mine[2] = {0, -(int)sysconf(_SC_NPROCESSORS_ONLN)}, most[2];
    ranks_on_node(&me, &mine[0]);
    MPI_Allreduce(mine, most, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    R->host_ranks = most[0], R->host_cores = -most[1]; /* the fewest cores any rank's host has */
}

static cJSON *run_config(const run_t *R)
{
    cJSON *c = opts_to_json(&run_opts, &R->o);
    cJSON_AddNumberToObject(c, "world_size", R->world);
    cJSON_AddNumberToObject(c, "host_ranks", R->host_ranks);
    cJSON_AddNumberToObject(c, "host_cores", R->host_cores);
    cJSON_AddStringToObject(c, "device_name", R->rt->device_name);
    cJSON_AddNumberToObject(c, "comm_init_s", R->comm_init_s); /* measured: communicator creation, slowest rank */
    /* measured: memory per rank (rank 0's plan; the fullest rank's use), and the cost of timing */
    cJSON_AddNumberToObject(c, "memory_planned_bytes", R->mem_planned);
    cJSON_AddNumberToObject(c, "memory_peak_bytes", R->mem_peak);
    cJSON_AddNumberToObject(c, "memory_beyond_plan_bytes", R->mem_beyond);
    cJSON_AddNumberToObject(c, "memory_outside_pools_bytes", R->mem_outside);
    cJSON_AddNumberToObject(c, "timing_overhead_ns_per_op", R->overhead_ns);
    cJSON_AddNumberToObject(c, "timing_overhead_fraction", R->timing_fraction);
    /* measured: the GPUs' SM clock and power over the steps after the first (NVML; 0 reads: not read) */
    double mhz, watts, capped;
    kern_clock_means(&R->clock, &mhz, &watts, &capped);
    cJSON_AddNumberToObject(c, "clock_reads", (double)R->clock.reads);
    cJSON_AddNumberToObject(c, "sm_clock_mhz", mhz);
    cJSON_AddNumberToObject(c, "power_w", watts);
    cJSON_AddNumberToObject(c, "power_capped_fraction", capped);
    return c;
}

/* Mean step time over the measured steps, the first left out (warm-up)
 * when there are more. */
static double mean_step(const run_t *R)
{
    int a = R->niters > 1 ? 1 : 0;
    double s = 0;
    for (int i = a; i < R->niters; i++)
        s += R->iters[i].step_time_s;
    return s / (R->niters - a);
}

static int write_outputs(run_t *R, result_t *r)
{
    char err[OPT_ERR_LEN] = "";
    int rc = 0;
    cJSON *c = R->rank == 0 && (R->o.out[0] || R->o.trace[0]) ? run_config(R) : NULL;
    if (R->rank == 0 && R->o.out[0]) {
        estimate_t e;
        estimate_job(&R->job, &R->hw, &e);
        rc = sim_write_h5(R->o.out, &R->job, &R->hw, c, &e, r, err, sizeof err);
    }
    if (!rc && R->rank == 0 && R->o.trace[0])
        rc = run_write_trace(R->o.trace, &R->job, &R->hw, c, r, R->x.iter_t0_ns, err, sizeof err);
    cJSON_Delete(c);
    if (ranks_first_failure(rc, err))
        return bad(R, err[0] ? err : "writing the outputs failed");
    return 0;
}

static void report_end(run_t *R, const result_t *r)
{
    double t = R->step_s;
    if (R->rank != 0 || R->o.json)
        return;
    printf("\n%s, %d rank(s): TP %d x CP %d x PP %d (%d chunk(s)) x DP %d, %d micro-batches of %d x %d tokens\n",
           R->rt->device_name, R->world, R->job.tp, R->job.cp, R->job.pp, R->job.vpp, R->job.dp, R->job.num_microbatches,
           R->job.micro_batch_size, R->job.seq_length);
    double mfu = R->model_flops / (t * R->job.num_gpus * R->peak_flops);
    const char *over = R->o.train_iters > 1 ? "steps after the first" : "the only step"; /* what the means are over */
    printf("mean step %.2f ms (%s) | %.0f tokens/s | MFU %.2f%% of %.3g TFLOP/s per GPU\n", t * 1e3, over,
           (double)R->job.global_batch_size * R->job.seq_length / t, 100 * mfu, R->peak_flops * 1e-12);
    if (mfu > 1) /* a peak below what ran: the profile is another machine's (the checked-in CPU one by default) */
        printf("note: MFU above 100%%: the peak is %s's, below this machine's; calibrate this one (megasim calibrate "
               "--device %s) and pass it with --hardware\n", R->job.hardware[0] ? R->job.hardware : R->hw.gpu.name,
               R->rt->kind == RT_CPU ? "cpu" : "gpu");
    printf("memory per rank: planned %.2f MiB (memory model), used at peak %.2f MiB (the fullest rank)\n",
           R->mem_planned / 1048576.0, R->mem_peak / 1048576.0);
    if (R->mem_beyond > 0)
        printf("  of which %.2f MiB beyond the plan, served outside the arena\n", R->mem_beyond / 1048576.0);
    if (R->mem_outside > 0)
        printf("  and %.2f MiB of attention scratch outside the pools (working memory the model does not plan)\n",
               R->mem_outside / 1048576.0);
    printf("timing: %.0f ns per op, %ld ops per step on rank 0: %.3f%% of the step", R->overhead_ns,
           R->ops_per_iter, 100 * R->timing_fraction);
    printf(R->job.cuda_graph ? "; %ld passes ran as CUDA graphs on rank 0 (%ld instantiated)\n" : "\n",
           R->rt->graph_launches, R->rt->graph_builds);
    double mhz, watts, capped;
    kern_clock_means(&R->clock, &mhz, &watts, &capped);
    if (R->rt->kind == RT_GPU && R->clock.reads)
        printf("GPU clock: SM %.0f MHz, %.0f W per GPU, at the power cap in %.0f%% of %ld NVML reads (every %d ms on "
               "every rank, %s)\n", mhz, watts, 100 * capped, R->clock.reads, RT_CLOCK_READ_MS, over);
    else if (R->rt->kind == RT_GPU)
        printf("GPU clock: not read (NVML, libnvidia-ml.so.1, did not answer)\n");
    printf("communicators: TP, CP, DP (x CP), PP, embedding%s groups (%s) created in %.3f s (slowest rank)\n",
           R->job.num_experts > 0 ? ", EP, EDP and ETP" : " and", R->rt->kind == RT_CPU ? "MPI_Comm_split"
           : "ncclCommInitRank, bootstrapped over MPI", R->comm_init_s);
    if (R->rt->kind == RT_CPU && R->host_ranks > R->host_cores) /* host_share's: the most crowded host */
        printf("note: %d ranks share %d cores here, so each rank ran on a fraction of a core; a CPU profile prices "
               "one core per rank, and compare prices the sharing (%d ranks a host or fewer compare without it)\n",
               R->host_ranks, R->host_cores, R->host_cores);
    if (R->o.save[0])
        printf("checkpoint: %.3f s to host memory (training waits), %.3f s written in the background\n",
               R->ckpt_stage1_s, R->ck.stage2_s);
    if (r->ntimeline)
        printf("%ld op records gathered%s%s%s%s\n", r->ntimeline, R->o.out[0] ? "; wrote " : "", R->o.out,
               R->o.trace[0] ? " and " : "", R->o.trace);
}

/* --gemm-algos: cuBLASLt's choices read (write 0) or written (write 1). */
static int gemm_algos(run_t *R, int write)
{
    char err[OPT_ERR_LEN] = "";
    int rc = R->rt->op->gemm_algos ? R->rt->op->gemm_algos(R->rt, R->o.gemm_algos, R->rank, write, err, sizeof err)
                                   : (snprintf(err, sizeof err, "--gemm-algos %s: the choices are cuBLASLt's "
                                               "(allowed with --device gpu)", R->o.gemm_algos), -1);
    return ranks_first_failure(rc, err) ? bad(R, err) : 0;
}

static int run(run_t *R, int argc, char **argv)
{
    int rc = parse(R, argc, argv);
    if (rc)
        return rc;
    /* Outputs checked before training, so a bad path neither wastes the
     * run nor leaves one file written and the other not. */
    char err[OPT_ERR_LEN] = "";
    const char *flags[] = {"--out", "--trace"}, *paths[] = {R->o.out, R->o.trace};
    if (ranks_any_failed(R->rank == 0 && out_check_paths(2, flags, paths, err, sizeof err)))
        return bad(R, err);
    if ((rc = setup(R)) || (R->o.gemm_algos[0] && (rc = gemm_algos(R, 0))))
        return rc;
    if (R->o.save[0] && ranks_first_failure(ckpt_init(&R->ck, R->o.save, R->rank, R->world, R->config, err, sizeof err), err))
        return bad(R, err);
    if (R->o.resume && (rc = resume(R)))
        return rc;
    if (R->o.until_step && R->o.until_step <= R->x.iter) {
        if (R->rank == 0)
            printf("step %d reached (--until-step %d): nothing to train\n", R->x.iter, R->o.until_step);
        return 0;
    }
    if (R->o.until_step)
        R->o.train_iters = R->o.until_step - R->x.iter;
    health_target(R->x.iter + R->o.train_iters);
    workload_t w;
    workload_compute(&R->job, &w);
    R->model_flops = w.model_flops_per_iter;
    R->peak_flops = cost_peak_flops(&R->hw, &R->job);
    measure_overhead(R);
    if (R->o.self_check)
        inject_self_check(); /* --inject-fault badhost */
    if ((rc = train(R)) || (R->o.gemm_algos[0] && (rc = gemm_algos(R, 1))))
        return rc;
    if (R->o.self_check) {
        if (R->rank == 0)
            printf("self-check passed: %d ranks, their collectives and one step of the job\n", R->world);
        return 0;
    }
    result_t r;
    if (ranks_first_failure(run_gather(&R->x, R->x.iter - 1, &r, err, sizeof err), err))
        return bad(R, err);
    r.kind = "measurement", r.iters = R->iters, r.niters = R->niters;
    R->step_s = mean_step(R);
    R->timing_fraction = R->overhead_ns * R->ops_per_iter / (R->step_s * 1e9);
    r.iteration_ns = (int64_t)(R->step_s * 1e9);
    r.events = R->x.nrecs;
    run_memory(R);
    host_share(R);
    r.peak_memory_bytes = R->mem_peak;
    rc = write_outputs(R, &r);
    if (!rc)
        report_end(R, &r);
    r.iters = NULL;
    result_free(&r);
    return rc;
}

static void teardown(run_t *R)
{
    ckpt_free(&R->ck);
    exec_free(&R->x);
    data_close(&R->data);
    gpt_free(&R->m);
    if (R->comm)
        R->comm->op->destroy(R->comm);
    if (R->rt)
        R->rt->op->destroy(R->rt);
    free(R->iters);
    free(R->config);
}

int cmd_run(int argc, char **argv)
{
    if (cli_wants_help(argc, argv))
        return 0;
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited && cli_mpi_init(&argc, &argv) != MPI_SUCCESS) {
        fprintf(stderr, "megasim run: error: MPI_Init failed\n");
        return 2;
    }
    run_t *R = calloc(1, sizeof *R);
    if (!R) {
        cli_mpi_finalize();
        return 2;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &R->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &R->world);
    int rc = run(R, argc, argv);
    health_close(rc ? HB_FAILED : HB_DONE);
    if (rc && R->failed_alone && R->world > 1) { /* its peers may wait for it in a collective, where */
        fflush(stdout), fflush(stderr);             /* MPI_Finalize would too: a non-zero exit has mpirun */
        _exit(rc);                                  /* stop them */
    }
    teardown(R);
    free(R);
    cli_mpi_finalize();
    return rc;
}
