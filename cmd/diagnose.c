/* cmd_diagnose: `megasim diagnose RESULT`: which rank a hang comes from,
 * and which ranks or links are slow.
 *   - RESULT a run directory (--save DIR, or its heartbeat folder): the
 *     wait-for graph of the ranks' last positions (real/health.h): who
 *     waits on whom, for which call, and the culprits with their (DP, PP,
 *     TP) coordinates, host and op.
 *   - RESULT a result file (run --out, simulate --out): stragglers from the
 *     per-rank accounts (/ranks): ranks whose compute time, and nodes
 *     whose transfer time, is an outlier by the median absolute deviation
 *     (robust: a few slow ranks among thousands move neither the median
 *     nor the MAD, where they would move a mean and a standard deviation),
 *     with their cost to the iteration. */
#include "cmd/cli.h"
#include "cmd/plot_data.h"
#include "model/layout.h"
#include "model/sched.h"
#include "real/health.h"
#include "sim/out.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    int json, help;
    double mads, min_excess;
} diagnose_opts_t;

#define DO(f) offsetof(diagnose_opts_t, f)
static const opt_def diagnose_defs[] = {
    {"mads", OPT_REAL, DO(mads), 1, 1000, "5", 0, "diagnose",
     "a straggler lies this many scaled median absolute deviations above the median"},
    {"min-excess", OPT_REAL, DO(min_excess), 0, 10, "0.02", 0, "diagnose",
     "and at least this fraction above the median (timer noise on identical ranks)"},
    {"json", OPT_BOOL, DO(json), 0, 1, "false", 0, "output", "print one JSON object instead of the report"},
    {"help", OPT_BOOL, DO(help), 0, 1, "false", 0, "output", "show this help"},
};
const opt_table diagnose_opts = {diagnose_defs, sizeof diagnose_defs / sizeof diagnose_defs[0], "diagnose option"};

/* ---- hangs: a run directory ------------------------------------------------ */

/* Every rank's record from dir (or dir/heartbeat) into rec (HB_MAX_WORLD). */
#define HB_MAX_WORLD 4096
static int read_heartbeats(const char *dir, hb_record_t *rec, int *world, char *err)
{
    char hbdir[1200];
    snprintf(hbdir, sizeof hbdir, "%s/heartbeat", dir);
    struct stat st;
    const char *d = stat(hbdir, &st) == 0 && S_ISDIR(st.st_mode) ? hbdir : dir;
    char rank0[1300];
    health_path(d, 0, rank0, sizeof rank0);
    if (access(rank0, R_OK)) {
        snprintf(err, OPT_ERR_LEN, "%s: no heartbeat of rank 0 (%s/rank-00000.hb); a run directory is megasim run's "
                 "--save DIR or --heartbeat DIR", dir, d);
        return -1;
    }
    return health_read_world(d, rec, HB_MAX_WORLD, world, err, OPT_ERR_LEN);
}

static cJSON *rank_json(const hb_record_t *h)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "rank", h->rank);
    cJSON_AddNumberToObject(o, "dp", h->dp_i);
    cJSON_AddNumberToObject(o, "pp", h->stage);
    cJSON_AddNumberToObject(o, "tp", h->tp_i);
    cJSON_AddStringToObject(o, "host", h->host);
    char op[160];
    snprintf(op, sizeof op, "step %d op %d (%s%s, micro-batch %d, chunk %d)", h->step, h->op, h->in_op ? "in " : "after ",
             health_op_name(h->op_kind), h->op_mb, h->op_chunk);
    cJSON_AddStringToObject(o, "op", op);
    if (h->error[0])
        cJSON_AddStringToObject(o, "error", h->error);
    cJSON *p = cJSON_AddArrayToObject(o, "in_calls");
    for (int i = 0; i < h->npending && i < HB_MAX_PENDING; i++) {
        char c[96];
        const hb_pending_t *q = &h->pending[i];
        if (q->kind == HB_COLL)
            snprintf(c, sizeof c, "collective %lld on %s", (long long)q->n, health_grp_name(q->grp));
        else
            snprintf(c, sizeof c, "%s %lld (tag %d) %s rank %d", q->kind == HB_RECV ? "receive" : "send",
                     (long long)q->n, q->tag, q->kind == HB_RECV ? "from" : "to", q->peer);
        cJSON_AddItemToArray(p, cJSON_CreateString(c));
    }
    return o;
}

