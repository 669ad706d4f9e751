/* sim/output.c: the summary of a simulated iteration (one computation for
 * --json, text and HDF5), the HDF5 result file and the Chrome-trace JSON.
 * See sim/output.h for the contracts and docs/schema.md for the file layout.
 *
 * Determinism: no timestamps are written (HDF5 object time tracking is
 * off), rows are written in the engine's order and trace events sorted by
 * (rank, stream, ready time), so identical results give identical bytes. */
#include "sim/output.h"
#include "sim/out.h"

#include "model/report.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <hdf5.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- summary -------------------------------------------------------- */

#define SF(key, sec, b) {#key, sec, b, offsetof(sim_summary_t, key)}
/* The order is the --json order. */
const sim_summary_field_t sim_summary_fields[] = {
    SF(iteration_time_s, SIM_SUM_TOP, 0),          SF(tokens_per_s, SIM_SUM_TOP, 0),
    SF(mfu, SIM_SUM_TOP, 0),                       SF(hfu, SIM_SUM_TOP, 0),
    SF(model_flops_per_iteration, SIM_SUM_TOP, 0), SF(hardware_flops_per_iteration, SIM_SUM_TOP, 0),
    SF(params_total, SIM_SUM_TOP, 0),              SF(peak_memory_per_gpu_bytes, SIM_SUM_TOP, 0),
    SF(fits_in_memory, SIM_SUM_TOP, 1),            SF(days_for_300b_tokens, SIM_SUM_TOP, 0),
    SF(compute_s, SIM_SUM_BREAKDOWN, 0),           SF(bubble_s, SIM_SUM_BREAKDOWN, 0),
    SF(exposed_tp_comm_s, SIM_SUM_BREAKDOWN, 0),   SF(exposed_pp_comm_s, SIM_SUM_BREAKDOWN, 0),
    SF(exposed_dp_comm_s, SIM_SUM_BREAKDOWN, 0),   SF(optimizer_s, SIM_SUM_BREAKDOWN, 0),
    SF(other_s, SIM_SUM_BREAKDOWN, 0),
    SF(events, SIM_SUM_SIMULATION, 0),             SF(entities, SIM_SUM_SIMULATION, 0),
    SF(dp_classes, SIM_SUM_SIMULATION, 0),         SF(critical_rank, SIM_SUM_SIMULATION, 0),
    SF(closed_form_iteration_time_s, SIM_SUM_SIMULATION, 0),
};
const int sim_summary_nfields = sizeof sim_summary_fields / sizeof sim_summary_fields[0];

static const char *const section_names[] = {NULL, "breakdown", "simulation"};

void sim_summary(const job_t *job, const estimate_t *e, const result_t *r, sim_summary_t *s)
{
    const result_account_t *a = &r->critical;
    double it_s = r->iteration_ns * 1e-9, gpu_s = it_s * job->num_gpus * e->peak_flops;
    *s = (sim_summary_t){
        .iteration_time_s = it_s,
        .tokens_per_s = (double)job->global_batch_size * job->seq_length / it_s,
        .mfu = e->work.model_flops_per_iter / gpu_s,
        .hfu = e->work.hw_flops_per_iter / gpu_s,
        .model_flops_per_iteration = e->work.model_flops_per_iter,
        .hardware_flops_per_iteration = e->work.hw_flops_per_iter,
        .params_total = e->work.params_total,
        .days_for_300b_tokens = 300e9 / ((double)job->global_batch_size * job->seq_length / it_s) / 86400,
        /* a measurement's is measured (it fitted: it ran) */
        .peak_memory_per_gpu_bytes = r->peak_memory_bytes > 0 ? r->peak_memory_bytes : e->mem.total_bytes,
        .fits_in_memory = r->peak_memory_bytes > 0 || e->mem.fits ? 1 : 0,
        .compute_s = a->compute * 1e-9, .bubble_s = a->bubble * 1e-9,
        .exposed_tp_comm_s = a->tp * 1e-9, .exposed_pp_comm_s = a->pp * 1e-9,
        .exposed_dp_comm_s = a->dp * 1e-9, .optimizer_s = a->optimizer * 1e-9, .other_s = a->other * 1e-9,
        .events = (double)r->events, .entities = r->entities, .dp_classes = r->classes,
        .critical_rank = r->critical_rank, .closed_form_iteration_time_s = e->iteration_s,
    };
}

