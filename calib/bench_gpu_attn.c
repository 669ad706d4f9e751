/* calib/bench_gpu_attn: the attention benchmarks of the GPU calibration
 * device (calib/bench_gpu.c): the flash kernels (kernels/attention.h)
 * forward and backward over sequence lengths, head counts, GQA and a
 * sliding window; the unfused kernels (cuBLASLt GEMMs, masked softmax);
 * FlashAttention-1 against the FA-2 style kernels (the profile's
 * flash1_rel); and each flash pass with dropout against without. */
#include "calib/bench_gpu_int.h"

#include "kernels/attention.h"
#include "kernels/dropout.h"

typedef struct {
    kern_bf16 *q, *k, *v, *out, *dout, *dq, *dk, *dv; /* (B, T, NH|NKV, HS) */
    float *lse, *scratch;                             /* (B, NH, T); the backward's */
    kern_attn_shape s;
    kern_bf16 *att, *datt; /* unfused: probabilities and their gradient (B, NH, T, T) */
    float *scores;         /* unfused: fp32 scores, the backward's scratch too (B, NH, T, T) */
} attn_ctx_t;

/* Buffers for shape s, micro-batch 1 (random q, k, v and dout; the rest
 * uninitialised): with the flash kernels' lse and `scratch` bytes of
 * scratch, or with `unfused` the unfused kernels' T x T tensors. */
static attn_ctx_t attn_alloc(kern_attn_shape s, size_t scratch, int unfused)
{
    size_t nq = (size_t)s.T * s.NH * s.HS, nkv = (size_t)s.T * s.NKV * s.HS, nsq = (size_t)s.NH * s.T * s.T;
    attn_ctx_t a = {.q = bg_dbf16(nq, 1), .k = bg_dbf16(nkv, 2), .v = bg_dbf16(nkv, 3), .out = bg_dalloc(2 * nq),
                    .dout = bg_dbf16(nq, 4), .dq = bg_dalloc(2 * nq), .dk = bg_dalloc(2 * nkv),
                    .dv = bg_dalloc(2 * nkv), .s = s};
    if (unfused)
        a.att = bg_dalloc(2 * nsq), a.datt = bg_dalloc(2 * nsq), a.scores = bg_dalloc(4 * nsq);
    else
        a.lse = bg_dalloc(sizeof(float) * s.NH * s.T), a.scratch = bg_dalloc(scratch);
    return a;
}

static void attn_free(attn_ctx_t *a)
{
    void *bufs[] = {a->q, a->k, a->v, a->out, a->dout, a->dq, a->dk, a->dv, a->lse, a->scratch,
                    a->att, a->datt, a->scores};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i])
            CUDA_CK(cudaFree(bufs[i]));
}

static int attn_fwd_call(void *p)
{
    attn_ctx_t *a = p;
    return kern_attention_fwd_cuda(a->out, a->lse, a->q, a->k, a->v, a->s, bg.s);
}

static int attn_bwd_call(void *p)
{
    attn_ctx_t *a = p;
    return kern_attention_bwd_cuda(a->dq, a->dk, a->dv, a->scratch, a->dout, a->q, a->k, a->v, a->out, a->lse, a->s,
                                   bg.s);
}

/* FlashAttention-1's forward then backward, same buffers (scratch sized for
 * both kinds). */
static int attn_v1_call(void *p)
{
    attn_ctx_t *a = p;
    int rc = kern_attention_fwd_v1_cuda(a->out, a->lse, a->scratch, a->q, a->k, a->v, a->s, bg.s);
    return rc ? rc
              : kern_attention_bwd_v1_cuda(a->dq, a->dk, a->dv, a->scratch, a->dout, a->q, a->k, a->v, a->out,
                                           a->lse, a->s, bg.s);
}

static int attn_v2_call(void *p)
{
    int rc = attn_fwd_call(p);
    return rc ? rc : attn_bwd_call(p);
}

static int unfused_fwd_call(void *p)
{
    attn_ctx_t *a = p;
    return kern_attention_unfused_fwd_cuda(&bg.kc, a->out, a->att, a->scores, a->q, a->k, a->v, a->s, bg.s);
}

static int unfused_bwd_call(void *p)
{
    attn_ctx_t *a = p;
    return kern_attention_unfused_bwd_cuda(&bg.kc, a->dq, a->dk, a->dv, a->datt, a->scores, a->dout, a->q, a->k, a->v,
                                           a->att, a->s, bg.s);
}

/* The unfused kernels (cuBLASLt GEMMs, masked softmax) forward then
 * backward at one shape, batch 1: rows of the attention_unfused table,
 * raw samples only (calib.h: the model prices unfused attention from
 * gemm_eff and the memory-bound rates; no profile field to feed). */
static void unfused_point(const calib_plan_t *p, calib_table_t *t, int T, int NH, int HS)
{
    attn_ctx_t a = attn_alloc((kern_attn_shape){.B = 1, .T = T, .NH = NH, .NKV = NH, .HS = HS, .drop = KERN_NO_DROPOUT}, 0, 1);
    for (int bwd = 0; bwd <= 1; bwd++) {
        calib_stat_t st = bg_time(bwd ? unfused_bwd_call : unfused_fwd_call, &a, p);
        calib_attn_unfused_row(t, bwd, 1, T, NH, NH, HS, 0, &st);
    }
    attn_free(&a);
}

