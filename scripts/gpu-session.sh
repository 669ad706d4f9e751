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
#                      gpu-labelled tests (kernels, calibration, real backend,
#                      CUDA graphs); the kernels stage then skips its own
#           calibrate  scripts/gpu-calibrate.sh build-gpu (LEVEL, default quick):
#                      the measured profile of this GPU ($BASE_GPU-measured.json)
#           real       scripts/gpu-real.sh build-gpu: 1.2B GPT, ours vs PyTorch,
#                      then the run vs its simulation on that profile
#           sanitize   compute-sanitizer (memcheck) over the CUDA kernel tests
#                      named in SANITIZE (default: all of them)
#           compare    the real stage's run against its simulation on the
#                      calibrate stage's profile (both must have run)
#           algos      kern_bench --algos: each of cuBLASLt's candidates for the
#                      linear layers' GEMMs, with the SM clock and power
#           multi      scripts/gpu-multi.sh: with 2 GPUs or more, the 1.2B GPT
#                      over NCCL under TP, PP, DP (and TP 2 x DP), each run
#                      against its simulation on the calibrate stage's profile
#           all        tests real kernels calibrate compare, and multi where
#                      nvidia-smi lists 2 GPUs or more: correctness first,
#                      then the speed figures, calibration, the NCCL runs
#   env:   ARCH=90  LEVEL=quick|tiny|full  GPU_DEPS=.gpu-deps  NCCL_ROOT=DIR
#          BASE_GPU=NAME  megasim's built-in GPU this one is (default: from
#                      nvidia-smi's name; h100-sxm-80gb where it is not known)
#          LIMIT_<stage>=S  each stage's wall-clock limit in seconds (timeout;
#                      defaults below), so one hung or slow stage cannot eat
#                      a lease's remaining stages
#          BUDGET=S    the whole session's wall-clock (build included): each
#                      stage's limit shrinks to what is left less 20 s (the
#                      packing), and a stage with under 30 s left is not
#                      started, so a device call's own limit never cuts the
#                      session short of its summary
#
# One megasim build (build-gpu, CUDA for sm_$ARCH, every target) serves every
# stage. nvidia-smi logs the SM clock, power and clock-event reasons every 50
# ms for the whole session (smi.csv, UTC timestamps; the stages' start times
# are in session.txt): a kernel's speed on an H100 at its power cap depends
# on the clock its neighbours leave it. With the device tool's $OUT set, everything a stage writes is kept
# in $OUT/session.tar.gz too (the tool returns at most 8 files).
#
# Before the session, on the Debian 12 development machine:
#   bash scripts/gpu-deps.sh        # MPI, HDF5, GSL, cJSON -> .gpu-deps/ (46 MB)
# then the device call carries it: run(carry=[".gpu-deps"], command=
#   "bash scripts/gpu-session.sh"), or a few stages per call.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-gpu
arch=${ARCH:-90}
out=$build/out
mkdir -p "$out"
export ARCH=$arch LEVEL=${LEVEL:-quick}
gpu_deps=${GPU_DEPS:-$root/.gpu-deps}
# shellcheck disable=SC1091
[ -r "$gpu_deps/env.sh" ] && source "$gpu_deps/env.sh"
read -r -a deps_cfg <<< "${MEGASIM_CMAKE_DEPS:-}"
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# NCCL: beside CUDA, NCCL_ROOT, or the nvidia-nccl wheel PyTorch brings.
nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
cuda_home=$(dirname "$(dirname "$nvcc")")
# Where a library not beside CUDA may be: the nvidia wheels PyTorch brings
# (their folders' names vary with the CUDA major version), /usr, /opt.
roots="$(python3 -c 'import nvidia; print(" ".join(nvidia.__path__))' 2>/dev/null) /usr /opt"
# tree_with HEADER LIB: the first tree under $roots with include/.../HEADER
# and lib*/LIB* (both halves), printed; nothing when none has both.
tree_with() {
  local d h r
  for d in $roots; do
    h=$(find "$d" -name "$1" -path '*include*' 2>/dev/null | head -n 1)
    [ -n "$h" ] || continue
    r=$(dirname "$(dirname "$h")")
    if ls "$r"/lib*/"$2"* >/dev/null 2>&1; then echo "$r"; return; fi
  done
}
if [ -z "${NCCL_ROOT:-}" ] && ! ls "$cuda_home"/lib*/libnccl.so* >/dev/null 2>&1; then
  # Not beside CUDA: a tree with both halves; else a library without
  # headers, with the header gpu-deps.sh carried.
  r=$(tree_with nccl.h libnccl.so)
  [ -n "$r" ] && export NCCL_ROOT=$r
  # shellcheck disable=SC2086 # $roots is a list of folders
  lib=$(find $roots -name 'libnccl.so*' 2>/dev/null | head -n 1)
  if [ -z "${NCCL_ROOT:-}" ] && [ -n "$lib" ] && [ -r "$gpu_deps/nccl/include/nccl.h" ]; then
    mkdir -p "$build/nccl/lib"
    ln -sf "$lib" "$build/nccl/lib/libnccl.so.2"
    rm -rf "$build/nccl/include" && cp -r "$gpu_deps/nccl/include" "$build/nccl/include"
    export NCCL_ROOT=$build/nccl
  fi
