/* real/gpt_cp.c: what context parallelism adds to one rank's GPT
 * (gpt_layer.h): its rows at their places in the sequence (the learned
 * positions, the rotary turns) and the attention core over the whole
 * sequence, in Megatron-Core's three forms (--cp-comm-type):
 *   a2a        Ulysses: an all-to-all over CP trades heads for tokens, so
 *              each rank holds the whole sequence of nh / CP of its heads
 *              and runs the plain causal kernel; a second brings the
 *              output back (and the same twice in the backward);
 *   all_gather the keys and values gathered over CP (Llama 3's choice);
 *              each of the rank's two chunks of queries attends the keys up
 *              to its place; the keys' and values' gradients are
 *              reduce-scattered back to their owners;
 *   p2p        the ring (TransformerEngine's): the keys and values pass
 *              around CP on the TP stream while the compute stream runs
 *              the blocks of the ones at hand, each block of queries
 *              meeting each block of keys it can see, and the blocks'
 *              outputs are merged by their log-sum-exp; in the backward
 *              each block's key and value gradients travel on after it
 *              and arrive home after CP steps.
 * Every form gives the whole sequence's attention: the 8-rank runs equal
 * the single rank's (tests/real). Layouts: a rank's rows (B, T, w) hold
 * in slot 0 chunk cp_i and in slot 1 chunk 2 CP - 1 - cp_i of each
 * sequence, Tc = T / 2 rows each (model/layout.h); "whole" is (B, Tseq, w)
 * in sequence order; the ring's buffers are slot-major, (2, B, Tc, w). */
#include "model/layout.h"
#include "real/gpt_layer.h"

#include <math.h>

/* ---- places in the sequence ------------------------------------------------------ */

/* Rows of chunk `slot` of each of the B sequences, contiguous (B, Tc, w),
 * out of a rank's rows (B, T, w), or back in. */
static int slot_out(gpt_t *m, void *dst, const void *src, int slot, long w)
{
    size_t ab = RT->act_bytes, Tc = m->T / 2;
    return OP->copy2d(RT, dst, Tc * w * ab, A(m, src, slot * Tc * w), m->T * w * ab, Tc * w * ab, m->B,
                      STREAM_COMPUTE);
}

static int slot_in(gpt_t *m, void *dst, int slot, const void *src, long w)
{
    size_t ab = RT->act_bytes, Tc = m->T / 2;
    return OP->copy2d(RT, A(m, dst, slot * Tc * w), m->T * w * ab, src, Tc * w * ab, Tc * w * ab, m->B,
                      STREAM_COMPUTE);
}

/* Between the CP ranks' rows side by side, parts (CP, B, T, w), and the
 * whole sequences (B, Tseq, w): each chunk to or from its place. */
static int whole_parts(gpt_t *m, void *whole, void *parts, long w, int to_whole)
{
    size_t ab = RT->act_bytes, Tc = m->T / 2;
    for (int r = 0; r < m->cp; r++)
        for (int slot = 0; slot < 2; slot++) {
            void *wp = A(m, whole, layout_cp_chunk(slot, m->cp, r) * Tc * w);
            void *pp = A(m, parts, ((long)r * m->B * m->T + slot * Tc) * w);
            size_t wpitch = (size_t)m->Tseq * w * ab, ppitch = (size_t)m->T * w * ab;
            RT_TRY(to_whole ? OP->copy2d(RT, wp, wpitch, pp, ppitch, Tc * w * ab, m->B, STREAM_COMPUTE)
                            : OP->copy2d(RT, pp, ppitch, wp, wpitch, Tc * w * ab, m->B, STREAM_COMPUTE));
        }
    return 0;
}

/* The rank's rows as 2 B pieces, one chunk of one sequence each (Tc rows):
 * piece k's first row, and its first row's place in the sequence. */
static long piece_row(const gpt_t *m, int k) { return (long)(k / 2) * m->T + (k % 2) * (m->T / 2); }

static long piece_pos(const gpt_t *m, int k) { return (long)layout_cp_chunk(k % 2, m->cp, m->cp_i) * (m->T / 2); }

