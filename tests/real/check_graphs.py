#!/usr/bin/env python3
"""tests/real/check_graphs.py: `megasim run --enable-cuda-graph` on the
emulated GPU (its module the 4th argument), using check_run.py's helpers;
expected vs got per step.

  gpu_emu  each forward and backward pass from the second iteration on is
           captured and launched as a CUDA graph (real/rt_gpu_graph.c):
           the same kernels with the same arguments in the same order, so
           the losses and gradient norms must equal the uncaptured run's
           bit for bit, with dropout (each iteration's seeds reach the
           graph through cudaGraphExecUpdate: a graph replayed with its
           first capture's seeds moves step 3's loss); on TP 2 with SP,
           --tp-comm-overlap and FP8 (the TP collectives captured, NCCL's
           turn on its communicator taken at each launch; the rings'
           transfers on the TP stream and the chunked GEMMs and their casts
           on the second compute stream forked into the capture and joined
           back, as is the input gradient's reduction beside the weight
           gradient), on TP 2
           without SP (the first backward layer waits for the TP stream
           before using it: the TP stream joins each capture at its start),
           on PP 2 interleaved x DP 2 with every overlap and FP8's casts
           (their amaxes kept on the device) and on CP 2 with the p2p ring;
           each graphed run's step lines count the passes launched as
           graphs, and a 1-rank run's end report says how many ran as
           graphs and how many were instantiated
  gpu      (label gpu) the same on the GPU at hand, 1 rank, with dropout and
           with FP8: bit for bit the uncaptured run where that run repeats
           itself bit for bit (run twice to see; a kernel whose sums land
           in another order each run would make it 1e-3, bf16's bound), and
           the pass count; skipped without a GPU

Usage: check_graphs.py CASE MPIEXEC MEGASIM [EMULATED_GPU_MODULE]"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_run as cr  # noqa: E402  (reads CASE, MPIEXEC, MEGASIM from sys.argv)

GPU = ["--device", "gpu", "--attention", "flash", "--fused-elementwise"] + cr.DROPOUT
PP2 = ["--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "1",
       "--overlap-grad-reduce", "--use-distributed-optimizer", "--pp-comm-overlap"]
CP2 = ["--context-parallel-size", "2", "--cp-comm-type", "p2p", "--global-batch-size", "4"]
HALF = ["--global-batch-size", "8"]  # 4 micro-batches of 2: the TP cases' captures are the same 8 ones twice
ITERS = 3  # the second and third iterations captured: the third updates the graphs the second made
FP8 = ["--fp8-format", "e4m3", "--gpu", "h100-sxm-80gb"]  # the casts' amaxes on the device, read at the end


def expect_pass_count(what, env=None):
    """1 rank, 8 micro-batches: 16 passes an iteration, captured from the
    second on; each slot's graph instantiated once."""
    p = subprocess.run([cr.MEGASIM, "run"] + GPU + ["--enable-cuda-graph", "--train-iters", str(ITERS)],
                       capture_output=True, text=True, timeout=300, env=env)
    m = re.search(r"(\d+) passes ran as CUDA graphs on rank 0 \((\d+) instantiated\)", p.stdout)
    got = (int(m[1]), int(m[2])) if m else None
    want = (16 * (ITERS - 1), 16)
    ok = p.returncode == 0 and got == want
    cr.failures += not ok
    print(f"{'ok  ' if ok else 'FAIL'} {what}, {ITERS} iterations of 16 passes: expected (passes as graphs, "
          f"instantiated) {want}, got {got} (exit {p.returncode}) (run's timing line)")


def expect_graph_passes(what, steps, per_iter):
    """The graphed run's last JSON step line: rank 0's passes launched as
    graphs so far, every pass of the iterations after the first."""
    want = per_iter * (ITERS - 1)
    got = steps[-1].get("graph_passes") if steps else None
    ok = got == want
    cr.failures += not ok
    print(f"{'ok  ' if ok else 'FAIL'} {what}: expected {want} passes as CUDA graphs on rank 0 ({per_iter} an "
          f"iteration: 2 x chunks x micro-batches, from the second iteration on), got {got} (step line's graph_passes)")


def gpu_emu():
    cr.MPI_ENV = list(cr.EMU_MPI_ENV)
    tp2 = ["--tensor-model-parallel-size", "2"] + HALF
    for np_, plan, per_iter, what in (
            (2, tp2 + ["--sequence-parallel", "--tp-comm-overlap"] + FP8, 8,
             "2 emulated GPUs, TP 2 + SP with --tp-comm-overlap (the rings and the second compute stream captured), "
             "FP8 (e4m3), 4 micro-batches"),
            (2, tp2, 8, "2 emulated GPUs, TP 2 without SP, 4 micro-batches"),
            (4, PP2 + FP8, 16, "4 emulated GPUs, PP 2 interleaved x DP 2, FP8 (e4m3)"),
            (2, CP2, 4, "2 emulated GPUs, CP 2 (the p2p ring captured), 2 micro-batches")):
        plain, _ = cr.run(np_, GPU + plan, iters=ITERS)
        graphed, _ = cr.run(np_, GPU + plan + ["--enable-cuda-graph"], iters=ITERS)
        cr.expect_losses(f"{what}, dropout 0.1, --enable-cuda-graph", plain, graphed, "without graphs", 0.0)
        expect_graph_passes(what, graphed, per_iter)
    expect_pass_count("1 emulated GPU", dict(os.environ, **cr.EMU_ENV))


def gpu():
    cr.gpu_or_skip()
    for plan, what in (([], "1 GPU"), (FP8, "1 GPU, FP8 (e4m3)")):
        # cr.run keeps a repeated command's first result: "--train-iters" given twice makes the repeat a new command
        plain, _ = cr.run(1, GPU + plan, iters=ITERS)
        again, _ = cr.run(1, GPU + plan + ["--train-iters", str(ITERS)], iters=ITERS)
        repeats = all(a["loss"] == b["loss"] and a["grad_norm"] == b["grad_norm"] for a, b in zip(plain, again))
        print(f"note {what}: the uncaptured run {'repeats' if repeats else 'does not repeat'} itself bit for bit")
        graphed, _ = cr.run(1, GPU + plan + ["--enable-cuda-graph"], iters=ITERS)
        cr.expect_losses(f"{what}, dropout 0.1, --enable-cuda-graph", plain, graphed, "without graphs",
                         0.0 if repeats else cr.EMU_TOL)
    expect_pass_count("1 GPU")


if __name__ == "__main__":
    {"gpu_emu": gpu_emu, "gpu": gpu}[cr.CASE]()
    sys.exit(1 if cr.failures else 0)
