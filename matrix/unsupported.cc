#include "matrix/unsupported.h"

#include "harness/torch_version.h"
#include "matrix/device_discovery.h"
#include "pipelines/dtype_policy.h"

namespace framegate {
namespace {

// The devices found, the CPU's kernel paths left out ("cpu" stands for them) unless
// `kernel_paths`.
std::string DeviceNames(const std::vector<DeviceInfo>& found, bool kernel_paths = false) {
  std::string names;
  for (const DeviceInfo& d : found) {
    if ((d.device.rfind("cpu:", 0) == 0) != kernel_paths) continue;
    names += (names.empty() ? "" : ", ") + d.device;
  }
  return names.empty() ? "none" : names;
}

bool IsGpu(const DeviceInfo& device) { return device.device.rfind("cuda:", 0) == 0; }

// "" when `device` meets `requirement`, else why not.
std::string UnmetRequirement(const std::string& requirement, const DeviceInfo& device) {
  const bool gpu = IsGpu(device);
  const int capability = GpuCapability(device);
  const std::string on = device.device + " (" + (gpu ? "capability " + device.capability : device.name) + ")";
  if (requirement == "cuda") {
    return gpu ? "" : "requires cuda but runs on " + device.device;
  }
  if (requirement == "bf16") {
    const bool native =
        gpu ? capability >= 80 : HasCpuFeature(device, "avx512_bf16") || HasCpuFeature(device, "amx_bf16");
    return native ? ""
                  : "requires bf16: " + on + " has no native BF16 (" +
                        (gpu ? "needs capability >= 8.0" : "needs avx512_bf16 or amx_bf16") + ")";
  }
  if (requirement == "fp16") {
    return gpu && capability >= 53 ? "" : "requires fp16: " + on + " has no native FP16 compute";
  }
  if (requirement == "tf32") {
    return gpu && capability >= 80
               ? ""
               : "requires tf32: " + on + " has no TF32 (needs a GPU with capability >= 8.0)";
  }
  if (requirement == "fp8") {
    return gpu && capability >= 89
               ? ""
               : "requires fp8: " + on + " has no FP8 tensor cores (needs a GPU with capability >= 8.9)";
  }
  return "unknown requirement '" + requirement + "'";
}

}  // namespace

const std::vector<std::string>& KnownRequirements() {
  static const std::vector<std::string> names = {"cuda", "bf16", "fp16", "tf32", "fp8"};
  return names;
}

StatusOr<std::string> UnsupportedReason(const Cell& cell, const std::vector<DeviceInfo>& found) {
  // First: a cell that names what cannot be resolved is an error whatever its device.
  const StatusOr<DtypePolicy> policy = FindPolicyIn(cell.policy, cell.policy_file);
  if (!policy.ok()) return policy.status();
  const DeviceInfo* device = FindDevice(found, cell.device);
  const std::string kernel_path = CpuKernelPathOf(cell.device);
  if (!device && !kernel_path.empty()) {
    return "device " + cell.device + ": this CPU lacks ATen's " + kernel_path + " kernel path (needs " +
           CpuKernelPathFlags(kernel_path) + "; kernel paths found: " + DeviceNames(found, true) + ")";
  }
  if (!device) {
    return "device " + cell.device + " not found on this host (found: " + DeviceNames(found) + ")";
  }
  for (const std::string& requirement : cell.requirements) {
    const std::string unmet = UnmetRequirement(requirement, *device);
    if (!unmet.empty()) return unmet;
  }
  if (!kCpuHasFp16Compute && !IsGpu(*device) && policy->compute == c10::kHalf) {
    return "policy " + cell.policy +
           " computes in fp16: LibTorch " TORCH_VERSION
           " has no FP16 convolution/matmul on the CPU (fp16-emulated is the CPU's stand-in)";
  }
  return std::string();
}

}  // namespace framegate
