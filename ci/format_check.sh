#!/usr/bin/env bash
# Fails when a tracked .cc/.h file is not formatted as .clang-format says (Google base,
# 110 columns). Prints each file that differs; fix with:
#   git ls-files '*.cc' '*.h' | xargs clang-format -i
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
  echo "format_check: clang-format is not installed (ci/install-deps.sh --with-extras)" >&2
  exit 1
fi
mapfile -t files < <(git ls-files '*.cc' '*.h' | grep -v '^cmake/cuda_shim/')
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]})); then
  printf 'format_check: not formatted: %s\n' "${bad[@]}" >&2
  echo "format_check: ${#bad[@]} of ${#files[@]} files differ from .clang-format ($(clang-format --version))" >&2
  exit 1
fi
echo "format_check: ${#files[@]} files formatted ($(clang-format --version))"
