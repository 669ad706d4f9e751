/* test_output: the simulator's result files (sim/output.h, docs/schema.md).
 *
 *   test_sim_output lib          writes the HDF5 file and the Chrome trace of
 *                                a small job, reads them back (HDF5 C API,
 *                                cJSON) and checks them against the result
 *                                in memory; two writes are byte-identical;
 *                                failed writes leave no file behind.
 *   test_sim_output cli MEGASIM  runs `megasim simulate --out --trace` and
 *                                `h5dump -H` on the file (skipped, exit 77,
 *                                without h5dump). */
#include "sim/output.h"
#include "../check.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* TP 2 x PP 4 x DP 4, 2 model chunks (16 layers): small, every stream used. */
static const char *job_args = "--num-gpus 32 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 "
                              "--global-batch-size 64 --num-layers 16 --hidden-size 2048 --num-attention-heads 16";

static char dir[512]; /* fresh temporary directory of this run */

static int make_dir(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/megasim_output_XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return -1;
    }
    return 0;
}

static const char *in_dir(const char *name, char *buf, size_t size)
{
    snprintf(buf, size, "%s/%s", dir, name);
    return buf;
}

static int make_job(job_t *j, hw_t *hw)
{
    char err[OPT_ERR_LEN], buf[1024], *argv[64];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", job_args);
    for (char *t = strtok(buf, " "); t && argc < 64; t = strtok(NULL, " "))
        argv[argc++] = t;
    if (job_parse(j, argc, argv, NULL, NULL, err) || job_hardware(j, hw, err) || job_finalize(j, 8, err)) {
        printf("setup: %s\n", err);
        return -1;
    }
    return 0;
}

static int simulate(const job_t *j, const hw_t *hw, const char *trace, result_t *r)
{
    static sim_opts_t o;
    char err[OPT_ERR_LEN];
    memset(&o, 0, sizeof o);
    o.fold = 1;
    if (sim_parse_ranks(trace, "trace-ranks", j->num_gpus, SIM_MAX_TRACE, o.trace_ranks, &o.ntrace, err, sizeof err) ||
        sim_run(j, hw, &o, r, err, sizeof err)) {
        printf("sim: %s\n", err);
        return -1;
    }
    return 0;
}

/* ---- reading HDF5 back ---------------------------------------------- */

static char *read_attr_str(hid_t loc, const char *name)
{
    /* read with the stored type, as the schema says it is: a fixed-length,
     * NUL-terminated UTF-8 string (nothing in HDF5's global heap) */
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT), t = a >= 0 ? H5Aget_type(a) : -1;
    char *v = NULL;
    size_t n = t >= 0 ? H5Tget_size(t) : 0;
    if (t >= 0 && H5Tget_class(t) == H5T_STRING && H5Tis_variable_str(t) == 0 && H5Tget_cset(t) == H5T_CSET_UTF8 &&
        H5Tget_strpad(t) == H5T_STR_NULLTERM && (v = calloc(n + 1, 1)) && H5Aread(a, t, v) < 0) {
        free(v);
        v = NULL;
    }
    if (t >= 0)
        H5Tclose(t);
    if (a >= 0)
        H5Aclose(a);
    return v;
}

static double read_attr_f64(hid_t loc, const char *name)
{
    double v = -1;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    if (a < 0 || H5Aread(a, H5T_NATIVE_DOUBLE, &v) < 0)
        v = -1;
    if (a >= 0)
        H5Aclose(a);
    return v;
}

/* Reads one column of dataset `name` into a double array; rows in *n. */
static double *read_column(hid_t f, const char *name, const char *col, long *n)
{
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT), s = d >= 0 ? H5Dget_space(d) : -1;
    hsize_t rows = 0;
    *n = -1;
    if (s < 0 || H5Sget_simple_extent_dims(s, &rows, NULL) != 1) {
        if (d >= 0)
            H5Dclose(d);
        return NULL;
    }
    double *v = calloc(rows + 1, sizeof *v);
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(double));
    H5Tinsert(t, col, 0, H5T_NATIVE_DOUBLE);
    if (rows && H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0)
        free(v), v = NULL;
    else
        *n = (long)rows;
    H5Tclose(t), H5Sclose(s), H5Dclose(d);
    return v;
}

