#!/usr/bin/env bash
# Compiles (does not link, does not run) framegate's CUDA-only sources against LibTorch's
# CUDA headers and the CUDA toolkit's, so that the GPU code path is checked on machines
# without a GPU or a CUDA LibTorch. One line per file; exit 0 all compiled (or no CUDA
# toolkit: skipped), 1 a file failed (its errors and the command that reproduces them
# follow its line), 2 harness error (no compiler, no LibTorch CUDA headers).
#
# Checked: every .cc under a cuda/ folder (harness/cuda, matrix/cuda, pipelines/cuda, ...)
# and every .cc with an `#if FRAMEGATE_WITH_CUDA` section, with FRAMEGATE_WITH_CUDA=1.
# Environment: CUDA_HOME (default /usr/local/cuda), TORCH_INCLUDE (LibTorch's include
# folder, default /usr/include: Debian's libtorch-dev), CXX (default g++).
# Debian's LibTorch is a CPU build and lacks one generated header that c10/cuda needs;
# cmake/cuda_shim/ supplies it when it is missing.
set -uo pipefail
cd "$(dirname "$0")/.."

cuda_home=${CUDA_HOME:-/usr/local/cuda}
torch_include=${TORCH_INCLUDE:-/usr/include}
cxx=${CXX:-g++}

if [[ ! -f "$cuda_home/include/cuda_runtime_api.h" ]]; then
  echo "cuda-compile: skipped: no CUDA toolkit at $cuda_home"
  exit 0
fi
if ! command -v "$cxx" >/dev/null; then
  echo "cuda-compile: harness error: no C++ compiler '$cxx'" >&2
  exit 2
fi
if [[ ! -f "$torch_include/ATen/cuda/CUDAContext.h" ]]; then
  echo "cuda-compile: harness error: no LibTorch CUDA headers under $torch_include" \
       "(ATen/cuda/CUDAContext.h; set TORCH_INCLUDE)" >&2
  exit 2
fi

includes=(-I. -isystem "$torch_include/torch/csrc/api/include" -isystem "$cuda_home/include")
[[ "$torch_include" != /usr/include ]] && includes+=(-isystem "$torch_include")
if [[ ! -f "$torch_include/c10/cuda/impl/cuda_cmake_macros.h" ]]; then
  includes+=(-isystem cmake/cuda_shim)
fi
# The definitions LibTorch's CMake package gives its users (Caffe2Targets.cmake,
# TORCH_CXX_FLAGS), and framegate's own switch for its CUDA sections.
defines=(-D_GLIBCXX_USE_CXX11_ABI=1 -DUSE_DISTRIBUTED -DUSE_C10D_GLOO -DUSE_RPC
         -DUSE_TENSORPIPE -DFRAMEGATE_WITH_CUDA=1)

mapfile -t sources < <(
  { find harness matrix pipelines runners cli reports -path '*/cuda/*.cc' -type f
    grep -rl --include='*.cc' '^#if FRAMEGATE_WITH_CUDA' harness matrix pipelines runners \
      cli reports
  } 2>/dev/null | sort -u)
if [[ ${#sources[@]} -eq 0 ]]; then
  echo "cuda-compile: harness error: no CUDA sources found" >&2
  exit 2
fi

# Seconds since `start_us` (microseconds from EPOCHREALTIME), one decimal.
elapsed() {
  local us=$(( ${EPOCHREALTIME/./} - $1 ))
  printf '%d.%d' $((us / 1000000)) $((us % 1000000 / 100000))
}

failed=0
t_all=${EPOCHREALTIME/./}
for src in "${sources[@]}"; do
  cmd=("$cxx" -std=c++17 -fsyntax-only -Wall -Wextra -Werror "${includes[@]}" "${defines[@]}"
       "$src")
  t0=${EPOCHREALTIME/./}
  if out=$("${cmd[@]}" 2>&1); then
    echo "cuda-compile: ok      $src ($(elapsed "$t0") s)"
  else
    failed=1
    printf 'cuda-compile: FAILED  %s\n%s\n' "$src" "$out"
    echo "cuda-compile: reproduce (from the repository root): ${cmd[*]}"
  fi
done
verdict=$([[ $failed == 0 ]] && echo "all compiled" || echo "FAILED")
echo "cuda-compile: ${#sources[@]} files, $verdict, $(elapsed "$t_all") s" \
     "(compile only: not linked, not run on a GPU)"
exit "$failed"
