#include "pipelines/reference_model.h"

#include <cmath>

#include <ATen/Functions.h>

#include "harness/memory_info.h"

namespace framegate {
namespace {

constexpr double kBiasStd = 0.02;
constexpr double kAttnOverflowGain = 400.0;
constexpr double kAttnAccumulationValue = 100.0;
constexpr double kActivationOverflowGain = 3000.0;

// He-like scale for a layer with `fan_in` inputs, times `gain`.
double InitStd(int64_t fan_in, double gain = 1.0) { return gain / std::sqrt(double(fan_in)); }

int64_t Log2(int64_t v) {
  int64_t n = 0;
  while (v > 1) v >>= 1, ++n;
  return n;
}

}  // namespace

ReferenceModel::ReferenceModel(ReferenceSize size, DtypePolicy policy, c10::Device device, FaultCase fault)
    : size_(std::move(size)),
      policy_(std::move(policy)),
      decoder_policy_(DecoderPolicyOf(policy_)),
      device_(device),
      fault_(fault),
      denoiser_ctx_(weights_, policy_),
      decoder_ctx_(weights_, decoder_policy_) {
  decoder_ctx_.set_step(-1);
  denoiser_ctx_.set_accumulation(AccumulationOf(policy_, device_.is_cpu()));
  decoder_ctx_.set_accumulation(AccumulationOf(decoder_policy_, device_.is_cpu()));
  denoiser_ctx_.set_fp8_upcast(fault_ != FaultCase::kFp8NoUpcast);
}

StatusOr<std::unique_ptr<ReferenceModel>> ReferenceModel::Create(const ReferenceSize& size,
                                                                 const DtypePolicy& policy,
                                                                 c10::Device device, uint64_t weight_seed,
                                                                 FaultCase fault) {
  const int64_t need = EstimateReferenceBytes(size, policy);
  const int64_t have = AvailableDeviceBytes(device);
  if (have > 0 && need > have) {
    return Status::Unsupported("size '" + size.name + "' needs about " + FormatBytes(need) + " on " +
                               device.str() + ", which has " + FormatBytes(have) + " available");
  }
  std::unique_ptr<ReferenceModel> model(new ReferenceModel(size, policy, device, fault));
  model->AddWeights(weight_seed);
  model->ApplyFaultToMasters();
  FG_RETURN_IF_ERROR(model->weights_.Place(policy, device));
  model->ApplyFaultToStored();
  return model;
}

void ReferenceModel::ApplyFaultToMasters() {
  switch (fault_) {
    case FaultCase::kAttnOverflow:
      // q and k x kAttnGain: block 0's spatial logits grow by kAttnGain^2 (~N(0, 1) -> far
      // beyond 65504), which FP32 and BF16 represent and FP16 does not.
      for (const char* w : {"q.weight", "k.weight"})
        weights_.ScaleMaster(std::string("blocks.0.spatial_attn.") + w, kAttnOverflowGain);
      break;
    case FaultCase::kAttnFp16Accumulation: {
      // q = +C on every dim, k = +C on the first half of each head's dims and -C on the
      // second: every score is exactly 0, but the first 8 products already sum to
      // 8 C^2 = 80000 > 65504. Every activation (|C| = 100) fits FP16; only an FP16
      // running sum overflows (Inf, then NaN in the softmax).
      const std::string attn = "blocks.0.spatial_attn.";
      const int64_t hidden = size_.hidden, head_dim = hidden / size_.heads;
      at::Tensor k_bias = at::full({hidden}, kAttnAccumulationValue);
      for (int64_t d = 0; d < hidden; ++d) {
        if (d % head_dim >= head_dim / 2) k_bias[d] = -kAttnAccumulationValue;
      }
      for (const char* w : {"q.weight", "k.weight"}) weights_.ScaleMaster(attn + w, 0.0);
      weights_.SetMaster(attn + "q.bias", at::full({hidden}, kAttnAccumulationValue));
      weights_.SetMaster(attn + "k.bias", k_bias);
      break;
    }
    case FaultCase::kActivationOverflow:
      // An input projection with a large gain: its unnormalised output tracks the latents,
      // whose magnitude grows over the steps (DDIM's x0 estimates), and overflows FP16 late.
      weights_.ScaleMaster("patch_embed.weight", kActivationOverflowGain);
      break;
    default:
      break;
  }
}

void ReferenceModel::ApplyFaultToStored() {
  if (fault_ != FaultCase::kTimeEmbedFp32) return;
  // The timestep MLP stays FP32 whatever the policy cast the rest to.
  for (const char* w :
       {"time_embed.0.weight", "time_embed.0.bias", "time_embed.2.weight", "time_embed.2.bias"})
    weights_.OverrideStored(w, weights_.Get(w).master.to(device_));
}

std::string ReferenceModel::ObservedSummary() const {
  return denoiser_ctx_.AccumulationFor("", ModuleKind::kOther).ObservedNote();
}

std::string ReferenceModel::CurrentModule() const {
  return decoding_ ? decoder_ctx_.current_module() : denoiser_ctx_.current_module();
}

void ReferenceModel::SetMismatchLog(std::vector<DtypeMismatch>* log) {
  denoiser_ctx_.set_mismatch_log(log);
  decoder_ctx_.set_mismatch_log(log);
}

void ReferenceModel::AddWeights(uint64_t seed) {
  const LatentGeometry& g = size_.latent;
  const int64_t c = g.channels, p = size_.patch, hid = size_.hidden, d = g.cond_dim;
  WeightStore& w = weights_;
  auto linear = [&](const std::string& name, ModuleKind kind, int64_t out, int64_t in, double gain = 1.0) {
    w.AddNormal(name + ".weight", kind, {out, in}, InitStd(in, gain), seed);
    w.AddNormal(name + ".bias", kind, {out}, kBiasStd, seed);
  };
  auto conv = [&](const std::string& name, ModuleKind kind, std::vector<int64_t> shape, double gain = 1.0) {
    int64_t fan_in = 1;
    for (size_t i = 1; i < shape.size(); ++i) fan_in *= shape[i];
    w.AddNormal(name + ".bias", kind, {shape[0]}, kBiasStd, seed);
    w.AddNormal(name + ".weight", kind, std::move(shape), InitStd(fan_in, gain), seed);
  };
  auto norm = [&](const std::string& name, int64_t ch) {
    w.AddConstant(name + ".weight", ModuleKind::kNorm, {ch}, 1.0);
    w.AddConstant(name + ".bias", ModuleKind::kNorm, {ch}, 0.0);
  };
  auto attention = [&](const std::string& name, int64_t context_dim) {
    norm(name + ".norm", hid);
    linear(name + ".q", ModuleKind::kOther, hid, hid);
    linear(name + ".k", ModuleKind::kOther, hid, context_dim);
    linear(name + ".v", ModuleKind::kOther, hid, context_dim);
    linear(name + ".out", ModuleKind::kOther, hid, hid, 0.5);
  };
  auto res = [&](const std::string& name, int64_t ch, bool is3d, bool with_temb, ModuleKind kind) {
    const std::vector<int64_t> k =
        is3d ? std::vector<int64_t>{ch, ch, 1, 3, 3} : std::vector<int64_t>{ch, ch, 3, 3};
    norm(name + ".norm1", ch);
    conv(name + ".conv1", kind, k);
    if (with_temb) linear(name + ".temb", ModuleKind::kOther, ch, hid);
    norm(name + ".norm2", ch);
    conv(name + ".conv2", kind, k, 0.5);
  };

  // Denoiser.
  conv("patch_embed", ModuleKind::kOther, {hid, c, 1, p, p});
  linear("time_embed.0", ModuleKind::kTimeEmbed, hid, hid, std::sqrt(2.0));
  linear("time_embed.2", ModuleKind::kTimeEmbed, hid, hid);
  for (int64_t i = 0; i < size_.depth; ++i) {
    const std::string b = "blocks." + std::to_string(i);
    res(b + ".res", hid, /*is3d=*/true, /*with_temb=*/true, ModuleKind::kOther);
    attention(b + ".spatial_attn", hid);
    attention(b + ".temporal_attn", hid);
    attention(b + ".cross_attn", d);
    norm(b + ".ff.norm", hid);
    linear(b + ".ff.fc1", ModuleKind::kOther, 4 * hid, hid);
    linear(b + ".ff.fc2", ModuleKind::kOther, hid, 4 * hid, 0.5);
  }
  norm("out.norm", hid);
  conv("out.proj", ModuleKind::kOther, {c * p * p, hid, 1, 1, 1}, 1.5);

  // Decoder: channels halve at every 2x upsampling.
  int64_t ch = size_.decoder_channels;
  conv("decoder.conv_in", ModuleKind::kDecoder, {ch, c, 3, 3});
  res("decoder.mid", ch, /*is3d=*/false, /*with_temb=*/false, ModuleKind::kDecoder);
  for (int64_t u = 0; u < Log2(size_.upsample); ++u) {
    const std::string name = "decoder.up" + std::to_string(u);
    conv(name + ".conv", ModuleKind::kDecoder, {ch / 2, ch, 3, 3});
    ch /= 2;
    res(name + ".res", ch, /*is3d=*/false, /*with_temb=*/false, ModuleKind::kDecoder);
  }
  norm("decoder.norm_out", ch);
  // SiLU(GroupNorm(.)) has second moment ~0.355: this gain gives outputs of std ~0.45.
  conv("decoder.conv_out", ModuleKind::kDecoder, {3, ch, 3, 3}, 0.45 / std::sqrt(0.355));
}

void ReferenceModel::BeginStep(int step) {
  decoding_ = step < 0;
  denoiser_ctx_.set_step(step);
}

void ReferenceModel::SetObserver(ModuleObserver observer) {
  denoiser_ctx_.set_observer(observer);
  decoder_ctx_.set_observer(std::move(observer));
}

at::Tensor ReferenceModel::ResBlock(const ForwardContext& ctx, const std::string& name, const at::Tensor& x,
                                    const at::Tensor* temb) const {
  const bool is3d = x.dim() == 5;
  const ModuleKind kind = is3d ? ModuleKind::kOther : ModuleKind::kDecoder;
  auto conv = [&](const std::string& n, const at::Tensor& in) {
    return is3d ? Conv3d(ctx, n, kind, in) : Conv2d(ctx, n, kind, in);
  };
  const int64_t groups = std::min<int64_t>(size_.groups, x.size(1));
  at::Tensor h = conv(name + ".conv1", at::silu(GroupNorm(ctx, name + ".norm1", x, groups)));
  if (temb != nullptr) {
    // temb [B, H] -> [B, H, 1, 1, 1]
    h = h + Linear(ctx, name + ".temb", ModuleKind::kOther, at::silu(*temb))
                .view({h.size(0), h.size(1), 1, 1, 1});
  }
  h = conv(name + ".conv2", at::silu(GroupNorm(ctx, name + ".norm2", h, groups)));
  return ctx.Output(name, kind, x + h);
}

at::Tensor ReferenceModel::DenoiserBlock(const std::string& name, const at::Tensor& h_in,
                                         const at::Tensor& temb, const at::Tensor& cond) const {
  const ForwardContext& ctx = denoiser_ctx_;
  const int64_t b = h_in.size(0), hid = h_in.size(1), t = h_in.size(2), y = h_in.size(3), x = h_in.size(4),
                s = y * x;
  at::Tensor h = ResBlock(ctx, name + ".res", h_in, &temb);  // [B, H, T, h', w']

  // Spatial attention: tokens [B*T, h'w', H].
  at::Tensor tokens = h.permute({0, 2, 3, 4, 1}).reshape({b * t, s, hid});
  at::Tensor normed = LayerNorm(ctx, name + ".spatial_attn.norm", tokens);
  tokens = tokens + Attention(ctx, name + ".spatial_attn", normed, normed, size_.heads);
  tokens = ctx.Output(name + ".spatial_attn", ModuleKind::kOther, tokens);

  // Temporal attention: tokens [B*h'w', T, H], frame positions added to its input.
  tokens = tokens.reshape({b, t, s, hid}).permute({0, 2, 1, 3}).reshape({b * s, t, hid});
  at::Tensor frame_pos = SinusoidalEmbedding(
      at::arange(t, at::TensorOptions().dtype(at::kFloat).device(h.device())), hid);  // [T, H]
  normed = LayerNorm(ctx, name + ".temporal_attn.norm", tokens) + ctx.ToActivation(frame_pos);
  tokens = tokens + Attention(ctx, name + ".temporal_attn", normed, normed, size_.heads);
  tokens = ctx.Output(name + ".temporal_attn", ModuleKind::kOther, tokens);

  // Cross attention to the conditioning: tokens [B, T*h'w', H], cond [B, L, D].
  tokens = tokens.reshape({b, s, t, hid}).permute({0, 2, 1, 3}).reshape({b, t * s, hid});
  normed = LayerNorm(ctx, name + ".cross_attn.norm", tokens);
  tokens = tokens + Attention(ctx, name + ".cross_attn", normed, cond, size_.heads);
  tokens = ctx.Output(name + ".cross_attn", ModuleKind::kOther, tokens);

  // Feed-forward: H -> 4H -> H.
  normed = LayerNorm(ctx, name + ".ff.norm", tokens);
  at::Tensor ff = at::gelu(Linear(ctx, name + ".ff.fc1", ModuleKind::kOther, normed));
  tokens = tokens + Linear(ctx, name + ".ff.fc2", ModuleKind::kOther, ff);
  tokens = ctx.Output(name + ".ff", ModuleKind::kOther, tokens);

  // Back to [B, H, T, h', w'].
  return tokens.reshape({b, t, y, x, hid}).permute({0, 4, 1, 2, 3}).contiguous();
}

at::Tensor ReferenceModel::PredictNoise(const at::Tensor& x, const at::Tensor& t, const at::Tensor& cond) {
  const ForwardContext& ctx = denoiser_ctx_;
  const int64_t p = size_.patch, b = x.size(0), c = x.size(1), frames = x.size(2), lh = x.size(3),
                lw = x.size(4);
  // [B, C, T, h, w] -> [B, H, T, h', w']; fault F4 feeds the projection FP32 input.
  const at::Tensor x_in = fault_ == FaultCase::kInputFp32 ? ctx.KeepFloat32(x) : x;
  at::Tensor h = Conv3d(ctx, "patch_embed", ModuleKind::kOther, x_in, {1, p, p});
  // t [B] -> sinusoidal [B, H] -> temb [B, H]
  at::Tensor temb = ctx.ToActivation(SinusoidalEmbedding(t, size_.hidden));
  temb = Linear(ctx, "time_embed.0", ModuleKind::kTimeEmbed, temb);
  temb = Linear(ctx, "time_embed.2", ModuleKind::kTimeEmbed, at::silu(temb));
  for (int64_t i = 0; i < size_.depth; ++i) {
    h = DenoiserBlock("blocks." + std::to_string(i), h, temb, cond);
  }
  const int64_t groups = std::min<int64_t>(size_.groups, h.size(1));
  h = at::silu(GroupNorm(ctx, "out.norm", h, groups));
  at::Tensor out = Conv3d(ctx, "out.proj", ModuleKind::kOther, h);  // [B, C p p, T, h', w']
  // Unpatchify: [B, C, p, p, T, h', w'] -> [B, C, T, h', p, w', p] -> [B, C, T, h, w]
  out = out.reshape({b, c, p, p, frames, lh / p, lw / p})
            .permute({0, 1, 4, 5, 2, 6, 3})
            .reshape({b, c, frames, lh, lw});
  return out;
}

at::Tensor ReferenceModel::Decode(const at::Tensor& z) {
  const ForwardContext& ctx = decoder_ctx_;
  const int64_t b = z.size(0), c = z.size(1), t = z.size(2);
  // Per frame: [B, C, T, h, w] -> [B*T, C, h, w]
  at::Tensor h =
      z.to(decoder_policy_.compute).permute({0, 2, 1, 3, 4}).reshape({b * t, c, z.size(3), z.size(4)});
  h = Conv2d(ctx, "decoder.conv_in", ModuleKind::kDecoder, h);
  h = ResBlock(ctx, "decoder.mid", h, nullptr);
  for (int64_t u = 0; u < Log2(size_.upsample); ++u) {
    const std::string name = "decoder.up" + std::to_string(u);
    h = at::upsample_nearest2d(h, {h.size(2) * 2, h.size(3) * 2});
    h = Conv2d(ctx, name + ".conv", ModuleKind::kDecoder, h);
    h = ResBlock(ctx, name + ".res", h, nullptr);
  }
  h = at::silu(GroupNorm(ctx, "decoder.norm_out", h, std::min<int64_t>(size_.groups, h.size(1))));
  h = Conv2d(ctx, "decoder.conv_out", ModuleKind::kDecoder, h);  // [B*T, 3, H, W]
  // [B*T, 3, H, W] -> [B, 3, T, H, W]
  return h.reshape({b, t, 3, h.size(2), h.size(3)}).permute({0, 2, 1, 3, 4});
}

int64_t EstimateReferenceBytes(const ReferenceSize& size, const DtypePolicy& policy) {
  const LatentGeometry& g = size.latent;
  const int64_t hid = size.hidden, p = size.patch, elem = policy.compute == at::kFloat ? 4 : 2;
  const int64_t batch = size.sampler.guidance > 1.0 ? 2 : 1;
  const int64_t s = (g.height / p) * (g.width / p);
  // Parameters: per block res (2 convs 9H^2 + temb H^2) + 3 attentions (~4H^2) + ff (8H^2).
  const int64_t params =
      size.depth * (18 + 1 + 12 + 8) * hid * hid + size.decoder_channels * size.decoder_channels * 9 * 4;
  const int64_t weight_bytes = params * (4 + WeightStorageBytes(policy.storage));  // master + stored
  const int64_t features = batch * hid * g.frames * s * elem;
  const int64_t spatial = batch * g.frames * size.heads * s * s * elem;
  const int64_t temporal = batch * s * size.heads * g.frames * g.frames * elem;
  const int64_t cross = batch * size.heads * g.frames * s * g.cond_tokens * elem;
  const int64_t decoder =
      g.frames * (size.decoder_channels / size.upsample) * size.FrameHeight() * size.FrameWidth() * 4;
  const int64_t activations = 16 * features + 3 * std::max({spatial, temporal, cross}) + 8 * decoder;
  return weight_bytes + activations;
}

}  // namespace framegate
