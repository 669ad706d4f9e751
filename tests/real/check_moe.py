#!/usr/bin/env python3
"""tests/real/check_moe.py: `megasim run` with mixture-of-experts layers on
the CPU path (real/gpt_moe.c), each plan against the single rank as
check_run.py's equivalence (whose helpers it uses), printing expected vs
got per step.

  moe  8 ranks, EP 2 x ETP 1 folded into TP 2 x DP 2, PP 2 (attention and
       experts on different groups), dropless, then with a capacity factor
       (interleaved stages, ZeRO-2); the same 8 ranks with ETP 2 x EP 2
       (each expert cut in two, as TP cuts a dense MLP); 4 ranks of LLaMA-
       style SwiGLU experts cut by ETP 2 with LAMB and padding, and a run
       with them resumed; 4 ranks of TP 2 x DP 2 with EP 1 (the
       experts reduced over EDP 4, not DP 2); 4 ranks with EDP 1, LAMB and
       padding on the LLaMA-style model; a gated shared expert (4 ranks,
       the allgather dispatcher), and that such a model learns; one
       expert of the dense MLP's width against the dense model; a resumed
       run against the whole one; MoE layers on every 2nd layer after a
       dense first, over PP 2; the sequence-level auxiliary loss on 4
       ranks (TP 2 + SP x CP 2, EP 2 folded over them: each sequence's
       loads summed over the ranks holding its tokens) against 1, and at
       micro-batch 2 against aux_loss at micro-batch 1 on one rank (the
       same mean over the same sequences, one a micro-batch).
  moe_quick  the fast tier's (and the sanitizers'): 2 ranks, EP 2 with a
       capacity, each dispatcher, against 1; 2 ranks of TP 2 with the
       experts cut by ETP 2, each dispatcher.

How the dropped tokens are checked: each step reports how many (token,
expert) pairs the capacity dropped over all MoE layers and micro-batches,
and a signature, the sum (mod 2^64) of one 64-bit hash per dropped pair of
(layer, sample of the global batch, place in its sequence, expert), summed
over the ranks. A plan that dropped any other pair, or one pair more or
less, would show another signature (a collision is a 2^-64 chance). The
signature must match at the first step, where every plan starts from the
same weights and the router's inputs differ only by the order of fp32
sums. After an update the weights differ in their last bits too, and a pair
within rounding of an expert's capacity boundary may fall on the other
side (seen: step 2 of the tiny-llama case, 870 pairs dropped on both, one
pair swapped), so later steps must drop as many pairs within 1%.

Usage: check_moe.py CASE MPIEXEC MEGASIM"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_run as cr  # noqa: E402  (reads CASE, MPIEXEC, MEGASIM from sys.argv)

# 4 experts of FFN 64 (the dense layers' is 256), top-2, the switch
# transformer's auxiliary loss at Megatron-Core's usual 0.01
MOE = ["--num-experts", "4", "--moe-router-topk", "2", "--moe-ffn-hidden-size", "64",
       "--expert-tensor-parallel-size", "1", "--moe-token-dispatcher-type", "alltoall", "--moe-aux-loss-coeff", "0.01"]
FOLDED = ["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2", "--sequence-parallel",
          "--expert-model-parallel-size", "2"]
CAPACITY = ["--moe-expert-capacity-factor", "1.0"]
# The sequence-level auxiliary loss, two sequences a micro-batch (the
# tiny GPT's), 4 micro-batches a step on one rank
SEQ_AUX = MOE + ["--moe-router-load-balancing-type", "seq_aux_loss", "--global-batch-size", "8", "--attention", "flash"]


def expect_same(label, want, got, keys, source="single rank"):
    """Each step's keys as the single rank's: the auxiliary loss within
    check_run's tolerance (a sum in another order); the dropped pairs'
    count and signature and the expert loads' CV (from integer counts)
    exactly at step 1, the count and the CV within 1% after (see the
    top)."""
    for w, g in zip(want, got):
        for k in keys:
            if k not in w or k not in g:
                ok, allowed = False, "present"
            elif k == "moe_aux_loss":
                ok, allowed = abs(w[k] - g[k]) <= cr.REL_TOL * abs(w[k]), f"relative {cr.REL_TOL:.0e}"
            elif g["step"] == 1 or k == "moe_drop_sig":
                ok, allowed = w[k] == g[k], "exactly"
                if g["step"] > 1:  # reported, not asserted
                    print(f"note {label} step {g['step']}: {k} {'the same' if ok else 'differs'} ({w[k]}, {g[k]})")
                    continue
            else:
                ok, allowed = abs(w[k] - g[k]) <= 0.01 * w[k], "within 1%"
            cr.failures += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {label} step {g['step']}: {k} expected {w.get(k)} ({source}), got "
                  f"{g.get(k)} (allowed: {allowed})")


def moe():
    ref, _ = cr.run(1, MOE, iters=2)
    got, _ = cr.run(8, MOE + FOLDED, iters=2)
    label = "MoE dropless, 8 ranks (TP 2 + SP x DP 2 folded as EP 2 x EDP 2, PP 2)"
    cr.expect_losses(label, ref, got)
    expect_same(label, ref, got, ["moe_aux_loss", "moe_load_cv"])
    # EP 1: every rank holds every expert, whose gradients are partial over TP (SP's tokens) too: EDP 4, not DP's 2
    got, _ = cr.run(4, MOE + ["--tensor-model-parallel-size", "2", "--sequence-parallel"], iters=2)
    cr.expect_losses("MoE dropless, 4 ranks (TP 2 + SP x DP 2, EP 1: EDP 4)", ref, got)
    # Capacity 1.0: the busiest experts drop pairs; interleaved stages, ZeRO-2 over DP and over the experts' EDP
    cref, _ = cr.run(1, MOE + CAPACITY, iters=2)
    cgot, _ = cr.run(8, MOE + FOLDED + CAPACITY + ["--num-layers-per-virtual-pipeline-stage", "1",
                                                   "--use-distributed-optimizer", "--zero-stage", "2"], iters=2)
    label = "MoE capacity factor 1.0, 8 ranks (as above, interleaved, ZeRO-2)"
    cr.expect_losses(label, cref, cgot)
    expect_same(label, cref, cgot, ["moe_dropped", "moe_drop_sig", "moe_aux_loss"])
    dropped = [s["moe_dropped"] for s in cref]
    moved = max(abs(a["loss"] - b["loss"]) / b["loss"] for a, b in zip(cref, ref))
    ok = all(d > 0 for d in dropped) and moved > cr.REL_TOL and all(s["moe_dropped"] == 0 for s in ref)
    cr.failures += not ok
    print(f"{'ok  ' if ok else 'FAIL'} capacity 1.0 drops pairs and moves the losses: expected every step > 0 dropped "
          f"(dropless: 0) and a loss change > {cr.REL_TOL:.0e}, got dropped {dropped} (dropless "
          f"{[s['moe_dropped'] for s in ref]}), change {moved:.1e}")
    # The auxiliary loss reaches the router: without it the losses move
    noaux, _ = cr.run(1, MOE[:-2] + ["--moe-aux-loss-coeff", "0"], iters=2)
    moved = max(abs(a["loss"] - b["loss"]) / b["loss"] for a, b in zip(noaux, ref))
    ok = moved > cr.REL_TOL and all(s["moe_aux_loss"] == 0 for s in noaux) and all(s["moe_aux_loss"] > 0 for s in ref)
    cr.failures += not ok
    print(f"{'ok  ' if ok else 'FAIL'} --moe-aux-loss-coeff 0.01 vs 0: expected a loss change > {cr.REL_TOL:.0e} and "
          f"aux losses > 0 vs 0, got {moved:.1e}, {[s['moe_aux_loss'] for s in ref]} vs "
          f"{[s['moe_aux_loss'] for s in noaux]}")
    # LLaMA-style (SwiGLU experts without biases), EP 4 over DP 4: EDP 1; LAMB's per-expert norms; padding
    llama = cr.LLAMA + MOE + CAPACITY + ["--moe-pad-expert-input-to-capacity", "--optimizer", "lamb"]
    lref, _ = cr.run(1, llama, iters=2)
    lgot, _ = cr.run(4, llama + ["--expert-model-parallel-size", "4", "--use-distributed-optimizer"], iters=2)
    label = "tiny-llama MoE, capacity 1.0 padded, LAMB, 4 ranks (DP 4 as EP 4 x EDP 1, ZeRO-1)"
    cr.expect_losses(label, lref, lgot)
    expect_same(label, lref, lgot, ["moe_dropped", "moe_drop_sig"])
    etp()
    shared()
    one_expert()
    resume()
    seq_aux_mb()
    sref, _ = cr.run(1, SEQ_AUX, iters=2)
    sgot, _ = cr.run(4, SEQ_AUX + ["--tensor-model-parallel-size", "2", "--sequence-parallel", "--context-parallel-size",
                                   "2", "--expert-model-parallel-size", "2"], iters=2)
    label = "seq_aux_loss, 4 ranks (TP 2 + SP x CP 2, EP 2 folded over them)"
    cr.expect_losses(label, sref, sgot)
    expect_same(label, sref, sgot, ["moe_aux_loss", "moe_load_cv"])
    # MoE layers on some layers only (every 2nd, the first dense, as DeepSeek's): the stages' experts differ
    sparse = MOE + ["--moe-layer-freq", "2", "--moe-dense-first-layers", "1"]
    sref, _ = cr.run(1, sparse, iters=2)
    sgot, _ = cr.run(4, sparse + ["--expert-model-parallel-size", "2", "--pipeline-model-parallel-size", "2"], iters=2)
    cr.expect_losses("MoE on every 2nd layer after 1 dense, 4 ranks (EP 2 over DP 2, PP 2)", sref, sgot)
    all_to_all()


def resume():
    """A checkpoint of experts sharded over EDP (ZeRO-1) and a shared
    expert, and one of experts cut by ETP: each resumed run repeats the
    uninterrupted one bit for bit."""
    plan = MOE + ["--moe-shared-expert-intermediate-size", "64", "--expert-model-parallel-size", "2",
                  "--tensor-model-parallel-size", "2", "--sequence-parallel", "--use-distributed-optimizer",
                  "--zero-stage", "1"]
    for args, label in ((plan, "EP 2 in TP 2 x DP 2, ZeRO-1 over DP and EDP"),
                        (cr.with_etp(plan, 2), "ETP 2 x EP 2 in TP 2 x DP 2, ZeRO-1 over DP")):
        with tempfile.TemporaryDirectory(prefix="megasim-ckpt-moe-") as d:
            whole, _ = cr.run(4, args, iters=3)
            cr.run(4, args + ["--save", d, "--save-interval", "2"], iters=2)
            later, _ = cr.run(4, args + ["--save", d, "--resume"], iters=1)
        cr.expect_losses(f"MoE resumed at step 2 (4 ranks, {label})", whole[2:], later, "uninterrupted run", tol=0.0)


def etp():
    """Experts cut by ETP (real/gpt_moe.c: the received rows gathered over
    ETP, each rank's slice of every expert's width, the partial outputs
    summed home): the folded 8 ranks with ETP 2 x EP 2, dropless and with
    a capacity (FC2's bias added once); LLaMA-style SwiGLU experts (the
    gate's and the up rows' slices) with LAMB (its per-tensor norms summed
    over ETP), dropless over 2 steps, and padded to a capacity over one
    (at step 2 a pair within rounding of a capacity boundary may swap, see
    the top, and moved this plan's gradient norm by 5e-5)."""
    ref, _ = cr.run(1, MOE, iters=2)
    got, _ = cr.run(8, cr.with_etp(MOE + FOLDED, 2), iters=2)
    label = "MoE dropless, 8 ranks (TP 2 + SP x DP 2 folded as ETP 2 x EP 2, PP 2)"
    cr.expect_losses(label, ref, got)
    expect_same(label, ref, got, ["moe_aux_loss", "moe_load_cv"])
    cref, _ = cr.run(1, MOE + CAPACITY, iters=2)
    cgot, _ = cr.run(8, cr.with_etp(MOE + FOLDED + CAPACITY, 2) + ["--use-distributed-optimizer"], iters=2)
    label = "MoE capacity factor 1.0, 8 ranks (ETP 2 x EP 2 as above, ZeRO-1)"
    cr.expect_losses(label, cref, cgot)
    expect_same(label, cref, cgot, ["moe_dropped", "moe_drop_sig", "moe_aux_loss"])
    plan = ["--tensor-model-parallel-size", "2", "--sequence-parallel", "--expert-model-parallel-size", "2"]
    for extra, iters, what in (([], 2, "dropless"), (CAPACITY + ["--moe-pad-expert-input-to-capacity"], 1,
                                                      "capacity 1.0 padded")):
        llama = cr.LLAMA + MOE + extra + ["--optimizer", "lamb"]
        lref, _ = cr.run(1, llama, iters=iters)
        lgot, _ = cr.run(4, cr.with_etp(llama, 2) + plan, iters=iters)
        label = f"tiny-llama MoE, {what}, LAMB, 4 ranks (TP 2 + SP x DP 2 as ETP 2 x EP 2)"
        cr.expect_losses(label, lref, lgot)
        expect_same(label, lref, lgot, ["moe_dropped", "moe_drop_sig", "moe_load_cv"])


def shared():
    """The shared expert (cut by TP) with Qwen2's sigmoid gate: 8 ranks
    against 1, GPT and LLaMA-style; and an MoE model with it learns."""
    sh = MOE + ["--moe-shared-expert-intermediate-size", "128", "--moe-shared-expert-gate"]
    tp2 = ["--tensor-model-parallel-size", "2", "--sequence-parallel", "--expert-model-parallel-size", "2",
           "--moe-token-dispatcher-type", "allgather"]
    ref, _ = cr.run(1, cr.LLAMA + sh, iters=2)
    got, _ = cr.run(4, cr.LLAMA + sh + tp2, iters=2)
    cr.expect_losses("tiny-llama MoE with a gated shared expert of 128, 4 ranks (EP 2 in TP 2 x DP 2), the allgather "
                     "dispatcher", ref, got)
    steps, _ = cr.run(2, sh + ["--expert-model-parallel-size", "2"], iters=12)
    first, last = steps[0]["loss"], min(s["loss"] for s in steps[-3:])
    ok = abs(first - 5.545) < 0.1 and last < 4.5
    cr.failures += not ok
    print(f"{'ok  ' if ok else 'FAIL'} MoE with a gated shared expert learns, 2 ranks (EP 2): first loss {first:.4f} "
          f"(expected ln 256 = 5.545 +- 0.1), best of the last 3 of 12 steps {last:.4f} (expected < 4.5; it was "
          f"3.74 on 2026-11-29)")


def all_to_all():
    """compare's all-to-all class: the run's forwards and backwards carry
    the time of their all-to-alls (a2a_s), the simulation the cost of the
    same exchanges; both present and each below its side's fwd + bwd
    time; a dense run has none. And the imbalance compare prices: the
    run's measured load CV (its steps after the first) where the job gave
    none, the job's 0 with --moe-load-cv job."""
    with tempfile.TemporaryDirectory(prefix="megasim-moe-") as d:
        for args, name in ((MOE + ["--expert-model-parallel-size", "2"], "EP 2"), ([], "dense")):
            h5 = os.path.join(d, "r.h5")
            steps, _ = cr.run(2, args + ["--out", h5], iters=2)
            if name == "EP 2":
                load_cv(h5, steps, d)
            p = subprocess.run([cr.MEGASIM, "compare", h5, "--json", "--plot", os.path.join(d, "c")],
                               capture_output=True, text=True)
            rep = json.loads(p.stdout)
            a = rep.get("all_to_all")
            busy = {s: sum(c[f"compute_stream_{s}_s"] for c in rep["op_classes"] if c["kind"] in ("fwd", "bwd"))
                    for s in ("measured", "simulated")}
            if name == "dense":
                ok, want = a is None, "no all_to_all entry"
            else:
                ok = a is not None and all(0 < a[f"{s}_s"] < busy[s] for s in busy)
                want = f"0 < all_to_all < fwd + bwd per rank per iteration ({busy})"
            cr.failures += not ok
            print(f"{'ok  ' if ok else 'FAIL'} compare --json of a 2-rank run, {name}: expected {want}, got {a}")


def load_cv(h5, steps, d):
    want = steps[1]["moe_load_cv"]  # the mean of the steps after the first: step 2 of 2
    for flag, src, cv in (([], "run", want), (["--moe-load-cv", "job"], "job", 0.0)):
        p = subprocess.run([cr.MEGASIM, "compare", h5, "--json", "--plot", os.path.join(d, "cv")] + flag,
                           capture_output=True, text=True)
        got = json.loads(p.stdout).get("moe_load_cv", {}) if p.returncode == 0 else {}
        ok = (got.get("simulated_from") == src and abs(got.get("simulated", -1) - cv) <= 1e-6 * max(cv, 1) and
              abs(got.get("measured", -1) - want) <= 1e-6 * max(want, 1) and want > 0)
        cr.failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} compare {' '.join(flag) or '(default)'} of a 2-rank EP 2 run: expected "
              f"moe_load_cv simulated {cv:.6f} from the {src}, measured {want:.6f} (the run's step 2, its --json); "
              f"got {got} (exit {p.returncode})")


