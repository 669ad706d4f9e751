/* calib/raw: a calibration's raw HDF5 file (written by profile_out.c)
 * read back, so that `megasim calibrate --refit RAW.h5` fits the stored
 * samples again after a change to the model or the fits, on any machine,
 * without the device that took them. The tables are read column by column
 * by the names their layouts give (calib.h); what was measured beside them
 * travels as one JSON attribute, "measured" (calib_measured_json). */
#include "calib/profile.h"
#include "model/opts.h"
#include "sim/out.h"

#include <cjson/cJSON.h>
#include <hdf5.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- what was measured beside the tables ------------------------------------ */

/* The numeric scalars, by name and address: one list for both directions. */
typedef struct {
    const char *name;
    int is_int;
    size_t off;
} scalar_t;

#define RI(f) {#f, 1, offsetof(calib_result_t, f)}
#define RD(f) {#f, 0, offsetof(calib_result_t, f)}
static const scalar_t result_scalars[] = {
    RI(device), RI(have_coll), RI(nranks), RI(ncores), RD(llc_bytes), RD(host_mem_gib),
    RD(host_stall_s), RD(flash1_rel),
};
#define GI(f) {#f, 1, offsetof(calib_gpu_info_t, f)}
#define GD(f) {#f, 0, offsetof(calib_gpu_info_t, f)}
static const scalar_t gpu_scalars[] = {
    GI(cc_major), GI(cc_minor), GI(sm_count), GI(devices), GI(driver_version), GI(runtime_version),
    GI(nccl_version), GD(mem_gib), GD(l2_mib), GD(clock_mhz), GD(mem_clock_mhz), GI(mem_bus_bits),
};
#define JI(f) {#f, 1, offsetof(calib_job_shapes_t, f)}
static const scalar_t job_scalars[] = {JI(on), JI(h), JI(attn), JI(qkv), JI(fc1), JI(ffn), JI(tokens), JI(tp)};
/* since 2026-11-29 (older files: no experts) */
static const scalar_t job_expert_scalars[] = {JI(expert_rows), JI(expert_fc1), JI(expert_ffn), JI(etp)};
#define NS(a) (int)(sizeof a / sizeof a[0])

static void put_scalars(cJSON *o, const void *base, const scalar_t *s, int n)
{
    for (int i = 0; i < n; i++) {
        const char *p = (const char *)base + s[i].off;
        cJSON_AddNumberToObject(o, s[i].name, s[i].is_int ? *(const int *)p : *(const double *)p);
    }
}

static int get_scalars(const cJSON *o, void *base, const scalar_t *s, int n, const char *where, char *err)
{
    for (int i = 0; i < n; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, s[i].name);
        if (!cJSON_IsNumber(v)) {
            snprintf(err, OPT_ERR_LEN, "%s.%s is missing or not a number", where, s[i].name);
            return -1;
        }
        char *p = (char *)base + s[i].off;
        if (s[i].is_int)
            *(int *)p = v->valueint;
        else
            *(double *)p = v->valuedouble;
    }
    return 0;
}

cJSON *calib_measured_json(const calib_result_t *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "level", calib_level_names[r->level]);
    cJSON_AddStringToObject(o, "host", r->host);
    cJSON_AddStringToObject(o, "cpu_model", r->cpu_model);
    put_scalars(o, r, result_scalars, NS(result_scalars));
    cJSON *g = cJSON_AddObjectToObject(o, "gpu");
    cJSON_AddStringToObject(g, "name", r->gpu.name);
    cJSON_AddNumberToObject(g, "cublaslt_version", (double)r->gpu.cublaslt_version);
    put_scalars(g, &r->gpu, gpu_scalars, NS(gpu_scalars));
    cJSON_AddNumberToObject(g, "attn_slots_q", r->gpu.attn_slots_q);
    cJSON_AddNumberToObject(g, "attn_slots_k", r->gpu.attn_slots_k);
    cJSON_AddNumberToObject(o, "graph_gap_us", r->graph_gap_us);
    cJSON *job = cJSON_AddObjectToObject(o, "job");
    put_scalars(job, &r->job, job_scalars, NS(job_scalars));
    put_scalars(job, &r->job, job_expert_scalars, NS(job_expert_scalars));
    return o;
}

static int get_str(const cJSON *o, const char *name, char *out, size_t len, const char *where, char *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsString(v)) {
        snprintf(err, OPT_ERR_LEN, "%s.%s is missing or not a string", where, name);
        return -1;
    }
    snprintf(out, len, "%s", v->valuestring);
    return 0;
}

