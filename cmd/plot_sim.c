/* cmd/plot_sim.c: the figures of a simulation or a measurement result
 * file (docs/schema.md): the pipeline timeline of the traced ranks
 * (/timeline; of a measurement, its last iteration) and the per-rank heat
 * map (/ranks) with the stragglers that were injected, each titled by the
 * job in one line. */
#include "cmd/plot_int.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- simulation: the job in one line -------------------------------- */

/* root[sec][key] as a number, def if absent (root may be NULL). */
static double cfg_num(const cJSON *root, const char *sec, const char *key, double def)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, sec);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, key);
    return cJSON_IsNumber(v) ? v->valuedouble : def;
}

static double job_num(const plot_ctx_t *c, const char *sec, const char *key, double def)
{
    return cfg_num(c->config, sec, key, def);
}

/* A recorded count: def unless a whole number 1 to PLOT_MAX_RANK (an edited
 * file may hold anything; F02: 65536 x 65536 overflowed int). */
static int cfg_count(const cJSON *root, const char *sec, const char *key, int def)
{
    double v = cfg_num(root, sec, key, def);
    return v >= 1 && v <= PLOT_MAX_RANK && v == floor(v) ? (int)v : def;
}

static const char *job_str(const plot_ctx_t *c, const char *sec, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c->config, sec), key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static int is_measurement(const plot_ctx_t *c)
{
    return !strcmp(c->set->kind, "measurement");
}

/* "32 GPUs = TP 2 x PP 4 x DP 4, megascale preset, iteration 0.253 s";
 * a measurement says "measured, mean step 0.675 s". */
static void job_line(const plot_ctx_t *c, char *buf, size_t size)
{
    int gpus = cfg_count(c->config, "job", "num_gpus", 1), tp = cfg_count(c->config, "job", "tensor_model_parallel_size", 1);
    int pp = cfg_count(c->config, "job", "pipeline_model_parallel_size", 1);
    double it_s = 0;
    int k = snprintf(buf, size, "%d GPUs = TP %d x PP %d x DP %lld, %s preset", gpus, tp, pp,
                     gpus / ((long long)tp * pp), job_str(c, "job", "preset"));
    if (k > 0 && (size_t)k < size && plot_attr_f64(c->file, "/summary", "iteration_time_s", &it_s) == 0)
        snprintf(buf + k, size - k, is_measurement(c) ? ", measured, mean step %.4g s" : ", iteration %.4g s", it_s);
}

/* ---- simulation: /timeline (Gantt) ---------------------------------- */

typedef struct {
    int32_t rank, stream, kind, mb, chunk;
    double t_ready_s, t_start_s, t_end_s;
    int32_t iteration; /* measurements record several; read only for them */
} op_row_t;

#define OC(f, i) {#f, offsetof(op_row_t, f), i}
static const plot_col_t op_cols[] = {OC(rank, 1),      OC(stream, 1),      OC(kind, 1),
                                     OC(mb, 1),        OC(chunk, 1),       OC(t_ready_s, 0),
                                     OC(t_start_s, 0), OC(t_end_s, 0),     OC(iteration, 1)};

typedef struct {
    char *stream_buf, *kind_buf, *streams[MAX_NAMES], *kinds[MAX_NAMES];
    int nstreams, nkinds;
} names_t;

static void names_read(plot_ctx_t *c, names_t *nm)
{
    nm->stream_buf = plot_attr_str(c->file, "/timeline", "stream_names");
    nm->kind_buf = plot_attr_str(c->file, "/timeline", "kind_names");
    nm->nstreams = nm->stream_buf ? plot_split(nm->stream_buf, ',', nm->streams, MAX_NAMES) : 0;
    nm->nkinds = nm->kind_buf ? plot_split(nm->kind_buf, ',', nm->kinds, MAX_NAMES) : 0;
}

/* Lanes top to bottom: for each traced rank (ascending), one per stream;
 * a blank lane between ranks. y = rank_index * (nstreams + 1) + stream. */
