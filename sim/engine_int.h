/* sim/engine_int.h: the discrete-event engine's internal state, shared by
 * engine.c (streams, ops, meetings, transfers) and engine_net.c (the
 * flows mode: transfers and DP rings on the fabric). Not a public API. */
#ifndef SIM_ENGINE_INT_H
#define SIM_ENGINE_INT_H

#include "sim/engine.h"
#include "model/layout.h"
#include "sim/heap.h"
#include "sim/meet.h"
#include "sim/net.h"

#include <math.h>

enum { SLOT_FREE, SLOT_QUEUED, SLOT_RUNNING };
enum { EV_OP_DONE, EV_MEET_DONE, EV_XFER_DONE, EV_NET };
enum { GK_TP, GK_DP, GK_EMB, GK_WORLD };

typedef struct {
    const sched_op_t *op; /* in its stage's program, or in one of its entity's cells */
    int state;
    int pending;        /* transfers not yet done */
    int part;           /* part running (multi-part ops) */
    int blocked;        /* between parts, waiting for the next part's counter */
    int64_t t_head;     /* compute stream: became head */
    int64_t t_work;     /* work of the current part began (after waits and meetings) */
    int64_t work_ns;    /* work of the finished parts */
    int waited_dp;      /* it waited for a DP counter */
} slot_t;

typedef struct {
    slot_t *s;
    int cap, head, n; /* FIFO ring (compute, DP); pools (PP) keep slot
                         indices stable and use any free slot */
    int busy;
    int queued;         /* pools: slots queued, not yet started */
    int *waiting;       /* pools: those slots' indices, in issue order */
    int waiting_cap;
    int *free_idx;      /* pools: free slot indices, a stack (the last freed, still in cache, is reused first) */
    int nfree;
    int64_t busy_until; /* DP stream: end of the running collective, if known */
} queue_t;

/* Transfers posted and not yet matched, in index order (per direction and
 * role, a rank has one partner: transfers pair first-in first-out). */
typedef struct {
    int *slot, *stream;
    int cap, head, n;
} pend_t;

/* An iterating entity keeps the ops it pulled in cells of its own,
 * allocated in blocks that never move and reused once an op completes. */
typedef union op_cell {
    sched_op_t op;
    union op_cell *next; /* in the spare list */
} op_cell_t;

typedef struct op_block {
    struct op_block *next;
    op_cell_t cell[8];
} op_block_t;

typedef struct {
    sched_iter_t *it;    /* its own iterator, when the stages' programs were not written out (S->prog) */
    op_cell_t *spare;    /* with it: cells free for the next ops */
    op_block_t *blocks;  /* with it: every cell, to free */
    long pc;             /* else: the next op of its stage's program */
    int pulled_all;
    pend_t pend[2][2]; /* [direction][0 send, 1 receive] */
    queue_t q[STREAM_COUNT];
    long cnt[CNT_COUNT];
    long recv_base[2];
    uint64_t recv_bits[2];
    int cls, stage, tp_i;
    double factor;       /* compute time multiplier (stragglers) */
    double link_factor;  /* transfer time multiplier (slow NICs) */
    long seq[5];         /* meetings issued per group kind, DP's per DP stream (the last: STREAM_DP_GRAD's) */
    int traced;          /* one of the traced ranks folds into it */
    result_account_t acc;
} entity_t;

typedef struct event {
    sim_heap_node node;
    int type, ent, stream, slot;
    int ent2, stream2, slot2; /* transfers: the receiving side */
    uint64_t key; /* meeting or transfer key (table slots move) */
    struct event *next_free;
} event_t;


/* What a network flow belongs to: a pipeline transfer (both sides' ops)
 * or one edge of a collective's ring (done when all its edges are). */
typedef struct {
    int is_coll;
    int ent[2], stream[2], slot[2]; /* transfer: sender, receiver */
    uint64_t key;                    /* collective: meeting key */
    int kind, left;                  /* collective: group kind, edges running */
    int64_t delay_ns;                /* added after the last byte (launch, steps) */
    int next_free;
} flow_job_t;

