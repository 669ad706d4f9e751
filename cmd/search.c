/* cmd_search: `megasim search`: the best parallel plans for one model on
 * one cluster. Enumerates and ranks every plan with the closed form
 * (model/search.h), split over MPI ranks when launched by mpirun (the same
 * answer as one process: rows are gathered and ranked on rank 0 in index
 * order), re-ranks the best K with the folded simulator, and writes the top
 * N as a table or JSON, every evaluated plan as CSV and HDF5, and a gnuplot
 * figure of MFU against memory per GPU with the Pareto frontier. */
#define _POSIX_C_SOURCE 200809L /* fileno, popen */
#include "cmd/cli.h"
#include "model/report.h"
#include "model/search.h"
#include "model/split.h"
#include "real/rt.h"
#include "sim/engine.h"
#include "sim/out.h"
#include "sim/output.h"
#include "cmd/replay.h"

#include <cjson/cJSON.h>
#include <hdf5.h>
#include <math.h>
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef MEGASIM_PLOTS_DIR
#define MEGASIM_PLOTS_DIR "plots"
#endif

#define GIB 1073741824.0

typedef struct {
    int top, rerank, min_batch, max_batch, batch_step, json, help;
    double mem_limit_gib;
    char out[1024], csv[1024], plot[1024], replay[1024];
} search_opts_t;

#define SO(f) offsetof(search_opts_t, f)
static const opt_def search_defs[] = {
    {"top", OPT_INT, SO(top), 1, 1000000, "10", 0, "search", "plans to print (table or --json)"},
    {"rerank", OPT_INT, SO(rerank), 0, 10000, "10", 0, "search",
     "best plans of the closed form re-ranked by the folded simulator (0 = none)"},
    {"min-batch", OPT_INT, SO(min_batch), 0, 16777216, "0", 0, "search",
     "search global batch sizes from this (0 = the job's --global-batch-size only)"},
    {"max-batch", OPT_INT, SO(max_batch), 0, 16777216, "0", 0, "search", "largest global batch searched (0 = --min-batch)"},
    {"batch-step", OPT_INT, SO(batch_step), 0, 16777216, "0", 0, "search",
     "step of the batch range (0 = --min-batch: min, 2 min, 3 min, ...)"},
    {"memory-limit-gib", OPT_REAL, SO(mem_limit_gib), 0, 1e6, "0", 0, "search",
     "reject plans whose peak memory per GPU exceeds this (0 = the GPU's capacity)"},
    {"out", OPT_STR, SO(out), 1, 1024, "", 0, "search", "write every evaluated plan to FILE.h5 (HDF5, /plans)"},
    {"csv", OPT_STR, SO(csv), 1, 1024, "", 0, "search", "write every evaluated plan to FILE.csv"},
    {"plot", OPT_STR, SO(plot), 1, 1024, "", 0, "search",
     "draw FILE.png: predicted MFU vs memory per GPU, frontier marked (gnuplot; data in FILE.png.dat)"},
    {"json", OPT_BOOL, SO(json), 0, 1, "false", 0, "search", "print the top plans as one JSON array"},
    {"replay", OPT_STR, SO(replay), 1, 1024, "", 0, "search",
     "search plans for the job and hardware profile recorded in RESULT (.h5 from simulate or run --out, or a "
     "--json output or --trace file); its plan is searched, unless a file or flag fixes a field"},
    {"help", OPT_BOOL, SO(help), 0, 1, "false", 0, "search", "show this help"},
};
const opt_table search_opts = {search_defs, sizeof search_defs / sizeof search_defs[0], "search option"};

/* The MPI world (cli_mpi_begin): one process without mpirun. */
static cli_mpi_t mpi = {0, 0, 1};


/* Wall seconds on the runtimes' monotonic clock. */
static double now_s(void) { return rt_now_ns() * 1e-9; }

/* The plan fields a job file or flag can fix (one candidate each), and the
 * search_fixed_t switch each sets; the default and the preset's bundle
 * leave them searched. */
