#!/usr/bin/env python3
"""tests/real/check_compare.py: end-to-end checks of `megasim compare`
(cmd/compare.c) on a 4-rank CPU run (PP 2 x DP 2, 3 steps, mpirun
--oversubscribe). Every check prints what it expected, what it got and
where the expected value comes from.

  1. compare RUN.h5 (no SIM.h5): exit 0, the JSON parses; the measured
     iteration is the mean of /iterations step_time_s after the first step
     (read with h5dump, or from the run's --json lines if h5dump is absent);
     the simulated and closed-form iterations are what `megasim simulate
     --json` reports for the same job (the default job file, the run's
     flags and the run's recorded --hardware profile)
  2. compare RUN.h5 SIM.h5, SIM.h5 from `megasim simulate --no-fold
     --trace-ranks 0,1,2,3 --out`: every simulated number equals the
     in-process path's
  3. the figure: PREFIX.dat always; PREFIX.png non-empty when gnuplot is on
     PATH; without gnuplot one message, the data, exit 0
  4. `megasim plot RUN.h5` draws the last step's timeline
  5. bad input: a simulation given as RUN.h5, a missing file, a SIM.h5 of
     another job, --hardware with SIM.h5: exit 2, one stderr line, nothing
     on stdout
  6. --hardware FILE (another profile, half the GEMM peak): the simulated
     iteration is `megasim simulate`'s on FILE; a FILE whose nodes differ
     in size from the run's is refused

usage: check_compare.py MPIEXEC MEGASIM"""
import json, os, re, shutil, subprocess, sys, tempfile

MPIEXEC, MEGASIM = sys.argv[1], sys.argv[2]
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
JOB_FILE = os.path.join(ROOT, "experiments", "real", "tiny-gpt.json")  # megasim run's default job
PLAN = ["--pipeline-model-parallel-size", "2"]  # 4 ranks: PP 2 x DP 2
REL_EXACT = 1e-9
failures = 0


def check(ok, what, expected, got, source):
    global failures
    failures += not ok
    print(f"{'ok  ' if ok else 'FAIL'} {what}: expected {expected} ({source}), got {got}")


def rel_close(a, b, tol=REL_EXACT):
    return a is not None and b is not None and abs(a - b) <= tol * max(abs(a), abs(b), 1e-300)


def megasim(args, env=None):
    return subprocess.run([MEGASIM] + args, capture_output=True, text=True, timeout=300, env=env)


def must(p, what):
    if p.returncode != 0:
        print(f"FAIL {what}: exit {p.returncode}\nstdout: {p.stdout}\nstderr: {p.stderr}")
        sys.exit(1)
    return p


def step_times(run_h5, run_stdout):
    """/iterations step_time_s and the absolute tolerance: exact through
    h5dump; else the run's --json lines (printed to 1e-6 s)."""
    if shutil.which("h5dump"):
        p = subprocess.run(["h5dump", "-m", "%.17g", "-d", "/iterations", run_h5], capture_output=True, text=True)
        rows = re.findall(r"\{\s*(-?\d+),\s*([^,\s]+),\s*([^,\s]+),", p.stdout)
        if p.returncode == 0 and rows:
            return [float(r[2]) for r in rows], 1e-9, "h5dump of /iterations step_time_s, within 1e-9 s"
    steps = [json.loads(l) for l in run_stdout.splitlines() if l.startswith("{")]
    return [s["step_time_s"] for s in steps], 5e-7, "the run's --json step lines, printed to 1e-6 s"


