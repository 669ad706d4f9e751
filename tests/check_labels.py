#!/usr/bin/env python3
"""tests/check_labels.py CTEST BUILD_DIR: every registered test carries
exactly one module label (its folder under tests/) and exactly one cost
label (fast or slow), so `ctest -L MODULE` and `ctest -L fast` select what
they say (tests/CMakeLists.txt, megasim_label_tests)."""
import json
import subprocess
import sys

from verdict import verdict

MODULES = {"model", "kernels", "sim", "search", "goodput", "plot", "reproduce", "calib", "real", "fuzz", "tests"}
COSTS = {"fast", "slow"}

def main():
    ctest, build = sys.argv[1], sys.argv[2]
    out = subprocess.run([ctest, "--test-dir", build, "-N", "--show-only=json-v1"],
                         check=True, capture_output=True, text=True).stdout
    tests = json.loads(out)["tests"]
    bad = []
    for t in tests:
        labels = next((p["value"] for p in t.get("properties", []) if p["name"] == "LABELS"), [])
        mods, costs = MODULES.intersection(labels), COSTS.intersection(labels)
        if len(mods) != 1 or len(costs) != 1:
            bad.append(f"{t['name']}: labels {labels}")
    return verdict(f"{len(tests)} tests", f"each to carry one module label of {sorted(MODULES)} and one of "
                   f"{sorted(COSTS)}", bad)

if __name__ == "__main__":
    sys.exit(main())
