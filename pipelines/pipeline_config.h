// Configuration of one generation as data: the reference model's size, the sampler and
// the latent geometry. Sizes are rows of a table (kReferenceSizes), not code paths.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/status.h"

namespace framegate {

enum class SamplerKind { kDdim, kEuler };
const char* SamplerKindName(SamplerKind kind);  // "ddim" / "euler"
std::optional<SamplerKind> ParseSamplerKind(const std::string& name);

struct SamplerConfig {
  SamplerKind kind = SamplerKind::kDdim;
  int steps = 8;
  double guidance = 1.0;  // > 1: classifier-free guidance (conditional + unconditional pass)
};

// Latent video and conditioning geometry shared by every denoiser/decoder pair.
struct LatentGeometry {
  int64_t channels = 4, frames = 8, height = 16, width = 16;  // latent [B, C, T, h, w]
  int64_t cond_tokens = 8, cond_dim = 64;                     // conditioning [B, L, D]
};

// One row of the reference pipeline's size table.
struct ReferenceSize {
  std::string name;
  LatentGeometry latent;
  int64_t patch = 1;              // spatial patch of the input projection (Conv3d k=(1,p,p))
  int64_t hidden = 64;            // denoiser width H
  int64_t depth = 2;              // number of (res, spatial attn, temporal attn, cross attn, ff) blocks
  int64_t heads = 4;              // attention heads (H % heads == 0)
  int64_t groups = 8;             // GroupNorm groups
  int64_t decoder_channels = 64;  // decoder width at latent resolution
  int64_t upsample = 4;           // decoder spatial upsampling: 2 or 4
  SamplerConfig sampler;          // default sampler of this size

  int64_t FrameHeight() const { return latent.height * upsample; }
  int64_t FrameWidth() const { return latent.width * upsample; }
};

// The shipped sizes: tiny (CI), small, large (hardware qualification on a GPU).
const std::vector<ReferenceSize>& ReferenceSizes();
StatusOr<ReferenceSize> FindReferenceSize(const std::string& name);

}  // namespace framegate
