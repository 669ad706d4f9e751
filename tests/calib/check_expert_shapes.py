#!/usr/bin/env python3
"""check_expert_shapes.py MEGASIM: a --tiny CPU calibration (one process)
naming the tiny GPT with 4 experts, top-2, expert FFN 64: its GEMM samples
hold a local expert's FC1 and FC2 over the even split's rows (128 tokens x
top-2 / 4 experts = 64 rows), each in its three passes, beside the dense
layers', and the provenance says so (cmd/calibrate.c job_shapes, calib/bench.c
calib_job_layers). Prints expected vs got."""
import json
import os
import re
import subprocess
import sys
import tempfile

megasim = sys.argv[1]
job = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "experiments", "real", "tiny-gpt.json")
failures = 0
with tempfile.TemporaryDirectory(prefix="megasim-calib-experts-") as d:
    out = os.path.join(d, "p.json")
    p = subprocess.run([megasim, "calibrate", job, "--num-experts", "4", "--moe-router-topk", "2",
                        "--moe-ffn-hidden-size", "64", "--expert-tensor-parallel-size", "1", "--device", "cpu",
                        "--tiny", "--out", out], capture_output=True, text=True)
    if p.returncode != 0:
        print(f"FAIL calibrate exited {p.returncode}: {p.stderr.strip()[:300]}")
        sys.exit(1)

    def col(name):
        dump = subprocess.run(["h5dump", "-d", f"/gemm/{name}", "-y", "-w", "0", out[:-5] + ".h5"],
                              capture_output=True, text=True).stdout
        return [float(v) for v in re.search(r"DATA \{(.*?)\}", dump, re.S).group(1).replace("\n", " ").split(",")
                if v.strip()]

    rows = list(zip(*(col(c) for c in ("m", "n", "k", "pass", "hidden"))))
    job_rows = [(m, n, k, p) for m, n, k, p, h in rows if h == 64]  # the named job's (squares: hidden 0)
    # FC1 and FC2 both 64 -> 64 here: each pass twice, (64 x 64) x (64 x 64)
    want = sorted((64.0, 64.0, 64.0, float(p)) for p in (0, 0, 1, 1, 2, 2))
    got = sorted(r for r in job_rows if r[:3] == (64.0, 64.0, 64.0))
    ok = got == want
    failures += not ok
    print(f"{'ok  ' if ok else 'FAIL'} expert GEMMs (64 rows, h 64 -> 64 -> 64): expected FC1 and FC2 in all three "
          f"passes {want}; got {got}")
    dense = len(job_rows) - len(got)
    prov = json.load(open(out))["provenance"].get("job_layers", "")
    named = "a local expert's FC1 64 -> 64 and FC2 64 -> 64 over 64 rows at ETP 1" in prov
    ok = dense == 12 and named
    failures += not ok
    print(f"{'ok  ' if ok else 'FAIL'} the dense layers' 4 x 3 samples stay and provenance.job_layers names the "
          f"expert: expected 12 and the expert named; got {dense} and '...{prov[-90:]}'")
sys.exit(1 if failures else 0)
