// Tests of PackageObserver's FP16 emulation by dtype propagation, on TorchScript modules
// compiled in C++ with define(). Weights are float32 tensors the observer is told would
// be FP16 (AddParameter), as LoadModelPackage does after placing them.
#include "pipelines/package_observer.h"

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <torch/script.h>

#include "harness/error_class.h"

namespace framegate {
namespace {

namespace jit = torch::jit;

at::Tensor RoundHalf(const at::Tensor& t) { return t.to(at::kHalf).to(at::kFloat); }

DtypePolicy EmulatedFp16() {
  DtypePolicy policy;
  policy.name = "fp16-emulated";
  policy.emulate_fp16 = true;
  return policy;
}

DtypePolicy Bf16() { return *FindPolicy("bf16"); }  // the preset

// forward(inputs) of `module` (BF16 weights, as placed) instrumented under Bf16().
at::Tensor ForwardUnderBf16(jit::Module& module, const std::vector<c10::IValue>& inputs) {
  const auto instrumentation = GraphInstrumentation::Instrument(module, "m");
  PackageObserver observer(Bf16(), /*on_cpu=*/true);
  const ScopedPlainGraphExecution plain;
  const torch::NoGradGuard no_grad;
  const GraphInstrumentation::ActiveScope scope(*instrumentation, observer);
  observer.BeginForward();
  return module.forward(inputs).toTensor();
}

// A module "m" with a weight `w` ((4, 8) FP16-representable values unless given), instrumented.
struct Emulated {
  jit::Module module{"M"};
  std::unique_ptr<GraphInstrumentation> instrumentation;
  PackageObserver observer;
  at::Tensor weight;

  explicit Emulated(const std::string& source, const DtypePolicy& policy = EmulatedFp16(),
                    at::Tensor w = RoundHalf(torch::randn({4, 8})))
      : observer(policy, /*on_cpu=*/true), weight(std::move(w)) {
    module.register_parameter("w", weight, /*is_buffer=*/false);
    module.define(source);
    instrumentation = GraphInstrumentation::Instrument(module, "m");
    observer.AddParameter("m", weight);
  }

  // forward(inputs...) as TorchScriptModel runs it; `float32_input` marks the inputs the
  // caller keeps in float32 (by index).
  at::Tensor Forward(const std::vector<at::Tensor>& inputs, int float32_input = -1) {
    const ScopedPlainGraphExecution plain;
    const torch::NoGradGuard no_grad;
    const GraphInstrumentation::ActiveScope scope(*instrumentation, observer);
    observer.BeginForward();
    std::vector<c10::IValue> args;
    for (size_t i = 0; i < inputs.size(); ++i)
      args.emplace_back(observer.EnterRoot("m", inputs[i], static_cast<int>(i) == float32_input));
    return observer.LeaveRoot("m", module.forward(args).toTensor());
  }

