#!/usr/bin/env bash
# scripts/gpu-real.sh: on a GPU machine, train the same ~1.2B-parameter GPT
# with `megasim run --device gpu` (our CUDA kernels, bf16) and with PyTorch
# eager (real/bench/torch_gpt.py), then print the two side by side: step
# time, tokens/s, model TFLOP/s and MFU from one FLOPs formula.
#
#   usage: scripts/gpu-real.sh [build-dir]      (default: build-gpu-real)
#   env:   ARCH=90 (sm_90; 80 for A100)  MB=4  GB=16  ITERS=20  WARMUP=3
#          DROPOUT=0.1 (hidden and attention dropout, both sides: Megatron-LM's
#          and megasim's default; 0 turns them off)
#          CLIP=1.0 (gradient clipping's global norm, both sides; 0: none)
#          NCCL_ROOT=DIR (a tree with include/nccl.h and lib/libnccl.so*)
#          OUT_DIR=DIR (default: <build-dir>/gpu-real)
#          PROFILE=FILE (a measured profile, scripts/gpu-calibrate.sh's: the
#          run is then compared with its simulation on it; default: the
#          built-in BASE_GPU)
#          BASE_GPU=h100-sxm-80gb (the built-in GPU the run records and its
#          MFU is counted against; gpu-session.sh sets it from nvidia-smi)
#          KV_GROUPS=16 (KV heads; below 16, grouped-query attention: megasim's
#          run and its comparison only, as torch_gpt.py is MHA)
#          CUDNN=1, TUNED=1, GRAPHS=1, FP8=1 (0 leaves out the run with
#          cuDNN's attention, the one with cuBLASLt's choices tuned, the one
#          with CUDA graphs, or the one in FP8; each against the plain run)
#
# The model (both sides): 24 layers, hidden 2048, 16 heads (MHA), MLP 8192,
# sequence 2048, GPT-2 style (learned positions, pre-LN, biases, tanh GeLU,
# tied output layer), 1,213,321,216 parameters. The corpus is byte-level
# (experiments/data/corpus.txt, one token per byte), so the vocabulary is
# 256, not GPT-2's 50304: the output layer is then 0.04% of the FLOPs
# instead of ~4%, which both sides count the same way. A global batch of
# 16 sequences in micro-batches of 4 (4 accumulation steps), one GPU, no
# TP/PP/DP; flash attention and the fused elementwise kernels on our side,
# SDPA (flash) and AMP bf16 with fused AdamW on PyTorch's; the same dropouts
# in the same places on both (DROPOUT), and the same gradient clipping
# (CLIP). ~38 GB per GPU.
#
# MFU = F / (step time x 989.4 TFLOP/s), F = Megatron's model FLOPs per
# iteration without recomputation (Narayanan et al., SC'21):
#   F = 72 B s l h^2 (1 + s/(6h) + V/(12 l h)) = 2.772e14 here (B = 16),
# the same number megasim's workload model gives (model_flops_per_iteration).
# Steps after the first WARMUP are summarised by their median.
#
# Dependencies. megasim links MPI, HDF5, GSL and cJSON (Debian packages on
# the development machines: scripts/install-deps.sh). A bare GPU image
# (nvcc, CMake, PyTorch) has none of them and nothing can be downloaded
# there, so this script does not try: it checks for everything the build
# and the two runs need, lists exactly what is missing, and exits with
# status 3 before building. scripts/gpu-deps.sh, run on a Debian 12
# development machine, gathers them into .gpu-deps/ to carry along; this
# script then uses it by itself.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-gpu-real}
# Libraries carried in by scripts/gpu-deps.sh (a bare GPU image has no MPI,
# HDF5, GSL or cJSON): GPU_DEPS=DIR, default .gpu-deps beside the sources.
gpu_deps=${GPU_DEPS:-$root/.gpu-deps}
# shellcheck disable=SC1091
[ -r "$gpu_deps/env.sh" ] && source "$gpu_deps/env.sh" && echo "== libraries from $gpu_deps"
read -r -a deps_cfg <<< "${MEGASIM_CMAKE_DEPS:-}"
arch=${ARCH:-90}
mb=${MB:-4}
gb=${GB:-16}
iters=${ITERS:-20}
warmup=${WARMUP:-3}
dropout=${DROPOUT:-0.1}
clip=${CLIP:-1.0}
groups=${KV_GROUPS:-16}
base_gpu=${BASE_GPU:-h100-sxm-80gb}
case $groups in 1 | 2 | 4 | 8 | 16) ;; *) echo "gpu-real: KV_GROUPS=$groups: allowed 1, 2, 4, 8 or 16 (divisors of the 16 heads)" >&2; exit 2 ;; esac
out=${OUT_DIR:-$build/gpu-real}
corpus=$root/experiments/data/corpus.txt
nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
cuda_home=$(dirname "$(dirname "$nvcc")")

