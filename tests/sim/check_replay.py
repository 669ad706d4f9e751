#!/usr/bin/env python3
"""tests/sim/check_replay.py: `--replay RESULT` (cmd/replay.c) on simulate,
predict, search and schedule repeats what a result file records. Every check
prints what it expected, what it got and where the expected value comes
from.

  1. simulate on a profile file with a straggler and two traced ranks,
     --out A.h5 --trace A.json --json; the profile file is then deleted.
     `simulate --replay A.h5 --out B.h5 --json` gives the same JSON
     (every key but config.simulate's out and replay) and, with h5diff, the
     same /summary, /ranks and /timeline; replaying the --json output and
     the Chrome trace gives the same summary too, and so does replaying
     B.h5 (a replay of a replay)
  2. the replay records the job and hardware it replayed: config.job and
     config.hardware equal A's key by key
  3. flags apply over the recorded job: --replay A.h5 --num-gpus 512 gives
     what the original flags with --num-gpus 512 give (profile recreated);
     --cluster megascale replaces the recorded cluster section by the
     built-in one (what the original flags without the profile give)
  4. predict --replay A.h5 --json, search --replay A.h5 --json and
     schedule --replay A.h5 --rank 3 print what predict, search and
     schedule print on the original flags and profile
  5. a measurement (megasim run --out, CPU backend, one rank): simulate
     --replay RUN.h5 simulates the recorded job and hardware exactly; the
     run's own options are recorded under "run", not "simulate"; compare
     takes that simulation as SIM.h5 (the same job)
  6. run --replay RUN.h5 trains the recorded job again: the same losses bit
     for bit, on one rank and (with MPIEXEC) on two with PP 2; the recorded
     world size is kept, so another mpirun size is refused
  7. bad input: a search result (many jobs), a missing file, a job file
     (no recorded config), a config without hardware, a recorded job key
     megasim does not know: exit 2, one stderr line, nothing on stdout

usage: check_replay.py MEGASIM [MPIEXEC]"""
import json, os, shutil, subprocess, sys, tempfile

MEGASIM = sys.argv[1]
MPIEXEC = sys.argv[2] if len(sys.argv) > 2 else None
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
failures = 0
checks = 0


def check(ok, what, expected, source, got):
    global failures, checks
    checks += 1
    failures += not ok
    print(f"{'ok  ' if ok else 'FAIL'} {what}: expected {expected} ({source}), got {got}")


def megasim(args):
    return subprocess.run([MEGASIM] + args, capture_output=True, text=True, timeout=120)


def must(args):
    p = megasim(args)
    if p.returncode != 0:
        print(f"FAIL megasim {' '.join(args)}: exit {p.returncode}\nstdout: {p.stdout}\nstderr: {p.stderr}")
        sys.exit(1)
    return p.stdout


def sim_json(args):
    return json.loads(must(["simulate"] + args + ["--json"]))


def without_config(d):
    return {k: v for k, v in d.items() if k != "config"}


def h5_config(path):
    out = subprocess.run(["h5dump", "-a", "/config_json", "-y", path], capture_output=True, text=True).stdout
    start, end = out.index('"{'), out.rindex('}"')
    return json.loads(out[start + 1:end + 1])


def bad(args, want, source):
    p = megasim(args)
    lines = p.stderr.strip().splitlines()
    check(p.returncode == 2 and len(lines) == 1 and want in p.stderr and not p.stdout,
          f"megasim {' '.join(args[:3])}", f"exit 2, one stderr line containing '{want}', empty stdout", source,
          f"exit {p.returncode}, {len(lines)} stderr line(s): {p.stderr.strip()[:300]}, stdout {len(p.stdout)} bytes")


tmp = tempfile.mkdtemp(prefix="megasim_replay_")
os.chdir(tmp)
have_h5 = shutil.which("h5diff") and shutil.which("h5dump")

# A profile of its own (the fitted values of no built-in), so that only a
# replay that reads the recorded profile can give A's numbers once it is gone.
PROFILE = {"cluster": {"base": "megascale", "compute_scale": 0.9123, "host_sync_gap_us": 321.0,
                       "iteration_overhead_s": 0.37, "nvlink_scale": 0.66}}
