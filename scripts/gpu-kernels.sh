#!/usr/bin/env bash
# scripts/gpu-kernels.sh: on a GPU machine (nvcc, CMake, PyTorch; no Debian
# -dev packages needed), build kernels/ and tests/kernels/ alone for sm_90
# (kernels/standalone: no MPI, GSL, HDF5 or cJSON), run every kernel test
# there (the references against finite differences, then each CUDA kernel
# against its reference; the emulated ones are CI's), run kern_bench, and
# time PyTorch SDPA (flash) at the same attention shapes, printing the two
# side by side; last, issue 5's speed targets, each with its verdict
# (kernels/bench/targets.py). The log starts with the date and the device.
# A GPU test that reports "skipped" on a machine where nvidia-smi sees a
# GPU (a driver or architecture mismatch) fails the script.
#   usage: scripts/gpu-kernels.sh [build-dir]     ARCH=80 to target A100
#          KERN_TESTS=0 leaves the tests out (gpu-session.sh's tests stage ran them)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-gpu-kernels}
arch=${ARCH:-90}
nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}

echo "== $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname)"
nvidia-smi -L 2>/dev/null || echo "nvidia-smi: no GPU listed"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv 2>/dev/null || true
if grep -qs '^CMAKE_PROJECT_NAME:STATIC=megasim$' "$build/CMakeCache.txt"; then
  # A whole megasim build (gpu-session.sh builds one for every stage): its
  # kernel tests and kern_bench are the same targets; no second build.
  echo "== megasim build in $build (already configured): make sure it is up to date"
  cmake --build "$build" -j"$(nproc)"
else
  echo "== configure + build (sm_$arch) in $build"
  cmake -S "$root/kernels/standalone" -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="$arch"
  cmake --build "$build" -j"$(nproc)"
fi

status=0
if [ "${KERN_TESTS:-1}" = 0 ]; then
  echo "== kernel tests: not run here (KERN_TESTS=0: gpu-session.sh's tests stage ran them)"
else
  echo "== kernel tests (cpu: references and finite differences; gpu: CUDA against the references)"
  tests_log=$build/kern_tests.txt
  ctest --test-dir "$build" -R kern -j"$(nproc)" --output-on-failure 2>&1 | tee "$tests_log" || status=1
  skipped=$(grep -c '\*\*\*Skipped' "$tests_log" || true)
  if [ "$skipped" -gt 0 ] && nvidia-smi -L >/dev/null 2>&1; then
    echo "FAIL: $skipped kernel test(s) skipped although nvidia-smi lists a GPU: the CUDA build cannot use it" \
         "(sm_$arch against the device's architecture, or the driver against CUDA $("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'))"
    status=1
  fi
fi

echo "== kern_bench"
bench_out=$build/kern_bench.txt
"$build/kernels/bench/kern_bench" | tee "$bench_out" || status=$?
# The FA-2 tiles, fastest first at the 175B / 1.3B shape: the defaults to keep
# or change (mf_tile, mb_warps in kernels/attention_mma.cuh).
for pass in fwd_t bwd_w; do
  echo "== attention_flash_${pass}* at the 175B shape, fastest first (time_us)"
  awk -v p="attention_flash_$pass" 'index($1, p) == 1 && /175B/ {print $1, $(NF-3)}' "$bench_out" | sort -g -k2
done

echo "== PyTorch SDPA baseline"
sdpa_out=$build/sdpa_baseline.txt
# PyTorch on the image's own libraries (.gpu-deps/env.sh put Debian's on LD_LIBRARY_PATH)
torch_py() { LD_LIBRARY_PATH=${MEGASIM_BASE_LD_LIBRARY_PATH-${LD_LIBRARY_PATH:-}} python3 "$@"; }
if torch_py -c "import torch" 2>/dev/null; then
  torch_py "$root/kernels/bench/sdpa_baseline.py" | tee "$sdpa_out" || status=$?
  echo "== attention side by side at the 175B/TP8 shape (fwd+bwd, causal; target (issue 38): ours >= 1.0x torch; every shape below)"
  ours=$(awk '$1 == "attention_flash_fwdbwd" && /175B/ {print $(NF-3)}' "$bench_out")
  theirs=$(awk '$1 == "sdpa_flash_fwdbwd" && /175B/ {print $(NF-1)}' "$sdpa_out")
  printf "%-28s %12s us\n%-28s %12s us\n" "kern attention fwd+bwd" "${ours:-?}" \
    "torch sdpa flash fwd+bwd" "${theirs:-?}"
  if [ -n "$ours" ] && [ -n "$theirs" ]; then
    awk -v o="$ours" -v t="$theirs" 'BEGIN { printf "speed ratio (torch time / ours) %.2f\n", t / o }'
  fi
else
  echo "PyTorch not found: SDPA baseline skipped"
  sdpa_out=
fi

echo "== issue 5's speed targets"
python3 "$root/kernels/bench/targets.py" "$bench_out" ${sdpa_out:+"$sdpa_out"} | tee "$build/targets.txt" || status=$?
exit $status
