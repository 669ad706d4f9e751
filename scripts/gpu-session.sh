#!/usr/bin/env bash
# scripts/gpu-session.sh: everything megasim measures on a GPU, for a lent
# GPU machine (bare image: nvcc, CMake, PyTorch), in as few calls as the
# device limits allow (10 minutes a command). Each stage logs to
# $OUT (the device tool's folder that comes back) or build-gpu/out.
#
#   usage: scripts/gpu-session.sh [STAGE ...]    (default: all)
#   stages: kernels    scripts/gpu-kernels.sh: kernel tests (gpu label
#                      included), kern_bench, PyTorch SDPA side by side
#           tests      megasim with CUDA (sm_$ARCH) in build-gpu, then its
#                      gpu-labelled tests (kernels, calibration, real backend)
#           calibrate  scripts/gpu-calibrate.sh build-gpu (LEVEL, default quick):
#                      the measured H100 profile
#           real       scripts/gpu-real.sh build-gpu: 1.2B GPT, ours vs PyTorch,
#                      then the run vs its simulation on that profile
#           all        the four in this order
#   env:   ARCH=90  LEVEL=quick|tiny|full  GPU_DEPS=.gpu-deps  NCCL_ROOT=DIR
#
# Before the session, on the Debian 12 development machine:
#   bash scripts/gpu-deps.sh        # MPI, HDF5, GSL, cJSON -> .gpu-deps/ (43 MB)
# then each device call carries it: run(carry=[".gpu-deps"], command=
#   "bash scripts/gpu-session.sh kernels tests") and, in a second call,
#   "bash scripts/gpu-session.sh calibrate real".
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-gpu
arch=${ARCH:-90}
out=${OUT:-$build/out}
mkdir -p "$out"
export ARCH=$arch LEVEL=${LEVEL:-quick}
gpu_deps=${GPU_DEPS:-$root/.gpu-deps}
# shellcheck disable=SC1091
[ -r "$gpu_deps/env.sh" ] && source "$gpu_deps/env.sh"
read -r -a deps_cfg <<< "${MEGASIM_CMAKE_DEPS:-}"
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# NCCL: beside CUDA, NCCL_ROOT, or the nvidia-nccl wheel PyTorch brings.
if [ -z "${NCCL_ROOT:-}" ]; then
  wheel=$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null || true)
  [ -n "$wheel" ] && [ -e "$wheel/include/nccl.h" ] && export NCCL_ROOT=$wheel
fi
nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}

stage_kernels() { bash "$root/scripts/gpu-kernels.sh" "$root/build-gpu-kernels"; }

stage_tests() {
  local cfg=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="$arch"
             -DMEGASIM_EMU=OFF) # the CPU emulation of the GPU code is CI's; here the real thing runs
  [ -n "${NCCL_ROOT:-}" ] && cfg+=(-DNCCL_ROOT="$NCCL_ROOT")
  cmake -S "$root" -B "$build" "${cfg[@]}" ${deps_cfg[@]+"${deps_cfg[@]}"} &&
    cmake --build "$build" -j"$(nproc)" &&
    ctest --test-dir "$build" -j"$(nproc)" -L gpu --output-on-failure # the cpu-labelled ones run in CI
}

# After calibrate (as in `all`), the run is compared with its simulation on
# the measured profile.
stage_real() {
  OUT_DIR="$out/real" PROFILE="$out/h100-sxm-80gb-measured.json" bash "$root/scripts/gpu-real.sh" "$build"
}

stage_calibrate() {
  OUT="$out/h100-sxm-80gb-measured.json" bash "$root/scripts/gpu-calibrate.sh" "$build"
}

stages=("$@")
[ ${#stages[@]} -eq 0 ] || [ "${stages[0]}" = all ] && stages=(kernels tests calibrate real)
status=0
{
  echo "gpu-session: $(date -u +%FT%TZ) on $(hostname)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1 || true
  "$nvcc" --version 2>&1 | tail -n 1
  echo "NCCL_ROOT=${NCCL_ROOT:-(beside CUDA)}  GPU_DEPS=$([ -r "$gpu_deps/env.sh" ] && echo "$gpu_deps" || echo none)"
} | tee "$out/session.txt"
for s in "${stages[@]}"; do
  case $s in
  kernels | tests | real | calibrate) ;;
  *) echo "gpu-session: unknown stage '$s'; stages: kernels tests real calibrate all" >&2; exit 2 ;;
  esac
  echo "== gpu-session: $s" | tee -a "$out/session.txt"
  t0=$(date +%s)
  "stage_$s" > "$out/$s.log" 2>&1
  rc=$?
  echo "   $s: exit $rc after $(($(date +%s) - t0)) s (log: $out/$s.log)" | tee -a "$out/session.txt"
  tail -n 25 "$out/$s.log"
  [ $rc -eq 0 ] || status=1
done
exit $status
