// The parts of build_info.h that ask LibTorch (framegate_harness_torch).
#include <fstream>

#include <ATen/Context.h>
#include <ATen/Functions.h>
#include <ATen/Parallel.h>

#include "harness/build_info.h"

namespace framegate {
namespace {

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
  const int threads = requested > 0 ? requested : UsableCores();
  at::set_num_threads(threads);
  return at::get_num_threads();
}

BuildInfo CollectBuildInfo() {
  BuildInfo info = StaticBuildInfo();
  info.libtorch_has_cuda = at::hasCUDA();
  at::mm(at::ones({64, 64}), at::ones({64, 64}));  // loads the BLAS library
  info.blas = MappedLibrary({"openblas", "libblas", "mkl_rt", "libmkl", "blis"});
  if (info.blas.empty()) info.blas = "unknown (none mapped)";
  info.threads = at::get_num_threads();
  return info;
}

}  // namespace framegate
