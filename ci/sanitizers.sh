#!/usr/bin/env bash
# Builds the unit tests with AddressSanitizer + UndefinedBehaviorSanitizer (CMake preset
# asan-ubsan, build-asan/) and runs the tests that preset selects (`ctest -L unit`, less
# the four slow ones it excludes: docs/fuzzing.md). Any ASan report or UBSan runtime error
# fails the run. Leak detection is off: LibTorch (not instrumented) keeps global
# allocations until exit. docs/fuzzing.md.
# The tests run as nproc gtest shards of the one binary, not a process per test: starting
# the ASan binary with LibTorch takes 2.2 s, which was 920 of the 1,580 test-seconds.
# Each shard's log is build-asan/shard-<i>.log; a failing shard's tail is printed. A shard
# past SHARD_TIMEOUT_SECONDS (default 1800; a quiet one takes under 300) is killed and fails.
# Usage: ci/sanitizers.sh [SHARD_TIMEOUT_SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
export ASAN_OPTIONS="detect_leaks=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
t0=$(date +%s)
cmake --preset asan-ubsan >/dev/null
cmake --build --preset asan-ubsan -j "$(nproc)"
t1=$(date +%s)
echo "sanitizers: build took $((t1 - t0)) s"

# The preset's selection as a gtest filter: every test less those the preset excludes (the
# names CTest lists, "  Test #12: Suite.Name"; the excluded ones are not parameterised,
# so their CTest and gtest names agree).
test_names() { sed -n 's/^ *Test *#[0-9]*: \([^ ]*\).*/\1/p' | sort; }
excluded=$(comm -23 <(ctest --test-dir build-asan -L unit -N | test_names) \
  <(ctest --preset asan-ubsan -N | test_names) | paste -sd:)
filter="-${excluded}"
echo "sanitizers: every unit test but ${excluded//:/, }"
shards=$(nproc)
pids=()
for ((i = 0; i < shards; ++i)); do
  (cd build-asan/tests && GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i \
    timeout "${1:-1800}" ./framegate_tests --gtest_filter="$filter" >"../shard-$i.log" 2>&1) &
  pids+=($!)
done
failed=0
for ((i = 0; i < shards; ++i)); do
  if ! wait "${pids[$i]}"; then
    echo "sanitizers: shard $i FAILED (build-asan/shard-$i.log):"
    grep -E "^\[  FAILED  \]|ERROR: AddressSanitizer|runtime error|SUMMARY" "build-asan/shard-$i.log" | head -20 || true
    tail -n 20 "build-asan/shard-$i.log"
    failed=1
  fi
  grep -E "^\[  PASSED  \]" "build-asan/shard-$i.log" | sed "s/^/sanitizers: shard $i: /" || true
done
echo "sanitizers: unit tests took $(($(date +%s) - t1)) s"
exit "$failed"
