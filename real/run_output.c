/* real/run_output.c: gathering a real run's records into the simulator's
 * result structure (run_output.h). */
#include "real/run_output.h"

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The simulator's breakdown of one rank's compute stream (model/result.h):
 * waiting before an op is bubble; pipeline transfers on the compute
 * stream are pp, DP collectives there dp, the optimizer its own, host
 * stalls and the embedding sync other. TP communication runs inside the
 * chunk's forward and backward and is counted as compute. */
static void account(result_account_t *a, const result_op_t *o)
{
    int64_t dur = o->t_end_ns - o->t_start_ns, wait = o->t_start_ns - o->t_ready_ns;
    if (sched_stream_dp(o->stream)) {
        a->dp_busy += dur;
        return;
    }
    if (o->stream != STREAM_COMPUTE) {
        a->pp_busy += dur;
        return;
    }
    a->bubble += wait;
    switch (o->kind) {
    case SOP_FWD:
    case SOP_BWD: a->compute += dur; break;
    case SOP_XFER: a->pp += dur; break;
    case SOP_DP_GATHER:
    case SOP_DP_REDUCE: a->dp += dur; break;
    case SOP_OPTIM: a->optimizer += dur; break;
    default: a->other += dur; break;
    }
    if (o->t_end_ns > a->end)
        a->end = o->t_end_ns;
}

int run_gather(const exec_t *x, int account_iter, result_t *r, char *err, int errlen)
{
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    memset(r, 0, sizeof *r);
    int mine = (int)(x->nrecs * (long)sizeof(result_op_t)), *counts = NULL, *displs = NULL;
    if (rank == 0 && (!(counts = calloc((size_t)world, sizeof(int))) || !(displs = calloc((size_t)world, sizeof(int)))))
        goto oom;
    MPI_Gather(&mine, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
    long total = 0;
    if (rank == 0) {
        for (int i = 0; i < world; i++)
            displs[i] = (int)total, total += counts[i];
        if (total > 2147483647L) {
            snprintf(err, errlen, "%ld bytes of op records exceed what one gather carries; run fewer iterations",
                     total);
            free(counts), free(displs);
            return -1;
        }
        if (!(r->timeline = malloc(total ? (size_t)total : 1)))
            goto oom;
    }
    MPI_Gatherv(x->recs, mine, MPI_BYTE, r->timeline, counts, displs, MPI_BYTE, 0, MPI_COMM_WORLD);
    free(counts), free(displs);
    if (rank != 0)
        return 0;
    r->ntimeline = total / (long)sizeof(result_op_t);
    r->entities = world;
    r->per_entity = calloc((size_t)world, sizeof *r->per_entity);
    r->entity_rank = calloc((size_t)world, sizeof(int));
    r->entity_count = calloc((size_t)world, sizeof(int));
    if (!r->per_entity || !r->entity_rank || !r->entity_count)
        goto oom;
    for (int i = 0; i < world; i++)
        r->entity_rank[i] = i, r->entity_count[i] = 1;
    for (long i = 0; i < r->ntimeline; i++)
        if (r->timeline[i].iter == account_iter)
            account(&r->per_entity[r->timeline[i].rank], &r->timeline[i]);
    r->critical_rank = 0;
    for (int i = 1; i < world; i++)
        if (r->per_entity[i].end > r->per_entity[r->critical_rank].end)
            r->critical_rank = i;
    r->critical_entity = r->critical_rank;
    r->critical = r->per_entity[r->critical_rank];
    r->classes = x->job->dp_cp; /* the weights' replicas, as the simulator's classes */
    return 0;
oom:
    snprintf(err, errlen, "out of host memory gathering the op records");
    return -1;
}

int run_write_trace(const char *path, const job_t *job, const hw_t *hw, const struct cJSON *config, const result_t *r,
                    const int64_t *t0_ns, char *err, int errlen)
{
    result_t t = *r;
    t.timeline = malloc(sizeof(result_op_t) * (size_t)(r->ntimeline ? r->ntimeline : 1));
    if (!t.timeline) {
        snprintf(err, errlen, "out of host memory for the trace");
        return -1;
    }
    int64_t base = r->ntimeline ? t0_ns[r->timeline[0].iter] : 0; /* the first measured iteration */
    for (long i = 0; i < r->ntimeline; i++) {
        result_op_t o = r->timeline[i];
        int64_t off = t0_ns[o.iter] - base;
        o.t_ready_ns += off, o.t_start_ns += off, o.t_end_ns += off;
        t.timeline[i] = o;
    }
    int rc = sim_write_trace(path, job, hw, config, &t, err, errlen);
    free(t.timeline);
    return rc;
}

void run_print_step(const result_iter_t *s, int json, int gpu, int experts)
{
    if (json) {
        char norm[32] = "null"; /* a skipped step's (--on-nan skip) is no number */
        if (isfinite(s->grad_norm))
            snprintf(norm, sizeof norm, "%.9g", s->grad_norm);
        printf("{\"step\": %d, \"loss\": %.9g, \"step_time_s\": %.6f, \"tokens_per_s\": %.1f, \"mfu\": %.6f, "
               "\"grad_norm\": %s, \"lr\": %.9g", s->step, s->loss, s->step_time_s, s->tokens_per_s, s->mfu,
               norm, s->lr);
        if (gpu)
            printf(", \"sm_mhz\": %.1f, \"power_w\": %.1f, \"power_capped\": %.4f", s->sm_mhz, s->power_w,
                   s->power_capped);
        if (experts)
            printf(", \"moe_dropped\": %.0f, \"moe_drop_sig\": \"%016llx\", \"moe_aux_loss\": %.9g, "
                   "\"moe_load_cv\": %.6f", s->moe_dropped, (unsigned long long)s->moe_drop_sig, s->moe_aux_loss, s->moe_load_cv);
        if (s->graph_passes >= 0)
            printf(", \"graph_passes\": %ld", s->graph_passes);
        printf("}\n");
    } else {
        printf("step %5d | loss %.4f | grad norm %8.4f | lr %.3e | %9.2f ms | %10.0f tokens/s | MFU %6.2f%%",
               s->step, s->loss, s->grad_norm, s->lr, s->step_time_s * 1e3, s->tokens_per_s, 100 * s->mfu);
        if (s->sm_mhz > 0)
            printf(" | %4.0f MHz %4.0f W", s->sm_mhz, s->power_w);
        printf(experts ? " | aux loss %.3e | dropped %.0f | load cv %.3f\n" : "\n", s->moe_aux_loss,
               s->moe_dropped, s->moe_load_cv);
    }
    fflush(stdout);
}
