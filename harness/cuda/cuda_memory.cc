#include "harness/cuda/cuda_memory.h"

#include <cstddef>

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/util/Exception.h>
#include <torch/version.h>

namespace framegate {
namespace cuda {
namespace {

// StatType (which pool a counter covers) moved out of the CUDA allocator in LibTorch 2.5,
// into the device-generic c10::CachingDeviceAllocator (c10/core/CachingDeviceAllocator.h,
// included by CUDACachingAllocator.h; from 2.9 it is declared in c10::CachingAllocator and
// still reachable under this name).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5)
using StatType = c10::CachingDeviceAllocator::StatType;
#else
using StatType = c10::cuda::CUDACachingAllocator::StatType;
#endif

// getDeviceStats/resetPeakStats take an int up to 2.2 and a c10::DeviceIndex from 2.3.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
using AllocatorDeviceIndex = c10::DeviceIndex;
#else
using AllocatorDeviceIndex = int;
#endif

constexpr size_t kAllPools = static_cast<size_t>(StatType::AGGREGATE);

// The allocator's index for `device`; "cuda" without an index means the current device.
AllocatorDeviceIndex AllocatorIndex(c10::Device device, const char* caller) {
  TORCH_CHECK(device.is_cuda(), caller, ": not a CUDA device: ", device.str());
  const c10::DeviceIndex index = device.has_index() ? device.index() : c10::cuda::current_device();
  return static_cast<AllocatorDeviceIndex>(index);
}

}  // namespace

void ResetPeakMemory(c10::Device device) {
  c10::cuda::CUDACachingAllocator::resetPeakStats(AllocatorIndex(device, "ResetPeakMemory"));
}

CudaMemoryPeak ReadPeakMemory(c10::Device device) {
  // DeviceStats moved namespace with StatType (2.5); `auto` keeps this line version-free.
  const auto stats =
      c10::cuda::CUDACachingAllocator::getDeviceStats(AllocatorIndex(device, "ReadPeakMemory"));
  CudaMemoryPeak peak;
  peak.allocated_bytes = stats.allocated_bytes[kAllPools].peak;
  peak.reserved_bytes = stats.reserved_bytes[kAllPools].peak;
  return peak;
}

}  // namespace cuda
}  // namespace framegate
