/* real/gpt.h: the GPT that a real run trains, as one rank holds it: its
 * pipeline stage's model chunks (Megatron's interleaved assignment), each
 * tensor cut by tensor parallelism the way Megatron-LM cuts it, and the
 * forward and backward of one chunk on one micro-batch with the TP/SP
 * collectives of model/layer.c (all-reduce, or all-gather and
 * reduce-scatter with sequence parallelism; chunked rings under
 * --tp-comm-overlap).
 *
 * The model is GPT-2 shaped, as model/workload.c counts it: learned
 * position embeddings (or rotary ones turning q and k, or none), pre-LN blocks (LayerNorm, or RMSNorm without biases;
 * standard, or PaLM's parallel block),
 * biases in every linear layer (or none: --disable-bias-linear), tanh GeLU
 * (or SwiGLU: FC1 twice as wide, each TP rank holding its slice of the
 * gate rows and of the up rows, as Megatron-LM cuts them),
 * causal attention with an optional sliding window and grouped queries,
 * the output layer tied to the word embedding (or its own weight:
 * --untie-embeddings-and-output-weights).
 * Dropout as Megatron-LM places it: on the embedding output and before
 * each residual add (--hidden-dropout), and on the attention probabilities
 * (--attention-dropout), each mask drawn from Philox at the element's
 * index in the whole model (kernels/dropout.h: global sample, token,
 * column or head), so every parallel plan drops the same elements and a
 * recomputed forward draws the same mask. The hidden dropouts keep their
 * 1-byte masks for the backward, as Megatron-LM's (and the memory model
 * counts them); the attention kernels draw theirs again, as
 * FlashAttention's do.
 * The word embedding and the output layer are split by vocabulary across
 * TP ranks, as Megatron-LM's VocabParallelEmbedding and vocab-parallel
 * cross-entropy split them: each rank embeds the tokens of its rows (the
 * others as 0) and the TP all-reduce adds them (a reduce-scatter under SP
 * without learned positions); each computes the logits of
 * its columns for every token (with SP, after gathering the final hidden
 * states), merges the rows' log-sum-exp and target logits with one small
 * TP gather, and sums the hidden states' gradient over TP (all-reduce, or
 * reduce-scatter with SP).
 *
 * Parameters live in one flat space per rank, cut into DP pieces (one per
 * model chunk when interleaved, Megatron's buckets otherwise, and the tied
 * embedding on its own when it sits on two stages). Initial values depend
 * only on the seed and each element's place in the whole model, never on
 * the parallel plan, so every plan starts from the same weights. */
#ifndef REAL_GPT_H
#define REAL_GPT_H

#include "model/job.h"
#include "real/comm.h"
#include "real/rt.h"

#include <stdint.h>

#define GPT_MAX_SEGS 5

/* Per-layer tensors, in their order within a layer. With the parallel
 * block, QKV_W is the fused QKV+FC1 weight and PROJ_W the fused proj+FC2
 * weight; LN2 and FC1/FC2 are absent. An MoE layer (gpt_moe.c) has the
 * router (E, C) and, in place of FC1/FC2, its first local expert's FC1
 * and FC2 tensors: local expert j's are j x gpt_moe_expert_tensors() on;
 * and the shared expert's FC1 and FC2, cut by TP as a dense MLP's, and its
 * gate (1, C), where the model has them (gpt_moe_shared.c). */
enum { T_LN1_W, T_LN1_B, T_QKV_W, T_QKV_B, T_PROJ_W, T_PROJ_B, T_LN2_W, T_LN2_B,
       T_FC1_W, T_FC1_B, T_FC2_W, T_FC2_B, T_ROUTER_W,
       T_SH_FC1_W, T_SH_FC1_B, T_SH_FC2_W, T_SH_FC2_B, T_SH_GATE_W, T_PER_LAYER };

/* The most tensors a layer keeps per token (activation offloading moves
 * them: gpt_layer.h gpt_kept_t). */
enum { GPT_MAX_KEPT = 26 };

/* A run of local indices mapped onto the whole tensor's indices. */
typedef struct {
    int local, global, len;
} gpt_seg_t;

typedef struct {
    char name[40];
    int id;                  /* identity in the whole model (init, LAMB) */
    long off, n;             /* place in the rank's flat space */
    int rows, cols;          /* local shape */
    int grows, gcols;        /* the whole tensor's shape */
    gpt_seg_t rseg[GPT_MAX_SEGS], cseg[GPT_MAX_SEGS];
    int nrseg, ncseg;
    float init_std;          /* normal(0, std); std 0 with init_one: 1 */
    int init_one;
    int tp_split;            /* cut by TP (else every TP rank holds all of it) */
    int expert;              /* an expert's: held by one EP rank, replicated over EDP (not DP) */
    int etp_split;           /* an expert's, cut by ETP (else every ETP rank holds all of it: FC2's bias) */
    int sp_partial;          /* with SP each TP rank's gradient is partial: summed over TP */
} gpt_tensor_t;

