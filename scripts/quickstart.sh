#!/usr/bin/env bash
# The README's first command: installs missing Debian packages, builds
# megasim, runs the main job on its built-in default (MegaScale's 175B
# model on 12,288 GPUs with the paper's plan, both systems side by side),
# rebuilds the paper's tables (megasim reproduce, results/), then closes
# the loop on this machine three times: calibrate it, train the tiny GPT
# for a few steps on 2 CPU ranks with the real backend on that profile,
# simulate the same job; it judges the median measured step against the
# median simulated one (a shared VM's speed drifts between a calibration
# and a run, so one round alone can be tens of percent off), and shows the
# last round's comparison op class by op class.
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
echo "== the real backend, three rounds: this machine calibrated (about 25 s), the tiny GPT trained on 2 CPU ranks"
echo "   (PP 2, 8 steps), simulated on that profile; medians judged (scripts/closed-loop-cpu.sh)"
ROUNDS=3 PLANS=0 KEEP=results/closed-loop bash scripts/closed-loop-cpu.sh
echo
echo "== the last round, op class by op class (megasim compare)"
build/megasim compare results/closed-loop/run-0.h5 --hardware results/closed-loop/cpu-profile.json |
  sed -n '/^iteration time/p; /^per op class/,/^$/p'
