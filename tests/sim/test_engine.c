/* test_engine: the discrete-event executor against worked values: the
 * simulated bubble equals (p-1)/m (1F1B, GPipe) and (p-1)/(v m)
 * (interleaved) on compute-only jobs; two runs are bit-identical; folded
 * equals unfolded; a straggler delays its pipeline and, through DP,
 * everyone, by what a 1F1B pipeline played by hand on the chunk times
 * gives (slack on the stages before the output layer's); the verifier
 * rejects a program with a send dropped. */
#include "model/layout.h"
#include "sim/engine.h"
#include "../check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Communication that costs nothing: no latency, links at the bounds. */
static const char *free_comm_profile(void)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/megasim_free_comm.json", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    FILE *f = fopen(path, "w");
    fputs("{\"gpu\": {\"base\": \"a800-sxm-80gb\", \"nvlink_gbps\": 1e6, \"comm_slowdown\": 0},\n"
          " \"cluster\": {\"base\": \"megascale\", \"nic_gbit\": 1e6, \"alpha_nvlink_us\": 0, \"alpha_net_us\": 0,\n"
          "  \"alpha_hop_us\": 0, \"coll_launch_us\": 0, \"host_stall_s\": 0, \"host_sync_gap_us\": 0,\n"
          "  \"iteration_overhead_s\": 0,\n"
          "  \"nvlink_eff\": [[1, 1]], \"net_eff\": [[1, 1]]}}\n", f);
    fclose(f);
    return path;
}

static int make(job_t *j, hw_t *hw, const char *args)
{
    char err[OPT_ERR_LEN], buf[1024], *argv[64];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", args);
    for (char *t = strtok(buf, " "); t && argc < 64; t = strtok(NULL, " "))
        argv[argc++] = t;
    if (job_parse(j, argc, argv, NULL, NULL, err) || job_hardware(j, hw, err) || job_finalize(j, 8, err)) {
        check_true("job setup (a case that cannot be set up fails)", 0, err);
        printf("     arguments: %s\n", args);
        return -1;
    }
    return 0;
}

/* Simulates j; slow: --slow-rank's list (NULL: none), slowing forward
 * passes only when fwd_only. Returns the iteration in ns, -1 on error. */
static int own_iterators; /* run()'s entities each iterate their program (sim_opts_t) */

static int64_t run(const job_t *j, const hw_t *hw, int fold, const char *slow, int fwd_only, result_t *r)
{
    static sim_opts_t o;
    char err[OPT_ERR_LEN];
    memset(&o, 0, sizeof o);
    o.fold = fold, o.slow_forward_only = fwd_only, o.own_iterators = own_iterators;
    if (slow && sim_parse_slow(slow, "slow-rank", j->num_gpus, o.slow_ranks, &o.nslow_ranks, err, sizeof err)) {
        check_true("--slow-rank list parses", 0, err);
        memset(r, 0, sizeof *r);
        return -1;
    }
    if (sim_run(j, hw, &o, r, err, sizeof err)) {
        check_true("simulation runs (a case that cannot run fails)", 0, err);
        memset(r, 0, sizeof *r);
        return -1;
    }
    return r->iteration_ns;
}

