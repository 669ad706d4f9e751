/* real/health: heartbeats, the reporting communicator and injected faults
 * (see health.h). */
#include "real/health.h"

#include "real/comm.h"
#include "sim/out.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

_Static_assert(HB_GROUPS == GRP_COUNT, "a heartbeat counts the collectives of every comm.h group");

static hb_record_t *hb;      /* this rank's mapped record, or NULL */
static pthread_t beat_thread;
static volatile int beat_stop;
static double beat_interval_s;

int64_t health_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

void health_path(const char *dir, int rank, char *out, int len)
{
    snprintf(out, len, "%s/rank-%05d.hb", dir, rank);
}

/* The seqlock's two halves around every change. */
static void w_begin(void) { __atomic_add_fetch(&hb->seq, 1, __ATOMIC_ACQ_REL); }
static void w_end(void)
{
    hb->progress_ns = health_now_ns();
    __atomic_add_fetch(&hb->seq, 1, __ATOMIC_RELEASE);
}

static void *beat_main(void *arg)
{
    (void)arg;
    struct timespec d = {(time_t)beat_interval_s, (long)((beat_interval_s - (time_t)beat_interval_s) * 1e9)};
    while (!beat_stop) {
        int64_t now = health_now_ns();
        __atomic_store_n(&hb->beat_ns, now, __ATOMIC_RELEASE);
        if (__atomic_load_n(&hb->outside, __ATOMIC_ACQUIRE))
            __atomic_store_n(&hb->progress_ns, now, __ATOMIC_RELEASE);
        nanosleep(&d, NULL);
    }
    return NULL;
}

int health_open(const char *dir, int rank, int world, const comm_plan_t *plan, const comm_t *c,
                double interval_s, char *err, int errlen)
{
    char path[1200];
    if (out_make_dir(dir, err, errlen))
        return -1;
    health_path(dir, rank, path, sizeof path);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0666);
    if (fd < 0 || ftruncate(fd, sizeof(hb_record_t))) {
        snprintf(err, errlen, "heartbeat file %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    void *p = mmap(NULL, sizeof(hb_record_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        snprintf(err, errlen, "heartbeat file %s: mmap: %s", path, strerror(errno));
        return -1;
    }
    hb = p;
    memset(hb, 0, sizeof *hb);
    hb->rank = rank, hb->world = world, hb->tp = plan->tp, hb->dp = plan->dp * plan->cp, hb->pp = plan->pp;
    hb->cp = plan->cp, hb->ep = plan->ep, hb->etp = plan->etp;
    hb->tp_i = c->tp_i, hb->dp_i = c->dp_i, hb->stage = c->stage;
    hb->pid = (int32_t)getpid();
    gethostname(hb->host, sizeof hb->host - 1);
    hb->step = hb->op = -1, hb->last_step = -1;
    hb->beat_ns = hb->progress_ns = health_now_ns();
    hb->interval_s = interval_s;
    hb->outside = 1;
    memcpy(hb->magic, HB_MAGIC, 8); /* last: a reader sees a whole record or none */
    beat_interval_s = interval_s;
    beat_stop = 0;
    if (pthread_create(&beat_thread, NULL, beat_main, NULL)) {
        snprintf(err, errlen, "heartbeat thread: cannot start");
        munmap(hb, sizeof *hb);
        hb = NULL;
        return -1;
    }
    return 0;
}

void health_close(int state)
{
    if (!hb)
        return;
    beat_stop = 1;
    pthread_join(beat_thread, NULL);
    w_begin();
    hb->state = state;
    w_end();
    munmap(hb, sizeof *hb);
    hb = NULL;
}

void health_error(const char *msg)
{
    if (!hb)
        return;
    w_begin();
    if (hb->state != HB_FAILED) /* the first error is the cause; later ones follow from it */
        snprintf(hb->error, sizeof hb->error, "%s", msg), hb->error_ns = health_now_ns();
    hb->state = HB_FAILED;
    w_end();
}

