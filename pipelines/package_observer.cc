#include "pipelines/package_observer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <c10/util/StringUtil.h>

#include "pipelines/norm_ops.h"
#include "pipelines/op_islands.h"
#include "pipelines/same_dtype_ops.h"

namespace framegate {
namespace {

bool IsFloat32(const at::Tensor& t) { return t.defined() && t.scalar_type() == at::kFloat; }

bool IsReducedFloat(const at::Tensor& t) {
  return t.defined() && (t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf);
}

// Raises the error weighted op `op` (`weighted` its entry) raises when its operands before
// schema position `later_index` are `first` and the one at `later_index` is `later`: the
// op itself on tiny operands of those dtypes, so that the text is this LibTorch's own.
// Returns when the op takes such operands.
void RaiseMixedOperandError(const std::string& op, const WeightedOp& weighted, int later_index,
                            c10::ScalarType first, c10::ScalarType later) {
  const bool batched =
      op == "aten::bmm" || op == "aten::baddbmm" || weighted.sum == WeightedSum::kConvolution;
  const auto operand = [&](int index) {
    const c10::ScalarType dtype = index == later_index ? later : first;
    if (index == weighted.bias) return at::zeros({1}, at::TensorOptions().dtype(dtype));
    return at::zeros(batched ? at::IntArrayRef{1, 1, 1} : at::IntArrayRef{1, 1},
                     at::TensorOptions().dtype(dtype));
  };
  if (weighted.bias == 0) {  // addmm, baddbmm: every operand is required
    const at::Tensor bias = operand(0), a = operand(1), b = operand(2);
    if (op == "aten::baddbmm") {
      at::baddbmm(bias, a, b);
    } else {
      at::addmm(bias, a, b);
    }
    return;
  }
  const at::Tensor a = operand(0), b = operand(1), bias = later_index == 2 ? operand(2) : at::Tensor();
  if (weighted.transposed) {
    at::conv_transpose1d(a, b, bias);
  } else if (weighted.sum == WeightedSum::kConvolution) {
    at::conv1d(a, b, bias);
  } else if (op == "aten::linear") {
    at::linear(a, b, bias);
  } else if (op == "aten::bmm") {
    at::bmm(a, b);
  } else {
    at::mm(a, b);
  }
}

// A fill's constant number written into an FP16 tensor: LibTorch converts it checked and
// raises where it is finite and out of FP16's range (masked_fill(mask, -1e9)); an infinity
// fits. Float32's lowest is what a trace bakes for torch.finfo(x.dtype).min: the text says
// so, since the cure is in the model's code.
void RaiseIfFillOverflowsHalf(double value) {
  if (!std::isfinite(value) || std::abs(value) <= 65504.0) return;
  const bool float32_lowest = std::abs(value) == static_cast<double>(std::numeric_limits<float>::max());
  throw std::runtime_error(
      "value cannot be converted to type at::Half without overflow (FP16 emulation: a real "
      "FP16 run raises this; the fill value " +
      c10::str(value) +
      (float32_lowest ? ", float32's lowest: torch.finfo(torch.float32).min, or a traced "
                        "torch.finfo(x.dtype).min baked while x was float32; compute it from the "
                        "activations' dtype at run time (script that function), or trace in the "
                        "dtype the model runs in"
                      : "") +
      ")");
}

// aten::empty and its kin: an output whose values are whatever the allocator held.
bool AllocatesUninitialised(const std::string& op) {
  return op == "aten::empty" || op == "aten::empty_like" || op == "aten::new_empty" ||
         op == "aten::empty_strided" || op == "aten::new_empty_strided";
}

}  // namespace

std::string JoinModulePath(const std::string& path, const std::string& callee) {
  if (callee.empty()) return path;
  return path.empty() ? callee : path + "." + callee;
}

void PackageObserver::AddParameter(const std::string& weight_path, const at::Tensor& value) {
  if (!policy_.emulate_fp16 || !value.defined() || !value.is_floating_point()) return;
  would_be_.SetParameter(value, policy_.KeepsWeightInFp32(weight_path) ? at::kFloat : would_be_.reduced());
}

void PackageObserver::AddUnconverted(const at::Tensor& value) {
  if (!policy_.emulate_fp16 || !value.defined() || !value.is_floating_point()) return;
  would_be_.SetParameter(value, value.scalar_type());
}

c10::ScalarType PackageObserver::RunDtypeOf(const at::Tensor& value) const {
  // A bool or integer tensor (a mask buffer) is held in its own dtype under any policy.
  if (!policy_.emulate_fp16 || !value.is_floating_point()) return value.scalar_type();
  const c10::ScalarType dtype = would_be_.Of(value);
  return dtype == c10::ScalarType::Undefined ? would_be_.reduced() : dtype;
}

void PackageObserver::HoldLike(const at::Tensor& replacement, const at::Tensor& value) {
  if (!policy_.emulate_fp16 || !IsFloat32(replacement)) return;
  const c10::ScalarType dtype = would_be_.Of(value);
  if (dtype != c10::ScalarType::Undefined) would_be_.Set(replacement, dtype);
}

at::Tensor PackageObserver::Emulate(const at::Tensor& out, c10::ScalarType dtype, bool conversion) {
  if (!IsFloat32(out)) return out;
  at::Tensor value = out;
  if (dtype == at::kHalf) {
    value = RoundAsEmulatedFp16(out, policy_);
    NoteFp16Magnitude(value);
  } else if (conversion && would_be_.Of(out) != dtype) {
    value = out.clone();  // x.float() of an FP16 x: a new float32 tensor, x stays FP16
  }
  would_be_.Set(value, dtype);
  return value;
}

void PackageObserver::NoteFp16Magnitude(const at::Tensor& rounded) {
  constexpr double kHalfOfFp16Max = 65504.0 / 2;
  if (largest_fp16_magnitude_ > kHalfOfFp16Max || rounded.numel() == 0) return;
  auto [lowest, highest] = at::aminmax(rounded);
  double largest = std::max(-lowest.item<double>(), highest.item<double>());
  if (!std::isfinite(largest)) {  // an Inf or NaN (a -inf mask): the finite values' largest
    const at::Tensor finite = rounded.masked_select(at::isfinite(rounded));
    largest = finite.numel() == 0 ? 0.0 : finite.abs().max().item<double>();
  }
  if (largest > kHalfOfFp16Max) largest_fp16_magnitude_ = largest;
}

void PackageObserver::NoteFloat32Operand(const GraphSite& site, int input_index, const at::Tensor& value) {
  if (float32_origin_site_ != &site) {
    float32_origin_site_ = &site;
    float32_operand_origin_.clear();
  }
  // x.type_as(h) and x.to(h) take h's dtype: a float32 result is float32 where h became it
  // (a stream made float32 by adding a float32 table), whatever x is.
  const bool dtype_source = input_index == 1 && (site.op == "aten::type_as" || site.op == "aten::to");
  if ((!float32_operand_origin_.empty() && !dtype_source) || RunDtypeOf(value) != at::kFloat) return;
  const std::string* origin = float32_origins_.Find(value);
  if (origin != nullptr) float32_operand_origin_ = *origin;
}

void PackageObserver::KeepFloat32Origin(const std::string& path, const GraphSite& site,
                                        const at::Tensor& out) {
  const bool noted = float32_origin_site_ == &site && !float32_operand_origin_.empty();
  if (out.defined() && out.is_floating_point() && RunDtypeOf(out) == at::kFloat) {
    float32_origins_.Put(out, noted ? float32_operand_origin_ : OpIslandEntry(path, site.op));
  }
  float32_origin_site_ = nullptr;
}

std::string PackageObserver::MakerOf(const at::Tensor& value) const {
  const std::string* maker = makers_.Find(value);
  return maker != nullptr ? *maker : "";
}

at::Tensor PackageObserver::Before(const std::string& path, const GraphSite& site, int input_index,
                                   const at::Tensor& value) {
  if (site.kind == GraphSite::Kind::kCopyingView) {
    if (track_makers_) copy_maker_ = MakerOf(value);
    if (track_float32_) {
      const std::string* origin = float32_origins_.Find(value);
      copy_float32_origin_ = origin != nullptr ? *origin : "";
    }
    if (policy_.emulate_fp16) would_be_.AddInput(site, input_index, value);
    return value;
  }
  if (site.kind == GraphSite::Kind::kOp) {
    if (track_float32_ && value.defined() && value.is_floating_point())
      NoteFloat32Operand(site, input_index, value);
    if (policy_.emulate_fp16 && input_index == 0 && site.fill_constant && RunDtypeOf(value) == at::kHalf)
      RaiseIfFillOverflowsHalf(*site.fill_constant);
    if (policy_.emulate_fp16 && value.defined() && value.is_floating_point()) {
      AuditNormDtypes(path, site, input_index, RunDtypeOf(value));
      AuditSameDtypeOperands(path, site, input_index, RunDtypeOf(value));
    }
    // An in-place op's result keeps its input 0's dtype, whatever the others' are.
    if (policy_.emulate_fp16 && !site.in_place) would_be_.AddInput(site, input_index, value);
    if (input_index == kListElementInput && site.op == "aten::einsum")
      return EinsumOperand(path, site, value);
    if (input_index < 0) return value;  // a list element or a dtype source
    // A weighted op's operands; a product of two activations (probs @ v) too under the
    // emulation, since matmul does not promote either.
    const bool audited =
        site.weighted != nullptr &&
        (site.weight_input >= 0 || (policy_.emulate_fp16 && site.weighted->sum == WeightedSum::kMatmul));
    if (audited && (mismatch_log_ != nullptr || policy_.emulate_fp16) && value.defined() &&
        value.is_floating_point()) {
      AuditOperandDtypes(path, site, input_index, RunDtypeOf(value));
    }
    if (accumulation_.widened != c10::ScalarType::Undefined) return Widen(site, input_index, value);
    if (!accumulation_.active()) return value;
    const int slot = site.weighted != nullptr ? site.weighted->SlotOf(input_index) : -1;
    if (slot < 0) return value;
    const at::Tensor in = accumulation_.tf32_inputs && slot < 2 ? RoundToTf32(value) : value;
    if (site.weighted->sum != WeightedSum::kConvolution) {
      if (matmul_.site != &site) matmul_ = MatmulOperands{&site, {}};
      matmul_.operands[slot] = in;
    }
    return in;
  }
  // A call into an island from outside it: its inputs enter in float32.
  const std::string callee = JoinModulePath(path, site.callee);
  if (!policy_.InFp32Module(callee) || policy_.InFp32Module(path)) return value;
  EnterIsland(value);
  if (IsReducedFloat(value)) return value.to(at::kFloat);
  if (policy_.emulate_fp16 && IsFloat32(value) && would_be_.Of(value) != at::kFloat) {
    at::Tensor in = value.clone();
    would_be_.Set(in, at::kFloat);
    return in;
  }
  return value;
}

void PackageObserver::EnterIsland(const at::Tensor& value) {
  const std::string maker = track_makers_ ? MakerOf(value) : "";
  if (!maker.empty() && std::find(island_input_makers_.begin(), island_input_makers_.end(), maker) ==
                            island_input_makers_.end()) {
    island_input_makers_.push_back(maker);
  }
}

at::Tensor PackageObserver::After(const std::string& path, const GraphSite& site, int output_index,
                                  const at::Tensor& value) {
  (void)output_index;
  if (site.kind == GraphSite::Kind::kCopyingView) {
    // A copy is a new storage: it holds its input's would-be dtype (a view has it already).
    if (track_makers_ && !copy_maker_.empty()) makers_.Put(value, copy_maker_);
    if (track_float32_ && !copy_float32_origin_.empty()) float32_origins_.Put(value, copy_float32_origin_);
    if (!policy_.emulate_fp16) return value;
    const c10::ScalarType dtype = would_be_.OutputDtype(site, value.scalar_type());
    if (IsFloat32(value) && would_be_.Of(value) == c10::ScalarType::Undefined) would_be_.Set(value, dtype);
    return value;
  }
  at::Tensor out = value;
  const bool in_island = policy_.InFp32Module(path);
  // (A module island's output leaving for a caller outside: IslandObserver casts it where
  // it is taken.) An in-place op's result: the tensor it wrote, which a real FP16 run stores rounded.
  if (site.kind == GraphSite::Kind::kOp && site.in_place && policy_.emulate_fp16 && value.defined() &&
      value.is_floating_point()) {
    AuditInPlaceSameDtype(path, site, RunDtypeOf(value));
  }
  if (site.kind == GraphSite::Kind::kOp && site.in_place && policy_.emulate_fp16 && !in_island &&
      IsFloat32(value) && RunDtypeOf(value) == would_be_.reduced()) {
    value.copy_(RoundAsEmulatedFp16(value, policy_));
    NoteFp16Magnitude(value);
  } else if (site.kind == GraphSite::Kind::kOp && !site.in_place) {
    if (widening_.site == &site) {
      if (widening_.widened && IsFloat32(out)) out = out.to(accumulation_.widened);
      widening_ = Widening{};
    }
    if (einsum_.site == &site) einsum_ = EinsumCall{};
    if (matmul_.site == &site) out = EmulateAccumulation(path, site, out);
    if (policy_.emulate_fp16 && out.defined() && out.is_floating_point()) {
      const c10::ScalarType would_be = would_be_.OutputDtype(site, out.scalar_type());
      const c10::ScalarType dtype = in_island && would_be == would_be_.reduced() ? at::kFloat : would_be;
      out = Emulate(out, dtype, site.op == "aten::to" || site.op == "aten::type_as");
    }
    if (track_makers_ && !in_island && out.defined() && out.is_floating_point()) {
      makers_.Put(out, OpIslandEntry(path, site.op));
    }
    if (track_float32_ && !in_island) KeepFloat32Origin(path, site, out);
  }
  // An uninitialised allocation (diffusers' baddbmm(torch.empty(..), q, k, beta=0)) holds
  // whatever memory it got, NaN included: not a value the model computed.
  if (observer_ && out.defined() && out.is_floating_point() && !AllocatesUninitialised(site.op)) {
    const char* op = site.kind == GraphSite::Kind::kOp ? site.op.c_str() : "";
    observer_(ModuleOutput{path, ModuleKind::kOther, step_, out, op});
  }
  return out;
}

at::Tensor PackageObserver::EmulateAccumulation(const std::string& path, const GraphSite& site,
                                                const at::Tensor& value) {
  const MatmulOperands operands = matmul_;
  matmul_ = MatmulOperands{};
  AccumulationEmulation acc = accumulation_;
  if (policy_.InFp32Module(path)) acc.reduced_sum = c10::ScalarType::Undefined;
  const at::Tensor& a = operands.operands[0];
  const at::Tensor& b = operands.operands[1];
  const WeightedSum sum = site.weighted->sum;
  // TF32 alone is in the (rounded) inputs already. addmm and baddbmm keep their own sums:
  // their beta and alpha are not seen here.
  if (acc.reduced_sum == c10::ScalarType::Undefined || !a.defined() || !b.defined() ||
      !value.is_floating_point() || (sum == WeightedSum::kMatmul && operands.operands[2].defined())) {
    return value;
  }
  const at::Tensor emulated = sum == WeightedSum::kLinear ? EmulatedLinear(a, b, operands.operands[2], acc)
                                                          : EmulatedMatmul(a, b, acc);
  return emulated.sizes() == value.sizes() ? emulated.to(value.scalar_type()) : value;
}

at::Tensor PackageObserver::Widen(const GraphSite& site, int input_index, const at::Tensor& value) {
  if (site.weighted == nullptr || site.weighted->SlotOf(input_index) < 0 || !value.defined() ||
      !value.is_floating_point()) {
    return value;
  }
  if (widening_.site != &site) widening_ = Widening{&site};
  if (value.scalar_type() == accumulation_.widened) {
    if (widening_.other) return value;  // the op raises its own dtype error
    widening_.widened = true;
    return value.to(at::kFloat);
  }
  // An operand of another dtype after widened ones: the real op raises here.
  if (widening_.widened) {
    RaiseMixedOperandError(site.op, *site.weighted, input_index, accumulation_.widened, value.scalar_type());
    return Float32(value);
  }
  widening_.other = true;
  return value;
}

at::Tensor PackageObserver::EinsumOperand(const std::string& path, const GraphSite& site,
                                          const at::Tensor& value) {
  if (!value.defined() || !value.is_floating_point()) return value;
  const c10::ScalarType dtype = RunDtypeOf(value);
  if (einsum_.site != &site) {
    einsum_ = EinsumCall{&site, dtype};
  } else if (dtype != einsum_.first) {
    const c10::ScalarType first = einsum_.first;
    const bool widened = widening_.site == &site && widening_.widened;
    einsum_ = EinsumCall{};
    widening_ = Widening{};
    if (mismatch_log_ != nullptr) mismatch_log_->push_back({path + " (" + site.op + ")", first, dtype});
    if (policy_.emulate_fp16) throw std::runtime_error(EmulatedOperandsDtypeErrorText(first, dtype));
    if (widened) {  // the first operand is float32 now: raise what the op would have
      at::einsum("i,i->i", {at::zeros({1}, at::TensorOptions().dtype(first)),
                            at::zeros({1}, at::TensorOptions().dtype(dtype))});
    }
    return value;
  }
  if (accumulation_.widened == c10::ScalarType::Undefined || value.scalar_type() != accumulation_.widened) {
    return value;
  }
  if (widening_.site != &site) widening_ = Widening{&site};
  widening_.widened = true;
  return value.to(at::kFloat);
}

at::Tensor PackageObserver::EnterRoot(const std::string& root, const at::Tensor& value, bool float32_input) {
  const bool island = policy_.InFp32Module(root);
  if (policy_.emulate_fp16 && IsFloat32(value)) {
    would_be_.Set(value, island || float32_input ? at::kFloat : would_be_.reduced());
  }
  return IsReducedFloat(value) && island ? value.to(at::kFloat) : value;
}

at::Tensor PackageObserver::LeaveRoot(const std::string& root, const at::Tensor& value) {
  if (!IsFloat32(value) || !policy_.InFp32Module(root)) return value;
  return policy_.emulate_fp16 ? Emulate(value, would_be_.reduced(), false) : value.to(policy_.compute);
}

void PackageObserver::AuditNormDtypes(const std::string& path, const GraphSite& site, int input_index,
                                      c10::ScalarType dtype) {
  const int weight = NormWeightInput(site.op);
  if (weight < 0) return;
  if (input_index == 0) {
    pending_ = PendingOp{&site, dtype};
    return;
  }
  if (input_index != weight || pending_.site != &site) return;
  const PendingOp op = pending_;
  pending_ = PendingOp{};
  if (op.input != at::kFloat || dtype != would_be_.reduced()) return;
  if (mismatch_log_ != nullptr) mismatch_log_->push_back({path + " (" + site.op + ")", op.input, dtype});
  throw std::runtime_error(EmulatedOperandsDtypeErrorText(op.input, dtype));
}

void PackageObserver::AuditSameDtypeOperands(const std::string& path, const GraphSite& site, int input_index,
                                             c10::ScalarType dtype) {
  const unsigned same = SameDtypeInputs(site.op);
  if (same == 0 || input_index < 0 || (input_index > 0 && (same >> input_index & 1u) == 0)) return;
  if (input_index == 0) {
    pending_ = PendingOp{&site, dtype};
    return;
  }
  // An in-place op's input 0 is not hooked (it aliases): its operands wait for its result.
  if (pending_.site != &site) pending_ = PendingOp{&site};
  const c10::ScalarType first =
      pending_.input != c10::ScalarType::Undefined ? pending_.input : pending_.weight;
  if (first == c10::ScalarType::Undefined || first == dtype) {
    pending_.weight = dtype;
    return;
  }
  pending_ = PendingOp{};
  RaiseSameDtypeError(path, site, first, dtype);
}

void PackageObserver::AuditInPlaceSameDtype(const std::string& path, const GraphSite& site,
                                            c10::ScalarType written) {
  if (pending_.site != &site || pending_.input != c10::ScalarType::Undefined) return;
  const c10::ScalarType operand = pending_.weight;
  pending_ = PendingOp{};
  if (operand != c10::ScalarType::Undefined && operand != written)
    RaiseSameDtypeError(path, site, written, operand);
}

void PackageObserver::RaiseSameDtypeError(const std::string& path, const GraphSite& site,
                                          c10::ScalarType first, c10::ScalarType second) {
  if (mismatch_log_ != nullptr) mismatch_log_->push_back({path + " (" + site.op + ")", first, second});
  throw std::runtime_error(EmulatedOperandsDtypeErrorText(first, second));
}

void PackageObserver::AuditOperandDtypes(const std::string& path, const GraphSite& site, int input_index,
                                         c10::ScalarType dtype) {
  const int slot = site.weighted->SlotOf(input_index);
  if (slot < 0 || slot > 1) return;  // the two operands (a bias is not one)
  if (pending_.site != &site) pending_ = PendingOp{&site};
  const bool has_weight = site.weight_input >= 0;
  if (has_weight ? input_index == site.weight_input : slot == 1) {
    pending_.weight = dtype;
  } else if (pending_.input == c10::ScalarType::Undefined) {
    pending_.input = dtype;  // the first operand that is not the weight
  }
  if (pending_.input == c10::ScalarType::Undefined || pending_.weight == c10::ScalarType::Undefined) return;
  const PendingOp op = pending_;
  pending_ = PendingOp{};
  if (op.input == op.weight) return;
  if (!has_weight) throw std::runtime_error(EmulatedOperandsDtypeErrorText(op.input, op.weight));
  if (mismatch_log_ != nullptr) mismatch_log_->push_back({path + " (" + site.op + ")", op.input, op.weight});
  if (policy_.emulate_fp16) throw std::runtime_error(EmulatedDtypeErrorText(site.op, op.input, op.weight));
}

}  // namespace framegate
