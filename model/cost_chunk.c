/* cost_chunk: the price of one chunk-step, the unit both executors play:
 * one model chunk's forward or backward on one micro-batch on one stage
 * (cost.h). Walks the layer's op list (model/layer.c) at cost_op_s, with
 * each TP collective exposed or hidden as its overlap switch says, plus
 * the embedding and output layers on the end stages. The simulator prices
 * its FWD/BWD ops with cost_chunk_times and the closed form builds its
 * stage times from cost_pass and cost_chunk_extra, so they share one cost. */
#include "model/cost.h"

#include "model/layer.h"
#include "model/moe.h"
#include "model/split.h"
#include "model/workload.h"

#include <math.h>

/* Time of a GEMM pipelined with its SP collective under --tp-comm-overlap
 * (which needs SP), as the real backend runs it (real/gpt_layer.c): a ring of t
 * steps, each multiplying one (T/t)-row slice while the next slice travels
 * to the neighbour (all-gather) or the partial sum just made is passed on
 * (reduce-scatter). The first slice is local, so no GEMM waits for a
 * transfer first; each later step takes the slower of its transfer and its
 * GEMM, the GEMM slowed by comm_slowdown while the transfer runs beside it.
 * The steps alternate between two compute streams (as TransformerEngine's
 * split overlap), so while each slice is there before the previous step's
 * GEMM ends, the steps fill each other's last waves and together cost the
 * whole GEMM's time; when the transfer is the slower, each step waits for
 * its slice and pays its own wave quantisation. What the GEMM op costs
 * beyond its multiply (whole_s, its cost_op_s, less the multiply: FP8's
 * casts, the CPU's transposes) comes with it, the transposes once a step:
 * each step's GEMM packs its operand again. */
static void chunked_pair(const hw_t *hw, const job_t *j, const op_t *coll, const op_t *g, double whole_s,
                         double *compute_s, double *exposed_s)
{
    group_layout_t lay = cost_group_layout(j, hw, coll->group);
    int t = j->tp;
    double comm_c = cost_p2p_s(hw, coll->bytes / t, &lay);
    double core = cost_gemm_prec_s(hw, j, g->m, g->n, g->k, g->batch, g->fp8), gemm_c = core / t;
    if (comm_c > gemm_c * (1 + hw->gpu.comm_slowdown))
        gemm_c = cost_gemm_prec_s(hw, j, g->m / t, g->n, g->k, g->batch, g->fp8);
    double slow = gemm_c * (1 + hw->gpu.comm_slowdown);
    double packs = t * cost_gemm_pack_s(hw, g->gemm_pass, g->m / t, g->n, g->k, g->batch) -
                   cost_gemm_pack_s(hw, g->gemm_pass, g->m, g->n, g->k, g->batch);
    *compute_s = (t - 1) * slow + gemm_c + (whole_s - core) + packs;
    *exposed_s = (t - 1) * fmax(0, comm_c - slow);
}

