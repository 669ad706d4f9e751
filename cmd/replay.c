/* replay: a job, hardware profile and subcommand options read back from a
 * result file's recorded configuration, as the start of a new command
 * (cmd/replay.h). */
#include "cmd/replay.h"

#include "cmd/cli.h"
#include "cmd/plot_data.h"
#include "sim/out.h"

#include <cjson/cJSON.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Recorded keys a replay does not take: options that say where or how a
 * command writes (and run's checkpoint directories and resuming), and the
 * values a measurement records beside its options. */
static const char *const not_replayed[] = {
    "out", "trace", "json", "csv", "plot", "plots_dir", "ops", "help", "replay", "heartbeat", "inject_fault",
    "self_check", "until_step", "save", "save_interval", "load", "resume", "gemm_algos",
    "world_size", "host_ranks", "host_cores", "device_name", "comm_init_s", "memory_planned_bytes",
    "memory_peak_bytes", "memory_beyond_plan_bytes", "memory_outside_pools_bytes", "timing_overhead_ns_per_op",
    "timing_overhead_fraction", "clock_reads", "sm_clock_mhz", "power_w", "power_capped_fraction", NULL};

/* config_json of an HDF5 result file that holds one job. */
static int read_h5(const char *path, cJSON **config, char *err)
{
    hid_t f;
    char kind[64];
    H5E_auto2_t old_fn = NULL;
    void *old_data = NULL;
    H5Eget_auto2(H5E_DEFAULT, &old_fn, &old_data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* our message replaces HDF5's error stack */
    int rc = plot_open_result(path, &f, kind, sizeof kind, err, OPT_ERR_LEN) == PLOT_OK ? 0 : -1;
    if (!rc && strcmp(kind, "simulation") && strcmp(kind, "measurement") && strcmp(kind, "goodput")) {
        snprintf(err, OPT_ERR_LEN, "%s: kind '%s' holds more than one job; --replay takes the result of one "
                 "(kind simulation, from megasim simulate --out, measurement, from megasim run --out, or goodput, "
                 "from megasim goodput --out)", path, kind);
        rc = -1;
    }
    if (!rc)
        rc = out_h5_attr_json(f, path, "config_json", config, err, OPT_ERR_LEN);
    if (f >= 0)
        H5Fclose(f);
    H5Eset_auto2(H5E_DEFAULT, old_fn, old_data);
    return rc;
}

/* "config" of a --json output, or "otherData.config" of a Chrome trace,
 * detached from the file's root. */
static int read_json(const char *path, cJSON **config, char *err)
{
    cJSON *root;
    if (opts_read_json_file(path, &root, err))
        return -1;
    *config = cJSON_DetachItemFromObjectCaseSensitive(root, "config");
    cJSON *trace = cJSON_GetObjectItemCaseSensitive(root, "otherData");
    if (!*config && trace)
        *config = cJSON_DetachItemFromObjectCaseSensitive(trace, "config");
    cJSON_Delete(root);
    if (*config)
        return 0;
    snprintf(err, OPT_ERR_LEN, "%s: no \"config\" or \"otherData\": {\"config\"} object: not a megasim output "
             "(--replay takes a result file .h5, a predict or simulate --json output, or a --trace file)", path);
    return -1;
}

/* HDF5 files start with this signature (no user block in ours). */
static int is_hdf5(const char *path)
{
    unsigned char sig[8] = {0};
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(sig, 1, sizeof sig, f) : 0;
    if (f)
        fclose(f);
    return n == 8 && !memcmp(sig, "\x89HDF\r\n\x1a\n", 8);
}

/* The configuration recorded in `path`: an HDF5 result file's root
 * attribute config_json (kind simulation, measurement or goodput: one job), or a
 * JSON output's "config" (predict/simulate --json) or "otherData.config"
 * (a Chrome trace). It must hold "job" and "hardware" objects. *origin
 * gets how to name it in messages ("RUN.h5: config_json"). 0, or -1 with
 * one message in err. */
static int replay_read_config(const char *path, cJSON **config, char *origin, size_t origin_size, char *err)
{
    *config = NULL;
    int h5 = is_hdf5(path);
    if (h5 ? read_h5(path, config, err) : read_json(path, config, err))
        return -1;
    snprintf(origin, origin_size, "%s: %s", path, h5 ? "config_json" : "config");
    const char *missing = !cJSON_IsObject(*config)                                               ? "is not an object"
                          : !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(*config, "job"))      ? "has no \"job\" object"
                          : !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(*config, "hardware")) ? "has no \"hardware\" object"
                                                                                                    : NULL;
    if (!missing) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(*config, "version");
        if (cJSON_IsString(v) && strcmp(v->valuestring, MEGASIM_VERSION))
            fprintf(stderr, "megasim: note: %s was written by megasim %s, this is %s: options added since take "
                    "their defaults\n", path, v->valuestring, MEGASIM_VERSION);
        return 0;
    }
    snprintf(err, OPT_ERR_LEN, "%s %s, so it records no job to replay", origin, missing);
    cJSON_Delete(*config);
    *config = NULL;
    return -1;
}

