// A user's model as a TorchScript package (the contract in docs/architecture.md):
//   DIR/model.toml  name; [latent] channels, frames, height, width; [cond] tokens, dim;
//                   [sampler] kind ("ddim" | "euler"), steps, guidance
//   DIR/denoiser.pt forward(x [B,C,T,h,w], t [B] float32, cond [B,L,D]) -> [B,C,T,h,w]
//   DIR/decoder.pt  forward(z [B,C,T,h,w]) -> [B,3,T,H,W] in [-1, 1]
// A TorchScript package is code: load only packages you trust.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <c10/core/ScalarType.h>

#include "harness/status.h"
#include "pipelines/dtype_policy.h"
#include "pipelines/pipeline_config.h"
#include "pipelines/video_model.h"

namespace framegate {

struct ModelManifest {
  std::string name;
  LatentGeometry latent;
  SamplerConfig sampler;
};

// Parses DIR/model.toml. Errors name the file, the line/column or key, and the problem.
// Integers are read as int64 and range-checked, never narrowed: steps 1..100000 and
// guidance 1..100 (as the CLI's --steps and --guidance), latent and token counts
// 1..4096, cond dim 1..65536, the latent and conditioning at most 2^28 values each.
StatusOr<ModelManifest> ReadModelManifest(const std::string& dir);

// Loads the package, casts both modules to the policy's compute dtype on `device`, and
// checks the contract with one forward of each module on zeros (shapes and dtypes).
// Errors name the file and the problem in one line.
StatusOr<std::unique_ptr<VideoModel>> LoadModelPackage(const std::string& dir, const DtypePolicy& policy,
                                                       c10::Device device);

// Every parameter and buffer of both modules after the policy is applied, as
// "denoiser.<name>" / "decoder.<name>" with its dtype (the dtype audit of a package).
struct PackageTensor {
  std::string name;
  c10::ScalarType dtype;
  int64_t numel = 0;
};
StatusOr<std::vector<PackageTensor>> ListPackageTensors(const std::string& dir, const DtypePolicy& policy,
                                                        c10::Device device);

}  // namespace framegate
