#include "pipelines/pipeline_config.h"

namespace framegate {

const char* SamplerKindName(SamplerKind kind) { return kind == SamplerKind::kDdim ? "ddim" : "euler"; }

std::optional<SamplerKind> ParseSamplerKind(const std::string& name) {
  if (name == "ddim") return SamplerKind::kDdim;
  if (name == "euler") return SamplerKind::kEuler;
  return std::nullopt;
}

const std::vector<ReferenceSize>& ReferenceSizes() {
  // name, latent {C, T, h, w, L, D}, patch, hidden, depth, heads, groups, dec ch, upsample,
  // sampler {kind, steps, guidance}
  static const std::vector<ReferenceSize> sizes = {
      {"tiny", {4, 8, 16, 16, 8, 64}, 1, 64, 2, 4, 8, 64, 4, {SamplerKind::kDdim, 8, 4.0}},
      {"small", {4, 16, 32, 32, 16, 256}, 2, 256, 4, 8, 32, 128, 4, {SamplerKind::kDdim, 20, 5.0}},
      {"large", {4, 16, 64, 64, 77, 768}, 2, 768, 12, 12, 32, 256, 4, {SamplerKind::kDdim, 25, 6.0}},
  };
  return sizes;
}

StatusOr<ReferenceSize> FindReferenceSize(const std::string& name) {
  std::string known;
  for (const ReferenceSize& size : ReferenceSizes()) {
    if (size.name == name) return size;
    known += (known.empty() ? "" : ", ") + size.name;
  }
  return Status::InvalidInput("unknown size '" + name + "' (known: " + known + ")");
}

}  // namespace framegate
