#!/usr/bin/env python3
"""scripts/gpu-emu-sweep.py: the GPU backend's own code (real/rt_gpu.c,
comm_nccl.c, the CUDA kernels, every cuBLASLt and NCCL call) on the
emulated GPU module (build/libmegasim_gpu_emu.so, tests/real/gpu_emu),
plan by plan against the CPU path's same plan: both train the tiny GPT for
3 steps under mpirun and each step's loss must agree within --tol.

CI's real_run_gpu_emu covers the main plans; this sweeps the rest of the
switches (recomputation, PP 4 with GPipe and decoupled transfers, TP 4 with
ring overlap, ZeRO-1 and plain DP, GQA with a window, unfused and
FlashAttention-1 kernels, LAMB with the parallel block and every overlap).
Minutes on 2 cores; speeds mean nothing.

  usage: scripts/gpu-emu-sweep.py [--build build] [--tol 1e-3] [CASE ...]
Exits 1 if a case fails to run or disagrees.
"""
import argparse
import json
import os
import subprocess
import sys

TP2 = ["--tensor-model-parallel-size", "2"]
PP2 = ["--pipeline-model-parallel-size", "2"]
CASES = [  # name, ranks, flags
    ("PP 2 interleaved + TP 2 + SP, full recomputation", 8,
     TP2 + PP2 + ["--num-layers-per-virtual-pipeline-stage", "1", "--sequence-parallel",
                  "--recompute-granularity", "full"]),
    ("PP 4, 1F1B, decoupled transfers", 4, ["--pipeline-model-parallel-size", "4", "--pp-comm-overlap"]),
    ("PP 4, GPipe", 4, ["--pipeline-model-parallel-size", "4", "--pipeline-schedule", "gpipe"]),
    ("TP 4 + SP, ring overlap", 4, ["--tensor-model-parallel-size", "4", "--sequence-parallel", "--tp-comm-overlap"]),
    ("DP 4, ZeRO-1, overlapped reduce and gather", 4,
     ["--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather"]),
    ("DP 4, all-reduce, overlapped", 4, ["--overlap-grad-reduce"]),
    ("TP 2, GQA 2, window 16, flash", 4, TP2 + ["--num-query-groups", "2", "--sliding-window", "16",
                                                "--attention", "flash"]),
    ("TP 2 + PP 2 + DP 2, ZeRO-2, LAMB, parallel block, every overlap", 8,
     TP2 + PP2 + ["--sequence-parallel", "--optimizer", "lamb", "--use-distributed-optimizer", "--zero-stage", "2",
                  "--parallel-block", "--tp-comm-overlap", "--pp-comm-overlap", "--overlap-grad-reduce",
                  "--overlap-param-gather"]),
    ("TP 2 + SP, unfused attention, fused element-wise", 2,
     TP2 + ["--sequence-parallel", "--fused-elementwise", "--attention", "unfused"]),
    ("PP 2, GPipe, FlashAttention-1", 2, PP2 + ["--pipeline-schedule", "gpipe", "--attention", "flash1"]),
]


def losses(args, ranks, flags, gpu):
    module = os.path.abspath(os.path.join(args.build, "libmegasim_gpu_emu.so"))
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(ranks), "-x", "OMPI_MPI_THREAD_LEVEL=3",
           "-x", "MEGASIM_GPU_MODULE=" + module, os.path.join(args.build, "megasim"), "run", "--train-iters", "3",
           "--json"] + flags + (["--device", "gpu"] if gpu else [])
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        return None, p.stderr.strip().splitlines()[-1:] or ["exit %d" % p.returncode]
    return [json.loads(l)["loss"] for l in p.stdout.splitlines() if l.startswith("{")], None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--tol", type=float, default=1e-3, help="relative, per step (default 1e-3, as real_run_gpu_emu)")
    ap.add_argument("case", nargs="*", type=int, help="case numbers (default: all)")
    args = ap.parse_args()
    bad = 0
    print(f"{'#':>2}  {'case':<62} {'ranks':>5}  {'max rel diff':>12}")
    for i, (name, ranks, flags) in enumerate(CASES):
        if args.case and i not in args.case:
            continue
        cpu, err_c = losses(args, ranks, flags, False)
        gpu, err_g = losses(args, ranks, flags, True)
        if cpu is None or gpu is None or len(cpu) != len(gpu) or not cpu:
            bad += 1
            print(f"{i:>2}  {name:<62} {ranks:>5}  FAILED TO RUN: {err_c or err_g}")
            continue
        rel = max(abs(c - g) / abs(c) for c, g in zip(cpu, gpu))
        bad += rel > args.tol
        print(f"{i:>2}  {name:<62} {ranks:>5}  {rel:12.2e}  {'ok' if rel <= args.tol else 'DIFFERS'}"
              f"  (cpu {' '.join('%.5f' % x for x in cpu)}; emulated gpu {' '.join('%.5f' % x for x in gpu)})",
              flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