static const struct { const char *name; size_t off; } plan_fields[] = {
#define PF(name, f) {name, offsetof(search_fixed_t, f)}
    PF("tensor-model-parallel-size", tp), PF("pipeline-model-parallel-size", pp),
    PF("context-parallel-size", cp), PF("cp-comm-type", cp), PF("expert-model-parallel-size", ep),
    PF("expert-tensor-parallel-size", ep),
    PF("num-layers-per-virtual-pipeline-stage", lpv), PF("micro-batch-size", mb), PF("sequence-parallel", sp),
    PF("zero-stage", zero), PF("use-distributed-optimizer", zero), PF("recompute-granularity", recompute),
    PF("tp-comm-overlap", ovl), PF("pp-comm-overlap", ovl), PF("overlap-grad-reduce", ovl),
    PF("overlap-param-gather", ovl),
#undef PF
};
#define NPLAN_FIELDS (sizeof plan_fields / sizeof plan_fields[0])

static void fixed_fields(const job_t *b, search_fixed_t *f)
{
    memset(f, 0, sizeof *f);
    for (size_t i = 0; i < NPLAN_FIELDS; i++)
        *(int *)((char *)f + plan_fields[i].off) |= job_given(b, plan_fields[i].name);
}

/* The search's options and the plan fields held fixed: the "search"
 * section of the configuration written into every output. */
static cJSON *search_section(const search_opts_t *so, const search_space_t *s)
{
    cJSON *o = opts_to_json(&search_opts, so);
    cJSON *fx = cJSON_AddArrayToObject(o, "fixed_plan_fields");
    for (size_t i = 0; i < NPLAN_FIELDS; i++)
        if (job_given(&s->base, plan_fields[i].name))
            cJSON_AddItemToArray(fx, cJSON_CreateString(plan_fields[i].name));
    return o;
}

/* ---- progress (rank 0, stderr) ---------------------------------------- */

typedef struct {
    double t0, last;
    int tty, last_decile;
} progress_t;

/* Silent for the first second, then a bar on a terminal, else a line per
 * tenth done. */
static void progress(progress_t *p, long long done, long long total)
{
    double t = now_s();
    if (mpi.rank || t - p->t0 < 1.0)
        return;
    if (p->tty && t - p->last >= 0.1) {
        int w = (int)(40.0 * done / total);
        fprintf(stderr, "\r[%-40.*s] %3d%% %.1f s", w, "########################################",
                (int)(100.0 * done / total), t - p->t0);
        p->last = t;
    } else if (!p->tty && (int)(10 * done / total) > p->last_decile) {
        p->last_decile = (int)(10 * done / total);
        fprintf(stderr, "megasim search: %d%% of this rank's plans, %.1f s\n", 10 * p->last_decile, t - p->t0);
    }
}

/* ---- evaluation and the MPI split ------------------------------------- */

typedef struct {
    search_row_t *rows; /* SEARCH_OK and SEARCH_REJ_MEMORY rows, index order */
    long long n;
    long long reasons[SEARCH_NREASONS];
} evaluated_t;

/* Plans rank, rank + size, ... (strided, so every rank gets a mix). */
static int evaluate_share(const search_space_t *s, evaluated_t *ev)
{
    long long mine = (s->total - mpi.rank + mpi.size - 1) / mpi.size;
    ev->rows = malloc(sizeof *ev->rows * (mine > 0 ? mine : 1));
    if (!ev->rows)
        return -1;
    progress_t p = {.t0 = now_s(), .tty = isatty(fileno(stderr))};
    job_t job;
    for (long long i = mpi.rank, k = 0; i < s->total; i += mpi.size, k++) {
        search_row_t r;
        int why = search_eval(s, i, &r, &job, NULL);
        ev->reasons[why]++;
        if (why == SEARCH_OK || why == SEARCH_REJ_MEMORY)
            ev->rows[ev->n++] = r;
        if ((k & 255) == 0)
            progress(&p, k, mine);
    }
    if (p.tty && now_s() - p.t0 >= 1.0 && !mpi.rank)
        fprintf(stderr, "\n");
    return 0;
}

static int by_index(const void *pa, const void *pb)
{
    const search_row_t *a = pa, *b = pb;
    return (a->index > b->index) - (a->index < b->index);
}

