// Checks the analytic FLOP counts (flop_count.cc) against an independent count: run the
// model once under a ModuleObserver and recompute the FLOPs from what it sees, the output
// shape of every module that owns a matrix/convolution weight (with that weight's shape)
// and the attention logits [N, heads, S, L] (QK^T and PV). The two must agree exactly,
// and every matrix/convolution weight of the pass must have been seen exactly once.
#include "pipelines/flop_count.h"

#include <gtest/gtest.h>

#include <map>

#include <ATen/Functions.h>

#include "pipelines/reference_model.h"
#include "pipelines/sampler.h"

namespace framegate {
namespace {

struct ObservedCount {
  int64_t flops = 0;
  std::map<std::string, int> calls;  // module (or "<attn>.qk" / "<attn>.pv") -> times seen
};

// True when `name` is a weight of the model with at least 2 dims (Linear or convolution).
bool IsMatrixWeight(const WeightStore& weights, const std::string& name) {
  for (const WeightEntry& e : weights.entries()) {
    if (e.name == name) return e.stored.dim() >= 2;
  }
  return false;
}

// An observer that adds each module's FLOPs (2 per multiply-add) to `count`.
ModuleObserver CountingObserver(const WeightStore& weights, ObservedCount* count) {
  return [&weights, count](const ModuleOutput& m) {
    const at::Tensor& y = m.value;
    if (m.kind == ModuleKind::kAttentionLogits) {
      // logits [N, heads, S, L]; q [N, heads, S, d] x k^T, then probs x v [N, heads, L, d].
      const std::string attn = m.module.substr(0, m.module.rfind(".logits"));
      const int64_t hidden = weights.Get(attn + ".q.weight").stored.size(0);
      const int64_t head_dim = hidden / y.size(1);
      count->flops += 2 * y.numel() * head_dim;  // QK^T
      count->flops += 2 * y.numel() * head_dim;  // PV
      ++count->calls[attn + ".qk"];
      ++count->calls[attn + ".pv"];
      return;
    }
    const std::string weight = m.module + ".weight";
    if (!IsMatrixWeight(weights, weight)) return;
    const at::IntArrayRef w = weights.Get(weight).stored.sizes();
    // Linear: w [out, in], y [..., out]. Convolution: w [Cout, Cin, k...], y [N, Cout, ...].
    const int64_t out_dim = w.size() == 2 ? y.size(-1) : y.size(1);
    EXPECT_EQ(out_dim, w[0]) << m.module;
    int64_t macs_per_output = 1;  // in, or Cin x kernel volume
    for (size_t i = 1; i < w.size(); ++i) macs_per_output *= w[i];
    count->flops += 2 * y.numel() * macs_per_output;
    ++count->calls[m.module];
  };
}

// Every matrix/convolution weight of the denoiser (decoder = false) or of the decoder
// must have been seen once, and every self/cross attention's QK^T and PV once.
void ExpectEachModuleOnce(const WeightStore& weights, const ObservedCount& count, bool decoder) {
  std::map<std::string, int> expected;
  for (const WeightEntry& e : weights.entries()) {
    const std::string suffix = ".weight";
    if (e.stored.dim() < 2 || IsDecoderWeight(e.name) != decoder) continue;
    const std::string module = e.name.substr(0, e.name.size() - suffix.size());
    expected[module] = 1;
    const std::string q = ".q";
    if (module.size() > q.size() && module.compare(module.size() - q.size(), q.size(), q) == 0) {
      const std::string attn = module.substr(0, module.size() - q.size());
      expected[attn + ".qk"] = 1;
      expected[attn + ".pv"] = 1;
    }
  }
  EXPECT_EQ(count.calls, expected);
}

std::unique_ptr<ReferenceModel> MakeModel(const ReferenceSize& size) {
  StatusOr<std::unique_ptr<ReferenceModel>> model =
      ReferenceModel::Create(size, Fp32Policy(), c10::Device("cpu"));
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  return model.ok() ? std::move(*model) : nullptr;
}

// tiny with every dimension the formulas distinguish made different: patch 2, a
// non-square latent, cond_dim != hidden, L != T, 2 heads, one block, 2x upsampling.
ReferenceSize OddSize() {
  ReferenceSize size = *FindReferenceSize("tiny");
  size.name = "odd";
  size.latent = {4, 3, 8, 12, 5, 24};
  size.patch = 2;
  size.hidden = 32;
  size.depth = 1;
  size.heads = 2;
  size.groups = 4;
  size.decoder_channels = 16;
  size.upsample = 2;
  return size;
}

void ExpectDenoiserCountsAgree(const ReferenceSize& size, int64_t batch) {
  SCOPED_TRACE(size.name + ", batch " + std::to_string(batch));
  auto model = MakeModel(size);
  ASSERT_NE(model, nullptr);
  const GenerationInputs in = DrawInputs(size.latent, 0);
  // [batch, C, T, h, w], [batch], [batch, L, D]
  const at::Tensor x = in.noise.expand({batch, -1, -1, -1, -1}).contiguous();
  const at::Tensor cond = in.cond.expand({batch, -1, -1}).contiguous();
  ObservedCount count;
  model->SetObserver(CountingObserver(model->weights(), &count));
  model->BeginStep(0);
  model->PredictNoise(x, at::full({batch}, 500.0), cond);
  model->SetObserver(nullptr);
  EXPECT_EQ(DenoiserStepFlops(size, batch), count.flops);
  ExpectEachModuleOnce(model->weights(), count, /*decoder=*/false);
}

void ExpectDecoderCountsAgree(const ReferenceSize& size) {
  SCOPED_TRACE(size.name);
  auto model = MakeModel(size);
  ASSERT_NE(model, nullptr);
  ObservedCount count;
  model->SetObserver(CountingObserver(model->weights(), &count));
  model->BeginStep(-1);
  model->Decode(DrawInputs(size.latent, 0).noise);  // [1, C, T, h, w]
  model->SetObserver(nullptr);
  EXPECT_EQ(DecodeFlops(size), count.flops);
  ExpectEachModuleOnce(model->weights(), count, /*decoder=*/true);
}

TEST(FlopCountTest, DenoiserStepMatchesObservedShapes) {
  const ReferenceSize tiny = *FindReferenceSize("tiny");
  ExpectDenoiserCountsAgree(tiny, 1);
  ExpectDenoiserCountsAgree(tiny, 2);  // the CFG batch
  ExpectDenoiserCountsAgree(OddSize(), 2);
}

TEST(FlopCountTest, DecodeMatchesObservedShapes) {
  ExpectDecoderCountsAgree(*FindReferenceSize("tiny"));
  ExpectDecoderCountsAgree(OddSize());
}

TEST(FlopCountTest, ShippedSizesAreLinearInBatchAndGrowWithSize) {
  int64_t previous_step = 0, previous_decode = 0;
  for (const ReferenceSize& size : ReferenceSizes()) {
    SCOPED_TRACE(size.name);
    const int64_t step = DenoiserStepFlops(size, 1);
    EXPECT_EQ(DenoiserStepFlops(size, 2), 2 * step);
    EXPECT_GT(step, previous_step);
    EXPECT_GT(DecodeFlops(size), previous_decode);
    previous_step = step;
    previous_decode = DecodeFlops(size);
  }
}

}  // namespace
}  // namespace framegate