/* A DP piece: a contiguous range of the flat space, padded to a multiple
 * of its group's size; each rank of the group owns (updates) 1/size of it
 * under ZeRO. The group is DP (DP x CP), or EDP for the experts' pieces. */
typedef struct {
    long off, n;
    int grp, size, idx;      /* GRP_DP or GRP_EDP (comm.h), its size, this rank's place in it */
} gpt_piece_t;

typedef struct gpt_saved gpt_saved_t;

typedef struct {
    const job_t *job;
    rt_t *rt;
    comm_t *comm;
    int t, tp_i, stage, pp, vpp, dp, dp_i; /* dp, dp_i: the weights' replicas, DP x CP */
    int cp, cp_i;            /* context parallelism: this rank holds chunks cp_i and 2 cp - 1 - cp_i of each
                                sequence (model/layout.h), T = Tseq / cp tokens of each */
    int Tseq;                /* the whole sequence */
    int *chunk_layer0;       /* [vpp + 1]: chunk c holds layers chunk_layer0[c] .. chunk_layer0[c + 1] - 1 of
                                this rank's layer_tensor rows (model/split.h: an uneven split varies them) */
    int B, T, C, F, Ft, V, NH, nh, G, g, HS, qkvn; /* T: tokens of a sequence this rank holds */
    int Vl, v0;              /* this TP rank's rows of the vocabulary: [v0, v0 + Vl) of V */
    int Fw;                  /* FC1 output width per TP rank: Ft, or 2 Ft with SwiGLU ([gate | up]) */
    int N, Nl;               /* tokens of a micro-batch; rows held outside TP regions */
    int window;              /* attention window for the kernels (0 = causal) */
    int attn;                /* attn_t: flash, flash1 or unfused */
    int fused, sp, overlap, parallel, recompute;
    int recompute_layers;    /* with recompute: the chunk's first layers rerun in the backward (uniform: all
                                of them, INT_MAX; block: the first N, each its own checkpoint) */
    int recompute_group;     /* layers per checkpoint: uniform's N (--recompute-num-layers), whose group keeps
                                only its input and reruns whole in the backward; 1 otherwise */
    int recompute_core;      /* selective recomputation with unfused attention: the (B, nh, T, T)
                                probabilities are dropped after the forward and rebuilt from the kept q, k, v
                                in the backward (Megatron-LM's checkpointed core attention); flash kernels
                                keep no probabilities, so there it changes nothing */
    int bias;                /* linear layers have biases (not --disable-bias-linear) */
    int tied;                /* the output layer is the word embedding (not --untie-...) */
    int rms;                 /* RMSNorm (no norm biases) instead of LayerNorm */
    int swiglu;              /* SwiGLU MLP (FC1 holds gate and up) instead of GeLU */
    int pos;                 /* pos_emb_t: learned table (wpe), rotary (q, k turned), or none */
    float hdrop, adrop;      /* --hidden-dropout, --attention-dropout (0: none) */
    unsigned long long drop_seed; /* the masks' key (the run's seed) */
    int drop_step;           /* the iteration being run: the masks' step (set by the executor) */

    gpt_tensor_t *tensors;
    int ntensors;
    int *layer_tensor;       /* [layer of this rank][T_PER_LAYER] -> tensor index, -1 absent */
    int t_wte, t_wpe, t_lnf_w, t_lnf_b, t_wout; /* -1 where absent (t_wout: untied output layer) */
    gpt_piece_t *pieces;     /* DP pieces; the embedding piece last when separate */
    int npieces, cap_pieces, emb_piece; /* emb_piece: index, or -1 */
    int *chunk_piece0;       /* [vpp + 1]: chunk c's first piece; [vpp]: npieces w/o emb */
    long nparams;            /* flat space, padding included */

    int E, El, topk, Fe, Fwe; /* experts (0: dense), local experts (E / EP), top-k, the FFN width of this ETP
                                 rank's slice of an expert and its FC1 output (Fe, or 2 Fe with SwiGLU) */
    int ep, ep_i, edp, edp_i, etp, etp_i; /* the expert groups (comm.h) */
    double moe_cf;           /* --moe-expert-capacity-factor (0: dropless) */
    int moe_pad;             /* --moe-pad-expert-input-to-capacity */
    int moe_ag;              /* --moe-token-dispatcher-type allgather (else alltoall) */
    int Fs, Fst, Fws;        /* the shared expert's FFN width (0: none), per TP rank, its FC1 output per TP rank */
    float moe_aux_coeff;     /* --moe-aux-loss-coeff (0: no auxiliary loss) */
    double moe_dropped, moe_aux; /* this iteration's so far, this rank's pairs: (token, expert) pairs dropped by
                                    the capacity, the auxiliary loss's share of the objective */
    uint64_t moe_drop_sig;   /* the dropped pairs' signature: a sum of one hash per (layer, sample, place in
                                the sequence, expert), the same on every plan */
    int64_t moe_a2a_ns;      /* the host's time in the experts' dispatch and combine collectives (over EP and ETP) so
                                far (compare's all-to-all class) */
    double moe_cv_sum, moe_cv_n; /* this iteration's sum of squared expert-load CVs, and their number */

    void *off_pending[GPT_MAX_KEPT]; /* activation offloading on the GPU: the last offloaded layer's whole
                                        tensors, freed once the compute stream has waited for their copies
                                        (gpt_offload.c) */
    int noff_pending;

    int fp8_sites;           /* --fp8-format: 3 per weight tensor of the model (gpt_fp8.c), 0 without */
    float *fp8_amax, *fp8_scale; /* [fp8_sites]: this iteration's amax so far (device: the casts' running
                                    max), the scale in use (host) */

    void *params;            /* act (nparams): the weights the kernels read */
    float *grads;            /* fp32 (nparams) */
} gpt_t;