static void bubbles(void)
{
    const char *hwf = free_comm_profile();
    const struct { const char *sched; int p, lpv, m; } cases[] = {
        {"1f1b", 4, 0, 8}, {"1f1b", 8, 0, 32}, {"1f1b", 4, 2, 8}, {"1f1b", 4, 1, 16}, {"1f1b", 8, 3, 16},
        {"gpipe", 4, 0, 8}, {"1f1b", 8, 6, 8}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[768];
        /* No DP (one replica), TP 1, a tiny vocabulary, no dropout (no
         * embedding dropout pass on the first chunk): equal stages. The
         * unfused attention's heavier layers keep the output layer's chunk
         * close to the others, as the per-stage formula below assumes. */
        snprintf(args, sizeof args,
                 "--preset megatron-lm --hardware %s --num-layers 48 --hidden-size 1024 --num-attention-heads 16 "
                 "--padded-vocab-size 8 --tensor-model-parallel-size 1 --pipeline-model-parallel-size %d "
                 "--num-layers-per-virtual-pipeline-stage %d --num-gpus %d --global-batch-size %d "
                 "--pipeline-schedule %s --no-use-distributed-optimizer --attention unfused --attention-dropout 0 "
                 "--hidden-dropout 0",
                 hwf, cases[i].p, cases[i].lpv, cases[i].p, cases[i].m, cases[i].sched);
        job_t j;
        hw_t hw;
        result_t r;
        if (make(&j, &hw, args) || run(&j, &hw, 1, NULL, 0, &r) < 0)
            continue;
        /* Stages differ slightly (embedding, output layer): the steady state
         * runs at the slowest stage's pace, and the fill and drain pass
         * through the others, 1/v of a micro-batch each. With equal stages
         * this is (p-1)/(v m) of the work; printed beside it. */
        double sum = 0, slowest = 0;
        for (int st = 0; st < j.pp; st++) {
            double per_mb = 0;
            for (int c = 0; c < j.vpp; c++) {
                cost_chunk_t ct;
                cost_chunk_times(&j, &hw, st, c, &ct);
                per_mb += ct.fwd_s + ct.bwd_s + ct.fwd_tp_s + ct.bwd_tp_s;
            }
            sum += per_mb, slowest = per_mb > slowest ? per_mb : slowest;
        }
        double work = j.num_microbatches * slowest;
        double got = (r.iteration_ns * 1e-9 - r.critical.optimizer * 1e-9 - work) / work;
        double expect = (sum - slowest) / (j.vpp * work);
        char what[128];
        snprintf(what, sizeof what, "simulated bubble %s p=%d v=%d m=%d (pure %.4f)", cases[i].sched, j.pp, j.vpp,
                 j.num_microbatches, (double)(j.pp - 1) / (j.vpp * j.num_microbatches));
        /* within 1% of the bubble, or 0.05% of the work when the bubble is
         * tiny (one-layer chunks make the output layer's chunk heavier, which
         * a per-stage sum does not see) */
        check_rel(what, expect, got, fmax(0.01, 5e-4 / expect), "(p-1)/(v m) over the stages' own times");
        result_free(&r);
    }
}

static void determinism_and_folding(void)
{
    const char *plans[] = {
        "--preset megatron-lm --num-layers 16 --hidden-size 2048 --num-attention-heads 16 --tensor-model-parallel-size 2 "
        "--pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 2 --num-gpus 32 --global-batch-size 64",
        "--preset megascale --num-layers 16 --hidden-size 2048 --num-attention-heads 16 --tensor-model-parallel-size 2 "
        "--pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 2 --num-gpus 32 --global-batch-size 64",
        "--preset megascale --num-layers 16 --hidden-size 2048 --num-attention-heads 16 --tensor-model-parallel-size 4 "
        "--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 0 --num-gpus 64 --global-batch-size 128",
    };
    for (int i = 0; i < 3; i++) {
        job_t j;
        hw_t hw;
        result_t a, b, u;
        if (make(&j, &hw, plans[i]))
            continue;
        int64_t ta = run(&j, &hw, 1, NULL, 0, &a), tb = run(&j, &hw, 1, NULL, 0, &b), tu = run(&j, &hw, 0, NULL, 0, &u);
        char what[96];
        snprintf(what, sizeof what, "plan %d: two runs bit-identical", i);
        check_true(what, ta == tb && !memcmp(a.per_entity, b.per_entity, sizeof *a.per_entity * a.entities),
                   "iteration and every account equal");
        snprintf(what, sizeof what, "plan %d: folded (%d entities) = unfolded (%d)", i, a.entities, u.entities);
        check_rel(what, (double)tu, (double)ta, 0, "same ns");
        /* Unfolded, the stages' programs are written out once and shared;
         * each entity iterating its own must play the same run. */
        result_free(&a), result_free(&b);
        own_iterators = 1;
        int64_t ti = run(&j, &hw, 0, "5:1.5", 0, &b);
        own_iterators = 0;
        int64_t ts = run(&j, &hw, 0, "5:1.5", 0, &a);
        snprintf(what, sizeof what, "plan %d: shared programs = own iterators, with a straggler", i);
        check_true(what, ti == ts && a.entities == b.entities &&
                             !memcmp(a.per_entity, b.per_entity, sizeof *a.per_entity * a.entities),
                   "iteration and every account equal (sim/engine_setup.c setup_programs)");
        result_free(&a), result_free(&b), result_free(&u);
    }
}

