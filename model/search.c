/* search: enumeration of parallel plans and their closed-form ranking (see
 * search.h). */
#include "model/search.h"

#include "model/split.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const search_reason_names[SEARCH_NREASONS] = {
    "ok", "tp_split", "gpus", "batch", "interleave", "zero3_pp", "recompute", "other_rule", "no_effect", "memory"};
const char *const search_reason_text[SEARCH_NREASONS] = {
    "valid and fits",
    "ffn, vocab or query groups not divisible by TP",
    "TP x CP x PP does not divide the GPU count",
    "global batch not divisible by micro-batch x DP",
    "interleaved: micro-batches not divisible by PP (Megatron-LM's rule)",
    "ZeRO-3 needs PP = 1",
    "full recomputation of more layers (recompute-num-layers) than a model chunk has",
    "another rule of the job",
    "an overlap switch with nothing to overlap (same plan as without it)",
    "peak memory per GPU above the limit",
};

static int add_pp(search_space_t *s, int pp, int lpv, int split)
{
    if (s->nppv == SEARCH_MAX_PPV)
        return -1;
    s->ppv[s->nppv][0] = pp, s->ppv[s->nppv][1] = lpv, s->ppv[s->nppv][2] = split;
    s->nppv++;
    return 0;
}

/* (PP, layers per chunk, split): PP splitting the layers; chunk counts v
 * dividing a stage's layers, v > 1 only when PP > 1. A fixed lpv keeps the
 * PP it fits. The split is even or, as Llama 3's, with the embedding and
 * the loss counted as a layer each (model/split.h), unless the user gave a
 * split of their own (the end stages' layers, either account-for switch or
 * the chunks per stage), which every plan keeps. */
static void pp_candidates(search_space_t *s, const search_fixed_t *f)
{
    job_t b = s->base;
    int own = split_uneven(&b) || b.vstages_per_rank;
    for (int split = 0; split <= !own; split++) {
        b.account_embedding = split ? 1 : s->base.account_embedding;
        b.account_loss = split ? 1 : s->base.account_loss;
        for (int pp = 1; pp <= b.num_layers + 2; pp++) {
            if ((f->pp && pp != s->base.pp) || (split && pp == 1) || !split_pp_fits(&b, pp))
                continue;
            int per = split_stage_layers_for(&b, pp, 0);
            if (b.vstages_per_rank || b.first_stage_layers || b.last_stage_layers) { /* chunks as given */
                add_pp(s, pp, 0, split);
                continue;
            }
            if (f->lpv) {
                int lpv = s->base.layers_per_vstage;
                if (lpv == 0 || lpv == per)
                    add_pp(s, pp, 0, split);
                else if (pp > 1 && per % lpv == 0)
                    add_pp(s, pp, lpv, split);
                continue;
            }
            for (int v = 1; v <= (pp > 1 ? per : 1); v++)
                if (per % v == 0)
                    add_pp(s, pp, v == 1 ? 0 : per / v, split);
        }
    }
}

static void tp_candidates(search_space_t *s, const hw_t *hw, const search_fixed_t *f)
{
    int cap = hw->cluster.gpus_per_node < SEARCH_MAX_TP ? hw->cluster.gpus_per_node : SEARCH_MAX_TP;
    for (int tp = 1; tp <= cap; tp++) {
        if (s->base.num_attention_heads % tp || (f->tp && tp != s->base.tp))
            continue;
        for (int sp = 0; sp <= (tp > 1); sp++)
            if (!f->sp || tp == 1 || sp == s->base.sequence_parallel) {
                s->tpsp[s->ntpsp][0] = tp, s->tpsp[s->ntpsp][1] = sp;
                s->ntpsp++;
            }
    }
}

/* (CP, comm type): the base job's when fixed; else CP 1 and each power of
 * two leaving a rank at least SEARCH_MIN_CP_TOKENS of a sequence cut in
 * 2 CP chunks, with p2p, all_gather and a2a. */
