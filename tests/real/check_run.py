#!/usr/bin/env python3
"""tests/real/check_run.py: end-to-end checks of `megasim run` (CPU path,
reference kernels + MPI, mpirun --oversubscribe). Every case prints what it
expected, what it got and where the expected value comes from.

  equivalence  the losses and global gradient norms of 8-rank plans (TP 2 x
               PP 2 interleaved x DP 2, SP, ZeRO-2), with each overlap switch
               off and on (one at a time, then all), flash attention and the
               GPipe schedule, equal the single-rank run's, step by step (the
               gradients clipped to norm 1.0, Megatron-LM's default); the parallel block, no linear
               biases, an untied output layer, RMSNorm, SwiGLU, rotary and no
               positions, dropout, a sliding window, LAMB likewise against
               their own single-rank runs (the five that tiny-llama.json
               holds, in its one 8-rank run)
               (which each switch must change); fused element-wise kernels
               (dropout-add-norm) against the unfused ones; DP in several
               buckets (--ddp-bucket-size), overlapped, ZeRO-2 and all-reduce;
               uneven pipeline stages (1 + 3 layers; the embedding and the
               loss counted as layers, chunks with no layer)
  recompute    block recomputation keeps the losses (with dropout too: the
               rerun forward draws the same masks) and lands its peak memory
               between no and full recomputation's; uniform recomputation in
               groups of N likewise (a group reruns whole); selective recomputation
               (the unfused attention's probabilities rebuilt in the backward)
               keeps the losses and lowers the peak
  learns       the loss falls on the shipped corpus, GPT and LLaMA-style; the
               learning rate follows each --lr-decay-style step by step
  resume       a run stopped at a checkpoint and resumed gives the
               uninterrupted run's losses (a cosine learning rate included),
               bit for bit on the CPU
  outputs      --out writes the measured result file, --trace the Chrome trace
  (check_splits.py: context parallelism and FP8, the same way)
  gpu          (label gpu) the GPU path on the GPUs at hand; skipped without
  gpu_emu      the GPU path's own code (real/rt_gpu.c, comm_nccl.c, the CUDA
               kernels, cuBLASLt and NCCL calls) on the emulated GPU module
               (tests/real/gpu_emu, MEGASIM_GPU_MODULE): 1 rank against the
               CPU, 8 ranks (the equivalence plan) against 1, in bf16

Tolerance: the same maths in fp32 with sums in another order (TP, DP and
the ZeRO shards reduce in pieces): relative 1e-5 per step, far above the
observed differences (below 1e-6) and far below a wrong gradient's effect
(a single wrong gradient term moves step 2's loss by > 1e-3).
usage: check_run.py CASE MPIEXEC MEGASIM [EMULATED_GPU_MODULE]"""
import json, os, re, shutil, subprocess, sys, tempfile

CASE, MPIEXEC, MEGASIM = sys.argv[1], sys.argv[2], sys.argv[3]
MPI_ENV = []  # mpirun -x flags
# those of the emulated GPU module (the 4th argument of the cases that take one)
EMU_ENV = {"OMPI_MPI_THREAD_LEVEL": "3", "MEGASIM_GPU_MODULE": sys.argv[4]} if len(sys.argv) > 4 else {}
EMU_MPI_ENV = [x for k, v in EMU_ENV.items() for x in ("-x", f"{k}={v}")]
REL_TOL = 1e-5
PLAN8 = ["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
         "--num-layers-per-virtual-pipeline-stage", "1", "--sequence-parallel",
         "--use-distributed-optimizer", "--zero-stage", "2"]
OVERLAPS = [["--overlap-grad-reduce"], ["--overlap-param-gather"], ["--tp-comm-overlap"],
            ["--pp-comm-overlap"], ["--async-data-loader"]]
ITERS_EMU = 2  # step 2 holds step 1's backward and update (3 until 2026-11-29: CI's budget; 0.7 s a step here)
# The LLaMA-style model: rotary positions, RMSNorm, SwiGLU, no linear
# biases, an untied output layer and grouped queries.
LLAMA = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "experiments", "real", "tiny-llama.json")]
# Megatron-LM's default dropouts (tiny-gpt.json has none): every plan draws
# each mask at the element's place in the whole model (kernels/dropout.h).
DROPOUT = ["--attention-dropout", "0.1", "--hidden-dropout", "0.1"]
# Each residual add (and its dropout) in one kernel with the norm after it,
# across layers too (real/gpt.c, layers_fwd): in fp32 the same sums.
FUSED = ["--fused-elementwise"]
failures = 0


# A run that writes no file repeats its losses bit for bit (the same command,
# the same numbers; only its times differ), so a case asking for the same
# run twice gets the first one's result: 3 single-rank runs fewer in
# equivalence and recompute.
RUNS = {}
WRITES = ("--save", "--load", "--resume", "--out", "--trace", "--gemm-algos", "--heartbeat")


def run(np, args, iters=3, check=True):
    cmd = [MPIEXEC, "--allow-run-as-root", "--oversubscribe", "-np", str(np)] + MPI_ENV + [MEGASIM, "run",
           "--train-iters", str(iters), "--json"] + args
    key = tuple(cmd) if not any(a.split("=")[0] in WRITES for a in args) else None
    if key in RUNS:
        return RUNS[key]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if check and p.returncode != 0:
        print("FAILED to run:", " ".join(cmd), "\n", p.stdout, p.stderr)
        sys.exit(1)
    steps = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    if key and p.returncode == 0:
        RUNS[key] = (steps, p)
    return steps, p