void health_op(int step, int op, int in_op, int kind, int mb, int chunk)
{
    if (!hb)
        return;
    w_begin();
    hb->step = step, hb->op = op, hb->in_op = in_op, hb->op_kind = kind, hb->op_mb = mb, hb->op_chunk = chunk;
    w_end();
}

void health_target(int step)
{
    if (!hb)
        return;
    w_begin();
    hb->target_step = step;
    w_end();
}

void health_outside(int outside)
{
    if (!hb)
        return;
    w_begin();
    hb->outside = outside;
    w_end();
}

void health_step_done(int step, double step_s)
{
    if (!hb)
        return;
    w_begin();
    hb->last_step = step, hb->last_step_s = step_s;
    w_end();
}

/* The counter of transfers with (peer, tag, direction), made on first use. */
static int64_t *p2p_counter(int peer, int tag, int recv)
{
    for (int i = 0; i < hb->np2p; i++)
        if (hb->p2p[i].peer == peer && hb->p2p[i].tag == tag && hb->p2p[i].recv == recv)
            return &hb->p2p[i].n;
    if (hb->np2p == HB_MAX_P2P)
        return NULL;
    hb->p2p[hb->np2p] = (hb_p2p_t){peer, (int8_t)tag, (int8_t)recv, 0};
    return &hb->p2p[hb->np2p++].n;
}

void health_comm_enter(int kind, int grp, int peer, int tag)
{
    if (!hb)
        return;
    w_begin();
    int64_t *cnt = kind == HB_COLL ? &hb->coll[grp] : p2p_counter(peer, tag, kind == HB_RECV);
    int64_t n = cnt ? ++*cnt : -1;
    if (hb->npending < HB_MAX_PENDING)
        hb->pending[hb->npending++] = (hb_pending_t){(int8_t)kind, (int8_t)grp, (int8_t)tag, peer, n};
    w_end();
}

void health_comm_leave(void)
{
    if (!hb)
        return;
    w_begin();
    hb->npending = 0;
    w_end();
}

/* ---- the reporting communicator ------------------------------------------ */

typedef struct {
    comm_t *inner;
    int grouping;
    int *world_of[GRP_COUNT]; /* group rank -> world rank */
} wrap_t;

#define INNER(c) (((wrap_t *)(c)->impl)->inner)

static int w_allreduce(comm_t *c, int grp, void *buf, long count, int dt, int stream)
{
    health_comm_enter(HB_COLL, grp, -1, 0);
    int rc = INNER(c)->op->allreduce(INNER(c), grp, buf, count, dt, stream);
    health_comm_leave();
    return rc;
}

static int w_allgather(comm_t *c, int grp, void *buf, long count, int dt, int stream)
{
    health_comm_enter(HB_COLL, grp, -1, 0);
    int rc = INNER(c)->op->allgather(INNER(c), grp, buf, count, dt, stream);
    health_comm_leave();
    return rc;
}

static int w_reduce_scatter(comm_t *c, int grp, void *out, const void *in, long count, int dt, int stream)
{
    health_comm_enter(HB_COLL, grp, -1, 0);
    int rc = INNER(c)->op->reduce_scatter(INNER(c), grp, out, in, count, dt, stream);
    health_comm_leave();
    return rc;
}

static int w_alltoall(comm_t *c, int grp, void *out, const void *in, long count, int dt, int stream)
{
    health_comm_enter(HB_COLL, grp, -1, 0);
    int rc = INNER(c)->op->alltoall(INNER(c), grp, out, in, count, dt, stream);
    health_comm_leave();
    return rc;
}

static int w_alltoallv(comm_t *c, int grp, void *out, const long *rcount, const void *in, const long *scount,
                       int dt, int stream)
{
    health_comm_enter(HB_COLL, grp, -1, 0);
    int rc = INNER(c)->op->alltoallv(INNER(c), grp, out, rcount, in, scount, dt, stream);
    health_comm_leave();
    return rc;
}

