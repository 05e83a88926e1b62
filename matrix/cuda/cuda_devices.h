// The GPUs LibTorch sees and the CUDA driver and runtime versions, read through LibTorch
// (at::cuda::getDeviceProperties) so that they are the devices and the runtime the cells
// will run on. CUDA build only: the .cc is compiled when LibTorch has CUDA
// (FRAMEGATE_HAS_CUDA) and, without linking, by ci/cuda_compile_check.sh. This header
// includes no CUDA header.
//
// Never throws: no driver, no GPU or a failing call reads as "nothing there". Safe to
// call from any thread (LibTorch caches the properties once per device).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace framegate {
namespace cuda {

struct CudaDeviceProperties {
  std::string name;                // "NVIDIA H100 80GB HBM3"
  int capability_major = 0;        // compute capability: 9 for sm_90
  int capability_minor = 0;        //                     0 for sm_90
  int64_t total_memory_bytes = 0;  // global memory, as the driver reports it
  int multiprocessor_count = 0;    // SMs

  std::string Capability() const;  // "9.0"
};

struct CudaVersions {
  std::string driver;   // newest CUDA the installed driver supports, "13.0"; "" if no driver
  std::string runtime;  // the CUDA runtime this process uses, "12.4"; "" when unknown
};

// GPUs visible to this process (CUDA_VISIBLE_DEVICES applies); 0 without driver or GPU.
int CudaDeviceCount();

// Properties of GPU `index` (0 .. CudaDeviceCount()-1); nullopt for any other index or
// when the driver fails.
std::optional<CudaDeviceProperties> ReadCudaDeviceProperties(int index);

CudaVersions ReadCudaVersions();

}  // namespace cuda
}  // namespace framegate