/* Under CP a rank's rows of each sequence are two chunks of it
 * (gpt_cp.c), and a mask's element indices follow the place in the
 * sequence, as on one rank: x's rows (rows, C), from row row0 of the
 * rank's (B, T) rows, are dropped in place run by run, each run the rows
 * contiguous in one sequence, with its own base. */
int gpt_cp_drop(gpt_t *m, long long sample0, kern_dropout d, void *x, uint8_t *mask, long rows, long row0)
{
    long Tc = m->T / 2;
    for (long r = 0, n; r < rows; r += n) {
        long row = row0 + r, s = row / m->T, t = row % m->T;
        n = Tc - t % Tc < rows - r ? Tc - t % Tc : rows - r; /* to the chunk's end */
        d.base = ((sample0 + s) * m->Tseq + layout_cp_pos(t, m->Tseq, m->cp, m->cp_i)) * m->C;
        RT_TRY(OP->dropout(RT, A(m, x, r * m->C), mask + r * m->C, A(m, x, r * m->C), n * m->C, d));
    }
    return 0;
}

int gpt_rope(gpt_t *m, void *x, int H, int inverse)
{
    double base = m->job->rotary_base;
    if (m->cp == 1)
        return OP->rope(RT, x, m->N, m->T, 0, H, m->HS, base, inverse);
    int Tc = m->T / 2;
    for (int k = 0; k < 2 * m->B; k++)
        RT_TRY(OP->rope(RT, A(m, x, piece_row(m, k) * H * m->HS), Tc, Tc, (int)piece_pos(m, k), H, m->HS, base,
                        inverse));
    return 0;
}

/* The embedding's learned positions are the table's rows at the tokens'
 * places: with CP, one call per piece (the kernel reads row n mod T of the
 * table it is given). */
int gpt_embed(gpt_t *m, void *out, const int *tokens, const void *wte, const void *wpe)
{
    if (m->cp == 1 || !wpe)
        return OP->embedding_fwd(RT, out, tokens, wte, wpe, m->v0, m->Vl, m->B, m->T, m->C);
    for (int k = 0; k < 2 * m->B; k++)
        RT_TRY(OP->embedding_fwd(RT, A(m, out, piece_row(m, k) * m->C), tokens + piece_row(m, k), wte,
                                 A(m, wpe, piece_pos(m, k) * m->C), m->v0, m->Vl, 1, m->T / 2, m->C));
    return 0;
}

int gpt_embed_bwd(gpt_t *m, float *dwte, float *dwpe, const void *dout, const int *tokens)
{
    if (m->cp == 1 || !dwpe)
        return OP->embedding_bwd(RT, dwte, dwpe, dout, tokens, m->v0, m->Vl, m->B, m->T, m->C);
    for (int k = 0; k < 2 * m->B; k++)
        RT_TRY(OP->embedding_bwd(RT, dwte, dwpe + piece_pos(m, k) * m->C, A(m, dout, piece_row(m, k) * m->C),
                                 tokens + piece_row(m, k), m->v0, m->Vl, 1, m->T / 2, m->C));
    return 0;
}

/* ---- a2a: heads for tokens ------------------------------------------------------- */

/* in (B T, H HS), this rank's rows of H heads -> out (B, Tseq, H / CP
 * HS): the whole sequences of its share of the heads (to_whole), or back. */
