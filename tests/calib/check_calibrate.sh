#!/usr/bin/env bash
# check_calibrate.sh MPIEXEC MEGASIM [DEVICE [LEVEL]]: a calibration of
# DEVICE (cpu, the default, or gpu) at LEVEL (tiny, the default: the real
# code path on the tests' grid; or quick: what `--quick` runs, its time
# printed) must give a profile that `megasim predict
# --hardware` accepts (exit 0, JSON that parses) and HDF5 raw samples;
# copies with a field removed or made negative must be refused with a
# message naming it (hw_resolve's checks; a file may leave a whole section
# out: --hardware then overrides only the sections it has). Collectives run under `MPIEXEC -np 2` when MPIEXEC
# is given (cpu), or when it is given and two GPUs are visible (gpu: NCCL
# needs one GPU per rank); then every checked element must be right
# (#wrong 0 in every nccl-tests row). gpu without a usable GPU: exit 77
# (ctest's "skipped").
set -u
mpiexec=$1 bin=$2 device=${3:-cpu} level=${4:-tiny}
case "$level" in tiny|quick) ;; *) echo "check_calibrate.sh: LEVEL = '$level' is not allowed; tiny or quick"; exit 2 ;; esac
dir=$(mktemp -d /tmp/megasim_calib.XXXXXX)
# the job named on the command line (megasim run's default): its linear layers are timed too
tiny_gpt=$(cd "$(dirname "$0")/../.." && pwd)/experiments/real/tiny-gpt.json
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

# calibrate exited 2 saying there is no GPU: skipped (77) only where none is
# visible; with one, a GPU module that does not load or answer is a failure.
skip_without_gpu() {
  [ "$device" = gpu ] && [ "$1" -eq 2 ] && grep -q "no usable GPU" "$dir/err.txt" || return 0
  seen=0
  command -v nvidia-smi >/dev/null && seen=$(gpus)
  [ "${seen:-0}" -gt 0 ] && fail "$seen GPU(s) visible to nvidia-smi, but calibrate says: $(cat "$dir/err.txt")"
  echo "skipped: $(sed -n 1p "$dir/err.txt")"
  exit 77
}