  // What Forward(inputs, float32_input) raises; "" when it returns.
  std::string ErrorOf(const std::vector<at::Tensor>& inputs, int float32_input) {
    try {
      Forward(inputs, float32_input);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  }
};

// The largest finite value held in FP16 is reported once past 65504 / 2 (the cell's
// headroom check), whatever a -inf mask beside it holds; a float32-only value is not
// held in FP16, and taking the value forgets it.
TEST(PackageObserverTest, Fp16EmulationReportsTheLargestFiniteValueHeldInFp16PastHalfItsRange) {
  Emulated m(R"JIT(
def forward(self, x, t):
    big = x * 40000.0
    masked = big.masked_fill(x < 0.0, float("-inf"))
    exact = t.float() * 60000.0
    return masked + 0.0 * exact.sum()
)JIT");
  const at::Tensor x = torch::tensor({0.5f, -1.0f, 1.0f});
  m.Forward({x, torch::ones({1})}, /*float32_input=*/1);
  EXPECT_EQ(m.observer.TakeLargestFp16Magnitude(), 40000.0);  // 40000 is an FP16 value
  EXPECT_EQ(m.observer.TakeLargestFp16Magnitude(), 0.0);
  m.Forward({x * 0.5, torch::ones({1})}, /*float32_input=*/1);
  EXPECT_EQ(m.observer.TakeLargestFp16Magnitude(), 0.0);  // 20000: 1.7 bits to spare
}

// The timestep sinusoid a real FP16 model builds in float32 (t.float(), arange) stays
// exact; it is rounded where the model casts it to the activations' dtype.
TEST(PackageObserverTest, Fp16EmulationKeepsFloat32OnlyValuesExact) {
  Emulated m(R"JIT(
def forward(self, t, like):
    # dtype=6: float32 (define() resolves no torch.float32)
    index = torch.arange(4, dtype=6).to(t)
    freqs = torch.exp(index * -2.302585)
    args = t.float()[:, None] * freqs[None, :]
    emb = torch.cat([torch.cos(args), torch.sin(args)], dim=1)
    return emb + 0.0 * like.sum()
)JIT");
  const at::Tensor t = torch::full({1}, 999.0);
  const at::Tensor like = torch::ones({1, 8});
  const at::Tensor freqs = torch::exp(torch::arange(4, torch::kFloat) * -2.302585);
  const at::Tensor args = t.index({torch::indexing::Slice(), torch::indexing::None}) * freqs.unsqueeze(0);
  const at::Tensor exact = torch::cat({torch::cos(args), torch::sin(args)}, 1);
  // emb is float32 (from t), + an FP16 0-dim sum: float32, exact.
  EXPECT_TRUE(torch::equal(m.Forward({t, like}, /*float32_input=*/0), exact));
}

TEST(PackageObserverTest, Fp16EmulationRoundsWhereTheModelCastsToTheActivationDtype) {
  Emulated m(R"JIT(
def forward(self, t, x):
    args = t.float()[:, None] * torch.arange(8, dtype=6)[None, :] * 0.001
    emb = torch.sin(args)
    return torch.linear(emb.type_as(x) + emb.to(x.dtype), self.w)
)JIT");
  const at::Tensor t = torch::full({1}, 999.0);
  const at::Tensor x = torch::ones({1, 8});
  const at::Tensor emb = torch::sin(t.unsqueeze(1) * torch::arange(8, torch::kFloat).unsqueeze(0) * 0.001);
  const at::Tensor expected = RoundHalf(torch::linear(RoundHalf(RoundHalf(emb) + RoundHalf(emb)), m.weight));
  EXPECT_TRUE(torch::equal(m.Forward({t, x}, 0), expected));
}

// A sum written in place (`h += h * 0.5`, through a view too) is stored rounded in a real
// FP16 run: past 65504 it is Inf, which a norm after it must not take out in float32. A
// float32-only value written in place stays exact.
TEST(PackageObserverTest, Fp16EmulationRoundsWhatAnInPlaceOpWrites) {
  Emulated m(R"JIT(
def forward(self, x, t):
    big = x * 60000.0
    big += big * 0.5
    tail = big[:, 1:]
    tail.mul_(1.0001)
    exact = t.float() * 3.0
    exact.add_(0.0001)
    return torch.cat([torch.layer_norm(big, [4]), exact.expand(1, 4)], dim=0)
)JIT");
  const at::Tensor x = torch::tensor({{1.0f, -1.0f, 0.5f, 0.1f}});
  const at::Tensor t = torch::full({1, 1}, 999.0);
  const at::Tensor out = m.Forward({x, t}, /*float32_input=*/1);
  // The first two sums overflow: layer_norm of a row holding Inf is NaN.
  EXPECT_TRUE(out[0].isnan().all().item<bool>()) << out;
  EXPECT_TRUE(torch::equal(out[1], (t * 3.0 + 0.0001).reshape({1}).expand({4}))) << out;
}

TEST(PackageObserverTest, Fp16EmulationAnInPlaceWriteThroughAViewRoundsTheBase) {
  Emulated m(R"JIT(
def forward(self, x):
    h = x * 1.0
    h[:, 1:].mul_(1.0001)
    h += 0.0
    return h
)JIT");
  const at::Tensor x = torch::tensor({{1.0f, 3.0f, 1000.0f, 0.1f}});
  const at::Tensor head = x.index({torch::indexing::Slice(), torch::indexing::Slice(0, 1)});
  const at::Tensor tail =
      RoundHalf(RoundHalf(x.index({torch::indexing::Slice(), torch::indexing::Slice(1)})) * 1.0001);
  EXPECT_TRUE(torch::equal(m.Forward({x}), RoundHalf(torch::cat({RoundHalf(head), tail}, 1))));
}

// A float32 value into a weighted op with FP16 weights: a real FP16 run raises a dtype
// error there, and so does the emulation (it used to compute it in float32).
TEST(PackageObserverTest, Fp16EmulationRaisesTheDtypeErrorOfAFloat32InputToAnFp16Weight) {
  Emulated m(R"JIT(
def forward(self, t, x):
    emb = torch.sin(t.float()[:, None] * torch.ones(8))
    return torch.linear(emb, self.w) + x.sum()
)JIT");
  const std::string error = m.ErrorOf({torch::full({1}, 3.0), torch::ones({1, 8})}, 0);
  EXPECT_NE(error.find("mat1 and mat2 must have the same dtype"), std::string::npos) << error;
  EXPECT_EQ(m.instrumentation->current_path(), "m");
  EXPECT_EQ(m.instrumentation->last_op(), "aten::linear");
}

// A float32 table added to the stream makes it float32; a timestep sinusoid cast with
// `type_as(h)` then stays float32 and raises in the Linear after it. Its float32 operand
// became float32 where the table was made, not at the sinusoid's `t.float()`.
TEST(PackageObserverTest, AValueCastLikeAFloat32StreamBecameFloat32WhereTheStreamDid) {
  Emulated m(R"JIT(
def forward(self, t, x):
    h = x + torch.zeros(8) * 0.5
    emb = torch.sin(t.float()[:, None] * torch.ones(8)).type_as(h)
    return torch.linear(emb, self.w)
)JIT");
  const std::string error = m.ErrorOf({torch::full({1}, 3.0), torch::ones({1, 8})}, 0);
  EXPECT_NE(error.find("mat1 and mat2 must have the same dtype"), std::string::npos) << error;
  EXPECT_EQ(m.instrumentation->last_op(), "aten::linear");
  EXPECT_EQ(m.observer.Float32OperandOrigin(), "m:aten::zeros") << error;
}

// A norm's affine weight: a float32 input (a hand-written norm whose float32 eps made the
// stream float32) to an FP16 GroupNorm raises as a real FP16 run does; the FP16 input
// does not.
TEST(PackageObserverTest, Fp16EmulationRaisesTheDtypeErrorOfAFloat32InputToAnFp16NormWeight) {
  const std::string source = R"JIT(
def forward(self, t, x):
    h = x * (t.float() + 1.0) if t.sum() > 0 else x
    return torch.group_norm(h, 2, self.w[0], self.w[1])
)JIT";
  Emulated m(source);
  const std::string error = m.ErrorOf({torch::full({1}, 3.0), torch::randn({1, 8})}, 0);
  EXPECT_NE(error.find("expected scalar type Float but found Half"), std::string::npos) << error;
  EXPECT_EQ(m.instrumentation->last_op(), "aten::group_norm");
  Emulated fp16_input(source);
  EXPECT_EQ(fp16_input.ErrorOf({torch::full({1}, -3.0), torch::randn({1, 8})}, -1), "");
}

// The ops that do not promote (lerp's weight, index_add_'s source, ...) raise where a real
// FP16 run does: a float32 operand to an FP16 input 0, at that op; the same op on FP16
// operands runs. What LibTorch itself raises for such operands (a real BF16 run) is a
// dtype_mismatch, in this LibTorch's words.
TEST(PackageObserverTest, Fp16EmulationRaisesWhereAnOpThatDoesNotPromoteGetsAFloat32Operand) {
  const std::string lerp = R"JIT(
def forward(self, t, x):
    h = torch.linear(x, self.w)
    return torch.lerp(h, h * 2.0, t.float().view(1, 1) * 0.1)
)JIT";
  Emulated float32_weight(lerp);
  const std::string error = float32_weight.ErrorOf({torch::full({1}, 3.0), torch::randn({1, 8})}, 0);
  EXPECT_NE(error.find("expected scalar type Half but found Float"), std::string::npos) << error;
  EXPECT_EQ(float32_weight.instrumentation->last_op(), "aten::lerp");
  EXPECT_EQ(ClassifyError(error).cls, ErrorClass::kDtypeMismatch) << error;
  Emulated fp16_weight(R"JIT(
def forward(self, t, x):
    h = torch.linear(x, self.w)
    return torch.lerp(h, h * 2.0, torch.sigmoid(h))
)JIT");
  EXPECT_EQ(fp16_weight.ErrorOf({torch::full({1}, 3.0), torch::randn({1, 8})}, 0), "");