static double field_value(const sim_summary_t *s, const sim_summary_field_t *f)
{
    return *(const double *)((const char *)s + f->off);
}

/* The full effective configuration of a result: the job, the hardware,
 * the version, and the command's own options (sim_config, may be NULL):
 * the simulator's (stragglers, seed, fold) under "simulate", a
 * measurement's (`megasim run`'s) under "run". */
static cJSON *config_json(const job_t *job, const hw_t *hw, const cJSON *sim_config, const result_t *r)
{
    cJSON *c = report_config_json(job, hw);
    int run = r && r->kind && !strcmp(r->kind, "measurement");
    if (c && sim_config)
        cJSON_AddItemToObject(c, run ? "run" : "simulate", cJSON_Duplicate(sim_config, 1));
    return c;
}

cJSON *sim_summary_json(const job_t *job, const hw_t *hw, const estimate_t *e, const result_t *r,
                        const cJSON *sim_config)
{
    sim_summary_t s;
    sim_summary(job, e, r, &s);
    cJSON *o = cJSON_CreateObject(), *sec[3] = {o, NULL, NULL};
    for (int i = 0; i < sim_summary_nfields; i++) {
        const sim_summary_field_t *f = &sim_summary_fields[i];
        if (!sec[f->section])
            sec[f->section] = cJSON_AddObjectToObject(o, section_names[f->section]);
        if (f->is_bool)
            cJSON_AddBoolToObject(sec[f->section], f->key, field_value(&s, f) != 0);
        else
            cJSON_AddNumberToObject(sec[f->section], f->key, field_value(&s, f));
    }
    cJSON_AddStringToObject(o, "mfu_peak", report_mfu_peak(job));
    cJSON_AddNumberToObject(o, "params_active", e->work.params_active);
    if (r->ncontended) { /* network = flows: the links where flows had to share */
        cJSON *arr = cJSON_AddArrayToObject(o, "contended_links");
        for (int k = 0; k < r->ncontended; k++) {
            cJSON *l = cJSON_CreateObject();
            cJSON_AddStringToObject(l, "link", r->contended[k].name);
            cJSON_AddNumberToObject(l, "full_capacity_s", r->contended[k].full_s);
            cJSON_AddNumberToObject(l, "busy_s", r->contended[k].busy_s);
            cJSON_AddNumberToObject(l, "bytes", r->contended[k].bytes);
            cJSON_AddNumberToObject(l, "max_flows", r->contended[k].max_flows);
            cJSON_AddItemToArray(arr, l);
        }
    }
    if (r->peak_memory_bytes <= 0) /* a simulation: the memory model's, as predict */
        cJSON_AddItemToObject(o, "memory", report_memory_json(e));
    cJSON_AddItemToObject(o, "config", config_json(job, hw, sim_config, r));
    return o;
}

/* ---- --trace-ranks --------------------------------------------------- */

static int parse_rank(const char *tok, const char *flag, int limit, int *rank, char *err, int len)
{
    char *end;
    errno = 0;
    long v = strtol(tok, &end, 10);
    if (end == tok || *end || errno) {
        snprintf(err, len, "--%s: '%s' is not a rank (expected R[,R...], e.g. 0,8,31)", flag, tok);
        return -1;
    }
    if (v < 0 || v >= limit) {
        snprintf(err, len, "--%s: rank %s is not a rank of this job (0 to %d)", flag, tok, limit - 1);
        return -1;
    }
    *rank = (int)v;
    return 0;
}

