/* sched: per-rank op programs (see sched.h). The blocking variant follows
 * Megatron-LM's schedules.py (forward_backward_pipelining_with_interleaving
 * and _without_interleaving, 2023) call for call: which combined exchange
 * follows which compute, and which of its sends and receives are skipped.
 * The decoupled variant (MegaScale) keeps the same compute order and turns
 * each transfer into an asynchronous op, receives posted two ahead. */
#include "model/sched.h"

#include "model/layer.h"
#include "model/workload.h"

#include <stdio.h>
#include <string.h>

const char *const sched_stream_names[STREAM_COUNT] = {"compute", "dp", "pp_send", "pp_recv", "dp_grad"};

enum { PH_PROLOGUE, PH_WARMUP, PH_STEADY, PH_COOLDOWN, PH_EPILOGUE, PH_END };

static long pymod(long a, long b) { return ((a % b) + b) % b; }

int sched_chunk(const job_t *j, long k, int forward)
{
    int p = j->pp, v = j->vpp;
    int c = (int)(pymod(k, (long)p * v) / p);
    return forward ? c : v - 1 - c;
}

int sched_mb(const job_t *j, long k)
{
    int p = j->pp, v = j->vpp;
    return v == 1 ? (int)k : (int)((k / ((long)p * v)) * p + pymod(k, p));
}

static long total_steps(const job_t *j) { return (long)j->num_microbatches * j->vpp; }

long sched_warmup(const job_t *j, int r)
{
    long total = total_steps(j);
    if (j->pipeline_schedule == PIPE_GPIPE)
        return total;
    if (j->vpp == 1)
        return j->pp - r - 1 < j->num_microbatches ? j->pp - r - 1 : j->num_microbatches;
    if (j->num_microbatches == j->pp)
        return total; /* Megatron: "all warm-up micro-batches" */
    long w = (long)(j->pp - r - 1) * 2 + (long)(j->vpp - 1) * j->pp;
    return w < total ? w : total;
}

/* Which chunk-steps talk to neighbours (virtual stages wrap around). */
static int is_first(const sched_iter_t *it) { return it->stage == 0; }
static int is_last(const sched_iter_t *it) { return it->stage == it->job->pp - 1; }
static int fwd_sends(const sched_iter_t *it, int c) { return !(is_last(it) && c == it->job->vpp - 1); }
static int bwd_sends(const sched_iter_t *it, int c) { return !(is_first(it) && c == 0); }
static int fwd_needs_recv(const sched_iter_t *it, int c) { return !(is_first(it) && c == 0); }
static int bwd_needs_recv(const sched_iter_t *it, int c) { return !(is_last(it) && c == it->job->vpp - 1); }

static sched_op_t *emit(sched_iter_t *it, int kind, int stream)
{
    sched_op_t *o = &it->buf[it->nbuf++];
    memset(o, 0, sizeof *o);
    o->kind = kind, o->stream = stream, o->chunk = -1, o->mb = -1, o->parts = 1;
    o->wait[0] = o->wait[1] = o->bump = o->bump_part = CNT_NONE;
    return o;
}

static void add_xfer(sched_iter_t *it, sched_op_t *o, int send, int dir)
{
    int p = it->job->pp;
    int peer = (send == (dir == DIR_FWD)) ? (it->stage + 1) % p : (it->stage + p - 1) % p;
    long *n = send ? &it->sent[dir] : &it->recvd[dir];
    o->x[o->nx++] = (sched_xfer_t){(uint8_t)send, (uint8_t)dir, (int16_t)peer, (int32_t)(*n)++};
}

/* Megatron's combined, blocking exchange on the compute stream. */
static void exchange(sched_iter_t *it, int send_f, int recv_f, int send_b, int recv_b)
{
    if (it->job->pp == 1 || it->job->pp_comm_overlap || !(send_f || recv_f || send_b || recv_b))
        return;
    sched_op_t *o = emit(it, SOP_XFER, STREAM_COMPUTE);
    o->bytes = layer_p2p_bytes(it->job);
    if (send_f)
        add_xfer(it, o, 1, DIR_FWD);
    if (recv_f)
        add_xfer(it, o, 0, DIR_FWD);
    if (send_b)
        add_xfer(it, o, 1, DIR_BWD);
    if (recv_b)
        add_xfer(it, o, 0, DIR_BWD);
}

