#!/usr/bin/env bash
# tests/fuzz/craft.sh MEGASIM CRAFT MPIEXEC DIR: valid result files of each
# kind (simulate, run under mpirun, reproduce quick, goodput), then the damaged
# copies tests/fuzz/craft.c makes of them, into DIR/result/.
set -euo pipefail
megasim=$1 craft=$2 mpiexec=$3 dir=$4
rm -rf "$dir" && mkdir -p "$dir/result" "$dir/base"
cd "$dir/base"
"$megasim" simulate --num-gpus 16 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \
  --num-layers-per-virtual-pipeline-stage 0 --global-batch-size 32 --trace-ranks 0,1 --out sim.h5 >/dev/null
"$mpiexec" --allow-run-as-root --oversubscribe -np 2 "$megasim" run --pipeline-model-parallel-size 2 \
  --train-iters 2 --out run.h5 >/dev/null
"$megasim" reproduce quick --no-sim --no-plot --out rep.h5 >/dev/null 2>&1
"$megasim" goodput --trials 50 --sweep-trials 10 --out gp.h5 >/dev/null 2>&1
"$craft" "$dir/result" sim.h5 run.h5 rep.h5 gp.h5
echo "crafted: $(ls "$dir/result" | grep -c '\.h5$') damaged result files in $dir/result"