def one_expert():
    """One expert, top-1, of the dense MLP's width is that MLP (the same
    initial values by the same ids and places; its weight 1 whatever the
    router): the dispatch, the experts and the combine, forward and
    backward, against the dense layer's code."""
    dense, _ = cr.run(1, [], iters=2)
    one, _ = cr.run(1, ["--num-experts", "1", "--moe-router-topk", "1", "--moe-ffn-hidden-size", "256"], iters=2)
    cr.expect_losses("one expert, top-1, FFN 256 against the dense tiny GPT (FFN 256), 1 rank", dense, one,
                     "the dense model")


def seq_aux_mb():
    """seq_aux_loss at micro-batch 2 against aux_loss at micro-batch 1: both
    the mean over the step's 8 sequences of each one's switch loss (its
    own loads and scores), so the losses, gradient norms and auxiliary
    losses agree to the order of the gradients' sums; aux_loss at
    micro-batch 2 pools two sequences' loads and must differ."""
    aux = ["--moe-router-load-balancing-type", "aux_loss"]
    ref, _ = cr.run(1, SEQ_AUX + aux + ["--micro-batch-size", "1"], iters=1)
    got, _ = cr.run(1, SEQ_AUX, iters=1)
    label = "seq_aux_loss at micro-batch 2, 1 rank"
    cr.expect_losses(label, ref, got, "aux_loss at micro-batch 1")
    expect_same(label, ref, got, ["moe_aux_loss"], "aux_loss at micro-batch 1")
    pooled, _ = cr.run(1, SEQ_AUX + aux, iters=1)
    moved = abs(pooled[0]["moe_aux_loss"] - ref[0]["moe_aux_loss"]) / ref[0]["moe_aux_loss"]
    ok = moved > 10 * cr.REL_TOL
    cr.failures += not ok
    print(f"{'ok  ' if ok else 'FAIL'} aux_loss at micro-batch 2 (two sequences' loads pooled) against micro-batch 1: "
          f"expected the auxiliary loss to move by > {10 * cr.REL_TOL:.0e}, got {moved:.1e}")