static void check_root(hid_t f)
{
    char *kind = read_attr_str(f, "kind"), *ver = read_attr_str(f, "megasim_version");
    char *cfg = read_attr_str(f, "config_json");
    check_true("root attribute kind = simulation", kind && !strcmp(kind, "simulation"), kind ? kind : "(missing)");
    check_true("root attribute megasim_version", ver && !strcmp(ver, MEGASIM_VERSION), ver ? ver : "(missing)");
    cJSON *c = cfg ? cJSON_Parse(cfg) : NULL;
    check_true("config_json parses with cJSON", c != NULL, cfg ? "" : "(missing)");
    cJSON *ng = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "job"), "num_gpus");
    check_rel("config_json job.num_gpus", 32, cJSON_IsNumber(ng) ? ng->valuedouble : -1, 0, "--num-gpus 32");
    cJSON_Delete(c);
    free(kind), free(ver), free(cfg);
}

static void check_summary(hid_t f, const job_t *j, const hw_t *hw, const estimate_t *e, const result_t *r)
{
    hid_t g = H5Gopen2(f, "/summary", H5P_DEFAULT);
    check_rel("/summary iteration_time_s", r->iteration_ns * 1e-9, read_attr_f64(g, "iteration_time_s"), 0,
              "r.iteration_ns * 1e-9");
    check_rel("/summary compute_s", r->critical.compute * 1e-9, read_attr_f64(g, "compute_s"), 0,
              "r.critical.compute * 1e-9");
    check_rel("/summary closed_form_iteration_time_s", e->iteration_s,
              read_attr_f64(g, "closed_form_iteration_time_s"), 0, "estimate_job");
    /* every key of `simulate --json` is on /summary with the same value */
    cJSON *js = sim_summary_json(j, hw, e, r, NULL);
    int same = 0;
    for (int i = 0; i < sim_summary_nfields; i++) {
        const sim_summary_field_t *fd = &sim_summary_fields[i];
        cJSON *sec = fd->section == SIM_SUM_TOP ? js
                     : cJSON_GetObjectItem(js, fd->section == SIM_SUM_BREAKDOWN ? "breakdown" : "simulation");
        cJSON *v = cJSON_GetObjectItem(sec, fd->key);
        double jv = cJSON_IsBool(v) ? cJSON_IsTrue(v) : v ? v->valuedouble : -12345;
        same += jv == read_attr_f64(g, fd->key);
    }
    check_rel("/summary keys equal to --json values", sim_summary_nfields, same, 0, "sim_summary_json");
    cJSON_Delete(js);
    H5Gclose(g);
}

static void check_ranks(hid_t f, const result_t *r)
{
    long n, n2;
    double *count = read_column(f, "/ranks", "stands_for", &n), *end = read_column(f, "/ranks", "end_s", &n2);
    check_rel("/ranks rows", r->entities, n, 0, "r.entities (folded: classes x stages)");
    double sum = 0, last = 0;
    for (long i = 0; count && end && i < n; i++)
        sum += count[i], last = end[i] > last ? end[i] : last;
    check_rel("/ranks sum of stands_for", 32, sum, 0, "every rank is stood for once");
    check_rel("/ranks max end_s", r->iteration_ns * 1e-9, last, 0, "iteration ends with the last entity");
    free(count), free(end);
}