  Emulated index_add(R"JIT(
def forward(self, x):
    h = torch.linear(x, self.w)
    table = torch.arange(4).float().view(1, 4)
    return h.index_add_(0, torch.arange(1), table)
)JIT");
  const std::string index_error = index_add.ErrorOf({torch::randn({2, 8})}, -1);
  EXPECT_NE(index_error.find("expected scalar type Half but found Float"), std::string::npos) << index_error;
  EXPECT_EQ(index_add.instrumentation->last_op(), "aten::index_add_");

  const at::Tensor bf16 = torch::zeros({2, 3}, torch::kBFloat16);
  const at::Tensor f32 = torch::zeros({2, 3});
  const at::Tensor rows = torch::zeros({2}, torch::kLong);
  const std::vector<std::function<void()>> real_ops = {
      [&] { at::lerp(bf16, bf16, f32); },
      [&] { at::lerp(bf16, f32, 0.5); },
      [&] { bf16.clone().index_add_(0, rows, f32); },
      [&] { bf16.clone().index_copy_(0, rows, f32); },
      [&] {
        bf16.clone().scatter_add_(0, torch::zeros({2, 3}, torch::kLong), f32);
      },
      [&] {
        bf16.clone().masked_scatter_(torch::ones({2, 3}, torch::kBool), f32);
      },
      [&] { bf16.clone().index_put_({rows}, f32); },
  };
  for (size_t i = 0; i < real_ops.size(); ++i) {
    try {
      real_ops[i]();
      ADD_FAILURE() << "op " << i << " took a float32 operand to a BF16 input";
    } catch (const c10::Error& e) {
      EXPECT_EQ(ClassifyError(e.what()).cls, ErrorClass::kDtypeMismatch) << "op " << i << ": " << e.what();
    }
  }
}

// A list built by append (a loop over frames, a UNet's skip list) and joined by cat holds
// the dtype of its elements: FP16 activations give an FP16 result, rounded (an overflow
// after it is Inf), and no dtype error at the next FP16 weight.
TEST(PackageObserverTest, Fp16EmulationAListBuiltByAppendKeepsItsElementsDtype) {
  Emulated skip_list(R"JIT(
def forward(self, x):
    h = torch.linear(x, self.w)
    parts: List[Tensor] = []
    for i in range(2):
        parts.append(h * (i + 1.0))
    return torch.linear(torch.cat(parts, 1), self.w) + torch.stack(parts).sum(0).sum(1, keepdim=True)
)JIT");
  EXPECT_EQ(skip_list.ErrorOf({torch::randn({2, 8})}, -1), "");
  Emulated overflow(R"JIT(
def forward(self, x):
    h = torch.linear(x, self.w)
    parts: List[Tensor] = []
    parts.append(h)
    parts.append(h)
    return torch.cat(parts, 1) * 70000.0
)JIT");
  const at::Tensor out = overflow.Forward({torch::full({2, 8}, 1.0)});
  EXPECT_TRUE(out.isinf().any().item<bool>()) << out;
}

// A branch on a dtype (`if h.dtype == torch.float16:` upcast, as Flux/SD3 write) goes where
// a real FP16 run goes: the emulation holds h in float32 for FP16. (5 is torch.float16,
// which define() cannot name.)
TEST(PackageObserverTest, Fp16EmulationABranchOnTheDtypeTakesTheFp16Side) {
  Emulated upcast(R"JIT(
def forward(self, x):
    h = torch.linear(x, self.w) * 10000.0
    if h.dtype == 5:
        h = (h.float() * 16.0) / 32.0
    else:
        h = (h * 16.0) / 32.0
    return h
)JIT",
                  EmulatedFp16(), torch::full({4, 8}, 0.25));
  const at::Tensor out = upcast.Forward({torch::full({2, 8}, 1.0)});
  EXPECT_TRUE(out.isfinite().all().item<bool>()) << out;  // 2e4 * 16 = 3.2e5 in float32
  EXPECT_FLOAT_EQ(out[0][0].item<float>(), 10000.0f);
}