static cJSON *hang_json(const char *dir, char *err)
{
    static hb_record_t rec[HB_MAX_WORLD];
    int world = 0;
    if (read_heartbeats(dir, rec, &world, err))
        return NULL;
    hb_wait_t *w = calloc((size_t)world, sizeof *w);
    int *chain = calloc((size_t)world, sizeof *chain), nchain = 0;
    if (!w || !chain) {
        free(w), free(chain);
        snprintf(err, OPT_ERR_LEN, "out of memory");
        return NULL;
    }
    /* "now" is the last moment any rank was alive: a job read after it
     * ended (or was stopped) judges liveness among its own ranks. */
    int64_t now = 0;
    for (int r = 0; r < world; r++)
        now = rec[r].beat_ns > now ? rec[r].beat_ns : now;
    health_waitfor(rec, world, now, w, chain, &nchain);
    cJSON *h = cJSON_CreateObject(), *cul = cJSON_AddArrayToObject(h, "culprits");
    cJSON *ch = cJSON_AddArrayToObject(h, "chain"), *ws = cJSON_AddArrayToObject(h, "waits");
    int done = 0;
    for (int r = 0; r < world; r++) {
        done += rec[r].state == HB_DONE;
        if (w[r].culprit) {
            cJSON *c = rank_json(&rec[r]);
            cJSON_AddStringToObject(c, "why", rec[r].state == HB_FAILED ? "failed" : w[r].dead ? "stopped beating"
                                                                                          : "waits on nobody");
            cJSON_AddItemToArray(cul, c);
        }
        for (int i = 0; i < w[r].nwait; i++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddNumberToObject(e, "rank", r);
            cJSON_AddNumberToObject(e, "waits_on", w[r].on[i]);
            cJSON_AddStringToObject(e, "for", w[r].why[i]);
            cJSON_AddItemToArray(ws, e);
        }
    }
    for (int i = 0; i < nchain; i++)
        cJSON_AddItemToArray(ch, rank_json(&rec[chain[i]]));
    cJSON *all = cJSON_AddArrayToObject(h, "ranks");
    for (int r = 0; r < world; r++)
        cJSON_AddItemToArray(all, rank_json(&rec[r]));
    cJSON_AddNumberToObject(h, "world", world);
    cJSON_AddNumberToObject(h, "ranks_done", done);
    free(w), free(chain);
    return h;
}

/* ---- stragglers: a result file -------------------------------------------- */

/* config_json's section.key (or hardware.cluster.key) as an int, or def. */
static int config_int(const cJSON *cfg, const char *section, const char *key, int def)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(cfg, section);
    if (!strcmp(section, "hardware"))
        s = cJSON_GetObjectItemCaseSensitive(s, "cluster");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, key);
    return cJSON_IsNumber(v) && v->valuedouble >= 1 && v->valuedouble < 1e9 ? v->valueint : def;
}

typedef struct {
    int rank, stands_for;
    double compute_s, pp_busy_s;
} row_t;

/* The weighted median of v (weights w) over n entries. */
static double wmedian(const double *v, const int *w, long n)
{
    double (*p)[2] = malloc(sizeof *p * (n ? n : 1)), tot = 0, acc = 0, m = 0;
    if (!p)
        return NAN;
    for (long i = 0; i < n; i++)
        p[i][0] = v[i], p[i][1] = w[i], tot += w[i];
    qsort(p, n, sizeof *p, cli_cmp_double);
    for (long i = 0; i < n; i++)
        if ((acc += p[i][1]) >= tot / 2) {
            m = p[i][0];
            break;
        }
    free(p);
    return m;
}

/* Entries above median + max(mads x 1.4826 MAD, min_excess x median). */
static void outliers(const diagnose_opts_t *o, const double *v, const int *w, long n, double *med, double *cut)
{
    double *dev = malloc(sizeof *dev * (n ? n : 1));
    *med = wmedian(v, w, n);
    for (long i = 0; dev && i < n; i++)
        dev[i] = fabs(v[i] - *med);
    double mad = dev ? wmedian(dev, w, n) : 0;
    free(dev);
    *cut = *med + fmax(o->mads * 1.4826 * mad, o->min_excess * fabs(*med));
}

static void add_straggler(cJSON *list, const char *key, int id, const int *ranks, int nranks, const char *kind,
                          double v, double med)
{
    cJSON *s = cJSON_CreateObject();
    cJSON_AddNumberToObject(s, key, id);
    if (ranks)
        cJSON_AddItemToObject(s, "ranks", cJSON_CreateIntArray(ranks, nranks));
    cJSON_AddStringToObject(s, "kind", kind);
    cJSON_AddNumberToObject(s, "factor", med > 0 ? v / med : INFINITY);
    cJSON_AddNumberToObject(s, "cost_s", v - med);
    cJSON_AddItemToArray(list, s);
}