int sim_parse_ranks(const char *text, const char *flag, int limit, int max, int *list, int *n, char *err, int len)
{
    char buf[1024];
    *n = 0;
    if (snprintf(buf, sizeof buf, "%s", text) >= (int)sizeof buf) {
        snprintf(err, len, "--%s: the list is longer than %d characters", flag, (int)sizeof buf - 1);
        return -1;
    }
    size_t blen = strlen(buf);
    if (blen && (buf[0] == ',' || buf[blen - 1] == ',' || strstr(buf, ",,"))) {
        snprintf(err, len, "--%s '%s': an empty entry; expected R[,R...], e.g. 0,8,31", flag, text);
        return -1;
    }
    for (char *save, *t = buf[0] ? strtok_r(buf, ",", &save) : NULL; t; t = strtok_r(NULL, ",", &save)) {
        int r;
        if (parse_rank(t, flag, limit, &r, err, len))
            return -1;
        for (int i = 0; i < *n; i++)
            if (list[i] == r) {
                snprintf(err, len, "--%s: rank %d is listed twice", flag, r);
                return -1;
            }
        if (*n == max) {
            snprintf(err, len, "--%s: more than %d ranks; at most %d can be traced", flag, max, max);
            return -1;
        }
        list[(*n)++] = r;
    }
    /* Ascending, so that the same set of ranks gives the same file in any order. */
    for (int i = 1; i < *n; i++)
        for (int j = i; j > 0 && list[j - 1] > list[j]; j--) {
            int t = list[j];
            list[j] = list[j - 1], list[j - 1] = t;
        }
    return 0;
}

/* ---- HDF5 ------------------------------------------------------------ */

static int write_root(out_h5_t *w, const job_t *job, const hw_t *hw, const cJSON *sim_config, const result_t *r)
{
    const char *kind = r->kind;
    cJSON *c = config_json(job, hw, sim_config, r);
    char *s = c ? cJSON_PrintUnformatted(c) : NULL;
    int rc = !s ? out_h5_fail(w, "format", "the configuration as JSON")
                : out_h5_attr_str(w, w->file, "megasim_version", MEGASIM_VERSION) ||
                      out_h5_attr_str(w, w->file, "kind", kind ? kind : "simulation") || out_h5_attr_str(w, w->file, "config_json", s);
    free(s);
    cJSON_Delete(c);
    return rc ? -1 : 0;
}

static int write_summary(out_h5_t *w, const job_t *job, const estimate_t *e, const result_t *r)
{
    sim_summary_t s;
    sim_summary(job, e, r, &s);
    hid_t g = out_h5_group(w, w->file, "/summary");
    if (g < 0)
        return -1;
    int rc = 0;
    for (int i = 0; i < sim_summary_nfields && !rc; i++)
        rc = out_h5_attr_f64(w, g, sim_summary_fields[i].key, field_value(&s, &sim_summary_fields[i]));
    if (H5Gclose(g) < 0 && !rc)
        rc = out_h5_fail(w, "close group", "/summary");
    return rc;
}

typedef struct {
    int32_t rank, stands_for;
    double end_s, compute_s, bubble_s, tp_s, pp_s, dp_s, optimizer_s, other_s, dp_busy_s, pp_busy_s;
} rank_row_t;

#define RC(f, i) {#f, offsetof(rank_row_t, f), (i) ? OUT_I32 : OUT_F64}
static const out_col_t rank_cols[] = {
    RC(rank, 1), RC(stands_for, 1), RC(end_s, 0), RC(compute_s, 0), RC(bubble_s, 0), RC(tp_s, 0),
    RC(pp_s, 0), RC(dp_s, 0), RC(optimizer_s, 0), RC(other_s, 0), RC(dp_busy_s, 0), RC(pp_busy_s, 0)};
static const out_table_t rank_table = {rank_cols, sizeof rank_cols / sizeof rank_cols[0], sizeof(rank_row_t)};

