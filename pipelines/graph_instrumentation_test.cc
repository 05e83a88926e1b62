// Tests of GraphInstrumentation on TorchScript modules compiled in C++ with define().
// Unless a test says otherwise, activations are float32 (batch 2, features 4): x (2, 4),
// and weights (4, 4) in the linear layout (out, in).
#include "pipelines/graph_instrumentation.h"

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <torch/csrc/jit/frontend/resolver.h>
#include <torch/script.h>

namespace framegate {
namespace {

namespace jit = torch::jit;
using Kind = GraphSite::Kind;

// What one observer call saw.
struct ObservedCall {
  bool before;  // Before (true) or After
  std::string path;
  GraphSite site;
  int index;
  at::ScalarType dtype;
};

// Records every call and passes values through.
class RecordingObserver : public GraphObserver {
 public:
  at::Tensor Before(const std::string& path, const GraphSite& site, int input_index,
                    const at::Tensor& value) override {
    calls.push_back({true, path, site, input_index, value.scalar_type()});
    return value;
  }
  at::Tensor After(const std::string& path, const GraphSite& site, int output_index,
                   const at::Tensor& value) override {
    calls.push_back({false, path, site, output_index, value.scalar_type()});
    return value;
  }

  // Paths of the Before (or After) calls of sites whose op is `op`, in call order.
  std::vector<std::string> PathsOf(bool before, const std::string& op) const {
    std::vector<std::string> paths;
    for (const ObservedCall& call : calls) {
      if (call.before == before && call.site.op == op) paths.push_back(call.path);
    }
    return paths;
  }

  std::vector<ObservedCall> calls;
};

// Runs forward as framegate runs instrumented modules: plain executor, no autograd.
at::Tensor Forward(jit::Module& module, const c10::IValue& input) {
  ScopedPlainGraphExecution plain;
  torch::NoGradGuard no_grad;
  return module.forward({input}).toTensor();
}

// FF: y = linear(x, weight).
jit::Module MakeFeedForward(const at::Tensor& weight) {
  jit::Module ff("FF");
  ff.register_parameter("weight", weight, /*is_buffer=*/false);
  ff.define(R"JIT(
def forward(self, x):
    return torch.linear(x, self.weight)
)JIT");
  return ff;
}

// Block: y = ff(x) + x.
jit::Module MakeBlock(const at::Tensor& weight) {
  jit::Module block("Block");
  block.register_module("ff", MakeFeedForward(weight));
  block.define(R"JIT(
def forward(self, x):
    return self.ff.forward(x) + x
)JIT");
  return block;
}

// Root: blocks.0, blocks.1, then relu (sum > 0) or tanh, then doubled twice in a loop.
jit::Module MakeRoot(const jit::Module& block0, const jit::Module& block1) {
  jit::Module blocks("Blocks");
  blocks.register_module("0", block0);
  blocks.register_module("1", block1);
  jit::Module root("Root");
  root.register_module("blocks", blocks);
  root.define(R"JIT(
def forward(self, x):
    x = getattr(self.blocks, "0").forward(x)
    x = getattr(self.blocks, "1").forward(x)
    if bool(x.sum() > 0):
        x = torch.relu(x)
    else:
        x = torch.tanh(x)
    for i in range(2):
        x = x * 2.0
    return x
)JIT");
  return root;
}

// A root whose two blocks share one class (and so one graph per method).
jit::Module MakeRootWithSharedBlocks() {
  const jit::Module block0 = MakeBlock(torch::randn({4, 4}));
  return MakeRoot(block0, block0.deepcopy());
}

jit::Module BlockOf(const jit::Module& root, const std::string& index) {
  return root.attr("blocks").toModule().attr(index).toModule();
}

TEST(GraphInstrumentationTest, SharedClassOpsAreReportedUnderEachInstancePath) {
  jit::Module root = MakeRootWithSharedBlocks();
  ASSERT_EQ(BlockOf(root, "0").get_method("forward").graph(),
            BlockOf(root, "1").get_method("forward").graph());
  const auto instrumentation = GraphInstrumentation::Instrument(root, "root");
  RecordingObserver observer;
  {
    GraphInstrumentation::ActiveScope scope(*instrumentation, observer);
    Forward(root, torch::randn({2, 4}));
  }
  using Paths = std::vector<std::string>;
  EXPECT_EQ(observer.PathsOf(false, "aten::linear"), (Paths{"root.blocks.0.ff", "root.blocks.1.ff"}));
  EXPECT_EQ(observer.PathsOf(false, "aten::add"), (Paths{"root.blocks.0", "root.blocks.1"}));
  // Module calls: Before under the caller's path, After under the callee's.
  EXPECT_EQ(observer.PathsOf(true, "forward"), (Paths{"root", "root.blocks.0", "root", "root.blocks.1"}));
  EXPECT_EQ(observer.PathsOf(false, "forward"),
            (Paths{"root.blocks.0.ff", "root.blocks.0", "root.blocks.1.ff", "root.blocks.1"}));
  EXPECT_EQ(observer.calls.front().site.callee, "blocks.0");
  EXPECT_EQ(observer.calls.front().index, 1);  // input 0 is the module
  EXPECT_EQ(instrumentation->current_path(), "root");
  EXPECT_EQ(instrumentation->coverage().graphs, 3);  // Root, Block and FF forward
}

TEST(GraphInstrumentationTest, PassThroughObserverLeavesOutputsBitIdentical) {
  jit::Module root = MakeRootWithSharedBlocks();
  jit::Module reference = root.clone();  // own classes and graphs: stays uninstrumented
  const auto instrumentation = GraphInstrumentation::Instrument(root, "root");
  const at::Tensor x = torch::randn({2, 4});
  const at::Tensor expected = Forward(reference, x);
  GraphObserver pass_through;
  {
    GraphInstrumentation::ActiveScope scope(*instrumentation, pass_through);
    EXPECT_TRUE(torch::equal(Forward(root, x), expected));
  }
  EXPECT_TRUE(torch::equal(Forward(root, x), expected));  // no active scope
}

// Replaces the outputs of every node (or only of the module call at `only_path`) by ones.
class OnesObserver : public GraphObserver {
 public:
  explicit OnesObserver(std::string only_path = "") : only_path_(std::move(only_path)) {}
  at::Tensor After(const std::string& path, const GraphSite& site, int, const at::Tensor& value) override {
    const bool chosen = only_path_.empty() || (site.kind == Kind::kModuleCall && path == only_path_);
    return chosen ? value * 0 + 1 : value;
  }