# PyTorch runs on the image's own libraries, not on the Debian ones env.sh
# puts on LD_LIBRARY_PATH for megasim.
torch_py() { LD_LIBRARY_PATH=${MEGASIM_BASE_LD_LIBRARY_PATH-${LD_LIBRARY_PATH:-}} python3 "$@"; }

# ---- dependency check --------------------------------------------------------
missing=()
need() { missing+=("$1"); }

# First directory among the arguments that holds file $1 (relative path).
find_in() {
  local f=$1 d
  shift
  for d in "$@"; do
    [ -n "$d" ] && [ -e "$d/$f" ] && { echo "$d"; return 0; }
  done
  return 1
}

inc_dirs=(/usr/include /usr/local/include ${CONDA_PREFIX:+$CONDA_PREFIX/include})
IFS=: read -r -a extra_inc <<< "${CPATH:-}:${C_INCLUDE_PATH:-}"
inc_dirs+=("${extra_inc[@]}")

check_tools() {
  command -v cmake >/dev/null || { need "CMake >= 3.25 (cmake not on PATH)"; return; }
  local v
  v=$(cmake --version | awk 'NR == 1 {print $3}')
  [ "$(printf '3.25\n%s\n' "$v" | sort -V | head -n 1)" = 3.25 ] || need "CMake >= 3.25 (found $v)"
  command -v cc >/dev/null || command -v gcc >/dev/null || need "a C compiler (cc or gcc)"
  [ -x "$nvcc" ] || need "nvcc (CUDA Toolkit; not on PATH, not at $nvcc; set CUDACXX)"
  command -v pkg-config >/dev/null || need "pkg-config (CMake's find_package(PkgConfig REQUIRED); finds cJSON)"
}

check_libs() {
  if ! command -v mpicc >/dev/null && ! find_in include/mpi.h "${MPI_HOME:-}" >/dev/null; then
    need "MPI (OpenMPI or MPICH: mpicc on PATH, or MPI_HOME with include/mpi.h; Debian: libopenmpi-dev openmpi-bin)"
  fi
  if ! command -v h5cc >/dev/null && ! pkg-config --exists hdf5 2>/dev/null &&
     ! find_in hdf5.h "${inc_dirs[@]}" /usr/include/hdf5/serial "${HDF5_ROOT:+$HDF5_ROOT/include}" >/dev/null; then
    need "HDF5 C library (h5cc, or HDF5_ROOT with include/hdf5.h; Debian: libhdf5-dev)"
  fi
  if ! command -v gsl-config >/dev/null && ! pkg-config --exists gsl 2>/dev/null &&
     ! find_in gsl/gsl_version.h "${inc_dirs[@]}" "${GSL_ROOT_DIR:+$GSL_ROOT_DIR/include}" >/dev/null; then
    need "GSL (gsl-config, or GSL_ROOT_DIR with include/gsl; Debian: libgsl-dev)"
  fi
  if ! pkg-config --exists libcjson 2>/dev/null; then
    need "cJSON (pkg-config module libcjson, as CMake requires; Debian: libcjson-dev)"
  fi
}