/* Receives a stage makes in a whole iteration, per direction. */
static long recvs_total(const sched_iter_t *it, int dir)
{
    const job_t *j = it->job;
    long mv = total_steps(j), m = j->num_microbatches;
    return j->pp == 1 ? 0 : (dir == DIR_FWD ? is_first(it) : is_last(it)) ? mv - m : mv;
}

/* Decoupled: an asynchronous transfer on its own stream. */
static void async_xfer(sched_iter_t *it, int send, int dir, int wait, long wait_for)
{
    sched_op_t *o = emit(it, SOP_XFER, send ? STREAM_PP_SEND : STREAM_PP_RECV);
    o->bytes = layer_p2p_bytes(it->job);
    o->wait[0] = wait, o->wait_for[0] = wait_for;
    o->bump = send ? CNT_NONE : dir == DIR_FWD ? CNT_RECV_FWD : CNT_RECV_BWD;
    add_xfer(it, o, send, dir);
}

static void post_recvs(sched_iter_t *it)
{
    for (int d = DIR_FWD; d <= DIR_BWD; d++) {
        long consumed = d == DIR_FWD ? it->fwd_recvs : it->bwd_recvs;
        while (it->recvd[d] < recvs_total(it, d) && it->recvd[d] < consumed + 2)
            async_xfer(it, 0, d, CNT_NONE, 0);
    }
}

static int dp_pieces(const job_t *j) { return workload_dp_pieces(j, workload_stage_params_local(j, 0)); }

/* A DP collective: one chunk's or bucket's (piece >= 0), all pieces one
 * after another (piece = -1, parts = pieces), or everything at once
 * (piece = -1, parts = 1). */
static void dp_op(sched_iter_t *it, int kind, int stream, int piece, int parts, int wait, long wait_for)
{
    const job_t *j = it->job;
    double P = workload_stage_params_local(j, it->stage), Pe = workload_stage_expert_params_local(j, it->stage);
    int pieces = piece < 0 && parts == 1 ? 1 : dp_pieces(j);
    double per = kind == SOP_DP_GATHER ? job_weight_bytes(j) : job_grad_bytes(j);
    sched_op_t *o = emit(it, kind, stream);
    o->chunk = piece, o->parts = parts, o->bytes = (P - Pe) / pieces * per, o->bytes_edp = Pe / pieces * per;
    o->wait[0] = wait, o->wait_for[0] = wait_for;
    if (sched_stream_dp(stream))
        o->bump_part = kind == SOP_DP_GATHER ? CNT_GATHER_DONE : CNT_REDUCE_DONE;
}

/* ZeRO-3, as FSDP runs it (PP 1, no chunks): only the shard of each
 * weight and gradient stays between uses, so every forward and every
 * backward gathers the stage's weights again, and every backward's
 * gradients are reduce-scattered into the shard. Pass r (forward k: 2k,
 * backward k: 2k + 1) runs in one part per DP piece.
 *   --overlap-param-gather: gather round r runs piece by piece on the DP
 *     stream, piece i once part i - 2 of pass r is done (one piece
 *     prefetched while the one before computes; piece 0 beside the last
 *     part of pass r - 1), and part i waits for piece i. Without it each
 *     round blocks the compute stream before its pass.
 *   --overlap-grad-reduce: backward k's reduction runs piece by piece on
 *     STREAM_DP_GRAD after each part, beside the gathers (FSDP's second
 *     stream); without it, on the compute stream after the pass.
 * The optimizer waits for every reduction. */
static int fsdp(const job_t *j) { return j->zero_stage >= 3; }

/* Parts done (CNT_PART_DONE) before pass r: every pass's when the gathers
 * are prefetched, only the backwards' when just the reductions overlap. */
static long fsdp_parts_before(const job_t *j, long r)
{
    long n = dp_pieces(j);
    return j->overlap_param_gather ? r * n : j->overlap_grad_reduce ? r / 2 * n : 0;
}