static int measured_from_json(const cJSON *o, calib_result_t *r, char *err)
{
    char level[16];
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(o, "gpu"), *j = cJSON_GetObjectItemCaseSensitive(o, "job");
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(g, "cublaslt_version");
    if (get_str(o, "level", level, sizeof level, "measured", err) ||
        get_str(o, "host", r->host, sizeof r->host, "measured", err) ||
        get_str(o, "cpu_model", r->cpu_model, sizeof r->cpu_model, "measured", err) ||
        get_scalars(o, r, result_scalars, NS(result_scalars), "measured", err) ||
        get_str(g, "name", r->gpu.name, sizeof r->gpu.name, "measured.gpu", err) ||
        get_scalars(g, &r->gpu, gpu_scalars, NS(gpu_scalars), "measured.gpu", err) ||
        get_scalars(j, &r->job, job_scalars, NS(job_scalars), "measured.job", err))
        return -1;
    r->gpu.cublaslt_version = cJSON_IsNumber(lt) ? (long)lt->valuedouble : 0;
    if (cJSON_GetObjectItemCaseSensitive(j, "expert_rows") && /* files before 2026-11-29: no experts */
        get_scalars(j, &r->job, job_expert_scalars, NS(job_expert_scalars), "measured.job", err))
        return -1;
    /* Occupancy, recorded since 2026-11-26 12:30 UTC: older files fit with one block per SM, as they were */
    const cJSON *sq = cJSON_GetObjectItemCaseSensitive(g, "attn_slots_q"), *sk = cJSON_GetObjectItemCaseSensitive(g, "attn_slots_k");
    r->gpu.attn_slots_q = cJSON_IsNumber(sq) ? sq->valueint : 0;
    r->gpu.attn_slots_k = cJSON_IsNumber(sk) ? sk->valueint : 0;
    /* recorded since 2026-11-29's eighth session: older files measured none */
    const cJSON *gg = cJSON_GetObjectItemCaseSensitive(o, "graph_gap_us");
    r->graph_gap_us = cJSON_IsNumber(gg) ? gg->valuedouble : 0;
    int lv = -1;
    for (int i = 0; i < 3; i++)
        lv = strcmp(level, calib_level_names[i]) ? lv : i;
    if (lv < 0 || (r->device != 0 && r->device != 1) || r->nranks < 1) {
        snprintf(err, OPT_ERR_LEN, "measured: level '%s', device %d, ranks %d (allowed: full|quick|tiny, 0 cpu or "
                 "1 gpu, >= 1 rank)", level, r->device, r->nranks);
        return -1;
    }
    r->level = (calib_level_t)lv;
    return 0;
}

/* ---- the tables ----------------------------------------------------------------- */

/* Column `name` of group `grp`: a 1-D float64 dataset of n values (n < 0:
 * any length, returned in *n). */
