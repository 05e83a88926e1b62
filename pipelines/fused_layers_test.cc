// The decompositions of fused_layers.h against LibTorch's own fused kernels: a module that
// calls the fused op is instrumented (which replaces the op) and must give what the fused
// kernel gives.
#include "pipelines/fused_layers.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/script.h>

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
  ASSERT_EQ(instrumentation->coverage().fast_paths_unfused, 1);
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

}  // namespace
}  // namespace framegate