def expect_losses(label, want, got, source="single rank", tol=REL_TOL, norm_tol=None):
    """Loss and global gradient norm of each step (the norm counts every
    element of the model once whatever the plan, and clipping by it, at
    --clip-grad 1.0 by default, acts on every step of these runs)."""
    global failures
    norm_tol = tol if norm_tol is None else norm_tol
    if not want or not got:
        failures += 1
        print(f"FAIL {label}: no JSON step lines to compare (expected {len(want)}, got {len(got)})")
        return
    for w, g in zip(want, got):
        rel = abs(g["loss"] - w["loss"]) / abs(w["loss"])
        rel_n = abs(g["grad_norm"] - w["grad_norm"]) / abs(w["grad_norm"])
        ok = rel <= tol and rel_n <= norm_tol and w["step"] == g["step"]
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {label} step {g['step']}: expected loss {w['loss']:.9f}, gradient norm "
              f"{w['grad_norm']:.6f} ({source}), got {g['loss']:.9f} and {g['grad_norm']:.6f}, relative "
              f"differences {rel:.2e} and {rel_n:.2e} (allowed {tol:.0e} and {norm_tol:.0e})")
    if len(want) != len(got):
        failures += 1
        print(f"FAIL {label}: expected {len(want)} steps, got {len(got)}")


# Architecture switches, each against its own single-rank run with every
# overlap on; and each must change the single-rank losses of the run
# without it (a switch the backend ignored would pass the equivalence, and
# a single-rank run repeats its losses bit for bit).
ARCH_SWITCHES = [([], ["--disable-bias-linear"], "no linear biases"),
                 ([], ["--untie-embeddings-and-output-weights"], "untied output layer"),
                 ([], ["--normalization", "RMSNorm"], "RMSNorm"),
                 ([], ["--swiglu"], "SwiGLU"),
                 (["--parallel-block"], ["--swiglu"], "parallel block, SwiGLU"),
                 ([], ["--position-embedding-type", "rope"], "rotary positions"),
                 ([], ["--position-embedding-type", "none"], "no positions"),
                 (["--parallel-block"], ["--position-embedding-type", "rope", "--rotary-base", "500000"],
                  "parallel block, rotary positions (LLaMA-3's base)"),
                 ([], LLAMA, "experiments/real/tiny-llama.json (all of them, grouped queries)"),
                 (["--parallel-block"], ["--disable-bias-linear"], "parallel block, no linear biases"),
                 ([], DROPOUT, "dropout 0.1 on the attention probabilities and before each residual add"),
                 (["--parallel-block"], DROPOUT + ["--attention", "unfused"],
                  "parallel block, dropout, unfused attention"),
                 ([], ["--clip-grad", "0"], "no gradient clipping (every other run clips to 1.0)"),
                 ([], ["--sliding-window", "16"], "sliding-window attention (16 of 64 tokens)"),
                 (["--parallel-block"], ["--sliding-window", "-1", "--attention", "flash"],
                  "parallel block, flash attention with a window of half the sequence"),
                 ([], ["--optimizer", "lamb"], "LAMB (per-tensor trust ratios over TP and ZeRO shards)"),
                 (LLAMA, ["--add-qkv-bias"], "tiny-llama.json with a QKV bias alone (Qwen2's; TP splits it as the "
                  "QKV weight's rows)")]
# The standard block's first five switches are each in tiny-llama.json, whose
# 8-rank run checks them together: their own 8-rank runs (an MPI launch of
# 8 ranks each, about 1.4 s of the suite's 2 cores) would add no code path.
# Each still must change the single-rank losses.
IN_LLAMA = {"no linear biases", "untied output layer", "RMSNorm", "SwiGLU", "rotary positions"}


def equivalence():
    global failures
    refs = {}
    for extra, name in (([], "standard block"), (["--parallel-block"], "parallel block")):
        ref, _ = run(1, extra)
        refs[tuple(extra)] = ref
        # (the standard block with every overlap runs below, on Llama 3's uneven split)
        cases = [[]] + OVERLAPS if not extra else [[], sum(OVERLAPS, [])]
        for ov in cases:
            got, _ = run(8, PLAN8 + extra + ov)
            expect_losses(f"{name}, 8 ranks {' '.join(ov) or 'no overlap'}", ref, got)
    for block, switch, name in ARCH_SWITCHES:
        ref, _ = run(1, block + switch)
        base = refs[tuple(block)] if tuple(block) in refs else run(1, block)[0]
        moved = max(abs(r["loss"] - b["loss"]) / b["loss"] for r, b in zip(ref, base))
        failures += moved <= 1e-5
        what, of = (" ".join(os.path.basename(a) if a.endswith(".json") else a for a in x) for x in (switch, block))
        print(f"{'ok  ' if moved > 1e-5 else 'FAIL'} {what} changes the single-rank losses of {of or 'standard'}: "
              f"largest relative change over {len(ref)} steps {moved:.1e} (expected > 1e-5)")
        if name not in IN_LLAMA:
            got, _ = run(8, PLAN8 + block + switch + sum(OVERLAPS, []))
            expect_losses(f"{name}, 8 ranks, every overlap", ref, got)
    # Megatron-LM's buckets (not interleaved: PP 2 with 2 layers per stage):
    # --ddp-bucket-size 20000 cuts the first stage's ~63k parameters per rank
    # into 4 buckets, each reduced (gathered) on its own beside the backward
    # (forward); the default's one bucket leaves those paths untried.
    buckets = ["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2", "--sequence-parallel",
               "--ddp-bucket-size", "20000", "--overlap-grad-reduce"]
    for zero, name in ((["--use-distributed-optimizer", "--zero-stage", "2", "--overlap-param-gather"],
                        "ZeRO-2, 4 buckets, both DP overlaps"), ([], "all-reduce, 4 buckets, overlapped")):
        got, _ = run(8, buckets + zero)
        expect_losses(f"{name}, 8 ranks (TP 2 x PP 2 x DP 2, SP)", refs[()], got)
    # The vocabulary split without SP: the embedding's and the output layer's
    # TP all-reduces (with SP they are an all-gather and a reduce-scatter),
    # and an untied output layer, its own weight split by vocabulary.
    got, _ = run(2, ["--tensor-model-parallel-size", "2"])
    expect_losses("2 ranks (TP 2, no SP)", refs[()], got)
    untie = ["--untie-embeddings-and-output-weights"]
    ref, _ = run(1, untie)
    got, _ = run(4, ["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2"] + untie)
    expect_losses("untied output layer, 4 ranks (TP 2 x PP 2, no SP)", ref, got)
    # Switches that change no maths, only the order of the work: each 8-rank
    # run against the single rank without it.
    # Uneven pipeline stages (model/split.h) change which rank holds which
    # layer, not the maths: 1 layer on the first stage and 3 on the last
    # (with GPipe: one launch for both), and Llama 3's split, the embedding
    # and the loss counted as a layer each (6 slots, 3 chunks of 1 per stage:
    # the first stage's first chunk and the last stage's last hold no layer).
    for switch, name in ((["--attention", "flash"], "flash attention (online softmax) against unfused"),
                         (["--pipeline-schedule", "gpipe", "--num-layers-per-virtual-pipeline-stage", "0",
                           "--decoder-first-pipeline-num-layers", "1"],
                          "GPipe schedule (all forwards, then all backwards), uneven stages of 1 and 3 layers"),
                         (["--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"]
                          + sum(OVERLAPS, []),
                          "embedding and loss counted as layers, 3 chunks per stage, 2 of them no layer, "
                          "every overlap")):
        got, _ = run(8, PLAN8 + switch)
        expect_losses(f"{name}, 8 ranks", refs[()], got, "single rank, unfused attention, 1F1B")
    for block in ([], ["--parallel-block"]):  # fusing must not change the maths
        ref, _ = run(1, block + DROPOUT)
        got, _ = run(1, block + DROPOUT + FUSED)
        expect_losses(f"{' '.join(block) or 'standard block'}, dropout, fused element-wise, 1 rank", ref, got,
                      "single rank, unfused")