static void rank_row(const result_t *r, int i, rank_row_t *row)
{
    const result_account_t *a = &r->per_entity[i];
    memset(row, 0, sizeof *row);
    row->rank = r->entity_rank[i], row->stands_for = r->entity_count[i];
    row->end_s = a->end * 1e-9, row->compute_s = a->compute * 1e-9, row->bubble_s = a->bubble * 1e-9;
    row->tp_s = a->tp * 1e-9, row->pp_s = a->pp * 1e-9, row->dp_s = a->dp * 1e-9;
    row->optimizer_s = a->optimizer * 1e-9, row->other_s = a->other * 1e-9;
    row->dp_busy_s = a->dp_busy * 1e-9, row->pp_busy_s = a->pp_busy * 1e-9;
}

static int write_ranks(out_h5_t *w, const result_t *r)
{
    static const char *const attrs[] = {
        "description",
        "one row per simulated entity: per rank when unfolded; folded runs have one row per class of identical "
        "ranks, `rank` is a representative global rank and `stands_for` the number of ranks it stands for "
        "(the column sums to num_gpus). Seconds of the entity's compute stream: compute + bubble + tp + pp + "
        "dp + optimizer + other = end_s; dp_busy_s and pp_busy_s are the busy time of its DP stream and "
        "pipeline send/receive pools",
        NULL};
    rank_row_t *rows = calloc(r->entities > 0 ? r->entities : 1, sizeof *rows);
    if (!rows) {
        snprintf(w->out.err, w->out.errlen, "%s: out of memory for %d rows of /ranks", w->out.path, r->entities);
        return -1;
    }
    for (int i = 0; i < r->entities; i++)
        rank_row(r, i, &rows[i]);
    int rc = out_h5_table(w, w->file, "/ranks", &rank_table, rows, (size_t)r->entities, attrs);
    free(rows);
    return rc;
}

typedef struct {
    int32_t rank, stream, kind, mb, chunk;
    double t_ready_s, t_start_s, t_end_s;
    int32_t iteration;
    double comm_wait_s, a2a_s, cpu_s;
} op_row_t;

#define OC(f, i) {#f, offsetof(op_row_t, f), (i) ? OUT_I32 : OUT_F64}
static const out_col_t op_cols[] = {OC(rank, 1),      OC(stream, 1),      OC(kind, 1),    OC(mb, 1),
                                   OC(chunk, 1),     OC(t_ready_s, 0),   OC(t_start_s, 0), OC(t_end_s, 0),
                                   OC(iteration, 1), OC(comm_wait_s, 0), OC(a2a_s, 0), OC(cpu_s, 0)};
static const out_table_t op_table = {op_cols, sizeof op_cols / sizeof op_cols[0], sizeof(op_row_t)};

/* sop_kind_t order (model/sched.h). */


/* "a,b,c" into buf (which is large enough for the fixed name lists). */
static const char *join_names(const char *const *names, int n, char *buf, size_t size)
{
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < n; i++)
        k += snprintf(buf + k, size - k, "%s%s", i ? "," : "", names[i]);
    return buf;
}