typedef struct {
    const job_t *job;
    const hw_t *hw;
    const sim_opts_t *opts;
    sim_net *net;         /* flows mode: the fabric */
    event_t net_ev;       /* the one pending "network changes" event */
    int net_dirty;        /* flows started or ended since it was scheduled */
    flow_job_t *fj;
    int fj_cap, fj_free;
    int p, v, E_tp, classes;
    int *cls_rep;        /* [classes]: DP replica each class stands for */
    int *cls_count;      /* [classes]: replicas in it */
    entity_t *e;
    int ne;
    sim_heap heap;
    uint64_t seq;
    event_t *free_ev;
    sim_meet_table meets;  /* collectives waiting for their members */
    cost_chunk_t *ct;   /* [p * v] */
    sched_op_t **prog;  /* [p]: each stage's program, written out once for all its entities (NULL: each iterates) */
    long *prog_n;       /* [p]: its ops */
    sched_iter_t *its;  /* [ne]: the entities' iterators, when prog is NULL */
    double *dp_link;     /* [p * E_tp]: slowest NIC factor in the DP group */
    int *mem;            /* scratch: members of one meeting */
    int64_t p2p_ns;      /* one pipeline transfer on idle links (all are the same size) */
    int64_t sync_gap_ns; /* compute stream idle after a blocking exchange (host_sync_gap_us) */
    int64_t overhead_ns; /* per-iteration host overhead, charged with the optimizer step */
    result_op_t *tl;       /* timeline of traced ranks */
    long ntl, tl_cap;
    int tl_failed_handover; /* the run failed: the timeline is freed here */
    int trace_ent[SIM_MAX_TRACE]; /* entity standing for each traced rank */
    long long events;
    int64_t now;
    char *err;
    int errlen;
} sim_t;

/* ---- small helpers -------------------------------------------------- */

/* Simulated time ends at SIM_MAX_NS (about 3.2 years): an op or an
 * iteration longer than that comes from inputs outside what megasim models
 * (a profile's or a flag's rate near zero). ns() saturates there (NaN too),
 * and no event is scheduled at or past it (eng_ev_at): the run stops with
 * a message, before the int64 clock could wrap. */
#define SIM_MAX_NS ((int64_t)100000000000000000LL)
static inline int64_t ns(double s)
{
    double v = s * 1e9;
    return v != v || v >= (double)SIM_MAX_NS ? SIM_MAX_NS : (int64_t)llround(v);
}

static inline int ent_id(const sim_t *S, int cls, int stage, int tp_i) { return (cls * S->p + stage) * S->E_tp + tp_i; }

static inline int global_rank(const sim_t *S, const entity_t *e)
{
    return layout_rank(layout_of(S->job), e->tp_i, S->cls_rep[e->cls], e->stage);
}


/* engine.c */
/* An event at or past SIM_MAX_NS: -1 with the message in S->err, else 0. */
int eng_past_the_end(sim_t *S, int64_t t);
int eng_ev_at(sim_t *S, int64_t t, int type, int ent, int stream, int slot, uint64_t key);
int eng_xfer_event(sim_t *S, int64_t t, const int ent[2], const int st[2], const int sl[2]);

/* engine_setup.c */
int eng_setup(sim_t *S);            /* 0, -1 out of memory, -2 the network model refused (err) */
int eng_collect(const sim_t *S, result_t *r, char *err, int len);
void eng_teardown(sim_t *S);
int eng_unfolded_too_big(const job_t *job, char *err, int len); /* 1 with a message: refuse */

/* engine_net.c: the flows mode */
int eng_net_setup(sim_t *S);
int eng_net_xfer(sim_t *S, const int ent[2], const int st[2], const int sl[2], int src_gpu, int dst_gpu,
                 double bytes);
int eng_net_ring(sim_t *S, int ent, int stream, uint64_t key, int n);
int eng_net_resched(sim_t *S);
int eng_net_event(sim_t *S);
void eng_net_contention(const sim_t *S, result_t *r);

#endif