def no_sim(tmp, run_h5, run_stdout):
    # --host-share none: each rank priced as a core of its own, as `simulate` prices it (host_share below)
    prefix = os.path.join(tmp, "nosim")
    p = must(megasim(["compare", run_h5, "--json", "--plot", prefix, "--host-share", "none"]),
             "compare RUN.h5 --json --host-share none")
    c = json.loads(p.stdout)
    times, tol, source = step_times(run_h5, run_stdout)
    want = sum(times[1:]) / len(times[1:])
    got = c["iteration"]["measured_s"]
    check(len(times) == 3, "measured steps", 3, len(times), "--train-iters 3")
    check(abs(want - got) <= tol, "iteration measured_s", f"{want:.12g}", f"{got:.12g}",
          f"mean of steps 2-3 from {source}")
    check("gpu_clock" not in c, "JSON gpu_clock", "absent", c.get("gpu_clock", "absent"),
          "a CPU run reads no GPU clock (config_json clock_reads 0)")
    job = c["config"]["job"]
    check(job["hardware"].endswith("profiles/cpu-ci-2core.json"), "recorded hardware profile",
          "experiments/profiles/cpu-ci-2core.json", job["hardware"], "megasim run's CPU default")
    flags = [JOB_FILE, "--num-gpus", "4"] + PLAN + ["--hardware", job["hardware"]]
    s = json.loads(must(megasim(["simulate"] + flags + ["--json"]), "simulate --json").stdout)
    for key, want, src in (("simulated_s", s["iteration_time_s"], "iteration_time_s"),
                           ("closed_form_s", s["simulation"]["closed_form_iteration_time_s"],
                            "closed_form_iteration_time_s")):
        got = c["iteration"][key]
        check(rel_close(want, got), f"iteration {key}", f"{want:.12g}", f"{got:.12g}",
              f"megasim simulate --json {src} of the same job, relative 1e-9")
    for k in ("op_classes", "streams", "ranks", "largest_differences"):
        check(isinstance(c.get(k), list) and len(c[k]) > 0, f"JSON {k}", "a non-empty list", type(c.get(k)).__name__,
              "the documented keys")
    # The errors are the prediction's, relative to the measurement:
    # 100 (simulated - measured) / measured, on every row that has both.
    pct = lambda m, s_: 100 * (s_ - m) / m
    it = c["iteration"]
    check(abs(it["error_pct"] - pct(it["measured_s"], it["simulated_s"])) < 1e-6, "iteration error_pct",
          f"{pct(it['measured_s'], it['simulated_s']):.6f}", f"{it['error_pct']:.6f}",
          "100 (simulated - measured) / measured of its own two times")
    rows = [(t, r, m, s_) for t, m, s_ in (("op_classes", "mean_measured_s", "mean_simulated_s"),
                                           ("streams", "busy_measured_s", "busy_simulated_s"),
                                           ("ranks", "end_measured_s", "end_simulated_s"))
            for r in c.get(t, []) if r.get(m) and r.get("error_pct") is not None]
    bad = [(t, r) for t, r, m, s_ in rows if abs(r["error_pct"] - pct(r[m], r[s_])) > 1e-6]
    check(rows and not bad, "error_pct of every op class, stream and rank", "100 (simulated - measured) / measured",
          f"{len(rows) - len(bad)} of {len(rows)} rows agree" + (f"; first bad {bad[0]}" if bad else ""), "each row's times")
    counts = [(r["kind"], r["count_per_iteration_measured"], r["count_per_iteration_simulated"]) for r in c["op_classes"]]
    check(all(m == s_ for _, m, s_ in counts), "ops per iteration, measured = simulated, every op class",
          "equal counts", counts, "run and simulator play the same op program (model/sched.c)")
    check(len(c["ranks"]) == 4 and [r["rank"] for r in c["ranks"]] == [0, 1, 2, 3], "JSON ranks",
          "ranks 0 to 3", [r["rank"] for r in c["ranks"]], "the run's 4 ranks (mpirun -np 4)")
    diffs = [abs(d["difference_s"]) for d in c["largest_differences"]]
    ok = diffs == sorted(diffs, reverse=True) and all(
        abs(d["difference_s"] - (d["simulated_s"] - d["measured_s"])) < 1e-12 for d in c["largest_differences"])
    check(ok, "largest_differences", "difference = simulated - measured, largest |difference| first",
          [round(x, 6) for x in diffs], "the report's definition")
    t = must(megasim(["compare", run_h5, "--plot", prefix, "--host-share", "none"]), "compare RUN.h5 (text)").stdout
    head = [l for l in t.splitlines() if l.startswith("iteration time: measured")]
    check(len(head) == 1, "text headline", "one line 'iteration time: measured X s, simulated Y s, error Z%'",
          head[0] if head else "none", "the report")
    # the 4 ranks on this host's cores: time-shared where there are fewer cores than ranks, and said so
    cores = os.sysconf("SC_NPROCESSORS_ONLN")
    want = {"ranks": 4, "cores": cores, "oversubscribed": 4 > cores, "simulated_factor": 1}
    check(c.get("host_share") == want, "JSON host_share (--host-share none)", want, c.get("host_share"),
          "mpirun -np 4 on one host, its cores online (sysconf)")
    noted = any(l.startswith("note: the run put 4 ranks on a host of") for l in t.splitlines())
    check(noted == (4 > cores), "text note on time-shared cores", "present" if 4 > cores else "absent",
          "present" if noted else "absent", f"4 ranks, {cores} cores")
    host_share(tmp, run_h5, flags, cores)
    return c, flags, prefix


