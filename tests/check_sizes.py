#!/usr/bin/env python3
"""tests/check_sizes.py ROOT: no source file over 700 lines outside kernels/
(a longer file is more than one concern: split it), and a README of at most
300 lines that gives the two commands (scripts/quickstart.sh, scripts/test.sh)
within its first 40 lines. kernels/ is exempt: a CUDA kernel family with its
launch variants may rightly be one long file. Lists every breach, exit 1."""
import os
import subprocess
import sys

from verdict import verdict

MAX_LINES, README_MAX, COMMANDS_BY = 700, 300, 40
SOURCES = (".c", ".h", ".cu", ".cuh", ".cc", ".py", ".sh")


def tracked(root):
    out = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True)
    if out.returncode == 0 and out.stdout:
        return out.stdout.split()
    return [os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs
            if "/build" not in d and "/.git" not in d]


def main():
    root = sys.argv[1]
    bad, n = [], 0
    for rel in tracked(root):
        if not rel.endswith(SOURCES) or rel.startswith("kernels/") or not os.path.isfile(os.path.join(root, rel)):
            continue
        n += 1
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            lines = sum(1 for _ in f)
        if lines > MAX_LINES:
            bad.append(f"{rel}: {lines} lines (at most {MAX_LINES} outside kernels/: split it by concern)")
    with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
        readme = f.read().splitlines()
    if len(readme) > README_MAX:
        bad.append(f"README.md: {len(readme)} lines (at most {README_MAX}: the manual goes in docs/)")
    head = "\n".join(readme[:COMMANDS_BY])
    for cmd in ("scripts/quickstart.sh", "scripts/test.sh"):
        if cmd not in head:
            bad.append(f"README.md: {cmd} is not within the first {COMMANDS_BY} lines")
    return verdict(f"{n} source files outside kernels/ and README.md checked",
                   f"none over {MAX_LINES} lines, a README of at most {README_MAX} with both commands in its "
                   f"first {COMMANDS_BY}", bad)


if __name__ == "__main__":
    sys.exit(main())
