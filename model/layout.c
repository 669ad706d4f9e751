/* layout: a communication group's place in the rank order (layout.h). */
#include "model/layout.h"

long long layout_group_span(const job_t *job, group_t grp, long long *stride)
{
    long long size;
    long long etp = job->etp > 0 ? job->etp : 1;
    switch (grp) {
    case GROUP_TP:
        *stride = 1, size = job->tp;
        break;
    case GROUP_CP:
        *stride = job->tp, size = job->cp;
        break;
    case GROUP_ETP: /* the experts' order: ETP fastest, then EP, then EDP (model/moe.h) */
        *stride = 1, size = etp;
        break;
    case GROUP_EP:
        *stride = etp, size = job->ep;
        break;
    case GROUP_EDP:
        *stride = etp * job->ep, size = job->edp;
        break;
    case GROUP_ETP_EP:
        *stride = 1, size = etp * job->ep;
        break;
    case GROUP_DP: /* DP x CP: CP sits between TP and DP in the rank order */
        *stride = layout_rank(layout_of(job), 0, 1, 0), size = job->dp_cp;
        break;
    case GROUP_PP:
        *stride = layout_rank(layout_of(job), 0, 0, 1), size = job->pp;
        break;
    case GROUP_WORLD:
        *stride = 1, size = job->num_gpus;
        break;
    default: /* embedding group: first and last pipeline stage */
        *stride = (long long)layout_rank(layout_of(job), 0, 0, 1) * (job->pp - 1), size = job->pp > 1 ? 2 : 1;
        break;
    }
    return size;
}
