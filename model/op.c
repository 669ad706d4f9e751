/* op: what an op is, apart from its cost (op.h): its FLOPs, its runs,
 * and the names of its collective and group. */
#include "model/op.h"

double op_flops(const op_t *op)
{
    if (op->kind == OP_GEMM)
        return 2 * op->m * op->n * op->k * op->batch;
    if (op->kind == OP_ATTN) /* QK^T and PV: 2 matmuls of 2 d FLOPs per key;
                                backward: 5 matmuls (FlashAttention-2) */
        return 4 * op->batch * op->attn_d * op->attn_keys * (op->attn_bwd ? 2.5 : 1);
    return 0;
}

int op_runs(const op_t *op) { return op->repeat > 1 ? op->repeat : 1; }

/* Each table in its enum's order (op.h). */
static const char *const coll_names[] = {"all-reduce", "all-gather", "reduce-scatter", "broadcast", "all-to-all",
                                         "send-recv"};
static const char *const group_names[] = {"tp", "dp", "pp", "emb", "world", "cp", "etp", "ep", "edp", "etp_ep"};

const char *op_coll_name(coll_t c)
{
    return (int)c >= 0 && (int)c < (int)(sizeof coll_names / sizeof coll_names[0]) ? coll_names[c] : "?";
}

const char *op_group_name(group_t g)
{
    return (int)g >= 0 && (int)g < (int)(sizeof group_names / sizeof group_names[0]) ? group_names[g] : "?";
}