def recompute():
    """Block recomputation reruns only the first N layers of each chunk: the
    losses equal the run without recomputation (8 ranks, TP 2 x PP 2, ZeRO-2;
    the same maths), and with PP 2 over 8 layers and 8 micro-batches the
    measured peak memory lies strictly between no and full recomputation's,
    each within 15% of the memory model's plan. Selective recomputation of
    the unfused attention core keeps the losses and the peak under no
    recomputation's, within 15% of its plan too."""
    global failures
    block = ["--recompute-granularity", "full", "--recompute-method", "block", "--recompute-num-layers", "1"]
    plan0 = ["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2", "--sequence-parallel",
             "--use-distributed-optimizer", "--zero-stage", "2"]
    plan = plan0 + block
    for extra, label, source in (([], "block recomputation (1 of 2 layers per chunk), 8 ranks",
                                  "single rank, no recomputation"),
                                 (DROPOUT, "block recomputation with dropout 0.1, 8 ranks",
                                  "single rank, dropout, no recomputation"),
                                 # two layers per chunk: layer 0's output add runs layer 1's first norm,
                                 # except in its rerun; layer 1's runs the final norm
                                 (DROPOUT + FUSED, "block recomputation, dropout, fused element-wise, 8 ranks",
                                  "single rank, dropout, no recomputation, fused")):
        ref, _ = run(1, extra)
        got, _ = run(8, plan + extra)
        expect_losses(label, ref, got, source)
    # Uniform in groups of 2 (a chunk of 2 layers: one group): the group keeps
    # its input only and reruns whole, the second layer's first norm with it
    ref, _ = run(1, DROPOUT + FUSED)
    got, _ = run(8, plan0 + DROPOUT + FUSED + ["--recompute-granularity", "full", "--recompute-method", "uniform",
                                               "--recompute-num-layers", "2"])
    expect_losses("uniform recomputation in groups of 2, dropout, fused element-wise, 8 ranks", ref, got,
                  "single rank, dropout, no recomputation, fused")
    # Selective: the unfused core's probabilities dropped after the forward
    # and rebuilt from q, k, v (the attention dropout drawn again, the same)
    unfused = ["--attention", "unfused"] + DROPOUT
    ref, _ = run(1, unfused)
    got, _ = run(8, plan0 + unfused + ["--recompute-granularity", "selective"])
    expect_losses("selective recomputation, unfused attention, dropout, 8 ranks", ref, got,
                  "single rank, unfused attention, dropout, no recomputation")
    peaks = {}
    shape = ["--num-layers", "8", "--micro-batch-size", "8", "--global-batch-size", "64",
             "--pipeline-model-parallel-size", "2"]
    for name, extra in (("none", []), ("selective", ["--recompute-granularity", "selective"]),
                        ("block 2 of 4", block[:-1] + ["2"]), ("full", block[:2]),
                        ("uniform, groups of 2", block[:2] + ["--recompute-num-layers", "2"])):
        cmd = [MPIEXEC, "--allow-run-as-root", "--oversubscribe", "-np", "2"] + MPI_ENV + [
            MEGASIM, "run", "--train-iters", "1", "--attention", "unfused"] + shape + extra  # one step: its end
        # report has the peak, every buffer made (2 steps gave the same five peaks to the byte, 2026-11-30)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        m = re.search(r"planned ([0-9.]+) MiB \(memory model\), used at peak ([0-9.]+) MiB", p.stdout)
        planned, peaks[name] = (float(m.group(1)), float(m.group(2))) if m else (float("nan"), float("nan"))
        ok = abs(peaks[name] / planned - 1) <= 0.15
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: measured peak {peaks[name]} MiB against the memory model's "
              f"{planned} MiB: {100 * (peaks[name] / planned - 1):+.1f}% (allowed 15%)")
    ok = peaks["none"] > peaks["block 2 of 4"] > peaks["full"] and peaks["none"] > peaks["selective"] and \
        peaks["none"] > peaks["uniform, groups of 2"] > peaks["full"]
    failures += not ok
    print(f"{'ok  ' if ok else 'FAIL'} peak memory per rank (PP 2, 8 layers, 8 micro-batches, unfused attention): none "
          f"{peaks['none']} > block {peaks['block 2 of 4']} > full {peaks['full']} MiB, none > selective "
          f"{peaks['selective']} MiB, and none > uniform in groups of 2 {peaks['uniform, groups of 2']} > full "
          f"(one layer per group) MiB (expected)")


