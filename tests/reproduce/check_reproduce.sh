#!/usr/bin/env bash
# check_reproduce.sh MEGASIM: `megasim reproduce quick` (three rows) writes
# an HDF5 file that standard tools read back, with kind "reproduce", the
# rows' configuration, /table2 (2 rows) and /table3 (1 row), and the CSV
# beside it; its errors are the predicted minus the paper's MFU. The four
# cluster parameters fitted on Table 3 are recorded and match the built-in
# megascale profile's, and the fitted profile written beside the results
# gives `predict` the same MFU as reproduce's closed form; --fit none gives
# predict's built-in-profile MFU (Table 2 against itself: check_bounds.py).
# The fit's
# standard errors of the closed form obey least squares' hat-matrix trace.
set -u
bin=$1
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
fail=0 passed=0
check() { if eval "$2"; then echo "ok   $1"; passed=$((passed + 1)); else echo "FAIL $1"; fail=1; fi; }
# The configuration of FILE: an attribute, or a dataset of the same name
# when it is too long for an object header (sim/out.h, OUT_ATTR_MAX).
config_json() { h5dump -a /config_json "$1" 2>/dev/null | grep -q '^ *DATA' && h5dump -a /config_json "$1" ||
  h5dump -d /config_json "$1"; }
"$bin" reproduce quick --out "$dir/r.h5" > "$dir/out.txt" 2> "$dir/err.txt"; rc=$?
check "reproduce quick exits 0 (got $rc)" '[ $rc -eq 0 ]'
check "HDF5 file written" '[ -s "$dir/r.h5" ]'
check "kind attribute is reproduce" 'h5dump -a /kind "$dir/r.h5" | grep -q "\"reproduce\""'
check "/table2 has 2 rows (expected 2: the 12,288-GPU rows)" 'h5dump -H -d /table2 "$dir/r.h5" | grep -q "DATASPACE  SIMPLE { ( 2 ) / ( 2 ) }"'
check "/table3 has 1 row (expected 1: row 1)" 'h5dump -H -d /table3 "$dir/r.h5" | grep -q "DATASPACE  SIMPLE { ( 1 ) / ( 1 ) }"'
check "config_json holds the three rows" '[ "$(config_json "$dir/r.h5" | grep -o "table[23]-[a-z0-9-]*" | sort -u | wc -l)" -eq 3 ]'
check "CSV beside it: header + 2 rows" '[ "$(wc -l < "$dir/r-table2.csv")" -eq 3 ]'
# The figures' two simulations record simulate's whole configuration, as
# `megasim simulate --out` does: every option of its --help's simulate group.
for f in timeline heatmap; do
  keys=$(config_json "$dir/$f.h5" | grep -o '"simulate":{[^}]*}' | sed 's/^"simulate"://' | grep -o '"[a-z_]*":' | tr -d '":' | sort | tr '\n' ' ')
  want=$("$bin" simulate --help 2>&1 | awk '/^simulate:$/ {on = 1; next} /^[a-z].*:$/ {on = 0} on' |
    sed -n 's/^  --\([a-z-]*\).*/\1/p' | tr '-' '_' | sort | tr '\n' ' ')
  check "$f.h5 records every simulate option (expected: $want; got: $keys)" '[ -n "$keys" ] && [ "$keys" = "$want" ]'
done
check "heatmap.h5 records its stragglers and unfolded run" \
  'config_json "$dir/heatmap.h5" | grep -q "\"fold\":false,\"slow_rank\":\"24:1.1,"'
# Table 3 row 1: the error column is closed - paper, in points.
line=$(grep "table3-row1" "$dir/out.txt")
paper=$(echo "$line" | awk '{print $3}') closed=$(echo "$line" | awk '{print $4}') err=$(echo "$line" | awk '{print $5}')
check "error = closed - paper: $closed - $paper = $err" 'awk -v p="$paper" -v c="$closed" -v e="$err" "BEGIN{d=c-p-e; exit !(d < 0.051 && d > -0.051)}"'
check "paper value 47.7 (Table 3 row 1) is read from the row file" '[ "$paper" = "47.7" ]'
# Thresholds: the 12,288-GPU rows within issue 4's maximum of 2.5 points
# (inside issue 2's 3), both executors; the Table 3 fit's rms within 1.0.
for r in table2-megascale-12288 table2-megatron-lm-12288; do
  read -r ec es < <(awk -v r="$r" '$1 == r {print $5, $7}' "$dir/out.txt")
  check "$r: |error| <= 2.5 points, closed form $ec and simulator $es (paper: Table 2)" \
    'awk -v a="$ec" -v b="$es" "BEGIN{exit !(a <= 2.5 && a >= -2.5 && b <= 2.5 && b >= -2.5)}"'
done
# Table 3 row 1 (a fit row) within issue 4's 1.0 point for Table 3, both executors.
read -r ec es < <(awk '$1 == "table3-row1" {print $5, $7}' "$dir/out.txt")
check "table3-row1: |error| <= 1.0 point, closed form $ec and simulator $es (paper: Table 3)" \
  'awk -v a="$ec" -v b="$es" "BEGIN{exit !(a <= 1.0 && a >= -1.0 && b <= 1.0 && b >= -1.0)}"'
rms=$(sed -n 's/.*rms error \([0-9.]*\) points.*/\1/p' "$dir/out.txt")
check "Table 3 fit rms <= 1.0 point (got '$rms')" 'awk -v r="$rms" "BEGIN{exit !(r > 0 && r <= 1.0)}"'
# The fit: recorded, and its profile reproduces the fitted closed form.
rows="$(dirname "$0")/../../experiments/megascale"
for f in compute_scale host_sync_gap_us iteration_overhead_s nvlink_scale; do
  check "config_json records the fitted $f" 'config_json "$dir/r.h5" | grep -q "$f"'
