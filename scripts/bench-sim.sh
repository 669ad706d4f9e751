#!/usr/bin/env bash
# Simulator benchmark (not a test): one iteration of MegaScale's 175B job,
# both presets, folded and unfolded, at 12,288 and 256 GPUs. Prints wall
# time, peak memory, events and events per second, against the targets of
# issue 3 (12,288 unfolded < 10 s and < 2 GB; folded < 0.2 s; 256
# unfolded < 1 s); then the event heap alone (build/sim_heap_bench: 10 M
# pop + push with 100k pending; no target). Needs build/megasim and
# build/sim_heap_bench (scripts/quickstart.sh builds them).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/megasim
printf '%-12s %6s %-9s %10s %10s %10s %12s %8s\n' system gpus mode wall_s peak_MB events events_per_s target
for sys in megascale megatron-lm; do
  for gpus in 12288 256; do
    batch=$([ "$gpus" = 256 ] && echo 768 || echo 6144)
    for mode in folded unfolded; do
      flag=$([ "$mode" = unfolded ] && echo --no-fold || echo)
      /usr/bin/time -f '%e %M' -o /tmp/bench_sim.$$ $bin simulate experiments/megascale/table2-$sys-12288.json \
        --num-gpus "$gpus" --global-batch-size "$batch" $flag --json > /tmp/bench_sim_out.$$ 2>/dev/null
      read -r wall kb < /tmp/bench_sim.$$
      events=$(python3 -c "import json; print(int(json.load(open('/tmp/bench_sim_out.$$'))['simulation']['events']))")
      limit=$([ "$mode" = folded ] && echo 0.2 || { [ "$gpus" = 256 ] && echo 1 || echo 10; })
      ok=$(awk -v w="$wall" -v l="$limit" -v m="$kb" 'BEGIN{print (w < l && m < 2*1024*1024) ? "met" : "NOT met"}')
      printf '%-12s %6s %-9s %10s %10.0f %10s %12.3g %8s\n' "$sys" "$gpus" "$mode" "$wall" "$((kb / 1024))" \
        "$events" "$(awk -v e="$events" -v w="$wall" 'BEGIN{print (w > 0 ? e / w : 0)}')" "$ok"
    done
  done
done
rm -f /tmp/bench_sim.$$ /tmp/bench_sim_out.$$
echo
build/sim_heap_bench