def schedule():
    """The learning rate of each step, as Megatron-LM's scheduler gives it
    (worked by hand): --lr 0.01, warm-up 2 steps (k / 2 of it), then decay
    to --min-lr 0.001 at step 5 and constant after: cosine 0.005, 0.01,
    0.00775 (0.001 + 0.009 (cos(pi / 3) + 1) / 2), 0.00325, 0.001, 0.001;
    linear 0.005, 0.01, 0.007, 0.004, 0.001, 0.001; constant 0.005, 0.01
    and 0.01 after."""
    global failures
    base = ["--lr", "0.01", "--lr-warmup-iters", "2", "--lr-decay-iters", "5", "--min-lr", "0.001"]
    want = {"cosine": [0.005, 0.01, 0.00775, 0.00325, 0.001, 0.001],
            "linear": [0.005, 0.01, 0.007, 0.004, 0.001, 0.001],
            "constant": [0.005, 0.01, 0.01, 0.01, 0.01, 0.01]}
    for style, lrs in want.items():
        got, _ = run(1, base + ["--lr-decay-style", style], iters=6)
        g = [s["lr"] for s in got]
        ok = len(g) == len(lrs) and all(abs(a - b) <= 1e-9 + 1e-6 * b for a, b in zip(g, lrs))
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} --lr-decay-style {style}: learning rates expected {lrs} (Megatron-LM's "
              f"OptimizerParamScheduler, by hand), got {[round(x, 9) for x in g]}")


def learns():
    global failures
    schedule()
    for extra, name in (([], "GPT"), (LLAMA, "LLaMA-style")):
        steps, _ = run(2, extra, iters=20)
        first, last = steps[0]["loss"], min(s["loss"] for s in steps[-5:])
        # ln(256) = 5.545: a byte-level model starts near uniform; 20 AdamW steps
        # at lr 2e-3 on repetitive licence text reach well under 4.5 nats.
        ok = abs(first - 5.545) < 0.1 and last < 4.5
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: first loss {first:.4f} (expected ln 256 = 5.545 +- 0.1, uniform "
              f"start), best of the last 5 of 20 steps {last:.4f} (expected < 4.5)")


def resume(device=()):
    d = tempfile.mkdtemp(prefix="megasim-ckpt-")
    try:
        plan = ["--tensor-model-parallel-size", "2", "--use-distributed-optimizer", "--zero-stage", "1",
                "--optimizer", "lamb", "--lr", "0.01"] + DROPOUT + list(device)  # masks drawn by step
        plan += ["--lr-warmup-iters", "1", "--lr-decay-style", "cosine", "--lr-decay-iters", "4"]  # rates by step
        whole, _ = run(4, plan, iters=4)
        run(4, plan + ["--save", d, "--save-interval", "2"], iters=2)
        later, _ = run(4, plan + ["--save", d, "--resume"], iters=2)
        # the CPU path is deterministic: a resumed run repeats the losses bit for bit (as printed, 9 digits);
        # the GPU's atomics (dq, bias gradients) sum in no fixed order
        expect_losses(f"resumed at step 2 (4 ranks, TP 2, ZeRO-1, LAMB, dropout, cosine learning rate"
                      f"{', ' + ' '.join(device) if device else ''})", whole[2:], later, "uninterrupted run",
                      tol=REL_TOL if device else 0.0)
        # A checkpoint resumes only the run it came from, intact: another --seed (other batches and masks) is
        # refused, and so is a state with one bit flipped (its checksum); on the CPU only (real/ckpt.c reads them).
        global failures
        if device:
            return
        _, p = run(4, plan + ["--save", d, "--resume", "--seed", "5"], iters=2, check=False)
        ok = p.returncode == 2 and "written for another job" in p.stderr
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} resume with another --seed: expected exit 2 and 'written for another job', "
              f"got exit {p.returncode}: {p.stderr.strip()[:160]}")
        step = sorted(x for x in os.listdir(d) if x.startswith("step-"))[-1]
        shard = os.path.join(d, step, "rank-00001.bin")
        b = bytearray(open(shard, "rb").read())
        b[-3] ^= 0x10
        open(shard, "wb").write(b)
        _, p = run(4, plan + ["--save", d, "--resume"], iters=2, check=False)
        ok = p.returncode == 2 and "checksum does not match" in p.stderr
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} resume from a shard with one bit flipped: expected exit 2 and 'checksum "
              f"does not match', got exit {p.returncode}: {p.stderr.strip()[:160]}")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def config_json(h5):
    """A result file's config_json as h5dump prints it, and a reader of its
    numbers by key (nan where absent)."""
    cfg = subprocess.run(["h5dump", "-a", "/config_json", h5], capture_output=True, text=True).stdout
    return cfg, lambda key: float((re.search(r'\\?"%s\\?":\s*([0-9.e+-]+)' % key, cfg) or [0, "nan"])[1])


