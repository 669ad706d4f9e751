#!/usr/bin/env bash
# The README's first command: installs missing Debian packages, builds
# megasim, runs the main job on its built-in default (MegaScale's 175B
# model on 12,288 GPUs with the paper's plan, both systems side by side),
# rebuilds the paper's tables (megasim reproduce, results/), then
# calibrates this machine, trains the tiny GPT for a few steps on 2 CPU
# ranks with the real backend on that profile, and compares the measured
# run with its simulation (a CPU's speed drifts from day to day, so the
# demo measures it rather than trusting the checked-in profile).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
echo
echo "== megasim predict   (built-in default: --preset megascale)"
build/megasim predict
echo
echo "== the same job as Megatron-LM would run it"
build/megasim predict --preset megatron-lm | sed -n '/^iteration time/,/^HFU/p'
echo
echo "== MegaScale's Tables 2 and 3 and Figure 9 rebuilt: paper vs closed form vs simulator"
build/megasim reproduce
echo
echo "== the real backend: this machine calibrated (15 s), the tiny GPT trained on 2 CPU ranks (PP 2), then"
echo "   compared with its simulation on that profile"
mpi=(mpirun --oversubscribe -np 2)
[ "$(id -u)" -eq 0 ] && mpi=(mpirun --allow-run-as-root --oversubscribe -np 2)
mkdir -p results
"${mpi[@]}" build/megasim calibrate --device cpu --quick --out results/cpu-profile.json > /dev/null
"${mpi[@]}" build/megasim run --pipeline-model-parallel-size 2 --train-iters 8 --hardware results/cpu-profile.json \
  --out results/run-tiny.h5
build/megasim compare results/run-tiny.h5 | sed -n '1,12p'
echo "   (one short run: on a shared VM its error moves by tens of percent as the machine's speed drifts"
echo "   between calibration and run; scripts/closed-loop-cpu.sh judges medians over fresh calibrations)"
