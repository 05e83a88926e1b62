#!/usr/bin/env bash
# Installs everything framegate needs on Debian 12. Idempotent: a second run installs nothing.
# Usage: ci/install-deps.sh [--with-extras] [--print-packages]
#   --with-extras     also slurm, munge, chromium, xmllint, clang, clang-format, compare.py
#   --print-packages  prints the package names, one a line, and installs nothing (the
#                     one list: ci/libtorch2.sh installs the same names in its chroot)
set -euo pipefail

with_extras=0
print_packages=0
for arg in "$@"; do
  case "$arg" in
    --with-extras) with_extras=1 ;;
    --print-packages) print_packages=1 ;;
    *) echo "install-deps: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libtorch-dev libopenblas0-openmp
  libsqlite3-dev sqlite3 libgtest-dev libgmock-dev libbenchmark-dev
  libtomlplusplus-dev libcli11-dev nlohmann-json3-dev libpng-dev libssl-dev
  python3 python3-numpy python3-pytest python3-torch python3-skimage
)
if ((with_extras)); then
  packages+=(slurm-wlm munge chromium libxml2-utils clang libclang-rt-14-dev clang-format)
  packages+=(libbenchmark-tools)  # Google Benchmark's compare.py, read by the report tests
fi
if ((print_packages)); then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
