#!/usr/bin/env bash
# expect_error.sh MEGASIM 'TEXT' ARGS...: runs megasim ARGS and checks the
# bad-input contract: exit status 2, exactly one line on stderr containing
# TEXT (the field, value or rule), and nothing on stdout.
set -u
bin=$1 want=$2
shift 2
out=$("$bin" "$@" 2>/tmp/megasim_err.$$); rc=$?
err=$(cat /tmp/megasim_err.$$); rm -f /tmp/megasim_err.$$
lines=$(printf '%s' "$err" | grep -c '')
echo "command: megasim $*"
echo "expected: exit 2, one stderr line containing '$want', empty stdout"
echo "got:      exit $rc, $lines stderr line(s): $err"
[ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] && [[ "$err" == *"$want"* ]] && [ -z "$out" ] || { echo FAIL; exit 1; }
echo ok