typedef struct {
    layout_t grid; /* the job's TP, DP x CP, PP and rank order */
    int gpn;
} shape_t;

/* The pool a rank is judged in: its pipeline stage, whose ranks do the
 * same work, when it holds 3 DP replicas or more; else its kind of stage
 * (first, middle, last: the embedding and the loss make those differ). */
static int pool_of(const shape_t *sh, int rank)
{
    int stage = layout_pos(sh->grid, rank).stage;
    if (sh->grid.dp >= 3)
        return stage;
    return stage == 0 ? 0 : stage == sh->grid.pp - 1 ? 2 : 1;
}

/* Outliers of v in each pool; calls found(i, med) for each. */
static void pooled(const diagnose_opts_t *o, const shape_t *sh, const row_t *rows, const double *v, long n,
                   void (*found)(void *ctx, long i, double med), void *ctx)
{
    double *pv = malloc(sizeof *pv * (n ? n : 1));
    int *pw = malloc(sizeof *pw * (n ? n : 1)), npools = sh->grid.dp >= 3 ? sh->grid.pp : 3;
    for (int p = 0; pv && pw && p < npools; p++) {
        long m = 0;
        for (long i = 0; i < n; i++)
            if (pool_of(sh, rows[i].rank) == p)
                pv[m] = v[i], pw[m++] = rows[i].stands_for > 0 ? rows[i].stands_for : 1;
        if (m < 2)
            continue;
        double med, cut;
        outliers(o, pv, pw, m, &med, &cut);
        for (long i = 0; i < n; i++)
            if (pool_of(sh, rows[i].rank) == p && v[i] > cut)
                found(ctx, i, med);
    }
    free(pv), free(pw);
}

typedef struct {
    const shape_t *sh;
    const row_t *rows;
    const double *v;
    cJSON *list;
    int last_group;
    double *node_excess;        /* links: each node's excess, and its pool's median */
    double *node_med;
    int own;                    /* the compute times are each rank's own: a rank, not its TP group */
} found_t;

/* A slow rank slows its whole TP group (every layer meets in a TP
 * collective): unless the times are each rank's own (a measurement with
 * its waits), the group is what the records resolve, reported once. */
static void found_rank(void *ctx, long i, double med)
{
    found_t *f = ctx;
    int r = f->rows[i].rank, group = r / f->sh->grid.tp;
    if (f->own) {
        add_straggler(f->list, "rank", r, &r, 1, "compute", f->v[i], med);
        return;
    }
    if (group == f->last_group)
        return;
    f->last_group = group;
    int ranks[1024], n = 0;
    for (long k = 0; k < f->sh->grid.tp && n < 1024; k++)
        ranks[n++] = group * f->sh->grid.tp + (int)k;
    add_straggler(f->list, "rank", r, ranks, n, "compute", f->v[i], med);
}

static void found_link(void *ctx, long i, double med)
{
    found_t *f = ctx;
    int node = f->rows[i].rank / f->sh->gpn;
    if (f->v[i] - med > f->node_excess[node])
        f->node_excess[node] = f->v[i] - med, f->node_med[node] = med;
}

typedef struct {
    int rank, kind, iteration;
    double t_start_s, t_end_s, comm_wait_s, cpu_s;
} op_row_t;

/* A measurement's compute per rank from every op it timed: each step's
 * forward and backward passes summed, less the time the rank waited on
 * communication inside them (comm_wait_s: the CPU path's host blocked in
 * MPI, the GPU path's compute stream standing at NCCL calls; a rank
 * waiting in a TP collective for a slow partner is not slow itself;
 * *own = 1 when the file has it, so each rank's compute is its own); where
 * the CPU path recorded each pass's own CPU time (cpu_s), that instead: a
 * core's work does not change with the share of it that ranks sharing the
 * core left it, where its wall time does; then
 * the median over the steps after the first (warm-up). The median, not the mean: a step a rank lost to the
 * scheduler (more ranks than cores) or to a page fault moves a mean by as
 * much as a slow device does, and a median not at all. Rows outside the
 * job are skipped (the accounts' check names them). 0, or -1 when the file
 * has no timeline. */