static void cp_candidates(search_space_t *s, const search_fixed_t *f)
{
    const job_t *b = &s->base;
    /* A window or a kernel other than flash that the user gave rules CP out. */
    int flash_ok = (!job_given(b, "attention") || b->attention == ATTN_FLASH) &&
                   (!job_given(b, "sliding-window") || b->sliding_window == 0);
    if (f->cp || !flash_ok) {
        s->cpc[0][0] = b->cp, s->cpc[0][1] = b->cp_comm_type, s->ncp = 1;
        return;
    }
    s->cpc[s->ncp][0] = 1, s->cpc[s->ncp++][1] = CP_P2P;
    for (int cp = 2; b->seq_length / cp >= SEARCH_MIN_CP_TOKENS && b->seq_length % (2 * cp) == 0; cp *= 2)
        for (int c = CP_P2P; c <= CP_A2A && s->ncp < SEARCH_MAX_CAND; c++)
            s->cpc[s->ncp][0] = cp, s->cpc[s->ncp++][1] = c;
}

/* (EP, ETP): the base job's when fixed or dense; else every EP dividing
 * the experts, with ETP 1 and with ETP = TP. */
static void ep_candidates(search_space_t *s, const search_fixed_t *f)
{
    const job_t *b = &s->base;
    if (f->ep || b->num_experts <= 0) {
        s->epc[0][0] = b->ep, s->epc[0][1] = b->etp == 1, s->nep = 1;
        return;
    }
    for (int ep = 1; ep <= b->num_experts; ep++)
        for (int one = 0; one <= 1 && b->num_experts % ep == 0 && s->nep < SEARCH_MAX_CAND; one++)
            s->epc[s->nep][0] = ep, s->epc[s->nep++][1] = one;
}

static void small_candidates(search_space_t *s, const search_fixed_t *f)
{
    const job_t *b = &s->base;
    for (int mb = 1; mb <= SEARCH_MAX_MB; mb++)
        if (!f->mb || mb == b->micro_batch_size)
            s->mb[s->nmb++] = mb;
    int z_fixed = b->zero_stage ? b->zero_stage : b->distributed_optimizer;
    for (int z = 0; z <= 3; z++)
        if (!f->zero || z == z_fixed)
            s->zero[s->nzero++] = z;
    static const int order[3] = {RECOMPUTE_NONE, RECOMPUTE_SELECTIVE, RECOMPUTE_FULL};
    for (int i = 0; i < 3; i++)
        if (!f->recompute || order[i] == b->recompute)
            s->rc[s->nrc++] = order[i];
    /* Overlap switches: all 8 combinations of TP, PP and DP overlap, or the
     * base job's when fixed (DP overlap = grad reduce and param gather). */
    int base_ovl = (b->tp_comm_overlap ? SEARCH_OVL_TP : 0) | (b->pp_comm_overlap ? SEARCH_OVL_PP : 0) |
                   (b->overlap_grad_reduce ? SEARCH_OVL_DP : 0);
    for (int o = 0; o < 8; o++)
        if (!f->ovl || o == base_ovl)
            s->ovl[s->novl++] = o;
}

