#!/usr/bin/env python3
"""tests/real/check_cudnn.py: `megasim run --device gpu --attention-backend
cudnn` (cuDNN's fused attention, real/cudnn_attn.c) against megasim's own
flash kernels on the GPU at hand, using check_run.py's helpers; expected vs
got per step. Label gpu: skipped (77) without a GPU.

  gpu  the tiny GPT, 1 rank, 3 steps, without dropout: causal, GQA (4 heads
       over 2 KV heads), and a sliding window of 16: each step's loss within
       2e-3 and gradient norm within 2e-2 (relative) of megasim's kernels'.
       Both sides compute the same attention in bf16 with fp32 sums; they
       round in another order (bf16 keeps 8 bits: 3.9e-3 per value), and the
       loss averages that over every token. With dropout 0.1 (masks from
       cuDNN's own generator, not megasim's, so the runs differ by more):
       losses within 5e-2, and the cuDNN run twice gives the same losses bit
       for bit (cudnn_attn.c plans a deterministic backward where cuDNN has
       one; the project's determinism rule).

Usage: check_cudnn.py CASE MPIEXEC MEGASIM"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_run as cr  # noqa: E402  (reads CASE, MPIEXEC, MEGASIM from sys.argv)

GPU = ["--device", "gpu", "--attention", "flash", "--fused-elementwise"]
CUDNN = ["--attention-backend", "cudnn"]
ITERS = 3


def gpu():
    cr.gpu_or_skip()
    for extra, what in (([], "causal"), (["--num-query-groups", "2"], "GQA 4 over 2"),
                        (["--sliding-window", "16"], "sliding window 16")):
        ours, _ = cr.run(1, GPU + extra, iters=ITERS)
        theirs, p = cr.run(1, GPU + extra + CUDNN, iters=ITERS, check=False)
        if p.returncode != 0:
            cr.failures += 1
            print(f"FAIL {what}: megasim run --attention-backend cudnn exited {p.returncode}: {p.stderr.strip()}")
            continue
        cr.expect_losses(f"{what}, cuDNN's attention", ours, theirs, "megasim's flash kernels", 2e-3, 2e-2)
    ours, _ = cr.run(1, GPU + cr.DROPOUT, iters=ITERS)
    once, p = cr.run(1, GPU + cr.DROPOUT + CUDNN, iters=ITERS, check=False)
    if p.returncode != 0:
        cr.failures += 1
        print(f"FAIL dropout: megasim run --attention-backend cudnn exited {p.returncode}: {p.stderr.strip()}")
        return
    cr.expect_losses("dropout 0.1, cuDNN's attention (its own masks)", ours, once, "megasim's flash kernels", 5e-2,
                     5e-1)
    # cr.run keeps a repeated command's first result: "--train-iters" given twice makes the repeat a new command
    twice, _ = cr.run(1, GPU + cr.DROPOUT + CUDNN + ["--train-iters", str(ITERS)], iters=ITERS)
    cr.expect_losses("dropout 0.1, cuDNN's attention run again", once, twice, "its first run", 0.0)


if __name__ == "__main__":
    {"gpu": gpu}[cr.CASE]()
    sys.exit(1 if cr.failures else 0)
