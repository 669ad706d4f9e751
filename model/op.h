/* op: one operation of a per-rank program, as a CUDA program issues it: a
 * compute kernel with its shape, a collective on a named group with its
 * byte count, or a point-to-point transfer. The closed-form estimator sums
 * their costs; the simulator (sim/) and the real backend (real/) run the
 * same ops. */
#ifndef MODEL_OP_H
#define MODEL_OP_H

typedef enum { OP_GEMM, OP_ATTN, OP_ELEM, OP_COLL, OP_P2P, OP_OPTIM } op_kind_t;
/* COLL_SENDRECV: one ring step, each member sending `bytes` to the next
 * and receiving as much from the one before (context parallelism's KV ring). */
typedef enum { COLL_ALLREDUCE, COLL_ALLGATHER, COLL_REDUCESCATTER, COLL_BROADCAST, COLL_ALLTOALL, COLL_SENDRECV } coll_t;
/* GROUP_DP: the ranks holding the same weights, DP x CP (the gradient
 * reduction and the ZeRO shards); GROUP_CP: one sequence's CP ranks. */
/* GROUP_ETP, GROUP_EP, GROUP_EDP: the experts' groups, folded into the
 * same ranks (model/moe.h); GROUP_ETP_EP: ETP x EP together (Megatron-Core's
 * expert tensor and model parallel group, the allgather dispatcher's). */
typedef enum {
    GROUP_TP, GROUP_DP, GROUP_PP, GROUP_EMB, GROUP_WORLD, GROUP_CP, GROUP_ETP, GROUP_EP, GROUP_EDP, GROUP_ETP_EP
} group_t;
/* How a collective meets compute: exposed on the stream; launched
 * asynchronously beside a paired GEMM (Megatron's backward overlap); or
 * chunked and pipelined with the paired GEMM (--tp-comm-overlap). */
typedef enum { OVL_NONE, OVL_ASYNC, OVL_CHUNKED } overlap_t;
/* What an ELEM op computes per element: streaming only (copies, dropout,
 * residual adds), residual + LayerNorm, bias + GeLU, or the unfused
 * attention's softmax forward or backward over its scores; all but the
 * first are also bound by the profile's math rates (hw.h). */
typedef enum { ELEM_STREAM, ELEM_NORM, ELEM_GELU, ELEM_SOFTMAX_FWD, ELEM_SOFTMAX_BWD } elem_kind_t;

typedef struct {
    op_kind_t kind;
    const char *name;     /* "qkv", "attn", "ln1", "ag_qkv", ... */
    double m, n, k;       /* GEMM: batch x (m x k) x (k x n) */
    double batch;         /* GEMM batch; ATTN: sequences x local heads */
    double attn_keys;     /* ATTN: keys attended, summed over the queries of one head */
    double attn_seq;      /* ATTN: queries (= keys) per sequence */
    double attn_window;   /* ATTN: keys each query sees at most (attn_seq: causal) */
    double attn_d;        /* ATTN: head size */
    int attn_bwd;         /* ATTN: 1 for the backward kernel */
    int attn_v1;          /* ATTN: FlashAttention-1's work partition (--attention flash1) */
    double attn_group;    /* ATTN: query heads per KV head (GQA; 1 or 0: MHA) */
    double bytes;         /* ELEM: bytes read + written; COLL/P2P: tensor bytes
                             (all-gather output, reduce-scatter input) */
    double elems;         /* ELEM: elements computed (NORM, GELU, SOFTMAX: the scores) */
    double draws;         /* ELEM, ATTN: dropout mask draws (hw dropout_gdraws, flash_*_gdraws) */
    elem_kind_t elem_kind;
    coll_t coll;
    group_t group;
    overlap_t overlap;
    int pair;             /* COLL: index of the GEMM it overlaps with, or -1 */
    int acc_fp32;         /* GEMM: C += A B into fp32 (a weight gradient into its fp32 main
                             gradient): cost_gemm_acc_s on top of the product */
    int gemm_pass;        /* GEMM of a linear layer: 0 its forward, 1 its input gradient (A m x k the output
                             gradient, B k x n the weight), 2 its weight gradient (A m x k and B k x n the two
                             inputs transposed): what hw gemm_pack_ns charges (cost_gemm_pack_s) */
    int fp8;              /* GEMM: FP8 inputs at the FP8 peak (--fp8-format) */
    int unfused_attn;     /* GEMM of the unfused attention: 1 forward, 2 backward (hw unfused_*_rel) */
    int moe_load;         /* its time grows with the tokens the busiest expert rank gets (MoE routing
                             imbalance, model/moe.h: the dispatch, the experts, the combine) */
    int repeat;           /* runs this many times in a row (0 or 1: once); cost_op_s prices them all, and
                             an OVL_ASYNC collective meets its pair's runs one by one (CP's ring) */
    double cast_elems;    /* GEMM: elements of its A input cast to FP8 first (bf16 read, fp8 written,
                             amax taken), its own memory-bound pass; 0 for a weight gradient, whose
                             inputs were cast for the forward and the input gradient */
} op_t;

/* FLOPs of one run of a compute op (0 for memory-bound and communication
 * ops). */
double op_flops(const op_t *op);
/* How many times the op runs in a row (op_t.repeat, at least 1). */
int op_runs(const op_t *op);
/* A collective's name ("all-reduce", ..., "send-recv") and a group's
 * ("tp", "dp", ..., "edp"); "?" outside the enum. */
const char *op_coll_name(coll_t c);
const char *op_group_name(group_t g);

#endif