static void check_timeline(hid_t f, const result_t *r)
{
    long n, n2, n3;
    double *ready = read_column(f, "/timeline", "t_ready_s", &n), *start = read_column(f, "/timeline", "t_start_s", &n2),
           *end = read_column(f, "/timeline", "t_end_s", &n3);
    check_rel("/timeline rows", r->ntimeline, n, 0, "r.ntimeline");
    long bad = 0;
    for (long i = 0; ready && start && end && i < n; i++)
        bad += !(start[i] >= ready[i] && end[i] >= start[i]);
    check_rel("/timeline rows with t_ready <= t_start <= t_end", n, n - bad, 0, "causality");
    hid_t d = H5Dopen2(f, "/timeline", H5P_DEFAULT);
    char *sn = read_attr_str(d, "stream_names"), *kn = read_attr_str(d, "kind_names");
    check_true("/timeline stream_names", sn && !strcmp(sn, "compute,dp,pp_send,pp_recv,dp_grad"), sn ? sn : "(missing)");
    check_true("/timeline kind_names",
               kn && !strcmp(kn, "fwd,bwd,xfer,dp_gather,dp_reduce,emb_sync,optim,host,join"), kn ? kn : "(missing)");
    free(sn), free(kn), free(ready), free(start), free(end);
    H5Dclose(d);
}

static void check_h5(const char *path, const job_t *j, const hw_t *hw, const estimate_t *e, const result_t *r)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (!check_true("HDF5 file opens", f >= 0, path))
        return;
    check_root(f);
    check_summary(f, j, hw, e, r);
    check_ranks(f, r);
    check_timeline(f, r);
    H5Fclose(f);
}

/* ---- files ---------------------------------------------------------- */

static char *slurp(const char *path, long *len)
{
    FILE *f = fopen(path, "rb");
    char *b = NULL;
    *len = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (*len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (b = malloc(*len + 1)) && fread(b, 1, *len, f) == (size_t)*len)
        b[*len] = 0;
    else
        free(b), b = NULL;
    if (f)
        fclose(f);
    return b;
}

static void check_identical(const char *a, const char *b)
{
    long la, lb;
    char *x = slurp(a, &la), *y = slurp(b, &lb);
    char detail[64];
    snprintf(detail, sizeof detail, "%ld and %ld bytes", la, lb);
    check_true("two writes of one result: identical bytes", x && y && la == lb && !memcmp(x, y, la), detail);
    free(x), free(y);
}

/* Files in dir other than the expected ones: leftovers of a failed write. */
static int count_entries(const char *path)
{
    DIR *d = opendir(path);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d)
        closedir(d);
    return n;
}

static const char *str_of(const cJSON *o, const char *key)
{
    const char *v = cJSON_GetStringValue(cJSON_GetObjectItem(o, key));
    return v ? v : "";
}

static double num_of(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItem(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static void check_trace(const char *path, const result_t *r)
{
    long len, x = 0, waits = 0, bad = 0, expected_waits = 0;
    char *s = slurp(path, &len);
    cJSON *j = s ? cJSON_Parse(s) : NULL, *ev = cJSON_GetObjectItem(j, "traceEvents"), *e;
    check_true("trace parses with cJSON, has traceEvents", cJSON_IsArray(ev), path);
    cJSON_ArrayForEach(e, ev)
    {
        if (strcmp(str_of(e, "ph"), "X"))
            continue;
        int is_wait = !strcmp(str_of(e, "name"), "wait");
        waits += is_wait, x += !is_wait;
        bad += !(num_of(e, "ts") >= 0 && num_of(e, "dur") >= 0);
    }
    for (long i = 0; i < r->ntimeline; i++)
        expected_waits += r->timeline[i].t_start_ns > r->timeline[i].t_ready_ns;
    check_rel("trace X events (ops)", r->ntimeline, x, 0, "one per timeline op");
    check_rel("trace wait events", expected_waits, waits, 0, "ops with t_start > t_ready");
    check_rel("trace events with ts, dur >= 0", 0, bad, 0, "times from the iteration start");
    cJSON *u = cJSON_GetObjectItem(j, "displayTimeUnit");
    check_true("trace displayTimeUnit = ms", cJSON_IsString(u) && !strcmp(u->valuestring, "ms"), "");
    cJSON_Delete(j);
    free(s);
}

/* Two pipeline sends of one rank overlap in time (the send pool runs
 * several at once): the second goes to a second lane, tid = stream +
 * STREAM_COUNT (sim/output.c), named "pp_send 2"; the third reuses the
 * first lane, free since 100 us. */
static void check_lanes(void)
{
    result_op_t ops[3] = {{5, STREAM_PP_SEND, SOP_XFER, -1, -1, 0, 0, 100000, 0, 0, 0, -1},
                        {5, STREAM_PP_SEND, SOP_XFER, -1, -1, 50000, 50000, 150000, 0, 0, 0, -1},
                        {5, STREAM_PP_SEND, SOP_XFER, -1, -1, 200000, 210000, 300000, 0, 0, 0, -1}};
    result_t r = {.timeline = ops, .ntimeline = 3};
    char err[OPT_ERR_LEN], p[1024];
    long len;
    int rc = sim_write_trace(in_dir("lanes.json", p, sizeof p), NULL, NULL, NULL, &r, err, sizeof err);
    char *s = rc ? NULL : slurp(p, &len);
    cJSON *j = s ? cJSON_Parse(s) : NULL, *e;
    int tids[3] = {-1, -1, -1}, k = 0, named = 0;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "traceEvents"))
    {
        if (!strcmp(str_of(e, "ph"), "X") && strcmp(str_of(e, "name"), "wait") && k < 3)
            tids[k++] = (int)num_of(e, "tid");
        named += !strcmp(str_of(e, "name"), "thread_name") &&
                 !strcmp(str_of(cJSON_GetObjectItem(e, "args"), "name"), "pp_send 2");
    }
    char got[64];
    snprintf(got, sizeof got, "tids %d %d %d, \"pp_send 2\" named %d time(s)", tids[0], tids[1], tids[2], named);
    check_true("overlapping sends: tids 2, 2 + STREAM_COUNT, 2, lane named once",
               tids[0] == STREAM_PP_SEND && tids[1] == STREAM_PP_SEND + STREAM_COUNT && tids[2] == STREAM_PP_SEND &&
                   named == 1,
               got);
    cJSON_Delete(j);
    free(s);
    remove(p);
}

