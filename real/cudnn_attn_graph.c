/* real/cudnn_attn_graph.c: the operation graphs of cuDNN's fused flash
 * attention (real/cudnn_attn.h). They follow, op for op, what the cuDNN
 * frontend's composite SDPA nodes lower to for cuDNN 9.x before 9.21
 * (NVIDIA/cudnn-frontend, include/cudnn_frontend/node/
 * scaled_dot_product_flash_attention.h, softmax.h, diagonal_band_mask.h):
 * the runtime fusion engines recognise that pattern, not the math, so the
 * order, the data types of the virtual tensors (fp32 scores, bf16 where a
 * matmul reads the probabilities) and the transposed K and V layouts are
 * theirs. tests/real/test_cudnn_attn.c has cuDNN's heuristics check each. */
#include "real/cudnn_attn_int.h"

#include <math.h>
#include <string.h>

#define say cudnn_attn_say
#define fail cudnn_attn_fail

typedef struct {
    const cudnn_attn_t *c;
    plan_t *p;
    int64_t next_uid;
    int failed;
    char *err;
    int errlen;
    bd_t ops[64];
    int nops;
} gb_t;

typedef struct {
    bd_t d;
    int64_t uid;
} ten_t;

static bd_t make(gb_t *g, cudnnBackendDescriptorType_t type)
{
    bd_t d = NULL;
    if (g->failed)
        return NULL;
    if (g->p->nkeep == KEEP_MAX) {
        say(g->err, g->errlen, "cuDNN attention: more than %d descriptors in one graph", KEEP_MAX);
        g->failed = 1;
        return NULL;
    }
    cudnnStatus_t st = g->c->a.create(type, &d);
    if (st != CUDNN_STATUS_SUCCESS) {
        fail(&g->c->a, st, "creating a descriptor", g->err, g->errlen);
        g->failed = 1;
        return NULL;
    }
    return g->p->keep[g->p->nkeep++] = d;
}

static void set(gb_t *g, bd_t d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t n,
                const void *v, const char *what)
{
    if (g->failed)
        return;
    cudnnStatus_t st = g->c->a.set(d, name, type, n, v);
    if (st != CUDNN_STATUS_SUCCESS)
        g->failed = 1, fail(&g->c->a, st, what, g->err, g->errlen);
}

static void fin(gb_t *g, bd_t d, const char *what)
{
    if (g->failed)
        return;
    cudnnStatus_t st = g->c->a.finalize(d);
    if (st != CUDNN_STATUS_SUCCESS)
        g->failed = 1, fail(&g->c->a, st, what, g->err, g->errlen);
}

static void set_desc(gb_t *g, bd_t d, cudnnBackendAttributeName_t name, bd_t v, const char *what)
{
    set(g, d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v, what);
}

/* A 4-d tensor: in memory the call binds (0), virtual (1: an intermediate
 * of the fused kernel, no memory) or a scalar passed by value (2). */
enum { T_MEMORY, T_VIRTUAL, T_BY_VALUE };
static ten_t tensor(gb_t *g, const int64_t dim[4], const int64_t stride[4], cudnnDataType_t dt, int kind)
{
    ten_t t = {make(g, CUDNN_BACKEND_TENSOR_DESCRIPTOR), g->next_uid++};
    int64_t align = 16;
    bool yes = true;
    set(g, t.d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt, "tensor data type");
    set(g, t.d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dim, "tensor dimensions");
    set(g, t.d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, stride, "tensor strides");
    set(g, t.d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &t.uid, "tensor id");
    set(g, t.d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, "tensor alignment");
    if (kind != T_MEMORY)
        set(g, t.d, kind == T_VIRTUAL ? CUDNN_ATTR_TENSOR_IS_VIRTUAL : CUDNN_ATTR_TENSOR_IS_BY_VALUE,
            CUDNN_TYPE_BOOLEAN, 1, &yes, "tensor kind");
    fin(g, t.d, "finalizing a tensor");
    return t;
}

/* A tensor the caller binds, recorded under its role. */
static ten_t bound(gb_t *g, int role, const int64_t dim[4], const int64_t stride[4], cudnnDataType_t dt)
{
    ten_t t = tensor(g, dim, stride, dt, T_MEMORY);
    g->p->uid[role] = t.uid;
    return t;
}

