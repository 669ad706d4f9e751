/* layer: per-layer op lists (see layer.h). Shapes per GPU: T = s*b tokens,
 * TP degree t; GEMM (m, n, k) computes (m x k) x (k x n). */
#include "model/layer.h"

#include "model/layout.h"
#include "model/moe.h"
#include "model/workload.h"

#include <string.h>

typedef struct {
    const job_t *j;
    op_t *ops;
    int n;
    double T;   /* tokens of the micro-batch */
    double Tl;  /* tokens this GPU holds outside TP regions (T/t with SP) */
    double wb;  /* bytes per element */
    int moe;    /* the layer is an MoE layer (model/moe.h) */
} builder_t;

static int push(builder_t *b, op_t op)
{
    b->ops[b->n] = op;
    return b->n++;
}

/* A linear layer's GEMM; under --fp8-format at the FP8 rate, its A input
 * (the activation, or the output gradient) cast first. */
static int gemm(builder_t *b, const char *name, double m, double n, double k)
{
    int fp8 = b->j->fp8_format != FP8_NONE;
    return push(b, (op_t){.kind = OP_GEMM, .name = name, .m = m, .n = n, .k = k, .batch = 1, .pair = -1,
                          .fp8 = fp8, .cast_elems = fp8 ? m * k : 0});
}

/* A weight gradient (m, n) = (inputs, outputs) x tokens: accumulated into
 * its fp32 main gradient (op_t.acc_fp32); under FP8 from the casts the
 * forward and the input gradient made. */
static int wgrad(builder_t *b, const char *name, double m, double n, double k)
{
    int i = gemm(b, name, m, n, k);
    b->ops[i].acc_fp32 = 1, b->ops[i].cast_elems = 0, b->ops[i].gemm_pass = 2;
    return i;
}

/* An input gradient (tokens, inputs) = output gradient x weight. */
static int dgrad(builder_t *b, const char *name, double m, double n, double k)
{
    int i = gemm(b, name, m, n, k);
    b->ops[i].gemm_pass = 1;
    return i;
}

/* A memory-bound op; NORM and GELU also compute on each of `elems`
 * elements (see elem_kind_t), and a dropout draws `draws` mask elements. */
static void elem_draw(builder_t *b, const char *name, elem_kind_t kind, double bytes, double elems, double draws)
{
    push(b, (op_t){.kind = OP_ELEM, .name = name, .bytes = bytes, .elems = elems, .draws = draws, .elem_kind = kind,
                   .pair = -1});
}

static void elem_math(builder_t *b, const char *name, elem_kind_t kind, double bytes, double elems)
{
    elem_draw(b, name, kind, bytes, elems, 0);
}

static void elem(builder_t *b, const char *name, double bytes) { elem_math(b, name, ELEM_STREAM, bytes, 0); }

/* A collective over group g of `bytes` (the all-gather's output, the
 * reduce-scatter's input, each member's share of an all-to-all or a ring
 * step); its index. Over a group of one rank nothing (-1): Megatron-Core
 * skips the call. */
static int coll(builder_t *b, const char *name, coll_t c, group_t g, double bytes, overlap_t ovl, int pair)
{
    layout_span_t s = layout_group_span(b->j, g);
    if (s.size * s.blocks <= 1)
        return -1;
    return push(b, (op_t){.kind = OP_COLL, .name = name, .coll = c, .group = g, .bytes = bytes, .overlap = ovl,
                          .pair = pair});
}

/* A TP collective of the full (T x h) activation. */
static void tp_coll(builder_t *b, const char *name, coll_t c, overlap_t ovl, int pair)
{
    coll(b, name, c, GROUP_TP, b->T * b->j->hidden_size * b->wb, ovl, pair);
}

/* Collective before a column-parallel GEMM in forward: all-gather of the
 * sequence-parallel input (none without SP: the input is replicated). */
