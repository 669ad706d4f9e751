/* model/layout: where a global rank sits in a job's TP x DP x PP grid, DP
 * here DP x CP (dp_i = cp_i + cp x the replica). Megatron-Core's order by
 * default (tp-cp-ep-dp-pp: TP fastest, then CP, DP, PP stages), so that TP
 * groups share a node and DP traffic stays close:
 *     rank = tp_i + tp * (dp_i + dp * stage);
 * under --use-tp-pp-dp-mapping (Megatron-Core's tp-cp-ep-pp-dp order;
 * Llama 3's [TP, CP, PP, DP]) stages come before replicas, so that a
 * pipeline's stages sit close and DP, the most latency-tolerant, spans the
 * cluster; CP stays next to TP:
 *     rank = tp_i + tp * (cp_i + cp * (stage + pp * replica)).
 * The one place those formulas are written; the op programs, the
 * simulator's entities, the communicators and every report use it. */
#ifndef MODEL_LAYOUT_H
#define MODEL_LAYOUT_H

#include "model/job.h"
#include "model/op.h"

typedef struct {
    int tp_i;  /* rank in its TP group, 0 .. tp - 1 */
    int dp_i;  /* its data-parallel replica (DP x CP), 0 .. dp - 1 */
    int stage; /* its pipeline stage, 0 .. pp - 1 */
} layout_pos_t;

/* The grid: TP, DP x CP and PP sizes, the order, and CP (of DP x CP). */
typedef struct {
    int tp, dp, pp, pp_inner, cp;
} layout_t;

static inline layout_t layout_of(const job_t *j)
{
    return (layout_t){j->tp, j->dp_cp, j->pp, j->tp_pp_dp_mapping, j->cp};
}

static inline layout_pos_t layout_pos(layout_t L, int rank)
{
    int q = rank / L.tp, cp = L.cp > 0 ? L.cp : 1, r = q / cp;
    return L.pp_inner ? (layout_pos_t){rank % L.tp, q % cp + cp * (r / L.pp), r % L.pp}
                      : (layout_pos_t){rank % L.tp, q % L.dp, q / L.dp};
}

static inline int layout_rank(layout_t L, int tp_i, int dp_i, int stage)
{
    int cp = L.cp > 0 ? L.cp : 1;
    return tp_i + L.tp * (L.pp_inner ? dp_i % cp + cp * (stage + L.pp * (dp_i / cp)) : dp_i + L.dp * stage);
}

/* Context parallelism's causal load balance, Megatron-Core's: a sequence
 * in 2 x cp chunks, CP rank cp_i holding chunks cp_i and 2 cp - 1 - cp_i
 * (slots 0 and 1 of its rows), so that every rank attends as many keys.
 * layout_cp_pos: the place in the sequence of T tokens of row t of a
 * rank's T / cp (cp 1: t itself). */
static inline int layout_cp_chunk(int slot, int cp, int cp_i) { return slot ? 2 * cp - 1 - cp_i : cp_i; }

static inline long layout_cp_pos(long t, long T, int cp, int cp_i)
{
    long Tc = T / (2 * cp);
    return layout_cp_chunk((int)(t / Tc), cp, cp_i) * Tc + t % Tc;
}

/* The nodes num_gpus ranks fill, gpus_per_node to a node (the last one
 * maybe partly). */
static inline int layout_nodes(int num_gpus, int gpus_per_node)
{
    return (num_gpus + gpus_per_node - 1) / gpus_per_node;
}

/* A communication group's members in the rank order: `size` of them
 * `stride` ranks apart, in `blocks` such blocks `block_stride` apart (1
 * block but for DP x CP under the tp-pp-dp order with CP > 1: CP's block
 * at stride TP, the replicas TP x CP x PP apart). Megatron-Core's order:
 * TP fastest, then CP, DP, PP (PP before DP under the tp-pp-dp mapping);
 * the experts' groups folded into the same ranks, ETP fastest, then EP,
 * EDP (EDP after PP under the tp-pp-dp mapping, where ETP x EP is TP x
 * CP). */
typedef struct {
    long long size, stride, blocks, block_stride;
} layout_span_t;
layout_span_t layout_group_span(const job_t *job, group_t grp);

#endif
