#include "harness/cuda/cuda_timing.h"

#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Exception.h>
#include <cuda_runtime_api.h>

namespace framegate {
namespace cuda {

void SynchronizeDevice(c10::Device device) {
  TORCH_CHECK(device.is_cuda(), "SynchronizeDevice: not a CUDA device: ", device.str());
  c10::cuda::CUDAGuard guard(device);
  c10::cuda::device_synchronize();
}

double TimeGpuRegionMs(c10::Device device, const std::function<void()>& region) {
  TORCH_CHECK(device.is_cuda(), "TimeGpuRegionMs: not a CUDA device: ", device.str());
  c10::cuda::CUDAGuard guard(device);
  // ATen's CUDAEvent defaults to cudaEventDisableTiming; timing needs cudaEventDefault.
  at::cuda::CUDAEvent start(cudaEventDefault);
  at::cuda::CUDAEvent end(cudaEventDefault);
  start.record(at::cuda::getCurrentCUDAStream(device.index()));
  region();
  end.record(at::cuda::getCurrentCUDAStream(device.index()));
  end.synchronize();
  return static_cast<double>(start.elapsed_time(end));
}

}  // namespace cuda
}  // namespace framegate
