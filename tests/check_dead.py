#!/usr/bin/env python3
"""tests/check_dead.py ROOT BUILD: no dead code in the library folders and
cmd/. Every global function or object that megasim's own code defines
(kernels/, model/, sim/, real/, calib/, cmd/) must be referenced from
another object file: the program, a library, the GPU module or a test.
One that nothing else references is either dead (delete it) or used only
in its own file (make it static). Reads `nm` of the build's object files;
objects whose source no longer exists (a stale build folder) are skipped.
Skipped (exit 77) when the GPU module was not built: functions that only
the module calls would look unused."""
import os
import re
import subprocess
import sys

from verdict import verdict

LIBRARY = ("kernels", "model", "sim", "real", "calib", "cmd")
# Looked up by name at run time (dlsym), or the program's entry.
EXEMPT = {"main", "megasim_gpu_module", "megasim_gpu_calib"}


def objects(root, build):
    """(object path, source path relative to root) of the build's current objects."""
    for folder, _, files in os.walk(build):
        m = re.match(r"(.*)/CMakeFiles/[^/]+\.dir(/.*)?$", os.path.relpath(folder, build))
        m0 = re.match(r"CMakeFiles/[^/]+\.dir(/.*)?$", os.path.relpath(folder, build))
        if not (m or m0):
            continue
        sub, rest = (m.group(1), m.group(2) or "") if m else ("", m0.group(1) or "")
        for f in files:
            if not f.endswith(".o"):
                continue
            rel = os.path.normpath(os.path.join(sub, rest.lstrip("/"), f[:-2]).replace("__", ".."))
            if os.path.isfile(os.path.join(root, rel)):
                yield os.path.join(folder, f), rel


def symbols(objs):
    """{object: (defined, used)} from one nm run per 256 objects (nm -A
    prefixes every line with its object's path)."""
    out = {o: ([], []) for o in objs}
    for i in range(0, len(objs), 256):
        text = subprocess.run(["nm", "-g", "-A"] + objs[i:i + 256], capture_output=True, text=True).stdout
        for line in text.splitlines():
            path, _, rest = line.rpartition(".o:")
            path += ".o"
            p = rest.split()
            if path not in out:
                continue
            if len(p) == 3 and p[1] in "TDRB":
                out[path][0].append(p[2])
            elif len(p) == 2 and p[0] == "U":
                out[path][1].append(p[1])
    return out


def main():
    root, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    objs = list(objects(root, build))
    if not any(re.search(r"/megasim_gpu(_emu)?.dir/", o) for o, _ in objs):
        print("the GPU module (megasim_gpu or megasim_gpu_emu) is not built here: skipped")
        return 77
    defined, used = {}, set()
    table = symbols([o for o, _ in objs])
    for obj, src in objs:
        d, u = table[obj]
        used.update(u)
        if src.split("/")[0] in LIBRARY:
            for s in d:
                defined.setdefault(s, src)
    bad = []
    for sym, src in sorted(defined.items()):
        if sym in used or sym in EXEMPT or sym.startswith(("_Z", "__")):  # C++/CUDA; compiler-made (__odr_asan.)
            continue
        with open(os.path.join(root, src), encoding="utf-8", errors="replace") as f:
            uses = len(re.findall(r"\b%s\b" % re.escape(sym), f.read()))
        bad.append(f"{src}: {sym} " + ("is used only in its own file: make it static" if uses > 1
                                       else "is never used: delete it"))
    return verdict(f"{len(defined)} global symbols of kernels/, model/, sim/, real/, calib/, cmd/",
                   "every one referenced from another object file", bad)


if __name__ == "__main__":
    sys.exit(main())