/* One profile section: every field must be there (hw_to_json wrote them),
 * but for those added since, which take their defaults. */
static int hw_section(const opt_table *t, const cJSON *hw, const char *sec, void *obj, const char *origin, char *err)
{
    char where[1200], seen[64] = {0};
    snprintf(where, sizeof where, "%s hardware.%s", origin, sec);
    if (opts_apply_json(t, obj, cJSON_GetObjectItemCaseSensitive(hw, sec), where, NULL, seen, err))
        return -1;
    return hw_fill_missing(t, obj, seen, where, "", err);
}

int replay_hardware(const cJSON *config, const char *origin, hw_t *hw, char *err)
{
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(config, "hardware");
    memset(hw, 0, sizeof *hw);
    if (hw_section(&hw_gpu_opts, h, "gpu", &hw->gpu, origin, err) ||
        hw_section(&hw_cluster_opts, h, "cluster", &hw->cluster, origin, err))
        return -1;
    /* The fault model: in files written since it exists; none before. */
    if (cJSON_GetObjectItemCaseSensitive(h, "faults")) {
        if (hw_section(&hw_faults_opts, h, "faults", &hw->faults, origin, err))
            return -1;
        hw->faults.present = 1;
    }
    return hw_check(hw, err);
}

/* --gpu and --cluster on the command line replace the recorded profile's
 * section with that built-in; --hardware FILE then replaces the sections
 * FILE has, as it does over built-ins without --replay. */
static int named_hardware(const job_t *job, hw_t *hw, char *err)
{
    if (job_given(job, "gpu") && hw_builtin_gpu(job->gpu, &hw->gpu))
        return hw_unknown_name("--gpu", job->gpu, 1, ", or give --hardware FILE", err);
    if (job_given(job, "cluster") && hw_use_builtin_cluster(hw, job->cluster))
        return hw_unknown_name("--cluster", job->cluster, 0, ", or give --hardware FILE", err);
    return job_given(job, "hardware") ? hw_apply_file(job->hardware, hw, err) : 0;
}

const char *replay_path(int argc, char **argv, const opt_table *extra)
{
    const char *path = NULL;
    if (!extra || !opts_find(extra, "replay"))
        return NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--replay") && i + 1 < argc)
            path = argv[++i];
        else if (!strncmp(argv[i], "--replay=", 9))
            path = argv[i] + 9;
    }
    return path && *path ? path : NULL;
}

int replay_parse(const char *cmd, const char *path, int argc, char **argv, const opt_table *extra, void *extra_obj,
                 job_t *job, hw_t *hw, char *err)
{
    char origin[1100], where_job[1200], where_cmd[1200];
    cJSON *config;
    if (replay_read_config(path, &config, origin, sizeof origin, err))
        return -1;
    snprintf(where_job, sizeof where_job, "%s job", origin);
    snprintf(where_cmd, sizeof where_cmd, "%s %s", origin, cmd);
    const cJSON *own = cJSON_GetObjectItemCaseSensitive(config, cmd);
    job_base_t base = {cJSON_GetObjectItemCaseSensitive(config, "job"), cJSON_IsObject(own) ? own : NULL,
                       not_replayed, where_job, where_cmd};
    int rc = job_parse_over(job, &base, argc, argv, extra, extra_obj, err) ||
             replay_hardware(config, origin, hw, err) || named_hardware(job, hw, err) ||
             job_hw_overrides(job, hw, err);
    cJSON_Delete(config);
    return rc ? -1 : 0;
}

int replay_job_setup(const char *cmd, const char *path, int argc, char **argv, const opt_table *extra,
                     void *extra_obj, job_t *job, hw_t *hw)
{
    char err[OPT_ERR_LEN];
    if (replay_parse(cmd, path, argc, argv, extra, extra_obj, job, hw, err) || cli_finalize(cmd, job, hw, 1, err))
        return cli_fail(cmd, err);
    return 0;
}
