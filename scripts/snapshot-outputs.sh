#!/usr/bin/env bash
# Writes what megasim's main commands print and write, for a fixed set of
# jobs, into OUTDIR, one file each; two snapshots diff byte for byte when
# the numbers are unchanged (a refactor's proof: snapshot before, snapshot
# after, `diff -r`). Timings go to stderr and are not kept; every path is
# relative to OUTDIR so that the recorded configurations match.
#   scripts/snapshot-outputs.sh [BUILD_DIR] OUTDIR
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -ge 2 ]; then build=$(cd "$1" && pwd); shift; else build="$root/build"; fi
[ $# -eq 1 ] || { echo "usage: $0 [BUILD_DIR] OUTDIR" >&2; exit 2; }
out=$1
rm -rf "$out" && mkdir -p "$out" && cd "$out"
m="$build/megasim"
x="$root/experiments"
run() { local name=$1; shift; "$m" "$@" >"$name" 2>/dev/null; }

run predict.json predict --json
run predict-megatron.json predict --preset megatron-lm --json
run predict-llama3-8b.json predict "$x/models/llama3-8b.json" --preset megatron-lm --attention flash \
  --gpu h100-sxm-80gb --cluster fattree --num-gpus 64 --tensor-model-parallel-size 4 \
  --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 0 --global-batch-size 128 --json
run predict-table2-3072.json predict "$x/megascale/table2-megatron-lm-12288.json" --num-gpus 3072 --json
run predict-zero3.json predict --preset none --num-layers 4 --hidden-size 1024 --num-attention-heads 16 \
  --tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --num-layers-per-virtual-pipeline-stage 0 \
  --num-gpus 4 --global-batch-size 16 --micro-batch-size 2 --zero-stage 3 --json
run predict-fp32.json predict --no-bf16 --json
run predict-ops.txt predict --ops
run schedule-rank0.txt schedule --rank 0 --num-gpus 4 --tensor-model-parallel-size 1 \
  --pipeline-model-parallel-size 4 --num-layers 16 --global-batch-size 8 --preset megatron-lm
run simulate.json simulate --json
run simulate-megatron.json simulate --preset megatron-lm --json
run simulate-nofold.json simulate --json --no-fold --num-gpus 1024 --global-batch-size 768 --slow-hosts 0.02 --seed 7
run simulate-flows.json simulate --json --network flows --num-gpus 256 --global-batch-size 768
run simulate-stragglers.json simulate --json --slow-rank 17:1.2 --slow-link 40:2 --seed 3
run simulate-out.txt simulate --num-gpus 256 --global-batch-size 768 --out sim.h5 --trace sim-trace.json --trace-ranks 0,8,63
run search.json search --json
run search-small.json search --num-gpus 256 --global-batch-size 768 --json
run search-files.txt search --num-gpus 256 --global-batch-size 768 --out search.h5 --csv search.csv
mkdir -p reproduce && (cd reproduce && "$m" reproduce --out megascale.h5 >stdout.txt 2>/dev/null)
for f in $(find . -name '*.h5' | sort); do h5dump "$f" >"$f.dump"; done
find . -type f -name '*.png' -delete