static void fsdp_compute(sched_iter_t *it, int fwd, long k)
{
    const job_t *j = it->job;
    int n = dp_pieces(j);
    long r = 2 * k + !fwd, before = fsdp_parts_before(j, r);
    if (j->overlap_param_gather)
        dp_op(it, SOP_DP_GATHER, STREAM_DP, -1, n, CNT_PART_DONE, before - 1);
    else
        dp_op(it, SOP_DP_GATHER, STREAM_COMPUTE, -1, 1, CNT_NONE, 0);
    sched_op_t *o = emit(it, fwd ? SOP_FWD : SOP_BWD, STREAM_COMPUTE);
    o->chunk = 0, o->mb = (int)k;
    o->bump = fwd ? CNT_FWD_DONE : CNT_BWD_DONE;
    if (j->overlap_param_gather || (!fwd && j->overlap_grad_reduce))
        o->parts = n, o->bump_part = CNT_PART_DONE;
    if (j->overlap_param_gather)
        o->wait[0] = CNT_GATHER_DONE, o->wait_for[0] = (int32_t)(r * n + 1);
    if (fwd)
        return;
    if (j->overlap_grad_reduce) { /* piece i of this micro-batch's gradients is final once part i is done */
        dp_op(it, SOP_DP_REDUCE, STREAM_DP_GRAD, -1, n, CNT_PART_DONE, before + 1);
    } else {
        dp_op(it, SOP_DP_REDUCE, STREAM_COMPUTE, -1, 1, CNT_NONE, 0);
    }
}

/* Forward or backward number k. Without chunks, the first forward and the
 * last backward run in one part per DP bucket when the weights are
 * gathered (gradients reduced) bucket by bucket beside them. */
static void compute(sched_iter_t *it, int fwd, long k)
{
    const job_t *j = it->job;
    if (fsdp(j)) {
        fsdp_compute(it, fwd, k);
        return;
    }
    int c = sched_chunk(j, k, fwd);
    int decoupled = j->pp_comm_overlap && j->pp > 1;
    int split_b = !fwd && j->vpp == 1 && j->overlap_grad_reduce && k == j->num_microbatches - 1;
    int split_f = fwd && j->vpp == 1 && j->zero_stage >= 1 && j->overlap_param_gather && k == 0;
    int needs = fwd ? fwd_needs_recv(it, c) : bwd_needs_recv(it, c);
    sched_op_t *o = emit(it, fwd ? SOP_FWD : SOP_BWD, STREAM_COMPUTE);
    o->chunk = c, o->mb = sched_mb(j, k), o->parts = split_b || split_f ? dp_pieces(j) : 1;
    o->bump = fwd ? CNT_FWD_DONE : CNT_BWD_DONE;
    o->bump_part = split_b ? CNT_PART_DONE : CNT_NONE;
    if (fwd && j->zero_stage >= 1 && j->overlap_param_gather)
        o->wait[0] = CNT_GATHER_DONE, o->wait_for[0] = j->vpp > 1 ? c + 1 : 1;
    if (decoupled && needs) {
        long idx = fwd ? it->fwd_recvs++ : it->bwd_recvs++;
        o->wait[1] = fwd ? CNT_RECV_FWD : CNT_RECV_BWD, o->wait_for[1] = idx + 1;
    }
    if (split_b) /* bucket i's gradients are final once part i is done */
        dp_op(it, SOP_DP_REDUCE, STREAM_DP, -1, o->parts, CNT_PART_DONE, 1);
    else if (!fwd && j->vpp > 1 && j->overlap_grad_reduce && sched_mb(j, k) == j->num_microbatches - 1)
        dp_op(it, SOP_DP_REDUCE, STREAM_DP, c, 1, CNT_BWD_DONE, k + 1); /* chunk c's last backward */
    if (decoupled) {
        if (fwd ? fwd_sends(it, c) : bwd_sends(it, c))
            async_xfer(it, 1, fwd ? DIR_FWD : DIR_BWD, fwd ? CNT_FWD_DONE : CNT_BWD_DONE, k + 1);
        post_recvs(it);
    }
}

static void prologue(sched_iter_t *it)
{
    const job_t *j = it->job;
    if (!j->async_data_loader)
        emit(it, SOP_HOST, STREAM_COMPUTE);
    int once = j->zero_stage >= 1 && !fsdp(j); /* ZeRO-3's gathers come with each pass */
    if (once && j->overlap_param_gather) /* prefetched, chunk by chunk */
        dp_op(it, SOP_DP_GATHER, STREAM_DP, -1, j->vpp > 1 ? j->vpp : dp_pieces(j), CNT_NONE, 0);
    else if (once)
        dp_op(it, SOP_DP_GATHER, STREAM_COMPUTE, -1, 1, CNT_NONE, 0);
    if (j->pp_comm_overlap)
        post_recvs(it);
    else if (j->vpp > 1 || j->pipeline_schedule == PIPE_GPIPE)
        exchange(it, 0, fwd_needs_recv(it, 0), 0, 0); /* recv_forward() before the loop */
}

