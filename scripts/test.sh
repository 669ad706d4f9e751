#!/usr/bin/env bash
# The README's second command (and .ci/run): installs missing Debian
# packages, builds everything, and runs every test with ctest. GPU tests
# report "skipped" where no GPU is present.
#   scripts/test.sh           every test (CI), then the fast tier again
#                             under the sanitizers (--sanitize below)
#   scripts/test.sh --fast    the fast tier (ctest -L fast: each test under
#                             5 s), for the loop before each commit
#   scripts/test.sh --sanitize  the fast tier built under AddressSanitizer and
#                             UndefinedBehaviorSanitizer (build-sanitize/),
#                             stopping at the first report, leaks included
#   scripts/test.sh --sanitize-all  every test of that build (the slow ones
#                             with four times their time limits)
#   scripts/test.sh ARGS...   anything else is passed to ctest (-L sim, -R NAME)
set -euo pipefail
cd "$(dirname "$0")/.."
select=()
# Builds without per-file progress lines: each is one more cmake process
# per object (a clean build 88 -> 79 s, 172 -> 153 CPU-s on 2 cores);
# warnings and errors still show.
quiet=(-DCMAKE_RULE_MESSAGES=OFF -DCMAKE_TARGET_MESSAGES=OFF)
# The sanitized build (build-sanitize/): ASan and UBSan, halt on the first
# report, leaks included.
sanitized_build() {
  cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEGASIM_SANITIZE=address,undefined "${quiet[@]}" >/dev/null
  cmake --build build-sanitize -j"$(nproc)"
}
# Its tests: "$1" is "fast" (the fast tier) or "all" (every test, the slow
# ones with four times their limits); the rest goes to ctest.
sanitized_tests() {
  local tier=(-L fast)
  [ "$1" = all ] && tier=()
  shift
  # Leaks of OpenMPI, hwloc, libevent and libhdf5 (tests/lsan.supp) are
  # theirs; the tests that launch ranks unwind fully so that the
  # suppressions see their frames (tests/CMakeLists.txt).
  ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:abort_on_error=0 \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0" \
    ctest --test-dir build-sanitize --output-on-failure -j"$(nproc)" "${tier[@]}" "$@"
}
case "${1:-}" in
  --fast) select=(-L fast); shift ;;
  --sanitize|--sanitize-all)
    tier=fast
    [ "$1" = --sanitize-all ] && tier=all
    shift
    bash scripts/install-deps.sh
    sanitized_build
    sanitized_tests "$tier" "$@"
    exit ;;
  --help|-h) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
bash scripts/install-deps.sh
# Without a GPU the CUDA code is compiled (nvcc must accept every kernel)
# but never run: PTX for sm_80 only, device code unoptimised
# (MEGASIM_CUDA_CHECK_ONLY; attention.cu: 63 s of CPU for sm_80 + sm_90
# machine code, 18 s for optimised PTX, 5 s for PTX at -O0). With a GPU,
# machine code for both, as the GPU scripts build.
cuda=(-DMEGASIM_CUDA_CHECK_ONLY=OFF -DCMAKE_CUDA_ARCHITECTURES="80;90")
nvidia-smi -L >/dev/null 2>&1 || cuda=(-DMEGASIM_CUDA_CHECK_ONLY=ON)
cmake -S . -B build --no-warn-unused-cli -DCMAKE_BUILD_TYPE=Release "${cuda[@]}" "${quiet[@]}" >/dev/null
cmake --build build -j"$(nproc)"
# The README's second command (CI's) also runs the fast tier under the
# sanitizers, so that every submission is checked for memory errors,
# undefined behaviour and leaks, not only the sessions that ask (issue 40).
# Its build runs beside the plain suite at the lowest priority: the suite
# leaves a core idle while a test sleeps (the health checks wait for hangs
# and restarts) or holds both of ctest's slots on about one core
# (calib_gpu_emu_tiny_profile at the end), some 70 of its 345 CPU-s, about
# what the build needs; at nice 19 it takes 1.5% of a core a test wants.
# Its output waits in build/sanitize-build.log, printed after the suite.
full=0
[ ${#select[@]} -eq 0 ] && [ $# -eq 0 ] && full=1
san_log=build/sanitize-build.log
if [ "$full" -eq 1 ]; then
  (renice -n 19 -p "$BASHPID" >/dev/null && sanitized_build) >"$san_log" 2>&1 &
  san_pid=$!
fi
rc=0
ctest --test-dir build --output-on-failure -j"$(nproc)" "${select[@]}" "$@" || rc=$?
if [ "$full" -eq 1 ]; then
  san_rc=0
  wait "$san_pid" || san_rc=$?
  grep -v '^$' "$san_log" || true
  [ "$rc" -eq 0 ] || exit "$rc"
  [ "$san_rc" -eq 0 ] || { echo "scripts/test.sh: the sanitized build failed (exit $san_rc)"; exit "$san_rc"; }
  sanitized_tests fast
fi
exit "$rc"