def host_share(tmp, run_h5, flags, cores):
    """compare's default prices ranks time-sharing the cores: with 4 ranks
    on fewer cores every rank's compute 4 / cores times slower, what
    `simulate` gives on the recorded profile with that cluster host_share;
    with as many cores as ranks, nothing (the same as --host-share none)."""
    factor = 4 / cores if 4 > cores else 1
    d = json.loads(must(megasim(["compare", run_h5, "--json", "--plot", os.path.join(tmp, "share")]),
                        "compare RUN.h5 --json").stdout)
    got = d.get("host_share", {}).get("simulated_factor")
    check(got is not None and rel_close(got, factor), "JSON host_share simulated_factor (default --host-share run)",
          factor, got, f"4 ranks over {cores} cores")
    with open(flags[-1]) as f:
        prof = json.load(f)
    prof["cluster"]["host_share"] = factor
    path = os.path.join(tmp, "shared.json")
    with open(path, "w") as f:
        json.dump(prof, f)
    s = json.loads(must(megasim(["simulate"] + flags[:-1] + [path, "--json"]), "simulate, cluster host_share").stdout)
    for key, want, src in (("simulated_s", s["iteration_time_s"], "iteration_time_s"),
                           ("closed_form_s", s["simulation"]["closed_form_iteration_time_s"],
                            "closed_form_iteration_time_s")):
        check(rel_close(want, d["iteration"][key]), f"priced host share: iteration {key}", f"{want:.12g}",
              f"{d['iteration'][key]:.12g}", f"megasim simulate --json {src} with host_share {factor:g}, relative 1e-9")
    t = must(megasim(["compare", run_h5, "--plot", os.path.join(tmp, "share")]), "compare RUN.h5 (text)").stdout
    said = any(l.startswith("ranks sharing cores: the run put 4 ranks on a host of") for l in t.splitlines())
    check(said == (4 > cores), "text line on the priced sharing", "present" if 4 > cores else "absent",
          "present" if said else "absent", f"4 ranks, {cores} cores")


