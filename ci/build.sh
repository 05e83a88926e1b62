#!/usr/bin/env bash
# Configures and builds framegate into ./build (Ninja, ccache, precompiled LibTorch headers).
# Extra arguments go to cmake's configure step, e.g. -DCMAKE_PREFIX_PATH=/path/to/libtorch.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja "$@"
cmake --build build -j "$(nproc)"
