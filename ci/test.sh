#!/usr/bin/env bash
# Fresh Debian 12 machine -> installs what is needed, builds, and runs every test stage:
#   format       every .cc/.h formatted as .clang-format says (ci/format_check.sh)
#   ctest        every CTest test of build/ (unit as gtest shards, python, matrix, layers)
#   sanitizers   the unit tests under ASan + UBSan (ci/sanitizers.sh, build-asan/)
#   fuzz         each libFuzzer target for FRAMEGATE_FUZZ_SECONDS, default 30 (ci/fuzz.sh)
#   libtorch2    build and ctest against LibTorch 2.6 in a Debian 13 chroot (ci/libtorch2.sh;
#                FRAMEGATE_LIBTORCH2=0 skips it)
# Every stage runs even when an earlier one failed; the end prints one line per stage
# (ok/FAILED and its seconds) and the script exits 1 if any stage failed.
# FRAMEGATE_HARDENING=0 skips the sanitizer and fuzz stages (about 15 minutes more on a
# 2-core machine; the fuzzers' regression inputs still run with the unit tests).
set -uo pipefail
cd "$(dirname "$0")/.."

summary=()
failed=0
# stage NAME COMMAND...: runs COMMAND, records its outcome and duration.
stage() {
  local name=$1
  shift
  local t0=$SECONDS
  echo "==> test.sh: stage $name: $*"
  if "$@"; then
    summary+=("test.sh: $name ok ($((SECONDS - t0)) s)")
  else
    summary+=("test.sh: $name FAILED, exit $? ($((SECONDS - t0)) s)")
    failed=1
  fi
}

stage install bash ci/install-deps.sh --with-extras
# The libtorch2 stage's chroot (debootstrap and Debian's archive, mostly waiting on the
# network and the disk) is made beside the format, build and ctest stages; the stage waits
# for it, and makes it itself if this failed.
prepare_pid=
prepare_log=${TMPDIR:-/tmp}/framegate-libtorch2-prepare.$$.log
if [[ "${FRAMEGATE_LIBTORCH2:-1}" != 0 ]]; then
  bash ci/libtorch2.sh --prepare-only >"$prepare_log" 2>&1 &
  prepare_pid=$!
fi
libtorch2_stage() {
  if [[ -n $prepare_pid ]]; then
    wait "$prepare_pid" || echo "test.sh: preparing the chroot failed; the stage tries again"
    sed 's/^/prepare: /' "$prepare_log"
    rm -f "$prepare_log"
  fi
  bash ci/libtorch2.sh
}
stage format bash ci/format_check.sh
stage build bash ci/build.sh
# Every CTest test of build/, the unit tests as gtest shards (ci/unit_shards.sh: one
# process per test spent most of their time starting LibTorch).
host_tests() {
  local rc=0
  ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 1200 -LE unit || rc=1
  bash ci/unit_shards.sh build || rc=1
  return "$rc"
}
stage ctest host_tests
stage cuda-compile bash ci/cuda_compile_check.sh
# LibTorch 2.6 in a Debian 13 chroot (ci/libtorch2.sh; root, and Debian's archive the
# first time: docs/build.md gives its times). FRAMEGATE_LIBTORCH2=0 skips it.
if [[ "${FRAMEGATE_LIBTORCH2:-1}" != 0 ]]; then
  stage libtorch2 libtorch2_stage
fi
if [[ "${FRAMEGATE_HARDENING:-1}" != 0 ]]; then
  stage sanitizers bash ci/sanitizers.sh
  stage fuzz bash ci/fuzz.sh "${FRAMEGATE_FUZZ_SECONDS:-30}"
fi

echo
printf '%s\n' "${summary[@]}"
echo "test.sh: total $SECONDS s"
exit "$failed"
