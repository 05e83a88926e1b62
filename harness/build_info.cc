#include "harness/build_info.h"

#include <sched.h>

#include <fstream>
#include <set>
#include <sstream>

#include <ATen/Context.h>
#include <ATen/Functions.h>
#include <ATen/Parallel.h>
#include <torch/version.h>

namespace framegate {
namespace {

int AffinityCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return CPU_COUNT(&set);
}

// The path of the first mapped library whose file name contains one of `needles`.
std::string MappedLibrary(const std::vector<std::string>& needles) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    const std::string file = path.substr(path.rfind('/') + 1);
    for (const std::string& needle : needles) {
      if (file.find(needle) != std::string::npos) return path;
    }
  }
  return "";
}

}  // namespace

int ConfigureThreads(int requested) {
  const int threads = requested > 0 ? requested : AffinityCores();
  at::set_num_threads(threads);
  return at::get_num_threads();
}

CpuInfo DetectCpu() {
  CpuInfo info;
  info.logical_cores = AffinityCores();
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  std::set<std::string> flags;
  while (std::getline(cpuinfo, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, line.find_first_of(" \t"));
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model" && line.rfind("model name", 0) == 0 && info.model.empty()) info.model = value;
    if (key == "flags" && flags.empty()) {
      std::istringstream words(value);
      for (std::string w; words >> w;) flags.insert(w);
    }
  }
  for (const char* f : {"avx2", "f16c", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16"}) {
    if (flags.count(f)) info.features.push_back(f);
  }
  return info;
}

BuildInfo CollectBuildInfo() {
  BuildInfo info;
  info.framegate_version = FRAMEGATE_VERSION_STRING;
  info.git_sha = FRAMEGATE_GIT_SHA;
#if defined(__clang__)
  info.compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
  info.compiler = "gcc " __VERSION__;
#endif
  info.libtorch_version = TORCH_VERSION;
  info.libtorch_has_cuda = at::hasCUDA();
  at::mm(at::ones({64, 64}), at::ones({64, 64}));  // loads the BLAS library
  info.blas = MappedLibrary({"openblas", "libblas", "mkl_rt", "libmkl", "blis"});
  if (info.blas.empty()) info.blas = "unknown (none mapped)";
  info.threads = at::get_num_threads();
  return info;
}

}  // namespace framegate
