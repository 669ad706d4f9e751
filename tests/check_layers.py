#!/usr/bin/env python3
"""tests/check_layers.py ROOT: the library folders include only downward.

Layers, lowest first (docs/DESIGN in ../shared/DESIGN.md, and README's
folder map): kernels/ (bottom, beside model/: neither includes the other),
model/, sim/, real/, calib/ (calibration times the runtimes real/ defines,
so it may include real/; real/ never includes calib/), then cmd/, the
program, which may include anything. tests/ and scripts/ are outside the
rule. A quoted include's first path component names its folder; an include
without a folder is the file's own folder. Prints every violation with the
rule it breaks and exits 1, or prints the count checked and exits 0."""
import os
import re
import sys

from verdict import verdict

ALLOWED = {
    "kernels": {"kernels"},
    "model": {"model"},
    "sim": {"model", "sim"},
    "real": {"kernels", "model", "sim", "real"},
    "calib": {"kernels", "model", "sim", "real", "calib"},
}
SOURCES = (".c", ".h", ".cu", ".cuh", ".cc")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def violations(root):
    checked, bad = 0, []
    for top, allowed in ALLOWED.items():
        for folder, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith(SOURCES):
                    continue
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, root)
                checked += 1
                with open(path, encoding="utf-8", errors="replace") as f:
                    for n, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m or "/" not in m.group(1):
                            continue
                        target = m.group(1).split("/")[0]
                        if target in ALLOWED or target == "cmd":
                            if target not in allowed:
                                bad.append(f"{rel}:{n}: includes {m.group(1)}: {top}/ may include only "
                                           f"{', '.join(sorted(allowed))}")
    return checked, bad


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    checked, bad = violations(root)
    return verdict(f"{checked} library files checked", "no include from a lower layer to a higher one "
                   "(kernels, model < sim < real < calib < cmd)", bad)


if __name__ == "__main__":
    sys.exit(main())
