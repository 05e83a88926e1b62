#!/usr/bin/env bash
# Fresh Debian 12 machine -> installs what is needed, builds, and runs the main job: the
# default matrix (matrix/local.toml: every device found x the main policies, tiny size)
# into a local SQLite file, with the terminal summary, an HTML report, JUnit and JSON.
# Exit code: framegate run's (0 every cell passed, 1 a cell failed, 2 harness error).
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/install-deps.sh
bash ci/build.sh
out=framegate-results
mkdir -p "$out"
./build/bin/framegate devices
exec ./build/bin/framegate run local --db "$out/framegate.db" --artifacts "$out/artifacts" \
  --html "$out/report" --junit "$out/junit.xml" --json "$out/run.json" "$@"
