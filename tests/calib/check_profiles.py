#!/usr/bin/env python3
"""tests/calib/check_profiles.py: the checked-in measured profiles
(experiments/profiles/*.json) against `megasim predict --hardware`. Every
check prints what it expected, what it got and where that comes from.

  1. every profile is accepted (exit 0, the JSON parses, an iteration time)
  2. each GPU's measured profile (MEASURED: the H100's, the H200's):
     gemm_acc_exposed is its own fit's slope held in [0, 1] (provenance
     fits/gemm_acc), the 1.2B GPT of scripts/gpu-real.sh predicts the
     iteration `megasim run` measured on that GPU in the profile's own
     call within 5% (docs/benchmarks.md: the H100's 0.7208 s, predicted
     0.6998, -2.9%; the H200's 0.6991 s, predicted 0.6798, -2.8%), and its
     dropout rates are its own fits' (fits/dropout_rate,
     fits/flash_*_draws)
  3. a profile without gemm_acc_exposed (one written before the field) is
     read with 0, the model before it: the same iteration as an explicit 0,
     and not the profile's own; one without flash_fwd/bwd_gdraws prices
     the flash kernels' draws at dropout_gdraws, as an explicit 0 does
  4. gemm_acc_exposed out of [0, 1] is refused: exit 2, the field named
  5. each GPU's profile is today's fit of its raw samples: `calibrate
     --refit experiments/profiles/NAME.h5` gives its gpu and cluster
     fields (relative 1e-9), so a change to the model or the fits that
     would move them fails here until the profile is refitted

usage: check_profiles.py MEGASIM"""
import glob, json, os, subprocess, sys, tempfile

MEGASIM = sys.argv[1]
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# scripts/gpu-real.sh's model and plan (scripts/gpu-calibrate.sh predicts the same job)
GPT_1_2B = ["--preset", "none", "--num-layers", "24", "--hidden-size", "2048", "--ffn-hidden-size", "8192",
            "--num-attention-heads", "16", "--num-query-groups", "16", "--seq-length", "2048",
            "--padded-vocab-size", "256", "--micro-batch-size", "4", "--global-batch-size", "16", "--num-gpus", "1",
            "--tensor-model-parallel-size", "1", "--pipeline-model-parallel-size", "1",
            "--num-layers-per-virtual-pipeline-stage", "0", "--attention", "flash", "--fused-elementwise",
            "--cluster", "fattree", "--hidden-dropout", "0.1", "--attention-dropout", "0.1"]
failed = 0


def check(ok, what, expected, got, source):
    global failed
    failed += not ok
    print(f"{'ok  ' if ok else 'FAIL'} {what}: expected {expected}, got {got} ({source})")


def predict(hw, job=()):
    p = subprocess.run([MEGASIM, "predict", *job, "--hardware", hw, "--json"], capture_output=True, text=True)
    try:
        return p.returncode, json.loads(p.stdout)["iteration_time_s"], p.stderr.strip()
    except (ValueError, KeyError):
        return p.returncode, None, p.stderr.strip()


files = sorted(glob.glob(os.path.join(ROOT, "experiments", "profiles", "*.json")))
check(len(files) >= 3, "checked-in profiles", ">= 3 (the CPU one, the H100 and H200 ones)", len(files),
      "experiments/profiles")
for f in files:
    rc, t, err = predict(f)
    check(rc == 0 and t and t > 0, f"predict --hardware {os.path.basename(f)}", "exit 0 and an iteration time",
          f"exit {rc}, {t} {err[:200]}", "megasim predict's default job")

# Each GPU's measured profile, the step `megasim run` measured with the same
# job in the profile's own GPU call, and where that number is quoted. Within
# 5%: the calibrated model's error on the machine it measured.
MEASURED = (("h100-sxm-80gb-measured", 0.7208, "docs/benchmarks.md, fourth GPU session, 2026-11-26 (-2.9% then)"),
            ("h200-sxm-141gb-measured", 0.6991, "docs/benchmarks.md, fifth GPU session, 2026-11-29 (-2.8% then)"))