static void fwd_gather(builder_t *b, const char *name, int gemm_idx)
{
    const job_t *j = b->j;
    if (j->sequence_parallel)
        tp_coll(b, name, COLL_ALLGATHER, j->tp_comm_overlap ? OVL_CHUNKED : OVL_NONE, gemm_idx);
}

/* Collective after a row-parallel GEMM in forward: reduce-scatter with SP,
 * all-reduce without. */
static void fwd_reduce(builder_t *b, const char *name, int gemm_idx)
{
    const job_t *j = b->j;
    tp_coll(b, name, j->sequence_parallel ? COLL_REDUCESCATTER : COLL_ALLREDUCE,
            j->tp_comm_overlap ? OVL_CHUNKED : OVL_NONE, gemm_idx);
}

/* FC1's output width on one TP rank: f / t, or gate and up with SwiGLU. */
static double fc1_n(const job_t *j) { return workload_fc1_width(j) / j->tp; }

/* FC1's activation over `elems` (rows x the activation's width on this
 * rank; dense, experts and shared expert alike), fused or not, in passes
 * over that tensor. GeLU forward: one pass reading the pre-activation
 * and writing the output (2; the bias is FC1's GEMM epilogue or inside the
 * GeLU kernel), as megasim's run and Megatron's jit bias-GeLU do it;
 * backward, reading the output gradient and the pre-activation and
 * writing the input gradient (3). cuBLASLt's epilogues cost about the
 * same on an H200 (kern_bench, 2026-11-29, the 1.3B FC1, 8192 x 8192 x
 * 2048): GeLU 66 us over the bias GEMM (2 f at the copy rate: 67 us),
 * dGeLU 77 us (2.3 f; 25 to 90 us on an H100, 2026-11-26), where 1 f each
 * way had been priced until then. SwiGLU (Megatron's bias_swiglu kernel:
 * no GEMM epilogue takes two halves) reads gate and up and writes their
 * product (3), backward reads the gradient, gate and up and writes both
 * halves' gradients (5). */
static void activation(builder_t *b, int bwd, double elems)
{
    const job_t *j = b->j;
    double passes = j->swiglu ? (bwd ? 5 : 3) : (bwd ? 3 : 2);
    elem_math(b, j->swiglu ? (bwd ? "swiglu_bwd" : "swiglu") : (bwd ? "gelu_bwd" : "gelu"), ELEM_GELU,
              passes * elems * b->wb, elems);
}

/* Rotary position embedding: one pass reading and writing Q and K (and,
 * backward, their gradients) on one TP rank; nothing for learned or no
 * positions (the learned embedding is added once, on the first stage). */
static void rope(builder_t *b, const char *name)
{
    const job_t *j = b->j;
    if (j->position_embedding == POS_ROPE)
        elem(b, name, 2 * b->T * ((double)j->hidden_size + (double)j->num_query_groups * j->head_dim) / j->tp * b->wb);
}

/* Dropout, residual add and LayerNorm around one residual branch:
 * Megatron's bias-dropout-add (read x and residual, write sum, and a
 * 1-byte mask when --hidden-dropout > 0) then LayerNorm (read, write);
 * fused: one kernel writing both. The backward moves twice the elements;
 * the forward draws the mask, the backward reads it. */
static void residual_norm(builder_t *b, const char *name, int bwd)
{
    double mask = b->j->hidden_dropout > 0 ? 1 : 0;
    double per = (b->j->fused_elementwise ? 4 * b->wb : 5 * b->wb) + mask;
    double elems = (bwd ? 2 : 1) * b->Tl * b->j->hidden_size;
    elem_draw(b, name, ELEM_NORM, elems * per, elems, bwd ? 0 : mask * elems);
}

/* One flash attention kernel: bh heads of s queries, each seeing at most
 * w keys (w = s: causal). */