static void epilogue(sched_iter_t *it)
{
    const job_t *j = it->job;
    if (fsdp(j)) { /* every backward reduced its own gradients */
        if (j->overlap_grad_reduce) {
            sched_op_t *o = emit(it, SOP_JOIN, STREAM_COMPUTE);
            o->wait[0] = CNT_REDUCE_DONE, o->wait_for[0] = (int32_t)((long)j->num_microbatches * dp_pieces(j));
        }
    } else if (!j->overlap_grad_reduce) {
        dp_op(it, SOP_DP_REDUCE, STREAM_COMPUTE, -1, 1, CNT_NONE, 0);
    } else { /* the optimizer needs every reduced piece */
        sched_op_t *o = emit(it, SOP_JOIN, STREAM_COMPUTE);
        o->wait[0] = CNT_REDUCE_DONE, o->wait_for[0] = j->vpp > 1 ? j->vpp : dp_pieces(j);
    }
    if (j->pp > 1 && !j->untie_embeddings && (is_first(it) || is_last(it))) {
        sched_op_t *o = emit(it, SOP_EMB_SYNC, STREAM_COMPUTE);
        o->bytes = (double)j->padded_vocab_size * j->hidden_size / j->tp * job_grad_bytes(j);
    }
    sched_op_t *o = emit(it, SOP_OPTIM, STREAM_COMPUTE);
    double P = workload_stage_params_local(j, it->stage), Pe = workload_stage_expert_params_local(j, it->stage);
    o->bytes = j->zero_stage >= 1 ? (P - Pe) / j->dp_cp + Pe / j->edp : P; /* the shard, the experts' over EDP */
}

/* Interleaved 1F1B (and GPipe): one step of Megatron's loop. */
static void step_interleaved(sched_iter_t *it)
{
    const job_t *j = it->job;
    long total = total_steps(j), W = sched_warmup(j, it->stage), R = total - W, k = it->k;
    int p = j->pp, v = j->vpp, gpipe = j->pipeline_schedule == PIPE_GPIPE;
    if (it->phase == PH_WARMUP) {
        compute(it, 1, k);
        int recv_prev = !(is_first(it) && sched_chunk(j, k + 1, 1) == 0) && k != total - 1;
        int send = fwd_sends(it, sched_chunk(j, k, 1));
        if (gpipe) /* plain sends and receives, no pairing */
            exchange(it, send, 0, 0, 0), exchange(it, 0, recv_prev, 0, 0);
        else if (k == W - 1 && R > 0)
            exchange(it, send, recv_prev, 0, !is_last(it));
        else
            exchange(it, send, recv_prev, 0, 0);
    } else if (it->phase == PH_STEADY) {
        long fk = k + W, bk = k;
        compute(it, 1, fk);
        compute(it, 0, bk);
        int send_f = fwd_sends(it, sched_chunk(j, fk, 1)), send_b = bwd_sends(it, sched_chunk(j, bk, 0));
        int recv_prev = is_first(it) ? sched_chunk(j, fk - (p - 1), 1) != v - 1 : 1;
        int recv_next = is_last(it) ? sched_chunk(j, bk - (p - 1), 0) != 0 : 1;
        if (k == R - 1)
            recv_prev = 0;
        exchange(it, send_f, recv_prev, send_b, recv_next);
    } else { /* cool-down: backward R + k (GPipe: every backward, R = 0) */
        long bk = R + k;
        if (k == 0 && R == 0) /* Megatron's recv_backward() when all steps were warm-up */
            exchange(it, 0, 0, 0, bwd_needs_recv(it, sched_chunk(j, 0, 0)));
        compute(it, 0, bk);
        int recv_next = !(is_last(it) && sched_chunk(j, bk + 1, 0) == v - 1) && bk != total - 1;
        exchange(it, 0, 0, bwd_sends(it, sched_chunk(j, bk, 0)), recv_next);
    }
}