fi

# cuDNN 9 (--attention-backend cudnn, real/cudnn_attn.c): its headers beside
# CUDA, in CUDNN_ROOT, or in the nvidia-cudnn wheel PyTorch brings (CMake
# reads $CUDNN_ROOT/include); its library on the loader's path, which the
# GPU module opens at run time.
if [ -z "${CUDNN_ROOT:-}" ] && ! [ -r "$cuda_home/include/cudnn_graph.h" ]; then
  r=$(tree_with cudnn_graph.h libcudnn.so.9)
  [ -n "$r" ] && export CUDNN_ROOT=$r
fi
for d in "${CUDNN_ROOT:-$cuda_home}"/lib*; do
  if ls "$d"/libcudnn.so.9* >/dev/null 2>&1; then export LD_LIBRARY_PATH=$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}; fi
done
echo "gpu-session: cuDNN ${CUDNN_ROOT:-beside CUDA ($cuda_home)}"

# The one build every stage uses: all targets, the CUDA code for sm_$arch.
build_all() {
  local cfg=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="$arch"
             -DMEGASIM_EMU=OFF) # the CPU emulation of the GPU code is CI's; here the real thing runs
  [ -n "${NCCL_ROOT:-}" ] && cfg+=(-DNCCL_ROOT="$NCCL_ROOT")
  cmake -S "$root" -B "$build" "${cfg[@]}" ${deps_cfg[@]+"${deps_cfg[@]}"} &&
    cmake --build "$build" -j"$(nproc)"
}

# The kernel tests ran in the tests stage when it came first (KERN_TESTS=0).
stage_kernels() { bash "$root/scripts/gpu-kernels.sh" "$build"; }

stage_tests() {
  local rc=0
  ctest --test-dir "$build" -j"$(nproc)" -L gpu --output-on-failure || rc=$? # the cpu-labelled ones run in CI
  # every test's whole output (what the passing ones noted, too)
  cp "$build/Testing/Temporary/LastTest.log" "$out/tests-output.log" 2>/dev/null
  [ $rc -eq 0 ] || return $rc
  # whether this GPU's cuBLASLt folded the bias gradient into the weight gradient (BGRADB) or fell back
  "$build/tests/kernels/test_kern_matmul_cuda" | grep '^bias gradients folded' | tee "$out/bgradb.txt"
}

# Compared with its simulation on the built-in H100 here (PROFILE when a
# calibrate stage ran before it), and on the measured profile by `compare`.
stage_real() {
  OUT_DIR="$out/real" PROFILE="$profile" bash "$root/scripts/gpu-real.sh" "$build"
}

stage_sanitize() {
  local san t rc=0
  san=$(command -v compute-sanitizer || echo "$cuda_home/bin/compute-sanitizer")
  for t in ${SANITIZE:-embedding layernorm crossentropy gelu rope dropout optimizer matmul attention moe}; do
    echo "== compute-sanitizer --tool memcheck test_kern_${t}_cuda"
    "$san" --tool memcheck --error-exitcode 9 "$build/tests/kernels/test_kern_${t}_cuda" > "$out/sanitize-$t.txt" 2>&1
    local r=$?
    grep -E "ERROR SUMMARY|Invalid|ok|FAIL" "$out/sanitize-$t.txt" | tail -n 3
    echo "   exit $r"
    [ $r -eq 0 ] || rc=1
  done
  return $rc
}

stage_compare() {
  "$build/megasim" compare "$out/real/megasim-run.h5" --hardware "$profile" \
    --plot "$out/real/compare-measured"
}

stage_algos() {
  "$build/kernels/bench/kern_bench" --algos | tee "$out/kern_bench_algos.txt" | grep '^# [a-z_]* N'
}

stage_multi() {
  [ "$ngpus" -ge 2 ] || { echo "multi: one GPU here; the NCCL runs need two or more"; return 0; }
  OUT_DIR="$out/multi" PROFILE=$([ -r "$profile" ] && echo "$profile") bash "$root/scripts/gpu-multi.sh" "$build"
}

stage_calibrate() {
  OUT="$profile" bash "$root/scripts/gpu-calibrate.sh" "$build"
}

# Wall-clock limits (s): a lease's whole command gets 10 minutes.
limit_kernels=${LIMIT_kernels:-120} limit_tests=${LIMIT_tests:-150} limit_real=${LIMIT_real:-220}
limit_calibrate=${LIMIT_calibrate:-110} limit_compare=${LIMIT_compare:-30} limit_sanitize=${LIMIT_sanitize:-90}
limit_algos=${LIMIT_algos:-120} limit_multi=${LIMIT_multi:-240}