static int trade(gpt_t *m, void *out, const void *in, int H, int to_whole)
{
    size_t ab = RT->act_bytes;
    long hw = (long)H / m->cp * m->HS, rows = (long)m->B * m->T, part = rows * hw;
    void *send, *recv;
    RT_TRY(alloc_act(m, &send, m->cp * part));
    RT_TRY(alloc_act(m, &recv, m->cp * part));
    for (int r = 0; to_whole && r < m->cp; r++) /* rank r's share of the heads of every row */
        RT_TRY(OP->copy2d(RT, A(m, send, r * part), hw * ab, A(m, in, r * hw), (size_t)H * m->HS * ab, hw * ab, rows,
                          STREAM_COMPUTE));
    if (!to_whole)
        RT_TRY(whole_parts(m, (void *)in, send, hw, 0));
    RT_TRY(CM->op->alltoall(CM, GRP_CP, recv, send, part, DT_ACT, STREAM_COMPUTE));
    if (to_whole)
        RT_TRY(whole_parts(m, out, recv, hw, 1));
    for (int r = 0; !to_whole && r < m->cp; r++)
        RT_TRY(OP->copy2d(RT, A(m, out, r * hw), (size_t)H * m->HS * ab, A(m, recv, r * part), hw * ab, hw * ab,
                          rows, STREAM_COMPUTE));
    drop(m, send), drop(m, recv);
    return 0;
}

/* The whole sequences' attention of this rank's nh / CP heads: their
 * dropout indices from this rank's first head among the model's. */
static kern_attn_shape a2a_shape(const gpt_t *m, kern_attn_shape sh)
{
    sh.T = m->Tseq, sh.NH = m->nh / m->cp, sh.NKV = m->g / m->cp;
    sh.drop.head0 += m->cp_i * sh.NH;
    return sh;
}

static int a2a_fwd(gpt_t *m, layer_saved_t *s, void *out, kern_attn_shape sh)
{
    long qn = (long)m->B * m->T * m->nh * m->HS, kvn = (long)m->B * m->T * m->g * m->HS;
    void **fq = &s->cpb[0], **fk = &s->cpb[1], **fv = &s->cpb[2], **fo = &s->cpb[3];
    sh = a2a_shape(m, sh);
    RT_TRY(alloc_act(m, fq, qn)); RT_TRY(alloc_act(m, fk, kvn)); RT_TRY(alloc_act(m, fv, kvn));
    RT_TRY(alloc_act(m, fo, qn));
    RT_TRY(trade(m, *fq, s->q, m->nh, 1));
    RT_TRY(trade(m, *fk, s->k, m->g, 1));
    RT_TRY(trade(m, *fv, s->v, m->g, 1));
    RT_TRY(OP->alloc(RT, &s->att, rt_attn_saved_bytes(RT, m->attn, sh), RT_POOL_MAIN));
    RT_TRY(OP->attn_fwd(RT, m->attn, *fo, s->att, *fq, *fk, *fv, sh));
    drop(m, s->q), drop(m, s->k), drop(m, s->v); /* the backward reads the traded copies */
    s->q = s->k = s->v = NULL;
    return trade(m, out, *fo, m->nh, 0);
}

static int a2a_bwd(gpt_t *m, layer_saved_t *s, const void *dao, void *dq, void *dk, void *dv, kern_attn_shape sh)
{
    long qn = (long)m->B * m->T * m->nh * m->HS, kvn = (long)m->B * m->T * m->g * m->HS;
    void *dfo, *dfq, *dfk, *dfv;
    sh = a2a_shape(m, sh);
    RT_TRY(alloc_act(m, &dfo, qn)); RT_TRY(alloc_act(m, &dfq, qn));
    RT_TRY(alloc_act(m, &dfk, kvn)); RT_TRY(alloc_act(m, &dfv, kvn));
    RT_TRY(trade(m, dfo, dao, m->nh, 1));
    RT_TRY(OP->attn_bwd(RT, m->attn, dfq, dfk, dfv, dfo, s->cpb[0], s->cpb[1], s->cpb[2], s->cpb[3], s->att, sh));
    RT_TRY(trade(m, dq, dfq, m->nh, 0));
    RT_TRY(trade(m, dk, dfk, m->g, 0));
    RT_TRY(trade(m, dv, dfv, m->g, 0));
    drop(m, dfo), drop(m, dfq), drop(m, dfk), drop(m, dfv);
    return 0;
}

/* ---- all_gather: the keys and values of the whole sequence ---------------------- */

/* The queries of slot `slot` (chunk c) against the whole sequence's keys:
 * those after its place are masked. */