/* A fp32 scalar passed by value (its host value lives in the plan). */
static ten_t scalar(gb_t *g, int role, float value)
{
    static const int64_t one[4] = {1, 1, 1, 1};
    ten_t t = tensor(g, one, one, CUDNN_DATA_FLOAT, T_BY_VALUE);
    g->p->uid[role] = t.uid, g->p->value[role] = value;
    return t;
}

static void add_op(gb_t *g, bd_t op, const char *what)
{
    fin(g, op, what);
    if (!g->failed && g->nops < (int)(sizeof g->ops / sizeof g->ops[0]))
        g->ops[g->nops++] = op;
    else if (!g->failed)
        g->failed = 1, say(g->err, g->errlen, "cuDNN attention: too many operations in one graph");
}

/* y = mode(x[, b[, t]]); axis >= 0 for GEN_INDEX and the window's add. */
static void pw(gb_t *g, cudnnPointwiseMode_t mode, ten_t x, const ten_t *b, const ten_t *t, ten_t y,
               cudnnDataType_t math, int64_t axis, const char *what)
{
    bd_t d = make(g, CUDNN_BACKEND_POINTWISE_DESCRIPTOR), op;
    set(g, d, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, what);
    set(g, d, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &math, what);
    if (axis >= 0)
        set(g, d, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, what);
    fin(g, d, what);
    op = make(g, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    set_desc(g, op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, d, what);
    set_desc(g, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x.d, what);
    if (b)
        set_desc(g, op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b->d, what);
    if (t)
        set_desc(g, op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t->d, what);
    set_desc(g, op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y.d, what);
    add_op(g, op, what);
}

/* Binary and unary pointwise ops with fp32 math into a new tensor. */
static ten_t pw2(gb_t *g, cudnnPointwiseMode_t mode, ten_t x, ten_t b, const int64_t dim[4], const int64_t str[4],
                 const char *what)
{
    ten_t y = tensor(g, dim, str, CUDNN_DATA_FLOAT, 1);
    pw(g, mode, x, &b, NULL, y, CUDNN_DATA_FLOAT, -1, what);
    return y;
}

static void matmul(gb_t *g, ten_t a, ten_t b, ten_t c, const char *what)
{
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    bd_t d = make(g, CUDNN_BACKEND_MATMUL_DESCRIPTOR), op;
    set(g, d, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, what);
    fin(g, d, what);
    op = make(g, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    set_desc(g, op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, a.d, what);
    set_desc(g, op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, b.d, what);
    set_desc(g, op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, c.d, what);
    set_desc(g, op, CUDNN_ATTR_OPERATION_MATMUL_DESC, d, what);
    add_op(g, op, what);
}

static void reduce(gb_t *g, cudnnReduceTensorOp_t how, ten_t x, ten_t y, const char *what)
{
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    bd_t d = make(g, CUDNN_BACKEND_REDUCTION_DESCRIPTOR), op;
    set(g, d, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &how, what);
    set(g, d, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, what);
    fin(g, d, what);
    op = make(g, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    set_desc(g, op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x.d, what);
    set_desc(g, op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y.d, what);
    set_desc(g, op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, d, what);
    add_op(g, op, what);
}

static void reshape(gb_t *g, ten_t x, ten_t y, const char *what)
{
    bd_t op = make(g, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    set_desc(g, op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x.d, what);
    set_desc(g, op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y.d, what);
    add_op(g, op, what);
}

/* The dropout's keep mask: Bernoulli(1 - p) from the seed and offset. */
static void rng(gb_t *g, ten_t y, ten_t seed, ten_t offset, double keep)
{
    cudnnRngDistribution_t dist = CUDNN_RNG_DISTRIBUTION_BERNOULLI;
    bd_t d = make(g, CUDNN_BACKEND_RNG_DESCRIPTOR), op;
    set(g, d, CUDNN_ATTR_RNG_DISTRIBUTION, CUDNN_TYPE_RNG_DISTRIBUTION, 1, &dist, "dropout generator");
    set(g, d, CUDNN_ATTR_RNG_BERNOULLI_DIST_PROBABILITY, CUDNN_TYPE_DOUBLE, 1, &keep, "dropout probability");
    fin(g, d, "dropout generator");
    op = make(g, CUDNN_BACKEND_OPERATION_RNG_DESCRIPTOR);
    set_desc(g, op, CUDNN_ATTR_OPERATION_RNG_YDESC, y.d, "dropout mask");
    set_desc(g, op, CUDNN_ATTR_OPERATION_RNG_DESC, d, "dropout mask");
    set_desc(g, op, CUDNN_ATTR_OPERATION_RNG_SEED, seed.d, "dropout seed");
    set_desc(g, op, CUDNN_ATTR_OPERATION_RNG_OFFSET_DESC, offset.d, "dropout offset");
    add_op(g, op, "dropout mask");
}

/* The shapes of one graph (elements). */
typedef struct {
    int64_t q_dim[4], q_str[4];   /* q, out, dq, dout: (B, NH, T, HS) over (B, T, NH, HS) */
    int64_t kv_dim[4], kv_str[4]; /* k, v, dk, dv: (B, NKV, T, HS) */
    int64_t kt_dim[4], kt_str[4]; /* k and v transposed: (B, NKV, HS, T) */
    int64_t s_dim[4], s_str[4];   /* scores (B, NH, T, T) */
    int64_t st_str[4];            /* scores transposed (the matmuls' P^T and dS^T) */
    int64_t r_dim[4], r_str[4];   /* a value per query row (B, NH, T, 1) */
    int64_t h_dim[4], h_str[4];   /* per query head, packed: (B, NH, T, HS), GQA's dk and dv before the sum */
} shapes_t;

static void shapes(const key_t_ *k, shapes_t *z)
{
    int64_t B = k->B, T = k->T, H = k->NH, G = k->NKV, D = k->HS;
    int64_t q_dim[4] = {B, H, T, D}, q_str[4] = {T * H * D, D, H * D, 1};
    int64_t kv_dim[4] = {B, G, T, D}, kv_str[4] = {T * G * D, D, G * D, 1};
    int64_t kt_dim[4] = {B, G, D, T}, kt_str[4] = {T * G * D, D, 1, G * D};
    int64_t s_dim[4] = {B, H, T, T}, s_str[4] = {H * T * T, T * T, T, 1}, st_str[4] = {H * T * T, T * T, 1, T};
    int64_t r_dim[4] = {B, H, T, 1}, r_str[4] = {H * T, T, 1, 1};
    int64_t h_dim[4] = {B, H, T, D}, h_str[4] = {H * T * D, T * D, D, 1};
    memcpy(z->q_dim, q_dim, sizeof q_dim), memcpy(z->q_str, q_str, sizeof q_str);
    memcpy(z->kv_dim, kv_dim, sizeof kv_dim), memcpy(z->kv_str, kv_str, sizeof kv_str);
    memcpy(z->kt_dim, kt_dim, sizeof kt_dim), memcpy(z->kt_str, kt_str, sizeof kt_str);
    memcpy(z->s_dim, s_dim, sizeof s_dim), memcpy(z->s_str, s_str, sizeof s_str);
    memcpy(z->st_str, st_str, sizeof st_str);
    memcpy(z->r_dim, r_dim, sizeof r_dim), memcpy(z->r_str, r_str, sizeof r_str);
    memcpy(z->h_dim, h_dim, sizeof h_dim), memcpy(z->h_str, h_str, sizeof h_str);
}

/* One bound of the band of keys a query sees (the frontend's diagonal
 * band mask): right (causal): kept where row >= col; left (window w):
 * kept where col + w > row. The rest is -inf. */
static ten_t band(gb_t *g, const shapes_t *z, ten_t x, ten_t neginf, int left)
{
    ten_t row = tensor(g, z->s_dim, z->s_str, CUDNN_DATA_INT32, 1);
    ten_t col = tensor(g, z->s_dim, z->s_str, CUDNN_DATA_INT32, 1);
    ten_t keep = tensor(g, z->s_dim, z->s_str, CUDNN_DATA_BOOLEAN, 1);
    ten_t y = tensor(g, z->s_dim, z->s_str, CUDNN_DATA_FLOAT, 1);
    pw(g, CUDNN_POINTWISE_GEN_INDEX, x, NULL, NULL, row, CUDNN_DATA_FLOAT, 2, "row index");
    pw(g, CUDNN_POINTWISE_GEN_INDEX, x, NULL, NULL, col, CUDNN_DATA_FLOAT, 3, "column index");
    if (left) {
        ten_t w = scalar(g, R_WINDOW, (float)g->p->key.window);
        ten_t colw = tensor(g, z->s_dim, z->s_str, CUDNN_DATA_FLOAT, 1);
        pw(g, CUDNN_POINTWISE_ADD, col, &w, NULL, colw, CUDNN_DATA_FLOAT, 3, "column + window");
        pw(g, CUDNN_POINTWISE_CMP_GT, colw, &row, NULL, keep, CUDNN_DATA_BOOLEAN, -1, "window mask");
    } else {
        pw(g, CUDNN_POINTWISE_CMP_GE, row, &col, NULL, keep, CUDNN_DATA_BOOLEAN, -1, "causal mask");
    }
    pw(g, CUDNN_POINTWISE_BINARY_SELECT, x, &neginf, &keep, y, CUDNN_DATA_FLOAT, -1, "masked scores");
    return y;
}

static ten_t masks(gb_t *g, const shapes_t *z, ten_t x)
{
    ten_t neginf = scalar(g, R_NEGINF, -INFINITY);
    x = band(g, z, x, neginf, 0);
    return g->p->key.window > 0 ? band(g, z, x, neginf, 1) : x;
}

static void fwd_graph(gb_t *g, const shapes_t *z)
{
    const key_t_ *k = &g->p->key;
    ten_t q = bound(g, R_Q, z->q_dim, z->q_str, CUDNN_DATA_BFLOAT16);
    ten_t kt = bound(g, R_K, z->kt_dim, z->kt_str, CUDNN_DATA_BFLOAT16);
    ten_t v = bound(g, R_V, z->kv_dim, z->kv_str, CUDNN_DATA_BFLOAT16);
    ten_t s = tensor(g, z->s_dim, z->s_str, CUDNN_DATA_FLOAT, 1);
    matmul(g, q, kt, s, "Q K^T");
    ten_t scale = scalar(g, R_SCALE, 1.0f / sqrtf((float)k->HS));
    s = masks(g, z, pw2(g, CUDNN_POINTWISE_MUL, s, scale, z->s_dim, z->s_str, "scaled scores"));
    /* softmax with its statistics: max, exp of the difference, sum, stats = max + log sum */
    ten_t mx = tensor(g, z->r_dim, z->r_str, CUDNN_DATA_FLOAT, 1);
    reduce(g, CUDNN_REDUCE_TENSOR_MAX, s, mx, "row max");
    ten_t e = tensor(g, z->s_dim, z->s_str, CUDNN_DATA_FLOAT, 1);
    pw(g, CUDNN_POINTWISE_EXP, pw2(g, CUDNN_POINTWISE_SUB, s, mx, z->s_dim, z->s_str, "scores - max"), NULL, NULL,
       e, CUDNN_DATA_FLOAT, -1, "exp");
    ten_t sum = tensor(g, z->r_dim, z->r_str, CUDNN_DATA_FLOAT, 1), lg = tensor(g, z->r_dim, z->r_str,
                                                                                CUDNN_DATA_FLOAT, 1);
    reduce(g, CUDNN_REDUCE_TENSOR_ADD, e, sum, "row sum");
    pw(g, CUDNN_POINTWISE_LOG, sum, NULL, NULL, lg, CUDNN_DATA_FLOAT, -1, "log sum");
    ten_t stats = bound(g, R_STATS, z->r_dim, z->r_str, CUDNN_DATA_FLOAT);
    pw(g, CUDNN_POINTWISE_ADD, mx, &lg, NULL, stats, CUDNN_DATA_FLOAT, -1, "statistics");
    int drop = k->p > 0;
    ten_t pr = tensor(g, z->s_dim, z->s_str, drop ? CUDNN_DATA_FLOAT : CUDNN_DATA_BFLOAT16, 1);
    pw(g, CUDNN_POINTWISE_DIV, e, &sum, NULL, pr, CUDNN_DATA_FLOAT, -1, "probabilities");
    if (drop) {
        static const int64_t one[4] = {1, 1, 1, 1};
        ten_t seed = bound(g, R_SEED, one, one, CUDNN_DATA_INT64), off = bound(g, R_OFFSET, one, one, CUDNN_DATA_INT64);
        ten_t m = tensor(g, z->s_dim, z->s_str, CUDNN_DATA_FLOAT, 1);
        rng(g, m, seed, off, 1.0 - k->p);
        ten_t dscale = scalar(g, R_DROPSCALE, 1.0f / (1.0f - k->p));
        ten_t kept = pw2(g, CUDNN_POINTWISE_MUL, pr, m, z->s_dim, z->s_str, "dropped probabilities");
        pr = tensor(g, z->s_dim, z->s_str, CUDNN_DATA_BFLOAT16, 1);
        pw(g, CUDNN_POINTWISE_MUL, kept, &dscale, NULL, pr, CUDNN_DATA_FLOAT, -1, "dropout scale");
    }
    matmul(g, pr, v, bound(g, R_O, z->q_dim, z->q_str, CUDNN_DATA_BFLOAT16), "P V");
}

/* dK or dV (role) = x^T rhs, x shaped as the scores (P or dS), read
 * transposed in bf16; under GQA made per query head, then summed over
 * each group of heads. */
static void kv_grad(gb_t *g, const shapes_t *z, ten_t x, ten_t rhs, int role, const char *what)
{
    ten_t xt = tensor(g, z->s_dim, z->st_str, CUDNN_DATA_BFLOAT16, 1);
    reshape(g, x, xt, what);
    ten_t d = bound(g, role, z->kv_dim, z->kv_str, CUDNN_DATA_BFLOAT16);
    if (g->p->key.NKV == g->p->key.NH) {
        matmul(g, xt, rhs, d, what);
        return;
    }
    ten_t full = tensor(g, z->h_dim, z->h_str, CUDNN_DATA_BFLOAT16, 1);
    matmul(g, xt, rhs, full, what);
    reduce(g, CUDNN_REDUCE_TENSOR_ADD, full, d, "the sum over each group of heads");
}

/* The backward: D = rowsum(dO * O) (scaled by 1 - p under dropout), the
 * probabilities rebuilt from Q K^T and the statistics, dV = P^T dO, dS =
 * P * (dO V^T - D), dK = dS^T Q, dQ = dS K (into fp32, then bf16). Under
 * GQA dK and dV are made per query head and summed over each group. */
static void bwd_graph(gb_t *g, const shapes_t *z)
{
    const key_t_ *k = &g->p->key;
    int drop = k->p > 0;
    static const int64_t one[4] = {1, 1, 1, 1};
    ten_t q = bound(g, R_Q, z->q_dim, z->q_str, CUDNN_DATA_BFLOAT16);
    ten_t kt = bound(g, R_K, z->kt_dim, z->kt_str, CUDNN_DATA_BFLOAT16);
    ten_t vt = bound(g, R_V, z->kt_dim, z->kt_str, CUDNN_DATA_BFLOAT16);
    ten_t o = bound(g, R_O, z->q_dim, z->q_str, CUDNN_DATA_BFLOAT16);
    ten_t dout = bound(g, R_DO, z->q_dim, z->q_str, CUDNN_DATA_BFLOAT16);
    ten_t stats = bound(g, R_STATS, z->r_dim, z->r_str, CUDNN_DATA_FLOAT);
    ten_t m = {0}, dscale = {0};
    if (drop) {
        ten_t seed = bound(g, R_SEED, one, one, CUDNN_DATA_INT64), off = bound(g, R_OFFSET, one, one, CUDNN_DATA_INT64);
        m = tensor(g, z->s_dim, z->s_str, CUDNN_DATA_FLOAT, 1);
        rng(g, m, seed, off, 1.0 - k->p);
    }
    /* D: the frontend's softmax_sum, kept in the workspace */
    int64_t do_str[4] = {z->q_dim[1] * z->q_dim[2] * z->q_dim[3], z->q_dim[2] * z->q_dim[3],
                         z->q_dim[1] * z->q_dim[3], 1};
    ten_t dd = pw2(g, CUDNN_POINTWISE_MUL, dout, o, z->q_dim, do_str, "dO * O");
    ten_t rs = tensor(g, z->r_dim, z->r_str, CUDNN_DATA_FLOAT, 1);
    reduce(g, CUDNN_REDUCE_TENSOR_ADD, dd, rs, "rowsum(dO * O)");
    ten_t inv = drop ? scalar(g, R_DROPINV, 1.0f - k->p) : scalar(g, R_ONE, 1.0f);
    ten_t dsum = bound(g, R_SUM, z->r_dim, z->r_str, CUDNN_DATA_FLOAT);
    pw(g, CUDNN_POINTWISE_MUL, rs, &inv, NULL, dsum, CUDNN_DATA_FLOAT, -1, "softmax sum");
    /* P rebuilt */
    ten_t s = tensor(g, z->s_dim, z->s_str, CUDNN_DATA_FLOAT, 1);
    matmul(g, q, kt, s, "Q K^T");
    ten_t scale = scalar(g, R_SCALE, 1.0f / sqrtf((float)k->HS));
    s = pw2(g, CUDNN_POINTWISE_MUL, s, scale, z->s_dim, z->s_str, "scaled scores");
    s = masks(g, z, pw2(g, CUDNN_POINTWISE_SUB, s, stats, z->s_dim, z->s_str, "scores - statistics"));
    ten_t e = tensor(g, z->s_dim, z->s_str, CUDNN_DATA_FLOAT, 1);
    pw(g, CUDNN_POINTWISE_EXP, s, NULL, NULL, e, CUDNN_DATA_FLOAT, -1, "probabilities");
    ten_t p = e;
    if (drop) {
        dscale = scalar(g, R_DROPSCALE, 1.0f / (1.0f - k->p));
        p = pw2(g, CUDNN_POINTWISE_MUL, pw2(g, CUDNN_POINTWISE_MUL, e, m, z->s_dim, z->s_str, "dropped P"), dscale,
                z->s_dim, z->s_str, "dropout scale");
    }
    kv_grad(g, z, p, dout, R_DV, "dV = P^T dO");
    /* dS */
    ten_t dp = tensor(g, z->s_dim, z->s_str, CUDNN_DATA_FLOAT, 1);
    matmul(g, dout, vt, dp, "dO V^T");
    if (drop)
        dp = pw2(g, CUDNN_POINTWISE_MUL, dp, m, z->s_dim, z->s_str, "dropped dP");
    ten_t ds = pw2(g, CUDNN_POINTWISE_MUL, pw2(g, CUDNN_POINTWISE_SUB, dp, dsum, z->s_dim, z->s_str, "dP - D"), e,
                   z->s_dim, z->s_str, "dS");
    if (drop)
        ds = pw2(g, CUDNN_POINTWISE_MUL, ds, dscale, z->s_dim, z->s_str, "dS dropout scale");
    ds = pw2(g, CUDNN_POINTWISE_MUL, ds, scale, z->s_dim, z->s_str, "dS scale");
    kv_grad(g, z, ds, q, R_DK, "dK = dS^T Q");
    /* dQ = dS K, accumulated in fp32 */
    ten_t kr = tensor(g, z->kv_dim, z->kv_str, CUDNN_DATA_FLOAT, 1);
    reshape(g, kt, kr, "K");
    ten_t acc = bound(g, R_DQACC, z->h_dim, z->h_str, CUDNN_DATA_FLOAT);
    matmul(g, ds, kr, acc, "dS K");
    pw(g, CUDNN_POINTWISE_IDENTITY, acc, NULL, NULL, bound(g, R_DQ, z->q_dim, z->q_str, CUDNN_DATA_BFLOAT16),
       CUDNN_DATA_FLOAT, -1, "dQ");
}

cudnnBackendDescriptor_t cudnn_attn_graph(const cudnn_attn_t *c, plan_t *p, char *err, int errlen)
{
    gb_t g = {.c = c, .p = p, .next_uid = 1, .err = err, .errlen = errlen};
    shapes_t z;
    shapes(&p->key, &z);
    if (p->key.bwd)
        bwd_graph(&g, &z);
    else
        fwd_graph(&g, &z);
    bd_t graph = make(&g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    set(&g, graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, g.nops, g.ops, "graph operations");
    if (c->handle)
        set(&g, graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &c->handle, "graph handle");
    fin(&g, graph, "finalizing the operation graph");
    return g.failed ? NULL : graph;
}