/* A transfer: pending until it returns, or until its batch ends. */
static int w_p2p(comm_t *c, int send, int grp, int peer, int tag, void *buf, long count, int dt, int stream)
{
    wrap_t *w = c->impl;
    health_comm_enter(send ? HB_SEND : HB_RECV, grp, w->world_of[grp] ? w->world_of[grp][peer] : peer, tag);
    int rc = send ? INNER(c)->op->send(INNER(c), grp, peer, tag, buf, count, dt, stream)
                  : INNER(c)->op->recv(INNER(c), grp, peer, tag, buf, count, dt, stream);
    if (!w->grouping)
        health_comm_leave();
    return rc;
}

static int w_send(comm_t *c, int grp, int peer, int tag, const void *buf, long count, int dt, int stream)
{
    return w_p2p(c, 1, grp, peer, tag, (void *)buf, count, dt, stream);
}

static int w_recv(comm_t *c, int grp, int peer, int tag, void *buf, long count, int dt, int stream)
{
    return w_p2p(c, 0, grp, peer, tag, buf, count, dt, stream);
}

static int w_group_begin(comm_t *c)
{
    ((wrap_t *)c->impl)->grouping = 1;
    return INNER(c)->op->group_begin(INNER(c));
}

static int w_group_end(comm_t *c)
{
    int rc = INNER(c)->op->group_end(INNER(c));
    ((wrap_t *)c->impl)->grouping = 0;
    health_comm_leave();
    return rc;
}

static void w_destroy(comm_t *c)
{
    wrap_t *w = c->impl;
    w->inner->op->destroy(w->inner);
    for (int g = 0; g < GRP_COUNT; g++)
        free(w->world_of[g]);
    free(w);
    free(c);
}

static const comm_ops_t wrap_ops = {w_allreduce, w_allgather, w_reduce_scatter, w_alltoall, w_alltoallv, w_send, w_recv,
                                    w_group_begin, w_group_end, w_destroy};

comm_t *health_wrap_comm(comm_t *inner)
{
    comm_t *c = malloc(sizeof *c);
    wrap_t *w = calloc(1, sizeof *w);
    if (!c || !w) {
        free(c), free(w);
        return NULL;
    }
    *c = *inner;
    c->op = &wrap_ops, c->impl = w, w->inner = inner;
    MPI_Group world;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    for (int g = 0; g < GRP_COUNT; g++) {
        if (inner->mpi[g] == MPI_COMM_NULL || !inner->size[g] || !(w->world_of[g] = malloc(sizeof(int) * inner->size[g])))
            continue;
        int *mine = malloc(sizeof(int) * inner->size[g]);
        MPI_Group gg;
        MPI_Comm_group(inner->mpi[g], &gg);
        for (int i = 0; mine && i < inner->size[g]; i++)
            mine[i] = i;
        if (mine)
            MPI_Group_translate_ranks(gg, inner->size[g], mine, world, w->world_of[g]);
        MPI_Group_free(&gg);
        free(mine);
    }
    MPI_Group_free(&world);
    return c;
}

/* ---- reading ------------------------------------------------------------- */

/* Why path's record cannot be read: another megasim's format (its magic,
 * "MSHB" and four digits, names it; the record's size changes with it), or
 * not a heartbeat file at all (what: its size or its magic). -1. */
static int not_a_record(const char *path, const char *magic, const char *what, char *err, int errlen)
{
    int other = !memcmp(magic, HB_MAGIC, 4);
    for (int i = 4; i < 8; i++)
        other = other && magic[i] >= '0' && magic[i] <= '9';
    if (other)
        snprintf(err, errlen, "%s: a heartbeat file of format %.8s, written by another megasim version (this one "
                 "reads %s)", path, magic, HB_MAGIC);
    else
        snprintf(err, errlen, "%s: not a megasim heartbeat file (its %s)", path, what);
    return -1;
}

