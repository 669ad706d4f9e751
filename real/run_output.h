/* real/run_output.h: what a real run leaves behind, in the simulator's
 * schema (docs/schema.md, kind = "measurement"): every rank's op records
 * are gathered on rank 0, turned into per-rank accounts of the last
 * iteration (the same breakdown the simulator reports) and a timeline of
 * every iteration, plus one row per step in /iterations; and a Chrome
 * trace of the whole run (iterations laid end to end). */
#ifndef REAL_RUN_OUTPUT_H
#define REAL_RUN_OUTPUT_H

#include "real/exec.h"
#include "sim/output.h"

/* Collective: rank 0 receives every rank's records into r (timeline,
 * per-rank accounts of iteration `account_iter`, iteration count); other
 * ranks get an empty r. iter_t0_ns (rank 0's) places iterations in time
 * for the trace. */
int run_gather(const exec_t *x, int account_iter, result_t *r, char *err, int errlen);

/* One training step's line on stdout: JSON (--json: its fields by name;
 * with a GPU its clock and power, with experts the MoE numbers) or text. */
void run_print_step(const result_iter_t *s, int json, int gpu, int experts);

/* Rank 0: the Chrome trace of r with iteration i shifted by t0_ns[i]. */
int run_write_trace(const char *path, const job_t *job, const hw_t *hw, const struct cJSON *config, const result_t *r,
                    const int64_t *t0_ns, char *err, int errlen);

#endif