/* Non-interleaved 1F1B: Megatron's forward_backward_pipelining_without_interleaving. */
static void step_1f1b(sched_iter_t *it)
{
    const job_t *j = it->job;
    long m = j->num_microbatches, W = sched_warmup(j, it->stage), R = m - W, k = it->k;
    int first = is_first(it), last = is_last(it);
    if (it->phase == PH_WARMUP) {
        exchange(it, 0, !first, 0, 0);
        compute(it, 1, k);
        exchange(it, !last, 0, 0, 0);
        if (k == W - 1 && R > 0)
            exchange(it, 0, !first, 0, 0);
    } else if (it->phase == PH_STEADY) {
        if (k == 0 && W == 0)
            exchange(it, 0, !first, 0, 0);
        compute(it, 1, W + k);
        exchange(it, !last, 0, 0, !last);
        compute(it, 0, k);
        exchange(it, 0, k < R - 1 && !first, !first, 0);
    } else {
        exchange(it, 0, 0, 0, !last);
        compute(it, 0, R + k);
        exchange(it, 0, 0, !first, 0);
    }
}

void sched_iter_init(sched_iter_t *it, const job_t *job, int stage)
{
    memset(it, 0, sizeof *it);
    it->job = job, it->stage = stage, it->phase = PH_PROLOGUE;
}

/* Moves to the next non-empty phase; fills buf with the next step's ops. */
static void fill(sched_iter_t *it)
{
    const job_t *j = it->job;
    long total = total_steps(j), W = sched_warmup(j, it->stage);
    int plain = j->vpp == 1 && j->pipeline_schedule != PIPE_GPIPE;
    long lens[PH_END] = {1, W, total - W, j->pipeline_schedule == PIPE_GPIPE ? total : W, 1};
    if (plain)
        lens[PH_STEADY] = j->num_microbatches - W, lens[PH_COOLDOWN] = W;
    it->nbuf = it->ibuf = 0;
    while (it->phase < PH_END && it->nbuf == 0) {
        if (it->k >= lens[it->phase]) {
            it->phase++, it->k = 0;
            continue;
        }
        if (it->phase == PH_PROLOGUE)
            prologue(it);
        else if (it->phase == PH_EPILOGUE)
            epilogue(it);
        else if (plain)
            step_1f1b(it);
        else
            step_interleaved(it);
        it->k++;
    }
}

int sched_next(sched_iter_t *it, sched_op_t *op)
{
    if (it->ibuf == it->nbuf)
        fill(it);
    if (it->ibuf == it->nbuf)
        return 0;
    *op = it->buf[it->ibuf++];
    return 1;
}

/* Ops of stage's program for which keep() holds (every op when NULL). */
static long count_ops(const job_t *j, int stage, int (*keep)(const sched_op_t *o))
{
    sched_iter_t it;
    sched_op_t o;
    long n = 0;
    sched_iter_init(&it, j, stage);
    while (sched_next(&it, &o))
        n += !keep || keep(&o);
    return n;
}

static int is_blocking_exchange(const sched_op_t *o) { return o->kind == SOP_XFER && o->stream == STREAM_COMPUTE; }

/* ---- blocking exchanges without walking the program ------------------ *
 * The closed form charges every blocking exchange of the first and last
 * stage; walking the program to count them cost seconds at a batch of
 * millions (reliability finding F11). The counts below mirror prologue(),
 * step_1f1b() and step_interleaved() call for call; test_sched checks them
 * against the walked program over a grid of plans. */

/* Whether exchange() issues a call with these sends and receives. */
static int issues(int send_f, int recv_f, int send_b, int recv_b) { return send_f || recv_f || send_b || recv_b; }

/* Calls step_interleaved() issues at step k of a phase (0 warm-up, 1
 * steady, 2 cool-down). */
static int interleaved_calls(const sched_iter_t *it, int phase, long k)
{
    const job_t *j = it->job;
    long total = total_steps(j), W = sched_warmup(j, it->stage), R = total - W;
    int p = j->pp, v = j->vpp, gpipe = j->pipeline_schedule == PIPE_GPIPE;
    if (phase == 0) {
        int recv_prev = !(is_first(it) && sched_chunk(j, k + 1, 1) == 0) && k != total - 1;
        int send = fwd_sends(it, sched_chunk(j, k, 1));
        if (gpipe)
            return send + recv_prev;
        return issues(send, recv_prev, 0, k == W - 1 && R > 0 && !is_last(it));
    }
    if (phase == 1) {
        long fk = k + W, bk = k;
        int recv_prev = k == R - 1 ? 0 : is_first(it) ? sched_chunk(j, fk - (p - 1), 1) != v - 1 : 1;
        int recv_next = is_last(it) ? sched_chunk(j, bk - (p - 1), 0) != 0 : 1;
        return issues(fwd_sends(it, sched_chunk(j, fk, 1)), recv_prev, bwd_sends(it, sched_chunk(j, bk, 0)), recv_next);
    }
    long bk = R + k;
    int first_recv = k == 0 && R == 0 && bwd_needs_recv(it, sched_chunk(j, 0, 0));
    int recv_next = !(is_last(it) && sched_chunk(j, bk + 1, 0) == v - 1) && bk != total - 1;
    return first_recv + issues(0, 0, bwd_sends(it, sched_chunk(j, bk, 0)), recv_next);
}