static double *read_column(hid_t file, const char *grp, const char *name, long *n, char *err)
{
    char path[128];
    snprintf(path, sizeof path, "/%s/%s", grp, name);
    hid_t d = H5Lexists(file, path, H5P_DEFAULT) > 0 ? H5Dopen2(file, path, H5P_DEFAULT) : -1;
    hid_t sp = d >= 0 ? H5Dget_space(d) : -1;
    hsize_t dim = 0;
    double *v = NULL;
    int ok = sp >= 0 && H5Sget_simple_extent_ndims(sp) == 1 && H5Sget_simple_extent_dims(sp, &dim, NULL) == 1 &&
             (*n < 0 || (long)dim == *n);
    if (ok) {
        v = malloc(sizeof(double) * (dim + 1));
        ok = v && (dim == 0 || H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
    }
    if (sp >= 0)
        H5Sclose(sp);
    if (d >= 0)
        H5Dclose(d);
    if (!ok) {
        free(v);
        if (d < 0)
            snprintf(err, OPT_ERR_LEN, "no dataset %s", path);
        else
            snprintf(err, OPT_ERR_LEN, "%s is not a 1-D float64 column of %ld values like its table's first", path,
                     *n);
        return NULL;
    }
    *n = (long)dim;
    return v;
}

/* Columns added after files were checked in, read as 0 (unknown) where a
 * file lacks them: sm_mhz (2026-11-26). */
static int optional_column(const calib_table_t *t, int c) { return c > 0 && !strcmp(t->cols[c], "sm_mhz"); }

/* Table t (its layout already set: name and columns) filled from its
 * group, row by row. */
static int read_table(hid_t file, calib_table_t *t, char *err)
{
    long n = -1;
    double *cols[CALIB_MAX_COLS] = {0};
    int rc = 0;
    char path[128];
    for (int c = 0; c < t->ncol && !rc; c++) {
        snprintf(path, sizeof path, "/%s/%s", t->name, t->cols[c]);
        if (optional_column(t, c) && H5Lexists(file, path, H5P_DEFAULT) <= 0)
            continue; /* cols[c] stays NULL: zeros */
        rc = !(cols[c] = read_column(file, t->name, t->cols[c], &n, err));
    }
    double row[CALIB_MAX_COLS];
    for (long i = 0; !rc && i < n; i++) {
        for (int c = 0; c < t->ncol; c++)
            row[c] = cols[c] ? cols[c][i] : 0.0;
        calib_table_add(t, row);
    }
    for (int c = 0; c < t->ncol; c++)
        free(cols[c]);
    return rc ? -1 : 0;
}

static int has_group(hid_t file, const char *name)
{
    char path[64];
    snprintf(path, sizeof path, "/%s", name);
    return H5Lexists(file, path, H5P_DEFAULT) > 0;
}

static cJSON *parse_attr(hid_t file, const char *name, char *err)
{
    cJSON *o;
    char what[OPT_ERR_LEN];
    if (out_h5_attr_json(file, "the raw file", name, &o, what, sizeof what))
        snprintf(err, OPT_ERR_LEN, "%s", what);
    return o;
}

int calib_read_h5(const char *path, calib_result_t *r, cJSON **config, cJSON **prov, char *err)
{
    char why[OPT_ERR_LEN] = "";
    *config = *prov = NULL;
    memset(r, 0, sizeof *r);
    H5E_auto2_t old_fn = NULL;
    void *old_data = NULL;
    H5Eget_auto2(H5E_DEFAULT, &old_fn, &old_data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* our message replaces HDF5's error stack */
    /* out_h5_vet: a damaged file costs a child process, with its reason in why */
    hid_t file = H5Fis_hdf5(path) > 0 && out_h5_vet(path, why, sizeof why) == 0
                     ? H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT)
                     : -1;
    int rc = -1;
    cJSON *measured = NULL;
    if (file < 0 && !why[0]) {
        snprintf(why, sizeof why, "not a readable HDF5 file");
    } else if (file >= 0 && (measured = parse_attr(file, "measured", why))) {
        calib_gemm_table(&r->gemm), calib_attn_table(&r->attn), calib_attn_unfused_table(&r->attn_unfused);
        calib_mem_table(&r->mem), calib_coll_table(&r->coll), calib_overlap_table(&r->overlap);
        calib_attn_dropout_table(&r->attn_drop), calib_sustained_table(&r->sustained);
        rc = measured_from_json(measured, r, why) || read_table(file, &r->gemm, why) ||
                     read_table(file, &r->attn, why) || read_table(file, &r->attn_unfused, why) ||
                     read_table(file, &r->mem, why) || (r->have_coll && read_table(file, &r->coll, why)) ||
                     (has_group(file, r->overlap.name) && read_table(file, &r->overlap, why)) ||
                     (has_group(file, r->attn_drop.name) && read_table(file, &r->attn_drop, why)) ||
                     (has_group(file, r->sustained.name) && read_table(file, &r->sustained, why)) ||
                     !(*config = parse_attr(file, "config", why)) || !(*prov = parse_attr(file, "provenance", why))
                 ? -1
                 : 0;
    }
    if (measured == NULL && file >= 0)
        snprintf(why + strlen(why), sizeof why - strlen(why),
                 " (files from megasim calibrate before --refit existed lack it: calibrate again)");
    cJSON_Delete(measured);
    if (file >= 0)
        H5Fclose(file);
    H5Eset_auto2(H5E_DEFAULT, old_fn, old_data);
    if (rc) {
        calib_result_free(r);
        cJSON_Delete(*config), cJSON_Delete(*prov);
        *config = *prov = NULL;
        snprintf(err, OPT_ERR_LEN, "--refit %.600s: %.800s (allowed: the raw HDF5 file a megasim calibrate wrote)",
                 path, why);
    }
    return rc;
}
