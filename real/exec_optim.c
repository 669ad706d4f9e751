/* real/exec_optim.c: the op program's optimizer step (exec_int.h):
 * gradient clipping by the global norm (with the NaN check), then AdamW or
 * LAMB over the rank's segments at the step's learning rate. */
#include "real/exec.h"
#include "real/exec_int.h"

#include "real/health.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define OP (x->rt->op)

/* ---- optimizer --------------------------------------------------------------------------- */

/* The learning rate of optimizer step `step` (1-based), as Megatron-LM's
 * OptimizerParamScheduler gives it: linear warm-up to lr over the first
 * warmup_iters steps (step / warmup_iters of it), then constant, or a
 * linear or cosine decay to min_lr at decay_iters, min_lr after. */
static double exec_lr(const exec_hparams_t *hp, long step)
{
    double max = hp->lr, min = hp->min_lr;
    long W = hp->warmup_iters, D = hp->decay_iters;
    if (W > 0 && step <= W)
        return max * (double)step / W;
    if (hp->decay_style == LR_CONSTANT)
        return max;
    if (step >= D)
        return min;
    double ratio = (double)(step - W) / (double)(D - W);
    double coeff = hp->decay_style == LR_LINEAR ? 1.0 - ratio : 0.5 * (cos(3.14159265358979323846 * ratio) + 1.0);
    return min + coeff * (max - min);
}

static kern_opt_hparams hparams(exec_t *x)
{
    x->lr = exec_lr(&x->hp, x->step + 1);
    return (kern_opt_hparams){(float)x->lr, x->hp.beta1, x->hp.beta2, x->hp.eps, x->hp.weight_decay, x->step + 1,
                              x->grad_scale};
}

/* Whether this rank's copy of tensor i counts once in a sum over the
 * group that cuts it: TP for the model's tensors (one held whole by every
 * TP rank counts TP rank 0's), ETP for an expert's (FC2's bias, whole on
 * every ETP rank: ETP rank 0's). */
static int counts_in_its_group(const gpt_t *m, int i)
{
    const gpt_tensor_t *t = &m->tensors[i];
    return t->expert ? t->etp_split || m->etp_i == 0 : t->tp_split || m->tp_i == 0;
}

/* LAMB's per-tensor norms over every rank holding a piece of the tensor:
 * DP ranks hold disjoint shards (ZeRO), TP ranks disjoint cuts of split
 * tensors; a tensor every TP rank holds whole counts TP rank 0's. An
 * expert's tensor is on its EP rank, cut by ETP (FC2's bias whole on
 * every ETP rank: ETP rank 0's counts) and sharded over EDP (ZeRO): its
 * sums (xn) go over ETP and EDP, not TP. */
static int lamb_sum_norms(exec_t *x)
{
    gpt_t *m = x->m;
    int nt = m->ntensors;
    double *xn = x->tensor_norms + 2 * nt;
    RT_TRY(OP->d2h(x->rt, x->norms_host, x->norms_dev, (size_t)2 * x->nsegs * sizeof(float)));
    memset(x->tensor_norms, 0, sizeof(double) * 4 * nt);
    for (int k = 0; k < x->nsegs; k++) {
        int i = x->seg_tensor[k];
        double *to = m->tensors[i].expert ? xn : x->tensor_norms;
        if (!counts_in_its_group(m, i))
            continue;
        to[2 * i] += x->norms_host[2 * k], to[2 * i + 1] += x->norms_host[2 * k + 1];
    }
    RT_TRY(comm_host_sum_f64(x->comm, GRP_TP, x->tensor_norms, 2 * nt));
    if (x->zero)
        RT_TRY(comm_host_sum_f64(x->comm, GRP_DP, x->tensor_norms, 2 * nt));
    if (x->zero && m->E > 0)
        RT_TRY(comm_host_sum_f64(x->comm, GRP_EDP, xn, 2 * nt));
    if (m->E > 0 && m->etp > 1)
        RT_TRY(comm_host_sum_f64(x->comm, GRP_ETP, xn, 2 * nt));
    for (int i = 0; i < 2 * nt; i++)
        x->tensor_norms[i] += xn[i];
    for (int k = 0; k < x->nsegs; k++) {
        int i = x->seg_tensor[k];
        x->norms_host[2 * k] = (float)x->tensor_norms[2 * i], x->norms_host[2 * k + 1] = (float)x->tensor_norms[2 * i + 1];
    }
    return OP->h2d(x->rt, x->norms_dev, x->norms_host, (size_t)2 * x->nsegs * sizeof(float));
}

