// The sampler loop: DDIM (eta = 0) and Euler over a scaled-linear DDPM schedule, with
// classifier-free guidance, then the decode. pipelines/crosscheck/python_sampler.py is
// the Python twin of this file; keep the two in step.
//
// Schedule: 1000 training steps, betas = linspace(sqrt(0.00085), sqrt(0.012), 1000)^2,
// alpha_bar = cumprod(1 - betas). With S steps the timesteps are
// t_i = round(999 * (S - 1 - i) / (S - 1)) (t_0 = 999 for S = 1).
//   DDIM:  x <- noise; eps = model(x, t_i); x0 = (x - eps sqrt(1 - a_i)) / sqrt(a_i);
//          x <- x0 sqrt(a_prev) + eps sqrt(1 - a_prev), a_prev = alpha_bar[t_{i+1}] or 1.
//   Euler: sigma_i = sqrt((1 - a_i) / a_i), sigma_S = 0; x <- noise sqrt(sigma_0^2 + 1);
//          eps = model(x / sqrt(sigma_i^2 + 1), t_i); x <- x + eps (sigma_{i+1} - sigma_i).
//   CFG (guidance g > 1): one batch [uncond; cond] with uncond = zeros;
//          eps = eps_u + (eps_c - eps_u) g.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "pipelines/pipeline_config.h"
#include "pipelines/video_model.h"

namespace framegate {

std::vector<double> AlphasCumprod();               // [1000]
std::vector<int64_t> SamplerTimesteps(int steps);  // [steps], descending

// The initial noise [1, C, T, h, w] and conditioning [1, L, D] of a seed: float32, CPU.
struct GenerationInputs {
  at::Tensor noise;
  at::Tensor cond;
};
GenerationInputs DrawInputs(const LatentGeometry& geometry, uint64_t seed);

struct GenerationResult {
  at::Tensor latents;                // final latents [1, C, T, h, w], float32, CPU
  at::Tensor decoded;                // decoder output [1, 3, T, H, W], float32, CPU, not clamped
  at::Tensor frames;                 // [T, H, W, 3], float32, CPU, in [0, 1]
  std::vector<double> step_seconds;  // wall time of each sampler step
  // [S + 1, 1, C, T, h, w] float32, CPU: the latents before step 0, then after each step
  // (Generate with keep_trajectory; ReplaySteps: each step's output from the golden's input).
  at::Tensor trajectory;
  double decode_seconds = 0;
};

// Called after each sampler step with the step index and the latents (device, compute dtype).
using StepObserver = std::function<void(int step, const at::Tensor& latents)>;

// Runs the sampler and the decoder. Exceptions from the model (c10::Error) propagate: the
// caller classifies them; so does a std::runtime_error "step N: the denoiser returned
// shape [...] for latents of shape [...]" when the model's eps, on any step, is not the
// shape of the latents it was given (it would be broadcast).
GenerationResult Generate(VideoModel& model, const SamplerConfig& sampler, uint64_t seed,
                          const StepObserver& on_step = nullptr, bool keep_trajectory = false);

// Step replay (teacher forcing): runs each sampler step i from `trajectory[i]` (a
// golden's latents before step i, [S + 1, 1, C, T, h, w]) instead of from the previous
// step's output, and decodes `trajectory[S]`. result.trajectory[i + 1] is step i's output
// and result.latents the last step's; an error is thus seen at the step that makes it,
// not amplified by the steps after it. Throws std::invalid_argument when `trajectory`
// has not S + 1 latents; the model's exceptions propagate as in Generate.
GenerationResult ReplaySteps(VideoModel& model, const SamplerConfig& sampler, uint64_t seed,
                             const at::Tensor& trajectory, const StepObserver& on_step = nullptr);

// Decoder output [1, 3, T, H, W] in [-1, 1] -> frames [T, H, W, 3] in [0, 1] (float32, CPU).
at::Tensor FramesFromDecoded(const at::Tensor& decoded);

}  // namespace framegate