 private:
  std::string only_path_;
};

TEST(GraphInstrumentationTest, ReplacedOutputsReachTheModuleOutput) {
  jit::Module root = MakeRootWithSharedBlocks();
  const auto instrumentation = GraphInstrumentation::Instrument(root, "root");
  const at::Tensor x = torch::randn({2, 4});
  OnesObserver every_node;
  {
    GraphInstrumentation::ActiveScope scope(*instrumentation, every_node);
    const at::Tensor y = Forward(root, x);
    EXPECT_TRUE(torch::equal(y, torch::ones_like(y)));
  }
  OnesObserver second_block("root.blocks.1");  // then relu(1), doubled twice: 4
  {
    GraphInstrumentation::ActiveScope scope(*instrumentation, second_block);
    const at::Tensor y = Forward(root, x);
    EXPECT_TRUE(torch::equal(y, torch::full_like(y, 4.0)));
  }
}

TEST(GraphInstrumentationTest, ExceptionInNestedSubmoduleNamesItsPathAndOp) {
  jit::Module root = MakeRootWithSharedBlocks();
  jit::Module ff1 = BlockOf(root, "1").attr("ff").toModule();
  ff1.setattr("weight", ff1.attr("weight").toTensor().to(at::kBFloat16));  // x stays fp32
  const auto instrumentation = GraphInstrumentation::Instrument(root, "root");
  GraphObserver pass_through;
  {
    GraphInstrumentation::ActiveScope scope(*instrumentation, pass_through);
    EXPECT_THROW(Forward(root, torch::randn({2, 4})), std::exception);
  }
  EXPECT_EQ(instrumentation->current_path(), "root.blocks.1.ff");
  EXPECT_EQ(instrumentation->last_op(), "aten::linear");
  instrumentation->ResetStack();
  EXPECT_EQ(instrumentation->current_path(), "root");
  EXPECT_EQ(instrumentation->last_op(), "");
}

TEST(GraphInstrumentationTest, WeightInputMarksParameterOperandsOnly) {
  jit::Module module("Weights");
  module.register_parameter("weight", torch::randn({4, 4}), false);
  module.define(R"JIT(
def forward(self, x):
    a = torch.linear(x, self.weight)
    b = torch.matmul(a, x.t())
    c = torch.mm(self.weight, x.t())
    return b.sum() + c.sum()
)JIT");
  const auto instrumentation = GraphInstrumentation::Instrument(module, "m");
  RecordingObserver observer;
  GraphInstrumentation::ActiveScope scope(*instrumentation, observer);
  Forward(module, torch::randn({2, 4}));
  std::map<std::string, int> weight_inputs;
  std::map<std::string, std::vector<int>> before_indices;
  for (const ObservedCall& call : observer.calls) {
    if (!call.before) continue;
    weight_inputs[call.site.op] = call.site.weight_input;
    before_indices[call.site.op].push_back(call.index);
  }
  EXPECT_EQ(weight_inputs["aten::linear"], 1);
  EXPECT_EQ(weight_inputs["aten::matmul"], -1);  // two activations
  EXPECT_EQ(weight_inputs["aten::mm"], 0);
  EXPECT_EQ(before_indices["aten::linear"], (std::vector<int>{0, 1}));  // data, then weight
}

// addmm and baddbmm take (bias, mat1, mat2): a parameter is found at either product operand.
TEST(GraphInstrumentationTest, WeightInputOfAddmmAndBaddbmmIsTheirParameterOperand) {
  jit::Module module("Weights");
  module.register_parameter("weight", torch::randn({4, 4}), false);
  module.register_parameter("batched", torch::randn({1, 4, 4}), false);
  module.define(R"JIT(
def forward(self, x):
    a = torch.addmm(x, x, self.weight)
    b = torch.baddbmm(x[None], x[None], self.batched)
    c = torch.addmm(x.t(), self.weight, x.t())
    return a.sum() + b.sum() + c.sum()
)JIT");
  const auto instrumentation = GraphInstrumentation::Instrument(module, "m");
  RecordingObserver observer;
  GraphInstrumentation::ActiveScope scope(*instrumentation, observer);
  Forward(module, torch::randn({4, 4}));
  std::vector<std::pair<std::string, int>> weight_inputs;
  for (const ObservedCall& call : observer.calls) {
    if (!call.before || call.index != 0) continue;
    if (call.site.op == "aten::addmm" || call.site.op == "aten::baddbmm") {
      weight_inputs.emplace_back(call.site.op, call.site.weight_input);
    }
  }
  EXPECT_EQ(weight_inputs, (std::vector<std::pair<std::string, int>>{
                               {"aten::addmm", 2}, {"aten::baddbmm", 2}, {"aten::addmm", 1}}));
}

// nn.MultiheadAttention's code in miniature: the fused op inside `if <conditions hold>:`,
// the attention's own ops after it. Instrumented, the branch is not taken: the ops that
// compute the attention are seen. A fused op outside such a branch is left, and counted.
jit::Module MakeAttention(const std::string& forward) {
  jit::Module module("Attention");
  module.register_parameter("qkv_weight", torch::randn({12, 4}), false);
  module.register_parameter("qkv_bias", torch::randn({12}), false);
  module.register_parameter("proj_weight", torch::randn({4, 4}), false);
  module.register_parameter("proj_bias", torch::randn({4}), false);
  module.define(forward);
  return module;
}

at::Tensor OwnAttention(const jit::Module& m, const at::Tensor& x) {
  const auto param = [&](const char* name) { return m.attr(name).toTensor(); };
  const std::vector<at::Tensor> qkv = at::linear(x, param("qkv_weight"), param("qkv_bias")).chunk(3, -1);
  const at::Tensor a = at::softmax(at::bmm(qkv[0], qkv[1].transpose(1, 2)) / 2.0, -1);
  return at::linear(at::bmm(a, qkv[2]), param("proj_weight"), param("proj_bias"));
}

TEST(GraphInstrumentationTest, AFusedFastPathIsSteeredToTheLayersOwnOps) {
  jit::Module module = MakeAttention(R"JIT(
def forward(self, x, fast: bool):
    if fast:
        return torch._native_multi_head_attention(x, x, x, 4, 1, self.qkv_weight, self.qkv_bias,
                                                  self.proj_weight, self.proj_bias, None, False)[0]
    q, k, v = torch.linear(x, self.qkv_weight, self.qkv_bias).chunk(3, -1)
    a = torch.softmax(torch.bmm(q, k.transpose(1, 2)) / 2.0, -1)
    return torch.linear(torch.bmm(a, v), self.proj_weight, self.proj_bias)
)JIT");
  const at::Tensor x = torch::randn({1, 5, 4});
  const at::Tensor own = OwnAttention(module, x);
  const at::Tensor fused = std::get<0>(at::_native_multi_head_attention(
      x, x, x, 4, 1, module.attr("qkv_weight").toTensor(), module.attr("qkv_bias").toTensor(),
      module.attr("proj_weight").toTensor(), module.attr("proj_bias").toTensor(), {}, false));
  ASSERT_TRUE(torch::allclose(fused, own, 1e-4, 1e-5));  // both branches compute one attention

  const auto instrumentation = GraphInstrumentation::Instrument(module, "m");
  EXPECT_EQ(instrumentation->coverage().fused_ops_unfused, 1);
  EXPECT_EQ(instrumentation->coverage().fused_ops_left, 0);
  RecordingObserver observer;
  const GraphInstrumentation::ActiveScope scope(*instrumentation, observer);
  const ScopedPlainGraphExecution plain;
  const torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::allclose(module.forward({x, true}).toTensor(), own, 1e-5, 1e-6));
  EXPECT_EQ(observer.PathsOf(true, "aten::softmax"), std::vector<std::string>{"m"});
  EXPECT_TRUE(observer.PathsOf(true, "aten::_native_multi_head_attention").empty());
}

// A traced layer holds the fused op itself: it is replaced by the ops it computes.
TEST(GraphInstrumentationTest, AFusedOpOutsideABranchIsReplacedByTheOpsItComputes) {
  jit::Module module = MakeAttention(R"JIT(
def forward(self, x):
    return torch._native_multi_head_attention(x, x, x, 4, 1, self.qkv_weight, self.qkv_bias,
                                              self.proj_weight, self.proj_bias, None, False)[0]
)JIT");
  const at::Tensor x = torch::randn({1, 5, 4});
  const at::Tensor own = OwnAttention(module, x);
  const auto instrumentation = GraphInstrumentation::Instrument(module, "m");
  EXPECT_EQ(instrumentation->coverage().fused_ops_unfused, 1);
  EXPECT_EQ(instrumentation->coverage().fused_ops_left, 0);
  RecordingObserver observer;
  const GraphInstrumentation::ActiveScope scope(*instrumentation, observer);
  EXPECT_TRUE(torch::allclose(Forward(module, x), own, 1e-5, 1e-6));
  EXPECT_EQ(observer.PathsOf(true, "aten::softmax"), std::vector<std::string>{"m"});
  EXPECT_TRUE(observer.PathsOf(true, "aten::_native_multi_head_attention").empty());
}

// With a mask the op is left as it is, and counted: its insides are not seen.
TEST(GraphInstrumentationTest, AFusedOpWithAMaskIsLeftAndCounted) {
  jit::Module module = MakeAttention(R"JIT(
def forward(self, x):
    mask = torch.zeros([1, 5]) > 1.0
    return torch._native_multi_head_attention(x, x, x, 4, 1, self.qkv_weight, self.qkv_bias,
                                              self.proj_weight, self.proj_bias, mask, False, True, 1)[0]
)JIT");
  const auto instrumentation = GraphInstrumentation::Instrument(module, "m");
  EXPECT_EQ(instrumentation->coverage().fused_ops_unfused, 0);
  EXPECT_EQ(instrumentation->coverage().fused_ops_left, 1);
  EXPECT_NE(instrumentation->coverage().Summary().find("1 fused op not seen inside"), std::string::npos)
      << instrumentation->coverage().Summary();
  RecordingObserver observer;
  const GraphInstrumentation::ActiveScope scope(*instrumentation, observer);
  Forward(module, torch::randn({1, 5, 4}));
  EXPECT_FALSE(observer.PathsOf(true, "aten::_native_multi_head_attention").empty());
  // One output observed: the attention weights it leaves undefined are no value.
  EXPECT_EQ(observer.PathsOf(false, "aten::_native_multi_head_attention").size(), 1u);
}

TEST(GraphInstrumentationTest, OpsInsideIfAndLoopBlocksAreObserved) {
  jit::Module module("Branches");
  module.define(R"JIT(
def forward(self, x):
    if bool(x.sum() > 0):
        y = torch.relu(x)
    else:
        y = torch.tanh(x)
    for i in range(3):
        y = y * 2.0
    return y
)JIT");
  const auto instrumentation = GraphInstrumentation::Instrument(module, "m");
  RecordingObserver positive, negative;
  {
    GraphInstrumentation::ActiveScope scope(*instrumentation, positive);
    Forward(module, torch::ones({2, 4}));
  }
  {
    GraphInstrumentation::ActiveScope scope(*instrumentation, negative);
    Forward(module, -torch::ones({2, 4}));
  }
  EXPECT_EQ(positive.PathsOf(false, "aten::relu").size(), 1u);
  EXPECT_TRUE(positive.PathsOf(false, "aten::tanh").empty());
  EXPECT_EQ(negative.PathsOf(false, "aten::tanh").size(), 1u);
  EXPECT_EQ(positive.PathsOf(false, "aten::mul"), std::vector<std::string>(3, "m"));
}

// An FP32-island-like observer the other way round: the call of `callee` gets bfloat16
// inputs and returns float32 to its caller.
class BFloat16CallObserver : public RecordingObserver {
 public:
  at::Tensor Before(const std::string& path, const GraphSite& site, int input_index,
                    const at::Tensor& value) override {
    RecordingObserver::Before(path, site, input_index, value);
    return site.kind == Kind::kModuleCall ? value.to(at::kBFloat16) : value;
  }
  at::Tensor After(const std::string& path, const GraphSite& site, int output_index,
                   const at::Tensor& value) override {
    RecordingObserver::After(path, site, output_index, value);
    return site.kind == Kind::kModuleCall ? value.to(at::kFloat) : value;
  }
};

TEST(GraphInstrumentationTest, CastsInBeforeAndAfterChangeTheCalleesDtype) {
  const at::Tensor weight = torch::randn({4, 4}).to(at::kBFloat16);
  jit::Module root("Island");
  root.register_module("ff", MakeFeedForward(weight));
  root.define(R"JIT(
def forward(self, x):
    return self.ff.forward(x) * 2.0
)JIT");
  const auto instrumentation = GraphInstrumentation::Instrument(root, "root");
  const at::Tensor x = torch::randn({2, 4});  // float32: mismatches the weight unless cast
  BFloat16CallObserver observer;
  GraphInstrumentation::ActiveScope scope(*instrumentation, observer);
  const at::Tensor y = Forward(root, x);
  const at::Tensor expected = torch::linear(x.to(at::kBFloat16), weight).to(at::kFloat) * 2.0;
  EXPECT_EQ(y.scalar_type(), at::kFloat);
  EXPECT_TRUE(torch::equal(y, expected));
  for (const ObservedCall& call : observer.calls) {
    if (call.site.op == "aten::linear") {
      EXPECT_EQ(call.dtype, at::kBFloat16) << call.path;
    }
  }
}

// A submodule returning a tuple (nn.MultiheadAttention's (output, weights)): an observer
// sees, and may replace, each tensor in it, as it does a tensor output.
class ScalingCallObserver : public GraphObserver {
 public:
  at::Tensor After(const std::string& path, const GraphSite& site, int output_index,
                   const at::Tensor& value) override {
    if (site.kind != Kind::kModuleCall) return value;
    seen.push_back(path + ":" + std::to_string(output_index));
    return value * 10.0;
  }
  std::vector<std::string> seen;
};

TEST(GraphInstrumentationTest, TheTensorsOfATupleASubmoduleReturnsAreObserved) {
  jit::Module pair("Pair");
  pair.define(R"JIT(
def forward(self, x) -> Tuple[Tensor, Optional[Tensor], int]:
    return x * 2.0, None, 3
)JIT");
  jit::Module root("Root");
  root.register_module("pair", pair);
  root.define(R"JIT(
def forward(self, x):
    a, b, n = self.pair.forward(x)
    return a + float(n)
)JIT");
  const auto instrumentation = GraphInstrumentation::Instrument(root, "root");
  ScalingCallObserver observer;
  const GraphInstrumentation::ActiveScope scope(*instrumentation, observer);
  const at::Tensor x = torch::randn({2, 4});
  EXPECT_TRUE(torch::allclose(Forward(root, x), x * 20.0 + 3.0));
  EXPECT_EQ(observer.seen, std::vector<std::string>{"root.pair:1"});  // element 0, after the 1 output
}

// FP16 emulation: rounds every float32 op output through half.
class HalfRoundingObserver : public GraphObserver {
 public:
  at::Tensor After(const std::string&, const GraphSite& site, int, const at::Tensor& value) override {
    const bool round = site.kind == Kind::kOp && value.scalar_type() == at::kFloat;
    return round ? value.to(at::kHalf).to(at::kFloat) : value;
  }
};

TEST(GraphInstrumentationTest, RoundingOpOutputsMatchesManualRounding) {
  const at::Tensor weight = torch::randn({4, 4});
  jit::Module module = MakeFeedForward(weight);
  module.define(R"JIT(
def scaled(self, x):
    return self.forward(x) * 3.0
)JIT");
  const auto instrumentation = GraphInstrumentation::Instrument(module, "ff");
  const at::Tensor x = torch::randn({2, 4});
  HalfRoundingObserver observer;
  GraphInstrumentation::ActiveScope scope(*instrumentation, observer);
  ScopedPlainGraphExecution plain;
  const at::Tensor y = module.get_method("scaled")({x}).toTensor();
  const auto round = [](const at::Tensor& t) { return t.to(at::kHalf).to(at::kFloat); };
  EXPECT_TRUE(torch::equal(y, round(round(torch::linear(x, weight)) * 3.0)));
}

TEST(GraphInstrumentationTest, ModuleCallWithoutTensorInputsStillEntersTheCallee) {
  jit::Module constant("Constant");
  constant.register_parameter("scale", torch::full({4}, 3.0), false);
  constant.define(R"JIT(
def forward(self, n: int):
    return torch.ones([n]) * self.scale
)JIT");
  jit::Module root("Root");
  root.register_module("constant", constant);
  root.define(R"JIT(
def forward(self, x):
    return x + self.constant.forward(4)
)JIT");
  const auto instrumentation = GraphInstrumentation::Instrument(root, "root");
  RecordingObserver observer;
  GraphInstrumentation::ActiveScope scope(*instrumentation, observer);
  Forward(root, torch::randn({2, 4}));
  EXPECT_EQ(observer.PathsOf(true, "aten::mul"), std::vector<std::string>(2, "root.constant"));
  EXPECT_EQ(observer.PathsOf(false, "forward"), std::vector<std::string>{"root.constant"});
  EXPECT_EQ(observer.PathsOf(false, "aten::add"), std::vector<std::string>{"root"});
}

// Returns copies: same values, other tensors.
class CopyingObserver : public GraphObserver {
 public:
  at::Tensor Before(const std::string&, const GraphSite&, int, const at::Tensor& value) override {
    return value.clone();
  }
  at::Tensor After(const std::string&, const GraphSite&, int, const at::Tensor& value) override {
    return value.clone();
  }
};

TEST(GraphInstrumentationTest, ReplacingObserverKeepsInPlaceWritesThroughViews) {
  jit::Module module("Views");
  module.define(R"JIT(
def forward(self, x):
    y = x * 2.0
    y[0] = y[0] + 1.0
    z = y.view([8])
    z.add_(1.0)
    return y
)JIT");
  jit::Module reference = module.clone();
  const auto instrumentation = GraphInstrumentation::Instrument(module, "m");
  const at::Tensor x = torch::randn({2, 4});
  CopyingObserver observer;
  GraphInstrumentation::ActiveScope scope(*instrumentation, observer);
  EXPECT_TRUE(torch::equal(Forward(module, x), Forward(reference, x)));
  EXPECT_GT(instrumentation->coverage().unobserved_ops, 0);  // select, view, add_
}

// Resolves `double` to a free function compiled apart: calls of it are CallFunction.
// The graph refers to the function by a raw pointer: `unit` must outlive the module.
class FreeFunctionResolver : public jit::Resolver {
 public:
  explicit FreeFunctionResolver(std::shared_ptr<jit::CompilationUnit> unit) : unit_(std::move(unit)) {
    unit_->define(c10::nullopt, "def double(x):\n    return x * 2.0\n", jit::nativeResolver(), nullptr);
  }
  std::shared_ptr<jit::SugaredValue> resolveValue(const std::string& name, jit::GraphFunction& method,
                                                  const jit::SourceRange& range) override {
    if (name == "double") return std::make_shared<jit::FunctionValue>(&unit_->get_function(name));
    return jit::nativeResolver()->resolveValue(name, method, range);
  }
  c10::TypePtr resolveType(const std::string&, const jit::SourceRange&) override { return nullptr; }