static void stragglers(void)
{
    job_t j;
    hw_t hw;
    result_t base, slow, slow_folded;
    char args[512];
    /* Free communication and no host terms: the iteration is compute. */
    snprintf(args, sizeof args, "--preset megatron-lm --hardware %s --num-layers 16 --hidden-size 2048 "
             "--num-attention-heads 16 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 --num-gpus 32 "
             "--num-layers-per-virtual-pipeline-stage 0 --global-batch-size 64", free_comm_profile());
    if (make(&j, &hw, args))
        return;
    /* Rank 5 = TP rank 1 of DP replica 2, stage 0 (TP fastest, then DP). */
    int bad = (run(&j, &hw, 0, NULL, 0, &base) < 0) | (run(&j, &hw, 0, "5:1.5", 0, &slow) < 0) |
              (run(&j, &hw, 1, "5:1.5", 0, &slow_folded) < 0);
    if (bad) { /* counted as failures by run() */
        result_free(&base), result_free(&slow), result_free(&slow_folded);
        return;
    }
    char got[160];
    snprintf(got, sizeof got, "%.4f s -> %.4f s", base.iteration_ns * 1e-9, slow.iteration_ns * 1e-9);
    check_true("a 1.5x straggler delays the iteration", slow.iteration_ns > base.iteration_ns * 1.01, got);
    /* Replica 0 has no straggler, but its DP reduce waits for replica 2. */
    int64_t clean_end = 0, clean_base = 0;
    for (int i = 0; i < slow.entities; i++)
        if (layout_pos(layout_of(&j), slow.entity_rank[i]).dp_i == 0 && layout_pos(layout_of(&j), slow.entity_rank[i]).stage == 0)
            clean_end = slow.per_entity[i].end, clean_base = base.per_entity[i].end;
    snprintf(got, sizeof got, "replica 0 stage 0 ends %.4f s -> %.4f s", clean_base * 1e-9, clean_end * 1e-9);
    check_true("through DP, a replica without the straggler is delayed as much",
               clean_end - clean_base > 0.9 * (slow.iteration_ns - base.iteration_ns), got);
    check_rel("folded with a straggler = unfolded", (double)slow.iteration_ns, (double)slow_folded.iteration_ns, 0,
              "the dirty replica is its own class");
    /* Slowing forward passes only (MegaScale's observation) costs less
     * than slowing the whole step, and still something. */
    result_t fwd;
    if (run(&j, &hw, 1, "5:1.5", 1, &fwd) >= 0) {
        snprintf(got, sizeof got, "none %.4f < forward only %.4f < whole step %.4f s", base.iteration_ns * 1e-9,
                 fwd.iteration_ns * 1e-9, slow.iteration_ns * 1e-9);
        check_true("--slow-forward-only: between no straggler and a whole-step one",
                   fwd.iteration_ns > base.iteration_ns && fwd.iteration_ns < slow.iteration_ns, got);
        result_free(&fwd);
    }
    result_free(&base), result_free(&slow), result_free(&slow_folded);
}

/* An independent 1F1B pipeline, for worked values, in Megatron-LM's order
 * (schedules.py). Stage s runs its warm-up forwards (p-s-1; interleaved
 * with v chunks: 2 (p-s-1) + (v-1) p), then forward-backward pairs, then
 * the remaining backwards. Virtual micro-batch k is micro-batch
 * (k / pv) p + k % p of chunk (k % pv) / p (backwards: chunks in reverse).
 * A forward waits for the one before it in the model (the stage before, or
 * the last stage's previous chunk), a backward for the one after it;
 * communication is free. fwd and bwd are per stage and chunk, [s * v + c].
 * Returns the time the last backward ends (-1 if the order deadlocks). */
enum { REF_P = 8, REF_V = 4, REF_M = 64 };

static double pipeline_1f1b_s(const double *fwd, const double *bwd, int p, int v, int m)
{
    static double fend[REF_P][REF_V][REF_M], bend[REF_P][REF_V][REF_M];
    double clock[REF_P] = {0};
    int next_op[REF_P] = {0}, total = m * v, left = 2 * p * total;
    for (int s = 0; s < p; s++)
        for (int c = 0; c < v; c++)
            for (int j = 0; j < m; j++)
                fend[s][c][j] = bend[s][c][j] = -1;
    for (int ran = 1; left && ran;) { /* sweep the stages, running each one's next op once its input is there */
        ran = 0;
        for (int s = 0; s < p; s++) {
            int w = v == 1 ? p - s - 1 : 2 * (p - s - 1) + (v - 1) * p, n = next_op[s];
            w = w < total ? w : total;
            if (n >= 2 * total)
                continue;
            /* op n is forward k or backward k */
            int is_fwd = n < w || (n < 2 * total - w && (n - w) % 2 == 0);
            int k = is_fwd ? (n < w ? n : w + (n - w) / 2) : (n < 2 * total - w ? (n - w) / 2 : n - total);
            int c = k % (p * v) / p, j = k / (p * v) * p + k % p;
            c = is_fwd ? c : v - 1 - c;
            double ready;
            if (is_fwd)
                ready = s ? fend[s - 1][c][j] : c ? fend[p - 1][c - 1][j] : 0;
            else
                ready = s < p - 1 ? bend[s + 1][c][j] : c < v - 1 ? bend[0][c + 1][j] : fend[s][c][j];
            if (ready < 0)
                continue;
            clock[s] = fmax(clock[s], ready) + (is_fwd ? fwd : bwd)[s * v + c];
            (is_fwd ? fend : bend)[s][c][j] = clock[s];
            next_op[s]++, left--, ran = 1;
        }
    }
    return left ? -1 : clock[0]; /* -1: the order deadlocks */
}

