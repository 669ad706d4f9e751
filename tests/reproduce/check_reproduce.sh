#!/usr/bin/env bash
# check_reproduce.sh MEGASIM: `megasim reproduce quick` (three rows) writes
# an HDF5 file that standard tools read back, with kind "reproduce", the
# rows' configuration, /table2 (2 rows) and /table3 (1 row), and the CSV
# beside it; its errors are the predicted minus the paper's MFU.
set -u
bin=$1
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
fail=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }
"$bin" reproduce quick --out "$dir/r.h5" > "$dir/out.txt" 2> "$dir/err.txt"; rc=$?
check "reproduce quick exits 0 (got $rc)" '[ $rc -eq 0 ]'
check "HDF5 file written" '[ -s "$dir/r.h5" ]'
check "kind attribute is reproduce" 'h5dump -a /kind "$dir/r.h5" | grep -q "\"reproduce\""'
check "/table2 has 2 rows (expected 2: the 12,288-GPU rows)" 'h5dump -H -d /table2 "$dir/r.h5" | grep -q "DATASPACE  SIMPLE { ( 2 ) / ( 2 ) }"'
check "/table3 has 1 row (expected 1: row 1)" 'h5dump -H -d /table3 "$dir/r.h5" | grep -q "DATASPACE  SIMPLE { ( 1 ) / ( 1 ) }"'
check "config_json holds the three rows" '[ "$(h5dump -a /config_json "$dir/r.h5" | grep -o "table[23]-[a-z0-9-]*" | sort -u | wc -l)" -eq 3 ]'
check "CSV beside it: header + 2 rows" '[ "$(wc -l < "$dir/r-table2.csv")" -eq 3 ]'
# Table 3 row 1: the error column is closed - paper, in points.
line=$(grep "table3-row1" "$dir/out.txt")
paper=$(echo "$line" | awk '{print $3}') closed=$(echo "$line" | awk '{print $4}') err=$(echo "$line" | awk '{print $5}')
check "error = closed - paper: $closed - $paper = $err" 'awk -v p="$paper" -v c="$closed" -v e="$err" "BEGIN{d=c-p-e; exit !(d < 0.051 && d > -0.051)}"'
check "paper value 47.7 (Table 3 row 1) is read from the row file" '[ "$paper" = "47.7" ]'
[ $fail -eq 0 ] && echo "check_reproduce: 9 passed, 0 failed" || { echo "check_reproduce: failures above"; exit 1; }