def moe_quick():
    ref, _ = cr.run(1, MOE + CAPACITY, iters=1)
    for disp in ("alltoall", "allgather"):
        got, _ = cr.run(2, MOE + CAPACITY + ["--expert-model-parallel-size", "2", "--moe-token-dispatcher-type", disp],
                        iters=1)  # one step: its gradient norm holds the backward
        label = f"MoE capacity factor 1.0, {disp} dispatcher, 2 ranks (DP 2 as EP 2)"
        cr.expect_losses(label, ref, got, "single rank, alltoall")
        expect_same(label, ref, got, ["moe_dropped", "moe_drop_sig", "moe_aux_loss", "moe_load_cv"])
        got, _ = cr.run(2, cr.with_etp(MOE + CAPACITY, 2) + ["--tensor-model-parallel-size", "2", "--sequence-parallel",
                                                          "--moe-token-dispatcher-type", disp], iters=1)
        label = f"MoE capacity factor 1.0, {disp} dispatcher, 2 ranks (TP 2 + SP as ETP 2: each expert cut in two)"
        cr.expect_losses(label, ref, got, "single rank, alltoall")
        expect_same(label, ref, got, ["moe_dropped", "moe_drop_sig", "moe_aux_loss", "moe_load_cv"])


{"moe": moe, "moe_quick": moe_quick}[cr.CASE]()
sys.exit(1 if cr.failures else 0)
