// What the LibTorch framegate is built against can do, decided from its version at
// compile time: the one place for LibTorch version checks. Header only (the front
// executable, which links no LibTorch, may include it).
//
// Verified on LibTorch 1.13 (Debian 12) and 2.6 (Debian 13, ci/libtorch2.sh); the
// boundaries between (2.1, 2.2) are not measured here.
#pragma once

#include <torch/version.h>

// True when LibTorch is at least major.minor; for #if (code that names an API only that
// version has).
#define FRAMEGATE_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace framegate {

// FP16 convolution and matmul run on the CPU (2.2 on; 1.13 raises "\"addmm_impl_cpu_\" not
// implemented for 'Half'").
constexpr bool kCpuHasFp16Compute = FRAMEGATE_TORCH_AT_LEAST(2, 2);

// at::scaled_dot_product_attention is public (2.0 on; 1.13 has only the private
// at::_scaled_dot_product_attention).
constexpr bool kHasSdpa = FRAMEGATE_TORCH_AT_LEAST(2, 0);

// SDPA has a CPU flash-attention kernel beside the math path, chosen by the same
// process-wide switches as on CUDA (2.2 on; measured on 2.6).
constexpr bool kCpuHasFlashAttention = FRAMEGATE_TORCH_AT_LEAST(2, 2);

// at::kFloat8_e4m3fn and at::kFloat8_e5m2 exist (2.1 on).
constexpr bool kHasNativeFloat8 = FRAMEGATE_TORCH_AT_LEAST(2, 1);

}  // namespace framegate
