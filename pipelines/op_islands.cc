#include "pipelines/op_islands.h"

#include <fnmatch.h>

#include <cmath>

namespace framegate {
namespace {

bool IsReducedFloat(const at::Tensor& t) {
  return t.defined() && (t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf);
}

}  // namespace

bool IsOpIslandEntry(const std::string& entry) { return entry.find(':') != std::string::npos; }

std::string OpIslandEntry(const std::string& path, const std::string& op) { return path + ":" + op; }

std::string ModuleOfIslandEntry(const std::string& entry) { return entry.substr(0, entry.find(':')); }

std::string OpOfIslandEntry(const std::string& entry) {
  const size_t colon = entry.find(':');
  return colon == std::string::npos ? "" : entry.substr(colon + 1);
}

bool MatchesOpIsland(const DtypePolicy& policy, const std::string& path, const std::string& op) {
  for (const std::string& entry : policy.fp32_modules) {
    const size_t colon = entry.find(':');
    if (colon == std::string::npos) continue;
    const std::string path_glob = entry.substr(0, colon), op_glob = entry.substr(colon + 1);
    if (fnmatch(path_glob.c_str(), path.c_str(), 0) == 0 && fnmatch(op_glob.c_str(), op.c_str(), 0) == 0) {
      return true;
    }
  }
  return false;
}

bool InFp32Op(const DtypePolicy& policy, const std::string& path, const std::string& op) {
  return policy.InFp32Module(path) || MatchesOpIsland(policy, path, op);
}

bool IslandObserver::IsIslandOp(const std::string& path, const GraphSite& site) const {
  return site.kind == GraphSite::Kind::kOp && !policy_.InFp32Module(path) &&
         MatchesOpIsland(policy_, path, site.op);
}

bool IslandObserver::IsIslandOutput(const at::Tensor& value) const {
  return island_outputs_.Find(value) != nullptr;
}

at::Tensor RoundAsEmulatedFp16(const at::Tensor& value, const DtypePolicy& policy) {
  if (policy.fp16_headroom_bits == 0) return value.to(at::kHalf).to(at::kFloat);
  // A power of two scales exactly: finite values round as in FP16 (but for subnormals).
  const double scale = std::ldexp(1.0, policy.fp16_headroom_bits);
  return (value * scale).to(at::kHalf).to(at::kFloat) / scale;
}

at::Tensor IslandObserver::ToCompute(const at::Tensor& value) const {
  return policy_.emulate_fp16 ? RoundAsEmulatedFp16(value, policy_) : value.to(policy_.compute);
}

at::Tensor IslandObserver::Before(const std::string& path, const GraphSite& site, int input_index,
                                  const at::Tensor& value) {
  if (!active_) return inner_.Before(path, site, input_index, value);
  if (site.kind == GraphSite::Kind::kCopyingView) {
    copy_of_island_output_ = IsIslandOutput(value) ? &site : nullptr;
    return inner_.Before(path, site, input_index, value);
  }
  if (IsIslandOp(path, site)) {
    if (!IsIslandOutput(value)) inner_.EnterIsland(value);
    return IsReducedFloat(value) ? value.to(at::kFloat) : value;
  }
  // A module call is not a consumer: the ops inside take the value (an island op there
  // in float32).
  if (site.kind != GraphSite::Kind::kOp || !IsIslandOutput(value) || policy_.InFp32Module(path) ||
      value.scalar_type() != at::kFloat) {
    return inner_.Before(path, site, input_index, value);
  }
  return inner_.Before(path, site, input_index, ToCompute(value));
}

at::Tensor IslandObserver::After(const std::string& path, const GraphSite& site, int output_index,
                                 const at::Tensor& value) {
  if (active_ && site.kind == GraphSite::Kind::kCopyingView && copy_of_island_output_ == &site) {
    copy_of_island_output_ = nullptr;
    const at::Tensor copy = inner_.After(path, site, output_index, value);
    Remember(copy);  // a reshape's copy of an island output is one too
    return copy;
  }
  if (active_ && site.kind == GraphSite::Kind::kModuleCall && !site.callee.empty() &&
      policy_.InFp32Module(path)) {
    // `path` is the callee's: a module island returning to a caller outside the islands
    // hands over its float32 output, a copy of its own (the output may be a view of a
    // value the caller still holds).
    const std::string caller = path.substr(0, path.size() - site.callee.size() - 1);
    const at::Tensor out = inner_.After(path, site, output_index, value);
    if (policy_.InFp32Module(caller) || !out.defined() || out.scalar_type() != at::kFloat) return out;
    const at::Tensor handed = out.clone();
    inner_.HoldLike(handed, out);
    Remember(handed);
    return handed;
  }
  if (!active_ || !IsIslandOp(path, site)) return inner_.After(path, site, output_index, value);
  if (value.defined() && value.is_floating_point()) {
    Remember(value);
    if (watch_) watch_(ModuleOutput{path, ModuleKind::kOther, step_, value, site.op.c_str()});
  }
  return value;
}

at::Tensor IslandObserver::LeaveRoot(const at::Tensor& value) const {
  return active_ && IsIslandOutput(value) && value.scalar_type() == at::kFloat ? ToCompute(value) : value;
}

void IslandObserver::Remember(const at::Tensor& island_output) { island_outputs_.Put(island_output, true); }

}  // namespace framegate