/* Rank 0 receives every rank's rows and counts, in index order. */
static int gather(evaluated_t *ev)
{
    if (!mpi.on)
        return 0;
    long long sum[SEARCH_NREASONS];
    MPI_Reduce(ev->reasons, sum, SEARCH_NREASONS, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    int bytes = (int)(ev->n * sizeof(search_row_t)), *counts = NULL, *displs = NULL;
    char *all = NULL;
    if (!mpi.rank) {
        counts = calloc(mpi.size, sizeof *counts), displs = calloc(mpi.size, sizeof *displs);
        if (!counts || !displs)
            MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Gather(&bytes, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
    long long total = 0;
    for (int r = 0; !mpi.rank && r < mpi.size; r++)
        displs[r] = (int)total, total += counts[r];
    if (!mpi.rank && !(all = malloc(total ? total : 1)))
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Gatherv(ev->rows, bytes, MPI_BYTE, all, counts, displs, MPI_BYTE, 0, MPI_COMM_WORLD);
    free(counts);
    free(displs);
    if (mpi.rank)
        return 0;
    free(ev->rows);
    ev->rows = (search_row_t *)all;
    ev->n = total / (long long)sizeof(search_row_t);
    memcpy(ev->reasons, sum, sizeof sum);
    qsort(ev->rows, ev->n, sizeof *ev->rows, by_index);
    return 0;
}

/* ---- ranking ---------------------------------------------------------- */

typedef struct {
    search_row_t row;
    double sim_mfu, sim_iteration_s; /* NaN when not simulated */
    int frontier;
} ranked_t;

static int by_sim(const void *pa, const void *pb)
{
    const ranked_t *a = pa, *b = pb;
    if (a->sim_mfu != b->sim_mfu)
        return a->sim_mfu > b->sim_mfu ? -1 : 1;
    return search_row_cmp(&a->row, &b->row);
}

/* The best K by the closed form, re-ordered by the folded simulator. A
 * plan the simulator cannot play keeps its closed-form place (NaN MFU
 * sorts it after the simulated ones). */
static void rerank(const search_space_t *s, ranked_t *rk, int k)
{
    static sim_opts_t o;
    memset(&o, 0, sizeof o);
    o.fold = 1;
    char err[OPT_ERR_LEN];
    for (int i = 0; i < k; i++) {
        job_t job;
        estimate_t e;
        search_row_t r;
        result_t res;
        search_eval(s, rk[i].row.index, &r, &job, &e);
        if (sim_run(&job, &s->hw, &o, &res, err, sizeof err)) {
            fprintf(stderr, "megasim search: plan %lld not simulated: %s\n", r.index, err);
            rk[i].sim_mfu = -1;
            continue;
        }
        sim_summary_t sum;
        sim_summary(&job, &e, &res, &sum);
        rk[i].sim_mfu = sum.mfu, rk[i].sim_iteration_s = sum.iteration_time_s;
        result_free(&res);
    }
    qsort(rk, k, sizeof *rk, by_sim);
    for (int i = 0; i < k; i++)
        if (rk[i].sim_mfu < 0)
            rk[i].sim_mfu = rk[i].sim_iteration_s = NAN;
}

/* ---- outputs ---------------------------------------------------------- */

static const char *rc_name(int r)
{
    return r == RECOMPUTE_FULL ? "full" : r == RECOMPUTE_SELECTIVE ? "selective" : "none";
}

/* The plan fields under predict's flag names, typed as the options table. */
static cJSON *plan_json(const job_t *j)
{
    static const char *const names[] = {
        "num-gpus", "global-batch-size", "tensor-model-parallel-size", "pipeline-model-parallel-size",
        "num-layers-per-virtual-pipeline-stage", "micro-batch-size", "sequence-parallel", "zero-stage",
        "use-distributed-optimizer", "recompute-granularity", "overlap-grad-reduce", "overlap-param-gather",
        "tp-comm-overlap", "pp-comm-overlap", "account-for-embedding-in-pipeline-split",
        "account-for-loss-in-pipeline-split", "decoder-first-pipeline-num-layers", "decoder-last-pipeline-num-layers",
        "num-virtual-stages-per-pipeline-rank", "context-parallel-size", "cp-comm-type", "expert-model-parallel-size",
        "expert-tensor-parallel-size"};
    cJSON *o = cJSON_CreateObject();
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const opt_def *d = opts_find(&job_opts, names[i]);
        const int *v = (const int *)((const char *)j + d->off);
        if (d->type == OPT_BOOL)
            cJSON_AddBoolToObject(o, d->name, *v);
        else if (d->type == OPT_ENUM) {
            char buf[64];
            opts_format(d, j, buf, sizeof buf);
            cJSON_AddStringToObject(o, d->name, buf);
        } else
            cJSON_AddNumberToObject(o, d->name, d->off == offsetof(job_t, layers_per_vstage) && j->vpp == 1 ? 0 : *v);
    }
    cJSON_AddNumberToObject(o, "data-parallel-size", j->dp);
    return o;
}

static void print_json(const search_opts_t *so, const search_space_t *s, const ranked_t *rk, int n)
{
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; i < n; i++) {
        job_t job;
        estimate_t e;
        search_row_t r;
        search_eval(s, rk[i].row.index, &r, &job, &e);
        cJSON *o = report_json(&job, &s->hw, &e);
        cJSON_AddItemToObject(cJSON_GetObjectItemCaseSensitive(o, "config"), "search", search_section(so, s));
        cJSON_AddNumberToObject(o, "rank", i + 1);
        cJSON_AddItemToObject(o, "plan", plan_json(&job));
        if (!isnan(rk[i].sim_mfu)) {
            cJSON *sm = cJSON_AddObjectToObject(o, "simulated");
            cJSON_AddNumberToObject(sm, "iteration_time_s", rk[i].sim_iteration_s);
            cJSON_AddNumberToObject(sm, "mfu", rk[i].sim_mfu);
        }
        cJSON_AddItemToArray(arr, o);
    }
    char *txt = cJSON_Print(arr);
    if (txt)
        puts(txt);
    free(txt);
    cJSON_Delete(arr);
}

static void print_counts(const search_space_t *s, const evaluated_t *ev)
{
    printf("space: %lld plans = %d batch x %d (TP, SP) x %d (CP, comm) x %d (EP, ETP) x %d (PP, chunks) x %d micro-batch "
           "x %d ZeRO x %d recompute x %d overlap (TP, PP, DP)\n", s->total, s->nbatch, s->ntpsp, s->ncp, s->nep, s->nppv,
           s->nmb, s->nzero, s->nrc, s->novl);
    printf("valid and fit: %lld; rejected:\n", ev->reasons[SEARCH_OK]);
    for (int r = 1; r < SEARCH_NREASONS; r++)
        if (ev->reasons[r])
            printf("  %-10s %8lld  %s\n", search_reason_names[r], ev->reasons[r], search_reason_text[r]);
}

static void print_table(const search_space_t *s, const evaluated_t *ev, const ranked_t *rk, int n, int k)
{
    const job_t *b = &s->base;
    printf("megasim search: %d layers, h %d, %d heads, seq %d on %d GPUs (%s, %s), memory limit %.1f GiB\n",
           b->num_layers, b->hidden_size, b->num_attention_heads, b->seq_length, b->num_gpus, s->hw.gpu.name,
           s->hw.cluster.name, s->mem_limit_bytes / GIB);
    print_counts(s, ev);
    printf("\nbest %d by predicted MFU%s:\n", n, k ? "; the first ones re-ranked by the folded simulator" : "");
    printf("%4s %5s %3s %-6s %-6s %3s %3s %-5s %5s %3s %2s %4s %-9s %-7s %6s %6s %8s %9s %8s %8s %8s\n", "#", "batch",
           "TP", "CP", "EP/ETP", "PP", "v", "split", "DP", "mb", "SP", "ZeRO", "recompute", "overlap", "MFU", "simMFU", "iter s", "tokens/s", "mem GiB", "comm s",
           "bubble s");
    for (int i = 0; i < n; i++) {
        search_plan_t p;
        const search_row_t *r = &rk[i].row;
        search_plan_at(s, r->index, &p);
        char sim[16] = "-";
        if (!isnan(rk[i].sim_mfu))
            snprintf(sim, sizeof sim, "%5.1f%%", 100 * rk[i].sim_mfu);
        char ovl[8]; /* which overlap switches are on: T(P), P(P), D(P) */
        snprintf(ovl, sizeof ovl, "%s%s%s", p.ovl & SEARCH_OVL_TP ? "T" : "-", p.ovl & SEARCH_OVL_PP ? "P" : "-",
                 p.ovl & SEARCH_OVL_DP ? "D" : "-");
        char cp[16]; /* CP and its comm type's initial: p2p, all_gather, a2a */
        snprintf(cp, sizeof cp, p.cp > 1 ? "%d%s" : "%d", p.cp, (const char *[]){"p", "g", "a"}[p.cp_comm]);
        char ep[16] = "-";
        if (s->base.num_experts > 0)
            snprintf(ep, sizeof ep, "%d/%d", p.ep, p.etp1 ? 1 : p.tp);
        printf("%4d %5d %3d %-6s %-6s %3d %3d %-5s %5d %3d %2s %4d %-9s %-7s %5.1f%% %6s %8.3f %9.4g %8.1f %8.3f %8.3f\n",
               i + 1, p.batch, p.tp, cp, ep, p.pp, r->vpp, p.split ? "e+l" : split_uneven(b) ? "given" : "even", r->dp, p.mb, p.sp ? "on" : "-", p.zero, rc_name(p.recompute), ovl,
               100 * r->mfu, sim, r->iteration_s, r->tokens_per_s, r->mem_bytes / GIB, r->exposed_comm_s, r->bubble_s);
    }
    job_t job;
    search_row_t r;
    char flags[1024];
    search_eval(s, rk[0].row.index, &r, &job, NULL);
    search_plan_flags(&job, flags, sizeof flags);
    printf("\nwinner, Megatron-LM flags:\n  %s\n", flags);
    if (job.zero_stage >= 2)
        printf("  (and megasim's --zero-stage %d: Megatron-LM's distributed optimizer is ZeRO-1)\n", job.zero_stage);
    if (job.pp_comm_overlap)
        printf("  (and megasim's --pp-comm-overlap: decoupled send/receive, MegaScale's; Megatron-LM has no flag)\n");
}

/* One row of the files: every evaluated plan (valid by the rules). */
typedef struct {
    int64_t index;
    int32_t batch, tp, sp, cp, cp_comm_type, ep, etp, pp, vpp, layers_per_vstage, split_embedding_loss, dp, micro_batch_size, zero_stage, recompute;
    int32_t tp_comm_overlap, pp_comm_overlap, dp_overlap;
    int32_t num_microbatches, fits, frontier;
    double mfu, sim_mfu, iteration_time_s, tokens_per_s, memory_per_gpu_bytes, exposed_comm_s, bubble_s;
} file_row_t;

static void file_row(const search_space_t *s, const search_row_t *r, int frontier, double sim_mfu, file_row_t *f)
{
    search_plan_t p;
    search_plan_at(s, r->index, &p);
    *f = (file_row_t){r->index, p.batch, p.tp, p.sp, p.cp, p.cp_comm, p.ep, p.etp1 ? 1 : p.tp, p.pp, r->vpp, p.lpv, p.split, r->dp, p.mb, p.zero, p.recompute,
                      (p.ovl & SEARCH_OVL_TP) != 0, (p.ovl & SEARCH_OVL_PP) != 0, (p.ovl & SEARCH_OVL_DP) != 0,
                      r->num_microbatches, r->reason == SEARCH_OK, frontier, r->mfu, sim_mfu, r->iteration_s,
                      r->tokens_per_s, r->mem_bytes, r->exposed_comm_s, r->bubble_s};
}

static int write_csv(const char *path, const file_row_t *rows, long long n, char *err)
{
    out_file_t o;
    if (out_open(&o, path, "w", err, OPT_ERR_LEN))
        return -1;
    fprintf(o.f, "index,batch,tp,sp,cp,cp_comm_type,ep,etp,pp,vpp,layers_per_vstage,split_embedding_loss,dp,micro_batch_size,zero_stage,recompute,"
                 "tp_comm_overlap,pp_comm_overlap,dp_overlap,num_microbatches,fits,frontier,mfu,sim_mfu,iteration_time_s,tokens_per_s,memory_per_gpu_bytes,"
                 "exposed_comm_s,bubble_s\n");
    for (long long i = 0; i < n; i++) {
        const file_row_t *r = &rows[i];
        fprintf(o.f, "%lld,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%s,%d,%d,%d,%d,%d,%d,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g\n",
                (long long)r->index, r->batch, r->tp, r->sp, r->cp, r->cp_comm_type, r->ep, r->etp, r->pp, r->vpp, r->layers_per_vstage,
                r->split_embedding_loss, r->dp,
                r->micro_batch_size, r->zero_stage, rc_name(r->recompute), r->tp_comm_overlap, r->pp_comm_overlap,
                r->dp_overlap, r->num_microbatches, r->fits,
                r->frontier, r->mfu, r->sim_mfu, r->iteration_time_s, r->tokens_per_s, r->memory_per_gpu_bytes,
                r->exposed_comm_s, r->bubble_s);
    }
    return out_close(&o, 0);
}

/* The /plans table: file_row_t's fields, in order. */
#define I32(f) {#f, offsetof(file_row_t, f), OUT_I32}
#define F64(f) {#f, offsetof(file_row_t, f), OUT_F64}
static const out_col_t plan_cols[] = {
    {"index", offsetof(file_row_t, index), OUT_I64}, I32(batch), I32(tp), I32(sp), I32(cp), I32(cp_comm_type), I32(ep), I32(etp), I32(pp),
    I32(vpp),
    I32(layers_per_vstage), I32(split_embedding_loss), I32(dp), I32(micro_batch_size), I32(zero_stage), I32(recompute), I32(tp_comm_overlap),
    I32(pp_comm_overlap), I32(dp_overlap), I32(num_microbatches), I32(fits), I32(frontier), F64(mfu), F64(sim_mfu),
    F64(iteration_time_s), F64(tokens_per_s), F64(memory_per_gpu_bytes), F64(exposed_comm_s), F64(bubble_s)};
#undef I32
#undef F64
static const out_table_t plan_table = {plan_cols, sizeof plan_cols / sizeof plan_cols[0], sizeof(file_row_t)};

/* Root attributes (kind, version, configuration, rejection counts) and the
 * /plans table; no timestamps, so the same search gives the same bytes. */
static int write_h5(const char *path, const char *config, const evaluated_t *ev, const file_row_t *rows, char *err)
{
    char counts[512];
    int k = 0;
    for (int r = 0; r < SEARCH_NREASONS; r++)
        k += snprintf(counts + k, sizeof counts - k, "%s%s=%lld", r ? "," : "", search_reason_names[r], ev->reasons[r]);
    static const char *const attrs[] = {
        "description",
        "one row per plan valid by the job's rules, in enumeration order: fits = 1 within the "
        "memory limit (then mfu ... bubble_s are the closed form's), 0 above it (NaN metrics); "
        "sim_mfu: the folded simulator's, NaN when not re-ranked; recompute: 0 none, 1 full, "
        "2 selective; frontier: on the memory-MFU Pareto frontier; split_embedding_loss: 1 when the "
        "embedding and the loss count as a layer each in the pipeline split; cp_comm_type: 0 p2p, 1 all_gather, "
        "2 a2a",
        NULL};
    out_h5_t w;
    if (out_h5_create(&w, path, err, OPT_ERR_LEN))
        return -1;
    int rc = out_h5_attr_str(&w, w.file, "megasim_version", MEGASIM_VERSION) ||
             out_h5_attr_str(&w, w.file, "kind", "search") || out_h5_attr_str(&w, w.file, "config_json", config) ||
             out_h5_attr_str(&w, w.file, "rejected_counts", counts) ||
             out_h5_table(&w, w.file, "/plans", &plan_table, rows, (size_t)ev->n, attrs);
    return out_h5_close(&w, rc ? -1 : 0);
}

/* FILE.dat (memory GiB, MFU %, frontier) then gnuplot; without gnuplot a
 * message, and the data stay. */
static int write_plot(const char *png, const file_row_t *rows, long long n, char *err)
{
    char dat[1100], cmd[4000];
    snprintf(dat, sizeof dat, "%s.dat", png);
    out_file_t o;
    if (out_open(&o, dat, "w", err, OPT_ERR_LEN))
        return -1;
    /* Block 0: every plan that fits; block 1: the frontier by memory. */
    fprintf(o.f, "# memory_per_gpu_gib mfu_percent frontier (megasim search; plans that fit)\n");
    for (int block = 0; block < 2; block++, fprintf(o.f, "\n\n"))
        for (long long i = 0; i < n; i++)
            if (rows[i].fits && (!block || rows[i].frontier))
                fprintf(o.f, "%.6g %.6g %d\n", rows[i].memory_per_gpu_bytes / GIB, 100 * rows[i].mfu, rows[i].frontier);
    if (out_close(&o, 0))
        return -1;
    const char *gp = MEGASIM_PLOTS_DIR "/search-frontier.gp";
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        fprintf(stderr, "megasim search: gnuplot not found, no figure drawn; the data are in %s (plot them with "
                        "gnuplot -e \"datafile='%s'; outfile='%s'\" %s)\n", dat, dat, png, gp);
        return 0;
    }
    snprintf(cmd, sizeof cmd, "gnuplot -e \"datafile='%s'; outfile='%s'\" '%s'", dat, png, gp);
    if (system(cmd) != 0)
        fprintf(stderr, "megasim search: gnuplot failed (%s); the data are in %s\n", cmd, dat);
    else
        fprintf(stderr, "wrote %s (data %s)\n", png, dat);
    return 0;
}