#define MEASURED_MAX_CELLS (1L << 26) /* ranks x steps kept: the latest steps */
static int measured_compute(hid_t f, const char *path, row_t *rows, long n, int gpus, int *own, char *err)
{
    static const plot_col_t cols[] = {{"rank", offsetof(op_row_t, rank), 1}, {"kind", offsetof(op_row_t, kind), 1},
                                      {"iteration", offsetof(op_row_t, iteration), 1},
                                      {"t_start_s", offsetof(op_row_t, t_start_s), 0},
                                      {"t_end_s", offsetof(op_row_t, t_end_s), 0},
                                      {"comm_wait_s", offsetof(op_row_t, comm_wait_s), 0},
                                      {"cpu_s", offsetof(op_row_t, cpu_s), 0}};
    op_row_t *ops = NULL;
    long nops = 0;
    if (gpus > (1 << 24))
        return -1;
    /* files before 2026-11-29 have neither column, files of that day's fifth session no cpu_s */
    int waits = plot_has_column(f, "/timeline", "comm_wait_s"), cpu = waits && plot_has_column(f, "/timeline", "cpu_s");
    if (plot_read_table(f, path, "/timeline", cols, waits ? 6 + cpu : 5, sizeof *ops, (void **)&ops, &nops, err,
                        OPT_ERR_LEN) != PLOT_OK || nops <= 0) {
        free(ops);
        return -1;
    }
    int last = 0;
    for (long i = 0; i < nops; i++)
        last = ops[i].iteration > last ? ops[i].iteration : last;
    /* steps first..last: all but the warm-up, or the only one */
    long first = last ? 1 : 0, nsteps = last - first + 1;
    if (nsteps * gpus > MEASURED_MAX_CELLS)
        nsteps = MEASURED_MAX_CELLS / gpus, first = last - nsteps + 1;
    double *sum = calloc((size_t)(gpus * nsteps), sizeof *sum), *mine = malloc(sizeof *mine * nsteps);
    for (long i = 0; sum && i < nops; i++) {
        double w = waits && isfinite(ops[i].comm_wait_s) && ops[i].comm_wait_s > 0 ? ops[i].comm_wait_s : 0;
        int own_cpu = cpu && isfinite(ops[i].cpu_s) && ops[i].cpu_s >= 0;
        double busy = own_cpu ? ops[i].cpu_s : ops[i].t_end_s - ops[i].t_start_s - w;
        *own |= w > 0 || own_cpu;
        if (ops[i].rank >= 0 && ops[i].rank < gpus && (ops[i].kind == SOP_FWD || ops[i].kind == SOP_BWD) &&
            ops[i].iteration >= first && isfinite(busy))
            sum[ops[i].rank * nsteps + ops[i].iteration - first] += busy;
    }
    for (long i = 0; sum && mine && i < n; i++)
        if (rows[i].rank >= 0 && rows[i].rank < gpus) {
            memcpy(mine, sum + rows[i].rank * nsteps, sizeof *mine * nsteps);
            qsort(mine, nsteps, sizeof *mine, cli_cmp_double);
            rows[i].compute_s = nsteps % 2 ? mine[nsteps / 2] : (mine[nsteps / 2 - 1] + mine[nsteps / 2]) / 2;
        }
    free(sum), free(mine);
    free(ops);
    return 0;
}

