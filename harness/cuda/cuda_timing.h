// GPU time of a region of work, measured on the GPU with CUDA events, and waiting for a
// GPU. CUDA build only: the .cc is compiled when LibTorch has CUDA (FRAMEGATE_HAS_CUDA)
// and, without linking, by ci/cuda_compile_check.sh. This header includes no CUDA
// header, so CPU code may include it.
//
// Errors: CUDA failures surface as c10::Error, like any ATen call on the device, and are
// classified at the pipeline boundary (harness/error_class.h); so are the region's own.
// Not thread-safe against another thread changing the current device or stream.
#pragma once

#include <functional>

#include <c10/core/Device.h>

namespace framegate {
namespace cuda {

// Blocks until all work queued on CUDA device `device` (every stream) has finished.
// Precondition: device.is_cuda() (c10::Error otherwise). CPU devices go through
// harness/device_sync.h, whose SynchronizeDevice is the one callers use.
void SynchronizeDevice(c10::Device device);

// Runs `region` (which queues GPU work on `device`'s current stream) between two CUDA
// events and returns the GPU milliseconds between them, after waiting for the second.
// It measures the GPU's time for that stream's work, not the host's launch overhead;
// work `region` puts on other streams is not covered. Resolution about 0.5 us.
// Precondition: device.is_cuda() (c10::Error otherwise).
double TimeGpuRegionMs(c10::Device device, const std::function<void()>& region);

}  // namespace cuda
}  // namespace framegate
