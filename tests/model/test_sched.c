/* test_sched: the per-rank op programs (model/sched.c), the spine both
 * executors play. Megatron-LM's order of chunks and micro-batches and its
 * warm-up counts, worked out by hand from schedules.py
 * (forward_backward_pipelining_with_interleaving, get_model_chunk_id) and
 * Narayanan et al. 2021, Figure 4; every program of a grid of plans is
 * complete and its sends meet their receives byte for byte; the verifier
 * rejects broken programs; the bytes of DP and embedding collectives
 * follow the job's datatypes; and the decoupled schedule leaves nothing
 * blocking on the compute stream. */
#include "model/sched.h"

#include "model/workload.h"
#include "../check.h"

#include <stdio.h>
#include <string.h>

/* A finalized job from flags ("" separated by spaces); -1 on a bad setup. */
static int make(job_t *j, const char *args)
{
    char err[OPT_ERR_LEN], buf[1024], *argv[64];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", args);
    for (char *t = strtok(buf, " "); t && argc < 64; t = strtok(NULL, " "))
        argv[argc++] = t;
    if (job_parse(j, argc, argv, NULL, NULL, err) || job_finalize(j, 8, err)) {
        check_true("job setup (a case that cannot be set up fails)", 0, err);
        printf("     arguments: %s\n", args);
        return -1;
    }
    return 0;
}

#define SMALL "--num-layers 16 --hidden-size 1024 --num-attention-heads 16 --tensor-model-parallel-size 1 "

/* Megatron's interleaved order for p = 4, v = 2, m = 8 (schedules.py):
 * forward k runs chunk (k mod pv) / p, micro-batch (k / pv) p + k mod p;
 * the backward runs the chunks in reverse. */
static void order(void)
{
    job_t j;
    if (make(&j, SMALL "--pipeline-model-parallel-size 4 --num-gpus 4 --global-batch-size 8 "
                       "--num-layers-per-virtual-pipeline-stage 2"))
        return;
    static const int fwd_chunk[16] = {0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1};
    static const int mb[16] = {0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 4, 5, 6, 7};
    int bad_c = 0, bad_b = 0, bad_m = 0;
    for (int k = 0; k < 16; k++) {
        bad_c += sched_chunk(&j, k, 1) != fwd_chunk[k];
        bad_b += sched_chunk(&j, k, 0) != 1 - fwd_chunk[k];
        bad_m += sched_mb(&j, k) != mb[k];
    }
    check_eq("interleaved forward chunks off Megatron's order", 0, bad_c, "get_model_chunk_id, p 4 v 2");
    check_eq("interleaved backward chunks off the reverse order", 0, bad_b, "v - 1 - forward chunk");
    check_eq("interleaved micro-batches off Megatron's order", 0, bad_m, "(k / pv) p + k mod p");
}

/* Warm-up forwards per stage. 1F1B: p - r - 1 (at most m). Interleaved:
 * (p - r - 1) 2 + (v - 1) p (at most m v; all when m == p). GPipe: all. */
static void warmup(void)
{
    job_t j;
    if (make(&j, SMALL "--pipeline-model-parallel-size 4 --num-gpus 4 --global-batch-size 8 "
                       "--num-layers-per-virtual-pipeline-stage 0"))
        return;
    check_eq("1F1B warm-up, stage 0 of 4", 3, sched_warmup(&j, 0), "p - r - 1");
    check_eq("1F1B warm-up, stage 3 of 4", 0, sched_warmup(&j, 3), "p - r - 1");
    if (make(&j, SMALL "--pipeline-model-parallel-size 4 --num-gpus 4 --global-batch-size 8 "
                       "--num-layers-per-virtual-pipeline-stage 2"))
        return;
    check_eq("interleaved warm-up, stage 0 (p 4 v 2 m 8)", 10, sched_warmup(&j, 0), "(p - r - 1) 2 + (v - 1) p");
    check_eq("interleaved warm-up, stage 3 (p 4 v 2 m 8)", 4, sched_warmup(&j, 3), "(p - r - 1) 2 + (v - 1) p");
    if (make(&j, SMALL "--pipeline-model-parallel-size 4 --num-gpus 4 --global-batch-size 4 "
                       "--num-layers-per-virtual-pipeline-stage 2"))
        return;
    check_eq("interleaved warm-up with m == p: every step", 8, sched_warmup(&j, 3), "Megatron: all warm-up");
    if (make(&j, SMALL "--pipeline-model-parallel-size 4 --num-gpus 4 --global-batch-size 8 "
                       "--num-layers-per-virtual-pipeline-stage 0 --pipeline-schedule gpipe"))
        return;
    check_eq("GPipe warm-up: every forward", 8, sched_warmup(&j, 1), "all forwards, then all backwards");
}