/* Forward then backward (which reads the forward's out and lse). */
static void attn_point(const calib_plan_t *p, calib_table_t *t, int T, int NH, int NKV, int HS, int window)
{
    kern_attn_shape s = {.B = 1, .T = T, .NH = NH, .NKV = NKV, .HS = HS, .window = window, .drop = KERN_NO_DROPOUT};
    attn_ctx_t a = attn_alloc(s, kern_attention_bwd_scratch_bytes(s), 0);
    for (int bwd = 0; bwd <= 1; bwd++) {
        calib_stat_t st = bg_time(bwd ? attn_bwd_call : attn_fwd_call, &a, p);
        calib_attn_row(t, bwd, s.B, T, NH, NKV, HS, window, &st);
    }
    attn_free(&a);
}

/* Flash attention, micro-batch 1: sequence lengths 256 to 16384 (4096
 * --quick) at the 1.3B model's 16 heads of 128; then at its sequence (2048):
 * 4, 12 (the 175B model's per rank at TP 8) and 64 heads, which fill the
 * grid differently at the same sequence and so tell the attention blocks'
 * wave loss (calib_fit_attn_waves) from the curve, heads of 64 (32 of them, the
 * same width), GQA (4 query heads per KV head); and a sliding window of a
 * quarter of a 4096 sequence. --tiny: 4 heads of 64, sequences 128 to 512,
 * the same special cases at 256. The unfused kernels over the same
 * sequences up to 4096 (their fp32 scores and bf16 probabilities and
 * gradient take 8 x heads x T^2 bytes: 2 GiB at 16 heads of 4096). */
void bg_attention(const calib_plan_t *p, calib_table_t *t, calib_table_t *unfused)
{
    int tiny = p->level == CALIB_TINY;
    int nh = tiny ? 4 : 16, hs = tiny ? 64 : 128, seq = tiny ? 256 : 2048;
    int top = p->level == CALIB_FULL ? 16384 : p->level == CALIB_QUICK ? 4096 : 512;
    calib_attn_table(t);
    for (int T = tiny ? 128 : 256; T <= top; T *= 2)
        attn_point(p, t, T, nh, nh, hs, 0);
    static const int heads[] = {4, 12, 64};
    for (int i = 0; !tiny && i < 3; i++)
        attn_point(p, t, seq, heads[i], heads[i], 128, 0);
    attn_point(p, t, seq, 2 * nh, 2 * nh, hs / 2, 0);
    attn_point(p, t, seq, nh, nh / 4, hs, 0);
    attn_point(p, t, 2 * seq, nh, nh, hs, seq / 2);
    calib_attn_unfused_table(unfused);
    for (int T = tiny ? 128 : 256; T <= (top < 4096 ? top : 4096); T *= 2)
        unfused_point(p, unfused, T, nh, hs);
}

/* The flash attention buffers at the 1.3B model's shape (16 heads of 128,
 * micro-batch 1, 2048 tokens; 4 heads of 64 over 256 with --tiny) times
 * heads_x in heads, for both the FA-2 style and the FA-1 kernels. */
static attn_ctx_t attn_shape_ctx(const calib_plan_t *p, int heads_x)
{
    int tiny = p->level == CALIB_TINY, T = tiny ? 256 : 2048, NH = (tiny ? 4 : 16) * heads_x, HS = tiny ? 64 : 128;
    kern_attn_shape s = {.B = 1, .T = T, .NH = NH, .NKV = NH, .HS = HS, .drop = KERN_NO_DROPOUT};
    size_t sc = kern_attention_fwd_v1_scratch_bytes(s);
    if (kern_attention_bwd_v1_scratch_bytes(s) > sc)
        sc = kern_attention_bwd_v1_scratch_bytes(s);
    if (kern_attention_bwd_scratch_bytes(s) > sc)
        sc = kern_attention_bwd_scratch_bytes(s);
    return attn_alloc(s, sc, 0);
}

/* FA-2 style over FA-1 time, forward + backward: the profile's flash1_rel. */
double bg_flash1_rel(const calib_plan_t *p)
{
    attn_ctx_t a = attn_shape_ctx(p, 1);
    calib_stat_t v2 = bg_time(attn_v2_call, &a, p), v1 = bg_time(attn_v1_call, &a, p);
    attn_free(&a);
    return v1.med_s > 0 ? v2.med_s / v1.med_s : -1;
}

/* Each flash pass with dropout 0.1 against without, at the 1.3B model's
 * shape and at 4 times its heads (the 1.2B run's micro-batch of 4 fills
 * the grid as 64 heads do): rows of the attention_dropout table, whose
 * fits give the profile's flash_fwd_gdraws and flash_bwd_gdraws (the
 * draws of a full grid over the time they add: calib/profile.c). --tiny
 * (the tests' grid) times the first shape only: the fit goes through the
 * origin, and the 16 heads took 5 s of an emulated GPU. */
void bg_attn_dropout(const calib_plan_t *p, calib_table_t *t)
{
    calib_attn_dropout_table(t);
    for (int heads_x = 1; heads_x <= (p->level == CALIB_TINY ? 1 : 4); heads_x *= 4) {
        attn_ctx_t a = attn_shape_ctx(p, heads_x);
        kern_attn_shape *s = &a.s;
        double plain[2], drop[2];
        for (int d = 0; d <= 1; d++) {
            if (d) {
                s->drop = kern_dropout_make(0.1f, 1, kern_dropout_site(0, KERN_DROP_ATTN), 0);
                s->drop.heads = s->NH;
            }
            for (int bwd = 0; bwd <= 1; bwd++) /* the backward reads this forward's out and lse */
                (d ? drop : plain)[bwd] = bg_time(bwd ? attn_bwd_call : attn_fwd_call, &a, p).med_s;
        }
        for (int bwd = 0; bwd <= 1; bwd++)
            calib_attn_dropout_row(t, bwd, s->B, s->T, s->NH, s->NKV, s->HS, 0, plain[bwd], drop[bwd]);
        attn_free(&a);
    }
}