/* cost_pass for a dense (moe 0) or an MoE layer (moe 1, model/moe.h). */
static cost_pass_t cost_pass_of(const hw_t *hw, const job_t *j, pass_t pass, int moe)
{
    op_t ops[LAYER_MAX_OPS];
    double t[LAYER_MAX_OPS];
    int n = layer_ops_of(j, pass, moe, ops);
    cost_pass_t r = {0};
    for (int i = 0; i < n; i++)
        t[i] = cost_op_s(hw, j, &ops[i]);
    for (int i = 0; i < n; i++) {
        const op_t *o = &ops[i];
        if (o->moe_load) /* compute, or an exposed collective */
            r.moe_load_s += t[i];
        if (o->kind == OP_COLL && (o->group == GROUP_EP || o->group == GROUP_ETP || o->group == GROUP_ETP_EP))
            r.a2a_s += t[i];
        if (o->kind != OP_COLL) {
            r.compute_s += t[i];
            continue;
        }
        double g = o->pair >= 0 ? t[o->pair] : 0;
        if (o->overlap == OVL_NONE) {
            r.exposed_s += t[i];
        } else if (o->overlap == OVL_ASYNC) {
            /* Launched beside its GEMM: exposed only past the GEMM's end;
             * the GEMM slows while they share the GPU. A repeated one
             * (CP's ring) meets its pair's runs one by one. */
            int runs = op_runs(o);
            double one = t[i] / runs, pair_one = g / op_runs(&ops[o->pair]);
            r.exposed_s += runs * fmax(0, one - pair_one);
            r.compute_s += runs * hw->gpu.comm_slowdown * fmin(one, pair_one);
        } else {
            double c, e;
            chunked_pair(hw, j, o, &ops[o->pair], g, &c, &e);
            r.compute_s += c - g; /* replaces the unchunked GEMM */
            r.exposed_s += e;
        }
    }
    /* Activation offloading: the layer's offloaded share of its saved
     * activations goes to the host after its forward and comes back before
     * its backward, on a copy stream beside the layer's own work; the
     * compute stream waits only for what the copy takes beyond it. */
    if (j->offload_fraction > 0 && pass != PASS_RECOMPUTE) {
        double copy_s = j->offload_fraction * workload_layer_activation_bytes(j) / (hw->gpu.pcie_gbps * 1e9);
        r.compute_s += fmax(0, copy_s - (r.compute_s + r.exposed_s));
    }
    return r;
}

/* Per micro-batch work outside the transformer layers: the embedding
 * lookup on the first stage's first chunk, the output layer and the fused
 * softmax cross-entropy on the last stage's last chunk (per GPU). Both are
 * split by vocabulary over TP (Megatron-LM's VocabParallelEmbedding and
 * vocab-parallel cross-entropy, as `run` plays them): each TP rank embeds
 * every token from its rows and the TP all-reduce adds them; each computes
 * its columns of every token's logits, and the hidden states' gradient is
 * summed over TP. */
static double tp_coll_s(const hw_t *hw, const job_t *j, coll_t kind, double bytes)
{
    group_layout_t g = cost_group_layout(j, hw, GROUP_TP);
    return cost_coll_s(hw, kind, bytes, &g);
}

static void embedding_extra(const hw_t *hw, const job_t *j, double *fwd, double *bwd)
{
    double T = job_tokens_local(j), h = j->hidden_size, wb = job_weight_bytes(j);
    double Tl = j->sequence_parallel ? T / j->tp : T;
    *fwd = cost_elem_s(hw, T * h * wb * 3);      /* gather rows, add positions */
    *bwd = cost_elem_s(hw, T * h * (wb + 4) * 2); /* scatter-add into fp32 grads */
    if (j->hidden_dropout > 0) { /* Megatron's embedding dropout: read, write, 1-byte mask; the backward applies it */
        op_t d = {.kind = OP_ELEM, .elem_kind = ELEM_STREAM, .bytes = Tl * h * (2 * wb + 1), .draws = Tl * h};
        *fwd += cost_op_s(hw, j, &d);
        d.draws = 0;
        *bwd += cost_op_s(hw, j, &d);
    }
    if (j->tp > 1) { /* the slices summed (under SP without learned positions straight to each rank's rows);
                        with SP the rows' gradients gathered back */
        int scatter = j->sequence_parallel && j->position_embedding != POS_LEARNED;
        *fwd += tp_coll_s(hw, j, scatter ? COLL_REDUCESCATTER : COLL_ALLREDUCE, T * h * wb);
        if (j->sequence_parallel)
            *bwd += tp_coll_s(hw, j, COLL_ALLGATHER, T * h * wb);
    }
}

