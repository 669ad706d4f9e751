#!/usr/bin/env bash
# check_mpi.sh MPIEXEC MEGASIM SUBCOMMAND ARGS...: `megasim SUBCOMMAND ARGS
# --json` split over 2 MPI ranks must print exactly the bytes one process
# prints (search gathers and ranks its plans in plan-index order, goodput
# its trials in trial order).
set -u
mpiexec=$1 bin=$2 sub=$3
shift 3
one=$(mktemp) two=$(mktemp)
trap 'rm -f "$one" "$two"' EXIT
"$bin" "$sub" "$@" --json >"$one" || { echo "FAIL: one process exited with $?"; exit 1; }
"$mpiexec" --allow-run-as-root --oversubscribe -np 2 "$bin" "$sub" "$@" --json >"$two" ||
  { echo "FAIL: mpirun -np 2 exited with $?"; exit 1; }
echo "command: megasim $sub $* --json"
echo "expected: $(wc -c <"$one") bytes, sha256 $(sha256sum <"$one" | cut -c1-16) (one process)"
echo "got:      $(wc -c <"$two") bytes, sha256 $(sha256sum <"$two" | cut -c1-16) (mpirun -np 2)"
[ -s "$one" ] && cmp "$one" "$two" && echo ok || { echo FAIL; exit 1; }