// A dtype written in the model and chosen at run time stays what it says: a module
// attribute (`self.pe_dtype`, torch.float32), or an if between a tensor's dtype and
// torch.float32 (6), which is the tensor's held FP16 only when that branch runs. Frame
// positions past 1000 in FP16 lose their fraction (a spacing of 0.5).
TEST(PackageObserverTest, Fp16EmulationADtypeChosenAtRunTimeIsTheOneWritten) {
  jit::Module module("M");
  module.register_attribute("pe_dtype", c10::IntType::get(), static_cast<int64_t>(at::kFloat));
  module.define(R"JIT(
def forward(self, x, low: bool):
    dt = x.dtype if low else 6
    return torch.stack([torch.arange(2).to(dt) + 1000.2, torch.arange(2).to(self.pe_dtype) + 1000.2])
)JIT");
  const auto instrumentation = GraphInstrumentation::Instrument(module, "m");
  PackageObserver observer(EmulatedFp16(), /*on_cpu=*/true);
  const auto run = [&](bool low) {
    const ScopedPlainGraphExecution plain;
    const torch::NoGradGuard no_grad;
    const GraphInstrumentation::ActiveScope scope(*instrumentation, observer);
    observer.BeginForward();
    return module.forward({observer.EnterRoot("m", torch::ones({2, 8}), false), low}).toTensor();
  };
  const at::Tensor written = run(false);
  EXPECT_FLOAT_EQ(written[0][0].item<float>(), 1000.2f) << written;  // float32, as written
  EXPECT_FLOAT_EQ(written[1][1].item<float>(), 1001.2f) << written;  // the attribute's float32
  const at::Tensor low = run(true);
  EXPECT_FLOAT_EQ(low[0][0].item<float>(), 1000.0f) << low;  // x's dtype: FP16
  EXPECT_FLOAT_EQ(low[1][1].item<float>(), 1001.2f) << low;
}

