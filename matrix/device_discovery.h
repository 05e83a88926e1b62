// Device discovery: what this host can run cells on, without running any. The CPU (model,
// cores, the ISA features that matter for low precision, memory) and, in a build with
// CUDA (FRAMEGATE_WITH_CUDA), each GPU (name, compute capability, memory, driver).
// Devices are plain DeviceInfo values (harness/run_record.h), so a test can describe any
// host by writing the values itself.
#pragma once

#include <string>
#include <vector>

#include "harness/run_record.h"

namespace framegate {

struct HostDevices {
  // "cpu" first, then its kernel paths ("cpu:avx512", "cpu:avx2", "cpu:default"), then
  // "cuda:0", "cuda:1", ...
  std::vector<DeviceInfo> devices;
  int cpu_cores = 0;                      // cores this process may run on
  std::vector<std::string> cpu_features;  // avx2, avx512f, avx512_bf16, amx_bf16, ...
  bool built_with_cuda = false;           // this binary has the CUDA code path
  std::string cuda_runtime;               // "12.1", "" without CUDA
};

// Reads /proc/cpuinfo, /proc/meminfo and, with CUDA, the CUDA runtime. Never fails: an
// unreadable fact is left empty (0 for numbers). The CPU's DeviceInfo::capability is
// its feature list joined by spaces ("avx2 avx512f avx512_bf16"); a GPU's is "8.0".
HostDevices DiscoverHost();
// DiscoverHost().devices.
std::vector<DeviceInfo> DiscoverDevices();

// The device named `device` ("cpu", "cuda:1") among `found`, or nullptr.
const DeviceInfo* FindDevice(const std::vector<DeviceInfo>& found, const std::string& device);
// Whether a CPU feature (as /proc/cpuinfo spells it) is in the CPU's capability string.
bool HasCpuFeature(const DeviceInfo& cpu, const std::string& feature);
// ATen's CPU kernel paths (the values of ATEN_CPU_CAPABILITY), widest first: avx512,
// avx2, default. ATen reads the variable once per process and trusts it (a path the CPU
// lacks dies of SIGILL), so a "cpu:<path>" device runs in a process that has it set.
const std::vector<std::string>& KnownCpuKernelPaths();
// The kernel paths a CPU with these /proc/cpuinfo flags can run, widest first, as ATen
// requires: avx512 needs avx512f, avx512bw, avx512vl, avx512dq; avx2 needs avx2 and fma;
// default always.
std::vector<std::string> CpuKernelPaths(const std::vector<std::string>& cpu_flags);
// The flags `path` needs, spaced ("avx2 fma"); "" for default or an unknown path.
std::string CpuKernelPathFlags(const std::string& path);
// "avx2" for "cpu:avx2" (any known path); "" for every other device ("cpu", "cpu:*").
std::string CpuKernelPathOf(const std::string& device);
// A GPU's compute capability as major*10+minor ("8.6" -> 86); 0 when not a GPU or unknown.
int GpuCapability(const DeviceInfo& gpu);

}  // namespace framegate
