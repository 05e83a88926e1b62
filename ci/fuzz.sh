#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ with clang (build-fuzz/, ASan + UBSan + libFuzzer)
# and runs each for SECONDS (default 60) from its committed seed corpus fuzz/corpus/<t>/.
# New interesting inputs go to build-fuzz/corpus/<t>/ (not committed); a crash leaves
# build-fuzz/artifacts/<t>-crash-* and makes this script exit 1. docs/fuzzing.md.
# Usage: ci/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
targets=(matrix npy golden)
san="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
san+=" -fno-omit-frame-pointer"
t0=$(date +%s)
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DFRAMEGATE_BUILD_TESTS=OFF -DFRAMEGATE_BUILD_BENCHMARKS=OFF -DFRAMEGATE_BUILD_FUZZERS=ON \
  -DCMAKE_CXX_FLAGS="$san" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]/%/_fuzz}"
echo "fuzz: build took $(($(date +%s) - t0)) s"
mkdir -p build-fuzz/artifacts
# LibTorch (not instrumented) keeps global allocations alive until exit: no leak reports.
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
failed=0
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$t"
  echo "fuzz: $t for ${seconds} s"
  if ! "build-fuzz/fuzz/${t}_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -max_len=65536 -print_final_stats=1 -artifact_prefix="build-fuzz/artifacts/$t-" \
      "build-fuzz/corpus/$t" "fuzz/corpus/$t" 2>"build-fuzz/$t.log"; then
    echo "fuzz: $t FAILED (log: build-fuzz/$t.log, inputs: build-fuzz/artifacts/$t-*)"
    grep -E "ERROR|runtime error|SUMMARY" "build-fuzz/$t.log" | head -5 || true
    failed=1
  else
    grep -E "stat::number_of_executed_units|stat::new_units_added" "build-fuzz/$t.log" |
      sed "s/^/fuzz: $t: /"
  fi
done
echo "fuzz: total $(($(date +%s) - t0)) s"
exit "$failed"
