/* layout: a communication group's place in the rank order (layout.h). */
#include "model/layout.h"

layout_span_t layout_group_span(const job_t *job, group_t grp)
{
    layout_t L = layout_of(job);
    long long etp = job->etp > 0 ? job->etp : 1, stage = layout_rank(L, 0, 0, 1);
    layout_span_t s = {1, 1, 1, 0};
    switch (grp) {
    case GROUP_TP:
        s.size = job->tp;
        break;
    case GROUP_CP:
        s.stride = job->tp, s.size = job->cp;
        break;
    case GROUP_ETP: /* the experts' order: ETP fastest, then EP, then EDP (model/moe.h) */
        s.size = etp;
        break;
    case GROUP_EP:
        s.stride = etp, s.size = job->ep;
        break;
    case GROUP_EDP: /* after PP in the tp-pp-dp order, where ETP x EP is a stage's TP x CP */
        s.stride = etp * job->ep * (L.pp_inner ? job->pp : 1), s.size = job->edp;
        break;
    case GROUP_ETP_EP:
        s.size = etp * job->ep;
        break;
    case GROUP_DP: /* DP x CP: CP sits between TP and DP in the rank order */
        if (L.pp_inner && job->cp > 1) /* CP's block, then the replicas after PP */
            s.stride = job->tp, s.size = job->cp, s.blocks = job->dp, s.block_stride = stage * job->pp;
        else
            s.stride = layout_rank(L, 0, 1, 0), s.size = job->dp_cp;
        break;
    case GROUP_PP:
        s.stride = stage, s.size = job->pp;
        break;
    case GROUP_WORLD:
        s.size = job->num_gpus;
        break;
    default: /* embedding group: first and last pipeline stage */
        s.stride = stage * (job->pp - 1), s.size = job->pp > 1 ? 2 : 1;
        break;
    }
    return s;
}