/* Whether this rank's gradients of tensor i count in a sum over the
 * world that takes every element of the model once: a tensor every TP
 * rank holds whole counts TP rank 0's; without ZeRO every DP rank holds
 * the same reduced gradients, so DP rank 0's count (an expert's: EDP rank
 * 0's; TP does not cut it); the tied embedding on the last stage is the
 * first stage's copy. */
static int counts_once(const exec_t *x, int i)
{
    const gpt_t *m = x->m;
    if (m->tensors[i].expert)
        return counts_in_its_group(m, i) && (x->zero || m->edp_i == 0);
    return counts_in_its_group(m, i) && (x->zero || m->dp_i == 0) && (i != m->t_wte || m->stage == 0);
}

/* The global gradient norm, as Megatron-LM's clip_grad_norm counts it:
 * every element of the model once (counts_once), summed over the world;
 * then the factor that brings it down to --clip-grad, which the optimizer
 * applies. */
static int clip_gradients(exec_t *x)
{
    x->grad_scale = 1.0f;
    if (x->nsegs && inject_nan_now(x->iter + 1)) { /* --inject-fault nan:RANK:STEP */
        float nan = NAN;
        RT_TRY(OP->h2d(x->rt, (void *)x->segs[0].grad, &nan, sizeof nan));
    }
    RT_TRY(OP->grad_sumsq(x->rt, x->segs, x->nsegs, x->norms_dev));
    RT_TRY(OP->d2h(x->rt, x->norms_host, x->norms_dev, (size_t)x->nsegs * sizeof(float)));
    double sum = 0, every = 0;
    for (int k = 0; k < x->nsegs; k++) {
        int i = x->seg_tensor[k];
        every += x->norms_host[k];
        if (counts_once(x, i))
            sum += x->norms_host[k];
    }
    /* The gradient-norm check: a NaN or Inf in any of the gradients this
     * rank will apply (its copies the norm leaves to another rank too),
     * counted in the norm's own sum; only when there is one, a second
     * reduction names the first such rank, before any optimizer step. */
    double sums[2] = {sum, isfinite(every) ? 0 : 1};
    RT_TRY(comm_host_sum_f64(x->comm, GRP_WORLD, sums, 2));
    x->nan_rank = -1;
    if (sums[1] > 0) {
        int me, first;
        MPI_Comm_rank(MPI_COMM_WORLD, &me);
        int mine = isfinite(every) ? INT_MAX : me;
        health_comm_enter(HB_COLL, GRP_WORLD, -1, 0);
        MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        health_comm_leave();
        x->nan_rank = first;
        x->grad_norm = NAN; /* not a number to report as this step's */
        return 0;
    }
    sum = sums[0];
    x->grad_norm = sqrt(sum);
    double coeff = x->hp.clip_grad / (x->grad_norm + 1e-6);
    if (x->hp.clip_grad > 0 && coeff < 1.0)
        x->grad_scale = (float)coeff;
    return 0;
}

int exec_run_optim(exec_t *x)
{
    RT_TRY(clip_gradients(x));
    if (x->nan_rank >= 0) {
        char msg[160];
        snprintf(msg, sizeof msg, "a NaN or Inf in rank %d's gradients at step %d (the gradient-norm check)",
                 x->nan_rank, x->iter + 1);
        if (x->hp.on_nan == EXEC_NAN_SKIP)
            return 0; /* the step's update is skipped; run reports it */
        int me;
        MPI_Comm_rank(MPI_COMM_WORLD, &me);
        /* the poisoned rank's failure; the rest stop */
        return me == x->nan_rank ? exec_fail(msg, __FILE__, __LINE__) : -1;
    }
    kern_opt_hparams hp = hparams(x);
    if (x->job->optimizer == OPTIM_LAMB) {
        RT_TRY(OP->lamb_norms(x->rt, x->segs, x->nsegs, hp, x->norms_dev));
        RT_TRY(lamb_sum_norms(x));
        RT_TRY(OP->lamb_apply(x->rt, x->segs, x->nsegs, hp, x->norms_dev));
    } else {
        RT_TRY(OP->adamw(x->rt, x->segs, x->nsegs, hp));
    }
    x->step++;
    return 0;
}
