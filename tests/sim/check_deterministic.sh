#!/usr/bin/env bash
# check_deterministic.sh MEGASIM ARGS...: two runs of `megasim ARGS` must
# print byte-identical standard output.
set -u
bin=$1; shift
a=$("$bin" "$@" 2>/dev/null | sha256sum) b=$("$bin" "$@" 2>/dev/null | sha256sum)
echo "command: megasim $*"
echo "expected: two runs byte-identical; got: ${a%% *} and ${b%% *}"
[ "$a" = "$b" ] && [ -n "$("$bin" "$@" 2>/dev/null)" ] || { echo FAIL; exit 1; }
echo ok
