#include "harness/build_info.h"

#include <sched.h>
#include <sys/utsname.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <torch/version.h>  // header only: the version macros
#include <nlohmann/json.hpp>

namespace framegate {

int UsableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return CPU_COUNT(&set);
}

CpuInfo DetectCpu() {
  CpuInfo info;
  info.logical_cores = UsableCores();
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

BuildInfo StaticBuildInfo() {
  BuildInfo info;
  info.framegate_version = FRAMEGATE_VERSION_STRING;
  info.git_sha = FRAMEGATE_GIT_SHA;
#if defined(__clang__)
  info.compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
  info.compiler = "gcc " __VERSION__;
#endif
  info.libtorch_version = TORCH_VERSION;
  return info;
}

std::string RunFingerprintJson(const BuildInfo& build, const CpuInfo& cpu) {
  std::string isa;
  for (const std::string& f : cpu.features) isa += (isa.empty() ? "" : " ") + f;
  utsname uts{};
  const std::string os = uname(&uts) == 0 ? std::string(uts.sysname) + " " + uts.release : "";
  const std::map<std::string, std::string> fields = {{"build_flags", FRAMEGATE_BUILD_FLAGS},
                                                     {"compiler", build.compiler},
                                                     {"cpu_isa", isa},
                                                     {"cpu_model", cpu.model},
                                                     {"framegate_release", FRAMEGATE_VERSION_STRING},
                                                     {"os", os}};
  return nlohmann::json(fields).dump();
}

}  // namespace framegate