int health_read(const char *path, hb_record_t *out, char *err, int errlen)
{
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) || st.st_size != (off_t)sizeof *out) {
        char magic[8] = "";
        if (pread(fd, magic, sizeof magic, 0) != (ssize_t)sizeof magic)
            memset(magic, 0, sizeof magic);
        close(fd);
        return not_a_record(path, magic, "size", err, errlen);
    }
    for (int tries = 0; tries < 1000; tries++) {
        uint64_t s0, s1;
        if (pread(fd, out, sizeof *out, 0) != (ssize_t)sizeof *out)
            break;
        s0 = out->seq;
        if (pread(fd, &s1, sizeof s1, offsetof(hb_record_t, seq)) != (ssize_t)sizeof s1)
            break;
        if (!(s0 & 1) && s0 == s1) {
            close(fd);
            if (memcmp(out->magic, HB_MAGIC, 8))
                return not_a_record(path, out->magic, "magic", err, errlen);
            /* a damaged or crafted file: its strings end inside it */
            out->host[sizeof out->host - 1] = out->error[sizeof out->error - 1] = 0;
            return 0;
        }
        usleep(1000);
    }
    close(fd);
    snprintf(err, errlen, "%s: the record kept changing or could not be read", path);
    return -1;
}

int health_read_world(const char *dir, hb_record_t *rec, int max, int *world, char *err, int errlen)
{
    char path[1200];
    health_path(dir, 0, path, sizeof path);
    if (health_read(path, &rec[0], err, errlen))
        return -1;
    if (rec[0].world < 1 || rec[0].world > max) {
        snprintf(err, errlen, "%s: world size %d; allowed 1 to %d", path, rec[0].world, max);
        return -1;
    }
    for (int r = 1; r < rec[0].world; r++) {
        health_path(dir, r, path, sizeof path);
        if (health_read(path, &rec[r], err, errlen))
            return -1;
        if (rec[r].world != rec[0].world || rec[r].rank != r) {
            snprintf(err, errlen, "%s: not rank %d of a world of %d", path, r, rec[0].world);
            return -1;
        }
    }
    *world = rec[0].world;
    return 0;
}

/* ---- injected faults ------------------------------------------------------ */

static inject_t armed[INJ_MAX];
static int narmed;
static char once_dir[1024];
static const char *const inj_names[] = {"crash", "hang", "slow", "nan", "ckpt", "badhost", "error"};

int inject_parse(const char *text, int world, inject_t *list, int *n, char *err, int errlen)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", text);
    *n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char kind[16] = "";
        double a = -1, b = -1, c = 0;
        char tail;
        int got = sscanf(t, "%15[a-z]:%lf:%lf:%lf%c", kind, &a, &b, &c, &tail);
        int k = -1;
        for (int i = 0; i < (int)(sizeof inj_names / sizeof *inj_names); i++)
            if (!strcmp(kind, inj_names[i]))
                k = i;
        int want = k == INJ_HANG || k == INJ_ERROR ? 4 : 3;
        if (k < 0 || got < 3 || got > want || *n == INJ_MAX) {
            snprintf(err, errlen, "--inject-fault '%s': expected crash:RANK:STEP, hang:RANK:STEP[:OP], "
                     "slow:RANK:FACTOR, nan:RANK:STEP, ckpt:RANK:STEP, badhost:RANK:STEP or "
                     "error:RANK:STEP[:OP] (at most %d, comma-separated)", t, INJ_MAX);
            return -1;
        }
        if (a != (int)a || a < 0 || a >= world) {
            snprintf(err, errlen, "--inject-fault '%s': rank %g is outside the world; allowed 0 to %d", t, a,
                     world - 1);
            return -1;
        }
        if (k == INJ_SLOW ? !(b >= 1 && b <= 1000) : (b != (int)b || b < 1 || b > 1e9 || c != (int)c || c < 0)) {
            snprintf(err, errlen, "--inject-fault '%s': %s", t, k == INJ_SLOW ? "the factor must be 1 to 1000"
                                                                                 : "the step must be 1 or more "
                                                                                   "(the op index 0 or more)");
            return -1;
        }
        list[(*n)++] = (inject_t){k, (int)a, k == INJ_SLOW ? 0 : (int)b, (int)c, k == INJ_SLOW ? b : 1};
    }
    return 0;
}