static kern_attn_shape gather_shape(const gpt_t *m, kern_attn_shape sh, int slot)
{
    sh.T = m->T / 2, sh.Tk = m->Tseq, sh.Tseq = m->Tseq;
    sh.q0 = layout_cp_chunk(slot, m->cp, m->cp_i) * sh.T, sh.k0 = 0;
    return sh;
}

/* x (B T, w), this rank's rows -> whole (B, Tseq, w), gathered over CP. */
static int gather_whole(gpt_t *m, void *whole, const void *x, long w)
{
    long n = (long)m->B * m->T * w;
    void *parts;
    RT_TRY(alloc_act(m, &parts, m->cp * n));
    RT_TRY(gpt_copy_act(m, A(m, parts, m->cp_i * n), x, n));
    RT_TRY(CM->op->allgather(CM, GRP_CP, parts, n, DT_ACT, STREAM_COMPUTE));
    RT_TRY(whole_parts(m, whole, parts, w, 1));
    drop(m, parts);
    return 0;
}

/* whole (B, Tseq, w), gradients from this rank's queries -> x (B T, w),
 * this rank's rows of their sum over CP. */
static int scatter_whole(gpt_t *m, void *x, void *whole, long w)
{
    long n = (long)m->B * m->T * w;
    void *parts;
    RT_TRY(alloc_act(m, &parts, m->cp * n));
    RT_TRY(whole_parts(m, whole, parts, w, 0));
    RT_TRY(CM->op->reduce_scatter(CM, GRP_CP, x, parts, n, DT_ACT, STREAM_COMPUTE));
    drop(m, parts);
    return 0;
}

static int gather_fwd(gpt_t *m, layer_saved_t *s, void *out, kern_attn_shape sh)
{
    long Tc = m->T / 2, kvw = (long)m->g * m->HS, qw = (long)m->nh * m->HS;
    void *qs, *os;
    RT_TRY(alloc_act(m, &s->cpb[0], (long)m->B * m->Tseq * kvw));
    RT_TRY(alloc_act(m, &s->cpb[1], (long)m->B * m->Tseq * kvw));
    RT_TRY(gather_whole(m, s->cpb[0], s->k, kvw));
    RT_TRY(gather_whole(m, s->cpb[1], s->v, kvw));
    drop(m, s->k), drop(m, s->v); /* the backward reads the gathered ones */
    s->k = s->v = NULL;
    RT_TRY(alloc_act(m, &qs, m->B * Tc * qw)); RT_TRY(alloc_act(m, &os, m->B * Tc * qw));
    for (int slot = 0; slot < 2; slot++) {
        kern_attn_shape ss = gather_shape(m, sh, slot);
        RT_TRY(OP->alloc(RT, &s->cpb[2 + slot], rt_attn_saved_bytes(RT, m->attn, ss), RT_POOL_MAIN));
        RT_TRY(slot_out(m, qs, s->q, slot, qw));
        RT_TRY(OP->attn_fwd(RT, m->attn, os, s->cpb[2 + slot], qs, s->cpb[0], s->cpb[1], ss));
        RT_TRY(slot_in(m, out, slot, os, qw));
    }
    drop(m, qs), drop(m, os);
    return 0;
}