int search_space_init(search_space_t *s, const job_t *base, const hw_t *hw, const search_fixed_t *f,
                      int batch_lo, int batch_hi, int batch_step, double mem_limit_bytes, char *err)
{
    memset(s, 0, sizeof *s);
    s->base = *base, s->hw = *hw, s->mem_limit_bytes = mem_limit_bytes;
    if (batch_step <= 0)
        batch_lo = batch_hi = base->global_batch_size, batch_step = 1;
    for (long b = batch_lo; b <= batch_hi; b += batch_step) {
        if (s->nbatch == SEARCH_MAX_CAND) {
            snprintf(err, OPT_ERR_LEN, "the batch range %d..%d step %d has more than %d sizes; use a larger step",
                     batch_lo, batch_hi, batch_step, SEARCH_MAX_CAND);
            return -1;
        }
        s->batch[s->nbatch++] = (int)b;
    }
    tp_candidates(s, hw, f);
    pp_candidates(s, f);
    cp_candidates(s, f);
    ep_candidates(s, f);
    small_candidates(s, f);
    s->total = (long long)s->nbatch * s->ntpsp * s->ncp * s->nep * s->nppv * s->nmb * s->nzero * s->nrc * s->novl;
    if (s->total == 0)
        snprintf(err, OPT_ERR_LEN, "no plan to search: %s",
                 !s->nbatch  ? "the batch range is empty"
                 : !s->ntpsp ? "the fixed tensor-model-parallel-size does not divide the heads or exceeds min(8, GPUs per node)"
                 : !s->nppv  ? "the fixed pipeline-model-parallel-size or num-layers-per-virtual-pipeline-stage does not divide the layers"
                             : "a fixed plan field is out of the searched range");
    return s->total ? 0 : -1;
}

void search_plan_at(const search_space_t *s, long long i, search_plan_t *p)
{
    /* Mixed radix, overlap switches varying fastest, then recompute. */
    int ov = (int)(i % s->novl); i /= s->novl;
    int rc = (int)(i % s->nrc); i /= s->nrc;
    int z = (int)(i % s->nzero); i /= s->nzero;
    int mb = (int)(i % s->nmb); i /= s->nmb;
    int pv = (int)(i % s->nppv); i /= s->nppv;
    int cc = (int)(i % s->ncp); i /= s->ncp;
    int ec = (int)(i % s->nep); i /= s->nep;
    int ts = (int)(i % s->ntpsp); i /= s->ntpsp;
    *p = (search_plan_t){.batch = s->batch[i], .tp = s->tpsp[ts][0], .sp = s->tpsp[ts][1], .pp = s->ppv[pv][0],
                         .lpv = s->ppv[pv][1], .split = s->ppv[pv][2], .cp = s->cpc[cc][0],
                         .cp_comm = s->cpc[cc][1], .ep = s->epc[ec][0], .etp1 = s->epc[ec][1], .mb = s->mb[mb], .zero = s->zero[z], .recompute = s->rc[rc],
                         .ovl = s->ovl[ov]};
}

/* The base job with plan p applied, not finalized. */
static void search_plan_job(const search_space_t *s, const search_plan_t *p, job_t *j)
{
    *j = s->base;
    j->global_batch_size = p->batch, j->tp = p->tp, j->sequence_parallel = p->sp;
    j->pp = p->pp, j->layers_per_vstage = p->lpv, j->micro_batch_size = p->mb;
    if (p->split)
        j->account_embedding = j->account_loss = 1;
    j->cp = p->cp, j->cp_comm_type = p->cp_comm;
    j->ep = p->ep, j->etp = p->etp1 ? 1 : 0; /* 0: TP's (model/moe.c) */
    if (p->cp > 1) /* CP runs the flash kernels over whole sequences (job_finalize's rules) */
        j->attention = ATTN_FLASH, j->sliding_window = 0;
    j->zero_stage = p->zero, j->distributed_optimizer = p->zero >= 1, j->recompute = p->recompute;
    j->tp_comm_overlap = (p->ovl & SEARCH_OVL_TP) != 0;
    j->pp_comm_overlap = (p->ovl & SEARCH_OVL_PP) != 0;
    j->overlap_grad_reduce = j->overlap_param_gather = (p->ovl & SEARCH_OVL_DP) != 0;
}

/* The rules of job_finalize that a searched plan can break, checked first
 * so each rejection is counted under its reason. */