static int flash(builder_t *b, int bwd, double bh, double s, double w)
{
    const job_t *j = b->j;
    double keys = workload_causal_keys(s, w); /* the mask drawn in both passes, as FlashAttention */
    return push(b, (op_t){.kind = OP_ATTN, .name = bwd ? "attn_bwd" : "attn", .batch = bh, .attn_keys = keys,
                          .attn_seq = s, .attn_window = w < s ? w : s, .attn_d = j->head_dim, .attn_bwd = bwd,
                          .attn_v1 = j->attention == ATTN_FLASH1, .pair = -1,
                          .attn_group = (double)j->num_attention_heads / j->num_query_groups,
                          .draws = j->attention_dropout > 0 ? bh * keys : 0});
}

/* Context parallelism's attention (Megatron-Core with Transformer Engine):
 * each rank holds T = s b / CP tokens, two chunks of the sequence balanced
 * so that every rank has 1/CP of the causal work.
 *  - p2p: CP steps, each the rank's queries against one rank's keys and
 *    values (the work of causal attention over s / CP: s^2 / 2CP^2 pairs a
 *    head), the next block's K and V passed round the ring beside it (its
 *    gradient too in the backward), and the blocks' outputs merged
 *    (forward) or their gradients summed (backward);
 *  - all_gather: K and V gathered (dK, dV reduce-scattered back), then
 *    the rank's queries against all of them in one kernel;
 *  - a2a: all-to-alls scatter the heads and gather the sequence (Q, K, V
 *    in, the output back; the gradients the other way), then whole
 *    sequences for 1/CP of the heads.
 * The last two run 1/CP of the heads' causal work, one kernel. */
static void cp_attention(builder_t *b, int bwd)
{
    const job_t *j = b->j;
    double s = j->seq_length, cp = j->cp, T = b->T, wb = b->wb;
    double bh = (double)j->micro_batch_size * j->num_attention_heads / j->tp;
    double q = (double)j->num_attention_heads / j->tp * j->head_dim;
    double kv = (j->num_query_groups >= j->tp ? (double)j->num_query_groups / j->tp : 1) * j->head_dim;
    if (j->cp_comm_type == CP_P2P) { /* K, V (and dK, dV) to the next rank beside each block but the last */
        int a = flash(b, bwd, bh, s / cp, s / cp);
        b->ops[a].repeat = j->cp;
        int ring = coll(b, bwd ? "cp_ring_kv_dkv" : "cp_ring_kv", COLL_SENDRECV, GROUP_CP,
                        (bwd ? 4 : 2) * T * kv * wb, OVL_ASYNC, a);
        b->ops[ring].repeat = j->cp - 1;
        /* The ring's sums, a pass over a chunk (T / 2 tokens) each: the
         * 2 CP + 1 blocks a rank meets are its two chunks of queries against
         * the chunks of keys before them. Forward, every block but each
         * chunk's first merged into its running output by the log-sum-exp
         * (read both outputs and both fp32 log-sum-exps, write one of each;
         * Transformer Engine's out correction, real/gpt_cp.c ring_fwd);
         * backward, every block's dQ, dK and dV added to their sums (read
         * two, write one; ring_bwd). */
        double nh = (double)j->num_attention_heads / j->tp;
        elem(b, bwd ? "cp_grad_add" : "cp_merge", 3 * T / 2 * (bwd ? (q + 2 * kv) * wb : q * wb + nh * 4));
        b->ops[b->n - 1].repeat = bwd ? 2 * j->cp + 1 : 2 * j->cp - 1;
    } else if (j->cp_comm_type == CP_ALLGATHER) {
        if (!bwd)
            coll(b, "cp_ag_kv", COLL_ALLGATHER, GROUP_CP, 2 * T * cp * kv * wb, OVL_NONE, -1);
        flash(b, bwd, bh / cp, s, s);
        if (bwd)
            coll(b, "cp_rs_dkv", COLL_REDUCESCATTER, GROUP_CP, 2 * T * cp * kv * wb, OVL_NONE, -1);
    } else {
        coll(b, bwd ? "cp_a2a_dout" : "cp_a2a_qkv", COLL_ALLTOALL, GROUP_CP, T * (bwd ? q : q + 2 * kv) * wb,
             OVL_NONE, -1);
        flash(b, bwd, bh / cp, s, s);
        coll(b, bwd ? "cp_a2a_dqkv" : "cp_a2a_out", COLL_ALLTOALL, GROUP_CP, T * (bwd ? q + 2 * kv : q) * wb,
             OVL_NONE, -1);
    }
}

