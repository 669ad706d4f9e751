/* split: the layers of each pipeline stage and model chunk (see split.h). */
#include "model/split.h"

#include <stdio.h>

#define RULE JOB_RULE

static int first_set(const job_t *j) { return j->first_stage_layers > 0; }
static int last_set(const job_t *j) { return j->last_stage_layers > 0; }
static int ends_given(const job_t *j) { return first_set(j) || last_set(j); }
/* The embedding and the loss as layer slots (0 or 1 each). */
static int emb_slot(const job_t *j) { return j->account_embedding ? 1 : 0; }
static int loss_slot(const job_t *j) { return j->account_loss ? 1 : 0; }

int split_uneven(const job_t *j) { return ends_given(j) || emb_slot(j) || loss_slot(j); }

/* Layer slots of stage s under PP p: its transformer layers, plus the
 * embedding and the loss where they are counted. 0 when p does not split
 * the layers. */
int split_stage_layers_for(const job_t *j, int p, int s)
{
    if (ends_given(j)) {
        int f = j->first_stage_layers, l = j->last_stage_layers;
        if (s == 0 && first_set(j))
            return f;
        if (s == p - 1 && last_set(j))
            return l;
        int mid = j->num_layers - f - l, n = p - first_set(j) - last_set(j);
        return n > 0 && mid > 0 && mid % n == 0 ? mid / n : 0;
    }
    int slots = j->num_layers + emb_slot(j) + loss_slot(j);
    return slots % p ? 0 : slots / p;
}

int split_pp_fits(const job_t *j, int p)
{
    if (ends_given(j)) { /* every middle stage some layers, and they add up */
        int n = p - first_set(j) - last_set(j), mid = j->num_layers - j->first_stage_layers - j->last_stage_layers;
        return p > 1 && (n == 0 ? mid == 0 : split_stage_layers_for(j, p, first_set(j)) > 0);
    }
    return split_stage_layers_for(j, p, 0) > 0;
}

static int slots(const job_t *j, int s) { return split_stage_layers_for(j, j->pp, s); }

int split_chunk_layers(const job_t *j, int s, int c)
{
    int n = slots(j, s) / j->vpp;
    if (s == 0 && c == 0)
        n -= emb_slot(j);
    if (s == j->pp - 1 && c == j->vpp - 1)
        n -= loss_slot(j);
    return n;
}

int split_stage_layers(const job_t *j, int s)
{
    return slots(j, s) - (s == 0 ? emb_slot(j) : 0) - (s == j->pp - 1 ? loss_slot(j) : 0);
}

int split_layer_offset(const job_t *j, int s, int c)
{
    int v = j->vpp;
    if (ends_given(j)) { /* each round of chunks holds num-layers / v; stages before s in this round */
        int before = s == 0 ? 0 : slots(j, 0) / v + (s - 1) * (slots(j, 1) / v);
        return c * (j->num_layers / v) + before;
    }
    int k = slots(j, 0) / v; /* every chunk's slots, the embedding's and the loss's included */
    return (c * j->pp + s) * k - (emb_slot(j) && (c > 0 || s > 0) ? 1 : 0);
}

int split_chunk_recomputed(const job_t *j, int s, int c)
{
    int n = split_chunk_layers(j, s, c);
    if (j->recompute == RECOMPUTE_FULL && j->recompute_method == RECOMPUTE_BLOCK && j->recompute_num_layers < n)
        return j->recompute_num_layers;
    return n;
}

int split_stage_recomputed(const job_t *j, int s)
{
    int n = 0;
    for (int c = 0; c < j->vpp; c++)
        n += split_chunk_recomputed(j, s, c);
    return n;
}

int split_kinds(const job_t *j, int stage[3], int count[3])
{
    int n = 0;
    stage[n] = 0, count[n++] = 1;
    if (j->pp > 2)
        stage[n] = 1, count[n++] = j->pp - 2;
    if (j->pp > 1)
        stage[n] = j->pp - 1, count[n++] = 1;
    return n;
}

/* The largest chunk's layers: only a stage's first and last chunks differ
 * from its others. */
static int largest_chunk(const job_t *j)
{
    int stage[3], count[3], kinds = split_kinds(j, stage, count), best = 0;
    for (int a = 0; a < kinds; a++)
        for (int c = 0; c < j->vpp; c += j->vpp > 1 ? j->vpp - 1 : 1) {
            int n = split_chunk_layers(j, stage[a], c);
            best = n > best ? n : best;
        }
    return best;
}