static void output_extra(const hw_t *hw, const job_t *j, double *fwd, double *bwd)
{
    double T = job_tokens_local(j), h = j->hidden_size;
    double wb = job_weight_bytes(j), Vt = (double)j->padded_vocab_size / j->tp;
    *fwd = cost_gemm_s(hw, j, T, Vt, h, 1) + cost_elem_s(hw, T * Vt * (wb + 4));
    /* its input and weight gradients, priced as every linear layer's (cost_op_s: the fp32 accumulation, the
     * CPU's transposes) */
    op_t dgrad = {.kind = OP_GEMM, .m = T, .n = h, .k = Vt, .batch = 1, .gemm_pass = 1};
    op_t wgrad = {.kind = OP_GEMM, .m = h, .n = Vt, .k = T, .batch = 1, .gemm_pass = 2, .acc_fp32 = 1};
    *bwd = cost_op_s(hw, j, &dgrad) + cost_op_s(hw, j, &wgrad) + cost_elem_s(hw, T * Vt * (4 + wb));
    if (j->tp == 1)
        return;
    *fwd += tp_coll_s(hw, j, COLL_ALLGATHER, T * 2 * 4 * j->tp); /* each rank's (lse, target logit) per token */
    if (j->sequence_parallel) { /* gather the final hidden states; again for the weight gradient */
        *fwd += tp_coll_s(hw, j, COLL_ALLGATHER, T * h * wb);
        *bwd += tp_coll_s(hw, j, COLL_ALLGATHER, T * h * wb) + tp_coll_s(hw, j, COLL_REDUCESCATTER, T * h * wb);
    } else {
        *bwd += tp_coll_s(hw, j, COLL_ALLREDUCE, T * h * wb);
    }
}

void cost_chunk_extra(const hw_t *hw, const job_t *j, int stage, int chunk, double *fwd, double *bwd)
{
    double f, b;
    *fwd = *bwd = 0;
    if (stage == 0 && chunk <= 0)
        embedding_extra(hw, j, &f, &b), *fwd += f, *bwd += b;
    if (stage == j->pp - 1 && (chunk < 0 || chunk == j->vpp - 1))
        output_extra(hw, j, &f, &b), *fwd += f, *bwd += b;
}

cost_pass_t cost_pass(const hw_t *hw, const job_t *j, pass_t pass) { return cost_pass_of(hw, j, pass, 0); }

void cost_layer(const hw_t *hw, const job_t *j, int moe, cost_layer_t *c)
{
    c->fwd = cost_pass_of(hw, j, PASS_FWD, moe), c->bwd = cost_pass_of(hw, j, PASS_BWD, moe);
    c->rc = cost_pass_of(hw, j, PASS_RECOMPUTE, moe);
}

void cost_layers(const cost_layer_t c[2], double layers, double recomputed, double moe_layers, cost_chunk_t *ct)
{
    *ct = (cost_chunk_t){0};
    /* the dense layers, and the MoE ones (block recomputation's share taken evenly over both) */
    double n[2] = {layers - moe_layers, moe_layers}, r = layers > 0 ? recomputed / layers : 0; /* block: a share */
    for (int k = 0; k < 1 + (moe_layers > 0); k++) {
        ct->fwd_s += n[k] * c[k].fwd.compute_s;
        ct->fwd_tp_s += n[k] * c[k].fwd.exposed_s;
        ct->bwd_s += n[k] * (c[k].bwd.compute_s + r * c[k].rc.compute_s);
        ct->bwd_tp_s += n[k] * (c[k].bwd.exposed_s + r * c[k].rc.exposed_s);
        ct->fwd_moe_s += n[k] * c[k].fwd.moe_load_s;
        ct->bwd_moe_s += n[k] * (c[k].bwd.moe_load_s + r * c[k].rc.moe_load_s);
        ct->fwd_a2a_s += n[k] * c[k].fwd.a2a_s;
        ct->bwd_a2a_s += n[k] * (c[k].bwd.a2a_s + r * c[k].rc.a2a_s);
    }
}

void cost_chunk_times(const job_t *j, const hw_t *hw, int stage, int chunk, cost_chunk_t *ct)
{
    double ef, eb;
    cost_layer_t c[2];
    cost_layer(hw, j, 0, &c[0]);
    if (j->num_experts > 0)
        cost_layer(hw, j, 1, &c[1]);
    cost_layers(c, split_chunk_layers(j, stage, chunk), split_chunk_recomputed(j, stage, chunk),
                moe_chunk_layers(j, stage, chunk), ct);
    cost_chunk_extra(hw, j, stage, chunk, &ef, &eb);
    ct->fwd_s += ef, ct->bwd_s += eb;
}