def outputs():
    global failures
    d = tempfile.mkdtemp(prefix="megasim-run-")
    try:
        h5, trace = os.path.join(d, "run.h5"), os.path.join(d, "run.json")
        run(4, ["--pipeline-model-parallel-size", "2", "--out", h5, "--trace", trace], iters=2)
        dump = subprocess.run(["h5dump", "-H", h5], capture_output=True, text=True).stdout
        kind = subprocess.run(["h5dump", "-a", "/kind", h5], capture_output=True, text=True).stdout
        cfg, num = config_json(h5)
        peak = subprocess.run(["h5dump", "-a", "/summary/peak_memory_per_gpu_bytes", h5], capture_output=True,
                              text=True).stdout
        got_peak = float((re.search(r"\(0\): ([0-9.e+-]+)", peak) or [0, "nan"])[1])
        planned, used, ovh = num("memory_planned_bytes"), num("memory_peak_bytes"), num("timing_overhead_fraction")
        print(f"     /summary peak_memory_per_gpu_bytes {got_peak:.0f}, config_json memory_peak_bytes {used:.0f}, "
              f"memory_planned_bytes {planned:.0f}, timing_overhead_fraction {ovh:.2e}")
        checks = [("root attribute kind", "measurement" in kind),
                  ("/summary peak_memory_per_gpu_bytes is the measured peak (config_json memory_peak_bytes), "
                   "within 15% of the plan (memory_planned_bytes)",
                   abs(got_peak / used - 1) < 1e-5 and abs(used / planned - 1) <= 0.15),  # h5dump: 6 digits
                  ("config_json records the cost of timing (timing_overhead_fraction, under 1% of a step)",
                   0 < ovh < 0.01),
                  ("config_json records the communicators' creation time (comm_init_s)", "comm_init_s" in cfg),
                  ("/iterations dataset", "DATASET \"iterations\"" in dump),
                  ("/iterations columns grad_norm and lr", "\"grad_norm\"" in dump and "\"lr\"" in dump),
                  ("/timeline with an iteration column", "\"iteration\"" in dump),
                  ("/ranks dataset", "DATASET \"ranks\"" in dump)]
        with open(trace) as f:
            tr = json.load(f)
        ev = tr["traceEvents"]
        pids = {e["pid"] for e in ev if e.get("ph") == "X"}
        checks.append(("trace events of all 4 ranks", len(pids) == 4))
        tcfg = tr.get("otherData", {}).get("config", {})
        checks.append(("trace's otherData.config: the run's job (pipeline_model_parallel_size 2) and its options "
                       "under \"run\" with train_iters (docs/schema.md) "
                       f"(got {tcfg.get('job', {}).get('pipeline_model_parallel_size')}, "
                       f"{sorted(k for k in tcfg if k not in ('job', 'hardware', 'version'))})",
                       tcfg.get("job", {}).get("pipeline_model_parallel_size") == 2 and
                       "train_iters" in tcfg.get("run", {}) and "simulate" not in tcfg))
        for what, ok in checks:
            failures += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {what}")
    finally:
        shutil.rmtree(d, ignore_errors=True)


# bf16 kernels against the fp32 CPU run (see gpu_emu for how it was set).
EMU_TOL = 1e-3
# A real GPU runs the very kernels the emulated one runs, with the same bf16
# roundings; what differs is cuBLASLt's summation order and --use_fast_math's
# intrinsics, both at fp32's precision (1e-6). So the emulated GPU's bound
# holds: at most 1.9e-4 seen there (2026-11-23), and the DP-sum break it
# must catch moves a loss by 2.0e-3, which the 2e-2 allowed here before
# let through.
GPU_TOL = EMU_TOL


def expect_bf16(label, want, got, tol):
    """bf16 against fp32: the gradient norm within 1e-2 (bf16's unit
    roundoff is 3.9e-3; the emulated GPU's norms came 1.7e-4 to 4.7e-3
    below the CPU's, 2026-11-25), or tol where that is wider."""
    expect_losses(label, want, got, "bf16 against the reference run", tol, max(tol, 1e-2))


# The emulated NVML's fixed answers (tests/real/emu/nvml_emu.c).
NVML_EMU = {"sm_mhz": 1740.0, "power_w": 650.0, "power_capped": 1.0}


def expect_clock(label, steps, want=None):
    """Each step's GPU clock and power (NVML read every 5 ms on every rank
    while the step ran, rt.h rt->clock): with want, the emulated NVML's
    fixed values, exactly (every rank's mean of one repeated value); else a
    real GPU's range, 0 where the step saw no read."""
    global failures
    if not steps:
        failures += 1
        print(f"FAIL {label}: no JSON step lines to read the clock from")
    for s in steps:
        got = {k: s.get(k) for k in NVML_EMU}
        if want:
            ok = all(got[k] is not None and abs(got[k] - want[k]) <= 1e-6 * want[k] for k in want)
            expected = f"{want} (tests/real/emu/nvml_emu.c)"
        else:
            ok = None not in got.values() and (got["sm_mhz"] == 0 or (100 <= got["sm_mhz"] <= 4000 and
                                                0 < got["power_w"] <= 2000 and 0 <= got["power_capped"] <= 1))
            expected = "sm_mhz 0 (no read) or 100-4000 MHz, power_w 0-2000 W, power_capped 0-1"
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {label} step {s['step']}: expected {expected}, got {got}")


def nvidia_gpus():
    """GPUs nvidia-smi lists (0 where it is absent or fails)."""
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    except OSError:
        return 0
    return sum(l.startswith("GPU ") for l in out.stdout.splitlines()) if out.returncode == 0 else 0


# 4 experts, top-2, dropless, a gated shared expert (gpu, gpu_emu)
MOE_SHARED = ["--num-experts", "4", "--moe-router-topk", "2", "--moe-ffn-hidden-size", "64",
              "--expert-tensor-parallel-size", "1", "--moe-aux-loss-coeff", "0.01",
              "--moe-shared-expert-intermediate-size", "64", "--moe-shared-expert-gate"]


