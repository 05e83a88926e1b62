#include "store/synthetic_results.h"

#include <cmath>

namespace framegate {
namespace {

// A small deterministic hash to a double in [0, 1).
double Unit(uint64_t a, uint64_t b) {
  uint64_t x = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull);
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return static_cast<double>(x >> 11) / 9007199254740992.0;
}

}  // namespace

CellResult SyntheticCellResult(int index, const std::string& device, uint64_t variant,
                               const SyntheticShape& shape) {
  static const char* const kPolicies[] = {"fp32", "bf16", "fp16-emulated", "fp8-e4m3"};
  CellResult r;
  r.cell.size = "tiny";
  r.cell.device = device;
  r.cell.policy = kPolicies[index % 4];
  r.cell.seed = static_cast<uint64_t>(index);
  r.cell.steps = shape.steps;
  r.cell.requirements = {"bf16"};
  r.policy_used = r.cell.policy;
  r.status = CellStatus::kPass;
  r.golden = "golden/tiny-seed" + std::to_string(index) + ".safetensors";
  r.repro = "framegate check --size tiny --policy " + r.cell.policy + " --seed " + std::to_string(index);
  const double noise = Unit(static_cast<uint64_t>(index), variant);
  ComparisonMetrics m;
  for (int f = 0; f < shape.frames; ++f) {
    m.video.frames.push_back({40.0 + 0.1 * noise + 0.1 * f, 0.99 - 0.001 * f});
  }
  m.video.min_psnr = 40.0 + 0.1 * noise;  // night-to-night noise under 0.1 dB
  m.video.mean_ssim = 0.99 - 0.0005 * noise;
  m.video.min_ssim = 0.98;
  m.video.max_abs = 0.01 + 0.001 * noise;
  m.video.rel_l2 = 0.004 + 0.0001 * noise;
  m.video.temporal_rel_l2 = 0.003;
  m.latent_cosine = 0.9999;
  r.metrics = m;
  for (int s = 0; s < shape.steps; ++s) {
    r.health.step_latents.push_back({0, 0});
    r.timings.step_seconds.push_back(0.01 + 0.001 * s);
  }
  r.health.frames.assign(static_cast<size_t>(shape.frames), FrameDefect::kNone);
  for (int p = 0; p < shape.probes; ++p) {
    const double absmax = 1000.0 * (p + 1);
    r.probes.push_back(
        {"blocks." + std::to_string(p) + ".ff", "float16", absmax, 0.0, 1e-4, std::log2(65504.0 / absmax)});
  }
  r.timings.warmup = 1;
  r.timings.load_seconds = 0.2;
  for (int k = 0; k < shape.repeats; ++k) {
    r.timings.generation_seconds.push_back(0.5 + 0.01 * Unit(variant, static_cast<uint64_t>(k)));
  }
  r.timings.decode_seconds = 0.05;
  r.timings.peak_rss_bytes = 512ll << 20;
  return r;
}

RunInfo SyntheticRunInfo(const std::string& run_id, const std::string& started_at) {
  RunInfo info;
  info.run_id = run_id;
  info.started_at = started_at;
  info.host = "host-a";
  info.git_sha = "0123456789ab";
  info.framegate_version = "0.1.0";
  info.libtorch_version = "1.13.0";
  info.blas = "/usr/lib/x86_64-linux-gnu/libopenblas.so.0";
  info.tags = "nightly";
  info.matrix_path = "matrix/nightly.toml";
  info.matrix_sha256 = std::string(64, 'a');
  info.command = "framegate run matrix/nightly.toml";
  return info;
}

}  // namespace framegate
