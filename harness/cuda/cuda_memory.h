// Peak GPU memory of a region of work, as LibTorch's CUDA caching allocator counts it.
// CUDA build only: the .cc is compiled when LibTorch has CUDA (FRAMEGATE_HAS_CUDA) and,
// without linking, by ci/cuda_compile_check.sh. This header includes no CUDA header.
//
// What is counted: tensors LibTorch allocates through its caching allocator (all of a
// model's activations, weights and cuBLAS workspaces). Not counted: the CUDA context
// itself, cuDNN/cuBLAS handles, and memory other libraries take with cudaMalloc.
// Errors: c10::Error (classified at the pipeline boundary). The allocator's counters are
// per device and shared by every thread of the process.
#pragma once

#include <cstdint>

#include <c10/core/Device.h>

namespace framegate {
namespace cuda {

struct CudaMemoryPeak {
  int64_t allocated_bytes = 0;  // most bytes held by live tensors at once
  int64_t reserved_bytes = 0;   // most bytes the allocator held from the driver at once
};

// Starts a new peak window on CUDA device `device`: its peak counters restart from the
// current values. Precondition: device.is_cuda() (c10::Error otherwise).
void ResetPeakMemory(c10::Device device);

// The peaks on `device` since the last ResetPeakMemory (or since the process started).
// Precondition: device.is_cuda() (c10::Error otherwise).
CudaMemoryPeak ReadPeakMemory(c10::Device device);

}  // namespace cuda
}  // namespace framegate