run=("$bin")
rerun=1
n=0
[ "$device" = gpu ] && n=$(gpus)
if [ ${#mpi[@]} -gt 0 ] && { [ "$device" = cpu ] || [ "${n:-0}" -ge 2 ]; }; then
  # Two ranks (one GPU each). With two GPUs the one-process path is not run
  # as well: it is the same code less the collectives, and the one-GPU
  # machines run it (calib_gpu_tiny_profile); on the emulated GPUs it cost
  # 11 s of the 2-core CI machine's both cores.
  run=("${mpi[@]}" "$bin")
elif [ "$device" = gpu ]; then
  "$bin" calibrate --device gpu --"$level" --out "$dir/p.json" >"$dir/report.txt" 2>"$dir/err.txt"; rc=$?
  skip_without_gpu "$rc"
  [ "$rc" -eq 0 ] || { cat "$dir/err.txt"; fail "calibrate --device gpu (one process) exited $rc"; }
  echo "ok   one process: $bin calibrate --device gpu --$level wrote a profile"
  echo "     NCCL collectives not run: they need mpirun and 2 GPUs (found ${n:-0} GPU(s), mpiexec '${mpiexec}')"
  rerun=0
fi

if [ "$rerun" -eq 1 ]; then
  echo "command: ${run[*]} calibrate --device $device --$level --out $dir/p.json"
  t0=$SECONDS
  "${run[@]}" calibrate "$tiny_gpt" --device "$device" --"$level" --out "$dir/p.json" >"$dir/report.txt" 2>"$dir/err.txt" ||
    { rc=$?; skip_without_gpu "$rc"; cat "$dir/err.txt"; fail "calibrate exited $rc"; }
  secs=$((SECONDS - t0))
  # the issue's 2 minutes is a speed target: reported here, judged in docs/benchmarks.md
  echo "     calibrate --$level took $secs s (the issue's target for --quick: under 2 minutes on 2 cores)"
  # a progress line per collective and size group (8 B.., 1 KiB.., 1 MiB..)
  if [ "${run[0]}" != "$bin" ]; then
    n=$(grep -c '^megasim calibrate:   all_reduce' "$dir/err.txt")
    echo "     progress: expected 3 all_reduce size-group lines on stderr; got $n"
    [ "$n" -eq 3 ] || { cat "$dir/err.txt"; fail "no progress line per collective size group"; }
  fi
fi
[ -s "$dir/p.json" ] && [ -s "$dir/p.h5" ] || fail "expected $dir/p.json and $dir/p.h5"
grep -E "best GEMM|largest copy|memory bandwidth|kernel gap|all-reduce|collectives|comm slowdown" "$dir/report.txt"
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
# slowest per element. (flash1_rel is not checked: on the CPU it is 1 by
# construction, one flash reference serving both kinds, so a check of it
# could not fail; the provenance lists it under by_construction.)
python3 - "$dir/p.json" "$device" "${MEGASIM_SANITIZED:-}" <<'PY' || fail "calibrated profile's executor terms or math rates are wrong"
import json, sys
p = json.load(open(sys.argv[1])); g, c = p['gpu'], p['cluster']
# Under the sanitizers (MEGASIM_SANITIZED, set by tests/CMakeLists.txt)
# instrumentation slows each kernel by its own factor: LayerNorm's loads
# and stores are checked, Philox's register arithmetic is not, so the
# rates' order is not asserted there, only that each is positive.
sanitized = bool(sys.argv[3])
print('     executor terms: expected compute_scale 1, host_sync_gap_us 0, iteration_overhead_s 0, nvlink_scale 1; got',
      c['compute_scale'], c['host_sync_gap_us'], c['iteration_overhead_s'], c['nvlink_scale'])
assert (c['compute_scale'], c['host_sync_gap_us'], c['iteration_overhead_s'], c['nvlink_scale']) == (1, 0, 0, 1)
if sys.argv[2] == 'cpu':
    r = [g['norm_gelems'], g['gelu_gelems'], g['optim_gparams']]
    print('     CPU math rates (G/s): LayerNorm %.3g, bias+GeLU %.3g, AdamW %.3g; expected all > 0, GeLU below LayerNorm'
          % tuple(r))
    # bias+GeLU timed on the named tiny GPT's pre-activations, N(0, (0.02 sqrt(64))^2) (calib_gelu_input_std)
    print('     GeLU inputs: expected std 0.16, got', p['provenance'].get('gelu_input_std'))
    assert abs(p['provenance']['gelu_input_std'] - 0.16) < 1e-6
    assert min(r) > 0 and (sanitized or r[1] < r[0])
    # ten Philox rounds per element outweigh LayerNorm's handful of flops
    print('     CPU dropout draws: %.3g G/s; expected > 0 and below LayerNorm\'s %.3g%s'
          % (g['dropout_gdraws'], r[0], ' (sanitized build: the order not asserted)' if sanitized else ''))
    assert 0 < g['dropout_gdraws'] and (sanitized or g['dropout_gdraws'] < r[0])
PY
echo "ok   the profile carries the executor's terms (and, on the CPU, measured math rates)"

# The unfused attention's softmax rates and GEMM speed (calib/profile_attn.c
# fit_softmax): the profile's fields are the fits' (1e-3 / slope; 1 / slope),
# or 0 where a fit found nothing to charge. On the CPU, whose samples span
# four head sizes, the forward's GEMMs run below kern_gemm_ref's speed (the
# reference does them a row at a time: 0.55 to 0.6 here, 2026-11-29) and its
# exponentials cost something per score.
python3 - "$dir/p.json" "$device" "${MEGASIM_SANITIZED:-}" <<'PY' || fail "the softmax fits are missing or not the profile's"
import json, sys
p = json.load(open(sys.argv[1])); g, fits = p['gpu'], p['provenance']['fits']
for pass_ in ('fwd', 'bwd'):
    s, u = fits['softmax_' + pass_], fits['unfused_%s_gemm' % pass_]
    want_rate = 1e-3 / s['slope'] if s['slope'] > 0 else 0
    want_rel = 1 / u['slope'] if u['slope'] > 0 else 0
    got = (g['softmax_%s_gelems' % pass_], g['unfused_%s_rel' % pass_])
    print('     %s: softmax %.4g G scores/s, GEMMs at %.3f of gemm_eff (%d samples, R^2 %.4f); expected the fits\' '
          '%.4g and %.3f' % (pass_, got[0], got[1], s['samples'], s['r2'], want_rate, want_rel))
    assert s['samples'] >= 2 and abs(got[0] - want_rate) <= 1e-9 * max(1, want_rate)
    assert abs(got[1] - min(10, want_rel)) <= 1e-9
if sys.argv[2] == 'cpu' and not sys.argv[3]:
    print('     CPU forward: expected its GEMMs below gemm_eff (rel < 1) and a positive softmax rate')
    assert 0 < g['unfused_fwd_rel'] < 1 and g['softmax_fwd_gelems'] > 0
PY
echo "ok   the unfused attention's softmax rates and GEMM speed are the fits'"

# A kernel's gap as a node of a CUDA graph (calib/bench_gpu_mem.c
# bg_graph_gap_us; what --enable-cuda-graph's passes are priced at): on a
# GPU measured and named in the provenance, or, where the samples gave no
# positive launch gap (the emulated GPU's time has no fixed part), the
# base's 0 (kernel_gap_us) and named among the fields kept; on the CPU,
# which has no graphs, 0 and named nowhere.
python3 - "$dir/p.json" "$device" <<'PY' || fail "graph_gap_us is not what the provenance says"
import json, sys
p = json.load(open(sys.argv[1])); g, pv = p['gpu']['graph_gap_us'], p['provenance']
named = ('graph_gap_us' in pv['measured'], 'graph_gap_us' in pv['kept_from_base'])
print('     graph_gap_us %g; named in measured, kept_from_base: %s' % (g, named))
if sys.argv[2] == 'cpu':
    assert g == 0 and named == (False, False)
else:
    assert (g > 0 and named == (True, False)) or (g == 0 and named == (False, True))
PY
echo "ok   graph_gap_us as the provenance says"

# The backward GEMMs' transposes (calib/profile.c fit_gemm): on the CPU,
# gemm_pack_ns is the gemm_pack fit's slope (us an element, x 1e3), which
# kern_gemm_ref's packing of the weight (input gradient) and of both inputs
# (weight gradient) makes positive; on a GPU 0 (cuBLAS transposes in place).
python3 - "$dir/p.json" "$device" <<'PY' || fail "gemm_pack_ns is not the gemm_pack fit's"
import json, sys
p = json.load(open(sys.argv[1])); g, fits = p['gpu'], p['provenance']['fits']
if sys.argv[2] == 'cpu':
    f = fits['gemm_pack']
    print('     CPU: gemm_pack_ns %.4g, expected the fit\'s slope x 1e3 = %.4g > 0 (%d samples, R^2 %.3f)'
          % (g['gemm_pack_ns'], f['slope'] * 1e3, f['samples'], f['r2']))
    assert f['samples'] >= 2 and f['slope'] > 0 and abs(g['gemm_pack_ns'] - f['slope'] * 1e3) <= 1e-9 * g['gemm_pack_ns']
else:
    print('     GPU: gemm_pack_ns expected 0, got %g' % g['gemm_pack_ns'])
    assert g['gemm_pack_ns'] == 0
PY
echo "ok   the backward GEMMs' transposes are the fit's (CPU) or none (GPU)"

# The raw samples (h5dump: no h5py needed): every linear layer's GEMM timed
# in its three passes (forward, backward dinp, backward dweight, as the
# backend runs them), and the attention sweep's window, GQA and second
# head size, flash and unfused.
h5col() { h5dump -d "$2" -y -w 0 "$1" | tr -d ' \n' | sed -n 's/.*DATA{\([^}]*\)}.*/\1/p'; }
python3 - "$(h5col "$dir/p.h5" /gemm/pass)" "$(h5col "$dir/p.h5" /gemm/tp)" "$(h5col "$dir/p.h5" /attention/window)" \
  "$(h5col "$dir/p.h5" /attention/NKV)" "$(h5col "$dir/p.h5" /attention/NH)" "$(h5col "$dir/p.h5" /attention/HS)" \
  "$(h5col "$dir/p.h5" /attention_unfused/T)" "$(h5col "$dir/p.h5" /gemm/hidden)" "$(h5col "$dir/p.h5" /gemm/m)" \
  "$(h5col "$dir/p.h5" /gemm/n)" "$(h5col "$dir/p.h5" /gemm/k)" "$rerun" <<'PY' || fail "the raw samples lack a GEMM pass or an attention case"
import sys
col = lambda i: [float(v) for v in sys.argv[i].split(',') if v]
passes, tp, win, nkv, nh, hs, unf, hid, gm, gn, gk = (col(i) for i in range(1, 12))
if sys.argv[12] == '1':  # calibrated with experiments/real/tiny-gpt.json named: h 64, FFN 256, 2 x 64 tokens, TP 1
    want = sorted((m, n, k) for N, C, OC in ((128, 64, 192), (128, 64, 64), (128, 64, 256), (128, 256, 64))
                  for m, n, k in ((N, OC, C), (N, C, OC), (OC, C, N)))
    got = sorted((m, n, k) for h, m, n, k in zip(hid, gm, gn, gk) if h == 64)
    print('     the named job\'s GEMMs (h 64): expected its 4 linear layers x 3 passes', want, '; got', got)
    assert got == want
layer = [p for p, t in zip(passes, tp) if t > 0]
counts = [layer.count(k) for k in (0, 1, 2)]
print('     GEMM: linear-layer samples per pass (forward, dinp, dweight): expected equal and > 0; got', counts)
assert counts[0] > 0 and counts[0] == counts[1] == counts[2]
cases = {'window': sum(w > 0 for w in win), 'GQA (NKV < NH)': sum(k < h for k, h in zip(nkv, nh)),
         'head sizes': len(set(hs)), 'unfused': len(unf)}
print('     attention rows: expected a window, GQA, 2 head sizes, unfused samples; got', cases)
assert cases['window'] > 0 and cases['GQA (NKV < NH)'] > 0 and cases['head sizes'] >= 2 and cases['unfused'] >= 2
PY
echo "ok   raw samples: GEMMs in all three passes; attention with window, GQA, two head sizes; unfused timed"

# Compute beside a collective, on GPUs with 2 ranks (NCCL runs beside the
# GEMM on each GPU): the overlap table holds two GEMM sizes x two all-reduce
# sizes, and comm_slowdown is their mean (fits/comm_slowdown), clamped to
# [0, 1] in the profile.
if [ "$device" = gpu ] && [ "${run[0]}" != "$bin" ]; then
  python3 - "$dir/p.json" "$(h5col "$dir/p.h5" /overlap/slowdown)" <<'PY' || fail "the overlap samples or their fit are wrong"
import json, sys
p = json.load(open(sys.argv[1]))
s = [float(v) for v in sys.argv[2].split(',') if v]
f = p['provenance']['fits'].get('comm_slowdown', {})
mean = sum(s) / len(s) if s else float('nan')
want = min(1.0, max(0.0, mean))
print('     overlap: expected 4 samples, fits/comm_slowdown their mean %.6f and the profile\'s comm_slowdown %.6f; '
      'got %d samples, %s and %.6f' % (mean, want, len(s), f.get('value'), p['gpu']['comm_slowdown']))
# h5dump prints about 7 significant digits; the JSON carries the full ones
assert len(s) == 4 and abs(f['value'] - mean) <= 1e-6 + 1e-4 * abs(mean)
assert abs(p['gpu']['comm_slowdown'] - min(1.0, max(0.0, f['value']))) <= 1e-12
PY
  echo "ok   comm_slowdown fitted over the overlap samples"
fi

# gemm_eff is fitted with wave quantisation (calib_fit_gemm_waves). On a
# GPU the tile is chosen among four candidates and the profile's must be
# the fit's; on the CPU there is one candidate (kern_gemm_ref's 4 x 4
# block), so that comparison could not fail and is not made: the curve
# check below covers the CPU. The raw file keeps each sample's wave
# efficiency beside its residual.
python3 - "$dir/p.json" "$device" <<'PY' || fail "gemm_eff's fit is missing or disagrees with the profile's tile"
import json, sys
p = json.load(open(sys.argv[1])); f = p['provenance']['fits']['gemm_eff']
print('     gemm_eff: tile %d x %d, relative rms %.4f, candidates: %s; profile gemm_tile %d x %d'
      % (f['tile_m'], f['tile_n'], f['relative_rms'], f['candidates_relative_rms'], p['gpu']['gemm_tile_m'],
         p['gpu']['gemm_tile_n']))
assert 'wave' in f['model'] and 0 <= f['relative_rms'] < 1
assert sys.argv[2] == 'cpu' or (f['tile_m'], f['tile_n']) == (p['gpu']['gemm_tile_m'], p['gpu']['gemm_tile_n'])
PY
h5dump -H "$dir/p.h5" | grep -q '"wave_eff"' || fail "expected /fits/gemm_eff/wave_eff in $dir/p.h5"
echo "ok   gemm_eff fitted with wave quantisation"

# The GPU's clocks: each GEMM and attention sample's mean SM clock (0 where
# NVML does not answer, or a sample ended before its first read), and the
# sustained run's windows (calib_sustained_table): at least two, each with a
# positive speed. On the emulated GPU (MEGASIM_GPU_MODULE) NVML is emulated
# too (tests/real/emu/nvml_emu.c) and answers 1740 MHz: every clock is 0 or
# exactly that, and some sample read it.
if [ "$device" = gpu ]; then
  python3 - "$(h5col "$dir/p.h5" /gemm/sm_mhz)" "$(h5col "$dir/p.h5" /attention/sm_mhz)" \
    "$(h5col "$dir/p.h5" /sustained/tflops)" "$(h5col "$dir/p.h5" /sustained/sm_mhz)" "${MEGASIM_GPU_MODULE:-}" <<'PY' ||
import sys
g, a, tf, mhz = ([float(x) for x in s.split(',') if x] for s in sys.argv[1:5])
emu = bool(sys.argv[5])
print('     clocks: %d GEMM and %d attention samples with sm_mhz (expected all, each 0 or %s), %d of them read; '
      'sustained: %d windows, TFLOP/s %s, MHz %s (expected >= 2 windows, TFLOP/s > 0)'
      % (len(g), len(a), '1740 MHz (emulated NVML)' if emu else '100-4000 MHz', sum(x > 0 for x in g + a), len(tf),
         [round(x, 3) for x in tf[:4]], [round(x) for x in mhz[:4]]))
assert g and a and all(x == 0 or 100 <= x <= 4000 for x in g + a + mhz)
assert not emu or (all(x in (0, 1740) for x in g + a + mhz) and 1740 in g + a)
assert len(tf) >= 2 and all(x > 0 for x in tf) and len(mhz) == len(tf)
PY
    fail "the samples' clocks or the sustained run are missing or out of range"
  echo "ok   sm_mhz per sample and the sustained run in the raw file"
fi

# The flash curves likewise (calib_fit_attn_waves): on a GPU the profile's
# attention blocks are the fits' (among 32, 64, 128 rows); the CPU's
# reference kernels have one (a row at a time), not compared for the same
# reason as the GEMM tile.
python3 - "$dir/p.json" "$device" <<'PY' || fail "the flash fits are missing or disagree with the profile's attn_block_q/k"
import json, sys
p = json.load(open(sys.argv[1])); fits = p['provenance']['fits']; g = p['gpu']
for name, field in (('flash_fwd_eff', 'attn_block_q'), ('flash_bwd_eff', 'attn_block_k')):
    f = fits[name]
    print('     %s: block of %d rows, relative rms %.4f, candidates: %s; profile %s %d'
          % (name, f['block_rows'], f['relative_rms'], f['candidates_relative_rms'], field, g[field]))
    assert 'wave' in f['model'] and 0 <= f['relative_rms'] < 1
    assert sys.argv[2] == 'cpu' or f['block_rows'] == g[field]
PY
echo "ok   flash_fwd_eff and flash_bwd_eff fitted with wave quantisation"

# The profile's curves are the fits' (calib_make_profile's sample_curve):
# every point (x, y) of gemm_eff, flash_fwd_eff, flash_bwd_eff and mem_eff
# is min(1, max(1e-4, e_max x / (x + x_half))) of the fit of the same name
# in the provenance. Fails if the writer samples the wrong fit, or none.
python3 - "$dir/p.json" <<'PY' || fail "a profile curve is not its fit's"
import json, sys
p = json.load(open(sys.argv[1])); fits = p['provenance']['fits']
for name in ('gemm_eff', 'flash_fwd_eff', 'flash_bwd_eff', 'mem_eff'):
    f, curve = fits[name], p['gpu'][name]
    want = [min(1, max(1e-4, f['e_max'] * x / (x + f['x_half']))) for x, _ in curve]
    worst = max(abs(y - w) for (_, y), w in zip(curve, want))
    print('     %-14s %2d points; expected the fit e_max %.4g, x_half %.4g; got worst |difference| %.2g'
          % (name, len(curve), f['e_max'], f['x_half'], worst))
    assert len(curve) >= 2 and worst <= 1e-9, name
PY
echo "ok   the profile's efficiency curves are the fits' curves"

# Memory bandwidth (fit_hbm): on the CPU a fit of copy time against bytes
# over three or more sizes of at least twice the last-level cache (--tiny:
# of at most 16 MiB, calib_dram_cache_bytes, so they may be cached here),
# whose bandwidth is the profile's hbm_gbps; its R^2 must show a line
# (loosely: a neighbour on a shared host moves the points; sizes on both
# sides of a cache's edge would bend it).
python3 - "$dir/p.json" "$device" <<'PY' || fail "the memory-bandwidth fit is missing, poor, or not the profile's hbm_gbps"
import json, sys
p = json.load(open(sys.argv[1])); f = p['provenance']['fits']['hbm_bw']; hbm = p['gpu']['hbm_gbps']
print('     hbm_bw: %d samples, %.3f +- %.3f GB/s, R^2 %.5f; profile hbm_gbps %.3f'
      % (f['samples'], f['bandwidth_gbps'], f['bandwidth_se_gbps'], f['r2'], hbm))
if sys.argv[2] == 'cpu':
    print('     CPU: expected >= 3 samples, R^2 > 0.5, hbm_gbps = the fit\'s bandwidth')
    assert f['samples'] >= 3 and f['r2'] > 0.5 and abs(hbm / f['bandwidth_gbps'] - 1) < 1e-9
PY
echo "ok   memory bandwidth fitted over DRAM-resident copies"

# Collectives (Hockney's method): each large-message fit holds its latency
# between 0 and the small regime's, and finds a positive bandwidth. One GPU
# (one process, rerun 0) measures none: nothing to check (seen on an H100,
# 2026-11-26, where this asserted 'no large-message fits').
if [ "$rerun" -eq 0 ]; then
  echo "     collective fits not checked: one process measured no collectives (above)"
else
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
fi

# Corrupted copies: expected exit 2 and the field (or section) named on stderr.
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); del d['gpu']['hbm_gbps']; json.dump(d, open(sys.argv[2],'w'))" "$dir/p.json" "$dir/missing.json"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['cluster']['alpha_nvlink_us'] = -1; json.dump(d, open(sys.argv[2],'w'))" "$dir/p.json" "$dir/negative.json"
for c in "missing|hbm_gbps' is missing" "negative|alpha_nvlink_us"; do
  name=${c%%|*} want=${c#*|}
  "$bin" predict --hardware "$dir/$name.json" "${job[@]}" >/dev/null 2>"$dir/e.txt"; rc=$?
  echo "     $name field: expected exit 2 and '$want'; got exit $rc: $(cat "$dir/e.txt")"
  [ "$rc" -eq 2 ] && grep -q "$want" "$dir/e.txt" || fail "corrupted profile ($name) not refused as expected"
done
echo "ok   missing and negative fields refused with a message naming them"

# --refit: the raw file's samples fitted again (no device) give the same
# profile, every field but the provenance, whose refit_of names the file
# and the measurement's own date and command; a refit of the refit's raw
# file too (what it writes is read back the same way).
"$bin" calibrate --refit "$dir/p.h5" --out "$dir/q.json" >"$dir/refit.txt" 2>&1 ||
  { cat "$dir/refit.txt"; fail "calibrate --refit $dir/p.h5 exited $?"; }
"$bin" calibrate --refit "$dir/q.h5" --out "$dir/r.json" >"$dir/refit2.txt" 2>&1 ||
  { cat "$dir/refit2.txt"; fail "calibrate --refit $dir/q.h5 exited $?"; }
python3 - "$dir/p.json" "$dir/q.json" "$dir/r.json" "$dir/p.h5" <<'PY' || fail "a refit of the stored samples gave another profile"
import json, sys
p, q, r = (json.load(open(f)) for f in sys.argv[1:4])
pp, qp, rp = (d.pop('provenance') for d in (p, q, r))
diff = sorted(k for s in ('gpu', 'cluster') for k in p[s] if p[s][k] != q[s].get(k))
print('     refit: expected the measured profile field for field; got %s differing; refit of the refit: %s'
      % (len(diff), 'same' if q == r else 'differs'), diff[:5])
assert not diff and p == q == r
rf = qp['refit_of']
print('     refit_of: expected raw %s, date %s; got %s, %s' % (sys.argv[4], pp['date'], rf['raw'], rf['date']))
assert rf['raw'] == sys.argv[4] and rf['date'] == pp['date'] and rf['command'] == pp['command']
assert qp['host'] == pp['host'] and qp['fits'] == pp['fits']
PY
echo "ok   --refit of the raw file (and of its own raw file) gives the same profile"