 private:
  std::shared_ptr<jit::CompilationUnit> unit_;
};

TEST(GraphInstrumentationTest, CalledFunctionsAreEnteredUnderTheCallersPath) {
  const auto free_functions = std::make_shared<jit::CompilationUnit>();
  jit::Module sub("Sub");
  sub.define("def forward(self, x):\n    return torch.relu(x)\n");
  jit::Module root("Root");
  root.register_module("sub", sub);
  root.define(R"JIT(
def helper(self, x):
    return torch.sigmoid(x)
def forward(self, x):
    y = self.sub.forward(x)
    y = self.helper(y)
    return double(y)
)JIT",
              std::make_shared<FreeFunctionResolver>(free_functions));
  const auto instrumentation = GraphInstrumentation::Instrument(root, "root");
  const InstrumentationCoverage& coverage = instrumentation->coverage();
  EXPECT_EQ(coverage.graphs, 4);        // forward, helper, Sub.forward, double
  EXPECT_EQ(coverage.module_calls, 2);  // sub.forward, self.helper
  EXPECT_EQ(coverage.ops, 3);           // relu, sigmoid, mul
  EXPECT_EQ(coverage.function_calls, 0);
  EXPECT_FALSE(coverage.submodules_inlined);
  EXPECT_EQ(coverage.Summary(), "2 module calls, 3 ops in 4 graphs");
  RecordingObserver observer;
  GraphInstrumentation::ActiveScope scope(*instrumentation, observer);
  Forward(root, torch::randn({2, 4}));
  EXPECT_EQ(observer.PathsOf(false, "aten::relu"), std::vector<std::string>{"root.sub"});
  EXPECT_EQ(observer.PathsOf(false, "aten::sigmoid"), std::vector<std::string>{"root"});
  EXPECT_EQ(observer.PathsOf(false, "helper"), std::vector<std::string>{"root"});
  EXPECT_EQ(observer.PathsOf(false, "aten::mul"), std::vector<std::string>{"root"});
}

