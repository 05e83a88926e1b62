#include "pipelines/package_observer.h"

namespace framegate {
namespace {

bool IsFloat32(const at::Tensor& t) { return t.defined() && t.scalar_type() == at::kFloat; }

bool IsReducedFloat(const at::Tensor& t) {
  return t.defined() && (t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf);
}

at::Tensor RoundThroughHalf(const at::Tensor& t) { return t.to(at::kHalf).to(at::kFloat); }

enum class MatmulKind { kNone, kLinear, kMatmul, kConvolution };

// How an op accumulates, for the emulation: linear (x, W, b), a product of two operands,
// a convolution (TF32 inputs only), or none of these.
MatmulKind KindOf(const std::string& op) {
  if (op == "aten::linear") return MatmulKind::kLinear;
  if (op == "aten::matmul" || op == "aten::mm" || op == "aten::bmm") return MatmulKind::kMatmul;
  if (op == "aten::conv1d" || op == "aten::conv2d" || op == "aten::conv3d" || op == "aten::_convolution") {
    return MatmulKind::kConvolution;
  }
  return MatmulKind::kNone;
}

}  // namespace

std::string JoinModulePath(const std::string& path, const std::string& callee) {
  if (callee.empty()) return path;
  return path.empty() ? callee : path + "." + callee;
}

at::Tensor PackageObserver::Before(const std::string& path, const GraphSite& site, int input_index,
                                   const at::Tensor& value) {
  if (site.kind == GraphSite::Kind::kOp) {
    if (site.weight_input >= 0 && mismatch_log_ != nullptr) AuditWeightedOp(path, site, input_index, value);
    if (!accumulation_.active() || input_index > 2) return value;
    const MatmulKind kind = KindOf(site.op);
    if (kind == MatmulKind::kNone) return value;
    const at::Tensor in = accumulation_.tf32_inputs && input_index < 2 ? RoundToTf32(value) : value;
    if (kind != MatmulKind::kConvolution) {
      if (matmul_.site != &site) matmul_ = MatmulOperands{&site};
      matmul_.operands[input_index] = in;
    }
    return in;
  }
  // A call into an island from outside it: its inputs enter in float32.
  const std::string callee = JoinModulePath(path, site.callee);
  if (IsReducedFloat(value) && policy_.InFp32Module(callee) && !policy_.InFp32Module(path))
    return value.to(at::kFloat);
  return value;
}

at::Tensor PackageObserver::After(const std::string& path, const GraphSite& site, int output_index,
                                  const at::Tensor& value) {
  (void)output_index;
  at::Tensor out = value;
  const bool in_island = policy_.InFp32Module(path);
  if (site.kind == GraphSite::Kind::kModuleCall && !site.callee.empty() && in_island) {
    // `path` is the callee's; leaving an island for a caller outside it.
    const std::string caller = path.substr(0, path.size() - site.callee.size() - 1);
    if (!policy_.InFp32Module(caller) && IsFloat32(out)) {
      out = policy_.emulate_fp16 ? RoundThroughHalf(out) : out.to(policy_.compute);
    }
  } else if (site.kind == GraphSite::Kind::kOp) {
    if (matmul_.site == &site) out = EmulateAccumulation(path, site, out);
    if (policy_.emulate_fp16 && !in_island && IsFloat32(out)) out = RoundThroughHalf(out);
  }
  if (observer_ && out.defined() && out.is_floating_point()) {
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
  if (acc.reduced_sum == c10::ScalarType::Undefined || !a.defined() || !b.defined() ||
      !value.is_floating_point()) {
    return value;  // TF32 alone is in the (rounded) inputs already
  }
  const at::Tensor emulated = KindOf(site.op) == MatmulKind::kLinear
                                  ? EmulatedLinear(a, b, operands.operands[2], acc)
                                  : EmulatedMatmul(a, b, acc);
  return emulated.sizes() == value.sizes() ? emulated.to(value.scalar_type()) : value;
}

at::Tensor PackageObserver::EnterRoot(const std::string& root, const at::Tensor& value) const {
  return IsReducedFloat(value) && policy_.InFp32Module(root) ? value.to(at::kFloat) : value;
}

at::Tensor PackageObserver::LeaveRoot(const std::string& root, const at::Tensor& value) const {
  if (!IsFloat32(value) || !policy_.InFp32Module(root)) return value;
  return policy_.emulate_fp16 ? RoundThroughHalf(value) : value.to(policy_.compute);
}

void PackageObserver::AuditWeightedOp(const std::string& path, const GraphSite& site, int input_index,
                                      const at::Tensor& value) {
  if (input_index > 1) return;  // the two operands come first (a bias is not one)
  if (pending_.site != &site) pending_ = PendingOp{&site};
  if (!value.defined() || !value.is_floating_point()) return;
  if (input_index == site.weight_input) {
    pending_.weight = value.scalar_type();
  } else if (pending_.input == c10::ScalarType::Undefined) {
    pending_.input = value.scalar_type();  // the first operand that is not the weight
  }
  if (pending_.input == c10::ScalarType::Undefined || pending_.weight == c10::ScalarType::Undefined) return;
  if (pending_.input != pending_.weight) {
    mismatch_log_->push_back({path + " (" + site.op + ")", pending_.input, pending_.weight});
  }
  pending_ = PendingOp{};
}

}  // namespace framegate