def gpu_or_skip():
    """Exit 77 (skipped) where the machine has no GPU; with one, a module
    that does not load or answer is a failure (exit 1), not a skip."""
    _, p = run(1, ["--device", "gpu"], iters=1, check=False)
    if p.returncode != 0 and "no usable GPU" in p.stderr:
        if not nvidia_gpus():
            print("skipped: no GPU (nvidia-smi lists none; megasim run --device gpu: no usable GPU)")
            sys.exit(77)
        print(f"FAIL nvidia-smi lists {nvidia_gpus()} GPU(s), but megasim run --device gpu says: {p.stderr.strip()}")
        sys.exit(1)


def gpu():
    """GPU path (label gpu): the tiny GPT, and the tiny LLaMA-style model, in
    bf16 on one GPU follow the fp32 CPU run's losses within GPU_TOL, E4M3's
    emulated casts and 4 experts too, and with two GPUs TP 2 + SP equals one GPU within the
    same bound. Exit 77 (skipped) without a GPU."""
    gpu_or_skip()
    cpu, _ = run(1, [], iters=5)
    one, _ = run(1, ["--device", "gpu", "--attention", "flash", "--fused-elementwise"], iters=5)
    pairs = [("1 GPU (bf16) vs 1 CPU rank (fp32)", cpu, one)]
    llama_cpu, _ = run(1, LLAMA, iters=5)
    llama_gpu, _ = run(1, LLAMA + ["--device", "gpu", "--attention", "flash"], iters=5)
    pairs.append(("tiny-llama.json, 1 GPU (bf16) vs 1 CPU rank (fp32)", llama_cpu, llama_gpu))
    fp8 = ["--fp8-format", "e4m3", "--gpu", "h100-sxm-80gb"]  # the casts (check_splits.py fp8_gpu_emu), any GPU
    pairs.append(("--fp8-format e4m3, 1 GPU vs 1 CPU rank", run(1, fp8, iters=5)[0],
                  run(1, ["--device", "gpu", "--attention", "flash"] + fp8, iters=5)[0]))
    pairs.append(("4 experts, top-2, a gated shared expert, 1 GPU vs 1 CPU rank", run(1, MOE_SHARED, iters=5)[0],
                  run(1, ["--device", "gpu", "--attention", "flash"] + MOE_SHARED, iters=5)[0]))
    ngpu = max(nvidia_gpus(), 1)
    if ngpu >= 2:  # NCCL needs a GPU per rank
        two, _ = run(2, ["--device", "gpu", "--attention", "flash", "--fused-elementwise",
                         "--tensor-model-parallel-size", "2", "--sequence-parallel"], iters=5)
        pairs.append(("2 GPUs TP 2 + SP vs 1 GPU", one, two))
    else:
        print("note: one GPU: the 2-GPU TP case needs two")
    for label, want, got in pairs:
        expect_bf16(label, want, got, GPU_TOL)
    expect_clock("1 GPU, its SM clock and power", one)


def with_etp(args, etp):
    """args with --expert-tensor-parallel-size etp in place of the value
    they give (the MoE cases here and in check_moe.py)."""
    i = args.index("--expert-tensor-parallel-size")
    return args[:i + 1] + [str(etp)] + args[i + 2:]


def gemm_algos(gpu, d, tuned):
    """--gemm-algos DIR on the emulated GPU, whose cuBLASLt offers 3
    candidates (split-K 1, 2, 4: other roundings of the same sums): the
    run `tuned` tuned each GEMM problem when it first met it and wrote its
    choices to d; a second run reads them back and trains bit for bit as
    the first; a broken line in the file is one message naming the file
    and line, exit 2."""
    global failures
    again, _ = run(1, gpu + ["--gemm-algos", d], iters=ITERS_EMU)
    expect_losses("emulated GPU, --gemm-algos, the choices read back", tuned, again, "the run that tuned them", 0.0)
    path = os.path.join(d, "rank-0.txt")
    lines = open(path).read().splitlines()
    rows = [l.split() for l in lines[2:]]
    ok = lines[:1] == ["megasim-gemm-algos 1"] and lines[1].startswith("device ") and len(rows) >= 4 and \
        all(len(r) == 13 and 0 <= int(r[11]) < 3 for r in rows)
    failures += not ok
    print(f"{'ok  ' if ok else 'FAIL'} --gemm-algos file: expected the header, the device and at least 4 "
          f"problems each with a candidate of the 3 offered, got {len(rows)} problems: {lines[:4]}")
    with open(path, "a") as f:
        f.write("1 2 3\n")
    _, p = run(1, gpu + ["--gemm-algos", d], iters=1, check=False)
    errs = [l for l in p.stderr.splitlines() if "error:" in l]
    want = f"rank-0.txt:{len(lines) + 1}: expected 13 numbers"
    ok = p.returncode == 2 and len(errs) == 1 and want in errs[0]
    failures += not ok
    print(f"{'ok  ' if ok else 'FAIL'} --gemm-algos, a broken line: expected exit 2 and one message with "
          f"'{want}', got exit {p.returncode}: {errs}")