def with_sim(tmp, run_h5, flags, c):
    sim_h5 = os.path.join(tmp, "sim.h5")
    must(megasim(["simulate"] + flags + ["--no-fold", "--trace-ranks", "0,1,2,3", "--out", sim_h5]), "simulate --out")
    p = must(megasim(["compare", run_h5, sim_h5, "--json", "--plot", os.path.join(tmp, "withsim")]),
             "compare RUN.h5 SIM.h5")
    d = json.loads(p.stdout)
    for key in ("measured_s", "simulated_s", "closed_form_s"):
        check(rel_close(c["iteration"][key], d["iteration"][key]), f"with SIM.h5: iteration {key}",
              c["iteration"][key], d["iteration"][key], "compare without SIM.h5")
    for table, keys in (("op_classes", ("mean_simulated_s", "count_per_iteration_simulated",
                                        "compute_stream_simulated_s")),
                        ("streams", ("busy_simulated_s", "wait_simulated_s")), ("ranks", ("end_simulated_s",))):
        same = len(c[table]) == len(d[table]) and all(
            rel_close(a[k], b[k]) or a[k] == b[k] for a, b in zip(c[table], d[table]) for k in keys)
        check(same, f"with SIM.h5: {table} {', '.join(keys)}", "the in-process values", "equal" if same else d[table],
              "compare without SIM.h5 (the simulation unfolded, every rank traced)")
    return sim_h5


def figure(tmp, run_h5, prefix):
    dat = prefix + ".dat"
    rows = [l for l in open(dat) if l.strip() and not l.startswith("#")] if os.path.exists(dat) else []
    check(len(rows) >= 3 and rows[0].startswith('"iteration"'), f"{dat}", "the iteration row first, then op classes",
          f"{len(rows)} rows" + (f", first {rows[0].split()[0]}" if rows else ""), "plots/compare.gp's groups")
    if shutil.which("gnuplot"):
        png = prefix + ".png"
        size = os.path.getsize(png) if os.path.exists(png) else 0
        check(size > 0, png, "a non-empty PNG", f"{size} bytes", "gnuplot is on PATH")
    else:
        print("skip PNG check: no gnuplot on PATH")
    bare = os.path.join(tmp, "bare")
    p = megasim(["compare", run_h5, "--plot", bare], env=dict(os.environ, PATH=""))
    check(p.returncode == 0 and "gnuplot not found" in p.stderr and os.path.exists(bare + ".dat")
          and not os.path.exists(bare + ".png"), "without gnuplot",
          "exit 0, 'gnuplot not found', the .dat and no .png", f"exit {p.returncode}, stderr {p.stderr.strip()!r}",
          "PATH emptied")


def plot_measurement(tmp, run_h5, c):
    out = os.path.join(tmp, "plots")
    p = megasim(["plot", run_h5, "--outdir", out], env=dict(os.environ, PATH=""))
    dat = os.path.join(out, "timeline.dat")
    rows = [l for l in open(dat) if l.strip() and not l.startswith("#")] if os.path.exists(dat) else []
    want = round(sum(k["count_per_iteration_measured"] for k in c["op_classes"]))
    check(p.returncode == 0 and len(rows) == want, "megasim plot RUN.h5: timeline.dat rows", want,
          f"exit {p.returncode}, {len(rows)} rows", "the ops of one step on every rank (compare's op counts)")
    check(os.path.exists(os.path.join(out, "heatmap.dat")), "megasim plot RUN.h5: heatmap.dat", "written",
          "written" if os.path.exists(os.path.join(out, "heatmap.dat")) else "missing", "/ranks has 4 rows")