// A bool mask keeps its dtype under the emulation: library code that branches on it
// (`if mask.dtype == torch.bool:` an additive mask from masked_fill, `elif
// mask.is_floating_point():` ..., else raise: here a sentinel) takes the bool side, as a real
// FP16 run does. (11 is torch.bool.)
TEST(PackageObserverTest, Fp16EmulationABranchOnABoolMasksDtypeTakesTheBoolSide) {
  Emulated masked(R"JIT(
def forward(self, x, mask: Tensor):
    s = torch.linear(x, self.w)
    if mask.dtype == 11:
        add = torch.zeros(mask.shape, dtype=s.dtype).masked_fill(~mask, -10000.0)
    elif mask.is_floating_point():
        add = mask.to(s.dtype)
    else:
        add = s * 0.0 + 12345.0
    return s + add
)JIT");
  const ScopedPlainGraphExecution plain;
  const torch::NoGradGuard no_grad;
  const GraphInstrumentation::ActiveScope scope(*masked.instrumentation, masked.observer);
  masked.observer.BeginForward();
  const at::Tensor mask = torch::tensor({true, true, false, true});
  const at::Tensor out =
      masked.module.forward({masked.observer.EnterRoot("m", torch::ones({2, 8}), false), mask}).toTensor();
  EXPECT_LT(out[0][2].item<float>(), -9000.0f) << out;      // masked out
  EXPECT_LT(out[0][0].abs().item<float>(), 100.0f) << out;  // kept (the sentinel adds 12345)
}