def gpu_emu():
    """The GPU backend's own code on the emulated GPU module (no GPU needed):
      - 1 rank, flash attention + fused element-wise kernels (cuBLASLt's
        choices tuned, --gemm-algos: gemm_algos), and the
        unfused attention (cuBLASLt batched GEMMs), each against the fp32
        CPU run, and each with dropout (the same masks on both); likewise the LLaMA-style model (rotary positions, RMSNorm,
        SwiGLU, no linear biases, an untied output layer: the RoPE, RMS and
        SwiGLU kernels, GEMMs without a bias epilogue);
      - 8 ranks (TP 2 + SP, PP 2 interleaved, DP 2, ZeRO-2: the equivalence
        plan), every overlap off (grouped NCCL transfers) and on (decoupled
        pipeline links, chunked TP GEMMs on the second compute stream, DP
        collectives on their stream), against 1 emulated GPU;
      - the every-overlap run again with each stream jittered
        (CUDA_EMU_STREAM_JITTER_US), bit for bit: a cross-stream order left
        to chance changes the bits (with rt_gpu.c's event waits taken out,
        jittered runs differed at step 3 from run to run, 2026-11-23);
      - 4 ranks (TP 2, DP 2, ZeRO-1) with the parallel block, LAMB and
        FlashAttention-1, against 1; 2 ranks of CP 2, a2a and p2p (NCCL's
        all-to-all, the flash kernels on key blocks, the merge) against 1;
        experts on 1 and on 2 ranks (EP 2, each dispatcher; TP 2 with
        ETP 2) against 1;
      - a checkpoint resumed on 4 emulated GPUs (REL_TOL), and the op times
        of a 2-rank trace (gpu_timeline).
    Tolerance EMU_TOL: the emulation is deterministic (fibers in a fixed
    order, NCCL sums in rank order), so what differs is bf16 rounding in
    another summation order, at most 1.9e-4 (2026-11-23); the DP
    reduce-scatter without its sum moved step 2 by 2.0e-3 and failed
    (docs/gpu.md, "The GPU path without a GPU")."""
    global MPI_ENV, failures
    MPI_ENV = list(EMU_MPI_ENV)
    gpu = ["--device", "gpu", "--attention", "flash", "--fused-elementwise"]
    cpu, _ = run(1, [], iters=ITERS_EMU)
    algos = tempfile.mkdtemp(prefix="megasim-algos-")
    flash, _ = run(1, gpu + ["--gemm-algos", algos], iters=ITERS_EMU)  # cuBLASLt's choices tuned (gemm_algos)
    expect_bf16("emulated GPU, flash + fused, vs 1 CPU rank (fp32)", cpu, flash, EMU_TOL)
    expect_clock("emulated GPU (emulated NVML), clock and power", flash, NVML_EMU)
    clock_keys = sorted(k for s in cpu for k in NVML_EMU if k in s)
    failures += bool(clock_keys)
    print(f"{'FAIL' if clock_keys else 'ok  '} the CPU run's steps carry no GPU clock: expected no "
          f"{sorted(NVML_EMU)}, got {clock_keys or 'none'}")
    unfused, _ = run(1, ["--device", "gpu", "--attention", "unfused"], iters=ITERS_EMU)
    expect_bf16("emulated GPU, unfused attention, vs 1 CPU rank (fp32)", cpu, unfused, EMU_TOL)
    arch = LLAMA
    cpu_arch, _ = run(1, arch, iters=ITERS_EMU)
    gpu_arch, _ = run(1, gpu + arch, iters=ITERS_EMU)
    expect_bf16("emulated GPU, tiny-llama.json (rotary, RMSNorm, SwiGLU, no linear biases, untied, GQA), vs 1 "
                "CPU rank (fp32)", cpu_arch, gpu_arch, EMU_TOL)
    gemm_algos(gpu, algos, flash)
    shutil.rmtree(algos, ignore_errors=True)
    cpu_drop, _ = run(1, DROPOUT, iters=ITERS_EMU)
    # the dropout kernels (fused into the add and the norm, or the dropout-add), the attention kernels' masks
    for attn, fuse in (("flash", FUSED), ("unfused", [])):
        gpu_drop, _ = run(1, ["--device", "gpu", "--attention", attn] + fuse + DROPOUT, iters=ITERS_EMU)
        expect_bf16(f"emulated GPU, dropout 0.1, {attn} attention{', fused element-wise' if fuse else ''}, vs 1 "
                    f"CPU rank (fp32)", cpu_drop, gpu_drop, EMU_TOL)
    every = sum(OVERLAPS, [])
    for ov in ([], every):
        got, _ = run(8, PLAN8 + gpu + ov, iters=ITERS_EMU)
        expect_bf16(f"8 emulated GPUs, {' '.join(ov) or 'no overlap'}, vs 1 emulated GPU", flash, got, EMU_TOL)
    expect_clock("8 emulated GPUs, every overlap, clock and power over the ranks", got, NVML_EMU)
    MPI_ENV += ["-x", "CUDA_EMU_STREAM_JITTER_US=500"]  # each stream waits 0-500 us before each piece of work
    shaken, _ = run(8, PLAN8 + gpu + every, iters=ITERS_EMU)
    MPI_ENV = MPI_ENV[:-2]
    expect_losses("8 emulated GPUs, every overlap, streams jittered 0-500 us", got, shaken, "not jittered", 0.0)
    other = ["--device", "gpu", "--parallel-block", "--optimizer", "lamb", "--attention", "flash1"]
    one, _ = run(1, other, iters=ITERS_EMU)
    four, _ = run(4, other + ["--tensor-model-parallel-size", "2", "--use-distributed-optimizer"],
                  iters=ITERS_EMU)
    expect_bf16("4 emulated GPUs (TP 2, DP 2, ZeRO-1), parallel block, LAMB, FlashAttention-1, vs 1",
                one, four, EMU_TOL)
    # context parallelism: NCCL's all-to-all (a2a: grouped sends and receives), the CUDA flash kernels on
    # blocks of keys and the log-sum-exp merge kernel with the ring on the TP stream (p2p; all_gather's
    # blocks are p2p's diagonal and full ones, its gather and reduce-scatter NCCL's as DP's)
    for ctype in ("a2a", "p2p"):
        cp2, _ = run(2, gpu + ["--context-parallel-size", "2", "--cp-comm-type", ctype], iters=2)
        expect_bf16(f"2 emulated GPUs (CP 2, --cp-comm-type {ctype}) vs 1 emulated GPU", flash[:2], cp2, EMU_TOL)
    # experts: the CUDA router and permutation kernels (kernels/moe.cu) and NCCL's all-to-all with a count per
    # member (alltoall) or its gather and reduce-scatter (allgather), dropless (bf16 moves a capacity's ties)
    moe = MOE_SHARED
    cpu_moe, _ = run(1, moe, iters=2)
    gpu_moe, _ = run(1, gpu + moe, iters=2)
    expect_bf16("emulated GPU, 4 experts, top-2, a gated shared expert, vs 1 CPU rank (fp32)", cpu_moe, gpu_moe,
                EMU_TOL)
    for disp in ("alltoall", "allgather"):  # one step: its gradient norm holds the backward
        ep2, _ = run(2, gpu + moe + ["--expert-model-parallel-size", "2", "--moe-token-dispatcher-type", disp], iters=1)
        expect_bf16(f"2 emulated GPUs (EP 2, {disp} dispatcher) vs 1 emulated GPU", gpu_moe[:1], ep2, EMU_TOL)
    # experts cut by ETP 2 (TP 2): NCCL's all-to-all with a count per member over ETP, the partial sums added
    etp = with_etp(moe, 2)
    etp2, _ = run(2, gpu + etp + ["--tensor-model-parallel-size", "2", "--sequence-parallel"], iters=2)
    expect_bf16("2 emulated GPUs (TP 2 + SP, experts cut by ETP 2) vs 1 emulated GPU", gpu_moe, etp2, EMU_TOL)
    resume(["--device", "gpu"])  # the GPU runtime's own state copies, to the CPU case's tolerance
    gpu_timeline()