void inject_arm(const inject_t *list, int n, int rank, const char *dir, int self_check)
{
    narmed = 0;
    for (int i = 0; i < n; i++)
        if (list[i].rank == rank && (!self_check || list[i].kind == INJ_BADHOST))
            armed[narmed++] = list[i];
    snprintf(once_dir, sizeof once_dir, "%s", dir ? dir : "");
}

/* Fault f's marker file, DIR/injected-WHAT-rankR-stepS. */
static void marker_path(const char *what, const inject_t *f, char *path, size_t n)
{
    snprintf(path, n, "%s/injected-%s-rank%d-step%d", once_dir, what, f->rank, f->step);
}

/* Makes the marker atomically: 1 the first time (or always without a run
 * directory), 0 once it is there. */
static int mark_once(const char *what, const inject_t *f)
{
    if (!once_dir[0])
        return 1;
    char path[1200];
    marker_path(what, f, path, sizeof path);
    int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0666);
    if (fd < 0)
        return 0;
    close(fd);
    return 1;
}

static int marked(const char *what, const inject_t *f)
{
    char path[1200];
    marker_path(what, f, path, sizeof path);
    return once_dir[0] && access(path, F_OK) == 0;
}

/* Whether fault f may fire: the first time in this run directory. */
static int fire_once(const inject_t *f) { return mark_once(inj_names[f->kind], f); }

/* Fires fault f: says so, records it as the rank's error, and kills the
 * rank (SIGKILL: nothing of it runs on) or, for a hang, stops it for good. */
static void fire(const inject_t *f, const char *where)
{
    char msg[160];
    snprintf(msg, sizeof msg, "injected %s at step %d, %s", inj_names[f->kind], f->step, where);
    fprintf(stderr, "megasim run: rank %d: %s\n", f->rank, msg);
    if (f->kind != INJ_HANG) {
        health_error(msg);
        raise(SIGKILL);
    }
    for (;;) /* a hang: alive (the liveness beat goes on), no progress */
        pause();
}

int inject_at_op(int step, int op)
{
    for (int i = 0; i < narmed; i++) {
        inject_t *f = &armed[i];
        int at_start = f->kind == INJ_CRASH || f->kind == INJ_BADHOST;
        if (f->step != step || (at_start ? op != 0 : (f->kind != INJ_HANG && f->kind != INJ_ERROR) || op != f->op))
            continue;
        if (!fire_once(f))
            continue;
        if (f->kind == INJ_ERROR) { /* the op fails on this rank alone, through the usual error path */
            fprintf(stderr, "megasim run: rank %d: injected error at step %d, op %d\n", f->rank, step, op);
            return -1;
        }
        char where[32];
        snprintf(where, sizeof where, "op %d", op);
        fire(f, where);
    }
    return 0;
}

void inject_in_ckpt_write(int step)
{
    for (int i = 0; i < narmed; i++)
        if (armed[i].kind == INJ_CKPT && armed[i].step == step && fire_once(&armed[i]))
            fire(&armed[i], "while writing its checkpoint (stage two)");
}

double inject_slow_extra(void)
{
    double extra = 0;
    for (int i = 0; i < narmed; i++)
        if (armed[i].kind == INJ_SLOW)
            extra += armed[i].factor - 1;
    return extra;
}

void inject_self_check(void)
{
    for (int i = 0; i < narmed; i++)
        if (armed[i].kind == INJ_BADHOST && marked(inj_names[INJ_BADHOST], &armed[i]) &&
            mark_once("badhost-checked", &armed[i])) {
            const char *msg = "self-check failed on this rank's host (injected badhost)";
            fprintf(stderr, "megasim run: rank %d: %s\n", armed[i].rank, msg);
            health_error(msg);
            health_close(HB_FAILED);
            fflush(stdout);
            _exit(1);
        }
}

int inject_nan_now(int step)
{
    for (int i = 0; i < narmed; i++)
        if (armed[i].kind == INJ_NAN && armed[i].step == step && fire_once(&armed[i]))
            return 1;
    return 0;
}