static void check_failures(const job_t *j, const hw_t *hw, const estimate_t *e, const result_t *r)
{
    char err[OPT_ERR_LEN] = "", p[1024], q[1024];
    int rc = sim_write_h5(in_dir("missing/x.h5", p, sizeof p), j, hw, NULL, e, r, err, sizeof err);
    check_true("h5 into a missing directory fails", rc == -1 && strstr(err, p), err);
    rc = sim_write_trace(p, NULL, NULL, NULL, r, err, sizeof err);
    check_true("trace into a missing directory fails", rc == -1 && strstr(err, p), err);
    /* The rename fails (the target is a non-empty directory): the temporary
     * file must go, leaving only what was there. */
    mkdir(in_dir("busy.h5", p, sizeof p), 0755);
    fclose(fopen(in_dir("busy.h5/keep", q, sizeof q), "w"));
    int before = count_entries(dir);
    rc = sim_write_h5(p, j, hw, NULL, e, r, err, sizeof err);
    check_true("h5 onto a non-empty directory fails", rc == -1 && strstr(err, "rename"), err);
    check_rel("entries in the output directory after it", before, count_entries(dir), 0, "no temporary left");
    remove(q), remove(p);
}

static void check_parse_ranks(void)
{
    int list[SIM_MAX_TRACE], n;
    char err[OPT_ERR_LEN];
    check_true("--trace-ranks 0,9,31 parses", !sim_parse_ranks("0,9,31", "t", 32, 64, list, &n, err, sizeof err) &&
                                                  n == 3 && list[2] == 31, "");
    check_true("--trace-ranks 32 of 32 GPUs fails", sim_parse_ranks("32", "t", 32, 64, list, &n, err, sizeof err) == -1,
               err);
    check_true("--trace-ranks 1,x fails", sim_parse_ranks("1,x", "t", 32, 64, list, &n, err, sizeof err) == -1, err);
    check_true("--trace-ranks 1,1 fails", sim_parse_ranks("1,1", "t", 32, 64, list, &n, err, sizeof err) == -1, err);
    check_true("--trace-ranks 0,1,2 with at most 2 fails",
               sim_parse_ranks("0,1,2", "t", 32, 2, list, &n, err, sizeof err) == -1, err);
}