// A fill's constant out of FP16's range (masked_fill(mask, -1e9)) raises in a real FP16
// run, where the emulation would only have rounded it to -Inf; an infinity fills.
TEST(PackageObserverTest, Fp16EmulationRaisesWhereAFillConstantOverflowsFp16) {
  Emulated overflow(R"JIT(
def forward(self, x):
    return torch.linear(x, self.w).masked_fill(x[:, :4] > 0, -1000000000.0)
)JIT");
  const std::string error = overflow.ErrorOf({torch::randn({2, 8})}, -1);
  EXPECT_NE(error.find("value cannot be converted to type at::Half without overflow"), std::string::npos)
      << error;
  EXPECT_EQ(overflow.instrumentation->last_op(), "aten::masked_fill");
  EXPECT_EQ(error.find("float32's lowest"), std::string::npos) << error;
  // A trace's baked torch.finfo(x.dtype).min of a float32 x: the text names the cure.
  Emulated baked_lowest(R"JIT(
def forward(self, x):
    return torch.linear(x, self.w).masked_fill(x[:, :4] > 0, -3.4028234663852886e+38)
)JIT");
  const std::string baked = baked_lowest.ErrorOf({torch::randn({2, 8})}, -1);
  EXPECT_NE(baked.find("float32's lowest: torch.finfo(torch.float32).min"), std::string::npos) << baked;
  Emulated infinity(R"JIT(
def forward(self, x):
    return torch.linear(x, self.w).masked_fill(x[:, :4] > 0, float('-inf'))
)JIT");
  EXPECT_EQ(infinity.ErrorOf({torch::randn({2, 8})}, -1), "");
  Emulated float32(R"JIT(
def forward(self, x):
    return torch.linear(x, self.w).float().masked_fill(x[:, :4] > 0, -1000000000.0)
)JIT");
  EXPECT_EQ(float32.ErrorOf({torch::randn({2, 8})}, -1), "");
}

// The same for a transposed convolution (ConvTranspose1d/2d/3d): its weight is operand 1.
TEST(PackageObserverTest, Fp16EmulationRaisesTheDtypeErrorOfAFloat32InputToAnFp16TransposedConvolution) {
  Emulated m(R"JIT(
def forward(self, t, x):
    emb = torch.sin(t.float()[:, None] * torch.ones(4))
    return torch.conv_transpose1d(emb[:, :, None], self.w[:, :, None]) + x.sum()
)JIT");
  const std::string error = m.ErrorOf({torch::full({1}, 3.0), torch::ones({1, 8})}, 0);
  EXPECT_NE(error.find("Input type (fp32) and weight type (fp16) should be the same"), std::string::npos)
      << error;
  EXPECT_EQ(m.instrumentation->last_op(), "aten::conv_transpose1d");
}

// addmm and baddbmm take their bias first: the weight is mat2 (schema position 2), and a
// float32 mat1 against it raises as a Linear's input does.
TEST(PackageObserverTest, Fp16EmulationRaisesTheDtypeErrorOfAFloat32InputToAnAddmmWithAnFp16Weight) {
  Emulated m(R"JIT(
def forward(self, t, x):
    emb = torch.sin(t.float()[:, None] * torch.ones(4))
    return torch.addmm(x, emb, self.w)
)JIT");
  const std::string error = m.ErrorOf({torch::full({1}, 3.0), torch::ones({1, 8})}, 0);
  EXPECT_NE(error.find("mat1 and mat2 must have the same dtype"), std::string::npos) << error;
  EXPECT_EQ(m.instrumentation->last_op(), "aten::addmm");
}

TEST(PackageObserverTest, Fp16EmulationRaisesTheDtypeErrorOfAFloat32InputToABaddbmmWithAnFp16Weight) {
  Emulated m(R"JIT(
def forward(self, t, x):
    emb = torch.sin(t.float()[:, None, None] * torch.ones(4))
    return torch.baddbmm(x, emb, self.w)
)JIT",
             EmulatedFp16(), RoundHalf(torch::randn({1, 4, 8})));
  const std::string error = m.ErrorOf({torch::full({1}, 3.0), torch::ones({1, 1, 8})}, 0);
  EXPECT_NE(error.find("mat1 and mat2 must have the same dtype"), std::string::npos) << error;
  EXPECT_EQ(m.instrumentation->last_op(), "aten::baddbmm");
}

