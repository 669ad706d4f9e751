#!/usr/bin/env bash
# scripts/gpu-multi.sh: on a machine with several GPUs, the real backend
# over NCCL against its simulation (issue 38, "Two GPUs and more"): the
# 1.2B GPT of scripts/gpu-real.sh trained by `megasim run --device gpu` on
# NP GPUs under each plan below, each run's result file compared with its
# simulation (`megasim compare`) on PROFILE, then one table.
#
#   usage: scripts/gpu-multi.sh [build-dir]   (default build-gpu: a built megasim, as
#                                             gpu-session.sh leaves it)
#   env:   NP=N (GPUs; default: the GPUs nvidia-smi lists, at least 2)
#          PROFILE=FILE (a profile measured on this machine with NP ranks, so
#          that its NCCL fields are this machine's: gpu-session.sh's calibrate
#          stage writes one; default: the built-in BASE_GPU)
#          BASE_GPU=h100-sxm-80gb  ITERS=8  OUT_DIR=DIR (default <build-dir>/gpu-multi)
#          PLANS="tp pp dp tp2dp tpgraph" (those to run; tp2dp needs NP >= 4)
#          MODEL=1.2b|tiny (tiny: experiments/real/tiny-gpt.json, seconds a run)
#          EMU_MODULE=FILE (the emulated GPU module, libmegasim_gpu_emu.so:
#          this script's own check without a GPU, MODEL=tiny; the emulated
#          NVML's folder must be on LD_LIBRARY_PATH)
#
# Every plan keeps each GPU's work at the single-GPU run's (4 micro-batches
# of MB sequences a step, global batch 4 MB NP), so a step's time would stay
# the single GPU's if communication were free:
#   tp     TP NP with sequence parallelism: NCCL all-gathers and
#          reduce-scatters inside every layer, overlapped (--tp-comm-overlap)
#   pp     PP NP interleaved, one layer a chunk, the p2p exchanges overlapped
#   dp     DP NP, the distributed optimizer, the gradient reduce-scatter and
#          the parameter all-gather overlapped
#   tp2dp  TP 2 x DP NP/2 with the switches of tp and dp
#   tpgraph  tp's plan with each pass a CUDA graph (--enable-cuda-graph:
#          the collectives, the rings and the chunked GEMMs captured), so
#          its row against tp's is what graphs save
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-gpu}
gpu_deps=${GPU_DEPS:-$root/.gpu-deps}
# shellcheck disable=SC1091
[ -r "$gpu_deps/env.sh" ] && source "$gpu_deps/env.sh"
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
megasim=$build/megasim
[ -x "$megasim" ] || { echo "gpu-multi: no megasim in $build (build it first: scripts/gpu-session.sh)" >&2; exit 2; }
np=${NP:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)}
case $np in '' | *[!0-9]*) np=0 ;; esac
[ "$np" -ge 2 ] || { echo "gpu-multi: NP=$np: needs 2 GPUs or more (NP, or nvidia-smi -L)" >&2; exit 2; }
iters=${ITERS:-8}
out=${OUT_DIR:-$build/gpu-multi}
mkdir -p "$out"

case ${MODEL:-1.2b} in
1.2b)
  mb=4 layers=24
  model=(--preset none --num-layers 24 --hidden-size 2048 --ffn-hidden-size 8192 --num-attention-heads 16
         --num-query-groups 16 --seq-length 2048 --padded-vocab-size 256 --hidden-dropout 0.1 --attention-dropout 0.1
         --attention flash --fused-elementwise --cluster fattree --data "$root/experiments/data/corpus.txt") ;;
tiny) mb=2 layers=4 model=(--attention flash) ;;
*) echo "gpu-multi: MODEL=${MODEL}: allowed 1.2b or tiny" >&2; exit 2 ;;
esac
hw=(--gpu "${BASE_GPU:-h100-sxm-80gb}") cmp_hw=() # compare: the profile the run recorded, or PROFILE
[ -n "${PROFILE:-}" ] && hw=(--hardware "$PROFILE") cmp_hw=(--hardware "$PROFILE")
launch=(mpirun -np "$np")
[ -n "${EMU_MODULE:-}" ] && launch+=(--oversubscribe -x OMPI_MPI_THREAD_LEVEL=3 -x MEGASIM_GPU_MODULE="$EMU_MODULE"
                                     -x LD_LIBRARY_PATH)