/* Layers whose recomputation pass runs, over the whole model. */
static long total_recomputed(const job_t *j)
{
    int stage[3], count[3], kinds = split_kinds(j, stage, count);
    long n = 0;
    for (int a = 0; a < kinds; a++)
        n += (long)count[a] * split_stage_recomputed(j, stage[a]);
    return n;
}

int split_finalize(job_t *j, char *err)
{
    int L = j->num_layers, p = j->pp, f = j->first_stage_layers, l = j->last_stage_layers;
    int lpv = j->layers_per_vstage, vs = j->vstages_per_rank;
    RULE(!lpv || !vs,
         "num-layers-per-virtual-pipeline-stage = %d and num-virtual-stages-per-pipeline-rank = %d: give one of "
         "the two (Megatron-LM's rule)", lpv, vs);
    RULE(!(ends_given(j) && (emb_slot(j) || loss_slot(j))),
         "decoder-first/last-pipeline-num-layers cannot be combined with account-for-embedding/loss-in-pipeline-"
         "split (Megatron-Core's rule): give the end stages' layers, or count the embedding and loss as layers");
    if (ends_given(j)) {
        RULE(p > 1, "decoder-first/last-pipeline-num-layers needs pipeline-model-parallel-size > 1 (got %d)", p);
        RULE(!lpv,
             "decoder-first/last-pipeline-num-layers with num-layers-per-virtual-pipeline-stage = %d: give the "
             "chunks per stage as num-virtual-stages-per-pipeline-rank instead (Megatron-LM's rule)", lpv);
        int n = p - first_set(j) - last_set(j), mid = L - f - l;
        RULE(n == 0 ? mid == 0 : mid >= n && mid % n == 0,
             "the uneven split does not add up: num-layers = %d less decoder-first-pipeline-num-layers = %d and "
             "decoder-last-pipeline-num-layers = %d leaves %d layer(s) for %d middle stage(s); allowed: %s", L, f,
             l, mid, n, n ? "a positive multiple of the middle stages" : "none (every layer on the two stages)");
    } else if (emb_slot(j) || loss_slot(j)) {
        RULE((L + emb_slot(j) + loss_slot(j)) % p == 0,
             "num-layers = %d plus the embedding (%d) and the loss (%d) counted as layers (account-for-*-in-"
             "pipeline-split) make %d, not divisible by pipeline-model-parallel-size = %d", L, emb_slot(j),
             loss_slot(j), L + emb_slot(j) + loss_slot(j), p);
    } else {
        RULE(L % p == 0, "num-layers = %d is not divisible by pipeline-model-parallel-size = %d", L, p);
    }
    j->vpp = 1;
    if (lpv > 0) {
        int per_stage = slots(j, 0);
        RULE(per_stage % lpv == 0,
             "num-layers = %d is not divisible by pipeline-model-parallel-size x chunks: "
             "%d layers per stage, num-layers-per-virtual-pipeline-stage = %d does not divide it", L, per_stage,
             lpv);
        j->vpp = per_stage / lpv;
    } else if (vs > 0) {
        j->vpp = vs;
    }
    RULE(j->vpp == 1 || p > 1, "%s = %d needs pipeline-model-parallel-size > 1",
         lpv ? "num-layers-per-virtual-pipeline-stage" : "num-virtual-stages-per-pipeline-rank", lpv ? lpv : vs);
    int stage[3], count[3], kinds = split_kinds(j, stage, count);
    for (int a = 0; a < kinds; a++)
        RULE(slots(j, stage[a]) % j->vpp == 0,
             "stage %d's %d layer(s) do not split into num-virtual-stages-per-pipeline-rank = %d chunks (allowed: "
             "a divisor of every stage's layers)", stage[a], slots(j, stage[a]), j->vpp);
    if (j->recompute == RECOMPUTE_FULL) {
        int most = largest_chunk(j);
        RULE(j->recompute_num_layers <= most,
             "recompute-num-layers = %d exceeds the %d layer(s) of the largest model chunk (num-layers / pipeline "
             "stages / chunks per stage)", j->recompute_num_layers, most);
    }
    j->recompute_fraction = (double)total_recomputed(j) / L;
    return 0;
}