static cJSON *stragglers_json(const diagnose_opts_t *o, const char *path, char *err)
{
    hid_t f;
    char kind[64];
    if (plot_open_result(path, &f, kind, sizeof kind, err, OPT_ERR_LEN) != PLOT_OK)
        return NULL;
    static const plot_col_t cols[] = {{"rank", offsetof(row_t, rank), 1}, {"stands_for", offsetof(row_t, stands_for), 1},
                                      {"compute_s", offsetof(row_t, compute_s), 0},
                                      {"pp_busy_s", offsetof(row_t, pp_busy_s), 0}};
    row_t *rows = NULL;
    long n = 0;
    cJSON *cfg = NULL;
    int rc = 0;
    if (strcmp(kind, "simulation") && strcmp(kind, "measurement")) {
        snprintf(err, OPT_ERR_LEN, "%s: kind '%s'; diagnose reads a simulation (simulate --out), a measurement "
                 "(run --out) or a run directory", path, kind);
        rc = -1;
    } else if (plot_read_table(f, path, "/ranks", cols, 4, sizeof *rows, (void **)&rows, &n, err, OPT_ERR_LEN) !=
               PLOT_OK) {
        rc = -1;
    } else if (n < 0) {
        snprintf(err, OPT_ERR_LEN, "%s: no /ranks table: not a complete megasim result file", path);
        rc = -1;
    } else {
        rc = out_h5_attr_json(f, path, "config_json", &cfg, err, OPT_ERR_LEN);
    }
    int own = 0; /* each rank's compute its own (not its TP group's) */
    if (!rc && !strcmp(kind, "measurement") &&
        measured_compute(f, path, rows, n, config_int(cfg, "job", "num_gpus", 1), &own, err))
        err[0] = 0; /* no timeline: the accounts stand */
    H5Fclose(f);
    if (rc) {
        free(rows);
        return NULL;
    }
    const cJSON *order = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cfg, "job"),
                                                          "use_tp_pp_dp_mapping");
    shape_t sh = {{config_int(cfg, "job", "tensor_model_parallel_size", 1), 0,
                   config_int(cfg, "job", "pipeline_model_parallel_size", 1), cJSON_IsTrue(order),
                   config_int(cfg, "job", "context_parallel_size", 1)},
                  config_int(cfg, "hardware", "gpus_per_node", 8)};
    int gpus = config_int(cfg, "job", "num_gpus", 1);
    int mp = sh.grid.tp * sh.grid.pp;
    sh.grid.dp = gpus / mp > 0 ? gpus / mp : 1;
    cJSON_Delete(cfg);
    /* What the file claims, checked before it indexes anything. */
    for (long i = 0; i < n && !rc; i++)
        if (rows[i].rank < 0 || rows[i].rank >= gpus || rows[i].stands_for < 0 || gpus > (1 << 24) ||
            !isfinite(rows[i].compute_s) || !isfinite(rows[i].pp_busy_s)) {
            snprintf(err, OPT_ERR_LEN, "%s: /ranks row %ld (rank %d, %d GPUs in its job): not a row of this job; a "
                     "damaged or edited file", path, i, rows[i].rank, gpus);
            rc = -1;
        }
    if (rc) {
        free(rows);
        return NULL;
    }
    double *v = malloc(sizeof *v * (n ? n : 1));
    int nodes = (gpus + sh.gpn - 1) / sh.gpn;
    found_t fd = {&sh, rows, v, cJSON_CreateArray(), -1, calloc((size_t)nodes + 1, sizeof(double)),
                  calloc((size_t)nodes + 1, sizeof(double)), own};
    if (v && fd.node_excess && fd.node_med) {
        for (long i = 0; i < n; i++)
            v[i] = rows[i].compute_s;
        pooled(o, &sh, rows, v, n, found_rank, &fd);
        /* Links: a node's pipeline transfers, in which a slow NIC and its
         * partners' receives both show; the node is the one of a
         * neighbouring pair (stages s and s + 1 at the same TP and DP
         * place, and the last and the first, which an interleaved
         * schedule joins) with the larger excess. */
        for (long i = 0; i < n; i++)
            v[i] = rows[i].pp_busy_s;
        pooled(o, &sh, rows, v, n, found_link, &fd);
        /* nodes between neighbouring stages; the last-to-first wrap spans
         * the cluster only in the default order (tp-pp-dp: one replica's) */
        int stride = layout_rank(sh.grid, 0, 0, 1), hop = stride / sh.gpn > 0 ? stride / sh.gpn : 1;
        int wrap = (sh.grid.pp - 1) * hop, wraps = sh.grid.pp > 2 && !sh.grid.pp_inner;
        for (int node = 0; node < nodes; node++) {
            double e = fd.node_excess[node];
            int first = node < hop, last = node >= nodes - hop;
            if (!(e > 0) || (node >= hop && fd.node_excess[node - hop] > e) ||
                (node + hop < nodes && fd.node_excess[node + hop] > e) ||
                (wraps && first && fd.node_excess[node + wrap] > e) ||
                (wraps && last && fd.node_excess[node - wrap] > e))
                continue;
            add_straggler(fd.list, "link", node, NULL, 0, "transfer", fd.node_med[node] + e, fd.node_med[node]);
        }
    }
    free(v), free(rows), free(fd.node_excess), free(fd.node_med);
    return fd.list;
}

/* ---- the command ------------------------------------------------------------ */

