#!/usr/bin/env bash
# CI stage libtorch2: builds framegate against Debian 13 (trixie)'s LibTorch 2.6 in a
# chroot, runs its CTest tests there (less those labelled torch_independent,
# orchestration or command_interface: tests/CMakeLists.txt), and the compile-only CUDA
# check against LibTorch 2.6's headers. Needs root (mount, chroot) and debootstrap
# (installed when missing).
#
# Kept between runs, outside the clone, under FRAMEGATE_TRIXIE_CACHE (default
# /var/cache/framegate):
#   trixie/         the chroot (debootstrap --variant=minbase + the packages of
#                   `ci/install-deps.sh --print-packages` that trixie has: the project's
#                   dependencies, not the extras, whose tools' tests skip there); its
#                   .framegate-key is the hash of that list: when the list changes, the
#                   chroot is made again
#   trixie-ccache/  ccache's directory, bind-mounted into the chroot (ccache checks the
#                   compiler and headers itself, so it survives a new chroot)
#   lock            one run at a time (flock)
# The clone is bind-mounted read-only at /src; the build tree is the chroot's
# /var/tmp/framegate-build, made afresh each run (ccache makes that cheap). Mounts are
# undone on every exit, a failed step included; a run killed outright leaves them, and
# the next run removes them first.
#
# Options (for working in the chroot by hand; CI passes --prepare-only only, see below):
#   --keep-build   build incrementally in the existing build tree instead of a fresh one
#   --build-only   stop after the build (no ctest, no cuda-compile)
#   --prepare-only make (or check) the chroot and stop: ci/test.sh runs it beside the
#                  host's build, so that the stage itself starts at its build
#   --exec CMD...  no build: mount, run CMD in the chroot (cwd /src, under nice, same
#                  environment as the steps), unmount; exit status is CMD's
#
# Environment: FRAMEGATE_TRIXIE_CACHE, FRAMEGATE_TRIXIE_MIRROR (default
# http://deb.debian.org/debian), FRAMEGATE_LIBTORCH2_JOBS (default nproc),
# FRAMEGATE_LIBTORCH2_NICE (default 19: the stage uses idle CPU only), CUDA_HOME (default
# /usr/local/cuda, bind-mounted read-only when present), FRAMEGATE_LIBTORCH2_BUILD_DIR
# (default /var/tmp/framegate-build, a path inside the chroot). Each step prints its time; exit
# 0 all steps passed, 1 a step failed.
set -uo pipefail
cd "$(dirname "$0")/.."
src=$PWD

if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null && exec sudo -E bash "$0" "$@"
  echo "libtorch2: error: needs root (mount, chroot) and there is no sudo" >&2
  exit 1
fi

