#!/usr/bin/env python3
"""scripts/crosscheck-megatron.py: predicts NVIDIA's own published
Megatron-LM MFU figures (22B to 1T GPT on A100, Selene: the Megatron-LM
README's table, data-parallel size 1, and the 530B run on 2,240 GPUs of
Korthikanti et al. 2022) with the closed form and the simulator, and prints
published vs predicted.

A check of the model's compute side against numbers from outside the
MegaScale paper: the rows (experiments/megatron-mfu/) run on the built-in
`fattree` cluster (a DGX SuperPOD like Selene), which carries the Table 3
fit's compute_scale and host_sync_gap_us but none of the MegaScale
environment's per-iteration terms (see experiments/megascale/ASSUMPTIONS.md).

  usage: scripts/crosscheck-megatron.py [--megasim build/megasim]
                                        [--max-err POINTS]
With --max-err, exits 1 if any row's |error| (either executor) exceeds it.
"""
import argparse
import glob
import json
import os
import subprocess
import sys


def predict(megasim, cmd, row):
    out = subprocess.run([megasim, cmd, "--config", row, "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"crosscheck-megatron: {megasim} {cmd} --config {row} failed:\n{out.stderr.strip()}")
    return json.loads(out.stdout)["mfu"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--megasim", default="build/megasim", help="megasim binary (default build/megasim)")
    ap.add_argument("--rows", default="experiments/megatron-mfu", help="folder of row files")
    ap.add_argument("--max-err", type=float, default=None, help="fail if any |error| exceeds this, MFU points")
    a = ap.parse_args()
    if not os.access(a.megasim, os.X_OK):
        sys.exit(f"crosscheck-megatron: {a.megasim} is not an executable (build first, or pass --megasim)")
    rows = sorted(glob.glob(os.path.join(a.rows, "*.json")))
    if not rows:
        sys.exit(f"crosscheck-megatron: no row files in {a.rows}")

    print("NVIDIA's published Megatron-LM MFU (A100, Selene) vs megasim "
          "(MFU %; error = predicted - published, points)")
    print(f"  {'row':<34} {'GPUs':>5} {'TPxPP':>6} {'published':>9} {'closed':>7} {'error':>6} {'sim':>7} {'error':>6}")
    worst, total, n = 0.0, 0.0, 0
    for row in rows:
        with open(row) as f:
            cfg = json.load(f)
        paper = 100 * cfg["paper"]["mfu"]
        closed = 100 * predict(a.megasim, "predict", row)
        sim = 100 * predict(a.megasim, "simulate", row)
        ec, es = closed - paper, sim - paper
        worst = max(worst, abs(ec), abs(es))
        total += abs(es)
        n += 1
        plan = f"{cfg['tensor_model_parallel_size']}x{cfg['pipeline_model_parallel_size']}"
        print(f"  {cfg['name']:<34} {cfg['num_gpus']:>5} {plan:>6} {paper:>9.1f} {closed:>7.1f} {ec:>+6.1f} "
              f"{sim:>7.1f} {es:>+6.1f}")
    print(f"  mean |error| {total / n:.2f} points (simulator), max {worst:.2f} (either executor)")
    print("  source: NVIDIA/Megatron-LM README (MFU/HFU table, data-parallel size 1); Korthikanti et al., "
          "arXiv 2205.05198 (abstract: 2,240 GPUs; Table 3: configurations)")
    if a.max_err is not None:
        ok = worst <= a.max_err
        print(f"  every row within {a.max_err:.1f} points: {'yes' if ok else 'NO'} (max {worst:.2f})")
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