static int write_files(const search_opts_t *so, const search_space_t *s, const evaluated_t *ev, const ranked_t *rk,
                       int nok, char *err)
{
    if (!so->out[0] && !so->csv[0] && !so->plot[0])
        return 0;
    file_row_t *rows = calloc(ev->n ? ev->n : 1, sizeof *rows);
    if (!rows) {
        snprintf(err, OPT_ERR_LEN, "out of memory for %lld plan rows", ev->n);
        return -1;
    }
    /* rk is in ranked order; the files are in index order. */
    for (long long i = 0; i < ev->n; i++)
        file_row(s, &ev->rows[i], 0, NAN, &rows[i]);
    for (int i = 0; i < nok; i++) {
        search_row_t key = {.index = rk[i].row.index};
        search_row_t *at = bsearch(&key, ev->rows, ev->n, sizeof key, by_index);
        rows[at - ev->rows].frontier = rk[i].frontier;
        rows[at - ev->rows].sim_mfu = rk[i].sim_mfu;
    }
    cJSON *c = report_config_json(&s->base, &s->hw);
    cJSON_AddItemToObject(c, "search", search_section(so, s));
    char *config = cJSON_PrintUnformatted(c);
    int rc = (so->csv[0] && write_csv(so->csv, rows, ev->n, err)) ||
             (so->out[0] && write_h5(so->out, config ? config : "{}", ev, rows, err)) ||
             (so->plot[0] && write_plot(so->plot, rows, ev->n, err));
    if (!rc && so->csv[0])
        fprintf(stderr, "wrote %s\n", so->csv);
    if (!rc && so->out[0])
        fprintf(stderr, "wrote %s\n", so->out);
    free(config);
    cJSON_Delete(c);
    free(rows);
    return rc ? -1 : 0;
}

