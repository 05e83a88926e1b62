#!/usr/bin/env bash
# Fresh Debian 12 machine -> installs what is needed, builds, and runs the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/install-deps.sh
bash ci/build.sh
./build/harness/framegate info
./build/harness/framegate generate --size tiny --seed 0 --out framegate-results/tiny-seed0