static int gather_bwd(gpt_t *m, layer_saved_t *s, const void *dao, void *dq, void *dk, void *dv, kern_attn_shape sh)
{
    long Tc = m->T / 2, kvw = (long)m->g * m->HS, qw = (long)m->nh * m->HS, wn = (long)m->B * m->Tseq * kvw;
    void *qs, *os, *dos, *dqs, *dkw, *dvw, *dkt, *dvt;
    RT_TRY(alloc_act(m, &qs, m->B * Tc * qw)); RT_TRY(alloc_act(m, &os, m->B * Tc * qw));
    RT_TRY(alloc_act(m, &dos, m->B * Tc * qw)); RT_TRY(alloc_act(m, &dqs, m->B * Tc * qw));
    RT_TRY(alloc_act(m, &dkw, wn)); RT_TRY(alloc_act(m, &dvw, wn));
    RT_TRY(alloc_act(m, &dkt, wn)); RT_TRY(alloc_act(m, &dvt, wn));
    for (int slot = 0; slot < 2; slot++) {
        RT_TRY(slot_out(m, qs, s->q, slot, qw));
        RT_TRY(slot_out(m, os, s->ao, slot, qw));
        RT_TRY(slot_out(m, dos, dao, slot, qw));
        RT_TRY(OP->attn_bwd(RT, m->attn, dqs, slot ? dkt : dkw, slot ? dvt : dvw, dos, qs, s->cpb[0], s->cpb[1], os,
                            s->cpb[2 + slot], gather_shape(m, sh, slot)));
        RT_TRY(slot_in(m, dq, slot, dqs, qw));
    }
    RT_TRY(OP->add(RT, dkw, dkw, dkt, wn));
    RT_TRY(OP->add(RT, dvw, dvw, dvt, wn));
    RT_TRY(scatter_whole(m, dk, dkw, kvw));
    RT_TRY(scatter_whole(m, dv, dvw, kvw));
    void *ps[] = {qs, os, dos, dqs, dkw, dvw, dkt, dvt};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        drop(m, ps[i]);
    return 0;
}

/* ---- p2p: the ring ------------------------------------------------------------------ */

/* Whether the queries of chunk qc see any key of chunk kc: not a chunk
 * after them, nor one wholly outside the window. */
static int block_visible(const gpt_t *m, int qc, int kc)
{
    long Tc = m->T / 2;
    return kc <= qc && !(m->window > 0 && qc * Tc - (kc * Tc + Tc - 1) >= m->window);
}

static kern_attn_shape block_shape(const gpt_t *m, kern_attn_shape sh, int qc, int kc)
{
    sh.T = sh.Tk = m->T / 2, sh.Tseq = m->Tseq;
    sh.q0 = qc * sh.T, sh.k0 = kc * sh.T;
    return sh;
}

/* The blocks of ring step st: this rank's query slot a against slot b of
 * the keys it holds then (those of CP rank cp_i - st), chunks qc and kc;
 * the visible ones, in (a, b) order, into bl; returns their count. */
typedef struct {
    int a, b, qc, kc;
} ring_block_t;

static int ring_blocks(const gpt_t *m, int st, ring_block_t bl[4])
{
    int src = (m->cp_i - st + m->cp) % m->cp, n = 0;
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++) {
            int qc = layout_cp_chunk(a, m->cp, m->cp_i), kc = layout_cp_chunk(b, m->cp, src);
            if (block_visible(m, qc, kc))
                bl[n++] = (ring_block_t){a, b, qc, kc};
        }
    return n;
}

/* The ring's step on the TP stream, beside the compute stream's blocks:
 * buf (n elements, as the compute stream left it) on to the next CP rank,
 * the previous one's into nxt. ring_land: the compute stream waits for
 * every step issued, and each buf and nxt swap (buf now what arrived). */
static int ring_send(gpt_t *m, void *buf, void *nxt, long n)
{
    int next = (m->cp_i + 1) % m->cp, prev = (m->cp_i + m->cp - 1) % m->cp;
    RT_TRY(OP->join(RT, RT_STREAM_TP, STREAM_COMPUTE));
    RT_TRY(CM->op->group_begin(CM));
    RT_TRY(CM->op->send(CM, GRP_CP, next, TAG_RING, buf, n, DT_ACT, RT_STREAM_TP));
    RT_TRY(CM->op->recv(CM, GRP_CP, prev, TAG_RING, nxt, n, DT_ACT, RT_STREAM_TP));
    return CM->op->group_end(CM);
}

static int ring_land(gpt_t *m, void **buf, void **nxt, void **buf2, void **nxt2)
{
    RT_TRY(OP->join(RT, STREAM_COMPUTE, RT_STREAM_TP));
    void *t = *buf;
    *buf = *nxt, *nxt = t;
    if (buf2)
        t = *buf2, *buf2 = *nxt2, *nxt2 = t;
    return 0;
}

