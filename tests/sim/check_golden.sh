#!/usr/bin/env bash
# check_golden.sh MEGASIM GOLDEN ARGS...: `megasim ARGS` must print GOLDEN
# exactly (a schedule dump checked by hand against Megatron-LM's order).
set -u
bin=$1 golden=$2
shift 2
echo "command: megasim $*"
echo "expected: $(basename "$golden") ($(grep -c '' "$golden") lines, checked by hand)"
if "$bin" "$@" | diff -u "$golden" - > /tmp/golden_diff.$$; then
  echo "got: identical"; rm -f /tmp/golden_diff.$$; exit 0
fi
echo "got: differences (first 20 lines):"; head -20 /tmp/golden_diff.$$; rm -f /tmp/golden_diff.$$; exit 1
