#!/usr/bin/env bash
# Fresh Debian 12 machine -> installs what is needed, builds, and runs every test (CTest).
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/install-deps.sh --with-extras
bash ci/build.sh
cd build
ctest --output-on-failure -j "$(nproc)" --timeout 1200
# Sanitizers (unit tests under ASan + UBSan, build-asan/) and fuzzing (each libFuzzer
# target for FRAMEGATE_FUZZ_SECONDS, default 60, build-fuzz/): docs/fuzzing.md. About 30
# minutes more on this 2-core machine; FRAMEGATE_HARDENING=0 skips both (the fuzzers'
# regression inputs still run with the unit tests above).
cd ..
if [[ "${FRAMEGATE_HARDENING:-1}" != 0 ]]; then
  bash ci/sanitizers.sh
  bash ci/fuzz.sh "${FRAMEGATE_FUZZ_SECONDS:-60}"
fi