TEST(GraphInstrumentationTest, SummaryNamesWhatIsNotSeen) {
  InstrumentationCoverage coverage;
  coverage.graphs = 5;
  coverage.module_calls = 12;
  coverage.ops = 1;
  coverage.function_calls = 1;
  coverage.unobserved_ops = 3;
  coverage.submodules_inlined = true;
  EXPECT_EQ(coverage.Summary(),
            "12 module calls, 1 op in 5 graphs; 1 function call not entered; 3 view or "
            "in-place ops not observed; submodules inlined: their ops are reported under the "
            "caller's path");
}

TEST(GraphInstrumentationTest, FrozenModuleIsReportedAsInlined) {
  jit::Module root = MakeRootWithSharedBlocks();
  root.eval();
  jit::Module frozen = jit::freeze(root);
  const auto instrumentation = GraphInstrumentation::Instrument(frozen, "root");
  EXPECT_TRUE(instrumentation->coverage().submodules_inlined);
  EXPECT_EQ(instrumentation->coverage().module_calls, 0);
  RecordingObserver observer;
  GraphInstrumentation::ActiveScope scope(*instrumentation, observer);
  Forward(frozen, torch::randn({2, 4}));
  EXPECT_EQ(observer.PathsOf(false, "aten::linear"), std::vector<std::string>(2, "root"));
  for (const ObservedCall& call : observer.calls) {
    if (call.site.op == "aten::linear") {
      EXPECT_EQ(call.site.weight_input, 1);
    }
  }
}

TEST(GraphInstrumentationTest, AnInstrumentationSeesOnlyItsOwnSites) {
  jit::Module first = MakeRootWithSharedBlocks();
  jit::Module second = MakeRootWithSharedBlocks();
  const auto first_instrumentation = GraphInstrumentation::Instrument(first, "first");
  const auto second_instrumentation = GraphInstrumentation::Instrument(second, "second");
  RecordingObserver observer;
  GraphInstrumentation::ActiveScope scope(*first_instrumentation, observer);
  Forward(second, torch::randn({2, 4}));
  EXPECT_TRUE(observer.calls.empty());
  Forward(first, torch::randn({2, 4}));
  EXPECT_FALSE(observer.calls.empty());
}

TEST(GraphInstrumentationTest, PlainGraphExecutionRestoresTheOptimizeSetting) {
  const bool before = jit::getGraphExecutorOptimize();
  {
    ScopedPlainGraphExecution plain;
    EXPECT_FALSE(jit::getGraphExecutorOptimize());
  }
  EXPECT_EQ(jit::getGraphExecutorOptimize(), before);
}

}  // namespace
}  // namespace framegate
