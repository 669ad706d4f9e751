#!/usr/bin/env python3
"""scripts/bench-hang.py [TRIALS] [RANKS]: issue 35's hang benchmark. Each
trial starts an 8-rank CPU job (TP 2 x PP 2 x DP 2), hangs a seeded random
rank at a seeded random op of step 2 (run --inject-fault hang:R:2:OP), waits
until no rank makes progress, and asks `megasim diagnose` for the culprits;
then it runs the same under `megasim supervise --heartbeat-timeout 2` and
reads how long detection took. Prints one row per trial and the totals:
named the hung rank and only it, detected within the timeout + 2 s.
Run from the repository root after building (build/megasim, or $MEGASIM:
a copy keeps a rebuild from pulling the program from under the trials).
Takes about 25 s a trial on the 2-core CI VM."""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

TRIALS = int(sys.argv[1]) if len(sys.argv) > 1 else 20
RANKS = int(sys.argv[2]) if len(sys.argv) > 2 else 8
MEGASIM = os.path.abspath(os.environ.get("MEGASIM", "build/megasim"))
MPI = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(RANKS)]
PLAN = ["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2"]
TIMEOUT = 2.0


def diagnose_when_stalled(save):
    before, d = None, None
    for _ in range(120):
        time.sleep(1)
        p = subprocess.run([MEGASIM, "diagnose", save, "--json"], capture_output=True, text=True)
        if p.returncode:
            continue
        d = json.loads(p.stdout)
        now = [(r["op"], r["in_calls"]) for r in d["hang"]["ranks"]]
        if now == before:
            return d
        before = now
    return d


def ops_of(rank):
    """The ops of rank's program in one step (megasim schedule, the run's job)."""
    p = subprocess.run([MEGASIM, "schedule", "experiments/real/tiny-gpt.json", "--num-gpus", str(RANKS)] + PLAN +
                       ["--rank", str(rank)], capture_output=True, text=True, check=True)
    return sum(1 for l in p.stdout.splitlines() if l.strip() and not l.startswith("#"))


def main():
    rng = random.Random(2026)
    named = detected = 0
    print(f"{'trial':>5} {'rank':>4} {'op':>3} {'culprits':>12} {'detect_s':>9} {'blamed':>6} {'exit':>4}  megasim "
          f"diagnose / supervise, {RANKS} ranks, timeout {TIMEOUT} s")
    for t in range(TRIALS):
        rank = rng.randrange(RANKS)
        op = rng.randrange(ops_of(rank))
        tmp = tempfile.mkdtemp(prefix="megasim-hang-")
        args = PLAN + ["--train-iters", "3", "--save-interval", "1", "--json"]
        try:
            job = subprocess.Popen(MPI + [MEGASIM, "run"] + args + ["--save", tmp + "/a", "--inject-fault",
                                   f"hang:{rank}:2:{op}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   start_new_session=True)
            d = diagnose_when_stalled(tmp + "/a")
            os.killpg(job.pid, 9)
            job.wait()
            culprits = [c["rank"] for c in d["hang"]["culprits"]] if d else []
            named += culprits == [rank]
            p = subprocess.run([MEGASIM, "supervise", "--heartbeat-timeout", str(TIMEOUT), "--"] + MPI +
                               [MEGASIM, "run"] + args + ["--save", tmp + "/b", "--inject-fault",
                                                          f"hang:{rank}:2:{op}"], capture_output=True, text=True)
            inc = [json.loads(l) for l in open(tmp + "/b/incidents.jsonl") if l.strip()]
            hang = [i for i in inc if i.get("cause") == "hang"]
            ds = hang[0]["detection_s"] if hang else float("nan")
            detected += bool(hang) and ds <= TIMEOUT + 2 and hang[0].get("rank") == rank and p.returncode == 0
            blamed = hang[0].get("rank") if hang else None
            print(f"{t:>5} {rank:>4} {op:>3} {str(culprits):>12} {ds:>9.2f} {str(blamed):>6} {p.returncode:>4}",
                  flush=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"named the hung rank and only it: {named} of {TRIALS}; supervise detected it within {TIMEOUT + 2} s, "
          f"blamed it and finished: {detected} of {TRIALS}")
    return 0 if named == TRIALS and detected == TRIALS else 1


if __name__ == "__main__":
    sys.exit(main())