done
check "fitted profile written beside the results" '[ -s "$dir/r-profile.json" ]'
# The fitted values, within their bounds, and the built-in megascale profile
# carries them rounded (model/hw_builtin.c): 0.94, 900 us, 0.45 s, 0.7.
fitted() { awk -v n="$1" '$1 == n {print $2}' "$dir/out.txt"; }
k=$(fitted compute_scale) gap=$(fitted host_sync_gap_us) ovh=$(fitted iteration_overhead_s) nvl=$(fitted nvlink_scale)
check "fitted compute_scale within 0.3..1.5 and within 0.01 of the built-in 0.94 (got '$k')" \
  'awk -v k="$k" "BEGIN{exit !(k > 0.3 && k < 1.5 && k > 0.93 && k < 0.95)}"'
check "fitted host_sync_gap_us within 100 us of the built-in 900 (got '$gap')" \
  'awk -v g="$gap" "BEGIN{exit !(g > 800 && g < 1000)}"'
check "fitted nvlink_scale within 0.1..1 and within 0.02 of the built-in 0.7 (got '$nvl')" \
  'awk -v v="$nvl" "BEGIN{exit !(v > 0.68 && v < 0.72)}"'
check "fitted iteration_overhead_s within 0.05 s of the built-in 0.45 (got '$ovh')" \
  'awk -v o="$ovh" "BEGIN{exit !(o > 0.40 && o < 0.50)}"'
viaprofile=$("$bin" predict "$rows/table3-row1.json" --hardware "$dir/r-profile.json" --json |
  sed -n 's/.*"mfu":[[:space:]]*\([0-9.e+-]*\).*/\1/p' | head -1)
check "predict --hardware FITTED gives Table 3 row 1 the reproduce closed form: $closed vs 100 x $viaprofile" \
  'awk -v a="$closed" -v b="$viaprofile" "BEGIN{d=a-100*b; exit !(d < 0.051 && d > -0.051)}"'
"$bin" reproduce table3 --fit none --no-sim --no-plot --out "$dir/n.h5" > "$dir/none.txt" 2>/dev/null; rc=$?
check "reproduce table3 --fit none exits 0 (got $rc)" '[ $rc -eq 0 ]'
plain=$("$bin" predict "$rows/table3-row1.json" --json | sed -n 's/.*"mfu":[[:space:]]*\([0-9.e+-]*\).*/\1/p' | head -1)
unfit=$(grep "table3-row1" "$dir/none.txt" | awk '{print $4}')
check "--fit none: Table 3 row 1 = plain predict (built-in profile): $unfit vs 100 x $plain" \
  '[ -n "$unfit" ] && [ -n "$plain" ] && awk -v a="$unfit" -v b="$plain" "BEGIN{d=a-100*b; exit !(d < 0.051 && d > -0.051)}"'
check "--fit none writes its results and no fitted profile" '[ -s "$dir/n.h5" ] && [ ! -e "$dir/n-profile.json" ]'
# The fit's standard errors of the closed form (delta method). On the rows
# fitted, their squares sum to the trace of the hat matrix (the number of
# parameters, 4) times the residual variance chi2 / (n - 4) = n rms^2 /
# (n - 4): an identity of least squares, checked on the CSV against the
# rms recorded in config_json.
"$bin" reproduce table3 --no-sim --no-plot --out "$dir/t3.h5" > "$dir/t3.txt" 2>/dev/null
rms=$(config_json "$dir/t3.h5" | grep -o 'rms_error_points[^,}]*' | head -1 | sed 's/.*://')
read -r sse want nse < <(awk -F, -v r="$rms" 'NR > 1 {s += ($7 * 100)^2; n++} END {print s, 4 * n * r * r / (n - 4), n}' \
  "$dir/t3-table3.csv")
check "Table 3: sum of the $nse rows' squared fit se = 4 n rms^2 / (n - 4): $sse vs $want (rms $rms)" \
  'awk -v a="$sse" -v b="$want" "BEGIN{exit !(b > 0 && a / b > 0.99 && a / b < 1.01)}"'
# Leave-one-out: each Table 3 row from a fit to the other eight. A row the
# fit has not seen is predicted no better than the rows it has: the mean
# |error| is at least the fit's (printed on the Table 3 summary line).
loo=$(config_json "$dir/t3.h5" | grep -o 'leave_one_out_mean_abs_points[^,}]*' | head -1 | sed 's/.*://')
fitmean=$(sed -n 's/^  mean |error| \([0-9.]*\) points (closed form.*/\1/p' "$dir/t3.txt" | head -1)
check "Table 3 leave-one-out mean |error| $loo >= the fit's $fitmean, and recorded in config_json" \
  'awk -v l="$loo" -v f="$fitmean" "BEGIN{exit !(l != \"\" && f != \"\" && l + 0.005 >= f && l < 5)}"'
"$bin" reproduce table2 --no-sim --no-plot --out "$dir/t2.h5" > "$dir/t2.txt" 2>/dev/null
check "Table 2 prints how many errors exceed 3 fit standard errors" \
  'grep -q "of 16 errors exceed 3 of them" "$dir/t2.txt"'
[ $fail -eq 0 ] && echo "check_reproduce: $passed passed, 0 failed" || { echo "check_reproduce: failures above"; exit 1; }