/* One of the unfused attention's batched GEMMs (pass 1 forward, 2
 * backward: the profile's unfused_*_rel). */
static void attn_gemm(builder_t *b, const char *name, int pass, double m, double n, double k, double bh)
{
    push(b, (op_t){.kind = OP_GEMM, .name = name, .unfused_attn = pass, .m = m, .n = n, .k = k, .batch = bh,
                   .pair = -1});
}

/* Unfused: scores over all s x s pairs (the mask does not save work), the
 * softmax bound by its bytes or by the profile's softmax rates over the
 * scores; the dropout pass (read, write, 1-byte mask) only with a dropout. */
static void unfused_attention(builder_t *b, int bwd, double bh, double s, double d, int drop)
{
    double scores = bh * s * s, sq = scores * b->wb;
    if (!bwd) {
        attn_gemm(b, "qk", 1, s, s, d, bh);
        elem_math(b, "softmax", ELEM_SOFTMAX_FWD, 2 * sq, scores); /* scale-mask-softmax: read, write */
        if (drop) /* every score's mask drawn, kept for the backward */
            elem_draw(b, "attn_dropout", ELEM_STREAM, 2 * sq + sq / b->wb, 0, scores);
        attn_gemm(b, "pv", 1, s, d, s, bh);
        return;
    }
    attn_gemm(b, "pv_dgrad", 2, s, s, d, bh);
    attn_gemm(b, "pv_wgrad", 2, s, d, s, bh);
    if (drop)
        elem(b, "attn_dropout_bwd", 2 * sq + sq / b->wb);
    elem_math(b, "softmax_bwd", ELEM_SOFTMAX_BWD, 3 * sq, scores); /* read P and dP, write dS */
    attn_gemm(b, "qk_dgrad_q", 2, s, d, s, bh);
    attn_gemm(b, "qk_dgrad_k", 2, s, d, s, bh);
}

int layer_unfused_attention_ops(double bh, double s, double d, double wb, int bwd, op_t *ops)
{
    builder_t b = {.ops = ops, .wb = wb};
    memset(ops, 0, sizeof(op_t) * LAYER_MAX_OPS);
    unfused_attention(&b, bwd, bh, s, d, 0);
    return b.n;
}

static void attention_core(builder_t *b, int bwd)
{
    const job_t *j = b->j;
    double s = j->seq_length, d = j->head_dim;
    double bh = (double)j->micro_batch_size * j->num_attention_heads / j->tp;
    if (j->cp > 1) {
        cp_attention(b, bwd);
        return;
    }
    if (attn_is_flash(j->attention))
        flash(b, bwd, bh, s, j->window);
    else
        unfused_attention(b, bwd, bh, s, d, j->attention_dropout > 0);
}

/* Widths of the column-parallel (input) and row-parallel (output) GEMMs. */
static double qkv_n(const job_t *j)
{
    return ((double)j->hidden_size + 2.0 * j->num_query_groups * j->head_dim) / j->tp;
}

/* A collective over one of the experts' groups. */
static void moe_coll(builder_t *b, const char *name, coll_t c, group_t g, double bytes)
{
    int i = coll(b, name, c, g, bytes, OVL_NONE, -1);
    if (i >= 0)
        b->ops[i].moe_load = 1;
}

/* The rank's experts' GEMM (m rows each, n x k weights) of a linear
 * layer's pass (op_t.gemm_pass): one grouped GEMM (--moe-grouped-gemm)
 * or one per expert, one after another. */