# True when tree $1 holds a libnccl.so* where cmake/nccl.cmake looks.
has_nccl_lib() {
  local f
  for f in "$1"/lib/libnccl.so* "$1"/lib64/libnccl.so* "$1"/lib/x86_64-linux-gnu/libnccl.so*; do
    [ -e "$f" ] && return 0
  done
  return 1
}

# NCCL beside CUDA, in NCCL_ROOT/NCCL_HOME, in the system, or in the
# nvidia-nccl wheel PyTorch brings (then NCCL_ROOT points CMake at it).
check_nccl() {
  local wheel="" d
  wheel=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null ||
          python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null || true)
  for d in "${NCCL_ROOT:-}" "${NCCL_HOME:-}" "$cuda_home" /usr "$wheel"; do
    if [ -n "$d" ] && [ -e "$d/include/nccl.h" ] && has_nccl_lib "$d"; then
      nccl_root=$d
      return 0
    fi
  done
  need "NCCL (include/nccl.h + lib/libnccl.so* under NCCL_ROOT, the CUDA Toolkit, /usr, or the nvidia-nccl wheel)"
}

check_run() {
  command -v python3 >/dev/null || { need "python3"; return 0; }
  if ! torch_py -c 'import torch' 2>/dev/null; then
    need "PyTorch (python3 -c 'import torch' fails)"
  elif ! torch_py -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    need "a GPU visible to PyTorch (torch.cuda.is_available() is False)"
  fi
  if command -v nvidia-smi >/dev/null && ! nvidia-smi -L >/dev/null 2>&1; then
    need "a working GPU driver (nvidia-smi -L fails)"
  fi
  [ -r "$corpus" ] || need "the corpus $corpus"
  return 0
}