/* ---- setup and the bad-input checks ----------------------------------- */

/* Parses flags and files like predict, without finalizing the plan fields
 * (they are searched), and checks what no plan can repair. */
static int setup(int argc, char **argv, search_opts_t *so, search_space_t *s, char *err)
{
    job_t base;
    hw_t hw;
    search_fixed_t fixed;
    const char *replay = replay_path(argc, argv, &search_opts);
    if (replay ? replay_parse("search", replay, argc, argv, &search_opts, so, &base, &hw, err)
               : job_parse(&base, argc, argv, &search_opts, so, err) || job_hardware(&base, &hw, err))
        return -1;
    int gpn = hw.cluster.gpus_per_node;
    if (base.num_gpus >= gpn ? base.num_gpus % gpn : 0) {
        snprintf(err, OPT_ERR_LEN, "num-gpus = %d is not a multiple of the cluster's %d GPUs per node",
                 base.num_gpus, gpn);
        return -1;
    }
    if (so->max_batch && so->max_batch < so->min_batch) {
        snprintf(err, OPT_ERR_LEN, "--max-batch = %d is below --min-batch = %d", so->max_batch, so->min_batch);
        return -1;
    }
    fixed_fields(&base, &fixed);
    int lo = so->min_batch, hi = so->max_batch ? so->max_batch : lo, step = so->batch_step ? so->batch_step : lo;
    double limit = (so->mem_limit_gib > 0 ? so->mem_limit_gib : hw.gpu.hbm_gib) * GIB;
    return search_space_init(s, &base, &hw, &fixed, lo, hi, lo ? step : 0, limit, err);
}