// einsum takes its operands as a list: a float32 one beside an FP16 weight raises what a
// real FP16 run raises ("expected scalar type Float but found Half"), and an FP16 pair
// computes.
TEST(PackageObserverTest, Fp16EmulationRaisesTheDtypeErrorOfAFloat32InputToAnEinsumWithAnFp16Weight) {
  const std::string source = R"JIT(
def forward(self, t, x):
    emb = torch.sin(t.float()[:, None] * torch.ones(4))
    return torch.einsum("bi,ij->bj", emb if bool(t[0] > 0.0) else x, self.w)
)JIT";
  Emulated m(source);
  const std::string error = m.ErrorOf({torch::full({1}, 3.0), torch::ones({1, 4})}, 0);
  EXPECT_NE(error.find("expected scalar type Float but found Half"), std::string::npos) << error;
  EXPECT_EQ(m.instrumentation->last_op(), "aten::einsum");
  Emulated fp16_pair(source);
  EXPECT_EQ(fp16_pair.ErrorOf({torch::full({1}, -3.0), torch::ones({1, 4})}, 0), "");
}

// A product of two activations (no weight) refuses two dtypes too: float32 probabilities
// (a mask from torch.zeros, the default dtype, promoted them) times FP16 values raise
// where a real run does; a mask made like the values does not.
TEST(PackageObserverTest, Fp16EmulationRaisesTheDtypeErrorOfAProductOfAFloat32AndAnFp16Activation) {
  const std::string source = R"JIT(
def forward(self, x):
    v = torch.matmul(x.t(), x)
    probs = torch.softmax(v + MASK, dim=-1)
    return torch.matmul(probs, v)
)JIT";
  const auto with_mask = [&](const std::string& mask) {
    std::string text = source;
    text.replace(text.find("MASK"), 4, mask);
    return text;
  };
  Emulated float32_mask(with_mask("torch.zeros(4, 4)"));
  const std::string error = float32_mask.ErrorOf({torch::ones({2, 4})}, -1);
  EXPECT_NE(error.find("expected scalar type Float but found Half"), std::string::npos) << error;
  EXPECT_EQ(float32_mask.instrumentation->last_op(), "aten::matmul");
  Emulated fp16_mask(with_mask("torch.zeros_like(v)"));
  EXPECT_EQ(fp16_mask.ErrorOf({torch::ones({2, 4})}, -1), "");
}

// forward(b, x) of a module whose weight `w` is 4096 x 1 BF16 ones, under Bf16(), with x
// [1, 4096] BF16 ones and b a BF16 zero: 4096 where the products are summed in FP32, 256
// where in BF16.
at::Tensor SumOf4096Bf16Ones(const std::string& source) {
  jit::Module module{"M"};
  const at::Tensor ones = torch::ones({4096, 1}).to(at::kBFloat16);
  module.register_parameter("w", ones, /*is_buffer=*/false);
  module.define(source);
  return ForwardUnderBf16(module, {torch::zeros({1, 1}).to(at::kBFloat16), ones.t()});
}

// Where this CPU's kernels sum BF16 products in BF16 (4096 products of 1 sum to 256),
// addmm and einsum with a weight are computed in FP32 from the same BF16 values, as linear
// is.
TEST(PackageObserverTest, Bf16AddmmAndEinsumAreWidenedWhereTheCpuSumsInBf16) {
  if (AccumulationOf(Bf16(), /*on_cpu=*/true).widened != at::kBFloat16) {
    GTEST_SKIP() << "this CPU sums BF16 products in FP32";
  }
  for (const char* product : {"torch.addmm(b, x, self.w)", "torch.einsum(\"bi,ij->bj\", x, self.w)"}) {
    const at::Tensor y =
        SumOf4096Bf16Ones(std::string("def forward(self, b, x):\n    return ") + product + "\n");
    EXPECT_EQ(y.scalar_type(), at::kBFloat16) << product;
    EXPECT_EQ(y.item<float>(), 4096.0f) << product;
  }
}

// Where this CPU's kernels sum BF16 products in BF16, a BF16 transposed convolution is
// computed in FP32 from the same BF16 values, as the other convolutions are. (LibTorch
// 1.13's own BF16 kernel there also returns a wrong shape for a strided one.)
TEST(PackageObserverTest, Bf16TransposedConvolutionIsWidenedWhereTheCpuSumsInBf16) {
  if (AccumulationOf(Bf16(), /*on_cpu=*/true).widened != at::kBFloat16) {
    GTEST_SKIP() << "this CPU sums BF16 products in FP32";
  }
  jit::Module module{"M"};
  const at::Tensor weight = torch::randn({4, 4, 4, 4}).to(at::kBFloat16);
  module.register_parameter("w", weight, /*is_buffer=*/false);
  module.define(R"JIT(
def forward(self, x):
    return torch.conv_transpose2d(x, self.w, None, 2, 1)
)JIT");
  const at::Tensor x = torch::randn({1, 4, 8, 8}).to(at::kBFloat16);
  const at::Tensor y = ForwardUnderBf16(module, {x});
  const at::Tensor expected =
      at::conv_transpose2d(x.to(at::kFloat), weight.to(at::kFloat), {}, 2, 1).to(at::kBFloat16);
  ASSERT_EQ(y.sizes(), expected.sizes());
  EXPECT_TRUE(torch::equal(y, expected));
}