static int expert_gemm(builder_t *b, const char *name, double m, double n, double k, int pass)
{
    const job_t *j = b->j;
    int el = j->num_experts / j->ep;
    int i = pass == 2 ? wgrad(b, name, m, n, k) : pass == 1 ? dgrad(b, name, m, n, k) : gemm(b, name, m, n, k);
    if (j->moe_grouped_gemm)
        b->ops[i].batch = el, b->ops[i].cast_elems *= el;
    else
        b->ops[i].repeat = el;
    b->ops[i].moe_load = 1;
    return i;
}

/* A token permutation (or its inverse) of the rank's rows: a gather read
 * and written, and without --moe-permute-fusion an index pass and a
 * second copy before it. */
static void permute(builder_t *b, const char *name, double rows)
{
    elem(b, name, (b->j->moe_permute_fusion ? 2 : 4) * rows * b->j->hidden_size * b->wb);
    b->ops[b->n - 1].moe_load = 1;
}

/* Tokens (or their gradients) to the experts' ranks (in 1) or back: the
 * alltoall dispatcher's all-to-all over EP and gather (reduce-scatter)
 * over ETP, or the allgather dispatcher's gather (reduce-scatter) of every
 * token over the expert group. names: the EP all-to-all's, the ETP
 * collective's, the allgather dispatcher's. */
static void moe_route(builder_t *b, int in, const char *a2a, const char *etp, const char *ag)
{
    const job_t *j = b->j;
    double h = j->hidden_size, rows = moe_rows_local(j) * h * b->wb;
    double sent = b->Tl * j->moe_topk * h * b->wb, gathered = b->Tl * h * b->wb * j->ep * j->etp;
    if (j->moe_dispatcher != MOE_ALLTOALL) {
        moe_coll(b, ag, in ? COLL_ALLGATHER : COLL_REDUCESCATTER, GROUP_ETP_EP, gathered);
    } else if (in) {
        moe_coll(b, a2a, COLL_ALLTOALL, GROUP_EP, sent);
        moe_coll(b, etp, COLL_ALLGATHER, GROUP_ETP, rows);
    } else {
        moe_coll(b, etp, COLL_REDUCESCATTER, GROUP_ETP, rows);
        moe_coll(b, a2a, COLL_ALLTOALL, GROUP_EP, sent);
    }
}

/* An MoE layer's MLP (model/moe.h), forward or backward, as Megatron-Core
 * runs it: the router (a replicated h x E GEMM and its softmax top-k) on
 * this rank's SP share of the tokens; their top-k copies permuted, sent to
 * the experts' ranks (all-to-all over EP, then gathered over ETP; or the
 * allgather dispatcher: every token gathered over EP x ETP), the rank's
 * experts' FC1, activation and FC2 on their rows (moe_rows_local, at the
 * even split), and the way back; the shared expert as a dense MLP beside
 * (not overlapped). */
static void moe_mlp(builder_t *b, int bwd)
{
    const job_t *j = b->j;
    double h = j->hidden_size, Tl = b->Tl, k = j->moe_topk, E = j->num_experts;
    double R = moe_rows_local(j), el = (double)j->num_experts / j->ep, Re = R / el;
    double fe = (double)j->moe_ffn_hidden_size / j->etp, fc1 = (j->swiglu ? 2 : 1) * fe;
    if (!bwd) {
        push(b, (op_t){.kind = OP_GEMM, .name = "router", .m = Tl, .n = E, .k = h, .batch = 1, .pair = -1});
        elem(b, "router_topk", 2 * Tl * E * 4);
        permute(b, "permute", Tl * k);
        moe_route(b, 1, "ep_dispatch", "etp_ag_tokens", "ep_ag_tokens");
        expert_gemm(b, "expert_fc1", Re, fc1, h, 0);
        activation(b, 0, R * fe);
        b->ops[b->n - 1].moe_load = 1;
        expert_gemm(b, "expert_fc2", Re, h, fe, 0);
        moe_route(b, 0, "ep_combine", "etp_rs_out", "ep_rs_out");
        permute(b, "unpermute", Tl * k);
    } else {
        permute(b, "unpermute_bwd", Tl * k);
        moe_route(b, 1, "ep_combine_bwd", "etp_ag_grad", "ep_ag_grad");
        expert_gemm(b, "expert_fc2_dgrad", Re, fe, h, 1);
        expert_gemm(b, "expert_fc2_wgrad", fe, h, Re, 2);
        activation(b, 1, R * fe);
        b->ops[b->n - 1].moe_load = 1;
        expert_gemm(b, "expert_fc1_dgrad", Re, h, fc1, 1);
        expert_gemm(b, "expert_fc1_wgrad", h, fc1, Re, 2);
        moe_route(b, 0, "ep_dispatch_bwd", "etp_rs_grad", "ep_rs_grad");
        permute(b, "permute_bwd", Tl * k);
        push(b, (op_t){.kind = OP_GEMM, .name = "router_dgrad", .m = Tl, .n = h, .k = E, .batch = 1, .pair = -1,
                       .gemm_pass = 1});
        push(b, (op_t){.kind = OP_GEMM, .name = "router_wgrad", .m = h, .n = E, .k = Tl, .batch = 1, .pair = -1,
                       .acc_fp32 = 1, .gemm_pass = 2});
    }
}

