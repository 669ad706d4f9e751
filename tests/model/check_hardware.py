#!/usr/bin/env python3
"""check_hardware: `megasim hardware` as a user runs it.
- The list names the four GPU and two cluster profiles docs/hardware.md documents.
- Each GPU profile's data-sheet numbers match the vendor's data sheets
  (dense bf16 tensor TFLOPS, HBM bandwidth and size, NVLink per direction,
  SM count), independently of model/hw_builtin.c.
- A printed profile is a profile: `hardware --hardware FILE` reads it back
  and prints the same JSON, and `predict --hardware FILE` predicts what the
  built-in names predict.

usage: check_hardware.py MEGASIM"""
import json, os, subprocess, sys, tempfile

megasim = sys.argv[1]
failures = passed = 0


def check(what, ok, detail):
    global failures, passed
    print(f"{'ok  ' if ok else 'FAIL'} {what}: {detail}")
    failures += not ok
    passed += ok


def run(*args):
    p = subprocess.run([megasim, *args], capture_output=True, text=True)
    if p.returncode:
        check(f"megasim {' '.join(args)} exits 0", False, f"got {p.returncode}: {p.stderr.strip()}")
    return p.stdout


listing = run("hardware")
for name in ("a100-sxm-80gb", "a800-sxm-80gb", "h100-sxm-80gb", "h800-sxm-80gb", "h200-sxm-141gb", "b200-sxm-180gb",
             "gb200-nvl72", "megascale", "fattree", "llama3-roce"):
    check(f"the list names {name}", name in listing.split(), "docs/hardware.md's built-in profiles")

# NVIDIA data sheets: A100 SXM 80GB (312 TFLOPS dense bf16, 2,039 GB/s,
# NVLink 600 GB/s both directions, 108 SMs); A800 SXM: the A100 with NVLink
# cut to 400 GB/s; H100 SXM (989.4 TFLOPS dense bf16 = 1,979 with sparsity
# / 2, 3.35 TB/s, NVLink 900 GB/s both directions, 132 SMs); H800 SXM: the
# H100 with NVLink cut to 400 GB/s; H200 SXM (the H100's 1,979 TFLOPS bf16
# with sparsity and NVLink 900 GB/s; 141 GB HBM3e at 4.8 TB/s); DGX B200
# (8 B200: 72 PFLOPS FP8 with sparsity, 1,440 GB at 64 TB/s, NVLink 5 1.8
# TB/s a GPU); GB200 NVL72 (72 GPUs: 360 PFLOPS BF16 with sparsity, 13.4 TB
# at 576 TB/s). Dense = sparse / 2; per GPU = the system's / its GPUs.
sheets = {
    "a100-sxm-80gb": {"peak_bf16_tflops": 312, "hbm_gbps": 2039, "hbm_gib": 80, "nvlink_gbps": 300, "sm_count": 108},
    "a800-sxm-80gb": {"peak_bf16_tflops": 312, "hbm_gbps": 2039, "hbm_gib": 80, "nvlink_gbps": 200, "sm_count": 108},
    "h100-sxm-80gb": {"peak_bf16_tflops": 989.4, "hbm_gbps": 3350, "hbm_gib": 80, "nvlink_gbps": 450, "sm_count": 132},
    "h800-sxm-80gb": {"peak_bf16_tflops": 989.4, "hbm_gbps": 3350, "hbm_gib": 80, "nvlink_gbps": 200, "sm_count": 132},
    "h200-sxm-141gb": {"peak_bf16_tflops": 989.4, "hbm_gbps": 4800, "hbm_gib": 141, "nvlink_gbps": 450,
                       "sm_count": 132},
    "b200-sxm-180gb": {"peak_bf16_tflops": 2250, "peak_fp8_tflops": 4500, "hbm_gbps": 8000, "hbm_gib": 180,
                       "nvlink_gbps": 900},
    "gb200-nvl72": {"peak_bf16_tflops": 2500, "peak_fp8_tflops": 5000, "hbm_gbps": 8000, "hbm_gib": 186,
                    "nvlink_gbps": 900},
}
for gpu, want in sheets.items():
    got = json.loads(run("hardware", "--gpu", gpu) or "{}").get("gpu", {})
    for k, v in want.items():
        check(f"{gpu} {k}", got.get(k) == v, f"expected {v} (NVIDIA data sheet), got {got.get(k)}")

# Memory-bound kernels at large sizes: the fraction of the data sheet's HBM
# rate a device-to-device copy reached: an H100 3007 of 3350 GB/s
# (calibrate, 2026-11-26), an H200 4225 of 4800 (kern_bench, 2026-11-29).
for gpu, frac in (("h100-sxm-80gb", 0.90), ("h200-sxm-141gb", 0.88)):
    eff = json.loads(run("hardware", "--gpu", gpu) or "{}").get("gpu", {}).get("mem_eff", [[0, 0]])
    check(f"{gpu} mem_eff at its largest size", abs(eff[-1][1] - frac) < 1e-9,
          f"expected {frac} (a measured copy over the data sheet), got {eff[-1][1]}")

# GB200 NVL72's rack is one NVLink domain of 72 GPUs (NVIDIA's data sheet):
# a TP 8 x EP 9 group of 72 stays on NVLink.
got = json.loads(run("hardware", "--cluster", "gb200-nvl72") or "{}").get("cluster", {})
check("gb200-nvl72: GPUs in one NVLink domain", got.get("gpus_per_node") == 72,
      f"expected 72 (GB200 NVL72 data sheet), got {got.get('gpus_per_node')}")

with tempfile.TemporaryDirectory() as d:
    f = os.path.join(d, "h100-fattree.json")
    printed = run("hardware", "--gpu", "h100-sxm-80gb", "--cluster", "fattree")
    with open(f, "w") as out:
        out.write(printed)
    again = run("hardware", "--hardware", f)
    check("hardware --hardware FILE prints the file's profile back", bool(printed) and json.loads(again or "{}") ==
          json.loads(printed or "{}"), f"{len(printed)} characters printed, {len(again)} read back")
    job = ["--num-gpus", "64", "--global-batch-size", "64", "--json"]
    by_name = json.loads(run("predict", "--gpu", "h100-sxm-80gb", "--cluster", "fattree", *job) or "{}").get("mfu")
    by_file = json.loads(run("predict", "--hardware", f, *job) or "{}").get("mfu")
    check("predict --hardware FILE = predict --gpu --cluster", by_name is not None and by_name == by_file,
          f"expected MFU {by_name} (the built-in names), got {by_file}")

print(f"check_hardware: {passed} passed, {failures} failed")
sys.exit(1 if failures or not passed else 0)
