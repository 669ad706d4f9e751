#!/usr/bin/env bash
# The README's second command (and .ci/run): installs missing Debian
# packages, builds everything, and runs every test with ctest. GPU tests
# report "skipped" where no GPU is present.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure -j"$(nproc)"