nccl_root=""
check_tools
check_libs
check_nccl
check_run
if [ ${#missing[@]} -gt 0 ]; then
  echo "gpu-real: cannot build and run here; missing:" >&2
  for m in "${missing[@]}"; do echo "  - $m" >&2; done
  echo "gpu-real: nothing was built (exit 3)." >&2
  exit 3
fi

# ---- build -------------------------------------------------------------------
echo "== configure + build megasim (sm_$arch, NCCL in $nccl_root) in $build"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$nvcc" \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" -DNCCL_ROOT="$nccl_root" -DMEGASIM_EMU=OFF ${deps_cfg[@]+"${deps_cfg[@]}"}
cmake --build "$build" -j"$(nproc)" --target megasim
mkdir -p "$out"

# ---- the two runs ------------------------------------------------------------
model=(--num-layers 24 --hidden-size 2048 --ffn-hidden-size 8192 --num-attention-heads 16 --seq-length 2048
       --padded-vocab-size 256 --micro-batch-size "$mb" --global-batch-size "$gb" --train-iters "$iters"
       --hidden-dropout "$dropout" --attention-dropout "$dropout" --clip-grad "$clip")
# fattree: a cluster profile without the MegaScale environment's loader
# stall and per-iteration overhead (0.65 s of a step; ASSUMPTIONS.md).
plan=(--preset none --num-query-groups "$groups" --num-gpus 1 --tensor-model-parallel-size 1 --pipeline-model-parallel-size 1
      --num-layers-per-virtual-pipeline-stage 0 --attention flash --fused-elementwise --cluster fattree)
gpu_job=("${plan[@]}" --gpu "$base_gpu" --device gpu --json --data "$corpus") # every megasim run below
ours=("${gpu_job[@]}" --out "$out/megasim-run.h5")
launch=()
if command -v mpirun >/dev/null; then
  launch=(mpirun -np 1 --bind-to none) # the rank's host threads free to use every CPU
  [ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

status=0
# Each side's wall-clock seconds, to print what it spent outside its steps
# (start-up, the first step's set-up, shutdown): the first H200 lease lost
# 61 s a run there to the initial weights drawn on one core.
t_ours=$(date +%s.%N)
echo "== megasim run --device gpu ($(date -u +%T.%N | cut -c1-12) UTC): ${model[*]} ${ours[*]}"
${launch[@]+"${launch[@]}"} "$build/megasim" run "${model[@]}" "${ours[@]}" | tee "$out/megasim.jsonl" || status=$?
t_ours="$t_ours $(date +%s.%N)"
t_torch=""
if [ "$groups" = 16 ]; then
  echo "== PyTorch eager: real/bench/torch_gpt.py ($(date -u +%T.%N | cut -c1-12) UTC)"
  t_torch=$(date +%s.%N)
  torch_py "$root/real/bench/torch_gpt.py" "${model[@]}" --warmup-steps "$warmup" --data "$corpus" |
    tee "$out/torch.jsonl" || status=$?
  t_torch="$t_torch $(date +%s.%N)"
else
  echo "== PyTorch eager: not run (KV_GROUPS=$groups: torch_gpt.py is MHA only)"
  : > "$out/torch.jsonl"
fi

# ---- side by side (MHA: the model both sides run) -------------------------------
if [ "$groups" = 16 ]; then
PYTHONPATH="$root/real/bench" python3 - "$out/megasim.jsonl" "$out/torch.jsonl" "$gb" "$warmup" <<'EOF' | tee "$out/side-by-side.txt"
import statistics, sys
from steps import steps
PEAK = 989.4e12                       # H100 and H200 SXM dense bf16, FLOP/s
B, s, l, h, V = int(sys.argv[3]), 2048, 24, 2048, 256
F = 72.0 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))
warm = int(sys.argv[4])

def row(recs):
    if not recs:
        return None
    kept = recs[warm:] or recs
    t = statistics.median(r["step_time_s"] for r in kept)
    return {"ms": 1e3 * t, "tok": B * s / t, "tflops": F / t * 1e-12, "mfu": F / (t * PEAK),
            "mfu_own": statistics.median(r.get("mfu", float("nan")) for r in kept),
            "clock": (f'{statistics.median(r["sm_mhz"] for r in kept):.0f} MHz, '
                      f'{statistics.median(r["power_w"] for r in kept):.0f} W') if "sm_mhz" in kept[0] else "-",
            "loss": f'{recs[0]["loss"]:.3f} -> {recs[-1]["loss"]:.3f}', "n": len(kept)}

a, b = row(steps(sys.argv[1])), row(steps(sys.argv[2]))
print(f"\n== side by side: GPT 1.21B (l={l} h={h} a=16 s={s} V={V}), global batch {B} x {s} tokens, "
      f"median of the steps after the first {warm}")
print(f"F = 72 B s l h^2 (1 + s/6h + V/12lh) = {F:.4e} FLOPs per step; peak {PEAK * 1e-12:.1f} TFLOP/s")
fmt = {"ms": "{:.1f}", "tok": "{:,.0f}", "tflops": "{:.1f}", "mfu": "{:.1%}", "mfu_own": "{:.1%}", "loss": "{}",
       "n": "{}", "clock": "{}"}
names = [("ms", "step time (ms)"), ("tok", "tokens/s"), ("tflops", "model TFLOP/s"), ("mfu", "MFU (formula above)"),
         ("mfu_own", "MFU as the program reports"), ("loss", "loss, first -> last step"), ("n", "steps summarised"),
         ("clock", "SM clock, power (NVML)")]
print(f"{'':30} {'megasim run (CUDA)':>22} {'PyTorch eager':>22}")
for k, name in names:
    cell = lambda r: fmt[k].format(r[k]) if r else "failed"
    print(f"{name:30} {cell(a):>22} {cell(b):>22}")
if a and b:
    print(f"speed ratio (PyTorch step time / megasim step time): {b['ms'] / a['ms']:.2f}")
EOF
fi

# Wall-clock seconds of each side (t0 t1) less its steps' own times.
PYTHONPATH="$root/real/bench" python3 - "$out/megasim.jsonl" "$t_ours" "$out/torch.jsonl" "$t_torch" <<'EOF' |
import sys
from steps import steps
for name, path, span in (("megasim run", sys.argv[1], sys.argv[2]), ("PyTorch eager", sys.argv[3], sys.argv[4])):
    if not span:
        continue
    t0, t1 = map(float, span.split())
    recs = steps(path)
    inside = sum(r["step_time_s"] for r in recs)
    print(f"{name}: {t1 - t0:.1f} s wall, {inside:.1f} s in its {len(recs)} steps: "
          f"{t1 - t0 - inside:.1f} s outside them (start-up, shutdown)")
EOF
  tee "$out/outside-steps.txt"

# Median step of run B against run A (each a run --json log), after the
# warm-up steps: "LABEL: A's a ms, B's b ms (+x%)", and the largest
# relative loss difference between them.
median_vs() {
  PYTHONPATH="$root/real/bench" python3 - "$1" "$2" "$warmup" "$3" "$4" "$5" <<'EOF2'
import statistics, sys
from steps import steps
def median_ms(recs):
    t = [r["step_time_s"] for r in recs][int(sys.argv[3]):]
    return 1e3 * statistics.median(t) if t else float("nan")
ra, rb = steps(sys.argv[1]), steps(sys.argv[2])
a, b = median_ms(ra), median_ms(rb)
d = max((abs(x["loss"] - y["loss"]) / abs(x["loss"]) for x, y in zip(ra, rb)), default=float("nan"))
print(f"{sys.argv[4]}: {sys.argv[5]} {a:.1f} ms, {sys.argv[6]} {b:.1f} ms ({100 * (b / a - 1):+.1f}%); "
      f"largest relative loss difference {d:.1e}")
EOF2
}

# The plain run's job with FLAG for 10 steps (the stage's time limit) into
# megasim-NAME.jsonl, and its median step against the plain run's into
# NAME.txt: variant NAME "LABEL: plain's, NAME's" FLAG...
variant() {
  local name=$1 labels=$2
  shift 2
  echo "== megasim run --device gpu $* ($(date -u +%T.%N | cut -c1-12) UTC)"
  ${launch[@]+"${launch[@]}"} "$build/megasim" run "${model[@]}" --train-iters 10 "${gpu_job[@]}" "$@" \
    > "$out/megasim-$name.jsonl" || status=$?
  IFS=, read -r what a b <<< "$labels"
  median_vs "$out/megasim.jsonl" "$out/megasim-$name.jsonl" "$what" "$a" "$b" | tee "$out/$name.txt"
}

# ---- cuDNN's fused attention (issue 38, run --attention-backend cudnn): the
# same run with every attention pass in cuDNN's fused kernels instead of
# megasim's FA-2 (dropout from cuDNN's own generator). CUDNN=0 leaves it out.
[ "${CUDNN:-1}" = 1 ] && variant cudnn "cuDNN attention,megasim's FA-2,cuDNN's" --attention-backend cudnn

# ---- CUDA graphs (issue 38, run --enable-cuda-graph): the same run with each
# pass from the second iteration on captured and launched as a graph (what
# graphs save: the launch gaps between kernels). GRAPHS=0 leaves it out.
[ "${GRAPHS:-1}" = 1 ] && variant graphs "CUDA graphs,plain launches,graphs" --enable-cuda-graph

# ---- FP8 (issue 36, --fp8-format hybrid): the same run with each linear
# layer's GEMM inputs cast to E4M3 (forward) and E5M2 (gradients) values,
# their amaxes kept on the GPU, around the same bf16 GEMMs (docs/job.md:
# FP8's numerics, not its speed, as cuBLASLt's FP8 GEMMs are not built):
# what the casts cost, and how far the losses move. FP8=0 leaves it out.
[ "${FP8:-1}" = 1 ] && variant fp8 "FP8 (hybrid),bf16,fp8" --fp8-format hybrid

# ---- cuBLASLt's choices tuned (issue 38, run --gemm-algos): the same run twice
# more, the first tuning every GEMM problem (its candidates timed) into
# $out/gemm-algos, the second reading them; its median step against the
# untuned run's above. TUNED=0 leaves it out (about two runs' time).
if [ "${TUNED:-1}" = 1 ]; then
  echo "== megasim run --device gpu --gemm-algos: tuning, then tuned ($(date -u +%T.%N | cut -c1-12) UTC)"
  tuned=("${gpu_job[@]}" --gemm-algos "$out/gemm-algos")
  for pass in tuning tuned; do
    ${launch[@]+"${launch[@]}"} "$build/megasim" run "${model[@]}" "${tuned[@]}" > "$out/megasim-$pass.jsonl" ||
      status=$?
  done
  median_vs "$out/megasim.jsonl" "$out/megasim-tuned.jsonl" "median step" "heuristic's first choice" \
    "tuned choices" | tee "$out/gemm-algos.txt"
fi

# ---- mixture of experts on the GPU (issue 37): the tiny GPT with 4 experts,
# top-2, on the GPU against the CPU path (bf16 against fp32, 3 steps): the
# CUDA router and permutation kernels on the hardware, never run there before
moe=(--num-experts 4 --moe-router-topk 2 --moe-ffn-hidden-size 64 --expert-tensor-parallel-size 1
     --moe-aux-loss-coeff 0.01 --train-iters 3 --json)
echo "== megasim run, experts, --device gpu against --device cpu ($(date -u +%T.%N | cut -c1-12) UTC)"
if ${launch[@]+"${launch[@]}"} "$build/megasim" run "${moe[@]}" --device gpu --attention flash > "$out/moe-gpu.jsonl" &&
   ${launch[@]+"${launch[@]}"} "$build/megasim" run "${moe[@]}" > "$out/moe-cpu.jsonl"; then
  python3 - "$out/moe-gpu.jsonl" "$out/moe-cpu.jsonl" <<'EOF' || status=1
import json, sys
g, c = ([json.loads(l) for l in open(p) if l.startswith("{")] for p in sys.argv[1:3])
worst = max(abs(a["loss"] - b["loss"]) / b["loss"] for a, b in zip(g, c))
print(f"experts on the GPU: losses {[round(s['loss'], 6) for s in g]} against the CPU's "
      f"{[round(s['loss'], 6) for s in c]}: largest relative difference {worst:.1e} (allowed 1e-3, bf16)")
sys.exit(0 if len(g) == len(c) == 3 and worst <= 1e-3 else 1)
EOF
else
  echo "gpu-real: the experts' run failed" >&2
  status=1
fi

# ---- Activation offloading (issue 36, --activation-offload-fraction 0.5): the
# same run with half of each layer's kept rows sent to pinned host memory on
# the copy stream and brought back before its backward (the next layer's
# beside it): what the copies cost beside the layers; the losses must not
# move. Off unless OFFLOAD=1: it comes after the variants above in priority,
# and the stage's time limit has cut the last of them before.
[ "${OFFLOAD:-0}" = 1 ] && variant offload "offloading (F 0.5),kept,offloaded" --activation-offload-fraction 0.5

# ---- measured vs predicted (issues 6 and 8) ----------------------------------
# megasim compare simulates the run's own job on the measured profile
# (gpu-session.sh runs calibrate first and passes it as PROFILE), else on
# the built-in H100 the run recorded: per step, op class, stream. The run
# itself keeps the built-in, so its MFU is against the data sheet's peak.
if [ -s "$out/megasim-run.h5" ]; then
  hw=()
  [ -n "${PROFILE:-}" ] && [ -r "$PROFILE" ] && hw=(--hardware "$PROFILE")
  echo "== megasim compare $out/megasim-run.h5 ${hw[*]:-(the built-in $base_gpu)}"
  "$build/megasim" compare "$out/megasim-run.h5" ${hw[@]+"${hw[@]}"} --plot "$out/compare" |
    tee "$out/compare.txt" || status=1
else
  echo "gpu-real: no $out/megasim-run.h5: nothing to compare" >&2
  status=1
fi
exit $status
