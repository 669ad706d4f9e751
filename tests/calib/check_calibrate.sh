#!/usr/bin/env bash
# check_calibrate.sh MPIEXEC MEGASIM: a --tiny CPU calibration (the real
# code path on the tests' grid; under `MPIEXEC -np 2` when MPIEXEC is
# given, so the collectives run too) must give a profile that `megasim
# predict --hardware` accepts (exit 0, JSON that parses) and HDF5 raw
# samples; copies with a field removed or made negative must be refused
# with a message naming the field (hw_resolve's checks).
set -u
mpiexec=$1 bin=$2
dir=$(mktemp -d /tmp/megasim_calib.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

if [ -n "$mpiexec" ] && [ -x "$mpiexec" ]; then
  run=("$mpiexec" --allow-run-as-root --oversubscribe -np 2 "$bin")
else
  run=("$bin")
fi
echo "command: ${run[*]} calibrate --device cpu --tiny --out $dir/p.json"
"${run[@]}" calibrate --device cpu --tiny --out "$dir/p.json" >"$dir/report.txt" 2>"$dir/err.txt" ||
  { cat "$dir/err.txt"; fail "calibrate exited $?"; }
[ -s "$dir/p.json" ] && [ -s "$dir/p.h5" ] || fail "expected $dir/p.json and $dir/p.h5"
grep -E "best GEMM|best copy|all-reduce|collectives" "$dir/report.txt"
echo "ok   calibrate wrote the profile and the raw HDF5"

job=(--preset megatron-lm --num-gpus 16 --tensor-model-parallel-size 2 --global-batch-size 16 --json)
"$bin" predict --hardware "$dir/p.json" "${job[@]}" >"$dir/pred.json" || fail "predict --hardware refused the profile"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['iteration_time_s'] > 0; print('     predict: iteration_time_s', d['iteration_time_s'], 'mfu', d['mfu'])" "$dir/pred.json" ||
  fail "predict's JSON does not parse or has no positive iteration_time_s"
python3 -c "import json,sys; p=json.load(open(sys.argv[1]))['provenance']; [p[k] for k in ('date','host','cpu_model','command','megasim_version','device','fits')]; print('     provenance:', p['device'], p['command'])" "$dir/p.json" ||
  fail "provenance lacks date/host/cpu_model/command/megasim_version/device/fits"
echo "ok   predict --hardware accepts it (exit 0, JSON parses); provenance complete"

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