static int write_timeline(out_h5_t *w, const result_t *r)
{
    char streams[256], kinds[256];
    const char *const attrs[] = {
        "stream_names", join_names(sched_stream_names, STREAM_COUNT, streams, sizeof streams),
        "kind_names", join_names(sched_kind_names, sched_nkinds, kinds, sizeof kinds),
        "description",
        "one row per op of the traced ranks, in completion order; stream and kind index stream_names and "
        "kind_names; mb and chunk: micro-batch and model chunk of fwd/bwd, piece of DP ops, -1 if none; "
        "t_ready_s: reached the head of its stream, t_start_s: work began, t_end_s: done (seconds from the "
        "start of its iteration); iteration: 0 in a simulation, the measured step in a real run; comm_wait_s: "
        "measured, the part of the op spent waiting on communication (CPU path: its host blocked in MPI; GPU "
        "path: its compute stream standing at NCCL calls and waits for other streams; 0 in a simulation); "
        "a2a_s: of a forward or backward, the experts' token dispatch and combine (measured: their all-to-alls; "
        "simulated: their cost; 0 without experts); cpu_s: measured on the CPU path, a forward or backward's "
        "own CPU time (its rank's thread, less its communication waits'), NaN otherwise",
        NULL};
    op_row_t *rows = calloc(r->ntimeline > 0 ? r->ntimeline : 1, sizeof *rows);
    if (!rows) {
        snprintf(w->out.err, w->out.errlen, "%s: out of memory for %ld rows of /timeline", w->out.path, r->ntimeline);
        return -1;
    }
    for (long i = 0; i < r->ntimeline; i++) {
        const result_op_t *o = &r->timeline[i];
        rows[i] = (op_row_t){o->rank, o->stream, o->kind, o->mb, o->chunk,
                             o->t_ready_ns * 1e-9, o->t_start_ns * 1e-9, o->t_end_ns * 1e-9, o->iter,
                             o->t_comm_wait_ns * 1e-9, o->t_a2a_ns * 1e-9, o->t_cpu_ns >= 0 ? o->t_cpu_ns * 1e-9 : NAN};
    }
    int rc = out_h5_table(w, w->file, "/timeline", &op_table, rows, (size_t)r->ntimeline, attrs);
    free(rows);
    return rc;
}

typedef struct {
    int32_t step;
    double loss, step_time_s, tokens_per_s, mfu, grad_norm, lr, sm_mhz, power_w, power_capped;
    double moe_dropped, moe_aux_loss, moe_load_cv;
} iter_row_t;

#define IC(f, i) {#f, offsetof(iter_row_t, f), (i) ? OUT_I32 : OUT_F64}
static const out_col_t iter_cols[] = {IC(step, 1),      IC(loss, 0),   IC(step_time_s, 0), IC(tokens_per_s, 0),
                                     IC(mfu, 0),       IC(grad_norm, 0), IC(lr, 0),       IC(sm_mhz, 0),
                                     IC(power_w, 0),   IC(power_capped, 0), IC(moe_dropped, 0),
                                     IC(moe_aux_loss, 0), IC(moe_load_cv, 0)};
static const out_table_t iter_table = {iter_cols, sizeof iter_cols / sizeof iter_cols[0], sizeof(iter_row_t)};

/* Measured runs only: one row per training step. */
static int write_iterations(out_h5_t *w, const result_t *r)
{
    static const char *const attrs[] = {
        "description",
        "one row per measured training step: its number, mean loss over the global batch (nats per token), "
        "wall time (the slowest rank), tokens per second, MFU, the global gradient norm (before clipping), the "
        "learning rate, and the GPUs' mean SM clock (MHz), board power (W) and share of clock reads at the power "
        "cap over the step (NVML; 0 where not read); with experts, the (token, expert) pairs their capacity "
        "dropped, the auxiliary load-balancing loss and the experts' token loads' coefficient of variation (0 "
        "without)",
        NULL};
    if (r->niters == 0)
        return 0;
    iter_row_t *rows = calloc((size_t)r->niters, sizeof *rows);
    if (!rows) {
        snprintf(w->out.err, w->out.errlen, "%s: out of memory for /iterations", w->out.path);
        return -1;
    }
    for (int i = 0; i < r->niters; i++) {
        const result_iter_t *it = &r->iters[i];
        rows[i] = (iter_row_t){it->step,      it->loss, it->step_time_s, it->tokens_per_s, it->mfu,
                               it->grad_norm, it->lr,   it->sm_mhz,      it->power_w,      it->power_capped,
                               it->moe_dropped, it->moe_aux_loss, it->moe_load_cv};
    }
    int rc = out_h5_table(w, w->file, "/iterations", &iter_table, rows, (size_t)r->niters, attrs);
    free(rows);
    return rc;
}

