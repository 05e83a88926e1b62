#include "pipelines/sampler.h"

#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>

#include <ATen/Functions.h>

#include "harness/device_sync.h"
#include "pipelines/seeded_noise.h"

namespace framegate {
namespace {

constexpr int kTrainSteps = 1000;

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The model's eps for latents x, checked to have x's shape on every step: a model that
// passed the contract check can still change its output's shape later, and the sampler's
// arithmetic would broadcast it silently. Throws std::runtime_error naming the step and
// both shapes (the caller classifies it as the model's error).
at::Tensor CheckedNoise(VideoModel& model, int step, const at::Tensor& x, const at::Tensor& t,
                        const at::Tensor& cond) {
  at::Tensor eps = model.PredictNoise(x, t, cond);
  if (eps.sizes() != x.sizes()) {
    throw std::runtime_error("step " + std::to_string(step) + ": the denoiser returned shape " +
                             c10::str(eps.sizes()) + " for latents of shape " + c10::str(x.sizes()));
  }
  return eps;
}

// eps for latents x [1, C, T, h, w] at sampler step `step`: one pass, or a CFG batch
// [uncond; cond].
at::Tensor GuidedNoise(VideoModel& model, int step, const at::Tensor& x, double t, const at::Tensor& cond,
                       double guidance) {
  const auto f32 = at::TensorOptions().dtype(at::kFloat).device(x.device());
  if (guidance == 1.0) return CheckedNoise(model, step, x, at::full({1}, t, f32), cond);
  const at::Tensor x_in = at::cat({x, x}, 0);                           // [2, C, T, h, w]
  const at::Tensor cond_in = at::cat({at::zeros_like(cond), cond}, 0);  // [2, L, D]
  const at::Tensor eps = CheckedNoise(model, step, x_in, at::full({2}, t, f32), cond_in);
  const at::Tensor eps_u = eps.narrow(0, 0, 1), eps_c = eps.narrow(0, 1, 1);
  return eps_u + (eps_c - eps_u) * guidance;
}

}  // namespace

std::vector<double> AlphasCumprod() {
  std::vector<double> alpha_bar(kTrainSteps);
  const double lo = std::sqrt(0.00085), hi = std::sqrt(0.012);
  double prod = 1.0;
  for (int i = 0; i < kTrainSteps; ++i) {
    const double root = lo + (hi - lo) * i / (kTrainSteps - 1);
    prod *= 1.0 - root * root;
    alpha_bar[i] = prod;
  }
  return alpha_bar;
}

std::vector<int64_t> SamplerTimesteps(int steps) {
  std::vector<int64_t> t(steps);
  for (int i = 0; i < steps; ++i) {
    t[i] =
        steps == 1 ? kTrainSteps - 1 : std::llround(double(kTrainSteps - 1) * (steps - 1 - i) / (steps - 1));
  }
  return t;
}

GenerationInputs DrawInputs(const LatentGeometry& g, uint64_t seed) {
  return {SeededNormal(seed, StreamOf("noise"), {1, g.channels, g.frames, g.height, g.width}),
          SeededNormal(seed, StreamOf("cond"), {1, g.cond_tokens, g.cond_dim})};
}

at::Tensor FramesFromDecoded(const at::Tensor& decoded) {
  // [1, 3, T, H, W] -> [T, H, W, 3]
  return decoded.to(at::kFloat)
      .to(at::kCPU)
      .add(1.0)
      .mul(0.5)
      .clamp(0.0, 1.0)
      .select(0, 0)
      .permute({1, 2, 3, 0})
      .contiguous();
}

namespace {

// The schedule of a sampler run: timesteps, alpha_bar and Euler's sigmas.
struct Schedule {
  std::vector<double> alpha_bar = AlphasCumprod();
  std::vector<int64_t> timesteps;
  int n = 0;
  explicit Schedule(int steps) : timesteps(SamplerTimesteps(steps)), n(static_cast<int>(timesteps.size())) {}
  double sigma(int i) const {  // sigma_i, with sigma_n = 0
    if (i >= n) return 0.0;
    const double a = alpha_bar[timesteps[i]];
    return std::sqrt((1.0 - a) / a);
  }
};

// Sampler step i from latents x: the latents after it (the formulas at the top of sampler.h).
at::Tensor SamplerStep(VideoModel& model, const SamplerConfig& sampler, const Schedule& s, int i,
                       const at::Tensor& x, const at::Tensor& cond) {
  model.BeginStep(i);
  const double t = static_cast<double>(s.timesteps[i]);
  if (sampler.kind == SamplerKind::kDdim) {
    const double a = s.alpha_bar[s.timesteps[i]];
    const double a_prev = i + 1 < s.n ? s.alpha_bar[s.timesteps[i + 1]] : 1.0;
    const at::Tensor eps = GuidedNoise(model, i, x, t, cond, sampler.guidance);
    const at::Tensor x0 = (x - eps * std::sqrt(1.0 - a)) / std::sqrt(a);
    return x0 * std::sqrt(a_prev) + eps * std::sqrt(1.0 - a_prev);
  }
  const double sigma = s.sigma(i);
  const at::Tensor eps = GuidedNoise(model, i, x / std::sqrt(sigma * sigma + 1.0), t, cond, sampler.guidance);
  return x + eps * (s.sigma(i + 1) - sigma);
}

// Decodes the final latents x into `result` (decoded, frames, decode_seconds).
void DecodeInto(VideoModel& model, const at::Tensor& x, GenerationResult& result) {
  const auto start = std::chrono::steady_clock::now();
  model.BeginStep(-1);
  const at::Tensor decoded = model.Decode(x);
  SynchronizeDevice(model.device());
  result.decode_seconds = SecondsSince(start);
  result.decoded = decoded.to(at::kFloat).to(at::kCPU).contiguous();
  result.frames = FramesFromDecoded(result.decoded);
}

at::Tensor OnCpuFloat(const at::Tensor& x) { return x.to(at::kFloat).to(at::kCPU); }

}  // namespace

GenerationResult Generate(VideoModel& model, const SamplerConfig& sampler, uint64_t seed,
                          const StepObserver& on_step, bool keep_trajectory) {
  const GenerationInputs inputs = DrawInputs(model.geometry(), seed);
  const auto opts = at::TensorOptions().dtype(model.latent_dtype()).device(model.device());
  const at::Tensor cond = inputs.cond.to(opts);
  const Schedule schedule(sampler.steps);
  GenerationResult result;
  at::Tensor x = inputs.noise.to(opts);  // [1, C, T, h, w]
  if (sampler.kind == SamplerKind::kEuler) x = x * std::sqrt(schedule.sigma(0) * schedule.sigma(0) + 1.0);
  std::vector<at::Tensor> trajectory;
  if (keep_trajectory) trajectory.push_back(OnCpuFloat(x));
  for (int i = 0; i < schedule.n; ++i) {
    const auto start = std::chrono::steady_clock::now();
    // Cast back: a float32 prediction (an upcast head) promotes the step's arithmetic, and
    // pipelines cast the latents to the model's dtype before its next call.
    x = SamplerStep(model, sampler, schedule, i, x, cond).to(opts);
    SynchronizeDevice(model.device());
    result.step_seconds.push_back(SecondsSince(start));
    if (keep_trajectory) trajectory.push_back(OnCpuFloat(x));
    if (on_step) on_step(i, x);
  }
  DecodeInto(model, x, result);
  result.latents = OnCpuFloat(x);
  if (keep_trajectory) result.trajectory = at::stack(trajectory);
  return result;
}

GenerationResult ReplaySteps(VideoModel& model, const SamplerConfig& sampler, uint64_t seed,
                             const at::Tensor& trajectory, const StepObserver& on_step) {
  const Schedule schedule(sampler.steps);
  if (trajectory.dim() != 6 || trajectory.size(0) != schedule.n + 1) {
    throw std::invalid_argument("step replay needs the latents before and after each of " +
                                std::to_string(schedule.n) + " steps, got shape " +
                                c10::str(trajectory.sizes()));
  }
  const auto opts = at::TensorOptions().dtype(model.latent_dtype()).device(model.device());
  const at::Tensor cond = DrawInputs(model.geometry(), seed).cond.to(opts);
  GenerationResult result;
  std::vector<at::Tensor> outputs = {trajectory[0]};
  for (int i = 0; i < schedule.n; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const at::Tensor x = SamplerStep(model, sampler, schedule, i, trajectory[i].to(opts), cond);
    SynchronizeDevice(model.device());
    result.step_seconds.push_back(SecondsSince(start));
    outputs.push_back(OnCpuFloat(x));
    if (on_step) on_step(i, x);
  }
  DecodeInto(model, trajectory[schedule.n].to(opts), result);
  result.trajectory = at::stack(outputs);
  result.latents = outputs.back();
  return result;
}

}  // namespace framegate
