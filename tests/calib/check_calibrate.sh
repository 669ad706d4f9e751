#!/usr/bin/env bash
# check_calibrate.sh MPIEXEC MEGASIM [DEVICE]: a --tiny calibration (the
# real code path on the tests' grid) of DEVICE (cpu, the default, or gpu)
# must give a profile that `megasim predict --hardware` accepts (exit 0,
# JSON that parses) and HDF5 raw samples; copies with a field removed or
# made negative must be refused with a message naming the field
# (hw_resolve's checks). Collectives run under `MPIEXEC -np 2` when MPIEXEC
# is given (cpu), or when it is given and two GPUs are visible (gpu: NCCL
# needs one GPU per rank); then every checked element must be right
# (#wrong 0 in every nccl-tests row). gpu without a usable GPU: exit 77
# (ctest's "skipped").
set -u
mpiexec=$1 bin=$2 device=${3:-cpu}
dir=$(mktemp -d /tmp/megasim_calib.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

mpi=()
[ -n "$mpiexec" ] && [ -x "$mpiexec" ] && mpi=("$mpiexec" --allow-run-as-root --oversubscribe -np 2)

# GPUs this process may use: CUDA_VISIBLE_DEVICES when set, else nvidia-smi's list.
gpus() {
  if [ -n "${CUDA_VISIBLE_DEVICES+x}" ]; then
    awk -F, '{n = 0; for (i = 1; i <= NF; i++) { if ($i == "" || $i == "-1") break; n++ } print n}' \
      <<< "$CUDA_VISIBLE_DEVICES"
  elif command -v nvidia-smi >/dev/null; then
    nvidia-smi -L 2>/dev/null | grep -c '^GPU'
  else
    echo 1
  fi
}

run=("$bin")
rerun=1
if [ "$device" = cpu ]; then
  [ ${#mpi[@]} -gt 0 ] && run=("${mpi[@]}" "$bin")
else
  # One process first: it says whether there is a GPU at all.
  "$bin" calibrate --device gpu --tiny --out "$dir/p.json" >"$dir/report.txt" 2>"$dir/err.txt"; rc=$?
  if [ "$rc" -eq 2 ] && grep -q "no usable GPU" "$dir/err.txt"; then
    echo "skipped: $(cat "$dir/err.txt")"
    exit 77
  fi
  [ "$rc" -eq 0 ] || { cat "$dir/err.txt"; fail "calibrate --device gpu (one process) exited $rc"; }
  echo "ok   one process: $bin calibrate --device gpu --tiny wrote a profile"
  n=$(gpus)
  if [ ${#mpi[@]} -gt 0 ] && [ "${n:-0}" -ge 2 ]; then
    run=("${mpi[@]}" "$bin")
  else
    echo "     NCCL collectives not run: they need mpirun and 2 GPUs (found ${n:-0} GPU(s), mpiexec '${mpiexec}')"
    rerun=0
  fi
fi

if [ "$rerun" -eq 1 ]; then
  echo "command: ${run[*]} calibrate --device $device --tiny --out $dir/p.json"
  "${run[@]}" calibrate --device "$device" --tiny --out "$dir/p.json" >"$dir/report.txt" 2>"$dir/err.txt" ||
    { rc=$?; cat "$dir/err.txt"; fail "calibrate exited $rc"; }
fi
[ -s "$dir/p.json" ] && [ -s "$dir/p.h5" ] || fail "expected $dir/p.json and $dir/p.h5"
grep -E "best GEMM|largest copy|kernel gap|all-reduce|collectives|comm slowdown" "$dir/report.txt"
echo "ok   calibrate wrote the profile and the raw HDF5"

# nccl-tests rows: size count type time algbw busbw #wrong.
if grep -q '^# all_reduce' "$dir/report.txt"; then
  read -r rows wrong < <(awk '$3 == "float" && NF == 7 {n++; w += $7} END {print n + 0, w + 0}' "$dir/report.txt")
  echo "     collectives: expected #wrong 0 in every row; got $rows rows, $wrong wrong elements in all"
  [ "$rows" -gt 0 ] && [ "$wrong" -eq 0 ] || fail "collective results are wrong (or no rows printed)"
  echo "ok   every collective's result checked element by element"
fi

job=(--preset megatron-lm --num-gpus 16 --tensor-model-parallel-size 2 --global-batch-size 16 --json)
"$bin" predict --hardware "$dir/p.json" "${job[@]}" >"$dir/pred.json" || fail "predict --hardware refused the profile"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['iteration_time_s'] > 0; print('     predict: iteration_time_s', d['iteration_time_s'], 'mfu', d['mfu'])" "$dir/pred.json" ||
  fail "predict's JSON does not parse or has no positive iteration_time_s"
keys="'date','host','cpu_model','command','megasim_version','device','fits','measured','kept_from_base'"
[ "$device" = gpu ] && keys="$keys,'gpu_name','compute_capability','sm_count','cuda_driver_version','cuda_runtime_version','nccl_version'"
python3 -c "import json,sys; p=json.load(open(sys.argv[1]))['provenance']; [p[k] for k in ($keys)]; assert p['device'] == sys.argv[2]; print('     provenance:', p['device'], p.get('gpu_name', ''), p['command'])" "$dir/p.json" "$device" ||
  fail "provenance lacks one of $keys, or its device is not $device"
echo "ok   predict --hardware accepts it (exit 0, JSON parses); provenance complete"
# megasim's own executor: no Megatron host terms, curves as measured; on the
# CPU the memory-bound kernels' math rates are measured, GeLU's (tanh) the
# slowest per element.
python3 - "$dir/p.json" "$device" <<'PY' || fail "calibrated profile's executor terms or math rates are wrong"
import json, sys
p = json.load(open(sys.argv[1])); g, c = p['gpu'], p['cluster']
print('     executor terms: expected compute_scale 1, host_sync_gap_us 0, iteration_overhead_s 0, nvlink_scale 1; got',
      c['compute_scale'], c['host_sync_gap_us'], c['iteration_overhead_s'], c['nvlink_scale'])
assert (c['compute_scale'], c['host_sync_gap_us'], c['iteration_overhead_s'], c['nvlink_scale']) == (1, 0, 0, 1)
if sys.argv[2] == 'cpu':
    r = [g['norm_gelems'], g['gelu_gelems'], g['optim_gparams']]
    print('     CPU math rates (G/s): LayerNorm %.3g, bias+GeLU %.3g, AdamW %.3g; expected all > 0, GeLU below LayerNorm'
          % tuple(r), '; flash1_rel', g['flash1_rel'], '(expected 1)')
    assert min(r) > 0 and r[1] < r[0] and g['flash1_rel'] == 1
    # ten Philox rounds per element outweigh LayerNorm's handful of flops
    print('     CPU dropout draws: %.3g G/s; expected > 0 and below LayerNorm\'s %.3g' % (g['dropout_gdraws'], r[0]))
    assert 0 < g['dropout_gdraws'] < r[0]
PY
echo "ok   the profile carries the executor's terms (and, on the CPU, measured math rates)"

# gemm_eff is fitted with wave quantisation (calib_fit_gemm_waves): the
# profile's tile is the fit's, and the raw file keeps each sample's wave
# efficiency beside its residual.
python3 - "$dir/p.json" <<'PY' || fail "gemm_eff's tile fit is missing or disagrees with the profile's gemm_tile_m/n"
import json, sys
p = json.load(open(sys.argv[1])); f = p['provenance']['fits']['gemm_eff']
print('     gemm_eff: tile %d x %d, relative rms %.4f, candidates: %s; profile gemm_tile %d x %d'
      % (f['tile_m'], f['tile_n'], f['relative_rms'], f['candidates_relative_rms'], p['gpu']['gemm_tile_m'],
         p['gpu']['gemm_tile_n']))
assert (f['tile_m'], f['tile_n']) == (p['gpu']['gemm_tile_m'], p['gpu']['gemm_tile_n'])
assert 0 <= f['relative_rms'] < 1 and 'wave' in f['model']
PY
h5dump -H "$dir/p.h5" | grep -q '"wave_eff"' || fail "expected /fits/gemm_eff/wave_eff in $dir/p.h5"
echo "ok   gemm_eff fitted with wave quantisation: the profile's tile is the fit's, wave_eff stored"

# The flash curves likewise (calib_fit_attn_waves): the profile's attention
# blocks are the fits' (one row at a time on the CPU's reference kernels).
python3 - "$dir/p.json" "$device" <<'PY' || fail "the flash fits' blocks are missing or disagree with the profile's attn_block_q/k"
import json, sys
p = json.load(open(sys.argv[1])); fits = p['provenance']['fits']; g = p['gpu']
for name, field in (('flash_fwd_eff', 'attn_block_q'), ('flash_bwd_eff', 'attn_block_k')):
    f = fits[name]
    print('     %s: block of %d rows, relative rms %.4f, candidates: %s; profile %s %d'
          % (name, f['block_rows'], f['relative_rms'], f['candidates_relative_rms'], field, g[field]))
    assert f['block_rows'] == g[field] and 0 <= f['relative_rms'] < 1 and 'wave' in f['model']
    assert sys.argv[2] != 'cpu' or g[field] == 1
PY
echo "ok   flash_fwd_eff and flash_bwd_eff fitted with wave quantisation: the profile's blocks are the fits'"

# Collectives (Hockney's method): each large-message fit holds its latency
# between 0 and the small regime's, and finds a positive bandwidth.
python3 - "$dir/p.json" <<'PY' || fail "a large-message collective fit has a latency outside [0, the small regime's] or no bandwidth"
import json, sys
fits = json.load(open(sys.argv[1]))['provenance']['fits']
large = [n for n in fits if n.endswith('_large')]
assert large, 'no large-message fits'
for n in large:
    s, l = fits[n[:-6] + '_small'], fits[n]
    print('     %-22s alpha %.3f us (small regime %.3f), %.3f GB/s' % (n, l['alpha_us'], s['alpha_us'], l['bandwidth_gbps']))
    assert 0 <= l['alpha_us'] <= max(0.0, s['alpha_us']) and l['bandwidth_gbps'] > 0, n
PY
echo "ok   large-message collective fits: latency within [0, the small regime's], a positive bandwidth"

# Corrupted copies: expected exit 2 and the field named on stderr.
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); del d['gpu']['hbm_gbps']; json.dump(d, open(sys.argv[2],'w'))" "$dir/p.json" "$dir/missing.json"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['cluster']['alpha_nvlink_us'] = -1; json.dump(d, open(sys.argv[2],'w'))" "$dir/p.json" "$dir/negative.json"
for c in "missing|hbm_gbps' is missing" "negative|alpha_nvlink_us"; do
  name=${c%%|*} want=${c#*|}
  "$bin" predict --hardware "$dir/$name.json" "${job[@]}" >/dev/null 2>"$dir/e.txt"; rc=$?
  echo "     $name field: expected exit 2 and '$want'; got exit $rc: $(cat "$dir/e.txt")"
  [ "$rc" -eq 2 ] && grep -q "$want" "$dir/e.txt" || fail "corrupted profile ($name) not refused as expected"
done
echo "ok   missing and negative fields refused with a message naming the field"
