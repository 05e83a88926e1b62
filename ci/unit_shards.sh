#!/usr/bin/env bash
# Runs a build's unit tests (the one framegate_tests binary, CTest's label `unit`) as nproc
# gtest shards side by side, instead of CTest's process per test: LibTorch's start in each
# process (0.9 s on the host's 1.13, 2.1 s on 2.6, 2.2 s under ASan) was most of their
# time. CI runs them this way (ci/test.sh, ci/libtorch2.sh, ci/sanitizers.sh); `ctest -L
# unit` runs the same tests one by one.
# Each shard's log is BUILD_DIR/shard-<i>.log; a failing shard's failures and tail are
# printed. A shard past SHARD_TIMEOUT_SECONDS (default 1800) is killed and fails.
# Usage: ci/unit_shards.sh BUILD_DIR [GTEST_FILTER]; exit 0 every shard passed, 1 not.
set -uo pipefail
build_dir=${1:?usage: ci/unit_shards.sh BUILD_DIR [GTEST_FILTER]}
filter=${2:-*}
[[ -x "$build_dir/tests/framegate_tests" ]] || {
  echo "unit_shards: error: $build_dir/tests/framegate_tests is not built" >&2
  exit 1
}
t0=$SECONDS
# One shard per core: nproc without the OpenMP limits it honours (the LibTorch 2.6 chroot
# sets OMP_NUM_THREADS=1 for each test process, which made nproc say 1).
shards=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
pids=()
for ((i = 0; i < shards; ++i)); do
  # The working directory is CTest's for these tests (gtest_discover_tests: build/tests).
  (cd "$build_dir/tests" && GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i \
    timeout "${SHARD_TIMEOUT_SECONDS:-1800}" ./framegate_tests --gtest_filter="$filter" \
    >"../shard-$i.log" 2>&1) &
  pids+=($!)
done
failed=0
for ((i = 0; i < shards; ++i)); do
  if ! wait "${pids[$i]}"; then
    echo "unit_shards: shard $i FAILED ($build_dir/shard-$i.log):"
    grep -E "^\[  FAILED  \]|ERROR: AddressSanitizer|runtime error|SUMMARY" "$build_dir/shard-$i.log" | head -20
    tail -n 20 "$build_dir/shard-$i.log"
    failed=1
  fi
  grep -E "^\[  PASSED  \]" "$build_dir/shard-$i.log" | sed "s/^/unit_shards: shard $i: /"
done
echo "unit_shards: $shards shards took $((SECONDS - t0)) s"
exit "$failed"