/* What one stage's program holds. */
typedef struct {
    long ops, fwd, bwd, xfer_on_compute, emb_sync;
    double emb_bytes, reduce_bytes, gather_bytes;
} tally_t;

static void tally(const job_t *j, int stage, tally_t *t)
{
    sched_iter_t it;
    sched_op_t o;
    memset(t, 0, sizeof *t);
    sched_iter_init(&it, j, stage);
    while (sched_next(&it, &o)) {
        t->ops++;
        t->fwd += o.kind == SOP_FWD, t->bwd += o.kind == SOP_BWD;
        t->xfer_on_compute += o.kind == SOP_XFER && o.stream == STREAM_COMPUTE;
        if (o.kind == SOP_EMB_SYNC)
            t->emb_sync++, t->emb_bytes += o.bytes;
        if (o.kind == SOP_DP_REDUCE)
            t->reduce_bytes += o.bytes * (o.parts > 1 ? o.parts : 1);
        if (o.kind == SOP_DP_GATHER)
            t->gather_bytes += o.bytes * (o.parts > 1 ? o.parts : 1);
    }
}

/* The i-th send from stage a to b in one direction has the bytes of the
 * i-th receive at b from a: the whole pairing rule, checked directly. */
#define MAXX 4096
typedef struct {
    int n[2][2];          /* [send][dir] */
    double bytes[2][2][MAXX];
} xfers_t;

static void collect(const job_t *j, int stage, int peer, xfers_t *x)
{
    sched_iter_t it;
    sched_op_t o;
    memset(x, 0, sizeof *x);
    sched_iter_init(&it, j, stage);
    while (sched_next(&it, &o))
        for (int i = 0; i < o.nx; i++) {
            const sched_xfer_t *t = &o.x[i];
            int *n = &x->n[t->send][t->dir];
            if (t->peer == peer && *n < MAXX && t->index == *n)
                x->bytes[t->send][t->dir][(*n)++] = o.bytes;
            else if (t->peer == peer)
                x->n[t->send][t->dir] = -1000000; /* out of order or too many: fails below */
        }
}

static int pairs_match(const job_t *j, int a, int b)
{
    static xfers_t xa, xb;
    collect(j, a, b, &xa);
    collect(j, b, a, &xb);
    for (int d = 0; d < 2; d++) {
        if (xa.n[1][d] != xb.n[0][d] || xa.n[0][d] != xb.n[1][d] || xa.n[1][d] < 0 || xa.n[0][d] < 0)
            return 0;
        for (int i = 0; i < xa.n[1][d]; i++)
            if (xa.bytes[1][d][i] != xb.bytes[0][d][i])
                return 0;
    }
    return 1;
}

/* A grid of plans: every stage runs m v forwards and backwards, every
 * program passes the verifier, and every neighbour pair's transfers pair
 * up in order with equal bytes. */