static void remove_outputs(void)
{
    const char *names[] = {"a.h5", "b.h5", "a.json", "empty.h5"};
    char p[1024];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        remove(in_dir(names[i], p, sizeof p));
    rmdir(dir);
}

static int test_lib(void)
{
    job_t j;
    hw_t hw;
    estimate_t e;
    result_t r, r0;
    char err[OPT_ERR_LEN] = "", a[1024], b[1024], t[1024], z[1024];
    if (make_dir() || make_job(&j, &hw) || simulate(&j, &hw, "0,9,31", &r) || simulate(&j, &hw, "", &r0))
        return 1;
    estimate_job(&j, &hw, &e);
    check_parse_ranks();
    check_true("timeline recorded", r.ntimeline > 0, "ranks 0, 9 and 31 traced");
    int rc = sim_write_h5(in_dir("a.h5", a, sizeof a), &j, &hw, NULL, &e, &r, err, sizeof err);
    sleep(1); /* a second later: any timestamp in the file would differ */
    rc |= sim_write_h5(in_dir("b.h5", b, sizeof b), &j, &hw, NULL, &e, &r, err, sizeof err);
    rc |= sim_write_trace(in_dir("a.json", t, sizeof t), NULL, NULL, NULL, &r, err, sizeof err);
    if (!check_true("writes succeed", rc == 0, rc ? err : dir))
        return check_done("sim_output");
    check_h5(a, &j, &hw, &e, &r);
    check_identical(a, b);
    check_trace(t, &r);
    /* nothing traced: /timeline exists with 0 rows */
    rc = sim_write_h5(in_dir("empty.h5", z, sizeof z), &j, &hw, NULL, &e, &r0, err, sizeof err);
    check_true("untraced run writes", rc == 0, err);
    check_h5(z, &j, &hw, &e, &r0);
    check_failures(&j, &hw, &e, &r);
    check_lanes();
    remove_outputs();
    result_free(&r), result_free(&r0);
    return check_done("sim_output");
}

/* ---- the command line and a standard tool --------------------------- */

static int test_cli(const char *megasim)
{
    char cmd[4096], h5[1024], tr[1024], log[1024];
    if (make_dir())
        return 1;
    in_dir("cli.h5", h5, sizeof h5), in_dir("cli.json", tr, sizeof tr), in_dir("stderr.txt", log, sizeof log);
    snprintf(cmd, sizeof cmd, "'%s' simulate %s --out '%s' --trace '%s' --trace-ranks 0,31 >/dev/null 2>'%s'",
             megasim, job_args, h5, tr, log);
    int rc = system(cmd);
    printf("command: %s\n", cmd);
    long len;
    char *msg = slurp(log, &len);
    check_rel("megasim simulate --out --trace exit status", 0, rc, 0, "success");
    check_true("stderr says wrote FILE.h5", msg && strstr(msg, "wrote ") && strstr(msg, h5), msg ? msg : "");
    check_true("result and trace exist", access(h5, R_OK) == 0 && access(tr, R_OK) == 0, h5);
    free(msg);
    int skip = system("command -v h5dump >/dev/null 2>&1") != 0;
    if (!skip) {
        snprintf(cmd, sizeof cmd, "h5dump -H '%s' >'%s' 2>&1", h5, log);
        rc = system(cmd);
        msg = slurp(log, &len);
        check_rel("h5dump -H exit status", 0, rc, 0, cmd);
        check_true("h5dump lists /summary, /ranks, /timeline",
                   msg && strstr(msg, "GROUP \"summary\"") && strstr(msg, "DATASET \"ranks\"") &&
                       strstr(msg, "DATASET \"timeline\""), "");
        free(msg);
    }
    remove(h5), remove(tr), remove(log), rmdir(dir);
    if (skip && !check_failed_) {
        printf("SKIP: h5dump not found (hdf5-tools)\n");
        return 77;
    }
    return check_done("sim_output_cli");
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "cli"))
        return test_cli(argv[2]);
    if (argc >= 2 && !strcmp(argv[1], "lib"))
        return test_lib();
    fprintf(stderr, "usage: %s lib | cli MEGASIM\n", argv[0]);
    return 2;
}
