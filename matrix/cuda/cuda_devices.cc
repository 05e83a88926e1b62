#include "matrix/cuda/cuda_devices.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/util/Exception.h>
#include <cuda_runtime_api.h>

namespace framegate {
namespace cuda {
namespace {

// CUDA's version numbers are 1000 * major + 10 * minor: 12040 -> "12.4".
std::string VersionString(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

}  // namespace

std::string CudaDeviceProperties::Capability() const {
  return std::to_string(capability_major) + "." + std::to_string(capability_minor);
}

int CudaDeviceCount() {
  return static_cast<int>(c10::cuda::device_count());  // noexcept; 0 on any driver error
}

std::optional<CudaDeviceProperties> ReadCudaDeviceProperties(int index) {
  if (index < 0 || index >= CudaDeviceCount()) return std::nullopt;
  try {
    const cudaDeviceProp* prop = at::cuda::getDeviceProperties(index);
    if (prop == nullptr) return std::nullopt;
    CudaDeviceProperties out;
    out.name = prop->name;
    out.capability_major = prop->major;
    out.capability_minor = prop->minor;
    out.total_memory_bytes = static_cast<int64_t>(prop->totalGlobalMem);
    out.multiprocessor_count = prop->multiProcessorCount;
    return out;
  } catch (const c10::Error&) {
    return std::nullopt;
  }
}

CudaVersions ReadCudaVersions() {
  CudaVersions versions;
  int driver = 0;
  int runtime = 0;
  if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0) {
    versions.driver = VersionString(driver);
  }
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess && runtime > 0) {
    versions.runtime = VersionString(runtime);
  }
  return versions;
}

}  // namespace cuda
}  // namespace framegate