int sim_write_h5(const char *path, const job_t *job, const hw_t *hw, const cJSON *sim_config,
                 const estimate_t *closed_form, const result_t *r, char *err, int errlen)
{
    out_h5_t w;
    if (out_h5_create(&w, path, err, errlen))
        return -1;
    int rc = write_root(&w, job, hw, sim_config, r) || write_summary(&w, job, closed_form, r) ||
             write_ranks(&w, r) || write_timeline(&w, r) || write_iterations(&w, r);
    return out_h5_close(&w, rc ? -1 : 0);
}

/* ---- Chrome trace ---------------------------------------------------- */

/* Ops of one stream may overlap (the pipeline send/receive pools run
 * several at once); trace viewers need events on one thread to nest, so
 * overlapping ops go to extra lanes: tid = stream + STREAM_COUNT * lane. */
#define TRACE_LANES 16

typedef struct {
    result_op_t o;
    long index; /* in r->timeline: the last tie-breaker */
    int lane;
} trace_op_t;

static int trace_cmp(const void *pa, const void *pb)
{
    const trace_op_t *a = pa, *b = pb;
    int64_t k[4][2] = {{a->o.rank, b->o.rank}, {a->o.stream, b->o.stream},
                       {a->o.t_ready_ns, b->o.t_ready_ns}, {a->index, b->index}};
    for (int i = 0; i < 4; i++)
        if (k[i][0] != k[i][1])
            return k[i][0] < k[i][1] ? -1 : 1;
    return 0;
}

/* Greedy interval partitioning over ops sorted by ready time: each op
 * (wait included) takes the lane that freed first, a new one if none has. */
static void assign_lanes(trace_op_t *t, long n)
{
    int64_t free_at[TRACE_LANES];
    int nl = 0;
    for (long i = 0; i < n; i++) {
        if (i == 0 || t[i].o.rank != t[i - 1].o.rank || t[i].o.stream != t[i - 1].o.stream)
            nl = 0;
        int best = 0;
        for (int l = 1; l < nl; l++)
            if (free_at[l] < free_at[best])
                best = l;
        if ((nl == 0 || free_at[best] > t[i].o.t_ready_ns) && nl < TRACE_LANES)
            best = nl++;
        t[i].lane = best;
        free_at[best] = t[i].o.t_end_ns;
    }
}

/* Write errors show in ferror(f), which out_close reports. */
typedef struct {
    FILE *f;
    int first; /* no event written yet: no comma */
} trace_w_t;

