#!/usr/bin/env bash
# scripts/closed-loop-cpu.sh: the CPU backend's closed loop (issue 8): on
# this machine, calibrate a profile (megasim calibrate --quick, 2 MPI
# ranks), train the tiny GPT under several 2-rank plans with that profile
# (megasim run --hardware), and compare each measured run with its
# simulation (megasim compare). Prints one row per plan: measured and
# simulated iteration time, their error, and the op class that differs
# most. A benchmark, not a test: the target is |error| <= 15%.
#
#   usage: scripts/closed-loop-cpu.sh [build-dir]   (default: build)
#   env:   ITERS=8 (steps per run; the first is left out as warm-up)
# Run it on an otherwise idle machine: 2 ranks on 2 cores, one core each,
# as the profile prices them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
iters=${ITERS:-8}
mpi=(mpirun --oversubscribe -np 2)
[ "$(id -u)" -eq 0 ] && mpi=(mpirun --allow-run-as-root --oversubscribe -np 2)
work=$(mktemp -d /tmp/megasim-closed-loop.XXXXXX)
trap 'rm -rf "$work"' EXIT
megasim=$build/megasim
echo "calibrating (megasim calibrate --device cpu --quick) ..." >&2
"${mpi[@]}" "$megasim" calibrate --device cpu --quick --out "$work/cpu.json" >/dev/null
plans=("--pipeline-model-parallel-size 2"
       "--pipeline-model-parallel-size 2 --attention flash --fused-elementwise"
       "--use-distributed-optimizer --zero-stage 1"
       "--attention flash --fused-elementwise --async-data-loader"
       "--tensor-model-parallel-size 2 --sequence-parallel")
printf '%-72s %10s %10s %8s  %s\n' "plan (2 ranks, tiny GPT)" "measured_s" "simulated" "error" "largest difference"
for p in "${plans[@]}"; do
  # shellcheck disable=SC2086
  "${mpi[@]}" "$megasim" run --hardware "$work/cpu.json" --train-iters "$iters" $p --out "$work/run.h5" >/dev/null
  "$megasim" compare "$work/run.h5" --json --plot "$work/cmp" 2>/dev/null | python3 -c '
import json, sys
c = json.load(sys.stdin)
it = c["iteration"]
top = c["largest_differences"][0] if c["largest_differences"] else {}
name = "%s %+.1f ms" % (top["name"], 1e3 * top["difference_s"]) if top else "-"
print("%-72s %10.4f %10.4f %+7.1f%%  %s" % (sys.argv[1], it["measured_s"], it["simulated_s"], it["error_pct"], name))
' "$p"
done
