/* real/health.h: a rank's health as `megasim supervise` and `megasim
 * diagnose` read it, and the faults `megasim run --inject-fault` plants.
 *
 * Heartbeats: one small file per rank, DIR/rank-NNNNN.hb, mapped shared
 * and updated in place: at every op boundary (step, op index, kind) and
 * around every communication call (which group or peer, and the call's
 * number), and a liveness beat from a thread every interval. Chosen over a
 * socket to the supervisor because the record must outlive the rank (a
 * crashed or hung rank's last position is what diagnosis needs), cost
 * nothing per op (a few stores, no system call), and be readable by
 * `diagnose` long after the job. Writers bump a sequence number to odd
 * before a change and to even after; readers retry until they see an even
 * number unchanged around their copy. Same-architecture files (binary). */
#ifndef REAL_HEALTH_H
#define REAL_HEALTH_H

#include <stdint.h>

#include "real/comm.h"

#define HB_MAGIC "MSHB0004" /* 0002: the CP size and group; 0003: EP, ETP and their groups; 0004: the ETP group */
#define HB_MAX_PENDING 8   /* communication calls one op waits on at once (a batch) */
#define HB_MAX_P2P 16      /* (peer, tag, direction) transfer counters kept */
#define HB_GROUPS 9        /* comm.h's GRP_COUNT: GRP_TP .. GRP_ETP */

enum { HB_COLL, HB_SEND, HB_RECV };
enum { HB_RUNNING, HB_DONE, HB_FAILED };

typedef struct {
    int8_t kind;           /* HB_COLL, HB_SEND, HB_RECV */
    int8_t grp, tag;
    int32_t peer;          /* world rank of the other side (transfers) */
    int64_t n;             /* its number: the n-th collective on grp, or transfer with peer/tag/direction */
} hb_pending_t;

typedef struct {
    int32_t peer;          /* world rank */
    int8_t tag, recv;
    int64_t n;             /* transfers entered */
} hb_p2p_t;

typedef struct {
    char magic[8];
    uint64_t seq;          /* odd while a change is being written */
    int32_t rank, world, tp, dp, pp, tp_i, dp_i, stage, pid, state; /* dp, dp_i: over DP x CP */
    int32_t cp;            /* the CP size: dp_i mod cp is the place in the sequence */
    int32_t ep, etp;       /* the experts' EP (0 without experts: no EP or EDP group) and ETP */
    int32_t outside;       /* outside the op program (start, between steps, checkpoints,
                              the end): the liveness beat counts as progress there */
    char host[64];
    int64_t beat_ns;       /* liveness: CLOCK_REALTIME, every interval */
    int64_t progress_ns;   /* the last op boundary or communication call */
    int32_t step, op, in_op, op_kind, op_mb, op_chunk;
    int32_t target_step;   /* the step this invocation trains until */
    double interval_s;     /* the liveness beat's period */
    int32_t last_step;     /* the last step finished, its time */
    double last_step_s;
    int64_t coll[HB_GROUPS]; /* collectives entered per group */
    int32_t npending, np2p;
    hb_pending_t pending[HB_MAX_PENDING];
    hb_p2p_t p2p[HB_MAX_P2P];
    int64_t error_ns;      /* when it recorded the error */
    char error[512];       /* why the rank stopped (state HB_FAILED) */
} hb_record_t;

/* ---- writing (one per rank; no-ops when not opened) --------------------- */

/* Opens DIR/rank-NNNNN.hb (DIR made if missing) and starts the liveness
 * thread; the plan's sizes and the rank's place in them as c's groups
 * have it (comm_groups_init). 0, or -1 with err. */
int health_open(const char *dir, int rank, int world, const comm_plan_t *p, const comm_t *c,
                double interval_s, char *err, int errlen);
void health_close(int state);        /* HB_DONE or HB_FAILED; stops the thread */
void health_error(const char *msg);  /* records why, before the rank exits */
void health_op(int step, int op, int in_op, int kind, int mb, int chunk);
void health_step_done(int step, double step_s);
void health_target(int step);
/* Entering (1) or leaving (0) the op program. Outside it nothing marks
 * progress op by op, so the liveness beat does: a long checkpoint or the
 * end of a run is not taken for a hang (nor is a hang there detected). */
void health_outside(int outside);
/* A communication call on grp (a collective), or a transfer to or from a
 * world rank; leave clears every pending call (after a batch too). */
void health_comm_enter(int kind, int grp, int peer, int tag);
void health_comm_leave(void);
/* A communicator whose calls report to the heartbeat, over inner (MPI or
 * NCCL); NULL on failure. Destroying it destroys inner. */