/* A limit no plan can meet: the runtime reserve plus the weights spread
 * over every GPU (ZeRO-3 and TP x PP cannot split them further). */
static int check_limit(const search_opts_t *so, const search_space_t *s, const evaluated_t *ev, char *err)
{
    if (!ev->n)
        return 0;
    job_t job;
    search_row_t r;
    search_eval(s, ev->rows[0].index, &r, &job, NULL);
    workload_t w;
    workload_compute(&job, &w);
    double floor_b = s->hw.cluster.runtime_reserved_gib * GIB + w.params_total * job_weight_bytes(&job) / job.num_gpus;
    if (s->mem_limit_bytes >= floor_b)
        return 0;
    snprintf(err, OPT_ERR_LEN,
             "%s = %.3g GiB is below the model's weights: %.3g B parameters over %d GPUs plus the "
             "%.3g GiB runtime reserve need at least %.3g GiB per GPU",
             so->mem_limit_gib > 0 ? "--memory-limit-gib" : "the GPU's memory (the limit without --memory-limit-gib)",
             s->mem_limit_bytes / GIB, w.params_total / 1e9, job.num_gpus, s->hw.cluster.runtime_reserved_gib,
             floor_b / GIB);
    return -1;
}

/* No plan survived: say which rule removed the most. */
static void no_plan_message(const search_space_t *s, const evaluated_t *ev, char *err)
{
    int worst = 1;
    double least_mem = INFINITY;
    for (int r = 1; r < SEARCH_NREASONS; r++)
        if (ev->reasons[r] > ev->reasons[worst])
            worst = r;
    for (long long i = 0; i < ev->n; i++)
        least_mem = fmin(least_mem, ev->rows[i].mem_bytes);
    int k = snprintf(err, OPT_ERR_LEN, "no valid plan among %lld: most rejected because %s (%lld)", s->total,
                     search_reason_text[worst], ev->reasons[worst]);
    if (ev->reasons[SEARCH_REJ_MEMORY])
        snprintf(err + k, OPT_ERR_LEN - k, "; the smallest plan needs %.1f GiB per GPU, the limit is %.1f GiB",
                 least_mem / GIB, s->mem_limit_bytes / GIB);
}