/* kv (slot-major: keys (2, B, Tc, w) then values): this rank's own. */
static int ring_own(gpt_t *m, void *kv, const void *k, const void *v, long w)
{
    long half = (long)m->B * (m->T / 2) * w;
    for (int slot = 0; slot < 2; slot++) {
        RT_TRY(slot_out(m, A(m, kv, slot * half), k, slot, w));
        RT_TRY(slot_out(m, A(m, kv, 2 * half + slot * half), v, slot, w));
    }
    return 0;
}

static int ring_fwd(gpt_t *m, layer_saved_t *s, void *out, kern_attn_shape sh)
{
    long Tc = m->T / 2, kvw = (long)m->g * m->HS, qw = (long)m->nh * m->HS;
    long half = m->B * Tc * kvw, kvn = 4 * half, qn = m->B * Tc * qw;
    size_t lse_bytes = rt_attn_saved_bytes(RT, m->attn, block_shape(m, sh, 0, 0));
    void *kv, *nxt, *qs[2], *os[2], *ob, *lb;
    int have[2] = {0, 0};
    RT_TRY(alloc_act(m, &kv, kvn)); RT_TRY(alloc_act(m, &nxt, kvn)); RT_TRY(alloc_act(m, &ob, qn));
    RT_TRY(OP->alloc(RT, &lb, lse_bytes, RT_POOL_MAIN));
    RT_TRY(ring_own(m, kv, s->k, s->v, kvw));
    for (int a = 0; a < 2; a++) {
        RT_TRY(alloc_act(m, &qs[a], qn)); RT_TRY(alloc_act(m, &os[a], qn));
        RT_TRY(OP->alloc(RT, &s->cpb[a], lse_bytes, RT_POOL_MAIN)); /* the merged log-sum-exp */
        RT_TRY(slot_out(m, qs[a], s->q, a, qw));
    }
    for (int st = 0; st < m->cp; st++) {
        int more = st < m->cp - 1;
        ring_block_t bl[4];
        if (more) /* the next rank's keys travel while these are used */
            RT_TRY(ring_send(m, kv, nxt, kvn));
        for (int i = 0, n = ring_blocks(m, st, bl); i < n; i++) {
            int a = bl[i].a;
            kern_attn_shape bs = block_shape(m, sh, bl[i].qc, bl[i].kc);
            const void *kb = A(m, kv, bl[i].b * half), *vb = A(m, kv, 2 * half + bl[i].b * half);
            if (!have[a]) { /* the first block: the running output itself */
                RT_TRY(OP->attn_fwd(RT, m->attn, os[a], s->cpb[a], qs[a], kb, vb, bs));
                have[a] = 1;
                continue;
            }
            RT_TRY(OP->attn_fwd(RT, m->attn, ob, lb, qs[a], kb, vb, bs));
            RT_TRY(OP->attn_merge(RT, os[a], s->cpb[a], ob, lb, m->B, (int)Tc, m->nh, m->HS));
        }
        if (more)
            RT_TRY(ring_land(m, &kv, &nxt, NULL, NULL));
    }
    for (int a = 0; a < 2; a++) {
        RT_TRY(slot_in(m, out, a, os[a], qw));
        drop(m, qs[a]), drop(m, os[a]);
    }
    drop(m, kv), drop(m, nxt), drop(m, ob), drop(m, lb);
    return 0;
}

/* Each block's backward with the merged output and log-sum-exp gives its
 * share of dq, dk and dv (FlashAttention-2's backward needs nothing else);
 * the keys' and values' shares travel with them, [dk | dv] slot-major. */