static void timeline_vars(plot_fig_t *f, const names_t *nm, int nstreams, const int *ranks, int nranks,
                          const int *kind_seen, const op_row_t *r, long n)
{
    char ytics[PLOT_VARS_LEN / 2] = "set ytics (", kinds[1024] = "", ids[256] = "";
    size_t k = strlen(ytics);
    for (int i = 0; i < nranks; i++)
        for (int s = 0; s < nstreams; s++)
            k += snprintf(ytics + k, k < sizeof ytics ? sizeof ytics - k : 0, "%s\"rank %d %s\" %d",
                          i || s ? ", " : "", ranks[i], s < nm->nstreams ? nm->streams[s] : "?",
                          i * (nstreams + 1) + s);
    if (k + 2 < sizeof ytics)
        strcat(ytics, ")");
    else
        snprintf(ytics, sizeof ytics, "set ytics autofreq");
    for (int i = 0; i < MAX_NAMES; i++) {
        if (!kind_seen[i])
            continue;
        char name[64];
        snprintf(name, sizeof name, "%s", i < nm->nkinds ? nm->kinds[i] : "op");
        for (char *p = name; *p; p++)
            if (*p == ' ')
                *p = '_';
        size_t a = strlen(kinds), b = strlen(ids);
        snprintf(kinds + a, sizeof kinds - a, "%s%s", a ? " " : "", name);
        snprintf(ids + b, sizeof ids - b, "%s%d", b ? " " : "", i);
    }
    int wait = 0;
    double t_end = 0;
    for (long i = 0; i < n; i++) {
        wait |= r[i].t_start_s > r[i].t_ready_s;
        if (r[i].t_end_s > t_end)
            t_end = r[i].t_end_s;
    }
    plot_var_str(f, "ytics_cmd", ytics);
    plot_var_str(f, "kinds", kinds);
    plot_var_str(f, "kindids", ids);
    plot_var_num(f, "nlanes", nranks * (nstreams + 1) - 1);
    plot_var_num(f, "nranks", nranks);
    plot_var_num(f, "haswait", wait);
    plot_var_num(f, "t_end", t_end);
}

static int rank_index(const int *ranks, int n, int rank)
{
    for (int i = 0; i < n; i++)
        if (ranks[i] == rank)
            return i;
    return -1;
}

/* Columns: y rank stream kind mb chunk t_ready_s t_start_s t_end_s.
 * step > 0: a measurement's step (its last), named in the subtitle. */
static int write_timeline(plot_ctx_t *c, const op_row_t *r, long n, int step)
{
    names_t nm;
    names_read(c, &nm);
    int nstreams = nm.nstreams, kind_seen[MAX_NAMES] = {0}, *ranks = malloc(sizeof(int) * n), nranks = 0;
    if (!ranks)
        return plot_fail(c, PLOT_IO_ERROR, "out of memory");
    for (long i = 0; i < n; i++) {
        if (r[i].stream >= nstreams)
            nstreams = r[i].stream + 1;
        if (r[i].kind >= 0 && r[i].kind < MAX_NAMES)
            kind_seen[r[i].kind] = 1;
        ranks[nranks++] = r[i].rank;
    }
    qsort(ranks, nranks, sizeof *ranks, plot_cmp_int);
    int u = 0;
    for (int i = 0; i < nranks; i++)
        if (!u || ranks[u - 1] != ranks[i])
            ranks[u++] = ranks[i];
    nranks = u;
    plot_fig_t *f;
    FILE *fp = plot_fig_open(c, "timeline", "pipeline timeline of the traced ranks (/timeline)", &f);
    int rc = PLOT_IO_ERROR;
    if (fp) {
        fprintf(fp, "# seconds from the iteration start. columns: y rank stream kind mb chunk t_ready_s t_start_s "
                    "t_end_s (y: lane, rank_index * (streams + 1) + stream)\n");
        for (long i = 0; i < n; i++)
            fprintf(fp, "%d %d %d %d %d %d %.9f %.9f %.9f\n",
                    rank_index(ranks, nranks, r[i].rank) * (nstreams + 1) + r[i].stream, r[i].rank, r[i].stream,
                    r[i].kind, r[i].mb, r[i].chunk, r[i].t_ready_s, r[i].t_start_s, r[i].t_end_s);
        char line[512];
        job_line(c, line, sizeof line);
        if (step > 0) {
            size_t k = strlen(line);
            snprintf(line + k, sizeof line - k, "; timeline of step %d", step);
        }
        plot_var_str(f, "subtitle", line);
        timeline_vars(f, &nm, nstreams, ranks, nranks, kind_seen, r, n);
        rc = plot_fig_close(c, f, fp, n);
    }
    free(ranks);
    free(nm.stream_buf);
    free(nm.kind_buf);
    return rc;
}

