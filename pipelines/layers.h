// The reference model's layers as short functions over a ForwardContext. Every named
// module reports its output through ForwardContext::Output, which is where FP32 islands
// end, FP16 emulation rounds, and observers (probes, NaN localisation) watch.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "pipelines/accumulation_emulation.h"
#include "pipelines/dtype_policy.h"
#include "pipelines/weight_store.h"

namespace framegate {

// What an observer sees after each named module: step is the sampler step (0-based), or
// -1 for the decoder. `op` is "" for a module's output, else the op inside `module` that
// produced `value` ("aten::log"; model packages, whose ops are watched too).
struct ModuleOutput {
  const std::string& module;
  ModuleKind kind;
  int step;
  const at::Tensor& value;
  const char* op = "";
};
using ModuleObserver = std::function<void(const ModuleOutput&)>;

// A module whose input dtype differs from its weight's dtype (field report F4).
struct DtypeMismatch {
  std::string module;
  c10::ScalarType input;
  c10::ScalarType weight;
};

class ForwardContext {
 public:
  ForwardContext(const WeightStore& weights, const DtypePolicy& policy)
      : weights_(weights), policy_(policy) {}

  // The weight as the module uses it: the stored tensor, FP8 codes decoded to the
  // module's compute dtype (unless fp8 upcast is off: then FP8 weights raise the
  // promotion error LibTorch raises for native float8, field report F5).
  at::Tensor Weight(const std::string& name) const;
  // Module entry: records the module as the current one; an FP32 island casts its input
  // to FP32, other modules take x as is. With a mismatch log, records an input whose
  // dtype differs from the module's weight; under FP16 emulation such an input (by the
  // dtypes a real FP16 run holds) raises a dtype error.
  at::Tensor Enter(const std::string& module, ModuleKind kind, const at::Tensor& x) const;
  // Module exit: an island casts back to the activation dtype; FP16 emulation rounds;
  // the observer sees the result.
  at::Tensor Output(const std::string& module, ModuleKind kind, at::Tensor y) const;
  // A value the model casts to the activation dtype (x.to(compute), the timestep
  // sinusoid): under FP16 emulation rounded through FP16, as a real FP16 run holds it.
  at::Tensor ToActivation(const at::Tensor& x) const;
  // A value the model keeps in float32 outside any island (fault F4's input): under FP16
  // emulation a copy that the next Enter knows a real FP16 run holds in float32, so that
  // a module with FP16 weights raises the dtype error a real run raises.
  at::Tensor KeepFloat32(const at::Tensor& x) const;

  const DtypePolicy& policy() const { return policy_; }
  // How matmul, linear, convolution and the attention products accumulate (the policy's
  // flags, emulated on the CPU; inactive by default).
  void set_accumulation(const AccumulationEmulation& accumulation) { accumulation_ = accumulation; }
  // The accumulation module `module` uses: an FP32 island accumulates in FP32 (a reduced
  // running sum applies to the low-precision products only); TF32 applies everywhere.
  AccumulationEmulation AccumulationFor(const std::string& module, ModuleKind kind) const {
    AccumulationEmulation a = accumulation_;
    if (policy_.IsIsland(kind, module)) a.reduced_sum = c10::ScalarType::Undefined;
    return a;
  }
  void set_step(int step) { step_ = step; }
  void set_observer(ModuleObserver observer) { observer_ = std::move(observer); }
  void set_fp8_upcast(bool upcast) { fp8_upcast_ = upcast; }
  void set_mismatch_log(std::vector<DtypeMismatch>* log) { mismatch_log_ = log; }
  // The module most recently entered: where an exception came from.
  const std::string& current_module() const { return current_module_; }

 private:
  const WeightStore& weights_;
  const DtypePolicy& policy_;
  int step_ = 0;
  bool fp8_upcast_ = true;
  ModuleObserver observer_;
  AccumulationEmulation accumulation_;
  std::vector<DtypeMismatch>* mismatch_log_ = nullptr;
  mutable std::string current_module_;
  mutable const void* float32_value_ = nullptr;  // KeepFloat32's last copy (FP16 emulation)
};

// y = x W^T + b over the last dim. Weights "<name>.weight" [out, in], "<name>.bias" [out].
at::Tensor Linear(const ForwardContext& ctx, const std::string& name, ModuleKind kind, const at::Tensor& x);
// 3D convolution on [N, Cin, T, H, W]; weight [Cout, Cin, kt, kh, kw], "same" padding
// for odd kernels unless stride > 1.
at::Tensor Conv3d(const ForwardContext& ctx, const std::string& name, ModuleKind kind, const at::Tensor& x,
                  at::IntArrayRef stride = {1, 1, 1});
// 2D convolution on [N, Cin, H, W], "same" padding; weight [Cout, Cin, k, k].
at::Tensor Conv2d(const ForwardContext& ctx, const std::string& name, ModuleKind kind, const at::Tensor& x);
// GroupNorm over [N, C, ...] with affine "<name>.weight"/"<name>.bias" [C]. A norm.
at::Tensor GroupNorm(const ForwardContext& ctx, const std::string& name, const at::Tensor& x, int64_t groups);
// LayerNorm over the last dim with affine [D]. A norm.
at::Tensor LayerNorm(const ForwardContext& ctx, const std::string& name, const at::Tensor& x);
// Multi-head attention: queries from x [N, S, H], keys/values from context [N, L, Dc]
// (context == x for self-attention). Modules "<name>.{q,k,v,out}", "<name>.logits"
// (the scaled QK^T scores), "<name>.softmax". Returns [N, S, H].
at::Tensor Attention(const ForwardContext& ctx, const std::string& name, const at::Tensor& x,
                     const at::Tensor& context, int64_t heads);
// Sinusoidal embedding of positions/timesteps p [N] (float32) into [N, dim].
at::Tensor SinusoidalEmbedding(const at::Tensor& positions, int64_t dim);

}  // namespace framegate
