/* report: a prediction as readable text or as one JSON object (the keys
 * every executor shares), with the effective configuration and version. */
#ifndef MODEL_REPORT_H
#define MODEL_REPORT_H

#include "model/estimate.h"

#include <stdio.h>

struct cJSON;

void report_text(FILE *f, const job_t *job, const hw_t *hw, const estimate_t *e);

/* The peak MFU counts against: "bf16", "tf32" or "fp8" (--mfu-peak). */
const char *report_mfu_peak(const job_t *job);

/* {"iteration_time_s", ..., "breakdown": {...}, "memory": {...},
 *  "config": {"job": ..., "hardware": ..., "version": ...}} */
/* One line per op of one layer (forward, backward, recomputation): kind,
 * shape, FLOPs or bytes, modelled time and how it meets compute. */
void report_ops(FILE *f, const job_t *job, const hw_t *hw);

struct cJSON *report_json(const job_t *job, const hw_t *hw, const estimate_t *e);

/* predict's "memory" object: the memory model's parts of the peak per GPU. */
struct cJSON *report_memory_json(const estimate_t *e);

/* The effective configuration: job options, hardware profile, version. */
struct cJSON *report_config_json(const job_t *job, const hw_t *hw);

#endif