static int classify(const job_t *j, int gpus_per_node)
{
    int groups = j->num_query_groups ? j->num_query_groups : j->num_attention_heads;
    int ffn = j->ffn_hidden_size ? j->ffn_hidden_size : 4 * j->hidden_size;
    if (ffn % j->tp || j->padded_vocab_size % j->tp || (groups % j->tp && j->tp % groups))
        return SEARCH_REJ_TP;
    if (j->num_gpus % ((long long)j->tp * j->cp * j->pp))
        return SEARCH_REJ_GPUS;
    long long dp = j->num_gpus / ((long long)j->tp * j->cp * j->pp), step = dp * j->micro_batch_size;
    if (j->global_batch_size % step)
        return SEARCH_REJ_BATCH;
    if (j->layers_per_vstage && (j->global_batch_size / step) % j->pp)
        return SEARCH_REJ_INTERLEAVE;
    if (j->zero_stage >= 3 && j->pp > 1)
        return SEARCH_REJ_ZERO3_PP;
    int per_chunk = j->layers_per_vstage ? j->layers_per_vstage : split_stage_layers_for(j, j->pp, 0);
    if (j->recompute == RECOMPUTE_FULL && j->recompute_num_layers > per_chunk)
        return SEARCH_REJ_RECOMPUTE;
    /* A switch with nothing to overlap gives the same plan as without it. */
    if ((j->tp_comm_overlap && (j->tp == 1 || !j->sequence_parallel)) || (j->pp_comm_overlap && j->pp == 1) ||
        (j->num_experts > 0 && j->etp == 1 && j->tp == 1) || /* ETP 1 is TP's at TP 1 */
        (j->overlap_grad_reduce && dp * j->cp == 1))
        return SEARCH_REJ_NO_EFFECT;
    return SEARCH_OK;
}

int search_eval(const search_space_t *s, long long index, search_row_t *row, job_t *j, estimate_t *e)
{
    search_plan_t p;
    char err[OPT_ERR_LEN];
    estimate_t local;
    search_plan_at(s, index, &p);
    search_plan_job(s, &p, j);
    *row = (search_row_t){.index = index, .mfu = NAN, .iteration_s = NAN, .tokens_per_s = NAN,
                          .mem_bytes = NAN, .exposed_comm_s = NAN, .bubble_s = NAN};
    row->reason = classify(j, s->hw.cluster.gpus_per_node);
    if (row->reason == SEARCH_OK && job_finalize(j, s->hw.cluster.gpus_per_node, err))
        row->reason = SEARCH_REJ_OTHER;
    if (row->reason != SEARCH_OK)
        return row->reason;
    row->dp = j->dp, row->vpp = j->vpp, row->num_microbatches = j->num_microbatches;
    /* Memory first: it is cheap, and a plan that does not fit is not timed. */
    memory_t m;
    workload_memory(j, &s->hw, &m);
    row->mem_bytes = m.total_bytes;
    if (m.total_bytes > s->mem_limit_bytes)
        return row->reason = SEARCH_REJ_MEMORY;
    if (!e)
        e = &local;
    estimate_job(j, &s->hw, e);
    const breakdown_t *b = &e->br;
    row->mfu = e->mfu, row->iteration_s = e->iteration_s, row->tokens_per_s = e->tokens_per_s;
    row->exposed_comm_s = b->exposed_tp_comm_s + b->exposed_pp_comm_s + b->exposed_dp_comm_s;
    row->bubble_s = b->bubble_s;
    return SEARCH_OK;
}

