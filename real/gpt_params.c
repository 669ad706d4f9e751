/* real/gpt_params.c: where each of the rank's tensors sits (gpt.h): the
 * TP cut of every tensor, its place in the rank's flat parameter space,
 * the DP pieces, and the seed's initial values (in threads: each value
 * depends on the seed, the tensor and the element alone). */
#define _GNU_SOURCE /* pthread_attr_setaffinity_np, CPU_SET */
#include "real/gpt.h"

#include "model/moe.h"
#include "model/split.h"
#include "model/workload.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ALIGN_ELEMS 64 /* tensor and shard offsets: 128 B in bf16, 256 B in fp32 */

static long round_up(long x, long to) { return (x + to - 1) / to * to; }

typedef struct {
    gpt_t *m;
    int cap;
} layout_t;

static gpt_tensor_t *add(layout_t *L, const char *name, int id, int rows, int cols, int grows, int gcols)
{
    gpt_t *m = L->m;
    if (m->ntensors == L->cap) {
        L->cap = L->cap ? 2 * L->cap : 256;
        gpt_tensor_t *p = realloc(m->tensors, (size_t)L->cap * sizeof *p);
        if (!p)
            return NULL;
        m->tensors = p;
    }
    gpt_tensor_t *t = &m->tensors[m->ntensors++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->id = id, t->rows = rows, t->cols = cols, t->grows = grows, t->gcols = gcols;
    t->n = (long)rows * cols;
    t->off = round_up(m->nparams, ALIGN_ELEMS);
    m->nparams = t->off + t->n;
    t->rseg[0] = (gpt_seg_t){0, 0, rows}, t->cseg[0] = (gpt_seg_t){0, 0, cols};
    t->nrseg = t->ncseg = 1;
    t->init_std = JOB_INIT_METHOD_STD;
    return t;
}

/* A replicated vector of n (LayerNorm, row-parallel bias). */
static gpt_tensor_t *vec(layout_t *L, const char *name, int id, int n, int one, int sp_partial)
{
    gpt_tensor_t *t = add(L, name, id, n, 1, n, 1);
    if (t)
        t->init_std = 0, t->init_one = one, t->sp_partial = sp_partial;
    return t;
}

/* Rows of an FC1's output (an MLP of width F, Ft per TP rank: the layer's,
 * or the shared expert's) held by this TP rank, from local row `at`, whose
 * output starts at global row `g0`: its slice of the F rows, or with SwiGLU
 * its slices of the gate rows and of the up rows. Returns the next segment. */
static int mlp_fc1_rows(const gpt_t *m, gpt_tensor_t *t, int seg, int at, int g0, int F, int Ft, int part)
{
    t->rseg[seg++] = (gpt_seg_t){at, g0 + part * Ft, Ft};
    if (m->swiglu)
        t->rseg[seg++] = (gpt_seg_t){at + Ft, g0 + F + part * Ft, Ft};
    return seg;
}

static int fc1_rows(const gpt_t *m, gpt_tensor_t *t, int seg, int at, int g0)
{
    return mlp_fc1_rows(m, t, seg, at, g0, m->F, m->Ft, m->tp_i);
}

/* Rows of the fused QKV(+FC1) output held by this TP rank: its query
 * heads, its key and value groups, its slice of FC1. */
static void qkv_rows(const gpt_t *m, gpt_tensor_t *t, int with_fc1)
{
    int q = m->nh * m->HS, kv = m->g * m->HS, NQ = m->NH * m->HS, NKV = m->G * m->HS;
    t->rseg[0] = (gpt_seg_t){0, m->tp_i * q, q};
    t->rseg[1] = (gpt_seg_t){q, NQ + m->tp_i * kv, kv};
    t->rseg[2] = (gpt_seg_t){q + kv, NQ + NKV + m->tp_i * kv, kv};
    t->nrseg = 3;
    if (with_fc1)
        t->nrseg = fc1_rows(m, t, 3, q + 2 * kv, NQ + 2 * NKV);
    t->tp_split = m->t > 1;
}

/* Columns of the fused proj(+FC2) input held by this TP rank. */
static void proj_cols(const gpt_t *m, gpt_tensor_t *t, int with_fc2)
{
    int q = m->nh * m->HS;
    t->cseg[0] = (gpt_seg_t){0, m->tp_i * q, q};
    t->ncseg = 1;
    if (with_fc2)
        t->cseg[1] = (gpt_seg_t){q, m->NH * m->HS + m->tp_i * m->Ft, m->Ft}, t->ncseg = 2;
    t->tp_split = m->t > 1;
}

/* An MoE layer's shared expert: a dense MLP of width Fs cut by TP as the
 * layer's own (column-parallel FC1, row-parallel FC2), and its gate (1, C,
 * replicated). Its ids sit past every layer's (2^19 + the layer's FC ids;
 * normal() keeps an id's low 20 bits). */
static int shared_expert(layout_t *L, int *idx, int gl, float resid_std)
{
    gpt_t *m = L->m;
    int base = (1 << 19) + gl * 16, C = m->C, Fg = m->swiglu ? 2 * m->Fs : m->Fs, split = m->t > 1;
    char nm[48];
    gpt_tensor_t *t;
#define SH(k, name, expr)                                                                              \
    do {                                                                                               \
        snprintf(nm, sizeof nm, "layer%d.shared.%s", gl, name);                                        \
        if (!(t = (expr)))                                                                             \
            return -1;                                                                                 \
        idx[k] = m->ntensors - 1;                                                                      \
    } while (0)
    SH(T_SH_FC1_W, "fc1_w", add(L, nm, base + T_FC1_W, m->Fws, C, Fg, C));
    t->nrseg = mlp_fc1_rows(m, t, 0, 0, 0, m->Fs, m->Fst, m->tp_i), t->tp_split = split;
    if (m->bias) {
        SH(T_SH_FC1_B, "fc1_b", add(L, nm, base + T_FC1_B, m->Fws, 1, Fg, 1));
        t->nrseg = mlp_fc1_rows(m, t, 0, 0, 0, m->Fs, m->Fst, m->tp_i), t->tp_split = split, t->init_std = 0;
    }
    SH(T_SH_FC2_W, "fc2_w", add(L, nm, base + T_FC2_W, C, m->Fst, C, m->Fs));
    t->cseg[0] = (gpt_seg_t){0, m->tp_i * m->Fst, m->Fst}, t->tp_split = split, t->init_std = resid_std;
    if (m->bias)
        SH(T_SH_FC2_B, "fc2_b", vec(L, nm, base + T_FC2_B, C, 0, 0));
    if (m->job->moe_shared_gate) {
        SH(T_SH_GATE_W, "gate_w", add(L, nm, base + T_ROUTER_W, 1, C, 1, C));
        t->sp_partial = m->sp;
    }
#undef SH
    return 0;
}

static int layer(layout_t *L, int chunk, int l, int gl)
{
    gpt_t *m = L->m;
    int *idx = m->layer_tensor + ((long)m->chunk_layer0[chunk] + l) * T_PER_LAYER;
    int base = 16 + gl * 16, par = m->parallel, C = m->C;
    int Fg = m->swiglu ? 2 * m->F : m->F; /* FC1's whole output */
    int NQKV = (m->NH + 2 * m->G) * m->HS + (par ? Fg : 0);
    int nqkv = m->qkvn + (par ? m->Fw : 0), nproj = m->nh * m->HS + (par ? m->Ft : 0);
    float resid_std = JOB_INIT_METHOD_STD / sqrtf(2.0f * m->job->num_layers);
    char nm[40];
    gpt_tensor_t *t;
#define NAME(s) (snprintf(nm, sizeof nm, "layer%d.%s", gl, s), nm)
#define KEEP(k, expr)                                                                                  \
    do {                                                                                               \
        if (!(t = (expr)))                                                                             \
            return -1;                                                                                 \
        idx[k] = m->ntensors - 1;                                                                      \
    } while (0)
    KEEP(T_LN1_W, vec(L, NAME("ln1_w"), base + T_LN1_W, C, 1, m->sp));
    if (!m->rms)
        KEEP(T_LN1_B, vec(L, NAME("ln1_b"), base + T_LN1_B, C, 0, m->sp));
    KEEP(T_QKV_W, add(L, NAME(par ? "qkv_fc1_w" : "qkv_w"), base + T_QKV_W, nqkv, C, NQKV, C));
    qkv_rows(m, t, par);
    if (m->bias || m->job->add_qkv_bias) { /* --add-qkv-bias: the QKV projection's alone (Qwen2's) */
        KEEP(T_QKV_B, add(L, NAME(par ? "qkv_fc1_b" : "qkv_b"), base + T_QKV_B, nqkv, 1, NQKV, 1));
        qkv_rows(m, t, par), t->init_std = 0;
    }
    KEEP(T_PROJ_W, add(L, NAME(par ? "proj_fc2_w" : "proj_w"), base + T_PROJ_W, C, nproj, C,
                       m->NH * m->HS + (par ? m->F : 0)));
    proj_cols(m, t, par), t->init_std = resid_std;
    if (m->bias)
        KEEP(T_PROJ_B, vec(L, NAME(par ? "proj_fc2_b" : "proj_b"), base + T_PROJ_B, C, 0, 0));
    if (par)
        return 0;
    KEEP(T_LN2_W, vec(L, NAME("ln2_w"), base + T_LN2_W, C, 1, m->sp));
    if (!m->rms)
        KEEP(T_LN2_B, vec(L, NAME("ln2_b"), base + T_LN2_B, C, 0, m->sp));
    if (moe_layers_in(m->job, gl, 1)) { /* the router, every rank's; the experts in their own pieces (experts()) */
        KEEP(T_ROUTER_W, add(L, NAME("router_w"), base + T_ROUTER_W, m->E, C, m->E, C));
        t->sp_partial = m->sp;
        return m->Fs ? shared_expert(L, idx, gl, resid_std) : 0;
    }
    KEEP(T_FC1_W, add(L, NAME("fc1_w"), base + T_FC1_W, m->Fw, C, Fg, C));
    t->nrseg = fc1_rows(m, t, 0, 0, 0), t->tp_split = m->t > 1;
    if (m->bias) {
        KEEP(T_FC1_B, add(L, NAME("fc1_b"), base + T_FC1_B, m->Fw, 1, Fg, 1));
        t->nrseg = fc1_rows(m, t, 0, 0, 0), t->tp_split = m->t > 1, t->init_std = 0;
    }
    KEEP(T_FC2_W, add(L, NAME("fc2_w"), base + T_FC2_W, C, m->Ft, C, m->F));
    t->cseg[0] = (gpt_seg_t){0, m->tp_i * m->Ft, m->Ft}, t->tp_split = m->t > 1, t->init_std = resid_std;
    if (m->bias)
        KEEP(T_FC2_B, vec(L, NAME("fc2_b"), base + T_FC2_B, C, 0, 0));
#undef NAME
#undef KEEP
    return 0;
}

int gpt_moe_expert_tensors(const gpt_t *m) { return m->bias ? 4 : 2; }

/* The local experts of MoE layer l of chunk c (model layer gl): expert j
 * is the model's expert ep_i El + j, cut from tensors of all E experts
 * stacked by rows, so the initial values are the same whatever EP and
 * ETP. Under ETP each rank holds its slice of the expert's FFN width, as
 * a TP rank holds a dense MLP's: FC1's rows (with SwiGLU its slices of
 * the gate rows and of the up rows) and their bias, FC2's columns; FC2's
 * bias whole on every ETP rank (added once: gpt_moe.c). */
static int experts(layout_t *L, int chunk, int l, int gl)
{
    gpt_t *m = L->m;
    int *idx = m->layer_tensor + ((long)m->chunk_layer0[chunk] + l) * T_PER_LAYER;
    int base = 16 + gl * 16, C = m->C, E = m->E, FeG = m->Fe * m->etp, FwG = m->Fwe * m->etp, cut = m->etp > 1;
    float resid_std = JOB_INIT_METHOD_STD / sqrtf(2.0f * m->job->num_layers);
    char nm[48];
    for (int j = 0; j < m->El; j++) {
        int ge = m->ep_i * m->El + j;
        struct {
            const char *name;
            int k, rows, cols, grows, gcols;
            float std;
        } sp[4] = {{"fc1_w", T_FC1_W, m->Fwe, C, E * FwG, C, JOB_INIT_METHOD_STD},
                   {"fc1_b", T_FC1_B, m->Fwe, 1, E * FwG, 1, 0},
                   {"fc2_w", T_FC2_W, C, m->Fe, E * C, FeG, resid_std},
                   {"fc2_b", T_FC2_B, C, 1, E * C, 1, 0}};
        for (int i = 0; i < 4; i++) {
            if (!m->bias && (sp[i].k == T_FC1_B || sp[i].k == T_FC2_B))
                continue;
            snprintf(nm, sizeof nm, "layer%d.expert%d.%s", gl, ge, sp[i].name);
            gpt_tensor_t *t = add(L, nm, base + sp[i].k, sp[i].rows, sp[i].cols, sp[i].grows, sp[i].gcols);
            if (!t)
                return -1;
            if (sp[i].k == T_FC1_W || sp[i].k == T_FC1_B)
                t->nrseg = mlp_fc1_rows(m, t, 0, 0, ge * FwG, FeG, m->Fe, m->etp_i), t->etp_split = cut;
            else
                t->rseg[0] = (gpt_seg_t){0, ge * C, C};
            if (sp[i].k == T_FC2_W)
                t->cseg[0] = (gpt_seg_t){0, m->etp_i * m->Fe, m->Fe}, t->etp_split = cut;
            t->init_std = sp[i].std, t->expert = 1;
            if (j == 0)
                idx[sp[i].k] = m->ntensors - 1;
        }
    }
    return 0;
}

/* Cuts [start, end of the flat space) into k equal pieces of group grp
 * (GRP_DP, or GRP_EDP for the experts'), padding the end so every piece
 * splits evenly (and aligned) over the group. */
static int pieces(gpt_t *m, long start, int k, int grp)
{
    int size = grp == GRP_EDP ? m->edp : m->dp, at = grp == GRP_EDP ? m->edp_i : m->dp_i;
    long len = round_up(m->nparams - start, (long)k * size * ALIGN_ELEMS);
    if (len == 0)
        len = (long)k * size * ALIGN_ELEMS;
    if (m->npieces + k > m->cap_pieces) {
        int cap = 2 * (m->npieces + k);
        gpt_piece_t *p = realloc(m->pieces, (size_t)cap * sizeof *p);
        if (!p)
            return -1;
        m->pieces = p, m->cap_pieces = cap;
    }
    for (int i = 0; i < k; i++)
        m->pieces[m->npieces++] = (gpt_piece_t){start + len / k * i, len / k, grp, size, at};
    m->nparams = start + len;
    return 0;
}

/* The word embedding (or the untied output layer): this TP rank's rows of
 * the vocabulary, whole rows of C. */
static int vocab_table(layout_t *L, const char *name, int id)
{
    gpt_t *m = L->m;
    gpt_tensor_t *t = add(L, name, id, m->Vl, m->C, m->V, m->C);
    if (!t)
        return -1;
    t->rseg[0] = (gpt_seg_t){0, m->v0, m->Vl}, t->tp_split = m->t > 1;
    return 0;
}

int gpt_has_embedding(const gpt_t *m, int chunk) { return m->stage == 0 && chunk == 0; }
int gpt_has_head(const gpt_t *m, int chunk) { return m->stage == m->pp - 1 && chunk == m->vpp - 1; }
int gpt_layer_index(const gpt_t *m, int chunk, int l) { return split_layer_offset(m->job, m->stage, chunk) + l; }

static int layout(gpt_t *m)
{
    layout_t L = {m, 0};
    /* The tied embedding sits on its own DP piece when it lives on two
     * stages (first and last); untied, the first has wte, the last wout. */
    int separate = m->tied && m->pp > 1 && (m->stage == 0 || m->stage == m->pp - 1);
    int k = m->vpp > 1 ? 1 : workload_dp_pieces(m->job, workload_stage_params_local(m->job, 0));
    m->t_wte = m->t_wpe = m->t_lnf_w = m->t_lnf_b = m->t_wout = -1;
    int nl = m->chunk_layer0[m->vpp]; /* this rank's layers */
    m->layer_tensor = malloc(sizeof(int) * (size_t)(nl ? nl : 1) * T_PER_LAYER);
    m->chunk_piece0 = malloc(sizeof(int) * (size_t)(m->vpp + 1));
    if (!m->layer_tensor || !m->chunk_piece0)
        return -1;
    for (long i = 0; i < (long)nl * T_PER_LAYER; i++)
        m->layer_tensor[i] = -1;
    for (int c = 0; c < m->vpp; c++) {
        long start = m->nparams = round_up(m->nparams, ALIGN_ELEMS);
        m->chunk_piece0[c] = m->npieces;
        if ((gpt_has_embedding(m, c) || (m->tied && gpt_has_head(m, c))) && !separate && m->t_wte < 0) {
            if (vocab_table(&L, "wte", 0))
                return -1;
            m->t_wte = m->ntensors - 1;
        }
        if (gpt_has_embedding(m, c) && m->pos == POS_LEARNED) { /* every rank sees every row's gradient */
            if (!add(&L, "wpe", 1, m->Tseq, m->C, m->job->seq_length, m->C))
                return -1;
            m->t_wpe = m->ntensors - 1;
        }
        for (int l = 0; l < gpt_chunk_layers(m, c); l++)
            if (layer(&L, c, l, gpt_layer_index(m, c, l)))
                return -1;
        if (gpt_has_head(m, c)) {
            if (!vec(&L, "lnf_w", 2, m->C, 1, m->sp))
                return -1;
            m->t_lnf_w = m->ntensors - 1;
            if (!m->rms) {
                if (!vec(&L, "lnf_b", 3, m->C, 0, m->sp))
                    return -1;
                m->t_lnf_b = m->ntensors - 1;
            }
            if (!m->tied) { /* the output layer's own weight */
                if (vocab_table(&L, "wout", 4))
                    return -1;
                m->t_wout = m->ntensors - 1;
            }
        }
        if (pieces(m, start, k, GRP_DP))
            return -1;
        if (moe_chunk_layers(m->job, m->stage, c) > 0) { /* the chunk's experts: one piece over EDP */
            start = m->nparams = round_up(m->nparams, ALIGN_ELEMS);
            for (int l = 0; l < gpt_chunk_layers(m, c); l++)
                if (moe_layers_in(m->job, gpt_layer_index(m, c, l), 1) && experts(&L, c, l, gpt_layer_index(m, c, l)))
                    return -1;
            if (pieces(m, start, 1, GRP_EDP))
                return -1;
        }
    }
    m->chunk_piece0[m->vpp] = m->npieces;
    m->emb_piece = -1;
    if (separate) {
        long start = m->nparams = round_up(m->nparams, ALIGN_ELEMS);
        if (vocab_table(&L, "wte", 0))
            return -1;
        m->t_wte = m->ntensors - 1;
        m->emb_piece = m->npieces;
        if (pieces(m, start, 1, GRP_DP))
            return -1;
    }
    return 0;
}

/* The mixture-of-experts switches run does not run yet (gpt_moe.c), or
 * NULL. */
static const char *moe_switch(const job_t *j)
{
    return j->moe_lb_type == MOE_LB_SINKHORN
               ? "--moe-router-load-balancing-type sinkhorn is not run yet (allowed: aux_loss, seq_aux_loss, none)"
           : j->parallel_block ? "--parallel-block with --num-experts is not run: the MoE layer replaces the standard "
                                 "block's MLP (allowed: --parallel-block false)"
                               : NULL;
}

int gpt_check_switches(const job_t *j, int gpu, char *err, int errlen)
{
    const char *no = !j->grads_fp32 ? "--accumulate-allreduce-grads-in-fp32 false is not run: megasim run keeps and "
                                      "reduces the gradients in fp32 (allowed: true, the default; Megatron-LM requires "
                                      "it with bf16)"
                     : j->add_qkv_bias && j->disable_bias_linear && j->parallel_block
                         ? "--add-qkv-bias with --parallel-block is not run: the parallel block fuses the QKV and FC1 "
                           "projections, whose bias is one tensor (allowed: one of them, or the biases everywhere)"
                     : gpu && !j->bf16 ? "--bf16 false with --device gpu: the GPU path trains in bf16 with fp32 master "
                                         "weights (allowed: --bf16 true; --device cpu trains in fp32)"
                                       : NULL;
    if (!no && j->attention_backend == ATTN_BACKEND_CUDNN)
        no = !gpu ? "--attention-backend cudnn needs --device gpu: the CPU path runs the reference attention "
                    "(allowed: --attention-backend megasim)"
             : j->attention != ATTN_FLASH ? "--attention-backend cudnn runs the flash attention (allowed: --attention "
                                            "flash, or --attention-backend megasim)"
             : j->cuda_graph ? "--attention-backend cudnn with --enable-cuda-graph is not run yet: the dropout seeds "
                               "are copied from the host at each call (allowed: either alone)"
                             : NULL;
    if (!no && j->num_experts > 0)
        no = moe_switch(j);
    if (no)
        snprintf(err, errlen, "%s", no);
    return no ? -1 : 0;
}

static int check_plan(const job_t *j, char *err, int errlen)
{
    if (j->num_query_groups % j->tp) {
        snprintf(err, errlen, "--num-query-groups %d is not divisible by --tensor-model-parallel-size %d: the "
                 "real backend splits key/value groups by TP (allowed: groups a multiple of TP)",
                 j->num_query_groups, j->tp);
        return -1;
    }
    if (j->ffn_hidden_size % j->tp) {
        snprintf(err, errlen, "--ffn-hidden-size %d is not divisible by --tensor-model-parallel-size %d",
                 j->ffn_hidden_size, j->tp);
        return -1;
    }
    long N = (long)j->micro_batch_size * j->seq_length / j->cp; /* a rank's tokens */
    if (j->sequence_parallel && N % j->tp) {
        snprintf(err, errlen, "micro-batch tokens %ld are not divisible by TP %d: sequence parallelism "
                 "splits them evenly", N, j->tp);
        return -1;
    }
    if (j->attention_dropout >= 1 || j->hidden_dropout >= 1) {
        snprintf(err, errlen, "--attention-dropout %g, --hidden-dropout %g: a dropout probability must be below 1 "
                 "(allowed: 0 <= p < 1; 1 drops everything)", j->attention_dropout, j->hidden_dropout);
        return -1;
    }
    if (j->zero_stage >= 3) {
        snprintf(err, errlen, "--zero-stage 3 is not run by the real backend (allowed: 0, 1, 2): its FSDP "
                 "gathers need weights in per-bucket buffers, this GPT keeps them in one; predict and "
                 "simulate price it");
        return -1;
    }
    if (j->position_embedding == POS_ROPE && j->head_dim % 2) {
        snprintf(err, errlen, "--position-embedding-type rope needs an even head size (hidden / heads), got %d: "
                 "rotary embedding turns pairs of elements", j->head_dim);
        return -1;
    }
    return 0;
}

int gpt_init(gpt_t *m, const job_t *j, rt_t *rt, comm_t *comm, char *err, int errlen)
{
    memset(m, 0, sizeof *m);
    if (check_plan(j, err, errlen))
        return -1;
    m->job = j, m->rt = rt, m->comm = comm;
    m->t = j->tp, m->tp_i = comm->tp_i, m->stage = comm->stage, m->pp = j->pp, m->vpp = j->vpp;
    m->dp = j->dp_cp, m->dp_i = comm->dp_i; /* the weights' replicas: DP x CP */
    m->cp = j->cp, m->cp_i = comm->cp_i;
    if (!(m->chunk_layer0 = malloc(sizeof(int) * (size_t)(m->vpp + 1)))) {
        snprintf(err, errlen, "out of host memory laying out the model");
        return -1;
    }
    m->chunk_layer0[0] = 0;
    for (int c = 0; c < m->vpp; c++)
        m->chunk_layer0[c + 1] = m->chunk_layer0[c] + split_chunk_layers(j, m->stage, c);
    m->B = j->micro_batch_size, m->Tseq = j->seq_length, m->T = m->Tseq / m->cp, m->C = j->hidden_size;
    m->F = j->ffn_hidden_size, m->Ft = m->F / m->t, m->V = j->padded_vocab_size;
    m->Vl = m->V / m->t, m->v0 = m->tp_i * m->Vl; /* the job checks V % TP == 0 */
    m->NH = j->num_attention_heads, m->nh = m->NH / m->t, m->G = j->num_query_groups, m->g = m->G / m->t;
    m->HS = j->head_dim, m->qkvn = (m->nh + 2 * m->g) * m->HS;
    m->N = m->B * m->T;
    m->sp = j->sequence_parallel && m->t > 1;
    m->Nl = m->sp ? m->N / m->t : m->N;
    m->window = j->window >= m->Tseq ? 0 : j->window;
    m->attn = j->attention, m->fused = j->fused_elementwise;
    m->overlap = j->tp_comm_overlap && m->t > 1, m->parallel = j->parallel_block;
    m->recompute = j->recompute == RECOMPUTE_FULL;
    m->recompute_layers = !m->recompute ? 0
                          : j->recompute_method == RECOMPUTE_BLOCK ? j->recompute_num_layers
                                                                   : INT_MAX;
    m->recompute_group = m->recompute && j->recompute_method == RECOMPUTE_UNIFORM ? j->recompute_num_layers : 1;
    m->recompute_core = j->recompute == RECOMPUTE_SELECTIVE && !attn_is_flash(j->attention);
    m->bias = !j->disable_bias_linear, m->tied = !j->untie_embeddings, m->rms = j->normalization == NORM_RMSNORM;
    m->swiglu = j->swiglu, m->Fw = m->swiglu ? 2 * m->Ft : m->Ft, m->pos = j->position_embedding;
    m->hdrop = (float)j->hidden_dropout, m->adrop = (float)j->attention_dropout;
    m->edp = m->etp = 1;
    if ((m->E = j->num_experts) > 0) {
        m->etp = j->etp > 0 ? j->etp : 1, m->etp_i = comm->etp_i;
        m->El = m->E / j->ep, m->topk = j->moe_topk, m->Fe = j->moe_ffn_hidden_size / m->etp;
        m->Fwe = m->swiglu ? 2 * m->Fe : m->Fe;
        m->ep = j->ep, m->ep_i = comm->ep_i, m->edp = j->edp, m->edp_i = comm->edp_i;
        m->moe_cf = j->moe_capacity_factor, m->moe_pad = j->moe_pad_to_capacity;
        m->moe_ag = j->moe_dispatcher == MOE_ALLGATHER;
        m->Fs = j->moe_shared_ffn, m->Fst = m->Fs / m->t, m->Fws = m->swiglu ? 2 * m->Fst : m->Fst;
        int aux = j->moe_lb_type == MOE_LB_AUX || j->moe_lb_type == MOE_LB_SEQ_AUX;
        m->moe_aux_coeff = aux ? (float)j->moe_aux_coeff : 0;
    }
    if (layout(m)) {
        snprintf(err, errlen, "out of host memory laying out the model");
        return -1;
    }
    size_t ab = (size_t)rt->act_bytes;
    if (rt->op->alloc(rt, &m->params, (size_t)m->nparams * ab, RT_POOL_MAIN) ||
        rt->op->alloc(rt, (void **)&m->grads, (size_t)m->nparams * sizeof(float), RT_POOL_MAIN) ||
        rt->op->memset0(rt, m->params, (size_t)m->nparams * ab, STREAM_COMPUTE) ||
        rt->op->memset0(rt, m->grads, (size_t)m->nparams * sizeof(float), STREAM_COMPUTE)) {
        snprintf(err, errlen, "cannot allocate %ld parameters and their gradients on the device", m->nparams);
        return -1;
    }
    return gpt_fp8_init(m, err, errlen);
}

void gpt_free(gpt_t *m)
{
    if (m->rt) {
        m->rt->op->free(m->rt, m->params);
        m->rt->op->free(m->rt, m->grads);
    }
    gpt_fp8_free(m);
    free(m->tensors), free(m->layer_tensor), free(m->pieces), free(m->chunk_piece0), free(m->chunk_layer0);
    memset(m, 0, sizeof *m);
}

void *gpt_param(const gpt_t *m, int i)
{
    return i < 0 ? NULL : (char *)m->params + m->tensors[i].off * m->rt->act_bytes;
}
float *gpt_grad(const gpt_t *m, int i) { return i < 0 ? NULL : m->grads + m->tensors[i].off; }

/* ---- initial values: a counter-based normal per (seed, tensor, element) -------- */

static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Box-Muller over two 53-bit uniforms drawn from the element's counter. */
static float normal(uint64_t seed, int id, uint64_t idx)
{
    uint64_t base = mix(seed * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL) ^ ((uint64_t)id << 44) ^ idx;
    double u1 = ((mix(base) >> 11) + 0.5) * 0x1.0p-53, u2 = ((mix(base ^ 0xd1b54a32d192ed03ULL) >> 11) + 0.5) * 0x1.0p-53;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static int map(const gpt_seg_t *s, int n, int local)
{
    for (int i = 0; i < n; i++)
        if (local >= s[i].local && local < s[i].local + s[i].len)
            return s[i].global + local - s[i].local;
    return -1;
}

/* Rows [r0, r1) of tensor t. */
static void init_rows(const gpt_tensor_t *t, unsigned long long seed, float *host, int r0, int r1)
{
    float *p = host + t->off;
    for (int r = r0; r < r1; r++) {
        int gr = map(t->rseg, t->nrseg, r);
        for (int c = 0; c < t->cols; c++) {
            uint64_t gidx = (uint64_t)gr * t->gcols + (uint64_t)map(t->cseg, t->ncseg, c);
            p[(long)r * t->cols + c] = t->init_one ? 1.0f : t->init_std == 0 ? 0.0f
                                                            : t->init_std * normal(seed, t->id, gidx);
        }
    }
}

/* Every tensor's rows one after another, taken by the threads in blocks. */
typedef struct {
    const gpt_t *m;
    unsigned long long seed;
    float *host;
    long *row0; /* the first of each tensor's rows in that order; row0[ntensors]: all of them */
    long next;  /* the next block's first row (atomic) */
} init_work_t;

#define INIT_BLOCK_ROWS 16

static void *init_worker(void *arg)
{
    init_work_t *w = arg;
    const long total = w->row0[w->m->ntensors];
    int i = 0; /* the tensor row b is in: blocks come to each thread in rising order */
    for (;;) {
        long b = __atomic_fetch_add(&w->next, INIT_BLOCK_ROWS, __ATOMIC_RELAXED), e = b + INIT_BLOCK_ROWS;
        if (b >= total)
            return NULL;
        for (e = e < total ? e : total; b < e;) {
            while (w->row0[i + 1] <= b)
                i++;
            long hi = w->row0[i + 1] < e ? w->row0[i + 1] : e;
            init_rows(&w->m->tensors[i], w->seed, w->host, (int)(b - w->row0[i]), (int)(hi - w->row0[i]));
            b = hi;
        }
    }
}

#define INIT_MAX_THREADS 32
#define INIT_SERIAL_BELOW (1L << 22) /* elements: smaller models are not worth a thread */

/* The helper threads may run on any of the machine's CPUs, whatever this
 * rank's binding (mpirun binds a rank to one core when it starts 1 or 2):
 * the draws last seconds, before the rank's own work starts. */
static int any_cpu_attr(pthread_attr_t *a, long ncpu)
{
    cpu_set_t all;
    CPU_ZERO(&all);
    for (long c = 0; c < ncpu && c < CPU_SETSIZE; c++)
        CPU_SET((int)c, &all);
    if (pthread_attr_init(a))
        return -1;
    if (!pthread_attr_setaffinity_np(a, sizeof all, &all))
        return 0;
    pthread_attr_destroy(a);
    return -1;
}

void gpt_init_values(const gpt_t *m, unsigned long long seed, float *host, int nthreads)
{
    memset(host, 0, sizeof(float) * (size_t)m->nparams);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (nthreads <= 0) /* one per CPU (up to INIT_MAX_THREADS below); one for a small model */
        nthreads = m->nparams < INIT_SERIAL_BELOW || ncpu < 1 ? 1 : (int)ncpu;
    nthreads = nthreads > INIT_MAX_THREADS ? INIT_MAX_THREADS : nthreads;
    long *row0 = malloc(sizeof(long) * (size_t)(m->ntensors + 1));
    if (!row0) { /* one thread, no table */
        for (int i = 0; i < m->ntensors; i++)
            init_rows(&m->tensors[i], seed, host, 0, m->tensors[i].rows);
        return;
    }
    row0[0] = 0;
    for (int i = 0; i < m->ntensors; i++)
        row0[i + 1] = row0[i] + m->tensors[i].rows;
    init_work_t w = {m, seed, host, row0, 0};
    pthread_t th[INIT_MAX_THREADS];
    pthread_attr_t attr;
    int started = 0, spread = nthreads > 1 && !any_cpu_attr(&attr, ncpu);
    while (started < nthreads - 1 && (!pthread_create(&th[started], spread ? &attr : NULL, init_worker, &w) ||
                                      (spread && !pthread_create(&th[started], NULL, init_worker, &w))))
        started++; /* a thread that cannot start leaves its share to the others */
    init_worker(&w);
    for (int k = 0; k < started; k++)
        pthread_join(th[k], NULL);
    if (spread)
        pthread_attr_destroy(&attr);
    free(row0);
}