def write_profile():
    with open("p.json", "w") as f:
        json.dump(PROFILE, f)

FLAGS = ["--num-gpus", "256", "--global-batch-size", "768", "--hardware", "p.json", "--slow-rank", "3:1.2",
         "--trace-ranks", "0,3", "--seed", "5"]

# ---- 1 ---------------------------------------------------------------------
write_profile()
a = sim_json(FLAGS + ["--out", "A.h5", "--trace", "A.json"])
with open("A.out", "w") as f:
    json.dump(a, f)
os.remove("p.json")
b = sim_json(["--replay", "A.h5", "--out", "B.h5"])
check(without_config(a) == without_config(b), "simulate --replay A.h5: every --json number",
      f"mfu {a['mfu']!r}, iteration {a['iteration_time_s']!r} s", "A's --json, its profile file since deleted",
      f"mfu {b['mfu']!r}, iteration {b['iteration_time_s']!r} s")
sa, sb = a["config"]["simulate"], b["config"]["simulate"]
changed = sorted(k for k in set(sa) | set(sb) if sa.get(k) != sb.get(k))
check(changed == ["out", "replay", "trace"], "config.simulate keys that differ", "['out', 'replay', 'trace']",
      "a replay writes where its command line says (B: --out only) and records what it replayed", changed)
check(sb.get("replay") == "A.h5" and sb.get("slow_rank") == "3:1.2" and sb.get("seed") == 5,
      "replayed simulate options", "replay A.h5, slow_rank 3:1.2, seed 5", "A's command line",
      f"replay {sb.get('replay')}, slow_rank {sb.get('slow_rank')}, seed {sb.get('seed')}")
if have_h5:
    for ds in ["/summary", "/ranks", "/timeline"]:
        p = subprocess.run(["h5diff", "A.h5", "B.h5", ds, ds], capture_output=True, text=True)
        check(p.returncode == 0, f"h5diff A.h5 B.h5 {ds}", "identical (exit 0)", "the same inputs give the same file",
              f"exit {p.returncode} {p.stdout.strip()[:200]}")
else:
    print("note: h5diff/h5dump not on PATH (hdf5-tools): the HDF5 datasets are not compared")
for src in ["A.out", "A.json", "B.h5"]:
    c = sim_json(["--replay", src])
    check(without_config(c) == without_config(a), f"simulate --replay {src}: every --json number",
          f"mfu {a['mfu']!r}", "A's --json", f"mfu {c['mfu']!r}")

# ---- 2 ---------------------------------------------------------------------
for sec in ["job", "hardware"]:
    check(a["config"][sec] == b["config"][sec], f"config.{sec} of the replay", "A's, key by key",
          "the recorded configuration is the replay's start",
          "equal" if a["config"][sec] == b["config"][sec] else
          [k for k in a["config"][sec] if a["config"][sec][k] != b["config"][sec].get(k)])
if have_h5:
    ca, cb = h5_config("A.h5"), h5_config("B.h5")
    check(ca["job"] == cb["job"] and ca["hardware"] == cb["hardware"], "B.h5 config_json job and hardware",
          "A.h5's", "h5dump of both files", "equal" if ca["job"] == cb["job"] else "different")

# ---- 3 ---------------------------------------------------------------------
write_profile()
want = sim_json(FLAGS[:1] + ["512"] + FLAGS[2:])
os.remove("p.json")
got = sim_json(["--replay", "A.h5", "--num-gpus", "512"])
check(without_config(got) == without_config(want) and got["config"]["job"]["num_gpus"] == 512,
      "simulate --replay A.h5 --num-gpus 512", f"mfu {want['mfu']!r}, job.num_gpus 512",
      "A's flags with --num-gpus 512 on the same profile", f"mfu {got['mfu']!r}, job.num_gpus "
      f"{got['config']['job']['num_gpus']}")