/* Lays out the rank's tensors and pieces and allocates params and grads.
 * Checks the plan against what this model supports. */
int gpt_init(gpt_t *m, const job_t *job, rt_t *rt, comm_t *comm, char *err, int errlen);
void gpt_free(gpt_t *m);

/* The seed's initial value of the rank's tensors, into host fp32 master
 * (nparams); padding is 0. In nthreads threads (0: one per CPU, one below
 * 4M elements); the same bits whatever the count. */
void gpt_init_values(const gpt_t *m, unsigned long long seed, float *host, int nthreads);

/* The switches of a job (before job_finalize) that the real backend does
 * not run: 0, or -1 with one message naming the switch and what is
 * allowed. gpu: for --device gpu. */
int gpt_check_switches(const job_t *job, int gpu, char *err, int errlen);

/* First and last virtual stage of the model (embedding, loss). */
int gpt_has_embedding(const gpt_t *m, int chunk);
int gpt_has_head(const gpt_t *m, int chunk);

/* Transformer layers of model chunk `chunk` on this rank, and the model-
 * order index of its layer l (what numbers its dropout masks and names). */
static inline int gpt_chunk_layers(const gpt_t *m, int chunk)
{
    return m->chunk_layer0[chunk + 1] - m->chunk_layer0[chunk];
}
int gpt_layer_index(const gpt_t *m, int chunk, int l);

/* Forward of model chunk `chunk` on micro-batch mb of this DP rank (its
 * samples' places in the global batch number the dropout masks). x_in (Nl, C) is the
 * received activation (NULL on the first virtual stage: tokens are
 * embedded); x_out (Nl, C) receives the output (NULL on the last virtual
 * stage: the loss of each of its N rows goes to losses, on every TP rank).
 * tokens, targets (B, T) are device ints. *saved keeps what the backward
 * needs (with full recomputation, only the inputs). */
int gpt_chunk_fwd(gpt_t *m, int chunk, int mb, const void *x_in, void *x_out, const int *tokens,
                  const int *targets, float *losses, gpt_saved_t **saved);

/* Backward of the same. dres (Nl, C): in, the gradient of the chunk's
 * output (ignored on the last virtual stage, which starts from the loss,
 * scaled by dloss); out, the gradient of its input (unless the chunk
 * embeds). Frees saved. */
int gpt_chunk_bwd(gpt_t *m, gpt_saved_t *saved, void *dres, float dloss);

/* With SP, sums the TP-partial gradients of chunk c (LayerNorms,
 * embeddings) over the TP group; nothing otherwise. */
int gpt_sync_sp_grads(gpt_t *m, int chunk);

/* FP8 (gpt_fp8.c): the scales' state (after the layout; nothing without
 * --fp8-format), and the iteration's end: every rank's amaxes reduced,
 * the next iteration's scales. */
int gpt_fp8_init(gpt_t *m, char *err, int errlen);
void gpt_fp8_free(gpt_t *m);
int gpt_fp8_step(gpt_t *m);

/* Tensors per local expert of an MoE layer (FC1 and FC2, with their
 * biases when the model has them). */
int gpt_moe_expert_tensors(const gpt_t *m);

/* The iteration's MoE numbers so far, every rank's summed (collective over
 * the world; zeros without experts): dropped pairs, auxiliary loss, the
 * expert loads' coefficient of variation (root mean square over the MoE
 * layers' micro-batches), the dropped pairs' signature. */
int gpt_moe_totals(gpt_t *m, double *dropped, double *aux, double *load_cv, uint64_t *sig);

/* Pointers into params (act) and grads of tensor i; NULL for an absent
 * one (i < 0: a bias under --disable-bias-linear, say). */
void *gpt_param(const gpt_t *m, int i);
float *gpt_grad(const gpt_t *m, int i);

#endif
