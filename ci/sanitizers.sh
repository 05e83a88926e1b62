#!/usr/bin/env bash
# Builds the unit tests with AddressSanitizer + UndefinedBehaviorSanitizer (CMake preset
# asan-ubsan, build-asan/) and runs them (`ctest -L unit`, less the four slow ones the
# preset excludes: docs/fuzzing.md). Any ASan report or UBSan
# runtime error fails the test that hit it. Leak detection is off: LibTorch (not
# instrumented) keeps global allocations until exit. docs/fuzzing.md.
# Usage: ci/sanitizers.sh [CTEST_TIMEOUT_SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
export ASAN_OPTIONS="detect_leaks=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
t0=$(date +%s)
cmake --preset asan-ubsan >/dev/null
cmake --build --preset asan-ubsan -j "$(nproc)"
t1=$(date +%s)
echo "sanitizers: build took $((t1 - t0)) s"
ctest --preset asan-ubsan -j "$(nproc)" --timeout "${1:-600}"
echo "sanitizers: unit tests took $(($(date +%s) - t1)) s"