/* A measurement's timeline holds every iteration (times from each one's
 * start): keep the last one's rows, in place; its number in *iter. */
static long last_iteration(op_row_t *r, long n, int *iter)
{
    *iter = 0;
    for (long i = 0; i < n; i++)
        if (r[i].iteration > *iter)
            *iter = r[i].iteration;
    long m = 0;
    for (long i = 0; i < n; i++)
        if (r[i].iteration == *iter)
            r[m++] = r[i];
    return m;
}

int plot_fig_timeline(plot_ctx_t *c)
{
    void *rows;
    long n;
    int per_iter = is_measurement(c) && plot_has_column(c->file, "/timeline", "iteration"), iter = 0;
    int rc = plot_ctx_table(c, "/timeline", op_cols, per_iter ? 9 : 8, sizeof(op_row_t), &rows, &n);
    for (long i = 0; rc == PLOT_OK && i < n; i++) { /* F08, F09: every field in range before any arithmetic */
        const op_row_t *o = (const op_row_t *)rows + i;
        if (o->stream < 0 || o->stream >= MAX_NAMES || o->rank < 0 || o->rank >= PLOT_MAX_RANK ||
            o->kind < 0 || o->kind >= MAX_NAMES || (per_iter && (o->iteration < 0 || o->iteration >= PLOT_MAX_RANK)))
            rc = plot_fail(c, PLOT_BAD_INPUT, "/timeline row %ld: rank %d, stream %d, kind %d, iteration %d out of "
                           "range (ranks and iterations 0 to %d, streams and kinds 0 to %d)", i, o->rank, o->stream,
                           o->kind, per_iter ? o->iteration : 0, PLOT_MAX_RANK - 1, MAX_NAMES - 1);
        else if (!isfinite(o->t_ready_s) || !isfinite(o->t_start_s) || !isfinite(o->t_end_s))
            rc = plot_fail(c, PLOT_BAD_INPUT, "/timeline row %ld: times %g, %g, %g s are not all finite", i,
                           o->t_ready_s, o->t_start_s, o->t_end_s);
    }
    if (rc == PLOT_OK && per_iter)
        n = last_iteration(rows, n, &iter);
    if (rc == PLOT_OK && n > 0)
        rc = write_timeline(c, rows, n, per_iter ? iter + 1 : 0);
    free(rows);
    return rc;
}

/* ---- simulation: /ranks (heat map) ---------------------------------- */

typedef struct {
    int32_t rank, stands_for;
    double compute_s, end_s;
} rank_row_t;

#define KC(f, i) {#f, offsetof(rank_row_t, f), i}
static const plot_col_t rank_cols[] = {KC(rank, 1), KC(stands_for, 1), KC(compute_s, 0), KC(end_s, 0)};

/* The injected --slow-rank factor of `rank` (recorded in config_json's
 * "simulate" section), 1 if none. */
static double slow_factor(const plot_ctx_t *c, int rank)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", job_str(c, "simulate", "slow_rank"));
    char *items[256];
    int n = buf[0] ? plot_split(buf, ',', items, 256) : 0;
    for (int i = 0; i < n; i++) {
        char *colon = strchr(items[i], ':');
        if (colon && atoi(items[i]) == rank)
            return atof(colon + 1);
    }
    return 1;
}

/* " --FLAG LIST" for the title, or, when LIST (ID:FACTOR,...) is too long
 * for one title line, " --FLAG: N WHAT x LO to x HI". */
static int injected_list(char *buf, size_t size, const char *flag, const char *list, const char *what)
{
    if (strlen(list) <= 48)
        return snprintf(buf, size, " --%s %s", flag, list);
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", list);
    char *items[256];
    int n = plot_split(copy, ',', items, 256);
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < n; i++) {
        const char *colon = strchr(items[i], ':');
        double f = colon ? atof(colon + 1) : 1;
        lo = fmin(lo, f), hi = fmax(hi, f);
    }
    return snprintf(buf, size, " --%s: %d %s, x%g to x%g", flag, n, what, lo, hi);
}

