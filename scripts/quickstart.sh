#!/usr/bin/env bash
# The README's first command: installs missing Debian packages, builds
# megasim, runs the main job on its built-in default (MegaScale's 175B
# model on 12,288 GPUs with the paper's plan, both systems side by side),
# then rebuilds the paper's tables (megasim reproduce, results/).
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