/* The shared expert: a dense MLP of its own width, TP-split as the dense
 * layer's (the gathers and reduce-scatters of SP included). */
static void shared_expert(builder_t *b, int bwd);

static void forward(builder_t *b)
{
    const job_t *j = b->j;
    double T = b->T, h = j->hidden_size, ft = (double)j->ffn_hidden_size / j->tp;
    if (j->parallel_block) {
        /* PaLM-style: one LayerNorm, one gather feeding the fused QKV+FC1
         * GEMM, one reduce-scatter of the fused proj+FC2 output. */
        residual_norm(b, "ln", 0);
        int in = b->n + (j->sequence_parallel && j->tp > 1);
        fwd_gather(b, "ag_in", in);
        gemm(b, "qkv_fc1", T, qkv_n(j) + fc1_n(j), h);
        rope(b, "rope");
        attention_core(b, 0);
        activation(b, 0, T * ft);
        int out = gemm(b, "proj_fc2", T, h, h / j->tp + ft);
        fwd_reduce(b, "rs_out", out);
        return;
    }
    residual_norm(b, "ln1", 0);
    fwd_gather(b, "ag_qkv", b->n + (j->sequence_parallel && j->tp > 1));
    gemm(b, "qkv", T, qkv_n(j), h);
    rope(b, "rope");
    attention_core(b, 0);
    fwd_reduce(b, "rs_proj", gemm(b, "proj", T, h, h / j->tp));
    residual_norm(b, "ln2", 0);
    if (b->moe) {
        moe_mlp(b, 0);
        shared_expert(b, 0);
        return;
    }
    fwd_gather(b, "ag_fc1", b->n + (j->sequence_parallel && j->tp > 1));
    gemm(b, "fc1", T, fc1_n(j), h);
    activation(b, 0, T * ft);
    fwd_reduce(b, "rs_fc2", gemm(b, "fc2", T, h, ft));
}

/* Backward of a column-parallel GEMM (m, n, k) = (T, n_out, h): the input
 * gradient (dgrad) and the weight gradient (wgrad). With SP the input is
 * re-gathered beside dgrad and the input gradient reduce-scattered beside
 * wgrad (Megatron overlaps both); without SP the input gradient is
 * all-reduced beside wgrad. */
static void col_backward(builder_t *b, const char *dname, const char *wname, double n_out)
{
    const job_t *j = b->j;
    double T = b->T, h = j->hidden_size;
    int dg = dgrad(b, dname, T, h, n_out);
    if (j->sequence_parallel)
        tp_coll(b, "ag_input", COLL_ALLGATHER, OVL_ASYNC, dg);
    int wg = wgrad(b, wname, h, n_out, T);
    tp_coll(b, j->sequence_parallel ? "rs_dgrad" : "ar_dgrad",
            j->sequence_parallel ? COLL_REDUCESCATTER : COLL_ALLREDUCE, OVL_ASYNC, wg);
}

