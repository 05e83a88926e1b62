// The decompositions of fused_layers.h against LibTorch's own fused kernels: a module that
// calls the fused op is instrumented (which replaces the op) and must give what the fused
// kernel gives.
#include "pipelines/fused_layers.h"

#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/script.h>

#include "harness/torch_version.h"
#include "pipelines/graph_instrumentation.h"

namespace framegate {
namespace {

namespace jit = torch::jit;

class NoObserver : public GraphObserver {
 public:
  at::Tensor Before(const std::string&, const GraphSite&, int, const at::Tensor& value) override {
    return value;
  }
  at::Tensor After(const std::string&, const GraphSite&, int, const at::Tensor& value) override {
    return value;
  }
};

TEST(FusedLayersTest, TheDecomposedEncoderLayerComputesWhatTheFusedKernelComputes) {
  constexpr int64_t kDim = 8, kHeads = 2;
  jit::Module module("Layer");
  const std::vector<std::string> names = {"qkv_weight",    "qkv_bias",    "proj_weight",   "proj_bias",
                                          "norm_weight_1", "norm_bias_1", "norm_weight_2", "norm_bias_2",
                                          "ffn_weight_1",  "ffn_bias_1",  "ffn_weight_2",  "ffn_bias_2"};
  const std::vector<std::vector<int64_t>> shapes = {{3 * kDim, kDim}, {3 * kDim}, {kDim, kDim}, {kDim},
                                                    {kDim},           {kDim},     {kDim},       {kDim},
                                                    {16, kDim},       {16},       {kDim, 16},   {kDim}};
  std::vector<at::Tensor> p;
  for (size_t i = 0; i < names.size(); ++i) {
    p.push_back(torch::randn(shapes[i]) * 0.5);
    module.register_parameter(names[i], p.back(), /*is_buffer=*/false);
  }
  module.define(R"JIT(
def forward(self, x, use_gelu: bool, norm_first: bool):
    return torch._transformer_encoder_layer_fwd(
        x, 8, 2, self.qkv_weight, self.qkv_bias, self.proj_weight, self.proj_bias, use_gelu, norm_first,
        1e-5, self.norm_weight_1, self.norm_bias_1, self.norm_weight_2, self.norm_bias_2,
        self.ffn_weight_1, self.ffn_bias_1, self.ffn_weight_2, self.ffn_bias_2, None, None)
)JIT");
  const at::Tensor x = torch::randn({2, 5, kDim});
  std::vector<at::Tensor> fused;
  for (const bool use_gelu : {false, true}) {
    for (const bool norm_first : {false, true}) {
      fused.push_back(at::_transformer_encoder_layer_fwd(x, kDim, kHeads, p[0], p[1], p[2], p[3], use_gelu,
                                                         norm_first, 1e-5, p[4], p[5], p[6], p[7], p[8], p[9],
                                                         p[10], p[11]));
    }
  }
  const auto instrumentation = GraphInstrumentation::Instrument(module, "m");
  ASSERT_EQ(instrumentation->coverage().fused_ops_unfused, 1);
  NoObserver observer;
  const GraphInstrumentation::ActiveScope scope(*instrumentation, observer);
  const ScopedPlainGraphExecution plain;
  const torch::NoGradGuard no_grad;
  size_t i = 0;
  for (const bool use_gelu : {false, true}) {
    for (const bool norm_first : {false, true}) {
      const at::Tensor y = module.forward({x, use_gelu, norm_first}).toTensor();
      EXPECT_TRUE(torch::allclose(y, fused[i], 1e-5, 1e-5))
          << "use_gelu " << use_gelu << " norm_first " << norm_first << ": max |diff| "
          << (y - fused[i]).abs().max().item<float>();
      ++i;
    }
  }
}

// A module whose forward is one scaled-dot-product attention: LibTorch 2.x's public op,
// 1.13's private one (the same arithmetic; it also returns the weights).
jit::Module AttentionModule() {
  jit::Module module("Attention");
#if FRAMEGATE_TORCH_AT_LEAST(2, 1)
  module.define(R"JIT(
def forward(self, q, k, v, mask: Optional[Tensor], causal: bool, scale: Optional[float]):
    return torch.scaled_dot_product_attention(q, k, v, mask, 0.0, causal, scale=scale)
)JIT");
#else
  module.define(R"JIT(
def forward(self, q, k, v, mask: Optional[Tensor], causal: bool, scale: Optional[float]):
    return torch._scaled_dot_product_attention(q, k, v, mask, 0.0, False, causal)[0]
)JIT");
#endif
  return module;
}

TEST(FusedLayersTest, TheDecomposedAttentionComputesWhatTheSdpaKernelComputes) {
  jit::Module module = AttentionModule();
  const at::Tensor q = torch::randn({2, 2, 5, 8}) * 2, k = torch::randn({2, 2, 7, 8}) * 2,
                   v = torch::randn({2, 2, 7, 8});
  at::Tensor bool_mask = torch::rand({5, 7}) > 0.3;
  bool_mask.select(1, 0).fill_(true);  // no row masked out entirely
  const at::Tensor float_mask = torch::randn({5, 7});
  struct Case {
    const char* name;
    c10::IValue mask;
    bool causal;
    c10::IValue scale;
  };
  std::vector<Case> cases = {{"plain", c10::IValue(), false, c10::IValue()},
                             {"causal", c10::IValue(), true, c10::IValue()},
                             {"bool mask", bool_mask, false, c10::IValue()},
                             {"float mask", float_mask, false, c10::IValue()}};
  if (FRAMEGATE_TORCH_AT_LEAST(2, 1)) cases.push_back({"scale 0.3", c10::IValue(), false, 0.3});
  const torch::NoGradGuard no_grad;
  std::vector<at::Tensor> fused;
  for (const Case& c : cases) {
    fused.push_back(module.forward({q, k, v, c.mask, c.causal, c.scale}).toTensor());
  }
  const auto instrumentation = GraphInstrumentation::Instrument(module, "m");
  ASSERT_EQ(instrumentation->coverage().fused_ops_unfused, 1);
  NoObserver observer;
  const GraphInstrumentation::ActiveScope scope(*instrumentation, observer);
  const ScopedPlainGraphExecution plain;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const at::Tensor y = module.forward({q, k, v, c.mask, c.causal, c.scale}).toTensor();
    EXPECT_TRUE(torch::allclose(y, fused[i], 1e-5, 1e-5))
        << c.name << ": max |diff| " << (y - fused[i]).abs().max().item<float>();
  }
}

TEST(FusedLayersTest, AnAttentionBackendKeepsTheSdpaKernel) {
  jit::Module module = AttentionModule();
  const auto instrumentation = GraphInstrumentation::Instrument(module, "m", SdpaKernel::kKept);
  EXPECT_EQ(instrumentation->coverage().fused_ops_unfused, 0);
  EXPECT_EQ(instrumentation->coverage().attention_kernels_kept, 1);
  EXPECT_NE(
      instrumentation->coverage().Summary().find("1 attention op computed by the named backend's kernel"),
      std::string::npos)
      << instrumentation->coverage().Summary();
}

// diffusers computes attention scores as baddbmm(torch.empty(..), q, k^T, beta=0). Before
// LibTorch 2.1 the CPU kernel reads its own uninitialised output then (pytorch#96037): NaN
// left in freed memory came out of a clean model's attention. Instrumented, it cannot.
TEST(FusedLayersTest, BaddbmmWithBetaZeroIgnoresWhatItsOutputsMemoryHeld) {
  jit::Module module("m");
  module.define(R"JIT(
    def forward(self, q, k):
        scores = torch.empty([q.size(0), q.size(1), k.size(1)], dtype=q.dtype)
        return torch.baddbmm(scores, q, k.transpose(1, 2), beta=0, alpha=0.5)
  )JIT");
  const auto instrumentation = GraphInstrumentation::Instrument(module, "m");
  EXPECT_EQ(instrumentation->coverage().fused_ops_unfused, 0);  // not a fused op
  NoObserver observer;
  const GraphInstrumentation::ActiveScope scope(*instrumentation, observer);
  const ScopedPlainGraphExecution plain;
  const torch::NoGradGuard no_grad;
  const at::Tensor q = torch::randn({256, 4, 4}), k = torch::randn({256, 4, 4});
  const at::Tensor expected = at::bmm(q, k.transpose(1, 2)) * 0.5;
  for (int run = 0; run < 50; ++run) {
    {  // freed NaN: memory the next allocations may get
      std::vector<at::Tensor> garbage;
      for (int i = 0; i < 4; ++i) garbage.push_back(at::full({256, 4, 4}, std::nan("")));
    }
    const at::Tensor y = module.forward({q, k}).toTensor();
    ASSERT_TRUE(torch::allclose(y, expected))
        << "run " << run << ": " << y.isnan().sum().item<int64_t>() << " NaN";
  }
}

}  // namespace
}  // namespace framegate