want = sim_json([f for i, f in enumerate(FLAGS) if f != "--hardware" and (i == 0 or FLAGS[i - 1] != "--hardware")])
got = sim_json(["--replay", "A.h5", "--cluster", "megascale"])
check(without_config(got) == without_config(want) and
      got["config"]["hardware"]["cluster"] == want["config"]["hardware"]["cluster"],
      "simulate --replay A.h5 --cluster megascale", f"mfu {want['mfu']!r} and the built-in cluster section",
      "A's flags without the profile file (it changed only the cluster section)",
      f"mfu {got['mfu']!r}, compute_scale {got['config']['hardware']['cluster']['compute_scale']}")

# ---- 4 ---------------------------------------------------------------------
write_profile()
plan = FLAGS[:6]  # the job and the profile; predict and schedule have no straggler options
want_p = json.loads(must(["predict"] + plan + ["--json"]))
want_s = must(["schedule"] + plan + ["--rank", "3"])
os.remove("p.json")
got_p = json.loads(must(["predict", "--replay", "A.h5", "--json"]))
check(without_config(got_p) == without_config(want_p) and got_p["config"] == want_p["config"],
      "predict --replay A.h5 --json", f"mfu {want_p['mfu']!r} and the same config",
      "predict on A's flags and profile", f"mfu {got_p['mfu']!r}")
write_profile()
want_q = json.loads(must(["search"] + plan + ["--rerank", "1", "--top", "3", "--json"]))
os.remove("p.json")
got_q = json.loads(must(["search", "--replay", "A.h5", "--rerank", "1", "--top", "3", "--json"]))
check([without_config(x) for x in got_q] == [without_config(x) for x in want_q] and len(got_q) == 3,
      "search --replay A.h5 --json: the top 3 plans", [(x["plan"], x["mfu"]) for x in want_q][:1],
      "search on A's flags and profile (the recorded plan searched like a default one)",
      [(x["plan"], x["mfu"]) for x in got_q][:1])
got_s = must(["schedule", "--replay", "A.h5", "--rank", "3"])
check(got_s == want_s, "schedule --replay A.h5 --rank 3", f"{len(want_s.splitlines())} identical lines",
      "schedule on A's flags and profile", f"{len(got_s.splitlines())} lines, "
      f"{'identical' if got_s == want_s else 'different'}")

# ---- 5 ---------------------------------------------------------------------
must(["run", "--train-iters", "2", "--out", "R.h5"])
r = sim_json(["--replay", "R.h5"])
if have_h5:
    cr = h5_config("R.h5")
    check(r["config"]["job"] == cr["job"] and r["config"]["hardware"] == cr["hardware"],
          "simulate --replay R.h5: job and hardware", "R.h5's config_json job and hardware", "megasim run --out",
          "equal" if r["config"]["job"] == cr["job"] and r["config"]["hardware"] == cr["hardware"] else "different")
    check("run" in cr and "simulate" not in cr and cr["run"].get("train_iters") == 2,
          "R.h5 config_json's options object", "\"run\" with train_iters 2, no \"simulate\"", "docs/schema.md",
          sorted(k for k in cr if k not in ("job", "hardware", "version")))
must(["simulate", "--replay", "R.h5", "--no-fold", "--out", "RS.h5"])
inproc = json.loads(must(["compare", "R.h5", "--json", "--plot", "RC"]))["iteration"]["simulated_s"]
p = megasim(["compare", "R.h5", "RS.h5", "--json", "--plot", "RC"])
got = json.loads(p.stdout)["iteration"]["simulated_s"] if p.returncode == 0 else None
check(got == inproc, "compare R.h5 RS.h5 (RS.h5 from simulate --replay R.h5 --no-fold): simulated iteration",
      f"{inproc} s", "compare R.h5's own in-process simulation of the recorded job and profile (unfolded)",
      f"{got} s" if got is not None else f"exit {p.returncode} {p.stderr.strip()[:200]}")
ref = json.load(open(os.path.join(ROOT, "experiments", "real", "tiny-gpt.json")))
check(r["config"]["job"]["num_layers"] == ref["num_layers"] and r["config"]["job"]["num_gpus"] == 1,
      "the replayed measurement's job", f"num_layers {ref['num_layers']}, num_gpus 1",
      "experiments/real/tiny-gpt.json, run's default, on one rank",
      f"num_layers {r['config']['job']['num_layers']}, num_gpus {r['config']['job']['num_gpus']}")

