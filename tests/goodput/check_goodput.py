#!/usr/bin/env python3
"""tests/goodput/check_goodput.py MEGASIM CASE: `megasim goodput` as a user
runs it. Each check prints expected vs got and where the expected value
comes from.
  targets  the default job (175B on 12,288 GPUs, the megascale cluster,
           30 days): issue 34's targets and the --json keys it names;
  outputs  --out FILE.h5 (read back with h5dump) and --plot PREFIX; megasim
           plot FILE.h5 redraws the figure with the same data."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from verdict import verdict  # noqa: E402

KEYS = ["ettr", "ettr_ci95", "wall_days", "interruptions", "lost_hours", "checkpoint_interval_s",
        "best_checkpoint_interval_s", "young_daly_interval_s", "init_time_s",
        # predict's keys for the healthy iteration
        "iteration_time_s", "tokens_per_s", "mfu", "params_total", "days_for_300b_tokens", "config"]


def run(megasim, *args):
    p = subprocess.run([megasim, "goodput", *args], capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"FAIL: megasim goodput {' '.join(args)} exited {p.returncode}: {p.stderr}")
    return p.stdout


def targets(megasim):
    d = json.loads(run(megasim, "--json"))
    bad, checks = [], []

    def check(what, ok, expected, got, source):
        print(f"{'ok  ' if ok else 'FAIL'} {what:58s} expected {expected}  got {got}  ({source})")
        checks.append(what)
        if not ok:
            bad.append(what)

    check("keys of --json", all(k in d for k in KEYS), "all of " + ", ".join(KEYS),
          ", ".join(k for k in KEYS if k not in d) or "all", "issue 34")
    check("ETTR of the default job", d["ettr"] > 0.90, "> 0.90", f"{d['ettr']:.4f}",
          "MegaScale, Llama 3: above 90%")
    check("restarts in 30 days on 12,288 GPUs", d["restarts"] > 100, "> 100", f"{d['restarts']:.1f}",
          "MegaScale: over 100 in several weeks")
    lo, hi = d["ettr_ci95"]
    check("ETTR inside its 95% interval", lo <= d["ettr"] <= hi, f"{lo:.4f}..{hi:.4f}", f"{d['ettr']:.4f}",
          "mean +- 1.96 standard errors")
    yd, best = d["young_daly_interval_s"], d["best_checkpoint_interval_s"]
    check("Young/Daly within 10% of the simulated optimum", abs(yd / best - 1) <= 0.10, f"{best:.1f} s +- 10%",
          f"{yd:.1f} s", "issue 34: stall 3 s << MTBF 4 h")
    lost = sum(d["lost_hours"].values()) / 24
    check("trained + lost days = wall days", abs(d["trained_days"] + lost - d["wall_days"]) < 1e-6,
          f"{d['wall_days']:.6f}", f"{d['trained_days'] + lost:.6f}", "every second accounted")
    check("the booking is the default 30 days", abs(d["wall_days"] - 30) < 1e-9, 30, d["wall_days"],
          "--train-days default")
    lh, n = d["lost_hours"], d["restarts"]
    dd = (lh["detection"] + lh["diagnosis"]) * 60 / n
    check("detection + diagnosis per restart", dd < 10, "< 10 min", f"{dd:.2f} min",
          "MegaScale section 4: under 10 minutes on average")
    cu = (lh["relaunch_init"] + lh["checkpoint_load"] + lh["redone_work"]) * 60 / n
    check("catch-up per restart (relaunch, init, load, redo)", cu < 15, "< 15 min", f"{cu:.2f} min",
          "MegaScale section 4: under 15 minutes")
    paper = {"tcpstore": 1047, "redis": 361}
    for design, want in paper.items():
        got = d["init_designs"][design]["gpus_2048_s"]
        check(f"{design} initialisation, 2,048 GPUs", abs(got / want - 1) <= 0.2, f"{want} s +- 20%",
              f"{got:.1f} s", "MegaScale section 4")
    nb = d["init_designs"]["nobarrier"]
    check("no-barrier initialisation, 2,048 GPUs", nb["gpus_2048_s"] < 5, "< 5 s", f"{nb['gpus_2048_s']:.2f} s",
          "MegaScale section 4")
    check("no-barrier initialisation, 12,288 GPUs", nb["gpus_12288_s"] < 30, "< 30 s",
          f"{nb['gpus_12288_s']:.2f} s", "MegaScale section 4: under 30 s above 10,000 GPUs")
    w = d["what_if"]
    check("slow hosts kept cost ETTR", w["stragglers_kept"]["ettr"] < d["ettr"], f"< {d['ettr']:.4f}",
          f"{w['stragglers_kept']['ettr']:.4f}", "0.5% of hosts 10% slow pace every iteration")
    check("unlimited spares never wait", w["unlimited_spares"]["lost_hours"]["repair_wait"] == 0, 0,
          w["unlimited_spares"]["lost_hours"]["repair_wait"], "a spare is always free")
    check("the configuration records the goodput options", d["config"]["goodput"]["trials"] == 10000,
          10000, d["config"]["goodput"].get("trials"), "config.goodput")
    check("the configuration records the fault model", "faults" in d["config"]["hardware"], "faults",
          list(d["config"]["hardware"]), "config.hardware")
    return verdict(f"{len(checks)} checks", "all to hold", bad)


def outputs(megasim):
    tmp = tempfile.mkdtemp()
    try:
        h5, prefix = os.path.join(tmp, "g.h5"), os.path.join(tmp, "g")
        run(megasim, "--trials", "200", "--sweep-trials", "50", "--out", h5, "--plot", prefix)
        bad = []
        dump = subprocess.run(["h5dump", "-A", h5], capture_output=True, text=True).stdout
        for want in ['"goodput"', "config_json", "summary_json", "DATASET \"interval_s\""]:
            ok = want in dump
            print(f"{'ok  ' if ok else 'FAIL'} h5dump -A shows {want}")
            bad += [] if ok else [want]
        files = ["g-interval.dat", "g-lost.dat"] + (["g.png", "g.svg"] if shutil.which("gnuplot") else [])
        for f in files:
            size = os.path.getsize(os.path.join(tmp, f)) if os.path.exists(os.path.join(tmp, f)) else 0
            print(f"{'ok  ' if size else 'FAIL'} {f} written ({size} bytes)")
            bad += [] if size else [f]
        with open(os.path.join(tmp, "g-lost.dat")) as fh:
            rows = [line.split() for line in fh if line.strip()]
        ok = rows[0][0] == "run" and [r[0] for r in rows[1:]] == ["main", "no_spares", "unlimited_spares",
                                                                  "stragglers_kept"]
        print(f"{'ok  ' if ok else 'FAIL'} g-lost.dat rows: {[r[0] for r in rows]}")
        bad += [] if ok else ["lost rows"]
        # megasim plot redraws the figure from the file alone: the same data
        redraw = os.path.join(tmp, "p")
        p = subprocess.run([megasim, "plot", h5, "--outdir", redraw], capture_output=True, text=True)
        drawn = ["goodput.png", "goodput.svg"] if shutil.which("gnuplot") else []
        for mine, theirs in (("g-interval.dat", "goodput-interval.dat"), ("g-lost.dat", "goodput-lost.dat")):
            with open(os.path.join(tmp, mine)) as a:
                want = a.read()
            got = open(os.path.join(redraw, theirs)).read() if os.path.exists(os.path.join(redraw, theirs)) else None
            ok = p.returncode == 0 and got == want
            print(f"{'ok  ' if ok else 'FAIL'} megasim plot g.h5: {theirs} equals goodput --plot's {mine} "
                  f"(exit {p.returncode})")
            bad += [] if ok else [theirs]
        for f in drawn:
            ok = os.path.exists(os.path.join(redraw, f))
            print(f"{'ok  ' if ok else 'FAIL'} megasim plot g.h5: {f} drawn")
            bad += [] if ok else [f]
        return verdict(f"{len(files) + 7 + len(drawn)} outputs", "all written", bad)
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    sys.exit({"targets": targets, "outputs": outputs}[sys.argv[2]](sys.argv[1]))
