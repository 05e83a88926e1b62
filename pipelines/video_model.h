// VideoModel: what the sampler needs from a latent video diffusion model, whether it is
// framegate's reference model or a user's TorchScript package.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <string>
#include <vector>

#include "harness/error_class.h"
#include "pipelines/layers.h"
#include "pipelines/pipeline_config.h"

namespace framegate {

class VideoModel {
 public:
  virtual ~VideoModel() = default;
  virtual const LatentGeometry& geometry() const = 0;
  virtual c10::Device device() const = 0;
  // The dtype latents and conditioning take (the policy's compute dtype).
  virtual c10::ScalarType latent_dtype() const = 0;
  // Predicted noise for latents x [B, C, T, h, w] (latent_dtype) at timesteps t [B]
  // (float32) under conditioning cond [B, L, D] (latent_dtype). Returns [B, C, T, h, w].
  virtual at::Tensor PredictNoise(const at::Tensor& x, const at::Tensor& t, const at::Tensor& cond) = 0;
  // Decodes latents z [B, C, T, h, w] into RGB video [B, 3, F, H, W], nominally in [-1, 1]
  // (F = T, or more where a package's VAE upsamples in time).
  virtual at::Tensor Decode(const at::Tensor& z) = 0;
  // The sampler step about to run (0-based; -1 for the decode), for observers.
  virtual void BeginStep(int /*step*/) {}
  // Watches every named module's output (no-op for models without named modules).
  virtual void SetObserver(ModuleObserver /*observer*/) {}
  // The named module that ran last ("" when the model has no named modules): after an
  // exception, where it happened; and the op that ran last in it, when ops are watched
  // ("aten::linear"; "" otherwise).
  virtual std::string CurrentModule() const { return ""; }
  virtual std::string CurrentOp() const { return ""; }
  // What the model knows about that op that explains a dtype error raised there ("" when
  // nothing): a package whose weight operand is a tensor constant of its graph says so.
  virtual std::string CurrentOpNote() const { return ""; }
  // The op island entry where the float32 operand of the op running now became float32
  // (PackageObserver::Float32OperandOrigin), "" when not known.
  virtual std::string CurrentFloat32Origin() const { return ""; }
  // Records every module whose input dtype differs from its weight's (the dtype audit);
  // nullptr stops recording.
  virtual void SetMismatchLog(std::vector<DtypeMismatch>* /*log*/) {}
  // What observers can see of the model, for results that must say what they could not
  // see ("41 module calls, 230 ops watched"); "" when everything is seen.
  virtual std::string ObservedSummary() const { return ""; }
  // The ops whose outputs entered an FP32 island from outside since the last call
  // ("decoder.out_mix:aten::add", op island entries), then forgets them; empty for models
  // without per-op hooks.
  virtual std::vector<std::string> TakeIslandInputMakers() { return {}; }
  // Under FP16 emulation of a package: the largest finite |value| held in FP16 since the
  // last call when past half FP16's largest, else 0 (PackageObserver); 0 for models
  // without per-op hooks. Then forgets it.
  virtual double TakeLargestFp16Magnitude() { return 0; }
  // The weights the policy's FP8 storage cannot hold, in words, one per tensor: saturated
  // (values beyond the format's largest, which become it: "decoder.post_quant_conv.weight
  // reaches 821 (6.6% of its values beyond 448)") or flushed (the whole tensor below the
  // smallest normal: "denoiser.proj.weight reaches only 5.91e-05, below 0.015625 (100% of
  // its values flush to zero)"); "" when none.
  virtual std::string WeightsOutOfFp8Range() const { return ""; }
};

// An exception `what` raised while `model` ran, classified with the module and op it was
// raised in and, for a dtype error, the model's note on that op.
inline ClassifiedError ClassifyModelError(const std::string& what, const VideoModel& model) {
  ClassifiedError error = ClassifyError(what, model.CurrentModule(), model.CurrentOp());
  if (error.cls == ErrorClass::kDtypeMismatch) {
    error.note = model.CurrentOpNote();
    error.float32_origin = model.CurrentFloat32Origin();
  }
  return error;
}

}  // namespace framegate
