/* search: the space of parallel plans for one model on one cluster, and
 * the closed-form evaluation of each plan. Pure: no MPI, no files, no
 * simulator (cmd/search.c adds those).
 *
 * The space is a mixed-radix product of candidate lists, so plan i is
 * decoded in O(1) and any subset of indices (an MPI rank's share) can be
 * evaluated independently:
 *   batch x (TP, SP) x (CP, comm) x (EP, ETP) x (PP, chunks) x micro-batch x ZeRO stage x recompute
 * TP: divisors of the heads up to min(8, GPUs per node) (a TP group stays in
 * one node's NVLink domain); SP on and off when TP > 1; PP: divisors of the
 * layers, or of the layers plus the embedding and the loss counted as layers
 * (Megatron-Core's --account-for-*-in-pipeline-split, Llama 3's split);
 * chunks per stage: divisors of a stage's layers (1 when PP = 1);
 * CP: 1, and powers of two that leave every rank at least
 * SEARCH_MIN_CP_TOKENS tokens of a sequence, each with the three comm
 * types; with experts, EP (divisors of the experts) with ETP 1 or TP's
 * (MoE Parallel Folding's two common foldings); micro-batch 1..8; ZeRO
 * 0..3; recompute none, selective, full. A field the
 * user fixed has one candidate. Everything else (overlap switches, attention,
 * optimizer...) is the base job's, except that --tp-comm-overlap is dropped
 * where SP is off (it overlaps SP's collectives). */
#ifndef MODEL_SEARCH_H
#define MODEL_SEARCH_H

#include "model/estimate.h"

#define SEARCH_MAX_CAND 64
#define SEARCH_MAX_MB 8
#define SEARCH_MAX_TP 8
#define SEARCH_MAX_PPV (8 * SEARCH_MAX_CAND) /* (PP, chunks, split) candidates */
/* The fewest tokens of a sequence a searched CP split leaves a rank: below
 * it each rank's attention is too small to hide or pay for the exchange of
 * keys and values (Megatron-Core's CP examples start at 8K tokens a rank). */
#define SEARCH_MIN_CP_TOKENS 1024

/* Why a plan was not ranked, in the order the rules are checked. */
typedef enum {
    SEARCH_OK,
    SEARCH_REJ_TP,         /* ffn, vocab or query groups not divisible by TP */
    SEARCH_REJ_GPUS,       /* TP x PP does not divide the GPU count */
    SEARCH_REJ_BATCH,      /* global batch not divisible by micro-batch x DP */
    SEARCH_REJ_INTERLEAVE, /* interleaved: micro-batches not divisible by PP */
    SEARCH_REJ_ZERO3_PP,   /* ZeRO-3 needs PP = 1 */
    SEARCH_REJ_RECOMPUTE,  /* recompute-num-layers above a chunk's layers */
    SEARCH_REJ_OTHER,      /* another rule of job_finalize */
    SEARCH_REJ_NO_EFFECT,  /* an overlap switch with nothing to overlap (a duplicate plan) */
    SEARCH_REJ_MEMORY,     /* peak memory per GPU above the limit */
    SEARCH_NREASONS
} search_reason_t;

extern const char *const search_reason_names[SEARCH_NREASONS]; /* short keys */
extern const char *const search_reason_text[SEARCH_NREASONS];  /* one line each */

typedef struct {
    int batch, tp, sp, pp, lpv, mb, zero, recompute; /* lpv 0 = not interleaved */
    int split; /* 1: the embedding and the loss counted as layers (model/split.h); 0: the base job's split */
    int cp, cp_comm; /* context-parallel size and --cp-comm-type (cp_comm_t) */
    int ep, etp1;    /* MoE: expert-parallel size, and ETP 1 (etp1) or TP's (model/moe.h) */
    int ovl;  /* overlap switches: SEARCH_OVL_TP | _PP | _DP */
} search_plan_t;

enum { SEARCH_OVL_TP = 1, SEARCH_OVL_PP = 2, SEARCH_OVL_DP = 4 };

/* Which plan fields the user fixed (one candidate each). */
typedef struct {
    int tp, sp, pp, lpv, mb, zero, recompute;
    int cp;   /* the context-parallel size and comm type, as given */
    int ep;   /* the experts' EP and ETP, as given */
    int ovl;  /* the overlap switches are as the preset and flags set them */
} search_fixed_t;

typedef struct {
    job_t base;                 /* finalize not needed; plan fields overwritten */
    hw_t hw;
    double mem_limit_bytes;
    int nbatch, ntpsp, nppv, nmb, nzero, nrc, novl, ncp, nep;
    int batch[SEARCH_MAX_CAND];
    int tpsp[SEARCH_MAX_CAND][2];   /* (TP, SP) */
    int ppv[SEARCH_MAX_PPV][3];  /* (PP, layers per chunk or 0, split) */
    int mb[SEARCH_MAX_MB], zero[4], rc[3], ovl[8];
    int cpc[SEARCH_MAX_CAND][2];    /* (CP, comm type) */
    int epc[SEARCH_MAX_CAND][2];    /* MoE: (EP, ETP 1 or TP's) */
    long long total;            /* product of the list lengths */
} search_space_t;

/* One evaluated plan: the closed form's numbers (NaN where not estimated). */
typedef struct {
    long long index;
    int reason;                 /* search_reason_t */
    int dp, vpp, num_microbatches;
    double mfu, iteration_s, tokens_per_s, mem_bytes, exposed_comm_s, bubble_s;
} search_row_t;

/* Builds the candidate lists. batch_lo..batch_hi step batch_step (step 0:
 * the base job's batch only). 0, or -1 with a message (nothing to search). */
int search_space_init(search_space_t *s, const job_t *base, const hw_t *hw, const search_fixed_t *fixed,
                      int batch_lo, int batch_hi, int batch_step, double mem_limit_bytes, char *err);

void search_plan_at(const search_space_t *s, long long index, search_plan_t *p);


/* Checks the rules and memory, then runs the closed form when the plan fits.
 * On SEARCH_OK (or SEARCH_REJ_MEMORY) *job is finalized and *e filled when
 * given (e may be NULL). */
int search_eval(const search_space_t *s, long long index, search_row_t *row, job_t *job, estimate_t *e);

/* Ranking order: MFU descending, then memory ascending, then index. Only
 * rows with reason SEARCH_OK are comparable. qsort comparator. */
int search_row_cmp(const void *a, const void *b);

/* Marks rows on the memory-MFU Pareto frontier (no other row has both less
 * or equal memory and higher MFU). rows[i].reason must be SEARCH_OK.
 * frontier[i] = 1/0. O(n log n). */
void search_frontier(const search_row_t *rows, int n, char *frontier);

/* The plan as paste-ready Megatron-LM flags ("--tensor-model-parallel-size
 * 8 ..."). ZeRO-2/3 have no Megatron-LM flag: the caller notes them. */
void search_plan_flags(const job_t *finalized, char *buf, size_t len);

#endif