static void grid(void)
{
    static const char *const plans[] = {
        "--pipeline-model-parallel-size 1 --num-gpus 2 --global-batch-size 8 --num-layers-per-virtual-pipeline-stage 0",
        "--pipeline-model-parallel-size 2 --num-gpus 2 --global-batch-size 8 --num-layers-per-virtual-pipeline-stage 0",
        "--pipeline-model-parallel-size 4 --num-gpus 8 --global-batch-size 16 --num-layers-per-virtual-pipeline-stage 0",
        "--pipeline-model-parallel-size 4 --num-gpus 4 --global-batch-size 8 --num-layers-per-virtual-pipeline-stage 2",
        "--pipeline-model-parallel-size 4 --num-gpus 4 --global-batch-size 4 --num-layers-per-virtual-pipeline-stage 1",
        "--pipeline-model-parallel-size 2 --num-gpus 2 --global-batch-size 2 --num-layers-per-virtual-pipeline-stage 0",
        "--pipeline-model-parallel-size 4 --num-gpus 4 --global-batch-size 8 --num-layers-per-virtual-pipeline-stage 0 "
        "--pipeline-schedule gpipe",
    };
    static const char *const switches[] = {"--preset megatron-lm", "--preset megascale",
                                           "--preset megatron-lm --pp-comm-overlap",
                                           "--preset megatron-lm --overlap-grad-reduce --overlap-param-gather"};
    int cases = 0, bad_count = 0, bad_verify = 0, bad_pairs = 0, bad_xch = 0;
    char first_bad[256] = "none";
    for (size_t p = 0; p < sizeof plans / sizeof plans[0]; p++)
        for (size_t s = 0; s < sizeof switches / sizeof switches[0]; s++) {
            char args[1024], err[OPT_ERR_LEN];
            job_t j;
            snprintf(args, sizeof args, "%s " SMALL "%s", switches[s], plans[p]);
            if (make(&j, args))
                continue;
            cases++;
            int ok = sched_verify(&j, err, sizeof err) == 0;
            bad_verify += !ok;
            for (int r = 0; r < j.pp; r++) {
                tally_t t;
                tally(&j, r, &t);
                long mv = (long)j.num_microbatches * j.vpp;
                if (t.fwd != mv || t.bwd != mv)
                    bad_count++, ok = 0;
                if (j.pp > 1 && !pairs_match(&j, r, (r + 1) % j.pp))
                    bad_pairs++, ok = 0;
                if (sched_blocking_exchanges(&j, r) != sched_blocking_exchanges_walked(&j, r))
                    bad_xch++, ok = 0;
            }
            if (!ok && !strcmp(first_bad, "none"))
                snprintf(first_bad, sizeof first_bad, "%.250s", args);
        }
    check_eq("plans set up (7 plans x 4 switch sets)", 28, cases, "the grid above");
    check_eq("stages whose forwards or backwards are not m v", 0, bad_count, "one per chunk and micro-batch");
    check_eq("programs the verifier rejects", 0, bad_verify, first_bad);
    check_eq("neighbour pairs whose transfers do not pair up", 0, bad_pairs, "i-th send meets i-th receive");
    check_eq("stages whose counted exchanges differ from the walked", 0, bad_xch,
             "sched_blocking_exchanges (O(p v)) vs the program, op by op");
}

/* The counted exchanges against the walked program where the count
 * takes its shortcut: many micro-batches, so each phase is longer than
 * three periods of the chunk order (p v steps), including batches that are
 * not a whole number of periods. */
static void exchanges_at_scale(void)
{
    static const char *const plans[] = {
        "--num-layers 16 --pipeline-model-parallel-size 4 --num-gpus 4 --global-batch-size 200 "
        "--num-layers-per-virtual-pipeline-stage 2",
        "--num-layers 48 --pipeline-model-parallel-size 8 --num-gpus 8 --global-batch-size 296 "
        "--num-layers-per-virtual-pipeline-stage 2",
        "--num-layers 16 --pipeline-model-parallel-size 4 --num-gpus 4 --global-batch-size 250 "
        "--num-layers-per-virtual-pipeline-stage 0",
        "--num-layers 16 --pipeline-model-parallel-size 4 --num-gpus 4 --global-batch-size 130 "
        "--num-layers-per-virtual-pipeline-stage 0 --pipeline-schedule gpipe",
        "--num-layers 24 --pipeline-model-parallel-size 3 --num-gpus 3 --global-batch-size 99 "
        "--num-layers-per-virtual-pipeline-stage 1",
    };
    int cases = 0, bad = 0;
    char first[600] = "none";
    for (size_t i = 0; i < sizeof plans / sizeof plans[0]; i++) {
        char args[1024];
        job_t j;
        snprintf(args, sizeof args, "--preset megatron-lm --hidden-size 1024 --num-attention-heads 16 "
                 "--tensor-model-parallel-size 1 %s", plans[i]);
        if (make(&j, args))
            continue;
        for (int r = 0; r < j.pp; r++, cases++) {
            long fast = sched_blocking_exchanges(&j, r), walked = sched_blocking_exchanges_walked(&j, r);
            if (fast != walked && bad++ == 0)
                snprintf(first, sizeof first, "stage %d: %ld vs %ld walked; %.500s", r, fast, walked, plans[i]);
        }
    }
    check_eq("stages checked at scale (5 plans)", 4 + 8 + 4 + 4 + 3, cases, "every stage of each plan");
    check_eq("... whose counted exchanges differ from the walked", 0, bad, first);
}