/* Stragglers against that pipeline, on stages whose last one carries a
 * heavy output layer (the slack MegaScale's 175B rows give the stages
 * before it): a straggler on a stage with slack costs only its fill and
 * drain; on the slowest stage, every micro-batch. Equal to the pipeline
 * without interleaving, and interleaved with decoupled send/receive;
 * Megatron-LM's blocking interleaved exchanges pair each step with both
 * neighbours' (send_forward_backward_recv_forward_backward): waits that
 * can only make each time longer than the pipeline's. */
static void straggler_slack(void)
{
    const struct { int lpv; const char *p2p; int exact; } plans[] = {
        {0, "", 1}, {2, "--pp-comm-overlap", 1}, {2, "", 0}};
    for (size_t pl = 0; pl < sizeof plans / sizeof plans[0]; pl++) {
        int lpv = plans[pl].lpv;
        job_t j;
        hw_t hw;
        char args[768];
        /* DP 2, TP 1: stage s is ranks 2s and 2s+1. A 16384-token
         * vocabulary makes the output layer about a layer and a third. */
        snprintf(args, sizeof args,
                 "--preset megatron-lm --hardware %s --num-layers 16 --hidden-size 1024 --num-attention-heads 16 "
                 "--padded-vocab-size 16384 --tensor-model-parallel-size 1 --pipeline-model-parallel-size 4 "
                 "--num-layers-per-virtual-pipeline-stage %d --num-gpus 8 --global-batch-size 64 "
                 "--no-use-distributed-optimizer --attention unfused --attention-dropout 0 --hidden-dropout 0 %s",
                 free_comm_profile(), lpv, plans[pl].p2p);
        if (make(&j, &hw, args))
            continue;
        if (j.pp > REF_P || j.vpp > REF_V || j.num_microbatches > REF_M) {
            check_true("the hand-played pipeline holds the plan", 0, args);
            continue;
        }
        double fwd[REF_P * REF_V], bwd[REF_P * REF_V];
        for (int i = 0; i < j.pp * j.vpp; i++) {
            cost_chunk_t ct;
            cost_chunk_times(&j, &hw, i / j.vpp, i % j.vpp, &ct);
            fwd[i] = ct.fwd_s, bwd[i] = ct.bwd_s;
        }
        result_t base;
        if (run(&j, &hw, 1, NULL, 0, &base) < 0)
            continue;
        double t_base = pipeline_1f1b_s(fwd, bwd, j.pp, j.vpp, j.num_microbatches);
        char what[128], name[48];
        snprintf(name, sizeof name, "v=%d%s", j.vpp, j.vpp == 1 ? "" : j.pp_comm_overlap ? " decoupled" : " blocking");
        snprintf(what, sizeof what, "%s no straggler: pipeline time, s", name);
        check_rel(what, t_base, (base.iteration_ns - base.critical.optimizer) * 1e-9, plans[pl].exact ? 1e-3 : 1e-2,
                  "a 1F1B pipeline played on the chunk times");
        const struct { const char *what; int stage; double f; int fwd_only; } cases[] = {
            {"stage 1 (has slack) forward 1.1x", 1, 1.1, 1},
            {"stage 0 (has slack) forward 1.1x", 0, 1.1, 1},
            {"stage 3 (slowest) forward 1.1x", 3, 1.1, 1},
            {"stage 1 (has slack) whole step 1.1x", 1, 1.1, 0},
            {"stage 1 whole step 1.5x, now the slowest", 1, 1.5, 0},
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            char spec[32];
            snprintf(spec, sizeof spec, "%d:%g", 2 * cases[i].stage, cases[i].f);
            snprintf(what, sizeof what, "%s %s: %s, s", name, cases[i].what, plans[pl].exact ? "delay" : "time");
            result_t r;
            if (run(&j, &hw, 1, spec, cases[i].fwd_only, &r) < 0) {
                check_true(what, 0, "the simulation failed (above)");
                continue;
            }
            double fs[REF_P * REF_V], bs[REF_P * REF_V];
            memcpy(fs, fwd, sizeof fs), memcpy(bs, bwd, sizeof bs);
            for (int c = 0; c < j.vpp; c++) {
                fs[cases[i].stage * j.vpp + c] *= cases[i].f;
                bs[cases[i].stage * j.vpp + c] *= cases[i].fwd_only ? 1 : cases[i].f;
            }
            double expect_s = pipeline_1f1b_s(fs, bs, j.pp, j.vpp, j.num_microbatches) - t_base;
            double got_s = (r.iteration_ns - base.iteration_ns) * 1e-9;
            /* 1% of the delay (a whole-step straggler's optimizer step is
             * slow too, which the pipeline does not play), or 1e-5 of the
             * iteration when the delay is small */
            if (plans[pl].exact) {
                check_rel(what, expect_s, got_s, fmax(0.01, 1e-5 * t_base / expect_s),
                          "a 1F1B pipeline played on the chunk times");
            } else {
                double pipe_s = (r.iteration_ns - r.critical.optimizer) * 1e-9, free_s = expect_s + t_base;
                char got[96];
                snprintf(got, sizeof got, "%.6f s >= %.6f s, the pipeline's", pipe_s, free_s);
                check_true(what, pipe_s >= free_s * (1 - 1e-5), got); /* less the ops' rounding to ns */
            }
            result_free(&r);
        }
        result_free(&base);
    }
}

