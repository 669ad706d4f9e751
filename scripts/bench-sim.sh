#!/usr/bin/env bash
# Simulator benchmark (not a test): one iteration of MegaScale's 175B job,
# both presets, folded and unfolded, at 12,288 and 256 GPUs, against issue
# 3's targets (12,288 unfolded < 10 s; folded < 0.2 s; 256 unfolded < 1 s;
# all under 2 GB); then issue 36's scale targets (the default job unfolded
# at 12,288 GPUs in at most 3 s; 131,072 GPUs, batch 16,384, in at most
# 60 s and 4 GB); then the event heap alone (build/sim_heap_bench: 10 M
# pop + push with 100k pending; no target). Prints wall time, peak memory,
# events and events per second. Needs build/megasim and
# build/sim_heap_bench (scripts/quickstart.sh builds them).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/megasim
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# row LABEL GPUS MODE LIMIT_S LIMIT_MB simulate-arguments...: one run, one line
row() {
  local label=$1 gpus=$2 mode=$3 limit_s=$4 limit_mb=$5
  shift 5
  /usr/bin/time -f '%e %M' -o "$tmp/time" $bin simulate "$@" --json > "$tmp/out" 2>/dev/null
  local wall kb events ok
  read -r wall kb < "$tmp/time"
  events=$(python3 -c "import json, sys; print(int(json.load(open(sys.argv[1]))['simulation']['events']))" "$tmp/out")
  ok=$(awk -v w="$wall" -v l="$limit_s" -v m="$kb" -v lm="$limit_mb" \
    'BEGIN{print (w <= l && m <= lm * 1024) ? "met" : "NOT met"}')
  printf '%-14s %7s %-9s %8s %8.0f %10s %12.3g %7s %6s %s\n' "$label" "$gpus" "$mode" "$wall" "$((kb / 1024))" \
    "$events" "$(awk -v e="$events" -v w="$wall" 'BEGIN{print (w > 0 ? e / w : 0)}')" "$limit_s" "$limit_mb" "$ok"
}

printf '%-14s %7s %-9s %8s %8s %10s %12s %7s %6s %s\n' job gpus mode wall_s peak_MB events events_per_s max_s max_MB target
echo "issue 3:"
for sys in megascale megatron-lm; do
  for gpus in 12288 256; do
    batch=$([ "$gpus" = 256 ] && echo 768 || echo 6144)
    row "$sys" "$gpus" folded 0.2 2048 experiments/megascale/table2-$sys-12288.json \
      --num-gpus "$gpus" --global-batch-size "$batch"
    row "$sys" "$gpus" unfolded "$([ "$gpus" = 256 ] && echo 1 || echo 10)" 2048 \
      experiments/megascale/table2-$sys-12288.json --num-gpus "$gpus" --global-batch-size "$batch" --no-fold
  done
done
echo "issue 36:"
row default 12288 unfolded 3 4096 --no-fold
row batch-16384 131072 unfolded 60 4096 --no-fold --num-gpus 131072 --global-batch-size 16384
row batch-16384 131072 folded 0.2 4096 --num-gpus 131072 --global-batch-size 16384
echo
build/sim_heap_bench