def gpu_timeline():
    """The GPU runtime's op times (CUDA events resolved at iteration end)
    in the Chrome trace of 2 ranks, PP 2 with decoupled transfers: every
    rank there, no negative duration, and on each (rank, stream) no op
    starting before the previous one ended (a stream runs one op at a
    time). A sanity check of the event bookkeeping: it does not see a mark
    recorded on another stream than its op's (tried: such times stay
    ordered)."""
    global failures
    d = tempfile.mkdtemp(prefix="megasim-gpu-trace-")
    try:
        trace, h5 = os.path.join(d, "run.json"), os.path.join(d, "run.h5")
        run(2, ["--device", "gpu", "--pipeline-model-parallel-size", "2", "--pp-comm-overlap", "--trace", trace,
                "--out", h5], iters=2)
        gpu_clock_in_file(h5)
        with open(trace) as f:
            ev = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
        lanes = {}
        for e in ev:
            lanes.setdefault((e["pid"], e["tid"]), []).append(e)
        neg = sum(e["dur"] < 0 for e in ev)
        overlaps = 0
        for v in lanes.values():
            v.sort(key=lambda e: e["ts"])
            overlaps += sum(a["ts"] + a["dur"] > b["ts"] + 1e-3 for a, b in zip(v, v[1:]))
        ranks = {e["pid"] for e in ev}
        ok = len(ranks) == 2 and neg == 0 and overlaps == 0 and len(ev) > 0
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} emulated GPU trace (2 ranks, PP 2, decoupled): expected both ranks, no "
              f"negative duration, no overlap within a stream; got ranks {sorted(ranks)}, {len(ev)} ops on "
              f"{len(lanes)} (rank, stream) lanes, {neg} negative, {overlaps} overlapping")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def gpu_clock_in_file(h5):
    """The run file's GPU clock (emulated NVML): each /iterations row's
    sm_mhz, power_w, power_capped, and config_json's means over the steps
    after the first with their read count."""
    global failures
    rows = subprocess.run(["h5dump", "-d", "/iterations", "-m", "%.6f", h5], capture_output=True, text=True).stdout
    _, num = config_json(h5)
    cols = [float(x) for x in re.findall(r"^\s+([0-9.e+-]+),?$", rows, re.M)]
    names = re.findall(r'H5T_\w+\s+"(\w+)";', rows)  # the compound's members, in order
    at = [names.index(k) for k in ("sm_mhz", "power_w", "power_capped")]
    per = [[cols[i + k] for k in at] for i in range(0, len(cols), len(names))]
    want = [NVML_EMU[k] for k in ("sm_mhz", "power_w", "power_capped")]
    got = [num("sm_clock_mhz"), num("power_w"), num("power_capped_fraction")]
    ok = (len(per) == 2 and all(r == want for r in per) and num("clock_reads") > 0 and
          all(abs(g - w) <= 1e-9 * w for g, w in zip(got, want)))
    failures += not ok
    print(f"{'ok  ' if ok else 'FAIL'} run file's GPU clock: expected /iterations sm_mhz, power_w, power_capped "
          f"{want} on both steps and config_json sm_clock_mhz, power_w, power_capped_fraction the same with "
          f"clock_reads > 0 (tests/real/emu/nvml_emu.c); got rows {per}, config {got}, "
          f"clock_reads {num('clock_reads'):.0f}")
    cmp = subprocess.run([MEGASIM, "compare", h5, "--json", "--plot", h5[:-3] + "-compare"], capture_output=True,
                         text=True)
    shown = json.loads(cmp.stdout).get("gpu_clock", {}) if cmp.returncode == 0 else {}
    got_cmp = [shown.get(k) for k in ("sm_mhz", "power_w", "power_capped_fraction")]
    ok = got_cmp == want
    failures += not ok
    print(f"{'ok  ' if ok else 'FAIL'} megasim compare --json gpu_clock (the run file's, shown beside the "
          f"prediction): expected {want}, got {got_cmp} (exit {cmp.returncode})")


if __name__ == "__main__":  # (check_splits.py imports the helpers above)
    {"gpu": gpu, "gpu_emu": gpu_emu, "equivalence": equivalence, "recompute": recompute,
     "learns": learns, "resume": resume, "outputs": outputs}[CASE]()
    sys.exit(1 if failures else 0)
