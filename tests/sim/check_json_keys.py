#!/usr/bin/env python3
"""check_json_keys: `megasim simulate --json` carries every key of
`megasim predict --json` (top level, "breakdown", "memory"), as docs/closed-form.md
promises, on the same job. The job's own numbers (FLOPs, parameters, the
memory model's parts) are the closed form's exactly; days for 300B tokens
follows from the simulated tokens per second.

usage: check_json_keys.py MEGASIM [JOB FLAGS...]"""
import json, subprocess, sys

megasim, job = sys.argv[1], sys.argv[2:]
failures = passed = 0


def check(what, ok, detail):
    global failures, passed
    print(f"{'ok  ' if ok else 'FAIL'} {what}: {detail}")
    failures += not ok
    passed += ok


def run(cmd):
    p = subprocess.run([megasim, cmd, "--json", *job], capture_output=True, text=True)
    if p.returncode:
        print(f"FAIL megasim {cmd} --json exited {p.returncode}: {p.stderr.strip()}")
        sys.exit(1)
    return json.loads(p.stdout)


pred, sim = run("predict"), run("simulate")
for section in (None, "breakdown", "memory"):
    want = set(pred[section] if section else pred)
    got = set(sim.get(section, {}) if section else sim)
    missing = sorted(want - got)
    check(f"simulate --json has predict's {section or 'top-level'} keys", not missing,
          f"expected {len(want)} keys (predict --json), missing {missing or 'none'}")
for k in ("model_flops_per_iteration", "hardware_flops_per_iteration", "params_total"):
    check(f"{k} is the closed form's", sim.get(k) == pred[k], f"expected {pred[k]} (predict), got {sim.get(k)}")
check("memory is the memory model's", sim.get("memory") == pred["memory"], "every part equal to predict's")
days = 300e9 / sim["tokens_per_s"] / 86400
check("days_for_300b_tokens from the simulated tokens/s", abs(sim.get("days_for_300b_tokens", -1) - days) <= 1e-9 * days,
      f"expected {days:.6g} (300e9 / {sim['tokens_per_s']:.6g} / 86400), got {sim.get('days_for_300b_tokens')}")
print(f"check_json_keys: {passed} passed, {failures} failed")
sys.exit(1 if failures or not passed else 0)
