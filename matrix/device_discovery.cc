#include "matrix/device_discovery.h"

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

int GpuCapability(const DeviceInfo& gpu) {
  if (gpu.device.rfind("cuda:", 0) != 0) return 0;
  int major = 0, minor = 0;
  if (std::sscanf(gpu.capability.c_str(), "%d.%d", &major, &minor) < 1) return 0;
  return major * 10 + minor;
}

}  // namespace framegate