# ---- 6 ---------------------------------------------------------------------
def losses(out):
    return [json.loads(l)["loss"] for l in out.splitlines() if l.startswith("{")]

orig = losses(must(["run", "--train-iters", "3", "--seed", "7", "--json", "--out", "R1.h5"]))
again = losses(must(["run", "--replay", "R1.h5", "--json", "--out", "R2.h5"]))
check(again == orig and len(orig) == 3, "run --replay R1.h5: the losses", orig,
      "R1.h5's own run (seed 7, 3 steps): the CPU path is deterministic", again)
if have_h5:
    c1, c2 = h5_config("R1.h5"), h5_config("R2.h5")
    diff = sorted(k for k in c1["run"] if k in c2["run"] and c1["run"][k] != c2["run"][k] and
                  k not in ("comm_init_s", "timing_overhead_ns_per_op", "timing_overhead_fraction"))
    check(c1["job"] == c2["job"] and c1["hardware"] == c2["hardware"] and diff == ["out", "replay"],
          "R2.h5's recorded job, hardware and run options", "R1.h5's, but out and replay",
          "a replay trains the recorded job (measured values aside)",
          f"job {'equal' if c1['job'] == c2['job'] else 'different'}, options differing: {diff}")
if MPIEXEC:
    mpi = [MPIEXEC, "--allow-run-as-root", "--oversubscribe", "-np", "2", MEGASIM, "run"]
    def mpirun(args):
        return subprocess.run(mpi + args, capture_output=True, text=True, timeout=300)
    p1 = mpirun(["--pipeline-model-parallel-size", "2", "--train-iters", "2", "--json", "--out", "P.h5"])
    p2 = mpirun(["--replay", "P.h5", "--json"])
    check(p1.returncode == 0 and p2.returncode == 0 and losses(p2.stdout) == losses(p1.stdout) and
          len(losses(p1.stdout)) == 2, "mpirun -np 2 run --replay P.h5 (PP 2): the losses", losses(p1.stdout),
          "P.h5's own 2-rank run", f"{losses(p2.stdout)} (exit {p2.returncode}) {p2.stderr.strip()[-200:]}")
    p3 = mpirun(["--replay", "R1.h5"])
    err = p3.stderr.strip().splitlines()
    check(p3.returncode != 0 and not p3.stdout and
          "num-gpus = 1 (the replayed run's) does not match the MPI world size 2" in p3.stderr,
          "mpirun -np 2 run --replay R1.h5 (a 1-rank run)", "refused, naming the recorded and the world size",
          "a replay keeps the recorded world size", f"exit {p3.returncode}: {err[0] if err else ''}")
else:
    print("note: no MPIEXEC given: the 2-rank run replays are not checked")

# ---- 7 ---------------------------------------------------------------------
must(["search", "--num-gpus", "64", "--global-batch-size", "64", "--num-layers", "8", "--hidden-size", "1024",
      "--num-attention-heads", "16", "--rerank", "0", "--out", "S.h5"])
bad(["simulate", "--replay", "S.h5"], "kind 'search' holds more than one job", "a search file records many plans")
bad(["predict", "--replay", "missing.h5"], "missing.h5: cannot open", "no such file")
bad(["simulate", "--replay", os.path.join(ROOT, "experiments", "real", "tiny-gpt.json")],
    "no \"config\"", "a job file is given as a file, not replayed")
with open("nohw.json", "w") as f:
    json.dump({"config": {"job": {}}}, f)
bad(["simulate", "--replay", "nohw.json"], "has no \"hardware\" object", "a configuration records both")
with open("badkey.json", "w") as f:
    json.dump({"config": {"job": {"bogus_field": 1}, "hardware": a["config"]["hardware"]}}, f)
bad(["predict", "--replay", "badkey.json"], "unknown job field 'bogus_field'", "job_opts has no such option")

shutil.rmtree(tmp, ignore_errors=True)
print(f"{checks} checks, {failures} failed")
if failures or checks == 0:
    sys.exit(1)