/* Sum of interleaved_calls over k in [0, n). Away from either end of a
 * phase the calls depend on k only through k mod p v (the chunk order's
 * period), so the ends are walked and the middle counted a period at a
 * time: O(p v), whatever the batch. */
static long phase_calls(const sched_iter_t *it, int phase, long n)
{
    long period = (long)it->job->pp * it->job->vpp, sum = 0;
    if (n <= 3 * period) {
        for (long k = 0; k < n; k++)
            sum += interleaved_calls(it, phase, k);
        return sum;
    }
    long one = 0, mid = n - 2 * period, full = mid / period;
    for (long k = 0; k < period; k++)
        sum += interleaved_calls(it, phase, k) + interleaved_calls(it, phase, n - period + k);
    for (long k = period; k < 2 * period; k++)
        one += interleaved_calls(it, phase, k);
    sum += full * one;
    for (long k = period + full * period; k < n - period; k++)
        sum += interleaved_calls(it, phase, k);
    return sum;
}

long sched_blocking_exchanges(const job_t *j, int stage)
{
    if (j->pp == 1 || j->pp_comm_overlap)
        return 0;
    sched_iter_t it;
    sched_iter_init(&it, j, stage);
    long total = total_steps(j), W = sched_warmup(j, stage);
    long nf = !is_first(&it), nl = !is_last(&it);
    if (j->vpp == 1 && j->pipeline_schedule != PIPE_GPIPE) { /* step_1f1b */
        long m = j->num_microbatches, R = m - W;
        return W * (nf + nl) + (W > 0 && R > 0) * nf + R * (nl + nf) + (R > 0 && W == 0) * nf + W * (nl + nf);
    }
    long cool = j->pipeline_schedule == PIPE_GPIPE ? total : W;
    return nf /* the prologue's recv_forward */ + phase_calls(&it, 0, W) + phase_calls(&it, 1, total - W) +
           phase_calls(&it, 2, cool);
}

/* The walked count, for tests: every blocking exchange the program issues. */
long sched_blocking_exchanges_walked(const job_t *j, int stage) { return count_ops(j, stage, is_blocking_exchange); }

long sched_program_ops(const job_t *j, int stage) { return count_ops(j, stage, NULL); }

const char *const sched_kind_names[] = {"fwd", "bwd", "xfer", "dp_gather", "dp_reduce", "emb_sync", "optim",
                                        "host", "join"};
const int sched_nkinds = sizeof sched_kind_names / sizeof sched_kind_names[0];
static const char *const counter_names[CNT_COUNT] = {"recv_fwd", "recv_bwd", "fwd_done", "bwd_done",
                                                     "gather_done", "part_done", "reduce_done"};

int sched_format(const sched_op_t *o, char *buf, int len)
{
    int n = snprintf(buf, len, "%s %s", sched_stream_names[o->stream], sched_kind_names[o->kind]);
    if (o->kind == SOP_FWD || o->kind == SOP_BWD) {
        n += snprintf(buf + n, len - n, " mb=%d chunk=%d", o->mb, o->chunk);
        if (o->parts > 1)
            n += snprintf(buf + n, len - n, " parts=%d", o->parts);
    }
    if (o->kind == SOP_DP_GATHER || o->kind == SOP_DP_REDUCE)
        n += o->parts > 1 ? snprintf(buf + n, len - n, " pieces=%d", o->parts)
                          : snprintf(buf + n, len - n, " piece=%d", o->chunk);
    for (int i = 0; i < o->nx; i++)
        n += snprintf(buf + n, len - n, " %s_%s=%d#%d", o->x[i].send ? "send" : "recv",
                      o->x[i].dir == DIR_FWD ? "fwd" : "bwd", o->x[i].peer, (int)o->x[i].index);
    if (o->kind != SOP_FWD && o->kind != SOP_BWD && o->kind != SOP_JOIN && o->kind != SOP_HOST && o->bytes > 0)
        n += snprintf(buf + n, len - n, " %s=%.0f", o->kind == SOP_OPTIM ? "params" : "bytes", o->bytes);
    for (int w = 0; w < 2; w++)
        if (o->wait[w] != CNT_NONE)
            n += snprintf(buf + n, len - n, " wait=%s>=%d", counter_names[o->wait[w]], (int)o->wait_for[w]);
    if (o->bump_part != CNT_NONE)
        n += snprintf(buf + n, len - n, " bump_each=%s", counter_names[o->bump_part]);
    if (o->bump != CNT_NONE)
        n += snprintf(buf + n, len - n, " bump=%s", counter_names[o->bump]);
    return n;
}