def measured_checks(name, step_s, source):
    path = os.path.join(ROOT, "experiments", "profiles", name + ".json")
    prof = json.load(open(path))
    slope = prof["provenance"]["fits"]["gemm_acc"]["slope"]
    check(abs(prof["gpu"]["gemm_acc_exposed"] - min(1, max(0, slope))) < 1e-12, f"{name} gemm_acc_exposed",
          f"the fit's slope {slope:.4f} held in [0, 1]", prof["gpu"]["gemm_acc_exposed"], "provenance fits/gemm_acc")
    rc, t, err = predict(path, GPT_1_2B)
    check(rc == 0 and t is not None and abs(t / step_s - 1) < 0.05, f"1.2B GPT iteration on {name}",
          f"the measured {step_s} s within 5%", t, f"megasim run on that GPU: {source}")
    fits = prof["provenance"]["fits"]
    for field, fit in (("dropout_gdraws", "dropout_rate"), ("flash_fwd_gdraws", "flash_fwd_draws"),
                       ("flash_bwd_gdraws", "flash_bwd_draws")):
        want = 1e-3 / fits[fit]["slope"]
        check(abs(prof["gpu"][field] / want - 1) < 1e-9, f"{name} {field}", f"1 / the fit's slope, {want:.1f} G/s",
              prof["gpu"][field], f"provenance fits/{fit} (us per draw)")
    return prof, t


checked = {name: measured_checks(name, step_s, source) for name, step_s, source in MEASURED}
prof, t = checked["h200-sxm-141gb-measured"]  # the profile and prediction the checks below vary

with tempfile.TemporaryDirectory() as d:
    old, zero, bad = (os.path.join(d, n) for n in ("old.json", "zero.json", "bad.json"))
    p = json.loads(json.dumps(prof))
    del p["gpu"]["gemm_acc_exposed"]
    json.dump(p, open(old, "w"))
    p["gpu"]["gemm_acc_exposed"] = 0
    json.dump(p, open(zero, "w"))
    p["gpu"]["gemm_acc_exposed"] = 1.5
    json.dump(p, open(bad, "w"))
    rc_old, t_old, err_old = predict(old, GPT_1_2B)
    rc_zero, t_zero, _ = predict(zero, GPT_1_2B)
    check(rc_old == 0 and t_old == t_zero, "a profile without gemm_acc_exposed",
          f"read with 0: {t_zero} s", f"exit {rc_old}, {t_old} s {err_old[:200]}", "model/hw.c hw_fill_missing")
    check(t_old is not None and t is not None and t_old < t, "  and it prices no accumulation",
          f"below the profile's own {t} s", t_old, "cost_gemm_acc_s is 0 at gemm_acc_exposed 0")
    p = json.loads(json.dumps(prof))
    del p["gpu"]["flash_fwd_gdraws"], p["gpu"]["flash_bwd_gdraws"]
    json.dump(p, open(old, "w"))
    p["gpu"]["flash_fwd_gdraws"] = p["gpu"]["flash_bwd_gdraws"] = 0
    json.dump(p, open(zero, "w"))
    rc_old, t_old, err_old = predict(old, GPT_1_2B)
    rc_zero, t_zero, _ = predict(zero, GPT_1_2B)
    check(rc_old == 0 and t_old == t_zero, "a profile without flash_fwd/bwd_gdraws",
          f"read with 0: {t_zero} s", f"exit {rc_old}, {t_old} s {err_old[:200]}", "model/hw.c hw_fill_missing")
    check(t_old is not None and t is not None and t_old != t, "  and it prices the flash draws at dropout_gdraws",
          f"not the profile's own {t} s", t_old, "model/cost.c: 0 means dropout_gdraws")
    rc_bad, _, err_bad = predict(bad, GPT_1_2B)
    check(rc_bad == 2 and "gemm_acc_exposed" in err_bad.replace("-", "_"), "gemm_acc_exposed 1.5",
          "exit 2 naming the field", f"exit {rc_bad}: {err_bad[:200]}", "hw.c bounds [0, 1]")



def differing(a, b, path=""):
    """Paths where two JSON values differ (numbers: relative 1e-9)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [p for k in sorted(set(a) | set(b)) for p in differing(a.get(k), b.get(k), f"{path}/{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [p for i, (x, y) in enumerate(zip(a, b)) for p in differing(x, y, f"{path}[{i}]")]
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return [] if abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b)) else [path]
    return [] if a == b else [path]


for name, (prof, _) in checked.items():
    raw = os.path.join(ROOT, "experiments", "profiles", name + ".h5")
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "refit.json")
        p = subprocess.run([MEGASIM, "calibrate", "--refit", raw, "--out", out], capture_output=True, text=True)
        if p.returncode:
            check(False, f"refit of the {name} raw samples", "exit 0",
                  f"exit {p.returncode}: {p.stderr.strip()[-300:]}", raw)
            continue
        q = json.load(open(out))
        diff = [x for sec in ("gpu", "cluster") for x in differing(prof[sec], q[sec], sec)]
        check(not diff, f"{name}.json against a refit of its raw samples", "every gpu and cluster field",
              f"{len(diff)} differing {diff[:6]}",
              f"megasim calibrate --refit experiments/profiles/{name}.h5: refit and check in both "
              "after a change to the model or the fits")

print("check_profiles: " + ("all passed" if not failed else f"{failed} failed"))
sys.exit(1 if failed else 0)
