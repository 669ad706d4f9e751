#!/usr/bin/env bash
# scripts/memory-plan-cpu.sh: the memory model's plan against what the CPU
# backend really holds. Trains the tiny GPT (experiments/real/tiny-gpt.json)
# one step under a set of 1- and 2-rank plans with `megasim run`, whose end
# report gives the plan (model/workload.c: weights, gradients, optimizer
# states, activations, the layer working set, communication buffers), the
# fullest rank's peak, and what was served beyond the plan (the arena,
# real/arena.c: under-planning, or fragmentation when the peak is under the
# plan). A benchmark table, not a test; check_run holds the 15% bound.
#
#   usage: scripts/memory-plan-cpu.sh [build-dir]   (default: build)
set -u
B=${1:-build}/megasim
[ -x "$B" ] || { echo "memory-plan-cpu: $B is not an executable (build first, or name the build folder)" >&2; exit 1; }
MPIRUN=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -n), megasim run --train-iters 1, tiny GPT (fp32 on the CPU)"
printf "%-4s %-72s %8s %8s %8s %8s\n" ranks "plan (flags)" "planned" "peak" "peak/pl" "beyond"
printf "%-4s %-72s %8s %8s %8s %8s\n" "" "" "MiB" "MiB" "" "MiB"
fail=0
run() {
  local n=$1; shift
  local out
  out=$("${MPIRUN[@]}" -np "$n" "$B" run --train-iters 1 "$@" 2>&1)
  local p u b
  read -r p u < <(echo "$out" | sed -n 's/.*planned \([0-9.]*\) MiB.*used at peak \([0-9.]*\) MiB.*/\1 \2/p')
  b=$(echo "$out" | sed -n 's/.*of which \([0-9.]*\) MiB beyond.*/\1/p')
  if [ -z "${p:-}" ]; then
    echo "memory-plan-cpu: np=$n $* failed:" >&2; echo "$out" | tail -3 >&2; fail=1; return
  fi
  printf "%-4s %-72s %8s %8s %8s %8s\n" "$n" "${*:-(defaults)}" "$p" "$u" "$(awk -v u="$u" -v p="$p" 'BEGIN{printf "%.3f", u/p}')" "${b:-0}"
}
run 1
run 1 --parallel-block
run 1 --hidden-dropout 0.1 --attention-dropout 0.1
run 1 --attention flash
run 1 --recompute-granularity selective
run 1 --recompute-granularity full
run 1 experiments/real/tiny-llama.json
run 2 --tensor-model-parallel-size 2
run 2 --tensor-model-parallel-size 2 --sequence-parallel
run 2 --tensor-model-parallel-size 2 --sequence-parallel --tp-comm-overlap
run 2 --tensor-model-parallel-size 2 --sequence-parallel --parallel-block --hidden-dropout 0.1
run 2 --pipeline-model-parallel-size 2
run 2 --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1
exit $fail