/* Per stage: the counters its program bumps and needs, and its transfers. */
typedef struct {
    long bumps[CNT_COUNT], needs[CNT_COUNT];
    long sends[2], recvs[2]; /* per direction */
    long fwd, bwd, dp_ops;
    double dp_bytes;
} stage_sum_t;

static void summarise(const job_t *j, int stage, sched_next_fn next, void *ctx, stage_sum_t *s)
{
    sched_iter_t it;
    sched_op_t o;
    memset(s, 0, sizeof *s);
    sched_iter_init(&it, j, stage);
    while (next(ctx, &it, &o)) {
        if (o.bump != CNT_NONE)
            s->bumps[o.bump]++;
        if (o.bump_part != CNT_NONE)
            s->bumps[o.bump_part] += o.parts;
        for (int w = 0; w < 2; w++) {
            long need = o.wait_for[w] + (w == 0 ? o.parts - 1 : 0);
            if (o.wait[w] != CNT_NONE && need > s->needs[o.wait[w]])
                s->needs[o.wait[w]] = need;
        }
        for (int i = 0; i < o.nx; i++)
            (o.x[i].send ? s->sends : s->recvs)[o.x[i].dir]++;
        s->fwd += o.kind == SOP_FWD;
        s->bwd += o.kind == SOP_BWD;
        if (o.kind == SOP_DP_GATHER || o.kind == SOP_DP_REDUCE)
            s->dp_ops++, s->dp_bytes += o.bytes;
    }
}

static int plain_next(void *ctx, sched_iter_t *it, sched_op_t *op) { return sched_next(it, op); }

int sched_verify(const job_t *j, char *err, int errlen) { return sched_verify_with(j, plain_next, NULL, err, errlen); }

int sched_verify_with(const job_t *j, sched_next_fn next, void *ctx, char *err, int errlen)
{
    long mv = total_steps(j);
    stage_sum_t prev = {0}, cur, first = {0};
    for (int r = 0; r < j->pp; r++) {
        summarise(j, r, next, ctx, &cur);
        if (cur.fwd != mv || cur.bwd != mv) {
            snprintf(err, errlen, "stage %d runs %ld forwards and %ld backwards; expected %ld each", r, cur.fwd,
                     cur.bwd, mv);
            return -1;
        }
        for (int c = 0; c < CNT_COUNT; c++)
            if (cur.needs[c] > cur.bumps[c]) {
                snprintf(err, errlen, "stage %d waits for counter %s >= %ld but only %ld ops bump it", r,
                         counter_names[c], cur.needs[c], cur.bumps[c]);
                return -1;
            }
        if (r > 0 && (prev.sends[DIR_FWD] != cur.recvs[DIR_FWD] || cur.sends[DIR_BWD] != prev.recvs[DIR_BWD])) {
            snprintf(err, errlen, "stages %d and %d disagree: %ld/%ld forward sends/receives, %ld/%ld backward",
                     r - 1, r, prev.sends[DIR_FWD], cur.recvs[DIR_FWD], cur.sends[DIR_BWD], prev.recvs[DIR_BWD]);
            return -1;
        }
        if (r == 0)
            first = cur;
        prev = cur;
    }
    /* The wrap-around between the last stage and the first (chunks). */
    if (j->pp > 1 && (prev.sends[DIR_FWD] != first.recvs[DIR_FWD] || first.sends[DIR_BWD] != prev.recvs[DIR_BWD])) {
        snprintf(err, errlen, "stages %d and 0 disagree: %ld/%ld forward sends/receives, %ld/%ld backward",
                 j->pp - 1, prev.sends[DIR_FWD], first.recvs[DIR_FWD], first.sends[DIR_BWD], prev.recvs[DIR_BWD]);
        return -1;
    }
    return 0;
}