static void print_text(const cJSON *hang, const cJSON *strag)
{
    if (hang) {
        const cJSON *c, *cul = cJSON_GetObjectItem(hang, "culprits"), *ch = cJSON_GetObjectItem(hang, "chain");
        printf("megasim diagnose: %d ranks, %d finished\n", cJSON_GetObjectItem(hang, "world")->valueint,
               cJSON_GetObjectItem(hang, "ranks_done")->valueint);
        if (!cJSON_GetArraySize(cul))
            printf("no hang: no rank waits on another, none failed or stopped beating\n");
        cJSON_ArrayForEach(c, cul)
        printf("culprit: rank %d (DP %d, PP %d, TP %d) on %s, %s: %s%s%s\n", cJSON_GetObjectItem(c, "rank")->valueint,
               cJSON_GetObjectItem(c, "dp")->valueint, cJSON_GetObjectItem(c, "pp")->valueint,
               cJSON_GetObjectItem(c, "tp")->valueint, cJSON_GetObjectItem(c, "host")->valuestring,
               cJSON_GetObjectItem(c, "why")->valuestring, cJSON_GetObjectItem(c, "op")->valuestring,
               cJSON_GetObjectItem(c, "error") ? "; " : "",
               cJSON_GetObjectItem(c, "error") ? cJSON_GetObjectItem(c, "error")->valuestring : "");
        if (cJSON_GetArraySize(ch) > 1) {
            printf("chain:");
            cJSON_ArrayForEach(c, ch)
            printf(" %s rank %d", c == ch->child ? "" : "->", cJSON_GetObjectItem(c, "rank")->valueint);
            printf("\n");
        }
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(hang, "waits"))
        printf("  rank %d waits on rank %d: %s\n", cJSON_GetObjectItem(c, "rank")->valueint,
               cJSON_GetObjectItem(c, "waits_on")->valueint, cJSON_GetObjectItem(c, "for")->valuestring);
    }
    if (strag) {
        const cJSON *s;
        printf("%d straggler(s) (median absolute deviation; diagnose --help)\n", cJSON_GetArraySize(strag));
        cJSON_ArrayForEach(s, strag)
        {
            const cJSON *r = cJSON_GetObjectItem(s, "rank"), *rs = cJSON_GetObjectItem(s, "ranks");
            double x = cJSON_GetObjectItem(s, "factor")->valuedouble, c = cJSON_GetObjectItem(s, "cost_s")->valuedouble;
            int n = rs ? cJSON_GetArraySize(rs) : 0;
            if (r && n > 1)
                printf("  TP group of ranks %d-%d: compute time x%.3f of its stage's median, %.4g s more per "
                       "iteration\n", rs->child->valueint, cJSON_GetArrayItem(rs, n - 1)->valueint, x, c);
            else if (r)
                printf("  rank %d: compute time x%.3f of its stage's median, %.4g s more per iteration\n",
                       r->valueint, x, c);
            else
                printf("  node %d (its NICs): pipeline transfers busy x%.3f of the median, %.4g s more per "
                       "iteration\n", cJSON_GetObjectItem(s, "link")->valueint, x, c);
        }
    }
}

int cmd_diagnose(int argc, char **argv)
{
    diagnose_opts_t o;
    const char *pos[1];
    int npos = 0;
    char err[OPT_ERR_LEN] = "";
    if (cli_wants_help(argc, argv))
        return 0;
    opts_set_defaults(&diagnose_opts, &o);
    if (cli_parse_flags(&diagnose_opts, &o, argc, argv, pos, 1, &npos, "one RESULT only; '%s' is another", err))
        return cli_fail("diagnose", err);
    if (!npos)
        return cli_fail("diagnose", "give RESULT: a run directory (run --save DIR), a run --out or a simulate --out "
                                    "file");
    struct stat st;
    if (stat(pos[0], &st)) {
        snprintf(err, sizeof err, "%s: no such file or run directory", pos[0]);
        return cli_fail("diagnose", err);
    }
    cJSON *hang = NULL, *strag = NULL;
    if (S_ISDIR(st.st_mode) ? !(hang = hang_json(pos[0], err)) : !(strag = stragglers_json(&o, pos[0], err)))
        return cli_fail("diagnose", err);
    cJSON *out = cJSON_CreateObject();
    cJSON_AddItemToObject(out, "hang", hang ? hang : cJSON_CreateObject());
    if (!hang) {
        cJSON *h = cJSON_GetObjectItem(out, "hang");
        cJSON_AddArrayToObject(h, "culprits"), cJSON_AddArrayToObject(h, "chain");
    }
    cJSON_AddItemToObject(out, "stragglers", strag ? strag : cJSON_CreateArray());
    if (o.json)
        cli_print_json(out);
    else {
        print_text(hang, strag);
        cJSON_Delete(out);
    }
    return 0;
}