def other_profile(tmp, run_h5, flags, c):
    """--hardware FILE: the run's job simulated on another profile (here the
    recorded one with half the GEMM peak) gives what `megasim simulate` of
    the same job on FILE gives, and the report names FILE's GPU."""
    with open(flags[-1]) as f:
        prof = json.load(f)
    prof["gpu"]["name"] = "half-peak"
    prof["gpu"]["peak_bf16_tflops"] /= 2
    prof["gpu"]["peak_tf32_tflops"] /= 2
    path = os.path.join(tmp, "half-peak.json")
    with open(path, "w") as f:
        json.dump(prof, f)
    d = json.loads(must(megasim(["compare", run_h5, "--hardware", path, "--json", "--plot",
                                 os.path.join(tmp, "half"), "--host-share", "none"]), "compare RUN.h5 --hardware").stdout)
    s = json.loads(must(megasim(["simulate"] + flags[:-1] + [path, "--json"]), "simulate --hardware").stdout)
    check(rel_close(s["iteration_time_s"], d["iteration"]["simulated_s"]), "--hardware FILE: iteration simulated_s",
          f"{s['iteration_time_s']:.12g}", f"{d['iteration']['simulated_s']:.12g}",
          "megasim simulate --json of the same job on FILE, relative 1e-9")
    check(d["iteration"]["simulated_s"] > c["iteration"]["simulated_s"], "--hardware FILE: slower than the recorded",
          f"> {c['iteration']['simulated_s']:.6g} s", f"{d['iteration']['simulated_s']:.6g} s",
          "half the GEMM peak of the recorded profile")
    check(rel_close(d["iteration"]["measured_s"], c["iteration"]["measured_s"]), "--hardware FILE: measured_s",
          c["iteration"]["measured_s"], d["iteration"]["measured_s"], "the run, unchanged")
    prof["cluster"]["gpus_per_node"] = prof["cluster"]["nics_per_node"] = 4
    with open(path, "w") as f:
        json.dump(prof, f)
    bad(["compare", run_h5, "--hardware", path], "gpus_per_node = 4, but the run's nodes had 8",
        "--hardware FILE with another node size")


def bad(args, want, what):
    p = megasim(args)
    lines = p.stderr.strip().splitlines()
    ok = p.returncode == 2 and len(lines) == 1 and want in lines[0] and not p.stdout
    check(ok, f"bad input: {what}", f"exit 2, one stderr line containing {want!r}, empty stdout",
          f"exit {p.returncode}, {lines}, stdout {len(p.stdout)} chars", "the bad-input contract")


def bad_inputs(tmp, run_h5, sim_h5, flags):
    bad(["compare", sim_h5], "expected a measurement", "a simulation as RUN.h5")
    bad(["compare", os.path.join(tmp, "no-such-run.h5")], "cannot open the result file", "a missing RUN.h5")
    bad(["compare", run_h5, os.path.join(tmp, "no-such-sim.h5")], "cannot open the result file", "a missing SIM.h5")
    other = os.path.join(tmp, "other.h5")
    must(megasim(["simulate", JOB_FILE, "--num-gpus", "4", "--hardware", flags[-1], "--out", other]),
         "simulate another job")
    bad(["compare", run_h5, other], "pipeline_model_parallel_size", "SIM.h5 of another job (PP 1)")
    bad(["compare", run_h5, sim_h5, "--hardware", flags[-1]], "--hardware applies to the in-process simulation",
        "--hardware with SIM.h5")
    # The run's file with its configuration edited to 8 GPUs (same length,
    # so the HDF5 file stays valid) while /ranks holds the 4 ranks that ran.
    edited = os.path.join(tmp, "edited.h5")
    raw = open(run_h5, "rb").read()
    open(edited, "wb").write(raw.replace(b'"num_gpus":4,', b'"num_gpus":8,', 1))
    bad(["compare", edited], "/ranks has 4 rows, but its configuration is a 8-rank job",
        "RUN.h5 whose config_json disagrees with its /ranks")


def main():
    tmp = tempfile.mkdtemp(prefix="megasim-compare-")
    run_h5 = os.path.join(tmp, "run.h5")
    cmd = [MPIEXEC, "--allow-run-as-root", "--oversubscribe", "-np", "4", MEGASIM, "run", "--train-iters", "3",
           "--json", "--out", run_h5] + PLAN
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        print("FAILED to run:", " ".join(cmd), "\n", p.stdout, p.stderr)
        sys.exit(1)
    c, flags, prefix = no_sim(tmp, run_h5, p.stdout)
    sim_h5 = with_sim(tmp, run_h5, flags, c)
    other_profile(tmp, run_h5, flags, c)
    figure(tmp, run_h5, prefix)
    plot_measurement(tmp, run_h5, c)
    bad_inputs(tmp, run_h5, sim_h5, flags)
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"{failures} failure(s)")
    sys.exit(1 if failures else 0)


main()
