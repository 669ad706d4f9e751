/* estimate: the closed-form iteration model. Walks the per-layer op costs
 * of model/layer.c up to model chunks and pipeline stages, then adds the
 * pipeline bubble and the exposed TP, PP and DP communication allowed by
 * each overlap switch, the optimizer step and host stalls. The breakdown
 * sums exactly to the iteration time (seconds on the critical path). */
#ifndef MODEL_ESTIMATE_H
#define MODEL_ESTIMATE_H

#include "model/hw.h"
#include "model/job.h"
#include "model/workload.h"

typedef struct {
    double compute_s, bubble_s;
    double exposed_tp_comm_s, exposed_pp_comm_s, exposed_dp_comm_s;
    double optimizer_s, other_s;
} breakdown_t;

/* One kind of pipeline stage (the first, the middle ones, the last: an
 * uneven split gives them different layers, model/split.h): its first
 * stage, how many stages are of the kind, and its micro-batch's forward
 * and backward (all chunks; compute and exposed TP). */
typedef struct {
    int stage, count;
    double fwd_s, bwd_s;
} stage_kind_t;

typedef struct {
    /* per micro-batch on the slowest stage */
    double fwd_s, bwd_s;           /* compute, recomputation and slowdown included */
    double first_fwd_s, first_bwd_s; /* the same on the first stage (DP phases, see dp_exposure) */
    double tp_exposed_fwd_s, tp_exposed_bwd_s; /* on the slowest stage */
    double first_tp_fwd_s, first_tp_bwd_s;     /* on the first */
    double p2p_s;                  /* one stage-to-stage transfer */
    double all_stages_s;           /* sum over stages of one micro-batch's time */
    double dp_reduce_s, dp_gather_s; /* one piece's gradient / weight collective */
    int dp_pieces;                 /* pieces (chunks or buckets) issued one after another */
    int slowest_stage;
    stage_kind_t kind[3];          /* in stage order; nkinds of them (1 when PP = 1) */
    int nkinds;
} stage_times_t;

typedef struct {
    workload_t work;
    memory_t mem;
    stage_times_t st;
    breakdown_t br;
    double iteration_s;
    double tokens_per_s;
    double mfu, hfu;
    double peak_flops;            /* per GPU, for the job's precision */
    double days_for_300b_tokens;
} estimate_t;

/* Evaluates one finalized job on one hardware profile. O(layers' ops). */
void estimate_job(const job_t *job, const hw_t *hw, estimate_t *e);

#endif