// diffusers computes attention scores as baddbmm(torch.empty(..), q, k, beta=0): the empty
// tensor holds whatever memory it got (NaN included), which NaN localisation must not see.
TEST(PackageObserverTest, TheModuleObserverDoesNotSeeUninitialisedAllocations) {
  Emulated m(R"JIT(
def forward(self, x):
    scores = torch.empty([1, 2, 2], dtype=x.dtype)
    return torch.baddbmm(scores, x, x.transpose(1, 2), beta=0.0, alpha=0.5)
)JIT");
  std::vector<std::string> ops;
  m.observer.set_observer([&](const ModuleOutput& out) { ops.push_back(out.op); });
  m.Forward({torch::ones({1, 2, 3})});
  EXPECT_NE(std::find(ops.begin(), ops.end(), "aten::baddbmm"), ops.end());
  EXPECT_EQ(std::find(ops.begin(), ops.end(), "aten::empty"), ops.end());
}

// x.float() of an FP16 activation is a new float32 tensor: x itself stays FP16.
TEST(PackageObserverTest, Fp16EmulationFloatOfAnActivationLeavesTheActivationFp16) {
  Emulated m(R"JIT(
def forward(self, x):
    y = x * 1.0001
    z = y.float() * 3.0001
    return (y * 3.0001) - z
)JIT");
  const at::Tensor x = RoundHalf(torch::randn({2, 8}));
  const at::Tensor y = RoundHalf(x * 1.0001);
  const at::Tensor expected = RoundHalf(y * 3.0001) - y * 3.0001;  // FP16 - float32: float32
  EXPECT_TRUE(torch::equal(m.Forward({x}), expected));
}

// reshape and flatten copy a tensor they cannot view: the copy holds its input's
// would-be dtype (it used to be unknown, taken as FP16, and rounded).
TEST(PackageObserverTest, Fp16EmulationACopyByReshapeKeepsItsInputsDtype) {
  Emulated m(R"JIT(
def forward(self, t, like):
    args = t.float()[:, None] * torch.arange(8, dtype=6)[None, :] * 0.37
    copied = torch.sin(args).view(2, 4).transpose(0, 1).flatten(0)
    return copied * 1.0001 + 0.0 * like.sum()
)JIT");
  const at::Tensor t = torch::full({1}, 999.0);
  const at::Tensor args = t.unsqueeze(1) * torch::arange(8, torch::kFloat).unsqueeze(0) * 0.37;
  const at::Tensor exact = torch::sin(args).view({2, 4}).transpose(0, 1).flatten(0) * 1.0001;
  EXPECT_TRUE(torch::equal(m.Forward({t, torch::ones({1, 8})}, /*float32_input=*/0), exact));
}

// Inside an FP32 island, an activation copied by flatten (attention's
// out.transpose(1, 2).flatten(2)) is float32 like the island's weights: no dtype error.
TEST(PackageObserverTest, Fp16EmulationACopyInsideAnFp32IslandIsFloat32) {
  DtypePolicy policy = EmulatedFp16();
  policy.fp32_modules = {"m"};
  Emulated m(R"JIT(
def forward(self, x):
    return torch.linear(x.transpose(1, 2).flatten(1), self.w)
)JIT",
             policy);
  const at::Tensor x = RoundHalf(torch::randn({2, 4, 2}));
  // computed in float32, rounded to FP16 where it leaves the island
  EXPECT_TRUE(torch::equal(m.Forward({x}), RoundHalf(torch::linear(x.transpose(1, 2).flatten(1), m.weight))));
}

}  // namespace
}  // namespace framegate
