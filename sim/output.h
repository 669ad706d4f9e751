/* sim/output.h: what a simulation leaves behind. One summary (the keys of
 * `megasim simulate --json`, computed in one place), the result file in the
 * schema every executor shares (HDF5, described in docs/schema.md) and a
 * Chrome-trace JSON of the traced ranks' timelines (Perfetto,
 * chrome://tracing).
 *
 * Files are never half-written (sim/out.h): on any failure the function
 * returns -1 with one message naming the path and the step. */
#ifndef SIM_OUTPUT_H
#define SIM_OUTPUT_H

#include "model/estimate.h"
#include "sim/engine.h"
#include "sim/out.h"

#include <stddef.h>

struct cJSON;

/* The headline numbers of one simulated iteration (seconds, FLOPs, bytes).
 * Counts are doubles so every field reads the same way in JSON and HDF5. */
typedef struct {
    double iteration_time_s, tokens_per_s, mfu, hfu;
    double model_flops_per_iteration, hardware_flops_per_iteration, params_total, peak_memory_per_gpu_bytes;
    double fits_in_memory, days_for_300b_tokens;
    /* the critical rank's compute stream; sums to iteration_time_s */
    double compute_s, bubble_s, exposed_tp_comm_s, exposed_pp_comm_s, exposed_dp_comm_s, optimizer_s, other_s;
    double events, entities, dp_classes, critical_rank, closed_form_iteration_time_s;
} sim_summary_t;

/* Where a field sits in the --json object: top level, "breakdown" or
 * "simulation". HDF5 puts all of them flat on /summary. */
typedef enum { SIM_SUM_TOP, SIM_SUM_BREAKDOWN, SIM_SUM_SIMULATION } sim_sum_section_t;

typedef struct {
    const char *key;   /* JSON key and HDF5 attribute name */
    int section;       /* sim_sum_section_t */
    int is_bool;       /* JSON true/false; HDF5 1.0/0.0 */
    size_t off;        /* offsetof(sim_summary_t, field) */
} sim_summary_field_t;

extern const sim_summary_field_t sim_summary_fields[];
extern const int sim_summary_nfields;

/* e: the closed-form estimate of the same job (FLOPs, memory, peak). */
void sim_summary(const job_t *job, const estimate_t *e, const result_t *r, sim_summary_t *s);

/* The `simulate --json` object: summary fields by section, predict's
 * "memory" (the memory model's, for a simulation), then "config". */
struct cJSON *sim_summary_json(const job_t *job, const hw_t *hw, const estimate_t *e, const result_t *r,
                               const struct cJSON *sim_config);

/* Parses "R[,R...]" (global ranks below limit, no repeats, at most max)
 * into list. "" gives none. 0, or -1 with a message naming flag. */
int sim_parse_ranks(const char *text, const char *flag, int limit, int max, int *list, int *n, char *err, int len);

/* The result file (docs/schema.md): root attributes, /summary, /ranks,
 * /timeline. Bit-identical for identical inputs (no timestamps). */
int sim_write_h5(const char *path, const job_t *job, const hw_t *hw, const struct cJSON *sim_config,
                 const estimate_t *closed_form,
                 const result_t *r, char *err, int errlen);

/* Chrome-trace JSON of r->timeline: one "X" event per op (pid = rank,
 * tid = stream), a "wait" event before each op that waited, and names;
 * "otherData" holds the version and the configuration the result file
 * records (job NULL: none). */
int sim_write_trace(const char *path, const job_t *job, const hw_t *hw, const struct cJSON *sim_config,
                    const result_t *r, char *err, int errlen);

#endif
