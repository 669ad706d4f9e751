#!/usr/bin/env python3
"""tests/kernels/check_bench.py: runs `kern_bench --tiny` (built against the
emulated GPU) and checks that every row the bench promises is printed, once
per shape it is promised for, with a positive time, and that the numbers
scripts/gpu-kernels.sh reads from it (awk: the attention_flash_fwdbwd row
of the 175B shape, field NF-3) come out; and that bad arguments get one
line and exit 2. Times mean nothing here.

usage: check_bench.py KERN_BENCH"""
import math
import subprocess
import sys

ATTN_SHAPES = 3  # 175B/TP8,1.3B; sliding window; GQA 4
EXPECTED = {
    **{f"attention_{a}_{p}": ATTN_SHAPES for a in ("flash", "flash1", "flash_simt") for p in ("fwd", "bwd", "fwdbwd")},
    "attention_unfused_fwdbwd": ATTN_SHAPES,
    **{f"attention_flash_fwd_t{t}": ATTN_SHAPES for t in ("1x64", "2x32", "2x64")},
    **{f"attention_flash_bwd_w{w}": ATTN_SHAPES for w in (4, 8)},
    **{k: 2 for k in ("layernorm_residual_fwd", "layernorm_residual_bwd", "bias_gelu_fwd_fused",
                      "bias_gelu_fwd_unfused", "bias_gelu_bwd_fused", "bias_gelu_bwd_unfused")},
    "crossentropy_fwdbwd": 1,
    **{k: 5 for k in ("gemm_cublas_plain", "matmul_fwd_bias", "matmul_fwd_bias_gelu", "matmul_fwd_4_row_chunks")},
    "adamw_multi_tensor": 1,
    "lamb_multi_tensor": 1,
}


def main():
    p = subprocess.run([sys.argv[1], "--tiny"], capture_output=True, text=True, timeout=280)
    print(p.stdout, end="")
    failures = 0
    if p.returncode != 0:
        print(f"FAIL kern_bench --tiny exited {p.returncode}, expected 0: {p.stderr.strip()}")
        sys.exit(1)
    rows = [l.split() for l in p.stdout.splitlines() if l and not l.startswith("#")]
    got = {}
    for r in rows:
        got[r[0]] = got.get(r[0], 0) + 1
        t = float(r[-4])  # time_us: NF-3, as gpu-kernels.sh reads it
        if not (math.isfinite(t) and t > 0):
            print(f"FAIL {r[0]}: time_us {r[-4]}, expected a positive number")
            failures += 1
    for name, n in sorted(EXPECTED.items()):
        ok = got.get(name, 0) == n
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: expected {n} rows (one per shape), got {got.get(name, 0)}")
    for name in sorted(set(got) - set(EXPECTED)):
        print(f"FAIL {name}: a row this check does not know; add it to EXPECTED")
        failures += 1
    for args, rc, say in ((["--bogus"], 2, "unknown option '--bogus'"), (["a", "b"], 2, "one FILTER only"),
                          (["--help"], 0, "usage: kern_bench")):
        q = subprocess.run([sys.argv[1]] + args, capture_output=True, text=True, timeout=60)
        ok = q.returncode == rc and say in q.stdout + q.stderr
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} kern_bench {' '.join(args)}: expected exit {rc} saying \"{say}\", "
              f"got exit {q.returncode}: {(q.stdout + q.stderr).strip().splitlines()[0] if (q.stdout + q.stderr).strip() else ''}")
    ours = [r[-4] for r in rows if r[0] == "attention_flash_fwdbwd" and "175B" in " ".join(r)]
    ok = len(ours) == 1
    failures += not ok
    print(f"{'ok  ' if ok else 'FAIL'} gpu-kernels.sh's side-by-side finds one 175B attention_flash_fwdbwd time: {ours}")
    print(f"check_bench: {'PASS' if failures == 0 else f'FAIL ({failures})'}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