static void emit(trace_w_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(trace_w_t *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs(w->first ? "\n" : ",\n", w->f);
    vfprintf(w->f, fmt, ap);
    va_end(ap);
    w->first = 0;
}

/* Nanoseconds as exact decimal microseconds: 1234567 -> "1234.567". */
static const char *us(int64_t ns, char buf[32])
{
    snprintf(buf, 32, "%lld.%03lld", (long long)(ns / 1000), (long long)(ns % 1000));
    return buf;
}

static const char *op_name(const result_op_t *o, char *buf, size_t size)
{
    char kind[16];
    if (o->kind >= 0 && o->kind < sched_nkinds)
        snprintf(kind, sizeof kind, "%s", sched_kind_names[o->kind]);
    else
        snprintf(kind, sizeof kind, "op%d", o->kind);
    if (o->kind == SOP_FWD || o->kind == SOP_BWD)
        snprintf(buf, size, "%s mb=%d c=%d", kind, o->mb, o->chunk);
    else if ((o->kind == SOP_DP_GATHER || o->kind == SOP_DP_REDUCE) && o->chunk >= 0)
        snprintf(buf, size, "%s piece=%d", kind, o->chunk);
    else
        snprintf(buf, size, "%s", kind);
    return buf;
}

static int trace_tid(const trace_op_t *t)
{
    return t->o.stream + STREAM_COUNT * t->lane;
}

/* Process name once per rank, thread name once per (rank, stream, lane). */
static void emit_names(trace_w_t *w, const trace_op_t *t, const trace_op_t *prev, unsigned char *named)
{
    int pid = t->o.rank, tid = trace_tid(t);
    if (!prev || prev->o.rank != pid) {
        memset(named, 0, STREAM_COUNT * TRACE_LANES);
        emit(w, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank %d\"}}", pid, pid);
        emit(w, "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"sort_index\":%d}}", pid, pid);
    }
    if (named[tid] || t->o.stream < 0 || t->o.stream >= STREAM_COUNT)
        return;
    named[tid] = 1;
    char lane[16] = "";
    if (t->lane)
        snprintf(lane, sizeof lane, " %d", t->lane + 1);
    emit(w, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s%s\"}}", pid, tid,
         sched_stream_names[t->o.stream], lane);
    emit(w, "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}", pid,
         tid, t->o.stream * TRACE_LANES + t->lane);
}

static void emit_op(trace_w_t *w, const trace_op_t *t)
{
    const result_op_t *o = &t->o;
    char name[64], a[32], b[32], c[32];
    op_name(o, name, sizeof name);
    if (o->t_start_ns > o->t_ready_ns)
        emit(w, "{\"name\":\"wait\",\"cat\":\"wait\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%s,\"dur\":%s,"
                "\"cname\":\"grey\",\"args\":{\"for\":\"%s\"}}",
             o->rank, trace_tid(t), us(o->t_ready_ns, a), us(o->t_start_ns - o->t_ready_ns, b), name);
    emit(w, "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%s,\"dur\":%s,"
            "\"args\":{\"mb\":%d,\"chunk\":%d,\"t_ready_us\":%s}}",
         name, o->kind >= 0 && o->kind < sched_nkinds ? sched_kind_names[o->kind] : "op", o->rank, trace_tid(t),
         us(o->t_start_ns, a), us(o->t_end_ns - o->t_start_ns, b), o->mb, o->chunk, us(o->t_ready_ns, c));
}

static void emit_trace(trace_w_t *w, const trace_op_t *t, long n, const char *config)
{
    unsigned char named[STREAM_COUNT * TRACE_LANES];
    fputs("{\"traceEvents\": [", w->f);
    for (long i = 0; i < n; i++) {
        emit_names(w, &t[i], i ? &t[i - 1] : NULL, named);
        emit_op(w, &t[i]);
    }
    fputs("\n],\n\"displayTimeUnit\": \"ms\"", w->f);
    /* The trace format's place for anything else: the configuration. */
    if (config)
        fprintf(w->f, ",\n\"otherData\": {\"megasim_version\": \"%s\", \"config\": %s}", MEGASIM_VERSION, config);
    fputs("}\n", w->f);
}

int sim_write_trace(const char *path, const job_t *job, const hw_t *hw, const cJSON *sim_config,
                    const result_t *r, char *err, int errlen)
{
    long n = r->ntimeline;
    trace_op_t *t = calloc(n > 0 ? n : 1, sizeof *t);
    if (!t) {
        snprintf(err, errlen, "%s: out of memory for %ld trace events", path, n);
        return -1;
    }
    for (long i = 0; i < n; i++)
        t[i] = (trace_op_t){r->timeline[i], i, 0};
    qsort(t, n, sizeof *t, trace_cmp);
    assign_lanes(t, n);
    cJSON *c = job ? config_json(job, hw, sim_config, r) : NULL;
    char *config = c ? cJSON_PrintUnformatted(c) : NULL;
    out_file_t o;
    int rc = -1;
    if (job && !config)
        snprintf(err, errlen, "%s: out of memory formatting the configuration", path);
    else if (out_open(&o, path, "w", err, errlen) == 0) {
        trace_w_t w = {o.f, 1};
        emit_trace(&w, t, n, config);
        rc = out_close(&o, 0);
    }
    free(config);
    cJSON_Delete(c);
    free(t);
    return rc;
}