cache=${FRAMEGATE_TRIXIE_CACHE:-/var/cache/framegate}
root=$cache/trixie
ccache_dir=$cache/trixie-ccache
mirror=${FRAMEGATE_TRIXIE_MIRROR:-http://deb.debian.org/debian}
jobs=${FRAMEGATE_LIBTORCH2_JOBS:-$(nproc)}
nice_level=${FRAMEGATE_LIBTORCH2_NICE:-19}
cuda_home=${CUDA_HOME:-/usr/local/cuda}
build_dir=${FRAMEGATE_LIBTORCH2_BUILD_DIR:-/var/tmp/framegate-build}  # inside the chroot

keep_build=0
build_only=0
prepare_only=0
exec_cmd=()
while (($# > 0)); do
  case $1 in
    --keep-build) keep_build=1 ;;
    --build-only) build_only=1 ;;
    --prepare-only) prepare_only=1 ;;
    --exec)
      shift
      exec_cmd=("$@")
      ((${#exec_cmd[@]} > 0)) || { echo "libtorch2: error: --exec needs a command" >&2; exit 1; }
      break
      ;;
    *) echo "libtorch2: error: unknown option $1" >&2; exit 1 ;;
  esac
  shift
done

summary=()
failed=0
# step NAME COMMAND...: runs COMMAND, prints and records its outcome and seconds.
step() {
  local name=$1
  shift
  local t0=$SECONDS rc=0
  echo "==> libtorch2: $name"
  "$@" || rc=$?
  local line="libtorch2: $name $([[ $rc == 0 ]] && echo ok || echo "FAILED, exit $rc") ($((SECONDS - t0)) s)"
  echo "$line"
  summary+=("$line")
  [[ $rc == 0 ]] || failed=1
  return "$rc"
}

finish() {
  echo
  printf '%s\n' "${summary[@]}"
  exit "$failed"
}

# Every mount point at or under $1, deepest first.
mounts_under() {
  findmnt -rn -o TARGET | awk -v p="$1" '$0 == p || index($0, p "/") == 1' | sort -r
}

unmount_under() {
  local m
  while read -r m; do
    [[ -n "$m" ]] && { umount "$m" 2>/dev/null || umount -l "$m"; }
  done < <(mounts_under "$1")
}

# Removes directory $1 only when nothing is mounted under it (a bind-mounted clone or /dev
# must never be deleted through the chroot).
remove_tree() {
  unmount_under "$1"
  if [[ -n "$(mounts_under "$1")" ]]; then
    echo "libtorch2: error: still mounted under $1, not removing it" >&2
    return 1
  fi
  rm -rf "$1"
}

in_chroot() {
  chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    DEBIAN_FRONTEND=noninteractive CCACHE_DIR=/var/cache/ccache OMP_NUM_THREADS=1 \
    PYTHONDONTWRITEBYTECODE=1 nice -n "$nice_level" "$@"
}

# bind SOURCE TARGET [ro]
bind() {
  mkdir -p "$2"
  mount --bind "$1" "$2" || return 1
  [[ "${3:-}" != ro ]] || mount -o remount,bind,ro "$2"
}

mount_all() {
  mount -t proc proc "$root/proc" &&
    mount --rbind /dev "$root/dev" && mount --make-rslave "$root/dev" &&
    mount -t sysfs -o ro sysfs "$root/sys" &&
    bind "$src" "$root/src" ro &&
    bind "$ccache_dir" "$root/var/cache/ccache" || return 1
  if [[ -f "$cuda_home/include/cuda_runtime_api.h" ]]; then
    bind "$(readlink -f "$cuda_home")" "$root/usr/local/cuda" ro || return 1
  fi
  cp -L /etc/resolv.conf "$root/etc/resolv.conf"
}

make_chroot() {
  command -v debootstrap >/dev/null ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap ||
    return 1
  remove_tree "$root" && remove_tree "$root.new" || return 1
  nice -n "$nice_level" debootstrap --variant=minbase trixie "$root.new" "$mirror" >"$cache/debootstrap.log" 2>&1 || {
    tail -20 "$cache/debootstrap.log"
    unmount_under "$root.new"
    return 1
  }
  unmount_under "$root.new"
  mv "$root.new" "$root"
  printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"  # no daemons start
  chmod +x "$root/usr/sbin/policy-rc.d"
}

# Installs the packages trixie has of $packages (those it lacks are named and skipped),
# then marks the chroot with $key.
install_packages() {
  in_chroot apt-get update -qq || return 1
  local p present=() absent=()
  for p in "${packages[@]}"; do
    if in_chroot apt-cache show --no-all-versions "$p" >/dev/null 2>&1; then
      present+=("$p")
    else
      absent+=("$p")
    fi
  done
  ((${#absent[@]} == 0)) || echo "libtorch2: not in trixie, skipped: ${absent[*]}"
  in_chroot apt-get install -y -qq --no-install-recommends "${present[@]}" >"$cache/apt.log" 2>&1 || {
    tail -20 "$cache/apt.log"
    return 1
  }
  in_chroot apt-get clean
  echo "$key" >"$root/.framegate-key"
}

build() {
  [[ $keep_build == 1 ]] || rm -rf "${root:?}$build_dir"
  in_chroot ccache -M 2G >/dev/null
  in_chroot ccache -z >/dev/null  # the statistics printed below are this build's
  # The benchmarks are left out: they add compiles, not checks (the host builds them).
  # -O2 without -g (the host's RelWithDebInfo less its debug info, which took 40% of a
  # compile: 13.1 s against 7.8 s for runners/cell_runner.cc): the same code, compiled
  # for its tests' results only.
  in_chroot cmake -S /src -B "$build_dir" -G Ninja -DFRAMEGATE_BUILD_BENCHMARKS=OFF \
    -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" >"$cache/configure.log" 2>&1 || {
    cat "$cache/configure.log"
    return 1
  }
  in_chroot cmake --build "$build_dir" -j "$jobs" || return 1
  in_chroot ccache -s | grep -iE 'hits|misses' | head -3
  return 0
}

run_ctest() {
  # Less the Python tests labelled torch_independent, orchestration or command_interface
  # (tests/CMakeLists.txt): the host's ctest runs them; their code does not change with
  # LibTorch, or its pipeline runs are checked here by the other tests.
  # The unit tests run as gtest shards (ci/unit_shards.sh), not a process per test.
  local rc=0
  in_chroot ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" --timeout 1200 \
    -LE "unit|torch_independent|orchestration|command_interface" || rc=1
  in_chroot bash -c 'cd /src && exec bash ci/unit_shards.sh "$1"' unit_shards "$build_dir" || rc=1
  return "$rc"
}

cuda_compile() {
  in_chroot bash -c "cd /src && CUDA_HOME=/usr/local/cuda bash ci/cuda_compile_check.sh"
}

mkdir -p "$cache" "$ccache_dir"
exec 9>"$cache/lock"
flock 9
trap 'unmount_under "$root"; unmount_under "$root.new"' EXIT
trap 'exit 1' INT TERM
unmount_under "$root"  # left by a run that was killed outright
unmount_under "$root.new"

mapfile -t packages < <(bash ci/install-deps.sh --print-packages)
key=$(printf '%s\n' "debootstrap --variant=minbase trixie" "${packages[@]}" | sha256sum | cut -c1-16)
if [[ -f "$root/.framegate-key" && "$(cat "$root/.framegate-key")" == "$key" ]]; then
  echo "libtorch2: reusing the chroot $root (packages key $key)"
else
  step debootstrap make_chroot || finish
  step mount mount_all || finish
  step install-packages install_packages || finish
fi
[[ $prepare_only == 0 ]] || finish
[[ -n "$(mounts_under "$root/src")" ]] || step mount mount_all || finish
echo "libtorch2: $(in_chroot dpkg-query -W -f='libtorch-dev ${Version}, g++ ' libtorch-dev)$(in_chroot g++ -dumpversion)"
if ((${#exec_cmd[@]} > 0)); then
  in_chroot bash -c 'cd /src && exec "$@"' exec "${exec_cmd[@]}"
  exit $?
fi
step build build || finish
[[ $build_only == 0 ]] || finish
step ctest run_ctest
step cuda-compile cuda_compile
finish
