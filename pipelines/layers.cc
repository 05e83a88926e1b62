#include "pipelines/layers.h"

#include <cmath>
#include <stdexcept>

#include <ATen/Functions.h>
#include <c10/util/Exception.h>

#include "harness/torch_version.h"
#include "pipelines/dtype_propagation.h"
#include "pipelines/fp8_codec.h"

namespace framegate {

at::Tensor ForwardContext::Weight(const std::string& name) const {
  const WeightEntry& entry = weights_.Get(name);
  const std::optional<Fp8Format> fp8 = entry.fp8();
  if (!fp8) return entry.stored;
  const c10::ScalarType compute = policy_.ComputeDtypeFor(entry.kind, ModuleOfWeight(name));
  if (!fp8_upcast_) UseFp8WithoutUpcast(entry.stored, *fp8, compute, name);
  return DecodeFp8Tensor(entry.stored, *fp8, compute, entry.stored.device());
}

at::Tensor ForwardContext::Enter(const std::string& module, ModuleKind kind, const at::Tensor& x) const {
  current_module_ = module;
  const bool island = policy_.IsIsland(kind, module);
  at::Tensor in = island ? x.to(at::kFloat) : x;
  const bool emulated = policy_.emulate_fp16 && !island;
  if (mismatch_log_ == nullptr && !emulated) return in;
  const WeightEntry* w = weights_.Find(module + ".weight");
  if (w == nullptr) return in;
  // The dtypes of the run the policy stands for (FP16 under emulation).
  c10::ScalarType weight_dtype =
      w->fp8() ? policy_.ComputeDtypeFor(w->kind, module) : w->stored.scalar_type();
  c10::ScalarType input_dtype = in.scalar_type();
  if (emulated) {
    if (w->emulated_fp16) weight_dtype = at::kHalf;
    if (input_dtype == at::kFloat && x.unsafeGetTensorImpl() != float32_value_) input_dtype = at::kHalf;
  }
  if (weight_dtype == input_dtype) return in;
  if (mismatch_log_ != nullptr) mismatch_log_->push_back({module, input_dtype, weight_dtype});
  if (emulated) throw std::runtime_error(EmulatedDtypeErrorText("", input_dtype, weight_dtype));
  return in;
}

at::Tensor ForwardContext::ToActivation(const at::Tensor& x) const {
  if (policy_.emulate_fp16 && x.scalar_type() == at::kFloat) return x.to(at::kHalf).to(at::kFloat);
  return x.to(policy_.compute);
}

at::Tensor ForwardContext::KeepFloat32(const at::Tensor& x) const {
  if (!policy_.emulate_fp16) return x.to(at::kFloat);
  at::Tensor copy = x.clone();
  float32_value_ = copy.unsafeGetTensorImpl();
  return copy;
}

at::Tensor ForwardContext::Output(const std::string& module, ModuleKind kind, at::Tensor y) const {
  // An island's output goes back to the compute dtype; under FP16 emulation it is not
  // rounded (the island computes in FP32; the next module's output is rounded).
  const bool island = policy_.IsIsland(kind, module);
  if (island && y.scalar_type() != policy_.compute) y = y.to(policy_.compute);
  if (policy_.emulate_fp16 && !island && y.scalar_type() == at::kFloat) {
    y = y.to(at::kHalf).to(at::kFloat);
  }
  if (observer_) observer_(ModuleOutput{module, kind, step_, y});
  return y;
}

at::Tensor Linear(const ForwardContext& ctx, const std::string& name, ModuleKind kind, const at::Tensor& x) {
  const at::Tensor in = ctx.Enter(name, kind, x);
  const at::Tensor w = ctx.Weight(name + ".weight"), b = ctx.Weight(name + ".bias");
  const AccumulationEmulation acc = ctx.AccumulationFor(name, kind);
  at::Tensor y =
      acc.active() || Widens(acc, {in, w, b}) ? EmulatedLinear(in, w, b, acc) : at::linear(in, w, b);
  return ctx.Output(name, kind, y);
}

at::Tensor Conv3d(const ForwardContext& ctx, const std::string& name, ModuleKind kind, const at::Tensor& x,
                  at::IntArrayRef stride) {
  const AccumulationEmulation acc = ctx.AccumulationFor(name, kind);
  const bool tf32 = acc.tf32_inputs;
  const at::Tensor in = tf32 ? RoundToTf32(ctx.Enter(name, kind, x)) : ctx.Enter(name, kind, x);
  const at::Tensor w = tf32 ? RoundToTf32(ctx.Weight(name + ".weight"))
                            : ctx.Weight(name + ".weight");  // [Cout, Cin, kt, kh, kw]
  const bool strided = stride[0] > 1 || stride[1] > 1 || stride[2] > 1;
  const std::vector<int64_t> padding =
      strided ? std::vector<int64_t>{0, 0, 0}
              : std::vector<int64_t>{w.size(2) / 2, w.size(3) / 2, w.size(4) / 2};
  const at::Tensor b = ctx.Weight(name + ".bias");
  at::Tensor y = Widens(acc, {in, w, b})
                     ? at::conv3d(Float32(in), Float32(w), Float32(b), stride, padding).to(acc.widened)
                     : at::conv3d(in, w, b, stride, padding);
  return ctx.Output(name, kind, y);
}

at::Tensor Conv2d(const ForwardContext& ctx, const std::string& name, ModuleKind kind, const at::Tensor& x) {
  const AccumulationEmulation acc = ctx.AccumulationFor(name, kind);
  const at::Tensor in = acc.tf32_inputs ? RoundToTf32(ctx.Enter(name, kind, x)) : ctx.Enter(name, kind, x);
  const at::Tensor w = acc.tf32_inputs ? RoundToTf32(ctx.Weight(name + ".weight"))
                                       : ctx.Weight(name + ".weight");  // [Cout, Cin, k, k]
  const at::Tensor b = ctx.Weight(name + ".bias");
  const std::vector<int64_t> padding = {w.size(2) / 2, w.size(3) / 2};
  at::Tensor y = Widens(acc, {in, w, b})
                     ? at::conv2d(Float32(in), Float32(w), Float32(b), {1, 1}, padding).to(acc.widened)
                     : at::conv2d(in, w, b, {1, 1}, padding);
  return ctx.Output(name, kind, y);
}

at::Tensor GroupNorm(const ForwardContext& ctx, const std::string& name, const at::Tensor& x,
                     int64_t groups) {
  const at::Tensor in = ctx.Enter(name, ModuleKind::kNorm, x);
  at::Tensor y = at::group_norm(in, groups, ctx.Weight(name + ".weight"), ctx.Weight(name + ".bias"), 1e-5);
  return ctx.Output(name, ModuleKind::kNorm, y);
}

at::Tensor LayerNorm(const ForwardContext& ctx, const std::string& name, const at::Tensor& x) {
  const at::Tensor in = ctx.Enter(name, ModuleKind::kNorm, x);
  at::Tensor y =
      at::layer_norm(in, {x.size(-1)}, ctx.Weight(name + ".weight"), ctx.Weight(name + ".bias"), 1e-5);
  return ctx.Output(name, ModuleKind::kNorm, y);
}

at::Tensor Attention(const ForwardContext& ctx, const std::string& name, const at::Tensor& x,
                     const at::Tensor& context, int64_t heads) {
  const int64_t n = x.size(0), s = x.size(1), hidden = x.size(2), l = context.size(1);
  const int64_t head_dim = hidden / heads;
  auto split_heads = [&](const at::Tensor& t, int64_t len) {  // [N, len, H] -> [N, heads, len, d]
    return t.reshape({n, len, heads, head_dim}).permute({0, 2, 1, 3});
  };
  const at::Tensor q = split_heads(Linear(ctx, name + ".q", ModuleKind::kOther, x), s);
  const at::Tensor k = split_heads(Linear(ctx, name + ".k", ModuleKind::kOther, context), l);
  const at::Tensor v = split_heads(Linear(ctx, name + ".v", ModuleKind::kOther, context), l);
#if FRAMEGATE_TORCH_AT_LEAST(2, 0)  // kHasSdpa
  if (!ctx.policy().attention_backend.empty()) {
    // The policy names an attention backend: one SDPA call, whose kernel the backend
    // switches in force pick (pipeline_run.cc). Its scores and probabilities are inside
    // the kernel: a softmax island computes the whole product in FP32.
    const at::Tensor q_in = ctx.Enter(name + ".softmax", ModuleKind::kSoftmax, q);
    const at::Tensor k_in = ctx.Enter(name + ".softmax", ModuleKind::kSoftmax, k);
    const at::Tensor v_in = ctx.Enter(name + ".softmax", ModuleKind::kSoftmax, v);
    at::Tensor attended = ctx.Output(name + ".softmax", ModuleKind::kSoftmax,
                                     at::scaled_dot_product_attention(q_in, k_in, v_in));
    return Linear(ctx, name + ".out", ModuleKind::kOther,
                  attended.permute({0, 2, 1, 3}).reshape({n, s, hidden}));
  }
#endif
  // logits [N, heads, S, L]; with a softmax island the scores are computed in FP32 too
  // (FP32 accumulation in attention, the remedy of field report F2).
  const at::Tensor q_in = ctx.Enter(name + ".logits", ModuleKind::kSoftmax, q);
  const at::Tensor k_in = ctx.Enter(name + ".logits", ModuleKind::kSoftmax, k);
  const AccumulationEmulation acc = ctx.AccumulationFor(name + ".logits", ModuleKind::kSoftmax);
  at::Tensor logits =
      (acc.active() || Widens(acc, {q_in, k_in}) ? EmulatedMatmul(q_in, k_in.transpose(-2, -1), acc)
                                                 : at::matmul(q_in, k_in.transpose(-2, -1)))
          .mul_(1.0 / std::sqrt(double(head_dim)));
  logits = ctx.Output(name + ".logits", ModuleKind::kAttentionLogits, logits);
  at::Tensor probs = at::softmax(ctx.Enter(name + ".softmax", ModuleKind::kSoftmax, logits), -1);
  probs = ctx.Output(name + ".softmax", ModuleKind::kSoftmax, probs);
  at::Tensor out =
      (acc.active() || Widens(acc, {probs, v}) ? EmulatedMatmul(probs, v, acc) : at::matmul(probs, v))
          .permute({0, 2, 1, 3})
          .reshape({n, s, hidden});
  return Linear(ctx, name + ".out", ModuleKind::kOther, out);
}

at::Tensor SinusoidalEmbedding(const at::Tensor& positions, int64_t dim) {
  const int64_t half = dim / 2;
  // freqs [half] = exp(-ln(10000) * i / half)
  at::Tensor freqs =
      at::exp(at::arange(half, at::TensorOptions().dtype(at::kFloat)).mul(-std::log(10000.0) / double(half)))
          .to(positions.device());
  at::Tensor args = positions.to(at::kFloat).unsqueeze(1) * freqs.unsqueeze(0);  // [N, half]
  return at::cat({at::cos(args), at::sin(args)}, 1);                             // [N, dim]
}

}  // namespace framegate
