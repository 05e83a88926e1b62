// The reference latent text-to-video diffusion model: a small but complete video UNet-
// style denoiser (3D patch projection, timestep MLP, residual blocks, spatial, temporal
// and cross attention) and a VAE-style decoder. Sizes come from pipeline_config.h.
//
// Shapes (B batch, C latent channels, T frames, h x w latent, H hidden, L x D cond,
// p patch, h' = h / p):
//   x    [B, C, T, h, w] -> patch_embed -> [B, H, T, h', w']
//   t    [B] float32     -> sinusoidal [B, H] -> time_embed MLP -> temb [B, H]
//   cond [B, L, D]
//   block: res(GN, SiLU, Conv3d(1,3,3), + temb) -> spatial attn over h'w' per frame
//          -> temporal attn over T per position -> cross attn to cond -> feed-forward
//   out: GN, SiLU, Conv3d 1x1x1 H -> C p^2, unpatchify -> eps [B, C, T, h, w]
//   decoder: per frame [B*T, C, h, w] -> conv_in -> res -> (2x nearest up, conv, res) x
//            log2(upsample) -> GN, SiLU, conv_out -> [B, 3, T, H', W']
#pragma once

#include <memory>

#include "harness/status.h"
#include "pipelines/fault_cases.h"
#include "pipelines/video_model.h"
#include "pipelines/weight_store.h"

namespace framegate {

class ReferenceModel : public VideoModel {
 public:
  // Creates the weights (FP32, CPU, from weight_seed) and places them on `device` under
  // `policy`, with `fault` built in. Fails (without allocating the weights) when the size
  // does not fit the device.
  static StatusOr<std::unique_ptr<ReferenceModel>> Create(const ReferenceSize& size,
                                                          const DtypePolicy& policy, c10::Device device,
                                                          uint64_t weight_seed = 0,
                                                          FaultCase fault = FaultCase::kNone);

  const LatentGeometry& geometry() const override { return size_.latent; }
  c10::Device device() const override { return device_; }
  c10::ScalarType latent_dtype() const override { return policy_.compute; }
  at::Tensor PredictNoise(const at::Tensor& x, const at::Tensor& t, const at::Tensor& cond) override;
  at::Tensor Decode(const at::Tensor& z) override;
  void BeginStep(int step) override;
  void SetObserver(ModuleObserver observer) override;
  std::string CurrentModule() const override;
  // "" unless the accumulation is emulated: "accumulation emulated on the CPU: ...".
  std::string ObservedSummary() const override;
  // Records every module whose input dtype differs from its weight's (the dtype audit).
  void SetMismatchLog(std::vector<DtypeMismatch>* log) override;

  const WeightStore& weights() const { return weights_; }
  const ReferenceSize& size() const { return size_; }

 private:
  ReferenceModel(ReferenceSize size, DtypePolicy policy, c10::Device device, FaultCase fault);
  void AddWeights(uint64_t seed);
  void ApplyFaultToMasters();
  void ApplyFaultToStored();
  at::Tensor ResBlock(const ForwardContext& ctx, const std::string& name, const at::Tensor& x,
                      const at::Tensor* temb) const;
  at::Tensor DenoiserBlock(const std::string& name, const at::Tensor& h, const at::Tensor& temb,
                           const at::Tensor& cond) const;

  ReferenceSize size_;
  DtypePolicy policy_;          // the denoiser's policy
  DtypePolicy decoder_policy_;  // the decoder's (FP32 when the decoder is an island)
  c10::Device device_;
  FaultCase fault_;
  bool decoding_ = false;
  WeightStore weights_;
  ForwardContext denoiser_ctx_;
  ForwardContext decoder_ctx_;
};

// Bytes the reference model needs on a device for one CFG generation under a policy:
// stored weights plus the peak activations (dominated by attention scores). An estimate
// with a documented margin, used to refuse sizes before allocating anything.
int64_t EstimateReferenceBytes(const ReferenceSize& size, const DtypePolicy& policy);

}  // namespace framegate