profile= # this GPU's profile file, once the GPU is named below
# Everything under $out into the device tool's $OUT, as one archive beside
# the summary and the profile.
pack() {
  [ -n "${OUT:-}" ] && [ "$OUT" != "$out" ] || return 0
  mkdir -p "$OUT"
  tar -czf "$OUT/session.tar.gz" -C "$out" . 2>/dev/null
  cp "$out/session.txt" "$OUT/" 2>/dev/null
  cp "$profile" "$OUT/" 2>/dev/null
  return 0
}
trap pack EXIT

stages=("$@")
ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU') # 0 where nvidia-smi fails or is missing
if [ ${#stages[@]} -eq 0 ] || [ "${stages[0]}" = all ]; then
  stages=(tests real kernels calibrate compare)
  [ "$ngpus" -ge 2 ] && stages+=(multi)
fi
for s in "${stages[@]}"; do
  case $s in
  kernels | tests | real | calibrate | compare | sanitize | algos | multi) ;;
  *) echo "gpu-session: unknown stage '$s'; stages: kernels tests real calibrate compare sanitize algos multi all" >&2
     exit 2 ;;
  esac
done
# This GPU as one of megasim's built-ins (the run's --gpu, calibrate's --base-gpu).
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
case $gpu_name in
*H200*) guess=h200-sxm-141gb ;; *H800*) guess=h800-sxm-80gb ;; *B200*) guess=b200-sxm-180gb ;;
*A800*) guess=a800-sxm-80gb ;; *A100*) guess=a100-sxm-80gb ;; *) guess=h100-sxm-80gb ;;
esac
export BASE_GPU=${BASE_GPU:-$guess}
profile=$out/$BASE_GPU-measured.json
[[ " ${stages[*]} " == *" tests "* ]] && export KERN_TESTS=0
session_t0=$(date +%s)
status=0
{
  echo "gpu-session: $(date -u +%FT%TZ) on $(hostname); BASE_GPU=$BASE_GPU ${BUDGET:+BUDGET=$BUDGET s}"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1 || true
  "$nvcc" --version 2>&1 | tail -n 1
  echo "NCCL_ROOT=${NCCL_ROOT:-(beside CUDA)}  GPU_DEPS=$([ -r "$gpu_deps/env.sh" ] && echo "$gpu_deps" || echo none)"
} | tee "$out/session.txt"
fields=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active
nvidia-smi --help-query-gpu 2>/dev/null | grep -q clocks_event_reasons.active ||
  fields=${fields/clocks_event_reasons/clocks_throttle_reasons} # drivers before 535
nvidia-smi --query-gpu=$fields --format=csv -lms 50 > "$out/smi.csv" 2>&1 &
smi_pid=$!
trap 'kill $smi_pid 2>/dev/null; pack' EXIT
# Seconds a step may take: LIMIT, or less where BUDGET has less left (20 s kept for packing).
budget_limit() {
  local left
  [ -n "${BUDGET:-}" ] || { echo "$1"; return; }
  left=$((BUDGET - ($(date +%s) - session_t0) - 20))
  left=$((left < 1 ? 1 : left)) # timeout 0 would mean none
  echo $((left < $1 ? left : $1))
}
t0=$(date +%s)
if ! timeout -k 10 "$(budget_limit 400)" bash -c "$(declare -f build_all); $(declare -p root build arch nvcc deps_cfg); build_all" \
     > "$out/build.log" 2>&1; then
  echo "gpu-session: the build failed after $(($(date +%s) - t0)) s; nothing ran (log: $out/build.log)" |
    tee -a "$out/session.txt"
  tail -n 40 "$out/build.log"
  exit 1
fi
echo "   build: $(($(date +%s) - t0)) s" | tee -a "$out/session.txt"
for s in "${stages[@]}"; do
  limit_var=limit_$s
  limit=$(budget_limit "${!limit_var}")
  if [ "$limit" -lt 30 ]; then
    echo "   $s: not started, ${limit} s of BUDGET=$BUDGET s left" | tee -a "$out/session.txt"
    status=1
    continue
  fi
  echo "== gpu-session: $s (limit $limit s) at $(date -u +%T) UTC" | tee -a "$out/session.txt"
  t0=$(date +%s)
  timeout -k 10 "$limit" bash -c "$(declare -f "stage_$s"); $(declare -p root build out cuda_home profile ngpus); stage_$s" \
    > "$out/$s.log" 2>&1
  rc=$?
  what="exit $rc"
  [ $rc -eq 124 ] && what="stopped at its $limit s limit"
  echo "   $s: $what after $(($(date +%s) - t0)) s (log: $s.log)" | tee -a "$out/session.txt"
  tail -n 25 "$out/$s.log"
  [ $rc -eq 0 ] || status=1
done
exit $status