/* --plot F.png also writes F.png.dat: every path must be its own file. */
static int probe_outputs(const search_opts_t *so, char *err)
{
    char dat[1100] = "";
    if (so->plot[0])
        snprintf(dat, sizeof dat, "%s.dat", so->plot);
    const char *flags[] = {"--out", "--csv", "--plot", "--plot's data file"},
               *paths[] = {so->out, so->csv, so->plot, dat};
    return out_check_paths(4, flags, paths, err, OPT_ERR_LEN);
}

/* Rank 0 after the gather: rank, re-rank, print, write. */
static int report(const search_opts_t *so, const search_space_t *s, evaluated_t *ev, double t0, char *err)
{
    int nok = 0;
    if (check_limit(so, s, ev, err))
        return -1;
    ranked_t *rk = calloc(ev->n ? ev->n : 1, sizeof *rk);
    if (!rk) {
        snprintf(err, OPT_ERR_LEN, "out of memory for %lld plans", ev->n);
        return -1;
    }
    for (long long i = 0; i < ev->n; i++)
        if (ev->rows[i].reason == SEARCH_OK)
            rk[nok++] = (ranked_t){.row = ev->rows[i], .sim_mfu = NAN, .sim_iteration_s = NAN};
    if (!nok) {
        no_plan_message(s, ev, err);
        free(rk);
        return -1;
    }
    qsort(rk, nok, sizeof *rk, (int (*)(const void *, const void *))search_row_cmp);
    double t1 = now_s();
    int k = so->rerank < nok ? so->rerank : nok, n = so->top < nok ? so->top : nok;
    rerank(s, rk, k);
    double t2 = now_s();
    search_row_t *rows = malloc(sizeof *rows * nok);
    char *fr = malloc(nok);
    if (rows && fr) {
        for (int i = 0; i < nok; i++)
            rows[i] = rk[i].row;
        search_frontier(rows, nok, fr);
        for (int i = 0; i < nok; i++)
            rk[i].frontier = fr[i];
    }
    free(rows);
    free(fr);
    int rc = write_files(so, s, ev, rk, nok, err);
    if (!rc && so->json)
        print_json(so, s, rk, n);
    else if (!rc)
        print_table(s, ev, rk, n, k);
    fprintf(stderr, "megasim search: %lld plans on %d rank(s) in %.2f s (closed form), %d re-ranked by the "
                    "simulator in %.2f s, %.2f s in all\n", s->total, mpi.size, t1 - t0, k, t2 - t1, now_s() - t0);
    free(rk);
    return rc;
}

static int search_main(int argc, char **argv)
{
    static search_space_t s;
    search_opts_t so;
    evaluated_t ev = {0};
    char err[OPT_ERR_LEN];
    double t0 = now_s();
    if (setup(argc - 1, argv + 1, &so, &s, err) || probe_outputs(&so, err))
        return mpi.rank ? 2 : cli_fail("search", err);
    if (evaluate_share(&s, &ev)) {
        snprintf(err, OPT_ERR_LEN, "out of memory for %lld plans", s.total);
        return cli_fail("search", err);
    }
    gather(&ev);
    int rc = 0;
    if (!mpi.rank && report(&so, &s, &ev, t0, err))
        rc = cli_fail("search", err);
    free(ev.rows);
    return rc;
}

int cmd_search(int argc, char **argv)
{
    if (cli_wants_help(argc, argv))
        return 0;
    cli_mpi_begin(&mpi);
    return cli_mpi_end(&mpi, search_main(argc, argv));
}
