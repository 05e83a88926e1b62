#include "pipelines/cuda/attention_backend.h"

#include <ATen/Context.h>
#include <torch/version.h>

// LibTorch versions that added a switch (see the table in the header).
#define FRAMEGATE_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))
#define FRAMEGATE_HAS_SDPA_MEM_EFFICIENT FRAMEGATE_TORCH_AT_LEAST(2, 0)
#define FRAMEGATE_HAS_SDPA_CUDNN FRAMEGATE_TORCH_AT_LEAST(2, 4)
#define FRAMEGATE_HAS_BF16_REDUCTION_SWITCH FRAMEGATE_TORCH_AT_LEAST(2, 0)

namespace framegate {
namespace cuda {
namespace {

// allowFP16ReductionCuBLAS()/allowBF16ReductionCuBLAS() return a bool, and in recent
// LibTorch an at::CuBLASReductionOption (reduced precision and split-K together). Both
// are read as "may reduce in reduced precision"; overloading keeps this version-free.
bool ReducedPrecisionAllowed(bool allowed) { return allowed; }
template <typename Option>
bool ReducedPrecisionAllowed(Option option) {
  return option == Option::AllowReducedPrecisionWithSplitK;
}

void Append(std::string* list, bool on, const char* name) {
  if (!on) return;
  if (!list->empty()) *list += ",";
  *list += name;
}

}  // namespace

std::string SdpaBackends::ToString() const {
  std::string out;
  Append(&out, flash, "flash");
  Append(&out, mem_efficient, "mem_efficient");
  Append(&out, math, "math");
  Append(&out, cudnn, "cudnn");
  return out.empty() ? "none" : out;
}

SdpaBackends ApplySdpaBackends(const SdpaBackends& allowed) {
  at::Context& ctx = at::globalContext();
  ctx.setSDPUseFlash(allowed.flash);
  ctx.setSDPUseMath(allowed.math);
#if FRAMEGATE_HAS_SDPA_MEM_EFFICIENT
  ctx.setSDPUseMemEfficient(allowed.mem_efficient);
#endif
#if FRAMEGATE_HAS_SDPA_CUDNN
  ctx.setSDPUseCuDNN(allowed.cudnn);
#endif
  return CurrentSdpaBackends();
}

SdpaBackends CurrentSdpaBackends() {
  const at::Context& ctx = at::globalContext();
  SdpaBackends in_force;
  in_force.flash = ctx.userEnabledFlashSDP();
  in_force.math = ctx.userEnabledMathSDP();
#if FRAMEGATE_HAS_SDPA_MEM_EFFICIENT
  in_force.mem_efficient = ctx.userEnabledMemEfficientSDP();
#else
  in_force.mem_efficient = false;         // 1.13: no memory-efficient kernel
#endif
#if FRAMEGATE_HAS_SDPA_CUDNN
  in_force.cudnn = ctx.userEnabledCuDNNSDP();
#else
  in_force.cudnn = false;                 // before 2.4: no cuDNN SDPA switch
#endif
  return in_force;
}

std::string CudaPrecisionFlags::ToString() const {
  return std::string("tf32_cublas=") + (tf32_cublas ? "1" : "0") + " tf32_cudnn=" + (tf32_cudnn ? "1" : "0") +
         " fp16_reduction_cublas=" + (fp16_reduction_cublas ? "1" : "0") +
         " bf16_reduction_cublas=" + (bf16_reduction_cublas ? "1" : "0");
}

CudaPrecisionFlags ApplyPrecisionFlags(const CudaPrecisionFlags& wanted) {
  at::Context& ctx = at::globalContext();
  ctx.setAllowTF32CuBLAS(wanted.tf32_cublas);
  ctx.setAllowTF32CuDNN(wanted.tf32_cudnn);
  ctx.setAllowFP16ReductionCuBLAS(wanted.fp16_reduction_cublas);
#if FRAMEGATE_HAS_BF16_REDUCTION_SWITCH
  ctx.setAllowBF16ReductionCuBLAS(wanted.bf16_reduction_cublas);
#endif
  return CurrentPrecisionFlags();
}

CudaPrecisionFlags CurrentPrecisionFlags() {
  const at::Context& ctx = at::globalContext();
  CudaPrecisionFlags in_force;
  in_force.tf32_cublas = ctx.allowTF32CuBLAS();
  in_force.tf32_cudnn = ctx.allowTF32CuDNN();
  in_force.fp16_reduction_cublas = ReducedPrecisionAllowed(ctx.allowFP16ReductionCuBLAS());
#if FRAMEGATE_HAS_BF16_REDUCTION_SWITCH
  in_force.bf16_reduction_cublas = ReducedPrecisionAllowed(ctx.allowBF16ReductionCuBLAS());
#else
  in_force.bf16_reduction_cublas = true;  // 1.13: no switch, cuBLAS's default applies
#endif
  return in_force;
}

}  // namespace cuda
}  // namespace framegate
