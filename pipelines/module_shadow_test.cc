// Tests of ModuleShadow (the isolated error of each op), of op-level FP32 islands and of
// what a module island's input was made by, on
// TorchScript modules compiled in C++ with define(), run as a package runs them: graph
// instrumentation, a PackageObserver under the policy. Activations x (2, 4) float32.
#include "pipelines/module_shadow.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>

#include <gtest/gtest.h>
#include <torch/script.h>

#include "pipelines/op_islands.h"
#include "pipelines/package_observer.h"

namespace framegate {
namespace {

namespace jit = torch::jit;

jit::Module Leaf(const std::string& name, const std::string& body) {
  jit::Module m(name);
  m.define("def forward(self, x):\n    return " + body + "\n");
  return m;
}

// m: first (x * 3), second ((h + 1000) - 1000: under FP16 the sum keeps 1/2 of a unit,
// so the subtraction is where the value's precision is lost), third (g * 2, which only
// carries the error).
jit::Module MakeCancellingChain() {
  jit::Module root("Chain");
  root.register_module("first", Leaf("First", "x * 3.0"));
  root.register_module("second", Leaf("Second", "(x + 1000.0) - 1000.0"));
  root.register_module("third", Leaf("Third", "x * 2.0"));
  root.define(R"JIT(
def forward(self, x):
    return self.third.forward(self.second.forward(self.first.forward(x)))
)JIT");
  return root;
}

// One forward of `module` through `instrumentation` under `observer` (wrapped by the
// active shadow, if any), at sampler step 0.
at::Tensor Forward(jit::Module& module, GraphInstrumentation& instrumentation, GraphObserver& observer,
                   const at::Tensor& x) {
  ScopedPlainGraphExecution plain;
  torch::NoGradGuard no_grad;
  GraphInstrumentation::ActiveScope scope(instrumentation, ShadowOrSelf(observer, 0));
  return module.forward({x}).toTensor();
}

DtypePolicy Fp16Emulated() {
  StatusOr<DtypePolicy> policy = FindPolicy("fp16-emulated");
  EXPECT_TRUE(policy.ok());
  return *policy;
}

// The isolated errors of `root`'s ops under `policy` (its PackageObserver), from one
// recorded FP32 forward of `x` and one compared forward, both at probed step 0.
std::vector<IsolatedError> ShadowErrors(jit::Module& root, GraphInstrumentation& instrumentation,
                                        const DtypePolicy& policy, const at::Tensor& x) {
  PackageObserver fp32(Fp32Policy(), true), reduced(policy, true);
  ModuleShadow recorded(ModuleShadow::Mode::kRecord, {0}, Fp32Policy());
  {
    ModuleShadow::ActiveScope active(recorded);
    Forward(root, instrumentation, fp32, x);
  }
  ModuleShadow compared(ModuleShadow::Mode::kCompare, {0}, policy, &recorded);
  {
    ModuleShadow::ActiveScope active(compared);
    Forward(root, instrumentation, reduced, x);
  }
  return compared.Errors();
}

TEST(ModuleShadowTest, NamesTheOpThatMakesTheErrorNotTheOnesThatCarryIt) {
  jit::Module root = MakeCancellingChain();
  const auto instrumentation = GraphInstrumentation::Instrument(root, "m");
  const at::Tensor x = (torch::rand({2, 4}) + 0.5).to(at::kHalf).to(at::kFloat);
  const DtypePolicy policy = Fp16Emulated();
  PackageObserver fp32(Fp32Policy(), true), fp16(policy, true);
  ModuleShadow recorded(ModuleShadow::Mode::kRecord, {0}, Fp32Policy());
  {
    ModuleShadow::ActiveScope active(recorded);
    Forward(root, *instrumentation, fp32, x);
  }
  // Without the shadow the error shows at the end of the chain, made or carried.
  const at::Tensor plain = Forward(root, *instrumentation, fp16, x);
  EXPECT_GT((plain - x * 6.0).abs().max().item<double>(), 0.01);
  ModuleShadow compared(ModuleShadow::Mode::kCompare, {0}, policy, &recorded);
  {
    ModuleShadow::ActiveScope active(compared);
    Forward(root, *instrumentation, fp16, x);
  }
  const std::vector<IsolatedError> errors = compared.Errors();
  ASSERT_FALSE(errors.empty());
  EXPECT_EQ(errors.front().module, "m.second");
  EXPECT_EQ(errors.front().op, "aten::sub");
  EXPECT_DOUBLE_EQ(errors.front().predicted, std::ldexp(1.0, -11));
  EXPECT_GT(errors.front().Excess(), 50);
  // What made the subtraction's input, whose rounding it cancels: the add before it.
  EXPECT_EQ(errors.front().input_maker, (OpSite{"m.second", "aten::add"}));
  for (const IsolatedError& e : errors) {  // the carriers are within a few roundoffs
    if (e.module == "m.third" || e.module == "m.first") {
      EXPECT_LT(e.Excess(), 4) << e.module << " " << e.op;
    }
  }
}

// A softmax fed steep logits (x * 8 + 20) returns their FP16 rounding amplified several
// times: it is predicted its input's roundoff times their magnitude, not made by the op.
// Logits offset by 300, which the softmax cancels, are predicted the roundoff alone.
TEST(ModuleShadowTest, ASoftmaxIsPredictedItsLogitsAmplificationButNotAnOffsetItCancels) {
  jit::Module root("Attention");
  root.register_module("steep", Leaf("Steep", "torch.softmax(x * 8.0 + 20.0, -1)"));
  root.register_module("offset", Leaf("Offset", "torch.softmax(x + 300.0, -1)"));
  root.define(R"JIT(
def forward(self, x):
    return self.steep.forward(x) + self.offset.forward(x)
)JIT");
  const auto instrumentation = GraphInstrumentation::Instrument(root, "m");
  torch::manual_seed(3);
  const at::Tensor x = torch::randn({8, 32}).to(at::kHalf).to(at::kFloat);
  const std::vector<IsolatedError> errors = ShadowErrors(root, *instrumentation, Fp16Emulated(), x);
  const double roundoff = std::ldexp(1.0, -11);
  int softmaxes = 0;
  for (const IsolatedError& e : errors) {
    if (e.op != "aten::softmax") continue;
    ++softmaxes;
    if (e.module == "m.steep") {
      EXPECT_GT(e.error, 2 * roundoff);  // a cause, were it predicted the roundoff alone
      EXPECT_GT(e.predicted, 4 * roundoff);
      EXPECT_LT(e.Excess(), 1);
    } else {
      EXPECT_EQ(e.module, "m.offset");
      EXPECT_EQ(e.predicted, roundoff);
      EXPECT_GT(e.Excess(), 10);
    }
  }
  EXPECT_EQ(softmaxes, 2);
  // One-hot rows move by nothing; logits offset 8 times their spread are cancelled.
  EXPECT_NEAR(SoftmaxAmplification(torch::eye(4) * 100), 0, 1e-6);
  EXPECT_EQ(SoftmaxAmplification(torch::randn({4, 16}) + 300), 0);
  EXPECT_GT(SoftmaxAmplification(torch::randn({4, 16}) * 8 + 20), 4);
}

// A blend's `1 - alpha` of a sigmoid at 0.75 (SVD's time-mix) returns alpha's FP16 rounding
// three times larger relative to its output: it is predicted that amplification, the model's
// own, not made by the op (1.87x the roundoff alone); at alpha 0.9 nine times (3 of FP16's
// 11 bits lost, the rest kept). One of alpha 0.9995 cancels 2000x, so much that no bit of
// its output is left (kLostOutput): the roundoff alone, its cancellation the op's error.
// (The sum of MakeCancellingChain, fed by a sum, is predicted the roundoff alone: the first
// test.)
TEST(ModuleShadowTest, ADifferenceIsPredictedItsInputsAmplificationUnlessASumMadeThem) {
  jit::Module root("Blend");
  root.register_module("mix", Leaf("Mix", "1.0 - torch.sigmoid(x * 0.0 + 1.1)"));
  root.register_module("nine", Leaf("Nine", "1.0 - torch.sigmoid(x * 0.0 + 2.2)"));
  root.register_module("steep", Leaf("Steep", "1.0 - torch.sigmoid(x * 0.0 + 7.6)"));
  root.define(R"JIT(
def forward(self, x):
    return self.mix.forward(x) + self.nine.forward(x) + self.steep.forward(x)
)JIT");
  const auto instrumentation = GraphInstrumentation::Instrument(root, "m");
  const at::Tensor x = torch::ones({2, 4});
  const std::vector<IsolatedError> errors = ShadowErrors(root, *instrumentation, Fp16Emulated(), x);
  const double roundoff = std::ldexp(1.0, -11);
  // TorchScript writes `1.0 - a` as `-a + 1.0`.
  const auto blend = std::find_if(errors.begin(), errors.end(), [](const IsolatedError& e) {
    return e.op == "aten::add" && e.input_maker == OpSite{"m.mix", "aten::neg"};
  });
  ASSERT_NE(blend, errors.end());
  EXPECT_GT(blend->error, 1.5 * roundoff);
  EXPECT_GT(blend->predicted, 3 * roundoff);  // sqrt(1 + 3^2) roundoffs
  EXPECT_LT(blend->Excess(), 1);
  const auto nine = std::find_if(errors.begin(), errors.end(), [](const IsolatedError& e) {
    return e.op == "aten::add" && e.input_maker == OpSite{"m.nine", "aten::neg"};
  });
  ASSERT_NE(nine, errors.end());
  EXPECT_GT(nine->predicted, 9 * roundoff);  // sqrt(1 + 9^2) roundoffs
  EXPECT_LT(nine->Excess(), 1);
  const auto steep = std::find_if(errors.begin(), errors.end(), [](const IsolatedError& e) {
    return e.op == "aten::add" && e.input_maker == OpSite{"m.steep", "aten::neg"};
  });
  ASSERT_NE(steep, errors.end());
  EXPECT_EQ(steep->predicted, roundoff);
  EXPECT_GT(steep->Excess(), 2);  // a cause
}

// A causal conv's padding, `torch.cat(pads + [x])`, takes a list the graph builds by
// list ops, not prim::ListConstruct: its elements have no hook and come in as the policy
// run made them, carrying the cancellation's error. That is not the cat's: not measured.
TEST(ModuleShadowTest, AnOpFedAListItsElementsCannotBeReplacedInIsNotMeasured) {
  jit::Module root("Causal");
  root.register_module("second", Leaf("Second", "(x + 1000.0) - 1000.0"));
  jit::Module pad("Pad");
  pad.define(R"JIT(
def forward(self, x):
    first = x[:, :1]
    pads = [first for _ in range(2)]
    return torch.cat(pads + [x], dim=1) * 2.0
)JIT");
  root.register_module("pad", pad);
  root.define(R"JIT(
def forward(self, x):
    return self.pad.forward(self.second.forward(x))
)JIT");
  const auto instrumentation = GraphInstrumentation::Instrument(root, "m");
  const at::Tensor x = (torch::rand({2, 4}) + 0.5).to(at::kHalf).to(at::kFloat);
  const std::vector<IsolatedError> errors = ShadowErrors(root, *instrumentation, Fp16Emulated(), x);
  ASSERT_FALSE(errors.empty());
  EXPECT_EQ(errors.front().module, "m.second");
  EXPECT_EQ(errors.front().op, "aten::sub");
  for (const IsolatedError& e : errors) EXPECT_NE(e.op, "aten::cat") << e.module << " " << e.Excess();
  // The product after it is fed the recorded cat output: it carries nothing.
  for (const IsolatedError& e : errors) {
    if (e.op == "aten::mul") {
      EXPECT_LT(e.Excess(), 4);
    }
  }
}

// Two subtractions in one forward are two sites: the one that cancels (h + 1000) - 1000
// is not averaged with one whose output is a thousand times larger, which would hide it.
TEST(ModuleShadowTest, TwoCallsOfOneOpInAModuleAreTwoSites) {
  jit::Module root("Mixed");
  root.define(R"JIT(
def forward(self, x):
    return ((x + 1000.0) - 1000.0) + ((x * 1000.0 + 7.0) - 7.0)
)JIT");
  const auto instrumentation = GraphInstrumentation::Instrument(root, "m");
  const at::Tensor x = (torch::rand({2, 4}) + 0.5).to(at::kHalf).to(at::kFloat);
  const std::vector<IsolatedError> errors = ShadowErrors(root, *instrumentation, Fp16Emulated(), x);
  ASSERT_FALSE(errors.empty());
  EXPECT_EQ(errors.front().module, "m");
  EXPECT_EQ(errors.front().op, "aten::sub");
  EXPECT_GT(errors.front().Excess(), 50);
  int subs = 0;
  for (const IsolatedError& e : errors) subs += e.op == "aten::sub";
  EXPECT_EQ(subs, 2);
}

// A float32-only value (a timestep sinusoid's phase, from t.float()) stays float32 under
// FP16 emulation: its FP32 stand-in is held in float32 too, so the sinusoid makes no error
// of its own (it used to be taken as FP16 and named the producer).
// ShadowErrors under FP16 emulation for a root whose input `t` the contract keeps float32
// (a timestep).
std::vector<IsolatedError> TimestepShadowErrors(jit::Module& root, GraphInstrumentation& instrumentation,
                                                const at::Tensor& t) {
  PackageObserver fp32(Fp32Policy(), true), fp16(Fp16Emulated(), true);
  const auto forward = [&](PackageObserver& observer) {
    observer.BeginForward();
    const at::Tensor in = observer.EnterRoot("m", t, /*float32_input=*/true);
    return Forward(root, instrumentation, observer, in);
  };
  ModuleShadow recorded(ModuleShadow::Mode::kRecord, {0}, Fp32Policy());
  {
    ModuleShadow::ActiveScope active(recorded);
    forward(fp32);
  }
  ModuleShadow compared(ModuleShadow::Mode::kCompare, {0}, Fp16Emulated(), &recorded);
  {
    ModuleShadow::ActiveScope active(compared);
    forward(fp16);
  }
  return compared.Errors();
}

TEST(ModuleShadowTest, AFloat32OnlyValuesStandInStaysFloat32UnderFp16Emulation) {
  jit::Module root("TimeEmbed");
  root.define(R"JIT(
def forward(self, t):
    # dtype=6: float32
    args = t.float()[:, None] * torch.arange(8, dtype=6)[None, :] * 100.37
    return torch.sin(args) * 1.0
)JIT");
  const auto instrumentation = GraphInstrumentation::Instrument(root, "m");
  const at::Tensor t = torch::full({2}, 999.0);
  for (const IsolatedError& e : TimestepShadowErrors(root, *instrumentation, t)) {
    EXPECT_LT(e.Excess(), 1) << e.module << " " << e.op;
  }
}

// A timestep rounded to FP16 and then made float32 again (`t.to(like.dtype).float()`, a
// caller's cast that survives) feeds an FP32 sinusoid: the sine of 999 takes the rounding (half a
// unit at 999 is 0.25 rad) at full scale. The rounding is the cast's own precision, so
// only the sine, fed what the run made, shows it; an FP32 op that only carries it (a
// product) does not, and nor does the same sinusoid on the exact timestep.
TEST(ModuleShadowTest, AnFp32OpThatAmplifiesARoundingMadeBeforeItIsWhereTheErrorIsMade) {
  jit::Module root("TimeEmbeds");
  root.register_parameter("w", torch::ones({1}), /*is_buffer=*/false);  // held in FP16
  jit::Module cast("Cast");
  cast.define(R"JIT(
def forward(self, x, like):
    return torch.sin(x.to(like.dtype).float() * 1.0) + x.to(like.dtype).float() * 2.0
)JIT");
  root.register_module("cast", cast);
  root.register_module("exact", Leaf("Exact", "torch.sin(x.float() * 1.0)"));
  root.define("def forward(self, x):\n    return self.cast.forward(x, self.w) + self.exact.forward(x)\n");
  const auto instrumentation = GraphInstrumentation::Instrument(root, "m");
  const at::Tensor t = torch::tensor({{999.0f, 998.7f, 997.3f, 995.1f}, {990.2f, 985.6f, 981.1f, 979.9f}});
  const std::vector<IsolatedError> errors = TimestepShadowErrors(root, *instrumentation, t);
  ASSERT_FALSE(errors.empty());
  EXPECT_EQ(errors.front().module, "m.cast");
  EXPECT_EQ(errors.front().op, "aten::sin");
  EXPECT_GT(errors.front().Excess(), 100);
  for (const IsolatedError& e : errors) {
    if (e.module == "m.exact" || e.op == "aten::mul") {
      EXPECT_LT(e.Excess(), 2) << e.module << " " << e.op;
    }
  }
}

// An index made by rounding a float (`t.to(dtype).long()` of a timestep that FP16 rounds
// from 998.8 to 999; `torch.bucketize` of one that FP16 rounds from 998.2 to 998, in the
// bucket below) takes other rows, as a choice does, but the error is the rounding's: the
// lookup is not a different choice, and it names the op that made its index (so that an
// island covers it).
TEST(ModuleShadowTest, AnIndexRoundedFromAFloatIsNoChoiceAndNamesItsMaker) {
  struct Case {
    std::string index;  // TorchScript of the index made of x
    std::vector<float> timesteps;
    std::string maker;
  };
  for (const Case& c : {Case{"x.to(self.w.dtype).long()", {998.8f, 996.9f, 990.8f, 500.0f}, "aten::to"},
                        Case{"torch.bucketize(x.to(self.w.dtype), self.bounds)",
                             {998.2f, 996.1f, 990.2f, 500.0f},
                             "aten::bucketize"}}) {
    jit::Module root("Lookup");
    root.register_parameter("w", torch::ones({1}), false);
    root.register_parameter("table", torch::randn({1024, 8}), false);
    root.register_buffer("bounds", torch::arange(0, 1024, torch::kFloat));
    root.define("def forward(self, x):\n    return torch.embedding(self.table, " + c.index + ") * 1.0\n");
    const auto instrumentation = GraphInstrumentation::Instrument(root, "m");
    bool seen = false;
    for (const IsolatedError& e : TimestepShadowErrors(root, *instrumentation, torch::tensor(c.timesteps))) {
      if (e.op != "aten::embedding") continue;
      seen = true;
      EXPECT_FALSE(e.chose_differently) << c.maker;
      EXPECT_GT(e.Excess(), 100) << c.maker;
      EXPECT_EQ(e.index_maker, (OpSite{"m", c.maker}));
    }
    EXPECT_TRUE(seen) << c.maker;
  }
}

// A sum that cancels the rounding of a sum through a relay (`(x + 64) * 1.0 - 64`, or
// negated twice, `64 - (64 - x)`) names that sum among its input makers and the relays
// between them, so that keeping it in FP32 keeps the whole chain (in the compute dtype a
// relay would round again); a sum fed an op that combines tensors names no relay.
TEST(ModuleShadowTest, ASumFedARelayOfASumNamesThatSumAndTheRelays) {
  struct Case {
    std::string body;  // TorchScript of the output made of x
    std::string cancel, sum;
    std::vector<std::string> relays;
  };
  for (const Case& c :
       {Case{"(x + 64.0) * 1.0 - 64.0", "aten::sub", "aten::add", {"aten::mul"}},
        Case{"((x + 64.0) * 1.0).neg() + 64.0", "aten::add", "aten::add", {"aten::mul", "aten::neg"}},
        Case{"(x + 64.0) * self.w - 64.0", "aten::sub", "", {}},
        Case{"(x + 64.0) * self.alpha - 64.0", "aten::sub", "", {}}}) {
    jit::Module root("Relay");
    root.register_parameter("w", torch::ones({4}), false);
    root.register_parameter("alpha", torch::ones({}).requires_grad_(), false);  // as loaded
    root.define("def forward(self, x):\n    return " + c.body + "\n");
    const auto instrumentation = GraphInstrumentation::Instrument(root, "m");
    const at::Tensor x = torch::randn({3, 4});
    bool seen = false;
    for (const IsolatedError& e : ShadowErrors(root, *instrumentation, Fp16Emulated(), x)) {
      if (e.op != c.cancel || e.input_makers.empty()) continue;  // not x + 64: no op made x
      seen = true;
      std::vector<std::string> relays;
      for (const OpSite& relay : e.relays) relays.push_back(relay.op);
      EXPECT_EQ(relays, c.relays) << c.body;
      const bool names_the_sum = std::any_of(e.input_makers.begin(), e.input_makers.end(),
                                             [&](const OpSite& m) { return m.op == c.sum; });
      EXPECT_EQ(names_the_sum, !c.sum.empty()) << c.body;
      // Fed a relay of a sum, the cancellation (64x) is the op's error: the roundoff alone
      // is predicted. Fed a product with the model's weights, it is the model's: amplified.
      if (c.sum.empty()) {
        EXPECT_GT(e.predicted, 8 * std::ldexp(1.0, -11)) << c.body;
      } else {
        EXPECT_EQ(e.predicted, std::ldexp(1.0, -11)) << c.body;
      }
    }
    EXPECT_TRUE(seen) << c.body;
  }
}

// An op fed other indices than the FP32 run's (an argmax of sums that FP16 rounds to a
// tie, as token merging ranks near-tied similarities) takes other elements: its error is
// that choice, not a rounding of its own, and it says so; an op fed the same indices does
// not.
TEST(ModuleShadowTest, AnOpFedOtherIndicesThanTheFp32RunSaysItChoseDifferently) {
  jit::Module root("Pick");
  root.define(R"JIT(
def forward(self, x):
    s = (x[:, 0:2] * 1.0).sum(-1)
    picked = torch.index_select(x, 0, torch.argmax(s, 0, True))
    # dtype=4: int64
    first = torch.gather(x, 0, torch.zeros([1, 3], dtype=4))
    return picked * 1.0 + first * 1.0
)JIT");
  const auto instrumentation = GraphInstrumentation::Instrument(root, "m");
  // The first two columns sum to 1 and 1.0001; the third tells the rows apart.
  const at::Tensor x = torch::tensor({{0.5f, 0.5f, -1.0f}, {0.5f, 0.5001f, 1.0f}});
  bool seen_select = false, seen_gather = false;
  for (const IsolatedError& e : ShadowErrors(root, *instrumentation, Fp16Emulated(), x)) {
    if (e.op == "aten::index_select") {
      seen_select = true;
      EXPECT_TRUE(e.chose_differently);
      EXPECT_GT(e.Excess(), 100);
    } else {
      seen_gather = seen_gather || e.op == "aten::gather";
      EXPECT_FALSE(e.chose_differently) << e.module << " " << e.op;
    }
  }
  EXPECT_TRUE(seen_select);
  EXPECT_TRUE(seen_gather);
}

// Under FP8 storage, an op whose FP32 weights exceed the format's largest value (448 for
// e4m3) is where the error is made, whatever its output's error: the weights saturate.
TEST(ModuleShadowTest, WeightsBeyondFp8sRangeMakeTheirOpTheProducer) {
  StatusOr<DtypePolicy> fp8 = FindPolicy("fp8e4m3-bf16");
  ASSERT_TRUE(fp8.ok());
  for (const float largest : {1000.0f, 400.0f}) {
    jit::Module root("Scaled");
    root.register_parameter("w", torch::full({4, 4}, largest / 8).index_put_({0, 0}, largest), false);
    root.define("def forward(self, x):\n    return torch.linear(x, self.w) * 1.0\n");
    const auto instrumentation = GraphInstrumentation::Instrument(root, "m");
    const at::Tensor x = torch::ones({2, 4});
    PackageObserver fp32_observer(Fp32Policy(), true), fp8_observer(*fp8, true);
    ModuleShadow recorded(ModuleShadow::Mode::kRecord, {0}, Fp32Policy());
    {
      ModuleShadow::ActiveScope active(recorded);
      Forward(root, *instrumentation, fp32_observer, x);
    }
    ModuleShadow compared(ModuleShadow::Mode::kCompare, {0}, *fp8, &recorded);
    {
      ModuleShadow::ActiveScope active(compared);
      Forward(root, *instrumentation, fp8_observer, x);
    }
    const std::vector<IsolatedError> errors = compared.Errors();
    ASSERT_FALSE(errors.empty());
    EXPECT_EQ(errors.front().op, "aten::linear");
    if (largest > 448) {
      EXPECT_EQ(errors.front().saturated_weight, largest);
      EXPECT_TRUE(std::isinf(errors.front().Excess()));
    } else {
      EXPECT_EQ(errors.front().saturated_weight, 0);
      EXPECT_FALSE(std::isinf(errors.front().Excess()));
    }
  }
}

// The same for the stored weights of ops that are no weighted ops: a norm's affine weight
// and an embedding's table, passed to a function as arguments (as a scripted nn.GroupNorm
// passes its weight through F.group_norm): the shadow keeps them as the run stores them.
TEST(ModuleShadowTest, ANormsAffineWeightOrAnEmbeddingTableBeyondFp8sRangeMakesItsOpTheProducer) {
  StatusOr<DtypePolicy> fp8 = FindPolicy("fp8e4m3-bf16");
  ASSERT_TRUE(fp8.ok());
  for (const std::string op : {"aten::group_norm", "aten::embedding"}) {
    jit::Module root("Stored");
    root.register_parameter("w", torch::full({4}, 2000.0), false);
    root.register_parameter("table", torch::full({3, 4}, 2000.0), false);
    root.define(R"JIT(
def norm(self, x, w):
    return torch.group_norm(x, 2, w)

def lookup(self, table, rows):
    return torch.embedding(table, rows)

def forward(self, x):
    if )JIT" + std::string(op == "aten::group_norm" ? "True" : "False") +
                R"JIT(:
        return self.norm(x, self.w) * 1.0
    return self.lookup(self.table, torch.arange(2) * 0) * 1.0 + x
)JIT");
    const auto instrumentation = GraphInstrumentation::Instrument(root, "m");
    const std::vector<IsolatedError> errors =
        ShadowErrors(root, *instrumentation, *fp8, torch::arange(8).reshape({2, 4}).to(at::kFloat));
    ASSERT_FALSE(errors.empty()) << op;
    EXPECT_EQ(errors.front().op, op);
    EXPECT_EQ(errors.front().saturated_weight, 2000.0) << op;
  }
}

// Under fp8_weights = "linear-conv" a norm's weight and a linear's bias are held in the
// compute dtype: beyond FP8's range they saturate nothing, and their ops are predicted the
// compute dtype's rounding; the linear's weight is still FP8's.
TEST(ModuleShadowTest, UnderLinearConvFp8OnlyALinearsWeightIsFp8) {
  DtypePolicy fp8 = *FindPolicy("fp8e4m3-bf16");
  fp8.fp8_linear_conv_only = true;
  jit::Module root("Stored");
  root.register_parameter("w", torch::full({4}, 2000.0), false);
  root.register_parameter("lw", torch::full({4, 4}, 0.25), false);
  root.register_parameter("lb", torch::full({4}, 2000.0), false);
  root.define(R"JIT(
def norm(self, x, w):
    return torch.group_norm(x, 2, w)

def forward(self, x):
    return self.norm(x, self.w) * 1.0 + torch.linear(x, self.lw, self.lb) * 1.0
)JIT");
  const auto instrumentation = GraphInstrumentation::Instrument(root, "m");
  bool seen_norm = false, seen_linear = false;
  for (const IsolatedError& e :
       ShadowErrors(root, *instrumentation, fp8, torch::arange(8).reshape({2, 4}).to(at::kFloat))) {
    if (e.op == "aten::group_norm") {
      seen_norm = true;
      EXPECT_EQ(e.saturated_weight, 0);
      EXPECT_EQ(e.predicted, std::ldexp(1.0, -8));
    } else if (e.op == "aten::linear") {
      seen_linear = true;
      EXPECT_EQ(e.saturated_weight, 0);
      EXPECT_GT(e.predicted, std::ldexp(1.0, -8));  // E4M3's
    }
  }
  EXPECT_TRUE(seen_norm);
  EXPECT_TRUE(seen_linear);
  EXPECT_EQ(PredictedError(fp8, "m", "aten::linear", true),
            PredictedError(*FindPolicy("fp8e4m3-bf16"), "m", "aten::linear", true));
  EXPECT_EQ(PredictedError(fp8, "m", "aten::matmul", true), std::ldexp(1.0, -8));
}

TEST(ModuleShadowTest, ANonfiniteOutputFromFiniteInputsIsAnInfiniteExcess) {
  jit::Module root("Overflow");
  root.register_module("big", Leaf("Big", "x * 100000.0"));
  root.register_module("squash", Leaf("Squash", "torch.tanh(x * 0.00001)"));
  root.define("def forward(self, x):\n    return self.squash.forward(self.big.forward(x))\n");
  const auto instrumentation = GraphInstrumentation::Instrument(root, "m");
  const at::Tensor x = torch::ones({2, 4});
  const std::vector<IsolatedError> errors = ShadowErrors(root, *instrumentation, Fp16Emulated(), x);
  ASSERT_FALSE(errors.empty());
  EXPECT_EQ(errors.front().module, "m.big");
  EXPECT_TRUE(std::isinf(errors.front().Excess()));
  // A step that is not probed is neither recorded nor compared.
  PackageObserver fp32(Fp32Policy(), true);
  ModuleShadow elsewhere(ModuleShadow::Mode::kRecord, {3}, Fp32Policy());
  {
    ModuleShadow::ActiveScope active(elsewhere);
    Forward(root, *instrumentation, fp32, x);
  }
  EXPECT_EQ(elsewhere.recorded_calls(), 0);
}

// An RMS norm's x.pow(2) overflows FP16 where the mean of it would not: the mean is fed
// the square non-finite, and it is the pow that makes the non-finite value (both in one
// module: the op is what tells them apart).
TEST(ModuleShadowTest, AnOpFedAValueItsMakerMadeBeyondTheDtypeDoesNotMakeTheNonfinite) {
  jit::Module root("Rms");
  root.register_module("norm", Leaf("Norm", "x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1.0)"));
  root.define("def forward(self, x):\n    return self.norm.forward(x)\n");
  const auto instrumentation = GraphInstrumentation::Instrument(root, "m");
  const at::Tensor x = torch::tensor({{300.0f, 1.0f, 1.0f, 1.0f}, {1.0f, 2.0f, 3.0f, 4.0f}});
  const std::vector<IsolatedError> errors = ShadowErrors(root, *instrumentation, Fp16Emulated(), x);
  ASSERT_FALSE(errors.empty());
  EXPECT_EQ(errors.front().module, "m.norm");
  EXPECT_EQ(errors.front().op, "aten::pow");
  EXPECT_TRUE(std::isinf(errors.front().Excess()));
  for (const IsolatedError& e : errors) {
    if (e.op == "aten::mean") {
      EXPECT_TRUE(std::isfinite(e.Excess())) << e.op;
    }
  }
}

// A norm cancels its input's mean: an input that an op moved by +64 comes back from the
// norm with the rounding of 64 at full scale. The norm's isolated error is the largest,
// and the shadow keeps what made its input: the offset (rms / std) and the op.
TEST(ModuleShadowTest, KeepsANormsInputOffsetAndTheOpThatMadeIt) {
  jit::Module root("DriftThenNorm");
  root.register_module("drift", Leaf("Drift", "x * 1.0 + 64.0"));
  root.register_module("norm", Leaf("Norm", "torch.layer_norm(x, [16])"));
  root.register_module("centred", Leaf("Centred", "torch.layer_norm(x, [16])"));
  root.define(R"JIT(
def forward(self, x):
    return self.norm.forward(self.drift.forward(x)) + self.centred.forward(x - 0.5)
)JIT");
  const auto instrumentation = GraphInstrumentation::Instrument(root, "m");
  torch::manual_seed(0);
  const at::Tensor x = torch::rand({2, 16}).to(at::kHalf).to(at::kFloat);
  const std::vector<IsolatedError> errors = ShadowErrors(root, *instrumentation, Fp16Emulated(), x);
  ASSERT_FALSE(errors.empty());
  const IsolatedError& top = errors.front();
  EXPECT_EQ(top.module, "m.norm");
  EXPECT_EQ(top.op, "aten::layer_norm");
  EXPECT_GT(top.Excess(), 8);
  EXPECT_GT(top.input_offset, kCancellingOffset);
  EXPECT_EQ(top.input_maker, (OpSite{"m.drift", "aten::add"}));
  EXPECT_EQ(top.offset_origin, top.input_maker);  // the scalar it adds is no tensor input
  int centred = 0;
  for (const IsolatedError& e : errors) {
    if (e.module != "m.centred" || e.op != "aten::layer_norm") continue;
    ++centred;
    EXPECT_LT(e.input_offset, 2);  // the norm of a centred input: rms and std alike
    EXPECT_EQ(e.input_maker, (OpSite{"m", "aten::sub"}));
  }
  EXPECT_EQ(centred, 1);
}

// A patch embedding's +1024 carried along a residual stream (`h + branch(h)`) to a norm:
// the norm's input is made by the residual add, its offset by the patch, which the add
// only carried (its larger input holds the sum's magnitude).
TEST(ModuleShadowTest, ANormsOffsetCarriedBySumsIsMadeWhereItEnteredThem) {
  jit::Module root("Stream");
  root.register_module("patch", Leaf("Patch", "x * 2.0 + 1024.0"));
  root.register_module("branch", Leaf("Branch", "torch.tanh(x - 1024.0) * 0.5"));
  root.register_module("norm", Leaf("Norm", "torch.layer_norm(x, [16])"));
  root.define(R"JIT(
def forward(self, x):
    h = self.patch.forward(x)
    h = h + self.branch.forward(h)
    return self.norm.forward(h)
)JIT");
  const auto instrumentation = GraphInstrumentation::Instrument(root, "m");
  torch::manual_seed(0);
  const at::Tensor x = torch::rand({2, 16}).to(at::kHalf).to(at::kFloat);
  const std::vector<IsolatedError> errors = ShadowErrors(root, *instrumentation, Fp16Emulated(), x);
  const auto norm = std::find_if(errors.begin(), errors.end(), [](const IsolatedError& e) {
    return e.module == "m.norm" && e.op == "aten::layer_norm";
  });
  ASSERT_NE(norm, errors.end());
  EXPECT_GT(norm->input_offset, kCancellingOffset);
  EXPECT_EQ(norm->input_maker, (OpSite{"m", "aten::add"}));
  EXPECT_EQ(norm->offset_origin, (OpSite{"m.patch", "aten::add"}));
}

// Records `root` on `x` in FP32, runs it fed that recording under the FP16 emulation (the
// errors of inputs made in the same forward measured too), and hands the comparing shadow
// to `inspect`.
void CompareUnderFp16(jit::Module& root, const at::Tensor& x,
                      const std::function<void(const ModuleShadow&)>& inspect) {
  const auto instrumentation = GraphInstrumentation::Instrument(root, "m");
  const DtypePolicy policy = Fp16Emulated();
  PackageObserver fp32(Fp32Policy(), true), fp16(policy, true);
  ModuleShadow recorded(ModuleShadow::Mode::kRecord, {0}, Fp32Policy());
  {
    ModuleShadow::ActiveScope active(recorded);
    Forward(root, *instrumentation, fp32, x);
  }
  ModuleShadow compared(ModuleShadow::Mode::kCompare, {0}, policy, &recorded);
  compared.MeasureMadeInputs();
  {
    ModuleShadow::ActiveScope active(compared);
    Forward(root, *instrumentation, fp16, x);
  }
  inspect(compared);
}

// A frame difference of features with a large static part (`g - g.mean(1)`, g = x +
// 1000) takes both inputs' rounding: each op that made one is named, in order. An input
// taken only for its shape (`torch.zeros_like(d)`, the padding of a motion branch) is no
// made input, however large its error: nothing of its values reaches the op.
TEST(ModuleShadowTest, NamesEveryInputsMakerAndSkipsAnInputReadOnlyForItsShape) {
  jit::Module root("Motion");
  root.define(R"JIT(
def forward(self, x):
    g = x + 1000.0
    d = g - g.mean(1, keepdim=True)
    return torch.zeros_like(d) + x
)JIT");
  torch::manual_seed(0);
  CompareUnderFp16(root, torch::rand({2, 16}).to(at::kHalf).to(at::kFloat), [](const ModuleShadow& compared) {
    const std::vector<IsolatedError> errors = compared.Errors();
    const auto sub = std::find_if(errors.begin(), errors.end(),
                                  [](const IsolatedError& e) { return e.op == "aten::sub"; });
    ASSERT_NE(sub, errors.end());
    const std::vector<OpSite> makers = {{"m", "aten::add"}, {"m", "aten::mean"}};
    EXPECT_EQ(sub->input_makers, makers);
    // d's error is many times the subtraction's precision, but only zeros_like takes it.
    EXPECT_LT(compared.worst_made_input().excess, 2) << compared.worst_made_input().site.module;
  });
}

// diffusers' attention scores: `baddbmm(torch.empty(...), q, k^T, beta=0)` ignores the
// uninitialised tensor. Its values (other garbage in each run, non-finite at times) are no
// op's error and no made input: before, a BF16 run named `aten::empty` as the producer,
// "a NaN/Inf from finite FP32 inputs".
TEST(ModuleShadowTest, AnUninitialisedTensorThatBaddbmmIgnoresIsNoError) {
  jit::Module root("Scores");
  root.define(R"JIT(
def forward(self, x):
    q = x.unsqueeze(0)
    empty = torch.empty([1, q.size(1), q.size(1)], dtype=q.dtype)
    return torch.baddbmm(empty, q, q.transpose(1, 2), beta=0.0, alpha=0.5) + 1.0
)JIT");
  torch::manual_seed(0);
  CompareUnderFp16(root, torch::rand({4, 16}).to(at::kHalf).to(at::kFloat), [](const ModuleShadow& compared) {
    const std::vector<IsolatedError> errors = compared.Errors();
    ASSERT_FALSE(errors.empty());
    for (const IsolatedError& e : errors) {
      EXPECT_NE(e.op, "aten::empty");
      EXPECT_TRUE(std::isfinite(e.Excess())) << e.op;
    }
    const auto baddbmm = [](const IsolatedError& e) { return e.op == "aten::baddbmm"; };
    EXPECT_NE(std::find_if(errors.begin(), errors.end(), baddbmm), errors.end());
    EXPECT_LT(compared.worst_made_input().excess, 2) << compared.worst_made_input().site.op;
  });
}

// Under FP8 storage a norm's affine weight predicts 2^-2 of error, yet a norm that cancels
// its input's offset returns the compute's rounding of it: that cancellation is judged
// against the compute's precision (FP16 here), or a 49x error would read as 1x.
TEST(ModuleShadowTest, ANormThatCancelsAnOffsetIsJudgedByTheComputeNotItsFp8Weights) {
  jit::Module root("DriftThenAffineNorm");
  root.register_module("drift", Leaf("Drift", "x * 1.0 + 64.0"));
  jit::Module norm("AffineNorm");
  norm.register_parameter("weight", torch::ones({16}), false);
  norm.define("def forward(self, x):\n    return torch.layer_norm(x, [16], self.weight)\n");
  root.register_module("norm", norm);
  root.define(R"JIT(
def forward(self, x):
    return self.norm.forward(self.drift.forward(x))
)JIT");
  const auto instrumentation = GraphInstrumentation::Instrument(root, "m");
  torch::manual_seed(0);
  const at::Tensor x = torch::rand({2, 16}).to(at::kHalf).to(at::kFloat);
  DtypePolicy fp8_storage = Fp16Emulated();  // FP16 compute, the weights stored in FP8
  fp8_storage.storage = WeightStorage::kFp8E5M2;
  const std::vector<IsolatedError> errors = ShadowErrors(root, *instrumentation, fp8_storage, x);
  ASSERT_FALSE(errors.empty());
  const IsolatedError& top = errors.front();
  EXPECT_EQ(top.module, "m.norm");
  EXPECT_GT(top.input_offset, kCancellingOffset);
  EXPECT_EQ(top.predicted, std::ldexp(1.0, -11)) << top.error;
  EXPECT_GT(top.Excess(), 8);
}

// A branch on a value that the policy's rounding flips: the run under the policy calls ops
// the FP32 run never did, and the shadow says where, so that the producer's note can say
// that the runs compute different things from there. At a step that is not probed (here:
// step 0, only step 1 is), where the compared run is not fed FP32 inputs and runs free.
TEST(ModuleShadowTest, SaysWhereTheRunTookAPathTheFp32RunDidNot) {
  torch::manual_seed(0);
  const at::Tensor x = torch::rand({2, 16});
  const at::Tensor h = x * 1.0001;
  const double exact = h.sum().item<double>();
  // Under FP16 emulation h is held in FP16, and so is its sum.
  const double rounded = h.to(at::kHalf).to(at::kFloat).sum().to(at::kHalf).item<double>();
  ASSERT_NE(exact, rounded);
  char threshold[64];
  std::snprintf(threshold, sizeof threshold, "%.9g", (exact + rounded) / 2);
  jit::Module root("Branch");
  root.register_module("a", Leaf("A", "x * 2.0"));
  root.register_module("b", Leaf("B", "x * 3.0"));
  root.define(std::string(R"JIT(
def forward(self, x):
    h = x * 1.0001
    if bool(h.sum() > )JIT") +
              threshold + R"JIT():
        return self.a.forward(h)
    return self.b.forward(h)
)JIT");
  const auto instrumentation = GraphInstrumentation::Instrument(root, "m");
  PackageObserver fp32(Fp32Policy(), true), reduced(Fp16Emulated(), true);
  ModuleShadow recorded(ModuleShadow::Mode::kRecord, {1}, Fp32Policy());
  {
    ModuleShadow::ActiveScope active(recorded);
    Forward(root, *instrumentation, fp32, x);
  }
  ModuleShadow compared(ModuleShadow::Mode::kCompare, {1}, Fp16Emulated(), &recorded);
  {
    ModuleShadow::ActiveScope active(compared);
    Forward(root, *instrumentation, reduced, x);
  }
  const std::string taken = exact > rounded ? "m.b" : "m.a";
  EXPECT_EQ(compared.diverged_at(), taken + " (aten::mul) at step 0");

  ModuleShadow same(ModuleShadow::Mode::kCompare, {1}, Fp32Policy(), &recorded);
  {
    ModuleShadow::ActiveScope active(same);
    Forward(root, *instrumentation, fp32, x);
  }
  EXPECT_EQ(same.diverged_at(), "");
}

TEST(OpIslandsTest, AnEntryWithAnOpSelectsThatOpAtItsModulesOwnLevelOnly) {
  DtypePolicy policy = Fp16Emulated();
  policy.fp32_modules = {"denoiser.blocks.*.attn:aten::*matmul", "decoder"};
  EXPECT_TRUE(MatchesOpIsland(policy, "denoiser.blocks.0.attn", "aten::matmul"));
  EXPECT_FALSE(MatchesOpIsland(policy, "denoiser.blocks.0.attn.q", "aten::matmul"));
  EXPECT_FALSE(MatchesOpIsland(policy, "denoiser.blocks.0.attn", "aten::softmax"));
  EXPECT_FALSE(policy.InFp32Module("denoiser.blocks.0.attn"));  // module islands ignore it
  EXPECT_TRUE(InFp32Op(policy, "decoder.up", "aten::add"));     // inside a module island
  EXPECT_EQ(ModuleOfIslandEntry("denoiser:aten::softmax"), "denoiser");
  EXPECT_EQ(OpOfIslandEntry("denoiser:aten::softmax"), "aten::softmax");
  EXPECT_EQ(OpOfIslandEntry("denoiser.blocks.*"), "");
  // A policy file accepts it as it is.
  StatusOr<PolicySet> set = PresetsAndPoliciesOf(
      "[policy.islands]\nbased_on = \"fp16-emulated\"\nstorage = \"fp32\"\ncompute = \"fp32\"\n"
      "emulate_fp16 = true\nfp32_modules = [\"denoiser:aten::softmax\"]\n",
      "mine.toml");
  ASSERT_TRUE(set.ok()) << set.status().message();
}

// m: logits = x x^T, then softmax over them.
jit::Module LogitsAttention() {
  jit::Module root("Attention");
  root.define(R"JIT(
def forward(self, x):
    logits = torch.matmul(x, x.t())
    return torch.softmax(logits, -1)
)JIT");
  return root;
}

// One forward of `root` under `policy`'s FP16 emulation with its islands.
at::Tensor ForwardWithIslands(jit::Module& root, GraphInstrumentation& instrumentation,
                              const DtypePolicy& policy, const at::Tensor& x) {
  PackageObserver inner(policy, true);
  IslandObserver observer(policy, inner, ModuleObserver(), 0);
  return Forward(root, instrumentation, observer, x);
}

// Logits of about 4e5 for |x| = 300: Inf in FP16.
TEST(OpIslandsTest, KeepsAnOverflowingProductInFp32UpToItsIslandConsumer) {
  jit::Module root = LogitsAttention();
  const auto instrumentation = GraphInstrumentation::Instrument(root, "m");
  const at::Tensor x = torch::full({2, 4}, 300.0);
  auto run = [&](const std::vector<std::string>& islands) {
    DtypePolicy policy = Fp16Emulated();
    policy.fp32_modules = islands;
    return ForwardWithIslands(root, *instrumentation, policy, x);
  };
  EXPECT_TRUE(run({}).isnan().any().item<bool>());
  // The product alone in FP32: its consumer, outside any island, takes it in FP16.
  EXPECT_TRUE(run({"m:aten::matmul"}).isnan().any().item<bool>());
  const at::Tensor both = run({"m:aten::matmul", "m:aten::softmax"});
  EXPECT_TRUE(at::allclose(both, torch::softmax(torch::matmul(x, x.t()), -1)));
}

// With DtypePolicy::fp16_headroom_bits (the advisor's margin check) FP16 overflows that
// many doublings early: logits of 3e4 that the softmax takes in FP16 pass at 65504 and
// overflow at 2 bits less; a value in range rounds as in FP16.
TEST(OpIslandsTest, TheHeadroomCheckOverflowsFp16EarlyAndRoundsTheSame) {
  jit::Module root = LogitsAttention();
  const auto instrumentation = GraphInstrumentation::Instrument(root, "m");
  const at::Tensor x = torch::full({2, 4}, 86.6);  // logits 4 x 86.6^2 = 3.0e4
  auto run = [&](int headroom_bits) {
    DtypePolicy policy = Fp16Emulated();
    policy.fp32_modules = {"m:aten::matmul"};
    policy.fp16_headroom_bits = headroom_bits;
    return ForwardWithIslands(root, *instrumentation, policy, x);
  };
  EXPECT_TRUE(at::isfinite(run(0)).all().item<bool>());
  EXPECT_TRUE(run(2).isnan().any().item<bool>());
  DtypePolicy tighter = Fp16Emulated();
  tighter.fp16_headroom_bits = 2;
  const at::Tensor values = torch::tensor({1.0001, -3.14159, 1000.3, 16000.0});
  EXPECT_TRUE(at::equal(RoundAsEmulatedFp16(values, tighter), values.to(at::kHalf).to(at::kFloat)));
}

// A consumer outside the islands takes a view, or a reshape's copy, of an island output in
// the reduced dtype, as it takes the output itself (Inf here, then NaN), not in FP32.
TEST(OpIslandsTest, AViewOrACopyOfAnIslandOutputIsConvertedWhereItLeaves) {
  for (const char* body : {"torch.softmax(logits.t(), -1)", "torch.softmax(logits.t().contiguous(), -1)"}) {
    jit::Module root("Attention");
    root.define(std::string("def forward(self, x):\n    logits = torch.matmul(x, x.t())\n    return ") +
                body + "\n");
    const auto instrumentation = GraphInstrumentation::Instrument(root, "m");
    DtypePolicy policy = Fp16Emulated();
    policy.fp32_modules = {"m:aten::matmul"};
    EXPECT_TRUE(ForwardWithIslands(root, *instrumentation, policy, torch::full({2, 4}, 300.0))
                    .isnan()
                    .any()
                    .item<bool>())
        << body;
  }
}

// m.big makes 1e5 (Inf in FP16), m.small scales it back to 1. Module islands hand over in
// float32 to an island consumer; anything else outside the islands (an op, the forward's
// return) takes the output in FP16.
TEST(ModuleIslandsTest, AnIslandsOutputStaysFloat32UpToItsIslandConsumer) {
  jit::Module root("Chain");
  root.register_module("big", Leaf("Big", "x * 100000.0"));
  root.register_module("small", Leaf("Small", "x * 0.00001"));
  root.define("def forward(self, x):\n    return self.small.forward(self.big.forward(x))\n");
  const auto instrumentation = GraphInstrumentation::Instrument(root, "m");
  auto run = [&](jit::Module& module, GraphInstrumentation& instrumented,
                 const std::vector<std::string>& islands) {
    DtypePolicy policy = Fp16Emulated();
    policy.fp32_modules = islands;
    PackageObserver inner(policy, true);
    IslandObserver observer(policy, inner, ModuleObserver(), 0);
    return observer.LeaveRoot(Forward(module, instrumented, observer, torch::ones({2, 4})));
  };
  EXPECT_TRUE(at::allclose(run(root, *instrumentation, {"m.big", "m.small"}), torch::ones({2, 4})));
  EXPECT_TRUE(run(root, *instrumentation, {"m.big"}).isinf().all().item<bool>());
  jit::Module alone("Alone");
  alone.register_module("big", Leaf("Big", "x * 100000.0"));
  alone.define("def forward(self, x):\n    return self.big.forward(x)\n");
  const auto alone_instrumentation = GraphInstrumentation::Instrument(alone, "m");
  EXPECT_TRUE(run(alone, *alone_instrumentation, {"m.big"}).isinf().all().item<bool>());
}

// m.norm (an island) takes (x + 64) through a transpose and a copy: the add made its input;
// the product before it did not, and nothing is named without an island.
TEST(IslandInputMakersTest, NamesTheOpOutsideTheIslandsThatMadeAnIslandsInput) {
  jit::Module root("Drift");
  root.register_module("norm", Leaf("Norm", "x - x.mean()"));
  root.define(R"JIT(
def forward(self, x):
    h = x * 2.0
    return self.norm.forward((h + 64.0).t().contiguous())
)JIT");
  const auto instrumentation = GraphInstrumentation::Instrument(root, "m");
  DtypePolicy policy = Fp16Emulated();
  PackageObserver plain(policy, true);
  Forward(root, *instrumentation, plain, torch::ones({2, 4}));
  EXPECT_TRUE(plain.TakeIslandInputMakers().empty());
  policy.fp32_modules = {"m.norm"};
  PackageObserver islands(policy, true);
  for (int forward = 0; forward < 2; ++forward) {
    islands.BeginForward();
    Forward(root, *instrumentation, islands, torch::ones({2, 4}));
  }
  EXPECT_EQ(islands.TakeIslandInputMakers(), std::vector<std::string>{"m:aten::add"});
  EXPECT_TRUE(islands.TakeIslandInputMakers().empty());  // taken
}

// norm(x + 0.2 * temporal(x)), temporal = x + 5120 (a conv whose bias makes the offset):
// with the mul, the add and the norm kept in FP32, the norm's input is made in FP32, yet
// it carries temporal's FP16 rounding of 5120 (half a unit is 2), which the norm returns
// at full scale. The shadow finds it up the FP32 makers, at the mul fed it, and names
// temporal as what rounded it; with the add kept alone, the mul and temporal both (the
// mul rounds 1024); with temporal kept too, nothing is rounded outside FP32.
TEST(ModuleShadowTest, ANormFedAnOffsetRoundedBeforeItsFp32MakersSaysWhereItWasRounded) {
  jit::Module root("TimeMix");
  root.register_module("temporal", Leaf("Temporal", "x + 5120.0"));
  root.register_module("norm", Leaf("Norm", "torch.layer_norm(x, [16])"));
  root.define(R"JIT(
def forward(self, x):
    return self.norm.forward(x + self.temporal.forward(x) * 0.2)
)JIT");
  const auto instrumentation = GraphInstrumentation::Instrument(root, "m");
  torch::manual_seed(0);
  const at::Tensor x = torch::rand({2, 16}).to(at::kHalf).to(at::kFloat);
  auto rounded_norm = [&](const std::vector<std::string>& islands) {
    DtypePolicy policy = Fp16Emulated();
    policy.fp32_modules = islands;
    PackageObserver fp32(Fp32Policy(), true), inner(policy, true);
    IslandObserver observer(policy, inner, ModuleObserver(), 0);
    ModuleShadow recorded(ModuleShadow::Mode::kRecord, {0}, Fp32Policy());
    {
      ModuleShadow::ActiveScope active(recorded);
      Forward(root, *instrumentation, fp32, x);
    }
    ModuleShadow compared(ModuleShadow::Mode::kCompare, {0}, policy, &recorded);
    {
      ModuleShadow::ActiveScope active(compared);
      Forward(root, *instrumentation, observer, x);
    }
    return compared.RoundedCancellingNorm();
  };
  const auto sites = [](const ModuleShadow::RoundedNorm& norm) {
    std::vector<std::string> names;
    for (const IsolatedError& e : norm.rounded_by) names.push_back(e.module + " " + e.op);
    return names;
  };
  const ModuleShadow::RoundedNorm plain = rounded_norm({"m.norm"});
  EXPECT_NE(plain.note.find("from m (aten::add)"), std::string::npos) << plain.note;
  ASSERT_FALSE(plain.rounded_by.empty());
  EXPECT_EQ(sites(plain).front(), "m aten::add");
  const ModuleShadow::RoundedNorm kept = rounded_norm({"m.norm", "m:aten::add", "m:aten::mul"});
  EXPECT_NE(kept.note.find("rounded outside FP32 before m (aten::mul)"), std::string::npos) << kept.note;
  EXPECT_EQ(sites(kept), std::vector<std::string>{"m.temporal aten::add"});
  ASSERT_EQ(kept.rounded_by.size(), 1u);
  EXPECT_GE(kept.rounded_by[0].Excess(), 2.0);  // a cause (kCauseExcess)
  EXPECT_EQ(kept.rounded_by[0].input_maker, (OpSite{"m.temporal", "aten::add"}));
  const ModuleShadow::RoundedNorm add_kept = rounded_norm({"m.norm", "m:aten::add"});
  EXPECT_EQ(sites(add_kept), (std::vector<std::string>{"m aten::mul", "m.temporal aten::add"}));
  EXPECT_EQ(rounded_norm({"m.norm", "m:aten::add", "m:aten::mul", "m.temporal"}).note, "");
}

}  // namespace
}  // namespace framegate