# The switches of each plan (one line of flags), or nothing where NP rules it out.
tp_sw="--sequence-parallel --tp-comm-overlap" dp_sw="--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather"
plan_flags() {
  case $1 in
  tp) echo "--tensor-model-parallel-size $np $tp_sw" ;;
  pp) [ $((layers % np)) -eq 0 ] &&
        echo "--pipeline-model-parallel-size $np --num-layers-per-virtual-pipeline-stage 1 --pp-comm-overlap" ;;
  dp) echo "$dp_sw" ;;
  tp2dp) [ "$np" -ge 4 ] && [ $((np % 2)) -eq 0 ] && echo "--tensor-model-parallel-size 2 $tp_sw $dp_sw" ;;
  tpgraph) echo "--tensor-model-parallel-size $np $tp_sw --enable-cuda-graph" ;;
  *) return 2 ;;
  esac
}

status=0
rows=()
for plan in ${PLANS:-tp pp dp tp2dp tpgraph}; do
  flags=$(plan_flags "$plan")
  case $? in
  0) ;;
  2) echo "gpu-multi: PLANS names '$plan': allowed tp pp dp tp2dp tpgraph" >&2; exit 2 ;;
  *) rows+=("$(printf '%-7s %s' "$plan" "not run: NP=$np does not divide it (pp: the $layers layers; tp2dp: NP >= 4, even)")")
     continue ;;
  esac
  read -r -a pflags <<< "$flags"
  h5=$out/multi-$plan.h5
  echo "== $plan: ${launch[*]} megasim run ... ${pflags[*]} ($(date -u +%T) UTC)"
  # shellcheck disable=SC2086 # the tp/pp/dp defaults off, each plan's switches on
  if ! "${launch[@]}" "$megasim" run "${model[@]}" "${pflags[@]}" "${hw[@]}" --num-gpus "$np" --micro-batch-size "$mb" \
       --global-batch-size $((4 * mb * np)) --train-iters "$iters" --device gpu --json --out "$h5" \
       > "$out/multi-$plan.jsonl" 2> "$out/multi-$plan.err"; then
    tail -n 5 "$out/multi-$plan.err" >&2
    rows+=("$(printf '%-7s %s' "$plan" "FAILED (multi-$plan.err)")")
    status=1
    continue
  fi
  "$megasim" compare "$h5" ${cmp_hw[@]+"${cmp_hw[@]}"} > "$out/multi-$plan-compare.txt" 2>&1 || status=1
  rows+=("$(PYTHONPATH="$root/real/bench" python3 - "$plan" "$out/multi-$plan.jsonl" "$out/multi-$plan-compare.txt" <<'EOF'
import re, statistics, sys
from steps import steps
plan, jsonl, cmp = sys.argv[1:4]
recs = steps(jsonl)
kept = recs[1:] or recs
step = statistics.median(r["step_time_s"] for r in kept)
mfu = statistics.median(r["mfu"] for r in kept)
m = re.search(r"iteration time: measured ([0-9.]+) s, simulated ([0-9.]+) s, error ([-+0-9.]+)%", open(cmp).read())
err = f"{float(m[1]):.4f} / {float(m[2]):.4f} s, {m[3]}%" if m else "compare failed (see its file)"
print(f"{plan:<7} {1e3 * step:9.1f} {100 * mfu:7.1f}%   {err}")
EOF
)")
done
echo
echo "== $np GPUs over NCCL, each plan's median step after the first against its simulation on" \
     "${PROFILE:-the built-in ${BASE_GPU:-h100-sxm-80gb}}"
printf '%-7s %9s %8s   %s\n' plan "step_ms" "MFU" "compare: measured / simulated iteration, error"
printf '%s\n' "${rows[@]}" | tee "$out/multi.txt"
exit $status