static int ring_bwd(gpt_t *m, layer_saved_t *s, const void *dao, void *dq, void *dk, void *dv, kern_attn_shape sh)
{
    long Tc = m->T / 2, kvw = (long)m->g * m->HS, qw = (long)m->nh * m->HS;
    long half = m->B * Tc * kvw, kvn = 4 * half, qn = m->B * Tc * qw;
    void *kv, *nxt, *dkv, *dnxt, *qs[2], *os[2], *dos[2], *dqs[2], *dqb, *dkb, *dvb;
    RT_TRY(alloc_act(m, &kv, kvn)); RT_TRY(alloc_act(m, &nxt, kvn));
    RT_TRY(alloc_act(m, &dkv, kvn)); RT_TRY(alloc_act(m, &dnxt, kvn));
    RT_TRY(alloc_act(m, &dqb, qn)); RT_TRY(alloc_act(m, &dkb, half)); RT_TRY(alloc_act(m, &dvb, half));
    RT_TRY(ring_own(m, kv, s->k, s->v, kvw));
    RT_TRY(OP->memset0(RT, dkv, (size_t)kvn * RT->act_bytes, STREAM_COMPUTE));
    for (int a = 0; a < 2; a++) {
        RT_TRY(alloc_act(m, &qs[a], qn)); RT_TRY(alloc_act(m, &os[a], qn));
        RT_TRY(alloc_act(m, &dos[a], qn)); RT_TRY(alloc_act(m, &dqs[a], qn));
        RT_TRY(slot_out(m, qs[a], s->q, a, qw));
        RT_TRY(slot_out(m, os[a], s->ao, a, qw));
        RT_TRY(slot_out(m, dos[a], dao, a, qw));
        RT_TRY(OP->memset0(RT, dqs[a], (size_t)qn * RT->act_bytes, STREAM_COMPUTE));
    }
    for (int st = 0; st < m->cp; st++) {
        int more = st < m->cp - 1;
        ring_block_t bl[4];
        if (more)
            RT_TRY(ring_send(m, kv, nxt, kvn));
        for (int i = 0, n = ring_blocks(m, st, bl); i < n; i++) {
            int a = bl[i].a, b = bl[i].b;
            void *dkacc = A(m, dkv, b * half), *dvacc = A(m, dkv, 2 * half + b * half);
            RT_TRY(OP->attn_bwd(RT, m->attn, dqb, dkb, dvb, dos[a], qs[a], A(m, kv, b * half),
                                A(m, kv, 2 * half + b * half), os[a], s->cpb[a],
                                block_shape(m, sh, bl[i].qc, bl[i].kc)));
            RT_TRY(OP->add(RT, dqs[a], dqs[a], dqb, qn));
            RT_TRY(OP->add(RT, dkacc, dkacc, dkb, half));
            RT_TRY(OP->add(RT, dvacc, dvacc, dvb, half));
        }
        RT_TRY(ring_send(m, dkv, dnxt, kvn)); /* after CP steps, the sums come home */
        RT_TRY(more ? ring_land(m, &dkv, &dnxt, &kv, &nxt) : ring_land(m, &dkv, &dnxt, NULL, NULL));
    }
    for (int a = 0; a < 2; a++) {
        RT_TRY(slot_in(m, dq, a, dqs[a], qw));
        RT_TRY(slot_in(m, dk, a, A(m, dkv, a * half), kvw));
        RT_TRY(slot_in(m, dv, a, A(m, dkv, 2 * half + a * half), kvw));
        drop(m, qs[a]), drop(m, os[a]), drop(m, dos[a]), drop(m, dqs[a]);
    }
    void *ps[] = {kv, nxt, dkv, dnxt, dqb, dkb, dvb};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        drop(m, ps[i]);
    return 0;
}

/* ---- the core ------------------------------------------------------------------------ */

int gpt_cp_attn_fwd(gpt_t *m, layer_saved_t *s, void *out, kern_attn_shape sh)
{
    switch (m->job->cp_comm_type) {
    case CP_A2A: return a2a_fwd(m, s, out, sh);
    case CP_ALLGATHER: return gather_fwd(m, s, out, sh);
    default: return ring_fwd(m, s, out, sh);
    }
}

int gpt_cp_attn_bwd(gpt_t *m, layer_saved_t *s, const void *dao, void *dq, void *dk, void *dv, kern_attn_shape sh)
{
    switch (m->job->cp_comm_type) {
    case CP_A2A: return a2a_bwd(m, s, dao, dq, dk, dv, sh);
    case CP_ALLGATHER: return gather_bwd(m, s, dao, dq, dk, dv, sh);
    default: return ring_bwd(m, s, dao, dq, dk, dv, sh);
    }
}
