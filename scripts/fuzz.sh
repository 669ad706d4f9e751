#!/usr/bin/env bash
# scripts/fuzz.sh [MINUTES]: fuzzes megasim's four ways in for MINUTES in
# all (default 4), a quarter each, with libFuzzer under AddressSanitizer
# and UndefinedBehaviorSanitizer (clang, build-fuzz/): a job file, a
# hardware profile, a command line, a result file (tests/fuzz/fuzz_*.c).
# Seeds: tests/fuzz/corpus, experiments/ and small result files made here.
# The growing corpus stays in build-fuzz/corpus/ between runs; a crash,
# leak, timeout or sanitizer report is copied into tests/fuzz/corpus/KIND/
# (to minimise, commit with a .expect, and replay every run) and fails the
# script. Prints executions, coverage and findings per target.
set -uo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-4}
case "$minutes" in ''|*[!0-9]*) echo "usage: $0 [MINUTES] (a whole number; got '$minutes')" >&2; exit 2 ;; esac
command -v clang >/dev/null || { echo "fuzz.sh: clang is needed (apt-get install clang)" >&2; exit 2; }
b=build-fuzz
CC=clang CXX=clang++ cmake -S . -B $b -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEGASIM_FUZZ=ON \
  -DMEGASIM_SANITIZE=address,undefined -DMEGASIM_EMU=OFF -DMEGASIM_CUDA=OFF >/dev/null || exit 1
cmake --build $b -j"$(nproc)" --target megasim fuzz_job fuzz_hardware fuzz_flags fuzz_result >/dev/null || exit 1

# Seeds.
mkdir -p $b/corpus/{job,hardware,flags,result} $b/findings
cp tests/fuzz/corpus/job/*.json experiments/models/*.json experiments/megascale/*.json experiments/real/*.json \
  $b/corpus/job/ 2>/dev/null
cp tests/fuzz/corpus/hardware/*.json tests/fuzz/corpus/data/*.json experiments/profiles/*.json $b/corpus/hardware/ 2>/dev/null
cp tests/fuzz/corpus/flags/* $b/corpus/flags/ 2>/dev/null
cp tests/fuzz/corpus/result/*.h5 $b/corpus/result/ 2>/dev/null
rm -f $b/corpus/*/*.expect
printf -- '--preset\nmegatron-lm\n--num-gpus\n1024\n--global-batch-size\n768\n' > $b/corpus/flags/seed-plan
printf -- '--num-layers\n4\n--hidden-size\n1024\n--num-attention-heads\n16\n--pipeline-model-parallel-size\n1\n' > $b/corpus/flags/seed-small
printf -- '--num-experts\n64\n--expert-model-parallel-size\n8\n--context-parallel-size\n2\n--decoder-first-pipeline-num-layers\n2\n--num-virtual-stages-per-pipeline-rank\n2\n--moe-expert-load-cv\n0.3\n--fp8-format\nhybrid\n--gpu\nh100-sxm-80gb\n--activation-offload-fraction\n0.5\n' > $b/corpus/flags/seed-splits
(cd $b/corpus/result && ../../megasim simulate --num-gpus 16 --tensor-model-parallel-size 2 \
   --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 0 --global-batch-size 32 \
   --trace-ranks 0,1 --out seed-sim.h5 >/dev/null 2>&1
 ../../megasim reproduce quick --no-sim --no-plot --out seed-rep.h5 >/dev/null 2>&1; rm -f seed-rep-*)

export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
per=$((minutes * 60 / 4)); [ $per -ge 10 ] || per=10
printf '%-10s %10s %8s %8s %9s\n' target executions cov ft findings
status=0
for t in job hardware flags result; do
  max=65536; [ $t = result ] && max=262144
  log=$b/fuzz-$t.log
  (cd $b/findings && "../tests/fuzz/fuzz_$t" -max_total_time=$per -max_len=$max -timeout=30 -rss_limit_mb=4096 \
     -print_final_stats=1 "../corpus/$t" >"../fuzz-$t.log" 2>&1)
  runs=$(grep -o 'Done [0-9]* runs' $log | awk '{print $2}' | tail -1)
  cov=$(grep -o 'cov: [0-9]*' $log | tail -1 | awk '{print $2}')
  ft=$(grep -o 'ft: [0-9]*' $log | tail -1 | awk '{print $2}')
  found=0
  for f in $b/findings/crash-* $b/findings/leak-* $b/findings/timeout-* $b/findings/oom-*; do
    [ -e "$f" ] || continue
    found=$((found + 1)); status=1
    cp "$f" "tests/fuzz/corpus/$t/$(basename "$f")"
    mv "$f" "$f.$t.seen"
  done
  grep -q 'ERROR: \|runtime error' $log && [ $found -eq 0 ] && { found=1; status=1; }
  printf '%-10s %10s %8s %8s %9s\n' "fuzz_$t" "${runs:-?}" "${cov:-?}" "${ft:-?}" $found
done
[ $status -eq 0 ] && echo "no crash, hang, leak or sanitizer report (logs: $b/fuzz-*.log)" \
  || echo "findings copied into tests/fuzz/corpus/: see $b/fuzz-*.log" >&2
exit $status