/* Broken programs from sched_verify_with's hook. */
typedef struct {
    int what;  /* 0 drop stage 1's third forward send, 1 drop stage 2's last forward, 2 drop every bump */
    int seen;
} breaker_t;

static int broken(void *ctx, sched_iter_t *it, sched_op_t *op)
{
    breaker_t *b = ctx;
    while (sched_next(it, op)) {
        if (b->what == 0 && it->stage == 1)
            for (int i = 0; i < op->nx; i++)
                if (op->x[i].send && op->x[i].dir == DIR_FWD && ++b->seen == 3) {
                    op->x[i] = op->x[--op->nx];
                    break;
                }
        if (b->what == 1 && it->stage == 2 && op->kind == SOP_FWD && ++b->seen == 8)
            continue;
        if (b->what == 2)
            op->bump = op->bump_part = CNT_NONE;
        return 1;
    }
    return 0;
}

static void verifier(void)
{
    job_t j;
    char err[OPT_ERR_LEN] = "";
    if (make(&j, "--preset megascale " SMALL "--pipeline-model-parallel-size 4 --num-gpus 4 "
                 "--global-batch-size 8 --num-layers-per-virtual-pipeline-stage 2"))
        return;
    static const char *const wants[] = {"disagree", "runs 15 forwards", "waits for counter"};
    static const char *const names[] = {"a dropped send is found", "a dropped forward is found",
                                        "a wait nobody bumps is found"};
    for (int w = 0; w < 3; w++) {
        breaker_t b = {w, 0};
        err[0] = 0;
        int rc = sched_verify_with(&j, broken, &b, err, sizeof err);
        check_true(names[w], rc != 0 && strstr(err, wants[w]), err[0] ? err : "(accepted)");
    }
}

/* The bytes each collective moves follow the job's datatypes (model/job.h):
 * weights gathered at job_weight_bytes, gradients reduced and the tied
 * embedding synced at job_grad_bytes, for the four combinations. With
 * neither bf16 nor fp32 accumulation the gradients are fp32 like the
 * weights: 4 bytes (the embedding sync used 2 before). */
static void datatypes(void)
{
    static const struct {
        const char *flags;
        double wb, gb;
    } dt[] = {{"--bf16 --accumulate-allreduce-grads-in-fp32", 2, 4},
              {"--bf16 --accumulate-allreduce-grads-in-fp32=false", 2, 2},
              {"--bf16=false --accumulate-allreduce-grads-in-fp32", 4, 4},
              {"--bf16=false --accumulate-allreduce-grads-in-fp32=false", 4, 4}};
    for (int i = 0; i < 4; i++) {
        char args[512], what[160];
        job_t j;
        snprintf(args, sizeof args, "--preset megascale %s " SMALL "--pipeline-model-parallel-size 2 --num-gpus 4 "
                 "--global-batch-size 8 --num-layers-per-virtual-pipeline-stage 0", dt[i].flags);
        if (make(&j, args))
            continue;
        check_eq("job_weight_bytes", (long long)dt[i].wb, (long long)job_weight_bytes(&j), dt[i].flags);
        check_eq("job_grad_bytes", (long long)dt[i].gb, (long long)job_grad_bytes(&j), dt[i].flags);
        tally_t t;
        tally(&j, 0, &t);
        double emb = (double)j.padded_vocab_size * j.hidden_size / j.tp;
        double params = workload_stage_params_local(&j, 0);
        snprintf(what, sizeof what, "embedding sync bytes (%s)", dt[i].flags);
        check_rel(what, emb * dt[i].gb, t.emb_bytes, 1e-12, "V h / t x gradient bytes, first stage");
        snprintf(what, sizeof what, "DP reduction bytes (%s)", dt[i].flags);
        check_rel(what, params * dt[i].gb, t.reduce_bytes, 1e-9, "stage params x gradient bytes");
        snprintf(what, sizeof what, "DP gather bytes (%s)", dt[i].flags);
        check_rel(what, params * dt[i].wb, t.gather_bytes, 1e-9, "stage params x weight bytes (ZeRO-2)");
    }
}

