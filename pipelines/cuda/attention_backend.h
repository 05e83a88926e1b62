// Which scaled-dot-product-attention (SDPA) kernels LibTorch may pick on a GPU, and the
// cuBLAS/cuDNN reduced-precision flags: set from a policy before a cell runs, read back
// and recorded with its result (what was in force, not what was asked for). CUDA build
// only: the .cc is compiled when LibTorch has CUDA (FRAMEGATE_HAS_CUDA) and, without
// linking, by ci/cuda_compile_check.sh. This header includes no CUDA header.
//
// Scope: the SDPA switches reach only models that call scaled_dot_product_attention
// (a TorchScript package calling F.scaled_dot_product_attention, and the reference model
// under a policy that names an attention backend: pipelines/layers.cc); the precision
// flags reach every CUDA matmul and convolution.
//
// What each LibTorch has (a backend or flag without a switch reads as described):
//   1.13     SDPA switches for flash and math only (SDPA itself is the private
//            at::_scaled_dot_product_attention there); memory-efficient and cuDNN do not
//            exist and read false. No BF16 reduction switch: reads true, cuBLAS's own
//            default, which 1.13 leaves in force.
//   2.0-2.3  flash, memory-efficient, math; the BF16 reduction switch.
//   2.4+     also cuDNN.
//
// The switches are process-wide (at::globalContext()): not thread-safe, and they apply
// to every cell of the process (framegate runs each cell in its own process).
#pragma once

#include <string>

namespace framegate {
namespace cuda {

// The SDPA backends LibTorch may choose from (defaults: LibTorch's, everything allowed).
struct SdpaBackends {
  bool flash = true;
  bool mem_efficient = true;
  bool math = true;
  bool cudnn = true;

  std::string ToString() const;  // "flash,mem_efficient,math"; "none" when all are off
};

// Allows exactly the backends in `allowed` that this LibTorch has a switch for, forbids
// the others, and returns the set in force afterwards (= CurrentSdpaBackends()).
SdpaBackends ApplySdpaBackends(const SdpaBackends& allowed);
SdpaBackends CurrentSdpaBackends();

// Reduced-precision flags of cuBLAS and cuDNN (defaults: LibTorch's).
struct CudaPrecisionFlags {
  bool tf32_cublas = false;           // FP32 matmuls may use TF32 tensor cores
  bool tf32_cudnn = true;             // FP32 convolutions may use TF32 tensor cores
  bool fp16_reduction_cublas = true;  // FP16 GEMMs may accumulate partly in FP16
  bool bf16_reduction_cublas = true;  // BF16 GEMMs may accumulate partly in BF16

  // "tf32_cublas=0 tf32_cudnn=1 fp16_reduction_cublas=1 bf16_reduction_cublas=1"
  std::string ToString() const;
};

// Sets each flag this LibTorch has a switch for and returns the flags in force
// afterwards (= CurrentPrecisionFlags()); a flag that differs from `wanted` could not
// be set here.
CudaPrecisionFlags ApplyPrecisionFlags(const CudaPrecisionFlags& wanted);
CudaPrecisionFlags CurrentPrecisionFlags();

}  // namespace cuda
}  // namespace framegate