comm_t *health_wrap_comm(comm_t *inner);

/* ---- reading ----------------------------------------------------------- */

/* The heartbeats' clock: CLOCK_REALTIME, ns (comparable across processes). */
int64_t health_now_ns(void);

/* The path of rank's record under dir. */
void health_path(const char *dir, int rank, char *out, int len);

/* A consistent copy of one record (path). 0, or -1 with err (missing,
 * not a heartbeat file, another format's, torn beyond retries). */
int health_read(const char *path, hb_record_t *out, char *err, int errlen);

/* Every rank's record under dir into rec[0 .. *world): rank 0's names the
 * world (1 to max), and each file must be the record of the rank of that
 * world it is named for. 0, or -1 with err. */
int health_read_world(const char *dir, hb_record_t *rec, int max, int *world, char *err, int errlen);

/* ---- the wait-for graph (health_diag.c) ----------------------------------- */

#define HB_MAX_WAIT 64

typedef struct {
    int rank;
    int nwait;                 /* ranks it waits on */
    int on[HB_MAX_WAIT];
    char why[HB_MAX_WAIT][96]; /* for which call: "recv (tag fwd) from rank 3", "collective 12 on tp" */
    int culprit;               /* waited on, directly or not, and waits on nobody; or dead or failed */
    int dead;                  /* no liveness beat for 3 intervals before `now_ns` */
} hb_wait_t;

/* The wait-for graph of a world's records (rec[r] is rank r's) at now_ns:
 * who waits on whom, for which send, receive or collective (from the
 * calls each rank is in and the calls its peers have entered), and the
 * culprits. chain[0 .. *nchain) is the longest wait-for chain, ending at a
 * culprit. w has world entries. Returns the number of culprits. */
int health_waitfor(const hb_record_t *rec, int world, int64_t now_ns, hb_wait_t *w, int *chain, int *nchain);
const char *health_grp_name(int grp);
const char *health_op_name(int kind);

/* ---- injected faults ---------------------------------------------------- */

enum { INJ_CRASH, INJ_HANG, INJ_SLOW, INJ_NAN, INJ_CKPT, INJ_BADHOST, INJ_ERROR };
#define INJ_MAX 8

typedef struct {
    int kind, rank, step, op;  /* op: hang's op index (default 0) */
    double factor;             /* slow */
} inject_t;

/* Parses "crash:RANK:STEP,hang:RANK:STEP[:OP],slow:RANK:FACTOR,nan:RANK:STEP,
 * ckpt:RANK:STEP,badhost:RANK:STEP,error:RANK:STEP[:OP]"
 * against the world size. 0, or -1 with err naming what is allowed. */
int inject_parse(const char *text, int world, inject_t *list, int *n, char *err, int errlen);
/* Arms this rank's faults; `once_dir` (the --save directory, or NULL) holds
 * a marker per fault fired, so a restarted job goes on. A self-check
 * (self_check 1) meets only a bad host's fault. */
void inject_arm(const inject_t *list, int n, int rank, const char *once_dir, int self_check);
/* Called at every op (crash, hang, error): -1 when an error:RANK:STEP[:OP]
 * fault fires there (its message printed), as a failed kernel or file
 * would fail the op on that rank alone; else 0. */
int inject_at_op(int step, int op);
/* How much longer this rank's compute ops work (slow:RANK:FACTOR): FACTOR
 * - 1 times their own busy time again, 0 on a rank not slowed. The caller
 * brackets each compute op with rt_ops_t slow_begin and slow_end: its
 * device busy for longer, not idle (a sleep would lend a CPU rank's core
 * to the ranks sharing it), and the host not waiting (a GPU rank's host
 * waiting for its device deadlocked decoupled pipeline transfers). */
double inject_slow_extra(void);
/* Whether to poison this rank's gradients now (step). */
int inject_nan_now(int step);
/* Called by the checkpoint writer (real/ckpt.c) partway through stage two
 * of step's checkpoint, its file still under its temporary name: a
 * ckpt:RANK:STEP fault kills the rank there (SIGKILL). */
void inject_in_ckpt_write(int step);
/* badhost:RANK:STEP: the rank crashes at STEP, as crash does, and its host
 * then fails the self-check that follows (once), as a broken GPU or NIC
 * would, so that `supervise --hosts` evicts it. Called as the self-check
 * starts: a rank whose host it is fails there (its error recorded, exit 1;
 * its peers, waiting in a collective, are stopped by mpirun). */
void inject_self_check(void);

#endif