int search_row_cmp(const void *pa, const void *pb)
{
    const search_row_t *a = pa, *b = pb;
    if (a->mfu != b->mfu)
        return a->mfu > b->mfu ? -1 : 1;
    if (a->mem_bytes != b->mem_bytes)
        return a->mem_bytes < b->mem_bytes ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

static const search_row_t *frontier_rows;

/* Memory ascending, then MFU descending, then index. */
static int by_memory(const void *pa, const void *pb)
{
    const search_row_t *a = &frontier_rows[*(const int *)pa], *b = &frontier_rows[*(const int *)pb];
    if (a->mem_bytes != b->mem_bytes)
        return a->mem_bytes < b->mem_bytes ? -1 : 1;
    if (a->mfu != b->mfu)
        return a->mfu > b->mfu ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

void search_frontier(const search_row_t *rows, int n, char *frontier)
{
    int *order = malloc(sizeof *order * (n ? n : 1));
    if (!order) {
        memset(frontier, 0, n);
        return;
    }
    for (int i = 0; i < n; i++)
        order[i] = i, frontier[i] = 0;
    frontier_rows = rows;
    qsort(order, n, sizeof *order, by_memory);
    double best = -INFINITY;
    for (int k = 0; k < n; k++)
        if (rows[order[k]].mfu > best) {
            best = rows[order[k]].mfu;
            frontier[order[k]] = 1;
        }
    free(order);
}

void search_plan_flags(const job_t *j, char *buf, size_t len)
{
    static const char *rc[] = {"none", "full", "selective"};
    int n = snprintf(buf, len,
                     "--tensor-model-parallel-size %d --pipeline-model-parallel-size %d --micro-batch-size %d "
                     "--global-batch-size %d",
                     j->tp, j->pp, j->micro_batch_size, j->global_batch_size);
    static const char *cpc[] = {"p2p", "all_gather", "a2a"};
    if (j->num_experts > 0 && n >= 0 && (size_t)n < len)
        n += snprintf(buf + n, len - n, " --expert-model-parallel-size %d --expert-tensor-parallel-size %d", j->ep,
                      j->etp);
    if (j->cp > 1 && n >= 0 && (size_t)n < len)
        n += snprintf(buf + n, len - n, " --context-parallel-size %d --cp-comm-type %s --use-flash-attn", j->cp,
                      cpc[j->cp_comm_type]);
    if (j->vpp > 1 && n >= 0 && (size_t)n < len)
        n += j->vstages_per_rank
                 ? snprintf(buf + n, len - n, " --num-virtual-stages-per-pipeline-rank %d", j->vpp)
                 : snprintf(buf + n, len - n, " --num-layers-per-virtual-pipeline-stage %d", j->layers_per_vstage);
    const struct {
        int n;
        const char *flag;
    } ends[] = {{j->first_stage_layers, "--decoder-first-pipeline-num-layers"},
                {j->last_stage_layers, "--decoder-last-pipeline-num-layers"}};
    for (size_t i = 0; i < 2 && n >= 0 && (size_t)n < len; i++)
        if (ends[i].n)
            n += snprintf(buf + n, len - n, " %s %d", ends[i].flag, ends[i].n);
    if (j->recompute != RECOMPUTE_NONE && n >= 0 && (size_t)n < len)
        n += snprintf(buf + n, len - n, " --recompute-granularity %s", rc[j->recompute]);
    if (j->recompute == RECOMPUTE_FULL && n >= 0 && (size_t)n < len)
        n += snprintf(buf + n, len - n, " --recompute-method %s --recompute-num-layers %d",
                      j->recompute_method == RECOMPUTE_BLOCK ? "block" : "uniform", j->recompute_num_layers);
    const struct {
        int on;
        const char *flag;
    } sw[] = {{j->account_embedding, "--account-for-embedding-in-pipeline-split"},
              {j->account_loss, "--account-for-loss-in-pipeline-split"},
              {j->sequence_parallel, "--sequence-parallel"},
              {j->zero_stage >= 1, "--use-distributed-optimizer"},
              {j->overlap_grad_reduce, "--overlap-grad-reduce"},
              {j->overlap_param_gather, "--overlap-param-gather"},
              {j->tp_comm_overlap, "--tp-comm-overlap"},
              {j->tp_pp_dp_mapping, "--use-tp-pp-dp-mapping"}};
    for (size_t i = 0; i < sizeof sw / sizeof sw[0] && n >= 0 && (size_t)n < len; i++)
        if (sw[i].on)
            n += snprintf(buf + n, len - n, " %s", sw[i].flag);
}