/* Megatron's blocking exchanges sit on the compute stream; MegaScale's
 * decoupled transfers do not, and the counts are what the closed form
 * charges (sched_blocking_exchanges), counted by hand below from
 * schedules.py's forward_backward_pipelining_without_interleaving, where a
 * call whose sends and receives are all skipped issues nothing. */
static void exchanges(void)
{
    job_t j;
    if (make(&j, "--preset megatron-lm " SMALL "--pipeline-model-parallel-size 4 --num-gpus 4 "
                 "--global-batch-size 8 --num-layers-per-virtual-pipeline-stage 0"))
        return;
    tally_t t0, t3;
    tally(&j, 0, &t0);
    tally(&j, 3, &t3);
    /* Stage 0 (W = 3 warm-up forwards, R = 5 steady steps): a send_forward
     * after each warm-up forward (its receives are skipped on the first
     * stage), a send_forward_recv_backward per steady step (the
     * send_backward after each backward is skipped), a recv_backward per
     * cool-down step: 3 + 5 + 3. */
    check_eq("blocking exchanges, 1F1B stage 0 of 4, m 8", 11, sched_blocking_exchanges(&j, 0),
             "schedules.py: 3 warm-up + 5 steady + 3 cool-down");
    check_eq("ops on the compute stream = the count the closed form uses", t0.xfer_on_compute,
             sched_blocking_exchanges(&j, 0), "sched_blocking_exchanges");
    /* Stage 3 (W = 0, R = 8): recv_forward before the first step, then per
     * steady step one send_backward_recv_forward (the last step's receive
     * skipped, its send kept); the last stage sends no forward: 1 + 8. */
    check_eq("blocking exchanges, 1F1B stage 3 of 4, m 8", 9, sched_blocking_exchanges(&j, 3),
             "schedules.py: 1 recv_forward + 8 send_backward_recv_forward");
    check_eq("ops counted by sched_program_ops", t3.ops, sched_program_ops(&j, 3), "the iterator, op by op");
    if (make(&j, "--preset megatron-lm --pp-comm-overlap " SMALL "--pipeline-model-parallel-size 4 --num-gpus 4 "
                 "--global-batch-size 8 --num-layers-per-virtual-pipeline-stage 0"))
        return;
    check_eq("blocking exchanges with decoupled transfers", 0, sched_blocking_exchanges(&j, 1),
             "MegaScale: sends and receives on their own streams");
}

/* The iterator is small and its text form is stable. */
static void format_and_state(void)
{
    sched_op_t o;
    memset(&o, 0, sizeof o);
    o.kind = SOP_FWD, o.stream = STREAM_COMPUTE, o.mb = 3, o.chunk = 1, o.parts = 1;
    o.wait[0] = CNT_RECV_FWD, o.wait_for[0] = 4, o.wait[1] = CNT_NONE, o.bump = CNT_FWD_DONE, o.bump_part = CNT_NONE;
    char buf[256];
    sched_format(&o, buf, sizeof buf);
    check_true("one op as text", !strcmp(buf, "compute fwd mb=3 chunk=1 wait=recv_fwd>=4 bump=fwd_done"), buf);
    check_true("iterator state under 2 KiB (O(1) per rank)", sizeof(sched_iter_t) < 2048, "sizeof(sched_iter_t)");
}

int main(void)
{
    order();
    warmup();
    grid();
    exchanges_at_scale();
    verifier();
    datatypes();
    exchanges();
    format_and_state();
    return check_done("model_sched");
}
