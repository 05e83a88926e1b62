#pragma once

// Stand-in for the header a CUDA build of LibTorch generates from
// c10/cuda/impl/cuda_cmake_macros.h.in. Debian's libtorch-dev ships c10/cuda/*.h but,
// being a CPU build, not this generated file, which c10/cuda/CUDAMacros.h includes.
// Used only by ci/cuda_compile_check.sh (compile-only check of the CUDA sources); a
// real CUDA LibTorch brings its own copy and this folder is then not on the path.
// Content as LibTorch 1.13 generates it for a shared-library build (the 2.x template
// adds TORCH_CUDA_VERSION_* macros, which framegate does not read).

#define C10_CUDA_BUILD_SHARED_LIBS