/* Backward of a row-parallel GEMM (T, h, k_in): with SP the output
 * gradient is gathered first (exposed in Megatron, chunked with dgrad under
 * --tp-comm-overlap); without SP nothing is communicated. */
static void row_backward(builder_t *b, const char *dname, const char *wname, double k_in)
{
    const job_t *j = b->j;
    double T = b->T, h = j->hidden_size;
    if (j->sequence_parallel)
        tp_coll(b, "ag_grad", COLL_ALLGATHER, j->tp_comm_overlap ? OVL_CHUNKED : OVL_NONE,
                b->n + (j->tp > 1));
    dgrad(b, dname, T, k_in, h);
    wgrad(b, wname, k_in, h, T);
}

static void backward(builder_t *b)
{
    const job_t *j = b->j;
    double T = b->T, ft = (double)j->ffn_hidden_size / j->tp;
    if (j->parallel_block) {
        row_backward(b, "proj_fc2_dgrad", "proj_fc2_wgrad", j->hidden_size / j->tp + ft);
        activation(b, 1, T * ft);
        attention_core(b, 1);
        rope(b, "rope_bwd");
        col_backward(b, "qkv_fc1_dgrad", "qkv_fc1_wgrad", qkv_n(j) + fc1_n(j));
        residual_norm(b, "ln_bwd", 1);
        return;
    }
    if (b->moe) {
        shared_expert(b, 1);
        moe_mlp(b, 1);
    } else {
        row_backward(b, "fc2_dgrad", "fc2_wgrad", ft);
        activation(b, 1, T * ft);
        col_backward(b, "fc1_dgrad", "fc1_wgrad", fc1_n(j));
    }
    residual_norm(b, "ln2_bwd", 1);
    row_backward(b, "proj_dgrad", "proj_wgrad", j->hidden_size / j->tp);
    attention_core(b, 1);
    rope(b, "rope_bwd");
    col_backward(b, "qkv_dgrad", "qkv_wgrad", qkv_n(j));
    residual_norm(b, "ln1_bwd", 1);
}

static void shared_expert(builder_t *b, int bwd)
{
    const job_t *j = b->j;
    double T = b->T, h = j->hidden_size, fs = (double)j->moe_shared_ffn / j->tp;
    double fc1 = (j->swiglu ? 2 : 1) * fs, elems = T * fs;
    if (!j->moe_shared_ffn)
        return;
    if (!bwd) {
        fwd_gather(b, "ag_shared", b->n + (j->sequence_parallel && j->tp > 1));
        gemm(b, "shared_fc1", T, fc1, h);
        activation(b, 0, elems);
        fwd_reduce(b, "rs_shared", gemm(b, "shared_fc2", T, h, fs));
        return;
    }
    row_backward(b, "shared_fc2_dgrad", "shared_fc2_wgrad", fs);
    activation(b, 1, elems);
    col_backward(b, "shared_fc1_dgrad", "shared_fc1_wgrad", fc1);
}

int layer_ops(const job_t *job, pass_t pass, op_t *ops) { return layer_ops_of(job, pass, 0, ops); }

int layer_ops_of(const job_t *job, pass_t pass, int moe, op_t *ops)
{
    builder_t b = {job, ops, 0, job_tokens_local(job), 0, job_weight_bytes(job), moe && job->num_experts > 0};
    b.Tl = job->sequence_parallel ? b.T / job->tp : b.T;
    memset(ops, 0, sizeof(op_t) * LAYER_MAX_OPS);
    if (pass == PASS_FWD)
        forward(&b);
    else if (pass == PASS_BWD)
        backward(&b);
    else if (job->recompute == RECOMPUTE_FULL)
        forward(&b);
    else if (job->recompute == RECOMPUTE_SELECTIVE && !attn_is_flash(job->attention))
        attention_core(&b, 0);
    return b.n;
}

double layer_p2p_bytes(const job_t *job)
{
    double full = job_tokens_local(job) * job->hidden_size * job_weight_bytes(job);
    return full / job->tp;
}
