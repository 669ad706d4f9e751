#!/usr/bin/env bash
# scripts/gpu-calibrate.sh: on a GPU machine, the whole GPU calibration in
# one command: build megasim with CUDA, run the calibration tests (the GPU
# one, calib_gpu_tiny_profile, included), then `megasim calibrate --device
# gpu` with one MPI rank per visible GPU (NCCL collectives and the compute
# slowdown beside an all-reduce need >= 2; one GPU: one process, and the
# base profile keeps those fields), keep the profile, and predict one job
# with it beside the built-in profile it refines.
#
#   usage: scripts/gpu-calibrate.sh [build-dir]     (default: build-gpu-calibrate)
#   env:   ARCH=90 (sm_90; 80 for A100)   LEVEL=full|quick|tiny (default full)
#          NP=N (ranks; default: the GPUs visible)   BASE_GPU=h100-sxm-80gb
#          OUT=FILE.json (default: experiments/profiles/h100-sxm-80gb-measured.json;
#          the raw samples go to FILE.h5, not checked in)
#          NCCL_ROOT=DIR (a tree with include/nccl.h and lib/libnccl.so*, when
#          NCCL is not beside the CUDA Toolkit)
#
# It needs what megasim needs: CMake >= 3.25, nvcc, NCCL, MPI (mpirun), HDF5,
# GSL and cJSON (scripts/install-deps.sh installs the Debian ones, and
# scripts/gpu-deps.sh gathers them into .gpu-deps/ for a bare GPU image,
# which this script then uses); the configure step stops with the name of
# what is missing. The report (fits,
# residuals, nccl-tests tables) is kept beside the build as report.txt.
# Full level on one 8-GPU H100 node: a few minutes (collectives to 1 GiB).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-gpu-calibrate}
# Libraries carried in by scripts/gpu-deps.sh (a bare GPU image has no MPI,
# HDF5, GSL or cJSON): GPU_DEPS=DIR, default .gpu-deps beside the sources.
gpu_deps=${GPU_DEPS:-$root/.gpu-deps}
# shellcheck disable=SC1091
[ -r "$gpu_deps/env.sh" ] && source "$gpu_deps/env.sh" && echo "== libraries from $gpu_deps"
read -r -a deps_cfg <<< "${MEGASIM_CMAKE_DEPS:-}"
arch=${ARCH:-90}
level=${LEVEL:-full}
base_gpu=${BASE_GPU:-h100-sxm-80gb}
out=${OUT:-$root/experiments/profiles/h100-sxm-80gb-measured.json}
nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
work=$build/gpu-calibrate
mkdir -p "$work" "$(dirname "$out")"

# GPUs this process may use: CUDA_VISIBLE_DEVICES when set, else nvidia-smi.
gpus() {
  if [ -n "${CUDA_VISIBLE_DEVICES+x}" ]; then
    awk -F, '{n = 0; for (i = 1; i <= NF; i++) { if ($i == "" || $i == "-1") break; n++ } print n}' \
      <<< "$CUDA_VISIBLE_DEVICES"
  else
    nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true
  fi
}

echo "== configure + build megasim (sm_$arch) in $build"
cfg=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="$arch" -DMEGASIM_EMU=OFF)
[ -n "${NCCL_ROOT:-}" ] && cfg+=(-DNCCL_ROOT="$NCCL_ROOT")
cfg+=(${deps_cfg[@]+"${deps_cfg[@]}"})
if ! cmake -S "$root" -B "$build" "${cfg[@]}" >"$work/configure.txt" 2>&1; then
  tail -n 25 "$work/configure.txt" >&2
  echo "gpu-calibrate: configure failed (above; all of it in $work/configure.txt): a missing library?" \
       "scripts/install-deps.sh lists them. Nothing was measured (exit 3)." >&2
  exit 3
fi
grep -E "megasim: (CUDA|NCCL)" "$work/configure.txt"
grep -q "megasim: CUDA ON" "$work/configure.txt" ||
  { echo "gpu-calibrate: CMake did not enable CUDA (nvcc: $nvcc); nothing was measured (exit 3)." >&2; exit 3; }
cmake --build "$build" -j"$(nproc)" --target megasim test_calib_fit

echo "== calibration tests (ctest -R calib)"
status=0
ctest --test-dir "$build" -R calib --output-on-failure || status=$?

n=$(gpus)
np=${NP:-${n:-0}}
[ "$np" -ge 1 ] || { echo "gpu-calibrate: no GPU visible (nvidia-smi -L, CUDA_VISIBLE_DEVICES); exit 3" >&2; exit 3; }
launch=()
if [ "$np" -ge 2 ]; then
  command -v mpirun >/dev/null || { echo "gpu-calibrate: $np GPUs but no mpirun; exit 3" >&2; exit 3; }
  launch=(mpirun -np "$np")
  [ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# The 1.2B GPT of scripts/gpu-real.sh, named so that its own linear layers
# (TP 1, micro-batch 4 x 2048 tokens) are timed beside the grid.
model_job=(--preset none --num-layers 24 --hidden-size 2048 --ffn-hidden-size 8192 --num-attention-heads 16
           --num-query-groups 16 --seq-length 2048 --padded-vocab-size 256 --micro-batch-size 4
           --tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --num-layers-per-virtual-pipeline-stage 0)
flags=("${model_job[@]}" --device gpu --base-gpu "$base_gpu" --out "$out")
[ "$level" = quick ] && flags+=(--quick)
[ "$level" = tiny ] && flags+=(--tiny)
echo "== ${launch[*]:-} megasim calibrate ${flags[*]}   ($np rank(s), $n GPU(s) visible)"
${launch[@]+"${launch[@]}"} "$build/megasim" calibrate "${flags[@]}" | tee "$work/report.txt" || {
  echo "gpu-calibrate: calibrate failed; the profile was not written" >&2
  exit 1
}

echo "== predict with it: a 1.2B GPT on one GPU (scripts/gpu-real.sh's model), built-in vs measured"
# fattree, as gpu-real.sh: the built-in megascale cluster carries that environment's
# loader stall and per-iteration overhead (0.65 s: 24.5% MFU here instead of 57%)
job=("${model_job[@]}" --global-batch-size 16 --num-gpus 1 --attention flash --fused-elementwise --cluster fattree --json)
for hw in "--gpu $base_gpu" "--hardware $out"; do
  # shellcheck disable=SC2086 # $hw is two words on purpose
  "$build/megasim" predict "${job[@]}" $hw |
    python3 -c "import json, sys; d = json.load(sys.stdin); print(f'{sys.argv[1]:60} iteration {d[\"iteration_time_s\"]:.4f} s  MFU {d[\"mfu\"]:.1%}')" "$hw" ||
    status=1
done
echo "kept: $out (raw samples: ${out%.json}.h5; report: $work/report.txt)"
exit $status
