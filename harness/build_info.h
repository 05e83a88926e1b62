// Facts about this build and host that every result records: versions, the BLAS library
// LibTorch actually loaded, the thread count, and the CPU's ISA features that matter for
// low-precision kernels. build_info.cc (framegate_harness) needs no LibTorch;
// ConfigureThreads and CollectBuildInfo are build_info_torch.cc (framegate_harness_torch).
#pragma once

#include <string>
#include <vector>

namespace framegate {

struct CpuInfo {
  std::string model;                  // "/proc/cpuinfo model name"
  int logical_cores = 0;              // cores this process may run on (affinity)
  std::vector<std::string> features;  // of interest: avx2, avx512f, avx512_bf16, amx_bf16, f16c
};

struct BuildInfo {
  std::string framegate_version;
  std::string git_sha;
  std::string compiler;
  std::string libtorch_version;
  bool libtorch_has_cuda = false;
  std::string blas;  // resolved path of the BLAS library mapped into the process
  int threads = 0;   // LibTorch intra-op threads
};

// Sets LibTorch's intra-op thread count (and OpenMP's, which OpenBLAS-openmp follows).
// requested <= 0 means every core this process may use. Returns the count now in effect.
int ConfigureThreads(int requested);

CpuInfo DetectCpu();
// The cores this process may run on (its affinity mask); at least 1.
int UsableCores();
// What is known without loading LibTorch: versions (LibTorch's from its headers), commit,
// compiler. blas, threads and libtorch_has_cuda are left empty.
BuildInfo StaticBuildInfo();
// The run's environment fingerprint beyond the store's run columns (host, LibTorch, CUDA,
// BLAS) and devices (model, driver): a JSON object of strings, keys sorted:
// framegate_release (the version without the commit: a commit is a code change, not an
// environment change), compiler, build_flags (build type and CXX flags), cpu_model,
// cpu_isa (the features of CpuInfo), os (kernel release). `regressions` reports a change
// that begins where any of these changes as "environment".
std::string RunFingerprintJson(const BuildInfo& build, const CpuInfo& cpu);
// StaticBuildInfo, completed from LibTorch: runs a small matmul first so that the BLAS
// library is loaded, then reports it.
BuildInfo CollectBuildInfo();

}  // namespace framegate