/* Drops stage 1's third forward send. */
static int broken_next(void *ctx, sched_iter_t *it, sched_op_t *op)
{
    int *sends = ctx;
    while (sched_next(it, op)) {
        if (it->stage == 1)
            for (int i = 0; i < op->nx; i++)
                if (op->x[i].send && op->x[i].dir == DIR_FWD && ++*sends == 3) {
                    op->x[i] = op->x[--op->nx];
                    break;
                }
        return 1;
    }
    return 0;
}

static void verifier(void)
{
    job_t j;
    hw_t hw;
    char err[OPT_ERR_LEN] = "";
    if (make(&j, &hw, "--preset megatron-lm --num-layers 16 --hidden-size 2048 --num-attention-heads 16 "
                      "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 4 --num-gpus 4 "
                      "--num-layers-per-virtual-pipeline-stage 2 --global-batch-size 8"))
        return;
    check_true("verifier accepts the generated programs", sched_verify(&j, err, sizeof err) == 0, err);
    int sends = 0;
    check_true("verifier rejects a program with a send dropped",
               sched_verify_with(&j, broken_next, &sends, err, sizeof err) != 0 && strstr(err, "disagree"), err);
}

/* Flows on the fabric against alpha-beta on idle links: they agree where
 * nothing shares a link (one pipeline, transfers one at a time), and
 * sharing only slows things down. */
static void flows(void)
{
    const char *base = "--preset megatron-lm --num-layers 16 --hidden-size 2048 --num-attention-heads 16 "
                       "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 "
                       "--num-layers-per-virtual-pipeline-stage 0 --global-batch-size 64 --num-gpus ";
    const char *gpus[] = {"32", "256"};
    for (int i = 0; i < 2; i++) {
        char args[512];
        snprintf(args, sizeof args, "%s%s", base, gpus[i]);
        job_t j;
        hw_t hw;
        static sim_opts_t o;
        result_t a, f;
        char err[OPT_ERR_LEN];
        if (make(&j, &hw, args))
            continue;
        memset(&o, 0, sizeof o);
        o.fold = 1;
        int rc = sim_run(&j, &hw, &o, &a, err, sizeof err);
        o.network = SIM_NET_FLOWS;
        rc |= sim_run(&j, &hw, &o, &f, err, sizeof err);
        if (rc) {
            check_true("flows run", 0, err);
            continue;
        }
        char what[96];
        if (j.dp == 1) {
            snprintf(what, sizeof what, "one pipeline (%d GPUs): flows = alpha-beta", j.num_gpus);
            check_rel(what, (double)a.iteration_ns, (double)f.iteration_ns, 0.005, "nothing shares a link");
        } else {
            snprintf(what, sizeof what, "DP %d x PP 4: flows >= alpha-beta", j.dp);
            char got[96];
            snprintf(got, sizeof got, "%.6f s vs %.6f s", f.iteration_ns * 1e-9, a.iteration_ns * 1e-9);
            check_true(what, f.iteration_ns >= a.iteration_ns * 0.999, got);
        }
        result_free(&a), result_free(&f);
    }
}

int main(void)
{
    flows();
    bubbles();
    determinism_and_folding();
    stragglers();
    straggler_slack();
    verifier();
    return check_done("test_engine");
}
