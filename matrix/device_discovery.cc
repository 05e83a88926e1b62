#include "matrix/device_discovery.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "harness/build_info.h"

#if FRAMEGATE_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace framegate {
namespace {

// MemTotal of /proc/meminfo in bytes; 0 when unreadable.
int64_t TotalMemoryBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  while (in >> key) {
    if (key == "MemTotal:" && in >> kb) return kb * 1024;
    in.ignore(1 << 20, '\n');
  }
  return 0;
}

// The words of the first "flags" line of /proc/cpuinfo; empty when unreadable.
std::vector<std::string> ProcCpuFlags() {
  std::ifstream in("/proc/cpuinfo");
  std::vector<std::string> flags;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string w; words >> w;) flags.push_back(w);
    break;
  }
  return flags;
}

// One DeviceInfo per kernel path, a copy of `cpu` under the name "cpu:<path>".
void AppendKernelPaths(const DeviceInfo& cpu, HostDevices* host) {
  for (const std::string& path : CpuKernelPaths(ProcCpuFlags())) {
    DeviceInfo d = cpu;
    d.device = "cpu:" + path;
    host->devices.push_back(d);
  }
}

#if FRAMEGATE_WITH_CUDA
std::string VersionString(int version) {  // CUDA's 12010 -> "12.1"
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}
// One DeviceInfo per visible GPU; nothing when the runtime reports none or fails.
void AppendGpus(HostDevices* host) {
  int count = 0, driver = 0, runtime = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) host->cuda_runtime = VersionString(runtime);
  if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    DeviceInfo gpu;
    gpu.device = "cuda:" + std::to_string(i);
    gpu.name = prop.name;
    gpu.capability = std::to_string(prop.major) + "." + std::to_string(prop.minor);
    gpu.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
    gpu.driver = driver > 0 ? VersionString(driver) : "";
    host->devices.push_back(gpu);
  }
}
#endif

}  // namespace

HostDevices DiscoverHost() {
  HostDevices host;
  const CpuInfo cpu_info = DetectCpu();
  DeviceInfo cpu;
  cpu.device = "cpu";
  cpu.name = cpu_info.model;
  for (const std::string& f : cpu_info.features) cpu.capability += (cpu.capability.empty() ? "" : " ") + f;
  cpu.memory_bytes = TotalMemoryBytes();
  host.devices.push_back(cpu);
  AppendKernelPaths(cpu, &host);
  host.cpu_cores = cpu_info.logical_cores;
  host.cpu_features = cpu_info.features;
#if FRAMEGATE_WITH_CUDA
  host.built_with_cuda = true;
  AppendGpus(&host);
#endif
  return host;
}

std::vector<DeviceInfo> DiscoverDevices() { return DiscoverHost().devices; }

const DeviceInfo* FindDevice(const std::vector<DeviceInfo>& found, const std::string& device) {
  for (const DeviceInfo& d : found) {
    if (d.device == device) return &d;
  }
  return nullptr;
}

bool HasCpuFeature(const DeviceInfo& cpu, const std::string& feature) {
  std::istringstream words(cpu.capability);
  for (std::string w; words >> w;) {
    if (w == feature) return true;
  }
  return false;
}

const std::vector<std::string>& KnownCpuKernelPaths() {
  static const std::vector<std::string> paths = {"avx512", "avx2", "default"};
  return paths;
}

std::string CpuKernelPathFlags(const std::string& path) {
  if (path == "avx512") return "avx512f avx512bw avx512vl avx512dq";
  if (path == "avx2") return "avx2 fma";
  return "";
}

std::vector<std::string> CpuKernelPaths(const std::vector<std::string>& cpu_flags) {
  std::vector<std::string> paths;
  for (const std::string& path : KnownCpuKernelPaths()) {
    std::istringstream needed(CpuKernelPathFlags(path));
    bool has_all = true;
    for (std::string f; needed >> f;)
      has_all = has_all && std::find(cpu_flags.begin(), cpu_flags.end(), f) != cpu_flags.end();
    if (has_all) paths.push_back(path);
  }
  return paths;
}

std::string CpuKernelPathOf(const std::string& device) {
  if (device.rfind("cpu:", 0) != 0) return "";
  const std::string path = device.substr(4);
  const std::vector<std::string>& known = KnownCpuKernelPaths();
  return std::find(known.begin(), known.end(), path) != known.end() ? path : "";
}

int GpuCapability(const DeviceInfo& gpu) {
  if (gpu.device.rfind("cuda:", 0) != 0) return 0;
  int major = 0, minor = 0;
  if (std::sscanf(gpu.capability.c_str(), "%d.%d", &major, &minor) < 1) return 0;
  return major * 10 + minor;
}

}  // namespace framegate
