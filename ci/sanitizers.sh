#!/usr/bin/env bash
# Builds the unit tests with AddressSanitizer + UndefinedBehaviorSanitizer (CMake preset
# asan-ubsan, build-asan/) and runs the tests that preset selects (`ctest -L unit`, less
# the four slow ones it excludes: docs/fuzzing.md). Any ASan report or UBSan runtime error
# fails the run. Leak detection is off: LibTorch (not instrumented) keeps global
# allocations until exit. docs/fuzzing.md.
# The tests run as nproc gtest shards of the one binary (ci/unit_shards.sh), not a process
# per test: starting the ASan binary with LibTorch takes 2.2 s, which was 920 of the 1,580
# test-seconds. A shard past SHARD_TIMEOUT_SECONDS (default 1800; a quiet one takes under
# 300) is killed and fails.
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
failed=0
SHARD_TIMEOUT_SECONDS=${1:-1800} bash ci/unit_shards.sh build-asan "$filter" || failed=1
echo "sanitizers: unit tests took $(($(date +%s) - t1)) s"
exit "$failed"