/* What was injected, for the title. */
static void straggler_line(const plot_ctx_t *c, char *buf, size_t size)
{
    const char *sr = job_str(c, "simulate", "slow_rank"), *sl = job_str(c, "simulate", "slow_link");
    double sh = job_num(c, "simulate", "slow_hosts", 0);
    int k = snprintf(buf, size, "injected:");
    if (sr[0])
        k += injected_list(buf + k, size - k, "slow-rank", sr, "ranks (labelled)");
    if (sl[0] && (size_t)k < size)
        k += injected_list(buf + k, size - k, "slow-link", sl, "links");
    if (sh > 0 && (size_t)k < size)
        k += snprintf(buf + k, size - k, " --slow-hosts %g (x%g, seed %g; not marked)", sh,
                      job_num(c, "simulate", "slow_factor", 1.1), job_num(c, "simulate", "seed", 1));
    if (!sr[0] && !sl[0] && sh <= 0)
        snprintf(buf, size, "no stragglers injected");
}

/* Columns: node gpu compute_s rank slow_factor stands_for end_s; the grid
 * is nodes (x) by GPUs per node (y): rank = node * gpus_per_node + gpu. */
static int write_heatmap(plot_ctx_t *c, const rank_row_t *r, long n)
{
    int gpn = cfg_count(cJSON_GetObjectItemCaseSensitive(c->config, "hardware"), "cluster", "gpus_per_node", 8);
    int max_rank = 0, folded = 0;
    for (long i = 0; i < n; i++) {
        if (r[i].rank > max_rank)
            max_rank = r[i].rank;
        folded |= r[i].stands_for > 1;
    }
    int gpus = cfg_count(c->config, "job", "num_gpus", max_rank + 1);
    plot_fig_t *f;
    FILE *fp = plot_fig_open(c, "heatmap", "compute time per rank (/ranks)", &f);
    if (!fp)
        return PLOT_IO_ERROR;
    fprintf(fp, "# columns: node gpu compute_s rank slow_factor stands_for end_s (rank = node * %d + gpu)\n", gpn);
    for (long i = 0; i < n; i++)
        fprintf(fp, "%d %d %.9f %d %g %d %.9f\n", r[i].rank / gpn, r[i].rank % gpn, r[i].compute_s, r[i].rank,
                slow_factor(c, r[i].rank), r[i].stands_for, r[i].end_s);
    char line[512], inj[512];
    job_line(c, line, sizeof line);
    straggler_line(c, inj, sizeof inj);
    plot_var_str(f, "subtitle", line);
    plot_var_str(f, "injected", inj);
    plot_var_num(f, "gpn", gpn);
    plot_var_num(f, "nnodes", ((long long)(gpus > max_rank ? gpus : max_rank + 1) + gpn - 1) / gpn);
    plot_var_num(f, "folded", folded);
    return plot_fig_close(c, f, fp, n);
}

int plot_fig_heatmap(plot_ctx_t *c)
{
    void *rows;
    long n;
    int rc = plot_ctx_table(c, "/ranks", rank_cols, 4, sizeof(rank_row_t), &rows, &n);
    for (long i = 0; rc == PLOT_OK && i < n; i++) {
        const rank_row_t *k = (const rank_row_t *)rows + i;
        if (k->rank < 0 || k->rank >= PLOT_MAX_RANK || k->stands_for < 1 || !isfinite(k->compute_s) ||
            !isfinite(k->end_s)) /* F09: no non-finite value reaches a figure */
            rc = plot_fail(c, PLOT_BAD_INPUT, "/ranks row %ld: rank %d, stands_for %d, compute_s %g, end_s %g: "
                           "allowed a rank 0 to %d, stands_for >= 1 and finite times", i, k->rank, k->stands_for,
                           k->compute_s, k->end_s, PLOT_MAX_RANK - 1);
    }
    if (rc == PLOT_OK && n > 1)
        rc = write_heatmap(c, rows, n);
    free(rows);
    return rc;
}
