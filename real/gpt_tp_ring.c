/* real/gpt_tp_ring.c: the chunked GEMMs of --tp-comm-overlap (gpt_layer.h):
 * MegaScale's TP/SP overlap, the forward's all-gather and reduce-scatter
 * and the backward's gradient gather as rings of per-slice transfers on
 * the TP stream pipelined against per-slice GEMMs, the GEMMs alternating
 * between the two compute streams; with FP8, each GEMM's inputs cast as
 * gpt_fp8.c's whole-tensor GEMMs cast them. */
#include "real/gpt_layer.h"

/* A chunked GEMM's steps alternate between the two compute streams, as
 * TransformerEngine's split overlap does, so one chunk's last wave shares
 * the SMs with the next chunk's first instead of idling them. chunks_begin
 * orders the second stream after the work issued so far; chunks_end brings
 * both streams and the TP stream back into the compute stream, so what
 * follows (including freeing the step buffers) is ordered after every step. */
static int chunks_begin(gpt_t *m) { return OP->join(RT, RT_STREAM_COMPUTE_ALT, STREAM_COMPUTE); }

static int chunk_stream(int step) { return step % 2 ? RT_STREAM_COMPUTE_ALT : STREAM_COMPUTE; }

static int chunks_end(gpt_t *m)
{
    RT_TRY(OP->compute_on(RT, STREAM_COMPUTE));
    RT_TRY(OP->join(RT, STREAM_COMPUTE, RT_STREAM_COMPUTE_ALT));
    return OP->join(RT, STREAM_COMPUTE, RT_STREAM_TP);
}

/* Ring all-gather pipelined with the GEMM of weight tw: step s multiplies
 * slice (tp_i - s) mod t while the next slice travels. full (N, C) ends
 * whole. Step s's stream first waits for the transfers issued so far (the
 * one bringing its slice), then step s's transfer is issued, so a GEMM
 * never waits for the transfer that runs beside it. With FP8 the ring
 * carries the slices as they are (full ends unquantised, as the wgrad and
 * the bias gradient need it) and each is cast into q before its GEMM: at
 * the tensor's one scale, the whole tensor's cast, slice by slice. */
int gpt_ring_gather_gemm(gpt_t *m, void *full, const void *inp_l, int rows_fn_dgrad, void *out, int tw,
                         const void *bias, int C, int OC)
{
    int t = m->t, r = m->tp_i, Nl = m->Nl;
    long slice = (long)Nl * C;
    const void *W = gpt_param(m, tw), *Wq;
    void *q = NULL;
    RT_TRY(gpt_fp8_cast(m, tw, GPT_FP8_W, W, (long)OC * C, &Wq));
    RT_TRY(m->fp8_sites ? alloc_act(m, &q, (long)m->N * C) : 0);
    RT_TRY(gpt_copy_act(m, A(m, full, r * slice), inp_l, slice));
    RT_TRY(OP->join(RT, RT_STREAM_TP, STREAM_COMPUTE));
    RT_TRY(chunks_begin(m));
    for (int s = 0; s < t; s++) {
        int cur = (r - s + t) % t, nxt = (r - s - 1 + 2 * t) % t;
        RT_TRY(OP->join(RT, chunk_stream(s), RT_STREAM_TP));
        RT_TRY(OP->compute_on(RT, chunk_stream(s)));
        if (s < t - 1) { /* pass the slice just held on, receive the next */
            RT_TRY(CM->op->group_begin(CM));
            RT_TRY(CM->op->send(CM, GRP_TP, (r + 1) % t, TAG_RING, A(m, full, cur * slice), slice, DT_ACT, RT_STREAM_TP));
            RT_TRY(CM->op->recv(CM, GRP_TP, (r - 1 + t) % t, TAG_RING, A(m, full, nxt * slice), slice, DT_ACT,
                             RT_STREAM_TP));
            RT_TRY(CM->op->group_end(CM));
        }
        const void *x = A(m, full, cur * slice);
        if (q) {
            RT_TRY(gpt_fp8_cast_to(m, tw, rows_fn_dgrad ? GPT_FP8_GRAD : GPT_FP8_IN, A(m, q, cur * slice), x, slice));
            x = A(m, q, cur * slice);
        }
        if (rows_fn_dgrad) /* out (N, OC) = dout (N, C) @ W (C, OC): the row-parallel dgrad */
            RT_TRY(OP->linear_dgrad(RT, A(m, out, (long)cur * Nl * OC), x, Wq, Nl, OC, C));
        else
            RT_TRY(OP->linear_fwd(RT, A(m, out, (long)cur * Nl * OC), x, Wq, bias, Nl, C, OC));
    }
    RT_TRY(chunks_end(m));
    drop(m, q), gpt_fp8_drop(m, Wq, W);
    return 0;
}

/* Ring reduce-scatter pipelined with the GEMM of weight tw: step s
 * computes the partial sum of slice (tp_i - s - 1) mod t, adds what the
 * previous rank summed so far and passes it on; the last step leaves this
 * rank's slice. Three step buffers in turn: step s's stream last ran step
 * s - 2's add, which waited for the transfers up to step s - 3's send, the
 * last reader of the buffer step s overwrites. With FP8 the input (whole
 * here) and the weight are cast once, before the steps. */
int gpt_ring_gemm_scatter(gpt_t *m, void *y, const void *inp_x, int tw, const void *b, int K)
{
    int t = m->t, r = m->tp_i, Nl = m->Nl, C = m->C;
    long slice = (long)Nl * C;
    const void *W0 = gpt_param(m, tw), *W, *inp;
    void *buf[3], *in;
    RT_TRY(gpt_fp8_cast(m, tw, GPT_FP8_IN, inp_x, (long)m->N * K, &inp));
    RT_TRY(gpt_fp8_cast(m, tw, GPT_FP8_W, W0, (long)C * K, &W));
    RT_TRY(alloc_act(m, &buf[0], slice));
    RT_TRY(alloc_act(m, &buf[1], slice));
    RT_TRY(alloc_act(m, &buf[2], slice));
    RT_TRY(alloc_act(m, &in, slice));
    RT_TRY(OP->join(RT, RT_STREAM_TP, STREAM_COMPUTE));
    RT_TRY(chunks_begin(m));
    for (int s = 0; s < t; s++) {
        int sl = (r - s - 1 + 2 * t) % t, X = chunk_stream(s);
        void *cur = s == t - 1 ? y : buf[s % 3];
        RT_TRY(OP->compute_on(RT, X));
        RT_TRY(OP->linear_fwd(RT, cur, A(m, inp, (long)sl * Nl * K), W, b, Nl, K, C));
        if (s > 0) { /* after the receive of the partial sum */
            RT_TRY(OP->join(RT, X, RT_STREAM_TP));
            RT_TRY(OP->add(RT, cur, cur, in, slice));
        }
        if (s < t - 1) {
            RT_TRY(OP->join(RT, RT_STREAM_TP, X));
            RT_TRY(CM->op->group_begin(CM));
            RT_TRY(CM->op->send(CM, GRP_TP, (r + 1) % t, TAG_RING, cur, slice, DT_ACT, RT_STREAM_TP));
            RT_TRY(CM->op->recv(CM, GRP_TP, (r - 1 + t) % t, TAG_RING, in, slice, DT_ACT, RT_STREAM_TP));
            RT_TRY(CM->op->group_end(CM));
        }
    }
    RT_TRY(chunks_end(m));
    drop(m, buf[0]), drop(m, buf[1]), drop(m, buf[2]), drop(m, in);
    gpt_fp8_drop(m, inp, inp_x), gpt_fp8_drop(m, W, W0);
    return 0;
}
